// Multi-node collectives on ONE machine (even one GPU): the ranks are split into
// "virtual nodes" with IRIS_HOST_ID (iris) and NCCL_HOSTID (NCCL, which then joins the
// rails over its socket transport on loopback). Checks the node topology, every
// collective x type x op x in place / out of place / off the heap at several sizes (both
// all-reduce compositions) against a float64 reference with poisoned outputs, bitwise
// equality of all-reduce results across ranks, refusals (integer AVG), a CUDA graph of every
// collective replayed many times, and the teams of a multi-node world (the world and rail teams
// host-only: a team barrier on the world team returns false; the node team and a split by node
// meet; a split across nodes is refused). Each call takes the route IRIS_MN_NCCL_WHOLE (or the
// defaults) gives it, the composition or the whole call to NCCL's world communicator
// (internal/coll/mn_route.h); the reference follows the route (fp8 sums and averages).
//   multinode_test NODES RANKS_PER_NODE [--tcp PORT] [--replays N]
//   multinode_test 2 RANKS_PER_NODE --fp8-model   (host only: the fp8 reference against
//                                                  a simulation of NCCL's arithmetic)
//   multinode_test NODES RANKS_PER_NODE --route-agreement   (IRIS_MN_NCCL_WHOLE unlike on
//                  some ranks: setup refuses on every rank, no hang; then alike: it works)
// tests/multinode_test.sh runs it at 2 x 1 and 2 x 2 (Unix and TCP rendezvous), with
// IRIS_MN_NCCL_WHOLE unset, all and none.
#define IRIS_IMPLEMENTATION
// a small rail scratch (default 32 MB), so that the reduce-scatter at count 140000 (fp32,
// 2 x 2) and the all-to-alls from 140000 run in several pieces, as large calls do
#define IRIS_COLL_MN_SCRATCH_BYTES ((size_t)2 << 20)
#include "../iris_collectives.h"
#include "test_util.h"

#include <algorithm>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include <vector>

static const char *kind_names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"};
static const char *type_names[] = {"fp32", "fp16", "bf16", "int32", "int64", "uint8", "fp8e4m3", "fp8e5m2"};
static const char *op_names[] = {"sum", "min", "max", "avg"};
#include "coll_values.h"

static int g_nodes, g_per_node;
static const uint64_t k_seed = 0x6d756c74696e6f64ULL; // fixed: a failure reruns the same values

static bool is_int(int t) { return t == IRIS_INT32 || t == IRIS_INT64 || t == IRIS_UINT8; }

