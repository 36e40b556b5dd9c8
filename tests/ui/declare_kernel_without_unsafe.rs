// Declaring a typed kernel is a promise about code the compiler cannot see
// (what it reads, writes, and how far it indexes): it needs `unsafe`.
use gpu_sync::{Device, Module, Out};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let m = Module::load(&dev, b"// ptx\0")?;
    // bump_u32 writes x[0..n] for a plain u64 n: not bounded by the view.
    let _bump = m.kernel::<(Out<u32>, u32, u64)>("bump_u32")?;
    Ok(())
}
