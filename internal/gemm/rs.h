/* internal/gemm/rs.h: the GEMM + reduce-scatter / all-reduce's plan and host API
 * (iris_gemm_reduce.h): struct iris_gemm_rs, AUTO, the description's rules, create (heap
 * workspace, cuBLASLt, push stream, the fused path's setup), the three paths' runs
 * (pipelined, unfused, fused), check, destroy. Part of its implementation
 * (IRIS_IMPLEMENTATION); not a public header. Uses internal/gemm/common.h for what it
 * shares with the all-gather + GEMM (cuBLASLt, errors, the error record). */
#ifndef IRIS_INTERNAL_GEMM_RS_H
#define IRIS_INTERNAL_GEMM_RS_H
#include "../../iris_gemm_reduce.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "../core/util.h"
#include "../core/plan.h"
#include "../coll/plan.h"
#include "../coll/host.h"
#include "types.h"
#include "common.h"
#include "host.h"
#include "rs_kernels.h"

struct iris_gemm_rs {
  iris_t *ctx;
  iris_gemm_rs_desc_t d;
  iris_gemm_path_t path;
  int W, me;
  unsigned err_taken;    /* the call whose failure iris_gemm_rs_check reported last (iris_gemm_err_take) */
  int broken;            /* a run failed after its opening barrier: later runs refused (iris_gemm_refuse_broken) */
  long long ml, kl;      /* rows per owner (M/W), K per rank (K/W) */
  size_t es, cs, ws;     /* element sizes of A/B, of C and of the wire (the partials' type) */
  iris_dtype_t wt;       /* the wire type: c_type (desc.exact = 0, pipelined, unfused), else fp32 */
  char *part;            /* heap: unfused, the M x N partial; pipelined and fused, W receive slots of ml x N (wire type) */
  char *red;             /* heap, pipelined ALL_REDUCE: M x N of the output type (peers' reduced rows) */
  char *stage;           /* local, pipelined: W-1 chunks of ml x N (wire type) */
#if defined(IRIS_GEMM_HAVE_BLAS)
  iris_gemm_blas_t blas; /* pipelined, unfused: the local GEMM (K = K/W, wire-type out, no bias; internal/gemm/common.h) */
#endif
  iris_stream_t copy;    /* pipelined: the push stream */
  iris_gpu_event_t fork, join, done[IRIS_MAX_RANKS];
  int sms;
  int pingpong;          /* fused: the GEMM kernel runs the ping-pong core (iris_gemm_rs_choose_pingpong) */
  int coll;              /* unfused: the sum is iris_reduce_scatter / iris_all_reduce of `part` (iris_gemm_rs_use_coll) */
  unsigned *sync;        /* heap, fused: the flags [W][halves][tiles_n] | iris_gemm_err_t | a counter per CTA */
  int rctas;             /* fused: CTAs of the reduce kernel */
  int share;             /* fused: the ranks on this rank's GPU, itself too (iris_gemm_rs_sharers) */
#if defined(IRIS_GEMM_HAVE_TMA)
  iris_gemm_rs_fused_dev_t fd; /* fused: the kernels' view */
#endif
};
/* The fused path's tile height (both core configurations). */
#define IRIS_GEMM_RS_BM 128
/* Words of the fused path's `sync` block (flags, error record, one counter per CTA slot). */
static inline size_t iris_gemm_rs_sync_words(const iris_gemm_rs_desc_t *d, int W) {
  return (size_t)W * (size_t)((d->M + 63) / 64) * (size_t)((d->N + 127) / 128) + IRIS_GEMM_ERR_WORDS + IRIS_GEMM_MAX_SLOTS;
}
/* A failed runtime call of the plan: IRIS_ERROR_GPU naming it (internal/gemm/common.h). */
static inline iris_status_t iris_gemm_rs_gpu_fail(iris_t *ctx, const char *what, iris_gpu_error_t e) { return iris_gemm_gpu_fail(ctx, "iris_gemm_rs", what, e); }
static inline iris_status_t iris_gemm_rs_gpu(const iris_gemm_rs_t *p, iris_gpu_error_t e, const char *what) { return iris_gemm_gpu_check(p->ctx, "iris_gemm_rs", e, what); }

IRIS_DEF iris_gemm_path_t iris_gemm_rs_path(const iris_gemm_rs_t *p) { return p ? p->path : IRIS_GEMM_PATH_AUTO; }

/* The type of the partials on the wire (header: Numerics): the output type (rounded once
 * before the sum, once after: the numerics of torch and NCCL), unless exact, an fp32
 * output, the fused path (fp32 only), or 16-bit inputs of the other 16-bit type than the
 * output (cuBLASLt writes a bf16 product only as bf16 or fp32, an fp16 one as fp16 or
 * fp32): then fp32. */
static inline iris_dtype_t iris_gemm_rs_wire_type(const iris_gemm_rs_desc_t *d, iris_gemm_path_t path) {
  if (d->exact || path == IRIS_GEMM_PATH_FUSED || d->c_type == IRIS_FLOAT32) return IRIS_FLOAT32;
  if (d->a_type != d->c_type && d->a_type != IRIS_FLOAT8_E4M3) return IRIS_FLOAT32;
  return d->c_type;
}


/* The unfused path hands the sum to iris_collectives.h (iris_reduce_scatter /
 * iris_all_reduce on the partial, in the output type) when the partials are already of
 * the output type and no bias is added: the same numerics (fp32 sum in rank order, one
 * rounding, the same bits on every rank), and the collectives' latency kernels instead
 * of a device barrier and a pull of whole partials (docs/tuning.md). Needs the type's SUM
 * kernels compiled in (IRIS_COLL_TYPES) and, checked at create, the collectives' staging
 * area (C is off the heap; IRIS_COLL_STAGING=0 keeps the barrier + pull). */
static inline int iris_gemm_rs_use_coll(const iris_gemm_rs_desc_t *d, iris_gemm_path_t path, iris_dtype_t wt) {
  return path == IRIS_GEMM_PATH_UNFUSED && !d->has_bias && wt == d->c_type && iris_coll_compiled_in(d->c_type, IRIS_SUM);
}

/* Rows per rank (M/W) below which AUTO takes the unfused path: W chunk GEMMs of a few rows
 * and their pushes cost more than they hide (docs/tuning.md). */
#ifndef IRIS_GEMM_RS_PIPELINE_MIN_ROWS
#define IRIS_GEMM_RS_PIPELINE_MIN_ROWS 256
#endif
/* AUTO: the pipelined path (its pushes overlap the chunk GEMMs; the unfused path moves
 * every partial after the whole GEMM; docs/tuning.md). At world size 1 there is nothing to
 * overlap, and below IRIS_GEMM_RS_PIPELINE_MIN_ROWS rows per rank too little: unfused. */

/* The same for ALL_REDUCE where the unfused path sums through iris_all_reduce
 * (docs/tuning.md). */
#ifndef IRIS_GEMM_AR_PIPELINE_MIN_ROWS
#define IRIS_GEMM_AR_PIPELINE_MIN_ROWS 512
#endif

