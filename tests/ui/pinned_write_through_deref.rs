// Pinned memory is read through Deref; writing needs as_mut_slice, which
// first waits for uploads still reading it.
use gpu_sync::{Device, HostAllocFlags, PinnedBuffer};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let host = PinnedBuffer::<u32>::new(&dev, 16, HostAllocFlags::empty())?;
    host[0] = 3;
    Ok(())
}
