/* local_multi_gpu.cu: one process drives every visible GPU (bring-up mode 3).
 *
 * iris_init_local makes one context (one rank) per GPU and enables peer access between
 * every pair: no second process, no launcher, no IPC. Each GPU's kernel stores a value
 * derived from its rank into its own slot on every peer (slots[w] on rank r: written by
 * rank w); the host then checks all world x world slots.
 *
 * Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. examples/local_multi_gpu.cu -o build/local_multi_gpu
 *        hipcc -O2 -x hip --offload-arch=gfx90a -I. examples/local_multi_gpu.cu -o build/local_multi_gpu
 * Run:   build/local_multi_gpu   all visible GPUs (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES pick them)
 * Exits non-zero if a slot is wrong, or if some pair of GPUs cannot reach each other. */
#define IRIS_IMPLEMENTATION
#include "iris.h"
#include "iris_device.h"
#include <stdio.h>

#if defined(IRIS_USE_HIP) /* the few vendor runtime calls used here */
typedef hipError_t gpuError_t;
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuSetDevice hipSetDevice
#define gpuGetLastError hipGetLastError
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuMemcpy(dst, src, n) hipMemcpy(dst, src, n, hipMemcpyDeviceToHost)
#else
typedef cudaError_t gpuError_t;
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#define gpuGetLastError cudaGetLastError
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuMemcpy(dst, src, n) cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost)
#endif
#define TRY_IRIS(call) do { iris_status_t s_ = (call); if (s_ != IRIS_SUCCESS) { \
  fprintf(stderr, "%s failed: %s\n  %s\n", #call, iris_status_string(s_), iris_error_detail()); return 1; } } while (0)
#define TRY_GPU(call) do { gpuError_t e_ = (call); if (e_ != gpuSuccess) { \
  fprintf(stderr, "%s failed: %s\n", #call, gpuGetErrorString(e_)); return 1; } } while (0)

/* What rank `writer` stores on rank `owner`: differs for every pair, never 0 or 1. */
__host__ __device__ inline long long stamp(int writer, int owner) { return (long long)(writer + 1) * 1000003 + (owner + 1) * 17; }

/* One thread per peer: store this rank's stamp into slots[rank] on that peer. */
__global__ void stamp_peers(iris_device_ctx_t ctx, long long *slots) {
  int peer = blockIdx.x * blockDim.x + threadIdx.x;
  if (peer < ctx.world_size) iris_store(ctx, &slots[ctx.rank], stamp(ctx.rank, peer), peer);
}

int main(void) {
  int n = 0;
  TRY_GPU(gpuGetDeviceCount(&n));
  if (n > IRIS_MAX_RANKS) n = IRIS_MAX_RANKS; /* what a device context can address */
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)64 << 20; /* per GPU; the default is 1 GiB */
  iris_t *ctx[IRIS_MAX_RANKS];
  TRY_IRIS(iris_init_local(&cfg, n, NULL, ctx)); /* GPU i becomes rank i */

  /* The same allocations in the same order on every context, as with one process per
   * GPU. iris_calloc zeroes synchronously, and every kernel below is launched later
   * from this same thread, so no peer can write a slot before it is zeroed. */
  long long *slots[IRIS_MAX_RANKS];
  for (int r = 0; r < n; r++) TRY_IRIS(iris_calloc(ctx[r], n * sizeof(long long), (void **)&slots[r]));

  for (int r = 0; r < n; r++) {
    TRY_GPU(gpuSetDevice(iris_device_ordinal(ctx[r]))); /* launch on rank r's GPU */
    stamp_peers<<<1, n>>>(iris_device_context(ctx[r]), slots[r]);
    TRY_GPU(gpuGetLastError());
  }
  /* Wait for every GPU from this one thread. Once all kernels have ended, all their
   * stores (to any GPU) are complete and visible to the copies below. iris_barrier is
   * the wrong tool here: in mode 3 it returns only when one host thread per context has
   * called it, so a single thread would wait for itself until the barrier timeout. It
   * fits programs that run one host thread per GPU. */
  for (int r = 0; r < n; r++) {
    TRY_GPU(gpuSetDevice(iris_device_ordinal(ctx[r])));
    TRY_GPU(gpuDeviceSynchronize()); /* also reports a fault in rank r's kernel */
  }

  int bad = 0;
  for (int r = 0; r < n; r++) {
    long long got[IRIS_MAX_RANKS];
    TRY_GPU(gpuMemcpy(got, slots[r], n * sizeof(long long)));
    for (int w = 0; w < n; w++)
      if (got[w] != stamp(w, r)) {
        printf("GPU %d: slot of rank %d holds %lld, expected %lld\n", iris_device_ordinal(ctx[r]), w, got[w], stamp(w, r));
        bad++;
      }
  }
  printf("%d GPUs in one process: %d of %d slots as expected\n", n, n * n - bad, n * n);
  /* Mode 3 contexts may be finalized one after another from one thread; the caller
   * makes sure no kernel still uses the heaps, which the synchronisation above did. */
  for (int r = 0; r < n; r++) TRY_IRIS(iris_finalize(ctx[r]));
  return bad != 0;
}
