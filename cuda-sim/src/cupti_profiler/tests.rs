//! The range profiler driven as cuda-sys's `KernelDurations` drives it,
//! and call by call for its misuse, over the installed simulator.
use super::host::*;
use super::range::*;
use super::*;
use crate::{KernelCall, KernelFault, KernelSpec, ParamSpec, Session, register_kernel};
use cuda_sys::cupti::{ActivityKind, ActivityOp, CuptiError, KernelDurations, activity, cupti_result_name};
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

/// A test's result: each failing call is an error naming it.
type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn d() -> TestResult<&'static Driver> {
    Ok(crate::install()?)
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
        let spec = KernelSpec { name: "profiler_spin", params: &SPIN, run: spin, duration: Some(spin_ns) };
        register_kernel(spec);
        let spec =
            KernelSpec { name: "profiler_calls_in", params: &[], run: calls_the_profiler, duration: None };
        register_kernel(spec);
    });
}

/// A session, device 0's primary context current, a module.
struct Env {
    session: Session,
    ctx: BorrowedContext<'static>,
    module: Option<OwnedModule>,
}

impl Env {
    /// cuda-sys's range profiler on the primary context.
    fn durations(&self, max_kernels: usize) -> Result<KernelDurations<'static>, CuptiError> {
        KernelDurations::new(self.ctx, 0, max_kernels)
    }
}

fn env(seed: u64) -> TestResult<Env> {
    register();
    let session = Session::new(seed);
    init::init(d()?, 0)?;
    let ctx = primary_ctx::retain(d()?, 0)?;
    context::set_current(d()?, Some(ctx))?;
    // SAFETY: a NUL-terminated PTX image.
    let module = unsafe { module::load_data(d()?, c".version 8.0\n".as_ptr().cast()) }?;
    Ok(Env { session, ctx, module: Some(module) })
}

impl Env {
    fn stream(&self) -> TestResult<OwnedStream> {
        Ok(stream::create_with_priority(d()?, 0, 0)?)
    }

    /// The context as CUPTI's headers type it.
    fn cupti_ctx(&self) -> sys::CUcontext {
        self.ctx.as_raw().cast()
    }

    /// Launches `name` with `args` on `s`.
    fn launch(&self, name: &CStr, s: &OwnedStream, args: &mut [*mut c_void]) -> TestResult {
        let m = self.module.as_ref().ok_or("the environment's module was unloaded")?.as_borrowed();
        let f = module::get_function(m, name)?;
        // SAFETY: the simulator's CPU kernels read their parameters
        // through checked accessors; these touch no memory.
        unsafe { launch::launch_kernel(f, [1, 1, 1], [1, 1, 1], 0, s, args) }?;
        Ok(())
    }

    /// A spin kernel of `ns` simulated nanoseconds on `s`.
    fn spin(&self, s: &OwnedStream, mut ns: u64) -> TestResult {
        self.launch(c"profiler_spin", s, &mut [(&raw mut ns).cast()])
    }

