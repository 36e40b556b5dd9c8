//! The roofline's probes (`kernels/cu/roofline.cu`) as typed wrappers that
//! check lengths, alignment and the launch shape: HBM read/copy/triad in
//! tuning variants, FMA chains per precision, the cache working-set sweep,
//! the read-tuning shapes ([`ReadVariant`]: loads in flight, load flavor,
//! layout, the bulk copy engine), shared memory and the intensity sweep.
//!
//! Every probe takes its launch shape ([`Grid`]) from the caller, because
//! choosing it is part of what the roofline tunes; the shape is checked
//! (1-D, whole warps, at most 1024 threads a block).
//!
//! Unsafe code: none. The kernels are declared (and their contracts argued)
//! in the kernel table (`table.rs`); each launch here argues the part of the
//! contract that holds only for that launch (`SAFETY (launch)`).

use crate::spec::{KernelId, ModuleId};
use crate::table::{
    CacheReadSig, CopyBulkSig, FmaBf16x2Sig, FmaF16x2Sig, FmaF32Sig, FmaF64Sig, HbmCopySig, HbmReadSig,
    HbmTriadSig, IntensityF16x2Sig, IntensityF64Sig, IntensitySig, ReadBulkSig, ReadTuneU4Sig, ReadTuneU8Sig,
    ReadTuneU16Sig, SmemReadSig, declare,
};
use gpu_sync::{
    AsDeviceSlice, AsDeviceSliceMut, Device, Error, Kernel as Typed, LaunchConfig, Result, Stream,
};

/// Number of tuning variants of the HBM probes: variant `v < 18` keeps
/// `[2, 4, 8][v % 3]` 16-byte loads in flight per thread and pointer, uses
/// plain loads and stores (`v / 3 % 3 == 0`), `ld.global.nc.L1::no_allocate`
/// with `st.global.cs` (1), or those with the `L2::256B` prefetch (2), and a
/// grid-stride (`v < 9`) or block-tile layout. Variants 18 to 23 take one
/// contiguous run of tiles per block ("segments"): 2, 2, 4, 8, 4, 8 loads,
/// plain, nc/cs, plain, plain, nc/cs, nc/cs. Variant [`HBM_BULK`] moves
/// 8 KiB chunks through 4 shared-memory stages with the bulk copy engine
/// (`cp.async.bulk`, sm_90; read and copy; triad runs variant 11).
pub const HBM_VARIANTS: u32 = 25;

/// The bulk-copy-engine variant of [`RooflineKernels::hbm_read`] and
/// [`RooflineKernels::hbm_copy`]: 32 KiB of dynamic shared memory a block.
pub const HBM_BULK: u32 = 24;

/// Dynamic shared memory of the [`HBM_BULK`] variant: 4 stages of 8 KiB.
const HBM_BULK_SMEM: u32 = 4 * 8192;

/// What HBM variant `v` is, in words (`"8 loads, nc/cs, tiles"`).
pub fn hbm_variant_name(v: u32) -> String {
    let v = v % HBM_VARIANTS;
    if v == HBM_BULK {
        return "bulk copy engine, 4 x 8 KiB stages".to_owned();
    }
    if v >= 18 {
        let (loads, hints) =
            [(2, "plain"), (2, "nc/cs"), (4, "plain"), (8, "plain"), (4, "nc/cs"), (8, "nc/cs")]
                [(v - 18) as usize];
        return format!("{loads} loads, {hints}, segments");
    }
    format!(
        "{} loads, {}, {}",
        [2, 4, 8][(v % 3) as usize],
        ["plain", "nc/cs", "nc.L2::256B/cs"][((v / 3) % 3) as usize],
        if v < 9 { "grid-stride" } else { "tiles" }
    )
}

/// A 1-D launch shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Blocks.
    pub blocks: u32,
    /// Threads per block: a multiple of 32, at most 1024.
    pub threads: u32,
}

