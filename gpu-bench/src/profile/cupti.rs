//! The CUPTI backend's consumer side: activity records of kernels, copies
//! and memsets (with the GPU's own start and end) taken through cuda-sys's
//! one process-wide subscriber, mapped onto the host clock and joined to
//! the recorded host operations by the external correlation id gpu-sync
//! pushes around each driver call.
//!
//! - Clock: CUPTI's timestamps (`cuptiGetTimestamp`'s clock) are mapped to
//!   `gpu_sync::trace::now_ns()` by sampling `(now_ns, timestamp, now_ns)`
//!   triples and keeping the tightest bracket ([`Alignment`]; its half-width
//!   is the uncertainty), once when a run starts and again at each collect:
//!   the line through the two ([`ClockMap`]) follows a drift between the
//!   clocks.
//! - Join: each external-correlation record ties CUPTI's correlation id of
//!   an API call to our operation's id; a kernel, copy or memset record
//!   with that correlation id becomes a device span of that operation (all
//!   the kernels of a graph replay become spans of the replay). Records of
//!   operations taken in an earlier trace (late records of a warmup) are
//!   left out and counted in the notes; records on the device that no
//!   operation claims are kept, unclaimed, when they fall inside the
//!   trace's time window.

use super::trace::{CopyDir, DeviceSpan, FOREIGN_STREAM, HostMem, OpKind, Trace};
use gpu_sync::cuda_sys::cupti::{
    Activity, ActivityKind, ActivityOp, ActivityRecord, Consumer, CuptiError, EXTERNAL_KIND_CUSTOM0,
};
use std::collections::HashMap;

/// Samples taken for one alignment.
const SAMPLES: usize = 64;

/// One sample of CUPTI's clock against the host clock: the CUPTI time read
/// between two host reads, placed at their middle.
///
/// How the CUPTI backend ([`Backend::Cupti`](crate::profile::Backend::Cupti))
/// puts device spans on the host clock; a [`Trace`](crate::profile::Trace)'s
/// `clocks` record each alignment ([`Profiler`](crate::profile::Profiler)'s example makes a trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alignment {
    /// CUPTI's time, ns.
    pub cupti_ns: u64,
    /// The host time it is taken to have been read at (the bracket's
    /// middle), ns.
    pub host_ns: u64,
    /// Half the width of the bracket, ns.
    pub uncertainty_ns: u64,
}

impl Alignment {
    /// The tightest of `samples` triples `(host before, cupti, host after)`.
    pub fn from_samples(samples: &[(u64, u64, u64)]) -> Option<Alignment> {
        samples.iter().filter(|(a, _, b)| b >= a).min_by_key(|(a, _, b)| b - a).map(|&(a, c, b)| Alignment {
            cupti_ns: c,
            host_ns: a + (b - a) / 2,
            uncertainty_ns: (b - a).div_ceil(2),
        })
    }

    /// CUPTI time minus host time, ns.
    pub fn offset_ns(&self) -> i128 {
        i128::from(self.cupti_ns) - i128::from(self.host_ns)
    }
}

/// CUPTI's clock on the host clock: an offset from one alignment; with a
/// second one at least [`ClockMap::MIN_SPAN_NS`] later, the line through
/// both, which follows a drift between the two clocks (the host clock's
/// NTP slewing is up to 500 ppm) over a long trace.
///
/// How the CUPTI backend ([`Backend::Cupti`](crate::profile::Backend::Cupti))
/// puts device spans on the host clock; a [`Trace`](crate::profile::Trace)'s
/// `clocks` record each alignment ([`Profiler`](crate::profile::Profiler)'s example makes a trace).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockMap {
    /// The alignment at the start.
    pub first: Alignment,
    /// The alignment at the end, if any.
    pub last: Option<Alignment>,
}

impl ClockMap {
    /// Two alignments closer than this (10 ms) give an offset only (their
    /// uncertainties would dominate the slope).
    pub const MIN_SPAN_NS: u64 = 10_000_000;

