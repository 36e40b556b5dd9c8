//! CUPTI, the CUDA profiling interface, loaded at run time like libcuda:
//! the GPU's own start and end timestamps of every kernel, copy and memset
//! (the Activity API), so a timer can be checked against the device's clock.
//!
//! - [`Cupti`]: the function table, one field per function CUPTI exports
//!   that this workspace uses, typed by the generated `PFN_*` typedefs
//!   (`cupti_bindings.rs`, from the pinned `nvidia-cuda-cupti` wheel's
//!   headers). A software driver fills the same table ([`Cupti::empty`],
//!   then [`install_cupti`]), as cuda-sim does for the driver.
//! - [`cupti`]: the process-wide table: the installed one, else `libcupti`
//!   loaded from, in order, `CUDA_SYS_LIBCUPTI`, the pinned wheel under this
//!   workspace's `target/cuda-wheels/`, the CUDA toolkit
//!   (`/usr/local/cuda/extras/CUPTI/lib64`, `/usr/local/cuda/lib64`), and
//!   the dynamic loader's path. Its version must be of the 13.0 line the
//!   record layouts were generated from.
//! - [`Activity`] / [`activity`]: the one process-wide CUPTI subscriber and
//!   activity-buffer owner. Consumers ([`Activity::consumer`]) each get
//!   their own copy of the records of the kinds they asked for; records
//!   CUPTI dropped for lack of buffer space are counted, never lost
//!   silently. Under compute-sanitizer or Nsight Compute, which own the
//!   profiling interface, subscribing fails and [`activity`] returns
//!   [`CuptiError::Unavailable`].
//!
//! Nothing here knows about gpu-sync's safety rules: it types the calls and
//! turns CUPTI's binary records into plain Rust values.

mod records;

pub use records::{ActivityKind, ActivityOp, ActivityRecord, EXTERNAL_KIND_CUSTOM0, StreamRecords, SyncKind};

use crate::cupti_bindings as sys;
use crate::cupti_bindings::{
    CUpti_Activity, CUpti_ActivityExternalCorrelation, CUpti_ActivityKernel10, CUpti_ActivityKind,
    CUpti_ActivityMemcpy6, CUpti_ActivityMemset4, CUpti_ActivityOverhead3, CUpti_ActivitySynchronization2,
    CUpti_ExternalCorrelationKind, CUptiResult,
};
use libloading::Library;
use records::KINDS;
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Environment variable naming the libcupti to load.
pub const LIBCUPTI_ENV: &str = "CUDA_SYS_LIBCUPTI";

/// The CUPTI API version the record layouts were generated for.
pub const CUPTI_HEADER_VERSION: u32 = sys::CUPTI_API_VERSION;

/// The pinned wheel's library, where `cargo xtask bindgen` installs it.
const WHEEL_LIB: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../target/cuda-wheels/nvidia/cu13/lib/libcupti.so.13");

/// Where a CUDA toolkit keeps libcupti.
const TOOLKIT_LIBS: &[&str] = &[
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
    "/usr/local/cuda/lib64/libcupti.so.13",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",
];

/// Library names tried on the dynamic loader's path.
const SONAMES: &[&str] = &["libcupti.so.13", "libcupti.so"];

