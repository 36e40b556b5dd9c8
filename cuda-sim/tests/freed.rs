//! Freed memory seen by device work is a race-oracle report, as
//! compute-sanitizer's memcheck gives it, not a fault: a GPU usually does
//! not fault on freed pool memory. Only an address never mapped is
//! `CUDA_ERROR_ILLEGAL_ADDRESS`.

mod common;
use common::*;
use cuda_sim::{KernelCall, KernelFault, KernelSpec, ParamSpec, RaceKind, RaceReport, register_kernel};

const NB: u32 = CUstream_flags::CU_STREAM_NON_BLOCKING.0;

/// Reads every u32 from parameter 0 to the end of its allocation (as
/// gpu-sync's `sim::register` views do: the length is the allocation's
/// extent) and writes their sum to parameter 1.
fn sum_extent(c: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let n = c.extent(0)? / 4;
    let v = c.read::<u32>(0, n as usize)?;
    c.write(1, &[v.iter().fold(0u32, |a, x| a.wrapping_add(*x))])
}

static SUM: [ParamSpec; 2] = [ParamSpec::read(), ParamSpec::write()];

fn register_sum() {
    register_kernel(KernelSpec { name: "sim_sum_extent", params: &SUM, run: sum_extent, duration: None });
}

fn kinds(r: &[RaceReport]) -> Vec<RaceKind> {
    r.iter().map(|x| x.kind).collect()
}

/// What uses the buffer on stream A.
#[derive(Clone, Copy, Debug)]
enum Use {
    /// A kernel that reads its whole extent.
    Kernel,
    /// `cuMemsetD32Async` into it.
    Memset,
    /// `cuMemcpyDtoDAsync` out of it.
    Copy,
}

/// `x` is used on stream A while stream B frees it with `cuMemFreeAsync`,
/// nothing ordering the two; returns the reports and the synchronization's
/// result.
fn unordered_free(seed: u64, what: Use) -> (Vec<RaceReport>, CUresult) {
    register_sum();
    let e = env(seed);
    let (a, b) = (e.stream(NB), e.stream(NB));
    let x = e.alloc(256);
    let out = e.alloc(256);
    e.fill(&a, x, 1, 64);
    stream::synchronize(&a).expect("x filled");
    match what {
        Use::Kernel => {
            let f = e.function("sim_sum_extent");
            let (mut p, mut q) = (x, out);
            assert_eq!(e.launch(f, &a, &mut [arg(&mut p), arg(&mut q)]), OK);
        }
        Use::Memset => sim::memset32(x, 7, 64, &a).expect("memset"),
        Use::Copy => sim::dtod(out, x, 256, &a).expect("copy"),
    }
    sim::free_async(x, &b).expect("cuMemFreeAsync");
    let sync = code(context::synchronize(d()));
    let races = e.session.take_races();
    sim::free(out).expect("free out");
    drop((a, b));
    teardown(e);
    (races, sync)
}

#[test]
fn a_free_unordered_with_queued_work_is_reported_in_every_seed() {
    let _serial = serial();
    for what in [Use::Kernel, Use::Memset, Use::Copy] {
        for seed in 0..16 {
            let (races, sync) = unordered_free(0x25e0 + seed, what);
            assert_eq!(kinds(&races), vec![RaceKind::UnorderedFree], "{what:?}, seed {seed}: {races:?}");
            let r = &races[0];
            assert!([&r.first.op, &r.second.op].iter().any(|o| *o == "cuMemFreeAsync"), "{r}");
            // Whichever ran first, nothing faults: freed memory stays
            // addressable, as pool memory on a GPU.
            assert_eq!(sync, OK, "{what:?}, seed {seed}");
        }
    }
}

#[test]
fn a_use_after_free_reads_poison_and_does_not_fault() {
    let _serial = serial();
    register_sum();
    let e = env(0x25f0);
    let s = e.stream(NB);
    let x = e.alloc(256);
    let out = e.alloc(4);
    e.fill(&s, x, 1, 64);
    sim::free(x).expect("free");
    let f = e.function("sim_sum_extent");
    let (mut p, mut q) = (x, out);
    assert_eq!(e.launch(f, &s, &mut [arg(&mut p), arg(&mut q)]), OK);
    assert_eq!(code(stream::synchronize(&s)), OK);
    let races = e.session.take_races();
    assert_eq!(kinds(&races), vec![RaceKind::UseAfterFree], "{races:?}");
    assert_eq!(races[0].first.op, "cuMemFree");
    assert_eq!(races[0].second.op, "kernel sim_sum_extent param 0 (read)");
    assert_eq!(races[0].allocation, x);
    // The kernel read the whole block, as poison.
    assert_eq!(e.read_u32(out, 1), vec![0xCDCD_CDCDu32.wrapping_mul(64)]);
    sim::free(out).expect("free out");
    drop(s);
    teardown(e);
}

/// Freed blocks the quarantine holds at most (`memory::QUARANTINE_BLOCKS`).
const QUARANTINE_BLOCKS: usize = 1 << 14;

#[test]
fn a_use_of_a_block_freed_past_its_quarantine_is_still_reported() {
    let _serial = serial();
    register_sum();
    let e = env(0x25f1);
    let s = e.stream(NB);
    let out = e.alloc(4);
    let x = e.alloc(64);
    sim::free(x).expect("free x");
    // As many frees again: the quarantine releases x's bytes (the last free
    // pushes it out; no allocation follows that could take its address).
    for _ in 0..QUARANTINE_BLOCKS {
        let y = e.alloc(64);
        sim::free(y).expect("free y");
    }
    let f = e.function("sim_sum_extent");
    let (mut p, mut q) = (x, out);
    assert_eq!(e.launch(f, &s, &mut [arg(&mut p), arg(&mut q)]), OK);
    assert_eq!(code(stream::synchronize(&s)), OK);
    let races = e.session.take_races();
    assert_eq!(kinds(&races), vec![RaceKind::UseAfterFree], "{races:?}");
    assert_eq!(races[0].allocation, x);
    assert_eq!(races[0].first.op, "cuMemFree");
    // A copy and a memset into it are reported too, and fault neither.
    sim::memset32(x, 0, 16, &s).expect("memset of a long-freed block is queued");
    sim::dtod(out, x, 4, &s).expect("copy out of a long-freed block is queued");
    assert_eq!(code(stream::synchronize(&s)), OK);
    assert_eq!(kinds(&e.session.take_races()), vec![RaceKind::UseAfterFree; 2]);
    sim::free(out).expect("free out");
    drop(s);
    teardown(e);
}

#[test]
fn an_address_never_mapped_is_an_illegal_address() {
    let _serial = serial();
    let e = env(0x25f2);
    let s = e.stream(NB);
    let x = e.alloc(64);
    // Far below any heap allocation: never mapped.
    let never: CUdeviceptr = 0x1000;
    // Copies and memsets refuse it at the call.
    assert_eq!(code(sim::memset32(never, 0, 4, &s)), CUresult::CUDA_ERROR_INVALID_VALUE);
    assert_eq!(code(sim::dtod(x, never, 4, &s)), CUresult::CUDA_ERROR_INVALID_VALUE);
    // A kernel faults when it runs, and the context is lost (sticky).
    e.add(&s, never, x, 4);
    assert_eq!(code(stream::synchronize(&s)), CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
    assert!(e.session.take_races().is_empty());
    assert_eq!(e.session.sticky_error(), Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
}
