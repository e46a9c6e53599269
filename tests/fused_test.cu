// iris_all_reduce_rmsnorm tests: residual += all_reduce(x); out = rmsnorm(residual) * w
// (+ fp8 per tensor / per token), bf16 and fp16, every path (the one-shot and two-shot
// fused kernels, the bandwidth kernel in its one-hop and two-hop forms, the separate
// all-reduce + norm kernel), odd hidden sizes, 1 token, in place (out = x), x on and off
// the heap, rank skew, graphs replayed many times, a mismatch (ranks with different
// hidden) seen on every rank with nothing written, bad input, and the building block
// iris_add_rmsnorm_block alone at block sizes 32-1024.
// Each result is checked three ways: bit for bit against a host emulation of the
// documented arithmetic (fp32 sums in rank order, the fixed tree of the sum of squares),
// against a float64 reference within one rounding of the type, and the same bits on
// every rank (a hash of every output, exchanged). Outputs are poisoned before each call.
//   fused_test N          N processes (iris_launch_local), one per GPU
//   fused_test threads N  N ranks as threads of one process, all on GPU 0 (iris_init_local
//                         with the device listed N times): every path where one rank's grid
//                         could fill the GPU, whose CTAs wait for the peers' kernels
#define IRIS_IMPLEMENTATION
#include "../iris_collectives.h"
#include "test_util.h"

#include <cuda_fp16.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include <vector>

typedef unsigned short u16;
static const char *tname(int t) { return t == IRIS_BFLOAT16 ? "bf16" : "fp16"; }
static const char *qname(int q) { return q == IRIS_QUANT_NONE ? "no fp8" : q == IRIS_QUANT_FP8_PER_TENSOR ? "fp8/tensor" : "fp8/token"; }

// ---- host arithmetic of the two types
static float up(int t, u16 b) {
  if (t == IRIS_BFLOAT16) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
  return __half2float(__ushort_as_half(b));
}
static u16 down(int t, float f) {
  if (t == IRIS_BFLOAT16) { unsigned u; memcpy(&u, &f, 4); return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }
  return __half_as_ushort(__float2half_rn(f));
}
// inputs: 8 significant bits, 2^-3 .. 2^3 (exact in both types; fp32 sums of them exact)
static u16 value(int t, uint64_t h) {
  const int64_t m = (int64_t)(h % 255) - 127;
  const int e = (int)((h >> 20) % 7) - 3;
  return down(t, ldexpf((float)m / 64.f, e));
}
static uint64_t hkey(uint64_t seed, int what, int r, int call, size_t i) { return key(seed, (uint64_t)what, (uint64_t)r, (uint64_t)call, i); }

// the contiguous pairwise tree of the sum of squares (internal/coll/rmsnorm.h)
static float tree(std::vector<float> v) { // v.size() a power of two
  for (size_t w = 1; w < v.size(); w *= 2)
    for (size_t j = 0; j + w < v.size(); j += 2 * w) v[j] = v[j] + v[j + w];
  return v[0];
}
static float row_ss(const u16 *r, int t, size_t hidden) {
  const size_t lines = (hidden + 3) / 4, chunks = (lines + 31) / 32;
  size_t p2 = 1;
  while (p2 < chunks) p2 *= 2;
  std::vector<float> cs(p2, 0.f);
  for (size_t c = 0; c < chunks; c++) {
    std::vector<float> q(32, 0.f);
    for (size_t l = 0; l < 32; l++) {
      const size_t line = c * 32 + l;
      if (line >= lines) continue;
      float f[4];
      for (int e = 0; e < 4; e++) f[e] = line * 4 + e < hidden ? up(t, r[line * 4 + e]) : 0.f;
      q[l] = fmaf(f[3], f[3], fmaf(f[2], f[2], fmaf(f[1], f[1], f[0] * f[0])));
    }
    cs[c] = tree(q);
  }
  return tree(cs);
}

struct Case {
  int type, quant;
  size_t tokens, hidden;
  iris_rmsnorm_algo_t algo;
  bool inplace, heap_x;
};
struct Host { // one call's inputs and expected outputs (this rank's view)
  std::vector<u16> x, res, w, out;          // res: before (in) / after (expected)
  std::vector<unsigned char> q8;
  std::vector<float> scales;                // per token: expected; per tensor: the input
  double worst = 0;                         // float64 reference: largest error in units of the type's rounding
};
// This rank's x, the shared residual and weight; the expected outputs (host emulation)
// and the float64 reference's worst error of the emulation (a check of the arithmetic).
static void make_case(const Suite &s, const Case &c, int call, Host &H) {
  const size_t n = c.tokens * c.hidden;
  const int W = s.world, t = c.type;
  H.x.resize(n); H.res.resize(n); H.w.resize(c.hidden); H.out.assign(n, 0);
  H.q8.assign(c.quant ? n : 0, 0);
  H.scales.assign(c.quant == IRIS_QUANT_FP8_PER_TOKEN ? c.tokens : 1, 0.f);
  for (size_t i = 0; i < n; i++) H.x[i] = value(t, hkey(s.seed, 1, s.rank, call, i));
  for (size_t i = 0; i < n; i++) H.res[i] = value(t, hkey(s.seed, 2, 0, call, i));
  for (size_t i = 0; i < c.hidden; i++) H.w[i] = value(t, hkey(s.seed, 3, 0, call, i));
  if (c.quant == IRIS_QUANT_FP8_PER_TENSOR) H.scales[0] = 0.03125f + (float)(call % 5) * 0.01f;
  const float eps = 1e-5f;
  for (size_t tk = 0; tk < c.tokens; tk++) {
    u16 *r = &H.res[tk * c.hidden];
    for (size_t h = 0; h < c.hidden; h++) {
      const size_t i = tk * c.hidden + h;
      float acc = 0.f;
      double acc64 = 0;
      for (int q = 0; q < W; q++) {
        const float v = up(t, value(t, hkey(s.seed, 1, q, call, i)));
        acc = q == 0 ? v : acc + v;
        acc64 += v;
      }
      if ((double)acc != acc64) H.worst = 1e9; // the inputs keep fp32 sums exact
      r[h] = down(t, up(t, down(t, acc)) + up(t, r[h]));
    }
    const float ss = row_ss(r, t, c.hidden), inv = 1.f / sqrtf(ss / (float)c.hidden + eps);
    double ss64 = 0;
    for (size_t h = 0; h < c.hidden; h++) ss64 += (double)up(t, r[h]) * up(t, r[h]);
    const double inv64 = 1.0 / sqrt(ss64 / (double)c.hidden + eps), ulp = t == IRIS_BFLOAT16 ? 1.0 / 128 : 1.0 / 1024; // the spacing relative to the value, at most
    float amax = 0.f;
    for (size_t h = 0; h < c.hidden; h++) {
      const u16 y = down(t, (up(t, r[h]) * inv) * up(t, H.w[h]));
      H.out[tk * c.hidden + h] = y;
      amax = fmaxf(amax, fabsf(up(t, y)));
      const double ref = up(t, r[h]) * inv64 * up(t, H.w[h]), err = fabs(up(t, y) - ref) / (fabs(ref) * ulp + 1e-30);
      if (fabs(ref) > (t == IRIS_FLOAT16 ? 1.0 / 8192 : 1e-30) && err > H.worst) H.worst = err; // fp16 subnormals: the emulation checks them
    }
    if (c.quant == IRIS_QUANT_NONE) continue;
    float inv_scale;
    if (c.quant == IRIS_QUANT_FP8_PER_TENSOR) inv_scale = 1.f / H.scales[0];
    else {
      const float sc = fmaxf(amax / 448.f, 1.f / (448.f * 512.f));
      H.scales[tk] = sc;
      inv_scale = 1.f / sc;
    }
    for (size_t h = 0; h < c.hidden; h++) H.q8[tk * c.hidden + h] = iris_float_to_fp8_e4m3(up(t, H.out[tk * c.hidden + h]) * inv_scale);
  }
}

