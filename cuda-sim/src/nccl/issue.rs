//! Groups and the operations: argument checks at the call, then each
//! rank's part queued on its stream (at once, or at the group's end).

use super::coll::{self, Call, Item, Part};
use super::{comm::ready, comm_id, enter, fail, reduce, wait_for};
use crate::ops::Work;
use crate::state::{Caller, State};
use crate::stream::{self, Waits};
use cuda_sys::nccl::Nccl;
use cuda_sys::nccl_bindings::{cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t};
use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

const OK: ncclResult_t = ncclResult_t::ncclSuccess;

/// One operation waiting for its group's end.
#[derive(Debug, Clone)]
struct Pending {
    comm: u64,
    stream: u64,
    item: Item,
}

/// This thread's group.
#[derive(Debug, Default)]
struct Group {
    depth: u32,
    ops: Vec<Pending>,
    /// Communicators made in the group, and whether each is blocking.
    joins: Vec<(u64, bool)>,
    /// Whether the group touched a non-blocking communicator.
    nonblocking: bool,
}

thread_local! {
    static GROUP: RefCell<Group> = RefCell::new(Group::default());
}

fn with_group<T>(f: impl FnOnce(&mut Group) -> T) -> Option<T> {
    GROUP.try_with(|g| f(&mut g.borrow_mut())).ok()
}

/// The calling thread's group nesting.
pub(crate) fn depth() -> u32 {
    with_group(|g| g.depth).unwrap_or(0)
}

/// Notes a communicator made inside the group.
pub(super) fn note_join(h: u64, blocking: bool) {
    with_group(|g| {
        g.joins.push((h, blocking));
        g.nonblocking |= !blocking;
    });
}

unsafe extern "C" fn ncclGroupStart() -> ncclResult_t {
    // Through the door, as every call: refused inside the simulator.
    if let Err(code) = enter() {
        return code;
    }
    with_group(|g| g.depth += 1);
    OK
}

