//! The profiler's whole path on the simulator (exact, simulated time):
//! a small pipeline recorded with the event backend → trace → Chrome JSON
//! parsed back → checks; the table's totals against the spans; schedule
//! cycles calling back with the right steps.

use gpu_bench::profile::{Backend, Column, OpKind, Profiler, RowKind, Schedule, Source, Trace, range, scope};
use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};
use serde_json::Value;
use std::collections::HashMap;

/// One test at a time: one recorder per device, and a device
/// synchronization in one test would run another's queued work early.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn setup() -> (Device, kernels::Kernels) {
    gpu_sync::sim::install().expect("cuda-sim");
    kernels::register_sim_kernels();
    let device = Device::get(0).expect("device 0");
    let k = kernels::Kernels::load(&device).expect("kernels");
    (device, k)
}

/// 1980 cycles per µs on the simulator.
const CYCLES_PER_US: u64 = 1980;

/// H2D on one stream, scale + a 20 µs spin on another, D2H on the first;
/// three chunks, each in a range inside "pipeline".
fn pipeline(device: &Device, k: &kernels::Kernels) -> Trace {
    let copy = Stream::new(device).unwrap();
    let compute = Stream::with_priority(device, device.stream_priority_range().1).unwrap();
    let n = 1024;
    let host = PinnedBuffer::from_slice(device, &vec![1.5f32; 3 * n], HostAllocFlags::empty()).unwrap();
    let mut x = DeviceBuffer::<f32>::zeroed(&copy, n).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&compute, n).unwrap();
    let mut spin = DeviceBuffer::<u64>::zeroed(&compute, 1).unwrap();
    device.synchronize().unwrap();
    let mut p = Profiler::new(device).backend(Backend::Events);
    p.start().unwrap();
    scope("pipeline", || {
        for i in 0..3 {
            let _r = range(format!("chunk {i}"));
            // A scratch allocation per chunk: the memory track moves.
            let scratch = DeviceBuffer::<f32>::zeroed(&compute, n).unwrap();
            copy.upload_range(&host, i * n..(i + 1) * n, &mut x).unwrap();
            k.scale(&compute, &x, &mut y, 2.0).unwrap();
            k.spin(&compute, 20 * CYCLES_PER_US, &mut spin).unwrap();
            let out = PinnedBuffer::<f32>::new(device, n, HostAllocFlags::empty()).unwrap();
            let out = copy.download(&y, out).unwrap().wait().unwrap();
            assert!(out.iter().all(|v| *v == 3.0));
            drop(scratch);
        }
    });
    let t = p.finish().unwrap().expect("a trace");
    assert_eq!(t.source, Source::Events);
    t
}

