/* atomic_counter.cu: counters updated with remote atomics from every GPU.
 *
 * Every thread of every rank adds to one counter that lives on rank 0, and to its own
 * rank's slot on every peer (slots[r] on rank p: what rank r added there), with relaxed
 * system-scope iris_atomic_add. After iris_barrier each rank reads rank 0's counter and
 * its own slots and compares them with exact totals computed on the host.
 *
 * Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. examples/atomic_counter.cu -o build/atomic_counter
 *        hipcc -O2 -x hip --offload-arch=gfx90a -I. examples/atomic_counter.cu -o build/atomic_counter
 * Run:   build/atomic_counter [ranks]  starts one rank per visible GPU, or [ranks] ranks;
 *        under mpirun or a launcher that sets IRIS_RANK, each process is one rank.
 * Exits non-zero if any total is off or a rank failed. */
#define IRIS_IMPLEMENTATION
#include "iris.h"
#include "iris_device.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(IRIS_USE_HIP) /* the few vendor runtime calls used here */
typedef hipError_t gpuError_t;
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuMemcpy(dst, src, n) hipMemcpy(dst, src, n, hipMemcpyDeviceToHost)
#else
typedef cudaError_t gpuError_t;
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuMemcpy(dst, src, n) cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost)
#endif
#define TRY_IRIS(call) do { iris_status_t s_ = (call); if (s_ != IRIS_SUCCESS) { \
  fprintf(stderr, "%s failed: %s\n  %s\n", #call, iris_status_string(s_), iris_error_detail()); return 1; } } while (0)
#define TRY_GPU(call) do { gpuError_t e_ = (call); if (e_ != gpuSuccess) { \
  fprintf(stderr, "%s failed: %s\n", #call, gpuGetErrorString(e_)); return 1; } } while (0)

typedef unsigned long long u64;
enum { BLOCKS = 8, THREADS = 256, ITERS = 16 };

/* What thread t of `rank` adds each time; they differ by rank, thread and peer, none is 0 or 1. */
__host__ __device__ inline u64 counter_inc(int rank, int t) { return (u64)(rank + 1) * 1000 + t % 61 + 2; }
__host__ __device__ inline u64 slot_inc(int rank, int peer, int t) { return (u64)(rank + 1) * 100000 + (u64)(peer + 1) * 100 + t % 7 + 2; }

/* Relaxed is right for a pure counter: the adds publish nothing but the count itself.
 * Atomicity alone makes sure no add is lost, in whatever order they land, and nobody
 * reads the totals before the kernels have ended and iris_barrier has run.
 * You need release/acquire once the count tells a reader that *other* data is ready,
 * e.g. "the last block to arrive sums everyone's partial results": each add must then
 * be a release (iris_signal_add, after __syncthreads when the whole block wrote), and
 * the reader must acquire (iris_wait_until; or ACQ_REL on the add that arrives last),
 * or it may see the final count before the data.
 * System scope: threads on several GPUs update the same word. A narrower scope promises
 * atomicity only among the threads of one block or one GPU, so adds could be lost. */
__global__ void count(iris_device_ctx_t ctx, u64 *counter, u64 *slots) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < ITERS; k++) {
    iris_atomic_add<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(ctx, counter, counter_inc(ctx.rank, t), 0);
    for (int j = 0; j < ctx.world_size; j++) {
      int peer = (ctx.rank + j) % ctx.world_size; /* each rank starts at a different peer */
      iris_atomic_add<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(ctx, &slots[ctx.rank], slot_inc(ctx.rank, peer, t), peer);
    }
  }
}


int main(int argc, char **argv) {
  /* One rank per visible GPU (or argv[1] ranks), unless a launcher such as mpirun
   * already started us: then iris_launch_local forks nothing and returns our rank. */
  iris_launch_t launch;
  int me;
  TRY_IRIS(iris_launch_local(argc > 1 ? atoi(argv[1]) : 0, &launch, &me));
  if (me < 0) { TRY_IRIS(iris_launch_wait(&launch, 600000)); return 0; } /* names every failed rank */
  iris_t *ctx;
  TRY_IRIS(iris_init(NULL, &ctx));
  int rank = iris_rank(ctx), world = iris_world_size(ctx);
  u64 *counter, *slots;
  TRY_IRIS(iris_calloc(ctx, sizeof(u64), (void **)&counter)); /* only rank 0's is used; every rank allocates it */
  TRY_IRIS(iris_calloc(ctx, world * sizeof(u64), (void **)&slots));
  /* Our zeros must land before any peer adds to them: a memset after a peer's add would
   * erase it. The barrier orders the two. */
  TRY_IRIS(iris_barrier(ctx));
  count<<<BLOCKS, THREADS>>>(iris_device_context(ctx), counter, slots);
  TRY_GPU(gpuGetLastError());
  TRY_IRIS(iris_barrier(ctx)); /* every rank's kernel has ended, so every add has landed */

  u64 total, got[IRIS_MAX_RANKS], want_total = 0;
  void *counter0; /* rank 0's counter, as mapped in this process */
  TRY_IRIS(iris_translate_host(ctx, counter, 0, &counter0));
  TRY_GPU(gpuMemcpy(&total, counter0, sizeof total));
  TRY_GPU(gpuMemcpy(got, slots, world * sizeof(u64)));
  for (int r = 0; r < world; r++)
    for (int t = 0; t < BLOCKS * THREADS; t++) want_total += ITERS * counter_inc(r, t);
  int bad = total != want_total;
  printf("rank %d: counter on rank 0 = %llu (expected %llu)%s\n", rank, total, want_total, bad ? "  WRONG" : "");
  for (int s = 0; s < world; s++) {
    u64 want = 0;
    for (int t = 0; t < BLOCKS * THREADS; t++) want += ITERS * slot_inc(s, rank, t);
    printf("rank %d: slot of rank %d = %llu (expected %llu)%s\n", rank, s, got[s], want, got[s] != want ? "  WRONG" : "");
    bad |= got[s] != want;
  }
  TRY_IRIS(iris_finalize(ctx)); /* its barrier keeps rank 0's counter alive until every rank has read it */
  return bad;
}
