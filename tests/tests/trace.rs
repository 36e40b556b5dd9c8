//! Recording (`gpu_sync::trace`) on the simulator: host ranges nest, every
//! operation is recorded with its name, kind, stream and range, recording
//! off records nothing, one recorder per device, captured work is flagged
//! and its replay has a span, event spans are ordered per stream and lie
//! after their host submission within the calibration's bracket, and with
//! CUPTI the external correlation ids map CUPTI's records (the kernels of
//! a replayed graph included) back to the operations.
//!
//! The tests share device 0 and the one recorder it may have, so they run
//! one at a time (`serial`). Simulator only: on a GPU they return at once
//! (the GPU comparison of the two backends is `events_and_cupti_agree_on_a_gpu`).

use cuda_sys::cupti::{ActivityKind, ActivityOp, SyncKind};
use gpu_sync::sim;
use gpu_sync::trace::{self, CopyDir, HostMem, OpKind, OpRecord, RecordOptions, Timing};
use gpu_sync::{DeviceBuffer, Error, HostAllocFlags, In, LaunchConfig, Module, Out, PinnedBuffer, Stream};
use std::sync::{Mutex, MutexGuard};
use sync_tests::{ctx, on_sim};

fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

type Scale = (In<f32>, Out<f32>, f32, u64);

fn scale(device: &gpu_sync::Device) -> gpu_sync::Kernel<Scale> {
    sim::register::<Scale>("tr_scale", |(x, y, a, n)| {
        for i in 0..n as usize {
            y[i] = a * x[i];
        }
    });
    let module = Module::load(device, sim::PTX_STUB).expect("module");
    // SAFETY: `tr_scale` reads `x` and writes `y` below `n` only, and each
    // launch here passes `n` no larger than both lengths.
    unsafe { module.kernel::<Scale>("tr_scale") }.expect("kernel")
}

fn named<'a>(ops: &'a [OpRecord], name: &str) -> Vec<&'a OpRecord> {
    ops.iter().filter(|o| o.name == name).collect()
}

#[test]
fn ranges_nest_and_operations_carry_their_innermost_range() {
    if !on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1901);
    let stream = Stream::new(&t.device).unwrap();
    let k = scale(&t.device);
    let x = DeviceBuffer::from_slice(&stream, &[1.0f32; 64]).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(&stream, 64).unwrap();
    assert_eq!(trace::range("before").id(), None, "no recorder: a range is not recorded");
    let rec = t.device.record(RecordOptions::new(Timing::Events)).unwrap();
    let (outer_id, inner_id) = trace::scope("outer", || {
        let outer = trace::range("ignored-sibling");
        drop(outer);
        let inner = trace::range("inner");
        k.launch(&stream, LaunchConfig::for_elements(64, 32), (&x, &mut y, 2.0, 64)).unwrap();
        let id = inner.id();
        drop(inner);
        stream.fill_u32(&mut y, 0).unwrap();
        (None::<u64>, id)
    });
    let _ = outer_id;
    let r = rec.stop().unwrap();
    let outer = r.ranges.iter().find(|g| g.name == "outer").expect("outer");
    let inner = r.ranges.iter().find(|g| g.name == "inner").expect("inner");
    let sibling = r.ranges.iter().find(|g| g.name == "ignored-sibling").expect("sibling");
    assert_eq!(Some(inner.id), inner_id);
    assert_eq!(inner.parent, Some(outer.id));
    assert_eq!(sibling.parent, Some(outer.id));
    assert_eq!(outer.parent, None);
    assert!(outer.start_ns <= inner.start_ns && inner.end_ns <= outer.end_ns, "{r:?}");
    assert!(sibling.end_ns <= inner.start_ns);
    assert!(r.ranges.iter().all(|g| g.thread == trace::thread_id()));
    let launch = named(&r.ops, "tr_scale");
    assert_eq!(launch.len(), 1, "{:?}", r.ops);
    assert_eq!(launch[0].range, Some(inner.id), "the launch ran inside `inner`");
    let fill = named(&r.ops, "memset");
    assert_eq!(fill[0].range, Some(outer.id), "the fill ran after `inner` ended");
    assert!(outer.start_ns <= launch[0].host_start_ns && launch[0].host_end_ns <= inner.end_ns);
    t.finish();
}