#[test]
fn a_recorded_pipeline_exports_a_trace_that_parses_back_whole() {
    let _one = one_at_a_time();
    let (device, k) = setup();
    let t = pipeline(&device, &k);
    // Every launch and copy has a host op and a device span tied to it.
    let count = |f: &dyn Fn(&OpKind) -> bool| t.spans.iter().filter(|s| f(&s.kind) && s.op.is_some()).count();
    assert_eq!(count(&|k| matches!(k, OpKind::Kernel { .. })), 6);
    assert_eq!(count(&|k| matches!(k, OpKind::Copy { .. })), 6);
    for s in &t.spans {
        let op = t.op(s.op.unwrap()).expect("the span's op is in the trace");
        assert_eq!((op.stream, &op.name), (s.stream, &s.name));
    }
    // Each stream ran its operations in submission order, one after the
    // other. (Spans against launches on the host clock are checked on the
    // GPU, tests/profile_gpu.rs: the simulator's device clock is simulated.)
    for st in &t.streams {
        let mut on: Vec<_> = t.spans.iter().filter(|s| s.stream == st.stream).collect();
        on.sort_by_key(|s| s.op);
        for w in on.windows(2) {
            assert!(w[1].start_ns >= w[0].end_ns, "stream {}: {:?} before {:?}", st.stream, w[1], w[0]);
        }
    }
    // The simulator's clock is exact: each spin lasts 20 µs.
    for s in t.spans.iter().filter(|s| s.name == "spin_cycles") {
        assert_eq!(s.duration_ns(), 20_000, "{s:?}");
    }
    // Ranges nest: chunks inside the pipeline, ops inside chunks.
    let pipe = t.ranges.iter().find(|r| r.name == "pipeline").unwrap();
    let chunks: Vec<_> = t.ranges.iter().filter(|r| r.name.starts_with("chunk")).collect();
    assert_eq!(chunks.len(), 3);
    assert!(chunks.iter().all(|c| c.parent == Some(pipe.id)));
    assert!(
        t.ops
            .iter()
            .filter(|o| !matches!(o.kind, OpKind::Alloc { .. } | OpKind::Free))
            .all(|o| o.range.is_some_and(|r| chunks.iter().any(|c| c.id == r)))
    );

    let v: Value = serde_json::from_str(&t.chrome_json()).expect("valid JSON");
    let ev = v["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = ev
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    let (lo, hi) = device.stream_priority_range();
    assert!(names.iter().any(|n| n.ends_with(&format!("(priority {hi})"))), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with(&format!("(priority {lo})"))), "{names:?}");
    // Per-track monotonic time; X slices nest per track.
    let mut last: HashMap<(u64, u64), f64> = HashMap::new();
    let mut open: HashMap<(u64, u64), Vec<f64>> = HashMap::new();
    for e in ev.iter().filter(|e| e["ph"] != "M") {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap_or(u64::MAX));
        let ts = e["ts"].as_f64().unwrap();
        assert!(ts >= last.insert(key, ts).unwrap_or(f64::MIN), "time goes back on {key:?}");
        if e["ph"] == "X" {
            let end = ts + e["dur"].as_f64().unwrap();
            let st = open.entry(key).or_default();
            // Microseconds with nanosecond decimals: a slice that ends where
            // the next begins may read a float ulp past it.
            while st.last().is_some_and(|&x| x <= ts + 1e-6) {
                st.pop();
            }
            assert!(st.last().is_none_or(|&x| end <= x + 1e-6), "{e} crosses its parent");
            st.push(end);
        }
    }
    // Both ends of every flow; one per span with an op.
    let ids = |ph: &str| {
        let mut v: Vec<u64> =
            ev.iter().filter(|e| e["ph"] == ph).map(|e| e["id"].as_u64().unwrap()).collect();
        v.sort_unstable();
        v
    };
    assert_eq!(ids("s"), ids("f"));
    // One launch arrow per span with an op; wait arrows for the waits
    // gpu-sync made between the pipeline's streams (each from an op that
    // another stream's op names in its `after`).
    let flows = |cat: &str| ev.iter().filter(|e| e["ph"] == "s" && e["cat"] == cat).count();
    assert_eq!(flows("launch"), t.spans.iter().filter(|s| s.op.is_some()).count());
    assert!(flows("wait") > 0 && flows("wait") <= t.ops.iter().map(|o| o.after.len()).sum::<usize>());
    assert_eq!(flows("launch") + flows("wait"), ids("s").len());
    // A memory counter track from the ledger.
    assert!(ev.iter().any(|e| e["ph"] == "C" && e["name"] == "device memory"));
}

#[test]
fn key_averages_totals_are_the_sums_of_the_spans() {
    let _one = one_at_a_time();
    let (device, k) = setup();
    let t = pipeline(&device, &k);
    let ka = t.key_averages();
    let sum = |name: &str| t.spans.iter().filter(|s| s.name == name).map(|s| s.duration_ns()).sum::<u64>();
    for name in ["scale_f32", "spin_cycles", "memcpy HtoD", "memcpy DtoH"] {
        let r = ka.row(RowKind::Op, name).unwrap_or_else(|| panic!("{name} row"));
        assert_eq!(r.calls, 3, "{name}");
        assert!((r.device_total_s - sum(name) as f64 * 1e-9).abs() < 1e-12, "{name}");
    }
    let spin = ka.row(RowKind::Op, "spin_cycles").unwrap();
    assert!((spin.device_avg_s - 20e-6).abs() < 1e-12);
    // The pipeline range holds all the device time; its chunks each a third
    // of the spins; the pipeline's own self time is zero (all in chunks).
    let all: u64 = t.spans.iter().map(|s| s.duration_ns()).sum();
    let pipe = ka.row(RowKind::Range, "pipeline").unwrap();
    assert!((pipe.device_total_s - all as f64 * 1e-9).abs() < 1e-12);
    assert_eq!(pipe.device_self_s, 0.0);
    let by_self = ka.clone().sort_by(Column::DeviceSelf);
    assert_eq!(by_self.rows()[0].name, "spin_cycles");
}

#[test]
fn schedule_cycles_call_back_with_their_steps() {
    let _one = one_at_a_time();
    let (device, _k) = setup();
    let stream = Stream::new(&device).unwrap();
    let mut buf = DeviceBuffer::<u32>::zeroed(&stream, 256).unwrap();
    /// What each callback saw: the steps, the ranges' names, the memsets.
    type Seen = (Option<(u64, u64)>, Vec<String>, usize);
    let mut seen: Vec<Seen> = Vec::new();
    {
        let mut p = Profiler::new(&device)
            .backend(Backend::Events)
            .schedule(Schedule::new(1, 1, 2, 2).skip_first(1))
            .on_trace_ready(|t| {
                let ranges = t.ranges.iter().map(|r| r.name.clone()).collect();
                let memsets = t.spans.iter().filter(|s| s.name == "memset").count();
                seen.push((t.steps, ranges, memsets));
            });
        p.start().unwrap();
        for i in 0..12u32 {
            scope(format!("step {i}"), || stream.fill_u32(&mut buf, i)).unwrap();
            p.step().unwrap();
        }
        assert!(p.finish().unwrap().is_none(), "no cycle is open after the last repeat");
    }
    // skip 1; cycle = wait 1, warmup 1, active 2: saves at steps 4 and 8.
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], (Some((3, 4)), vec!["step 3".to_string(), "step 4".to_string()], 2));
    assert_eq!(seen[1], (Some((7, 8)), vec!["step 7".to_string(), "step 8".to_string()], 2));
}

