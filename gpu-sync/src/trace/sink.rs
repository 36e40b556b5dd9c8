//! Where records go: each device's recorder slot (the flag the engine's
//! funnel reads), the recorder's sink (operations, ranges, memory samples,
//! streams, calibrations, the event pool), and the live sinks every ended
//! range goes to.
//!
//! Lock order: the engine's book (held by the funnel around the hook), then
//! a sink's `state`; `LIVE`, then a sink's `state`. Nothing here takes the
//! book or calls into the engine.

use super::events::{Cal, Events, Leftovers, resolve};
use super::range::RECORDERS;
use super::{
    Calibration, MemorySample, OpKind, OpRecord, RangeRecord, RecordOptions, Recorder, Recording, StreamInfo,
    Timing,
};
use crate::error::{Error, Result};
use cuda_sys::cupti::Activity;
use cuda_sys::result as cu;
use cuda_sys::{BorrowedContext, BorrowedStream, CUdevice, CUmemPool_attribute, Driver, OwnedEvent};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// What a sink needs to know of its device (given by `device.rs`, the
/// layer above).
#[derive(Clone, Copy)]
pub(crate) struct DeviceFacts {
    pub ordinal: i32,
    pub raw: CUdevice,
    /// The retained primary context (never released).
    pub ctx: BorrowedContext<'static>,
    pub drv: &'static Driver,
    /// Whether the device's buffers come from the default stream-ordered
    /// pool (its reserved bytes are sampled).
    pub pools: bool,
}

impl DeviceFacts {
    /// Makes the device's primary context current on this thread (a
    /// thread-local read when it is already): the device's own check-then-set
    /// (`ffi::bind`, which `DeviceInner::bind` makes too).
    #[inline]
    pub(crate) fn bind(&self) -> Result<()> {
        crate::ffi::bind(self.drv, self.ctx)
    }
}

/// A device's recording slot, in its `DeviceInner`: the flag the funnel
/// reads, and the recorder's sink while one lives.
#[derive(Default)]
pub(crate) struct DeviceTrace {
    /// Set while a recorder of the device may live: the funnel's one load.
    /// Cleared by the first submission that finds the recorder gone (or by
    /// its drop), under `slot`.
    on: AtomicBool,
    slot: Mutex<Weak<Sink>>,
    /// Timing events of recorders gone, for the next one: events are
    /// created once per device and reused.
    spare: Arc<Mutex<Vec<OwnedEvent>>>,
}

impl DeviceTrace {
    /// Whether recording may be on: the funnel's one branch.
    #[inline(always)]
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Weak<Sink>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live sink recording stream `stream`, if any; clears the flag
    /// when the recorder is gone.
    #[cold]
    pub(crate) fn sink_for(&self, stream: u64) -> Option<Arc<Sink>> {
        let slot = self.lock();
        let Some(sink) = slot.upgrade().filter(|s| !s.stopped.load(Ordering::Acquire)) else {
            self.on.store(false, Ordering::Relaxed);
            return None;
        };
        drop(slot);
        sink.wants(stream).then_some(sink)
    }

    /// Starts recording (see `Device::record`).
    pub(crate) fn start(&self, facts: DeviceFacts, opts: RecordOptions) -> Result<Recorder> {
        crate::ffi::refuse("Device::record")?;
        let cupti = match opts.timing {
            Timing::Cupti => Some(cuda_sys::cupti::activity()?),
            Timing::Events | Timing::HostOnly => None,
        };
        let mut slot = self.lock();
        if slot.upgrade().is_some_and(|s| !s.stopped.load(Ordering::Acquire)) {
            return Err(Error::AlreadyRecording { device: facts.ordinal });
        }
        facts.bind()?;
        let (events, pool) = match opts.timing {
            Timing::Events => {
                let spare = std::mem::take(&mut *self.spare.lock().unwrap_or_else(|p| p.into_inner()));
                let (e, pool) = Events::new(facts, spare)?;
                (Some(e), pool)
            }
            Timing::Cupti | Timing::HostOnly => (None, Vec::new()),
        };
        let mut state = State { pool, ..State::default() };
        if let Some(e) = &events {
            state.calibrations.push(e.reference().info);
        }
        let sink = Arc::new(Sink {
            facts,
            timing: opts.timing,
            streams: opts.streams,
            cupti,
            events,
            stopped: AtomicBool::new(false),
            state: Mutex::new(state),
            spare: self.spare.clone(),
        });
        *slot = Arc::downgrade(&sink);
        self.on.store(true, Ordering::Release);
        drop(slot);
        let mut live = live();
        // Recorders gone since the last start or ended range leave their
        // entry (and the sink's memory a `Weak` keeps): dropped here, so the
        // list holds the live recorders and no more.
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&sink));
        drop(live);
        RECORDERS.fetch_add(1, Ordering::Relaxed);
        Ok(Recorder { sink })
    }

    /// The ledger changed: a memory sample while recording.
    #[inline]
    pub(crate) fn memory(&self, allocated: u64) {
        if !self.is_on() {
            return;
        }
        let Some(sink) = self.lock().upgrade() else { return };
        sink.memory(allocated);
    }
}

