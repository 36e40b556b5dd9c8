// Small element-wise kernels for tests, random programs and the roofline's
// placement. Pointers need only their element's alignment (4 bytes), so
// views at any element offset work; when every pointer of a launch has the
// same address modulo 16 (always, for buffers from cuMemAlloc at equal
// offsets), the bulk runs on 16-byte vectors with several loads in flight
// per thread, and only the few elements before the first 16-byte boundary
// and after the last whole vector run one at a time. Otherwise every
// element runs one at a time. 1-D grid of any size; at most 256 threads a
// block (the launch bounds keep 8 blocks an SM resident at 32 registers).
//
// The vectors run in block tiles: tile t is U * blockDim.x consecutive
// vectors, thread k of the block taking vectors k, k + blockDim.x, ... (each
// load coalesced across the warp, U loads in flight per thread); block b
// takes tiles b, b + gridDim.x, ... The Rust wrappers launch one block per
// tile (`Kernels::grid_tiles`): short blocks keep the HBM busiest (the
// roofline's copy probe: 3.04-3.05 TB/s on an H100 with one block of 256 per
// 8 KiB tile, 2.86 with eight grid-striding blocks an SM).

#include "common.cuh"

// How [0, n) splits: `head` scalar elements until the pointers reach a
// 16-byte boundary, `n4` whole vectors, then the scalar tail; `vec` is false
// when the pointers disagree modulo 16 (all scalar).
struct GsSplit {
    unsigned long long head;
    unsigned long long n4;
    bool vec;
};

// a0: the first pointer; mis: the OR of (pointer ^ a0) over the others.
__device__ __forceinline__ GsSplit gs_split(unsigned long long n, unsigned long long a0,
                                            unsigned long long mis) {
    GsSplit s;
    if ((mis & 15ull) != 0) {
        s.head = n;
        s.n4 = 0;
        s.vec = false;
        return s;
    }
    unsigned long long head = ((16ull - (a0 & 15ull)) & 15ull) / 4ull;
    s.head = head < n ? head : n;
    s.n4 = (n - s.head) / 4ull;
    s.vec = true;
    return s;
}

// Vectors per thread per tile, for every kernel of this file (the Rust
// wrappers size the grid by it: kernels::TILE_VECTORS).
#define EW_U 2

// Runs body B over [0, n): B::one(i) for a scalar element, B::load(j) /
// B::store(j, v) for vector j (elements head + 4j .. head + 4j + 3). U
// vectors are loaded before any is stored.
template <int U, class B>
__device__ __forceinline__ void gs_run(B& b, unsigned long long n, GsSplit sp) {
    const unsigned long long first = gs_first();
    const unsigned long long stride = gs_stride();
    if (!sp.vec) {
        for (unsigned long long i = first; i < n; i += stride) {
            b.one(i);
        }
        return;
    }
    for (unsigned long long i = first; i < sp.head; i += stride) {
        b.one(i);
    }
    for (unsigned long long i = sp.head + 4ull * sp.n4 + first; i < n; i += stride) {
        b.one(i);
    }
    const unsigned long long tile = (unsigned long long)U * blockDim.x;
    const unsigned long long tiles = sp.n4 / tile;
#pragma unroll 1
    for (unsigned long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const unsigned long long base = t * tile + threadIdx.x;
        typename B::Vec v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            v[u] = b.load(base + u * blockDim.x);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            b.store(base + u * blockDim.x, v[u]);
        }
    }
    // The vectors after the last whole tile, grid-stride.
    for (unsigned long long j = tiles * tile + first; j < sp.n4; j += stride) {
        b.store(j, b.load(j));
    }
}

__device__ __forceinline__ unsigned long long gs_addr(const void* p) {
    return (unsigned long long)p;
}

struct ScaleBody {
    const float* in;
    float* out;
    float a;
    unsigned long long head;
    typedef float4 Vec;
    __device__ __forceinline__ void one(unsigned long long i) { out[i] = a * in[i]; }
    __device__ __forceinline__ Vec load(unsigned long long j) {
        return reinterpret_cast<const float4*>(in + head)[j];
    }
    __device__ __forceinline__ void store(unsigned long long j, Vec v) {
        reinterpret_cast<float4*>(out + head)[j] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
    }
};

