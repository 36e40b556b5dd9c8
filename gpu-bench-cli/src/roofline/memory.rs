//! Phase 4: the L2 working-set sweep (grid-stride, in the best of the L2
//! candidates; with `--tune` also in per-block slices over the sets that fit
//! in the L2), the L1 sweep and shared memory.

use super::*;
use gpu_bench::roofline::TuneRow;
use kernels::{LoadFlavor, ReadVariant};

/// An L2 probe: `cache_read`'s grid-stride `.cg` loads (`None`) or a
/// read-tuning shape, in `blocks per SM` blocks of `threads`.
type L2Probe = (Option<ReadVariant>, u32, u32);

/// The L2 probe's candidates, from the read-tuning sweep of 2026-11-25 on an
/// H100 (`gpu-bench roofline --tune-reads`, docs/results/
/// 2026-11-25-roofline-tuning.md): over whole working sets (12–24 MiB) every
/// L2-served shape with 32 KiB or more in flight a SM read 7.6–7.7 TB/s —
/// 4, 8 or 16 loads a thread, `.cg`/`.nc`/`.lu`/`L2::256B`, the bulk copy
/// engine — so the main job measures the old probe and the best three of
/// the sweep at one whole working set and sweeps in the fastest. (`.ca`
/// loads over per-block slices read 24 TB/s there, but a 24 MiB set's
/// slices fit in each SM's L1: that is the L1, not a candidate.)
const L2_CANDIDATES: [L2Probe; 4] = [
    (None, 8, 256),
    (Some(ReadVariant::Loads { in_flight: 4, flavor: LoadFlavor::Cg, slices: false }), 12, 128),
    (Some(ReadVariant::Loads { in_flight: 16, flavor: LoadFlavor::Cg, slices: false }), 4, 128),
    (Some(ReadVariant::Bulk { stages: 2, chunk_kib: 32 }), 2, 256),
];

/// The kernel and the probe's configuration, in words.
fn l2_describe((v, per_sm, threads): L2Probe) -> (&'static str, String) {
    match v {
        None => ("cache_read", format!("ld.global.cg loads, {per_sm} blocks/SM of {threads}")),
        Some(v @ ReadVariant::Loads { .. }) => {
            ("read_tune", format!("{}, {per_sm} blocks/SM of {threads}", v.name()))
        }
        Some(v) => ("read_bulk", format!("{}, {per_sm} blocks/SM of {threads}", v.name())),
    }
}

