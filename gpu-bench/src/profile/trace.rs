//! The trace model: what a profiled stretch of a program did, on one time
//! axis (nanoseconds of `gpu_sync::trace::now_ns()`, the host's monotonic
//! clock). Data only: the exporters (`chrome`, `table`, `svg`) format it,
//! the adapter (`adapt`) fills it from a gpu-sync recording and, with the
//! CUPTI backend, from CUPTI's activity records.
//!
//! Three kinds of things are on the axis:
//! - host ranges ([`RangeRecord`]): named, nested, per host thread;
//! - host operations ([`OpRecord`]): each stream-ordered driver call the
//!   program made through gpu-sync (a launch, a copy, a graph replay …),
//!   with the host time around the call;
//! - device spans ([`DeviceSpan`]): what ran on a stream and when, each tied
//!   back to the host operation that enqueued it where that is known (one
//!   graph replay has one span per kernel inside the graph).

use serde::{Deserialize, Serialize};

/// Where the device spans of a trace came from.
///
/// Part of a [`Trace`](crate::profile::Trace);
/// [`Profiler`](crate::profile::Profiler)'s example makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A pair of timing events around each device operation, mapped to the
    /// host clock by a per-stream calibration.
    Events,
    /// CUPTI's activity records: the GPU's own start and end timestamps,
    /// mapped to the host clock by sampling both clocks.
    Cupti,
    /// Host times only (no device spans).
    HostOnly,
}

impl Source {
    /// Its name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            Source::Events => "events",
            Source::Cupti => "cupti",
            Source::HostOnly => "host only",
        }
    }
}

/// A host thread that recorded something.
///
/// Part of a [`Trace`](crate::profile::Trace);
/// [`Profiler`](crate::profile::Profiler)'s example makes one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTrack {
    /// The thread's id (`gpu_sync::trace::thread_id`).
    pub id: u64,
    /// Its name, where it has one.
    pub name: Option<String>,
}

/// A stream with device spans.
///
/// Part of a [`Trace`](crate::profile::Trace);
/// [`Profiler`](crate::profile::Profiler)'s example makes one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamTrack {
    /// Device ordinal.
    pub device: i32,
    /// The stream's id (`gpu_sync::Stream::id`); for a stream the program
    /// did not create through gpu-sync (seen only by CUPTI), CUPTI's stream
    /// id plus [`FOREIGN_STREAM`].
    pub stream: u64,
    /// Its priority, where known (lower numbers run first).
    pub priority: Option<i32>,
}

/// Stream ids at and above this are CUPTI's ids of streams gpu-sync did not
/// create (`FOREIGN_STREAM + cupti_stream_id`).
pub const FOREIGN_STREAM: u64 = 1 << 48;

impl StreamTrack {
    /// "stream N (priority P)", the track's name in every output.
    pub fn label(&self) -> String {
        let id = if self.stream >= FOREIGN_STREAM {
            format!("cupti stream {}", self.stream - FOREIGN_STREAM)
        } else {
            format!("stream {}", self.stream)
        };
        match self.priority {
            Some(p) => format!("{id} (priority {p})"),
            None => id,
        }
    }
}

// What an operation was: gpu-sync's own recording types (serialized
// through its `serde` feature), so the trace and the recording never
// disagree on them.
pub use gpu_sync::trace::{CopyDir, HostMem, OpKind, OpRecord, RangeRecord, WaitSource};

/// What ran on a stream and when.
///
/// Part of a [`Trace`](crate::profile::Trace);
/// [`Profiler`](crate::profile::Profiler)'s example makes one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSpan {
    /// Kernel name, "memcpy HtoD", "memset", …
    pub name: String,
    /// What it was.
    pub kind: OpKind,
    /// Device ordinal.
    pub device: i32,
    /// The stream's id (see [`StreamTrack::stream`]).
    pub stream: u64,
    /// Start on the host clock, ns.
    pub start_ns: u64,
    /// End on the host clock, ns.
    pub end_ns: u64,
    /// The host operation that enqueued it, where known.
    pub op: Option<u64>,
    /// The graph it ran in (CUPTI's graph id), for a kernel of a replay.
    pub graph: Option<u32>,
}

impl DeviceSpan {
    /// Its duration, ns.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Device memory at one moment (gpu-sync's ledger).
///
/// Part of a [`Trace`](crate::profile::Trace);
/// [`Profiler`](crate::profile::Profiler)'s example makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySample {
    /// When, ns.
    pub t_ns: u64,
    /// Device ordinal.
    pub device: i32,
    /// Bytes allocated by live buffers.
    pub allocated: u64,
    /// Bytes the stream-ordered pool holds.
    pub reserved: u64,
}

