// internal/gemm/core.h on one GPU: every named configuration (mma.sync and wgmma cores), bf16 and
// fp16 inputs, both B layouts, bf16 / fp16 / fp32 outputs, with and without bias, shapes that
// are not multiples of the tile, a grid of one CTA per tile and a persistent grid smaller than
// the tile count (shared memory reused across tiles), padded leading dimensions whose padding
// holds NaN (a read of k >= K poisons the result), outputs poisoned with NaN bits before the
// run inside a guard band that must stay untouched, and a wait_k that fills A's k-slab only
// when it is called (a load before its wait reads NaN) and logs the k0 sequence per tile.
// Checked against a float64 host reference; one line per check, exit status 1 on any FAIL.
//   gemm_core_test          all checks
//   gemm_core_test quick    skip the 4096 x 3584 x 1024 shapes
// Under hipcc (make build/gemm_core_test_hip, gfx90a + gfx940) the same checks run the AMD
// MFMA core (internal/gemm/core_mfma.h) in its named configurations, on an MI200 or MI300. That
// core has never been run: this program is how to verify it.
#if defined(__HIPCC__) || defined(__HIP__)
#define GCT_HIP 1
#define IRIS_GEMM_MFMA_UNVERIFIED 1 // the MFMA core is what this build tests
#endif
#include "../internal/gemm/core_tma.h"
#include "../internal/gemm/core_mfma.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <random>
#include <string>
#include <type_traits>
#include <vector>
#include "host_threads.h"
#include <utility>
#include <vector>

#if defined(GCT_HIP)
// the test's own runtime names (HIP spelling of the CUDA calls below)
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaGetErrorString hipGetErrorString
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemcpy hipMemcpy
#define cudaMemset hipMemset
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaGetLastError hipGetLastError
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaGetDevice hipGetDevice
typedef hip_bfloat16 bf16_t;
#else
typedef __nv_bfloat16 bf16_t;
#endif

