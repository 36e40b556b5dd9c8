//! Timing work on several devices ([`Bench::run_streams`]) on a simulated
//! machine of four devices (exact, simulated time): the time is the longest
//! device's span, the spread is reported, one stream is `Bench::run`.

use gpu_bench::{Bench, Error, Mode, Rule, Settings};
use gpu_sync::{Device, DeviceBuffer, Stream};

/// One test at a time (a device synchronization in one test runs another's
/// queued work early on the simulator, spin gates included).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// 1980 cycles per µs on the simulator.
const CYCLES_PER_US: u64 = 1980;

/// A device's stream, spin kernels and the spin's output.
struct Gpu {
    device: Device,
    stream: Stream,
    k: kernels::Kernels,
    out: DeviceBuffer<u64>,
}

/// The first `n` of the simulator's four devices.
fn gpus(n: usize) -> Vec<Gpu> {
    static CONFIGURED: std::sync::Once = std::sync::Once::new();
    CONFIGURED.call_once(|| {
        // Before the first cuInit of this test binary's process.
        let c = cuda_sim::Config { devices: 4, ..cuda_sim::Config::default() };
        cuda_sim::configure(c).expect("four simulated devices");
    });
    gpu_sync::sim::install().expect("cuda-sim");
    kernels::register_sim_kernels();
    assert_eq!(Device::all().expect("devices").len(), 4);
    (0..n)
        .map(|i| {
            let device = Device::get(i as i32).expect("device");
            let stream = Stream::new(&device).expect("stream");
            let k = kernels::Kernels::load(&device).expect("kernels");
            let out = DeviceBuffer::<u64>::zeroed(&stream, 1).expect("out");
            Gpu { device, stream, k, out }
        })
        .collect()
}

/// Spins `us[i]` µs on the `i`th timing stream.
fn spin_each(g: &mut [Gpu], us: &[u64], s: &[Stream]) -> gpu_sync::Result<()> {
    for ((g, &us), s) in g.iter_mut().zip(us).zip(s) {
        g.k.spin(s, us * CYCLES_PER_US, &mut g.out)?;
    }
    Ok(())
}

fn counter(r: &gpu_bench::ModeResult, name: &str) -> f64 {
    r.counters.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name}: {:?}", r.counters)).value
}

#[test]
fn four_devices_hot_time_is_the_longest_devices_span_with_the_spread() {
    let _one = one_at_a_time();
    let mut g = gpus(4);
    let streams: Vec<Stream> = g.iter().map(|g| g.stream.clone()).collect();
    let us = [10, 10, 40, 20];
    let r = Bench::new("spins on four devices")
        .modes(&[Mode::Hot, Mode::Cold])
        .settings(Settings::quick())
        .run_streams(&streams.iter().collect::<Vec<_>>(), |s| spin_each(&mut g, &us, s))
        .unwrap();
    for m in [Mode::Hot, Mode::Cold] {
        let res = r.mode(m).unwrap();
        assert!((res.median() - 40e-6).abs() < 1e-9, "{}: {}", m.name(), res.median());
        for (i, &u) in us.iter().enumerate() {
            let span = counter(res, &format!("span of stream {i} (GPU {i})"));
            assert!((span - u as f64 * 1e-6).abs() < 1e-9, "stream {i}: {span}");
        }
        // (40 − 10) / 40 = 75 %.
        let spread = r.counter(&format!("{} device spread", m.name())).unwrap();
        assert!((spread.value - 0.75).abs() < 1e-6, "{spread:?}");
    }
    // The spread renders with the record's counters: markdown, CSV, JSON.
    let info = gpu_bench::device_info(&g[0].device).unwrap();
    let mut report = gpu_bench::Report::new("multi", info, Settings::quick());
    report.records.push(r);
    assert!(gpu_bench::render::markdown(&report).contains("hot device spread"));
    assert!(gpu_bench::render::csv(&report).contains(",,hot device spread,0.75,fraction,"));
    assert!(gpu_bench::render::json(&report).contains("\"hot device spread\""));
}