macro_rules! cupti_table {
    ($($name:ident: $pfn:ident,)*) => {
        /// CUPTI's function table: each field the function of that name,
        /// `None` where the library (or a software implementation) lacks it.
        /// Built by [`load_cupti`] from libcupti, or by a software driver
        /// from [`Cupti::empty`].
        #[allow(non_snake_case)]
        pub struct Cupti {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                pub $name: sys::$pfn,
            )*
            /// Where the table came from (a library path, or `cuda-sim`).
            pub origin: String,
            /// The library the pointers live in, kept loaded with the table.
            _library: Option<Library>,
        }

        #[allow(non_snake_case)]
        impl Cupti {
            /// Every function this table binds, by name.
            pub const FUNCTIONS: &'static [&'static str] = &[$(stringify!($name),)*];

            /// A table with every function `None`, for a software
            /// implementation to fill in.
            pub fn empty(origin: &str) -> Cupti {
                Cupti { $($name: None,)* origin: origin.to_owned(), _library: None }
            }

            /// The functions this table lacks.
            pub fn missing(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(
                    if self.$name.is_none() {
                        out.push(stringify!($name));
                    }
                )*
                out
            }

            /// Resolves every function from `library`.
            ///
            /// # Safety
            /// `library` must be a libcupti whose exported functions have
            /// the signatures of the pinned headers (the version check in
            /// [`load_cupti`] establishes the 13.0 line).
            unsafe fn from_library(library: Library, origin: &str) -> Result<Cupti, String> {
                $(
                    // SAFETY: `sys::$pfn` is the generated pointer type of
                    // the function of this name (its declaration's
                    // `__typeof__`), so the symbol's type is right by the
                    // caller's promise; the pointer is copied out and the
                    // library is kept alive in the table beside it.
                    let $name: sys::$pfn = unsafe {
                        library
                            .get::<sys::$pfn>(concat!(stringify!($name), "\0").as_bytes())
                            .map(|s| *s)
                            .map_err(|e| format!("{} missing: {e}", stringify!($name)))?
                    };
                )*
                Ok(Cupti { $($name,)* origin: origin.to_owned(), _library: Some(library) })
            }
        }
    };
}

cupti_table! {
    cuptiGetVersion: PFN_cuptiGetVersion,
    cuptiGetResultString: PFN_cuptiGetResultString,
    cuptiGetTimestamp: PFN_cuptiGetTimestamp,
    cuptiSubscribe: PFN_cuptiSubscribe,
    cuptiUnsubscribe: PFN_cuptiUnsubscribe,
    cuptiGetStreamIdEx: PFN_cuptiGetStreamIdEx,
    cuptiActivityEnable: PFN_cuptiActivityEnable,
    cuptiActivityDisable: PFN_cuptiActivityDisable,
    cuptiActivityRegisterCallbacks: PFN_cuptiActivityRegisterCallbacks,
    cuptiActivityFlushAll: PFN_cuptiActivityFlushAll,
    cuptiActivityGetNextRecord: PFN_cuptiActivityGetNextRecord,
    cuptiActivityGetNumDroppedRecords: PFN_cuptiActivityGetNumDroppedRecords,
    cuptiActivityPushExternalCorrelationId: PFN_cuptiActivityPushExternalCorrelationId,
    cuptiActivityPopExternalCorrelationId: PFN_cuptiActivityPopExternalCorrelationId,
}

impl std::fmt::Debug for Cupti {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cupti").field("origin", &self.origin).field("missing", &self.missing()).finish()
    }
}

/// Why CUPTI cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CuptiError {
    /// No libcupti could be loaded.
    #[error(
        "could not load CUPTI (libcupti.so.13): {}. Install it — `pip install nvidia-cuda-cupti==13.0.85` \
         (or `cargo xtask bindgen`, which installs it under target/cuda-wheels/), or the CUDA toolkit — \
         and set {LIBCUPTI_ENV} to the library's path",
        tried.iter().map(|(p, e)| format!("tried {p} ({e})")).collect::<Vec<_>>().join(", ")
    )]
    NotFound {
        /// Each path tried, with why it failed.
        tried: Vec<(String, String)>,
    },
    /// CUPTI is loaded but another tool owns the profiling interface
    /// (compute-sanitizer, Nsight Compute or Systems), or it refused.
    #[error("CUPTI is unavailable: {call} returned {name} ({origin}){hint}",
        hint = if *name == "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" {
            "; another tool (compute-sanitizer, ncu, nsys) owns the profiling interface"
        } else { "" })]
    Unavailable {
        /// The CUPTI call that refused.
        call: &'static str,
        /// Its result's name.
        name: &'static str,
        /// The table's origin.
        origin: String,
    },
    /// A CUPTI call failed.
    #[error("{call} failed: {name}")]
    Call {
        /// The CUPTI call.
        call: &'static str,
        /// Its result's name.
        name: &'static str,
    },
}

unsafe extern "C" {
    /// The C library's `free`, for the blocks CUPTI hands a consumer.
    fn free(p: *mut c_void);
}

