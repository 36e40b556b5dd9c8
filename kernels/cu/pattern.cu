// Fill a buffer with a seeded pattern and count the elements that differ
// from it: the end-to-end check of copies and of ordering between streams.
// Pointers need only u32 (4-byte) alignment. 1-D grid and block.

#include "common.cuh"

// dst[i] = gs_pattern(seed, i) for i < n.
extern "C" __global__ void fill_pattern_u32(unsigned int* dst,
                                            unsigned long long n,
                                            unsigned int seed) {
    const unsigned long long stride = gs_stride();
    for (unsigned long long i = gs_first(); i < n; i += stride) {
        dst[i] = gs_pattern(seed, i);
    }
}

// *mismatches += number of i < n with src[i] != gs_pattern(seed, i).
// Threads that found none do not touch *mismatches; the caller zeroes it.
extern "C" __global__ void check_pattern_u32(const unsigned int* src,
                                             unsigned long long n,
                                             unsigned int seed,
                                             unsigned long long* mismatches) {
    unsigned long long bad = 0;
    const unsigned long long stride = gs_stride();
    for (unsigned long long i = gs_first(); i < n; i += stride) {
        bad += src[i] != gs_pattern(seed, i) ? 1ull : 0ull;
    }
    if (bad != 0) {
        atomicAdd(mismatches, bad);
    }
}
