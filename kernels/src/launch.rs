//! Typed launch wrappers: each kernel of [`crate::KernelId`] as a method that
//! takes gpu-sync buffers, checks what the kernel needs (lengths, 16-byte
//! alignment of vector-loaded pointers, a zeroed accumulator where the caller
//! asks for a fresh result) and sizes the grid.
//!
//! The kernels are reached **only** through these methods: no getter hands
//! out a typed kernel, because several of them are safe only for the
//! launches the methods make (a 1-D grid; `n4` words of four; 16-byte
//! alignment; a full-warp block). Signatures are checked against the driver
//! at [`Kernels::load`] (`cuFuncGetParamInfo`), and every buffer argument is
//! a tracked use. Where a kernel's element count bounds every pointer it is
//! passed as a [`gpu_sync::Len`], which gpu-sync checks again at launch.
//!
//! Unsafe code: each kernel is declared once, in the kernel table
//! (`table.rs`), whose entry argues its contract against its `.cu` source;
//! each launch site here argues the part of it (bounds, launch shape) that
//! holds only for that launch (`SAFETY (launch)`). This module itself has no
//! `unsafe` block.

use crate::checks::invalid;
use crate::spec::{DEFAULT_BLOCK, KernelId, ModuleId, TILE_VECTORS};
use crate::table::{
    AddSig, BumpSig, CheckPatternSig, CopySig, EmptySig, FillPatternSig, MixSig, ReadSumSig, ScaleSig,
    SpinSig, TriadSig, declare,
};
use gpu_sync::cuda_sys::CUdevice_attribute;
use gpu_sync::{AsDeviceSlice, AsDeviceSliceMut, Device, Kernel as Typed, LaunchConfig, Result, Stream};

/// Every kernel of the crate, loaded into one device.
///
/// The typed kernels are private fields: the methods below are their only
/// launch sites, and each makes only launches its kernel is sound for.
pub struct Kernels {
    device: Device,
    max_blocks: u32,
    read_sum: Typed<ReadSumSig>,
    copy: Typed<CopySig>,
    triad: Typed<TriadSig>,
    spin: Typed<SpinSig>,
    empty: Typed<EmptySig>,
    fill_pattern: Typed<FillPatternSig>,
    check_pattern: Typed<CheckPatternSig>,
    scale: Typed<ScaleSig>,
    add: Typed<AddSig>,
    mix: Typed<MixSig>,
    bump: Typed<BumpSig>,
}

fn aligned16<T: bytemuck::Pod, S: AsDeviceSlice<T> + ?Sized>(
    kernel: KernelId,
    name: &str,
    v: &S,
) -> Result<()> {
    if v.device_ptr() % 16 == 0 {
        Ok(())
    } else {
        Err(invalid(
            kernel,
            format!(
                "`{name}` starts at {:#x}, not 16-byte aligned (the kernel loads 16 bytes at a time)",
                v.device_ptr()
            ),
        ))
    }
}

fn same<A: PartialEq + std::fmt::Debug>(kernel: KernelId, what: &str, a: A, b: A) -> Result<()> {
    if a == b { Ok(()) } else { Err(invalid(kernel, format!("{what}: {a:?} vs {b:?}"))) }
}

