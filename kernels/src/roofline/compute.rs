//! The compute probes: FMA chains per precision and the intensity sweeps.

use super::RooflineKernels;
use super::checks::*;
use super::*;
use crate::checks::*;
use gpu_sync::{AsDeviceSlice, AsDeviceSliceMut, Stream};

impl RooflineKernels {
    /// One FMA probe of `prec` over `out.len()` slots and `iters`
    /// iterations; stores the results in `out` only if `store`; `clk =
    /// [SM cycles, ns]` of block 0's thread 0 over its loop: the SM clock
    /// while the probe ran. `out` is [`FmaOut::F64`] for
    /// [`FmaPrecision::F64`] and [`FmaOut::F32`] for the others.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) when `out` is of the wrong type for `prec`,
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

    /// `out = input` after `fmas` FMAs per float (`intensity_f32`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless both have one length of whole
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
        self.intensity_holding_shared(stream, grid, input, out, fmas, 0)
    }

    /// [`intensity`](Self::intensity), each block holding `shared_bytes` of
    /// dynamic shared memory that the kernel does not use. At the device's
    /// opt-in limit (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`)
    /// a block takes its SM's whole shared memory, so no block of another
    /// kernel that needs shared memory (NCCL's do) runs on the SMs this
    /// grid holds: a grid of fewer blocks than SMs leaves the others to
    /// such kernels, where a grid of small blocks alone would share its SMs
    /// with them. The kernel's limit is raised (`cuFuncSetAttribute`) when
    /// `shared_bytes` exceeds it.
    ///
    /// # Errors
    /// As [`intensity`](Self::intensity); [`Error::LaunchConfig`](gpu_sync::Error::LaunchConfig) beyond the
    /// device's opt-in limit.
    pub fn intensity_holding_shared<I, O>(
        &self,
        stream: &Stream,
        grid: Grid,
        input: &I,
        out: &mut O,
        fmas: u32,
        shared_bytes: u32,
    ) -> Result<()>
    where
        I: AsDeviceSlice<f32> + ?Sized,
        O: AsDeviceSliceMut<f32> + ?Sized,
    {
        let (input_v, out_v) =
            ((input.device_len(), input.device_ptr()), (out.device_len(), out.device_ptr()));
        let (n4, cfg) = sweep_checks(KernelId::IntensityF32, grid, input_v, out_v, 4)?;
        // Raised once, not per launch.
        if shared_bytes > self.intensity.max_dynamic_shared_mem() {
            self.intensity.set_max_dynamic_shared_mem(shared_bytes)?;
        }
        // SAFETY (launch): float4 indices `< n4` of both views, exactly
        // `4 * n4` floats each from 16-byte aligned starts (checked above);
        // one thread per index. The kernel reads no dynamic shared memory:
        // `shared_bytes` only reserves it (within the limit set above).
        self.intensity.launch(stream, cfg.with_shared_mem(shared_bytes), (input, out, fmas, n4))
    }

    /// `out = input` after `fmas` FMAs per double (`intensity_f64`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless both have one even length (whole
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
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless both have one length of whole uint4
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
