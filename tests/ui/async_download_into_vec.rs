// An asynchronous download needs a pinned destination, not a Vec.
use gpu_sync::{Device, DeviceBuffer, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let buf = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    let host = vec![0u32; 16];
    let pending = s.download(&buf, host)?;
    drop(pending);
    Ok(())
}