IRIS_DEF iris_gemm_path_t iris_gemm_rs_choose_path(const iris_gemm_rs_desc_t *d, int W) {
  long long min_rows = IRIS_GEMM_RS_PIPELINE_MIN_ROWS;
  if (!d) return IRIS_GEMM_PATH_AUTO;
  if (d->path != IRIS_GEMM_PATH_AUTO) return d->path;
  if (d->op == IRIS_GEMM_ALL_REDUCE && iris_gemm_rs_use_coll(d, IRIS_GEMM_PATH_UNFUSED, iris_gemm_rs_wire_type(d, IRIS_GEMM_PATH_UNFUSED)))
    min_rows = IRIS_GEMM_AR_PIPELINE_MIN_ROWS;
  return W > 1 && d->M / W >= min_rows ? IRIS_GEMM_PATH_PIPELINED : IRIS_GEMM_PATH_UNFUSED;
}

/* The rules of the header comment on one rank's description (the same verdict everywhere:
 * the descriptions agree by then). */
static iris_status_t iris_gemm_rs_check_desc(const iris_gemm_rs_desc_t *d, int W, int me) {
  const char *bad = NULL;
  if (d->struct_size != sizeof(iris_gemm_rs_desc_t)) bad = "struct_size is wrong: start from IRIS_GEMM_RS_DESC_INIT";
  else if (d->op != IRIS_GEMM_REDUCE_SCATTER && d->op != IRIS_GEMM_ALL_REDUCE) bad = "op must be IRIS_GEMM_REDUCE_SCATTER or IRIS_GEMM_ALL_REDUCE";
  else if (d->M < 1 || d->N < 1 || d->K < 1) bad = "M, N and K must be positive";
  else if (d->M > 0x7fffffffLL || d->N > 0x7fffffffLL || d->K > 0x7fffffffLL) bad = "M, N and K must be below 2^31";
  else if (d->a_type == IRIS_FLOAT8_E5M2)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: fp8 e5m2 inputs are not supported (cuBLASLt has no e5m2 x e5m2 GEMM); use IRIS_FLOAT8_E4M3", me);
  else if (d->a_type == IRIS_FLOAT8_E4M3 && !d->b_transposed)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_gemm_rs_create: fp8 inputs need b_transposed = 1 (B_r stored N x K/W: cuBLASLt's fp8 GEMM on Hopper takes only the \"TN\" layout)", me);
  else if (d->a_type != IRIS_BFLOAT16 && d->a_type != IRIS_FLOAT16 && d->a_type != IRIS_FLOAT8_E4M3) bad = "a_type must be IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT8_E4M3";
  else if (d->c_type != IRIS_BFLOAT16 && d->c_type != IRIS_FLOAT16 && d->c_type != IRIS_FLOAT32) bad = "c_type must be IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT32";
  else if (d->M % W) bad = "M must be divisible by the world size (rank r owns rows [r*M/W, (r+1)*M/W))";
  else if (d->K % W || (d->K / W) % 8) bad = "K must be divisible by the world size, and K/world_size a multiple of 8 (16-byte rows of A)";
  else if (d->N % 8) bad = "N must be a multiple of 8 (16-byte rows)";
  else if (d->a_type == IRIS_FLOAT8_E4M3 && (d->K / W) % 16) bad = "fp8 inputs need K/world_size a multiple of 16 (16-byte rows of A and B, cuBLASLt's fp8 rule)";
  else if ((unsigned)d->path >= IRIS_GEMM_PATH_COUNT) bad = "unknown path";
  else if (d->exact != 0 && d->exact != 1) bad = "exact must be 0 (partials in the output type) or 1 (fp32 partials)";
  if (bad) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_create: %s", me, bad);
  if (d->path == IRIS_GEMM_PATH_KERNEL_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: path '%s' is not in this version: use IRIS_GEMM_PATH_PIPELINED, _UNFUSED, _FUSED or _AUTO",
                            me, iris_gemm_path_name(d->path));
#if !defined(IRIS_GEMM_HAVE_TMA)
  if (d->path == IRIS_GEMM_PATH_FUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_gemm_rs_create: the fused path needs NVIDIA's TMA GEMM core, not in this build (AMD, or IRIS_GEMM_NO_CORE): use "
                            "IRIS_GEMM_PATH_PIPELINED, _UNFUSED or _AUTO", me);
#endif
  if (d->path == IRIS_GEMM_PATH_FUSED && d->a_type == IRIS_FLOAT8_E4M3)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: the fused path takes bf16 or fp16 inputs (not fp8)", me);
  return IRIS_SUCCESS;
}

#if defined(IRIS_GEMM_HAVE_BLAS)
#if defined(IRIS_GEMM_HAVE_TMA)
/* The fused GEMM kernel's launch for one input type and B layout (setup = 1: only raise
 * its shared-memory limit, at create). Tensor maps of A_r (M x K/W) and B_r, made per call
 * on the host (the buffers may change between calls; no GPU work, so capture is fine). */
template <typename T, bool B_KN, int SIG = IRIS_GEMM_RS_FUSED_VARIANT>
static iris_gpu_error_t iris_gemm_rs_launch_fused(iris_gemm_rs_t *p, const void *a, const void *b, iris_stream_t s, int setup) {
  typedef typename iris_gemm_rs_cfg<SIG>::type Cfg;
  static_assert(Cfg::BM == IRIS_GEMM_RS_BM && Cfg::BN % IRIS_GEMM_RS_FLAG_BN == 0, "iris_gemm_rs: the flags are laid out for 128-row tiles, 128 columns each");
  void (*k)(const iris_gemm_rs_fused_dev_t, const CUtensorMap, const CUtensorMap) = iris_gemm_rs_fused_kernel<Cfg, T, B_KN, SIG>;
  CUtensorMap ta, tb;
  const int f16 = p->d.a_type == IRIS_FLOAT16;
  iris_gpu_error_t e;
  if (setup) return iris_gpu_func_max_smem((const void *)k, (int)Cfg::smem_bytes);
  if ((e = iris_gemm_tma_map(&ta, a, f16, p->d.M, p->kl, p->kl, Cfg::BM)) != IRIS_GPU_SUCCESS) return e;
  if ((e = iris_gemm_tma_map_b<Cfg>(&tb, b, f16, B_KN, p->kl, p->d.N, B_KN ? p->d.N : p->kl)) != IRIS_GPU_SUCCESS) return e;
  k<<<p->sms, Cfg::threads, Cfg::smem_bytes, s>>>(p->fd, ta, tb);
  return iris_gpu_last_error();
}
/* The plan's variant (setup: both cores' kernels of this type and layout) */
template <typename T, bool B_KN>
static iris_gpu_error_t iris_gemm_rs_launch_fused_plan(iris_gemm_rs_t *p, const void *a, const void *b, iris_stream_t s, int setup) {
  iris_gpu_error_t e;
  if (setup && (e = iris_gemm_rs_launch_fused<T, B_KN, IRIS_GEMM_RS_PP_VARIANT>(p, a, b, s, 1)) != IRIS_GPU_SUCCESS) return e;
  if (!setup && p->pingpong) return iris_gemm_rs_launch_fused<T, B_KN, IRIS_GEMM_RS_PP_VARIANT>(p, a, b, s, 0);
  return iris_gemm_rs_launch_fused<T, B_KN, IRIS_GEMM_RS_FUSED_VARIANT>(p, a, b, s, setup);
}
static iris_gpu_error_t iris_gemm_rs_launch_fused_any(iris_gemm_rs_t *p, const void *a, const void *b, iris_stream_t s, int setup) {
  const int kn = !p->d.b_transposed;
  if (p->d.a_type == IRIS_FLOAT16)
    return kn ? iris_gemm_rs_launch_fused_plan<iris_gemm_elem_f16_t, true>(p, a, b, s, setup) : iris_gemm_rs_launch_fused_plan<iris_gemm_elem_f16_t, false>(p, a, b, s, setup);
  return kn ? iris_gemm_rs_launch_fused_plan<iris_gemm_elem_bf16_t, true>(p, a, b, s, setup) : iris_gemm_rs_launch_fused_plan<iris_gemm_elem_bf16_t, false>(p, a, b, s, setup);
}
#endif
/* Ping-pong (128 x 128 tiles) or cooperative (128 x 256) core for an M x N x kl (K/W)
 * partial on `sms` SMs; force 0 or 1 decides, -1 measures: ping-pong at short K (kl <=
 * 2048: the fp32 epilogue is a large share of a tile's time there, and ping-pong hides it)
 * or where the cooperative tiles keep under 75% of the SM-waves busy and the smaller
 * tiles keep more. */
static inline int iris_gemm_rs_choose_pingpong(long long M, long long N, long long kl, int sms, int force) {
  if (force >= 0) return force != 0;
  if (sms < 1) return 0;
  if (kl <= 2048) return 1;
  const long long tm = (M + 127) / 128, coop = tm * ((N + 255) / 256), pp = tm * ((N + 127) / 128);
  const double e_coop = (double)coop / (double)(((coop + sms - 1) / sms) * sms), e_pp = (double)pp / (double)(((pp + sms - 1) / sms) * sms);
  return e_coop < 0.75 && e_pp > e_coop;
}

#if defined(IRIS_GEMM_HAVE_TMA)
/* The words of the fused path's `sync` block (flags [W][halves][tiles_n] | error record |
 * counters) as call `epoch` of every GEMM CTA leaves them on this rank: the flags of the
 * 64-row halves that hold rows of this rank, from every source rank, and the GEMM CTAs'
 * counters hold epoch, the rest 0 (no other flag is signalled here; no call failed).
 * Returns their count (words NULL: only the count). For IRIS_GEMM_TEST_WRAP
 * (iris_gemm_rs_start_near_wrap), and for the test that crosses the wrap, which compares
 * the block with it after its calls. */
static size_t iris_gemm_rs_flags_after(const iris_gemm_rs_t *p, unsigned epoch, unsigned *words) {
  const iris_gemm_rs_fused_dev_t *v = &p->fd;
  const size_t flags = (size_t)p->W * v->halves * v->tiles_n, n = flags + IRIS_GEMM_ERR_WORDS + (size_t)p->sms;
  const long long row0 = (long long)p->me * p->ml;
  const int h0 = (int)(row0 / 64), h1 = (int)((row0 + p->ml - 1) / 64); /* as the reduce kernel waits */
  size_t i;
  int q, h, nt;
  if (!words) return n;
  memset(words, 0, n * sizeof *words);
  for (q = 0; q < p->W; q++)
    for (h = h0; h <= h1; h++)
      for (nt = 0; nt < v->tiles_n; nt++) words[((size_t)q * v->halves + h) * v->tiles_n + nt] = epoch;
  for (i = 0; i < (size_t)p->sms; i++) words[flags + IRIS_GEMM_ERR_WORDS + i] = epoch;
  return n;
}
/* IRIS_GEMM_TEST_WRAP=n (tests; read at create, fused path): the `sync` block as if 2^32 -
 * n calls had run, so that the n-th call from now runs at epoch 0 and a test crosses
 * 0xffffffff -> 0 -> 1 at once (a plan gets there after 2^32 calls: days of decode).
 * Every word holds what the call before left (iris_gemm_rs_flags_after): a flag left at 0
 * would let the reduce of epoch 0 take a tile before its push. Written before the create's
 * last exchange: no peer signals into the block before. */
static iris_status_t iris_gemm_rs_start_near_wrap(iris_gemm_rs_t *p) {
  int n = 0;
  const int got = iris_detail_env_int("IRIS_GEMM_TEST_WRAP", &n);
  const size_t words = iris_gemm_rs_flags_after(p, 0u, NULL);
  unsigned *w;
  iris_gpu_error_t e;
  if (got < 0) return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_gemm_rs_create");
  if (got == 0) return IRIS_SUCCESS;
  if (!(w = (unsigned *)malloc(words * sizeof *w))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  iris_gemm_rs_flags_after(p, 0u - (unsigned)n, w);
  e = iris_gpu_copy_to_device(p->sync, w, words * sizeof *w);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize(); /* a pageable copy may return before it lands; the first run may be on a non-blocking stream */
  free(w);
  return e == IRIS_GPU_SUCCESS ? IRIS_SUCCESS : iris_gemm_rs_gpu_fail(p->ctx, "IRIS_GEMM_TEST_WRAP: writing the flag block", e);
}
#endif

#if defined(IRIS_GEMM_HAVE_TMA)
/* Collective (the fused path's create): how many ranks run on this rank's GPU, itself too
 * (the same PCI location, whatever process), to size the reduce kernel. Every rank of a
 * fused create calls it before any step that may fail on one rank only (the path is
 * agreed): a rank that skipped it would pair its plan_agree with the peers' key exchange. */
static iris_status_t iris_gemm_rs_sharers(iris_t *ctx, int *share) {
  const int W = iris_world_size(ctx);
  int key[3] = {0, 0, 0}, keys[IRIS_MAX_RANKS][3], q;
  iris_status_t st;
  *share = 1;
  iris_gpu_pci_location(&key[0], &key[1], &key[2], iris_device_ordinal(ctx));
  if ((st = iris_allgather_host(ctx, key, keys, sizeof key)) != IRIS_SUCCESS) return st;
  for (*share = 0, q = 0; q < W; ++q) *share += !memcmp(keys[q], key, sizeof key);
  return IRIS_SUCCESS;
}
#endif

/* The fused path's local part of create (after the heap blocks): the TMA core's presence
 * (else IRIS_ERROR_UNSUPPORTED), the reduce kernel's size (its CTAs wait for peers' tiles,
 * so where ranks share a GPU, p->share, they hold at most half of its SMs together and the
 * peers' GEMM CTAs always find SMs) and the kernels' setup. No exchange: the ranks'
 * exchange came before the local steps (iris_gemm_rs_sharers). */
static iris_status_t iris_gemm_rs_create_fused(iris_gemm_rs_t *p) {
#if defined(IRIS_GEMM_HAVE_TMA)
  iris_gemm_rs_fused_dev_t *v = &p->fd;
  const long long halves = (p->d.M + 63) / 64, tiles_n = (p->d.N + IRIS_GEMM_RS_FLAG_BN - 1) / IRIS_GEMM_RS_FLAG_BN; /* flag columns */
  const int share = p->share;
  iris_gpu_error_t e;
  if (!iris_gemm_probe_wgmma())
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_gemm_rs_create: the fused path needs the TMA GEMM core (wgmma): build with an sm_90a device pass (-arch=sm_90a) and "
                            "run on a Hopper GPU", p->me);
  if (p->sms < 1 || p->sms > IRIS_GEMM_MAX_SLOTS) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: %d SMs", p->me, p->sms);
  if ((e = iris_gemm_rs_launch_fused_any(p, NULL, NULL, NULL, 1)) != IRIS_GPU_SUCCESS) return iris_gemm_rs_gpu_fail(p->ctx, "setting the fused kernel's shared memory", e);
  {
    /* the environment's IRIS_GEMM_RS_PINGPONG (0, 1 or auto) overrides the macro's default */
    static const char *const cores[3] = {"0", "1", "auto"};
    int force = IRIS_GEMM_RS_PINGPONG, which = 0;
    const int got = iris_detail_env_choice("IRIS_GEMM_RS_PINGPONG", cores, 3, " (the fused kernel's core: cooperative, ping-pong, by waves)", &which);
    if (got < 0) return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_gemm_rs_create");
    if (got > 0) force = which == 2 ? -1 : which;
    p->pingpong = iris_gemm_rs_choose_pingpong(p->d.M, p->d.N, p->kl, p->sms, force);
  }
  /* one rank on this GPU: its GEMM kernel is done when the reduce kernel starts (same
   * stream) and the peers multiply on their own GPUs, so the reducers take every SM (at
   * world 1, half the SMs made the reduce 4x slower than its memory traffic, one H100) */
  p->rctas = share <= 1 ? p->sms : p->sms / (2 * share);
  if (p->rctas < 1) p->rctas = 1;
  if ((long long)p->rctas > ((p->ml + 63) / 64 + 1) * tiles_n) p->rctas = (int)(((p->ml + 63) / 64 + 1) * tiles_n);
  memset(v, 0, sizeof *v);
  v->ctx = iris_device_context(p->ctx);
  v->part = (float *)p->part;
  v->flags = p->sync;
  v->err = (iris_gemm_err_t *)(p->sync + (size_t)p->W * halves * tiles_n);
  v->counters = (unsigned *)(v->err + 1);
  v->M = (int)p->d.M;
  v->N = (int)p->d.N;
  v->K = (int)p->kl;
  v->ml = (int)p->ml;
  v->halves = (int)halves;
  v->tiles_m = (int)((p->d.M + IRIS_GEMM_RS_BM - 1) / IRIS_GEMM_RS_BM);
  v->tiles_n = (int)tiles_n;
  /* owner order: first the m-tile that holds rank me+1's first row */
  v->rot = (int)((long long)((p->me + 1) % p->W) * p->ml / IRIS_GEMM_RS_BM);
  v->raster = 8; /* groups of 8 m-tiles share B tiles in L2 */
  return iris_gemm_rs_start_near_wrap(p);
#else
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: no fused path in this build", p->me);
#endif
}

/* The local part of create, after the heap blocks: the cuBLASLt GEMM of the local partial
 * (internal/gemm/common.h), chunk staging, the push stream and its events. Returns the
 * first failure. */
static iris_status_t iris_gemm_rs_create_local(iris_gemm_rs_t *p) {
  iris_gemm_blas_t *bl = &p->blas;
  iris_gemm_blas_shape_t *unused;
  iris_status_t st;
  int q;
  if (iris_gpu_sm_count(&p->sms, iris_device_ordinal(p->ctx)) != IRIS_GPU_SUCCESS || p->sms < 1) {
    iris_gpu_last_error();
    return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: iris_gemm_rs_create: the GPU's SM count could not be read", p->me);
  }
  if (p->path == IRIS_GEMM_PATH_FUSED) return iris_gemm_rs_create_fused(p);
  bl->ctx = p->ctx;
  bl->who = "iris_gemm_rs";
  bl->me = p->me;
  bl->N = p->d.N;
  bl->K = p->kl;
  bl->ab_type = p->d.a_type;
  bl->c_type = p->wt;
  bl->b_transposed = p->d.b_transposed;
  bl->has_bias = 0;
  bl->streams = 1;
  if ((st = iris_gemm_blas_init(bl)) != IRIS_SUCCESS) return st;
  if ((st = iris_gemm_blas_shape(bl, p->path == IRIS_GEMM_PATH_UNFUSED ? p->d.M : p->ml, p->kl, &unused)) != IRIS_SUCCESS) return st;
  if (p->path != IRIS_GEMM_PATH_PIPELINED) return IRIS_SUCCESS;
  if (p->W > 1 && iris_gpu_malloc((void **)&p->stage, (size_t)(p->W - 1) * p->ml * p->d.N * p->ws, IRIS_HEAP_MEMORY_COARSE) != IRIS_GPU_SUCCESS) {
    iris_gpu_last_error();
    p->stage = NULL;
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: iris_gemm_rs_create: no device memory for the chunk staging buffer (%zu bytes)", p->me,
                            (size_t)(p->W - 1) * p->ml * p->d.N * p->ws);
  }
  if (iris_gpu_stream_create(&p->copy) != IRIS_GPU_SUCCESS || iris_gpu_event_create(&p->fork) != IRIS_GPU_SUCCESS || iris_gpu_event_create(&p->join) != IRIS_GPU_SUCCESS)
    return iris_gemm_rs_gpu_fail(p->ctx, "creating the push stream", iris_gpu_last_error());
  for (q = 0; q < p->W; ++q)
    if (iris_gpu_event_create(&p->done[q]) != IRIS_GPU_SUCCESS) return iris_gemm_rs_gpu_fail(p->ctx, "creating a chunk event", iris_gpu_last_error());
  return IRIS_SUCCESS;
}

