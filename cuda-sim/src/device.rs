//! What a simulated device looks like: an H100-like attribute table, name,
//! UUID and PCI bus id.

use cuda_sys::CUdevice_attribute as A;

/// The device name `cuDeviceGetName` reports.
pub(crate) const NAME: &str = "cuda-sim virtual H100";

/// Greatest (numerically lowest) stream priority.
pub(crate) const GREATEST_PRIORITY: i32 = -5;
/// Least stream priority (the default).
pub(crate) const LEAST_PRIORITY: i32 = 0;

/// Default dynamic shared memory a launch may use without opting in.
pub(crate) const DEFAULT_SHARED: i32 = 49152;
/// Opt-in limit for dynamic shared memory per block.
pub(crate) const OPTIN_SHARED: i32 = 232448;

/// PCI bus number of device `dev`.
pub(crate) fn pci_bus(dev: i32) -> i32 {
    0x18 + dev * 0x10
}

/// The default value of `attr` on device `dev`, or `None` for an attribute
/// the headers do not define.
pub(crate) fn attribute(attr: A, dev: i32) -> Option<i32> {
    let v = match attr {
        A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK => 1024,
        A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X | A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y => 1024,
        A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z => 64,
        A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X => 2_147_483_647,
        A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y | A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z => 65535,
        A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK => DEFAULT_SHARED,
        A::CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY => 65536,
        A::CU_DEVICE_ATTRIBUTE_WARP_SIZE => 32,
        A::CU_DEVICE_ATTRIBUTE_MAX_PITCH => 2_147_483_647,
        A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK => 65536,
        A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE => 1_980_000,
        A::CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT => 512,
        A::CU_DEVICE_ATTRIBUTE_GPU_OVERLAP => 1,
        A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT => crate::model::SMS,
        A::CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT => 0,
        A::CU_DEVICE_ATTRIBUTE_INTEGRATED => 0,
        A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY => 1,
        A::CU_DEVICE_ATTRIBUTE_COMPUTE_MODE => 0,
        A::CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT => 512,
        A::CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS => 1,
        A::CU_DEVICE_ATTRIBUTE_ECC_ENABLED => 1,
        A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID => pci_bus(dev),
        A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID => 0,
        A::CU_DEVICE_ATTRIBUTE_TCC_DRIVER => 0,
        A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE => crate::model::MEMORY_CLOCK_KHZ,
        A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH => crate::model::MEMORY_BUS_BITS,
        A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE => 52_428_800,
        A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR => 2048,
        A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT => 2,
        A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING => 1,
        A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID => 0,
        A::CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT => 32,
        A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR => 9,
        A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR => 0,
        A::CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED => 1,
        A::CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED => 1,
        A::CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED => 1,
        A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR => 233_472,
        A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR => 65536,
        A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN => OPTIN_SHARED,
        A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR => 32,
        A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK => 1024,
        A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED => 1,
        A::CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID | A::CU_DEVICE_ATTRIBUTE_NUMA_ID => -1,
        // Everything else the headers define: features the simulator does
        // not model (textures, managed memory, clusters, IPC …) report 0.
        a if a.0 < A::CU_DEVICE_ATTRIBUTE_MAX.0 && a.0 >= 1 => 0,
        _ => return None,
    };
    Some(v)
}

/// The deterministic UUID of device `dev`.
pub(crate) fn uuid(dev: i32) -> [u8; 16] {
    let mut b = *b"cuda-sim\0\0\0\0\0\0\0\0";
    b[8..12].copy_from_slice(&dev.to_le_bytes());
    b[12..16].copy_from_slice(&0x5151_0001_u32.to_be_bytes());
    b
}

/// The PCI bus id string of device `dev` (`domain:bus:device.function`).
pub(crate) fn pci_bus_id(dev: i32) -> String {
    format!("0000:{:02x}:00.0", pci_bus(dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_h100_like_and_unknown_ones_are_none() {
        assert_eq!(attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), Some(132));
        assert_eq!(attribute(A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0), Some(0));
        assert_eq!(attribute(A::CU_DEVICE_ATTRIBUTE_MAX, 0), None);
        assert_eq!(attribute(A(0), 0), None);
        assert_ne!(uuid(0), uuid(1));
        assert_eq!(pci_bus_id(1), "0000:28:00.0");
    }
}
