//! The roofline chart as SVG (plotters' SVG backend): log-log axes (FLOP/s
//! over FLOP/byte), every measured roof as a labelled solid line, the
//! datasheet roofs as dashed grey lines, the intensity sweep as a curve and
//! every placed kernel as a labelled point. Labels are placed greedily in
//! pixel space so that none overlaps another label or a point.

use super::RooflineError;
use super::model::{CeilingKind, MemoryLevel, RooflineReport};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 780;
const FONT: &str = "sans-serif";
const LABEL_PX: f64 = 13.0;

fn render_err<E: std::fmt::Display>(e: E) -> RooflineError {
    RooflineError::Render(e.to_string())
}

/// A number with an SI prefix (`1.2 T`).
pub fn si(v: f64) -> String {
    let a = v.abs();
    let (d, p) = if a >= 1e15 {
        (1e15, "P")
    } else if a >= 1e12 {
        (1e12, "T")
    } else if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let x = v / d;
    if x >= 100.0 {
        format!("{x:.0} {p}")
    } else if x >= 10.0 {
        format!("{x:.1} {p}")
    } else {
        format!("{x:.2} {p}")
    }
}

/// Pixel boxes already taken and the lines drawn, for label placement.
struct Boxes {
    taken: Vec<(f64, f64, f64, f64)>,
    /// Every drawn line's segments, in pixels: a label crosses none.
    lines: Vec<((f64, f64), (f64, f64))>,
    area: (f64, f64, f64, f64),
}

/// Whether the segment `a`–`b` meets the box `r` (x0, y0, x1, y1)
/// (Liang–Barsky clipping).
fn segment_hits(a: (f64, f64), b: (f64, f64), r: (f64, f64, f64, f64)) -> bool {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, q) in [(-dx, a.0 - r.0), (dx, r.2 - a.0), (-dy, a.1 - r.1), (dy, r.3 - a.1)] {
        if p == 0.0 {
            if q < 0.0 {
                return false;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                if t > t1 {
                    return false;
                }
                t0 = t0.max(t);
            } else {
                if t < t0 {
                    return false;
                }
                t1 = t1.min(t);
            }
        }
    }
    true
}

impl Boxes {
    fn free(&self, b: (f64, f64, f64, f64)) -> bool {
        let (ax0, ay0, ax1, ay1) = self.area;
        if b.0 < ax0 || b.1 < ay0 || b.2 > ax1 || b.3 > ay1 {
            return false;
        }
        self.taken.iter().all(|t| b.2 <= t.0 || b.0 >= t.2 || b.3 <= t.1 || b.1 >= t.3)
            && !self.lines.iter().any(|&(p, q)| segment_hits(p, q, b))
    }

    /// Whether `b` lies in the plot and overlaps no taken box (lines
    /// allowed).
    fn clear_of_boxes(&self, b: (f64, f64, f64, f64)) -> bool {
        let (ax0, ay0, ax1, ay1) = self.area;
        b.0 >= ax0
            && b.1 >= ay0
            && b.2 <= ax1
            && b.3 <= ay1
            && self.taken.iter().all(|t| b.2 <= t.0 || b.0 >= t.2 || b.3 <= t.1 || b.1 >= t.3)
    }

    /// Records a drawn polyline (data coordinates mapped by `to_px`).
    fn line(&mut self, pts: &[(f64, f64)], to_px: impl Fn(f64, f64) -> (f64, f64)) {
        for w in pts.windows(2) {
            self.lines.push((to_px(w[0].0, w[0].1), to_px(w[1].0, w[1].1)));
        }
    }

