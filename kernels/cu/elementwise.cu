// Small element-wise kernels for tests and random programs. Scalar loads:
// pointers need only their element's alignment (4 bytes), so views at any
// element offset work. 1-D grid and block.

#include "common.cuh"

// out[i] = a * in[i].
extern "C" __global__ void scale_f32(const float* in, float* out, float a, unsigned long long n) {
    const unsigned long long stride = gs_stride();
    for (unsigned long long i = gs_first(); i < n; i += stride) {
        out[i] = a * in[i];
    }
}

// out[i] = x[i] + y[i].
extern "C" __global__ void add_f32(const float* x, const float* y, float* out, unsigned long long n) {
    const unsigned long long stride = gs_stride();
    for (unsigned long long i = gs_first(); i < n; i += stride) {
        out[i] = x[i] + y[i];
    }
}

// out[i] = gs_mix(a[i], b[i], salt).
extern "C" __global__ void mix_u32(const unsigned int* a,
                                   const unsigned int* b,
                                   unsigned int* out,
                                   unsigned int salt,
                                   unsigned long long n) {
    const unsigned long long stride = gs_stride();
    for (unsigned long long i = gs_first(); i < n; i += stride) {
        out[i] = gs_mix(a[i], b[i], salt);
    }
}

// x[i] += add (wrapping).
extern "C" __global__ void bump_u32(unsigned int* x, unsigned int add, unsigned long long n) {
    const unsigned long long stride = gs_stride();
    for (unsigned long long i = gs_first(); i < n; i += stride) {
        x[i] += add;
    }
}
