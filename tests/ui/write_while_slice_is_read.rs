// A read view and a write of the same buffer cannot overlap.
use gpu_sync::{Device, DeviceBuffer, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let mut buf = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    let view = buf.slice(0..8)?;
    s.fill_bytes(&mut buf, 0xff)?;
    let mut other = DeviceBuffer::<u32>::alloc(&s, 8)?;
    s.copy(&view, &mut other)?;
    Ok(())
}
