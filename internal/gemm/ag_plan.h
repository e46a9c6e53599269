/* internal/gemm/ag_plan.h: the all-gather + GEMM's plan (iris_gemm.h): struct iris_ag_gemm,
 * the path AUTO picks, the description's rules, the fused kernel's cut (tile counts,
 * k-group, fetcher and GEMM CTAs, side fetch, help, tile order) and its flag block, and the
 * fused kernel's launches. Part of its implementation (IRIS_IMPLEMENTATION); not a public
 * header. */
#ifndef IRIS_INTERNAL_GEMM_AG_PLAN_H
#define IRIS_INTERNAL_GEMM_AG_PLAN_H
#include "../../iris_gemm.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "types.h"
#include "common.h"
#include "host.h"
#include "ag_kernel.h"

#define IRIS_GEMM_MAX_CHUNKS 16

struct iris_ag_gemm {
  iris_t *ctx;
  iris_ag_gemm_desc_t d;
  iris_gemm_path_t path;
  int W, me, sms;
  int coll;                       /* unfused, A in rows: the gather is iris_all_gather (iris_ag_gemm_run_unfused) */
  unsigned err_taken;             /* the call whose failure iris_ag_gemm_check reported last (iris_gemm_err_take) */
  int broken;                     /* a run failed after enqueuing its barrier or first kernel: later runs refused (iris_gemm_refuse_broken) */
  size_t es, cs;                  /* element sizes of A/B and of C */
  char *staged;                   /* local M x K */
  char *a_heap;                   /* stage_a: the plan's heap copy of the shard */
  unsigned *flag_block;           /* heap: ready | claim | iris_ag_gemm_sync_t | counters */
  iris_stream_t copy[IRIS_MAX_RANKS];
  iris_gpu_event_t fork, join, tail[IRIS_MAX_RANKS], ev[IRIS_MAX_RANKS][IRIS_GEMM_MAX_CHUNKS];
  iris_stream_t aux;              /* pipelined: the second GEMM stream */
  iris_gpu_event_t aux_join;
  int gemm_streams;
  int nchunks;
  long long chunk_row[IRIS_GEMM_MAX_CHUNKS + 1];
#if defined(IRIS_GEMM_HAVE_CORE)
  iris_ag_gemm_dev_t dev;
  int unfused_fetchers, unfused_gemm;
  int wgmma;                      /* the kernels' device pass has wgmma and TMA (sm_90a) */
  int tma;                        /* the fused kernel runs the TMA core (internal/gemm/core_tma.h) */
#endif
  unsigned long long *trace;
  size_t trace_words;
#if defined(IRIS_GEMM_HAVE_BLAS)
  iris_gemm_blas_t blas;          /* pipelined, unfused: the cuBLASLt GEMM (internal/gemm/common.h) */
#endif
};

#if defined(IRIS_GEMM_HAVE_TMA)
/* The fused kernel's tile configuration (see internal/gemm/core.h): the wgmma core where the
 * unit is compiled for sm_90a, else the mma.sync core of the same tile. */
typedef iris_gemm_cfg_wgmma_large iris_ag_gemm_cfg;
/* ... and where the device pass has sm_90a, the persistent TMA core of the same tile */
typedef iris_gemm_cfg_tma_large iris_ag_gemm_tma_cfg;
static_assert(iris_ag_gemm_tma_cfg::BM == iris_ag_gemm_cfg::BM && iris_ag_gemm_tma_cfg::BN == iris_ag_gemm_cfg::BN, "iris_gemm: one tile plan for both cores");
#elif defined(IRIS_GEMM_HAVE_CORE)
/* AMD: the MFMA core (internal/gemm/core_mfma.h; UNVERIFIED, never run on hardware), 128 x 128
 * tiles, 256 threads, 32 KB of LDS. */
typedef iris_gemm_cfg_mfma_large iris_ag_gemm_cfg;
#endif

