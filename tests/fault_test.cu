// Streams, mismatches and faults of the collectives (issues: several streams of one
// rank; a peer that dies or hangs; a mismatched call under any skew). Ranks are
// processes (iris_launch_local); they may share one GPU.
//
//   fault_test streams N    every collective paired with every other on 2 streams, a
//                           random mix on 3 streams, and a graph captured over 2 streams;
//                           fresh data every call, poisoned outputs, exact references
//   fault_test mismatch N   every kind of mismatch, the late rank on either side with
//                           delays of 0, 1, 100 and 500 ms: seen by every rank, nothing
//                           written (guard bands), the next matching call exact
//   fault_test stuck N      the last rank stops calling: every other rank's next call
//                           fails within 2x the wait bound; later calls fail at once
//   fault_test stuck-fused N  the same with iris_all_reduce_rmsnorm (1 and 8 tokens x 8192
//                           bf16, the fused kernels) as the survivors' call
//   fault_test killed N     the last rank is killed (SIGKILL) mid-loop: the same, the
//                           error names it; abort; finalize completes
//   fault_test graph-killed N  the same while the survivors replay a captured graph
//   fault_test killed-watch N  the last rank is killed mid-loop under a wait bound of
//                           120 s: the peer watch must end the survivors' call within
//                           1.5 s, IRIS_ERROR_PEER_FAILED naming the dead rank
//   fault_test abort N      a watchdog thread aborts a rank whose kernel waits on a
//                           sleeping peer: the wait ends at once, calls fail at once
//   fault_test split-count N  IRIS_COLL_STAGING=1M (262144 fp32 per launch through the
//                           staging area): an all-reduce whose send is off the heap, 300000
//                           elements, 290000 on the last rank (the host splits it into
//                           launches): IRIS_ERROR_MISMATCH on every rank naming the split,
//                           recv untouched, the context fatal, finalize completes
//   fault_test split-place N  the same at 300000 everywhere, the last rank's send off the
//                           heap (several launches), the others' on it (one launch)
//   fault_test split-late N  (N >= 3) 600000 elements (three launches), 590000 on rank 0,
//                           the last rank 300 ms late: the others see the mismatch among
//                           themselves and their later launches overwrite the header slot
//                           the late rank will read; it must still fail at once
//                           (IRIS_ERROR_MISMATCH), not wait out the bound
// Run with a short wait bound: IRIS_WAIT_TIMEOUT_MS=2000 (make test does), the run-time
// bound of a default build (whose compiled bound is 10 minutes).
#define IRIS_IMPLEMENTATION
#include "../iris_collectives.h"
#include "test_util.h"
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <vector>

static double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double wait_bound_s() {
  const char *s = getenv("IRIS_WAIT_TIMEOUT_MS");
  return s && *s ? atof(s) * 1e-3 : IRIS_WAIT_TIMEOUT_NS * 1e-9;
}
static const double kBound = wait_bound_s();

// ----------------------------------------------------------------- data --
// Every value is a small integer in float or int32, so every sum is exact whatever the
// order: the reference is exact.
__host__ __device__ inline float fval(uint64_t seed, int rank, int call, size_t i) { return (float)((int)(key(seed, rank, call, i, 1) % 33) - 16); }
__global__ void k_fill(float *p, size_t n, uint64_t seed, int rank, int call) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = fval(seed, rank, call, i);
}
static void fill(float *p, size_t n, uint64_t seed, int rank, int call, cudaStream_t st) { k_fill<<<64, 256, 0, st>>>(p, n, seed, rank, call); }

enum Kind { AR = 0, AG, RS, A2A, BC, BAR };
struct Op {
  Kind kind;
  size_t count; // elements per rank (AR, BC: the message; AG/RS/A2A: per block)
  const char *name;
};
// in and out element counts of an op
static size_t in_elems(const Op &o, int W) { return (o.kind == RS || o.kind == A2A) ? o.count * W : o.kind == BAR ? 0 : o.count; }
static size_t out_elems(const Op &o, int W) { return (o.kind == AG || o.kind == A2A) ? o.count * W : o.kind == BAR ? 0 : o.count; }
static iris_status_t issue(iris_t *ctx, const Op &o, const float *in, float *out, int call, cudaStream_t st) {
  switch (o.kind) {
  case AR: return iris_all_reduce(ctx, in, out, o.count, IRIS_FLOAT32, IRIS_SUM, st);
  case AG: return iris_all_gather(ctx, in, out, o.count, IRIS_FLOAT32, st);
  case RS: return iris_reduce_scatter(ctx, in, out, o.count, IRIS_FLOAT32, IRIS_SUM, st);
  case A2A: return iris_all_to_all(ctx, in, out, o.count, IRIS_FLOAT32, st);
  case BC: return iris_broadcast(ctx, in, out, o.count, IRIS_FLOAT32, call % iris_world_size(ctx), st);
  default: return iris_barrier_device(ctx, st);
  }
}
// Checks `out` of call `call` against the exact reference; counts mismatches.
static size_t verify(const Op &o, const std::vector<float> &out, uint64_t seed, int me, int W, int call) {
  size_t bad = 0, n = out_elems(o, W);
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    switch (o.kind) {
    case AR: for (int r = 0; r < W; r++) want += fval(seed, r, call, i); break;
    case AG: want = fval(seed, (int)(i / o.count), call, i % o.count); break;
    case RS: for (int r = 0; r < W; r++) want += fval(seed, r, call, (size_t)me * o.count + i); break;
    case A2A: want = fval(seed, (int)(i / o.count), call, (size_t)me * o.count + i % o.count); break;
    case BC: want = fval(seed, call % W, call, i); break;
    default: break;
    }
    if (!same(out[i], want)) bad++;
  }
  return bad;
}

