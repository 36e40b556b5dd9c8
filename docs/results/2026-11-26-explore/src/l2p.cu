// Exploration: which L2 lines does each SM reach fastest, and what does a
// read of only those lines give? (scratch, not part of the kernels crate)

__device__ __forceinline__ unsigned int l2p_smid() {
    unsigned int r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned long long l2p_clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
    return t;
}

__device__ __forceinline__ unsigned int l2p_ld(const unsigned int* p) {
    unsigned int v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// buf[i] = i (u32 words).
extern "C" __global__ void l2p_fill(unsigned int* buf, unsigned long long n) {
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        buf[i] = (unsigned int)i;
    }
}

// One thread on SM `target` (the first block that lands there): for lines
// first..first+count of `buf` (128-byte lines, word offset `off` within the
// line), R dependent .cg loads of the line; lat[k] = cycles of the R loads.
// `zero` is 0 at run time (keeps the chain a true dependency).
#define L2P_R 6
extern "C" __global__ void l2p_lat(const unsigned int* buf, unsigned int first, unsigned int count,
                                   unsigned int off, unsigned int target, unsigned int* claim,
                                   unsigned int* lat, unsigned int zero) {
    if (threadIdx.x != 0 || l2p_smid() != target) return;
    if (atomicCAS(claim, 0u, 1u) != 0u) return;
    unsigned int v = 0;
    for (unsigned int k = 0; k < count; ++k) {
        v += l2p_ld(buf + (unsigned long long)(first + k) * 32u + off);
    }
    unsigned int dep = v & zero;
    for (unsigned int k = 0; k < count; ++k) {
        const unsigned int* p = buf + (unsigned long long)(first + k) * 32u + off;
        const unsigned long long t0 = l2p_clock();
#pragma unroll
        for (int r = 0; r < L2P_R; ++r) {
            dep = l2p_ld(p + dep) & zero;
        }
        const unsigned long long t1 = l2p_clock() + dep;
        lat[k] = (unsigned int)(t1 - t0);
    }
    claim[1] = dep;
}

// Reads lines from lists: list L of lines offs[L] .. offs[L+1] of `lists`
// (line indices into buf, 128 bytes each). mode 0: the list of this SM's
// group (sm_group[smid]); 1: the other group's; 2: list 2 (every line).
// Block b starts at a spread offset; each warp reads 4 lines per load
// instruction (8 lanes x 16 bytes a line), U loads in flight, `steps` steps.
// sums[b] = the block's u64 sum of words, groups[b] = the group it used.
#define L2P_U 8
extern "C" __global__ void __launch_bounds__(512) l2p_read(const uint4* __restrict__ buf,
                                                          const unsigned int* __restrict__ lists,
                                                          const unsigned int* __restrict__ offs,
                                                          const unsigned int* __restrict__ sm_group,
                                                          unsigned int mode, unsigned int steps,
                                                          unsigned long long* sums, unsigned int* groups) {
    const unsigned int g = sm_group[l2p_smid()];
    const unsigned int L = mode == 0 ? g : (mode == 1 ? 1u - g : 2u);
    const unsigned int lo = offs[L];
    const unsigned int m = offs[L + 1] - lo;
    const unsigned int* list = lists + lo;
    const unsigned int warps = blockDim.x / 32u;
    const unsigned int w = threadIdx.x / 32u;
    const unsigned int lane = threadIdx.x % 32u;
    const unsigned int sub = lane & 7u;
    const unsigned int slot = lane >> 3;
    const unsigned int start = (unsigned int)(((unsigned long long)blockIdx.x * 0x9E3779B1ull) % m);
    const unsigned int S = (unsigned int)(((unsigned long long)warps * L2P_U * 4u) % m);
    unsigned int p[L2P_U];
#pragma unroll
    for (int u = 0; u < L2P_U; ++u) {
        p[u] = (unsigned int)((start + ((unsigned long long)w * L2P_U + u) * 4u + slot) % m);
    }
    unsigned long long acc = 0;
    for (unsigned int s = 0; s < steps; ++s) {
        uint4 v[L2P_U];
#pragma unroll
        for (int u = 0; u < L2P_U; ++u) {
            const unsigned int line = list[p[u]];
            const uint4* a = buf + (unsigned long long)line * 8u + sub;
            asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                         : "l"(a));
        }
#pragma unroll
        for (int u = 0; u < L2P_U; ++u) {
            acc += (unsigned long long)v[u].x + v[u].y + v[u].z + v[u].w;
            unsigned int q = p[u] + S;
            p[u] = q >= m ? q - m : q;
        }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) atomicAdd(&sums[blockIdx.x], acc);
    if (threadIdx.x == 0) groups[blockIdx.x] = g;
}

