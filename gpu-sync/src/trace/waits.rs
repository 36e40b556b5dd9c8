//! What a recorded operation waits for ([`OpRecord::after`]): the
//! device-side waits the engine made for it on other streams (a buffer
//! written on one stream and used on another), and the waits it is (a
//! `Stream::wait_stream`, a `Stream::wait` on an event recorded on a
//! tracked stream, a free after uses on other streams), each named by the
//! stream waited for and, once resolved, by the record of the operation
//! whose end it follows.
//!
//! All of it runs only while a device records: the engine notes a wait
//! here ([`note_wait`]) behind the device's recording flag, and each
//! recorded operation's position on its stream ([`note_position`]) from
//! the recorder's hook. The waits of one operation are collected on the
//! submitting thread between its hook's creation ([`clear`]) and its record
//! ([`made_for`]); positions map to records in one process-wide table (the
//! waited-for stream may be another device's, recorded by another
//! recorder), emptied when the last recorder goes ([`forget`]).
//!
//! [`OpRecord::after`]: super::OpRecord::after

use super::WaitSource;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// A wait before (or as) one operation: the stream waited for, on which
/// device, and the position there (the submission whose end it follows),
/// not yet resolved to a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The waiting stream's id.
    pub waiter: u64,
    /// The device of the stream waited for.
    pub device: i32,
    /// The stream waited for.
    pub stream: u64,
    /// Its position: the engine's number of the submission waited for.
    pub at: u64,
}

/// The waits of one operation (at most a few).
pub(crate) type Waits = SmallVec<[Pending; 2]>;

thread_local! {
    /// Waits the engine made on this thread since the current operation's
    /// hook was made.
    static MADE: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
}

/// The most positions kept per stream: a wait for an operation older than
/// this many recorded operations of its stream keeps `op: None`.
const KEEP_PER_STREAM: usize = 4096;
/// The most streams kept: the stream recorded least recently goes first.
const KEEP_STREAMS: usize = 1024;

/// Each recorded stream's last positions, by stream id, oldest first:
/// (position, record id).
type Positions = HashMap<u64, VecDeque<(u64, u64)>>;

/// The process-wide [`Positions`].
fn positions() -> MutexGuard<'static, Positions> {
    static POSITIONS: LazyLock<Mutex<Positions>> = LazyLock::new(Mutex::default);
    POSITIONS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A new operation's hook was made on this thread: waits noted before it
/// belong to no recorded operation.
pub(crate) fn clear() {
    MADE.with(|m| m.borrow_mut().clear());
}

/// The engine made `waiter` wait, device-side, for position `at` of
/// `stream` (of device `device`), for the operation being submitted on this
/// thread.
#[cold]
#[inline(never)]
pub(crate) fn note_wait(waiter: u64, device: i32, stream: u64, at: u64) {
    MADE.with(|m| m.borrow_mut().push(Pending { waiter, device, stream, at }));
}

/// The waits noted on this thread for an operation on `waiter`, taken,
/// one per stream waited for ([`merge`]).
pub(crate) fn made_for(waiter: u64) -> Waits {
    MADE.with(|m| {
        let mut m = m.borrow_mut();
        let mut mine = Waits::new();
        m.iter().filter(|w| w.waiter == waiter).for_each(|w| merge(&mut mine, *w));
        m.retain(|w| w.waiter != waiter);
        mine
    })
}

/// Adds `w` to `waits`, one entry per stream waited for: a later position
/// of a stream already there replaces it (the wait follows both).
pub(crate) fn merge(waits: &mut Waits, w: Pending) {
    if w.stream == w.waiter {
        return;
    }
    match waits.iter_mut().find(|x| x.stream == w.stream) {
        Some(x) => x.at = x.at.max(w.at),
        None => waits.push(w),
    }
}

/// The operation recorded as `op` took position `at` on `stream`.
pub(crate) fn note_position(stream: u64, at: u64, op: u64) {
    let mut p = positions();
    if !p.contains_key(&stream) && p.len() >= KEEP_STREAMS {
        let stale = p.iter().min_by_key(|(_, q)| q.back().map_or(0, |x| x.1)).map(|(s, _)| *s);
        if let Some(s) = stale {
            p.remove(&s);
        }
    }
    let q = p.entry(stream).or_default();
    if q.len() >= KEEP_PER_STREAM {
        q.pop_front();
    }
    // Positions are drawn in order under the engine's lock but noted after
    // it, so two threads on one stream may note them out of order: kept
    // sorted (from the back, where a new one almost always goes).
    let i = q.iter().rposition(|x| x.0 < at).map_or(0, |i| i + 1);
    q.insert(i, (at, op));
}

/// The record of the operation at position `at` of `stream`, if it was
/// recorded (and is still kept).
pub(crate) fn resolve(stream: u64, at: u64) -> Option<u64> {
    let p = positions();
    let q = p.get(&stream)?;
    let i = q.binary_search_by_key(&at, |x| x.0).ok()?;
    q.get(i).map(|x| x.1)
}

/// The last recorder went: no record can name these positions any more.
pub(crate) fn forget() {
    positions().clear();
}

impl From<Pending> for WaitSource {
    fn from(w: Pending) -> WaitSource {
        WaitSource { device: w.device, stream: w.stream, op: None }
    }
}

// The tests use the simulator and the API above this layer, so they sit in
// their own file, which the layer test does not scan.
#[cfg(all(test, feature = "sim"))]
mod tests;
