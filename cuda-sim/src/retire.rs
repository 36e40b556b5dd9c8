//! Retiring destroyed streams from the oracle's vector clocks, so an
//! operation costs the same after ten thousand streams came and went as
//! before: clocks, stamps and the host's knowledge stay as small as the set
//! of live actors.
//!
//! A stream's actor entry cannot simply be dropped from a clock: the clock
//! would forget that the stream's operations happen before it, and later
//! accesses would be reported as races with them. Instead, when the host of
//! a session has observed every tick of a destroyed, drained stream `S`
//! (its clock holds `S`'s final tick), `S` gets the next *retirement
//! number* `r` of the session, and the host clock trades `S`'s entry for
//! the session's *retired-streams* entry `RX = r` (`RX` is an actor id that
//! is never a handle: the host actor's id + 8, handles step by 16).
//!
//! Invariant: a clock whose `RX` entry is at least `r` has seen every tick
//! of every stream the session retired with a number up to `r`. It holds
//! for the host clock (its `RX` only grows, each retirement is checked
//! against it, and it never forgets) and survives merges (a pointwise
//! maximum only adds knowledge). So:
//! - an operation of `S` (stamp with `S`'s tick) happens before a later one
//!   whose clock has no entry for `S` when that clock's `RX >= r`
//!   ([`crate::oracle::Stamp::happens_before`] reads `r` from the stamp's
//!   [`RetireCell`], shared with the stream);
//! - any clock whose `RX >= r` may drop its entry for `S` ([`Retirements::prune`]).
//!
//! A stream that never saw the host's `RX` gets no credit for streams it did
//! not see: `RX` travels only through merges, like any other entry. Nothing
//! is forgotten, so no race is missed.
//!
//! The process-wide index from retired stream to its number is needed only
//! to prune clocks; it is swept ([`maybe_sweep`]) so it keeps only streams
//! that some clock that can still be merged (a host's, a stream's, an
//! unobserved destroyed stream's, an event's last record, a graph exec's
//! last launch) names explicitly.

use crate::clock::VClock;
use crate::state::State;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

/// Offset of a session's retired-streams actor from its host actor
/// (handles step by 16, so host + 8 is never a handle).
pub(crate) const RX_OFFSET: u64 = 8;

/// Where a stream's retirement lands, shared by the stream and every stamp
/// of its operations: empty until the stream is retired.
pub(crate) type RetireCell = Arc<OnceLock<Retired>>;

/// A retired stream's number in its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retired {
    /// The session's retired-streams actor.
    pub(crate) rx: u64,
    /// The stream's retirement number (1, 2, … per session).
    pub(crate) number: u64,
}

impl Retired {
    /// Whether `clock` has seen every tick of the retired stream.
    pub(crate) fn covered_by(&self, clock: &VClock) -> bool {
        clock.get(self.rx) >= self.number
    }
}

/// A destroyed, drained stream the host has not yet observed to its last
/// operation.
#[derive(Debug)]
pub(crate) struct Retiring {
    /// Its device (a context synchronization of that device observes it).
    pub(crate) device: i32,
    /// Its final clock (its own entry is its last tick).
    pub(crate) clock: VClock,
    /// Simulated end of its last operation.
    pub(crate) end: u64,
    pub(crate) cell: RetireCell,
}

/// Index of retired streams, by actor id, for pruning clocks.
#[derive(Debug, Default)]
pub(crate) struct Retirements {
    index: HashMap<u64, Retired>,
    /// Size of the index after the last sweep.
    swept: usize,
}

impl Retirements {
    /// Drops from `clock` the entries of retired streams it covers.
    pub(crate) fn prune(&self, clock: &mut VClock) {
        if self.index.is_empty() {
            return;
        }
        clock.retain(|c, actor, _| !self.index.get(&actor).is_some_and(|r| r.covered_by(c)));
    }

    /// Like [`Retirements::prune`], for a shared clock (copied only when an
    /// entry goes).
    fn prune_shared(&self, clock: &mut Arc<VClock>) {
        let covered =
            |c: &VClock| c.entries().iter().any(|(a, _)| self.index.get(a).is_some_and(|r| r.covered_by(c)));
        if covered(clock) {
            self.prune(Arc::make_mut(clock));
        }
    }

    /// Number of retired streams indexed.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }
}

