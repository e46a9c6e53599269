// bench_multinode: iris's collectives in a multi-node world against NCCL alone over the
// same ranks, on "virtual nodes": one machine's ranks split with IRIS_HOST_ID and
// NCCL_HOSTID, so both use NCCL's socket transport between the nodes (docs/multinode.md;
// real clusters: run it under srun or mpirun with one node per host and no IRIS_HOST_ID
// override, BENCH_REAL_NODES=1).
//   all_reduce, all_gather, reduce_scatter, all_to_all, broadcast (root 0); bf16 sum;
//   sizes 1 KiB .. max_bytes (x4). Size: the bytes each rank sends: all_reduce and
//   broadcast the message, all_gather the input per rank, reduce_scatter and all_to_all
//   the input per rank (W blocks) -- the measure of IRIS_MN_NCCL_WHOLE's ranges.
// Each row times both routes of a call (internal/coll/mn_route.h): "hier" (the composition:
//   iris in the node, NCCL rails between nodes) and "whole" (the call handed to NCCL's
//   world communicator; "-" when there is none); "route" is the one the library takes by
//   itself (the defaults, or IRIS_MN_NCCL_WHOLE: set it to force a route), iris_us its
//   time, "x nccl" NCCL alone's time over iris_us. The last line suggests an
//   IRIS_MN_NCCL_WHOLE value: the measured sizes where "whole" beat "hier".
// Timing: K calls captured into one CUDA graph, 2 warm-up replays, R timed replays
//   (K = R = 20 up to 4 MiB, 5 above); time per op = replay / K; median over replays on
//   each rank, the max over ranks reported.
// Correctness: inputs are small integers (exact in bf16 at any reduction order); after
//   the timing, one eager call of each route on fresh inputs, whose outputs must equal
//   NCCL alone's bit for bit on every rank (a difference: exit 1).
// Usage: bench_multinode NODES RANKS_PER_NODE [max_bytes]   (default 2 2 256M)
//   Environment: NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 on one machine;
//   IRIS_MN_NCCL_WHOLE (docs/multinode.md) picks the "route" column.
// Build: make build/bench_multinode (links -lnccl for the NCCL-alone rows; iris itself
//   loads NCCL at run time). It sets the library's route table directly (internal state
//   of iris_collectives.h) to time both routes in one run.
#define IRIS_IMPLEMENTATION
#include "../iris_collectives.h"
#include "bench_util.h"
#include <algorithm>
#include <math.h>
#include <nccl.h>
#include <string.h>
#include <string>
#include <vector>

static int g_nodes = 2, g_per = 2, rank, W;
static iris_t *ctx;
static ncclComm_t world;
static cudaStream_t stream;
enum { AR, AG, RS, A2A, BC, NCOLL };
static const char *coll_name[NCOLL] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"};
static const int coll_kind[NCOLL] = {IRIS_COLL_AR, IRIS_COLL_AG, IRIS_COLL_RS, IRIS_COLL_A2A, IRIS_COLL_BC};
enum { V_NCCL, V_HIER, V_WHOLE, V_TABLE }; // NCCL alone; iris forced to a route; iris as the table says