    /// The first free box for a `w`×`h` label near (`x`, `y`), taken; or the
    /// first candidate when all collide. No box overlaps another or crosses
    /// a drawn line. A label of a line first tries the places its own line
    /// leaves free: a flat (compute) roof's, right-aligned at the right
    /// edge (where the memory roofs have ended), below it, then above its
    /// datasheet line (drawn just above it), then above it; a rising
    /// (memory) roof's, below-right or above-left of its anchor.
    fn place(&mut self, x: f64, y: f64, w: f64, h: f64, along: Along) -> (f64, f64) {
        let mut candidates = Vec::new();
        match along {
            Along::Flat { datasheet_y } => {
                let lx = self.area.2 - w - 4.0;
                candidates.push((lx, y + 3.0));
                if let Some(dy) = datasheet_y {
                    candidates.push((lx, dy - 3.0 - h));
                }
                candidates.push((lx, y - 3.0 - h));
            }
            Along::Rising => candidates.extend([(x + 6.0, y + 4.0), (x - 6.0 - w, y - 4.0 - h)]),
            Along::Point => {}
        }
        for ring in 0..6 {
            let d = 6.0 + 14.0 * ring as f64;
            candidates.extend([
                (x + 6.0, y - d - h / 2.0),
                (x + 6.0, y + d - h / 2.0),
                (x - 6.0 - w, y - d - h / 2.0),
                (x - 6.0 - w, y + d - h / 2.0),
                (x + 8.0 + d, y - h / 2.0),
                (x - 8.0 - d - w, y - h / 2.0),
            ]);
        }
        // Last resort for a flat roof's label: further left along its line,
        // below then above it (a sweep may end on the line at the right).
        if let Along::Flat { .. } = along {
            let lx = self.area.2 - w - 4.0;
            for k in 1..8 {
                let sx = lx - 60.0 * k as f64;
                candidates.extend([(sx, y + 3.0), (sx, y - 3.0 - h)]);
            }
        }
        // Free of labels, points and lines; else (a crowded corner) free of
        // labels and points at least, crossing a line; else the first.
        let pick = candidates
            .iter()
            .copied()
            .find(|&(lx, ly)| self.free((lx, ly, lx + w, ly + h)))
            .or_else(|| {
                candidates.iter().copied().find(|&(lx, ly)| self.clear_of_boxes((lx, ly, lx + w, ly + h)))
            })
            .unwrap_or(candidates[0]);
        self.taken.push((pick.0, pick.1, pick.0 + w, pick.1 + h));
        pick
    }
}

/// What a label names, for where it goes first ([`Boxes::place`]).
#[derive(Clone, Copy, PartialEq)]
enum Along {
    /// A horizontal line (a compute roof), with the pixel row of its
    /// datasheet line, if drawn.
    Flat {
        /// The datasheet line's pixel row.
        datasheet_y: Option<f64>,
    },
    /// A line rising to the right (a memory roof, the intensity sweep).
    Rising,
    /// A point (a placed kernel).
    Point,
}

fn text_width(s: &str) -> f64 {
    0.56 * LABEL_PX * s.chars().count() as f64
}

