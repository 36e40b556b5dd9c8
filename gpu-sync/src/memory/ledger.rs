//! The memory ledger: what gpu-sync has allocated on a device, its peak, and
//! what the stream-ordered pool holds — the `torch.cuda.memory_allocated` /
//! `max_memory_allocated` / `memory_reserved` / `reset_peak_memory_stats`
//! family.

use crate::device::Device;
use crate::error::Result;
use crate::ffi::call;
use cuda_sys::result as cu;
use cuda_sys::{BorrowedMemPool, CUmemPool_attribute as P};
use std::sync::atomic::Ordering;

/// A snapshot of a device's memory ledger.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let before = device.memory_stats()?;
/// let buf = DeviceBuffer::<u8>::alloc(&stream, 1 << 20)?;
/// let during = device.memory_stats()?;
/// assert!(during.allocated >= before.allocated + (1 << 20));
/// assert!(during.peak_allocated >= during.allocated);
/// drop(buf);
/// device.reset_peak_memory()?;
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in live gpu-sync device buffers (a buffer stops counting when its
    /// stream-ordered free is queued).
    pub allocated: u64,
    /// Highest `allocated` since the device was first used or the last
    /// [`Device::reset_peak_memory`].
    pub peak_allocated: u64,
    /// Number of live device buffers.
    pub live_buffers: u64,
    /// The default stream-ordered pool's own figures, when the device has
    /// memory pools.
    pub pool: Option<PoolStats>,
}

/// Figures of the device's default memory pool (`cuMemPoolGetAttribute`).
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let _buf = DeviceBuffer::<u8>::alloc(&stream, 1 << 20)?; // from the default pool
/// if let Some(pool) = device.memory_stats()?.pool {
///     assert!(pool.reserved >= pool.used && pool.used_peak >= pool.used);
///     println!("pool: {} B reserved, {} B used", pool.reserved, pool.used);
/// }
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Memory the pool holds from the OS (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`).
    pub reserved: u64,
    /// Its high watermark (`CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH`).
    pub reserved_peak: u64,
    /// Memory handed out by the pool (`CU_MEMPOOL_ATTR_USED_MEM_CURRENT`),
    /// including allocations of other code that use the same pool.
    pub used: u64,
    /// Its high watermark (`CU_MEMPOOL_ATTR_USED_MEM_HIGH`).
    pub used_peak: u64,
}

impl Device {
    fn default_pool(&self) -> Result<BorrowedMemPool<'static>> {
        call("cuDeviceGetDefaultMemPool", || cu::device::get_default_mem_pool(self.inner.drv, self.inner.raw))
    }

    fn pool_attr(&self, pool: BorrowedMemPool<'static>, attr: P) -> Result<u64> {
        call("cuMemPoolGetAttribute", || cu::mem_pool::get_attribute(pool, attr))
    }

    /// The device's memory ledger.
    ///
    /// # Errors
    /// A driver error reading the pool's attributes.
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        let l = &self.inner.ledger;
        let pool = if self.has_memory_pools() {
            let p = self.default_pool()?;
            Some(PoolStats {
                reserved: self.pool_attr(p, P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
                reserved_peak: self.pool_attr(p, P::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)?,
                used: self.pool_attr(p, P::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
                used_peak: self.pool_attr(p, P::CU_MEMPOOL_ATTR_USED_MEM_HIGH)?,
            })
        } else {
            None
        };
        Ok(MemoryStats {
            allocated: l.allocated.load(Ordering::Acquire),
            peak_allocated: l.peak.load(Ordering::Acquire),
            live_buffers: l.live.load(Ordering::Acquire),
            pool,
        })
    }

    /// Resets the peaks to the current values: gpu-sync's `peak_allocated`,
    /// and the pool's high watermarks (`cuMemPoolSetAttribute` with 0).
    ///
    /// # Errors
    /// A driver error.
    pub fn reset_peak_memory(&self) -> Result<()> {
        let l = &self.inner.ledger;
        l.peak.store(l.allocated.load(Ordering::Acquire), Ordering::Release);
        if self.has_memory_pools() {
            let p = self.default_pool()?;
            for attr in [P::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, P::CU_MEMPOOL_ATTR_USED_MEM_HIGH] {
                // The HIGH attributes accept only 0 (reset to current).
                call("cuMemPoolSetAttribute", || cu::mem_pool::set_attribute(p, attr, 0))?;
            }
        }
        Ok(())
    }

    /// Releases memory the default pool holds beyond `keep_bytes` back to the
    /// OS (`cuMemPoolTrimTo`); memory in live buffers is never released.
    ///
    /// # Errors
    /// A driver error; nothing happens without memory pools.
    pub fn trim_memory_pool(&self, keep_bytes: usize) -> Result<()> {
        if !self.has_memory_pools() {
            return Ok(());
        }
        let p = self.default_pool()?;
        call("cuMemPoolTrimTo", || cu::mem_pool::trim_to(p, keep_bytes))
    }
}
