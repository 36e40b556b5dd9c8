//! The safe API end to end: on the simulator in CI (every test also asserts
//! that the race oracle saw nothing), and against the real driver from the
//! GPU bundle (`GPU_SYNC_DRIVER=cuda`). On a GPU the spin kernel holds one
//! stream busy for milliseconds, so a missing wait would show up as wrong
//! data, not just as an oracle report.

use gpu_sync::cuda_sys::CUdevice_attribute as A;
use gpu_sync::{
    DeviceBuffer, DeviceSynced, Error, HostAllocFlags, In, LaunchConfig, Len, Module, Out, PinnedBuffer,
    Polled, Proof, Stream, SyncEvent, TimingEvent,
};
use kernels::{Kernels, reference};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use sync_tests::ctx;

const SEED: u32 = 0xC0FFEE;

#[test]
fn devices_report_their_attributes() {
    let t = ctx(1);
    let n = gpu_sync::Device::count().expect("count");
    assert!(n >= 1);
    let d = &t.device;
    assert_eq!(d.ordinal(), 0);
    assert!(!d.name().expect("name").is_empty());
    let (major, _) = d.compute_capability().expect("cc");
    assert!(major >= 8, "the kernels need sm_80 or newer, found {major}");
    assert!(d.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).expect("sms") > 0);
    assert!(d.total_memory().expect("mem") > 1 << 30);
    match gpu_sync::Device::get(n as i32) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("no CUDA device"), "{msg}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    t.finish();
}

#[test]
fn stream_priorities_come_from_the_driver_range() {
    let t = ctx(2);
    let (least, greatest) = t.device.stream_priority_range();
    assert!(greatest <= least, "({least}, {greatest})");
    let s = Stream::with_priority(&t.device, greatest).expect("greatest priority");
    assert_eq!(s.priority(), greatest);
    assert_eq!(Stream::new(&t.device).expect("default").priority(), least);
    match Stream::with_priority(&t.device, greatest - 1) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("outside"), "{msg}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    t.finish();
}

#[test]
fn a_consumer_on_another_stream_needs_no_manual_wait() {
    let t = ctx(3);
    let k = Kernels::load(&t.device).expect("kernels");
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    let n = 1 << 20;
    let mut x = DeviceBuffer::<u32>::alloc(&a, n).expect("x");
    let mut spin = DeviceBuffer::<u64>::zeroed(&a, 1).expect("spin");
    for round in 0..3u32 {
        // A is busy for a while, then writes x; B reads x at once.
        k.spin(&a, t.cycles_for_ms(5.0), &mut spin).expect("spin");
        k.fill_pattern(&a, &mut x, SEED + round).expect("fill");
        let mut bad = DeviceBuffer::<u64>::zeroed(&b, 1).expect("bad");
        k.check_pattern(&b, &x, SEED + round, &mut bad).expect("check");
        let mut y = DeviceBuffer::<u32>::alloc(&b, n).expect("y");
        k.copy(&b, &x, &mut y).expect("copy");
        assert_eq!(b.to_vec(&bad).expect("read")[0], 0, "round {round}: B read x before A wrote it");
        let host = b.to_vec(&y).expect("y");
        assert!(host.iter().enumerate().all(|(i, &v)| v == reference::pattern(SEED + round, i as u64)));
    }
    t.finish();
}