/// The destroyed stream `sid` of `session` has drained and left the
/// simulator with its final `clock`. It is retired now if the host has
/// observed all of it, else when a host synchronization does
/// ([`host_sync`], [`unobserved_on`]).
pub(crate) fn stream_gone(st: &mut State, session: u64, sid: u64, gone: Retiring) {
    if gone.clock.get(sid) == 0 {
        return; // it never queued work: no clock or stamp names it
    }
    let Some(s) = st.sessions.get_mut(&session) else { return };
    s.retiring.insert(sid, gone);
    retire_covered(st, session, &[sid]);
}

/// The merged final clocks, and the latest end, of the destroyed streams
/// on `device` (every session) that no host has observed to their end: a
/// context synchronization observes them, their work being complete.
pub(crate) fn unobserved_on(st: &State, device: i32) -> (VClock, u64) {
    let (mut clock, mut end) = (VClock::default(), 0);
    for s in st.sessions.values() {
        for r in s.retiring.values().filter(|r| r.device == device) {
            clock.merge(&r.clock);
            end = end.max(r.end);
        }
    }
    (clock, end)
}

/// The host of `session` observed work up to `clock`, finishing at
/// simulated `time`: merges it into the host clock, retires the destroyed
/// streams it now fully covers, and prunes.
pub(crate) fn host_sync(st: &mut State, session: u64, clock: &VClock, time: u64) {
    let s = st.session_mut(session);
    s.host_sync(clock, time);
    let candidates: Vec<u64> =
        clock.entries().iter().map(|&(a, _)| a).filter(|a| s.retiring.contains_key(a)).collect();
    retire_covered(st, session, &candidates);
    if let Some(s) = st.sessions.get_mut(&session) {
        st.retirements.prune(&mut s.host_clock);
    }
}

/// Retires those of `candidates` (destroyed, drained streams of `session`)
/// whose final tick the host clock holds.
fn retire_covered(st: &mut State, session: u64, candidates: &[u64]) {
    let Some(s) = st.sessions.get_mut(&session) else { return };
    let mut any = false;
    for sid in candidates {
        let Some(r) = s.retiring.get(sid) else { continue };
        if s.host_clock.get(*sid) < r.clock.get(*sid) {
            continue;
        }
        let Some(Retiring { cell, .. }) = s.retiring.remove(sid) else { continue };
        s.retired += 1;
        let r = Retired { rx: s.host_actor + RX_OFFSET, number: s.retired };
        // Order matters only for readers, and there are none (the state
        // lock is held): RX first keeps the invariant at every step.
        s.host_clock.raise(r.rx, r.number);
        s.host_clock.remove(*sid);
        // The cell is set once: a stream retires once (it left `retiring`).
        let _ = cell.set(r);
        st.retirements.index.insert(*sid, r);
        any = true;
    }
    if any {
        maybe_sweep(st);
    }
}

/// When the index has doubled since the last sweep: prunes every clock that
/// can still be merged into another, then forgets the retired streams none
/// of them names. Amortized O(1) per retirement.
pub(crate) fn maybe_sweep(st: &mut State) {
    let r = &mut st.retirements;
    if r.index.len() <= 2 * r.swept + 1024 {
        return;
    }
    let mut named: HashSet<u64> = HashSet::new();
    let mut note = |c: &VClock| named.extend(c.entries().iter().map(|&(a, _)| a));
    for s in st.sessions.values_mut() {
        r.prune(&mut s.host_clock);
        note(&s.host_clock);
        for x in s.retiring.values_mut() {
            r.prune(&mut x.clock);
            note(&x.clock);
        }
    }
    for s in st.streams.values_mut() {
        r.prune(&mut s.clock);
        note(&s.clock);
    }
    for e in st.events.values_mut() {
        if let Some(rec) = e.rec.as_mut() {
            r.prune_shared(&mut rec.clock);
            note(&rec.clock);
        }
    }
    for x in st.execs.values_mut() {
        if let Some((_, clock, _)) = x.last.as_mut() {
            r.prune_shared(clock);
            note(clock);
        }
    }
    r.index.retain(|sid, _| named.contains(sid));
    r.swept = r.index.len();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_drops_only_covered_entries() {
        let mut r = Retirements::default();
        r.index.insert(0x10, Retired { rx: 0x108, number: 2 });
        r.index.insert(0x20, Retired { rx: 0x108, number: 5 });
        let mut c = VClock::default();
        c.raise(0x10, 3);
        c.raise(0x20, 1);
        c.raise(0x30, 7);
        r.prune(&mut c);
        assert_eq!(c.len(), 3, "no RX entry: nothing is covered");
        c.raise(0x108, 4);
        r.prune(&mut c);
        assert_eq!(c.entries(), &[(0x20, 1), (0x30, 7), (0x108, 4)]);
    }
}
