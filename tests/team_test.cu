// Teams (iris.h, iris_device.h, iris_collectives.h; docs/teams.md) on N ranks, one process
// each (iris_launch_local; ranks may share a GPU).
//
//   team_test basic N       the splits {0,1}{2,3}, {0,2}{1,3}, {0,1,2}{3}, {3,1}{0,2} by key,
//                           and one with rank 1 opting out (their analogues at N = 2, 3):
//                           membership against a host reference; kernels that put into every
//                           member and meet at a team barrier (thread, warp and block level,
//                           one-shot and session), ROUNDS rounds with skewed ranks, every
//                           value checked; signal OR/XOR/ADD by team rank; every collective
//                           on every team at LL and bandwidth sizes against exact references,
//                           outputs poisoned; strided and 2-D splits, their teams' barrier
//                           rounds overlapping in time (teams sharing ranks); splits (color,
//                           2-D, strided) of a parent that is not the world, 3 times, their
//                           members and barrier rounds; destroy and reuse
//   team_test concurrent N  TP and DP teams of a 2-D split: all-reduces of both on two streams
//                           at once, ROUNDS rounds, each checked on the device
//   team_test mismatch N    a mismatched call in the TP team: its members see IRIS_ERROR_MISMATCH
//                           (iris_team_check), nothing written; the DP team's calls meanwhile
//                           exact; the TP team's next matching call exact; then the grid rule
//                           agreed at a split (no world collective state in this mode):
//                           IRIS_COLL_CTAS unlike on the last rank refuses every member's
//                           call at once (IRIS_ERROR_MISMATCH), alike is exact, malformed on
//                           the last rank refuses everywhere (IRIS_ERROR_INVALID_ARGUMENT);
//                           then a bandwidth all-reduce with the last rank's buffers off the
//                           heap: its refusal (IRIS_ERROR_NOT_IN_HEAP) takes part, the others
//                           see IRIS_ERROR_MISMATCH within 1 s, nothing written, the next call
//                           exact
//   team_test stuck N       the last rank never comes to a team barrier, then to a team
//                           all-reduce: the others' waits end within 2x the bound and the
//                           error names world rank N-1; the team's destroy then returns the
//                           fault at once (stuck-coll, stuck-mixed too)
//   team_test stuck-mixed N the same for a world all-reduce and a team all-reduce queued behind
//                           it on another stream, the host polling iris_get_async_error: both
//                           end within the bound + 1 s (the team's kernel sees the context's
//                           fault), naming world rank N-1
//   team_test killed N      the last rank is killed (SIGKILL) under a wait bound of 120 s:
//                           a team of the survivors still all-reduces exactly after the death
//                           (the peer watch lowers the bound of the dead rank's teams only);
//                           then a team all-reduce over every rank ends within 1.5 s with
//                           IRIS_ERROR_PEER_FAILED naming world rank N-1 and the peer watch
//   team_test first-call N  the context's first team call, then at once (no host barrier) a
//                           world-team barrier kernel, the last rank 300 ms late between the
//                           table's world meeting and its return: every rank's barrier passes
//                           (the setup once zeroed the world's slot again after the meeting,
//                           erasing the faster ranks' signals: the last rank timed out)
//   team_test late N        a split of a sub-team with the last rank 2x the meeting bound late:
//                           the split fails everywhere, then the team's destroy says an earlier
//                           meeting failed (IRIS_ERROR_TIMEOUT) on every member, not a false
//                           IRIS_ERROR_MISMATCH; the context goes on; then a split whose
//                           second meeting is late on the last rank only (its take waits for
//                           a 5 s kernel of its own): the others return IRIS_ERROR_TIMEOUT and
//                           keep the slot, so their next team gets another slot than the one
//                           the last rank's team holds
//   team_test graph N       a CUDA graph captured on one stream: team barrier kernels (thread,
//                           warp, block; one-shot and session) and every team collective
//                           (all-reduce latency / in place / two-shot LL / bandwidth, all-gather,
//                           reduce-scatter, all-to-all, broadcast, the device barrier) on an
//                           even/odd split with keys reversed (every rank at N = 2) and on the
//                           world; 64 replays (IRIS_TEST_QUICK=1: 20), each with a new nonce,
//                           fresh inputs and poisoned outputs, ranks skewed, every element
//                           against a float64 reference; the same calls eagerly after every fifth
//                           replay; the barrier epochs start just below 2^64, cross it, and end
//                           at exactly their start plus the barriers run (never reset)
//   team_test wait-timeout N  every rank's iris_team_wait_until on a flag no member sets: false
//                           after the bound, IRIS_ERROR_TIMEOUT naming the world rank of the
//                           member waited on (not its team rank); the fault stays (reported
//                           again, iris_team_check), later calls refuse at once, a later wait
//                           gives up at once, the destroy returns it, iris_finalize succeeds
//   team_test staged N      teams given staging areas (iris_team_set_staging, 64 KiB each, as
//                           the torch layer does): the areas' refusals (too small, off the
//                           heap, one block twice, overlapping, one NULL), on one member only
//                           (every member refuses), areas or sizes that differ between members
//                           (IRIS_ERROR_MISMATCH everywhere, nothing set); every collective
//                           with buffers off the heap (cudaMalloc) on the halves {0,1}{2,3}
//                           and on every rank by reversed key, at latency sizes and at sizes
//                           of 1 to 40 chunks, in place too, alternating two streams, 3
//                           rounds, every element against an exact reference, outputs
//                           poisoned and a guard after them; a count of 0 on every member
//                           (they meet) and on one member only (a mismatch on every member,
//                           nothing written); the areas removed (NULL, NULL, 0) and set
//                           again; then an all-reduce whose count differs on the last member
//                           only in its last chunk: IRIS_ERROR_MISMATCH on every member naming
//                           the split, no output written, fatal for the context as a world's
//                           split call is (later team and world calls refused at once);
//                           finalize completes
// ROUNDS: 1000 (IRIS_TEST_QUICK=1: 100). Run with IRIS_WAIT_TIMEOUT_MS=2000 for stuck and
// wait-timeout.
#define IRIS_IMPLEMENTATION
// first-call: the last rank sleeps this long after the team table's world meeting
static unsigned g_after_meet_us;
#define IRIS_DETAIL_TEAMS_SETUP_AFTER_MEET(ctx)                                                   \
  do {                                                                                            \
    if (g_after_meet_us && iris_rank(ctx) == iris_world_size(ctx) - 1) usleep(g_after_meet_us); \
  } while (0)
#define IRIS_COLL_TYPES (1u << IRIS_FLOAT32)
#define IRIS_COLL_OPS (1u << IRIS_SUM)
#include "../iris_collectives.h"
#include "test_util.h"
#include <algorithm>
#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <vector>

static int g_rounds = 1000;
static double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ------------------------------------------------------------------ kernels --
__host__ __device__ inline unsigned uval(uint64_t seed, int round, int world_rank, int to) { return (unsigned)key(seed, round, world_rank, to, 7) | 1u; }
__device__ void skew(int world_rank, int round) {
  if (round % 7 == world_rank % 7) {
    unsigned long long t0 = clock64();
    while (clock64() - t0 < (unsigned long long)(2000 * (world_rank + 1))) {
    }
  }
}
// Rounds of: each member puts a value into every member's slot (parity round & 1), the
// team meets, each checks every slot. C: the cooperation level; session: one session for
// all rounds, else a one-shot barrier per round. buf: a region of ROUND_WORDS words of
// this team alone (teams that share a rank may run at the same time: each its own region):
// [parity][team rank] the values, [2][team rank] the members' seed tags, put in round 0 and
// checked after its barrier: members that disagree on the seed (a test bug, not the
// barrier's) count in errors[2] instead of every value counting as wrong.
#define ROUND_WORDS (3 * IRIS_MAX_RANKS)
template <typename C>
__device__ void rounds_body(const iris_device_ctx_t &ctx, const iris_team_t &team, unsigned *buf, int rounds, uint64_t seed, int session, int index, int *errors) {
  C coop;
  const int tid = coop.thread_rank(), nt = coop.size(), me_w = ctx.rank;
  const unsigned tag = (unsigned)(seed >> 32) | 1u;
  iris_team_barrier_session<C> s(coop, ctx, team, index);
  for (int r = 0; r < rounds; r++) {
    if (tid == 0) skew(me_w, r);
    for (int p = tid; p < team.size; p += nt) {
      iris_team_store(ctx, team, buf + (r & 1) * IRIS_MAX_RANKS + team.rank, uval(seed, r, me_w, iris_team_peer(team, p)), p);
      if (r == 0) iris_team_store(ctx, team, buf + 2 * IRIS_MAX_RANKS + team.rank, tag, p);
    }
    bool ok = session ? s.sync() : iris_team_barrier(coop, ctx, team, index + 1);
    if (!ok) {
      if (tid == 0) atomicAdd(errors + 1, 1);
      return;
    }
    for (int q = tid; q < team.size; q += nt) { // each participant reads the member its neighbour's wait acquired (across lanes, across threads)
      const int p = (q + 1) % team.size;
      unsigned got = ((volatile unsigned *)buf)[(r & 1) * IRIS_MAX_RANKS + p];
      if (r == 0 && ((volatile unsigned *)buf)[2 * IRIS_MAX_RANKS + p] != tag) atomicAdd(errors + 2, 1);
      else if (got != uval(seed, r, iris_team_peer(team, p), me_w)) atomicAdd(errors, 1);
    }
  }
}
template <typename C>
__global__ void k_rounds(iris_device_ctx_t ctx, iris_team_t team, unsigned *buf, int rounds, uint64_t seed, int session, int index, int *errors) {
  rounds_body<C>(ctx, team, buf, rounds, seed, session, index, errors);
}
// graph: the same, the launch's seed read from the device (the host writes a new nonce
// before each replay of a graph that captured the kernel with fixed arguments)
template <typename C>
__global__ void k_rounds_at(iris_device_ctx_t ctx, iris_team_t team, unsigned *buf, int rounds, const unsigned long long *nonce, int kid, int session, int index,
                            int *errors) {
  rounds_body<C>(ctx, team, buf, rounds, mix(*nonce ^ mix((uint64_t)kid)), session, index, errors);
}
// Every member ORs, XORs and adds its bit into member 0's words (and adds 1.0 to a double
// flag), then member 0 waits.
__global__ void k_signals(iris_device_ctx_t ctx, iris_team_t team, unsigned long long *w, unsigned long long base, int *errors) {
  const unsigned long long bit = 1ULL << team.rank, all = team.size >= 64 ? ~0ULL : (1ULL << team.size) - 1;
  iris_team_signal_op<IRIS_SIGNAL_OR>(ctx, team, w + 0, bit, 0);
  iris_team_signal_op<IRIS_SIGNAL_XOR>(ctx, team, w + 1, bit, 0);
  iris_team_signal_add(ctx, team, w + 2, 1ULL, 0);
  iris_team_signal_add(ctx, team, (double *)(w + 3), 1.0, 0); // a double flag: the team add and the wait (EPOCH is GE there)
  if (team.rank == 0) {
    bool ok = iris_team_wait_until(ctx, team, w + 2, IRIS_CMP_EQ, base + team.size, -1);
    ok = ok && iris_team_wait_until(ctx, team, (const double *)(w + 3), IRIS_CMP_EPOCH, (double)(base + team.size), -1);
    ok = ok && iris_atomic_load((const double *)(w + 3)) == (double)(base + team.size);
    ok = ok && iris_team_wait_until(ctx, team, w + 0, IRIS_CMP_EQ, all, 1 % team.size);
    unsigned long long x = iris_atomic_load(w + 1);
    if (!ok || x != ((base / team.size) % 2 ? 0ULL : all)) atomicAdd(errors, 1); // XOR toggles each time
  }
  iris_team_barrier(iris_coop_thread(), ctx, team, 9);
}
__global__ void k_fill(float *p, size_t n, uint64_t seed, int wr, int call) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (float)((int)(key(seed, wr, call, i, 3) % 33) - 16);
}
static float fv(uint64_t seed, int wr, int call, size_t i) { return (float)((int)(key(seed, wr, call, i, 3) % 33) - 16); }
// Element i of team t's collective `kind` (0 all-reduce sum, 1 all-gather, 2 reduce-scatter
// sum, 3 all-to-all, 4 broadcast from root) of `count` elements per block, on this member,
// when member p's input is fv(seed, world rank of p, call, .): exact (sums of small integers).
static float coll_want(uint64_t seed, const iris_team_t &t, int kind, size_t count, int root, int call, size_t i) {
  const int W = t.size, me = t.rank;
  float want = 0;
  switch (kind) {
  case 0: for (int p = 0; p < W; p++) want += fv(seed, iris_team_world_rank(&t, p), call, i); break;
  case 1: want = fv(seed, iris_team_world_rank(&t, (int)(i / count)), call, i % count); break;
  case 2: for (int p = 0; p < W; p++) want += fv(seed, iris_team_world_rank(&t, p), call, (size_t)me * count + i); break;
  case 3: want = fv(seed, iris_team_world_rank(&t, (int)(i / count)), call, (size_t)me * count + i % count); break;
  default: want = fv(seed, iris_team_world_rank(&t, root), call, i); break;
  }
  return want;
}
// all-reduce result check on the device: want = sum over members (small integers: exact)
__global__ void k_check_ar(const float *out, size_t n, iris_team_t team, uint64_t seed, int call, int *errors) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float want = 0;
    for (int p = 0; p < team.size; p++) want += (float)((int)(key(seed, iris_team_world_rank(&team, p), call, i, 3) % 33) - 16);
    if (out[i] != want) atomicAdd(errors, 1);
  }
}

// ------------------------------------------------------------------ helpers --
struct Split {
  const char *name;
  std::vector<int> color, key;
};
// the issue's splits at N = 4, their analogues at other N, and an opt-out
static std::vector<Split> splits(int n) {
  std::vector<Split> v(5);
  for (auto &s : v) s.color.assign(n, 0), s.key.assign(n, 0);
  v[0].name = "{0,1}{2,3}";
  v[1].name = "{0,2}{1,3}";
  v[2].name = "{0,1,2}{3}";
  v[3].name = "{3,1}{0,2} by key";
  v[4].name = "rank 1 opts out, keys reversed";
  for (int r = 0; r < n; r++) {
    v[0].color[r] = r / 2;
    v[1].color[r] = r % 2;
    v[2].color[r] = r == n - 1 ? 1 : 0;
    v[3].color[r] = r % 2 == 0;        // {1,3} color 0, {0,2} color 1
    v[3].key[r] = r % 2 ? n - r : r;  // 3 before 1; 0 before 2
    v[4].color[r] = r == 1 ? IRIS_TEAM_NONE : 0;
    v[4].key[r] = n - r;
  }
  return v;
}
static std::vector<int> ref_members(const Split &s, int me) {
  std::vector<int> m;
  if (s.color[me] < 0) return m;
  for (int r = 0; r < (int)s.color.size(); r++)
    if (s.color[r] == s.color[me]) m.push_back(r);
  std::stable_sort(m.begin(), m.end(), [&](int a, int b) { return s.key[a] < s.key[b]; });
  return m;
}

