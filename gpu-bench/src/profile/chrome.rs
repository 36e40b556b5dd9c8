//! A [`Trace`] as Chrome trace-event JSON, the format Perfetto
//! (ui.perfetto.dev) and chrome://tracing open:
//! - process "host" (pid [`HOST_PID`]): one thread track per host thread
//!   with its ranges and host operations as complete (`ph: "X"`) slices,
//!   nested by time;
//! - process "GPU N (name)" (pid [`DEVICE_PID`] + N; "GPU N" where the
//!   trace has no name for it), one per device: one thread track per
//!   stream, named "stream N (priority P)", with its device spans as slices
//!   and a counter track "device memory" (`ph: "C"`, allocated and reserved
//!   bytes);
//! - a flow arrow (`ph: "s"` at the host operation, `ph: "f"` with
//!   `bp: "e"` at the device span) from each host operation to every
//!   device span it enqueued (several for a graph replay);
//! - a flow arrow (category "wait") for each device-side wait of one
//!   stream for another's work that gpu-sync recorded
//!   ([`OpRecord::after`](super::OpRecord::after): `Stream::wait_stream`,
//!   an event wait, or the engine's wait for a buffer used across streams):
//!   from the end of the waited-for operation's device span to the start of
//!   the waiting operation's (across devices when the two streams are on
//!   two). An operation with no span of its own (a wait is a marker, not
//!   device work) stands for its stream's work around it: the last span of
//!   its stream up to it for the waited-for end, the first span of its
//!   stream from it on for the waiting end (the work the wait holds back).
//!   No arrow where the trace has no such span.
//!
//! Times are microseconds (ns precision) from the trace's first event; the
//! absolute start, the source, the clock alignments, dropped counts and
//! notes are in `otherData`. Events are emitted in time order (metadata
//! first), so every track's times are monotonic.

use super::trace::{DeviceSpan, OpKind, Trace};
use serde_json::{Value, json};
use std::collections::HashMap;

/// The pid of the host process in the JSON.
pub const HOST_PID: u64 = 1;
/// Device N's pid is `DEVICE_PID + N`.
pub const DEVICE_PID: u64 = 100;

/// Microseconds from `origin`, ns precision.
fn us(t: u64, origin: u64) -> f64 {
    t.saturating_sub(origin) as f64 / 1000.0
}

fn device_pid(device: i32) -> u64 {
    DEVICE_PID + device.max(0) as u64
}

fn span_args(s: &DeviceSpan) -> Value {
    let mut args = serde_json::Map::new();
    if let Some(op) = s.op {
        args.insert("op".into(), json!(op));
    }
    if let Some(g) = s.graph {
        args.insert("graph".into(), json!(g));
    }
    if let Some(shape) = s.kind.shape() {
        args.insert("shape".into(), json!(shape));
    }
    if let OpKind::Copy { bytes, .. } | OpKind::Memset { bytes } = s.kind {
        args.insert("bytes".into(), json!(bytes));
        let d = s.duration_ns();
        if d > 0 {
            args.insert("GB/s".into(), json!((bytes as f64 / d as f64 * 1000.0).round() / 1000.0));
        }
    }
    Value::Object(args)
}

