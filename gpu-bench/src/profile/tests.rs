//! The exporters on hand-built traces: the Chrome JSON parsed back (fields,
//! nesting, per-track monotonic time, both ends of every flow), the table's
//! sums and self times, every sort order, grouping by shape, the SVG.

use super::*;
use serde_json::Value;
use std::collections::HashMap;

fn kernel(grid: u32) -> OpKind {
    OpKind::Kernel { grid: [grid, 1, 1], block: [256, 1, 1], shared_bytes: 0 }
}

fn op(id: u64, name: &str, kind: OpKind, stream: u64, t: u64, range: Option<u64>) -> OpRecord {
    OpRecord {
        id,
        name: name.into(),
        kind,
        device: 0,
        stream,
        thread: 1,
        host_start_ns: t,
        host_end_ns: t + 10,
        span: None,
        range,
        captured: false,
        after: Vec::new(),
    }
}

fn span(name: &str, kind: OpKind, stream: u64, a: u64, b: u64, op: Option<u64>) -> DeviceSpan {
    DeviceSpan { name: name.into(), kind, device: 0, stream, start_ns: a, end_ns: b, op, graph: None }
}

/// Thread 1: range "step" [1000, 2000] holding "forward" [1100, 1600];
/// k1, k2 launched in forward, a copy and a graph replay (two kernels)
/// launched in step; a foreign span nobody launched; memory samples.
fn sample() -> Trace {
    let mut t = Trace::new(Source::Events);
    t.threads.push(ThreadTrack { id: 1, name: Some("main".into()) });
    t.streams.push(StreamTrack { device: 0, stream: 10, priority: Some(0) });
    t.streams.push(StreamTrack { device: 0, stream: 11, priority: Some(-1) });
    t.ranges.push(RangeRecord {
        id: 1,
        parent: None,
        name: "step".into(),
        thread: 1,
        start_ns: 1000,
        end_ns: 2000,
    });
    t.ranges.push(RangeRecord {
        id: 2,
        parent: Some(1),
        name: "forward".into(),
        thread: 1,
        start_ns: 1100,
        end_ns: 1600,
    });
    t.ops.push(op(100, "k", kernel(4), 10, 1150, Some(2)));
    t.ops.push(op(101, "k", kernel(8), 10, 1300, Some(2)));
    let copy = OpKind::Copy { dir: CopyDir::HtoD, bytes: 4096, host: HostMem::Pinned };
    t.ops.push(op(102, "memcpy HtoD", copy.clone(), 11, 1700, Some(1)));
    t.ops.push(op(103, "graph launch", OpKind::GraphLaunch { ops: 2 }, 10, 1800, Some(1)));
    t.spans.push(span("k", kernel(4), 10, 1200, 1400, Some(100)));
    t.spans.push(span("k", kernel(8), 10, 1400, 1500, Some(101)));
    t.spans.push(span("memcpy HtoD", copy, 11, 1720, 1900, Some(102)));
    let mut g1 = span("gk", kernel(1), 10, 1820, 1850, Some(103));
    g1.graph = Some(7);
    let mut g2 = span("gk", kernel(1), 10, 1850, 1870, Some(103));
    g2.graph = Some(7);
    t.spans.push(g1);
    t.spans.push(g2);
    t.spans.push(span("foreign", kernel(2), FOREIGN_STREAM + 3, 1050, 1060, None));
    for (i, a) in [(1000u64, 0u64), (1500, 1 << 20), (1990, 4096)] {
        t.memory.push(MemorySample { t_ns: i, device: 0, allocated: a, reserved: 2 << 20 });
    }
    t.normalize();
    t
}

fn track(e: &Value) -> (u64, u64) {
    (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap_or(u64::MAX))
}

#[test]
fn chrome_json_parses_back_with_fields_tracks_and_names() {
    let t = sample();
    let v: Value = serde_json::from_str(&t.chrome_json()).expect("valid JSON");
    let ev = v["traceEvents"].as_array().expect("traceEvents");
    assert_eq!(v["otherData"]["source"], "events");
    let names: Vec<&str> = ev
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    for want in ["thread 1 (main)", "stream 10 (priority 0)", "stream 11 (priority -1)", "cupti stream 3"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let slices: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "X").collect();
    // 2 ranges + 4 host ops + 6 spans.
    assert_eq!(slices.len(), 12);
    for s in &slices {
        for f in ["name", "cat", "pid", "tid", "ts", "dur"] {
            assert!(!s[f].is_null(), "{f} missing in {s}");
        }
        assert!(s["dur"].as_f64().unwrap() >= 0.0);
    }
    // Device slices sit on the device process, on their stream's track.
    let k = slices.iter().find(|s| s["name"] == "k" && s["pid"] == DEVICE_PID).unwrap();
    assert_eq!(k["tid"], 10);
    assert_eq!(k["cat"], "kernel");
    // Times are µs from the first event (the step range at 1000 ns).
    let step = slices.iter().find(|s| s["name"] == "step").unwrap();
    assert_eq!(step["ts"].as_f64().unwrap(), 0.0);
    assert_eq!(step["dur"].as_f64().unwrap(), 1.0);
    let copy = slices.iter().find(|s| s["cat"] == "memcpy").unwrap();
    assert_eq!(copy["args"]["bytes"], 4096);
    // Counter track.
    let counters: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "C").collect();
    assert_eq!(counters.len(), 3);
    assert!(counters.iter().all(|c| c["name"] == "device memory" && c["args"]["reserved"] == 2 << 20));
    assert_eq!(counters[1]["args"]["allocated"], 1 << 20);
}

