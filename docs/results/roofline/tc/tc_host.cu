// Standalone check and timing of kernels/cu/tensor.cu's probes (device call 1
// of issue 17), built on the GPU machine with its nvcc:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I kernels/cu \
//        -o tc_host docs/results/roofline/tc/tc_host.cu
// Call 1 ran it against tensor.cu as it was then, with a TC_SWAP switch that
// swapped the descriptors' leading and stride byte offsets: the swapped pair
// failed the check (../../2026-11-25-h100-roofline-call1/tc-DTC_SWAP.txt),
// the kept pair (LBO 128, SBO 256) passed (tc.txt).
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_fp16.h>
#include "tensor.cu"
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
static unsigned rng = 12345u;
static unsigned nxt() { rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5; return rng; }
static float unif() { return (nxt() >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }
// kind 0 bf16, 1 fp16, 2 e4m3: fills `rows` x 128 bytes, returns decoded values rows x K.
static void fill(int kind, int rows, std::vector<unsigned char>& bytes, std::vector<float>& vals) {
  int K = kind == 2 ? 128 : 64;
  bytes.assign(rows * 128, 0); vals.assign(rows * K, 0.f);
  for (int r = 0; r < rows; ++r) for (int k = 0; k < K; ++k) {
    float v; 
    if (kind == 0) { float f = unif(); unsigned u; memcpy(&u, &f, 4); unsigned short h = u >> 16; memcpy(&bytes[r*128 + 2*k], &h, 2); unsigned w = (unsigned)h << 16; memcpy(&v, &w, 4); }
    else if (kind == 1) { __half h = __float2half(unif()); memcpy(&bytes[r*128 + 2*k], &h, 2); v = __half2float(h); }
    else { unsigned s = nxt() & 1, e = 4 + nxt() % 6, m = nxt() & 7; bytes[r*128 + k] = (s << 7) | (e << 3) | m; v = (s ? -1.f : 1.f) * ldexpf(1.f + m / 8.f, (int)e - 7); }
    vals[r*K + k] = v;
  }
}
int main() {
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const char* names[3] = {"BF16", "FP16", "FP8e4m3"};
  void* kernels[3] = {(void*)tc_bf16_probe, (void*)tc_f16_probe, (void*)tc_e4m3_probe};
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<unsigned char> ab, bb; std::vector<float> av, bv;
    fill(kind, 64, ab, av); fill(kind, 256, bb, bv);
    int K = kind == 2 ? 128 : 64;
    unsigned char *da, *db; float* dout; unsigned long long* dclk;
    CK(cudaMalloc(&da, ab.size())); CK(cudaMalloc(&db, bb.size())); CK(cudaMalloc(&dout, 64*256*4)); CK(cudaMalloc(&dclk, 16));
    CK(cudaMemcpy(da, ab.data(), ab.size(), cudaMemcpyHostToDevice)); CK(cudaMemcpy(db, bb.data(), bb.size(), cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xff, 64*256*4));
    unsigned iters = 1, store = 1;
    void* args[] = {&da, &db, &iters, &store, &dout, &dclk};
    CK(cudaLaunchKernel(kernels[kind], dim3(1), dim3(128), args, 0, 0)); CK(cudaDeviceSynchronize());
    std::vector<float> out(64*256); CK(cudaMemcpy(out.data(), dout, 64*256*4, cudaMemcpyDeviceToHost));
    double maxerr = 0, maxref = 0;
    for (int m = 0; m < 64; ++m) for (int n = 0; n < 256; ++n) { double r = 0; for (int k = 0; k < K; ++k) r += (double)av[m*K+k] * bv[n*K+k]; maxref = std::max(maxref, fabs(r)); double e = fabs(r - out[m*256+n]); if (!(e == e)) e = 1e30; maxerr = std::max(maxerr, e); }
    printf("%s check: max |err| %.3g of max |ref| %.3g: %s\n", names[kind], maxerr, maxref, maxerr <= 1e-3 * maxref ? "PASS" : "FAIL");
    for (int threads : {128, 256}) {
      iters = kind == 2 ? 2000 : 4000; store = 0;
      cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
      std::vector<float> ts;
      for (int rep = 0; rep < 12; ++rep) {
        cudaEventRecord(e0); CK(cudaLaunchKernel(kernels[kind], dim3(sms), dim3(threads), args, 0, 0)); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1); if (rep >= 2) ts.push_back(ms);
      }
      std::sort(ts.begin(), ts.end()); double ms = ts[ts.size()/2];
      unsigned long long clk[2]; CK(cudaMemcpy(clk, dclk, 16, cudaMemcpyDeviceToHost));
      double flops = 2.0 * 64 * 256 * K * (double)iters * (threads / 128) * sms;
      printf("%s %d threads/block x %d blocks: %.1f TFLOP/s (median %.3f ms), SM clock in probe %.0f MHz\n", names[kind], threads, sms, flops / (ms * 1e-3) / 1e12, ms, clk[0] * 1e3 / (double)clk[1]);
    }
    cudaFree(da); cudaFree(db); cudaFree(dout); cudaFree(dclk);
  }
  return 0;
}