struct Dev { // device buffers, large enough for every case
  char *xh, *xd, *res, *w, *out;
  unsigned char *q8;
  float *scales;
  size_t cap; // elements
};
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}
// every rank's hash of its outputs is the same
static bool same_everywhere(Suite &s, uint64_t h) {
  uint64_t all[IRIS_MAX_RANKS];
  if (iris_allgather_host(s.ctx, &h, all, sizeof h) != IRIS_SUCCESS) return false;
  for (int r = 0; r < s.world; r++)
    if (all[r] != h) return false;
  return true;
}

static iris_status_t call(const Suite &s, const Case &c, Dev &D, void *x, void *out, cudaStream_t st, float eps = 1e-5f) {
  iris_rmsnorm_opts_t o = IRIS_RMSNORM_OPTS_INIT;
  o.quant = (iris_quant_t)c.quant;
  o.out_fp8 = c.quant ? D.q8 : NULL;
  o.scale = c.quant ? D.scales : NULL;
  o.algo = c.algo;
  (void)s;
  return iris_all_reduce_rmsnorm_ex(s.ctx, x, D.res, D.w, out, c.tokens, c.hidden, eps, (iris_dtype_t)c.type, st, &o);
}

// One call and its checks; returns this rank's verdict (and the outputs' hash in *hash).
static bool one(Suite &s, Dev &D, const Case &c, int call_no, uint64_t *hash) {
  Host H;
  make_case(s, c, call_no, H);
  const size_t n = c.tokens * c.hidden, es = 2;
  char *x = c.heap_x ? D.xh : D.xd;
  char *out = c.inplace ? x : D.out;
  if (H.worst > 1.0) { fprintf(stderr, "rank %d: the host emulation is off the float64 reference by %.2f roundings\n", s.rank, H.worst); return false; }
  // on s.stream (ranks as threads sharing a GPU: never a device-wide synchronisation while
  // a peer's kernel may wait for this rank's next call)
  std::vector<u16> r0(n); // H.res holds the expected residual: upload the input
  for (size_t i = 0; i < n; i++) r0[i] = value(c.type, hkey(s.seed, 2, 0, call_no, i));
  cudaMemcpyAsync(x, H.x.data(), n * es, cudaMemcpyHostToDevice, s.stream);
  cudaMemcpyAsync(D.res, r0.data(), n * es, cudaMemcpyHostToDevice, s.stream);
  cudaMemcpyAsync(D.w, H.w.data(), c.hidden * es, cudaMemcpyHostToDevice, s.stream);
  if (!c.inplace) cudaMemsetAsync(D.out, 0xA5, n * es, s.stream);
  cudaMemsetAsync(D.q8, 0xA5, n, s.stream);
  cudaMemsetAsync(D.scales, 0xA5, c.tokens * sizeof(float), s.stream);
  if (c.quant == IRIS_QUANT_FP8_PER_TENSOR) cudaMemcpyAsync(D.scales, H.scales.data(), sizeof(float), cudaMemcpyHostToDevice, s.stream);
  if ((s.stream ? cudaStreamSynchronize(s.stream) : cudaDeviceSynchronize()) != cudaSuccess) return false;
  if (s.rank == call_no % s.world && call_no % 3 == 0) usleep(20000); // skew
  iris_status_t st = call(s, c, D, x, out, s.stream);
  if (st != IRIS_SUCCESS) { fprintf(stderr, "rank %d: call: %s\n", s.rank, iris_error_detail()); return false; }
  if (s.stream && cudaStreamSynchronize(s.stream) != cudaSuccess) return false; // then the check's device synchronisation waits only for this call's kernels
  if ((st = iris_collectives_check(s.ctx)) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: check: %s\n", s.rank, iris_error_detail()); return false; }
  std::vector<u16> gr(n), go(n);
  std::vector<unsigned char> gq(c.quant ? n : 0);
  std::vector<float> gs(H.scales.size());
  cudaMemcpyAsync(gr.data(), D.res, n * es, cudaMemcpyDeviceToHost, s.stream);
  cudaMemcpyAsync(go.data(), out, n * es, cudaMemcpyDeviceToHost, s.stream);
  if (c.quant) cudaMemcpyAsync(gq.data(), D.q8, n, cudaMemcpyDeviceToHost, s.stream);
  cudaMemcpyAsync(gs.data(), D.scales, gs.size() * sizeof(float), cudaMemcpyDeviceToHost, s.stream);
  if (cudaStreamSynchronize(s.stream) != cudaSuccess) return false;
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    if (gr[i] != H.res[i]) { fprintf(stderr, "rank %d: residual[%zu] = %04x, want %04x\n", s.rank, i, gr[i], H.res[i]); ok = false; }
    else if (go[i] != H.out[i]) { fprintf(stderr, "rank %d: out[%zu] = %04x (%g), want %04x (%g)\n", s.rank, i, go[i], up(c.type, go[i]), H.out[i], up(c.type, H.out[i])); ok = false; }
    else if (c.quant && gq[i] != H.q8[i]) { fprintf(stderr, "rank %d: out_fp8[%zu] = %02x, want %02x\n", s.rank, i, gq[i], H.q8[i]); ok = false; }
  }
  if (ok && c.quant == IRIS_QUANT_FP8_PER_TOKEN)
    for (size_t k = 0; k < c.tokens && ok; k++)
      if (!same(gs[k], H.scales[k])) { fprintf(stderr, "rank %d: scale[%zu] = %g, want %g\n", s.rank, k, gs[k], H.scales[k]); ok = false; }
  if (!ok)
    fprintf(stderr, "rank %d: case %s %s %zu x %zu algo %d inplace %d heap_x %d (call %d)\n", s.rank, tname(c.type), qname(c.quant), c.tokens, c.hidden, (int)c.algo,
            (int)c.inplace, (int)c.heap_x, call_no);
  uint64_t h = fnv(fnv(1469598103934665603ULL, gr.data(), n * es), go.data(), n * es);
  if (c.quant) h = fnv(fnv(h, gq.data(), n), gs.data(), gs.size() * sizeof(float));
  *hash = h;
  return ok;
}