/// The name of a `CUptiResult` (`CUPTI_ERROR_NOT_INITIALIZED`), without a
/// call into the library.
pub fn cupti_result_name(r: CUptiResult) -> &'static str {
    match r {
        CUptiResult::CUPTI_SUCCESS => "CUPTI_SUCCESS",
        CUptiResult::CUPTI_ERROR_INVALID_PARAMETER => "CUPTI_ERROR_INVALID_PARAMETER",
        CUptiResult::CUPTI_ERROR_INVALID_DEVICE => "CUPTI_ERROR_INVALID_DEVICE",
        CUptiResult::CUPTI_ERROR_INVALID_CONTEXT => "CUPTI_ERROR_INVALID_CONTEXT",
        CUptiResult::CUPTI_ERROR_INVALID_OPERATION => "CUPTI_ERROR_INVALID_OPERATION",
        CUptiResult::CUPTI_ERROR_INVALID_KIND => "CUPTI_ERROR_INVALID_KIND",
        CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED => "CUPTI_ERROR_MAX_LIMIT_REACHED",
        CUptiResult::CUPTI_ERROR_NOT_INITIALIZED => "CUPTI_ERROR_NOT_INITIALIZED",
        CUptiResult::CUPTI_ERROR_NOT_COMPATIBLE => "CUPTI_ERROR_NOT_COMPATIBLE",
        CUptiResult::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES => "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
        CUptiResult::CUPTI_ERROR_NOT_SUPPORTED => "CUPTI_ERROR_NOT_SUPPORTED",
        CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => {
            "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
        }
        CUptiResult::CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE => "CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE",
        CUptiResult::CUPTI_ERROR_UNKNOWN => "CUPTI_ERROR_UNKNOWN",
        _ => "CUPTI_ERROR (unnamed code)",
    }
}

fn check(call: &'static str, r: CUptiResult) -> Result<(), CuptiError> {
    if r == CUptiResult::CUPTI_SUCCESS {
        Ok(())
    } else {
        Err(CuptiError::Call { call, name: cupti_result_name(r) })
    }
}

/// The candidates [`cupti`] tries, in order.
pub fn cupti_candidates() -> Vec<String> {
    let mut c = Vec::new();
    if let Some(p) = std::env::var_os(LIBCUPTI_ENV) {
        c.push(p.to_string_lossy().into_owned());
    }
    c.push(WHEEL_LIB.to_owned());
    c.extend(TOOLKIT_LIBS.iter().map(|s| (*s).to_owned()));
    c.extend(SONAMES.iter().map(|s| (*s).to_owned()));
    c
}

/// Loads libcupti from the first of `candidates` that opens, has every
/// function of the table and reports a version of the headers' 13.0 line.
///
/// # Errors
/// [`CuptiError::NotFound`] listing each candidate and why it failed.
pub fn load_cupti(candidates: &[String]) -> Result<Cupti, CuptiError> {
    let mut tried = Vec::new();
    for path in candidates {
        // SAFETY: opening libcupti runs its initializers, which have no
        // preconditions (it attaches to the driver lazily, at the first
        // CUPTI call).
        let lib = match unsafe { Library::new(path) } {
            Ok(l) => l,
            Err(e) => {
                tried.push((path.clone(), e.to_string()));
                continue;
            }
        };
        // SAFETY: the version is checked right below, before any other
        // function of the table is called; `cuptiGetVersion`'s signature
        // has been the same since CUPTI 1.
        let table = match unsafe { Cupti::from_library(lib, path) } {
            Ok(t) => t,
            Err(e) => {
                tried.push((path.clone(), e));
                continue;
            }
        };
        match version_of(&table) {
            Ok(v) if v / 100 == CUPTI_HEADER_VERSION / 100 => return Ok(table),
            Ok(v) => tried.push((
                path.clone(),
                format!(
                    "CUPTI API version {v}, but the record layouts are of {CUPTI_HEADER_VERSION} (13.0 line)"
                ),
            )),
            Err(e) => tried.push((path.clone(), e.to_string())),
        }
    }
    Err(CuptiError::NotFound { tried })
}

