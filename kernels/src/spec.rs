//! The kernel table: every kernel's name, module and parameters — the single
//! source of truth for the simulator registration (`sim.rs`) and the typed
//! launch wrappers.
//!
//! A test (`tests/signatures.rs`) parses the `extern "C"` signatures in
//! `kernels/cu/*.cu` and compares them with this table, so the two cannot
//! drift apart silently.

use crate::fatbins;

/// A compiled module: one `kernels/cu/<name>.cu`, built into
/// `kernels/fatbin/<name>.fatbin` by `cargo xtask kernels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Module {
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
}

impl Module {
    /// Every module.
    pub const ALL: [Module; 5] =
        [Module::Stream, Module::Spin, Module::Pattern, Module::Elementwise, Module::Bench];

    /// The source's file stem (`"stream"`).
    pub const fn name(self) -> &'static str {
        match self {
            Module::Stream => "stream",
            Module::Spin => "spin",
            Module::Pattern => "pattern",
            Module::Elementwise => "elementwise",
            Module::Bench => "bench",
        }
    }

    /// The module's fatbin image, 8-byte aligned, ready for
    /// `cuModuleLoadData`.
    pub fn fatbin(self) -> &'static [u8] {
        fatbins::fatbin(self)
    }

    /// The kernels this module defines.
    pub fn kernels(self) -> impl Iterator<Item = &'static KernelInfo> {
        Kernel::ALL.into_iter().map(Kernel::info).filter(move |k| k.module == self)
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
    /// `uint4`: four `unsigned int`, 16 bytes, 16-byte aligned.
    U32x4,
}

impl Ty {
    /// Size in bytes.
    pub const fn size(self) -> usize {
        match self {
            Ty::U32 | Ty::F32 => 4,
            Ty::U64 => 8,
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
            Ty::U32x4 => "uint4",
        }
    }
}

/// How a kernel uses the memory behind a pointer parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Only reads (`const T*`).
    Read,
    /// Only writes (every element in range is overwritten).
    Write,
    /// Reads and writes (read-modify-write, or an atomic accumulator).
    ReadWrite,
}

/// How many elements a pointer parameter covers in one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Len {
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
        access: Access,
        /// The byte alignment the pointer value must have. Larger than
        /// `elem.align()` where the kernel uses vector loads (`triad_f32`
        /// reads `float*` through `float4`): a misaligned pointer faults on a
        /// GPU (`CUDA_ERROR_MISALIGNED_ADDRESS`, sticky), so wrappers must
        /// reject views at offsets that break it. `cuMemAlloc` returns
        /// 256-byte aligned pointers.
        align: usize,
        /// How many elements the kernel touches.
        len: Len,
    },
}

/// One kernel parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Param {
    /// Its name in the `.cu` source.
    pub name: &'static str,
    /// What it is.
    pub kind: ParamKind,
}

impl Param {
    const fn scalar(name: &'static str, ty: Ty) -> Param {
        Param { name, kind: ParamKind::Scalar(ty) }
    }

    const fn ptr(name: &'static str, elem: Ty, access: Access, align: usize, len: Len) -> Param {
        Param { name, kind: ParamKind::Pointer { elem, access, align, len } }
    }

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
    pub kernel: Kernel,
    /// The `extern "C"` symbol, as `cuModuleGetFunction` is asked for it.
    pub name: &'static str,
    /// The module (fatbin) defining it.
    pub module: Module,
    /// Its parameters, in order.
    pub params: &'static [Param],
    /// Which launch shapes it supports.
    pub launch: LaunchRule,
    /// Whether it accumulates into a pointer the caller must zero (or set)
    /// before the launch (`*out += …`).
    pub accumulates: bool,
}

impl KernelInfo {
    /// Index of the `u64` scalar that sizes the launch (the element count
    /// the data pointers' [`Len::Param`] name), or `None` (`spin_cycles`).
    pub fn size_param(&self) -> Option<usize> {
        self.params.iter().find_map(|p| match p.kind {
            ParamKind::Pointer { len: Len::Param(i), .. } => Some(i),
            _ => None,
        })
    }
}

