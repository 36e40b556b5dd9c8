//! A simulated NCCL: the [`cuda_sys::nccl::Nccl`] table over the simulated
//! devices, so code written against NCCL (gpu-sync's collectives) is tested
//! without GPUs. [`install`] makes it the process-wide NCCL; the driver's
//! [`crate::install`] installs it with the driver and CUPTI.
//!
//! # What it models
//! - **Communicators** over any of the simulated devices: `ncclCommInitAll`
//!   (ready at once), `ncclCommInitRankConfig` with an id from
//!   `ncclGetUniqueId` — every rank from one thread inside
//!   `ncclGroupStart`/`ncclGroupEnd`, or one thread per rank —, and
//!   `ncclCommSplit` (collective over the parent's ranks; ranks of a color
//!   ordered by key, then parent rank). A blocking communicator's init (or
//!   split) outside a group returns once every rank has joined (waiting
//!   for other threads with the simulator's lock released; after
//!   [`PEER_TIMEOUT`] it fails with `ncclSystemError`). A non-blocking one
//!   (`config.blocking = 0`) returns `ncclInProgress`, and
//!   `ncclCommGetAsyncError` reports `ncclInProgress` until every rank has
//!   joined, then `ncclSuccess`. Inside a group, init and split return
//!   `ncclSuccess` and complete by the group's end (see below).
//! - **Groups** per thread, nesting counted: operations inside are issued
//!   at the outermost `ncclGroupEnd`, one part per (communicator, stream).
//!   `ncclGroupEnd` returns `ncclInProgress` when the group touched a
//!   non-blocking communicator (its operations are nevertheless queued on
//!   their streams when it returns; `ncclCommGetAsyncError` then reports
//!   `ncclSuccess` once the communicator's ranks have all joined and, if
//!   it issued a collective, connected: below), else
//!   waits for the blocking communicators it initialized to be complete
//!   and returns `ncclSuccess`.
//! - **Connections on first use**: a clique's ranks connect when each has
//!   issued its first collective (queued or captured), as NCCL connects
//!   them on first use (`NCCL_RUNTIME_CONNECT`, on by default; with
//!   `NCCL_RUNTIME_CONNECT=0` in the environment when the clique is made,
//!   at init). Until then a blocking communicator's call (a group's end,
//!   or a call alone) that issued a collective waits for the other ranks'
//!   first ones with the simulator's lock released, up to [`PEER_TIMEOUT`]
//!   (then `ncclSystemError`), and a non-blocking one's call alone (a
//!   collective, or a send or receive) returns `ncclInProgress` and
//!   `ncclCommGetAsyncError` reports `ncclInProgress`. A rank destroyed or
//!   aborted before its first collective leaves the others unable to
//!   connect: a waiting call fails with `ncclRemoteError`, as does
//!   `ncclCommGetAsyncError`; a waiting communicator destroyed or aborted
//!   meanwhile fails its call with `ncclInvalidUsage`. A failed connection
//!   stays the communicator's error, so its later calls fail at once. So
//!   one thread that issues each rank's first collective alone, rank by
//!   rank, waits for ever on a GPU with blocking communicators (and until
//!   its own timeout with non-blocking ones, in gpu-sync); here the
//!   blocking call times out.
//! - **Collectives** (all-reduce, broadcast, reduce, all-gather,
//!   reduce-scatter, send/recv) over `i8`, `u8`, `i32`, `u32`, `i64`,
//!   `u64`, `f16`, `f32`, `f64`, `bf16` with sum, prod, min, max, avg; FP8
//!   is refused with `ncclInvalidArgument`. Each rank's part is an
//!   operation on its stream; the collective runs when every rank's part
//!   is reached on its stream (a rendezvous), computing exact results
//!   (`reduce`: integers exactly, floats folded in rank order). The race
//!   oracle sees each rank's send-buffer reads and receive-buffer writes as
//!   accesses of its stream at the collective's position. The k-th
//!   collective of each rank of a communicator are one collective; the
//!   k-th send from a to b meets the k-th receive by b from a.
//! - **Time**: a part lasts the bytes its rank moves over the peer link at
//!   [`crate::model::NVLINK_BYTES_PER_NS`] plus the link's latency (ring
//!   all-reduce 2(n−1)/n of the buffer, all-gather and reduce-scatter
//!   (n−1) shards, broadcast, reduce and send/recv the buffer once), and
//!   no part of a collective ends before the last one starts plus that.
//! - **Deadlocks**: a host wait (`cuStreamSynchronize`,
//!   `cuEventSynchronize`, `cuCtxSynchronize`, a blocking copy) that can
//!   only progress through collective parts which wait for each other (two
//!   communicators issued in opposite orders on two devices) returns
//!   `CUDA_ERROR_LAUNCH_TIMEOUT` instead of hanging (the session is not
//!   poisoned), the session records the description
//!   ([`crate::Session::deadlocks`]), and each communicator involved
//!   reports `ncclInvalidUsage` from `ncclCommGetAsyncError` (with the
//!   description from `ncclGetLastError`). `ncclCommGetAsyncError` runs
//!   the ready work first and finds the same deadlocks. The parts stay
//!   queued (queries say not ready) until `ncclCommAbort` of a
//!   communicator in the cycle: an abort cancels its unfinished
//!   collectives (every rank's part of them retires without running; the
//!   other ranks' communicators report `ncclRemoteError`). A host wait for
//!   a part whose peer has not been issued yet (another thread's rank)
//!   waits for it with the lock released, up to [`PEER_TIMEOUT`], then
//!   returns `CUDA_ERROR_LAUNCH_TIMEOUT` with a report.
//! - **Re-entry**: every function that touches the simulator goes through
//!   the one door (`state::enter`): from a host function or a kernel's CPU
//!   version it returns `ncclInvalidUsage`.
//!
//! - **Capture**: a collective issued on a capturing stream (a group's
//!   part included) becomes a node of that stream's capture; nothing runs
//!   and no rank is paired then. Each launch of the instantiated graph
//!   queues the part as the next collective of its communicator's rank, so
//!   the ranks pair up at replay across the graphs of the devices (one
//!   graph per device, as with NCCL: every rank's graph must be launched
//!   for the collective to finish), with exact results and the oracle
//!   seeing the accesses at the launch. A rank's graph launched alone waits
//!   like any part whose peers never come: a host wait gives
//!   `CUDA_ERROR_LAUNCH_TIMEOUT` after [`PEER_TIMEOUT`] with a report. A
//!   launch after a captured communicator was destroyed, finalized or
//!   failed is refused (`CUDA_ERROR_ILLEGAL_STATE`).
//!
//! # Limits
//! - A graph holding collectives is replayed in capture order: the nodes
//!   between two collectives run as one graph operation, each collective
//!   after them, so branches of a forked capture are ordered around the
//!   collectives (the oracle sees that order, not the graph's edges).
//! - A collective does not order its ranks' streams with each other for the
//!   oracle (each rank's later work is not taken to follow the other
//!   ranks' earlier work), so relying on a collective as a cross-stream
//!   barrier is reported.
//! - Parts issued outside a group by separate calls get their simulated
//!   times aligned when the last rank's part is issued; work queued on a
//!   rank's stream after its part and before then keeps its earlier time.
//! - `ncclCommFinalize` does not wait for the device: on a non-blocking
//!   communicator it returns `ncclInProgress` and `ncclCommGetAsyncError`
//!   says `ncclSuccess` once the communicator's queued parts have run.
//! - Connections are modelled per clique, for collectives only. NCCL
//!   (as read in its 2.28 source, not measured here) connects per algorithm (a later collective that picks another
//!   algorithm connects again), connects each peer of a send or receive on
//!   its first use (even with `NCCL_RUNTIME_CONNECT=0`), and connects at
//!   run time only where cuMem is supported; a send or receive issued
//!   alone, rank by rank, from one thread can hang on a GPU and pass
//!   here. `NCCL_RUNTIME_CONNECT` is read when each clique is made (NCCL
//!   reads it once per process). A connected non-blocking communicator's
//!   call alone returns `ncclSuccess`, where NCCL may say
//!   `ncclInProgress` first.
//!
//! This module holds `unsafe` code because NCCL's C interface hands raw
//! out-pointers and buffers; each function checks pointers for null.
#![allow(unsafe_code, non_snake_case)]

