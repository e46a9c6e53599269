// GEMM + all-scatter in one kernel, on iris's tile building blocks.
//
// Each rank holds a row shard of A (M/W x K) and all of B (K x N). Every rank computes the
// C tiles of its own rows with the tensor-core tile GEMM (iris_gemm_tile), stores each
// finished tile into every rank's C (the symmetric heap) and publishes it with a per-tile
// ready flag (iris_gemm_publish_tile_to: block barrier, then a system-scope release).
// Before the kernel ends, each CTA waits (iris_gemm_wait_tile, acquire) for its share of
// the tiles the other ranks publish, so when the kernel completes C is whole on every
// rank. The epochs are per-CTA counters on the device: replaying the launch in a graph
// works without touching them.
//
// Copy this as the start of a kernel whose consumer is another GPU: the producer side is
// "compute tile, store it to the peers, publish"; the consumer side is "wait for tile,
// use it".
//   ./build/gemm_all_scatter        one process per GPU
#define IRIS_IMPLEMENTATION
#include "../iris_gemm.h"

#include <cuda_bf16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

typedef iris_gemm_cfg_wgmma_large Cfg; // wgmma when built for sm_90a, else mma.sync
typedef __nv_bfloat16 T;

__global__ void __launch_bounds__(Cfg::threads)
gemm_all_scatter(iris_device_ctx_t ctx, const T *a_shard, const T *b, T *c, iris_gemm_ready_t ready, unsigned *counters, int M, int N, int K) {
  extern __shared__ __align__(128) char smem[];
  const int W = ctx.world_size, me = ctx.rank, ml = M / W;
  const unsigned epoch = counters[blockIdx.x] + 1;
  const int tiles_m = (ml + Cfg::BM - 1) / Cfg::BM, tiles_n = (N + Cfg::BN - 1) / Cfg::BN;
  T *my_rows = c + (size_t)me * ml * N; // this rank's rows of C (same offset on every rank)
  // producer: my tiles, computed locally, then pushed to every peer and published
  for (int t = blockIdx.x; t < tiles_m * tiles_n; t += gridDim.x) {
    const int mt = t / tiles_n, nt = t % tiles_n, m0 = mt * Cfg::BM, n0 = nt * Cfg::BN;
    iris_gemm_tile<Cfg, T, true, T>(a_shard, K, b, N, my_rows, N, (const T *)NULL, ml, N, K, m0, n0, smem, iris_gemm_no_wait());
    __syncthreads(); // the tile is in my C
    const int rows = min(Cfg::BM, ml - m0), cols = min(Cfg::BN, N - n0);
    for (int q = 0; q < W; q++) {
      if (q == me) continue;
      for (int r = 0; r < rows; r++) { // one row of the tile: contiguous bytes
        const T *src = my_rows + (size_t)(m0 + r) * N + n0;
        iris_put_bulk(ctx, (void *)src, src, (size_t)cols * sizeof(T), q, threadIdx.x, blockDim.x);
      }
    }
    // row index of this tile in the global tile grid: the rank's rows come after the
    // tiles of the ranks before it
    for (int q = 0; q < W; q++)
      if (q != me) iris_gemm_publish_tile_to(ctx, ready, me * tiles_m + mt, nt, epoch, q);
  }
  // consumer: wait for the peers' tiles (this CTA's share of them)
  for (int t = blockIdx.x; t < W * tiles_m * tiles_n; t += gridDim.x) {
    const int gm = t / tiles_n, nt = t % tiles_n;
    if (gm / tiles_m == me) continue;
    iris_gemm_wait_tile<IRIS_SCOPE_SYSTEM>(ctx, ready, gm, nt, epoch);
  }
  __syncthreads();
  if (threadIdx.x == 0) counters[blockIdx.x] = epoch;
}

static float val(unsigned seed, long long i) {
  unsigned h = (unsigned)i * 2654435761u ^ seed;
  h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
  return (float)((int)(h % 2001) - 1000) / 1000.0f;
}

