//! Collectives as simulated device work: each rank's part is an operation
//! on its stream ([`Work::Nccl`]); the parts of one collective (an
//! [`Instance`]) rendezvous — a part is ready only when every part of each
//! of its instances has been reached on its stream — and then all run at
//! once, reading every rank's send buffer and writing every rank's receive
//! buffer with each rank's own stamp, so the race oracle sees each access
//! on its rank's stream at the collective's position.

use super::reduce;
use super::{Comm, NcclState};
use crate::ops::{Declared, Op, Work};
use crate::oracle::{Record, Stamp};
use crate::scheduler::complete;
use crate::state::State;
use cuda_sys::nccl_bindings::{ncclDataType_t, ncclRedOp_t, ncclResult_t};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// One NCCL call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    AllReduce(ncclRedOp_t),
    Broadcast { root: i32 },
    Reduce { op: ncclRedOp_t, root: i32 },
    AllGather,
    ReduceScatter(ncclRedOp_t),
    Send { peer: i32 },
    Recv { peer: i32 },
}

impl Call {
    /// The NCCL function's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Call::AllReduce(_) => "ncclAllReduce",
            Call::Broadcast { .. } => "ncclBroadcast",
            Call::Reduce { .. } => "ncclReduce",
            Call::AllGather => "ncclAllGather",
            Call::ReduceScatter(_) => "ncclReduceScatter",
            Call::Send { .. } => "ncclSend",
            Call::Recv { .. } => "ncclRecv",
        }
    }

    /// Bytes of the send and receive buffers rank `rank` of `n` touches for
    /// `count` elements of `es` bytes.
    pub(crate) fn lens(self, rank: i32, n: i32, count: u64, es: u64) -> (u64, u64) {
        let b = count * es;
        let n = n as u64;
        match self {
            Call::AllReduce(_) => (b, b),
            Call::Broadcast { root } => (if rank == root { b } else { 0 }, b),
            Call::Reduce { root, .. } => (b, if rank == root { b } else { 0 }),
            Call::AllGather => (b, b * n),
            Call::ReduceScatter(_) => (b * n, b),
            Call::Send { .. } => (b, 0),
            Call::Recv { .. } => (0, b),
        }
    }

    /// Bytes one rank moves over its link for `bytes` of payload (`count`
    /// elements) among `n` ranks, as a ring does: all-reduce 2(n−1)/n of
    /// the buffer, all-gather and reduce-scatter (n−1)/n of the whole,
    /// broadcast, reduce and point-to-point the buffer once.
    fn moved(self, n: u64, bytes: u64) -> u64 {
        if n <= 1 && !matches!(self, Call::Send { .. } | Call::Recv { .. }) {
            return 0;
        }
        match self {
            Call::AllReduce(_) => (2 * (n - 1) * bytes).div_ceil(n),
            Call::AllGather | Call::ReduceScatter(_) => (n - 1) * bytes,
            _ => bytes,
        }
    }
}

/// One call of a part: what it does, on which buffers, in which instance.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub(crate) call: Call,
    pub(crate) send: u64,
    pub(crate) recv: u64,
    pub(crate) count: u64,
    pub(crate) ty: ncclDataType_t,
    pub(crate) instance: u64,
}

/// One rank's part of a group (or of one call): queued as one operation.
#[derive(Debug)]
pub(crate) struct Part {
    pub(crate) comm: u64,
    pub(crate) rank: i32,
    pub(crate) nranks: i32,
    pub(crate) device: i32,
    pub(crate) items: Vec<Item>,
    pub(crate) duration: u64,
}

impl Part {
    /// The ranges it will touch: its send buffers read, its receive buffers
    /// written.
    pub(crate) fn declared(&self, mem: &crate::memory::Memory) -> Vec<Declared> {
        let mut v = Vec::new();
        for it in &self.items {
            let es = reduce::elem_size(it.ty).unwrap_or(1);
            let (s, r) = it.call.lens(self.rank, self.nranks, it.count, es);
            for (addr, len, write) in [(it.send, s, false), (it.recv, r, true)] {
                if len == 0 {
                    continue;
                }
                if let Some(base) = mem.containing(addr, len) {
                    let op = access_name(it.call, write).into();
                    v.push(Declared { base, start: addr, end: addr + len, write, free: false, op });
                }
            }
        }
        v
    }
}

