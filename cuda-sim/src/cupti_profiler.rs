//! CUPTI's range profiler over the simulator, as far as cuda-sys's
//! `KernelDurations` uses it: one counter, `gpu__time_duration.sum`, auto
//! ranges (one per kernel), kernel replay, one pass.
//!
//! What it models: `cuptiProfilerInitialize` (once; every later call that
//! makes or reads profiler state needs it, `CUPTI_ERROR_NOT_INITIALIZED`
//! before), the chip name of the simulated devices (`GH100`, an H100's),
//! their counter availability image, host objects that accept the one
//! metric (any other name is `CUPTI_ERROR_INVALID_PARAMETER`) and build a
//! one-pass configuration image, and one range profiler object per context
//! (`cuptiRangeProfilerEnable`; a second on the same context is
//! `CUPTI_ERROR_INVALID_OPERATION`).
//!
//! Between `cuptiRangeProfilerStart` and `cuptiRangeProfilerStop`, each
//! kernel of the object's context that the simulator executes — one
//! enqueued after the start (a kernel queued before it is not profiled,
//! even though the simulator runs queued work only when the host waits) —
//! is one range, in execution order: a launch's kernel, a graph launch's
//! kernel nodes, a rank's part of an NCCL call, exactly the kernels the
//! activity records report (`crate::cupti::on_execute` hands them over with
//! the same span). Its value is the kernel's simulated duration in
//! nanoseconds (end − start of its record). Copies and memsets are not
//! ranges. Kernels past `maxRangesPerPass` are dropped and counted
//! (`numOfRangeDropped` of `cuptiRangeProfilerDecodeData`). A kernel queued
//! between the start and the stop that has not run by the stop (the host
//! did not wait for it) is not profiled: the caller waits first, as
//! `KernelDurations::stop` documents. The profiler follows the context, not
//! a [`crate::Session`]: sessions share contexts, so a test that profiles
//! must not run beside one launching on the same device.
//!
//! The images are the simulator's own layouts, in native byte order, read
//! and written unaligned; each starts with an 8-byte magic, checked
//! wherever an image comes back (`CUPTI_ERROR_INVALID_PARAMETER` for a
//! foreign or clobbered one):
//! - counter availability (16 bytes): `cusimCA1`, the device ordinal (u64);
//! - configuration (16 bytes): `cusimCF1`, the metric count (u64, 1);
//! - counter data (`32 + 8 × capacity` bytes): `cusimRP1`, the capacity in
//!   ranges, the ranges written, the ranges dropped (three u64), then one
//!   f64 per range, its `gpu__time_duration.sum` in ns. Initialized by
//!   `cuptiRangeProfilerCounterDataImageInitialize` (capacity from its
//!   size, nothing written), filled by `cuptiRangeProfilerDecodeData` into
//!   the image `cuptiRangeProfilerSetConfig` was given (which the caller
//!   keeps until then, CUPTI's own contract).
//!
//! Misuse is an error, never a panic: a null or short parameter struct (a
//! `structSize` below `CUPTI_PROFILER_STRUCT_SIZE`, the bytes up to the
//! last named field), a null pointer the call needs, an unknown host or
//! profiler object, a range index past the image's ranges:
//! `CUPTI_ERROR_INVALID_PARAMETER`; calls out of order (start before a
//! configuration, a start while started, a stop while stopped, a
//! configuration or decode while collecting):
//! `CUPTI_ERROR_INVALID_OPERATION`; user ranges, user or application
//! replay, PM sampling: `CUPTI_ERROR_NOT_SUPPORTED`. Disabling a
//! collecting object ends its collection (its ranges are lost).
//!
//! Every call that touches the simulator's state goes through its one door
//! (`state::enter`): from inside the simulator (a host function, a
//! registered kernel's CPU version) it is refused with
//! `CUPTI_ERROR_INVALID_OPERATION`, like the rest of the CUPTI table. The
//! calls that only read images the caller passes
//! (`cuptiProfilerHostGetNumOfPasses`,
//! `cuptiRangeProfilerGetCounterDataInfo`) take no lock, as
//! `cuptiGetVersion` takes none.
//!
//! This module holds `unsafe` code because CUPTI's C interface passes
//! parameter structs, images and out-pointers as raw pointers; each is
//! checked for null and its size before it is read or written.
#![allow(unsafe_code, non_snake_case)]

use crate::entry::{handle, id};
use crate::state::{self, State};
use cuda_sys::cupti::Cupti;
use cuda_sys::cupti_bindings as sys;
use cuda_sys::cupti_bindings::CUptiResult;
use std::collections::HashMap;
use std::ffi::{CStr, c_char};

/// The one counter the simulated profiler knows.
const METRIC: &CStr = c"gpu__time_duration.sum";

/// The chip of the simulated devices (H100-like: an H100's chip name).
const CHIP: &CStr = c"GH100";

/// First host or profiler object handle; they step by 16, apart from the
/// driver's handles.
const FIRST_HANDLE: u64 = 0x7c00_0000;

/// Magic of the counter availability image.
const AVAILABILITY_MAGIC: [u8; 8] = *b"cusimCA1";
/// Bytes of the counter availability image: magic, device ordinal.
const AVAILABILITY_SIZE: usize = 16;

/// Magic of the configuration image.
const CONFIG_MAGIC: [u8; 8] = *b"cusimCF1";
/// Bytes of the configuration image: magic, metric count.
const CONFIG_SIZE: usize = 16;

/// Magic of the counter data image.
const COUNTER_MAGIC: [u8; 8] = *b"cusimRP1";
/// Bytes of the counter data image's header: magic, capacity, ranges
/// written, ranges dropped.
const COUNTER_HEADER: usize = 32;
/// Bytes of one range in the counter data image (its f64 value).
const RANGE_BYTES: usize = 8;

const OK: CUptiResult = CUptiResult::CUPTI_SUCCESS;
const BAD: CUptiResult = CUptiResult::CUPTI_ERROR_INVALID_PARAMETER;
const ORDER: CUptiResult = CUptiResult::CUPTI_ERROR_INVALID_OPERATION;
const UNSUPPORTED: CUptiResult = CUptiResult::CUPTI_ERROR_NOT_SUPPORTED;

/// `CUPTI_PROFILER_STRUCT_SIZE(type, last)`: the bytes of `$t` up to and
/// including its last named field `$last` (what CUPTI checks
/// `structSize` against; `size_of` would count trailing padding).
macro_rules! struct_size {
    ($t:ty, $last:ident) => {{
        let zero = <$t>::default();
        std::mem::offset_of!($t, $last) + std::mem::size_of_val(&zero.$last)
    }};
}

/// The range profiler's state (inside the simulator's CUPTI state).
#[derive(Debug, Default)]
pub(crate) struct ProfilerState {
    /// `cuptiProfilerInitialize` was called.
    initialized: bool,
    /// The next object handle (0 before the first).
    next: u64,
    /// Host objects by handle.
    hosts: HashMap<u64, Host>,
    /// Range profiler objects by handle.
    objects: HashMap<u64, RangeObject>,
}

/// A host object (`cuptiProfilerHostInitialize`).
#[derive(Debug, Default)]
struct Host {
    /// [`METRIC`] was added to its configuration.
    metric: bool,
}

/// A range profiler object (`cuptiRangeProfilerEnable`).
#[derive(Debug)]
struct RangeObject {
    /// The context it profiles.
    ctx: u64,
    /// What `cuptiRangeProfilerSetConfig` set.
    pass: Option<Pass>,
    /// While collecting: the first operation id profiled (the next one at
    /// the start; ids grow in enqueue order).
    collecting: Option<u64>,
    /// The ranges collected since the start, in ns, at most
    /// `pass.max_ranges`.
    values: Vec<f64>,
    /// Kernels past `pass.max_ranges` since the start.
    dropped: usize,
}

/// A configured pass: the counter data image and how many ranges it takes.
#[derive(Debug)]
struct Pass {
    image: ImagePtr,
    size: usize,
    max_ranges: usize,
}

