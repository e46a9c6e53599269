/* fused_allreduce_rmsnorm.cu: a collective fused into a computation, in one kernel.
 *
 * Tensor-parallel layers end with partial activations on every rank that must be summed
 * (all-reduce) and then normalised (RMSNorm). Here one kernel does both: each block takes
 * a tile of whole rows, sums it over the ranks with iris_tile_all_reduce (the block
 * waits only for the same tile on the other ranks, not for the whole tensor), and
 * normalises those rows while they are still hot: y = x / sqrt(mean(x^2) + eps) * w.
 *
 * Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. examples/fused_allreduce_rmsnorm.cu -o build/fused_allreduce_rmsnorm
 * Run:   build/fused_allreduce_rmsnorm [ranks]   (one rank per visible GPU by default)
 * Exits non-zero if any value differs from a float64 host reference by more than 1e-4. */
#define IRIS_IMPLEMENTATION
#include "iris_collectives.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(IRIS_USE_HIP) /* the few vendor runtime calls used here */
#define gpuMalloc hipMalloc
#define gpuMemcpyH2D(d, s, n) hipMemcpy(d, s, n, hipMemcpyHostToDevice)
#define gpuMemcpyD2H(d, s, n) hipMemcpy(d, s, n, hipMemcpyDeviceToHost)
#define gpuGetLastError hipGetLastError
#define gpuSuccess hipSuccess
#else
#define gpuMalloc cudaMalloc
#define gpuMemcpyH2D(d, s, n) cudaMemcpy(d, s, n, cudaMemcpyHostToDevice)
#define gpuMemcpyD2H(d, s, n) cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost)
#define gpuGetLastError cudaGetLastError
#define gpuSuccess cudaSuccess
#endif
#define TRY(call) do { iris_status_t s_ = (call); if (s_ != IRIS_SUCCESS) { fprintf(stderr, "%s: %s\n", #call, iris_error_detail()); return 1; } } while (0)
#define TRY_GPU(call) do { if ((call) != gpuSuccess) { fprintf(stderr, "%s failed\n", #call); return 1; } } while (0)

enum { TOKENS = 1000, HIDDEN = 4096, ROWS = 4, THREADS = 512 };
static float partial(int rank, int t, int h) { return sinf(0.001f * (float)(t * 7 + h) + (float)rank) * (float)(rank + 1); }
static float weight(int h) { return 0.5f + (float)(h % 17) / 16.f; }

/* Persistent grid: block b handles row tiles b, b + gridDim.x, ... The same tile id is
 * handled on every rank, which is what iris_tile_all_reduce requires. */
__global__ void allreduce_rmsnorm(iris_device_ctx_t ctx, iris_tile_flags_t flags, iris_view2d_t x, iris_view2d_t sum, const float *w, float *y, float eps,
                                  int tiles, unsigned *timeouts) {
  __shared__ float part[THREADS]; /* a plain tree reduction: portable to 64-wide AMD waves */
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    /* 1. sum this tile of rows over the ranks (rank order: the same bits everywhere) */
    if (!iris_tile_all_reduce<float>(ctx, flags, t, x, sum, ROWS, HIDDEN)) { if (threadIdx.x == 0) atomicAdd(timeouts, 1u); return; }
    /* 2. RMSNorm of each of its rows; the sums are complete and visible to the block */
    for (int r = t * ROWS; r < t * ROWS + ROWS && r < TOKENS; r++) {
      const float *s = (const float *)iris_view_elem(sum, r, 0);
      float ss = 0.f;
      for (int h = threadIdx.x; h < HIDDEN; h += blockDim.x) ss += s[h] * s[h];
      part[threadIdx.x] = ss;
      __syncthreads();
      for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
      }
      const float scale = rsqrtf(part[0] / HIDDEN + eps);
      for (int h = threadIdx.x; h < HIDDEN; h += blockDim.x) y[(size_t)r * HIDDEN + h] = s[h] * scale * w[h];
      __syncthreads(); /* everyone has read part[0] before the next row reuses it */
    }
  }
}