fn access_name(call: Call, write: bool) -> String {
    if write {
        format!("{} recvbuff (write)", call.name())
    } else {
        format!("{} sendbuff (read)", call.name())
    }
}

/// What identifies one collective across its ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// The `k`-th collective of each rank of the clique.
    Coll(u64),
    /// The `k`-th send from `from` to `to`, and the `k`-th receive by `to`
    /// from `from`.
    P2p { from: i32, to: i32, k: u64 },
}

/// One collective (or one send/receive pair): its parts as they are issued.
#[derive(Debug)]
pub(crate) struct Instance {
    pub(crate) clique: u64,
    pub(crate) key: Key,
    pub(crate) expected: usize,
    /// Each issued part: its operation and the item's index in its part.
    pub(crate) members: Vec<(u64, usize)>,
    /// A communicator of it was aborted: its parts retire without running.
    pub(crate) broken: bool,
}

/// Which instance `call` of `comm` belongs to (created on its first part).
pub(crate) fn instance_for(ns: &mut NcclState, comm: u64, call: Call, ids: &mut u64) -> Option<u64> {
    let c: &mut Comm = ns.comms.get_mut(&comm)?;
    let (key, expected) = match call {
        Call::Send { peer } => {
            let k = c.sends.entry(peer).or_insert(0);
            *k += 1;
            (Key::P2p { from: c.rank, to: peer, k: *k }, 2)
        }
        Call::Recv { peer } => {
            let k = c.recvs.entry(peer).or_insert(0);
            *k += 1;
            (Key::P2p { from: peer, to: c.rank, k: *k }, 2)
        }
        _ => {
            c.colls += 1;
            (Key::Coll(c.colls), c.nranks as usize)
        }
    };
    let clique = c.clique;
    if let Some(&id) = ns.keys.get(&(clique, key)) {
        return Some(id);
    }
    *ids += 1;
    let id = *ids;
    ns.keys.insert((clique, key), id);
    ns.instances.insert(id, Instance { clique, key, expected, members: Vec::new(), broken: false });
    Some(id)
}

/// Duration of a part of `items` among `n` ranks: the bytes each moves at
/// the peer link's rate ([`crate::model::peer_ns`]); on one rank, a copy
/// in device memory.
pub(crate) fn part_ns(items: &[Item], n: i32) -> u64 {
    let mut total = 0u64;
    for it in items {
        let es = reduce::elem_size(it.ty).unwrap_or(1);
        // The payload each rank contributes: one shard for all-gather and
        // reduce-scatter (the call's count), the buffer otherwise.
        let bytes = it.count * es;
        let moved = it.call.moved(n as u64, bytes);
        total += if moved == 0 { crate::model::memory_ns(2 * bytes) } else { crate::model::peer_ns(moved) };
    }
    total
}

/// The name of the kernel NCCL would launch for `p`: its first call's
/// collective (`ncclDevKernel_AllReduce`), `ncclDevKernel_SendRecv` for
/// point-to-point parts.
pub(crate) fn kernel_name(p: &Part) -> &'static str {
    match p.items.first().map(|it| it.call) {
        Some(Call::AllReduce(_)) => "ncclDevKernel_AllReduce",
        Some(Call::Broadcast { .. }) => "ncclDevKernel_Broadcast",
        Some(Call::Reduce { .. }) => "ncclDevKernel_Reduce",
        Some(Call::AllGather) => "ncclDevKernel_AllGather",
        Some(Call::ReduceScatter(_)) => "ncclDevKernel_ReduceScatter",
        Some(Call::Send { .. } | Call::Recv { .. }) | None => "ncclDevKernel_SendRecv",
    }
}

