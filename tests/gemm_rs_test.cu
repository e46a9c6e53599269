// GEMM + reduce-scatter and GEMM + all-reduce (iris_gemm_reduce.h): both ops, every path
// (pipelined, unfused, fused),
// bf16/fp16 inputs and fp8 e4m3 inputs with per-tensor scales, bf16/fp16/fp32 outputs, B in both layouts, bias, shapes that are not
// tile multiples and 1 to 129 rows per rank, against a float64 host reference on fresh
// random data. C is poisoned (NaN bits) before each run and every element must be
// written; the all-reduce's C must be bitwise the same on every rank. Also: graph
// replays with fresh A, hundreds of back-to-back calls without a host barrier, and bad
// input (every rank gets the stated status, the heap is left as it was), host memory
// short for a plan on one rank (IRIS_TEST_HOOKS).
//   gemm_rs_test N         N processes (iris_launch_local), device = rank % GPUs
//   gemm_rs_test N quick   fewer cases
//   gemm_rs_test N streams only the two-stream cases: GEMM + reduce runs and all-reduces on
//                          two streams with no dependency between them
//   gemm_rs_test N wrap    with IRIS_GEMM_TEST_WRAP=n (1..11): the fused path's epochs cross
//                          0xffffffff -> 0 -> 1 (without it: a SKIP line)
//   gemm_rs_test N refused a run refused on rank 1 only (bad arguments), both ops, every
//                          path: every rank's call ends at once (IRIS_WAIT_TIMEOUT_MS=2000 and
//                          the t2 build: a regression shows as a timeout), the peers get
//                          IRIS_ERROR_MISMATCH naming rank 1, rank 1's buffers untouched, the
//                          next run exact; and refusals on every rank alike
//   gemm_rs_test_t2 N stuck  the last rank skips a call: the others' call must end within
//                          2x the wait bound (2 s in this build) with a fault, not hang
// The fused path needs the TMA GEMM core (sm_90a): make build/gemm_rs_test. A faster
// compile of the cuBLASLt paths only: -DGEMM_RS_TEST_NO_CORE (make build/gemm_rs_test_nocore),
// where the fused cases are skipped (SKIP line, not counted).
#define IRIS_IMPLEMENTATION
#define IRIS_TEST_HOOKS // the library's failure injections (a plan's host memory short on one rank)
#if defined(GEMM_RS_TEST_NO_CORE)
#define IRIS_GEMM_NO_CORE
#endif
#include "../iris_gemm_reduce.h"
#include "test_util.h"
#include "gemm_values.h"
#include "host_threads.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <vector>

__global__ void k_gen_scales(float *sc, int me, uint64_t seed, int call) {
  sc[0] = scale_at(seed, 0, me, call);
  sc[1] = scale_at(seed, 1, me, call);
}

// this rank's A_r: columns [me*K/W, (me+1)*K/W) of A, M x K/W
template <typename T>
__global__ void k_gen_a(T *a, long long M, long long kl, int me, uint64_t seed, int call) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < M * kl; i += (long long)gridDim.x * blockDim.x)
    a[i] = a_at<T>(seed, i / kl, me * kl + i % kl, call);
}
// this rank's B_r: rows [me*K/W, (me+1)*K/W) of B; K/W x N, or N x K/W when transposed
template <typename T>
__global__ void k_gen_b(T *b, long long kl, long long N, int transposed, int me, uint64_t seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < kl * N; i += (long long)gridDim.x * blockDim.x) {
    const long long k = transposed ? i % kl : i / N, n = transposed ? i / kl : i % N;
    b[i] = b_at<T>(seed, me * kl + k, n);
  }
}
struct Case {
  iris_gemm_reduce_op_t op;
  iris_dtype_t a, c;
  int bt, bias;
  iris_gemm_path_t path;
  long long M, N, K;
  int iters;     // calls, each with fresh A
  int check_every = 1; // check C of every call (1), or of every n-th call and the last
  int row_step = 1;    // values of every row (1), or of every n-th row and the last (large
                       // shapes; every element is still checked for the poison)
  int exact = 0;       // desc.exact: fp32 partials (1) or partials in the output type (0)
  int wrap = 0;        // IRIS_GEMM_TEST_WRAP's n (the wrap part): the fused plan's flag block is checked at create and after the calls
};

// The wrap part (IRIS_GEMM_TEST_WRAP): whether the fused path's `sync` block holds, word by
// word, what call `epoch` leaves (iris_gemm_rs_flags_after, the words the hook writes at
// create); why names the first word that differs.
static bool flags_are(iris_gemm_rs_t *p, unsigned epoch, std::string &why) {
#if defined(IRIS_GEMM_HAVE_TMA)
  const iris_gemm_rs_fused_dev_t &v = p->fd;
  std::vector<unsigned> want(iris_gemm_rs_flags_after(p, epoch, NULL)), got(want.size());
  iris_gemm_rs_flags_after(p, epoch, want.data());
  if (cudaMemcpy(got.data(), p->sync, got.size() * sizeof(unsigned), cudaMemcpyDeviceToHost) != cudaSuccess) { why = "reading the flag block"; return false; }
  const size_t flags = (size_t)p->W * v.halves * v.tiles_n;
  for (size_t i = 0; i < got.size(); i++) {
    if (got[i] == want[i]) continue;
    char buf[200];
    if (i < flags)
      snprintf(buf, sizeof buf, "flag block: flag (source %zu, 64-row half %zu, n-tile %zu) holds %u, want %u (what call %u leaves)", i / ((size_t)v.halves * v.tiles_n),
               i / v.tiles_n % v.halves, i % v.tiles_n, got[i], want[i], epoch);
    else
      snprintf(buf, sizeof buf, "flag block: %s %zu holds %u, want %u (what call %u leaves)", i < flags + IRIS_GEMM_ERR_WORDS ? "error record word" : "CTA counter",
               i < flags + IRIS_GEMM_ERR_WORDS ? i - flags : i - flags - IRIS_GEMM_ERR_WORDS, got[i], want[i], epoch);
    why = buf;
    return false;
  }
  return true;
#else
  (void)p; (void)epoch;
  why = "no fused path in this build";
  return false;
#endif
}

static const char *oname(iris_gemm_reduce_op_t op) { return op == IRIS_GEMM_ALL_REDUCE ? "all-reduce" : "reduce-scatter"; }

