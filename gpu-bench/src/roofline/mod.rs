//! The roofline: the machine's measured ceilings and where a kernel sits
//! under them.
//!
//! Throughput ≤ min(P, I · B) with intensity I = FLOPs / bytes moved. The
//! `gpu-bench roofline` command measures the ceilings (HBM, L2, L1/shared,
//! FMA per precision, tensor cores) and the intensity sweep into a
//! [`RooflineReport`] (versioned JSON), renders it as markdown and SVG, and
//! places every kernel of the `kernels` crate. This module is the data,
//! the arithmetic and the renderers; it needs no GPU (`--replay` re-renders
//! a saved report).
//!
//! # Placing your own kernel
//! Time it with [`Bench`](crate::Bench), give its FLOPs and bytes, and hold
//! it against a report measured on the same GPU:
//! ```
//! use gpu_bench::roofline::{MemoryLevel, PlaceRequest, RooflineReport, place};
//! # let text = gpu_bench::roofline::example_report_json();
//! // let text = std::fs::read_to_string("target/roofline/results.json")?;
//! let report = RooflineReport::from_json(&text)?;
//! let n: u64 = 1 << 28; // my kernel: y = a*x + y over 2^28 floats
//! let seconds = 1.0e-3; // its median, e.g. record.primary().unwrap().median()
//! let p = place(&report, &PlaceRequest {
//!     name: "my saxpy",
//!     flops: 2 * n,
//!     bytes: 12 * n,
//!     seconds,
//!     level: MemoryLevel::Hbm,
//!     compute: "FP32 FMA",
//! })?;
//! println!("{:.0} % of its roof, {:?}-bound", 100.0 * p.pct_of_roof, p.bound);
//! # Ok::<(), gpu_bench::roofline::RooflineError>(())
//! ```
//! Placing fails when the kernel measures above its roof on a real GPU: a
//! wrong cost model or a broken timer, never a result.

mod arithmetic;
mod markdown;
mod model;
mod svg;

pub use arithmetic::{
    ABOVE_ROOF_TOLERANCE, PlaceRequest, fma_lanes_per_sm_clock, fma_peak, log_sizes, place, plateaus, ridge,
    roof, tensor_flops_per_sm_clock, tensor_peak,
};
pub use markdown::{TargetRow, render as markdown, targets};
pub use model::{
    Bound, Ceiling, CeilingKind, MemoryLevel, Peer, Phase, Placement, Plateau, RooflineReport, SCHEMA,
    SCHEMA_VERSION, SCHEMA_VERSION_OLDEST, Sweep, SweepPoint, TuneRow,
};
pub use svg::{render as svg, render_cache as cache_svg, si};

/// Why a roofline operation failed.
///
/// The [module's example](crate::roofline) returns it from
/// [`place`] and [`RooflineReport::from_json`].
#[derive(Debug, Clone, PartialEq)]
pub enum RooflineError {
    /// A bad argument (a non-positive time, nothing to place).
    Invalid(String),
    /// The report has no ceiling the operation needs.
    NoCeiling(String),
    /// A kernel measured above its roof on a real GPU.
    AboveRoof {
        /// The kernel.
        name: String,
        /// Achieved over roof.
        pct_of_roof: f64,
        /// The memory level it was held against.
        level: String,
    },
    /// Malformed JSON, or another schema or version.
    Json(String),
    /// The SVG backend failed, or there was nothing to draw.
    Render(String),
}

impl std::fmt::Display for RooflineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RooflineError::Invalid(m) => write!(f, "roofline: {m}"),
            RooflineError::NoCeiling(m) => write!(f, "roofline: {m}"),
            RooflineError::AboveRoof { name, pct_of_roof, level } => write!(
                f,
                "roofline: {name} measured {:.1} % of its {level} roof: above the roof means a wrong \
                 cost model or a broken timer",
                100.0 * pct_of_roof
            ),
            RooflineError::Json(m) => write!(f, "roofline JSON: {m}"),
            RooflineError::Render(m) => write!(f, "roofline chart: {m}"),
        }
    }
}

impl std::error::Error for RooflineError {}

/// The facts of an H100-like device named "Example GPU (made-up figures)",
/// for examples and tests.
pub(crate) fn example_device(simulated: bool) -> crate::info::DeviceInfo {
    crate::info::DeviceInfo {
        ordinal: 0,
        name: "Example GPU (made-up figures)".into(),
        compute_capability: (9, 0),
        sm_count: 132,
        sm_clock_mhz: 1980.0,
        memory_clock_mhz: 2619.0,
        memory_bus_bits: 5120,
        l2_bytes: 50 << 20,
        total_memory_bytes: 80 << 30,
        driver_cuda_version: "13.0".into(),
        driver_origin: "example".into(),
        simulated,
        theoretical_bandwidth_gbs: 3352.0,
        pcie: None,
    }
}

