/* The raw all-reduce group of `gpu-bench nccl --host-cost`, written in C
 * against the same libnccl, in a process of its own (issue 30: is the raw
 * NCCL call dearer in gpu-bench's process than in nccl-tests'?).
 *
 *   nvcc -O2 -o /tmp/nccl_raw_loop nccl_raw_loop.cu -I$NCCL/include -L$NCCL/lib -lnccl
 *   NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$NCCL/lib /tmp/nccl_raw_loop NGPUS ITERS BATCHES
 *
 * One process drives GPUs 0..NGPUS-1 (ncclCommInitAll: blocking
 * communicators), one non-blocking stream and two cudaMalloc buffers each.
 * Per size (8 B to 32 KiB, by 2): an untimed batch, then BATCHES batches of
 * ITERS groups (ncclGroupStart, one ncclAllReduce of f32 sums per GPU,
 * ncclGroupEnd) timed by the host clock around the issue loop, every
 * stream synchronized after each batch: the median host µs per group, as
 * the twin's raw column. Then 20 × ITERS groups with the streams
 * synchronized only at the end, timed to after the synchronization, as
 * nccl-tests times a size (`-n 1000` for ITERS 50): µs per group. NVLink multicast must be off
 * (NCCL_NVLS_ENABLE=0): the program refuses to start otherwise. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
#define NK(x) do { ncclResult_t r = (x); if (r != ncclSuccess) { fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(r)); exit(1); } } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const char *nvls = getenv("NCCL_NVLS_ENABLE");
  if (!nvls || strcmp(nvls, "0") != 0) {
    fprintf(stderr, "export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 first\n");
    return 2;
  }
  if (argc != 4) {
    fprintf(stderr, "usage: %s NGPUS ITERS BATCHES\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]), iters = atoi(argv[2]), batches = atoi(argv[3]);
  if (n < 2 || n > 8 || iters < 1 || batches < 1) {
    fprintf(stderr, "NGPUS 2-8, ITERS and BATCHES at least 1\n");
    return 2;
  }
  const size_t max = 32768;
  int devs[8];
  ncclComm_t comms[8];
  cudaStream_t streams[8];
  float *send[8], *recv[8];
  for (int i = 0; i < n; i++) devs[i] = i;
  NK(ncclCommInitAll(comms, n, devs));
  for (int i = 0; i < n; i++) {
    CK(cudaSetDevice(i));
    CK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
    CK(cudaMalloc((void **)&send[i], max));
    CK(cudaMalloc((void **)&recv[i], max));
    CK(cudaMemset(send[i], 0, max));
    CK(cudaMemset(recv[i], 0, max));
  }
  CK(cudaSetDevice(0));
  double *s = (double *)malloc(sizeof(double) * batches);
  printf("| bytes | raw host µs per group (median of %d batches of %d) | µs per group, %d then one sync |\n|---|---|---|\n",
         batches, iters, 20 * iters);
  for (size_t bytes = 8; bytes <= max; bytes *= 2) {
    size_t count = bytes / 4;
    for (int b = -1; b < batches; b++) {
      double t0 = now();
      for (int k = 0; k < iters; k++) {
        NK(ncclGroupStart());
        for (int i = 0; i < n; i++)
          NK(ncclAllReduce(send[i], recv[i], count, ncclFloat32, ncclSum, comms[i], streams[i]));
        NK(ncclGroupEnd());
      }
      double t1 = now();
      for (int i = 0; i < n; i++) CK(cudaStreamSynchronize(streams[i]));
      if (b >= 0) s[b] = (t1 - t0) / iters * 1e6;
    }
    qsort(s, batches, sizeof(double), cmp);
    double t0 = now();
    for (int k = 0; k < 20 * iters; k++) {
      NK(ncclGroupStart());
      for (int i = 0; i < n; i++)
        NK(ncclAllReduce(send[i], recv[i], count, ncclFloat32, ncclSum, comms[i], streams[i]));
      NK(ncclGroupEnd());
    }
    for (int i = 0; i < n; i++) CK(cudaStreamSynchronize(streams[i]));
    double per = (now() - t0) / (20 * iters) * 1e6;
    printf("| %zu | %.2f | %.2f |\n", bytes, s[batches / 2], per);
  }
  for (int i = 0; i < n; i++) {
    CK(cudaSetDevice(i));
    CK(cudaFree(send[i]));
    CK(cudaFree(recv[i]));
    NK(ncclCommDestroy(comms[i]));
  }
  free(s);
  return 0;
}
