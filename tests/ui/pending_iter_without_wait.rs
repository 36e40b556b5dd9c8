// A Pending does not hand out its buffer's contents.
use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let buf = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    let pending = s.download(&buf, PinnedBuffer::new(&dev, 16, HostAllocFlags::empty())?)?;
    let total: u32 = pending.iter().sum();
    println!("{total}");
    Ok(())
}
