//! The kernel table: **one declaration per kernel**, from which everything
//! else about it is generated — its [`KernelId`] and [`KernelInfo`] spec entry
//! (symbol, module, parameters with access, element type, alignment and
//! extent), its gpu-sync signature type (`*Sig`), the crate-private
//! `declare` function that takes it from a loaded module as a typed kernel,
//! its cost model and (feature `sim`) its simulator registration.
//!
//! Each parameter is written once, as `"name": RustType = spec`: the gpu-sync
//! type the wrappers launch with and what the `.cu` source declares. A
//! compile-time check (`check_sig`) proves the two agree (a `const T*` is an
//! [`In`], a written pointer an [`Out`], a [`Len`] bounds every buffer of
//! the launch in that buffer's own element unit, scalars keep their type),
//! and `tests/signatures.rs` compares the spec with the `extern "C"`
//! prototypes in `kernels/cu/*.cu`.
//!
//! Unsafe code: the generated `declare` functions call
//! `gpu_sync::Module::kernel` (an `unsafe fn`). Each entry's `contract`
//! argues obligations 2 and 4 of its `# Safety` against the `.cu` source,
//! next to the parameter list that is obligation 1; obligation 3 (bounds and
//! launch shape) is proved by the wrapper at each launch, which is why
//! `declare` is crate-private and no typed kernel is handed out.
#![allow(unsafe_code)]

use crate::cost::{self, Cost};
use crate::spec::{Extent, KernelInfo, KernelParam, LaunchRule, ModuleId, ParamAccess, ParamKind, Ty};
use gpu_sync::{In, Len, Out};

/// What a gpu-sync signature parameter type is, for the compile-time check
/// against the spec.
#[derive(Debug, Clone, Copy)]
enum SigKind {
    /// [`In<T>`], with `size_of::<T>()`.
    In(usize),
    /// [`Out<T>`], with `size_of::<T>()`.
    Out(usize),
    /// [`Len`].
    Len,
    /// A scalar of this C type.
    Scalar(Ty),
}

/// The gpu-sync parameter types the table uses.
trait SigParam {
    const KIND: SigKind;
}
impl<T: bytemuck::Pod> SigParam for In<T> {
    const KIND: SigKind = SigKind::In(size_of::<T>());
}
impl<T: bytemuck::Pod> SigParam for Out<T> {
    const KIND: SigKind = SigKind::Out(size_of::<T>());
}
impl SigParam for Len {
    const KIND: SigKind = SigKind::Len;
}
impl SigParam for u32 {
    const KIND: SigKind = SigKind::Scalar(Ty::U32);
}
impl SigParam for u64 {
    const KIND: SigKind = SigKind::Scalar(Ty::U64);
}
impl SigParam for f32 {
    const KIND: SigKind = SigKind::Scalar(Ty::F32);
}
impl SigParam for f64 {
    const KIND: SigKind = SigKind::Scalar(Ty::F64);
}

const fn same_ty(a: Ty, b: Ty) -> bool {
    a as u8 == b as u8
}

/// Whether a view of `sig_elem`-byte elements may stand for a pointer to
/// `elem` (the kernel reads the view's bytes as `elem`: `uint4` through a
/// `u32` view).
const fn view_fits(elem: Ty, sig_elem: usize) -> bool {
    sig_elem != 0 && elem.size().is_multiple_of(sig_elem)
}

/// Panics (at compile time: every call is in a `const`) unless `sig` is the
/// gpu-sync form of `info`'s parameter list.
const fn check_sig(info: &KernelInfo, sig: &[SigKind]) {
    assert!(info.params.len() == sig.len(), "signature and spec differ in parameter count");
    let mut i = 0;
    while i < sig.len() {
        match (info.params[i].kind, sig[i]) {
            (ParamKind::Pointer { access: ParamAccess::Read, mapped: false, elem, .. }, SigKind::In(s)) => {
                assert!(view_fits(elem, s), "an In<T> view does not fit the pointee");
            }
            (
                ParamKind::Pointer {
                    access: ParamAccess::Write | ParamAccess::ReadWrite,
                    mapped: false,
                    elem,
                    ..
                },
                SigKind::Out(s),
            ) => {
                assert!(view_fits(elem, s), "an Out<T> view does not fit the pointee");
            }
            // Mapped host memory is passed as its device address, untracked.
            (ParamKind::Pointer { mapped: true, .. }, SigKind::Scalar(Ty::U64)) => {}
            (ParamKind::Scalar(Ty::U64), SigKind::Len) => {
                // gpu-sync checks a `Len` against every buffer argument in
                // that buffer's element type: so every buffer must extend
                // exactly this parameter's value of its Rust elements.
                let mut j = 0;
                while j < sig.len() {
                    let view = match sig[j] {
                        SigKind::In(s) | SigKind::Out(s) => s,
                        _ => 0,
                    };
                    if view != 0 {
                        match info.params[j].kind {
                            ParamKind::Pointer { elem, len: Extent::Param(k), .. } => {
                                assert!(k == i, "a Len must be the extent of every buffer");
                                assert!(elem.size() == view, "a Len counts a view's own elements");
                            }
                            _ => panic!("a Len must be the extent of every buffer"),
                        }
                    }
                    j += 1;
                }
            }
            (ParamKind::Scalar(a), SigKind::Scalar(b)) => {
                assert!(same_ty(a, b), "scalar types differ");
            }
            _ => panic!("signature and spec disagree on a parameter's kind"),
        }
        i += 1;
    }
}

