//! Recording: named host ranges and every stream-ordered operation of a
//! device — launches, copies, memsets, host functions, graph replays,
//! waits, stream-ordered allocations and frees — on one host time axis,
//! with their device spans.
//!
//! Recording hooks into the engine's one submission funnel, so no
//! operation made through gpu-sync escapes it. It is opt-in per device
//! ([`Device::record`](crate::Device::record)), optionally per stream
//! ([`RecordOptions::streams`]); while no [`Recorder`] lives the funnel pays
//! one predictable branch (a relaxed atomic load of the device's flag), each
//! device-side wait the engine makes for another stream one more (the same
//! load: the wait is noted for [`OpRecord::after`]), and [`range`] one
//! atomic load.
//!
//! Device spans come from one of two backends ([`Timing`]):
//! - [`Timing::Events`] (everywhere, cuda-sim included): a pair of pooled
//!   timing events recorded on the raw stream around the driver call,
//!   resolved in [`Recorder::take`] against the stream's calibration event,
//!   an event recorded at a known host time ([`Calibration`]).
//! - [`Timing::Cupti`]: no events; CUPTI's external correlation id
//!   ([`OpRecord::id`]) is pushed around the driver call
//!   (`cuptiActivityPushExternalCorrelationId`, kind `CUSTOM0`) so the
//!   activity records a consumer of `cuda_sys::cupti::activity()` collects
//!   (kernels — those inside replayed graphs too —, copies, memsets)
//!   map back to the operation. The spans are the consumer's to join.
//! - [`Timing::HostOnly`]: host times only.
//!
//! An operation ordered after another stream's work says so in
//! [`OpRecord::after`] ([`WaitSource`]: the stream, and the record of the
//! operation whose end it follows): the waits the engine makes for a
//! buffer used across streams, `Stream::wait_stream`, `Stream::wait` on an
//! event recorded on a tracked stream, a free after uses on other streams.
//!
//! Operations captured into a graph are recorded with
//! [`OpRecord::captured`] set and no span: they run at each replay, which is
//! recorded itself (a `GraphLaunch`, with its span).
//!
//! ```
//! # gpu_sync::sim::install()?;
//! use gpu_sync::trace::{self, RecordOptions, Timing};
//! use gpu_sync::{Device, DeviceBuffer, Stream};
//! let device = Device::get(0)?;
//! let stream = Stream::new(&device)?;
//! let recorder = device.record(RecordOptions::new(Timing::Events))?;
//! trace::scope("fill", || -> gpu_sync::Result<()> {
//!     let mut buf = DeviceBuffer::<u32>::alloc(&stream, 1024)?;
//!     stream.fill_u32(&mut buf, 7)?;
//!     Ok(())
//! })?;
//! let rec = recorder.stop()?;
//! assert!(rec.ops.iter().any(|op| op.name == "memset"));
//! assert_eq!(rec.ranges[0].name, "fill");
//! # Ok::<(), gpu_sync::Error>(())
//! ```

mod clock;
mod events;
mod range;
mod sink;
mod waits;

pub use clock::{now_ns, thread_id, thread_name};
pub use range::{Range, range, scope};

pub(crate) use sink::{DeviceFacts, DeviceTrace, OpDesc, Sink, StreamFacts};
pub(crate) use waits::{Pending as PendingWait, Waits, clear as clear_waits, made_for as waits_made_for};
pub(crate) use waits::{merge as merge_wait, note_position, note_wait};

use crate::error::Result;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// One of this crate's recording tests at a time: `cargo test` runs them as
/// threads of one process, and a device has one recorder at a time.
#[cfg(all(test, feature = "sim"))]
pub(crate) fn one_recorder_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// How device spans are obtained (see the module docs).
///
/// Chosen in [`RecordOptions::new`]: [`Recorder`]'s example and the module's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timing {
    /// A pair of pooled timing events around each operation, resolved
    /// against a per-stream calibration event: [`OpRecord::span`].
    Events,
    /// CUPTI's activity records, joined by the external correlation id
    /// ([`OpRecord::id`]) pushed around each driver call; no events. Needs
    /// libcupti (`cuda_sys::cupti::activity`).
    Cupti,
    /// Host times only: no span.
    HostOnly,
}

