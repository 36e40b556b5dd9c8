//! Stream capture, graphs and graph launches.
//!
//! While a stream captures, work queued on it becomes graph nodes instead
//! of operations; event records and waits move dependency sets between
//! streams, and a wait on an event recorded in the capture pulls the waiting
//! stream into it (a fork) until it is joined back. A launch of an
//! instantiated graph is one operation on its stream that runs the nodes in
//! a random topological order (a graph holding collectives: one such
//! operation per run of nodes between them, and a collective part for
//! each, see `nccl::replay`).

use crate::clock::VClock;
use crate::ops::Work;
use crate::result::{
    CAPTURE_IMPLICIT, CAPTURE_INVALIDATED, CAPTURE_MERGE, CAPTURE_UNJOINED, CAPTURE_UNMATCHED,
    CAPTURE_UNSUPPORTED, CAPTURE_WRONG_THREAD, ILLEGAL_STATE, INVALID_HANDLE, INVALID_VALUE, NOT_SUPPORTED,
    Res,
};
use crate::rng::Rng;
use crate::state::{Caller, State};
use crate::stream::{self, StreamCapture, StreamKind, Waits};
use cuda_sys::{CUgraphInstantiate_flags, CUstreamCaptureMode, CUstreamCaptureStatus};
use std::collections::HashSet;
use std::sync::Arc;
use std::thread::ThreadId;

/// One node of a graph.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) work: Work,
    /// Indices of the nodes it depends on.
    pub(crate) deps: Vec<usize>,
    pub(crate) duration: u64,
}

/// The nodes of an instantiated graph, shared by its launches.
#[derive(Debug)]
pub(crate) struct GraphBody {
    pub(crate) nodes: Vec<Node>,
    /// Simulated duration of a launch: the critical path.
    pub(crate) duration: u64,
}

/// A graph made by `cuStreamEndCapture`.
#[derive(Debug)]
pub(crate) struct Graph {
    pub(crate) session: u64,
    pub(crate) nodes: Vec<Node>,
    /// The `CUgraphNode` handle of each node.
    pub(crate) handles: Vec<u64>,
}

/// An instantiated graph.
#[derive(Debug)]
pub(crate) struct GraphExec {
    pub(crate) session: u64,
    pub(crate) body: Arc<GraphBody>,
    /// The previous launch (launches of one exec are ordered): its
    /// operation, clock and end time.
    pub(crate) last: Option<(u64, Arc<VClock>, u64)>,
}

/// An active capture sequence.
#[derive(Debug)]
pub(crate) struct Capture {
    pub(crate) session: u64,
    pub(crate) origin: u64,
    pub(crate) mode: CUstreamCaptureMode,
    pub(crate) thread: ThreadId,
    pub(crate) nodes: Vec<Node>,
    pub(crate) invalidated: bool,
    /// Every stream in the capture (the origin first).
    pub(crate) members: Vec<u64>,
}

/// Marks a capture invalidated: `cuStreamEndCapture` will fail.
pub(crate) fn invalidate(st: &mut State, cap: u64) {
    if let Some(c) = st.captures.get_mut(&cap) {
        if !c.invalidated {
            log::warn!("cuda-sim: stream capture invalidated");
        }
        c.invalidated = true;
    }
}

/// The capture stream `sid` takes part in, if any.
pub(crate) fn capture_of(st: &State, sid: u64) -> Option<u64> {
    st.streams.get(&sid).and_then(|s| s.capture.as_ref()).map(|c| c.capture)
}

/// For operations a capture cannot record (host synchronization of a
/// capturing stream, and the simulator's limits: stream-ordered
/// allocation, pageable copies, host functions, graph launches): invalidate
/// the capture and fail with `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`.
pub(crate) fn refuse_in_capture(st: &mut State, sid: u64) -> Res {
    match capture_of(st, sid) {
        Some(cap) => {
            invalidate(st, cap);
            Err(CAPTURE_UNSUPPORTED)
        }
        None => Ok(()),
    }
}

