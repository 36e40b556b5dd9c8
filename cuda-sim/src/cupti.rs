//! The subset of CUPTI that cuda-sys's [`cuda_sys::cupti`] layer uses,
//! implemented over the simulator: activity records for kernels, copies and
//! memsets, with the simulated start and end of each operation, written in
//! the binary layouts of the pinned CUPTI 13.0 headers and handed back
//! through the program's buffer callbacks, so the whole CUPTI path (loading
//! aside) is tested without a GPU.
//!
//! What it models: `cuptiSubscribe` (one subscriber, as CUPTI allows),
//! enabling and disabling the kinds (kernel, memcpy, memset, external
//! correlation, synchronization; overhead and driver API are accepted and
//! never written), external correlation ids pushed and popped per thread
//! (`cuptiActivityPushExternalCorrelationId`: each operation enqueued
//! meanwhile gets an external correlation record with its correlation id,
//! which its kernel, copy or memset record carries — the kernels of a
//! replayed graph carry the replay's), synchronization records for
//! `cuStreamSynchronize`, `cuEventSynchronize` and `cuCtxSynchronize`
//! (their simulated host start and end), `cuptiActivityFlushAll` (every
//! pending record, in as many buffers as needed), `cuptiGetStreamIdEx` for
//! explicit streams, `cuptiGetTimestamp` (the simulated clock). Records are
//! made when an operation executes; graph launches give one record per
//! kernel, copy and memset node, laid one after the other in the launch's
//! span; a rank's part of NCCL collectives (one group's, or one call's)
//! gives one kernel record on its stream, named as NCCL names its kernels
//! (`ncclDevKernel_AllReduce`, `ncclDevKernel_SendRecv`), with the part's
//! simulated start and end. Nothing is ever dropped.
//!
//! The range profiler (`cuptiProfiler*`, `cuptiRangeProfiler*`: one
//! counter, `gpu__time_duration.sum`, auto ranges, kernel replay, one pass)
//! lives in `cupti_profiler.rs`; it reads each kernel's span from the
//! same place as the kernel records, so the two agree to the nanosecond.
//!
//! A call from inside the simulator (a host function, a registered
//! kernel's CPU version: the simulator's lock is held by that very thread)
//! is refused with `CUPTI_ERROR_INVALID_OPERATION` by the same door as the
//! driver's entry points (`state::enter`), never a deadlock.
//!
//! This module holds `unsafe` code because CUPTI's C interface hands raw
//! buffers and out-pointers; each function checks them for null.
#![allow(unsafe_code, non_snake_case)]

use crate::ops::{Loc, Op, Work};
use crate::state::{self, State};
use cuda_sys::cupti::Cupti;
use cuda_sys::cupti_bindings::{
    CUcontext, CUpti_Activity, CUpti_ActivityExternalCorrelation, CUpti_ActivityKernel10, CUpti_ActivityKind,
    CUpti_ActivityMemcpy6, CUpti_ActivityMemset4, CUpti_ActivitySynchronization2,
    CUpti_ActivitySynchronizationType, CUpti_BuffersCallbackCompleteFunc, CUpti_BuffersCallbackRequestFunc,
    CUpti_CallbackFunc, CUpti_ExternalCorrelationKind, CUpti_SubscriberHandle, CUptiResult, CUstream,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CString, c_char, c_void};
use std::sync::{Mutex, OnceLock};

/// What [`Cupti::origin`] says for the simulator's table.
pub const ORIGIN: &str = "cuda-sim";

/// The API version the simulator reports: the headers' own.
const VERSION: u32 = cuda_sys::cupti::CUPTI_HEADER_VERSION;

/// One simulated record, before it is written into a program's buffer.
#[derive(Clone)]
pub(crate) enum SimRecord {
    Kernel(CUpti_ActivityKernel10),
    Memcpy(CUpti_ActivityMemcpy6),
    Memset(CUpti_ActivityMemset4),
    External(CUpti_ActivityExternalCorrelation),
    Sync(CUpti_ActivitySynchronization2),
}

/// Index of each kind in [`CuptiState::enabled`]. `KERNEL` is
/// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`, `SERIAL_KERNEL`
/// `CUPTI_ACTIVITY_KIND_KERNEL` (at most one of the two is enabled, see
/// [`cuptiActivityEnable`]).
const KERNEL: usize = 0;
const MEMCPY: usize = 1;
const MEMSET: usize = 2;
const EXTERNAL: usize = 3;
const SYNC: usize = 4;
const OVERHEAD: usize = 5;
const DRIVER: usize = 6;
const SERIAL_KERNEL: usize = 7;
const KINDS: usize = 8;

