/* internal/coll/rmsnorm_host.h: the host side of iris_all_reduce_rmsnorm: argument
 * checks, the choice of path (the one-shot or two-shot fused kernel, the bandwidth
 * kernel, or the all-reduce then the norm kernel), the grid, the call signature. Under
 * IRIS_IMPLEMENTATION (nvcc, hipcc).
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_INTERNAL_COLL_RMSNORM_HOST_H
#define IRIS_INTERNAL_COLL_RMSNORM_HOST_H
#include "../../iris_collectives.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "plan.h"
#include "protocol.h"
#include "rmsnorm.h"
#include "launch.h"
#include "host.h"
#include "api.h"

/* CTAs per row of the fused kernel, at most: each CTA's sum of squares is polled by the
 * row's other CTAs (one lane per CTA). 16 rather than 8: 4.9 against 5.3 us at 1 token x
 * 8192 on one H200 with 2 ranks as threads (tools/proxy_fused.cu). */
#ifndef IRIS_RMSNORM_MAX_CPR
#define IRIS_RMSNORM_MAX_CPR 16
#endif
static_assert(IRIS_RMSNORM_MAX_CPR <= IRIS_RMSNORM_CHUNK, "a row's CTAs are combined by one 32-lane group");

/* Threads of a CTA that owns `per_cta` chunks: a 32-lane group per chunk, 2 to
 * IRIS_RMSNORM_MAX_GROUPS groups (at least 64 threads: one per rank for the call headers). */
static int iris_rmsnorm_threads(int per_cta) { return IRIS_RMSNORM_CHUNK * (per_cta < 2 ? 2 : per_cta > IRIS_RMSNORM_MAX_GROUPS ? IRIS_RMSNORM_MAX_GROUPS : per_cta); }
/* CTAs per row of the fused kernel: the largest power of two that keeps tokens * cpr
 * within the SMs (every CTA of a row must be resident at once: they wait for each other). */
static int iris_rmsnorm_cpr(size_t tokens, long long hidden, int sms) {
  const iris_rmsnorm_shape_t one = iris_rmsnorm_shape(hidden, 1);
  int cpr = 1;
  while (cpr * 2 <= IRIS_RMSNORM_MAX_CPR && cpr * 2 <= one.pow2 && (size_t)cpr * 2 * tokens <= (size_t)sms) cpr *= 2;
  return cpr;
}
/* The bandwidth kernel at 2 ranks: one hop up to this many bytes (tokens x hidden x 2),
 * two beyond. On 2 H200s, hidden 8192, us: 128 tokens (2 MB) 16.1 against 17.5, 256
 * tokens 26.2 against 26.1, 512 tokens 47.3 against 43.2. */
#ifndef IRIS_RMSNORM_BW_ONE_MAX_BYTES
#define IRIS_RMSNORM_BW_ONE_MAX_BYTES ((size_t)2 << 20)
#endif
static unsigned long long iris_rmsnorm_sig(int path, size_t tokens, size_t hidden, iris_dtype_t t, int quant, float eps, int cpr, int threads, size_t piece) {
  unsigned long long sig = 1469598103934665603ULL;
  uint32_t eps_bits; /* eps too: ranks that differ in it would get different bits */
  memcpy(&eps_bits, &eps, sizeof eps_bits);
  const unsigned long long parts[] = {0x524d534e4f524dULL /* "RMSNORM" */, (unsigned long long)path, tokens, hidden, (unsigned long long)t,
                                      (unsigned long long)quant, (unsigned long long)eps_bits, (unsigned long long)cpr, (unsigned long long)threads, piece};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) sig = (sig ^ parts[i]) * 1099511628211ULL;
  return iris_coll_sig_mark(sig, 0); /* one launch (the split bit clear: plan.h) */
}

