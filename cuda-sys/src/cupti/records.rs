//! The activity records as plain Rust values: their kinds, and what each
//! record says (parsed from CUPTI's binary layouts in `super`).

use crate::cupti_bindings::{CUpti_ActivityKind, CUpti_ExternalCorrelationKind};
use std::sync::Arc;

/// The kinds of activity record a consumer can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActivityKind {
    /// Kernels (`CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`: concurrency kept).
    /// For this kind CUPTI instruments the kernel code to capture the
    /// timing on the GPU (NVIDIA's description of the "instrumentation"
    /// overhead), which can slow a kernel of many short blocks.
    Kernel,
    /// Kernels with CUPTI serializing every kernel on the GPU
    /// (`CUPTI_ACTIVITY_KIND_KERNEL`). Its records are kernel records, like
    /// [`ActivityKind::Kernel`]'s ([`ActivityOp::Kernel`]; their
    /// [`ActivityRecord::kind`] is [`ActivityKind::Kernel`]), and go to every
    /// consumer that asked for either kernel kind.
    ///
    /// It times a kernel without the per-kernel instrumentation of the
    /// concurrent kind: NVIDIA does not document it, and gpu-bench's GPU test
    /// `cupti_recording_on_a_block_bound_kernel` measured it (a
    /// 262,144-block launch no slower with these records on, on an H100 and
    /// an H200).
    ///
    /// Enabling both kernel kinds at once: CUPTI refuses the second with
    /// `CUPTI_ERROR_NOT_COMPATIBLE` (libcupti 13 on an H100 and an H200,
    /// the GPU test above; its headers only say the call returns that "if
    /// the activity kind cannot be enabled").
    /// [`Activity::consumer`](super::Activity::consumer) then returns the
    /// error and leaves nothing enabled for that consumer; the simulator
    /// refuses the same way.
    SerialKernel,
    /// Copies (`CUPTI_ACTIVITY_KIND_MEMCPY`).
    Memcpy,
    /// Memsets (`CUPTI_ACTIVITY_KIND_MEMSET`).
    Memset,
    /// External correlation records (`CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION`):
    /// the id pushed with [`Activity::push_external_correlation`](super::Activity::push_external_correlation) around a
    /// driver call, paired with that call's correlation id (which its
    /// kernel, copy or memset record carries). CUPTI writes them before
    /// the driver API records, so asking for this kind also enables
    /// `CUPTI_ACTIVITY_KIND_DRIVER` (whose records are not handed out).
    ExternalCorrelation,
    /// Host synchronizations (`CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`):
    /// `cuEventSynchronize`, `cuStreamWaitEvent`, `cuStreamSynchronize`,
    /// `cuCtxSynchronize`, with their host start and end.
    Synchronization,
    /// CUPTI's and the driver's own overhead (`CUPTI_ACTIVITY_KIND_OVERHEAD`):
    /// buffer flushes, instrumentation, …
    Overhead,
}

/// How many [`ActivityKind`]s there are.
pub(super) const KINDS: usize = 7;

impl ActivityKind {
    /// Every kind.
    pub const ALL: [ActivityKind; KINDS] = [
        ActivityKind::Kernel,
        ActivityKind::Memcpy,
        ActivityKind::Memset,
        ActivityKind::ExternalCorrelation,
        ActivityKind::Synchronization,
        ActivityKind::Overhead,
        ActivityKind::SerialKernel,
    ];

    /// The CUPTI kinds enabled for this kind, in enabling order.
    pub(super) fn raw(self) -> &'static [CUpti_ActivityKind] {
        match self {
            ActivityKind::Kernel => &[CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL],
            ActivityKind::Memcpy => &[CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY],
            ActivityKind::Memset => &[CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET],
            ActivityKind::ExternalCorrelation => &[
                CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER,
            ],
            ActivityKind::Synchronization => &[CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION],
            ActivityKind::Overhead => &[CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_OVERHEAD],
            ActivityKind::SerialKernel => &[CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL],
        }
    }

    pub(super) fn index(self) -> usize {
        match self {
            ActivityKind::Kernel => 0,
            ActivityKind::Memcpy => 1,
            ActivityKind::Memset => 2,
            ActivityKind::ExternalCorrelation => 3,
            ActivityKind::Synchronization => 4,
            ActivityKind::Overhead => 5,
            ActivityKind::SerialKernel => 6,
        }
    }

    /// Whether a consumer that asked for the kinds marked in `wanted`
    /// (by [`ActivityKind::index`]) receives `r`: a kernel record when it
    /// asked for either kernel kind, any other record when it asked for
    /// the record's kind.
    pub(super) fn wanted(wanted: &[bool; KINDS], r: &ActivityRecord) -> bool {
        match r.kind() {
            ActivityKind::Kernel | ActivityKind::SerialKernel => {
                wanted[ActivityKind::Kernel.index()] || wanted[ActivityKind::SerialKernel.index()]
            }
            k => wanted[k.index()],
        }
    }
}

