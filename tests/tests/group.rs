//! One operation over several streams and devices (`ForeignGroup`, the
//! engine's group flavor, issue 29 item 1): each stream waits for its own
//! part's conflicts, later work on any stream waits for the part that used
//! the memory, a failed or panicking call still counts as submitted, the
//! refusals come before any call, and group, single-stream and cross-device
//! submissions from several threads over two and three devices never
//! deadlock and lose no use. A raw driver call (`cuMemsetD32Async`) stands
//! in for the foreign library (NCCL's `ncclGroupEnd` enqueues on every
//! stream the same way).
//!
//! On the simulator (`CUDA_SIM_DEVICES`, default 2) the race oracle checks
//! every ordering; on a GPU the data is checked.

use gpu_sync::cuda_sys::result::memory::memset_d32_async;
use gpu_sync::{Device, DeviceBuffer, Error, ForeignGroup, ForeignUses, Stream};
use kernels::Kernels;
use sync_tests::{Watchdog, ctx, devices};

const N: usize = 1 << 14;

/// Sets `x` (declared on `uses`) to `v` on `raw`: one `cuMemsetD32Async`.
///
/// # Safety
/// `ptr` is the address `uses` returned for a buffer of `N` words.
unsafe fn set(
    ptr: gpu_sync::cuda_sys::CUdeviceptr,
    v: u32,
    raw: gpu_sync::cuda_sys::BorrowedStream<'_>,
) -> gpu_sync::Result<()> {
    // SAFETY: the caller's promise: a declared output of N words, ordered
    // by the engine.
    Ok(unsafe { memset_d32_async(ptr, v, N, raw) }?)
}

#[test]
fn a_group_over_two_devices_orders_each_part_and_the_work_after_it() {
    let t = ctx(0x2911);
    let Some(d) = devices(2) else { return };
    let (k0, k1) = (Kernels::load(&d[0]).expect("k0"), Kernels::load(&d[1]).expect("k1"));
    let (g0, g1) = (Stream::new(&d[0]).expect("g0"), Stream::new(&d[1]).expect("g1"));
    let (w0, w1) = (Stream::new(&d[0]).expect("w0"), Stream::new(&d[1]).expect("w1"));
    for round in 1..=6u32 {
        // Written by kernels on other streams first: each part must wait.
        let mut x0 = DeviceBuffer::<u32>::zeroed(&w0, N).expect("x0");
        let mut x1 = DeviceBuffer::<u32>::zeroed(&w1, N).expect("x1");
        k0.bump(&w0, &mut x0, 1).expect("bump x0");
        k1.bump(&w1, &mut x1, 1).expect("bump x1");
        let (mut u0, mut u1) = (ForeignUses::new(), ForeignUses::new());
        let (p0, p1) = (u0.output(&mut x0), u1.output(&mut x1));
        // SAFETY: one memset per stream, on that stream, over exactly the
        // memory declared for it; nothing else touched.
        unsafe {
            ForeignGroup::new().on(&g0, u0).on(&g1, u1).launch("group memset", |raw| {
                set(p0, 10 * round, raw[0])?;
                set(p1, 10 * round + 1, raw[1])
            })
        }
        .expect("group");
        // Later work on the other streams waits for the group's parts.
        k0.bump(&w0, &mut x0, 1).expect("bump x0 after");
        k1.bump(&w1, &mut x1, 1).expect("bump x1 after");
        assert_eq!(w0.to_vec(&x0).expect("x0"), vec![10 * round + 1; N]);
        assert_eq!(w1.to_vec(&x1).expect("x1"), vec![10 * round + 2; N]);
        // Dropped at once: freed after every device's uses.
    }
    t.finish();
}

