//! `gpu-bench roofline`: every ceiling measured on the GPU in hand, the
//! working-set and intensity sweeps, and every kernel of the `kernels` crate
//! placed under the roofs; written as `report.md`, `results.json`
//! (`gpu_bench::roofline`'s versioned schema) and `roofline.svg`.
//!
//! Phases, one file each (each reported on stderr with its wall time):
//! 1. `hbm`: read, copy and triad (`roofline.cu`'s variants, 16-byte
//!    loads) and the driver's D2D copy as a reference line;
//! 2. `compute`: FP64, FP32, FP16x2, BF16x2 FMA chains, and the tensor
//!    cores (`wgmma` on sm_90, `mma.sync` elsewhere or with
//!    `--tensor-path mma`), each against the peak at the SM clock measured
//!    inside the probe;
//! 3. `memory`: the L2 working-set sweep (256 KiB to 4× L2, log-spaced,
//!    `.cg` loads), the L1 sweep (plain loads) and shared memory;
//! 4. `sweep`: the intensity sweeps (0…1024 FLOPs per element), FP32, FP64
//!    and FP16x2, each with its empirical ridge;
//! 5. `place`: the `kernels` crate's kernels placed, and the launch floors.
//!
//! Every probe's result is checked against its CPU reference before its
//! figure is kept. `--tune` adds the tuning search of the HBM probes
//! (variants × grids) and the L2 sweep in per-block slices; `--tune-reads`
//! (hidden) runs the read-tuning sweep of the L2 and HBM-read probes alone
//! (`tune`); `--replay FILE` re-renders a saved `results.json`
//! with no GPU; `--peers FILE` merges PyTorch figures measured in the same
//! device call. Under `--quick` or the simulator, sizes are scaled down and
//! the report says so.

mod compute;
mod hbm;
mod memory;
mod place;
mod sweep;
mod tune;
pub mod validate;

use crate::common::{Ctx, Failure};
use gpu_bench::render::{utc_date, write_text};
use gpu_bench::roofline::{
    self as rl, Ceiling, CeilingKind, MemoryLevel, Peer, Phase, PlaceRequest, RooflineReport, Sweep,
    SweepPoint,
};
use gpu_bench::{Bench, Mode, Settings};
use gpu_sync::cuda_sys::CUdevice_attribute;
use gpu_sync::{DeviceBuffer, Stream};
use kernels::{
    CacheHint, FmaOut, FmaPrecision, Grid, MmaKernels, RooflineKernels, TensorKernels, cost, reference,
};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use gpu_bench_cli::cli::{RooflineArgs as Args, TensorPath};

/// Iterations of the FMA probes (about 2 ms of FP32 on an H100).
const FMA_ITERS: u32 = 512;
/// Iterations of the 16-bit tensor probes (about 2.5 ms on an H100; FP8
/// runs half as many).
const TC_ITERS: u32 = 4000;
/// Iterations of the 16-bit `mma.sync` probes (8 `mma.sync` each; about
/// 2 ms on an H100 if `mma.sync` reaches 60 % of the `wgmma` rate; FP8
/// runs half as many).
const MMA_ITERS: u32 = 8192;
/// FMAs per double of the FP64 intensity sweep: 0 to 1024 FLOPs per
/// element (intensity 0 to 64 FLOP/byte), five points, two on each side of
/// the H100's FP64 ridge (about 11 FLOP/byte) and one near it.
const F64_SWEEP_FMAS: [u32; 5] = [0, 8, 48, 128, 512];
/// FMAs per half of the FP16x2 intensity sweep: 0 to 1024 FLOPs per
/// element (intensity 0 to 256 FLOP/byte), five points around the H100's
/// FP16 ridge (about 45 FLOP/byte).
const F16X2_SWEEP_FMAS: [u32; 5] = [0, 16, 96, 192, 512];
/// MiB of each array of the FP64 and FP16x2 sweeps: 128 MiB in and out,
/// 2.6x the H100's L2.
const SHORT_SWEEP_MIB: usize = 128;
/// Least measured time per point of those sweeps: their kernels are 0.09
/// to 0.52 ms on an H100 (cost model at 2.75 TB/s, 33.4 and 132 TFLOP/s),
/// so 50 ms holds 100 or more runs.
const SHORT_POINT_S: f64 = 0.05;

