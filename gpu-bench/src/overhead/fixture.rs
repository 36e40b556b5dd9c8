//! The fixture every variant runs on: two streams, `add_f32` and
//! `scale_f32`, the buffers, and the raw baseline's events; the submissions
//! of each variant (the timed part), the gated or free-running batch around
//! them, and the recorder and CUPTI consumer of the recorded variants.
//!
//! Unsafe code: the raw variants call the driver's per-call layer with raw
//! kernel parameters, as a program without gpu-sync would, and borrow
//! gpu-sync's stream and function handles for it.
#![allow(unsafe_code)]

use super::variant::{VARIANTS, Variant, segment_cap, split_even};
use super::{GATE_TIMEOUT_NS, Recorded};
use crate::instruments::{Instruments, SpinGate};
use gpu_sync::cuda_sys::cupti::{ActivityKind, ActivityOp};
use gpu_sync::cuda_sys::result::{event, launch, stream};
use gpu_sync::cuda_sys::{self, BorrowedFunction, BorrowedStream, CUevent_flags, Driver, OwnedEvent};
use gpu_sync::trace::{RecordOptions, Timing};
use gpu_sync::{Device, DeviceBuffer, Kernel, LaunchConfig, Result, Signature, Stream};
use kernels::{AddSig, ScaleSig};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

/// Elements per buffer: small, so the GPU's part is negligible.
const N: usize = 256;

/// `stream`'s handle for the per-call layer, borrowed for as long as
/// `stream`.
fn borrow_stream<'s>(drv: &'static Driver, stream: &'s Stream) -> BorrowedStream<'s> {
    // SAFETY: (1) gpu-sync makes every stream through the process-wide
    // table, `cuda_sys::driver()`, which is `drv` (the caller's, from the
    // same call), and a `Stream` keeps its `CUstream` alive until its last
    // clone drops, so it outlives the borrow of `stream` that bounds `'s`;
    // (2) streams are `Shared`: any thread may use them.
    unsafe { BorrowedStream::borrow_raw(drv, stream.as_raw()) }
}

/// `kernel`'s function handle for the per-call layer, borrowed for as long
/// as `kernel`.
fn borrow_function<'k, S: Signature>(drv: &'static Driver, kernel: &'k Kernel<S>) -> BorrowedFunction<'k> {
    // SAFETY: (1) the function comes from a module gpu-sync loaded through
    // the process-wide table (`drv`, as in `borrow_stream`), and a `Kernel`
    // holds its module loaded, so the `CUfunction` is alive for the borrow
    // of `kernel` that bounds `'k`; (2) functions are `Shared`.
    unsafe { BorrowedFunction::borrow_raw(drv, kernel.as_raw()) }
}

/// The raw baseline's handles, borrowed once before anything is timed.
#[derive(Clone, Copy)]
struct RawSide<'a> {
    sa: BorrowedStream<'a>,
    sb: BorrowedStream<'a>,
    add: BorrowedFunction<'a>,
    scale: BorrowedFunction<'a>,
    grid: [u32; 3],
    block: [u32; 3],
}

impl RawSide<'_> {
    /// One `cuLaunchKernel` of a kernel with four 8-byte parameter slots, as
    /// a program without gpu-sync makes it: the slots and the pointer array
    /// on the stack, built once per launch.
    ///
    /// # Safety
    /// 1. `f` is `add_f32` (`const float*, const float*, float*, u64`) or
    ///    `scale_f32` (`const float*, float*, float, u64`), and `slots`
    ///    holds its arguments in order: the device addresses of live
    ///    buffers of at least `n` floats, a float in the low four bytes of
    ///    its slot, `n` last;
    /// 2. the launch is ordered after every earlier write of the buffers it
    ///    reads and every earlier access of the buffer it writes, by stream
    ///    order or a wait, and the buffers stay allocated until it
    ///    completed.
    #[inline]
    unsafe fn launch(self, f: BorrowedFunction<'_>, s: BorrowedStream<'_>, slots: [u64; 4]) -> Result<()> {
        let mut slots = slots;
        let mut params = slots.each_mut().map(|v| (v as *mut u64).cast::<c_void>());
        // SAFETY: `launch_kernel`'s obligations: (1) four entries for the
        // kernel's four parameters, each pointing to an 8-byte slot that
        // lives across the call (the driver copies the values during it); a
        // pointer or `u64` parameter reads all 8 bytes, the float parameter
        // its first 4, which hold the float's bits on the little-endian
        // targets CUDA runs on; (2) the buffers' liveness and ordering are
        // this function's own obligations, passed on by its callers.
        unsafe { launch::launch_kernel(f, self.grid, self.block, 0, s, &mut params) }?;
        Ok(())
    }
}