/* The kernels of one type, where this unit compiles its sums (IRIS_COLL_TYPES). */
template <typename T, bool BUILT = ((unsigned)(IRIS_COLL_TYPES) >> iris_coll_dtype_of<T>::value & 1u) && ((unsigned)(IRIS_COLL_OPS) & 1u << IRIS_SUM)>
struct iris_rmsnorm_launch {
  static void fused(const iris_coll_state_t *s, bool two, const void *x, void *res, const void *w, void *out, size_t tokens, iris_rmsnorm_shape_t sh, float eps,
                    int quant, void *q8, float *scale, unsigned long long sig, int threads, iris_stream_t stream) {
    const unsigned grid = (unsigned)(tokens * (size_t)sh.cpr);
    if (two)
      (void)iris_detail_launch(iris_rmsnorm_fused_kernel<T, true>, grid, (unsigned)threads, stream, s->pdl, s->dev, (const T *)x, (T *)res, (const T *)w, (T *)out,
                               (long long)tokens, sh, eps, quant, (unsigned char *)q8, scale, sig);
    else
      (void)iris_detail_launch(iris_rmsnorm_fused_kernel<T, false>, grid, (unsigned)threads, stream, s->pdl, s->dev, (const T *)x, (T *)res, (const T *)w, (T *)out,
                               (long long)tokens, sh, eps, quant, (unsigned char *)q8, scale, sig);
  }
  static void norm(const iris_coll_state_t *s, unsigned grid, const void *sum, void *res, const void *w, void *out, size_t rows, long long hidden, float eps, int quant,
                   void *q8, float *scale, unsigned long long sig, int check, iris_stream_t stream) {
    const int threads = iris_rmsnorm_threads(iris_rmsnorm_shape(hidden, 1).per_cta);
    iris_rmsnorm_norm_kernel<T><<<grid, threads, 0, stream>>>(s->dev, (const T *)sum, (T *)res, (const T *)w, (T *)out, (long long)rows, hidden, eps, quant,
                                                            (unsigned char *)q8, scale, sig, check);
  }
  /* the bandwidth kernel: one hop (at 2 ranks); two hops, the sums' loads specialised for 2
   * and 4 ranks (iris_coll_reduce16) */
  static void bw(const iris_coll_state_t *s, int W, bool one, unsigned grid, int threads, const void *x, void *res, const void *w, void *out, size_t tokens, long long hidden,
                 float eps, int quant, void *q8, float *scale, unsigned long long sig, iris_stream_t stream) {
    void (*k)(iris_coll_dev_t, const T *, T *, const T *, T *, long long, long long, float, int, unsigned char *, float *, unsigned long long) =
        W == 2 && one ? iris_rmsnorm_bw_kernel<T, 2, true>
        : W == 2      ? iris_rmsnorm_bw_kernel<T, 2, false>
        : W == 4      ? iris_rmsnorm_bw_kernel<T, 4, false>
                      : iris_rmsnorm_bw_kernel<T, 0, false>;
    (void)iris_detail_launch(k, grid, (unsigned)threads, stream, s->pdl, s->dev, (const T *)x, (T *)res, (const T *)w, (T *)out, (long long)tokens, hidden, eps,
                             quant, (unsigned char *)q8, scale, sig);
  }
};
template <typename T> struct iris_rmsnorm_launch<T, false> {
  static void fused(const iris_coll_state_t *, bool, const void *, void *, const void *, void *, size_t, iris_rmsnorm_shape_t, float, int, void *, float *,
                    unsigned long long, int, iris_stream_t) {}
  static void norm(const iris_coll_state_t *, unsigned, const void *, void *, const void *, void *, size_t, long long, float, int, void *, float *, unsigned long long,
                   int, iris_stream_t) {}
  static void bw(const iris_coll_state_t *, int, bool, unsigned, int, const void *, void *, const void *, void *, size_t, long long, float, int, void *, float *,
                 unsigned long long, iris_stream_t) {}
};

/* The norm kernel over rows [t0, t0 + n) with the sums at sum: a CTA per row, but where
 * it waits for the peers' headers (check) and ranks of this process share the GPU, at
 * most 1 / W of the SMs (a CTA per SM at least is resident: its launch bounds), so that
 * no rank's CTAs hold every SM while they wait for a peer's kernel that has none. */
