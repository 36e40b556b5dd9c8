//! What the device is (name, SMs, clocks, memory bus, L2, PCIe link,
//! driver), and the two checks every report carries: the SM clock measured
//! by a probe kernel, and the event timer's resolution.

use gpu_sync::cuda_sys::CUdevice_attribute as A;
use gpu_sync::{Device, Result};
use serde::{Deserialize, Serialize};

/// The device facts a measurement is reported with.
///
/// ```
/// # gpu_sync::sim::install()?;
/// let device = gpu_sync::Device::get(0)?;
/// let info = gpu_bench::device_info(&device)?;
/// assert!(info.simulated && info.driver_origin == "cuda-sim");
/// assert!(info.sm_count > 0 && info.theoretical_bandwidth_gbs > 0.0);
/// assert!(info.pcie.is_none()); // the simulator has no PCIe link to read
/// assert!(info.to_markdown().contains("theoretical bandwidth"));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: i32,
    /// `cuDeviceGetName`.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sm_count: i32,
    /// Peak SM clock the driver reports, MHz.
    pub sm_clock_mhz: f64,
    /// Peak memory clock the driver reports, MHz.
    pub memory_clock_mhz: f64,
    /// Memory bus width, bits.
    pub memory_bus_bits: i32,
    /// L2 cache size, bytes.
    pub l2_bytes: i64,
    /// Total device memory, bytes.
    pub total_memory_bytes: u64,
    /// Driver CUDA version (`"13.0"`).
    pub driver_cuda_version: String,
    /// Where the driver was loaded from (library path or software driver).
    pub driver_origin: String,
    /// Whether the driver is the simulator: every time is simulated.
    #[serde(default)]
    pub simulated: bool,
    /// Bandwidth implied by the memory clock and bus (2 transfers per clock),
    /// GB/s. A datasheet-style ceiling, not a measurement.
    pub theoretical_bandwidth_gbs: f64,
    /// The PCIe link, where sysfs tells it.
    #[serde(default)]
    pub pcie: Option<PcieLink>,
}

/// The PCIe link of the device, from sysfs
/// (`/sys/bus/pci/devices/<bus id>/current_link_{speed,width}`; the CUDA
/// driver API has no attribute for it).
///
/// ```
/// use gpu_bench::PcieLink;
/// let link = PcieLink::parse("0000:17:00.0", "32.0 GT/s PCIe\n", "16\n").unwrap();
/// assert_eq!(link.generation(), 5);
/// assert!((link.theoretical_gbs - 63.0).abs() < 0.1); // 32 × 16 × 128/130 / 8
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    /// PCI bus id (`0000:17:00.0`).
    pub bus_id: String,
    /// Transfer rate per lane, GT/s (32 for PCIe 5.0).
    pub gt_per_s: f64,
    /// Lanes.
    pub width: u32,
    /// Theoretical payload rate per direction, GB/s: rate × lanes × line
    /// encoding (128b/130b from PCIe 3.0 on, 8b/10b before) / 8. TLP headers
    /// take another ~5–10 %.
    pub theoretical_gbs: f64,
}

impl PcieLink {
    /// The link of a device at `bus_id`, if sysfs has it.
    pub fn read(bus_id: &str) -> Option<PcieLink> {
        let dir = std::path::Path::new("/sys/bus/pci/devices").join(bus_id);
        let speed = std::fs::read_to_string(dir.join("current_link_speed")).ok()?;
        let width = std::fs::read_to_string(dir.join("current_link_width")).ok()?;
        PcieLink::parse(bus_id, &speed, &width)
    }

    /// Parses sysfs's `"32.0 GT/s PCIe"` and `"16"`.
    pub fn parse(bus_id: &str, speed: &str, width: &str) -> Option<PcieLink> {
        let gt: f64 = speed.split_whitespace().next()?.parse().ok()?;
        let width: u32 = width.trim().parse().ok()?;
        let encoding = if gt >= 8.0 { 128.0 / 130.0 } else { 0.8 };
        Some(PcieLink {
            bus_id: bus_id.to_owned(),
            gt_per_s: gt,
            width,
            theoretical_gbs: gt * f64::from(width) * encoding / 8.0,
        })
    }

