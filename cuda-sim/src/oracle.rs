//! The race oracle: per-allocation access histories checked with vector
//! clocks, after PyTorch's CUDA sanitizer (CSAN).
//!
//! Every access carries a [`Stamp`]: the actor (a stream or a session's
//! host), the actor's tick for that operation, and the actor's vector clock
//! as it was when the operation was issued. Access `a` happens before access
//! `b` iff `b.clock[a.actor] >= a.tick`, or `a`'s stream was retired and
//! a cover of `a`'s destroyed stream says `b`'s clock has seen `a.tick` (`crate::retire`). Two accesses to overlapping bytes,
//! at least one a write, neither happening before the other, are a race.

use crate::clock::VClock;
use crate::report::{Access, Actor, RaceKind, RaceReport};
use crate::retire::RetireCell;
use std::sync::Arc;

/// Records per allocation past which the oracle says, once per process,
/// that checking has become slow. Nothing is ever dropped: an oracle that
/// forgets is not one.
const MANY_RECORDS: usize = 1 << 16;

/// Who issued an operation, and what it had seen.
#[derive(Debug, Clone)]
pub(crate) struct Stamp {
    /// Global actor id (a stream id, or a session's host actor id).
    pub(crate) actor: u64,
    /// The actor's tick for this operation.
    pub(crate) tick: u64,
    /// The actor's clock when the operation was issued (including `tick`).
    pub(crate) clock: Arc<VClock>,
    /// How to name the actor in reports.
    pub(crate) label: Actor,
    /// The stream's covers, given once it is destroyed and drained (`None`
    /// for a host actor, which never retires).
    pub(crate) retired: Option<RetireCell>,
}

impl Stamp {
    /// Whether the operation stamped `self` happens before the one stamped
    /// `later`.
    pub(crate) fn happens_before(&self, later: &Stamp) -> bool {
        later.clock.get(self.actor) >= self.tick
            || self.retired.as_ref().is_some_and(|c| crate::retire::lock(c).cover(&later.clock, self.tick))
    }

    /// Whether both stamps are the same operation (nodes of one graph
    /// launch share a stamp).
    pub(crate) fn same_op(&self, other: &Stamp) -> bool {
        self.actor == other.actor && self.tick == other.tick
    }

    /// Whether neither operation happens before the other.
    pub(crate) fn concurrent(&self, other: &Stamp) -> bool {
        !self.same_op(other) && !self.happens_before(other) && !other.happens_before(self)
    }
}

/// One access in an allocation's history.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) stamp: Stamp,
    /// First byte (absolute address).
    pub(crate) start: u64,
    /// One past the last byte.
    pub(crate) end: u64,
    pub(crate) write: bool,
    /// Whether the access is a free of the whole allocation.
    pub(crate) free: bool,
    /// The operation's description.
    pub(crate) op: Arc<str>,
}

impl Record {
    fn overlaps(&self, other: &Record) -> bool {
        self.start < other.end && other.start < self.end
    }

    fn conflicts(&self, other: &Record) -> bool {
        self.overlaps(other) && (self.write || other.write)
    }

    /// The public description of this access.
    pub(crate) fn access(&self) -> Access {
        Access {
            actor: self.stamp.label,
            op: self.op.to_string(),
            addr: self.start,
            len: self.end - self.start,
            write: self.write,
        }
    }

    /// A report of `self` (first) against `later`.
    pub(crate) fn report(&self, later: &Record, kind: RaceKind, allocation: u64) -> RaceReport {
        RaceReport { kind, allocation, first: self.access(), second: later.access() }
    }
}

/// Whether `new`, recorded after `old`, makes `old` redundant: every later
/// access that would race with `old` races with `new` too. That holds when
/// `new` covers `old`'s bytes, `old` happens before `new`, and `new` is a
/// write or `old` a read. (A later access `x` cannot happen before `new`,
/// which was issued first; if `new` happened before `x`, so would `old`. So
/// `x` concurrent with `old` is concurrent with `new`, overlaps it, and one
/// of them writes.) A read after a write does not retire the write: a later
/// read would race with the write, not with the read.
///
/// With it the history keeps, per actor and per range it touched, at most
/// its last write and its reads since (FastTrack's epochs, at byte-range
/// precision): a program that touches the same buffers or views over and
/// over keeps a bounded history however long it runs.
fn retires(new: &Record, old: &Record) -> bool {
    new.start <= old.start
        && old.end <= new.end
        && (new.write || !old.write)
        && !old.free
        && old.stamp.happens_before(&new.stamp)
}

/// Checks `new` against `history` (the allocation at `base`), returns the
/// races found, then adds `new` and drops the records it retires
/// ([`retires`]). Exact: nothing else is ever dropped.
pub(crate) fn check_and_record(
    history: &mut Vec<Record>,
    new: Record,
    base: u64,
) -> Vec<(Stamp, RaceReport)> {
    let mut out = Vec::new();
    for r in history.iter() {
        if r.conflicts(&new) && r.stamp.concurrent(&new.stamp) {
            let kind = if r.free || new.free { RaceKind::UnorderedFree } else { RaceKind::DataRace };
            out.push((r.stamp.clone(), r.report(&new, kind, base)));
        }
    }
    history.retain(|r| !retires(&new, r));
    history.push(new);
    if history.len() == MANY_RECORDS {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            log::warn!(
                "cuda-sim: allocation {base:#x} holds {MANY_RECORDS} access records (as many distinct ranges \
                 touched since they were last overwritten); every access is still checked against all of them"
            );
        });
    }
    out
}