/// A part whose buffer another device's stream used last (a peer copy
/// into it): the group waits for that stream too, across devices (a wait
/// on another device's timeline, made before anything is enqueued; both
/// devices' books are the group's own here).
#[test]
fn a_part_whose_buffer_another_device_wrote_waits_for_that_device() {
    let t = ctx(0x2915);
    let Some(d) = devices(2) else { return };
    let (g0, g1) = (Stream::new(&d[0]).expect("g0"), Stream::new(&d[1]).expect("g1"));
    let w1 = Stream::new(&d[1]).expect("w1");
    let k1 = Kernels::load(&d[1]).expect("k1");
    for round in 1..=4u32 {
        let mut x0 = DeviceBuffer::<u32>::zeroed(&g0, N).expect("x0");
        let mut x1 = DeviceBuffer::<u32>::zeroed(&g1, N).expect("x1");
        let mut src = DeviceBuffer::<u32>::zeroed(&w1, N).expect("src");
        k1.bump(&w1, &mut src, round).expect("bump src");
        // Device 0's buffer written last on device 1's stream.
        w1.copy(&src, &mut x0).expect("peer copy into x0");
        let (mut u0, mut u1) = (ForeignUses::new(), ForeignUses::new());
        let (p0, p1) = (u0.output(&mut x0), u1.output(&mut x1));
        // SAFETY: one memset per stream, on that stream, over exactly the
        // memory declared for it; nothing else touched.
        unsafe {
            ForeignGroup::new().on(&g0, u0).on(&g1, u1).launch("group after a peer copy", |raw| {
                set(p0, 100 + round, raw[0])?;
                set(p1, 200 + round, raw[1])
            })
        }
        .expect("group");
        assert_eq!(g0.to_vec(&x0).expect("x0"), vec![100 + round; N]);
        assert_eq!(g1.to_vec(&x1).expect("x1"), vec![200 + round; N]);
    }
    t.finish();
}

#[test]
fn a_failed_or_panicking_group_call_still_records_what_it_queued() {
    let t = ctx(0x2912);
    let Some(d) = devices(2) else { return };
    let k1 = Kernels::load(&d[1]).expect("k1");
    let (g0, g1) = (Stream::new(&d[0]).expect("g0"), Stream::new(&d[1]).expect("g1"));
    let w1 = Stream::new(&d[1]).expect("w1");
    let mut x0 = DeviceBuffer::<u32>::zeroed(&g0, N).expect("x0");
    let mut x1 = DeviceBuffer::<u32>::zeroed(&w1, N).expect("x1");
    // Queues device 1's part, then fails before device 0's.
    let (u0, mut u1) = (ForeignUses::new(), ForeignUses::new());
    let p1 = u1.output(&mut x1);
    // SAFETY: one memset on stream 1 over its declared memory.
    let r: gpu_sync::Result<()> = unsafe {
        ForeignGroup::new().on(&g0, u0).on(&g1, u1).launch("failing group", |raw| {
            set(p1, 5, raw[1])?;
            Err(Error::InvalidArgument("the foreign library failed part-way".into()))
        })
    };
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // The memset it queued is ordered before a kernel on another stream.
    k1.bump(&w1, &mut x1, 1).expect("bump");
    assert_eq!(w1.to_vec(&x1).expect("x1"), vec![6; N]);

    // A panic after queuing: recorded, the books released, the panic resumed.
    let (mut u0, u1) = (ForeignUses::new(), ForeignUses::new());
    let p0 = u0.output(&mut x0);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: one memset on stream 0 over its declared memory.
        unsafe {
            ForeignGroup::new().on(&g0, u0).on(&g1, u1).launch(
                "panicking group",
                |raw| -> gpu_sync::Result<()> {
                    set(p0, 8, raw[0])?;
                    panic!("the foreign library panicked after queuing")
                },
            )
        }
    }));
    assert!(caught.is_err(), "the panic resumed");
    let w0 = Stream::new(&d[0]).expect("w0");
    assert_eq!(w0.to_vec(&x0).expect("x0 after the panic"), vec![8; N]);
    t.finish();
}

