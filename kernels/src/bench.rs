//! gpu-bench's instruments (`kernels/cu/bench.cu`) as typed wrappers that
//! check lengths: the clock probe, the stamp (`%globaltimer` at a kernel's
//! entry and exit), the spin gate, and the SM copy from mapped pinned host
//! memory.
//!
//! The gate and the mapped copy read host memory through an address the
//! tracker does not see, so their wrappers are `unsafe fn`: the caller keeps
//! that memory alive (and, for the copy, unwritten) until the launch has
//! completed. The clock probe and the stamp touch only their tracked output.
//!
//! Unsafe code: the two `unsafe fn` wrappers above. The kernels are declared
//! (and their contracts argued) in the kernel table (`table.rs`); this
//! module has no `unsafe` block.
#![allow(unsafe_code)]

use crate::checks::invalid;
use crate::spec::{KernelId, ModuleId};
use crate::table::{ClockProbeSig, CopyMappedSig, SpinGateSig, StampSig, declare};
use gpu_sync::{AsDeviceSliceMut, Device, Kernel as Typed, LaunchConfig, PinnedBuffer, Result, Stream};

/// The instrument kernels of `bench.cu`, loaded into one device.
pub struct BenchKernels {
    device: Device,
    max_blocks: u32,
    clock: Typed<ClockProbeSig>,
    stamp: Typed<StampSig>,
    gate: Typed<SpinGateSig>,
    copy_mapped: Typed<CopyMappedSig>,
}

/// The check `clock_probe` and `stamp` share: their `out` holds two words.
fn two_words(kernel: KernelId, out_len: usize) -> Result<()> {
    if out_len != 2 {
        return Err(invalid(kernel, format!("out has {out_len} elements, needs 2")));
    }
    Ok(())
}

impl BenchKernels {
    /// Loads `bench.fatbin` into `device` (`cuModuleLoadData`) and takes its
    /// three kernels with checked signatures.
    ///
    /// # Errors
    /// A driver error; [`Error::KernelSignature`](gpu_sync::Error::KernelSignature) if the fatbin and this
    /// crate disagree.
    pub fn load(device: &Device) -> Result<BenchKernels> {
        let module = gpu_sync::Module::load(device, ModuleId::Bench.fatbin())?;
        let sms = device
            .attribute(gpu_sync::cuda_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        // The declarations, and the contracts they rest on, are the kernel
        // table's (`table.rs`).
        let clock = declare::ClockProbe(&module)?;
        let stamp = declare::Stamp(&module)?;
        let gate = declare::SpinGate(&module)?;
        let copy_mapped = declare::CopyMappedU32x4(&module)?;
        Ok(BenchKernels {
            device: device.clone(),
            max_blocks: (sms.max(1) as u32).saturating_mul(8),
            clock,
            stamp,
            gate,
            copy_mapped,
        })
    }

    /// The device they are loaded into.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// One thread spins `cycles` SM clocks and writes
    /// `out = [cycles waited, %globaltimer nanoseconds over them]`
    /// (`clock_probe`): `out[0] / out[1]` is the SM clock in GHz.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `out` has 2 elements; a launch error.
    pub fn clock_probe<O: AsDeviceSliceMut<u64> + ?Sized>(
        &self,
        stream: &Stream,
        cycles: u64,
        out: &mut O,
    ) -> Result<()> {
        two_words(KernelId::ClockProbe, out.device_len())?;
        self.clock.launch(stream, LaunchConfig::new(1, 1), (cycles, out))
    }

    /// One thread writes the GPU's `%globaltimer` at the kernel's entry to
    /// `out[0]`, spins `cycles` SM clocks and writes it again at the exit to
    /// `out[1]` (`stamp`): where the kernel's body ran, on the clock event
    /// timestamps and CUPTI's records are read from.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `out` has 2 elements; a launch error.
    pub fn stamp<O: AsDeviceSliceMut<u64> + ?Sized>(
        &self,
        stream: &Stream,
        cycles: u64,
        out: &mut O,
    ) -> Result<()> {
        two_words(KernelId::Stamp, out.device_len())?;
        self.stamp.launch(stream, LaunchConfig::new(1, 1), (cycles, out))
    }

    /// Holds `stream` (`spin_gate`): one thread spins until the `u32` at
    /// `flag_addr` is non-zero or `timeout_ns` pass; writes 1 to `out[0]` if
    /// the flag opened it, 0 on the timeout.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `out` has 1 element or when
    /// `flag_addr` is not 4-byte aligned; a launch error.
    ///
    /// # Safety
    /// 1. `flag_addr` must be the device address of a `u32` in mapped pinned
    ///    host memory (`cuMemHostGetDevicePointer` of a
    ///    `CU_MEMHOSTALLOC_DEVICEMAP` allocation) that stays allocated until
    ///    this launch has completed. Host writes to it while the gate runs
    ///    are the point: the kernel reads it volatile.
    pub unsafe fn spin_gate<O: AsDeviceSliceMut<u64> + ?Sized>(
        &self,
        stream: &Stream,
        flag_addr: u64,
        timeout_ns: u64,
        out: &mut O,
    ) -> Result<()> {
        if out.device_len() != 1 {
            return Err(invalid(
                KernelId::SpinGate,
                format!("out has {} elements, needs 1", out.device_len()),
            ));
        }
        if !flag_addr.is_multiple_of(4) {
            return Err(invalid(KernelId::SpinGate, format!("flag at {flag_addr:#x} is not 4-byte aligned")));
        }
        self.gate.launch(stream, LaunchConfig::new(1, 1), (flag_addr, timeout_ns, out))
    }

    /// `dst = src`, read by the SMs straight from mapped pinned host memory
    /// (`copy_mapped_u32x4`, 16-byte loads): a copy without a copy engine.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](gpu_sync::Error::InvalidArgument) unless `src` is a
    /// [`HostAllocFlags::DEVICE_MAP`](gpu_sync::HostAllocFlags::DEVICE_MAP)
    /// buffer of `dst`'s length, a multiple of 4, and `dst` starts 16-byte
    /// aligned; a driver or launch error.
    ///
    /// # Safety
    /// 1. `src` must be neither dropped nor written until this launch has
    ///    completed: the read is not tracked (synchronize the stream, or
    ///    wait on an event recorded after it, first).
    pub unsafe fn copy_mapped<D: AsDeviceSliceMut<u32> + ?Sized>(
        &self,
        stream: &Stream,
        src: &PinnedBuffer<u32>,
        dst: &mut D,
    ) -> Result<()> {
        let k = KernelId::CopyMappedU32x4;
        if src.len() != dst.device_len() {
            return Err(invalid(k, format!("lengths: {} vs {}", src.len(), dst.device_len())));
        }
        if !src.len().is_multiple_of(4) {
            return Err(invalid(k, format!("{} words is not a multiple of 4", src.len())));
        }
        if !dst.device_ptr().is_multiple_of(16) {
            return Err(invalid(k, format!("dst at {:#x} is not 16-byte aligned", dst.device_ptr())));
        }
        let n4 = (src.len() / 4) as u64;
        if n4 == 0 {
            return Ok(());
        }
        let addr = src.device_ptr()?;
        if !addr.is_multiple_of(16) {
            return Err(invalid(k, format!("src at {addr:#x} is not 16-byte aligned")));
        }
        let blocks = n4.div_ceil(u64::from(crate::DEFAULT_BLOCK)).clamp(1, u64::from(self.max_blocks.max(1)));
        self.copy_mapped.launch(
            stream,
            LaunchConfig::new(blocks as u32, crate::DEFAULT_BLOCK),
            (addr, dst, n4),
        )
    }
}
