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

use crate::checks::invalid;
use crate::spec::{KernelId, ModuleId};
use crate::table::{
    CacheReadSig, CopyBulkSig, FmaBf16x2Sig, FmaF16x2Sig, FmaF32Sig, FmaF64Sig, HbmCopySig, HbmReadSig,
    HbmTriadSig, IntensityF16x2Sig, IntensityF64Sig, IntensitySig, ReadBulkSig, ReadTuneU4Sig, ReadTuneU8Sig,
    ReadTuneU16Sig, SmemReadSig, declare,
};
use gpu_sync::{Device, Kernel as Typed, LaunchConfig, Result};

mod cache;
mod checks;
mod compute;
mod hbm;

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

impl RooflineKernels {
    /// Loads `roofline.fatbin` into `device` (`cuModuleLoadData`) and takes
    /// every probe with its checked signature.
    ///
    /// # Errors
    /// A driver error; [`Error::KernelSignature`](gpu_sync::Error::KernelSignature) if the fatbin and this
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
    use gpu_sync::Error;

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
}
