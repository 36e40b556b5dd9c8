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
//! ranges. While the memcpy or memset activity kind is enabled no kernel
//! is a range, as CUPTI 13.0 behaved on an H100 and an H200. Kernels past `maxRangesPerPass` are dropped and counted
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

mod host;
mod range;
#[cfg(test)]
mod tests;

use host::*;
use range::*;

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