static bool run_cases(Suite &s, Dev &D, const std::vector<Case> &cases, int &call_no, const char *what) {
  bool ok = true, same_bits = true;
  for (const Case &c : cases) {
    uint64_t h = 0;
    bool mine = one(s, D, c, call_no++, &h);
    int all_ok[IRIS_MAX_RANKS], m = mine;
    iris_allgather_host(s.ctx, &m, all_ok, sizeof m);
    for (int r = 0; r < s.world; r++) mine = mine && all_ok[r];
    ok &= mine;
    same_bits &= same_everywhere(s, h);
    if (!mine) break;
  }
  char name[256];
  snprintf(name, sizeof name, "%s: bit for bit against the host emulation, within one rounding of float64, outputs poisoned", what);
  report(s, name, ok);
  snprintf(name, sizeof name, "%s: the same bits on every rank", what);
  return report(s, name, same_bits && ok);
}

static bool test_values(Suite &s, Dev &D) {
  int call_no = 1;
  const size_t shapes[][2] = {{1, 1024}, {1, 8192}, {1, 16384}, {1, 1000}, {1, 4100}, {3, 1001}, {7, 4100}, {8, 8192}, {32, 8192}, {64, 4096}, {5, 33}, {2, 32768}};
  std::vector<Case> cases;
  int k = 0;
  for (int t : {IRIS_BFLOAT16, IRIS_FLOAT16})
    for (auto &sh : shapes) {
      Case c = {t, k % 3, sh[0], sh[1], IRIS_RMSNORM_AUTO, k % 4 == 1, k % 2 == 0};
      cases.push_back(c);
      k++;
    }
  run_cases(s, D, cases, call_no, "fused path (auto): 1-64 tokens, hidden 33-32768 (odd ones), bf16/fp16, fp8 per tensor/token, in place, x on/off heap, skew");
  cases.clear();
  k = 0;
  for (int t : {IRIS_BFLOAT16, IRIS_FLOAT16})
    for (auto &sh : shapes) {
      Case c = {t, (k + 1) % 3, sh[0], sh[1], IRIS_RMSNORM_SEPARATE, k % 4 == 2, k % 2 == 1};
      cases.push_back(c);
      k++;
    }
  run_cases(s, D, cases, call_no, "separate path (forced): the same shapes, the same bits as the fused path's arithmetic");
  cases.clear();
  const size_t two[][2] = {{1, 8192}, {3, 1001}, {4, 4100}, {13, 1001}, {16, 8192}, {64, 8192}, {100, 4100}, {128, 4096}, {2, 32768}, {5, 33}};
  k = 0;
  for (int t : {IRIS_BFLOAT16, IRIS_FLOAT16})
    for (auto &sh : two) {
      Case c = {t, (k + 2) % 3, sh[0], sh[1], IRIS_RMSNORM_TWO_SHOT, k % 3 == 0, k % 2 == 1};
      cases.push_back(c);
      k++;
    }
  if (s.world >= 3) // 80 x 8200: one CTA per row, 8 lines a thread, more than it holds in shared memory (IRIS_RMSNORM_HELD); its rows fit the slots from 3 ranks
    for (int t : {IRIS_BFLOAT16, IRIS_FLOAT16}) {
      Case c = {t, t == IRIS_BFLOAT16 ? 1 : 2, 80, 8200, IRIS_RMSNORM_TWO_SHOT, t == IRIS_FLOAT16, false};
      cases.push_back(c);
    }
  run_cases(s, D, cases, call_no, "two-shot fused path (forced): 1-128 tokens (fewer rows than ranks too), odd hidden, fp8, in place, x on/off heap");
  cases.clear();
  const size_t bw[][2] = {{1, 8192}, {3, 1001}, {4, 4100}, {13, 1001}, {16, 8192}, {64, 8192}, {100, 4100}, {128, 4096}, {2, 32768}, {5, 33}, {300, 8192}, {1000, 4100}};
  k = 0;
  for (int t : {IRIS_BFLOAT16, IRIS_FLOAT16})
    for (auto &sh : bw) {
      Case c = {t, k % 3, sh[0], sh[1], IRIS_RMSNORM_BANDWIDTH, k % 4 == 3, k % 2 == 0};
      cases.push_back(c);
      k++;
    }
  run_cases(s, D, cases, call_no, "bandwidth path (forced): 1-1000 tokens (fewer rows than ranks too, more rows than CTAs), odd hidden, fp8, in place, x on/off heap");
  cases.clear();
  const size_t big[][2] = {{128, 8192}, {512, 4096}, {512, 8192}, {513, 1024}, {600, 2048}, {1000, 4100}, {2048, 1000}, {1100, 8192}};
  k = 0;
  for (auto &sh : big) {
    Case c = {k % 2 ? IRIS_FLOAT16 : IRIS_BFLOAT16, k % 3, sh[0], sh[1], IRIS_RMSNORM_AUTO, k % 3 == 1, k % 2 == 0};
    cases.push_back(c);
    k++;
  }
  run_cases(s, D, cases, call_no, "large (auto: the bandwidth path, the separate one past the scratch: 1100 x 8192): 128-2048 tokens");
  cases.clear();
  // x on the heap on even ranks, off it on odd ones: the separate path's all-reduce reads x
  // where it lies, and its placement is no part of the call (before, the ranks' signatures
  // differed: a mismatch at every size, fatal where the call took several launches)
  const size_t placed[][2] = {{8, 8192}, {64, 4100}, {600, 2048}, {1100, 8192}};
  k = 0;
  for (auto &sh : placed) {
    Case c = {k % 2 ? IRIS_FLOAT16 : IRIS_BFLOAT16, k % 3, sh[0], sh[1], k == 3 ? IRIS_RMSNORM_AUTO : IRIS_RMSNORM_SEPARATE, k == 1, s.rank % 2 == 0};
    cases.push_back(c);
    k++;
  }
  run_cases(s, D, cases, call_no, "separate path with x on the heap on even ranks, off it on odd ones (8-1100 tokens: the one-shot, two-shot and bandwidth all-reduce)");
  cases.clear();
  for (int i = 0; i < 200 / (getenv("IRIS_TEST_QUICK") ? 10 : 1); i++) { // back to back, every epoch and parity reused
    const iris_rmsnorm_algo_t a = i % 6 < 2 ? IRIS_RMSNORM_FUSED : i % 6 < 4 ? IRIS_RMSNORM_TWO_SHOT : IRIS_RMSNORM_BANDWIDTH;
    Case c = {i % 2 ? IRIS_FLOAT16 : IRIS_BFLOAT16, i % 3, (size_t)1 + i % 9, (size_t)1024 + 4 * (i % 5), a, false, i % 2 == 0};
    cases.push_back(c);
  }
  return run_cases(s, D, cases, call_no, "200 fused calls back to back (one-shot, two-shot and bandwidth in turn, in pairs, 1-9 tokens, mixed types and fp8)");
}

