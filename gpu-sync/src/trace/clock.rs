//! The one host clock of every record, and small thread ids.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The host clock of every record, ns: monotonic (`std::time::Instant`,
/// `CLOCK_MONOTONIC` on Linux), counted from its first use in the process.
#[inline]
pub fn now_ns() -> u64 {
    let e = epoch();
    u64::try_from(Instant::now().saturating_duration_since(e).as_nanos()).unwrap_or(u64::MAX)
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD: Cell<u64> = const { Cell::new(0) };
}

/// A small process-unique id of the calling thread (1, 2, … in order of
/// first use), the `thread` of every record.
#[inline]
pub fn thread_id() -> u64 {
    THREAD.with(|t| {
        let id = t.get();
        if id != 0 {
            return id;
        }
        let id = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
        t.set(id);
        id
    })
}

/// The calling thread's name (`std::thread::Thread::name`), or
/// `"thread N"` with its [`thread_id`].
pub fn thread_name() -> String {
    std::thread::current().name().map_or_else(|| format!("thread {}", thread_id()), str::to_owned)
}
