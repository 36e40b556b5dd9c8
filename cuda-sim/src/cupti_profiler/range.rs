//! The range profiler object of a context: enable and disable, the
//! counter data image, configuration, start, stop and decode.

use super::*;

/// The simulator's `cuptiRangeProfilerEnable`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiRangeProfilerEnable(
    p: *mut sys::CUpti_RangeProfiler_Enable_Params,
) -> CUptiResult {
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

/// The simulator's `cuptiRangeProfilerDisable`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiRangeProfilerDisable(
    p: *mut sys::CUpti_RangeProfiler_Disable_Params,
) -> CUptiResult {
    type P = sys::CUpti_RangeProfiler_Disable_Params;
    run(|| {
        // SAFETY: as in `cuptiProfilerInitialize`.
        let v = unsafe { read_params(p, struct_size!(P, pRangeProfilerObject)) }?;
        locked(|st| st.cupti.profiler.objects.remove(&id(v.pRangeProfilerObject)).map(drop).ok_or(BAD))
    })
}

/// The simulator's `cuptiRangeProfilerGetCounterDataSize`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiRangeProfilerGetCounterDataSize(
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

/// The simulator's `cuptiRangeProfilerCounterDataImageInitialize`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiRangeProfilerCounterDataImageInitialize(
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

/// The simulator's `cuptiRangeProfilerSetConfig`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiRangeProfilerSetConfig(
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

/// The simulator's `cuptiRangeProfilerStart`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiRangeProfilerStart(
    p: *mut sys::CUpti_RangeProfiler_Start_Params,
) -> CUptiResult {
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

/// The simulator's `cuptiRangeProfilerStop`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiRangeProfilerStop(
    p: *mut sys::CUpti_RangeProfiler_Stop_Params,
) -> CUptiResult {
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

/// The simulator's `cuptiRangeProfilerDecodeData`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiRangeProfilerDecodeData(
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

/// The simulator's `cuptiRangeProfilerGetCounterDataInfo`.
///
/// # Safety
/// CUPTI's contract: the parameter struct pointer is null or points at
/// the header's parameter struct, its first `structSize` bytes readable
/// and writable, and every pointer in it valid for what the header says
/// the call reads or writes (the images for their stated sizes).
pub(super) unsafe extern "C" fn cuptiRangeProfilerGetCounterDataInfo(
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