#[test]
fn a_buffer_dropped_while_another_stream_reads_it_is_not_reused_early() {
    let t = ctx(4);
    let k = Kernels::load(&t.device).expect("kernels");
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    let mut spin = DeviceBuffer::<u64>::zeroed(&b, 1).expect("spin");
    for words in [1usize << 16, 1 << 20, 3 << 20] {
        let mut x = DeviceBuffer::<u32>::alloc(&a, words).expect("x");
        k.fill_pattern(&a, &mut x, SEED).expect("fill");
        // B: busy, then reads x.
        k.spin(&b, t.cycles_for_ms(10.0), &mut spin).expect("spin");
        let mut y = DeviceBuffer::<u32>::alloc(&b, words).expect("y");
        k.copy(&b, &x, &mut y).expect("copy");
        // Drop x while B still reads it, then poison a same-size buffer on A
        // at once: early reuse of x's memory would poison B's copy.
        drop(x);
        let mut z = DeviceBuffer::<u32>::alloc(&a, words).expect("z");
        a.fill_bytes(&mut z, 0xff).expect("poison");
        let mut bad = DeviceBuffer::<u64>::zeroed(&b, 1).expect("bad");
        k.check_pattern(&b, &y, SEED, &mut bad).expect("check");
        assert_eq!(b.to_vec(&bad).expect("read")[0], 0, "{words} words: x was reused before B read it");
        drop(z);
    }
    t.finish();
}

#[test]
fn downloads_are_released_only_by_a_covering_wait() {
    let t = ctx(5);
    let k = Kernels::load(&t.device).expect("kernels");
    let (s, other) = (Stream::new(&t.device).expect("s"), Stream::new(&t.device).expect("other"));
    let n = 4096;
    let mut x = DeviceBuffer::<u32>::alloc(&s, n).expect("x");
    let want: Vec<u32> = (0..n as u64).map(|i| reference::pattern(SEED, i)).collect();
    let pinned = || PinnedBuffer::<u32>::new(&t.device, n, HostAllocFlags::empty()).expect("pinned");

    // Its own event wait.
    let mut spin = DeviceBuffer::<u64>::zeroed(&s, 1).expect("spin");
    k.spin(&s, t.cycles_for_ms(2.0), &mut spin).expect("spin");
    k.fill_pattern(&s, &mut x, SEED).expect("fill");
    let p = s.download(&x, pinned()).expect("download");
    assert_eq!(&p.wait().expect("wait")[..], &want[..]);

    // A stream proof of the same stream covers it; one of another stream,
    // or taken before the download, does not — and hands the pending back.
    let before = other.synchronize().expect("sync other");
    let stale = s.synchronize().expect("sync s");
    let p = s.download(&x, pinned()).expect("download");
    let p = match p.redeem(&before) {
        Err(nc) => nc.pending,
        Ok(_) => panic!("a proof of another stream covered the download"),
    };
    assert!(!stale.covers(&p.work()));
    let p = match p.redeem(&stale) {
        Err(nc) => {
            assert!(matches!(nc.error, Error::NotCovered { .. }));
            nc.pending
        }
        Ok(_) => panic!("a proof from before the download covered it"),
    };
    let proof = s.synchronize().expect("sync");
    assert!(proof.covers(&p.work()));
    assert_eq!(&p.redeem(&proof).expect("covered")[..], &want[..]);

    // A device proof covers every stream; polling gets there too.
    let p = s.download(&x, pinned()).expect("download");
    let dev: DeviceSynced = t.device.synchronize().expect("device sync");
    assert_eq!(&p.redeem(&dev).expect("device proof covers")[..], &want[..]);
    let mut p = s.download(&x, pinned()).expect("download");
    let got = loop {
        match p.poll().expect("poll") {
            Polled::Ready(v) => break v,
            Polled::Waiting(back) => p = back,
        }
    };
    assert_eq!(&got[..], &want[..]);

    // Dropping a pending download without waiting is safe (the buffer's drop
    // waits for the copy), and so is forgetting one (it leaks).
    k.spin(&s, t.cycles_for_ms(2.0), &mut spin).expect("spin");
    drop(s.download(&x, pinned()).expect("download"));
    std::mem::forget(s.download(&x, pinned()).expect("download"));
    s.synchronize().expect("sync");
    t.finish();
}