#define CK(x)                                                                                                                      \
  do {                                                                                                                             \
    cudaError_t e_ = (x);                                                                                                          \
    if (e_ != cudaSuccess) {                                                                                                       \
      fprintf(stderr, "gemm_core_test: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                         \
      exit(1);                                                                                                                     \
    }                                                                                                                              \
  } while (0)

static int g_pass = 0, g_fail = 0;
// GCT_ONLY=<substring>: run only the configurations whose name holds it (e.g. under
// compute-sanitizer, where the whole suite runs for too long); their cases are unchanged
static bool wanted_cfg(const char *cname) {
  const char *only = getenv("GCT_ONLY");
  return !only || !*only || strstr(cname, only);
}
static void report(const std::string &name, bool ok, const std::string &detail) {
  if (ok) {
    printf("PASS: %s\n", name.c_str());
    g_pass++;
  } else {
    printf("FAIL: %s: %s\n", name.c_str(), detail.c_str());
    g_fail++;
  }
  fflush(stdout);
}

// ---------------------------------------------------------------- element types
template <typename X> struct ty;
#if defined(GCT_HIP)
template <> struct ty<bf16_t> {
  static const char *name() { return "bf16"; }
  static bf16_t from(float x) { return bf16_t(x); } // round to nearest even (hip_bfloat16's constructor)
  static double to(bf16_t x) { return (double)(float)x; }
#else
template <> struct ty<bf16_t> {
  static const char *name() { return "bf16"; }
  static bf16_t from(float x) { return __float2bfloat16(x); }
  static double to(bf16_t x) { return (double)__bfloat162float(x); }
#endif
  static double rtol() { return 1.0 / 256; } // output rounding: half an ulp is 2^-9 relative
};
template <> struct ty<__half> {
  static const char *name() { return "f16"; }
  static __half from(float x) { return __float2half(x); }
  static double to(__half x) { return (double)__half2float(x); }
  static double rtol() { return 1.0 / 1024; } // 2^-11 relative
};
template <> struct ty<float> {
  static const char *name() { return "f32"; }
  static float from(float x) { return x; }
  static double to(float x) { return (double)x; }
  static double rtol() { return 1e-6; }
};

// ---------------------------------------------------------------- kernels
template <class Cfg, typename T, bool KN, typename OutT, typename BiasT>
__global__ void __launch_bounds__(Cfg::threads, 1)
    k_plain(const T *A, int lda, const T *B, int ldb, OutT *C, int ldc, const BiasT *bias, int M, int N, int K, int tiles_m, int ntiles) {
  extern __shared__ __align__(16) char smem[];
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) // persistent when gridDim.x < ntiles
    iris_gemm_tile<Cfg, T, KN, OutT>(A, lda, B, ldb, C, ldc, bias, M, N, K, (t % tiles_m) * Cfg::BM, (t / tiles_m) * Cfg::BN, smem,
                                     iris_gemm_no_wait());
}

// wait_k that produces A's k-slab [k0, k0+BK) of this tile's rows when it is called (A starts as
// NaN), checks that all threads pass the same k0, and logs k0 per tile. Needs one tile per
// block row of A (N <= BN), so that no other CTA fills rows this CTA reads.
template <typename T> struct GateWait {
  const T *src;
  T *dst;
  int ld, M, K, m0, bm, bk, tile, cap;
  int *log, *count, *errs;
  __device__ void operator()(int k0) const {
    __shared__ int s_k0;
    if (threadIdx.x == 0) s_k0 = k0;
    __syncthreads();
    if (s_k0 != k0) atomicAdd(errs, 1);
    for (int i = threadIdx.x; i < bm * bk; i += blockDim.x) {
      const int r = m0 + i / bk, c = k0 + i % bk;
      if (r < M && c < K) dst[(size_t)r * ld + c] = src[(size_t)r * ld + c];
    }
    __threadfence();
    if (threadIdx.x == 0) {
      const int n = atomicAdd(&count[tile], 1);
      if (n < cap) log[tile * cap + n] = k0;
    }
    __syncthreads();
  }
};
template <class Cfg, typename T, bool KN, typename OutT>
__global__ void __launch_bounds__(Cfg::threads, 1)
    k_gate(const T *Asrc, T *A, int lda, const T *B, int ldb, OutT *C, int ldc, const T *bias, int M, int N, int K, int ntiles, int *log,
           int *count, int cap, int *errs) {
  extern __shared__ __align__(16) char smem[];
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
    GateWait<T> w = {Asrc, A, lda, M, K, t * Cfg::BM, Cfg::BM, Cfg::BK, t, cap, log, count, errs};
    iris_gemm_tile<Cfg, T, KN, OutT>(A, lda, B, ldb, C, ldc, bias, M, N, K, t * Cfg::BM, 0, smem, w);
  }
}

__global__ void k_wgmma_compiled(int *out) { *out = iris_gemm_wgmma_compiled(); }

#if !defined(GCT_HIP)
// ---------------------------------------------------------------- the TMA core (persistent)
// tile i of a CTA: t = blockIdx.x + i * gridDim.x, m fastest
struct TmaSched {
  int tiles_m, ntiles, bm, bn, cdiv; // cdiv: CTAs per cluster (bm then covers the cluster's rows)
  __device__ bool operator()(int i, int &m0, int &n0) const {
    const int t = (int)blockIdx.x / cdiv + i * ((int)gridDim.x / cdiv);
    if (t >= ntiles) return false;
    m0 = t % tiles_m * bm;
    n0 = t / tiles_m * bn;
    return true;
  }
};
template <class Cfg, typename T, bool KN, typename OutT, typename BiasT>
__global__ void __launch_bounds__(Cfg::threads, 1) k_tma(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, OutT *C, int ldc,
                                                         const BiasT *bias, int M, int N, int K, TmaSched sc, int reps) {
  extern __shared__ __align__(16) char smem[];
  for (int r = 0; r < reps; ++r) // reps > 1: back-to-back calls on the same shared memory (barriers re-initialised)
    iris_gemm_tma_tiles<Cfg, T, KN, OutT>(&ta, &tb, C, ldc, bias, M, N, K, sc, iris_gemm_no_wait(), smem);
}
// wait_a that fills A's slab [k0, k0+64) of rows [m0, m0+BM) when the producer thread calls it
// (A starts as NaN: a TMA issued before its wait, or one that misses the generic-proxy writes,
// reads NaN) and logs (m0, k0) per tile; needs N <= BN (one tile per BM rows).
template <typename T> struct TmaGate {
  const T *src;
  T *dst;
  int ld, M, K, bm, cap;
  int *log, *count;
  __device__ void operator()(int m0, int k0) const {
    for (int r = m0; r < m0 + bm && r < M; ++r)
      for (int c = k0; c < k0 + 64 && c < K; ++c) dst[(size_t)r * ld + c] = src[(size_t)r * ld + c];
    const int tile = m0 / bm, n = count[tile]++;
    if (n < cap) log[tile * cap + n] = k0;
  }
};
template <class Cfg, typename T, bool KN, typename OutT>
__global__ void __launch_bounds__(Cfg::threads, 1) k_tma_gate(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, OutT *C, int ldc,
                                                              const T *bias, int M, int N, int K, TmaSched sc, TmaGate<T> gate) {
  extern __shared__ __align__(16) char smem[];
  iris_gemm_tma_tiles<Cfg, T, KN, OutT>(&ta, &tb, C, ldc, bias, M, N, K, sc, gate, smem);
}
__global__ void k_tma_compiled(int *out) { *out = iris_gemm_tma_compiled(); }
#endif

// ---------------------------------------------------------------- host side
struct Case {
  int M, N, K;
  bool bias;
  int grid;     // 0: one CTA per tile, else this many CTAs (persistent)
  bool sampled; // check sampled rows and columns only (plus every guard and NaN)
};

template <typename T, typename OutT, typename BiasT = T> struct Host {
  int M, N, K, lda, ldb, ldc, G;
  bool KN;
  std::vector<T> A, B;
  std::vector<BiasT> bias;
  std::vector<OutT> C; // (M + 2G) x ldc, C proper starts at row G
  void init(int M_, int N_, int K_, bool KN_, bool with_bias, uint64_t seed) {
    M = M_, N = N_, K = K_, KN = KN_, G = 2;
    lda = K + 8 * (int)(seed % 3);                                  // padded (NaN) or exact
    ldb = (KN ? (N + 7) / 8 * 8 : K) + 8 * (int)((seed >> 2) % 2); // K x N rows pad to 8 at least
    ldc = (N + 7) / 8 * 8 + 8;                                      // right guard columns
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> U(-1.f, 1.f);
    const T nan = ty<T>::from(NAN);
    A.assign((size_t)M * lda, nan);
    for (int r = 0; r < M; ++r)
      for (int k = 0; k < K; ++k) A[(size_t)r * lda + k] = ty<T>::from(U(rng));
    const int br = KN ? K : N, bc = KN ? N : K;
    B.assign((size_t)br * ldb, nan);
    for (int r = 0; r < br; ++r)
      for (int c = 0; c < bc; ++c) B[(size_t)r * ldb + c] = ty<T>::from(U(rng));
    bias.clear();
    if (with_bias) {
      bias.assign((size_t)(N + 7) / 8 * 8, ty<BiasT>::from(NAN));
      for (int i = 0; i < N; ++i) bias[i] = ty<BiasT>::from(U(rng));
    }
  }
  // float64 reference of the checked elements, guard band, NaN; returns "" when all is well
  std::string check(bool sampled) const {
    std::vector<double> Ad((size_t)M * K), Bd((size_t)N * K); // Bd: column n contiguous in k
    for (int r = 0; r < M; ++r)
      for (int k = 0; k < K; ++k) Ad[(size_t)r * K + k] = ty<T>::to(A[(size_t)r * lda + k]);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k) Bd[(size_t)n * K + k] = ty<T>::to(KN ? B[(size_t)k * ldb + n] : B[(size_t)n * ldb + k]);
    const double scale = fmax(1.0, sqrt((double)K) / 3.0), atol = 1e-3 * scale, rtol = ty<OutT>::rtol();
    // rows on the host's threads (the float64 dot products were most of this test's time);
    // each range counts on its own, merged in row order
    struct Tally {
      long bad = 0, guard = 0, checked = 0;
      double worst = 0;
      std::string first_bad, first_guard;
    };
    const OutT *Cp = C.data() + (size_t)G * ldc;
    const long rows_all = M + 2 * G;
    const int threads = host_threads(1);
    std::vector<Tally> tally((size_t)threads);
    const long per = (rows_all + threads - 1) / threads;
    std::string unused;
    host_ranges((size_t)threads, threads, 1, [&](size_t t0, size_t t1, std::string &) {
      for (size_t t = t0; t < t1; t++) {
        Tally &y = tally[t];
        for (long r = -G + (long)t * per; r < -G + (long)(t + 1) * per && r < M + G; ++r)
          for (int c = 0; c < ldc; ++c) {
            const OutT v = Cp[r * ldc + c];
            char msg[96];
            if (r < 0 || r >= M || c >= N) { // never written: still the poison (all bytes 0xff)
              unsigned char b[sizeof(OutT)];
              memcpy(b, &v, sizeof b);
              for (size_t i = 0; i < sizeof b; ++i)
                if (b[i] != 0xff) {
                  if (!y.guard) snprintf(msg, sizeof msg, " written outside at (%ld,%d);", r, c), y.first_guard = msg;
                  y.guard++;
                  break;
                }
              continue;
            }
            const double got = ty<OutT>::to(v);
            const bool want_ref = !sampled || (r * 7919 + 3) % 13 == 0 || (c * 104729 + 5) % 11 == 0 || r == M - 1 || c == N - 1;
            if (got != got || !want_ref) {
              if (got != got) {
                if (!y.bad) snprintf(msg, sizeof msg, " NaN at (%ld,%d);", r, c), y.first_bad = msg;
                y.bad++;
              }
              continue;
            }
            double ref = bias.empty() ? 0.0 : ty<BiasT>::to(bias[c]);
            const double *a = &Ad[(size_t)r * K], *b = &Bd[(size_t)c * K];
            for (int k = 0; k < K; ++k) ref += a[k] * b[k];
            const double err = fabs(got - ref);
            y.checked++;
            if (err > y.worst) y.worst = err;
            if (!(err <= atol + rtol * fabs(ref))) {
              if (!y.bad) snprintf(msg, sizeof msg, " C(%ld,%d)=%.6g want %.6g;", r, c, got, ref), y.first_bad = msg;
              y.bad++;
            }
          }
      }
      return true;
    }, unused);
    long bad = 0, guard = 0, checked = 0;
    double worst = 0;
    std::string first_bad, first_guard;
    for (const Tally &y : tally) {
      if (y.bad && !bad) first_bad = y.first_bad;
      if (y.guard && !guard) first_guard = y.first_guard;
      bad += y.bad, guard += y.guard, checked += y.checked;
      if (y.worst > worst) worst = y.worst;
    }
    char first[256];
    snprintf(first, sizeof first, "%s%s", first_guard.c_str(), first_bad.c_str());
    if (!bad && !guard) return "";
    char out[512];
    snprintf(out, sizeof out, "%ld wrong of %ld checked, %ld guard elements written, max err %.3g (tol %.3g + %.3g*|ref|);%s", bad, checked, guard, worst,
             atol, rtol, first);
    return out;
  }
};

template <typename X> static X *to_dev(const std::vector<X> &h) {
  if (h.empty()) return nullptr;
  X *d;
  CK(cudaMalloc(&d, h.size() * sizeof(X)));
  CK(cudaMemcpy(d, h.data(), h.size() * sizeof(X), cudaMemcpyHostToDevice));
  return d;
}

template <class Cfg> static int cta_count(int tiles, int grid) { return grid > 0 && grid < tiles ? grid : tiles; }

// dynamic shared memory above 48 KB needs an opt-in on NVIDIA; AMD LDS (<= 64 KB) none
template <typename Kern> static void allow_smem(Kern kern, int bytes) {
#if defined(GCT_HIP)
  (void)kern;
  (void)bytes;
#else
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
#endif
}

template <class Cfg, typename T, bool KN, typename OutT, typename BiasT = T> static void run_plain(const char *cname, const Case &cs, uint64_t seed) {
  Host<T, OutT, BiasT> h;
  h.init(cs.M, cs.N, cs.K, KN, cs.bias, seed);
  const int tm = (cs.M + Cfg::BM - 1) / Cfg::BM, tn = (cs.N + Cfg::BN - 1) / Cfg::BN, nt = tm * tn, ctas = cta_count<Cfg>(nt, cs.grid);
  T *dA = to_dev(h.A), *dB = to_dev(h.B);
  BiasT *dbias = to_dev(h.bias);
  OutT *dC;
  const size_t cn = (size_t)(cs.M + 2 * h.G) * h.ldc;
  CK(cudaMalloc(&dC, cn * sizeof(OutT)));
  CK(cudaMemset(dC, 0xff, cn * sizeof(OutT))); // NaN in every output type
  auto kern = k_plain<Cfg, T, KN, OutT, BiasT>;
  allow_smem(kern, Cfg::smem_bytes);
  kern<<<ctas, Cfg::threads, Cfg::smem_bytes>>>(dA, h.lda, dB, h.ldb, dC + (size_t)h.G * h.ldc, h.ldc, dbias, cs.M, cs.N, cs.K, tm, nt);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  h.C.resize(cn);
  CK(cudaMemcpy(h.C.data(), dC, cn * sizeof(OutT), cudaMemcpyDeviceToHost));
  char name[256];
  snprintf(name, sizeof name, "%s %s->%s B=%s%s%s M=%d N=%d K=%d lda=%d ldb=%d grid=%d%s", cname, ty<T>::name(), ty<OutT>::name(), KN ? "KxN" : "NxK",
           cs.bias ? " bias:" : "", cs.bias ? ty<BiasT>::name() : "", cs.M, cs.N, cs.K, h.lda, h.ldb, ctas, ctas < nt ? " (persistent)" : "");
  const std::string err = h.check(cs.sampled);
  report(name, err.empty(), err);
  CK(cudaFree(dA));
  CK(cudaFree(dB));
  CK(cudaFree(dC));
  if (dbias) CK(cudaFree(dbias));
}

template <class Cfg, typename T, bool KN, typename OutT> static void run_gate(const char *cname, int M, int N, int K, int grid, uint64_t seed) {
  Host<T, OutT> h;
  h.init(M, N, K, KN, true, seed);
  const int nt = (M + Cfg::BM - 1) / Cfg::BM, ctas = cta_count<Cfg>(nt, grid), nk = (K + Cfg::BK - 1) / Cfg::BK, cap = nk + 4;
  if (N > Cfg::BN) {
    fprintf(stderr, "run_gate: N must be <= BN\n");
    exit(1);
  }
  std::vector<T> poison(h.A.size(), ty<T>::from(NAN));
  T *dAsrc = to_dev(h.A), *dA = to_dev(poison), *dB = to_dev(h.B), *dbias = to_dev(h.bias);
  int *dlog, *dcount, *derrs;
  CK(cudaMalloc(&dlog, (size_t)nt * cap * sizeof(int)));
  CK(cudaMalloc(&dcount, nt * sizeof(int)));
  CK(cudaMalloc(&derrs, sizeof(int)));
  CK(cudaMemset(dlog, 0xff, (size_t)nt * cap * sizeof(int)));
  CK(cudaMemset(dcount, 0, nt * sizeof(int)));
  CK(cudaMemset(derrs, 0, sizeof(int)));
  OutT *dC;
  const size_t cn = (size_t)(M + 2 * h.G) * h.ldc;
  CK(cudaMalloc(&dC, cn * sizeof(OutT)));
  CK(cudaMemset(dC, 0xff, cn * sizeof(OutT)));
  auto kern = k_gate<Cfg, T, KN, OutT>;
  allow_smem(kern, Cfg::smem_bytes);
  kern<<<ctas, Cfg::threads, Cfg::smem_bytes>>>(dAsrc, dA, h.lda, dB, h.ldb, dC + (size_t)h.G * h.ldc, h.ldc, dbias, M, N, K, nt, dlog, dcount, cap,
                                                derrs);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  h.C.resize(cn);
  CK(cudaMemcpy(h.C.data(), dC, cn * sizeof(OutT), cudaMemcpyDeviceToHost));
  std::vector<int> log((size_t)nt * cap), count(nt);
  int errs = 0;
  CK(cudaMemcpy(log.data(), dlog, log.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(count.data(), dcount, count.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&errs, derrs, sizeof(int), cudaMemcpyDeviceToHost));
  std::string err = h.check(false);
  char buf[256];
  if (errs) {
    snprintf(buf, sizeof buf, " %d wait_k calls with a k0 that differs across the threads;", errs);
    err += buf;
  }
  for (int t = 0; t < nt; ++t) {
    bool seq = count[t] == nk;
    for (int i = 0; i < nk && seq; ++i) seq = log[(size_t)t * cap + i] == i * Cfg::BK;
    if (!seq) {
      snprintf(buf, sizeof buf, " tile %d: %d wait_k calls, want %d with k0 = 0, %d, ... in order;", t, count[t], nk, Cfg::BK);
      err += buf;
      break;
    }
  }
  char name[256];
  snprintf(name, sizeof name, "%s wait_k %s->%s B=%s bias M=%d N=%d K=%d grid=%d: every k0 < K waited for, in order, before its A loads", cname,
           ty<T>::name(), ty<OutT>::name(), KN ? "KxN" : "NxK", M, N, K, ctas);
  report(name, err.empty(), err);
  CK(cudaFree(dAsrc));
  CK(cudaFree(dA));
  CK(cudaFree(dB));
  CK(cudaFree(dC));
  CK(cudaFree(dbias));
  CK(cudaFree(dlog));
  CK(cudaFree(dcount));
  CK(cudaFree(derrs));
}

#if !defined(GCT_HIP)
template <typename T> static int is_f16() { return std::is_same<T, __half>::value ? 1 : 0; }
// GCT_MAX_MNK=<n>: the TMA cases with M*N*K <= n only (small ones still cover persistent
// CTAs, several tiles each, and the ping-pong order; for the slowest sanitizer tools)
static bool wanted_size(long long M, long long N, long long K) {
  const char *e = getenv("GCT_MAX_MNK");
  return !e || !*e || M * N * K <= atoll(e);
}
// a TMA-core kernel on ctas CTAs, in clusters of Cfg::CLUSTER
template <class Cfg, typename... Exp, typename... Act> static void launch_tma(void (*kern)(Exp...), int ctas, Act &&...args) {
  cudaLaunchConfig_t lc = {};
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = Cfg::CLUSTER;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  lc.gridDim = dim3(ctas);
  lc.blockDim = dim3(Cfg::threads);
  lc.dynamicSmemBytes = Cfg::smem_bytes;
  lc.attrs = at;
  lc.numAttrs = Cfg::CLUSTER > 1 ? 1 : 0;
  CK(cudaLaunchKernelEx(&lc, kern, std::forward<Act>(args)...));
}
template <class Cfg, typename T, bool KN, typename OutT, typename BiasT = T> static void run_tma(const char *cname, const Case &cs, uint64_t seed, int reps = 1) {
  if (!wanted_size(cs.M, cs.N, cs.K)) return;
  Host<T, OutT, BiasT> h;
  h.init(cs.M, cs.N, cs.K, KN, cs.bias, seed);
  // tiles of the schedule: clusters of Cfg::CLUSTER vertically adjacent tiles
  const int bmc = Cfg::BM * Cfg::CLUSTER, tm = (cs.M + bmc - 1) / bmc, tn = (cs.N + Cfg::BN - 1) / Cfg::BN, nt = tm * tn,
            ctas = cta_count<Cfg>(nt, cs.grid) * Cfg::CLUSTER;
  T *dA = to_dev(h.A), *dB = to_dev(h.B), *dummy = nullptr;
  BiasT *dbias = to_dev(h.bias);
  CK(cudaMalloc(&dummy, 4096));
  OutT *dC;
  const size_t cn = (size_t)(cs.M + 2 * h.G) * h.ldc;
  CK(cudaMalloc(&dC, cn * sizeof(OutT)));
  CK(cudaMemset(dC, 0xff, cn * sizeof(OutT)));
  CUtensorMap ta, tb; // K == 0: maps of a dummy buffer, never read
  if (cs.K) {
    CK(iris_gemm_tma_map(&ta, dA, is_f16<T>(), cs.M, cs.K, h.lda, Cfg::BM));
    CK(iris_gemm_tma_map_b<Cfg>(&tb, dB, is_f16<T>(), KN, cs.K, cs.N, h.ldb));
  } else {
    CK(iris_gemm_tma_map(&ta, dummy, is_f16<T>(), 8, 8, 8, Cfg::BM));
    CK(iris_gemm_tma_map(&tb, dummy, is_f16<T>(), 8, 8, 8, 64));
  }
  auto kern = k_tma<Cfg, T, KN, OutT, BiasT>;
  allow_smem(kern, Cfg::smem_bytes);
  const TmaSched sc = {tm, nt, bmc, Cfg::BN, Cfg::CLUSTER};
  launch_tma<Cfg>(kern, ctas, ta, tb, dC + (size_t)h.G * h.ldc, h.ldc, dbias, cs.M, cs.N, cs.K, sc, reps);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  h.C.resize(cn);
  CK(cudaMemcpy(h.C.data(), dC, cn * sizeof(OutT), cudaMemcpyDeviceToHost));
  char name[256];
  snprintf(name, sizeof name, "%s %s->%s B=%s%s%s M=%d N=%d K=%d lda=%d ldb=%d grid=%d%s%s", cname, ty<T>::name(), ty<OutT>::name(), KN ? "KxN" : "NxK",
           cs.bias ? " bias:" : "", cs.bias ? ty<BiasT>::name() : "", cs.M, cs.N, cs.K, h.lda, h.ldb, ctas, ctas < nt * Cfg::CLUSTER ? " (persistent)" : "",
           reps > 1 ? " x3 calls" : "");
  const std::string err = h.check(cs.sampled);
  report(name, err.empty(), err);
  CK(cudaFree(dA));
  CK(cudaFree(dB));
  CK(cudaFree(dC));
  CK(cudaFree(dummy));
  if (dbias) CK(cudaFree(dbias));
}
template <class Cfg, typename T, bool KN, typename OutT> static void run_tma_gate(const char *cname, int M, int N, int K, int grid, uint64_t seed) {
  if (!wanted_size(M, N, K)) return;
  Host<T, OutT> h;
  h.init(M, N, K, KN, true, seed);
  // nt: 128-row tiles (one per producer's wait_a sequence); a cluster's second CTA past M
  // still waits (its rows read as zeros): logs for every CTA's tile, checked for real ones
  const int bmc = Cfg::BM * Cfg::CLUSTER, ntc = (M + bmc - 1) / bmc, nt = (M + Cfg::BM - 1) / Cfg::BM, nlog = ntc * Cfg::CLUSTER;
  const int ctas = cta_count<Cfg>(ntc, grid) * Cfg::CLUSTER, nk = (K + 63) / 64, cap = nk + 4;
  if (N > Cfg::BN) {
    fprintf(stderr, "run_tma_gate: N must be <= BN\n");
    exit(1);
  }
  std::vector<T> poison(h.A.size(), ty<T>::from(NAN));
  T *dAsrc = to_dev(h.A), *dA = to_dev(poison), *dB = to_dev(h.B), *dbias = to_dev(h.bias);
  int *dlog, *dcount;
  CK(cudaMalloc(&dlog, (size_t)nlog * cap * sizeof(int)));
  CK(cudaMalloc(&dcount, nlog * sizeof(int)));
  CK(cudaMemset(dlog, 0xff, (size_t)nlog * cap * sizeof(int)));
  CK(cudaMemset(dcount, 0, nlog * sizeof(int)));
  OutT *dC;
  const size_t cn = (size_t)(M + 2 * h.G) * h.ldc;
  CK(cudaMalloc(&dC, cn * sizeof(OutT)));
  CK(cudaMemset(dC, 0xff, cn * sizeof(OutT)));
  CUtensorMap ta, tb;
  CK(iris_gemm_tma_map(&ta, dA, is_f16<T>(), M, K, h.lda, Cfg::BM));
  CK(iris_gemm_tma_map_b<Cfg>(&tb, dB, is_f16<T>(), KN, K, N, h.ldb));
  auto kern = k_tma_gate<Cfg, T, KN, OutT>;
  allow_smem(kern, Cfg::smem_bytes);
  const TmaSched sc = {ntc, ntc, bmc, Cfg::BN, Cfg::CLUSTER};
  const TmaGate<T> gate = {dAsrc, dA, h.lda, M, K, Cfg::BM, cap, dlog, dcount};
  launch_tma<Cfg>(kern, ctas, ta, tb, dC + (size_t)h.G * h.ldc, h.ldc, dbias, M, N, K, sc, gate);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  h.C.resize(cn);
  CK(cudaMemcpy(h.C.data(), dC, cn * sizeof(OutT), cudaMemcpyDeviceToHost));
  std::vector<int> log((size_t)nlog * cap), count(nlog);
  CK(cudaMemcpy(log.data(), dlog, log.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(count.data(), dcount, count.size() * sizeof(int), cudaMemcpyDeviceToHost));
  std::string err = h.check(false);
  char buf[256];
  for (int t = 0; t < nt; ++t) {
    bool seq = count[t] == nk;
    for (int i = 0; i < nk && seq; ++i) seq = log[(size_t)t * cap + i] == i * 64;
    if (!seq) {
      snprintf(buf, sizeof buf, " tile %d: %d wait_a calls, want %d with k0 = 0, 64, ... in order;", t, count[t], nk);
      err += buf;
      break;
    }
  }
  char name[256];
  snprintf(name, sizeof name, "%s wait_a %s->%s B=%s bias M=%d N=%d K=%d grid=%d: every slab waited for, in order, before its TMA", cname, ty<T>::name(),
           ty<OutT>::name(), KN ? "KxN" : "NxK", M, N, K, ctas);
  report(name, err.empty(), err);
  CK(cudaFree(dAsrc));
  CK(cudaFree(dA));
  CK(cudaFree(dB));
  CK(cudaFree(dC));
  CK(cudaFree(dbias));
  CK(cudaFree(dlog));
  CK(cudaFree(dcount));
}
template <class Cfg, bool KN> static void tma_layout_cases(const char *cname, bool quick, uint64_t &seed) {
  if (!wanted_cfg(cname)) return;
  const Case odd = {1000, 777, 520, true, 0, true}, tiny = {1, 8, 8, false, 0, false}, pers = {300, 530, 264, true, 3, false},
             one = {Cfg::BM, Cfg::BN, 64, false, 0, false}, big = {4096, 3584, 1024, true, 132, true}, kzero = {37, 50, 0, true, 0, false},
             wrap = {700, 1100, 1000, false, 5, false}; // 6 x 5 tiles on 5 CTAs, 16 slabs each: every ring phase reused many times
  run_tma<Cfg, bf16_t, KN, bf16_t>(cname, odd, ++seed);
  run_tma<Cfg, bf16_t, KN, bf16_t>(cname, tiny, ++seed);
  run_tma<Cfg, bf16_t, KN, bf16_t>(cname, pers, ++seed);
  run_tma<Cfg, bf16_t, KN, bf16_t>(cname, wrap, ++seed, 3);
  run_tma<Cfg, __half, KN, __half>(cname, odd, ++seed);
  run_tma<Cfg, __half, KN, __half>(cname, one, ++seed);
  run_tma<Cfg, bf16_t, KN, float, float>(cname, pers, ++seed);
  run_tma<Cfg, bf16_t, KN, float>(cname, tiny, ++seed);
  run_tma<Cfg, bf16_t, KN, bf16_t>(cname, kzero, ++seed);
  run_tma<Cfg, __half, KN, float, float>(cname, odd, ++seed);
  if (!quick) run_tma<Cfg, bf16_t, KN, bf16_t>(cname, big, ++seed);
  run_tma_gate<Cfg, bf16_t, KN, bf16_t>(cname, 777, Cfg::BN - 3, 1000, 0, ++seed);
  run_tma_gate<Cfg, __half, KN, float>(cname, 1000, Cfg::BN / 2 + 1, 200, 3, ++seed);
}
// iris_gemm_tma_map refuses what TMA cannot describe, without touching the map
static void tma_map_refusals() {
  void *d;
  CK(cudaMalloc(&d, 1 << 20));
  CUtensorMap m;
  memset(&m, 0x5a, sizeof m);
  const char *c = (const char *)d;
  const cudaError_t e[6] = {iris_gemm_tma_map(&m, c + 8, 0, 64, 64, 64, 128), iris_gemm_tma_map(&m, c, 0, 64, 64, 60, 128),
                            iris_gemm_tma_map(&m, c, 0, 64, 64, 68, 128),     iris_gemm_tma_map(&m, c, 0, 0, 64, 64, 128),
                            iris_gemm_tma_map(&m, c, 0, 64, 64, 64, 300),    iris_gemm_tma_map(&m, nullptr, 0, 64, 64, 64, 128)};
  bool untouched = true;
  for (size_t i = 0; i < sizeof m; ++i) untouched = untouched && ((const unsigned char *)&m)[i] == 0x5a;
  bool all = untouched;
  for (int i = 0; i < 6; ++i) all = all && e[i] == cudaErrorInvalidValue;
  const cudaError_t ok = iris_gemm_tma_map(&m, c, 0, 64, 64, 64, 128);
  report("iris_gemm_tma_map: misaligned base, ld < cols, ld*2 not a multiple of 16, no rows, box over 256 rows, null base: "
         "cudaErrorInvalidValue, map untouched; a valid map: cudaSuccess",
         all && ok == cudaSuccess, all ? "the valid map failed" : "a bad shape was accepted or the map was written");
  CK(cudaFree(d));
}
#endif

template <class Cfg, bool KN> static void layout_cases(const char *cname, bool quick, uint64_t &seed) {
  const Case odd = {1000, 777, 520, true, 0, true}, tiny = {1, 8, 8, false, 0, false}, pers = {300, 530, 264, true, 3, false},
             one = {Cfg::BM, Cfg::BN, 64, false, 0, false}, big = {4096, 3584, 1024, true, 0, true}, kzero = {37, 50, 0, true, 0, false};
  run_plain<Cfg, bf16_t, KN, bf16_t>(cname, odd, ++seed);
  run_plain<Cfg, bf16_t, KN, bf16_t>(cname, tiny, ++seed);
  run_plain<Cfg, bf16_t, KN, bf16_t>(cname, pers, ++seed);
  run_plain<Cfg, __half, KN, __half>(cname, odd, ++seed);
  run_plain<Cfg, __half, KN, __half>(cname, one, ++seed);
  run_plain<Cfg, bf16_t, KN, float, float>(cname, pers, ++seed); // bias in the output type
  run_plain<Cfg, bf16_t, KN, float>(cname, tiny, ++seed);
  run_plain<Cfg, bf16_t, KN, bf16_t>(cname, kzero, ++seed); // C = bias
  run_plain<Cfg, __half, KN, float, float>(cname, odd, ++seed);
  if (!quick) run_plain<Cfg, bf16_t, KN, bf16_t>(cname, big, ++seed);
  run_gate<Cfg, bf16_t, KN, bf16_t>(cname, 777, Cfg::BN - 3, 1000, 0, ++seed);
  run_gate<Cfg, __half, KN, float>(cname, 1000, Cfg::BN / 2 + 1, 200, 3, ++seed);
}
template <class Cfg> static void cfg_cases(const char *cname, bool quick, uint64_t &seed) {
  if (!wanted_cfg(cname)) return;
  layout_cases<Cfg, true>(cname, quick, seed);
  layout_cases<Cfg, false>(cname, quick, seed);
}

#if defined(GCT_HIP)
int main(int argc, char **argv) {
  const bool quick = argc > 1 && !strcmp(argv[1], "quick");
  int dev = 0;
  hipDeviceProp_t prop;
  CK(cudaGetDevice(&dev));
  CK(hipGetDeviceProperties(&prop, dev));
  if (strncmp(prop.gcnArchName, "gfx90a", 6) != 0 && strncmp(prop.gcnArchName, "gfx94", 5) != 0) {
    printf("FAIL: device: %s, this program is built for gfx90a and gfx940 (MI200, MI300)\n", prop.gcnArchName);
    return 1;
  }
  printf("INFO: MFMA core on %s (internal/gemm/core_mfma.h: UNVERIFIED until this program passes on AMD hardware)\n", prop.gcnArchName);
  uint64_t seed = 0x1234;
  cfg_cases<iris_gemm_cfg_mfma_large>("mfma_large(128x128x32)", quick, seed);
  cfg_cases<iris_gemm_cfg_mfma_small>("mfma_small(64x128x64)", quick, seed);
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
#else
int main(int argc, char **argv) {
  const bool quick = argc > 1 && !strcmp(argv[1], "quick");
  int dev = 0, major = 0, minor = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (major != 9 || minor != 0) {
    printf("FAIL: device: compute capability %d.%d, this program is built for sm_90 / sm_90a\n", major, minor);
    return 1;
  }
  int *dflag, wg = 0;
  CK(cudaMalloc(&dflag, sizeof(int)));
  k_wgmma_compiled<<<1, 1>>>(dflag);
  CK(cudaMemcpy(&wg, dflag, sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaFree(dflag));
  printf("INFO: wgmma core %s (iris_gemm_cfg_wgmma_* %s)\n", wg ? "compiled (sm_90a)" : "not compiled (no sm_90a device pass)",
         wg ? "use wgmma" : "run the mma.sync fallback");
  uint64_t seed = 0x1234;
  cfg_cases<iris_gemm_cfg_large>("large(mma 128x256x64)", quick, seed);
  cfg_cases<iris_gemm_cfg_medium>("medium(mma 128x128x32)", quick, seed);
  cfg_cases<iris_gemm_cfg_small>("small(mma 64x128x64)", quick, seed);
  cfg_cases<iris_gemm_cfg_wgmma_large>("wgmma_large(128x256x64)", quick, seed);
  cfg_cases<iris_gemm_cfg_wgmma_small>("wgmma_small(64x128x64)", quick, seed);
  CK(cudaMalloc(&dflag, sizeof(int)));
  k_tma_compiled<<<1, 1>>>(dflag);
  CK(cudaMemcpy(&wg, dflag, sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaFree(dflag));
  if (!wg) {
    printf("FAIL: the TMA core was not compiled (no sm_90a device pass): build with -arch=sm_90a\n");
    g_fail++;
  } else {
    tma_map_refusals();
    tma_layout_cases<iris_gemm_cfg_tma_large, true>("tma_large(128x256)", quick, seed);
    tma_layout_cases<iris_gemm_cfg_tma_large, false>("tma_large(128x256)", quick, seed);
    tma_layout_cases<iris_gemm_tma_cfg<128, 3>, true>("tma 128x128 s3", quick, seed);
    tma_layout_cases<iris_gemm_tma_cfg<128, 3>, false>("tma 128x128 s3", quick, seed);
    tma_layout_cases<iris_gemm_cfg_tma_pingpong, true>("tma_pingpong(128x128 s6)", quick, seed);
    tma_layout_cases<iris_gemm_cfg_tma_pingpong, false>("tma_pingpong(128x128 s6)", quick, seed);
    tma_layout_cases<iris_gemm_tma_cfg<128, 5, true>, true>("tma pingpong 128x128 s5", quick, seed);
    tma_layout_cases<iris_gemm_cfg_tma_pingpong_c2, true>("tma_pingpong_c2(2 x 128x128 s6, B multicast)", quick, seed);
    tma_layout_cases<iris_gemm_cfg_tma_pingpong_c2, false>("tma_pingpong_c2(2 x 128x128 s6, B multicast)", quick, seed);
    tma_layout_cases<iris_gemm_tma_cfg<256, 4, false, 2>, true>("tma coop c2(2 x 128x256 s4, B multicast)", quick, seed);
  }
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
#endif
