//! CUPTI's range profiler with one counter, `gpu__time_duration.sum`: the
//! GPU's duration of each kernel, the counter Nsight Compute reports as
//! "Duration". Auto ranges (one range per kernel) and kernel replay, as
//! Nsight Compute profiles by default; the counter needs one pass, so
//! nothing is replayed.
//!
//! Unlike CUPTI's concurrent kernel records, the profiler does not add code
//! to the kernel: on an H100 a 262,144-block grid read 223.9 µs here
//! against Nsight Compute's 224.4 µs, where the concurrent records read it
//! 6–7 % long (`docs/results/h100/2026-11-28-range-profiler.md`). Its
//! price is time between kernels: each profiled kernel is serialized and
//! costs 74–149 µs of host time around it, which the counter does not
//! include.
//!
//! CUPTI's memcpy and memset activity records must be off while it
//! profiles: with them on it records no range (seen on an H100 and an
//! H200, CUPTI 13.0).

use super::error::{CuptiError, check};
use super::load::{Cupti, cupti};
use crate::BorrowedContext;
use crate::cupti_bindings as sys;
use std::ffi::{CStr, c_char};
use std::marker::PhantomData;
use std::sync::OnceLock;

/// The counter [`KernelDurations`] reads.
pub const KERNEL_DURATION_METRIC: &str = "gpu__time_duration.sum";

/// The counter's name as C wants it.
const METRIC: &CStr = c"gpu__time_duration.sum";

/// `CUPTI_PROFILER_STRUCT_SIZE(type, last)`: the bytes up to and including
/// the last field the headers name, which CUPTI checks (not
/// `size_of`, which counts trailing padding).
macro_rules! struct_size {
    ($t:ty, $last:ident) => {{
        let zero = <$t>::default();
        std::mem::offset_of!($t, $last) + std::mem::size_of_val(&zero.$last)
    }};
}

/// Calls CUPTI function `$f` of `$table` with `&mut $params`; a missing
/// function or a failed result is an error naming the call.
macro_rules! call {
    ($table:expr, $f:ident, $params:expr) => {{
        let f = $table.$f.ok_or(CuptiError::Call { call: stringify!($f), name: "missing" })?;
        // SAFETY: `f` is the library's function of this name, typed by its
        // header; `$params` is a live, fully initialized parameter struct
        // of the type it takes, its size field set by `struct_size!`, and
        // every pointer in it points at memory that outlives the call. The
        // counter data and config images `cuptiRangeProfilerSetConfig` is
        // given stay with the profiler object: they are Vecs of
        // `KernelDurations`, never resized after `new`, freed only after a
        // successful `cuptiRangeProfilerDisable` (or leaked).
        check(stringify!($f), unsafe { f($params) })
    }};
}

/// `cuptiProfilerInitialize`, once per process; its outcome is kept.
fn initialize(table: &'static Cupti) -> Result<(), CuptiError> {
    static DONE: OnceLock<Result<(), CuptiError>> = OnceLock::new();
    DONE.get_or_init(|| {
        let mut p = sys::CUpti_Profiler_Initialize_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Initialize_Params, pPriv),
            ..Default::default()
        };
        call!(table, cuptiProfilerInitialize, &mut p)
    })
    .clone()
}

/// The range profiler of one context, reading [`KERNEL_DURATION_METRIC`]
/// of every kernel the context runs between [`start`](Self::start) and
/// [`stop`](Self::stop), in the order they ran. Made by
/// [`KernelDurations::new`] (`cuptiRangeProfilerEnable`); dropping it stops
/// it and disables the profiler (`cuptiRangeProfilerDisable`).
///
/// While it exists the context's kernels are profiled only between
/// `start` and `stop`; between them every kernel is serialized.
pub struct KernelDurations<'a> {
    table: &'static Cupti,
    host: *mut sys::CUpti_Profiler_Host_Object,
    object: *mut sys::CUpti_RangeProfiler_Object,
    config: Vec<u8>,
    data: Vec<u8>,
    max_kernels: usize,
    started: bool,
    /// The context, which CUPTI keeps in the profiler object, outlives it.
    _context: PhantomData<BorrowedContext<'a>>,
}

// SAFETY: the CUPTI objects behind the two pointers belong to this value
// alone (nothing else holds them), and the buffers CUPTI reads are owned
// Vecs. CUPTI's calls on them need the context current on the calling
// thread, not the creating thread: on another thread a call without it
// fails with an error (which every method returns and `Drop` ignores), it
// does not touch freed memory. Every use goes through `&mut self`, so one
// thread at a time uses them.
unsafe impl Send for KernelDurations<'_> {}

