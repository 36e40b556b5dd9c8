//! Retiring destroyed streams from the oracle's vector clocks, so an
//! operation costs the same after ten thousand streams came and went as
//! before: clocks, stamps and the host's knowledge stay as small as the set
//! of live actors — also when no host ever waits for a stream's last
//! operation (a `cuMemFreeAsync` nobody synchronizes with is the usual end
//! of a short-lived stream).
//!
//! A stream's actor entry cannot simply be dropped from a clock: the clock
//! would forget that the stream's operations happen before it, and later
//! accesses would be reported as races with them. Instead a destroyed
//! stream `S` gets *covers* when it drains (its last operation ran), kept
//! in a cell shared by `S`'s stamps ([`RetireCell`]). A cover
//! `(X, n, c)` says: **every clock whose entry for the actor `X` is at least
//! `n` has seen `S`'s operations up to tick `c`**. `X` is never a stream,
//! so no cover ever names an entry that could itself be dropped. Two kinds:
//!
//! - **Drain covers** `(DX, k, T)`: the destroyed streams of a session on
//!   one device get drain numbers `k = 1, 2, …` and `T` is `S`'s final
//!   tick. `DX` (a fresh handle per session and device) has only one
//!   source: the session's *drained clock* of that device, the merge of the
//!   final clocks of every stream that drained there, with `DX = k` raised
//!   after `S`'s final clock is merged. So a clock with `DX ≥ k` descends
//!   from a drained clock that had seen all of `S`. The drained clock is
//!   merged into a host clock only by a context synchronization of the
//!   device ([`unobserved_on`]), which indeed observes all of it: a stream
//!   that drained unobserved is kept as one drain number, not as its clock.
//! - **Host covers** `(RX, r, c)`: `RX` is the session's retired-streams
//!   actor (its host actor + 8; handles step by 16), `r` the next number of
//!   the session's counter, `c` the host clock's entry for `S` at that
//!   moment — possibly below `T` (the host saw part of `S`'s work). It is
//!   given when `S` drains and the host has seen some of it, and again
//!   whenever a host synchronization shows the host more of `S` than its
//!   covers say ([`host_sync`]); the host clock then trades its `S` entry
//!   for `RX = r`. The host clock holds every earlier host cover's knowledge
//!   too (it never forgets), and `RX` reaches other clocks only through
//!   merges (pointwise maxima only add knowledge), so `RX ≥ r` means "seen
//!   `S` up to `c`" wherever it appears.
//!
//! Operations of `S` after `c` are **not** covered by `(RX, r, c)`: a later
//! operation ordered after them only through an event wait carries `S`'s
//! entry explicitly (above `c`), and no cover allows dropping it; an
//! operation ordered after none of them has neither the entry nor a cover
//! and is still reported as a race.
//!
//! With that:
//! - an operation of `S` at tick `t` happens before a later one whose clock
//!   `L` has `L[S] ≥ t`, or has `L[X] ≥ n` for a cover `(X, n, c)` of `S`
//!   with `t ≤ c` ([`crate::oracle::Stamp::happens_before`]); both are true
//!   knowledge, so no race is hidden, and every entry dropped below was
//!   covered, so none is invented;
//! - a clock may drop its entry `(S, v)` when a cover `(X, n, c)` of `S`
//!   has `v ≤ c` and the clock's `X ≥ n`: every `t ≤ v` is still covered,
//!   and for the same clock and its descendants (`X` only grows);
//! - it may also drop it once no stamp of `S` exists any more (the cell's
//!   last strong reference is gone: no pending operation, no access record
//!   names `S`). A clock entry is read only against a stamp of its actor,
//!   and a destroyed stream makes no new stamps.
//!
//! The index from destroyed stream to its cell ([`Retirements`]) is needed
//! only to prune clocks and to give new host covers. It is swept
//! ([`maybe_sweep`], at the end of an entry point, when no clock copy is
//! held outside the state) so it keeps only streams that some clock that
//! can still be merged names explicitly: a host's, a drained clock, a
//! stream's, an event's last record, a graph exec's last launch, a queued
//! operation's stamp.

use crate::clock::VClock;
use crate::state::State;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

/// Offset of a session's retired-streams actor from its host actor
/// (handles step by 16, so host + 8 is never a handle).
pub(crate) const RX_OFFSET: u64 = 8;

/// One cover of a destroyed stream: every clock whose `actor` entry is at
/// least `number` has seen the stream's operations up to `tick`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cover {
    /// A drained clock's actor (`DX`) or a host's retired-streams actor (`RX`).
    pub(crate) actor: u64,
    pub(crate) number: u64,
    pub(crate) tick: u64,
}

impl Cover {
    fn covers(&self, clock: &VClock, tick: u64) -> bool {
        tick <= self.tick && clock.get(self.actor) >= self.number
    }
}

