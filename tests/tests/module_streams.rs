//! A module keeps only what its unload needs of the streams it was launched
//! on: a stream nothing else holds is let go (the unload then waits on a
//! marker of its last work, which outlives the driver stream), so
//! short-lived streams do not pile up behind a long-lived module; and the
//! unload still comes only after every launch of the module has run.
//!
//! Simulator only: it counts the driver's live streams and the simulated
//! kernel's runs.

use gpu_sync::{DeviceBuffer, LaunchConfig, Len, Module, Out, Stream, sim};
use std::sync::atomic::{AtomicUsize, Ordering};
use sync_tests::{Watchdog, ctx, on_sim};

const STREAMS: usize = 400;
const N: usize = 64;

#[test]
fn short_lived_streams_launched_on_are_not_kept_by_the_module() {
    if !on_sim() {
        return;
    }
    static RAN: AtomicUsize = AtomicUsize::new(0);
    let t = ctx(0xd70);
    let dog = Watchdog::arm(60, "short-lived streams and a module");
    sim::register::<(Out<u32>, Len)>("module_streams_fill", |(out, n)| {
        out[..n as usize].fill(7);
        RAN.fetch_add(1, Ordering::SeqCst);
    });
    let sess = t.session.as_ref().expect("sim").as_cuda_sim();
    let base = Stream::new(&t.device).expect("base");
    let module = Module::load(&t.device, sim::PTX_STUB).expect("module");
    // SAFETY: the registered closure writes `out[..n]` only, `n` a `Len`.
    let k = unsafe { module.kernel::<(Out<u32>, Len)>("module_streams_fill") }.expect("kernel");
    let before = sess.live().streams;
    let mut most = before;
    for _ in 0..STREAMS {
        let s = Stream::new(&t.device).expect("stream");
        // Allocated on `base`, freed there after the launch (device-side
        // wait): nothing of `s` stays in the buffer's uses.
        let mut x = DeviceBuffer::<u32>::zeroed(&base, N).expect("x");
        k.launch(&s, LaunchConfig::for_elements(N as u64, 64), (&mut x, N as u64)).expect("launch");
        drop(x);
        drop(s);
        most = most.max(sess.live().streams);
    }
    assert!(
        most - before <= 4,
        "{} driver streams alive at most beside the {before} before the loop ({STREAMS} short-lived streams \
         each launched on once): the module keeps them",
        most - before
    );
    // The module's last handle goes with launches maybe still queued on
    // streams that no longer exist: the unload must wait for them all.
    let calls_before = sess.total_calls();
    drop(k);
    drop(module);
    let calls = sess.calls();
    let since = usize::try_from(sess.total_calls() - calls_before).expect("count");
    assert!(
        calls[calls.len() - since..].contains(&"cuModuleUnload"),
        "the module was not unloaded at its drop"
    );
    assert_eq!(
        RAN.load(Ordering::SeqCst),
        STREAMS,
        "cuModuleUnload was issued before every launch of the module had run"
    );
    base.synchronize().expect("sync");
    drop(dog);
    t.finish();
}

/// The unload waits for a stream already let go: its launch sits behind a
/// long queue of its own stream when the module's last handle goes, and
/// nothing else the unload waits for depends on it.
#[test]
fn a_stream_let_go_is_still_waited_for_before_the_unload() {
    if !on_sim() {
        return;
    }
    static RAN: AtomicUsize = AtomicUsize::new(0);
    let t = ctx(0xd71);
    let dog = Watchdog::arm(60, "a stream let go and a module");
    sim::register::<(Out<u32>, Len)>("module_streams_mark", |(out, n)| {
        out[..n as usize].fill(9);
        RAN.fetch_add(1, Ordering::SeqCst);
    });
    let base = Stream::new(&t.device).expect("base");
    let module = Module::load(&t.device, sim::PTX_STUB).expect("module");
    // SAFETY: the registered closure writes `out[..n]` only, `n` a `Len`.
    let k = unsafe { module.kernel::<(Out<u32>, Len)>("module_streams_mark") }.expect("kernel");
    let cfg = LaunchConfig::for_elements(N as u64, 64);
    let mut x1 = DeviceBuffer::<u32>::zeroed(&base, N).expect("x1");
    let mut x2 = DeviceBuffer::<u32>::zeroed(&base, N).expect("x2");
    let s1 = Stream::new(&t.device).expect("s1");
    for i in 0..64 {
        s1.fill_u32(&mut x1, i).expect("fill");
    }
    k.launch(&s1, cfg, (&mut x1, N as u64)).expect("launch on s1");
    // x1 is freed on `base` after the launch (device-side wait), and s1 has
    // no other holder: the next new stream lets it go.
    drop(x1);
    drop(s1);
    let s2 = Stream::new(&t.device).expect("s2");
    k.launch(&s2, cfg, (&mut x2, N as u64)).expect("launch on s2");
    drop(k);
    drop(module);
    assert_eq!(RAN.load(Ordering::SeqCst), 2, "cuModuleUnload was issued with the launch on s1 still queued");
    assert_eq!(s2.to_vec(&x2).expect("x2"), vec![9u32; N]);
    base.synchronize().expect("sync");
    drop(dog);
    t.finish();
}
