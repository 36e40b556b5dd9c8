//! `gpu-bench roofline --tune-reads` (hidden): the read-tuning sweep behind
//! the L2 and HBM-read probes, in one process. Stage 1 times every load
//! shape (`kernels::ReadVariant`: 4/8/16 loads in flight × load flavor ×
//! grid-stride or per-block slices, and the bulk copy engine's stages ×
//! chunk sizes) in several grids at one size per level; stage 2 times the
//! best of stage 1, and the probes the main job ran before, at every size
//! (L2 working sets 4 to 48 MiB; HBM arrays 1 to 8 GiB). Every launch's sum
//! is checked against the CPU reference once per configuration. Prints a
//! compact table; with `--out DIR` also writes `DIR/tune.csv` (every row).

use super::{CACHE_LOADS, Run, pattern_sum, time_short};
use crate::common::Failure;
use gpu_bench::render::write_text;
use gpu_sync::{DeviceBuffer, Stream};
use kernels::{CacheHint, Grid, HBM_BULK, LoadFlavor, ReadVariant, hbm_variant_name};
use std::fmt::Write as _;
use std::path::PathBuf;

/// What one row timed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    /// `read_tune_u*` / `read_bulk`.
    Tuned(ReadVariant),
    /// `cache_read` (the main job's L2 probe before this sweep).
    Cache(CacheHint),
    /// `hbm_read` variant (the main job's HBM read probe).
    Hbm(u32),
}

impl Shape {
    fn name(&self) -> String {
        match self {
            Shape::Tuned(v) => v.name(),
            Shape::Cache(h) => format!("cache_read {h:?} (main job before)"),
            Shape::Hbm(v) => format!("hbm_read {} (main job)", hbm_variant_name(*v)),
        }
    }