/// The caller's counter data image, kept from `cuptiRangeProfilerSetConfig`
/// to `cuptiRangeProfilerDecodeData`.
#[derive(Debug)]
struct ImagePtr(*mut u8);

// SAFETY: the pointer is only an address kept in the simulator's state
// (behind its global lock); it is written through only by
// `cuptiRangeProfilerDecodeData`, on the calling thread, while the caller
// keeps the image it configured alive and untouched (CUPTI's contract for
// the counter data image). Nothing about it is tied to a thread.
unsafe impl Send for ImagePtr {}

impl ProfilerState {
    /// Whether any object is collecting (so executing work has ranges to
    /// give).
    pub(crate) fn collecting(&self) -> bool {
        self.objects.values().any(|o| o.collecting.is_some())
    }

    /// A fresh object handle.
    fn new_handle(&mut self) -> u64 {
        let h = self.next.max(FIRST_HANDLE);
        self.next = h + 0x10;
        h
    }

    /// Refuses with `CUPTI_ERROR_NOT_INITIALIZED` before
    /// `cuptiProfilerInitialize`.
    fn need_initialized(&self) -> Result<(), CUptiResult> {
        if self.initialized { Ok(()) } else { Err(CUptiResult::CUPTI_ERROR_NOT_INITIALIZED) }
    }

    fn host(&mut self, h: *mut sys::CUpti_Profiler_Host_Object) -> Result<&mut Host, CUptiResult> {
        self.hosts.get_mut(&id(h)).ok_or(BAD)
    }

    fn object(&mut self, o: *mut sys::CUpti_RangeProfiler_Object) -> Result<&mut RangeObject, CUptiResult> {
        self.objects.get_mut(&id(o)).ok_or(BAD)
    }
}

/// Records one kernel of operation `op` on context `ctx`, which executed
/// for `ns` simulated nanoseconds, as a range of each object collecting on
/// that context since before `op` was enqueued (dropped past its
/// `maxRangesPerPass`).
pub(crate) fn on_kernel(st: &mut State, ctx: u64, op: u64, ns: u64) {
    for o in st.cupti.profiler.objects.values_mut() {
        if o.ctx != ctx || o.collecting.is_none_or(|first| op < first) {
            continue;
        }
        let Some(pass) = &o.pass else { continue };
        if o.values.len() < pass.max_ranges {
            o.values.push(ns as f64);
        } else {
            o.dropped += 1;
        }
    }
}

/// Copies the parameter struct at `p`, checked: non-null, and its
/// `structSize` (every one of these structs starts with it) at least
/// `need` bytes, the size up to its last named field ([`struct_size!`]).
/// Only those `need` bytes are read; the rest of the copy is `T`'s default.
///
/// # Safety
/// 1. `p` is null or points at a parameter struct of type `T` (aligned)
///    whose first `structSize` bytes are readable — CUPTI's contract for
///    every profiler call.
/// 2. `T` is one of the generated `CUpti_*_Params` structs: plain integers
///    and pointers, every byte pattern a value.
unsafe fn read_params<T: Default + Copy>(p: *const T, need: usize) -> Result<T, CUptiResult> {
    if p.is_null() {
        return Err(BAD);
    }
    // SAFETY: non-null; its first field is the `usize` `structSize`
    // (obligation 1), readable since any struct size covers it.
    let size = unsafe { p.cast::<usize>().read() };
    if size < need || need > size_of::<T>() {
        return Err(BAD);
    }
    let mut v = T::default();
    // SAFETY: `need <= structSize` bytes are readable at `p` (obligation
    // 1) and `need <= size_of::<T>()` fit in `v`; any bytes make a `T`
    // (obligation 2).
    unsafe { std::ptr::copy_nonoverlapping(p.cast::<u8>(), (&raw mut v).cast::<u8>(), need) };
    Ok(v)
}

/// Checks a list of `n` metric names: at least one, each [`METRIC`].
///
/// # Safety
/// `names` is null or points at `n` readable pointers, each null or a
/// NUL-terminated string (CUPTI's contract for `ppMetricNames`).
unsafe fn check_metrics(names: *const *const c_char, n: usize) -> Result<(), CUptiResult> {
    if names.is_null() || n == 0 {
        return Err(BAD);
    }
    for i in 0..n {
        // SAFETY: `i < n` pointers are readable at `names` (the caller's
        // promise).
        let name = unsafe { names.add(i).read() };
        if name.is_null() {
            return Err(BAD);
        }
        // SAFETY: a non-null name is NUL-terminated (the caller's promise).
        if unsafe { CStr::from_ptr(name) } != METRIC {
            return Err(BAD);
        }
    }
    Ok(())
}

/// Reads the `i`th u64 of an image at `p`.
///
/// # Safety
/// `p` has at least `8 * (i + 1)` readable bytes.
unsafe fn word(p: *const u8, i: usize) -> u64 {
    // SAFETY: the caller's promise; read unaligned as a plain integer.
    unsafe { p.add(8 * i).cast::<u64>().read_unaligned() }
}

/// Writes `v` as the `i`th u64 of an image at `p`.
///
/// # Safety
/// `p` has at least `8 * (i + 1)` writable bytes.
unsafe fn set_word(p: *mut u8, i: usize, v: u64) {
    // SAFETY: the caller's promise; written unaligned as a plain integer.
    unsafe { p.add(8 * i).cast::<u64>().write_unaligned(v) }
}

/// Checks a 16-byte image of magic `magic` at `p` (`size` bytes).
///
/// # Safety
/// `p` is null or has `size` readable bytes.
unsafe fn check_small(p: *const u8, size: usize, magic: [u8; 8], need: usize) -> Result<u64, CUptiResult> {
    if p.is_null() || size < need {
        return Err(BAD);
    }
    // SAFETY: `size >= need = 16` bytes are readable (the caller's promise).
    let (m, value) = unsafe { (word(p, 0), word(p, 1)) };
    if m != u64::from_ne_bytes(magic) {
        return Err(BAD);
    }
    Ok(value)
}

/// The header of a counter data image at `p` of `size` bytes, checked
/// (magic, a capacity that fits the size, no more ranges than it):
/// (capacity, ranges written).
///
/// # Safety
/// `p` is null or has `size` readable bytes.
unsafe fn counter_header(p: *const u8, size: usize) -> Result<(usize, usize), CUptiResult> {
    if p.is_null() || size < COUNTER_HEADER {
        return Err(BAD);
    }
    // SAFETY: the header's 32 bytes are readable (`size` checked above,
    // the caller's promise).
    let (m, capacity, count) = unsafe { (word(p, 0), word(p, 1), word(p, 2)) };
    let fits = (size - COUNTER_HEADER) / RANGE_BYTES;
    match (usize::try_from(capacity), usize::try_from(count)) {
        (Ok(capacity), Ok(count))
            if m == u64::from_ne_bytes(COUNTER_MAGIC) && capacity <= fits && count <= capacity =>
        {
            Ok((capacity, count))
        }
        _ => Err(BAD),
    }
}

/// The context `ctx` names (null: this thread's current one) and its
/// device; `CUPTI_ERROR_INVALID_CONTEXT` for one the simulator lacks.
fn context(st: &State, ctx: sys::CUcontext) -> Result<(u64, i32), CUptiResult> {
    let c = if ctx.is_null() { state::current_ctx().unwrap_or(0) } else { id(ctx) };
    st.ctx_device(c).map(|d| (c, d)).ok_or(CUptiResult::CUPTI_ERROR_INVALID_CONTEXT)
}

/// Runs `f` on the simulator's state, through its door (refused from
/// inside the simulator).
fn locked<R>(f: impl FnOnce(&mut State) -> Result<R, CUptiResult>) -> Result<R, CUptiResult> {
    let mut st = state::enter().map_err(CUptiResult::from)?;
    f(&mut st)
}