/// Loads of each cache-sweep point (2 GiB of traffic).
const CACHE_LOADS: u64 = 1 << 27;

/// Sum of `pattern(seed, i)` for `i < n`, wrapping, computed on all cores.
pub fn pattern_sum(seed: u32, n: u64) -> u64 {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64) as u64;
    let chunk = n.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let (lo, hi) = ((t * chunk).min(n), ((t + 1) * chunk).min(n));
                    (lo..hi).fold(0u64, |acc, i| acc.wrapping_add(u64::from(reference::pattern(seed, i))))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).fold(0u64, u64::wrapping_add)
    })
}

fn rl_err(e: rl::RooflineError) -> Failure {
    match e {
        rl::RooflineError::AboveRoof { .. } => Failure::Check(e.to_string()),
        rl::RooflineError::Json(_) => Failure::Usage(e.to_string()),
        _ => Failure::Io(e.to_string()),
    }
}

/// What every phase works with.
struct Run<'a> {
    ctx: &'a Ctx,
    timer: gpu_bench::Timer,
    stream: Stream,
    probes: RooflineKernels,
    sms: u32,
    sizes: Sizes,
    tune: bool,
    tensor_path: TensorPath,
}

/// Sizes of one run.
struct Sizes {
    /// Bytes of each HBM array.
    array: usize,
    /// Bytes of each placement array (at least 64 MiB on a GPU).
    place: usize,
    /// Working sets of the L2 sweep, bytes.
    l2_sweep: Vec<u64>,
    /// Working sets of the L1 sweep, bytes.
    l1_sweep: Vec<u64>,
    /// Loads per cache-sweep point (rounded up to whole working sets).
    cache_loads: u64,
    /// FMA iterations.
    fma_iters: u32,
    /// `smem_read` iterations.
    smem_iters: u32,
    /// FMAs per float of the intensity sweep.
    fmas: Vec<u32>,
    /// Bytes of each intensity-sweep array.
    intensity_array: usize,
    /// FMAs per double of the FP64 intensity sweep.
    fmas_f64: Vec<u32>,
    /// FMAs per half of the FP16x2 intensity sweep.
    fmas_f16x2: Vec<u32>,
    /// Bytes of each array of the FP64 and FP16x2 intensity sweeps.
    short_sweep_array: usize,
    /// Least measured time per point of those sweeps, seconds.
    short_point_s: f64,
    /// Iterations of the 16-bit tensor probes.
    tc_iters: u32,
    /// Iterations of the 16-bit `mma.sync` probes.
    mma_iters: u32,
}

