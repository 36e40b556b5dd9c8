//! Hello, GPU: device → stream → buffers → a kernel → download → print.
use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};
use kernels::Kernels;

fn main() -> Result<(), gpu_sync::Error> {
    // The GPU when the CUDA driver loads, else the simulator cuda-sim
    // (GPU_SYNC_DRIVER=sim|cuda|auto overrides).
    if gpu_sync::select_driver()?.is_sim() {
        kernels::register_sim_kernels(); // the CPU versions of our kernels
    }
    let device = Device::get(0)?;
    let stream = Stream::new(&device)?; // a non-blocking stream
    let kernels = Kernels::load(&device)?; // the kernels crate's fatbins

    let x: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&stream, &x)?;
    let y = DeviceBuffer::from_slice(&stream, &[100.0f32; 8])?;
    let mut sum = DeviceBuffer::<f32>::alloc(&stream, 8)?;
    kernels.add(&stream, &x, &y, &mut sum)?; // queued: sum = x + y

    // An asynchronous copy into pinned memory; the result is `Pending`
    // until a wait that covers the copy hands it over.
    let host = PinnedBuffer::<f32>::new(&device, 8, HostAllocFlags::empty())?;
    let host = stream.download(&sum, host)?.wait()?;
    println!("{}: x + y = {:?}", device.name()?, &host[..]);
    Ok(())
}