/// What [`Device::record`](crate::Device::record) records.
///
/// [`Recorder`]'s example records one stream of a device with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordOptions {
    /// The device-span backend.
    pub timing: Timing,
    /// The streams recorded, by [`Stream::id`](crate::Stream::id); `None`:
    /// every stream of the device.
    pub streams: Option<Vec<u64>>,
}

impl RecordOptions {
    /// Every stream of the device, with `timing`.
    pub fn new(timing: Timing) -> RecordOptions {
        RecordOptions { timing, streams: None }
    }

    /// Only the streams with these [`Stream::id`](crate::Stream::id)s.
    pub fn streams(mut self, ids: impl IntoIterator<Item = u64>) -> RecordOptions {
        self.streams = Some(ids.into_iter().collect());
        self
    }
}

impl Default for RecordOptions {
    /// [`Timing::Events`], every stream.
    fn default() -> RecordOptions {
        RecordOptions::new(Timing::Events)
    }
}

/// A copy's direction.
///
/// Found in an [`OpRecord`]'s `kind`; [`Recording`]'s example reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum CopyDir {
    /// Host to device.
    HtoD,
    /// Device to host.
    DtoH,
    /// Device to device.
    DtoD,
    /// Anything else (host to host, peer to peer): never submitted by
    /// gpu-sync, but a CUPTI record of a copy may report it.
    Other,
}

impl CopyDir {
    /// `"HtoD"`, `"DtoH"`, `"DtoD"` or `"other"`.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyDir::HtoD => "HtoD",
            CopyDir::DtoH => "DtoH",
            CopyDir::DtoD => "DtoD",
            CopyDir::Other => "other",
        }
    }
}

/// The host side of a copy.
///
/// Found in an [`OpRecord`]'s `kind`; [`Recording`]'s example reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum HostMem {
    /// Page-locked memory (a `PinnedBuffer`): an asynchronous copy.
    Pinned,
    /// Pageable memory (a slice): the driver's synchronous copy.
    Pageable,
    /// No host side (device to device).
    Device,
}

/// What a recorded operation is, with its arguments.
///
/// Found in an [`OpRecord`]'s `kind`; [`Recording`]'s example reads it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum OpKind {
    /// A kernel launch (`cuLaunchKernel`).
    Kernel {
        /// Grid dimensions.
        grid: [u32; 3],
        /// Block dimensions.
        block: [u32; 3],
        /// Dynamic shared memory, bytes.
        shared_bytes: u32,
    },
    /// A copy.
    Copy {
        /// Its direction.
        dir: CopyDir,
        /// Bytes copied.
        bytes: u64,
        /// The kind of host memory.
        host: HostMem,
    },
    /// A memset.
    Memset {
        /// Bytes set.
        bytes: u64,
    },
    /// A host function (`cuLaunchHostFunc`).
    HostFn,
    /// A graph replay (`cuGraphLaunch`).
    GraphLaunch {
        /// Operations the graph holds (its nodes).
        ops: usize,
    },
    /// A device-side wait (`cuStreamWaitEvent`): on a user event, or for
    /// another stream's work (`Stream::wait_stream`); what it waits for is
    /// in [`OpRecord::after`].
    Wait,
    /// A stream-ordered allocation (`cuMemAllocAsync`).
    Alloc {
        /// Bytes.
        bytes: u64,
    },
    /// A stream-ordered free (`cuMemFreeAsync`).
    Free,
    /// An event recorded by the user (`cuEventRecord`).
    EventRecord,
    /// Anything else (a foreign launch, a prefetch …): the name says.
    Other,
}