// fp8 SUM and AVG across nodes, stage by stage as the composition runs them
// (docs/multinode.md). An iris step (within a node) reduces exactly in fp32 and rounds
// once, saturating: modelled exactly (reduce_bits). A rail step is NCCL's, which rounds to
// fp8 at every step: ncclAvg multiplies each input by 1/N (itself an fp8 value) and rounds
// the product to fp8 (so values below twice the smallest subnormal can vanish), and each
// add goes through half and back to fp8, saturating. Every intermediate is at most m, the
// sum of the inputs' magnitudes (/ N for AVG), so N premultiplications and N - 1 adds of at
// most half an ulp at m each (and half's own, far smaller, rounding) keep a rail result
// within N ulps at m of the exact value of its inputs, clamped to the finite range. (For
// N = 2, the layouts run here: 1/2 is exact in fp8, and the one add is the last rounding,
// so nothing saturates inside NCCL before it.)
// Rounding and saturation are monotone, so these bounds pass through an iris step that
// follows (reduce-scatter: the rails first) as an interval. A node's partial saturates
// (as a single-node call's result would): the partials are what the rail then reduces.
static double fp8_ulp(int type, double m) { // the spacing of fp8 values at magnitude m
  const int mant = type == IRIS_FLOAT8_E4M3 ? 3 : 2, emin = type == IRIS_FLOAT8_E4M3 ? -6 : -14;
  int e = m > 0 ? ilogb(m) : emin;
  return ldexp(1.0, (e < emin ? emin : e) - mant);
}
static double fp8_max(int type) { return type == IRIS_FLOAT8_E4M3 ? 448.0 : 57344.0; }
// A rail step over v[0..n-1]: the bounds of its result; *over: the exact value overflows.
static void rail_bounds(int type, int op, const double *v, int n, double *lo, double *hi, bool *over) {
  double e = 0, m = 0;
  for (int k = 0; k < n; k++) e += v[k], m += fabs(v[k]);
  if (op == IRIS_AVG) e /= n, m /= n;
  const double t = n * fp8_ulp(type, m), mx = fp8_max(type);
  *over = *over || fabs(e) > mx;
  *lo = std::min(std::max(e - t, -mx), mx);
  *hi = std::min(std::max(e + t, -mx), mx);
}
// An iris step over v[0..n-1] (exact in fp32 for these inputs, AVG / n in fp32, rounded once).
static double iris_step(int type, int op, const double *v, int n) {
  double acc = 0;
  for (int k = 0; k < n; k++) acc += v[k];
  if (op == IRIS_AVG) acc = (double)((float)acc / (float)n);
  return to_double(type, from_double(type, acc));
}
// NCCL's fp8 arithmetic (the host simulation below; bit for bit what the first GPU run
// logged): each add in half, rounded to fp8 saturating; ncclAvg first multiplies each
// input by 1/n (in half, rounded to fp8).
static unsigned char fp8_of(int type, float f) { return type == IRIS_FLOAT8_E4M3 ? iris_float_to_fp8_e4m3(f) : iris_float_to_fp8_e5m2(f); }
static float half_of(float f) { return __half2float(__float2half_rn(f)); }
static unsigned long long nccl_fp8_add(int type, unsigned long long a, unsigned long long b) {
  return fp8_of(type, half_of((float)to_double(type, a) + (float)to_double(type, b)));
}
static unsigned long long nccl_fp8_premul(int type, unsigned long long a, int n) { return fp8_of(type, half_of((float)to_double(type, a) * (1.0f / (float)n))); }
// The whole call on NCCL's world communicator: n inputs reduced in an order and grouping
// NCCL chooses (a ring folds them one by one from any rank, a tree pairs them), each step
// rounded and saturated: got must be the result of some full binary tree over the inputs
// (every order, every grouping), R[mask] the codes a subset can give. Up to 5 inputs (the
// layouts run here); above, only that got is a finite value.
static bool fp8_world_ok(int type, int op, const unsigned long long *b, int n, unsigned long long got) {
  const bool nan = (type == IRIS_FLOAT8_E4M3 && (got & 0x7f) == 0x7f) || (type == IRIS_FLOAT8_E5M2 && (got & 0x7c) == 0x7c);
  if (n > 5) return !nan;
  unsigned char R[32][256];
  int cnt[32] = {0};
  for (int i = 0; i < n; i++) R[1 << i][cnt[1 << i]++] = (unsigned char)(op == IRIS_AVG ? nccl_fp8_premul(type, b[i], n) : (b[i] & 0xff));
  for (unsigned mask = 1; mask < (1u << n); mask++) {
    if (!(mask & (mask - 1))) continue; // one input: above
    bool seen[256] = {false};
    for (unsigned a = (mask - 1) & mask; a; a = (a - 1) & mask) {
      const unsigned c = mask ^ a;
      if (a < c) continue; // each split once (the add commutes)
      for (int x = 0; x < cnt[a]; x++)
        for (int y = 0; y < cnt[c]; y++) {
          const unsigned char v = (unsigned char)nccl_fp8_add(type, R[a][x], R[c][y]);
          if (!seen[v]) seen[v] = true, R[mask][cnt[mask]++] = v;
        }
    }
  }
  const unsigned full = (1u << n) - 1;
  for (int x = 0; x < cnt[full]; x++)
    if (R[full][x] == (got & 0xff) || to_double(type, R[full][x]) == to_double(type, got & 0xff)) return true; // -0 == +0
  return false;
}
// b: the W = N L inputs of the element, global rank order (rank = node L + local rank).
static bool fp8_hier_ok(int kind, int type, int op, const unsigned long long *b, unsigned long long got) {
  const int N = g_nodes, L = g_per_node;
  double lo, hi, v[64], vlo[64], vhi[64];
  bool over = false;
  if (kind == IRIS_COLL_AR) { // each node's partial (iris), then the rail over the partials
    for (int n = 0; n < N; n++) v[n] = to_double(type, reduce_bits(type, op, b + (size_t)n * L, L));
    rail_bounds(type, op, v, N, &lo, &hi, &over);
  } else { // reduce-scatter: each rail over the nodes (NCCL), then the node (iris)
    for (int l = 0; l < L; l++) {
      for (int n = 0; n < N; n++) v[n] = to_double(type, b[(size_t)n * L + l]);
      rail_bounds(type, op, v, N, &vlo[l], &vhi[l], &over);
    }
    lo = iris_step(type, op, vlo, L);
    hi = iris_step(type, op, vhi, L);
  }
  if ((type == IRIS_FLOAT8_E4M3 && (got & 0x7f) == 0x7f) || (type == IRIS_FLOAT8_E5M2 && (got & 0x7c) == 0x7c)) return over; // NaN/inf only past the range
  const double g = to_double(type, got);
  return g >= lo && g <= hi;
}
// Hierarchical reductions round at every stage (in the node, then in NCCL), so only
// integers, MIN/MAX and fp32 sums (exact for these inputs) compare bit for bit; fp16 and
// bf16 within a few roundings of the float64 value; fp8 stage by stage (fp8_hier_ok).
static bool elem_ok(int kind, int type, int op, uint64_t seed, int call, int me, int W, size_t count, size_t i, int root, unsigned long long got,
                    iris_coll_mn_route_t route) {
  const size_t es = iris_dtype_size((iris_dtype_t)type);
  const unsigned long long mask = es == 8 ? ~0ULL : (1ULL << (8 * es)) - 1;
  got &= mask;
  if (kind == IRIS_COLL_AG) return got == (encode(type, input_hash(seed, (int)(i / count), i % count, call)) & mask);
  if (kind == IRIS_COLL_BC) return got == (encode(type, input_hash(seed, root, i, call)) & mask);
  if (kind == IRIS_COLL_A2A) return got == (encode(type, input_hash(seed, (int)(i / count), (size_t)me * count + i % count, call)) & mask);
  const size_t j = kind == IRIS_COLL_RS ? (size_t)me * count + i : i;
  unsigned long long b[64];
  for (int r = 0; r < W; r++) b[r] = encode(type, input_hash(seed, r, j, call));
  if (is_int(type) || (type == IRIS_FLOAT32 && op == IRIS_SUM)) return got == (reduce_bits(type, op, b, W) & mask);
  if (op == IRIS_MIN || op == IRIS_MAX) return to_double(type, got) == to_double(type, reduce_bits(type, op, b, W)); // exact; -0 == +0 (NCCL may pick either)
  if (type == IRIS_FLOAT8_E4M3 || type == IRIS_FLOAT8_E5M2) return route == IRIS_COLL_MN_NCCL ? fp8_world_ok(type, op, b, W, got) : fp8_hier_ok(kind, type, op, b, got);
  double ref = 0, sumabs = 0;
  for (int r = 0; r < W; r++) {
    const double v = to_double(type, b[r]);
    ref += v;
    sumabs += fabs(v);
  }
  if (op == IRIS_AVG) ref /= W, sumabs /= W;
  const int mant = type == IRIS_FLOAT32 ? 23 : type == IRIS_FLOAT16 ? 10 : 7;
  const double g = to_double(type, got), maxf = type == IRIS_FLOAT16 ? 65504.0 : 3e38;
  if (fabs(ref) > maxf) return fabs(g) >= maxf * 0.75 && (g > 0) == (ref > 0);
  return fabs(g - ref) <= 4.0 * ldexp(sumabs, -mant) + 1e-30;
}

