//! CUDA graphs: capture a stream (and streams forked from it) into a graph,
//! instantiate it, replay it.
//!
//! Tracking stays correct through capture without touching the driver's
//! event queries (illegal while capturing):
//! - captured operations are not executed, so they do not enter the buffers'
//!   trackers; a capture-local tracker orders them among the capture's own
//!   streams (events recorded and waited inside the capture become graph
//!   edges);
//! - the graph remembers every buffer it touches and how, and holds the
//!   memory alive; each replay ([`GraphExec::launch`]) is one tracked
//!   operation over that set, so it waits for conflicting uses on other
//!   streams and later uses wait for it;
//! - host-visible work (copies to or from host memory, host waits, host
//!   functions, allocation on a capturing stream) is refused with
//!   [`Error::Capturing`]; frees that fall due on a capturing stream are
//!   issued when the capture ends.

use crate::capture::capture_gate::{self, CaptureSlot, Captures, Gate};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::launch::module::ModuleInner;
use crate::memory::buffer::Allocation;
use crate::release::Held;
use crate::stream::{Point, Stream, StreamInner, create_event};
use crate::tracker::{Access, Conflicts, OnStream, Target, Use, Uses, run_tracked_uncaptured};
use cuda_sys::handle::kind::{GraphExecKind, GraphKind};
use cuda_sys::result as cu;
use cuda_sys::{BorrowedStream, CUevent_flags, CUgraph, CUstreamCaptureMode, OwnedEvent};
use std::cell::Cell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// What a captured launch keeps alive for the graph.
pub(crate) type KeepAlive = Arc<ModuleInner>;

/// A captured use: (stream id, the capture's sequence number). Captured
/// work never completes while captured.
#[derive(Clone, Copy)]
struct Captured {
    stream: u64,
    seq: u64,
}

impl OnStream for Captured {
    fn stream_id(&self) -> u64 {
        self.stream
    }
    fn is_complete(&self) -> bool {
        false
    }
    fn advance(&mut self, to: u64) {
        self.seq = self.seq.max(to);
    }
}

#[derive(Default)]
pub(crate) struct CaptureInner {
    /// The capture's own uses of each allocation: the same conflict rules
    /// as eager submission, over capture sequence numbers.
    local: HashMap<u64, Conflicts<Captured>>,
    accesses: HashMap<u64, (Arc<Allocation>, Access)>,
    modules: Vec<Arc<ModuleInner>>,
    events: Vec<OwnedEvent>,
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
/// `streams`, then a stream's state; nothing takes `inner` while holding a
/// stream's state.
pub(crate) struct CaptureState {
    origin: Arc<StreamInner>,
    streams: Mutex<Vec<Arc<StreamInner>>>,
    inner: Gate<CaptureInner>,
}

impl Captures for CaptureState {
    type Data = CaptureInner;
    fn gate(&self) -> &Gate<CaptureInner> {
        &self.inner
    }
}

impl CaptureSlot for StreamInner {
    type Capture = CaptureState;
    fn capture_hint(&self) -> bool {
        StreamInner::capture_hint(self)
    }
    fn capture(&self) -> Option<Arc<CaptureState>> {
        self.lock().capture.clone()
    }
}

impl CaptureState {
    fn stream(&self, id: u64) -> Option<Arc<StreamInner>> {
        if self.origin.id == id {
            return Some(self.origin.clone());
        }
        self.streams.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|s| s.id == id).cloned()
    }

