/* tools/proxy_fused.cu: the fused all-reduce + residual + RMSNorm against the bare
 * all-reduce of the same bytes, with the ranks as threads of one process on ONE GPU
 * (iris_init_local over the same device twice). The peers' stores land in this GPU's
 * memory instead of crossing NVLink, so the absolute times are not the multi-GPU ones;
 * what the fused kernel adds on top of the all-reduce (residual, sum of squares, the
 * row's CTAs combining, the weight, out) is local to each GPU and shows here. A proxy
 * for that difference where no multi-GPU machine is at hand, never a speed figure.
 *
 * Build: make build/proxy_fused (nvcc -std=c++20: std::barrier)
 * Run:   build/proxy_fused [ranks (2)] [hidden (8192)] [most tokens (128; 1, 8, 32, 64, 128, 256, 512 up to it)] [ar | ag | rs: that collective only]
 *        PROXY_ALGO=fused | two | bw | separate: the fused op's path (iris_rmsnorm_opts_t.algo; default the library's choice)
 *        PROXY_GPUS=distinct: rank r on GPU r % (GPUs), a real multi-GPU run of the same program
 *        PROXY_CTAS=n: the collective with opts.ctas = n (its grid capped, as beside compute)
 * Prints, per token count: us per call (graphs of 20 calls, median of 50 replays, max
 * over ranks) of the bare all-reduce and of the fused op, and their difference. With ag or
 * rs, the all-gather or reduce-scatter alone, of the same bytes in all (tokens x hidden
 * bf16 gathered, or scattered: each rank's part is that / ranks).
 * The all-reduce column alone is a proxy for the decode sizes' local costs too (launch,
 * call word, headers, polls): hidden 512 gives 1, 8, 32, 128 KB. At 16 KB it read 2.65 us
 * here against 3.04 on 2 H200s over NVLink: most of that latency is local.
 * The kernels launch with PDL as on separate GPUs (IRIS_COLL_PDL=1 unless set: iris
 * turns it off by default for ranks sharing a GPU in one process), so every rank's grid,
 * and its next one, must be resident at once (the ranks wait for each other): 32 and
 * more tokens with 512-thread CTAs at 2 ranks do not fit, nor does the all-reduce of 128
 * KB at 4 ranks (hidden 8192 x 8 tokens); such runs end with a timeout error (set
 * IRIS_WAIT_TIMEOUT_MS=2000, else they wait 10 minutes) or run with IRIS_COLL_PDL=0.
 * Ranks sharing a GPU get grids of at most 1 / W of its SMs (docs/shared_gpu.md): the
 * collectives' bandwidth grids, and the fused kernel's CTAs per row where tokens x CTAs
 * would pass that (at 2 ranks from 8 tokens x 8192: 8 CTAs a row, against 16 on separate
 * GPUs). Compare such rows only with runs of the same shape; 1 token is unchanged.
 * Each graph is uploaded before the ranks first launch it (docs/shared_gpu.md). Rank 0
 * prints each finished step to stderr. */
#define IRIS_IMPLEMENTATION
#include "iris_collectives.h"
#include <algorithm>
#include <barrier>
#include <chrono>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thread>
#include <vector>

enum { CALLS = 20, REPS = 50, WARM = 5 };
static const size_t kTokens[] = {1, 8, 32, 64, 128, 256, 512};
enum { NT = sizeof kTokens / sizeof kTokens[0] };

struct Out { float ar[NT], fused[NT]; };

static size_t g_max_tokens = 128;
static bool g_ar_only = false; /* one collective only, no fused op */
static int g_kind = 0;         /* 0: all-reduce, 1: all-gather, 2: reduce-scatter */
static int g_world = 2;
static iris_coll_opts_t g_opts = IRIS_COLL_OPTS_INIT; /* PROXY_CTAS=n: opts.ctas = n (the collective's grid capped) */
static iris_rmsnorm_opts_t g_ropts = IRIS_RMSNORM_OPTS_INIT; /* PROXY_ALGO=fused|two|bw|separate: the fused op's path (default: the library's choice) */

