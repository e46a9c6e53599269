// bench_team: teams against NCCL communicators made by ncclCommSplit, same processes,
// same run (NVIDIA; docs/teams.md, "Benchmarks").
//   1. all-reduce, bf16 sum, over 2-rank teams {0,1}, {2,3}, ... (iris_team_split with
//      color = rank / 2; the odd rank out of an odd world opts out): iris_all_reduce_team
//      on heap buffers beside ncclAllReduce on ncclCommSplit(world, rank / 2, rank) on
//      cudaMalloc buffers. Sizes 1 KB .. max_bytes (default 256 MB) by powers of 4. Every
//      team runs at once; each rank times its own calls: a CUDA graph of one call,
//      launched N times back to back, an event between calls, queued behind a short hold
//      kernel so the GPU never waits for the host (N = 200 up to 1 MB, 100 to 16 MB, 40
//      to 64 MB, 20 above, after 5 eager calls and 3 launches). Per rank the
//      median and p99 of the per-call times; printed: the max over ranks of each, and x =
//      NCCL / iris (above 1: iris faster).
//      Correctness: inputs a hash of (seed, world rank, index), never zero, new per size
//      and door; outputs poisoned with NaN; after timing every output element is checked
//      on the GPU against the double sum of the team's inputs (within one bf16 rounding of
//      the result plus one per partial sum). A wrong element: the row says so, exit 1.
//   2. team barrier: one kernel of one block (BARRIER_THREADS threads) runs N barriers back
//      to back over a 2-rank team (the pairs above, all at once) and over the world team
//      (all ranks); time per barrier = kernel time / N (N = 20000, after a warm-up kernel
//      and a host barrier), the median of 5 kernels per rank, the max over ranks.
//      Two forms: iris_team_barrier(iris_coop_block(), ...) per barrier (the epoch read
//      from and written back to the heap each time), and one iris_team_barrier_session
//      whose sync() keeps the epoch in registers. Target: <= 2 us per barrier.
// Usage: bench_team [ranks] [max_bytes]    ranks: 0 (default) = one per visible GPU;
//   max_bytes with a K/M/G suffix. BENCH_TIMEOUT_S: end the ranks after this long
//   (default 1200). NVLink multicast is off (NCCL_NVLS_ENABLE=0, set here too).
// Build: make build/bench_team (bf16 sums only are compiled in: IRIS_COLL_TYPES/_OPS).
#define IRIS_IMPLEMENTATION
#include "../iris_collectives.h"
#include "bench_util.h"

#include <cuda_bf16.h>
#include <nccl.h>

