//! The seeded scheduler: runs queued operations when the host waits.
//!
//! An operation is ready when it is at the head of its stream and every
//! operation it depends on has completed. Among ready operations of the
//! synchronizing session, the one with the lowest random priority (drawn at
//! enqueue from its stream's seeded generator) runs next, so one seed gives
//! one order however other tests' threads interleave.
//!
//! This file holds `unsafe` code because it calls host functions and writes
//! pageable copy destinations.
#![allow(unsafe_code)]

use crate::memory::SimMemory;
use crate::ops::{Launch, Loc, Op, Work, fault_code, kernel_param_op};
use crate::oracle::{self, Record, Stamp};
use crate::registry::KernelCall;
use crate::result::{ILLEGAL_ADDRESS, LAUNCH_FAILED, Res, UNKNOWN};
use crate::rng::Rng;
use crate::state::{self, State};
use std::sync::Arc;

/// A host wait that can only progress once another thread issues a
/// collective's missing part: never returned to a program (the entry
/// point's door waits for the part with the lock released and tries
/// again, `crate::entry::api`).
pub(crate) const PEER_PENDING: cuda_sys::CUresult = cuda_sys::CUresult(0x7fff_5eed);

/// What a host wait returns when collectives wait for each other
/// (`crate::nccl`'s deadlock): the wait would never end on a GPU.
pub(crate) const DEADLOCK: cuda_sys::CUresult = cuda_sys::CUresult::CUDA_ERROR_LAUNCH_TIMEOUT;

/// Runs operations (of `session` first) until `done` holds.
///
/// # Errors
/// [`PEER_PENDING`] when only a collective whose part another thread has
/// not issued yet could progress; [`DEADLOCK`] (reported to the session
/// and the communicators) when collectives wait for each other;
/// `CUDA_ERROR_UNKNOWN` if nothing is ready otherwise (cannot happen:
/// dependencies always point to earlier operations).
pub(crate) fn run_until(st: &mut State, session: u64, mut done: impl FnMut(&State) -> bool) -> Res {
    while !done(st) {
        let Some(op) = pick(st, session, true) else {
            return Err(stalled(st, session));
        };
        execute(st, op);
    }
    Ok(())
}

/// Why nothing is ready, as a host wait's error (reporting a deadlock).
fn stalled(st: &mut State, session: u64) -> cuda_sys::CUresult {
    match crate::nccl::stall(st) {
        Some(crate::nccl::Stall::Peer) => PEER_PENDING,
        Some(crate::nccl::Stall::Deadlock(what, comms)) => {
            crate::nccl::report_deadlock(st, session, &what, &comms);
            DEADLOCK
        }
        None => {
            log::error!("cuda-sim: scheduler found no ready operation (internal error)");
            UNKNOWN
        }
    }
}

/// Runs every ready operation (of `session` first, then any), then reports
/// a deadlock if collectives are left waiting for each other.
pub(crate) fn run_ready(st: &mut State, session: u64) {
    while let Some(op) = pick(st, session, true) {
        execute(st, op);
    }
    if !st.ops.is_empty() {
        let _ = stalled(st, session);
    }
}

/// Runs up to `n` ready operations of `session`.
pub(crate) fn run_some(st: &mut State, session: u64, n: u64) {
    for _ in 0..n {
        match pick(st, session, false) {
            Some(op) => execute(st, op),
            None => break,
        }
    }
}

/// Whether operation `id` has completed.
pub(crate) fn complete(st: &State, id: u64) -> bool {
    !st.ops.contains_key(&id)
}

fn best<'a>(st: &State, ids: impl Iterator<Item = &'a u64>) -> Option<u64> {
    let mut best: Option<(u64, u64)> = None;
    for sid in ids {
        let Some(head) = st.streams.get(sid).and_then(|s| s.queue.front()) else { continue };
        let Some(op) = st.ops.get(head) else { continue };
        if op.deps.iter().all(|d| complete(st, *d))
            && best.is_none_or(|b| (op.prio, op.id) < b)
            && (!matches!(op.work, Work::Nccl(_)) || crate::nccl::ready(st, op.id))
        {
            best = Some((op.prio, op.id));
        }
    }
    best.map(|b| b.1)
}

/// The next operation to run: the ready one of `session` with the lowest
/// priority; else (when `fallback`, for work waiting on another session's
/// work) the same over every session.
fn pick(st: &State, session: u64, fallback: bool) -> Option<u64> {
    if let Some(s) = st.sessions.get(&session)
        && let Some(op) = best(st, s.streams.iter())
    {
        return Some(op);
    }
    if fallback { best(st, st.streams.keys()) } else { None }
}

