// Shared by the GEMM tests (gemm_test, gemm_rs_test): deterministic random inputs that host
// and device compute alike, rounded to the input type, and conversions to float64 for the
// host references. Include after test_util.h.
#ifndef IRIS_TEST_GEMM_VALUES_H
#define IRIS_TEST_GEMM_VALUES_H
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// values in [-1, 1] with 1/1000 steps, rounded to the input type
__host__ __device__ inline float val(uint64_t seed, int what, long long r, long long c, int call) {
  return (float)((long long)(key(seed, (uint64_t)what, (uint64_t)r, (uint64_t)c, (uint64_t)call) % 2001) - 1000) / 1000.0f;
}
template <typename T> __host__ __device__ inline T to_t(float v);
template <> __host__ __device__ inline __nv_bfloat16 to_t<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __host__ __device__ inline __half to_t<__half>(float v) { return __float2half(v); }
template <> __host__ __device__ inline float to_t<float>(float v) { return v; }
template <typename T> __host__ __device__ inline double to_d(T v);
template <> __host__ __device__ inline double to_d<__nv_bfloat16>(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
template <> __host__ __device__ inline double to_d<__half>(__half v) { return (double)__half2float(v); }
template <> __host__ __device__ inline double to_d<float>(float v) { return (double)v; }

// element (r, c) of the whole A (M x K), B (K x N logical), bias
template <typename T> __host__ __device__ inline T a_at(uint64_t seed, long long r, long long c, int call) { return to_t<T>(val(seed, 1, r, c, call)); }
template <typename T> __host__ __device__ inline T b_at(uint64_t seed, long long k, long long n) { return to_t<T>(val(seed, 2, k, n, 0)); }
template <typename T> __host__ __device__ inline T bias_at(uint64_t seed, long long n) { return to_t<T>(val(seed, 3, 0, n, 0)); }

template <typename C>
__global__ void k_gen_bias(C *bias, long long N, uint64_t seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < N; i += (long long)gridDim.x * blockDim.x) bias[i] = bias_at<C>(seed, i);
}

// fp8 e4m3 inputs: random codes of modest magnitude (|x| in [0.25, 3.75], or 0), decoded
// exactly on the host by iris_fp8_e4m3_to_float
struct f8 {
  unsigned char bits;
};
__host__ __device__ inline f8 f8_code(uint64_t h) {
  f8 v;
  v.bits = (h >> 24) % 16 == 0 ? 0 : (unsigned char)((h & 0x80) | ((5 + (h >> 8) % 4) << 3) | ((h >> 16) & 7));
  return v;
}
template <> __host__ __device__ inline double to_d<f8>(f8 v) { return (double)iris_fp8_e4m3_to_float(v.bits); }
template <> __host__ __device__ inline f8 a_at<f8>(uint64_t seed, long long r, long long c, int call) { return f8_code(key(seed, 1, (uint64_t)r, (uint64_t)c, (uint64_t)call)); }
template <> __host__ __device__ inline f8 b_at<f8>(uint64_t seed, long long k, long long n) { return f8_code(key(seed, 2, (uint64_t)k, (uint64_t)n, 0)); }
// per-tensor scales for call `call` (GEMM + reduce-scatter: rank q's; all-gather + GEMM: q = 0): a_scale in [0.5, 1.5), b_scale in [0.125, 1.125)
__host__ __device__ inline float scale_at(uint64_t seed, int which, int q, int call) {
  return (which ? 0.125f : 0.5f) + (float)(key(seed, 5 + (uint64_t)which, (uint64_t)q, (uint64_t)call, 0) % 1024) / 1024.0f;
}
// int32 inputs of the all-reduces the streams tests run beside the GEMMs: rank's element i
// of round `call`, and the sum over W ranks the all-reduce must give
__global__ void k_gen_int(int *p, size_t n, uint64_t seed, int rank, int call) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (int)(key(seed, 9, rank, call, i) % 1001) - 500;
}
static inline int int_sum(uint64_t seed, int W, int call, size_t i) {
  long long want = 0;
  for (int q = 0; q < W; q++) want += (long long)(key(seed, 9, q, call, i) % 1001) - 500;
  return (int)want;
}

static const char *tname(iris_dtype_t t) { return t == IRIS_BFLOAT16 ? "bf16" : t == IRIS_FLOAT16 ? "fp16" : t == IRIS_FLOAT8_E4M3 ? "e4m3" : "fp32"; }

// The wrap parts' start (gemm_test, gemm_rs_test): IRIS_GEMM_TEST_WRAP=n, 1 <= n < iters, so
// that a plan's iters calls cross epoch 0xffffffff -> 0 -> 1. Unset: false, and a SKIP line
// where the part was asked for by name; out of range: false, and a FAIL. Else true, n, and
// the cases' label suffix naming the epochs.
static bool gemm_wrap_start(Suite &s, bool asked, int iters, int &n, std::string &extra) {
  const char *v = getenv("IRIS_GEMM_TEST_WRAP");
  if (!v) {
    if (asked && s.rank == 0) printf("SKIP: [%s] wrap-around part: IRIS_GEMM_TEST_WRAP is not set (tests/run.sh runs it with 6)\n", s.tag.c_str());
    return false;
  }
  n = atoi(v);
  if (n < 1 || n > iters - 1) {
    if (s.rank == 0) fprintf(stderr, "IRIS_GEMM_TEST_WRAP=%s: give 1..%d, so that %d calls cross epoch 0xffffffff -> 0 -> 1\n", v, iters - 1, iters);
    report(s, "wrap-around: IRIS_GEMM_TEST_WRAP within the calls of a plan", false);
    return false;
  }
  char buf[120];
  snprintf(buf, sizeof buf, ", epochs 0x%08x..%u across the wrap (IRIS_GEMM_TEST_WRAP=%d)", 0u - (unsigned)n + 1u, (unsigned)(iters - n), n);
  extra = buf;
  return true;
}

#endif