/* Enqueue the reduction: rows x N from srcs into outs (see iris_gemm_rs_red_t). */
static iris_status_t iris_gemm_rs_reduce(iris_gemm_rs_t *p, iris_gemm_rs_red_t *r, iris_stream_t s) {
  const long long nv = r->rows * r->N / (long long)(16 / p->ws);
  const int fp32_wire = p->wt == IRIS_FLOAT32;
  long long blocks = (nv + 255) / 256;
  if (blocks > 8LL * p->sms) blocks = 8LL * p->sms;
  if (blocks < 1) blocks = 1;
  switch (p->d.c_type) {
  case IRIS_BFLOAT16:
    if (fp32_wire) iris_gemm_rs_reduce_kernel<iris_bf16_t, float><<<(unsigned)blocks, 256, 0, s>>>(*r);
    else iris_gemm_rs_reduce_kernel<iris_bf16_t, iris_bf16_t><<<(unsigned)blocks, 256, 0, s>>>(*r);
    break;
  case IRIS_FLOAT16:
    if (fp32_wire) iris_gemm_rs_reduce_kernel<iris_f16_t, float><<<(unsigned)blocks, 256, 0, s>>>(*r);
    else iris_gemm_rs_reduce_kernel<iris_f16_t, iris_f16_t><<<(unsigned)blocks, 256, 0, s>>>(*r);
    break;
  default: iris_gemm_rs_reduce_kernel<float, float><<<(unsigned)blocks, 256, 0, s>>>(*r); break;
  }
  if (iris_gpu_last_error() != IRIS_GPU_SUCCESS) return iris_gemm_rs_gpu_fail(p->ctx, "launching the reduction kernel", iris_gpu_last_error());
  return IRIS_SUCCESS;
}

