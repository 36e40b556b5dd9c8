//! The process-wide CUPTI subscriber: the activity buffers handed to CUPTI,
//! the consumers that each get their copy of the records, and the parsing
//! of CUPTI's binary records into [`ActivityRecord`]s.

use super::error::{CuptiError, check, cupti_result_name};
use super::load::{Cupti, cupti};
use super::records::{ActivityKind, ActivityOp, ActivityRecord, KINDS, StreamRecords, SyncKind};
use crate::cupti_bindings as sys;
use crate::cupti_bindings::{
    CUpti_Activity, CUpti_ActivityExternalCorrelation, CUpti_ActivityKernel10, CUpti_ActivityKind,
    CUpti_ActivityMemcpy6, CUpti_ActivityMemset4, CUpti_ActivityOverhead3, CUpti_ActivitySynchronization2,
    CUpti_ExternalCorrelationKind, CUptiResult,
};
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

unsafe extern "C" {
    /// The C library's `free`, for the blocks CUPTI hands a consumer.
    fn free(p: *mut c_void);
}
/// Bytes of each activity buffer handed to CUPTI.
const BUFFER_BYTES: usize = 1 << 20;
/// Activity buffers are 8-byte aligned, as CUPTI requires.
const BUFFER_ALIGN: usize = 8;

/// One consumer's queue: the kinds it wants and what arrived.
struct Queue {
    kinds: [bool; KINDS],
    records: Vec<ActivityRecord>,
}

/// The process-wide CUPTI subscriber and activity-buffer owner (see the
/// module docs). Obtained from [`activity`].
pub struct Activity {
    table: &'static Cupti,
    /// Consumers by id.
    queues: Mutex<HashMap<u64, Queue>>,
    /// How many consumers want each kind (enabled while > 0).
    enabled: Mutex<[usize; KINDS]>,
    next_id: AtomicU64,
    dropped: AtomicU64,
    /// Kernel names by CUPTI's pointer, copied once.
    names: Mutex<HashMap<usize, Arc<str>>>,
    /// Held through each flush, so a flush returns only once every buffer
    /// another thread's flush took is in the queues.
    flushing: Mutex<()>,
}

impl std::fmt::Debug for Activity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activity").field("origin", &self.table.origin).finish_non_exhaustive()
    }
}

static ACTIVITY: OnceLock<Result<Activity, CuptiError>> = OnceLock::new();

/// The process-wide CUPTI subscriber: loads CUPTI, subscribes once and
/// registers the activity-buffer callbacks. The outcome is kept for the
/// process (a tool that owns the profiling interface owns it for good).
///
/// # Errors
/// [`CuptiError::NotFound`] without libcupti; [`CuptiError::Unavailable`]
/// when another tool owns the profiling interface.
pub fn activity() -> Result<&'static Activity, CuptiError> {
    ACTIVITY.get_or_init(Activity::start).as_ref().map_err(Clone::clone)
}

/// The subscriber's callback: the Activity API needs none, but subscribing
/// is how CUPTI tells whether another tool owns the interface.
unsafe extern "C" fn on_callback(
    _userdata: *mut c_void,
    _domain: sys::CUpti_CallbackDomain,
    _cbid: sys::CUpti_CallbackId,
    _cbdata: *const c_void,
) {
}

unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let Ok(layout) = std::alloc::Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN) else { return };
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    if buffer.is_null() || size.is_null() || max_records.is_null() {
        if !p.is_null() {
            // SAFETY: `p` was just allocated with `layout`.
            unsafe { std::alloc::dealloc(p, layout) };
        }
        return;
    }
    // SAFETY: CUPTI passes valid out-pointers (checked for null above). A
    // null buffer (allocation failure) makes CUPTI drop records, which it
    // counts and `buffer_completed` reports.
    unsafe {
        *buffer = p;
        *size = if p.is_null() { 0 } else { BUFFER_BYTES };
        *max_records = 0;
    }
}

unsafe extern "C" fn buffer_completed(
    ctx: sys::CUcontext,
    stream_id: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    if let Some(Ok(a)) = ACTIVITY.get() {
        // SAFETY: CUPTI hands back a buffer from `buffer_requested` with
        // `valid` bytes of records.
        unsafe { a.take_buffer(ctx, stream_id, buffer, valid) };
    }
    if !buffer.is_null()
        && size == BUFFER_BYTES
        && let Ok(layout) = std::alloc::Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN)
    {
        {
            // SAFETY: every buffer given to CUPTI was allocated by
            // `buffer_requested` with this layout, and CUPTI returns each once.
            unsafe { std::alloc::dealloc(buffer, layout) };
        }
    }
}