thread_local! {
    /// This thread's pushed external correlation ids, per kind, innermost
    /// last.
    static PUSHED: RefCell<Vec<(u32, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Adds the external correlation records of operation `op`, enqueued now
/// by this thread: one per kind with an id pushed (its innermost).
pub(crate) fn on_enqueue(st: &mut State, op: u64) {
    if !st.cupti.enabled[EXTERNAL] {
        return;
    }
    let tops: Vec<(u32, u64)> = PUSHED
        .try_with(|p| {
            let p = p.borrow();
            let mut tops: Vec<(u32, u64)> = Vec::new();
            for &(k, id) in p.iter().rev() {
                if !tops.iter().any(|(t, _)| *t == k) {
                    tops.push((k, id));
                }
            }
            tops
        })
        .unwrap_or_default();
    for (k, id) in tops {
        st.cupti.pending.push(SimRecord::External(CUpti_ActivityExternalCorrelation {
            kind: CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
            externalKind: CUpti_ExternalCorrelationKind(k),
            externalId: id,
            correlationId: op as u32,
            reserved: 0,
        }));
    }
}

/// Which host synchronization a record is for.
pub(crate) enum SyncOf {
    Stream(u64),
    Event(u64),
    Context,
}

/// Adds the synchronization record of a host wait that ran from simulated
/// time `start` to `end`.
pub(crate) fn on_sync(st: &mut State, of: SyncOf, start: u64, end: u64) {
    if !st.cupti.enabled[SYNC] {
        return;
    }
    const INVALID: u32 = u32::MAX;
    let (ty, stream, event) = match of {
        SyncOf::Stream(s) => (
            CUpti_ActivitySynchronizationType::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
            s as u32,
            INVALID,
        ),
        SyncOf::Event(e) => (
            CUpti_ActivitySynchronizationType::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
            INVALID,
            e as u32,
        ),
        SyncOf::Context => (
            CUpti_ActivitySynchronizationType::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
            INVALID,
            INVALID,
        ),
    };
    st.cupti.pending.push(SimRecord::Sync(CUpti_ActivitySynchronization2 {
        kind: CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
        type_: ty,
        start,
        end: end.max(start),
        correlationId: 0,
        contextId: 1,
        streamId: stream,
        cudaEventId: event,
        cudaEventSyncId: u64::from(event),
        returnValue: 0,
        pad: 0,
    }));
}

/// The simulator's CUPTI state (inside the global [`State`]).
#[derive(Default)]
pub(crate) struct CuptiState {
    subscribed: bool,
    /// Concurrent kernel, memcpy, memset, external correlation,
    /// synchronization, overhead, driver API, serialized kernel (see the
    /// index constants).
    enabled: [bool; KINDS],
    requested: Option<unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize)>,
    completed: Option<unsafe extern "C" fn(CUcontext, u32, *mut u8, usize, usize)>,
    pending: Vec<SimRecord>,
    /// The range profiler's hosts and objects.
    pub(crate) profiler: crate::cupti_profiler::ProfilerState,
}

// SAFETY: the two callback pointers are plain `extern "C"` functions (no
// data); the records hold a kernel-name pointer into `names()`, which lives
// for the process; the profiler's state is `Send` by itself (its image
// pointer's wrapper argues it). Nothing here is tied to a thread.
unsafe impl Send for CuptiState {}

impl std::fmt::Debug for CuptiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuptiState")
            .field("subscribed", &self.subscribed)
            .field("enabled", &self.enabled)
            .field("pending", &self.pending.len())
            .field("profiler", &self.profiler)
            .finish()
    }
}

/// Interned kernel names: CUPTI's records point at strings it keeps.
fn intern(name: &str) -> *const c_char {
    static NAMES: OnceLock<Mutex<HashMap<String, CString>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    let c = names
        .entry(name.to_owned())
        .or_insert_with(|| CString::new(name.replace('\0', "?")).unwrap_or_default());
    c.as_ptr()
}