#[test]
fn events_time_a_spin_kernel_to_within_a_few_percent() {
    let t = ctx(6);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let khz = t.device.attribute(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).expect("clock");
    let mut out = DeviceBuffer::<u64>::zeroed(&s, 1).expect("out");
    // Warm up: clocks ramp under load.
    k.spin(&s, t.cycles_for_ms(50.0), &mut out).expect("warmup");
    let (start, end) = (TimingEvent::new(&t.device).expect("e"), TimingEvent::new(&t.device).expect("e"));
    for ms in [5.0, 20.0] {
        let cycles = t.cycles_for_ms(ms);
        start.record(&s).expect("record");
        k.spin(&s, cycles, &mut out).expect("spin");
        end.record(&s).expect("record");
        end.synchronize().expect("sync");
        let elapsed = start.elapsed(&end).expect("elapsed").as_secs_f64();
        let expected = cycles as f64 / (f64::from(khz) * 1e3);
        let ratio = elapsed / expected;
        assert!(
            (0.97..1.05).contains(&ratio),
            "{ms} ms of cycles took {elapsed:.6} s, expected {expected:.6} s"
        );
        assert!(s.to_vec(&out).expect("out")[0] >= cycles);
    }
    t.finish();
}

#[test]
fn elapsed_refuses_unrecorded_and_unfinished_events() {
    let t = ctx(7);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let (start, end) = (TimingEvent::new(&t.device).expect("e"), TimingEvent::new(&t.device).expect("e"));
    assert!(matches!(start.elapsed(&end), Err(Error::EventNotRecorded)));
    let mut out = DeviceBuffer::<u64>::zeroed(&s, 1).expect("out");
    start.record(&s).expect("record");
    k.spin(&s, t.cycles_for_ms(200.0), &mut out).expect("spin");
    end.record(&s).expect("record");
    // Never a garbage value: either "not complete", or (where the driver
    // got there first — the simulator's queries may run queued work) the
    // true time of events that really have completed.
    match start.elapsed(&end) {
        Err(Error::EventNotComplete) => {}
        Ok(d) => {
            assert!(t.sim(), "200 ms of spinning cannot be done already on a GPU");
            assert!(end.query().expect("query").is_some());
            assert!(d.as_secs_f64() > 0.19, "{d:?}");
        }
        other => panic!("expected EventNotComplete, got {other:?}"),
    }
    end.synchronize().expect("sync");
    assert!(start.elapsed(&end).expect("elapsed").as_secs_f64() > 0.1);
    // A never-recorded event is no wait and proves nothing.
    let never = SyncEvent::new(&t.device).expect("e");
    s.wait(&never).expect("wait on never-recorded");
    let proof = never.synchronize().expect("sync never-recorded");
    let p =
        s.download(&out, PinnedBuffer::new(&t.device, 1, HostAllocFlags::empty()).expect("p")).expect("d");
    assert!(!proof.covers(&p.work()));
    drop(p);
    t.finish();
}

#[test]
fn graph_replay_matches_eager_execution() {
    let t = ctx(8);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let n = 1 << 16;
    let (salt, add) = (0x5a17u32, 3u32);
    let mut x = DeviceBuffer::<u32>::alloc(&s, n).expect("x");
    let mut y = DeviceBuffer::<u32>::alloc(&s, n).expect("y");
    let mut out = DeviceBuffer::<u32>::alloc(&s, n).expect("out");
    // CPU reference.
    let mut hx: Vec<u32> = (0..n as u64).map(|i| reference::pattern(SEED, i)).collect();
    let hy: Vec<u32> = (0..n as u64).map(|i| reference::pattern(SEED + 1, i)).collect();
    reference::bump_u32(&mut hx, add);
    let mut want = vec![0u32; n];
    reference::mix_u32(&hx, &hy, &mut want, salt);
    // Eager.
    k.fill_pattern(&s, &mut x, SEED).expect("fill");
    k.fill_pattern(&s, &mut y, SEED + 1).expect("fill");
    k.bump(&s, &mut x, add).expect("bump");
    k.mix(&s, &x, &y, &mut out, salt).expect("mix");
    assert_eq!(s.to_vec(&out).expect("eager"), want);
    // Captured, with y filled on a fork joined by the capture-local tracker.
    s.fill_bytes(&mut out, 0).expect("poison");
    let graph = s
        .capture(|cap| {
            let fork = cap.fork()?;
            k.fill_pattern(cap.stream(), &mut x, SEED)?;
            k.fill_pattern(&fork, &mut y, SEED + 1)?;
            k.bump(cap.stream(), &mut x, add)?;
            k.mix(cap.stream(), &x, &y, &mut out, salt)
        })
        .expect("capture");
    assert!(graph.node_count().expect("nodes") >= 4);
    assert_eq!(graph.buffer_count(), 3);
    assert_eq!(s.to_vec(&out).expect("nothing ran"), vec![0u32; n], "capture must not execute");
    let exec = graph.instantiate().expect("instantiate");
    let replay = Stream::new(&t.device).expect("replay");
    for _ in 0..2 {
        exec.launch(&replay).expect("launch");
        // Read on a third stream: ordered after the replay automatically.
        assert_eq!(s.to_vec(&out).expect("replayed"), want);
    }
    // Buffers dropped while the graph holds them stay alive for it.
    drop((x, y));
    exec.launch(&replay).expect("launch after drop");
    assert_eq!(s.to_vec(&out).expect("replayed"), want);
    t.finish();
}

