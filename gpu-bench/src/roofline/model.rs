//! The roofline's data: measured ceilings, sweeps, placed kernels, peers and
//! the run's facts, as one versioned JSON document ([`RooflineReport`]).
//! Data only: the math is in `arithmetic.rs`, the renderers in `markdown.rs` and
//! `svg.rs`.

use crate::info::DeviceInfo;
use serde::{Deserialize, Serialize};

/// The `schema` field of every roofline JSON document.
pub const SCHEMA: &str = "gpu-bench.roofline";
/// The version of that schema this crate writes. Version 2 added
/// [`Sweep::ceiling`], [`Sweep::ridge`] (one intensity sweep per precision)
/// and [`RooflineReport::tensor_path`].
pub const SCHEMA_VERSION: u32 = 2;
/// The oldest version this crate reads: a version-1 document reads with
/// those fields empty (`None`), and is upgraded to [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_OLDEST: u32 = 1;

/// Where a memory ceiling's bytes come from.
///
/// The [module's example](crate::roofline) places a kernel of your own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MemoryLevel {
    /// Device memory (HBM).
    Hbm,
    /// The L2 cache.
    L2,
    /// The L1 cache of each SM.
    L1,
    /// Shared memory of each SM.
    Shared,
}

impl MemoryLevel {
    /// A short name (`"HBM"`).
    pub const fn name(self) -> &'static str {
        match self {
            MemoryLevel::Hbm => "HBM",
            MemoryLevel::L2 => "L2",
            MemoryLevel::L1 => "L1",
            MemoryLevel::Shared => "shared",
        }
    }
}

/// What a ceiling bounds.
///
/// Part of a [`RooflineReport`](crate::roofline::RooflineReport); the
/// [module's example](crate::roofline) reads one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CeilingKind {
    /// Bytes per second from a memory level.
    Memory(MemoryLevel),
    /// Floating-point operations per second.
    Compute,
}

/// One measured ceiling.
///
/// Part of a [`RooflineReport`](crate::roofline::RooflineReport); the
/// [module's example](crate::roofline) reads one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// Its name (`"HBM read"`, `"FP32 FMA"`).
    pub name: String,
    /// Memory or compute.
    pub kind: CeilingKind,
    /// The measured rate: bytes/s (memory) or FLOP/s (compute).
    pub value: f64,
    /// Relative noise of the median it comes from (0.01 = 1 %).
    pub noise: f64,
    /// The datasheet-style figure for the same thing, where one is known:
    /// from the memory clock and bus, or per-SM rates at the driver's
    /// maximum SM clock.
    pub datasheet: Option<f64>,
    /// The SM clock measured while the probe ran, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// The theoretical peak at that measured clock.
    pub peak_at_clock: Option<f64>,
    /// The kernel that measured it.
    pub kernel: String,
    /// Its configuration (variant, grid, size).
    pub config: String,
    /// How its result was checked.
    pub check: String,
    /// Whether the roofline chart draws it as a roof line.
    #[serde(default = "yes")]
    pub roof: bool,
}

fn yes() -> bool {
    true
}

/// One point of a sweep.
///
/// Part of a [`RooflineReport`](crate::roofline::RooflineReport); the
/// [module's example](crate::roofline) reads one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The swept quantity (bytes of working set, FLOPs per byte).
    pub x: f64,
    /// The measured rate (bytes/s or FLOP/s).
    pub y: f64,
    /// A second rate where the sweep has one (the intensity sweep's bytes/s).
    #[serde(default)]
    pub y2: Option<f64>,
}

/// A run of sweep points whose rates stay within a band: a cache level.
///
/// Part of a [`RooflineReport`](crate::roofline::RooflineReport); the
/// [module's example](crate::roofline) reads one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plateau {
    /// First x of the run.
    pub from_x: f64,
    /// Last x of the run.
    pub to_x: f64,
    /// Median rate over the run.
    pub value: f64,
}