#[test]
fn a_schedule_without_active_steps_and_a_step_before_start_are_errors() {
    let _one = one_at_a_time();
    let (device, _k) = setup();
    let mut p = Profiler::new(&device).schedule(Schedule::new(1, 0, 0, 1));
    assert!(p.start().unwrap_err().to_string().contains("active"));
    let mut q = Profiler::new(&device);
    assert!(q.step().unwrap_err().to_string().contains("before start"));
}

#[test]
fn the_cupti_backend_joins_every_record_to_its_launch_and_a_graphs_kernels_to_the_replay() {
    let _one = one_at_a_time();
    let (device, k) = setup();
    let stream = Stream::new(&device).unwrap();
    let x = DeviceBuffer::from_slice(&stream, &[1.0f32; 256]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&stream, 256).unwrap();
    let mut spin = DeviceBuffer::<u64>::zeroed(&stream, 1).unwrap();
    let graph = stream
        .capture(|c| {
            k.scale(c.stream(), &x, &mut y, 2.0)?;
            k.spin(c.stream(), 5 * CYCLES_PER_US, &mut spin)
        })
        .unwrap()
        .instantiate()
        .unwrap();
    device.synchronize().unwrap();
    let mut p = Profiler::new(&device).backend(Backend::Cupti);
    p.start().unwrap();
    k.spin(&stream, 10 * CYCLES_PER_US, &mut spin).unwrap();
    for _ in 0..2 {
        graph.launch(&stream).unwrap();
    }
    stream.synchronize().unwrap();
    let t = p.finish().unwrap().expect("trace");
    assert_eq!(t.source, Source::Cupti);
    assert_eq!((t.unclaimed(), t.dropped.cupti, t.dropped.recorder), (0, 0, 0), "{:?}", t.notes);
    assert!(t.clocks.iter().any(|c| c.clock == "cupti"));
    let direct: Vec<_> = t.spans.iter().filter(|s| s.graph.is_none()).collect();
    assert_eq!(direct.len(), 1);
    assert_eq!((direct[0].name.as_str(), direct[0].duration_ns()), ("spin_cycles", 10_000));
    // Two replays of two kernels, each tied to its replay's host operation.
    let replays: Vec<u64> = t.ops.iter().filter(|o| o.name == "graph launch").map(|o| o.id).collect();
    assert_eq!(replays.len(), 2);
    for id in &replays {
        let inside: Vec<&str> =
            t.spans.iter().filter(|s| s.op == Some(*id)).map(|s| s.name.as_str()).collect();
        assert_eq!(inside, ["scale_f32", "spin_cycles"], "replay {id}");
    }
    let ka = t.key_averages();
    let g = ka.row(RowKind::Op, "graph launch").unwrap();
    let inside: u64 = t.spans.iter().filter(|s| s.graph.is_some()).map(|s| s.duration_ns()).sum();
    assert!((g.device_total_s - inside as f64 * 1e-9).abs() < 1e-12);
    assert_eq!(ka.row(RowKind::Device, "spin_cycles").unwrap().calls, 2);
}

#[test]
fn cupti_schedule_cycles_keep_only_their_own_steps_records() {
    let _one = one_at_a_time();
    let (device, k) = setup();
    let stream = Stream::new(&device).unwrap();
    let x = DeviceBuffer::from_slice(&stream, &[1.0f32; 256]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&stream, 256).unwrap();
    device.synchronize().unwrap();
    let mut seen = Vec::new();
    {
        let mut p = Profiler::new(&device)
            .backend(Backend::Cupti)
            .schedule(Schedule::new(0, 1, 2, 2))
            .on_trace_ready(|t| seen.push((t.steps, t.spans.len(), t.unclaimed(), t.notes.clone())));
        p.start().unwrap();
        for _ in 0..6 {
            k.scale(&stream, &x, &mut y, 2.0).unwrap();
            p.step().unwrap();
        }
        assert!(p.finish().unwrap().is_none());
    }
    // warmup 1, active 2, twice: steps 1-2 and 4-5, one kernel a step, the
    // warmups' records left out.
    assert_eq!(seen.len(), 2);
    for (i, (steps, spans, unclaimed, notes)) in seen.iter().enumerate() {
        assert_eq!(*steps, Some((3 * i as u64 + 1, 3 * i as u64 + 2)));
        assert_eq!((*spans, *unclaimed), (2, 0), "{notes:?}");
    }
}
