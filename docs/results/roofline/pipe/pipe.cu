// FP16x2 / BF16x2 FMA pipe experiment (issue 17, second pass, 2026-11-25).
// Question: is HFMA2 on Hopper limited to half the FFMA instruction rate
// (the first pass's explanation for 49.8 % of the 2x-FP32 datasheet rate)?
// Each kernel runs C independent chains x = fma(x, m, k) per thread; the
// variants differ only in how m and k reach the instruction:
//   imm : compile-time constants (ptxas folds them into HFMA2's immediate
//         form: SASS shows HFMA2 only, the FMA pipe);
//   reg : run-time values (kernel parameters): ptxas alternates HFMA2 and
//         HFMA2.MMA (the MMA pipe's FP16 path).
// plus FP32 FFMA (the reference rate) and FFMA + HFMA2 mixed 1:1.
// Every result is checked against a CPU reference (the same chains in f32
// with per-step rounding to f16/bf16), on random seeds; timing by events,
// median of 7; SM clock from clock64 / %globaltimer inside the kernel.
// Build: nvcc -O3 -arch=sm_90 -o pipe pipe.cu ; run: ./pipe
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)
#define C 8
#define INNER 64

__device__ __forceinline__ unsigned h2fma(unsigned x, unsigned m, unsigned k) { unsigned r; asm("fma.rn.f16x2 %0,%1,%2,%3;" : "=r"(r) : "r"(x), "r"(m), "r"(k)); return r; }
__device__ __forceinline__ unsigned b2fma(unsigned x, unsigned m, unsigned k) { unsigned r; asm("fma.rn.bf16x2 %0,%1,%2,%3;" : "=r"(r) : "r"(x), "r"(m), "r"(k)); return r; }
__device__ __forceinline__ unsigned long long gtime() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// mode 0: f16 imm, 1: f16 reg, 2: bf16 imm, 3: bf16 reg
template <int MODE>
__global__ void h2(const unsigned* __restrict__ x0, unsigned mp, unsigned kp, unsigned iters, unsigned* out, unsigned long long* clk) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long t0 = 0; long long c0 = 0;
    if (tid == 0) { t0 = gtime(); c0 = clock64(); }
    unsigned m = mp, k = kp;
    if (MODE == 0) { m = 0xBB80BB80u; k = 0x38003800u; }   // f16 -0.9375, 0.5
    if (MODE == 2) { m = 0xBF70BF70u; k = 0x3F003F00u; }   // bf16 -0.9375, 0.5
    unsigned x[C];
#pragma unroll
    for (int c = 0; c < C; ++c) x[c] = x0[tid * C + c];
    for (unsigned it = 0; it < iters; ++it) {
#pragma unroll
        for (int s = 0; s < INNER; ++s)
#pragma unroll
            for (int c = 0; c < C; ++c) x[c] = (MODE < 2) ? h2fma(x[c], m, k) : b2fma(x[c], m, k);
    }
#pragma unroll
    for (int c = 0; c < C; ++c) out[tid * C + c] = x[c];
    if (tid == 0) { long long c1 = clock64(); unsigned long long t1 = gtime(); clk[0] = c1 - c0; clk[1] = t1 - t0; }
}

// mode 4: FFMA only (imm); mode 5: FFMA + HFMA2 (reg) 1:1
template <int MODE>
__global__ void f32(const unsigned* __restrict__ x0, unsigned mp, unsigned kp, unsigned iters, unsigned* out, unsigned long long* clk) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long t0 = 0; long long c0 = 0;
    if (tid == 0) { t0 = gtime(); c0 = clock64(); }
    float y[C]; unsigned x[C];
#pragma unroll
    for (int c = 0; c < C; ++c) { x[c] = x0[tid * C + c]; y[c] = __uint_as_float(x0[tid * C + c] & 0x3fffffffu) * 1e-3f; }
    for (unsigned it = 0; it < iters; ++it) {
#pragma unroll
        for (int s = 0; s < INNER; ++s)
#pragma unroll
            for (int c = 0; c < C; ++c) {
                y[c] = fmaf(y[c], -0.9375f, 0.5f);
                if (MODE == 5) x[c] = h2fma(x[c], mp, kp);
            }
    }