/* UNFUSED: the whole partial into the heap, a barrier, every rank reduces its rows (all
 * rows for ALL_REDUCE) from the W partials, read through the heap. The next call's
 * opening barrier keeps a peer from overwriting its partial while this rank reads it.
 * With p->coll: the partial, then one collective of the output type from it into C (the
 * collective meets the peers itself: no barrier of the plan's own). */
static iris_status_t iris_gemm_rs_run_unfused(iris_gemm_rs_t *p, const char *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  const long long N = p->d.N, row0 = p->d.op == IRIS_GEMM_ALL_REDUCE ? 0 : p->me * p->ml;
  iris_gemm_rs_red_t r;
  iris_status_t st;
  int q;
  if ((st = iris_gemm_blas_run(&p->blas, a, p->kl, p->d.M, 0, b, NULL, p->part, s, 0)) != IRIS_SUCCESS) return st;
  if (p->coll)
    return p->d.op == IRIS_GEMM_ALL_REDUCE ? iris_all_reduce(p->ctx, p->part, c, (size_t)p->d.M * N, p->d.c_type, IRIS_SUM, s)
                                           : iris_reduce_scatter(p->ctx, p->part, c, (size_t)p->ml * N, p->d.c_type, IRIS_SUM, s);
  if ((st = iris_barrier_device(p->ctx, s)) != IRIS_SUCCESS) return st;
  memset(&r, 0, sizeof r);
  for (q = 0; q < p->W; ++q) {
    void *src;
    iris_translate_host(p->ctx, p->part, q, &src);
    r.src[q] = (const char *)src + (size_t)row0 * N * p->ws;
  }
  r.nsrc = p->W;
  r.out[0] = c;
  r.nout = 1;
  r.bias = bias;
  r.rows = p->d.op == IRIS_GEMM_ALL_REDUCE ? p->d.M : p->ml;
  r.N = N;
  return iris_gemm_rs_reduce(p, &r, s);
}