    /// A CUPTI timestamp on the host clock.
    pub fn to_host(&self, cupti_ns: u64) -> u64 {
        let a = self.first;
        let h = match self.last {
            Some(b) if b.cupti_ns > a.cupti_ns && b.cupti_ns - a.cupti_ns >= Self::MIN_SPAN_NS => {
                let dc = (b.cupti_ns - a.cupti_ns) as f64;
                let dh = b.host_ns as f64 - a.host_ns as f64;
                a.host_ns as f64 + (cupti_ns as f64 - a.cupti_ns as f64) * (dh / dc)
            }
            Some(b) if b.uncertainty_ns < a.uncertainty_ns => (i128::from(cupti_ns) - b.offset_ns()) as f64,
            _ => (i128::from(cupti_ns) - a.offset_ns()) as f64,
        };
        if h <= 0.0 { 0 } else { h.round() as u64 }
    }

    /// How far a mapped time may be off: the wider bracket's half-width.
    pub fn uncertainty_ns(&self) -> u64 {
        self.last.map_or(self.first.uncertainty_ns, |b| b.uncertainty_ns.max(self.first.uncertainty_ns))
    }

    /// The host clock's rate against CUPTI's, minus 1, in parts per
    /// million, when the map has a slope.
    pub fn drift_ppm(&self) -> Option<f64> {
        let (a, b) = (self.first, self.last?);
        let dc = b.cupti_ns.checked_sub(a.cupti_ns).filter(|d| *d >= Self::MIN_SPAN_NS)? as f64;
        Some(((b.host_ns as f64 - a.host_ns as f64) / dc - 1.0) * 1e6)
    }
}

/// Samples CUPTI's clock against the host clock.
///
/// # Errors
/// `cuptiGetTimestamp`'s error.
pub(crate) fn align(activity: &Activity) -> Result<Alignment, CuptiError> {
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let a = gpu_sync::trace::now_ns();
        let c = activity.timestamp()?;
        let b = gpu_sync::trace::now_ns();
        samples.push((a, c, b));
    }
    Alignment::from_samples(&samples).ok_or(CuptiError::Call { call: "cuptiGetTimestamp", name: "no sample" })
}

/// A CUPTI record in the join's terms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rec {
    /// A kernel, copy or memset.
    Work {
        name: String,
        kind: OpKind,
        device: u32,
        stream_id: u32,
        start_ns: u64,
        end_ns: u64,
        correlation: u32,
        graph: u32,
    },
    /// CUPTI's correlation id of an API call ↔ our operation id.
    External { correlation: u32, external: u64 },
    /// A host synchronization CUPTI timed.
    Sync,
    /// CUPTI's or the driver's overhead, ns.
    Overhead { ns: u64 },
}

/// A copy's direction from CUPTI's `CUpti_ActivityMemcpyKind`.
fn copy_dir(kind: u8) -> CopyDir {
    match kind {
        1 => CopyDir::HtoD,
        2 => CopyDir::DtoH,
        8 => CopyDir::DtoD,
        _ => CopyDir::Other,
    }
}

/// One cuda-sys record in the join's terms (`None`: not used).
pub(crate) fn from_activity(r: &ActivityRecord) -> Option<Rec> {
    let work = |name: String, kind: OpKind, graph: u32| Rec::Work {
        name,
        kind,
        device: r.device_id,
        stream_id: r.stream_id,
        start_ns: r.start_ns,
        end_ns: r.end_ns,
        correlation: r.correlation_id,
        graph,
    };
    match &r.op {
        ActivityOp::Kernel { name, grid, block, graph_id, .. } => {
            let u = |v: [i32; 3]| v.map(|x| x.max(0) as u32);
            Some(work(
                name.to_string(),
                OpKind::Kernel { grid: u(*grid), block: u(*block), shared_bytes: 0 },
                *graph_id,
            ))
        }
        ActivityOp::Memcpy { bytes, copy_kind } => {
            let dir = copy_dir(*copy_kind);
            let host = if dir == CopyDir::DtoD { HostMem::Device } else { HostMem::Pinned };
            Some(work(format!("memcpy {}", dir.as_str()), OpKind::Copy { dir, bytes: *bytes, host }, 0))
        }
        ActivityOp::Memset { bytes, .. } => Some(work("memset".into(), OpKind::Memset { bytes: *bytes }, 0)),
        ActivityOp::ExternalCorrelation { external_kind, external_id } => (*external_kind
            == EXTERNAL_KIND_CUSTOM0)
            .then_some(Rec::External { correlation: r.correlation_id, external: *external_id }),
        ActivityOp::Synchronization { .. } => Some(Rec::Sync),
        ActivityOp::Overhead { .. } => Some(Rec::Overhead { ns: r.duration_ns() }),
    }
}

