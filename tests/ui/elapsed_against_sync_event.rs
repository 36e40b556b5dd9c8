// elapsed is only between two timing events.
use gpu_sync::{Device, Stream, SyncEvent, TimingEvent};

fn main() -> gpu_sync::Result<()> {
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let (a, b) = (TimingEvent::new(&dev)?, SyncEvent::new(&dev)?);
    a.record(&s)?;
    b.record(&s)?;
    let t = a.elapsed(&b)?;
    println!("{t:?}");
    Ok(())
}
