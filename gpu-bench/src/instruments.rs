//! Device-side instruments the engine needs for two of its checks: a clock
//! probe (the SM clock, without NVML) and a spin gate (batch mode). The
//! engine runs without them and says so; the `kernels` feature provides
//! them from the workspace's `kernels` crate (`load`, present with the feature).
//!
//! Why a trait and not a dependency: a library user timing their own
//! kernels should not have to link the workspace's kernels crate (its
//! fatbins, its roofline probes); the feature is one line for those who
//! want batch mode and clock checks.
//!
//! Unsafe code (feature `kernels` only): launching the gate, which reads the
//! flag's mapped host memory outside the tracker.
#![cfg_attr(feature = "kernels", allow(unsafe_code))]

use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Result, Stream};

/// The instrument kernels: see the module docs. A [`crate::Timer`] made
/// with them checks the clock and gates its samples; `load` (feature
/// `kernels`) gives the workspace's, as the `overhead` module's example
/// shows.
pub trait Instruments: Send + Sync {
    /// Enqueues on `stream` one thread that spins `cycles` SM clocks and
    /// writes `[cycles waited, %globaltimer ns over them]` to `out`.
    ///
    /// # Errors
    /// A launch error; `out` not of length 2.
    fn clock_probe(&self, stream: &Stream, cycles: u64, out: &mut DeviceBuffer<u64>) -> Result<()>;

    /// Enqueues on `stream` a kernel that spins until the `u32` at
    /// [`GateFlag::device_addr`] is non-zero or `timeout_ns` pass, and
    /// writes 1 to `out[0]` if the flag opened it, 0 on the timeout. The
    /// flag's memory outlives the kernel: [`GateFlag`]'s drop opens it and
    /// synchronizes the device before freeing.
    ///
    /// # Errors
    /// A launch error; `out` not of length 1.
    fn gate(
        &self,
        stream: &Stream,
        flag: &GateFlag,
        timeout_ns: u64,
        out: &mut DeviceBuffer<u64>,
    ) -> Result<()>;
}

/// The spin gate, written once for every gated measurement (the timer's
/// rounds and batches, the CLI's overhead batches): a [`GateFlag`], the
/// gate kernel's output and the instruments that launch it.
///
/// [`SpinGate::hold`] closes the flag and queues the gate kernel on a
/// stream, which then runs nothing queued after it until [`SpinGate::open`]
/// (or the timeout); after the stream has drained, [`SpinGate::opened`]
/// says whether the host opened it in time (`false`: the work behind it ran
/// with host gaps). A [`crate::Timer`] with instruments makes and uses
/// one for its gated samples.
pub struct SpinGate {
    flag: GateFlag,
    out: DeviceBuffer<u64>,
    inst: std::sync::Arc<dyn Instruments>,
    timeout_ns: u64,
}

impl SpinGate {
    /// A gate for `stream`'s device that gives up after `timeout_ns`.
    ///
    /// # Errors
    /// A driver error (the flag's mapped memory, the output buffer).
    pub fn new(inst: std::sync::Arc<dyn Instruments>, stream: &Stream, timeout_ns: u64) -> Result<SpinGate> {
        let flag = GateFlag::new(stream.device())?;
        let out = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        Ok(SpinGate { flag, out, inst, timeout_ns })
    }

    /// Closes the flag and queues the gate kernel on `stream`.
    ///
    /// # Errors
    /// A driver error.
    pub fn hold(&mut self, stream: &Stream) -> Result<()> {
        self.flag.close()?;
        self.inst.gate(stream, &self.flag, self.timeout_ns, &mut self.out)
    }

    /// Opens the flag: the gate kernel returns and the stream drains.
    ///
    /// # Errors
    /// A driver error writing the flag.
    pub fn open(&mut self) -> Result<()> {
        self.flag.open()
    }

    /// Whether the host opened the gate before its timeout, read from the
    /// gate kernel's output on `stream` (a synchronizing read: call it once
    /// the work behind the gate has drained).
    ///
    /// # Errors
    /// A driver error.
    pub fn opened(&self, stream: &Stream) -> Result<bool> {
        Ok(stream.to_vec(&self.out)?.first().copied() == Some(1))
    }
}

/// A `u32` in mapped pinned host memory that a gate kernel polls
/// (`cuMemHostAlloc` with `CU_MEMHOSTALLOC_DEVICEMAP`); inside a
/// [`SpinGate`].
pub struct GateFlag {
    buf: Option<PinnedBuffer<u32>>,
    addr: u64,
    device: Device,
}

impl GateFlag {
    /// A closed flag for `device`.
    ///
    /// # Errors
    /// A driver error (`cuMemHostAlloc`, `cuMemHostGetDevicePointer`).
    pub fn new(device: &Device) -> Result<GateFlag> {
        let buf = PinnedBuffer::<u32>::new(device, 4, HostAllocFlags::DEVICE_MAP)?;
        let addr = buf.device_ptr()?;
        Ok(GateFlag { buf: Some(buf), addr, device: device.clone() })
    }

    /// The flag's device address.
    pub fn device_addr(&self) -> u64 {
        self.addr
    }

    fn set(&mut self, v: u32) -> Result<()> {
        if let Some(b) = self.buf.as_mut() {
            b.as_mut_slice()?[0] = v;
            // The device polls this memory; make the store visible now.
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }

    /// Closes the gate (writes 0), before arming a gate kernel.
    ///
    /// # Errors
    /// A driver error from the pinned buffer's wait.
    pub fn close(&mut self) -> Result<()> {
        self.set(0)
    }

    /// Opens the gate (writes 1): a gate kernel polling it finishes.
    ///
    /// # Errors
    /// A driver error from the pinned buffer's wait.
    pub fn open(&mut self) -> Result<()> {
        self.set(1)
    }
}

impl Drop for GateFlag {
    fn drop(&mut self) {
        // Open any gate still polling, then wait for every kernel of the
        // device (a gate kernel may read the flag until it exits) before the
        // pinned memory is freed. If that fails, leak it.
        if self.set(1).is_err() || self.device.synchronize().is_err() {
            log::error!("leaking a gate flag: the device could not be synchronized");
            std::mem::forget(self.buf.take());
        }
    }
}

/// The workspace's instrument kernels ([`kernels::BenchKernels`]) loaded
/// into `device`.
///
/// # Errors
/// A driver error loading the module.
#[cfg(feature = "kernels")]
pub fn load(device: &Device) -> Result<std::sync::Arc<dyn Instruments>> {
    Ok(std::sync::Arc::new(kernels::BenchKernels::load(device)?))
}

#[cfg(feature = "kernels")]
impl Instruments for kernels::BenchKernels {
    fn clock_probe(&self, stream: &Stream, cycles: u64, out: &mut DeviceBuffer<u64>) -> Result<()> {
        kernels::BenchKernels::clock_probe(self, stream, cycles, out)
    }

    fn gate(
        &self,
        stream: &Stream,
        flag: &GateFlag,
        timeout_ns: u64,
        out: &mut DeviceBuffer<u64>,
    ) -> Result<()> {
        // SAFETY: `flag.device_addr()` is the device address of the first
        // `u32` of a live DEVICE_MAP pinned buffer owned by `flag`; `flag`'s
        // drop opens the gate and synchronizes the device (or leaks the
        // buffer) before freeing it, so it outlives this launch.
        unsafe { self.spin_gate(stream, flag.device_addr(), timeout_ns, out) }
    }
}