int main(int argc, char **argv) {
  iris_launch_t launch;
  int me;
  TRY(iris_launch_local(argc > 1 ? atoi(argv[1]) : 0, &launch, &me));
  if (me < 0) { TRY(iris_launch_wait(&launch, 600000)); return 0; }
  iris_t *ctx;
  TRY(iris_init(NULL, &ctx));
  const int rank = iris_rank(ctx), world = iris_world_size(ctx), tiles = (TOKENS + ROWS - 1) / ROWS;
  const size_t bytes = (size_t)TOKENS * HIDDEN * sizeof(float);
  float *x, *sum, *w, *y, *h = (float *)malloc(bytes), *hw = (float *)malloc(HIDDEN * sizeof(float));
  unsigned *timeouts;
  iris_tile_flags_t flags;
  TRY(iris_malloc(ctx, bytes, (void **)&x)); /* peers read it: on the heap */
  TRY(iris_tile_flags_create(ctx, tiles, &flags));
  TRY_GPU(gpuMalloc((void **)&sum, bytes)); /* only this rank touches these */
  TRY_GPU(gpuMalloc((void **)&y, bytes));
  TRY_GPU(gpuMalloc((void **)&w, HIDDEN * sizeof(float)));
  TRY_GPU(gpuMalloc((void **)&timeouts, sizeof(unsigned)));
  for (int t = 0; t < TOKENS; t++)
    for (int k = 0; k < HIDDEN; k++) h[(size_t)t * HIDDEN + k] = partial(rank, t, k);
  for (int k = 0; k < HIDDEN; k++) hw[k] = weight(k);
  TRY_GPU(gpuMemcpyH2D(x, h, bytes));
  TRY_GPU(gpuMemcpyH2D(w, hw, HIDDEN * sizeof(float)));
  unsigned to = 0;
  TRY_GPU(gpuMemcpyH2D(timeouts, &to, sizeof to));
  TRY(iris_barrier(ctx)); /* every rank's x is written before any block reads it */
  iris_view2d_t xv = iris_view2d(x, TOKENS, HIDDEN, HIDDEN, sizeof(float)), sv = iris_view2d(sum, TOKENS, HIDDEN, HIDDEN, sizeof(float));
  allreduce_rmsnorm<<<64, THREADS>>>(iris_device_context(ctx), flags, xv, sv, w, y, 1e-6f, tiles, timeouts);
  if (gpuGetLastError() != gpuSuccess) { fprintf(stderr, "rank %d: launch failed\n", rank); return 1; }
  TRY(iris_barrier(ctx)); /* waits for the kernel (and reports a fault), then for every rank */
  TRY_GPU(gpuMemcpyD2H(h, y, bytes));
  TRY_GPU(gpuMemcpyD2H(&to, timeouts, sizeof to));
  double worst = 0;
  for (int t = 0; t < TOKENS; t++) { /* float64 reference */
    double ss = 0, s[HIDDEN];
    for (int k = 0; k < HIDDEN; k++) {
      s[k] = 0;
      for (int r = 0; r < world; r++) s[k] += partial(r, t, k);
      ss += s[k] * s[k];
    }
    const double scale = 1.0 / sqrt(ss / HIDDEN + 1e-6);
    for (int k = 0; k < HIDDEN; k++) worst = fmax(worst, fabs(h[(size_t)t * HIDDEN + k] - s[k] * scale * weight(k)));
  }
  printf("rank %d: all-reduce + RMSNorm of %d x %d over %d ranks in one kernel: max |error| %.2e, %u timed-out waits\n", rank, TOKENS, HIDDEN, world, worst, to);
  TRY(iris_tile_flags_destroy(ctx, &flags));
  TRY(iris_finalize(ctx));
  return worst > 1e-4 || to != 0;
}