#[test]
fn a_group_is_refused_for_an_unreached_buffer_and_on_a_capturing_stream() {
    let t = ctx(0x2913);
    let Some(d) = devices(2) else { return };
    let (s0, s1) = (Stream::new(&d[0]).expect("s0"), Stream::new(&d[1]).expect("s1"));
    let mut x0 = DeviceBuffer::<u32>::zeroed(&s0, N).expect("x0");
    if !d[1].peer_access_enabled(&d[0]) {
        let mut u = ForeignUses::new();
        u.output(&mut x0);
        // SAFETY: refused before the call runs (the call queues nothing).
        let r = unsafe { ForeignGroup::new().on(&s1, u).launch("unreached", |_| Ok(())) };
        assert!(matches!(r, Err(Error::DeviceMismatch { expected: 1, found: 0, .. })), "{r:?}");
    }
    // SAFETY: queues nothing.
    let r = unsafe { ForeignGroup::new().launch("no stream", |_| Ok(())) };
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let graph = s0.capture(|_| {
        // SAFETY: refused before the call runs.
        let r =
            unsafe { ForeignGroup::new().on(&s0, ForeignUses::new()).launch("captured group", |_| Ok(())) };
        assert!(matches!(r, Err(Error::Capturing { op: "captured group" })), "{r:?}");
        Ok(())
    });
    graph.expect("an empty capture");
    t.finish();
}

#[test]
fn threads_mixing_groups_single_stream_and_cross_device_work_never_deadlock() {
    let t = ctx(0x2914);
    let Some(d) = devices(2) else { return };
    let three = devices(3);
    let _dog = Watchdog::arm(120, "group, single-stream and cross-device submissions from four threads");
    let iters = if t.sim() { 60 } else { 400 };
    let src0 = {
        let s = Stream::new(&d[0]).expect("s");
        let b = DeviceBuffer::from_slice(&s, &vec![3u32; N]).expect("src0");
        s.synchronize().expect("sync");
        b
    };
    std::thread::scope(|scope| {
        for th in 0..4u32 {
            let (d, src0, three) = (&d, &src0, three.as_ref());
            scope.spawn(move || {
                // Threads 0 and 2 give the devices in opposite orders; 1
                // launches on one device at a time; 3 copies across devices.
                let order: Vec<&Device> = match (th, three) {
                    (2, Some(t3)) => vec![&t3[2], &d[1], &d[0]],
                    (2, None) => vec![&d[1], &d[0]],
                    _ => vec![&d[0], &d[1]],
                };
                let streams: Vec<Stream> =
                    order.iter().map(|dev| Stream::new(dev).expect("stream")).collect();
                let mut bufs: Vec<DeviceBuffer<u32>> =
                    streams.iter().map(|s| DeviceBuffer::<u32>::zeroed(s, N).expect("buf")).collect();
                let ks: Vec<Kernels> = order.iter().map(|dev| Kernels::load(dev).expect("kernels")).collect();
                for i in 0..iters as u32 {
                    match th {
                        0 | 2 => {
                            let mut uses: Vec<ForeignUses<'_>> = Vec::new();
                            let mut ptrs = Vec::new();
                            for b in bufs.iter_mut() {
                                let mut u = ForeignUses::new();
                                ptrs.push(u.output(b));
                                uses.push(u);
                            }
                            let mut g = ForeignGroup::new();
                            for (s, u) in streams.iter().zip(uses) {
                                g = g.on(s, u);
                            }
                            // SAFETY: one memset per stream over its
                            // declared buffer of N words.
                            unsafe {
                                g.launch("threads' group", |raw| {
                                    for (p, r) in ptrs.iter().zip(raw) {
                                        set(*p, i, *r)?;
                                    }
                                    Ok(())
                                })
                            }
                            .expect("group");
                        }
                        1 => {
                            for ((k, s), b) in ks.iter().zip(&streams).zip(bufs.iter_mut()) {
                                k.bump(s, b, 1).expect("bump");
                            }
                        }
                        _ => {
                            // Device 0's shared source into device 1's buffer
                            // on device 1's stream (staged or over the link).
                            streams[1].copy(src0, &mut bufs[1]).expect("copy across devices");
                        }
                    }
                }
                // Read on a stream of another device than the last writer's
                // where there is one: the engine orders it.
                let reader = Stream::new(order[0]).expect("reader");
                let got = reader.to_vec(&bufs[0]).expect("read");
                let want = match th {
                    0 | 2 => iters - 1,
                    1 => iters,
                    _ => 0,
                };
                assert!(got.iter().all(|&v| v == want), "thread {th}: {} != {want}", got[0]);
                if th == 3 {
                    let got = streams[1].to_vec(&bufs[1]).expect("copied");
                    assert!(got.iter().all(|&v| v == 3), "thread 3's copy: {}", got[0]);
                }
            });
        }
    });
    t.finish();
}