/// Everything the variants use: streams, kernels, buffers, raw events.
pub(super) struct Fixture {
    drv: &'static Driver,
    device: Device,
    /// Stream A (the launches, and the gate).
    pub(super) sa: Stream,
    sb: Stream,
    add_k: Kernel<AddSig>,
    scale_k: Kernel<ScaleSig>,
    cfg: LaunchConfig,
    /// Read by every variant; written once, before the first batch.
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    /// The raw variants' outputs, reached only through raw launches.
    raw_out: DeviceBuffer<f32>,
    raw_z: DeviceBuffer<f32>,
    raw_w: DeviceBuffer<f32>,
    /// The tracked variants' outputs, each variant its own, so no batch
    /// waits for another variant's work.
    out: DeviceBuffer<f32>,
    z: DeviceBuffer<f32>,
    w: DeviceBuffer<f32>,
    /// Raw handoff: A's record after writing `raw_z`, B's after reading it.
    ev_a: OwnedEvent,
    ev_b: OwnedEvent,
    /// Raw handoff, gated: recorded on A behind the gate, B waits for it.
    ev_gate: OwnedEvent,
}

impl Fixture {
    /// Loads the kernels on `device` and makes the streams, buffers and
    /// raw events; ends with both streams synchronized.
    pub(super) fn new(device: &Device) -> Result<Fixture> {
        let drv = cuda_sys::driver()?;
        let module = gpu_sync::Module::load(device, kernels::ModuleId::Elementwise.fatbin())?;
        // SAFETY: `add_f32` and `scale_f32` are elementwise.cu's kernels with
        // exactly these parameter lists (kernels/tests/signatures.rs); each
        // touches `n` elements of its buffers, and every launch here passes
        // buffers of `N` elements with `n = N`.
        let (add_k, scale_k) =
            unsafe { (module.kernel::<AddSig>("add_f32")?, module.kernel::<ScaleSig>("scale_f32")?) };
        let (sa, sb) = (Stream::new(device)?, Stream::new(device)?);
        let zeroed = || DeviceBuffer::<f32>::zeroed(&sa, N);
        let x = DeviceBuffer::from_slice(&sa, &vec![1.0f32; N])?;
        let y = DeviceBuffer::from_slice(&sa, &vec![2.0f32; N])?;
        let (raw_out, raw_z, raw_w) = (zeroed()?, zeroed()?, zeroed()?);
        let (out, z, w) = (zeroed()?, zeroed()?, zeroed()?);
        // The raw events are the baseline's own, made in the device's
        // primary context as a program without gpu-sync would.
        device.make_current()?;
        let sync_only = CUevent_flags::CU_EVENT_DISABLE_TIMING.0;
        let (ev_a, ev_b, ev_gate) =
            (event::create(drv, sync_only)?, event::create(drv, sync_only)?, event::create(drv, sync_only)?);
        let cfg = LaunchConfig::for_elements(N as u64, 256);
        let f = Fixture {
            drv,
            device: device.clone(),
            sa,
            sb,
            add_k,
            scale_k,
            cfg,
            x,
            y,
            raw_out,
            raw_z,
            raw_w,
            out,
            z,
            w,
            ev_a,
            ev_b,
            ev_gate,
        };
        // `ev_b` recorded once, so every raw round trip starts with A's wait
        // (the first round trip waits for nothing: B has done nothing yet).
        event::record(&f.ev_b, borrow_stream(drv, &f.sb))?;
        f.finish()?;
        Ok(f)
    }

