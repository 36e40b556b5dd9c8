//! The simulated device's one speed model: every simulated duration (copies,
//! memsets, kernels without a duration of their own, the `kernels` crate's
//! CPU versions) comes from these figures, and they agree with what the
//! simulated device reports (its memory clock and bus width give
//! [`HBM_BYTES_PER_NS`], its SM count and clock [`FP32_FLOPS_PER_NS`]). The
//! figures are an H100 SXM's datasheet numbers, not measurements: every time
//! the simulator gives is simulated, and gpu-bench's reports say so.

/// Memory clock the simulated device reports, kHz (`CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE`).
pub const MEMORY_CLOCK_KHZ: i32 = 2_619_000;
/// Memory bus width the simulated device reports, bits.
pub const MEMORY_BUS_BITS: i32 = 5120;
/// SM clock the simulated device reports, kHz (`CU_DEVICE_ATTRIBUTE_CLOCK_RATE`).
pub const SM_CLOCK_KHZ: i32 = 1_980_000;
/// SMs of the simulated device.
pub const SMS: i32 = 132;

/// Device-memory bandwidth, bytes per ns: double data rate × bus width
/// (3352 GB/s).
pub const HBM_BYTES_PER_NS: f64 = 2.0 * MEMORY_CLOCK_KHZ as f64 * 1e3 * (MEMORY_BUS_BITS as f64 / 8.0) / 1e9;
/// FP32 FMA rate, FLOPs per ns: SMs × 128 lanes × 2 FLOPs × clock
/// (66.9 TFLOP/s).
pub const FP32_FLOPS_PER_NS: f64 = SMS as f64 * 128.0 * 2.0 * SM_CLOCK_KHZ as f64 * 1e3 / 1e9;
/// Host-device link bandwidth, bytes per ns (25 GB/s).
pub const PCIE_BYTES_PER_NS: f64 = 25.0;
/// Fixed cost of a host-device copy, ns.
pub const PCIE_LATENCY_NS: u64 = 2000;
/// Peer link bandwidth between two devices, bytes per ns, one direction
/// (450 GB/s: an H100 SXM's 18 NVLink 4 links of 25 GB/s each, the
/// datasheet's figure; each direction has its own, so copies both ways at
/// once take no longer than one).
pub const NVLINK_BYTES_PER_NS: f64 = 450.0;
/// Fixed cost of a copy over the peer link, ns.
pub const NVLINK_LATENCY_NS: u64 = 2000;
/// Bandwidth of the simulated device's cache (L2), bytes per ns (10 TB/s):
/// the roof of a kernel that re-reads a working set the cache holds.
pub const L2_BYTES_PER_NS: f64 = 10_000.0;
/// The shortest a kernel runs, ns (an empty kernel's own duration as CUPTI
/// reads it on an H100: 0.99 µs, docs/results/2026-11-25-h100).
pub const MIN_KERNEL_NS: u64 = 1000;

/// A kernel that moves `bytes` of device memory and performs `flops`: the
/// longer of the two at the rates above, at least [`MIN_KERNEL_NS`].
pub fn kernel_ns(bytes: u64, flops: u64) -> u64 {
    let t = (bytes as f64 / HBM_BYTES_PER_NS).max(flops as f64 / FP32_FLOPS_PER_NS);
    (t.ceil() as u64).max(MIN_KERNEL_NS)
}

/// Moving `bytes` within device memory (a memset writes them, a device copy
/// reads and writes: pass both), ns, at least 1.
pub fn memory_ns(bytes: u64) -> u64 {
    ((bytes as f64 / HBM_BYTES_PER_NS).ceil() as u64).max(1)
}

/// Which path, and so which roof, one access of a kernel takes, seen from
/// the device the kernel runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Path {
    /// The device's own memory ([`HBM_BYTES_PER_NS`]).
    Device,
    /// Another device's memory over the peer link ([`NVLINK_BYTES_PER_NS`]).
    Peer,
    /// Mapped pinned host memory over the host link ([`PCIE_BYTES_PER_NS`]).
    Host,
}