/// Removes operation `id` from the queued work and its stream; returns it
/// and whether its destroyed stream is now drained (the caller removes the
/// stream once the operation has run).
pub(crate) fn take(st: &mut State, id: u64) -> Option<(Op, bool)> {
    let op = st.ops.remove(&id)?;
    let mut drained = false;
    if let Some(s) = st.streams.get_mut(&op.stream) {
        if s.queue.front() == Some(&id) {
            s.queue.pop_front();
        } else {
            s.queue.retain(|&x| x != id);
        }
        drained = s.destroyed && s.queue.is_empty();
    }
    Some((op, drained))
}

/// Executes operation `id` (which must be ready) and retires it.
fn execute(st: &mut State, id: u64) {
    if matches!(st.ops.get(&id).map(|o| &o.work), Some(Work::Nccl(_))) {
        // The collective's whole rendezvous runs at once.
        return crate::nccl::execute(st, id);
    }
    let Some((op, drained)) = take(st, id) else { return };
    run_op(st, &op);
    crate::cupti::on_execute(st, &op, op.start);
    if drained {
        crate::stream::remove(st, op.stream);
    }
}

fn run_op(st: &mut State, op: &Op) {
    // A lost context runs no more work: once its session is poisoned by a
    // sticky error, queued operations retire without touching memory (as
    // the driver aborts a lost context's queues), so no copy lands in host
    // memory after the program was told the context is lost.
    if st.sessions.get(&op.session).is_some_and(|s| s.sticky.is_some()) {
        return;
    }
    let mut rng = Rng::new(op.seed);
    run_work(st, op.session, &op.stamp, &op.work, &mut rng);
}

/// Records the access `rec` to the allocation at `base` (a block, or the
/// tomb of one freed long ago) with the oracle. Returns whether the
/// allocation is still live: a freed one is reported (use after free,
/// unordered free, double free) and its bytes must not be touched.
pub(crate) fn touch(st: &mut State, session: u64, base: u64, rec: Record) -> bool {
    let (reports, live) = match st.mem.block_mut(base) {
        Some(block) => match &block.freed {
            Some(free) => {
                let r = oracle::freed_access(free, &rec, base);
                (vec![(free.stamp.clone(), r)], false)
            }
            None => (oracle::check_and_record(&mut block.history, rec.clone(), base), true),
        },
        None => match st.mem.tomb_free(base) {
            Some(free) => (vec![(free.stamp.clone(), oracle::freed_access(free, &rec, base))], false),
            None => return false,
        },
    };
    let s = st.session_mut(session);
    for (first, r) in reports {
        s.report(&first, &rec.stamp, r);
    }
    live
}

/// A device-side range for the oracle.
fn rec(stamp: &Stamp, start: u64, len: u64, write: bool, op: String) -> Record {
    Record { stamp: stamp.clone(), start, end: start.saturating_add(len), write, free: false, op: op.into() }
}

/// Finds the block (or tomb) for one side of a copy: device-visible memory
/// for a device address, a pinned block for a pinned host address. `None`
/// is memory never mapped: an illegal address.
fn locate(st: &State, addr: u64, len: u64, pinned: bool) -> Option<u64> {
    let p = st.mem.place(addr, len)?;
    let ok =
        if pinned { matches!(p.kind, crate::memory::Kind::Pinned { .. }) } else { p.kind.device_visible() };
    ok.then_some(p.base)
}

fn illegal(st: &mut State, session: u64, what: &str) {
    log::warn!("cuda-sim: illegal address: {what}");
    st.session_mut(session).async_fault(ILLEGAL_ADDRESS);
}

/// Runs one piece of work with `stamp` as its oracle identity.
pub(crate) fn run_work(st: &mut State, session: u64, stamp: &Stamp, work: &Work, rng: &mut Rng) {
    match work {
        // A collective part runs with its rendezvous (`crate::nccl::execute`).
        Work::Marker | Work::EventRecord(_) | Work::Nccl(_) => {}
        Work::HostFn { f, data } => {
            let inside = state::inside();
            // SAFETY: `f` and `data` were passed together to cuLaunchHostFunc;
            // CUDA's contract makes the program keep `data` valid for `f`
            // until it has run. Calls back into the simulator from `f` are
            // refused by `state::enter` (this thread holds the lock).
            unsafe { f(data.0) };
            drop(inside);
        }
        Work::AllocAsync { base } => {
            let Some(size) = st.mem.block(*base).map(|b| b.size) else { return };
            touch(st, session, *base, rec(stamp, *base, size, true, "cuMemAllocAsync".into()));
        }
        Work::FreeAsync { base } => free_now(st, session, stamp, *base, "cuMemFreeAsync"),
        Work::Memset { api, dst, count, elem, value } => {
            let len = count.saturating_mul(u64::from(*elem));
            let Some(base) = locate(st, *dst, len, false) else {
                return illegal(st, session, &format!("{api} destination {dst:#x}+{len}"));
            };
            if !touch(st, session, base, rec(stamp, *dst, len, true, format!("{api} destination"))) {
                // Freed memory: reported to the oracle; nothing is written
                // (no fault, as freed pool memory on a GPU).
                return;
            }
            if st.mem.fill(base, dst - base, *count, *elem, *value).is_err() {
                illegal(st, session, api);
            }
        }
        Work::Copy { api, dst, src, len } => run_copy(st, session, stamp, api, dst, src, *len),
        Work::Kernel(l) => run_kernel(st, session, stamp, l),
        Work::Graph(g) => {
            for i in crate::graph::random_topo_order(g, rng) {
                if let Some(n) = g.nodes.get(i) {
                    run_work(st, session, stamp, &n.work, rng);
                }
            }
        }
    }
}