    /// 16-byte loads in flight a thread (0 for the bulk engine and the
    /// old probes, whose in-flight depth ptxas chose).
    fn in_flight(&self) -> u32 {
        match self {
            Shape::Tuned(ReadVariant::Loads { in_flight, .. }) => *in_flight,
            _ => 0,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Row {
    level: &'static str,
    stage: u8,
    bytes: u64,
    shape: Shape,
    per_sm: u32,
    threads: u32,
    value: f64,
}

/// Blocks a SM and threads for a shape: grids each kernel's registers let
/// be resident at once (u4: 1536 threads a SM; u8: 1152; u16: 736; the
/// MANIFEST's ptxas lines), and for HBM one many-block grid.
fn grids(shape: Shape, hbm: bool) -> Vec<(u32, u32)> {
    match shape {
        Shape::Tuned(ReadVariant::Loads { in_flight: 4, .. }) => {
            let mut g = vec![(6, 256), (3, 512), (2, 768), (12, 128), (4, 256), (2, 256)];
            if hbm {
                g.push((64, 256));
            }
            g
        }
        Shape::Tuned(ReadVariant::Loads { in_flight: 8, .. }) => {
            let mut g = vec![(4, 256), (2, 512), (1, 1024), (8, 128), (2, 256), (1, 256)];
            if hbm {
                g.push((32, 256));
            }
            g
        }
        Shape::Tuned(ReadVariant::Loads { .. }) => {
            let mut g = vec![(2, 256), (1, 512), (4, 128), (1, 256)];
            if hbm {
                g.push((16, 256));
            }
            g
        }
        Shape::Tuned(v @ ReadVariant::Bulk { .. }) => {
            let smem = v.shared_bytes().max(1);
            [(1, 256), (2, 256), (1, 512), (2, 512), (4, 256), (4, 128)]
                .into_iter()
                .filter(|&(per_sm, _)| per_sm * smem <= 224 << 10)
                .collect()
        }
        Shape::Cache(_) => vec![(8, 256)],
        Shape::Hbm(HBM_BULK) => vec![(2, 512)],
        Shape::Hbm(_) => vec![(4, 256)],
    }
}

/// Every tuned shape of stage 1; the HBM one leaves out the flavors that
/// can only matter for re-reads (`ca`, 8-byte).
fn shapes(hbm: bool) -> Vec<Shape> {
    let mut v = Vec::new();
    for in_flight in [4, 8, 16] {
        for flavor in LoadFlavor::ALL {
            if hbm && matches!(flavor, LoadFlavor::Ca | LoadFlavor::Cg8) {
                continue;
            }
            for slices in [false, true] {
                v.push(Shape::Tuned(ReadVariant::Loads { in_flight, flavor, slices }));
            }
        }
    }
    for stages in [2, 4, 8, 12] {
        for chunk_kib in [4, 8, 16, 32] {
            if stages * chunk_kib <= 192 {
                v.push(Shape::Tuned(ReadVariant::Bulk { stages, chunk_kib }));
            }
        }
    }
    v
}

/// One level's sweep over its sizes (`sizes[stage1]` for stage 1).
struct Level<'a> {
    name: &'static str,
    sizes: &'a [u64],
    stage1: usize,
    /// `n` loads for a working set of `ws4` uint4.
    loads: &'a dyn Fn(u64) -> u64,
    baseline: &'a [Shape],
    keep: usize,
}

/// Runs the sweep and prints the tables.
///
/// # Errors
/// [`Failure::Check`] when a sum differs from the CPU reference; a driver
/// error.
pub(super) fn run(run: &mut Run<'_>, out: Option<&PathBuf>) -> Result<i32, Failure> {
    let Run { ctx, timer, stream, probes, sms, .. } = run;
    let (ctx, stream, probes, sms) = (*ctx, &*stream, &*probes, *sms);
    let scaled = ctx.quick || ctx.sim;
    let mib: u64 = 1 << 20;
    let (l2_sets, hbm_sizes): (Vec<u64>, Vec<u64>) = if scaled {
        (vec![64 << 10, 256 << 10], vec![mib, 2 * mib])
    } else {
        (
            [4, 12, 24, 36, 48].iter().map(|m| m * mib).collect(),
            [1024, 2048, 4096, 8192].iter().map(|m| m * mib).collect(),
        )
    };
    let min_time = if scaled { 0.001 } else { 0.02 };
    let seed = 0x00c0_ffeeu32;
    let mut rows: Vec<Row> = Vec::new();

    let cache_loads = if scaled { 1 << 14 } else { CACHE_LOADS };
    let l2_loads = move |ws4: u64| cache_loads.div_ceil(ws4) * ws4;
    let hbm_loads = |ws4: u64| ws4;
    let levels = [
        Level {
            name: "L2",
            sizes: &l2_sets,
            stage1: 2.min(l2_sets.len() - 1),
            loads: &l2_loads,
            baseline: &[Shape::Cache(CacheHint::L2)],
            keep: 10,
        },
        Level {
            name: "HBM",
            sizes: &hbm_sizes,
            stage1: 2.min(hbm_sizes.len() - 1),
            loads: &hbm_loads,
            baseline: &[Shape::Hbm(10), Shape::Hbm(HBM_BULK)],
            keep: 6,
        },
    ];
    for level in &levels {
        let hbm = level.name == "HBM";
        let largest = level.sizes.iter().copied().max().unwrap_or(mib);
        let words = (largest / 4) as usize;
        let mut buf = DeviceBuffer::<u32>::alloc(stream, words)?;
        ctx.kernels.fill_pattern(stream, &mut buf, seed)?;
        let mut sum = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        // The CPU reference of each size, computed once.
        let mut reference: Vec<(u64, u64)> = Vec::new();
        // One configuration at one size: timed, then checked.
        let mut measure = |shape: Shape, bytes: u64, (per_sm, threads): (u32, u32), stage: u8| {
            let ws_words = (bytes / 4) as usize;
            let ws4 = bytes / 16;
            let n = (level.loads)(ws4);
            let view = buf.slice(..ws_words)?;
            let grid = Grid { blocks: sms * per_sm, threads };
            let launch = |s: &Stream, sum: &mut DeviceBuffer<u64>| match shape {
                Shape::Tuned(v) => probes.read_tuned(s, grid, v, &view, n, sum),
                Shape::Cache(h) => probes.cache_read(s, grid, &view, n, h, sum),
                Shape::Hbm(v) => probes.hbm_read(s, grid, v, &view, sum),
            };
            let label = format!("{} {}", level.name, shape.name());
            let (t, _) = time_short(ctx, timer, &label, min_time, |s| launch(s, &mut sum))?;
            stream.fill_bytes(&mut sum, 0)?;
            launch(stream, &mut sum)?;
            let got = stream.to_vec(&sum)?[0];
            let whole = match reference.iter().find(|(b, _)| *b == bytes) {
                Some(&(_, v)) => v,
                None => {
                    let v = pattern_sum(seed, ws_words as u64);
                    reference.push((bytes, v));
                    v
                }
            };
            let want = whole.wrapping_mul(n / ws4);
            if got != want {
                return Err(Failure::Check(format!(
                    "{label}, {per_sm} blocks/SM of {threads}, {bytes} B: sum {got:#x}, CPU reference {want:#x}"
                )));
            }
            let row =
                Row { level: level.name, stage, bytes, shape, per_sm, threads, value: (16 * n) as f64 / t };
            eprintln!(
                "tune: {} {:>8} {:<48} {:>2} x {:<4} {:>6.2} TB/s",
                row.level,
                size(bytes),
                shape.name(),
                per_sm,
                threads,
                row.value / 1e12
            );
            Ok::<Row, Failure>(row)
        };
        // Stage 1: every shape in its grids at one size.
        let at = level.sizes[level.stage1];
        let mut stage1 = Vec::new();
        for &shape in level.baseline.iter().chain(&shapes(hbm)) {
            for g in grids(shape, hbm) {
                match measure(shape, at, g, 1) {
                    Ok(r) => stage1.push(r),
                    // A launch the device refuses (shared memory): noted,
                    // not fatal; a wrong sum is.
                    Err(Failure::Check(m)) => return Err(Failure::Check(m)),
                    Err(e) => eprintln!("tune: {} {} {g:?}: {e}", level.name, shape.name()),
                }
            }
        }
        // Stage 2: the best configurations and the baselines at every size.
        let mut order: Vec<&Row> = stage1.iter().filter(|r| !level.baseline.contains(&r.shape)).collect();
        order.sort_by(|a, b| b.value.total_cmp(&a.value));
        let mut picks: Vec<(Shape, (u32, u32))> = stage1
            .iter()
            .filter(|r| level.baseline.contains(&r.shape))
            .map(|r| (r.shape, (r.per_sm, r.threads)))
            .collect();
        // Each shape at its best grid, best first: the `keep` best, then the
        // best of each load flavor, of the per-block slices and of the bulk
        // engine where those are not among them.
        let mut per_shape: Vec<&Row> = Vec::new();
        for r in order {
            if !per_shape.iter().any(|p| p.shape == r.shape) {
                per_shape.push(r);
            }
        }
        let mut chosen: Vec<&Row> = per_shape.iter().take(level.keep).copied().collect();
        let family = |r: &Row| match r.shape {
            Shape::Tuned(ReadVariant::Loads { flavor, slices, .. }) => (flavor.name(), slices),
            _ => ("bulk", false),
        };
        for r in &per_shape {
            let (f, sl) = family(r);
            if !chosen.iter().any(|c| family(c).0 == f) || (sl && !chosen.iter().any(|c| family(c).1)) {
                chosen.push(r);
            }
        }
        picks.extend(chosen.iter().map(|r| (r.shape, (r.per_sm, r.threads))));
        rows.extend(stage1.iter().copied());
        for (shape, g) in picks {
            for &bytes in level.sizes {
                let r = if bytes == at {
                    stage1.iter().find(|r| r.shape == shape && (r.per_sm, r.threads) == g).copied()
                } else {
                    Some(measure(shape, bytes, g, 2)?)
                };
                if let Some(mut r) = r {
                    r.stage = 2;
                    rows.push(r);
                }
            }
        }
    }

    let text = tables(
        &rows,
        &levels.iter().map(|l| (l.name, l.sizes.to_vec(), l.sizes[l.stage1])).collect::<Vec<_>>(),
        sms,
    );
    print!("{text}");
    if let Some(dir) = out {
        let mut csv =
            String::from("level,stage,bytes,shape,loads_in_flight,blocks_per_sm,threads,bytes_per_s\n");
        for r in &rows {
            let _ = writeln!(
                csv,
                "{},{},{},\"{}\",{},{},{},{:.6e}",
                r.level,
                r.stage,
                r.bytes,
                r.shape.name(),
                r.shape.in_flight(),
                r.per_sm,
                r.threads,
                r.value
            );
        }
        write_text(&dir.join("tune.csv"), &csv).map_err(Failure::Io)?;
        write_text(&dir.join("tune.md"), &text).map_err(Failure::Io)?;
    }
    Ok(0)
}

/// The compact tables: per level, stage 1's best 25 (and the baselines) at
/// its size, then stage 2 (configuration × size).
fn tables(rows: &[Row], levels: &[(&str, Vec<u64>, u64)], sms: u32) -> String {
    let mut s = String::new();
    for (name, sizes, at) in levels {
        let mut one: Vec<&Row> = rows.iter().filter(|r| r.level == *name && r.stage == 1).collect();
        one.sort_by(|a, b| b.value.total_cmp(&a.value));
        let _ = writeln!(
            s,
            "\n## {name}, stage 1: {} configurations at {} (best 25, and the main job's probes)\n",
            one.len(),
            size(*at)
        );
        s.push_str("| rank | shape | blocks/SM x threads | bytes in flight a SM (nominal) | TB/s |\n");
        s.push_str("| --- | --- | --- | --- | --- |\n");
        for (i, r) in one.iter().enumerate() {
            let base = matches!(r.shape, Shape::Cache(_) | Shape::Hbm(_));
            if i < 25 || base {
                let flight = match r.shape {
                    Shape::Tuned(v @ ReadVariant::Bulk { .. }) => {
                        u64::from(v.shared_bytes()) * u64::from(r.per_sm)
                    }
                    _ => 16 * u64::from(r.shape.in_flight()) * u64::from(r.per_sm) * u64::from(r.threads),
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {} x {} | {} | {:.2} |",
                    i + 1,
                    r.shape.name(),
                    r.per_sm,
                    r.threads,
                    if flight > 0 { size(flight) } else { "–".into() },
                    r.value / 1e12
                );
            }
        }
        let _ = writeln!(s, "\n## {name}, stage 2: TB/s by size ({sms} SMs)\n");
        let _ = write!(s, "| shape | blocks/SM x threads |");
        for b in sizes {
            let _ = write!(s, " {} |", size(*b));
        }
        s.push('\n');
        s.push_str("| --- | --- |");
        for _ in sizes {
            s.push_str(" --- |");
        }
        s.push('\n');
        let mut seen: Vec<(Shape, u32, u32)> = Vec::new();
        for r in rows.iter().filter(|r| r.level == *name && r.stage == 2) {
            let key = (r.shape, r.per_sm, r.threads);
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let _ = write!(s, "| {} | {} x {} |", r.shape.name(), r.per_sm, r.threads);
            for b in sizes {
                let v = rows
                    .iter()
                    .find(|x| {
                        x.level == *name
                            && x.stage == 2
                            && (x.shape, x.per_sm, x.threads) == key
                            && x.bytes == *b
                    })
                    .map_or("–".into(), |x| format!("{:.2}", x.value / 1e12));
                let _ = write!(s, " {v} |");
            }
            s.push('\n');
        }
    }
    s
}

/// Bytes in words: whole MiB as MiB, else KiB.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}
