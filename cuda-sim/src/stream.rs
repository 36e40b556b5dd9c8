//! Streams: FIFO queues of operations with a vector clock and a simulated
//! timeline, the legacy default stream's implicit ordering, and enqueueing.

use crate::clock::VClock;
use crate::device::{GREATEST_PRIORITY, LEAST_PRIORITY};
use crate::graph;
use crate::ops::{Declared, Op, Work};
use crate::oracle::Stamp;
use crate::report::Actor;
use crate::result::{CAPTURE_IMPLICIT, INVALID_HANDLE, Res};
use crate::retire::RetireCell;
use crate::rng::Rng;
use crate::state::{Caller, State};
use cuda_sys::{CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, CUstream, CUstream_flags};
use std::collections::VecDeque;
use std::sync::Arc;

/// `CU_STREAM_NON_BLOCKING` as a bit.
pub(crate) const NON_BLOCKING: u32 = CUstream_flags::CU_STREAM_NON_BLOCKING.0;

/// What kind of stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamKind {
    /// Created by `cuStreamCreateWithPriority`.
    User,
    /// The session's legacy default stream of a device.
    Legacy,
    /// A thread's per-thread default stream.
    PerThread,
}

/// A stream taking part in a capture.
#[derive(Debug, Clone)]
pub(crate) struct StreamCapture {
    pub(crate) capture: u64,
    /// Nodes the next captured node depends on.
    pub(crate) tail: Vec<usize>,
}

/// One stream; its handle is also its actor id for the oracle.
#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) session: u64,
    pub(crate) device: i32,
    pub(crate) flags: u32,
    pub(crate) priority: i32,
    pub(crate) kind: StreamKind,
    /// Creation index in its session.
    pub(crate) index: u32,
    pub(crate) rng: Rng,
    pub(crate) clock: VClock,
    /// Queued operation ids, oldest first.
    pub(crate) queue: VecDeque<u64>,
    /// The last operation ever queued, and its stamp (for waits on this
    /// stream's current position).
    pub(crate) last_op: Option<u64>,
    /// Simulated end time of the last queued operation.
    pub(crate) tail_end: u64,
    pub(crate) destroyed: bool,
    pub(crate) capture: Option<StreamCapture>,
    /// Its covers once destroyed and drained (shared with its stamps).
    pub(crate) retire: RetireCell,
}

impl Stream {
    /// Whether the legacy default stream synchronizes with it.
    pub(crate) fn blocking(&self) -> bool {
        self.kind != StreamKind::Legacy && self.flags & NON_BLOCKING == 0
    }

    /// How reports name it.
    pub(crate) fn label(&self) -> Actor {
        match self.kind {
            StreamKind::User => Actor::Stream(self.index),
            StreamKind::Legacy => Actor::LegacyStream { device: self.device },
            StreamKind::PerThread => Actor::PerThreadStream(self.index),
        }
    }

    /// Whether every operation queued so far has completed.
    pub(crate) fn idle(&self) -> bool {
        self.queue.is_empty()
    }
}

/// Clamps a requested priority into the device's range, as CUDA does.
pub(crate) fn clamp_priority(p: i32) -> i32 {
    p.clamp(GREATEST_PRIORITY, LEAST_PRIORITY)
}

/// Creates a stream of `session` on `device`; returns its id.
pub(crate) fn create(
    st: &mut State,
    session: u64,
    device: i32,
    kind: StreamKind,
    flags: u32,
    priority: i32,
) -> u64 {
    let id = st.new_handle();
    let s = st.session_mut(session);
    let index = s.stream_count;
    s.stream_count += 1;
    let rng = Rng::derive(s.seed, u64::from(index));
    s.streams.insert(id);
    if kind == StreamKind::User {
        s.live.streams += 1;
    }
    st.streams.insert(
        id,
        Stream {
            session,
            device,
            flags,
            priority: clamp_priority(priority),
            kind,
            index,
            rng,
            clock: VClock::default(),
            queue: VecDeque::new(),
            last_op: None,
            tail_end: 0,
            destroyed: false,
            capture: None,
            retire: RetireCell::default(),
        },
    );
    id
}

/// Removes stream `sid` from the simulator (destroyed and drained, or an
/// idle default stream of a session that ends) and hands it to
/// [`crate::retire`], which gives it the covers that let clocks drop its
/// actor.
pub(crate) fn remove(st: &mut State, sid: u64) {
    let Some(s) = st.streams.remove(&sid) else { return };
    if let Some(sess) = st.sessions.get_mut(&s.session) {
        sess.streams.remove(&sid);
    }
    crate::retire::stream_gone(st, s.session, s.device, sid, &s.clock, s.tail_end, &s.retire);
}

/// The caller's default stream of `kind` on its current device, created on
/// first use.
fn default_stream(st: &mut State, caller: &Caller, kind: StreamKind) -> Res<u64> {
    let device = st.current_device(caller)?;
    let thread = (kind == StreamKind::PerThread).then_some(caller.thread);
    let key = (caller.session, device, thread);
    if let Some(&id) = st.default_streams.get(&key) {
        return Ok(id);
    }
    let id = create(st, caller.session, device, kind, 0, LEAST_PRIORITY);
    st.default_streams.insert(key, id);
    Ok(id)
}