impl OpKind {
    /// The kind's short name: "kernel", "memcpy", "memset", …
    pub fn category(&self) -> &'static str {
        match self {
            OpKind::Kernel { .. } => "kernel",
            OpKind::Copy { .. } => "memcpy",
            OpKind::Memset { .. } => "memset",
            OpKind::HostFn => "host function",
            OpKind::GraphLaunch { .. } => "graph launch",
            OpKind::Wait => "wait",
            OpKind::Alloc { .. } => "alloc",
            OpKind::Free => "free",
            OpKind::EventRecord => "event record",
            OpKind::Other => "other",
        }
    }

    /// The operation's shape, for grouping: grid and block of a kernel,
    /// bytes (and host memory) of a copy, a memset or an allocation, the
    /// operations of a graph replay; `None` where there is none.
    pub fn shape(&self) -> Option<String> {
        let dim = |d: [u32; 3]| {
            if d[1] == 1 && d[2] == 1 { format!("{}", d[0]) } else { format!("{}x{}x{}", d[0], d[1], d[2]) }
        };
        match self {
            OpKind::Kernel { grid, block, shared_bytes } => Some(if *shared_bytes > 0 {
                format!("grid {} block {} smem {shared_bytes}", dim(*grid), dim(*block))
            } else {
                format!("grid {} block {}", dim(*grid), dim(*block))
            }),
            OpKind::Copy { bytes, host, .. } => Some(match host {
                HostMem::Pinned => format!("{bytes} B pinned"),
                HostMem::Pageable => format!("{bytes} B pageable"),
                HostMem::Device => format!("{bytes} B"),
            }),
            OpKind::Memset { bytes } | OpKind::Alloc { bytes } => Some(format!("{bytes} B")),
            OpKind::GraphLaunch { ops } if *ops > 0 => Some(format!("{ops} nodes")),
            _ => None,
        }
    }
}

/// One recorded stream-ordered operation (also the host side of an
/// operation in `gpu-bench`'s profiler trace).
///
/// Found in a [`Recording`]; its example and the module's read them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OpRecord {
    /// Process-unique id, increasing in submission order. With
    /// [`Timing::Cupti`] also the CUPTI external correlation id (kind
    /// `CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0`) pushed around the driver
    /// call, so CUPTI's records map back to it.
    pub id: u64,
    /// The kernel's name for a launch; else `"memcpy HtoD"`,
    /// `"memcpy DtoH"`, `"memcpy DtoD"`, `"memset"`, `"host function"`,
    /// `"graph launch"`, `"wait"`, `"alloc"`, `"free"`, `"event record"`, or
    /// the engine's name of the operation.
    pub name: String,
    /// What it is.
    pub kind: OpKind,
    /// The device's ordinal.
    pub device: i32,
    /// The stream's [`Stream::id`](crate::Stream::id).
    pub stream: u64,
    /// The submitting thread ([`thread_id`]).
    pub thread: u64,
    /// Host time just before the driver call ([`now_ns`]).
    pub host_start_ns: u64,
    /// Host time just after the driver call returned ([`now_ns`]).
    pub host_end_ns: u64,
    /// Device start and end on the host clock ([`now_ns`]) with
    /// [`Timing::Events`]; `None` when captured, with another backend, or
    /// when the events could not be resolved (counted in
    /// [`Recording::dropped`]).
    pub span: Option<(u64, u64)>,
    /// Recorded while its stream captured a graph: it runs at each replay
    /// of the graph (CUPTI shows those runs), not now.
    pub captured: bool,
    /// The innermost open [`range`] of the submitting thread.
    pub range: Option<u64>,
    /// The other streams' work it waits for, device-side, one entry per
    /// stream: for a wait ([`OpKind::Wait`]) what it waits for; for any
    /// other operation the waits the engine made before its driver call (a
    /// buffer it uses was last used on another stream). Empty for captured
    /// operations (their order is the graph's edges) and for copies from
    /// or to pageable memory (the host waits first, not the device).
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Vec::is_empty"))]
    pub after: Vec<WaitSource>,
}