IRIS_DEF iris_gemm_path_t iris_ag_gemm_path(const iris_ag_gemm_t *g) { return g ? g->path : IRIS_GEMM_PATH_AUTO; }
IRIS_DEF const char *iris_ag_gemm_engine(const iris_ag_gemm_t *g) {
  if (!g) return "none";
  if (g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED) return "cublaslt";
#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_GEMM_HAVE_TMA)
  return "mfma";
#elif defined(IRIS_GEMM_HAVE_CORE)
  return g->tma ? "tma-wgmma" : g->wgmma ? "cp.async-wgmma" : "mma.sync";
#else
  return "none";
#endif
}

/* AUTO: with cuBLASLt the pipelined path from IRIS_AG_GEMM_PIPELINE_MIN_ROWS rows per rank,
 * the unfused one (gather, then one GEMM) below; without cuBLASLt (AMD included: no
 * hipBLASLt path) the fused kernel. Measured: docs/tuning.md. */
#ifndef IRIS_AG_GEMM_PIPELINE_MIN_ROWS
#define IRIS_AG_GEMM_PIPELINE_MIN_ROWS 256
#endif
/* With A in rows (the unfused gather is iris_all_gather) also below 512 rows per rank for
 * a GEMM of fewer than 2^35 FLOP (2MNK): too little work per chunk to hide the gather;
 * measured: docs/tuning.md. */
#ifndef IRIS_AG_GEMM_SMALL_FLOP
#define IRIS_AG_GEMM_SMALL_FLOP 34359738368.0
#endif
IRIS_DEF iris_gemm_path_t iris_ag_gemm_choose_path(const iris_ag_gemm_desc_t *d, int W) {
  (void)W;
  if (d->path != IRIS_GEMM_PATH_AUTO) return d->path;
#if defined(IRIS_GEMM_HAVE_BLAS)
  if (W > 1 && d->M / W < IRIS_AG_GEMM_PIPELINE_MIN_ROWS) return IRIS_GEMM_PATH_UNFUSED;
  if (W > 1 && d->layout == IRIS_GEMM_A_ROWS && d->M / W < 2 * IRIS_AG_GEMM_PIPELINE_MIN_ROWS && 2.0 * (double)d->M * (double)d->N * (double)d->K < IRIS_AG_GEMM_SMALL_FLOP)
    return IRIS_GEMM_PATH_UNFUSED;
  return IRIS_GEMM_PATH_PIPELINED;
#else
  return IRIS_GEMM_PATH_FUSED;
#endif
}

/* A failed runtime call of the plan: IRIS_ERROR_GPU naming it (internal/gemm/common.h). */
static inline iris_status_t iris_ag_gemm_gpu_fail(iris_t *ctx, const char *what, iris_gpu_error_t e) { return iris_gemm_gpu_fail(ctx, "iris_ag_gemm", what, e); }
static inline iris_status_t iris_ag_gemm_gpu(const iris_ag_gemm_t *g, iris_gpu_error_t e, const char *what) { return iris_gemm_gpu_check(g->ctx, "iris_ag_gemm", e, what); }