/// A small report (two HBM ceilings, FP32, an L2 ceiling) as JSON, for
/// examples and tests: its figures are made up, and it says so.
pub fn example_report_json() -> String {
    let device = example_device(true);
    let mut r = RooflineReport::new(device, "example".into(), "example".into());
    let c = |name: &str, kind, value| Ceiling {
        name: name.into(),
        kind,
        value,
        noise: 0.0,
        datasheet: None,
        sm_clock_mhz: None,
        peak_at_clock: None,
        kernel: "example".into(),
        config: String::new(),
        check: "made up".into(),
        roof: true,
    };
    r.ceilings.push(c("HBM read", CeilingKind::Memory(MemoryLevel::Hbm), 3.2e12));
    r.ceilings.push(c("HBM copy", CeilingKind::Memory(MemoryLevel::Hbm), 3.0e12));
    r.ceilings.push(c("L2", CeilingKind::Memory(MemoryLevel::L2), 10e12));
    r.ceilings.push(c("FP32 FMA", CeilingKind::Compute, 64e12));
    r.to_json().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_schema_check() {
        let text = example_report_json();
        let r = RooflineReport::from_json(&text).unwrap();
        assert_eq!(r.ceilings.len(), 4);
        assert_eq!(RooflineReport::from_json(&r.to_json().unwrap()).unwrap(), r);
        let other = text.replace("\"version\": 2", "\"version\": 99");
        assert!(matches!(RooflineReport::from_json(&other), Err(RooflineError::Json(m)) if m.contains("99")));
        // A version-1 document (no sweep ceilings, no tensor path) still
        // reads, upgraded.
        let mut v1: serde_json::Value = serde_json::from_str(&text).unwrap();
        v1["version"] = 1.into();
        v1.as_object_mut().unwrap().remove("tensor_path");
        let old = RooflineReport::from_json(&v1.to_string()).unwrap();
        assert_eq!(old.version, SCHEMA_VERSION);
        assert_eq!(old.tensor_path, None);
        v1["version"] = 0.into();
        assert!(RooflineReport::from_json(&v1.to_string()).is_err());
        assert!(RooflineReport::from_json("{").is_err());
    }

    #[test]
    fn missed_memory_targets_say_how_flat_the_configurations_tried_were() {
        let mut r = RooflineReport::from_json(&example_report_json()).unwrap();
        // An HBM read under 95 % of the example's 3.352 TB/s.
        r.ceilings.iter_mut().filter(|c| c.name == "HBM read").for_each(|c| c.value = 3.14e12);
        let mut whole = r.ceiling("L2").unwrap().clone();
        whole.name = "L2 (whole working sets)".into();
        whole.value = 7.79e12;
        whole.roof = false;
        r.ceilings.push(whole);
        for (probe, values) in [
            ("L2 (whole working sets)", [7.79e12, 7.67e12, 7.56e12, 7.69e12]),
            ("HBM read (main job's candidates)", [3.05e12, 3.12e12, 3.14e12, 3.135e12]),
        ] {
            for (i, value) in values.into_iter().enumerate() {
                r.tuning.push(TuneRow { probe: probe.into(), config: format!("config {i}"), value });
            }
        }
        let rows = targets(&r);
        let row = |what: &str| rows.iter().find(|t| t.what == what).unwrap();
        let l2 = row("L2 (whole working sets, 1 MB to the L2 size)");
        assert_eq!(l2.met, Some(false));
        assert_eq!(
            l2.why.as_deref(),
            Some("1 of the 4 configurations tried lie within 1 % of the best (7.79 TB/s)")
        );
        let hbm = row("HBM read");
        assert_eq!(hbm.met, Some(false));
        assert_eq!(
            hbm.why.as_deref(),
            Some("3 of the 4 configurations tried lie within 1 % of the best (3.14 TB/s)")
        );
        assert!(markdown(&r).contains("1 of the 4 configurations tried"));
    }

    #[test]
    fn renders_markdown_and_svg() {
        let mut r = RooflineReport::from_json(&example_report_json()).unwrap();
        let p = place(
            &r,
            &PlaceRequest {
                name: "saxpy",
                flops: 2 << 20,
                bytes: 12 << 20,
                seconds: 1e-5,
                level: MemoryLevel::Hbm,
                compute: "FP32 FMA",
            },
        )
        .unwrap();
        r.placements.push(p);
        let md = markdown(&r);
        assert!(md.contains("| HBM read | 3.20 TB/s"), "{md}");
        assert!(md.contains("saxpy"));
        assert!(md.contains("Simulated"));
        let s = svg(&r).unwrap();
        assert!(s.starts_with("<svg") || s.starts_with("<?xml"), "{}", &s[..60.min(s.len())]);
        assert!(s.contains("HBM read 3.20 TB/s"));
        assert!(s.contains("saxpy"));
        assert!(s.contains("SIMULATED"));
        // No working-set sweep in the example: the cache chart says so.
        assert!(matches!(cache_svg(&r), Err(RooflineError::Render(_))));
        // A kernel that moves no bytes: infinite intensity survives JSON.
        let p = place(
            &r,
            &PlaceRequest {
                name: "registers only",
                flops: 1 << 30,
                bytes: 0,
                seconds: 1e-3,
                level: MemoryLevel::Hbm,
                compute: "FP32 FMA",
            },
        )
        .unwrap();
        assert_eq!(p.intensity, f64::INFINITY);
        r.placements.push(p);
        let back = RooflineReport::from_json(&r.to_json().unwrap()).unwrap();
        assert_eq!(back.placements.last().map(|p| p.intensity), Some(f64::INFINITY));
        assert!(svg(&back).is_ok());
        r.ceilings.clear();
        assert!(matches!(svg(&r), Err(RooflineError::Render(_))));
    }
}