/// The trace as a Chrome trace-event JSON value (see the module docs).
pub fn chrome_value(trace: &Trace) -> Value {
    let origin = trace.bounds().map_or(0, |b| b.0);
    let mut meta = Vec::new();
    meta.push(json!({"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "host"}}));
    meta.push(json!({"ph": "M", "name": "process_sort_index", "pid": HOST_PID, "args": {"sort_index": 0}}));
    for t in &trace.threads {
        let name = match &t.name {
            Some(n) => format!("thread {} ({n})", t.id),
            None => format!("thread {}", t.id),
        };
        meta.push(
            json!({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": t.id, "args": {"name": name}}),
        );
    }
    let mut devices: Vec<i32> =
        trace.streams.iter().map(|s| s.device).chain(trace.memory.iter().map(|m| m.device)).collect();
    devices.sort_unstable();
    devices.dedup();
    devices.extend(trace.devices.iter().map(|d| d.device));
    devices.sort_unstable();
    devices.dedup();
    for d in &devices {
        let pid = device_pid(*d);
        let name = match trace.devices.iter().find(|x| x.device == *d) {
            Some(x) => format!("GPU {d} ({})", x.name),
            None => format!("GPU {d}"),
        };
        meta.push(json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}));
        meta.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": 1 + d}}),
        );
    }
    for (i, s) in trace.streams.iter().enumerate() {
        let pid = device_pid(s.device);
        meta.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": s.stream, "args": {"name": s.label()}}));
        meta.push(json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": s.stream, "args": {"sort_index": i}}));
    }

    // (time, order within a time, event): slices that start together are
    // emitted outer (longer) first, flow ends after their slice.
    let mut timed: Vec<(u64, i64, Value)> = Vec::new();
    for r in &trace.ranges {
        timed.push((
            r.start_ns,
            -(r.end_ns.saturating_sub(r.start_ns) as i64),
            json!({
                "ph": "X", "cat": "range", "name": r.name, "pid": HOST_PID, "tid": r.thread,
                "ts": us(r.start_ns, origin), "dur": us(r.end_ns, r.start_ns),
                "args": {"id": r.id, "parent": r.parent},
            }),
        ));
    }
    for o in &trace.ops {
        let mut args = serde_json::Map::new();
        args.insert("op".into(), json!(o.id));
        args.insert("stream".into(), json!(o.stream));
        if let Some(shape) = o.kind.shape() {
            args.insert("shape".into(), json!(shape));
        }
        if o.captured {
            args.insert("captured".into(), json!(true));
        }
        timed.push((
            o.host_start_ns,
            -(o.host_end_ns.saturating_sub(o.host_start_ns) as i64),
            json!({
                "ph": "X", "cat": format!("host {}", o.kind.category()), "name": o.name, "pid": HOST_PID,
                "tid": o.thread, "ts": us(o.host_start_ns, origin),
                "dur": us(o.host_end_ns, o.host_start_ns), "args": Value::Object(args),
            }),
        ));
    }
    for (i, s) in trace.spans.iter().enumerate() {
        let pid = device_pid(s.device);
        timed.push((
            s.start_ns,
            -(s.duration_ns() as i64),
            json!({
                "ph": "X", "cat": s.kind.category(), "name": s.name, "pid": pid, "tid": s.stream,
                "ts": us(s.start_ns, origin), "dur": us(s.end_ns, s.start_ns), "args": span_args(s),
            }),
        ));
        // A flow from the host operation to this span, where the op is in
        // the trace (a captured op's spans come from its graph's replay).
        if let Some(op) = s.op.and_then(|id| trace.op(id)) {
            let id = i as u64 + 1;
            timed.push((
                op.host_start_ns,
                i64::MAX - 1,
                json!({
                    "ph": "s", "cat": "launch", "name": "launch", "id": id, "pid": HOST_PID, "tid": op.thread,
                    "ts": us(op.host_start_ns, origin),
                }),
            ));
            timed.push((
                s.start_ns,
                i64::MAX,
                json!({
                    "ph": "f", "bp": "e", "cat": "launch", "name": "launch", "id": id, "pid": pid,
                    "tid": s.stream, "ts": us(s.start_ns, origin),
                }),
            ));
        }
    }
    for (i, (from, to)) in wait_arrows(trace).into_iter().enumerate() {
        let id = WAIT_FLOW + i as u64;
        timed.push((
            from.end_ns,
            i64::MAX - 1,
            json!({
                "ph": "s", "cat": "wait", "name": "wait", "id": id, "pid": device_pid(from.device),
                "tid": from.stream, "ts": us(from.end_ns, origin),
            }),
        ));
        timed.push((
            to.start_ns,
            i64::MAX,
            json!({
                "ph": "f", "bp": "e", "cat": "wait", "name": "wait", "id": id, "pid": device_pid(to.device),
                "tid": to.stream, "ts": us(to.start_ns, origin),
            }),
        ));
    }
    for m in &trace.memory {
        timed.push((
            m.t_ns,
            0,
            json!({
                "ph": "C", "name": "device memory", "pid": device_pid(m.device), "ts": us(m.t_ns, origin),
                "args": {"allocated": m.allocated, "reserved": m.reserved},
            }),
        ));
    }
    timed.sort_by_key(|(t, k, _)| (*t, *k));
    let mut events = meta;
    events.extend(timed.into_iter().map(|(_, _, e)| e));
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "gpu-bench profile",
            "source": trace.source.name(),
            "origin_ns": origin,
            "steps": trace.steps,
            "dropped": trace.dropped,
            "clocks": trace.clocks,
            "notes": trace.notes,
        },
    })
}

/// Flow ids of wait arrows start here (launch arrows count from 1).
const WAIT_FLOW: u64 = 1 << 40;

/// The two spans each recorded wait joins (see the module docs): the last
/// span to end of the operation waited for (or of its stream up to it),
/// the first to start of the operation that waits (or of its stream from it
/// on), where the trace has both.
fn wait_arrows(trace: &Trace) -> Vec<(&DeviceSpan, &DeviceSpan)> {
    // Each operation's first and last span; each stream's operations with a
    // span, by id (ids increase in submission order).
    let mut by_op: HashMap<u64, (&DeviceSpan, &DeviceSpan)> = HashMap::new();
    for s in &trace.spans {
        let Some(op) = s.op else { continue };
        let e = by_op.entry(op).or_insert((s, s));
        if (s.start_ns, s.end_ns) < (e.0.start_ns, e.0.end_ns) {
            e.0 = s;
        }
        if (s.end_ns, s.start_ns) > (e.1.end_ns, e.1.start_ns) {
            e.1 = s;
        }
    }
    let mut on_stream: HashMap<(i32, u64), Vec<u64>> = HashMap::new();
    for o in trace.ops.iter().filter(|o| by_op.contains_key(&o.id)) {
        on_stream.entry((o.device, o.stream)).or_default().push(o.id);
    }
    on_stream.values_mut().for_each(|v| v.sort_unstable());
    let ids = |device: i32, stream: u64| on_stream.get(&(device, stream)).map_or(&[][..], Vec::as_slice);
    // The last span of `(device, stream)` up to operation `id`.
    let upto = |device: i32, stream: u64, id: u64| {
        let v = ids(device, stream);
        let i = v.partition_point(|x| *x <= id);
        v[..i].last().and_then(|x| by_op.get(x)).map(|e| e.1)
    };
    // The first span of `(device, stream)` from operation `id` on.
    let from = |device: i32, stream: u64, id: u64| {
        let v = ids(device, stream);
        let i = v.partition_point(|x| *x < id);
        v.get(i).and_then(|x| by_op.get(x)).map(|e| e.0)
    };
    trace
        .ops
        .iter()
        .flat_map(|o| o.after.iter().map(move |w| (w, o)))
        .filter_map(|(w, o)| Some((upto(w.device, w.stream, w.op?)?, from(o.device, o.stream, o.id)?)))
        .collect()
}

/// The trace as Chrome trace-event JSON text (see the module docs).
pub fn chrome_json(trace: &Trace) -> String {
    // A `Value` built from strings and numbers always serializes.
    serde_json::to_string(&chrome_value(trace)).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