impl std::fmt::Debug for KernelDurations<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelDurations")
            .field("max_kernels", &self.max_kernels)
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

impl<'a> KernelDurations<'a> {
    /// The range profiler on `context` (of CUDA device ordinal `device`),
    /// room for `max_kernels` kernels between a start and a stop; the
    /// borrow keeps the context alive while the profiler exists. The
    /// context must be current on the calling thread, here and at every
    /// call after (a call without it fails).
    ///
    /// Calls `cuptiProfilerInitialize` (once per process),
    /// `cuptiDeviceGetChipName`, `cuptiProfilerGetCounterAvailability`,
    /// `cuptiProfilerHostInitialize`, `cuptiProfilerHostConfigAddMetrics`,
    /// `cuptiProfilerHostGetConfigImage`, `cuptiRangeProfilerEnable` and
    /// `cuptiRangeProfilerGetCounterDataSize`.
    ///
    /// # Errors
    /// [`CuptiError::NotFound`] without libcupti; a failed call (another
    /// profiler owns the counters, no permission to read them:
    /// `CUPTI_ERROR_INSUFFICIENT_PRIVILEGES`, a GPU the profiler does not
    /// know), or a counter that needs more than one pass.
    ///
    pub fn new(
        context: BorrowedContext<'a>,
        device: usize,
        max_kernels: usize,
    ) -> Result<KernelDurations<'a>, CuptiError> {
        let context = context.as_raw();
        let table = cupti()?;
        initialize(table)?;
        let mut chip = sys::CUpti_Device_GetChipName_Params {
            structSize: struct_size!(sys::CUpti_Device_GetChipName_Params, pChipName),
            deviceIndex: device,
            ..Default::default()
        };
        call!(table, cuptiDeviceGetChipName, &mut chip)?;
        if chip.pChipName.is_null() {
            return Err(CuptiError::Call { call: "cuptiDeviceGetChipName", name: "no chip name" });
        }
        let mut avail = sys::CUpti_Profiler_GetCounterAvailability_Params {
            structSize: struct_size!(
                sys::CUpti_Profiler_GetCounterAvailability_Params,
                pCounterAvailabilityImage
            ),
            ctx: context.cast(),
            ..Default::default()
        };
        call!(table, cuptiProfilerGetCounterAvailability, &mut avail)?;
        let mut image = vec![0u8; avail.counterAvailabilityImageSize];
        avail.pCounterAvailabilityImage = image.as_mut_ptr();
        call!(table, cuptiProfilerGetCounterAvailability, &mut avail)?;
        let mut init = sys::CUpti_Profiler_Host_Initialize_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_Initialize_Params, pHostObject),
            profilerType: sys::CUpti_ProfilerType::CUPTI_PROFILER_TYPE_RANGE_PROFILER,
            pChipName: chip.pChipName,
            pCounterAvailabilityImage: image.as_ptr(),
            ..Default::default()
        };
        call!(table, cuptiProfilerHostInitialize, &mut init)?;
        // From here `me`'s drop deinitializes the host object (and disables
        // the profiler once it is enabled) on every early return.
        let mut me = KernelDurations {
            table,
            host: init.pHostObject,
            object: std::ptr::null_mut(),
            config: Vec::new(),
            data: Vec::new(),
            max_kernels: max_kernels.max(1),
            started: false,
            _context: PhantomData,
        };
        let metric: *const c_char = METRIC.as_ptr();
        let mut metrics = [metric];
        let mut add = sys::CUpti_Profiler_Host_ConfigAddMetrics_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics),
            pHostObject: me.host,
            ppMetricNames: metrics.as_mut_ptr(),
            numMetrics: 1,
            ..Default::default()
        };
        call!(table, cuptiProfilerHostConfigAddMetrics, &mut add)?;
        let mut size = sys::CUpti_Profiler_Host_GetConfigImageSize_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize),
            pHostObject: me.host,
            ..Default::default()
        };
        call!(table, cuptiProfilerHostGetConfigImageSize, &mut size)?;
        me.config = vec![0u8; size.configImageSize];
        let mut get = sys::CUpti_Profiler_Host_GetConfigImage_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage),
            pHostObject: me.host,
            configImageSize: me.config.len(),
            pConfigImage: me.config.as_mut_ptr(),
            ..Default::default()
        };
        call!(table, cuptiProfilerHostGetConfigImage, &mut get)?;
        let mut passes = sys::CUpti_Profiler_Host_GetNumOfPasses_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses),
            configImageSize: me.config.len(),
            pConfigImage: me.config.as_mut_ptr(),
            ..Default::default()
        };
        call!(table, cuptiProfilerHostGetNumOfPasses, &mut passes)?;
        if passes.numOfPasses != 1 {
            return Err(CuptiError::Call {
                call: "cuptiProfilerHostGetNumOfPasses",
                name: "more than one pass",
            });
        }
        let mut enable = sys::CUpti_RangeProfiler_Enable_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_Enable_Params, pRangeProfilerObject),
            ctx: context.cast(),
            ..Default::default()
        };
        call!(table, cuptiRangeProfilerEnable, &mut enable)?;
        me.object = enable.pRangeProfilerObject;
        let mut data = sys::CUpti_RangeProfiler_GetCounterDataSize_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_GetCounterDataSize_Params, counterDataSize),
            pRangeProfilerObject: me.object,
            pMetricNames: metrics.as_mut_ptr(),
            numMetrics: 1,
            maxNumOfRanges: me.max_kernels,
            maxNumRangeTreeNodes: u32::try_from(me.max_kernels).unwrap_or(u32::MAX),
            ..Default::default()
        };
        call!(table, cuptiRangeProfilerGetCounterDataSize, &mut data)?;
        me.data = vec![0u8; data.counterDataSize];
        Ok(me)
    }

    /// How many kernels fit between a start and a stop.
    pub fn max_kernels(&self) -> usize {
        self.max_kernels
    }

    /// Starts profiling: every kernel the context runs from here to
    /// [`stop`](Self::stop) is one range (`cuptiRangeProfilerCounterDataImageInitialize`,
    /// `cuptiRangeProfilerSetConfig` with auto ranges and kernel replay,
    /// `cuptiRangeProfilerStart`). Starting a started profiler is an error.
    ///
    /// # Errors
    /// A failed call.
    pub fn start(&mut self) -> Result<(), CuptiError> {
        if self.started {
            return Err(CuptiError::Call { call: "cuptiRangeProfilerStart", name: "already started" });
        }
        self.data.fill(0);
        let mut init = sys::CUpti_RangeProfiler_CounterDataImage_Initialize_Params {
            structSize: struct_size!(
                sys::CUpti_RangeProfiler_CounterDataImage_Initialize_Params,
                pCounterData
            ),
            pRangeProfilerObject: self.object,
            counterDataSize: self.data.len(),
            pCounterData: self.data.as_mut_ptr(),
            ..Default::default()
        };
        call!(self.table, cuptiRangeProfilerCounterDataImageInitialize, &mut init)?;
        let mut config = sys::CUpti_RangeProfiler_SetConfig_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel),
            pRangeProfilerObject: self.object,
            configSize: self.config.len(),
            pConfig: self.config.as_ptr(),
            counterDataImageSize: self.data.len(),
            pCounterDataImage: self.data.as_mut_ptr(),
            range: sys::CUpti_ProfilerRange::CUPTI_AutoRange,
            replayMode: sys::CUpti_ProfilerReplayMode::CUPTI_KernelReplay,
            maxRangesPerPass: self.max_kernels,
            numNestingLevels: 1,
            minNestingLevel: 1,
            passIndex: 0,
            targetNestingLevel: 1,
            ..Default::default()
        };
        call!(self.table, cuptiRangeProfilerSetConfig, &mut config)?;
        let mut start = sys::CUpti_RangeProfiler_Start_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_Start_Params, pRangeProfilerObject),
            pRangeProfilerObject: self.object,
            ..Default::default()
        };
        call!(self.table, cuptiRangeProfilerStart, &mut start)?;
        self.started = true;
        Ok(())
    }

    /// Stops profiling and reads the duration of each kernel since
    /// [`start`](Self::start), in nanoseconds, in the order they ran
    /// (`cuptiRangeProfilerStop`, `cuptiRangeProfilerDecodeData`,
    /// `cuptiRangeProfilerGetCounterDataInfo`,
    /// `cuptiProfilerHostEvaluateToGpuValues` per range). The caller waits
    /// for the kernels first (a stream or context synchronize).
    ///
    /// # Errors
    /// Not started; a failed call; ranges CUPTI dropped (more kernels than
    /// [`max_kernels`](Self::max_kernels)).
    pub fn stop(&mut self) -> Result<Vec<f64>, CuptiError> {
        if !self.started {
            return Err(CuptiError::Call { call: "cuptiRangeProfilerStop", name: "not started" });
        }
        let mut stop = sys::CUpti_RangeProfiler_Stop_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_Stop_Params, isAllPassSubmitted),
            pRangeProfilerObject: self.object,
            ..Default::default()
        };
        call!(self.table, cuptiRangeProfilerStop, &mut stop)?;
        self.started = false;
        let mut decode = sys::CUpti_RangeProfiler_DecodeData_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_DecodeData_Params, numOfRangeDropped),
            pRangeProfilerObject: self.object,
            ..Default::default()
        };
        call!(self.table, cuptiRangeProfilerDecodeData, &mut decode)?;
        if decode.numOfRangeDropped > 0 {
            return Err(CuptiError::Call {
                call: "cuptiRangeProfilerDecodeData",
                name: "ranges dropped: more kernels than the profiler was made for",
            });
        }
        let mut info = sys::CUpti_RangeProfiler_GetCounterDataInfo_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_GetCounterDataInfo_Params, numTotalRanges),
            pCounterDataImage: self.data.as_ptr(),
            counterDataImageSize: self.data.len(),
            ..Default::default()
        };
        call!(self.table, cuptiRangeProfilerGetCounterDataInfo, &mut info)?;
        let metric: *const c_char = METRIC.as_ptr();
        let mut metrics = [metric];
        let mut out = Vec::with_capacity(info.numTotalRanges);
        for range in 0..info.numTotalRanges {
            let mut value = 0.0f64;
            let mut eval = sys::CUpti_Profiler_Host_EvaluateToGpuValues_Params {
                structSize: struct_size!(sys::CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues),
                pHostObject: self.host,
                pCounterDataImage: self.data.as_ptr(),
                counterDataImageSize: self.data.len(),
                rangeIndex: range,
                ppMetricNames: metrics.as_mut_ptr(),
                numMetrics: 1,
                pMetricValues: &mut value,
                ..Default::default()
            };
            call!(self.table, cuptiProfilerHostEvaluateToGpuValues, &mut eval)?;
            out.push(value);
        }
        Ok(out)
    }
}

