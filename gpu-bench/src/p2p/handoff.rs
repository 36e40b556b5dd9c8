//! The cross-device handoff: a buffer on device A handed back and forth
//! between A and B by a tiny kernel (`bump_u32`, `x += 1` on 64 words), N
//! hops (A → B → A … → A, N even), each hop a kernel on the other device
//! that must wait for the previous one on the GPU.
//!
//! - **ours**: gpu-sync's launches on a stream of each device, no explicit
//!   wait: the engine inserts the cross-device waits (B's kernel reaches A's
//!   buffer through peer access, which the caller turned on);
//! - **raw**: the same kernel function of the same loaded module by
//!   `cuLaunchKernel`, ordered by hand: before each hop `cuCtxSetCurrent`
//!   of its device (a function of one device's module launches only with
//!   that context current, as a runtime program's `cudaSetDevice`), then
//!   `cuStreamWaitEvent` for the other device's last record, the launch,
//!   and `cuEventRecord` on its stream: the correct hand-written sequence.
//!
//! Each batch queues, on A, the spin gate (gpu-bench's instruments), then
//! the origin kernel (A's, behind the gate: every hop after it waits for it,
//! so B is held too), the start event, the N hops and the end event; the
//! host times the N hops' submission while the GPU is held, then opens the
//! gate and synchronizes both streams. GPU time per hop is the span of the
//! two events on A over N; host time per hop the submission over N. Raw and
//! ours alternate batch by batch (in alternating order) after one untimed
//! round; each figure is the median over `repeats` batches. After the last
//! batch both buffers are read back and must hold exactly `batches ×
//! (N + 1)` in every word.
//!
//! Unsafe code: the raw chain hands the driver its buffer by address,
//! outside gpu-sync's tracking.
#![allow(unsafe_code)]

use super::median;
use super::twin::{Twins, borrow_stream, context, driver};
use crate::instruments::{Instruments, SpinGate};
use gpu_sync::cuda_sys::result::{context as ctx, event, stream};
use gpu_sync::cuda_sys::{CUevent_flags, OwnedEvent};
use gpu_sync::{Device, DeviceBuffer, Stream, TimingEvent};
use std::sync::Arc;
use std::time::Instant;

/// Words of the handed-off buffer: one block's worth, so the GPU's part of
/// a hop is the launch and the wait.
const WORDS: usize = 64;

/// How long the gate waits for the host, ns (a chain takes well under a
/// millisecond to queue).
const GATE_TIMEOUT_NS: u64 = 2_000_000_000;

/// The handoff's figures for one ordered pair, per hop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Handoff {
    /// gpu-sync's chain, GPU µs per hop (events on A).
    pub gpu_us: f64,
    /// The raw chain, GPU µs per hop.
    pub raw_gpu_us: f64,
    /// gpu-sync's chain, host µs per hop to submit.
    pub host_us: f64,
    /// The raw chain, host µs per hop to submit.
    pub raw_host_us: f64,
    /// Batches whose gate timed out before the host opened it (they ran
    /// with host gaps).
    pub timeouts: usize,
}

/// The chain's streams, buffers and events.
struct Chain<'t> {
    ta: &'t Twins,
    tb: &'t Twins,
    sa: Stream,
    sb: Stream,
    /// Ours: handed off by gpu-sync's launches.
    x: DeviceBuffer<u32>,
    /// Raw: reached only through raw launches.
    raw_x: DeviceBuffer<u32>,
    start: TimingEvent,
    end: TimingEvent,
    raw_start: OwnedEvent,
    raw_end: OwnedEvent,
    /// Raw: recorded after each launch on A, and on B.
    ev_a: OwnedEvent,
    ev_b: OwnedEvent,
    gate: Option<SpinGate>,
    timeouts: usize,
}

/// (GPU µs, host µs) per hop of one batch.
type Batch = (f64, f64);

