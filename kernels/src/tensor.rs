//! The tensor-core probes (`kernels/cu/tensor.cu`, `wgmma` on sm_90a) as
//! typed wrappers that check the tile sizes, alignment and launch shape.
//!
//! The module holds sm_90a code only: [`TensorKernels::load`] fails with the
//! driver's `CUDA_ERROR_NO_BINARY_FOR_GPU` on any other GPU, and the
//! roofline then reports the tensor ceilings as not measured.
//!
//! Unsafe code: none. The kernels are declared (and their contracts argued)
//! in the kernel table (`table.rs`).

use crate::checks::{invalid, operands};
use crate::cost::{TC_A_BYTES, TC_B_BYTES, TC_OUT_ELEMS};
use crate::reference::probes::TcFormat;
use crate::roofline::Grid;
use crate::spec::{KernelId, ModuleId};
use crate::table::{TcBf16Sig, TcE4m3Sig, TcF16Sig, declare};
use gpu_sync::{AsDeviceSlice, AsDeviceSliceMut, Device, Kernel as Typed, LaunchConfig, Result, Stream};

/// The probes of `tensor.cu`, loaded into one device.
pub struct TensorKernels {
    device: Device,
    bf16: Typed<TcBf16Sig>,
    f16: Typed<TcF16Sig>,
    e4m3: Typed<TcE4m3Sig>,
}

impl TensorKernels {
    /// Loads `tensor.fatbin` (`cuModuleLoadData`) and takes its probes.
    ///
    /// # Errors
    /// `CUDA_ERROR_NO_BINARY_FOR_GPU` on a GPU other than sm_90 (the module
    /// is sm_90a code); [`Error::KernelSignature`](gpu_sync::Error::KernelSignature) if the fatbin and this
    /// crate disagree.
    pub fn load(device: &Device) -> Result<TensorKernels> {
        let m = gpu_sync::Module::load(device, ModuleId::Tensor.fatbin())?;
        Ok(TensorKernels {
            device: device.clone(),
            bf16: declare::TcBf16(&m)?,
            f16: declare::TcF16(&m)?,
            e4m3: declare::TcE4m3(&m)?,
        })
    }

    /// The device they are loaded into.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// One launch of the `format` probe: each block loads the A and B tiles
    /// (`a`: 64 rows, `b`: 256 rows of 128 bytes, as `u32` words) into
    /// shared memory and each warpgroup runs `iters` x 4 `wgmma`; with
    /// `store`, block 0's first warpgroup writes `iters * A . B^T` to `out`
    /// (64 x 256, row-major); `clk = [SM cycles, ns]` of block 0's thread 0
    /// over its loop.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) for tiles, `out` or `clk` of other sizes,
    /// tiles not 16-byte aligned, or a block that is not 128 or 256 threads;
    /// a launch error.
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
            TcFormat::Bf16 => KernelId::TcBf16,
            TcFormat::F16 => KernelId::TcF16,
            TcFormat::E4m3 => KernelId::TcE4m3,
        };
        operands(
            k,
            &[
                ("a", a.device_len() as u64 * 4, TC_A_BYTES),
                ("b", b.device_len() as u64 * 4, TC_B_BYTES),
                ("out", out.device_len() as u64, TC_OUT_ELEMS),
                ("clk", clk.device_len() as u64, 2),
            ],
            &[("a", a.device_ptr()), ("b", b.device_ptr())],
        )?;
        if grid.blocks == 0 || !(grid.threads == 128 || grid.threads == 256) {
            return Err(invalid(
                k,
                format!("{} blocks of {} threads: needs blocks of 128 or 256", grid.blocks, grid.threads),
            ));
        }
        let cfg = LaunchConfig::new(grid.blocks, grid.threads);
        let store = u32::from(store);
        // SAFETY (launch), every arm: the tiles are read whole and only
        // (exact sizes checked above, 16-byte aligned); `out[0..16384]` is
        // written only by block 0's first warpgroup when `store`, and has
        // exactly that many elements; `clk[0..2]` by one thread. Blocks of
        // 128 or 256 threads keep within the kernels' launch bounds (256)
        // and give whole warpgroups, as `wgmma` needs.
        match format {
            TcFormat::Bf16 => self.bf16.launch(stream, cfg, (a, b, iters, store, out, clk)),
            TcFormat::F16 => self.f16.launch(stream, cfg, (a, b, iters, store, out, clk)),
            TcFormat::E4m3 => self.e4m3.launch(stream, cfg, (a, b, iters, store, out, clk)),
        }
    }
}
