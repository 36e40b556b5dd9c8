//! The per-call layer over an [`Nccl`] table: one function per function of
//! the table (`ncclAllReduce` → [`all_reduce`]), out-parameters returned
//! through `Result`, every `ncclResult_t` other than `ncclSuccess` an
//! [`NcclError`] naming the call: [`NcclError::InProgress`] for
//! `ncclInProgress` (a non-blocking communicator still working),
//! [`NcclError::Failed`] with the code and `ncclGetLastError`'s text,
//! [`NcclError::Unsupported`] when the table lacks the function.
//!
//! Communicators are raw `ncclComm_t` here: nothing proves one alive, so a
//! function taking one is `unsafe`, as is one taking device pointers. No
//! policy lives here (which stream a buffer may be used on, when a
//! communicator may be destroyed): that is gpu-sync's.
//!
//! # Obligations of the operations
//! The collectives and point-to-point calls ([`all_reduce`] … [`recv`])
//! share these `# Safety` obligations, by number:
//!
//! 1. `comm` is a live communicator of `nccl`, and `stream` a live stream of
//!    `comm`'s device (the driver's `CUstream` is NCCL's `cudaStream_t`).
//! 2. Each buffer is device memory that `comm`'s device can address, of at
//!    least the element count stated times the size of `ty`, and stays
//!    allocated until the operation has completed on `stream`.
//! 3. Nothing else writes a buffer the operation reads, or touches one it
//!    writes, until the operation has completed on `stream`.
//! 4. Inside a group, 1–3 hold until the group's work has completed.
//!
//! [Reference](https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api.html)

use super::error::NcclError;
use super::load::Nccl;
use crate::nccl_bindings::{
    cudaStream_t, ncclComm_t, ncclConfig_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};
use std::ffi::{CStr, c_char, c_int, c_void};

/// Result of the per-call layer.
pub type Result<T, E = NcclError> = std::result::Result<T, E>;

/// Calls function `$name` of `$nccl` with `$args`; a failure carries
/// `ncclGetLastError($comm)`'s text. The call is made here, so each use sits
/// in an `unsafe` block whose `SAFETY:` comment argues that call's contract.
macro_rules! call {
    ($nccl:expr, $comm:expr, $name:ident ( $($arg:expr),* $(,)? )) => {{
        let nccl: &Nccl = $nccl;
        match nccl.$name {
            Some(f) => finish(nccl, $comm, stringify!($name), f($($arg),*)),
            None => Err(NcclError::Unsupported { call: stringify!($name), origin: nccl.origin.clone() }),
        }
    }};
}

/// `r` as a `Result`, with `ncclGetLastError(comm)`'s text on failure.
fn finish(nccl: &Nccl, comm: ncclComm_t, call: &'static str, r: ncclResult_t) -> Result<()> {
    match r {
        ncclResult_t::ncclSuccess => Ok(()),
        ncclResult_t::ncclInProgress => Err(NcclError::InProgress { call }),
        result => {
            let last_error = nccl.ncclGetLastError.and_then(|f| {
                // SAFETY: `comm` is null (NCCL then reports the thread's
                // last error) or a communicator the caller of the failed
                // call vouched for, still alive: this layer never passes
                // one that the failed call destroyed (see `comm_destroy`).
                let p = unsafe { f(comm) };
                // SAFETY: NCCL returns null or a NUL-terminated string it
                // owns, valid until its next call on this thread.
                (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            });
            Err(NcclError::Failed { call, result, last_error })
        }
    }
}

/// `usize` of a count NCCL takes as `int`.
fn c_int_of(call: &'static str, n: usize) -> Result<c_int> {
    c_int::try_from(n).map_err(|_| NcclError::Refused { call, reason: "more than INT_MAX ranks" })
}

/// The library's `NCCL_VERSION_CODE` (`ncclGetVersion`).
///
/// # Errors
/// NCCL's code; `Unsupported` without the function.
pub fn get_version(nccl: &Nccl) -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int through a valid pointer.
    unsafe { call!(nccl, std::ptr::null_mut(), ncclGetVersion(&mut v)) }?;
    Ok(v)
}

/// A new unique id for [`comm_init_rank_config`] (`ncclGetUniqueId`); with
/// `NCCL_COMM_ID=host:port` set it names that rendezvous instead of a
/// fresh one.
///
/// # Errors
/// NCCL's code (no network interface, …); `Unsupported` without it.
pub fn get_unique_id(nccl: &Nccl) -> Result<ncclUniqueId> {
    let mut id = ncclUniqueId::default();
    // SAFETY: writes one ncclUniqueId through a valid pointer.
    unsafe { call!(nccl, std::ptr::null_mut(), ncclGetUniqueId(&mut id)) }?;
    Ok(id)
}

