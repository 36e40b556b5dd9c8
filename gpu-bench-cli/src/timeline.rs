//! `gpu-bench timeline`: the profiler on a demonstration pipeline, so a
//! user sees copy/compute overlap and the gaps with one command.
//!
//! The pipeline, run twice inside the profile (host ranges "pinned" and
//! "pageable", one range per chunk): each chunk is uploaded on an H2D
//! stream, scaled (`scale_f32`) and followed by a spin (`spin_cycles`, as
//! long as one chunk's upload) on a compute stream, and downloaded on a D2H
//! stream; two device slots per direction, so chunk i+1's upload can run
//! under chunk i's compute (gpu-sync inserts the cross-stream waits). With
//! pinned host memory the copies are asynchronous and overlap the compute;
//! with pageable memory each copy blocks the host, so nothing overlaps.
//! Then one chunk's compute is captured into a graph and replayed twice
//! (range "graph"): the event backend sees each replay as one span, the
//! CUPTI backend the kernels inside it.
//!
//! Writes into `--out` (default `./timeline`): `trace.json` (Chrome
//! trace-event JSON: open it in ui.perfetto.dev or chrome://tracing),
//! `table.md` and `table.json` (key_averages), `timeline.svg` (the whole
//! trace; `timeline_pinned.svg` and `timeline_pageable.svg` each run alone,
//! zoomed in) (and
//! `timeline.png` when built with the `png` feature), and
//! `summary.json` (overlap per run: the time copies and kernels ran at
//! once over the copy time). `--backend both` writes one folder per
//! backend (`events/`, `cupti/`). `--check-timer` also times the pipeline's
//! two kernels with the timer's kernel mode (CUPTI) and writes
//! `compare.md`/`compare.json`: each backend's table average beside it.

use crate::common::{Ctx, Failure};
use gpu_bench::profile::{Backend, OpKind, Profiler, RowKind, Trace, range, scope};
use gpu_bench::record::{Unit, format_value};
use gpu_bench::{Bench, Mode};
use gpu_sync::{DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};
use serde_json::json;
use std::path::{Path, PathBuf};

pub use gpu_bench_cli::cli::{BackendArg, TimelineArgs as Args};

/// The pipeline's sizes.
struct Plan {
    chunks: usize,
    /// f32 elements per chunk.
    cw: usize,
    spin_cycles: u64,
}