impl KernelDurations<'_> {
    /// `cuptiRangeProfilerDisable`, once.
    fn disable(&mut self) -> Result<(), CuptiError> {
        if self.object.is_null() {
            return Ok(());
        }
        let mut p = sys::CUpti_RangeProfiler_Disable_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_Disable_Params, pRangeProfilerObject),
            pRangeProfilerObject: self.object,
            ..Default::default()
        };
        self.object = std::ptr::null_mut();
        call!(self.table, cuptiRangeProfilerDisable, &mut p)
    }

    /// `cuptiProfilerHostDeinitialize`, once.
    fn deinitialize(&mut self) -> Result<(), CuptiError> {
        if self.host.is_null() {
            return Ok(());
        }
        let mut p = sys::CUpti_Profiler_Host_Deinitialize_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_Deinitialize_Params, pHostObject),
            pHostObject: self.host,
            ..Default::default()
        };
        self.host = std::ptr::null_mut();
        call!(self.table, cuptiProfilerHostDeinitialize, &mut p)
    }
}

impl Drop for KernelDurations<'_> {
    fn drop(&mut self) {
        // Errors are ignored: nothing can be done about them here, and the
        // objects are not used again.
        if self.started {
            let _ = self.stop();
        }
        let configured = !self.object.is_null();
        if self.disable().is_err() && configured {
            // The profiler may still hold the counter data and config
            // images `start` gave it: leaked, never freed under it.
            std::mem::forget(std::mem::take(&mut self.data));
            std::mem::forget(std::mem::take(&mut self.config));
        }
        let _ = self.deinitialize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_stop_at_the_last_named_field() {
        // SetConfig ends in a u16 after a usize: the header's size is 90
        // bytes where size_of counts 96.
        assert_eq!(struct_size!(sys::CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel), 90);
        assert_eq!(std::mem::size_of::<sys::CUpti_RangeProfiler_SetConfig_Params>(), 96);
        assert_eq!(struct_size!(sys::CUpti_RangeProfiler_Start_Params, pRangeProfilerObject), 24);
        assert_eq!(struct_size!(sys::CUpti_RangeProfiler_Stop_Params, isAllPassSubmitted), 41);
    }

    #[test]
    fn a_table_without_the_profiler_is_an_error_naming_the_call() {
        let t: &'static Cupti = Box::leak(Box::new(Cupti::empty("test")));
        let mut p = sys::CUpti_Profiler_Initialize_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Initialize_Params, pPriv),
            ..Default::default()
        };
        let r = (|| -> Result<(), CuptiError> { call!(t, cuptiProfilerInitialize, &mut p) })();
        match r {
            Err(CuptiError::Call { call, name }) => {
                assert_eq!((call, name), ("cuptiProfilerInitialize", "missing"));
            }
            other => panic!("{other:?}"),
        }
    }
}