unsafe extern "C" fn ncclGroupEnd() -> ncclResult_t {
    let mut guard = match enter() {
        Ok(g) => g,
        Err(code) => return code,
    };
    let Some(Some(group)) = with_group(|g| match g.depth {
        0 => None,
        1 => {
            g.depth = 0;
            Some(std::mem::take(g))
        }
        _ => {
            g.depth -= 1;
            Some(Group::default())
        }
    }) else {
        return fail(ncclResult_t::ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    };
    if group.depth == 0 && group.ops.is_empty() && group.joins.is_empty() && !group.nonblocking {
        return OK; // an inner group's end, or an empty group
    }
    let st = &mut *guard;
    let mut nonblocking = group.nonblocking;
    // One part per (communicator, stream), in the order first used.
    let mut parts: Vec<(u64, u64, Vec<Item>)> = Vec::new();
    for p in group.ops {
        nonblocking |= st.nccl.comms.get(&p.comm).is_some_and(|c| !c.blocking);
        match parts.iter_mut().find(|(c, s, _)| *c == p.comm && *s == p.stream) {
            Some(x) => x.2.push(p.item),
            None => parts.push((p.comm, p.stream, vec![p.item])),
        }
    }
    let touched: Vec<u64> = parts.iter().map(|p| p.0).collect();
    for (comm, sid, items) in parts {
        if let Err(code) = queue(st, comm, sid, items) {
            return code;
        }
    }
    // A blocking communicator's first collective waits for its clique's
    // other ranks to issue theirs (the connection), as NCCL's does.
    let mut connect: Vec<u64> = touched
        .into_iter()
        .filter(|h| st.nccl.comms.get(h).is_some_and(|c| c.blocking) && connecting(&st.nccl, *h))
        .collect();
    connect.sort_unstable();
    connect.dedup();
    drop(guard);
    let r = wait_connected(
        &connect,
        "ncclGroupEnd: a blocking communicator's first collective connects every rank",
    );
    if r != OK {
        return r;
    }
    let blocking: Vec<u64> = group.joins.iter().filter(|j| j.1).map(|j| j.0).collect();
    if !blocking.is_empty() {
        let r = wait_for(
            |st| {
                if let Some(c) = blocking.iter().filter_map(|h| st.nccl.comms.get(h)).find(|c| c.error != OK)
                {
                    return Some(c.error);
                }
                blocking.iter().all(|h| ready(&st.nccl, *h)).then_some(OK)
            },
            "ncclGroupEnd",
        );
        if r != OK {
            return r;
        }
    }
    if nonblocking { ncclResult_t::ncclInProgress } else { OK }
}

/// Queues `items` of communicator `comm` as one part on stream `sid`; on a
/// capturing stream, adds it to the capture as a node instead (its
/// instances are drawn at each launch of the graph: `replay::launch`).
fn queue(st: &mut State, comm: u64, sid: u64, items: Vec<Item>) -> Result<(), ncclResult_t> {
    let Some(c) = st.nccl.comms.get(&comm) else {
        return Err(fail(ncclResult_t::ncclInvalidArgument, "the communicator was destroyed in the group"));
    };
    let (rank, nranks, device, clique) = (c.rank, c.nranks, c.device, c.clique);
    // Its first collective: the rank's part of the clique's connection.
    if items.iter().any(|it| !matches!(it.call, Call::Send { .. } | Call::Recv { .. }))
        && let Some(used) = st.nccl.cliques.get_mut(&clique).and_then(|q| q.used.get_mut(rank as usize))
    {
        *used = true;
    }
    if crate::graph::capture_of(st, sid).is_some() {
        let duration = coll::part_ns(&items, nranks);
        let part = Arc::new(Part { comm, rank, nranks, device, items, duration });
        return crate::graph::add_node(st, sid, Work::Nccl(part)).map_err(|e| {
            fail(ncclResult_t::ncclUnhandledCudaError, &format!("capturing the collective failed: {e:?}"))
        });
    }
    enqueue_part(st, comm, sid, items, Waits::default()).map(drop)
}

/// Whether communicator `comm` has issued a collective and waits for its
/// clique's other ranks to issue their first one (NCCL connects the ranks
/// on their first collective): a blocking communicator's call waits for
/// them on the host, a non-blocking one reports `ncclInProgress`.
pub(super) fn connecting(ns: &super::NcclState, comm: u64) -> bool {
    ns.comms.get(&comm).is_some_and(|c| {
        ns.cliques
            .get(&c.clique)
            .is_some_and(|q| q.used.get(c.rank as usize).copied().unwrap_or(false) && !q.connected())
    })
}

/// The rank of `comm`'s clique that left (destroyed or aborted) before its
/// first collective while `comm` waits to connect: the clique can never
/// connect (NCCL would wait for it for ever).
pub(super) fn stranded(ns: &super::NcclState, comm: u64) -> Option<usize> {
    let c = ns.comms.get(&comm)?;
    let q = ns.cliques.get(&c.clique)?;
    if q.connected() {
        return None;
    }
    q.ranks.iter().zip(&q.used).position(|(h, used)| *h == Some(0) && !*used)
}

/// Waits (the simulator's lock released) until none of the blocking
/// communicators `comms` is [`connecting`]. Fails when one of them failed,
/// was destroyed or aborted meanwhile (`ncclInvalidUsage`), or its clique
/// lost a rank before that rank's first collective (`ncclRemoteError`);
/// after [`super::PEER_TIMEOUT`], `ncclSystemError` naming `what`. A
/// failure is kept as the error of each communicator still there, so their
/// later calls fail at once, as on a communicator whose connection failed.
fn wait_connected(comms: &[u64], what: &str) -> ncclResult_t {
    if comms.is_empty() {
        return OK;
    }
    let r = wait_for(
        |st| {
            if let Some(c) = comms.iter().filter_map(|h| st.nccl.comms.get(h)).find(|c| c.error != OK) {
                return Some(c.error);
            }
            if comms.iter().any(|h| !st.nccl.comms.contains_key(h)) {
                return Some(fail(
                    ncclResult_t::ncclInvalidUsage,
                    &format!("{what}: the communicator was destroyed or aborted while it waited"),
                ));
            }
            if let Some(r) = comms.iter().find_map(|h| stranded(&st.nccl, *h)) {
                return Some(fail(
                    ncclResult_t::ncclRemoteError,
                    &format!(
                        "{what}: rank {r} left before its first collective, so the ranks can never connect"
                    ),
                ));
            }
            (!comms.iter().any(|h| connecting(&st.nccl, *h))).then_some(OK)
        },
        what,
    );
    if r != OK
        && let Ok(mut st) = enter()
    {
        let text = super::last_error_text();
        for h in comms {
            if let Some(c) = st.nccl.comms.get_mut(h)
                && c.error == OK
            {
                c.error = r;
                c.error_text.clone_from(&text);
            }
        }
    }
    r
}

/// Draws the instances of `items` of communicator `comm` (the next
/// collective, send or receive of each), queues them as one part on stream
/// `sid` after `waits`, and aligns the times of the instances it completes;
/// returns the operation.
pub(super) fn enqueue_part(
    st: &mut State,
    comm: u64,
    sid: u64,
    mut items: Vec<Item>,
    waits: Waits,
) -> Result<u64, ncclResult_t> {
    let Some(c) = st.nccl.comms.get(&comm) else {
        return Err(fail(ncclResult_t::ncclInvalidArgument, "the communicator was destroyed"));
    };
    let (rank, nranks, device) = (c.rank, c.nranks, c.device);
    let mut ids = st.nccl.next;
    for it in &mut items {
        it.instance = coll::instance_for(&mut st.nccl, comm, it.call, &mut ids).unwrap_or(0);
    }
    st.nccl.next = ids;
    let duration = coll::part_ns(&items, nranks);
    let part = Arc::new(Part { comm, rank, nranks, device, items, duration });
    let op = stream::enqueue(st, sid, Work::Nccl(part.clone()), waits).map_err(|e| {
        fail(ncclResult_t::ncclUnhandledCudaError, &format!("queuing on the stream failed: {e:?}"))
    })?;
    for (idx, it) in part.items.iter().enumerate() {
        let complete = match st.nccl.instances.get_mut(&it.instance) {
            Some(inst) => {
                inst.members.push((op, idx));
                inst.members.len() == inst.expected
            }
            None => false,
        };
        if complete {
            coll::align_times(st, it.instance);
        }
    }
    Ok(op)
}

/// Checks one operation's arguments and issues it (or keeps it for the
/// group's end).
#[allow(clippy::too_many_arguments)]
fn operation(
    call: Call,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    let what = call.name();
    let mut guard = match enter() {
        Ok(g) => g,
        Err(code) => return code,
    };
    let st = &mut *guard;
    let c = comm_id(comm);
    let Some(x) = st.nccl.comms.get(&c) else {
        return fail(ncclResult_t::ncclInvalidArgument, &format!("{what}: not a communicator"));
    };
    let (rank, nranks, device, session) = (x.rank, x.nranks, x.device, x.session);
    if x.error != OK {
        return fail(x.error, &format!("{what}: the communicator has failed: {}", x.error_text));
    }
    if x.finalized || !ready(&st.nccl, c) {
        return fail(
            ncclResult_t::ncclInvalidUsage,
            &format!("{what}: the communicator is not ready (initializing, or finalized)"),
        );
    }
    let Some(es) = reduce::elem_size(ty) else {
        return fail(
            ncclResult_t::ncclInvalidArgument,
            &format!("{what}: element kind {} not supported", ty.0),
        );
    };
    let op_ok = match call {
        Call::AllReduce(op) | Call::Reduce { op, .. } | Call::ReduceScatter(op) => reduce::valid_op(op),
        _ => true,
    };
    let peer_ok = match call {
        Call::Broadcast { root: r }
        | Call::Reduce { root: r, .. }
        | Call::Send { peer: r }
        | Call::Recv { peer: r } => (0..nranks).contains(&r),
        _ => true,
    };
    if !op_ok || !peer_ok {
        return fail(ncclResult_t::ncclInvalidArgument, &format!("{what}: bad operator, root or peer"));
    }
    let caller = Caller { session, thread: std::thread::current().id(), ctx: Some(st.ctx_of(device)) };
    let sid = match stream::resolve(st, &caller, stream) {
        Ok(s) => s,
        Err(_) => return fail(ncclResult_t::ncclInvalidArgument, &format!("{what}: not a stream")),
    };
    let Some(s) = st.streams.get(&sid) else { return ncclResult_t::ncclInternalError };
    if s.device != device {
        return fail(
            ncclResult_t::ncclInvalidArgument,
            &format!("{what}: the stream is on device {}, the communicator on {device}", s.device),
        );
    }
    let count = count as u64;
    let (slen, rlen) = call.lens(rank, nranks, count, es);
    for (addr, len, name) in [(send as u64, slen, "sendbuff"), (recv as u64, rlen, "recvbuff")] {
        if len == 0 {
            continue;
        }
        let ok = st.mem.place(addr, len).is_some_and(|p| match p.kind {
            crate::memory::Kind::Device { device: d, .. } => d == device,
            k => k.device_visible(),
        });
        if !ok {
            return fail(
                ncclResult_t::ncclInvalidArgument,
                &format!("{what}: {name} {addr:#x}+{len} is not memory of device {device}"),
            );
        }
    }
    let item = Item { call, send: send as u64, recv: recv as u64, count, ty, instance: 0 };
    if depth() > 0 {
        with_group(|g| g.ops.push(Pending { comm: c, stream: sid, item }));
        return OK;
    }
    if let Err(code) = queue(st, c, sid, vec![item]) {
        return code;
    }
    // A call alone is its own group: its first collective waits for the
    // clique's other ranks (blocking), or is reported in progress.
    if !connecting(&st.nccl, c) {
        return OK;
    }
    let blocking = st.nccl.comms.get(&c).is_some_and(|x| x.blocking);
    drop(guard);
    if blocking {
        wait_connected(
            &[c],
            &format!("{what}: a blocking communicator's first collective connects every rank"),
        )
    } else {
        ncclResult_t::ncclInProgress
    }
}

unsafe extern "C" fn ncclAllReduce(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    operation(Call::AllReduce(op), send, recv, count, ty, comm, stream)
}

unsafe extern "C" fn ncclBroadcast(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    operation(Call::Broadcast { root }, send, recv, count, ty, comm, stream)
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn ncclReduce(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    op: ncclRedOp_t,
    root: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    operation(Call::Reduce { op, root }, send, recv, count, ty, comm, stream)
}

unsafe extern "C" fn ncclAllGather(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    operation(Call::AllGather, send, recv, count, ty, comm, stream)
}

unsafe extern "C" fn ncclReduceScatter(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    operation(Call::ReduceScatter(op), send, recv, count, ty, comm, stream)
}

unsafe extern "C" fn ncclSend(
    send: *const c_void,
    count: usize,
    ty: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    operation(Call::Send { peer }, send, std::ptr::null_mut(), count, ty, comm, stream)
}

unsafe extern "C" fn ncclRecv(
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    peer: c_int,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> ncclResult_t {
    operation(Call::Recv { peer }, std::ptr::null(), recv, count, ty, comm, stream)
}

/// Fills the group and operation functions of `t`.
pub(super) fn fill(t: &mut Nccl) {
    t.ncclGroupStart = Some(ncclGroupStart);
    t.ncclGroupEnd = Some(ncclGroupEnd);
    t.ncclAllReduce = Some(ncclAllReduce);
    t.ncclBroadcast = Some(ncclBroadcast);
    t.ncclReduce = Some(ncclReduce);
    t.ncclAllGather = Some(ncclAllGather);
    t.ncclReduceScatter = Some(ncclReduceScatter);
    t.ncclSend = Some(ncclSend);
    t.ncclRecv = Some(ncclRecv);
}