/// The covers of one stream (empty while it lives; a few once destroyed:
/// one drain cover, and a host cover per time a host saw more of it).
#[derive(Debug, Default)]
pub(crate) struct Covers(Vec<Cover>);

impl Covers {
    /// Whether `clock` has seen the stream's operations up to `tick`
    /// through one of the covers.
    pub(crate) fn cover(&self, clock: &VClock, tick: u64) -> bool {
        self.0.iter().any(|c| c.covers(clock, tick))
    }
}

/// A stream's covers, shared by the stream and every stamp of its
/// operations.
pub(crate) type RetireCell = Arc<Mutex<Covers>>;

/// Reads or writes a cell (a poisoned lock is still consistent: covers are
/// only pushed).
pub(crate) fn lock(cell: &Mutex<Covers>) -> MutexGuard<'_, Covers> {
    cell.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One session's destroyed streams of one device, as one clock.
#[derive(Debug)]
pub(crate) struct Drained {
    /// Its actor (`DX`).
    actor: u64,
    /// Streams drained so far (the last drain number).
    count: u64,
    /// Merged final clocks, with `DX = count` (pruned).
    clock: VClock,
    /// Simulated end of the last operation of any of them.
    end: u64,
    /// How many of them the host has not seen to their final tick.
    unobserved: usize,
}

impl Drained {
    /// The drained streams the host has not observed to their last tick.
    pub(crate) fn unobserved(&self) -> usize {
        self.unobserved
    }

    /// Entries of the drained clock.
    pub(crate) fn clock_len(&self) -> usize {
        self.clock.len()
    }
}

/// A destroyed, drained stream still named by some clock.
#[derive(Debug)]
struct Dead {
    /// Its covers while a stamp of it exists.
    cell: Weak<Mutex<Covers>>,
    session: u64,
    device: i32,
    /// Its drain number, and its final tick.
    drain: u64,
    last: u64,
    /// Whether its session's host has seen it to its final tick.
    observed: bool,
}

/// Index of destroyed streams, by actor id, for pruning clocks.
#[derive(Debug, Default)]
pub(crate) struct Retirements {
    index: HashMap<u64, Dead>,
    /// Size of the index after the last sweep.
    swept: usize,
}

impl Retirements {
    /// Whether `clock` may drop its entry `(actor, tick)` (see the module
    /// docs).
    fn droppable(&self, clock: &VClock, actor: u64, tick: u64) -> bool {
        let Some(dead) = self.index.get(&actor) else { return false };
        match dead.cell.upgrade() {
            None => true,
            Some(cell) => lock(&cell).cover(clock, tick),
        }
    }

    /// Drops from `clock` the entries of destroyed streams it may drop.
    pub(crate) fn prune(&self, clock: &mut VClock) {
        if self.index.is_empty() {
            return;
        }
        clock.retain(|c, actor, tick| !self.droppable(c, actor, tick));
    }

    /// Like [`Retirements::prune`], for a shared clock (copied only when an
    /// entry goes).
    fn prune_shared(&self, clock: &mut Arc<VClock>) {
        if clock.entries().iter().any(|&(a, t)| self.droppable(clock, a, t)) {
            self.prune(Arc::make_mut(clock));
        }
    }

    /// Number of destroyed streams indexed.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }
}

/// The destroyed stream `sid` of `session` on `device` has drained and left
/// the simulator with its final `clock`, its last operation ending at
/// simulated `end`: gives it its drain cover, and a host cover for what the
/// host has seen of it.
pub(crate) fn stream_gone(
    st: &mut State,
    session: u64,
    device: i32,
    sid: u64,
    clock: &VClock,
    end: u64,
    cell: &RetireCell,
) {
    let last = clock.get(sid);
    if last == 0 {
        return; // it never queued work: no clock or stamp names it
    }
    let Some(has) = st.sessions.get(&session).map(|s| s.drained.contains_key(&device)) else { return };
    let fresh = if has { 0 } else { st.new_handle() };
    let Some(s) = st.sessions.get_mut(&session) else { return };
    let d = s.drained.entry(device).or_insert_with(|| Drained {
        actor: fresh,
        count: 0,
        clock: VClock::default(),
        end: 0,
        unobserved: 0,
    });
    d.count += 1;
    d.clock.merge(clock);
    d.clock.raise(d.actor, d.count);
    d.end = d.end.max(end);
    let mut covers = lock(cell);
    covers.0.push(Cover { actor: d.actor, number: d.count, tick: last });
    let seen = s.host_clock.get(sid);
    if seen > 0 {
        s.retired += 1;
        let rx = s.host_actor + RX_OFFSET;
        // RX first: the host clock holds its knowledge of `sid` throughout.
        s.host_clock.raise(rx, s.retired);
        s.host_clock.remove(sid);
        covers.0.push(Cover { actor: rx, number: s.retired, tick: seen });
    }
    drop(covers);
    let observed = seen >= last;
    if !observed {
        d.unobserved += 1;
    }
    let drain = d.count;
    st.retirements
        .index
        .insert(sid, Dead { cell: Arc::downgrade(cell), session, device, drain, last, observed });
    st.retirements.prune(&mut d.clock);
}

