// An asynchronous download's result cannot be read before a wait.
use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let buf = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    let host = PinnedBuffer::<u32>::new(&dev, 16, HostAllocFlags::empty())?;
    let pending = s.download(&buf, host)?;
    let first = pending[0];
    println!("{first}");
    Ok(())
}
