//! The marker ring: the markers a stream keeps (sync-only events recorded
//! at its tail, each with the ticket it covers), and how a wait finds,
//! records and recycles them under the book lock.

use super::marker::Marker;
use super::state::StreamState;
use super::{Timeline, empty_slot};
use crate::error::Result;
use crate::ffi::call;
use cuda_sys::result as cu;
use std::sync::Arc;

/// Recent markers kept per stream (a power of two: ring slots wrap with a
/// mask).
pub(in crate::engine::timeline) const MARKERS_KEEP: usize = 4;

/// Whether recording a marker must first make its stream's context current
/// ([`Timeline::cover_in`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::engine::timeline) enum Ctx {
    /// The calling thread's current context is the stream's device's
    /// already: the eager flavor binds its stream's device before its waits,
    /// and each of those waits is on a stream of that device.
    Current,
    /// Bound before the record (a host path that bound nothing).
    Bind,
    /// A marker on another device's stream, recorded with the caller's
    /// context current (the waiting stream's): `cuEventRecord` records on
    /// the stream's own context, which the event shares (the simulator
    /// checks the same pair), so nothing is bound for it and the caller's
    /// context stays current for its wait and its launch — one context
    /// switch a cross-device handoff fewer (a new marker's event is made on
    /// its own device, after which the waiter binds back).
    Foreign,
}

/// A stream's kept markers, each with the ticket it covers: a ring of
/// [`MARKERS_KEEP`] slots, `len` of them filled from `head` (the oldest)
/// on. Covers grow from oldest to newest (each marker is recorded at the
/// stream's tail, after the one before it).
#[derive(Default)]
pub(in crate::engine::timeline) struct MarkerRing {
    pub(in crate::engine::timeline) slots: [Option<(Arc<Marker>, u64)>; MARKERS_KEEP],
    /// The slot of the oldest marker.
    pub(in crate::engine::timeline) head: usize,
    /// How many slots are filled.
    pub(in crate::engine::timeline) len: usize,
}

const _: () = assert!(MARKERS_KEEP.is_power_of_two());

impl MarkerRing {
    /// The slot of the `i`-th oldest marker (masked: never out of bounds,
    /// so no bounds check is made).
    #[inline(always)]
    pub(in crate::engine::timeline) fn slot(&self, i: usize) -> usize {
        (self.head + i) & (MARKERS_KEEP - 1)
    }

    /// The marker in `slot` and the ticket it covers (`None`: an empty
    /// slot).
    #[inline(always)]
    pub(in crate::engine::timeline) fn get(&self, slot: usize) -> Option<(&Arc<Marker>, u64)> {
        self.slots[slot & (MARKERS_KEEP - 1)].as_ref().map(|(m, c)| (m, *c))
    }

    /// The slot of the earliest marker covering `ticket`. The newest is
    /// looked at first: covers grow towards it, so when it does not cover
    /// `ticket` (a handoff's hot path: the point is newer than every
    /// marker) none does, and nothing else is read.
    #[inline(always)]
    pub(in crate::engine::timeline) fn earliest_covering(&self, ticket: u64) -> Option<usize> {
        if self.newest().is_none_or(|(_, c)| c < ticket) {
            return None;
        }
        (0..self.len)
            .map(|i| self.slot(i))
            .find(|&k| self.slots[k].as_ref().is_some_and(|(_, c)| *c >= ticket))
    }

    /// The newest marker and the ticket it covers.
    #[inline(always)]
    pub(in crate::engine::timeline) fn newest(&self) -> Option<(&Arc<Marker>, u64)> {
        if self.len == 0 { None } else { self.get(self.slot(self.len - 1)) }
    }

    /// The oldest marker, when every slot is filled.
    #[inline(always)]
    pub(in crate::engine::timeline) fn oldest_if_full(&self) -> Option<&Arc<Marker>> {
        if self.len < MARKERS_KEEP { None } else { self.slots[self.slot(0)].as_ref().map(|(m, _)| m) }
    }

    /// Keeps `marker`, covering `ticket`, as the newest, dropping the oldest
    /// when every slot is filled; returns its slot.
    pub(in crate::engine::timeline) fn push(&mut self, marker: Arc<Marker>, ticket: u64) -> usize {
        if self.len == MARKERS_KEEP {
            let k = self.slot(0);
            self.slots[k] = Some((marker, ticket));
            self.head = self.slot(1);
            k
        } else {
            let k = self.slot(self.len);
            self.slots[k] = Some((marker, ticket));
            self.len += 1;
            k
        }
    }

    /// The oldest marker, re-recorded to cover `ticket`, becomes the newest
    /// (the ring is full): only the head moves. Returns its slot.
    #[inline(always)]
    pub(in crate::engine::timeline) fn recycle_oldest(&mut self, ticket: u64) -> usize {
        let k = self.slot(0);
        if let Some((_, c)) = &mut self.slots[k] {
            *c = ticket;
        }
        self.head = self.slot(1);
        k
    }

