//! The roofline's arithmetic: the roof at an intensity, the ridge point,
//! placing a kernel from its cost model and median time, plateau detection
//! in a sweep, and datasheet-style peaks from the device's facts.

use super::RooflineError;
use super::model::{Bound, MemoryLevel, Placement, Plateau, RooflineReport, SweepPoint};
use crate::info::DeviceInfo;

/// How far above its roof a placed kernel may measure before the placement
/// fails (noise of the kernel's median and of the ceilings').
pub const ABOVE_ROOF_TOLERANCE: f64 = 0.05;

/// The attainable FLOP/s at `intensity` FLOP/byte under a memory roof of
/// `bytes_per_s` and a compute roof of `flops`: `min(flops, I * B)`.
pub fn roof(intensity: f64, bytes_per_s: f64, flops: f64) -> f64 {
    (intensity * bytes_per_s).min(flops)
}

/// The ridge point, FLOP/byte: where the two roofs meet.
pub fn ridge(bytes_per_s: f64, flops: f64) -> f64 {
    if bytes_per_s > 0.0 { flops / bytes_per_s } else { f64::INFINITY }
}

/// What a caller knows about one run of a kernel, to place it.
///
/// The [module's example](crate::roofline) places a kernel of your own.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaceRequest<'a> {
    /// The kernel's name (and size).
    pub name: &'a str,
    /// FLOPs of one run.
    pub flops: u64,
    /// Bytes of one run (each input read once, each output written once).
    pub bytes: u64,
    /// Median seconds of one run (from a [`Bench`](crate::Bench) record).
    pub seconds: f64,
    /// The memory level its working set lives in: [`MemoryLevel::Hbm`] for
    /// data several times the L2, timed hot or cold; [`MemoryLevel::L2`] for
    /// a working set that fits in the L2 and is timed hot.
    pub level: MemoryLevel,
    /// The compute ceiling to hold it against (`"FP32 FMA"`).
    pub compute: &'a str,
}

/// Places a kernel under `report`'s roofs: intensity, achieved rates, the
/// roof at its intensity, % of roof, bound and ridge.
///
/// # Errors
/// [`RooflineError::Invalid`] for a non-positive time or no work;
/// [`RooflineError::NoCeiling`] when the report lacks the memory level or
/// the compute ceiling; [`RooflineError::AboveRoof`] when the kernel
/// measures more than [`ABOVE_ROOF_TOLERANCE`] above its roof on a real GPU
/// (a wrong cost model or a broken timer, never a result). On the simulator
/// that check is off: simulated durations are not measurements.
pub fn place(report: &RooflineReport, req: &PlaceRequest<'_>) -> Result<Placement, RooflineError> {
    if !(req.seconds.is_finite() && req.seconds > 0.0) {
        return Err(RooflineError::Invalid(format!("{}: time {} s is not positive", req.name, req.seconds)));
    }
    if req.flops == 0 && req.bytes == 0 {
        return Err(RooflineError::Invalid(format!("{}: no FLOPs and no bytes to place", req.name)));
    }
    let mem = report
        .memory_roof(req.level)
        .ok_or_else(|| RooflineError::NoCeiling(format!("no {} ceiling in the report", req.level.name())))?
        .value;
    let compute = report
        .ceiling(req.compute)
        .ok_or_else(|| RooflineError::NoCeiling(format!("no ceiling named {:?} in the report", req.compute)))?
        .value;
    let intensity = if req.bytes == 0 { f64::INFINITY } else { req.flops as f64 / req.bytes as f64 };
    let achieved_flops = req.flops as f64 / req.seconds;
    let achieved_bytes = req.bytes as f64 / req.seconds;
    let ridge = ridge(mem, compute);
    let (roof_value, pct) = if req.flops == 0 {
        (mem, achieved_bytes / mem)
    } else {
        let r = roof(intensity, mem, compute);
        (r, achieved_flops / r)
    };
    if !report.simulated() && pct > 1.0 + ABOVE_ROOF_TOLERANCE {
        return Err(RooflineError::AboveRoof {
            name: req.name.to_owned(),
            pct_of_roof: pct,
            level: req.level.name().to_owned(),
        });
    }
    Ok(Placement {
        name: req.name.to_owned(),
        flops: req.flops,
        bytes: req.bytes,
        seconds: req.seconds,
        level: req.level,
        compute: req.compute.to_owned(),
        intensity,
        achieved_flops,
        achieved_bytes,
        roof: roof_value,
        pct_of_roof: pct,
        bound: if intensity < ridge { Bound::Memory } else { Bound::Compute },
        ridge,
    })
}