/// The part of operation `id`, if it is one.
fn part_of(st: &State, id: u64) -> Option<&Arc<Part>> {
    match &st.ops.get(&id)?.work {
        Work::Nccl(p) => Some(p),
        _ => None,
    }
}

/// Whether operation `id` is reached: at the head of its stream with every
/// dependency complete.
fn reached(st: &State, id: u64) -> bool {
    let Some(op) = st.ops.get(&id) else { return false };
    st.streams.get(&op.stream).and_then(|s| s.queue.front()) == Some(&id)
        && op.deps.iter().all(|d| complete(st, *d))
}

/// The operations and instances linked to part `id` through unbroken
/// instances (its rendezvous).
fn closure(st: &State, id: u64) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let (mut ops, mut insts) = (BTreeSet::from([id]), BTreeSet::new());
    let mut todo = vec![id];
    while let Some(op) = todo.pop() {
        let Some(p) = part_of(st, op) else { continue };
        for it in &p.items {
            let Some(inst) = st.nccl.instances.get(&it.instance).filter(|i| !i.broken) else { continue };
            if insts.insert(it.instance) {
                for &(m, _) in &inst.members {
                    if ops.insert(m) {
                        todo.push(m);
                    }
                }
            }
        }
    }
    (ops, insts)
}

/// Whether part `id` (reached) may run: every part of its rendezvous is
/// issued and reached.
pub(crate) fn ready(st: &State, id: u64) -> bool {
    let (ops, insts) = closure(st, id);
    insts.iter().all(|i| st.nccl.instances.get(i).is_some_and(|x| x.members.len() == x.expected))
        && ops.iter().all(|o| reached(st, *o))
}

/// Fixes the simulated times of a complete instance's parts: none ends
/// before the last one starts plus its own duration (a rendezvous).
pub(crate) fn align_times(st: &mut State, inst: u64) {
    let Some(i) = st.nccl.instances.get(&inst) else { return };
    let members: Vec<u64> = i.members.iter().map(|m| m.0).collect();
    let start = members.iter().filter_map(|m| st.ops.get(m)).map(|o| o.start).max().unwrap_or(0);
    for m in members {
        let Some(o) = st.ops.get_mut(&m) else { continue };
        if o.start < start {
            let dur = o.end - o.start;
            o.start = start;
            o.end = start + dur;
            let (sid, end) = (o.stream, o.end);
            if let Some(s) = st.streams.get_mut(&sid).filter(|s| s.last_op == Some(m)) {
                s.tail_end = s.tail_end.max(end);
            }
        }
    }
}

/// Runs part `id`'s whole rendezvous (which [`ready`] allowed): retires
/// every part from its stream, then computes each instance.
pub(crate) fn execute(st: &mut State, id: u64) {
    let (ops, insts) = closure(st, id);
    let mut taken: HashMap<u64, Op> = HashMap::new();
    let mut drained = Vec::new();
    for o in &ops {
        if let Some((op, d)) = crate::scheduler::take(st, *o) {
            if d {
                drained.push(op.stream);
            }
            taken.insert(*o, op);
        }
    }
    // Each part that runs is one kernel to CUPTI (one per group and rank,
    // as NCCL launches them); a part whose instances were all broken
    // retires without running.
    for o in &ops {
        if let Some(op) = taken.get(o)
            && let Work::Nccl(p) = &op.work
            && p.items.iter().any(|it| insts.contains(&it.instance))
        {
            crate::cupti::on_execute(st, op, op.start);
        }
    }
    for i in insts {
        if let Some(inst) = st.nccl.instances.remove(&i) {
            st.nccl.keys.remove(&(inst.clique, inst.key));
            run_instance(st, &inst, &taken);
        }
    }
    // Parts whose instances were all broken (an abort) retire here too.
    for o in &ops {
        if let Some(p) = taken.get(o).and_then(|op| match &op.work {
            Work::Nccl(p) => Some(p.clone()),
            _ => None,
        }) {
            for it in &p.items {
                if st.nccl.instances.get(&it.instance).is_some_and(|x| x.broken) {
                    forget_member(st, it.instance, *o);
                }
            }
        }
    }
    for sid in drained {
        crate::stream::remove(st, sid);
    }
}