impl Kernels {
    /// Loads every module into `device` (`cuModuleLoadData`) and takes each
    /// kernel with its checked signature.
    ///
    /// # Errors
    /// A driver error (`CUDA_ERROR_NO_BINARY_FOR_GPU` on a GPU older than
    /// sm_80); [`Error::KernelSignature`](gpu_sync::Error::KernelSignature) if a fatbin and this crate disagree.
    pub fn load(device: &Device) -> Result<Kernels> {
        let load = |m: ModuleId| gpu_sync::Module::load(device, m.fatbin());
        let (stream, spin, pattern, elementwise) = (
            load(ModuleId::Stream)?,
            load(ModuleId::Spin)?,
            load(ModuleId::Pattern)?,
            load(ModuleId::Elementwise)?,
        );
        let sms = device.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        // Each typed kernel comes from the kernel table (`table.rs`), where
        // its one declaration argues the contract; obligation 3 is proved per
        // launch by the method that makes it ("SAFETY (launch)" below).
        let read_sum = declare::ReadSumU32x4(&stream)?;
        let copy = declare::CopyU32x4(&stream)?;
        let triad = declare::TriadF32(&stream)?;
        let spin_k = declare::SpinCycles(&spin)?;
        let empty = declare::Empty(&spin)?;
        let fill_pattern = declare::FillPatternU32(&pattern)?;
        let check_pattern = declare::CheckPatternU32(&pattern)?;
        let scale = declare::ScaleF32(&elementwise)?;
        let add = declare::AddF32(&elementwise)?;
        let mix = declare::MixU32(&elementwise)?;
        let bump = declare::BumpU32(&elementwise)?;
        Ok(Kernels {
            device: device.clone(),
            // The untiled grid-stride kernels (`read_sum_u32x4`, the
            // pattern kernels): eight 256-thread blocks per SM keep every SM
            // fully occupied, and `read_sum` makes one atomic per block.
            max_blocks: (sms.max(1) as u32).saturating_mul(8),
            read_sum,
            copy,
            triad,
            spin: spin_k,
            empty,
            fill_pattern,
            check_pattern,
            scale,
            add,
            mix,
            bump,
        })
    }

    /// The device the kernels are loaded into.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// A 1-D launch of [`DEFAULT_BLOCK`]-thread blocks covering `threads`
    /// threads, capped at eight blocks per SM (the kernels stride over the
    /// rest): the rule of the untiled grid-stride kernels (`read_sum_u32x4`,
    /// `fill_pattern_u32`, `check_pattern_u32`). A 1-D grid and block, the
    /// block a multiple of 32 threads.
    pub fn grid_for(&self, threads: u64) -> LaunchConfig {
        let blocks = threads.div_ceil(u64::from(DEFAULT_BLOCK)).clamp(1, u64::from(self.max_blocks.max(1)));
        LaunchConfig::new(blocks as u32, DEFAULT_BLOCK)
    }

    /// The launch of the tiled kernels (`copy_u32x4`, `triad_f32`,
    /// `scale_f32`, `add_f32`, `mix_u32`, `bump_u32`) over `vectors` 16-byte
    /// vectors: one [`DEFAULT_BLOCK`]-thread block per tile of
    /// [`TILE_VECTORS`] × [`DEFAULT_BLOCK`] vectors (8 KiB), uncapped up to
    /// the driver's 2^31 − 1 blocks (the kernels stride over any rest).
    ///
    /// Many short blocks keep more of the HBM busy than a few long ones: on
    /// an H100 the roofline's copy probe moves 3.04–3.05 TB/s with one block
    /// per 8 KiB tile against 2.86 with eight grid-striding blocks per SM
    /// (docs/results/2026-11-25-h100-roofline). Every grid gives the same
    /// result; the timer-truth peer (`gpu-bench-cli/peer/truth_peer.py`)
    /// launches with this same rule.
    pub fn grid_tiles(&self, vectors: u64) -> LaunchConfig {
        let tile = u64::from(TILE_VECTORS) * u64::from(DEFAULT_BLOCK);
        let blocks = vectors.div_ceil(tile).clamp(1, i32::MAX as u64);
        LaunchConfig::new(blocks as u32, DEFAULT_BLOCK)
    }

