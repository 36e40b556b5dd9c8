//! The conflict rules (PyTorch's `record_stream` contract, made automatic),
//! written once and used with stream points by eager submission and with
//! capture sequence numbers by captured submission:
//! - a read waits for the last write if it was on another stream;
//! - a write waits for the last write and for every read since it, each on
//!   other streams; readers are kept **per stream** (one position per
//!   stream), so no reader is lost when several streams read one buffer;
//! - same-stream uses are ordered by the stream's FIFO and cost a counter
//!   write;
//! - uses a host wait proved complete never cause a wait.

use super::{Point, Timeline};
use smallvec::SmallVec;
use std::sync::Arc;

/// How an operation uses a resource.
///
/// No public call takes or returns one: a launch's [`In`](crate::In)
/// parameters and [`ForeignUses::input`](crate::ForeignUses::input) are
/// reads, [`Out`](crate::Out) and
/// [`ForeignUses::output`](crate::ForeignUses::output) writes
/// ([`ForeignUses`](crate::ForeignUses)' example declares one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Only reads it.
    Read,
    /// Writes it (and may read it).
    Write,
}

/// A use's position on a stream, as the conflict rules see it.
pub(in crate::engine) trait OnStream {
    /// What names a stream (compared, never dereferenced).
    type Stream: Copy;
    /// Whether it is on `stream`.
    fn is_on(&self, stream: Self::Stream) -> bool;
    /// Whether a host wait proved it complete (then it orders nothing).
    fn is_complete(&self) -> bool;
    /// Moves it forward to a later use on the same stream.
    fn advance(&mut self, to: u64);
}

impl OnStream for Point {
    /// The stream's timeline, by address: a point holds its timeline, so
    /// while it and the caller's stream are alive the two are the same
    /// timeline exactly when their addresses are equal (one comparison,
    /// where the timelines' ids would need a load through the point's).
    type Stream = *const Timeline;
    #[inline(always)]
    fn is_on(&self, stream: *const Timeline) -> bool {
        std::ptr::eq(Arc::as_ptr(&self.timeline), stream)
    }
    #[inline(always)]
    fn is_complete(&self) -> bool {
        Point::is_complete(self)
    }
    #[inline(always)]
    fn advance(&mut self, to: u64) {
        self.ticket = self.ticket.max(to);
    }
}

/// The last write of a resource and its reads since, one position per
/// stream. An access on a stream must be ordered after the last write on
/// another stream and, if it writes, after every read on another stream; a
/// write then supersedes them all, a read joins the readers.
pub(in crate::engine) struct Conflicts<P> {
    pub write: Option<P>,
    pub reads: SmallVec<[P; 2]>,
}

impl<P> Default for Conflicts<P> {
    fn default() -> Self {
        Conflicts { write: None, reads: SmallVec::new() }
    }
}

impl<P: OnStream> Conflicts<P> {
    /// Each position on another stream that an `access` on `stream` must be
    /// ordered after, given to `out`.
    #[inline(always)]
    pub(in crate::engine) fn deps(&self, stream: P::Stream, access: Access, mut out: impl FnMut(&P)) {
        self.deps_at(stream, access, |_, p| out(p));
    }

    /// [`Conflicts::deps`], each position given with where it is kept
    /// (`None`: the last write; `Some(i)`: the `i`-th reader), which
    /// [`Conflicts::at`] finds again.
    #[inline(always)]
    pub(in crate::engine) fn deps_at(
        &self,
        stream: P::Stream,
        access: Access,
        mut out: impl FnMut(Option<usize>, &P),
    ) {
        if let Some(w) = &self.write
            && !w.is_on(stream)
        {
            out(None, w);
        }
        if access == Access::Write {
            for (i, p) in self.reads.iter().enumerate() {
                if !p.is_on(stream) {
                    out(Some(i), p);
                }
            }
        }
    }

    /// The position kept at `at` (as [`Conflicts::deps_at`] names it).
    #[inline(always)]
    pub(in crate::engine) fn at(&self, at: Option<usize>) -> Option<&P> {
        match at {
            None => self.write.as_ref(),
            Some(i) => self.reads.get(i),
        }
    }

    /// Records an `access` on `stream` at position `at` (a ticket or a
    /// sequence number), making a new position with `new` only when none of
    /// that stream is held (the hot path — the same stream again — moves a
    /// number and touches no reference count).
    #[inline(always)]
    pub(in crate::engine) fn record(
        &mut self,
        stream: P::Stream,
        at: u64,
        access: Access,
        new: impl FnOnce() -> P,
    ) {
        match access {
            Access::Read => {
                // The first reader is looked at before the scan: a stream
                // reading again what it read last (the hot path) stops here.
                let reads = self.reads.as_mut_slice();
                let found = match reads.split_first_mut() {
                    Some((first, _)) if first.is_on(stream) => Some(first),
                    Some((_, rest)) => rest.iter_mut().find(|r| r.is_on(stream)),
                    None => None,
                };
                if let Some(r) = found {
                    r.advance(at);
                } else {
                    // A new reader stream: drop readers a host wait proved
                    // complete first, so the list stays short. A reader
                    // after a write (a handoff's hot path) finds it empty:
                    // nothing to prune, no call.
                    if !self.reads.is_empty() {
                        self.reads.retain(|p| !p.is_complete());
                    }
                    self.reads.push(new());
                }
            }
            Access::Write => {
                match &mut self.write {
                    Some(w) if w.is_on(stream) => w.advance(at),
                    w => *w = Some(new()),
                }
                if !self.reads.is_empty() {
                    self.reads.clear();
                }
            }
        }
    }
}