impl Grid {
    /// Total threads.
    pub fn total(&self) -> u64 {
        u64::from(self.blocks) * u64::from(self.threads)
    }

    fn config(self, kernel: KernelId) -> Result<LaunchConfig> {
        if self.blocks == 0 || self.threads == 0 || self.threads > 1024 || !self.threads.is_multiple_of(32) {
            return Err(invalid(
                kernel,
                format!(
                    "{} blocks of {} threads: needs at least one block of whole warps, at most 1024 threads",
                    self.blocks, self.threads
                ),
            ));
        }
        Ok(LaunchConfig::new(self.blocks, self.threads))
    }
}

/// The precision of an FMA probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FmaPrecision {
    /// `double`, DFMA.
    F64,
    /// `float`, FFMA.
    F32,
    /// Packed half pairs, HFMA2.
    F16x2,
    /// Packed bfloat16 pairs, HFMA2.BF16.
    Bf16x2,
}

impl FmaPrecision {
    /// Every precision.
    pub const ALL: [FmaPrecision; 4] =
        [FmaPrecision::F64, FmaPrecision::F32, FmaPrecision::F16x2, FmaPrecision::Bf16x2];

    /// Values per FMA instruction (2 for the packed types).
    pub const fn lanes(self) -> u64 {
        match self {
            FmaPrecision::F64 | FmaPrecision::F32 => 1,
            FmaPrecision::F16x2 | FmaPrecision::Bf16x2 => 2,
        }
    }

    /// A short name (`"FP32"`).
    pub const fn name(self) -> &'static str {
        match self {
            FmaPrecision::F64 => "FP64",
            FmaPrecision::F32 => "FP32",
            FmaPrecision::F16x2 => "FP16",
            FmaPrecision::Bf16x2 => "BF16",
        }
    }

    /// The probe kernel.
    pub const fn kernel(self) -> KernelId {
        match self {
            FmaPrecision::F64 => KernelId::FmaF64,
            FmaPrecision::F32 => KernelId::FmaF32,
            FmaPrecision::F16x2 => KernelId::FmaF16x2,
            FmaPrecision::Bf16x2 => KernelId::FmaBf16x2,
        }
    }
}

/// How `cache_read` loads its working set (the kernel's `hint`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheHint {
    /// Plain loads (L1 and L2), grid-stride: the L1 sweep.
    Plain = 0,
    /// `ld.global.cg` (L2 only), grid-stride: load `i` of the grid reads
    /// uint4 `i % ws4`, so each pass hands a line to a different SM.
    L2 = 1,
    /// `ld.global.cg` over per-block slices: block `b` of `G` re-reads only
    /// uint4 `ws4 * b / G .. ws4 * (b + 1) / G` (the same loads and sum).
    L2Slices = 2,
}

/// The load instruction of a [`ReadVariant::Loads`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadFlavor {
    /// `ld.global.cg.v4` (L2 only).
    Cg,
    /// `ld.global.ca.v4` (L1 and L2).
    Ca,
    /// `ld.global.lu.v4` (last use).
    Lu,
    /// `ld.global.nc.L1::no_allocate.v4` (read-only path, no L1 line).
    Nc,
    /// `ld.global.cg.v2`: two 8-byte loads per 16 bytes.
    Cg8,
    /// `ld.global.cg.L2::256B.v4` (a 256-byte L2 prefetch).
    CgL2Prefetch,
    /// `ld.global.nc.L1::no_allocate.L2::256B.v4`.
    NcL2Prefetch,
}

impl LoadFlavor {
    /// Every flavor.
    pub const ALL: [LoadFlavor; 7] = [
        LoadFlavor::Cg,
        LoadFlavor::Ca,
        LoadFlavor::Lu,
        LoadFlavor::Nc,
        LoadFlavor::Cg8,
        LoadFlavor::CgL2Prefetch,
        LoadFlavor::NcL2Prefetch,
    ];