    /// Adds the wrapping sum of every `u32` of `input` to `out[0]`
    /// (`read_sum_u32x4`, 16-byte loads). Zero `out` first for a fresh sum.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `input` has a multiple of 4 elements
    /// and starts 16-byte aligned, and `out` has one element; a launch error.
    pub fn read_sum<I, O>(&self, stream: &Stream, input: &I, out: &mut O) -> Result<()>
    where
        I: AsDeviceSlice<u32> + ?Sized,
        O: AsDeviceSliceMut<u64> + ?Sized,
    {
        let k = KernelId::ReadSumU32x4;
        if !input.device_len().is_multiple_of(4) {
            return Err(invalid(k, format!("input has {} words, not a multiple of 4", input.device_len())));
        }
        aligned16(k, "in", input)?;
        same(k, "out must have one element", out.device_len(), 1)?;
        let n4 = (input.device_len() / 4) as u64;
        // SAFETY (launch): thread `i` reads `in[i]` (uint4) for `i < n4` only,
        // words `4i..4i+4` of `input`, which has exactly `4 * n4` words and
        // starts 16-byte aligned (checked above); `atomicAdd(out)` hits the
        // one element of `out`. `grid_for` is 1-D with 256-thread blocks, so
        // the full-mask warp shuffles see full warps and the 8 warps index
        // `warp_sums[0..8]` of the static 32.
        self.read_sum.launch(stream, self.grid_for(n4), (input, n4, out))
    }

    /// Copies `src` to `dst` (`copy_u32x4`, 16-byte loads and stores).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless both have one length, a multiple of
    /// 4, and start 16-byte aligned; a launch error.
    pub fn copy<S, D>(&self, stream: &Stream, src: &S, dst: &mut D) -> Result<()>
    where
        S: AsDeviceSlice<u32> + ?Sized,
        D: AsDeviceSliceMut<u32> + ?Sized,
    {
        let k = KernelId::CopyU32x4;
        same(k, "lengths", src.device_len(), dst.device_len())?;
        if !src.device_len().is_multiple_of(4) {
            return Err(invalid(k, format!("{} words is not a multiple of 4", src.device_len())));
        }
        aligned16(k, "src", src)?;
        aligned16(k, "dst", dst)?;
        let n4 = (src.device_len() / 4) as u64;
        // SAFETY (launch): uint4 `i` is copied for `i < n4` only: words
        // `4i..4i+4` of `src` and `dst`, which both have exactly `4 * n4`
        // words and start 16-byte aligned (checked above). 1-D grid: the
        // tiles and the grid-stride rest give each `i` one thread.
        self.copy.launch(stream, self.grid_tiles(n4), (src, dst, n4))
    }

    /// `a = scalar * c + b`, one fused multiply-add per element (`triad_f32`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless the three have one length and start
    /// 16-byte aligned; a launch error.
    pub fn triad<A, B, C>(&self, stream: &Stream, a: &mut A, b: &B, c: &C, scalar: f32) -> Result<()>
    where
        A: AsDeviceSliceMut<f32> + ?Sized,
        B: AsDeviceSlice<f32> + ?Sized,
        C: AsDeviceSlice<f32> + ?Sized,
    {
        let k = KernelId::TriadF32;
        same(k, "lengths of a and b", a.device_len(), b.device_len())?;
        same(k, "lengths of a and c", a.device_len(), c.device_len())?;
        aligned16(k, "a", a)?;
        aligned16(k, "b", b)?;
        aligned16(k, "c", c)?;
        let n = a.device_len() as u64;
        // SAFETY (launch): indices `i < n` only (float4 `i < n / 4` covers
        // floats `< 4 * (n / 4) <= n`), `n` the common length of the three
        // views (checked above; gpu-sync checks the `Len` again); the float4
        // accesses need the 16-byte alignment checked above. 1-D grid: each
        // element is written by one thread.
        self.triad.launch(stream, self.grid_tiles(n.div_ceil(4)), (a, b, c, scalar, n))
    }

    /// Busy-waits `cycles` SM clock cycles in one thread; writes the cycles
    /// actually waited (at least `cycles`) to `out[0]` (`spin_cycles`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `out` has one element; a launch error.
    pub fn spin<O: AsDeviceSliceMut<u64> + ?Sized>(
        &self,
        stream: &Stream,
        cycles: u64,
        out: &mut O,
    ) -> Result<()> {
        same(KernelId::SpinCycles, "out must have one element", out.device_len(), 1)?;
        // SAFETY (launch): one thread writes `out[0]`; `out` has one element.
        self.spin.launch(stream, LaunchConfig::new(1, 1), (cycles, out))
    }