/// The uses of one resource (a device allocation or a pinned host buffer)
/// on stream timelines.
pub(in crate::engine) type Tracker = Conflicts<Point>;

impl Tracker {
    /// Drops uses a host wait proved complete. Not needed for correctness on
    /// the hot path (complete points never cause a wait); used before a free.
    fn prune(&mut self) {
        if self.write.as_ref().is_some_and(Point::is_complete) {
            self.write = None;
        }
        self.reads.retain(|p| !p.is_complete());
    }

    /// Records a use at `ticket` of `timeline`.
    #[inline(always)]
    pub(in crate::engine) fn record_use(&mut self, timeline: &Arc<Timeline>, ticket: u64, access: Access) {
        self.record(Arc::as_ptr(timeline), ticket, access, || Point { timeline: timeline.clone(), ticket });
    }

    /// Every use not yet known complete.
    pub(in crate::engine) fn outstanding(&mut self) -> SmallVec<[Point; 4]> {
        self.prune();
        self.write.iter().chain(self.reads.iter()).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    //! The rules against a fake stream point: (stream, ticket), complete
    //! when a test says so.
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Fake {
        stream: u64,
        ticket: u64,
        done: bool,
    }

    impl OnStream for Fake {
        type Stream = u64;
        fn is_on(&self, stream: u64) -> bool {
            self.stream == stream
        }
        fn is_complete(&self) -> bool {
            self.done
        }
        fn advance(&mut self, to: u64) {
            self.ticket = self.ticket.max(to);
        }
    }

    fn at(stream: u64, ticket: u64) -> impl FnOnce() -> Fake {
        move || Fake { stream, ticket, done: false }
    }

    fn deps(c: &Conflicts<Fake>, stream: u64, access: Access) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        c.deps(stream, access, |p| out.push((p.stream, p.ticket)));
        out
    }

    #[test]
    fn same_stream_uses_never_wait() {
        let mut c = Conflicts::default();
        c.record(1, 1, Access::Write, at(1, 1));
        c.record(1, 2, Access::Read, at(1, 2));
        assert!(deps(&c, 1, Access::Write).is_empty());
        assert!(deps(&c, 1, Access::Read).is_empty());
    }

    #[test]
    fn a_read_waits_for_the_last_write_on_another_stream_only() {
        let mut c = Conflicts::default();
        c.record(1, 5, Access::Write, at(1, 5));
        assert_eq!(deps(&c, 2, Access::Read), [(1, 5)]);
        // Readers do not order each other.
        c.record(2, 6, Access::Read, at(2, 6));
        assert_eq!(deps(&c, 3, Access::Read), [(1, 5)]);
    }

    #[test]
    fn a_write_waits_for_every_reader_kept_per_stream() {
        let mut c = Conflicts::default();
        c.record(1, 1, Access::Write, at(1, 1));
        c.record(2, 2, Access::Read, at(2, 2));
        c.record(3, 3, Access::Read, at(3, 3));
        // A later read on stream 2 advances its entry, never adds one.
        c.record(2, 7, Access::Read, at(2, 7));
        let mut d = deps(&c, 4, Access::Write);
        d.sort_unstable();
        assert_eq!(d, [(1, 1), (2, 7), (3, 3)], "the write and both readers, stream 2 at its latest read");
        // The writer's own stream skips its own uses.
        let mut d = deps(&c, 2, Access::Write);
        d.sort_unstable();
        assert_eq!(d, [(1, 1), (3, 3)]);
    }

    #[test]
    fn deps_at_names_where_each_position_is_kept() {
        let mut c = Conflicts::default();
        c.record(1, 1, Access::Write, at(1, 1));
        c.record(2, 2, Access::Read, at(2, 2));
        c.record(3, 3, Access::Read, at(3, 3));
        let mut found = Vec::new();
        c.deps_at(3, Access::Write, |k, p| found.push((k, p.stream, p.ticket)));
        assert_eq!(
            found,
            [(None, 1, 1), (Some(0), 2, 2)],
            "the write, then reader 0; stream 3's own read skipped"
        );
        for (k, stream, ticket) in found {
            let p = c.at(k).expect("kept");
            assert_eq!((p.stream, p.ticket), (stream, ticket));
        }
        assert!(c.at(Some(2)).is_none());
    }

    #[test]
    fn a_write_replaces_the_write_and_clears_the_readers() {
        let mut c = Conflicts::default();
        c.record(2, 2, Access::Read, at(2, 2));
        c.record(4, 9, Access::Write, at(4, 9));
        assert_eq!(deps(&c, 1, Access::Write), [(4, 9)]);
        assert!(c.reads.is_empty());
    }

    #[test]
    fn readers_proved_complete_are_dropped_when_a_new_reader_stream_comes() {
        let mut c = Conflicts::default();
        c.record(2, 2, Access::Read, at(2, 2));
        c.reads[0].done = true;
        c.record(3, 3, Access::Read, at(3, 3));
        assert_eq!(c.reads.len(), 1, "the complete reader went");
        assert_eq!(c.reads[0].stream, 3);
    }
}
