//! Waits: device-side (a stream waits for a point of another stream, on a
//! kept marker) and host-side (the host waits for a point, a stream's work
//! so far, or the whole stream).

use super::book::{self, BookSet, book_in};
use super::ring::Ctx;
use super::state::StreamState;
use super::{Point, Timeline, empty_slot};
use crate::error::Result;
use crate::ffi::call;
use cuda_sys::result as cu;
use std::sync::Arc;
use std::sync::atomic::Ordering;

impl Timeline {
    /// Makes this stream wait (device-side, `cuStreamWaitEvent` on a marker
    /// of the other stream, recorded now if none covers it) for `p`, a point
    /// of a stream of the same device, unless it is complete or already
    /// waited for; `streams` are the device's stream states (book locked).
    /// Clones no reference: the marker is used in place.
    #[inline]
    pub(in crate::engine) fn wait_same_device(&self, streams: &mut book::Streams, p: &Point) -> Result<()> {
        if p.timeline.id == self.id || p.is_complete() {
            return Ok(());
        }
        // The entry of `p`'s stream among the waits made here, found once:
        // read now, updated after the wait (which changes only the other
        // stream's state).
        let entry = streams.get(self).known_entry(p.timeline.id);
        let st = streams.get(self);
        if entry.and_then(|k| st.known.get(k)).map_or(0, |(_, t)| *t) >= p.ticket {
            return Ok(());
        }
        // Same device, its context bound by the eager flavor: the marker
        // is recorded without binding again.
        let covered = self.wait_on_marker(streams.get(&p.timeline), p, Ctx::Current)?;
        let st = streams.get(self);
        match entry.and_then(|k| st.known.get_mut(k)) {
            Some(e) => e.1 = e.1.max(covered),
            None => st.set_known(p.timeline.id, covered),
        }
        Ok(())
    }

    /// The wait itself, given the state of `p`'s stream (its book locked):
    /// a kept marker covering `p` (recorded now if none does), then
    /// `cuStreamWaitEvent` on this stream with this stream's context current
    /// (recording on another device's stream made that one current).
    /// Returns the ticket the marker covers.
    #[inline]
    fn wait_on_marker(&self, other: &mut StreamState, p: &Point, ctx: Ctx) -> Result<u64> {
        let k = p.timeline.cover_in(other, p.ticket, ctx)?;
        let (m, covered) = other.markers.get(k).ok_or_else(empty_slot)?;
        let ev = m.event()?;
        // A record on another device's stream may have made that device's
        // context current (bound for it, or a new marker's event made on
        // it); a recycled foreign marker left this one current, and the bind
        // is a thread-local compare. On this device it is current already.
        if ctx != Ctx::Current && !Arc::ptr_eq(&p.timeline.device.inner, &self.device.inner) {
            self.device.inner.bind()?;
        }
        debug_assert!(self.device.inner.is_bound_here(), "a wait made outside its stream's context");
        call("cuStreamWaitEvent", || cu::stream::wait_event(self.raw(), ev, 0))?;
        // Recording: the wait is noted for the operation it comes before
        // (its record's `after`). Off, one relaxed load.
        if self.device.inner.trace.is_on() {
            crate::trace::note_wait(self.id, p.timeline.device.inner.ordinal, p.timeline.id, p.ticket);
        }
        Ok(covered)
    }

    /// The last ticket submitted, read under the book lock, with the
    /// stream's context made current: what a host wait beginning now covers.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function; [`Error::Capturing`]
    /// during a capture (naming `op`).
    pub(crate) fn prepare_host_wait(&self, op: &'static str) -> Result<u64> {
        crate::ffi::refuse(op)?;
        let ticket = {
            let mut book = self.lock();
            self.refuse_if_capturing(op)?;
            book.stream(self).last_ticket
        };
        self.device.inner.bind()?;
        Ok(ticket)
    }

    /// Blocks the host until everything submitted on this stream so far has
    /// completed, waiting on a marker covering the last ticket
    /// (`cuEventSynchronize`; nothing when a host wait proved it already).
    /// No lock is held while waiting.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function (naming `op`); a
    /// driver error.
    pub(crate) fn host_wait_all_so_far(self: &Arc<Self>, op: &'static str) -> Result<()> {
        crate::ffi::refuse(op)?;
        let ticket = self.lock().stream(self).last_ticket;
        if ticket == 0 {
            return Ok(());
        }
        Point { timeline: self.clone(), ticket }.host_wait()
    }

    /// Blocks the host until all work submitted so far has completed
    /// (`cuStreamSynchronize`); returns the ticket that proves.
    ///
    /// # Errors
    /// As [`Timeline::prepare_host_wait`]; a driver error.
    pub(crate) fn synchronize(&self, op: &'static str) -> Result<u64> {
        let ticket = self.prepare_host_wait(op)?;
        call("cuStreamSynchronize", || cu::stream::synchronize(self.raw()))?;
        self.completed.fetch_max(ticket, Ordering::AcqRel);
        // Frees that host functions which ran meanwhile had to put off.
        crate::engine::capture::host_fn::drain();
        Ok(ticket)
    }

    /// Whether `p` needs a device-side wait before work on this stream.
    #[inline(always)]
    pub(in crate::engine::timeline) fn needs_wait(&self, st: &StreamState, p: &Point) -> bool {
        p.timeline.id != self.id && !p.is_complete() && st.known_for(p.timeline.id) < p.ticket
    }

    /// The device-side waits of [`Timeline::submit_in`].
    #[cold]
    pub(in crate::engine::timeline) fn wait_for(
        &self,
        books: &mut impl BookSet,
        deps: &[Point],
    ) -> Result<()> {
        let own = self.book.ordinal;
        for p in deps {
            if !self.needs_wait(book_in(books, own)?.stream(self), p) {
                continue;
            }
            let other = &p.timeline;
            // The caller bound this stream's context: a marker on this
            // device records with it, one on another device as foreign.
            let ctx = if Arc::ptr_eq(&other.device.inner, &self.device.inner) {
                Ctx::Current
            } else {
                Ctx::Foreign
            };
            let covered = self.wait_on_marker(book_in(books, other.book.ordinal)?.stream(other), p, ctx)?;
            book_in(books, own)?.stream(self).set_known(other.id, covered);
        }
        Ok(())
    }
}