/// Batch mode releases every device's runs with the first device's spin
/// gate (the other timing streams wait for it across devices).
#[cfg(feature = "kernels")]
#[test]
fn two_devices_batch_is_gated_across_devices_and_takes_the_longest() {
    let _one = one_at_a_time();
    let mut g = gpus(2);
    let inst = gpu_bench::instruments::load(&g[0].device).unwrap();
    let streams: Vec<Stream> = g.iter().map(|g| g.stream.clone()).collect();
    let us = [30, 12];
    let r = Bench::new("spins on two devices")
        .modes(&[Mode::Hot, Mode::Batch])
        .settings(Settings::quick())
        .instruments(inst)
        .run_streams(&streams.iter().collect::<Vec<_>>(), |s| spin_each(&mut g, &us, s))
        .unwrap();
    for m in [Mode::Hot, Mode::Batch] {
        let res = r.mode(m).unwrap();
        assert!((res.median() - 30e-6).abs() < 1e-9, "{}: {}", m.name(), res.median());
        assert!((counter(res, "span of stream 1 (GPU 1)") - 12e-6).abs() < 1e-9);
        assert!((r.counter(&format!("{} device spread", m.name())).unwrap().value - 0.6).abs() < 1e-6);
    }
    assert!(r.mode(Mode::Batch).unwrap().runs_per_sample > 1);
    assert!(r.warnings.iter().all(|w| w.rule != Rule::Gate), "{:?}", r.warnings);
}

/// A span is one device's own: device 1 waiting for device 0's 50 µs spin
/// inside the timed region counts that wait in its span, which reads 50 µs
/// (runs back to back: each of device 1's runs waits for device 0's next
/// spin), not the 5 µs it spins.
#[test]
fn a_cross_device_wait_is_inside_the_waiting_devices_span() {
    let _one = one_at_a_time();
    let mut g = gpus(2);
    let streams: Vec<Stream> = g.iter().map(|g| g.stream.clone()).collect();
    let r = Bench::new("handoff")
        .settings(Settings::quick())
        .run_streams(&streams.iter().collect::<Vec<_>>(), |s| {
            let [a, b] = &mut g[..] else { unreachable!("two devices") };
            a.k.spin(&s[0], 50 * CYCLES_PER_US, &mut a.out)?;
            s[1].wait_stream(&s[0])?;
            b.k.spin(&s[1], 5 * CYCLES_PER_US, &mut b.out)
        })
        .unwrap();
    let hot = r.mode(Mode::Hot).unwrap();
    assert!((counter(hot, "span of stream 0 (GPU 0)") - 50e-6).abs() < 1e-9);
    let s1 = counter(hot, "span of stream 1 (GPU 1)");
    assert!((s1 - 50e-6).abs() < 1e-9, "device 1 waited for device 0, then spun 5 µs: {s1}");
    assert!((hot.median() - s1).abs() < 1e-12);
}