/// Every kernel in `kernels/cu/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// `read_sum_u32x4(const uint4* in, u64 n4, u64* out)`: `*out +=` the
    /// wrapping sum of all `4*n4` words; the HBM read probe.
    ReadSumU32x4,
    /// `copy_u32x4(const uint4* src, uint4* dst, u64 n4)`.
    CopyU32x4,
    /// `triad_f32(float* a, const float* b, const float* c, float scalar, u64 n)`:
    /// `a = fma(scalar, c, b)`.
    TriadF32,
    /// `spin_cycles(u64 cycles, u64* out)`: busy-waits `cycles` SM clocks.
    SpinCycles,
    /// `fill_pattern_u32(unsigned* dst, u64 n, unsigned seed)`.
    FillPatternU32,
    /// `check_pattern_u32(const unsigned* src, u64 n, unsigned seed, u64* mismatches)`.
    CheckPatternU32,
    /// `scale_f32(const float* in, float* out, float a, u64 n)`: `out = a*in`.
    ScaleF32,
    /// `add_f32(const float* x, const float* y, float* out, u64 n)`.
    AddF32,
    /// `mix_u32(const unsigned* a, const unsigned* b, unsigned* out, unsigned salt, u64 n)`.
    MixU32,
    /// `bump_u32(unsigned* x, unsigned add, u64 n)`: `x += add` in place.
    BumpU32,
    /// `clock_probe(u64 cycles, u64* out)`: spins `cycles` SM clocks in one
    /// thread; `out = [cycles waited, %globaltimer ns over them]`.
    ClockProbe,
    /// `spin_gate(const unsigned* flag, u64 timeout_ns, u64* out)`: one
    /// thread spins until `*flag != 0` (mapped host memory) or the timeout;
    /// `out[0] = 1` if the flag opened it.
    SpinGate,
    /// `copy_mapped_u32x4(const uint4* src, uint4* dst, u64 n4)`: an SM copy
    /// whose source is mapped pinned host memory.
    CopyMappedU32x4,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 13] = [
        Kernel::ReadSumU32x4,
        Kernel::CopyU32x4,
        Kernel::TriadF32,
        Kernel::SpinCycles,
        Kernel::FillPatternU32,
        Kernel::CheckPatternU32,
        Kernel::ScaleF32,
        Kernel::AddF32,
        Kernel::MixU32,
        Kernel::BumpU32,
        Kernel::ClockProbe,
        Kernel::SpinGate,
        Kernel::CopyMappedU32x4,
    ];

    /// The kernel's table entry.
    pub const fn info(self) -> &'static KernelInfo {
        match self {
            Kernel::ReadSumU32x4 => &READ_SUM_U32X4,
            Kernel::CopyU32x4 => &COPY_U32X4,
            Kernel::TriadF32 => &TRIAD_F32,
            Kernel::SpinCycles => &SPIN_CYCLES,
            Kernel::FillPatternU32 => &FILL_PATTERN_U32,
            Kernel::CheckPatternU32 => &CHECK_PATTERN_U32,
            Kernel::ScaleF32 => &SCALE_F32,
            Kernel::AddF32 => &ADD_F32,
            Kernel::MixU32 => &MIX_U32,
            Kernel::BumpU32 => &BUMP_U32,
            Kernel::ClockProbe => &CLOCK_PROBE,
            Kernel::SpinGate => &SPIN_GATE,
            Kernel::CopyMappedU32x4 => &COPY_MAPPED_U32X4,
        }
    }

    /// The `extern "C"` symbol.
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// The kernel with this symbol, if it is one of ours.
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Threads per block the wrappers should use unless they have a reason not
/// to: a multiple of 32 (as [`LaunchRule::LinearFullWarps`] needs) that keeps
/// full occupancy at the kernels' register counts (≤ 40 on sm_80/sm_90).
pub const DEFAULT_BLOCK: u32 = 256;

use Access::{Read, ReadWrite, Write};

const READ_SUM_U32X4: KernelInfo = KernelInfo {
    kernel: Kernel::ReadSumU32x4,
    name: "read_sum_u32x4",
    module: Module::Stream,
    params: &[
        Param::ptr("in", Ty::U32x4, Read, 16, Len::Param(1)),
        Param::scalar("n4", Ty::U64),
        Param::ptr("out", Ty::U64, ReadWrite, 8, Len::Fixed(1)),
    ],
    launch: LaunchRule::LinearFullWarps,
    accumulates: true,
};