static void iris_rmsnorm_launch_norm(iris_t *ctx, const iris_coll_state_t *s, iris_dtype_t t, const void *sum, void *res, const void *w, void *out, size_t t0,
                                     size_t n, size_t hidden, float eps, int quant, void *q8, float *scale, unsigned long long sig, int check, iris_stream_t stream) {
  const size_t W = (size_t)iris_local_size(ctx), cap = (size_t)s->sms / W > 0 ? (size_t)s->sms / W : 1;
  size_t grid = check && iris_detail_gpu_shared_any(ctx) && n > cap ? cap : n;
  if (s->ctas > 0 && grid > (size_t)s->ctas) grid = (size_t)s->ctas; /* IRIS_COLL_CTAS, as for every collective call (the grid is not in the signature) */
  const size_t off = t0 * hidden * 2;
  char *q = q8 ? (char *)q8 + t0 * hidden : NULL;
  float *sc = quant == IRIS_QUANT_FP8_PER_TOKEN ? scale + t0 : scale;
  if (t == IRIS_BFLOAT16)
    iris_rmsnorm_launch<iris_bf16_t>::norm(s, (unsigned)grid, sum, (char *)res + off, w, (char *)out + off, n, (long long)hidden, eps, quant, q, sc, sig, check, stream);
  else
    iris_rmsnorm_launch<iris_f16_t>::norm(s, (unsigned)grid, sum, (char *)res + off, w, (char *)out + off, n, (long long)hidden, eps, quant, q, sc, sig, check, stream);
}