impl Sizes {
    /// The run's sizes: `--quick` and the simulator scale everything down
    /// (HBM arrays of 4 MiB) unless `--array-mib` says; a given array size
    /// is honoured everywhere, checked against host and device memory (on
    /// the simulator, device memory is host memory too).
    fn new(ctx: &Ctx, array_mib: Option<usize>, l2: u64) -> Result<Sizes, Failure> {
        let small = ctx.quick || ctx.sim;
        let array = match array_mib {
            None if small => 4 << 20,
            None => 4096 << 20,
            Some(m) => m
                .checked_mul(1 << 20)
                .ok_or_else(|| Failure::Usage(format!("--array-mib {m}: too large for this machine")))?,
        };
        if array_mib.is_some() {
            // Three device arrays (triad); two host arrays fill it, and on
            // the simulator the device's three live in host memory as well.
            let a = array as u64;
            let host = if ctx.sim { 5 * a } else { 2 * a };
            crate::args::fits(&format!("--array-mib {}", array >> 20), &ctx.device, host, 3 * a)?;
        }
        if small {
            return Ok(Sizes {
                array,
                place: 1 << 20,
                l2_sweep: rl::log_sizes(16 << 10, 4 << 20, 6, 4096),
                l1_sweep: rl::log_sizes(8 << 10, 64 << 10, 3, 4096),
                cache_loads: 1 << 16,
                fma_iters: 4,
                smem_iters: 16,
                fmas: vec![0, 1, 4, 16, 64, 256, 512],
                intensity_array: 64 << 10,
                fmas_f64: F64_SWEEP_FMAS.to_vec(),
                fmas_f16x2: F16X2_SWEEP_FMAS.to_vec(),
                short_sweep_array: 16 << 10,
                short_point_s: 0.01,
                tc_iters: 4,
                mma_iters: 4,
            });
        }
        let mut fmas = vec![0u32];
        fmas.extend((0..10).map(|i| 1u32 << i));
        Ok(Sizes {
            array,
            place: 256 << 20,
            l2_sweep: rl::log_sizes(256 << 10, 4 * l2.max(1 << 20), 24, 4096),
            l1_sweep: rl::log_sizes(8 << 10, 1 << 20, 8, 4096),
            cache_loads: CACHE_LOADS,
            fma_iters: FMA_ITERS,
            smem_iters: 1000,
            fmas,
            intensity_array: 256 << 20,
            fmas_f64: F64_SWEEP_FMAS.to_vec(),
            fmas_f16x2: F16X2_SWEEP_FMAS.to_vec(),
            short_sweep_array: SHORT_SWEEP_MIB << 20,
            short_point_s: SHORT_POINT_S,
            tc_iters: TC_ITERS,
            mma_iters: MMA_ITERS,
        })
    }
}

/// The engine's settings for long, steady kernels: the caller's, with at
/// most 0.2 s of measured time and 5 s per mode.
fn probe_settings(s: &Settings) -> Settings {
    let mut p = *s;
    p.min_time_s = p.min_time_s.min(0.2);
    p.timeout_s = p.timeout_s.min(5.0);
    p
}

/// Median seconds and its relative noise of `work`, hot mode, with at most
/// `min_time_s` of measured time (for short sweep points).
fn time_short(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    name: &str,
    min_time_s: f64,
    work: impl FnMut(&Stream) -> gpu_sync::Result<()>,
) -> Result<(f64, f64), Failure> {
    let mut settings = probe_settings(&ctx.settings);
    settings.min_time_s = settings.min_time_s.min(min_time_s);
    let r = Bench::new(name).modes(&[Mode::Hot]).settings(settings).run_on(timer, None, work)?;
    let m = r.mode(Mode::Hot).ok_or_else(|| Failure::Io(format!("{name}: no hot-mode result")))?;
    Ok((m.median(), m.summary.median_noise()))
}

/// Median seconds and its relative noise of `work`, hot mode.
fn time(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    name: &str,
    work: impl FnMut(&Stream) -> gpu_sync::Result<()>,
) -> Result<(f64, f64), Failure> {
    let r = Bench::new(name)
        .modes(&[Mode::Hot])
        .settings(probe_settings(&ctx.settings))
        .run_on(timer, None, work)?;
    let m = r.mode(Mode::Hot).ok_or_else(|| Failure::Io(format!("{name}: no hot-mode result")))?;
    Ok((m.median(), m.summary.median_noise()))
}

fn ceiling(
    name: &str,
    kind: CeilingKind,
    value: f64,
    noise: f64,
    kernel: &str,
    config: String,
    check: String,
) -> Ceiling {
    Ceiling {
        name: name.into(),
        kind,
        value,
        noise,
        datasheet: None,
        sm_clock_mhz: None,
        peak_at_clock: None,
        kernel: kernel.into(),
        config,
        check,
        roof: true,
    }
}

/// The phase timer: logs each phase on stderr and keeps its wall time.
struct Phases {
    list: Vec<Phase>,
    at: Instant,
}

impl Phases {
    fn start(ctx: &Ctx, name: &str) -> Phases {
        ctx.progress.step(format!("roofline: {name}"));
        Phases { list: Vec::new(), at: Instant::now() }
    }