/// Every live sink, for the ranges (of any thread) that end: pruned of
/// sinks gone when a recorder starts and when a range ends.
fn live() -> MutexGuard<'static, Vec<Weak<Sink>>> {
    static LIVE: Mutex<Vec<Weak<Sink>>> = Mutex::new(Vec::new());
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A range ended on some thread: every live recorder gets it.
pub(super) fn range_ended(rec: RangeRecord) {
    let mut live = live();
    live.retain(|w| w.strong_count() > 0);
    for sink in live.iter().filter_map(Weak::upgrade) {
        sink.lock().ranges.push(rec.clone());
    }
}

/// What an operation is, for its record: built by the funnel only while
/// recording (its name may be a `String`).
pub(crate) struct OpDesc {
    /// [`OpRecord::name`].
    pub name: Cow<'static, str>,
    /// [`OpRecord::kind`].
    pub kind: OpKind,
}

impl OpDesc {
    /// A copy: `"memcpy HtoD"` …
    pub(crate) fn copy(dir: super::CopyDir, bytes: usize, host: super::HostMem) -> OpDesc {
        let name = match dir {
            super::CopyDir::HtoD => "memcpy HtoD",
            super::CopyDir::DtoH => "memcpy DtoH",
            super::CopyDir::DtoD => "memcpy DtoD",
            super::CopyDir::Other => "memcpy",
        };
        OpDesc { name: name.into(), kind: OpKind::Copy { dir, bytes: bytes as u64, host } }
    }

    /// A memset of `bytes`.
    pub(crate) fn memset(bytes: usize) -> OpDesc {
        OpDesc { name: "memset".into(), kind: OpKind::Memset { bytes: bytes as u64 } }
    }

    /// A kernel launch.
    pub(crate) fn kernel(name: &str, grid: [u32; 3], block: [u32; 3], shared_bytes: u32) -> OpDesc {
        OpDesc { name: name.to_owned().into(), kind: OpKind::Kernel { grid, block, shared_bytes } }
    }
}

/// The stream an operation is submitted on.
#[derive(Clone, Copy)]
pub(crate) struct StreamFacts {
    pub id: u64,
    pub priority: i32,
}

/// A recorder's sink.
pub(crate) struct Sink {
    pub(super) facts: DeviceFacts,
    pub(super) timing: Timing,
    streams: Option<Vec<u64>>,
    cupti: Option<&'static Activity>,
    /// The event pool and the reference calibration ([`Timing::Events`]).
    pub(super) events: Option<Events>,
    /// Set by the recorder's drop: nothing more is recorded.
    pub(super) stopped: AtomicBool,
    state: Mutex<State>,
    /// The device's spare events, where this sink's pool goes at its drop.
    spare: Arc<Mutex<Vec<OwnedEvent>>>,
}

/// A finished operation, its span unresolved.
pub(super) struct Done {
    pub rec: OpRecord,
    /// Start and end events and the calibration they are read against.
    pub events: Option<(OwnedEvent, OwnedEvent, Arc<Cal>)>,
    /// What it waits for, resolved to records at the take (the record
    /// waited for may be made on another thread after this one).
    pub waits: super::Waits,
}

#[derive(Default)]
pub(super) struct State {
    pub done: Vec<Done>,
    pub ranges: Vec<RangeRecord>,
    pub memory: Vec<MemorySample>,
    pub streams: Vec<StreamInfo>,
    /// The calibration of each stream seen since the last take.
    pub stream_cal: HashMap<u64, Arc<Cal>>,
    /// Every calibration made (reported in each recording).
    pub calibrations: Vec<Calibration>,
    pub dropped: u64,
    /// The pool's reserved bytes last read (kept for samples taken inside
    /// a host function).
    pub reserved: u64,
    /// Timing events not in use.
    pub pool: Vec<OwnedEvent>,
}

static NEXT_OP: AtomicU64 = AtomicU64::new(1);

