//! Sections (f) and (g) of the event anatomy: gpu-bench's hot and graph
//! modes against raw driver pairs around raw launches of `scale_f32` at
//! truth's sizes (see the example's docs).

use super::{ROUNDS, Raw, Res, Row, Timing, pairs};
use gpu_bench::{Bench, Mode, Settings, Timer};
use gpu_sync::DeviceBuffer;
use gpu_sync::cuda_sys::result::{graph, launch, stream};
use gpu_sync::cuda_sys::{BorrowedFunction, BorrowedStream};
use std::ffi::c_void;
use std::mem::ManuallyDrop;

/// `scale_f32` on buffers of its own, launched raw or through the kernels
/// crate over their first `n` elements with truth's tiled grid. Dropping
/// it waits for the device (raw launches are not tracked), so no launch
/// outlives the buffers.
pub(super) struct Scale<'a> {
    k: &'a kernels::Kernels,
    /// The elementwise module's `scale_f32`, loaded in the buffers' context.
    func: BorrowedFunction<'a>,
    x: ManuallyDrop<DeviceBuffer<f32>>,
    out: ManuallyDrop<DeviceBuffer<f32>>,
}

impl<'a> Scale<'a> {
    /// Buffers of `max` elements on `stream`'s device for `func`.
    ///
    /// # Safety
    /// `func` is the elementwise module's `scale_f32`, loaded in
    /// `stream`'s context: [`Scale::raw`] launches it with that kernel's four
    /// parameters and relies on it touching `in[0..n]` and `out[0..n]` only.
    pub(super) unsafe fn new(
        stream: &gpu_sync::Stream,
        k: &'a kernels::Kernels,
        func: BorrowedFunction<'a>,
        max: usize,
    ) -> Res<Scale<'a>> {
        let x = DeviceBuffer::<f32>::zeroed(stream, max)?;
        let out = DeviceBuffer::<f32>::zeroed(stream, max)?;
        Ok(Scale { k, func, x: ManuallyDrop::new(x), out: ManuallyDrop::new(out) })
    }

    /// The sizes of truth's list that fit.
    fn sizes(&self) -> impl Iterator<Item = (usize, &'static str)> + use<'_> {
        gpu_bench::TRUTH_SIZES.iter().copied().filter(|(n, _)| *n <= self.x.len())
    }

    /// A raw `cuLaunchKernel`: `out[i] = 2 · x[i]` for `i < n`, on `s` (a
    /// stream of the buffers' context).
    fn raw(&self, n: usize, s: BorrowedStream<'_>) -> Res<()> {
        if n > self.x.len() {
            return Err(format!("{n} elements: the buffers hold {}", self.x.len()).into());
        }
        let cfg = self.k.grid_tiles((n as u64).div_ceil(4));
        let (mut i, mut o, mut a, mut len) = (self.x.as_raw(), self.out.as_raw(), 2.0f32, n as u64);
        let mut params = [
            (&raw mut i).cast::<c_void>(),
            (&raw mut o).cast::<c_void>(),
            (&raw mut a).cast::<c_void>(),
            (&raw mut len).cast::<c_void>(),
        ];
        // SAFETY: `func` is scale_f32(const float* in, float* out, float a,
        // u64 n) (`Scale::new`'s safety contract), given these four values; whatever
        // its grid, it touches in[0..n] and out[0..n] only, inside `x` and
        // `out` (n <= their length, checked above), which live until `Drop`
        // has waited for every launch of the device.
        unsafe {
            launch::launch_kernel(self.func, [cfg.grid.x, 1, 1], [cfg.block.x, 1, 1], 0, s, &mut params)
        }?;
        Ok(())
    }

    /// The same work through the kernels crate (tracked) on `s`.
    fn tracked(&mut self, n: usize, s: &gpu_sync::Stream) -> gpu_sync::Result<()> {
        self.k.scale(s, &self.x.slice(..n)?, &mut self.out.slice_mut(..n)?, 2.0)
    }
}

