//! Statistics of a device's default memory pool (`cuMemAllocAsync`), kept
//! per session so parallel tests do not see each other's allocations.

/// Granule in which the pool reserves memory.
pub(crate) const GRANULE: u64 = 2 << 20;

fn round_up(v: u64) -> u64 {
    v.div_ceil(GRANULE).saturating_mul(GRANULE)
}

/// One pool's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolStats {
    pub(crate) used: u64,
    pub(crate) used_high: u64,
    pub(crate) reserved: u64,
    pub(crate) reserved_high: u64,
    pub(crate) release_threshold: u64,
    pub(crate) reuse: [i32; 3],
}

impl Default for PoolStats {
    /// A new pool: empty, release threshold 0, reuse policies enabled (as
    /// CUDA's default pool).
    fn default() -> PoolStats {
        PoolStats {
            used: 0,
            used_high: 0,
            reserved: 0,
            reserved_high: 0,
            release_threshold: 0,
            reuse: [1, 1, 1],
        }
    }
}

impl PoolStats {
    /// `bytes` allocated from the pool.
    pub(crate) fn alloc(&mut self, bytes: u64) {
        self.used += bytes;
        self.used_high = self.used_high.max(self.used);
        self.reserved = self.reserved.max(round_up(self.used));
        self.reserved_high = self.reserved_high.max(self.reserved);
    }

    /// `bytes` returned to the pool (stays reserved until a sync or trim).
    pub(crate) fn free(&mut self, bytes: u64) {
        self.used = self.used.saturating_sub(bytes);
    }

    /// At a synchronization: release reserved memory above the threshold.
    pub(crate) fn on_sync(&mut self) {
        let keep = self.release_threshold / GRANULE * GRANULE;
        if self.reserved > keep {
            self.reserved = round_up(self.used).max(keep).min(self.reserved);
        }
    }

    /// `cuMemPoolTrimTo`: shrink reserved toward used, keeping at least
    /// `min_keep` bytes reserved.
    pub(crate) fn trim_to(&mut self, min_keep: u64) {
        self.reserved = round_up(self.used).max(round_up(min_keep).min(self.reserved));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_follows_used_in_granules() {
        let mut p = PoolStats::default();
        p.alloc(100);
        assert_eq!((p.used, p.reserved), (100, GRANULE));
        p.alloc(GRANULE);
        assert_eq!(p.reserved, 2 * GRANULE);
        p.free(GRANULE + 100);
        assert_eq!((p.used, p.reserved, p.used_high), (0, 2 * GRANULE, GRANULE + 100));
        p.release_threshold = u64::MAX;
        p.on_sync();
        assert_eq!(p.reserved, 2 * GRANULE);
        p.trim_to(GRANULE);
        assert_eq!(p.reserved, GRANULE);
        p.release_threshold = 0;
        p.on_sync();
        assert_eq!(p.reserved, 0);
        assert_eq!(p.reserved_high, 2 * GRANULE);
    }
}