// rounds: made even, so the next launch's first round writes the other parity than the
// last round of this one (which a slow peer may still be reading). salt: the launch's
// values; every member must pass the same, so it comes from the caller's rank-uniform
// control flow (a per-process launch count diverges as soon as one rank is not a member
// of some team and skips its launches). buf: the team's region (ROUND_WORDS words).
static bool run_rounds(Suite &s, const iris_team_t &t, unsigned *buf, int *errs, int rounds, int coop, int session, int index, uint64_t salt) {
  iris_device_ctx_t dc = iris_device_context(s.ctx);
  const uint64_t seed = mix(s.seed ^ mix(salt));
  rounds = rounds < 2 ? 2 : rounds & ~1;
  CK(cudaMemset(errs, 0, 3 * sizeof(int))); CK(cudaDeviceSynchronize()); // the test streams do not wait for the legacy stream
  if (coop == 0) k_rounds<iris_coop_thread><<<1, 1, 0, s.stream>>>(dc, t, buf, rounds, seed, session, index, errs);
  else if (coop == 1) k_rounds<iris_coop_warp><<<1, 32, 0, s.stream>>>(dc, t, buf, rounds, seed, session, index, errs);
  else k_rounds<iris_coop_block><<<1, 128, 0, s.stream>>>(dc, t, buf, rounds, seed, session, index, errs);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s.stream));
  int h[3];
  CK(cudaMemcpy(h, errs, sizeof h, cudaMemcpyDeviceToHost));
  if (h[0] || h[1]) fprintf(stderr, "team_test: rank %d: coop %d session %d index %d: %d wrong values, %d failed barriers\n", s.rank, coop, session, index, h[0], h[1]);
  if (h[2]) fprintf(stderr, "team_test: rank %d: coop %d session %d index %d: %d members disagree on the launch's seed (a test bug: salt %llu)\n", s.rank, coop, session, index, h[2],
                    (unsigned long long)salt);
  return h[0] == 0 && h[1] == 0 && h[2] == 0;
}