#[test]
fn capture_refuses_host_visible_work_and_ends_cleanly() {
    let t = ctx(9);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 256).expect("x");
    let late = DeviceBuffer::<u32>::zeroed(&s, 256).expect("late");
    let p = PinnedBuffer::<u32>::new(&t.device, 256, HostAllocFlags::empty()).expect("pinned");
    let doomed = PinnedBuffer::<u32>::new(&t.device, 256, HostAllocFlags::empty()).expect("pinned");
    let r = s.capture(|cap| {
        let st = cap.stream();
        assert!(st.is_capturing());
        assert!(matches!(st.synchronize(), Err(Error::Capturing { .. })));
        assert!(matches!(DeviceBuffer::<u32>::alloc(st, 4), Err(Error::Capturing { .. })));
        // Calls the driver forbids a capturing thread are refused (they
        // would silently invalidate the capture), or deferred from Drop.
        assert!(matches!(
            PinnedBuffer::<u32>::new(&t.device, 4, HostAllocFlags::empty()),
            Err(Error::Capturing { .. })
        ));
        assert!(matches!(t.device.synchronize(), Err(Error::Capturing { .. })));
        drop(doomed);
        assert!(matches!(st.download(&x, p), Err(Error::Capturing { .. })));
        assert!(matches!(st.upload_pageable(&[0u32; 256], &mut x), Err(Error::Capturing { .. })));
        assert!(matches!(st.launch_host_fn(|| {}), Err(Error::Capturing { .. })));
        k.bump(st, &mut x, 1)?;
        // A buffer allocated on this stream and dropped now is freed after
        // the capture ends, not inside the graph.
        drop(late);
        Ok(())
    });
    let graph = r.expect("capture");
    assert!(!s.is_capturing());
    // An error inside the closure ends the capture and is returned.
    let e = s.capture(|_| Err(Error::InvalidArgument("stop".into()))).err();
    assert!(matches!(e, Some(Error::InvalidArgument(_))));
    assert!(!s.is_capturing());
    graph.instantiate().expect("instantiate").launch(&s).expect("launch");
    assert!(s.to_vec(&x).expect("x").iter().all(|&v| v == 1));
    t.finish();
}