impl Drop for Scale<'_> {
    /// Waits for the device, so the raw launches on the buffers are done
    /// before they are freed; if the wait fails the buffers are leaked
    /// (the error printed).
    fn drop(&mut self) {
        match self.x.device().synchronize() {
            Ok(_) => {
                // SAFETY: `x` and `out` are not used again: this is `Drop`.
                unsafe { (ManuallyDrop::drop(&mut self.x), ManuallyDrop::drop(&mut self.out)) };
            }
            Err(e) => eprintln!("event_anatomy: leaking the buffers: waiting for the device failed: {e}"),
        }
    }
}

/// A mode's samples in `rec`, ns (empty when it has none).
fn samples_ns(rec: &gpu_bench::Record, mode: Mode) -> Vec<f64> {
    rec.modes
        .iter()
        .find(|r| r.mode == mode)
        .map(|r| r.samples.iter().map(|x| x * 1e9).collect())
        .unwrap_or_default()
}

/// Ours against the raw samples `base`: the shift of the samples
/// ([`gpu_bench::stats::shift`]) against max(64 ns, 0.5 % of the raw
/// median), with both medians and their difference.
fn verdict(ours: &[f64], base: &[f64]) -> String {
    let median = |v: &[f64]| gpu_bench::stats::median(v);
    let limit = (0.005 * median(base)).max(64.0);
    let shift = gpu_bench::stats::shift(base, ours).round() + 0.0;
    format!(
        "{:.0} ns − {:.0}: shift {shift:+.0} ns (limit {limit:.0}: {}), medians {:+.0}",
        median(ours),
        median(base),
        if shift <= limit { "within" } else { "OVER" },
        (median(ours) - median(base)).round() + 0.0,
    )
}

/// (f): at each of truth's sizes that `scale` holds
/// ([`gpu_bench::TRUTH_SIZES`]), a raw pair around a raw launch of
/// `scale_f32`, a raw pair around a raw `cuGraphLaunch` of a graph of that
/// launch, and gpu-bench's hot and graph modes on the tracked launch of the
/// same kernel on the same buffers; the rows, and returns per size a note
/// with hot − raw and graph − raw graph ([`verdict`]).
///
/// The raw pairs are taken half before and half after gpu-bench's modes,
/// so both sides sample the GPU over the same stretch of time; the verdict
/// reads the shift of the samples (the median of every difference) beside
/// the difference of the medians: small kernels run at one of two levels
/// at random on an H200, and two medians of the same two levels can fall on
/// different ones (docs/results/h200/2026-11-28-placement.md).
pub(super) fn sizes(
    timer: &mut Timer,
    raw: &Raw<'_>,
    scale: &mut Scale<'_>,
    settings: Settings,
    rows: &mut Vec<Row>,
) -> Res<Vec<String>> {
    let mut notes = Vec::new();
    let nothing = &mut |_: BorrowedStream<'_>| Ok(());
    for (n, label) in scale.sizes().collect::<Vec<_>>() {
        let g = raw.graph(&mut |s| scale.raw(n, s))?;
        let (mut pair, mut pair_graph, mut hot, mut graph_mode) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for half in 0..2 {
            if half == 1 {
                let rec = Bench::new("scale_f32")
                    .modes(&[Mode::Hot, Mode::Graph])
                    .settings(settings)
                    .run_on(timer, None, |s| scale.tracked(n, s))?;
                (hot, graph_mode) = (samples_ns(&rec, Mode::Hot), samples_ns(&rec, Mode::Graph));
            }
            pair.extend(pairs(ROUNDS / 2, timer, raw, Timing::Around, &mut |s, _| scale.raw(n, s), nothing)?);
            let launch_g = &mut |s: BorrowedStream<'_>, _| Ok(graph::launch(&g, s)?);
            pair_graph.extend(pairs(ROUNDS / 2, timer, raw, Timing::Around, launch_g, nothing)?);
        }
        stream::synchronize(raw.capture.as_borrowed())?;
        drop(g);
        notes.push(format!(
            "(f) scale_f32 {label}: hot − raw pair + raw launch, {}; graph − raw pair + cuGraphLaunch, {}",
            verdict(&hot, &pair),
            verdict(&graph_mode, &pair_graph),
        ));
        for (case, v) in [
            (format!("(f) raw pair + raw scale_f32 {label}"), pair),
            (format!("(f) raw pair + cuGraphLaunch(scale_f32 {label})"), pair_graph),
            (format!("(f) gpu-bench hot on scale_f32 {label}"), hot),
            (format!("(f) gpu-bench graph on scale_f32 {label}"), graph_mode),
        ] {
            rows.push(Row { phase: "A", case, v });
        }
    }
    Ok(notes)
}

