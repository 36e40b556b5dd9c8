// What the CUDA probes of docs/results/scripts share (idle_gap_probe.cu,
// range_profiler_probe.cu, profiler_phases.cu): the checks on driver and
// CUPTI calls, a median, and CUPTI's range profiler with one counter,
// gpu__time_duration.sum (the one Nsight Compute reports), made, started
// and read as gpu-bench's KernelDurations does it
// (cuda-sys/src/cupti/range.rs): auto ranges and kernel replay (or user
// ranges and user replay), one pass. Include it before anything else:
//
//   #include "range_profiler.h"
#pragma once

#include <cuda.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    CUresult r_ = (x);                                                          \
    if (r_ != CUDA_SUCCESS) {                                                   \
      const char* s_ = nullptr;                                                 \
      cuGetErrorName(r_, &s_);                                                  \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

#define CP(x)                                                                   \
  do {                                                                          \
    CUptiResult r_ = (x);                                                       \
    if (r_ != CUPTI_SUCCESS) {                                                  \
      const char* s_ = nullptr;                                                 \
      cuptiGetResultString(r_, &s_);                                            \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

static const char* METRIC = "gpu__time_duration.sum";

// The median of v (0 for none).
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// The range profiler of one context, one counter.
struct Prof {
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* rp = nullptr;
  std::vector<uint8_t> config, data;
  // The counter data image's room, in ranges (`data` is sized for it).
  size_t room = 0;
  const char* chip = nullptr;
  size_t passes = 0;
};

// The profiler on `ctx` (device ordinal `dev`), enabled, its counter data
// sized for `max_ranges` ranges a pass.
static Prof make_prof(CUcontext ctx, int dev, size_t max_ranges) {
  Prof p;
  CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  CP(cuptiProfilerInitialize(&ip));
  CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  cn.deviceIndex = dev;
  CP(cuptiDeviceGetChipName(&cn));
  p.chip = cn.pChipName;
  CUpti_Profiler_GetCounterAvailability_Params ca = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  ca.ctx = ctx;
  CP(cuptiProfilerGetCounterAvailability(&ca));
  std::vector<uint8_t> avail(ca.counterAvailabilityImageSize);
  ca.pCounterAvailabilityImage = avail.data();
  CP(cuptiProfilerGetCounterAvailability(&ca));
  CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  hi.pChipName = cn.pChipName;
  hi.pCounterAvailabilityImage = avail.data();
  CP(cuptiProfilerHostInitialize(&hi));
  p.host = hi.pHostObject;
  CUpti_Profiler_Host_ConfigAddMetrics_Params am = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  am.pHostObject = p.host;
  am.ppMetricNames = &METRIC;
  am.numMetrics = 1;
  CP(cuptiProfilerHostConfigAddMetrics(&am));
  CUpti_Profiler_Host_GetConfigImageSize_Params gs = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  gs.pHostObject = p.host;
  CP(cuptiProfilerHostGetConfigImageSize(&gs));
  p.config.resize(gs.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params gi = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  gi.pHostObject = p.host;
  gi.pConfigImage = p.config.data();
  gi.configImageSize = p.config.size();
  CP(cuptiProfilerHostGetConfigImage(&gi));
  CUpti_Profiler_Host_GetNumOfPasses_Params np = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  np.pConfigImage = p.config.data();
  np.configImageSize = p.config.size();
  CP(cuptiProfilerHostGetNumOfPasses(&np));
  p.passes = np.numOfPasses;
  CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
  en.ctx = ctx;
  CP(cuptiRangeProfilerEnable(&en));
  p.rp = en.pRangeProfilerObject;
  return p;
}

// Starts a pass of at most `max_ranges` ranges: auto ranges and kernel
// replay (one range per kernel), or with `user` user ranges and user
// replay (push_range / pop_range). The counter data is sized anew only
// when the room changes.
static void prof_start(Prof& p, size_t max_ranges, bool user = false) {
  if (p.room != max_ranges) {
    CUpti_RangeProfiler_GetCounterDataSize_Params ds = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    ds.pRangeProfilerObject = p.rp;
    ds.pMetricNames = &METRIC;
    ds.numMetrics = 1;
    ds.maxNumOfRanges = max_ranges;
    ds.maxNumRangeTreeNodes = max_ranges;
    CP(cuptiRangeProfilerGetCounterDataSize(&ds));
    p.data.assign(ds.counterDataSize, 0);
    p.room = max_ranges;
  }
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params di = {
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  di.pRangeProfilerObject = p.rp;
  di.counterDataSize = p.data.size();
  di.pCounterData = p.data.data();
  CP(cuptiRangeProfilerCounterDataImageInitialize(&di));
  CUpti_RangeProfiler_SetConfig_Params sc = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
  sc.pRangeProfilerObject = p.rp;
  sc.configSize = p.config.size();
  sc.pConfig = p.config.data();
  sc.counterDataImageSize = p.data.size();
  sc.pCounterDataImage = p.data.data();
  sc.range = user ? CUPTI_UserRange : CUPTI_AutoRange;
  sc.replayMode = user ? CUPTI_UserReplay : CUPTI_KernelReplay;
  sc.maxRangesPerPass = max_ranges;
  sc.numNestingLevels = 1;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  CP(cuptiRangeProfilerSetConfig(&sc));
  CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
  st.pRangeProfilerObject = p.rp;
  CP(cuptiRangeProfilerStart(&st));
}

// A user range around what follows, up to pop_range.
static void push_range(Prof& p, const char* name) {
  CUpti_RangeProfiler_PushRange_Params pr = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
  pr.pRangeProfilerObject = p.rp;
  pr.pRangeName = name;
  CP(cuptiRangeProfilerPushRange(&pr));
}

static void pop_range(Prof& p) {
  CUpti_RangeProfiler_PopRange_Params pp = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
  pp.pRangeProfilerObject = p.rp;
  CP(cuptiRangeProfilerPopRange(&pp));
}

// Stops the pass and reads each range's gpu__time_duration.sum (ns), in
// order; says on stderr when a pass was left unsubmitted or ranges dropped.
static std::vector<double> prof_stop(Prof& p) {
  CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
  sp.pRangeProfilerObject = p.rp;
  CP(cuptiRangeProfilerStop(&sp));
  if (!sp.isAllPassSubmitted) fprintf(stderr, "# not every pass submitted after one pass\n");
  CUpti_RangeProfiler_DecodeData_Params dd = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
  dd.pRangeProfilerObject = p.rp;
  CP(cuptiRangeProfilerDecodeData(&dd));
  if (dd.numOfRangeDropped) fprintf(stderr, "# %zu ranges dropped\n", dd.numOfRangeDropped);
  CUpti_RangeProfiler_GetCounterDataInfo_Params gi = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  gi.pCounterDataImage = p.data.data();
  gi.counterDataImageSize = p.data.size();
  CP(cuptiRangeProfilerGetCounterDataInfo(&gi));
  std::vector<double> out;
  for (size_t r = 0; r < gi.numTotalRanges; r++) {
    double v = 0;
    CUpti_Profiler_Host_EvaluateToGpuValues_Params e = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    e.pHostObject = p.host;
    e.pCounterDataImage = p.data.data();
    e.counterDataImageSize = p.data.size();
    e.rangeIndex = r;
    e.ppMetricNames = &METRIC;
    e.numMetrics = 1;
    e.pMetricValues = &v;
    CP(cuptiProfilerHostEvaluateToGpuValues(&e));
    out.push_back(v);
  }
  return out;
}