// Control: grid-stride over the whole set of ws4 uint4, no lists, same
// loads (U in flight, .cg), steps rounds of the grid.
extern "C" __global__ void __launch_bounds__(512) l2p_plain(const uint4* __restrict__ buf,
                                                           unsigned int ws4, unsigned int steps,
                                                           unsigned long long* sums) {
    const unsigned int T = gridDim.x * blockDim.x;
    const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int S = (unsigned int)(((unsigned long long)T * L2P_U) % ws4);
    unsigned int p[L2P_U];
#pragma unroll
    for (int u = 0; u < L2P_U; ++u) p[u] = (unsigned int)(((unsigned long long)u * T + t) % ws4);
    unsigned long long acc = 0;
    for (unsigned int s = 0; s < steps; ++s) {
        uint4 v[L2P_U];
#pragma unroll
        for (int u = 0; u < L2P_U; ++u) {
            asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                         : "l"(buf + p[u]));
        }
#pragma unroll
        for (int u = 0; u < L2P_U; ++u) {
            acc += (unsigned long long)v[u].x + v[u].y + v[u].z + v[u].w;
            unsigned int q = p[u] + S;
            p[u] = q >= ws4 ? q - ws4 : q;
        }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31u) == 0) atomicAdd(&sums[blockIdx.x], acc);
}

// SM scaling: as l2p_plain but blocks on SMs with smid >= active exit at
// once; count[0] += blocks that ran.
extern "C" __global__ void __launch_bounds__(512) l2p_scale(const uint4* __restrict__ buf,
                                                           unsigned int ws4, unsigned int steps,
                                                           unsigned int active,
                                                           unsigned long long* sums, unsigned int* count) {
    if (l2p_smid() >= active) return;
    if (threadIdx.x == 0) atomicAdd(count, 1u);
    const unsigned int T = gridDim.x * blockDim.x;
    const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int S = (unsigned int)(((unsigned long long)T * L2P_U) % ws4);
    unsigned int p[L2P_U];
#pragma unroll
    for (int u = 0; u < L2P_U; ++u) p[u] = (unsigned int)(((unsigned long long)u * T + t) % ws4);
    unsigned long long acc = 0;
    for (unsigned int s = 0; s < steps; ++s) {
        uint4 v[L2P_U];
#pragma unroll
        for (int u = 0; u < L2P_U; ++u) {
            asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                         : "l"(buf + p[u]));
        }
#pragma unroll
        for (int u = 0; u < L2P_U; ++u) {
            acc += (unsigned long long)v[u].x + v[u].y + v[u].z + v[u].w;
            unsigned int q = p[u] + S;
            p[u] = q >= ws4 ? q - ws4 : q;
        }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31u) == 0) atomicAdd(&sums[blockIdx.x], acc);
}