/// Kernel mode: CUPTI's records of both devices on one clock, a run from
/// its first start to its last end over both.
#[test]
fn two_devices_kernel_mode_spans_both_devices_on_cuptis_clock() {
    let _one = one_at_a_time();
    let mut g = gpus(2);
    let streams: Vec<Stream> = g.iter().map(|g| g.stream.clone()).collect();
    let us = [12, 30];
    let r = Bench::new("spins on two devices")
        .modes(&[Mode::Kernel, Mode::Hot])
        .settings(Settings::quick())
        .run_streams(&streams.iter().collect::<Vec<_>>(), |s| spin_each(&mut g, &us, s))
        .unwrap();
    let k = r.mode(Mode::Kernel).unwrap();
    assert!((k.median() - 30e-6).abs() < 1e-9, "{}", k.median());
    assert!((counter(k, "span of stream 0 (GPU 0)") - 12e-6).abs() < 1e-9);
    assert!((counter(k, "span of stream 1 (GPU 1)") - 30e-6).abs() < 1e-9);
    assert!((r.counter("kernel device spread").unwrap().value - 0.6).abs() < 1e-6);
    assert!(r.counter("hot over kernel").is_some_and(|c| c.value.abs() < 1e-9));
    // Device 0 (12 µs) starts each run as device 1 (30 µs) ends the last:
    // the barrier's gap on the simulator's one clock is 0.
    let slack = counter(k, "cross-device order slack");
    assert!(slack.abs() < 1e-9, "{slack}");
    // GPU 1's clock minus GPU 0's, bounded both ways by the barrier's two
    // directions: GPU 1 starts 18 µs after GPU 0 ends (0 → 1), GPU 0 as GPU
    // 1 ends (1 → 0): [-0, 18 µs], which holds the simulator's 0.
    let (lo, hi) =
        (counter(k, "device 1 - device 0 clock, at least"), counter(k, "device 1 - device 0 clock, at most"));
    assert!(lo.abs() < 1e-9 && (hi - 18e-6).abs() < 1e-9, "[{lo}, {hi}]");
    assert!(r.warnings.iter().all(|w| w.rule != Rule::Clock), "{:?}", r.warnings);
}

#[test]
fn one_stream_is_bench_run() {
    let _one = one_at_a_time();
    let mut g = gpus(1);
    let stream = g[0].stream.clone();
    let bench = Bench::new("spin 20 µs").modes(&[Mode::Hot, Mode::Graph]).settings(Settings::quick());
    let Gpu { k, out, .. } = &mut g[0];
    let many = bench.run_streams(&[&stream], |s| k.spin(&s[0], 20 * CYCLES_PER_US, out)).unwrap();
    let one = bench.run(&stream, |s| k.spin(s, 20 * CYCLES_PER_US, out)).unwrap();
    for m in [Mode::Hot, Mode::Graph] {
        assert_eq!(many.mode(m).unwrap().median(), one.mode(m).unwrap().median());
        // No per-stream counters: one stream's record is Bench::run's.
        let names = |r: &gpu_bench::Record| -> Vec<String> {
            r.mode(m).unwrap().counters.iter().map(|c| c.name.clone()).collect()
        };
        assert_eq!(names(&many), names(&one));
    }
    assert!(many.counter("hot device spread").is_none());
}

#[test]
fn modes_it_cannot_time_over_several_devices_are_refused_by_name() {
    let _one = one_at_a_time();
    let mut g = gpus(2);
    let streams: Vec<Stream> = g.iter().map(|g| g.stream.clone()).collect();
    let refs: Vec<&Stream> = streams.iter().collect();
    for m in [Mode::FirstCall, Mode::Graph, Mode::Batch] {
        let err = Bench::new("x")
            .modes(&[m])
            .settings(Settings::quick())
            .run_streams(&refs, |s| spin_each(&mut g, &[1, 1], s))
            .unwrap_err();
        assert!(matches!(err, Error::Unavailable { mode, .. } if mode == m), "{err}");
    }
    let r = Bench::new("x")
        .modes(&[Mode::Hot, Mode::Graph])
        .settings(Settings::quick())
        .best_effort(true)
        .run_streams(&refs, |s| spin_each(&mut g, &[1, 1], s))
        .unwrap();
    assert!(r.mode(Mode::Hot).is_some() && r.mode(Mode::Graph).is_none());
    assert!(r.warnings.iter().any(|w| w.rule == Rule::Unavailable && w.mode == Some(Mode::Graph)));
    assert!(matches!(Bench::new("x").run_streams(&[], |_| Ok(())), Err(Error::Settings(_))));
}