/// A sweep: the working-set sweep (x = bytes, y = bytes/s) or the
/// intensity sweep (x = FLOP/byte, y = FLOP/s).
///
/// Part of a [`RooflineReport`](crate::roofline::RooflineReport); the
/// [module's example](crate::roofline) reads one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Its name.
    pub name: String,
    /// What x is.
    pub x_label: String,
    /// What y is.
    pub y_label: String,
    /// The points, in sweep order.
    pub points: Vec<SweepPoint>,
    /// Plateaus found in the points.
    pub plateaus: Vec<Plateau>,
    /// Whether the chart draws it (the intensity sweep lives in the
    /// roofline's axes; the working-set sweep does not).
    pub on_roofline: bool,
    /// The compute ceiling an intensity sweep is held against (`"FP64
    /// FMA"`): the chart draws the curve in that ceiling's colour. `None`
    /// for working-set sweeps and in version-1 documents.
    #[serde(default)]
    pub ceiling: Option<String>,
    /// An intensity sweep's empirical ridge point, FLOP/byte: its best
    /// FLOP/s over its best bytes/s. `None` for working-set sweeps and in
    /// version-1 documents (whose sweep name carries it).
    #[serde(default)]
    pub ridge: Option<f64>,
}

/// Memory- or compute-bound.
///
/// The [module's example](crate::roofline) places a kernel of your own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Bound {
    /// Left of the ridge: the memory roof is the lower one.
    Memory,
    /// Right of the ridge.
    Compute,
}

/// A kernel placed under the roofs.
///
/// The [module's example](crate::roofline) places a kernel of your own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// The kernel (and its size).
    pub name: String,
    /// FLOPs of one run (cost model).
    pub flops: u64,
    /// Bytes of one run (cost model: each input read once, each output
    /// written once).
    pub bytes: u64,
    /// Median seconds of one run.
    pub seconds: f64,
    /// The memory level its working set lives in.
    pub level: MemoryLevel,
    /// The compute ceiling it is held against.
    pub compute: String,
    /// FLOPs per byte (infinite for a kernel that moves no bytes; JSON has
    /// no infinity, so it is written as `null` and read back as infinite).
    #[serde(deserialize_with = "null_is_infinite")]
    pub intensity: f64,
    /// FLOP/s achieved.
    pub achieved_flops: f64,
    /// Bytes/s achieved.
    pub achieved_bytes: f64,
    /// The roof at its intensity, FLOP/s (for intensity 0: the memory roof
    /// in bytes/s, see `pct_of_roof`).
    pub roof: f64,
    /// Achieved over roof: FLOP/s over the roof's FLOP/s, or, for a kernel
    /// without FLOPs, bytes/s over the memory roof.
    pub pct_of_roof: f64,
    /// Which roof is the lower at its intensity.
    pub bound: Bound,
    /// The ridge point of the two roofs, FLOP/byte.
    #[serde(deserialize_with = "null_is_infinite")]
    pub ridge: f64,
}

/// Reads a number, or `null` (how serde_json writes a non-finite float) as
/// positive infinity.
fn null_is_infinite<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// A peer's figure measured in the same device call (PyTorch).
///
/// Part of a [`RooflineReport`](crate::roofline::RooflineReport); the
/// [module's example](crate::roofline) reads one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peer {
    /// What (`"torch copy_ 1 GiB f32"`).
    pub name: String,
    /// The rate.
    pub value: f64,
    /// `"B/s"` or `"FLOP/s"`.
    pub unit: String,
}

/// One configuration of a tuning search (`gpu-bench roofline --tune`).
///
/// Part of a [`RooflineReport`](crate::roofline::RooflineReport); the
/// [module's example](crate::roofline) reads one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneRow {
    /// The probe (`"HBM copy"`).
    pub probe: String,
    /// The configuration in words (variant, grid).
    pub config: String,
    /// The measured rate.
    pub value: f64,
}

/// How long a phase of the run took.
///
/// Part of a [`RooflineReport`](crate::roofline::RooflineReport); the
/// [module's example](crate::roofline) reads one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// The phase.
    pub name: String,
    /// Wall seconds.
    pub seconds: f64,
}