    fn next(&mut self, ctx: &Ctx, done: &str, next: &str) {
        let s = self.at.elapsed().as_secs_f64();
        eprintln!("roofline: {done} done in {s:.1} s");
        self.list.push(Phase { name: done.into(), seconds: s });
        ctx.progress.step(format!("roofline: {next}"));
        self.at = Instant::now();
    }
}

/// The kernel driver's version line (`/proc/driver/nvidia/version`).
fn driver_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    let line = text.lines().next()?;
    let v = line
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))?;
    Some(format!("NVIDIA driver {v}"))
}

/// A `--peers` file: read, parsed and checked ([`validate::peers`]).
fn read_peers(path: &Path) -> Result<Vec<Peer>, Failure> {
    let bad = |e: String| Failure::Usage(format!("--peers {}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let peers: Vec<Peer> = serde_json::from_str(&text).map_err(|e| {
        let null = serde_json::from_str(&text).ok().and_then(|v| validate::null_figure(&v, "peers"));
        bad(match null {
            Some(field) => format!("{field} is null: expected a finite number, at least 0 ({e})"),
            None => e.to_string(),
        })
    })?;
    validate::peers(&peers).map_err(bad)?;
    Ok(peers)
}

/// Writes report.md, results.json and (with `chart`) roofline.svg into
/// `out` (if given) and prints the markdown.
fn emit(report: &RooflineReport, out: Option<&PathBuf>, chart: bool) -> Result<(), Failure> {
    let md = rl::markdown(report);
    // No chart drawn (`--only-tensor`): no link to one.
    let md = if chart { md } else { md.replace("\n![roofline](roofline.svg)\n", "\n") };
    let svg = if chart { Some(rl::svg(report).map_err(rl_err)?) } else { None };
    let json = report.to_json().map_err(rl_err)?;
    print!("{md}");
    if let Some(dir) = out {
        write_text(&dir.join("report.md"), &md).map_err(Failure::Io)?;
        write_text(&dir.join("results.json"), &json).map_err(Failure::Io)?;
        if let Some(svg) = &svg {
            write_text(&dir.join("roofline.svg"), svg).map_err(Failure::Io)?;
        }
        // The working-set sweeps, where the report has them.
        if let Ok(cache) = rl::cache_svg(report) {
            write_text(&dir.join("cache.svg"), &cache).map_err(Failure::Io)?;
        }
        let svg_name = if svg.is_some() { ", roofline.svg" } else { " (no chart)" };
        eprintln!("roofline: wrote {0}/report.md, {0}/results.json{svg_name}", dir.display());
    }
    Ok(())
}

/// `--replay FILE`: re-renders a saved report (merging `--peers`), no GPU.
///
/// # Errors
/// [`Failure::Usage`] for an unreadable or foreign file; I/O errors.
pub fn replay(args: &Args, file: &Path, out: Option<&PathBuf>) -> Result<i32, Failure> {
    let bad = |e: String| Failure::Usage(format!("--replay {}: {e}", file.display()));
    let text = std::fs::read_to_string(file).map_err(|e| bad(e.to_string()))?;
    let mut report = RooflineReport::from_json(&text).map_err(|e| {
        // A NaN or infinity written by another tool is a `null`: name it.
        let null = serde_json::from_str(&text).ok().and_then(|v| validate::null_figure(&v, ""));
        bad(match null {
            Some(field) => format!("{field} is null: expected a finite number, at least 0 ({e})"),
            None => e.to_string(),
        })
    })?;
    validate::report(&report).map_err(bad)?;
    if let Some(p) = &args.peers {
        report.peers = read_peers(p)?;
    }
    // A report without memory and compute ceilings (`--only-tensor`) has no
    // chart.
    let chart = report.ceilings.iter().any(|c| matches!(c.kind, CeilingKind::Memory(_)));
    emit(&report, out, chart)?;
    Ok(0)
}

