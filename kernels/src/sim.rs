//! The CPU references registered with `cuda-sim` (feature `sim`), so the
//! whole stack — launches, the race oracle, timing — runs without a GPU.
//!
//! Each registration's parameter list is derived from the kernel table's
//! spec entry, and its CPU implementation named there (`sim: run_…`), never
//! written twice. The twins of the kernels without shared memory or
//! `__syncthreads` (the element-wise kernels, the pattern kernels, `copy_u32x4`
//! and `triad_f32`) run per thread, as CUDA does: each simulated thread of
//! the launch (every block and thread index, y and z included) walks its own
//! indices of the `.cu` grid-stride loop ([`per_thread`]), so a grid shape
//! that gives a wrong answer on a GPU (a 2-D grid over a 1-D kernel repeats
//! every element once per y row, so `bump_u32` adds twice) gives the same wrong
//! answer here. The others (`read_sum_u32x4`, whose block reduction uses
//! shared memory, and the roofline probes) process the kernel's whole range
//! once, whatever the grid. Before running, every pointer the launch will
//! touch is checked against the alignment the spec demands.

use crate::cost;
use crate::reference;
use crate::spec::{Extent, KernelId, KernelParam, ParamAccess, ParamKind};
use cuda_sim::{DurationFn, KernelCall, KernelFault, KernelSpec, ParamSpec, register_kernel};
use std::sync::OnceLock;

mod args;
use args::{Args, scalar};

/// The SM clock the simulator reports, in cycles per nanosecond (1980 MHz).
const SIM_CLOCK_GHZ: f64 = cuda_sim::model::SM_CLOCK_KHZ as f64 / 1e6;
/// Device-memory bandwidth in bytes per nanosecond: the simulator's one
/// device model (3352 GB/s, what the simulated device reports).
const SIM_BYTES_PER_NS: f64 = cuda_sim::model::HBM_BYTES_PER_NS;
/// Bandwidth of an SM copy from mapped host memory, bytes per ns: the
/// device model's host link (25 GB/s).
const SIM_MAPPED_BYTES_PER_NS: f64 = cuda_sim::model::PCIE_BYTES_PER_NS;
/// FP32 rate in FLOPs per nanosecond, the device model's (66.9 TFLOP/s),
/// for the FMA probes and the intensity sweep.
const SIM_FLOPS_PER_NS: f64 = cuda_sim::model::FP32_FLOPS_PER_NS;
/// Cache bandwidth in bytes per nanosecond, the device model's (10 TB/s),
/// for `cache_read` and the re-reading probes.
const SIM_CACHE_BYTES_PER_NS: f64 = cuda_sim::model::L2_BYTES_PER_NS;
/// Simulated nanoseconds per iteration of `smem_read` (its thread count is
/// not a parameter).
const SIM_SMEM_NS_PER_ITER: f64 = 4.0;
/// Simulated nanoseconds per iteration of a tensor probe (its grid is not a
/// parameter).
const SIM_TENSOR_NS_PER_ITER: f64 = 600.0;
/// Simulated nanoseconds per iteration of an `mma.sync` probe (8 `mma.sync`
/// a warp; its grid is not a parameter): about 580 TFLOP/s of 16-bit work at
/// the roofline's grid of 4224 warps.
const SIM_MMA_NS_PER_ITER: f64 = 240.0;
/// Simulated length of a spin gate that found its flag open, ns.
const SIM_GATE_NS: u64 = 1000;
/// Duration reported when a launch's size argument cannot be read.
const FALLBACK_NS: u64 = 2000;

/// Registers every kernel of [`KernelId::ALL`] with `cuda_sim` under its
/// `extern "C"` name (replacing earlier registrations; calling it again is
/// harmless).
///
/// Simulated durations: `spin_cycles` takes `cycles / 1.98` ns (the
/// simulator's 1980 MHz clock); the other kernels take their
/// [`cost`](crate::cost) model's bytes at the simulator's device model (cuda_sim::model, 3352 GB/s), at least 1 ns.
pub fn register_sim_kernels() {
    for kernel in KernelId::ALL {
        register_kernel(KernelSpec {
            name: kernel.name(),
            params: param_specs(kernel),
            run: kernel.sim_run(),
            duration: Some(duration as DurationFn),
        });
    }
}

