// Only pinned memory gets asynchronous copies.
use gpu_sync::{Device, DeviceBuffer, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let host = vec![1u32; 16];
    let mut buf = DeviceBuffer::<u32>::alloc(&s, 16)?;
    s.upload(&host, &mut buf)?;
    Ok(())
}