/// Runs a call's body: its result code.
fn run(body: impl FnOnce() -> Result<(), CUptiResult>) -> CUptiResult {
    body().err().unwrap_or(OK)
}

unsafe extern "C" fn cuptiProfilerInitialize(p: *mut sys::CUpti_Profiler_Initialize_Params) -> CUptiResult {
    type P = sys::CUpti_Profiler_Initialize_Params;
    run(|| {
        // SAFETY: `p` is the caller's parameter struct (CUPTI's contract:
        // `read_params`'s obligations), checked there for null and size.
        unsafe { read_params(p, struct_size!(P, pPriv)) }?;
        locked(|st| {
            st.cupti.profiler.initialized = true;
            Ok(())
        })
    })
}

unsafe extern "C" fn cuptiDeviceGetChipName(p: *mut sys::CUpti_Device_GetChipName_Params) -> CUptiResult {
    type P = sys::CUpti_Device_GetChipName_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pChipName)) }?;
        locked(|st| {
            st.cupti.profiler.need_initialized()?;
            if v.deviceIndex >= st.devices.len() {
                return Err(CUptiResult::CUPTI_ERROR_INVALID_DEVICE);
            }
            Ok(())
        })?;
        // SAFETY: `p` is a non-null struct whose `structSize` covers
        // `pChipName` (`read_params`); the name is a static string.
        unsafe { (*p).pChipName = CHIP.as_ptr() };
        Ok(())
    })
}

unsafe extern "C" fn cuptiProfilerGetCounterAvailability(
    p: *mut sys::CUpti_Profiler_GetCounterAvailability_Params,
) -> CUptiResult {
    type P = sys::CUpti_Profiler_GetCounterAvailability_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pCounterAvailabilityImage)) }?;
        let device = locked(|st| {
            st.cupti.profiler.need_initialized()?;
            context(st, v.ctx).map(|(_, d)| d)
        })?;
        let image = v.pCounterAvailabilityImage;
        if image.is_null() {
            // SAFETY: `p` is a non-null struct whose `structSize` covers
            // the field (`read_params`).
            unsafe { (*p).counterAvailabilityImageSize = AVAILABILITY_SIZE };
            return Ok(());
        }
        if v.counterAvailabilityImageSize < AVAILABILITY_SIZE {
            return Err(BAD);
        }
        // SAFETY: the caller's image has `counterAvailabilityImageSize >=
        // 16` writable bytes (CUPTI's contract for the image it passes).
        unsafe {
            set_word(image, 0, u64::from_ne_bytes(AVAILABILITY_MAGIC));
            set_word(image, 1, device as u64);
        }
        Ok(())
    })
}

unsafe extern "C" fn cuptiProfilerHostInitialize(
    p: *mut sys::CUpti_Profiler_Host_Initialize_Params,
) -> CUptiResult {
    type P = sys::CUpti_Profiler_Host_Initialize_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pHostObject)) }?;
        if v.profilerType != sys::CUpti_ProfilerType::CUPTI_PROFILER_TYPE_RANGE_PROFILER {
            return Err(UNSUPPORTED);
        }
        if v.pChipName.is_null() {
            return Err(BAD);
        }
        // SAFETY: a non-null chip name is a NUL-terminated string (CUPTI's
        // contract: the name `cuptiDeviceGetChipName` gave).
        if unsafe { CStr::from_ptr(v.pChipName) } != CHIP {
            return Err(BAD);
        }
        if !v.pCounterAvailabilityImage.is_null() {
            // SAFETY: a non-null availability image is one
            // `cuptiProfilerGetCounterAvailability` filled (CUPTI's
            // contract), so its 16 bytes are readable.
            unsafe { check_small(v.pCounterAvailabilityImage, AVAILABILITY_SIZE, AVAILABILITY_MAGIC, 16) }?;
        }
        let h = locked(|st| {
            let prof = &mut st.cupti.profiler;
            prof.need_initialized()?;
            let h = prof.new_handle();
            prof.hosts.insert(h, Host::default());
            Ok(h)
        })?;
        // SAFETY: `p` is a non-null struct whose `structSize` covers the
        // field (`read_params`).
        unsafe { (*p).pHostObject = handle(h) };
        Ok(())
    })
}

unsafe extern "C" fn cuptiProfilerHostDeinitialize(
    p: *mut sys::CUpti_Profiler_Host_Deinitialize_Params,
) -> CUptiResult {
    type P = sys::CUpti_Profiler_Host_Deinitialize_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pHostObject)) }?;
        locked(|st| st.cupti.profiler.hosts.remove(&id(v.pHostObject)).map(drop).ok_or(BAD))
    })
}

unsafe extern "C" fn cuptiProfilerHostConfigAddMetrics(
    p: *mut sys::CUpti_Profiler_Host_ConfigAddMetrics_Params,
) -> CUptiResult {
    type P = sys::CUpti_Profiler_Host_ConfigAddMetrics_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, numMetrics)) }?;
        // SAFETY: `ppMetricNames` holds `numMetrics` names (CUPTI's
        // contract); `check_metrics` checks for null.
        unsafe { check_metrics(v.ppMetricNames, v.numMetrics) }?;
        locked(|st| {
            st.cupti.profiler.host(v.pHostObject)?.metric = true;
            Ok(())
        })
    })
}

unsafe extern "C" fn cuptiProfilerHostGetConfigImageSize(
    p: *mut sys::CUpti_Profiler_Host_GetConfigImageSize_Params,
) -> CUptiResult {
    type P = sys::CUpti_Profiler_Host_GetConfigImageSize_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, configImageSize)) }?;
        locked(|st| if st.cupti.profiler.host(v.pHostObject)?.metric { Ok(()) } else { Err(ORDER) })?;
        // SAFETY: `p` is a non-null struct whose `structSize` covers the
        // field (`read_params`).
        unsafe { (*p).configImageSize = CONFIG_SIZE };
        Ok(())
    })
}

unsafe extern "C" fn cuptiProfilerHostGetConfigImage(
    p: *mut sys::CUpti_Profiler_Host_GetConfigImage_Params,
) -> CUptiResult {
    type P = sys::CUpti_Profiler_Host_GetConfigImage_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pConfigImage)) }?;
        if v.pConfigImage.is_null() || v.configImageSize < CONFIG_SIZE {
            return Err(BAD);
        }
        locked(|st| if st.cupti.profiler.host(v.pHostObject)?.metric { Ok(()) } else { Err(ORDER) })?;
        // SAFETY: the caller's image has `configImageSize >= 16` writable
        // bytes (CUPTI's contract for the image it passes).
        unsafe {
            set_word(v.pConfigImage, 0, u64::from_ne_bytes(CONFIG_MAGIC));
            set_word(v.pConfigImage, 1, 1);
        }
        Ok(())
    })
}

unsafe extern "C" fn cuptiProfilerHostGetNumOfPasses(
    p: *mut sys::CUpti_Profiler_Host_GetNumOfPasses_Params,
) -> CUptiResult {
    type P = sys::CUpti_Profiler_Host_GetNumOfPasses_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, numOfPasses)) }?;
        // SAFETY: the configuration image has `configImageSize` readable
        // bytes (CUPTI's contract); `check_small` checks for null.
        unsafe { check_small(v.pConfigImage, v.configImageSize, CONFIG_MAGIC, CONFIG_SIZE) }?;
        // SAFETY: `p` is a non-null struct whose `structSize` covers the
        // field (`read_params`).
        unsafe { (*p).numOfPasses = 1 };
        Ok(())
    })
}