static int run_rank(iris_t *ctx, int rank, int dev, size_t hidden, std::barrier<> &bar, Out *o) {
  cudaSetDevice(dev);
  if (iris_collectives_setup(ctx) != IRIS_SUCCESS) { fprintf(stderr, "rank %d: setup: %s\n", rank, iris_error_detail()); return 1; }
  const size_t maxn = g_max_tokens * hidden;
  void *x, *res, *w, *out;
  if (iris_malloc(ctx, maxn * 2, &x) || iris_malloc(ctx, maxn * 2, &res) || iris_malloc(ctx, hidden * 2, &w) || iris_malloc(ctx, maxn * 2, &out)) return 1;
  std::vector<unsigned short> h(maxn);
  for (size_t i = 0; i < maxn; i++) h[i] = (unsigned short)(0x3c00 + ((i * 2654435761u + (unsigned)rank * 97u) % 256)); /* bf16 in [1, 2) */
  cudaMemcpy(x, h.data(), maxn * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(res, h.data(), maxn * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(w, h.data(), hidden * 2, cudaMemcpyHostToDevice);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int ti = 0; ti < NT; ti++) {
    const size_t t = kTokens[ti];
    if (t > g_max_tokens) break;
    for (int which = 0; which < (g_ar_only ? 1 : 2); which++) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      bar.arrive_and_wait();
      cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
      for (int c = 0; c < CALLS; c++) {
        const size_t part = t * hidden / (size_t)g_world; /* ag / rs: each rank's part */
        iris_status_t s = which == 1   ? iris_all_reduce_rmsnorm_ex(ctx, x, res, w, out, t, hidden, 1e-6f, IRIS_BFLOAT16, st, &g_ropts)
                          : g_kind == 1 ? iris_all_gather_ex(ctx, x, out, part, IRIS_BFLOAT16, st, &g_opts)
                          : g_kind == 2 ? iris_reduce_scatter_ex(ctx, x, out, part, IRIS_BFLOAT16, IRIS_SUM, st, &g_opts)
                                        : iris_all_reduce_ex(ctx, x, out, t * hidden, IRIS_BFLOAT16, IRIS_SUM, st, &g_opts);
        if (s != IRIS_SUCCESS) { fprintf(stderr, "rank %d: %s\n", rank, iris_error_detail()); return 1; }
      }
      cudaStreamEndCapture(st, &g);
      cudaGraphInstantiate(&ge, g, 0);
      cudaGraphUpload(ge, st); /* before the ranks meet: a first launch that uploads could queue behind a peer's waiting kernel (docs/shared_gpu.md) */
      cudaStreamSynchronize(st);
      std::vector<float> ms;
      double launch_ms = 0;
      for (int r = 0; r < WARM + REPS; r++) {
        bar.arrive_and_wait();
        cudaEventRecord(e0, st);
        const auto h0 = std::chrono::steady_clock::now();
        cudaGraphLaunch(ge, st);
        if (r == 0) launch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - h0).count();
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        float m = 0;
        cudaEventElapsedTime(&m, e0, e1);
        if (r >= WARM) ms.push_back(m);
        if (iris_get_async_error(ctx) != IRIS_SUCCESS) break;
      }
      const iris_status_t fs = iris_get_async_error(ctx);
      if (fs != IRIS_SUCCESS || ms.empty()) { fprintf(stderr, "rank %d: %zu tokens, %s (first graph launch returned in %.2f ms): %s\n", rank, t, which ? "fused" : "all_reduce", launch_ms, iris_error_detail()); return 1; }
      if (rank == 0) { fprintf(stderr, "# done: %zu tokens, %s\n", t, which ? "fused" : "all_reduce"); fflush(stderr); }
      std::sort(ms.begin(), ms.end());
      const float us = ms[ms.size() / 2] * 1000.f / (float)CALLS;
      (which == 0 ? o->ar : o->fused)[ti] = us;
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
    }
  }
  if (cudaStreamSynchronize(st) != cudaSuccess) return 1;
  return 0;
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2;
  const size_t hidden = argc > 2 ? (size_t)atol(argv[2]) : 8192;
  if (argc > 3) g_max_tokens = (size_t)atol(argv[3]);
  if (argc > 4) {
    g_ar_only = true;
    g_kind = !strcmp(argv[4], "ag") ? 1 : !strcmp(argv[4], "rs") ? 2 : 0;
    if (g_kind == 0 && strcmp(argv[4], "ar")) { fprintf(stderr, "the 4th argument: ar, ag or rs, not '%s'\n", argv[4]); return 2; }
  }
  g_world = n;
  if (getenv("PROXY_CTAS")) g_opts.ctas = atoi(getenv("PROXY_CTAS"));
  if (const char *a = getenv("PROXY_ALGO")) {
    if (!strcmp(a, "fused")) g_ropts.algo = IRIS_RMSNORM_FUSED;
    else if (!strcmp(a, "two")) g_ropts.algo = IRIS_RMSNORM_TWO_SHOT;
    else if (!strcmp(a, "separate")) g_ropts.algo = IRIS_RMSNORM_SEPARATE;
    else if (!strcmp(a, "bw")) g_ropts.algo = IRIS_RMSNORM_BANDWIDTH;
    else if (strcmp(a, "auto")) { fprintf(stderr, "PROXY_ALGO: fused, two, bw, separate or auto, not '%s'\n", a); return 2; }
  }
  if (g_kind != 0 && (size_t)hidden % (size_t)n) { fprintf(stderr, "hidden %zu: a multiple of the ranks (%d), for ag and rs\n", hidden, n); return 2; }
  setenv("IRIS_COLL_PDL", "1", 0); /* measure the kernels as they launch on separate GPUs */
  std::vector<int> devs(n, 0);
  int ngpu = 1;
  const bool spread = getenv("PROXY_GPUS") && !strcmp(getenv("PROXY_GPUS"), "distinct"); /* rank r on GPU r % GPUs: a real multi-GPU run */
  if (spread && (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1)) { fprintf(stderr, "PROXY_GPUS=distinct: no GPU\n"); return 1; }
  for (int r = 0; r < n; r++) devs[r] = spread ? r % ngpu : 0;
  std::vector<iris_t *> ctxs(n);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)256 << 20;
  if (iris_init_local(&cfg, n, devs.data(), ctxs.data()) != IRIS_SUCCESS) { fprintf(stderr, "iris_init_local: %s\n", iris_error_detail()); return 1; }
  std::barrier<> bar(n);
  std::vector<Out> outs(n);
  std::vector<int> rc(n);
  std::vector<std::thread> th;
  for (int r = 0; r < n; r++) th.emplace_back([&, r] { rc[r] = run_rank(ctxs[r], r, devs[r], hidden, bar, &outs[r]); if (rc[r]) bar.arrive_and_drop(); /* the others' barriers go on without it */ });
  for (auto &t : th) t.join();
  for (int r = 0; r < n; r++)
    if (rc[r]) return 1;
  if (spread) printf("# %d ranks as threads over %d GPUs, bf16, hidden %zu, graphs of %d calls, us per call, max over ranks, IRIS_COLL_PDL=%s\n", n, ngpu < n ? ngpu : n, hidden, CALLS, getenv("IRIS_COLL_PDL"));
  else printf("# %d ranks as threads on ONE GPU (proxy: peers' stores stay on the GPU), bf16, hidden %zu, graphs of %d calls, us per call, max over ranks, IRIS_COLL_PDL=%s\n", n, hidden, CALLS, getenv("IRIS_COLL_PDL"));
  printf("%8s %10s %10s %10s\n", "tokens", g_kind == 1 ? "all_gather" : g_kind == 2 ? "red_scat" : "all_reduce", "fused", "fused-ar");
  for (int ti = 0; ti < NT && kTokens[ti] <= g_max_tokens; ti++) {
    float a = 0, f = 0;
    for (int r = 0; r < n; r++) a = std::max(a, outs[r].ar[ti]), f = std::max(f, outs[r].fused[ti]);
    if (g_ar_only) printf("%8zu %10.2f %10s %10s\n", kTokens[ti], a, "-", "-");
    else printf("%8zu %10.2f %10.2f %10.2f\n", kTokens[ti], a, f, f - a);
  }
  for (int r = 0; r < n; r++) iris_finalize(ctxs[r]);
  return 0;
}