    /// Makes capturing stream `to` wait for capturing stream `from`'s work so
    /// far: an event recorded on `from` and waited on `to`, both captured as
    /// graph edges.
    fn edge(
        &self,
        inner: &mut CaptureInner,
        from: &StreamInner,
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

fn lock_capture(s: &StreamInner) -> Option<Arc<CaptureState>> {
    s.capture()
}

/// The capture path of [`crate::tracker::run_tracked`]: joins `op` to the
/// capture `cap` that `stream` takes part in, ordered after the capture's
/// conflicting operations on its other streams (graph edges), and records
/// its uses in the graph. Called by `capture_gate::submit` with the
/// capture's gate locked and open (`inner` is its data), so `op`'s driver
/// call cannot land after `cuStreamEndCapture`.
pub(crate) fn run_captured<R, U: Uses + ?Sized>(
    stream: &Stream,
    op_name: &'static str,
    uses: &U,
    keep: Option<&KeepAlive>,
    cap: &CaptureState,
    inner: &mut CaptureInner,
    op: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<R> {
    let s = &stream.inner;
    let mut list: Vec<(Arc<Allocation>, Access)> = Vec::new();
    let mut host = false;
    uses.each(|t, a| match t {
        Target::Device(alloc) => list.push((alloc.clone(), a)),
        Target::Host(_) => host = true,
    });
    if host {
        return Err(Error::Capturing { op: op_name });
    }
    let device = stream.device();
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
    let r = op(s.raw())?;
    inner.seq += 1;
    let seq = inner.seq;
    for (alloc, a) in &list {
        let lt = inner.local.entry(alloc.res.id).or_default();
        lt.record(s.id, seq, *a, || Captured { stream: s.id, seq });
        let entry = inner.accesses.entry(alloc.res.id).or_insert_with(|| (alloc.clone(), *a));
        if *a == Access::Write {
            entry.1 = Access::Write;
        }
    }
    if let Some(m) = keep
        && !inner.modules.iter().any(|x| Arc::ptr_eq(x, m))
    {
        inner.modules.push(m.clone());
    }
    Ok(r)
}

/// [`Stream::wait_stream`] when either stream is capturing: allowed only
/// between two streams of one capture (a graph edge). `Ok(false)`: neither
/// stream captures any more (the capture ended meanwhile) and nothing was
/// submitted; the caller makes the ordinary wait.
pub(crate) fn join_in_capture(to: &Arc<StreamInner>, from: &Arc<StreamInner>) -> Result<bool> {
    let refused = Error::Capturing { op: "Stream::wait_stream between a capture and work outside it" };
    let (a, b) = (lock_capture(to), lock_capture(from));
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

/// The scope of a capture: the capturing stream, and forks of it.
pub struct Capture<'a> {
    origin: &'a Stream,
    state: Arc<CaptureState>,
}

impl Capture<'_> {
    /// The capturing stream (the one [`Stream::capture`] was called on).
    pub fn stream(&self) -> &Stream {
        self.origin
    }

    /// A new stream that joins the capture, ordered after everything captured
    /// on the origin so far (an event recorded on the origin and waited on
    /// the fork). Work on it becomes parallel branches of the graph; it is
    /// joined back into the origin when the capture ends.
    ///
    /// # Errors
    /// A driver error.
    pub fn fork(&self) -> Result<Stream> {
        let fork = Stream::new(self.origin.device())?;
        let mut g = self.state.inner.lock();
        if g.is_ended() {
            return Err(Error::Capturing { op: "Capture::fork after the capture ended" });
        }
        {
            let mut st = fork.inner.lock();
            st.capture = Some(self.state.clone());
            fork.inner.capturing.store(true, Ordering::Release);
        }
        self.state.streams.lock().unwrap_or_else(|p| p.into_inner()).push(fork.inner.clone());
        self.state.edge(&mut g.data, &self.state.origin, fork.inner.raw(), self.origin.device())?;
        Ok(fork)
    }
}

impl Stream {
    /// Captures the work `f` submits on this stream (and on streams it
    /// [`Capture::fork`]s) into a graph (`cuStreamBeginCapture` in thread-local
    /// mode … `cuStreamEndCapture`). Nothing runs during the capture; replay
    /// it with [`Graph::instantiate`] and [`GraphExec::launch`].
    ///
    /// Inside `f`, device-side operations (launches, device copies, fills)
    /// are captured; host-visible ones return [`Error::Capturing`]. Whatever
    /// `f` returns, the capture is ended and the stream usable again.
    ///
    /// # Errors
    /// [`Error::Capturing`] if the stream is already capturing; `f`'s error;
    /// a driver error (for example `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`).
    pub fn capture<F>(&self, f: F) -> Result<Graph>
    where
        F: FnOnce(&Capture<'_>) -> Result<()>,
    {
        let s = &self.inner;
        let dev = &s.device.inner;
        dev.bind()?;
        let state = Arc::new(CaptureState {
            origin: s.clone(),
            streams: Mutex::new(Vec::new()),
            inner: Gate::new(CaptureInner::default()),
        });
        {
            let mut st = s.lock();
            st.refuse_if_capturing("Stream::capture")?;
            // Waits on work from before the capture must never need a new
            // record on this stream while it captures.
            s.seal_marker(&mut st)?;
            let mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
            // A live stream of the current context, not capturing.
            call("cuStreamBeginCapture", || cu::stream::begin_capture(s.raw(), mode))?;
            st.capture = Some(state.clone());
            s.capturing.store(true, Ordering::Release);
        }
        let scope = Capture { origin: self, state: state.clone() };
        let thread = crate::capture::thread::ThreadCapture::begin();
        let body = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&scope)));
        let ended = end_capture(&state);
        // Frees deferred on this thread run now, outside the capture.
        drop(thread);
        let body = match body {
            Ok(r) => r,
            Err(panic) => {
                drop(ended);
                std::panic::resume_unwind(panic);
            }
        };
        let raw = ended?;
        body?;
        // Take what the graph keeps, not the whole state: `ended` must stay
        // set for operations still holding this capture.
        let mut g = state.inner.lock();
        let accesses = std::mem::take(&mut g.data.accesses).into_values().collect();
        let modules = std::mem::take(&mut g.data.modules);
        drop(g);
        Ok(Graph { raw, device: self.device().clone(), accesses, modules, _not_sync: PhantomData })
    }
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
                let mut st = s.lock();
                st.capture = None;
                s.capturing.store(false, Ordering::Release);
            }
        },
    );
    for ev in events {
        crate::release::release_later(&origin.device, ev);
    }
    for s in forks.iter().chain(std::iter::once(origin)) {
        crate::capture::deferred::run_stream_capture_end(s.id);
    }
    let graph = ended?;
    joined?;
    Ok(graph)
}

