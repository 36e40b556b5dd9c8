// Memory-bandwidth probes (STREAM-style): a read-only sum, a copy, a triad.
//
// Alignment: `read_sum_u32x4` and `copy_u32x4` take `uint4` pointers and
// `triad_f32` reads and writes through `float4` for the bulk, so every pointer
// of these three kernels must be 16-byte aligned (cuMemAlloc gives 256; a view
// at an element offset may not be). A misaligned pointer is a misaligned
// address fault (sticky), not a slow path: the Rust wrappers reject it first.
//
// Launch: 1-D grid and block. `read_sum_u32x4` reduces with warp shuffles and
// needs blockDim.x to be a multiple of 32 (at most 1024).

#include "common.cuh"

// The four u32 words of v, summed without overflow.
__device__ __forceinline__ unsigned long long sum_words(uint4 v) {
    return (unsigned long long)v.x + v.y + v.z + v.w;
}

// *out += wrapping u64 sum of the 4*n4 u32 words of in[0..n4]. One atomicAdd
// per block; the caller zeroes *out before the launch.
extern "C" __global__ void read_sum_u32x4(const uint4* __restrict__ in,
                                          unsigned long long n4,
                                          unsigned long long* out) {
    unsigned long long acc = 0;
    const unsigned long long stride = gs_stride();
    unsigned long long i = gs_first();
    // Four independent 16-byte loads in flight per thread before any use
    // (each one still coalesced across the warp), then the remainder.
    for (; i + 3 * stride < n4; i += 4 * stride) {
        const uint4 v0 = in[i];
        const uint4 v1 = in[i + stride];
        const uint4 v2 = in[i + 2 * stride];
        const uint4 v3 = in[i + 3 * stride];
        acc += sum_words(v0) + sum_words(v1) + sum_words(v2) + sum_words(v3);
    }
    for (; i < n4; i += stride) {
        acc += sum_words(in[i]);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        acc += __shfl_down_sync(0xffffffffu, acc, offset);
    }
    __shared__ unsigned long long warp_sums[32];
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned int warp = threadIdx.x >> 5;
    if (lane == 0) {
        warp_sums[warp] = acc;
    }
    __syncthreads();
    if (warp == 0) {
        const unsigned int warps = blockDim.x >> 5;
        acc = lane < warps ? warp_sums[lane] : 0ull;
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            acc += __shfl_down_sync(0xffffffffu, acc, offset);
        }
        if (lane == 0) {
            atomicAdd(out, acc);
        }
    }
}

// Vectors per thread per tile of copy_u32x4 and triad_f32 (the Rust
// wrappers launch one block per tile: kernels::TILE_VECTORS).
// Tile t is ST_U * blockDim.x consecutive 16-byte vectors; thread k of the
// block takes vectors k, k + blockDim.x, ... of it (coalesced across the
// warp, ST_U loads in flight per pointer); block b takes tiles b,
// b + gridDim.x, ...; the vectors after the last whole tile run grid-stride.
// Any 1-D grid gives the same result; one short block per tile keeps the
// HBM busiest (the roofline's copy probe on an H100: 3.04-3.05 TB/s with one
// block of 256 per 8 KiB tile, 2.86 with eight grid-striding blocks an SM).
#define ST_U 2

// dst[0..n4] = src[0..n4], 16 bytes per load and store.
extern "C" __global__ void copy_u32x4(const uint4* __restrict__ src,
                                      uint4* __restrict__ dst,
                                      unsigned long long n4) {
    const unsigned long long tile = (unsigned long long)ST_U * blockDim.x;
    const unsigned long long tiles = n4 / tile;
#pragma unroll 1
    for (unsigned long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const unsigned long long base = t * tile + threadIdx.x;
        uint4 v[ST_U];
#pragma unroll
        for (int u = 0; u < ST_U; ++u) {
            v[u] = src[base + u * blockDim.x];
        }
#pragma unroll
        for (int u = 0; u < ST_U; ++u) {
            dst[base + u * blockDim.x] = v[u];
        }
    }
    for (unsigned long long i = tiles * tile + gs_first(); i < n4; i += gs_stride()) {
        dst[i] = src[i];
    }
}

// b + scalar * c per lane, one rounding each (fmaf, as Rust's f32::mul_add).
__device__ __forceinline__ float4 triad4(float4 b, float4 c, float scalar) {
    float4 r;
    r.x = fmaf(scalar, c.x, b.x);
    r.y = fmaf(scalar, c.y, b.y);
    r.z = fmaf(scalar, c.z, b.z);
    r.w = fmaf(scalar, c.w, b.w);
    return r;
}

// a[i] = fmaf(scalar, c[i], b[i]) for i < n: float4 for the n/4 whole
// vectors (in tiles of ST_U vectors a thread, as copy_u32x4), then the last
// n%4 elements one by one.
extern "C" __global__ void triad_f32(float* __restrict__ a,
                                     const float* __restrict__ b,
                                     const float* __restrict__ c,
                                     float scalar,
                                     unsigned long long n) {
    const unsigned long long stride = gs_stride();
    const unsigned long long first = gs_first();
    const unsigned long long n4 = n >> 2;
    float4* a4 = reinterpret_cast<float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    const float4* c4 = reinterpret_cast<const float4*>(c);
    const unsigned long long tile = (unsigned long long)ST_U * blockDim.x;
    const unsigned long long tiles = n4 / tile;
#pragma unroll 1
    for (unsigned long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const unsigned long long base = t * tile + threadIdx.x;
        float4 vb[ST_U], vc[ST_U];
#pragma unroll
        for (int u = 0; u < ST_U; ++u) {
            vb[u] = b4[base + u * blockDim.x];
            vc[u] = c4[base + u * blockDim.x];
        }
#pragma unroll
        for (int u = 0; u < ST_U; ++u) {
            a4[base + u * blockDim.x] = triad4(vb[u], vc[u], scalar);
        }
    }
    for (unsigned long long i = tiles * tile + first; i < n4; i += stride) {
        a4[i] = triad4(b4[i], c4[i], scalar);
    }
    for (unsigned long long i = (n4 << 2) + first; i < n; i += stride) {
        a[i] = fmaf(scalar, c[i], b[i]);
    }
}
