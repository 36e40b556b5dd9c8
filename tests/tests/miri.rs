//! gpu-sync over cuda-sim, small enough for Miri: `cargo +nightly miri test
//! -p sync-tests --test miri` (CI runs it). Miri checks the unsafe code of
//! both crates (pinned host memory handed between them, the simulator's raw
//! allocations, the driver table's function pointers) while the programs
//! exercise downloads, uploads, drops, forgotten values and graphs.
//!
//! Leaks are expected where a test forgets a value on purpose, so CI runs
//! Miri with `-Zmiri-ignore-leaks`.

use gpu_sync::{DeviceBuffer, Error, HostAllocFlags, LaunchConfig, Len, Module, Out, PinnedBuffer, Stream};
use kernels::{Kernels, reference};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, TestRng, TestRunner};
use sync_tests::program::{self, Op, Release};
use sync_tests::{ctx, fmt_races};

fn check_clean(t: sync_tests::Ctx) {
    if let Some(s) = &t.session {
        let races = s.races();
        assert!(races.is_empty(), "{}", fmt_races(&races));
        assert!(s.live().is_empty(), "leaked: {:?}", s.live());
    }
}

#[test]
fn a_fixed_program_runs_clean() {
    let t = ctx(1);
    let ops = vec![
        Op::NewStream,
        Op::Alloc { stream: 0, len: 0 },
        Op::Alloc { stream: 1, len: 0 },
        Op::Fill { stream: 1, dst: 0, seed: 5 },
        Op::Bump { stream: 0, dst: 0, add: 3 },
        Op::UploadPinned { stream: 1, dst: 1, seed: 9 },
        Op::Mix { stream: 0, a: 0, b: 1, out: 1, salt: 2 },
        Op::Download { stream: 1, src: 1 },
        Op::RewritePinned { which: 0, seed: 4 },
        Op::Copy { stream: 1, src: 0, dst: 1 },
        Op::Release { which: 0, how: Release::StreamProof },
        Op::Graph { stream: 0, dst: 0, add: 1, replays: 2 },
        Op::Drop { buf: 0 },
        Op::DownloadPageable { stream: 0, src: 0 },
    ];
    if let Err(e) = program::run(&t.device, &ops) {
        panic!("{e:?}");
    }
    check_clean(t);
}

#[test]
fn seeded_random_programs_run_clean() {
    let mut runner = TestRunner::new_with_rng(
        Config { cases: 2, ..Config::default() },
        TestRng::deterministic_rng(Default::default()),
    );
    for seed in 0..2u64 {
        let ops = match program::program(10).new_tree(&mut runner) {
            Ok(tree) => tree.current(),
            Err(e) => panic!("{e}"),
        };
        let t = ctx(seed);
        if let Err(e) = program::run(&t.device, &ops) {
            panic!("seed {seed}: {e:?}\n{ops:?}");
        }
        check_clean(t);
    }
}

#[test]
fn forgotten_and_dropped_pending_downloads_stay_sound() {
    let t = ctx(3);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("stream");
    let mut x = DeviceBuffer::<u32>::alloc(&s, 64).expect("x");
    k.fill_pattern(&s, &mut x, 11).expect("fill");
    let host = PinnedBuffer::<u32>::new(&t.device, 64, HostAllocFlags::empty()).expect("pinned");
    let pending = s.download(&x, host).expect("download");
    drop(pending); // its buffer's drop waits for the copy, then frees
    let host = PinnedBuffer::<u32>::new(&t.device, 64, HostAllocFlags::empty()).expect("pinned");
    std::mem::forget(s.download(&x, host).expect("download")); // leaks, never frees early
    let back = s
        .download(&x, PinnedBuffer::new(&t.device, 64, HostAllocFlags::empty()).expect("pinned"))
        .expect("download")
        .wait()
        .expect("wait");
    assert!(back.iter().enumerate().all(|(i, &v)| v == reference::pattern(11, i as u64)));
    std::mem::forget(x); // a forgotten buffer is never freed: a leak, not a use after free
    s.synchronize().expect("sync");
    let races = t.session.as_ref().map(|s| s.races()).unwrap_or_default();
    assert!(races.is_empty(), "{}", fmt_races(&races));
}