__global__ void k_fill(__nv_bfloat16 *p, size_t n, unsigned seed, int r) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16((float)((int)((i * 2654435761u + seed * 40503u + (unsigned)r * 97u) % 9u) - 4));
}
// The route table iris uses from here on: the library's own (V_TABLE), or every call one
// route. Every rank sets the same (a call must take one route everywhere).
static iris_coll_mn_table_t g_table;
static void set_route(int v) {
  iris_coll_state_t *st = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  if (v == V_TABLE) st->mn_table = g_table;
  else iris_coll_mn_table_all(&st->mn_table, v == V_WHOLE);
}
// count: elements per rank of the call (all_gather: input; reduce_scatter: output;
// all_to_all: per peer)
static void run(int coll, int v, const void *in, void *out, size_t count) {
  if (v != V_NCCL) {
    if (coll == AR) IK(iris_all_reduce(ctx, in, out, count, IRIS_BFLOAT16, IRIS_SUM, stream));
    else if (coll == AG) IK(iris_all_gather(ctx, in, out, count, IRIS_BFLOAT16, stream));
    else if (coll == RS) IK(iris_reduce_scatter(ctx, in, out, count, IRIS_BFLOAT16, IRIS_SUM, stream));
    else if (coll == A2A) IK(iris_all_to_all(ctx, in, out, count, IRIS_BFLOAT16, stream));
    else IK(iris_broadcast(ctx, in, out, count, IRIS_BFLOAT16, 0, stream));
    return;
  }
  ncclResult_t r = ncclSuccess;
  if (coll == AR) r = ncclAllReduce(in, out, count, ncclBfloat16, ncclSum, world, stream);
  else if (coll == AG) r = ncclAllGather(in, out, count, ncclBfloat16, world, stream);
  else if (coll == RS) r = ncclReduceScatter(in, out, count, ncclBfloat16, ncclSum, world, stream);
  else if (coll == BC) r = ncclBroadcast(in, out, count, ncclBfloat16, 0, world, stream);
  else {
    r = ncclGroupStart();
    for (int q = 0; q < W && r == ncclSuccess; q++) {
      r = ncclSend((const char *)in + (size_t)q * count * 2, count, ncclBfloat16, q, world, stream);
      if (r == ncclSuccess) r = ncclRecv((char *)out + (size_t)q * count * 2, count, ncclBfloat16, q, world, stream);
    }
    ncclResult_t r2 = ncclGroupEnd();
    if (r == ncclSuccess) r = r2;
  }
  if (r != ncclSuccess) { fprintf(stderr, "bench: NCCL: %s\n", ncclGetErrorString(r)); exit(1); }
}
static double time_us(int coll, int v, const void *in, void *out, size_t count) {
  const int K = count * 2 <= ((size_t)4 << 20) ? 20 : 5, R = K;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaEvent_t a, b;
  std::vector<float> t;
  run(coll, v, in, out, count); // eager first: NCCL connects its peers outside the capture
  CK(cudaStreamSynchronize(stream));
  IK(iris_barrier(ctx));
  CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < K; k++) run(coll, v, in, out, count);
  CK(cudaStreamEndCapture(stream, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 2; i++) CK(cudaGraphLaunch(ge, stream));
  CK(cudaStreamSynchronize(stream));
  IK(iris_barrier(ctx));
  for (int r = 0; r < R; r++) {
    float ms = 0;
    CK(cudaEventRecord(a, stream));
    CK(cudaGraphLaunch(ge, stream));
    CK(cudaEventRecord(b, stream));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0f / K);
  }
  std::sort(t.begin(), t.end());
  double med = t[t.size() / 2], all[64];
  IK(iris_allgather_host(ctx, &med, all, sizeof med));
  double worst = 0;
  for (int r = 0; r < W; r++) worst = std::max(worst, all[r]);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return worst;
}
// "all_reduce=2K-256K" style ranges from the measured sizes where whole beat hier: runs of
// consecutive sizes, open at the ends of the measured span.
static std::string suggest(const std::vector<size_t> &sizes, const std::vector<int> &nccl_wins) {
  std::string out;
  for (size_t i = 0; i < sizes.size(); i++) {
    if (!nccl_wins[i] || (i > 0 && nccl_wins[i - 1])) continue;
    size_t j = i;
    while (j + 1 < sizes.size() && nccl_wins[j + 1]) j++;
    auto sz = [](size_t b) { char t[32]; if (b % (1 << 20) == 0) snprintf(t, sizeof t, "%zuM", b >> 20); else if (b % 1024 == 0) snprintf(t, sizeof t, "%zuK", b >> 10); else snprintf(t, sizeof t, "%zu", b); return std::string(t); };
    out += (out.empty() ? "" : ":") + (i == 0 ? std::string("0") : sz(sizes[i])) + "-" + (j + 1 == sizes.size() ? std::string("") : sz(sizes[j]));
  }
  if (out == "0-") return "all";
  return out.empty() ? "none" : out;
}

