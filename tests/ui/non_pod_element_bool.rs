// bool has invalid bit patterns, so device memory cannot be read back as bool.
use gpu_sync::{Device, DeviceBuffer, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let flags = DeviceBuffer::<bool>::zeroed(&s, 4)?;
    drop(flags);
    Ok(())
}
