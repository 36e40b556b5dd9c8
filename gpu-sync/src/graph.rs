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

use crate::device::Device;
use crate::engine::{self, Access, Allocation, CaptureHandle, Held, KeepAlive, Kind, Op, Point, Target, Use};
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::stream::Stream;
use crate::trace::{OpDesc, OpKind};
use cuda_sys::handle::kind::{GraphExecKind, GraphKind};
use cuda_sys::result as cu;
use cuda_sys::{CUgraph, CUgraphExec};
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// The scope of a capture: the capturing stream, and forks of it.
///
/// [`Graph`]'s example captures through one (`cap.stream()`); a second
/// stream joins the capture through [`Capture::fork`]:
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let (mut x, mut y) = (DeviceBuffer::<u32>::zeroed(&stream, 8)?, DeviceBuffer::<u32>::zeroed(&stream, 8)?);
/// stream.synchronize()?;
/// let graph = stream.capture(|cap| {
///     let side = cap.fork()?; // captured too: two branches of one graph
///     cap.stream().fill_u32(&mut x, 1)?;
///     side.fill_u32(&mut y, 2)
/// })?;
/// graph.instantiate()?.launch(&stream)?;
/// assert_eq!((stream.to_vec(&x)?[0], stream.to_vec(&y)?[0]), (1, 2));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct Capture<'a> {
    origin: &'a Stream,
    handle: &'a CaptureHandle,
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
    /// [`Error::Capturing`] after the capture ended; a driver error.
    pub fn fork(&self) -> Result<Stream> {
        // `Stream::new` refuses inside a host function before any lock.
        let fork = Stream::new(self.origin.device())?;
        self.handle.fork(&fork.inner)?;
        Ok(fork)
    }
}

impl Stream {
    /// Captures the work `f` submits on this stream (and on streams it
    /// [`Capture::fork`]s) into a graph (`cuStreamBeginCapture` in thread-local
    /// mode … `cuStreamEndCapture`). Nothing runs during the capture; replay
    /// it with [`Graph::instantiate`] and [`GraphExec::launch`].
    ///
    /// Inside `f`, device-side operations (launches, device copies, fills,
    /// an [`nccl::group`](crate::nccl::group) whose streams all capture: see
    /// [`capture_each`]) are captured; host-visible ones return
    /// [`Error::Capturing`]. Whatever
    /// `f` returns, the capture is ended and the stream usable again.
    ///
    /// # Errors
    /// [`Error::Capturing`] if the stream is already capturing; `f`'s error;
    /// a driver error (for example `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`).
    pub fn capture<F>(&self, f: F) -> Result<Graph>
    where
        F: FnOnce(&Capture<'_>) -> Result<()>,
    {
        let handle = engine::begin_capture(&self.inner)?;
        let scope = Capture { origin: self, handle: &handle };
        let body = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&scope)));
        let ended = engine::end_capture(handle);
        let body = match body {
            Ok(r) => r,
            Err(panic) => {
                drop(ended);
                std::panic::resume_unwind(panic);
            }
        };
        let ended = ended?;
        body?;
        Ok(Graph {
            raw: ended.graph,
            device: self.device().clone(),
            accesses: ended.accesses,
            peer_touched: ended.peer_touched,
            modules: ended.keep,
            _not_sync: PhantomData,
        })
    }
}