static const iris_coll_opts_t *g_opts = NULL; // the all-reduces' options (forced_algorithms)
static iris_status_t call_coll(iris_t *ctx, int kind, const void *send, void *recv, size_t count, int type, int op, int root, cudaStream_t st) {
  switch (kind) {
  case IRIS_COLL_AR: return iris_all_reduce_ex(ctx, send, recv, count, (iris_dtype_t)type, (iris_redop_t)op, st, g_opts);
  case IRIS_COLL_AG: return iris_all_gather(ctx, send, recv, count, (iris_dtype_t)type, st);
  case IRIS_COLL_RS: return iris_reduce_scatter(ctx, send, recv, count, (iris_dtype_t)type, (iris_redop_t)op, st);
  case IRIS_COLL_A2A: return iris_all_to_all(ctx, send, recv, count, (iris_dtype_t)type, st);
  default: return iris_broadcast(ctx, send, recv, count, (iris_dtype_t)type, root, st);
  }
}

struct Case {
  int kind, type, op, inplace, offheap, root, call;
  size_t count;
  void *send, *recv; // set by prepare
};
// The route the library takes for a case (the same on every rank; the context set up).
static iris_coll_mn_route_t route_of(iris_t *ctx, const Case &c) { return iris_coll_mn_route(ctx, c.kind, c.count, (iris_dtype_t)c.type); }
static size_t in_elems(const Case &c, int W) { return c.kind == IRIS_COLL_RS || c.kind == IRIS_COLL_A2A ? (size_t)W * c.count : c.count; }
static size_t out_elems(const Case &c, int W) { return c.kind == IRIS_COLL_AG || c.kind == IRIS_COLL_A2A ? (size_t)W * c.count : c.count; }

// Buffers: one heap pair and one cudaMalloc pair, each big enough for every case.
struct Bufs { char *heap_a, *heap_b, *dev_a, *dev_b; size_t bytes; };

// Places, fills and poisons a case's buffers (synchronously).
static void prepare(Suite &s, Bufs &B, Case &c) {
  const size_t es = iris_dtype_size((iris_dtype_t)c.type);
  char *a = c.offheap ? B.dev_a : B.heap_a, *b = c.offheap ? B.dev_b : B.heap_b;
  cudaMemset(a, 0xA5, B.bytes);
  cudaMemset(b, 0xA5, B.bytes); // the poison: every result element must be written
  if (!c.inplace) { c.send = a; c.recv = b; }
  else if (c.kind == IRIS_COLL_AG) { c.recv = b; c.send = b + (size_t)s.rank * c.count * es; }
  else if (c.kind == IRIS_COLL_RS) { c.send = b; c.recv = b + (size_t)s.rank * c.count * es; }
  else { c.send = b; c.recv = b; }
  fill(c.send, c.type, in_elems(c, s.world), s.seed, c.kind == IRIS_COLL_BC && s.rank != c.root ? 1000 + s.rank : s.rank, c.call);
  cudaDeviceSynchronize();
}
// Checks recv; returns the number of bad elements (first one described in why).
static size_t verify(Suite &s, const Case &c, std::string &why, uint64_t *hash) {
  const size_t es = iris_dtype_size((iris_dtype_t)c.type), n = out_elems(c, s.world);
  const iris_coll_mn_route_t route = route_of(s.ctx, c);
  std::vector<unsigned char> h(n * es);
  size_t bad = 0;
  cudaMemcpy(h.data(), c.recv, n * es, cudaMemcpyDeviceToHost);
  uint64_t x = 1469598103934665603ULL;
  for (size_t i = 0; i < n * es; i++) x = (x ^ h[i]) * 1099511628211ULL;
  if (hash) *hash = x;
  for (size_t i = 0; i < n; i++) {
    const unsigned long long got = get_bits(h, c.type, i);
    if (!elem_ok(c.kind, c.type, c.op, s.seed, c.call, s.rank, s.world, c.count, i, c.root, got, route)) {
      if (!bad) why = "element " + std::to_string(i) + " is 0x" + [&] { char t[24]; snprintf(t, sizeof t, "%llx", got); return std::string(t); }();
      bad++;
    }
  }
  return bad;
}
static std::string case_name(const Case &c, iris_t *ctx = NULL) {
  std::string n = std::string(kind_names[c.kind]) + " " + type_names[c.type];
  if (c.kind == IRIS_COLL_AR || c.kind == IRIS_COLL_RS) n += std::string(" ") + op_names[c.op];
  if (c.kind == IRIS_COLL_BC) n += " root " + std::to_string(c.root);
  n += " count " + std::to_string(c.count) + (c.inplace ? " in place" : c.offheap ? " off heap" : "");
  if (ctx && iris_detail_get_ext(ctx)) n += std::string(" (") + iris_coll_mn_route_name(route_of(ctx, c)) + ")";
  return n;
}

