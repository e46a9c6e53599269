// bench_multinode: iris's hierarchical collectives (iris kernels inside a node, NCCL
// rails between nodes) against NCCL alone over the same ranks, on "virtual nodes": one
// machine's ranks split with IRIS_HOST_ID and NCCL_HOSTID, so both use NCCL's socket
// transport between the nodes (docs/multinode.md; real clusters: run it under srun or
// mpirun with one node per host and no IRIS_HOST_ID override, BENCH_REAL_NODES=1).
//   all_reduce, all_gather, reduce_scatter; bf16 sum; sizes 1 KiB .. max_bytes (x4).
//   Size: all_reduce: the message; all_gather: the input per rank; reduce_scatter: the
//   input per rank (split in W parts).
// Timing: K calls captured into one CUDA graph, 2 warm-up replays, R timed replays
//   (K = R = 20 up to 4 MiB, 5 above); time per op = replay / K; median over replays on
//   each rank, the max over ranks reported. "x nccl": NCCL's time over iris's.
// Correctness: inputs are small integers (exact in bf16 at any reduction order); after
//   the timing, one eager call of each variant on fresh inputs, and the two outputs
//   must be equal bit for bit on every rank (a difference: exit 1).
// Usage: bench_multinode NODES RANKS_PER_NODE [max_bytes]   (default 2 2 256M)
//   Environment: NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 on one machine.
// Build: make build/bench_multinode (links -lnccl for the NCCL-alone rows; iris itself
//   loads NCCL at run time).
#define IRIS_IMPLEMENTATION
#include "../iris_collectives.h"
#include "bench_util.h"
#include <algorithm>
#include <nccl.h>
#include <string.h>
#include <string>
#include <vector>

static int g_nodes = 2, g_per = 2, rank, W;
static iris_t *ctx;
static ncclComm_t world;
static cudaStream_t stream;
enum { AR, AG, RS, NCOLL };
static const char *coll_name[NCOLL] = {"all_reduce", "all_gather", "reduce_scatter"};

__global__ void k_fill(__nv_bfloat16 *p, size_t n, unsigned seed, int r) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16((float)((int)((i * 2654435761u + seed * 40503u + (unsigned)r * 97u) % 9u) - 4));
}
// count: elements per rank of the call (all_gather: input; reduce_scatter: output)
static void run(int coll, int iris_variant, const void *in, void *out, size_t count) {
  if (iris_variant) {
    if (coll == AR) IK(iris_all_reduce(ctx, in, out, count, IRIS_BFLOAT16, IRIS_SUM, stream));
    else if (coll == AG) IK(iris_all_gather(ctx, in, out, count, IRIS_BFLOAT16, stream));
    else IK(iris_reduce_scatter(ctx, in, out, count, IRIS_BFLOAT16, IRIS_SUM, stream));
  } else {
    ncclResult_t r = coll == AR ? ncclAllReduce(in, out, count, ncclBfloat16, ncclSum, world, stream)
                     : coll == AG ? ncclAllGather(in, out, count, ncclBfloat16, world, stream)
                                  : ncclReduceScatter(in, out, count, ncclBfloat16, ncclSum, world, stream);
    if (r != ncclSuccess) { fprintf(stderr, "bench: NCCL: %s\n", ncclGetErrorString(r)); exit(1); }
  }
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
  if (rank == 0) {
    printf("# bench_multinode: %d nodes x %d ranks (%s), bf16 sum, graphs; times in us (max over ranks of the median)\n", iris_num_nodes(ctx),
           iris_local_size(ctx), getenv("BENCH_REAL_NODES") ? "real nodes" : "virtual nodes on one machine");
    printf("%-15s %12s %12s %12s %8s\n", "collective", "bytes", "iris_us", "nccl_us", "x nccl");
  }
  int bad = 0;
  for (int coll = 0; coll < NCOLL; coll++)
    for (size_t bytes = 1024; bytes <= in_max; bytes *= 4) {
      const size_t elems = bytes / 2, count = coll == RS ? elems / (size_t)W : elems;
      if (count == 0) continue;
      const size_t in_elems = coll == RS ? count * (size_t)W : count, out_elems = coll == AG ? count * (size_t)W : count;
      k_fill<<<256, 256, 0, stream>>>((__nv_bfloat16 *)in, in_elems, (unsigned)bytes, rank);
      CK(cudaStreamSynchronize(stream));
      double ti = time_us(coll, 1, in, out, count), tn = time_us(coll, 0, in, out2, count);
      k_fill<<<256, 256, 0, stream>>>((__nv_bfloat16 *)in, in_elems, (unsigned)bytes + 7, rank);
      CK(cudaMemsetAsync(out, 0xff, out_elems * 2, stream));
      CK(cudaMemsetAsync(out2, 0xfe, out_elems * 2, stream));
      run(coll, 1, in, out, count);
      run(coll, 0, in, out2, count);
      CK(cudaStreamSynchronize(stream));
      std::vector<char> a(out_elems * 2), b(out_elems * 2);
      CK(cudaMemcpy(a.data(), out, a.size(), cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(b.data(), out2, b.size(), cudaMemcpyDeviceToHost));
      int mine = memcmp(a.data(), b.data(), a.size()) != 0, all[64], any = 0;
      IK(iris_allgather_host(ctx, &mine, all, sizeof mine));
      for (int r = 0; r < W; r++) any |= all[r];
      bad |= any;
      if (rank == 0) printf("%-15s %12zu %12.2f %12.2f %8.2f%s\n", coll_name[coll], bytes, ti, tn, tn / ti, any ? "  WRONG: iris and NCCL differ" : "");
      fflush(stdout);
    }
  ncclCommDestroy(world);
  IK(iris_finalize(ctx));
  return bad;
}