// check this rank's C (host copy) for call `call`: every element written, each within
// tolerance of the float64 reference
template <typename T, typename C>
static bool check_c(Suite &s, const Case &k, const std::vector<C> &h, int call, std::string &why) {
  const long long M = k.M, N = k.N, K = k.K, ml = M / s.world;
  const long long r0 = k.op == IRIS_GEMM_ALL_REDUCE ? 0 : s.rank * ml, rows = k.op == IRIS_GEMM_ALL_REDUCE ? M : ml;
  const int threads = host_threads(s.world);
  if (!host_ranges((size_t)(rows * N), threads, 1 << 16, [&](size_t b, size_t e, std::string &w) {
        for (size_t i = b; i < e; i++)
          if (isnan(to_d<C>(h[i]))) {
            w = "element (" + std::to_string(r0 + (long long)i / N) + ", " + std::to_string(i % N) + ") not written (still NaN poison)";
            return false;
          }
        return true;
      }, why))
    return false;
  // fp8: rank q's slice of K is scaled by its a_scale and b_scale (as floats, as given)
  const bool fp8 = k.a == IRIS_FLOAT8_E4M3;
  const long long kl = K / s.world;
  std::vector<double> bd((size_t)K * N);
  std::string unused;
  host_ranges((size_t)K, threads, 64, [&](size_t b, size_t e, std::string &) {
    for (size_t kk = b; kk < e; kk++) {
      const double bs = fp8 ? (double)scale_at(s.seed, 1, (int)((long long)kk / kl), call) : 1.0;
      for (long long n = 0; n < N; n++) bd[kk * N + n] = bs * to_d<T>(b_at<T>(s.seed, (long long)kk, n));
    }
    return true;
  }, unused);
  const double rel = k.c == IRIS_FLOAT32 ? 1e-5 : k.c == IRIS_FLOAT16 ? 1.0 / 1024 : 1.0 / 128;
  // partials in the output type (exact = 0): each rank's partial P_r is rounded once before
  // the sum, an error of at most u |P_r| (u: the unit roundoff, 2^-8 bf16, 2^-11 fp16)
  // (fp32 partials: exact = 1, fp32 out, mixed 16-bit types, the fused path)
  const bool wire32 = k.exact || k.c == IRIS_FLOAT32 || (k.a != k.c && k.a != IRIS_FLOAT8_E4M3) || k.path == IRIS_GEMM_PATH_FUSED;
  const double u_wire = wire32 ? 0.0 : k.c == IRIS_FLOAT16 ? 1.0 / 2048 : 1.0 / 256;

  // the checked rows on the host's threads, each with its own accumulators
  return host_ranges((size_t)rows, threads, 1, [&](size_t i0, size_t i1, std::string &w) {
    std::vector<double> acc((size_t)N), mag((size_t)N), part((size_t)N), pabs((size_t)N);
    for (long long r = r0 + (long long)i0; r < r0 + (long long)i1; r++) {
      if ((r - r0) % k.row_step && r != r0 + rows - 1) continue;
      for (long long n = 0; n < N; n++) acc[n] = k.bias ? to_d<C>(bias_at<C>(s.seed, n)) : 0.0, mag[n] = 0.0, part[n] = 0.0, pabs[n] = 0.0;
      for (long long kk = 0; kk < K; kk++) {
        const double a = to_d<T>(a_at<T>(s.seed, r, kk, call)) * (fp8 ? (double)scale_at(s.seed, 0, (int)(kk / kl), call) : 1.0);
        const double *b = &bd[(size_t)kk * N];
        for (long long n = 0; n < N; n++) part[n] += a * b[n];
        if (fp8)
          for (long long n = 0; n < N; n++) mag[n] += fabs(a * b[n]);
        if ((kk + 1) % kl == 0) // rank kk / kl's partial is complete
          for (long long n = 0; n < N; n++) acc[n] += part[n], pabs[n] += fabs(part[n]), part[n] = 0.0;
      }
      for (long long n = 0; n < N; n++) {
        const double got = to_d<C>(h[(size_t)(r - r0) * N + n]), want = acc[n];
        // fp8: the fp8 products are exact in fp32, but Hopper's fp8 tensor cores accumulate a
        // block of K with fewer mantissa bits than fp32 (about 14 measured by others) before
        // cuBLASLt promotes the sum to fp32: allow 2^-12 of the sum of |terms|, on top
        const double tol = rel * fabs(want) + u_wire * pabs[n] + 1e-5 * sqrt((double)K) + 1e-6 + (fp8 ? mag[n] / 4096 : 0.0);

        if (!(fabs(got - want) <= tol)) {
          char buf[200];
          snprintf(buf, sizeof buf, "C(%lld, %lld) = %.6f, float64 reference %.6f (tolerance %.2g), call %d", r, n, got, want, tol, call);
          w = buf;
          return false;
        }
      }
    }
    return true;
  }, why);
}

// all-reduce: C must be bitwise the same on every rank (a hash of its bytes, exchanged)
static bool same_everywhere(Suite &s, const void *h, size_t bytes, std::string &why) {
  uint64_t x = 1469598103934665603ULL, all[IRIS_MAX_RANKS];
  for (size_t i = 0; i < bytes; i++) x = (x ^ ((const unsigned char *)h)[i]) * 1099511628211ULL;
  if (iris_allgather_host(s.ctx, &x, all, sizeof x) != IRIS_SUCCESS) { why = iris_error_detail(); return false; }
  for (int q = 0; q < s.world; q++)
    if (all[q] != x) { why = "C differs bitwise from rank " + std::to_string(q) + "'s"; return false; }
  return true;
}

// every rank's verdict: true only where every rank passed
static bool agree(Suite &s, bool ok) {
  int mine = ok ? 1 : 0, all[IRIS_MAX_RANKS];
  if (iris_allgather_host(s.ctx, &mine, all, sizeof mine) != IRIS_SUCCESS) return false;
  for (int q = 0; q < s.world; q++)
    if (!all[q]) return false;
  return true;
}

template <typename T, typename C>
static bool run_case(Suite &s, const Case &k, bool graph, std::string &why) {
  const int W = s.world, me = s.rank;
  const long long kl = k.K / W, rows = k.op == IRIS_GEMM_ALL_REDUCE ? k.M : k.M / W;
  iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
  d.op = k.op; d.M = k.M; d.N = k.N; d.K = k.K; d.a_type = k.a; d.c_type = k.c; d.b_transposed = k.bt; d.has_bias = k.bias; d.path = k.path; d.exact = k.exact;
  iris_gemm_rs_t *p = NULL;
  IK(iris_gemm_rs_create(s.ctx, &d, &p));
  if (k.path != IRIS_GEMM_PATH_AUTO && iris_gemm_rs_path(p) != k.path) { why = "the plan runs another path than asked"; iris_gemm_rs_destroy(p); return false; }
  const bool words = k.wrap && iris_gemm_rs_path(p) == IRIS_GEMM_PATH_FUSED; // the path with a flag block
  if (words) { // the hook wrote every word; the exchange keeps every rank's first call until each rank read its own block
    std::string w;
    const bool mine = flags_are(p, 0u - (unsigned)k.wrap, w);
    if (!agree(s, mine)) {
      why = mine ? "another rank's flag block is not as IRIS_GEMM_TEST_WRAP sets it" : "at create: " + w;
      iris_gemm_rs_destroy(p);
      return false;
    }
  }
  T *a = NULL, *b = NULL;
  C *c = NULL, *bias = NULL;
  float *sc = NULL; // fp8: this rank's a_scale, b_scale (fresh each call)
  const bool fp8 = k.a == IRIS_FLOAT8_E4M3;
  bool ok = true;
  if (fp8) CK(cudaMalloc(&sc, 2 * sizeof(float)));
  CK(cudaMalloc(&a, (size_t)k.M * kl * sizeof(T)));
  CK(cudaMalloc(&b, (size_t)kl * k.N * sizeof(T)));
  CK(cudaMalloc(&c, (size_t)rows * k.N * sizeof(C)));
  if (k.bias) CK(cudaMalloc(&bias, (size_t)k.N * sizeof(C)));
  k_gen_b<T><<<256, 256, 0, s.stream>>>(b, kl, k.N, k.bt, me, s.seed);
  if (k.bias) k_gen_bias<C><<<16, 256, 0, s.stream>>>(bias, k.N, s.seed);
  std::vector<C> h((size_t)rows * k.N);
  cudaGraphExec_t exec = NULL;
  for (int it = 0; it < k.iters && ok; it++) {
    const int call = 7 * it + 3;
    const bool checked = it % k.check_every == 0 || it == k.iters - 1;
    k_gen_a<T><<<512, 256, 0, s.stream>>>(a, k.M, kl, me, s.seed, call);
    if (fp8) k_gen_scales<<<1, 1, 0, s.stream>>>(sc, me, s.seed, call);
    if (checked) CK(cudaMemsetAsync(c, 0xff, h.size() * sizeof(C), s.stream)); // NaN in every output type
    if (me == it % W && it % 3 == 1) { CK(cudaStreamSynchronize(s.stream)); usleep(20000); } // skew the ranks
    if (graph) {
      if (!exec) { // captured once, replayed with the new data each iteration
        cudaGraph_t gr;
        CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
        iris_status_t st = fp8 ? iris_gemm_rs_run_scaled(p, a, b, sc, sc + 1, bias, c, s.stream) : iris_gemm_rs_run(p, a, b, bias, c, s.stream);
        CK(cudaStreamEndCapture(s.stream, &gr));
        IK(st);
        CK(cudaGraphInstantiate(&exec, gr, 0));
        CK(cudaGraphDestroy(gr));
      }
      CK(cudaGraphLaunch(exec, s.stream));
    } else if (fp8) {
      IK(iris_gemm_rs_run_scaled(p, a, b, sc, sc + 1, bias, c, s.stream));
    } else {
      IK(iris_gemm_rs_run(p, a, b, bias, c, s.stream));
    }
    if (!checked) continue; // back to back: no host synchronisation between these calls
    CK(cudaStreamSynchronize(s.stream));
    if (iris_gemm_rs_check(p) != IRIS_SUCCESS || iris_get_async_error(s.ctx) != IRIS_SUCCESS) {
      why = std::string("call ") + std::to_string(it) + ": " + iris_error_detail();
      ok = false;
    } else {
      CK(cudaMemcpy(h.data(), c, h.size() * sizeof(C), cudaMemcpyDeviceToHost));
      ok = check_c<T, C>(s, k, h, call, why);
    }
    // every rank takes part in the exchanges whatever its own verdict, and all stop together
    std::string w2;
    if (k.op == IRIS_GEMM_ALL_REDUCE && !same_everywhere(s, h.data(), h.size() * sizeof(C), w2) && ok) { ok = false; why = w2; }
    if (!agree(s, ok) && ok) { ok = false; why = "call " + std::to_string(it) + " failed on another rank"; }
  }
  // the wrap part: the kernels left every word as the hook models it (this rank's reduce
  // waited for every flag it reads, so the block is final once the stream is)
  if (ok && words) {
    CK(cudaStreamSynchronize(s.stream));
    if (!flags_are(p, 0u - (unsigned)k.wrap + (unsigned)k.iters, why)) {
      why = "after the calls: " + why;
      ok = false;
    }
  }
  if (exec) cudaGraphExecDestroy(exec);
  cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(bias); cudaFree(sc);
  IK(iris_gemm_rs_destroy(p));
  return ok;
}

