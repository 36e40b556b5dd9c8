//! A [`Trace`] drawn as an SVG timeline (a small renderer of its own: plain
//! SVG elements, no fonts embedded, one pass over the trace).
//!
//! One lane per host thread (its ranges stacked by depth, its host
//! operations on the row below), one lane per stream (device spans coloured
//! by kind: kernel, copy by direction, memset), a line from each host
//! operation to each device span it enqueued, and a lane with device memory
//! (allocated and reserved) as step lines. The time axis is on top, in the
//! trace's own units from its first event.

use super::trace::{CopyDir, OpKind, Trace};
use std::fmt::Write as _;

const WIDTH: f64 = 1600.0;
const GUTTER: f64 = 210.0;
const RIGHT: f64 = 20.0;
const ROW: f64 = 18.0;
const LANE_GAP: f64 = 10.0;
const AXIS: f64 = 56.0;
const MEMORY_H: f64 = 70.0;
const FONT_PX: f64 = 11.0;
/// More flow lines than this and none is drawn (they would only be ink).
const MAX_FLOWS: usize = 4000;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The fill of a device span or host operation of `kind`.
pub fn colour(kind: &OpKind) -> &'static str {
    match kind {
        OpKind::Kernel { .. } => "#4e79a7",
        OpKind::Copy { dir: CopyDir::HtoD, .. } => "#59a14f",
        OpKind::Copy { dir: CopyDir::DtoH, .. } => "#f28e2b",
        OpKind::Copy { .. } => "#edc948",
        OpKind::Memset { .. } => "#9d9d9d",
        OpKind::HostFn => "#e15759",
        OpKind::GraphLaunch { .. } => "#76b7b2",
        // Markers (waits, event records, allocations, frees) and anything else.
        _ => "#bab0ac",
    }
}

const RANGE_FILLS: [&str; 4] = ["#b07aa1", "#d4a6c8", "#8cd17d", "#f1ce63"];

/// A tick step of 1, 2 or 5 × 10^k ns giving about `n` ticks over `span`.
fn tick_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(1.0);
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|s| *s >= raw).unwrap_or(10.0 * p)
}