const fn read(elem: Ty, align: usize, len: Extent) -> ParamKind {
    ParamKind::Pointer { elem, access: ParamAccess::Read, align, len, mapped: false }
}
const fn write(elem: Ty, align: usize, len: Extent) -> ParamKind {
    ParamKind::Pointer { elem, access: ParamAccess::Write, align, len, mapped: false }
}
const fn read_write(elem: Ty, align: usize, len: Extent) -> ParamKind {
    ParamKind::Pointer { elem, access: ParamAccess::ReadWrite, align, len, mapped: false }
}
/// A read-only pointer into mapped pinned host memory.
const fn read_mapped(elem: Ty, align: usize, len: Extent) -> ParamKind {
    ParamKind::Pointer { elem, access: ParamAccess::Read, align, len, mapped: true }
}
const fn scalar(ty: Ty) -> ParamKind {
    ParamKind::Scalar(ty)
}
/// The extent named by the `u64` scalar at this index.
const fn by(i: usize) -> Extent {
    Extent::Param(i)
}
const fn fixed(n: u64) -> Extent {
    Extent::Fixed(n)
}

macro_rules! kernel_table {
    ($(
        $(#[doc = $doc:literal])*
        $id:ident = $name:literal in $module:ident,
        launch: $launch:ident, accumulates: $acc:literal,
        sig $sig:ident($($pname:literal : $pty:ty = $pspec:expr),* $(,)?),
        cost($cn:ident) = $cost:expr,
        sim: $run:ident,
        contract: $contract:literal;
    )*) => {
        /// Every kernel in `kernels/cu/`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum KernelId {
            $($(#[doc = $doc])* $id,)*
        }

        const KERNEL_COUNT: usize = [$($name),*].len();

        impl KernelId {
            /// Every kernel.
            pub const ALL: [KernelId; KERNEL_COUNT] = [$(KernelId::$id),*];

            /// The kernel's table entry.
            pub const fn info(self) -> &'static KernelInfo {
                match self {
                    $(KernelId::$id => &entries::$id,)*
                }
            }

            /// The cost of one launch whose size argument is `size`.
            pub(crate) const fn cost(self, size: u64) -> Cost {
                match self {
                    $(KernelId::$id => {
                        let $cn = size;
                        $cost
                    })*
                }
            }

            /// The generated signature type's parameter sizes
            /// (`Signature::PARAM_SIZES`).
            #[cfg(test)]
            fn sig_param_sizes(self) -> &'static [usize] {
                match self {
                    $(KernelId::$id => <$sig as gpu_sync::Signature>::PARAM_SIZES,)*
                }
            }

            /// The generated signature's kinds, as `check_sig` sees them.
            #[cfg(test)]
            fn sig_kinds(self) -> &'static [SigKind] {
                match self {
                    $(KernelId::$id => &[$(<$pty as SigParam>::KIND),*],)*
                }
            }

            /// The simulator's CPU implementation (`sim.rs`).
            #[cfg(feature = "sim")]
            pub(crate) fn sim_run(self) -> cuda_sim::KernelFn {
                match self {
                    $(KernelId::$id => crate::sim::$run,)*
                }
            }
        }

        #[allow(non_upper_case_globals)]
        mod entries {
            use super::*;
            $(
                pub(super) const $id: KernelInfo = KernelInfo {
                    kernel: KernelId::$id,
                    name: $name,
                    module: ModuleId::$module,
                    params: &[$(KernelParam { name: $pname, kind: $pspec }),*],
                    launch: LaunchRule::$launch,
                    accumulates: $acc,
                };
                const _: () = check_sig(&$id, &[$(<$pty as SigParam>::KIND),*]);
            )*
        }

        $(
            $(#[doc = $doc])*
            ///
            /// The gpu-sync signature, generated from the kernel table.
            ///
            /// # Contract
            #[doc = $contract]
            pub type $sig = ($($pty,)*);
        )*

        /// Each kernel taken from a loaded module as its typed kernel. Crate
        /// private: the wrappers are the only launch sites.
        #[allow(non_snake_case)]
        pub(crate) mod declare {
            use super::*;
            $(
                pub(crate) fn $id(
                    module: &gpu_sync::Module,
                ) -> gpu_sync::Result<gpu_sync::Kernel<$sig>> {
                    // SAFETY: obligation 1: `$sig` is the entry's parameter
                    // list, proved equal to its spec by `check_sig` (at
                    // compile time), the spec to the `extern "C"` prototype
                    // by `tests/signatures.rs`, and the sizes to the fatbin
                    // by `cuFuncGetParamInfo` inside `kernel`. Obligations 2
                    // and 4: the entry's `contract`, which argues them from
                    // the `.cu` source. Obligation 3: the kernel is returned
                    // only to this crate's wrappers, each of which proves it
                    // for the launches it makes ("SAFETY (launch)").
                    unsafe { module.kernel::<$sig>($name) }
                }
            )*
        }
    };
}

