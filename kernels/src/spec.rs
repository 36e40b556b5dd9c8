//! The vocabulary of the kernel table (`table.rs`, one declaration per
//! kernel): modules, C types, parameters and their access and extent, and
//! the [`KernelInfo`] each declaration generates.
//!
//! The names avoid gpu-sync's: a [`KernelId`] names a kernel (gpu-sync's
//! `KernelId<S>` is a loaded, typed one), a [`ModuleId`] a fatbin (gpu-sync's
//! `Module` a loaded one), [`ParamAccess`] and [`KernelParam`] describe the
//! C parameters (gpu-sync's `Access` and `Param` are its tracker's and
//! signature's), and [`Extent`] how far a pointer reaches (gpu-sync's `Len`
//! is a checked length argument).

use crate::fatbins;
pub use crate::table::KernelId;

/// A compiled module: one `kernels/cu/<name>.cu`, built into
/// `kernels/fatbin/<name>.fatbin` by `cargo xtask kernels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModuleId {
    /// `stream.cu`: the memory-bandwidth probes.
    Stream,
    /// `spin.cu`: the kernel of known length in cycles.
    Spin,
    /// `pattern.cu`: fill and check a seeded pattern.
    Pattern,
    /// `elementwise.cu`: small element-wise kernels for tests.
    Elementwise,
    /// `bench.cu`: gpu-bench's instruments (clock probe, spin gate, SM copy
    /// from mapped host memory).
    Bench,
    /// `roofline.cu`: the roofline's probes (HBM variants, FMA chains, the
    /// cache sweep, shared memory, the intensity sweep).
    Roofline,
    /// `tensor.cu`: the tensor-core probes (`wgmma`, sm_90a only).
    Tensor,
    /// `mma.cu`: the tensor-core probes through `mma.sync` (sm_80 and
    /// newer): the fallback where `wgmma` does not exist.
    Mma,
}

impl ModuleId {
    /// Every module.
    pub const ALL: [ModuleId; 8] = [
        ModuleId::Stream,
        ModuleId::Spin,
        ModuleId::Pattern,
        ModuleId::Elementwise,
        ModuleId::Bench,
        ModuleId::Roofline,
        ModuleId::Tensor,
        ModuleId::Mma,
    ];

    /// The source's file stem (`"stream"`).
    pub const fn name(self) -> &'static str {
        match self {
            ModuleId::Stream => "stream",
            ModuleId::Spin => "spin",
            ModuleId::Pattern => "pattern",
            ModuleId::Elementwise => "elementwise",
            ModuleId::Bench => "bench",
            ModuleId::Roofline => "roofline",
            ModuleId::Tensor => "tensor",
            ModuleId::Mma => "mma",
        }
    }

    /// The module's fatbin image, 8-byte aligned, ready for
    /// `cuModuleLoadData`.
    pub fn fatbin(self) -> &'static [u8] {
        fatbins::fatbin(self)
    }

    /// The kernels this module defines.
    pub fn kernels(self) -> impl Iterator<Item = &'static KernelInfo> {
        KernelId::ALL.into_iter().map(KernelId::info).filter(move |k| k.module == self)
    }
}

/// The C type of a scalar parameter or of the elements a pointer points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ty {
    /// `unsigned int`.
    U32,
    /// `unsigned long long`.
    U64,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// `uint4`: four `unsigned int`, 16 bytes, 16-byte aligned.
    U32x4,
}

impl Ty {
    /// Size in bytes.
    pub const fn size(self) -> usize {
        match self {
            Ty::U32 | Ty::F32 => 4,
            Ty::U64 | Ty::F64 => 8,
            Ty::U32x4 => 16,
        }
    }

    /// Natural alignment in bytes, as CUDA lays the type out.
    pub const fn align(self) -> usize {
        self.size()
    }