/* One call on one node, inside the context's ordering (iris_detail_order_begin / _end). */
static iris_status_t iris_rmsnorm_enqueue(iris_t *ctx, iris_coll_state_t *s, const void *x, void *res, const void *w, void *out, size_t tokens, size_t hidden,
                                          float eps, iris_dtype_t t, int quant, void *q8, float *scale, iris_rmsnorm_algo_t algo, iris_stream_t stream) {
  static const char *const name = "iris_all_reduce_rmsnorm";
  const int W = iris_local_size(ctx), me = iris_local_rank(ctx);
  const size_t es = 2, bytes = tokens * hidden * es;
  iris_gpu_error_t e;
  int one = 0, two = 0, bw = 0, bw_one = 0, cpr = 1, path;
  iris_rmsnorm_shape_t sh = iris_rmsnorm_shape((long long)hidden, 1);
  /* the one-shot slots as far as IRIS_COLL_LL_BYTES (2 ranks' larger slots are not
   * measured for the fused kernels) */
  const size_t ll_lines = s->dev.ll_lines < IRIS_COLL_LL_BYTES / 8 ? s->dev.ll_lines : IRIS_COLL_LL_BYTES / 8;
  /* the SMs a rank's kernels may fill: all of them, but where ranks of this process share
   * the GPU 1 / W of them, so that every rank's grid is resident at once (their CTAs wait
   * for each other; a CTA per SM at least is resident: the kernels' launch bounds) */
  const int shared = iris_detail_gpu_shared_any(ctx), all_sms = shared ? (s->sms / W > 0 ? s->sms / W : 1) : s->sms;
  /* and no more than IRIS_COLL_CTAS (agreed at setup), as for every collective call:
   * the fused kernels then only where their CTAs fit under it */
  const int capped = s->ctas > 0 && s->ctas < all_sms, sms = capped ? s->ctas : all_sms;
  if (W > 1) { /* what fits the slots: the one-shot's, the two-shot's (each rank's rows), the CTAs' exchange lines */
    cpr = iris_rmsnorm_cpr(tokens, (long long)hidden, sms);
    sh = iris_rmsnorm_shape((long long)hidden, cpr);
    const int small = tokens <= IRIS_RMSNORM_FUSED_MAX_TOKENS && 2 * tokens * (size_t)cpr <= ll_lines && (!(shared || capped) || tokens * (size_t)cpr <= (size_t)sms);
    one = small && tokens * (size_t)sh.lines <= ll_lines;
    two = small && (tokens + (size_t)W - 1) / (size_t)W * (size_t)sh.lines <= s->dev.ll2_lines;
    /* the bandwidth kernel's scratch rows: one hop W x tokens, two hops W x ceil(tokens / W) + tokens */
    bw_one = W == 2 && bytes <= IRIS_RMSNORM_BW_ONE_MAX_BYTES;
    const size_t bw_rows = bw_one ? 2 * tokens : (size_t)W * ((tokens + (size_t)W - 1) / (size_t)W) + tokens;
    bw = s->dev.scratch && bw_rows * iris_rmsnorm_bw_pitch((long long)hidden) * es <= IRIS_COLL_AR_SCRATCH_BYTES;
  }
  if ((algo == IRIS_RMSNORM_FUSED && !one) || (algo == IRIS_RMSNORM_TWO_SHOT && !two))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: %s takes a world of 2 or more ranks on one node, at most %d tokens, and rows that fit its slots "
                            "(%zu lines of 8 bytes: %s)%s, not %zu tokens x %zu", me, name, algo == IRIS_RMSNORM_FUSED ? "IRIS_RMSNORM_FUSED" : "IRIS_RMSNORM_TWO_SHOT",
                            IRIS_RMSNORM_FUSED_MAX_TOKENS, algo == IRIS_RMSNORM_FUSED ? ll_lines : s->dev.ll2_lines,
                            algo == IRIS_RMSNORM_FUSED ? "tokens x hidden / 4" : "ceil(tokens / world) x hidden / 4",
                            shared   ? "; where ranks of one process share the GPU, at most 1 / world of its SMs (a CTA per token at least)"
                            : capped ? "; at most IRIS_COLL_CTAS CTAs (a CTA per token at least)"
                                     : "",
                            tokens, hidden);
  if (algo == IRIS_RMSNORM_BANDWIDTH && !bw)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_RMSNORM_BANDWIDTH takes a world of 2 or more ranks on one node and (2 ranks "
                            "up to 2 MB: 2 x tokens; else world x ceil(tokens / world) + tokens) rows of hidden (rounded up to 8) x 2 bytes within %zu bytes of scratch, "
                            "not %zu tokens x %zu", me, name, (size_t)IRIS_COLL_AR_SCRATCH_BYTES, tokens, hidden);
  if (algo == IRIS_RMSNORM_FUSED) path = 1;
  else if (algo == IRIS_RMSNORM_TWO_SHOT) path = 4;
  else if (algo == IRIS_RMSNORM_BANDWIDTH) path = 5;
  else if (algo == IRIS_RMSNORM_SEPARATE) path = 2;
  else if (one && (W == 2 || bytes <= IRIS_RMSNORM_ONESHOT_MAX_BYTES)) path = 1; /* 2 ranks: the one-shot stores no more than the two-shot, one hop less */
  else if (W == 2 && bw) path = 5; /* 1 MB on 2 H200s: 12.9 us against the two-shot's 13.1 at 64 x 8192, 11.5 against 12.6 at 128 x 4096 */
  else if (two && bytes <= IRIS_RMSNORM_FUSED_MAX_BYTES) path = 4;
  else if (bw) path = 5;
  else path = 2;
  if (path == 5) {
    /* One CTA per row, up to one per SM; with more rows than SMs, CTAs of 256 threads, two
     * per SM, where a row fits their registers (iris_rmsnorm_row16: 4 vectors a thread):
     * on 2 H200s, 512 tokens x 8192 40.5 against 42.0 us, x 4096 25.4 against 26.8 (128
     * tokens: 0.3 us slower). At most IRIS_COLL_MAX_CTAS (the barrier rows). Where ranks
     * of one process share a GPU, 1 / W of that, so that every rank's grid is resident at
     * once. The grid is the same on every rank (it is in the signature, and each row's
     * CTA index). */
    int threads = iris_rmsnorm_threads(iris_rmsnorm_shape((long long)hidden, 1).per_cta);
    size_t per_sm = (size_t)s->sms;
    if (tokens > (size_t)s->sms && ((hidden / 8 + IRIS_RMSNORM_VECS - 1) / IRIS_RMSNORM_VECS + 31) / 32 * 32 <= 256) {
      threads = threads < 256 ? threads : 256;
      per_sm = 2 * (size_t)s->sms;
    }
    const size_t ctas = shared ? (per_sm / (size_t)W > 0 ? per_sm / (size_t)W : 1) : per_sm;
    size_t grid = tokens < ctas ? tokens : ctas;
    if (grid > IRIS_COLL_MAX_CTAS) grid = IRIS_COLL_MAX_CTAS;
    if (s->ctas > 0 && grid > (size_t)s->ctas) grid = (size_t)s->ctas; /* IRIS_COLL_CTAS, alike on every rank: the same grid */
    if (grid < 1) grid = 1;
    const unsigned long long sig = iris_rmsnorm_sig(bw_one ? 6 : path, tokens, hidden, t, quant, eps, (int)grid, threads, 0);
    if (t == IRIS_BFLOAT16)
      iris_rmsnorm_launch<iris_bf16_t>::bw(s, W, bw_one != 0, (unsigned)grid, threads, x, res, w, out, tokens, (long long)hidden, eps, quant, q8, scale, sig, stream);
    else iris_rmsnorm_launch<iris_f16_t>::bw(s, W, bw_one != 0, (unsigned)grid, threads, x, res, w, out, tokens, (long long)hidden, eps, quant, q8, scale, sig, stream);
    e = iris_gpu_last_error();
    if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed: %s", me, name, iris_gpu_error_text(e));
    return IRIS_SUCCESS;
  }
  if (path != 2) {
    const int threads = iris_rmsnorm_threads(sh.per_cta);
    const unsigned long long sig = iris_rmsnorm_sig(path, tokens, hidden, t, quant, eps, cpr, threads, 0);
    if (t == IRIS_BFLOAT16) iris_rmsnorm_launch<iris_bf16_t>::fused(s, path == 4, x, res, w, out, tokens, sh, eps, quant, q8, scale, sig, threads, stream);
    else iris_rmsnorm_launch<iris_f16_t>::fused(s, path == 4, x, res, w, out, tokens, sh, eps, quant, q8, scale, sig, threads, stream);
    e = iris_gpu_last_error();
    if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed: %s", me, name, iris_gpu_error_text(e));
    return IRIS_SUCCESS;
  }
  if (W == 1) { /* the all-reduce of one rank is x itself */
    iris_rmsnorm_launch_norm(ctx, s, t, x, res, w, out, 0, tokens, hidden, eps, quant, q8, scale, 0, 0, stream);
    e = iris_gpu_last_error();
    if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed: %s", me, name, iris_gpu_error_text(e));
    return IRIS_SUCCESS;
  }
  /* separate: the all-reduce into the staging area (no user buffer written before the norm
   * kernel's header exchange), in pieces of whole rows that fit it, x read by this rank
   * only wherever it lies (IRIS_COLL_SEND_LOCAL: not in the signature either); into out
   * without one (then as any collective without staging: x and out on the heap, at the
   * same offsets on every rank) */
  {
    const size_t step = s->stage_bytes ? iris_coll_staging_step(s->stage_bytes, es, W, 0) : 0;
    const size_t rows = step >= hidden ? step / hidden : tokens;
    char *const dest = step >= hidden ? s->stage_in : (char *)out;
    iris_status_t st;
    /* more than one piece: a split call (each launch's signature says so: plan.h) */
    iris_coll_part_t piece = {tokens * hidden, 0, (tokens + rows - 1) / rows};
    for (size_t t0 = 0; t0 < tokens; t0 += rows, piece.k++) {
      const size_t n = tokens - t0 < rows ? tokens - t0 : rows;
      char *sum = dest == s->stage_in ? dest : (char *)out + t0 * hidden * es;
      if ((st = iris_coll_enqueue_part(ctx, &piece, IRIS_COLL_AR | (dest == s->stage_in ? IRIS_COLL_SEND_LOCAL : 0), (const char *)x + t0 * hidden * es, sum, n * hidden, t,
                                       IRIS_SUM, 0, stream, NULL)) != IRIS_SUCCESS)
        return st;
      iris_rmsnorm_launch_norm(ctx, s, t, sum, res, w, out, t0, n, hidden, eps, quant, q8, scale,
                               iris_coll_sig_mark(iris_rmsnorm_sig(2, tokens, hidden, t, quant, eps, 1, 0, t0), piece.n > 1), 1, stream);
      e = iris_gpu_last_error();
      if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed: %s", me, name, iris_gpu_error_text(e));
    }
  }
  return IRIS_SUCCESS;
}

