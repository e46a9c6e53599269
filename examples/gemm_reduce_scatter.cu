// GEMM + reduce-scatter in one file, on iris_gemm_reduce.h's device building blocks.
//
// Rank r holds A_r (M x K/W) and B_r (K/W x N); C = sum_r A_r * B_r, and rank r receives
// rows [r*M/W, (r+1)*M/W) of C. Two kernels per call:
//   gemm_push     every CTA computes tiles of this rank's fp32 partial (a plain shared-memory
//                 GEMM: replace it with your own) and pushes each finished tile to the rank
//                 that owns its rows (iris_gemm_push_tile: the stores, a block barrier, one
//                 system-scope release of the tile's flag with the call's epoch);
//   reduce_tiles  every CTA waits for the W contributions of one of this rank's tiles
//                 (iris_gemm_reduce_tile: bounded acquire waits) and sums them in rank
//                 order, rounding once to bf16.
// The contribution slots are reused by the next call, so the ranks meet (iris_barrier)
// between calls: no rank pushes call e+1 before every owner has reduced call e.
//   ./build/gemm_reduce_scatter        one process per GPU
#define IRIS_IMPLEMENTATION
#define IRIS_GEMM_NO_CORE // only the building blocks: the all-gather GEMM core is not needed
#include "../iris_gemm_reduce.h"

#include <cuda_bf16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

constexpr int BM = 64, BN = 64, BK = 16, THREADS = 256; // each thread: a 4 x 4 block of the tile
typedef __nv_bfloat16 T;

__global__ void __launch_bounds__(THREADS)
gemm_push(iris_device_ctx_t ctx, const T *a, const T *b, iris_gemm_contrib_t cb, int M, int N, int kl, unsigned epoch) {
  __shared__ float as[BK][BM], bs[BK][BN], tile[BM][BN];
  const int ml = M / ctx.world_size, tiles_n = (N + BN - 1) / BN, tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int t = blockIdx.x; t < M / BM * tiles_n; t += gridDim.x) {
    const int m0 = t / tiles_n * BM, n0 = t % tiles_n * BN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < kl; k0 += BK) {
      for (int i = threadIdx.x; i < BK * BM; i += THREADS) {
        const int kk = i % BK, r = i / BK, c = i % BM, k2 = i / BM;
        as[kk][r] = k0 + kk < kl ? __bfloat162float(a[(size_t)(m0 + r) * kl + k0 + kk]) : 0.f;
        bs[k2][c] = k0 + k2 < kl && n0 + c < N ? __bfloat162float(b[(size_t)(k0 + k2) * N + n0 + c]) : 0.f;
      }
      __syncthreads();
      for (int kk = 0; kk < BK; kk++)
        for (int i = 0; i < 4; i++)
          for (int j = 0; j < 4; j++) acc[i][j] += as[kk][ty * 4 + i] * bs[kk][tx * 4 + j];
      __syncthreads();
    }
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) tile[ty * 4 + i][tx * 4 + j] = acc[i][j];
    __syncthreads();
    // the owner of these rows, and the tile's index among the owner's tiles
    const int owner = m0 / ml, local = (m0 - owner * ml) / BM * tiles_n + n0 / BN;
    iris_gemm_push_tile(ctx, cb, local, owner, &tile[0][0], BN, BM, min(BN, N - n0), epoch);
  }
}

