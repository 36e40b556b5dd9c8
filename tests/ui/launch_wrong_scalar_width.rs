// A scalar parameter takes exactly its type: an f64 is not a float.
use gpu_sync::{Device, DeviceBuffer, In, LaunchConfig, Len, Module, Out, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let m = Module::load(&dev, b"// ptx\0")?;
    // SAFETY: scale_f32(const float* in, float* out, float a, u64 n) reads
    // `in` and stores to `out` at i < n, n a checked `Len`, nothing else.
    let scale = unsafe { m.kernel::<(In<f32>, Out<f32>, f32, Len)>("scale_f32") }?;
    let input = DeviceBuffer::<f32>::zeroed(&s, 16)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&s, 16)?;
    scale.launch(&s, LaunchConfig::new(1, 16), (&input, &mut out, 2.0f64, 16u64))?;
    Ok(())
}