/* The reduction of this rank's rows from the W receive slots (pipelined, fused): into C
 * (ALL_REDUCE: its own rows of C, and the same rows of every peer's `red` copy). */
static void iris_gemm_rs_own_rows(iris_gemm_rs_t *p, iris_gemm_rs_red_t *r, const void *bias, void *c) {
  const long long N = p->d.N, ml = p->ml;
  const int all = p->d.op == IRIS_GEMM_ALL_REDUCE;
  int q;
  memset(r, 0, sizeof *r);
  for (q = 0; q < p->W; ++q) r->src[q] = p->part + (size_t)q * ml * N * p->ws;
  r->nsrc = p->W;
  r->bias = bias;
  r->rows = ml;
  r->N = N;
  r->out[r->nout++] = all ? (char *)c + (size_t)p->me * ml * N * p->cs : c;
  if (all)
    for (q = 0; q < p->W; ++q) {
      void *dst;
      if (q == p->me) continue;
      iris_translate_host(p->ctx, p->red + (size_t)p->me * ml * N * p->cs, q, &dst);
      r->out[r->nout++] = dst;
    }
}
/* ALL_REDUCE after the reduction of the own rows: a barrier (every rank's rows are in
 * `red`), then this rank copies the peers' rows from `red` into C. */
static iris_status_t iris_gemm_rs_gather(iris_gemm_rs_t *p, void *c, iris_stream_t s) {
  const size_t rows_bytes = (size_t)p->ml * p->d.N * p->cs;
  iris_status_t st;
  int q;
  if ((st = iris_barrier_device(p->ctx, s)) != IRIS_SUCCESS) return st;
  for (q = 0; q < p->W; ++q) {
    if (q == p->me) continue;
    if ((st = iris_gemm_rs_gpu(p, iris_gpu_memcpy_async((char *)c + q * rows_bytes, p->red + q * rows_bytes, rows_bytes, s), "copying the peers' rows into C")) != IRIS_SUCCESS) return st;
  }
  return IRIS_SUCCESS;
}

/* PIPELINED: the chunk GEMMs in owner order (me+1, ..., me-1, me) on the caller's stream;
 * each non-own chunk goes to the staging buffer, and the push stream copies it into its
 * owner's slot `me` as soon as it is done; the own chunk lands in the own slot. Then the
 * push stream joins, a barrier (every slot on every rank is full), the reduction of the
 * own rows. ALL_REDUCE: the reduction also stores the rounded rows into every peer's `red`
 * copy; a second barrier, then this rank copies the peers' rows from `red` into C. The
 * next call's opening barrier keeps peers from refilling the slots (or `red`) before
 * this rank has read them. */
static iris_status_t iris_gemm_rs_run_pipelined(iris_gemm_rs_t *p, const char *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  const long long N = p->d.N, ml = p->ml;
  const size_t chunk = (size_t)ml * N * p->ws, a_rows = (size_t)ml * p->kl * p->es;
  const int all = p->d.op == IRIS_GEMM_ALL_REDUCE;
  iris_gemm_rs_red_t r;
  iris_status_t st;
  int i, q;
  if ((st = iris_gemm_rs_gpu(p, iris_gpu_event_record(p->fork, s), "recording the fork event")) != IRIS_SUCCESS) return st;
  if ((st = iris_gemm_rs_gpu(p, iris_gpu_stream_wait(p->copy, p->fork), "forking the push stream")) != IRIS_SUCCESS) return st;
  for (i = 1; i < p->W; ++i) {
    char *st_i = p->stage + (size_t)(i - 1) * chunk;
    void *dst;
    q = (p->me + i) % p->W;
    if ((st = iris_gemm_blas_run(&p->blas, a + (size_t)q * a_rows, p->kl, ml, 0, b, NULL, st_i, s, 0)) != IRIS_SUCCESS) return st;
    if ((st = iris_gemm_rs_gpu(p, iris_gpu_event_record(p->done[q], s), "recording a chunk event")) != IRIS_SUCCESS) return st;
    if ((st = iris_gemm_rs_gpu(p, iris_gpu_stream_wait(p->copy, p->done[q]), "waiting for a chunk")) != IRIS_SUCCESS) return st;
    iris_translate_host(p->ctx, p->part + (size_t)p->me * chunk, q, &dst);
    if ((st = iris_gemm_rs_gpu(p, iris_gpu_memcpy_async(dst, st_i, chunk, p->copy), "pushing a chunk to its owner")) != IRIS_SUCCESS) return st;
  }
  if ((st = iris_gemm_blas_run(&p->blas, a + (size_t)p->me * a_rows, p->kl, ml, 0, b, NULL, p->part + (size_t)p->me * chunk, s, 0)) != IRIS_SUCCESS) return st;
  if ((st = iris_gemm_rs_gpu(p, iris_gpu_event_record(p->join, p->copy), "recording the push stream's end")) != IRIS_SUCCESS) return st;
  if ((st = iris_gemm_rs_gpu(p, iris_gpu_stream_wait(s, p->join), "joining the push stream")) != IRIS_SUCCESS) return st;
  if ((st = iris_barrier_device(p->ctx, s)) != IRIS_SUCCESS) return st; /* every slot full */
  iris_gemm_rs_own_rows(p, &r, bias, c);
  if ((st = iris_gemm_rs_reduce(p, &r, s)) != IRIS_SUCCESS || !all) return st;
  return iris_gemm_rs_gather(p, c, s);
}