/// Drops operation `op` from a broken instance; the instance goes once
/// every issued part has retired.
fn forget_member(st: &mut State, inst: u64, op: u64) {
    let Some(i) = st.nccl.instances.get_mut(&inst) else { return };
    i.members.retain(|m| m.0 != op);
    if i.members.is_empty() {
        let key = (i.clique, i.key);
        st.nccl.instances.remove(&inst);
        st.nccl.keys.remove(&key);
    }
}

/// One member of a running instance.
struct Member<'a> {
    op: &'a Op,
    part: &'a Part,
    item: &'a Item,
}

fn read(st: &mut State, m: &Member<'_>, addr: u64, len: u64) -> Vec<u8> {
    let mut out = vec![crate::memory::POISON; len as usize];
    if len == 0 {
        return out;
    }
    let Some(p) = st.mem.place(addr, len) else { return out };
    let rec = record(&m.op.stamp, addr, len, false, m.item.call);
    if crate::scheduler::touch(st, m.op.session, p.base, rec) {
        let _ = st.mem.read(p.base, addr - p.base, &mut out);
    }
    out
}

fn write(st: &mut State, m: &Member<'_>, addr: u64, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let len = data.len() as u64;
    let Some(p) = st.mem.place(addr, len) else { return };
    let rec = record(&m.op.stamp, addr, len, true, m.item.call);
    if crate::scheduler::touch(st, m.op.session, p.base, rec) {
        let _ = st.mem.write(p.base, addr - p.base, data);
    }
}

fn record(stamp: &Stamp, start: u64, len: u64, write: bool, call: Call) -> Record {
    Record {
        stamp: stamp.clone(),
        start,
        end: start + len,
        write,
        free: false,
        op: access_name(call, write).into(),
    }
}

/// Computes one instance: reads every member's send buffer, then writes
/// every member's receive buffer. A mismatch between the ranks' calls
/// (kind, count, element kind, operator, root) runs nothing and sets
/// `ncclInvalidUsage` on their communicators.
fn run_instance(st: &mut State, inst: &Instance, taken: &HashMap<u64, Op>) {
    let mut members: Vec<Member<'_>> = Vec::new();
    for &(op, idx) in &inst.members {
        let Some(o) = taken.get(&op) else { continue };
        let Work::Nccl(p) = &o.work else { continue };
        let Some(item) = p.items.get(idx) else { continue };
        members.push(Member { op: o, part: p, item });
    }
    if members.len() != inst.expected
        || members.iter().any(|m| st.sessions.get(&m.op.session).is_some_and(|s| s.sticky.is_some()))
    {
        return;
    }
    let Some(es) = reduce::elem_size(members[0].item.ty) else { return };
    let first = members[0].item;
    let consistent = match first.call {
        Call::Send { .. } | Call::Recv { .. } => {
            members.iter().all(|m| m.item.count == first.count && m.item.ty == first.ty)
        }
        _ => members
            .iter()
            .all(|m| m.item.call == first.call && m.item.count == first.count && m.item.ty == first.ty),
    };
    if !consistent {
        let comms: Vec<u64> = members.iter().map(|m| m.part.comm).collect();
        let what =
            format!("the ranks' {} calls differ (kind, count, type, operator or root)", first.call.name());
        super::fail_comms(st, &comms, ncclResult_t::ncclInvalidUsage, &what);
        return;
    }
    members.sort_by_key(|m| (m.part.rank, matches!(m.item.call, Call::Recv { .. })));
    let n = members.len();
    let count = first.count;
    let b = count * es;
    match first.call {
        Call::Send { .. } | Call::Recv { .. } => {
            let (Some(s), Some(r)) = (
                members.iter().find(|m| matches!(m.item.call, Call::Send { .. })),
                members.iter().find(|m| matches!(m.item.call, Call::Recv { .. })),
            ) else {
                return;
            };
            let data = read(st, s, s.item.send, b);
            write(st, r, r.item.recv, &data);
        }
        Call::Broadcast { root } => {
            let Some(r) = members.iter().find(|m| m.part.rank == root) else { return };
            let data = read(st, r, r.item.send, b);
            for m in &members {
                write(st, m, m.item.recv, &data);
            }
        }
        Call::AllGather => {
            let mut all = Vec::with_capacity((b as usize) * n);
            for m in &members {
                all.extend(read(st, m, m.item.send, b));
            }
            for m in &members {
                write(st, m, m.item.recv, &all);
            }
        }
        Call::AllReduce(op) | Call::Reduce { op, .. } | Call::ReduceScatter(op) => {
            let per = if matches!(first.call, Call::ReduceScatter(_)) { b * n as u64 } else { b };
            let inputs: Vec<Vec<u8>> = members.iter().map(|m| read(st, m, m.item.send, per)).collect();
            let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
            let out = reduce::reduce(first.ty, op, &refs, (per / es) as usize);
            for m in &members {
                match first.call {
                    Call::Reduce { root, .. } if m.part.rank != root => {}
                    Call::ReduceScatter(_) => {
                        let at = (m.part.rank as usize) * b as usize;
                        write(st, m, m.item.recv, &out[at..at + b as usize]);
                    }
                    _ => write(st, m, m.item.recv, &out),
                }
            }
        }
    }
}

