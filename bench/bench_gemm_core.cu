// internal/gemm_core.h against cuBLAS on the same local GEMM: C = A * B, bf16 in, fp32 accumulate,
// bf16 out, A row-major M x K, B row-major K x N ("KxN") or N x K ("NxK", nn.Linear weight).
// Per-tile cores: one CTA per output tile; the TMA core: one persistent CTA per SM; both in a grouped raster (8 M-tiles sweep the N tiles),
// every named configuration and a few other tile shapes (to pick from). CUDA events, warm-up, BENCH_REPS (20) timed runs, median.
// Before timing, rows 0, M/2 and M-1 of the iris result are compared with cuBLAS.
//   bench_gemm_core [config-substring]
// Environment: BENCH_SHAPES=MxNxK,... (default: four shapes below), BENCH_LAYOUT=KxN or NxK
// (default both), BENCH_GROUP=g (m-tiles per raster group, default 8), BENCH_REPS.
#include "../internal/gemm/core_tma.h"
#include "bench_util.h"

#include <cublas_v2.h>

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

typedef __nv_bfloat16 bf16;

#define CB(x)                                                                                                                      \
  do {                                                                                                                             \
    cublasStatus_t s_ = (x);                                                                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                                             \
      fprintf(stderr, "bench: %s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_);                                     \
      exit(1);                                                                                                                     \
    }                                                                                                                              \
  } while (0)

// Grouped raster: 8 M-tiles sweep the N tiles together. Tile i of a CTA is raster index
// blockIdx.x + i * gridDim.x (one tile per CTA for the per-tile cores, a persistent
// sequence for the TMA core).
struct GroupedSched {
  int tiles_m, tiles_n, bm, bn, group, cdiv; // cdiv: CTAs per cluster (bm covers the cluster's rows)
  __device__ bool operator()(int i, int &m0, int &n0) const {
    const int t = (int)blockIdx.x / cdiv + i * ((int)gridDim.x / cdiv);
    if (t >= tiles_m * tiles_n) return false;
    const int per_group = group * tiles_n, first_m = t / per_group * group;
    const int gsize = min(tiles_m - first_m, group);
    m0 = (first_m + (t % per_group) % gsize) * bm;
    n0 = (t % per_group) / gsize * bn;
    return true;
  }
};
template <class Cfg, bool KN>
__global__ void __launch_bounds__(Cfg::threads, 1)
    k_gemm(const bf16 *A, int lda, const bf16 *B, int ldb, bf16 *C, int ldc, int M, int N, int K, GroupedSched s) {
  extern __shared__ __align__(16) char smem[];
  int m0, n0;
  if (s(0, m0, n0)) iris_gemm_tile<Cfg, bf16, KN, bf16>(A, lda, B, ldb, C, ldc, nullptr, M, N, K, m0, n0, smem, iris_gemm_no_wait());
}
template <class Cfg, bool KN>
__global__ void __launch_bounds__(Cfg::threads, 1)
    k_gemm_tma(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, bf16 *C, int ldc, int M, int N, int K, GroupedSched s) {
  extern __shared__ __align__(16) char smem[];
  iris_gemm_tma_tiles<Cfg, bf16, KN, bf16>(&ta, &tb, C, ldc, (const bf16 *)nullptr, M, N, K, s, iris_gemm_no_wait(), smem);
}
__global__ void k_fill(bf16 *p, size_t n, uint64_t seed) { // uniform in [-1, 1)
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ULL ^ seed;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    p[i] = __float2bfloat16((float)(x >> 40) / (float)(1 << 23) - 1.0f);
  }
}
__global__ void k_wgmma_compiled(int *out) { *out = iris_gemm_wgmma_compiled(); }

static int group_env() {
  const char *e = getenv("BENCH_GROUP");
  return e && atoi(e) > 0 ? atoi(e) : 8;
}
static int reps() {
  const char *e = getenv("BENCH_REPS");
  return e && atoi(e) > 0 ? atoi(e) : 20;
}
template <class F> static double median_ms(F launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch(); // warm-up
  CK(cudaGetLastError());
  std::vector<float> t;
  for (int i = 0; i < reps(); ++i) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Bufs {
  bf16 *A, *B, *C, *Cref;
};

static double cublas_run(cublasHandle_t h, bool KN, int M, int N, int K, const Bufs &b, bool time_it) {
  const float one = 1.f, zero = 0.f;
  // row-major C (M x N) = col-major C^T (N x M) = B^T * A^T
  auto launch = [&]() {
    CB(cublasGemmEx(h, KN ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, b.B, CUDA_R_16BF, KN ? N : K, b.A, CUDA_R_16BF, K, &zero, b.Cref,
                    CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  if (!time_it) {
    launch();
    CK(cudaDeviceSynchronize());
    return 0;
  }
  return median_ms(launch);
}

// max |iris - cublas| over rows 0, M/2, M-1, relative to the typical magnitude sqrt(K)/3
static double compare(int M, int N, int K, const Bufs &b) {
  std::vector<bf16> x(N), y(N);
  double worst = 0;
  const int rows[3] = {0, M / 2, M - 1};
  for (int r : rows) {
    CK(cudaMemcpy(x.data(), b.C + (size_t)r * N, N * sizeof(bf16), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), b.Cref + (size_t)r * N, N * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (int c = 0; c < N; ++c) {
      const double d = fabs((double)__bfloat162float(x[c]) - (double)__bfloat162float(y[c]));
      worst = d != d ? INFINITY : fmax(worst, d);
    }
  }
  return worst / fmax(1.0, sqrt((double)K) / 3.0);
}

// Runs launch once, compares with cuBLAS, times it, prints one line.
template <class Cfg, typename Kern, typename Launch>
static void time_and_report(const char *cname, bool KN, int M, int N, int K, const Bufs &b, double cublas_ms, Kern kern, Launch launch) {
  cudaFuncAttributes fa;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::smem_bytes));
  CK(cudaFuncGetAttributes(&fa, kern));
  CK(cudaMemset(b.C, 0xff, (size_t)M * N * sizeof(bf16)));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const double diff = compare(M, N, K, b);
  const double ms = median_ms(launch), flop = 2.0 * M * N * K;
  const double tf = flop / ms * 1e-9, tc = flop / cublas_ms * 1e-9;
  printf("M=%5d N=%5d K=%5d B=%s  %-24s %7.1f TFLOPS  cuBLAS %7.1f TFLOPS  ratio %5.3f  (%.3f ms; %d regs, %zu B local, %d B smem; diff vs cuBLAS %.2g%s)\n", M,
         N, K, KN ? "KxN" : "NxK", cname, tf, tc, tf / tc, ms, fa.numRegs, (size_t)fa.localSizeBytes, Cfg::smem_bytes, diff,
         diff < 2e-2 ? "" : " MISMATCH");
  fflush(stdout);
}

// a per-tile core: one CTA per tile
template <class Cfg, bool KN>
static void bench_cfg(const char *cname, const char *filter, int M, int N, int K, const Bufs &b, double cublas_ms) {
  if (filter && !strstr(cname, filter)) return;
  const GroupedSched sc = {(M + Cfg::BM - 1) / Cfg::BM, (N + Cfg::BN - 1) / Cfg::BN, Cfg::BM, Cfg::BN, group_env(), 1};
  auto kern = k_gemm<Cfg, KN>;
  time_and_report<Cfg>(cname, KN, M, N, K, b, cublas_ms, kern,
                       [&]() { kern<<<sc.tiles_m * sc.tiles_n, Cfg::threads, Cfg::smem_bytes>>>(b.A, K, b.B, KN ? N : K, b.C, N, M, N, K, sc); });
}

// the TMA core: one persistent CTA per SM
template <class Cfg, bool KN>
static void bench_tma(const char *cname, const char *filter, int M, int N, int K, const Bufs &b, double cublas_ms, int sms) {
  if (filter && !strstr(cname, filter)) return;
  // clusters of Cfg::CLUSTER CTAs take vertically adjacent tiles: the schedule's tiles are
  // CLUSTER * BM rows high; as many clusters as fit at once (at most one CTA per SM)
  const int bmc = Cfg::BM * Cfg::CLUSTER;
  const GroupedSched sc = {(M + bmc - 1) / bmc, (N + Cfg::BN - 1) / Cfg::BN, bmc, Cfg::BN, group_env(), Cfg::CLUSTER};
  CUtensorMap ta, tb;
  CK(iris_gemm_tma_map(&ta, b.A, 0, M, K, K, Cfg::BM));
  CK(iris_gemm_tma_map_b<Cfg>(&tb, b.B, 0, KN, K, N, KN ? N : K));
  auto kern = k_gemm_tma<Cfg, KN>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::smem_bytes));
  cudaLaunchConfig_t lc = {};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = Cfg::CLUSTER;
  at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
  lc.blockDim = dim3(Cfg::threads);
  lc.dynamicSmemBytes = Cfg::smem_bytes;
  lc.attrs = at;
  lc.numAttrs = Cfg::CLUSTER > 1 ? 1 : 0;
  int clusters = sms / Cfg::CLUSTER;
  if (Cfg::CLUSTER > 1) {
    lc.gridDim = dim3(sms / Cfg::CLUSTER * Cfg::CLUSTER);
    CK(cudaOccupancyMaxActiveClusters(&clusters, kern, &lc));
  }
  lc.gridDim = dim3(std::min(clusters, sc.tiles_m * sc.tiles_n) * Cfg::CLUSTER);
  if (Cfg::CLUSTER > 1) printf("# %s: %d clusters of %d CTAs at once, grid %d\n", cname, clusters, Cfg::CLUSTER, (int)lc.gridDim.x);
  time_and_report<Cfg>(cname, KN, M, N, K, b, cublas_ms, kern, [&]() { CK(cudaLaunchKernelEx(&lc, kern, ta, tb, b.C, N, M, N, K, sc)); });
}

// every configuration, in one B layout
template <bool KN> static void bench_all(const char *filter, int M, int N, int K, const Bufs &b, double cms, int sms) {
  bench_cfg<iris_gemm_cfg_large, KN>("large(mma)", filter, M, N, K, b, cms);
  bench_cfg<iris_gemm_cfg_medium, KN>("medium(mma)", filter, M, N, K, b, cms);
  bench_cfg<iris_gemm_cfg_small, KN>("small(mma)", filter, M, N, K, b, cms);
  bench_cfg<iris_gemm_cfg_wgmma_large, KN>("wgmma_large", filter, M, N, K, b, cms);
  bench_cfg<iris_gemm_cfg_wgmma_small, KN>("wgmma_small", filter, M, N, K, b, cms);
  bench_cfg<iris_gemm_cfg<128, 256, 32, 2, 4, 5>, KN>("mma 128x256x32 s5", filter, M, N, K, b, cms);
  bench_cfg<iris_gemm_wgmma_cfg<128, 256, 3>, KN>("wgmma 128x256 s3", filter, M, N, K, b, cms);
  bench_cfg<iris_gemm_wgmma_cfg<128, 128, 6>, KN>("wgmma 128x128 s6", filter, M, N, K, b, cms);
  bench_tma<iris_gemm_cfg_tma_large, KN>("tma_large", filter, M, N, K, b, cms, sms);
  bench_tma<iris_gemm_tma_cfg<256, 3>, KN>("tma 128x256 s3", filter, M, N, K, b, cms, sms);
  bench_tma<iris_gemm_tma_cfg<128, 6>, KN>("tma 128x128 s6", filter, M, N, K, b, cms, sms);
  bench_tma<iris_gemm_cfg_tma_pingpong, KN>("tma_pingpong", filter, M, N, K, b, cms, sms);
  bench_tma<iris_gemm_tma_cfg<128, 4, true>, KN>("tma pp 128x128 s4", filter, M, N, K, b, cms, sms);
  bench_tma<iris_gemm_tma_cfg<128, 7, true>, KN>("tma pp 128x128 s7", filter, M, N, K, b, cms, sms);
  bench_tma<iris_gemm_cfg_tma_pingpong_c2, KN>("tma_pingpong_c2", filter, M, N, K, b, cms, sms);
  bench_tma<iris_gemm_tma_cfg<128, 4, true, 2>, KN>("tma pp c2 128x128 s4", filter, M, N, K, b, cms, sms);
  bench_tma<iris_gemm_tma_cfg<256, 4, false, 2>, KN>("tma coop c2 128x256 s4", filter, M, N, K, b, cms, sms);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : nullptr;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int *dflag, wg = 0;
  CK(cudaMalloc(&dflag, sizeof(int)));
  k_wgmma_compiled<<<1, 1>>>(dflag);
  CK(cudaMemcpy(&wg, dflag, sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaFree(dflag));
  printf("# %s, %d SMs; wgmma core %s; median of %d runs\n", prop.name, prop.multiProcessorCount,
         wg ? "compiled (sm_90a)" : "NOT compiled (wgmma configs run the mma.sync fallback)", reps());
  cublasHandle_t h;
  CB(cublasCreate(&h));
  std::vector<std::vector<int>> shapes = {{8192, 3584, 8192}, {8192, 1792, 4096}, {8192, 6656, 16384}, {16384, 3584, 8192}};
  if (const char *e = getenv("BENCH_SHAPES")) {
    shapes.clear();
    for (const char *p = e; *p;) {
      int m, n, k, used = 0;
      if (sscanf(p, "%dx%dx%d%n", &m, &n, &k, &used) != 3 || m <= 0 || n <= 0 || k <= 0) {
        fprintf(stderr, "bench_gemm_core: BENCH_SHAPES wants MxNxK,...: '%s'\n", e);
        return 2;
      }
      shapes.push_back({m, n, k});
      p += used;
      if (*p == ',') ++p;
    }
  }
  const char *layout = getenv("BENCH_LAYOUT");
  printf("# raster group %d m-tiles\n", group_env());
  for (const auto &s : shapes) {
    const int M = s[0], N = s[1], K = s[2];
    Bufs b;
    CK(cudaMalloc(&b.A, (size_t)M * K * sizeof(bf16)));
    CK(cudaMalloc(&b.B, (size_t)K * N * sizeof(bf16)));
    CK(cudaMalloc(&b.C, (size_t)M * N * sizeof(bf16)));
    CK(cudaMalloc(&b.Cref, (size_t)M * N * sizeof(bf16)));
    k_fill<<<1024, 256>>>(b.A, (size_t)M * K, 1);
    k_fill<<<1024, 256>>>(b.B, (size_t)K * N, 2);
    CK(cudaGetLastError());
    for (int kn = 1; kn >= 0; --kn) {
      if (layout && strcmp(layout, kn ? "KxN" : "NxK")) continue;
      cublas_run(h, kn, M, N, K, b, false); // the reference for the comparison
      const double cms = cublas_run(h, kn, M, N, K, b, true);
      if (kn) bench_all<true>(filter, M, N, K, b, cms, prop.multiProcessorCount);
      else bench_all<false>(filter, M, N, K, b, cms, prop.multiProcessorCount);
    }
    CK(cudaFree(b.A));
    CK(cudaFree(b.B));
    CK(cudaFree(b.C));
    CK(cudaFree(b.Cref));
  }
  CB(cublasDestroy(h));
  return 0;
}
