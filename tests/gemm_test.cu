// All-gather + GEMM (iris_gemm.h): both layouts, bf16/fp16 inputs (and fp8 e4m3 with
// per-tensor scales on the cuBLASLt paths), bf16/fp16/fp32 outputs,
// B in both layouts, bias, every path, shapes that are not tile multiples, against a
// float64 host reference on fresh random data. C is poisoned (NaN bits) before each run
// and every element must be written. Also: many back-to-back calls that regenerate A
// between calls (exercises the arrive/ready/done epochs), graph replays with fresh data,
// and bad input (host memory short for a plan on one rank too: IRIS_TEST_HOOKS). Every
// case ends with iris_ag_gemm_check: a wait that ran past its bound
// fails the case.
//   gemm_test N               N processes (iris_launch_local), device = rank % GPUs
//   gemm_test N quick         fewer cases
//   gemm_test N sweep [reps]  the path x shape sweep (issue 20's hang shape included),
//                             reps times, plans created and destroyed back to back
//   gemm_test N streams       all-gather + GEMM runs and all-reduces on two streams (issue 20)
//   gemm_test N wrap          with IRIS_GEMM_TEST_WRAP=n (1..11): every path's epochs cross
//                             0xffffffff -> 0 -> 1 (without it: a SKIP line)
//   gemm_test N refused       a run refused on rank 1 only (bad arguments), every path: every
//                             rank's call ends at once (IRIS_WAIT_TIMEOUT_MS=2000 and the t2
//                             build: a regression shows as a timeout), the peers get
//                             IRIS_ERROR_MISMATCH naming rank 1, rank 1's buffers untouched, the
//                             next run exact; and refusals on every rank alike
//   gemm_test N stuck         one rank skips a call: every other rank's fused call must end
//                             within 2x the wait bound with IRIS_ERROR_TIMEOUT naming it
//                             (build/gemm_test_t2 has a 2-s bound, and fetcher CTAs that
//                             start 100 ms late: its runs check that the GEMM CTAs fetch
//                             for them)
#define IRIS_IMPLEMENTATION
#define IRIS_TEST_HOOKS // the library's failure injections (a plan's host memory short on one rank)
#include "../iris_gemm.h"
#include "test_util.h"
#include "gemm_values.h"
#include "host_threads.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>
#include <vector>

// this rank's shard of A for call `call`
template <typename T>
__global__ void k_gen_a(T *shard, int layout, long long M, long long K, int W, int me, uint64_t seed, int call) {
  const long long rows = layout == IRIS_GEMM_A_ROWS ? M / W : M, cols = layout == IRIS_GEMM_A_ROWS ? K : K / W;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < rows * cols; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / cols, c = i % cols;
    const long long gr = layout == IRIS_GEMM_A_ROWS ? r + me * rows : r, gc = layout == IRIS_GEMM_A_ROWS ? c : c + me * cols;
    shard[i] = a_at<T>(seed, gr, gc, call);
  }
}
template <typename T>
__global__ void k_gen_b(T *b, long long K, long long N, int transposed, uint64_t seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < K * N; i += (long long)gridDim.x * blockDim.x) {
    const long long k = transposed ? i % K : i / N, n = transposed ? i / K : i % N;
    b[i] = b_at<T>(seed, k, n);
  }
}
// the scales of call `call`: A's at sc[1] (4 bytes in), B's at sc[4]
__global__ void k_gen_scales(float *sc, uint64_t seed, int call) {
  sc[1] = scale_at(seed, 0, 0, call);
  sc[4] = scale_at(seed, 1, 0, call);
}
struct Case {
  iris_gemm_layout_t layout;
  iris_dtype_t a, c;
  int bt, bias;
  iris_gemm_path_t path;
  long long M, N, K;
  int iters;     // calls, each with fresh A, each checked
  int rows_chk;  // 0: check every row; else this many sampled rows (every element still checked for being written)
  int chunks = 0;
  int streams = 0; // pipelined: gemm_streams (0 = the plan's automatic choice)
  int fetch = 0;   // fused: desc.fetch_ctas
  int wrap = 0;    // IRIS_GEMM_TEST_WRAP's n (the wrap part): the plan's flag block is checked at create and after the calls
};

// The wrap part (IRIS_GEMM_TEST_WRAP): whether the fused kernels' flag block holds, word by
// word, what call `epoch` of every CTA slot leaves (iris_ag_gemm_flags_after, the words the
// hook writes at create); why names the first word that differs.
static bool flags_are(iris_ag_gemm_t *g, unsigned epoch, std::string &why) {
#if defined(IRIS_GEMM_HAVE_CORE)
  const iris_ag_gemm_dev_t &v = g->dev;
  std::vector<unsigned> want(iris_ag_gemm_flags_after(&v, epoch, NULL)), got(want.size());
  iris_ag_gemm_flags_after(&v, epoch, want.data());
  if (cudaMemcpy(got.data(), g->flag_block, got.size() * sizeof(unsigned), cudaMemcpyDeviceToHost) != cudaSuccess) { why = "reading the flag block"; return false; }
  const size_t items = (size_t)v.tiles_m * v.groups_k, sync = 2 * items;
  for (size_t i = 0; i < got.size(); i++) {
    if (got[i] == want[i]) continue;
    char buf[200];
    const char *what = i < items ? "ready flag" : i < sync ? "claim word" : i < sync + IRIS_MAX_RANKS ? "arrive" : i < sync + 2 * IRIS_MAX_RANKS ? "done" :
                       i < sync + IRIS_AG_GEMM_SYNC_WORDS ? "error record word" : "slot counter";
    const size_t at = i < items ? i : i < sync ? i - items : i < sync + IRIS_MAX_RANKS ? i - sync : i < sync + 2 * IRIS_MAX_RANKS ? i - sync - IRIS_MAX_RANKS :
                      i < sync + IRIS_AG_GEMM_SYNC_WORDS ? i - sync - 2 * IRIS_MAX_RANKS : i - sync - IRIS_AG_GEMM_SYNC_WORDS;
    snprintf(buf, sizeof buf, "flag block: %s %zu holds %u, want %u (what call %u of every slot leaves; %d fetchers, %d GEMM CTAs, side fetch %d, help %d)", what, at, got[i],
             want[i], epoch, v.fetchers, v.gemm_ctas, v.side_fetch, v.help);
    why = buf;
    return false;
  }
  return true;
#else
  (void)g; (void)epoch;
  why = "no fused kernel in this build";
  return false;
#endif
}