/// `cuptiGetVersion` through `table`.
fn version_of(table: &Cupti) -> Result<u32, CuptiError> {
    let f = table.cuptiGetVersion.ok_or(CuptiError::Call { call: "cuptiGetVersion", name: "missing" })?;
    let mut v = 0u32;
    // SAFETY: `v` is a valid out-pointer for the call's duration.
    check("cuptiGetVersion", unsafe { f(&mut v) })?;
    Ok(v)
}

static CUPTI: OnceLock<Cupti> = OnceLock::new();
static CUPTI_INIT: Mutex<()> = Mutex::new(());

/// The process-wide CUPTI table: the [`install_cupti`]ed one, else
/// libcupti loaded on first use (see the module docs).
///
/// # Errors
/// [`CuptiError::NotFound`]; a failed load is retried on the next call.
pub fn cupti() -> Result<&'static Cupti, CuptiError> {
    if let Some(c) = CUPTI.get() {
        return Ok(c);
    }
    let _guard = CUPTI_INIT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = CUPTI.get() {
        return Ok(c);
    }
    let table = load_cupti(&cupti_candidates())?;
    Ok(CUPTI.get_or_init(|| table))
}

/// Makes `table` the process-wide CUPTI table; returns the table already in
/// place if there is one (the first wins, as for the driver).
///
/// # Safety
/// Every function in `table` must behave as CUPTI documents it for the
/// record layouts of the pinned headers: in particular records handed to
/// the buffer-completed callback must be `CUpti_ActivityKernel10`,
/// `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemset4`,
/// `CUpti_ActivityExternalCorrelation`, `CUpti_ActivitySynchronization2` or
/// `CUpti_ActivityOverhead3` as their `kind` says (an overhead record's
/// `overheadData` null or a `malloc`ed block the consumer frees),
/// and `cuptiActivityGetNextRecord` must only return pointers inside the
/// buffer it was given.
pub unsafe fn install_cupti(table: Cupti) -> &'static Cupti {
    let _guard = CUPTI_INIT.lock().unwrap_or_else(|p| p.into_inner());
    CUPTI.get_or_init(|| table)
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
    ///
    /// # Errors
    /// The call's error.
    pub fn flush(&self) -> Result<(), CuptiError> {
        let f = self
            .table
            .cuptiActivityFlushAll
            .ok_or(CuptiError::Call { call: "cuptiActivityFlushAll", name: "missing" })?;
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
            q.records.extend(parsed.iter().filter(|r| q.kinds[r.kind().index()]).cloned());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_naming_what_was_tried_and_what_to_install() {
        let e = load_cupti(&["/nonexistent/libcupti.so.13".to_owned()]).unwrap_err();
        let CuptiError::NotFound { tried } = &e else { panic!("{e:?}") };
        assert_eq!(tried.len(), 1);
        let text = e.to_string();
        assert!(text.contains("/nonexistent/libcupti.so.13"), "{text}");
        assert!(text.contains("nvidia-cuda-cupti==13.0.85") && text.contains(LIBCUPTI_ENV), "{text}");
    }

    #[test]
    fn a_library_without_cuptis_functions_is_skipped_with_the_missing_one_named() {
        // libc opens but exports none of CUPTI's functions.
        let e = load_cupti(&["libc.so.6".to_owned()]).unwrap_err();
        let CuptiError::NotFound { tried } = &e else { panic!("{e:?}") };
        assert!(tried[0].1.contains("cuptiGetVersion missing"), "{tried:?}");
    }

    #[test]
    fn the_table_names_every_function_and_an_empty_one_lacks_them_all() {
        let t = Cupti::empty("test");
        assert_eq!(t.missing(), Cupti::FUNCTIONS);
        assert!(Cupti::FUNCTIONS.contains(&"cuptiActivityGetNextRecord"));
        assert_eq!(cupti_result_name(CUptiResult::CUPTI_SUCCESS), "CUPTI_SUCCESS");
        assert_eq!(cupti_result_name(CUptiResult(987_654)), "CUPTI_ERROR (unnamed code)");
    }
}