#if defined(IRIS_GEMM_HAVE_TMA)
/* FUSED: the GEMM kernel (pushes every tile to its owner, signals it), then the reduce
 * kernel (waits for the W contributions of each of its tiles, reduces them); ALL_REDUCE:
 * as the pipelined path after its reduction (iris_gemm_rs_gather). Protocol at
 * iris_gemm_rs_fused_dev_t. */
static iris_status_t iris_gemm_rs_run_fused(iris_gemm_rs_t *p, const void *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  iris_gemm_rs_red_t r;
  iris_gpu_error_t e;
  if ((e = iris_gemm_rs_launch_fused_any(p, a, b, s, 0)) != IRIS_GPU_SUCCESS) return iris_gemm_rs_gpu_fail(p->ctx, "launching the fused GEMM kernel", e);
  iris_gemm_rs_own_rows(p, &r, bias, c);
  switch (p->d.c_type) {
  case IRIS_BFLOAT16: iris_gemm_rs_fused_reduce_kernel<iris_bf16_t><<<p->rctas, 512, 0, s>>>(p->fd, r, IRIS_GEMM_RS_FLAG_BN); break;
  case IRIS_FLOAT16: iris_gemm_rs_fused_reduce_kernel<iris_f16_t><<<p->rctas, 512, 0, s>>>(p->fd, r, IRIS_GEMM_RS_FLAG_BN); break;
  default: iris_gemm_rs_fused_reduce_kernel<float><<<p->rctas, 512, 0, s>>>(p->fd, r, IRIS_GEMM_RS_FLAG_BN); break;
  }
  if ((e = iris_gpu_last_error()) != IRIS_GPU_SUCCESS) return iris_gemm_rs_gpu_fail(p->ctx, "launching the fused reduce kernel", e);
  return p->d.op == IRIS_GEMM_ALL_REDUCE ? iris_gemm_rs_gather(p, c, s) : IRIS_SUCCESS;
}
#endif
#endif /* IRIS_GEMM_HAVE_BLAS */

IRIS_DEF iris_status_t iris_gemm_rs_destroy(iris_gemm_rs_t *p) {
  int q;
  if (!p) return IRIS_SUCCESS;
#if defined(IRIS_GEMM_HAVE_BLAS)
  {
    int old = -1;
    iris_gpu_get_device(&old);
    iris_gpu_set_device(iris_device_ordinal(p->ctx));
    iris_gpu_synchronize();
    if (p->copy) iris_gpu_stream_destroy(p->copy);
    if (p->fork) iris_gpu_event_destroy(p->fork);
    if (p->join) iris_gpu_event_destroy(p->join);
    for (q = 0; q < IRIS_MAX_RANKS; ++q)
      if (p->done[q]) iris_gpu_event_destroy(p->done[q]);
    if (p->stage) iris_gpu_free(p->stage);
    if (old >= 0) iris_gpu_set_device(old);
  }
  iris_gemm_blas_destroy(&p->blas);
#endif
  (void)q;
  /* heap blocks: reverse order, every rank */
  if (p->sync) iris_free(p->ctx, p->sync);
  if (p->red) iris_free(p->ctx, p->red);
  if (p->part) iris_free(p->ctx, p->part);
  free(p);
  return IRIS_SUCCESS;
}

static inline iris_status_t iris_gemm_rs_destroy_plan(iris_gemm_rs_t *p) { return iris_gemm_rs_destroy(p); }

/* The lifecycle of internal/core/plan.h. */
static const iris_detail_plan_kind_t iris_gemm_rs_kind = {"iris_gemm_rs_create", "the GEMM + reduce-scatter / all-reduce", "problem",
                                                          "op, shape, types, layout, bias, path or exact"};

IRIS_DEF iris_status_t iris_gemm_rs_create(iris_t *ctx, const iris_gemm_rs_desc_t *desc, iris_gemm_rs_t **out) {
  iris_status_t st;
  int W, me;
  if ((st = iris_detail_plan_args(&iris_gemm_rs_kind, ctx, desc, out)) != IRIS_SUCCESS) return st;
  if (out) *out = NULL;
  {
    iris_gemm_rs_desc_t none; /* a NULL desc or out: plan_meet refuses it on every rank */
    const iris_gemm_rs_desc_t *d = desc && out ? desc : (memset(&none, 0, sizeof none), &none);
    const long long mine[11] = {(long long)d->struct_size, d->op, d->M, d->N, d->K, d->a_type, d->c_type, d->b_transposed, d->has_bias, d->path, d->exact};
    if ((st = iris_detail_plan_meet(&iris_gemm_rs_kind, ctx, desc, out, mine, 11)) != IRIS_SUCCESS) return st;
  }
  W = iris_world_size(ctx);
  me = iris_rank(ctx);
  if ((st = iris_gemm_rs_check_desc(desc, W, me)) != IRIS_SUCCESS) return st;
#if !defined(IRIS_GEMM_HAVE_BLAS)
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: the GEMM + reduce paths need cuBLASLt (not found, IRIS_GEMM_NO_BLAS, or AMD: no hipBLASLt path)", me);
#else
  iris_gemm_rs_t *p;
  size_t part_bytes = 0, red_bytes = 0, sync_bytes = 0;
  int old, share = 1;
  if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st; /* the device barrier, before any capture */
  old = iris_detail_plan_device(ctx);
#if defined(IRIS_GEMM_HAVE_TMA)
  /* the plan's own exchange first, on every rank whatever its later steps do */
  if (iris_gemm_rs_choose_path(desc, W) == IRIS_GEMM_PATH_FUSED) st = iris_gemm_rs_sharers(ctx, &share);
#endif
  if ((p = (iris_gemm_rs_t *)iris_detail_plan_alloc(&iris_gemm_rs_kind, ctx, sizeof *p, &st)) != NULL) {
    p->ctx = ctx;
    p->d = *desc;
    p->W = W;
    p->me = me;
    p->ml = desc->M / W;
    p->kl = desc->K / W;
    p->es = iris_dtype_size(desc->a_type);
    p->cs = iris_dtype_size(desc->c_type);
    p->path = iris_gemm_rs_choose_path(desc, W);
    p->wt = iris_gemm_rs_wire_type(desc, p->path);
    p->ws = iris_dtype_size(p->wt);
    p->coll = iris_gemm_rs_use_coll(desc, p->path, p->wt) && iris_coll_stages(ctx); /* C is off the heap */
    p->share = share;
    part_bytes = (size_t)desc->M * desc->N * p->ws;
    red_bytes = p->path != IRIS_GEMM_PATH_UNFUSED && desc->op == IRIS_GEMM_ALL_REDUCE ? (size_t)desc->M * desc->N * p->cs : 0;
    sync_bytes = p->path == IRIS_GEMM_PATH_FUSED ? iris_gemm_rs_sync_words(desc, W) * sizeof(unsigned) : 0;
  }
  /* heap blocks: the same sequence on every rank (the heap is symmetric, so the verdict
   * is the same everywhere); none where the exchange or the allocation failed */
  if (st == IRIS_SUCCESS) {
    st = iris_malloc(ctx, part_bytes, (void **)&p->part);
    if (st == IRIS_SUCCESS && red_bytes) st = iris_malloc(ctx, red_bytes, (void **)&p->red);
    if (st == IRIS_SUCCESS && sync_bytes) st = iris_calloc(ctx, sync_bytes, (void **)&p->sync); /* flags start at 0, never reset */
    if (st != IRIS_SUCCESS)
      st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY,
                            "rank %d: iris_gemm_rs_create: the symmetric heap (%zu bytes, %zu in use) cannot hold the plan's workspace (%zu bytes: the partials, M x N x %zu%s); "
                            "give iris_init a larger heap_size",
                            me, iris_heap_size(ctx), iris_heap_used(ctx), part_bytes + red_bytes + sync_bytes, p->ws, red_bytes ? ", and M x N of the output type" : "");
  }
  if (st == IRIS_SUCCESS) st = iris_gemm_rs_create_local(p);
  st = iris_detail_plan_agree(ctx, st, "iris_gemm_rs_create", NULL, 0, "", ""); /* a plan on every rank or on none */
  iris_detail_plan_device_back(old);
  return iris_detail_plan_finish(st, p, out, iris_gemm_rs_destroy_plan);