/// The profiler's Chrome trace of four devices (one profiler each, the
/// traces merged): a process per device named "GPU n (name)", the host as
/// another, and an arrow for each cross-device `wait_stream`, from the
/// waited-for device's span to the waiting device's wait.
#[test]
fn the_trace_has_a_process_per_device_and_arrows_for_cross_device_waits() {
    use gpu_bench::profile::{Backend, DEVICE_PID, HOST_PID, Profiler};
    let _one = one_at_a_time();
    let mut g = gpus(4);
    let mut profilers: Vec<Profiler> =
        g.iter().map(|g| Profiler::new(&g.device).backend(Backend::Events)).collect();
    for p in &mut profilers {
        p.start().unwrap();
    }
    // A chain 0 → 1 → 2 → 3: each device spins after the previous one.
    for i in 0..4 {
        if i > 0 {
            let (a, b) = g.split_at_mut(i);
            b[0].stream.wait_stream(&a[i - 1].stream).unwrap();
        }
        let Gpu { stream, k, out, .. } = &mut g[i];
        k.spin(stream, 10 * CYCLES_PER_US, out).unwrap();
    }
    // And device 0 waits for device 3's spin, then spins again.
    g[0].stream.wait_stream(&g[3].stream).unwrap();
    let Gpu { stream, k, out, .. } = &mut g[0];
    k.spin(stream, CYCLES_PER_US, out).unwrap();
    let mut traces = profilers.iter_mut().map(|p| p.finish().unwrap().unwrap());
    let mut trace = traces.next().unwrap();
    traces.for_each(|t| trace.merge(t));
    assert_eq!(trace.devices.iter().map(|d| d.device).collect::<Vec<_>>(), [0, 1, 2, 3]);
    let v = trace.chrome_value();
    let ev = v["traceEvents"].as_array().unwrap();
    let process = |pid: u64| {
        ev.iter()
            .find(|e| e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == pid)
            .map(|e| e["args"]["name"].as_str().unwrap().to_owned())
    };
    assert_eq!(process(HOST_PID).as_deref(), Some("host"));
    for d in 0..4u64 {
        let name = process(DEVICE_PID + d).unwrap();
        let want = format!("GPU {d} ({})", g[d as usize].device.name().unwrap());
        assert_eq!(name, want);
        // Every span of a device is in its process.
        assert!(ev.iter().filter(|e| e["ph"] == "X" && e["pid"] == DEVICE_PID + d).count() >= 1);
    }
    let flows: Vec<&serde_json::Value> = ev.iter().filter(|e| e["cat"] == "wait").collect();
    assert_eq!(flows.len(), 8, "{flows:?}");
    for d in 0..4u64 {
        let s = flows.iter().find(|e| e["ph"] == "s" && e["pid"] == DEVICE_PID + d).unwrap();
        let f = flows.iter().find(|e| e["ph"] == "f" && e["id"] == s["id"]).unwrap();
        assert_eq!(f["pid"], DEVICE_PID + (d + 1) % 4);
        // Its two ends are device d's spin and device d + 1's (their times
        // are each device's own events mapped to the host clock: on the
        // simulator the devices' clocks are not tied to the host's, so the
        // arrow's direction in time is not asserted).
        let span = |e: &serde_json::Value| {
            ev.iter()
                .find(|x| {
                    x["ph"] == "X"
                        && x["pid"] == e["pid"]
                        && x["tid"] == e["tid"]
                        && x["name"] == "spin_cycles"
                })
                .is_some()
        };
        assert!(span(s) && span(f));
    }
}

