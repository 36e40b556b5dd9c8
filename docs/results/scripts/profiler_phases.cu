// Issue 26: where does the range profiler's time go? gpu-bench's kernel mode
// on the profiler took about 1.45 s more per case than on the concurrent
// records (truth: 140 s against 91 s for 34 cases, H200). This times each
// CUPTI call of one case's life (make, one round of N launches, teardown),
// five times in one process, as gpu-bench's KernelDurations makes them.
// Built and run on the GPU machine:
//
//   nvcc -O2 -o /tmp/phases profiler_phases.cu \
//     -I/usr/local/cuda/targets/x86_64-linux/include -L/usr/local/cuda/targets/x86_64-linux/lib \
//     -lcupti -lcuda
//   /tmp/phases 256
#include "range_profiler.h"

#include <chrono>

__global__ void empty_k() {}

static auto T0 = std::chrono::steady_clock::now();
static double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - T0).count(); }
static double last;
static void lap(const char* what) {
  double t = now_ms();
  printf(" %s %.3f", what, t - last);
  last = now_ms();
}

// Median (ns) of n event pairs, each around one empty launch.
static double event_median(CUstream s, int n) {
  std::vector<CUevent> ev(2 * n);
  for (auto& e : ev) CK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  for (int i = 0; i < n; i++) {
    CK(cuEventRecord(ev[2 * i], s));
    empty_k<<<1, 1, 0, s>>>();
    CK(cuEventRecord(ev[2 * i + 1], s));
  }
  CK(cuStreamSynchronize(s));
  std::vector<double> v;
  for (int i = 0; i < n; i++) {
    float ms;
    CK(cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    v.push_back(ms * 1e6);
  }
  for (auto& e : ev) CK(cuEventDestroy(e));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Host time per launch (µs) of n empty launches, submission only.
static double submit_us(CUstream s, int n) {
  CK(cuStreamSynchronize(s));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; i++) empty_k<<<1, 1, 0, s>>>();
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
  CK(cuStreamSynchronize(s));
  return us;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 256;
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  empty_k<<<1, 1, 0, s>>>();
  CK(cuStreamSynchronize(s));
  printf("# before any profiler: submit %.2f us, event pair %.0f ns\n", submit_us(s, 2000), event_median(s, 200));
  printf("# ms per CUPTI call, one case's life; %d launches of an empty kernel a round, 3 rounds\n", n);
  for (int rep = 0; rep < 5; rep++) {
    printf("case %d:", rep);
    last = now_ms();
    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CP(cuptiProfilerInitialize(&ip));
    lap("init");
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    cn.deviceIndex = 0;
    CP(cuptiDeviceGetChipName(&cn));
    CUpti_Profiler_GetCounterAvailability_Params ca = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    ca.ctx = ctx;
    CP(cuptiProfilerGetCounterAvailability(&ca));
    std::vector<uint8_t> avail(ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = avail.data();
    CP(cuptiProfilerGetCounterAvailability(&ca));
    lap("chip+avail");
    CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = cn.pChipName;
    hi.pCounterAvailabilityImage = avail.data();
    CP(cuptiProfilerHostInitialize(&hi));
    lap("hostinit");
    CUpti_Profiler_Host_ConfigAddMetrics_Params am = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    am.pHostObject = hi.pHostObject;
    am.ppMetricNames = &METRIC;
    am.numMetrics = 1;
    CP(cuptiProfilerHostConfigAddMetrics(&am));
    CUpti_Profiler_Host_GetConfigImageSize_Params gs = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    gs.pHostObject = hi.pHostObject;
    CP(cuptiProfilerHostGetConfigImageSize(&gs));
    std::vector<uint8_t> config(gs.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params gi = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    gi.pHostObject = hi.pHostObject;
    gi.pConfigImage = config.data();
    gi.configImageSize = config.size();
    CP(cuptiProfilerHostGetConfigImage(&gi));
    lap("config");
    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    en.ctx = ctx;
    CP(cuptiRangeProfilerEnable(&en));
    lap("enable");
    CUpti_RangeProfiler_GetCounterDataSize_Params ds = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    ds.pRangeProfilerObject = en.pRangeProfilerObject;
    ds.pMetricNames = &METRIC;
    ds.numMetrics = 1;
    ds.maxNumOfRanges = 1024;
    ds.maxNumRangeTreeNodes = 1024;
    CP(cuptiRangeProfilerGetCounterDataSize(&ds));
    std::vector<uint8_t> data(ds.counterDataSize);
    lap("datasize");
    for (int round = 0; round < 3; round++) {
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params di = {
          CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
      di.pRangeProfilerObject = en.pRangeProfilerObject;
      di.counterDataSize = data.size();
      di.pCounterData = data.data();
      CP(cuptiRangeProfilerCounterDataImageInitialize(&di));
      lap("| imageinit");
      CUpti_RangeProfiler_SetConfig_Params sc = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
      sc.pRangeProfilerObject = en.pRangeProfilerObject;
      sc.configSize = config.size();
      sc.pConfig = config.data();
      sc.counterDataImageSize = data.size();
      sc.pCounterDataImage = data.data();
      sc.range = CUPTI_AutoRange;
      sc.replayMode = CUPTI_KernelReplay;
      sc.maxRangesPerPass = 1024;
      sc.numNestingLevels = 1;
      sc.minNestingLevel = 1;
      sc.passIndex = 0;
      sc.targetNestingLevel = 1;
      CP(cuptiRangeProfilerSetConfig(&sc));
      lap("setconfig");
      CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
      st.pRangeProfilerObject = en.pRangeProfilerObject;
      CP(cuptiRangeProfilerStart(&st));
      lap("start");
      for (int i = 0; i < n; i++) empty_k<<<1, 1, 0, s>>>();
      CK(cuStreamSynchronize(s));
      lap("launches");
      CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
      sp.pRangeProfilerObject = en.pRangeProfilerObject;
      CP(cuptiRangeProfilerStop(&sp));
      lap("stop");
      CUpti_RangeProfiler_DecodeData_Params dd = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
      dd.pRangeProfilerObject = en.pRangeProfilerObject;
      CP(cuptiRangeProfilerDecodeData(&dd));
      lap("decode");
      CUpti_RangeProfiler_GetCounterDataInfo_Params inf = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
      inf.pCounterDataImage = data.data();
      inf.counterDataImageSize = data.size();
      CP(cuptiRangeProfilerGetCounterDataInfo(&inf));
      for (size_t r = 0; r < inf.numTotalRanges; r++) {
        double v = 0;
        CUpti_Profiler_Host_EvaluateToGpuValues_Params e = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        e.pHostObject = hi.pHostObject;
        e.pCounterDataImage = data.data();
        e.counterDataImageSize = data.size();
        e.rangeIndex = r;
        e.ppMetricNames = &METRIC;
        e.numMetrics = 1;
        e.pMetricValues = &v;
        CP(cuptiProfilerHostEvaluateToGpuValues(&e));
      }
      printf(" evaluate(%zu)", inf.numTotalRanges);
      lap("");
    }
    // Enabled, stopped: do plain launches and event pairs cost what they
    // cost without the profiler?
    printf(" | enabled-idle: submit %.2f us, event pair %.0f ns", submit_us(s, 2000), event_median(s, 200));
    last = now_ms();
    CUpti_RangeProfiler_Disable_Params dp = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    dp.pRangeProfilerObject = en.pRangeProfilerObject;
    CP(cuptiRangeProfilerDisable(&dp));
    lap("| disable");
    CUpti_Profiler_Host_Deinitialize_Params hd = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    hd.pHostObject = hi.pHostObject;
    CP(cuptiProfilerHostDeinitialize(&hd));
    lap("deinit");
    printf(" | disabled: submit %.2f us, event pair %.0f ns", submit_us(s, 2000), event_median(s, 200));
    printf("\n");
    fflush(stdout);
  }
  return 0;
}