// Every collective on team t, small (latency) and large (bandwidth) sizes, exact checks; the
// fourth size (768 KB per peer) as buffers off the heap (IRIS_COLL_STAGE): a team of 2 in a
// node of 4 or more must take it (the one-shot, on its 1 MB slots), a team of one copies;
// any other team may refuse it where its path is the bandwidth one (IRIS_ERROR_NOT_IN_HEAP:
// a team has no staging area), else its result is checked.
static bool run_colls(Suite &s, const iris_team_t &t, float *in, float *out, int call0) {
  const int W = t.size, me = t.rank;
  const size_t counts[4] = {777, 65536 + 5, (size_t)1 << 20, (size_t)3 << 16};
  int call = call0;
  for (size_t count : counts)
    for (int kind = 0; kind < 5; kind++, call++) {
      iris_coll_opts_t o = IRIS_COLL_OPTS_INIT, *op = NULL;
      bool may_refuse = false;
      if (count == ((size_t)3 << 16)) {
        o.flags = IRIS_COLL_STAGE;
        op = &o;
        may_refuse = W > 1 && !(W == 2 && s.world >= 4); // one node: the node's ranks are the world's
      }
      const size_t nin = (kind == 2 || kind == 3) ? count * W : count, nout = (kind == 1 || kind == 3) ? count * W : count;
      const int root = call % W;
      k_fill<<<64, 256, 0, s.stream>>>(in, nin, s.seed, s.rank, call);
      CK(cudaMemsetAsync(out, 0xA5, nout * sizeof(float) + 64, s.stream));
      iris_status_t st;
      switch (kind) {
      case 0: st = iris_all_reduce_team(s.ctx, &t, in, out, count, IRIS_FLOAT32, IRIS_SUM, s.stream, op); break;
      case 1: st = iris_all_gather_team(s.ctx, &t, in, out, count, IRIS_FLOAT32, s.stream, op); break;
      case 2: st = iris_reduce_scatter_team(s.ctx, &t, in, out, count, IRIS_FLOAT32, IRIS_SUM, s.stream, op); break;
      case 3: st = iris_all_to_all_team(s.ctx, &t, in, out, count, IRIS_FLOAT32, s.stream, op); break;
      default: st = iris_broadcast_team(s.ctx, &t, in, out, count, IRIS_FLOAT32, root, s.stream, op); break;
      }
      if (may_refuse && st == IRIS_ERROR_NOT_IN_HEAP) continue; // nothing enqueued, on every member alike
      if (st != IRIS_SUCCESS) { fprintf(stderr, "team_test: rank %d: collective %d count %zu: %s\n", s.rank, kind, count, iris_error_detail()); return false; }
      std::vector<float> h(nout + 16);
      CK(cudaStreamSynchronize(s.stream));
      CK(cudaMemcpy(h.data(), out, (nout + 16) * sizeof(float), cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (size_t i = 0; i < nout; i++) {
        if (!same(h[i], coll_want(s.seed, t, kind, count, root, call, i))) bad++;
      }
      unsigned guard;
      memcpy(&guard, &h[nout], 4);
      if (bad || guard != 0xA5A5A5A5u) {
        fprintf(stderr, "team_test: rank %d (team rank %d of %d): collective %d count %zu: %zu wrong, guard %08x\n", s.rank, me, W, kind, count, bad, guard);
        return false;
      }
    }
  IK(iris_team_check(s.ctx, &t));
  return true;
}

__global__ void k_one_barrier(iris_device_ctx_t ctx, iris_team_t team, int *res) { res[0] = iris_team_barrier(iris_coop_block(), ctx, team, 3) ? 1 : 2; }
// A barrier index outside [0, IRIS_TEAM_BARRIERS): false, nothing written (the team's area is read back whole)
__global__ void k_bad_index(iris_device_ctx_t ctx, iris_team_t team, int index, int *res) { res[0] = iris_team_barrier(iris_coop_block(), ctx, team, index) ? 1 : 2; }
static bool test_basic(Suite &s) {
  const int n = s.world;
  unsigned *buf;
  unsigned long long *sig;
  int *errs;
  float *in, *out;
  IK(iris_calloc(s.ctx, 3 * ROUND_WORDS * sizeof(unsigned), (void **)&buf)); // three teams' regions (the strided and 2-D teams run at once)
  IK(iris_calloc(s.ctx, 4 * sizeof(unsigned long long), (void **)&sig));
  IK(iris_malloc(s.ctx, (size_t)IRIS_MAX_RANKS * (4 << 20) + 256, (void **)&in));
  IK(iris_malloc(s.ctx, (size_t)IRIS_MAX_RANKS * (4 << 20) + 256, (void **)&out));
  CK(cudaMalloc(&errs, 3 * sizeof(int)));
  iris_team_t world, node, rail;
  IK(iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world));
  IK(iris_team_get(s.ctx, IRIS_TEAM_NODE, &node));
  IK(iris_team_get(s.ctx, IRIS_TEAM_RAIL, &rail));
  report(s, "predefined teams: world = node = every rank in order, rail = this rank alone",
         world.size == n && world.rank == s.rank && node.size == n && node.rank == s.rank && rail.size == 1 && rail.rank == 0 &&
             iris_team_world_rank(&rail, 0) == s.rank && iris_team_world_rank(&world, n - 1) == n - 1);
  // no host barrier first: the world team's words are usable as soon as iris_team_get
  // returns on every rank (first-call forces the late rank)
  report(s, "world team: barrier rounds (block level)", run_rounds(s, world, buf, errs, g_rounds, 2, 1, 0, 1));
  { // out-of-range barrier indices: false in every participant, not a word of any slot written
    iris_team_t half;
    IK(iris_team_split(s.ctx, &world, 0, -s.rank, &half)); // every rank, in reverse order: a slot of its own
    const size_t area = (size_t)(3 * IRIS_MAX_RANKS + 16) * 64 * sizeof(unsigned long long); // well past one slot's words
    std::vector<unsigned char> before(area), after(area);
    int *res;
    CK(cudaMalloc(&res, sizeof(int)));
    CK(cudaDeviceSynchronize());
    IK(iris_barrier(s.ctx));
    CK(cudaMemcpy(before.data(), half.sync, area, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int index : {-1, IRIS_TEAM_BARRIERS, IRIS_TEAM_BARRIERS + 18, 1000}) {
      int h = 0;
      k_bad_index<<<1, 64, 0, s.stream>>>(iris_device_context(s.ctx), half, index, res);
      CK(cudaStreamSynchronize(s.stream));
      CK(cudaMemcpy(&h, res, sizeof h, cudaMemcpyDeviceToHost));
      ok &= h == 2;
    }
    IK(iris_barrier(s.ctx)); // every rank's kernels are over: what they wrote into this rank's words is there
    CK(cudaMemcpy(after.data(), half.sync, area, cudaMemcpyDeviceToHost));
    const bool untouched = before == after;
    IK(iris_barrier(s.ctx)); // every rank has read its words back before any rank's next barrier signals into them
    k_one_barrier<<<1, 128, 0, s.stream>>>(iris_device_context(s.ctx), half, res); // the team works after
    CK(cudaStreamSynchronize(s.stream));
    int h = 0;
    CK(cudaMemcpy(&h, res, sizeof h, cudaMemcpyDeviceToHost));
    cudaFree(res);
    IK(iris_team_destroy(s.ctx, &half));
    report(s, "team barrier index outside [0, IRIS_TEAM_BARRIERS): false, no word of the team's slot or the next written; the team works after", ok && untouched && h == 1);
  }
  int call = 1;
  for (const Split &sp : splits(n)) {
    std::string nm = std::string("split ") + sp.name;
    iris_team_t t;
    IK(iris_team_split(s.ctx, &world, sp.color[s.rank], sp.key[s.rank], &t));
    std::vector<int> m = ref_members(sp, s.rank);
    bool ok = t.size == (int)m.size();
    for (int i = 0; ok && i < t.size; i++) ok = iris_team_world_rank(&t, i) == m[i] && (m[i] != s.rank || t.rank == i);
    ok = ok && (m.empty() ? t.rank == -1 : t.rank >= 0);
    report(s, (nm + ": members and order as MPI_Comm_split").c_str(), ok);
    bool rounds_ok = true, sig_ok = true, coll_ok = true;
    if (t.rank >= 0) {
      for (int coop = 0; coop < 3; coop++)
        for (int ses = 0; ses < 2; ses++) rounds_ok &= run_rounds(s, t, buf, errs, coop == 2 && ses ? g_rounds : g_rounds / 4, coop, ses, 2 * coop, (uint64_t)call * 16 + 2 * coop + ses);
      CK(cudaMemset(errs, 0, sizeof(int))); CK(cudaDeviceSynchronize()); // the test streams do not wait for the legacy stream
      // the words start at zero (zeroed after the previous split, before a barrier); per
      // repetition the OR word stays full, the ADD word grows by the size, XOR toggles
      for (int rep = 0; rep < 3; rep++) k_signals<<<1, 1, 0, s.stream>>>(iris_device_context(s.ctx), t, sig, (unsigned long long)(rep * t.size), errs);
      int h = 0;
      CK(cudaStreamSynchronize(s.stream));
      CK(cudaMemcpy(&h, errs, sizeof h, cudaMemcpyDeviceToHost));
      sig_ok = h == 0;
      coll_ok = run_colls(s, t, in, out, call); // (a team of one copies)
    }
    call += 100;
    report(s, (nm + ": put + team barrier rounds, thread/warp/block, one-shot and session, skewed").c_str(), rounds_ok);
    report(s, (nm + ": signal OR/XOR/ADD by team rank (ADD on a double flag too), waits").c_str(), sig_ok);
    report(s, (nm + ": every collective on the team, LL and bandwidth sizes, exact").c_str(), coll_ok);
    IK(iris_team_destroy(s.ctx, &t));
    CK(cudaMemset(sig, 0, 4 * sizeof(unsigned long long))); CK(cudaDeviceSynchronize()); // the test streams do not wait for the legacy stream
    CK(cudaDeviceSynchronize());
    IK(iris_barrier(s.ctx));
  }
  { // strided and 2-D
    iris_team_t st, x, y;
    IK(iris_team_split_strided(s.ctx, &world, 0, 2, (n + 1) / 2, &st));
    bool ok = (s.rank % 2 == 0) ? (st.size == (n + 1) / 2 && st.rank == s.rank / 2) : (st.size == 0 && st.rank == -1);
    IK(iris_team_split_2d(s.ctx, &world, 2, &x, &y));
    ok = ok && x.rank == s.rank % 2 && iris_team_world_rank(&x, 0) == s.rank / 2 * 2 && y.rank == s.rank / 2 && iris_team_world_rank(&y, 0) == s.rank % 2;
    report(s, "split_strided and split_2d (xrange 2): members as NVSHMEM's", ok);
    // No meeting between the three: a rank outside st starts on x while st's members are
    // still at it, so teams sharing ranks run at once, each on its own slot and region.
    // Every member runs every round set even after a failure (a member that skipped one
    // would leave its peers waiting out the bound), with salts alike on every rank.
    bool r1 = true;
    if (st.rank >= 0) r1 &= run_rounds(s, st, buf, errs, g_rounds / 4, 2, 1, 20, 1000001);
    r1 &= run_rounds(s, x, buf + ROUND_WORDS, errs, g_rounds / 4, 2, 0, 22, 1000002);
    r1 &= run_rounds(s, y, buf + 2 * ROUND_WORDS, errs, g_rounds / 4, 2, 1, 24, 1000003);
    r1 &= run_rounds(s, y, buf + 2 * ROUND_WORDS, errs, g_rounds / 4, 1, 0, 26, 1000004);
    report(s, "strided and 2-D teams, overlapping in time: barrier rounds (block session / one-shot, warp one-shot)", r1);
    IK(iris_team_destroy(s.ctx, &st));
    IK(iris_team_destroy(s.ctx, &x));
    IK(iris_team_destroy(s.ctx, &y));
  }
  { // splits of a parent that is not the world: every meeting goes over the parent's heap
    // words (payload: color, key, the slot bitmaps; the tags, both parities, seq past 2).
    // P: every rank but the last (n >= 3; both ranks at n = 2), reversed; the last rank alone
    // at n >= 3 (a team of one: its splits meet no one). Three times over P: a split by parity
    // of P rank with keys reversed, split_2d (xrange 2) and split_strided (even P ranks),
    // members against a reference from P's, barrier rounds on each, destroyed in step.
    iris_team_t p;
    const int alone = n >= 3 && s.rank == n - 1;
    IK(iris_team_split(s.ctx, &world, alone ? 1 : 0, -s.rank, &p));
    std::vector<int> pm; // P's members, world ranks by P rank
    if (alone) pm.push_back(s.rank);
    else for (int r = (n >= 3 ? n - 2 : n - 1); r >= 0; r--) pm.push_back(r);
    bool mem_ok = p.size == (int)pm.size() && p.rank >= 0 && pm[p.rank] == s.rank, rounds_ok = true;
    for (int i = 0; mem_ok && i < p.size; i++) mem_ok = iris_team_world_rank(&p, i) == pm[i];
    for (int rep = 0; rep < 3; rep++) {
      const int P = p.size, me = p.rank;
      iris_team_t q, x, y, st;
      IK(iris_team_split(s.ctx, &p, me % 2, -me, &q));
      IK(iris_team_split_2d(s.ctx, &p, 2, &x, &y));
      IK(iris_team_split_strided(s.ctx, &p, 0, 2, (P + 1) / 2, &st));
      std::vector<int> wq, wx, wy, ws;
      for (int i = P - 1; i >= 0; i--) if (i % 2 == me % 2) wq.push_back(pm[i]);          // keys reversed
      for (int i = me / 2 * 2; i < P && i < me / 2 * 2 + 2; i++) wx.push_back(pm[i]);     // the row (short at the end)
      for (int i = me % 2; i < P; i += 2) wy.push_back(pm[i]);                            // the column
      if (me % 2 == 0) for (int i = 0; i < P; i += 2) ws.push_back(pm[i]);                // even P ranks
      auto same_members = [&](const iris_team_t &t, const std::vector<int> &w) {
        if (t.size != (int)w.size() || (w.empty() ? t.rank != -1 : (t.rank < 0 || w[t.rank] != s.rank))) return false;
        for (int i = 0; i < t.size; i++) if (iris_team_world_rank(&t, i) != w[i]) return false;
        return true;
      };
      mem_ok = mem_ok && same_members(q, wq) && same_members(x, wx) && same_members(y, wy) && same_members(st, ws);
      // one team at a time, each on its own region (teams sharing a rank may overlap in time)
      rounds_ok &= run_rounds(s, q, buf, errs, g_rounds / 4, 2, 1, 4, 2000000 + rep * 10);
      rounds_ok &= run_rounds(s, x, buf + ROUND_WORDS, errs, g_rounds / 4, 1, 0, 6, 2000001 + rep * 10);
      if (st.rank >= 0) rounds_ok &= run_rounds(s, st, buf + 2 * ROUND_WORDS, errs, g_rounds / 4, 0, 1, 8, 2000002 + rep * 10);
      IK(iris_team_destroy(s.ctx, &q));
      IK(iris_team_destroy(s.ctx, &x));
      IK(iris_team_destroy(s.ctx, &y));
      IK(iris_team_destroy(s.ctx, &st));
    }
    IK(iris_team_destroy(s.ctx, &p));
    IK(iris_barrier(s.ctx));
    report(s, "splits of a sub-team (its heap words), 3 times: by color with keys reversed, split_2d, split_strided: members as the reference", mem_ok);
    report(s, "splits of a sub-team: barrier rounds on each new team", rounds_ok);
  }
  { // slots come back: split and destroy more teams than the table holds
    bool ok = true;
    for (int i = 0; i < 2 * IRIS_TEAM_MAX && ok; i++) {
      iris_team_t t;
      ok = iris_team_split(s.ctx, &world, s.rank % 2, -s.rank, &t) == IRIS_SUCCESS && iris_team_destroy(s.ctx, &t) == IRIS_SUCCESS;
    }
    report(s, "2 x IRIS_TEAM_MAX splits, each destroyed: slots are reused", ok);
  }
  return true;
}

static bool test_concurrent(Suite &s) {
  iris_team_t world, tp, dp;
  cudaStream_t sa, sb;
  float *a, *b;
  int *errs;
  const size_t na = 4096 + 3, nb = (size_t)1 << 18;
  IK(iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world));
  IK(iris_team_split_2d(s.ctx, &world, 2, &tp, &dp));
  CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  IK(iris_malloc(s.ctx, na * sizeof(float), (void **)&a));
  IK(iris_malloc(s.ctx, nb * sizeof(float), (void **)&b));
  CK(cudaMalloc(&errs, 2 * sizeof(int)));
  CK(cudaMemset(errs, 0, 2 * sizeof(int))); CK(cudaDeviceSynchronize()); // the test streams do not wait for the legacy stream
  CK(cudaDeviceSynchronize());
  iris_status_t st = IRIS_SUCCESS;
  double t0 = now_s();
  for (int r = 0; r < g_rounds && st == IRIS_SUCCESS; r++) {
    k_fill<<<16, 256, 0, sa>>>(a, na, s.seed, s.rank, 2 * r);
    k_fill<<<64, 256, 0, sb>>>(b, nb, s.seed, s.rank, 2 * r + 1);
    if ((st = iris_all_reduce_team(s.ctx, &tp, a, a, na, IRIS_FLOAT32, IRIS_SUM, sa, NULL)) != IRIS_SUCCESS) break;
    if ((st = iris_all_reduce_team(s.ctx, &dp, b, b, nb, IRIS_FLOAT32, IRIS_SUM, sb, NULL)) != IRIS_SUCCESS) break;
    k_check_ar<<<16, 256, 0, sa>>>(a, na, tp, s.seed, 2 * r, errs);
    k_check_ar<<<64, 256, 0, sb>>>(b, nb, dp, s.seed, 2 * r + 1, errs + 1);
  }
  if (st != IRIS_SUCCESS) fprintf(stderr, "team_test: rank %d: %s\n", s.rank, iris_error_detail());
  CK(cudaDeviceSynchronize());
  int h[2];
  CK(cudaMemcpy(h, errs, sizeof h, cudaMemcpyDeviceToHost));
  if (h[0] || h[1]) fprintf(stderr, "team_test: rank %d: %d wrong in TP, %d in DP\n", s.rank, h[0], h[1]);
  bool ok = st == IRIS_SUCCESS && h[0] == 0 && h[1] == 0 && iris_team_check(s.ctx, &tp) == IRIS_SUCCESS && iris_team_check(s.ctx, &dp) == IRIS_SUCCESS;
  if (s.rank == 0) fprintf(stderr, "# team_test concurrent: %d rounds in %.2f s\n", g_rounds, now_s() - t0);
  report(s, "TP and DP all-reduces on two streams at once, every round exact", ok);
  IK(iris_team_destroy(s.ctx, &tp));
  IK(iris_team_destroy(s.ctx, &dp));
  return true;
}

// The grid rule of a team (no world collective state in this mode, so nothing else agrees
// on it): IRIS_COLL_CTAS set unlike on the last rank when the team is split and at its
// first call. Every call of the team is refused at once on every member with
// IRIS_ERROR_MISMATCH naming it, nothing launched (before, each member sized its grid by
// its own setting: the calls launched, each a mismatch in its kernel, for good); set alike,
// a new split's calls are exact; malformed on the last rank: IRIS_ERROR_INVALID_ARGUMENT on
// every member at once (before, the last rank alone refused and its peers waited out their
// bound: a fatal IRIS_ERROR_TIMEOUT). b: nb floats on the heap.
static iris_status_t set_ctas(const char *v) { return v ? (setenv("IRIS_COLL_CTAS", v, 1) == 0 ? IRIS_SUCCESS : IRIS_ERROR_INVALID_ARGUMENT) : (unsetenv("IRIS_COLL_CTAS"), IRIS_SUCCESS); }
static bool test_team_grid(Suite &s, const iris_team_t &world, float *b, size_t nb, int *errs) {
  const char *was = getenv("IRIS_COLL_CTAS");
  const std::string keep = was ? was : "";
  const bool last = s.rank == s.world - 1;
  iris_coll_opts_t bw = IRIS_COLL_OPTS_INIT;
  bw.algo = IRIS_ALGO_BANDWIDTH; // its grid is the cap: in the call's signature
  struct Case { const char *name, *mine, *lasts; iris_status_t want; const char *named; };
  const Case cases[3] = {{"IRIS_COLL_CTAS 2 on the last rank, 4 on the others", "4", "2", IRIS_ERROR_MISMATCH, "IRIS_COLL_CTAS"},
                         {"IRIS_COLL_CTAS 4 on every rank", "4", "4", IRIS_SUCCESS, NULL},
                         {"IRIS_COLL_CTAS 'oops' on the last rank", "4", "oops", IRIS_ERROR_INVALID_ARGUMENT, "IRIS_COLL_CTAS"}};
  CK(cudaMemset(errs, 0, sizeof(int))); CK(cudaDeviceSynchronize()); // the test streams do not wait for the legacy stream
  for (int c = 0; c < 3; c++) {
    iris_team_t t;
    IK(set_ctas(last ? cases[c].lasts : cases[c].mine));
    const iris_status_t sp = iris_team_split(s.ctx, &world, 0, s.rank, &t);
    k_fill<<<64, 256, 0, s.stream>>>(b, nb, s.seed, s.rank, 300 + c);
    CK(cudaStreamSynchronize(s.stream));
    const double t0 = now_s();
    const iris_status_t st = sp == IRIS_SUCCESS ? iris_all_reduce_team(s.ctx, &t, b, b, nb, IRIS_FLOAT32, IRIS_SUM, s.stream, &bw) : sp;
    const bool named = cases[c].named ? strstr(iris_error_detail(), cases[c].named) != NULL : true;
    if (st == IRIS_SUCCESS) k_check_ar<<<64, 256, 0, s.stream>>>(b, nb, t, s.seed, 300 + c, errs);
    CK(cudaStreamSynchronize(s.stream));
    const double dt = now_s() - t0;
    IK(set_ctas(was ? keep.c_str() : NULL));
    const iris_status_t chk = sp == IRIS_SUCCESS ? iris_team_check(s.ctx, &t) : sp, ctx_st = iris_get_async_error(s.ctx);
    int h = 0;
    CK(cudaMemcpy(&h, errs, sizeof h, cudaMemcpyDeviceToHost));
    const bool ok = sp == IRIS_SUCCESS && st == cases[c].want && named && chk == IRIS_SUCCESS && ctx_st == IRIS_SUCCESS && h == 0 && dt < 1.0;
    if (!ok)
      fprintf(stderr, "team_test: rank %d: %s: split %s, all-reduce %s (want %s), then the team's check %s, the context %s, %d wrong, %.2f s: %s\n", s.rank, cases[c].name,
              iris_status_string(sp), iris_status_string(st), iris_status_string(cases[c].want), iris_status_string(chk), iris_status_string(ctx_st), h, dt,
              iris_error_detail());
    if (sp == IRIS_SUCCESS) IK(iris_team_destroy(s.ctx, &t));
    std::string nm = std::string("team grid rule: ") + cases[c].name + " at the split: " +
                     (cases[c].want == IRIS_SUCCESS ? "the team's bandwidth all-reduce exact" : std::string("every member's call refused at once (") +
                                                                                                 iris_status_string(cases[c].want) + ", naming it), nothing launched");
    report(s, nm.c_str(), ok);
    if (!ok && ctx_st != IRIS_SUCCESS) return false; // a fatal fault: nothing after can run
  }
  return true;
}

// A member alone passes buffers off the heap to a team call on the bandwidth path (a team
// has no staging area: IRIS_ERROR_NOT_IN_HEAP there): the refusal takes part, so the
// others' call is a mismatch at once (IRIS_ERROR_MISMATCH from iris_team_check on every
// member, their buffers untouched, nothing fatal), not a wait to the bound (before: the
// refusal took no part, the others' kernels waited out their bound, a fatal
// IRIS_ERROR_TIMEOUT); the team's next call, every member on the heap, exact.
static bool test_team_off_heap(Suite &s, const iris_team_t &world, float *b, size_t nb, int *errs) {
  const bool last = s.rank == s.world - 1;
  iris_coll_opts_t bw = IRIS_COLL_OPTS_INIT;
  bw.algo = IRIS_ALGO_BANDWIDTH;
  iris_team_t t;
  float *off;
  IK(iris_team_split(s.ctx, &world, 0, s.rank, &t));
  CK(cudaMalloc(&off, nb * sizeof(float)));
  float *buf = last ? off : b;
  k_fill<<<64, 256, 0, s.stream>>>(buf, nb, s.seed, s.rank, 400);
  std::vector<float> before(nb), after(nb);
  CK(cudaMemcpyAsync(before.data(), buf, nb * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
  CK(cudaStreamSynchronize(s.stream));
  const double t0 = now_s();
  const iris_status_t st = iris_all_reduce_team(s.ctx, &t, buf, buf, nb, IRIS_FLOAT32, IRIS_SUM, s.stream, &bw);
  const std::string why = iris_error_detail();
  CK(cudaStreamSynchronize(s.stream));
  const double dt = now_s() - t0;
  const iris_status_t chk = iris_team_check(s.ctx, &t), ctx_st = iris_get_async_error(s.ctx);
  CK(cudaMemcpy(after.data(), buf, nb * sizeof(float), cudaMemcpyDeviceToHost));
  const bool untouched = before == after;
  bool ok = st == (last ? IRIS_ERROR_NOT_IN_HEAP : IRIS_SUCCESS) && chk == IRIS_ERROR_MISMATCH && ctx_st == IRIS_SUCCESS && untouched && dt < 1.0;
  if (!ok)
    fprintf(stderr, "team_test: rank %d: a team all-reduce with the last rank's buffers off the heap: %s (%s), then the team's check %s, the context %s, %s, %.2f s\n",
            s.rank, iris_status_string(st), why.c_str(), iris_status_string(chk), iris_status_string(ctx_st), untouched ? "buffer untouched" : "buffer written", dt);
  report(s, "a team call refused (IRIS_ERROR_NOT_IN_HEAP) on the last member only: it takes part, the others see a mismatch at once (not a wait to the bound), nothing written",
         ok);
  if (ctx_st != IRIS_SUCCESS) return false; // fatal: nothing after can run
  // the call numbers stayed in step: the next call (every member on the heap) is exact
  CK(cudaMemset(errs, 0, sizeof(int))); CK(cudaDeviceSynchronize()); // the test streams do not wait for the legacy stream
  k_fill<<<64, 256, 0, s.stream>>>(b, nb, s.seed, s.rank, 401);
  const iris_status_t next = iris_all_reduce_team(s.ctx, &t, b, b, nb, IRIS_FLOAT32, IRIS_SUM, s.stream, &bw);
  k_check_ar<<<64, 256, 0, s.stream>>>(b, nb, t, s.seed, 401, errs);
  CK(cudaStreamSynchronize(s.stream));
  int h = 0;
  CK(cudaMemcpy(&h, errs, sizeof h, cudaMemcpyDeviceToHost));
  const iris_status_t chk2 = iris_team_check(s.ctx, &t);
  if (next != IRIS_SUCCESS || h || chk2 != IRIS_SUCCESS)
    fprintf(stderr, "team_test: rank %d: the team's next call after the refusal: %s, %d wrong, check %s\n", s.rank, iris_status_string(next), h, iris_status_string(chk2));
  report(s, "after that refusal the team's call numbers are in step: its next all-reduce exact", next == IRIS_SUCCESS && h == 0 && chk2 == IRIS_SUCCESS);
  cudaFree(off);
  IK(iris_team_destroy(s.ctx, &t));
  return true;
}

static bool test_mismatch(Suite &s) {
  iris_team_t world, tp, dp;
  float *a, *b;
  int *errs;
  const size_t n = 1000, nb = (size_t)1 << 18;
  { // the team table's setup (the first team call): IRIS_TEAMS_COLL different on the last rank is refused on every rank, the heaps stay alike, and a retry works
    const char *was = getenv("IRIS_TEAMS_COLL");
    const std::string keep = was ? was : "";
    setenv("IRIS_TEAMS_COLL", s.rank == s.world - 1 ? "1" : "2", 1);
    const iris_status_t st = iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world);
    const bool named = strstr(iris_error_detail(), "IRIS_TEAMS_COLL") != NULL;
    if (was) setenv("IRIS_TEAMS_COLL", keep.c_str(), 1);
    else unsetenv("IRIS_TEAMS_COLL");
    const iris_status_t heap = iris_heap_verify(s.ctx);
    if (st != IRIS_ERROR_MISMATCH || !named || heap != IRIS_SUCCESS)
      fprintf(stderr, "team_test: rank %d: IRIS_TEAMS_COLL 1 on the last rank, 2 elsewhere: status %s, heap verify %s: %s\n", s.rank, iris_status_string(st),
              iris_status_string(heap), iris_error_detail());
    report(s, "IRIS_TEAMS_COLL different on the last rank: the first team call fails with IRIS_ERROR_MISMATCH on every rank, naming it; the heaps stay alike",
           st == IRIS_ERROR_MISMATCH && named && heap == IRIS_SUCCESS);
  }
  IK(iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world));
  { // different team calls on one team: rank 0 splits it while the others destroy it; every member fails, naming it
    iris_team_t t, sub;
    IK(iris_team_split(s.ctx, &world, 0, s.rank, &t));
    const iris_status_t st = s.rank == 0 ? iris_team_split(s.ctx, &t, 0, 0, &sub) : iris_team_destroy(s.ctx, &t);
    const bool named = strstr(iris_error_detail(), "different team calls") != NULL;
    if (st != IRIS_ERROR_MISMATCH || !named)
      fprintf(stderr, "team_test: rank %d: a split against a destroy: %s: %s\n", s.rank, iris_status_string(st), iris_error_detail());
    report(s, "a split on one member, a destroy on the others: IRIS_ERROR_MISMATCH on every member, naming it", st == IRIS_ERROR_MISMATCH && named);
    // the team is left alive on every member: a destroy in step frees its slot and collective
    // state (else the pool of 2 states is short for the TP and DP teams below at 3+ ranks)
    const iris_status_t d = iris_team_destroy(s.ctx, &t);
    if (d != IRIS_SUCCESS) fprintf(stderr, "team_test: rank %d: the destroy in step after the mismatch: %s: %s\n", s.rank, iris_status_string(d), iris_error_detail());
    report(s, "after that mismatch the team is still alive on every member: a destroy in step succeeds", d == IRIS_SUCCESS && t.size == 0 && t.rank == -1);
    IK(iris_barrier(s.ctx));
  }
  IK(iris_team_split_2d(s.ctx, &world, 2, &tp, &dp));
  IK(iris_malloc(s.ctx, (n + 64) * sizeof(float), (void **)&a));
  IK(iris_malloc(s.ctx, nb * sizeof(float), (void **)&b));
  CK(cudaMalloc(&errs, 2 * sizeof(int)));
  CK(cudaMemset(errs, 0, 2 * sizeof(int))); CK(cudaDeviceSynchronize()); // the test streams do not wait for the legacy stream
  bool ok = true;
  for (int algo = 0; algo < 2; algo++) {
    iris_coll_opts_t o = IRIS_COLL_OPTS_INIT;
    o.algo = algo ? IRIS_ALGO_BANDWIDTH : IRIS_ALGO_LATENCY;
    // the TP team: its rank 0 calls with count n, the others with n + 1
    // the input as it stands before the call (on the test's stream, which does not wait for
    // the legacy default stream: fill and read it there), every element of it kept to
    // prove that the mismatched call wrote none
    CK(cudaMemsetAsync(a, 0x5A, (n + 64) * sizeof(float), s.stream));
    k_fill<<<16, 256, 0, s.stream>>>(a, n + 1, s.seed, s.rank, 7);
    std::vector<float> before(n + 64), after(n + 64);
    CK(cudaMemcpyAsync(before.data(), a, (n + 64) * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
    CK(cudaStreamSynchronize(s.stream));
    if (tp.size > 1) {
      iris_status_t st = iris_all_reduce_team(s.ctx, &tp, a, a, tp.rank == 0 ? n : n + 1, IRIS_FLOAT32, IRIS_SUM, s.stream, &o);
      ok &= st == IRIS_SUCCESS;
    }
    // meanwhile the DP team works
    for (int r = 0; r < 10; r++) {
      k_fill<<<64, 256, 0, s.stream>>>(b, nb, s.seed, s.rank, 100 + r);
      const iris_status_t dst = iris_all_reduce_team(s.ctx, &dp, b, b, nb, IRIS_FLOAT32, IRIS_SUM, s.stream, NULL);
      if (dst != IRIS_SUCCESS && r == 0) fprintf(stderr, "team_test: rank %d: the DP all-reduce: %s: %s\n", s.rank, iris_status_string(dst), iris_error_detail());
      ok &= dst == IRIS_SUCCESS;
      k_check_ar<<<64, 256, 0, s.stream>>>(b, nb, dp, s.seed, 100 + r, errs + 1);
    }
    CK(cudaStreamSynchronize(s.stream));
    if (tp.size > 1) {
      iris_status_t st = iris_team_check(s.ctx, &tp);
      CK(cudaMemcpyAsync(after.data(), a, (n + 64) * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
      CK(cudaStreamSynchronize(s.stream));
      const bool untouched = memcmp(before.data(), after.data(), (n + 64) * sizeof(float)) == 0;
      ok &= st == IRIS_ERROR_MISMATCH && untouched;
      if (st != IRIS_ERROR_MISMATCH) fprintf(stderr, "team_test: rank %d: TP check after a mismatch (%s): %s\n", s.rank, algo ? "bandwidth" : "latency", iris_status_string(st));
      if (!untouched) fprintf(stderr, "team_test: rank %d: the mismatched TP call (%s) wrote its buffer\n", s.rank, algo ? "bandwidth" : "latency");
      const iris_status_t again = iris_team_check(s.ctx, &tp);
      ok &= again == IRIS_SUCCESS; // reported once
      if (again != IRIS_SUCCESS) fprintf(stderr, "team_test: rank %d: TP check a second time (%s): %s\n", s.rank, algo ? "bandwidth" : "latency", iris_status_string(again));
      // the next matching call is exact
      k_fill<<<16, 256, 0, s.stream>>>(a, n, s.seed, s.rank, 8);
      const iris_status_t next = iris_all_reduce_team(s.ctx, &tp, a, a, n, IRIS_FLOAT32, IRIS_SUM, s.stream, &o);
      ok &= next == IRIS_SUCCESS;
      if (next != IRIS_SUCCESS) fprintf(stderr, "team_test: rank %d: TP's next call (%s): %s\n", s.rank, algo ? "bandwidth" : "latency", iris_status_string(next));
      k_check_ar<<<16, 256, 0, s.stream>>>(a, n, tp, s.seed, 8, errs);
    }
    const iris_status_t dst = iris_team_check(s.ctx, &dp), ast = iris_get_async_error(s.ctx);
    ok &= dst == IRIS_SUCCESS && ast == IRIS_SUCCESS;
    if (dst != IRIS_SUCCESS || ast != IRIS_SUCCESS)
      fprintf(stderr, "team_test: rank %d: after the TP mismatch (%s): DP check %s, context %s\n", s.rank, algo ? "bandwidth" : "latency", iris_status_string(dst), iris_status_string(ast));
  }
  CK(cudaDeviceSynchronize());
  int h[2];
  CK(cudaMemcpy(h, errs, sizeof h, cudaMemcpyDeviceToHost));
  if (h[0] || h[1]) fprintf(stderr, "team_test: rank %d: wrong elements: TP's next call %d, DP %d\n", s.rank, h[0], h[1]);
  report(s, "a mismatch in the TP team: seen there only, nothing written; DP exact meanwhile; TP's next call exact", ok && !h[0] && !h[1]);
  IK(iris_team_destroy(s.ctx, &tp));
  IK(iris_team_destroy(s.ctx, &dp));
  IK(iris_barrier(s.ctx));
  return test_team_grid(s, world, b, nb, errs) && test_team_off_heap(s, world, b, nb, errs);
}

// The first team call, then a world-team barrier with no host barrier between, the last
// rank late past the table's meeting: its barrier must see the signals the others sent.
static bool test_first_call(Suite &s) {
  iris_team_t world;
  int *res, h = 0;
  CK(cudaMalloc(&res, sizeof(int)));
  CK(cudaMemset(res, 0, sizeof(int))); CK(cudaDeviceSynchronize()); // the test streams do not wait for the legacy stream
  g_after_meet_us = 300000;
  const iris_status_t got = iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world);
  g_after_meet_us = 0;
  if (got != IRIS_SUCCESS) { fprintf(stderr, "team_test: rank %d: iris_team_get: %s\n", s.rank, iris_error_detail()); return false; }
  k_one_barrier<<<1, 128, 0, s.stream>>>(iris_device_context(s.ctx), world, res);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s.stream));
  CK(cudaMemcpy(&h, res, sizeof h, cudaMemcpyDeviceToHost));
  const iris_status_t st = iris_get_async_error(s.ctx);
  if (h != 1 || st != IRIS_SUCCESS) fprintf(stderr, "team_test: rank %d: the first world-team barrier: %d (1: passed), context %s: %s\n", s.rank, h, iris_status_string(st), iris_error_detail());
  cudaFree(res);
  report(s, "first team call, then a world-team barrier at once, the last rank late past the table's meeting: every rank's barrier passes", h == 1 && st == IRIS_SUCCESS);
  return true;
}

// late: a split of a team that is not the world (its meetings go over the heap words), the
// last rank 2x the meeting bound late: every member's split fails, and then the team is
// broken on every member: its destroy fails at once with IRIS_ERROR_TIMEOUT saying an
// earlier meeting failed (the members' meeting counts differ: before, the destroy read the
// late rank's stale record as a fresh one, a false IRIS_ERROR_MISMATCH, or waited out of
// step), *team released; the context goes on (a split of the world works).
static bool test_late_take(Suite &s, const iris_team_t &world, int bound_ms);
static bool test_late(Suite &s, int bound_ms) {
  iris_team_t world, p, sub;
  IK(iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world));
  IK(iris_team_split(s.ctx, &world, 0, -s.rank, &p)); // every rank, reversed: a slot of its own
  IK(iris_barrier(s.ctx));
  const double t0 = now_s();
  if (s.rank == s.world - 1) usleep((useconds_t)bound_ms * 2000);
  const iris_status_t sp = iris_team_split(s.ctx, &p, 0, s.rank, &sub);
  const iris_status_t d = iris_team_destroy(s.ctx, &p);
  const bool named = strstr(iris_error_detail(), "earlier meeting") != NULL;
  if (sp == IRIS_SUCCESS || d != IRIS_ERROR_TIMEOUT || !named || p.size != 0 || sub.size != 0)
    fprintf(stderr, "team_test: rank %d: the late split: %s; the destroy after it: %s: %s\n", s.rank, iris_status_string(sp), iris_status_string(d), iris_error_detail());
  while (now_s() - t0 < 3.5 * bound_ms * 1e-3) usleep(10000); // the late rank's split is over (2x + 1x the bound) before the next host meeting
  report(s, "a sub-team split with the last rank late: fails on every member; the team's destroy then says an earlier meeting failed (IRIS_ERROR_TIMEOUT), not a mismatch",
         sp != IRIS_SUCCESS && d == IRIS_ERROR_TIMEOUT && named && p.size == 0 && p.rank == -1 && sub.size == 0);
  iris_team_t t;
  const iris_status_t again = iris_team_split(s.ctx, &world, s.rank % 2, s.rank, &t);
  const bool ok = again == IRIS_SUCCESS && iris_team_destroy(s.ctx, &t) == IRIS_SUCCESS && iris_get_async_error(s.ctx) == IRIS_SUCCESS;
  report(s, "after the broken team: the context goes on (a split of the world and its destroy succeed)", ok);
  return test_late_take(s, world, bound_ms);
}

// A kernel that runs ns nanoseconds (one thread).
__global__ void k_sleep_ns(long long ns) {
  const unsigned long long t0 = iris_detail_time_ns();
  while ((long long)(iris_detail_time_ns() - t0) < ns) iris_detail_pause();
}
// The split's second meeting late on one member only: the last rank's take waits for its
// GPU (the new team's words are zeroed synchronously) while a kernel of its own runs 2.5x the
// meeting bound, so the others' second meeting times out after the first succeeded
// everywhere, and the last rank's, its peers' records already there, succeeds: it holds the
// team. The others must keep the team's slot taken (as a failed destroy does): a team they
// split next among themselves must not get the slot the last rank's team still signals in
// (before, they gave it back and their next team got it).
static bool test_late_take(Suite &s, const iris_team_t &world, int bound_ms) {
  const bool late = s.rank == s.world - 1;
  iris_team_t p, q, r, sub;
  IK(iris_team_split(s.ctx, &world, 0, s.rank, &p)); // every rank: a parent that meets over the heap words
  IK(iris_barrier(s.ctx));
  const double t0 = now_s();
  if (late) {
    k_sleep_ns<<<1, 1, 0, s.stream>>>((long long)bound_ms * 2500000LL);
    CK(cudaGetLastError());
  }
  const iris_status_t sq = iris_team_split(s.ctx, &p, 0, s.rank, &q);
  const std::string why = iris_error_detail();
  int held = late && sq == IRIS_SUCCESS ? q.slot : -1, all[IRIS_MAX_RANKS];
  while (now_s() - t0 < 4.5 * bound_ms * 1e-3) usleep(10000); // the last rank's split is over (2.5x the bound and its meeting) before the next host meeting
  IK(iris_allgather_host(s.ctx, &held, all, sizeof held));
  held = all[s.world - 1];
  // the others' own team: a split of the world the last rank opts out of, then a split of
  // that (its slot free on the others alone)
  IK(iris_team_split(s.ctx, &world, late ? IRIS_TEAM_NONE : 0, s.rank, &r));
  int got = -1;
  if (!late) {
    IK(iris_team_split(s.ctx, &r, 0, s.rank, &sub));
    got = sub.slot;
    IK(iris_team_destroy(s.ctx, &sub));
    IK(iris_team_destroy(s.ctx, &r));
  }
  const bool ok = late ? sq == IRIS_SUCCESS && q.size == s.world && q.slot >= 0 : sq == IRIS_ERROR_TIMEOUT && q.size == 0 && q.rank == -1 && held >= 0 && got >= 0 && got != held;
  if (!ok)
    fprintf(stderr, "team_test: rank %d: the split with the last rank's second meeting late: %s (%s), team size %d; the last rank's team in slot %d, the others' next team in slot %d\n",
            s.rank, iris_status_string(sq), why.c_str(), q.size, held, got);
  report(s, "a split whose second meeting times out on the others only: they return IRIS_ERROR_TIMEOUT and keep its slot taken; their next team gets another slot than the "
            "one the last rank's team holds", ok);
  // (the last rank's team and the parent are left to iris_finalize: their meetings would wait
  // out the bound, the others having given up on them)
  return true;
}

// The last rank stops coming: the others' waits end within 2x the bound, naming it.
// mixed (stuck-mixed): a world all-reduce on the test's stream, then a team all-reduce on a
// second stream queued behind it (an event), the host polling iris_get_async_error as a
// watchdog does: once the world's wait runs out the team's kernel gives up at its next
// check (the whole within bound + 1 s), not after a bound of its own (2x the bound).
static int test_stuck(Suite &s, bool coll, bool mixed = false) {
  const int n = s.world, last = n - 1;
  const double bound = getenv("IRIS_WAIT_TIMEOUT_MS") ? atof(getenv("IRIS_WAIT_TIMEOUT_MS")) * 1e-3 : IRIS_WAIT_TIMEOUT_NS * 1e-9;
  iris_team_t world, t;
  int *res;
  float *a;
  // the world's collective state first (mixed: its setup is a meeting of every rank, which the last rank would never reach)
  if (iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world) != IRIS_SUCCESS || iris_team_split(s.ctx, &world, 0, -s.rank, &t) != IRIS_SUCCESS ||
      (mixed && iris_collectives_setup(s.ctx) != IRIS_SUCCESS) || iris_malloc(s.ctx, 2 * 4096 * sizeof(float), (void **)&a) != IRIS_SUCCESS ||
      iris_barrier(s.ctx) != IRIS_SUCCESS) {
    printf("FAIL: [%s] setup on rank %d: %s\n", s.tag.c_str(), s.rank, iris_error_detail());
    return 1;
  }
  cudaMalloc(&res, sizeof(int));
  cudaMemset(res, 0, sizeof(int));
  cudaDeviceSynchronize();
  if (s.rank == last) { // never comes; then leaves without meeting anyone
    sleep((unsigned)(3 * bound + 2));
    iris_abort(s.ctx);
    iris_finalize(s.ctx);
    return 0;
  }
  double t0 = now_s();
  iris_status_t st = IRIS_SUCCESS;
  int h = 0;
  if (mixed) {
    cudaStream_t sb;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    st = iris_all_reduce(s.ctx, a, a, 4096, IRIS_FLOAT32, IRIS_SUM, s.stream);
    cudaEventRecord(ev, s.stream);
    cudaStreamWaitEvent(sb, ev, 0);
    const iris_status_t st2 = iris_all_reduce_team(s.ctx, &t, a + 4096, a + 4096, 4096, IRIS_FLOAT32, IRIS_SUM, sb, NULL);
    if (st != IRIS_SUCCESS || st2 != IRIS_SUCCESS) fprintf(stderr, "team_test: rank %d: enqueueing the world / team all-reduce: %s / %s\n", s.rank, iris_status_string(st), iris_status_string(st2));
    while (cudaStreamQuery(sb) == cudaErrorNotReady || cudaStreamQuery(s.stream) == cudaErrorNotReady) { // the watchdog
      (void)iris_get_async_error(s.ctx);
      usleep(1000);
    }
    st = iris_get_async_error(s.ctx);
    cudaEventDestroy(ev);
    cudaStreamDestroy(sb);
  } else if (coll) {
    st = iris_all_reduce_team(s.ctx, &t, a, a, 4096, IRIS_FLOAT32, IRIS_SUM, s.stream, NULL);
    cudaStreamSynchronize(s.stream);
    if (st == IRIS_SUCCESS) st = iris_team_check(s.ctx, &t);
  } else {
    k_one_barrier<<<1, 128, 0, s.stream>>>(iris_device_context(s.ctx), t, res);
    cudaStreamSynchronize(s.stream);
    cudaMemcpy(&h, res, sizeof h, cudaMemcpyDeviceToHost);
    st = iris_get_async_error(s.ctx);
  }
  double took = now_s() - t0;
  char want[64];
  snprintf(want, sizeof want, "rank %d", last);
  bool ok = (st == IRIS_ERROR_TIMEOUT || st == IRIS_ERROR_PEER_FAILED) && strstr(iris_error_detail(), want) && took < (mixed ? bound : 2 * bound) + 1 && (coll || mixed || h == 2);
  printf("%s: [%s] rank %d: the %s ends in %.1f s (bound %.1f s) naming world rank %d%s%s\n", ok ? "PASS" : "FAIL", s.tag.c_str(), s.rank,
         mixed ? "world all-reduce and the team all-reduce queued behind it" : coll ? "team all-reduce" : "team barrier", took, bound, last, ok ? "" : ": ",
         ok ? "" : iris_error_detail());
  ok &= iris_all_reduce_team(s.ctx, &t, a, a, 4096, IRIS_FLOAT32, IRIS_SUM, s.stream, NULL) != IRIS_SUCCESS; // later calls fail at once
  { // the team's destroy on the faulted context: the fault at once (no meeting, no wait), the handle released
    const double d0 = now_s();
    const iris_status_t d = iris_team_destroy(s.ctx, &t);
    const bool dok = (d == IRIS_ERROR_TIMEOUT || d == IRIS_ERROR_PEER_FAILED) && t.size == 0 && t.rank == -1 && now_s() - d0 < 1;
    printf("%s: [%s] rank %d: iris_team_destroy on the faulted context returns the fault at once (%s in %.2f s), the handle released%s%s\n", dok ? "PASS" : "FAIL",
           s.tag.c_str(), s.rank, iris_status_string(d), now_s() - d0, dok ? "" : ": ", dok ? "" : iris_error_detail());
    ok &= dok;
  }
  iris_finalize(s.ctx);
  return ok ? 0 : 1;
}