#[test]
fn chrome_json_time_is_monotonic_per_track_and_slices_nest() {
    let v: Value = serde_json::from_str(&sample().chrome_json()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let mut last: HashMap<(u64, u64), f64> = HashMap::new();
    let mut stacks: HashMap<(u64, u64), Vec<f64>> = HashMap::new();
    for e in ev.iter().filter(|e| e["ph"] != "M") {
        let key = track(e);
        let ts = e["ts"].as_f64().unwrap();
        let prev = last.insert(key, ts).unwrap_or(f64::MIN);
        assert!(ts >= prev, "time goes back on track {key:?}: {prev} then {ts}");
        if e["ph"] == "X" {
            let end = ts + e["dur"].as_f64().unwrap();
            let stack = stacks.entry(key).or_default();
            while stack.last().is_some_and(|&open_end| open_end <= ts) {
                stack.pop();
            }
            if let Some(&open_end) = stack.last() {
                assert!(end <= open_end + 1e-9, "slice {e} overlaps its enclosing slice (ends {open_end})");
            }
            stack.push(end);
        }
    }
    // The host thread's ops nest inside their ranges: k's host slice is
    // inside forward, inside step (three deep at its start).
    assert!(stacks.contains_key(&(HOST_PID, 1)));
}

#[test]
fn every_flow_has_both_ends_at_its_launch_and_its_span() {
    let t = sample();
    let v: Value = serde_json::from_str(&t.chrome_json()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let starts: HashMap<u64, &Value> =
        ev.iter().filter(|e| e["ph"] == "s").map(|e| (e["id"].as_u64().unwrap(), e)).collect();
    let ends: HashMap<u64, &Value> =
        ev.iter().filter(|e| e["ph"] == "f").map(|e| (e["id"].as_u64().unwrap(), e)).collect();
    // Five spans have a host op in the trace; the foreign one has none.
    assert_eq!(starts.len(), 5);
    let mut a: Vec<_> = starts.keys().collect();
    let mut b: Vec<_> = ends.keys().collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "flow ids without both ends");
    let slices: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "X").collect();
    let inside = |e: &Value, pid: u64| {
        let ts = e["ts"].as_f64().unwrap();
        slices.iter().any(|s| {
            track(s) == track(e)
                && s["pid"] == pid
                && s["ts"].as_f64().unwrap() <= ts
                && ts <= s["ts"].as_f64().unwrap() + s["dur"].as_f64().unwrap()
        })
    };
    for (id, s) in &starts {
        let f = ends[id];
        assert_eq!(s["pid"], HOST_PID);
        assert_eq!(f["bp"], "e");
        assert!(inside(s, HOST_PID), "flow {id} starts outside a host slice");
        assert!(inside(f, DEVICE_PID), "flow {id} ends outside a device slice");
        assert!(f["ts"].as_f64().unwrap() >= s["ts"].as_f64().unwrap(), "flow {id} goes back in time");
    }
    // The graph launch has two arrows, one per kernel of the replay.
    let graph_op_ts = 0.8; // host op at 1800 ns, origin 1000 ns
    assert_eq!(starts.values().filter(|s| (s["ts"].as_f64().unwrap() - graph_op_ts).abs() < 1e-9).count(), 2);
}