/// Adds the records of `op`, which is executing now, for the enabled kinds,
/// and hands each kernel of it to the range profiler
/// ([`crate::cupti_profiler::on_kernel`]) while one collects and neither
/// the memcpy nor the memset kind is enabled.
pub(crate) fn on_execute(st: &mut State, op: &Op, start: u64) {
    let kernels = kernel_kind(&st.cupti.enabled);
    let records = kernels.is_some() || st.cupti.enabled[MEMCPY] || st.cupti.enabled[MEMSET];
    // As CUPTI 13.0 on an H100 and an H200 (2026-11-28): the range
    // profiler records no range while the memcpy or memset activity kinds
    // are enabled.
    let ranges = st.cupti.profiler.collecting() && !st.cupti.enabled[MEMCPY] && !st.cupti.enabled[MEMSET];
    if !(records || ranges) {
        return;
    }
    // The kind of the kernel records, read only where `kernels` is `Some`.
    let kind = kernels.unwrap_or(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    let device = st.streams.get(&op.stream).map_or(0, |s| s.device);
    let (stream_id, corr) = (op.stream as u32, op.id as u32);
    for (work, (s, e), graph_id, graph_node) in spans(op, start) {
        if ranges && matches!(work, Work::Kernel(_) | Work::Nccl(_)) {
            let ctx = st.ctx_of(device);
            crate::cupti_profiler::on_kernel(st, ctx, op.id, e - s);
        }
        if !records {
            continue;
        }
        let c = &mut st.cupti;
        match work {
            Work::Kernel(l) if kernels.is_some() => {
                let mut k = kernel_record(kind, (s, e), device as u32, stream_id, corr, l.spec.name);
                [k.gridX, k.gridY, k.gridZ] = l.grid.map(|g| g as i32);
                [k.blockX, k.blockY, k.blockZ] = l.block.map(|b| b as i32);
                k.dynamicSharedMemory = l.shared as i32;
                k.graphId = graph_id;
                k.graphNodeId = graph_node;
                c.pending.push(SimRecord::Kernel(k));
            }
            Work::Copy { dst, src, len, .. } if c.enabled[MEMCPY] => {
                let mut m = CUpti_ActivityMemcpy6 {
                    kind: CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
                    ..Default::default()
                };
                m.start = s;
                m.end = e;
                m.bytes = *len;
                m.copyKind = match (src, dst) {
                    (Loc::Device(_), Loc::Device(_)) => 8,
                    (Loc::Device(_), _) => 2,
                    (_, Loc::Device(_)) => 1,
                    _ => 0,
                };
                m.deviceId = device as u32;
                m.contextId = device as u32 + 1;
                m.streamId = stream_id;
                m.correlationId = corr;
                m.graphId = graph_id;
                c.pending.push(SimRecord::Memcpy(m));
            }
            Work::Memset { count, elem, value, .. } if c.enabled[MEMSET] => {
                let mut m = CUpti_ActivityMemset4 {
                    kind: CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
                    ..Default::default()
                };
                m.start = s;
                m.end = e;
                m.bytes = count.saturating_mul(u64::from(*elem));
                m.value = *value;
                m.deviceId = device as u32;
                m.contextId = device as u32 + 1;
                m.streamId = stream_id;
                m.correlationId = corr;
                m.graphId = graph_id;
                c.pending.push(SimRecord::Memset(m));
            }
            Work::Nccl(p) if kernels.is_some() => {
                // One kernel per rank's part of a group, on its stream, as
                // NCCL launches one per group and device.
                let name = crate::nccl::kernel_name(p);
                let mut k = kernel_record(kind, (s, e), device as u32, stream_id, corr, name);
                [k.gridX, k.gridY, k.gridZ] = [1, 1, 1];
                [k.blockX, k.blockY, k.blockZ] = [1, 1, 1];
                c.pending.push(SimRecord::Kernel(k));
            }
            _ => {}
        }
    }
}

/// The parts of `op` CUPTI sees, each with its simulated `(start, end)`,
/// its graph id and node id (1 and the node's number from 1 for a graph
/// launch's nodes, laid one after the other from `start`; 0 and 0 for any
/// other operation, which spans `start..op.end`). The activity records and
/// the range profiler both read their times from here, so they agree.
fn spans(op: &Op, start: u64) -> impl Iterator<Item = (&Work, (u64, u64), u32, u64)> {
    let (nodes, single) = match &op.work {
        Work::Graph(g) => (&g.nodes[..], None),
        w => (&[][..], Some((w, op.end.saturating_sub(start)))),
    };
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (&n.work, n.duration, 1, i as u64 + 1))
        .chain(single.map(|(w, dur)| (w, dur, 0, 0)))
        .scan(start, |cursor, (w, dur, graph_id, node)| {
            let s = *cursor;
            *cursor = s.saturating_add(dur);
            Some((w, (s, *cursor), graph_id, node))
        })
}