/// Captures the work `f` submits on each stream of `streams` into a graph
/// of its own, returned in the streams' order: nested [`Stream::capture`]s,
/// the first stream's outermost. The shape a collective captures in — one
/// graph per device, each holding its rank's part (an
/// [`nccl::group`](crate::nccl::group) over every stream); launch every
/// rank's graph for the collective to finish.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::nccl::{self, Communicator, ReduceOp};
/// use gpu_sync::{Device, DeviceBuffer, Stream, capture_each};
/// let devices = Device::all()?;
/// let comms = Communicator::init_all(&devices)?;
/// let streams: Vec<Stream> = devices.iter().map(Stream::new).collect::<Result<_, _>>()?;
/// let mut bufs: Vec<DeviceBuffer<f32>> =
///     streams.iter().map(|s| DeviceBuffer::from_slice(s, &[1.0; 4])).collect::<Result<_, _>>()?;
/// let graphs = capture_each(&streams, || {
///     nccl::group(|g| {
///         for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
///             g.all_reduce_in_place(c, s, b, ReduceOp::Sum)?;
///         }
///         Ok(())
///     })
/// })?;
/// let execs = graphs.iter().map(|g| g.instantiate()).collect::<Result<Vec<_>, _>>()?;
/// for (e, s) in execs.iter().zip(&streams) {
///     e.launch(s)?; // every rank's graph
/// }
/// let n = devices.len() as f32;
/// assert_eq!(streams[0].to_vec(&bufs[0])?, [n; 4]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
///
/// # Errors
/// As [`Stream::capture`], for any of the streams; `f`'s error.
pub fn capture_each(streams: &[Stream], f: impl FnOnce() -> Result<()>) -> Result<Vec<Graph>> {
    let mut f = Some(f);
    let mut graphs = Vec::with_capacity(streams.len());
    nest(
        streams,
        &mut || match f.take() {
            Some(f) => f(),
            None => Err(Error::Internal("capture_each ran its body twice".into())),
        },
        &mut graphs,
    )?;
    // Pushed innermost first.
    graphs.reverse();
    Ok(graphs)
}

/// [`capture_each`]: `body` inside the captures of `streams`, each graph
/// pushed to `out` as its capture ends.
fn nest(streams: &[Stream], body: &mut dyn FnMut() -> Result<()>, out: &mut Vec<Graph>) -> Result<()> {
    let Some((first, rest)) = streams.split_first() else { return body() };
    let graph = first.capture(|_| nest(rest, body, out))?;
    out.push(graph);
    Ok(())
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
    /// Other devices' allocations its kernels touch through peer access.
    peer_touched: Vec<Arc<Allocation>>,
    modules: Vec<KeepAlive>,
    /// `!Sync` (see above), whatever the other fields are.
    _not_sync: PhantomData<Cell<()>>,
}

