//! Deadlocks reachable from safe code, each reproduced under a watchdog
//! (a hang aborts the test binary with the reproducer's name instead of
//! hanging CI), and the two points settled beside them.
//!
//! - A host function that calls `Stream::wait_stream`, `SyncEvent::record`
//!   or `Stream::capture` while another stream's pageable copy is in flight:
//!   the simulator runs the host function inside the copy's blocking driver
//!   call; the three must refuse before taking any gpu-sync lock.
//! - A tracked operation inside a host function on a stream another thread
//!   is capturing: the capture routing must not read the stream's state
//!   (under its device's lock) before the refusal.
//! - A `sim::register` closure calling gpu-sync: refused with an error, not
//!   a re-entry into the simulator's global lock.
//! - `cuda_sys::cupti`'s `timestamp` and `flush` in a host function or a
//!   `sim::register` closure: the simulator's CUPTI table refuses them
//!   (`CUPTI_ERROR_INVALID_OPERATION`) through the same door as its driver.
//! - The safe `cuda_sys::result::context::set_current` (re-exported as
//!   `gpu_sync::cuda_sys`) must not leave gpu-sync's per-thread context
//!   cache stale.
//! - The last handle of a module dropped while a launch of it is queued:
//!   `cuModuleUnload` only once the launch is known complete.
//!
//! Simulator only: the hangs need the simulator's host functions and
//! kernels running on the thread that waits in the driver.

use gpu_sync::{DeviceBuffer, Error, HostAllocFlags, Len, Module, Out, PinnedBuffer, Stream, SyncEvent, sim};
use std::sync::{Arc, Mutex};
use sync_tests::{Watchdog, ctx, on_sim};

type Slot = Arc<Mutex<Option<gpu_sync::Result<()>>>>;

fn slot() -> Slot {
    Arc::new(Mutex::new(None))
}

fn take(s: &Slot) -> Option<gpu_sync::Result<()>> {
    s.lock().expect("slot").take()
}

fn not_permitted(r: Option<gpu_sync::Result<()>>, what: &str) {
    match r {
        Some(Err(Error::Driver { error, .. })) if error.0 == cuda_sys::CUresult::CUDA_ERROR_NOT_PERMITTED => {
        }
        other => panic!("{what}: expected CUDA_ERROR_NOT_PERMITTED, got {other:?}"),
    }
}

/// A host function on `b` running `inside`, then a pageable download on `a`
/// (the simulator runs the host function inside the download's driver call).
fn host_fn_during_pageable_copy<F: FnOnce() -> gpu_sync::Result<()> + Send + 'static>(
    seed: u64,
    what: &'static str,
    make: impl FnOnce(&gpu_sync::Device) -> F,
) {
    if !on_sim() {
        return;
    }
    let t = ctx(seed);
    let inside = make(&t.device);
    let dog = Watchdog::arm(30, what);
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    let y = DeviceBuffer::from_slice(&a, &[7u32; 4096]).expect("y");
    a.synchronize().expect("sync");
    let r = slot();
    let r2 = r.clone();
    b.launch_host_fn(move || {
        *r2.lock().expect("slot") = Some(inside());
    })
    .expect("host fn");
    assert_eq!(a.to_vec(&y).expect("to_vec"), vec![7u32; 4096]);
    b.synchronize().expect("sync b");
    drop(dog);
    not_permitted(take(&r), what);
    t.finish();
}

#[test]
fn wait_stream_in_a_host_function_during_a_pageable_copy_is_refused() {
    host_fn_during_pageable_copy(0xd01, "wait_stream in a host function", |dev| {
        let (c, d) = (Stream::new(dev).expect("c"), Stream::new(dev).expect("d"));
        move || c.wait_stream(&d)
    });
}

#[test]
fn event_record_in_a_host_function_during_a_pageable_copy_is_refused() {
    host_fn_during_pageable_copy(0xd11, "SyncEvent::record in a host function", |dev| {
        let c = Stream::new(dev).expect("c");
        let ev = SyncEvent::new(dev).expect("event");
        move || ev.record(&c)
    });
}