impl Activity {
    fn start() -> Result<Activity, CuptiError> {
        let table = cupti()?;
        let unavailable = |call: &'static str, r: CUptiResult| CuptiError::Unavailable {
            call,
            name: cupti_result_name(r),
            origin: table.origin.clone(),
        };
        let (Some(subscribe), Some(register)) = (table.cuptiSubscribe, table.cuptiActivityRegisterCallbacks)
        else {
            return Err(CuptiError::Call { call: "cuptiSubscribe", name: "missing" });
        };
        let mut handle: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
        // SAFETY: `handle` is a valid out-pointer; the callback is a no-op
        // `extern "C"` function living for the whole process. The
        // subscription is kept for the process (never unsubscribed).
        let r = unsafe { subscribe(&mut handle, Some(on_callback), std::ptr::null_mut()) };
        if r != CUptiResult::CUPTI_SUCCESS {
            return Err(unavailable("cuptiSubscribe", r));
        }
        // SAFETY: both callbacks are `extern "C"` functions with CUPTI's
        // signatures that live for the process.
        let r = unsafe { register(Some(buffer_requested), Some(buffer_completed)) };
        if r != CUptiResult::CUPTI_SUCCESS {
            return Err(unavailable("cuptiActivityRegisterCallbacks", r));
        }
        Ok(Activity {
            table,
            queues: Mutex::new(HashMap::new()),
            enabled: Mutex::new([0; KINDS]),
            next_id: AtomicU64::new(1),
            dropped: AtomicU64::new(0),
            names: Mutex::new(HashMap::new()),
            flushing: Mutex::new(()),
        })
    }

    /// Where the table came from (a path, or `cuda-sim`).
    pub fn origin(&self) -> &str {
        &self.table.origin
    }

    /// A consumer of `kinds`: the kinds are enabled while any consumer
    /// wants them, and every record of those kinds completed from now on is
    /// copied to this consumer (`cuptiActivityEnable`).
    ///
    /// # Errors
    /// The enable call's error; nothing stays enabled for this consumer then.
    pub fn consumer(&'static self, kinds: &[ActivityKind]) -> Result<Consumer, CuptiError> {
        let mut want = [false; KINDS];
        for k in kinds {
            want[k.index()] = true;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock_queues().insert(id, Queue { kinds: want, records: Vec::new() });
        let mut counted = [false; KINDS];
        let mut failed = None;
        {
            let mut enabled = self.enabled.lock().unwrap_or_else(|p| p.into_inner());
            'kinds: for k in ActivityKind::ALL {
                if !want[k.index()] {
                    continue;
                }
                if enabled[k.index()] == 0 {
                    for (n, raw) in k.raw().iter().enumerate() {
                        let r = match self.table.cuptiActivityEnable {
                            // SAFETY: a plain call with a kind of the pinned headers.
                            Some(f) => unsafe { f(*raw) },
                            None => CUptiResult::CUPTI_ERROR_NOT_SUPPORTED,
                        };
                        if r != CUptiResult::CUPTI_SUCCESS {
                            // Undo the kinds of this one enabled so far.
                            self.disable(&k.raw()[..n]);
                            failed = Some(r);
                            break 'kinds;
                        }
                    }
                }
                enabled[k.index()] += 1;
                counted[k.index()] = true;
            }
        }
        if let Some(r) = failed {
            self.release(id, counted);
            return Err(CuptiError::Unavailable {
                call: "cuptiActivityEnable",
                name: cupti_result_name(r),
                origin: self.table.origin.clone(),
            });
        }
        let consumer = Consumer { activity: self, id, kinds: want };
        Ok(consumer)
    }

    /// Pushes `id` as the calling thread's external correlation id of kind
    /// `CUSTOM0` (`cuptiActivityPushExternalCorrelationId`): every driver
    /// call the thread makes until [`Activity::pop_external_correlation`]
    /// gets an [`ActivityOp::ExternalCorrelation`] record pairing `id` with
    /// its correlation id (when a consumer asked for
    /// [`ActivityKind::ExternalCorrelation`]).
    ///
    /// # Errors
    /// The call's error; a table without the function.
    #[inline]
    pub fn push_external_correlation(&self, id: u64) -> Result<(), CuptiError> {
        let f = self
            .table
            .cuptiActivityPushExternalCorrelationId
            .ok_or(CuptiError::Call { call: "cuptiActivityPushExternalCorrelationId", name: "missing" })?;
        // SAFETY: a plain call with a kind of the pinned headers.
        check("cuptiActivityPushExternalCorrelationId", unsafe {
            f(CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id)
        })
    }

    /// Pops the calling thread's innermost external correlation id of kind
    /// `CUSTOM0` (`cuptiActivityPopExternalCorrelationId`) and returns it.
    ///
    /// # Errors
    /// The call's error (`CUPTI_ERROR_QUEUE_EMPTY` when none was pushed); a
    /// table without the function.
    #[inline]
    pub fn pop_external_correlation(&self) -> Result<u64, CuptiError> {
        let f = self
            .table
            .cuptiActivityPopExternalCorrelationId
            .ok_or(CuptiError::Call { call: "cuptiActivityPopExternalCorrelationId", name: "missing" })?;
        let mut last = 0u64;
        // SAFETY: `last` is a valid out-pointer.
        check("cuptiActivityPopExternalCorrelationId", unsafe {
            f(CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &mut last)
        })?;
        Ok(last)
    }

    /// CUPTI's id for `stream` of `context` (`cuptiGetStreamIdEx`), the
    /// `stream_id` its records carry.
    ///
    /// # Errors
    /// The call's error.
    pub fn stream_id(&self, context: crate::CUcontext, stream: crate::CUstream) -> Result<u32, CuptiError> {
        let f = self
            .table
            .cuptiGetStreamIdEx
            .ok_or(CuptiError::Call { call: "cuptiGetStreamIdEx", name: "missing" })?;
        let mut id = 0u32;
        // SAFETY: the handles are passed through as the opaque values CUPTI
        // takes (the two headers declare the same incomplete types); `id` is
        // a valid out-pointer.
        check("cuptiGetStreamIdEx", unsafe { f(context.cast(), stream.cast(), 0, &mut id) })?;
        Ok(id)
    }

    /// The records of `stream` of `context`: its CUPTI id
    /// ([`Activity::stream_id`]) and the filter that picks its device
    /// operations from a consumer's records.
    ///
    /// # Errors
    /// The call's error.
    pub fn stream_records(
        &self,
        context: crate::CUcontext,
        stream: crate::CUstream,
    ) -> Result<StreamRecords, CuptiError> {
        self.stream_id(context, stream).map(StreamRecords::new)
    }

    /// CUPTI's clock now, ns (`cuptiGetTimestamp`): the clock of the
    /// records' timestamps.
    ///
    /// # Errors
    /// The call's error.
    pub fn timestamp(&self) -> Result<u64, CuptiError> {
        let f = self
            .table
            .cuptiGetTimestamp
            .ok_or(CuptiError::Call { call: "cuptiGetTimestamp", name: "missing" })?;
        let mut t = 0u64;
        // SAFETY: `t` is a valid out-pointer.
        check("cuptiGetTimestamp", unsafe { f(&mut t) })?;
        Ok(t)
    }

    /// Records CUPTI dropped for lack of buffer space since the process
    /// began (`cuptiActivityGetNumDroppedRecords`, summed at each completed
    /// buffer).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Hands every buffer with completed records back now
    /// (`cuptiActivityFlushAll` with `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`).
    /// Flushes of several threads are one at a time: a flush takes the
    /// completed records and hands them to the consumers in its callbacks,
    /// so without this a second thread's flush could find nothing left and
    /// return before the first had queued its records (that thread's
    /// [`Consumer::take`] then missing them).
    ///
    /// # Errors
    /// The call's error.
    pub fn flush(&self) -> Result<(), CuptiError> {
        let f = self
            .table
            .cuptiActivityFlushAll
            .ok_or(CuptiError::Call { call: "cuptiActivityFlushAll", name: "missing" })?;
        let _one = self.flushing.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: a plain call; the completed-buffer callback it may run
        // takes `queues` itself, which this thread does not hold here.
        check("cuptiActivityFlushAll", unsafe {
            f(sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED.0)
        })
    }

    fn lock_queues(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Queue>> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Parses one completed buffer and copies each record to the consumers
    /// that want its kind.
    ///
    /// # Safety
    /// `buffer` holds `valid` bytes of activity records written by the
    /// table's CUPTI (null with `valid == 0` is allowed).
    unsafe fn take_buffer(&self, ctx: sys::CUcontext, stream_id: u32, buffer: *mut u8, valid: usize) {
        let mut parsed = Vec::new();
        if let (false, Some(next)) = (buffer.is_null(), self.table.cuptiActivityGetNextRecord) {
            let mut rec: *mut CUpti_Activity = std::ptr::null_mut();
            loop {
                // SAFETY: `buffer`/`valid` describe the completed buffer;
                // `rec` is the cursor CUPTI advances (null to start).
                let r = unsafe { next(buffer, valid, &mut rec) };
                if r != CUptiResult::CUPTI_SUCCESS || rec.is_null() {
                    break;
                }
                // SAFETY: CUPTI returned `rec` inside the buffer, a record
                // whose layout its `kind` names (the table's contract).
                if let Some(p) = unsafe { self.parse(rec) } {
                    parsed.push(p);
                }
            }
        }
        if let Some(f) = self.table.cuptiActivityGetNumDroppedRecords {
            let mut n = 0usize;
            // SAFETY: `n` is a valid out-pointer; `ctx`/`stream_id` are the
            // ones CUPTI passed with this buffer.
            if unsafe { f(ctx, stream_id, &mut n) } == CUptiResult::CUPTI_SUCCESS && n > 0 {
                self.dropped.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        if parsed.is_empty() {
            return;
        }
        let mut queues = self.lock_queues();
        for q in queues.values_mut() {
            q.records.extend(parsed.iter().filter(|r| ActivityKind::wanted(&q.kinds, r)).cloned());
        }
    }

    /// One record as a Rust value; `None` for kinds not asked for.
    ///
    /// # Safety
    /// `rec` points at a complete record of the layout its `kind` names.
    unsafe fn parse(&self, rec: *const CUpti_Activity) -> Option<ActivityRecord> {
        // SAFETY: every record starts with its kind (the caller's promise).
        let kind = unsafe { (*rec).kind };
        match kind {
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
            | CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL => {
                // SAFETY: a kernel record of CUPTI 13.0 is a
                // `CUpti_ActivityKernel10` (the caller's promise); read
                // unaligned in case a software table packs records.
                let k = unsafe { std::ptr::read_unaligned(rec.cast::<CUpti_ActivityKernel10>()) };
                Some(ActivityRecord {
                    start_ns: k.start,
                    end_ns: k.end,
                    device_id: k.deviceId,
                    context_id: k.contextId,
                    stream_id: k.streamId,
                    correlation_id: k.correlationId,
                    op: ActivityOp::Kernel {
                        name: self.name(k.name),
                        grid: [k.gridX, k.gridY, k.gridZ],
                        block: [k.blockX, k.blockY, k.blockZ],
                        graph_id: k.graphId,
                        graph_node_id: k.graphNodeId,
                    },
                })
            }
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY => {
                // SAFETY: as above, a `CUpti_ActivityMemcpy6`.
                let m = unsafe { std::ptr::read_unaligned(rec.cast::<CUpti_ActivityMemcpy6>()) };
                Some(ActivityRecord {
                    start_ns: m.start,
                    end_ns: m.end,
                    device_id: m.deviceId,
                    context_id: m.contextId,
                    stream_id: m.streamId,
                    correlation_id: m.correlationId,
                    op: ActivityOp::Memcpy { bytes: m.bytes, copy_kind: m.copyKind },
                })
            }
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET => {
                // SAFETY: as above, a `CUpti_ActivityMemset4`.
                let m = unsafe { std::ptr::read_unaligned(rec.cast::<CUpti_ActivityMemset4>()) };
                Some(ActivityRecord {
                    start_ns: m.start,
                    end_ns: m.end,
                    device_id: m.deviceId,
                    context_id: m.contextId,
                    stream_id: m.streamId,
                    correlation_id: m.correlationId,
                    op: ActivityOp::Memset { bytes: m.bytes, value: m.value },
                })
            }
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION => {
                // SAFETY: as above, a `CUpti_ActivityExternalCorrelation`.
                let x = unsafe { std::ptr::read_unaligned(rec.cast::<CUpti_ActivityExternalCorrelation>()) };
                Some(ActivityRecord {
                    start_ns: 0,
                    end_ns: 0,
                    device_id: 0,
                    context_id: 0,
                    stream_id: 0,
                    correlation_id: x.correlationId,
                    op: ActivityOp::ExternalCorrelation {
                        external_kind: x.externalKind.0,
                        external_id: x.externalId,
                    },
                })
            }
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => {
                // SAFETY: as above, a `CUpti_ActivitySynchronization2`.
                let y = unsafe { std::ptr::read_unaligned(rec.cast::<CUpti_ActivitySynchronization2>()) };
                Some(ActivityRecord {
                    start_ns: y.start,
                    end_ns: y.end,
                    device_id: 0,
                    context_id: y.contextId,
                    stream_id: y.streamId,
                    correlation_id: y.correlationId,
                    op: ActivityOp::Synchronization {
                        sync: SyncKind::from_raw(y.type_.0),
                        event_id: y.cudaEventId,
                    },
                })
            }
            CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_OVERHEAD => {
                // SAFETY: as above, a `CUpti_ActivityOverhead3`.
                let o = unsafe { std::ptr::read_unaligned(rec.cast::<CUpti_ActivityOverhead3>()) };
                if !o.overheadData.is_null() {
                    // SAFETY: CUPTI hands the consumer the details block,
                    // `malloc`ed, to free with `free` (cupti_activity.h on
                    // `overheadData`; the table's contract); the copy read
                    // above is the only one that names it.
                    unsafe { free(o.overheadData) };
                }
                Some(ActivityRecord {
                    start_ns: o.start,
                    end_ns: o.end,
                    device_id: 0,
                    context_id: 0,
                    stream_id: 0,
                    correlation_id: o.correlationId,
                    op: ActivityOp::Overhead { overhead_kind: o.overheadKind.0, object_kind: o.objectKind.0 },
                })
            }
            _ => None,
        }
    }

    /// A kernel's name, copied once per CUPTI string.
    fn name(&self, p: *const c_char) -> Arc<str> {
        if p.is_null() {
            return Arc::from("");
        }
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        names
            .entry(p as usize)
            .or_insert_with(|| {
                // SAFETY: CUPTI's kernel names are NUL-terminated strings it
                // keeps for the process.
                Arc::from(unsafe { CStr::from_ptr(p) }.to_string_lossy().as_ref())
            })
            .clone()
    }

    fn release(&self, id: u64, kinds: [bool; KINDS]) {
        self.lock_queues().remove(&id);
        let mut enabled = self.enabled.lock().unwrap_or_else(|p| p.into_inner());
        for k in ActivityKind::ALL {
            let i = k.index();
            if !kinds[i] || enabled[i] == 0 {
                continue;
            }
            enabled[i] -= 1;
            if enabled[i] == 0 {
                self.disable(k.raw());
            }
        }
    }

    /// `cuptiActivityDisable` for each of `raw` (failures logged).
    fn disable(&self, raw: &[CUpti_ActivityKind]) {
        let Some(f) = self.table.cuptiActivityDisable else { return };
        for k in raw {
            // SAFETY: a plain call with a kind of the pinned headers.
            let r = unsafe { f(*k) };
            if r != CUptiResult::CUPTI_SUCCESS {
                log::warn!("cuptiActivityDisable: {}", cupti_result_name(r));
            }
        }
    }
}

/// One consumer of activity records (see [`Activity::consumer`]); its
/// kinds stay enabled until it is dropped.
#[derive(Debug)]
pub struct Consumer {
    activity: &'static Activity,
    id: u64,
    kinds: [bool; KINDS],
}

impl Consumer {
    /// The subscriber this consumer belongs to.
    pub fn activity(&self) -> &'static Activity {
        self.activity
    }

    /// Flushes CUPTI's buffers ([`Activity::flush`]) and takes every record
    /// that arrived for this consumer, oldest buffer first.
    ///
    /// # Errors
    /// The flush's error.
    pub fn take(&self) -> Result<Vec<ActivityRecord>, CuptiError> {
        self.activity.flush()?;
        let mut q = self.activity.lock_queues();
        Ok(q.get_mut(&self.id).map(|q| std::mem::take(&mut q.records)).unwrap_or_default())
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.activity.release(self.id, self.kinds);
    }
}
