// The kernels crate reaches its kernels only through wrappers that check
// every length against the buffers: no getter hands out a typed kernel whose
// length argument is unchecked (`bump_kernel().launch(.., (&mut x16, 1, 1024))`
// wrote 1008 elements past a 16-element view).
use gpu_sync::{Device, DeviceBuffer, LaunchConfig, Stream};
use kernels::Kernels;

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let k = Kernels::load(&dev)?;
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    k.bump_kernel().launch(&s, LaunchConfig::new(4, 256), (&mut x, 1u32, 1024u64))?;
    let _ = k.add_kernel();
    let _ = k.scale_kernel();
    Ok(())
}