#[test]
fn module_load_reads_nothing_past_the_slice() {
    let t = ctx(4);
    // PTX without a NUL inside the slice: `cuModuleLoadData` takes no length,
    // and before images were validated the driver read past these two bytes
    // (Miri: out-of-bounds read).
    assert!(matches!(Module::load(&t.device, b"//"), Err(Error::InvalidArgument(_))));
    // A fatbin whose header declares more than the slice holds.
    let fatbin = kernels::ModuleId::Spin.fatbin();
    assert!(matches!(Module::load(&t.device, &fatbin[..24]), Err(Error::InvalidArgument(_))));
    // Valid images load, read within their slices.
    // (A module with no functions: the smallest PTX a real driver accepts.)
    let ptx = b".version 8.0\n.target sm_80\n.address_size 64\n\0";
    drop(Module::load(&t.device, ptx).expect("PTX"));
    drop(Module::load(&t.device, fatbin).expect("fatbin"));
    check_clean(t);
}

#[test]
fn a_len_keeps_a_kernel_inside_its_view() {
    let t = ctx(5);
    let s = Stream::new(&t.device).expect("stream");
    let m = Module::load(&t.device, kernels::ModuleId::Elementwise.fatbin()).expect("module");
    // SAFETY: bump_u32 (kernels/cu/elementwise.cu) reads and writes x[i]
    // (Out) for i < n only, n a `Len` checked against the view; nothing
    // else; race-free in the 1-D launches made here (`bump` stays here).
    let bump = unsafe { m.kernel::<(Out<u32>, u32, Len)>("bump_u32") }.expect("bump");
    let mut x = DeviceBuffer::<u32>::zeroed(&s, 16).expect("x");
    let mut head = x.slice_mut(..4).expect("head");
    // Past the view: refused before the driver, so the simulator never
    // writes outside the allocation.
    let r = bump.launch(&s, LaunchConfig::new(1, 32), (&mut head, 1u32, 1024u64));
    assert!(matches!(r, Err(Error::LaunchArgument { param: 2, .. })), "{r:?}");
    bump.launch(&s, LaunchConfig::new(1, 32), (&mut head, 2u32, 4u64)).expect("bump");
    let got = s.to_vec(&x).expect("read");
    assert_eq!(got, [2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    drop((bump, m, x));
    s.synchronize().expect("sync");
    drop(s);
    check_clean(t);
}

/// Issue 7, hole 6: a pageable-copy API given pinned memory, when a wait
/// fails. The old code returned the error with the copy still queued; the
/// device then wrote the memory behind a live `&[u32]` (UB under Stacked
/// and Tree Borrows).
#[test]
fn a_failed_wait_after_a_pageable_download_never_writes_behind_a_reader() {
    let _one_at_a_time = sync_tests::exclusive();
    let t = ctx(4);
    let Some(sess) = t.session.as_ref() else { return };
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("stream");
    let mut x = DeviceBuffer::<u32>::alloc(&s, 16).expect("x");
    k.fill_pattern(&s, &mut x, 11).expect("fill");
    let mut pinned = PinnedBuffer::<u32>::new(&t.device, 16, HostAllocFlags::empty()).expect("pinned");
    s.synchronize().expect("sync");
    for nth in 0..2u64 {
        let syncs = sess.calls().iter().filter(|c| **c == "cuStreamSynchronize").count() as u64;
        sess.inject(cuda_sim::FaultPlan::new().fail_nth_of(
            "cuStreamSynchronize",
            syncs + nth,
            gpu_sync::cuda_sys::CUresult::CUDA_ERROR_UNKNOWN,
        ));
        let r = s.download_pageable(&x, pinned.as_mut_slice().expect("slice"));
        sess.clear_faults();
        if r.is_err() {
            let view: &[u32] = &pinned;
            let before = view.to_vec();
            // Would run a copy still queued into `pinned`, behind `view`.
            t.device.synchronize().expect("device sync");
            assert_eq!(view, &before[..], "failing sync #{nth}: the memory changed under a reader");
        }
    }
    drop(pinned);
    s.synchronize().expect("sync");
    check_clean_races(&t);
}

fn check_clean_races(t: &sync_tests::Ctx) {
    if let Some(s) = &t.session {
        let races = s.races();
        assert!(races.is_empty(), "{}", fmt_races(&races));
    }
}