    /// Drops the oldest marker (its event back to the pool).
    pub(in crate::engine::timeline) fn drop_oldest(&mut self) {
        if self.len > 0 {
            let k = self.slot(0);
            self.slots[k] = None;
            self.head = self.slot(1);
            self.len -= 1;
        }
    }
}

impl Timeline {
    /// A marker covering `ticket` (which must already be submitted): the
    /// kept one if it covers it, else a new one recorded now.
    pub(in crate::engine) fn marker_covering(&self, ticket: u64) -> Result<(Arc<Marker>, u64)> {
        let mut book = self.lock();
        let st = book.stream(self);
        let k = self.cover_in(st, ticket, Ctx::Bind)?;
        let (m, c) = st.markers.get(k).ok_or_else(empty_slot)?;
        Ok((m.clone(), c))
    }

    /// Makes sure a kept marker covers `ticket`, with the book locked (`st`
    /// is this stream's state): the slot of the earliest that does, recorded
    /// now if none did, this stream's context made current first unless
    /// `ctx` says it is (a same-device wait: one thread-local compare less
    /// per handoff).
    #[inline]
    pub(in crate::engine::timeline) fn cover_in(
        &self,
        st: &mut StreamState,
        ticket: u64,
        ctx: Ctx,
    ) -> Result<usize> {
        if let Some(i) = st.marker_for(ticket) {
            return Ok(i);
        }
        self.refuse_if_capturing("a wait on work submitted during the capture")?;
        match ctx {
            Ctx::Bind => self.device.inner.bind()?,
            Ctx::Current => {
                debug_assert!(
                    self.device.inner.is_bound_here(),
                    "a marker recorded outside its stream's context"
                )
            }
            Ctx::Foreign => {}
        }
        self.record_marker(st)
    }

    /// Records a marker now, covering every ticket so far, with the book
    /// locked (so the record's position agrees with `last_ticket`), and
    /// keeps it as the newest. Once the stream keeps [`MARKERS_KEEP`]
    /// markers and nothing but the stream state holds the oldest (no host
    /// wait, proof or pending device wait uses it), that one's event is
    /// recorded again in place: the hot path of a cross-stream handoff then
    /// allocates nothing and leaves the pool alone. That is sound because a
    /// `cuStreamWaitEvent` already issued on the event took the record it saw
    /// at call time, and any other user would hold a clone of the `Arc`.
    ///
    /// The stream's context is current, or the record is another device's
    /// ([`Ctx::Foreign`]).
    ///
    /// Returns the new marker's slot in `st.markers` (the newest).
    ///
    /// In line (the recycled marker, a handoff's hot path); a new marker
    /// from the pool and a failed record are out of line.
    #[inline(always)]
    fn record_marker(&self, st: &mut StreamState) -> Result<usize> {
        let covered = st.last_ticket;
        if let Some(m) = st.oldest_recyclable() {
            let r = m.event().and_then(|ev| call("cuEventRecord", || cu::event::record(ev, self.raw())));
            if let Err(e) = r {
                return Err(Self::record_failed(st, e));
            }
            // Oldest becomes newest, in place: the ring's head moves, no
            // marker does and no reference count is touched.
            return Ok(st.markers.recycle_oldest(covered));
        }
        self.record_new_marker(st, covered)
    }

    /// A recycled marker's record failed: it no longer covers the point it
    /// was kept for, so it is dropped (its event back to the pool).
    #[cold]
    #[inline(never)]
    fn record_failed(st: &mut StreamState, e: crate::Error) -> crate::Error {
        st.markers.drop_oldest();
        e
    }

    /// [`Timeline::record_marker`] with no marker to recycle: one from the
    /// pool, recorded and kept as the newest, covering `covered`.
    #[inline(never)]
    fn record_new_marker(&self, st: &mut StreamState, covered: u64) -> Result<usize> {
        let marker = self.pool.marker()?;
        marker.event().and_then(|ev| call("cuEventRecord", || cu::event::record(ev, self.raw())))?;
        Ok(st.markers.push(Arc::new(marker), covered))
    }

    /// Records a marker covering everything submitted so far, unless one
    /// already does (before a capture starts, so waits on earlier points
    /// never need a new record; after a prefetcher's upload, so a wait on it
    /// waits for exactly that upload).
    pub(in crate::engine) fn seal_marker(&self, st: &mut StreamState) -> Result<()> {
        if st.last_ticket == 0 || st.tail_marked() {
            return Ok(());
        }
        self.device.inner.bind()?;
        self.record_marker(st).map(drop)
    }

    /// Records a marker at the stream's current tail unless one already
    /// covers it (`cuEventRecord`), so that a later host wait on the last
    /// operation waits for exactly that operation, not for work queued after
    /// it (markers are otherwise recorded lazily, at the tail, when a wait
    /// needs one).
    pub(crate) fn mark_tail(&self) -> Result<()> {
        crate::ffi::refuse("cuEventRecord")?;
        let mut book = self.lock();
        if self.is_capturing() {
            return Ok(());
        }
        self.seal_marker(book.stream(self))
    }
}