// One eager case: PASS/FAIL (or SKIP when the rails refuse fp8 for the NCCL version).
static bool run_case(Suite &s, Bufs &B, Case c) {
  std::string why;
  prepare(s, B, c);
  iris_status_t st = call_coll(s.ctx, c.kind, c.send, c.recv, c.count, c.type, c.op, c.root, s.stream);
  const bool want_refusal = (c.kind == IRIS_COLL_AR || c.kind == IRIS_COLL_RS) && c.op == IRIS_AVG && is_int(c.type);
  int refused = st == IRIS_ERROR_UNSUPPORTED, all[IRIS_MAX_RANKS];
  if (want_refusal) return report(s, (case_name(c, s.ctx) + " is refused (IRIS_ERROR_UNSUPPORTED)").c_str(), refused);
  iris_allgather_host(s.ctx, &refused, all, sizeof refused);
  if (refused && (c.type == IRIS_FLOAT8_E4M3 || c.type == IRIS_FLOAT8_E5M2) && strstr(iris_error_detail(), "NCCL 2.24")) {
    if (s.rank == 0) printf("SKIP: [%s] %s: %s\n", s.tag.c_str(), case_name(c).c_str(), iris_error_detail());
    return true;
  }
  bool ok = st == IRIS_SUCCESS && cudaStreamSynchronize(s.stream) == cudaSuccess;
  if (!ok) why = std::string("call failed: ") + iris_error_detail();
  else if (iris_collectives_check(s.ctx) != IRIS_SUCCESS) ok = false, why = std::string("iris_collectives_check: ") + iris_error_detail(); // a mismatch names itself (and is cleared)
  uint64_t hash = 0;
  size_t bad = ok ? verify(s, c, why, &hash) : 1;
  if (bad) fprintf(stderr, "multinode_test: rank %d: %s: %zu bad elements, %s\n", s.rank, case_name(c, s.ctx).c_str(), bad, why.c_str());
  bool pass = report(s, case_name(c, s.ctx).c_str(), bad == 0);
  if (c.kind == IRIS_COLL_AR && pass) { // every rank holds the same bits
    uint64_t hs[IRIS_MAX_RANKS];
    bool same_bits = iris_allgather_host(s.ctx, &hash, hs, sizeof hash) == IRIS_SUCCESS;
    for (int r = 1; same_bits && r < s.world; r++) same_bits = hs[r] == hs[0];
    report(s, (case_name(c, s.ctx) + ": bitwise equal on every rank").c_str(), same_bits);
  }
  return pass;
}

static bool topology(Suite &s) {
  const int me = s.rank, L = g_per_node;
  iris_device_ctx_t d = iris_device_context(s.ctx), dn = iris_device_context_node(s.ctx);
  bool ok = iris_world_size(s.ctx) == g_nodes * L && iris_num_nodes(s.ctx) == g_nodes && iris_local_size(s.ctx) == L && iris_node(s.ctx) == me / L &&
            iris_local_rank(s.ctx) == me % L && d.rank == me && d.world_size == g_nodes * L && d.local_rank == me % L && d.local_size == L && d.node == me / L &&
            d.num_nodes == g_nodes && dn.rank == me % L && dn.world_size == L && dn.node == 0 && dn.num_nodes == 1 && iris_rail_comm(s.ctx) != NULL;
  report(s, "topology: rank, world, local rank and size, node, node count, device contexts, rail", ok);
  void *p = NULL, *q = NULL;
  IK(iris_malloc(s.ctx, 4096, &p));
  const int other = (me + L) % (g_nodes * L), peer = (me / L) * L + (me % L + 1) % L;
  iris_status_t st = iris_translate_host(s.ctx, p, other, &q);
  ok = st == IRIS_ERROR_INVALID_RANK && strstr(iris_error_detail(), "node") && iris_heap_base(s.ctx, other) == NULL && iris_heap_base(s.ctx, peer) != NULL &&
       iris_translate_host(s.ctx, p, peer, &q) == IRIS_SUCCESS;
  report(s, "topology: heaps are mapped within the node only (another node's rank is refused)", ok);
  IK(iris_free(s.ctx, p));
  { // the world communicator: the rail at one rank per node; else there unless IRIS_MN_NCCL_WHOLE is none or 0, or two ranks of one NCCL host (virtual node) share a GPU
    struct { int node; char pci[32]; } me_gpu, all[IRIS_MAX_RANKS];
    memset(&me_gpu, 0, sizeof me_gpu);
    me_gpu.node = me / L;
    cudaDeviceGetPCIBusId(me_gpu.pci, (int)sizeof me_gpu.pci - 1, iris_device_ordinal(s.ctx));
    IK(iris_allgather_host(s.ctx, &me_gpu, all, sizeof me_gpu));
    bool shared = false;
    for (int a = 0; a < s.world; a++)
      for (int b = a + 1; b < s.world; b++) shared = shared || (all[a].node == all[b].node && !strcmp(all[a].pci, all[b].pci));
    const char *w = getenv("IRIS_MN_NCCL_WHOLE");
    const bool none = w && (!strcmp(w, "none") || !strcmp(w, "0"));
    void *wc = iris_detail_world_comm(s.ctx);
    ok = L == 1 ? wc == iris_rail_comm(s.ctx) : (wc != NULL) == (!none && !shared);
    report(s, (std::string("topology: the world communicator is ") + (L == 1 ? "the rail" : wc ? "there" : shared ? "left out (ranks share a GPU)" : "left out")).c_str(), ok);
  }
  return true;
}

