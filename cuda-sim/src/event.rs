//! Events: a recorded position of a stream, with a simulated timestamp and
//! the stream's vector clock at that point.

use crate::clock::VClock;
use crate::graph;
use crate::ops::Work;
use crate::result::{CAPTURE_ISOLATION, CAPTURE_UNSUPPORTED, INVALID_HANDLE, INVALID_VALUE, NOT_READY, Res};
use crate::scheduler::{self, complete};
use crate::state::{Caller, State};
use crate::stream::{self, Waits};
use cuda_sys::{CUevent_flags, CUstream};
use std::sync::Arc;

/// `CU_EVENT_DISABLE_TIMING` as a bit.
pub(crate) const DISABLE_TIMING: u32 = CUevent_flags::CU_EVENT_DISABLE_TIMING.0;
/// Every flag `cuEventCreate` accepts.
pub(crate) const VALID_FLAGS: u32 =
    CUevent_flags::CU_EVENT_BLOCKING_SYNC.0 | DISABLE_TIMING | CUevent_flags::CU_EVENT_INTERPROCESS.0;

/// The latest eager record of an event.
#[derive(Debug, Clone)]
pub(crate) struct EventRec {
    /// The marker operation queued at the record.
    pub(crate) op: u64,
    /// The stream's clock at the record.
    pub(crate) clock: Arc<VClock>,
    /// Simulated timestamp (ns).
    pub(crate) time: u64,
}

/// One event.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) session: u64,
    pub(crate) device: i32,
    pub(crate) flags: u32,
    pub(crate) rec: Option<EventRec>,
    /// A record made while its stream was capturing: the capture and the
    /// nodes a wait on it joins.
    pub(crate) captured: Option<(u64, Vec<usize>)>,
}

impl Event {
    /// Whether the event's last record is complete (or it was never recorded).
    pub(crate) fn complete(&self, st: &State) -> bool {
        self.rec.as_ref().is_none_or(|r| complete(st, r.op))
    }
}

/// The capture an event was recorded into, while that capture is active.
pub(crate) fn active_capture(st: &State, ev: &Event) -> Option<(u64, Vec<usize>)> {
    ev.captured.as_ref().filter(|(c, _)| st.captures.contains_key(c)).cloned()
}

fn event(st: &State, h: u64) -> Res<&Event> {
    st.events.get(&h).ok_or(INVALID_HANDLE)
}

/// `cuEventRecord`.
pub(crate) fn record(st: &mut State, caller: &Caller, ev: u64, stream: CUstream) -> Res {
    let device = event(st, ev)?.device;
    let sid = stream::resolve(st, caller, stream)?;
    let s = st.streams.get(&sid).ok_or(INVALID_HANDLE)?;
    if s.device != device {
        return Err(INVALID_HANDLE);
    }
    if s.capture.is_some() {
        let tail = graph::capture_tail(st, sid)?;
        if let Some(e) = st.events.get_mut(&ev) {
            e.captured = Some(tail);
        }
        return Ok(());
    }
    if crate::nccl::in_group() {
        // cudarc's bug (cudarc #575): the group's work is queued at
        // ncclGroupEnd, after this record, so the event does not cover it.
        log::warn!(
            "cuda-sim: event recorded inside an NCCL group: it does not cover the group's collectives, \
             which are queued at ncclGroupEnd"
        );
    }
    let op = stream::enqueue(st, sid, Work::Marker, Waits::default())?;
    let rec = st.ops.get(&op).map(|o| EventRec { op, clock: o.stamp.clock.clone(), time: o.end });
    if let Some(e) = st.events.get_mut(&ev) {
        e.rec = rec;
        e.captured = None;
    }
    Ok(())
}