#[test]
fn operations_are_recorded_with_names_kinds_streams_and_memory() {
    if !on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1902);
    let a = Stream::new(&t.device).unwrap();
    let (least, greatest) = t.device.stream_priority_range();
    let b = Stream::with_priority(&t.device, greatest).unwrap();
    let k = scale(&t.device);
    let rec = t.device.record(RecordOptions::default()).unwrap();
    let host = vec![3.0f32; 256];
    let mut x = DeviceBuffer::<f32>::alloc(&a, 256).unwrap();
    a.upload_pageable(&host, &mut x).unwrap();
    let pinned = PinnedBuffer::from_slice(&t.device, &host, HostAllocFlags::empty()).unwrap();
    a.upload(&pinned, &mut x).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(&b, 256).unwrap();
    b.wait_stream(&a).unwrap();
    k.launch(
        &b,
        LaunchConfig { grid: 4.into(), block: 64.into(), shared_mem_bytes: 0 },
        (&x, &mut y, 0.5, 256),
    )
    .unwrap();
    b.fill_bytes(&mut y, 0).unwrap();
    b.launch_host_fn(|| {}).unwrap();
    let back = a.to_vec(&y).unwrap();
    assert_eq!(back, vec![0.0; 256]);
    drop((x, y));
    let r = rec.stop().unwrap();
    let ops = &r.ops;
    assert!(ops.windows(2).all(|w| w[0].id < w[1].id), "ids in submission order");
    let h2d = named(ops, "memcpy HtoD");
    assert_eq!(h2d.len(), 2, "{ops:?}");
    assert_eq!(h2d[0].kind, OpKind::Copy { dir: CopyDir::HtoD, bytes: 1024, host: HostMem::Pageable });
    assert_eq!(h2d[1].kind, OpKind::Copy { dir: CopyDir::HtoD, bytes: 1024, host: HostMem::Pinned });
    assert!(h2d.iter().all(|o| o.stream == a.id()));
    let launch = named(ops, "tr_scale");
    assert_eq!(launch.len(), 1);
    assert_eq!(launch[0].kind, OpKind::Kernel { grid: [4, 1, 1], block: [64, 1, 1], shared_bytes: 0 });
    assert_eq!(launch[0].stream, b.id());
    assert_eq!(named(ops, "memset")[0].kind, OpKind::Memset { bytes: 1024 });
    assert_eq!(named(ops, "host function")[0].kind, OpKind::HostFn);
    assert!(named(ops, "wait").iter().any(|o| o.stream == b.id()), "{ops:?}");
    let d2h = named(ops, "memcpy DtoH");
    assert_eq!(d2h[0].kind, OpKind::Copy { dir: CopyDir::DtoH, bytes: 1024, host: HostMem::Pageable });
    assert_eq!(named(ops, "alloc").len(), 2);
    assert!(named(ops, "alloc").iter().all(|o| o.kind == OpKind::Alloc { bytes: 1024 }));
    assert_eq!(named(ops, "free").len(), 2);
    for o in ops {
        assert_eq!(o.device, 0);
        assert_eq!(o.thread, trace::thread_id());
        assert!(o.host_start_ns <= o.host_end_ns);
        assert!(!o.captured);
        assert!(o.span.is_some(), "every operation got a span: {o:?}");
    }
    // Both streams, with their priorities.
    let info = |id| r.streams.iter().find(|s| s.stream == id).expect("stream info");
    assert_eq!(info(a.id()).priority, least);
    assert_eq!(info(b.id()).priority, greatest);
    assert_eq!(info(b.id()).raw, b.as_raw() as usize as u64);
    // The ledger: up by two allocations, back down by two frees.
    let allocated: Vec<u64> = r.memory.iter().map(|m| m.allocated).collect();
    assert_eq!(allocated.len(), 4, "{:?}", r.memory);
    assert_eq!(allocated[1], allocated[0] + 1024);
    assert_eq!(allocated[3] + 2048, allocated[1]);
    assert!(r.memory.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    assert_eq!(r.dropped, 0);
    assert_eq!(r.timing, Timing::Events);
    t.finish();
}