    /// PCIe generation from the rate (2.5 GT/s = 1 … 32 GT/s = 5, 64 = 6).
    pub fn generation(&self) -> u32 {
        match self.gt_per_s {
            x if x >= 64.0 => 6,
            x if x >= 32.0 => 5,
            x if x >= 16.0 => 4,
            x if x >= 8.0 => 3,
            x if x >= 5.0 => 2,
            _ => 1,
        }
    }
}

/// Reads the device's facts (`cuDeviceGetAttribute`, `cuDeviceGetName`,
/// `cuDeviceTotalMem`; the PCIe link from sysfs).
///
/// # Errors
/// A driver error.
pub fn device_info(device: &Device) -> Result<DeviceInfo> {
    let mem_khz = f64::from(device.attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?);
    let bus = device.attribute(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?;
    let origin = gpu_sync::cuda_sys::installed().map(|d| d.origin().to_owned()).unwrap_or_default();
    let bus_id = format!(
        "{:04x}:{:02x}:{:02x}.0",
        device.attribute(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID).unwrap_or(0),
        device.attribute(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID).unwrap_or(0),
        device.attribute(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID).unwrap_or(0)
    );
    let simulated = origin.contains("sim");
    Ok(DeviceInfo {
        ordinal: device.ordinal(),
        name: device.name()?,
        compute_capability: device.compute_capability()?,
        sm_count: device.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        sm_clock_mhz: f64::from(device.attribute(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?) / 1e3,
        memory_clock_mhz: mem_khz / 1e3,
        memory_bus_bits: bus,
        l2_bytes: i64::from(device.attribute(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?),
        total_memory_bytes: device.total_memory()?,
        driver_cuda_version: gpu_sync::cuda_sys::version_string(device.driver_version()),
        driver_origin: origin,
        simulated,
        theoretical_bandwidth_gbs: 2.0 * mem_khz * 1e3 * f64::from(bus) / 8.0 / 1e9,
        pcie: if simulated { None } else { PcieLink::read(&bus_id) },
    })
}

/// The SM clock as the probe kernel measured it (`clock64` cycles over
/// `%globaltimer` nanoseconds), around a measurement.
///
/// A [`Report`](crate::Report) carries one when instruments were loaded
/// ([`Timer::clock`](crate::Timer::clock)); made from probes:
/// ```
/// use gpu_bench::ClockCheck;
/// let c = ClockCheck::of(vec![1755.0, 1980.0, 1979.0], 1980.0).unwrap();
/// assert_eq!((c.steady_mhz, c.min_mhz), (1980.0, 1755.0)); // a ramp at the start
/// assert!(ClockCheck::of(vec![], 1980.0).is_none()); // no probe, no check
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockCheck {
    /// Every probe, MHz, in order.
    pub probes_mhz: Vec<f64>,
    /// The steady clock: the highest probe, MHz.
    pub steady_mhz: f64,
    /// The lowest probe, MHz.
    pub min_mhz: f64,
    /// The clock the driver reports as the maximum, MHz.
    pub reported_max_mhz: f64,
}

impl ClockCheck {
    /// From probes in MHz; `None` without a probe.
    pub fn of(probes_mhz: Vec<f64>, reported_max_mhz: f64) -> Option<ClockCheck> {
        let steady = probes_mhz.iter().copied().fold(f64::NAN, f64::max);
        let min = probes_mhz.iter().copied().fold(f64::NAN, f64::min);
        (!probes_mhz.is_empty()).then_some(ClockCheck {
            probes_mhz,
            steady_mhz: steady,
            min_mhz: min,
            reported_max_mhz,
        })
    }
}

/// The event timer's resolution on this device: two timing events recorded
/// back to back with nothing between.
///
/// [`Timer`](crate::Timer) measures it at creation; from readings:
/// ```
/// use gpu_bench::Resolution;
/// // Empty event pairs reading 1.248 µs or one 32 ns step above.
/// let r = Resolution::of_idle_pairs(&[1.248e-6, 1.248e-6, 1.28e-6, 1.248e-6]);
/// assert_eq!((r.floor_s, r.pairs), (1.248e-6, 4));
/// assert!((r.step_s.unwrap() - 32e-9).abs() < 1e-12); // the tick, not the floor
/// assert_eq!(r.limit_s(), 1.248e-6); // a median must exceed 20× this
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// Median elapsed time of the empty pairs, seconds (the floor any
    /// measurement carries).
    pub floor_s: f64,
    /// The tick the readings are quantized to, seconds: the smallest step
    /// between two distinct elapsed times of the empty pairs (idle and, with
    /// instruments, busy; [`Resolution::tick_of`]), `None` when every
    /// reading agreed. An upper bound: a multiple of the true tick when too
    /// few distinct values were seen. (Until issue 15's anatomy this was the
    /// smallest non-zero reading, which is the floor: on the H100 it read
    /// 1.248 µs where the readings step by 32 ns,
    /// `docs/results/2026-11-25-event-anatomy.md`.)
    pub step_s: Option<f64>,
    /// Pairs measured.
    pub pairs: usize,
    /// The event-pair floor on a busy stream: the median of empty pairs
    /// queued behind the spin gate and run back to back, seconds (with
    /// instruments). What every gated sample carries on top of its work;
    /// results within 3× of it are flagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_floor_s: Option<f64>,
}

/// Differences between readings below this are the rounding of
/// `cuEventElapsedTime`'s `f32` milliseconds, not a step of the timer.
const READING_ROUNDING_S: f64 = 1e-11;

impl Resolution {
    /// The resolution seen in the elapsed times (seconds) of `pairs` empty
    /// event pairs on an idle stream: the median is the floor, and the tick
    /// is [`Resolution::tick_of`] the readings.
    pub fn of_idle_pairs(readings: &[f64]) -> Resolution {
        Resolution {
            floor_s: crate::stats::Summary::of(readings).map_or(0.0, |s| s.median),
            step_s: Resolution::tick_of(readings),
            pairs: readings.len(),
            busy_floor_s: None,
        }
    }

    /// The tick of an event timer's readings (seconds): the smallest step
    /// between two distinct values, `None` when all agree. Not the smallest
    /// reading: that is the floor, a property of the GPU's front end, not of
    /// the clock.
    pub fn tick_of(readings: &[f64]) -> Option<f64> {
        let mut v: Vec<f64> = readings.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        v.windows(2)
            .map(|w| w[1] - w[0])
            .filter(|&d| d > READING_ROUNDING_S)
            .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.min(d))))
    }

    /// What a median must exceed 20× of to be trusted: the larger of the
    /// floor and the tick (0.5 µs, the documented `cuEventElapsedTime`
    /// resolution, when no tick was seen).
    pub fn limit_s(&self) -> f64 {
        self.floor_s.max(self.step_s.unwrap_or(0.5e-6))
    }
}

