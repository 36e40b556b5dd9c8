//! `gpu-bench roofline`: every ceiling measured on the GPU in hand, the
//! working-set and intensity sweeps, and every kernel of the `kernels` crate
//! placed under the roofs; written as `report.md`, `results.json`
//! (`gpu_bench::roofline`'s versioned schema) and `roofline.svg`.
//!
//! Phases (each reported on stderr with its wall time):
//! 1. HBM: read, copy and triad (`roofline.cu`'s tuned variants, 16-byte
//!    loads) and the driver's D2D copy as a reference line;
//! 2. FMA: FP64, FP32, FP16x2, BF16x2 chains, against the peak at the SM
//!    clock measured inside the probe;
//! 3. caches: the L2 working-set sweep (256 KiB to 4× L2, log-spaced, `.cg`
//!    loads), the L1 sweep (plain loads) and shared memory;
//! 4. the intensity sweep (0…1024 FLOPs per element, FP32);
//! 5. placement of the `kernels` crate's kernels.
//!
//! Every probe's result is checked against its CPU reference before its
//! figure is kept. `--tune` adds the tuning search of the HBM probes
//! (variants × grids); `--replay FILE` re-renders a saved `results.json`
//! with no GPU; `--peers FILE` merges PyTorch figures measured in the same
//! device call. Under `--quick` or the simulator, sizes are scaled down and
//! the report says so.

use crate::common::{Ctx, Failure};
use gpu_bench::render::{utc_date, write_text};
use gpu_bench::roofline::{
    self as rl, Ceiling, CeilingKind, MemoryLevel, Peer, Phase, PlaceRequest, RooflineReport, Sweep,
    SweepPoint, TuneRow,
};
use gpu_bench::{Bench, Mode, Settings};
use gpu_sync::cuda_sys::CUdevice_attribute;
use gpu_sync::{DeviceBuffer, Stream};
use kernels::{
    FmaOut, FmaPrecision, Grid, HBM_VARIANTS, RooflineKernels, TensorKernels, cost, hbm_variant_name,
    reference,
};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `gpu-bench roofline`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Size of each HBM array in MiB (use several times the L2).
    #[arg(long, default_value_t = 1024)]
    pub array_mib: usize,
    /// Also run the tuning search of the HBM probes (variants × grids).
    #[arg(long)]
    pub tune: bool,
    /// Re-render a saved results.json (no GPU needed).
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// PyTorch figures from the same device call (JSON list of
    /// {name, value, unit}) to show beside ours.
    #[arg(long, value_name = "FILE")]
    pub peers: Option<PathBuf>,
    /// On a failed result check, note it and go on with the next phase
    /// (the exit status is still 4).
    #[arg(long)]
    pub keep_going: bool,
}

/// The tuned defaults of the HBM probes: (variant, blocks per SM, threads).
/// Chosen by `--tune` on an H100/H200 (docs/results/).
/// On an H100 (docs/results/2026-11-25-h100-roofline-call1): read best with
/// 4 loads in block tiles, 2 blocks of 512 a SM; copy and triad with 8 loads
/// in tiles and many blocks (32 and 8 a SM): write traffic prefers short
/// blocks that the scheduler refills.
/// The main job measures each probe in its candidates and keeps the best
/// (both rows are in the report's tuning table). Call 2 on the H100 found
/// triad best at 128 blocks a SM (3.01 TB/s against 2.93 at 8).
const READ_CONFIGS: [(u32, u32, u32); 2] = [(10, 2, 512), (10, 4, 256)];
const COPY_CONFIGS: [(u32, u32, u32); 3] = [(11, 32, 256), (11, 128, 256), (11, 256, 256)];
const TRIAD_CONFIGS: [(u32, u32, u32); 3] = [(11, 128, 256), (11, 32, 256), (11, 256, 256)];
const READ_CONFIG: (u32, u32, u32) = READ_CONFIGS[0];
const COPY_CONFIG: (u32, u32, u32) = COPY_CONFIGS[0];
const TRIAD_CONFIG: (u32, u32, u32) = TRIAD_CONFIGS[0];

/// Iterations of the FMA probes (about 2 ms of FP32 on an H100).
const FMA_ITERS: u32 = 512;
/// Iterations of the 16-bit tensor probes (about 2.5 ms on an H100; FP8
/// runs half as many).
const TC_ITERS: u32 = 4000;
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
    /// Iterations of the 16-bit tensor probes.
    tc_iters: u32,
}

impl Sizes {
    fn new(ctx: &Ctx, array_mib: usize, l2: u64) -> Result<Sizes, Failure> {
        if ctx.quick || ctx.sim {
            return Ok(Sizes {
                array: 4 << 20,
                place: 1 << 20,
                l2_sweep: rl::log_sizes(16 << 10, 4 << 20, 6, 4096),
                l1_sweep: rl::log_sizes(8 << 10, 64 << 10, 3, 4096),
                cache_loads: 1 << 16,
                fma_iters: 4,
                smem_iters: 16,
                fmas: vec![0, 1, 4, 16, 64, 256, 512],
                intensity_array: 64 << 10,
                tc_iters: 4,
            });
        }
        let array = array_mib
            .checked_mul(1 << 20)
            .filter(|b| *b >= 16)
            .ok_or_else(|| Failure::Usage(format!("--array-mib {array_mib}: out of range")))?;
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
            tc_iters: TC_ITERS,
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

fn read_peers(path: &Path) -> Result<Vec<Peer>, Failure> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))
}