mod coll;
mod comm;
mod issue;
mod reduce;
mod replay;

pub(crate) use coll::{Part, Stall, execute, kernel_name, ready, stall};
pub(crate) use replay::{Step, check as check_replay, enqueue as enqueue_replayed, has_collectives, steps};

use crate::state::{self, State};
use cuda_sys::nccl::Nccl;
use cuda_sys::nccl_bindings::{ncclComm_t, ncclResult_t};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::sync::MutexGuard;
use std::time::Duration;

/// What [`Nccl::origin`] says for the simulator's table.
pub const ORIGIN: &str = "cuda-sim";

/// The version the simulated NCCL reports: the pinned header's.
pub const VERSION: i32 = cuda_sys::nccl_bindings::NCCL_VERSION_CODE as i32;

/// How long a call (or a host wait) waits for ranks that other threads have
/// not issued yet, before it fails.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(10);

/// A communicator handle's rank.
#[derive(Debug)]
pub(crate) struct Comm {
    /// The clique (0 while a split has not formed it).
    pub(crate) clique: u64,
    pub(crate) rank: i32,
    pub(crate) nranks: i32,
    pub(crate) device: i32,
    pub(crate) session: u64,
    pub(crate) blocking: bool,
    pub(crate) finalized: bool,
    /// An asynchronous error (deadlock, a peer's abort, a call mismatch).
    pub(crate) error: ncclResult_t,
    pub(crate) error_text: String,
    /// Collectives issued so far.
    pub(crate) colls: u64,
    /// Sends to and receives from each peer so far.
    pub(crate) sends: HashMap<i32, u64>,
    pub(crate) recvs: HashMap<i32, u64>,
    /// Splits issued so far.
    pub(crate) splits: u64,
}