unsafe extern "C" fn cuptiProfilerHostEvaluateToGpuValues(
    p: *mut sys::CUpti_Profiler_Host_EvaluateToGpuValues_Params,
) -> CUptiResult {
    type P = sys::CUpti_Profiler_Host_EvaluateToGpuValues_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pMetricValues)) }?;
        // SAFETY: as in `cuptiProfilerHostConfigAddMetrics`.
        unsafe { check_metrics(v.ppMetricNames, v.numMetrics) }?;
        if v.pMetricValues.is_null() {
            return Err(BAD);
        }
        // SAFETY: the counter data image has `counterDataImageSize`
        // readable bytes (CUPTI's contract); null is checked there.
        let (_, count) = unsafe { counter_header(v.pCounterDataImage, v.counterDataImageSize) }?;
        if v.rangeIndex >= count {
            return Err(BAD);
        }
        // SAFETY: range `rangeIndex < count <= capacity` lies inside the
        // image (`counter_header` checked the capacity against its size).
        let value = f64::from_bits(unsafe { word(v.pCounterDataImage, 4 + v.rangeIndex) });
        locked(|st| if st.cupti.profiler.host(v.pHostObject)?.metric { Ok(()) } else { Err(BAD) })?;
        for i in 0..v.numMetrics {
            // SAFETY: `pMetricValues` has room for `numMetrics` values
            // (CUPTI's contract), non-null as checked.
            unsafe { v.pMetricValues.add(i).write_unaligned(value) };
        }
        Ok(())
    })
}

unsafe extern "C" fn cuptiRangeProfilerEnable(p: *mut sys::CUpti_RangeProfiler_Enable_Params) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_Enable_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pRangeProfilerObject)) }?;
        let h = locked(|st| {
            st.cupti.profiler.need_initialized()?;
            let (ctx, _) = context(st, v.ctx)?;
            let prof = &mut st.cupti.profiler;
            if prof.objects.values().any(|o| o.ctx == ctx) {
                return Err(ORDER);
            }
            let h = prof.new_handle();
            let o = RangeObject { ctx, pass: None, collecting: None, values: Vec::new(), dropped: 0 };
            prof.objects.insert(h, o);
            Ok(h)
        })?;
        // SAFETY: `p` is a non-null struct whose `structSize` covers the
        // field (`read_params`).
        unsafe { (*p).pRangeProfilerObject = handle(h) };
        Ok(())
    })
}

unsafe extern "C" fn cuptiRangeProfilerDisable(
    p: *mut sys::CUpti_RangeProfiler_Disable_Params,
) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_Disable_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pRangeProfilerObject)) }?;
        locked(|st| st.cupti.profiler.objects.remove(&id(v.pRangeProfilerObject)).map(drop).ok_or(BAD))
    })
}

unsafe extern "C" fn cuptiRangeProfilerGetCounterDataSize(
    p: *mut sys::CUpti_RangeProfiler_GetCounterDataSize_Params,
) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_GetCounterDataSize_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, counterDataSize)) }?;
        // SAFETY: as in `cuptiProfilerHostConfigAddMetrics`.
        unsafe { check_metrics(v.pMetricNames, v.numMetrics) }?;
        if v.maxNumOfRanges == 0 {
            return Err(BAD);
        }
        let size = v.maxNumOfRanges.checked_mul(RANGE_BYTES).and_then(|b| b.checked_add(COUNTER_HEADER));
        let size = size.ok_or(BAD)?;
        locked(|st| st.cupti.profiler.object(v.pRangeProfilerObject).map(drop))?;
        // SAFETY: `p` is a non-null struct whose `structSize` covers the
        // field (`read_params`).
        unsafe { (*p).counterDataSize = size };
        Ok(())
    })
}

unsafe extern "C" fn cuptiRangeProfilerCounterDataImageInitialize(
    p: *mut sys::CUpti_RangeProfiler_CounterDataImage_Initialize_Params,
) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_CounterDataImage_Initialize_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pCounterData)) }?;
        if v.pCounterData.is_null() || v.counterDataSize < COUNTER_HEADER + RANGE_BYTES {
            return Err(BAD);
        }
        locked(|st| st.cupti.profiler.object(v.pRangeProfilerObject).map(drop))?;
        let capacity = (v.counterDataSize - COUNTER_HEADER) / RANGE_BYTES;
        // SAFETY: the caller's image has `counterDataSize >= 40` writable
        // bytes (CUPTI's contract for the image it passes); the header is
        // its first 32.
        unsafe {
            set_word(v.pCounterData, 0, u64::from_ne_bytes(COUNTER_MAGIC));
            set_word(v.pCounterData, 1, capacity as u64);
            set_word(v.pCounterData, 2, 0);
            set_word(v.pCounterData, 3, 0);
        }
        Ok(())
    })
}

unsafe extern "C" fn cuptiRangeProfilerSetConfig(
    p: *mut sys::CUpti_RangeProfiler_SetConfig_Params,
) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_SetConfig_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, targetNestingLevel)) }?;
        // SAFETY: the configuration image has `configSize` readable bytes
        // (CUPTI's contract); `check_small` checks for null.
        unsafe { check_small(v.pConfig, v.configSize, CONFIG_MAGIC, CONFIG_SIZE) }?;
        // SAFETY: the counter data image has `counterDataImageSize`
        // readable bytes (CUPTI's contract); null is checked there.
        let (capacity, _) = unsafe { counter_header(v.pCounterDataImage, v.counterDataImageSize) }?;
        if v.range != sys::CUpti_ProfilerRange::CUPTI_AutoRange
            || v.replayMode != sys::CUpti_ProfilerReplayMode::CUPTI_KernelReplay
        {
            return Err(UNSUPPORTED);
        }
        if v.maxRangesPerPass == 0 || v.maxRangesPerPass > capacity || v.passIndex != 0 {
            return Err(BAD);
        }
        locked(|st| {
            let o = st.cupti.profiler.object(v.pRangeProfilerObject)?;
            if o.collecting.is_some() {
                return Err(ORDER);
            }
            let image = ImagePtr(v.pCounterDataImage);
            o.pass = Some(Pass { image, size: v.counterDataImageSize, max_ranges: v.maxRangesPerPass });
            o.values.clear();
            o.dropped = 0;
            Ok(())
        })
    })
}

unsafe extern "C" fn cuptiRangeProfilerStart(p: *mut sys::CUpti_RangeProfiler_Start_Params) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_Start_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pRangeProfilerObject)) }?;
        locked(|st| {
            let first = st.next_op;
            let o = st.cupti.profiler.object(v.pRangeProfilerObject)?;
            if o.pass.is_none() || o.collecting.is_some() {
                return Err(ORDER);
            }
            o.collecting = Some(first);
            o.values.clear();
            o.dropped = 0;
            Ok(())
        })
    })
}

unsafe extern "C" fn cuptiRangeProfilerStop(p: *mut sys::CUpti_RangeProfiler_Stop_Params) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_Stop_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, isAllPassSubmitted)) }?;
        locked(|st| {
            let o = st.cupti.profiler.object(v.pRangeProfilerObject)?;
            o.collecting.take().map(drop).ok_or(ORDER)
        })?;
        // SAFETY: `p` is a non-null struct whose `structSize` covers the
        // three fields (`read_params`).
        unsafe {
            (*p).passIndex = 0;
            (*p).targetNestingLevel = 1;
            (*p).isAllPassSubmitted = 1;
        }
        Ok(())
    })
}

unsafe extern "C" fn cuptiRangeProfilerDecodeData(
    p: *mut sys::CUpti_RangeProfiler_DecodeData_Params,
) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_DecodeData_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, numOfRangeDropped)) }?;
        let dropped = locked(|st| {
            let o = st.cupti.profiler.object(v.pRangeProfilerObject)?;
            let Some(pass) = &o.pass else { return Err(ORDER) };
            if o.collecting.is_some() {
                return Err(ORDER);
            }
            let image = pass.image.0;
            // SAFETY: the image `cuptiRangeProfilerSetConfig` was given, of
            // `pass.size` bytes, which the caller keeps alive until the
            // decode (CUPTI's contract); its header is checked again in
            // case the caller reused it meanwhile.
            let (capacity, _) = unsafe { counter_header(image, pass.size) }?;
            if o.values.len() > capacity {
                return Err(BAD);
            }
            // SAFETY: as above; the header's words and `values.len() <=
            // capacity` ranges lie inside the image (`counter_header`
            // checked the capacity against its size).
            unsafe {
                set_word(image, 2, o.values.len() as u64);
                set_word(image, 3, o.dropped as u64);
                for (i, x) in o.values.iter().enumerate() {
                    set_word(image, 4 + i, x.to_bits());
                }
            }
            Ok(o.dropped)
        })?;
        // SAFETY: `p` is a non-null struct whose `structSize` covers the
        // field (`read_params`).
        unsafe { (*p).numOfRangeDropped = dropped };
        Ok(())
    })
}