/// What a join did, for the trace's notes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Joined {
    /// Spans tied to an operation of the trace.
    pub claimed: usize,
    /// Spans kept without an operation.
    pub unclaimed: usize,
    /// Records of operations of an earlier trace, left out.
    pub earlier: usize,
    /// Records on other devices or outside the window, left out.
    pub outside: usize,
    /// Host synchronization records.
    pub syncs: usize,
    /// Overhead records and their total, ns.
    pub overheads: (usize, u64),
}

/// Joins `recs` into `trace` (see the module docs): `streams` maps CUPTI's
/// stream ids to ours, `window` is the trace's host-time window.
pub(crate) fn join(
    trace: &mut Trace,
    recs: &[Rec],
    align: &ClockMap,
    device: i32,
    streams: &HashMap<u32, u64>,
    window: (u64, u64),
) -> Joined {
    let ext: HashMap<u32, u64> = recs
        .iter()
        .filter_map(|r| match r {
            Rec::External { correlation, external } => Some((*correlation, *external)),
            _ => None,
        })
        .collect();
    let ops: HashMap<u64, (u64, HostMem)> = trace
        .ops
        .iter()
        .map(|o| {
            (o.id, (o.stream, if let OpKind::Copy { host, .. } = o.kind { host } else { HostMem::Device }))
        })
        .collect();
    let mut j = Joined::default();
    for r in recs {
        let (name, kind, d, stream_id, start_ns, end_ns, correlation, graph) = match r {
            Rec::Work { name, kind, device, stream_id, start_ns, end_ns, correlation, graph } => {
                (name, kind, device, stream_id, start_ns, end_ns, correlation, graph)
            }
            Rec::Sync => {
                j.syncs += 1;
                continue;
            }
            Rec::Overhead { ns } => {
                j.overheads.0 += 1;
                j.overheads.1 += ns;
                continue;
            }
            Rec::External { .. } => continue,
        };
        if i64::from(*d) != i64::from(device) {
            j.outside += 1;
            continue;
        }
        let (a, b) = (align.to_host(*start_ns), align.to_host(*end_ns));
        let mut kind = kind.clone();
        let (op, stream) = match ext.get(correlation) {
            Some(id) => match ops.get(id) {
                Some(&(stream, host)) => {
                    if let OpKind::Copy { host: h, .. } = &mut kind {
                        *h = host;
                    }
                    j.claimed += 1;
                    (Some(*id), stream)
                }
                None => {
                    j.earlier += 1;
                    continue;
                }
            },
            None => {
                if b < window.0 || a > window.1 {
                    j.outside += 1;
                    continue;
                }
                j.unclaimed += 1;
                (None, streams.get(stream_id).copied().unwrap_or(FOREIGN_STREAM + u64::from(*stream_id)))
            }
        };
        trace.spans.push(DeviceSpan {
            name: name.clone(),
            kind,
            device,
            stream,
            start_ns: a,
            end_ns: b.max(a),
            op,
            graph: (*graph != 0).then_some(*graph),
        });
    }
    j
}

/// The CUPTI side of a running profile: the consumer, the alignment, the
/// dropped count when it began.
pub(crate) struct CuptiSide {
    pub(crate) activity: &'static Activity,
    consumer: Consumer,
    /// The alignment the current stretch starts from.
    first: Alignment,
    dropped_at_start: u64,
}

impl CuptiSide {
    /// Subscribes a consumer of kernels, copies and memsets, and aligns the
    /// clocks.
    ///
    /// # Errors
    /// Why CUPTI cannot be used.
    pub(crate) fn start(activity: &'static Activity) -> Result<CuptiSide, CuptiError> {
        const NEEDED: [ActivityKind; 4] = [
            ActivityKind::Kernel,
            ActivityKind::Memcpy,
            ActivityKind::Memset,
            ActivityKind::ExternalCorrelation,
        ];
        let all = [NEEDED.as_slice(), &[ActivityKind::Synchronization, ActivityKind::Overhead]].concat();
        // Synchronization and overhead records are only counted: a CUPTI
        // that will not give them still gives the spans.
        let consumer = match activity.consumer(&all) {
            Ok(c) => c,
            Err(e) => {
                log::info!("profile: CUPTI without synchronization/overhead records ({e})");
                activity.consumer(&NEEDED)?
            }
        };
        let first = align(activity)?;
        Ok(CuptiSide { activity, consumer, first, dropped_at_start: activity.dropped() })
    }