// Teams in a multi-node world (docs/teams.md, Limits): the world and rail teams are
// host-only (no barrier words: sync NULL), so a team barrier on the world team returns false
// in every participant and touches nothing (before, its sync was set and the barrier signalled
// the ranks of other nodes through no mapping of the heap: a bad address); the node team and a
// split within each node have words and meet; a split whose colors span nodes is refused on
// every rank; iris_team_check of the world team is the context's. IRIS_TEAMS_COLL=0: no
// collective states on the heap (the cases after allocate as they always did).
__global__ void k_team_barrier(iris_device_ctx_t ctx, iris_team_t team, int *res) { res[0] = iris_team_barrier(iris_coop_block(), ctx, team, 0) ? 1 : 2; }
static bool team_barrier(Suite &s, const iris_team_t &t, int *res, int *out) {
  *out = 0;
  CK(cudaMemsetAsync(res, 0, sizeof(int), s.stream));
  k_team_barrier<<<1, 128, 0, s.stream>>>(iris_device_context(s.ctx), t, res);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s.stream));
  CK(cudaMemcpy(out, res, sizeof(int), cudaMemcpyDeviceToHost));
  return true;
}
static bool teams(Suite &s) {
  const int me = s.rank, L = g_per_node;
  const char *was = getenv("IRIS_TEAMS_COLL");
  const std::string keep = was ? was : "";
  iris_team_t world, node, rail, within, across;
  int *res, hw = 0, hn = 0, hs = 0;
  setenv("IRIS_TEAMS_COLL", "0", 1);
  const iris_status_t gw = iris_team_get(s.ctx, IRIS_TEAM_WORLD, &world);
  if (was) setenv("IRIS_TEAMS_COLL", keep.c_str(), 1);
  else unsetenv("IRIS_TEAMS_COLL");
  IK(gw);
  IK(iris_team_get(s.ctx, IRIS_TEAM_NODE, &node));
  IK(iris_team_get(s.ctx, IRIS_TEAM_RAIL, &rail));
  bool ok = world.size == s.world && world.rank == me && world.sync == NULL && node.size == L && node.rank == me % L && iris_team_world_rank(&node, 0) == me / L * L &&
            node.sync != NULL && rail.size == g_nodes && rail.rank == me / L && rail.sync == NULL && iris_team_check(s.ctx, &world) == IRIS_SUCCESS;
  report(s, "teams: the world and rail teams are host-only (no barrier words), the node team has its own; iris_team_check of the world works", ok);
  CK(cudaMalloc(&res, sizeof(int)));
  if (!team_barrier(s, world, res, &hw)) return false;
  const iris_status_t after_world = iris_get_async_error(s.ctx);
  if (!team_barrier(s, node, res, &hn)) return false;
  if (hw != 2 || hn != 1 || after_world != IRIS_SUCCESS)
    fprintf(stderr, "multinode_test: rank %d: team barrier on the world team %d (2: false), on the node team %d (1: met), context %s\n", me, hw, hn, iris_status_string(after_world));
  report(s, "teams: a team barrier on the world team returns false, touching nothing (no fault); on the node team it meets", hw == 2 && hn == 1 && after_world == IRIS_SUCCESS);
  IK(iris_team_split(s.ctx, &world, me / L, me % L, &within));
  if (!team_barrier(s, within, res, &hs)) return false;
  const iris_status_t sa = iris_team_split(s.ctx, &world, me % L, me / L, &across);
  ok = within.size == L && within.rank == me % L && within.sync != NULL && hs == 1 && sa == IRIS_ERROR_UNSUPPORTED && across.size == 0;
  if (!ok) fprintf(stderr, "multinode_test: rank %d: the split by node: size %d, barrier %d; the split across nodes: %s\n", me, within.size, hs, iris_status_string(sa));
  report(s, "teams: a split by node meets at its barrier; a split whose colors span nodes is refused on every rank (IRIS_ERROR_UNSUPPORTED)", ok);
  IK(iris_team_destroy(s.ctx, &within));
  cudaFree(res);
  return true;
}

// --route-agreement: IRIS_MN_NCCL_WHOLE differing between ranks, or malformed on one, fails
// iris_collectives_setup on every rank (no hang, nothing left set up); set alike, the
// setup and a call then work.
static void route_agreement(Suite &s) {
  setenv("IRIS_MN_NCCL_WHOLE", s.rank % 2 ? "all_reduce=2K-" : "all_reduce=1K-", 1);
  iris_status_t st = iris_collectives_setup(s.ctx);
  report(s, "route agreement: IRIS_MN_NCCL_WHOLE unlike between ranks: iris_collectives_setup refuses on every rank (IRIS_ERROR_MISMATCH)",
         st == IRIS_ERROR_MISMATCH && strstr(iris_error_detail(), "IRIS_MN_NCCL_WHOLE") && iris_detail_get_ext(s.ctx) == NULL);
  setenv("IRIS_MN_NCCL_WHOLE", s.rank == 1 ? "all_reduce=oops" : "all_reduce=1K-", 1);
  st = iris_collectives_setup(s.ctx);
  report(s, "route agreement: IRIS_MN_NCCL_WHOLE malformed on rank 1: setup fails on every rank, rank 1 naming the value",
         st != IRIS_SUCCESS && (s.rank != 1 || (st == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "oops"))) && iris_detail_get_ext(s.ctx) == NULL);
  setenv("IRIS_MN_NCCL_WHOLE", "all_reduce=1K-", 1);
  st = iris_collectives_setup(s.ctx);
  bool ok = st == IRIS_SUCCESS;
  float *x = NULL;
  if (ok) ok = iris_malloc(s.ctx, 4096 * sizeof(float), (void **)&x) == IRIS_SUCCESS;
  if (ok) { // 16 KB: the whole call to NCCL where the world communicator exists
    std::vector<float> h(4096, (float)(s.rank + 1));
    cudaMemcpyAsync(x, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice, s.stream); // on the call's stream: it does not wait for the legacy one
    ok = iris_all_reduce(s.ctx, x, x, 4096, IRIS_FLOAT32, IRIS_SUM, s.stream) == IRIS_SUCCESS && cudaStreamSynchronize(s.stream) == cudaSuccess;
    cudaMemcpy(h.data(), x, h.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (float v : h) ok = ok && v == (float)(s.world * (s.world + 1) / 2);
    iris_free(s.ctx, x);
  }
  if (!ok) fprintf(stderr, "multinode_test: rank %d: route agreement: %s\n", s.rank, iris_error_detail());
  report(s, "route agreement: set alike: setup and an all-reduce work", ok);
  unsetenv("IRIS_MN_NCCL_WHOLE");
}

// The eager cases in their order (call numbers 1, 2, ...): f(case) for each; returns the
// last call number.
template <typename F> static int each_case(int W, int L, F f) {
  const size_t counts[] = {1, 1003, (size_t)70000 * L / 2 * 2, (size_t)70000 * L + 1}; // small, odd, the reduce-scatter composition, not divisible by L
  int call = 0;
  for (int kind : {IRIS_COLL_AR, IRIS_COLL_RS, IRIS_COLL_AG, IRIS_COLL_A2A, IRIS_COLL_BC})
    for (int type = 0; type < IRIS_DTYPE_COUNT; type++)
      for (int op = 0; op < ((kind == IRIS_COLL_AR || kind == IRIS_COLL_RS) ? IRIS_REDOP_COUNT : 1); op++)
        for (size_t count : counts) {
          const bool big = count > 2000;
          if (big && kind != IRIS_COLL_AR && count % 2) continue; // the other kinds: one big size is enough
          for (int mode = 0; mode < 3; mode++) { // 0 out of place, 1 in place, 2 off the heap
            if (big && mode == 2 && type != IRIS_FLOAT32) continue;
            Case c = {kind, type, op, mode == 1, mode == 2, kind == IRIS_COLL_BC ? (call % W) : 0, ++call, count, NULL, NULL};
            f(c);
          }
        }
  return call;
}