__global__ void __launch_bounds__(THREADS)
reduce_tiles(iris_device_ctx_t ctx, iris_gemm_contrib_t cb, iris_bf16_t *c, int M, int N, unsigned epoch, int *failed) {
  const int ml = M / ctx.world_size, tiles_n = (N + BN - 1) / BN;
  for (int t = blockIdx.x; t < ml / BM * tiles_n; t += gridDim.x) {
    const int m0 = t / tiles_n * BM, n0 = t % tiles_n * BN;
    if (!iris_gemm_reduce_tile<iris_bf16_t>(ctx, cb, t, BM, min(BN, N - n0), (const iris_bf16_t *)NULL, c + (size_t)m0 * N + n0, N, epoch) && threadIdx.x == 0)
      *failed = 1; // a peer did not push within the wait bound
  }
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
  const int W = iris_world_size(ctx), M = 256 * W, N = 1000, K = 512 * W, ml = M / W, kl = K / W; // ml % BM == 0
  const int my_tiles = ml / BM * ((N + BN - 1) / BN);
  T *a, *b;
  iris_bf16_t *c;
  int *failed;
  iris_gemm_contrib_t cb;
  cb.tile_elems = BM * BN;
  CHECK(iris_malloc(ctx, (size_t)my_tiles * W * cb.tile_elems * sizeof(float), (void **)&cb.data) == IRIS_SUCCESS);
  CHECK(iris_calloc(ctx, (size_t)my_tiles * W * sizeof(unsigned), (void **)&cb.flags) == IRIS_SUCCESS); // epochs start at 0
  CHECK(cudaMalloc(&a, (size_t)M * kl * sizeof(T)) == cudaSuccess && cudaMalloc(&b, (size_t)kl * N * sizeof(T)) == cudaSuccess);
  CHECK(cudaMalloc(&c, (size_t)ml * N * sizeof(T)) == cudaSuccess && cudaMalloc(&failed, sizeof(int)) == cudaSuccess && cudaMemset(failed, 0, sizeof(int)) == cudaSuccess);
  // A (M x K) and B (K x N) as a whole; this rank holds columns / rows [rank*kl, (rank+1)*kl)
  std::vector<T> ha((size_t)M * kl), hb((size_t)kl * N);
  for (int r = 0; r < M; r++)
    for (int k = 0; k < kl; k++) ha[(size_t)r * kl + k] = __float2bfloat16(val(11u, (long long)r * K + rank * kl + k));
  for (int k = 0; k < kl; k++)
    for (int n = 0; n < N; n++) hb[(size_t)k * N + n] = __float2bfloat16(val(7u, (long long)(rank * kl + k) * N + n));
  CHECK(cudaMemcpy(a, ha.data(), ha.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(b, hb.data(), hb.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, iris_device_ordinal(ctx));
  std::vector<T> hc((size_t)ml * N);
  double worst = 0;
  long long unwritten = 0;
  for (unsigned epoch = 1; epoch <= 3; epoch++) {
    CHECK(cudaMemset(c, 0xff, (size_t)ml * N * sizeof(T)) == cudaSuccess); // NaN poison
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(iris_barrier(ctx) == IRIS_SUCCESS); // every owner has reduced the previous call
    gemm_push<<<sms, THREADS>>>(iris_device_context(ctx), a, b, cb, M, N, kl, epoch);
    reduce_tiles<<<sms, THREADS>>>(iris_device_context(ctx), cb, c, M, N, epoch, failed);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaMemcpy(hc.data(), c, hc.size() * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    for (size_t i = 0; i < hc.size(); i++) unwritten += isnan(__bfloat162float(hc[i]));
  }
  int hf = 0;
  CHECK(cudaMemcpy(&hf, failed, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  // this rank's rows of the last call against a float64 reference (16 sampled rows)
  for (int s = 0; s < 16; s++) {
    const int r = rank * ml + s * (ml - 1) / 15;
    for (int n = 0; n < N; n++) {
      double want = 0;
      for (int k = 0; k < K; k++)
        want += (double)__bfloat162float(__float2bfloat16(val(11u, (long long)r * K + k))) * (double)__bfloat162float(__float2bfloat16(val(7u, (long long)k * N + n)));
      const double got = (double)__bfloat162float(hc[(size_t)(r - rank * ml) * N + n]), err = fabs(got - want) / (fabs(want) / 128 + 1e-3);
      if (!(err <= worst)) worst = isnan(err) ? 1e30 : err;
    }
  }
  const bool ok = !hf && unwritten == 0 && worst <= 1.0;
  printf("rank %d: gemm_reduce_scatter %dx%dx%d on %d ranks: %s (wait timed out %d, unwritten %lld, worst error %.2f of tolerance)\n", rank, M, N, K, W, ok ? "OK" : "WRONG", hf,
         unwritten, worst);
  iris_finalize(ctx);
  return ok ? 0 : 1;
}
