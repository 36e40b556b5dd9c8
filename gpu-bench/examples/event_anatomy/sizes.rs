//! Sections (f) and (g) of the event anatomy: gpu-bench's hot and graph
//! modes against raw driver pairs around raw launches of `scale_f32` at
//! truth's sizes (see the example's docs).

use super::{ROUNDS, Raw, Res, Row, Timing, pairs, pairs_n};
use gpu_bench::{Bench, Mode, Settings, Timer};
use gpu_sync::DeviceBuffer;
use gpu_sync::cuda_sys::result::{graph, launch, stream};
use gpu_sync::cuda_sys::{BorrowedFunction, BorrowedStream, CUdeviceptr};
use std::ffi::c_void;

/// A raw `cuLaunchKernel` of `scale_f32` (`func`: `out[i] = 2 · in[i]` for
/// `i < n`) from `xp` into `op` on `s`, with the grid `cfg` (truth's tiled
/// grid for `n`).
///
/// # Safety
/// `func` is the elementwise module's `scale_f32` (parameters: two device
/// pointers, an `f32`, a `u64`); `xp` and `op` are device allocations of at
/// least `n` `f32` each in the context of `s`, alive until the launch has
/// completed (the launch is not tracked: the caller synchronizes `s`
/// before they are freed).
unsafe fn raw_scale(
    func: BorrowedFunction<'_>,
    cfg: gpu_sync::LaunchConfig,
    xp: CUdeviceptr,
    op: CUdeviceptr,
    n: usize,
    s: BorrowedStream<'_>,
) -> Res<()> {
    let (mut i, mut o, mut a, mut len) = (xp, op, 2.0f32, n as u64);
    let mut params = [
        (&raw mut i).cast::<c_void>(),
        (&raw mut o).cast::<c_void>(),
        (&raw mut a).cast::<c_void>(),
        (&raw mut len).cast::<c_void>(),
    ];
    // SAFETY: scale_f32(const float* in, float* out, float a, u64 n) takes
    // these four values; whatever its grid, it touches in[0..n] and
    // out[0..n] only, which the caller vouches for (this function's
    // contract).
    unsafe { launch::launch_kernel(func, [cfg.grid.x, 1, 1], [cfg.block.x, 1, 1], 0, s, &mut params) }?;
    Ok(())
}