#[test]
fn capture_in_a_host_function_during_a_pageable_copy_is_refused() {
    host_fn_during_pageable_copy(0xd21, "Stream::capture in a host function", |dev| {
        let c = Stream::new(dev).expect("c");
        move || c.capture(|_| Ok(())).map(drop)
    });
}

// The operations whose guards moved into the engine (branch `engine2`): a
// graph replay (its exec lock now taken inside `engine::submit`'s closure),
// `Stream::wait` (now `engine::submit`, `Kind::WaitEvent`) and a pinned
// allocation (`engine::off_stream`) refuse before any lock too.

#[test]
fn graph_replay_in_a_host_function_during_a_pageable_copy_is_refused() {
    host_fn_during_pageable_copy(0xd31, "GraphExec::launch in a host function", |dev| {
        let c = Stream::new(dev).expect("c");
        let mut z = DeviceBuffer::<u32>::zeroed(&c, 64).expect("z");
        let exec = c.capture(|_| c.fill_u32(&mut z, 3)).expect("capture").instantiate().expect("instantiate");
        c.synchronize().expect("sync c");
        move || {
            let r = exec.launch(&c);
            drop(z);
            r
        }
    });
}

#[test]
fn stream_wait_in_a_host_function_during_a_pageable_copy_is_refused() {
    host_fn_during_pageable_copy(0xd41, "Stream::wait in a host function", |dev| {
        let (c, d) = (Stream::new(dev).expect("c"), Stream::new(dev).expect("d"));
        let ev = SyncEvent::new(dev).expect("event");
        ev.record(&d).expect("record");
        move || c.wait(&ev)
    });
}

#[test]
fn pinned_alloc_in_a_host_function_during_a_pageable_copy_is_refused() {
    host_fn_during_pageable_copy(0xd51, "PinnedBuffer::new in a host function", |dev| {
        let dev = dev.clone();
        move || PinnedBuffer::<u32>::new(&dev, 16, HostAllocFlags::empty()).map(drop)
    });
}

#[test]
fn a_tracked_operation_in_a_host_function_on_a_stream_being_captured_is_refused() {
    if !on_sim() {
        return;
    }
    let t = ctx(0xd30);
    let dog = Watchdog::arm(30, "a tracked operation in a host function, its stream captured elsewhere");
    let device = &t.device;
    let (a, b, s) =
        (Stream::new(device).expect("a"), Stream::new(device).expect("b"), Stream::new(device).expect("s"));
    let y = DeviceBuffer::from_slice(&a, &[3u32; 1024]).expect("y");
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 1024).expect("x");
    s.synchronize().expect("sync");
    a.synchronize().expect("sync");
    let (capturing_tx, capturing_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let session = t.session.as_ref();
    let r = slot();
    std::thread::scope(|scope| {
        let s2 = s.clone();
        let capturer = scope.spawn(move || {
            let _g = session.map(|s| s.enter());
            s2.capture(|_| {
                capturing_tx.send(()).expect("send");
                // Held open until the host function has run (or timed out).
                let _ = done_rx.recv_timeout(std::time::Duration::from_secs(20));
                Ok(())
            })
            .map(drop)
        });
        capturing_rx.recv().expect("capture began");
        let r2 = r.clone();
        let s3 = s.clone();
        b.launch_host_fn(move || {
            let res = s3.fill_u32(&mut x, 1);
            *r2.lock().expect("slot") = Some(res);
            // `x` drops here: deferred to an ordinary thread.
        })
        .expect("host fn");
        assert_eq!(a.to_vec(&y).expect("to_vec"), vec![3u32; 1024]);
        b.synchronize().expect("sync b");
        done_tx.send(()).expect("done");
        capturer.join().expect("capturer").expect("capture");
    });
    drop(dog);
    not_permitted(take(&r), "fill_u32 in a host function");
    t.finish();
}