// killed: above. A rank's verdicts are its own (after the death no host exchange works).
static int test_killed(Suite &s) {
  const int n = s.world, last = n - 1;
  iris_team_t world, all, part;
  float *a;
  if (iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world) != IRIS_SUCCESS || iris_team_split(s.ctx, &world, 0, -s.rank, &all) != IRIS_SUCCESS ||
      iris_team_split(s.ctx, &world, s.rank == last ? 1 : 0, s.rank, &part) != IRIS_SUCCESS ||
      iris_malloc(s.ctx, 2 * 4096 * sizeof(float), (void **)&a) != IRIS_SUCCESS || iris_barrier(s.ctx) != IRIS_SUCCESS) {
    printf("FAIL: [%s] setup on rank %d: %s\n", s.tag.c_str(), s.rank, iris_error_detail());
    return 1;
  }
  std::vector<float> h(4096, (float)(s.rank + 1));
  CK(cudaMemcpy(a, h.data(), 4096 * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaDeviceSynchronize());
  IK(iris_barrier(s.ctx));
  if (s.rank == last) {
    usleep(200000);
    raise(SIGKILL);
  }
  usleep(700000); // the death is seen; nothing has failed yet (no wait ran)
  bool ok = true;
  { // the survivors' team: its bound is its own, its calls exact
    const iris_status_t st = iris_all_reduce_team(s.ctx, &part, a, a + 4096, 4096, IRIS_FLOAT32, IRIS_SUM, s.stream, NULL);
    CK(cudaStreamSynchronize(s.stream));
    const iris_status_t chk = iris_team_check(s.ctx, &part);
    CK(cudaMemcpy(h.data(), a + 4096, 4096 * sizeof(float), cudaMemcpyDeviceToHost));
    const float want = (float)((n - 1) * n / 2);
    size_t bad = 0;
    for (float v : h) bad += v != want;
    const bool pok = st == IRIS_SUCCESS && chk == IRIS_SUCCESS && bad == 0;
    printf("%s: [%s] rank %d: after the last rank's death, an all-reduce of the survivors' team is exact (%s, check %s, %zu wrong of 4096)%s%s\n", pok ? "PASS" : "FAIL",
           s.tag.c_str(), s.rank, iris_status_string(st), iris_status_string(chk), bad, pok ? "" : ": ", pok ? "" : iris_error_detail());
    ok &= pok;
  }
  { // the team of every rank: cut by the peer watch
    const double t0 = now_s();
    iris_status_t st = iris_all_reduce_team(s.ctx, &all, a, a + 4096, 4096, IRIS_FLOAT32, IRIS_SUM, s.stream, NULL);
    CK(cudaStreamSynchronize(s.stream));
    if (st == IRIS_SUCCESS) st = iris_team_check(s.ctx, &all);
    const double took = now_s() - t0;
    char want[48];
    snprintf(want, sizeof want, "rank %d (pid", last);
    const bool aok = st == IRIS_ERROR_PEER_FAILED && strstr(iris_error_detail(), want) && strstr(iris_error_detail(), "peer watch") && took < 1.5;
    printf("%s: [%s] rank %d: a team all-reduce with the dead rank a member ends in %.2f s under a 120 s bound (%s): %s\n", aok ? "PASS" : "FAIL", s.tag.c_str(), s.rank,
           took, iris_status_string(st), iris_error_detail());
    ok &= aok;
  }
  iris_finalize(s.ctx);
  return ok ? 0 : 1;
}

