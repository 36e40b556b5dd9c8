// Device buffers hold plain data only.
use gpu_sync::{Device, DeviceBuffer, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let buf = DeviceBuffer::<String>::alloc(&s, 4)?;
    drop(buf);
    Ok(())
}
