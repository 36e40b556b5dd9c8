//! The profiler host calls and the device queries: initialization, the
//! chip name and counter availability, host objects, configuration images,
//! and the evaluation of a counter data image.

use super::*;

/// The simulator's `cuptiProfilerInitialize`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiProfilerInitialize(
    p: *mut sys::CUpti_Profiler_Initialize_Params,
) -> CUptiResult {
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

/// The simulator's `cuptiDeviceGetChipName`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiDeviceGetChipName(
    p: *mut sys::CUpti_Device_GetChipName_Params,
) -> CUptiResult {
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

/// The simulator's `cuptiProfilerGetCounterAvailability`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiProfilerGetCounterAvailability(
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

/// The simulator's `cuptiProfilerHostInitialize`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiProfilerHostInitialize(
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

/// The simulator's `cuptiProfilerHostDeinitialize`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiProfilerHostDeinitialize(
    p: *mut sys::CUpti_Profiler_Host_Deinitialize_Params,
) -> CUptiResult {
    type P = sys::CUpti_Profiler_Host_Deinitialize_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pHostObject)) }?;
        locked(|st| st.cupti.profiler.hosts.remove(&id(v.pHostObject)).map(drop).ok_or(BAD))
    })
}

/// The simulator's `cuptiProfilerHostConfigAddMetrics`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiProfilerHostConfigAddMetrics(
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

/// The simulator's `cuptiProfilerHostGetConfigImageSize`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiProfilerHostGetConfigImageSize(
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

/// The simulator's `cuptiProfilerHostGetConfigImage`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiProfilerHostGetConfigImage(
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

/// The simulator's `cuptiProfilerHostGetNumOfPasses`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiProfilerHostGetNumOfPasses(
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

/// The simulator's `cuptiProfilerHostEvaluateToGpuValues`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiProfilerHostEvaluateToGpuValues(
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