// graph: on the split team (even / odd ranks at 3 ranks and more, every rank at 2; keys
// reversed, so team ranks are not world ranks) and on the world, one stream captures team
// barrier kernels (thread, warp and block level, one-shot and session, GRAPH_ROUNDS rounds
// each, their seed read from a device nonce) and every team collective (all-reduce on the
// latency path, in place, two-shot LL and bandwidth; all-gather, reduce-scatter and
// all-to-all latency and bandwidth; broadcast; the device barrier); the graph is replayed
// with a new nonce, fresh inputs in the captured buffers and poisoned outputs before each
// replay, a rank sleeping a few ms first, each output checked whole against a float64 host
// reference. Every fifth replay is followed by the same calls made eagerly (the same
// buffers and barrier indices). The barrier words start 3 launches before 2^64, so the
// epochs cross it during the replays; at the end each index's epoch must be its start plus
// exactly the barriers run (never reset).
#define GRAPH_ROUNDS 8 // barrier rounds per kernel (even: see run_rounds)
enum { G_AR = 0, G_AG, G_RS, G_A2A, G_BC, G_BAR };
struct GOp {
  int team, kind;
  size_t count;
  iris_algo_t algo;
  bool in_place;
  int root;
  float *in, *out;
  size_t nin, nout;
  const char *name;
};
// quarter-integers in [-8192, 8192]: every sum of up to IRIS_MAX_RANKS of them is exact in fp32
static inline uint64_t gbase(uint64_t seed, int run, int world_rank, int op) { return key(seed, (uint64_t)run, (uint64_t)world_rank, (uint64_t)op, 11); }
static inline float gv(uint64_t base, size_t i) { return (float)((int)(mix(base + i) % 65537) - 32768) * 0.25f; }