unsafe extern "C" fn cuptiRangeProfilerGetCounterDataInfo(
    p: *mut sys::CUpti_RangeProfiler_GetCounterDataInfo_Params,
) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_GetCounterDataInfo_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, numTotalRanges)) }?;
        // SAFETY: the counter data image has `counterDataImageSize`
        // readable bytes (CUPTI's contract); null is checked there.
        let (_, count) = unsafe { counter_header(v.pCounterDataImage, v.counterDataImageSize) }?;
        // SAFETY: `p` is a non-null struct whose `structSize` covers the
        // field (`read_params`).
        unsafe { (*p).numTotalRanges = count };
        Ok(())
    })
}

/// Fills the range profiler's functions of the simulator's CUPTI table
/// (`crate::cupti::table`).
pub(crate) fn fill(t: &mut Cupti) {
    t.cuptiProfilerInitialize = Some(cuptiProfilerInitialize);
    t.cuptiDeviceGetChipName = Some(cuptiDeviceGetChipName);
    t.cuptiProfilerGetCounterAvailability = Some(cuptiProfilerGetCounterAvailability);
    t.cuptiProfilerHostInitialize = Some(cuptiProfilerHostInitialize);
    t.cuptiProfilerHostDeinitialize = Some(cuptiProfilerHostDeinitialize);
    t.cuptiProfilerHostConfigAddMetrics = Some(cuptiProfilerHostConfigAddMetrics);
    t.cuptiProfilerHostGetConfigImageSize = Some(cuptiProfilerHostGetConfigImageSize);
    t.cuptiProfilerHostGetConfigImage = Some(cuptiProfilerHostGetConfigImage);
    t.cuptiProfilerHostGetNumOfPasses = Some(cuptiProfilerHostGetNumOfPasses);
    t.cuptiProfilerHostEvaluateToGpuValues = Some(cuptiProfilerHostEvaluateToGpuValues);
    t.cuptiRangeProfilerEnable = Some(cuptiRangeProfilerEnable);
    t.cuptiRangeProfilerDisable = Some(cuptiRangeProfilerDisable);
    t.cuptiRangeProfilerGetCounterDataSize = Some(cuptiRangeProfilerGetCounterDataSize);
    t.cuptiRangeProfilerCounterDataImageInitialize = Some(cuptiRangeProfilerCounterDataImageInitialize);
    t.cuptiRangeProfilerSetConfig = Some(cuptiRangeProfilerSetConfig);
    t.cuptiRangeProfilerStart = Some(cuptiRangeProfilerStart);
    t.cuptiRangeProfilerStop = Some(cuptiRangeProfilerStop);
    t.cuptiRangeProfilerDecodeData = Some(cuptiRangeProfilerDecodeData);
    t.cuptiRangeProfilerGetCounterDataInfo = Some(cuptiRangeProfilerGetCounterDataInfo);
}