/// The simulator's view of one spec parameter.
fn param_spec(p: &KernelParam) -> ParamSpec {
    match p.kind {
        ParamKind::Scalar(_) => ParamSpec { size: p.size(), kind: cuda_sim::ParamKind::Scalar },
        ParamKind::Pointer { access: ParamAccess::Read, .. } => ParamSpec::read(),
        ParamKind::Pointer { access: ParamAccess::Write, .. } => ParamSpec::write(),
        ParamKind::Pointer { access: ParamAccess::ReadWrite, .. } => ParamSpec::read_write(),
    }
}

/// `kernel`'s parameters as `&'static [ParamSpec]`, built once from the spec.
fn param_specs(kernel: KernelId) -> &'static [ParamSpec] {
    static SPECS: OnceLock<Vec<(KernelId, Vec<ParamSpec>)>> = OnceLock::new();
    let all = SPECS.get_or_init(|| {
        KernelId::ALL.iter().map(|&k| (k, k.info().params.iter().map(param_spec).collect())).collect()
    });
    all.iter().find(|(k, _)| *k == kernel).map_or(&[], |(_, v)| v.as_slice())
}

/// The simulated duration of any of our kernels, in nanoseconds: the
/// kernel's own ([`own_ns`]), and never shorter than the bytes its pointers
/// move over the peer link or the host link at those links' roofs
/// ([`link_floor_ns`]), so an SM copy across devices reads no faster than
/// the simulated NVLink.
fn duration(call: &KernelCall<'_>) -> u64 {
    let Some(kernel) = KernelId::from_name(call.name()) else {
        return FALLBACK_NS;
    };
    own_ns(call, kernel).max(link_floor_ns(call, kernel))
}

/// The bytes `kernel` moves through pointers that reach another device's
/// memory or mapped host memory (each pointer's extent in the spec, a
/// read-write one twice), at the device model's roofs of those paths
/// ([`cuda_sim::model::Traffic`]); 0 when every pointer is the device's
/// own. The device's own memory is left to the cost models of [`own_ns`],
/// which know which bytes the cache serves.
fn link_floor_ns(call: &KernelCall<'_>, kernel: KernelId) -> u64 {
    use cuda_sim::model::{Path, Traffic};
    let mut traffic = Traffic::default();
    for (i, p) in kernel.info().params.iter().enumerate() {
        let ParamKind::Pointer { elem, access, len, .. } = p.kind else {
            continue;
        };
        let path = match call.path(i) {
            Ok(Some(path @ (Path::Peer | Path::Host))) => path,
            _ => continue,
        };
        let n = match len {
            Extent::Param(j) => call.scalar::<u64>(j).unwrap_or(0),
            Extent::Fixed(n) => n,
        };
        let times = if access == ParamAccess::ReadWrite { 2 } else { 1 };
        traffic.add(path, n.saturating_mul(elem.size() as u64).saturating_mul(times));
    }
    traffic.floor_ns()
}

/// The simulated duration of `kernel` on the device's own memory, ns.
fn own_ns(call: &KernelCall<'_>, kernel: KernelId) -> u64 {
    let ns = if matches!(kernel, KernelId::SpinCycles | KernelId::ClockProbe | KernelId::Stamp) {
        match scalar::<u64>(call, kernel, "cycles") {
            Ok(cycles) => cycles as f64 / SIM_CLOCK_GHZ,
            Err(_) => return FALLBACK_NS,
        }
    } else if kernel == KernelId::SpinGate {
        // The simulator runs queued work only when the host waits, by which
        // time a well-behaved program has opened the gate.
        return SIM_GATE_NS;
    } else if let Some(ns) = probe_duration(call, kernel) {
        ns
    } else if kernel == KernelId::CopyMappedU32x4 {
        let n4 = scalar::<u64>(call, kernel, "n4").unwrap_or(0);
        cost::copy_mapped_u32x4(n4).bytes_read as f64 / SIM_MAPPED_BYTES_PER_NS
    } else {
        let size = match kernel.info().size_param().map(|i| call.scalar::<u64>(i)) {
            Some(Ok(n)) => n,
            _ => return FALLBACK_NS,
        };
        cost::for_kernel(kernel, size).bytes() as f64 / SIM_BYTES_PER_NS
    };
    // Saturating float-to-int conversion; at least 1 ns so time moves.
    (ns.ceil() as u64).max(1)
}