/// An operation between its driver call's start and end.
pub(crate) struct InFlight {
    id: u64,
    host_start_ns: u64,
    events: Option<(OwnedEvent, OwnedEvent, Arc<Cal>)>,
    pushed: bool,
    failed: bool,
}

impl Sink {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wants(&self, stream: u64) -> bool {
        self.streams.as_ref().is_none_or(|s| s.contains(&stream))
    }

    /// Before the driver call of an operation on `stream` (`raw`), made
    /// with the device's context current: draws the operation's id, notes
    /// the stream, reads the host clock, then records the start event
    /// ([`Timing::Events`], not `captured`) or pushes the id as CUPTI's
    /// external correlation id ([`Timing::Cupti`]).
    pub(crate) fn before(&self, stream: StreamFacts, raw: BorrowedStream<'_>, captured: bool) -> InFlight {
        let id = NEXT_OP.fetch_add(1, Ordering::Relaxed);
        let cal = self.note_stream(stream, raw, captured);
        let mut f = InFlight { id, host_start_ns: 0, events: None, pushed: false, failed: false };
        if let (Some(ev), Some(cal)) = (&self.events, cal) {
            match ev.pair(self) {
                Ok((start, end)) => {
                    f.host_start_ns = super::now_ns();
                    // The start event goes on the stream after the host
                    // time is read: the device cannot reach it earlier.
                    match cu::event::record(&start, raw) {
                        Ok(()) => f.events = Some((start, end, cal)),
                        Err(e) => {
                            log::debug!("trace: recording a start event: {e}");
                            ev.give_back(self, [start, end]);
                            f.failed = true;
                        }
                    }
                    return f;
                }
                Err(e) => {
                    log::debug!("trace: no timing event: {e}");
                    f.failed = true;
                }
            }
        }
        if let Some(a) = self.cupti {
            match a.push_external_correlation(id) {
                Ok(()) => f.pushed = true,
                Err(e) => {
                    log::debug!("trace: {e}");
                    f.failed = true;
                }
            }
        }
        f.host_start_ns = super::now_ns();
        f
    }

    /// After the driver call (`ok`: it succeeded): records the end event or
    /// pops the correlation id, reads the host clock, and keeps the record
    /// with what it waits for (`waits`); returns the record's id. A failed
    /// call enqueued nothing: it is not recorded (`None`).
    pub(crate) fn after(
        &self,
        f: InFlight,
        stream: StreamFacts,
        raw: BorrowedStream<'_>,
        desc: OpDesc,
        (captured, ok): (bool, bool),
        waits: super::Waits,
    ) -> Option<u64> {
        let mut failed = f.failed;
        let mut events = f.events;
        if ok
            && let Some((_, end, _)) = &events
            && let Err(e) = cu::event::record(end, raw)
        {
            log::debug!("trace: recording an end event: {e}");
            failed = true;
        }
        // Without both events there is no span: the pair goes back.
        if failed
            && let Some((start, end, _)) = events.take()
            && let Some(ev) = &self.events
        {
            ev.give_back(self, [start, end]);
        }
        if f.pushed
            && let Some(a) = self.cupti
            && let Err(e) = a.pop_external_correlation()
        {
            log::debug!("trace: {e}");
            failed = true;
        }
        let host_end_ns = super::now_ns();
        let mut st = self.lock();
        if failed {
            st.dropped += 1;
        }
        if !ok {
            if let (Some((start, end, _)), Some(ev)) = (events, &self.events) {
                ev.give_back_locked(&mut st, [start, end]);
            }
            return None;
        }
        let rec = OpRecord {
            id: f.id,
            name: desc.name.into_owned(),
            kind: desc.kind,
            device: self.facts.ordinal,
            stream: stream.id,
            thread: super::thread_id(),
            host_start_ns: f.host_start_ns,
            host_end_ns,
            span: None,
            captured,
            range: super::range::innermost(),
            after: Vec::new(),
        };
        st.done.push(Done { rec, events, waits });
        Some(f.id)
    }