/// Runs every phase and writes the outputs.
///
/// # Errors
/// [`Failure::Check`] when a probe's result is wrong or a kernel lands above
/// its roof; a driver error.
pub fn run(ctx: &Ctx, args: &Args, out: Option<&PathBuf>) -> Result<i32, Failure> {
    let device = gpu_bench::device_info(&ctx.device)?;
    let mut report = RooflineReport::new(device, gpu_bench::render::command_line(), utc_date());
    report.driver_version = driver_version();
    report.scaled_down = ctx.quick || ctx.sim;
    if let Some(p) = &args.peers {
        report.peers = read_peers(p)?;
    }
    let sms =
        ctx.device.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32;
    let sizes = Sizes::new(ctx, args.array_mib, report.device.l2_bytes.max(0) as u64)?;
    let stream = Stream::new(&ctx.device)?;
    let timer = ctx.timer(&stream)?;
    let probes = RooflineKernels::load(&ctx.device)?;

    // The SM clock before the probes (the clock kernel of part 1).
    {
        let mut clk = DeviceBuffer::<u64>::zeroed(&stream, 2)?;
        let cycles = Ctx::cycles(0.002, report.device.sm_clock_mhz.max(1.0));
        ctx.bench.clock_probe(&stream, cycles, &mut clk)?;
        let v = stream.to_vec(&clk)?;
        if v[1] > 0 {
            report.idle_clock_mhz = Some(v[0] as f64 / v[1] as f64 * 1e3);
        }
    }
    let mut run =
        Run { ctx, timer, stream, probes, sms, sizes, tune: args.tune, tensor_path: args.tensor_path };
    if args.tune_reads {
        let r = tune::run(&mut run, out);
        ctx.progress.finish();
        return r;
    }
    if args.only_tensor {
        let mut phases = Phases::start(ctx, "tensor");
        let r = compute::tensor(&mut run, &mut report);
        phases.next(ctx, "tensor", "report");
        report.phases = phases.list;
        report.notes.push("--only-tensor: the tensor phase alone".into());
        ctx.progress.finish();
        emit(&report, out, false)?;
        return r.map(|()| 0);
    }
    let mut phases = Phases::start(ctx, "HBM");

    let mut failed = None;
    let mut outcome = |r: Result<(), Failure>, report: &mut RooflineReport| -> Result<(), Failure> {
        match r {
            Err(Failure::Check(m)) if args.keep_going => {
                eprintln!("roofline: result check failed: {m}");
                report.notes.push(format!("RESULT CHECK FAILED: {m}"));
                failed = Some(m);
                Ok(())
            }
            other => other,
        }
    };
    let r = hbm::run(&mut run, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "HBM", "FMA");
    let r = compute::fma(&mut run, &mut report);
    outcome(r, &mut report)?;
    if args.only_hbm_fma {
        phases.next(ctx, "FMA", "report");
        report.phases = phases.list;
        report.notes.push("--only-hbm-fma: the HBM and FMA phases alone".into());
        ctx.progress.finish();
        emit(&report, out, true)?;
        return match failed {
            Some(m) => Err(Failure::Check(m)),
            None => Ok(0),
        };
    }
    phases.next(ctx, "FMA", "tensor");
    let r = compute::tensor(&mut run, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "tensor", "caches");
    let r = memory::run(&mut run, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "caches", "intensity sweep");
    let r = sweep::run(&mut run, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "intensity sweep", "placement");
    let r = place::run(&mut run, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "placement", "report");
    report.phases = phases.list;
    if report.scaled_down {
        report.notes.push(format!(
            "sizes scaled down ({}): HBM arrays {} KiB — figures are not ceilings",
            if ctx.sim { "simulator" } else { "--quick" },
            run.sizes.array >> 10
        ));
    }
    ctx.progress.finish();
    emit(&report, out, true)?;
    match failed {
        Some(m) => Err(Failure::Check(m)),
        None => Ok(0),
    }
}

pub(super) fn check_pattern(
    ctx: &Ctx,
    stream: &Stream,
    buf: &DeviceBuffer<u32>,
    seed: u32,
    what: &str,
) -> Result<(), Failure> {
    let mut bad = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    ctx.kernels.check_pattern(stream, buf, seed, &mut bad)?;
    let mismatches = stream.to_vec(&bad)?[0];
    if mismatches != 0 {
        return Err(Failure::Check(format!("{what}: {mismatches} words differ from the source")));
    }
    Ok(())
}