/// The simulated duration of a roofline probe whose cost is not its table
/// model's bytes (FLOPs, cache traffic), or `None` for other kernels.
fn probe_duration(call: &KernelCall<'_>, kernel: KernelId) -> Option<f64> {
    // FP64 at half the FP32 rate, the packed 16-bit types at twice it (as
    // on an H100), so that each intensity sweep meets its own FMA roof.
    let fma = |lanes: u64, rate: f64| -> Option<f64> {
        let iters = scalar::<u32>(call, kernel, "iters").ok()?;
        let n = scalar::<u64>(call, kernel, "n").ok()?;
        Some(cost::fma_probe(n, u64::from(iters), lanes).flops as f64 / (rate * SIM_FLOPS_PER_NS))
    };
    let iters = || scalar::<u32>(call, kernel, "iters").ok();
    match kernel {
        KernelId::FmaF64 => fma(1, 0.5),
        KernelId::FmaF32 => fma(1, 1.0),
        KernelId::FmaF16x2 | KernelId::FmaBf16x2 => fma(2, 2.0),
        KernelId::CacheRead => Some(
            cost::cache_read(scalar::<u64>(call, kernel, "n").ok()?).bytes() as f64 / SIM_CACHE_BYTES_PER_NS,
        ),
        // One pass over the working set streams it from memory; more passes
        // re-read it from the cache.
        KernelId::ReadTuneU4 | KernelId::ReadTuneU8 | KernelId::ReadTuneU16 | KernelId::ReadBulk => {
            let (ws4, n) = (scalar::<u64>(call, kernel, "ws4").ok()?, scalar::<u64>(call, kernel, "n").ok()?);
            let rate = if n <= ws4 { SIM_BYTES_PER_NS } else { SIM_CACHE_BYTES_PER_NS };
            Some(cost::cache_read(n).bytes() as f64 / rate)
        }
        KernelId::SmemRead => Some(f64::from(iters()?) * SIM_SMEM_NS_PER_ITER),
        KernelId::TcBf16 | KernelId::TcF16 | KernelId::TcE4m3 => {
            Some(f64::from(iters()?) * SIM_TENSOR_NS_PER_ITER)
        }
        KernelId::MmaBf16 | KernelId::MmaF16 | KernelId::MmaE4m3 => {
            Some(f64::from(iters()?) * SIM_MMA_NS_PER_ITER)
        }
        KernelId::IntensityF32 => {
            let c = cost::intensity_f32(
                scalar::<u64>(call, kernel, "n4").ok()?,
                u64::from(scalar::<u32>(call, kernel, "fmas").ok()?),
            );
            Some((c.bytes() as f64 / SIM_BYTES_PER_NS).max(c.flops as f64 / SIM_FLOPS_PER_NS))
        }
        KernelId::IntensityF16x2 => {
            // FP16x2 at twice the FP32 rate, as on an H100.
            let c = cost::intensity_f16x2(
                scalar::<u64>(call, kernel, "n4").ok()?,
                u64::from(scalar::<u32>(call, kernel, "fmas").ok()?),
            );
            Some((c.bytes() as f64 / SIM_BYTES_PER_NS).max(c.flops as f64 / 2.0 / SIM_FLOPS_PER_NS))
        }
        KernelId::IntensityF64 => {
            // FP64 at half the FP32 rate, as on an H100.
            let c = cost::intensity_f64(
                scalar::<u64>(call, kernel, "n4").ok()?,
                u64::from(scalar::<u32>(call, kernel, "fmas").ok()?),
            );
            Some((c.bytes() as f64 / SIM_BYTES_PER_NS).max(2.0 * c.flops as f64 / SIM_FLOPS_PER_NS))
        }
        _ => None,
    }
}

/// `*out += sum of the 4*n4 words of in`: `(in, n4, .., out)`.
fn read_sum(call: &mut KernelCall<'_>, kernel: KernelId) -> Result<(), KernelFault> {
    let mut args = Args::new(call, kernel)?;
    let n4 = args.scalar::<u64>("n4")?;
    let words = args.count("in", n4.checked_mul(4), 4)?;
    let data = args.read::<u32>("in", words)?;
    args.accumulate("out", reference::read_sum_u32(&data))
}