// A forced all-reduce algorithm goes to the in-node all-reduce only: in place, small (the
// broadcast composition) and 384 KB (the reduce-scatter one), every algorithm gives the
// exact sum (the other steps once refused ONE_SHOT_ARMED, and TWO_SHOT_LL at 2 ranks per
// node, after the first steps had overwritten the input); a malformed iris_coll_opts_t is
// refused on either route, before anything runs.
static void forced_algorithms(Suite &s, Bufs &B, int call) {
  const iris_algo_t algos[] = {IRIS_ALGO_ONE_SHOT_ARMED, IRIS_ALGO_TWO_SHOT_LL, IRIS_ALGO_LATENCY, IRIS_ALGO_BANDWIDTH};
  iris_coll_opts_t o = IRIS_COLL_OPTS_INIT;
  for (iris_algo_t a : algos)
    for (size_t count : {(size_t)64, (size_t)98304}) {
      o.algo = a;
      g_opts = &o;
      Case c{IRIS_COLL_AR, IRIS_FLOAT32, IRIS_SUM, 1, 0, 0, ++call, count, NULL, NULL};
      if (s.rank == 0) printf("# forced algorithm %d:\n", (int)a);
      run_case(s, B, c);
      g_opts = NULL;
    }
  for (size_t count : {(size_t)64, (size_t)1024}) {
    o.algo = (iris_algo_t)42;
    iris_status_t st = iris_all_reduce_ex(s.ctx, B.heap_a, B.heap_b, count, IRIS_FLOAT32, IRIS_SUM, s.stream, &o);
    report(s, ("all_reduce fp32 sum count " + std::to_string(count) + " with algorithm 42: IRIS_ERROR_INVALID_ARGUMENT").c_str(), st == IRIS_ERROR_INVALID_ARGUMENT);
  }
}

static void eager_cases(Suite &s, Bufs &B) {
  const int W = s.world;
  int call = each_case(W, g_per_node, [&](const Case &c) { run_case(s, B, c); });
  { // an all-to-all of more than IRIS_COLL_MN_SCRATCH_BYTES / 3 in total: several pieces, copied out
    const size_t big = IRIS_COLL_MN_SCRATCH_BYTES / 4 / (size_t)W / 2;
    if ((size_t)W * big * 4 <= B.bytes)
      for (int mode = 0; mode < 2; mode++) run_case(s, B, Case{IRIS_COLL_A2A, IRIS_FLOAT32, 0, mode == 1, 0, 0, ++call, big, NULL, NULL});
  }
  report(s, "iris_barrier_device across nodes", iris_barrier_device(s.ctx, s.stream) == IRIS_SUCCESS && cudaStreamSynchronize(s.stream) == cudaSuccess);
  forced_algorithms(s, B, call);
}

// Every composition in one graph, replayed; then the outputs poisoned, one more replay,
// and every output checked.
static bool graphs(Suite &s, Bufs &B, int replays) {
  const int W = s.world, L = g_per_node;
  Case cs[] = {{IRIS_COLL_AR, IRIS_FLOAT32, IRIS_SUM, 0, 0, 0, 9001, (size_t)70000 * L, NULL, NULL},
               {IRIS_COLL_AR, IRIS_BFLOAT16, IRIS_MAX, 0, 0, 0, 9002, 1003, NULL, NULL},
               {IRIS_COLL_AG, IRIS_FLOAT16, 0, 0, 0, 0, 9003, 1003, NULL, NULL},
               {IRIS_COLL_RS, IRIS_INT32, IRIS_SUM, 0, 0, 0, 9004, 4099, NULL, NULL},
               {IRIS_COLL_BC, IRIS_INT64, 0, 0, 0, W - 1, 9005, 777, NULL, NULL},
               {IRIS_COLL_A2A, IRIS_UINT8, 0, 0, 0, 0, 9006, 1001, NULL, NULL}};
  const int n = sizeof cs / sizeof cs[0];
  std::vector<char *> mem;
  // each case gets its own heap buffers (the graph holds them all)
  for (int i = 0; i < n; i++) {
    const size_t es = iris_dtype_size((iris_dtype_t)cs[i].type), bytes = (size_t)W * cs[i].count * es;
    void *a = NULL, *b = NULL;
    IK(iris_malloc(s.ctx, bytes, &a));
    IK(iris_malloc(s.ctx, bytes, &b));
    mem.push_back((char *)a);
    mem.push_back((char *)b);
    cs[i].send = a;
    cs[i].recv = b;
    fill(a, cs[i].type, in_elems(cs[i], W), s.seed, cs[i].kind == IRIS_COLL_BC && s.rank != cs[i].root ? 1000 + s.rank : s.rank, cs[i].call);
  }
  CK(cudaDeviceSynchronize());
  IK(iris_barrier(s.ctx));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
  bool cap_ok = true;
  for (int i = 0; i < n; i++) cap_ok = cap_ok && call_coll(s.ctx, cs[i].kind, cs[i].send, cs[i].recv, cs[i].count, cs[i].type, cs[i].op, cs[i].root, s.stream) == IRIS_SUCCESS;
  cap_ok = cap_ok && iris_barrier_device(s.ctx, s.stream) == IRIS_SUCCESS;
  if (!cap_ok) fprintf(stderr, "multinode_test: rank %d: capture: %s\n", s.rank, iris_error_detail());
  CK(cudaStreamEndCapture(s.stream, &g));
  report(s, "graph: every composition captures", cap_ok);
  if (!cap_ok) return false;
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int r = 0; r < replays; r++) CK(cudaGraphLaunch(ge, s.stream));
  CK(cudaStreamSynchronize(s.stream));
  for (int i = 0; i < n; i++) CK(cudaMemset(cs[i].recv, 0xA5, out_elems(cs[i], W) * iris_dtype_size((iris_dtype_t)cs[i].type)));
  CK(cudaDeviceSynchronize());
  IK(iris_barrier(s.ctx));
  CK(cudaGraphLaunch(ge, s.stream));
  CK(cudaStreamSynchronize(s.stream));
  bool ok = iris_get_async_error(s.ctx) == IRIS_SUCCESS;
  for (int i = 0; i < n; i++) {
    std::string why;
    size_t bad = verify(s, cs[i], why, NULL);
    if (bad) fprintf(stderr, "multinode_test: rank %d: graph %s: %zu bad, %s\n", s.rank, case_name(cs[i], s.ctx).c_str(), bad, why.c_str());
    ok = ok && bad == 0;
  }
  report(s, ("graph: " + std::to_string(replays) + " replays, then poisoned outputs rewritten correctly").c_str(), ok);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  IK(iris_barrier(s.ctx));
  for (char *p : mem) IK(iris_free(s.ctx, p));
  return ok;
}