/// (f): at each of truth's sizes ([`gpu_bench::TRUTH_SIZES`]), a raw pair around a raw launch of
/// `scale_f32` (`func`, truth's tiled grid), a raw pair around a raw
/// `cuGraphLaunch` of a graph of that launch, and gpu-bench's hot and graph
/// modes on the tracked launch of the same kernel on the same buffers; the
/// rows, and returns per size a note with hot − raw and graph − raw graph
/// against max(64 ns, 0.5 % of the raw pair). At most `max` elements.
///
/// The raw pairs are taken half before and half after gpu-bench's modes,
/// so both sides sample the GPU over the same stretch of time; ours − raw
/// is the shift of the samples ([`gpu_bench::stats::shift`], the median of
/// every difference), which the verdict reads, beside the difference of
/// the medians: small kernels run at one of two levels at random on an
/// H200, and two medians of the same two levels can fall on different
/// ones (docs/results/h200/2026-11-28-placement.md).
pub(super) fn sizes(
    timer: &mut Timer,
    raw: &Raw<'_>,
    k: &kernels::Kernels,
    func: BorrowedFunction<'_>,
    settings: Settings,
    max: usize,
    rows: &mut Vec<Row>,
) -> Res<Vec<String>> {
    let mut notes = Vec::new();
    let caller = timer.stream().clone();
    let x = DeviceBuffer::<f32>::zeroed(&caller, max)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&caller, max)?;
    let (xp, op) = (x.as_raw(), out.as_raw());
    let nothing = &mut |_: BorrowedStream<'_>| Ok(());
    for &(n, label) in gpu_bench::TRUTH_SIZES.iter().filter(|(n, _)| *n <= max) {
        let cfg = k.grid_tiles((n as u64).div_ceil(4));
        let launch = |s: BorrowedStream<'_>| -> Res<()> {
            // SAFETY: `xp` and `op` are `x` and `out`, n <= max elements
            // each, which outlive every launch: the timer's stream and the
            // capture stream are synchronized, and the graphs dropped,
            // before them.
            unsafe { raw_scale(func, cfg, xp, op, n, s) }
        };
        let g = raw.graph(&mut |s| launch(s))?;
        let mut raw_pairs = |timer: &mut Timer, pair: &mut Vec<f64>, pair_graph: &mut Vec<f64>| -> Res<()> {
            pair.extend(pairs_n(ROUNDS / 2, timer, raw, Timing::Around, &mut |s, _| launch(s), nothing)?);
            pair_graph.extend(pairs_n(
                ROUNDS / 2,
                timer,
                raw,
                Timing::Around,
                &mut |s, _| Ok(graph::launch(&g, s)?),
                nothing,
            )?);
            Ok(())
        };
        let (mut pair, mut pair_graph) = (Vec::new(), Vec::new());
        raw_pairs(timer, &mut pair, &mut pair_graph)?;
        let rec = Bench::new("scale_f32").modes(&[Mode::Hot, Mode::Graph]).settings(settings).run_on(
            timer,
            None,
            |s| k.scale(s, &x.slice(..n)?, &mut out.slice_mut(..n)?, 2.0),
        )?;
        raw_pairs(timer, &mut pair, &mut pair_graph)?;
        stream::synchronize(raw.capture.as_borrowed())?;
        drop(g);
        let ours = |m: Mode| {
            rec.modes
                .iter()
                .find(|r| r.mode == m)
                .map(|r| r.samples.iter().map(|x| x * 1e9).collect::<Vec<f64>>())
        };
        let (hot, graph_mode) = (ours(Mode::Hot).unwrap_or_default(), ours(Mode::Graph).unwrap_or_default());
        let median = |v: &[f64]| gpu_bench::stats::median(v);
        let verdict = |ours: &[f64], base: &[f64]| {
            let limit = (0.005 * median(base)).max(64.0);
            let shift = gpu_bench::stats::shift(base, ours).round() + 0.0;
            format!(
                "{:.0} ns − {:.0}: shift {shift:+.0} ns (limit {limit:.0}: {}), medians {:+.0}",
                median(ours),
                median(base),
                if shift <= limit { "within" } else { "OVER" },
                (median(ours) - median(base)).round() + 0.0,
            )
        };
        notes.push(format!(
            "(f) scale_f32 {label}: hot − raw pair + raw launch, {}; graph − raw pair + cuGraphLaunch, {}",
            verdict(&hot, &pair),
            verdict(&graph_mode, &pair_graph),
        ));
        rows.push(Row { phase: "A", case: format!("(f) raw pair + raw scale_f32 {label}"), v: pair });
        rows.push(Row {
            phase: "A",
            case: format!("(f) raw pair + cuGraphLaunch(scale_f32 {label})"),
            v: pair_graph,
        });
        rows.push(Row { phase: "A", case: format!("(f) gpu-bench hot on scale_f32 {label}"), v: hot });
        rows.push(Row {
            phase: "A",
            case: format!("(f) gpu-bench graph on scale_f32 {label}"),
            v: graph_mode,
        });
    }
    caller.synchronize()?;
    Ok(notes)
}

/// Graph execs per size in (g).
const EXECS: usize = 3;