/* The rules of the header comment, checked on one rank's description. */
static iris_status_t iris_ag_gemm_check_desc(const iris_ag_gemm_desc_t *d, int W, int me) {
  const char *bad = NULL;
  if (d->struct_size != sizeof(iris_ag_gemm_desc_t)) bad = "struct_size is wrong: start from IRIS_AG_GEMM_DESC_INIT";
  else if (d->layout != IRIS_GEMM_A_ROWS && d->layout != IRIS_GEMM_A_COLS) bad = "layout must be IRIS_GEMM_A_ROWS or IRIS_GEMM_A_COLS";
  else if (d->M < 1 || d->N < 1 || d->K < 1) bad = "M, N and K must be positive";
  else if (d->M > 0x7fffffffLL || d->N > 0x7fffffffLL || d->K > 0x7fffffffLL) bad = "M, N and K must be below 2^31";
  else if (d->a_type == IRIS_FLOAT8_E5M2)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: fp8 e5m2 inputs are not supported (cuBLASLt has no e5m2 x e5m2 GEMM); use IRIS_FLOAT8_E4M3", me);
  else if (d->a_type != IRIS_BFLOAT16 && d->a_type != IRIS_FLOAT16 && d->a_type != IRIS_FLOAT8_E4M3) bad = "a_type must be IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT8_E4M3";
  else if (d->c_type != IRIS_BFLOAT16 && d->c_type != IRIS_FLOAT16 && d->c_type != IRIS_FLOAT32) bad = "c_type must be IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT32";
  else if (d->a_type == IRIS_FLOAT8_E4M3 && iris_ag_gemm_choose_path(d, W) != IRIS_GEMM_PATH_PIPELINED && iris_ag_gemm_choose_path(d, W) != IRIS_GEMM_PATH_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: fp8 inputs run on the cuBLASLt paths only (pipelined, unfused), not on path '%s'", me,
                            iris_gemm_path_name(iris_ag_gemm_choose_path(d, W)));
  else if (d->a_type == IRIS_FLOAT8_E4M3 && !d->b_transposed)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_ag_gemm_create: fp8 inputs need b_transposed = 1 (B stored N x K: cuBLASLt's fp8 GEMM on Hopper takes only the \"TN\" layout)", me);
  else if (d->a_type == IRIS_FLOAT8_E4M3 && (d->K % 16 || (d->layout == IRIS_GEMM_A_COLS && (d->K % W || (d->K / W) % 16))))
    bad = "fp8 inputs need K a multiple of 16 (layout COLS: K/world_size), 16-byte rows of A and B (cuBLASLt's fp8 rule)";
  else if (d->a_type == IRIS_FLOAT8_E4M3 && d->has_bias && d->c_type == IRIS_FLOAT32)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: fp8 inputs with a bias need c_type bf16 or fp16 (cuBLASLt takes no fp32 bias with fp8)", me);
  else if (d->K % 8 || d->N % 8) bad = "K and N must be multiples of 8 (16-byte rows)";
  else if (d->layout == IRIS_GEMM_A_ROWS && d->M % W) bad = "layout IRIS_GEMM_A_ROWS needs M divisible by the world size";
  else if (d->layout == IRIS_GEMM_A_COLS && (d->K % W || (d->K / W) % 8)) bad = "layout IRIS_GEMM_A_COLS needs K/world_size to be a whole multiple of 8";
  else if ((unsigned)d->path >= IRIS_GEMM_PATH_COUNT) bad = "unknown path";
  else if (d->chunks < 0 || d->chunks > IRIS_GEMM_MAX_CHUNKS) bad = "chunks must be in [0, 16]";
  else if (d->fetch_ctas < -1 || d->k_group < 0 || d->k_group % 64) bad = "fetch_ctas must be >= -1 and k_group a multiple of 64";
  else if (d->gemm_streams < 0 || d->gemm_streams > 2) bad = "gemm_streams must be 0 (auto), 1 or 2";
  if (bad) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_create: %s", me, bad);
  return IRIS_SUCCESS;
}

/* Words of the plan's flag block (heap, iris_calloc): ready flags for the smallest tile and
 * k-group the kernel may pick (64 rows; 64 columns, or K/W columns when a COLS shard is
 * narrower: then W groups) and as many claim words, then the iris_ag_gemm_sync_t (arrive,
 * done, the error record), then one epoch counter per CTA slot. */
#define IRIS_AG_GEMM_SYNC_WORDS (sizeof(iris_ag_gemm_sync_t) / sizeof(unsigned))
static size_t iris_ag_gemm_flag_words(const iris_ag_gemm_desc_t *d, int W) {
  const size_t groups = (size_t)iris_cdiv(d->K, 64) > (size_t)W ? (size_t)iris_cdiv(d->K, 64) : (size_t)W;
  return 2 * (size_t)iris_cdiv(d->M, 64) * groups + IRIS_AG_GEMM_SYNC_WORDS + IRIS_GEMM_MAX_SLOTS;
}

#if defined(IRIS_GEMM_HAVE_CORE)
#if defined(IRIS_GEMM_HAVE_TMA)
/* The TMA core's launch: tensor maps of the staging buffer and of B (made per call, on
 * the host: B may change between calls; no GPU work, so capture is fine). */
template <typename T, bool B_KN, typename OutT>
static iris_gpu_error_t iris_ag_gemm_launch_tma(iris_ag_gemm_t *g, const void *b, const void *bias, void *c, int slot0, int ctas, iris_stream_t s, int setup) {
  typedef iris_ag_gemm_tma_cfg Cfg;
  void (*k)(iris_ag_gemm_dev_t, const CUtensorMap, const CUtensorMap, const OutT *, OutT *, int) = iris_ag_gemm_tma_kernel<Cfg, T, B_KN, OutT>;
  CUtensorMap ta, tb;
  const int f16 = g->d.a_type == IRIS_FLOAT16;
  iris_gpu_error_t e;
  if (setup) return iris_gpu_func_max_smem((const void *)k, (int)Cfg::smem_bytes);
  if ((e = iris_gemm_tma_map(&ta, g->staged, f16, g->d.M, g->d.K, g->d.K, Cfg::BM)) != IRIS_GPU_SUCCESS) return e;
  if ((e = iris_gemm_tma_map_b<Cfg>(&tb, b, f16, B_KN, g->d.K, g->d.N, B_KN ? g->d.N : g->d.K)) != IRIS_GPU_SUCCESS) return e;
  k<<<ctas, Cfg::threads, Cfg::smem_bytes, s>>>(g->dev, ta, tb, (const OutT *)bias, (OutT *)c, slot0);
  return iris_gpu_last_error();
}
#endif
template <typename T, bool B_KN, typename OutT>
static iris_gpu_error_t iris_ag_gemm_launch_typed(iris_ag_gemm_t *g, const void *b, const void *bias, void *c, int slot0, int ctas, iris_stream_t s, int setup) {
  void (*k)(iris_ag_gemm_dev_t, const T *, const OutT *, OutT *, int) = iris_ag_gemm_kernel<iris_ag_gemm_cfg, T, B_KN, OutT>;
#if defined(IRIS_GEMM_HAVE_TMA)
  if (g->tma) return iris_ag_gemm_launch_tma<T, B_KN, OutT>(g, b, bias, c, slot0, ctas, s, setup);
#endif
#if !defined(IRIS_GEMM_HAVE_TMA)
  if (setup) return IRIS_GPU_SUCCESS; /* AMD: LDS (<= 64 KB, static_assert in the cfg) needs no opt-in */
#else
  if (setup) return iris_gpu_func_max_smem((const void *)k, (int)iris_ag_gemm_cfg::smem_bytes);
#endif
  k<<<ctas, iris_ag_gemm_cfg::threads, iris_ag_gemm_cfg::smem_bytes, s>>>(g->dev, (const T *)b, (const OutT *)bias, (OutT *)c, slot0);
  return iris_gpu_last_error();
}
template <typename T, bool B_KN>
static iris_gpu_error_t iris_ag_gemm_launch_out(iris_ag_gemm_t *g, const void *b, const void *bias, void *c, int slot0, int ctas, iris_stream_t s, int setup) {
  switch (g->d.c_type) {
  case IRIS_BFLOAT16: return iris_ag_gemm_launch_typed<T, B_KN, iris_gemm_elem_bf16_t>(g, b, bias, c, slot0, ctas, s, setup);
  case IRIS_FLOAT16: return iris_ag_gemm_launch_typed<T, B_KN, iris_gemm_elem_f16_t>(g, b, bias, c, slot0, ctas, s, setup);
  default: return iris_ag_gemm_launch_typed<T, B_KN, float>(g, b, bias, c, slot0, ctas, s, setup);
  }
}
/* setup = 1: only raise the kernel's shared-memory limit (at create). */
static iris_gpu_error_t iris_ag_gemm_launch(iris_ag_gemm_t *g, const void *b, const void *bias, void *c, int slot0, int ctas, iris_stream_t s, int setup) {
  const int kn = !g->d.b_transposed;
  if (g->d.a_type == IRIS_BFLOAT16)
    return kn ? iris_ag_gemm_launch_out<iris_gemm_elem_bf16_t, true>(g, b, bias, c, slot0, ctas, s, setup)
              : iris_ag_gemm_launch_out<iris_gemm_elem_bf16_t, false>(g, b, bias, c, slot0, ctas, s, setup);
  return kn ? iris_ag_gemm_launch_out<iris_gemm_elem_f16_t, true>(g, b, bias, c, slot0, ctas, s, setup)
            : iris_ag_gemm_launch_out<iris_gemm_elem_f16_t, false>(g, b, bias, c, slot0, ctas, s, setup);
}

/* The fused kernel's plan: tile counts, k-group, fetcher count (each fetcher keeps
 * 64 KB of loads in flight). */
static iris_status_t iris_ag_gemm_plan_kernel(iris_ag_gemm_t *g, unsigned *flags) {
  const iris_ag_gemm_desc_t *d = &g->d;
  iris_ag_gemm_dev_t *v = &g->dev;
  iris_ag_gemm_sync_t *sync;
  int kg = d->k_group;
  memset(v, 0, sizeof *v);
  v->ctx = iris_device_context(g->ctx);
  v->M = (int)d->M; v->N = (int)d->N; v->K = (int)d->K;
  v->layout = d->layout;
  v->bm = iris_ag_gemm_cfg::BM;
  v->tiles_m = (int)iris_cdiv(d->M, iris_ag_gemm_cfg::BM);
  v->tiles_n = (int)iris_cdiv(d->N, iris_ag_gemm_cfg::BN);
  if (!kg) kg = d->K >= 8192 ? 512 : d->K >= 2048 ? 256 : 128;
  if (kg > d->K) kg = (int)((d->K + 63) / 64 * 64); /* one group of all of K (a k_group near 2^31 overflowed the waiters' k0 + kg) */
  if (d->layout == IRIS_GEMM_A_COLS) /* a k-group never straddles two owners */
    while (kg > 64 && (d->K / g->W) % kg) kg /= 2;
  if (d->layout == IRIS_GEMM_A_COLS && (d->K / g->W) % kg) kg = (int)(d->K / g->W);
  v->kg = kg;
  v->groups_k = (int)iris_cdiv(d->K, kg);
  v->ready.tiles_m = v->tiles_m;
  v->ready.groups_k = v->groups_k;
  v->ready.flags = flags;
  v->claim = flags + (size_t)v->tiles_m * v->groups_k;
  sync = (iris_ag_gemm_sync_t *)(v->claim + (size_t)v->tiles_m * v->groups_k);
  v->arrive = sync->arrive;
  v->done = sync->done;
  v->err = &sync->err;
  v->counters = (unsigned *)(sync + 1);
  v->rot = d->layout == IRIS_GEMM_A_ROWS ? (int)((d->M / g->W) * g->me / iris_ag_gemm_cfg::BM) : 0;
  /* fetchers: the fewer N columns per A byte, the faster A must arrive (docs/tuning.md) */
  v->fetchers = d->fetch_ctas > 0 ? d->fetch_ctas : (int)((long long)g->sms * 360 / d->N);
  if (d->fetch_ctas <= 0 && v->fetchers < 12) v->fetchers = 12;
  if (d->fetch_ctas <= 0 && v->fetchers > g->sms / 4) v->fetchers = g->sms / 4;
  if (v->fetchers >= g->sms) v->fetchers = g->sms / 2;
  v->gemm_ctas = g->sms - v->fetchers;
  g->unfused_fetchers = g->sms;
  g->unfused_gemm = g->sms;
  if (g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED) { v->fetchers = g->unfused_fetchers; v->gemm_ctas = g->unfused_gemm; }
  /* fused with the TMA core and wide N (few fetchers wanted: A is needed slowly): no
   * fetcher CTAs, every SM multiplies and its producer warpgroup's 3 idle warps fetch
   * (docs/tuning.md). desc.fetch_ctas > 0 always keeps fetcher CTAs, -1 asks for side fetch. */
  v->side_fetch = g->path == IRIS_GEMM_PATH_FUSED && g->tma && (d->fetch_ctas == -1 || (!d->fetch_ctas && (long long)g->sms * 360 / d->N < 20));
  if (v->side_fetch) { v->fetchers = 0; v->gemm_ctas = g->sms; }
  /* fused TMA kernel with fetcher CTAs: the GEMM CTAs' idle side warps stand by (d.help) */
  v->help = g->path == IRIS_GEMM_PATH_FUSED && g->tma && !v->side_fetch;
  /* tile order of the TMA core: fused with fetcher CTAs, row by row, the order the
   * fetchers fill A in; fused with side fetch, and kernel-unfused (A is all there), groups
   * of 8 m-tiles, which share B tiles in L2 (docs/tuning.md). IRIS_GEMM_RASTER overrides all. */
#if defined(IRIS_GEMM_RASTER)
  v->raster = IRIS_GEMM_RASTER;
#else
  v->raster = g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED || v->side_fetch ? 8 : 1;
#endif
  v->staged = g->staged;
  if ((size_t)v->fetchers + v->gemm_ctas > IRIS_GEMM_MAX_SLOTS) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm: too many CTAs");
  if (2 * (size_t)v->tiles_m * v->groups_k + IRIS_AG_GEMM_SYNC_WORDS + IRIS_GEMM_MAX_SLOTS > iris_ag_gemm_flag_words(d, g->W))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm: the flag block is too small for %d x %d ready flags", g->me, v->tiles_m, v->groups_k);
  return IRIS_SUCCESS;
}

/* The words of the fused kernels' flag block (ready | claim | iris_ag_gemm_sync_t |
 * counters, as iris_ag_gemm_plan_kernel lays it out) as call `epoch` of every CTA slot
 * leaves them on this rank; returns their count (words NULL: only the count). For
 * IRIS_GEMM_TEST_WRAP (iris_ag_gemm_start_near_wrap), and for the test that crosses the
 * wrap, which compares the block with it after its calls. */
static size_t iris_ag_gemm_flags_after(const iris_ag_gemm_dev_t *v, unsigned epoch, unsigned *words) {
  const size_t items = (size_t)v->tiles_m * v->groups_k, slots = (size_t)v->fetchers + v->gemm_ctas;
  const size_t n = 2 * items + IRIS_AG_GEMM_SYNC_WORDS + slots;
  /* "done" signals each peer sends a call: one per fetcher CTA, and one per GEMM CTA where
   * their side warps fetch (side fetch) or stand by (help) */
  const unsigned per_call = (unsigned)v->fetchers + (v->side_fetch || v->help ? (unsigned)v->gemm_ctas : 0u);
  iris_ag_gemm_sync_t *sync;
  size_t i;
  int q;
  if (!words) return n;
  memset(words, 0, n * sizeof *words);
  for (i = 0; i < items; i++) {
    words[i] = epoch;                     /* ready: every block published */
    if (v->help) words[items + i] = epoch; /* claim: every fetcher claims each of its blocks (used with help only) */
  }
  sync = (iris_ag_gemm_sync_t *)(words + 2 * items);
  for (q = 0; q < v->ctx.world_size; q++) {
    if (q == v->ctx.rank) continue;       /* a rank signals only its peers */
    sync->arrive[q] = epoch;
    sync->done[q] = epoch * per_call;     /* modulo 2^32, as the wait computes it */
  }
  /* the error record stays 0: no call failed, no abort marker */
  for (i = 0; i < slots; i++) words[2 * items + IRIS_AG_GEMM_SYNC_WORDS + i] = epoch;
  return n;
}

#endif /* IRIS_GEMM_HAVE_CORE */

#endif /* IRIS_INTERNAL_GEMM_AG_PLAN_H */
