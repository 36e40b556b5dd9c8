//! Communicators: unique ids, init (all at once, by rank, by split),
//! finalize, destroy, abort, and the asynchronous state.

use super::{Clique, Comm, NcclState, Split, comm_handle, comm_id, enter, fail, fail_comms, issue, wait_for};
use crate::state::State;
use cuda_sys::nccl::Nccl;
use cuda_sys::nccl_bindings::{NCCL_SPLIT_NOCOLOR, ncclComm_t, ncclConfig_t, ncclResult_t, ncclUniqueId};
use std::collections::HashMap;
use std::ffi::c_int;

const OK: ncclResult_t = ncclResult_t::ncclSuccess;

/// Whether a configuration asks for a blocking communicator (the default:
/// no configuration, or `blocking` left undefined or non-zero).
///
/// # Safety
/// `config` is null or valid for reads.
unsafe fn blocking(config: *const ncclConfig_t) -> bool {
    // SAFETY: the caller's promise.
    unsafe { config.as_ref() }.is_none_or(|c| c.blocking != 0)
}

fn new_comm(st: &mut State, clique: u64, rank: i32, nranks: i32, device: i32, blocking: bool) -> u64 {
    let h = st.new_handle();
    let session = crate::session::current();
    st.nccl.comms.insert(
        h,
        Comm {
            clique,
            rank,
            nranks,
            device,
            session,
            blocking,
            finalized: false,
            error: OK,
            error_text: String::new(),
            colls: 0,
            sends: HashMap::new(),
            recvs: HashMap::new(),
            splits: 0,
        },
    );
    h
}

/// Whether communicator `c`'s clique has every rank.
pub(crate) fn ready(ns: &NcclState, c: u64) -> bool {
    ns.comms.get(&c).and_then(|c| ns.cliques.get(&c.clique)).is_some_and(Clique::complete)
}

fn next_id(ns: &mut NcclState) -> u64 {
    ns.next += 1;
    ns.next
}

unsafe extern "C" fn ncclGetUniqueId(id: *mut ncclUniqueId) -> ncclResult_t {
    if id.is_null() {
        return fail(ncclResult_t::ncclInvalidArgument, "ncclGetUniqueId: null pointer");
    }
    let n = match enter() {
        Ok(mut st) => next_id(&mut st.nccl),
        Err(code) => return code,
    };
    let mut u = ncclUniqueId::default();
    let tag = format!("cuda-sim nccl id {n} pid {}", std::process::id());
    for (d, s) in u.internal.iter_mut().zip(tag.bytes()) {
        *d = s as std::ffi::c_char;
    }
    // SAFETY: non-null out-pointer from the caller.
    unsafe { *id = u };
    OK
}

/// Waits until communicator `h` is complete (a blocking init or split
/// outside a group).
fn wait_ready(h: u64, what: &str) -> ncclResult_t {
    wait_for(
        |st| match st.nccl.comms.get(&h) {
            None => Some(fail(ncclResult_t::ncclInvalidUsage, &format!("{what}: communicator destroyed"))),
            Some(c) if c.error != OK => Some(c.error),
            Some(_) => ready(&st.nccl, h).then_some(OK),
        },
        what,
    )
}

/// How an init or split that made `h` returns: in a group `ncclSuccess`
/// (the group's end finishes it); blocking, once every rank joined;
/// non-blocking, `ncclInProgress`.
fn finish_join(h: u64, blocking: bool, what: &str) -> ncclResult_t {
    if issue::depth() > 0 {
        issue::note_join(h, blocking);
        OK
    } else if blocking {
        wait_ready(h, what)
    } else {
        ncclResult_t::ncclInProgress
    }
}