/// `cuEventRecordWithFlags`: `CU_EVENT_RECORD_DEFAULT` is [`record`];
/// `CU_EVENT_RECORD_EXTERNAL`, valid only while the stream captures, adds an
/// event-record node to the capture (each launch of the graph records the
/// event at that node: [`graph::launch`]).
pub(crate) fn record_with_flags(
    st: &mut State,
    caller: &Caller,
    ev: u64,
    stream: CUstream,
    flags: u32,
) -> Res {
    const EXTERNAL: u32 = cuda_sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL.0;
    match flags {
        0 => record(st, caller, ev, stream),
        EXTERNAL => {
            let device = event(st, ev)?.device;
            let sid = stream::resolve(st, caller, stream)?;
            let s = st.streams.get(&sid).ok_or(INVALID_HANDLE)?;
            if s.device != device || s.capture.is_none() {
                return Err(if s.device != device { INVALID_HANDLE } else { INVALID_VALUE });
            }
            graph::add_node(st, sid, Work::EventRecord(ev))
        }
        _ => Err(INVALID_VALUE),
    }
}

/// `cuStreamWaitEvent`: later work on the stream waits for the event's most
/// recent record at call time.
pub(crate) fn wait(st: &mut State, caller: &Caller, stream: CUstream, ev: u64, flags: u32) -> Res {
    if flags & !1 != 0 {
        return Err(INVALID_VALUE);
    }
    let e = event(st, ev)?;
    let captured = active_capture(st, e);
    let rec = e.rec.clone();
    let sid = stream::resolve(st, caller, stream)?;
    if let Some((cap, tail)) = captured {
        return graph::capture_join(st, sid, cap, tail);
    }
    let capturing = st.streams.get(&sid).and_then(|s| s.capture.as_ref()).map(|c| c.capture);
    match (capturing, rec) {
        (_, None) => Ok(()), // never recorded: a no-op
        (Some(cap), Some(_)) => {
            graph::invalidate(st, cap);
            Err(CAPTURE_ISOLATION)
        }
        (None, Some(r)) => {
            let deps = if complete(st, r.op) { Vec::new() } else { vec![r.op] };
            let waits = Waits { deps, clocks: vec![r.clock], ready_at: r.time };
            stream::enqueue(st, sid, Work::Marker, waits).map(|_| ())
        }
    }
}

/// Fails an operation on an event recorded into an active capture
/// (invalidating the capture).
fn refuse_captured(st: &mut State, ev: u64) -> Res {
    let cap = st.events.get(&ev).and_then(|e| active_capture(st, e)).map(|c| c.0);
    if let Some(c) = cap {
        graph::invalidate(st, c);
        return Err(CAPTURE_UNSUPPORTED);
    }
    Ok(())
}

/// `cuEventQuery`: runs a random amount of ready work, then answers.
pub(crate) fn query(st: &mut State, caller: &Caller, ev: u64) -> Res {
    event(st, ev)?;
    refuse_captured(st, ev)?;
    let session = caller.session;
    let pending = st.ops.values().filter(|o| o.session == session).count() as u64;
    let n = st.session_mut(session).rng.below(pending + 1);
    scheduler::run_some(st, session, n);
    let e = event(st, ev)?;
    if !e.complete(st) {
        return Err(NOT_READY);
    }
    if let Some(r) = e.rec.clone() {
        crate::retire::host_sync(st, session, &r.clock, r.time);
    }
    scheduler::sync_result(st, session)
}

/// `cuEventSynchronize`.
pub(crate) fn synchronize(st: &mut State, caller: &Caller, ev: u64) -> Res {
    event(st, ev)?;
    refuse_captured(st, ev)?;
    let rec = event(st, ev)?.rec.clone();
    if let Some(r) = rec {
        scheduler::run_until(st, caller.session, |st| complete(st, r.op))?;
        crate::retire::host_sync(st, caller.session, &r.clock, r.time);
    }
    scheduler::sync_result(st, caller.session)
}

/// `cuEventElapsedTime`, in milliseconds of simulated time.
pub(crate) fn elapsed(st: &mut State, start: u64, end: u64) -> Res<f32> {
    let (a, b) = (event(st, start)?, event(st, end)?);
    if a.flags & DISABLE_TIMING != 0 || b.flags & DISABLE_TIMING != 0 {
        return Err(INVALID_HANDLE);
    }
    let (Some(ra), Some(rb)) = (a.rec.clone(), b.rec.clone()) else { return Err(INVALID_HANDLE) };
    if !complete(st, ra.op) || !complete(st, rb.op) {
        return Err(NOT_READY);
    }
    let ns = rb.time as f64 - ra.time as f64;
    Ok((ns / 1e6) as f32)
}
