//! Phase 1: the HBM ceilings (read, copy, triad with `roofline.cu`'s
//! 16-byte-load variants) and the driver's D2D copy as a reference line.

use super::{Run, ceiling, check_pattern, pattern_sum, time};
use crate::common::{Ctx, Failure};
use gpu_bench::roofline::{CeilingKind, MemoryLevel, RooflineReport, TuneRow};
use gpu_sync::{DeviceBuffer, Stream};
use kernels::{Grid, HBM_BULK, HBM_VARIANTS, ReadVariant, cost, hbm_variant_name, reference};

/// An HBM probe's configuration: (variant, blocks per SM, threads a block);
/// 0 blocks per SM: one block per tile (per bulk chunk), however large the
/// array.
type Config = (u32, u32, u32);

/// The main job measures each probe in its candidates and keeps the best
/// (all rows are in the report's tuning table); `--tune` starts from the
/// first. From the H100 searches of 2026-11-25 (docs/results/
/// 2026-11-25-h100-roofline, "Second pass"): read is flat at 3.10–3.11
/// TB/s over 1 GiB across every variant with 4+ loads in flight (the bulk
/// copy engine included) at 2 blocks of 512 or 4 of 256 a SM, 3.13 over
/// 4 GiB; copy and triad gain with shorter blocks, best with one block per
/// tile (copy: 2 loads of 256 threads, an 8 KiB tile; triad: 4 loads), which
/// the scheduler refills as they finish.
///
/// Read's third candidate, [`READ_BULK_2X32`], is the best of the
/// read-tuning sweep of 2026-11-25 (`gpu-bench roofline --tune-reads`,
/// docs/results/2026-11-25-roofline-tuning.md: 256 read shapes and grids
/// over 4 GiB, every one with 64 KiB or more in flight a SM at 3.10–3.13
/// TB/s): the bulk copy engine in 2 stages of 32 KiB, one block of 512 a SM
/// (`read_bulk`).
///
/// Its fourth, the same shape at two blocks of 512 a SM, is the best of the
/// same sweep on the H200 (docs/results/2026-11-26-h200/call9-tune-reads:
/// 4.58 TB/s over 4 GiB against 4.53–4.54 for the first two). Its fifth,
/// the same shape in many short blocks (512 a SM of 128 threads, about two
/// chunks each, the scheduler refilling the SMs as they finish), is the
/// best of a grid sweep on the H100 (docs/results/2026-11-26-explore.md:
/// 3.185 TB/s over 4 GiB against 3.13 at one or two blocks a SM).
const READ_CONFIGS: [Config; 5] = [
    (10, 4, 256),
    (HBM_BULK, 2, 512),
    (READ_BULK_2X32, 1, 512),
    (READ_BULK_2X32, 2, 512),
    (READ_BULK_2X32, 512, 128),
];

/// A variant number past `hbm_read`'s own (`HBM_VARIANTS`): the read is
/// [`RooflineKernels::read_tuned`](kernels::RooflineKernels::read_tuned) in
/// [`tuned_read`]'s shape, one streaming pass over the array.
const READ_BULK_2X32: u32 = 1000;

/// The read-tuning shape of a variant number past `hbm_read`'s own.
fn tuned_read(v: u32) -> Option<ReadVariant> {
    (v == READ_BULK_2X32).then_some(ReadVariant::Bulk { stages: 2, chunk_kib: 32 })
}

/// Variant numbers past `hbm_copy`'s own: the copy is
/// [`RooflineKernels::copy_bulk`](kernels::RooflineKernels::copy_bulk) in
/// the pipeline of [`COPY_BULK`]`[v - COPY_BULK_BASE]`.
const COPY_BULK_BASE: u32 = 2000;

/// The bulk-copy pipelines (stages, KiB a stage) `--tune` tries for the
/// copy.
const COPY_BULK: [(u32, u32); 7] = [(2, 32), (4, 16), (3, 32), (2, 16), (4, 32), (6, 16), (8, 8)];