#[test]
fn a_sim_kernel_calling_gpu_sync_gets_an_error() {
    if !on_sim() {
        return;
    }
    let t = ctx(0xd40);
    let dog = Watchdog::arm(30, "a sim::register closure calling Device::synchronize");
    let device = t.device.clone();
    let r = slot();
    let r2 = r.clone();
    sim::register::<(Out<u32>, Len)>("deadlocks_reenter", move |(out, n)| {
        out[..n as usize].fill(9);
        *r2.lock().expect("slot") = Some(device.synchronize().map(drop));
    });
    let s = Stream::new(&t.device).expect("s");
    let module = Module::load(&t.device, sim::PTX_STUB).expect("module");
    // SAFETY: the registered closure writes `out[..n]` only, `n` a `Len`.
    let k = unsafe { module.kernel::<(Out<u32>, Len)>("deadlocks_reenter") }.expect("kernel");
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 64).expect("x");
    k.launch(&s, gpu_sync::LaunchConfig::for_elements(64, 64), (&mut x, 64u64)).expect("launch");
    assert_eq!(s.to_vec(&x).expect("to_vec"), vec![9u32; 64]);
    drop(dog);
    not_permitted(take(&r), "Device::synchronize inside a simulated kernel");
    t.finish();
}

#[test]
fn set_current_through_the_reexported_cuda_sys_does_not_stale_the_context_cache() {
    if !on_sim() {
        return;
    }
    let t = ctx(0xd50);
    let dog = Watchdog::arm(30, "set_current");
    let s = Stream::new(&t.device).expect("s");
    s.synchronize().expect("sync");
    let drv = gpu_sync::cuda_sys::driver().expect("driver");
    // Safe code, through gpu-sync's own re-export: no context current.
    gpu_sync::cuda_sys::result::context::set_current(drv, None::<gpu_sync::cuda_sys::BorrowedContext<'_>>)
        .expect("unbind");
    // Both need the device's context current: gpu-sync must notice.
    let module = Module::load(&t.device, sim::PTX_STUB).expect("module load after a foreign set_current");
    let pinned = PinnedBuffer::<u32>::new(&t.device, 16, HostAllocFlags::empty())
        .expect("pinned alloc after a foreign set_current");
    assert_eq!(
        gpu_sync::cuda_sys::result::context::get_current(drv).expect("get"),
        Some(t.device.raw_context()),
        "gpu-sync made its device's context current again"
    );
    drop((module, pinned));
    drop(dog);
    t.finish();
}

#[test]
fn a_module_dropped_with_a_launch_queued_is_unloaded_after_it_completes() {
    if !on_sim() {
        return;
    }
    let t = ctx(0xd60);
    let dog = Watchdog::arm(30, "module unload");
    sim::register::<(Out<u32>, Len)>("deadlocks_fill", |(out, n)| out[..n as usize].fill(5));
    let s = Stream::new(&t.device).expect("s");
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 64).expect("x");
    s.synchronize().expect("sync");
    let module = Module::load(&t.device, sim::PTX_STUB).expect("module");
    // SAFETY: the registered closure writes `out[..n]` only, `n` a `Len`.
    let k = unsafe { module.kernel::<(Out<u32>, Len)>("deadlocks_fill") }.expect("kernel");
    k.launch(&s, gpu_sync::LaunchConfig::for_elements(64, 64), (&mut x, 64u64)).expect("launch");
    drop(k);
    drop(module);
    let calls = t.session.as_ref().expect("sim").calls();
    let launch = calls.iter().rposition(|c| *c == "cuLaunchKernel").expect("launched");
    if let Some(unload) = calls.iter().rposition(|c| *c == "cuModuleUnload") {
        assert!(
            calls[launch..unload]
                .iter()
                .any(|c| matches!(*c, "cuEventSynchronize" | "cuStreamSynchronize" | "cuCtxSynchronize")),
            "cuModuleUnload issued with the launch still queued: {:?}",
            &calls[launch..]
        );
    }
    assert_eq!(s.to_vec(&x).expect("to_vec"), vec![5u32; 64]);
    // Whatever was put off has run by now.
    t.device.synchronize().expect("sync");
    let calls = t.session.as_ref().expect("sim").calls();
    assert!(calls[launch..].contains(&"cuModuleUnload"), "the module was never unloaded");
    drop(dog);
    t.finish();
}

