//! A launch's configuration: grid and block dimensions ([`Dim3`]) and
//! dynamic shared memory ([`LaunchConfig`]), checked against the device's
//! limits before the driver sees a launch.

use crate::device::Limits;

/// Grid or block dimensions.
///
/// ```
/// use gpu_sync::Dim3;
/// assert_eq!(Dim3::from(256), Dim3 { x: 256, y: 1, z: 1 });
/// assert_eq!(Dim3::from((16, 16)), Dim3 { x: 16, y: 16, z: 1 });
/// ```
/// A `u32` or a tuple is accepted wherever a `Dim3` is
/// ([`LaunchConfig::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// x extent.
    pub x: u32,
    /// y extent.
    pub y: u32,
    /// z extent.
    pub z: u32,
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3 { x, y: 1, z: 1 }
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3 { x, y, z: 1 }
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3 { x, y, z }
    }
}

impl Dim3 {
    fn volume(self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }
}

/// Grid, block and dynamic shared memory of a launch.
///
/// ```
/// use gpu_sync::{Dim3, LaunchConfig};
/// // One thread per element, 256 a block: enough blocks to cover 1000.
/// let cfg = LaunchConfig::for_elements(1000, 256);
/// assert_eq!((cfg.grid.x, cfg.block.x), (4, 256));
/// // A 2-D grid of 16×16 blocks with 4 KiB of dynamic shared memory.
/// let tiles = LaunchConfig::new((64, 64), (16, 16)).with_shared_mem(4096);
/// assert_eq!(tiles.block, Dim3 { x: 16, y: 16, z: 1 });
/// ```
/// A launch checks it against the device's limits
/// ([`Kernel::launch`](crate::Kernel::launch)'s example launches one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` threads, no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig { grid: grid.into(), block: block.into(), shared_mem_bytes: 0 }
    }

    /// One thread per element: `ceil(n / block)` blocks of `block` threads
    /// (at least one block; at most 2³¹−1, beyond which a grid-stride kernel
    /// covers the rest).
    pub fn for_elements(n: u64, block: u32) -> LaunchConfig {
        let block = block.max(1);
        let blocks = n.div_ceil(u64::from(block)).clamp(1, (1 << 31) - 1);
        LaunchConfig::new(blocks as u32, block)
    }

    /// The same launch with `bytes` of dynamic shared memory per block.
    pub fn with_shared_mem(mut self, bytes: u32) -> LaunchConfig {
        self.shared_mem_bytes = bytes;
        self
    }

    #[inline]
    pub(crate) fn validate(&self, limits: &Limits, max_dynamic_shared: u32) -> Result<(), String> {
        let (g, b) = (self.grid, self.block);
        // `within(v, max)` is `v != 0 && v <= max` in one comparison: for
        // v = 0, `v - 1` wraps to `u32::MAX`, which no `max` exceeds.
        let within = |v: u32, max: u32| v.wrapping_sub(1) < max;
        let ok = within(b.x, limits.max_block[0])
            && within(b.y, limits.max_block[1])
            && within(b.z, limits.max_block[2])
            && within(g.x, limits.max_grid[0])
            && within(g.y, limits.max_grid[1])
            && within(g.z, limits.max_grid[2])
            && b.volume() <= u64::from(limits.max_threads_per_block)
            && self.shared_mem_bytes <= max_dynamic_shared;
        if ok {
            return Ok(());
        }
        self.explain(limits, max_dynamic_shared)
    }

    /// Which limit a rejected configuration breaks.
    #[cold]
    fn explain(&self, limits: &Limits, max_dynamic_shared: u32) -> Result<(), String> {
        let (g, b) = (self.grid, self.block);
        if g.volume() == 0 || b.volume() == 0 {
            return Err(format!("grid {g:?} and block {b:?} must have no zero dimension"));
        }
        if b.volume() > u64::from(limits.max_threads_per_block) {
            return Err(format!(
                "block {b:?} has {} threads; the device allows {}",
                b.volume(),
                limits.max_threads_per_block
            ));
        }
        for (axis, (have, max)) in ["x", "y", "z"].iter().zip([
            (b.x, limits.max_block[0]),
            (b.y, limits.max_block[1]),
            (b.z, limits.max_block[2]),
        ]) {
            if have > max {
                return Err(format!("block {axis} = {have} exceeds the device limit {max}"));
            }
        }
        for (axis, (have, max)) in ["x", "y", "z"].iter().zip([
            (g.x, limits.max_grid[0]),
            (g.y, limits.max_grid[1]),
            (g.z, limits.max_grid[2]),
        ]) {
            if have > max {
                return Err(format!("grid {axis} = {have} exceeds the device limit {max}"));
            }
        }
        if self.shared_mem_bytes > max_dynamic_shared {
            return Err(format!(
                "{} bytes of dynamic shared memory exceed the kernel's limit of {max_dynamic_shared}; \
                 raise it with set_max_dynamic_shared_mem (the device allows up to {})",
                self.shared_mem_bytes, limits.max_shared_per_block_optin
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-comparison check agrees with the plain one (no zero
    /// dimension, every limit kept) on every edge: zero, one, the limit,
    /// one past it, `u32::MAX`, and limits of 0, 1 and `u32::MAX`.
    #[test]
    fn validate_agrees_with_the_plain_rule() {
        let values = [0u32, 1, 2, 7, 8, 9, 1024, 1025, u32::MAX - 1, u32::MAX];
        for max in [0u32, 1, 8, 1024, u32::MAX] {
            let limits = Limits {
                max_threads_per_block: u32::MAX,
                max_block: [max; 3],
                max_grid: [max; 3],
                max_shared_per_block_optin: 0,
            };
            for &v in &values {
                for axis in 0..6 {
                    let mut d = [1u32; 6];
                    d[axis] = v;
                    let cfg = LaunchConfig {
                        grid: Dim3 { x: d[0], y: d[1], z: d[2] },
                        block: Dim3 { x: d[3], y: d[4], z: d[5] },
                        shared_mem_bytes: 0,
                    };
                    let plain = d.iter().all(|&x| x != 0 && x <= max);
                    assert_eq!(
                        cfg.validate(&limits, 0).is_ok(),
                        plain,
                        "value {v} on axis {axis}, limit {max}"
                    );
                }
            }
        }
    }
}
