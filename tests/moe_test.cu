// MoE dispatch and combine (iris_moe.h), both modes, against a float64 host reference on
// fresh random inputs every iteration. Every rank regenerates every rank's routing, tokens
// and weights from the shared seed, so it knows exactly what it must receive:
//   dispatch: each local expert's count (and offsets), every received row matched to its
//     (source rank, token, k) through the source ids (the order inside an expert is free),
//     each id exactly once; bf16 rows bit-exact; fp8 rows: the codes and scales of the
//     host's replica of the quantisation (scale = amax/448, code = e4m3(v * 448/amax)),
//     and |dequantised - v| <= 2^-4 |v| + 2^-10 scale (e4m3 keeps 3 mantissa bits: half an
//     ulp is 2^-4 relative for normal codes; below 2^-6 the subnormal spacing 2^-9 times
//     the scale, half of it 2^-10); rows past the counts untouched (their source ids keep
//     the poison).
//   combine: y = bf16(dequant(recv_x) * (expert + 1)) by a small kernel, then out[t] must be
//     sum_k w_k * y_k within 2^-8 |ref| (bf16 rounding) + 2^-18 sum |w_k y_k| (fp32
//     accumulation of <= 32 terms); rows past num_tokens untouched.
// Outputs are poisoned (NaN bits) before every call. Cases: random routings (with -1
// entries), every token to one expert, every token to one rank (several experts of one
// rank per token), ranks with zero tokens, top-k 1, 2, 3, 8, 16, hidden 136, 640, 2048,
// 4096, 7168, bf16 and fp8, graph replays with new routings, two streams, bad indices
// found on the device, bad host input, high-throughput rows past max_recv_rows, both modes,
// host memory short for the plan on one rank (IRIS_TEST_HOOKS; not in the threads mode).
//   moe_test N     N processes (iris_launch_local), device = rank % GPUs (shared when N > GPUs)
//   moe_test threads N  N ranks as threads of one process, all on GPU 0 (iris_init_local with
//                  device 0 listed N times): their kernels run at once, so each plan's grid
//                  takes at most 1 / N of the SMs (internal/moe/grid.h); before, a low-latency
//                  grid held every SM and each call waited out its bound
//   moe_test gaveup N  N processes; all but the last rank give up waiting for it (a short
//                  bound, IRIS_WAIT_TIMEOUT_MS, 300 unless set): the late rank's check must
//                  name them (IRIS_ERROR_TIMEOUT), not say SUCCESS; one line per rank
// Build: make build/moe_test (fp32 SUM of the collectives only: IRIS_COLL_TYPES / _OPS)
#define IRIS_IMPLEMENTATION
#define IRIS_TEST_HOOKS // the library's failure injections (a plan's host memory short on one rank)
#include "../iris_moe.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <vector>

enum { R_RANDOM, R_ONE_EXPERT, R_ONE_RANK, R_BAD };
static const char *routing_name[] = {"random", "one expert", "one rank", "random + bad indices"};
enum { RUN_EAGER, RUN_GRAPH, RUN_STREAMS };
static const char *run_name[] = {"eager", "graph replays", "two streams"};

struct Case {
  iris_moe_mode_t mode;
  iris_dtype_t dt;
  int T, H, K, epr; // max tokens, hidden, top-k, experts per rank
  int routing, run, iters;
};