// --fp8-model (no GPU): NCCL's fp8 arithmetic at 2 nodes, simulated on the host (each add
// in half, then rounded to fp8 saturating; ncclAvg: each input times 1/2 in half, rounded
// to fp8, then added), for every element of every fp8 SUM/AVG case of this layout, with
// the in-node steps as iris computes them: elem_ok must accept every result. (This
// simulation gives, bit for bit, each of the 68 fp8 values that the first GPU run (one
// H100, 2 x 1 and 2 x 2 virtual nodes) logged as refused by the one-rounding reference,
// all but those of the in-place reduce-scatters, which had moved nothing.)
static unsigned long long nccl_fp8_pair(int type, int op, unsigned long long a, unsigned long long b) {
  float x = (float)to_double(type, a), y = (float)to_double(type, b);
  if (op == IRIS_AVG) x = (float)to_double(type, fp8_of(type, half_of(x * 0.5f))), y = (float)to_double(type, fp8_of(type, half_of(y * 0.5f)));
  return fp8_of(type, half_of(x + y));
}
static int fp8_model(void) {
  const int L = g_per_node, W = 2 * L;
  const uint64_t seed = k_seed;
  char tag[64];
  long n = 0, bad = 0, other = 0;
  snprintf(tag, sizeof tag, "[2x%d] fp8 model", L);
  each_case(W, L, [&](const Case &c) {
    if ((c.type != IRIS_FLOAT8_E4M3 && c.type != IRIS_FLOAT8_E5M2) || (c.op != IRIS_SUM && c.op != IRIS_AVG) || (c.kind != IRIS_COLL_AR && c.kind != IRIS_COLL_RS)) return;
    for (int me = 0; me < (c.kind == IRIS_COLL_RS ? W : 1); me++) // all-reduce: every rank holds the same
      for (size_t i = 0; i < c.count; i++) {
        const size_t j = c.kind == IRIS_COLL_RS ? (size_t)me * c.count + i : i;
        unsigned long long b[64], got;
        for (int r = 0; r < W; r++) b[r] = encode(c.type, input_hash(seed, r, j, c.call));
        if (c.kind == IRIS_COLL_AR) { // node partials (iris), then the rail
          got = nccl_fp8_pair(c.type, c.op, reduce_bits(c.type, c.op, b, L), reduce_bits(c.type, c.op, b + L, L));
        } else { // each rail over the nodes, then the node (iris; nothing at L = 1)
          double q[64];
          for (int l = 0; l < L; l++) q[l] = to_double(c.type, nccl_fp8_pair(c.type, c.op, b[l], b[L + l]));
          got = from_double(c.type, L == 1 ? q[0] : iris_step(c.type, c.op, q, L));
        }
        n++;
        other += got != reduce_bits(c.type, c.op, b, W);
        if (!elem_ok(c.kind, c.type, c.op, seed, c.call, me, W, c.count, i, 0, got, IRIS_COLL_MN_HIER) && bad++ < 5)
          fprintf(stderr, "multinode_test: %s: %s rank %d element %zu: 0x%llx refused\n", tag, case_name(c).c_str(), me, i, got);
      }
  });
  printf("%s: %s: %ld elements, %ld of them not the one-rounding value, %ld refused\n", bad ? "FAIL" : "PASS", tag, n, other, bad);
  // the whole-call route (NCCL over all W ranks): a ring's fold from a rank that varies
  // by element, and a tree's pairs, must each be accepted; how often a value one code
  // away is accepted too shows how tight the reference is
  long wn = 0, wbad = 0, wloose = 0;
  snprintf(tag, sizeof tag, "[2x%d] fp8 model, whole-call route", L);
  each_case(W, L, [&](const Case &c) {
    if ((c.type != IRIS_FLOAT8_E4M3 && c.type != IRIS_FLOAT8_E5M2) || (c.op != IRIS_SUM && c.op != IRIS_AVG) || (c.kind != IRIS_COLL_AR && c.kind != IRIS_COLL_RS)) return;
    for (int me = 0; me < (c.kind == IRIS_COLL_RS ? W : 1); me++)
      for (size_t i = 0; i < c.count; i++) {
        const size_t j = c.kind == IRIS_COLL_RS ? (size_t)me * c.count + i : i;
        unsigned long long b[64], p[64];
        for (int r = 0; r < W; r++) {
          b[r] = encode(c.type, input_hash(seed, r, j, c.call));
          p[r] = c.op == IRIS_AVG ? nccl_fp8_premul(c.type, b[r], W) : b[r];
        }
        unsigned long long ring = p[i % W], tree[64];
        for (int k = 1; k < W; k++) ring = nccl_fp8_add(c.type, ring, p[(i + k) % W]);
        for (int r = 0; r < W; r++) tree[r] = p[r];
        for (int w = W; w > 1;) { // pairs, level by level (an odd last one moves up alone)
          int h = 0;
          for (int r = 0; r + 1 < w; r += 2) tree[h++] = nccl_fp8_add(c.type, tree[r], tree[r + 1]);
          if (w & 1) tree[h++] = tree[w - 1];
          w = h;
        }
        for (unsigned long long got : {ring, tree[0]}) {
          wn++;
          if (!elem_ok(c.kind, c.type, c.op, seed, c.call, me, W, c.count, i, 0, got, IRIS_COLL_MN_NCCL) && wbad++ < 5)
            fprintf(stderr, "multinode_test: %s: %s rank %d element %zu: 0x%llx refused\n", tag, case_name(c).c_str(), me, i, got);
        }
        wloose += elem_ok(c.kind, c.type, c.op, seed, c.call, me, W, c.count, i, 0, ring ^ 1, IRIS_COLL_MN_NCCL);
      }
  });
  printf("%s: %s: %ld results, %ld refused (a value one code away accepted in %ld of %ld elements)\n", wbad ? "FAIL" : "PASS", tag, wn, wbad, wloose, wn / 2);
  return bad || wbad ? 1 : 0;
}