#[test]
fn recording_off_records_nothing_and_a_filter_keeps_only_its_streams() {
    if !on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1903);
    let a = Stream::new(&t.device).unwrap();
    let b = Stream::new(&t.device).unwrap();
    let mut buf = DeviceBuffer::<u32>::alloc(&a, 64).unwrap();
    let rec = t.device.record(RecordOptions::new(Timing::HostOnly)).unwrap();
    a.fill_u32(&mut buf, 1).unwrap();
    let first = rec.stop().unwrap();
    assert_eq!(first.ops.len(), 1);
    // Off: none of this is seen by the next recorder.
    let _off = trace::range("off");
    a.fill_u32(&mut buf, 2).unwrap();
    a.fill_u32(&mut buf, 3).unwrap();
    drop(_off);
    let rec = t.device.record(RecordOptions::new(Timing::HostOnly).streams([b.id()])).unwrap();
    a.fill_u32(&mut buf, 4).unwrap();
    b.wait_stream(&a).unwrap();
    b.fill_u32(&mut buf, 5).unwrap();
    let r = rec.take().unwrap();
    assert!(r.ops.iter().all(|o| o.stream == b.id()), "{:?}", r.ops);
    assert_eq!(named(&r.ops, "memset").len(), 1);
    assert!(r.ops.iter().all(|o| o.id > first.ops[0].id && o.span.is_none()));
    assert!(r.ranges.is_empty(), "{:?}", r.ranges);
    // A take drains: the next one starts empty.
    assert!(rec.take().unwrap().ops.is_empty());
    drop(rec);
    t.finish();
}

#[test]
fn one_recorder_per_device_at_a_time() {
    if !on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1904);
    let rec = t.device.record(RecordOptions::default()).unwrap();
    let again = t.device.record(RecordOptions::new(Timing::HostOnly));
    assert!(matches!(again, Err(Error::AlreadyRecording { device: 0 })), "{again:?}");
    assert!(again.unwrap_err().to_string().contains("already recording"));
    drop(rec);
    let rec = t.device.record(RecordOptions::new(Timing::HostOnly)).expect("free again after the drop");
    assert_eq!((rec.device(), rec.timing()), (0, Timing::HostOnly));
    drop(rec);
    t.finish();
}

#[test]
fn captured_work_is_flagged_and_its_replay_has_a_span() {
    if !on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1905);
    let s = Stream::new(&t.device).unwrap();
    let k = scale(&t.device);
    let x = DeviceBuffer::from_slice(&s, &[1.0f32; 32]).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(&s, 32).unwrap();
    let rec = t.device.record(RecordOptions::new(Timing::Events)).unwrap();
    let graph = s
        .capture(|cap| {
            k.launch(cap.stream(), LaunchConfig::for_elements(32, 32), (&x, &mut y, 3.0, 32))?;
            cap.stream().fill_u32(&mut y, 9)
        })
        .unwrap();
    let nodes = graph.node_count().unwrap();
    let exec = graph.instantiate().unwrap();
    let replay = Stream::new(&t.device).unwrap();
    exec.launch(&replay).unwrap();
    exec.launch(&replay).unwrap();
    replay.synchronize().unwrap();
    let r = rec.stop().unwrap();
    let captured: Vec<_> = r.ops.iter().filter(|o| o.captured).collect();
    assert_eq!(captured.len(), 2, "{:?}", r.ops);
    assert!(captured.iter().all(|o| o.span.is_none() && o.stream == s.id()));
    assert_eq!(captured[0].name, "tr_scale");
    let replays = named(&r.ops, "graph launch");
    assert_eq!(replays.len(), 2);
    for g in &replays {
        assert_eq!(g.kind, OpKind::GraphLaunch { ops: nodes });
        assert!(!g.captured && g.stream == replay.id());
        let (s0, s1) = g.span.expect("a replay has a span");
        assert!(s0 <= s1);
    }
    assert!(replays[0].span.unwrap().1 <= replays[1].span.unwrap().0, "replays in stream order");
    assert_eq!(r.dropped, 0);
    t.finish();
}

