// Instruments for gpu-bench: a clock probe (SM clock against the global
// timer, no NVML needed), a spin gate that holds a stream until the host
// opens it, and an SM copy that reads mapped (zero-copy) pinned host memory.
#include "common.cuh"

__device__ __forceinline__ unsigned long long gs_globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ bool gs_first_thread() {
    return blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 &&
           threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
}

// Thread 0 of block 0 busy-waits until clock64() has advanced `cycles`,
// then writes the SM cycles it waited to out[0] and the %globaltimer
// nanoseconds over the same span to out[1]: out[0] / out[1] is the SM clock
// in GHz while it ran. Other threads return at once. out needs 2 elements.
extern "C" __global__ void clock_probe(unsigned long long cycles, unsigned long long* out) {
    if (!gs_first_thread()) {
        return;
    }
    const unsigned long long t0 = gs_globaltimer();
    const long long c0 = clock64();
    long long waited;
    do {
        waited = clock64() - c0;
    } while ((unsigned long long)waited < cycles);
    const unsigned long long t1 = gs_globaltimer();
    out[0] = (unsigned long long)waited;
    out[1] = t1 - t0;
}

// Thread 0 of block 0 writes the %globaltimer nanoseconds at its entry to
// out[0], busy-waits until clock64() has advanced `cycles`, and writes the
// %globaltimer at its exit to out[1]: where, on the GPU's own clock, a
// kernel's body began and ended, to set beside event timestamps and CUPTI's
// kernel start/end. Other threads return at once. out needs 2 elements.
extern "C" __global__ void stamp(unsigned long long cycles, unsigned long long* out) {
    if (!gs_first_thread()) {
        return;
    }
    const unsigned long long t0 = gs_globaltimer();
    const long long c0 = clock64();
    while ((unsigned long long)(clock64() - c0) < cycles) {
    }
    const unsigned long long t1 = gs_globaltimer();
    out[0] = t0;
    out[1] = t1;
}

// Thread 0 of block 0 spins until the host writes a non-zero value to
// flag[0] (mapped pinned memory, read volatile) or `timeout_ns` of
// %globaltimer pass; writes 1 to out[0] if the flag opened the gate, 0 on
// the timeout. Work queued behind it on the stream starts together when the
// gate opens. Other threads return at once. out needs 1 element.
extern "C" __global__ void spin_gate(const unsigned int* flag, unsigned long long timeout_ns,
                                     unsigned long long* out) {
    if (!gs_first_thread()) {
        return;
    }
    const volatile unsigned int* f = flag;
    const unsigned long long t0 = gs_globaltimer();
    unsigned long long opened = 0;
    for (;;) {
        if (*f != 0u) {
            opened = 1;
            break;
        }
        if (gs_globaltimer() - t0 >= timeout_ns) {
            break;
        }
        __nanosleep(256);
    }
    out[0] = opened;
}

// dst[i] = src[i] for i < n4, 16 bytes at a time, where `src` is mapped
// pinned host memory (CU_MEMHOSTALLOC_DEVICEMAP): the SMs pull the data over
// the bus themselves, without a copy engine. 1-D grid-stride loop.
extern "C" __global__ void copy_mapped_u32x4(const uint4* src, uint4* dst, unsigned long long n4) {
    for (unsigned long long i = gs_first(); i < n4; i += gs_stride()) {
        dst[i] = src[i];
    }
}