impl DeviceInfo {
    /// A two-column markdown table.
    pub fn to_markdown(&self) -> String {
        let mut rows = vec![
            ("device", format!("{} (#{})", self.name, self.ordinal)),
            ("compute capability", format!("{}.{}", self.compute_capability.0, self.compute_capability.1)),
            ("SMs", self.sm_count.to_string()),
            ("SM clock (max)", format!("{:.0} MHz", self.sm_clock_mhz)),
            ("memory clock (max)", format!("{:.0} MHz", self.memory_clock_mhz)),
            ("memory bus", format!("{} bits", self.memory_bus_bits)),
            ("memory", format!("{:.1} GiB", self.total_memory_bytes as f64 / (1u64 << 30) as f64)),
            ("L2 cache", format!("{:.1} MiB", self.l2_bytes as f64 / (1u64 << 20) as f64)),
            (
                "theoretical bandwidth",
                format!("{:.0} GB/s (clock x bus, not measured)", self.theoretical_bandwidth_gbs),
            ),
            ("driver", format!("CUDA {} ({})", self.driver_cuda_version, self.driver_origin)),
        ];
        if let Some(p) = &self.pcie {
            rows.push((
                "PCIe link",
                format!(
                    "gen {} x{} ({} GT/s): {:.1} GB/s per direction theoretical",
                    p.generation(),
                    p.width,
                    p.gt_per_s,
                    p.theoretical_gbs
                ),
            ));
        }
        if self.simulated {
            rows.push(("times", "SIMULATED (cuda-sim): not a measurement of any GPU".into()));
        }
        let mut s = String::from("| property | value |\n|---|---|\n");
        for (k, v) in rows {
            s.push_str(&format!("| {k} | {v} |\n"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_from_sysfs_text() {
        let p = PcieLink::parse("0000:17:00.0", "32.0 GT/s PCIe\n", "16\n").unwrap();
        assert_eq!((p.generation(), p.width), (5, 16));
        assert!((p.theoretical_gbs - 63.015).abs() < 0.01, "{}", p.theoretical_gbs);
        let g2 = PcieLink::parse("x", "5.0 GT/s PCIe", "8").unwrap();
        assert!((g2.theoretical_gbs - 4.0).abs() < 1e-9);
        assert!(PcieLink::parse("x", "Unknown", "16").is_none());
    }

    #[test]
    fn clock_check_takes_the_highest_probe_as_steady() {
        let c = ClockCheck::of(vec![1500.0, 1980.0, 1900.0], 1980.0).unwrap();
        assert_eq!((c.steady_mhz, c.min_mhz), (1980.0, 1500.0));
        assert!(ClockCheck::of(vec![], 1.0).is_none());
        let r = Resolution { floor_s: 1e-6, step_s: None, pairs: 4, busy_floor_s: None };
        assert_eq!(r.limit_s(), 1e-6);
    }

    /// Readings as cuEventElapsedTime gives them: f32 milliseconds.
    fn readings(ns: &[u32]) -> Vec<f64> {
        ns.iter().map(|&n| f64::from(n as f32 / 1e6) * 1e-3).collect()
    }

    #[test]
    fn the_tick_is_the_step_between_readings_not_the_smallest_reading() {
        // The H100's empty pairs (event-anatomy, phase A): 1248 to 1312 ns
        // in steps of 32 ns. The tick is 32 ns; the floor is 1.28 µs. Before
        // the fix the tick was the smallest reading, 1.248 µs.
        let v = readings(&[1280, 1280, 1312, 1248, 1280, 1280, 1312, 1280]);
        let r = Resolution::of_idle_pairs(&v);
        let tick = r.step_s.unwrap();
        assert!((tick - 32e-9).abs() < 0.5e-9, "{tick}");
        assert!((r.floor_s - 1.28e-6).abs() < 1e-9, "{}", r.floor_s);
        assert_eq!(r.pairs, 8);
        // The limit is still the floor (larger than the tick).
        assert!((r.limit_s() - 1.28e-6).abs() < 1e-9);
    }

    #[test]
    fn no_tick_when_every_reading_agrees() {
        assert_eq!(Resolution::tick_of(&readings(&[1280; 5])), None);
        assert_eq!(Resolution::tick_of(&[]), None);
        // A simulator's exact zeros: no tick, and the documented 0.5 µs
        // resolution stands in for the limit.
        let r = Resolution::of_idle_pairs(&[0.0; 4]);
        assert_eq!((r.step_s, r.limit_s()), (None, 0.5e-6));
        // Zero and one tick: the step is the tick.
        let t = Resolution::tick_of(&readings(&[0, 0, 500, 0])).unwrap();
        assert!((t - 500e-9).abs() < 0.5e-9, "{t}");
    }
}