/// After a failed `cuStreamEndCapture`: if the driver still has the stream
/// capturing, end the capture once more and discard whatever it returns, so
/// the stream is usable again.
fn leave_capture(stream: &StreamInner) {
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

/// A captured graph (`CUgraph`). It keeps every buffer it touches, and the
/// modules of its kernels, alive.
///
/// `Send` but not `Sync`: the driver does not synchronize graph objects
/// internally, and no call on one graph — not even the read-only looking
/// `cuGraphGetNodes` or `cuGraphInstantiate` — may run concurrently with
/// another on the same graph ([graph object thread safety][ts]). Move a graph
/// to another thread, or wrap it in a `Mutex` to share it; an instantiated
/// [`GraphExec`] is `Sync`.
///
/// [ts]: https://docs.nvidia.com/cuda/cuda-driver-api/graphs-thread-safety.html
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let mut x = DeviceBuffer::<u32>::zeroed(&stream, 64)?;
/// let mut y = DeviceBuffer::<u32>::zeroed(&stream, 64)?;
/// stream.synchronize()?;
/// // Capture: nothing runs yet.
/// let graph = stream.capture(|cap| {
///     cap.stream().fill_u32(&mut x, 1)?;
///     cap.stream().copy(&x, &mut y)
/// })?;
/// let exec = graph.instantiate()?; // cuGraphInstantiateWithFlags
/// exec.launch(&stream)?; // cuGraphLaunch: one tracked operation
/// assert_eq!(stream.to_vec(&y)?, [1; 64]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct Graph {
    /// Declared first: destroyed before the modules it launches are unloaded.
    raw: Held<GraphKind>,
    device: Device,
    accesses: Vec<(Arc<Allocation>, Access)>,
    modules: Vec<Arc<ModuleInner>>,
    /// `!Sync` (see above), whatever the other fields are.
    _not_sync: PhantomData<Cell<()>>,
}

impl Graph {
    /// Number of nodes (`cuGraphGetNodes`).
    ///
    /// # Errors
    /// A driver error.
    pub fn node_count(&self) -> Result<usize> {
        let dev = &self.device.inner;
        dev.bind()?;
        call("cuGraphGetNodes", || cu::graph::node_count(self.raw.get()))
    }