int main(int argc, char **argv) {
  size_t max_bytes = (size_t)256 << 20;
  if (argc > 1) g_nodes = atoi(argv[1]);
  if (argc > 2) g_per = atoi(argv[2]);
  if (argc > 3) max_bytes = iris_detail_parse_size(argv[3]);
  if (g_nodes < 2 || g_per < 1 || max_bytes < 1024) { fprintf(stderr, "usage: bench_multinode NODES RANKS_PER_NODE [max_bytes]\n"); return 2; }
  iris_launch_t L;
  int me = -1;
  IK(iris_launch_local(getenv("BENCH_REAL_NODES") ? 0 : g_nodes * g_per, &L, &me));
  if (me < 0) return iris_launch_wait(&L, 3600 * 1000) == IRIS_SUCCESS ? 0 : 1;
  if (!getenv("BENCH_REAL_NODES")) {
    char id[32];
    snprintf(id, sizeof id, "vnode%d", me / g_per);
    setenv("IRIS_HOST_ID", id, 1);
    setenv("NCCL_HOSTID", id, 1);
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)3 * max_bytes * (size_t)(g_nodes * g_per) + ((size_t)512 << 20);
  IK(iris_init(&cfg, &ctx));
  rank = iris_rank(ctx);
  W = iris_world_size(ctx);
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  { // NCCL alone: one communicator over every rank
    ncclUniqueId id, ids[64];
    if (rank == 0) ncclGetUniqueId(&id);
    IK(iris_allgather_host(ctx, &id, ids, sizeof id));
    if (ncclCommInitRank(&world, W, ids[0], rank) != ncclSuccess) { fprintf(stderr, "bench: ncclCommInitRank failed\n"); return 1; }
  }
  const size_t in_max = max_bytes, out_max = max_bytes * (size_t)W;
  void *in = NULL, *out = NULL, *out2 = NULL;
  IK(iris_malloc(ctx, out_max, &in));
  IK(iris_malloc(ctx, out_max, &out));
  IK(iris_malloc(ctx, out_max, &out2));
  IK(iris_collectives_setup(ctx));
  g_table = ((iris_coll_state_t *)iris_detail_get_ext(ctx))->mn_table; // the defaults, or IRIS_MN_NCCL_WHOLE's
  const bool have_whole = iris_detail_world_comm(ctx) != NULL;
  if (rank == 0) {
    const char *env = getenv("IRIS_MN_NCCL_WHOLE");
    printf("# bench_multinode: %d nodes x %d ranks (%s), bf16 sum, graphs; times in us (max over ranks of the median)\n", iris_num_nodes(ctx),
           iris_local_size(ctx), getenv("BENCH_REAL_NODES") ? "real nodes" : "virtual nodes on one machine");
    printf("# route: the library's own choice (%s%s); hier / whole: each route forced%s\n", env ? "IRIS_MN_NCCL_WHOLE=" : "the defaults", env ? env : "",
           have_whole ? "" : "; no world communicator (ranks of one node share a GPU), so no whole route");
    printf("%-15s %12s %6s %12s %12s %8s %12s %12s\n", "collective", "bytes", "route", "iris_us", "nccl_us", "x nccl", "hier_us", "whole_us");
  }
  int bad = 0;
  std::string suggestion;
  for (int coll = 0; coll < NCOLL; coll++) {
    std::vector<size_t> sizes;
    std::vector<int> wins;
    for (size_t bytes = 1024; bytes <= in_max; bytes *= 4) {
      const size_t elems = bytes / 2, count = coll == RS || coll == A2A ? elems / (size_t)W : elems;
      if (count == 0) continue;
      const size_t in_elems = coll == RS || coll == A2A ? count * (size_t)W : count, out_elems = coll == AG || coll == A2A ? count * (size_t)W : count;
      const iris_coll_mn_route_t route = iris_coll_mn_decide(&g_table, have_whole, coll_kind[coll], count, 2, W);
      k_fill<<<256, 256, 0, stream>>>((__nv_bfloat16 *)in, in_elems, (unsigned)bytes, rank);
      CK(cudaStreamSynchronize(stream));
      set_route(V_HIER);
      const double th = time_us(coll, V_HIER, in, out, count);
      double tw = NAN;
      if (have_whole) {
        set_route(V_WHOLE);
        tw = time_us(coll, V_WHOLE, in, out, count);
      }
      const double tn = time_us(coll, V_NCCL, in, out2, count), ti = route == IRIS_COLL_MN_NCCL ? tw : th;
      // correctness: each route on fresh inputs against NCCL alone, bit for bit
      std::string wrong;
      for (int v = V_HIER; v <= (have_whole ? V_WHOLE : V_HIER); v++) {
        k_fill<<<256, 256, 0, stream>>>((__nv_bfloat16 *)in, in_elems, (unsigned)bytes + 7 + v, rank);
        CK(cudaMemsetAsync(out, 0xff, out_elems * 2, stream));
        CK(cudaMemsetAsync(out2, 0xfe, out_elems * 2, stream));
        set_route(v);
        run(coll, v, in, out, count);
        run(coll, V_NCCL, in, out2, count);
        CK(cudaStreamSynchronize(stream));
        std::vector<char> a(out_elems * 2), b(out_elems * 2);
        CK(cudaMemcpy(a.data(), out, a.size(), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), out2, b.size(), cudaMemcpyDeviceToHost));
        int mine = memcmp(a.data(), b.data(), a.size()) != 0, all[64], any = 0;
        IK(iris_allgather_host(ctx, &mine, all, sizeof mine));
        for (int r = 0; r < W; r++) any |= all[r];
        if (any) wrong += std::string("  WRONG: ") + (v == V_HIER ? "hier" : "whole") + " and NCCL differ";
      }
      set_route(V_TABLE);
      bad |= !wrong.empty();
      sizes.push_back(bytes);
      wins.push_back(have_whole && tw < th);
      if (rank == 0) {
        char w[32] = "-";
        if (have_whole) snprintf(w, sizeof w, "%.2f", tw);
        printf("%-15s %12zu %6s %12.2f %12.2f %8.2f %12.2f %12s%s\n", coll_name[coll], bytes, iris_coll_mn_route_name(route), ti, tn, tn / ti, th, w, wrong.c_str());
      }
      fflush(stdout);
    }
    if (have_whole && !sizes.empty()) suggestion += std::string(suggestion.empty() ? "" : ",") + coll_name[coll] + "=" + suggest(sizes, wins);
  }
  if (rank == 0 && have_whole) printf("# suggested (the measured sizes where whole beat hier): IRIS_MN_NCCL_WHOLE=%s\n", suggestion.c_str());
  ncclCommDestroy(world);
  IK(iris_finalize(ctx));
  return bad;
}