#[test]
fn launches_are_checked_before_the_driver_sees_them() {
    let t = ctx(10);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let m = Module::load(&t.device, kernels::ModuleId::Elementwise.fatbin()).expect("module");
    // SAFETY: a wrong signature for add_f32; the driver's parameter list
    // rejects it (asserted), so no kernel comes back to launch.
    match unsafe { m.kernel::<(In<f32>, Out<f32>)>("add_f32") } {
        Err(Error::KernelSignature { kernel, problem }) => {
            assert_eq!(kernel, "add_f32");
            assert!(problem.contains("parameter") || problem.contains("parameters"), "{problem}");
        }
        other => panic!("expected a signature error, got {other:?}"),
    }
    // SAFETY: as above, rejected on parameter 3's size.
    match unsafe { m.kernel::<(In<f32>, In<f32>, Out<f32>, u32)>("add_f32") } {
        Err(Error::KernelSignature { problem, .. }) => assert!(problem.contains("parameter 3"), "{problem}"),
        other => panic!("expected a size mismatch on parameter 3, got {other:?}"),
    }
    // SAFETY: no such kernel: nothing comes back.
    match unsafe { m.kernel::<()>("no_such_kernel") } {
        // On the simulator the error says how a kernel comes to exist there;
        // on a GPU, that a C++ name needs extern "C".
        Err(Error::KernelSignature { problem, .. }) => {
            assert!(problem.contains("no such kernel") && problem.contains("extern \"C\""), "{problem}");
            if t.sim() {
                assert!(problem.contains("gpu_sync::sim::register"), "{problem}");
            }
        }
        other => panic!("expected no such kernel, got {other:?}"),
    }
    // SAFETY: add_f32(const float* x, const float* y, float* out, u64 n) in
    // kernels/cu/elementwise.cu: reads x and y, stores to out, at indices
    // i < n only, n a `Len` that gpu-sync checks against each view; it
    // touches nothing else. Its grid-stride loop indexes by x alone, so it
    // is race-free in 1-D launches; `add` stays in this test, whose only
    // launch that reaches the driver is 1-D.
    let add = unsafe { m.kernel::<(In<f32>, In<f32>, Out<f32>, Len)>("add_f32") }.expect("add");
    assert!(add.signature_checked());
    let x = DeviceBuffer::<f32>::zeroed(&s, 64).expect("x");
    let mut o = DeviceBuffer::<f32>::zeroed(&s, 64).expect("o");
    for cfg in [
        LaunchConfig::new(1, 2048),
        LaunchConfig::new(0, 64),
        LaunchConfig::new(1, (64, 64, 1)),
        LaunchConfig::new(1, 64).with_shared_mem(1 << 20),
    ] {
        assert!(
            matches!(add.launch(&s, cfg, (&x, &x, &mut o, 64u64)), Err(Error::LaunchConfig { .. })),
            "{cfg:?}"
        );
    }
    // Dynamic shared memory: a launch may use the driver's own default
    // unasked (add_f32 has no static shared memory: the device's per-block
    // limit), one byte more is refused before the driver, and raising the
    // limit is remembered; the opt-in limit is the ceiling.
    let limit = add.max_dynamic_shared_mem();
    assert_eq!(
        i64::from(limit),
        i64::from(t.device.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK).unwrap())
    );
    let over = LaunchConfig::new(1, 64).with_shared_mem(limit + 1);
    assert!(matches!(add.launch(&s, over, (&x, &x, &mut o, 64u64)), Err(Error::LaunchConfig { .. })));
    add.set_max_dynamic_shared_mem(limit + 1024).expect("raise");
    assert_eq!(add.max_dynamic_shared_mem(), limit + 1024);
    add.launch(&s, over, (&x, &x, &mut o, 64u64)).expect("a launch within the raised limit");
    assert!(matches!(add.set_max_dynamic_shared_mem(u32::MAX), Err(Error::LaunchConfig { .. })));
    assert_eq!(add.max_dynamic_shared_mem(), limit + 1024, "a refused raise changes nothing");
    // A view that breaks the 16-byte alignment of the vector loads.
    let mut a = DeviceBuffer::<f32>::zeroed(&s, 65).expect("a");
    let b = DeviceBuffer::<f32>::zeroed(&s, 64).expect("b");
    let mut av = a.slice_mut(1..65).expect("view");
    assert!(matches!(k.triad(&s, &mut av, &b, &b, 1.0), Err(Error::InvalidArgument(_))));
    // Lengths and ranges.
    assert!(matches!(x.slice(10..100), Err(Error::OutOfRange { .. })));
    let mut short = DeviceBuffer::<f32>::zeroed(&s, 8).expect("short");
    assert!(matches!(s.copy(&x, &mut short), Err(Error::LengthMismatch { .. })));
    // Nothing bad reached the driver: the stream still works.
    add.launch(&s, LaunchConfig::for_elements(64, 64), (&x, &x, &mut o, 64u64)).expect("good launch");
    s.synchronize().expect("sync");
    t.finish();
}