unsafe extern "C" fn ncclCommInitRankConfig(
    comm: *mut ncclComm_t,
    nranks: c_int,
    id: ncclUniqueId,
    rank: c_int,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    const WHAT: &str = "ncclCommInitRankConfig";
    if comm.is_null() {
        return fail(ncclResult_t::ncclInvalidArgument, "ncclCommInitRankConfig: null comm pointer");
    }
    if nranks < 1 || rank < 0 || rank >= nranks {
        return fail(ncclResult_t::ncclInvalidArgument, &format!("{WHAT}: rank {rank} of {nranks}"));
    }
    // SAFETY: `config` is null or the caller's configuration.
    let blocking = unsafe { blocking(config) };
    let h = {
        let mut guard = match enter() {
            Ok(g) => g,
            Err(code) => return code,
        };
        let st = &mut *guard;
        let caller_ctx = crate::state::current_ctx();
        let Some(device) = caller_ctx.and_then(|c| st.ctx_device(c)) else {
            return fail(
                ncclResult_t::ncclUnhandledCudaError,
                &format!("{WHAT}: no CUDA context is current"),
            );
        };
        let key: Vec<u8> = id.internal.iter().map(|c| *c as u8).collect();
        let clique = match st.nccl.by_id.get(&key) {
            Some(&c) => c,
            None => {
                let c = next_id(&mut st.nccl);
                st.nccl.cliques.insert(c, Clique::new(vec![None; nranks as usize]));
                st.nccl.by_id.insert(key.clone(), c);
                c
            }
        };
        let Some(cl) = st.nccl.cliques.get(&clique) else { return ncclResult_t::ncclInternalError };
        if cl.ranks.len() != nranks as usize {
            return fail(
                ncclResult_t::ncclInvalidArgument,
                &format!("{WHAT}: {nranks} ranks, but the id's communicator has {}", cl.ranks.len()),
            );
        }
        if cl.ranks[rank as usize].is_some() {
            return fail(ncclResult_t::ncclInvalidUsage, &format!("{WHAT}: rank {rank} joined twice"));
        }
        let h = new_comm(st, clique, rank, nranks, device, blocking);
        if let Some(cl) = st.nccl.cliques.get_mut(&clique) {
            cl.ranks[rank as usize] = Some(h);
            if cl.complete() {
                st.nccl.by_id.remove(&key);
            }
        }
        h
    };
    // SAFETY: non-null out-pointer from the caller; written before any
    // wait, as NCCL does for a non-blocking communicator.
    unsafe { *comm = comm_handle(h) };
    finish_join(h, blocking, WHAT)
}

unsafe extern "C" fn ncclCommInitAll(
    comms: *mut ncclComm_t,
    ndev: c_int,
    devlist: *const c_int,
) -> ncclResult_t {
    if comms.is_null() || ndev < 1 {
        return fail(ncclResult_t::ncclInvalidArgument, "ncclCommInitAll: null comms or no device");
    }
    let mut guard = match enter() {
        Ok(g) => g,
        Err(code) => return code,
    };
    let st = &mut *guard;
    st.init_devices();
    let devices: Vec<i32> = if devlist.is_null() {
        (0..ndev).collect()
    } else {
        // SAFETY: `devlist` holds `ndev` ints (NCCL's contract).
        unsafe { std::slice::from_raw_parts(devlist, ndev as usize) }.to_vec()
    };
    if let Some(bad) = devices.iter().find(|d| st.device(**d).is_err()) {
        return fail(ncclResult_t::ncclInvalidArgument, &format!("ncclCommInitAll: no device {bad}"));
    }
    let clique = next_id(&mut st.nccl);
    let mut ranks = Vec::new();
    for (r, d) in devices.iter().enumerate() {
        let h = new_comm(st, clique, r as i32, ndev, *d, true);
        ranks.push(Some(h));
        // SAFETY: `comms` has room for `ndev` handles (NCCL's contract).
        unsafe { *comms.add(r) = comm_handle(h) };
    }
    st.nccl.cliques.insert(clique, Clique::new(ranks));
    OK
}

/// Forms the communicators of a split every parent rank has called.
fn form_split(st: &mut State, calls: Vec<Option<(i32, i32, u64)>>) {
    let mut colors: HashMap<i32, Vec<(i32, usize, u64)>> = HashMap::new();
    for (parent_rank, c) in calls.into_iter().enumerate() {
        if let Some((color, key, h)) = c
            && color != NCCL_SPLIT_NOCOLOR
        {
            colors.entry(color).or_default().push((key, parent_rank, h));
        }
    }
    for (_, mut members) in colors {
        members.sort_unstable();
        let clique = next_id(&mut st.nccl);
        let n = members.len() as i32;
        for (r, (_, _, h)) in members.iter().enumerate() {
            if let Some(c) = st.nccl.comms.get_mut(h) {
                c.clique = clique;
                c.rank = r as i32;
                c.nranks = n;
            }
        }
        st.nccl.cliques.insert(clique, Clique::new(members.iter().map(|m| Some(m.2)).collect()));
    }
}