    /// One block of one thread that returns at once (`empty_kernel`): a
    /// launch's fixed cost, with no memory access.
    ///
    /// # Errors
    /// A launch error.
    pub fn empty(&self, stream: &Stream) -> Result<()> {
        // SAFETY (launch): the kernel takes no parameter and touches no memory.
        self.empty.launch(stream, LaunchConfig::new(1, 1), ())
    }

    /// Writes `dst[i] = pattern(seed, i)` (`fill_pattern_u32`).
    ///
    /// # Errors
    /// A launch error.
    pub fn fill_pattern<D: AsDeviceSliceMut<u32> + ?Sized>(
        &self,
        stream: &Stream,
        dst: &mut D,
        seed: u32,
    ) -> Result<()> {
        let n = dst.device_len() as u64;
        // SAFETY (launch): `dst[i]` for `i < n`, `n` its length (a `Len`,
        // checked by gpu-sync too); 1-D grid: one thread per element.
        self.fill_pattern.launch(stream, self.grid_for(n), (dst, n, seed))
    }

    /// Adds to `mismatches[0]` the number of `i` with
    /// `src[i] != pattern(seed, i)` (`check_pattern_u32`). Zero it first for
    /// a fresh count.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `mismatches` has one element; a
    /// launch error.
    pub fn check_pattern<S, M>(&self, stream: &Stream, src: &S, seed: u32, mismatches: &mut M) -> Result<()>
    where
        S: AsDeviceSlice<u32> + ?Sized,
        M: AsDeviceSliceMut<u64> + ?Sized,
    {
        same(KernelId::CheckPatternU32, "mismatches must have one element", mismatches.device_len(), 1)?;
        let n = src.device_len() as u64;
        // SAFETY (launch): `src[i]` for `i < n`, `n` its length; the
        // `atomicAdd` hits the one element of `mismatches` (checked above).
        self.check_pattern.launch(stream, self.grid_for(n), (src, n, seed, mismatches))
    }

    /// `out = a * input` (`scale_f32`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) for different lengths; a launch error.
    pub fn scale<I, O>(&self, stream: &Stream, input: &I, out: &mut O, a: f32) -> Result<()>
    where
        I: AsDeviceSlice<f32> + ?Sized,
        O: AsDeviceSliceMut<f32> + ?Sized,
    {
        same(KernelId::ScaleF32, "lengths", input.device_len(), out.device_len())?;
        let n = input.device_len() as u64;
        // SAFETY (launch): `in[i]`, `out[i]` for `i < n`, the common length
        // (checked above, and by gpu-sync as a `Len`); 1-D grid.
        self.scale.launch(stream, self.grid_tiles(n.div_ceil(4)), (input, out, a, n))
    }