#define CHECK(x)                                                                              \
  do {                                                                                        \
    if (!(x)) { fprintf(stderr, "rank %d: %s failed: %s\n", rank, #x, iris_error_detail()); return 1; } \
  } while (0)

int main() {
  int rank;
  iris_launch_t L;
  if (iris_launch_local(0, &L, &rank) != IRIS_SUCCESS) { fprintf(stderr, "%s\n", iris_error_detail()); return 1; }
  if (rank < 0) return iris_launch_wait(&L, 300000) == IRIS_SUCCESS ? 0 : 1;
  iris_t *ctx;
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)512 << 20;
  CHECK(iris_init(&cfg, &ctx) == IRIS_SUCCESS);
  const int W = iris_world_size(ctx), M = 1024 * W, N = 1000, K = 1024, ml = M / W;
  const int tiles_m = (ml + Cfg::BM - 1) / Cfg::BM, tiles_n = (N + Cfg::BN - 1) / Cfg::BN;
  T *a, *b, *c;
  unsigned *flags, *counters;
  CHECK(iris_malloc(ctx, (size_t)M * N * sizeof(T), (void **)&c) == IRIS_SUCCESS); // C: every rank's copy on the heap
  CHECK(iris_calloc(ctx, (size_t)W * tiles_m * tiles_n * sizeof(unsigned), (void **)&flags) == IRIS_SUCCESS);
  CHECK(cudaMalloc(&a, (size_t)ml * K * sizeof(T)) == cudaSuccess && cudaMalloc(&b, (size_t)K * N * sizeof(T)) == cudaSuccess);
  CHECK(cudaMalloc(&counters, 1024 * sizeof(unsigned)) == cudaSuccess && cudaMemset(counters, 0, 1024 * sizeof(unsigned)) == cudaSuccess);
  std::vector<T> ha((size_t)ml * K), hb((size_t)K * N);
  for (size_t i = 0; i < ha.size(); i++) ha[i] = __float2bfloat16(val(11u, (long long)(i + (size_t)rank * ha.size())));
  for (size_t i = 0; i < hb.size(); i++) hb[i] = __float2bfloat16(val(7u, (long long)i));
  CHECK(cudaMemcpy(a, ha.data(), ha.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(b, hb.data(), hb.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemset(c, 0xff, (size_t)M * N * sizeof(T)) == cudaSuccess); // NaN poison
  CHECK(iris_barrier(ctx) == IRIS_SUCCESS); // everyone's C poisoned and flags zero before anyone pushes
  CHECK(cudaFuncSetAttribute(gemm_all_scatter, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Cfg::smem_bytes) == cudaSuccess);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, iris_device_ordinal(ctx));
  iris_gemm_ready_t ready = {flags, W * tiles_m, tiles_n};
  for (int it = 0; it < 3; it++) // the epochs advance by themselves
    gemm_all_scatter<<<sms, Cfg::threads, Cfg::smem_bytes>>>(iris_device_context(ctx), a, b, c, ready, counters, M, N, K);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  // check 64 rows spread over all ranks' parts against a float64 reference
  std::vector<T> hc((size_t)M * N);
  CHECK(cudaMemcpy(hc.data(), c, hc.size() * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  double worst = 0;
  long long unwritten = 0;
  for (size_t i = 0; i < hc.size(); i++) unwritten += isnan(__bfloat162float(hc[i]));
  for (int s = 0; s < 64; s++) {
    const int r = (int)((long long)s * (M - 1) / 63), owner = r / ml;
    for (int n = 0; n < N; n++) {
      double want = 0;
      for (int k = 0; k < K; k++) {
        const double av = (double)__bfloat162float(__float2bfloat16(val(11u, (long long)((size_t)owner * ml * K + (size_t)(r - owner * ml) * K + k))));
        want += av * (double)__bfloat162float(hb[(size_t)k * N + n]);
      }
      const double got = (double)__bfloat162float(hc[(size_t)r * N + n]), err = fabs(got - want) / (fabs(want) / 128 + 1e-3);
      if (!(err <= worst)) worst = isnan(err) ? 1e30 : err;
    }
  }
  const bool ok = unwritten == 0 && worst <= 1.0;
  printf("rank %d: gemm_all_scatter %dx%dx%d on %d ranks: %s (unwritten %lld, worst error %.2f of tolerance)\n", rank, M, N, K, W, ok ? "OK" : "WRONG", unwritten, worst);
  iris_finalize(ctx);
  return ok ? 0 : 1;
}