    /// Throws away what arrived so far (a warmup's records).
    ///
    /// # Errors
    /// The flush's error.
    pub(crate) fn discard(&mut self) -> Result<(), CuptiError> {
        self.consumer.take()?;
        self.dropped_at_start = self.activity.dropped();
        self.first = align(self.activity)?;
        Ok(())
    }

    /// Takes what arrived, re-aligns the clocks (the tighter bracket kept),
    /// and joins the records into `trace`, whose operations came from the
    /// recorder; `raw_streams` are the recording's (stream id, raw CUstream).
    ///
    /// # Errors
    /// A CUPTI call's error.
    pub(crate) fn collect(
        &mut self,
        trace: &mut Trace,
        device: &gpu_sync::Device,
        raw_streams: &[(u64, u64)],
        window: (u64, u64),
    ) -> Result<Joined, CuptiError> {
        let records = self.consumer.take()?;
        let last = align(self.activity)?;
        let map = ClockMap { first: self.first, last: Some(last) };
        let mut streams = HashMap::new();
        for &(id, raw) in raw_streams {
            let raw = raw as usize as gpu_sync::cuda_sys::CUstream;
            if let Ok(ours) = self.activity.stream_records(device.raw_context(), raw) {
                streams.insert(ours.stream_id, id);
            }
        }
        let recs: Vec<Rec> = records.iter().filter_map(from_activity).collect();
        let joined = join(trace, &recs, &map, device.ordinal(), &streams, window);
        // The next stretch starts where this one ended.
        self.first = last;
        let dropped = self.activity.dropped();
        trace.dropped.cupti += dropped.saturating_sub(self.dropped_at_start);
        self.dropped_at_start = dropped;
        trace.clocks.push(super::trace::ClockAlignment {
            clock: "cupti".into(),
            uncertainty_ns: map.uncertainty_ns(),
        });
        if let Some(ppm) = map.drift_ppm() {
            trace.notes.push(format!(
                "CUPTI clock mapped by the line through two alignments {:.3} s apart: host clock rate {ppm:+.2} ppm against CUPTI's",
                (last.cupti_ns - map.first.cupti_ns) as f64 * 1e-9
            ));
        }
        Ok(joined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::trace::{OpRecord, Source};

    #[test]
    fn the_tightest_bracket_sets_the_offset_and_its_half_width_the_uncertainty() {
        let a = Alignment::from_samples(&[(100, 5_000, 300), (1_000, 5_950, 1_020), (2_000, 7_000, 2_500)])
            .unwrap();
        assert_eq!(a, Alignment { cupti_ns: 5_950, host_ns: 1_010, uncertainty_ns: 10 });
        assert_eq!(a.offset_ns(), 4_940);
        let m = ClockMap { first: a, last: None };
        assert_eq!(m.to_host(5_950), 1_010);
        assert_eq!((m.uncertainty_ns(), m.drift_ppm()), (10, None));
        assert!(Alignment::from_samples(&[]).is_none());
    }

    #[test]
    fn two_alignments_far_apart_follow_a_drift_and_close_ones_keep_the_tighter_offset() {
        let a = Alignment { cupti_ns: 1_000_000_000, host_ns: 0, uncertainty_ns: 40 };
        // The host clock ran 100 ppm fast over 1 s of CUPTI time.
        let b = Alignment { cupti_ns: 2_000_000_000, host_ns: 1_000_100_000, uncertainty_ns: 60 };
        let m = ClockMap { first: a, last: Some(b) };
        assert_eq!(m.to_host(1_500_000_000), 500_050_000);
        assert_eq!(m.to_host(2_000_000_000), 1_000_100_000);
        assert!((m.drift_ppm().unwrap() - 100.0).abs() < 1e-6);
        assert_eq!(m.uncertainty_ns(), 60);
        // 1 ms apart: no slope; the tighter alignment's offset.
        let c = Alignment { cupti_ns: 1_001_000_000, host_ns: 1_000_010, uncertainty_ns: 5 };
        let m = ClockMap { first: a, last: Some(c) };
        assert_eq!(m.drift_ppm(), None);
        assert_eq!(m.to_host(1_001_000_000), 1_000_010);
    }

    fn host_op(id: u64, name: &str, kind: OpKind) -> OpRecord {
        OpRecord {
            id,
            name: name.into(),
            kind,
            device: 0,
            stream: 5,
            thread: 1,
            host_start_ns: 1_000,
            host_end_ns: 1_010,
            span: None,
            range: None,
            captured: false,
            after: Vec::new(),
        }
    }

    fn work(name: &str, kind: OpKind, corr: u32, a: u64, b: u64, graph: u32) -> Rec {
        Rec::Work {
            name: name.into(),
            kind,
            device: 0,
            stream_id: 77,
            start_ns: a,
            end_ns: b,
            correlation: corr,
            graph,
        }
    }

    #[test]
    fn records_join_by_external_correlation_including_a_graphs_kernels() {
        let mut t = Trace::new(Source::Cupti);
        let k = OpKind::Kernel { grid: [1, 1, 1], block: [32, 1, 1], shared_bytes: 0 };
        let copy = OpKind::Copy { dir: CopyDir::HtoD, bytes: 64, host: HostMem::Pageable };
        t.ops.push(host_op(10, "k", k.clone()));
        t.ops.push(host_op(11, "memcpy HtoD", copy.clone()));
        t.ops.push(host_op(12, "graph launch", OpKind::GraphLaunch { ops: 2 }));
        let cupti_copy = OpKind::Copy { dir: CopyDir::HtoD, bytes: 64, host: HostMem::Pinned };
        let recs = vec![
            Rec::External { correlation: 1, external: 10 },
            Rec::External { correlation: 2, external: 11 },
            Rec::External { correlation: 3, external: 12 },
            Rec::External { correlation: 4, external: 3 }, // an op of an earlier trace
            work("k", k.clone(), 1, 10_100, 10_200, 0),
            work("memcpy HtoD", cupti_copy, 2, 10_300, 10_400, 0),
            work("g0", k.clone(), 3, 10_500, 10_600, 9),
            work("g1", k.clone(), 3, 10_600, 10_650, 9),
            work("late", k.clone(), 4, 10_700, 10_800, 0),
            work("foreign", k.clone(), 99, 10_050, 10_060, 0),
            work("long ago", k.clone(), 98, 10, 20, 0),
            Rec::Work {
                name: "other device".into(),
                kind: k,
                device: 1,
                stream_id: 77,
                start_ns: 10_100,
                end_ns: 10_200,
                correlation: 97,
                graph: 0,
            },
        ];
        let align =
            ClockMap { first: Alignment { cupti_ns: 9_000, host_ns: 0, uncertainty_ns: 5 }, last: None };
        let streams = HashMap::from([(77u32, 5u64)]);
        let j = join(&mut t, &recs, &align, 0, &streams, (1_000, 2_000));
        assert_eq!(
            j,
            Joined { claimed: 4, unclaimed: 1, earlier: 1, outside: 2, syncs: 0, overheads: (0, 0) }
        );
        let k = t.spans.iter().find(|s| s.name == "k").unwrap();
        assert_eq!((k.start_ns, k.end_ns, k.op, k.stream), (1_100, 1_200, Some(10), 5));
        // The copy's host memory is the operation's (CUPTI's kind is not parsed).
        let c = t.spans.iter().find(|s| s.name == "memcpy HtoD").unwrap();
        assert!(matches!(c.kind, OpKind::Copy { host: HostMem::Pageable, .. }));
        let g: Vec<_> = t.spans.iter().filter(|s| s.op == Some(12)).collect();
        assert_eq!(g.len(), 2);
        assert!(g.iter().all(|s| s.graph == Some(9)));
        let f = t.spans.iter().find(|s| s.name == "foreign").unwrap();
        assert_eq!((f.op, f.stream), (None, 5));
        assert_eq!(t.unclaimed(), 1);
        let ka = t.key_averages();
        let gl = ka.row(crate::profile::RowKind::Op, "graph launch").unwrap();
        assert!((gl.device_total_s - 150e-9).abs() < 1e-15);
    }
}