/// How one clock was mapped onto the host clock, and how tightly.
///
/// Part of a [`Trace`](crate::profile::Trace);
/// [`Profiler`](crate::profile::Profiler)'s example makes one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockAlignment {
    /// Which clock: "events, stream N" or "cupti".
    pub clock: String,
    /// Half the width of the tightest bracket of host reads around the
    /// sample the mapping rests on, ns: device times are on the host clock
    /// within this.
    pub uncertainty_ns: u64,
}

/// Records lost, by where they were lost.
///
/// Part of a [`Trace`](crate::profile::Trace);
/// [`Profiler`](crate::profile::Profiler)'s example makes one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Records gpu-sync's recorder could not keep.
    pub recorder: u64,
    /// CUPTI activity records dropped for lack of buffer space during the
    /// trace.
    pub cupti: u64,
}

/// A profiled stretch of a program (see the module docs).
///
/// [`Profiler`](crate::profile::Profiler)'s example uses one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Where the device spans came from.
    pub source: Source,
    /// Host threads that recorded something.
    pub threads: Vec<ThreadTrack>,
    /// Streams with their ids and priorities.
    pub streams: Vec<StreamTrack>,
    /// Host ranges.
    pub ranges: Vec<RangeRecord>,
    /// Host operations.
    pub ops: Vec<OpRecord>,
    /// Device spans.
    pub spans: Vec<DeviceSpan>,
    /// Device memory over time.
    pub memory: Vec<MemorySample>,
    /// Records lost.
    pub dropped: Dropped,
    /// How device clocks were mapped onto the host clock.
    pub clocks: Vec<ClockAlignment>,
    /// The profiler steps this trace covers (`first..=last`), with a schedule.
    pub steps: Option<(u64, u64)>,
    /// What the reader should know (a backend that fell back, and why).
    pub notes: Vec<String>,
    /// The devices profiled, with their names (absent in traces written
    /// before it was added).
    #[serde(default)]
    pub devices: Vec<DeviceTrack>,
}

/// A profiled device.
///
/// Part of a [`Trace`]; [`Trace::merge`]'s example reads them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceTrack {
    /// Device ordinal.
    pub device: i32,
    /// The driver's name of the device (`cuDeviceGetName`).
    pub name: String,
}

impl Trace {
    /// An empty trace of `source`.
    pub fn new(source: Source) -> Trace {
        Trace {
            source,
            threads: Vec::new(),
            streams: Vec::new(),
            ranges: Vec::new(),
            ops: Vec::new(),
            spans: Vec::new(),
            memory: Vec::new(),
            dropped: Dropped::default(),
            clocks: Vec::new(),
            steps: None,
            notes: Vec::new(),
            devices: Vec::new(),
        }
    }

    /// Adds `other`'s threads, streams, ranges, operations (with what they
    /// wait for, [`OpRecord::after`]), spans, memory samples, clocks, notes
    /// and devices to this trace (the traces
    /// of one stretch of a program recorded by one [`Profiler`] per device,
    /// all on the host clock), then normalizes it. Dropped counts add up;
    /// the steps and the source stay this trace's.
    ///
    /// [`Profiler`]: crate::profile::Profiler
    ///
    /// ```
    /// # gpu_sync::sim::install()?;
    /// use gpu_bench::profile::{Backend, Profiler};
    /// use gpu_sync::{Device, DeviceBuffer, Stream};
    /// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    /// let (s0, s1) = (Stream::new(&d0)?, Stream::new(&d1)?);
    /// let mut a = DeviceBuffer::<u32>::zeroed(&s0, 1 << 16)?;
    /// let mut b = DeviceBuffer::<u32>::zeroed(&s1, 1 << 16)?;
    /// let mut p0 = Profiler::new(&d0).backend(Backend::Events);
    /// let mut p1 = Profiler::new(&d1).backend(Backend::Events);
    /// p0.start()?;
    /// p1.start()?;
    /// s0.fill_u32(&mut a, 1)?;
    /// s1.wait_stream(&s0)?; // device 1 waits for device 0's fill
    /// s1.fill_u32(&mut b, 2)?;
    /// let mut trace = p0.finish()?.unwrap();
    /// trace.merge(p1.finish()?.unwrap());
    /// assert_eq!(trace.devices.len(), 2);
    /// let wait = trace.ops.iter().find(|o| o.device == 1 && o.name == "wait").unwrap();
    /// assert_eq!(wait.after[0].stream, s0.id()); // the fill's record: wait.after[0].op
    /// let json = trace.chrome_json(); // a process per device, an arrow 0 → 1
    /// assert!(json.contains("\"cat\":\"wait\""));
    /// # Ok::<(), gpu_bench::Error>(())
    /// ```
    pub fn merge(&mut self, other: Trace) {
        for t in other.threads {
            if !self.threads.iter().any(|x| x.id == t.id) {
                self.threads.push(t);
            }
        }
        for s in other.streams {
            if !self.streams.iter().any(|x| x.stream == s.stream) {
                self.streams.push(s);
            }
        }
        for r in other.ranges {
            if !self.ranges.iter().any(|x| x.id == r.id) {
                self.ranges.push(r);
            }
        }
        for o in other.ops {
            if !self.ops.iter().any(|x| x.id == o.id) {
                self.ops.push(o);
            }
        }
        self.spans.extend(other.spans);
        self.memory.extend(other.memory);
        self.dropped.recorder += other.dropped.recorder;
        self.dropped.cupti += other.dropped.cupti;
        self.clocks.extend(other.clocks);
        for n in other.notes {
            if !self.notes.contains(&n) {
                self.notes.push(n);
            }
        }
        for d in other.devices {
            if !self.devices.iter().any(|x| x.device == d.device) {
                self.devices.push(d);
            }
        }
        self.normalize();
    }