/// For "potentially unsafe" calls (`cuMemAlloc`, `cuMemFree`): refused
/// while a capture of the session is active on this thread (unless
/// relaxed) or on another thread in global mode, invalidating it.
pub(crate) fn refuse_unsafe_call(st: &mut State, caller: &Caller) -> Res {
    let hit: Vec<u64> = st
        .captures
        .iter()
        .filter(|(_, c)| c.session == caller.session)
        .filter(|(_, c)| {
            if c.thread == caller.thread {
                c.mode != CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED
            } else {
                c.mode == CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL
            }
        })
        .map(|(&id, _)| id)
        .collect();
    if hit.is_empty() {
        return Ok(());
    }
    for c in hit {
        invalidate(st, c);
    }
    Err(CAPTURE_UNSUPPORTED)
}

/// Fails (invalidating) if any stream of `session` on `device` captures:
/// a context synchronization cannot be captured.
pub(crate) fn refuse_device_sync(st: &mut State, session: u64, device: i32) -> Res {
    let caps: Vec<u64> = st
        .captures
        .iter()
        .filter(|(_, c)| c.session == session)
        .filter(|(_, c)| st.streams.get(&c.origin).is_some_and(|s| s.device == device))
        .map(|(&id, _)| id)
        .collect();
    if caps.is_empty() {
        return Ok(());
    }
    for c in caps {
        invalidate(st, c);
    }
    Err(CAPTURE_UNSUPPORTED)
}

/// `cuStreamBeginCapture`.
pub(crate) fn begin(st: &mut State, caller: &Caller, sid: u64, mode: CUstreamCaptureMode) -> Res {
    if mode.0 > CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED.0 {
        return Err(INVALID_VALUE);
    }
    let s = st.streams.get(&sid).ok_or(INVALID_HANDLE)?;
    if s.kind == StreamKind::Legacy {
        return Err(CAPTURE_UNSUPPORTED);
    }
    if s.capture.is_some() {
        return Err(ILLEGAL_STATE);
    }
    let id = st.new_handle();
    st.captures.insert(
        id,
        Capture {
            session: caller.session,
            origin: sid,
            mode,
            thread: caller.thread,
            nodes: Vec::new(),
            invalidated: false,
            members: vec![sid],
        },
    );
    if let Some(s) = st.streams.get_mut(&sid) {
        s.capture = Some(StreamCapture { capture: id, tail: Vec::new() });
    }
    Ok(())
}

/// `cuStreamIsCapturing`.
pub(crate) fn status(st: &State, sid: u64) -> CUstreamCaptureStatus {
    match capture_of(st, sid).and_then(|c| st.captures.get(&c)) {
        None => CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
        Some(c) if c.invalidated => CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_INVALIDATED,
        Some(_) => CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
    }
}

/// Adds `work` as a node on capturing stream `sid`.
pub(crate) fn add_node(st: &mut State, sid: u64, work: Work) -> Res {
    // A copy between devices takes the link of the peer access at capture.
    let (session, device) = st.streams.get(&sid).map(|s| (s.session, s.device)).ok_or(INVALID_HANDLE)?;
    let duration = crate::peer::duration(st, session, device, &work);
    let s = st.streams.get_mut(&sid).ok_or(INVALID_HANDLE)?;
    let sc = s.capture.as_mut().ok_or(ILLEGAL_STATE)?;
    let c = st.captures.get_mut(&sc.capture).ok_or(ILLEGAL_STATE)?;
    if c.invalidated {
        return Err(CAPTURE_INVALIDATED);
    }
    let index = c.nodes.len();
    c.nodes.push(Node { work, deps: std::mem::take(&mut sc.tail), duration });
    sc.tail = vec![index];
    Ok(())
}

/// The capture and dependency set an event recorded now on capturing
/// stream `sid` stands for.
pub(crate) fn capture_tail(st: &State, sid: u64) -> Res<(u64, Vec<usize>)> {
    let sc = st.streams.get(&sid).and_then(|s| s.capture.as_ref()).ok_or(ILLEGAL_STATE)?;
    let c = st.captures.get(&sc.capture).ok_or(ILLEGAL_STATE)?;
    if c.invalidated {
        return Err(CAPTURE_INVALIDATED);
    }
    Ok((sc.capture, sc.tail.clone()))
}