pub(super) fn run(run: &mut Run<'_>, report: &mut RooflineReport) -> Result<(), Failure> {
    let Run { ctx, timer, stream, probes, sms, sizes, tune, .. } = run;
    let tune = *tune;
    let (ctx, timer, stream, probes, sms, sizes) = (*ctx, timer, &*stream, &*probes, *sms, &*sizes);
    let seed = 0x00c0_ffeeu32;
    let largest = sizes.l2_sweep.iter().chain(&sizes.l1_sweep).copied().max().unwrap_or(1 << 20);
    let words = (largest / 16 * 4) as usize;
    let mut buf = DeviceBuffer::<u32>::alloc(stream, words)?;
    ctx.kernels.fill_pattern(stream, &mut buf, seed)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    let g = Grid { blocks: sms * 8, threads: 256 };
    let l2_size = report.device.l2_bytes.max(0) as f64;
    let l2_grid = |(_, per_sm, threads): L2Probe| Grid { blocks: sms * per_sm, threads };
    // The L2 probe: each candidate at the largest sweep point within a
    // quarter of the L2 (a whole working set, 12.5 MiB on an H100), checked;
    // the fastest runs the sweep (all rows in the report's tuning table).
    let l2_probe = {
        let ws = sizes
            .l2_sweep
            .iter()
            .copied()
            .filter(|&w| l2_size <= 0.0 || w as f64 <= l2_size / 4.0)
            .max()
            .or_else(|| sizes.l2_sweep.first().copied())
            .unwrap_or(1 << 20);
        let ws_words = (ws / 16 * 4) as usize;
        let ws4 = (ws_words / 4) as u64;
        let n = sizes.cache_loads.div_ceil(ws4) * ws4;
        let view = buf.slice(..ws_words)?;
        let want = pattern_sum(seed, ws_words as u64).wrapping_mul(n / ws4);
        let mut best = (L2_CANDIDATES[0], 0.0);
        for cand in L2_CANDIDATES {
            let launch = |s: &Stream, sum: &mut DeviceBuffer<u64>| match cand.0 {
                None => probes.cache_read(s, l2_grid(cand), &view, n, CacheHint::L2, sum),
                Some(v) => probes.read_tuned(s, l2_grid(cand), v, &view, n, sum),
            };
            let (t, _) = time(ctx, timer, "L2 probe", |s| launch(s, &mut sum))?;
            stream.fill_bytes(&mut sum, 0)?;
            launch(stream, &mut sum)?;
            let got = stream.to_vec(&sum)?[0];
            let (kernel, config) = l2_describe(cand);
            if got != want {
                return Err(Failure::Check(format!(
                    "L2 probe {kernel} {config} at {ws} B: sum {got:#x}, CPU reference {want:#x}"
                )));
            }
            let value = cost::cache_read(n).bytes_read as f64 / t;
            report.tuning.push(TuneRow {
                probe: "L2 (whole working sets)".into(),
                config: format!("{kernel} {config}, {ws} B"),
                value,
            });
            if value > best.1 {
                best = (cand, value);
            }
        }
        best.0
    };
    // The per-block-slice order over the working sets that fit in the L2
    // (past it both orders read the HBM), under `--tune` only: on an H100
    // (docs/results/2026-11-25-h100-roofline-2) it read 6.80 TB/s over
    // whole working sets against the grid-stride order's 7.79, and added
    // 4.7 s to the main job.
    let in_l2: Vec<u64> = if tune {
        sizes.l2_sweep.iter().copied().filter(|&ws| l2_size <= 0.0 || ws as f64 <= l2_size).collect()
    } else {
        Vec::new()
    };
    for (hint, sweep, name) in [
        (CacheHint::L2, &sizes.l2_sweep, "L2"),
        (CacheHint::L2Slices, &in_l2, "L2"),
        (CacheHint::Plain, &sizes.l1_sweep, "L1"),
    ] {
        if sweep.is_empty() {
            continue;
        }
        let l2_only = hint != CacheHint::Plain;
        let (kernel, loads) = match hint {
            CacheHint::Plain => ("cache_read", "plain loads".to_owned()),
            CacheHint::L2 => l2_describe(l2_probe),
            CacheHint::L2Slices => {
                ("cache_read", "ld.global.cg loads, each block re-reading its own slice".to_owned())
            }
        };
        let mut points = Vec::new();
        for &ws in sweep.iter() {
            let ws_words = (ws / 16 * 4) as usize;
            let ws4 = (ws_words / 4) as u64;
            let n = sizes.cache_loads.div_ceil(ws4) * ws4;
            let view = buf.slice(..ws_words)?;
            let launch = |s: &Stream, sum: &mut DeviceBuffer<u64>| match (hint, l2_probe.0) {
                (CacheHint::L2, Some(v)) => probes.read_tuned(s, l2_grid(l2_probe), v, &view, n, sum),
                (CacheHint::L2, None) => probes.cache_read(s, l2_grid(l2_probe), &view, n, hint, sum),
                _ => probes.cache_read(s, g, &view, n, hint, sum),
            };
            let (t, _) = time(ctx, timer, &format!("{name} sweep"), |s| launch(s, &mut sum))?;
            // The check: one more launch from zero, against the reference.
            stream.fill_bytes(&mut sum, 0)?;
            launch(stream, &mut sum)?;
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
        // else the best point; the per-block-slice order adds none of its
        // own (it has only its whole-working-set figure below).
        if hint != CacheHint::L2Slices {
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
                kernel,
                format!("{loads}, {range}"),
                "every point's sum = CPU reference".into(),
            ));
        }
        // The L2 over whole working sets: the widest plateau above 1 MB that
        // ends within the L2 (the first plateau is the small-set one).
        let whole = plateaus
            .iter()
            .filter(|p| l2_only && p.to_x <= l2_size && p.from_x > 1.0e6)
            .max_by(|a, b| (a.to_x / a.from_x).total_cmp(&(b.to_x / b.from_x)));
        if let Some(p) = whole {
            let mut c = ceiling(
                if hint == CacheHint::L2 {
                    "L2 (whole working sets)"
                } else {
                    "L2 (whole working sets, per-block slices)"
                },
                CeilingKind::Memory(MemoryLevel::L2),
                p.value,
                0.0,
                kernel,
                format!("{loads}, plateau {} B to {} B", p.from_x, p.to_x),
                "every point's sum = CPU reference".into(),
            );
            c.roof = false;
            report.ceilings.push(c);
        }
        report.sweeps.push(Sweep {
            name: format!("{name} working-set sweep ({loads})"),
            x_label: "working set (bytes)".into(),
            y_label: "bytes/s".into(),
            points,
            plateaus,
            on_roofline: false,
            ceiling: None,
            ridge: None,
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