static int rank_main(int rank, int tcp_port, int replays, bool agreement) {
  char id[32];
  snprintf(id, sizeof id, "vnode%d", rank / g_per_node);
  setenv("IRIS_HOST_ID", id, 1);
  setenv("NCCL_HOSTID", id, 1);
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (tcp_port > 0) {
    char port[16];
    snprintf(port, sizeof port, "%d", tcp_port);
    setenv("IRIS_RENDEZVOUS", "tcp", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port, 1);
  }
  Suite s;
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)768 << 20;
  if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS) {
    fprintf(stderr, "FAIL: multinode_test: rank %d: iris_init: %s\n", rank, iris_error_detail());
    return 1;
  }
  s.rank = iris_rank(s.ctx);
  s.world = iris_world_size(s.ctx);
  const char *whole = getenv("IRIS_MN_NCCL_WHOLE");
  s.tag = std::to_string(g_nodes) + "x" + std::to_string(g_per_node) + (tcp_port > 0 ? " tcp" : "") + (whole ? std::string(" IRIS_MN_NCCL_WHOLE=") + whole : "");
  s.seed = k_seed;
  s.passed = s.failed = 0;
  cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
  Bufs B;
  B.bytes = std::max((size_t)s.world * ((size_t)70000 * g_per_node + 8) * 8, (size_t)IRIS_COLL_MN_SCRATCH_BYTES / 2);
  void *a = NULL, *b = NULL;
  if (iris_malloc(s.ctx, B.bytes, &a) != IRIS_SUCCESS || iris_malloc(s.ctx, B.bytes, &b) != IRIS_SUCCESS || cudaMalloc(&B.dev_a, B.bytes) != cudaSuccess ||
      cudaMalloc(&B.dev_b, B.bytes) != cudaSuccess) {
    fprintf(stderr, "FAIL: multinode_test: rank %d: buffers: %s\n", rank, iris_error_detail());
    return 1;
  }
  B.heap_a = (char *)a;
  B.heap_b = (char *)b;
  topology(s);
  teams(s);
  if (agreement) {
    route_agreement(s);
  } else if (whole && !strcmp(whole, "all") && g_per_node > 1 && !iris_detail_world_comm(s.ctx)) {
    // every call was to go to NCCL whole, but there is no world communicator: NCCL
    // refuses two ranks of one host (virtual node) on one GPU
    if (rank == 0) printf("SKIP: [%s] the whole-call route: no world communicator (ranks of one virtual node share a GPU; give each its own)\n", s.tag.c_str());
  } else {
    eager_cases(s, B);
    graphs(s, B, replays);
  }
  iris_status_t st = iris_finalize(s.ctx);
  if (st != IRIS_SUCCESS) { fprintf(stderr, "FAIL: multinode_test: rank %d: iris_finalize: %s\n", rank, iris_error_detail()); return 1; }
  if (rank == 0) printf("# multinode_test %dx%d%s: %d passed, %d failed\n", g_nodes, g_per_node, tcp_port > 0 ? " tcp" : "", s.passed, s.failed);
  return s.failed ? 1 : 0;
}

int main(int argc, char **argv) {
  int tcp_port = 0, replays = 1000;
  bool agreement = false;
  if (argc < 3) { fprintf(stderr, "usage: multinode_test NODES RANKS_PER_NODE [--tcp PORT] [--replays N] [--route-agreement] | 2 RANKS_PER_NODE --fp8-model\n"); return 2; }
  g_nodes = atoi(argv[1]);
  g_per_node = atoi(argv[2]);
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--tcp") && i + 1 < argc) tcp_port = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--replays") && i + 1 < argc) replays = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--route-agreement")) agreement = true;
  }
  if (g_nodes < 2 || g_per_node < 1 || g_nodes * g_per_node > IRIS_MAX_RANKS) { fprintf(stderr, "multinode_test: bad layout\n"); return 2; }
  if (argc > 3 && !strcmp(argv[3], "--fp8-model")) {
    if (g_nodes == 2) return fp8_model();
    printf("SKIP: [%dx%d] fp8 model: simulates 2 nodes only\n", g_nodes, g_per_node);
    return 0;
  }
  iris_launch_t L;
  int me = -1;
  if (iris_launch_local(g_nodes * g_per_node, &L, &me) != IRIS_SUCCESS) { fprintf(stderr, "FAIL: multinode_test: launch: %s\n", iris_error_detail()); return 1; }
  if (me < 0) {
    iris_status_t st = iris_launch_wait(&L, 900000);
    if (st != IRIS_SUCCESS) fprintf(stderr, "FAIL: multinode_test: %s\n", iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  return rank_main(me, tcp_port, replays, agreement);
}