#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define NK(x)                                                                                                     \
  do {                                                                                                            \
    ncclResult_t e_ = (x);                                                                                        \
    if (e_ != ncclSuccess) { fprintf(stderr, "bench_team: %s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(e_)); exit(1); } \
  } while (0)

static const size_t KiB = 1024, MiB = KiB << 10, GiB = MiB << 10;
static const int BARRIER_THREADS = 128, BARRIER_ITERS = 20000, BARRIER_REPEATS = 5;
static int rank, W;
static iris_t *ctx;
static cudaStream_t stream;

__host__ __device__ inline float gen(unsigned long long seed, int r, size_t i) {
  unsigned long long x = seed * 0x9E3779B97F4A7C15ull + ((unsigned long long)r << 40) + i;
  x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27; x *= 0x94D049BB133111EBull; x ^= x >> 31;
  float m = 0.0625f + 0.9375f * (float)(x >> 40) * (1.0f / 16777216.0f);
  return (x & 1) ? -m : m;
}
__global__ void k_fill(__nv_bfloat16 *p, size_t n, unsigned long long seed, int r) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = __float2bfloat16_rn(gen(seed, r, i));
}
// Counts the outputs that differ from the double sum over the team's members (world
// ranks in team order) by more than rtol |ref| + atol; NaN never passes.
__global__ void k_check(const __nv_bfloat16 *out, size_t n, iris_team_t team, unsigned long long seed, double rtol, double atol, unsigned long long *bad) {
  unsigned long long nbad = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    double ref = 0;
    for (int r = 0; r < team.size; r++) ref += (double)__bfloat162float(__float2bfloat16_rn(gen(seed, iris_team_world_rank(&team, r), i)));
    const double got = (double)__bfloat162float(out[i]);
    nbad += !(fabs(got - ref) <= rtol * fabs(ref) + atol);
  }
  if (nbad) atomicAdd(bad, nbad);
}

// Holds the stream for ns nanoseconds, so that the host has queued every timed call
// before the first runs (the per-call times are then the GPU's, not the launch rate).
__global__ void k_hold(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

// N barriers over the team, back to back, by one block; *fail counts the blocks whose
// barrier reported a fault (a wait that ran out).
template <bool SESSION>
__global__ void k_barrier(iris_device_ctx_t dctx, iris_team_t team, int iters, int index, int *fail) {
  bool ok = true;
  if (SESSION) {
    iris_team_barrier_session<iris_coop_block> s(iris_coop_block(), dctx, team, index);
    for (int i = 0; i < iters && ok; i++) ok = s.sync();
  } else {
    for (int i = 0; i < iters && ok; i++) ok = iris_team_barrier(iris_coop_block(), dctx, team, index);
  }
  if (!ok && threadIdx.x == 0) atomicAdd(fail, 1);
}

static double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t i = (size_t)ceil(q * v.size()) - 1;
  return v[std::min(i, v.size() - 1)];
}
// The max over ranks of each of n values (a rank that did not measure passes zeros).
static void max_over_ranks(double *v, int n) {
  std::vector<double> all((size_t)n * W);
  IK(iris_allgather_host(ctx, v, all.data(), n * sizeof(double)));
  for (int k = 0; k < n; k++) {
    v[k] = 0;
    for (int r = 0; r < W; r++) v[k] = std::max(v[k], all[(size_t)r * n + k]);
  }
}
static unsigned long long sum_over_ranks(unsigned long long v) {
  std::vector<unsigned long long> all(W);
  IK(iris_allgather_host(ctx, &v, all.data(), sizeof v));
  unsigned long long s = 0;
  for (int r = 0; r < W; r++) s += all[r];
  return s;
}

static void print_size(char *out, size_t n, size_t b) {
  if (b >= MiB) snprintf(out, n, "%zu MB", b / MiB);
  else snprintf(out, n, "%zu KB", b / KiB);
}

struct Door { const void *in; void *out; };
// One all-reduce of `count` bf16 elements through door d (0: NCCL split, 1: iris team).
static void call(int d, const Door &b, size_t count, ncclComm_t sub, const iris_team_t *team, cudaStream_t s) {
  if (d == 0) NK(ncclAllReduce(b.in, b.out, count, ncclBfloat16, ncclSum, sub, s));
  else IK(iris_all_reduce_team(ctx, team, b.in, b.out, count, IRIS_BFLOAT16, IRIS_SUM, s, NULL));
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int nranks = 0;
  size_t max_bytes = 256 * MiB;
  if (argc > 1) nranks = atoi(argv[1]);
  if (argc > 2) {
    char *end;
    double v = strtod(argv[2], &end);
    max_bytes = (size_t)(v * (*end == 'G' || *end == 'g' ? GiB : *end == 'M' || *end == 'm' ? MiB : *end == 'K' || *end == 'k' ? KiB : 1));
  }
  if (argc > 3 || max_bytes < KiB || max_bytes > 4 * GiB) { fprintf(stderr, "usage: bench_team [ranks] [max_bytes, 1K .. 4G]\n"); return 2; }
  iris_launch_t L;
  IK(iris_launch_local(nranks, &L, &rank));
  if (rank < 0) {
    const char *t = getenv("BENCH_TIMEOUT_S");
    iris_status_t st = iris_launch_wait(&L, (t && *t ? atoi(t) : 1200) * 1000);
    if (st != IRIS_SUCCESS) fprintf(stderr, "bench_team: %s: %s\n", iris_status_string(st), iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1); // never NVLink multicast

  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = 2 * max_bytes + GiB; // the buffers; the team table and its collective states
  IK(iris_init(&cfg, &ctx));
  rank = iris_rank(ctx), W = iris_world_size(ctx);
  if (W < 2) { fprintf(stderr, "bench_team: needs 2 or more ranks (GPUs)\n"); return 1; }
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // the teams: pairs (the odd rank out opts out) and the world
  const bool paired = rank < W - (W % 2);
  iris_team_t world, pair;
  IK(iris_team_get(ctx, IRIS_TEAM_WORLD, &world));
  IK(iris_team_split(ctx, &world, paired ? rank / 2 : IRIS_TEAM_NONE, rank, &pair));

  // NCCL: the world communicator, then the same pairs by ncclCommSplit
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) NK(ncclGetUniqueId(&id));
  std::vector<ncclUniqueId> ids(W);
  IK(iris_allgather_host(ctx, &id, ids.data(), sizeof id));
  ncclComm_t comm, sub = NULL;
  NK(ncclCommInitRank(&comm, W, ids[0], rank));
  NK(ncclCommSplit(comm, paired ? rank / 2 : NCCL_SPLIT_NOCOLOR, rank, &sub, NULL));

  Door door[2];
  void *p;
  CK(cudaMalloc(&p, max_bytes)); door[0].in = p;
  CK(cudaMalloc(&door[0].out, max_bytes));
  IK(iris_malloc(ctx, max_bytes, &p)); door[1].in = p;
  IK(iris_malloc(ctx, max_bytes, &door[1].out));
  unsigned long long *d_bad;
  CK(cudaMalloc(&d_bad, sizeof *d_bad));
  std::vector<cudaEvent_t> ev(201);
  for (auto &e : ev) CK(cudaEventCreate(&e));

  if (rank == 0) {
    char teams[128] = "";
    for (int t = 0; t + 1 < W; t += 2) snprintf(teams + strlen(teams), sizeof teams - strlen(teams), "{%d,%d} ", t, t + 1);
    printf("# bench_team: %d ranks; all-reduce bf16 sum over the 2-rank teams %s(all at once), iris_all_reduce_team (heap buffers) vs ncclAllReduce on "
           "ncclCommSplit (cudaMalloc buffers), NCCL %d.%d.%d, NCCL_NVLS_ENABLE=0\n",
           W, teams, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    printf("# per call: a CUDA graph of one call, launched N times back to back, events between calls; p50 and p99 per rank, max over ranks; "
           "x = NCCL / iris\n");
    printf("%-8s %12s %12s %12s %12s %7s %7s  %s\n", "size", "nccl p50 us", "nccl p99 us", "iris p50 us", "iris p99 us", "x p50", "x p99", "check");
  }
  int failed = 0;
  double worst_x = 1e30;
  size_t worst_at = 0;
  unsigned long long seed = 1000;
  for (size_t bytes = KiB; bytes <= max_bytes; bytes *= 4) {
    const size_t count = bytes / sizeof(__nv_bfloat16);
    const int N = bytes <= MiB ? 200 : bytes <= 16 * MiB ? 100 : bytes <= 64 * MiB ? 40 : 20;
    double st[4] = {0, 0, 0, 0}; // nccl p50, p99, iris p50, p99
    unsigned long long bad[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
      const unsigned long long s = ++seed; // the same on every rank
      if (paired) {
        k_fill<<<1024, 256, 0, stream>>>((__nv_bfloat16 *)door[d].in, count, s, rank);
        CK(cudaGetLastError());
        CK(cudaMemsetAsync(door[d].out, 0xff, bytes, stream)); // NaN
      }
      CK(cudaStreamSynchronize(stream));
      IK(iris_barrier(ctx));
      std::vector<double> t;
      if (paired) {
        for (int i = 0; i < 5; i++) call(d, door[d], count, sub, &pair, stream);
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        call(d, door[d], count, sub, &pair, stream);
        CK(cudaStreamEndCapture(stream, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphDestroy(g));
        CK(cudaGraphUpload(ge, stream));
        for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(ge, stream));
        CK(cudaStreamSynchronize(stream));
        IK(iris_barrier(ctx)); // the timed calls start together on every team
        k_hold<<<1, 1, 0, stream>>>(200000ull + 8000ull * N);
        CK(cudaGetLastError());
        for (int i = 0; i < N; i++) {
          CK(cudaEventRecord(ev[i], stream));
          CK(cudaGraphLaunch(ge, stream));
        }
        CK(cudaEventRecord(ev[N], stream));
        CK(cudaStreamSynchronize(stream));
        for (int i = 0; i < N; i++) {
          float ms;
          CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
          t.push_back(ms * 1e3);
        }
        CK(cudaGraphExecDestroy(ge));
        st[2 * d] = pct(t, 0.5), st[2 * d + 1] = pct(t, 0.99);
        // the last call's output against the double reference: one bf16 rounding of the
        // result plus one per partial sum (|partial| <= team size)
        const double ulp = 1.0 / 128;
        CK(cudaMemsetAsync(d_bad, 0, sizeof *d_bad, stream));
        k_check<<<1024, 256, 0, stream>>>((const __nv_bfloat16 *)door[d].out, count, pair, s, ulp, ulp / 2 * pair.size * pair.size, d_bad);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(&bad[d], d_bad, sizeof bad[d], cudaMemcpyDeviceToHost, stream));
        CK(cudaStreamSynchronize(stream));
      } else {
        IK(iris_barrier(ctx));
      }
      if (bad[d]) fprintf(stderr, "bench_team: rank %d: %s %zu bytes: %llu of %zu elements wrong\n", rank, d ? "iris" : "nccl", bytes, bad[d], count);
    }
    max_over_ranks(st, 4);
    const unsigned long long nb = sum_over_ranks(bad[0]), ib = sum_over_ranks(bad[1]);
    failed |= nb || ib;
    const double xp50 = st[0] / st[2], xp99 = st[1] / st[3];
    if (xp50 < worst_x) worst_x = xp50, worst_at = bytes;
    if (rank == 0) {
      char sz[32], chk[64];
      print_size(sz, sizeof sz, bytes);
      if (nb || ib) snprintf(chk, sizeof chk, "WRONG (nccl %llu, iris %llu elements)", nb, ib);
      else snprintf(chk, sizeof chk, "ok");
      printf("%-8s %12.2f %12.2f %12.2f %12.2f %7.2f %7.2f  %s\n", sz, st[0], st[1], st[2], st[3], xp50, xp99, chk);
    }
  }

  // ---- team barriers
  int *d_fail;
  CK(cudaMalloc(&d_fail, sizeof *d_fail));
  CK(cudaMemset(d_fail, 0, sizeof *d_fail));
  const iris_device_ctx_t dctx = iris_device_context(ctx);
  if (rank == 0) {
    printf("# team barrier: one block of %d threads (iris_coop_block), %d barriers back to back in one kernel; us per barrier, median of %d kernels "
           "per rank, max over ranks\n", BARRIER_THREADS, BARRIER_ITERS, BARRIER_REPEATS);
    printf("%-22s %14s %14s\n", "team", "barrier us", "session us");
  }
  double worst_bar = 0;
  for (int which = 0; which < 2; which++) { // 0: the pairs, 1: the world
    const iris_team_t &team = which ? world : pair;
    const bool mine = which || paired;
    double v[2] = {0, 0};
    for (int form = 0; form < 2; form++) {
      std::vector<double> t;
      for (int k = 0; k <= BARRIER_REPEATS; k++) { // k = 0: warm-up
        IK(iris_barrier(ctx));
        if (!mine) continue;
        CK(cudaEventRecord(ev[0], stream));
        if (form) k_barrier<true><<<1, BARRIER_THREADS, 0, stream>>>(dctx, team, k ? BARRIER_ITERS : 1000, 0, d_fail);
        else k_barrier<false><<<1, BARRIER_THREADS, 0, stream>>>(dctx, team, k ? BARRIER_ITERS : 1000, 0, d_fail);
        CK(cudaGetLastError());
        CK(cudaEventRecord(ev[1], stream));
        CK(cudaStreamSynchronize(stream));
        float ms;
        CK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        if (k) t.push_back(ms * 1e3 / BARRIER_ITERS);
      }
      if (mine) v[form] = pct(t, 0.5);
    }
    max_over_ranks(v, 2);
    worst_bar = std::max(worst_bar, v[0]);
    if (rank == 0) {
      char name[64];
      snprintf(name, sizeof name, which ? "world (%d ranks)" : "pairs (2 ranks each)", W);
      printf("%-22s %14.3f %14.3f\n", name, v[0], v[1]);
    }
  }
  int fails = 0;
  CK(cudaMemcpy(&fails, d_fail, sizeof fails, cudaMemcpyDeviceToHost));
  const unsigned long long bar_fails = sum_over_ranks((unsigned long long)fails);
  failed |= bar_fails != 0;
  if (rank == 0) {
    char sz[32];
    print_size(sz, sizeof sz, worst_at);
    if (bar_fails) printf("# team barrier: %llu kernel(s) reported a fault (a wait ran out)\n", bar_fails);
    printf("# targets: team all-reduce >= 1.0x the NCCL split communicator at every size: %s (lowest p50 x %.2f at %s); "
           "block-level team barrier <= 2 us: %s (%.3f us)\n", worst_x >= 1.0 ? "met" : "NOT met", worst_x, sz, worst_bar <= 2.0 ? "met" : "NOT met", worst_bar);
    printf("%s\n", failed ? "FAIL: bench_team: wrong results (see above)" : "PASS: bench_team: every result checked");
  }

  IK(iris_barrier(ctx));
  if (sub) NK(ncclCommDestroy(sub));
  NK(ncclCommDestroy(comm));
  CK(cudaFree(d_fail));
  CK(cudaFree(d_bad));
  CK(cudaFree((void *)door[0].in));
  CK(cudaFree(door[0].out));
  IK(iris_team_destroy(ctx, &pair));
  IK(iris_finalize(ctx));
  return failed ? 1 : 0;
}