/// `dst = src` over `4*n4` words: `(src, dst, n4, ..)`.
fn copy_quads(call: &mut KernelCall<'_>, kernel: KernelId) -> Result<(), KernelFault> {
    let mut args = Args::new(call, kernel)?;
    let n4 = args.scalar::<u64>("n4")?;
    let words = args.count("src", n4.checked_mul(4), 4)?;
    let src = args.read::<u32>("src", words)?;
    let mut dst = vec![0u32; words];
    if kernel == KernelId::CopyU32x4 {
        // Per thread: vector j is words 4j..4j+3.
        let mut hit = vec![false; words];
        args.per_thread(words / 4, |j| {
            reference::copy_u32(&src[4 * j..4 * j + 4], &mut dst[4 * j..4 * j + 4]);
            hit[4 * j..4 * j + 4].fill(true);
        });
        args.write_visited("dst", &dst, &hit)
    } else {
        reference::copy_u32(&src, &mut dst);
        args.write("dst", &dst)
    }
}

/// `a = fma(scalar, c, b)` over `n` floats (`n` from `elements`, given the
/// value of the kernel's size parameter `size`): `(a, b, c, scalar, ..)`.
fn triad(
    call: &mut KernelCall<'_>,
    kernel: KernelId,
    size: &str,
    elements: impl FnOnce(u64) -> Option<u64>,
) -> Result<(), KernelFault> {
    let mut args = Args::new(call, kernel)?;
    let scalar = args.scalar::<f32>("scalar")?;
    let n = args.count("a", elements(args.scalar::<u64>(size)?), 4)?;
    let b = args.read::<f32>("b", n)?;
    let c = args.read::<f32>("c", n)?;
    let mut a = vec![0.0f32; n];
    if kernel == KernelId::TriadF32 {
        let mut hit = vec![false; n];
        // Per thread: vector j is elements 4j..4j+3, then the tail one by
        // one, each walked by the grid-stride loop from the thread's index.
        let n4 = n / 4;
        args.per_thread(n4, |j| {
            let r = 4 * j..4 * j + 4;
            reference::triad_f32(&mut a[r.clone()], &b[r.clone()], &c[r.clone()], scalar);
            hit[r].fill(true);
        });
        args.per_thread(n - 4 * n4, |k| {
            let i = 4 * n4 + k;
            reference::triad_f32(&mut a[i..=i], &b[i..=i], &c[i..=i], scalar);
            hit[i] = true;
        });
        args.write_visited("a", &a, &hit)
    } else {
        reference::triad_f32(&mut a, &b, &c, scalar);
        args.write("a", &a)
    }
}

pub(crate) fn run_read_sum_u32x4(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    read_sum(call, KernelId::ReadSumU32x4)
}

pub(crate) fn run_copy_u32x4(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    copy_quads(call, KernelId::CopyU32x4)
}

pub(crate) fn run_triad_f32(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    triad(call, KernelId::TriadF32, "n", Some)
}

pub(crate) fn run_empty_kernel(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    Args::new(call, KernelId::Empty).map(drop)
}

pub(crate) fn run_spin_cycles(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::SpinCycles)?;
    let cycles = args.scalar::<u64>("cycles")?;
    args.write("out", &[reference::spin_cycles(cycles)])
}

pub(crate) fn run_fill_pattern_u32(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::FillPatternU32)?;
    let n = args.count("dst", Some(args.scalar::<u64>("n")?), 4)?;
    let seed = args.scalar::<u32>("seed")?;
    let (mut dst, mut hit) = (vec![0u32; n], vec![false; n]);
    args.per_thread(n, |i| {
        dst[i] = reference::pattern(seed, i as u64);
        hit[i] = true;
    });
    args.write_visited("dst", &dst, &hit)
}

pub(crate) fn run_check_pattern_u32(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::CheckPatternU32)?;
    let n = args.count("src", Some(args.scalar::<u64>("n")?), 4)?;
    let seed = args.scalar::<u32>("seed")?;
    let src = args.read::<u32>("src", n)?;
    let mut bad = 0u64;
    args.per_thread(n, |i| bad += u64::from(src[i] != reference::pattern(seed, i as u64)));
    args.accumulate("mismatches", bad)
}