// HBM read orders over n4 uint4 (n4 a multiple of every chunk below),
// U = 8 loads in flight a thread, .cg:
// 0 grid-stride (thread's loads T uint4 apart);
// 1 warp chunks: a warp's 8 loads cover 4 KiB contiguous, chunks strided
//   over the grid's warps;
// 2 block chunks: a block's loads cover blockDim * 128 bytes contiguous,
//   chunks strided over the grid's blocks;
// 3 two fronts: blocks of the first half of the grid read the first half of
//   the array grid-stride, the others the second half;
// 4 as 0 with ld.global.nc.L1::no_allocate.L2::evict_first.
template <int NC>
__device__ __forceinline__ uint4 hbo_ld(const uint4* p) {
    uint4 v;
    if (NC) {
        asm volatile("{ .reg .b64 pol; createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
                     "ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], pol; }"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    } else {
        asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(512) hbm_order(const uint4* __restrict__ buf,
                                                           unsigned long long n4, unsigned int layout,
                                                           unsigned long long* out) {
    unsigned long long acc = 0;
    const unsigned long long T = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (layout == 0 || layout == 4 || layout == 3) {
        unsigned long long lo = 0, len = n4, tt = t, TT = T;
        if (layout == 3) {
            const unsigned long long half = gridDim.x / 2;
            const bool second = blockIdx.x >= half;
            len = n4 / 2;
            lo = second ? len : 0;
            TT = (second ? gridDim.x - half : half) * blockDim.x;
            tt = (second ? blockIdx.x - half : blockIdx.x) * blockDim.x + threadIdx.x;
        }
        const uint4* b = buf + lo;
        for (unsigned long long i = tt; i < len; i += L2P_U * TT) {
            uint4 v[L2P_U];
            if (i + (L2P_U - 1) * TT < len) {
#pragma unroll
                for (int u = 0; u < L2P_U; ++u) v[u] = layout == 4 ? hbo_ld<1>(b + i + u * TT) : hbo_ld<0>(b + i + u * TT);
#pragma unroll
                for (int u = 0; u < L2P_U; ++u) acc += (unsigned long long)v[u].x + v[u].y + v[u].z + v[u].w;
            } else {
                for (unsigned long long j = i; j < len; j += TT) {
                    const uint4 w = hbo_ld<0>(b + j);
                    acc += (unsigned long long)w.x + w.y + w.z + w.w;
                }
            }
        }
    } else if (layout == 1) {
        const unsigned long long W = T / 32, w = t / 32, lane = t % 32;
        const unsigned long long per = 32 * L2P_U;  // uint4 a warp chunk
        for (unsigned long long c = w; c * per < n4; c += W) {
            uint4 v[L2P_U];
#pragma unroll
            for (int u = 0; u < L2P_U; ++u) v[u] = hbo_ld<0>(buf + c * per + u * 32 + lane);
#pragma unroll
            for (int u = 0; u < L2P_U; ++u) acc += (unsigned long long)v[u].x + v[u].y + v[u].z + v[u].w;
        }
    } else {
        const unsigned long long per = (unsigned long long)blockDim.x * L2P_U;
        for (unsigned long long c = blockIdx.x; c * per < n4; c += gridDim.x) {
            uint4 v[L2P_U];
#pragma unroll
            for (int u = 0; u < L2P_U; ++u) v[u] = hbo_ld<0>(buf + c * per + u * blockDim.x + threadIdx.x);
#pragma unroll
            for (int u = 0; u < L2P_U; ++u) acc += (unsigned long long)v[u].x + v[u].y + v[u].z + v[u].w;
        }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31u) == 0) atomicAdd(out, acc);
}

// Warp chunks: global warp w reads chunks c = w, w + W, ... < nchunks; chunk
// c is uint4 [(c * chunk4) % ws4, + chunk4) (ws4 a multiple of chunk4,
// chunk4 a multiple of 32 * U), read in steps of 32 * U uint4: lane l loads
// step + u * 32 + l, U loads in flight. F 0: .cg, 1: .nc.L1::no_allocate.
template <int U, int F>
__device__ __forceinline__ void wc_body(const uint4* __restrict__ buf, unsigned long long ws4,
                                        unsigned long long nchunks, unsigned long long chunk4,
                                        unsigned long long* out) {
    const unsigned long long W = (unsigned long long)gridDim.x * blockDim.x / 32;
    const unsigned long long w = ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const unsigned int lane = threadIdx.x % 32u;
    unsigned long long acc = 0;
    for (unsigned long long c = w; c < nchunks; c += W) {
        const uint4* base = buf + (c * chunk4) % ws4;
        for (unsigned long long st = 0; st < chunk4; st += 32 * U) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const uint4* p = base + st + u * 32 + lane;
                if (F == 1) {
                    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                                 : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p));
                } else {
                    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                                 : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p));
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) acc += (unsigned long long)v[u].x + v[u].y + v[u].z + v[u].w;
        }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) atomicAdd(out, acc);
}

extern "C" __global__ void __launch_bounds__(512) warp_chunks(const uint4* __restrict__ buf,
                                                             unsigned long long ws4, unsigned long long nchunks,
                                                             unsigned long long chunk4, unsigned int variant,
                                                             unsigned long long* out) {
    switch (variant) {
        case 1: wc_body<8, 1>(buf, ws4, nchunks, chunk4, out); break;
        case 2: wc_body<16, 0>(buf, ws4, nchunks, chunk4, out); break;
        case 3: wc_body<16, 1>(buf, ws4, nchunks, chunk4, out); break;
        case 4: wc_body<4, 0>(buf, ws4, nchunks, chunk4, out); break;
        default: wc_body<8, 0>(buf, ws4, nchunks, chunk4, out); break;
    }
}
