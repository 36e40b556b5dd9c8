// Issue 26: on the H200, Nsight Compute reads truth's 1 GiB scale_f32 and
// copy_u32x4 about 1.1 % longer than every clock of gpu-bench (events and the
// range profiler alike). ncu runs each kernel after milliseconds of its own
// work, the GPU idle; gpu-bench's runs follow one another. Does a kernel
// that follows an idle GPU run longer? The kernels are truth's own, loaded
// from the committed fatbin, with truth's grids. Built and run on the GPU
// machine:
//
//   nvcc -O2 -o /tmp/gap idle_gap_probe.cu -I$CUDA/targets/x86_64-linux/include \
//     -L$CUDA/targets/x86_64-linux/lib -lcupti -lcuda
//   /tmp/gap kernels/fatbin 50          # events: back to back, then after idle gaps
//   /tmp/gap kernels/fatbin 50 prof     # the same on CUPTI's range profiler (ncu's counter)
//   /tmp/gap kernels/fatbin 20 place    # the range profiler over other buffers: does where
//                                       # a 1 GiB buffer sits change the kernel's time?
//   /tmp/gap kernels/fatbin 512 cycle   # small kernels launch by launch on the range profiler
//   /tmp/gap kernels/fatbin 512 cycleact  # the same, CUPTI's memcpy/memset records on and off first
//   /tmp/gap kernels/fatbin 256 streams  # the same small kernels on 12 streams made one after
//                                        # another: does a stream's reading depend on which it is?
//   ncu … /tmp/gap kernels/fatbin 100 smallplain   # the same small launches under ncu
//   /tmp/gap kernels/fatbin 512 second   # cycle's launches on a second stream, made after the
//                                        # first had work (as gpu-bench's timer makes its stream)
//   ncu … /tmp/gap kernels/fatbin 100 secondplain  # smallplain's launches on that second stream
//   ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
//     --csv /tmp/gap kernels/fatbin 50 plain
//   /tmp/gap kernels/fatbin 7 pace       # batch mode's pace against one kernel's duration (below)
//   ncu --replay-mode range … /tmp/gap kernels/fatbin 7 pacencu   # each batch a range of ncu's
//   ncu … /tmp/gap kernels/fatbin 20 paceplain                     # each kernel alone, under ncu
//   /tmp/gap kernels/fatbin 512 idle     # the empty kernel and the one-cycle spin on a second stream,
//                                        # back to back, then each launch after a sync (+ an idle wait)
//
// Per kernel, N launches each way, a pair of events around each launch:
//   b2b       enqueued back to back (as gpu-bench's batch and hot modes);
//   gap G     the stream synchronized, then the host sleeps G, then the launch
//             (the GPU idle for G before each kernel, as under ncu).
// With `prof`, the range profiler's gpu__time_duration.sum per kernel (auto
// ranges, kernel replay: the kernels serialized) instead of events.
//
// `pace` (issue 26: batch mode reads truth's 32 Mi memory kernels 1.1-1.7 µs
// above ncu's duration on the H200). Batch mode is a stream's pace: what a
// kernel takes back to back, the time the GPU spends between two kernels
// included; ncu's duration is one kernel's. truth's memory kernels, with
// truth's grids, at 1 Mi, 32 Mi and 256 Mi elements, each in batches of
// K = 10 and K = 50 launches back to back, n rounds: the pace is
// (t50 - t10) / 40 (the batch's fixed cost cancels), the median over rounds,
// by a pair of events around each batch (as batch mode times) and by the
// range profiler's user ranges (gpu__time_duration.sum of the whole batch:
// the GPU's own clock). `pacencu`: the same batches, plain, each between
// cuProfilerStart and cuProfilerStop, for `ncu --replay-mode range` (ncu's
// duration of each batch); `paceplain`: each kernel n times, for ncu's
// kernel replay (one kernel's duration, on these buffers).
#include "range_profiler.h"

// cudaProfiler.h's two calls (libcuda's; the header is not in every toolkit tree).
extern "C" CUresult CUDAAPI cuProfilerStart(void);
extern "C" CUresult CUDAAPI cuProfilerStop(void);

#include <cupti_activity.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>

static void CUPTIAPI buf_req(uint8_t** b, size_t* size, size_t* max) {
  *size = 1 << 20;
  *b = (uint8_t*)aligned_alloc(8, *size);
  *max = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t* b, size_t, size_t) { free(b); }