/// Runs of at least `min_len` consecutive points whose rates stay within
/// `band` (relative) of the run's first point: the plateaus of a
/// working-set sweep (L1, L2, HBM). Each plateau's value is the median of
/// its points.
pub fn plateaus(points: &[SweepPoint], band: f64, min_len: usize) -> Vec<Plateau> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < points.len() {
        let base = points[start].y;
        let mut end = start + 1;
        while end < points.len() && (points[end].y - base).abs() <= band * base.abs() {
            end += 1;
        }
        if end - start >= min_len.max(1) {
            let mut ys: Vec<f64> = points[start..end].iter().map(|p| p.y).collect();
            ys.sort_by(f64::total_cmp);
            out.push(Plateau { from_x: points[start].x, to_x: points[end - 1].x, value: ys[ys.len() / 2] });
            start = end;
        } else {
            start += 1;
        }
    }
    out
}

/// `count` sizes from `from` to `to` spaced evenly in log, each rounded
/// down to a multiple of `quantum` (at least `quantum`), without repeats.
pub fn log_sizes(from: u64, to: u64, count: usize, quantum: u64) -> Vec<u64> {
    let q = quantum.max(1);
    let (lo, hi) = (from.max(q) as f64, to.max(from).max(q) as f64);
    let mut out: Vec<u64> = (0..count.max(1))
        .map(|i| {
            let t = if count > 1 { i as f64 / (count - 1) as f64 } else { 0.0 };
            let v = (lo.ln() + t * (hi.ln() - lo.ln())).exp();
            ((v / q as f64).round() as u64).max(1) * q
        })
        .collect();
    out.dedup();
    out
}

/// FMA lanes per SM per clock for a precision name (`"FP64"`, `"FP32"`,
/// `"FP16"`, `"BF16"`) on compute capability `cc`, where known (the
/// vendor's per-SM tables for Ampere A100 and Hopper).
pub fn fma_lanes_per_sm_clock(cc: (i32, i32), precision: &str) -> Option<f64> {
    let v = match (cc, precision) {
        ((9, 0), "FP64") => 64.0,
        ((9, 0), "FP32") => 128.0,
        ((9, 0), "FP16" | "BF16") => 256.0,
        ((8, 0), "FP64") => 32.0,
        ((8, 0), "FP32") => 64.0,
        ((8, 0), "FP16" | "BF16") => 256.0,
        _ => return None,
    };
    Some(v)
}

/// Dense tensor-core FLOPs per SM per clock for `"BF16"`, `"FP16"` or
/// `"FP8"` on compute capability `cc`, where known (Hopper: 4096 for the
/// 16-bit types, 8192 for FP8 — the datasheet's 989 / 1979 TFLOP/s at 132
/// SMs and 1830 MHz).
pub fn tensor_flops_per_sm_clock(cc: (i32, i32), precision: &str) -> Option<f64> {
    match (cc, precision) {
        ((9, 0), "BF16" | "FP16") => Some(4096.0),
        ((9, 0), "FP8") => Some(8192.0),
        ((8, 0), "BF16" | "FP16") => Some(2048.0),
        _ => None,
    }
}

/// The FMA peak of `precision`, FLOP/s, at `clock_mhz` on `device`.
pub fn fma_peak(device: &DeviceInfo, precision: &str, clock_mhz: f64) -> Option<f64> {
    fma_lanes_per_sm_clock(device.compute_capability, precision)
        .map(|lanes| 2.0 * lanes * f64::from(device.sm_count) * clock_mhz * 1e6)
}