/// Joins rank `rank` of `nranks` to the communicator `id` names, on the
/// current CUDA device (`ncclCommInitRankConfig`). The handle is written to
/// `*comm` even when the call returns `ncclInProgress` (`config.blocking =
/// 0`): the communicator then finishes building in the background, and
/// `ncclCommGetAsyncError` on it reports when it is ready.
///
/// # Errors
/// [`NcclError::InProgress`] (with `*comm` set) on a non-blocking
/// configuration; NCCL's code; `Unsupported` without the function.
///
/// # Safety
/// 1. A CUDA context is current on this thread (NCCL uses its device).
/// 2. `config` was started from `NCCL_CONFIG_INITIALIZER`; its string
///    fields are null or NUL-terminated strings living through the call.
pub unsafe fn comm_init_rank_config(
    nccl: &Nccl,
    comm: &mut ncclComm_t,
    nranks: usize,
    id: ncclUniqueId,
    rank: usize,
    config: &mut ncclConfig_t,
) -> Result<()> {
    let (n, r) = (c_int_of("ncclCommInitRankConfig", nranks)?, c_int_of("ncclCommInitRankConfig", rank)?);
    // SAFETY: `comm` and `config` are valid pointers for the call; the
    // caller vouches for the context and the config's strings.
    unsafe { call!(nccl, std::ptr::null_mut(), ncclCommInitRankConfig(comm, n, id, r, config)) }
}

/// One communicator per device of `devices`, in that rank order, from a
/// single process (`ncclCommInitAll`; blocking communicators, NCCL's
/// default configuration).
///
/// # Errors
/// NCCL's code; `Unsupported` without the function; `Refused` for no
/// device or a null handle returned.
pub fn comm_init_all(nccl: &Nccl, devices: &[i32]) -> Result<Vec<ncclComm_t>> {
    if devices.is_empty() {
        return Err(NcclError::Refused { call: "ncclCommInitAll", reason: "no device given" });
    }
    let n = c_int_of("ncclCommInitAll", devices.len())?;
    let mut comms = vec![std::ptr::null_mut(); devices.len()];
    // SAFETY: `comms` has room for `n` handles and `devices` holds `n`
    // ints, both valid for the call; NCCL makes its own contexts current.
    unsafe { call!(nccl, std::ptr::null_mut(), ncclCommInitAll(comms.as_mut_ptr(), n, devices.as_ptr())) }?;
    if comms.iter().any(|c| c.is_null()) {
        return Err(NcclError::Refused {
            call: "ncclCommInitAll",
            reason: "NCCL returned a null communicator",
        });
    }
    Ok(comms)
}

/// Splits `comm` by `color` (`NCCL_SPLIT_NOCOLOR` to take no part), ranks
/// ordered by `key` (`ncclCommSplit`). Collective over `comm`'s ranks. As
/// for [`comm_init_rank_config`], `*new_comm` is written even when the call
/// returns `ncclInProgress`; it is null for a rank that took no part.
///
/// # Errors
/// [`NcclError::InProgress`] on a non-blocking configuration; NCCL's code;
/// `Unsupported` without the function.
///
/// # Safety
/// 1. `comm` is a live communicator of `nccl`.
/// 2. `config` as for [`comm_init_rank_config`].
pub unsafe fn comm_split(
    nccl: &Nccl,
    comm: ncclComm_t,
    color: i32,
    key: i32,
    new_comm: &mut ncclComm_t,
    config: &mut ncclConfig_t,
) -> Result<()> {
    // SAFETY: live `comm` (caller); valid out-pointer and config.
    unsafe { call!(nccl, comm, ncclCommSplit(comm, color, key, new_comm, config)) }
}

/// Flushes `comm`'s operations and starts tearing it down
/// (`ncclCommFinalize`); on a non-blocking communicator it returns
/// `ncclInProgress` until `ncclCommGetAsyncError` reports `ncclSuccess`.
///
/// # Errors
/// [`NcclError::InProgress`]; NCCL's code; `Unsupported` without it.
///
/// # Safety
/// `comm` is a live communicator of `nccl`.
pub unsafe fn comm_finalize(nccl: &Nccl, comm: ncclComm_t) -> Result<()> {
    // SAFETY: live `comm` (caller).
    unsafe { call!(nccl, comm, ncclCommFinalize(comm)) }
}

/// Frees `comm` (`ncclCommDestroy`); after a finished
/// [`comm_finalize`] it does not block.
///
/// # Errors
/// NCCL's code; `Unsupported` without the function.
///
/// # Safety
/// `comm` is a live communicator of `nccl`, used by nobody after this call.
pub unsafe fn comm_destroy(nccl: &Nccl, comm: ncclComm_t) -> Result<()> {
    // SAFETY: live `comm` (caller); the error text is asked without it, as
    // the call may have freed it.
    unsafe { call!(nccl, std::ptr::null_mut(), ncclCommDestroy(comm)) }
}

