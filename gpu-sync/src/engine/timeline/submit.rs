//! The submission paths of a timeline, under its device's book: an
//! operation after device-side waits for points (one or several devices'
//! books, locked in ordinal order), a user event's record and a wait on
//! one, and the one place tickets are drawn.

use super::book::{self, BookList, BookSet, Step, book_in};
use super::state::StreamState;
use super::{Point, Timeline};
use crate::error::{Error, Result};
use crate::ffi::call;
use cuda_sys::BorrowedStream;
use cuda_sys::result as cu;
use std::sync::Arc;

impl Timeline {
    /// Records `ev` on this stream (`cuEventRecord`) under the book lock, so
    /// the record's position agrees with the last ticket; returns the point
    /// it covers. Refused inside a host function (before any lock) and on a
    /// capturing stream.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED`; [`Error::Capturing`]; a driver error.
    pub(in crate::engine) fn record_event(self: &Arc<Self>, ev: &cuda_sys::OwnedEvent) -> Result<Point> {
        crate::ffi::refuse("cuEventRecord")?;
        self.device.inner.bind()?;
        let mut book = self.lock();
        self.refuse_if_capturing("Event::record")?;
        let st = book.stream(self);
        call("cuEventRecord", || cu::event::record(ev, self.raw()))?;
        Ok(Point { timeline: self.clone(), ticket: st.last_ticket })
    }

    /// The flavor of `Kind::WaitEvent` (`engine::submit` made the guards
    /// before any lock): `call` makes this stream wait, device-side, for a
    /// user event's latest record (`cuStreamWaitEvent`), which covers
    /// `recorded` if it is a point of a tracked stream; the wait takes a
    /// ticket, so markers covering it cover the event, and the stream then
    /// counts `recorded` as waited for. The caller holds the event's record
    /// lock. Refused on a capturing stream.
    ///
    /// # Errors
    /// [`Error::Capturing`]; `call`'s error.
    pub(in crate::engine) fn submit_event_wait<R>(
        &self,
        op_name: &'static str,
        recorded: Option<&Point>,
        call: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<(R, u64)> {
        self.device.inner.bind()?;
        let mut book = self.lock();
        self.refuse_if_capturing(op_name)?;
        let st = book.stream(self);
        let r = call(self.raw())?;
        if let Some(p) = recorded
            && p.timeline.id != self.id
        {
            st.set_known(p.timeline.id, p.ticket);
        }
        let ticket = self.draw_ticket(st);
        Ok((r, ticket))
    }

    /// Draws the next ticket of the device for an operation on this stream
    /// whose driver call has returned, and makes it the stream's last: the
    /// one place tickets are drawn. `st` is this stream's state, so the
    /// caller holds the device's book, which orders every draw (see
    /// `DeviceInner::next_ticket`).
    #[inline(always)]
    pub(in crate::engine) fn draw_ticket(&self, st: &mut StreamState) -> u64 {
        let ticket = self.device.inner.next_ticket();
        st.last_ticket = ticket;
        ticket
    }

    /// Submits `op` as the next operation of this stream, with the books of
    /// this stream's device and of every stream in `deps` locked (`books`),
    /// after making the stream wait (device-side, `cuStreamWaitEvent` on a
    /// marker of the other stream) for every point of `deps` that is neither
    /// known complete nor already waited for. Refused
    /// ([`Error::Capturing`]) on a capturing stream, before anything is
    /// submitted. Returns `op`'s result and the ticket it got.
    #[inline(always)]
    pub(in crate::engine) fn submit_in<R>(
        &self,
        books: &mut impl BookSet,
        op_name: &'static str,
        deps: &[Point],
        op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<(R, u64)> {
        // The caller bound this stream's context (it stays current through
        // the waits: another device's markers record as foreign).
        let own = self.book.ordinal;
        {
            let book = book_in(books, own)?;
            self.refuse_if_capturing(op_name)?;
            if !deps.is_empty() && deps.iter().any(|p| self.needs_wait(book.stream(self), p)) {
                self.wait_for(books, deps)?;
            }
        }
        let st = book_in(books, own)?.stream(self);
        let r = op(self.raw())?;
        let ticket = self.draw_ticket(st);
        Ok((r, ticket))
    }

    /// The first half of a submission under the locked `books`: refused
    /// ([`Error::Capturing`]) on a capturing stream, then this stream made
    /// to wait (device-side) for every point of `deps` that is neither known
    /// complete nor already waited for. The caller then makes its driver
    /// call and draws its ticket ([`Timeline::submit_in`]; the group flavor,
    /// once per stream).
    #[inline(always)]
    pub(in crate::engine) fn wait_before(
        &self,
        books: &mut impl BookSet,
        op_name: &'static str,
        deps: &[Point],
    ) -> Result<()> {
        let book = book_in(books, self.book.ordinal)?;
        self.refuse_if_capturing(op_name)?;
        if !deps.is_empty() && deps.iter().any(|p| self.needs_wait(book.stream(self), p)) {
            self.wait_for(books, deps)?;
        }
        Ok(())
    }

    /// Submits `op` on this stream with no tracked resources, after
    /// device-side waits for `deps` (which may be on other devices' streams):
    /// every book involved is locked, in ordinal order.
    pub(in crate::engine) fn submit<R>(
        &self,
        op_name: &'static str,
        deps: &[Point],
        op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<(R, u64)> {
        crate::ffi::refuse(op_name)?;
        self.device.inner.bind()?;
        if deps.iter().all(|p| Arc::ptr_eq(&p.timeline.book, &self.book)) {
            let mut book = self.lock();
            return self.submit_in(&mut *book, op_name, deps, op);
        }
        let mut list = BookList::default();
        list.add(&self.book);
        for p in deps {
            list.add(&p.timeline.book);
        }
        // Every book is known: the work never finds one missing.
        let mut op = Some(op);
        book::locked(&mut list, |books| {
            let op = op.take().ok_or_else(|| Error::Internal("a submission ran its call twice".into()))?;
            self.submit_in(books, op_name, deps, op).map(Step::Done)
        })
    }
}