#[test]
fn host_functions_run_after_earlier_work() {
    let t = ctx(11);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let mut spin = DeviceBuffer::<u64>::zeroed(&s, 1).expect("spin");
    k.spin(&s, t.cycles_for_ms(5.0), &mut spin).expect("spin");
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    s.launch_host_fn(move || flag.store(true, Ordering::SeqCst)).expect("host fn");
    s.synchronize().expect("sync");
    assert!(ran.load(Ordering::SeqCst));
    // A panicking host function is contained.
    s.launch_host_fn(|| panic!("deliberate panic in a host function")).expect("host fn");
    s.synchronize().expect("sync after a panicking host fn");
    t.finish();
}

#[test]
fn explicit_waits_order_work_without_blocking() {
    let t = ctx(12);
    let k = Kernels::load(&t.device).expect("kernels");
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    let mut spin = DeviceBuffer::<u64>::zeroed(&a, 1).expect("spin");
    let mut x = DeviceBuffer::<u32>::alloc(&a, 1024).expect("x");
    k.spin(&a, t.cycles_for_ms(5.0), &mut spin).expect("spin");
    k.fill_pattern(&a, &mut x, SEED).expect("fill");
    let ev = SyncEvent::new(&t.device).expect("ev");
    ev.record(&a).expect("record");
    b.wait(&ev).expect("wait");
    b.wait_stream(&a).expect("wait_stream");
    assert!(a.query().expect("query").is_none() || t.sim(), "A should still be busy on a GPU");
    let got = b.to_vec(&x).expect("read");
    assert!(got.iter().enumerate().all(|(i, &v)| v == reference::pattern(SEED, i as u64)));
    let proof = ev.synchronize().expect("ev sync");
    assert!(ev.query().expect("query").is_some());
    let _ = proof;
    t.finish();
}

#[test]
fn pinned_uploads_and_host_writes_wait_for_each_other() {
    let t = ctx(13);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let n = 1 << 18;
    let first: Vec<u32> = (0..n as u64).map(|i| reference::pattern(SEED, i)).collect();
    let mut host = PinnedBuffer::from_slice(&t.device, &first, HostAllocFlags::PORTABLE).expect("pinned");
    assert_eq!(&host[..], &first[..]);
    let mut x = DeviceBuffer::<u32>::alloc(&s, n).expect("x");
    let mut spin = DeviceBuffer::<u64>::zeroed(&s, 1).expect("spin");
    // The upload waits behind a spin; the host write must wait for it.
    k.spin(&s, t.cycles_for_ms(10.0), &mut spin).expect("spin");
    s.upload(&host, &mut x).expect("upload");
    host.as_mut_slice().expect("host write").fill(0xdead_beef);
    let mut bad = DeviceBuffer::<u64>::zeroed(&s, 1).expect("bad");
    k.check_pattern(&s, &x, SEED, &mut bad).expect("check");
    assert_eq!(s.to_vec(&bad).expect("bad")[0], 0, "the host overwrote pinned memory during the upload");
    // And a download into a pinned buffer an upload still reads waits for it.
    let mut y = DeviceBuffer::<u32>::zeroed(&s, n).expect("y");
    s.upload(&host, &mut y).expect("upload 2");
    let back = s.download(&x, host).expect("download").wait().expect("wait");
    assert_eq!(&back[..], &first[..]);
    assert!(s.to_vec(&y).expect("y").iter().all(|&v| v == 0xdead_beef));
    t.finish();
}