fn time_label(ns: f64, step: f64) -> String {
    if step >= 1e8 {
        format!("{:.1} s", ns * 1e-9)
    } else if step >= 1e5 {
        format!("{} ms", trim(ns * 1e-6))
    } else if step >= 1e2 {
        format!("{} µs", trim(ns * 1e-3))
    } else {
        format!("{ns:.0} ns")
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Depth of each range (0 = outermost) by following parents.
fn depths(trace: &Trace) -> std::collections::HashMap<u64, usize> {
    trace.ranges.iter().map(|r| (r.id, trace.ancestors(Some(r.id)).len().saturating_sub(1))).collect()
}

/// The trace as an SVG document titled `title` (see the module docs).
pub fn render(trace: &Trace, title: &str) -> String {
    let (t0, t1) = trace.bounds().unwrap_or((0, 1));
    let span = (t1.saturating_sub(t0)).max(1) as f64;
    let plot_w = WIDTH - GUTTER - RIGHT;
    let x = |t: u64| GUTTER + (t.saturating_sub(t0)) as f64 / span * plot_w;
    let depth = depths(trace);

    // Lanes: (label, y, height); threads, then streams, then memory.
    let mut body = String::new();
    let mut labels = String::new();
    let mut y = AXIS + 8.0;
    let mut op_row_y = std::collections::HashMap::new();
    for th in &trace.threads {
        let max_depth =
            trace.ranges.iter().filter(|r| r.thread == th.id).filter_map(|r| depth.get(&r.id)).max();
        let range_rows = max_depth.map_or(0, |d| d + 1);
        let h = (range_rows + 1) as f64 * ROW;
        let name = match &th.name {
            Some(n) => format!("thread {} ({n})", th.id),
            None => format!("thread {}", th.id),
        };
        let _ = writeln!(
            labels,
            r##"<rect x="0" y="{y:.1}" width="{WIDTH}" height="{h:.1}" fill="#f7f7f7"/><text x="8" y="{:.1}" class="lane">host {}</text>"##,
            y + 13.0,
            esc(&name)
        );
        for r in trace.ranges.iter().filter(|r| r.thread == th.id) {
            let d = depth.get(&r.id).copied().unwrap_or(0);
            let ry = y + d as f64 * ROW + 1.0;
            let (a, b) = (x(r.start_ns), x(r.end_ns));
            let w = (b - a).max(1.0);
            let _ = writeln!(
                body,
                r##"<rect x="{a:.2}" y="{ry:.1}" width="{w:.2}" height="{:.1}" fill="{}" stroke="#ffffff" stroke-width="0.5"><title>range {} ({:.3} µs)</title></rect>"##,
                ROW - 2.0,
                RANGE_FILLS[d % RANGE_FILLS.len()],
                esc(&r.name),
                (r.end_ns - r.start_ns.min(r.end_ns)) as f64 / 1e3
            );
            label_in(&mut body, &r.name, a, ry, w);
        }
        let oy = y + range_rows as f64 * ROW + 1.0;
        op_row_y.insert(th.id, oy);
        for o in trace.ops.iter().filter(|o| o.thread == th.id) {
            let (a, b) = (x(o.host_start_ns), x(o.host_end_ns));
            let w = (b - a).max(1.0);
            let _ = writeln!(
                body,
                r##"<rect x="{a:.2}" y="{oy:.1}" width="{w:.2}" height="{:.1}" fill="{}" fill-opacity="0.55"><title>host: {} ({:.3} µs)</title></rect>"##,
                ROW - 2.0,
                colour(&o.kind),
                esc(&o.name),
                (o.host_end_ns.saturating_sub(o.host_start_ns)) as f64 / 1e3
            );
        }
        y += h + LANE_GAP;
    }
    let mut stream_y = std::collections::HashMap::new();
    for st in &trace.streams {
        let h = ROW + 6.0;
        let _ = writeln!(
            labels,
            r##"<rect x="0" y="{y:.1}" width="{WIDTH}" height="{h:.1}" fill="#eef3f8"/><text x="8" y="{:.1}" class="lane">dev {} {}</text>"##,
            y + 15.0,
            st.device,
            esc(&st.label())
        );
        stream_y.insert(st.stream, y + 2.0);
        y += h + LANE_GAP;
    }
    for s in &trace.spans {
        let Some(&sy) = stream_y.get(&s.stream) else { continue };
        let (a, b) = (x(s.start_ns), x(s.end_ns));
        let w = (b - a).max(1.0);
        let graph = s.graph.map(|g| format!(", graph {g}")).unwrap_or_default();
        let _ = writeln!(
            body,
            r##"<rect x="{a:.2}" y="{sy:.1}" width="{w:.2}" height="{:.1}" fill="{}" stroke="#ffffff" stroke-width="0.5"><title>{} ({:.3} µs{graph})</title></rect>"##,
            ROW + 2.0,
            colour(&s.kind),
            esc(&s.name),
            s.duration_ns() as f64 / 1e3
        );
        label_in(&mut body, &s.name, a, sy + 2.0, w);
    }
    // Flow lines from each host op to its spans.
    let flows: Vec<_> = trace
        .spans
        .iter()
        .filter_map(|s| {
            let o = s.op.and_then(|id| trace.op(id))?;
            Some((o, s, *op_row_y.get(&o.thread)?, *stream_y.get(&s.stream)?))
        })
        .collect();
    if flows.len() <= MAX_FLOWS {
        for (o, s, oy, sy) in &flows {
            let _ = writeln!(
                body,
                r##"<line x1="{:.2}" y1="{:.1}" x2="{:.2}" y2="{sy:.1}" stroke="#555555" stroke-opacity="0.35" stroke-width="0.7"/>"##,
                x(o.host_start_ns),
                oy + ROW - 2.0,
                x(s.start_ns)
            );
        }
    }
    // Memory lane.
    if !trace.memory.is_empty() {
        let max = trace.memory.iter().map(|m| m.allocated.max(m.reserved)).max().unwrap_or(1).max(1) as f64;
        let _ = writeln!(
            labels,
            r##"<rect x="0" y="{y:.1}" width="{WIDTH}" height="{MEMORY_H}" fill="#f7f7f7"/><text x="8" y="{:.1}" class="lane">device memory (max {:.1} MiB)</text>"##,
            y + 15.0,
            max / (1u64 << 20) as f64
        );
        let my = |v: u64| y + MEMORY_H - 4.0 - v as f64 / max * (MEMORY_H - 12.0);
        for (field, stroke) in [(0, "#4e79a7"), (1, "#9d9d9d")] {
            let mut pts = String::new();
            let mut last: Option<f64> = None;
            for m in &trace.memory {
                let v = if field == 0 { m.allocated } else { m.reserved };
                let px = x(m.t_ns);
                if let Some(ly) = last {
                    let _ = write!(pts, "{px:.2},{ly:.1} ");
                }
                let _ = write!(pts, "{px:.2},{:.1} ", my(v));
                last = Some(my(v));
            }
            if let Some(ly) = last {
                let _ = write!(pts, "{:.2},{ly:.1}", GUTTER + plot_w);
            }
            let _ = writeln!(
                body,
                r#"<polyline points="{pts}" fill="none" stroke="{stroke}" stroke-width="1.5"/>"#
            );
        }
        y += MEMORY_H + LANE_GAP;
    }
    // Axis and grid.
    let step = tick_step(span, 12.0);
    let mut axis = String::new();
    let mut t = 0.0;
    while t <= span + 0.5 {
        let px = GUTTER + t / span * plot_w;
        let _ = writeln!(
            axis,
            r##"<line x1="{px:.2}" y1="{:.1}" x2="{px:.2}" y2="{y:.1}" stroke="#cccccc" stroke-width="0.5"/><text x="{px:.2}" y="{:.1}" class="tick">{}</text>"##,
            AXIS - 4.0,
            AXIS - 8.0,
            time_label(t, step)
        );
        t += step;
    }
    // Legend.
    let legend_y = y + 16.0;
    let mut legend = String::new();
    let mut lx = GUTTER;
    for (name, fill) in [
        ("kernel", "#4e79a7"),
        ("memcpy HtoD", "#59a14f"),
        ("memcpy DtoH", "#f28e2b"),
        ("memcpy DtoD", "#edc948"),
        ("memset", "#9d9d9d"),
        ("host range", RANGE_FILLS[0]),
        ("host function", "#e15759"),
        ("graph launch", "#76b7b2"),
    ] {
        let _ = writeln!(
            legend,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="12" fill="{fill}"/><text x="{:.1}" y="{:.1}" class="lane">{name}</text>"#,
            legend_y - 10.0,
            lx + 16.0,
            legend_y
        );
        lx += 24.0 + name.len() as f64 * 6.5 + 16.0;
    }
    let height = legend_y + 14.0;
    let mut sub = format!(
        "source: {}; {} ranges, {} host ops, {} device spans ({} unclaimed); dropped: recorder {}, cupti {}",
        trace.source.name(),
        trace.ranges.len(),
        trace.ops.len(),
        trace.spans.len(),
        trace.unclaimed(),
        trace.dropped.recorder,
        trace.dropped.cupti
    );
    if let Some(c) = trace.clocks.iter().map(|c| c.uncertainty_ns).max() {
        let _ = write!(sub, "; clock alignment within ±{c} ns");
    }
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif">
<style>.lane {{ font-size: 11px; fill: #222222; }} .tick {{ font-size: 10px; fill: #444444; text-anchor: middle; }} .in {{ font-size: {FONT_PX}px; fill: #ffffff; }} .title {{ font-size: 15px; fill: #111111; }} .sub {{ font-size: 11px; fill: #555555; }}</style>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="8" y="18" class="title">{}</text>
<text x="8" y="34" class="sub">{}</text>
{labels}{axis}{body}{legend}</svg>
"##,
        esc(title),
        esc(&sub)
    )
}

/// The name inside a box when it fits (about 6 px a character).
fn label_in(out: &mut String, name: &str, x: f64, y: f64, w: f64) {
    let chars = ((w - 4.0) / 6.2).floor();
    if chars < 4.0 {
        return;
    }
    let n = chars as usize;
    let text: String = if name.chars().count() > n {
        name.chars().take(n.saturating_sub(1)).collect::<String>() + "…"
    } else {
        name.to_owned()
    };
    let _ = writeln!(out, r#"<text x="{:.2}" y="{:.1}" class="in">{}</text>"#, x + 2.0, y + 12.0, esc(&text));
}