static bool test_graph(Suite &s, int replays) {
  const int n = s.world;
  const char *tname[2] = {"split", "world"};
  iris_team_t teams[2]; // [0] the split team, [1] the world
  IK(iris_team_get(s.ctx, IRIS_TEAM_WORLD, &teams[1]));
  IK(iris_team_split(s.ctx, &teams[1], n >= 3 ? s.rank % 2 : 0, -s.rank, &teams[0]));
  IK(iris_collectives_setup(s.ctx)); // the world's state, before any kernel (its setup meets every rank)
  // the calls, per team
  std::vector<GOp> ops;
  for (int tt = 0; tt < 2; tt++) {
    const int W = teams[tt].size;
    const GOp list[] = {
        {tt, G_AR, 1003, IRIS_ALGO_AUTO, false, 0, 0, 0, 0, 0, "all-reduce (latency)"},
        {tt, G_AR, 777, IRIS_ALGO_LATENCY, true, 0, 0, 0, 0, 0, "all-reduce in place (latency)"},
        {tt, G_AR, 16387, IRIS_ALGO_TWO_SHOT_LL, false, 0, 0, 0, 0, 0, "all-reduce (two-shot LL)"},
        {tt, G_AR, 65541, IRIS_ALGO_BANDWIDTH, false, 0, 0, 0, 0, 0, "all-reduce (bandwidth)"},
        {tt, G_AG, 1003, IRIS_ALGO_AUTO, false, 0, 0, 0, 0, 0, "all-gather (latency)"},
        {tt, G_AG, 20011, IRIS_ALGO_BANDWIDTH, false, 0, 0, 0, 0, 0, "all-gather (bandwidth)"},
        {tt, G_RS, 1003, IRIS_ALGO_AUTO, false, 0, 0, 0, 0, 0, "reduce-scatter (latency)"},
        {tt, G_RS, 20011, IRIS_ALGO_BANDWIDTH, false, 0, 0, 0, 0, 0, "reduce-scatter (bandwidth)"},
        {tt, G_A2A, 1003, IRIS_ALGO_AUTO, false, 0, 0, 0, 0, 0, "all-to-all (latency)"},
        {tt, G_A2A, 20011, IRIS_ALGO_BANDWIDTH, false, 0, 0, 0, 0, 0, "all-to-all (bandwidth)"},
        {tt, G_BC, 1003, IRIS_ALGO_AUTO, false, W - 1, 0, 0, 0, 0, "broadcast (latency, the last team rank)"},
        {tt, G_BC, 65541, IRIS_ALGO_BANDWIDTH, false, W / 2, 0, 0, 0, 0, "broadcast (bandwidth)"},
        {tt, G_BAR, 0, IRIS_ALGO_AUTO, false, 0, 0, 0, 0, 0, "iris_barrier_device_team"},
    };
    for (const GOp &o : list) ops.push_back(o);
  }
  for (GOp &o : ops) { // heap buffers (the bandwidth path of a team takes no other), every rank alike
    if (o.kind == G_BAR) continue;
    const size_t W = (size_t)teams[o.team].size, cmax = (size_t)o.count * n; // sized for the world on every rank: same offsets everywhere
    o.nin = (o.kind == G_RS || o.kind == G_A2A) ? o.count * W : o.count;
    o.nout = (o.kind == G_AG || o.kind == G_A2A) ? o.count * W : o.count;
    IK(iris_malloc(s.ctx, (cmax + 16) * sizeof(float), (void **)&o.out));
    if (o.in_place) o.in = o.out;
    else IK(iris_malloc(s.ctx, (cmax + 16) * sizeof(float), (void **)&o.in));
  }
  unsigned *buf;
  int *errs;
  unsigned long long *nonce;
  IK(iris_calloc(s.ctx, 2 * ROUND_WORDS * sizeof(unsigned), (void **)&buf)); // a region per team
  CK(cudaMalloc(&errs, 2 * 6 * 3 * sizeof(int)));
  CK(cudaMalloc(&nonce, sizeof(unsigned long long)));
  // the barrier kernels: k = 0..5 per team: level k / 2 (thread, warp, block), session when
  // k is odd; index argument 4 + 2k (a one-shot barrier uses the index after it)
  auto used_index = [](int k) { return 4 + 2 * k + (k % 2 ? 0 : 1); };
  const unsigned long long E0 = 0ULL - (unsigned long long)(3 * GRAPH_ROUNDS + 1); // 3 launches and a barrier before 2^64
  { // the barrier words of every index used start at E0 (this rank's copy: its epoch, the
    // peers' arrivals), set while no kernel runs, before any rank's first barrier
    IK(iris_barrier(s.ctx));
    for (int tt = 0; tt < 2; tt++) {
      if (teams[tt].size < 2) continue;
      iris_detail_team_area_t *a = (iris_detail_team_area_t *)(void *)teams[tt].sync;
      std::vector<unsigned long long> row(IRIS_MAX_RANKS, E0);
      for (int k = 0; k < 6; k++) {
        CK(cudaMemcpy(&a->bar[used_index(k)][0], row.data(), IRIS_MAX_RANKS * sizeof(unsigned long long), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(&a->epoch[used_index(k)], &E0, sizeof E0, cudaMemcpyHostToDevice));
      }
    }
    CK(cudaDeviceSynchronize());
    IK(iris_barrier(s.ctx));
  }
  const iris_device_ctx_t dc = iris_device_context(s.ctx);
  // everything one run enqueues (captured once, or eager)
  auto enqueue_all = [&](cudaStream_t st) -> bool {
    for (int tt = 0; tt < 2; tt++)
      for (int k = 0; k < 6; k++) {
        unsigned *b = buf + tt * ROUND_WORDS;
        int *e = errs + (tt * 6 + k) * 3;
        const int kid = tt * 6 + k, ses = k % 2, idx = 4 + 2 * k;
        if (k / 2 == 0) k_rounds_at<iris_coop_thread><<<1, 1, 0, st>>>(dc, teams[tt], b, GRAPH_ROUNDS, nonce, kid, ses, idx, e);
        else if (k / 2 == 1) k_rounds_at<iris_coop_warp><<<1, 32, 0, st>>>(dc, teams[tt], b, GRAPH_ROUNDS, nonce, kid, ses, idx, e);
        else k_rounds_at<iris_coop_block><<<1, 128, 0, st>>>(dc, teams[tt], b, GRAPH_ROUNDS, nonce, kid, ses, idx, e);
        CK(cudaGetLastError());
      }
    for (const GOp &o : ops) {
      const iris_team_t *t = &teams[o.team];
      iris_coll_opts_t opt = IRIS_COLL_OPTS_INIT;
      opt.algo = o.algo;
      iris_status_t r;
      switch (o.kind) {
      case G_AR: r = iris_all_reduce_team(s.ctx, t, o.in, o.out, o.count, IRIS_FLOAT32, IRIS_SUM, st, &opt); break;
      case G_AG: r = iris_all_gather_team(s.ctx, t, o.in, o.out, o.count, IRIS_FLOAT32, st, &opt); break;
      case G_RS: r = iris_reduce_scatter_team(s.ctx, t, o.in, o.out, o.count, IRIS_FLOAT32, IRIS_SUM, st, &opt); break;
      case G_A2A: r = iris_all_to_all_team(s.ctx, t, o.in, o.out, o.count, IRIS_FLOAT32, st, &opt); break;
      case G_BC: r = iris_broadcast_team(s.ctx, t, o.in, o.out, o.count, IRIS_FLOAT32, o.root, st, &opt); break;
      default: r = iris_barrier_device_team(s.ctx, t, st); break;
      }
      if (r != IRIS_SUCCESS) {
        fprintf(stderr, "team_test: rank %d: %s on the %s team (size %d): %s: %s\n", s.rank, o.name, tname[o.team], t->size, iris_status_string(r), iris_error_detail());
        return false;
      }
    }
    return true;
  };
  // one run: a new nonce, fresh inputs, poisoned outputs, a few ms of skew, the calls (the
  // graph or eager), then every output against the float64 reference; counts what is wrong
  std::vector<std::vector<float>> hin(ops.size());
  unsigned long long nonce_h = 0;
  int runs = 0;
  auto run = [&](int tag, cudaGraphExec_t ge, long long &bad_coll, long long &bad_bar) -> bool {
    nonce_h = mix(s.seed ^ mix(0x6a09e667ULL + (uint64_t)tag));
    CK(cudaMemcpyAsync(nonce, &nonce_h, sizeof nonce_h, cudaMemcpyHostToDevice, s.stream));
    CK(cudaMemsetAsync(errs, 0, 2 * 6 * 3 * sizeof(int), s.stream));
    for (size_t i = 0; i < ops.size(); i++) {
      const GOp &o = ops[i];
      if (o.kind == G_BAR) continue;
      const uint64_t base = gbase(s.seed, tag, s.rank, (int)i);
      hin[i].resize(o.nin);
      for (size_t j = 0; j < o.nin; j++) hin[i][j] = gv(base, j);
      CK(cudaMemsetAsync(o.out, 0xA5, (o.nout + 16) * sizeof(float), s.stream)); // poison (in place: then the input over it)
      CK(cudaMemcpyAsync(o.in, hin[i].data(), o.nin * sizeof(float), cudaMemcpyHostToDevice, s.stream));
    }
    usleep((useconds_t)(key(s.seed, (uint64_t)tag, (uint64_t)s.rank, 0, 5) % 3000 + (tag % n == s.rank ? 4000 : 0))); // skewed arrival
    if (ge) CK(cudaGraphLaunch(ge, s.stream));
    else if (!enqueue_all(s.stream)) return false;
    CK(cudaStreamSynchronize(s.stream));
    runs++;
    int h[2 * 6 * 3];
    CK(cudaMemcpy(h, errs, sizeof h, cudaMemcpyDeviceToHost));
    for (int k = 0; k < 2 * 6; k++)
      if (h[3 * k] || h[3 * k + 1] || h[3 * k + 2]) {
        if (bad_bar == 0)
          fprintf(stderr, "team_test: rank %d: run %d (%s): barrier kernel %d of the %s team: %d wrong values, %d failed barriers, %d seed disagreements\n", s.rank, tag,
                  ge ? "graph" : "eager", k % 6, tname[k / 6], h[3 * k], h[3 * k + 1], h[3 * k + 2]);
        bad_bar += h[3 * k] + h[3 * k + 1] + h[3 * k + 2];
      }
    for (size_t i = 0; i < ops.size(); i++) {
      const GOp &o = ops[i];
      if (o.kind == G_BAR) continue;
      const iris_team_t &t = teams[o.team];
      const int W = t.size, me = t.rank;
      std::vector<float> got(o.nout + 16);
      CK(cudaMemcpy(got.data(), o.out, (o.nout + 16) * sizeof(float), cudaMemcpyDeviceToHost));
      std::vector<uint64_t> base(W);
      for (int p = 0; p < W; p++) base[p] = gbase(s.seed, tag, iris_team_world_rank(&t, p), (int)i);
      long long bad = 0;
      for (size_t j = 0; j < o.nout; j++) {
        double want = 0;
        switch (o.kind) {
        case G_AR: for (int p = 0; p < W; p++) want += (double)gv(base[p], j); break;
        case G_AG: want = gv(base[j / o.count], j % o.count); break;
        case G_RS: for (int p = 0; p < W; p++) want += (double)gv(base[p], (size_t)me * o.count + j); break;
        case G_A2A: want = gv(base[j / o.count], (size_t)me * o.count + j % o.count); break;
        default: want = gv(base[o.root], j); break;
        }
        if ((double)got[j] != want) {
          if (bad == 0 && bad_coll == 0)
            fprintf(stderr, "team_test: rank %d: run %d (%s): %s on the %s team (team rank %d of %d): element %zu is %.9g, want %.9g\n", s.rank, tag, ge ? "graph" : "eager",
                    o.name, tname[o.team], me, W, j, (double)got[j], want);
          bad++;
        }
      }
      unsigned char guard[16 * sizeof(float)], poison_bytes[16 * sizeof(float)];
      memcpy(guard, &got[o.nout], sizeof guard);
      memset(poison_bytes, 0xA5, sizeof poison_bytes);
      if (memcmp(guard, poison_bytes, sizeof guard) != 0) {
        if (bad_coll == 0) fprintf(stderr, "team_test: rank %d: run %d: %s on the %s team wrote past its output\n", s.rank, tag, o.name, tname[o.team]);
        bad++;
      }
      bad_coll += bad;
    }
    return true;
  };
  long long eager_coll = 0, eager_bar = 0, graph_coll = 0, graph_bar = 0;
  int tag = 0, graph_runs = 0, eager_runs = 0;
  // eager first: the collective states exist before capture (the world's must)
  if (!run(tag++, NULL, eager_coll, eager_bar)) return false;
  eager_runs++;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
  const bool captured = enqueue_all(s.stream);
  const cudaError_t end = cudaStreamEndCapture(s.stream, &g);
  if (!captured || end != cudaSuccess) {
    fprintf(stderr, "team_test: rank %d: the capture: %s\n", s.rank, captured ? cudaGetErrorString(end) : "a call failed (above)");
    report(s, "graph: team barrier kernels and every team collective on the split team and the world captured on one stream", false);
    return false;
  }
  CK(cudaGraphInstantiate(&ge, g, 0));
  char name[320];
  snprintf(name, sizeof name, "graph: 12 team barrier kernels (thread, warp, block; one-shot and session) and %zu team collectives and device barriers on the split "
                              "team and the world captured on one stream", ops.size());
  report(s, name, true);
  for (int i = 0; i < replays; i++) {
    if (!run(tag++, ge, graph_coll, graph_bar)) return false;
    graph_runs++;
    if (i % 5 == 2) { // the same calls eagerly in between: the same buffers, barrier indices and collective states
      if (!run(tag++, NULL, eager_coll, eager_bar)) return false;
      eager_runs++;
    }
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  if (graph_coll || graph_bar) fprintf(stderr, "team_test: rank %d: %d replays: %lld wrong collective elements, %lld barrier errors\n", s.rank, graph_runs, graph_coll, graph_bar);
  if (eager_coll || eager_bar) fprintf(stderr, "team_test: rank %d: %d eager runs: %lld wrong collective elements, %lld barrier errors\n", s.rank, eager_runs, eager_coll, eager_bar);
  snprintf(name, sizeof name, "graph replayed %d times, a new nonce, fresh inputs and poisoned outputs before each, ranks skewed: every element of every team collective "
                              "exact against the float64 reference", graph_runs);
  report(s, name, graph_coll == 0);
  snprintf(name, sizeof name, "graph replayed %d times: the captured team barrier kernels' values exact every round, no barrier failed", graph_runs);
  report(s, name, graph_bar == 0);
  snprintf(name, sizeof name, "%d eager runs of the same calls between replays (same buffers, barrier indices and collective states): exact", eager_runs);
  report(s, name, eager_coll == 0 && eager_bar == 0);
  { // the epochs: every rank's kernels are over (its stream synchronized, then the host
    // barrier), so this rank's words hold every peer's last arrival
    IK(iris_barrier(s.ctx));
    bool ok = true;
    const unsigned long long want = E0 + (unsigned long long)runs * GRAPH_ROUNDS;
    for (int tt = 0; tt < 2; tt++) {
      if (teams[tt].size < 2) continue;
      const iris_detail_team_area_t *a = (const iris_detail_team_area_t *)(const void *)teams[tt].sync;
      for (int k = 0; k < 6; k++) {
        unsigned long long ep = 0, bar[IRIS_MAX_RANKS];
        CK(cudaMemcpy(&ep, &a->epoch[used_index(k)], sizeof ep, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(bar, &a->bar[used_index(k)][0], sizeof bar, cudaMemcpyDeviceToHost));
        bool k_ok = ep == want;
        for (int p = 0; p < teams[tt].size; p++)
          if (p != teams[tt].rank) k_ok &= bar[p] == want;
        if (!k_ok)
          fprintf(stderr, "team_test: rank %d: the %s team's barrier index %d: epoch %llu, want %llu (start %llu + %d runs x %d rounds)\n", s.rank, tname[tt], used_index(k), ep,
                  want, E0, runs, GRAPH_ROUNDS);
        ok &= k_ok;
      }
    }
    report(s, "team barrier epochs across the replays and eager runs: each index's words advanced by exactly the barriers run (never reset), through 2^64 -> 0",
           ok && want < E0);
  }
  {
    const iris_status_t c0 = iris_team_check(s.ctx, &teams[0]), c1 = iris_team_check(s.ctx, &teams[1]), a = iris_get_async_error(s.ctx);
    if (c0 != IRIS_SUCCESS || c1 != IRIS_SUCCESS || a != IRIS_SUCCESS)
      fprintf(stderr, "team_test: rank %d: after the replays: split team %s, world %s, context %s: %s\n", s.rank, iris_status_string(c0), iris_status_string(c1),
              iris_status_string(a), iris_error_detail());
    report(s, "after the replays: iris_team_check on both teams and iris_get_async_error report nothing", c0 == IRIS_SUCCESS && c1 == IRIS_SUCCESS && a == IRIS_SUCCESS);
  }
  IK(iris_team_destroy(s.ctx, &teams[0]));
  cudaFree(errs);
  cudaFree(nonce);
  return true;
}

// wait-timeout: every rank waits (iris_team_wait_until, one thread) on a flag of its own that
// no member ever sets, naming the next member of a team with keys reversed (team rank i =
// world rank N-1-i, so a team rank named instead of the world rank shows). The contract
// (iris_device.h): the wait returns false once the bound (IRIS_WAIT_TIMEOUT_MS) has passed
// and records a fatal fault naming the world rank of member from_r; the host then reports
// IRIS_ERROR_TIMEOUT (the member is alive) through iris_get_async_error and iris_team_check;
// the fault stays: later calls return it at once (no launch, no wait, no meeting), a later
// wait of the context gives up at its next look at the fault words, the team's destroy
// returns it and releases the handle, iris_finalize skips the final barrier (IRIS_SUCCESS).
// Every rank faults alike, so no rank's finalize waits for a meeting. Per-rank lines: the
// collective report cannot meet on a faulted context.
__global__ void k_wait_never(iris_device_ctx_t ctx, iris_team_t team, const unsigned long long *flag, int from_r, int *res) {
  res[0] = iris_team_wait_until(ctx, team, flag, IRIS_CMP_GE, 1ULL, from_r) ? 1 : 2;
}
static int test_wait_timeout(Suite &s) {
  const char *env = getenv("IRIS_WAIT_TIMEOUT_MS");
  if (!env) {
    if (s.rank == 0) printf("SKIP: [%s] IRIS_WAIT_TIMEOUT_MS is not set: the wait would run 10 minutes (the scripts pass 2000)\n", s.tag.c_str());
    return iris_finalize(s.ctx) == IRIS_SUCCESS ? 0 : 1;
  }
  const double bound = atof(env) * 1e-3;
  iris_team_t world, t;
  unsigned long long *flag;
  float *a;
  int *res;
  if (iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world) != IRIS_SUCCESS || iris_team_split(s.ctx, &world, 0, -s.rank, &t) != IRIS_SUCCESS ||
      iris_collectives_setup(s.ctx) != IRIS_SUCCESS || iris_calloc(s.ctx, 2 * sizeof(unsigned long long), (void **)&flag) != IRIS_SUCCESS ||
      iris_malloc(s.ctx, 4096 * sizeof(float), (void **)&a) != IRIS_SUCCESS || iris_barrier(s.ctx) != IRIS_SUCCESS) {
    printf("FAIL: [%s] setup on rank %d: %s\n", s.tag.c_str(), s.rank, iris_error_detail());
    return 1;
  }
  if (cudaMalloc(&res, 2 * sizeof(int)) != cudaSuccess || cudaMemset(res, 0, 2 * sizeof(int)) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    printf("FAIL: [%s] setup on rank %d: device memory\n", s.tag.c_str(), s.rank);
    return 1;
  }
  const int from = (t.rank + 1) % t.size, from_w = iris_team_world_rank(&t, from);
  char named[64];
  snprintf(named, sizeof named, "waited for rank %d ", from_w); // the fault's words for the member (a multi-node world adds "(rank L of node N)")
  bool all_ok = true;
  auto line = [&](bool ok, const std::string &what, const char *detail) {
    printf("%s: [%s] rank %d: %s%s%s\n", ok ? "PASS" : "FAIL", s.tag.c_str(), s.rank, what.c_str(), ok ? "" : ": ", ok ? "" : detail);
    all_ok &= ok;
  };
  char what[400];
  if (iris_barrier(s.ctx) != IRIS_SUCCESS) { // the ranks start their waits together
    printf("FAIL: [%s] rank %d: the barrier before the wait: %s\n", s.tag.c_str(), s.rank, iris_error_detail());
    return 1;
  }
  const double t0 = now_s();
  int h = 0;
  k_wait_never<<<1, 1, 0, s.stream>>>(iris_device_context(s.ctx), t, flag, from, res);
  cudaStreamSynchronize(s.stream);
  const double took = now_s() - t0;
  cudaMemcpy(&h, res, sizeof h, cudaMemcpyDeviceToHost);
  snprintf(what, sizeof what, "iris_team_wait_until on a flag no member sets returns false after the bound (%.2f s; bound %.1f s)", took, bound);
  line(h == 2 && took >= bound && took < bound + 1, what, h == 2 ? "outside [bound, bound + 1 s)" : h == 1 ? "it returned true" : "the kernel did not run");
  // the fault: IRIS_ERROR_TIMEOUT naming the member's world rank and the user wait
  const iris_status_t st = iris_get_async_error(s.ctx);
  const std::string d1 = iris_error_detail();
  snprintf(what, sizeof what, "iris_get_async_error: IRIS_ERROR_TIMEOUT naming world rank %d (team rank %d), the member waited on, and the user wait", from_w, from);
  line(st == IRIS_ERROR_TIMEOUT && strstr(d1.c_str(), named) && strstr(d1.c_str(), "iris_wait_until"), what, (std::string(iris_status_string(st)) + ": " + d1).c_str());
  { // it stays: reported again, and by iris_team_check (the context's fault)
    const iris_status_t st2 = iris_get_async_error(s.ctx);
    const std::string d2 = iris_error_detail();
    const iris_status_t tc = iris_team_check(s.ctx, &t);
    const std::string d3 = iris_error_detail();
    line(st2 == IRIS_ERROR_TIMEOUT && strstr(d2.c_str(), named) && tc == IRIS_ERROR_TIMEOUT && strstr(d3.c_str(), named),
         "the fault stays: iris_get_async_error again and iris_team_check on the team report it, naming the same world rank",
         (std::string(iris_status_string(st2)) + " / " + iris_status_string(tc) + ": " + d3).c_str());
  }
  { // later calls return the fault at once: nothing launched (the buffer keeps its bytes), no wait, no meeting
    std::vector<unsigned char> before(4096 * sizeof(float), 0x5A), after(4096 * sizeof(float));
    cudaMemcpy(a, before.data(), before.size(), cudaMemcpyHostToDevice);
    const double c0 = now_s();
    const iris_status_t r1 = iris_all_reduce_team(s.ctx, &t, a, a, 4096, IRIS_FLOAT32, IRIS_SUM, s.stream, NULL);
    const iris_status_t r2 = iris_all_reduce(s.ctx, a, a, 4096, IRIS_FLOAT32, IRIS_SUM, s.stream);
    const iris_status_t r3 = iris_barrier(s.ctx);
    iris_team_t sub;
    const iris_status_t r4 = iris_team_split(s.ctx, &t, 0, 0, &sub);
    const double dt = now_s() - c0;
    const std::string d4 = iris_error_detail();
    cudaStreamSynchronize(s.stream);
    cudaMemcpy(after.data(), a, after.size(), cudaMemcpyDeviceToHost);
    const bool fault4 = r1 == IRIS_ERROR_TIMEOUT && r2 == IRIS_ERROR_TIMEOUT && r3 == IRIS_ERROR_TIMEOUT && r4 == IRIS_ERROR_TIMEOUT;
    snprintf(what, sizeof what, "later calls (team and world all-reduce, iris_barrier, iris_team_split) return IRIS_ERROR_TIMEOUT at once (%.3f s), nothing launched", dt);
    char why[200];
    snprintf(why, sizeof why, "%s, %s, %s, %s; buffer %s", iris_status_string(r1), iris_status_string(r2), iris_status_string(r3), iris_status_string(r4),
             before == after ? "untouched" : "written");
    line(fault4 && dt < 1 && before == after && sub.size == 0 && strstr(d4.c_str(), named), what, why);
  }
  { // a later wait of the context gives up at its next look at the fault words, not after a bound of its own; the first fault is kept
    const double w0 = now_s();
    int h2 = 0;
    k_wait_never<<<1, 1, 0, s.stream>>>(iris_device_context(s.ctx), t, flag + 1, t.rank, res + 1);
    cudaStreamSynchronize(s.stream);
    const double took2 = now_s() - w0;
    cudaMemcpy(&h2, res + 1, sizeof h2, cudaMemcpyDeviceToHost);
    const iris_status_t st3 = iris_get_async_error(s.ctx);
    const std::string d5 = iris_error_detail();
    snprintf(what, sizeof what, "a later iris_team_wait_until of the faulted context returns false at once (%.3f s), the fault still names world rank %d", took2, from_w);
    line(h2 == 2 && took2 < 0.5 && st3 == IRIS_ERROR_TIMEOUT && strstr(d5.c_str(), named), what, (std::string(iris_status_string(st3)) + ": " + d5).c_str());
  }
  { // the team's destroy: the fault at once, the handle released (as in stuck)
    const double d0 = now_s();
    const iris_status_t d = iris_team_destroy(s.ctx, &t);
    const double dt = now_s() - d0;
    snprintf(what, sizeof what, "iris_team_destroy on the faulted context returns the fault at once (%s in %.3f s), the handle released", iris_status_string(d), dt);
    line(d == IRIS_ERROR_TIMEOUT && t.size == 0 && t.rank == -1 && dt < 1, what, iris_error_detail());
  }
  // stay alive until every rank has read its fault (a process gone by then would turn a
  // peer's report into IRIS_ERROR_PEER_FAILED): the ranks left the barrier together
  while (now_s() - t0 < bound + 3) usleep(10000);
  const double f0 = now_s();
  const iris_status_t fin = iris_finalize(s.ctx);
  snprintf(what, sizeof what, "iris_finalize on the faulted context returns IRIS_SUCCESS without meeting the others (%.2f s)", now_s() - f0);
  line(fin == IRIS_SUCCESS, what, iris_error_detail());
  return all_ok ? 0 : 1;
}

// ------------------------------------------------------------------ staged --
// Every collective on team t with buffers off the heap through its staging areas; counts of
// 1 to many chunks (64 KiB areas: 16 K fp32, 16 K / W per block for the chunked kinds), in
// place (all-reduce, all-to-all) every other count; every other call forced onto the
// bandwidth path (IRIS_ALGO_BANDWIDTH: staged at every size; the others take the latency
// paths where they fit, which read buffers where they lie); streams alternate (the team
// orders its calls across streams). The outputs are poisoned, a guard follows each.
static bool run_staged(Suite &s, const iris_team_t &t, float *in, float *out, cudaStream_t st2, int round) {
  const int W = t.size, me = t.rank;
  const size_t counts[6] = {777, 5000, 40000 + 3, 100000, 163840, (size_t)1 << 20};
  int call = 1000 + 100 * round;
  bool ok = true;
  for (size_t ci = 0; ci < 6; ci++)
    for (int kind = 0; kind < 5; kind++, call++) {
      const size_t count = counts[ci];
      iris_coll_opts_t bw = IRIS_COLL_OPTS_INIT;
      bw.algo = IRIS_ALGO_BANDWIDTH;
      const iris_coll_opts_t *op = (call + round) % 2 ? &bw : NULL;
      const bool inplace = (kind == 0 || kind == 3) && (ci % 2 == 1);
      cudaStream_t st = (call & 1) ? st2 : s.stream;
      const size_t nin = (kind == 2 || kind == 3) ? count * W : count, nout = (kind == 1 || kind == 3) ? count * W : count;
      const int root = (call + round) % W;
      float *recv = inplace ? in : out;
      CK(cudaMemsetAsync(out, 0xA5, nout * sizeof(float) + 64, st));
      if (inplace) CK(cudaMemsetAsync(in + nin, 0xA5, 64, st));
      k_fill<<<64, 256, 0, st>>>(in, nin, s.seed, s.rank, call);
      iris_status_t rc;
      switch (kind) {
      case 0: rc = iris_all_reduce_team(s.ctx, &t, in, recv, count, IRIS_FLOAT32, IRIS_SUM, st, op); break;
      case 1: rc = iris_all_gather_team(s.ctx, &t, in, recv, count, IRIS_FLOAT32, st, op); break;
      case 2: rc = iris_reduce_scatter_team(s.ctx, &t, in, recv, count, IRIS_FLOAT32, IRIS_SUM, st, op); break;
      case 3: rc = iris_all_to_all_team(s.ctx, &t, in, recv, count, IRIS_FLOAT32, st, op); break;
      default: rc = iris_broadcast_team(s.ctx, &t, in, recv, count, IRIS_FLOAT32, root, st, op); break;
      }
      if (rc != IRIS_SUCCESS) {
        fprintf(stderr, "team_test: rank %d: staged collective %d count %zu%s%s: %s\n", s.rank, kind, count, inplace ? " in place" : "", op ? " (bandwidth)" : "",
                iris_error_detail());
        return false;
      }
      std::vector<float> h(nout + 16);
      CK(cudaStreamSynchronize(st));
      CK(cudaMemcpy(h.data(), recv, (nout + 16) * sizeof(float), cudaMemcpyDeviceToHost));
      size_t bad = 0, first = nout;
      for (size_t i = 0; i < nout; i++) {
        if (!same(h[i], coll_want(s.seed, t, kind, count, root, call, i))) {
          if (first == nout) first = i;
          bad++;
        }
      }
      unsigned guard;
      memcpy(&guard, &h[nout], 4);
      if (bad || guard != 0xA5A5A5A5u) {
        fprintf(stderr, "team_test: rank %d (team rank %d of %d): staged collective %d count %zu%s%s: %zu wrong (first at %zu: %g), guard %08x\n", s.rank, me, W, kind,
                count, inplace ? " in place" : "", op ? " (bandwidth)" : "", bad, first, first < nout ? (double)h[first] : 0.0, guard);
        ok = false;
      }
    }
  const iris_status_t chk = iris_team_check(s.ctx, &t);
  if (chk != IRIS_SUCCESS) fprintf(stderr, "team_test: rank %d: the team's check after staged calls: %s: %s\n", s.rank, iris_status_string(chk), iris_error_detail());
  return ok && chk == IRIS_SUCCESS;
}

static bool test_staged(Suite &s) {
  const int n = s.world;
  const size_t area = (size_t)64 << 10, big = ((size_t)1 << 20) * (size_t)n + 64;
  iris_team_t world, halves, all;
  float *in, *out, *heap_out;
  char *areas[4], *off_area;
  cudaStream_t st2;
  IK(iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world));
  IK(iris_team_split(s.ctx, &world, s.rank / 2, s.rank, &halves)); // {0,1}{2,3}; at 3 ranks {0,1}{2}
  IK(iris_team_split(s.ctx, &world, 0, n - s.rank, &all));          // every rank, keys reversed: not the world team
  for (int i = 0; i < 4; i++) IK(iris_malloc(s.ctx, area, (void **)&areas[i])); // every rank, in order: the same offsets everywhere
  CK(cudaMalloc(&off_area, area));
  CK(cudaMalloc(&in, big * sizeof(float)));
  CK(cudaMalloc(&out, big * sizeof(float)));
  IK(iris_malloc(s.ctx, 4096 * sizeof(float), (void **)&heap_out));
  CK(cudaStreamCreateWithFlags(&st2, cudaStreamNonBlocking));
  { // the areas' refusals (every member alike; each a meeting), then the areas
    const iris_status_t small = iris_team_set_staging(s.ctx, &all, areas[2], areas[3], 1024);
    const iris_status_t off = iris_team_set_staging(s.ctx, &all, off_area, areas[3], area);
    const iris_status_t twice = iris_team_set_staging(s.ctx, &all, areas[2], areas[2], area);
    const iris_status_t overlap = iris_team_set_staging(s.ctx, &all, areas[2], areas[2] + 1024, area - 2048);
    const iris_status_t half = iris_team_set_staging(s.ctx, &all, areas[2], NULL, area);
    const bool ok = small == IRIS_ERROR_INVALID_ARGUMENT && off == IRIS_ERROR_INVALID_ARGUMENT && twice == IRIS_ERROR_INVALID_ARGUMENT &&
                    overlap == IRIS_ERROR_INVALID_ARGUMENT && half == IRIS_ERROR_INVALID_ARGUMENT;
    if (!ok)
      fprintf(stderr, "team_test: rank %d: staging areas of 1 KiB %s, off the heap %s, one block twice %s, overlapping %s, one NULL %s\n", s.rank, iris_status_string(small),
              iris_status_string(off), iris_status_string(twice), iris_status_string(overlap), iris_status_string(half));
    report(s, "staging areas too small, off the heap, one block twice, overlapping, one NULL: IRIS_ERROR_INVALID_ARGUMENT on every member", ok);
  }
  { // members that disagree: one member's areas refused (every member refuses, naming it),
    // another's swapped (IRIS_ERROR_MISMATCH on every member); nothing set either way, so
    // a bandwidth call off the heap is refused on every member alike (they meet in it)
    const bool last = all.rank == all.size - 1;
    const iris_status_t one_bad = iris_team_set_staging(s.ctx, &all, areas[2], areas[3], last ? 1024 : area);
    const std::string one_bad_detail = iris_error_detail();
    const iris_status_t swapped = iris_team_set_staging(s.ctx, &all, last ? areas[3] : areas[2], last ? areas[2] : areas[3], area);
    const std::string swapped_detail = iris_error_detail();
    const iris_status_t bigger = iris_team_set_staging(s.ctx, &all, areas[2], areas[3], last ? area : area - 1024);
    iris_coll_opts_t bw = IRIS_COLL_OPTS_INIT;
    bw.algo = IRIS_ALGO_BANDWIDTH;
    const iris_status_t unstaged = iris_all_reduce_team(s.ctx, &all, in, out, 40000, IRIS_FLOAT32, IRIS_SUM, s.stream, &bw);
    CK(cudaStreamSynchronize(s.stream));
    const iris_status_t chk = iris_team_check(s.ctx, &all);
    char name[32];
    snprintf(name, sizeof name, "world rank %d", iris_team_world_rank(&all, all.size - 1));
    const bool ok = one_bad == IRIS_ERROR_INVALID_ARGUMENT && (last || one_bad_detail.find(name) != std::string::npos) && swapped == IRIS_ERROR_MISMATCH &&
                    swapped_detail.find("heap offsets") != std::string::npos && bigger == IRIS_ERROR_MISMATCH && unstaged == IRIS_ERROR_NOT_IN_HEAP && chk == IRIS_SUCCESS;
    if (!ok)
      fprintf(stderr, "team_test: rank %d: one member's areas refused: %s (%s); swapped on one member: %s (%s); sizes differ: %s; then a bandwidth call off the heap: %s, "
              "check %s\n", s.rank, iris_status_string(one_bad), one_bad_detail.c_str(), iris_status_string(swapped), swapped_detail.c_str(), iris_status_string(bigger),
              iris_status_string(unstaged), iris_status_string(chk));
    report(s, "areas refused on one member: IRIS_ERROR_INVALID_ARGUMENT on every member naming it; areas or sizes that differ: IRIS_ERROR_MISMATCH on every member; "
              "nothing set (a staged call then refused alike, nothing reported)", ok);
    IK(iris_team_set_staging(s.ctx, &halves, areas[0], areas[1], area)); // a team of one (rank 2 at 3 ranks): a no-op
    IK(iris_team_set_staging(s.ctx, &all, areas[2], areas[3], area));
    IK(iris_team_set_staging(s.ctx, &world, areas[2], areas[3], area)); // the world team: a no-op
  }
  for (int round = 0; round < 3; round++) {
    char what[160];
    bool ok = run_staged(s, all, in, out, st2, round);
    snprintf(what, sizeof what, "round %d: every collective off the heap through the staging areas, team of every rank by reversed key: exact", round);
    report(s, what, ok);
    ok = run_staged(s, halves, in, out, st2, round);
    snprintf(what, sizeof what, "round %d: the same on the halves {0,1}{2,3}: exact", round);
    report(s, what, ok);
  }
  { // a count of 0: on every member, they meet and nothing is reported; on one member
    // only (the others' latency call on heap buffers), a mismatch on every member instead
    // of a wait, nothing written; the next call exact. Then the areas removed: a staged
    // call refused alike on every member, and set again.
    const bool last = all.rank == all.size - 1;
    bool ok = iris_all_reduce_team(s.ctx, &all, in, out, 0, IRIS_FLOAT32, IRIS_SUM, s.stream, NULL) == IRIS_SUCCESS;
    ok &= iris_all_gather_team(s.ctx, &all, NULL, NULL, 0, IRIS_BFLOAT16, st2, NULL) == IRIS_SUCCESS;
    CK(cudaStreamSynchronize(s.stream));
    CK(cudaStreamSynchronize(st2));
    ok &= iris_team_check(s.ctx, &all) == IRIS_SUCCESS;
    CK(cudaMemset(heap_out, 0x5a, 4096 * sizeof(float)));
    CK(cudaDeviceSynchronize());
    IK(iris_barrier(s.ctx));
    ok &= iris_all_reduce_team(s.ctx, &all, heap_out, heap_out, last ? 0 : 1000, IRIS_FLOAT32, IRIS_SUM, s.stream, NULL) == IRIS_SUCCESS;
    CK(cudaStreamSynchronize(s.stream));
    const iris_status_t chk = iris_team_check(s.ctx, &all);
    std::vector<unsigned> h(4096);
    CK(cudaMemcpy(h.data(), heap_out, 4096 * sizeof(float), cudaMemcpyDeviceToHost));
    size_t touched = 0;
    for (unsigned v : h) touched += v != 0x5a5a5a5au;
    const bool after = run_staged(s, all, in, out, st2, 3);
    ok &= chk == IRIS_ERROR_MISMATCH && touched == 0 && after;
    if (chk != IRIS_ERROR_MISMATCH || touched) fprintf(stderr, "team_test: rank %d: a count of 0 on the last member only: check %s, %zu words written\n", s.rank, iris_status_string(chk), touched);
    report(s, "a count of 0 on every member: nothing reported; on one member only: IRIS_ERROR_MISMATCH on every member, nothing written, the next calls exact", ok);
    iris_coll_opts_t bw = IRIS_COLL_OPTS_INIT;
    bw.algo = IRIS_ALGO_BANDWIDTH;
    IK(iris_team_set_staging(s.ctx, &all, NULL, NULL, 0));
    const iris_status_t unstaged = iris_all_reduce_team(s.ctx, &all, in, out, 40000, IRIS_FLOAT32, IRIS_SUM, s.stream, &bw);
    CK(cudaStreamSynchronize(s.stream));
    const iris_status_t chk2 = iris_team_check(s.ctx, &all);
    IK(iris_team_set_staging(s.ctx, &all, areas[2], areas[3], area));
    const bool again = run_staged(s, all, in, out, st2, 4);
    report(s, "areas removed (NULL, NULL, 0): a staged call refused alike on every member (IRIS_ERROR_NOT_IN_HEAP, nothing reported); set again: exact",
           unstaged == IRIS_ERROR_NOT_IN_HEAP && chk2 == IRIS_SUCCESS && again);
  }
  { // a count that differs on the last member in its last chunk only (chunk 0 alike in size),
    // on the bandwidth path (staged)
    const size_t count = 40000, words = count + 20000 + 64;
    iris_coll_opts_t bw = IRIS_COLL_OPTS_INIT;
    bw.algo = IRIS_ALGO_BANDWIDTH;
    const bool last = all.rank == all.size - 1;
    k_fill<<<64, 256, 0, s.stream>>>(in, words, s.seed, s.rank, 77);
    CK(cudaMemsetAsync(out, 0x5a, words * sizeof(float), s.stream));
    CK(cudaStreamSynchronize(s.stream));
    IK(iris_barrier(s.ctx));
    const double t0 = now_s();
    const iris_status_t rc = iris_all_reduce_team(s.ctx, &all, in, out, last ? count + 20000 : count, IRIS_FLOAT32, IRIS_SUM, s.stream, &bw);
    CK(cudaStreamSynchronize(s.stream));
    const double took = now_s() - t0;
    const iris_status_t chk = iris_team_check(s.ctx, &all);
    const std::string detail = iris_error_detail();
    std::vector<unsigned> h(words);
    CK(cudaMemcpy(h.data(), out, words * sizeof(float), cudaMemcpyDeviceToHost));
    size_t touched = 0;
    for (unsigned v : h) touched += v != 0x5a5a5a5au;
    const double t1 = now_s();
    const iris_status_t later = iris_all_reduce_team(s.ctx, &all, in, out, 1024, IRIS_FLOAT32, IRIS_SUM, s.stream, NULL);
    const iris_status_t world_later = iris_all_reduce(s.ctx, heap_out, heap_out, 1024, IRIS_FLOAT32, IRIS_SUM, s.stream);
    CK(cudaStreamSynchronize(s.stream));
    const double tlater = now_s() - t1;
    const bool ok = rc == IRIS_SUCCESS && chk == IRIS_ERROR_MISMATCH && detail.find("split") != std::string::npos && touched == 0 && took < 1.5 && later == IRIS_ERROR_MISMATCH &&
                    world_later == IRIS_ERROR_MISMATCH && tlater < 0.5;
    if (!ok)
      fprintf(stderr, "team_test: rank %d: a staged team all-reduce of %zu elements (%zu on the last member): call %s in %.2f s, check %s (%s), %zu words written; later: team "
              "call %s, world call %s in %.2f s\n",
              s.rank, count, count + 20000, iris_status_string(rc), took, iris_status_string(chk), detail.c_str(), touched, iris_status_string(later),
              iris_status_string(world_later), tlater);
    // a per-rank verdict: after a fatal fault the host exchange (report) returns the fault too
    printf("%s: [%s rank %d] a staged team call whose count differs on the last member in its last chunk: IRIS_ERROR_MISMATCH at once on every member naming the "
           "split, nothing written, fatal as a world's split call is (later team and world calls refused at once)\n",
           ok ? "PASS" : "FAIL", s.tag.c_str(), s.rank);
    if (!ok) s.failed++;
  }
  (void)iris_team_destroy(s.ctx, &all); // the context's fatal fault: returned at once, no meeting
  (void)iris_team_destroy(s.ctx, &halves);
  CK(cudaStreamDestroy(st2));
  cudaFree(in);
  cudaFree(out);
  cudaFree(off_area);
  return true;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *mode = argc > 1 ? argv[1] : "basic";
  const int n = argc > 2 ? atoi(argv[2]) : 2;
  if (getenv("IRIS_TEST_QUICK") && !strcmp(getenv("IRIS_TEST_QUICK"), "1")) g_rounds = 100;
  iris_launch_t L;
  int rank;
  if (n < 2 || n > IRIS_MAX_RANKS) { printf("usage: team_test basic|concurrent|mismatch|first-call|late|graph|staged|stuck|stuck-coll|stuck-mixed|killed|wait-timeout N (N >= 2)\n"); return 2; }
  const bool killed = !strcmp(mode, "killed");
  if (killed) setenv("IRIS_WAIT_TIMEOUT_MS", "120000", 1); // read by iris_init: only the peer watch can end the wait in time
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("FAIL: [%s w=%d] launch: %s\n", mode, n, iris_error_detail()); return 1; }
  if (rank < 0) {
    iris_status_t st = iris_launch_wait(&L, 900000);
    bool ok = st == IRIS_SUCCESS;
    if (!ok && killed) { // the killed rank is expected, the others must exit 0
      ok = L.exit_codes[n - 1] == 128 + SIGKILL;
      for (int r = 0; r < n - 1; r++) ok &= L.exit_codes[r] == 0;
    }
    printf("%s: [%s w=%d] the ranks exit as expected%s%s\n", ok ? "PASS" : "FAIL", mode, n, ok ? "" : ": ", ok ? "" : iris_error_detail());
    return ok ? 0 : 1;
  }
  Suite s = {};
  s.rank = rank;
  s.world = n;
  s.tag = std::string("team ") + mode + " w=" + std::to_string(n);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)1 << 30;
  const int late_ms = 2000;
  if (!strcmp(mode, "late")) cfg.barrier_timeout_ms = late_ms; // the bound of the host meetings (the team's meetings too)
  if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS) {
    if (rank == 0) printf("FAIL: [%s] bring-up: %s\n", s.tag.c_str(), iris_error_detail());
    return 1;
  }
  uint64_t mine = mix((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)), all[IRIS_MAX_RANKS];
  iris_allgather_host(s.ctx, &mine, all, sizeof mine);
  s.seed = all[0];
  cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
  if (!strcmp(mode, "stuck")) return test_stuck(s, false);
  if (!strcmp(mode, "stuck-coll")) return test_stuck(s, true);
  if (!strcmp(mode, "stuck-mixed")) return test_stuck(s, false, true);
  if (!strcmp(mode, "wait-timeout")) return test_wait_timeout(s);
  if (killed) return test_killed(s);
  bool ran = !strcmp(mode, "concurrent") ? test_concurrent(s) : !strcmp(mode, "mismatch") ? test_mismatch(s) : !strcmp(mode, "first-call") ? test_first_call(s) : !strcmp(mode, "late") ? test_late(s, late_ms)
           : !strcmp(mode, "graph") ? test_graph(s, g_rounds >= 1000 ? 64 : 20) : !strcmp(mode, "staged") ? test_staged(s) : test_basic(s);
  if (!ran) report(s, "suite ran to the end (see stderr)", false);
  int rc = s.failed || !ran ? 1 : 0;
  if (iris_finalize(s.ctx) != IRIS_SUCCESS) rc = 1;
  return rc;
}