// check C (host copy) for call `call`; returns the worst error ratio (>1 fails)
template <typename T, typename C>
static bool check_c(Suite &s, const Case &k, const std::vector<C> &h, int call, std::string &why) {
  const long long M = k.M, N = k.N, K = k.K;
  const int threads = host_threads(s.world);
  // every element written
  if (!host_ranges((size_t)(M * N), threads, 1 << 16, [&](size_t b, size_t e, std::string &w) {
        for (size_t i = b; i < e; i++)
          if (isnan(to_d<C>(h[i]))) {
            w = "element (" + std::to_string(i / N) + ", " + std::to_string(i % N) + ") not written (still NaN poison)";
            return false;
          }
        return true;
      }, why))
    return false;
  // B as doubles, kept for the next check of the same B (one cache per T, C; the sweep
  // checks a large B often)
  static std::vector<double> brow;
  static long long bK = -1, bN = -1;
  if (bK != K || bN != N) {
    brow.assign((size_t)K * N, 0.0);
    std::string unused;
    host_ranges((size_t)K, threads, 64, [&](size_t b, size_t e, std::string &) {
      for (size_t kk = b; kk < e; kk++)
        for (long long n = 0; n < N; n++) brow[kk * N + n] = to_d<T>(b_at<T>(s.seed, (long long)kk, n));
      return true;
    }, unused);
    bK = K; bN = N;
  }
  const double rel = k.c == IRIS_FLOAT32 ? 1e-5 : k.c == IRIS_FLOAT16 ? 1.0 / 1024 : 1.0 / 128;
  // fp8: the whole gathered A has one scale, B another (the same on every rank)
  const bool fp8 = k.a == IRIS_FLOAT8_E4M3;
  const double scale = fp8 ? (double)scale_at(s.seed, 0, 0, call) * (double)scale_at(s.seed, 1, 0, call) : 1.0;
  const long long step = k.rows_chk ? (M + k.rows_chk - 1) / k.rows_chk : 1, checks = (M + step - 1) / step;
  // the checked rows on the host's threads, each with its own accumulators
  return host_ranges((size_t)checks, threads, 1, [&](size_t j0, size_t j1, std::string &w) {
    std::vector<double> acc((size_t)N), arow((size_t)K), mag((size_t)N);
    for (size_t j = j0; j < j1; j++) {
      const long long r0 = (long long)j * step;
      const long long r = k.rows_chk ? (r0 + (long long)(mix(s.seed + call + r0) % (uint64_t)step)) % M : r0;
      for (long long kk = 0; kk < K; kk++) arow[kk] = scale * to_d<T>(a_at<T>(s.seed, r, kk, call));
      for (long long n = 0; n < N; n++) acc[n] = k.bias ? to_d<C>(bias_at<C>(s.seed, n)) : 0.0, mag[n] = 0.0;
      for (long long kk = 0; kk < K; kk++) {
        const double a = arow[kk];
        const double *b = &brow[(size_t)kk * N];
        for (long long n = 0; n < N; n++) acc[n] += a * b[n];
        if (fp8)
          for (long long n = 0; n < N; n++) mag[n] += fabs(a * b[n]);
      }
      for (long long n = 0; n < N; n++) {
        const double got = to_d<C>(h[(size_t)r * N + n]), want = acc[n];
        // fp8: Hopper's fp8 tensor cores accumulate blocks of K with fewer mantissa bits
        // than fp32 before cuBLASLt promotes the sum (as in gemm_rs_test): 2^-12 of the
        // sum of |terms| on top
        const double tol = rel * fabs(want) + 1e-5 * sqrt((double)K) + 1e-6 + (fp8 ? mag[n] / 4096 : 0.0);
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

template <typename T, typename C>
static bool run_case(Suite &s, const Case &k, bool graph, std::string &why) {
  const int W = s.world, me = s.rank;
  iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
  d.layout = k.layout; d.M = k.M; d.N = k.N; d.K = k.K; d.a_type = k.a; d.c_type = k.c; d.b_transposed = k.bt; d.has_bias = k.bias; d.path = k.path; d.chunks = k.chunks; d.gemm_streams = k.streams; d.fetch_ctas = k.fetch;
  iris_ag_gemm_t *g = NULL;
  IK(iris_ag_gemm_create(s.ctx, &d, &g));
  const bool words = k.wrap && (iris_ag_gemm_path(g) == IRIS_GEMM_PATH_FUSED || iris_ag_gemm_path(g) == IRIS_GEMM_PATH_KERNEL_UNFUSED); // the paths with a flag block
  if (words) { // the hook wrote every word; the exchange keeps every rank's first call until each rank read its own block
    std::string w;
    const bool mine = flags_are(g, 0u - (unsigned)k.wrap, w);
    int v = mine ? 1 : 0, all[IRIS_MAX_RANKS];
    bool every = iris_allgather_host(s.ctx, &v, all, sizeof v) == IRIS_SUCCESS;
    for (int q = 0; q < W; q++) every = every && all[q];
    if (!every) {
      why = mine ? "another rank's flag block is not as IRIS_GEMM_TEST_WRAP sets it" : "at create: " + w;
      iris_ag_gemm_destroy(g);
      return false;
    }
  }
  const size_t shard = (size_t)(k.layout == IRIS_GEMM_A_ROWS ? k.M / W * k.K : k.M * (k.K / W));
  T *a = NULL, *b = NULL;
  C *c = NULL, *bias = NULL;
  bool ok = true;
  IK(iris_malloc(s.ctx, shard * sizeof(T), (void **)&a));
  CK(cudaMalloc(&b, (size_t)k.K * k.N * sizeof(T)));
  CK(cudaMalloc(&c, (size_t)k.M * k.N * sizeof(C)));
  if (k.bias) CK(cudaMalloc(&bias, (size_t)k.N * sizeof(C)));
  k_gen_b<T><<<256, 256, 0, s.stream>>>(b, k.K, k.N, k.bt, s.seed);
  if (k.bias) k_gen_bias<C><<<16, 256, 0, s.stream>>>(bias, k.N, s.seed);
  // fp8: fresh scales every call; the A scale sits 4 bytes into its buffer (cuBLASLt
  // refuses that pointer, so the plan copies it), the B scale 16 bytes in (used in place)
  float *sc = NULL;
  const bool fp8 = k.a == IRIS_FLOAT8_E4M3;
  if (fp8) CK(cudaMalloc(&sc, 8 * sizeof(float)));
  std::vector<C> h((size_t)k.M * k.N);
  cudaGraphExec_t exec = NULL;
  for (int it = 0; it < k.iters && ok; it++) {
    const int call = 7 * it + 3;
    k_gen_a<T><<<512, 256, 0, s.stream>>>(a, k.layout, k.M, k.K, W, me, s.seed, call);
    if (fp8) k_gen_scales<<<1, 1, 0, s.stream>>>(sc, s.seed, call);
    CK(cudaMemsetAsync(c, 0xff, (size_t)k.M * k.N * sizeof(C), s.stream)); // NaN in every output type
    if (me == it % W && it % 3 == 1) { CK(cudaStreamSynchronize(s.stream)); usleep(20000); } // skew the ranks
    if (graph) {
      if (!exec) { // captured once, replayed with the new data each iteration
        cudaGraph_t gr;
        CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
        iris_status_t st = iris_ag_gemm_run_scaled(g, a, b, fp8 ? sc + 1 : NULL, fp8 ? sc + 4 : NULL, bias, c, s.stream);
        CK(cudaStreamEndCapture(s.stream, &gr));
        IK(st);
        CK(cudaGraphInstantiate(&exec, gr, 0));
        CK(cudaGraphDestroy(gr));
      }
      CK(cudaGraphLaunch(exec, s.stream));
    } else if (fp8) {
      IK(iris_ag_gemm_run_scaled(g, a, b, sc + 1, sc + 4, bias, c, s.stream));
    } else {
      IK(iris_ag_gemm_run(g, a, b, bias, c, s.stream));
    }
    CK(cudaStreamSynchronize(s.stream));
    if (iris_ag_gemm_check(g) != IRIS_SUCCESS) { // a wait ran past its bound: C is wrong, stop here
      why = std::string("call ") + std::to_string(it) + ": " + iris_error_detail();
      ok = false;
      break;
    }
    const bool last = it == k.iters - 1;
    if (k.iters <= 20 || last || it % 97 == 0) { // long loops: check a sample and the last
      CK(cudaMemcpy(h.data(), c, h.size() * sizeof(C), cudaMemcpyDeviceToHost));
      ok = check_c<T, C>(s, k, h, call, why);
    }
  }
  // the wrap part: the kernels left every word as the hook models it (the peers' signals into
  // this block were all waited for, so the block is final once the stream is)
  if (ok && words && !flags_are(g, 0u - (unsigned)k.wrap + (unsigned)k.iters, why)) {
    why = "after the calls: " + why;
    ok = false;
  }
  if (exec) cudaGraphExecDestroy(exec);
  cudaFree(b); cudaFree(c); cudaFree(bias); cudaFree(sc);
  IK(iris_free(s.ctx, a));
  IK(iris_ag_gemm_destroy(g));
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
  snprintf(name, sizeof name, "%s %s %s->%s B %s%s, %lldx%lldx%lld, %d call%s%s%s", iris_gemm_path_name(k.path), k.layout == IRIS_GEMM_A_ROWS ? "rows" : "cols", tname(k.a),
           tname(k.c), k.bt ? "NxK" : "KxN", k.bias ? " +bias" : "", k.M, k.N, k.K, k.iters, k.iters > 1 ? "s (fresh A each)" : "", graph ? ", graph replays" : "", extra);
  report(s, name, ok);
}

// IRIS_GEMM_TEST_WRAP=n (tests/run.sh sets it in a run of its own): every plan's flag block
// starts as if 2^32 - n calls had run on every CTA slot, so that the 12 calls of each plan
// here run at epochs 2^32 - n + 1, ..., 0xffffffff, 0, 1, ... (n in 1..11: the epochs cross
// 0xffffffff -> 0 -> 1). Every path and kernel variant with a flag block (fused: fetcher CTAs
// with help, side fetch, automatic; kernel-unfused; the cp.async core), each call's C against
// float64, and each plan's block word by word at create (the hook took effect) and after the
// calls (every word is where the hook would put it for the last call: its model of a call is
// the kernels'). The cuBLASLt paths have no flag block (their barrier is the collectives':
// IRIS_COLL_TEST_WRAP); one case each runs with the rest. Unset: nothing, and a SKIP line
// where the part was asked for by name (gemm_test N wrap).
static void wrap(Suite &s, bool asked) {
  const int W = s.world;
  const int iters = 12;
  int n;
  std::string extra;
  if (!gemm_wrap_start(s, asked, iters, n, extra)) return;
  const std::string tma = extra + ", flag block checked, cp.async core";
  struct Way { iris_gemm_path_t path; int fetch; iris_gemm_layout_t layout; bool graph; };
  const Way ways[] = {{IRIS_GEMM_PATH_FUSED, 3, IRIS_GEMM_A_ROWS, false},   // fetcher CTAs, GEMM CTAs' side warps stand by (help)
                      {IRIS_GEMM_PATH_FUSED, -1, IRIS_GEMM_A_COLS, false},  // side fetch
                      {IRIS_GEMM_PATH_FUSED, 0, IRIS_GEMM_A_ROWS, true},    // the automatic cut, graph replays
                      {IRIS_GEMM_PATH_KERNEL_UNFUSED, 0, IRIS_GEMM_A_COLS, false},
                      {IRIS_GEMM_PATH_PIPELINED, 0, IRIS_GEMM_A_ROWS, false},
                      {IRIS_GEMM_PATH_UNFUSED, 0, IRIS_GEMM_A_COLS, false}};
  for (const Way &w : ways) {
    Case k = w.layout == IRIS_GEMM_A_ROWS ? Case{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, w.path, 200LL * W, 776, 520, iters, 0}
                                          : Case{IRIS_GEMM_A_COLS, IRIS_FLOAT16, IRIS_FLOAT32, 1, 0, w.path, 600, 392, 136LL * W, iters, 0};
    k.fetch = w.fetch;
    k.wrap = n;
    const bool words = w.path == IRIS_GEMM_PATH_FUSED || w.path == IRIS_GEMM_PATH_KERNEL_UNFUSED;
    char name[180];
    snprintf(name, sizeof name, "%s, %s, fetch_ctas %d", extra.c_str(), words ? "flag block checked" : "no flag block on this path", w.fetch);
    one(s, k, w.graph, name);
  }
  // the cp.async core (IRIS_GEMM_TMA=0, read at create): no help, the per-tile kernel
  setenv("IRIS_GEMM_TMA", "0", 1);
  Case f{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, IRIS_GEMM_PATH_FUSED, 200LL * W, 776, 520, iters, 0};
  Case u{IRIS_GEMM_A_COLS, IRIS_FLOAT16, IRIS_FLOAT32, 1, 0, IRIS_GEMM_PATH_KERNEL_UNFUSED, 600, 392, 136LL * W, iters, 0};
  f.wrap = u.wrap = n;
  one(s, f, true, tma.c_str());
  one(s, u, false, tma.c_str());
  unsetenv("IRIS_GEMM_TMA");
}

// bad input: every rank gets the stated status, nothing is left half-created
static void bad_input(Suite &s) {
  const int W = s.world;
  iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
  iris_ag_gemm_t *g = NULL;
  size_t used = iris_heap_used(s.ctx);
  d.M = 256 * W + 1; d.N = 256; d.K = 256; // rows not divisible by W
  bool ok = iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_ERROR_INVALID_ARGUMENT && !g;
  report(s, "create refuses M not divisible by the world size (layout rows) with IRIS_ERROR_INVALID_ARGUMENT", ok);
  d.M = 256 * W; d.K = 260;
  ok = iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_ERROR_INVALID_ARGUMENT && !g;
  report(s, "create refuses K not a multiple of 8", ok);
  d.K = 256; d.N = s.rank == W - 1 ? 264 : 256; // the last rank disagrees
  ok = iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_ERROR_MISMATCH && !g;
  report(s, "create with a different N on one rank: IRIS_ERROR_MISMATCH on every rank", ok);
  d.N = 256; d.gemm_streams = 3;
  ok = iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_ERROR_INVALID_ARGUMENT && !g;
  report(s, "create refuses gemm_streams = 3", ok);
  d.gemm_streams = 0;
  ok = iris_heap_used(s.ctx) == used;
  report(s, "refused creates leave the heap as it was", ok);
  // host memory short for the plan on the last rank only (IRIS_TEST_HOOKS): every rank
  // still reaches the agreement
#if defined(IRIS_GEMM_HAVE_CORE)
  for (iris_gemm_path_t path : {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED, IRIS_GEMM_PATH_FUSED}) {
#else
  for (iris_gemm_path_t path : {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED}) {
#endif
    iris_ag_gemm_desc_t h = d;
    std::string name = std::string("create with host memory short for the plan on the last rank only, path ") + iris_gemm_path_name(path) +
                       ": IRIS_ERROR_OUT_OF_MEMORY there, IRIS_ERROR_MISMATCH naming it elsewhere, within 10 s, the heap as it was; the next create succeeds";
    h.path = path;
    report(s, name.c_str(),
           plan_host_memory_short<iris_ag_gemm_t>(s, [&](iris_ag_gemm_t **q) { return iris_ag_gemm_create(s.ctx, &h, q); }, iris_ag_gemm_destroy));
  }
  // run-time checks
  __nv_bfloat16 *a = NULL, *b = NULL, *c = NULL, *off = NULL;
  ok = iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_SUCCESS;
  ok = ok && iris_malloc(s.ctx, (size_t)d.M / W * d.K * 2, (void **)&a) == IRIS_SUCCESS;
  ok = ok && cudaMalloc(&b, (size_t)d.K * d.N * 2) == cudaSuccess && cudaMalloc(&c, (size_t)d.M * d.N * 2 + 256) == cudaSuccess &&
       cudaMalloc(&off, (size_t)d.M / W * d.K * 2) == cudaSuccess;
  if (ok) {
    ok = iris_ag_gemm_run(g, off, b, NULL, c, s.stream) == IRIS_ERROR_NOT_IN_HEAP;
    ok = ok && iris_ag_gemm_run(g, a, b, c, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT;       // bias the plan does not take
    ok = ok && iris_ag_gemm_run(g, a, b, NULL, c + 1, s.stream) == IRIS_ERROR_INVALID_ARGUMENT; // misaligned C
    ok = ok && iris_ag_gemm_run(g, a, NULL, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT;
  }
  report(s, "run refuses an A shard off the heap (NOT_IN_HEAP), an unexpected bias, a misaligned C, a NULL B", ok);
  // C over an input: written while the GEMM reads B, while the peers read the A shard
  ok = ok && iris_ag_gemm_run(g, a, b, NULL, (__nv_bfloat16 *)a, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "overlaps the A shard");
  ok = ok && iris_ag_gemm_run(g, a, b, NULL, b, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "overlaps B");
  report(s, "run refuses a C that overlaps the A shard or B (IRIS_ERROR_INVALID_ARGUMENT naming it)", ok);
  float *sc = NULL;
  ok = ok && cudaMalloc(&sc, 8 * sizeof(float)) == cudaSuccess;
  ok = ok && iris_ag_gemm_run_scaled(g, a, b, sc, sc + 4, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "fp8 inputs only");
  report(s, "run_scaled refuses scales for a bf16 plan (IRIS_ERROR_INVALID_ARGUMENT naming the rule)", ok);
  iris_ag_gemm_destroy(g);
  g = NULL;
  // fp8: the rules of create, then a plan's run without both scales
  d.a_type = IRIS_FLOAT8_E4M3; d.b_transposed = 0;
  ok = iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_ERROR_UNSUPPORTED && strstr(iris_error_detail(), "b_transposed") && !g;
  d.b_transposed = 1; d.path = IRIS_GEMM_PATH_FUSED;
  ok = ok && iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_ERROR_UNSUPPORTED && strstr(iris_error_detail(), "cuBLASLt paths") && !g;
  d.path = IRIS_GEMM_PATH_AUTO; d.K = 264;
  ok = ok && iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "multiple of 16") && !g;
  d.K = 256; d.has_bias = 1; d.c_type = IRIS_FLOAT32;
  ok = ok && iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_ERROR_UNSUPPORTED && strstr(iris_error_detail(), "fp32 bias") && !g;
  d.has_bias = 0; d.c_type = IRIS_BFLOAT16; d.a_type = IRIS_FLOAT8_E5M2;
  ok = ok && iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_ERROR_UNSUPPORTED && !g;
  report(s, "fp8: create refuses B K x N, the fused path, K % 16, a bias with fp32 C, e5m2 (naming the rule)", ok);
  d.a_type = IRIS_FLOAT8_E4M3;
  ok = iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_SUCCESS && iris_ag_gemm_path(g) == iris_ag_gemm_choose_path(&d, W) &&
       iris_ag_gemm_path(g) == (W > 1 ? IRIS_GEMM_PATH_UNFUSED : IRIS_GEMM_PATH_PIPELINED); // 256 rows per rank of a small GEMM
  ok = ok && iris_ag_gemm_run(g, a, b, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "iris_ag_gemm_run_scaled");
  ok = ok && iris_ag_gemm_run_scaled(g, a, b, sc, NULL, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "both per-tensor scales");
  ok = ok && iris_ag_gemm_run_scaled(g, a, b, (const float *)((char *)sc + 2), sc + 4, NULL, c, s.stream) == IRIS_ERROR_INVALID_ARGUMENT;
  report(s, "an fp8 plan (AUTO: unfused at this size): run, and run_scaled without both scales or with a misaligned one, are refused naming the rule", ok);
  d.a_type = IRIS_BFLOAT16; d.b_transposed = 0;
  cudaFree(sc);
  cudaFree(b); cudaFree(c); cudaFree(off);
  if (a) iris_free(s.ctx, a);
  iris_ag_gemm_destroy(g);
  // stage_a: an off-heap A works through the plan's own heap copy
}

// Issue 20's hang: the whole path x shape sweep, reps times, every case a fresh plan
// (created, run twice with fresh A and no host barrier between the calls, destroyed),
// back to back. The first shape is the one that hung: 129 rows per rank, N = 3592,
// K = 8200, bf16, B as N x K, side fetch (fetch_ctas = -1) right before fetch_ctas = 3.
// Each rep is one report line; a failing case prints its name and why on stderr.
static void sweep(Suite &s, int reps) {
  const int W = s.world;
  struct Shape { iris_gemm_layout_t layout; iris_dtype_t a, c; int bt, bias; long long M, N, K; };
  const Shape shapes[] = {
    {IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 0, 129LL * W, 3592, 8200},
    {IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, 200LL * W, 776, 520},
    {IRIS_GEMM_A_COLS, IRIS_FLOAT16, IRIS_FLOAT32, 1, 0, 600, 392, 136LL * W},
    {IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, 128LL * W, 64, 128},
  };
  struct Way { iris_gemm_path_t path; int fetch; };
  const Way ways[] = {{IRIS_GEMM_PATH_PIPELINED, 0}, {IRIS_GEMM_PATH_UNFUSED, 0}, {IRIS_GEMM_PATH_FUSED, -1},
                      {IRIS_GEMM_PATH_FUSED, 3},     {IRIS_GEMM_PATH_FUSED, 0},     {IRIS_GEMM_PATH_KERNEL_UNFUSED, 0}};
  for (int r = 0; r < reps; r++) {
    int cases = 0, bad = 0;
    const time_t t0 = time(NULL);
    for (const Shape &h : shapes)
      for (const Way &w : ways) {
        Case k{h.layout, h.a, h.c, h.bt, h.bias, w.path, h.M, h.N, h.K, 2, 8};
        k.fetch = w.fetch;
        std::string why;
        cases++;
        if (!dispatch(s, k, false, why)) {
          bad++;
          fprintf(stderr, "rank %d: sweep rep %d: %s fetch_ctas %d, %lldx%lldx%lld: %s\n", s.rank, r, iris_gemm_path_name(w.path), w.fetch, h.M, h.N, h.K,
                  why.empty() ? iris_error_detail() : why.c_str());
        }
      }
    char name[300];
    snprintf(name, sizeof name, "sweep rep %d/%d: %d plans (4 shapes incl. %lldx3592x8200 B NxK; pipelined, unfused, fused side fetch, fetch_ctas 3, auto, kernel-unfused) "
             "created, run twice, destroyed back to back, exact, no wait timed out (%d s)", r + 1, reps, cases, 129LL * W, (int)(time(NULL) - t0));
    report(s, name, bad == 0);
  }
}

// A stuck peer: the last rank skips a call of the fused kernel. Every other rank's call
// must end within 2x the wait bound, and iris_ag_gemm_check must return IRIS_ERROR_TIMEOUT
// naming the last rank, then IRIS_SUCCESS (the record is cleared). The plan is out of step
// afterwards, so it is destroyed; a fresh plan afterwards must be exact again.
template <typename T>
static bool stuck_case(Suite &s, iris_gemm_path_t path, int fetch, std::string &why, double &secs) {
  const int W = s.world, me = s.rank, late = W - 1;
  const double bound = (double)IRIS_WAIT_TIMEOUT_NS * 1e-9;
  iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
  d.M = 128LL * W; d.N = 512; d.K = 1024; d.b_transposed = 1; d.path = path; d.fetch_ctas = fetch;
  iris_ag_gemm_t *g = NULL;
  T *a = NULL, *b = NULL, *c = NULL;
  bool ok = true;
  secs = 0;
  IK(iris_ag_gemm_create(s.ctx, &d, &g));
  IK(iris_malloc(s.ctx, (size_t)d.M / W * d.K * sizeof(T), (void **)&a));
  CK(cudaMalloc(&b, (size_t)d.K * d.N * sizeof(T)));
  CK(cudaMalloc(&c, (size_t)d.M * d.N * sizeof(T)));
  k_gen_a<T><<<128, 256, 0, s.stream>>>(a, d.layout, d.M, d.K, W, me, s.seed, 1);
  k_gen_b<T><<<128, 256, 0, s.stream>>>(b, d.K, d.N, 1, s.seed);
  CK(cudaStreamSynchronize(s.stream));
  if (!barrier(s)) return false;
  if (me != late) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    IK(iris_ag_gemm_run(g, a, b, NULL, c, s.stream));
    CK(cudaStreamSynchronize(s.stream));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const iris_status_t st = iris_ag_gemm_check(g);
    const std::string detail = iris_error_detail();
    const std::string late_s = "rank " + std::to_string(late);
    const bool named = detail.find(late_s + "'s") != std::string::npos || detail.find(late_s + " to") != std::string::npos;
    if (st != IRIS_ERROR_TIMEOUT) { ok = false; why = "iris_ag_gemm_check returned " + std::string(iris_status_string(st)) + ", want IRIS_ERROR_TIMEOUT"; }
    else if (!named) { ok = false; why = "the error does not name " + late_s + ": " + detail; }
    else if (secs > 2 * bound + 1.0) { ok = false; why = "the call took " + std::to_string(secs) + " s, more than 2x the bound"; }
    else if (iris_ag_gemm_check(g) != IRIS_SUCCESS) { ok = false; why = "a second check still reports an error (not cleared)"; }
    if (me == 0) printf("# [%s] stuck peer, %s fetch_ctas %d: call ended after %.2f s (bound %.1f s): %s\n", s.tag.c_str(), iris_gemm_path_name(path), fetch, secs, bound,
                        detail.c_str());
  }
  cudaFree(b); cudaFree(c);
  IK(iris_free(s.ctx, a));
  IK(iris_ag_gemm_destroy(g));
  return ok;
}
static void stuck(Suite &s) {
  const int W = s.world;
  struct Way { iris_gemm_path_t path; int fetch; const char *tma; };
  const Way ways[] = {{IRIS_GEMM_PATH_FUSED, 3, NULL}, {IRIS_GEMM_PATH_FUSED, -1, NULL}, {IRIS_GEMM_PATH_FUSED, 0, "0"}, {IRIS_GEMM_PATH_KERNEL_UNFUSED, 0, NULL}};
  for (const Way &w : ways) {
    std::string why;
    double secs = 0;
    if (w.tma) setenv("IRIS_GEMM_TMA", w.tma, 1);
    const bool ok = stuck_case<__nv_bfloat16>(s, w.path, w.fetch, why, secs);
    if (w.tma) unsetenv("IRIS_GEMM_TMA");
    if (!ok) fprintf(stderr, "rank %d: %s\n", s.rank, why.empty() ? iris_error_detail() : why.c_str());
    char name[300];
    snprintf(name, sizeof name, "stuck peer (rank %d skips a call), %s fetch_ctas %d%s: every other rank's call ends within 2x the wait bound, "
             "iris_ag_gemm_check says IRIS_ERROR_TIMEOUT naming rank %d, then clears", W - 1, iris_gemm_path_name(w.path), w.fetch, w.tma ? ", cp.async core" : "", W - 1);
    report(s, name, ok);
  }
  // a fresh plan after the failures is exact again; where fetcher CTAs start late
  // (gemm_test_t2: IRIS_GEMM_FETCHER_DELAY_NS), the GEMM CTAs fetch A for them
  Case k{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 0, IRIS_GEMM_PATH_FUSED, 129LL * W, 3592, 8200, 2, 8};
  k.fetch = 3;
#if defined(IRIS_GEMM_FETCHER_DELAY_NS)
  one(s, k, false, ", after the stuck-peer calls, fetcher CTAs 100 ms late: the GEMM CTAs fetch for them, no wait times out");
#else
  one(s, k, false, ", after the stuck-peer calls");
#endif
}

// A run refused on one rank only (iris_gemm.h, Rules: "A run refused on one rank"): rank 1
// calls run with a bad argument, the others well, one side late by 50 ms. Every rank's call
// must end within 1.5 s (under the 2-s bounds the run line sets: IRIS_WAIT_TIMEOUT_MS=2000
// for the device barriers, gemm_test_t2's IRIS_WAIT_TIMEOUT_NS for the fused kernels, so a
// refusal that took no part shows as a timeout); rank 1 gets the refusal, saying it took
// part; every other rank IRIS_ERROR_MISMATCH naming rank 1 (iris_ag_gemm_check on the fused
// paths, the context's mismatch elsewhere: iris_get_async_error); nothing of rank 1's is
// written (its C and the buffer it passed are still poisoned); then the next good run is
// exact on every rank. "alike": every rank refuses the call: the refusals only, nothing
// pending anywhere, the next run exact.
enum { REF_NULL_B, REF_BIAS, REF_MISALIGNED_C, REF_OFF_HEAP, REF_C_OVER_B, REF_FP8_UNSCALED };
static const char *const ref_names[] = {"a NULL B", "a bias the plan does not take", "a misaligned C", "an A shard off the heap", "C over B",
                                        "iris_ag_gemm_run on an fp8 plan (no scales)"};
static double secs_now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
// whether every byte of the device buffer p still holds v
static bool all_bytes(const void *p, size_t bytes, unsigned char v, const char *what, std::string &why) {
  std::vector<unsigned char> h(bytes);
  if (cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) { why = std::string("reading ") + what; return false; }
  for (size_t i = 0; i < bytes; i++)
    if (h[i] != v) { why = std::string(what) + " was written (byte " + std::to_string(i) + ")"; return false; }
  return true;
}
template <typename T>
static bool refused_case(Suite &s, iris_gemm_path_t path, iris_gemm_layout_t layout, int fetch, int kind, int skew_ms, bool alike, int times, std::string &why) {
  const int W = s.world, me = s.rank, bad = 1;
  const bool fp8 = kind == REF_FP8_UNSCALED, refuses = alike || me == bad, fused = path == IRIS_GEMM_PATH_FUSED || path == IRIS_GEMM_PATH_KERNEL_UNFUSED;
  const iris_dtype_t at = fp8 ? IRIS_FLOAT8_E4M3 : IRIS_BFLOAT16;
  Case k{layout, at, IRIS_BFLOAT16, fp8 ? 1 : 0, 0, path, layout == IRIS_GEMM_A_ROWS ? 128LL * W : 264, 264, layout == IRIS_GEMM_A_ROWS ? 256 : 128LL * W, 1, 0};
  k.fetch = fetch;
  iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
  d.layout = k.layout; d.M = k.M; d.N = k.N; d.K = k.K; d.a_type = at; d.b_transposed = k.bt; d.path = path; d.fetch_ctas = fetch;
  iris_ag_gemm_t *g = NULL;
  IK(iris_ag_gemm_create(s.ctx, &d, &g));
  const size_t shard = (size_t)(layout == IRIS_GEMM_A_ROWS ? k.M / W * k.K : k.M * (k.K / W)) * sizeof(T), c_bytes = (size_t)k.M * k.N * 2;
  const size_t b_bytes = (size_t)k.K * k.N * sizeof(T), x_bytes = (b_bytes > c_bytes ? b_bytes : c_bytes) + 512;
  T *a = NULL, *b = NULL, *off = NULL;
  char *c = NULL, *x = NULL; // C (256 bytes beyond it, for a misaligned one); x: a poisoned buffer a refusal passes as bias or as B under C
  float *sc = NULL;
  IK(iris_malloc(s.ctx, shard, (void **)&a));
  CK(cudaMalloc(&b, b_bytes));
  CK(cudaMalloc(&off, shard));
  CK(cudaMalloc(&c, c_bytes + 256));
  CK(cudaMalloc(&x, x_bytes));
  CK(cudaMalloc(&sc, 8 * sizeof(float)));
  k_gen_a<T><<<128, 256, 0, s.stream>>>(a, layout, k.M, k.K, W, me, s.seed, 1);
  k_gen_b<T><<<128, 256, 0, s.stream>>>(b, k.K, k.N, k.bt, s.seed);
  k_gen_scales<<<1, 1, 0, s.stream>>>(sc, s.seed, 1);
  CK(cudaMemsetAsync(c, 0xff, c_bytes + 256, s.stream));
  CK(cudaMemsetAsync(x, 0xff, x_bytes, s.stream));
  CK(cudaStreamSynchronize(s.stream));
  if (!barrier(s)) return false;
  if ((skew_ms > 0 && me == 0) || (skew_ms < 0 && me == bad)) usleep((useconds_t)(skew_ms > 0 ? skew_ms : -skew_ms) * 1000);
  const double t0 = secs_now();
  iris_status_t st;
  bool ok = true;
  for (int rep = 0; rep < times && ok; rep++) { // times 2: the same call twice in a row, not synchronised between
    if (refuses) {
      switch (kind) {
      case REF_NULL_B: st = iris_ag_gemm_run(g, a, NULL, NULL, c, s.stream); break;
      case REF_BIAS: st = iris_ag_gemm_run(g, a, b, x, c, s.stream); break;
      case REF_MISALIGNED_C: st = iris_ag_gemm_run(g, a, b, NULL, c + 2, s.stream); break;
      case REF_OFF_HEAP: st = iris_ag_gemm_run(g, off, b, NULL, c, s.stream); break;
      case REF_C_OVER_B: st = iris_ag_gemm_run(g, a, x, NULL, x + 256, s.stream); break;
      default: st = iris_ag_gemm_run(g, a, b, NULL, c, s.stream); break;
      }
      const std::string detail = iris_error_detail();
      if (st != (kind == REF_OFF_HEAP ? IRIS_ERROR_NOT_IN_HEAP : IRIS_ERROR_INVALID_ARGUMENT)) { ok = false; why = std::string("the refused run returned ") + iris_status_string(st) + ": " + detail; }
      else if (detail.find("took part") == std::string::npos) { ok = false; why = "the refusal does not say it took part: " + detail; }
    } else {
      st = fp8 ? iris_ag_gemm_run_scaled(g, a, b, sc + 1, sc + 4, NULL, c, s.stream) : iris_ag_gemm_run(g, a, b, NULL, c, s.stream);
      if (st != IRIS_SUCCESS) { ok = false; why = std::string("the good run returned ") + iris_status_string(st) + ": " + iris_error_detail(); }
    }
  }
  CK(cudaStreamSynchronize(s.stream));
  const double secs = secs_now() - t0;
  if (ok && secs > 1.5) { ok = false; why = "the call took " + std::to_string(secs) + " s (a wait ran out: the refusal did not take part?)"; }
  // the errors: the plan's record (fused paths), then the context's pending mismatch
  const iris_status_t pc = iris_ag_gemm_check(g);
  const std::string pc_detail = pc == IRIS_SUCCESS ? "" : iris_error_detail();
  const iris_status_t ae = iris_get_async_error(s.ctx);
  const std::string ae_detail = ae == IRIS_SUCCESS ? "" : iris_error_detail();
  if (ok) ok = refused_errors_as_wanted("iris_ag_gemm_check", pc, pc_detail, ae, ae_detail, alike, fused, me, bad, why);
  // two refused calls in a row: the record names the first (the plan's call 1), which the
  // peer must have seen as refused, not passed on the refusing rank's later signals
  if (ok && times > 1 && fused && !alike && me != bad && pc_detail.find("call 1:") == std::string::npos) {
    ok = false;
    why = "the record does not name the first refused call (call 1): " + pc_detail;
  }
  if (ok && me == 0 && !alike) printf("# [%s] refused run, %s: rank 0 ended after %.3f s with %s\n", s.tag.c_str(), iris_gemm_path_name(path), secs, (fused ? pc_detail : ae_detail).c_str());
  // nothing of a refusing rank's written
  if (ok && refuses) ok = all_bytes(c, c_bytes + 256, 0xff, "C", why) && all_bytes(x, x_bytes, 0xff, "the buffer passed as bias or B", why);
  // the next good run, on every rank: exact
  k_gen_a<T><<<128, 256, 0, s.stream>>>(a, layout, k.M, k.K, W, me, s.seed, 2);
  k_gen_scales<<<1, 1, 0, s.stream>>>(sc, s.seed, 2);
  CK(cudaMemsetAsync(c, 0xff, c_bytes, s.stream));
  st = fp8 ? iris_ag_gemm_run_scaled(g, a, b, sc + 1, sc + 4, NULL, c, s.stream) : iris_ag_gemm_run(g, a, b, NULL, c, s.stream);
  CK(cudaStreamSynchronize(s.stream));
  if (ok && st != IRIS_SUCCESS) { ok = false; why = std::string("the next run returned ") + iris_status_string(st) + ": " + iris_error_detail(); }
  if (ok && (iris_ag_gemm_check(g) != IRIS_SUCCESS || iris_get_async_error(s.ctx) != IRIS_SUCCESS)) { ok = false; why = std::string("the next run: ") + iris_error_detail(); }
  if (ok) {
    std::vector<__nv_bfloat16> h((size_t)k.M * k.N);
    CK(cudaMemcpy(h.data(), c, c_bytes, cudaMemcpyDeviceToHost));
    ok = check_c<T, __nv_bfloat16>(s, k, h, 2, why);
    if (!ok) why = "the next run: " + why;
  }
  cudaFree(b); cudaFree(off); cudaFree(c); cudaFree(x); cudaFree(sc);
  IK(iris_free(s.ctx, a));
  IK(iris_ag_gemm_destroy(g));
  return ok;
}
static void refused(Suite &s) {
  if (s.world < 2) {
    if (s.rank == 0) printf("SKIP: [%s] refused runs: one rank has no peer to take part with\n", s.tag.c_str());
    return;
  }
  // times 2: rank 1 refuses two calls in a row while rank 0 is late (it must not overwrite
  // the first call's refusal before rank 0 has read it)
  struct Way { iris_gemm_path_t path; iris_gemm_layout_t layout; int fetch; int kind; int skew_ms; bool alike; const char *what; int times; };
  const Way ways[] = {
      {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_A_ROWS, 0, REF_BIAS, 50, false, "pipelined rows", 1},
      {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_A_ROWS, 0, REF_NULL_B, 0, true, "pipelined rows", 1},
      {IRIS_GEMM_PATH_UNFUSED, IRIS_GEMM_A_COLS, 0, REF_NULL_B, -50, false, "unfused cols (copy engines)", 1},
      {IRIS_GEMM_PATH_UNFUSED, IRIS_GEMM_A_ROWS, 0, REF_OFF_HEAP, 50, false, "unfused rows (iris_all_gather)", 1},
      {IRIS_GEMM_PATH_UNFUSED, IRIS_GEMM_A_ROWS, 0, REF_MISALIGNED_C, 0, true, "unfused rows (iris_all_gather)", 1},
      {IRIS_GEMM_PATH_FUSED, IRIS_GEMM_A_ROWS, 0, REF_C_OVER_B, -50, false, "fused rows", 1},
      {IRIS_GEMM_PATH_FUSED, IRIS_GEMM_A_COLS, -1, REF_MISALIGNED_C, 50, false, "fused cols, side fetch", 1},
      {IRIS_GEMM_PATH_FUSED, IRIS_GEMM_A_ROWS, 3, REF_NULL_B, 0, true, "fused rows, fetch_ctas 3", 1},
      {IRIS_GEMM_PATH_KERNEL_UNFUSED, IRIS_GEMM_A_ROWS, 0, REF_NULL_B, -50, false, "kernel-unfused rows", 1},
      {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_A_ROWS, 0, REF_FP8_UNSCALED, 50, false, "pipelined rows, fp8", 1},
      {IRIS_GEMM_PATH_FUSED, IRIS_GEMM_A_ROWS, 0, REF_NULL_B, 50, false, "fused rows, two calls in a row", 2},
      {IRIS_GEMM_PATH_FUSED, IRIS_GEMM_A_COLS, -1, REF_NULL_B, 50, false, "fused cols, side fetch, two calls in a row", 2},
      {IRIS_GEMM_PATH_KERNEL_UNFUSED, IRIS_GEMM_A_ROWS, 0, REF_BIAS, 50, false, "kernel-unfused rows, two calls in a row", 2},
      {IRIS_GEMM_PATH_FUSED, IRIS_GEMM_A_ROWS, 0, REF_NULL_B, 0, true, "fused rows, two calls in a row", 2},
  };
  for (const Way &w : ways) {
    std::string why;
    const bool ok = w.kind == REF_FP8_UNSCALED ? refused_case<f8>(s, w.path, w.layout, w.fetch, w.kind, w.skew_ms, w.alike, w.times, why)
                                               : refused_case<__nv_bfloat16>(s, w.path, w.layout, w.fetch, w.kind, w.skew_ms, w.alike, w.times, why);
    if (!ok) fprintf(stderr, "rank %d: refused run, %s, %s: %s\n", s.rank, w.what, ref_names[w.kind], why.empty() ? iris_error_detail() : why.c_str());
    char name[400];
    if (w.alike)
      snprintf(name, sizeof name, "refused run on every rank (%s), %s: each gets the refusal within 1.5 s, nothing else reported, nothing written; the next run exact", ref_names[w.kind],
               w.what);
    else
      snprintf(name, sizeof name, "refused run on rank 1 only (%s), %s, rank %d late by 50 ms: every call ends within 1.5 s, the others get IRIS_ERROR_MISMATCH naming rank 1 "
               "(%s), rank 1's buffers untouched; the next run exact everywhere", ref_names[w.kind], w.what, w.skew_ms > 0 ? 0 : 1,
               w.path == IRIS_GEMM_PATH_FUSED || w.path == IRIS_GEMM_PATH_KERNEL_UNFUSED ? "iris_ag_gemm_check" : "the context's mismatch");
    report(s, name, ok);
  }
}

// Issue 20: all-gather + GEMM runs and collectives of one context issued on two streams
// with no dependency between the streams (as a framework's compute and communication
// streams): the library orders them per context, so every rank's calls pair up. Every
// call has its own inputs and outputs, made before the first call; outputs poisoned;
// each C checked against float64, each all-reduce exactly.
static void streams(Suite &s) {
  const int W = s.world, me = s.rank, rounds = 8;
  const size_t ar_n = 4096;
  struct Way { iris_gemm_path_t path; int fetch; };
  const Way ways[] = {{IRIS_GEMM_PATH_PIPELINED, 0}, {IRIS_GEMM_PATH_FUSED, 0}, {IRIS_GEMM_PATH_FUSED, 3}, {IRIS_GEMM_PATH_KERNEL_UNFUSED, 0}};
  cudaStream_t st[2];
  for (auto &x : st) cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
  for (const Way &w : ways) {
    Case k{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 0, w.path, 128LL * W, 392, 520, rounds, 0};
    iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
    d.M = k.M; d.N = k.N; d.K = k.K; d.b_transposed = 1; d.path = w.path; d.fetch_ctas = w.fetch;
    iris_ag_gemm_t *g = NULL;
    bool ok = iris_ag_gemm_create(s.ctx, &d, &g) == IRIS_SUCCESS;
    const size_t shard = (size_t)(k.M / W * k.K);
    std::vector<__nv_bfloat16 *> a(rounds, nullptr), c(rounds, nullptr);
    std::vector<int *> ai(rounds, nullptr), ao(rounds, nullptr);
    __nv_bfloat16 *b = NULL;
    std::string why;
    ok = ok && cudaMalloc(&b, (size_t)k.K * k.N * 2) == cudaSuccess;
    for (int r = 0; ok && r < rounds; r++) {
      ok = iris_malloc(s.ctx, shard * 2, (void **)&a[r]) == IRIS_SUCCESS && iris_malloc(s.ctx, ar_n * 4, (void **)&ai[r]) == IRIS_SUCCESS &&
           iris_malloc(s.ctx, ar_n * 4, (void **)&ao[r]) == IRIS_SUCCESS && cudaMalloc(&c[r], (size_t)k.M * k.N * 2) == cudaSuccess;
      if (!ok) break;
      k_gen_a<__nv_bfloat16><<<256, 256>>>(a[r], k.layout, k.M, k.K, W, me, s.seed, 100 + r);
      k_gen_int<<<16, 256>>>(ai[r], ar_n, s.seed, me, r);
      cudaMemset(c[r], 0xff, (size_t)k.M * k.N * 2);
      cudaMemset(ao[r], 0xa5, ar_n * 4);
    }
    if (ok) {
      k_gen_b<__nv_bfloat16><<<256, 256>>>(b, k.K, k.N, 1, s.seed);
      ok = cudaDeviceSynchronize() == cudaSuccess && iris_barrier(s.ctx) == IRIS_SUCCESS;
    }
    for (int r = 0; ok && r < rounds; r++) { // GEMM on one stream, all-reduce on the other, swapping each round
      ok = iris_ag_gemm_run(g, a[r], b, NULL, c[r], st[r % 2]) == IRIS_SUCCESS &&
           iris_all_reduce(s.ctx, ai[r], ao[r], ar_n, IRIS_INT32, IRIS_SUM, st[(r + 1) % 2]) == IRIS_SUCCESS;
      if (me == r % W && r % 3 == 1) usleep(5000); // a little host skew
    }
    ok = ok && cudaDeviceSynchronize() == cudaSuccess;
    if (ok && iris_ag_gemm_check(g) != IRIS_SUCCESS) { why = iris_error_detail(); ok = false; }
    if (ok && iris_get_async_error(s.ctx) != IRIS_SUCCESS) { why = iris_error_detail(); ok = false; }
    std::vector<__nv_bfloat16> h((size_t)k.M * k.N);
    std::vector<int> hi(ar_n);
    for (int r = 0; ok && r < rounds; r++) {
      ok = cudaMemcpy(h.data(), c[r], h.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess && check_c<__nv_bfloat16, __nv_bfloat16>(s, k, h, 100 + r, why);
      ok = ok && cudaMemcpy(hi.data(), ao[r], ar_n * 4, cudaMemcpyDeviceToHost) == cudaSuccess;
      for (size_t i = 0; ok && i < ar_n; i++) {
        if (hi[i] != int_sum(s.seed, W, r, i)) { why = "all-reduce of round " + std::to_string(r) + " element " + std::to_string(i) + " wrong"; ok = false; }
      }
    }
    if (!ok) fprintf(stderr, "rank %d: streams, %s fetch_ctas %d: %s\n", me, iris_gemm_path_name(w.path), w.fetch, why.empty() ? iris_error_detail() : why.c_str());
    for (int r = 0; r < rounds; r++) {
      if (a[r]) iris_free(s.ctx, a[r]);
      if (ai[r]) iris_free(s.ctx, ai[r]);
      if (ao[r]) iris_free(s.ctx, ao[r]);
      cudaFree(c[r]);
    }
    cudaFree(b);
    if (g) iris_ag_gemm_destroy(g);
    char name[200];
    snprintf(name, sizeof name, "%d rounds of all-gather + GEMM (%s, fetch_ctas %d) and an all-reduce on two streams that swap each round, no dependency between them: exact",
             rounds, iris_gemm_path_name(w.path), w.fetch);
    report(s, name, ok);
  }
  for (auto &x : st) cudaStreamDestroy(x);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n = argc > 1 ? atoi(argv[1]) : 2, rank;
  const char *mode = argc > 2 ? argv[2] : "";
  const bool quick = !strcmp(mode, "quick");
  iris_launch_t L;
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("FAIL: [gemm w=%d] launch: %s\n", n, iris_error_detail()); return 1; }
  if (rank < 0) {
    iris_status_t st = iris_launch_wait(&L, 900000);
    printf("%s: [gemm w=%d] every rank exits cleanly%s%s\n", st == IRIS_SUCCESS ? "PASS" : "FAIL", n, st == IRIS_SUCCESS ? "" : ": ", st == IRIS_SUCCESS ? "" : iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  Suite s = {};
  s.rank = rank;
  s.world = n;
  s.tag = "gemm w=" + std::to_string(n);
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
  if (!strcmp(mode, "sweep") || !strcmp(mode, "stuck") || !strcmp(mode, "streams") || !strcmp(mode, "wrap") || !strcmp(mode, "refused")) {
    if (!strcmp(mode, "sweep")) sweep(s, argc > 3 ? atoi(argv[3]) : 3);
    else if (!strcmp(mode, "streams")) streams(s);
    else if (!strcmp(mode, "refused")) refused(s);
    else if (!strcmp(mode, "wrap")) wrap(s, true);
    else stuck(s);
    int rc = s.failed ? 1 : 0;
    cudaStreamDestroy(s.stream);
    if (iris_finalize(s.ctx) != IRIS_SUCCESS) rc = 1;
    return rc;
  }
  wrap(s, false); // where IRIS_GEMM_TEST_WRAP is set (then every plan below starts near the wrap too)
  const iris_gemm_path_t paths[] = {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED, IRIS_GEMM_PATH_FUSED, IRIS_GEMM_PATH_KERNEL_UNFUSED};
  for (iris_gemm_path_t p : paths) {
    // odd shapes: M, N not tile multiples, K not a multiple of 64
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, p, 200LL * W, 776, 520, 3, 0}, false);
    one(s, Case{IRIS_GEMM_A_COLS, IRIS_FLOAT16, IRIS_FLOAT32, 1, 0, p, 600, 392, 136LL * W, 3, 0}, false);
    if (quick) continue;
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_FLOAT16, IRIS_FLOAT16, 1, 1, p, 64LL * W + 0, 8, 8, 2, 0}, false);
    one(s, Case{IRIS_GEMM_A_COLS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, p, 1000, 1032, 512LL * W, 2, 0}, false);
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_FLOAT32, 0, 0, p, 1024LL * W, 1536, 2048, 2, 48}, false);
    // graphs: captured once, replayed with fresh A
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, p, 256LL * W, 512, 1024, 30, 0}, true);
    one(s, Case{IRIS_GEMM_A_COLS, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 0, p, 384, 256, 256LL * W, 30, 0}, true);
  }
  // fp8 e4m3 with per-tensor scales (fresh every call), B N x K (cuBLASLt's fp8 GEMM is TN
  // only), the cuBLASLt paths
  for (iris_gemm_path_t p : {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED}) {
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_FLOAT8_E4M3, IRIS_BFLOAT16, 1, 1, p, 200LL * W, 776, 528, 3, 0}, false);
    one(s, Case{IRIS_GEMM_A_COLS, IRIS_FLOAT8_E4M3, IRIS_FLOAT32, 1, 0, p, 600, 392, 144LL * W, 3, 0}, false);
    if (quick) continue;
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_FLOAT8_E4M3, IRIS_FLOAT16, 1, 1, p, 64LL * W + 0, 8, 16, 2, 0}, false);
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_FLOAT8_E4M3, IRIS_BFLOAT16, 1, 0, p, 256LL * W, 512, 1024, 30, 0}, true);
    one(s, Case{IRIS_GEMM_A_COLS, IRIS_FLOAT8_E4M3, IRIS_BFLOAT16, 1, 1, p, 384, 256, 256LL * W, 30, 0}, true);
  }
  {
    // the fused kernel's engine: the TMA core on Hopper (this test is built for sm_90a);
    // IRIS_GEMM_TMA=0 selects the cp.async core, which must stay correct too
    iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
    d.M = 128LL * W; d.N = 64; d.K = 128; d.path = IRIS_GEMM_PATH_FUSED;
    iris_ag_gemm_t *g = NULL;
    IK(iris_ag_gemm_create(s.ctx, &d, &g));
    const std::string e1 = iris_ag_gemm_engine(g);
    IK(iris_ag_gemm_destroy(g));
    setenv("IRIS_GEMM_TMA", "0", 1);
    IK(iris_ag_gemm_create(s.ctx, &d, &g));
    const std::string e0 = iris_ag_gemm_engine(g);
    IK(iris_ag_gemm_destroy(g));
    report(s, ("fused engine: " + e1 + " by default, " + e0 + " with IRIS_GEMM_TMA=0").c_str(), e1 == "tma-wgmma" && e0 == "cp.async-wgmma");
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, IRIS_GEMM_PATH_FUSED, 200LL * W, 776, 520, 3, 0}, false, ", cp.async core");
    one(s, Case{IRIS_GEMM_A_COLS, IRIS_FLOAT16, IRIS_FLOAT32, 1, 0, IRIS_GEMM_PATH_FUSED, 600, 392, 136LL * W, 3, 0}, true, ", cp.async core");
    unsetenv("IRIS_GEMM_TMA");
    // the fused kernel without fetcher CTAs: the GEMM CTAs' side warps fetch A (automatic
    // from N ~ 2400 on 132 SMs; fetch_ctas = -1 forces it at the small sizes here)
    Case k1{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, IRIS_GEMM_PATH_FUSED, 200LL * W, 776, 520, 3, 0};
    Case k2{IRIS_GEMM_A_COLS, IRIS_FLOAT16, IRIS_FLOAT32, 1, 0, IRIS_GEMM_PATH_FUSED, 600, 392, 136LL * W, 3, 0};
    Case k3{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, IRIS_GEMM_PATH_FUSED, 256LL * W, 512, 1024, 30, 0};
    Case k4{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, IRIS_GEMM_PATH_FUSED, 128LL * W, 64, 128, quick ? 200 : 2000, 0};
    Case k5{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 1, 0, IRIS_GEMM_PATH_FUSED, 1024LL * W, 3584, 1024, 3, 64}; // automatic side fetch
    k1.fetch = k2.fetch = k3.fetch = k4.fetch = -1;
    one(s, k1, false, ", side fetch");
    one(s, k2, true, ", side fetch");
    one(s, k3, true, ", side fetch");
    one(s, k4, false, ", side fetch");
    one(s, k5, false, ", automatic choice");
  }
  if (!quick) {
    // pipelined, rows, 3 GEMMs per peer shard instead of the merged schedule
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, IRIS_GEMM_PATH_PIPELINED, 300LL * W, 264, 520, 3, 0, 3}, false, ", chunks = 3");
    // pipelined on one GEMM stream, and COLS with 5 chunks over two GEMM streams in a graph
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_FLOAT16, IRIS_FLOAT32, 1, 1, IRIS_GEMM_PATH_PIPELINED, 320LL * W, 264, 520, 3, 0, 2, 1}, false, ", gemm_streams = 1, chunks = 2");
    one(s, Case{IRIS_GEMM_A_COLS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, IRIS_GEMM_PATH_PIPELINED, 1000, 264, 128LL * W, 20, 0, 5, 2}, true, ", gemm_streams = 2, chunks = 5");
    // COLS, 16 chunks of 130 rows: the first chunk (rounded up to 128 rows) leaves 2 rows
    // for the other 15 chunks; no chunk may be empty (a GEMM of 0 rows)
    one(s, Case{IRIS_GEMM_A_COLS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 1, IRIS_GEMM_PATH_PIPELINED, 130, 264, 128LL * W, 3, 0, 16}, false, ", chunks = 16 over 130 rows");
    // many back-to-back calls: every epoch and flag reused; A regenerated between calls
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, IRIS_GEMM_PATH_FUSED, 128LL * W, 64, 128, 2000, 0}, false);
    one(s, Case{IRIS_GEMM_A_COLS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, IRIS_GEMM_PATH_FUSED, 192, 64, 64LL * W, 2000, 0}, true);
    one(s, Case{IRIS_GEMM_A_ROWS, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, IRIS_GEMM_PATH_PIPELINED, 128LL * W, 64, 128, 2000, 0}, true);
  }
  bad_input(s);
  int rc = s.failed ? 1 : 0;
  cudaStreamDestroy(s.stream);
  if (iris_finalize(s.ctx) != IRIS_SUCCESS) rc = 1;
  return rc;
}
