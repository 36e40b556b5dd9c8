//! The recorder's hook (`gpu_sync::trace`) around one operation while its
//! device records: the host clock and events (or CUPTI's correlation id)
//! around the driver call, the record with its description and what it
//! waits for, and the record's place on its stream for later waits. Made
//! by [`super::submit`] and the group submission only while the device's
//! recording flag is on.

use super::{Kind, Point, Timeline};
use crate::error::Result;
use crate::trace::{OpDesc, OpKind, StreamFacts};
use cuda_sys::BorrowedStream;
use std::cell::Cell;
use std::sync::Arc;

/// The recorder's hook around one operation while its device records.
pub(super) struct Hooked<'a> {
    sink: Arc<crate::trace::Sink>,
    /// The stream's device's ticket counter (read, never moved, by
    /// [`Hooked::around`]: see there).
    tickets: &'a std::sync::atomic::AtomicU64,
    stream: StreamFacts,
    name: &'static str,
    kind: Kind<'a>,
    describe: Option<&'a dyn Fn() -> OpDesc>,
    /// Set by the capture's branch of [`route`] before the call.
    pub(super) captured: Cell<bool>,
    /// The record's id once made (0: none).
    id: Cell<u64>,
}

/// The hook for an operation (`name`, `kind`, `describe`) on `s`, if the
/// device's recorder records that stream (clears the device's flag when the
/// recorder is gone).
#[cold]
#[inline(never)]
pub(super) fn hook<'a>(
    s: &'a Arc<Timeline>,
    name: &'static str,
    kind: Kind<'a>,
    describe: Option<&'a dyn Fn() -> OpDesc>,
) -> Option<Hooked<'a>> {
    // Waits noted before this operation belong to none recorded (a
    // stream left out of the recording).
    crate::trace::clear_waits();
    let sink = s.device.inner.trace.sink_for(s.id)?;
    Some(Hooked {
        sink,
        tickets: &s.device.inner.ticket,
        stream: StreamFacts { id: s.id, priority: s.priority },
        name,
        kind,
        describe,
        captured: Cell::new(false),
        id: Cell::new(0),
    })
}

impl Hooked<'_> {
    /// Makes the driver call, inside the recorder's hook if there is one:
    /// before it the host clock and a start event (or CUPTI's external
    /// correlation id), after it an end event (or the pop) and the record
    /// with the operation's description. It runs where the call would,
    /// inside the flavor (book held, context bound; for a blocking copy on
    /// its idle stream), so the events sit right around the operation on
    /// its stream; a captured operation gets none.
    #[inline(always)]
    pub(super) fn call<R>(
        hook: Option<&Hooked<'_>>,
        raw: BorrowedStream<'_>,
        call: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<R> {
        match hook {
            None => call(raw),
            Some(h) => h.around(raw, call),
        }
    }

    /// [`Hooked::call`] while recording: the call inside the hook (out of
    /// line, so the driver call's closure stays small enough to be inlined
    /// on the hot path, which records nothing).
    #[cold]
    #[inline(never)]
    fn around<R>(
        &self,
        raw: BorrowedStream<'_>,
        call: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<R> {
        let captured = self.captured.get();
        let f = self.sink.before(self.stream, raw, captured);
        let r = call(raw);
        let desc = match self.describe {
            Some(d) => d(),
            None => default_desc(self.name, self.kind),
        };
        let waits = self.waits(captured);
        let id = self.sink.after(f, self.stream, raw, desc, (captured, r.is_ok()), waits);
        // The record's ticket, for the waits that name it later. Every
        // flavor but the blocking one makes the call under its device's
        // book and draws the operation's ticket right after it under the
        // same lock, which orders every draw of the device: it is the
        // counter's next value. (A blocking call holds no book: its ticket
        // is not known here, and its record stays unnamed by later waits;
        // `submit` itself learns nothing more, so the hot path pays no
        // test for this.)
        if let Some(id) = id
            && !captured
            && !matches!(self.kind, Kind::Blocking)
        {
            let ticket = self.tickets.load(std::sync::atomic::Ordering::Relaxed) + 1;
            crate::trace::note_position(self.stream.id, ticket, id);
        }
        r
    }

    /// What the operation waits for on other streams, for its record: the
    /// waits the engine made for it on this thread (the marker wait,
    /// `Timeline::wait_on_marker`, notes each while the device records), and the points
    /// its kind orders it after (a `Stream::wait_stream`, a free after
    /// other streams' uses, an event wait), made or found already covered;
    /// none for a captured operation (its graph's edges order it).
    fn waits(&self, captured: bool) -> crate::trace::Waits {
        let mut waits = crate::trace::waits_made_for(self.stream.id);
        if captured {
            return crate::trace::Waits::new();
        }
        let mut add = |p: &Point| {
            let w = crate::trace::PendingWait {
                waiter: self.stream.id,
                device: p.timeline.device.inner.ordinal,
                stream: p.stream_id(),
                at: p.ticket(),
            };
            crate::trace::merge_wait(&mut waits, w);
        };
        match self.kind {
            Kind::After(deps) => deps.iter().for_each(&mut add),
            Kind::WaitEvent(Some(p)) => add(p),
            _ => {}
        }
        waits
    }

    /// The group's part got `ticket` (0: captured, nothing to name): noted
    /// for the records of later waits on it.
    #[cold]
    #[inline(never)]
    pub(super) fn placed(&self, ticket: u64) {
        let id = self.id.get();
        if id != 0 && ticket != 0 {
            crate::trace::note_position(self.stream.id, ticket, id);
        }
    }
}

impl Hooked<'_> {
    /// [`submit_group`]'s call while some of its devices record: each
    /// recorded part's hook opened on its stream, in order, the call made,
    /// the hooks closed in reverse order (CUPTI's correlation ids nest).
    #[cold]
    #[inline(never)]
    pub(super) fn around_group<R>(
        hooks: &[Option<Hooked<'_>>],
        raws: &[BorrowedStream<'_>],
        call: impl FnOnce(&[BorrowedStream<'_>]) -> Result<R>,
    ) -> Result<R> {
        let opened: smallvec::SmallVec<[_; 4]> = hooks
            .iter()
            .zip(raws)
            .filter_map(|(h, raw)| {
                h.as_ref().map(|h| (h, *raw, h.sink.before(h.stream, *raw, h.captured.get())))
            })
            .collect();
        let r = call(raws);
        for (h, raw, f) in opened.into_iter().rev() {
            let desc = default_desc(h.name, h.kind);
            let captured = h.captured.get();
            let id = h.sink.after(f, h.stream, raw, desc, (captured, r.is_ok()), h.waits(captured));
            h.id.set(id.unwrap_or(0));
        }
        r
    }
}

/// An operation's description from its engine name and kind (for the
/// operations that give none).
fn default_desc(name: &'static str, kind: Kind<'_>) -> OpDesc {
    match kind {
        Kind::HostFn => OpDesc { name: "host function".into(), kind: OpKind::HostFn },
        Kind::WaitEvent(_) => OpDesc { name: "wait".into(), kind: OpKind::Wait },
        _ => OpDesc { name: name.into(), kind: OpKind::Other },
    }
}