    /// The kernels' FLAVOR number.
    const fn code(self) -> u32 {
        match self {
            LoadFlavor::Cg => 0,
            LoadFlavor::Ca => 1,
            LoadFlavor::Lu => 2,
            LoadFlavor::Nc => 3,
            LoadFlavor::Cg8 => 4,
            LoadFlavor::CgL2Prefetch => 5,
            LoadFlavor::NcL2Prefetch => 6,
        }
    }

    /// The PTX, in short (`"cg"`, `"nc.L2::256B"`).
    pub const fn name(self) -> &'static str {
        match self {
            LoadFlavor::Cg => "cg",
            LoadFlavor::Ca => "ca",
            LoadFlavor::Lu => "lu",
            LoadFlavor::Nc => "nc",
            LoadFlavor::Cg8 => "cg 8-byte",
            LoadFlavor::CgL2Prefetch => "cg.L2::256B",
            LoadFlavor::NcL2Prefetch => "nc.L2::256B",
        }
    }
}

/// Most shared-memory stages of a [`ReadVariant::Bulk`] read and of
/// [`RooflineKernels::copy_bulk`].
pub const READ_BULK_MAX_STAGES: u32 = 16;

/// How [`RooflineKernels::read_tuned`] reads: `n` loads wrapped over a
/// working set, as `cache_read`, in one of the read-tuning shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadVariant {
    /// `in_flight` (4, 8 or 16) independent loads a thread
    /// (`read_tune_u*`); grid-stride over the working set, or (`slices`)
    /// each block re-reading only its own contiguous slice of it.
    Loads {
        /// Loads in flight a thread: 4, 8 or 16.
        in_flight: u32,
        /// The load instruction.
        flavor: LoadFlavor,
        /// Per-block slices instead of grid-stride.
        slices: bool,
    },
    /// The bulk copy engine (`read_bulk`, sm_90): chunks of `chunk_kib` KiB
    /// through `stages` shared-memory stages a block.
    Bulk {
        /// Stages, 1 to [`READ_BULK_MAX_STAGES`].
        stages: u32,
        /// KiB a chunk, 1 to 64.
        chunk_kib: u32,
    },
}

impl ReadVariant {
    /// In words (`"8 loads cg, grid-stride"`, `"bulk 4 x 16 KiB"`).
    pub fn name(&self) -> String {
        match *self {
            ReadVariant::Loads { in_flight, flavor, slices } => format!(
                "{in_flight} loads {}, {}",
                flavor.name(),
                if slices { "per-block slices" } else { "grid-stride" }
            ),
            ReadVariant::Bulk { stages, chunk_kib } => format!("bulk {stages} x {chunk_kib} KiB"),
        }
    }

    /// Dynamic shared memory a block needs (the bulk stages; 0 otherwise).
    pub fn shared_bytes(&self) -> u32 {
        match *self {
            ReadVariant::Loads { .. } => 0,
            ReadVariant::Bulk { stages, chunk_kib } => stages.saturating_mul(chunk_kib).saturating_mul(1024),
        }
    }
}

/// The probes of `roofline.cu`, loaded into one device.
pub struct RooflineKernels {
    device: Device,
    hbm_read: Typed<HbmReadSig>,
    hbm_copy: Typed<HbmCopySig>,
    copy_bulk: Typed<CopyBulkSig>,
    hbm_triad: Typed<HbmTriadSig>,
    fma_f64: Typed<FmaF64Sig>,
    fma_f32: Typed<FmaF32Sig>,
    fma_f16x2: Typed<FmaF16x2Sig>,
    fma_bf16x2: Typed<FmaBf16x2Sig>,
    cache_read: Typed<CacheReadSig>,
    read_tune_u4: Typed<ReadTuneU4Sig>,
    read_tune_u8: Typed<ReadTuneU8Sig>,
    read_tune_u16: Typed<ReadTuneU16Sig>,
    read_bulk: Typed<ReadBulkSig>,
    smem_read: Typed<SmemReadSig>,
    intensity: Typed<IntensitySig>,
    intensity_f64: Typed<IntensityF64Sig>,
    intensity_f16x2: Typed<IntensityF16x2Sig>,
}