pub(crate) fn run_scale_f32(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::ScaleF32)?;
    let a = args.scalar::<f32>("a")?;
    let n = args.count("in", Some(args.scalar::<u64>("n")?), 4)?;
    let input = args.read::<f32>("in", n)?;
    let (mut out, mut hit) = (vec![0.0f32; n], vec![false; n]);
    args.per_thread(n, |i| {
        reference::scale_f32(&input[i..=i], &mut out[i..=i], a);
        hit[i] = true;
    });
    args.write_visited("out", &out, &hit)
}

pub(crate) fn run_add_f32(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::AddF32)?;
    let n = args.count("x", Some(args.scalar::<u64>("n")?), 4)?;
    let x = args.read::<f32>("x", n)?;
    let y = args.read::<f32>("y", n)?;
    let (mut out, mut hit) = (vec![0.0f32; n], vec![false; n]);
    args.per_thread(n, |i| {
        reference::add_f32(&x[i..=i], &y[i..=i], &mut out[i..=i]);
        hit[i] = true;
    });
    args.write_visited("out", &out, &hit)
}

pub(crate) fn run_mix_u32(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::MixU32)?;
    let salt = args.scalar::<u32>("salt")?;
    let n = args.count("a", Some(args.scalar::<u64>("n")?), 4)?;
    let a = args.read::<u32>("a", n)?;
    let b = args.read::<u32>("b", n)?;
    let (mut out, mut hit) = (vec![0u32; n], vec![false; n]);
    args.per_thread(n, |i| {
        out[i] = reference::mix(a[i], b[i], salt);
        hit[i] = true;
    });
    args.write_visited("out", &out, &hit)
}

pub(crate) fn run_bump_u32(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::BumpU32)?;
    let add = args.scalar::<u32>("add")?;
    let n = args.count("x", Some(args.scalar::<u64>("n")?), 4)?;
    let mut x = args.read::<u32>("x", n)?;
    args.per_thread(n, |i| reference::bump_u32(&mut x[i..=i], add));
    args.write("x", &x)
}

/// `clock_probe`: the simulator's clock is exactly [`SIM_CLOCK_GHZ`].
pub(crate) fn run_clock_probe(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::ClockProbe)?;
    let cycles = args.scalar::<u64>("cycles")?;
    let ns = (cycles as f64 / SIM_CLOCK_GHZ).ceil() as u64;
    args.write("out", &[reference::spin_cycles(cycles), ns.max(1)])
}

/// `stamp`: the simulator has no global timer inside a kernel; it writes
/// `[0, the spin's simulated nanoseconds]`, so `out[1] - out[0]` is the
/// body's length at [`SIM_CLOCK_GHZ`].
pub(crate) fn run_stamp(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::Stamp)?;
    let cycles = args.scalar::<u64>("cycles")?;
    let ns = (cycles as f64 / SIM_CLOCK_GHZ).ceil() as u64;
    args.write("out", &[0, ns])
}

pub(crate) fn run_spin_gate(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::SpinGate)?;
    let flag = args.read::<u32>("flag", 1)?;
    args.write("out", &[u64::from(flag.first().copied().unwrap_or(0) != 0)])
}

pub(crate) fn run_copy_mapped_u32x4(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    copy_quads(call, KernelId::CopyMappedU32x4)
}

pub(crate) fn run_hbm_read(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    read_sum(call, KernelId::HbmRead)
}

pub(crate) fn run_hbm_copy(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    copy_quads(call, KernelId::HbmCopy)
}

pub(crate) fn run_copy_bulk(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    copy_quads(call, KernelId::CopyBulk)
}

pub(crate) fn run_hbm_triad(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    triad(call, KernelId::HbmTriad, "n4", |n4| n4.checked_mul(4))
}

/// The FMA probes' common part: writes the results when `store != 0` and
/// the simulator's clock to `clk`.
fn run_fma<T: bytemuck::Pod + Default>(
    call: &mut KernelCall<'_>,
    kernel: KernelId,
    compute: impl FnOnce(u32, &mut [T]) -> Result<(), KernelFault>,
) -> Result<(), KernelFault> {
    let mut args = Args::new(call, kernel)?;
    let iters = args.scalar::<u32>("iters")?;
    let store = args.scalar::<u32>("store")?;
    let n = args.count("out", Some(args.scalar::<u64>("n")?), size_of::<T>() as u64)?;
    if store != 0 {
        let mut out = vec![T::default(); n];
        compute(iters, &mut out)?;
        args.write("out", &out)?;
    }
    let ns = args.probe_ns();
    args.write_clock(ns)
}

