// A buffer the kernel writes must be passed by &mut.
use gpu_sync::{Device, DeviceBuffer, In, LaunchConfig, Module, Out, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let m = Module::load(&dev, b"// ptx")?;
    let scale = m.kernel::<(In<f32>, Out<f32>, f32, u64)>("scale_f32")?;
    let input = DeviceBuffer::<f32>::zeroed(&s, 16)?;
    let out = DeviceBuffer::<f32>::zeroed(&s, 16)?;
    scale.launch(&s, LaunchConfig::new(1, 16), (&input, &out, 2.0f32, 16u64))?;
    Ok(())
}