// a graph of fused and separate calls, replayed many times: residual evolves in place, so
// the host emulates every replay and compares the last one
__global__ void k_noop() {}
static bool test_graph(Suite &s, Dev &D) {
  const int replays = getenv("IRIS_TEST_QUICK") ? 100 : 1000;
  const size_t T = 4, Hd = 4100, n = T * Hd;
  const int call_no = 77777;
  Host H;
  Case c = {IRIS_BFLOAT16, IRIS_QUANT_FP8_PER_TOKEN, T, Hd, IRIS_RMSNORM_FUSED, false, true};
  make_case(s, c, call_no, H);
  std::vector<u16> r(n), xs[IRIS_MAX_RANKS];
  for (size_t i = 0; i < n; i++) r[i] = value(c.type, hkey(s.seed, 2, 0, call_no, i));
  for (int q = 0; q < s.world; q++) {
    xs[q].resize(n);
    for (size_t i = 0; i < n; i++) xs[q][i] = down(c.type, up(c.type, value(c.type, hkey(s.seed, 1, q, call_no, i))) / 512.f); // small: the residual grows slowly
  }
  // the sums are exact: s = down(sum of x)
  std::vector<u16> sum(n);
  for (size_t i = 0; i < n; i++) {
    float acc = 0.f;
    for (int q = 0; q < s.world; q++) acc = q == 0 ? up(c.type, xs[q][i]) : acc + up(c.type, xs[q][i]);
    sum[i] = down(c.type, acc);
  }
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CK(cudaMemcpy(D.xh, xs[s.rank].data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(D.res, r.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(D.w, H.w.data(), Hd * 2, cudaMemcpyHostToDevice));
  CK(cudaDeviceSynchronize());
  Case c2 = c;
  c2.algo = IRIS_RMSNORM_SEPARATE;
  c2.quant = IRIS_QUANT_NONE;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  bool ok = call(s, c, D, D.xh, D.out, st) == IRIS_SUCCESS; // fused: residual += s
  k_noop<<<1, 1, 0, st>>>();
  Case c3 = c2;
  c3.algo = IRIS_RMSNORM_TWO_SHOT;
  ok = ok && call(s, c3, D, D.xh, D.out, st) == IRIS_SUCCESS; // two-shot: residual += s again
  Case c4 = c2;
  c4.algo = IRIS_RMSNORM_BANDWIDTH;
  ok = ok && call(s, c4, D, D.xh, D.out, st) == IRIS_SUCCESS; // bandwidth: and again
  ok = ok && call(s, c2, D, D.xh, D.out, st) == IRIS_SUCCESS; // separate: and again
  CK(cudaStreamEndCapture(st, &g));
  if (!ok) { fprintf(stderr, "rank %d: capture: %s\n", s.rank, iris_error_detail()); return report(s, "graph capture", false); }
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < replays; i++) CK(cudaGraphLaunch(ge, st));
  CK(cudaStreamSynchronize(st));
  ok = iris_collectives_check(s.ctx) == IRIS_SUCCESS;
  // host: 4 * replays residual updates; out from the last (separate, no fp8), fp8 and
  // scales from the last replay's first call (fused, per token)
  std::vector<u16> out(n), q8(n);
  std::vector<float> sc(T);
  for (int i = 0; i < 4 * replays; i++) {
    for (size_t j = 0; j < n; j++) r[j] = down(c.type, up(c.type, sum[j]) + up(c.type, r[j]));
    const bool fused = i % 4 == 0;
    if (i < 4 * replays - 4) continue;
    for (size_t tk = 0; tk < T; tk++) {
      const u16 *rr = &r[tk * Hd];
      const float inv = 1.f / sqrtf(row_ss(rr, c.type, Hd) / (float)Hd + 1e-5f);
      float amax = 0.f;
      for (size_t h = 0; h < Hd; h++) {
        out[tk * Hd + h] = down(c.type, (up(c.type, rr[h]) * inv) * up(c.type, H.w[h]));
        amax = fmaxf(amax, fabsf(up(c.type, out[tk * Hd + h])));
      }
      if (!fused) continue;
      sc[tk] = fmaxf(amax / 448.f, 1.f / (448.f * 512.f));
      for (size_t h = 0; h < Hd; h++) q8[tk * Hd + h] = iris_float_to_fp8_e4m3(up(c.type, out[tk * Hd + h]) * (1.f / sc[tk]));
    }
  }
  std::vector<u16> gr(n), go(n);
  std::vector<unsigned char> gq(n);
  std::vector<float> gs(T);
  CK(cudaMemcpy(gr.data(), D.res, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(go.data(), D.out, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gq.data(), D.q8, n, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gs.data(), D.scales, T * 4, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += gr[i] != r[i] || go[i] != out[i] || gq[i] != q8[i];
  for (size_t k = 0; k < T; k++) bad += !same(gs[k], sc[k]);
  if (bad) fprintf(stderr, "rank %d: graph: %zu wrong values after %d replays\n", s.rank, bad, replays);
  ok = ok && bad == 0;
  uint64_t h = fnv(fnv(fnv(1469598103934665603ULL, gr.data(), n * 2), go.data(), n * 2), gq.data(), n);
  const bool sm = same_everywhere(s, h);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  char name[200];
  snprintf(name, sizeof name, "graph (one-shot fp8/token + two-shot + bandwidth + separate, 4 x 4100 bf16) replayed %d times: residual in place, exact, the same bits on every rank", replays);
  return report(s, name, ok && sm);
}

// ranks disagree on hidden: seen on every rank, nothing written, the next call exact
static bool test_mismatch(Suite &s, Dev &D) {
  int call_no = 50000;
  bool all_ok = true;
  struct M { size_t tokens, hidden_r0, hidden_other; iris_rmsnorm_algo_t algo; const char *what; float eps_other = 1e-5f; } ms[] = {
      {4, 4096, 4100, IRIS_RMSNORM_AUTO, "fused path: hidden 4096 on rank 0, 4100 elsewhere"},
      {16, 4096, 4100, IRIS_RMSNORM_TWO_SHOT, "two-shot path: hidden 4096 on rank 0, 4100 elsewhere"},
      {8, 1024, 1000, IRIS_RMSNORM_SEPARATE, "separate path: hidden 1024 on rank 0, 1000 elsewhere"},
      {16, 4096, 4100, IRIS_RMSNORM_BANDWIDTH, "bandwidth path: hidden 4096 on rank 0, 4100 elsewhere"},
      {0, 0, 0, IRIS_RMSNORM_AUTO, "auto (bandwidth): 600 x 2048 on rank 0, 1200 x 1024 elsewhere (the same element count)"},
      {0, 0, 0, IRIS_RMSNORM_SEPARATE, "separate path: 600 x 2048 on rank 0, 1200 x 1024 elsewhere (the all-reduce's counts agree)"},
      {4, 4096, 4096, IRIS_RMSNORM_AUTO, "fused path: eps 1e-5 on rank 0, 1e-6 elsewhere", 1e-6f},
      {16, 4096, 4096, IRIS_RMSNORM_BANDWIDTH, "bandwidth path: eps 1e-5 on rank 0, 1e-6 elsewhere", 1e-6f},
      {8, 1024, 1024, IRIS_RMSNORM_SEPARATE, "separate path: eps 1e-5 on rank 0, 1e-6 elsewhere", 1e-6f},
  };
  for (const M &m : ms) {
    size_t tokens = m.tokens, hidden = s.rank == 0 ? m.hidden_r0 : m.hidden_other;
    if (!m.tokens) { tokens = s.rank == 0 ? 600 : 1200; hidden = s.rank == 0 ? 2048 : 1024; }
    const size_t n = tokens * hidden;
    Case c = {IRIS_BFLOAT16, IRIS_QUANT_FP8_PER_TOKEN, tokens, hidden, m.algo, false, true};
    Host H;
    make_case(s, c, call_no, H);
    CK(cudaMemcpy(D.xh, H.x.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(D.res, 0x5a, n * 2));
    CK(cudaMemset(D.out, 0x5b, n * 2));
    CK(cudaMemset(D.q8, 0x5c, n));
    CK(cudaMemset(D.scales, 0x5d, tokens * 4));
    CK(cudaDeviceSynchronize());
    bool ok = call(s, c, D, D.xh, D.out, 0, s.rank == 0 ? 1e-5f : m.eps_other) == IRIS_SUCCESS;
    ok = ok && iris_collectives_check(s.ctx) == IRIS_ERROR_MISMATCH;
    ok = ok && iris_collectives_check(s.ctx) == IRIS_SUCCESS; // cleared
    std::vector<unsigned char> b(n * 2);
    CK(cudaMemcpy(b.data(), D.res, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n * 2; i++) ok &= b[i] == 0x5a;
    CK(cudaMemcpy(b.data(), D.out, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n * 2; i++) ok &= b[i] == 0x5b;
    CK(cudaMemcpy(b.data(), D.q8, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) ok &= b[i] == 0x5c;
    CK(cudaMemcpy(b.data(), D.scales, tokens * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < tokens * 4; i++) ok &= b[i] == 0x5d;
    if (!ok) fprintf(stderr, "rank %d: mismatch (%s): not reported or something written\n", s.rank, m.what);
    // the next calls are exact and in step
    std::vector<Case> next = {{IRIS_BFLOAT16, IRIS_QUANT_NONE, 3, 4100, IRIS_RMSNORM_AUTO, false, true}, {IRIS_FLOAT16, IRIS_QUANT_FP8_PER_TENSOR, 600, 1024, IRIS_RMSNORM_AUTO, false, false}};
    for (const Case &nc : next) {
      uint64_t h;
      ok = one(s, D, nc, ++call_no, &h) && ok;
    }
    char name[256];
    snprintf(name, sizeof name, "mismatch, %s: reported on every rank (IRIS_ERROR_MISMATCH, then cleared), no user buffer written, the next calls exact", m.what);
    all_ok &= report(s, name, ok);
    call_no += 10;
  }
  return all_ok;
}

static double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Last (the context is unusable after it): a call refused on the last rank only (NULL x)
// still takes part there, marked split, against the others' separate path (an all-reduce,
// then the norm kernel: two launches). Every rank sees a fatal IRIS_ERROR_MISMATCH at once
// (well inside the 10-minute bound), nothing is written, a later call is refused at once.
// empty: the last rank passes 0 tokens instead (its call succeeds and takes part alike).
// Per-rank lines: the host exchange of report() returns the fault too.
static bool test_refused_fatal(Suite &s, Dev &D, bool empty = false) {
  const bool refuser = s.rank == s.world - 1;
  const size_t tokens = 8, hidden = 1024, n = tokens * hidden;
  Case c = {IRIS_BFLOAT16, IRIS_QUANT_NONE, tokens, hidden, IRIS_RMSNORM_SEPARATE, false, true};
  Host H;
  make_case(s, c, 70000, H);
  CK(cudaMemcpy(D.xh, H.x.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(D.res, 0x5a, n * 2));
  CK(cudaMemset(D.out, 0x5b, n * 2));
  CK(cudaDeviceSynchronize());
  IK(iris_barrier(s.ctx));
  const double t0 = now_s();
  Case mine = c;
  if (refuser && empty) mine.tokens = 0;
  const iris_status_t got = call(s, mine, D, refuser && !empty ? NULL : D.xh, D.out, 0), want = refuser && !empty ? IRIS_ERROR_INVALID_ARGUMENT : IRIS_SUCCESS;
  const iris_status_t c1 = iris_collectives_check(s.ctx), c2 = iris_collectives_check(s.ctx);
  const double took = now_s() - t0;
  const iris_status_t later = iris_all_reduce(s.ctx, D.xh, D.out, 16, IRIS_BFLOAT16, IRIS_SUM, 0);
  bool ok = got == want && c1 == IRIS_ERROR_MISMATCH && c2 == IRIS_ERROR_MISMATCH && later == IRIS_ERROR_MISMATCH && took < 60.0;
  std::vector<unsigned char> b(n * 2);
  CK(cudaMemcpy(b.data(), D.res, n * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n * 2; i++) ok &= b[i] == 0x5a;
  CK(cudaMemcpy(b.data(), D.out, n * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n * 2; i++) ok &= b[i] == 0x5b;
  if (!ok)
    fprintf(stderr, "rank %d: %s on the last rank vs the separate path: call %s (want %s), checks %s, %s, a later call %s, after %.1f s: %s\n", s.rank,
            empty ? "0 tokens" : "refused", iris_status_string(got), iris_status_string(want), iris_status_string(c1), iris_status_string(c2), iris_status_string(later),
            took, iris_error_detail());
  printf("%s: [%s] rank %d: %s on the last rank only against the others' separate path: IRIS_ERROR_MISMATCH, fatal, on every rank within 60 s, nothing written, "
         "a later call refused\n", ok ? "PASS" : "FAIL", s.tag.c_str(), s.rank, empty ? "a call of 0 tokens" : "a call refused (NULL x)");
  (ok ? s.passed : s.failed)++;
  return ok;
}

// iris_add_rmsnorm_block, the building block, local (no peers): one row per block, block
// sizes 32-1024, hidden 33-32768; the 16-byte form (iris_rmsnorm_row16) where hidden is a
// multiple of 8 and the rows aligned, the line form otherwise (an unaligned sum), sum = out
// (in place): bit for bit against the same host emulation as the collective path.
template <typename T>
__global__ void __launch_bounds__(1024) k_block(const T *sum, T *res, const T *w, T *out, long long hidden, int quant, unsigned char *q8, float *scale) {
  const long long r = blockIdx.x;
  iris_add_rmsnorm_block<T>(sum + r * hidden, res + r * hidden, w, out + r * hidden, hidden, 1e-5f, (iris_quant_t)quant, q8 ? q8 + r * hidden : NULL,
                            quant == IRIS_QUANT_FP8_PER_TOKEN ? scale + r : scale);
}
static bool test_block(Suite &s, Dev &D) {
  struct B { int type, quant; size_t rows, hidden; int threads; bool alias, unaligned; } bs[] = {
      {IRIS_BFLOAT16, 0, 3, 8192, 512, false, false}, {IRIS_FLOAT16, 1, 3, 8192, 1024, false, false}, {IRIS_BFLOAT16, 2, 3, 8192, 256, true, false},
      {IRIS_BFLOAT16, 2, 2, 8192, 64, false, false},  {IRIS_FLOAT16, 2, 2, 16384, 1024, false, false}, {IRIS_BFLOAT16, 1, 2, 32768, 1024, false, false},
      {IRIS_BFLOAT16, 0, 3, 1024, 32, false, false},  {IRIS_FLOAT16, 2, 3, 4100, 256, false, false},   {IRIS_BFLOAT16, 1, 3, 33, 64, true, false},
      {IRIS_FLOAT16, 2, 3, 8192, 512, false, true},   {IRIS_BFLOAT16, 2, 4, 4096, 128, false, false},  {IRIS_BFLOAT16, 0, 2, 8, 32, false, false},
      // the line form's per-token amax from 32 groups (1024 threads): past the kernels' 16
      {IRIS_BFLOAT16, 2, 3, 4100, 1024, false, false}, {IRIS_FLOAT16, 2, 2, 8192, 1024, false, true},
  };
  bool ok = true;
  int call = 60000;
  for (const B &b : bs) {
    const int t = b.type;
    const size_t n = b.rows * b.hidden, off = b.unaligned ? 1 : 0;
    std::vector<u16> sum(n), r(n), w(b.hidden), out(n), gr(n), go(n);
    std::vector<unsigned char> q8(n), gq(n);
    std::vector<float> sc(b.rows, 0.f), gs(b.rows);
    for (size_t i = 0; i < n; i++) sum[i] = value(t, hkey(s.seed, 4, s.rank, call, i));
    for (size_t i = 0; i < n; i++) r[i] = value(t, hkey(s.seed, 5, s.rank, call, i));
    for (size_t i = 0; i < b.hidden; i++) w[i] = value(t, hkey(s.seed, 6, s.rank, call, i));
    if (b.quant == IRIS_QUANT_FP8_PER_TENSOR) sc[0] = 0.04f + (float)(call % 3) * 0.01f;
    char *dsum = b.alias ? D.out : D.xd + off * 2; // sum = out: the block reads the sums before it writes out
    CK(cudaMemcpy(dsum, sum.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(D.res, r.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(D.w, w.data(), b.hidden * 2, cudaMemcpyHostToDevice));
    if (!b.alias) CK(cudaMemset(D.out, 0xA5, n * 2));
    CK(cudaMemset(D.q8, 0xA5, n));
    CK(cudaMemset(D.scales, 0xA5, b.rows * 4));
    if (b.quant == IRIS_QUANT_FP8_PER_TENSOR) CK(cudaMemcpy(D.scales, sc.data(), 4, cudaMemcpyHostToDevice));
    unsigned char *q = b.quant ? D.q8 : NULL;
    if (t == IRIS_BFLOAT16)
      k_block<iris_bf16_t><<<(unsigned)b.rows, b.threads>>>((const iris_bf16_t *)dsum, (iris_bf16_t *)D.res, (const iris_bf16_t *)D.w, (iris_bf16_t *)D.out,
                                                           (long long)b.hidden, b.quant, q, D.scales);
    else
      k_block<iris_f16_t><<<(unsigned)b.rows, b.threads>>>((const iris_f16_t *)dsum, (iris_f16_t *)D.res, (const iris_f16_t *)D.w, (iris_f16_t *)D.out,
                                                          (long long)b.hidden, b.quant, q, D.scales);
    CK(cudaGetLastError()); // a launch refused (too many registers for the block) fails here
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(gr.data(), D.res, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(go.data(), D.out, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gq.data(), D.q8, n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gs.data(), D.scales, b.rows * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t k = 0; k < b.rows; k++) { // the host emulation (make_case's arithmetic, the sums given)
      u16 *rr = &r[k * b.hidden];
      for (size_t h = 0; h < b.hidden; h++) rr[h] = down(t, up(t, sum[k * b.hidden + h]) + up(t, rr[h]));
      const float inv = 1.f / sqrtf(row_ss(rr, t, b.hidden) / (float)b.hidden + 1e-5f);
      float amax = 0.f;
      for (size_t h = 0; h < b.hidden; h++) {
        out[k * b.hidden + h] = down(t, (up(t, rr[h]) * inv) * up(t, w[h]));
        amax = fmaxf(amax, fabsf(up(t, out[k * b.hidden + h])));
      }
      if (b.quant == IRIS_QUANT_NONE) continue;
      const float s_ = b.quant == IRIS_QUANT_FP8_PER_TENSOR ? sc[0] : fmaxf(amax / 448.f, 1.f / (448.f * 512.f));
      if (b.quant == IRIS_QUANT_FP8_PER_TOKEN) { sc[k] = s_; bad += !same(gs[k], s_); }
      for (size_t h = 0; h < b.hidden; h++) q8[k * b.hidden + h] = iris_float_to_fp8_e4m3(up(t, out[k * b.hidden + h]) * (1.f / s_));
    }
    for (size_t i = 0; i < n; i++) bad += gr[i] != r[i] || go[i] != out[i] || (b.quant && gq[i] != q8[i]);
    if (bad) {
      fprintf(stderr, "rank %d: iris_add_rmsnorm_block %s %s %zu x %zu, %d threads%s%s: %zu wrong values\n", s.rank, tname(t), qname(b.quant), b.rows, b.hidden,
              b.threads, b.alias ? ", sum = out" : "", b.unaligned ? ", sum unaligned" : "", bad);
      ok = false;
    }
    call++;
  }
  return report(s, "iris_add_rmsnorm_block (local): 32-1024 threads, hidden 8-32768 (odd ones), the 16-byte and the line form, sum = out, fp8: bit for bit "
                   "against the host emulation", ok);
}

// one refusal of test_bad_input: a wrong status is named on stderr with its line
#define EXPECT(call, want)                                                                                                            \
  do {                                                                                                                                \
    const iris_status_t got_ = (call);                                                                                                \
    if (got_ != (want)) {                                                                                                             \
      fprintf(stderr, "rank %d: fused_test.cu:%d: %s, want %s (%s)\n", s.rank, __LINE__, iris_status_string(got_), iris_status_string(want), \
              iris_error_detail());                                                                                                   \
      ok = false;                                                                                                                     \
    }                                                                                                                                 \
  } while (0)
static bool test_bad_input(Suite &s, Dev &D) {
  bool ok = true;
  iris_rmsnorm_opts_t o = IRIS_RMSNORM_OPTS_INIT;
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w, D.out, 4, 1024, 1e-5f, IRIS_FLOAT32, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w, D.out, 4, 0, 1e-5f, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w, D.out, 4, IRIS_RMSNORM_MAX_HIDDEN + 1, 1e-5f, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w, D.res, 4, 1024, 1e-5f, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.xh, D.w, D.out, 4, 1024, 1e-5f, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, NULL, D.res, D.w, D.out, 4, 1024, 1e-5f, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  o.quant = IRIS_QUANT_FP8_PER_TOKEN;
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, 4, 1024, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  o.quant = IRIS_QUANT_NONE;
  o.algo = IRIS_RMSNORM_FUSED;
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, 513, 1024, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, 128, 8192, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  o.algo = IRIS_RMSNORM_TWO_SHOT;
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, 512, 16384, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  o.algo = IRIS_RMSNORM_BANDWIDTH;
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, 2048, 32768, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  o.algo = (iris_rmsnorm_algo_t)7;
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, 4, 1024, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  o.algo = IRIS_RMSNORM_AUTO;
  o.struct_size = 3;
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, 4, 1024, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  o.struct_size = sizeof o;
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w, D.out, 0, 1024, 1e-5f, IRIS_BFLOAT16, 0), IRIS_SUCCESS); // nothing moved (the ranks meet)
  o.quant = IRIS_QUANT_FP8_PER_TOKEN; // an empty batch with fp8: nothing, whatever its buffers (NULL, as torch's empty tensors)
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, NULL, NULL, D.w, NULL, 0, 1024, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_SUCCESS);
  o.quant = IRIS_QUANT_NONE;
  // eps that is no norm's, misaligned buffers (a load of them would be a sticky GPU fault)
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w, D.out, 4, 1024, nanf(""), IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w, D.out, 4, 1024, INFINITY, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w, D.out, 4, 1024, -1e-5f, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xd + 1, D.res, D.w, D.out, 4, 1024, 1e-5f, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w + 1, D.out, 4, 1024, 1e-5f, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  o.quant = IRIS_QUANT_FP8_PER_TENSOR;
  o.out_fp8 = D.q8;
  o.scale = (float *)((char *)D.scales + 2);
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, 4, 1024, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  o.quant = IRIS_QUANT_NONE;
  o.out_fp8 = NULL;
  o.scale = NULL;
  // more rows than a grid holds (2^31 - 1 CTAs where a row is a CTA): refused, not cut
  EXPECT(iris_all_reduce_rmsnorm(s.ctx, D.xh, D.res, D.w, D.out, (size_t)1 << 32 | 7, 1, 1e-5f, IRIS_BFLOAT16, 0), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_collectives_check(s.ctx), IRIS_SUCCESS);
  return report(s, "bad input refused on every rank (each refusal meets the others', no wait runs out): fp32, hidden 0 / too large, residual = out or x, NULL, fp8 without buffers, "
                   "FUSED / TWO_SHOT / BANDWIDTH too large, unknown algorithm, bad struct_size, eps NaN / inf / negative, x or weight at an odd address, a misaligned scale, "
                   "2^32 + 7 tokens; 0 tokens (with fp8 and no buffers too) on every rank succeeds", ok);
}

// IRIS_COLL_CTAS=n (make test-gpu runs this part alone with 16): the op's grids under the
// cap. AUTO takes the fused LL kernels only where tokens x the row's CTAs fit under n, the
// bandwidth and norm kernels take at most n CTAs; every path exact; a forced one-shot of
// n + 1 tokens refused on every rank (before the cap it ran, taking n + 1 CTAs or more).
static bool test_ctas_env(Suite &s, Dev &D) {
  const int n = atoi(getenv("IRIS_COLL_CTAS"));
  if (n < 1 || n >= 512) {
    printf("SKIP: [%s] IRIS_COLL_CTAS part: the variable is not set to 1..511 (make test-gpu runs it with 16)\n", s.tag.c_str());
    return true;
  }
  bool ok = true;
  iris_rmsnorm_opts_t o = IRIS_RMSNORM_OPTS_INIT;
  o.algo = IRIS_RMSNORM_FUSED;
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, (size_t)n + 1, 1024, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  o.algo = IRIS_RMSNORM_TWO_SHOT;
  EXPECT(iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, (size_t)n + 1, 1024, 1e-5f, IRIS_BFLOAT16, 0, &o), IRIS_ERROR_INVALID_ARGUMENT);
  EXPECT(iris_collectives_check(s.ctx), IRIS_SUCCESS);
  char name[256];
  snprintf(name, sizeof name, "IRIS_COLL_CTAS=%d: a forced one-shot or two-shot of %d tokens (more CTAs than the cap) refused on every rank", n, n + 1);
  report(s, name, ok);
  int call_no = 70000;
  const size_t shapes[][2] = {{1, 8192}, {(size_t)n, 1024}, {(size_t)n + 1, 1024}, {16, 8192}, {32, 8192}, {128, 4096}, {300, 8192}, {600, 2048}, {1100, 8192}};
  std::vector<Case> cases;
  int k = 0;
  for (auto &sh : shapes) {
    Case c = {k % 2 ? IRIS_FLOAT16 : IRIS_BFLOAT16, k % 3, sh[0], sh[1], IRIS_RMSNORM_AUTO, k % 4 == 1, k % 2 == 0};
    cases.push_back(c);
    k++;
  }
  for (auto &sh : shapes) {
    Case c = {k % 2 ? IRIS_FLOAT16 : IRIS_BFLOAT16, k % 3, sh[0], sh[1], sh[0] < 300 ? IRIS_RMSNORM_BANDWIDTH : IRIS_RMSNORM_SEPARATE, k % 4 == 1, k % 2 == 1};
    cases.push_back(c);
    k++;
  }
  snprintf(name, sizeof name, "IRIS_COLL_CTAS=%d: auto, bandwidth and separate paths under the cap, 1-1100 tokens", n);
  return run_cases(s, D, cases, call_no, name);
}

// ---- ranks as threads of one process sharing GPU 0. Their kernels run at once, so a
// kernel whose CTAs wait for the peers' must leave room for the peers' grids: the fused op
// sizes its grids to 1 / W of the SMs there (before, 1024 rows of the separate path's norm
// kernel, or 32 tokens of the one-shot at 4 ranks, held every SM and waited for a peer's
// kernel that could not start). Streams of their own; no device-wide synchronisation
// while a peer may wait (one() above).
static bool alloc_dev(Suite &s, Dev &D) {
  D.cap = (size_t)1100 * 8192;
  return iris_malloc(s.ctx, D.cap * 2, (void **)&D.xh) == IRIS_SUCCESS && cudaMalloc(&D.xd, D.cap * 2) == cudaSuccess && cudaMalloc(&D.res, D.cap * 2) == cudaSuccess &&
         cudaMalloc(&D.w, 32768 * 2) == cudaSuccess && cudaMalloc(&D.out, D.cap * 2) == cudaSuccess && cudaMalloc(&D.q8, D.cap) == cudaSuccess &&
         cudaMalloc(&D.scales, 4096 * sizeof(float)) == cudaSuccess;
}
static void free_dev(Suite &s, Dev &D) {
  cudaFree(D.xd); cudaFree(D.res); cudaFree(D.w); cudaFree(D.out); cudaFree(D.q8); cudaFree(D.scales);
  iris_free(s.ctx, D.xh);
}
static bool test_shared_gpu(Suite &s, Dev &D) {
  int call_no = 1;
  const Case cases[] = {
      {IRIS_BFLOAT16, IRIS_QUANT_NONE, 1, 8192, IRIS_RMSNORM_AUTO, false, true},
      {IRIS_BFLOAT16, IRIS_QUANT_NONE, 32, 8192, IRIS_RMSNORM_AUTO, false, true},  // the one-shot: 32 x 4 CTAs a rank on a whole GPU
      {IRIS_FLOAT16, IRIS_QUANT_FP8_PER_TOKEN, 64, 4096, IRIS_RMSNORM_AUTO, true, false},
      {IRIS_BFLOAT16, IRIS_QUANT_FP8_PER_TENSOR, 256, 8192, IRIS_RMSNORM_AUTO, false, false},
      {IRIS_FLOAT16, IRIS_QUANT_NONE, 512, 4100, IRIS_RMSNORM_BANDWIDTH, false, true},
      {IRIS_BFLOAT16, IRIS_QUANT_NONE, 1024, 8192, IRIS_RMSNORM_SEPARATE, false, true},  // the norm kernel: 1024 rows of 1024 threads
      {IRIS_FLOAT16, IRIS_QUANT_FP8_PER_TOKEN, 1100, 1000, IRIS_RMSNORM_SEPARATE, true, false},
  };
  std::vector<Case> v(cases, cases + sizeof cases / sizeof cases[0]);
  run_cases(s, D, v, call_no, "ranks sharing one GPU: 1-1100 tokens, every path (auto, bandwidth, separate), a grid within 1 / W of the SMs");
  // the one-shot forced where its grid (a CTA per token at least) passes 1 / W of the SMs: refused on every rank
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t tokens = (size_t)(sms / s.world) + 1;
  iris_rmsnorm_opts_t o = IRIS_RMSNORM_OPTS_INIT;
  o.algo = IRIS_RMSNORM_FUSED;
  bool ok = tokens <= 512 && iris_all_reduce_rmsnorm_ex(s.ctx, D.xh, D.res, D.w, D.out, tokens, 1024, 1e-5f, IRIS_BFLOAT16, s.stream, &o) == IRIS_ERROR_INVALID_ARGUMENT &&
            strstr(iris_error_detail(), "share the GPU") != NULL;
  ok = ok && cudaStreamSynchronize(s.stream) == cudaSuccess && iris_collectives_check(s.ctx) == IRIS_SUCCESS;
  return report(s, "ranks sharing one GPU: IRIS_RMSNORM_FUSED past 1 / W of the SMs refused on every rank, with the reason", ok);
}
static int shared_rank(iris_t *ctx, int rank, int world) {
  Suite s = shared_gpu_suite(ctx, rank, world, "fused");
  Dev D = {};
  const bool ready = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) == cudaSuccess && iris_collectives_setup(s.ctx) == IRIS_SUCCESS && alloc_dev(s, D);
  if (!ready) fprintf(stderr, "rank %d: setup: %s\n", s.rank, iris_error_detail());
  if (report(s, "setup: a stream, the collectives and the buffers on every rank", ready)) test_shared_gpu(s, D);
  report(s, "every rank done before the buffers are freed", true); // cudaFree synchronises the device: no peer's kernel may still wait
  free_dev(s, D);
  cudaStreamDestroy(s.stream);
  return s.failed;
}
static int mode_threads(int n) {
  return run_ranks_on_gpu0("fused", n, (size_t)1 << 30, shared_rank);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && !strcmp(argv[1], "threads")) return mode_threads(argc > 2 ? atoi(argv[2]) : 2);
  int n = argc > 1 ? atoi(argv[1]) : 2, rank;
  iris_launch_t L;
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("FAIL: [fused w=%d] launch: %s\n", n, iris_error_detail()); return 1; }
  if (rank < 0) {
    iris_status_t st = iris_launch_wait(&L, 900000);
    printf("%s: [fused w=%d] every rank exits cleanly%s%s\n", st == IRIS_SUCCESS ? "PASS" : "FAIL", n, st == IRIS_SUCCESS ? "" : ": ", st == IRIS_SUCCESS ? "" : iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  Suite s = {};
  s.rank = rank;
  s.world = n;
  s.tag = "fused w=" + std::to_string(n);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)1 << 30;
  if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS) {
    if (rank == 0) printf("FAIL: [%s] bring-up: %s\n", s.tag.c_str(), iris_error_detail());
    return 1;
  }
  uint64_t mine = mix((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)), all[IRIS_MAX_RANKS];
  iris_allgather_host(s.ctx, &mine, all, sizeof mine);
  s.seed = all[0];
  if (rank == 0) printf("# [%s] seed %llu\n", s.tag.c_str(), (unsigned long long)s.seed);
  Dev D = {};
  void *pad = NULL; // off-heap buffers at addresses that differ by rank
  if (cudaMalloc(&pad, ((size_t)rank + 1) << 21) != cudaSuccess || iris_collectives_setup(s.ctx) != IRIS_SUCCESS || !alloc_dev(s, D)) {
    fprintf(stderr, "rank %d: setup: %s\n", rank, iris_error_detail());
    report(s, "setup", false);
    return 1;
  }
  bool ran;
  if (getenv("IRIS_COLL_CTAS")) { // the cap's part alone, then a call of 0 tokens on one rank (fatal: last)
    ran = test_bad_input(s, D) && test_ctas_env(s, D);
    if (ran) test_refused_fatal(s, D, true);
  } else {
    ran = test_bad_input(s, D) && test_block(s, D) && test_values(s, D) && test_graph(s, D) && test_mismatch(s, D);
    if (ran) test_refused_fatal(s, D); // last: the context keeps its fatal fault
  }
  if (!ran) report(s, "suite ran to the end (see stderr)", false);
  free_dev(s, D);
  cudaFree(pad);
  int rc = s.failed ? 1 : 0;
  if (iris_finalize(s.ctx) != IRIS_SUCCESS) rc = 1;
  return rc;
}