#[test]
fn key_averages_sum_spans_and_subtract_children() {
    let t = sample();
    let ka = t.key_averages();
    let all: u64 = t.spans.iter().map(|s| s.duration_ns()).sum();
    assert!((ka.total_device_s() - all as f64 * 1e-9).abs() < 1e-15);
    // Self device time over ops and device rows is every span once.
    let self_sum: f64 = ka.rows().iter().filter(|r| r.kind != RowKind::Range).map(|r| r.device_self_s).sum();
    assert!((self_sum - all as f64 * 1e-9).abs() < 1e-15, "{self_sum}");
    let pct: f64 = ka.rows().iter().filter(|r| r.kind != RowKind::Range).map(|r| r.device_pct).sum();
    assert!((pct - 100.0).abs() < 1e-9);
    let ns = |v: f64| (v * 1e9).round() as u64;
    let k = ka.row(RowKind::Op, "k").unwrap();
    assert_eq!((k.calls, ns(k.device_total_s), ns(k.device_min_s), ns(k.device_max_s)), (2, 300, 100, 200));
    assert_eq!(ns(k.device_avg_s), 150);
    assert_eq!(ns(k.host_total_s), 20);
    let step = ka.row(RowKind::Range, "step").unwrap();
    let forward = ka.row(RowKind::Range, "forward").unwrap();
    assert_eq!(ns(forward.device_total_s), 300);
    assert_eq!(ns(forward.device_self_s), 300);
    // step: everything launched (not the foreign span); self: the copy and the graph's kernels.
    assert_eq!(ns(step.device_total_s), 300 + 180 + 50);
    assert_eq!(ns(step.device_self_s), 180 + 50);
    assert_eq!((ns(step.host_total_s), ns(step.host_self_s)), (1000, 500));
    let g = ka.row(RowKind::Op, "graph launch").unwrap();
    assert_eq!((ns(g.device_total_s), ns(g.device_self_s)), (50, 0));
    let gk = ka.row(RowKind::Device, "gk").unwrap();
    assert_eq!((gk.calls, ns(gk.device_total_s), ns(gk.host_total_s)), (2, 50, 0));
    let f = ka.row(RowKind::Device, "foreign").unwrap();
    assert_eq!(ns(f.device_self_s), 10);
}

#[test]
fn every_sort_order_holds_and_names_sort_a_to_z() {
    let t = sample();
    for c in Column::ALL {
        let ka = t.key_averages().sort_by(c);
        let rows = ka.rows();
        assert_eq!(Column::from_name(c.name()), Some(c));
        for w in rows.windows(2) {
            if c == Column::Name {
                assert!(w[0].name <= w[1].name, "{}: {} before {}", c.name(), w[0].name, w[1].name);
            } else {
                assert!(w[0].value(c) >= w[1].value(c), "{}: {} before {}", c.name(), w[0].name, w[1].name);
            }
        }
    }
    let first = t.key_averages().sort_by(Column::DeviceTotal);
    assert_eq!(first.rows()[0].name, "step");
    let by_calls = t.key_averages().sort_by(Column::Calls);
    assert_eq!(by_calls.rows()[0].calls, 2);
}

#[test]
fn grouping_by_shape_splits_a_kernel_by_grid() {
    let t = sample();
    let ka = t.key_averages().group_by_shape();
    let ks: Vec<&Row> = ka.rows().iter().filter(|r| r.name == "k").collect();
    assert_eq!(ks.len(), 2);
    let mut shapes: Vec<&str> = ks.iter().map(|r| r.shape.as_deref().unwrap()).collect();
    shapes.sort_unstable();
    assert_eq!(shapes, ["grid 4 block 256", "grid 8 block 256"]);
    assert!(ks.iter().all(|r| r.calls == 1));
    let md = ka.markdown();
    assert!(md.contains("k [grid 8 block 256]") && md.contains("grouped by shape"), "{md}");
}

#[test]
fn markdown_has_eight_columns_and_json_every_field() {
    let t = sample();
    let ka = t.key_averages();
    let md = ka.markdown();
    let header = md.lines().next().unwrap();
    assert_eq!(header.matches('|').count(), 9, "{header}");
    assert!(md.contains("range: step"));
    let v: Value = serde_json::from_str(&ka.json()).unwrap();
    assert_eq!(v["schema"], TABLE_SCHEMA);
    assert_eq!(v["sort_by"], "device_total");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), ka.rows().len());
    for f in [
        "kind",
        "name",
        "calls",
        "device_total_s",
        "device_self_s",
        "device_pct",
        "host_total_s",
        "host_self_s",
    ] {
        assert!(rows.iter().all(|r| !r[f].is_null()), "{f}");
    }
}

#[test]
fn svg_draws_every_lane_and_span() {
    let t = sample();
    let svg = t.svg("sample");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for lane in ["host thread 1 (main)", "stream 10 (priority 0)", "stream 11 (priority -1)", "device memory"]
    {
        assert!(svg.contains(lane), "{lane}");
    }
    // One titled rect per span, per host op and per range.
    assert_eq!(svg.matches("<title>").count(), t.spans.len() + t.ops.len() + t.ranges.len());
    // One line per flow (5) plus the axis' grid lines.
    assert!(svg.matches("stroke-opacity=\"0.35\"").count() == 5);
    assert_eq!(svg.matches("<polyline").count(), 2);
}

#[test]
fn an_empty_trace_exports_without_events() {
    let t = Trace::new(Source::HostOnly);
    let v: Value = serde_json::from_str(&t.chrome_json()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().iter().all(|e| e["ph"] == "M"));
    assert!(t.key_averages().rows().is_empty());
    assert!(t.svg("empty").contains("</svg>"));
}