#endif
}

/* The run's rules on its arguments (iris_gemm_reduce.h, Rules; unscaled: iris_gemm_rs_run,
 * which an fp8 plan refuses): IRIS_SUCCESS, or the refusal naming the rule. Nothing is
 * enqueued. */
static iris_status_t iris_gemm_rs_check_args(const iris_gemm_rs_t *p, const void *a, const void *b, const float *a_scale, const float *b_scale, const void *bias,
                                             const void *c, int unscaled) {
  iris_status_t st;
  if (unscaled && p->d.a_type == IRIS_FLOAT8_E4M3)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: an fp8 plan needs per-tensor scales: call iris_gemm_rs_run_scaled", p->me);
  if (!a || !b || !c) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: NULL buffer (a %p, b %p, c %p)", p->me, a, b, c);
  if ((st = iris_gemm_check_scales(p->d.a_type, a_scale, b_scale, "iris_gemm_rs_run_scaled", p->me)) != IRIS_SUCCESS) return st;
  if (!p->d.has_bias != !bias)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: bias %s, but the plan says has_bias = %d", p->me, bias ? "given" : "NULL", p->d.has_bias);
  if (((uintptr_t)a | (uintptr_t)b) % 256)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: A and B must be 256-byte aligned (cuBLASLt): a %p, b %p", p->me, a, b);
  if (((uintptr_t)c | (uintptr_t)bias) % 16)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: C and bias must be 16-byte aligned: c %p, bias %p", p->me, c, bias);
  {
    /* C is written while this rank's GEMM may still read A and B (the pipelined path's
     * later chunks) and while the reduce reads the bias: an overlap gives a wrong C */
    const size_t c_bytes = (size_t)(p->d.op == IRIS_GEMM_ALL_REDUCE ? p->d.M : p->ml) * (size_t)p->d.N * p->cs;
    const char *with = iris_gemm_overlap(c, c_bytes, a, (size_t)p->d.M * (size_t)p->kl * p->es)      ? "A"
                       : iris_gemm_overlap(c, c_bytes, b, (size_t)p->kl * (size_t)p->d.N * p->es)    ? "B"
                       : iris_gemm_overlap(c, c_bytes, bias, (size_t)p->d.N * p->cs)                 ? "the bias"
                                                                                                     : NULL;
    if (with)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: C (%p, %zu bytes) overlaps %s: C is written while %s is still read; give C memory of its own",
                              p->me, c, c_bytes, with, with);
  }
  return IRIS_SUCCESS;
}

/* The part a run refused on this rank takes in the call (internal/gemm/host.h, "Refused
 * runs"; the order region open), so that the peers' run of it ends at once:
 *   pipelined, unfused by a barrier and a pull: their run makes two device barriers (the
 *     opening one, "every partial is in place"; the all-reduce's pipelined path a third,
 *     before its gather): a refused barrier (their opening barrier sees a mismatch naming
 *     this rank: IRIS_ERROR_MISMATCH through the context), then plain ones (they meet);
 *   unfused through a collective: one refused barrier, as a refused collective takes part
 *     (their reduce-scatter / all-reduce mismatches it and reduces nothing; fatal to the
 *     context where their collective is split into several launches);
 *   fused: a plain opening barrier (the ranks meet), iris_gemm_rs_refused_kernel (their
 *     reduce kernel's waits for this rank's tiles end at once, it writes no row of C, and
 *     iris_gemm_rs_check names this rank), the all-reduce's gather barrier (plain).
 * Their C of the call is undefined, but left as it was by the fused REDUCE_SCATTER
 * (docs/gemm_reduce.md); nothing of this rank's is read or written. Returns whether it
 * launched (nothing at world size 1). */
static int iris_gemm_rs_take_part(iris_gemm_rs_t *p, iris_stream_t stream) {
  const int all = p->d.op == IRIS_GEMM_ALL_REDUCE;
  if (p->W < 2) return 0;
#if defined(IRIS_GEMM_HAVE_TMA)
  if (p->path == IRIS_GEMM_PATH_FUSED) {
    int took = iris_gemm_part_barriers(p->ctx, 0, 1, stream);
    iris_gemm_rs_refused_kernel<<<1, 256, 0, stream>>>(p->fd, p->sms);
    took = took && iris_gpu_last_error() == IRIS_GPU_SUCCESS;
    return (all ? iris_gemm_part_barriers(p->ctx, 0, 1, stream) : 1) && took;
  }
#endif
  if (p->coll) return iris_gemm_part_barriers(p->ctx, 1, 1, stream);
  return iris_gemm_part_barriers(p->ctx, 1, p->path == IRIS_GEMM_PATH_PIPELINED && all ? 3 : 2, stream);
}
/* A run refused with st before any launch of its call, its order region open (in_order),
 * or not yet (then it opens one for the part; none where the context has a fatal fault:
 * every peer's wait gives up anyway): it takes part, and st is returned with its detail,
 * which says so where it did. */