#[cfg(test)]
mod tests {
    //! The range profiler driven as cuda-sys's `KernelDurations` drives it,
    //! and call by call for its misuse, over the installed simulator.
    use super::*;
    use crate::{KernelCall, KernelFault, KernelSpec, ParamSpec, Session, register_kernel};
    use cuda_sys::cupti::{
        ActivityKind, ActivityOp, CuptiError, KernelDurations, activity, cupti_result_name,
    };
    use cuda_sys::result::{context, init, launch, memory, module, primary_ctx, stream};
    use cuda_sys::{BorrowedContext, Driver, OwnedModule, OwnedStream};
    use std::ffi::c_void;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// One test at a time: the profiler follows the context, which every
    /// session shares.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static LOCK: Mutex<()> = Mutex::new(());
        LOCK.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn d() -> &'static Driver {
        crate::install().expect("cuda-sim installs")
    }

    fn spin(_: &mut KernelCall<'_>) -> Result<(), KernelFault> {
        Ok(())
    }

    /// The spin kernel's simulated duration: its argument, in ns.
    fn spin_ns(c: &KernelCall<'_>) -> u64 {
        c.scalar(0).unwrap_or(0)
    }

    /// What `cuptiRangeProfilerStart` answered from inside a kernel.
    static INSIDE: AtomicU32 = AtomicU32::new(u32::MAX);

    fn calls_the_profiler(_: &mut KernelCall<'_>) -> Result<(), KernelFault> {
        let mut p = sys::CUpti_RangeProfiler_Start_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_Start_Params, pRangeProfilerObject),
            ..Default::default()
        };
        // SAFETY: a live parameter struct of the function's type.
        let r = unsafe { cuptiRangeProfilerStart(&mut p) };
        INSIDE.store(r.0, Ordering::SeqCst);
        Ok(())
    }

    static SPIN: [ParamSpec; 1] = [ParamSpec::scalar::<u64>()];

    fn register() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let spec =
                KernelSpec { name: "profiler_spin", params: &SPIN, run: spin, duration: Some(spin_ns) };
            register_kernel(spec);
            let spec = KernelSpec {
                name: "profiler_calls_in",
                params: &[],
                run: calls_the_profiler,
                duration: None,
            };
            register_kernel(spec);
        });
    }

    /// A session, device 0's primary context current, a module.
    struct Env {
        session: Session,
        ctx: BorrowedContext<'static>,
        module: Option<OwnedModule>,
    }

    fn env(seed: u64) -> Env {
        register();
        let session = Session::new(seed);
        init::init(d(), 0).expect("cuInit");
        let ctx = primary_ctx::retain(d(), 0).expect("cuDevicePrimaryCtxRetain");
        context::set_current(d(), Some(ctx)).expect("cuCtxSetCurrent");
        // SAFETY: a NUL-terminated PTX image.
        let module = unsafe { module::load_data(d(), c".version 8.0\n".as_ptr().cast()) }.expect("module");
        Env { session, ctx, module: Some(module) }
    }

    impl Env {
        fn stream(&self) -> OwnedStream {
            stream::create_with_priority(d(), 0, 0).expect("cuStreamCreateWithPriority")
        }

        /// The context as CUPTI's headers type it.
        fn cupti_ctx(&self) -> sys::CUcontext {
            self.ctx.as_raw().cast()
        }

        /// Launches `name` with `args` on `s`.
        fn launch(&self, name: &CStr, s: &OwnedStream, args: &mut [*mut c_void]) {
            let m = self.module.as_ref().expect("module").as_borrowed();
            let f = module::get_function(m, name).expect("cuModuleGetFunction");
            // SAFETY: the simulator's CPU kernels read their parameters
            // through checked accessors; these touch no memory.
            unsafe { launch::launch_kernel(f, [1, 1, 1], [1, 1, 1], 0, s, args) }.expect("cuLaunchKernel");
        }

        /// A spin kernel of `ns` simulated nanoseconds on `s`.
        fn spin(&self, s: &OwnedStream, mut ns: u64) {
            self.launch(c"profiler_spin", s, &mut [(&raw mut ns).cast()]);
        }

        fn finish(mut self, s: OwnedStream) {
            stream::destroy(s).expect("cuStreamDestroy");
            if let Some(m) = self.module.take() {
                module::unload(m).expect("cuModuleUnload");
            }
            // SAFETY: every handle of the context was dropped above.
            unsafe { primary_ctx::release(d(), 0) }.expect("cuDevicePrimaryCtxRelease");
            let live = self.session.live();
            assert!(live.is_empty(), "leaked: {live:?}");
        }
    }

    /// The table's answer to `f(p)`, by name.
    fn name_of<T>(f: unsafe extern "C" fn(*mut T) -> CUptiResult, p: *mut T) -> &'static str {
        // SAFETY: `p` is null or a live parameter struct of `f`'s type built
        // by the test; every pointer in it points at the test's own memory,
        // alive for the call (or is null, which the functions check).
        cupti_result_name(unsafe { f(p) })
    }

    const SUCCESS: &str = "CUPTI_SUCCESS";
    const INVALID_PARAMETER: &str = "CUPTI_ERROR_INVALID_PARAMETER";
    const INVALID_OPERATION: &str = "CUPTI_ERROR_INVALID_OPERATION";

    /// The profiler set up call by call, as `KernelDurations::new` does:
    /// a host object with the metric, the configuration image, an object
    /// enabled on the context, a counter data image for `max` ranges.
    struct Raw {
        host: *mut sys::CUpti_Profiler_Host_Object,
        object: *mut sys::CUpti_RangeProfiler_Object,
        config: Vec<u8>,
        data: Vec<u8>,
    }

    impl Raw {
        fn new(ctx: sys::CUcontext, max: usize) -> Raw {
            type Init = sys::CUpti_Profiler_Initialize_Params;
            let mut init = Init { structSize: struct_size!(Init, pPriv), ..Default::default() };
            assert_eq!(name_of(cuptiProfilerInitialize, &mut init), SUCCESS);
            type Chip = sys::CUpti_Device_GetChipName_Params;
            let mut chip = Chip { structSize: struct_size!(Chip, pChipName), ..Default::default() };
            assert_eq!(name_of(cuptiDeviceGetChipName, &mut chip), SUCCESS);
            type Host = sys::CUpti_Profiler_Host_Initialize_Params;
            let mut host = Host {
                structSize: struct_size!(Host, pHostObject),
                pChipName: chip.pChipName,
                ..Default::default()
            };
            assert_eq!(name_of(cuptiProfilerHostInitialize, &mut host), SUCCESS);
            let mut raw =
                Raw { host: host.pHostObject, object: std::ptr::null_mut(), config: vec![], data: vec![] };
            assert_eq!(raw.add_metric(METRIC), SUCCESS);
            type Size = sys::CUpti_Profiler_Host_GetConfigImageSize_Params;
            let mut size = Size {
                structSize: struct_size!(Size, configImageSize),
                pHostObject: raw.host,
                ..Default::default()
            };
            assert_eq!(name_of(cuptiProfilerHostGetConfigImageSize, &mut size), SUCCESS);
            raw.config = vec![0; size.configImageSize];
            type Get = sys::CUpti_Profiler_Host_GetConfigImage_Params;
            let mut get = Get {
                structSize: struct_size!(Get, pConfigImage),
                pHostObject: raw.host,
                configImageSize: raw.config.len(),
                pConfigImage: raw.config.as_mut_ptr(),
                ..Default::default()
            };
            assert_eq!(name_of(cuptiProfilerHostGetConfigImage, &mut get), SUCCESS);
            type Enable = sys::CUpti_RangeProfiler_Enable_Params;
            let mut enable =
                Enable { structSize: struct_size!(Enable, pRangeProfilerObject), ctx, ..Default::default() };
            assert_eq!(name_of(cuptiRangeProfilerEnable, &mut enable), SUCCESS);
            raw.object = enable.pRangeProfilerObject;
            let mut names = [METRIC.as_ptr()];
            type DataSize = sys::CUpti_RangeProfiler_GetCounterDataSize_Params;
            let mut data = DataSize {
                structSize: struct_size!(DataSize, counterDataSize),
                pRangeProfilerObject: raw.object,
                pMetricNames: names.as_mut_ptr(),
                numMetrics: 1,
                maxNumOfRanges: max,
                ..Default::default()
            };
            assert_eq!(name_of(cuptiRangeProfilerGetCounterDataSize, &mut data), SUCCESS);
            raw.data = vec![0; data.counterDataSize];
            type Image = sys::CUpti_RangeProfiler_CounterDataImage_Initialize_Params;
            let mut image = Image {
                structSize: struct_size!(Image, pCounterData),
                pRangeProfilerObject: raw.object,
                counterDataSize: raw.data.len(),
                pCounterData: raw.data.as_mut_ptr(),
                ..Default::default()
            };
            assert_eq!(name_of(cuptiRangeProfilerCounterDataImageInitialize, &mut image), SUCCESS);
            raw
        }

        fn add_metric(&self, name: &CStr) -> &'static str {
            let mut names = [name.as_ptr()];
            type Add = sys::CUpti_Profiler_Host_ConfigAddMetrics_Params;
            let mut add = Add {
                structSize: struct_size!(Add, numMetrics),
                pHostObject: self.host,
                ppMetricNames: names.as_mut_ptr(),
                numMetrics: 1,
                ..Default::default()
            };
            name_of(cuptiProfilerHostConfigAddMetrics, &mut add)
        }

        fn set_config_params(&mut self, max: usize) -> sys::CUpti_RangeProfiler_SetConfig_Params {
            sys::CUpti_RangeProfiler_SetConfig_Params {
                structSize: struct_size!(sys::CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel),
                pRangeProfilerObject: self.object,
                configSize: self.config.len(),
                pConfig: self.config.as_ptr(),
                counterDataImageSize: self.data.len(),
                pCounterDataImage: self.data.as_mut_ptr(),
                range: sys::CUpti_ProfilerRange::CUPTI_AutoRange,
                replayMode: sys::CUpti_ProfilerReplayMode::CUPTI_KernelReplay,
                maxRangesPerPass: max,
                numNestingLevels: 1,
                minNestingLevel: 1,
                targetNestingLevel: 1,
                ..Default::default()
            }
        }

        fn set_config(&mut self, max: usize) -> &'static str {
            let mut p = self.set_config_params(max);
            name_of(cuptiRangeProfilerSetConfig, &mut p)
        }

        fn start(&self) -> &'static str {
            type P = sys::CUpti_RangeProfiler_Start_Params;
            let mut p = P {
                structSize: struct_size!(P, pRangeProfilerObject),
                pRangeProfilerObject: self.object,
                ..Default::default()
            };
            name_of(cuptiRangeProfilerStart, &mut p)
        }

        fn stop(&self) -> &'static str {
            type P = sys::CUpti_RangeProfiler_Stop_Params;
            let mut p = P {
                structSize: struct_size!(P, isAllPassSubmitted),
                pRangeProfilerObject: self.object,
                ..Default::default()
            };
            name_of(cuptiRangeProfilerStop, &mut p)
        }

        /// `cuptiRangeProfilerDecodeData`: its answer and the ranges dropped.
        fn decode(&self) -> (&'static str, usize) {
            type P = sys::CUpti_RangeProfiler_DecodeData_Params;
            let mut p = P {
                structSize: struct_size!(P, numOfRangeDropped),
                pRangeProfilerObject: self.object,
                ..Default::default()
            };
            (name_of(cuptiRangeProfilerDecodeData, &mut p), p.numOfRangeDropped)
        }

        /// `cuptiRangeProfilerGetCounterDataInfo` of `image`.
        fn ranges_in(image: &[u8]) -> (&'static str, usize) {
            type P = sys::CUpti_RangeProfiler_GetCounterDataInfo_Params;
            let mut p = P {
                structSize: struct_size!(P, numTotalRanges),
                pCounterDataImage: image.as_ptr(),
                counterDataImageSize: image.len(),
                ..Default::default()
            };
            (name_of(cuptiRangeProfilerGetCounterDataInfo, &mut p), p.numTotalRanges)
        }

        /// `cuptiProfilerHostEvaluateToGpuValues` of range `index`, metric `name`.
        fn value(&self, index: usize, name: &CStr) -> (&'static str, f64) {
            let mut names = [name.as_ptr()];
            let mut value = -1.0;
            type P = sys::CUpti_Profiler_Host_EvaluateToGpuValues_Params;
            let mut p = P {
                structSize: struct_size!(P, pMetricValues),
                pHostObject: self.host,
                pCounterDataImage: self.data.as_ptr(),
                counterDataImageSize: self.data.len(),
                rangeIndex: index,
                ppMetricNames: names.as_mut_ptr(),
                numMetrics: 1,
                pMetricValues: &mut value,
                ..Default::default()
            };
            (name_of(cuptiProfilerHostEvaluateToGpuValues, &mut p), value)
        }

        fn disable(&self) -> &'static str {
            type P = sys::CUpti_RangeProfiler_Disable_Params;
            let mut p = P {
                structSize: struct_size!(P, pRangeProfilerObject),
                pRangeProfilerObject: self.object,
                ..Default::default()
            };
            name_of(cuptiRangeProfilerDisable, &mut p)
        }
    }

    impl Drop for Raw {
        fn drop(&mut self) {
            // A test may have disabled it already.
            let _ = self.disable();
            type P = sys::CUpti_Profiler_Host_Deinitialize_Params;
            let mut p =
                P { structSize: struct_size!(P, pHostObject), pHostObject: self.host, ..Default::default() };
            let _ = name_of(cuptiProfilerHostDeinitialize, &mut p);
        }
    }

    #[test]
    fn every_function_of_the_table_is_filled() {
        assert_eq!(crate::cupti::table().missing(), Vec::<&str>::new());
    }

    #[test]
    fn kernel_durations_reads_each_kernels_simulated_duration_as_its_activity_record_does() {
        let _serial = serial();
        let e = env(0x9f01);
        let s = e.stream();
        let a = activity().expect("the simulator's CUPTI");
        let sid = a.stream_id(e.ctx.as_raw(), s.as_raw()).expect("cuptiGetStreamIdEx");
        let records = a.consumer(&[ActivityKind::Kernel]).expect("consumer");
        let mut k = KernelDurations::new(e.ctx.as_raw(), 0, 8).expect("the simulator's range profiler");
        let buf = memory::alloc(d(), 4096).expect("cuMemAlloc");
        k.start().expect("start");
        e.spin(&s, 2_000);
        // SAFETY: `buf` is 4 KiB of device memory, freed after the sync.
        unsafe { memory::memset_d32_async(buf, 7, 1024, &s) }.expect("memset");
        e.spin(&s, 5_000);
        e.spin(&s, 7_500);
        stream::synchronize(&s).expect("sync");
        let ranges = k.stop().expect("stop");
        assert_eq!(ranges, [2_000.0, 5_000.0, 7_500.0], "the memset is no range");
        let kernels: Vec<f64> = records
            .take()
            .expect("take")
            .into_iter()
            .filter(|r| r.stream_id == sid && matches!(r.op, ActivityOp::Kernel { .. }))
            .map(|r| r.duration_ns() as f64)
            .collect();
        assert_eq!(kernels, ranges, "the activity records say the same");
        // A kernel after the stop is in no range; the next round has only
        // its own.
        e.spin(&s, 1_500);
        stream::synchronize(&s).expect("sync");
        k.start().expect("second start");
        e.spin(&s, 3_000);
        stream::synchronize(&s).expect("sync");
        assert_eq!(k.stop().expect("second stop"), [3_000.0]);
        drop(k);
        drop(records);
        // SAFETY: every use of `buf` completed (synchronized above).
        unsafe { memory::free(d(), buf) }.expect("cuMemFree");
        e.finish(s);
    }

    #[test]
    fn a_kernel_queued_before_the_start_is_no_range_even_if_it_runs_after() {
        let _serial = serial();
        let e = env(0x9f02);
        let s = e.stream();
        let mut k = KernelDurations::new(e.ctx.as_raw(), 0, 8).expect("profiler");
        e.spin(&s, 4_000);
        k.start().expect("start");
        e.spin(&s, 2_000);
        stream::synchronize(&s).expect("sync");
        assert_eq!(k.stop().expect("stop"), [2_000.0]);
        drop(k);
        e.finish(s);
    }

    #[test]
    fn kernels_past_the_room_are_dropped_and_counted() {
        let _serial = serial();
        let e = env(0x9f03);
        let s = e.stream();
        let mut k = KernelDurations::new(e.ctx.as_raw(), 0, 8).expect("profiler");
        k.start().expect("start");
        for i in 0..10 {
            e.spin(&s, 1_000 + i);
        }
        stream::synchronize(&s).expect("sync");
        match k.stop() {
            Err(CuptiError::Call { call, name }) => {
                assert_eq!(call, "cuptiRangeProfilerDecodeData");
                assert!(name.contains("dropped"), "{name}");
            }
            other => panic!("expected dropped ranges, got {other:?}"),
        }
        drop(k);
        // Call by call: 8 ranges in the image, 2 dropped, the 9th absent.
        let mut raw = Raw::new(e.cupti_ctx(), 8);
        assert_eq!(raw.set_config(8), SUCCESS);
        assert_eq!(raw.start(), SUCCESS);
        for i in 0..10 {
            e.spin(&s, 1_000 + i);
        }
        stream::synchronize(&s).expect("sync");
        assert_eq!(raw.stop(), SUCCESS);
        assert_eq!(raw.decode(), (SUCCESS, 2));
        assert_eq!(Raw::ranges_in(&raw.data), (SUCCESS, 8));
        assert_eq!(raw.value(7, METRIC), (SUCCESS, 1_007.0));
        assert_eq!(raw.value(8, METRIC).0, INVALID_PARAMETER);
        drop(raw);
        e.finish(s);
    }

    #[test]
    fn misuse_is_an_error_and_never_a_panic() {
        let _serial = serial();
        let e = env(0x9f04);
        let s = e.stream();
        let first = KernelDurations::new(e.ctx.as_raw(), 0, 8).expect("profiler");
        match KernelDurations::new(e.ctx.as_raw(), 0, 8) {
            Err(CuptiError::Call { call, name }) => {
                assert_eq!((call, name), ("cuptiRangeProfilerEnable", INVALID_OPERATION));
            }
            other => panic!("a second profiler on one context: {other:?}"),
        }
        drop(first);
        let mut raw = Raw::new(e.cupti_ctx(), 4);
        assert_eq!(raw.start(), INVALID_OPERATION, "start before a configuration");
        assert_eq!(raw.stop(), INVALID_OPERATION, "stop before a start");
        assert_eq!(raw.decode().0, INVALID_OPERATION, "decode before a configuration");
        assert_eq!(raw.set_config(5), INVALID_PARAMETER, "more ranges than the image holds");
        // The header's size, not `size_of` (96): one byte short is refused.
        let mut p = raw.set_config_params(4);
        p.structSize -= 1;
        assert_eq!(name_of(cuptiRangeProfilerSetConfig, &mut p), INVALID_PARAMETER);
        p.structSize += 1;
        assert_eq!(name_of(cuptiRangeProfilerSetConfig, &mut p), SUCCESS);
        p.range = sys::CUpti_ProfilerRange(2); // user range
        assert_eq!(name_of(cuptiRangeProfilerSetConfig, &mut p), "CUPTI_ERROR_NOT_SUPPORTED");
        assert_eq!(raw.start(), SUCCESS);
        assert_eq!(raw.start(), INVALID_OPERATION, "start while started");
        assert_eq!(raw.set_config(4), INVALID_OPERATION, "configuration while collecting");
        assert_eq!(raw.decode().0, INVALID_OPERATION, "decode while collecting");
        assert_eq!(raw.stop(), SUCCESS);
        assert_eq!(raw.stop(), INVALID_OPERATION, "stop while stopped");
        assert_eq!(raw.decode(), (SUCCESS, 0));
        assert_eq!(Raw::ranges_in(&raw.data), (SUCCESS, 0));
        assert_eq!(raw.value(0, METRIC).0, INVALID_PARAMETER, "no range 0");
        // Null and short parameter structs, unknown objects and contexts.
        type Start = sys::CUpti_RangeProfiler_Start_Params;
        assert_eq!(name_of(cuptiRangeProfilerStart, std::ptr::null_mut()), INVALID_PARAMETER);
        let mut short = Start { structSize: 16, pRangeProfilerObject: raw.object, ..Default::default() };
        assert_eq!(name_of(cuptiRangeProfilerStart, &mut short), INVALID_PARAMETER);
        let mut unknown =
            Start { structSize: struct_size!(Start, pRangeProfilerObject), ..Default::default() };
        assert_eq!(name_of(cuptiRangeProfilerStart, &mut unknown), INVALID_PARAMETER);
        type Enable = sys::CUpti_RangeProfiler_Enable_Params;
        let mut bogus = Enable {
            structSize: struct_size!(Enable, pRangeProfilerObject),
            ctx: handle(0x1234_5670),
            ..Default::default()
        };
        assert_eq!(name_of(cuptiRangeProfilerEnable, &mut bogus), "CUPTI_ERROR_INVALID_CONTEXT");
        assert_eq!(raw.disable(), SUCCESS);
        assert_eq!(raw.disable(), INVALID_PARAMETER, "disabled twice");
        assert_eq!(raw.start(), INVALID_PARAMETER, "a disabled object");
        drop(raw);
        e.finish(s);
    }

    #[test]
    fn only_gpu_time_duration_is_known() {
        let _serial = serial();
        let e = env(0x9f05);
        let s = e.stream();
        let raw = Raw::new(e.cupti_ctx(), 2);
        assert_eq!(raw.add_metric(c"sm__cycles_elapsed.avg"), INVALID_PARAMETER);
        assert_eq!(raw.add_metric(c"gpu__time_duration.max"), INVALID_PARAMETER);
        // Two names, the second unknown: refused as a whole.
        let mut names = [METRIC.as_ptr(), c"dram__bytes.sum".as_ptr()];
        type Add = sys::CUpti_Profiler_Host_ConfigAddMetrics_Params;
        let mut add = Add {
            structSize: struct_size!(Add, numMetrics),
            pHostObject: raw.host,
            ppMetricNames: names.as_mut_ptr(),
            numMetrics: 2,
            ..Default::default()
        };
        assert_eq!(name_of(cuptiProfilerHostConfigAddMetrics, &mut add), INVALID_PARAMETER);
        add.numMetrics = 0;
        assert_eq!(name_of(cuptiProfilerHostConfigAddMetrics, &mut add), INVALID_PARAMETER);
        let mut names = [c"sm__cycles_elapsed.avg".as_ptr()];
        type DataSize = sys::CUpti_RangeProfiler_GetCounterDataSize_Params;
        let mut size = DataSize {
            structSize: struct_size!(DataSize, counterDataSize),
            pRangeProfilerObject: raw.object,
            pMetricNames: names.as_mut_ptr(),
            numMetrics: 1,
            maxNumOfRanges: 2,
            ..Default::default()
        };
        assert_eq!(name_of(cuptiRangeProfilerGetCounterDataSize, &mut size), INVALID_PARAMETER);
        assert_eq!(raw.value(0, c"sm__cycles_elapsed.avg").0, INVALID_PARAMETER);
        // A host object with no metric has no configuration yet.
        type Init = sys::CUpti_Profiler_Host_Initialize_Params;
        let mut init = Init {
            structSize: struct_size!(Init, pHostObject),
            pChipName: CHIP.as_ptr(),
            ..Default::default()
        };
        assert_eq!(name_of(cuptiProfilerHostInitialize, &mut init), SUCCESS);
        type ConfigSize = sys::CUpti_Profiler_Host_GetConfigImageSize_Params;
        let mut config = ConfigSize {
            structSize: struct_size!(ConfigSize, configImageSize),
            pHostObject: init.pHostObject,
            ..Default::default()
        };
        assert_eq!(name_of(cuptiProfilerHostGetConfigImageSize, &mut config), INVALID_OPERATION);
        type Deinit = sys::CUpti_Profiler_Host_Deinitialize_Params;
        let mut deinit = Deinit {
            structSize: struct_size!(Deinit, pHostObject),
            pHostObject: init.pHostObject,
            ..Default::default()
        };
        assert_eq!(name_of(cuptiProfilerHostDeinitialize, &mut deinit), SUCCESS);
        assert_eq!(name_of(cuptiProfilerHostDeinitialize, &mut deinit), INVALID_PARAMETER);
        // The one known metric configures one pass.
        type Passes = sys::CUpti_Profiler_Host_GetNumOfPasses_Params;
        let mut config = raw.config.clone();
        let mut passes = Passes {
            structSize: struct_size!(Passes, numOfPasses),
            configImageSize: config.len(),
            pConfigImage: config.as_mut_ptr(),
            ..Default::default()
        };
        assert_eq!(name_of(cuptiProfilerHostGetNumOfPasses, &mut passes), SUCCESS);
        assert_eq!(passes.numOfPasses, 1);
        drop(raw);
        e.finish(s);
    }

    #[test]
    fn images_are_checked_where_they_come_back() {
        let _serial = serial();
        let e = env(0x9f06);
        let s = e.stream();
        let mut raw = Raw::new(e.cupti_ctx(), 2);
        assert_eq!(Raw::ranges_in(&raw.data), (SUCCESS, 0));
        assert_eq!(Raw::ranges_in(&raw.data[..COUNTER_HEADER - 1]).0, INVALID_PARAMETER, "short");
        assert_eq!(Raw::ranges_in(&[0u8; 64]).0, INVALID_PARAMETER, "no magic");
        // A capacity the image's size cannot hold.
        let mut big = raw.data.clone();
        big[8..16].copy_from_slice(&3u64.to_ne_bytes());
        assert_eq!(Raw::ranges_in(&big).0, INVALID_PARAMETER);
        type P = sys::CUpti_RangeProfiler_GetCounterDataInfo_Params;
        let mut null =
            P { structSize: struct_size!(P, numTotalRanges), counterDataImageSize: 64, ..Default::default() };
        assert_eq!(name_of(cuptiRangeProfilerGetCounterDataInfo, &mut null), INVALID_PARAMETER);
        // A configuration image that is not one.
        let mut garbage = vec![0xabu8; CONFIG_SIZE];
        type Passes = sys::CUpti_Profiler_Host_GetNumOfPasses_Params;
        let mut passes = Passes {
            structSize: struct_size!(Passes, numOfPasses),
            configImageSize: garbage.len(),
            pConfigImage: garbage.as_mut_ptr(),
            ..Default::default()
        };
        assert_eq!(name_of(cuptiProfilerHostGetNumOfPasses, &mut passes), INVALID_PARAMETER);
        // A counter data image clobbered between the configuration and the
        // decode is refused, not written.
        assert_eq!(raw.set_config(2), SUCCESS);
        assert_eq!(raw.start(), SUCCESS);
        e.spin(&s, 2_500);
        stream::synchronize(&s).expect("sync");
        assert_eq!(raw.stop(), SUCCESS);
        raw.data[0] ^= 0xff;
        assert_eq!(raw.decode().0, INVALID_PARAMETER);
        raw.data[0] ^= 0xff;
        assert_eq!(raw.decode(), (SUCCESS, 0));
        assert_eq!(raw.value(0, METRIC), (SUCCESS, 2_500.0));
        drop(raw);
        e.finish(s);
    }

    #[test]
    fn a_profiler_call_from_inside_a_kernel_is_refused() {
        let _serial = serial();
        let e = env(0x9f07);
        let s = e.stream();
        INSIDE.store(u32::MAX, Ordering::SeqCst);
        e.launch(c"profiler_calls_in", &s, &mut []);
        stream::synchronize(&s).expect("sync");
        let r = CUptiResult(INSIDE.load(Ordering::SeqCst));
        assert_eq!(cupti_result_name(r), INVALID_OPERATION);
        e.finish(s);
    }
}