impl<'t> Chain<'t> {
    fn new(
        ta: &'t Twins,
        tb: &'t Twins,
        gate: Option<Arc<dyn Instruments>>,
    ) -> crate::Result<(Chain<'t>, Option<String>)> {
        let (a, b) = (ta.device(), tb.device());
        let (sa, sb) = (Stream::new(a)?, Stream::new(b)?);
        let x = DeviceBuffer::<u32>::zeroed(&sa, WORDS)?;
        let raw_x = DeviceBuffer::<u32>::zeroed(&sa, WORDS)?;
        let drv = driver()?;
        let ev = |d: &Device, flags: u32| -> crate::Result<OwnedEvent> {
            d.make_current()?;
            Ok(event::create(drv, flags).map_err(gpu_sync::Error::from)?)
        };
        let sync_only = CUevent_flags::CU_EVENT_DISABLE_TIMING.0;
        let (raw_start, raw_end, ev_a) = (ev(a, 0)?, ev(a, 0)?, ev(a, sync_only)?);
        let ev_b = ev(b, sync_only)?;
        let (gate, why) = match gate.map(|i| SpinGate::new(i, &sa, GATE_TIMEOUT_NS)) {
            Some(Ok(g)) => (Some(g), None),
            Some(Err(e)) => (None, Some(format!("no spin gate ({e})"))),
            None => (None, Some("no spin gate (no instruments)".to_owned())),
        };
        sa.synchronize()?;
        sb.synchronize()?;
        let (start, end) = (TimingEvent::new(a)?, TimingEvent::new(a)?);
        let chain =
            Chain { ta, tb, sa, sb, x, raw_x, start, end, raw_start, raw_end, ev_a, ev_b, gate, timeouts: 0 };
        Ok((chain, why))
    }

    /// Queues the gate on A (untimed).
    fn hold(&mut self) -> crate::Result<()> {
        if let Some(g) = self.gate.as_mut() {
            g.hold(&self.sa)?;
        }
        Ok(())
    }

    /// Opens the gate, waits for both streams, counts a timed-out gate.
    fn release(&mut self) -> crate::Result<()> {
        let opened = self.gate.as_mut().map(SpinGate::open);
        let a = self.sa.synchronize();
        let b = self.sb.synchronize();
        a?;
        b?;
        if let Some(o) = opened {
            o?;
        }
        if let Some(g) = &self.gate
            && !g.opened(&self.sa)?
        {
            self.timeouts += 1;
        }
        Ok(())
    }

    /// One batch of gpu-sync's chain.
    fn ours(&mut self, hops: usize) -> crate::Result<Batch> {
        self.hold()?;
        let queued = (|| {
            self.ta.bump(&self.sa, &mut self.x, 1)?;
            self.start.record(&self.sa)?;
            let t = Instant::now();
            for h in 1..=hops {
                let (twins, s) = if h % 2 == 1 { (self.tb, &self.sb) } else { (self.ta, &self.sa) };
                twins.bump(s, &mut self.x, 1)?;
            }
            let host = t.elapsed().as_secs_f64() * 1e6;
            self.end.record(&self.sa)?;
            Ok::<f64, crate::Error>(host)
        })();
        // Open the gate whatever happened, so the streams drain.
        self.release()?;
        let host = queued?;
        let gpu = self.start.elapsed(&self.end)?.as_secs_f64() * 1e6;
        Ok((gpu / hops as f64, host / hops as f64))
    }