static iris_status_t iris_gemm_rs_refuse(iris_gemm_rs_t *p, iris_status_t st, iris_stream_t stream, int in_order) {
  char why[sizeof iris_detail_errbuf];
  int took = 0;
  iris_detail_copy(why, sizeof why, iris_detail_errbuf);
  if (in_order) took = iris_gemm_rs_take_part(p, stream);
  else if (iris_detail_plan_run_begin(p->ctx, stream) == IRIS_SUCCESS) {
    took = iris_gemm_rs_take_part(p, stream);
    (void)iris_detail_plan_run_end(p->ctx, stream, IRIS_SUCCESS);
  }
  return iris_detail_fail(st, "%s%s", why, took ? IRIS_GEMM_TOOK_PART : "");
}

/* Both runs. A context's fatal fault refuses the run at once; the run is ordered after the
 * context's previous communication call, whatever its stream (iris_detail_order_begin,
 * iris.h). A run refused for its arguments takes part (iris_gemm_rs_take_part); a broken
 * plan's run takes none (its calls are out of step already: every rank destroys it). */
static iris_status_t iris_gemm_rs_run_any(iris_gemm_rs_t *p, const void *a, const void *b, const float *a_scale, const float *b_scale, const void *bias, void *c,
                                          iris_stream_t stream, int unscaled) {
  iris_status_t st;
  int paired = 0;
  if (!p) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_gemm_rs_run: NULL plan");
  if ((st = iris_gemm_refuse_broken(p->broken, "iris_gemm_rs_run", p->me)) != IRIS_SUCCESS) return st;
  if ((st = iris_gemm_rs_check_args(p, a, b, a_scale, b_scale, bias, c, unscaled)) != IRIS_SUCCESS) return iris_gemm_rs_refuse(p, st, stream, 0);
  if ((st = iris_detail_plan_run_begin(p->ctx, stream)) != IRIS_SUCCESS) return st;
#if defined(IRIS_GEMM_HAVE_BLAS)
  /* the scales first: a failure here comes before anything the peers pair with, so the run
   * takes part as a refused one (a device barrier enqueued alone would shift every later
   * call's barriers by one against the peers') */
  if (a_scale && (st = iris_gemm_blas_set_scales(&p->blas, a_scale, b_scale, stream)) != IRIS_SUCCESS) st = iris_gemm_rs_refuse(p, st, stream, 1);
#endif
  /* every rank has reached this call: the previous call's readers of the workspace are gone
   * (not needed where a collective sums: no peer reads the partial in place) */
  if (st == IRIS_SUCCESS && !p->coll) {
    st = iris_barrier_device(p->ctx, stream);
    paired = st == IRIS_SUCCESS; /* from here a failure leaves the barriers out of step */
  }
#if defined(IRIS_GEMM_HAVE_BLAS)
  if (st == IRIS_SUCCESS && p->path == IRIS_GEMM_PATH_FUSED) {
#if defined(IRIS_GEMM_HAVE_TMA)
    st = iris_gemm_rs_run_fused(p, a, b, bias, c, stream);
#endif
  } else if (st == IRIS_SUCCESS) {
    st = p->path == IRIS_GEMM_PATH_PIPELINED ? iris_gemm_rs_run_pipelined(p, (const char *)a, b, bias, c, stream) : iris_gemm_rs_run_unfused(p, (const char *)a, b, bias, c, stream);
  }
#endif
  if (st != IRIS_SUCCESS && paired) p->broken = 1;
  return iris_detail_plan_run_end(p->ctx, stream, st);
}
IRIS_DEF iris_status_t iris_gemm_rs_run(iris_gemm_rs_t *p, const void *a, const void *b, const void *bias, void *c, iris_stream_t stream) {
  return iris_gemm_rs_run_any(p, a, b, NULL, NULL, bias, c, stream, 1);
}
IRIS_DEF iris_status_t iris_gemm_rs_run_scaled(iris_gemm_rs_t *p, const void *a, const void *b, const float *a_scale, const float *b_scale, const void *bias, void *c,
                                               iris_stream_t stream) {
  return iris_gemm_rs_run_any(p, a, b, a_scale, b_scale, bias, c, stream, 0);
}

IRIS_DEF iris_status_t iris_gemm_rs_check(iris_gemm_rs_t *p) {
  if (!p) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_gemm_rs_check: NULL plan");
#if defined(IRIS_GEMM_HAVE_BLAS) && defined(IRIS_GEMM_HAVE_TMA)
  if (p->path == IRIS_GEMM_PATH_FUSED) {
    iris_gemm_err_t e;
    const int old = iris_detail_plan_device(p->ctx); /* the record's copies and clears on the plan's GPU, whatever device is current */
    const iris_gpu_error_t rc = iris_gemm_err_take(p->fd.err, &e, &p->err_taken);
    iris_detail_plan_device_back(old);
    if (rc != IRIS_GPU_SUCCESS) return iris_gemm_rs_gpu_fail(p->ctx, "iris_gemm_rs_check: reading the error record", rc);
    switch (e.what) {
    case 0: return IRIS_SUCCESS;
    case IRIS_GEMM_WAIT_TILE:
      return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                              "rank %d: iris_gemm_rs (fused): call %u: the wait for rank %d's contribution to tile (64-row half %u, n-tile %u) (flag holds %u, want "
                              "%u) ran past the wait bound (%.1f s) in CTA %u: rank %d is stuck, dead, far behind, or not making the same calls; C of that call is wrong",
                              p->me, e.epoch, (int)e.peer, e.item / (unsigned)p->fd.tiles_n,
                              e.item % (unsigned)p->fd.tiles_n, e.got, e.want, (double)IRIS_WAIT_TIMEOUT_NS * 1e-9,
                              e.block, (int)e.peer);
    case IRIS_GEMM_WAIT_REFUSED:
      return iris_detail_fail(IRIS_ERROR_MISMATCH,
                              "rank %d: iris_gemm_rs (fused): call %u: rank %d's run of this call was refused (its arguments; see its error) and took part with "
                              "nothing: this call wrote none of this rank's rows of C (the all-reduce: the other rows hold what the last complete call left); the plan "
                              "stays in step on every rank",
                              p->me, e.epoch, (int)e.peer);
    case IRIS_GEMM_WAIT_PEER_FAILED:
      return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                              "rank %d: iris_gemm_rs (fused): call %u: rank %d gave up on this call (its wait %u for rank %d ran past the wait bound; see its error): "
                              "C of that call may be wrong here too",
                              p->me, e.epoch, (int)e.peer, e.got, (int)e.want);
    default:
      return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                              "rank %d: iris_gemm_rs (fused): call %u: a pipeline (mbarrier) wait of the TMA core ran past its bound in CTA %u: a bug in "
                              "internal/gemm/core_tma.h; C of that call is wrong",
                              p->me, e.epoch, e.block);
    }
  }
#endif
  return IRIS_SUCCESS;
}
#endif /* IRIS_INTERNAL_GEMM_RS_H */