/// Frees `comm`, aborting its unfinished operations (`ncclCommAbort`).
///
/// # Errors
/// NCCL's code; `Unsupported` without the function.
///
/// # Safety
/// `comm` is a live communicator of `nccl`, used by nobody after this call.
pub unsafe fn comm_abort(nccl: &Nccl, comm: ncclComm_t) -> Result<()> {
    // SAFETY: as for `comm_destroy`.
    unsafe { call!(nccl, std::ptr::null_mut(), ncclCommAbort(comm)) }
}

/// `comm`'s asynchronous state (`ncclCommGetAsyncError`): `ncclSuccess`,
/// `ncclInProgress` while a non-blocking operation goes on, or the error
/// that broke it ([`super::check`] turns it into a `Result`).
///
/// # Errors
/// The query's own failure; `Unsupported` without the function.
///
/// # Safety
/// `comm` is a live communicator of `nccl`.
pub unsafe fn comm_get_async_error(nccl: &Nccl, comm: ncclComm_t) -> Result<ncclResult_t> {
    let mut state = ncclResult_t::ncclSuccess;
    // SAFETY: live `comm` (caller); valid out-pointer.
    unsafe { call!(nccl, comm, ncclCommGetAsyncError(comm, &mut state)) }?;
    Ok(state)
}

