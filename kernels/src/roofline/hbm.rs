//! The HBM probes: read, copy (16-byte loads and the bulk copy engine) and
//! triad.

use super::RooflineKernels;
use super::checks::*;
use super::*;
use crate::checks::*;
use gpu_sync::{AsDeviceSlice, AsDeviceSliceMut, Stream};

impl RooflineKernels {
    /// `out[0] +=` the wrapping sum of every word of `input` (`hbm_read`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `input` holds whole uint4 from a
    /// 16-byte aligned start, `out` has one element and `grid` is valid; a
    /// launch error.
    pub fn hbm_read<I, O>(
        &self,
        stream: &Stream,
        grid: Grid,
        variant: u32,
        input: &I,
        out: &mut O,
    ) -> Result<()>
    where
        I: AsDeviceSlice<u32> + ?Sized,
        O: AsDeviceSliceMut<u64> + ?Sized,
    {
        let k = KernelId::HbmRead;
        let n4 = quads(k, "in", input.device_len())?;
        aligned16(k, "in", input.device_ptr())?;
        same(k, "out must have one element", out.device_len(), 1)?;
        let cfg = grid.config(k)?.with_shared_mem(if variant == HBM_BULK { HBM_BULK_SMEM } else { 0 });
        // SAFETY (launch): indices `< n4` only (every variant's bulk stops
        // at a whole number of groups and the tail loop at `n4`), words
        // `4i..4i+4` of `input`, which has exactly `4 * n4` words, 16-byte
        // aligned (checked above); the warp-level `atomicAdd`s hit `out[0]`,
        // its only element; the shuffles need whole warps (checked by
        // `Grid::config`). The bulk variant reads whole 8 KiB chunks below
        // `n4` (16-byte aligned, as `cp.async.bulk` needs) into the 32 KiB
        // of dynamic shared memory set here, the kernel's 4 stages of 8 KiB.
        self.hbm_read.launch(stream, cfg, (input, n4, variant, out))
    }

    /// `dst = src` (`hbm_copy`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless both have one length of whole uint4
    /// from 16-byte aligned starts and `grid` is valid; a launch error.
    pub fn hbm_copy<S, D>(
        &self,
        stream: &Stream,
        grid: Grid,
        variant: u32,
        src: &S,
        dst: &mut D,
    ) -> Result<()>
    where
        S: AsDeviceSlice<u32> + ?Sized,
        D: AsDeviceSliceMut<u32> + ?Sized,
    {
        let k = KernelId::HbmCopy;
        let n4 = copy_checks(k, (src.device_len(), src.device_ptr()), (dst.device_len(), dst.device_ptr()))?;
        let cfg = grid.config(k)?.with_shared_mem(if variant == HBM_BULK { HBM_BULK_SMEM } else { 0 });
        // SAFETY (launch): uint4 indices `< n4` of both views, which have
        // exactly `4 * n4` words and 16-byte aligned starts (checked above);
        // every index is covered by one thread (1-D grid). The bulk variant
        // moves whole 8 KiB chunks below `n4` (16-byte aligned, as
        // `cp.async.bulk` needs) through the 32 KiB of dynamic shared memory
        // set here, the kernel's 4 stages of 8 KiB; each chunk by one block.
        self.hbm_copy.launch(stream, cfg, (src, dst, n4, variant))
    }

    /// `dst = src` through the bulk copy engine (`copy_bulk`, sm_90): each
    /// block moves chunks of `chunk_kib` KiB through `stages` shared-memory
    /// stages (global → shared → global, `cp.async.bulk` both ways).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless both have one length of whole uint4
    /// from 16-byte aligned starts, `grid` is valid and the pipeline is 2 to
    /// [`READ_BULK_MAX_STAGES`] stages of 1 to 64 KiB; a launch error (more
    /// shared memory than the device allows a block).
    #[allow(clippy::too_many_arguments)]
    pub fn copy_bulk<S, D>(
        &self,
        stream: &Stream,
        grid: Grid,
        stages: u32,
        chunk_kib: u32,
        src: &S,
        dst: &mut D,
    ) -> Result<()>
    where
        S: AsDeviceSlice<u32> + ?Sized,
        D: AsDeviceSliceMut<u32> + ?Sized,
    {
        let k = KernelId::CopyBulk;
        // A stage is refilled once the store before it has read it: the
        // pipeline needs two.
        if !(2..=READ_BULK_MAX_STAGES).contains(&stages) || !(1..=64).contains(&chunk_kib) {
            return Err(invalid(
                k,
                format!(
                    "{stages} stages of {chunk_kib} KiB: needs 2 to {READ_BULK_MAX_STAGES} stages of 1 to 64 KiB"
                ),
            ));
        }
        let n4 = copy_checks(k, (src.device_len(), src.device_ptr()), (dst.device_len(), dst.device_ptr()))?;
        let bytes = stages * chunk_kib * 1024;
        let cfg = grid.config(k)?.with_shared_mem(bytes);
        // Raised once per larger pipeline, not per launch.
        if bytes > self.copy_bulk.max_dynamic_shared_mem() {
            self.copy_bulk.set_max_dynamic_shared_mem(bytes)?;
        }
        // SAFETY (launch): the copy engine moves whole chunks of
        // `chunk_kib` KiB below `n4` (chunk `c < n4 / per` covers uint4
        // `c * per .. (c + 1) * per <= n4`; 16-byte aligned starts, checked
        // above, and whole-KiB sizes, as `cp.async.bulk` needs) from `src`
        // into stage `q % stages` of the dynamic shared memory set here
        // (`stages * chunk` bytes) and from there to the same chunk of
        // `dst`; the plain tail covers `n4 - n4 % per .. n4`; both views
        // have exactly `4 * n4` words (checked above); each chunk by one
        // block, each tail index by one thread. The barriers are the
        // kernel's static array of READ_BULK_MAX_STAGES (checked above).
        self.copy_bulk.launch(stream, cfg, (src, dst, n4, stages | chunk_kib << 8))
    }

    /// `a = fma(scalar, c, b)` (`hbm_triad`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless the three have one length of whole
    /// float4 from 16-byte aligned starts and `grid` is valid; a launch error.
    #[allow(clippy::too_many_arguments)]
    pub fn hbm_triad<A, B, C>(
        &self,
        stream: &Stream,
        grid: Grid,
        variant: u32,
        a: &mut A,
        b: &B,
        c: &C,
        scalar: f32,
    ) -> Result<()>
    where
        A: AsDeviceSliceMut<f32> + ?Sized,
        B: AsDeviceSlice<f32> + ?Sized,
        C: AsDeviceSlice<f32> + ?Sized,
    {
        let k = KernelId::HbmTriad;
        same(k, "lengths of a and b", a.device_len(), b.device_len())?;
        same(k, "lengths of a and c", a.device_len(), c.device_len())?;
        let n4 = quads(k, "a", a.device_len())?;
        aligned16(k, "a", a.device_ptr())?;
        aligned16(k, "b", b.device_ptr())?;
        aligned16(k, "c", c.device_ptr())?;
        let cfg = grid.config(k)?;
        // SAFETY (launch): float4 indices `< n4` of the three views, each
        // exactly `4 * n4` floats from a 16-byte aligned start (checked
        // above); one thread per index.
        self.hbm_triad.launch(stream, cfg, (a, b, c, scalar, n4, variant))
    }
}