/// The merged drained clocks of `device` (every session), and the latest
/// end of their streams: a context synchronization observes them, their
/// work being complete.
pub(crate) fn unobserved_on(st: &State, device: i32) -> (VClock, u64) {
    let (mut clock, mut end) = (VClock::default(), 0);
    for d in st.sessions.values().filter_map(|s| s.drained.get(&device)) {
        clock.merge(&d.clock);
        end = end.max(d.end);
    }
    (clock, end)
}

/// The host of `session` observed work up to `clock`, finishing at
/// simulated `time`: merges it into the host clock, gives a host cover to
/// every destroyed stream it now sees further than its covers say, counts
/// the destroyed streams now observed to their end, and prunes.
pub(crate) fn host_sync(st: &mut State, session: u64, clock: &VClock, time: u64) {
    st.session_mut(session);
    let Some(s) = st.sessions.get_mut(&session) else { return };
    s.host_sync(clock, time);
    for d in s.drained.values_mut() {
        if s.host_clock.get(d.actor) >= d.count {
            d.unobserved = 0; // a context synchronization saw all of them
        }
    }
    let rx = s.host_actor + RX_OFFSET;
    for &(sid, _) in clock.entries() {
        let Some(dead) = st.retirements.index.get_mut(&sid) else { continue };
        let seen = s.host_clock.get(sid);
        if dead.session == session && !dead.observed && seen >= dead.last {
            dead.observed = true;
            if let Some(d) = s.drained.get_mut(&dead.device)
                && s.host_clock.get(d.actor) < dead.drain
            {
                d.unobserved = d.unobserved.saturating_sub(1);
            }
        }
        let Some(cell) = dead.cell.upgrade() else { continue }; // no stamp left: pruned below
        let mut covers = lock(&cell);
        if !covers.cover(&s.host_clock, seen) {
            s.retired += 1;
            s.host_clock.raise(rx, s.retired);
            covers.0.push(Cover { actor: rx, number: s.retired, tick: seen });
        }
    }
    st.retirements.prune(&mut s.host_clock);
}

/// When the index has doubled since the last sweep: prunes every clock that
/// can still be merged into another, then forgets the destroyed streams
/// none of them names. Amortized O(1) per destroyed stream. Called at the
/// end of an entry point, when no copy of a clock is held outside the
/// state (a copy taken before a sweep could name a stream the sweep
/// forgot, which no prune would then drop).
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
        for d in s.drained.values_mut() {
            r.prune(&mut d.clock);
            note(&d.clock);
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
    for o in st.ops.values() {
        note(&o.stamp.clock);
    }
    r.index.retain(|sid, _| named.contains(sid));
    r.swept = r.index.len();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dead(cell: &RetireCell, last: u64) -> Dead {
        Dead { cell: Arc::downgrade(cell), session: 1, device: 0, drain: 1, last, observed: false }
    }

    #[test]
    fn pruning_drops_only_covered_entries() {
        // 0x10: seen by RX 0x108 >= 2 up to tick 3 (its whole work);
        // 0x20: seen by RX >= 5 only up to tick 1 of its 4.
        let mut r = Retirements::default();
        let (a, b): (RetireCell, RetireCell) = Default::default();
        lock(&a).0.push(Cover { actor: 0x108, number: 2, tick: 3 });
        lock(&b).0.push(Cover { actor: 0x108, number: 5, tick: 1 });
        r.index.insert(0x10, dead(&a, 3));
        r.index.insert(0x20, dead(&b, 4));
        let mut c = VClock::default();
        c.raise(0x10, 3);
        c.raise(0x20, 1);
        c.raise(0x30, 7);
        r.prune(&mut c);
        assert_eq!(c.len(), 3, "no RX entry: nothing is covered");
        c.raise(0x108, 5);
        let mut beyond = c.clone();
        beyond.raise(0x20, 2);
        r.prune(&mut c);
        assert_eq!(c.entries(), &[(0x30, 7), (0x108, 5)]);
        r.prune(&mut beyond);
        assert_eq!(beyond.entries(), &[(0x20, 2), (0x30, 7), (0x108, 5)], "tick 2 of 0x20 is not covered");
    }

    #[test]
    fn an_entry_without_stamps_is_dropped() {
        let mut r = Retirements::default();
        let cell: RetireCell = Default::default();
        r.index.insert(0x10, dead(&cell, 9));
        let mut c = VClock::default();
        c.raise(0x10, 9);
        r.prune(&mut c);
        assert_eq!(c.len(), 1, "a stamp of 0x10 exists: its entry stays");
        drop(cell);
        r.prune(&mut c);
        assert_eq!(c.len(), 0);
    }
}