    /// Notes `stream` on first sight; returns the calibration its events
    /// are read against (with [`Timing::Events`] and not `captured`),
    /// calibrating it first when it is new since the last take.
    fn note_stream(&self, stream: StreamFacts, raw: BorrowedStream<'_>, captured: bool) -> Option<Arc<Cal>> {
        let mut st = self.lock();
        if !st.streams.iter().any(|s| s.stream == stream.id) {
            st.streams.push(StreamInfo {
                device: self.facts.ordinal,
                stream: stream.id,
                priority: stream.priority,
                raw: raw.as_raw() as usize as u64,
            });
        }
        let ev = self.events.as_ref().filter(|_| !captured)?;
        if let Some(c) = st.stream_cal.get(&stream.id) {
            return Some(c.clone());
        }
        drop(st);
        // Without the lock: a calibration polls for up to a few tens of µs.
        let cal = ev.calibrate_stream(self, stream.id, raw);
        let mut st = self.lock();
        if cal.info.stream != 0 {
            st.calibrations.push(cal.info);
        }
        Some(st.stream_cal.entry(stream.id).or_insert(cal).clone())
    }

    fn memory(&self, allocated: u64) {
        let reserved = if self.facts.pools && !crate::ffi::calls_refused() {
            cu::device::get_default_mem_pool(self.facts.drv, self.facts.raw)
                .and_then(|p| {
                    cu::mem_pool::get_attribute(p, CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
                })
                .ok()
        } else {
            None
        };
        let t_ns = super::now_ns();
        let mut st = self.lock();
        if let Some(r) = reserved {
            st.reserved = r;
        }
        let reserved = st.reserved;
        st.memory.push(MemorySample { t_ns, device: self.facts.ordinal, allocated, reserved });
    }

    /// Drains the sink (see `Recorder::take`).
    pub(super) fn take(&self) -> Result<Recording> {
        crate::ffi::refuse("Recorder::take")?;
        self.facts.bind()?;
        let (done, ranges, memory) = {
            let mut st = self.lock();
            // Streams calibrate again at their next operation, and the
            // reference below is new: event times stay close to their
            // calibration (`cuEventElapsedTime` is an f32 of ms).
            st.stream_cal.clear();
            (std::mem::take(&mut st.done), std::mem::take(&mut st.ranges), std::mem::take(&mut st.memory))
        };
        let mut ops = Vec::with_capacity(done.len());
        let mut dropped = 0;
        let mut spare = Vec::new();
        let mut sticky = None;
        for d in done {
            let Done { mut rec, events, waits } = d;
            rec.after = waits
                .into_iter()
                .map(|w| super::WaitSource { op: super::waits::resolve(w.stream, w.at), ..w.into() })
                .collect();
            if let Some((start, end, cal)) = events {
                match resolve(&start, &end, &cal) {
                    Ok(span) => rec.span = span,
                    Err(e) => {
                        if matches!(e, Error::ContextLost { .. }) {
                            sticky = Some(e.clone());
                        }
                        log::debug!("trace: resolving a span: {e}");
                    }
                }
                if rec.span.is_none() {
                    dropped += 1;
                }
                spare.push(start);
                spare.push(end);
            }
            ops.push(rec);
        }
        if let Some(e) = sticky {
            return Err(e);
        }
        ops.sort_by_key(|o| o.id);
        if let Some(ev) = &self.events {
            let reference = ev.recalibrate(self);
            let mut st = self.lock();
            ev.give_back_locked(&mut st, spare);
            if let Some(r) = reference {
                st.calibrations.push(r);
            }
        }
        let mut st = self.lock();
        let dropped = dropped + std::mem::take(&mut st.dropped);
        Ok(Recording {
            ops,
            ranges,
            memory,
            streams: st.streams.clone(),
            calibration: st.calibrations.clone(),
            dropped,
            timing: self.timing,
        })
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // Its events are destroyed with their context bound, or kept for the
        // device's next recorder; inside a host function (no driver call
        // allowed) they are leaked instead.
        let leftovers: Leftovers = self.events.as_mut().map(Events::drain).unwrap_or_default();
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut pool = std::mem::take(&mut st.pool);
        let done = std::mem::take(&mut st.done);
        let cals = std::mem::take(&mut st.stream_cal);
        if crate::ffi::calls_refused() || self.facts.bind().is_err() {
            log::warn!("trace: leaking a recorder's timing events (dropped inside a host function)");
            std::mem::forget((leftovers, pool, done, cals));
            return;
        }
        // Operations never taken: their events go back too (an event whose
        // last record is pending may be recorded again).
        for d in done {
            if let Some((a, b, _)) = d.events {
                pool.push(a);
                pool.push(b);
            }
        }
        drop((leftovers, cals));
        self.spare.lock().unwrap_or_else(|p| p.into_inner()).extend(pool);
    }
}

// The tests use the simulator and the device (above this layer), so they
// sit in their own file, which the layer test does not scan.
#[cfg(all(test, feature = "sim"))]
mod tests;