/// The bulk-copy pipeline of a variant number past `hbm_copy`'s own.
fn tuned_copy(v: u32) -> Option<(u32, u32)> {
    v.checked_sub(COPY_BULK_BASE).and_then(|i| COPY_BULK.get(i as usize).copied())
}

/// Copy's candidates: `hbm_copy`'s best three on the H100 of 2026-11-25,
/// then the bulk copy engine ([`COPY_BULK`]) in many short blocks (512 a SM
/// of 128 threads), the shape that won the read. At one to three blocks a
/// SM the bulk copy lost on both GPUs (2.86–2.88 TB/s against 3.05 on the
/// H100, 3.57–3.95 against 4.18 on the H200); in many short blocks, 3 x 32
/// KiB read 3.02 on the H100, above `hbm_copy`'s 3.01 and the driver's copy
/// in the same run (docs/results/2026-11-26-explore.md).
const COPY_CONFIGS: [Config; 5] =
    [(13, 0, 256), (12, 0, 256), (11, 0, 256), (COPY_BULK_BASE + 2, 512, 128), (COPY_BULK_BASE, 512, 128)];
const TRIAD_CONFIGS: [Config; 2] = [(10, 0, 256), (13, 0, 256)];

/// The grids `--tune` tries for the best variant and for [`HBM_BULK`]:
/// (blocks per SM, threads).
const TUNE_GRIDS: [(u32, u32); 16] = [
    (1, 256),
    (2, 256),
    (2, 512),
    (4, 128),
    (4, 256),
    (6, 128),
    (8, 256),
    (16, 256),
    (32, 256),
    (64, 256),
    (128, 256),
    (256, 256),
    (512, 256),
    (512, 128),
    (0, 256),
    (1, 1024),
];

/// uint4 a block moves per tile in variant `v` (a bulk chunk: 512).
fn tile_quads(v: u32, threads: u32) -> u64 {
    let loads: u64 = match v {
        HBM_BULK => return 512,
        18..=23 => [2, 2, 4, 8, 4, 8][(v - 18) as usize],
        _ => [2, 4, 8][(v % 3) as usize],
    };
    loads * u64::from(threads)
}

fn grid(sms: u32, (v, per_sm, threads): Config, n4: u64) -> Grid {
    let blocks = if per_sm == 0 {
        u32::try_from(n4.div_ceil(tile_quads(v, threads))).unwrap_or(u32::MAX >> 1)
    } else {
        sms.saturating_mul(per_sm)
    };
    Grid { blocks: blocks.max(1), threads }
}

fn describe((v, per_sm, threads): Config) -> String {
    if let Some((stages, kib)) = tuned_copy(v) {
        return format!("bulk copy engine, {stages} x {kib} KiB stages, {per_sm} blocks/SM of {threads}");
    }
    if let Some(t) = tuned_read(v) {
        return format!("{}, {per_sm} blocks/SM of {threads}", t.name());
    }
    if per_sm == 0 {
        format!("{}, one block of {threads} per tile", hbm_variant_name(v))
    } else {
        format!("{}, {per_sm} blocks/SM of {threads}", hbm_variant_name(v))
    }
}