    /// `out = a * input` (`scale_f32`) launched with `cfg` instead of the
    /// tiled grid of [`Kernels::scale`]: for launch shapes the timer is
    /// checked on, such as one thread per element
    /// ([`LaunchConfig::for_elements`]`(n, 256)`), where most blocks find
    /// no tile of their own and exit at once. The kernel is correct with any
    /// 1-D grid (it takes whole tiles block-strided, then grid-strides over
    /// the rest); this method asks the grid to cover the data, one thread
    /// per element at least, so a shape it runs is never the tiled one in
    /// disguise.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) for
    /// different lengths, a grid or block that is not 1-D, a block of more
    /// than [`DEFAULT_BLOCK`] threads (the kernel's launch bounds) or fewer
    /// threads in the grid than elements; a launch error.
    pub fn scale_f32_with_grid<I, O>(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        input: &I,
        out: &mut O,
        a: f32,
    ) -> Result<()>
    where
        I: AsDeviceSlice<f32> + ?Sized,
        O: AsDeviceSliceMut<f32> + ?Sized,
    {
        let k = KernelId::ScaleF32;
        same(k, "lengths", input.device_len(), out.device_len())?;
        let (g, b) = (cfg.grid, cfg.block);
        if (g.y, g.z, b.y, b.z) != (1, 1, 1, 1) {
            return Err(invalid(k, format!("grid {g:?} and block {b:?} must be 1-D (it indexes x only)")));
        }
        if b.x > DEFAULT_BLOCK {
            return Err(invalid(
                k,
                format!("{} threads a block, more than its launch bounds' {DEFAULT_BLOCK}", b.x),
            ));
        }
        let n = input.device_len() as u64;
        let threads = u64::from(g.x) * u64::from(b.x);
        if threads < n {
            return Err(invalid(
                k,
                format!("{} blocks of {} threads ({threads}) do not cover its {n} elements", g.x, b.x),
            ));
        }
        // SAFETY (launch): `in[i]`, `out[i]` for `i < n`, the common length
        // (checked above, and by gpu-sync as a `Len`); 1-D grid and block
        // (checked above), so each element is written by one thread.
        self.scale.launch(stream, cfg, (input, out, a, n))
    }

    /// `out = x + y` (`add_f32`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) for different lengths; a launch error.
    pub fn add<X, Y, O>(&self, stream: &Stream, x: &X, y: &Y, out: &mut O) -> Result<()>
    where
        X: AsDeviceSlice<f32> + ?Sized,
        Y: AsDeviceSlice<f32> + ?Sized,
        O: AsDeviceSliceMut<f32> + ?Sized,
    {
        same(KernelId::AddF32, "lengths of x and y", x.device_len(), y.device_len())?;
        same(KernelId::AddF32, "lengths of x and out", x.device_len(), out.device_len())?;
        let n = x.device_len() as u64;
        // SAFETY (launch): `x[i]`, `y[i]`, `out[i]` for `i < n`, the common
        // length (checked above, and by gpu-sync as a `Len`); 1-D grid.
        self.add.launch(stream, self.grid_tiles(n.div_ceil(4)), (x, y, out, n))
    }

    /// `out[i] = mix(a[i], b[i], salt)` (`mix_u32`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) for different lengths; a launch error.
    pub fn mix<A, B, O>(&self, stream: &Stream, a: &A, b: &B, out: &mut O, salt: u32) -> Result<()>
    where
        A: AsDeviceSlice<u32> + ?Sized,
        B: AsDeviceSlice<u32> + ?Sized,
        O: AsDeviceSliceMut<u32> + ?Sized,
    {
        same(KernelId::MixU32, "lengths of a and b", a.device_len(), b.device_len())?;
        same(KernelId::MixU32, "lengths of a and out", a.device_len(), out.device_len())?;
        let n = a.device_len() as u64;
        // SAFETY (launch): `a[i]`, `b[i]`, `out[i]` for `i < n`, the common
        // length (checked above, and by gpu-sync as a `Len`); 1-D grid.
        self.mix.launch(stream, self.grid_tiles(n.div_ceil(4)), (a, b, out, salt, n))
    }

    /// `x[i] += add`, wrapping (`bump_u32`).
    ///
    /// # Errors
    /// A launch error.
    pub fn bump<X: AsDeviceSliceMut<u32> + ?Sized>(
        &self,
        stream: &Stream,
        x: &mut X,
        add: u32,
    ) -> Result<()> {
        let n = x.device_len() as u64;
        // SAFETY (launch): `x[i] += add` for `i < n`, its length (a `Len`,
        // checked by gpu-sync too); the 1-D grid gives each element one
        // thread, so the read-modify-writes do not race.
        self.bump.launch(stream, self.grid_tiles(n.div_ceil(4)), (x, add, n))
    }
}