/// Reads one int of `comm` through `f` (count, device, rank).
macro_rules! comm_int {
    ($(#[$doc:meta])* $fn_name:ident, $name:ident) => {
        $(#[$doc])*
        ///
        /// # Errors
        /// NCCL's code; `Unsupported` without the function.
        ///
        /// # Safety
        /// `comm` is a live communicator of `nccl`.
        pub unsafe fn $fn_name(nccl: &Nccl, comm: ncclComm_t) -> Result<i32> {
            let mut v: c_int = 0;
            // SAFETY: live `comm` (caller); valid out-pointer.
            unsafe { call!(nccl, comm, $name(comm, &mut v)) }?;
            Ok(v)
        }
    };
}

comm_int!(
    /// The number of ranks of `comm` (`ncclCommCount`).
    comm_count,
    ncclCommCount
);
comm_int!(
    /// The CUDA device `comm` uses (`ncclCommCuDevice`).
    comm_cu_device,
    ncclCommCuDevice
);
comm_int!(
    /// This rank's number in `comm` (`ncclCommUserRank`).
    comm_user_rank,
    ncclCommUserRank
);

/// NCCL's text for a result (`ncclGetErrorString`); `None` without the
/// function or for a null answer.
pub fn get_error_string(nccl: &Nccl, result: ncclResult_t) -> Option<String> {
    let f = nccl.ncclGetErrorString?;
    // SAFETY: takes a value; returns null or a static NUL-terminated string.
    let p = unsafe { f(result) };
    // SAFETY: non-null: a NUL-terminated string NCCL owns.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The text of the last error NCCL met (`ncclGetLastError`); `None`
/// without the function or for a null answer.
///
/// # Safety
/// `comm` is null or a live communicator of `nccl`.
pub unsafe fn get_last_error(nccl: &Nccl, comm: ncclComm_t) -> Option<String> {
    let f = nccl.ncclGetLastError?;
    // SAFETY: `comm` null or live (caller).
    let p: *const c_char = unsafe { f(comm) };
    // SAFETY: non-null: a NUL-terminated string NCCL owns, valid until its
    // next call on this thread; copied out at once.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Opens a group (`ncclGroupStart`): the operations issued until
/// [`group_end`] are launched together.
///
/// # Errors
/// NCCL's code; `Unsupported` without the function.
pub fn group_start(nccl: &Nccl) -> Result<()> {
    // SAFETY: takes no argument.
    unsafe { call!(nccl, std::ptr::null_mut(), ncclGroupStart()) }
}

/// Closes the group and launches its operations (`ncclGroupEnd`). With
/// non-blocking communicators it may return `ncclInProgress`: the
/// operations are still being enqueued; poll each communicator's
/// `ncclCommGetAsyncError`. (The operations' own obligations were taken by
/// the `unsafe` calls that issued them.)
///
/// # Errors
/// [`NcclError::InProgress`]; NCCL's code; `Unsupported` without it.
pub fn group_end(nccl: &Nccl) -> Result<()> {
    // SAFETY: takes no argument; what it launches was vouched for when
    // issued.
    unsafe { call!(nccl, std::ptr::null_mut(), ncclGroupEnd()) }
}

/// Sums (or `op`s) `count` elements of every rank's `send` into every
/// rank's `recv` (`ncclAllReduce`); `send == recv` is in place.
///
/// # Errors
/// [`NcclError::InProgress`] (non-blocking); NCCL's code; `Unsupported`.
///
/// # Safety
/// The [shared obligations](self#obligations-of-the-operations) 1–4, with `send` and `recv` of `count` elements.
#[allow(clippy::too_many_arguments)]
pub unsafe fn all_reduce(
    nccl: &Nccl,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> Result<()> {
    // SAFETY: the caller's obligations 1–4.
    unsafe { call!(nccl, comm, ncclAllReduce(send, recv, count, ty, op, comm, stream)) }
}

/// Copies `count` elements of rank `root`'s `send` into every rank's `recv`
/// (`ncclBroadcast`); `send` is read on `root` only; `send == recv` is in
/// place.
///
/// # Errors
/// As [`all_reduce`].
///
/// # Safety
/// The [shared obligations](self#obligations-of-the-operations) 1–4, with `recv` (and `send` on `root`) of
/// `count` elements.
#[allow(clippy::too_many_arguments)]
pub unsafe fn broadcast(
    nccl: &Nccl,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    root: i32,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> Result<()> {
    // SAFETY: the caller's obligations 1–4.
    unsafe { call!(nccl, comm, ncclBroadcast(send, recv, count, ty, root, comm, stream)) }
}

/// Reduces `count` elements of every rank's `send` into rank `root`'s
/// `recv` (`ncclReduce`); `recv` is written on `root` only.
///
/// # Errors
/// As [`all_reduce`].
///
/// # Safety
/// The [shared obligations](self#obligations-of-the-operations) 1–4, with `send` (and `recv` on `root`) of
/// `count` elements.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(
    nccl: &Nccl,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    op: ncclRedOp_t,
    root: i32,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> Result<()> {
    // SAFETY: the caller's obligations 1–4.
    unsafe { call!(nccl, comm, ncclReduce(send, recv, count, ty, op, root, comm, stream)) }
}

/// Gathers `send_count` elements from every rank into every rank's `recv`,
/// in rank order (`ncclAllGather`); in place when `send` is this rank's
/// slice of `recv`.
///
/// # Errors
/// As [`all_reduce`].
///
/// # Safety
/// The [shared obligations](self#obligations-of-the-operations) 1–4, with `send` of `send_count` elements and
/// `recv` of `send_count × ranks`.
pub unsafe fn all_gather(
    nccl: &Nccl,
    send: *const c_void,
    recv: *mut c_void,
    send_count: usize,
    ty: ncclDataType_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> Result<()> {
    // SAFETY: the caller's obligations 1–4.
    unsafe { call!(nccl, comm, ncclAllGather(send, recv, send_count, ty, comm, stream)) }
}

/// Reduces every rank's `send` and leaves block `rank` of the result, of
/// `recv_count` elements, in each rank's `recv` (`ncclReduceScatter`); in
/// place when `recv` is this rank's block of `send`.
///
/// # Errors
/// As [`all_reduce`].
///
/// # Safety
/// The [shared obligations](self#obligations-of-the-operations) 1–4, with `recv` of `recv_count` elements and
/// `send` of `recv_count × ranks`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce_scatter(
    nccl: &Nccl,
    send: *const c_void,
    recv: *mut c_void,
    recv_count: usize,
    ty: ncclDataType_t,
    op: ncclRedOp_t,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> Result<()> {
    // SAFETY: the caller's obligations 1–4.
    unsafe { call!(nccl, comm, ncclReduceScatter(send, recv, recv_count, ty, op, comm, stream)) }
}

/// Sends `count` elements of `send` to rank `peer` (`ncclSend`), matched
/// by a [`recv`] on `peer`; outside a group it waits for that peer.
///
/// # Errors
/// As [`all_reduce`].
///
/// # Safety
/// The [shared obligations](self#obligations-of-the-operations) 1–4, with `send` of `count` elements.
pub unsafe fn send(
    nccl: &Nccl,
    send: *const c_void,
    count: usize,
    ty: ncclDataType_t,
    peer: i32,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> Result<()> {
    // SAFETY: the caller's obligations 1–4.
    unsafe { call!(nccl, comm, ncclSend(send, count, ty, peer, comm, stream)) }
}

/// Receives `count` elements from rank `peer` into `recv` (`ncclRecv`).
///
/// # Errors
/// As [`all_reduce`].
///
/// # Safety
/// The [shared obligations](self#obligations-of-the-operations) 1–4, with `recv` of `count` elements.
pub unsafe fn recv(
    nccl: &Nccl,
    recv: *mut c_void,
    count: usize,
    ty: ncclDataType_t,
    peer: i32,
    comm: ncclComm_t,
    stream: cudaStream_t,
) -> Result<()> {
    // SAFETY: the caller's obligations 1–4.
    unsafe { call!(nccl, comm, ncclRecv(recv, count, ty, peer, comm, stream)) }
}