    /// The earliest and latest time of anything in the trace, ns; `None`
    /// for an empty trace.
    pub fn bounds(&self) -> Option<(u64, u64)> {
        let starts = self
            .ranges
            .iter()
            .map(|r| (r.start_ns, r.end_ns))
            .chain(self.ops.iter().map(|o| (o.host_start_ns, o.host_end_ns)))
            .chain(self.spans.iter().map(|s| (s.start_ns, s.end_ns)))
            .chain(self.memory.iter().map(|m| (m.t_ns, m.t_ns)));
        starts.fold(None, |acc, (a, b)| match acc {
            None => Some((a, b.max(a))),
            Some((lo, hi)) => Some((lo.min(a), hi.max(b).max(a))),
        })
    }

    /// Device spans no host operation of the trace claims (with CUPTI:
    /// another library's work on the device, or the driver's own).
    pub fn unclaimed(&self) -> usize {
        self.spans.iter().filter(|s| s.op.is_none()).count()
    }

    /// The stream track of `stream`, if the trace has it.
    pub fn stream(&self, stream: u64) -> Option<&StreamTrack> {
        self.streams.iter().find(|s| s.stream == stream)
    }

    /// The host operation of `id`.
    pub fn op(&self, id: u64) -> Option<&OpRecord> {
        self.ops.iter().find(|o| o.id == id)
    }

    /// Adds a track for every thread and stream that something in the
    /// trace names and no track describes yet; sorts ranges, ops and spans
    /// by start (then id) so every exporter sees one order.
    pub fn normalize(&mut self) {
        let mut threads: Vec<u64> =
            self.ranges.iter().map(|r| r.thread).chain(self.ops.iter().map(|o| o.thread)).collect();
        threads.sort_unstable();
        threads.dedup();
        for t in threads {
            if !self.threads.iter().any(|x| x.id == t) {
                self.threads.push(ThreadTrack { id: t, name: None });
            }
        }
        self.threads.sort_by_key(|t| t.id);
        let mut streams: Vec<(i32, u64)> = self
            .spans
            .iter()
            .map(|s| (s.device, s.stream))
            .chain(self.ops.iter().map(|o| (o.device, o.stream)))
            .collect();
        streams.sort_unstable();
        streams.dedup();
        for (device, stream) in streams {
            if !self.streams.iter().any(|x| x.stream == stream) {
                self.streams.push(StreamTrack { device, stream, priority: None });
            }
        }
        self.streams.sort_by_key(|s| (s.device, s.stream));
        // Outer ranges first among equal starts (a longer range encloses).
        self.ranges.sort_by_key(|r| (r.start_ns, std::cmp::Reverse(r.end_ns), r.id));
        self.ops.sort_by_key(|o| (o.host_start_ns, o.id));
        self.spans.sort_by_key(|s| (s.start_ns, s.end_ns, s.op));
        self.memory.sort_by_key(|m| m.t_ns);
        self.devices.sort_by_key(|d| d.device);
    }

    /// The part of the trace that starts inside `[start_ns, end_ns]`: ranges,
    /// host operations, device spans and memory samples beginning there
    /// (kept whole), with the tracks, counts and notes (for a picture of one
    /// stretch of a long trace).
    pub fn window(&self, start_ns: u64, end_ns: u64) -> Trace {
        let inside = |t: u64| (start_ns..=end_ns).contains(&t);
        let mut t = self.clone();
        t.ranges.retain(|r| inside(r.start_ns));
        t.ops.retain(|o| inside(o.host_start_ns));
        t.spans.retain(|s| inside(s.start_ns));
        t.memory.retain(|m| inside(m.t_ns));
        t
    }

    /// The chain of ranges from `range` up to its outermost ancestor.
    pub fn ancestors(&self, range: Option<u64>) -> Vec<u64> {
        let mut out = Vec::new();
        let mut cur = range;
        while let Some(id) = cur {
            if out.contains(&id) {
                break; // a cycle would be a recorder bug; never loop on it
            }
            out.push(id);
            cur = self.ranges.iter().find(|r| r.id == id).and_then(|r| r.parent);
        }
        out
    }
}