// out[i] = a * in[i].
extern "C" __global__ void __launch_bounds__(256, 8)
    scale_f32(const float* in, float* out, float a, unsigned long long n) {
    const GsSplit sp = gs_split(n, gs_addr(out), gs_addr(in) ^ gs_addr(out));
    ScaleBody b{in, out, a, sp.head};
    gs_run<EW_U>(b, n, sp);
}

struct AddBody {
    const float* x;
    const float* y;
    float* out;
    unsigned long long head;
    struct Vec {
        float4 x, y;
    };
    __device__ __forceinline__ void one(unsigned long long i) { out[i] = x[i] + y[i]; }
    __device__ __forceinline__ Vec load(unsigned long long j) {
        Vec v;
        v.x = reinterpret_cast<const float4*>(x + head)[j];
        v.y = reinterpret_cast<const float4*>(y + head)[j];
        return v;
    }
    __device__ __forceinline__ void store(unsigned long long j, Vec v) {
        reinterpret_cast<float4*>(out + head)[j] =
            make_float4(v.x.x + v.y.x, v.x.y + v.y.y, v.x.z + v.y.z, v.x.w + v.y.w);
    }
};

// out[i] = x[i] + y[i].
extern "C" __global__ void __launch_bounds__(256, 8)
    add_f32(const float* x, const float* y, float* out, unsigned long long n) {
    const GsSplit sp = gs_split(n, gs_addr(out), (gs_addr(x) ^ gs_addr(out)) | (gs_addr(y) ^ gs_addr(out)));
    AddBody b{x, y, out, sp.head};
    gs_run<EW_U>(b, n, sp);
}

struct MixBody {
    const unsigned int* a;
    const unsigned int* bb;
    unsigned int* out;
    unsigned int salt;
    unsigned long long head;
    struct Vec {
        uint4 a, b;
    };
    __device__ __forceinline__ void one(unsigned long long i) { out[i] = gs_mix(a[i], bb[i], salt); }
    __device__ __forceinline__ Vec load(unsigned long long j) {
        Vec v;
        v.a = reinterpret_cast<const uint4*>(a + head)[j];
        v.b = reinterpret_cast<const uint4*>(bb + head)[j];
        return v;
    }
    __device__ __forceinline__ void store(unsigned long long j, Vec v) {
        reinterpret_cast<uint4*>(out + head)[j] =
            make_uint4(gs_mix(v.a.x, v.b.x, salt), gs_mix(v.a.y, v.b.y, salt), gs_mix(v.a.z, v.b.z, salt),
                       gs_mix(v.a.w, v.b.w, salt));
    }
};

// out[i] = gs_mix(a[i], b[i], salt).
extern "C" __global__ void __launch_bounds__(256, 8) mix_u32(const unsigned int* a,
                                                             const unsigned int* b,
                                                             unsigned int* out,
                                                             unsigned int salt,
                                                             unsigned long long n) {
    const GsSplit sp = gs_split(n, gs_addr(out), (gs_addr(a) ^ gs_addr(out)) | (gs_addr(b) ^ gs_addr(out)));
    MixBody body{a, b, out, salt, sp.head};
    gs_run<EW_U>(body, n, sp);
}

struct BumpBody {
    unsigned int* x;
    unsigned int add;
    unsigned long long head;
    typedef uint4 Vec;
    __device__ __forceinline__ void one(unsigned long long i) { x[i] += add; }
    __device__ __forceinline__ Vec load(unsigned long long j) {
        return reinterpret_cast<const uint4*>(x + head)[j];
    }
    __device__ __forceinline__ void store(unsigned long long j, Vec v) {
        reinterpret_cast<uint4*>(x + head)[j] = make_uint4(v.x + add, v.y + add, v.z + add, v.w + add);
    }
};

// x[i] += add (wrapping).
extern "C" __global__ void __launch_bounds__(256, 8)
    bump_u32(unsigned int* x, unsigned int add, unsigned long long n) {
    const GsSplit sp = gs_split(n, gs_addr(x), 0ull);
    BumpBody b{x, add, sp.head};
    gs_run<EW_U>(b, n, sp);
}