// What gpu-bench's kernel mode does before each case on the profiler: the
// memcpy and memset activity kinds enabled (a consumer watching one run),
// then disabled and flushed.
static void activity_on_off() {
  static bool registered = false;
  if (!registered) {
    CP(cuptiActivityRegisterCallbacks(buf_req, buf_done));
    registered = true;
  }
  CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
  CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET));
  CP(cuptiActivityFlushAll(1));
}

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

static const unsigned GRID = 131072, BLOCK = 256;

// Readings (ns) on two levels: a reading is upper when it lies more than
// 64 ns above the minimum. The median of each level (0 for an empty
// upper one), the upper share, how often a reading is on the level of the
// one 4 and 8 launches before, and the median of all.
struct Levels {
  double lower, upper, share, same4, same8, all;
};

static Levels levels(const std::vector<double>& v) {
  double lo = *std::min_element(v.begin(), v.end());
  std::vector<int> up;
  std::vector<double> l, h;
  for (double t : v) {
    up.push_back(t > lo + 64);
    (t > lo + 64 ? h : l).push_back(t);
  }
  auto same = [&](size_t k) {
    size_t m = 0;
    for (size_t i = k; i < up.size(); i++) m += up[i] == up[i - k];
    return up.size() > k ? (double)m / (up.size() - k) : 0.0;
  };
  return {median(l), h.empty() ? 0.0 : median(h), (double)h.size() / v.size(), same(4), same(8), median(v)};
}

static void launch(K& k, CUstream s) { CK(cuLaunchKernel(k.f, GRID, 1, 1, BLOCK, 1, 1, 0, s, k.args.data(), nullptr)); }

static Prof* PROF = nullptr;

// Medians (ns) of n launches on the range profiler; gap_us as `timed`.
static double profiled(K& k, CUstream s, int n, int gap_us) {
  prof_start(*PROF, n);
  for (int i = 0; i < n; i++) {
    if (gap_us >= 0) {
      CK(cuStreamSynchronize(s));
      std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    }
    launch(k, s);
  }
  CK(cuStreamSynchronize(s));
  std::vector<double> v = prof_stop(*PROF);
  if ((int)v.size() != n) fprintf(stderr, "# %s: %zu ranges for %d launches\n", k.name, v.size(), n);
  return median(v);
}