#[test]
fn a_captured_call_is_a_row_of_its_own_so_a_kernels_average_is_its_launches() {
    let mut t = sample();
    let mut c = op(104, "k", kernel(4), 10, 1950, Some(1));
    c.captured = true;
    t.ops.push(c);
    t.normalize();
    let ka = t.key_averages();
    let k = ka.row(RowKind::Op, "k").unwrap();
    assert_eq!(k.calls, 2);
    assert!((k.device_avg_s - 150e-9).abs() < 1e-15);
    let cap = ka.row(RowKind::Op, "k (captured)").unwrap();
    assert_eq!((cap.calls, cap.device_total_s), (1, 0.0));
    assert!(cap.host_total_s > 0.0);
}

#[test]
fn a_window_keeps_what_starts_inside_it() {
    let t = sample();
    let w = t.window(1_700, 2_000);
    assert_eq!(w.ranges.len(), 0);
    assert_eq!(w.ops.iter().map(|o| o.id).collect::<Vec<_>>(), [102, 103]);
    assert_eq!(w.spans.len(), 3);
    assert_eq!(w.memory.len(), 1);
    assert_eq!(w.bounds(), Some((1_700, 1_990)));
    assert_eq!(w.streams, t.streams);
}

/// Wait arrows come from the operations' `after`: from the waited-for
/// operation's span (or its stream's last span up to it) to the waiting
/// operation's span (or its stream's first span from it on: a wait is a
/// marker with no span), across devices; none for a source not recorded,
/// none where no span follows the wait, none without `after`.
#[test]
fn chrome_wait_arrows_join_the_spans_each_recorded_wait_names() {
    use gpu_sync::trace::WaitSource;
    let mut t = Trace::new(Source::Events);
    let on = |mut o: OpRecord, device: i32| {
        o.device = device;
        o
    };
    let src = |device, stream, op| WaitSource { device, stream, op };
    // Device 0, stream 10: k (200), then a wait with no span (201).
    t.ops.push(op(200, "k", kernel(4), 10, 100, None));
    t.spans.push(span("k", kernel(4), 10, 110, 150, Some(200)));
    t.ops.push(op(201, "wait", OpKind::Wait, 10, 160, None));
    // Device 1, stream 20: a wait for stream 10's k, then k2 it holds back;
    // k3 waits for stream 10's wait (its last span up to it: k's).
    let mut wait = on(op(202, "wait", OpKind::Wait, 20, 170, None), 1);
    wait.after.push(src(0, 10, Some(200)));
    t.ops.push(wait);
    t.ops.push(on(op(203, "k2", kernel(8), 20, 180, None), 1));
    let mut s = span("k2", kernel(8), 20, 190, 250, Some(203));
    s.device = 1;
    t.spans.push(s);
    let mut k3 = on(op(204, "k3", kernel(8), 20, 260, None), 1);
    k3.after.push(src(0, 10, Some(201)));
    t.ops.push(k3);
    let mut s = span("k3", kernel(8), 20, 270, 300, Some(204));
    s.device = 1;
    t.spans.push(s);
    // No arrow: a source never recorded, and a wait with no span after it.
    let mut k4 = on(op(205, "k4", kernel(8), 20, 310, None), 1);
    k4.after.push(src(0, 10, None));
    t.ops.push(k4);
    let mut s = span("k4", kernel(8), 20, 320, 330, Some(205));
    s.device = 1;
    t.spans.push(s);
    let mut last = op(206, "wait", OpKind::Wait, 10, 340, None);
    last.after.push(src(1, 20, Some(205)));
    t.ops.push(last);
    t.normalize();
    let v = t.chrome_value();
    let ev = v["traceEvents"].as_array().unwrap();
    let flows: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "wait").collect();
    // Each arrow's ends as (pid, tid, ts).
    type End = (u64, u64, f64);
    let mut arrows: Vec<(End, End)> = flows
        .iter()
        .filter(|e| e["ph"] == "s")
        .map(|s| {
            let f = flows.iter().find(|e| e["ph"] == "f" && e["id"] == s["id"]).unwrap();
            assert_eq!(f["bp"], "e");
            let at = |e: &Value| {
                (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap(), e["ts"].as_f64().unwrap())
            };
            (at(s), at(f))
        })
        .collect();
    arrows.sort_by(|a, b| a.partial_cmp(b).unwrap());
    // Times are µs from the first event (100 ns).
    let (d0, d1) = (DEVICE_PID, DEVICE_PID + 1);
    assert_eq!(arrows, [((d0, 10, 0.05), (d1, 20, 0.09)), ((d0, 10, 0.05), (d1, 20, 0.17))], "{flows:#?}");
    assert_eq!(flows.len(), 4);
}