static bool dispatch(Suite &s, const Case &k, bool graph, std::string &why) {
  if (k.a == IRIS_FLOAT8_E4M3) {
    if (k.c == IRIS_BFLOAT16) return run_case<f8, __nv_bfloat16>(s, k, graph, why);
    if (k.c == IRIS_FLOAT16) return run_case<f8, __half>(s, k, graph, why);
    return run_case<f8, float>(s, k, graph, why);
  }
  if (k.a == IRIS_BFLOAT16) {
    if (k.c == IRIS_BFLOAT16) return run_case<__nv_bfloat16, __nv_bfloat16>(s, k, graph, why);
    if (k.c == IRIS_FLOAT16) return run_case<__nv_bfloat16, __half>(s, k, graph, why);
    return run_case<__nv_bfloat16, float>(s, k, graph, why);
  }
  if (k.c == IRIS_BFLOAT16) return run_case<__half, __nv_bfloat16>(s, k, graph, why);
  if (k.c == IRIS_FLOAT16) return run_case<__half, __half>(s, k, graph, why);
  return run_case<__half, float>(s, k, graph, why);
}

static void one(Suite &s, const Case &k, bool graph, const char *extra = "") {
  std::string why;
  bool ok = dispatch(s, k, graph, why);
  if (!ok) fprintf(stderr, "rank %d: %s\n", s.rank, why.empty() ? iris_error_detail() : why.c_str());
  char name[300];
  snprintf(name, sizeof name, "%s %s%s %s->%s B %s%s, %lldx%lldx%lld (%lld rows per rank), %d call%s%s%s", oname(k.op), iris_gemm_path_name(k.path),
           k.exact ? " exact" : "", tname(k.a), tname(k.c), k.bt ? "NxK" : "KxN", k.bias ? " +bias" : "", k.M, k.N, k.K, k.M / s.world, k.iters,
           k.iters > 1 ? "s (fresh A each)" : "", graph ? ", graph replays" : "", extra);
  report(s, name, ok);
}