/// What a host synchronization record was
/// (`CUpti_ActivitySynchronizationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncKind {
    /// `cuEventSynchronize`.
    EventSynchronize,
    /// `cuStreamWaitEvent`.
    StreamWaitEvent,
    /// `cuStreamSynchronize`.
    StreamSynchronize,
    /// `cuCtxSynchronize`.
    ContextSynchronize,
    /// Another value (a newer CUPTI's), as CUPTI wrote it.
    Other(u32),
}

impl SyncKind {
    /// The kind for CUPTI's `CUpti_ActivitySynchronizationType` value.
    pub fn from_raw(v: u32) -> SyncKind {
        match v {
            1 => SyncKind::EventSynchronize,
            2 => SyncKind::StreamWaitEvent,
            3 => SyncKind::StreamSynchronize,
            4 => SyncKind::ContextSynchronize,
            other => SyncKind::Other(other),
        }
    }

    /// CUPTI's value.
    pub fn raw(self) -> u32 {
        match self {
            SyncKind::EventSynchronize => 1,
            SyncKind::StreamWaitEvent => 2,
            SyncKind::StreamSynchronize => 3,
            SyncKind::ContextSynchronize => 4,
            SyncKind::Other(v) => v,
        }
    }
}

/// The external correlation kind gpu-sync's recorder pushes
/// (`CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0`).
pub const EXTERNAL_KIND_CUSTOM0: u32 =
    CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0.0;

/// What a device operation was, with its own fields.
#[derive(Debug, Clone, PartialEq)]
pub enum ActivityOp {
    /// A kernel.
    Kernel {
        /// The kernel's (mangled, where it is C++) name.
        name: Arc<str>,
        /// Grid dimensions.
        grid: [i32; 3],
        /// Block dimensions.
        block: [i32; 3],
        /// The graph it ran in (0 when launched directly).
        graph_id: u32,
        /// Its node in that graph (0 when launched directly).
        graph_node_id: u64,
    },
    /// A copy.
    Memcpy {
        /// Bytes copied.
        bytes: u64,
        /// `CUpti_ActivityMemcpyKind` (1 H2D, 2 D2H, 8 D2D, …).
        copy_kind: u8,
    },
    /// A memset.
    Memset {
        /// Bytes set.
        bytes: u64,
        /// The value.
        value: u32,
    },
    /// An external correlation: the driver call of this record's
    /// `correlation_id` ran while `external_id` was pushed
    /// ([`Activity::push_external_correlation`](super::Activity::push_external_correlation)). Its start, end, device,
    /// context and stream are 0.
    ExternalCorrelation {
        /// `CUpti_ExternalCorrelationKind` ([`EXTERNAL_KIND_CUSTOM0`] for
        /// gpu-sync's recorder).
        external_kind: u32,
        /// The id pushed.
        external_id: u64,
    },
    /// A host synchronization, timed on the host by CUPTI.
    Synchronization {
        /// Which call.
        sync: SyncKind,
        /// CUPTI's id of the event (`cuEventSynchronize`,
        /// `cuStreamWaitEvent`), else `u32::MAX`.
        event_id: u32,
    },
    /// Overhead of CUPTI or the driver.
    Overhead {
        /// `CUpti_ActivityOverheadKind` (1 driver compiler, 0x10000 CUPTI
        /// buffer flush, 0x20000 CUPTI instrumentation, 0x40000 resource, …).
        overhead_kind: u32,
        /// `CUpti_ActivityObjectKind` of what it belongs to (1 process, 2
        /// thread, 3 device, 4 context, 5 stream).
        object_kind: u32,
    },
}

/// One device operation as the GPU timed it: start and end in CUPTI's
/// nanosecond timestamps (`cuptiGetTimestamp`'s clock).
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityRecord {
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// The device.
    pub device_id: u32,
    /// The context.
    pub context_id: u32,
    /// CUPTI's id of the stream ([`Activity::stream_id`](super::Activity::stream_id) maps a stream to it).
    pub stream_id: u32,
    /// The id that ties the record to the API call that enqueued it.
    pub correlation_id: u32,
    /// What it was.
    pub op: ActivityOp,
}

impl ActivityRecord {
    /// The kind of the record.
    pub fn kind(&self) -> ActivityKind {
        match self.op {
            ActivityOp::Kernel { .. } => ActivityKind::Kernel,
            ActivityOp::Memcpy { .. } => ActivityKind::Memcpy,
            ActivityOp::Memset { .. } => ActivityKind::Memset,
            ActivityOp::ExternalCorrelation { .. } => ActivityKind::ExternalCorrelation,
            ActivityOp::Synchronization { .. } => ActivityKind::Synchronization,
            ActivityOp::Overhead { .. } => ActivityKind::Overhead,
        }
    }