/// Executes a free of the allocation at `base` (oracle write of the whole
/// block, then quarantine).
pub(crate) fn free_now(st: &mut State, session: u64, stamp: &Stamp, base: u64, api: &str) {
    let Some(b) = st.mem.block(base) else { return };
    let (size, kind, owner) = (b.size, b.kind, b.session);
    let mut free = rec(stamp, base, size, true, api.into());
    free.free = true;
    if !touch(st, session, base, free.clone()) {
        return; // already freed: reported as a double free
    }
    st.mem.retire(base, free);
    if let crate::memory::Kind::Device { device, pooled: true } = kind
        && let Some(p) = st.session_mut(owner).pools.get_mut(&device)
    {
        p.free(size);
    }
}

/// Why one side of a copy stops it.
enum Stop {
    /// Memory never mapped: the illegal address is raised.
    Illegal,
    /// Freed memory: the use is reported; the copy moves no bytes.
    Freed,
}

fn side(
    st: &mut State,
    session: u64,
    stamp: &Stamp,
    loc: &Loc,
    len: u64,
    write: bool,
    what: String,
) -> Result<Option<u64>, Stop> {
    let (addr, pinned) = match loc {
        Loc::Device(a) => (*a, false),
        Loc::Pinned(a, _) => (*a, true),
        Loc::Staged(_) | Loc::Pageable(_) => return Ok(None),
    };
    let Some(base) = locate(st, addr, len, pinned) else {
        illegal(st, session, &format!("{what} {addr:#x}+{len}"));
        return Err(Stop::Illegal);
    };
    if !touch(st, session, base, rec(stamp, addr, len, write, what.clone())) {
        return Err(Stop::Freed);
    }
    Ok(Some(base))
}

fn run_copy(st: &mut State, session: u64, stamp: &Stamp, api: &str, dst: &Loc, src: &Loc, len: u64) {
    let s = side(st, session, stamp, src, len, false, format!("{api} source"));
    if matches!(s, Err(Stop::Illegal)) {
        return;
    }
    // A freed source still lets the destination's use be checked.
    let d = side(st, session, stamp, dst, len, true, format!("{api} destination"));
    let (Ok(s), Ok(d)) = (s, d) else { return };
    let addr = |l: &Loc| match l {
        Loc::Device(a) | Loc::Pinned(a, _) => *a,
        _ => 0,
    };
    let result = match (d, s, dst, src) {
        (Some(_), Some(sb), Loc::Pinned(_, p), Loc::Device(_)) => {
            // SAFETY: `side` found the destination range inside a live
            // (not freed) pinned block, so `p` (the program's pointer to
            // it) is valid for `len` bytes, which the program lent to this
            // copy until it completes (CUDA's contract); the source is a
            // device block, disjoint from it.
            unsafe { st.mem.read_to_raw(sb, addr(src) - sb, p.0.cast::<u8>(), len) }
        }
        (Some(db), Some(sb), _, _) => st.mem.copy(db, addr(dst) - db, sb, addr(src) - sb, len),
        (Some(db), None, _, Loc::Staged(data)) => st.mem.write(db, addr(dst) - db, data),
        (None, Some(sb), Loc::Pageable(p), _) => {
            // SAFETY: a pageable destination is queued only by
            // cuMemcpyDtoHAsync, which checked `p` non-null, holds the lock
            // and blocks until this copy has run; the program guarantees
            // `p` is valid for `len` bytes for the duration of that call,
            // and a pageable pointer is never inside one of our blocks
            // (pinned blocks take the `Loc::Pinned` path).
            unsafe { st.mem.read_to_raw(sb, addr(src) - sb, p.0.cast::<u8>(), len) }
        }
        _ => Err(UNKNOWN),
    };
    if result.is_err() {
        illegal(st, session, api);
    }
}