    /// Number of distinct buffers the graph touches.
    pub fn buffer_count(&self) -> usize {
        self.accesses.len()
    }

    /// An executable instance (`cuGraphInstantiateWithFlags`, flags 0).
    ///
    /// # Errors
    /// A driver error.
    pub fn instantiate(&self) -> Result<GraphExec> {
        let dev = &self.device.inner;
        dev.bind()?;
        let exec =
            call("cuGraphInstantiateWithFlags", || cu::graph::instantiate_with_flags(self.raw.get(), 0))?;
        Ok(GraphExec {
            state: Mutex::new(ExecState { exec: Some(Held::new(&self.device, exec)), last: None }),
            device: self.device.clone(),
            accesses: self.accesses.clone(),
            _modules: self.modules.clone(),
        })
    }

    /// The raw handle.
    pub fn as_raw(&self) -> CUgraph {
        self.raw.get().as_raw()
    }
}

/// An instantiated graph (`CUgraphExec`), replayed with [`GraphExec::launch`].
///
/// `Send + Sync`: launches from several threads are serialized on the exec
/// (the driver does not synchronize a `CUgraphExec` internally), and the
/// driver orders each launch after the previous launches of the same exec.
pub struct GraphExec {
    /// The exec and its last launch, behind one lock held across every
    /// `cuGraphLaunch`: calls on an exec must be serialized (graph objects
    /// are not internally synchronized), and the lock is what makes
    /// `GraphExec` `Sync` without an `unsafe impl`.
    state: Mutex<ExecState>,
    device: Device,
    accesses: Vec<(Arc<Allocation>, Access)>,
    _modules: Vec<Arc<ModuleInner>>,
}

/// A [`GraphExec`]'s exec handle (always `Some` until `Drop`) and the point
/// of its last launch.
struct ExecState {
    exec: Option<Held<GraphExecKind>>,
    last: Option<Point>,
}

impl GraphExec {
    /// Replays the graph on `stream` (`cuGraphLaunch`) as one tracked
    /// operation over every buffer the graph touches.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`]; [`Error::Capturing`] on a capturing stream;
    /// a driver error.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        if !stream.device().same(&self.device) {
            return Err(Error::DeviceMismatch {
                what: "the graph",
                expected: stream.device().ordinal(),
                found: self.device.ordinal(),
            });
        }
        if stream.is_capturing() {
            return Err(Error::Capturing { op: "GraphExec::launch" });
        }
        let uses: Vec<Use<'_>> = self.accesses.iter().map(|(a, acc)| (Target::Device(a), *acc)).collect();
        // Held across the driver call: launches of one exec from several
        // threads are serialized. Lock order: this, then the tracker slab and
        // the stream (nothing takes this lock while holding those), and
        // `cuGraphLaunch` does not wait for the device.
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(exec) = st.exec.as_ref() else {
            return Err(Error::InvalidArgument("a graph exec launched after its release".into()));
        };
        // Never joins a capture (a racing one is refused): the exec is not
        // kept alive by graphs.
        let ((), ticket) = run_tracked_uncaptured(stream, "cuGraphLaunch", uses.as_slice(), |raw| {
            // Every buffer the graph touches is kept alive by `accesses` and
            // ordered by the tracking of this launch; no other call on the
            // exec runs meanwhile (the state lock is held).
            call("cuGraphLaunch", || cu::graph::launch(exec.get(), raw))
        })?;
        st.last = Some(Point { stream: stream.inner.clone(), ticket });
        Ok(())
    }
}

impl Drop for GraphExec {
    /// Destroys the exec once its last launch completed (a host wait); inside
    /// a host function all of it happens later on an ordinary thread.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        let (exec, last) = (st.exec.take(), st.last.take());
        crate::capture::host_fn::now_or_deferred(move || {
            if let Some(p) = last
                && let Err(e) = p.host_wait()
            {
                log::error!("leaking a CUDA graph exec: waiting for its last launch failed: {e}");
                std::mem::forget(exec);
                return;
            }
            drop(exec);
        });
    }
}