#[test]
fn streams_and_buffers_are_shared_across_threads() {
    let t = ctx(14);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let n = 1 << 14;
    let input = DeviceBuffer::from_slice(&s, &(0..n).map(|i| i as f32).collect::<Vec<_>>()).expect("input");
    let shared = Stream::new(&t.device).expect("shared");
    let session = t.session.as_ref();
    let results: Vec<Vec<f32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (k, input, shared) = (&k, &input, &shared);
                scope.spawn(move || {
                    let _g = session.map(|s| s.enter());
                    let own = Stream::new(input.device()).expect("stream");
                    let stream = if i % 2 == 0 { &own } else { shared };
                    let mut out = DeviceBuffer::<f32>::alloc(stream, n).expect("out");
                    k.scale(stream, input, &mut out, (i + 1) as f32).expect("scale");
                    stream.to_vec(&out).expect("read")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    for (i, r) in results.iter().enumerate() {
        assert!(r.iter().enumerate().all(|(j, &v)| v == j as f32 * (i + 1) as f32), "thread {i}");
    }
    t.finish();
}

#[test]
fn default_streams_are_there_by_name_for_interop() {
    let t = ctx(15);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let legacy = t.device.legacy_stream();
    let pts = t.device.per_thread_stream();
    let ev = SyncEvent::new(&t.device).expect("ev");
    let mut x = DeviceBuffer::<u32>::alloc(&s, 64).expect("x");
    k.fill_pattern(&s, &mut x, SEED).expect("fill");
    ev.record(&s).expect("record");
    legacy.wait(&ev).expect("legacy waits");
    pts.wait(&ev).expect("per-thread waits");
    let ev2 = SyncEvent::new(&t.device).expect("ev2");
    ev2.record(&legacy).expect("record on legacy");
    s.wait(&ev2).expect("s waits on legacy");
    legacy.synchronize().expect("legacy sync");
    pts.synchronize().expect("per-thread sync");
    assert!(
        s.to_vec(&x).expect("x").iter().enumerate().all(|(i, &v)| v == reference::pattern(SEED, i as u64))
    );
    t.finish();
}

#[test]
fn copies_between_two_devices_are_tracked() {
    let t = ctx(16);
    if gpu_sync::Device::count().expect("count") < 2 {
        eprintln!("one device only: nothing to test");
        return;
    }
    let d1 = gpu_sync::Device::get(1).expect("device 1");
    let k0 = Kernels::load(&t.device).expect("kernels 0");
    let (s0, s1) = (Stream::new(&t.device).expect("s0"), Stream::new(&d1).expect("s1"));
    let n = 1 << 16;
    let mut x = DeviceBuffer::<u32>::alloc(&s0, n).expect("x");
    k0.fill_pattern(&s0, &mut x, SEED).expect("fill");
    let mut y = DeviceBuffer::<u32>::alloc(&s1, n).expect("y");
    s1.copy(&x, &mut y).expect("peer copy");
    let got = s1.to_vec(&y).expect("y");
    assert!(got.iter().enumerate().all(|(i, &v)| v == reference::pattern(SEED, i as u64)));
    drop(x);
    s1.synchronize().expect("sync");
    t.finish();
}

#[test]
fn close_reports_the_free_and_spares_memory_a_graph_holds() {
    let t = ctx(17);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("s");
    let before = t.device.memory_stats().expect("stats").live_buffers;
    let b = DeviceBuffer::<u32>::zeroed(&s, 1024).expect("b");
    b.close().expect("close frees and reports");
    // A buffer a graph captured: close drops this handle only.
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 256).expect("x");
    let graph = s.capture(|cap| k.bump(cap.stream(), &mut x, 2)).expect("capture");
    let exec = graph.instantiate().expect("instantiate");
    x.close().expect("close a shared buffer");
    // The graph still holds x: replays write it (on the simulator the oracle
    // would report a use after free otherwise).
    exec.launch(&s).expect("launch after close");
    exec.launch(&s).expect("launch after close");
    drop((exec, graph));
    let p = PinnedBuffer::<u32>::new(&t.device, 64, HostAllocFlags::empty()).expect("pinned");
    p.close().expect("pinned close");
    let extra = Stream::new(&t.device).expect("extra");
    extra.close().expect("stream close");
    s.synchronize().expect("sync");
    assert_eq!(t.device.memory_stats().expect("stats").live_buffers, before);
    t.finish();
}