/// The whole roofline run.
///
/// The [module's example](crate::roofline) places a kernel of your own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RooflineReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// [`SCHEMA_VERSION`].
    pub version: u32,
    /// UTC date and time of the run.
    pub created: String,
    /// The command line.
    pub command: String,
    /// The device.
    pub device: DeviceInfo,
    /// The kernel driver's version (`/proc/driver/nvidia/version`), where
    /// readable.
    pub driver_version: Option<String>,
    /// Whether sizes were scaled down (`--quick`, or the simulator).
    pub scaled_down: bool,
    /// The SM clock measured by the clock probe before the probes, MHz.
    pub idle_clock_mhz: Option<f64>,
    /// The ceilings.
    pub ceilings: Vec<Ceiling>,
    /// The sweeps.
    pub sweeps: Vec<Sweep>,
    /// The placed kernels.
    pub placements: Vec<Placement>,
    /// Peers measured in the same device call.
    #[serde(default)]
    pub peers: Vec<Peer>,
    /// Phases and their wall time.
    pub phases: Vec<Phase>,
    /// Tuning searches, when the run made them.
    #[serde(default)]
    pub tuning: Vec<TuneRow>,
    /// Which tensor-core path measured the tensor ceilings (`"wgmma"`,
    /// `"mma.sync"`, with why), where the run measured them.
    #[serde(default)]
    pub tensor_path: Option<String>,
    /// Notes.
    pub notes: Vec<String>,
}

impl RooflineReport {
    /// An empty report for `device`.
    pub fn new(device: DeviceInfo, command: String, created: String) -> RooflineReport {
        RooflineReport {
            schema: SCHEMA.into(),
            version: SCHEMA_VERSION,
            created,
            command,
            device,
            driver_version: None,
            scaled_down: false,
            idle_clock_mhz: None,
            ceilings: Vec::new(),
            sweeps: Vec::new(),
            placements: Vec::new(),
            peers: Vec::new(),
            phases: Vec::new(),
            tuning: Vec::new(),
            tensor_path: None,
            notes: Vec::new(),
        }
    }

    /// Whether the simulator produced it: every rate is then simulated.
    pub fn simulated(&self) -> bool {
        self.device.simulated
    }

    /// The ceiling named `name`.
    pub fn ceiling(&self, name: &str) -> Option<&Ceiling> {
        self.ceilings.iter().find(|c| c.name == name)
    }

    /// The highest measured ceiling of a memory level, bytes/s.
    pub fn memory_roof(&self, level: MemoryLevel) -> Option<&Ceiling> {
        self.ceilings
            .iter()
            .filter(|c| c.kind == CeilingKind::Memory(level))
            .max_by(|a, b| a.value.total_cmp(&b.value))
    }

    /// The JSON text (pretty, newline-terminated).
    ///
    /// # Errors
    /// A serialization error (non-finite numbers are written as `null`).
    pub fn to_json(&self) -> Result<String, crate::roofline::RooflineError> {
        serde_json::to_string_pretty(self)
            .map(|s| s + "\n")
            .map_err(|e| crate::roofline::RooflineError::Json(e.to_string()))
    }

    /// Reads a report, checking its schema and version
    /// ([`SCHEMA_VERSION_OLDEST`] to [`SCHEMA_VERSION`]); an older document
    /// comes back upgraded (its `version` is [`SCHEMA_VERSION`], the fields
    /// it lacks empty).
    ///
    /// # Errors
    /// [`RooflineError::Json`](crate::roofline::RooflineError::Json) for
    /// malformed JSON or another schema or version.
    pub fn from_json(text: &str) -> Result<RooflineReport, crate::roofline::RooflineError> {
        use crate::roofline::RooflineError;
        let head: serde_json::Value =
            serde_json::from_str(text).map_err(|e| RooflineError::Json(e.to_string()))?;
        let schema = head.get("schema").and_then(|v| v.as_str()).unwrap_or("");
        let version = head.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
        if schema != SCHEMA
            || !(u64::from(SCHEMA_VERSION_OLDEST)..=u64::from(SCHEMA_VERSION)).contains(&version)
        {
            return Err(RooflineError::Json(format!(
                "not a {SCHEMA} v{SCHEMA_VERSION_OLDEST}-v{SCHEMA_VERSION} document (schema {schema:?}, \
                 version {version})"
            )));
        }
        let mut report: RooflineReport =
            serde_json::from_value(head).map_err(|e| RooflineError::Json(e.to_string()))?;
        report.version = SCHEMA_VERSION;
        Ok(report)
    }
}