    fn finish(mut self, s: OwnedStream) -> TestResult {
        stream::destroy(s)?;
        if let Some(m) = self.module.take() {
            module::unload(m)?;
        }
        // SAFETY: every handle of the context was dropped above.
        unsafe { primary_ctx::release(d()?, 0) }?;
        let live = self.session.live();
        assert!(live.is_empty(), "leaked: {live:?}");
        Ok(())
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
fn every_function_of_the_table_is_filled() -> TestResult {
    assert_eq!(crate::cupti::table().missing(), Vec::<&str>::new());
    Ok(())
}

#[test]
fn kernel_durations_reads_each_kernels_simulated_duration_as_its_activity_record_does() -> TestResult {
    let _serial = serial();
    let e = env(0x9f01)?;
    let s = e.stream()?;
    let a = activity()?;
    let sid = a.stream_id(e.ctx.as_raw(), s.as_raw())?;
    let records = a.consumer(&[ActivityKind::Kernel])?;
    let mut k = e.durations(8)?;
    let buf = memory::alloc(d()?, 4096)?;
    k.start()?;
    e.spin(&s, 2_000)?;
    // SAFETY: `buf` is 4 KiB of device memory, freed after the sync.
    unsafe { memory::memset_d32_async(buf, 7, 1024, &s) }?;
    e.spin(&s, 5_000)?;
    e.spin(&s, 7_500)?;
    stream::synchronize(&s)?;
    let ranges = k.stop()?;
    assert_eq!(ranges, [2_000.0, 5_000.0, 7_500.0], "the memset is no range");
    let kernels: Vec<f64> = records
        .take()?
        .into_iter()
        .filter(|r| r.stream_id == sid && matches!(r.op, ActivityOp::Kernel { .. }))
        .map(|r| r.duration_ns() as f64)
        .collect();
    assert_eq!(kernels, ranges, "the activity records say the same");
    // A kernel after the stop is in no range; the next round has only
    // its own.
    e.spin(&s, 1_500)?;
    stream::synchronize(&s)?;
    k.start()?;
    e.spin(&s, 3_000)?;
    stream::synchronize(&s)?;
    assert_eq!(k.stop()?, [3_000.0]);
    drop(k);
    drop(records);
    // SAFETY: every use of `buf` completed (synchronized above).
    unsafe { memory::free(d()?, buf) }?;
    e.finish(s)?;
    Ok(())
}

/// As CUPTI 13.0 on an H100 and an H200: while a consumer keeps the memcpy
/// (or memset) activity kind on, the profiler records no range; once it
/// is dropped, every kernel is a range again.
#[test]
fn no_range_while_the_memcpy_or_memset_records_are_on() -> TestResult {
    let _serial = serial();
    let e = env(0x9f07)?;
    let s = e.stream()?;
    let a = activity()?;
    let mut k = e.durations(8)?;
    for kind in [ActivityKind::Memcpy, ActivityKind::Memset] {
        let copies = a.consumer(&[kind])?;
        k.start()?;
        e.spin(&s, 2_000)?;
        stream::synchronize(&s)?;
        assert_eq!(k.stop()?, Vec::<f64>::new(), "{kind:?} records on: no range");
        drop(copies);
    }
    k.start()?;
    e.spin(&s, 2_000)?;
    stream::synchronize(&s)?;
    assert_eq!(k.stop()?, [2_000.0], "the records off: the kernel is a range");
    drop(k);
    e.finish(s)?;
    Ok(())
}

#[test]
fn a_kernel_queued_before_the_start_is_no_range_even_if_it_runs_after() -> TestResult {
    let _serial = serial();
    let e = env(0x9f02)?;
    let s = e.stream()?;
    let mut k = e.durations(8)?;
    e.spin(&s, 4_000)?;
    k.start()?;
    e.spin(&s, 2_000)?;
    stream::synchronize(&s)?;
    assert_eq!(k.stop()?, [2_000.0]);
    drop(k);
    e.finish(s)?;
    Ok(())
}

#[test]
fn kernels_past_the_room_are_dropped_and_counted() -> TestResult {
    let _serial = serial();
    let e = env(0x9f03)?;
    let s = e.stream()?;
    let mut k = e.durations(8)?;
    k.start()?;
    for i in 0..10 {
        e.spin(&s, 1_000 + i)?;
    }
    stream::synchronize(&s)?;
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
        e.spin(&s, 1_000 + i)?;
    }
    stream::synchronize(&s)?;
    assert_eq!(raw.stop(), SUCCESS);
    assert_eq!(raw.decode(), (SUCCESS, 2));
    assert_eq!(Raw::ranges_in(&raw.data), (SUCCESS, 8));
    assert_eq!(raw.value(7, METRIC), (SUCCESS, 1_007.0));
    assert_eq!(raw.value(8, METRIC).0, INVALID_PARAMETER);
    drop(raw);
    e.finish(s)?;
    Ok(())
}

#[test]
fn misuse_is_an_error_and_never_a_panic() -> TestResult {
    let _serial = serial();
    let e = env(0x9f04)?;
    let s = e.stream()?;
    let first = e.durations(8)?;
    match e.durations(8) {
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
    let mut unknown = Start { structSize: struct_size!(Start, pRangeProfilerObject), ..Default::default() };
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
    e.finish(s)?;
    Ok(())
}

#[test]
fn only_gpu_time_duration_is_known() -> TestResult {
    let _serial = serial();
    let e = env(0x9f05)?;
    let s = e.stream()?;
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
    let mut init =
        Init { structSize: struct_size!(Init, pHostObject), pChipName: CHIP.as_ptr(), ..Default::default() };
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
    e.finish(s)?;
    Ok(())
}

#[test]
fn images_are_checked_where_they_come_back() -> TestResult {
    let _serial = serial();
    let e = env(0x9f06)?;
    let s = e.stream()?;
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
    e.spin(&s, 2_500)?;
    stream::synchronize(&s)?;
    assert_eq!(raw.stop(), SUCCESS);
    raw.data[0] ^= 0xff;
    assert_eq!(raw.decode().0, INVALID_PARAMETER);
    raw.data[0] ^= 0xff;
    assert_eq!(raw.decode(), (SUCCESS, 0));
    assert_eq!(raw.value(0, METRIC), (SUCCESS, 2_500.0));
    drop(raw);
    e.finish(s)?;
    Ok(())
}

#[test]
fn a_profiler_call_from_inside_a_kernel_is_refused() -> TestResult {
    let _serial = serial();
    let e = env(0x9f07)?;
    let s = e.stream()?;
    INSIDE.store(u32::MAX, Ordering::SeqCst);
    e.launch(c"profiler_calls_in", &s, &mut [])?;
    stream::synchronize(&s)?;
    let r = CUptiResult(INSIDE.load(Ordering::SeqCst));
    assert_eq!(cupti_result_name(r), INVALID_OPERATION);
    e.finish(s)?;
    Ok(())
}