// Medians (ns) of n launches with a pair of events around each; gap_us < 0:
// back to back; else synchronized and idle gap_us before each launch.
static double timed(K& k, CUstream s, int n, int gap_us) {
  if (PROF) return profiled(k, s, n, gap_us);
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
  bool prof = argc > 3 && !strcmp(argv[3], "prof");
  bool place = argc > 3 && !strcmp(argv[3], "place");
  bool streams = argc > 3 && !strcmp(argv[3], "streams");
  bool cycle = argc > 3 && (!strcmp(argv[3], "cycle") || !strcmp(argv[3], "cycleact") || streams ||
                            !strcmp(argv[3], "second"));
  bool act = argc > 3 && !strcmp(argv[3], "cycleact");
  bool second = argc > 3 && (!strcmp(argv[3], "second") || !strcmp(argv[3], "secondplain"));
  bool smallplain = argc > 3 && (!strcmp(argv[3], "smallplain") || !strcmp(argv[3], "secondplain"));
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
  if (argc > 3 && !strcmp(argv[3], "idle")) {
    // Issue 26: truth's kernel mode reads the empty kernel 1,280 ns in one
    // process and 1,504 in another (2026-11-28, calls 1 and 2: launches at
    // about 1,250 or about 1,560 ns at random, the upper share 17 % or
    // 55 %); ncu, which runs each kernel it times alone with its own work
    // around it, never reads the upper level. On a second stream (as the
    // timer's), on the range profiler (auto ranges, kernel replay, as kernel
    // mode), n launches each way, four times over: back to back (as kernel mode), each after a
    // synchronization of the stream, each after a synchronization and 20 µs,
    // 200 µs or 2 ms of idle GPU (the last two added after 065dd29's runs).
    std::vector<char> sp = slurp(dir + "/spin.fatbin");
    CUmodule msp;
    CK(cuModuleLoadData(&msp, sp.data()));
    CUfunction fempty, fspin;
    CK(cuModuleGetFunction(&fempty, msp, "empty_kernel"));
    CK(cuModuleGetFunction(&fspin, msp, "spin_cycles"));
    unsigned long long one = 1;
    void* spin_args[] = {&one, &y};
    CK(cuMemsetD8Async(y, 0, 8, s));
    CK(cuStreamSynchronize(s));
    CUstream s2;
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    Prof p = make_prof(ctx, 0, n);
    struct {
      const char* name;
      CUfunction f;
      void** args;
    } ks2[] = {{"empty_kernel", fempty, nullptr}, {"spin 1 cycle", fspin, spin_args}};
    const char* ways[] = {"back to back", "sync each", "sync + 20 us", "sync + 200 us", "sync + 2 ms"};
    const int idle_us[] = {0, 0, 20, 200, 2000};
    printf("%-14s %-14s %6s %6s %6s %6s %6s\n", "kernel (ns)", "launches", "lower", "upper", "share", "same1",
           "median");
    for (int rep = 0; rep < 4; rep++) {
      for (auto& k : ks2) {
        for (int w = 0; w < 5; w++) {
          prof_start(p, n);
          for (int i = 0; i < n; i++) {
            CK(cuLaunchKernel(k.f, 1, 1, 1, 1, 1, 1, 0, s2, k.args, nullptr));
            if (w > 0) CK(cuStreamSynchronize(s2));
            if (w > 1) std::this_thread::sleep_for(std::chrono::microseconds(idle_us[w]));
          }
          CK(cuStreamSynchronize(s2));
          std::vector<double> v = prof_stop(p);
          // Two levels split at 1,450 ns (between the two seen).
          size_t up = 0, same = 0;
          std::vector<double> lo, hi;
          for (size_t i = 0; i < v.size(); i++) {
            (v[i] > 1450 ? hi : lo).push_back(v[i]);
            up += v[i] > 1450;
            if (i) same += (v[i] > 1450) == (v[i - 1] > 1450);
          }
          printf("%-14s %-14s %6.0f %6.0f %6.2f %6.2f %6.0f\n", k.name, ways[w], median(lo), median(hi),
                 v.empty() ? 0.0 : (double)up / v.size(), v.size() > 1 ? (double)same / (v.size() - 1) : 0.0,
                 median(v));
          fflush(stdout);
        }
      }
    }
    return 0;
  }
  if (!strncmp(argc > 3 ? argv[3] : "", "pace", 4)) {
    // See `pace` in the header. Every case's grid as truth's typed wrappers
    // make it: tiles of 2 x 256 vectors (scale, copy, triad), or one thread
    // per vector capped at 8 blocks per SM (read_sum).
    bool ranges = !strcmp(argv[3], "pacencu"), only = !strcmp(argv[3], "paceplain");
    int sms = 0;
    CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CUfunction fsum;
    CK(cuModuleGetFunction(&fsum, ms, "read_sum_u32x4"));
    CUdeviceptr sum;
    CK(cuMemAlloc(&sum, 8));
    struct P {
      std::string name;
      CUfunction f;
      unsigned grid;
      unsigned long long n, n4;
      void* args[5];
    };
    std::vector<P> cs;
    const unsigned long long sizes[] = {1ull << 20, 32ull << 20, 256ull << 20};
    const char* labels[] = {"1 Mi", "32 Mi", "256 Mi"};
    for (int i = 0; i < 3; i++) {
      unsigned long long e = sizes[i], v = (e + 3) / 4;
      unsigned tiles = (unsigned)((v + 511) / 512);
      unsigned sum_grid = (unsigned)std::min<unsigned long long>((v + 255) / 256, 8ull * sms);
      cs.push_back({std::string("scale_f32 ") + labels[i], ks[0].f, tiles, e, v, {}});
      cs.push_back({std::string("copy_u32x4 ") + labels[i], ks[1].f, tiles, e, v, {}});
      cs.push_back({std::string("triad_f32 ") + labels[i], ks[2].f, tiles, e, v, {}});
      cs.push_back({std::string("read_sum_u32x4 ") + labels[i], fsum, sum_grid, e, v, {}});
    }
    // The arguments point into the cases, which no longer move.
    for (size_t i = 0; i < cs.size(); i++) {
      P& c = cs[i];
      switch (i % 4) {
        case 0: c.args[0] = &x; c.args[1] = &z; c.args[2] = &a; c.args[3] = &c.n; break;
        case 1: c.args[0] = &x; c.args[1] = &z; c.args[2] = &c.n4; break;
        case 2: c.args[0] = &z; c.args[1] = &y; c.args[2] = &x; c.args[3] = &half; c.args[4] = &c.n; break;
        default: c.args[0] = &x; c.args[1] = &c.n4; c.args[2] = &sum; break;
      }
    }
    auto go = [&](P& c, int k) {
      for (int i = 0; i < k; i++) CK(cuLaunchKernel(c.f, c.grid, 1, 1, BLOCK, 1, 1, 0, s, c.args, nullptr));
    };
    const int KS[2] = {10, 50};
    if (only || ranges) {
      // Under ncu: each kernel alone n times (kernel replay), or each batch
      // a range (range replay), in the order the table below lists.
      for (auto& c : cs) {
        for (int r = 0; r < n; r++) {
          if (only) {
            go(c, 1);
            continue;
          }
          for (int k : KS) {
            CK(cuProfilerStart());
            go(c, k);
            CK(cuProfilerStop());
            CK(cuStreamSynchronize(s));
          }
        }
      }
      CK(cuStreamSynchronize(s));
      return 0;
    }
    Prof p = make_prof(ctx, 0, 2 * (size_t)n);
    CUevent e0, e1;
    CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    printf("# SMs %d; per kernel, ns: batch of 10 and of 50 per kernel, and the pace (t50 - t10) / 40, median of %d\n",
           sms, n);
    printf("%-22s %7s %10s %10s %10s | %10s %10s %10s\n", "kernel", "grid", "ev 10/k", "ev 50/k", "ev pace",
           "rp 10/k", "rp 50/k", "rp pace");
    for (auto& c : cs) {
      go(c, 3);
      CK(cuStreamSynchronize(s));
      std::vector<double> ev[2], rp[2], evp, rpp;
      for (int r = 0; r < n; r++) {
        for (int j = 0; j < 2; j++) {
          CK(cuEventRecord(e0, s));
          go(c, KS[j]);
          CK(cuEventRecord(e1, s));
          CK(cuStreamSynchronize(s));
          float ms_;
          CK(cuEventElapsedTime(&ms_, e0, e1));
          ev[j].push_back(ms_ * 1e6);
        }
        evp.push_back((ev[1].back() - ev[0].back()) / 40);
      }
      // The range profiler (user ranges only: one range mode per process):
      // warmed on this kernel by one pass, then one user range per batch.
      prof_start(p, 2 * (size_t)n, true);
      push_range(p, "warm");
      go(c, 1);
      pop_range(p);
      CK(cuStreamSynchronize(s));
      prof_stop(p);
      prof_start(p, 2 * (size_t)n, true);
      // A name per range: the profiler sums ranges of one name into one
      // (call 2 of 2026-11-28 ran with two names, so its columns were sums
      // over the rounds).
      std::vector<std::string> names;
      for (int r = 0; r < n; r++)
        for (int k : KS) names.push_back("k" + std::to_string(k) + " round " + std::to_string(r));
      for (int r = 0; r < n; r++) {
        for (int j = 0; j < 2; j++) {
          push_range(p, names[2 * r + j].c_str());
          go(c, KS[j]);
          pop_range(p);
        }
      }
      CK(cuStreamSynchronize(s));
      std::vector<double> v = prof_stop(p);
      for (size_t i = 0; i + 1 < v.size(); i += 2) {
        rp[0].push_back(v[i]);
        rp[1].push_back(v[i + 1]);
        rpp.push_back((v[i + 1] - v[i]) / 40);
      }
      if ((int)v.size() != 2 * n) fprintf(stderr, "# %s: %zu ranges for %d batches\n", c.name.c_str(), v.size(), 2 * n);
      printf("%-22s %7u %10.1f %10.1f %10.1f | %10.1f %10.1f %10.1f\n", c.name.c_str(), c.grid, median(ev[0]) / 10,
             median(ev[1]) / 50, median(evp), median(rp[0]) / 10, median(rp[1]) / 50, median(rpp));
      fflush(stdout);
    }
    return 0;
  }
  if (plain) {
    // Under ncu: each kernel n times (ncu serializes them and idles between).
    for (auto& k : ks)
      for (int i = 0; i < n; i++) launch(k, s);
    CK(cuStreamSynchronize(s));
    return 0;
  }
  Prof p;
  if (cycle || smallplain) {
    // truth's empty spin (one cycle, one block of one thread) and scale_f32
    // over 1 Ki (one block of 256), each n times back to back: on the
    // range profiler, the two levels the readings sit on, the share on the
    // upper one, how often a reading is on the level of the one 4 and 8
    // launches before, and the median; or (smallplain) plain, for ncu.
    std::vector<char> sp = slurp(dir + "/spin.fatbin");
    CUmodule msp;
    CK(cuModuleLoadData(&msp, sp.data()));
    CUfunction fspin, fscale = ks[0].f;
    CK(cuModuleGetFunction(&fspin, msp, "spin_cycles"));
    unsigned long long one = 1, small = 1024;
    void* spin_args[] = {&one, &y};
    void* scale_args[] = {&x, &z, &a, &small};
    struct S {
      const char* name;
      CUfunction f;
      void** args;
      unsigned block;
    } smalls[] = {{"spin_cycles 1 cycle", fspin, spin_args, 1}, {"scale_f32 1Ki", fscale, scale_args, 256}};
    if (second) {
      // The first stream gets work (one memset), then a second one is made
      // and every launch below goes to it.
      CK(cuMemsetD8Async(y, 0, 8, s));
      CK(cuStreamSynchronize(s));
      CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      printf("# on a second stream, made after the first had work\n");
    }
    if (smallplain) {
      for (auto& k : smalls)
        for (int i = 0; i < n; i++) CK(cuLaunchKernel(k.f, 1, 1, 1, k.block, 1, 1, 0, s, k.args, nullptr));
      CK(cuStreamSynchronize(s));
      return 0;
    }
    p = make_prof(ctx, 0, n);
    if (streams) {
      // 12 more non-blocking streams, made one after another; each kernel n
      // times on each, twice over: lower and upper level, upper share, same8, median.
      const int NS = 12;
      std::vector<CUstream> ss(NS);
      for (auto& x : ss) CK(cuStreamCreate(&x, CU_STREAM_NON_BLOCKING));
      const char* env = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
      printf("# CUDA_DEVICE_MAX_CONNECTIONS=%s; stream 0 is the probe's first, 1-12 made after it\n",
             env ? env : "(unset)");
      printf("%-30s %6s %6s %6s %6s %6s\n", "kernel, stream (ns)", "lower", "upper", "share", "same8", "median");
      for (int rep = 0; rep < 2; rep++) {
        for (int k = 0; k <= NS; k++) {
          CUstream on = k == 0 ? s : ss[k - 1];
          for (auto& kk : smalls) {
            prof_start(p, n);
            for (int i = 0; i < n; i++) CK(cuLaunchKernel(kk.f, 1, 1, 1, kk.block, 1, 1, 0, on, kk.args, nullptr));
            CK(cuStreamSynchronize(on));
            Levels r = levels(prof_stop(p));
            char label[64];
            snprintf(label, sizeof label, "%s, stream %d", kk.name, k);
            printf("%-30s %6.0f %6.0f %6.2f %6.2f %6.0f\n", label, r.lower, r.upper, r.share, r.same8, r.all);
          }
        }
      }
      return 0;
    }
    // The SM each launch ran on (%smid), as the kernel_cycle example's probe.
    static const char* SMID_PTX =
        ".version 7.8\n.target sm_90\n.address_size 64\n"
        ".visible .entry smid_probe(.param .u64 out, .param .u64 i)\n{\n"
        ".reg .b32 %r<2>;\n.reg .b64 %rd<6>;\n"
        "ld.param.u64 %rd1, [out];\nld.param.u64 %rd2, [i];\ncvta.to.global.u64 %rd3, %rd1;\n"
        "shl.b64 %rd4, %rd2, 2;\nadd.s64 %rd5, %rd3, %rd4;\nmov.u32 %r1, %smid;\n"
        "st.global.u32 [%rd5], %r1;\nret;\n}\n";
    CUmodule mid;
    CK(cuModuleLoadData(&mid, SMID_PTX));
    CUfunction fsmid;
    CK(cuModuleGetFunction(&fsmid, mid, "smid_probe"));
    CUdeviceptr sms;
    CK(cuMemAlloc(&sms, 4 * (size_t)n));
    // The spin writing to an 8-byte buffer of the stream-ordered pool, as
    // gpu-sync's buffers are.
    CUdeviceptr pool_out;
    CK(cuMemAllocAsync(&pool_out, 8, s));
    CK(cuStreamSynchronize(s));
    for (int rep = 0; rep < 2; rep++) {
      for (int which = 0; which < 2; which++) {
        prof_start(p, n);
        unsigned long long idx = 0;
        void* smid_args[] = {&sms, &idx};
        void* pool_args[] = {&one, &pool_out};
        for (int i = 0; i < n; i++) {
          idx = i;
          if (which == 0) CK(cuLaunchKernel(fsmid, 1, 1, 1, 1, 1, 1, 0, s, smid_args, nullptr));
          else CK(cuLaunchKernel(fspin, 1, 1, 1, 1, 1, 1, 0, s, pool_args, nullptr));
        }
        CK(cuStreamSynchronize(s));
        std::vector<double> v = prof_stop(p);
        std::vector<unsigned> sm(n);
        CK(cuMemcpyDtoH(sm.data(), sms, 4 * (size_t)n));
        std::vector<double> sorted = v;
        std::sort(sorted.begin(), sorted.end());
        printf("%s: min %.0f median %.0f max %.0f ns\n", which == 0 ? "smid_probe raw" : "spin, pool out",
               sorted.front(), sorted[sorted.size() / 2], sorted.back());
        if (which == 0 && v.size() == sm.size()) {
          std::map<unsigned, std::vector<double>> per;
          for (size_t i = 0; i < v.size(); i++) per[sm[i]].push_back(v[i]);
          printf("  SMs in order [");
          for (int i = 0; i < 16 && i < n; i++) printf("%s%u", i ? " " : "", sm[i]);
          printf("]; median ns x launches per SM:");
          for (auto& c : per) printf(" %u:%.0fx%zu", c.first, median(c.second), c.second.size());
          printf("\n");
        }
      }
    }
    printf("%-22s %6s %6s %6s %6s %6s %6s\n", "kernel (ns)", "lower", "upper", "share", "same4", "same8", "median");
    if (act) printf("# before each measurement: memcpy and memset activity enabled, disabled, flushed\n");
    for (int rep = 0; rep < 3; rep++) {
      for (auto& k : smalls) {
        if (act) activity_on_off();
        prof_start(p, n);
        for (int i = 0; i < n; i++) CK(cuLaunchKernel(k.f, 1, 1, 1, k.block, 1, 1, 0, s, k.args, nullptr));
        CK(cuStreamSynchronize(s));
        Levels r = levels(prof_stop(p));
        printf("%-22s %6.0f %6.0f %6.2f %6.2f %6.2f %6.0f\n", k.name, r.lower, r.upper, r.share, r.same4, r.same8,
               r.all);
      }
    }
    return 0;
  }
  if (place) {
    // Four inputs and six outputs of 1 GiB each, pads of 2-62 MiB between
    // them (all kept), then scale_f32 and copy_u32x4 from each input to
    // each output on the range profiler: medians (ns), the same kernel and
    // grid, only the buffers' places differ.
    p = make_prof(ctx, 0, n);
    PROF = &p;
    std::vector<CUdeviceptr> ins, outs;
    const size_t pads_mib[] = {2, 6, 14, 30, 62, 2, 6, 14, 30, 62};
    for (int i = 0; i < 10; i++) {
      CUdeviceptr pad, b;
      CK(cuMemAlloc(&pad, pads_mib[i] << 20));
      CK(cuMemAlloc(&b, n_f * 4));
      CK(cuMemsetD32(b, 0x3f800000, n_f));
      (i < 4 ? ins : outs).push_back(b);
    }
    ins.insert(ins.begin(), x);
    outs.insert(outs.begin(), z);
    for (int which = 0; which < 2; which++) {
      printf("%s 256Mi (median ns on the range profiler; rows inputs, columns outputs)\n", ks[which].name);
      std::vector<double> all;
      for (CUdeviceptr& in : ins) {
        for (CUdeviceptr& out : outs) {
          K k = ks[which];
          k.args = which == 0 ? std::vector<void*>{&in, &out, &a, &n_f} : std::vector<void*>{&in, &out, &n4};
          for (int i = 0; i < 3; i++) launch(k, s);
          double m = profiled(k, s, n, -1);
          all.push_back(m);
          printf(" %9.1f", m);
        }
        printf("\n");
      }
      std::sort(all.begin(), all.end());
      printf("  min %.1f, median %.1f, max %.1f: max/min %.4f\n", all.front(), all[all.size() / 2], all.back(),
             all.back() / all.front());
      fflush(stdout);
    }
    return 0;
  }
  if (prof) {
    p = make_prof(ctx, 0, n);
    PROF = &p;
    printf("# range profiler, gpu__time_duration.sum\n");
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
