// A kernel of known length in SM clock cycles, to check event timing
// against cycles / clock rate (and to gate batches of launches).

// Each thread busy-waits until clock64() has advanced `cycles` since it
// started; thread 0 of block 0 writes the cycles it actually waited (>=
// cycles) to out[0]. Any grid; out needs 8 bytes (no alignment beyond u64).
extern "C" __global__ void spin_cycles(unsigned long long cycles, unsigned long long* out) {
    const long long start = clock64();
    long long elapsed;
    do {
        elapsed = clock64() - start;
    } while ((unsigned long long)elapsed < cycles);
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 &&
        threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        out[0] = (unsigned long long)elapsed;
    }
}

// Returns at once: a launch's fixed cost with no memory access at all (no
// word whose place could move its time). Any grid.
extern "C" __global__ void empty_kernel() {}