/// Why nothing can run while collective parts wait.
#[derive(Debug)]
pub(crate) enum Stall {
    /// A part waits for a rank that has not issued its part yet: the host
    /// waits for that rank's thread.
    Peer,
    /// Every part is issued and none can be reached: a deadlock, described.
    Deadlock(String, Vec<u64>),
}

/// Classifies a machine where no operation is ready: `None` when no
/// collective part waits (the scheduler's internal error).
pub(crate) fn stall(st: &State) -> Option<Stall> {
    let heads: Vec<u64> = st
        .streams
        .values()
        .filter_map(|s| s.queue.front().copied())
        .filter(|h| part_of(st, *h).is_some() && reached(st, *h))
        .collect();
    if heads.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    let mut comms = Vec::new();
    for h in &heads {
        let (ops, insts) = closure(st, *h);
        if insts.iter().any(|i| st.nccl.instances.get(i).is_some_and(|x| x.members.len() < x.expected)) {
            return Some(Stall::Peer);
        }
        let Some(p) = part_of(st, *h) else { continue };
        comms.extend(ops.iter().filter_map(|o| part_of(st, *o)).map(|q| q.comm));
        let names: Vec<&str> = p.items.iter().map(|i| i.call.name()).collect();
        let stream = st.ops.get(h).and_then(|o| st.streams.get(&o.stream)).map(|s| s.label());
        let blocked: Vec<String> = ops
            .iter()
            .filter(|o| !reached(st, **o))
            .filter_map(|o| st.ops.get(o))
            .map(|o| {
                let on = st.streams.get(&o.stream);
                let ahead = on.and_then(|s| s.queue.front()).and_then(|f| part_of(st, *f));
                format!(
                    "device {}'s part on {:?} is queued behind {}",
                    on.map_or(-1, |s| s.device),
                    on.map(|s| s.label()),
                    ahead.map_or("other work".to_owned(), |a| format!(
                        "rank {} of communicator {:#x}'s {}",
                        a.rank,
                        a.comm,
                        a.items.first().map_or("", |i| i.call.name())
                    ))
                )
            })
            .collect();
        lines.push(format!(
            "rank {} of communicator {:#x} ({} on device {}, {:?}) waits for its peers: {}",
            p.rank,
            p.comm,
            names.join("+"),
            p.device,
            stream,
            blocked.join("; ")
        ));
    }
    Some(Stall::Deadlock(
        format!(
            "NCCL deadlock: collectives issued in different orders on different devices (each waits for a part \
             queued behind the other): {}",
            lines.join(" | ")
        ),
        comms,
    ))
}