/// (g): see the module docs; at most `max` elements. Per size and exec a
/// note: the exec's nodes,
/// the raw pair's median around a raw launch of it, and for gpu-sync's
/// execs hot mode on its tracked launch with the shift against the raw
/// pairs (taken half before, half after).
pub(super) fn execs(
    timer: &mut Timer,
    raw: &Raw<'_>,
    k: &kernels::Kernels,
    func: BorrowedFunction<'_>,
    settings: Settings,
    max: usize,
    rows: &mut Vec<Row>,
) -> Res<Vec<String>> {
    let mut notes = Vec::new();
    let caller = timer.stream().clone();
    let x = DeviceBuffer::<f32>::zeroed(&caller, max)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&caller, max)?;
    let (xp, op) = (x.as_raw(), out.as_raw());
    let nothing = &mut |_: BorrowedStream<'_>| Ok(());
    let median = |v: &[f64]| gpu_bench::stats::median(v);
    for &(n, label) in gpu_bench::TRUTH_SIZES.iter().filter(|(n, _)| *n <= max) {
        let cfg = k.grid_tiles((n as u64).div_ceil(4));
        let launch = |s: BorrowedStream<'_>| -> Res<()> {
            // SAFETY: as in `sizes`: `xp` and `op` are `x` and `out`, n <=
            // max elements each, which outlive every launch (the timer's
            // and the capture stream are synchronized before they drop).
            unsafe { raw_scale(func, cfg, xp, op, n, s) }
        };
        for e in 0..EXECS {
            // A raw capture and exec of the launch.
            let g = raw.graph(&mut |s| launch(s))?;
            let raw_exec = pairs(timer, raw, Timing::Around, &mut |s, _| Ok(graph::launch(&g, s)?), nothing)?;
            stream::synchronize(raw.capture.as_borrowed())?;
            drop(g);
            // gpu-sync's capture and exec of the tracked launch, as graph
            // mode makes them.
            let captured = timer
                .stream()
                .capture(|c| k.scale(c.stream(), &x.slice(..n)?, &mut out.slice_mut(..n)?, 2.0))?;
            let nodes = captured.node_count()?;
            let exec = captured.instantiate()?;
            // SAFETY: a live exec of the installed table, alive until the
            // end of this iteration (after the timer's stream is drained);
            // launched raw only from this thread, never while its tracked
            // launch runs (the calls below follow one another). What it
            // touches (x, out) outlives it.
            let ours_raw =
                unsafe { gpu_sync::cuda_sys::BorrowedGraphExec::borrow_raw(raw.drv, exec.as_raw()) };
            let mut around = |timer: &mut Timer| {
                pairs_n(
                    ROUNDS / 2,
                    timer,
                    raw,
                    Timing::Around,
                    &mut |s, _| Ok(graph::launch(ours_raw, s)?),
                    nothing,
                )
            };
            let mut base = around(timer)?;
            let rec =
                Bench::new("graph exec")
                    .modes(&[Mode::Hot])
                    .settings(settings)
                    .run_on(timer, None, |s| exec.launch(s))?;
            base.extend(around(timer)?);
            caller.synchronize()?;
            timer.stream().synchronize()?;
            let hot: Vec<f64> = rec
                .modes
                .iter()
                .find(|r| r.mode == Mode::Hot)
                .map(|r| r.samples.iter().map(|x| x * 1e9).collect())
                .unwrap_or_default();
            let shift = gpu_bench::stats::shift(&base, &hot).round() + 0.0;
            let limit = (0.005 * median(&base)).max(64.0);
            notes.push(format!(
                "(g) scale_f32 {label}, exec {e}: raw capture's exec, raw pair {:.0} ns; gpu-sync's exec \
                 ({nodes} node{}), raw pair {:.0} ns, gpu-bench hot on its tracked launch {:.0}: shift \
                 {shift:+.0} ns (limit {limit:.0}: {})",
                median(&raw_exec),
                if nodes == 1 { "" } else { "s" },
                median(&base),
                median(&hot),
                if shift <= limit { "within" } else { "OVER" },
            ));
            rows.push(Row { phase: "A", case: format!("(g) raw exec {e}, scale_f32 {label}"), v: raw_exec });
            rows.push(Row {
                phase: "A",
                case: format!("(g) gpu-sync exec {e} raw, scale_f32 {label}"),
                v: base,
            });
            rows.push(Row {
                phase: "A",
                case: format!("(g) gpu-sync exec {e} hot, scale_f32 {label}"),
                v: hot,
            });
        }
    }
    caller.synchronize()?;
    Ok(notes)
}