// ------------------------------------------------------------------ the inputs, on every rank alike
struct Inputs {
  int n;
  std::vector<int> idx;
  std::vector<float> w;
  std::vector<uint16_t> x; // bf16 bits, n x H
};
static float bf16f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f2bf(float f) { // round to nearest even (finite inputs)
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
// rank q's inputs for call `call` of case `c`
static Inputs make_inputs(const Case &c, int W, uint64_t seed, int ci, int call, int q, bool full) {
  Inputs in;
  const int E = c.epr * W, K = c.K;
  uint64_t h = key(seed, ci, call, q, 1);
  in.n = full ? c.T : (int)(h % (uint64_t)(c.T + 1));
  if (!full && call % 3 == 1 && q == call % W) in.n = 0; // a rank with no tokens
  in.idx.assign((size_t)in.n * K, -1);
  in.w.resize((size_t)in.n * K);
  in.x.resize((size_t)in.n * c.H);
  const int g0 = (int)(key(seed, ci, call, 77, 2) % (uint64_t)E), r0 = (int)(key(seed, ci, call, 78, 3) % (uint64_t)W);
  for (int t = 0; t < in.n; t++) {
    std::vector<int> pool;
    if (c.routing == R_ONE_RANK)
      for (int l = 0; l < c.epr; l++) pool.push_back(r0 * c.epr + l);
    else
      for (int g = 0; g < E; g++) pool.push_back(g);
    for (int k = 0; k < K; k++) { // k distinct experts: a partial Fisher-Yates shuffle
      const uint64_t r = key(seed, ci, call, q, 1000 + (uint64_t)t * 64 + k);
      const int j = k + (int)(r % (uint64_t)(pool.size() - k));
      std::swap(pool[k], pool[j]);
      int g = pool[k];
      if (c.routing == R_ONE_EXPERT) g = k == 0 ? g0 : -1;
      else if ((c.routing == R_RANDOM || c.routing == R_BAD) && (r >> 40) % 16 == 0) g = -1;
      in.idx[(size_t)t * K + k] = g;
      in.w[(size_t)t * K + k] = (float)((int)((r >> 20) % 2001) - 1000) / 997.0f;
    }
  }
  if (c.routing == R_BAD && q == 0 && in.n >= 2) {
    in.idx[0] = E + 5;                                      // out of range
    if (K >= 2) in.idx[(size_t)K + 1] = in.idx[(size_t)K]; // token 1 repeats its first expert (maybe -1: then fine)
    in.idx[(size_t)K * (in.n - 1)] = -7;                    // below -1
  }
  for (int t = 0; t < in.n; t++)
    for (int j = 0; j < c.H; j++) {
      const uint64_t r = key(seed, ci, call, q, 0x100000000ULL + (uint64_t)t * c.H + j);
      float m = 0.0625f + 0.9375f * (float)(r >> 40) * (1.0f / 16777216.0f);
      m = ldexpf(m, (int)((j / 128 + t) % 9) - 4); // per-group magnitudes 2^-4 .. 2^4
      in.x[(size_t)t * c.H + j] = f2bf(r & 1 ? -m : m);
    }
  return in;
}
// the routing rule of iris_moe.h: an entry counts if it names an expert that no earlier k
// of the same token named
static bool valid(const Inputs &in, int K, int E, int t, int k) {
  const int g = in.idx[(size_t)t * K + k];
  if (g < 0 || g >= E) return false;
  for (int j = 0; j < k; j++)
    if (in.idx[(size_t)t * K + j] == g) return false;
  return true;
}
// the host replica of the kernel's quantisation of one 128-channel group
static void quant_group(const uint16_t *v, unsigned char *q, float *scale) {
  float amax = 0;
  for (int i = 0; i < 128; i++) amax = fmaxf(amax, fabsf(bf16f(v[i])));
  const float inv = amax > 0 ? 448.0f / amax : 0.0f;
  *scale = amax > 0 ? amax / 448.0f : 1.0f;
  for (int i = 0; i < 128; i++) q[i] = iris_float_to_fp8_e4m3(bf16f(v[i]) * inv);
}
// the received value of channel j of a token as the expert sees it (float), host side;
// fp8: group j/128 is quantised when j is its first channel and kept for the others
static float recv_value(const Case &c, const uint16_t *row, int j) {
  static thread_local unsigned char q[128]; // per thread: ranks may be threads of one process
  static thread_local float sc;
  if (c.dt == IRIS_BFLOAT16) return bf16f(row[j]);
  if (j % 128 == 0) quant_group(row + j, q, &sc);
  return iris_fp8_e4m3_to_float(q[j % 128]) * sc;
}

// ------------------------------------------------------------------ the test's expert: y = x * (g + 1)
__global__ void k_expert(const void *rx, const float *rs, const int *count, const int *offsets, long long stride, int H, int fp8, int g0, iris_bf16_t *y) {
  const int l = blockIdx.x;
  const long long first = stride ? (long long)l * stride : offsets[l];
  for (long long r = first; r < first + count[l]; r++)
    for (int j = threadIdx.x; j < H; j += blockDim.x) {
      float v = fp8 ? iris_fp8_e4m3_to_float(((const unsigned char *)rx)[r * H + j]) * rs[r * (H / 128) + j / 128]
                    : __uint_as_float((unsigned)((const unsigned short *)rx)[r * H + j] << 16);
      v = v * (float)(g0 + l + 1);
      unsigned u = __float_as_uint(v);
      y[r * H + j].bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

struct Dev { // this rank's device buffers for a case
  uint16_t *x, *y, *out;
  int *idx;
  float *w;
};

// this rank's checks of one dispatch + combine; `ins` holds every rank's inputs
static bool check(Suite &s, const Case &c, iris_moe_t *m, const std::vector<Inputs> &ins, const Dev &d, const char *what) {
  const int W = s.world, me = s.rank, L = c.epr, E = L * W, K = c.K, H = c.H, fp8 = c.dt == IRIS_FLOAT8_E4M3;
  iris_moe_recv_t r;
  IK(iris_moe_get_recv(m, &r));
  const long long rows = r.rows, groups = H / 128;
  std::vector<int> cnt(L), off(L + 1), src(rows);
  std::vector<unsigned char> rx((size_t)rows * H * (fp8 ? 1 : 2));
  std::vector<float> rs(fp8 ? (size_t)rows * groups : 0);
  CK(cudaMemcpy(cnt.data(), r.count, L * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(off.data(), r.offsets, (L + 1) * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(src.data(), r.src, rows * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(rx.data(), r.x, rx.size(), cudaMemcpyDeviceToHost));
  if (fp8) CK(cudaMemcpy(rs.data(), r.scales, rs.size() * 4, cudaMemcpyDeviceToHost));
  int bad = 0;
#define BAD(...)                                                  \
  do {                                                            \
    if (bad++ < 5) { fprintf(stderr, "rank %d: %s: ", me, what); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
  } while (0)
  // dispatch: per local expert, the expected (q, t, k) set
  std::vector<std::vector<int>> seen(W);
  for (int q = 0; q < W; q++) seen[q].assign((size_t)ins[q].n * K, 0);
  long long acc = 0;
  for (int l = 0; l < L; l++) {
    const int g = me * L + l;
    long long want = 0;
    for (int q = 0; q < W; q++)
      for (int t = 0; t < ins[q].n; t++)
        for (int k = 0; k < K; k++) want += valid(ins[q], K, E, t, k) && ins[q].idx[(size_t)t * K + k] == g;
    if (cnt[l] != want) BAD("expert %d: count %d, want %lld", g, cnt[l], want);
    if (off[l] != acc) BAD("expert %d: offset %d, want %lld", g, off[l], acc);
    const long long first = r.expert_stride ? l * r.expert_stride : acc, end = r.expert_stride ? first + r.expert_stride : acc + want;
    for (long long row = first; row < end && row < rows; row++) {
      if (row >= first + want) { // not written: the poison stays
        if (r.expert_stride && (uint32_t)src[row] != 0xA5A5A5A5u) BAD("expert %d row %lld past the count was written", g, row - first);
        continue;
      }
      const int q = IRIS_MOE_SRC_RANK(src[row]), sl = IRIS_MOE_SRC_SLOT(src[row]), t = sl / K, k = sl % K;
      if (q >= W || t >= ins[q].n || !valid(ins[q], K, E, t, k) || ins[q].idx[(size_t)sl] != g || seen[q][sl]++) {
        BAD("expert %d row %lld: source 0x%x is not one of its tokens, or came twice", g, row - first, (unsigned)src[row]);
        continue;
      }
      const uint16_t *xv = &ins[q].x[(size_t)t * H];
      if (!fp8) {
        if (memcmp(&rx[(size_t)row * H * 2], xv, (size_t)H * 2)) BAD("expert %d row %lld (rank %d token %d): data differ", g, row - first, q, t);
        continue;
      }
      for (long long gi = 0; gi < groups; gi++) {
        unsigned char qv[128];
        float sc;
        quant_group(xv + gi * 128, qv, &sc);
        const float got_s = rs[(size_t)row * groups + gi];
        if (memcmp(&got_s, &sc, 4)) BAD("expert %d row %lld group %lld: scale %g, want %g", g, row - first, gi, got_s, sc);
        for (int i = 0; i < 128; i++) {
          const unsigned char gq = rx[(size_t)row * H + gi * 128 + i];
          const double v = bf16f(xv[gi * 128 + i]), dq = (double)iris_fp8_e4m3_to_float(gq) * got_s;
          if (gq != qv[i] || fabs(dq - v) > ldexp(fabs(v), -4) + ldexp((double)got_s, -10) + 1e-12)
            BAD("expert %d row %lld channel %lld: code 0x%02x (%g), want 0x%02x (x = %g)", g, row - first, gi * 128 + i, gq, dq, qv[i], v);
        }
      }
    }
    acc += want;
  }
  if (off[L] != acc) BAD("offsets[L] %d, want %lld", off[L], acc);
  if (!r.expert_stride)
    for (long long row = acc; row < rows; row++)
      if ((uint32_t)src[row] != 0xA5A5A5A5u) { BAD("row %lld past the received rows was written", row); break; }
  // combine
  const Inputs &mine = ins[me];
  std::vector<uint16_t> out((size_t)c.T * H);
  CK(cudaMemcpy(out.data(), d.out, out.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<float> xr(H);
  for (int t = 0; t < c.T; t++) {
    if (t >= mine.n) {
      for (int j = 0; j < H; j++)
        if (out[(size_t)t * H + j] != 0xFFFF) { BAD("out[%d][%d] past num_tokens was written", t, j); break; }
      continue;
    }
    for (int j = 0; j < H; j++) xr[j] = recv_value(c, &mine.x[(size_t)t * H], j);
    for (int j = 0; j < H; j++) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; k++) {
        if (!valid(mine, K, E, t, k)) continue;
        const int g = mine.idx[(size_t)t * K + k];
        const double y = bf16f(f2bf(xr[j] * (float)(g + 1))), wy = (double)mine.w[(size_t)t * K + k] * y;
        ref += wy;
        mag += fabs(wy);
      }
      const double gv = bf16f(out[(size_t)t * H + j]);
      if (!(fabs(gv - ref) <= ldexp(fabs(ref), -8) + ldexp(mag, -18) + 1e-30)) BAD("out[%d][%d] = %g, want %g", t, j, gv, ref);
    }
  }
#undef BAD
  if (bad) fprintf(stderr, "rank %d: %s: %d mismatches\n", me, what, bad);
  return bad == 0;
}

static bool upload(const Case &c, const Inputs &in, const Dev &d) {
  CK(cudaMemcpy(d.x, in.x.data(), in.x.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.idx, in.idx.data(), in.idx.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.w, in.w.data(), in.w.size() * 4, cudaMemcpyHostToDevice));
  (void)c;
  return true;
}
// NaN bits in y and out, 0xA5 in every receive buffer; then every rank meets, so no peer
// pushes into a buffer that is being poisoned
static bool poison_all(Suite &s, const Case &c, iris_moe_t *m, const Dev &d) {
  iris_moe_recv_t r;
  IK(iris_moe_get_recv(m, &r));
  const size_t es = c.dt == IRIS_FLOAT8_E4M3 ? 1 : 2;
  CK(cudaMemset(r.x, 0xA5, (size_t)r.rows * c.H * es));
  if (r.scales) CK(cudaMemset(r.scales, 0xA5, (size_t)r.rows * (c.H / 128) * 4));
  CK(cudaMemset(r.src, 0xA5, (size_t)r.rows * 4));
  CK(cudaMemset(r.count, 0xA5, (size_t)r.num_local_experts * 4));
  CK(cudaMemset(r.offsets, 0xA5, (size_t)(r.num_local_experts + 1) * 4));
  CK(cudaMemset(d.y, 0xFF, (size_t)r.rows * c.H * 2));
  CK(cudaMemset(d.out, 0xFF, (size_t)c.T * c.H * 2));
  CK(cudaDeviceSynchronize());
  return barrier(s);
}

static bool run_case(Suite &s, const Case &c, int ci) {
  const int W = s.world, me = s.rank;
  iris_moe_desc_t desc = IRIS_MOE_DESC_INIT;
  desc.mode = c.mode;
  desc.max_tokens = c.T;
  desc.hidden = c.H;
  desc.top_k = c.K;
  desc.num_experts = c.epr * W;
  desc.dispatch_type = c.dt;
  iris_moe_t *m;
  IK(iris_moe_create(s.ctx, &desc, &m));
  iris_moe_recv_t r;
  IK(iris_moe_get_recv(m, &r));
  Dev d;
  CK(cudaMalloc(&d.x, (size_t)c.T * c.H * 2));
  CK(cudaMalloc(&d.y, (size_t)r.rows * c.H * 2));
  CK(cudaMalloc(&d.out, (size_t)c.T * c.H * 2));
  CK(cudaMalloc(&d.idx, (size_t)c.T * c.K * 4));
  CK(cudaMalloc(&d.w, (size_t)c.T * c.K * 4));
  cudaStream_t s1, s2;
  cudaEvent_t ev;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  bool ok = true;
  const int fp8 = c.dt == IRIS_FLOAT8_E4M3;
  cudaGraphExec_t exec = NULL;
  for (int it = 0; it < c.iters && ok; it++) {
    const int call = it;
    std::vector<Inputs> ins; // a graph keeps its num_tokens (max_tokens here); its routing and data change
    for (int q = 0; q < W; q++) ins.push_back(make_inputs(c, W, s.seed, ci, call, q, it == 0 || c.run == RUN_GRAPH));
    if (!upload(c, ins[me], d) || !poison_all(s, c, m, d)) { ok = false; break; }
    if (me == it % W && it % 2) usleep(5000); // skew the ranks
    cudaStream_t sd = c.run == RUN_STREAMS && it % 2 ? s2 : s1, sc = c.run == RUN_STREAMS ? (sd == s1 ? s2 : s1) : sd;
    if (c.run == RUN_GRAPH) {
      if (!exec) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
        iris_status_t a = iris_moe_dispatch(m, d.x, ins[me].n, d.idx, d.w, s1);
        k_expert<<<r.num_local_experts, 256, 0, s1>>>(r.x, r.scales, r.count, r.offsets, r.expert_stride, c.H, fp8, me * c.epr, (iris_bf16_t *)d.y);
        iris_status_t b = iris_moe_combine(m, d.y, d.out, s1);
        CK(cudaStreamEndCapture(s1, &g));
        if (a != IRIS_SUCCESS || b != IRIS_SUCCESS) { fprintf(stderr, "rank %d: capture: %s\n", me, iris_error_detail()); ok = false; break; }
        CK(cudaGraphInstantiate(&exec, g, 0));
        CK(cudaGraphDestroy(g));
      }
      CK(cudaGraphLaunch(exec, s1));
    } else {
      IK(iris_moe_dispatch(m, d.x, ins[me].n, d.idx, d.w, sd));
      k_expert<<<r.num_local_experts, 256, 0, sd>>>(r.x, r.scales, r.count, r.offsets, r.expert_stride, c.H, fp8, me * c.epr, (iris_bf16_t *)d.y);
      CK(cudaEventRecord(ev, sd));
      CK(cudaStreamWaitEvent(sc, ev, 0)); // the expert kernel is ours to order
      IK(iris_moe_combine(m, d.y, d.out, sc));
    }
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    char what[160];
    snprintf(what, sizeof what, "case %d call %d (%d tokens)", ci, call, ins[me].n);
    const std::vector<Inputs> &all = ins;
    ok = check(s, c, m, all, d, what) && ok;
    const iris_status_t st = iris_moe_check(m);
    const bool want_err = c.routing == R_BAD && me == 0 && all[0].n >= 2;
    if ((st != IRIS_SUCCESS) != want_err || (want_err && st != IRIS_ERROR_INVALID_ARGUMENT)) {
      fprintf(stderr, "rank %d: %s: iris_moe_check %s (%s), want %s\n", me, what, iris_status_string(st), iris_error_detail(), want_err ? "an error" : "success");
      ok = false;
    }
    if (iris_get_async_error(s.ctx) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: fault: %s\n", me, iris_error_detail()); ok = false; }
  }
  if (exec) cudaGraphExecDestroy(exec);
  cudaFree(d.x), cudaFree(d.y), cudaFree(d.out), cudaFree(d.idx), cudaFree(d.w);
  cudaStreamDestroy(s1), cudaStreamDestroy(s2), cudaEventDestroy(ev);
  if (!barrier(s)) return false;
  IK(iris_moe_destroy(m));
  return ok;
}

// every rank alike: host-side refusals, nothing enqueued, the heap as it was
static bool bad_input(Suite &s) {
  const int W = s.world, me = s.rank;
  const size_t used = iris_heap_used(s.ctx);
  bool ok = true;
  auto expect = [&](iris_status_t got, iris_status_t want, const char *what) {
    if (got != want) { fprintf(stderr, "rank %d: %s: %s (%s), want %s\n", me, what, iris_status_string(got), iris_error_detail(), iris_status_string(want)); ok = false; }
  };
  iris_moe_desc_t d = IRIS_MOE_DESC_INIT;
  d.max_tokens = 16, d.hidden = 256, d.top_k = 2, d.num_experts = 4 * W;
  iris_moe_t *m = NULL;
  iris_moe_desc_t b = d;
  b.top_k = 0;
  expect(iris_moe_create(s.ctx, &b, &m), IRIS_ERROR_INVALID_ARGUMENT, "top_k 0");
  b = d, b.num_experts = 4 * W + 1;
  expect(iris_moe_create(s.ctx, &b, &m), IRIS_ERROR_INVALID_ARGUMENT, "num_experts not a multiple of W");
  b = d, b.dispatch_type = IRIS_FLOAT8_E4M3, b.hidden = 136;
  expect(iris_moe_create(s.ctx, &b, &m), IRIS_ERROR_INVALID_ARGUMENT, "fp8 with hidden 136");
  b = d, b.mode = (iris_moe_mode_t)7;
  expect(iris_moe_create(s.ctx, &b, &m), IRIS_ERROR_INVALID_ARGUMENT, "mode 7");
  b = d, b.combine_type = IRIS_FLOAT32;
  expect(iris_moe_create(s.ctx, &b, &m), IRIS_ERROR_INVALID_ARGUMENT, "fp32 combine");
  b = d, b.hidden = me == W - 1 ? 512 : 256;
  expect(iris_moe_create(s.ctx, &b, &m), IRIS_ERROR_MISMATCH, "one rank with another hidden");
  b = d, b.max_tokens = 1 << 20, b.hidden = 4096;
  expect(iris_moe_create(s.ctx, &b, &m), IRIS_ERROR_OUT_OF_MEMORY, "a workspace larger than the heap");
  expect(iris_moe_create(s.ctx, &d, NULL), IRIS_ERROR_INVALID_ARGUMENT, "NULL out");
  if (m) { fprintf(stderr, "rank %d: a failed create left a plan\n", me); ok = false; }
  if (iris_heap_used(s.ctx) != used) { fprintf(stderr, "rank %d: failed creates left %zu heap bytes\n", me, iris_heap_used(s.ctx) - used); ok = false; }
  IK(iris_moe_create(s.ctx, &d, &m));
  void *buf;
  CK(cudaMalloc(&buf, 1 << 20));
  int *idx = (int *)buf;
  float *w = (float *)((char *)buf + 4096);
  expect(iris_moe_combine(m, buf, buf, 0), IRIS_ERROR_INVALID_ARGUMENT, "combine before any dispatch");
  expect(iris_moe_dispatch(m, buf, 17, idx, w, 0), IRIS_ERROR_INVALID_ARGUMENT, "num_tokens > max_tokens");
  expect(iris_moe_dispatch(m, buf, -1, idx, w, 0), IRIS_ERROR_INVALID_ARGUMENT, "num_tokens -1");
  expect(iris_moe_dispatch(m, NULL, 4, idx, w, 0), IRIS_ERROR_INVALID_ARGUMENT, "NULL x");
  expect(iris_moe_dispatch(m, buf, 4, NULL, w, 0), IRIS_ERROR_INVALID_ARGUMENT, "NULL topk_idx");
  expect(iris_moe_dispatch(m, buf, 4, idx, NULL, 0), IRIS_ERROR_INVALID_ARGUMENT, "NULL topk_weights");
  expect(iris_moe_dispatch(m, (char *)buf + 2, 4, idx, w, 0), IRIS_ERROR_INVALID_ARGUMENT, "misaligned x");
  expect(iris_moe_dispatch(NULL, buf, 4, idx, w, 0), IRIS_ERROR_INVALID_ARGUMENT, "NULL plan");
  // the refused dispatches took part with no tokens (every rank alike); a real one after them
  expect(iris_moe_dispatch(m, NULL, 0, NULL, NULL, 0), IRIS_SUCCESS, "dispatch of 0 tokens");
  expect(iris_moe_combine(m, NULL, buf, 0), IRIS_ERROR_INVALID_ARGUMENT, "NULL y");
  expect(iris_moe_combine(m, (char *)buf + 8, buf, 0), IRIS_ERROR_INVALID_ARGUMENT, "misaligned y");
  CK(cudaDeviceSynchronize());
  expect(iris_moe_check(m), IRIS_ERROR_INVALID_ARGUMENT, "check after combines refused on every rank (they took part, sending no rows)");
  expect(iris_moe_combine(m, buf, NULL, 0), IRIS_SUCCESS, "combine of 0 tokens (out unused)");
  expect(iris_moe_combine(m, buf, (char *)buf + 2, 0), IRIS_SUCCESS, "combine of 0 tokens (a misaligned out, unused)");
  CK(cudaDeviceSynchronize());
  expect(iris_moe_check(m), IRIS_SUCCESS, "check after 0-token calls");
  cudaFree(buf);
  IK(iris_moe_destroy(m));
  if (iris_heap_used(s.ctx) != used) { fprintf(stderr, "rank %d: destroy left %zu heap bytes\n", me, iris_heap_used(s.ctx) - used); ok = false; }
  return ok;
}

// A call refused on one rank only still takes part there, so the ranks' calls stay paired:
// rank W-1 dispatches num_tokens > max_tokens (refused: it sends no tokens; the others'
// results are exact), then rank W-1 combines with a misaligned y (refused: its rows go out
// as NaN, so on every rank the tokens with an expert on it are NaN and the others exact,
// and every rank's iris_moe_check names rank W-1); then a call on every rank is exact. The experts are the identity (y = recv_x), top-2 with
// weights 1/4 and 1/2, x small integers: out = 3/4 x exactly.
struct Simple {
  iris_moe_t *m = NULL;
  iris_moe_recv_t r;
  void *x = NULL, *y = NULL, *out = NULL;
  int *idx = NULL;
  float *w = NULL;
  int T = 16, H = 256;
};
// nan_rank >= 0: that rank's combine sends NaN rows: a token with an expert there must come out NaN
static bool simple_call(Suite &s, Simple &p, int n, int call, int x_shift, int y_shift, int nan_rank) {
  const int me = s.rank, E = 4 * s.world, H = p.H;
  std::vector<uint16_t> hx((size_t)p.T * H), ho((size_t)p.T * H);
  std::vector<int> hi(2 * (size_t)p.T);
  std::vector<float> hw(2 * (size_t)p.T);
  for (int t = 0; t < p.T; t++) {
    for (int h = 0; h < H; h++) hx[(size_t)t * H + h] = f2bf((float)(4 * (t + 1 + me + call % 8)));
    hi[2 * t] = (t + me + call) % E, hi[2 * t + 1] = (t + me + call + 1) % E;
    hw[2 * t] = 0.25f, hw[2 * t + 1] = 0.5f;
  }
  CK(cudaMemcpy(p.x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p.idx, hi.data(), hi.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p.w, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(p.out, 0x7f, (size_t)p.T * H * 2));
  CK(cudaDeviceSynchronize());
  bool ok = true;
  const iris_status_t d = iris_moe_dispatch(p.m, (char *)p.x + x_shift, n, p.idx, p.w, 0);
  if (d != (x_shift || n > p.T ? IRIS_ERROR_INVALID_ARGUMENT : IRIS_SUCCESS)) { fprintf(stderr, "rank %d: call %d: dispatch: %s\n", me, call, iris_error_detail()); ok = false; }
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(p.y, p.r.x, (size_t)p.r.rows * H * 2, cudaMemcpyDeviceToDevice)); // the identity expert
  CK(cudaDeviceSynchronize());
  const iris_status_t c = iris_moe_combine(p.m, (char *)p.y + y_shift, p.out, 0);
  if (c != (y_shift ? IRIS_ERROR_INVALID_ARGUMENT : IRIS_SUCCESS)) { fprintf(stderr, "rank %d: call %d: combine: %s\n", me, call, iris_error_detail()); ok = false; }
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(ho.data(), p.out, ho.size() * 2, cudaMemcpyDeviceToHost));
  const int rows = x_shift || n > p.T ? 0 : n;
  for (int t = 0; t < p.T && ok; t++)
    for (int h = 0; h < H && ok; h++) {
      const int L = E / s.world;
      const bool nan = nan_rank >= 0 && t < rows && (hi[2 * t] / L == nan_rank || hi[2 * t + 1] / L == nan_rank);
      const uint16_t want = t < rows ? f2bf(0.75f * bf16f(hx[(size_t)t * H + h])) : (uint16_t)0x7f7f, got = ho[(size_t)t * H + h];
      if (nan ? !((got & 0x7f80) == 0x7f80 && (got & 0x7f)) : got != want) {
        fprintf(stderr, "rank %d: call %d: out[%d][%d] = 0x%04x, want %s0x%04x\n", me, call, t, h, got, nan ? "a NaN, not " : "", want);
        ok = false;
      }
    }
  return ok;
}
// Both kinds of error in one check's window: rank 0's dispatch names an expert out of range
// (its kernel's error record) and rank W-1's combine of the same call is refused. Rank 0's
// first check reports its own error, the second the refusal (it used to be lost); every
// other rank's first check reports the refusal, its second nothing.
static bool own_error_then_refusal(Suite &s, Simple &p, int call) {
  const int me = s.rank, last = s.world - 1, E = 4 * s.world, H = p.H, n = 6;
  std::vector<uint16_t> hx((size_t)p.T * H);
  std::vector<int> hi(2 * (size_t)p.T);
  std::vector<float> hw(2 * (size_t)p.T, 0.25f);
  for (int t = 0; t < p.T; t++) {
    for (int h = 0; h < H; h++) hx[(size_t)t * H + h] = f2bf((float)(2 * (t + me + 1)));
    hi[2 * t] = (t + me + call) % E, hi[2 * t + 1] = (t + me + call + 1) % E;
  }
  if (me == 0) hi[0] = E; // token 0, k 0: outside [-1, E): skipped, recorded
  CK(cudaMemcpy(p.x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p.idx, hi.data(), hi.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p.w, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaDeviceSynchronize());
  bool ok = true;
  if (iris_moe_dispatch(p.m, p.x, n, p.idx, p.w, 0) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: call %d: dispatch: %s\n", me, call, iris_error_detail()); ok = false; }
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(p.y, p.r.x, (size_t)p.r.rows * H * 2, cudaMemcpyDeviceToDevice));
  CK(cudaDeviceSynchronize());
  const iris_status_t c = iris_moe_combine(p.m, (char *)p.y + (me == last ? 8 : 0), p.out, 0);
  if (c != (me == last ? IRIS_ERROR_INVALID_ARGUMENT : IRIS_SUCCESS)) { fprintf(stderr, "rank %d: call %d: combine: %s\n", me, call, iris_error_detail()); ok = false; }
  CK(cudaDeviceSynchronize());
  char refused[32];
  snprintf(refused, sizeof refused, "rank %d's combine", last);
  for (int k = 0; k < 2; k++) {
    const iris_status_t st = iris_moe_check(p.m);
    const char *want = me == 0 ? (k == 0 ? "is outside [-1" : refused) : (k == 0 ? refused : NULL);
    const bool good = want ? st == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), want) : st == IRIS_SUCCESS;
    if (!good) {
      fprintf(stderr, "rank %d: call %d: check %d: %s (%s), want %s\n", me, call, k + 1, iris_status_string(st), st ? iris_error_detail() : "", want ? want : "success");
      ok = false;
    }
  }
  return ok;
}

// A Simple plan (low latency, top-2, 4 experts a rank) and its buffers; simple_free undoes it.
static bool simple_plan(Suite &s, Simple &p) {
  iris_moe_desc_t d = IRIS_MOE_DESC_INIT;
  d.max_tokens = p.T, d.hidden = p.H, d.top_k = 2, d.num_experts = 4 * s.world;
  IK(iris_moe_create(s.ctx, &d, &p.m));
  IK(iris_moe_get_recv(p.m, &p.r));
  CK(cudaMalloc(&p.x, (size_t)p.T * p.H * 2 + 64));
  CK(cudaMalloc(&p.y, (size_t)p.r.rows * p.H * 2 + 64));
  CK(cudaMalloc(&p.out, (size_t)p.T * p.H * 2));
  CK(cudaMalloc(&p.idx, 2 * (size_t)p.T * 4));
  CK(cudaMalloc(&p.w, 2 * (size_t)p.T * 4));
  return true;
}
static bool simple_free(Simple &p) {
  cudaFree(p.x), cudaFree(p.y), cudaFree(p.out), cudaFree(p.idx), cudaFree(p.w);
  IK(iris_moe_destroy(p.m));
  return true;
}

static bool one_rank_refusals(Suite &s) {
  const int W = s.world, me = s.rank, last = W - 1;
  Simple p;
  if (!simple_plan(s, p)) return false;
  bool ok = simple_call(s, p, 4, 1, 0, 0, -1); // every rank: exact
  IK(iris_moe_check(p.m));
  // rank W-1's dispatch refused (too many tokens): it takes part with none; the others exact
  ok &= simple_call(s, p, me == last ? p.T + 1 : 5, 2, 0, 0, -1);
  if (iris_moe_check(p.m) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: check after a refused dispatch on rank %d: %s\n", me, last, iris_error_detail()); ok = false; }
  // rank W-1's combine refused (misaligned y): NaN rows from it (the tokens with an expert there NaN, the others exact), the refusal named everywhere
  ok &= simple_call(s, p, 6, 3, 0, me == last ? 8 : 0, last);
  {
    const iris_status_t st = iris_moe_check(p.m);
    char rank_name[32];
    snprintf(rank_name, sizeof rank_name, "rank %d's combine", last);
    if (st != IRIS_ERROR_INVALID_ARGUMENT || !strstr(iris_error_detail(), rank_name)) {
      fprintf(stderr, "rank %d: check after rank %d's refused combine: %s (%s)\n", me, last, iris_status_string(st), iris_error_detail());
      ok = false;
    }
  }
  ok &= simple_call(s, p, 7, 4, 0, 0, -1); // every rank: exact again
  if (iris_moe_check(p.m) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: check after the calls: %s\n", me, iris_error_detail()); ok = false; }
  ok &= own_error_then_refusal(s, p, 5);
  ok &= simple_call(s, p, 7, 6, 0, 0, -1); // every rank: exact again
  if (iris_moe_check(p.m) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: check after the last call: %s\n", me, iris_error_detail()); ok = false; }
  return simple_free(p) && ok;
}

// A combine follows, on the device, a dispatch of another token count than the last one
// this host issued (two graphs of dispatches, the smaller replayed last): it writes the
// rows of the dispatch that ran, nothing past them, and iris_moe_check says so.
static bool graph_token_count(Suite &s) {
  const int me = s.rank;
  Simple p;
  if (!simple_plan(s, p)) return false; // x and y with 64 bytes of slack: unused here
  bool ok = simple_call(s, p, 16, 1, 0, 0, -1); // inputs for 16 tokens in place
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t g[2];
  cudaGraphExec_t ge[2];
  const int ns[2] = {8, 16};
  for (int i = 0; i < 2; i++) {
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    const iris_status_t r = iris_moe_dispatch(p.m, p.x, ns[i], p.idx, p.w, st);
    CK(cudaStreamEndCapture(st, &g[i]));
    IK(r);
    CK(cudaGraphInstantiate(&ge[i], g[i], 0));
  }
  CK(cudaGraphLaunch(ge[1], st)); // 16 tokens, and the host's last is 16: exact
  IK(iris_moe_combine(p.m, p.y, p.out, st));
  CK(cudaStreamSynchronize(st));
  IK(iris_moe_check(p.m));
  CK(cudaMemset(p.out, 0x7f, (size_t)p.T * p.H * 2));
  CK(cudaDeviceSynchronize());
  CK(cudaGraphLaunch(ge[0], st)); // 8 tokens, the host's last still 16
  IK(iris_moe_combine(p.m, p.y, p.out, st));
  CK(cudaStreamSynchronize(st));
  std::vector<uint16_t> ho((size_t)p.T * p.H);
  CK(cudaMemcpy(ho.data(), p.out, ho.size() * 2, cudaMemcpyDeviceToHost));
  int past = 0, written = 0;
  for (int t = 0; t < p.T; t++) (t < 8 ? written : past) += ho[(size_t)t * p.H] != 0x7f7f;
  const iris_status_t c = iris_moe_check(p.m);
  if (past || written != 8 || c != IRIS_ERROR_INVALID_ARGUMENT || !strstr(iris_error_detail(), "follows a dispatch of 8")) {
    fprintf(stderr, "rank %d: combine after an 8-token graph dispatch (host's last: 16): %d of rows 0..7 written, %d rows past them; check %s (%s)\n", me, written, past,
            iris_status_string(c), iris_error_detail());
    ok = false;
  }
  for (int i = 0; i < 2; i++) cudaGraphExecDestroy(ge[i]), cudaGraphDestroy(g[i]);
  cudaStreamDestroy(st);
  return simple_free(p) && ok;
}


// A combine with no out, which the host takes after its dispatch of 0 tokens, that follows
// on the device a graph's dispatch of 8 tokens: it writes nothing, and iris_moe_check
// reports the mismatch (before, the kernel left the token counts uncompared without an out,
// and the check said SUCCESS); the call after it is exact and checks clean.
static bool null_out_token_count(Suite &s) {
  const int me = s.rank;
  Simple p;
  if (!simple_plan(s, p)) return false;
  bool ok = simple_call(s, p, 8, 1, 0, 0, -1); // inputs for 8 tokens in place
  IK(iris_moe_check(p.m));
  cudaStream_t st;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  const iris_status_t r = iris_moe_dispatch(p.m, p.x, 8, p.idx, p.w, st);
  CK(cudaStreamEndCapture(st, &g));
  IK(r);
  CK(cudaGraphInstantiate(&ge, g, 0));
  IK(iris_moe_dispatch(p.m, NULL, 0, NULL, NULL, st)); // the host's last: 0 tokens
  IK(iris_moe_combine(p.m, p.y, NULL, st));            // no out needed
  CK(cudaStreamSynchronize(st));
  if (iris_moe_check(p.m) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: check after a 0-token dispatch and combine: %s\n", me, iris_error_detail()); ok = false; }
  CK(cudaGraphLaunch(ge, st));                                   // 8 tokens on the device, the host's last still 0
  const iris_status_t c = iris_moe_combine(p.m, p.y, NULL, st); // the host takes it
  CK(cudaStreamSynchronize(st));
  const iris_status_t k = iris_moe_check(p.m);
  const std::string detail = k == IRIS_SUCCESS ? "" : iris_error_detail();
  if (c != IRIS_SUCCESS || k != IRIS_ERROR_INVALID_ARGUMENT || detail.find("issued for 0 tokens but follows a dispatch of 8") == std::string::npos ||
      detail.find("wrote 0 rows") == std::string::npos) {
    fprintf(stderr, "rank %d: a combine with no out after an 8-token graph dispatch (host's last: 0): combine %s, check %s (%s)\n", me, iris_status_string(c),
            iris_status_string(k), detail.c_str());
    ok = false;
  }
  cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  ok &= simple_call(s, p, 7, 2, 0, 0, -1); // every rank: exact again
  if (iris_moe_check(p.m) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: check after the last call: %s\n", me, iris_error_detail()); ok = false; }
  return simple_free(p) && ok;
}

// Refused combines across the wrap of the call numbers (IRIS_TEST_HOOKS:
// iris_detail_test_moe_wrap starts a plan as if 2^32 - n dispatches and combines had run).
// Plan 1 (n = 3): combines 0xfffffffe, 0xffffffff and 0 exact, each check SUCCESS (before,
// the check after combine 0 named every rank's "refused" combine 0: the zeroed marks block
// fell inside its window), then combine 1 refused on the last rank (named, no other rank),
// combine 2 exact and clean. Plan 2 (n = 1): combine 0 itself refused on the last rank:
// named (before, a mark holding call number 0 looked like the zeroed block and was
// missed). The combine counts are read back: the calls did cross the wrap.
static bool refusals_across_wrap(Suite &s) {
  const int me = s.rank, last = s.world - 1;
  bool ok = true;
  for (int plan = 0; plan < 2; plan++) { // every rank makes every call, whatever it found
    const int n0 = plan == 0 ? 3 : 1, calls = plan == 0 ? 5 : 2, refused = plan == 0 ? 3 : 0;
    Simple p;
    iris_detail_test_moe_wrap = n0;
    const bool made = simple_plan(s, p);
    iris_detail_test_moe_wrap = 0;
    if (!made) return false;
    for (int i = 0; i < calls; i++) {
      const unsigned num = 0u - (unsigned)n0 + 1u + (unsigned)i; // this combine's call number
      const bool ref = i == refused;
      ok &= simple_call(s, p, 5 + i, 10 + i, 0, ref && me == last ? 8 : 0, ref ? last : -1);
      const iris_status_t st = iris_moe_check(p.m);
      const std::string detail = st == IRIS_SUCCESS ? "" : iris_error_detail();
      bool good = ref ? st == IRIS_ERROR_INVALID_ARGUMENT : st == IRIS_SUCCESS;
      if (ref) {
        char want[64];
        snprintf(want, sizeof want, "(call %u): rank %d's combine", num, last);
        good &= detail.find(want) != std::string::npos;
        for (int q = 0; q < last; q++) good &= detail.find("rank " + std::to_string(q) + "'s") == std::string::npos;
      }
      if (!good) {
        fprintf(stderr, "rank %d: plan started %d calls short of the wrap, combine %u%s: check %s (%s)\n", me, n0, num, ref ? " (refused on the last rank)" : "",
                iris_status_string(st), detail.c_str());
        ok = false;
      }
    }
    unsigned combs = 0;
    CK(cudaMemcpy(&combs, &p.m->dev.st->comb_epoch, sizeof combs, cudaMemcpyDeviceToHost));
    if (combs != 0u - (unsigned)n0 + (unsigned)calls) { fprintf(stderr, "rank %d: %u combines after the calls, want %u\n", me, combs, 0u - (unsigned)n0 + (unsigned)calls); ok = false; }
    if (!simple_free(p)) return false;
  }
  return ok;
}

// High throughput with max_recv_rows = 2W, below the rows sent: every rank's 16 tokens go
// to rank 0's experts (32 selections a rank). The rows past the bound are dropped alike on
// both sides: rank 0 holds exactly 2W rows (offsets stop there), each from a real
// selection of its expert; every token comes back as x times the weights of its kept
// selections (identity experts), the kept selections of all ranks add up to 2W, and every
// rank's iris_moe_check reports IRIS_ERROR_OUT_OF_MEMORY (each rank dropped some). Then a
// call that fits (one token a rank: 2W rows) is exact and checks clean.
static bool ht_overflow(Suite &s) {
  const int W = s.world, me = s.rank, T = 16, H = 256, K = 2, E = 4 * W, L = 4;
  iris_moe_desc_t d = IRIS_MOE_DESC_INIT;
  d.mode = IRIS_MOE_HIGH_THROUGHPUT, d.max_tokens = T, d.hidden = H, d.top_k = K, d.num_experts = E, d.max_recv_rows = 2 * W;
  iris_moe_t *m;
  iris_moe_recv_t r;
  IK(iris_moe_create(s.ctx, &d, &m));
  IK(iris_moe_get_recv(m, &r));
  void *x, *y, *out;
  int *idx;
  float *w;
  CK(cudaMalloc(&x, (size_t)T * H * 2));
  CK(cudaMalloc(&y, (size_t)r.rows * H * 2));
  CK(cudaMalloc(&out, (size_t)T * H * 2));
  CK(cudaMalloc(&idx, (size_t)T * K * 4));
  CK(cudaMalloc(&w, (size_t)T * K * 4));
  std::vector<uint16_t> hx((size_t)T * H), ho((size_t)T * H);
  std::vector<int> hi((size_t)T * K), cnt(L), off(L + 1), src(r.rows);
  std::vector<float> hw((size_t)T * K);
  for (int t = 0; t < T; t++) {
    for (int h = 0; h < H; h++) hx[(size_t)t * H + h] = f2bf((float)(4 * (t + 1 + me)));
    hi[(size_t)t * K] = t % L, hi[(size_t)t * K + 1] = (t + 1) % L; // rank 0's experts only
    hw[(size_t)t * K] = 0.25f, hw[(size_t)t * K + 1] = 0.5f;
  }
  CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(idx, hi.data(), hi.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(w, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
  bool ok = true;
  for (int call = 0; call < 2; call++) {
    const int n = call == 0 ? T : 1;
    CK(cudaMemset(r.src, 0xA5, (size_t)r.rows * 4));
    CK(cudaMemset(out, 0xFF, (size_t)T * H * 2));
    CK(cudaDeviceSynchronize());
    if (!barrier(s)) return false;
    IK(iris_moe_dispatch(m, x, n, idx, w, 0));
    CK(cudaMemcpyAsync(y, r.x, (size_t)r.rows * H * 2, cudaMemcpyDeviceToDevice, 0)); // the identity expert
    IK(iris_moe_combine(m, y, out, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(cnt.data(), r.count, L * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(off.data(), r.offsets, (L + 1) * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(src.data(), r.src, r.rows * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ho.data(), out, ho.size() * 2, cudaMemcpyDeviceToHost));
    const int sent = me == 0 ? W * n * K : 0, want_rows = sent < 2 * W ? sent : 2 * W;
    if (off[L] != want_rows) { fprintf(stderr, "rank %d: call %d: offsets[L] = %d, want %d\n", me, call, off[L], want_rows); ok = false; }
    for (int l = 0; l < L && ok; l++) {
      if (off[l + 1] - off[l] != cnt[l]) { fprintf(stderr, "rank %d: call %d: expert %d: count %d, offsets %d..%d\n", me, call, l, cnt[l], off[l], off[l + 1]); ok = false; }
      for (int j = off[l]; j < off[l] + cnt[l] && ok; j++) {
        const int q = IRIS_MOE_SRC_RANK(src[j]), sl = IRIS_MOE_SRC_SLOT(src[j]), t = sl / K, k = sl % K;
        if (q >= W || t >= n || (k == 0 ? t % L : (t + 1) % L) != l) { fprintf(stderr, "rank %d: call %d: row %d names source 0x%x, not a selection of expert %d\n", me, call, j, (unsigned)src[j], l); ok = false; }
      }
    }
    long long kept = 0; // quarter-weights kept: 1 (k = 0), 2 (k = 1)
    for (int t = 0; t < T && ok; t++) {
      const float xv = bf16f(hx[(size_t)t * H]);
      int got = -1;
      for (int q4 = 0; q4 < 4; q4++)
        if (t < n && ho[(size_t)t * H] == f2bf(0.25f * (float)q4 * xv)) got = q4;
      if (t >= n) got = ho[(size_t)t * H] == 0xFFFF ? 0 : -1;
      for (int h = 1; h < H && got >= 0; h++)
        if (ho[(size_t)t * H + h] != ho[(size_t)t * H]) got = -1;
      if (got < 0 || (call == 1 && t < n && got != 3)) { fprintf(stderr, "rank %d: call %d: out[%d] = 0x%04x... is not x times kept weights\n", me, call, t, ho[(size_t)t * H]); ok = false; }
      kept += (got & 1) + ((got >> 1) & 1);
    }
    long long all[IRIS_MAX_RANKS], total = 0;
    IK(iris_allgather_host(s.ctx, &kept, all, sizeof kept));
    for (int q = 0; q < W; q++) total += all[q];
    const long long want_kept = W * n * K < 2 * W ? W * n * K : 2 * W;
    if (ok && total != want_kept) { fprintf(stderr, "rank %d: call %d: %lld selections summed over the ranks, want %lld\n", me, call, total, want_kept); ok = false; }
    const iris_status_t c = iris_moe_check(m), want = call == 0 ? IRIS_ERROR_OUT_OF_MEMORY : IRIS_SUCCESS;
    if (c != want) { fprintf(stderr, "rank %d: call %d: iris_moe_check %s (%s), want %s\n", me, call, iris_status_string(c), iris_error_detail(), iris_status_string(want)); ok = false; }
  }
  if (iris_get_async_error(s.ctx) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: fault: %s\n", me, iris_error_detail()); ok = false; }
  cudaFree(x), cudaFree(y), cudaFree(out), cudaFree(idx), cudaFree(w);
  if (!barrier(s)) return false;
  IK(iris_moe_destroy(m));
  return ok;
}

// ---- ranks as threads of one process sharing GPU 0. Their kernels run at once, and every
// CTA of a dispatch or combine waits for the peers' kernels: each rank's grid must leave
// room for the others' (iris_moe_grid caps it to 1 / W of the SMs). Before, the low-latency
// default took every SM and every call waited out its bound. The device is synchronised
// only where no peer's launched kernel waits for one this thread has yet to launch (after
// the combine, and in poison_all before the barrier that opens each call).
static int shared_rank(iris_t *ctx, int rank, int world) {
  Suite s = shared_gpu_suite(ctx, rank, world, "moe");
  const iris_moe_mode_t LL = IRIS_MOE_LOW_LATENCY, HT = IRIS_MOE_HIGH_THROUGHPUT;
  const iris_dtype_t BF = IRIS_BFLOAT16, F8 = IRIS_FLOAT8_E4M3;
  const Case cases[] = {
      {LL, BF, 64, 2048, 8, 8, R_RANDOM, RUN_EAGER, 3}, // every SM by default on a GPU of its own
      {LL, F8, 32, 7168, 8, 8, R_RANDOM, RUN_STREAMS, 3},
      {HT, BF, 128, 2048, 8, 8, R_RANDOM, RUN_EAGER, 2},
  };
  for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
    const Case &c = cases[ci];
    char name[200];
    snprintf(name, sizeof name, "ranks sharing one GPU: %s %s dispatch and combine, max_tokens %d, hidden %d, top-%d, %s, %d calls, a grid within 1 / W of the SMs",
             c.mode == LL ? "low-latency" : "high-throughput", c.dt == F8 ? "fp8" : "bf16", c.T, c.H, c.K, run_name[c.run], c.iters);
    report(s, name, run_case(s, c, ci));
  }
  return s.failed;
}
static int mode_threads(int n) {
  // a kernel loaded at its first launch starts only when every running kernel has ended
  // (docs/shared_gpu.md, "Loading kernels"): load them all before a rank's kernel waits
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  return run_ranks_on_gpu0("moe", n, (size_t)512 << 20, shared_rank);
}

// ---- moe_test gaveup N: every rank but the last calls dispatch and combine at once; the
// last sleeps past the wait bound first (IRIS_WAIT_TIMEOUT_MS, 300 unless set). The others'
// waits for its count vector give up (their contexts' fault: IRIS_ERROR_TIMEOUT), yet they
// release their flags, so the last rank's calls complete without waiting, with none of
// their rows. Its iris_moe_check must then say IRIS_ERROR_TIMEOUT naming rank 0 ("gave
// up"), twice (every check from then on), with its own context clean; before, the ranks
// that gave up released their flags unmarked and its check said SUCCESS. The others: the
// check and the async error both IRIS_ERROR_TIMEOUT. One line per rank (the contexts that
// gave up cannot meet the others for a collective verdict), then the launcher's.
static int *g_late_done; // MAP_SHARED before the fork: the last rank is done with the peers' heaps
static double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static bool gaveup_rank(Suite &s, double bound, std::string &what) {
  const int me = s.rank, last = s.world - 1;
  Simple p;
  if (!simple_plan(s, p)) return false;
  const bool first = simple_call(s, p, 6, 1, 0, 0, -1) && iris_moe_check(p.m) == IRIS_SUCCESS; // the plan works
  if (!report(s, "gave up: a first call exact on every rank", first) || !barrier(s)) return false;
  if (me == last) usleep((useconds_t)((3 * bound + 1) * 1e6));
  const double t0 = now_s();
  const iris_status_t d = iris_moe_dispatch(p.m, p.x, 6, p.idx, p.w, 0); // the first call's inputs
  cudaMemcpyAsync(p.y, p.r.x, (size_t)p.r.rows * p.H * 2, cudaMemcpyDeviceToDevice, 0);  // the identity expert
  const iris_status_t c = iris_moe_combine(p.m, p.y, p.out, 0);                          // enqueued before any wait gave up
  cudaDeviceSynchronize();
  const double took = now_s() - t0;
  const iris_status_t k = iris_moe_check(p.m);
  const std::string kd = k == IRIS_SUCCESS ? "" : iris_error_detail();
  const iris_status_t k2 = iris_moe_check(p.m);
  const iris_status_t a = iris_get_async_error(s.ctx);
  const std::string ad = a == IRIS_SUCCESS ? "" : iris_error_detail();
  bool ok = d == IRIS_SUCCESS && c == IRIS_SUCCESS;
  if (me == last) {
    ok &= k == IRIS_ERROR_TIMEOUT && kd.find("rank 0 gave up") != std::string::npos && k2 == IRIS_ERROR_TIMEOUT && a == IRIS_SUCCESS && took < bound;
    __atomic_store_n(g_late_done, 1, __ATOMIC_RELEASE);
  } else {
    ok &= k == IRIS_ERROR_TIMEOUT && a == IRIS_ERROR_TIMEOUT;
    for (double t = now_s(); !__atomic_load_n(g_late_done, __ATOMIC_ACQUIRE) && now_s() < t + 6 * bound + 60;) usleep(10000);
  }
  char buf[1600];
  snprintf(buf, sizeof buf, "dispatch %s, combine %s, %.2f s; check %s (%s), again %s; async error %s (%s)", iris_status_string(d), iris_status_string(c), took,
           iris_status_string(k), kd.c_str(), iris_status_string(k2), iris_status_string(a), ad.c_str());
  what = buf;
  return simple_free(p) && ok;
}
static int mode_gaveup(int n) {
  setenv("IRIS_WAIT_TIMEOUT_MS", "300", 0);
  const double bound = atof(getenv("IRIS_WAIT_TIMEOUT_MS")) * 1e-3;
  g_late_done = (int *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_late_done == MAP_FAILED) { printf("FAIL: [moe gaveup w=%d] mmap\n", n); return 1; }
  int rank;
  iris_launch_t L;
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("FAIL: [moe gaveup w=%d] launch: %s\n", n, iris_error_detail()); return 1; }
  if (rank < 0) {
    const iris_status_t st = iris_launch_wait(&L, 900000);
    printf("%s: [moe gaveup w=%d] every rank exits cleanly%s%s\n", st == IRIS_SUCCESS ? "PASS" : "FAIL", n, st == IRIS_SUCCESS ? "" : ": ", st == IRIS_SUCCESS ? "" : iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  Suite s = {};
  s.rank = rank;
  s.world = n;
  s.tag = "moe gaveup w=" + std::to_string(n);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)512 << 20;
  if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS) {
    fprintf(stderr, "rank %d: init: %s\n", rank, iris_error_detail());
    return 1;
  }
  std::string what;
  const bool ok = gaveup_rank(s, bound, what);
  printf("%s: [%s rank %d] %s (bound %.1f s): %s\n", ok ? "PASS" : "FAIL", s.tag.c_str(), rank,
         rank == n - 1 ? "the rank that came late: its check says a peer gave up (IRIS_ERROR_TIMEOUT), its context clean"
                       : "a rank whose wait gave up: IRIS_ERROR_TIMEOUT from its check and its context",
         bound, what.c_str());
  if (rank == n - 1) iris_abort(s.ctx); // its peers cannot meet it in iris_finalize's barrier
  iris_finalize(s.ctx);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && !strcmp(argv[1], "threads")) return mode_threads(argc > 2 ? atoi(argv[2]) : 2);
  if (argc > 1 && !strcmp(argv[1], "gaveup")) return mode_gaveup(argc > 2 ? atoi(argv[2]) : 2);
  int n = argc > 1 ? atoi(argv[1]) : 2, rank;
  iris_launch_t L;
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("FAIL: [moe w=%d] launch: %s\n", n, iris_error_detail()); return 1; }
  if (rank < 0) {
    iris_status_t st = iris_launch_wait(&L, 900000);
    printf("%s: [moe w=%d] every rank exits cleanly%s%s\n", st == IRIS_SUCCESS ? "PASS" : "FAIL", n, st == IRIS_SUCCESS ? "" : ": ", st == IRIS_SUCCESS ? "" : iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  Suite s = {};
  s.rank = rank;
  s.world = n;
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  s.tag = "moe w=" + std::to_string(n) + (gpus < n ? ", shared GPU" : "");
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)512 << 20;
  if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS) {
    fprintf(stderr, "rank %d: init: %s\n", rank, iris_error_detail());
    return 1;
  }
  uint64_t mine = mix((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)), all[IRIS_MAX_RANKS];
  iris_allgather_host(s.ctx, &mine, all, sizeof mine);
  s.seed = all[0];
  if (rank == 0) printf("# [%s] seed %llu\n", s.tag.c_str(), (unsigned long long)s.seed);
  const iris_moe_mode_t LL = IRIS_MOE_LOW_LATENCY, HT = IRIS_MOE_HIGH_THROUGHPUT;
  const iris_dtype_t BF = IRIS_BFLOAT16, F8 = IRIS_FLOAT8_E4M3;
  const Case cases[] = {
      {LL, BF, 64, 2048, 8, 8, R_RANDOM, RUN_EAGER, 5},   {LL, F8, 32, 7168, 8, 8, R_RANDOM, RUN_EAGER, 4},
      {LL, BF, 48, 4096, 2, 4, R_ONE_EXPERT, RUN_EAGER, 3}, {LL, F8, 40, 2048, 8, 8, R_ONE_RANK, RUN_EAGER, 3},
      {LL, BF, 24, 2048, 16, 8, R_RANDOM, RUN_EAGER, 3}, {LL, BF, 64, 4096, 1, 4, R_RANDOM, RUN_EAGER, 3},
      {LL, F8, 16, 7168, 2, 4, R_RANDOM, RUN_EAGER, 3},   {LL, F8, 32, 2048, 8, 8, R_RANDOM, RUN_GRAPH, 4},
      {LL, BF, 32, 2048, 4, 4, R_RANDOM, RUN_STREAMS, 4}, {LL, BF, 16, 2048, 4, 4, R_BAD, RUN_EAGER, 3},
      {HT, BF, 256, 2048, 8, 8, R_RANDOM, RUN_EAGER, 3},  {HT, F8, 128, 7168, 8, 8, R_RANDOM, RUN_EAGER, 3},
      {HT, F8, 96, 4096, 4, 4, R_ONE_RANK, RUN_EAGER, 3},  {HT, BF, 64, 2048, 16, 8, R_ONE_EXPERT, RUN_EAGER, 2},
      {HT, BF, 128, 2048, 8, 8, R_RANDOM, RUN_GRAPH, 3},  {HT, F8, 64, 4096, 2, 4, R_RANDOM, RUN_STREAMS, 3},
      // hidden sizes that end inside a warp's slice (bf16 136: 17 lanes of 8 on NVIDIA; fp8
      // 640: a second 512-channel slice of one 128-channel group), 3 experts a rank
      {LL, BF, 16, 136, 3, 3, R_RANDOM, RUN_EAGER, 2},   {HT, F8, 24, 640, 3, 3, R_RANDOM, RUN_EAGER, 2},
  };
  const int nc = (int)(sizeof cases / sizeof cases[0]);
  for (int ci = 0; ci < nc; ci++) {
    const Case &c = cases[ci];
    char name[200];
    snprintf(name, sizeof name, "%s %s dispatch, %s combine: max_tokens %d, hidden %d, top-%d, %d experts, %s routing, %s, %d calls",
             c.mode == LL ? "low-latency" : "high-throughput", c.dt == F8 ? "fp8" : "bf16", "bf16", c.T, c.H, c.K, c.epr * n, routing_name[c.routing], run_name[c.run],
             c.iters);
    report(s, name, run_case(s, c, ci));
  }
  report(s, "bad input: create refusals (the heap as it was), call refusals that still take part, the heap as it was after destroy", bad_input(s));
  {
    // host memory short for the plan on the last rank only (IRIS_TEST_HOOKS; ranks as
    // processes here, one hook each): every rank still reaches the agreement
    iris_moe_desc_t h = IRIS_MOE_DESC_INIT;
    h.max_tokens = 16, h.hidden = 256, h.top_k = 2, h.num_experts = 4 * n;
    report(s, "create with host memory short for the plan on the last rank only: IRIS_ERROR_OUT_OF_MEMORY there, IRIS_ERROR_MISMATCH naming it elsewhere, within 10 s, the heap as it was; the next create succeeds",
           plan_host_memory_short<iris_moe_t>(s, [&](iris_moe_t **q) { return iris_moe_create(s.ctx, &h, q); }, iris_moe_destroy));
  }
  report(s, "a dispatch, then a combine, refused on the last rank only: the calls stay paired, the others exact, the refusal named (after this rank's own error, at the next check), the next call exact",
         one_rank_refusals(s));
  report(s, "a combine after a graph's dispatch of fewer tokens than the host's last: the rows of the dispatch that ran, none past them, reported", graph_token_count(s));
  report(s, "high throughput past max_recv_rows: the rows past it dropped alike on both sides, the tokens summed over the kept ones, reported on every rank",
         ht_overflow(s));
  report(s, "a combine with no out (the host's dispatch had 0 tokens) after a graph's dispatch of 8: nothing written, the token counts' mismatch reported, the next call exact",
         null_out_token_count(s));
  report(s, "refused combines across the call numbers' wrap (test hook): no refusal seen where there was none (combine 0), a refusal of combine 1 and of combine 0 named, only the refusing rank",
         refusals_across_wrap(s));
  int rc = s.failed ? 1 : 0;
  if (iris_finalize(s.ctx) != IRIS_SUCCESS) rc = 1;
  return rc;
}