#[test]
fn event_spans_are_ordered_per_stream_and_follow_their_submission_within_the_calibration() {
    if !on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1906);
    // Device times follow the host's real clock, as on a GPU.
    t.session.as_ref().expect("sim").set_wall_clock(true);
    let a = Stream::new(&t.device).unwrap();
    let b = Stream::new(&t.device).unwrap();
    let k = scale(&t.device);
    let x = DeviceBuffer::from_slice(&a, &[1.0f32; 512]).unwrap();
    let mut ya = DeviceBuffer::<f32>::alloc(&a, 512).unwrap();
    let mut yb = DeviceBuffer::<f32>::alloc(&b, 512).unwrap();
    a.synchronize().unwrap();
    b.synchronize().unwrap();
    let before = trace::now_ns();
    let rec = t.device.record(RecordOptions::new(Timing::Events)).unwrap();
    let after = trace::now_ns();
    let cfg = LaunchConfig::for_elements(512, 128);
    for i in 0..6 {
        k.launch(&a, cfg, (&x, &mut ya, i as f32, 512)).unwrap();
        k.launch(&b, cfg, (&x, &mut yb, i as f32, 512)).unwrap();
        if i % 2 == 1 {
            std::thread::sleep(std::time::Duration::from_micros(300));
        }
    }
    let r = rec.stop().unwrap();
    assert_eq!(r.dropped, 0);
    // The reference: made inside `record`, its bracket inside ours.
    let reference = r.calibration.iter().find(|c| c.stream == 0).expect("the reference calibration");
    assert!(before <= reference.host_ns - reference.uncertainty_ns / 2, "{reference:?}");
    assert!(reference.host_ns + reference.uncertainty_ns / 2 <= after, "{reference:?}");
    let launches = named(&r.ops, "tr_scale");
    assert_eq!(launches.len(), 12);
    for s in [a.id(), b.id()] {
        let on: Vec<_> = launches.iter().filter(|o| o.stream == s).collect();
        // Each stream calibrated itself at its first operation (idle then),
        // within that operation's host call.
        let cal = r.calibration.iter().find(|c| c.stream == s).expect("a stream calibration");
        assert!(cal.host_ns - cal.uncertainty_ns / 2 <= on[0].host_start_ns, "{cal:?} {:?}", on[0]);
        assert!(cal.uncertainty_ns < 50_000_000, "{cal:?}");
        let slack = cal.uncertainty_ns.max(reference.uncertainty_ns) / 2 + 1_000;
        for o in &on {
            let (s0, s1) = o.span.expect("span");
            assert!(s0 <= s1);
            assert!(
                s0 + slack >= o.host_start_ns,
                "device start before the host call: {o:?} (slack {slack})"
            );
        }
        for w in on.windows(2) {
            let (p, n) = (w[0].span.unwrap(), w[1].span.unwrap());
            assert!(p.1 <= n.0 + 1_000, "stream order: {:?} then {:?}", w[0], w[1]);
        }
    }
    t.session.as_ref().expect("sim").set_wall_clock(false);
    t.finish();
}