/// A wait on an event recorded into capture `cap` with dependency set
/// `deps`: a capturing stream adds them to its own; another stream joins
/// the capture (a fork).
pub(crate) fn capture_join(st: &mut State, sid: u64, cap: u64, deps: Vec<usize>) -> Res {
    let (kind, current) = {
        let s = st.streams.get(&sid).ok_or(INVALID_HANDLE)?;
        (s.kind, s.capture.as_ref().map(|c| c.capture))
    };
    match current {
        Some(c) if c == cap => {
            if let Some(sc) = st.streams.get_mut(&sid).and_then(|s| s.capture.as_mut()) {
                for d in deps {
                    if !sc.tail.contains(&d) {
                        sc.tail.push(d);
                    }
                }
            }
            Ok(())
        }
        Some(other) => {
            invalidate(st, cap);
            invalidate(st, other);
            Err(CAPTURE_MERGE)
        }
        None if kind == StreamKind::Legacy => {
            invalidate(st, cap);
            Err(CAPTURE_IMPLICIT)
        }
        None => {
            if let Some(s) = st.streams.get_mut(&sid) {
                s.capture = Some(StreamCapture { capture: cap, tail: deps });
            }
            if let Some(c) = st.captures.get_mut(&cap) {
                c.members.push(sid);
            }
            Ok(())
        }
    }
}

/// Indices of `tail` and all their ancestors.
fn ancestors(nodes: &[Node], tail: &[usize]) -> HashSet<usize> {
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = tail.to_vec();
    while let Some(i) = stack.pop() {
        if seen.insert(i)
            && let Some(n) = nodes.get(i)
        {
            stack.extend(n.deps.iter().copied());
        }
    }
    seen
}

/// `cuStreamEndCapture`: ends the capture on every stream in it; returns
/// the new graph's handle.
pub(crate) fn end(st: &mut State, caller: &Caller, sid: u64) -> Res<u64> {
    let cap = capture_of(st, sid).ok_or(ILLEGAL_STATE)?;
    let c = st.captures.get(&cap).ok_or(ILLEGAL_STATE)?;
    if c.origin != sid {
        return Err(CAPTURE_UNMATCHED);
    }
    if c.mode != CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED && c.thread != caller.thread {
        return Err(CAPTURE_WRONG_THREAD);
    }
    let c = st.captures.remove(&cap).ok_or(ILLEGAL_STATE)?;
    let mut tails = Vec::new();
    for m in &c.members {
        if let Some(s) = st.streams.get_mut(m)
            && let Some(sc) = s.capture.take()
        {
            tails.push((*m, sc.tail));
        }
    }
    if c.invalidated {
        return Err(CAPTURE_INVALIDATED);
    }
    let origin_tail = tails.iter().find(|(m, _)| *m == sid).map(|t| t.1.clone()).unwrap_or_default();
    let joined = ancestors(&c.nodes, &origin_tail);
    let unjoined = tails.iter().any(|(m, tail)| *m != sid && tail.iter().any(|n| !joined.contains(n)));
    if unjoined {
        return Err(CAPTURE_UNJOINED);
    }
    let id = st.new_handle();
    let handles = (0..c.nodes.len()).map(|_| st.new_handle()).collect();
    st.graphs.insert(id, Graph { session: caller.session, nodes: c.nodes, handles });
    st.session_mut(caller.session).live.graphs += 1;
    Ok(id)
}

/// When each node finishes, from the graph's start (ns): the longest path
/// to it through the nodes' simulated durations.
fn finish_times(nodes: &[Node]) -> Vec<u64> {
    // Nodes are appended in capture order, so dependencies come first.
    let mut finish = vec![0u64; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let start = n.deps.iter().filter_map(|&d| finish.get(d).copied()).max().unwrap_or(0);
        if let Some(f) = finish.get_mut(i) {
            *f = start.saturating_add(n.duration);
        }
    }
    finish
}

/// Longest path through the nodes (their simulated durations).
pub(crate) fn critical_path(nodes: &[Node]) -> u64 {
    finish_times(nodes).into_iter().max().unwrap_or(0)
}

