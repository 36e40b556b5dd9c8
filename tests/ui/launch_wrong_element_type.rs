// A launch checks argument types against the kernel's signature.
use gpu_sync::{Device, DeviceBuffer, In, LaunchConfig, Module, Out, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let m = Module::load(&dev, b"// ptx")?;
    let scale = m.kernel::<(In<f32>, Out<f32>, f32, u64)>("scale_f32")?;
    let input = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&s, 16)?;
    scale.launch(&s, LaunchConfig::new(1, 16), (&input, &mut out, 2.0f32, 16u64))?;
    Ok(())
}