/// Times `run` (which moves `bytes`) in each configuration to try and
/// returns the fastest, each recorded in the report's tuning table. Without
/// `tune`: the candidates. With it: every variant at the first candidate's
/// grid, then every grid of [`TUNE_GRIDS`] for the best variant.
#[allow(clippy::too_many_arguments)]
fn search(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    sms: u32,
    n4: u64,
    probe: &str,
    candidates: &[Config],
    tune: bool,
    bytes: f64,
    run: &mut dyn FnMut(&Stream, Grid, u32) -> gpu_sync::Result<()>,
    report: &mut RooflineReport,
) -> Result<Config, Failure> {
    let mut best = (candidates[0], 0.0);
    let mut try_one = |cfg: Config, report: &mut RooflineReport, best: &mut (Config, f64)| {
        let (t, _) = time(ctx, timer, probe, |s| run(s, grid(sms, cfg, n4), cfg.0))?;
        let label = if tune { probe.to_owned() } else { format!("{probe} (main job's candidates)") };
        report.tuning.push(TuneRow { probe: label, config: describe(cfg), value: bytes / t });
        if bytes / t > best.1 {
            *best = (cfg, bytes / t);
        }
        Ok::<(), Failure>(())
    };
    if tune {
        let (_, per_sm, threads) = candidates[0];
        for v in 0..HBM_VARIANTS {
            try_one((v, per_sm, threads), report, &mut best)?;
        }
        let v = best.0.0;
        let first = best.0;
        for w in if v == HBM_BULK || probe == "HBM triad" { vec![v] } else { vec![v, HBM_BULK] } {
            for (per_sm, threads) in TUNE_GRIDS {
                // hbm_triad's 80 registers a thread do not fit 1024 threads.
                if (w, per_sm, threads) != first && !(probe == "HBM triad" && threads > 512) {
                    try_one((w, per_sm, threads), report, &mut best)?;
                }
            }
        }
        if probe == "HBM copy" {
            // Every bulk-copy pipeline at 1 to 4 blocks a SM that fit the
            // SM's 227 KiB of shared memory together, and in many short
            // blocks (512 a SM, resident as many as fit).
            for (i, &(stages, kib)) in COPY_BULK.iter().enumerate() {
                for per_sm in [1, 2, 3, 4, 512u32] {
                    if per_sm == 512 || per_sm * stages * kib <= 227 {
                        try_one((COPY_BULK_BASE + i as u32, per_sm, 128), report, &mut best)?;
                    }
                }
            }
        }
    } else {
        for &cfg in candidates {
            try_one(cfg, report, &mut best)?;
        }
    }
    Ok(best.0)
}