    fn raw(&self) -> RawSide<'_> {
        let g = self.cfg.grid;
        let b = self.cfg.block;
        RawSide {
            sa: borrow_stream(self.drv, &self.sa),
            sb: borrow_stream(self.drv, &self.sb),
            add: borrow_function(self.drv, &self.add_k),
            scale: borrow_function(self.drv, &self.scale_k),
            grid: [g.x, g.y, g.z],
            block: [b.x, b.y, b.z],
        }
    }

    /// Waits for both streams: every batch ends here, successful or not,
    /// before anything else is queued or dropped (the raw launches' ordering
    /// argument relies on it).
    pub(super) fn finish(&self) -> Result<()> {
        let a = self.sa.synchronize();
        let b = self.sb.synchronize();
        a?;
        b?;
        Ok(())
    }

    /// Queues `n` submissions of `v` (the part that is timed).
    fn submit(&mut self, v: Variant, n: usize) -> Result<()> {
        let raw = self.raw();
        let (x, y) = (self.x.as_raw(), self.y.as_raw());
        let len = N as u64;
        let a = u64::from(1.5f32.to_bits());
        match v {
            Variant::RawLaunch | Variant::RawLaunchCupti => {
                let out = self.raw_out.as_raw();
                for _ in 0..n {
                    // SAFETY: (1) `add_f32` with `x`, `y`, `raw_out` (live
                    // buffers of `N` floats owned by `self`) and `n = N`;
                    // (2) `x`, `y` are written only at creation, synchronized
                    // before any batch (`Fixture::new` ends in `finish`);
                    // `raw_out` is written only here, on A, in stream order,
                    // read by nothing; every batch ends in `finish` before
                    // the buffers could be dropped.
                    unsafe { raw.launch(raw.add, raw.sa, [x, y, out, len]) }?;
                }
            }
            Variant::RawHandoff => {
                let (z, w) = (self.raw_z.as_raw(), self.raw_w.as_raw());
                for _ in 0..n {
                    // A's next write of `raw_z` waits for B's last read.
                    stream::wait_event(raw.sa, &self.ev_b, 0)?;
                    // SAFETY: (1) `scale_f32` with `x` → `raw_z`, live
                    // buffers of `N` floats owned by `self`, `n = N`; (2)
                    // `x` as above; `raw_z` is written only on A, after the
                    // wait just queued for `ev_b`, recorded on B after its
                    // last read of `raw_z` (or before any); the buffers
                    // outlive the batch (`finish`).
                    unsafe { raw.launch(raw.scale, raw.sa, [x, z, a, len]) }?;
                    event::record(&self.ev_a, raw.sa)?;
                    stream::wait_event(raw.sb, &self.ev_a, 0)?;
                    // SAFETY: (1) `scale_f32` with `raw_z` → `raw_w`; (2) B
                    // reads `raw_z` after waiting for `ev_a`, recorded after
                    // A's write; `raw_w` is written only on B, in stream
                    // order; the buffers outlive the batch (`finish`).
                    unsafe { raw.launch(raw.scale, raw.sb, [z, w, a, len]) }?;
                    event::record(&self.ev_b, raw.sb)?;
                }
            }
            Variant::TrackedLaunch | Variant::RecordedEvents | Variant::RecordedCupti => {
                for _ in 0..n {
                    self.add_k.launch(&self.sa, self.cfg, (&self.x, &self.y, &mut self.out, len))?;
                }
            }
            Variant::TrackedHandoff => {
                for _ in 0..n {
                    self.scale_k.launch(&self.sa, self.cfg, (&self.x, &mut self.z, 1.5f32, len))?;
                    self.scale_k.launch(&self.sb, self.cfg, (&self.z, &mut self.w, 1.5f32, len))?;
                }
            }
        }
        Ok(())
    }

    /// [`Fixture::batch`], under a recorder made before it and stopped after
    /// it (untimed) for the recorded variants; their counts are added to
    /// `recorded` and checked: every launch is recorded.
    pub(super) fn recorded_batch(
        &mut self,
        v: Variant,
        n: usize,
        gate: Option<&mut Gate>,
        timeouts: &mut [usize; VARIANTS],
        recorded: Option<&mut Recorded>,
    ) -> Result<f64> {
        let Some(timing) = v.timing() else { return self.batch(v, n, gate, timeouts) };
        // The consumer, and which of its records are stream A's (where the
        // recorded launches go).
        let consumer = match timing {
            Timing::Cupti => Some(
                gpu_sync::cuda_sys::cupti::activity()
                    .and_then(|a| {
                        let c = a.consumer(&[ActivityKind::Kernel, ActivityKind::ExternalCorrelation])?;
                        Ok((c, a.stream_records(self.device.raw_context(), self.sa.as_raw())?))
                    })
                    .map_err(gpu_sync::Error::from)?,
            ),
            _ => None,
        };
        let rec = self.device.record(RecordOptions::new(timing))?;
        let ns = self.batch(v, n, gate, timeouts);
        let r = rec.stop();
        let (records, on_a) = match &consumer {
            Some((c, a)) => (c.take().map_err(gpu_sync::Error::from)?, Some(a)),
            None => (Vec::new(), None),
        };
        let (ns, r) = (ns?, r?);
        let name = self.add_k.name().to_owned();
        let launches: Vec<_> = r.ops.iter().filter(|o| o.name == name).collect();
        let resolved = match timing {
            Timing::Cupti => {
                // External id → correlation id → a kernel record.
                let corr: std::collections::HashMap<u64, u32> = records
                    .iter()
                    .filter_map(|c| match c.op {
                        ActivityOp::ExternalCorrelation { external_id, .. } => {
                            Some((external_id, c.correlation_id))
                        }
                        _ => None,
                    })
                    .collect();
                let kernels: std::collections::HashSet<u32> = on_a
                    .map(|a| a.select(records.iter().cloned()))
                    .unwrap_or_default()
                    .iter()
                    .filter(|c| matches!(c.op, ActivityOp::Kernel { .. }))
                    .map(|c| c.correlation_id)
                    .collect();
                launches.iter().filter(|o| corr.get(&o.id).is_some_and(|c| kernels.contains(c))).count()
            }
            _ => launches.iter().filter(|o| o.span.is_some()).count(),
        };
        if launches.len() != n {
            return Err(gpu_sync::Error::Internal(format!(
                "{}: {} launches recorded of {n}",
                v.name(),
                launches.len()
            )));
        }
        if let Some(rec) = recorded {
            let c = if timing == Timing::Cupti { &mut rec.cupti } else { &mut rec.events };
            c.launches += launches.len() as u64;
            c.resolved += resolved as u64;
            c.dropped += r.dropped;
        }
        Ok(ns)
    }

    /// One batch of `n` submissions of `v`: host nanoseconds per submission.
    /// Gated: in segments that fit [`QUEUE_BUDGET`](super::QUEUE_BUDGET), each behind a closed
    /// gate; free-running: all at once.
    fn batch(
        &mut self,
        v: Variant,
        n: usize,
        gate: Option<&mut Gate>,
        timeouts: &mut [usize; VARIANTS],
    ) -> Result<f64> {
        let mut ns = 0u128;
        match gate {
            None => {
                let t = Instant::now();
                let r = self.submit(v, n);
                ns += t.elapsed().as_nanos();
                let f = self.finish();
                r?;
                f?;
            }
            Some(gate) => {
                for seg in split_even(n, segment_cap(v)) {
                    if let Err(e) = gate.hold(self, v) {
                        // Whatever was queued drains before the error leaves.
                        let _ = gate.release(self);
                        return Err(e);
                    }
                    let t = Instant::now();
                    let r = self.submit(v, seg);
                    ns += t.elapsed().as_nanos();
                    // Open the gate whatever happened, so the streams drain.
                    let opened = gate.release(self);
                    r?;
                    if !opened? {
                        timeouts[v.index()] += 1;
                    }
                }
            }
        }
        Ok(ns as f64 / n.max(1) as f64)
    }
}