    /// Its duration, ns.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// The records of one stream: CUPTI's id of the stream
/// ([`Activity::stream_id`](super::Activity::stream_id),
/// [`Activity::stream_records`](super::Activity::stream_records)) and the
/// choice, among a consumer's records, of the device operations (kernels,
/// copies, memsets) that ran on it. Every consumer that times one stream
/// applies this filter: kernel mode's clock, the profiler's join, the
/// launch-overhead command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamRecords {
    /// CUPTI's id of the stream, as its records carry it.
    pub stream_id: u32,
}

impl StreamRecords {
    /// The records of the stream CUPTI calls `stream_id`.
    pub fn new(stream_id: u32) -> StreamRecords {
        StreamRecords { stream_id }
    }

    /// Whether `r` is a device operation (kernel, copy or memset) of this
    /// stream; external correlations, synchronizations and overheads carry
    /// no stream of their own and never are.
    pub fn holds(&self, r: &ActivityRecord) -> bool {
        r.stream_id == self.stream_id
            && matches!(
                r.op,
                ActivityOp::Kernel { .. } | ActivityOp::Memcpy { .. } | ActivityOp::Memset { .. }
            )
    }

    /// This stream's device operations among `records`, in the order they
    /// started on the GPU (records of equal start keep their order).
    pub fn select(&self, records: impl IntoIterator<Item = ActivityRecord>) -> Vec<ActivityRecord> {
        let mut mine: Vec<_> = records.into_iter().filter(|r| self.holds(r)).collect();
        mine.sort_by_key(|r| r.start_ns);
        mine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(stream_id: u32, start_ns: u64, op: ActivityOp) -> ActivityRecord {
        ActivityRecord {
            start_ns,
            end_ns: start_ns + 10,
            device_id: 0,
            context_id: 1,
            stream_id,
            correlation_id: start_ns as u32,
            op,
        }
    }

    fn kernel() -> ActivityOp {
        ActivityOp::Kernel { name: "k".into(), grid: [1; 3], block: [1; 3], graph_id: 0, graph_node_id: 0 }
    }

    #[test]
    fn a_streams_records_are_its_device_operations_in_start_order() {
        let recs = vec![
            rec(7, 300, kernel()),
            rec(8, 100, kernel()),
            rec(7, 100, ActivityOp::Memcpy { bytes: 4, copy_kind: 1 }),
            rec(7, 200, ActivityOp::Memset { bytes: 4, value: 0 }),
            // Same stream id, but not device operations.
            rec(
                7,
                50,
                ActivityOp::ExternalCorrelation { external_kind: EXTERNAL_KIND_CUSTOM0, external_id: 3 },
            ),
            rec(7, 60, ActivityOp::Synchronization { sync: SyncKind::StreamSynchronize, event_id: u32::MAX }),
            rec(7, 70, ActivityOp::Overhead { overhead_kind: 0x10000, object_kind: 5 }),
            rec(9, 0, kernel()),
        ];
        let s = StreamRecords::new(7);
        let got: Vec<_> = s.select(recs.clone()).iter().map(|r| (r.start_ns, r.kind())).collect();
        assert_eq!(
            got,
            [(100, ActivityKind::Memcpy), (200, ActivityKind::Memset), (300, ActivityKind::Kernel)],
            "stream 7's copy, memset and kernel, by start"
        );
        assert_eq!(StreamRecords::new(8).select(recs.clone()).len(), 1);
        assert!(StreamRecords::new(1).select(recs).is_empty(), "no record of an unknown stream");
    }

    fn asking(kinds: &[ActivityKind]) -> [bool; KINDS] {
        let mut w = [false; KINDS];
        for k in kinds {
            w[k.index()] = true;
        }
        w
    }

    #[test]
    fn kernel_records_go_to_consumers_of_either_kernel_kind_and_no_other() {
        let k = rec(7, 1, kernel());
        let copy = rec(7, 2, ActivityOp::Memcpy { bytes: 4, copy_kind: 1 });
        assert!(ActivityKind::wanted(&asking(&[ActivityKind::Kernel]), &k));
        assert!(ActivityKind::wanted(&asking(&[ActivityKind::SerialKernel]), &k));
        assert!(!ActivityKind::wanted(&asking(&[ActivityKind::SerialKernel]), &copy));
        assert!(!ActivityKind::wanted(&asking(&[ActivityKind::Memcpy, ActivityKind::Overhead]), &k));
        assert!(ActivityKind::wanted(&asking(&[ActivityKind::Memcpy]), &copy));
    }

    #[test]
    fn every_kind_has_its_own_index_and_cupti_kinds() {
        let mut seen = [false; KINDS];
        for k in ActivityKind::ALL {
            assert!(!seen[k.index()], "{k:?} shares an index");
            seen[k.index()] = true;
            assert!(!k.raw().is_empty(), "{k:?} enables nothing");
        }
        assert_eq!(ActivityKind::SerialKernel.raw(), [CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL]);
        assert_eq!(ActivityKind::Kernel.raw(), [CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
    }
}
