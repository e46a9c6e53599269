// bench_moe: MoE dispatch and combine (iris_moe.h) beside the NCCL baseline torch users
// write, in the same processes and the same run (NVIDIA, one rank per GPU).
//   Shape: hidden 7168, top-8, 256 experts (DeepSeek-V3), uniform random routing (8 distinct
//   experts per token), tokens per rank 1, 8, 32, 128, 256 (low-latency mode) and 4096
//   (high-throughput mode); dispatch fp8 (per-128 scales) or bf16, combine bf16.
//   iris: K calls captured into one CUDA graph (K = 10, 4 for 4096 tokens), 3 warm-up
//   replays, then 20 replays back to back, each between its own device events (one sync
//   at the end); time per call = replay / K;
//   the median over replays on each rank, reported: the max over ranks. Combine is timed
//   after one dispatch (the same handle, K combines per graph).
//   nccl: what a torch user writes without a fused kernel: a gather kernel packs the
//   (token, expert) rows by destination rank (the permutation itself is precomputed on the
//   host and not timed, which flatters the baseline), the counts go through ncclSend/Recv,
//   the host copies them back and synchronises (torch's .tolist()), then ncclSend/Recv
//   moves the rows (all-to-all-v). Combine: ncclSend/Recv sends the expert rows back, and a
//   kernel sums each token's k rows with its weights (fp32). Eager calls, host wall clock
//   per call after a host barrier, median over 20 calls, max over ranks.
//   Bandwidth as DeepEP's tests define it: (this rank's valid (token, expert) selections) x
//   (bytes per row: fp8 hidden + hidden/128*4 + 16 (DeepEP's message), bf16 hidden*2) / time.
// Usage: bench_moe [ranks]   ranks: 0 (default) = one per visible GPU. BENCH_TOKENS=1,8,...
//   restricts the token counts. NVLink multicast is off (NCCL_NVLS_ENABLE=0).
// Build: make build/bench_moe
#define IRIS_IMPLEMENTATION
#include "../iris_moe.h"
#include "bench_util.h"

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#define NK(x)                                                                                                     \
  do {                                                                                                            \
    ncclResult_t e_ = (x);                                                                                        \
    if (e_ != ncclSuccess) { fprintf(stderr, "bench: %s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(e_)); exit(1); } \
  } while (0)

static int rank, W;
static iris_t *ctx;
static ncclComm_t comm;
static cudaStream_t stream;

static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
static double max_over_ranks(double v) {
  std::vector<double> all(W);
  IK(iris_allgather_host(ctx, &v, all.data(), sizeof v));
  return *std::max_element(all.begin(), all.end());
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

__global__ void k_fill_bf16(unsigned short *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ULL;
    x ^= x >> 29;
    p[i] = (unsigned short)(0x3c00 + (x & 0x7f) + ((x >> 8) & 1 ? 0x8000 : 0)); // +-[2^-7, 2^-6)
  }
}
// nccl baseline: rows of `es` bytes, send row i = x row src[i]
__global__ void k_gather(const char *x, const int *src, int rows, int row_bytes, char *out) {
  for (int r = blockIdx.x; r < rows; r += gridDim.x)
    for (int j = threadIdx.x; j < row_bytes / 16; j += blockDim.x) ((uint4 *)(out + (size_t)r * row_bytes))[j] = ((const uint4 *)(x + (size_t)src[r] * row_bytes))[j];
}
// nccl baseline: out[t] = sum_k w[t][k] * back[pos[t][k]] (bf16 rows, fp32 sums)
__global__ void k_unpermute(const unsigned short *back, const int *pos, const float *w, int n, int K, int H, unsigned short *out) {
  for (int t = blockIdx.x; t < n; t += gridDim.x)
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
      float acc = 0;
      for (int k = 0; k < K; k++) {
        const int p = pos[t * K + k];
        if (p >= 0) acc += w[t * K + k] * __uint_as_float((unsigned)back[(size_t)p * H + j] << 16);
      }
      out[(size_t)t * H + j] = (unsigned short)(__float_as_uint(acc) >> 16);
    }
}

struct Result { double disp_us, comb_us, disp_gbs, comb_gbs; };

static Result bench_one(iris_moe_mode_t mode, iris_dtype_t dt, int T, int H, int K, int E, uint64_t seed, bool nccl) {
  const int L = E / W, fp8 = dt == IRIS_FLOAT8_E4M3;
  // routing: K distinct experts per token, weights
  std::vector<int> idx((size_t)T * K);
  std::vector<float> w((size_t)T * K);
  for (int t = 0; t < T; t++) {
    std::vector<int> pool(E);
    for (int g = 0; g < E; g++) pool[g] = g;
    for (int k = 0; k < K; k++) {
      const uint64_t r = mix64(seed ^ mix64((uint64_t)rank << 32 | (uint64_t)t << 8 | k));
      std::swap(pool[k], pool[k + r % (E - k)]);
      idx[(size_t)t * K + k] = pool[k];
      w[(size_t)t * K + k] = 0.125f;
    }
  }
  unsigned short *x, *y, *out;
  int *d_idx;
  float *d_w;
  iris_moe_desc_t d = IRIS_MOE_DESC_INIT;
  d.mode = mode, d.max_tokens = T, d.hidden = H, d.top_k = K, d.num_experts = E, d.dispatch_type = dt;
  iris_moe_t *m;
  IK(iris_moe_create(ctx, &d, &m));
  iris_moe_recv_t rv;
  IK(iris_moe_get_recv(m, &rv));
  CK(cudaMalloc(&x, (size_t)T * H * 2));
  CK(cudaMalloc(&out, (size_t)T * H * 2));
  CK(cudaMalloc(&y, (size_t)rv.rows * H * 2));
  CK(cudaMalloc(&d_idx, idx.size() * 4));
  CK(cudaMalloc(&d_w, w.size() * 4));
  k_fill_bf16<<<256, 256>>>(x, (size_t)T * H, seed);
  k_fill_bf16<<<256, 256>>>(y, (size_t)rv.rows * H, seed + 1);
  CK(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_w, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaDeviceSynchronize());
  const double sel = (double)T * K, row_disp = fp8 ? H + H / 128 * 4 + 16 : H * 2.0, row_comb = H * 2.0;
  const int reps = T >= 4096 ? 4 : 10;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  Result res;
  for (int phase = 0; phase < 2; phase++) { // 0: dispatch, 1: combine
    if (phase == 1) { // one dispatch for the handle
      IK(iris_moe_dispatch(m, x, T, d_idx, d_w, stream));
      CK(cudaStreamSynchronize(stream));
    }
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < reps; i++) {
      if (phase == 0) IK(iris_moe_dispatch(m, x, T, d_idx, d_w, stream));
      else IK(iris_moe_combine(m, y, out, stream));
    }
    CK(cudaStreamEndCapture(stream, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    IK(iris_barrier(ctx));
    for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(ge, stream));
    CK(cudaStreamSynchronize(stream));
    IK(iris_barrier(ctx));
    std::vector<double> ts;
    cudaEvent_t ev[21]; // 20 replays back to back, each between its own events; one sync
    for (int i = 0; i <= 20; i++) CK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < 20; i++) {
      CK(cudaEventRecord(ev[i], stream));
      CK(cudaGraphLaunch(ge, stream));
    }
    CK(cudaEventRecord(ev[20], stream));
    CK(cudaEventSynchronize(ev[20]));
    for (int i = 0; i < 20; i++) {
      float ms;
      CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
      ts.push_back(ms * 1e3 / reps);
    }
    for (int i = 0; i <= 20; i++) CK(cudaEventDestroy(ev[i]));
    const double us = max_over_ranks(median(ts));
    (phase == 0 ? res.disp_us : res.comb_us) = us;
    (phase == 0 ? res.disp_gbs : res.comb_gbs) = sel * (phase == 0 ? row_disp : row_comb) / (us * 1e3);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  IK(iris_moe_check(m));
  if (rank == 0)
    printf("%-5s %-4s %5d  iris   dispatch %8.1f us %7.1f GB/s   combine %8.1f us %7.1f GB/s\n", mode == IRIS_MOE_LOW_LATENCY ? "LL" : "HT", fp8 ? "fp8" : "bf16", T,
           res.disp_us, res.disp_gbs, res.comb_us, res.comb_gbs);
  if (nccl) { // the baseline: rows grouped by destination, counts first, then all-to-all-v
    const int es = fp8 ? 1 : 2, row_bytes = H * es;
    std::vector<int> send_cnt(W, 0), order, pos((size_t)T * K, -1);
    for (int q = 0; q < W; q++)
      for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++)
          if (idx[(size_t)t * K + k] / L == q) pos[(size_t)t * K + k] = (int)order.size(), order.push_back(t), send_cnt[q]++;
    int *d_order, *d_pos, *d_cnt, *h_cnt;
    char *sendb, *recvb, *backb;
    const size_t max_rows = (size_t)W * T * K;
    CK(cudaMalloc(&d_order, order.size() * 4 + 4));
    CK(cudaMalloc(&d_pos, pos.size() * 4));
    CK(cudaMalloc(&d_cnt, 2 * W * 4));
    CK(cudaMallocHost(&h_cnt, 2 * W * 4));
    CK(cudaMalloc(&sendb, order.size() * (size_t)H * 2 + 16));
    CK(cudaMalloc(&recvb, max_rows * H * 2));
    CK(cudaMalloc(&backb, order.size() * (size_t)H * 2 + 16));
    CK(cudaMemcpy(d_order, order.data(), order.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_pos, pos.data(), pos.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_cnt, send_cnt.data(), W * 4, cudaMemcpyHostToDevice));
    std::vector<double> td, tc;
    std::vector<int> recv_cnt(W);
    for (int i = 0; i < 23; i++) {
      IK(iris_barrier(ctx));
      auto t0 = std::chrono::steady_clock::now();
      k_gather<<<264, 256, 0, stream>>>((const char *)x, d_order, (int)order.size(), row_bytes, sendb);
      NK(ncclGroupStart());
      for (int q = 0; q < W; q++) {
        NK(ncclSend(d_cnt + q, 1, ncclInt32, q, comm, stream));
        NK(ncclRecv(d_cnt + W + q, 1, ncclInt32, q, comm, stream));
      }
      NK(ncclGroupEnd());
      CK(cudaMemcpyAsync(h_cnt, d_cnt + W, W * 4, cudaMemcpyDeviceToHost, stream));
      CK(cudaStreamSynchronize(stream));
      size_t so = 0, ro = 0;
      NK(ncclGroupStart());
      for (int q = 0; q < W; q++) {
        recv_cnt[q] = h_cnt[q];
        NK(ncclSend(sendb + so * row_bytes, (size_t)send_cnt[q] * row_bytes, ncclUint8, q, comm, stream));
        NK(ncclRecv(recvb + ro * row_bytes, (size_t)h_cnt[q] * row_bytes, ncclUint8, q, comm, stream));
        so += send_cnt[q], ro += h_cnt[q];
      }
      NK(ncclGroupEnd());
      CK(cudaStreamSynchronize(stream));
      auto t1 = std::chrono::steady_clock::now();
      IK(iris_barrier(ctx));
      auto t2 = std::chrono::steady_clock::now();
      so = 0, ro = 0; // combine: the received rows (bf16) go back, then the weighted sum
      NK(ncclGroupStart());
      for (int q = 0; q < W; q++) {
        NK(ncclSend(recvb + ro * H * 2, (size_t)recv_cnt[q] * H * 2, ncclUint8, q, comm, stream));
        NK(ncclRecv(backb + so * H * 2, (size_t)send_cnt[q] * H * 2, ncclUint8, q, comm, stream));
        so += send_cnt[q], ro += recv_cnt[q];
      }
      NK(ncclGroupEnd());
      k_unpermute<<<264, 256, 0, stream>>>((const unsigned short *)backb, d_pos, d_w, T, K, H, out);
      CK(cudaStreamSynchronize(stream));
      auto t3 = std::chrono::steady_clock::now();
      if (i >= 3) td.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count()), tc.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
    }
    const double du = max_over_ranks(median(td)), cu = max_over_ranks(median(tc));
    if (rank == 0)
      printf("%-5s %-4s %5d  nccl   dispatch %8.1f us %7.1f GB/s   combine %8.1f us %7.1f GB/s   (iris: %.2fx, %.2fx)\n", mode == IRIS_MOE_LOW_LATENCY ? "LL" : "HT",
             fp8 ? "fp8" : "bf16", T, du, sel * row_disp / (du * 1e3), cu, sel * row_comb / (cu * 1e3), du / res.disp_us, cu / res.comb_us);
    cudaFree(d_order), cudaFree(d_pos), cudaFree(d_cnt), cudaFreeHost(h_cnt), cudaFree(sendb), cudaFree(recvb), cudaFree(backb);
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  cudaFree(x), cudaFree(y), cudaFree(out), cudaFree(d_idx), cudaFree(d_w);
  IK(iris_barrier(ctx));
  IK(iris_moe_destroy(m));
  return res;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const int nranks = argc > 1 ? atoi(argv[1]) : 0;
  iris_launch_t Lc;
  IK(iris_launch_local(nranks, &Lc, &rank));
  if (rank < 0) return iris_launch_wait(&Lc, 1800000) == IRIS_SUCCESS ? 0 : 1;
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)8 << 30; // 4096 tokens: up to W*4096*8 received rows of 7168 bf16
  IK(iris_init(&cfg, &ctx));
  rank = iris_rank(ctx), W = iris_world_size(ctx);
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) NK(ncclGetUniqueId(&id));
  std::vector<ncclUniqueId> ids(W);
  IK(iris_allgather_host(ctx, &id, ids.data(), sizeof id));
  NK(ncclCommInitRank(&comm, W, ids[0], rank));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, iris_device_ordinal(ctx)));
  if (rank == 0) printf("# bench_moe: %d ranks, %s, hidden 7168, top-8, 256 experts; times per call (max over ranks of the medians)\n", W, prop.name);
  std::vector<int> toks = {1, 8, 32, 128, 256, 4096};
  if (const char *e = getenv("BENCH_TOKENS")) {
    toks.clear();
    for (const char *p = e; *p;) {
      toks.push_back(atoi(p));
      while (*p && *p != ',') p++;
      if (*p) p++;
    }
  }
  uint64_t seed = 12345;
  for (iris_dtype_t dt : {IRIS_FLOAT8_E4M3, IRIS_BFLOAT16})
    for (int T : toks) bench_one(T >= 4096 ? IRIS_MOE_HIGH_THROUGHPUT : IRIS_MOE_LOW_LATENCY, dt, T, 7168, 8, 256, seed++, true);
  ncclCommDestroy(comm);
  IK(iris_finalize(ctx));
  return 0;
}