/// What a recorded operation waits for on another stream ([`OpRecord::after`]).
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::trace::{OpKind, RecordOptions, Timing};
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
/// let mut buf = DeviceBuffer::<u32>::alloc(&a, 1024)?;
/// let recorder = device.record(RecordOptions::new(Timing::Events))?;
/// a.fill_u32(&mut buf, 7)?;
/// b.wait_stream(&a)?;
/// let rec = recorder.stop()?;
/// let fill = rec.ops.iter().find(|o| o.name == "memset").unwrap();
/// let wait = rec.ops.iter().find(|o| o.kind == OpKind::Wait).unwrap();
/// assert_eq!((wait.after[0].stream, wait.after[0].op), (a.id(), Some(fill.id)));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct WaitSource {
    /// The device of the stream waited for.
    pub device: i32,
    /// The stream waited for ([`Stream::id`](crate::Stream::id), as
    /// [`OpRecord::stream`] names it).
    pub stream: u64,
    /// The [`OpRecord::id`] of the operation whose end the wait follows
    /// (the last one of that stream it must follow); `None` when that
    /// operation was not recorded (made before recording began, on a
    /// stream not recorded, or more than 4096 recorded operations of its
    /// stream ago) or is a copy from or to pageable memory (made with no
    /// lock held, its place on the stream is not known to its record).
    pub op: Option<u64>,
}

/// One host range ([`range`], [`scope`]) (also a host range in
/// `gpu-bench`'s profiler trace).
///
/// Found in a [`Recording`]; its example and the module's read them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RangeRecord {
    /// Process-unique id.
    pub id: u64,
    /// The range it opened inside, on the same thread.
    pub parent: Option<u64>,
    /// Its name.
    pub name: String,
    /// The thread ([`thread_id`]).
    pub thread: u64,
    /// Host start ([`now_ns`]).
    pub start_ns: u64,
    /// Host end ([`now_ns`]).
    pub end_ns: u64,
}

/// A recorded stream.
///
/// Found in a [`Recording`]; its example and the module's read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// The device's ordinal.
    pub device: i32,
    /// Its [`Stream::id`](crate::Stream::id).
    pub stream: u64,
    /// Its priority (numerically lower is higher).
    pub priority: i32,
    /// The raw `CUstream` as an integer (for CUPTI's `cuptiGetStreamIdEx`,
    /// `cuda_sys::cupti::Activity::stream_id`). It may name another stream
    /// once this one is destroyed.
    pub raw: u64,
}

/// The device's memory ledger at one moment (each allocation and free
/// while recording).
///
/// Found in a [`Recording`]; its example and the module's read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySample {
    /// Host time ([`now_ns`]).
    pub t_ns: u64,
    /// The device's ordinal.
    pub device: i32,
    /// Bytes in live gpu-sync buffers (`Device::memory_stats().allocated`).
    pub allocated: u64,
    /// Bytes the default stream-ordered pool holds from the OS
    /// (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`); 0 without pools, and the
    /// last value read when the sample is taken inside a host function.
    pub reserved: u64,
}

/// How a stream's device event times are mapped to the host clock: an
/// event recorded on the stream while it was idle, at a host time known
/// to lie in `[host_ns - uncertainty_ns / 2, host_ns + uncertainty_ns /
/// 2]` (the two [`now_ns`] reads around its record and completion).
/// Spans on the stream are `host_ns` plus the event time elapsed since it
/// (`cuEventElapsedTime`).
///
/// Found in a [`Recording`]; its example and the module's read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    /// The device's ordinal.
    pub device: i32,
    /// The stream's [`Stream::id`](crate::Stream::id); `0` for the
    /// recorder's own idle stream, the device-wide reference used for a
    /// stream that was never idle when first recorded (event times are one
    /// clock per device).
    pub stream: u64,
    /// The host time given to the calibration event: the middle of the
    /// bracket.
    pub host_ns: u64,
    /// The bracket's width, ns: the mapping is exact within ± half of it
    /// (plus `cuEventElapsedTime`'s resolution, about 0.5 µs).
    pub uncertainty_ns: u64,
}