/// Device-time overlap of copies and kernels inside `[a, b]`: the time both
/// a copy and a kernel ran, over the copy time.
fn overlap(trace: &Trace, a: u64, b: u64) -> (f64, f64, f64) {
    let clip = |s: u64, e: u64| (s.max(a), e.min(b));
    let mut copies: Vec<(u64, u64)> = Vec::new();
    let mut kernels: Vec<(u64, u64)> = Vec::new();
    for s in &trace.spans {
        let (s0, s1) = clip(s.start_ns, s.end_ns);
        if s1 <= s0 {
            continue;
        }
        match s.kind {
            OpKind::Copy { .. } => copies.push((s0, s1)),
            OpKind::Kernel { .. } => kernels.push((s0, s1)),
            _ => {}
        }
    }
    let union = |mut v: Vec<(u64, u64)>| {
        v.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (s, e) in v {
            match out.last_mut() {
                Some(l) if s <= l.1 => l.1 = l.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    };
    let (cu, ku) = (union(copies), union(kernels));
    let len = |v: &[(u64, u64)]| v.iter().map(|(s, e)| e - s).sum::<u64>();
    let mut both = 0u64;
    for &(s, e) in &cu {
        for &(ks, ke) in &ku {
            let (x, y) = (s.max(ks), e.min(ke));
            if y > x {
                both += y - x;
            }
        }
    }
    (len(&cu) as f64 * 1e-9, len(&ku) as f64 * 1e-9, both as f64 * 1e-9)
}

/// One profiled run of both pipelines with `backend`.
fn profile(ctx: &Ctx, plan: &Plan, backend: Backend) -> Result<Trace, Failure> {
    let dev = &ctx.device;
    let k = &ctx.kernels;
    let (n, cw) = (plan.chunks, plan.cw);
    let h2d = Stream::new(dev)?;
    let compute = Stream::new(dev)?;
    let d2h = Stream::new(dev)?;
    let input: Vec<f32> = (0..n * cw).map(|i| 1.0 + (i % 1013) as f32 * 0.25).collect();
    let pinned_in = PinnedBuffer::from_slice(dev, &input, HostAllocFlags::empty())?;
    let mut outs: Vec<PinnedBuffer<f32>> =
        (0..n).map(|_| PinnedBuffer::new(dev, cw, HostAllocFlags::empty())).collect::<Result<_, _>>()?;
    // Written once now, so the pageable run does not time the first touch
    // of never-written pages (a zeroed Vec maps the zero page lazily).
    let mut pageable_out = vec![-1f32; n * cw];
    // One untimed pass of each kernel: module load and first launch stay out.
    {
        let a = DeviceBuffer::<f32>::zeroed(&compute, 1024)?;
        let mut b = DeviceBuffer::<f32>::zeroed(&compute, 1024)?;
        let mut c = DeviceBuffer::<u64>::zeroed(&compute, 1)?;
        k.scale(&compute, &a, &mut b, 2.0)?;
        k.spin(&compute, 1, &mut c)?;
    }
    dev.synchronize()?;

    let mut p = Profiler::new(dev).backend(backend);
    p.start()?;
    // The device slots are allocated (and freed, below) inside the profile:
    // the memory track shows them.
    let (mut slots_in, mut slots_out, mut spin_out) = scope("allocate", || -> Result<_, Failure> {
        Ok((
            [DeviceBuffer::<f32>::zeroed(&h2d, cw)?, DeviceBuffer::<f32>::zeroed(&h2d, cw)?],
            [DeviceBuffer::<f32>::zeroed(&compute, cw)?, DeviceBuffer::<f32>::zeroed(&compute, cw)?],
            DeviceBuffer::<u64>::zeroed(&compute, 1)?,
        ))
    })?;
    scope("pinned", || -> Result<(), Failure> {
        let mut pending = Vec::with_capacity(n);
        for (i, out) in outs.drain(..).enumerate() {
            let _chunk = range(format!("chunk {i}"));
            let s = i % 2;
            h2d.upload_range(&pinned_in, i * cw..(i + 1) * cw, &mut slots_in[s])?;
            k.scale(&compute, &slots_in[s], &mut slots_out[s], 2.0)?;
            k.spin(&compute, plan.spin_cycles, &mut spin_out)?;
            pending.push(d2h.download(&slots_out[s], out)?);
        }
        for p in pending {
            outs.push(p.wait()?);
        }
        Ok(())
    })?;
    scope("pageable", || -> Result<(), Failure> {
        for i in 0..n {
            let _chunk = range(format!("chunk {i}"));
            let s = i % 2;
            h2d.upload_pageable(&input[i * cw..(i + 1) * cw], &mut slots_in[s])?;
            k.scale(&compute, &slots_in[s], &mut slots_out[s], 2.0)?;
            k.spin(&compute, plan.spin_cycles, &mut spin_out)?;
            d2h.download_pageable(&slots_out[s], &mut pageable_out[i * cw..(i + 1) * cw])?;
        }
        Ok(())
    })?;
    // A graph of one chunk's compute, captured outside the ranges above and
    // replayed twice: the events see each replay as one span, CUPTI sees
    // the kernels inside.
    let graph = scope("graph capture", || {
        compute.capture(|c| {
            k.scale(c.stream(), &slots_in[0], &mut slots_out[0], 2.0)?;
            k.spin(c.stream(), plan.spin_cycles / 4, &mut spin_out)
        })
    })?
    .instantiate()?;
    scope("graph", || -> Result<(), Failure> {
        for _ in 0..2 {
            graph.launch(&compute)?;
        }
        Ok(compute.synchronize().map(|_| ())?)
    })?;
    drop(graph);
    scope("free", || {
        drop(slots_in);
        drop(slots_out);
        drop(spin_out);
    });
    dev.synchronize()?;
    let trace = p.finish()?.ok_or_else(|| Failure::Io("the profiler returned no trace".into()))?;
    // Both runs computed 2 x input.
    for (i, o) in outs.iter().enumerate() {
        let got: &[f32] = o;
        if got.iter().zip(&input[i * cw..]).any(|(g, x)| *g != 2.0 * x) {
            return Err(Failure::Check(format!("timeline: pinned chunk {i} is not 2 x its input")));
        }
    }
    if pageable_out.iter().zip(&input).any(|(g, x)| *g != 2.0 * x) {
        return Err(Failure::Check("timeline: a pageable chunk is not 2 x its input".into()));
    }
    Ok(trace)
}

/// The window of the outermost range called `name`.
fn window(trace: &Trace, name: &str) -> Option<(u64, u64)> {
    trace.ranges.iter().find(|r| r.name == name && r.parent.is_none()).map(|r| (r.start_ns, r.end_ns))
}

/// Writes the trace's files into `dir`; returns the summary.
fn write(
    trace: &Trace,
    args: &Args,
    plan: &Plan,
    dir: &Path,
    title: &str,
) -> Result<serde_json::Value, Failure> {
    std::fs::create_dir_all(dir).map_err(|e| Failure::Io(format!("{}: {e}", dir.display())))?;
    let io = |p: PathBuf, text: &str| {
        std::fs::write(&p, text).map_err(|e| Failure::Io(format!("{}: {e}", p.display())))
    };
    let mut table = trace.key_averages().sort_by(args.sort_by);
    if args.group_by_shape {
        table = table.group_by_shape();
    }
    let mut runs = serde_json::Map::new();
    let mut md = format!("# {title}\n\n");
    for name in ["pinned", "pageable"] {
        if let Some((a, b)) = window(trace, name) {
            let (copy, kern, both) = overlap(trace, a, b);
            let frac = if copy > 0.0 { both / copy } else { 0.0 };
            md.push_str(&format!(
                "- {name}: wall {}, copies {}, kernels {}, both at once {} ({:.1} % of the copy time)\n",
                format_value((b - a) as f64 * 1e-9, Unit::Seconds),
                format_value(copy, Unit::Seconds),
                format_value(kern, Unit::Seconds),
                format_value(both, Unit::Seconds),
                frac * 100.0
            ));
            runs.insert(
                name.into(),
                json!({"wall_s": (b - a) as f64 * 1e-9, "copy_s": copy, "kernel_s": kern, "overlap_s": both, "overlap_of_copy": frac}),
            );
        }
    }
    md.push_str(&format!(
        "\nsource: {}; dropped: recorder {}, CUPTI {}; unclaimed spans {}\n",
        trace.source.name(),
        trace.dropped.recorder,
        trace.dropped.cupti,
        trace.unclaimed()
    ));
    for c in &trace.clocks {
        md.push_str(&format!("- clock {}: within ±{} ns\n", c.clock, c.uncertainty_ns));
    }
    for n in &trace.notes {
        md.push_str(&format!("- note: {n}\n"));
    }
    md.push('\n');
    md.push_str(&table.markdown());
    io(dir.join("trace.json"), &trace.chrome_json())?;
    io(dir.join("table.md"), &md)?;
    io(dir.join("table.json"), &table.json())?;
    io(dir.join("timeline.svg"), &trace.svg(title))?;
    // Each run on its own, zoomed in.
    for name in ["pinned", "pageable"] {
        if let Some((a, b)) = window(trace, name) {
            let w = trace.window(a, b);
            io(dir.join(format!("timeline_{name}.svg")), &w.svg(&format!("{title}: the {name} run")))?;
        }
    }
    #[cfg(feature = "png")]
    {
        let png = trace.png(title)?;
        let p = dir.join("timeline.png");
        std::fs::write(&p, png).map_err(|e| Failure::Io(format!("{}: {e}", p.display())))?;
    }
    let summary = json!({
        "source": trace.source.name(),
        "chunks": plan.chunks,
        "chunk_bytes": plan.cw * 4,
        "spin_cycles": plan.spin_cycles,
        "runs": runs,
        "dropped": trace.dropped,
        "unclaimed": trace.unclaimed(),
        "clocks": trace.clocks,
        "notes": trace.notes,
    });
    io(dir.join("summary.json"), &(serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n"))?;
    print!("{md}");
    Ok(summary)
}

/// Runs the subcommand.
///
/// # Errors
/// A driver error; [`Failure::Check`] when a chunk's result is wrong;
/// writing the files.
pub fn run(ctx: &Ctx, args: &Args, out: Option<&PathBuf>) -> Result<i32, Failure> {
    let small = ctx.quick || ctx.sim;
    let chunk_bytes = args.chunk_bytes.unwrap_or(if small { 256usize << 10 } else { 32 << 20 });
    let chunks = args.chunks.unwrap_or(if small { 4 } else { 8 });
    let total = chunk_bytes as u64 * chunks as u64;
    crate::args::fits(
        &format!("timeline --chunk-mib {} --chunks {chunks}", chunk_bytes as f64 / f64::from(1u32 << 20)),
        &ctx.device,
        3 * total,
        4 * chunk_bytes as u64,
    )?;
    let dir = out.cloned().unwrap_or_else(|| PathBuf::from("timeline"));
    let cw = chunk_bytes / 4;
    // The spin as long as one chunk's pinned upload, measured once.
    let mhz = gpu_bench::device_info(&ctx.device)?.sm_clock_mhz;
    let spin_cycles = {
        let s = Stream::new(&ctx.device)?;
        let src = PinnedBuffer::<f32>::new(&ctx.device, cw, HostAllocFlags::empty())?;
        let mut dst = DeviceBuffer::<f32>::zeroed(&s, cw)?;
        s.upload(&src, &mut dst)?;
        s.synchronize()?;
        let t0 = std::time::Instant::now();
        s.upload(&src, &mut dst)?;
        s.synchronize()?;
        Ctx::cycles(t0.elapsed().as_secs_f64(), mhz)
    };
    let plan = Plan { chunks, cw, spin_cycles };
    let backends: Vec<(Backend, Option<&str>)> = match args.backend {
        BackendArg::Events => vec![(Backend::Events, None)],
        BackendArg::Cupti => vec![(Backend::Cupti, None)],
        BackendArg::Auto => vec![(Backend::Auto, None)],
        BackendArg::Both => vec![(Backend::Events, Some("events")), (Backend::Cupti, Some("cupti"))],
    };
    let mut tables = Vec::new();
    for (b, sub) in backends {
        ctx.progress.step(format!("timeline: {b:?} backend"));
        let trace = profile(ctx, &plan, b)?;
        let d = sub.map_or_else(|| dir.clone(), |s| dir.join(s));
        let title = format!(
            "gpu-bench timeline: {chunks} chunks of {}, H2D / compute / D2H streams, pinned then pageable ({} backend{})",
            format_value(chunk_bytes as f64, Unit::Bytes),
            trace.source.name(),
            if ctx.sim { ", SIMULATED TIMES" } else { "" }
        );
        write(&trace, args, &plan, &d, &title)?;
        tables.push(trace);
    }
    if args.check_timer {
        check_timer(ctx, &plan, &tables, &dir)?;
    }
    ctx.progress.finish();
    Ok(0)
}

/// The average device time of `name`'s launches inside the "pageable"
/// range (where each kernel ran alone: the copies block the host).
fn alone_avg(t: &Trace, name: &str) -> Option<f64> {
    let pageable = t.ranges.iter().find(|r| r.name == "pageable" && r.parent.is_none())?.id;
    let d: Vec<u64> = t
        .spans
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| s.op.and_then(|id| t.op(id)).is_some_and(|o| t.ancestors(o.range).contains(&pageable)))
        .map(|s| s.duration_ns())
        .collect();
    (!d.is_empty()).then(|| d.iter().sum::<u64>() as f64 * 1e-9 / d.len() as f64)
}

/// The pipeline's two kernels timed by the timer's kernel mode (CUPTI),
/// beside each backend's table average of the same launches.
fn check_timer(ctx: &Ctx, plan: &Plan, traces: &[Trace], dir: &Path) -> Result<(), Failure> {
    let stream = Stream::new(&ctx.device)?;
    let mut timer = ctx.timer(&stream)?;
    if let Err(why) = timer.kernel_mode_available() {
        return Err(Failure::Bench(gpu_bench::Error::Unavailable { mode: Mode::Kernel, why }));
    }
    let k = &ctx.kernels;
    let src = DeviceBuffer::<f32>::zeroed(&stream, plan.cw)?;
    let mut dst = DeviceBuffer::<f32>::zeroed(&stream, plan.cw)?;
    let mut spin_out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let mut rows = Vec::new();
    let mut md = String::from(
        "| kernel | timer kernel mode (median) | backend | table avg (vs kernel mode) | min / max | alone: pageable run avg (vs kernel mode) |\n|---|---|---|---|---|---|\n",
    );
    for name in ["spin_cycles", "scale_f32"] {
        ctx.progress.step(format!("timeline: kernel mode of {name}"));
        let bench = Bench::new(name).modes(&[Mode::Kernel]).settings(ctx.settings);
        let rec = if name == "spin_cycles" {
            bench.run_on(&mut timer, None, |s| k.spin(s, plan.spin_cycles, &mut spin_out))?
        } else {
            bench.run_on(&mut timer, None, |s| k.scale(s, &src, &mut dst, 2.0))?
        };
        let Some(km) = rec.mode(Mode::Kernel).map(|m| m.median()) else { continue };
        for t in traces {
            let ka = t.key_averages();
            let Some(r) = ka.row(RowKind::Op, name) else { continue };
            // The same kernel in the pageable run only, where nothing ran
            // beside it (in the pinned run copies share the memory system).
            let alone = alone_avg(t, name);
            let diff = r.device_avg_s / km - 1.0;
            let diff_alone = alone.map(|a| a / km - 1.0);
            md.push_str(&format!(
                "| {name} | {} | {} | {} ({:+.2} %) | {} / {} | {} ({}) |\n",
                format_value(km, Unit::Seconds),
                t.source.name(),
                format_value(r.device_avg_s, Unit::Seconds),
                diff * 100.0,
                format_value(r.device_min_s, Unit::Seconds),
                format_value(r.device_max_s, Unit::Seconds),
                alone.map_or("—".into(), |a| format_value(a, Unit::Seconds)),
                diff_alone.map_or("—".into(), |d| format!("{:+.2} %", d * 100.0)),
            ));
            rows.push(json!({
                "kernel": name, "kernel_mode_median_s": km, "backend": t.source.name(),
                "table_avg_s": r.device_avg_s, "table_min_s": r.device_min_s, "table_max_s": r.device_max_s,
                "calls": r.calls, "relative_difference": diff,
                "pageable_run_avg_s": alone, "pageable_run_relative_difference": diff_alone,
            }));
        }
    }
    md.push_str(&format!(
        "\nThe table's average over the pipeline's launches (both runs, with copies running beside them \
         in the pinned run) against the timer's kernel mode (CUPTI's start/end of the same launch, alone \
         on a stream). spin_cycles: {} cycles; scale_f32: {} elements.\n",
        plan.spin_cycles, plan.cw
    ));
    std::fs::create_dir_all(dir).map_err(|e| Failure::Io(e.to_string()))?;
    std::fs::write(dir.join("compare.md"), &md).map_err(|e| Failure::Io(e.to_string()))?;
    std::fs::write(
        dir.join("compare.json"),
        serde_json::to_string_pretty(&json!({"rows": rows})).unwrap_or_default(),
    )
    .map_err(|e| Failure::Io(e.to_string()))?;
    print!("\n{md}");
    Ok(())
}