pub(crate) fn run_fma_f64(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let seed = scalar::<f64>(call, KernelId::FmaF64, "seed")?;
    run_fma(call, KernelId::FmaF64, |iters, out: &mut [f64]| {
        reference::probes::fma_f64(seed, iters, out);
        Ok(())
    })
}

pub(crate) fn run_fma_f32(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let seed = scalar::<f32>(call, KernelId::FmaF32, "seed")?;
    run_fma(call, KernelId::FmaF32, |iters, out: &mut [f32]| {
        reference::probes::fma_f32(seed, iters, out);
        Ok(())
    })
}

pub(crate) fn run_fma_f16x2(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let seed = scalar::<f32>(call, KernelId::FmaF16x2, "seed")?;
    run_fma(call, KernelId::FmaF16x2, |iters, out: &mut [f32]| {
        reference::probes::fma_half2(reference::probes::Half::F16, seed, iters, out);
        Ok(())
    })
}

pub(crate) fn run_fma_bf16x2(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let seed = scalar::<f32>(call, KernelId::FmaBf16x2, "seed")?;
    run_fma(call, KernelId::FmaBf16x2, |iters, out: &mut [f32]| {
        reference::probes::fma_half2(reference::probes::Half::Bf16, seed, iters, out);
        Ok(())
    })
}

pub(crate) fn run_cache_read(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    wrapped_read(call, KernelId::CacheRead)
}

/// `read_tune_u*` and `read_bulk`: `cache_read`'s result, whatever the
/// variant (every variant makes the same loads).
pub(crate) fn run_read_tune(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let kernel = KernelId::ALL.into_iter().find(|k| k.name() == call.name()).unwrap_or(KernelId::ReadTuneU4);
    wrapped_read(call, kernel)
}

/// `n` loads wrapped over a working set of `ws4` uint4, summed into `out`.
fn wrapped_read(call: &mut KernelCall<'_>, kernel: KernelId) -> Result<(), KernelFault> {
    let mut args = Args::new(call, kernel)?;
    let ws4 = args.scalar::<u64>("ws4")?;
    let n = args.scalar::<u64>("n")?;
    let words = args.count("in", ws4.checked_mul(4), 4)?;
    let data = args.read::<u32>("in", words)?;
    args.accumulate("out", reference::probes::cache_read(&data, n))
}

pub(crate) fn run_smem_read(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let mut args = Args::new(call, KernelId::SmemRead)?;
    let iters = args.scalar::<u32>("iters")?;
    let seed = args.scalar::<u32>("seed")?;
    let magic = args.scalar::<u32>("magic")?;
    let total = reference::probes::smem_read(iters, seed);
    let old = args.read::<u32>("out", 2)?;
    let second = if total == magic { total } else { old.get(1).copied().unwrap_or(0) };
    args.write("out", &[total, second])
}

/// The intensity sweeps: `out = f(in)` over `n4` 16-byte vectors of
/// `lanes` elements `T`, `fmas` FMAs an element.
fn intensity<T: bytemuck::Pod + Default>(
    call: &mut KernelCall<'_>,
    kernel: KernelId,
    lanes: u64,
    f: impl FnOnce(&[T], &mut [T], u32),
) -> Result<(), KernelFault> {
    let mut args = Args::new(call, kernel)?;
    let fmas = args.scalar::<u32>("fmas")?;
    let n4 = args.scalar::<u64>("n4")?;
    let n = args.count("in", n4.checked_mul(lanes), size_of::<T>() as u64)?;
    let input = args.read::<T>("in", n)?;
    let mut out = vec![T::default(); n];
    f(&input, &mut out, fmas);
    args.write("out", &out)
}

pub(crate) fn run_intensity_f32(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    intensity(call, KernelId::IntensityF32, 4, reference::probes::intensity_f32)
}

pub(crate) fn run_intensity_f16x2(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    intensity(call, KernelId::IntensityF16x2, 4, reference::probes::intensity_f16x2)
}