#pragma unroll
    for (int c = 0; c < C; ++c) out[tid * C + c] = __float_as_uint(y[c]) ^ (MODE == 5 ? x[c] : 0u);
    if (tid == 0) { long long c1 = clock64(); unsigned long long t1 = gtime(); clk[0] = c1 - c0; clk[1] = t1 - t0; }
}

// CPU reference.
static float h2f(unsigned short h) { // f16 -> f32
    unsigned s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023; float v;
    if (e == 0) v = ldexpf((float)m, -24); else if (e == 31) v = m ? NAN : INFINITY; else v = ldexpf((float)(m | 1024), (int)e - 25);
    return s ? -v : v;
}
static unsigned short f2h(float f) { // f32 -> f16, round to nearest even (finite normal/subnormal range)
    if (std::isnan(f)) return 0x7e00;
    unsigned short s = std::signbit(f) ? 0x8000 : 0; float a = fabsf(f);
    if (a >= 65520.f) return s | 0x7c00;
    int e; frexpf(a, &e); // a = m * 2^e, m in [0.5,1)
    int ex = e - 1; if (ex < -14) ex = -14;
    float q = ldexpf(1.f, ex - 10); // ulp
    float r = nearbyintf(a / q) * q; // exact: rint of a scaled value, ties to even
    if (r == 0) return s;
    int e2; frexpf(r, &e2); int E = e2 - 1;
    if (E < -14) return s | (unsigned short)(r / ldexpf(1.f, -24));
    return s | (unsigned short)(((E + 15) << 10) | ((unsigned)(r / ldexpf(1.f, E - 10)) & 1023));
}
static float b2f(unsigned short b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
static unsigned short f2b(float f) { unsigned u; memcpy(&u, &f, 4); if (std::isnan(f)) return 0x7fc0; u += 0x7fff + ((u >> 16) & 1); return (unsigned short)(u >> 16); }
// fma in double then round once (exact for these sizes: f16/bf16 products fit in a double exactly)
static unsigned short ref_step(unsigned short x, bool bf) {
    double v = (bf ? (double)b2f(x) : (double)h2f(x)) * -0.9375 + 0.5;
    return bf ? f2b((float)v) : f2h((float)v); // (double->float exact enough: the product+sum of 11-bit values fits 24 bits)
}

int main() {
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
    int sms = p.multiProcessorCount;
    const int threads = 256, blocks = sms * 8; const unsigned n = blocks * threads;
    const unsigned iters = 4096;
    printf("device %s, %d SMs; grid %d x %d, %d chains x %d steps x %u iters\n", p.name, sms, blocks, threads, C, INNER, iters);
    std::vector<unsigned> hx(n * C);
    srand(12345 ^ (unsigned)time(nullptr));
    for (auto& v : hx) { // random halves in [0.25, 1): f16 and bf16 both finite, chains converge to 0.258
        unsigned short a = f2h(0.25f + 0.75f * (rand() / (float)RAND_MAX)), b = f2h(0.25f + 0.75f * (rand() / (float)RAND_MAX));
        v = (unsigned)a | ((unsigned)b << 16);
    }
    std::vector<unsigned> hxb(n * C);
    for (size_t i = 0; i < hx.size(); ++i) hxb[i] = (unsigned)f2b(h2f(hx[i] & 0xffff)) | ((unsigned)f2b(h2f(hx[i] >> 16)) << 16);
    unsigned *dx, *dxb, *dout; unsigned long long* dclk;
    CK(cudaMalloc(&dx, n * C * 4)); CK(cudaMalloc(&dxb, n * C * 4)); CK(cudaMalloc(&dout, n * C * 4)); CK(cudaMalloc(&dclk, 16));
    CK(cudaMemcpy(dx, hx.data(), n * C * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dxb, hxb.data(), n * C * 4, cudaMemcpyHostToDevice));
    const unsigned mh = 0xBB80BB80u, kh = 0x38003800u, mb = 0xBF70BF70u, kb = 0x3F003F00u;
    struct V { const char* name; int mode; };
    V vs[] = {{"FP32 FFMA (imm)", 4}, {"FP16x2 HFMA2, imm m,k", 0}, {"FP16x2 HFMA2, reg m,k", 1}, {"BF16x2 HFMA2.BF16, imm m,k", 2}, {"BF16x2 HFMA2.BF16, reg m,k", 3}, {"FFMA + HFMA2 (reg) 1:1", 5}};
    printf("%-30s %10s %8s %12s %14s %s\n", "variant", "ms", "SM MHz", "TFLOP/s", "instr/clk/SM", "check");
    for (auto& v : vs) {
        const unsigned* in = (v.mode == 2 || v.mode == 3) ? dxb : dx;
        unsigned m = (v.mode >= 2 && v.mode <= 3) ? mb : mh, k = (v.mode >= 2 && v.mode <= 3) ? kb : kh;
        auto launch = [&](unsigned it) {
            switch (v.mode) {
                case 0: h2<0><<<blocks, threads>>>(in, m, k, it, dout, dclk); break;
                case 1: h2<1><<<blocks, threads>>>(in, m, k, it, dout, dclk); break;
                case 2: h2<2><<<blocks, threads>>>(in, m, k, it, dout, dclk); break;
                case 3: h2<3><<<blocks, threads>>>(in, m, k, it, dout, dclk); break;
                case 4: f32<4><<<blocks, threads>>>(in, m, k, it, dout, dclk); break;
                case 5: f32<5><<<blocks, threads>>>(in, m, k, it, dout, dclk); break;
            }
            CK(cudaGetLastError());
        };
        // check: 3 iterations against the CPU
        const char* check = "-";
        if (v.mode <= 3) {
            CK(cudaMemset(dout, 0xff, n * C * 4));
            launch(3); CK(cudaDeviceSynchronize());
            std::vector<unsigned> got(n * C); CK(cudaMemcpy(got.data(), dout, n * C * 4, cudaMemcpyDeviceToHost));
            bool bf = v.mode >= 2; size_t bad = 0;
            const std::vector<unsigned>& src = bf ? hxb : hx;
            for (size_t i = 0; i < got.size(); i += 97) {
                unsigned short lo = src[i] & 0xffff, hi = src[i] >> 16;
                for (int s = 0; s < 3 * INNER; ++s) { lo = ref_step(lo, bf); hi = ref_step(hi, bf); }
                if (got[i] != ((unsigned)lo | ((unsigned)hi << 16))) ++bad;
            }
            check = bad ? "MISMATCH" : "bit-equal (every 97th slot)";
        }
        launch(iters); CK(cudaDeviceSynchronize());
        cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
        std::vector<float> ms;
        unsigned long long clk[2] = {0, 0};
        for (int r = 0; r < 7; ++r) {
            CK(cudaEventRecord(a)); launch(iters); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
            float t; CK(cudaEventElapsedTime(&t, a, b)); ms.push_back(t);
            CK(cudaMemcpy(clk, dclk, 16, cudaMemcpyDeviceToHost));
        }
        std::sort(ms.begin(), ms.end());
        double t = ms[3] * 1e-3, mhz = clk[1] ? clk[0] * 1e3 / clk[1] : 0;
        double instr = (double)n * C * INNER * iters * (v.mode == 5 ? 2 : 1);
        double flops = (double)n * C * INNER * iters * (v.mode == 4 ? 2 : v.mode == 5 ? 6 : 4);
        double per_clk = instr / (t * mhz * 1e6 * sms);
        printf("%-30s %10.3f %8.0f %12.1f %14.1f %s\n", v.name, ms[3], mhz, flops / t * 1e-12, per_clk, check);
    }
    printf("datasheet-style peaks at the measured clock: FFMA 128, HFMA2 128 instr/clk/SM (2x FP32 FLOPs)\n");
    return 0;
}