/// The profiler draws gpu-sync's own waits: a buffer written on stream A
/// (device 0) and read on stream B (device 1) — the wait the engine makes
/// inside the copy —, an explicit `wait_stream` of B for A, and a second
/// stream C of device 0 writing a buffer A wrote (a wait within the device)
/// each give one arrow from A's operation to the waiting one; operations on
/// buffers of their own stream give none.
#[test]
fn the_trace_draws_the_engines_implicit_and_explicit_waits_across_and_within_devices() {
    use gpu_bench::profile::{Backend, DEVICE_PID, Profiler};
    let _one = one_at_a_time();
    let g = gpus(2);
    let (a, b) = (&g[0].stream, &g[1].stream);
    let c = Stream::new(&g[0].device).unwrap();
    let mut x = DeviceBuffer::<u32>::zeroed(a, 1 << 12).unwrap();
    let mut z = DeviceBuffer::<u32>::zeroed(a, 1 << 12).unwrap();
    let mut w = DeviceBuffer::<u32>::zeroed(a, 1 << 12).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(b, 1 << 12).unwrap();
    let mut y2 = DeviceBuffer::<u32>::zeroed(b, 1 << 12).unwrap();
    g[0].device.synchronize().unwrap();
    g[1].device.synchronize().unwrap();
    let mut profilers: Vec<Profiler> =
        g.iter().map(|g| Profiler::new(&g.device).backend(Backend::Events)).collect();
    for p in &mut profilers {
        p.start().unwrap();
    }
    a.fill_u32(&mut x, 1).unwrap();
    b.copy(&x, &mut y).unwrap(); // implicit: B waits for A's fill of x
    a.fill_u32(&mut z, 2).unwrap();
    b.wait_stream(a).unwrap(); // explicit: B waits for A's fill of z
    c.fill_u32(&mut z, 3).unwrap(); // within device 0: C waits for A's fill of z
    // No cross-stream dependency of its own: the wait's arrow ends at it
    // (a wait is no device work: the work it holds back stands for it).
    b.fill_u32(&mut y2, 4).unwrap();
    a.fill_u32(&mut w, 5).unwrap(); // none either
    let mut traces = profilers.iter_mut().map(|p| p.finish().unwrap().unwrap());
    let mut trace = traces.next().unwrap();
    traces.for_each(|t| trace.merge(t));
    let v = trace.chrome_value();
    let ev = v["traceEvents"].as_array().unwrap();
    let flows: Vec<&serde_json::Value> = ev.iter().filter(|e| e["cat"] == "wait").collect();
    // Each arrow as ((pid, tid) of its start, (pid, tid) of its end, the
    // name of the span it ends at).
    type Track = (u64, u64);
    let mut arrows: Vec<(Track, Track, String)> = flows
        .iter()
        .filter(|e| e["ph"] == "s")
        .map(|s| {
            let f = flows.iter().find(|e| e["ph"] == "f" && e["id"] == s["id"]).expect("the arrow's end");
            let end = ev
                .iter()
                .find(|x| {
                    x["ph"] == "X" && x["pid"] == f["pid"] && x["tid"] == f["tid"] && x["ts"] == f["ts"]
                })
                .expect("a span where the arrow ends");
            let at = |e: &serde_json::Value| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            (at(s), at(f), end["name"].as_str().unwrap().to_owned())
        })
        .collect();
    arrows.sort();
    let (d0, d1) = (DEVICE_PID, DEVICE_PID + 1);
    let mut want = vec![
        ((d0, a.id()), (d1, b.id()), "memcpy DtoD".to_owned()),
        ((d0, a.id()), (d1, b.id()), "memset".to_owned()),
        ((d0, a.id()), (d0, c.id()), "memset".to_owned()),
    ];
    want.sort();
    assert_eq!(arrows, want, "{flows:#?}");
    assert_eq!(flows.len(), 6);
    // The model behind them: what each operation waits for.
    let after = |stream: &Stream, name: &str| {
        let o = trace.ops.iter().find(|o| o.stream == stream.id() && o.name == name).unwrap();
        o.after.iter().map(|w| (w.device, w.stream)).collect::<Vec<_>>()
    };
    assert_eq!(after(b, "memcpy DtoD"), [(0, a.id())]);
    assert_eq!(after(b, "wait"), [(0, a.id())]);
    assert_eq!(after(&c, "memset"), [(0, a.id())]);
    assert!(
        trace.ops.iter().filter(|o| o.name == "memset" && o.stream != c.id()).all(|o| o.after.is_empty())
    );
}