pub(crate) fn run_intensity_f64(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    intensity(call, KernelId::IntensityF64, 2, reference::probes::intensity_f64)
}

/// The tensor and `mma.sync` probes (`(a, b, iters, store, out, clk)`):
/// with `store != 0`, `result(a, b, iters)` from `a_bytes` and `b_bytes` of
/// operands; always the simulator's clock.
fn run_matrix_probe(
    call: &mut KernelCall<'_>,
    kernel: KernelId,
    (a_bytes, b_bytes): (u64, u64),
    result: impl FnOnce(&[u8], &[u8], u32) -> Vec<f32>,
) -> Result<(), KernelFault> {
    let mut args = Args::new(call, kernel)?;
    let iters = args.scalar::<u32>("iters")?;
    let store = args.scalar::<u32>("store")?;
    if store != 0 {
        let mut bytes = |name: &str, n: u64| -> Result<Vec<u8>, KernelFault> {
            Ok(args.read::<u32>(name, (n / 4) as usize)?.iter().flat_map(|w| w.to_le_bytes()).collect())
        };
        let a = bytes("a", a_bytes)?;
        let b = bytes("b", b_bytes)?;
        args.write("out", &result(&a, &b, iters))?;
    }
    let ns = args.probe_ns();
    args.write_clock(ns)
}

/// The tensor probes: with `store != 0`, the reference result; always the
/// simulator's clock.
fn run_tensor(
    call: &mut KernelCall<'_>,
    kernel: KernelId,
    format: reference::probes::TcFormat,
) -> Result<(), KernelFault> {
    run_matrix_probe(call, kernel, (cost::TC_A_BYTES, cost::TC_B_BYTES), |a, b, iters| {
        reference::probes::tensor(format, a, b, iters)
    })
}

/// The `mma.sync` probes: with `store != 0`, the reference result (32 x
/// 32); always the simulator's clock.
fn run_mma(
    call: &mut KernelCall<'_>,
    kernel: KernelId,
    format: reference::probes::TcFormat,
) -> Result<(), KernelFault> {
    run_matrix_probe(call, kernel, (cost::MMA_A_BYTES, cost::MMA_B_BYTES), |a, b, iters| {
        reference::probes::mma(format, a, b, iters)
    })
}

pub(crate) fn run_mma_bf16_probe(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    run_mma(call, KernelId::MmaBf16, reference::probes::TcFormat::Bf16)
}

pub(crate) fn run_mma_f16_probe(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    run_mma(call, KernelId::MmaF16, reference::probes::TcFormat::F16)
}

pub(crate) fn run_mma_e4m3_probe(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    run_mma(call, KernelId::MmaE4m3, reference::probes::TcFormat::E4m3)
}

pub(crate) fn run_tc_bf16_probe(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    run_tensor(call, KernelId::TcBf16, reference::probes::TcFormat::Bf16)
}

pub(crate) fn run_tc_f16_probe(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    run_tensor(call, KernelId::TcF16, reference::probes::TcFormat::F16)
}

pub(crate) fn run_tc_e4m3_probe(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    run_tensor(call, KernelId::TcE4m3, reference::probes::TcFormat::E4m3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_follow_the_spec() {
        register_sim_kernels();
        for k in KernelId::ALL {
            let spec = cuda_sim::lookup_kernel(k.name()).expect("registered");
            let info = k.info();
            assert_eq!(spec.params.len(), info.params.len(), "{}", info.name);
            for (s, p) in spec.params.iter().zip(info.params) {
                assert_eq!(s.size, p.size(), "{}.{}", info.name, p.name);
                let want = match p.kind {
                    ParamKind::Scalar(_) => cuda_sim::ParamKind::Scalar,
                    ParamKind::Pointer { access: ParamAccess::Read, .. } => cuda_sim::ParamKind::Read,
                    ParamKind::Pointer { access: ParamAccess::Write, .. } => cuda_sim::ParamKind::Write,
                    ParamKind::Pointer { access: ParamAccess::ReadWrite, .. } => {
                        cuda_sim::ParamKind::ReadWrite
                    }
                };
                assert_eq!(s.kind, want, "{}.{}", info.name, p.name);
            }
            assert!(spec.duration.is_some());
        }
    }
}
