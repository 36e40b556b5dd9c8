// Issue 26: on the H200, Nsight Compute reads truth's 1 GiB scale_f32 and
// copy_u32x4 about 1.1 % longer than every clock of gpu-bench (events and the
// range profiler alike). ncu runs each kernel after milliseconds of its own
// work, the GPU idle; gpu-bench's runs follow one another. Does a kernel
// that follows an idle GPU run longer? The kernels are truth's own, loaded
// from the committed fatbin, with truth's grids. Built and run on the GPU
// machine:
//
//   nvcc -O2 -o /tmp/gap idle_gap_probe.cu -lcuda
//   /tmp/gap kernels/fatbin 50          # events: back to back, then after idle gaps
//   ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
//     --csv /tmp/gap kernels/fatbin 50 plain
//
// Per kernel, N launches each way, a pair of events around each launch:
//   b2b       enqueued back to back (as gpu-bench's batch and hot modes);
//   gap G     the stream synchronized, then the host sleeps G, then the launch
//             (the GPU idle for G before each kernel, as under ncu).
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
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

static std::vector<char> slurp(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path.c_str());
    exit(2);
  }
  std::vector<char> v;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + n);
  fclose(f);
  return v;
}

struct K {
  const char* name;
  CUfunction f;
  std::vector<void*> args;
};

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

static const unsigned GRID = 131072, BLOCK = 256;

static void launch(K& k, CUstream s) { CK(cuLaunchKernel(k.f, GRID, 1, 1, BLOCK, 1, 1, 0, s, k.args.data(), nullptr)); }

// Medians (ns) of n launches with a pair of events around each; gap_us < 0:
// back to back; else synchronized and idle gap_us before each launch.
static double timed(K& k, CUstream s, int n, int gap_us) {
  std::vector<CUevent> ev(2 * n);
  for (auto& e : ev) CK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  for (int i = 0; i < n; i++) {
    if (gap_us >= 0) {
      CK(cuStreamSynchronize(s));
      std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    }
    CK(cuEventRecord(ev[2 * i], s));
    launch(k, s);
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
  return median(out);
}

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "kernels/fatbin";
  int n = argc > 2 ? atoi(argv[2]) : 50;
  bool plain = argc > 3 && !strcmp(argv[3], "plain");
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<char> ew = slurp(dir + "/elementwise.fatbin"), st = slurp(dir + "/stream.fatbin");
  CUmodule me, ms;
  CK(cuModuleLoadData(&me, ew.data()));
  CK(cuModuleLoadData(&ms, st.data()));
  unsigned long long n_f = 256ull << 20, n4 = n_f / 4;
  CUdeviceptr x, y, z;
  CK(cuMemAlloc(&x, n_f * 4));
  CK(cuMemAlloc(&y, n_f * 4));
  CK(cuMemAlloc(&z, n_f * 4));
  CK(cuMemsetD32(x, 0x3f800000, n_f));
  CK(cuMemsetD32(y, 0x40000000, n_f));
  float a = 2.0f, half = 0.5f;
  std::vector<K> ks(3);
  ks[0].name = "scale_f32 256Mi";
  CK(cuModuleGetFunction(&ks[0].f, me, "scale_f32"));
  ks[0].args = {&x, &z, &a, &n_f};
  ks[1].name = "copy_u32x4 256Mi";
  CK(cuModuleGetFunction(&ks[1].f, ms, "copy_u32x4"));
  ks[1].args = {&x, &z, &n4};
  ks[2].name = "triad_f32 256Mi";
  CK(cuModuleGetFunction(&ks[2].f, ms, "triad_f32"));
  ks[2].args = {&z, &y, &x, &half, &n_f};
  if (plain) {
    // Under ncu: each kernel n times (ncu serializes them and idles between).
    for (auto& k : ks)
      for (int i = 0; i < n; i++) launch(k, s);
    CK(cuStreamSynchronize(s));
    return 0;
  }
  const int gaps[] = {-1, 100, 1000, 5000, 20000};
  printf("%-20s %10s %10s %10s %10s %10s %10s\n", "kernel (median ns)", "b2b", "gap 100us", "gap 1ms", "gap 5ms",
         "gap 20ms", "b2b again");
  for (auto& k : ks) {
    for (int i = 0; i < 10; i++) launch(k, s);
    printf("%-20s", k.name);
    for (int g : gaps) printf(" %10.1f", timed(k, s, n, g));
    printf(" %10.1f\n", timed(k, s, n, -1));
    fflush(stdout);
  }
  return 0;
}