/// Graph execs per size in (g).
const EXECS: usize = 3;

/// (g): see the module docs; truth's sizes that `scale` holds. Per size and
/// exec a note: the raw pair's median around a raw launch of a raw
/// capture's exec, and of gpu-sync's exec (its nodes), with gpu-bench's hot
/// mode on the tracked launch of that same exec ([`verdict`] against the
/// raw pairs, taken half before, half after).
pub(super) fn execs(
    timer: &mut Timer,
    raw: &Raw<'_>,
    scale: &mut Scale<'_>,
    settings: Settings,
    rows: &mut Vec<Row>,
) -> Res<Vec<String>> {
    let mut notes = Vec::new();
    let nothing = &mut |_: BorrowedStream<'_>| Ok(());
    for (n, label) in scale.sizes().collect::<Vec<_>>() {
        for e in 0..EXECS {
            // A raw capture and exec of the launch.
            let g = raw.graph(&mut |s| scale.raw(n, s))?;
            let raw_exec =
                pairs(ROUNDS, timer, raw, Timing::Around, &mut |s, _| Ok(graph::launch(&g, s)?), nothing)?;
            stream::synchronize(raw.capture.as_borrowed())?;
            drop(g);
            // gpu-sync's capture and exec of the tracked launch, as graph
            // mode makes them.
            let captured = timer.stream().capture(|c| scale.tracked(n, c.stream()))?;
            let nodes = captured.node_count()?;
            let exec = captured.instantiate()?;
            // SAFETY: a live exec of the installed table, alive until the
            // end of this iteration (after the timer's stream is drained);
            // launched raw only from this thread, never while its tracked
            // launch runs (the calls below follow one another). What it
            // touches (`scale`'s buffers) outlives it.
            let ours_raw =
                unsafe { gpu_sync::cuda_sys::BorrowedGraphExec::borrow_raw(raw.drv, exec.as_raw()) };
            let mut base = Vec::new();
            let mut hot = Vec::new();
            for half in 0..2 {
                if half == 1 {
                    let rec = Bench::new("graph exec").modes(&[Mode::Hot]).settings(settings).run_on(
                        timer,
                        None,
                        |s| exec.launch(s),
                    )?;
                    hot = samples_ns(&rec, Mode::Hot);
                }
                let launch_g = &mut |s: BorrowedStream<'_>, _| Ok(graph::launch(ours_raw, s)?);
                base.extend(pairs(ROUNDS / 2, timer, raw, Timing::Around, launch_g, nothing)?);
            }
            timer.stream().synchronize()?;
            notes.push(format!(
                "(g) scale_f32 {label}, exec {e}: raw capture's exec, raw pair {:.0} ns; gpu-sync's exec \
                 ({nodes} node{}): hot on its tracked launch − raw pair around it, {}",
                gpu_bench::stats::median(&raw_exec),
                if nodes == 1 { "" } else { "s" },
                verdict(&hot, &base),
            ));
            for (case, v) in [
                (format!("(g) raw exec {e}, scale_f32 {label}"), raw_exec),
                (format!("(g) gpu-sync exec {e} raw, scale_f32 {label}"), base),
                (format!("(g) gpu-sync exec {e} hot, scale_f32 {label}"), hot),
            ] {
                rows.push(Row { phase: "A", case, v });
            }
        }
    }
    Ok(notes)
}