/// What a [`Recorder`] recorded.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::trace::{RecordOptions, Timing};
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let recorder = device.record(RecordOptions::new(Timing::Events))?;
/// let buf = DeviceBuffer::from_slice(&stream, &[1u8; 4096])?;
/// stream.to_vec(&buf)?;
/// let rec = recorder.stop()?;
/// for op in &rec.ops {
///     // Host times on the recording's clock; device spans from timing events.
///     println!("{} ({}): host {} ns, device {:?}", op.name, op.kind.category(),
///         op.host_end_ns - op.host_start_ns, op.span.map(|(s, e)| e - s));
/// }
/// assert!(rec.ops.iter().any(|op| op.span.is_some()) && rec.dropped == 0);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Operations, in submission order (by [`OpRecord::id`]).
    pub ops: Vec<OpRecord>,
    /// Host ranges that ended, in end order.
    pub ranges: Vec<RangeRecord>,
    /// The memory ledger at each allocation and free.
    pub memory: Vec<MemorySample>,
    /// The streams the operations ran on.
    pub streams: Vec<StreamInfo>,
    /// The event→host mappings used ([`Timing::Events`]).
    pub calibration: Vec<Calibration>,
    /// Operations whose span could not be resolved (an event error) and
    /// records lost, counted: nothing is dropped silently.
    pub dropped: u64,
    /// The backend.
    pub timing: Timing,
}

/// Recording of one device: on while it lives (see
/// [`Device::record`](crate::Device::record)); dropping it (or
/// [`Recorder::stop`]) turns recording off. `Send + Sync`.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::trace::{RecordOptions, Timing};
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
/// // Only stream a's operations: b's fill is not recorded.
/// let recorder = device.record(RecordOptions::new(Timing::Events).streams([a.id()]))?;
/// a.fill_u32(&mut DeviceBuffer::<u32>::alloc(&a, 64)?, 1)?;
/// b.fill_u32(&mut DeviceBuffer::<u32>::alloc(&b, 64)?, 2)?;
/// let rec = recorder.take()?; // what was recorded so far; recording goes on
/// assert!(!rec.ops.is_empty() && rec.ops.iter().all(|op| op.stream == a.id()));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct Recorder {
    sink: Arc<Sink>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("device", &self.sink.facts.ordinal)
            .field("timing", &self.sink.timing)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Takes what was recorded so far, leaving recording on: the device
    /// spans of the operations taken are resolved first, waiting for their
    /// end events (`cuEventSynchronize`, `cuEventElapsedTime`), and the
    /// reference calibration is made again (so event times stay close to
    /// it). Streams are calibrated again at their next operation.
    ///
    /// Waiting for the end events blocks the host until those operations
    /// have run: take after the work was released (not while a gate kernel
    /// holds it back).
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function; a sticky driver
    /// error ([`crate::Error::ContextLost`]). An event that cannot be
    /// resolved is no error: its operation keeps `span: None` and counts in
    /// [`Recording::dropped`].
    pub fn take(&self) -> Result<Recording> {
        self.sink.take()
    }

    /// Turns recording off and returns what was recorded since the last
    /// [`Recorder::take`].
    ///
    /// # Errors
    /// As [`Recorder::take`] (recording is off either way).
    pub fn stop(self) -> Result<Recording> {
        self.sink.stopped.store(true, Ordering::Release);
        self.sink.take()
    }

    /// The device's ordinal.
    pub fn device(&self) -> i32 {
        self.sink.facts.ordinal
    }

    /// The backend.
    pub fn timing(&self) -> Timing {
        self.sink.timing
    }
}

impl Drop for Recorder {
    /// Turns recording off: the device's next submission finds the sink
    /// stopped and clears the funnel's flag. What was not taken is
    /// discarded (its events destroyed).
    fn drop(&mut self) {
        self.sink.stopped.store(true, Ordering::Release);
        if range::RECORDERS.fetch_sub(1, Ordering::Relaxed) == 1 {
            waits::forget();
        }
    }
}
