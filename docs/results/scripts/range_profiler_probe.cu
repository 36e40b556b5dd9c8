// Issue 26: does CUPTI's range profiler (gpu__time_duration.sum, the counter
// Nsight Compute reads) time the launch shapes that CUPTI's concurrent
// kernel records misread, without slowing them? Built and run on the GPU
// machine:
//
//   nvcc -O2 -o /tmp/rpp range_profiler_probe.cu \
//     -I/usr/local/cuda/extras/CUPTI/include -L/usr/local/cuda/extras/CUPTI/lib64 \
//     -lcupti -lcuda
//   /tmp/rpp auto 50     # events, auto ranges, events under them: medians in ns
//   /tmp/rpp user 50     # the same with user ranges
//   ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
//     --csv /tmp/rpp plain 50
//
// Methods, per case (N launches each, after a warm-up):
//   events    a pair of CUDA events around each launch, no profiler;
//   auto      range profiler, auto range (one range per kernel), kernel replay;
//   user      range profiler, user range pushed and popped around each launch,
//             user replay (gpu__time_duration is one pass);
//   ev-auto   events around each launch while `auto` profiles it (does the
//             profiler slow the kernel?).
#include "range_profiler.h"

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cuda_runtime.h>

#include <cstring>
#include <string>

__global__ void empty_k() {}