    /// The type's spelling in the `.cu` sources.
    pub const fn c_name(self) -> &'static str {
        match self {
            Ty::U32 => "unsigned int",
            Ty::U64 => "unsigned long long",
            Ty::F32 => "float",
            Ty::F64 => "double",
            Ty::U32x4 => "uint4",
        }
    }
}

/// How a kernel uses the memory behind a pointer parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamAccess {
    /// Only reads (`const T*`).
    Read,
    /// Only writes (every element in range is overwritten).
    Write,
    /// Reads and writes (read-modify-write, or an atomic accumulator).
    ReadWrite,
}

/// How many elements a pointer parameter covers in one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extent {
    /// The value of the `u64` scalar parameter at this index, in elements of
    /// the pointer's [`Ty`].
    Param(usize),
    /// A fixed number of elements.
    Fixed(u64),
}

/// What one parameter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A value passed by copy.
    Scalar(Ty),
    /// A device pointer (8 bytes).
    Pointer {
        /// The element type it points at.
        elem: Ty,
        /// Read, write, or both.
        access: ParamAccess,
        /// The byte alignment the pointer value must have. Larger than
        /// `elem.align()` where the kernel uses vector loads (`triad_f32`
        /// reads `float*` through `float4`): a misaligned pointer faults on a
        /// GPU (`CUDA_ERROR_MISALIGNED_ADDRESS`, sticky), so wrappers must
        /// reject views at offsets that break it. `cuMemAlloc` returns
        /// 256-byte aligned pointers.
        align: usize,
        /// How many elements the kernel touches.
        len: Extent,
        /// Whether it points into mapped pinned host memory: the wrapper
        /// passes its device address as a `u64`, which the tracker does not
        /// see (the wrapper is an `unsafe fn` for that reason).
        mapped: bool,
    },
}

/// One kernel parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelParam {
    /// Its name in the `.cu` source.
    pub name: &'static str,
    /// What it is.
    pub kind: ParamKind,
}

impl KernelParam {
    /// Size in bytes as passed at launch (and as `cuFuncGetParamInfo`
    /// reports it): 8 for a pointer.
    pub const fn size(&self) -> usize {
        match self.kind {
            ParamKind::Scalar(ty) => ty.size(),
            ParamKind::Pointer { .. } => 8,
        }
    }

    /// Whether this is a device pointer.
    pub const fn is_pointer(&self) -> bool {
        matches!(self.kind, ParamKind::Pointer { .. })
    }
}

/// Which launch shapes a kernel supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaunchRule {
    /// Any grid and block.
    Any,
    /// A 1-D grid and block (`y == z == 1`) of any size: the kernel indexes
    /// with `blockIdx.x`/`threadIdx.x` only, so extra dimensions would repeat
    /// work (and race on read-modify-write kernels).
    Linear,
    /// As [`LaunchRule::Linear`], and `blockDim.x` a multiple of 32 (the
    /// block reduction shuffles across full warps).
    LinearFullWarps,
}

/// Everything known about one kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelInfo {
    /// Which kernel.
    pub kernel: KernelId,
    /// The `extern "C"` symbol, as `cuModuleGetFunction` is asked for it.
    pub name: &'static str,
    /// The module (fatbin) defining it.
    pub module: ModuleId,
    /// Its parameters, in order.
    pub params: &'static [KernelParam],
    /// Which launch shapes it supports.
    pub launch: LaunchRule,
    /// Whether it accumulates into a pointer the caller must zero (or set)
    /// before the launch (`*out += …`).
    pub accumulates: bool,
}

impl KernelInfo {
    /// Index of the `u64` scalar that sizes the launch (the element count
    /// the data pointers' [`Extent::Param`] name), or `None` (`spin_cycles`).
    pub fn size_param(&self) -> Option<usize> {
        self.params.iter().find_map(|p| match p.kind {
            ParamKind::Pointer { len: Extent::Param(i), .. } => Some(i),
            _ => None,
        })
    }
}