/// Renders `report`'s roofline chart as an SVG document.
///
/// # Errors
/// [`RooflineError::Render`] when the report has no roof to draw or the
/// backend fails.
pub fn render(report: &RooflineReport) -> Result<String, RooflineError> {
    let memory: Vec<_> = report
        .ceilings
        .iter()
        .filter(|c| c.roof && matches!(c.kind, CeilingKind::Memory(_)) && c.value > 0.0)
        .collect();
    let compute: Vec<_> = report
        .ceilings
        .iter()
        .filter(|c| c.roof && c.kind == CeilingKind::Compute && c.value > 0.0)
        .collect();
    let top = compute.iter().map(|c| c.value).fold(0.0, f64::max);
    if memory.is_empty() || top <= 0.0 {
        return Err(RooflineError::Render("no memory and compute ceilings to draw".into()));
    }
    let hbm = report.memory_roof(MemoryLevel::Hbm).map(|c| c.value);
    let datasheet_top = compute.iter().filter_map(|c| c.datasheet).fold(0.0, f64::max);
    let low_mem = memory.iter().map(|c| c.value).fold(f64::INFINITY, f64::min);
    let (x0, x1) = (1.0 / 64.0, 4096.0);
    let y_hi = top.max(datasheet_top) * 2.5;
    let y_lo = (low_mem * x0 / 2.0).min(
        report.placements.iter().map(|p| p.achieved_flops).filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min)
            / 2.0,
    );

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(render_err)?;
        let sim = if report.simulated() { " — SIMULATED (cuda-sim), not a measurement" } else { "" };
        let title = format!("Roofline: {}{}", report.device.name, sim);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(90)
            .build_cartesian_2d((x0..x1).log_scale(), (y_lo..y_hi).log_scale())
            .map_err(render_err)?;
        chart
            .configure_mesh()
            .x_desc("arithmetic intensity (FLOP / byte)")
            .y_desc("FLOP/s")
            .x_label_formatter(&|v| if *v >= 1.0 { format!("{v:.0}") } else { format!("1/{:.0}", 1.0 / v) })
            .y_label_formatter(&|v| si(*v))
            .label_style((FONT, 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(render_err)?;

        let plot = chart.plotting_area();
        let (px, py) = plot.get_pixel_range();
        // The chart's log-log mapping, in root pixels (as plotters maps).
        let (pxa, pxb, pya, pyb) =
            (f64::from(px.start), f64::from(px.end), f64::from(py.start), f64::from(py.end));
        let to_px = move |x: f64, y: f64| -> (f64, f64) {
            let fx = (x.ln() - x0.ln()) / (x1.ln() - x0.ln());
            let fy = (y.ln() - y_lo.ln()) / (y_hi.ln() - y_lo.ln());
            (pxa + fx * (pxb - pxa), pyb - fy * (pyb - pya))
        };
        let mut boxes = Boxes {
            taken: Vec::new(),
            lines: Vec::new(),
            area: (f64::from(px.start), f64::from(py.start), f64::from(px.end), f64::from(py.end)),
        };
        let palette = [
            RGBColor(31, 119, 180),
            RGBColor(44, 160, 44),
            RGBColor(148, 103, 189),
            RGBColor(23, 190, 207),
            RGBColor(140, 86, 75),
        ];
        // A fifth colour for the FP16 FMA roof (version 2 draws it with its
        // sweep): the first four keep the colours version-1 charts had.
        let compute_colors = [
            RGBColor(214, 39, 40),
            RGBColor(255, 127, 14),
            RGBColor(188, 189, 34),
            RGBColor(227, 119, 194),
            RGBColor(23, 128, 80),
        ];
        let mut labels: Vec<(String, f64, f64, RGBColor, Along)> = Vec::new();

        // Datasheet roofs: dashed grey.
        let grey = RGBColor(150, 150, 150);
        if let Some(ds) = memory.iter().find_map(|c| c.datasheet) {
            let ridge = datasheet_top.max(top) / ds;
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x0, ds * x0), (ridge.min(x1), ds * ridge.min(x1))],
                    6,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(render_err)?;
            boxes.line(&[(x0, ds * x0), (ridge.min(x1), ds * ridge.min(x1))], to_px);
            let lx = (ridge / 8.0).max(x0 * 2.0);
            labels.push((format!("HBM datasheet {}B/s", si(ds)), lx, ds * lx, grey, Along::Rising));
        }
        for c in &compute {
            if let Some(ds) = c.datasheet {
                let from = hbm.map_or(x0, |b| ds / b).max(x0);
                chart
                    .draw_series(DashedLineSeries::new(
                        vec![(from, ds), (x1, ds)],
                        6,
                        4,
                        grey.stroke_width(1),
                    ))
                    .map_err(render_err)?;
                boxes.line(&[(from, ds), (x1, ds)], to_px);
            }
        }

        // Measured memory roofs, each up to the highest compute roof.
        for (i, c) in memory.iter().enumerate() {
            let color = palette[i % palette.len()];
            let ridge = (top / c.value).min(x1);
            chart
                .draw_series(LineSeries::new(
                    vec![(x0, c.value * x0), (ridge, c.value * ridge)],
                    color.stroke_width(2),
                ))
                .map_err(render_err)?;
            boxes.line(&[(x0, c.value * x0), (ridge, c.value * ridge)], to_px);
            // Anchor the label halfway along the visible line (in log space).
            let start = (y_lo / c.value).max(x0);
            let lx = (start * ridge).sqrt() / (1.0 + i as f64);
            labels.push((
                format!("{} {}B/s", c.name, si(c.value)),
                lx.max(x0),
                c.value * lx.max(x0),
                color,
                Along::Rising,
            ));
        }
        // Measured compute roofs, from the HBM ridge to the right edge.
        let best_mem = memory.iter().map(|c| c.value).fold(0.0, f64::max);
        for (i, c) in compute.iter().enumerate() {
            let color = compute_colors[i % compute_colors.len()];
            let from = (c.value / best_mem).max(x0);
            chart
                .draw_series(LineSeries::new(vec![(from, c.value), (x1, c.value)], color.stroke_width(2)))
                .map_err(render_err)?;
            boxes.line(&[(from, c.value), (x1, c.value)], to_px);
            let mut name = format!("{} {}FLOP/s", c.name, si(c.value));
            if let Some(ds) = c.datasheet {
                name.push_str(&format!(" (datasheet {})", si(ds)));
            }
            let datasheet_y = c.datasheet.map(|ds| to_px(x1, ds).1);
            labels.push((name, x1, c.value, color, Along::Flat { datasheet_y }));
        }

        // The intensity sweeps: curves with small markers, each in the
        // colour of the compute roof it is held against (grey when that
        // roof is not drawn, or not named: a version-1 document).
        for s in report.sweeps.iter().filter(|s| s.on_roofline) {
            let pts: Vec<(f64, f64)> =
                s.points.iter().filter(|p| p.x >= x0 && p.x <= x1 && p.y > 0.0).map(|p| (p.x, p.y)).collect();
            let c = s
                .ceiling
                .as_deref()
                .and_then(|name| compute.iter().position(|c| c.name == name))
                .map_or(RGBColor(90, 90, 90), |i| compute_colors[i % compute_colors.len()]);
            chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(1))).map_err(render_err)?;
            boxes.line(&pts, to_px);
            chart
                .draw_series(pts.iter().map(|&(x, y)| Cross::new((x, y), 3, c.stroke_width(1))))
                .map_err(render_err)?;
            if let Some(&(x, y)) = pts.get(pts.len() / 2) {
                // Version 2 names the ridge in its own field: a short label.
                let label = match (s.ridge, s.ceiling.as_deref()) {
                    (Some(r), Some(name)) => {
                        format!("{} sweep, ridge {r:.1}", name.trim_end_matches(" FMA"))
                    }
                    _ => s.name.clone(),
                };
                labels.push((label, x, y, c, Along::Rising));
            }
        }

        // Placed kernels: points; their boxes are taken before any label.
        let black = RGBColor(20, 20, 20);
        let placed: Vec<_> = report
            .placements
            .iter()
            .filter(|p| {
                p.intensity.is_finite() && p.intensity >= x0 && p.intensity <= x1 && p.achieved_flops > 0.0
            })
            .collect();
        for p in &placed {
            let (x, y) = to_px(p.intensity, p.achieved_flops);
            boxes.taken.push((x - 4.0, y - 4.0, x + 4.0, y + 4.0));
        }
        chart
            .draw_series(
                placed.iter().map(|p| Circle::new((p.intensity, p.achieved_flops), 4, black.filled())),
            )
            .map_err(render_err)?;
        let mut all: Vec<(String, f64, f64, RGBColor, Along)> = placed
            .iter()
            .map(|p| {
                let name = format!("{} {:.0}%", p.name, 100.0 * p.pct_of_roof);
                (name, p.intensity, p.achieved_flops, black, Along::Point)
            })
            .collect();
        all.extend(labels);
        for (text, x, y, color, along) in all {
            let (px, py) = to_px(x, y);
            let w = text_width(&text);
            let (lx, ly) = boxes.place(px, py, w, LABEL_PX + 2.0, along);
            let style = TextStyle::from((FONT, LABEL_PX).into_font())
                .color(&color)
                .pos(Pos::new(HPos::Left, VPos::Top));
            root.draw_text(&text, &style, (lx as i32, ly as i32)).map_err(render_err)?;
        }
        root.present().map_err(render_err)?;
    }
    Ok(svg)
}