static iris_status_t iris_rmsnorm_run(iris_t *ctx, const void *x, void *residual, const void *weight, void *out, size_t tokens, size_t hidden, float eps,
                                      iris_dtype_t type, iris_stream_t stream, const iris_rmsnorm_opts_t *opts) {
  static const char *const name = "iris_all_reduce_rmsnorm";
  const iris_rmsnorm_opts_t defaults = IRIS_RMSNORM_OPTS_INIT;
  const iris_rmsnorm_opts_t *o = opts ? opts : &defaults;
  iris_coll_state_t *s;
  iris_status_t st, st2;
  int me;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL context", name);
  me = iris_rank(ctx);
  if (o->struct_size != sizeof(iris_rmsnorm_opts_t))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: iris_rmsnorm_opts_t.struct_size is %zu, not %zu: start from IRIS_RMSNORM_OPTS_INIT", me, name,
                            o->struct_size, sizeof(iris_rmsnorm_opts_t));
  if (type != IRIS_BFLOAT16 && type != IRIS_FLOAT16)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: type %d: IRIS_BFLOAT16 or IRIS_FLOAT16 only", me, name, (int)type);
  if (hidden < 1 || hidden > IRIS_RMSNORM_MAX_HIDDEN)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: hidden %zu outside [1, %d]", me, name, hidden, IRIS_RMSNORM_MAX_HIDDEN);
  if ((unsigned)o->quant > (unsigned)IRIS_QUANT_FP8_PER_TOKEN || (unsigned)o->algo > (unsigned)IRIS_RMSNORM_BANDWIDTH)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: unknown quantisation %d or algorithm %d", me, name, (int)o->quant, (int)o->algo);
  if (!iris_coll_compiled_in(type, IRIS_SUM))
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: the sum of this type is not compiled in (IRIS_COLL_TYPES 0x%x, IRIS_COLL_OPS 0x%x)", me, name,
                            (unsigned)(IRIS_COLL_TYPES), (unsigned)(IRIS_COLL_OPS));
  if (tokens == 0) return IRIS_SUCCESS; /* nothing to move, whatever the buffers (an empty batch's are often NULL); it takes part below */
  if (o->quant != IRIS_QUANT_NONE && (!o->out_fp8 || !o->scale))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: fp8 output needs out_fp8 and scale", me, name);
  if (!x || !residual || !weight || !out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: NULL buffer", me, name);
  if (residual == x || residual == out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: residual must be neither x nor out", me, name);
  if (!(eps >= 0.0f && eps <= FLT_MAX)) /* NaN or infinite: every row NaN or 0, not a norm */
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: eps %g must be finite and at least 0", me, name, (double)eps);
  /* element-aligned buffers (the kernels load whole elements; a misaligned load would be a
   * sticky GPU fault that loses the context), a float-aligned scale */
  if ((((uintptr_t)x | (uintptr_t)residual | (uintptr_t)weight | (uintptr_t)out) & 1) || (o->quant != IRIS_QUANT_NONE && ((uintptr_t)o->scale & 3)))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: x, residual, weight and out must be 2-byte aligned, scale 4-byte aligned", me, name);
  /* a row per CTA where the norm kernel runs alone (one rank, multi-node, the separate path
   * past its staging area): gridDim.x holds 2^31 - 1 */
  if (tokens > (size_t)INT_MAX || tokens > ((size_t)1 << 39) / hidden)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: %zu tokens x %zu is too many (at most %d tokens and 2^39 elements)", me, name, tokens,
                            hidden, INT_MAX);
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  if (!(s = (iris_coll_state_t *)iris_detail_get_ext(ctx))) {
    if (iris_gpu_stream_capturing(stream))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: the first collective call (or iris_collectives_setup) must come before graph capture", me,
                              name);
    if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st;
    s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  }
  if (iris_num_nodes(ctx) > 1) { /* the multi-node all-reduce into out, then the norm kernel on this node */
    if (o->algo == IRIS_RMSNORM_FUSED || o->algo == IRIS_RMSNORM_TWO_SHOT || o->algo == IRIS_RMSNORM_BANDWIDTH)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_RMSNORM_FUSED, _TWO_SHOT and _BANDWIDTH take a world on one node", me, name);
    if ((st = iris_all_reduce_ex(ctx, x, out, tokens * hidden, type, IRIS_SUM, stream, NULL)) != IRIS_SUCCESS) return st;
    if ((st = iris_detail_order_begin(ctx, stream)) != IRIS_SUCCESS) return st;
    iris_rmsnorm_launch_norm(ctx, s, type, out, residual, weight, out, 0, tokens, hidden, eps, (int)o->quant, o->out_fp8, o->scale,
                             iris_rmsnorm_sig(3, tokens, hidden, type, (int)o->quant, eps, 1, 0, 0), iris_local_size(ctx) > 1, stream);
    st = iris_gpu_last_error() == IRIS_GPU_SUCCESS ? IRIS_SUCCESS : iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed", me, name);
    st2 = iris_detail_order_end(ctx, stream);
    return st != IRIS_SUCCESS ? st : st2;
  }
  if ((st = iris_detail_order_begin(ctx, stream)) != IRIS_SUCCESS) return st; /* a world of one too: ordered as every call */
  st = iris_rmsnorm_enqueue(ctx, s, x, residual, weight, out, tokens, hidden, eps, type, (int)o->quant, o->out_fp8, o->scale, o->algo, stream);
  st2 = iris_detail_order_end(ctx, stream);
  return st != IRIS_SUCCESS ? st : st2;
}
/* A call refused for its arguments still takes part, as a collective's (iris_coll_enqueue_on,
 * host.h), with a launch marked split: the peers' call may take one launch (the fused, two-shot
 * and bandwidth paths) or two or more (the separate path), so the mismatch is fatal
 * everywhere rather than leave the call numbers out of step. Where every rank refused
 * alike, they meet. A call of 0 tokens takes part alike, with a signature of its own
 * (IRIS_COLL_SIG_EMPTY_SPLIT): an empty batch on every rank is one device barrier, on
 * one rank only a mismatch. */