#[test]
fn cupti_external_correlation_maps_records_back_to_operations() {
    if !on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1907);
    let s = Stream::new(&t.device).unwrap();
    let k = scale(&t.device);
    let x = DeviceBuffer::from_slice(&s, &[1.0f32; 64]).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(&s, 64).unwrap();
    let graph = s
        .capture(|cap| {
            k.launch(cap.stream(), LaunchConfig::for_elements(64, 32), (&x, &mut y, 2.0, 64))?;
            k.launch(cap.stream(), LaunchConfig::for_elements(64, 32), (&x, &mut y, 3.0, 64))
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    let activity = cuda_sys::cupti::activity().expect("the simulator's CUPTI");
    let consumer = activity
        .consumer(&[ActivityKind::Kernel, ActivityKind::ExternalCorrelation, ActivityKind::Synchronization])
        .unwrap();
    let rec = t.device.record(RecordOptions::new(Timing::Cupti)).unwrap();
    k.launch(&s, LaunchConfig::for_elements(64, 32), (&x, &mut y, 4.0, 64)).unwrap();
    k.launch(&s, LaunchConfig::for_elements(64, 32), (&x, &mut y, 5.0, 64)).unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let r = rec.stop().unwrap();
    let records = consumer.take().unwrap();
    drop(consumer);
    assert_eq!(r.timing, Timing::Cupti);
    // The external id of each operation → its driver call's correlation id.
    let correlation = |op: &OpRecord| -> u32 {
        let found: Vec<u32> = records
            .iter()
            .filter(|c| {
                matches!(c.op, ActivityOp::ExternalCorrelation { external_kind, external_id }
                    if external_kind == cuda_sys::cupti::EXTERNAL_KIND_CUSTOM0 && external_id == op.id)
            })
            .map(|c| c.correlation_id)
            .collect();
        assert_eq!(found.len(), 1, "one external correlation record for {op:?}: {records:?}");
        found[0]
    };
    let launches = named(&r.ops, "tr_scale");
    assert_eq!(launches.len(), 2);
    for op in &launches {
        assert!(op.span.is_none(), "CUPTI timing: spans come from the records");
        let corr = correlation(op);
        let kernels: Vec<_> = records
            .iter()
            .filter(|c| c.correlation_id == corr && matches!(c.op, ActivityOp::Kernel { .. }))
            .collect();
        assert_eq!(kernels.len(), 1, "{kernels:?}");
        let ActivityOp::Kernel { name, graph_id, .. } = &kernels[0].op else { unreachable!() };
        assert_eq!((&**name, *graph_id), ("tr_scale", 0));
    }
    // The replay: both captured kernels, inside the graph, under its id.
    let replay = named(&r.ops, "graph launch");
    assert_eq!(replay.len(), 1);
    let corr = correlation(replay[0]);
    let inside: Vec<_> = records
        .iter()
        .filter_map(|c| match &c.op {
            ActivityOp::Kernel { name, graph_id, graph_node_id, .. } if c.correlation_id == corr => {
                Some((name.to_string(), *graph_id, *graph_node_id))
            }
            _ => None,
        })
        .collect();
    assert_eq!(inside.len(), 2, "{records:?}");
    assert!(inside.iter().all(|(n, g, node)| n == "tr_scale" && *g != 0 && *node != 0), "{inside:?}");
    assert_ne!(inside[0].2, inside[1].2, "two nodes");
    // The host's wait, seen by CUPTI.
    assert!(
        records
            .iter()
            .any(|c| matches!(c.op, ActivityOp::Synchronization { sync: SyncKind::StreamSynchronize, .. })),
        "{records:?}"
    );
    assert_eq!(r.dropped, 0);
    t.finish();
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// On a GPU: spin kernels of about 10 µs, 100 µs and 1 ms, back to back,
/// and 100 µs ones each on an idle stream (synchronized before), recorded
/// with the event backend and then with CUPTI; each series' median event
/// span against the median duration of the CUPTI kernel records joined to
/// the launches by their external correlation ids (printed: run with
/// `--nocapture`). The event span brackets the kernel (start event before
/// it on the stream, end event after), so it is never shorter; it is
/// longer by the events' floor (the GPU's launch of the kernel after the
/// start event, the drain before the end event: measured about 6–7 µs on
/// an H100), and on an idle stream also by the host's launch call (the
/// start event fires at once, the kernel arrives when `cuLaunchKernel`
/// returns). A replayed graph's kernels, which events cannot see, come
/// back from CUPTI under the replay's id.
#[test]
fn events_and_cupti_agree_on_a_gpu() {
    if on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1908);
    let k = kernels::Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).unwrap();
    let mut out = DeviceBuffer::<u64>::zeroed(&s, 1).unwrap();
    k.spin(&s, t.cycles_for_ms(50.0), &mut out).unwrap(); // clocks up
    s.synchronize().unwrap();
    const REPS: usize = 7;
    // (length, on an idle stream)
    let series = [(0.01, false), (0.1, false), (1.0, false), (0.1, true)];
    let run = |rec_timing: Timing| -> Vec<OpRecord> {
        let rec = t.device.record(RecordOptions::new(rec_timing)).unwrap();
        let mut out = DeviceBuffer::<u64>::zeroed(&s, 1).unwrap();
        for (ms, idle) in series {
            for _ in 0..REPS {
                if idle {
                    s.synchronize().unwrap();
                }
                k.spin(&s, t.cycles_for_ms(ms), &mut out).unwrap();
            }
        }
        s.synchronize().unwrap();
        let r = rec.stop().unwrap();
        assert_eq!(r.dropped, 0);
        if rec_timing == Timing::Events {
            eprintln!("calibrations: {:?}", r.calibration);
            let widest = r.calibration.iter().map(|c| c.uncertainty_ns).max().unwrap_or(0);
            for o in r.ops.iter().filter(|o| o.span.is_some()) {
                let (s0, _) = o.span.unwrap();
                assert!(
                    s0 + widest / 2 + 1_000 >= o.host_start_ns,
                    "device start before the host call: {o:?}"
                );
            }
        }
        r.ops.into_iter().filter(|o| matches!(o.kind, OpKind::Kernel { .. }) && o.stream == s.id()).collect()
    };
    // Events.
    let ev_ops = run(Timing::Events);
    assert_eq!(ev_ops.len(), series.len() * REPS, "{ev_ops:?}");
    for w in ev_ops.windows(2) {
        let (p, n) = (w[0].span.expect("span"), w[1].span.expect("span"));
        assert!(p.0 <= p.1 && p.1 <= n.0 + 1_000, "stream order: {:?} {:?}", w[0], w[1]);
    }
    // CUPTI.
    let activity = match cuda_sys::cupti::activity() {
        Ok(a) => a,
        // Under compute-sanitizer or ncu the tool owns the profiling
        // interface: the CUPTI half is not measurable there (the documented
        // error value, not a failure).
        Err(e @ cuda_sys::cupti::CuptiError::Unavailable { .. }) => {
            eprintln!("CUPTI half skipped: {e}");
            return;
        }
        Err(e) => panic!("CUPTI on the GPU machine: {e}"),
    };
    let consumer = activity.consumer(&[ActivityKind::Kernel, ActivityKind::ExternalCorrelation]).unwrap();
    let cu_ops = run(Timing::Cupti);
    // A replayed graph of three spins.
    let mut gout = DeviceBuffer::<u64>::zeroed(&s, 1).unwrap();
    let graph = s
        .capture(|cap| {
            for _ in 0..3 {
                k.spin(cap.stream(), t.cycles_for_ms(0.05), &mut gout)?;
            }
            Ok(())
        })
        .unwrap();
    let exec = graph.instantiate().unwrap();
    let rec = t.device.record(RecordOptions::new(Timing::Cupti)).unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    let replay = rec.stop().unwrap();
    let records = consumer.take().unwrap();
    drop(consumer);
    let corr: std::collections::HashMap<u64, u32> = records
        .iter()
        .filter_map(|c| match c.op {
            ActivityOp::ExternalCorrelation { external_id, .. } => Some((external_id, c.correlation_id)),
            _ => None,
        })
        .collect();
    let kernel_ns = |corr_id: u32| -> Vec<(u64, u32)> {
        records
            .iter()
            .filter_map(|c| match c.op {
                ActivityOp::Kernel { graph_id, .. } if c.correlation_id == corr_id => {
                    Some((c.duration_ns(), graph_id))
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(cu_ops.len(), series.len() * REPS);
    eprintln!("kernel durations, median of {REPS} (events: span; CUPTI: kernel record)");
    eprintln!("| spin | stream | events µs | CUPTI µs | events − CUPTI µs | (events − CUPTI) / CUPTI |");
    eprintln!("|---|---|---|---|---|---|");
    for (i, (ms, idle)) in series.iter().enumerate() {
        let mut ev: Vec<f64> = ev_ops[i * REPS..(i + 1) * REPS]
            .iter()
            .map(|o| o.span.map(|(a, b)| (b - a) as f64 / 1e3).expect("span"))
            .collect();
        let mut cu: Vec<f64> = cu_ops[i * REPS..(i + 1) * REPS]
            .iter()
            .map(|o| {
                let c =
                    corr.get(&o.id).copied().unwrap_or_else(|| panic!("no external correlation for {o:?}"));
                let k = kernel_ns(c);
                assert_eq!(k.len(), 1, "one kernel record for {o:?}: {k:?}");
                assert_eq!(k[0].1, 0, "not in a graph");
                k[0].0 as f64 / 1e3
            })
            .collect();
        let (e, c) = (median(&mut ev), median(&mut cu));
        let how = if *idle { "idle" } else { "back to back" };
        eprintln!(
            "| {} µs | {how} | {e:.2} | {c:.2} | {:.2} | {:+.2} % |",
            ms * 1e3,
            e - c,
            (e - c) / c * 100.0
        );
        assert!(e >= c - 1.0, "an event span brackets its kernel: {e} µs < {c} µs");
        if !idle {
            // The floor is a few µs whatever the kernel's length.
            assert!(e - c < 15.0, "{ms} ms back to back: the events' floor {} µs", e - c);
        }
        if *ms >= 1.0 {
            assert!((e - c) / c < 0.02, "1 ms kernels: events within 2 % of CUPTI ({e} vs {c} µs)");
        }
    }
    let replays = named(&replay.ops, "graph launch");
    assert_eq!(replays.len(), 1);
    let inside = kernel_ns(corr[&replays[0].id]);
    eprintln!("graph replay: {} kernel records under its correlation id: {inside:?}", inside.len());
    assert_eq!(inside.len(), 3, "{inside:?}");
    assert!(inside.iter().all(|(_, g)| *g != 0));
    t.finish();
}

#[test]
fn recorders_and_recordings_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<trace::Recorder>();
    send_sync::<trace::Recording>();
    send_sync::<RecordOptions>();
}

#[test]
fn an_nccl_group_is_recorded_once_on_the_recording_device_only() {
    use gpu_sync::nccl::{self, Communicator, ReduceOp};
    if !on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1921);
    let devices = gpu_sync::Device::all().unwrap();
    if devices.len() < 2 {
        return;
    }
    let devices = &devices[..2];
    let comms = Communicator::init_all(devices).unwrap();
    let streams: Vec<Stream> = devices.iter().map(|d| Stream::new(d).unwrap()).collect();
    let mut bufs: Vec<DeviceBuffer<f32>> =
        streams.iter().map(|s| DeviceBuffer::from_slice(s, &[1.0f32; 8]).unwrap()).collect();
    let all_reduce = |bufs: &mut [DeviceBuffer<f32>]| {
        nccl::group(|g| {
            for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
                g.all_reduce_in_place(c, s, b, ReduceOp::Sum)?;
            }
            Ok(())
        })
    };
    // No recorder: the group runs bare.
    all_reduce(&mut bufs).unwrap();
    // Device 0 records, device 1 does not: one part hooked, one not.
    let rec = devices[0].record(RecordOptions::new(Timing::Events)).unwrap();
    all_reduce(&mut bufs).unwrap();
    let r = rec.stop().unwrap();
    let ops = named(&r.ops, "nccl group");
    assert_eq!(ops.len(), 1, "{:?}", r.ops);
    assert_eq!((ops[0].device, ops[0].stream), (devices[0].ordinal(), streams[0].id()), "{:?}", ops[0]);
    assert!(ops[0].span.is_some(), "{:?}", ops[0]);
    for (s, b) in streams.iter().zip(&bufs) {
        assert_eq!(s.to_vec(b).unwrap(), [4.0f32; 8], "two all-reduces of 1 over 2 ranks");
    }
    t.finish();
}

/// An NCCL group's part that must wait for a buffer written on another
/// stream of its device: its record names that stream and the write's
/// record as what it waited for (`OpRecord::after`); the other device's
/// part, whose buffer was last used on its own stream, names nothing.
#[test]
fn an_nccl_groups_wait_names_the_write_it_follows() {
    use gpu_sync::nccl::{self, Communicator, ReduceOp};
    if !on_sim() {
        return;
    }
    let _s = serial();
    let t = ctx(1922);
    let devices = gpu_sync::Device::all().unwrap();
    assert!(devices.len() >= 2, "the simulator has {} devices", devices.len());
    let devices = &devices[..2];
    let comms = Communicator::init_all(devices).unwrap();
    let streams: Vec<Stream> = devices.iter().map(|d| Stream::new(d).unwrap()).collect();
    let writer = Stream::new(&devices[0]).unwrap();
    let mut bufs: Vec<DeviceBuffer<f32>> =
        streams.iter().map(|s| DeviceBuffer::from_slice(s, &[1.0f32; 8]).unwrap()).collect();
    streams[0].synchronize().unwrap();
    let rec = devices[0].record(RecordOptions::new(Timing::Events)).unwrap();
    // Written on another stream of device 0: the group's part there waits.
    writer.fill_bytes(&mut bufs[0], 0).unwrap();
    nccl::group(|g| {
        for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
            g.all_reduce_in_place(c, s, b, ReduceOp::Sum)?;
        }
        Ok(())
    })
    .unwrap();
    let r = rec.stop().unwrap();
    let fill = r.ops.iter().find(|o| o.stream == writer.id()).expect("the fill's record");
    let group = named(&r.ops, "nccl group");
    assert_eq!(group.len(), 1, "{:?}", r.ops);
    assert_eq!(group[0].after.len(), 1, "{:?}", group[0]);
    let w = &group[0].after[0];
    assert_eq!((w.device, w.stream, w.op), (devices[0].ordinal(), writer.id(), Some(fill.id)), "{w:?}");
    // 0 (zeroed on device 0) + 1 (device 1).
    assert_eq!(streams[1].to_vec(&bufs[1]).unwrap(), [1.0f32; 8]);
    t.finish();
}