const COPY_U32X4: KernelInfo = KernelInfo {
    kernel: Kernel::CopyU32x4,
    name: "copy_u32x4",
    module: Module::Stream,
    params: &[
        Param::ptr("src", Ty::U32x4, Read, 16, Len::Param(2)),
        Param::ptr("dst", Ty::U32x4, Write, 16, Len::Param(2)),
        Param::scalar("n4", Ty::U64),
    ],
    launch: LaunchRule::Linear,
    accumulates: false,
};

const TRIAD_F32: KernelInfo = KernelInfo {
    kernel: Kernel::TriadF32,
    name: "triad_f32",
    module: Module::Stream,
    params: &[
        Param::ptr("a", Ty::F32, Write, 16, Len::Param(4)),
        Param::ptr("b", Ty::F32, Read, 16, Len::Param(4)),
        Param::ptr("c", Ty::F32, Read, 16, Len::Param(4)),
        Param::scalar("scalar", Ty::F32),
        Param::scalar("n", Ty::U64),
    ],
    launch: LaunchRule::Linear,
    accumulates: false,
};

const SPIN_CYCLES: KernelInfo = KernelInfo {
    kernel: Kernel::SpinCycles,
    name: "spin_cycles",
    module: Module::Spin,
    params: &[Param::scalar("cycles", Ty::U64), Param::ptr("out", Ty::U64, Write, 8, Len::Fixed(1))],
    launch: LaunchRule::Any,
    accumulates: false,
};

const FILL_PATTERN_U32: KernelInfo = KernelInfo {
    kernel: Kernel::FillPatternU32,
    name: "fill_pattern_u32",
    module: Module::Pattern,
    params: &[
        Param::ptr("dst", Ty::U32, Write, 4, Len::Param(1)),
        Param::scalar("n", Ty::U64),
        Param::scalar("seed", Ty::U32),
    ],
    launch: LaunchRule::Linear,
    accumulates: false,
};

const CHECK_PATTERN_U32: KernelInfo = KernelInfo {
    kernel: Kernel::CheckPatternU32,
    name: "check_pattern_u32",
    module: Module::Pattern,
    params: &[
        Param::ptr("src", Ty::U32, Read, 4, Len::Param(1)),
        Param::scalar("n", Ty::U64),
        Param::scalar("seed", Ty::U32),
        Param::ptr("mismatches", Ty::U64, ReadWrite, 8, Len::Fixed(1)),
    ],
    launch: LaunchRule::Linear,
    accumulates: true,
};

const SCALE_F32: KernelInfo = KernelInfo {
    kernel: Kernel::ScaleF32,
    name: "scale_f32",
    module: Module::Elementwise,
    params: &[
        Param::ptr("in", Ty::F32, Read, 4, Len::Param(3)),
        Param::ptr("out", Ty::F32, Write, 4, Len::Param(3)),
        Param::scalar("a", Ty::F32),
        Param::scalar("n", Ty::U64),
    ],
    launch: LaunchRule::Linear,
    accumulates: false,
};

const ADD_F32: KernelInfo = KernelInfo {
    kernel: Kernel::AddF32,
    name: "add_f32",
    module: Module::Elementwise,
    params: &[
        Param::ptr("x", Ty::F32, Read, 4, Len::Param(3)),
        Param::ptr("y", Ty::F32, Read, 4, Len::Param(3)),
        Param::ptr("out", Ty::F32, Write, 4, Len::Param(3)),
        Param::scalar("n", Ty::U64),
    ],
    launch: LaunchRule::Linear,
    accumulates: false,
};

const MIX_U32: KernelInfo = KernelInfo {
    kernel: Kernel::MixU32,
    name: "mix_u32",
    module: Module::Elementwise,
    params: &[
        Param::ptr("a", Ty::U32, Read, 4, Len::Param(4)),
        Param::ptr("b", Ty::U32, Read, 4, Len::Param(4)),
        Param::ptr("out", Ty::U32, Write, 4, Len::Param(4)),
        Param::scalar("salt", Ty::U32),
        Param::scalar("n", Ty::U64),
    ],
    launch: LaunchRule::Linear,
    accumulates: false,
};

