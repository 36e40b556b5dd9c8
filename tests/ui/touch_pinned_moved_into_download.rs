// The pinned buffer moves into the pending download: it cannot be touched.
use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let buf = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    let mut host = PinnedBuffer::<u32>::new(&dev, 16, HostAllocFlags::empty())?;
    let pending = s.download(&buf, host)?;
    host.as_mut_slice()?[0] = 7;
    drop(pending);
    Ok(())
}