    /// One batch of the raw chain.
    fn raw(&mut self, hops: usize) -> crate::Result<Batch> {
        let drv = driver()?;
        self.hold()?;
        let (x, n) = (self.raw_x.as_raw(), WORDS as u64);
        let queued = (|| {
            let (sa, sb) = (borrow_stream(drv, &self.sa), borrow_stream(drv, &self.sb));
            let (ca, cb) = (context(drv, self.ta.device()), context(drv, self.tb.device()));
            let err = gpu_sync::Error::from;
            ctx::set_current(drv, Some(ca)).map_err(err)?;
            // The argument of every raw launch of this batch: `raw_x` is a live
            // buffer of `WORDS` words on A owned by the chain, which
            // synchronizes both streams before it returns (`release`) and
            // before the buffer could drop; nothing but this chain's raw
            // launches touches it after its zeroing (synchronized in
            // `Chain::new`); B reaches it through the peer access the caller
            // turned on; each launch is ordered after the previous one by
            // stream order or by the wait for the event recorded after it.
            // SAFETY: as argued above; the origin launch, first of the
            // batch on A, after the previous batch drained.
            unsafe { self.ta.raw_bump(sa, x, n, 1) }?;
            event::record(&self.ev_a, sa).map_err(err)?;
            event::record(&self.raw_start, sa).map_err(err)?;
            let t = Instant::now();
            for h in 1..=hops {
                if h % 2 == 1 {
                    ctx::set_current(drv, Some(cb)).map_err(err)?;
                    stream::wait_event(sb, &self.ev_a, 0).map_err(err)?;
                    // SAFETY: as above: after B's wait for A's last launch.
                    unsafe { self.tb.raw_bump(sb, x, n, 1) }?;
                    event::record(&self.ev_b, sb).map_err(err)?;
                } else {
                    ctx::set_current(drv, Some(ca)).map_err(err)?;
                    stream::wait_event(sa, &self.ev_b, 0).map_err(err)?;
                    // SAFETY: as above: after A's wait for B's last launch.
                    unsafe { self.ta.raw_bump(sa, x, n, 1) }?;
                    event::record(&self.ev_a, sa).map_err(err)?;
                }
            }
            let host = t.elapsed().as_secs_f64() * 1e6;
            event::record(&self.raw_end, sa).map_err(err)?;
            Ok::<f64, crate::Error>(host)
        })();
        self.release()?;
        let host = queued?;
        let ms = event::elapsed_time(&self.raw_start, &self.raw_end).map_err(gpu_sync::Error::from)?;
        Ok((f64::from(ms) * 1e3 / hops as f64, host / hops as f64))
    }

    /// Both buffers hold `want` in every word.
    fn check(&self, want: u32) -> crate::Result<()> {
        for (what, buf) in [("gpu-sync's", &self.x), ("the raw", &self.raw_x)] {
            let got = self.sa.to_vec(buf)?;
            if let Some(i) = got.iter().position(|&v| v != want) {
                return Err(crate::Error::Check(format!(
                    "handoff {} <-> {}: {what} buffer's word {i} is {}, not {want}",
                    self.ta.device().ordinal(),
                    self.tb.device().ordinal(),
                    got[i]
                )));
            }
        }
        Ok(())
    }
}

/// Measures the handoff A → B → A (`ta`'s and `tb`'s devices) over `hops`
/// hops (even, at least 2), `repeats` batches of each chain after one
/// untimed round, gated by `gate` (the instruments of A) when given.
/// Returns the figures and a remark when the batches could not be gated.
///
/// # Errors
/// [`crate::Error::Check`] when a buffer does not hold its exact count;
/// `hops` odd, zero or above [`super::MAX_HANDOFF_HOPS`]; a driver error.
pub(super) fn measure(
    ta: &Twins,
    tb: &Twins,
    hops: usize,
    repeats: usize,
    gate: Option<Arc<dyn Instruments>>,
) -> crate::Result<(Handoff, Option<String>)> {
    if hops == 0 || !hops.is_multiple_of(2) || hops > super::MAX_HANDOFF_HOPS {
        return Err(gpu_sync::Error::InvalidArgument(format!(
            "handoff hops {hops}: an even number from 2 to {} (the chain ends on A; one gated \
             batch queues it)",
            super::MAX_HANDOFF_HOPS
        ))
        .into());
    }
    let (mut c, why) = Chain::new(ta, tb, gate)?;
    let (mut ours, mut raw) = (Vec::with_capacity(repeats), Vec::with_capacity(repeats));
    for i in 0..=repeats {
        let (o, r) = if i % 2 == 0 {
            let r = c.raw(hops)?;
            (c.ours(hops)?, r)
        } else {
            let o = c.ours(hops)?;
            (o, c.raw(hops)?)
        };
        if i > 0 {
            ours.push(o);
            raw.push(r);
        }
    }
    // Every batch bumps each word once per launch: the origin and the hops.
    c.check(((repeats + 1) * (hops + 1)) as u32)?;
    let med = |v: &[Batch], f: fn(&Batch) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
    let h = Handoff {
        gpu_us: med(&ours, |b| b.0),
        raw_gpu_us: med(&raw, |b| b.0),
        host_us: med(&ours, |b| b.1),
        raw_host_us: med(&raw, |b| b.1),
        timeouts: c.timeouts,
    };
    Ok((h, why))
}