/// Merges the ranges a kernel touched per (param, kind) so the oracle sees
/// a few ranges, not one per element.
fn coalesce(mut t: Vec<crate::registry::Touched>) -> Vec<crate::registry::Touched> {
    t.sort_by_key(|x| (x.param, x.write, x.addr));
    let mut out: Vec<crate::registry::Touched> = Vec::new();
    for x in t {
        if let Some(last) = out.last_mut()
            && last.param == x.param
            && last.write == x.write
            && x.addr <= last.addr + last.len
        {
            let end = (last.addr + last.len).max(x.addr + x.len);
            last.len = end - last.addr;
            continue;
        }
        out.push(x);
    }
    out
}

fn run_kernel(st: &mut State, session: u64, stamp: &Stamp, l: &Arc<Launch>) {
    // The kernel runs on its stream's device (a graph's, its launch stream's).
    let reach = match st.streams.get(&stamp.actor) {
        Some(s) => crate::peer::Reach::of(st, session, s.device),
        None => crate::peer::Reach::ALL,
    };
    let mut sim = SimMemory { mem: &mut st.mem, reach };
    let mut call = KernelCall {
        spec: &l.spec,
        grid: l.grid,
        block: l.block,
        shared_mem_bytes: l.shared,
        args: l.args.clone(),
        memory: &mut sim,
        touched: Vec::new(),
    };
    let run = l.spec.run;
    // A kernel's CPU version runs with the global lock held by this thread,
    // as a host function does: calls back into the simulator from it are
    // refused by `state::enter` instead of deadlocking on that lock.
    let inside = state::inside();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut call)));
    drop(inside);
    let touched = coalesce(std::mem::take(&mut call.touched));
    drop(call);
    // Every access, to live or freed memory (a freed one is a use after
    // free or an unordered free: reported, never a fault).
    for t in touched {
        let Some(p) = st.mem.place(t.addr, t.len) else { continue };
        let op = kernel_param_op(l.spec.name, t.param, t.write);
        touch(st, session, p.base, rec(stamp, t.addr, t.len, t.write, op));
    }
    match result {
        Ok(Ok(())) => {}
        Ok(Err(fault)) => {
            // Only memory never mapped faults (`SimMemory`).
            log::warn!("cuda-sim: {fault}");
            st.session_mut(session).async_fault(fault_code(&fault));
        }
        Err(_) => {
            log::error!("cuda-sim: kernel {} panicked; reporting CUDA_ERROR_LAUNCH_FAILED", l.spec.name);
            st.session_mut(session).async_fault(LAUNCH_FAILED);
        }
    }
}

/// The end of a host synchronization of `session`: memory pools release
/// what exceeds their threshold, and the session's sticky error, else its
/// pending asynchronous error (cleared), is the result.
pub(crate) fn sync_result(st: &mut State, session: u64) -> Res {
    let s = st.session_mut(session);
    for p in s.pools.values_mut() {
        p.on_sync();
    }
    if let Some(code) = s.sticky {
        return Err(code);
    }
    match s.async_error.take() {
        Some(code) => Err(code),
        None => Ok(()),
    }
}

/// A context synchronization: runs every queued operation on `device` —
/// of every session, as `cuCtxSynchronize` completes all work of the
/// context — and merges them into every session's host clock.
///
/// Every session learns of it because every host thread may: a library
/// such as gpu-sync publishes "all work up to here is complete" to all its
/// threads after one of them synchronized the device, and work any thread
/// submits afterwards really is ordered after the completed work.
pub(crate) fn sync_device(st: &mut State, session: u64, device: i32) -> Res {
    let on_device: Vec<u64> =
        st.streams.iter().filter(|(_, s)| s.device == device).map(|(id, _)| *id).collect();
    let targets: Vec<u64> =
        on_device.iter().filter_map(|id| st.streams.get(id).and_then(|s| s.last_op)).collect();
    // Clocks change only when work is queued, so take them before running
    // (a destroyed stream disappears once drained).
    let (mut clock, mut time) = (crate::clock::VClock::default(), 0);
    for id in &on_device {
        if let Some(s) = st.streams.get(id) {
            clock.merge(&s.clock);
            time = time.max(s.tail_end);
        }
    }
    run_until(st, session, |st| targets.iter().all(|t| complete(st, *t)))?;
    // Destroyed streams that drained unobserved are complete too, those
    // that drained just now included (their drained clocks only grow).
    let (drained, end) = crate::retire::unobserved_on(st, device);
    clock.merge(&drained);
    time = time.max(end);
    let sessions: Vec<u64> = st.sessions.keys().copied().collect();
    for s in sessions {
        crate::retire::host_sync(st, s, &clock, time);
    }
    Ok(())
}
