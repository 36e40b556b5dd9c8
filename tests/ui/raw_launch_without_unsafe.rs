// A kernel without a declared contract is launched only through `unsafe`.
use gpu_sync::{Device, DeviceBuffer, LaunchConfig, Module, Out, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let m = Module::load(&dev, b"// ptx\0")?;
    let bump = m.raw_kernel("bump_u32")?;
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    bump.launch::<(Out<u32>, u32, u64), _>(&s, LaunchConfig::new(1, 16), (&mut x, 1u32, 16u64))?;
    Ok(())
}
