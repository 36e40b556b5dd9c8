//! Stream waits the program marks for the profiler ([`wait_across`]):
//! gpu-sync's recording has each wait operation (`OpKind::Wait`) but not
//! the stream it waits for, so a wait that should show as an arrow between
//! two streams (two devices) is made through [`wait_across`], which notes
//! both ends while a [`Profiler`](super::Profiler) is running. Each
//! profiler takes the waits of its device's streams into its trace.

use super::trace::StreamWait;
use gpu_sync::Stream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Profilers started and not finished.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Marked waits not yet taken by a profiler.
static WAITS: Mutex<Vec<StreamWait>> = Mutex::new(Vec::new());
/// The most marked waits kept untaken (the oldest go first).
const MAX_WAITS: usize = 1 << 16;

/// Counts a running profiler while it lives.
#[derive(Debug)]
pub(crate) struct Active(());

impl Active {
    pub(crate) fn new() -> Active {
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        Active(())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        if ACTIVE.fetch_sub(1, Ordering::SeqCst) == 1 {
            waits().clear();
        }
    }
}

fn waits() -> std::sync::MutexGuard<'static, Vec<StreamWait>> {
    WAITS.lock().unwrap_or_else(|p| p.into_inner())
}

/// `waiter.wait_stream(source)` (later work on `waiter` waits, on the
/// device, for all work submitted so far on `source`), noted for the
/// profiler while one runs: the trace's [`StreamWait`], drawn in the
/// Chrome trace as a flow arrow from `source`'s last span before the wait
/// to `waiter`'s first span after it. [`Trace::merge`](super::Trace::merge)'s
/// example uses it.
///
/// # Errors
/// As `Stream::wait_stream`.
pub fn wait_across(waiter: &Stream, source: &Stream) -> gpu_sync::Result<()> {
    let t_ns = gpu_sync::trace::now_ns();
    waiter.wait_stream(source)?;
    if ACTIVE.load(Ordering::SeqCst) > 0 {
        let mut w = waits();
        if w.len() >= MAX_WAITS {
            w.remove(0);
        }
        w.push(StreamWait {
            t_ns,
            source: (source.device().ordinal(), source.id()),
            waiter: (waiter.device().ordinal(), waiter.id()),
        });
    }
    Ok(())
}

/// Takes the marked waits of `device`'s streams up to `until_ns`; returns
/// those from `since_ns` on (earlier ones fell in a stretch not recorded).
pub(crate) fn take(device: i32, since_ns: u64, until_ns: u64) -> Vec<StreamWait> {
    let mut w = waits();
    let (mine, rest): (Vec<StreamWait>, Vec<StreamWait>) =
        w.drain(..).partition(|x| x.waiter.0 == device && x.t_ns <= until_ns);
    *w = rest;
    mine.into_iter().filter(|x| x.t_ns >= since_ns).collect()
}