/// The kind of the kernel records to write: the enabled one of the two
/// kernel kinds, `None` when neither is.
fn kernel_kind(enabled: &[bool; KINDS]) -> Option<CUpti_ActivityKind> {
    if enabled[SERIAL_KERNEL] {
        Some(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL)
    } else if enabled[KERNEL] {
        Some(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
    } else {
        None
    }
}

/// A kernel record of `kind` (one of the two kernel kinds) for `name` over
/// `(start, end)` on `device`'s stream `stream_id` (its context the
/// device's, numbered from 1), with correlation id `corr`; the launch shape
/// is the caller's to fill.
fn kernel_record(
    kind: CUpti_ActivityKind,
    (start, end): (u64, u64),
    device: u32,
    stream_id: u32,
    corr: u32,
    name: &str,
) -> CUpti_ActivityKernel10 {
    let mut k = CUpti_ActivityKernel10 { kind, ..Default::default() };
    k.start = start;
    k.end = end;
    k.deviceId = device;
    k.contextId = device + 1;
    k.streamId = stream_id;
    k.correlationId = corr;
    k.name = intern(name);
    k
}

fn record_size(r: &SimRecord) -> usize {
    match r {
        SimRecord::Kernel(_) => size_of::<CUpti_ActivityKernel10>(),
        SimRecord::Memcpy(_) => size_of::<CUpti_ActivityMemcpy6>(),
        SimRecord::Memset(_) => size_of::<CUpti_ActivityMemset4>(),
        SimRecord::External(_) => size_of::<CUpti_ActivityExternalCorrelation>(),
        SimRecord::Sync(_) => size_of::<CUpti_ActivitySynchronization2>(),
    }
}

/// Size of the record whose kind is at `p`, 0 for a kind not written here.
///
/// # Safety
/// `p` points at a record's first four bytes.
unsafe fn size_at(p: *const u8) -> usize {
    // SAFETY: the caller's promise; read unaligned as a plain integer.
    let kind = CUpti_ActivityKind(unsafe { std::ptr::read_unaligned(p.cast::<u32>()) });
    match kind {
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
        | CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL => size_of::<CUpti_ActivityKernel10>(),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY => size_of::<CUpti_ActivityMemcpy6>(),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET => size_of::<CUpti_ActivityMemset4>(),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION => {
            size_of::<CUpti_ActivityExternalCorrelation>()
        }
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => {
            size_of::<CUpti_ActivitySynchronization2>()
        }
        _ => 0,
    }
}

unsafe extern "C" fn cuptiGetVersion(version: *mut u32) -> CUptiResult {
    if version.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: non-null out-pointer from the caller.
    unsafe { *version = VERSION };
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiGetResultString(r: CUptiResult, s: *mut *const c_char) -> CUptiResult {
    if s.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let name = intern(cuda_sys::cupti::cupti_result_name(r));
    // SAFETY: non-null out-pointer; the interned string lives for the process.
    unsafe { *s = name };
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiGetTimestamp(t: *mut u64) -> CUptiResult {
    if t.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let st = match state::enter() {
        Ok(st) => st,
        Err(refused) => return refused.into(),
    };
    let now = st.streams.values().map(|s| s.tail_end).max().unwrap_or(0);
    // SAFETY: non-null out-pointer.
    unsafe { *t = now };
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut CUpti_SubscriberHandle,
    _callback: CUpti_CallbackFunc,
    _userdata: *mut c_void,
) -> CUptiResult {
    if subscriber.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let mut st = match state::enter() {
        Ok(st) => st,
        Err(refused) => return refused.into(),
    };
    if st.cupti.subscribed {
        return CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    st.cupti.subscribed = true;
    // SAFETY: non-null out-pointer; the handle is an opaque token.
    unsafe { *subscriber = std::ptr::dangling_mut() };
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiUnsubscribe(_subscriber: CUpti_SubscriberHandle) -> CUptiResult {
    match state::enter() {
        Ok(mut st) => st.cupti.subscribed = false,
        Err(refused) => return refused.into(),
    }
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiGetStreamIdEx(
    _ctx: CUcontext,
    stream: CUstream,
    _per_thread: u8,
    id: *mut u32,
) -> CUptiResult {
    if id.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let sid = stream.addr() as u64;
    let known = match state::enter() {
        Ok(st) => st.streams.contains_key(&sid),
        Err(refused) => return refused.into(),
    };
    if !known {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: non-null out-pointer.
    unsafe { *id = sid as u32 };
    CUptiResult::CUPTI_SUCCESS
}

fn kind_index(kind: CUpti_ActivityKind) -> Option<usize> {
    match kind {
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => Some(KERNEL),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL => Some(SERIAL_KERNEL),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY => Some(MEMCPY),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET => Some(MEMSET),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION => Some(EXTERNAL),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => Some(SYNC),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_OVERHEAD => Some(OVERHEAD),
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER => Some(DRIVER),
        _ => None,
    }
}

/// Enables `kind`; one kernel kind while the other is enabled is refused
/// with `CUPTI_ERROR_NOT_COMPATIBLE` (the header's error for a kind that
/// "cannot be enabled"), as libcupti 13 does on an H100 and an H200
/// (`cupti_recording_on_a_block_bound_kernel` in gpu-bench's GPU tests asks
/// it for both; NVIDIA's documentation does not say the two exclude each
/// other).
unsafe extern "C" fn cuptiActivityEnable(kind: CUpti_ActivityKind) -> CUptiResult {
    let Some(i) = kind_index(kind) else { return CUptiResult::CUPTI_ERROR_NOT_SUPPORTED };
    let other = match i {
        KERNEL => Some(SERIAL_KERNEL),
        SERIAL_KERNEL => Some(KERNEL),
        _ => None,
    };
    match state::enter() {
        Ok(st) if other.is_some_and(|o| st.cupti.enabled[o]) => {
            return CUptiResult::CUPTI_ERROR_NOT_COMPATIBLE;
        }
        Ok(mut st) => st.cupti.enabled[i] = true,
        Err(refused) => return refused.into(),
    }
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiActivityDisable(kind: CUpti_ActivityKind) -> CUptiResult {
    let Some(i) = kind_index(kind) else { return CUptiResult::CUPTI_ERROR_NOT_SUPPORTED };
    match state::enter() {
        Ok(mut st) => st.cupti.enabled[i] = false,
        Err(refused) => return refused.into(),
    }
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    requested: CUpti_BuffersCallbackRequestFunc,
    completed: CUpti_BuffersCallbackCompleteFunc,
) -> CUptiResult {
    let (Some(r), Some(c)) = (requested, completed) else {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    };
    let mut st = match state::enter() {
        Ok(st) => st,
        Err(refused) => return refused.into(),
    };
    st.cupti.requested = Some(r);
    st.cupti.completed = Some(c);
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiActivityFlushAll(_flag: u32) -> CUptiResult {
    // Take the records under the lock; call the program's callbacks
    // without it (they call back into this table).
    let (records, requested, completed) = {
        let mut st = match state::enter() {
            Ok(st) => st,
            Err(refused) => return refused.into(),
        };
        let c = &mut st.cupti;
        (std::mem::take(&mut c.pending), c.requested, c.completed)
    };
    let (Some(requested), Some(completed)) = (requested, completed) else {
        return if records.is_empty() {
            CUptiResult::CUPTI_SUCCESS
        } else {
            CUptiResult::CUPTI_ERROR_NOT_INITIALIZED
        };
    };
    let mut rest = records.as_slice();
    while !rest.is_empty() {
        let (mut buf, mut size, mut max) = (std::ptr::null_mut::<u8>(), 0usize, 0usize);
        // SAFETY: the program's buffer-request callback, with valid
        // out-pointers, as CUPTI calls it.
        unsafe { requested(&mut buf, &mut size, &mut max) };
        if buf.is_null() || size < record_size(&rest[0]) {
            return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
        }
        let mut used = 0usize;
        while let Some(r) = rest.first() {
            let n = record_size(r);
            if used + n > size {
                break;
            }
            // SAFETY: `buf` has `size` bytes (the callback's promise) and
            // `used + n <= size`; records are written unaligned-safe.
            unsafe {
                let p = buf.add(used);
                match r {
                    SimRecord::Kernel(k) => std::ptr::write_unaligned(p.cast(), *k),
                    SimRecord::Memcpy(m) => std::ptr::write_unaligned(p.cast(), *m),
                    SimRecord::Memset(m) => std::ptr::write_unaligned(p.cast(), *m),
                    SimRecord::External(x) => std::ptr::write_unaligned(p.cast(), *x),
                    SimRecord::Sync(y) => std::ptr::write_unaligned(p.cast(), *y),
                }
            }
            used += n;
            rest = &rest[1..];
        }
        // SAFETY: the program's completion callback gets back its own
        // buffer with `used` valid bytes.
        unsafe { completed(std::ptr::null_mut(), 0, buf, size, used) };
    }
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiActivityGetNextRecord(
    buffer: *mut u8,
    valid: usize,
    record: *mut *mut CUpti_Activity,
) -> CUptiResult {
    if buffer.is_null() || record.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: `record` is the caller's cursor (null to start, else a record
    // this function returned inside `buffer`).
    let cur = unsafe { *record }.cast::<u8>();
    let next = if cur.is_null() {
        0
    } else {
        let off = (cur as usize).wrapping_sub(buffer as usize);
        if off >= valid {
            return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: `cur` is a record inside the buffer's valid bytes.
        let n = unsafe { size_at(cur) };
        if n == 0 {
            return CUptiResult::CUPTI_ERROR_INVALID_KIND;
        }
        off + n
    };
    // SAFETY: a record fits in `valid` bytes from `next` (checked below
    // before its size is read: its kind needs 4 bytes).
    if next + 4 > valid || next + unsafe { size_at(buffer.add(next)) } > valid {
        return CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    // SAFETY: `next` is within the valid bytes; `record` is non-null.
    unsafe { *record = buffer.add(next).cast() };
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiActivityGetNumDroppedRecords(
    _ctx: CUcontext,
    _stream: u32,
    n: *mut usize,
) -> CUptiResult {
    if n.is_null() {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: non-null out-pointer; the simulator never drops a record.
    unsafe { *n = 0 };
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiActivityPushExternalCorrelationId(
    kind: CUpti_ExternalCorrelationKind,
    id: u64,
) -> CUptiResult {
    if kind.0 == 0 || kind.0 > CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2.0 {
        return CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let _ = PUSHED.try_with(|p| p.borrow_mut().push((kind.0, id)));
    CUptiResult::CUPTI_SUCCESS
}

unsafe extern "C" fn cuptiActivityPopExternalCorrelationId(
    kind: CUpti_ExternalCorrelationKind,
    last: *mut u64,
) -> CUptiResult {
    let popped = PUSHED
        .try_with(|p| {
            let mut p = p.borrow_mut();
            let at = p.iter().rposition(|(k, _)| *k == kind.0)?;
            Some(p.remove(at).1)
        })
        .ok()
        .flatten();
    let Some(id) = popped else { return CUptiResult::CUPTI_ERROR_QUEUE_EMPTY };
    if !last.is_null() {
        // SAFETY: non-null out-pointer from the caller.
        unsafe { *last = id };
    }
    CUptiResult::CUPTI_SUCCESS
}

/// The simulator's CUPTI table.
pub fn table() -> Cupti {
    let mut t = Cupti::empty(ORIGIN);
    t.cuptiGetVersion = Some(cuptiGetVersion);
    t.cuptiGetResultString = Some(cuptiGetResultString);
    t.cuptiGetTimestamp = Some(cuptiGetTimestamp);
    t.cuptiSubscribe = Some(cuptiSubscribe);
    t.cuptiUnsubscribe = Some(cuptiUnsubscribe);
    t.cuptiGetStreamIdEx = Some(cuptiGetStreamIdEx);
    t.cuptiActivityEnable = Some(cuptiActivityEnable);
    t.cuptiActivityDisable = Some(cuptiActivityDisable);
    t.cuptiActivityRegisterCallbacks = Some(cuptiActivityRegisterCallbacks);
    t.cuptiActivityFlushAll = Some(cuptiActivityFlushAll);
    t.cuptiActivityGetNextRecord = Some(cuptiActivityGetNextRecord);
    t.cuptiActivityGetNumDroppedRecords = Some(cuptiActivityGetNumDroppedRecords);
    t.cuptiActivityPushExternalCorrelationId = Some(cuptiActivityPushExternalCorrelationId);
    t.cuptiActivityPopExternalCorrelationId = Some(cuptiActivityPopExternalCorrelationId);
    crate::cupti_profiler::fill(&mut t);
    t
}

/// Makes the simulator's table the process-wide CUPTI
/// ([`cuda_sys::cupti::install_cupti`]) unless one is already in place;
/// returns whether the process-wide table is the simulator's.
pub fn install() -> bool {
    // SAFETY: every function of `table()` follows CUPTI's contract for the
    // pinned layouts: records are written as the structs their kind names,
    // and the cursor never leaves the buffer's valid bytes.
    let t = unsafe { cuda_sys::cupti::install_cupti(table()) };
    t.origin == ORIGIN
}
