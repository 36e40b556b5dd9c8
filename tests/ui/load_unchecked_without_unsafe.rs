// An image gpu-sync does not validate is loaded only through `unsafe`: the
// driver reads as far as the image's own headers say.
use gpu_sync::{Device, Module};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let _m = Module::load_unchecked(&dev, b"//")?;
    Ok(())
}
