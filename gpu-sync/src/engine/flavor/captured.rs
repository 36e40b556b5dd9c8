//! Captured submission: inside a graph capture, tracked operations become
//! graph nodes. The eager trackers are left alone (nothing runs while
//! captured); a capture-local tracker orders captured work among the
//! capture's own streams with the same conflict rules, over the capture's
//! sequence numbers, each ordering becoming an event recorded and waited
//! inside the capture (a graph edge).

use crate::device::Device;
use crate::engine::Reach;
use crate::engine::capture::capture_gate;
use crate::engine::capture::capture_gate::{CaptureSlot, Captures, Gate};
use crate::engine::capture::thread::ThreadCapture;
use crate::engine::release::Held;
use crate::engine::timeline::Timeline;
use crate::engine::timeline::conflicts::{Access, Conflicts, OnStream};
use crate::engine::timeline::marker::create_event;
use crate::engine::track::{Allocation, Target, Uses};
use crate::error::{Error, Result};
use crate::ffi::call;
use cuda_sys::handle::kind::GraphKind;
use cuda_sys::result as cu;
use cuda_sys::{BorrowedStream, CUevent_flags, CUstreamCaptureMode, OwnedEvent};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What a captured operation keeps alive for the graph (a launch's module):
/// owned, never looked into.
pub(crate) type KeepAlive = Arc<dyn Send + Sync>;

/// A captured use: (stream id, the capture's sequence number). Captured
/// work never completes while captured.
#[derive(Clone, Copy)]
struct Captured {
    stream: u64,
    seq: u64,
}

impl OnStream for Captured {
    type Stream = u64;
    fn is_on(&self, stream: u64) -> bool {
        self.stream == stream
    }
    fn is_complete(&self) -> bool {
        false
    }
    fn advance(&mut self, to: u64) {
        self.seq = self.seq.max(to);
    }
}

/// The bookkeeping of a capture, guarded by its gate.
#[derive(Default)]
pub(in crate::engine) struct CaptureInner {
    /// The capture's own uses of each allocation: the same conflict rules
    /// as eager submission, over capture sequence numbers.
    local: HashMap<u64, Conflicts<Captured>>,
    /// Every allocation the capture touched, and how: the graph keeps them.
    pub accesses: HashMap<u64, (Arc<Allocation>, Access)>,
    /// What captured operations keep alive (kernels' modules).
    pub keep: Vec<KeepAlive>,
    /// The allocations of other devices that operations needing every
    /// buffer reached (kernels, fills) touched through peer access: a
    /// replay asks the device rule of them again.
    pub peer_touched: HashMap<u64, Arc<Allocation>>,
    /// Events of the graph's edges, released when the capture ends.
    pub events: Vec<OwnedEvent>,
    seq: u64,
}

/// A capture in progress, shared by the origin stream and its forks.
///
/// `inner` is the capture's submission lock ([`Gate`]): every driver call
/// made into the capture (captured operations, graph edges, the joins of the
/// forks) and `cuStreamEndCapture` itself happen with it held, so a captured
/// operation's driver call is either before the end of the capture (and in
/// the graph) or finds the gate closed and is not made (the protocol is
/// `capture_gate`'s, model-checked there). Lock order: `inner`, then
/// `streams`, then a device's book; nothing takes `inner` while holding a
/// book.
pub(in crate::engine) struct CaptureState {
    pub origin: Arc<Timeline>,
    pub streams: Mutex<Vec<Arc<Timeline>>>,
    pub inner: Gate<CaptureInner>,
}

impl Captures for CaptureState {
    type Data = CaptureInner;
    fn gate(&self) -> &Gate<CaptureInner> {
        &self.inner
    }
}

impl CaptureSlot for Timeline {
    type Capture = CaptureState;
    fn capture_hint(&self) -> bool {
        Timeline::capture_hint(self)
    }
    fn capture(&self) -> Option<Arc<CaptureState>> {
        capture_of(self)
    }
}

/// The capture `s` takes part in, read under its device's book lock.
pub(in crate::engine) fn capture_of(s: &Timeline) -> Option<Arc<CaptureState>> {
    s.lock().stream(s).capture.clone()
}

/// Makes `s` take part in capture `state` (or none), with its device's book
/// locked, and sets the lock-free hint to match.
pub(in crate::engine) fn set_capture(s: &Timeline, state: Option<&Arc<CaptureState>>) {
    let mut book = s.lock();
    set_capture_locked(s, book.stream(s), state);
}

/// [`set_capture`] with the book already locked (`st` is `s`'s state).
pub(in crate::engine) fn set_capture_locked(
    s: &Timeline,
    st: &mut crate::engine::timeline::StreamState,
    state: Option<&Arc<CaptureState>>,
) {
    st.capture = state.cloned();
    s.capturing.store(state.is_some(), std::sync::atomic::Ordering::Release);
}

impl CaptureState {
    /// A new capture whose origin is `origin`.
    pub(in crate::engine) fn new(origin: &Arc<Timeline>) -> Arc<CaptureState> {
        Arc::new(CaptureState {
            origin: origin.clone(),
            streams: Mutex::new(Vec::new()),
            inner: Gate::new(CaptureInner::default()),
        })
    }

    fn stream(&self, id: u64) -> Option<Arc<Timeline>> {
        if self.origin.id == id {
            return Some(self.origin.clone());
        }
        self.streams.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|s| s.id == id).cloned()
    }

    /// Makes capturing stream `to` wait for capturing stream `from`'s work so
    /// far: an event recorded on `from` and waited on `to`, both captured as
    /// graph edges.
    pub(in crate::engine) fn edge(
        &self,
        inner: &mut CaptureInner,
        from: &Timeline,
        to: BorrowedStream<'_>,
        device: &Device,
    ) -> Result<()> {
        let ev = create_event(device, CUevent_flags::CU_EVENT_DISABLE_TIMING.0)?;
        // Both streams are live and part of this capture, so the record and
        // the wait become graph nodes/edges; `ev` is kept until the capture
        // ends.
        let r = call("cuEventRecord", || cu::event::record(&ev, from.raw()))
            .and_then(|()| call("cuStreamWaitEvent", || cu::stream::wait_event(to, &ev, 0)));
        inner.events.push(ev);
        r
    }
}