const BUMP_U32: KernelInfo = KernelInfo {
    kernel: Kernel::BumpU32,
    name: "bump_u32",
    module: Module::Elementwise,
    params: &[
        Param::ptr("x", Ty::U32, ReadWrite, 4, Len::Param(2)),
        Param::scalar("add", Ty::U32),
        Param::scalar("n", Ty::U64),
    ],
    launch: LaunchRule::Linear,
    accumulates: false,
};

const CLOCK_PROBE: KernelInfo = KernelInfo {
    kernel: Kernel::ClockProbe,
    name: "clock_probe",
    module: Module::Bench,
    params: &[Param::scalar("cycles", Ty::U64), Param::ptr("out", Ty::U64, Write, 8, Len::Fixed(2))],
    launch: LaunchRule::Any,
    accumulates: false,
};

const SPIN_GATE: KernelInfo = KernelInfo {
    kernel: Kernel::SpinGate,
    name: "spin_gate",
    module: Module::Bench,
    params: &[
        // Mapped pinned host memory (the host writes it while the kernel runs).
        Param::ptr("flag", Ty::U32, Read, 4, Len::Fixed(1)),
        Param::scalar("timeout_ns", Ty::U64),
        Param::ptr("out", Ty::U64, Write, 8, Len::Fixed(1)),
    ],
    launch: LaunchRule::Any,
    accumulates: false,
};

const COPY_MAPPED_U32X4: KernelInfo = KernelInfo {
    kernel: Kernel::CopyMappedU32x4,
    name: "copy_mapped_u32x4",
    module: Module::Bench,
    params: &[
        // Mapped pinned host memory.
        Param::ptr("src", Ty::U32x4, Read, 16, Len::Param(2)),
        Param::ptr("dst", Ty::U32x4, Write, 16, Len::Param(2)),
        Param::scalar("n4", Ty::U64),
    ],
    launch: LaunchRule::Linear,
    accumulates: false,
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn table_is_consistent() {
        let mut names = HashSet::new();
        for k in Kernel::ALL {
            let info = k.info();
            assert_eq!(info.kernel, k);
            assert!(names.insert(info.name), "duplicate name {}", info.name);
            assert_eq!(Kernel::from_name(info.name), Some(k));
            let mut param_names = HashSet::new();
            for p in info.params {
                assert!(param_names.insert(p.name), "{}: duplicate param {}", info.name, p.name);
                if let ParamKind::Pointer { elem, align, len, .. } = p.kind {
                    assert!(align.is_power_of_two() && align >= elem.align(), "{}.{}", info.name, p.name);
                    if let Len::Param(i) = len {
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
                    ParamKind::Pointer { access: Access::ReadWrite, len: Len::Fixed(1), .. }
                )));
            }
        }
        assert_eq!(Kernel::from_name("nope"), None);
    }

    #[test]
    fn every_module_has_kernels() {
        let total: usize = Module::ALL.iter().map(|m| m.kernels().count()).sum();
        assert_eq!(total, Kernel::ALL.len());
        for m in Module::ALL {
            assert!(m.kernels().count() > 0, "{}", m.name());
        }
        assert_eq!(
            Module::Stream.kernels().map(|k| k.name).collect::<Vec<_>>(),
            ["read_sum_u32x4", "copy_u32x4", "triad_f32"]
        );
    }

    #[test]
    fn vector_kernels_demand_16_byte_pointers() {
        for k in [Kernel::ReadSumU32x4, Kernel::CopyU32x4, Kernel::TriadF32, Kernel::CopyMappedU32x4] {
            let data_ptrs = k.info().params.iter().filter_map(|p| match p.kind {
                ParamKind::Pointer { align, len: Len::Param(_), .. } => Some(align),
                _ => None,
            });
            assert!(data_ptrs.clone().count() > 0);
            assert!(data_ptrs.into_iter().all(|a| a == 16), "{}", k.name());
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(TRIAD_F32.params.iter().map(Param::size).collect::<Vec<_>>(), [8, 8, 8, 4, 8]);
        assert_eq!(Ty::U32x4.size(), 16);
        assert!(SPIN_CYCLES.params[1].is_pointer());
    }
}
