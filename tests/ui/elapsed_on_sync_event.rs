// A sync-only event (CU_EVENT_DISABLE_TIMING) has no elapsed time.
use gpu_sync::{Device, Stream, SyncEvent};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let (a, b) = (SyncEvent::new(&dev)?, SyncEvent::new(&dev)?);
    a.record(&s)?;
    b.record(&s)?;
    let t = a.elapsed(&b)?;
    println!("{t:?}");
    Ok(())
}