// bad input: every rank gets the stated status, nothing is left half-created
static void bad_input(Suite &s) {
  const int W = s.world;
  iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
  iris_gemm_rs_t *p = NULL;
  const size_t used = iris_heap_used(s.ctx);
  bool ok;
  d.M = 64LL * W + (W > 1 ? 1 : 0); d.N = 256; d.K = 64LL * W;
  if (W > 1) {
    ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_INVALID_ARGUMENT && !p && strstr(iris_error_detail(), "M must be divisible");
    report(s, "create refuses M not divisible by the world size (IRIS_ERROR_INVALID_ARGUMENT naming the rule)", ok);
    d.M = 64LL * W; d.K = 64LL * W + 8;
    ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_INVALID_ARGUMENT && !p && strstr(iris_error_detail(), "K must be divisible");
    report(s, "create refuses K not divisible by the world size", ok);
  }
  d.M = 64LL * W; d.K = 12LL * W; // K/W = 12: not a multiple of 8
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_INVALID_ARGUMENT && !p;
  report(s, "create refuses K/W not a multiple of 8", ok);
  d.K = 64LL * W; d.N = 260;
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_INVALID_ARGUMENT && !p;
  report(s, "create refuses N not a multiple of 8", ok);
  d.N = s.rank == W - 1 ? 264 : 256; // the last rank disagrees
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_MISMATCH && !p;
  report(s, "create with a different N on one rank: IRIS_ERROR_MISMATCH on every rank", ok);
  d.N = 256; d.op = s.rank == 0 ? IRIS_GEMM_ALL_REDUCE : IRIS_GEMM_REDUCE_SCATTER;
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == (W > 1 ? IRIS_ERROR_MISMATCH : IRIS_SUCCESS);
  if (p) { iris_gemm_rs_destroy(p); p = NULL; }
  report(s, "create with a different op on rank 0: IRIS_ERROR_MISMATCH on every rank", ok);
  d.op = IRIS_GEMM_REDUCE_SCATTER; d.a_type = IRIS_FLOAT8_E4M3; d.b_transposed = 0;
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_UNSUPPORTED && !p && strstr(iris_error_detail(), "b_transposed = 1");
  report(s, "create refuses fp8 with B K/W x N (cuBLASLt's fp8 GEMM is TN only): IRIS_ERROR_UNSUPPORTED naming the rule", ok);
  d.b_transposed = 1; d.K = 24LL * W; // K/W = 24: a multiple of 8, not of 16
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_INVALID_ARGUMENT && !p && strstr(iris_error_detail(), "multiple of 16");
  report(s, "create refuses fp8 with K/W not a multiple of 16 (IRIS_ERROR_INVALID_ARGUMENT naming the rule)", ok);
  d.K = 64LL * W; d.a_type = IRIS_FLOAT8_E5M2;
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_UNSUPPORTED && !p && strstr(iris_error_detail(), "e5m2");
  report(s, "create refuses fp8 e5m2 inputs with IRIS_ERROR_UNSUPPORTED", ok);
  d.a_type = IRIS_BFLOAT16; d.b_transposed = 0; d.path = IRIS_GEMM_PATH_KERNEL_UNFUSED;
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_UNSUPPORTED && !p;
  report(s, "create refuses the kernel-unfused path (not in this version) with IRIS_ERROR_UNSUPPORTED", ok);
  d.path = IRIS_GEMM_PATH_FUSED;
#if defined(IRIS_GEMM_HAVE_CORE)
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_SUCCESS && p && iris_gemm_rs_path(p) == IRIS_GEMM_PATH_FUSED && iris_gemm_rs_check(p) == IRIS_SUCCESS;
  iris_gemm_rs_destroy(p);
  p = NULL;
  report(s, "create makes a fused plan (sm_90a build on a Hopper GPU); check is clean before any run", ok);
  setenv("IRIS_GEMM_RS_PINGPONG", "yes", 1);
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_INVALID_ARGUMENT && !p && strstr(iris_error_detail(), "IRIS_GEMM_RS_PINGPONG");
  unsetenv("IRIS_GEMM_RS_PINGPONG");
  report(s, "create refuses a malformed IRIS_GEMM_RS_PINGPONG (IRIS_ERROR_INVALID_ARGUMENT naming it)", ok);
  // the core choice (132 SMs): 1024 x 5120 is 160 tiles of 128 x 256 (61% of two waves
  // busy) but 320 of 128 x 128 (81% of three): ping-pong; 4096 x 8192 fills its waves:
  // cooperative, unless K/W <= 2048 (ping-pong hides the fp32 epilogue)
  ok = iris_gemm_rs_choose_pingpong(1024, 5120, 13824, 132, -1) == 1 && iris_gemm_rs_choose_pingpong(4096, 8192, 8192, 132, -1) == 0 &&
       iris_gemm_rs_choose_pingpong(4096, 8192, 1024, 132, -1) == 1 && iris_gemm_rs_choose_pingpong(16384, 5120, 2049, 132, -1) == 0 &&
       iris_gemm_rs_choose_pingpong(1024, 5120, 13824, 132, 0) == 0 && iris_gemm_rs_choose_pingpong(4096, 8192, 8192, 132, 1) == 1 &&
       iris_gemm_rs_choose_pingpong(1024, 5120, 13824, 0, -1) == 0;
  report(s, "the fused GEMM's core choice (ping-pong at K/W <= 2048 and where 128 x 256 tiles leave the last wave mostly idle)", ok);
#else
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_UNSUPPORTED && !p && strstr(iris_error_detail(), "TMA GEMM core");
  report(s, "create refuses the fused path in a build without the GEMM core (IRIS_ERROR_UNSUPPORTED naming it)", ok);
#endif
  // a workspace the heap cannot hold: M x N x 4 bytes beyond the 1 GiB heap
  d.path = IRIS_GEMM_PATH_UNFUSED; d.M = 8192LL * W; d.N = 32768; d.K = 64LL * W;
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_ERROR_OUT_OF_MEMORY && !p && strstr(iris_error_detail(), "bytes");
  report(s, "create with a workspace larger than the heap: IRIS_ERROR_OUT_OF_MEMORY naming the bytes", ok);
  ok = iris_heap_used(s.ctx) == used;
  report(s, "refused creates leave the heap as it was", ok);
  // host memory short for the plan on the last rank only (IRIS_TEST_HOOKS): every rank
  // still reaches each exchange of the create (the fused path's GPU locations, the agreement)
#if defined(IRIS_GEMM_HAVE_CORE)
  for (iris_gemm_path_t path : {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED, IRIS_GEMM_PATH_FUSED}) {
#else
  for (iris_gemm_path_t path : {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED}) {
#endif
    iris_gemm_rs_desc_t h = IRIS_GEMM_RS_DESC_INIT;
    std::string name = std::string("create with host memory short for the plan on the last rank only, path ") + iris_gemm_path_name(path) +
                       ": IRIS_ERROR_OUT_OF_MEMORY there, IRIS_ERROR_MISMATCH naming it elsewhere, within 10 s, the heap as it was; the next create succeeds";
    h.M = 64LL * W; h.N = 256; h.K = 64LL * W; h.path = path;
    report(s, name.c_str(),
           plan_host_memory_short<iris_gemm_rs_t>(s, [&](iris_gemm_rs_t **q) { return iris_gemm_rs_create(s.ctx, &h, q); }, iris_gemm_rs_destroy));
  }
  // run-time checks: nothing is enqueued for a bad call
  d.path = IRIS_GEMM_PATH_AUTO; d.M = 64LL * W; d.N = 256; d.K = 64LL * W;
  __nv_bfloat16 *a = NULL, *b = NULL, *c = NULL;
  ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_SUCCESS;
  ok = ok && cudaMalloc(&a, (size_t)d.M * 64 * 2 + 256) == cudaSuccess && cudaMalloc(&b, (size_t)64 * d.N * 2 + 256) == cudaSuccess &&
       cudaMalloc(&c, (size_t)d.M * d.N * 2 + 256) == cudaSuccess;
  if (ok) {
    ok = iris_gemm_rs_run(p, a, b, c, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT;        // bias the plan does not take
    ok = ok && iris_gemm_rs_run(p, a, b, NULL, c + 1, s.stream) == IRIS_ERROR_INVALID_ARGUMENT; // misaligned C
    ok = ok && iris_gemm_rs_run(p, a + 8, b, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT; // A not 256-byte aligned
    ok = ok && iris_gemm_rs_run(p, a, b + 8, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT; // B not 256-byte aligned
    ok = ok && iris_gemm_rs_run(p, a, NULL, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT;
    ok = ok && iris_gemm_rs_run(NULL, a, b, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT;
  }
  report(s, "run refuses an unexpected bias, a misaligned C, A or B, a NULL B, a NULL plan", ok);
  if (ok) { // C over A or B (written while the GEMM may still read them)
    bool o = iris_gemm_rs_run(p, a, b, NULL, a, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "overlaps A");
    o = o && iris_gemm_rs_run(p, a, b, NULL, b, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "overlaps B");
    report(s, "run refuses a C that overlaps A or B (IRIS_ERROR_INVALID_ARGUMENT naming it)", o);
  }
  // scales: only for fp8 plans, and an fp8 plan needs both (a, b, c serve as 256-byte
  // aligned device buffers of the right sizes for both plans)
  float *sc = NULL;
  ok = ok && cudaMalloc(&sc, 2 * sizeof(float)) == cudaSuccess;
  ok = ok && iris_gemm_rs_run_scaled(p, a, b, sc, sc + 1, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "fp8 inputs only");
  iris_gemm_rs_destroy(p);
  p = NULL;
  report(s, "run_scaled refuses scales for a bf16 plan (IRIS_ERROR_INVALID_ARGUMENT naming the rule)", ok);
  d.a_type = IRIS_FLOAT8_E4M3; d.b_transposed = 1;
  ok = ok && iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_SUCCESS;
  ok = ok && iris_gemm_rs_run(p, a, b, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "iris_gemm_rs_run_scaled");
  ok = ok && iris_gemm_rs_run_scaled(p, a, b, sc, NULL, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "both per-tensor scales");
  ok = ok && iris_gemm_rs_run_scaled(p, a, b, NULL, sc, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT;
  ok = ok && iris_gemm_rs_run_scaled(p, a, b, (const float *)((char *)sc + 2), sc + 1, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT;
  report(s, "an fp8 plan: run and run_scaled without both scales (or a misaligned one) are refused naming the rule", ok);
  {
    iris_gemm_rs_t *f = NULL;
    d.path = IRIS_GEMM_PATH_FUSED;
    ok = iris_gemm_rs_create(s.ctx, &d, &f) == IRIS_ERROR_UNSUPPORTED && !f;
    d.path = IRIS_GEMM_PATH_AUTO;
    report(s, "create refuses fp8 on the fused path (bf16/fp16 only) with IRIS_ERROR_UNSUPPORTED", ok);
  }
  d.a_type = IRIS_BFLOAT16; d.b_transposed = 0;
  cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(sc);
  iris_gemm_rs_destroy(p);
  ok = iris_heap_used(s.ctx) == used && iris_gemm_rs_choose_path(&d, W) == IRIS_GEMM_PATH_UNFUSED; // 64 rows per rank
  d.op = IRIS_GEMM_REDUCE_SCATTER;
  d.M = (long long)IRIS_GEMM_RS_PIPELINE_MIN_ROWS * W;
  ok = ok && iris_gemm_rs_choose_path(&d, W) == (W > 1 ? IRIS_GEMM_PATH_PIPELINED : IRIS_GEMM_PATH_UNFUSED);
  d.op = IRIS_GEMM_ALL_REDUCE; // through iris_all_reduce (no bias, output-type partials): unfused to 512 rows per rank
  ok = ok && iris_gemm_rs_choose_path(&d, W) == IRIS_GEMM_PATH_UNFUSED;
  d.M = (long long)IRIS_GEMM_AR_PIPELINE_MIN_ROWS * W;
  ok = ok && iris_gemm_rs_choose_path(&d, W) == (W > 1 ? IRIS_GEMM_PATH_PIPELINED : IRIS_GEMM_PATH_UNFUSED);
  d.M = (long long)IRIS_GEMM_RS_PIPELINE_MIN_ROWS * W;
  d.has_bias = 1; // the barrier + pull then: pipelined from 256 rows per rank again
  ok = ok && iris_gemm_rs_choose_path(&d, W) == (W > 1 ? IRIS_GEMM_PATH_PIPELINED : IRIS_GEMM_PATH_UNFUSED);
  d.has_bias = 0;
  report(s, "destroy frees the heap workspace; AUTO: pipelined from 256 rows per rank (all-reduce through iris_all_reduce: 512), unfused below and at one rank", ok);
}

// GEMM + reduce-scatter / all-reduce runs and all-reduces of one context issued on two
// streams with no dependency between them (a framework's compute and communication
// streams), swapping streams each round: the library orders a context's calls, so every
// rank's calls pair up. Every call has its own inputs and outputs, made before the first
// call; outputs poisoned; C checked against float64, each all-reduce exactly.
static void streams(Suite &s, const std::vector<iris_gemm_path_t> &paths) {
  const int W = s.world, me = s.rank, rounds = 8;
  const size_t ar_n = 4096;
  cudaStream_t st[2];
  for (auto &x : st) cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
  for (iris_gemm_reduce_op_t op : {IRIS_GEMM_REDUCE_SCATTER, IRIS_GEMM_ALL_REDUCE})
    for (iris_gemm_path_t path : paths) {
      const Case k{op, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 0, path, 96LL * W, 392, 264LL * W, rounds};
      const long long kl = k.K / W, rows = op == IRIS_GEMM_ALL_REDUCE ? k.M : k.M / W;
      iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
      d.op = op; d.M = k.M; d.N = k.N; d.K = k.K; d.b_transposed = 1; d.path = path;
      iris_gemm_rs_t *p = NULL;
      bool ok = iris_gemm_rs_create(s.ctx, &d, &p) == IRIS_SUCCESS;
      std::vector<__nv_bfloat16 *> a(rounds, nullptr), c(rounds, nullptr);
      std::vector<int *> ai(rounds, nullptr), ao(rounds, nullptr);
      __nv_bfloat16 *b = NULL;
      std::string why;
      ok = ok && cudaMalloc(&b, (size_t)kl * k.N * 2) == cudaSuccess;
      for (int r = 0; ok && r < rounds; r++) {
        ok = cudaMalloc(&a[r], (size_t)k.M * kl * 2) == cudaSuccess && cudaMalloc(&c[r], (size_t)rows * k.N * 2) == cudaSuccess &&
             iris_malloc(s.ctx, ar_n * 4, (void **)&ai[r]) == IRIS_SUCCESS && iris_malloc(s.ctx, ar_n * 4, (void **)&ao[r]) == IRIS_SUCCESS;
        if (!ok) break;
        k_gen_a<__nv_bfloat16><<<256, 256>>>(a[r], k.M, kl, me, s.seed, 100 + r);
        k_gen_int<<<16, 256>>>(ai[r], ar_n, s.seed, me, r);
        cudaMemset(c[r], 0xff, (size_t)rows * k.N * 2);
        cudaMemset(ao[r], 0xa5, ar_n * 4);
      }
      if (ok) {
        k_gen_b<__nv_bfloat16><<<256, 256>>>(b, kl, k.N, 1, me, s.seed);
        ok = cudaDeviceSynchronize() == cudaSuccess && iris_barrier(s.ctx) == IRIS_SUCCESS;
      }
      for (int r = 0; ok && r < rounds; r++) { // the GEMM on one stream, the all-reduce on the other, swapping each round
        ok = iris_gemm_rs_run(p, a[r], b, NULL, c[r], st[r % 2]) == IRIS_SUCCESS &&
             iris_all_reduce(s.ctx, ai[r], ao[r], ar_n, IRIS_INT32, IRIS_SUM, st[(r + 1) % 2]) == IRIS_SUCCESS;
        if (me == r % W && r % 3 == 1) usleep(5000); // a little host skew
      }
      ok = ok && cudaDeviceSynchronize() == cudaSuccess;
      if (ok && (iris_gemm_rs_check(p) != IRIS_SUCCESS || iris_get_async_error(s.ctx) != IRIS_SUCCESS)) { why = iris_error_detail(); ok = false; }
      std::vector<__nv_bfloat16> h((size_t)rows * k.N);
      std::vector<int> hi(ar_n);
      for (int r = 0; ok && r < rounds; r++) {
        ok = cudaMemcpy(h.data(), c[r], h.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess && check_c<__nv_bfloat16, __nv_bfloat16>(s, k, h, 100 + r, why);
        ok = ok && cudaMemcpy(hi.data(), ao[r], ar_n * 4, cudaMemcpyDeviceToHost) == cudaSuccess;
        for (size_t i = 0; ok && i < ar_n; i++)
          if (hi[i] != int_sum(s.seed, W, r, i)) { why = "all-reduce of round " + std::to_string(r) + " element " + std::to_string(i) + " wrong"; ok = false; }
      }
      if (!ok) fprintf(stderr, "rank %d: streams, %s %s: %s\n", me, oname(op), iris_gemm_path_name(path), why.empty() ? iris_error_detail() : why.c_str());
      for (int r = 0; r < rounds; r++) {
        cudaFree(a[r]);
        cudaFree(c[r]);
        if (ai[r]) iris_free(s.ctx, ai[r]);
        if (ao[r]) iris_free(s.ctx, ao[r]);
      }
      cudaFree(b);
      if (p) iris_gemm_rs_destroy(p);
      char name[220];
      snprintf(name, sizeof name, "%d rounds of %s %s and an all-reduce on two streams that swap each round, no dependency between them: exact", rounds, oname(op),
               iris_gemm_path_name(path));
      report(s, name, agree(s, ok));
    }
  for (auto &x : st) cudaStreamDestroy(x);
}

// The last rank skips a call (stuck or far behind; gemm_rs_test_t2: a 2-s wait bound). Every
// other rank's call must end within 2x the bound with IRIS_ERROR_TIMEOUT or
// IRIS_ERROR_PEER_FAILED (the run's opening device barrier is the context's bounded wait; a
// fault is fatal to the context), later calls fail at once, finalize completes. Each rank
// prints its own line (the context cannot exchange any more).
static double now_s() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int stuck(Suite &s, iris_gemm_path_t path) {
  const int W = s.world, me = s.rank, late = W - 1;
  const double bound = (double)IRIS_WAIT_TIMEOUT_NS * 1e-9;
  iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
  d.M = 128LL * W; d.N = 520; d.K = 256LL * W; d.path = path;
  iris_gemm_rs_t *p = NULL;
  __nv_bfloat16 *a = NULL, *b = NULL, *c = NULL;
  IK(iris_gemm_rs_create(s.ctx, &d, &p));
  CK(cudaMalloc(&a, (size_t)d.M * (d.K / W) * 2));
  CK(cudaMalloc(&b, (size_t)(d.K / W) * d.N * 2));
  CK(cudaMalloc(&c, (size_t)(d.M / W) * d.N * 2));
  k_gen_a<__nv_bfloat16><<<128, 256, 0, s.stream>>>(a, d.M, d.K / W, me, s.seed, 1);
  k_gen_b<__nv_bfloat16><<<128, 256, 0, s.stream>>>(b, d.K / W, d.N, 0, me, s.seed);
  CK(cudaStreamSynchronize(s.stream));
  IK(iris_barrier(s.ctx));
  if (me == late) { // never makes the call; stays alive past the others' bound, then leaves
    usleep((useconds_t)((2 * bound + 3) * 1e6));
    iris_finalize(s.ctx); // its peers are faulted: finalize must not hang
    return 0;
  }
  const double t0 = now_s();
  iris_status_t err = iris_gemm_rs_run(p, a, b, NULL, c, s.stream);
  while (err == IRIS_SUCCESS && now_s() < t0 + 6 * bound + 10) {
    cudaStreamQuery(s.stream);
    err = iris_get_async_error(s.ctx);
    usleep(1000);
  }
  const double took = now_s() - t0;
  char detail[1100];
  snprintf(detail, sizeof detail, "%s", iris_error_detail());
  bool ok = (err == IRIS_ERROR_TIMEOUT || err == IRIS_ERROR_PEER_FAILED) && took < 2 * bound + 3;
  const double t1 = now_s();
  ok = ok && iris_gemm_rs_run(p, a, b, NULL, c, s.stream) != IRIS_SUCCESS && now_s() - t1 < 0.5;
  cudaStreamSynchronize(s.stream);
  iris_gemm_rs_destroy(p);
  const double t2 = now_s();
  ok = ok && iris_finalize(s.ctx) == IRIS_SUCCESS && now_s() - t2 < 5;
  printf("%s: [gemm_rs w=%d rank %d] stuck peer (rank %d skips a call), %s: the call failed after %.2f s (bound %.1f s) with %s: %s; the next run failed at once; "
         "finalize completed\n", ok ? "PASS" : "FAIL", W, me, late, iris_gemm_path_name(path), took, bound, iris_status_string(err), detail);
  cudaFree(a); cudaFree(b); cudaFree(c);
  return ok ? 0 : 1;
}

// A run refused on one rank only (iris_gemm_reduce.h, Rules: "A run refused on one rank"):
// rank 1 calls run with a bad argument, the others well, one side late by 50 ms. Every rank's
// call must end within 1.5 s (under the 2-s bounds the run line sets: IRIS_WAIT_TIMEOUT_MS=2000
// for the device barriers and collectives, gemm_rs_test_t2's IRIS_WAIT_TIMEOUT_NS for the
// fused reduce, so a refusal that took no part shows as a timeout); rank 1 gets the refusal,
// saying it took part; every other rank IRIS_ERROR_MISMATCH naming rank 1 (iris_gemm_rs_check
// on the fused path, the context's mismatch elsewhere: iris_get_async_error); nothing of rank
// 1's is written (its C and the buffer it passed are still poisoned; the fused
// reduce-scatter writes no peer's C either); then the next good run is exact on every rank
// (all-reduce: bitwise the same everywhere). "alike": every rank refuses the call: the
// refusals only, nothing pending anywhere, the next run exact.
enum { REF_NULL_A, REF_BIAS, REF_MISALIGNED_A, REF_MISALIGNED_C, REF_C_OVER_B, REF_NULL_C, REF_FP8_UNSCALED };
static const char *const ref_names[] = {"a NULL A", "a bias the plan does not take", "A off 256-byte alignment", "a misaligned C", "C over B", "a NULL C",
                                        "iris_gemm_rs_run on an fp8 plan (no scales)"};
// whether every byte of the device buffer p still holds v
static bool all_bytes(const void *p, size_t bytes, unsigned char v, const char *what, std::string &why) {
  std::vector<unsigned char> h(bytes);
  if (cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) { why = std::string("reading ") + what; return false; }
  for (size_t i = 0; i < bytes; i++)
    if (h[i] != v) { why = std::string(what) + " was written (byte " + std::to_string(i) + ")"; return false; }
  return true;
}
template <typename T>
static bool refused_case(Suite &s, iris_gemm_reduce_op_t op, iris_gemm_path_t path, int bias, int coll, int kind, int skew_ms, bool alike, std::string &why) {
  const int W = s.world, me = s.rank, bad = 1;
  const bool fp8 = kind == REF_FP8_UNSCALED, refuses = alike || me == bad, fused = path == IRIS_GEMM_PATH_FUSED;
  const iris_dtype_t at = fp8 ? IRIS_FLOAT8_E4M3 : IRIS_BFLOAT16;
  const Case k{op, at, IRIS_BFLOAT16, fp8 ? 1 : 0, bias, path, 128LL * W, 264, 128LL * W, 1};
  const long long kl = k.K / W, rows = op == IRIS_GEMM_ALL_REDUCE ? k.M : k.M / W;
  iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
  d.op = op; d.M = k.M; d.N = k.N; d.K = k.K; d.a_type = at; d.b_transposed = k.bt; d.has_bias = bias; d.path = path;
  iris_gemm_rs_t *p = NULL;
  IK(iris_gemm_rs_create(s.ctx, &d, &p));
  if (iris_gemm_rs_path(p) != path || p->coll != coll) {
    why = "the plan runs another path than the case means (coll " + std::to_string(p->coll) + ")";
    iris_gemm_rs_destroy(p);
    return false;
  }
  const size_t a_bytes = (size_t)k.M * kl * sizeof(T), b_bytes = (size_t)kl * k.N * sizeof(T), c_bytes = (size_t)rows * k.N * 2;
  const size_t x_bytes = (b_bytes > c_bytes ? b_bytes : c_bytes) + 512;
  T *a = NULL, *b = NULL;
  char *c = NULL, *x = NULL; // C (256 bytes beyond it, for a misaligned one); x: a poisoned buffer a refusal passes as bias or as B under C
  __nv_bfloat16 *bv = NULL;
  float *sc = NULL;
  CK(cudaMalloc(&a, a_bytes + 256));
  CK(cudaMalloc(&b, b_bytes));
  CK(cudaMalloc(&c, c_bytes + 256));
  CK(cudaMalloc(&x, x_bytes));
  CK(cudaMalloc(&bv, (size_t)k.N * 2));
  CK(cudaMalloc(&sc, 2 * sizeof(float)));
  k_gen_a<T><<<128, 256, 0, s.stream>>>(a, k.M, kl, me, s.seed, 1);
  k_gen_b<T><<<128, 256, 0, s.stream>>>(b, kl, k.N, k.bt, me, s.seed);
  k_gen_bias<__nv_bfloat16><<<16, 256, 0, s.stream>>>(bv, k.N, s.seed);
  k_gen_scales<<<1, 1, 0, s.stream>>>(sc, me, s.seed, 1);
  CK(cudaMemsetAsync(c, 0xff, c_bytes + 256, s.stream));
  CK(cudaMemsetAsync(x, 0xff, x_bytes, s.stream));
  CK(cudaStreamSynchronize(s.stream));
  if (!barrier(s)) return false;
  const __nv_bfloat16 *bias_arg = bias ? bv : NULL;
  if ((skew_ms > 0 && me == 0) || (skew_ms < 0 && me == bad)) usleep((useconds_t)(skew_ms > 0 ? skew_ms : -skew_ms) * 1000);
  const double t0 = now_s();
  iris_status_t st;
  bool ok = true;
  if (refuses) {
    switch (kind) {
    case REF_NULL_A: st = iris_gemm_rs_run(p, NULL, b, bias_arg, c, s.stream); break;
    case REF_BIAS: st = iris_gemm_rs_run(p, a, b, x, c, s.stream); break;
    case REF_MISALIGNED_A: st = iris_gemm_rs_run(p, (const char *)a + 16, b, bias_arg, c, s.stream); break;
    case REF_MISALIGNED_C: st = iris_gemm_rs_run(p, a, b, bias_arg, c + 2, s.stream); break;
    case REF_C_OVER_B: st = iris_gemm_rs_run(p, a, x, bias_arg, x + 256, s.stream); break;
    case REF_NULL_C: st = iris_gemm_rs_run(p, a, b, bias_arg, NULL, s.stream); break;
    default: st = iris_gemm_rs_run(p, a, b, bias_arg, c, s.stream); break;
    }
    const std::string detail = iris_error_detail();
    if (st != IRIS_ERROR_INVALID_ARGUMENT) { ok = false; why = std::string("the refused run returned ") + iris_status_string(st) + ": " + detail; }
    else if (detail.find("took part") == std::string::npos) { ok = false; why = "the refusal does not say it took part: " + detail; }
  } else {
    st = fp8 ? iris_gemm_rs_run_scaled(p, a, b, sc, sc + 1, bias_arg, c, s.stream) : iris_gemm_rs_run(p, a, b, bias_arg, c, s.stream);
    if (st != IRIS_SUCCESS) { ok = false; why = std::string("the good run returned ") + iris_status_string(st) + ": " + iris_error_detail(); }
  }
  CK(cudaStreamSynchronize(s.stream));
  const double secs = now_s() - t0;
  if (ok && secs > 1.5) { ok = false; why = "the call took " + std::to_string(secs) + " s (a wait ran out: the refusal did not take part?)"; }
  // the errors: the plan's record (fused path), then the context's pending mismatch
  const iris_status_t pc = iris_gemm_rs_check(p);
  const std::string pc_detail = pc == IRIS_SUCCESS ? "" : iris_error_detail();
  const iris_status_t ae = iris_get_async_error(s.ctx);
  const std::string ae_detail = ae == IRIS_SUCCESS ? "" : iris_error_detail();
  if (ok) ok = refused_errors_as_wanted("iris_gemm_rs_check", pc, pc_detail, ae, ae_detail, alike, fused, me, bad, why);
  if (ok && me == 0 && !alike)
    printf("# [%s] refused run, %s %s: rank 0 ended after %.3f s with %s\n", s.tag.c_str(), oname(op), iris_gemm_path_name(path), secs, (fused ? pc_detail : ae_detail).c_str());
  // nothing of a refusing rank's written; the fused reduce-scatter writes no peer's C either
  if (ok && refuses) ok = all_bytes(c, c_bytes + 256, 0xff, "C", why) && all_bytes(x, x_bytes, 0xff, "the buffer passed as bias or B", why);
  if (ok && !refuses && fused && op == IRIS_GEMM_REDUCE_SCATTER) ok = all_bytes(c, c_bytes, 0xff, "a peer's C (the fused reduce-scatter writes none)", why);
  // the next good run, on every rank: exact (the all-reduce: bitwise the same everywhere)
  k_gen_a<T><<<128, 256, 0, s.stream>>>(a, k.M, kl, me, s.seed, 2);
  k_gen_scales<<<1, 1, 0, s.stream>>>(sc, me, s.seed, 2);
  CK(cudaMemsetAsync(c, 0xff, c_bytes, s.stream));
  st = fp8 ? iris_gemm_rs_run_scaled(p, a, b, sc, sc + 1, bias_arg, c, s.stream) : iris_gemm_rs_run(p, a, b, bias_arg, c, s.stream);
  CK(cudaStreamSynchronize(s.stream));
  if (ok && st != IRIS_SUCCESS) { ok = false; why = std::string("the next run returned ") + iris_status_string(st) + ": " + iris_error_detail(); }
  if (ok && (iris_gemm_rs_check(p) != IRIS_SUCCESS || iris_get_async_error(s.ctx) != IRIS_SUCCESS)) { ok = false; why = std::string("the next run: ") + iris_error_detail(); }
  std::vector<__nv_bfloat16> h((size_t)rows * k.N);
  CK(cudaMemcpy(h.data(), c, c_bytes, cudaMemcpyDeviceToHost));
  if (ok && !check_c<T, __nv_bfloat16>(s, k, h, 2, why)) { ok = false; why = "the next run: " + why; }
  std::string w2; // every rank takes part in the exchange whatever its verdict
  if (op == IRIS_GEMM_ALL_REDUCE && !same_everywhere(s, h.data(), h.size() * 2, w2) && ok) { ok = false; why = "the next run: " + w2; }
  cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(x); cudaFree(bv); cudaFree(sc);
  IK(iris_gemm_rs_destroy(p));
  return ok;
}
static void refused(Suite &s) {
  if (s.world < 2) {
    if (s.rank == 0) printf("SKIP: [%s] refused runs: one rank has no peer to take part with\n", s.tag.c_str());
    return;
  }
  struct Way { iris_gemm_reduce_op_t op; iris_gemm_path_t path; int bias, coll, kind, skew_ms; bool alike; const char *what; };
  const iris_gemm_reduce_op_t RS = IRIS_GEMM_REDUCE_SCATTER, AR = IRIS_GEMM_ALL_REDUCE;
  const Way ways[] = {
      {RS, IRIS_GEMM_PATH_PIPELINED, 1, 0, REF_NULL_A, 50, false, "pipelined +bias"},
      {AR, IRIS_GEMM_PATH_PIPELINED, 0, 0, REF_BIAS, -50, false, "pipelined (three barriers)"},
      {AR, IRIS_GEMM_PATH_PIPELINED, 0, 0, REF_NULL_A, 0, true, "pipelined (three barriers)"},
      {RS, IRIS_GEMM_PATH_UNFUSED, 1, 0, REF_MISALIGNED_A, 50, false, "unfused +bias (barrier and pull)"},
      {AR, IRIS_GEMM_PATH_UNFUSED, 0, 1, REF_MISALIGNED_C, -50, false, "unfused (iris_all_reduce)"},
      {RS, IRIS_GEMM_PATH_UNFUSED, 0, 1, REF_C_OVER_B, 50, false, "unfused (iris_reduce_scatter)"},
      {RS, IRIS_GEMM_PATH_UNFUSED, 0, 1, REF_NULL_C, 0, true, "unfused (iris_reduce_scatter)"},
#if defined(IRIS_GEMM_HAVE_CORE)
      {RS, IRIS_GEMM_PATH_FUSED, 1, 0, REF_NULL_C, -50, false, "fused +bias"},
      {AR, IRIS_GEMM_PATH_FUSED, 0, 0, REF_MISALIGNED_C, 50, false, "fused"},
      {RS, IRIS_GEMM_PATH_FUSED, 0, 0, REF_BIAS, 0, true, "fused"},
#endif
      {RS, IRIS_GEMM_PATH_PIPELINED, 1, 0, REF_FP8_UNSCALED, -50, false, "pipelined +bias, fp8"},
  };
#if !defined(IRIS_GEMM_HAVE_CORE)
  if (s.rank == 0) printf("SKIP: [%s] refused runs on the fused path: built without the GEMM core (GEMM_RS_TEST_NO_CORE)\n", s.tag.c_str());
#endif
  for (const Way &w : ways) {
    std::string why;
    const bool ok = w.kind == REF_FP8_UNSCALED ? refused_case<f8>(s, w.op, w.path, w.bias, w.coll, w.kind, w.skew_ms, w.alike, why)
                                               : refused_case<__nv_bfloat16>(s, w.op, w.path, w.bias, w.coll, w.kind, w.skew_ms, w.alike, why);
    if (!ok) fprintf(stderr, "rank %d: refused run, %s %s, %s: %s\n", s.rank, oname(w.op), w.what, ref_names[w.kind], why.empty() ? iris_error_detail() : why.c_str());
    char name[400];
    if (w.alike)
      snprintf(name, sizeof name, "refused run on every rank (%s), %s %s: each gets the refusal within 1.5 s, nothing else reported, nothing written; the next run exact",
               ref_names[w.kind], oname(w.op), w.what);
    else
      snprintf(name, sizeof name, "refused run on rank 1 only (%s), %s %s, rank %d late by 50 ms: every call ends within 1.5 s, the others get IRIS_ERROR_MISMATCH naming "
               "rank 1 (%s), rank 1's buffers untouched%s; the next run exact everywhere", ref_names[w.kind], oname(w.op), w.what, w.skew_ms > 0 ? 0 : 1,
               w.path == IRIS_GEMM_PATH_FUSED ? "iris_gemm_rs_check" : "the context's mismatch",
               w.path == IRIS_GEMM_PATH_FUSED && w.op == RS ? ", no peer's C written" : "");
    report(s, name, ok);
  }
}

// IRIS_GEMM_TEST_WRAP=n (tests/run.sh sets it in a run of its own): the fused plans' flag
// block starts as if 2^32 - n calls had run, so that the 12 calls of each plan here run at
// epochs 2^32 - n + 1, ..., 0xffffffff, 0, 1, ... (n in 1..11: the epochs cross 0xffffffff ->
// 0 -> 1). Both ops on both cores of the fused path (graph replays once), each call's C
// against float64, and each plan's block word by word at create (the hook took effect) and
// after the calls (every word is where the hook would put it for the last call: its model
// of a call is the kernels'). The pipelined and unfused paths have no flag block (their
// barrier is the collectives': IRIS_COLL_TEST_WRAP); one case each runs with the rest.
// Unset: nothing, and a SKIP line where the part was asked for by name (gemm_rs_test N wrap).
static void wrap(Suite &s, bool asked) {
  const int W = s.world;
  const int iters = 12;
  int n;
  std::string extra;
  if (!gemm_wrap_start(s, asked, iters, n, extra)) return;
  const std::string coop = extra + ", flag block checked, cooperative core", pp = extra + ", flag block checked, ping-pong core",
                    none = extra + ", no flag block on this path";
  Case rs{IRIS_GEMM_REDUCE_SCATTER, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, IRIS_GEMM_PATH_FUSED, 129LL * W, 776, 520LL * W, iters};
  Case ar{IRIS_GEMM_ALL_REDUCE, IRIS_FLOAT16, IRIS_FLOAT32, 1, 0, IRIS_GEMM_PATH_FUSED, 1LL * W, 392, 136LL * W, iters};
  rs.wrap = ar.wrap = n;
#if defined(IRIS_GEMM_HAVE_CORE)
  Case rs2{IRIS_GEMM_REDUCE_SCATTER, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 1, IRIS_GEMM_PATH_FUSED, 300LL * W, 1288, 192LL * W, iters};
  Case ar2{IRIS_GEMM_ALL_REDUCE, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 1, IRIS_GEMM_PATH_FUSED, 96LL * W, 256, 128LL * W, iters};
  rs2.wrap = ar2.wrap = n;
  // the core is read at create (IRIS_GEMM_RS_PINGPONG): each op on each
  setenv("IRIS_GEMM_RS_PINGPONG", "1", 1);
  one(s, rs, false, pp.c_str());
  one(s, ar, false, pp.c_str());
  setenv("IRIS_GEMM_RS_PINGPONG", "0", 1);
  one(s, rs2, false, coop.c_str());
  one(s, ar2, true, coop.c_str());
  unsetenv("IRIS_GEMM_RS_PINGPONG");
#else
  if (s.rank == 0) printf("SKIP: [%s] wrap-around part, fused path: built without the GEMM core (GEMM_RS_TEST_NO_CORE)\n", s.tag.c_str());
#endif
  rs.path = IRIS_GEMM_PATH_PIPELINED;
  ar.path = IRIS_GEMM_PATH_UNFUSED;
  one(s, rs, false, none.c_str());
  one(s, ar, false, none.c_str());
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n = argc > 1 ? atoi(argv[1]) : 2, rank;
  const bool quick = argc > 2 && !strcmp(argv[2], "quick"), streams_only = argc > 2 && !strcmp(argv[2], "streams");
  iris_launch_t L;
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("FAIL: [gemm_rs w=%d] launch: %s\n", n, iris_error_detail()); return 1; }
  if (rank < 0) {
    iris_status_t st = iris_launch_wait(&L, 900000);
    printf("%s: [gemm_rs w=%d] every rank exits cleanly%s%s\n", st == IRIS_SUCCESS ? "PASS" : "FAIL", n, st == IRIS_SUCCESS ? "" : ": ", st == IRIS_SUCCESS ? "" : iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  Suite s = {};
  s.rank = rank;
  s.world = n;
  s.tag = "gemm_rs w=" + std::to_string(n);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)1 << 30;
  if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS || cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess) {
    if (rank == 0) printf("FAIL: [%s] setup: %s\n", s.tag.c_str(), iris_error_detail());
    return 1;
  }
  uint64_t mine = mix((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)), all[IRIS_MAX_RANKS];
  iris_allgather_host(s.ctx, &mine, all, sizeof mine);
  s.seed = all[0];
  if (rank == 0) printf("# [%s] seed %llu\n", s.tag.c_str(), (unsigned long long)s.seed);
  const int W = n;
  if (argc > 2 && !strcmp(argv[2], "stuck")) { // the context ends faulted: nothing after it
#if defined(IRIS_GEMM_HAVE_CORE)
    return stuck(s, IRIS_GEMM_PATH_FUSED);
#else
    return stuck(s, IRIS_GEMM_PATH_PIPELINED);
#endif
  }
  if (argc > 2 && (!strcmp(argv[2], "wrap") || !strcmp(argv[2], "refused"))) {
    if (!strcmp(argv[2], "wrap")) wrap(s, true);
    else refused(s);
    int rc = s.failed ? 1 : 0;
    cudaStreamDestroy(s.stream);
    if (iris_finalize(s.ctx) != IRIS_SUCCESS) rc = 1;
    return rc;
  }
  if (!streams_only) wrap(s, false); // where IRIS_GEMM_TEST_WRAP is set (then every fused plan below starts near the wrap too)
  const iris_gemm_reduce_op_t ops[] = {IRIS_GEMM_REDUCE_SCATTER, IRIS_GEMM_ALL_REDUCE};
#if defined(IRIS_GEMM_HAVE_CORE)
  const iris_gemm_path_t paths[] = {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED, IRIS_GEMM_PATH_FUSED};
#else
  const iris_gemm_path_t paths[] = {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED};
  if (rank == 0) printf("SKIP: [%s] the fused path's cases: built without the GEMM core (GEMM_RS_TEST_NO_CORE)\n", s.tag.c_str());
#endif
  const std::vector<iris_gemm_path_t> path_list(paths, paths + sizeof paths / sizeof paths[0]);
  for (iris_gemm_reduce_op_t op : ops) {
    if (streams_only) break;
    for (iris_gemm_path_t p : path_list) {
      // odd shapes: rows per rank 129, 1, 77; N, K/W not multiples of 64
      one(s, Case{op, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, p, 129LL * W, 776, 520LL * W, 3}, false);
      one(s, Case{op, IRIS_FLOAT16, IRIS_FLOAT32, 1, 0, p, 1LL * W, 392, 136LL * W, 3}, false);
      {
        // exact = 1: fp32 partials (one rounding); the rest of the cases take the default,
        // partials in the output type
        Case e{op, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, p, 129LL * W, 776, 520LL * W, 3};
        e.exact = 1;
        one(s, e, false);
        Case g{op, IRIS_FLOAT16, IRIS_FLOAT16, 1, 0, p, 96LL * W, 256, 128LL * W, 20};
        g.exact = 1;
        one(s, g, true);
      }
      if (quick) continue;
      one(s, Case{op, IRIS_BFLOAT16, IRIS_FLOAT16, 1, 1, p, 77LL * W, 8, 8LL * W, 2}, false);
      one(s, Case{op, IRIS_FLOAT16, IRIS_BFLOAT16, 0, 0, p, 128LL * W, 1032, 256LL * W, 2}, false);
      one(s, Case{op, IRIS_BFLOAT16, IRIS_FLOAT32, 1, 1, p, 64LL * W, 264, 1000LL * W, 2}, false);
      one(s, Case{op, IRIS_FLOAT16, IRIS_FLOAT16, 0, 1, p, 33LL * W, 520, 72LL * W, 2}, false);
      // several 128-row tiles per owner, owners' rows splitting tiles (300 rows per rank),
      // n-tiles with a partial last one, B both layouts
      one(s, Case{op, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 1, p, 300LL * W, 1288, 192LL * W, 2}, false);
      one(s, Case{op, IRIS_FLOAT16, IRIS_FLOAT32, 0, 0, p, 200LL * W, 264, 1096LL * W, 2}, false);
      // graphs: captured once, replayed with fresh A every time (each replay checked)
      one(s, Case{op, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 1, p, 96LL * W, 256, 128LL * W, 30}, true);
      // back to back, no host synchronisation between calls: every 50th call and the last checked
      one(s, Case{op, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, p, 8LL * W, 64, 64LL * W, 500, 50}, false, ", back to back");
      if (p != IRIS_GEMM_PATH_FUSED) continue;
      // the plan picks the ping-pong core for these short-K shapes: a few again on the
      // cooperative core (IRIS_GEMM_RS_PINGPONG=0, read at create)
      setenv("IRIS_GEMM_RS_PINGPONG", "0", 1);
      one(s, Case{op, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 1, p, 300LL * W, 1288, 192LL * W, 2}, false, ", cooperative core");
      one(s, Case{op, IRIS_FLOAT16, IRIS_FLOAT32, 0, 0, p, 200LL * W, 264, 1096LL * W, 2}, false, ", cooperative core");
      one(s, Case{op, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 1, p, 96LL * W, 256, 128LL * W, 30}, true, ", cooperative core");
      unsetenv("IRIS_GEMM_RS_PINGPONG");
    }
  }
  // the fused path on many tiles per CTA with a long K (18 k-slabs per tile: the ping-pong
  // core's warpgroups each skip the other's stages, so the ring's phases wrap between
  // their tiles): 4W x 65 tiles of 128 x 128 per rank on 132 SMs; every 16th row checked
#if defined(IRIS_GEMM_HAVE_CORE)
  // (each op on the ping-pong core, then on the cooperative one: IRIS_GEMM_RS_PINGPONG,
  // read at create; the small cases above take the core the plan chooses)
  for (iris_gemm_reduce_op_t op : ops)
    for (const char *pp : {"1", "0"}) {
      if (streams_only) break;
      Case big{op, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, IRIS_GEMM_PATH_FUSED, 512LL * W, 8200, 1096LL * W, 2};
      big.row_step = 16;
      setenv("IRIS_GEMM_RS_PINGPONG", pp, 1);
      one(s, big, false, pp[0] == '1' ? ", many tiles per CTA, ping-pong core" : ", many tiles per CTA, cooperative core");
      unsetenv("IRIS_GEMM_RS_PINGPONG");
    }
#endif
  // fp8 e4m3 with per-tensor scales (fresh scales and A every call; B N x K/W, the TN layout
  // cuBLASLt's fp8 GEMM needs), every op and path. The B scale sits 4 bytes into its
  // buffer: cuBLASLt refuses such a scale pointer, so the plan copies it (the A scale is
  // used in place). The cuBLASLt paths only (the fused kernel is bf16/fp16; bad_input checks
  // that it refuses fp8)
  for (iris_gemm_reduce_op_t op : ops)
    for (iris_gemm_path_t p : {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED}) {
      if (streams_only) break;
      one(s, Case{op, IRIS_FLOAT8_E4M3, IRIS_BFLOAT16, 1, 1, p, 129LL * W, 776, 528LL * W, 2}, false);
      one(s, Case{op, IRIS_FLOAT8_E4M3, IRIS_FLOAT32, 1, 0, p, 1LL * W, 392, 144LL * W, 2}, false);
      {
        Case e{op, IRIS_FLOAT8_E4M3, IRIS_BFLOAT16, 1, 1, p, 64LL * W, 264, 512LL * W, 2};
        e.exact = 1;
        one(s, e, false);
      }
      if (quick) continue;

      one(s, Case{op, IRIS_FLOAT8_E4M3, IRIS_FLOAT16, 1, 1, p, 77LL * W, 264, 1024LL * W, 2}, false);
      one(s, Case{op, IRIS_FLOAT8_E4M3, IRIS_BFLOAT16, 1, 0, p, 64LL * W, 256, 128LL * W, 20}, true);
      one(s, Case{op, IRIS_FLOAT8_E4M3, IRIS_BFLOAT16, 1, 1, p, 8LL * W, 64, 64LL * W, 200, 50}, false, ", back to back");
    }
  // GEMMs and all-reduces on two streams (the only cases of "gemm_rs_test N streams")
  streams(s, path_list);
  if (!quick && !streams_only) {
    // many graph replays with fresh data, and AUTO
    one(s, Case{IRIS_GEMM_ALL_REDUCE, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 1, IRIS_GEMM_PATH_PIPELINED, 16LL * W, 128, 64LL * W, 1000, 100}, true, ", 1000 replays");
#if defined(IRIS_GEMM_HAVE_CORE)
    // the fused path's epochs live on the device: 1000 replays of one capture must each
    // see fresh flags (a host-side epoch would be frozen into the graph)
    one(s, Case{IRIS_GEMM_REDUCE_SCATTER, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, IRIS_GEMM_PATH_FUSED, 16LL * W, 520, 64LL * W, 1000, 100}, true, ", 1000 replays");
    one(s, Case{IRIS_GEMM_ALL_REDUCE, IRIS_FLOAT16, IRIS_FLOAT16, 1, 0, IRIS_GEMM_PATH_FUSED, 16LL * W, 128, 64LL * W, 1000, 100}, true, ", 1000 replays");
#endif
    one(s, Case{IRIS_GEMM_REDUCE_SCATTER, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 0, IRIS_GEMM_PATH_AUTO, 256LL * W, 1024, 512LL * W, 2}, false);
  }
  if (!streams_only) bad_input(s);
  int rc = s.failed ? 1 : 0;
  cudaStreamDestroy(s.stream);
  if (iris_finalize(s.ctx) != IRIS_SUCCESS) rc = 1;
  return rc;
}