/// Bytes one kernel moves on each path: [`Traffic::floor_ns`] is the
/// shortest time the device model allows for them, so that no simulated
/// rate, of any path, beats the path's roof.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes of the device's own memory (each byte of a read-modify-write
    /// counted twice: read, then written).
    pub device: u64,
    /// Bytes of another device's memory, over the peer link.
    pub peer: u64,
    /// Bytes of mapped host memory, over the host link.
    pub host: u64,
}

impl Traffic {
    /// Adds `bytes` moved on `path` (saturating).
    pub fn add(&mut self, path: Path, bytes: u64) {
        let slot = match path {
            Path::Device => &mut self.device,
            Path::Peer => &mut self.peer,
            Path::Host => &mut self.host,
        };
        *slot = slot.saturating_add(bytes);
    }

    /// The shortest a kernel moving this traffic runs, ns: each path's bytes
    /// at its roof, the slowest path deciding (the paths run side by side).
    /// Every byte also crosses some device memory, so the bytes of all
    /// paths together are held to [`HBM_BYTES_PER_NS`] as well.
    pub fn floor_ns(&self) -> u64 {
        let all = self.device.saturating_add(self.peer).saturating_add(self.host);
        let t = (all as f64 / HBM_BYTES_PER_NS)
            .max(self.peer as f64 / NVLINK_BYTES_PER_NS)
            .max(self.host as f64 / PCIE_BYTES_PER_NS);
        // Saturating float-to-int conversion.
        t.ceil() as u64
    }
}

/// A host-device copy of `bytes`, ns.
pub fn pcie_ns(bytes: u64) -> u64 {
    PCIE_LATENCY_NS + (bytes as f64 / PCIE_BYTES_PER_NS).ceil() as u64
}

/// A copy of `bytes` between two devices over the peer link, ns.
pub fn peer_ns(bytes: u64) -> u64 {
    NVLINK_LATENCY_NS + (bytes as f64 / NVLINK_BYTES_PER_NS).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rates_are_the_devices_own() {
        assert!((HBM_BYTES_PER_NS - 3352.32).abs() < 0.01, "{HBM_BYTES_PER_NS}");
        assert!((FP32_FLOPS_PER_NS - 66_908.16).abs() < 0.01, "{FP32_FLOPS_PER_NS}");
        assert_eq!(kernel_ns(0, 0), MIN_KERNEL_NS);
        // 1 GiB read and written at 3352 GB/s: 640.6 µs.
        assert_eq!(kernel_ns(2 << 30, 0), 640_597);
        assert_eq!(memory_ns(3353), 2);
        assert_eq!(pcie_ns(25), 2001);
        assert_eq!(peer_ns(450), 2001);
        // The link is faster than the host's, slower than device memory.
        assert!(peer_ns(1 << 30) < pcie_ns(1 << 30) && peer_ns(1 << 30) > memory_ns(2 << 30));
    }

    #[test]
    fn traffic_takes_at_least_each_paths_bytes_at_its_roof() {
        let mut t = Traffic::default();
        assert_eq!(t.floor_ns(), 0);
        t.add(Path::Device, 3353);
        assert_eq!(t.floor_ns(), 2);
        // 450 bytes over the link: 1 ns of link time, but with the local
        // bytes 3803 bytes of memory traffic: 2 ns.
        t.add(Path::Peer, 450);
        assert_eq!(t.floor_ns(), 2);
        t.add(Path::Peer, 450 * 99);
        assert_eq!(t.floor_ns(), 100);
        t.add(Path::Host, 25 * 1000);
        assert_eq!(t.floor_ns(), 1000);
        t.add(Path::Host, u64::MAX);
        assert_eq!(t.host, u64::MAX, "saturates");
        // Every path's rate at the floor is within its roof.
        let t = Traffic { device: 1 << 30, peer: 1 << 28, host: 1 << 20 };
        let ns = t.floor_ns() as f64;
        assert!(t.device as f64 / ns <= HBM_BYTES_PER_NS);
        assert!(t.peer as f64 / ns <= NVLINK_BYTES_PER_NS);
        assert!(t.host as f64 / ns <= PCIE_BYTES_PER_NS);
    }
}