/// The spin gate of gpu-bench's engine ([`SpinGate`]), held on A; for a
/// handoff, B waits for it too.
pub(super) struct Gate(SpinGate);

impl Gate {
    /// The gate on `sa`, with `instruments`' spin-gate kernel.
    pub(super) fn new(instruments: Arc<dyn Instruments>, sa: &Stream) -> Result<Gate> {
        let g = SpinGate::new(instruments, sa, GATE_TIMEOUT_NS)?;
        sa.synchronize()?;
        Ok(Gate(g))
    }

    /// Queues the gate on A; for a handoff, B waits for it too. Untimed.
    fn hold(&mut self, f: &Fixture, v: Variant) -> Result<()> {
        self.0.hold(&f.sa)?;
        match v {
            Variant::RawHandoff => {
                let raw = f.raw();
                event::record(&f.ev_gate, raw.sa)?;
                stream::wait_event(raw.sb, &f.ev_gate, 0)?;
            }
            Variant::TrackedHandoff => f.sb.wait_stream(&f.sa)?,
            Variant::RawLaunch
            | Variant::TrackedLaunch
            | Variant::RecordedEvents
            | Variant::RecordedCupti
            | Variant::RawLaunchCupti => {}
        }
        Ok(())
    }

    /// Opens the gate, waits for both streams, and says whether the host
    /// opened the gate (`false`: it timed out first). Untimed.
    fn release(&mut self, f: &Fixture) -> Result<bool> {
        let opened = self.0.open();
        f.finish()?;
        opened?;
        self.0.opened(&f.sa)
    }
}
