// Shared device helpers for the workspace's kernels.
//
// Every function here has a bit-identical Rust twin in kernels/src/reference.rs;
// change both together (the Rust tests pin known values).
#pragma once

// Grid-stride loops use 64-bit indices: `gs_first()` is this thread's first
// index, `gs_stride()` the number of threads in the (1-D) grid.
__device__ __forceinline__ unsigned long long gs_first() {
    return (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ unsigned long long gs_stride() {
    return (unsigned long long)gridDim.x * blockDim.x;
}

// A 32-bit integer finalizer (Chris Wellons' "lowbias32"): a bijection on u32.
__device__ __forceinline__ unsigned int gs_lowbias32(unsigned int h) {
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

// The fill/check pattern: a cheap hash of (seed, i) that depends on all 64
// bits of i. For a fixed seed it is injective on any run of 2^32 consecutive
// indices (the pre-mix value is seed' ^ hi*K ^ lo, and lowbias32 is a
// bijection); for a fixed i it is injective in the seed.
__device__ __forceinline__ unsigned int gs_pattern(unsigned int seed, unsigned long long i) {
    unsigned int lo = (unsigned int)i;
    unsigned int hi = (unsigned int)(i >> 32);
    unsigned int h = ((seed + 0x6a09e667u) * 0x9e3779b9u) ^ (hi * 0x85ebca6bu) ^ lo;
    return gs_lowbias32(h);
}

// The deterministic integer mix of `mix_u32`.
__device__ __forceinline__ unsigned int gs_mix(unsigned int a, unsigned int b, unsigned int salt) {
    return gs_lowbias32(a ^ (b * 0x85ebca6bu) ^ (salt * 0xc2b2ae35u));
}