/// The dense tensor peak of `precision`, FLOP/s, at `clock_mhz` on `device`.
pub fn tensor_peak(device: &DeviceInfo, precision: &str, clock_mhz: f64) -> Option<f64> {
    tensor_flops_per_sm_clock(device.compute_capability, precision)
        .map(|f| f * f64::from(device.sm_count) * clock_mhz * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roofline::model::{Ceiling, CeilingKind};

    pub(crate) fn device(simulated: bool) -> DeviceInfo {
        crate::roofline::example_device(simulated)
    }

    fn ceiling(name: &str, kind: CeilingKind, value: f64) -> Ceiling {
        Ceiling {
            name: name.into(),
            kind,
            value,
            noise: 0.0,
            datasheet: None,
            sm_clock_mhz: None,
            peak_at_clock: None,
            kernel: "k".into(),
            config: String::new(),
            check: String::new(),
            roof: true,
        }
    }

    pub(crate) fn report(simulated: bool) -> RooflineReport {
        let mut r = RooflineReport::new(device(simulated), "test".into(), "now".into());
        r.ceilings.push(ceiling("HBM copy", CeilingKind::Memory(MemoryLevel::Hbm), 3.0e12));
        r.ceilings.push(ceiling("HBM read", CeilingKind::Memory(MemoryLevel::Hbm), 3.2e12));
        r.ceilings.push(ceiling("L2", CeilingKind::Memory(MemoryLevel::L2), 10e12));
        r.ceilings.push(ceiling("FP32 FMA", CeilingKind::Compute, 64e12));
        r
    }

    #[test]
    fn roof_and_ridge() {
        assert_eq!(roof(1.0, 3e12, 60e12), 3e12);
        assert_eq!(roof(100.0, 3e12, 60e12), 60e12);
        assert_eq!(ridge(3e12, 60e12), 20.0);
        assert_eq!(ridge(0.0, 1.0), f64::INFINITY);
    }

    #[test]
    fn placing_a_memory_bound_kernel() {
        let r = report(false);
        // Triad over 1 Gi floats: 2 GFLOP, 12 GB, in 4 ms: 3 TB/s, 0.5 TFLOP/s.
        let req = PlaceRequest {
            name: "triad",
            flops: 2 << 30,
            bytes: 12 << 30,
            seconds: 12.0 * (1u64 << 30) as f64 / 3.0e12,
            level: MemoryLevel::Hbm,
            compute: "FP32 FMA",
        };
        let p = place(&r, &req).unwrap();
        assert_eq!(p.bound, Bound::Memory);
        assert!((p.intensity - 1.0 / 6.0).abs() < 1e-12);
        // Held against the best HBM ceiling (read, 3.2 TB/s).
        assert!((p.pct_of_roof - 3.0 / 3.2).abs() < 1e-9, "{}", p.pct_of_roof);
        assert!((p.ridge - 20.0).abs() < 1e-9);
    }

    #[test]
    fn above_the_roof_fails_on_a_gpu_only() {
        let req = PlaceRequest {
            name: "too fast",
            flops: 0,
            bytes: 4 << 30,
            seconds: (4u64 << 30) as f64 / 4.0e12, // 4 TB/s over a 3.2 TB/s roof
            level: MemoryLevel::Hbm,
            compute: "FP32 FMA",
        };
        assert!(matches!(place(&report(false), &req), Err(RooflineError::AboveRoof { .. })));
        let p = place(&report(true), &req).unwrap();
        assert!(p.pct_of_roof > 1.2);
        // Held against L2 instead, it is under its roof.
        let l2 = PlaceRequest { level: MemoryLevel::L2, ..req.clone() };
        assert!(place(&report(false), &l2).unwrap().pct_of_roof < 0.5);
    }

    #[test]
    fn placement_errors_name_the_cause() {
        let r = report(false);
        let base = PlaceRequest {
            name: "k",
            flops: 1,
            bytes: 1,
            seconds: 1.0,
            level: MemoryLevel::Shared,
            compute: "FP32 FMA",
        };
        assert!(matches!(place(&r, &base), Err(RooflineError::NoCeiling(m)) if m.contains("shared")));
        let c = PlaceRequest { level: MemoryLevel::Hbm, compute: "FP8 tensor", ..base.clone() };
        assert!(matches!(place(&r, &c), Err(RooflineError::NoCeiling(m)) if m.contains("FP8")));
        let t = PlaceRequest { seconds: 0.0, level: MemoryLevel::Hbm, ..base.clone() };
        assert!(matches!(place(&r, &t), Err(RooflineError::Invalid(_))));
    }

    #[test]
    fn plateaus_are_found() {
        let ys = [13.0, 12.9, 12.8, 10.1, 10.0, 9.9, 9.8, 9.7, 5.0, 3.1, 3.0, 3.0];
        let pts: Vec<SweepPoint> =
            ys.iter().enumerate().map(|(i, &y)| SweepPoint { x: i as f64, y, y2: None }).collect();
        let p = plateaus(&pts, 0.05, 3);
        assert_eq!(p.len(), 3, "{p:?}");
        assert_eq!((p[0].from_x, p[0].to_x), (0.0, 2.0));
        assert_eq!((p[1].from_x, p[1].to_x), (3.0, 7.0));
        assert_eq!(p[1].value, 9.9);
        assert_eq!((p[2].from_x, p[2].value), (9.0, 3.0));
        assert!(plateaus(&pts[..2], 0.05, 3).is_empty());
    }

    #[test]
    fn log_spaced_sizes() {
        let s = log_sizes(256 << 10, 200 << 20, 24, 4096);
        assert_eq!(s.first(), Some(&(256 << 10)));
        assert!(s.last().copied().unwrap() <= 200 << 20 && s.last().copied().unwrap() > 199 << 20);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        // Not all powers of two.
        assert!(s.iter().any(|v| !v.is_power_of_two()));
    }

    #[test]
    fn peaks() {
        let d = device(false);
        // H100 SXM FP32: 2 * 128 * 132 * 1980 MHz = 66.9 TFLOP/s.
        let p = fma_peak(&d, "FP32", 1980.0).unwrap();
        assert!((p / 1e12 - 66.9).abs() < 0.1, "{p}");
        let t = tensor_peak(&d, "BF16", 1830.0).unwrap();
        assert!((t / 1e12 - 989.4).abs() < 0.5, "{t}");
        assert_eq!(fma_peak(&DeviceInfo { compute_capability: (7, 5), ..d }, "FP32", 1.0), None);
    }
}