/// The ranks of one communicator: each rank's handle once it joined, and
/// which ranks have issued a collective (NCCL connects a clique's ranks on
/// their first collective unless `NCCL_RUNTIME_CONNECT=0` had it connect
/// them at init).
#[derive(Debug)]
pub(crate) struct Clique {
    pub(crate) ranks: Vec<Option<u64>>,
    /// Rank `r` has issued (queued or captured) its first collective.
    pub(crate) used: Vec<bool>,
    /// Connected at init (`NCCL_RUNTIME_CONNECT=0` when it was made).
    pub(crate) connected_at_init: bool,
}

impl Clique {
    /// A clique of `ranks` (each `Some` once joined), none of them used yet.
    pub(crate) fn new(ranks: Vec<Option<u64>>) -> Clique {
        let used = vec![false; ranks.len()];
        let connected_at_init = std::env::var("NCCL_RUNTIME_CONNECT").is_ok_and(|v| v.trim() == "0");
        Clique { ranks, used, connected_at_init }
    }

    fn complete(&self) -> bool {
        self.ranks.iter().all(Option::is_some)
    }

    /// Whether its ranks are connected for collectives: at init, or once
    /// every rank has issued its first collective.
    pub(crate) fn connected(&self) -> bool {
        self.connected_at_init || self.used.iter().all(|&u| u)
    }
}

/// A split in progress: each parent rank's color, key and new handle.
#[derive(Debug, Default)]
pub(crate) struct Split {
    pub(crate) calls: Vec<Option<(i32, i32, u64)>>,
}

/// The simulated NCCL's state (inside the global [`State`]).
#[derive(Debug, Default)]
pub(crate) struct NcclState {
    pub(crate) comms: HashMap<u64, Comm>,
    pub(crate) cliques: HashMap<u64, Clique>,
    /// Cliques being joined through a unique id.
    pub(crate) by_id: HashMap<Vec<u8>, u64>,
    /// Splits in progress, by parent clique and split number.
    pub(crate) splits: HashMap<(u64, u64), Split>,
    pub(crate) instances: HashMap<u64, coll::Instance>,
    pub(crate) keys: HashMap<(u64, coll::Key), u64>,
    /// Ids handed out (unique ids, cliques, instances).
    pub(crate) next: u64,
    /// The handles non-blocking splits still owe their callers: (parent,
    /// the caller's `newcomm` pointer as an address, the new handle). As
    /// NCCL stores `*newcomm` from its own thread when a split's job ends,
    /// after `ncclCommSplit` returned, these are written when the parent
    /// next reports its state — a caller that reads its pointer before
    /// polling the parent reads null, as it could on a GPU.
    pub(crate) owed: Vec<(u64, usize, u64)>,
}

thread_local! {
    /// This thread's last error text (`ncclGetLastError`).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// This thread's last error text, as a `String`.
fn last_error_text() -> String {
    LAST_ERROR.try_with(|l| l.borrow().to_string_lossy().into_owned()).unwrap_or_default()
}

/// Sets this thread's last error text.
fn set_last_error(text: &str) {
    let c = CString::new(text.replace('\0', "?")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = c);
}

/// Fails with `code`, saying why (`ncclGetLastError`).
fn fail(code: ncclResult_t, why: &str) -> ncclResult_t {
    log::info!("cuda-sim nccl: {why}");
    set_last_error(why);
    code
}

/// Enters the simulator (refused from inside it: `ncclInvalidUsage`).
fn enter() -> Result<MutexGuard<'static, State>, ncclResult_t> {
    state::enter()
        .map_err(|r| fail(r.into(), "NCCL called from inside the simulator (a host function or kernel)"))
}

/// The communicator behind a handle.
fn comm_id(c: ncclComm_t) -> u64 {
    c.addr() as u64
}

/// A handle for communicator `id`.
fn comm_handle(id: u64) -> ncclComm_t {
    std::ptr::without_provenance_mut(id as usize)
}

/// Sets `code` as the asynchronous error of each of `comms` still alive
/// (the first error stays).
pub(crate) fn fail_comms(st: &mut State, comms: &[u64], code: ncclResult_t, why: &str) {
    for c in comms {
        if let Some(c) = st.nccl.comms.get_mut(c)
            && c.error == ncclResult_t::ncclSuccess
        {
            c.error = code;
            c.error_text = why.to_owned();
        }
    }
}