// Obligation 4 holds for every kernel below: none reads a global or a pointer
// other than its parameters, or waits on anything the tracker cannot see,
// except where an entry says otherwise (the sources use only their
// parameters, `threadIdx`/`blockIdx`/`blockDim`/`gridDim`, `clock64`,
// `%globaltimer` and, in `read_sum_u32x4`, a static `__shared__` array).
kernel_table! {
    /// `read_sum_u32x4(const uint4* in, u64 n4, u64* out)`: `*out +=` the
    /// wrapping sum of all `4*n4` words; the HBM read probe.
    ReadSumU32x4 = "read_sum_u32x4" in Stream,
    launch: LinearFullWarps, accumulates: true,
    sig ReadSumSig(
        "in": In<u32> = read(Ty::U32x4, 16, by(1)),
        "n4": u64 = scalar(Ty::U64),
        "out": Out<u64> = read_write(Ty::U64, 8, fixed(1)),
    ),
    cost(n4) = cost::read_sum_u32x4(n4),
    sim: run_read_sum_u32x4,
    contract: "2: `in` is `const uint4*` (In), `out` is only `atomicAdd`ed (read-write: Out). \
               1: `In<u32>` for `const uint4*`: the view holds u32 words, read four at a time; \
               `Kernels::read_sum` passes a view of `4 * n4` words, 16-byte aligned.";

    /// `copy_u32x4(const uint4* src, uint4* dst, u64 n4)`.
    CopyU32x4 = "copy_u32x4" in Stream,
    launch: Linear, accumulates: false,
    sig CopySig(
        "src": In<u32> = read(Ty::U32x4, 16, by(2)),
        "dst": Out<u32> = write(Ty::U32x4, 16, by(2)),
        "n4": u64 = scalar(Ty::U64),
    ),
    cost(n4) = cost::copy_u32x4(n4),
    sim: run_copy_u32x4,
    contract: "2: `src` is `const uint4*` (In), `dst` only stored to (Out). 1: u32 views read and \
               written four words at a time (`Kernels::copy` passes `4 * n4`-word views, 16-byte \
               aligned).";

    /// `triad_f32(float* a, const float* b, const float* c, float scalar, u64 n)`:
    /// `a = fma(scalar, c, b)`.
    TriadF32 = "triad_f32" in Stream,
    launch: Linear, accumulates: false,
    sig TriadSig(
        "a": Out<f32> = write(Ty::F32, 16, by(4)),
        "b": In<f32> = read(Ty::F32, 16, by(4)),
        "c": In<f32> = read(Ty::F32, 16, by(4)),
        "scalar": f32 = scalar(Ty::F32),
        "n": Len = scalar(Ty::U64),
    ),
    cost(n) = cost::triad_f32(n),
    sim: run_triad_f32,
    contract: "2: `a` only stored to (Out), `b` and `c` are `const float*` (In). 1: `n` is \
               `unsigned long long`: a `Len`.";

    /// `spin_cycles(u64 cycles, u64* out)`: busy-waits `cycles` SM clocks.
    SpinCycles = "spin_cycles" in Spin,
    launch: Any, accumulates: false,
    sig SpinSig(
        "cycles": u64 = scalar(Ty::U64),
        "out": Out<u64> = write(Ty::U64, 8, fixed(1)),
    ),
    cost(_cycles) = cost::spin_cycles(),
    sim: run_spin_cycles,
    contract: "2: `out` is only stored to (Out), by one thread; it writes `out[0]` only \
               (`Kernels::spin` checks `out` has one element).";

    /// `empty_kernel()`: returns at once; a launch's fixed cost with no
    /// memory access (`gpu-bench truth` takes Nsight Compute's offset on it).
    Empty = "empty_kernel" in Spin,
    launch: Any, accumulates: false,
    sig EmptySig(),
    cost(_n) = cost::empty_kernel(),
    sim: run_empty_kernel,
    contract: "2: no parameter; it touches no memory.";

    /// `fill_pattern_u32(unsigned* dst, u64 n, unsigned seed)`.
    FillPatternU32 = "fill_pattern_u32" in Pattern,
    launch: Linear, accumulates: false,
    sig FillPatternSig(
        "dst": Out<u32> = write(Ty::U32, 4, by(1)),
        "n": Len = scalar(Ty::U64),
        "seed": u32 = scalar(Ty::U32),
    ),
    cost(n) = cost::fill_pattern_u32(n),
    sim: run_fill_pattern_u32,
    contract: "2: `dst` only stored to (Out). 1: `n` is `unsigned long long`: a `Len`.";

    /// `check_pattern_u32(const unsigned* src, u64 n, unsigned seed, u64* mismatches)`.
    CheckPatternU32 = "check_pattern_u32" in Pattern,
    launch: Linear, accumulates: true,
    sig CheckPatternSig(
        "src": In<u32> = read(Ty::U32, 4, by(1)),
        "n": u64 = scalar(Ty::U64),
        "seed": u32 = scalar(Ty::U32),
        "mismatches": Out<u64> = read_write(Ty::U64, 8, fixed(1)),
    ),
    cost(n) = cost::check_pattern_u32(n),
    sim: run_check_pattern_u32,
    contract: "2: `src` is `const unsigned*` (In), `mismatches` only `atomicAdd`ed (Out).";

    /// `scale_f32(const float* in, float* out, float a, u64 n)`: `out = a*in`.
    /// 16-byte vectors when its pointers agree modulo 16; blocks of at most
    /// 256 threads (its launch bounds: 8 blocks an SM at 32 registers).
    ScaleF32 = "scale_f32" in Elementwise,
    launch: Linear, accumulates: false,
    sig ScaleSig(
        "in": In<f32> = read(Ty::F32, 4, by(3)),
        "out": Out<f32> = write(Ty::F32, 4, by(3)),
        "a": f32 = scalar(Ty::F32),
        "n": Len = scalar(Ty::U64),
    ),
    cost(n) = cost::scale_f32(n),
    sim: run_scale_f32,
    contract: "2: `in` is `const float*` (In), `out` only stored to (Out). 1: `n` is a `Len`.";

    /// `add_f32(const float* x, const float* y, float* out, u64 n)`.
    /// 16-byte vectors when its pointers agree modulo 16; blocks of at most
    /// 256 threads (its launch bounds: 8 blocks an SM at 32 registers).
    AddF32 = "add_f32" in Elementwise,
    launch: Linear, accumulates: false,
    sig AddSig(
        "x": In<f32> = read(Ty::F32, 4, by(3)),
        "y": In<f32> = read(Ty::F32, 4, by(3)),
        "out": Out<f32> = write(Ty::F32, 4, by(3)),
        "n": Len = scalar(Ty::U64),
    ),
    cost(n) = cost::add_f32(n),
    sim: run_add_f32,
    contract: "2: `x`, `y` are `const float*` (In), `out` only stored to (Out). 1: `n` is a `Len`.";

    /// `mix_u32(const unsigned* a, const unsigned* b, unsigned* out, unsigned salt, u64 n)`.
    /// 16-byte vectors when its pointers agree modulo 16; blocks of at most
    /// 256 threads (its launch bounds: 8 blocks an SM at 32 registers).
    MixU32 = "mix_u32" in Elementwise,
    launch: Linear, accumulates: false,
    sig MixSig(
        "a": In<u32> = read(Ty::U32, 4, by(4)),
        "b": In<u32> = read(Ty::U32, 4, by(4)),
        "out": Out<u32> = write(Ty::U32, 4, by(4)),
        "salt": u32 = scalar(Ty::U32),
        "n": Len = scalar(Ty::U64),
    ),
    cost(n) = cost::mix_u32(n),
    sim: run_mix_u32,
    contract: "2: `a`, `b` are `const unsigned*` (In), `out` only stored to (Out). 1: `n` is a `Len`.";

    /// `bump_u32(unsigned* x, unsigned add, u64 n)`: `x += add` in place.
    /// 16-byte vectors when its pointers agree modulo 16; blocks of at most
    /// 256 threads (its launch bounds: 8 blocks an SM at 32 registers).
    BumpU32 = "bump_u32" in Elementwise,
    launch: Linear, accumulates: false,
    sig BumpSig(
        "x": Out<u32> = read_write(Ty::U32, 4, by(2)),
        "add": u32 = scalar(Ty::U32),
        "n": Len = scalar(Ty::U64),
    ),
    cost(n) = cost::bump_u32(n),
    sim: run_bump_u32,
    contract: "2: `x` is read and written (`x[i] += add`: Out). 1: `n` is a `Len`.";

    /// `clock_probe(u64 cycles, u64* out)`: spins `cycles` SM clocks in one
    /// thread; `out = [cycles waited, %globaltimer ns over them]`.
    ClockProbe = "clock_probe" in Bench,
    launch: Any, accumulates: false,
    sig ClockProbeSig(
        "cycles": u64 = scalar(Ty::U64),
        "out": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(_cycles) = cost::clock_probe(),
    sim: run_clock_probe,
    contract: "2: `out` is only stored to (Out), `out[0..2]` by one thread \
               (`BenchKernels::clock_probe` checks it has 2 elements).";

    /// `stamp(u64 cycles, u64* out)`: one thread writes `%globaltimer` at its
    /// entry to `out[0]`, spins `cycles` SM clocks, and writes `%globaltimer`
    /// at its exit to `out[1]`.
    Stamp = "stamp" in Bench,
    launch: Any, accumulates: false,
    sig StampSig(
        "cycles": u64 = scalar(Ty::U64),
        "out": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(_cycles) = cost::stamp(),
    sim: run_stamp,
    contract: "2: `out` is only stored to (Out), `out[0..2]` by one thread \
               (`BenchKernels::stamp` checks it has 2 elements).";

    /// `spin_gate(const unsigned* flag, u64 timeout_ns, u64* out)`: one
    /// thread spins until `*flag != 0` (mapped host memory) or the timeout;
    /// `out[0] = 1` if the flag opened it.
    SpinGate = "spin_gate" in Bench,
    launch: Any, accumulates: false,
    sig SpinGateSig(
        "flag": u64 = read_mapped(Ty::U32, 4, fixed(1)),
        "timeout_ns": u64 = scalar(Ty::U64),
        "out": Out<u64> = write(Ty::U64, 8, fixed(1)),
    ),
    cost(_n) = cost::spin_gate(),
    sim: run_spin_gate,
    contract: "2: `out` is only stored to (Out), `out[0]` by one thread. 4: it reads host memory \
               through the `flag` address and waits on it: `BenchKernels::spin_gate` is an \
               `unsafe fn` whose caller keeps that memory alive until the launch completes.";

    /// `copy_mapped_u32x4(const uint4* src, uint4* dst, u64 n4)`: an SM copy
    /// whose source is mapped pinned host memory.
    CopyMappedU32x4 = "copy_mapped_u32x4" in Bench,
    launch: Linear, accumulates: false,
    sig CopyMappedSig(
        "src": u64 = read_mapped(Ty::U32x4, 16, by(2)),
        "dst": Out<u32> = write(Ty::U32x4, 16, by(2)),
        "n4": u64 = scalar(Ty::U64),
    ),
    cost(n4) = cost::copy_mapped_u32x4(n4),
    sim: run_copy_mapped_u32x4,
    contract: "2: `dst` only stored to (Out), four words at a time. 4: it reads host memory \
               through the `src` address: `BenchKernels::copy_mapped` is an `unsafe fn` whose \
               caller keeps that memory alive and unwritten until the launch completes.";

    /// `hbm_read(const uint4* in, u64 n4, unsigned variant, u64* out)`: as
    /// `read_sum_u32x4`, in one of the roofline's tuning variants.
    HbmRead = "hbm_read" in Roofline,
    launch: LinearFullWarps, accumulates: true,
    sig HbmReadSig(
        "in": In<u32> = read(Ty::U32x4, 16, by(1)),
        "n4": u64 = scalar(Ty::U64),
        "variant": u32 = scalar(Ty::U32),
        "out": Out<u64> = read_write(Ty::U64, 8, fixed(1)),
    ),
    cost(n4) = cost::read_sum_u32x4(n4),
    sim: run_hbm_read,
    contract: "2: `in` is `const uint4*` (In), `out` only `atomicAdd`ed (Out). 1: u32 views read \
               four words at a time (`RooflineKernels::hbm_read` passes `4 * n4` words, 16-byte \
               aligned).";

    /// `hbm_copy(const uint4* src, uint4* dst, u64 n4, unsigned variant)`.
    HbmCopy = "hbm_copy" in Roofline,
    launch: Linear, accumulates: false,
    sig HbmCopySig(
        "src": In<u32> = read(Ty::U32x4, 16, by(2)),
        "dst": Out<u32> = write(Ty::U32x4, 16, by(2)),
        "n4": u64 = scalar(Ty::U64),
        "variant": u32 = scalar(Ty::U32),
    ),
    cost(n4) = cost::copy_u32x4(n4),
    sim: run_hbm_copy,
    contract: "2: `src` is `const uint4*` (In), `dst` only stored to (Out). 1: u32 views, four \
               words at a time.";

    /// `copy_bulk(const uint4* src, uint4* dst, u64 n4, unsigned cfg)`: `hbm_copy`
    /// through the bulk copy engine in `cfg & 0xff` shared-memory stages of
    /// `cfg >> 8` KiB (sm_90).
    CopyBulk = "copy_bulk" in Roofline,
    launch: Linear, accumulates: false,
    sig CopyBulkSig(
        "src": In<u32> = read(Ty::U32x4, 16, by(2)),
        "dst": Out<u32> = write(Ty::U32x4, 16, by(2)),
        "n4": u64 = scalar(Ty::U64),
        "cfg": u32 = scalar(Ty::U32),
    ),
    cost(n4) = cost::copy_u32x4(n4),
    sim: run_copy_bulk,
    contract: "2: `src` is `const uint4*` (In), read in whole chunks below `n4` by the copy engine into \
               the block's dynamic shared memory and the rest by plain loads; `dst` only stored to \
               (Out), the chunks by the copy engine from shared memory. 1: u32 views, four words at a \
               time.";

    /// `hbm_triad(uint4* a, const uint4* b, const uint4* c, float scalar, u64 n4,
    /// unsigned variant)`: `a = fma(scalar, c, b)` on the `4*n4` floats.
    HbmTriad = "hbm_triad" in Roofline,
    launch: Linear, accumulates: false,
    sig HbmTriadSig(
        "a": Out<f32> = write(Ty::U32x4, 16, by(4)),
        "b": In<f32> = read(Ty::U32x4, 16, by(4)),
        "c": In<f32> = read(Ty::U32x4, 16, by(4)),
        "scalar": f32 = scalar(Ty::F32),
        "n4": u64 = scalar(Ty::U64),
        "variant": u32 = scalar(Ty::U32),
    ),
    cost(n4) = cost::triad_f32(n4.saturating_mul(4)),
    sim: run_hbm_triad,
    contract: "2: `a` only stored to (Out), `b` and `c` are `const uint4*` (In). 1: f32 views \
               read and written four floats at a time.";

    /// `fma_f64(double seed, unsigned iters, unsigned store, double* out, u64 n,
    /// u64* clk)`: the FP64 FMA probe (`cost::fma_probe` has its FLOPs).
    FmaF64 = "fma_f64" in Roofline,
    launch: Linear, accumulates: false,
    sig FmaF64Sig(
        "seed": f64 = scalar(Ty::F64),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f64> = read_write(Ty::F64, 8, by(4)),
        "n": u64 = scalar(Ty::U64),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(n) = cost::fma_store(n, 8),
    sim: run_fma_f64,
    contract: "2: `out` is stored to only when `store != 0` (read-write keeps the tracker \
               conservative: Out), `clk` only stored to, `clk[0..2]` by one thread (Out).";

    /// `fma_f32(float seed, unsigned iters, unsigned store, float* out, u64 n, u64* clk)`.
    FmaF32 = "fma_f32" in Roofline,
    launch: Linear, accumulates: false,
    sig FmaF32Sig(
        "seed": f32 = scalar(Ty::F32),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f32> = read_write(Ty::F32, 4, by(4)),
        "n": u64 = scalar(Ty::U64),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(n) = cost::fma_store(n, 4),
    sim: run_fma_f32,
    contract: "2: `out` stored to only when `store != 0` (Out), `clk[0..2]` by one thread (Out).";

    /// `fma_f16x2(float seed, unsigned iters, unsigned store, float* out, u64 n, u64* clk)`:
    /// packed half-precision pairs (`fma.rn.f16x2`).
    FmaF16x2 = "fma_f16x2" in Roofline,
    launch: Linear, accumulates: false,
    sig FmaF16x2Sig(
        "seed": f32 = scalar(Ty::F32),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f32> = read_write(Ty::F32, 4, by(4)),
        "n": u64 = scalar(Ty::U64),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(n) = cost::fma_store(n, 4),
    sim: run_fma_f16x2,
    contract: "2: `out` stored to only when `store != 0` (Out), `clk[0..2]` by one thread (Out).";

    /// `fma_bf16x2(float seed, unsigned iters, unsigned store, float* out, u64 n, u64* clk)`:
    /// packed bfloat16 pairs (`fma.rn.bf16x2`).
    FmaBf16x2 = "fma_bf16x2" in Roofline,
    launch: Linear, accumulates: false,
    sig FmaBf16x2Sig(
        "seed": f32 = scalar(Ty::F32),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f32> = read_write(Ty::F32, 4, by(4)),
        "n": u64 = scalar(Ty::U64),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(n) = cost::fma_store(n, 4),
    sim: run_fma_bf16x2,
    contract: "2: `out` stored to only when `store != 0` (Out), `clk[0..2]` by one thread (Out).";

    /// `cache_read(const uint4* in, u64 ws4, u64 n, unsigned hint, u64* out)`:
    /// `n` loads wrapped over a working set of `ws4` uint4.
    CacheRead = "cache_read" in Roofline,
    launch: LinearFullWarps, accumulates: true,
    sig CacheReadSig(
        "in": In<u32> = read(Ty::U32x4, 16, by(1)),
        "ws4": u64 = scalar(Ty::U64),
        "n": u64 = scalar(Ty::U64),
        "hint": u32 = scalar(Ty::U32),
        "out": Out<u64> = read_write(Ty::U64, 8, fixed(1)),
    ),
    cost(ws4) = cost::read_sum_u32x4(ws4),
    sim: run_cache_read,
    contract: "2: `in` is `const uint4*` (In), read at indices `< ws4` only (wrapped); `out` only \
               `atomicAdd`ed (Out).";

    /// `read_tune_u4(const uint4* in, u64 ws4, u64 n, unsigned variant, u64* out)`:
    /// `cache_read`'s contract with 4 loads in flight a thread, in one of the
    /// read-tuning variants (`ReadVariant`).
    ReadTuneU4 = "read_tune_u4" in Roofline,
    launch: LinearFullWarps, accumulates: true,
    sig ReadTuneU4Sig(
        "in": In<u32> = read(Ty::U32x4, 16, by(1)),
        "ws4": u64 = scalar(Ty::U64),
        "n": u64 = scalar(Ty::U64),
        "variant": u32 = scalar(Ty::U32),
        "out": Out<u64> = read_write(Ty::U64, 8, fixed(1)),
    ),
    cost(ws4) = cost::read_sum_u32x4(ws4),
    sim: run_read_tune,
    contract: "2: `in` is `const uint4*` (In), read at indices `< ws4` only (wrapped); `out` only \
               `atomicAdd`ed (Out).";

    /// `read_tune_u8(const uint4* in, u64 ws4, u64 n, unsigned variant, u64* out)`:
    /// `cache_read`'s contract with 8 loads in flight a thread, in one of the
    /// read-tuning variants (`ReadVariant`).
    ReadTuneU8 = "read_tune_u8" in Roofline,
    launch: LinearFullWarps, accumulates: true,
    sig ReadTuneU8Sig(
        "in": In<u32> = read(Ty::U32x4, 16, by(1)),
        "ws4": u64 = scalar(Ty::U64),
        "n": u64 = scalar(Ty::U64),
        "variant": u32 = scalar(Ty::U32),
        "out": Out<u64> = read_write(Ty::U64, 8, fixed(1)),
    ),
    cost(ws4) = cost::read_sum_u32x4(ws4),
    sim: run_read_tune,
    contract: "2: `in` is `const uint4*` (In), read at indices `< ws4` only (wrapped); `out` only \
               `atomicAdd`ed (Out).";

    /// `read_tune_u16(const uint4* in, u64 ws4, u64 n, unsigned variant, u64* out)`:
    /// `cache_read`'s contract with 16 loads in flight a thread, in one of the
    /// read-tuning variants (`ReadVariant`).
    ReadTuneU16 = "read_tune_u16" in Roofline,
    launch: LinearFullWarps, accumulates: true,
    sig ReadTuneU16Sig(
        "in": In<u32> = read(Ty::U32x4, 16, by(1)),
        "ws4": u64 = scalar(Ty::U64),
        "n": u64 = scalar(Ty::U64),
        "variant": u32 = scalar(Ty::U32),
        "out": Out<u64> = read_write(Ty::U64, 8, fixed(1)),
    ),
    cost(ws4) = cost::read_sum_u32x4(ws4),
    sim: run_read_tune,
    contract: "2: `in` is `const uint4*` (In), read at indices `< ws4` only (wrapped); `out` only \
               `atomicAdd`ed (Out).";

    /// `read_bulk(const uint4* in, u64 ws4, u64 n, unsigned cfg, u64* out)`:
    /// `cache_read`'s contract through the bulk copy engine (`cp.async.bulk`
    /// into `cfg & 0xff` shared-memory stages of `cfg >> 8` KiB; sm_90).
    ReadBulk = "read_bulk" in Roofline,
    launch: LinearFullWarps, accumulates: true,
    sig ReadBulkSig(
        "in": In<u32> = read(Ty::U32x4, 16, by(1)),
        "ws4": u64 = scalar(Ty::U64),
        "n": u64 = scalar(Ty::U64),
        "cfg": u32 = scalar(Ty::U32),
        "out": Out<u64> = read_write(Ty::U64, 8, fixed(1)),
    ),
    cost(ws4) = cost::read_sum_u32x4(ws4),
    sim: run_read_tune,
    contract: "2: `in` is `const uint4*` (In), read at indices `< ws4` only (wrapped, whole chunks \
               below `ws4` by the copy engine into the block's dynamic shared memory); `out` only \
               `atomicAdd`ed (Out).";

    /// `smem_read(unsigned iters, unsigned seed, unsigned magic, unsigned* out)`:
    /// the shared-memory bandwidth probe.
    SmemRead = "smem_read" in Roofline,
    launch: LinearFullWarps, accumulates: false,
    sig SmemReadSig(
        "iters": u32 = scalar(Ty::U32),
        "seed": u32 = scalar(Ty::U32),
        "magic": u32 = scalar(Ty::U32),
        "out": Out<u32> = read_write(Ty::U32, 4, fixed(2)),
    ),
    cost(_n) = cost::smem_read(),
    sim: run_smem_read,
    contract: "2: `out` is stored to only (`out[0]` by one thread, `out[1]` by threads whose sum \
               equals `magic`, all the same value): Out. Its static `__shared__` array is the \
               block's own.";

    /// `intensity_f32(const uint4* in, uint4* out, unsigned fmas, u64 n4)`: the
    /// intensity sweep, `fmas` dependent FMAs per float.
    IntensityF32 = "intensity_f32" in Roofline,
    launch: Linear, accumulates: false,
    sig IntensitySig(
        "in": In<f32> = read(Ty::U32x4, 16, by(3)),
        "out": Out<f32> = write(Ty::U32x4, 16, by(3)),
        "fmas": u32 = scalar(Ty::U32),
        "n4": u64 = scalar(Ty::U64),
    ),
    cost(n4) = cost::intensity_f32(n4, 0),
    sim: run_intensity_f32,
    contract: "2: `in` is `const uint4*` (In), `out` only stored to (Out). 1: f32 views, four \
               floats at a time.";

    /// `intensity_f64(const uint4* in, uint4* out, unsigned fmas, u64 n4)`: the
    /// FP64 intensity sweep, `fmas` dependent FMAs per double (two a uint4).
    IntensityF64 = "intensity_f64" in Roofline,
    launch: Linear, accumulates: false,
    sig IntensityF64Sig(
        "in": In<f64> = read(Ty::U32x4, 16, by(3)),
        "out": Out<f64> = write(Ty::U32x4, 16, by(3)),
        "fmas": u32 = scalar(Ty::U32),
        "n4": u64 = scalar(Ty::U64),
    ),
    cost(n4) = cost::intensity_f64(n4, 0),
    sim: run_intensity_f64,
    contract: "2: `in` is `const uint4*` (In), `out` only stored to (Out). 1: f64 views, two \
               doubles at a time.";

    /// `intensity_f16x2(const uint4* in, uint4* out, unsigned fmas, u64 n4)`:
    /// the FP16x2 intensity sweep, `fmas` dependent `fma.rn.f16x2` per half2
    /// (four a uint4).
    IntensityF16x2 = "intensity_f16x2" in Roofline,
    launch: Linear, accumulates: false,
    sig IntensityF16x2Sig(
        "in": In<u32> = read(Ty::U32x4, 16, by(3)),
        "out": Out<u32> = write(Ty::U32x4, 16, by(3)),
        "fmas": u32 = scalar(Ty::U32),
        "n4": u64 = scalar(Ty::U64),
    ),
    cost(n4) = cost::intensity_f16x2(n4, 0),
    sim: run_intensity_f16x2,
    contract: "2: `in` is `const uint4*` (In), `out` only stored to (Out). 1: u32 views of \
               half2 words, four at a time.";

    /// `tc_bf16_probe(const uint4* a, const uint4* b, unsigned iters, unsigned store,
    /// float* out, u64* clk)`: BF16 `wgmma` m64n256k16 with both operands in shared memory.
    TcBf16 = "tc_bf16_probe" in Tensor,
    launch: Linear, accumulates: false,
    sig TcBf16Sig(
        "a": In<u32> = read(Ty::U32x4, 16, fixed(cost::TC_A_BYTES / 16)),
        "b": In<u32> = read(Ty::U32x4, 16, fixed(cost::TC_B_BYTES / 16)),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f32> = read_write(Ty::F32, 4, fixed(cost::TC_OUT_ELEMS)),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(_n) = cost::tensor_store(),
    sim: run_tc_bf16_probe,
    contract: "2: `a` and `b` are `const uint4*` (In), read whole (fixed extents); `out` is \
               stored to only when `store != 0`, by block 0's first warpgroup (Out); `clk[0..2]` \
               by one thread (Out). 4: its static `__shared__` tiles are the block's own.";

    /// `tc_f16_probe(const uint4* a, const uint4* b, unsigned iters, unsigned store,
    /// float* out, u64* clk)`: FP16 `wgmma` m64n256k16.
    TcF16 = "tc_f16_probe" in Tensor,
    launch: Linear, accumulates: false,
    sig TcF16Sig(
        "a": In<u32> = read(Ty::U32x4, 16, fixed(cost::TC_A_BYTES / 16)),
        "b": In<u32> = read(Ty::U32x4, 16, fixed(cost::TC_B_BYTES / 16)),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f32> = read_write(Ty::F32, 4, fixed(cost::TC_OUT_ELEMS)),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(_n) = cost::tensor_store(),
    sim: run_tc_f16_probe,
    contract: "2: `a` and `b` are `const uint4*` (In), read whole (fixed extents); `out` is \
               stored to only when `store != 0`, by block 0's first warpgroup (Out); `clk[0..2]` \
               by one thread (Out). 4: its static `__shared__` tiles are the block's own.";

    /// `tc_e4m3_probe(const uint4* a, const uint4* b, unsigned iters, unsigned store,
    /// float* out, u64* clk)`: FP8 (e4m3) `wgmma` m64n256k32.
    TcE4m3 = "tc_e4m3_probe" in Tensor,
    launch: Linear, accumulates: false,
    sig TcE4m3Sig(
        "a": In<u32> = read(Ty::U32x4, 16, fixed(cost::TC_A_BYTES / 16)),
        "b": In<u32> = read(Ty::U32x4, 16, fixed(cost::TC_B_BYTES / 16)),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f32> = read_write(Ty::F32, 4, fixed(cost::TC_OUT_ELEMS)),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(_n) = cost::tensor_store(),
    sim: run_tc_e4m3_probe,
    contract: "2: `a` and `b` are `const uint4*` (In), read whole (fixed extents); `out` is \
               stored to only when `store != 0`, by block 0's first warpgroup (Out); `clk[0..2]` \
               by one thread (Out). 4: its static `__shared__` tiles are the block's own.";

    /// `mma_bf16_probe(const uint4* a, const uint4* b, unsigned iters, unsigned store,
    /// float* out, u64* clk)`: BF16 `mma.sync` m16n8k16, operands in registers.
    MmaBf16 = "mma_bf16_probe" in Mma,
    launch: Linear, accumulates: false,
    sig MmaBf16Sig(
        "a": In<u32> = read(Ty::U32x4, 16, fixed(cost::MMA_A_BYTES / 16)),
        "b": In<u32> = read(Ty::U32x4, 16, fixed(cost::MMA_B_BYTES / 16)),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f32> = read_write(Ty::F32, 4, fixed(cost::MMA_OUT_ELEMS)),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(_n) = cost::mma_store(),
    sim: run_mma_bf16_probe,
    contract: "2: `a` and `b` are `const uint4*` (In), read whole (fixed extents, as 32-bit \
               words); `out` is stored to only when `store != 0`, by block 0's first warp (Out); \
               `clk[0..2]` by one thread (Out). No shared memory.";

    /// `mma_f16_probe(const uint4* a, const uint4* b, unsigned iters, unsigned store,
    /// float* out, u64* clk)`: FP16 `mma.sync` m16n8k16, operands in registers.
    MmaF16 = "mma_f16_probe" in Mma,
    launch: Linear, accumulates: false,
    sig MmaF16Sig(
        "a": In<u32> = read(Ty::U32x4, 16, fixed(cost::MMA_A_BYTES / 16)),
        "b": In<u32> = read(Ty::U32x4, 16, fixed(cost::MMA_B_BYTES / 16)),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f32> = read_write(Ty::F32, 4, fixed(cost::MMA_OUT_ELEMS)),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(_n) = cost::mma_store(),
    sim: run_mma_f16_probe,
    contract: "2: `a` and `b` are `const uint4*` (In), read whole (fixed extents, as 32-bit \
               words); `out` is stored to only when `store != 0`, by block 0's first warp (Out); \
               `clk[0..2]` by one thread (Out). No shared memory.";

    /// `mma_e4m3_probe(const uint4* a, const uint4* b, unsigned iters, unsigned store,
    /// float* out, u64* clk)`: FP8 (e4m3) `mma.sync` m16n8k32 (sm_89 and newer), operands in registers.
    MmaE4m3 = "mma_e4m3_probe" in Mma,
    launch: Linear, accumulates: false,
    sig MmaE4m3Sig(
        "a": In<u32> = read(Ty::U32x4, 16, fixed(cost::MMA_A_BYTES / 16)),
        "b": In<u32> = read(Ty::U32x4, 16, fixed(cost::MMA_B_BYTES / 16)),
        "iters": u32 = scalar(Ty::U32),
        "store": u32 = scalar(Ty::U32),
        "out": Out<f32> = read_write(Ty::F32, 4, fixed(cost::MMA_OUT_ELEMS)),
        "clk": Out<u64> = write(Ty::U64, 8, fixed(2)),
    ),
    cost(_n) = cost::mma_store(),
    sim: run_mma_e4m3_probe,
    contract: "2: `a` and `b` are `const uint4*` (In), read whole (fixed extents, as 32-bit \
               words); `out` is stored to only when `store != 0`, by block 0's first warp (Out); \
               `clk[0..2]` by one thread (Out). No shared memory.";
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::catch_unwind;

    #[test]
    fn signature_types_have_the_spec_sizes() {
        for k in KernelId::ALL {
            let spec: Vec<usize> = k.info().params.iter().map(KernelParam::size).collect();
            assert_eq!(k.sig_param_sizes(), spec.as_slice(), "{}", k.name());
        }
    }

    #[test]
    fn every_entry_passes_check_sig() {
        for k in KernelId::ALL {
            check_sig(k.info(), k.sig_kinds());
        }
    }

    /// `check_sig` with `kinds` in place of `kernel`'s signature: `Err` if it
    /// rejects it.
    fn check_with(kernel: KernelId, edit: impl FnOnce(&mut Vec<SigKind>)) -> Result<(), ()> {
        let mut kinds = kernel.sig_kinds().to_vec();
        edit(&mut kinds);
        catch_unwind(|| check_sig(kernel.info(), &kinds)).map_err(|_| ())
    }

    #[test]
    fn check_sig_rejects_every_kind_of_mismatch() {
        use KernelId::*;
        // The unedited signatures pass.
        assert_eq!(check_with(TriadF32, |_| {}), Ok(()));
        // A parameter missing.
        assert!(check_with(TriadF32, |k| k.truncate(4)).is_err());
        // A written pointer declared In (the kernel would write through a
        // view the tracker thinks is only read).
        assert!(check_with(TriadF32, |k| k[0] = SigKind::In(4)).is_err());
        // A read-only pointer declared Out is a kind mismatch too.
        assert!(check_with(TriadF32, |k| k[1] = SigKind::Out(4)).is_err());
        // A view whose elements do not fit the pointee (u64 view of floats).
        assert!(check_with(TriadF32, |k| k[1] = SigKind::In(8)).is_err());
        // A scalar of another type (u32 for float).
        assert!(check_with(TriadF32, |k| k[3] = SigKind::Scalar(Ty::U32)).is_err());
        // A Len counting uint4 while the views count u32 words: gpu-sync
        // would check it in the wrong unit.
        assert!(check_with(ReadSumU32x4, |k| k[1] = SigKind::Len).is_err());
        // A Len that does not bound every buffer (the 1-element counter).
        assert!(check_with(CheckPatternU32, |k| k[1] = SigKind::Len).is_err());
        // A device pointer passed as a raw address (untracked): only mapped
        // host memory may be.
        assert!(check_with(AddF32, |k| k[0] = SigKind::Scalar(Ty::U64)).is_err());
        assert_eq!(check_with(SpinGate, |_| {}), Ok(()));
        // A plain u64 where a Len may stand is fine (the wrapper bounds it).
        assert_eq!(check_with(AddF32, |k| k[3] = SigKind::Scalar(Ty::U64)), Ok(()));
    }

    #[test]
    fn cost_is_the_entry_model() {
        assert_eq!(KernelId::TriadF32.cost(64), cost::triad_f32(64));
        assert_eq!(KernelId::CopyMappedU32x4.cost(3), cost::copy_mapped_u32x4(3));
        assert_eq!(KernelId::SpinGate.cost(3), cost::spin_gate());
    }
}
