// Shared by the GPU test programs: status macros, deterministic random values that
// host and device compute alike, and the collective PASS/FAIL report.
#ifndef IRIS_TEST_UTIL_H
#define IRIS_TEST_UTIL_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

#define CK(x)                                                                                           \
  do {                                                                                                  \
    cudaError_t e_ = (x);                                                                               \
    if (e_ != cudaSuccess) {                                                                            \
      fprintf(stderr, "gpu_test: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      return false;                                                                                     \
    }                                                                                                   \
  } while (0)
#define IK(x)                                                                                           \
  do {                                                                                                  \
    iris_status_t s_ = (x);                                                                             \
    if (s_ != IRIS_SUCCESS) {                                                                           \
      fprintf(stderr, "gpu_test: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, iris_error_detail());         \
      return false;                                                                                     \
    }                                                                                                   \
  } while (0)

__host__ __device__ inline uint64_t mix(uint64_t x) { // splitmix64
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
__host__ __device__ inline uint64_t key(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return mix(seed ^ mix(a * 0x100000001B3ULL ^ mix(b * 0x9E37ULL ^ mix(c * 31 + d))));
}
template <typename T> __host__ __device__ inline T gen(uint64_t h);
template <> __host__ __device__ inline int gen<int>(uint64_t h) { return (int)h; }
template <> __host__ __device__ inline unsigned gen<unsigned>(uint64_t h) { return (unsigned)h; }
template <> __host__ __device__ inline long long gen<long long>(uint64_t h) { return (long long)h; }
template <> __host__ __device__ inline unsigned long long gen<unsigned long long>(uint64_t h) { return h; }
template <> __host__ __device__ inline float gen<float>(uint64_t h) { return (float)((int64_t)(h % 2000001) - 1000000) * 0.125f; }
template <> __host__ __device__ inline double gen<double>(uint64_t h) { return (double)((int64_t)(h % 2000000001) - 1000000000) * 0.0625; }
template <typename T> inline bool same(T a, T b) { return memcmp(&a, &b, sizeof a) == 0; }

struct Suite {
  iris_t *ctx;
  int rank, world;
  std::string tag;
  uint64_t seed;
  int passed, failed;
  cudaStream_t stream;
};
static pthread_mutex_t print_mu = PTHREAD_MUTEX_INITIALIZER;

// Collective: every rank passes its verdict; rank 0 prints the combined one.
static bool report(Suite &s, const char *name, bool ok) {
  int mine = ok ? 1 : 0, all[IRIS_MAX_RANKS];
  iris_status_t st = iris_allgather_host(s.ctx, &mine, all, sizeof mine);
  bool every = st == IRIS_SUCCESS;
  std::string bad;
  for (int r = 0; every && r < s.world; r++)
    if (!all[r]) bad += (bad.empty() ? "" : ",") + std::to_string(r);
  if (st != IRIS_SUCCESS) bad = std::string("allgather failed: ") + iris_error_detail();
  bool pass = every && bad.empty();
  if (s.rank == 0) {
    pthread_mutex_lock(&print_mu);
    if (pass) printf("PASS: [%s] %s\n", s.tag.c_str(), name);
    else printf("FAIL: [%s] %s: failed on ranks %s\n", s.tag.c_str(), name, bad.c_str());
    fflush(stdout);
    pthread_mutex_unlock(&print_mu);
  }
  (pass ? s.passed : s.failed)++;
  return pass;
}
static bool barrier(Suite &s) { IK(iris_barrier(s.ctx)); return true; }
static void poison(void *p, size_t bytes) { cudaMemset(p, 0xA5, bytes); cudaDeviceSynchronize(); }


// The Suite of rank r of n ranks as threads on this process's GPU (ctx's device made
// current), tagged "<tag> threads w=n, one GPU", with a seed every rank shares.
static inline Suite shared_gpu_suite(iris_t *ctx, int r, int n, const char *tag) {
  Suite s = {};
  cudaSetDevice(iris_device_ordinal(ctx));
  s.ctx = ctx;
  s.rank = r;
  s.world = n;
  s.tag = std::string(tag) + " threads w=" + std::to_string(n) + ", one GPU";
  uint64_t mine = mix((uint64_t)time(NULL) ^ ((uint64_t)r << 16)), all[IRIS_MAX_RANKS];
  iris_allgather_host(s.ctx, &mine, all, sizeof mine);
  s.seed = all[0];
  if (s.rank == 0) printf("# [%s] seed %llu\n", s.tag.c_str(), (unsigned long long)s.seed);
  return s;
}

// Ranks as threads of one process, all on GPU 0 (iris_init_local with the device listed n
// times: docs/shared_gpu.md): rank(ctx, r, n) in a thread per rank returns its failed
// checks; then one thread finalizes every context. Prints a FAIL line for a bad n or a
// failed bring-up, and the finalize's PASS / FAIL line, tagged "[<tag> threads w=n]".
// Returns 0 when no rank failed and every finalize succeeded.
// A GEMM plan's refused-run case (gemm_test, gemm_rs_test), on this rank after the call:
// the plan's check (pc, named check) and the context's async error (ae) against what the
// case wants (not every rank refused alike: a fused path's peers get the plan's
// IRIS_ERROR_MISMATCH, the others' the context's, naming rank `bad`); false with `why`.
static inline bool refused_errors_as_wanted(const char *check, iris_status_t pc, const std::string &pc_detail, iris_status_t ae, const std::string &ae_detail,
                                            bool alike, bool fused, int me, int bad, std::string &why) {
  const iris_status_t want_pc = !alike && fused && me != bad ? IRIS_ERROR_MISMATCH : IRIS_SUCCESS, want_ae = !alike && !fused ? IRIS_ERROR_MISMATCH : IRIS_SUCCESS;
  const std::string names = "rank " + std::to_string(bad);
  if (pc != want_pc || ae != want_ae) {
    why = std::string("after the call: ") + check + " " + iris_status_string(pc) + " '" + pc_detail + "', iris_get_async_error " + iris_status_string(ae) + " '" +
          ae_detail + "'; want " + iris_status_string(want_pc) + ", " + iris_status_string(want_ae);
    return false;
  }
  if (me != bad && !alike && (fused ? pc_detail : ae_detail).find(names) == std::string::npos) {
    why = "the error does not name " + names + ": " + (fused ? pc_detail : ae_detail);
    return false;
  }
  return true;
}
typedef int (*shared_gpu_rank_fn)(iris_t *ctx, int rank, int world);
static inline int run_ranks_on_gpu0(const char *tag, int n, size_t heap_size, shared_gpu_rank_fn rank) {
  if (n < 2 || n > IRIS_MAX_RANKS) { printf("FAIL: [%s threads] %d ranks: 2 to %d\n", tag, n, IRIS_MAX_RANKS); return 1; }
  // the ranks' streams (a suite's, a case's two, the library's) share the GPU's hardware
  // queues; a kernel queued behind a peer's kernel that waits for it never starts. With the
  // default 8, moe_test threads 4 hung in 2 of 3 runs (one H200): 32, read when CUDA starts
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  std::vector<int> devs(n, 0), failed(n, 0);
  std::vector<iris_t *> ctxs(n, (iris_t *)NULL);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = heap_size;
  if (iris_init_local(&cfg, n, devs.data(), ctxs.data()) != IRIS_SUCCESS) {
    printf("FAIL: [%s threads w=%d] iris_init_local: %s\n", tag, n, iris_error_detail());
    return 1;
  }
  std::vector<std::thread> th;
  for (int i = 0; i < n; i++) th.emplace_back([&, i] { failed[i] = rank(ctxs[i], i, n); });
  int bad = 0;
  for (int i = 0; i < n; i++) {
    th[i].join();
    bad += failed[i];
  }
  bool ok = true;
  for (int i = 0; i < n; i++) ok &= iris_finalize(ctxs[i]) == IRIS_SUCCESS;
  printf("%s: [%s threads w=%d, one GPU] finalize every context from one thread\n", ok ? "PASS" : "FAIL", tag, n);
  return bad || !ok ? 1 : 0;
}

#if defined(IRIS_TEST_HOOKS)
// A plan create with host memory short for the plan on the last rank only (the library's
// test hook, internal/core/plan.h; ranks as processes: one hook per process). That rank
// returns IRIS_ERROR_OUT_OF_MEMORY, the others IRIS_ERROR_MISMATCH naming it, every rank
// within 10 s (it still takes part in each exchange of the create; had it left, the others
// would wait out IRIS_BARRIER_TIMEOUT_MS, 10 minutes by default), no heap block left; then
// the same create succeeds (the ranks' exchanges stay paired). create(&p) makes a plan,
// destroy(p) frees it.
template <typename P, typename Create, typename Destroy>
static bool plan_host_memory_short(Suite &s, Create create, Destroy destroy) {
  const int last = s.world - 1;
  const size_t used = iris_heap_used(s.ctx);
  char names[64];
  struct timespec t0, t1;
  P *p = NULL;
  snprintf(names, sizeof names, "rank %d could not create", last);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  iris_detail_test_plan_alloc_fails = last;
  const iris_status_t st = create(&p);
  iris_detail_test_plan_alloc_fails = -1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const std::string detail = st == IRIS_SUCCESS ? "" : iris_error_detail();
  const double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  bool ok = !p && secs < 10 && iris_heap_used(s.ctx) == used &&
            (s.rank == last ? st == IRIS_ERROR_OUT_OF_MEMORY && detail.find("host memory") != std::string::npos
                            : st == IRIS_ERROR_MISMATCH && detail.find(names) != std::string::npos);
  if (!ok) fprintf(stderr, "rank %d: host memory short on rank %d: %s '%s' after %.1f s, heap %zu -> %zu bytes\n", s.rank, last, iris_status_string(st), detail.c_str(), secs, used, iris_heap_used(s.ctx));
  if (p) destroy(p);
  p = NULL;
  const iris_status_t st2 = create(&p);
  if (st2 != IRIS_SUCCESS) fprintf(stderr, "rank %d: the create after it: %s '%s'\n", s.rank, iris_status_string(st2), iris_error_detail());
  ok = ok && st2 == IRIS_SUCCESS && p;
  if (p) destroy(p);
  return ok;
}
#endif

#endif