__global__ void spin_k(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// One thread per element.
__global__ void scale_1t(float* y, const float* x, float a, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

// Tiles of 256 × 8 elements per block; blocks past the last tile exit at once.
__global__ void scale_tiled(float* y, const float* x, float a, size_t n) {
  size_t base = (size_t)blockIdx.x * blockDim.x * 8;
  if (base >= n) return;
  for (int k = 0; k < 8; k++) {
    size_t i = base + (size_t)k * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
  }
}

struct Case {
  const char* name;
  int kind;  // 0 empty, 1 spin, 2 scale_1t, 3 scale_tiled
  long long arg;
  unsigned grid, block;
};

static float *X, *Y;
// Set by `drv`: every launch through cuLaunchKernel from cuGetProcAddress,
// as cuda-sys launches.
static bool DRIVER = false;
static CUfunction FN[4];
typedef CUresult (*LaunchFn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
static LaunchFn LAUNCH = nullptr;

static void launch(const Case& c, CUstream s) {
  if (DRIVER) {
    float a = 2.0f;
    size_t n = (size_t)c.arg;
    long long cycles = c.arg;
    void* scale[] = {&Y, &X, &a, &n};
    void* spin[] = {&cycles};
    void** p = c.kind == 0 ? nullptr : c.kind == 1 ? spin : scale;
    CK(LAUNCH(FN[c.kind], c.grid, 1, 1, c.block, 1, 1, 0, s, p, nullptr));
    return;
  }
  switch (c.kind) {
    case 0: empty_k<<<c.grid, c.block, 0, s>>>(); break;
    case 1: spin_k<<<c.grid, c.block, 0, s>>>(c.arg); break;
    case 2: scale_1t<<<c.grid, c.block, 0, s>>>(Y, X, 2.0f, (size_t)c.arg); break;
    case 3: scale_tiled<<<c.grid, c.block, 0, s>>>(Y, X, 2.0f, (size_t)c.arg); break;
  }
}

static std::vector<double> events(const Case& c, CUstream s, int n) {
  std::vector<CUevent> ev(2 * n);
  for (auto& e : ev) CK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  for (int i = 0; i < n; i++) {
    CK(cuEventRecord(ev[2 * i], s));
    launch(c, s);
    CK(cuEventRecord(ev[2 * i + 1], s));
  }
  CK(cuStreamSynchronize(s));
  std::vector<double> out;
  for (int i = 0; i < n; i++) {
    float ms;
    CK(cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    out.push_back(ms * 1e6);
  }
  for (auto& e : ev) CK(cuEventDestroy(e));
  return out;
}

// n launches profiled, one value per range (ns). With `evs`, events around
// each launch too (their readings go to *evs).
static std::vector<double> profiled(Prof& p, const Case& c, CUstream s, int n, bool user,
                                    std::vector<double>* evs) {
  std::vector<CUevent> ev;
  if (evs) {
    ev.resize(2 * n);
    for (auto& e : ev) CK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  }
  prof_start(p, n, user);
  for (int i = 0; i < n; i++) {
    if (evs) CK(cuEventRecord(ev[2 * i], s));
    if (user) push_range(p, "run");
    launch(c, s);
    if (user) pop_range(p);
    if (evs) CK(cuEventRecord(ev[2 * i + 1], s));
  }
  CK(cuStreamSynchronize(s));
  std::vector<double> out = prof_stop(p);
  if ((int)out.size() != n) fprintf(stderr, "# %s: %zu ranges for %d launches\n", c.name, out.size(), n);
  if (evs) {
    for (int i = 0; i < n; i++) {
      float ms;
      CK(cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
      evs->push_back(ms * 1e6);
    }
    for (auto& e : ev) CK(cuEventDestroy(e));
  }
  return out;
}

static void CUPTIAPI on_cb(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}
static void CUPTIAPI buf_req(uint8_t** b, size_t* size, size_t* max) {
  *size = 1 << 20;
  *b = (uint8_t*)aligned_alloc(8, *size);
  *max = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t* b, size_t, size_t) { free(b); }

// argv[3], what else the process does with CUPTI before the profiler, as
// gpu-bench's kernel mode did: "sub" cuptiSubscribe; "act" that and the
// memcpy and memset activity kinds enabled; "actoff" those enabled and
// disabled again; "drv" launches through the driver's cuLaunchKernel.
int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "auto";
  int n = argc > 2 ? atoi(argv[2]) : 50;
  const char* extra = argc > 3 ? argv[3] : "";
  if (!strcmp(extra, "sub") || !strcmp(extra, "act") || !strcmp(extra, "actoff")) {
    CUpti_SubscriberHandle h;
    CP(cuptiSubscribe(&h, (CUpti_CallbackFunc)on_cb, nullptr));
    printf("# subscribed\n");
  }
  if (!strcmp(extra, "act") || !strcmp(extra, "actoff")) {
    CP(cuptiActivityRegisterCallbacks(buf_req, buf_done));
    CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    printf("# memcpy and memset activity enabled\n");
  }
  if (!strcmp(extra, "actoff")) {
    CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET));
    CP(cuptiActivityFlushAll(1));
    printf("# and disabled again\n");
  }
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  size_t big = (size_t)256 << 20;
  CK(cuMemAlloc((CUdeviceptr*)&X, big * 4));
  CK(cuMemAlloc((CUdeviceptr*)&Y, big * 4));
  CK(cuMemsetD32((CUdeviceptr)X, 0x3f800000, big));
  if (!strcmp(extra, "drv")) {
    DRIVER = true;
    CUdriverProcAddressQueryResult q;
    CK(cuGetProcAddress("cuLaunchKernel", (void**)&LAUNCH, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    const void* syms[4] = {(const void*)empty_k, (const void*)spin_k, (const void*)scale_1t, (const void*)scale_tiled};
    for (int i = 0; i < 4; i++) {
      cudaFunction_t f;
      if (cudaGetFuncBySymbol(&f, syms[i]) != cudaSuccess) exit(2);
      FN[i] = (CUfunction)f;
    }
    printf("# launches through cuLaunchKernel from cuGetProcAddress\n");
  }
  std::vector<Case> cases = {
      {"empty", 0, 0, 1, 1},
      {"spin 2k cycles", 1, 2000, 1, 32},
      {"spin 20k cycles", 1, 20000, 1, 32},
      {"spin 200k cycles", 1, 200000, 1, 32},
      {"scale_1t 32Ki (128 blocks)", 2, 32 << 10, 128, 256},
      {"scale_tiled 32Ki (16 blocks)", 3, 32 << 10, 16, 256},
      {"scale_tiled 1Mi (512 blocks)", 3, 1 << 20, 512, 256},
      {"scale_1t 1Mi (4096 blocks)", 2, 1 << 20, 4096, 256},
      {"scale_tiled 1Mi over 4096 blocks", 3, 1 << 20, 4096, 256},
      {"scale_1t 4Mi (16384 blocks)", 2, 4 << 20, 16384, 256},
      {"scale_1t 64Mi (262144 blocks)", 2, 64 << 20, 262144, 256},
      {"scale_tiled 64Mi over 262144 blocks", 3, 64 << 20, 262144, 256},
      {"scale_tiled 64Mi (32768 blocks)", 3, 64 << 20, 32768, 256},
      {"scale_tiled 256Mi (131072 blocks)", 3, 256 << 20, 131072, 256},
      {"scale_1t 256Mi (1048576 blocks)", 2, 256 << 20, 1048576, 256},
  };
  if (!strcmp(mode, "plain")) {
    for (auto& c : cases)
      for (int i = 0; i < n; i++) launch(c, s);
    CK(cuStreamSynchronize(s));
    return 0;
  }
  // `auto` or `user`: one range mode per process (one range profiler object
  // per context).
  bool user = !strcmp(mode, "user");
  Prof p = make_prof(ctx, 0, n);
  printf("# chip %s, passes for %s: %zu\n", p.chip, METRIC, p.passes);
  printf("%-38s %10s %10s %10s   (%s ranges)\n", "case (median ns)", "events", "profiler", "ev-prof",
         user ? "user" : "auto");
  for (auto& c : cases) {
    for (int i = 0; i < 5; i++) launch(c, s);
    CK(cuStreamSynchronize(s));
    profiled(p, c, s, 4, user, nullptr);  // warm the profiler for this kernel
    double e = median(events(c, s, n));
    std::vector<double> ep;
    double a = median(profiled(p, c, s, n, user, &ep));
    double e2 = median(events(c, s, n));
    printf("%-38s %10.1f %10.1f %10.1f   (events again %.1f)\n", c.name, e, a, median(ep), e2);
    fflush(stdout);
  }
  return 0;
}