/// `cuGraphInstantiateWithFlags`.
pub(crate) fn instantiate(st: &mut State, caller: &Caller, graph: u64, flags: u64) -> Res<u64> {
    let g = st.graphs.get(&graph).ok_or(INVALID_HANDLE)?;
    let device_launch = u64::from(CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH.0);
    if flags & device_launch != 0 {
        return Err(NOT_SUPPORTED);
    }
    if flags & !0xF != 0 {
        return Err(INVALID_VALUE);
    }
    let nodes = g.nodes.clone();
    let duration = critical_path(&nodes);
    let id = st.new_handle();
    st.execs.insert(
        id,
        GraphExec { session: caller.session, body: Arc::new(GraphBody { nodes, duration }), last: None },
    );
    st.session_mut(caller.session).live.graph_execs += 1;
    Ok(id)
}

/// `cuGraphLaunch`: one operation on the stream, ordered after the
/// previous launch of the same exec; a graph holding captured collectives
/// is queued as several (see `nccl::replay`).
pub(crate) fn launch(st: &mut State, exec: u64, sid: u64) -> Res {
    let e = st.execs.get(&exec).ok_or(INVALID_HANDLE)?;
    let body = e.body.clone();
    let mut waits = Waits::default();
    if let Some((op, clock, end)) = e.last.clone() {
        if st.ops.contains_key(&op) {
            waits.deps.push(op);
        }
        waits.clocks.push(clock);
        waits.ready_at = end;
    }
    refuse_in_capture(st, sid)?;
    let op = if crate::nccl::has_collectives(&body) {
        crate::nccl::check_replay(st, &body)?;
        let mut waits = Some(waits);
        let mut last = None;
        for step in crate::nccl::steps(&body) {
            let w = waits.take().unwrap_or_default();
            last = Some(match step {
                crate::nccl::Step::Nodes(b) => {
                    let op = stream::enqueue(st, sid, Work::Graph(b.clone()), w)?;
                    record_events(st, op, &b);
                    op
                }
                crate::nccl::Step::Part(p) => crate::nccl::enqueue_replayed(st, sid, &p, w)?,
            });
        }
        last
    } else {
        let op = stream::enqueue(st, sid, Work::Graph(body.clone()), waits)?;
        record_events(st, op, &body);
        Some(op)
    };
    let last = op.and_then(|op| st.ops.get(&op).map(|o| (op, o.stamp.clock.clone(), o.end)));
    if let Some(e) = st.execs.get_mut(&exec) {
        e.last = last;
    }
    Ok(())
}

/// Event-record nodes of `body`, launched as operation `op`, record their
/// event at this launch, timestamped at the node's finish inside the graph;
/// the record completes with the launch (the simulator runs a graph as one
/// operation).
fn record_events(st: &mut State, op: u64, body: &GraphBody) {
    let Some((clock, end)) = st.ops.get(&op).map(|o| (o.stamp.clock.clone(), o.end)) else { return };
    let start = end.saturating_sub(body.duration);
    let finish = finish_times(&body.nodes);
    for (i, n) in body.nodes.iter().enumerate() {
        if let (Work::EventRecord(ev), Some(f)) = (&n.work, finish.get(i))
            && let Some(e) = st.events.get_mut(ev)
        {
            e.rec = Some(crate::event::EventRec { op, clock: clock.clone(), time: start.saturating_add(*f) });
            e.captured = None;
        }
    }
}

/// A random topological order of the body's nodes.
pub(crate) fn random_topo_order(body: &GraphBody, rng: &mut Rng) -> Vec<usize> {
    let n = body.nodes.len();
    let mut indeg: Vec<usize> = body.nodes.iter().map(|x| x.deps.len()).collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, x) in body.nodes.iter().enumerate() {
        for &d in &x.deps {
            if let Some(u) = users.get_mut(d) {
                u.push(i);
            }
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indeg.get(i) == Some(&0)).collect();
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        let k = rng.below(ready.len() as u64) as usize;
        let i = ready.swap_remove(k);
        order.push(i);
        for &u in users.get(i).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(d) = indeg.get_mut(u) {
                *d -= 1;
                if *d == 0 {
                    ready.push(u);
                }
            }
        }
    }
    order
}
