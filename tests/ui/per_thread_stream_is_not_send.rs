// The per-thread default stream names the calling thread's stream: it cannot
// be sent to another thread.
use gpu_sync::Device;

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let pts = dev.per_thread_stream();
    std::thread::spawn(move || pts.synchronize()).join().ok();
    Ok(())
}