/// The capture path of `engine::submit`: joins `op` to the capture
/// `cap` that `stream` takes part in, ordered after the capture's
/// conflicting operations on its other streams (graph edges), and records
/// its uses in the graph. Called by `capture_gate::submit` with the
/// capture's gate locked and open (`inner` is its data), so `op`'s driver
/// call cannot land after `cuStreamEndCapture`. The operation comes as
/// the fields it needs (its name, uses, what it keeps alive, its
/// [`Reach`]), not as a reference to the whole `Op`: a reference would
/// keep every field of it in memory on the hot path, which never captures.
pub(in crate::engine) fn run_captured<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    (op_name, uses, keep, reach): (&'static str, &U, Option<&KeepAlive>, Reach),
    cap: &CaptureState,
    inner: &mut CaptureInner,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<R> {
    let list = before(s, (op_name, uses, reach), cap, inner)?;
    let r = op(s.raw())?;
    after(s, &list, keep, reach, inner);
    Ok(r)
}

/// The device allocations of a captured operation, and how it uses them.
pub(in crate::engine) type CapturedUses = Vec<(Arc<Allocation>, Access)>;

/// The first half of [`run_captured`], before the operation's driver call:
/// the refusals (the device rule; a copy the driver would stage through
/// host memory; host memory), then `s` made to wait (graph edges) for the
/// capture's conflicting operations on its other streams. Returns the
/// operation's device allocations for [`after`].
///
/// # Errors
/// [`Error::DeviceMismatch`]; [`Error::Capturing`]; a driver error.
pub(in crate::engine) fn before<U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    (op_name, uses, reach): (&'static str, &U, Reach),
    cap: &CaptureState,
    inner: &mut CaptureInner,
) -> Result<CapturedUses> {
    // The device rule, before anything is captured.
    crate::engine::devices(s, uses, reach)?;
    // A copy between devices that the stream's device does not reach both
    // ways is staged through host memory by the driver, which a graph cannot
    // hold (the capture is invalidated: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
    // at its end): refused here, before anything is captured.
    if matches!(reach, Reach::One(_)) && crate::engine::devices(s, uses, Reach::Every("")).is_err() {
        return Err(Error::Capturing {
            op: "a copy between devices without peer access (the driver stages it through host memory, which a \
                 graph cannot hold; enable peer access first)",
        });
    }
    let mut list: Vec<(Arc<Allocation>, Access)> = Vec::new();
    let mut host = false;
    uses.each(|t, a| match t {
        Target::Device(alloc) => list.push((alloc.clone(), a)),
        Target::Host(_) => host = true,
    });
    if host {
        return Err(Error::Capturing { op: op_name });
    }
    let device = &s.device;
    device.inner.bind()?;
    let mut deps: Vec<u64> = Vec::new();
    for (alloc, a) in &list {
        if let Some(lt) = inner.local.get(&alloc.res.id) {
            lt.deps(s.id, *a, |p| deps.push(p.stream));
        }
    }
    deps.sort_unstable();
    deps.dedup();
    for sid in deps {
        let Some(from) = cap.stream(sid) else { continue };
        cap.edge(inner, &from, s.raw(), device)?;
    }
    Ok(list)
}

/// The second half of [`run_captured`], after the driver call: the
/// operation's uses (`list`, from [`before`]) recorded in the capture at
/// its next sequence number, and what it keeps alive kept by the graph.
pub(in crate::engine) fn after(
    s: &Timeline,
    list: &CapturedUses,
    keep: Option<&KeepAlive>,
    reach: Reach,
    inner: &mut CaptureInner,
) {
    if let Reach::Every(_) = reach {
        for (alloc, _) in list {
            if !alloc.device().same(&s.device) {
                inner.peer_touched.entry(alloc.res.id).or_insert_with(|| alloc.clone());
            }
        }
    }
    inner.seq += 1;
    let seq = inner.seq;
    for (alloc, a) in list {
        let lt = inner.local.entry(alloc.res.id).or_default();
        lt.record(s.id, seq, *a, || Captured { stream: s.id, seq });
        let entry = inner.accesses.entry(alloc.res.id).or_insert_with(|| (alloc.clone(), *a));
        if *a == Access::Write {
            entry.1 = Access::Write;
        }
    }
    if let Some(m) = keep
        && !inner.keep.iter().any(|x| std::ptr::addr_eq(Arc::as_ptr(x), Arc::as_ptr(m)))
    {
        inner.keep.push(m.clone());
    }
}

/// `Stream::wait_stream` when either stream is capturing: allowed only
/// between two streams of one capture (a graph edge). `Ok(false)`: neither
/// stream captures any more (the capture ended meanwhile) and nothing was
/// submitted; the caller makes the ordinary wait.
pub(in crate::engine) fn join_in_capture(to: &Arc<Timeline>, from: &Arc<Timeline>) -> Result<bool> {
    let refused = Error::Capturing { op: "Stream::wait_stream between a capture and work outside it" };
    let (a, b) = (capture_of(to), capture_of(from));
    match (a, b) {
        (Some(a), Some(b)) if Arc::ptr_eq(&a, &b) => {
            let mut g = a.inner.lock();
            if g.is_ended() {
                // Ended between the reads above and this lock: both streams
                // were detached together, under this lock.
                return Ok(false);
            }
            to.device.inner.bind()?;
            a.edge(&mut g.data, from, to.raw(), &to.device)?;
            Ok(true)
        }
        (None, None) => Ok(false),
        _ => Err(refused),
    }
}

/// A capture in progress, as `Stream::capture` holds it: the capture, and
/// this thread's capture mark (frees deferred on the thread run when it is
/// dropped, after the end).
pub(crate) struct Capture {
    state: Arc<CaptureState>,
    thread: ThreadCapture,
}

/// What an ended capture hands to its graph.
pub(crate) struct Ended {
    /// The graph.
    pub graph: Held<GraphKind>,
    /// Every allocation the capture touched, and how.
    pub accesses: Vec<(Arc<Allocation>, Access)>,
    /// What its operations keep alive (kernels' modules).
    pub keep: Vec<KeepAlive>,
    /// Allocations of other devices its kernels (or fills) touch through
    /// peer access: each replay asks the device rule of them again
    /// (`engine::reached_again`), since peer access may have been closed.
    pub peer_touched: Vec<Arc<Allocation>>,
}

impl Capture {
    /// Makes the new stream `fork` (not yet used) join this capture, ordered
    /// after everything captured on the origin so far (a graph edge).
    ///
    /// # Errors
    /// [`Error::Capturing`] after the capture ended; a driver error.
    pub(crate) fn fork(&self, fork: &Arc<Timeline>) -> Result<()> {
        let state = &self.state;
        let mut g = state.inner.lock();
        if g.is_ended() {
            return Err(Error::Capturing { op: "Capture::fork after the capture ended" });
        }
        set_capture(fork, Some(state));
        state.streams.lock().unwrap_or_else(|p| p.into_inner()).push(fork.clone());
        state.edge(&mut g.data, &state.origin, fork.raw(), &fork.device)
    }
}

/// Begins a capture of `s` (see `engine::begin_capture`).
pub(in crate::engine) fn begin(s: &Arc<Timeline>) -> Result<Capture> {
    let dev = &s.device.inner;
    dev.bind()?;
    let state = CaptureState::new(s);
    {
        // No capture begins under a blocking copy on this stream (see
        // `Timeline::blocking`); lock order: that, then the book.
        let _blocking = s.lock_blocking();
        let mut book = s.lock();
        s.refuse_if_capturing("Stream::capture")?;
        let st = book.stream(s);
        // Waits on work from before the capture must never need a new
        // record on this stream while it captures.
        s.seal_marker(st)?;
        let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // A live stream of the current context, not capturing.
        call("cuStreamBeginCapture", || cu::stream::begin_capture(s.raw(), mode))?;
        set_capture_locked(s, st, Some(&state));
    }
    Ok(Capture { state, thread: ThreadCapture::begin() })
}

/// Ends capture `c` (see `engine::end_capture`).
pub(in crate::engine) fn end(c: Capture) -> Result<Ended> {
    let Capture { state, thread } = c;
    let ended = end_capture(&state);
    // Frees deferred on this thread run now, outside the capture.
    drop(thread);
    let graph = ended?;
    // Take what the graph keeps, not the whole state: `ended` must stay set
    // for operations still holding this capture.
    let mut g = state.inner.lock();
    let accesses = std::mem::take(&mut g.data.accesses).into_values().collect();
    let keep = std::mem::take(&mut g.data.keep);
    let peer_touched = std::mem::take(&mut g.data.peer_touched).into_values().collect();
    drop(g);
    Ok(Ended { graph, accesses, keep, peer_touched })
}

/// Joins the forks, ends the capture on every stream, and releases what the
/// capture held; returns the graph or the driver's error.
///
/// Everything from the joins to clearing the streams' capture state happens
/// under the capture's submission lock (see [`CaptureState`]): an operation
/// of another thread is either in the graph or finds the capture ended and
/// runs as ordinary tracked work. None of these driver calls waits for the
/// device.
fn end_capture(state: &Arc<CaptureState>) -> Result<Held<GraphKind>> {
    let origin = &state.origin;
    let dev = &origin.device.inner;
    let (forks, events, joined, ended) = capture_gate::end(
        &state.inner,
        |inner| {
            let forks = std::mem::take(&mut *state.streams.lock().unwrap_or_else(|p| p.into_inner()));
            let mut joined = Ok(());
            for f in &forks {
                if joined.is_ok() {
                    joined = state.edge(inner, f, origin.raw(), &origin.device);
                }
            }
            let ended = dev
                .bind()
                .and_then(|()| call("cuStreamEndCapture", || cu::stream::end_capture(origin.raw())))
                .map(|g| Held::new(&origin.device, g));
            if ended.is_err() {
                leave_capture(origin);
            }
            let events = std::mem::take(&mut inner.events);
            (forks, events, joined, ended)
        },
        |(forks, ..)| {
            for s in forks.iter().chain(std::iter::once(origin)) {
                set_capture(s, None);
            }
        },
    );
    for ev in events {
        crate::engine::release::release_later(&origin.device, ev);
    }
    for s in forks.iter().chain(std::iter::once(origin)) {
        crate::engine::capture::deferred::run_stream_capture_end(s.id);
    }
    let graph = ended?;
    joined?;
    Ok(graph)
}

/// After a failed `cuStreamEndCapture`: if the driver still has the stream
/// capturing, end the capture once more and discard whatever it returns, so
/// the stream is usable again.
fn leave_capture(stream: &Timeline) {
    let still = call("cuStreamIsCapturing", || cu::stream::is_capturing(stream.raw()))
        .is_ok_and(|status| status != cuda_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE);
    if !still {
        return;
    }
    match call("cuStreamEndCapture", || cu::stream::end_capture(stream.raw())) {
        Ok(g) => drop(Held::new(&stream.device, g)),
        Err(e) => log::error!("a stream is stuck capturing a graph: {e}"),
    }
}