/// Runs the phase.
///
/// # Errors
/// [`Failure::Check`] when a probe's result differs from the CPU
/// reference; a driver error.
pub(super) fn run(run: &mut Run<'_>, report: &mut RooflineReport) -> Result<(), Failure> {
    let Run { ctx, timer, stream, probes, sms, sizes, tune, .. } = run;
    let (ctx, timer, stream, probes, sms, sizes, tune) =
        (*ctx, timer, &*stream, &*probes, *sms, &*sizes, *tune);
    let words = sizes.array / 16 * 4;
    let n4 = words as u64 / 4;
    let seed = 0x5eed_2026u32;
    let datasheet = report.device.theoretical_bandwidth_gbs * 1e9;
    let mut src = DeviceBuffer::<u32>::alloc(stream, words)?;
    ctx.kernels.fill_pattern(stream, &mut src, seed)?;
    let mut dst = DeviceBuffer::<u32>::alloc(stream, words)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    let expected = pattern_sum(seed, words as u64);
    let push = |report: &mut RooflineReport,
                name: &str,
                value: f64,
                noise: f64,
                kernel: &str,
                config: String,
                check: String| {
        let mut ce =
            ceiling(name, CeilingKind::Memory(MemoryLevel::Hbm), value, noise, kernel, config, check);
        ce.datasheet = Some(datasheet);
        ce.roof = kernel != "cuMemcpyDtoDAsync";
        report.ceilings.push(ce);
    };

    // read
    let c = cost::read_sum_u32x4(n4);
    let read = |s: &Stream, g: Grid, v: u32, sum: &mut DeviceBuffer<u64>| match tuned_read(v) {
        Some(t) => probes.read_tuned(s, g, t, &src, n4, sum),
        None => probes.hbm_read(s, g, v, &src, sum),
    };
    let cfg = search(
        ctx,
        timer,
        sms,
        n4,
        "HBM read",
        &READ_CONFIGS,
        tune,
        c.bytes() as f64,
        &mut |s, g, v| read(s, g, v, &mut sum),
        report,
    )?;
    let (t, noise) = time(ctx, timer, "HBM read", |s| read(s, grid(sms, cfg, n4), cfg.0, &mut sum))?;
    stream.fill_bytes(&mut sum, 0)?;
    read(stream, grid(sms, cfg, n4), cfg.0, &mut sum)?;
    let got = stream.to_vec(&sum)?[0];
    if got != expected {
        return Err(Failure::Check(format!("HBM read: device sum {got:#x}, CPU reference {expected:#x}")));
    }
    let config = format!("{}, {} MiB", describe(cfg), sizes.array >> 20);
    push(
        report,
        "HBM read",
        c.bytes() as f64 / t,
        noise,
        if tuned_read(cfg.0).is_some() { "read_bulk" } else { "hbm_read" },
        config,
        format!("sum = CPU reference {expected:#x}"),
    );

    // copy
    let c = cost::copy_u32x4(n4);
    let copy = |s: &Stream, g: Grid, v: u32, dst: &mut DeviceBuffer<u32>| match tuned_copy(v) {
        Some((stages, kib)) => probes.copy_bulk(s, g, stages, kib, &src, dst),
        None => probes.hbm_copy(s, g, v, &src, dst),
    };
    let cfg = search(
        ctx,
        timer,
        sms,
        n4,
        "HBM copy",
        &COPY_CONFIGS,
        tune,
        c.bytes() as f64,
        &mut |s, g, v| copy(s, g, v, &mut dst),
        report,
    )?;
    stream.fill_bytes(&mut dst, 0xff)?;
    let (t, noise) = time(ctx, timer, "HBM copy", |s| copy(s, grid(sms, cfg, n4), cfg.0, &mut dst))?;
    check_pattern(ctx, stream, &dst, seed, "HBM copy")?;
    let check = "every word matches the pattern (poisoned before)";
    let kernel = if tuned_copy(cfg.0).is_some() { "copy_bulk" } else { "hbm_copy" };
    push(report, "HBM copy", c.bytes() as f64 / t, noise, kernel, describe(cfg), check.into());

    // The driver's D2D copy: a reference line, not a roof of ours.
    stream.fill_bytes(&mut dst, 0xff)?;
    let (t, noise) = time(ctx, timer, "driver D2D copy", |s| s.copy(&src, &mut dst))?;
    check_pattern(ctx, stream, &dst, seed, "driver D2D copy")?;
    push(
        report,
        "driver D2D copy",
        c.bytes() as f64 / t,
        noise,
        "cuMemcpyDtoDAsync",
        "the driver's own copy".into(),
        check.into(),
    );
    drop((src, dst, sum));

    // triad, on floats
    let host_b: Vec<f32> = (0..words).map(|i| (i % 1021) as f32 * 0.25).collect();
    let host_c: Vec<f32> = (0..words).map(|i| ((i * 7) % 1009) as f32 - 500.0).collect();
    let b = DeviceBuffer::from_slice(stream, &host_b)?;
    let cc = DeviceBuffer::from_slice(stream, &host_c)?;
    let mut a = DeviceBuffer::<f32>::alloc(stream, words)?;
    let scalar = 3.0f32;
    let c = cost::triad_f32(words as u64);
    let cfg = search(
        ctx,
        timer,
        sms,
        n4,
        "HBM triad",
        &TRIAD_CONFIGS,
        tune,
        c.bytes() as f64,
        &mut |s, g, v| probes.hbm_triad(s, g, v, &mut a, &b, &cc, scalar),
        report,
    )?;
    stream.fill_bytes(&mut a, 0xff)?;
    let (t, noise) = time(ctx, timer, "HBM triad", |s| {
        probes.hbm_triad(s, grid(sms, cfg, n4), cfg.0, &mut a, &b, &cc, scalar)
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
    push(
        report,
        "HBM triad",
        c.bytes() as f64 / t,
        noise,
        "hbm_triad",
        describe(cfg),
        "every result bit-equal to the CPU reference".into(),
    );
    Ok(())
}