/// The pageable copy's driver call runs without the book only when nothing
/// but the caller's borrow reaches the memory. A graph holding the buffer
/// (here: a captured fill) may be replayed by another thread during the
/// copy: that replay must still be ordered with it (the oracle checks).
#[test]
fn a_pageable_copy_into_memory_a_graph_writes_is_ordered_with_its_replays() {
    let t = ctx(0xd70);
    let dog = Watchdog::arm(60, "pageable copies beside graph replays");
    let (s, r) = (Stream::new(&t.device).expect("s"), Stream::new(&t.device).expect("r"));
    let n = 1 << 14;
    let mut y = DeviceBuffer::<u32>::zeroed(&s, n).expect("y");
    let graph = s.capture(|_| s.fill_u32(&mut y, 5)).expect("capture");
    let exec = graph.instantiate().expect("instantiate");
    drop(graph);
    let data = vec![9u32; n];
    let session = t.session.as_ref();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let _g = session.map(|s| s.enter());
            for _ in 0..200 {
                exec.launch(&r).expect("replay");
            }
        });
        for _ in 0..200 {
            s.upload_pageable(&data, &mut y).expect("upload");
        }
    });
    r.synchronize().expect("sync");
    drop(dog);
    t.finish();
}

/// What the safe CUPTI calls answer from where they run: `timestamp` and
/// `flush` of cuda-sys's process-wide subscriber.
type CuptiSlot = Arc<Mutex<Vec<String>>>;

fn cupti_probe(into: &CuptiSlot) {
    let a = cuda_sys::cupti::activity().expect("the simulator's CUPTI");
    let mut out = into.lock().expect("slot");
    out.push(a.timestamp().map(drop).map_err(|e| e.to_string()).err().unwrap_or_else(|| "Ok".into()));
    out.push(a.flush().map_err(|e| e.to_string()).err().unwrap_or_else(|| "Ok".into()));
}

fn cupti_refused(seen: &CuptiSlot, what: &str) {
    let seen = seen.lock().expect("slot");
    assert_eq!(seen.len(), 2, "{what}: {seen:?}");
    for s in seen.iter() {
        assert!(s.contains("CUPTI_ERROR_INVALID_OPERATION"), "{what}: {s}");
    }
}

#[test]
fn cupti_calls_in_a_host_function_are_refused() {
    if !on_sim() {
        return;
    }
    let t = ctx(0xd80);
    cuda_sys::cupti::activity().expect("the simulator's CUPTI");
    let dog = Watchdog::arm(30, "CUPTI timestamp and flush in a host function");
    let s = Stream::new(&t.device).expect("s");
    let seen = CuptiSlot::default();
    let seen2 = seen.clone();
    s.launch_host_fn(move || cupti_probe(&seen2)).expect("host fn");
    s.synchronize().expect("sync");
    drop(dog);
    cupti_refused(&seen, "CUPTI in a host function");
    // Outside, they work.
    let a = cuda_sys::cupti::activity().expect("the simulator's CUPTI");
    a.timestamp().expect("timestamp outside");
    a.flush().expect("flush outside");
    t.finish();
}

#[test]
fn cupti_calls_in_a_sim_kernel_are_refused() {
    if !on_sim() {
        return;
    }
    let t = ctx(0xd81);
    cuda_sys::cupti::activity().expect("the simulator's CUPTI");
    let dog = Watchdog::arm(30, "CUPTI timestamp and flush in a sim::register closure");
    let seen = CuptiSlot::default();
    let seen2 = seen.clone();
    sim::register::<(Out<u32>, Len)>("deadlocks_cupti", move |(out, n)| {
        out[..n as usize].fill(4);
        cupti_probe(&seen2);
    });
    let s = Stream::new(&t.device).expect("s");
    let module = Module::load(&t.device, sim::PTX_STUB).expect("module");
    // SAFETY: the registered closure writes `out[..n]` only, `n` a `Len`.
    let k = unsafe { module.kernel::<(Out<u32>, Len)>("deadlocks_cupti") }.expect("kernel");
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 64).expect("x");
    k.launch(&s, gpu_sync::LaunchConfig::for_elements(64, 64), (&mut x, 64u64)).expect("launch");
    assert_eq!(s.to_vec(&x).expect("to_vec"), vec![4u32; 64]);
    drop(dog);
    cupti_refused(&seen, "CUPTI in a sim kernel");
    t.finish();
}
