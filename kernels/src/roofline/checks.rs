//! The checks several roofline probes share (the copies, the working-set
//! sweeps, the intensity sweeps).

use super::Grid;
use crate::checks::{aligned16, invalid, quads, same};
use crate::spec::KernelId;
use gpu_sync::{LaunchConfig, Result};

/// The checks `cache_read` and the read-tuning kernels share: `input`
/// (its length in `u32` words and its address) is whole uint4 — at least one,
/// fewer than 2^32 — from a 16-byte aligned start, `out` has one element and
/// `grid` is valid. Returns the working set in uint4 and the launch
/// configuration.
pub(super) fn working_set_checks(
    k: KernelId,
    grid: Grid,
    input: (usize, u64),
    out_len: usize,
) -> Result<(u64, LaunchConfig)> {
    let ws4 = quads(k, "in", input.0)?;
    if ws4 == 0 || ws4 >= 1 << 32 {
        return Err(invalid(k, format!("a working set of {ws4} uint4: needs 1 to 2^32 - 1")));
    }
    aligned16(k, "in", input.1)?;
    same(k, "out must have one element", out_len, 1)?;
    Ok((ws4, grid.config(k)?))
}

/// The checks both copies (`hbm_copy`, `copy_bulk`) make: `src` and `dst`
/// (lengths in `u32` words and addresses) of one length of whole uint4 from
/// 16-byte aligned starts. Returns the uint4 count.
pub(super) fn copy_checks(
    k: KernelId,
    (src_len, src_ptr): (usize, u64),
    (dst_len, dst_ptr): (usize, u64),
) -> Result<u64> {
    same(k, "lengths", src_len, dst_len)?;
    let n4 = quads(k, "src", src_len)?;
    aligned16(k, "src", src_ptr)?;
    aligned16(k, "dst", dst_ptr)?;
    Ok(n4)
}

/// The checks every intensity sweep makes before its launch: `in` and
/// `out` of one length, whole 16-byte vectors of `per_vec` elements each,
/// 16-byte aligned starts, a valid grid. Returns the vector count and the
/// launch configuration.
pub(super) fn sweep_checks(
    kernel: KernelId,
    grid: Grid,
    (in_len, in_ptr): (usize, u64),
    (out_len, out_ptr): (usize, u64),
    per_vec: usize,
) -> Result<(u64, LaunchConfig)> {
    same(kernel, "lengths", in_len, out_len)?;
    if !in_len.is_multiple_of(per_vec) {
        return Err(invalid(kernel, format!("`in` has {in_len} elements, not a multiple of {per_vec}")));
    }
    aligned16(kernel, "in", in_ptr)?;
    aligned16(kernel, "out", out_ptr)?;
    Ok(((in_len / per_vec) as u64, grid.config(kernel)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_sync::Error;

    /// The checks both copies share: each refusal names its cause, and
    /// matching whole-uint4 views give their uint4 count.
    #[test]
    fn copy_checks_name_each_refusal() {
        let k = KernelId::CopyBulk;
        assert_eq!(copy_checks(k, (4096, 256), (4096, 512)).ok(), Some(1024));
        let why = |src: (usize, u64), dst: (usize, u64)| match copy_checks(k, src, dst) {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert!(why((4096, 256), (4092, 512)).contains("lengths: 4096 vs 4092"));
        assert!(why((6, 256), (6, 512)).contains("`src` has 6 elements"));
        assert!(why((4096, 8), (4096, 512)).contains("`src` at 0x8"));
        assert!(why((4096, 256), (4096, 520)).contains("`dst` at 0x208"));
    }

    /// The checks `cache_read` and `read_tuned` share: each refusal names
    /// its cause, and a good working set gives its uint4 count.
    #[test]
    fn working_set_checks_name_each_refusal() {
        let g = Grid { blocks: 2, threads: 256 };
        let k = KernelId::CacheRead;
        assert_eq!(working_set_checks(k, g, (4096, 256), 1).map(|(ws4, _)| ws4).ok(), Some(1024));
        let why = |input: (usize, u64), out: usize, g: Grid| match working_set_checks(k, g, input, out) {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert!(why((0, 256), 1, g).contains("needs 1 to 2^32 - 1"));
        assert!(why((6, 256), 1, g).contains("in"), "not whole uint4");
        assert!(why((4096, 8), 1, g).contains("in"), "not 16-byte aligned");
        assert!(why((4096, 256), 2, g).contains("out must have one element"));
        assert!(!why((4096, 256), 1, Grid { blocks: 0, threads: 256 }).is_empty());
    }
}