/// Records a deadlock found by a host wait of `session` (once per set of
/// communicators): the session's report, and `ncclInvalidUsage` on each.
pub(crate) fn report_deadlock(st: &mut State, session: u64, what: &str, comms: &[u64]) {
    let fresh =
        comms.iter().any(|c| st.nccl.comms.get(c).is_some_and(|c| c.error == ncclResult_t::ncclSuccess));
    if fresh || comms.is_empty() {
        log::warn!("cuda-sim: {what}");
        st.session_mut(session).deadlocks.push(what.to_owned());
    }
    fail_comms(st, comms, ncclResult_t::ncclInvalidUsage, what);
}

/// Polls `done` with the simulator's lock released between tries until it
/// answers, or [`PEER_TIMEOUT`] passes (`ncclSystemError`).
fn wait_for(mut done: impl FnMut(&mut State) -> Option<ncclResult_t>, what: &str) -> ncclResult_t {
    let deadline = std::time::Instant::now() + PEER_TIMEOUT;
    loop {
        match enter() {
            Ok(mut st) => {
                if let Some(r) = done(&mut st) {
                    return r;
                }
            }
            Err(code) => return code,
        }
        if std::time::Instant::now() >= deadline {
            return fail(
                ncclResult_t::ncclSystemError,
                &format!("{what}: the other ranks did not join within {PEER_TIMEOUT:?}"),
            );
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Whether the calling thread is inside an NCCL group.
pub(crate) fn in_group() -> bool {
    issue::depth() > 0
}

unsafe extern "C" fn ncclGetVersion(v: *mut i32) -> ncclResult_t {
    if v.is_null() {
        return fail(ncclResult_t::ncclInvalidArgument, "ncclGetVersion: null pointer");
    }
    // SAFETY: non-null out-pointer from the caller.
    unsafe { *v = VERSION };
    ncclResult_t::ncclSuccess
}

unsafe extern "C" fn ncclGetErrorString(r: ncclResult_t) -> *const c_char {
    let s: &'static std::ffi::CStr = match r {
        ncclResult_t::ncclSuccess => c"no error",
        ncclResult_t::ncclUnhandledCudaError => {
            c"unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
        }
        ncclResult_t::ncclSystemError => c"unhandled system error (run with NCCL_DEBUG=INFO for details)",
        ncclResult_t::ncclInternalError => {
            c"internal error - please report this issue to the NCCL developers"
        }
        ncclResult_t::ncclInvalidArgument => c"invalid argument (run with NCCL_DEBUG=WARN for details)",
        ncclResult_t::ncclInvalidUsage => c"invalid usage (run with NCCL_DEBUG=WARN for details)",
        ncclResult_t::ncclRemoteError => c"remote process exited or there was a network error",
        ncclResult_t::ncclInProgress => c"NCCL operation in progress",
        _ => c"unknown result code",
    };
    s.as_ptr()
}

unsafe extern "C" fn ncclGetLastError(comm: ncclComm_t) -> *const c_char {
    // A communicator's asynchronous error text, else the thread's.
    if !comm.is_null()
        && let Ok(st) = state::enter()
        && let Some(c) = st.nccl.comms.get(&comm_id(comm)).filter(|c| !c.error_text.is_empty())
    {
        set_last_error(&c.error_text.clone());
    }
    LAST_ERROR.try_with(|l| l.borrow().as_ptr()).unwrap_or(c"".as_ptr())
}

/// The simulator's NCCL table: every function of [`Nccl`].
pub fn table() -> Nccl {
    let mut t = Nccl::empty(VERSION, ORIGIN);
    t.ncclGetVersion = Some(ncclGetVersion);
    t.ncclGetErrorString = Some(ncclGetErrorString);
    t.ncclGetLastError = Some(ncclGetLastError);
    comm::fill(&mut t);
    issue::fill(&mut t);
    t
}

/// Makes the simulator's table the process-wide NCCL
/// ([`cuda_sys::nccl::install_nccl`]) unless one is already in place;
/// returns whether the process-wide table is the simulator's.
pub fn install() -> bool {
    // SAFETY: every function of `table()` follows NCCL's contract as the
    // module documents it: collectives touch only their buffers' `count`
    // elements, in stream order on their streams; communicator handles stay
    // valid until destroyed or aborted; strings returned are static or the
    // calling thread's, NUL-terminated.
    match unsafe { cuda_sys::nccl::install_nccl(table()) } {
        Ok(_) => true,
        Err(e) => e.origin == ORIGIN,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_function_is_filled() {
        let t = super::table();
        assert_eq!(t.missing(), Vec::<&str>::new());
        assert_eq!(t.origin, super::ORIGIN);
    }
}
