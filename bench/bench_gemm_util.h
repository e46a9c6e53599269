// Shared by the GEMM benchmarks (bench_ag_gemm, bench_gemm_rs): NCCL and cuBLAS status
// checks, the process-wide context, stream, NCCL communicator and cuBLAS handle, random
// bf16 fill, the timing loop (median per rank, max over ranks), a row-major cuBLAS GEMM,
// and the BENCH_* list parsing. Include after iris_gemm.h (or iris_gemm_reduce.h).
#ifndef IRIS_BENCH_GEMM_UTIL_H
#define IRIS_BENCH_GEMM_UTIL_H
#include "bench_util.h"

#include <algorithm>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <nccl.h>
#include <string.h>
#include <string>
#include <vector>

#define NK(x)                                                                                                           \
  do {                                                                                                                  \
    ncclResult_t r_ = (x);                                                                                              \
    if (r_ != ncclSuccess) { fprintf(stderr, "bench: %s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); exit(1); } \
  } while (0)
#define BK(x)                                                                                          \
  do {                                                                                                 \
    cublasStatus_t r_ = (x);                                                                           \
    if (r_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "bench: %s:%d %s: %d\n", __FILE__, __LINE__, #x, (int)r_); exit(1); } \
  } while (0)

static iris_t *ctx;
static int W, rank_;
static cudaStream_t stream;
static ncclComm_t comm;
static cublasHandle_t blas;

__global__ void k_fill(__nv_bfloat16 *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2bfloat16((float)((int)(h % 2001) - 1000) / 1000.0f); // random, never zeros
  }
}

// median over reps of one op's time (ms), max over ranks
template <typename F>
static double time_op(F op, int reps) {
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto &e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < 3; i++) op(); // warm-up
  CK(cudaStreamSynchronize(stream));
  IK(iris_barrier(ctx));
  for (int i = 0; i < reps; i++) {
    CK(cudaEventRecord(ev[2 * i], stream));
    op();
    CK(cudaEventRecord(ev[2 * i + 1], stream));
  }
  CK(cudaStreamSynchronize(stream));
  std::vector<float> t(reps);
  for (int i = 0; i < reps; i++) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  for (auto &e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  double med = t[reps / 2], all[IRIS_MAX_RANKS], mx = 0;
  IK(iris_allgather_host(ctx, &med, all, sizeof med));
  for (int r = 0; r < W; r++) mx = std::max(mx, all[r]);
  return mx;
}

// row-major C (M x N) = A (M x K) * B (K x N), as column-major C^T = B^T A^T
static void gemm(const __nv_bfloat16 *a, const __nv_bfloat16 *b, __nv_bfloat16 *c, long long M, long long N, long long K) {
  const float one = 1.f, zero = 0.f;
  BK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, b, CUDA_R_16BF, (int)N, a, CUDA_R_16BF, (int)K, &zero, c, CUDA_R_16BF, (int)N,
                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static std::vector<std::string> split(const char *s) {
  std::vector<std::string> v;
  if (!s || !*s) return v;
  std::string cur;
  for (const char *p = s;; p++) {
    if (*p == ',' || !*p) { if (!cur.empty()) v.push_back(cur); cur.clear(); if (!*p) break; }
    else cur += *p;
  }
  return v;
}
static bool wanted(const std::vector<std::string> &v, const std::string &x) { return v.empty() || std::find(v.begin(), v.end(), x) != v.end(); }

// random e4m3 codes, |x| in [0.25, 3.75]
__global__ void k_fill_fp8(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = (unsigned char)((h & 0x80) | ((5 + (h >> 8) % 4) << 3) | ((h >> 16) & 7));
  }
}

// the fp8 baseline: row-major C (M x N, bf16) = (a_scale A) (M x K, e4m3) * (b_scale B)^T
// (B N x K, e4m3), as the column-major C^T = B^T A^T in cuBLASLt's "TN" layout
struct LtFp8 {
  cublasLtHandle_t lt;
  void *ws;
  size_t ws_bytes;
};
static LtFp8 lt8;
static void fp8_gemm(const void *a, const void *b, const float *a_scale, const float *b_scale, __nv_bfloat16 *c, long long M, long long N, long long K) {
  static long long cM = -1, cN = -1, cK = -1;
  static cublasLtMatmulDesc_t op;
  static cublasLtMatrixLayout_t la, lb, lc;
  static cublasLtMatmulAlgo_t algo;
  if (M != cM || N != cN || K != cK) { // prepared once per shape
    if (cM >= 0) { cublasLtMatmulDescDestroy(op); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(lc); }
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    BK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    BK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    BK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)N, K));
    BK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)M, K));
    BK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, (uint64_t)N, (uint64_t)M, N));
    BK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale, sizeof b_scale));
    BK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof a_scale));
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    BK(cublasLtMatmulPreferenceCreate(&pref));
    BK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt8.ws_bytes, sizeof lt8.ws_bytes));
    BK(cublasLtMatmulAlgoGetHeuristic(lt8.lt, op, la, lb, lc, lc, pref, 1, &res, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found < 1) { fprintf(stderr, "bench: cuBLASLt has no fp8 algorithm for %lld x %lld x %lld\n", M, N, K); exit(1); }
    algo = res.algo;
    cM = M; cN = N; cK = K;
  }
  const float one = 1.f, zero = 0.f;
  BK(cublasLtMatmul(lt8.lt, op, &one, b, la, a, lb, &zero, c, lc, c, lc, &algo, lt8.ws, lt8.ws_bytes, stream));
}

#endif
