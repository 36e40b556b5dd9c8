// Two writable views of one buffer cannot be alive together.
use gpu_sync::{Device, DeviceBuffer, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let mut buf = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    let mut a = buf.slice_mut(0..8)?;
    let mut b = buf.slice_mut(8..16)?;
    s.fill_bytes(&mut a, 1)?;
    s.fill_bytes(&mut b, 2)?;
    Ok(())
}