/// Writes report.md, results.json and roofline.svg into `out` (if given)
/// and prints the markdown.
fn emit(report: &RooflineReport, out: Option<&PathBuf>) -> Result<(), Failure> {
    let md = rl::markdown(report);
    let svg = rl::svg(report).map_err(rl_err)?;
    let json = report.to_json().map_err(rl_err)?;
    print!("{md}");
    if let Some(dir) = out {
        write_text(&dir.join("report.md"), &md).map_err(Failure::Io)?;
        write_text(&dir.join("results.json"), &json).map_err(Failure::Io)?;
        write_text(&dir.join("roofline.svg"), &svg).map_err(Failure::Io)?;
        eprintln!("roofline: wrote {0}/report.md, {0}/results.json, {0}/roofline.svg", dir.display());
    }
    Ok(())
}

/// `--replay FILE`: re-renders a saved report (merging `--peers`), no GPU.
///
/// # Errors
/// [`Failure::Usage`] for an unreadable or foreign file; I/O errors.
pub fn replay(args: &Args, file: &Path, out: Option<&PathBuf>) -> Result<i32, Failure> {
    let text =
        std::fs::read_to_string(file).map_err(|e| Failure::Usage(format!("{}: {e}", file.display())))?;
    let mut report = RooflineReport::from_json(&text).map_err(rl_err)?;
    if let Some(p) = &args.peers {
        report.peers = read_peers(p)?;
    }
    emit(&report, out)?;
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
    let mut timer = ctx.timer(&stream)?;
    let probes = RooflineKernels::load(&ctx.device)?;
    let mut phases = Phases::start(ctx, "HBM");

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
    let r = hbm(ctx, &mut timer, &stream, &probes, sms, &sizes, args.tune, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "HBM", "FMA");
    let r = fma(ctx, &mut timer, &stream, &probes, sms, &sizes, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "FMA", "tensor");
    let r = tensor(ctx, &mut timer, &stream, sms, &sizes, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "tensor", "caches");
    let r = caches(ctx, &mut timer, &stream, &probes, sms, &sizes, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "caches", "intensity sweep");
    let r = intensity(ctx, &mut timer, &stream, &probes, sms, &sizes, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "intensity sweep", "placement");
    let r = place_kernels(ctx, &mut timer, &stream, &sizes, &mut report);
    outcome(r, &mut report)?;
    phases.next(ctx, "placement", "report");
    report.phases = phases.list;
    if report.scaled_down {
        report.notes.push(format!(
            "sizes scaled down ({}): HBM arrays {} KiB — figures are not ceilings",
            if ctx.sim { "simulator" } else { "--quick" },
            sizes.array >> 10
        ));
    }
    ctx.progress.finish();
    emit(&report, out)?;
    match failed {
        Some(m) => Err(Failure::Check(m)),
        None => Ok(0),
    }
}

fn grid(sms: u32, (_, per_sm, threads): (u32, u32, u32)) -> Grid {
    Grid { blocks: sms.saturating_mul(per_sm).max(1), threads }
}

