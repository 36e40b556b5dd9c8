//! A gpu-sync [`Recording`] as a [`Trace`]: host ranges and operations as
//! they are; with the event backend each operation's span becomes a device
//! span tied to it (waits, event records, allocations and frees are
//! markers, not device work: they keep their host slice and get no span).

use super::trace::{
    ClockAlignment, DeviceSpan, MemorySample, OpKind, Source, StreamTrack, ThreadTrack, Trace,
};
use gpu_sync::trace as gt;

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
    t.ranges = rec.ranges.clone();
    for o in &rec.ops {
        if let Some((a, b)) = o.span
            && !o.captured
            && is_work(&o.kind)
        {
            t.spans.push(DeviceSpan {
                name: o.name.clone(),
                kind: o.kind.clone(),
                device: o.device,
                stream: o.stream,
                start_ns: a,
                end_ns: b.max(a),
                op: Some(o.id),
                graph: None,
            });
        }
        t.ops.push(o.clone());
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
    if source == Source::Events {
        let (n, ns) = clamp_to_stream_order(&mut t.spans);
        t.notes.push(format!(
            "events: {n} span(s) started before the previous operation on their stream ended and were \
             clamped to its end ({:.3} µs in all)",
            ns as f64 / 1e3
        ));
    }
    t
}

/// On one stream an operation cannot start before the one submitted before
/// it ended: each span's start becomes at least the previous span's end
/// (spans of a stream in submission order, by operation id). Returns how
/// many spans moved and the nanoseconds removed.
pub(crate) fn clamp_to_stream_order(spans: &mut [DeviceSpan]) -> (usize, u64) {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (spans[i].stream, spans[i].op, spans[i].start_ns));
    let (mut n, mut removed) = (0usize, 0u64);
    let mut prev: Option<(u64, u64)> = None; // (stream, end)
    for i in order {
        let s = &mut spans[i];
        if let Some((stream, end)) = prev
            && stream == s.stream
            && s.start_ns < end
        {
            let to = end.min(s.end_ns);
            removed += to - s.start_ns;
            s.start_ns = to;
            n += 1;
        }
        prev = Some((s.stream, prev.filter(|p| p.0 == s.stream).map_or(s.end_ns, |p| p.1.max(s.end_ns))));
    }
    (n, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(stream: u64, op: u64, a: u64, b: u64) -> DeviceSpan {
        DeviceSpan {
            name: "k".into(),
            kind: OpKind::Other,
            device: 0,
            stream,
            start_ns: a,
            end_ns: b,
            op: Some(op),
            graph: None,
        }
    }

    #[test]
    fn a_span_never_starts_before_the_previous_one_on_its_stream_ended() {
        // Stream 1: op 2 starts 30 ns before op 1 ended; stream 2 is apart.
        let mut v = vec![span(1, 2, 70, 150), span(1, 1, 0, 100), span(2, 3, 10, 20), span(1, 3, 150, 160)];
        assert_eq!(clamp_to_stream_order(&mut v), (1, 30));
        assert_eq!((v[0].start_ns, v[0].end_ns), (100, 150));
        assert_eq!(v[2].start_ns, 10);
        assert_eq!(v[3].start_ns, 150);
        // Already in order: nothing moves.
        assert_eq!(clamp_to_stream_order(&mut v), (0, 0));
    }
}