impl KernelId {
    /// The `extern "C"` symbol.
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// The kernel with this symbol, if it is one of ours.
    pub fn from_name(name: &str) -> Option<KernelId> {
        KernelId::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Threads per block the wrappers should use unless they have a reason not
/// to: a multiple of 32 (as [`LaunchRule::LinearFullWarps`] needs) that keeps
/// full occupancy at the kernels' register counts (≤ 40 on sm_80/sm_90).
pub const DEFAULT_BLOCK: u32 = 256;

/// Sixteen-byte vectors each thread of a tiled kernel (`copy_u32x4`,
/// `triad_f32`, and every kernel of `elementwise.cu`) takes per tile: a
/// tile is this many times the block's width of consecutive vectors, and
/// [`Kernels::grid_tiles`](crate::Kernels::grid_tiles) launches one block per
/// tile. Equal to `ST_U` in `stream.cu` and `EW_U` in `elementwise.cu`
/// (the kernels are correct with any grid; this only sizes it).
pub const TILE_VECTORS: u32 = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn table_is_consistent() {
        let mut names = HashSet::new();
        for k in KernelId::ALL {
            let info = k.info();
            assert_eq!(info.kernel, k);
            assert!(names.insert(info.name), "duplicate name {}", info.name);
            assert_eq!(KernelId::from_name(info.name), Some(k));
            let mut param_names = HashSet::new();
            for p in info.params {
                assert!(param_names.insert(p.name), "{}: duplicate param {}", info.name, p.name);
                if let ParamKind::Pointer { elem, align, len, .. } = p.kind {
                    assert!(align.is_power_of_two() && align >= elem.align(), "{}.{}", info.name, p.name);
                    if let Extent::Param(i) = len {
                        assert_eq!(info.size_param(), Some(i), "{}: one size argument", info.name);
                        assert_eq!(
                            info.params.get(i).map(|q| q.kind),
                            Some(ParamKind::Scalar(Ty::U64)),
                            "{}.{} length must name a u64 scalar",
                            info.name,
                            p.name
                        );
                    }
                }
            }
            // An accumulating kernel has a read-write pointer to accumulate in.
            if info.accumulates {
                assert!(info.params.iter().any(|p| matches!(
                    p.kind,
                    ParamKind::Pointer { access: ParamAccess::ReadWrite, len: Extent::Fixed(1), .. }
                )));
            }
        }
        assert_eq!(KernelId::from_name("nope"), None);
    }

    #[test]
    fn every_module_has_kernels() {
        let total: usize = ModuleId::ALL.iter().map(|m| m.kernels().count()).sum();
        assert_eq!(total, KernelId::ALL.len());
        for m in ModuleId::ALL {
            assert!(m.kernels().count() > 0, "{}", m.name());
        }
        assert_eq!(
            ModuleId::Stream.kernels().map(|k| k.name).collect::<Vec<_>>(),
            ["read_sum_u32x4", "copy_u32x4", "triad_f32"]
        );
    }

    #[test]
    fn vector_kernels_demand_16_byte_pointers() {
        for k in [KernelId::ReadSumU32x4, KernelId::CopyU32x4, KernelId::TriadF32, KernelId::CopyMappedU32x4]
        {
            let data_ptrs = k.info().params.iter().filter_map(|p| match p.kind {
                ParamKind::Pointer { align, len: Extent::Param(_), .. } => Some(align),
                _ => None,
            });
            assert!(data_ptrs.clone().count() > 0);
            assert!(data_ptrs.into_iter().all(|a| a == 16), "{}", k.name());
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(
            KernelId::TriadF32.info().params.iter().map(KernelParam::size).collect::<Vec<_>>(),
            [8, 8, 8, 4, 8]
        );
        assert_eq!(Ty::U32x4.size(), 16);
        assert!(KernelId::SpinCycles.info().params[1].is_pointer());
    }
}