#[allow(clippy::too_many_arguments)]
fn hbm(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    stream: &Stream,
    probes: &RooflineKernels,
    sms: u32,
    sizes: &Sizes,
    tune: bool,
    report: &mut RooflineReport,
) -> Result<(), Failure> {
    let words = sizes.array / 16 * 4;
    let n4 = words as u64 / 4;
    let seed = 0x5eed_2026u32;
    let datasheet = report.device.theoretical_bandwidth_gbs * 1e9;
    let k = &ctx.kernels;
    let mut src = DeviceBuffer::<u32>::alloc(stream, words)?;
    k.fill_pattern(stream, &mut src, seed)?;
    let mut dst = DeviceBuffer::<u32>::alloc(stream, words)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    let expected = pattern_sum(seed, words as u64);

    // The tuning search: every variant at the default grid, then grids for
    // the best variant.
    let configs;
    if tune {
        let mut search = |probe: &str,
                          default: (u32, u32, u32),
                          run: &mut dyn FnMut(&Stream, Grid, u32) -> gpu_sync::Result<()>,
                          bytes: f64,
                          timer: &mut gpu_bench::Timer|
         -> Result<(u32, u32, u32), Failure> {
            let mut best = (default, 0.0);
            for v in 0..HBM_VARIANTS {
                let cfg = (v, default.1, default.2);
                let (t, _) = time(ctx, timer, probe, |s| run(s, grid(sms, cfg), v))?;
                let value = bytes / t;
                report.tuning.push(TuneRow {
                    probe: probe.into(),
                    config: format!("{}, {} blocks/SM of {}", hbm_variant_name(v), cfg.1, cfg.2),
                    value,
                });
                if value > best.1 {
                    best = (cfg, value);
                }
            }
            let v = best.0.0;
            for (per_sm, threads) in [
                (1, 256),
                (2, 256),
                (2, 512),
                (4, 256),
                (8, 256),
                (16, 256),
                (32, 256),
                (64, 256),
                (128, 256),
                (256, 256),
                (1, 1024),
            ] {
                let cfg = (v, per_sm, threads);
                if cfg == best.0 {
                    continue;
                }
                let (t, _) = time(ctx, timer, probe, |s| run(s, grid(sms, cfg), v))?;
                let value = bytes / t;
                report.tuning.push(TuneRow {
                    probe: probe.into(),
                    config: format!("{}, {} blocks/SM of {}", hbm_variant_name(v), per_sm, threads),
                    value,
                });
                if value > best.1 {
                    best = (cfg, value);
                }
            }
            Ok(best.0)
        };
        let bytes = cost::read_sum_u32x4(n4).bytes() as f64;
        let read = search(
            "HBM read",
            READ_CONFIG,
            &mut |s, g, v| probes.hbm_read(s, g, v, &src, &mut sum),
            bytes,
            timer,
        )?;
        let bytes = cost::copy_u32x4(n4).bytes() as f64;
        let copy = search(
            "HBM copy",
            COPY_CONFIG,
            &mut |s, g, v| probes.hbm_copy(s, g, v, &src, &mut dst),
            bytes,
            timer,
        )?;
        configs = (read, copy);
    } else {
        let bytes = cost::read_sum_u32x4(n4).bytes() as f64;
        let read = pick(
            ctx,
            timer,
            sms,
            "HBM read",
            &READ_CONFIGS,
            bytes,
            &mut |s, g, v| probes.hbm_read(s, g, v, &src, &mut sum),
            report,
        )?;
        let bytes = cost::copy_u32x4(n4).bytes() as f64;
        let copy = pick(
            ctx,
            timer,
            sms,
            "HBM copy",
            &COPY_CONFIGS,
            bytes,
            &mut |s, g, v| probes.hbm_copy(s, g, v, &src, &mut dst),
            report,
        )?;
        configs = (read, copy);
    }

    // read
    let cfg = configs.0;
    let c = cost::read_sum_u32x4(n4);
    let (t, noise) =
        time(ctx, timer, "HBM read", |s| probes.hbm_read(s, grid(sms, cfg), cfg.0, &src, &mut sum))?;
    stream.fill_bytes(&mut sum, 0)?;
    probes.hbm_read(stream, grid(sms, cfg), cfg.0, &src, &mut sum)?;
    let got = stream.to_vec(&sum)?[0];
    if got != expected {
        return Err(Failure::Check(format!("HBM read: device sum {got:#x}, CPU reference {expected:#x}")));
    }
    let mut ce = ceiling(
        "HBM read",
        CeilingKind::Memory(MemoryLevel::Hbm),
        c.bytes() as f64 / t,
        noise,
        "hbm_read",
        format!("{}, {} blocks/SM of {}, {} MiB", hbm_variant_name(cfg.0), cfg.1, cfg.2, sizes.array >> 20),
        format!("sum = CPU reference {expected:#x}"),
    );
    ce.datasheet = Some(datasheet);
    report.ceilings.push(ce);

    // copy
    let cfg = configs.1;
    stream.fill_bytes(&mut dst, 0xff)?;
    let c = cost::copy_u32x4(n4);
    let (t, noise) =
        time(ctx, timer, "HBM copy", |s| probes.hbm_copy(s, grid(sms, cfg), cfg.0, &src, &mut dst))?;
    check_pattern(ctx, stream, &dst, seed, "HBM copy")?;
    let mut ce = ceiling(
        "HBM copy",
        CeilingKind::Memory(MemoryLevel::Hbm),
        c.bytes() as f64 / t,
        noise,
        "hbm_copy",
        format!("{}, {} blocks/SM of {}", hbm_variant_name(cfg.0), cfg.1, cfg.2),
        "every word matches the pattern (poisoned before)".into(),
    );
    ce.datasheet = Some(datasheet);
    report.ceilings.push(ce);

    // The driver's D2D copy: a reference line, not a roof of ours.
    stream.fill_bytes(&mut dst, 0xff)?;
    let (t, noise) = time(ctx, timer, "driver D2D copy", |s| s.copy(&src, &mut dst))?;
    check_pattern(ctx, stream, &dst, seed, "driver D2D copy")?;
    let mut ce = ceiling(
        "driver D2D copy",
        CeilingKind::Memory(MemoryLevel::Hbm),
        c.bytes() as f64 / t,
        noise,
        "cuMemcpyDtoDAsync",
        "the driver's own copy".into(),
        "every word matches the pattern".into(),
    );
    ce.roof = false;
    ce.datasheet = Some(datasheet);
    report.ceilings.push(ce);
    drop((src, dst, sum));

    // triad (as floats)
    let host_b: Vec<f32> = (0..words).map(|i| (i % 1021) as f32 * 0.25).collect();
    let host_c: Vec<f32> = (0..words).map(|i| ((i * 7) % 1009) as f32 - 500.0).collect();
    let b = DeviceBuffer::from_slice(stream, &host_b)?;
    let cc = DeviceBuffer::from_slice(stream, &host_c)?;
    let mut a = DeviceBuffer::<f32>::alloc(stream, words)?;
    let scalar = 3.0f32;
    let triad_cfg;
    if tune {
        let bytes = cost::triad_f32(words as u64).bytes() as f64;
        let mut best = (TRIAD_CONFIG, 0.0);
        for v in 0..HBM_VARIANTS {
            for per_sm in [3, 8, 32, 128] {
                let cfg = (v, per_sm, 256);
                let (t, _) = time(ctx, timer, "HBM triad", |s| {
                    probes.hbm_triad(s, grid(sms, cfg), v, &mut a, &b, &cc, scalar)
                })?;
                report.tuning.push(TuneRow {
                    probe: "HBM triad".into(),
                    config: format!("{}, {} blocks/SM of 256", hbm_variant_name(v), per_sm),
                    value: bytes / t,
                });
                if bytes / t > best.1 {
                    best = (cfg, bytes / t);
                }
            }
        }
        triad_cfg = best.0;
    } else {
        let bytes = cost::triad_f32(words as u64).bytes() as f64;
        triad_cfg = pick(
            ctx,
            timer,
            sms,
            "HBM triad",
            &TRIAD_CONFIGS,
            bytes,
            &mut |s, g, v| probes.hbm_triad(s, g, v, &mut a, &b, &cc, scalar),
            report,
        )?;
    }
    stream.fill_bytes(&mut a, 0xff)?;
    let cfg = triad_cfg;
    let c = cost::triad_f32(words as u64);
    let (t, noise) = time(ctx, timer, "HBM triad", |s| {
        probes.hbm_triad(s, grid(sms, cfg), cfg.0, &mut a, &b, &cc, scalar)
    })?;
    let got = stream.to_vec(&a)?;
    let mut want = vec![0f32; words];
    reference::triad_f32(&mut want, &host_b, &host_c, scalar);
    if let Some(i) = (0..words).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        return Err(Failure::Check(format!(
            "HBM triad: a[{i}] = {} but the reference gives {}",
            got[i], want[i]
        )));
    }
    let mut ce = ceiling(
        "HBM triad",
        CeilingKind::Memory(MemoryLevel::Hbm),
        c.bytes() as f64 / t,
        noise,
        "hbm_triad",
        format!("{}, {} blocks/SM of {}", hbm_variant_name(cfg.0), cfg.1, cfg.2),
        "every result bit-equal to the CPU reference".into(),
    );
    ce.datasheet = Some(datasheet);
    report.ceilings.push(ce);
    Ok(())
}

