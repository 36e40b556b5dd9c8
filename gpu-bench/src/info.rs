//! What the device is: name, SMs, clocks, memory bus, L2, driver.

use gpu_sync::cuda_sys::CUdevice_attribute as A;
use gpu_sync::{Device, Result};
use serde::Serialize;

/// The device facts a measurement is reported with.
#[derive(Debug, Clone, Serialize)]
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
    /// Bandwidth implied by the memory clock and bus (2 transfers per clock),
    /// GB/s. A datasheet-style ceiling, not a measurement.
    pub theoretical_bandwidth_gbs: f64,
}

/// Reads the device's facts (`cuDeviceGetAttribute`, `cuDeviceGetName`,
/// `cuDeviceTotalMem`).
///
/// # Errors
/// A driver error.
pub fn device_info(device: &Device) -> Result<DeviceInfo> {
    let mem_khz = f64::from(device.attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?);
    let bus = device.attribute(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?;
    let drv = gpu_sync::cuda_sys::installed().map(|d| d.origin().to_owned()).unwrap_or_default();
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
        driver_origin: drv,
        theoretical_bandwidth_gbs: 2.0 * mem_khz * 1e3 * f64::from(bus) / 8.0 / 1e9,
    })
}

impl DeviceInfo {
    /// A two-column markdown table.
    pub fn to_markdown(&self) -> String {
        let rows = [
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
        let mut s = String::from("| property | value |\n|---|---|\n");
        for (k, v) in rows {
            s.push_str(&format!("| {k} | {v} |\n"));
        }
        s
    }
}