/// Resolves a stream handle: null and `CU_STREAM_LEGACY` are the session's
/// legacy stream of the current device, `CU_STREAM_PER_THREAD` the calling
/// thread's stream; anything else must be a live stream.
pub(crate) fn resolve(st: &mut State, caller: &Caller, h: CUstream) -> Res<u64> {
    if h.is_null() || h == CU_STREAM_LEGACY {
        return default_stream(st, caller, StreamKind::Legacy);
    }
    if h == CU_STREAM_PER_THREAD {
        return default_stream(st, caller, StreamKind::PerThread);
    }
    let id = h.addr() as u64;
    match st.streams.get(&id) {
        Some(s) if !s.destroyed => Ok(id),
        _ => Err(INVALID_HANDLE),
    }
}

/// The legacy stream of `(session, device)` if it exists.
pub(crate) fn legacy_of(st: &State, session: u64, device: i32) -> Option<u64> {
    st.default_streams.get(&(session, device, None)).copied()
}

/// Streams of `session` on `device` the legacy stream orders with.
fn blocking_peers(st: &State, session: u64, device: i32) -> Vec<u64> {
    let Some(s) = st.sessions.get(&session) else { return Vec::new() };
    s.streams
        .iter()
        .filter(|id| st.streams.get(id).is_some_and(|x| x.device == device && x.blocking()))
        .copied()
        .collect()
}

/// What an operation waits for besides its stream's previous operation.
#[derive(Debug, Default)]
pub(crate) struct Waits {
    /// Operations that must complete first.
    pub(crate) deps: Vec<u64>,
    /// Clocks merged into the stream's before the operation (event waits).
    pub(crate) clocks: Vec<Arc<VClock>>,
    /// Earliest simulated start.
    pub(crate) ready_at: u64,
}

/// Queues `work` on stream `sid` (not capturing); returns the operation id.
///
/// Applies host program order (the session's host clock), the legacy
/// stream's implicit synchronization in both directions, the stream's FIFO
/// order, and `waits`; computes the simulated start and end.
pub(crate) fn enqueue(st: &mut State, sid: u64, work: Work, mut waits: Waits) -> Res<u64> {
    let (session, device, kind, blocking) = {
        let s = st.streams.get(&sid).ok_or(INVALID_HANDLE)?;
        (s.session, s.device, s.kind, s.blocking())
    };
    // The legacy stream waits for every blocking stream, and they wait for it.
    let peers: Vec<u64> = match kind {
        StreamKind::Legacy => {
            let peers = blocking_peers(st, session, device);
            let capturing: Vec<u64> = peers
                .iter()
                .filter_map(|p| st.streams.get(p).and_then(|s| s.capture.as_ref()).map(|c| c.capture))
                .collect();
            if !capturing.is_empty() {
                for c in capturing {
                    graph::invalidate(st, c);
                }
                return Err(CAPTURE_IMPLICIT);
            }
            peers
        }
        _ if blocking => legacy_of(st, session, device).into_iter().collect(),
        _ => Vec::new(),
    };
    for p in peers {
        if p == sid {
            continue;
        }
        if let Some(ps) = st.streams.get(&p) {
            if let Some(last) = ps.last_op.filter(|o| st.ops.contains_key(o)) {
                waits.deps.push(last);
            }
            waits.ready_at = waits.ready_at.max(ps.tail_end);
            waits.clocks.push(Arc::new(ps.clock.clone()));
        }
    }
    let declared: Vec<Declared> = work.declared(&st.mem);
    let dur = crate::peer::duration(st, session, device, &work);
    let (host_clock, host_now) = {
        let s = st.session_mut(session);
        (s.host_clock.clone(), s.host_time())
    };
    let id = st.new_op_id();
    let s = st.streams.get_mut(&sid).ok_or(INVALID_HANDLE)?;
    s.clock.merge(&host_clock);
    for c in &waits.clocks {
        s.clock.merge(c);
    }
    st.retirements.prune(&mut s.clock);
    let tick = s.clock.tick(sid);
    let stamp = Stamp {
        actor: sid,
        tick,
        clock: Arc::new(s.clock.clone()),
        label: s.label(),
        retired: Some(s.retire.clone()),
    };
    let prio = s.rng.next_u64();
    let seed = s.rng.next_u64();
    let start = s.tail_end.max(waits.ready_at).max(host_now);
    let end = start.saturating_add(dur);
    s.tail_end = end;
    s.queue.push_back(id);
    s.last_op = Some(id);
    waits.deps.retain(|d| st.ops.contains_key(d));
    st.ops.insert(
        id,
        Op { id, session, stream: sid, prio, seed, deps: waits.deps, stamp, start, end, work, declared },
    );
    crate::cupti::on_enqueue(st, id);
    // A GPU runs queued work while the host goes on, and the driver makes
    // the host wait once a stream's queue is full. So a stream holding more
    // than QUEUE_DEPTH operations has ready work of its session run now, as
    // a query would: a program that never synchronizes does not keep every
    // operation, and every buffer freed behind them, forever.
    if st.streams.get(&sid).is_some_and(|s| s.queue.len() > QUEUE_DEPTH) {
        crate::scheduler::run_some(st, session, (QUEUE_DEPTH / 2) as u64);
    }
    Ok(id)
}

/// Operations a stream holds before the simulator runs ready work at the
/// next enqueue (a GPU's queue is about this deep before the host blocks).
pub(crate) const QUEUE_DEPTH: usize = 1024;