// A call slot: its own input and output on the heap (every call of a round has its own,
// so a call on one stream never shares a buffer with a call on another).
struct Slot {
  float *in, *out;
  size_t cap;
};
static bool make_slots(iris_t *ctx, std::vector<Slot> &slots, int k, size_t cap) {
  slots.resize(k);
  for (int i = 0; i < k; i++) {
    slots[i].cap = cap;
    IK(iris_malloc(ctx, cap * sizeof(float), (void **)&slots[i].in));
    IK(iris_malloc(ctx, cap * sizeof(float), (void **)&slots[i].out));
  }
  return true;
}

// ------------------------------------------------------------- streams --
static bool run_sequence(Suite &s, const std::vector<Op> &ops, const std::vector<int> &stream_of, std::vector<cudaStream_t> &streams, std::vector<Slot> &slots,
                         int call0, size_t *bad_out) {
  const int W = s.world;
  const size_t n = ops.size();
  // poison and fill on the default stream, then make every stream wait for it
  for (size_t i = 0; i < n; i++) {
    const Op &o = ops[i];
    cudaMemsetAsync(slots[i].out, 0xA5, out_elems(o, W) * sizeof(float), 0);
    if (in_elems(o, W)) fill(slots[i].in, in_elems(o, W), s.seed, s.rank, call0 + (int)i, 0);
  }
  CK(cudaDeviceSynchronize());
  IK(iris_barrier(s.ctx)); // every rank's inputs are ready (the collectives do not order the fills)
  for (size_t i = 0; i < n; i++) IK(issue(s.ctx, ops[i], slots[i].in, slots[i].out, call0 + (int)i, streams[stream_of[i]]));
  CK(cudaDeviceSynchronize());
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    const Op &o = ops[i];
    std::vector<float> h(out_elems(o, W));
    if (!h.empty()) CK(cudaMemcpy(h.data(), slots[i].out, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    size_t b = verify(o, h, s.seed, s.rank, W, call0 + (int)i);
    if (b && !*bad_out) fprintf(stderr, "rank %d: call %d (%s on stream %d): %zu of %zu elements wrong\n", s.rank, call0 + (int)i, o.name, stream_of[i], b, h.size());
    bad += b;
  }
  *bad_out += bad;
  return iris_get_async_error(s.ctx) == IRIS_SUCCESS;
}

static const Op kOps[] = {{AR, 1024, "all-reduce 4 KB (LL)"},      {AR, 4096, "all-reduce 16 KB (LL)"},   {AR, 262144, "all-reduce 1 MB (bandwidth)"},
                          {AR, 1 << 20, "all-reduce 4 MB (bandwidth)"}, {AG, 2048, "all-gather 8 KB/rank (LL)"}, {AG, 262144, "all-gather 1 MB/rank"},
                          {RS, 65536, "reduce-scatter 256 KB/rank"}, {A2A, 16384, "all-to-all 64 KB/rank"},  {BC, 1 << 19, "broadcast 2 MB"},
                          {BAR, 0, "device barrier"}};
static const int kNumOps = sizeof kOps / sizeof kOps[0];

static bool test_streams(Suite &s) {
  std::vector<cudaStream_t> streams(3);
  for (auto &st : streams) CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<Slot> slots;
  if (!make_slots(s.ctx, slots, 64, (size_t)1 << 20)) return false; // 4 MB: the largest in or out above at W <= 4
  int call = 1;
  // 1. every pair of ops, alternating two streams, 6 rounds each
  size_t bad = 0;
  bool ok = true;
  for (int a = 0; a < kNumOps; a++)
    for (int b = a; b < kNumOps; b++) {
      std::vector<Op> ops;
      std::vector<int> so;
      for (int r = 0; r < 6; r++) {
        ops.push_back(kOps[a]);
        so.push_back(0);
        ops.push_back(kOps[b]);
        so.push_back(1);
      }
      ok &= run_sequence(s, ops, so, streams, slots, call, &bad);
      call += (int)ops.size();
    }
  char name[200];
  snprintf(name, sizeof name, "every pair of %d collectives (LL, two-shot, bandwidth, device barrier) alternating 2 streams, 6 rounds each: exact", kNumOps);
  report(s, name, ok && bad == 0);
  // 2. a random mix on 3 streams (the same on every rank: the seed is shared)
  bad = 0;
  ok = true;
  for (int rep = 0; rep < 8; rep++) {
    std::vector<Op> ops;
    std::vector<int> so;
    for (int i = 0; i < 48; i++) {
      uint64_t h = key(s.seed, rep, i, 0, 9);
      ops.push_back(kOps[h % kNumOps]);
      so.push_back((int)((h >> 20) % 3));
    }
    ok &= run_sequence(s, ops, so, streams, slots, call, &bad);
    call += (int)ops.size();
  }
  report(s, "384 random collectives on 3 streams, fresh data, poisoned outputs: exact", ok && bad == 0);
  // 3. a graph captured over 2 streams (fork/join), calls alternating, replayed with new
  //    data: the library orders the captured calls inside the graph
  {
    const Op g_ops[4] = {kOps[0], kOps[2], kOps[5], kOps[1]};
    cudaStream_t s0 = streams[0], s1 = streams[1];
    cudaEvent_t fork, join;
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
    CK(cudaEventRecord(fork, s0));
    CK(cudaStreamWaitEvent(s1, fork, 0));
    for (int i = 0; i < 4; i++) IK(issue(s.ctx, g_ops[i], slots[i].in, slots[i].out, 0, i % 2 ? s1 : s0));
    CK(cudaEventRecord(join, s1));
    CK(cudaStreamWaitEvent(s0, join, 0));
    CK(cudaStreamEndCapture(s0, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    bad = 0;
    const int replays = 40;
    for (int r = 0; r < replays; r++) {
      const int c = call + r;
      for (int i = 0; i < 4; i++) {
        cudaMemsetAsync(slots[i].out, 0xA5, out_elems(g_ops[i], s.world) * sizeof(float), 0);
        fill(slots[i].in, in_elems(g_ops[i], s.world), s.seed, s.rank, c * 4 + i, 0); // BC root is call % W = 0 for the captured call 0
      }
      CK(cudaDeviceSynchronize());
      IK(iris_barrier(s.ctx));
      CK(cudaGraphLaunch(exec, s0));
      CK(cudaStreamSynchronize(s0));
      for (int i = 0; i < 4; i++) {
        std::vector<float> h(out_elems(g_ops[i], s.world));
        CK(cudaMemcpy(h.data(), slots[i].out, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
        bad += verify(g_ops[i], h, s.seed, s.rank, s.world, c * 4 + i);
      }
    }
    call += replays;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    report(s, "graph of 4 collectives captured over 2 streams (fork/join), replayed 40 times with new data: exact", bad == 0 && iris_get_async_error(s.ctx) == IRIS_SUCCESS);
  }
  for (auto &st : streams) cudaStreamDestroy(st);
  return true;
}

// ------------------------------------------------------------ mismatch --
static bool test_mismatch(Suite &s) {
  const int W = s.world, late = s.rank == W - 1;
  const size_t guard = 4096, cap = (size_t)1 << 20;
  float *in, *out, *out2, *off;
  IK(iris_malloc(s.ctx, (cap + 2 * guard) * sizeof(float), (void **)&in));
  IK(iris_malloc(s.ctx, (cap * W + 2 * guard) * sizeof(float), (void **)&out));
  IK(iris_malloc(s.ctx, (cap * W + 2 * guard) * sizeof(float), (void **)&out2));
  CK(cudaMalloc((void **)&off, (cap * W + 2 * guard) * sizeof(float))); // a recv off the heap
  struct Case {
    const char *what;
    int kind; // 0 count (bandwidth) 1 count (LL) 2 type 3 op 4 root 5 kind 6 recv buffer 7, 8: refused on one rank (NULL recv; root out of range)
              // 9 count, recv off the heap (the bandwidth kernel stores into the staging area, a pass of its own copies it out)
              // 10, 11: a count of 0 on one rank (the others' bandwidth / latency path): it takes part with a launch of its own
  };
  const Case cases[] = {{"count (bandwidth path)", 0}, {"count (latency path)", 1}, {"data type", 2}, {"reduction op", 3}, {"broadcast root", 4}, {"collective kind", 5}, {"output buffer", 6},
                        {"a call refused on one rank (NULL recv; the others' bandwidth path)", 7}, {"a call refused on one rank (root out of range; the others' latency path)", 8},
                        {"count, recv off the heap (copied out of the staging area)", 9}, {"a count of 0 on one rank (the others' bandwidth path)", 10},
                        {"a count of 0 on one rank (the others' latency path)", 11}};
  const int delays_ms[] = {0, 1, 100, 500};
  int call = 1000;
  for (const Case &c : cases) {
    bool all_ok = true;
    for (int side = 0; side < 2; side++)
      for (int d : delays_ms) {
        const bool odd = side == 0 ? s.rank == 0 : late; // the rank that calls differently
        const bool sleeper = side == 0 ? late : s.rank == 0;
        CK(cudaMemset(out, 0x5a, (cap * W + 2 * guard) * sizeof(float)));
        CK(cudaMemset(out2, 0x5a, (cap * W + 2 * guard) * sizeof(float)));
        CK(cudaMemset(off, 0x5a, (cap * W + 2 * guard) * sizeof(float)));
        fill(in + guard, cap, s.seed, s.rank, call, 0);
        CK(cudaDeviceSynchronize());
        IK(iris_barrier(s.ctx));
        if (sleeper && d) usleep(d * 1000);
        const float *src = in + guard;
        float *dst = out + guard;
        iris_status_t st = IRIS_SUCCESS;
        switch (c.kind) {
        case 0: st = iris_all_reduce(s.ctx, src, dst, odd ? 300001 : 300000, IRIS_FLOAT32, IRIS_SUM, 0); break;
        case 1: st = iris_all_reduce(s.ctx, src, dst, odd ? 1001 : 1000, IRIS_FLOAT32, IRIS_SUM, 0); break;
        case 2: st = iris_all_reduce(s.ctx, src, dst, 5000, odd ? IRIS_INT32 : IRIS_FLOAT32, IRIS_SUM, 0); break;
        case 3: st = iris_all_reduce(s.ctx, src, dst, 200000, IRIS_FLOAT32, odd ? IRIS_MAX : IRIS_SUM, 0); break;
        case 4: st = iris_broadcast(s.ctx, src, dst, 300000, IRIS_FLOAT32, odd ? 0 : W - 1, 0); break;
        case 5: st = odd ? iris_all_gather(s.ctx, src, dst, 4096, IRIS_FLOAT32, 0) : iris_all_reduce(s.ctx, src, dst, 4096, IRIS_FLOAT32, IRIS_SUM, 0); break;
        case 6: st = iris_all_reduce(s.ctx, src, odd ? out2 + guard : dst, 300000, IRIS_FLOAT32, IRIS_SUM, 0); break;
        case 7: st = iris_all_reduce(s.ctx, src, odd ? NULL : dst, 300000, IRIS_FLOAT32, IRIS_SUM, 0); break;
        case 9: st = iris_all_reduce(s.ctx, src, off + guard, odd ? 300001 : 300000, IRIS_FLOAT32, IRIS_SUM, 0); break;
        case 10: st = iris_all_reduce(s.ctx, src, dst, odd ? 0 : 300000, IRIS_FLOAT32, IRIS_SUM, 0); break;
        case 11: st = iris_all_gather(s.ctx, src, dst, odd ? 0 : 1000, IRIS_FLOAT32, 0); break;
        default: st = iris_broadcast(s.ctx, src, dst, 1000, IRIS_FLOAT32, odd ? W : 0, 0); break;
        }
        // a refused call returns its refusal on that rank and still takes part: the others see a mismatch, not a timeout
        const iris_status_t want = c.kind == 7 && odd ? IRIS_ERROR_INVALID_ARGUMENT : c.kind == 8 && odd ? IRIS_ERROR_INVALID_RANK : IRIS_SUCCESS;
        bool ok = st == want;
        if (st != want) fprintf(stderr, "rank %d: %s, delay %d ms on side %d: the call returned %s, want %s\n", s.rank, c.what, d, side, iris_status_string(st), iris_status_string(want));
        CK(cudaDeviceSynchronize());
        iris_status_t chk = iris_collectives_check(s.ctx);
        ok &= chk == IRIS_ERROR_MISMATCH;
        if (chk != IRIS_ERROR_MISMATCH) fprintf(stderr, "rank %d: %s, delay %d ms on side %d: check gave %s (%s)\n", s.rank, c.what, d, side, iris_status_string(chk), iris_error_detail());
        // nothing written anywhere (recv and its guards, the other output too)
        std::vector<unsigned> h((cap * W + 2 * guard));
        CK(cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost));
        size_t touched = 0;
        for (unsigned v : h) touched += v != 0x5a5a5a5au;
        CK(cudaMemcpy(h.data(), out2, h.size() * 4, cudaMemcpyDeviceToHost));
        for (unsigned v : h) touched += v != 0x5a5a5a5au;
        CK(cudaMemcpy(h.data(), off, h.size() * 4, cudaMemcpyDeviceToHost));
        for (unsigned v : h) touched += v != 0x5a5a5a5au;
        if (touched) fprintf(stderr, "rank %d: %s, delay %d: %zu words written\n", s.rank, c.what, d, touched);
        ok &= touched == 0 && iris_collectives_check(s.ctx) == IRIS_SUCCESS; // reported once
        // the next matching call is exact
        call++;
        fill(in + guard, 300000, s.seed, s.rank, call, 0);
        CK(cudaDeviceSynchronize());
        IK(iris_barrier(s.ctx));
        float *next = (c.kind == 9 ? off : out) + guard; // off the heap: the copy out runs where the call matched
        IK(iris_all_reduce(s.ctx, in + guard, next, 300000, IRIS_FLOAT32, IRIS_SUM, 0));
        CK(cudaDeviceSynchronize());
        std::vector<float> r(300000);
        CK(cudaMemcpy(r.data(), next, r.size() * 4, cudaMemcpyDeviceToHost));
        Op o = {AR, 300000, ""};
        ok &= verify(o, r, s.seed, s.rank, W, call) == 0 && iris_collectives_check(s.ctx) == IRIS_SUCCESS;
        call++;
        all_ok &= ok;
      }
    char name[200];
    snprintf(name, sizeof name, "mismatch of %s, either side late by 0/1/100/500 ms: seen on every rank, nothing written, next call exact", c.what);
    report(s, name, all_ok);
  }
  CK(cudaFree(off));
  return true;
}

// ---------------------------------------------------------- split calls --
// A mismatched call that the host splits into several launches (IRIS_COLL_STAGING=1M: a
// chunk of 262144 fp32 per launch). The ranks would enqueue different numbers of launches,
// so their call numbers would fall out of step: launch 0 must mismatch already (its
// signature names the whole call), nothing reach recv, and the mismatch be fatal on every
// rank (reported at once by every later call, not as a timeout). Per-rank verdicts: after
// the fault the host exchange (report) returns it too. False if a step before the verdict
// failed (CK, IK).
// split-late: the odd one out is rank 0, and the last rank (whose call matches the
// others') arrives late. Ranks 0 .. W-2 see the mismatch among themselves, record it
// (fatal), and their waits for the last rank give up; their second and third launches
// still announce, the third in the header slot of the first's parity. The last rank then
// finds a later call where it looks for the first: it must fail at once all the same.
static bool split_case(Suite &s, const char *mode, bool &ok) {
  const int W = s.world, last = s.rank == W - 1;
  const bool place = !strcmp(mode, "split-place"), late = !strcmp(mode, "split-late");
  const size_t n = late ? 600000 : 300000, guard = 4096, words = n + 2 * guard;
  const size_t count = late ? (s.rank == 0 ? 590000 : n) : !place && last ? 290000 : n;
  float *heap_in, *out, *off_in;
  IK(iris_malloc(s.ctx, words * 4, (void **)&heap_in));
  IK(iris_malloc(s.ctx, words * 4, (void **)&out));
  CK(cudaMalloc((void **)&off_in, words * 4));
  // a matching split call first: the launches of a split call match each other, exact
  fill(off_in + guard, n, s.seed, s.rank, 1, 0);
  CK(cudaDeviceSynchronize());
  IK(iris_barrier(s.ctx));
  IK(iris_all_reduce(s.ctx, off_in + guard, out + guard, n, IRIS_FLOAT32, IRIS_SUM, 0));
  CK(cudaDeviceSynchronize());
  std::vector<float> r(n);
  CK(cudaMemcpy(r.data(), out + guard, n * 4, cudaMemcpyDeviceToHost));
  Op o = {AR, n, ""};
  const size_t bad = verify(o, r, s.seed, s.rank, W, 1);
  ok = bad == 0 && iris_collectives_check(s.ctx) == IRIS_SUCCESS;
  if (!ok) fprintf(stderr, "rank %d: the matching split all-reduce: %zu of %zu wrong: %s\n", s.rank, bad, n, iris_error_detail());
  // the mismatched call, recv poisoned
  CK(cudaMemset(out, 0x5a, words * 4));
  fill(off_in + guard, n, s.seed, s.rank, 2, 0);
  fill(heap_in + guard, n, s.seed, s.rank, 2, 0);
  CK(cudaDeviceSynchronize());
  IK(iris_barrier(s.ctx));
  const float *src = (place && !last ? heap_in : off_in) + guard;
  if (late && last) usleep(300000);
  const double t0 = now_s();
  const iris_status_t st = iris_all_reduce(s.ctx, src, out + guard, count, IRIS_FLOAT32, IRIS_SUM, 0);
  CK(cudaDeviceSynchronize()); // every queued launch gives up (the fault is fatal)
  const double took = now_s() - t0;
  const iris_status_t chk = iris_collectives_check(s.ctx);
  char detail[1100];
  snprintf(detail, sizeof detail, "%s", iris_error_detail());
  // the late rank names its out-of-step peer ("a later call"), the others the split
  ok &= st == IRIS_SUCCESS && chk == IRIS_ERROR_MISMATCH && (strstr(detail, "split") != NULL || (late && last && strstr(detail, "later call") != NULL));
  ok &= took < 0.5 * kBound;
  std::vector<unsigned> h(words);
  CK(cudaMemcpy(h.data(), out, words * 4, cudaMemcpyDeviceToHost));
  size_t touched = 0;
  for (unsigned v : h) touched += v != 0x5a5a5a5au;
  ok &= touched == 0;
  // fatal: it stays, and every later call returns it at once
  const double t1 = now_s();
  const iris_status_t later = iris_all_reduce(s.ctx, heap_in, out, 1024, IRIS_FLOAT32, IRIS_SUM, 0), bar = iris_barrier_device(s.ctx, 0);
  const double tlater = now_s() - t1;
  const iris_status_t again = iris_collectives_check(s.ctx), async = iris_get_async_error(s.ctx);
  ok &= later == IRIS_ERROR_MISMATCH && bar == IRIS_ERROR_MISMATCH && again == IRIS_ERROR_MISMATCH && async == IRIS_ERROR_MISMATCH && tlater < 0.5;
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(h.data(), out, words * 4, cudaMemcpyDeviceToHost));
  for (unsigned v : h) touched += v != 0x5a5a5a5au;
  ok &= touched == 0;
  CK(cudaFree(off_in));
  const double t2 = now_s();
  const iris_status_t fin = iris_finalize(s.ctx);
  const double tfin = now_s() - t2;
  ok &= fin == IRIS_SUCCESS && tfin < 5;
  printf("%s: [%s w=%d rank %d] %s: call took %.3f s (bound %.1f s), check %s: %s; %zu words of recv written; later call %s, device barrier %s, check %s, async %s; "
         "finalize %s in %.2f s\n",
         ok ? "PASS" : "FAIL", mode, W, s.rank,
         place  ? "send on the heap (one launch) vs off it on the last rank (several)"
         : late ? "count 600000 vs 590000 on rank 0, the last rank 300 ms late, send off the heap"
                : "count 300000 vs 290000 on the last rank, send off the heap",
         took, kBound,
         iris_status_string(chk), detail, touched, iris_status_string(later), iris_status_string(bar), iris_status_string(again), iris_status_string(async),
         iris_status_string(fin), tfin);
  return true;
}
static int run_split(Suite &s, const char *mode) {
  bool ok = false;
  if (!split_case(s, mode, ok)) printf("FAIL: [%s w=%d rank %d] a step of the test failed (stderr)\n", mode, s.world, s.rank);
  return ok ? 0 : 1;
}

// --------------------------------------------------------------- faults --
// The survivors' side of a dead or stuck last rank: loop all-reduces (4 KB and 4 MB, or
// graph replays) until a call or the async query reports the fault; check the time it
// took, that later calls fail at once, and that finalize completes.
static int survivor(Suite &s, bool graph, bool fused, double t_fault, const char *what, double limit = 2 * kBound + 3, bool watched = false) {
  float *in, *out;
  const size_t big = 1 << 20, hidden = 8192;
  iris_malloc(s.ctx, big * 4, (void **)&in);
  iris_malloc(s.ctx, big * 4, (void **)&out);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  // the fused op on bf16 rows (in: x, out: the output; residual and weight after them)
  unsigned short *res = (unsigned short *)in + 8 * hidden, *w = res + 8 * hidden;
  auto call = [&](int i) -> iris_status_t {
    if (fused) return iris_all_reduce_rmsnorm(s.ctx, in, res, w, out, i % 2 ? 8 : 1, hidden, 1e-6f, IRIS_BFLOAT16, st);
    return iris_all_reduce(s.ctx, in, out, i % 2 ? big : 1024, IRIS_FLOAT32, IRIS_SUM, st);
  };
  cudaGraphExec_t exec = NULL;
  if (graph) {
    cudaGraph_t g;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
    iris_all_reduce(s.ctx, in, out, 1024, IRIS_FLOAT32, IRIS_SUM, st);
    iris_all_reduce(s.ctx, in, out, big, IRIS_FLOAT32, IRIS_SUM, st);
    cudaStreamEndCapture(st, &g);
    cudaGraphInstantiate(&exec, g, 0);
  }
  iris_status_t err = IRIS_SUCCESS;
  double t_err = 0;
  for (int i = 0; err == IRIS_SUCCESS && now_s() < t_fault + 6 * kBound + 20; i++) {
    if (graph) {
      cudaGraphLaunch(exec, st);
    } else {
      err = call(i);
      if (err != IRIS_SUCCESS) break;
    }
    if (i % 4 == 3) cudaStreamSynchronize(st);
    err = iris_get_async_error(s.ctx);
  }
  t_err = now_s();
  const double took = t_err - t_fault;
  char detail[1100];
  snprintf(detail, sizeof detail, "%s", iris_error_detail());
  bool ok = err == IRIS_ERROR_TIMEOUT || err == IRIS_ERROR_PEER_FAILED;
  if (fused) ok &= strstr(detail, "iris_all_reduce_rmsnorm") != NULL; // the fault names the op the user called
  // later calls fail at once, and so does the async query
  double t0 = now_s();
  int refused = 0;
  for (int i = 0; i < 20; i++) refused += call(0) != IRIS_SUCCESS;
  const double later = now_s() - t0;
  ok &= refused == 20 && later < 0.5 && iris_get_async_error(s.ctx) == err;
  ok &= iris_abort(s.ctx) == IRIS_SUCCESS && call(1) != IRIS_SUCCESS;
  cudaStreamSynchronize(st); // the queued kernels have given up their waits
  t0 = now_s();
  iris_status_t fin = iris_finalize(s.ctx);
  const double tfin = now_s() - t0;
  ok &= fin == IRIS_SUCCESS && tfin < 5;
  // at most 2x the bound after the fault, plus time-slicing slack when ranks share a GPU
  // (the peer watch: the lowered bound of 100 ms, the same slack)
  ok &= took < limit;
  if (watched) {
    char dead[32];
    snprintf(dead, sizeof dead, "rank %d (pid", s.world - 1);
    ok &= err == IRIS_ERROR_PEER_FAILED && strstr(detail, dead) && strstr(detail, "peer watch");
  }
  printf("%s: [fault w=%d rank %d] %s%s: the next call failed after %.2f s (bound %.1f s) with %s: %s; 20 later calls failed in %.3f s; finalize %.2f s\n",
         ok ? "PASS" : "FAIL", s.world, s.rank, what, fused ? " (iris_all_reduce_rmsnorm)" : "", took, kBound, iris_status_string(err), detail, later, tfin);
  return ok ? 0 : 1;
}

struct AbortArg {
  iris_t *ctx;
  double delay;
};
static void *abort_later(void *p) {
  AbortArg *a = (AbortArg *)p;
  usleep((useconds_t)(a->delay * 1e6));
  iris_abort(a->ctx);
  return NULL;
}

static int run_fault(Suite &s, const char *mode) {
  const int W = s.world, last = W - 1;
  float *in, *out;
  IK(iris_malloc(s.ctx, 4096, (void **)&in));
  IK(iris_malloc(s.ctx, 4096, (void **)&out));
  // a few good calls first
  for (int i = 0; i < 10; i++) IK(iris_all_reduce(s.ctx, in, out, 1024, IRIS_FLOAT32, IRIS_SUM, 0));
  if (!strcmp(mode, "stuck-fused")) { // and of the fused op, every rank
    void *x, *r, *w, *o;
    IK(iris_malloc(s.ctx, 8192 * 2, &x));
    IK(iris_malloc(s.ctx, 8192 * 2, &r));
    IK(iris_malloc(s.ctx, 8192 * 2, &w));
    IK(iris_malloc(s.ctx, 8192 * 2, &o));
    for (int i = 0; i < 10; i++) IK(iris_all_reduce_rmsnorm(s.ctx, x, r, w, o, 1, 8192, 1e-6f, IRIS_BFLOAT16, 0));
  }
  CK(cudaDeviceSynchronize());
  IK(iris_barrier(s.ctx));
  if (!strcmp(mode, "abort")) {
    if (s.rank == last) { // sleeps through the others' call, then leaves without finalizing a live world
      sleep(4);
      iris_abort(s.ctx);
      iris_finalize(s.ctx);
      return 0;
    }
    AbortArg a = {s.ctx, 0.3};
    pthread_t th;
    pthread_create(&th, NULL, abort_later, &a);
    const double t0 = now_s();
    iris_all_reduce(s.ctx, in, out, 1024, IRIS_FLOAT32, IRIS_SUM, 0); // waits for the sleeping rank
    cudaError_t e = cudaDeviceSynchronize();
    const double waited = now_s() - t0;
    pthread_join(th, NULL);
    iris_status_t q = iris_get_async_error(s.ctx), later = iris_all_reduce(s.ctx, in, out, 1024, IRIS_FLOAT32, IRIS_SUM, 0);
    bool ok = e == cudaSuccess && waited < 0.3 + 1.5 && q == IRIS_ERROR_ABORTED && later == IRIS_ERROR_ABORTED;
    ok &= iris_finalize(s.ctx) == IRIS_SUCCESS;
    printf("%s: [fault w=%d rank %d] iris_abort from a watchdog thread ends a kernel's wait on a sleeping peer after %.2f s (abort at 0.3 s); later calls return %s\n",
           ok ? "PASS" : "FAIL", W, s.rank, waited, iris_status_string(later));
    return ok ? 0 : 1;
  }
  const bool stuck = !strcmp(mode, "stuck") || !strcmp(mode, "stuck-fused");
  if (s.rank == last) {
    if (stuck) {
      sleep((unsigned)(4 * kBound + 6)); // alive, but calls nothing
      iris_finalize(s.ctx);             // its peers are gone or faulted: finalize must not hang
      return 0;
    }
    usleep(200000);
    raise(SIGKILL);
  }
  if (!strcmp(mode, "killed-watch"))
    return survivor(s, false, false, now_s() + 0.2, "the last rank is killed mid-loop, wait bound 120 s: the peer watch ends the call", 1.5, true);
  return survivor(s, !strcmp(mode, "graph-killed"), !strcmp(mode, "stuck-fused"), now_s() + (s.rank == last ? 0 : 0.2),
                  stuck ? "the last rank stops calling" : !strcmp(mode, "killed") ? "the last rank is killed mid-loop" : "the last rank is killed while graphs replay");
}

// iris_collectives_setup with `var` set to `last` on the last rank and `others` on the
// rest (the variable restored after): every rank's setup must fail at once with
// IRIS_ERROR_MISMATCH naming the variable, and free what it took (the heaps stay alike).
static void setup_differs_case(Suite &s, const char *var, const char *last, const char *others, const char *why) {
  const char *was = getenv(var);
  const std::string keep = was ? was : "";
  setenv(var, s.rank == s.world - 1 ? last : others, 1);
  const double t0 = now_s();
  const iris_status_t st = iris_collectives_setup(s.ctx);
  const double took = now_s() - t0;
  const bool named = strstr(iris_error_detail(), var) != NULL;
  if (was) setenv(var, keep.c_str(), 1);
  else unsetenv(var);
  const iris_status_t heap = iris_heap_verify(s.ctx);
  const bool ok = st == IRIS_ERROR_MISMATCH && named && took <= 10.0 && heap == IRIS_SUCCESS;
  if (!ok)
    fprintf(stderr, "rank %d: setup with %s %s on the last rank, %s elsewhere: status %d after %.1f s, heap verify %d: %s\n", s.rank, var, last, others, (int)st, took,
            (int)heap, iris_error_detail());
  char name[256];
  snprintf(name, sizeof name, "%s different on the last rank (%s): iris_collectives_setup fails with IRIS_ERROR_MISMATCH on every rank within 10 s, naming it; the heaps stay alike",
           var, why);
  report(s, name, ok);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *mode = argc > 1 ? argv[1] : "streams";
  const int n = argc > 2 ? atoi(argv[2]) : 2;
  const bool fault = strcmp(mode, "streams") && strcmp(mode, "mismatch");
  iris_launch_t L;
  int rank;
  const bool split = !strcmp(mode, "split-count") || !strcmp(mode, "split-place") || !strcmp(mode, "split-late");
  if (n < 2 || n > IRIS_MAX_RANKS) { printf("usage: fault_test streams|mismatch|stuck|stuck-fused|killed|graph-killed|killed-watch|abort|split-count|split-place|split-late N (N >= 2)\n"); return 2; }
  if (!strcmp(mode, "split-late") && n < 3) { printf("SKIP: [split-late w=%d] needs 3 ranks: two that see the mismatch without the late one\n", n); return 0; }
  if (split) setenv("IRIS_COLL_STAGING", "1M", 1); // before the setup: 262144 fp32 per staged launch
  if (!strcmp(mode, "killed-watch")) setenv("IRIS_WAIT_TIMEOUT_MS", "120000", 1); // read by iris_init: only the peer watch can end the wait in time
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("FAIL: [%s w=%d] launch: %s\n", mode, n, iris_error_detail()); return 1; }
  if (rank < 0) {
    iris_status_t st = iris_launch_wait(&L, 600000);
    bool ok = st == IRIS_SUCCESS;
    if (!ok && (!strcmp(mode, "killed") || !strcmp(mode, "graph-killed") || !strcmp(mode, "killed-watch"))) { // the killed rank is expected, the others must exit 0
      ok = L.exit_codes[n - 1] == 128 + SIGKILL;
      for (int r = 0; r < n - 1; r++) ok &= L.exit_codes[r] == 0;
    }
    printf("%s: [%s w=%d] the ranks exit as expected%s%s\n", ok ? "PASS" : "FAIL", mode, n, ok ? "" : ": ", ok ? "" : iris_error_detail());
    return ok ? 0 : 1;
  }
  Suite s = {};
  s.rank = rank;
  s.world = n;
  s.tag = std::string(mode) + " w=" + std::to_string(n);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)1 << 30;
  if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS) {
    if (rank == 0) printf("FAIL: [%s] bring-up: %s\n", s.tag.c_str(), iris_error_detail());
    return 1;
  }
  uint64_t mine = mix((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)), all[IRIS_MAX_RANKS];
  iris_allgather_host(s.ctx, &mine, all, sizeof mine);
  s.seed = all[0];
  if (!strcmp(mode, "mismatch")) { // a malformed setup variable on the last rank only: every rank's setup fails at once (no rank waits out the rendezvous bound), and one after it works
    const char *was = getenv("IRIS_COLL_CHECK");
    const std::string keep = was ? was : "";
    if (rank == n - 1) setenv("IRIS_COLL_CHECK", "maybe", 1);
    const double t0 = now_s();
    const iris_status_t st = iris_collectives_setup(s.ctx);
    const double took = now_s() - t0;
    const bool named = rank != n - 1 || strstr(iris_error_detail(), "IRIS_COLL_CHECK") != NULL;
    if (was) setenv("IRIS_COLL_CHECK", keep.c_str(), 1);
    else unsetenv("IRIS_COLL_CHECK");
    if (st == IRIS_SUCCESS || !named || took > 10.0) fprintf(stderr, "rank %d: setup with a bad variable on the last rank: status %d after %.1f s: %s\n", rank, (int)st, took, iris_error_detail());
    report(s, "IRIS_COLL_CHECK malformed on the last rank: iris_collectives_setup fails on every rank within 10 s (that rank's error names it)", st != IRIS_SUCCESS && named && took <= 10.0);
  }
  if (!strcmp(mode, "mismatch")) { // settings every rank must share, each differing on the last rank only
    setup_differs_case(s, "IRIS_COLL_CTAS", "24", "16", "every call would be a mismatch");
    setup_differs_case(s, "IRIS_COLL_STAGING", "8M", "16M", "the staging areas are heap blocks");
    setup_differs_case(s, "IRIS_COLL_FUSED_STAGING", "0", "1", "an off-heap call would take another number of launches there");
    setup_differs_case(s, "IRIS_COLL_CHECK", "0", "1", "after a mismatched armed call one rank would re-arm on the LL path, the other wait for armed data");
  }
  if (iris_collectives_setup(s.ctx) != IRIS_SUCCESS) {
    printf("FAIL: [%s] setup on rank %d: %s\n", s.tag.c_str(), rank, iris_error_detail());
    return 1;
  }
  if (split) return run_split(s, mode);
  if (fault) return run_fault(s, mode);
  bool ran = !strcmp(mode, "streams") ? test_streams(s) : test_mismatch(s);
  if (!ran) report(s, "suite ran to the end (see stderr)", false);
  int rc = s.failed || !ran ? 1 : 0;
  if (iris_finalize(s.ctx) != IRIS_SUCCESS) rc = 1;
  return rc;
}