unsafe extern "C" fn ncclCommSplit(
    comm: ncclComm_t,
    color: c_int,
    key: c_int,
    newcomm: *mut ncclComm_t,
    config: *mut ncclConfig_t,
) -> ncclResult_t {
    const WHAT: &str = "ncclCommSplit";
    if newcomm.is_null() {
        return fail(ncclResult_t::ncclInvalidArgument, "ncclCommSplit: null newcomm pointer");
    }
    // SAFETY: `config` is null or the caller's configuration.
    let mut blocking = unsafe { blocking(config) };
    let h = {
        let mut guard = match enter() {
            Ok(g) => g,
            Err(code) => return code,
        };
        let st = &mut *guard;
        let parent = comm_id(comm);
        if !ready(&st.nccl, parent) {
            return fail(ncclResult_t::ncclInvalidArgument, &format!("{WHAT}: not a ready communicator"));
        }
        let Some(p) = st.nccl.comms.get_mut(&parent) else { return ncclResult_t::ncclInternalError };
        if config.is_null() {
            blocking = p.blocking;
        }
        p.splits += 1;
        let (clique, k, rank, nranks, device) = (p.clique, p.splits, p.rank, p.nranks, p.device);
        let h = if color == NCCL_SPLIT_NOCOLOR { 0 } else { new_comm(st, 0, 0, 0, device, blocking) };
        let split = st.nccl.splits.entry((clique, k)).or_insert_with(Split::default);
        if split.calls.is_empty() {
            split.calls = vec![None; nranks as usize];
        }
        split.calls[rank as usize] = Some((color, key, h));
        if split.calls.iter().all(Option::is_some)
            && let Some(done) = st.nccl.splits.remove(&(clique, k))
        {
            form_split(st, done.calls);
        }
        if h != 0 && !blocking {
            // Owed: written when the parent next reports its state.
            st.nccl.owed.push((parent, newcomm as usize, h));
        }
        h
    };
    if h == 0 || blocking {
        // SAFETY: non-null out-pointer from the caller, written during the
        // call (a blocking split has ended when it returns).
        unsafe { *newcomm = if h == 0 { std::ptr::null_mut() } else { comm_handle(h) } };
    }
    if h == 0 { OK } else { finish_join(h, blocking, WHAT) }
}

/// Looks up a live communicator.
fn with_comm<T>(
    comm: ncclComm_t,
    what: &str,
    f: impl FnOnce(&mut State, u64) -> T,
) -> Result<T, ncclResult_t> {
    let mut st = enter()?;
    let id = comm_id(comm);
    if !st.nccl.comms.contains_key(&id) {
        return Err(fail(ncclResult_t::ncclInvalidArgument, &format!("{what}: not a communicator")));
    }
    Ok(f(&mut st, id))
}

/// Whether communicator `c` has parts not yet run.
fn pending_parts(st: &State, c: u64) -> bool {
    st.ops.values().any(|o| matches!(&o.work, crate::ops::Work::Nccl(p) if p.comm == c))
}

unsafe extern "C" fn ncclCommFinalize(comm: ncclComm_t) -> ncclResult_t {
    let r = with_comm(comm, "ncclCommFinalize", |st, c| {
        let Some(x) = st.nccl.comms.get_mut(&c) else { return ncclResult_t::ncclInternalError };
        x.finalized = true;
        if x.blocking { OK } else { ncclResult_t::ncclInProgress }
    });
    r.unwrap_or_else(|e| e)
}

/// Removes communicator `c` (destroy or abort): its rank leaves its
/// clique's table of handles.
fn remove(st: &mut State, c: u64) {
    // A split it still owed a handle for ended with it: nothing is written.
    st.nccl.owed.retain(|o| o.0 != c);
    if let Some(x) = st.nccl.comms.remove(&c)
        && let Some(cl) = st.nccl.cliques.get_mut(&x.clique)
    {
        for r in cl.ranks.iter_mut() {
            if *r == Some(c) {
                *r = Some(0);
            }
        }
        if cl.ranks.iter().all(|r| *r == Some(0)) {
            st.nccl.cliques.remove(&x.clique);
        }
    }
}

unsafe extern "C" fn ncclCommDestroy(comm: ncclComm_t) -> ncclResult_t {
    // Queued parts keep what they need: they still run.
    with_comm(comm, "ncclCommDestroy", |st, c| {
        remove(st, c);
        OK
    })
    .unwrap_or_else(|e| e)
}

unsafe extern "C" fn ncclCommAbort(comm: ncclComm_t) -> ncclResult_t {
    with_comm(comm, "ncclCommAbort", |st, c| {
        // Every unfinished collective of this communicator is cancelled on
        // every rank; the other ranks hear of it.
        let mut others = Vec::new();
        let ids: Vec<u64> = st
            .ops
            .values()
            .filter_map(|o| match &o.work {
                crate::ops::Work::Nccl(p) if p.comm == c => Some(p.items.iter().map(|i| i.instance)),
                _ => None,
            })
            .flatten()
            .collect();
        for i in ids {
            let Some(inst) = st.nccl.instances.get_mut(&i) else { continue };
            inst.broken = true;
            let members: Vec<u64> = inst.members.iter().map(|m| m.0).collect();
            for m in members {
                if let Some(crate::ops::Work::Nccl(p)) = st.ops.get(&m).map(|o| &o.work)
                    && p.comm != c
                {
                    others.push(p.comm);
                }
            }
        }
        remove(st, c);
        fail_comms(st, &others, ncclResult_t::ncclRemoteError, "a peer's communicator was aborted");
        OK
    })
    .unwrap_or_else(|e| e)
}