impl Graph {
    /// Number of nodes (`cuGraphGetNodes`).
    ///
    /// # Errors
    /// A driver error.
    pub fn node_count(&self) -> Result<usize> {
        self.device.inner.call("cuGraphGetNodes", || cu::graph::node_count(self.raw.get()))
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
        let exec = self
            .device
            .inner
            .call("cuGraphInstantiateWithFlags", || cu::graph::instantiate_with_flags(self.raw.get(), 0))?;
        // For recordings (a replay's `OpKind::GraphLaunch`); read once here.
        let nodes = self.node_count()?;
        Ok(GraphExec {
            nodes,
            state: Mutex::new(ExecState { exec: Some(Held::new(&self.device, exec)), last: None }),
            device: self.device.clone(),
            accesses: self.accesses.clone(),
            peer_touched: self.peer_touched.clone(),
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
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let mut n = DeviceBuffer::from_slice(&stream, &[0u32])?;
/// let mut tmp = DeviceBuffer::<u32>::zeroed(&stream, 1)?;
/// stream.synchronize()?;
/// // Each replay copies n into tmp, then sets n to 5: tmp reads 5 only after
/// // a second replay, ordered after the first.
/// let exec = stream.capture(|cap| {
///     cap.stream().copy(&n, &mut tmp)?;
///     cap.stream().fill_u32(&mut n, 5)
/// })?.instantiate()?;
/// exec.launch(&stream)?;
/// exec.launch(&stream)?;
/// assert_eq!((stream.to_vec(&tmp)?, stream.to_vec(&n)?), (vec![5], vec![5]));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct GraphExec {
    /// The exec and its last launch, behind one lock held across every
    /// `cuGraphLaunch`: calls on an exec must be serialized (graph objects
    /// are not internally synchronized), and the lock is what makes
    /// `GraphExec` `Sync` without an `unsafe impl`.
    state: Mutex<ExecState>,
    device: Device,
    accesses: Vec<(Arc<Allocation>, Access)>,
    /// Other devices' allocations its kernels touch through peer access:
    /// the device rule is asked of them at every launch.
    peer_touched: Vec<Arc<Allocation>>,
    _modules: Vec<KeepAlive>,
    /// The graph's node count at instantiation.
    nodes: usize,
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
        // Peer access its kernels relied on when captured may have been
        // closed since: the device rule, asked again of those buffers.
        engine::reached_again(&stream.inner, &self.peer_touched, "a peer buffer the graph's kernels touch")?;
        let uses: Vec<Use<'_>> = self.accesses.iter().map(|(a, acc)| (Target::Device(a), *acc)).collect();
        // Never joins a capture (a racing one is refused): the exec is not
        // kept alive by graphs.
        let describe =
            || OpDesc { name: "graph launch".into(), kind: OpKind::GraphLaunch { ops: self.nodes } };
        // The graph's device was checked above; its buffers when captured,
        // and those of other devices its kernels touch again just above.
        let op = Op::new("GraphExec::launch", Kind::Uncaptured, uses.as_slice())
            .describe(&describe)
            .device_checked();
        let (mut st, ticket) = engine::submit(&stream.inner, op, |raw| {
            // The exec's lock, taken inside the funnel (after its refusals,
            // under the book) and held across the driver call and until the
            // launch's point is stored: launches of one exec from several
            // threads are serialized. Lock order: the device's book, then
            // this (nothing takes a book while holding it), and
            // `cuGraphLaunch` does not wait for the device.
            let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let Some(exec) = st.exec.as_ref() else {
                return Err(Error::Internal("a graph exec launched after its release".into()));
            };
            // Every buffer the graph touches is kept alive by `accesses` and
            // ordered by the tracking of this launch; no other call on the
            // exec runs meanwhile (the state lock is held).
            call("cuGraphLaunch", || cu::graph::launch(exec.get(), raw))?;
            Ok(st)
        })?;
        st.last = Some(Point::new(stream.inner.clone(), ticket));
        Ok(())
    }

    /// The raw handle (`CUgraphExec`), for a call gpu-sync does not make: a
    /// benchmark's raw `cuGraphLaunch` held against [`GraphExec::launch`].
    /// A launch through it is not tracked (its caller orders the buffers
    /// the graph touches) and must not race a [`GraphExec::launch`] of the
    /// same exec. The handle is valid while `self` lives; dropping `self`
    /// waits for its last tracked launch only, not for raw ones.
    ///
    /// ```
    /// # gpu_sync::sim::install()?;
    /// use gpu_sync::{Device, DeviceBuffer, Stream};
    /// let stream = Stream::new(&Device::get(0)?)?;
    /// let mut n = DeviceBuffer::<u32>::zeroed(&stream, 1)?;
    /// let exec = stream.capture(|cap| cap.stream().fill_u32(&mut n, 5))?.instantiate()?;
    /// assert!(!exec.as_raw().is_null());
    /// # Ok::<(), gpu_sync::Error>(())
    /// ```
    pub fn as_raw(&self) -> CUgraphExec {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.exec.as_ref().map_or(std::ptr::null_mut(), |e| e.get().as_raw())
    }
}

impl Drop for GraphExec {
    /// Destroys the exec once its last launch completed (a host wait); inside
    /// a host function all of it happens later on an ordinary thread, on a
    /// capturing thread when its capture ends (`engine::free_now_or_later`).
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        let (exec, last) = (st.exec.take(), st.last.take());
        engine::free_now_or_later(
            None,
            Box::new(move || {
                if let Some(p) = last
                    && let Err(e) = p.host_wait()
                {
                    log::error!("leaking a CUDA graph exec: waiting for its last launch failed: {e}");
                    std::mem::forget(exec);
                    return;
                }
                drop(exec);
            }),
        );
    }
}