/// Checks `new` against a pending operation's declared access `pending`
/// (not yet executed), without recording anything.
pub(crate) fn check_pending(pending: &Record, new: &Record, base: u64) -> Option<RaceReport> {
    if pending.conflicts(new) && pending.stamp.concurrent(&new.stamp) {
        let kind = if pending.free || new.free { RaceKind::UnorderedFree } else { RaceKind::DataRace };
        Some(pending.report(new, kind, base))
    } else {
        None
    }
}

/// The report for `access` to an allocation already freed by `free`.
pub(crate) fn freed_access(free: &Record, access: &Record, base: u64) -> RaceReport {
    let kind = if access.free {
        RaceKind::DoubleFree
    } else if free.stamp.happens_before(&access.stamp) {
        RaceKind::UseAfterFree
    } else {
        RaceKind::UnorderedFree
    };
    free.report(access, kind, base)
}

/// A key identifying the pair of operations in a report, to report each
/// pair once.
pub(crate) fn pair_key(a: &Stamp, b: &Stamp, base: u64) -> (u64, u64, u64, u64, u64) {
    let (x, y) = ((a.actor, a.tick), (b.actor, b.tick));
    let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
    (lo.0, lo.1, hi.0, hi.1, base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(actor: u64, tick: u64, seen: &[(u64, u64)]) -> Stamp {
        let mut c = VClock::default();
        for &(a, t) in seen {
            for _ in 0..t {
                c.tick(a);
            }
        }
        Stamp { actor, tick, clock: Arc::new(c), label: Actor::Stream(actor as u32), retired: None }
    }

    fn rec(s: Stamp, start: u64, end: u64, write: bool) -> Record {
        Record { stamp: s, start, end, write, free: false, op: Arc::from("op") }
    }

    #[test]
    fn unordered_writes_race_and_ordered_ones_do_not() {
        let mut h = Vec::new();
        // stream 1 writes at tick 1.
        assert!(check_and_record(&mut h, rec(stamp(1, 1, &[(1, 1)]), 0, 8, true), 0).is_empty());
        // stream 2 reads without having seen it: race.
        let r = check_and_record(&mut h, rec(stamp(2, 1, &[(2, 1)]), 4, 12, false), 0);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].1.kind, RaceKind::DataRace);
        // stream 3 read after waiting on stream 1 and 2: no race; disjoint bytes never race.
        assert!(
            check_and_record(&mut h, rec(stamp(3, 1, &[(3, 1), (1, 1), (2, 1)]), 0, 8, false), 0).is_empty()
        );
        assert!(check_and_record(&mut h, rec(stamp(4, 1, &[(4, 1)]), 100, 108, true), 0).is_empty());
        // a covering write that saw everything prunes what it covers.
        let all = [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)];
        assert!(check_and_record(&mut h, rec(stamp(5, 1, &all), 0, 200, true), 0).is_empty());
        assert_eq!(h.len(), 1);
    }

    #[test]
    #[cfg_attr(miri, ignore = "100,000 accesses: hours under Miri; the logic is the same as the small tests")]
    fn a_stream_that_reads_and_writes_one_range_keeps_two_records() {
        // One stream alternates reads and writes of a buffer 100,000 times:
        // its history stays at its last write and the reads since.
        let mut h = Vec::new();
        let mut c = VClock::default();
        for i in 0..100_000u64 {
            let tick = c.tick(1);
            let s =
                Stamp { actor: 1, tick, clock: Arc::new(c.clone()), label: Actor::Stream(1), retired: None };
            assert!(check_and_record(&mut h, rec(s, 0, 64, i % 3 == 0), 0).is_empty());
            assert!(h.len() <= 2, "{} records after {i} accesses", h.len());
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "100,000 accesses: hours under Miri; the logic is the same as the small tests")]
    fn a_race_planted_after_100_000_accesses_is_caught_at_byte_range_precision() {
        // Stream 1 reads 1,000 disjoint views of one allocation 100 times each
        // (100,000 accesses, each view kept once), then stream 2 writes view
        // 500 without waiting: the race with stream 1's last read of it is
        // found; a write to bytes nobody read is not a race.
        let mut h = Vec::new();
        let mut c = VClock::default();
        for round in 0..100u64 {
            for v in 0..1000u64 {
                let tick = c.tick(1);
                let s = Stamp {
                    actor: 1,
                    tick,
                    clock: Arc::new(c.clone()),
                    label: Actor::Stream(1),
                    retired: None,
                };
                assert!(
                    check_and_record(&mut h, rec(s, v * 16, v * 16 + 16, false), 0).is_empty(),
                    "{round}"
                );
            }
        }
        assert_eq!(h.len(), 1000);
        let r = check_and_record(&mut h, rec(stamp(2, 1, &[(2, 1)]), 500 * 16, 500 * 16 + 4, true), 0);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].1.first.addr, 500 * 16);
        assert!(check_and_record(&mut h, rec(stamp(3, 1, &[(3, 1)]), 16_000, 16_016, true), 0).is_empty());
    }

    #[test]
    fn a_read_does_not_retire_the_write_before_it() {
        // Stream 1 writes then reads the same bytes; stream 2 then reads them
        // without waiting: that races with the write, which must still be
        // there.
        let mut h = Vec::new();
        assert!(check_and_record(&mut h, rec(stamp(1, 1, &[(1, 1)]), 0, 8, true), 0).is_empty());
        assert!(check_and_record(&mut h, rec(stamp(1, 2, &[(1, 2)]), 0, 8, false), 0).is_empty());
        let r = check_and_record(&mut h, rec(stamp(2, 1, &[(2, 1)]), 0, 8, false), 0);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].1.first.write);
    }
}