fn invalid(kernel: KernelId, what: String) -> Error {
    Error::InvalidArgument(format!("{}: {what}", kernel.name()))
}

fn aligned16(kernel: KernelId, name: &str, ptr: u64) -> Result<()> {
    if ptr.is_multiple_of(16) {
        Ok(())
    } else {
        Err(invalid(kernel, format!("`{name}` at {ptr:#x} is not 16-byte aligned (16-byte loads)")))
    }
}

/// `len` elements of 4 bytes as whole uint4: the count of uint4.
fn quads(kernel: KernelId, name: &str, len: usize) -> Result<u64> {
    if len.is_multiple_of(4) {
        Ok((len / 4) as u64)
    } else {
        Err(invalid(kernel, format!("`{name}` has {len} elements, not a multiple of 4")))
    }
}

/// The checks `cache_read` and the read-tuning kernels share: `input`
/// (its length in `u32` words and its address) is whole uint4 — at least one,
/// fewer than 2^32 — from a 16-byte aligned start, `out` has one element and
/// `grid` is valid. Returns the working set in uint4 and the launch
/// configuration.
fn working_set_checks(
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
fn copy_checks(
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
fn sweep_checks(
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

fn same(kernel: KernelId, what: &str, a: usize, b: usize) -> Result<()> {
    if a == b { Ok(()) } else { Err(invalid(kernel, format!("{what}: {a} vs {b}"))) }
}

impl RooflineKernels {
    /// Loads `roofline.fatbin` into `device` (`cuModuleLoadData`) and takes
    /// every probe with its checked signature.
    ///
    /// # Errors
    /// A driver error; [`Error::KernelSignature`] if the fatbin and this
    /// crate disagree.
    pub fn load(device: &Device) -> Result<RooflineKernels> {
        let m = gpu_sync::Module::load(device, ModuleId::Roofline.fatbin())?;
        Ok(RooflineKernels {
            device: device.clone(),
            hbm_read: declare::HbmRead(&m)?,
            hbm_copy: declare::HbmCopy(&m)?,
            copy_bulk: declare::CopyBulk(&m)?,
            hbm_triad: declare::HbmTriad(&m)?,
            fma_f64: declare::FmaF64(&m)?,
            fma_f32: declare::FmaF32(&m)?,
            fma_f16x2: declare::FmaF16x2(&m)?,
            fma_bf16x2: declare::FmaBf16x2(&m)?,
            cache_read: declare::CacheRead(&m)?,
            read_tune_u4: declare::ReadTuneU4(&m)?,
            read_tune_u8: declare::ReadTuneU8(&m)?,
            read_tune_u16: declare::ReadTuneU16(&m)?,
            read_bulk: declare::ReadBulk(&m)?,
            smem_read: declare::SmemRead(&m)?,
            intensity: declare::IntensityF32(&m)?,
            intensity_f64: declare::IntensityF64(&m)?,
            intensity_f16x2: declare::IntensityF16x2(&m)?,
        })
    }

    /// The device they are loaded into.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `out[0] +=` the wrapping sum of every word of `input` (`hbm_read`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `input` holds whole uint4 from a
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
    /// [`Error::InvalidArgument`] unless both have one length of whole uint4
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
    /// [`Error::InvalidArgument`] unless both have one length of whole uint4
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
    /// [`Error::InvalidArgument`] unless the three have one length of whole
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

    /// One FMA probe of `prec` over `out.len()` slots and `iters`
    /// iterations; stores the results in `out` only if `store`; `clk =
    /// [SM cycles, ns]` of block 0's thread 0 over its loop: the SM clock
    /// while the probe ran. `out` is [`FmaOut::F64`] for
    /// [`FmaPrecision::F64`] and [`FmaOut::F32`] for the others.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `out` is of the wrong type for `prec`,
    /// `clk` does not have 2 elements or `grid` is invalid; a launch error.
    #[allow(clippy::too_many_arguments)]
    pub fn fma<C>(
        &self,
        stream: &Stream,
        grid: Grid,
        prec: FmaPrecision,
        seed: f64,
        iters: u32,
        store: bool,
        out: FmaOut<'_>,
        clk: &mut C,
    ) -> Result<()>
    where
        C: AsDeviceSliceMut<u64> + ?Sized,
    {
        let k = prec.kernel();
        same(k, "clk must have 2 elements", clk.device_len(), 2)?;
        let cfg = grid.config(k)?;
        let store = u32::from(store);
        // SAFETY (launch), every arm: slot `i < n` writes `out[i]` only
        // (grid-stride, one thread per slot), `n` being `out`'s length;
        // `clk[0..2]` is written by one thread and has 2 elements (checked
        // above).
        match (prec, out) {
            (FmaPrecision::F64, FmaOut::F64(out)) => {
                let n = out.device_len() as u64;
                self.fma_f64.launch(stream, cfg, (seed, iters, store, out, n, clk))
            }
            (FmaPrecision::F32, FmaOut::F32(out)) => {
                let n = out.device_len() as u64;
                self.fma_f32.launch(stream, cfg, (seed as f32, iters, store, out, n, clk))
            }
            (FmaPrecision::F16x2, FmaOut::F32(out)) => {
                let n = out.device_len() as u64;
                self.fma_f16x2.launch(stream, cfg, (seed as f32, iters, store, out, n, clk))
            }
            (FmaPrecision::Bf16x2, FmaOut::F32(out)) => {
                let n = out.device_len() as u64;
                self.fma_bf16x2.launch(stream, cfg, (seed as f32, iters, store, out, n, clk))
            }
            _ => Err(invalid(k, "FP64 stores f64 results, the others f32".into())),
        }
    }

    /// `out[0] +=` the wrapping sum of the words of `n` loads wrapped over
    /// `input` (`cache_read`), in the order and with the loads `hint` names.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `input` holds whole uint4 (fewer
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
    /// [`Error::InvalidArgument`] unless `input` holds whole uint4 (fewer
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
    /// [`Error::InvalidArgument`] unless `out` has 2 elements and `grid` is
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

    /// `out = input` after `fmas` FMAs per float (`intensity_f32`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless both have one length of whole
    /// float4 from 16-byte aligned starts and `grid` is valid; a launch error.
    pub fn intensity<I, O>(
        &self,
        stream: &Stream,
        grid: Grid,
        input: &I,
        out: &mut O,
        fmas: u32,
    ) -> Result<()>
    where
        I: AsDeviceSlice<f32> + ?Sized,
        O: AsDeviceSliceMut<f32> + ?Sized,
    {
        let (input_v, out_v) =
            ((input.device_len(), input.device_ptr()), (out.device_len(), out.device_ptr()));
        let (n4, cfg) = sweep_checks(KernelId::IntensityF32, grid, input_v, out_v, 4)?;
        // SAFETY (launch): float4 indices `< n4` of both views, exactly
        // `4 * n4` floats each from 16-byte aligned starts (checked above);
        // one thread per index.
        self.intensity.launch(stream, cfg, (input, out, fmas, n4))
    }
}

impl RooflineKernels {
    /// `out = input` after `fmas` FMAs per double (`intensity_f64`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless both have one even length (whole
    /// uint4 of two doubles) from 16-byte aligned starts and `grid` is
    /// valid; a launch error.
    pub fn intensity_f64<I, O>(
        &self,
        stream: &Stream,
        grid: Grid,
        input: &I,
        out: &mut O,
        fmas: u32,
    ) -> Result<()>
    where
        I: AsDeviceSlice<f64> + ?Sized,
        O: AsDeviceSliceMut<f64> + ?Sized,
    {
        let (input_v, out_v) =
            ((input.device_len(), input.device_ptr()), (out.device_len(), out.device_ptr()));
        let (n4, cfg) = sweep_checks(KernelId::IntensityF64, grid, input_v, out_v, 2)?;
        // SAFETY (launch): uint4 indices `< n4` of both views, exactly
        // `2 * n4` doubles each from 16-byte aligned starts (checked above);
        // one thread per index.
        self.intensity_f64.launch(stream, cfg, (input, out, fmas, n4))
    }

    /// `out = input` after `fmas` FMAs per half (`intensity_f16x2`); each
    /// `u32` is one half2 word, low half first.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless both have one length of whole uint4
    /// (a multiple of 4 words) from 16-byte aligned starts and `grid` is
    /// valid; a launch error.
    pub fn intensity_f16x2<I, O>(
        &self,
        stream: &Stream,
        grid: Grid,
        input: &I,
        out: &mut O,
        fmas: u32,
    ) -> Result<()>
    where
        I: AsDeviceSlice<u32> + ?Sized,
        O: AsDeviceSliceMut<u32> + ?Sized,
    {
        let (input_v, out_v) =
            ((input.device_len(), input.device_ptr()), (out.device_len(), out.device_ptr()));
        let (n4, cfg) = sweep_checks(KernelId::IntensityF16x2, grid, input_v, out_v, 4)?;
        // SAFETY (launch): uint4 indices `< n4` of both views, exactly
        // `4 * n4` words each from 16-byte aligned starts (checked above);
        // one thread per index.
        self.intensity_f16x2.launch(stream, cfg, (input, out, fmas, n4))
    }
}

/// The result buffer of an FMA probe: `f64` for FP64, `f32` for the others.
pub enum FmaOut<'a> {
    /// FP64 results.
    F64(&'a mut gpu_sync::DeviceBuffer<f64>),
    /// FP32, FP16x2 and BF16x2 results (the 16-bit sums are taken in f32).
    F32(&'a mut gpu_sync::DeviceBuffer<f32>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names() {
        assert_eq!(hbm_variant_name(0), "2 loads, plain, grid-stride");
        assert_eq!(hbm_variant_name(5), "8 loads, nc/cs, grid-stride");
        assert_eq!(hbm_variant_name(7), "4 loads, nc.L2::256B/cs, grid-stride");
        assert_eq!(hbm_variant_name(13), "4 loads, nc/cs, tiles");
        assert_eq!(hbm_variant_name(11), "8 loads, plain, tiles");
    }

    #[test]
    fn read_variants_in_words_and_shared_memory() {
        let codes: Vec<u32> = LoadFlavor::ALL.iter().map(|f| f.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6], "the kernels' FLAVOR numbers");
        let loads = ReadVariant::Loads { in_flight: 8, flavor: LoadFlavor::NcL2Prefetch, slices: true };
        assert_eq!(loads.name(), "8 loads nc.L2::256B, per-block slices");
        assert_eq!(loads.shared_bytes(), 0);
        let bulk = ReadVariant::Bulk { stages: 2, chunk_kib: 32 };
        assert_eq!(bulk.name(), "bulk 2 x 32 KiB");
        assert_eq!(bulk.shared_bytes(), 64 << 10);
    }

    #[test]
    fn grid_shapes_are_checked() {
        let ok = Grid { blocks: 4, threads: 256 };
        assert!(ok.config(KernelId::HbmRead).is_ok());
        assert_eq!(ok.total(), 1024);
        for bad in [(0, 256), (1, 0), (1, 48), (1, 2048)] {
            let g = Grid { blocks: bad.0, threads: bad.1 };
            assert!(matches!(g.config(KernelId::HbmRead), Err(Error::InvalidArgument(_))), "{bad:?}");
        }
        assert_eq!(FmaPrecision::F16x2.lanes(), 2);
    }

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