/// Times `run` in each candidate configuration (variant, blocks a SM,
/// threads), records each in the report's tuning table, returns the best.
#[allow(clippy::too_many_arguments)]
fn pick(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    sms: u32,
    probe: &str,
    candidates: &[(u32, u32, u32)],
    bytes: f64,
    run: &mut dyn FnMut(&Stream, Grid, u32) -> gpu_sync::Result<()>,
    report: &mut RooflineReport,
) -> Result<(u32, u32, u32), Failure> {
    let mut best = (candidates[0], 0.0);
    for &cfg in candidates {
        let (t, _) = time(ctx, timer, probe, |s| run(s, grid(sms, cfg), cfg.0))?;
        report.tuning.push(TuneRow {
            probe: format!("{probe} (main job's candidates)"),
            config: format!("{}, {} blocks/SM of {}", hbm_variant_name(cfg.0), cfg.1, cfg.2),
            value: bytes / t,
        });
        if bytes / t > best.1 {
            best = (cfg, bytes / t);
        }
    }
    Ok(best.0)
}

fn check_pattern(
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

#[allow(clippy::too_many_arguments)]
fn fma(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    stream: &Stream,
    probes: &RooflineKernels,
    sms: u32,
    sizes: &Sizes,
    report: &mut RooflineReport,
) -> Result<(), Failure> {
    let g = Grid { blocks: sms * 8, threads: 256 };
    let slots = g.total() as usize;
    let mut clk = DeviceBuffer::<u64>::zeroed(stream, 2)?;
    let seed = 0.3125f64 + f64::from(std::process::id() % 64) / 1024.0; // run-time seed
    for prec in FmaPrecision::ALL {
        let mut out64 =
            DeviceBuffer::<f64>::zeroed(stream, if prec == FmaPrecision::F64 { slots } else { 0 })?;
        let mut out32 =
            DeviceBuffer::<f32>::zeroed(stream, if prec == FmaPrecision::F64 { 0 } else { slots })?;
        let name = format!("{} FMA", prec.name());
        // The check: a short run that stores, against the CPU reference.
        let check_grid = Grid { blocks: 2, threads: 256 };
        let n_check = check_grid.total() as usize;
        let check_iters = 3;
        let mut c64 =
            DeviceBuffer::<f64>::alloc(stream, if prec == FmaPrecision::F64 { n_check } else { 0 })?;
        let mut c32 =
            DeviceBuffer::<f32>::alloc(stream, if prec == FmaPrecision::F64 { 0 } else { n_check })?;
        stream.fill_bytes(&mut c64, 0xff)?;
        stream.fill_bytes(&mut c32, 0xff)?;
        let check = if prec == FmaPrecision::F64 {
            probes.fma(stream, check_grid, prec, seed, check_iters, true, FmaOut::F64(&mut c64), &mut clk)?;
            let got = stream.to_vec(&c64)?;
            let mut want = vec![0f64; n_check];
            reference::probes::fma_f64(seed, check_iters, &mut want);
            got.iter().zip(&want).position(|(g, w)| g.to_bits() != w.to_bits()).map(|i| (i, got[i], want[i]))
        } else {
            probes.fma(stream, check_grid, prec, seed, check_iters, true, FmaOut::F32(&mut c32), &mut clk)?;
            let got = stream.to_vec(&c32)?;
            let mut want = vec![0f32; n_check];
            match prec {
                FmaPrecision::F32 => reference::probes::fma_f32(seed as f32, check_iters, &mut want),
                FmaPrecision::F16x2 => reference::probes::fma_half2(
                    reference::probes::Half::F16,
                    seed as f32,
                    check_iters,
                    &mut want,
                ),
                _ => reference::probes::fma_half2(
                    reference::probes::Half::Bf16,
                    seed as f32,
                    check_iters,
                    &mut want,
                ),
            }
            got.iter()
                .zip(&want)
                .position(|(g, w)| g.to_bits() != w.to_bits())
                .map(|i| (i, f64::from(got[i]), f64::from(want[i])))
        };
        if let Some((i, g, w)) = check {
            return Err(Failure::Check(format!("{name}: slot {i} = {g} but the CPU reference gives {w}")));
        }
        let iters = sizes.fma_iters;
        let (t, noise) = time(ctx, timer, &name, |s| {
            let out =
                if prec == FmaPrecision::F64 { FmaOut::F64(&mut out64) } else { FmaOut::F32(&mut out32) };
            probes.fma(s, g, prec, seed, iters, false, out, &mut clk)
        })?;
        let v = stream.to_vec(&clk)?;
        let clock_mhz = if v[1] > 0 { Some(v[0] as f64 / v[1] as f64 * 1e3) } else { None };
        let flops = cost::fma_probe(slots as u64, u64::from(iters), prec.lanes()).flops as f64;
        let mut ce = ceiling(
            &name,
            CeilingKind::Compute,
            flops / t,
            noise,
            prec.kernel().name(),
            format!(
                "{} chains x {} steps x {iters} per slot, {} slots",
                cost::FMA_CHAINS,
                cost::FMA_INNER,
                slots
            ),
            format!("{n_check} slots bit-equal to the CPU reference (stored under a run-time flag)"),
        );
        ce.sm_clock_mhz = clock_mhz;
        ce.peak_at_clock = clock_mhz.and_then(|m| rl::fma_peak(&report.device, prec.name(), m));
        ce.datasheet = rl::fma_peak(&report.device, prec.name(), report.device.sm_clock_mhz);
        // Only FP32 is drawn as a roof with FP64: the 16-bit FMA roofs sit
        // above FP32 and the tensor roofs far above; all are in the table.
        ce.roof = matches!(prec, FmaPrecision::F32 | FmaPrecision::F64);
        report.ceilings.push(ce);
    }
    Ok(())
}

fn tensor(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    stream: &Stream,
    sms: u32,
    sizes: &Sizes,
    report: &mut RooflineReport,
) -> Result<(), Failure> {
    use reference::probes::TcFormat;
    let probes = match TensorKernels::load(&ctx.device) {
        Ok(p) => p,
        Err(e) => {
            report
                .notes
                .push(format!("tensor ceilings not measured: the sm_90a module does not load here ({e})"));
            return Ok(());
        }
    };
    let words = |bytes: &[u8]| -> Vec<u32> {
        bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    };
    let mut clk = DeviceBuffer::<u64>::zeroed(stream, 2)?;
    let mut out = DeviceBuffer::<f32>::alloc(stream, cost::TC_OUT_ELEMS as usize)?;
    for (i, (format, prec, k)) in
        [(TcFormat::Bf16, "BF16", 16u64), (TcFormat::F16, "FP16", 16), (TcFormat::E4m3, "FP8", 32)]
            .into_iter()
            .enumerate()
    {
        let name = format!("{prec} tensor");
        let seed = 0x7e45_0000 + i as u32 * 2 + std::process::id() % 1024 * 8;
        let (ha, hb) = (format.random(64, seed), format.random(256, seed + 1));
        let a = DeviceBuffer::from_slice(stream, &words(&ha))?;
        let b = DeviceBuffer::from_slice(stream, &words(&hb))?;
        // The check: two iterations from one block, against the CPU.
        stream.fill_bytes(&mut out, 0xff)?;
        probes.probe(
            stream,
            Grid { blocks: 1, threads: 128 },
            format,
            &a,
            &b,
            2,
            true,
            &mut out,
            &mut clk,
        )?;
        let got = stream.to_vec(&out)?;
        let want = reference::probes::tensor(format, &ha, &hb, 2);
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0f32, |m, e| if e.is_nan() || m.is_nan() { f32::NAN } else { m.max(e) });
        // FP8 wgmma accumulates with fewer bits than f32: a wider band.
        let tolerance = if format == TcFormat::E4m3 { 5e-3 } else { 1e-3 };
        if worst.is_nan() || worst > tolerance * scale {
            return Err(Failure::Check(format!(
                "{name}: max |error| {worst} against the CPU reference's max {scale}"
            )));
        }
        let g = Grid { blocks: sms, threads: 256 };
        let iters = if k == 32 { sizes.tc_iters / 2 } else { sizes.tc_iters }.max(1);
        let (t, noise) = time(ctx, timer, &name, |s| {
            probes.probe(s, g, format, &a, &b, iters, false, &mut out, &mut clk)
        })?;
        let v = stream.to_vec(&clk)?;
        let clock_mhz = if v[1] > 0 { Some(v[0] as f64 / v[1] as f64 * 1e3) } else { None };
        let flops = cost::tensor_probe(u64::from(sms), 2, u64::from(iters), k).flops as f64;
        let mut ce = ceiling(
            &name,
            CeilingKind::Compute,
            flops / t,
            noise,
            match format {
                TcFormat::Bf16 => "tc_bf16_probe",
                TcFormat::F16 => "tc_f16_probe",
                TcFormat::E4m3 => "tc_e4m3_probe",
            },
            format!(
                "wgmma m64n256k{k}, A and B in shared memory, random operands, {sms} blocks x 2 warpgroups x {iters} x 4"
            ),
            format!("64x256 result within {tolerance:e} of the CPU reference ({worst:.2e} of {scale:.3})"),
        );
        ce.sm_clock_mhz = clock_mhz;
        ce.peak_at_clock = clock_mhz.and_then(|m| rl::tensor_peak(&report.device, prec, m));
        ce.datasheet = rl::tensor_peak(&report.device, prec, report.device.sm_clock_mhz);
        ce.roof = format != TcFormat::F16;
        report.ceilings.push(ce);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn caches(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    stream: &Stream,
    probes: &RooflineKernels,
    sms: u32,
    sizes: &Sizes,
    report: &mut RooflineReport,
) -> Result<(), Failure> {
    let seed = 0x00c0_ffeeu32;
    let largest = sizes.l2_sweep.iter().chain(&sizes.l1_sweep).copied().max().unwrap_or(1 << 20);
    let words = (largest / 16 * 4) as usize;
    let mut buf = DeviceBuffer::<u32>::alloc(stream, words)?;
    ctx.kernels.fill_pattern(stream, &mut buf, seed)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    let g = Grid { blocks: sms * 8, threads: 256 };
    for (l2_only, sweep, name) in [(true, &sizes.l2_sweep, "L2"), (false, &sizes.l1_sweep, "L1")] {
        let mut points = Vec::new();
        for &ws in sweep.iter() {
            let ws_words = (ws / 16 * 4) as usize;
            let ws4 = (ws_words / 4) as u64;
            let n = sizes.cache_loads.div_ceil(ws4) * ws4;
            let view = buf.slice(..ws_words)?;
            let (t, _) = time(ctx, timer, &format!("{name} sweep"), |s| {
                probes.cache_read(s, g, &view, n, l2_only, &mut sum)
            })?;
            // The check: one more launch from zero, against the reference.
            stream.fill_bytes(&mut sum, 0)?;
            probes.cache_read(stream, g, &view, n, l2_only, &mut sum)?;
            let got = stream.to_vec(&sum)?[0];
            let want = pattern_sum(seed, ws_words as u64).wrapping_mul(n / ws4);
            if got != want {
                return Err(Failure::Check(format!(
                    "{name} sweep at {ws} B: sum {got:#x}, CPU reference {want:#x}"
                )));
            }
            points.push(SweepPoint { x: ws as f64, y: cost::cache_read(n).bytes_read as f64 / t, y2: None });
        }
        let plateaus = rl::plateaus(&points, 0.1, 3);
        // The level's ceiling: the first plateau (smallest working sets),
        // else the best point.
        let value = plateaus
            .first()
            .map(|p| p.value)
            .unwrap_or_else(|| points.iter().map(|p| p.y).fold(0.0, f64::max));
        let range =
            plateaus.first().map_or(String::new(), |p| format!("plateau {} B to {} B", p.from_x, p.to_x));
        report.ceilings.push(ceiling(
            name,
            CeilingKind::Memory(if l2_only { MemoryLevel::L2 } else { MemoryLevel::L1 }),
            value,
            0.0,
            "cache_read",
            format!("{} loads, {range}", if l2_only { "ld.global.cg" } else { "plain" }),
            "every point's sum = CPU reference".into(),
        ));
        // The L2 over whole working sets: the widest plateau above 1 MB that
        // ends within the L2 (the first plateau is the small-set one).
        let l2_size = report.device.l2_bytes.max(0) as f64;
        let whole = plateaus
            .iter()
            .filter(|p| l2_only && p.to_x <= l2_size && p.from_x > 1.0e6)
            .max_by(|a, b| (a.to_x / a.from_x).total_cmp(&(b.to_x / b.from_x)));
        if let Some(p) = whole {
            let mut c = ceiling(
                "L2 (whole working sets)",
                CeilingKind::Memory(MemoryLevel::L2),
                p.value,
                0.0,
                "cache_read",
                format!("ld.global.cg loads, plateau {} B to {} B", p.from_x, p.to_x),
                "every point's sum = CPU reference".into(),
            );
            c.roof = false;
            report.ceilings.push(c);
        }
        report.sweeps.push(Sweep {
            name: format!(
                "{name} working-set sweep ({} loads)",
                if l2_only { "ld.global.cg" } else { "plain" }
            ),
            x_label: "working set (bytes)".into(),
            y_label: "bytes/s".into(),
            points,
            plateaus,
            on_roofline: false,
        });
    }
    drop((buf, sum));

    // Shared memory: two blocks of 1024 threads per SM (64 KiB of the SM's
    // shared memory).
    let g = Grid { blocks: sms * 2, threads: 1024 };
    let iters = sizes.smem_iters;
    let want = reference::probes::smem_read(iters, seed);
    let mut out = DeviceBuffer::<u32>::zeroed(stream, 2)?;
    let magic = want.wrapping_add(1);
    let (t, noise) = time(ctx, timer, "shared", |s| probes.smem_read(s, g, iters, seed, magic, &mut out))?;
    let got = stream.to_vec(&out)?[0];
    if got != want {
        return Err(Failure::Check(format!("shared: thread 0 summed {got:#x}, CPU reference {want:#x}")));
    }
    let bytes = cost::smem_traffic(g.total(), u64::from(iters)) as f64;
    report.ceilings.push(ceiling(
        "shared",
        CeilingKind::Memory(MemoryLevel::Shared),
        bytes / t,
        noise,
        "smem_read",
        format!("LDS.128 conflict-free, {} blocks of {}", g.blocks, g.threads),
        "thread 0's sum = CPU reference".into(),
    ));
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn intensity(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    stream: &Stream,
    probes: &RooflineKernels,
    sms: u32,
    sizes: &Sizes,
    report: &mut RooflineReport,
) -> Result<(), Failure> {
    let n = sizes.intensity_array / 4 / 4 * 4;
    let host: Vec<f32> = (0..n).map(|i| ((i % 997) as f32) / 997.0 - 0.25).collect();
    let input = DeviceBuffer::from_slice(stream, &host)?;
    let mut out = DeviceBuffer::<f32>::alloc(stream, n)?;
    let g = Grid { blocks: sms * 8, threads: 256 };
    let mut points = Vec::new();
    for &fmas in &sizes.fmas {
        stream.fill_bytes(&mut out, 0xff)?;
        let (t, _) = time(ctx, timer, "intensity", |s| probes.intensity(s, g, &input, &mut out, fmas))?;
        // Check every element for short chains, a spread sample for long ones.
        let got = stream.to_vec(&out)?;
        let step = if fmas <= 4 { 1 } else { (n / 4096).max(1) };
        for i in (0..n).step_by(step) {
            let mut w = [0f32];
            reference::probes::intensity_f32(&host[i..=i], &mut w, fmas);
            if got[i].to_bits() != w[0].to_bits() {
                return Err(Failure::Check(format!(
                    "intensity sweep at {fmas} FMAs: out[{i}] = {} but the reference gives {}",
                    got[i], w[0]
                )));
            }
        }
        let c = cost::intensity_f32((n / 4) as u64, u64::from(fmas));
        points.push(SweepPoint { x: c.intensity(), y: c.flops as f64 / t, y2: Some(c.bytes() as f64 / t) });
    }
    let best_bw = points.iter().filter_map(|p| p.y2).fold(0.0, f64::max);
    let best_flops = points.iter().map(|p| p.y).fold(0.0, f64::max);
    let ridge = if best_bw > 0.0 { best_flops / best_bw } else { f64::NAN };
    report.notes.push(format!(
        "intensity sweep (FP32, {} MiB arrays): best {}B/s and {}FLOP/s; empirical ridge {ridge:.1} FLOP/byte",
        sizes.intensity_array >> 20,
        rl::si(best_bw),
        rl::si(best_flops)
    ));
    report.sweeps.push(Sweep {
        name: format!("FP32 intensity sweep (empirical ridge {ridge:.1} FLOP/B)"),
        x_label: "FLOP/byte".into(),
        y_label: "FLOP/s".into(),
        points,
        plateaus: Vec::new(),
        on_roofline: true,
    });
    Ok(())
}

fn place_kernels(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    stream: &Stream,
    sizes: &Sizes,
    report: &mut RooflineReport,
) -> Result<(), Failure> {
    let k = &ctx.kernels;
    let n = sizes.place / 4 / 4 * 4;
    let mib = sizes.place >> 20;
    let host_x: Vec<f32> = (0..n).map(|i| (i % 1013) as f32 * 0.5 - 7.0).collect();
    let host_y: Vec<f32> = (0..n).map(|i| (i % 977) as f32 * 0.25 + 1.0).collect();
    let x = DeviceBuffer::from_slice(stream, &host_x)?;
    let y = DeviceBuffer::from_slice(stream, &host_y)?;
    let mut out = DeviceBuffer::<f32>::alloc(stream, n)?;
    let level = MemoryLevel::Hbm;
    let place = |report: &mut RooflineReport, name: String, c: cost::Cost, t: f64| -> Result<(), Failure> {
        let p = rl::place(
            report,
            &PlaceRequest {
                name: &name,
                flops: c.flops,
                bytes: c.bytes(),
                seconds: t,
                level,
                compute: "FP32 FMA",
            },
        )
        .map_err(rl_err)?;
        report.placements.push(p);
        Ok(())
    };
    let bits_equal = |got: &[f32], want: &[f32], what: &str| -> Result<(), Failure> {
        match got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()) {
            Some(i) => Err(Failure::Check(format!(
                "{what}: out[{i}] = {} but the reference gives {}",
                got[i], want[i]
            ))),
            None => Ok(()),
        }
    };

    stream.fill_bytes(&mut out, 0xff)?;
    let (t, _) = time(ctx, timer, "scale_f32", |s| k.scale(s, &x, &mut out, 1.5))?;
    let mut want = vec![0f32; n];
    reference::scale_f32(&host_x, &mut want, 1.5);
    bits_equal(&stream.to_vec(&out)?, &want, "scale_f32")?;
    place(report, format!("elementwise scale_f32 ({mib} MiB arrays)"), cost::scale_f32(n as u64), t)?;

    stream.fill_bytes(&mut out, 0xff)?;
    let (t, _) = time(ctx, timer, "add_f32", |s| k.add(s, &x, &y, &mut out))?;
    reference::add_f32(&host_x, &host_y, &mut want);
    bits_equal(&stream.to_vec(&out)?, &want, "add_f32")?;
    place(report, format!("elementwise add_f32 ({mib} MiB arrays)"), cost::add_f32(n as u64), t)?;

    stream.fill_bytes(&mut out, 0xff)?;
    let (t, _) = time(ctx, timer, "triad_f32", |s| k.triad(s, &mut out, &x, &y, 3.0))?;
    reference::triad_f32(&mut want, &host_x, &host_y, 3.0);
    bits_equal(&stream.to_vec(&out)?, &want, "triad_f32")?;
    place(report, format!("elementwise triad_f32 ({mib} MiB arrays)"), cost::triad_f32(n as u64), t)?;
    drop((x, y, out, want));

    let seed = 77u32;
    let mut a = DeviceBuffer::<u32>::alloc(stream, n)?;
    let mut b = DeviceBuffer::<u32>::alloc(stream, n)?;
    let (t, _) = time(ctx, timer, "fill_pattern_u32", |s| k.fill_pattern(s, &mut a, seed))?;
    check_pattern(ctx, stream, &a, seed, "fill_pattern_u32")?;
    place(report, format!("fill_pattern_u32 ({mib} MiB)"), cost::fill_pattern_u32(n as u64), t)?;
    let mut bad = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    let (t, _) = time(ctx, timer, "check_pattern_u32", |s| k.check_pattern(s, &a, seed, &mut bad))?;
    place(report, format!("check_pattern_u32 ({mib} MiB)"), cost::check_pattern_u32(n as u64), t)?;
    stream.fill_bytes(&mut b, 0xff)?;
    let (t, _) = time(ctx, timer, "copy_u32x4", |s| k.copy(s, &a, &mut b))?;
    check_pattern(ctx, stream, &b, seed, "copy_u32x4")?;
    place(report, format!("elementwise copy_u32x4 ({mib} MiB arrays)"), cost::copy_u32x4((n / 4) as u64), t)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    let (t, _) = time(ctx, timer, "read_sum_u32x4", |s| k.read_sum(s, &a, &mut sum))?;
    place(report, format!("read_sum_u32x4 ({mib} MiB)"), cost::read_sum_u32x4((n / 4) as u64), t)?;
    let mut c = DeviceBuffer::<u32>::alloc(stream, n)?;
    let (t, _) = time(ctx, timer, "mix_u32", |s| k.mix(s, &a, &b, &mut c, 5))?;
    let got = stream.to_vec(&c)?;
    if let Some(i) = (0..n).step_by(97).find(|&i| {
        got[i] != reference::mix(reference::pattern(seed, i as u64), reference::pattern(seed, i as u64), 5)
    }) {
        return Err(Failure::Check(format!("mix_u32: out[{i}] differs from the CPU reference")));
    }
    place(report, format!("elementwise mix_u32 ({mib} MiB arrays)"), cost::mix_u32(n as u64), t)?;
    let (t, _) = time(ctx, timer, "bump_u32", |s| k.bump(s, &mut c, 1))?;
    place(report, format!("elementwise bump_u32 ({mib} MiB)"), cost::bump_u32(n as u64), t)?;
    // The floors of part 1: what a tiny kernel can never beat.
    let small = DeviceBuffer::<f32>::zeroed(stream, 1024)?;
    let mut small_out = DeviceBuffer::<f32>::zeroed(stream, 1024)?;
    let r = Bench::new("launch floor")
        .modes(&[Mode::Hot, Mode::Batch])
        .settings(probe_settings(&ctx.settings))
        .run_on(timer, None, |s| k.scale(s, &small, &mut small_out, 2.0))?;
    let us = |m: Mode| r.mode(m).map_or("–".to_owned(), |x| format!("{:.2} µs", x.median() * 1e6));
    report.notes.push(format!(
        "floors: a 1024-element scale_f32 takes {} a launch back to back (hot) and {} queued behind the spin \
         gate (batch): no kernel runs faster than this, however little it does",
        us(Mode::Hot),
        us(Mode::Batch)
    ));
    report.notes.push(
        "placed kernels: each result checked against its CPU reference (mix_u32 on every 97th element; \
         check_pattern_u32, read_sum_u32x4 and bump_u32 run after the kernels they check, unchecked themselves)"
            .into(),
    );
    Ok(())
}
