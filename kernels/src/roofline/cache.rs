//! The cache probes: the working-set sweep, the read-tuning shapes and
//! shared memory.

use super::RooflineKernels;
use super::checks::*;
use super::*;
use crate::checks::*;
use gpu_sync::{AsDeviceSlice, AsDeviceSliceMut, Stream};

impl RooflineKernels {
    /// `out[0] +=` the wrapping sum of the words of `n` loads wrapped over
    /// `input` (`cache_read`), in the order and with the loads `hint` names.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `input` holds whole uint4 (fewer
    /// than 2^32, at least one) from a 16-byte aligned start, `out` has one
    /// element and `grid` is valid; a launch error.
    #[allow(clippy::too_many_arguments)]
    pub fn cache_read<I, O>(
        &self,
        stream: &Stream,
        grid: Grid,
        input: &I,
        n: u64,
        hint: CacheHint,
        out: &mut O,
    ) -> Result<()>
    where
        I: AsDeviceSlice<u32> + ?Sized,
        O: AsDeviceSliceMut<u64> + ?Sized,
    {
        let k = KernelId::CacheRead;
        let (ws4, cfg) =
            working_set_checks(k, grid, (input.device_len(), input.device_ptr()), out.device_len())?;
        // SAFETY (launch): every load is at an index `< ws4` (hints 0 and 1:
        // the wrapped index starts at `i % ws4` and steps by `stride % ws4`
        // with one conditional subtract, so it stays below `ws4`; hint 2: a
        // block's index is `lo + j` with `j < hi - lo` wrapped the same way
        // and `hi = ws4 * (b + 1) / grid <= ws4`, and its tail loads
        // `i < n % ws4 < ws4`), words `4j..4j+4` of `input`, which has
        // `4 * ws4` words, 16-byte aligned (checked above); `atomicAdd`s hit
        // `out[0]`; whole warps for the shuffles.
        self.cache_read.launch(stream, cfg, (input, ws4, n, hint as u32, out))
    }

    /// `out[0] +=` the wrapping sum of the words of `n` loads wrapped over
    /// `input` (load `i` reads uint4 `i % ws4`: `cache_read`'s result) in the
    /// shape `variant` names. A working set as large as the array with `n`
    /// equal to its uint4 count is one streaming pass (an HBM read).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `input` holds whole uint4 (fewer
    /// than 2^32, at least one) from a 16-byte aligned start, `out` has one
    /// element, `grid` is valid and the variant is one the kernels have (4,
    /// 8 or 16 loads; 1 to [`READ_BULK_MAX_STAGES`] stages of 1 to 64 KiB);
    /// a launch error (more shared memory than the device allows a block).
    #[allow(clippy::too_many_arguments)]
    pub fn read_tuned<I, O>(
        &self,
        stream: &Stream,
        grid: Grid,
        variant: ReadVariant,
        input: &I,
        n: u64,
        out: &mut O,
    ) -> Result<()>
    where
        I: AsDeviceSlice<u32> + ?Sized,
        O: AsDeviceSliceMut<u64> + ?Sized,
    {
        let k = match variant {
            ReadVariant::Loads { in_flight: 4, .. } => KernelId::ReadTuneU4,
            ReadVariant::Loads { in_flight: 8, .. } => KernelId::ReadTuneU8,
            ReadVariant::Loads { in_flight: 16, .. } => KernelId::ReadTuneU16,
            ReadVariant::Loads { in_flight, .. } => {
                return Err(invalid(
                    KernelId::ReadTuneU4,
                    format!("{in_flight} loads in flight: the kernels have 4, 8 and 16"),
                ));
            }
            ReadVariant::Bulk { stages, chunk_kib } => {
                if !(1..=READ_BULK_MAX_STAGES).contains(&stages) || !(1..=64).contains(&chunk_kib) {
                    return Err(invalid(
                        KernelId::ReadBulk,
                        format!(
                            "{stages} stages of {chunk_kib} KiB: needs 1 to {READ_BULK_MAX_STAGES} stages \
                             of 1 to 64 KiB"
                        ),
                    ));
                }
                KernelId::ReadBulk
            }
        };
        let (ws4, cfg) =
            working_set_checks(k, grid, (input.device_len(), input.device_ptr()), out.device_len())?;
        // SAFETY (launch), every arm: every load is at an index `< ws4`
        // (grid-stride: the wrapped index starts at `i % ws4` and steps by
        // `stride % ws4` with one conditional subtract; per-block slices: a
        // block's index is `lo + j` with `j < hi - lo` wrapped the same way
        // and `hi = ws4 * (b + 1) / grid <= ws4`, and its tail loads
        // `i < n % ws4`; bulk: chunk `c < ws4 / per` covers uint4
        // `c * per .. (c + 1) * per <= ws4`, the rest `whole * per + k % r <
        // ws4` and `i < n % ws4`), words `4j..4j+4` of `input`, which has
        // `4 * ws4` words, 16-byte aligned (checked above; the copy engine
        // needs 16-byte aligned sources and sizes: chunks are whole KiB);
        // `atomicAdd`s hit `out[0]`, its only element; whole warps for the
        // shuffles. The bulk variant's stages fill the dynamic shared memory
        // set here, `stages * chunk` bytes (the kernel indexes stage
        // `q % stages` of `per` uint4 only), its barriers the kernel's static
        // array of READ_BULK_MAX_STAGES (checked above).
        match variant {
            ReadVariant::Loads { in_flight, flavor, slices } => {
                let code = flavor.code() + if slices { 8 } else { 0 };
                match in_flight {
                    4 => self.read_tune_u4.launch(stream, cfg, (input, ws4, n, code, out)),
                    8 => self.read_tune_u8.launch(stream, cfg, (input, ws4, n, code, out)),
                    _ => self.read_tune_u16.launch(stream, cfg, (input, ws4, n, code, out)),
                }
            }
            ReadVariant::Bulk { stages, chunk_kib } => {
                let bytes = variant.shared_bytes();
                // Raised once per larger pipeline, not per launch.
                if bytes > self.read_bulk.max_dynamic_shared_mem() {
                    self.read_bulk.set_max_dynamic_shared_mem(bytes)?;
                }
                let code = stages | chunk_kib << 8;
                self.read_bulk.launch(stream, cfg.with_shared_mem(bytes), (input, ws4, n, code, out))
            }
        }
    }

    /// The shared-memory probe (`smem_read`): `out[0]` = block 0's thread
    /// 0's sum; `out[1]` is written only by a thread whose sum is `magic`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `out` has 2 elements and `grid` is
    /// valid; a launch error.
    pub fn smem_read<O>(
        &self,
        stream: &Stream,
        grid: Grid,
        iters: u32,
        seed: u32,
        magic: u32,
        out: &mut O,
    ) -> Result<()>
    where
        O: AsDeviceSliceMut<u32> + ?Sized,
    {
        let k = KernelId::SmemRead;
        same(k, "out must have 2 elements", out.device_len(), 2)?;
        let cfg = grid.config(k)?;
        // SAFETY (launch): `out[0]` and `out[1]` only, of its 2 elements
        // (checked above); shared-memory indices are masked to the static
        // array's 2048 elements.
        self.smem_read.launch(stream, cfg, (iters, seed, magic, out))
    }
}