/// Renders the working-set sweeps (bytes/s over working-set bytes, log-log)
/// with their plateaus and the L2 size marked, as an SVG document.
///
/// # Errors
/// [`RooflineError::Render`] when the report has no working-set sweep or
/// the backend fails.
pub fn render_cache(report: &RooflineReport) -> Result<String, RooflineError> {
    let sweeps: Vec<_> = report.sweeps.iter().filter(|s| !s.on_roofline && !s.points.is_empty()).collect();
    let xs = sweeps.iter().flat_map(|s| s.points.iter().map(|p| p.x)).filter(|x| *x > 0.0);
    let ys = sweeps.iter().flat_map(|s| s.points.iter().map(|p| p.y)).filter(|y| *y > 0.0);
    let (x0, x1) = xs.fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    let (y0, y1) = ys.fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
    if !(x0 < x1 && y0 <= y1 && y1 > 0.0) {
        return Err(RooflineError::Render("no working-set sweep to draw".into()));
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(render_err)?;
        let sim = if report.simulated() { " — SIMULATED (cuda-sim), not a measurement" } else { "" };
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("Working-set sweeps: {}{sim}", report.device.name), (FONT, 20))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(90)
            .build_cartesian_2d((x0 / 1.2..x1 * 1.2).log_scale(), (y0 / 1.5..y1 * 1.5).log_scale())
            .map_err(render_err)?;
        chart
            .configure_mesh()
            .x_desc("working set (bytes)")
            .y_desc("bytes/s")
            .x_label_formatter(&|v| format!("{}B", si(*v)))
            .y_label_formatter(&|v| format!("{}B/s", si(*v)))
            .label_style((FONT, 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(render_err)?;
        let l2 = report.device.l2_bytes as f64;
        if l2 > x0 && l2 < x1 {
            let grey = RGBColor(150, 150, 150);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(l2, y0 / 1.4), (l2, y1 * 1.4)],
                    6,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(render_err)?
                .label(format!("L2 size {}B", si(l2)))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], grey));
        }
        let colors = [RGBColor(23, 190, 207), RGBColor(140, 86, 75), RGBColor(31, 119, 180)];
        for (i, s) in sweeps.iter().enumerate() {
            let c = colors[i % colors.len()];
            let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.y)).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(render_err)?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled()))).map_err(render_err)?;
            for p in &s.plateaus {
                let mid = (p.from_x * p.to_x).sqrt();
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("{}B/s", si(p.value)),
                        (mid, p.value * 1.12),
                        (FONT, 13).into_font().color(&c),
                    )))
                    .map_err(render_err)?;
            }
        }
        chart
            .configure_series_labels()
            .border_style(RGBColor(200, 200, 200))
            .background_style(WHITE)
            .label_font((FONT, 13))
            .position(SeriesLabelPosition::LowerLeft)
            .draw()
            .map_err(render_err)?;
        root.present().map_err(render_err)?;
    }
    Ok(svg)
}