IRIS_DEF iris_status_t iris_all_reduce_rmsnorm_ex(iris_t *ctx, const void *x, void *residual, const void *weight, void *out, size_t tokens, size_t hidden, float eps,
                                                  iris_dtype_t type, iris_stream_t stream, const iris_rmsnorm_opts_t *opts) {
  const iris_status_t st = iris_rmsnorm_run(ctx, x, residual, weight, out, tokens, hidden, eps, type, stream, opts);
  if ((st == IRIS_ERROR_INVALID_ARGUMENT || st == IRIS_ERROR_INVALID_RANK || st == IRIS_ERROR_NOT_IN_HEAP || (st == IRIS_SUCCESS && tokens == 0)) &&
      IRIS_DETAIL_IS_LIVE(ctx) && iris_detail_check_fault(ctx) == IRIS_SUCCESS) {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    if (iris_detail_order_begin(ctx, stream) == IRIS_SUCCESS) {
      iris_coll_refused_take_part(ctx, NULL, st, st == IRIS_SUCCESS ? IRIS_COLL_SIG_EMPTY_SPLIT : IRIS_COLL_SIG_REFUSED_SPLIT, stream);
      (void)iris_detail_order_end(ctx, stream);
    }
    iris_detail_copy(iris_detail_errbuf, sizeof iris_detail_errbuf, why);
  }
  return st;
}
IRIS_DEF iris_status_t iris_all_reduce_rmsnorm(iris_t *ctx, const void *x, void *residual, const void *weight, void *out, size_t tokens, size_t hidden, float eps,
                                               iris_dtype_t type, iris_stream_t stream) {
  return iris_all_reduce_rmsnorm_ex(ctx, x, residual, weight, out, tokens, hidden, eps, type, stream, NULL);
}

#endif /* IRIS_INTERNAL_COLL_RMSNORM_HOST_H */
