//! The tensor-core probes through `mma.sync` (`kernels/cu/mma.cu`): the
//! fallback of [`TensorKernels`](crate::TensorKernels) (`wgmma`, sm_90a
//! only) on every other GPU, and, forced, on sm_90 too. Typed wrappers that
//! check the operand sizes, alignment and launch shape.
//!
//! The module holds SASS for sm_80 and sm_90 and PTX for sm_90. The FP8
//! probe (`mma.sync` m16n8k32 e4m3) needs sm_89: the sm_80 code of it traps,
//! so [`MmaKernels::probe`] refuses FP8 below compute capability 9.0 (an
//! sm_89 GPU would run the sm_80 code). On sm_90 ptxas lowers it to FP16
//! `HMMA` after converting the operands (`F2FP.F16.E4M3`): Hopper has no
//! FP8 `mma.sync` path, so that probe reads at most the FP16 rate there.
//!
//! Unsafe code: none. The kernels are declared (and their contracts argued)
//! in the kernel table (`table.rs`).

use crate::checks::{invalid, operands};
use crate::cost::{MMA_A_BYTES, MMA_B_BYTES, MMA_OUT_ELEMS};
use crate::reference::probes::TcFormat;
use crate::roofline::Grid;
use crate::spec::{KernelId, ModuleId};
use crate::table::{MmaBf16Sig, MmaE4m3Sig, MmaF16Sig, declare};
use gpu_sync::cuda_sys::CUdevice_attribute;
use gpu_sync::{AsDeviceSlice, AsDeviceSliceMut, Device, Kernel as Typed, LaunchConfig, Result, Stream};

/// The probes of `mma.cu`, loaded into one device.
pub struct MmaKernels {
    device: Device,
    /// Compute capability major of the device.
    major: i32,
    bf16: Typed<MmaBf16Sig>,
    f16: Typed<MmaF16Sig>,
    e4m3: Typed<MmaE4m3Sig>,
}

impl MmaKernels {
    /// Loads `mma.fatbin` (`cuModuleLoadData`) and takes its probes.
    ///
    /// # Errors
    /// `CUDA_ERROR_NO_BINARY_FOR_GPU` on a GPU older than sm_80;
    /// [`Error::KernelSignature`](gpu_sync::Error::KernelSignature) if the fatbin and this crate disagree.
    pub fn load(device: &Device) -> Result<MmaKernels> {
        let m = gpu_sync::Module::load(device, ModuleId::Mma.fatbin())?;
        let major = device.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        Ok(MmaKernels {
            device: device.clone(),
            major,
            bf16: declare::MmaBf16(&m)?,
            f16: declare::MmaF16(&m)?,
            e4m3: declare::MmaE4m3(&m)?,
        })
    }

    /// The device they are loaded into.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Whether the `format` probe runs on this device (FP8 needs compute
    /// capability 9.0 or newer here, see the module docs).
    pub fn supports(&self, format: TcFormat) -> bool {
        format != TcFormat::E4m3 || self.major >= 9
    }

    /// One launch of the `format` probe: each warp loads the operands (`a`
    /// and `b`: 32 rows of 32 bytes each, as `u32` words) into registers and
    /// runs `iters` x 8 `mma.sync` into eight independent accumulators; with
    /// `store`, block 0's first warp writes `iters * A . B^T` to `out` (32 x
    /// 32, row-major); `clk = [SM cycles, ns]` of block 0's thread 0 over
    /// its loop.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) for operands, `out` or `clk` of other
    /// sizes, operands not 16-byte aligned, a block that is not 32 to 256
    /// threads of whole warps, or FP8 on a device that cannot run it; a
    /// launch error.
    #[allow(clippy::too_many_arguments)]
    pub fn probe<A, B, O, C>(
        &self,
        stream: &Stream,
        grid: Grid,
        format: TcFormat,
        a: &A,
        b: &B,
        iters: u32,
        store: bool,
        out: &mut O,
        clk: &mut C,
    ) -> Result<()>
    where
        A: AsDeviceSlice<u32> + ?Sized,
        B: AsDeviceSlice<u32> + ?Sized,
        O: AsDeviceSliceMut<f32> + ?Sized,
        C: AsDeviceSliceMut<u64> + ?Sized,
    {
        let k = match format {
            TcFormat::Bf16 => KernelId::MmaBf16,
            TcFormat::F16 => KernelId::MmaF16,
            TcFormat::E4m3 => KernelId::MmaE4m3,
        };
        if !self.supports(format) {
            return Err(invalid(
                k,
                format!(
                    "FP8 mma.sync needs sm_89; this fatbin runs it on sm_90 and newer only (device is sm_{}x)",
                    self.major
                ),
            ));
        }
        operands(
            k,
            &[
                ("a", a.device_len() as u64 * 4, MMA_A_BYTES),
                ("b", b.device_len() as u64 * 4, MMA_B_BYTES),
                ("out", out.device_len() as u64, MMA_OUT_ELEMS),
                ("clk", clk.device_len() as u64, 2),
            ],
            &[("a", a.device_ptr()), ("b", b.device_ptr())],
        )?;
        if grid.blocks == 0 || grid.threads == 0 || grid.threads > 256 || !grid.threads.is_multiple_of(32) {
            return Err(invalid(
                k,
                format!(
                    "{} blocks of {} threads: needs blocks of 32 to 256 threads, whole warps",
                    grid.blocks, grid.threads
                ),
            ));
        }
        let cfg = LaunchConfig::new(grid.blocks, grid.threads);
        let store = u32::from(store);
        // SAFETY (launch), every arm: the operands are read whole and only
        // (exact sizes checked above, 16-byte aligned; each lane reads words
        // below 256 of each); `out[0..1024]` is written only by block 0's
        // first warp when `store`, and has exactly that many elements;
        // `clk[0..2]` by one thread. Blocks of whole warps (as `mma.sync`
        // needs) of at most 256 threads keep within the launch bounds; the
        // FP8 probe runs only where its code is not the sm_80 trap
        // (`supports`, checked above).
        match format {
            TcFormat::Bf16 => self.bf16.launch(stream, cfg, (a, b, iters, store, out, clk)),
            TcFormat::F16 => self.f16.launch(stream, cfg, (a, b, iters, store, out, clk)),
            TcFormat::E4m3 => self.e4m3.launch(stream, cfg, (a, b, iters, store, out, clk)),
        }
    }
}
