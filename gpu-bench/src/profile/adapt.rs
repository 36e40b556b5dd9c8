//! A gpu-sync [`Recording`] as a [`Trace`]: host ranges and operations as
//! they are; with the event backend each operation's span becomes a device
//! span tied to it (waits, event records, allocations and frees are
//! markers, not device work: they keep their host slice and get no span).

use super::trace::{
    ClockAlignment, CopyDir, DeviceSpan, HostMem, HostOp, HostRange, MemorySample, OpKind, Source,
    StreamTrack, ThreadTrack, Trace,
};
use gpu_sync::trace as gt;

/// gpu-sync's operation kind in the trace's words.
pub(crate) fn kind(k: &gt::OpKind) -> OpKind {
    match k {
        gt::OpKind::Kernel { grid, block, shared_bytes } => {
            OpKind::Kernel { grid: *grid, block: *block, shared_bytes: *shared_bytes }
        }
        gt::OpKind::Copy { dir, bytes, host } => OpKind::Copy {
            dir: match dir {
                gt::CopyDir::HtoD => CopyDir::HtoD,
                gt::CopyDir::DtoH => CopyDir::DtoH,
                gt::CopyDir::DtoD => CopyDir::DtoD,
            },
            bytes: *bytes,
            host: match host {
                gt::HostMem::Pinned => HostMem::Pinned,
                gt::HostMem::Pageable => HostMem::Pageable,
                gt::HostMem::Device => HostMem::Device,
            },
        },
        gt::OpKind::Memset { bytes } => OpKind::Memset { bytes: *bytes },
        gt::OpKind::HostFn => OpKind::HostFn,
        gt::OpKind::GraphLaunch { ops } => OpKind::GraphLaunch { nodes: *ops },
        gt::OpKind::Wait => OpKind::Wait,
        gt::OpKind::Alloc { bytes } => OpKind::Alloc { bytes: *bytes },
        gt::OpKind::Free => OpKind::Free,
        gt::OpKind::EventRecord => OpKind::EventRecord,
        _ => OpKind::Other,
    }
}

/// Whether a span of this kind is device work (drawn and summed) rather
/// than a marker on the stream.
pub(crate) fn is_work(k: &OpKind) -> bool {
    matches!(
        k,
        OpKind::Kernel { .. }
            | OpKind::Copy { .. }
            | OpKind::Memset { .. }
            | OpKind::HostFn
            | OpKind::GraphLaunch { .. }
            | OpKind::Other
    )
}

/// The trace of `rec` (spans from the events where the recording has them).
pub(crate) fn from_recording(rec: &gt::Recording, source: Source) -> Trace {
    let mut t = Trace::new(source);
    t.threads.push(ThreadTrack { id: gt::thread_id(), name: Some(gt::thread_name()) });
    t.streams = rec
        .streams
        .iter()
        .map(|s| StreamTrack { device: s.device, stream: s.stream, priority: Some(s.priority) })
        .collect();
    t.ranges = rec
        .ranges
        .iter()
        .map(|r| HostRange {
            id: r.id,
            parent: r.parent,
            name: r.name.clone(),
            thread: r.thread,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
        })
        .collect();
    for o in &rec.ops {
        let k = kind(&o.kind);
        if let Some((a, b)) = o.span
            && !o.captured
            && is_work(&k)
        {
            t.spans.push(DeviceSpan {
                name: o.name.clone(),
                kind: k.clone(),
                device: o.device,
                stream: o.stream,
                start_ns: a,
                end_ns: b.max(a),
                op: Some(o.id),
                graph: None,
            });
        }
        t.ops.push(HostOp {
            id: o.id,
            name: o.name.clone(),
            kind: k,
            device: o.device,
            stream: o.stream,
            thread: o.thread,
            host_start_ns: o.host_start_ns,
            host_end_ns: o.host_end_ns,
            range: o.range,
            captured: o.captured,
        });
    }
    t.memory = rec
        .memory
        .iter()
        .map(|m| MemorySample {
            t_ns: m.t_ns,
            device: m.device,
            allocated: m.allocated,
            reserved: m.reserved,
        })
        .collect();
    if rec.timing == gt::Timing::Events {
        t.clocks = rec
            .calibration
            .iter()
            .map(|c| ClockAlignment {
                clock: if c.stream == 0 {
                    format!("events, device {} reference", c.device)
                } else {
                    format!("events, stream {}", c.stream)
                },
                uncertainty_ns: c.uncertainty_ns.div_ceil(2),
            })
            .collect();
    }
    t.dropped.recorder = rec.dropped;
    t
}
