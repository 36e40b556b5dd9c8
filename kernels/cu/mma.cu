// Tensor-core ceilings through `mma.sync` (the fallback of tensor.cu's
// `wgmma`, which exists on sm_90a only): BF16 and FP16 `m16n8k16`, FP8
// e4m3 `m16n8k32` (sm_89 and newer), f32 accumulate.
//
// Each warp loads one warp tile's operands from global memory into
// registers once and keeps them there: A is 32 rows (two m16 fragments) and
// B 32 rows (four n8 fragments) of 32 bytes (K = 16 16-bit or 32 FP8
// values), row-major, so a fragment register is one 32-bit word of a row
// (word t of row g holds K pair/quad t; the second register of a K half is
// word t + 4). Eight independent accumulators (2 x 4 fragments of D, 32
// floats) then take D += A . B^T, `iters` times, 8 `mma.sync` an iteration.
// `store != 0`: block 0's warp 0 writes D (32 x 32 f32, row-major) to
// out[0..1024]: iters * A . B^T, checked against the CPU reference. Thread
// 0 of block 0 writes clk = [SM cycles, %globaltimer ns] over its loop.
// Launch: 1-D, whole warps, at most 256 threads a block. `a` and `b` hold
// 32 rows x 32 bytes each, 16-byte aligned.

#define MMA_ROWS 32
#define MMA_WORDS 8  // 32-bit words a row

__device__ __forceinline__ unsigned long long mma_timer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// KIND 0: BF16, 1: FP16, 2: FP8 e4m3.
template <int KIND>
__device__ __forceinline__ void mma_step(float* d, const unsigned int* a, const unsigned int* b) {
    if (KIND == 0) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else if (KIND == 1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
        // FP8 mma needs sm_89: the wrapper refuses older GPUs; never a
        // silent zero.
        __trap();
#endif
    }
}

template <int KIND>
__device__ __forceinline__ void mma_probe(const unsigned int* __restrict__ a,
                                          const unsigned int* __restrict__ b,
                                          unsigned int iters,
                                          unsigned int store,
                                          float* __restrict__ out,
                                          unsigned long long* __restrict__ clk) {
    const unsigned int lane = threadIdx.x % 32u, g = lane / 4u, t = lane % 4u;
    // The fragments: A rows mi*16 + g (+8), B rows ni*8 + g.
    unsigned int fa[2][4], fb[4][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
        const unsigned int r = mi * 16u + g;
        fa[mi][0] = a[r * MMA_WORDS + t];
        fa[mi][1] = a[(r + 8u) * MMA_WORDS + t];
        fa[mi][2] = a[r * MMA_WORDS + t + 4u];
        fa[mi][3] = a[(r + 8u) * MMA_WORDS + t + 4u];
    }
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
        const unsigned int r = ni * 8u + g;
        fb[ni][0] = b[r * MMA_WORDS + t];
        fb[ni][1] = b[r * MMA_WORDS + t + 4u];
    }
    const bool timer = blockIdx.x == 0 && threadIdx.x == 0;
    unsigned long long t0 = 0;
    long long c0 = 0;
    if (timer) {
        t0 = mma_timer();
        c0 = clock64();
    }
    float d[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                d[mi][ni][e] = 0.0f;
            }
        }
    }
    for (unsigned int it = 0; it < iters; ++it) {
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                mma_step<KIND>(d[mi][ni], fa[mi], fb[ni]);
            }
        }
    }
    if (timer) {
        const long long c1 = clock64();
        const unsigned long long t1 = mma_timer();
        clk[0] = (unsigned long long)(c1 - c0);
        clk[1] = t1 - t0;
    }
    // D fragment: elements 0,1 at row g, columns 2t, 2t+1; 2,3 at row g+8.
    if (store != 0u && blockIdx.x == 0 && threadIdx.x < 32u) {
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                const unsigned int r = mi * 16u + g, c = ni * 8u + 2u * t;
                out[r * MMA_ROWS + c] = d[mi][ni][0];
                out[r * MMA_ROWS + c + 1u] = d[mi][ni][1];
                out[(r + 8u) * MMA_ROWS + c] = d[mi][ni][2];
                out[(r + 8u) * MMA_ROWS + c + 1u] = d[mi][ni][3];
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) mma_bf16_probe(const uint4* a, const uint4* b,
    unsigned int iters, unsigned int store, float* out, unsigned long long* clk) {
    mma_probe<0>(reinterpret_cast<const unsigned int*>(a), reinterpret_cast<const unsigned int*>(b), iters, store,
                 out, clk);
}
extern "C" __global__ void __launch_bounds__(256) mma_f16_probe(const uint4* a, const uint4* b,
    unsigned int iters, unsigned int store, float* out, unsigned long long* clk) {
    mma_probe<1>(reinterpret_cast<const unsigned int*>(a), reinterpret_cast<const unsigned int*>(b), iters, store,
                 out, clk);
}
extern "C" __global__ void __launch_bounds__(256) mma_e4m3_probe(const uint4* a, const uint4* b,
    unsigned int iters, unsigned int store, float* out, unsigned long long* clk) {
    mma_probe<2>(reinterpret_cast<const unsigned int*>(a), reinterpret_cast<const unsigned int*>(b), iters, store,
                 out, clk);
}