unsafe extern "C" fn ncclCommGetAsyncError(comm: ncclComm_t, out: *mut ncclResult_t) -> ncclResult_t {
    if out.is_null() {
        return fail(ncclResult_t::ncclInvalidArgument, "ncclCommGetAsyncError: null pointer");
    }
    let r = with_comm(comm, "ncclCommGetAsyncError", |st, c| {
        // The handles this communicator's non-blocking splits owe: their
        // jobs end now, before it reports its state.
        let (owed, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut st.nccl.owed).into_iter().partition(|o| o.0 == c);
        st.nccl.owed = rest;
        for (_, out, h) in owed {
            // SAFETY: the `newcomm` pointer the caller gave `ncclCommSplit`
            // on this parent; NCCL's contract lets it be written until the
            // parent reports the split's job ended, which is this call, so
            // the caller keeps it valid until then.
            unsafe { *(out as *mut ncclComm_t) = comm_handle(h) };
        }
        if pending_parts(st, c) {
            // The device progresses; a deadlock is found as a host wait would.
            let session = crate::session::current();
            crate::scheduler::run_ready(st, session);
        }
        let Some(x) = st.nccl.comms.get(&c) else { return ncclResult_t::ncclInternalError };
        if x.error != OK {
            return x.error;
        }
        if super::issue::connecting(&st.nccl, c)
            && let Some(r) = super::issue::stranded(&st.nccl, c)
        {
            // A rank left before its first collective: the ranks can never
            // connect, which this communicator now reports for good.
            let text = format!("rank {r} left before its first collective, so the ranks can never connect");
            if let Some(x) = st.nccl.comms.get_mut(&c) {
                x.error = ncclResult_t::ncclRemoteError;
                x.error_text.clone_from(&text);
            }
            return fail(ncclResult_t::ncclRemoteError, &text);
        }
        if !ready(&st.nccl, c)
            || (x.finalized && pending_parts(st, c))
            || super::issue::connecting(&st.nccl, c)
        {
            return ncclResult_t::ncclInProgress;
        }
        OK
    });
    match r {
        Ok(state) => {
            // SAFETY: non-null out-pointer from the caller.
            unsafe { *out = state };
            OK
        }
        Err(e) => e,
    }
}

/// `ncclCommCount`, `ncclCommCuDevice`, `ncclCommUserRank`.
fn comm_int(comm: ncclComm_t, out: *mut c_int, what: &str, f: fn(&Comm) -> i32) -> ncclResult_t {
    if out.is_null() {
        return fail(ncclResult_t::ncclInvalidArgument, &format!("{what}: null pointer"));
    }
    let r = with_comm(comm, what, |st, c| {
        if !ready(&st.nccl, c) {
            return Err(fail(ncclResult_t::ncclInvalidUsage, &format!("{what}: communicator not ready")));
        }
        st.nccl.comms.get(&c).map(f).ok_or(ncclResult_t::ncclInternalError)
    });
    match r.and_then(|x| x) {
        Ok(v) => {
            // SAFETY: non-null out-pointer from the caller.
            unsafe { *out = v };
            OK
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn ncclCommCount(comm: ncclComm_t, n: *mut c_int) -> ncclResult_t {
    comm_int(comm, n, "ncclCommCount", |c| c.nranks)
}

unsafe extern "C" fn ncclCommCuDevice(comm: ncclComm_t, d: *mut c_int) -> ncclResult_t {
    comm_int(comm, d, "ncclCommCuDevice", |c| c.device)
}

unsafe extern "C" fn ncclCommUserRank(comm: ncclComm_t, r: *mut c_int) -> ncclResult_t {
    comm_int(comm, r, "ncclCommUserRank", |c| c.rank)
}

/// Fills the communicator functions of `t`.
pub(super) fn fill(t: &mut Nccl) {
    t.ncclGetUniqueId = Some(ncclGetUniqueId);
    t.ncclCommInitRankConfig = Some(ncclCommInitRankConfig);
    t.ncclCommInitAll = Some(ncclCommInitAll);
    t.ncclCommSplit = Some(ncclCommSplit);
    t.ncclCommFinalize = Some(ncclCommFinalize);
    t.ncclCommDestroy = Some(ncclCommDestroy);
    t.ncclCommAbort = Some(ncclCommAbort);
    t.ncclCommGetAsyncError = Some(ncclCommGetAsyncError);
    t.ncclCommCount = Some(ncclCommCount);
    t.ncclCommCuDevice = Some(ncclCommCuDevice);
    t.ncclCommUserRank = Some(ncclCommUserRank);
}
