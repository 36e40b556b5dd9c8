// A `Len` parameter takes a u64 (checked against every view at launch), not
// a buffer.
use gpu_sync::{Device, DeviceBuffer, LaunchConfig, Len, Module, Out, Stream};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let m = Module::load(&dev, b"// ptx\0")?;
    // SAFETY: bump_u32(unsigned* x, unsigned add, u64 n) reads and writes
    // x[i] for i < n, n a checked `Len`, nothing else.
    let bump = unsafe { m.kernel::<(Out<u32>, u32, Len)>("bump_u32") }?;
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    let y = DeviceBuffer::<u32>::zeroed(&s, 16)?;
    bump.launch(&s, LaunchConfig::new(1, 16), (&mut x, 1u32, &y))?;
    Ok(())
}
