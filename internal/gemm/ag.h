/* internal/gemm/ag.h: the all-gather + GEMM's host API (iris_gemm.h): create (the
 * description exchange, heap blocks, staging buffer, copy streams and events, cuBLASLt,
 * the fused kernel's setup, the agreement on the kernel's cut), run (argument checks,
 * heap placement of A, the path's run), check (the error record as a status), the trace
 * export, destroy. Part of its implementation (IRIS_IMPLEMENTATION); not a public header. */
#ifndef IRIS_INTERNAL_GEMM_AG_H
#define IRIS_INTERNAL_GEMM_AG_H
#include "../../iris_gemm.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "../core/util.h"
#include "../core/plan.h"
#include "../coll/host.h"
#include "types.h"
#include "common.h"
#include "host.h"
#include "ag_kernel.h"
#include "ag_plan.h"
#include "ag_pipelined.h"

/* AMD without IRIS_GEMM_MFMA_UNVERIFIED: why there is no plan */
#define IRIS_GEMM_MFMA_OFF_MSG                                                                                     \
  "the AMD GEMM core (MFMA, internal/gemm/core_mfma.h) has never been run on AMD hardware, so it is off by default; " \
  "define IRIS_GEMM_MFMA_UNVERIFIED before including iris_gemm.h to compile and use it anyway (untested)"

#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_GEMM_HAVE_TMA)
/* AMD (IRIS_GEMM_MFMA_UNVERIFIED): the local part of create for the fused and the
 * kernel-unfused paths, the only ones there (no vendor BLAS): staging buffer, kernel plan,
 * trace. No copy streams: those paths use none. Returns the first failure. */
static iris_status_t iris_ag_gemm_create_local_hip(iris_ag_gemm_t *g) {
  const iris_ag_gemm_desc_t *desc = &g->d;
  iris_t *ctx = g->ctx;
  const int me = g->me;
  iris_status_t st;
  (void)iris_ag_gemm_copy_rows; (void)iris_ag_gemm_fork; (void)iris_ag_gemm_close; (void)iris_ag_gemm_plan_chunks;
  if (g->path != IRIS_GEMM_PATH_FUSED && g->path != IRIS_GEMM_PATH_KERNEL_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_ag_gemm_create: path '%s' needs a vendor BLAS (cuBLASLt; this version has no hipBLASLt path): on AMD use "
                            "IRIS_GEMM_PATH_FUSED, IRIS_GEMM_PATH_KERNEL_UNFUSED or IRIS_GEMM_PATH_AUTO",
                            me, iris_gemm_path_name(g->path));
#if !defined(IRIS_GEMM_TRACE)
  if (desc->trace) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: desc.trace needs -DIRIS_GEMM_TRACE", me);
#endif
  if (iris_gpu_sm_count(&g->sms, iris_device_ordinal(ctx)) != IRIS_GPU_SUCCESS)
    return iris_ag_gemm_gpu_fail(ctx, "hipDeviceGetAttribute (compute units)", iris_gpu_last_error());
  if (g->sms < 2) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: the fused kernel needs 2 compute units or more (%d)", me, g->sms);
  if (iris_gpu_malloc((void **)&g->staged, (size_t)desc->M * desc->K * g->es, IRIS_HEAP_MEMORY_COARSE) != IRIS_GPU_SUCCESS) {
    (void)iris_gpu_last_error();
    g->staged = NULL;
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: iris_ag_gemm_create: no room for the %lld x %lld staging buffer (%.1f MB)", me, desc->M, desc->K,
                            (double)desc->M * desc->K * g->es / 1e6);
  }
  g->gemm_streams = 1;
  if ((st = iris_ag_gemm_plan_kernel(g, g->flag_block)) != IRIS_SUCCESS) return st;
#if defined(IRIS_GEMM_TRACE)
  if (desc->trace) {
    const int slots = g->dev.fetchers + g->dev.gemm_ctas;
    g->dev.trace_cap = 4096;
    g->trace_words = 3 * (size_t)slots * (1 + 4 * (size_t)g->dev.trace_cap);
    if (iris_gpu_malloc((void **)&g->trace, g->trace_words * 8, IRIS_HEAP_MEMORY_COARSE) != IRIS_GPU_SUCCESS) {
      g->trace = NULL;
      return iris_ag_gemm_gpu_fail(ctx, "hipMalloc of the trace", iris_gpu_last_error());
    }
    if (iris_gpu_memset(g->trace, 0, g->trace_words * 8) != IRIS_GPU_SUCCESS || iris_gpu_synchronize() != IRIS_GPU_SUCCESS) return iris_ag_gemm_gpu_fail(ctx, "clearing the trace", iris_gpu_last_error());
    g->dev.trace = g->trace;
  }
#endif
  return IRIS_SUCCESS;
}
#endif

/* The local part of create, after the heap blocks: staging, streams, events, GEMM
 * preparation. Returns the first failure. */
static iris_status_t iris_ag_gemm_create_local(iris_ag_gemm_t *g) {
  const iris_ag_gemm_desc_t *desc = &g->d;
  iris_t *ctx = g->ctx;
  const int me = g->me;
  int q, j;
#if !IRIS_DEVICE_BLASLT /* AMD: no vendor BLAS path, so no copy streams: the MFMA core's paths only */
  (void)desc; (void)ctx; (void)q; (void)j;
#if defined(IRIS_GEMM_HAVE_CORE)
  (void)me;
  return iris_ag_gemm_create_local_hip(g);
#else
  (void)iris_ag_gemm_copy_rows; (void)iris_ag_gemm_fork; (void)iris_ag_gemm_close; (void)iris_ag_gemm_plan_chunks;
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: " IRIS_GEMM_MFMA_OFF_MSG " (see iris_gemm.h, Rules)", me);
#endif
#else
#if !defined(IRIS_GEMM_HAVE_BLAS)
  if (g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: path '%s' needs cuBLASLt (cublasLt.h was not found, or IRIS_GEMM_NO_BLAS)", me,
                            iris_gemm_path_name(g->path));
#endif
#if !defined(IRIS_GEMM_HAVE_CORE)
  if (g->path == IRIS_GEMM_PATH_FUSED || g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: the fused kernel needs the sm_80+ core", me);
#endif
  if (desc->trace && (g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED))
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: tracing records the fused kernel; path '%s' has none", me, iris_gemm_path_name(g->path));
  if (iris_gpu_sm_count(&g->sms, iris_device_ordinal(ctx)) != IRIS_GPU_SUCCESS || g->sms < 1) {
    iris_gpu_last_error();
    return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: iris_ag_gemm_create: the GPU's SM count could not be read", me);
  }
  if (iris_gpu_malloc((void **)&g->staged, (size_t)desc->M * desc->K * g->es, IRIS_HEAP_MEMORY_COARSE) != IRIS_GPU_SUCCESS) {
    iris_gpu_last_error();
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: iris_ag_gemm_create: no room for the %lld x %lld staging buffer (%.1f MB)", me, desc->M, desc->K,
                            (double)desc->M * desc->K * g->es / 1e6);
  }
  for (q = 0; q < g->W; ++q) {
    if (iris_gpu_stream_create(&g->copy[q]) != IRIS_GPU_SUCCESS || iris_gpu_event_create(&g->tail[q]) != IRIS_GPU_SUCCESS)
      return iris_ag_gemm_gpu_fail(ctx, "creating a copy stream", iris_gpu_last_error());
    for (j = 0; j < IRIS_GEMM_MAX_CHUNKS; ++j)
      if (iris_gpu_event_create(&g->ev[q][j]) != IRIS_GPU_SUCCESS) return iris_ag_gemm_gpu_fail(ctx, "creating an event", iris_gpu_last_error());
  }
  if (iris_gpu_event_create(&g->fork) != IRIS_GPU_SUCCESS || iris_gpu_event_create(&g->join) != IRIS_GPU_SUCCESS)
    return iris_ag_gemm_gpu_fail(ctx, "creating an event", iris_gpu_last_error());
  iris_ag_gemm_plan_chunks(g);
  g->gemm_streams = g->path != IRIS_GEMM_PATH_PIPELINED ? 1 : desc->gemm_streams ? desc->gemm_streams : iris_ag_gemm_big_chunk(g->chunk_row[1] - g->chunk_row[0], desc) ? 1 : 2;
  if (g->gemm_streams > 1 &&
      (iris_gpu_stream_create(&g->aux) != IRIS_GPU_SUCCESS || iris_gpu_event_create(&g->aux_join) != IRIS_GPU_SUCCESS))
    return iris_ag_gemm_gpu_fail(ctx, "creating the second GEMM stream", iris_gpu_last_error());
#if defined(IRIS_GEMM_HAVE_BLAS)
  if (g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED) {
    iris_gemm_blas_t *bl = &g->blas;
    iris_status_t st;
    iris_gemm_blas_shape_t *unused;
    bl->ctx = ctx;
    bl->who = "iris_ag_gemm";
    bl->me = me;
    bl->N = desc->N;
    bl->K = desc->K;
    bl->ab_type = desc->a_type;
    bl->c_type = desc->c_type;
    bl->b_transposed = desc->b_transposed;
    bl->has_bias = desc->has_bias;
    bl->streams = g->gemm_streams;
    if ((st = iris_gemm_blas_init(bl)) != IRIS_SUCCESS) return st;
    /* prepare every chunk shape now: run only looks them up */
    if (g->path == IRIS_GEMM_PATH_UNFUSED) return iris_gemm_blas_shape(bl, desc->M, desc->K, &unused);
    if (desc->layout == IRIS_GEMM_A_ROWS && (st = iris_gemm_blas_shape(bl, desc->M / g->W, desc->K, &unused)) != IRIS_SUCCESS) return st;
    for (j = 0; j < g->nchunks; ++j)
      if ((st = iris_gemm_blas_shape(bl, g->chunk_row[j + 1] - g->chunk_row[j], desc->K, &unused)) != IRIS_SUCCESS) return st;
  }
#endif
#if defined(IRIS_GEMM_HAVE_CORE)
  if (g->path == IRIS_GEMM_PATH_FUSED || g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED) {
    iris_status_t st;
    iris_gpu_error_t e;
    int tma = 1; /* IRIS_GEMM_TMA: 0 runs the cp.async core instead */
    g->wgmma = iris_gemm_probe_wgmma();
    if (iris_detail_env_flag("IRIS_GEMM_TMA", " (0: the fused kernel runs the cp.async core; 1: TMA, the default)", &tma) < 0)
      return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_create");
    g->tma = g->wgmma && tma;
    if ((st = iris_ag_gemm_plan_kernel(g, g->flag_block)) != IRIS_SUCCESS) return st;
    if ((e = iris_ag_gemm_launch(g, NULL, NULL, NULL, 0, 0, 0, 1)) != IRIS_GPU_SUCCESS) return iris_ag_gemm_gpu_fail(ctx, "setting the kernel's shared memory", e);
    if (desc->trace) {
#if defined(IRIS_GEMM_TRACE)
      const int slots = g->dev.fetchers + g->dev.gemm_ctas;
      g->dev.trace_cap = 4096;
      g->trace_words = 3 * (size_t)slots * (1 + 4 * (size_t)g->dev.trace_cap);
      if (iris_gpu_malloc((void **)&g->trace, g->trace_words * 8, IRIS_HEAP_MEMORY_COARSE) != IRIS_GPU_SUCCESS)
        return iris_ag_gemm_gpu_fail(ctx, "cudaMalloc of the trace", iris_gpu_last_error());
      if (iris_gpu_memset(g->trace, 0, g->trace_words * 8) != IRIS_GPU_SUCCESS || iris_gpu_synchronize() != IRIS_GPU_SUCCESS) return iris_ag_gemm_gpu_fail(ctx, "clearing the trace", iris_gpu_last_error());
      g->dev.trace = g->trace;
#else
      return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: desc.trace needs -DIRIS_GEMM_TRACE", me);
#endif
    }
  }
#endif
  return IRIS_SUCCESS;
#endif
}

#if defined(IRIS_GEMM_HAVE_CORE)
/* IRIS_GEMM_TEST_WRAP=n (tests; read at create, fused and kernel-unfused paths): the flag
 * block as if 2^32 - n calls had run on every CTA slot, so that the n-th call from now runs
 * at epoch 0 and a test crosses 0xffffffff -> 0 -> 1 at once (a plan gets there after 2^32
 * calls: days of decode). Every word holds what the call before left
 * (iris_ag_gemm_flags_after): a word left at 0 would let epoch 0 pass a wait that should
 * block, or block a claim. Written before the create's last exchange: no peer signals
 * into the block before. */
static iris_status_t iris_ag_gemm_start_near_wrap(iris_ag_gemm_t *g) {
  int n = 0;
  const int got = iris_detail_env_int("IRIS_GEMM_TEST_WRAP", &n);
  const size_t words = iris_ag_gemm_flags_after(&g->dev, 0u, NULL);
  unsigned *w;
  iris_gpu_error_t e;
  if (got < 0) return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_create");
  if (got == 0) return IRIS_SUCCESS;
  if (!(w = (unsigned *)malloc(words * sizeof *w))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  iris_ag_gemm_flags_after(&g->dev, 0u - (unsigned)n, w);
  e = iris_gpu_copy_to_device(g->flag_block, w, words * sizeof *w);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize(); /* a pageable copy may return before it lands; the first run may be on a non-blocking stream */
  free(w);
  return e == IRIS_GPU_SUCCESS ? IRIS_SUCCESS : iris_ag_gemm_gpu_fail(g->ctx, "IRIS_GEMM_TEST_WRAP: writing the flag block", e);
}
#endif

static inline iris_status_t iris_ag_gemm_destroy_plan(iris_ag_gemm_t *g) { return iris_ag_gemm_destroy(g); }

/* The lifecycle of internal/core/plan.h. */
static const iris_detail_plan_kind_t iris_ag_gemm_kind = {"iris_ag_gemm_create", "the all-gather + GEMM", "problem", "shape, types, layout, path or options"};

IRIS_DEF iris_status_t iris_ag_gemm_create(iris_t *ctx, const iris_ag_gemm_desc_t *desc, iris_ag_gemm_t **out) {
  iris_ag_gemm_t *g;
  iris_status_t st;
  int W, me, old;
  int cut[5] = {0, 0, 0, 0, 0};
  if ((st = iris_detail_plan_args(&iris_ag_gemm_kind, ctx, desc, out)) != IRIS_SUCCESS) return st;
  if (out) *out = NULL;
  {
    iris_ag_gemm_desc_t none; /* a NULL desc or out: plan_meet refuses it on every rank */
    const iris_ag_gemm_desc_t *d = desc && out ? desc : (memset(&none, 0, sizeof none), &none);
    const long long mine[16] = {(long long)d->struct_size, d->layout, d->M, d->N, d->K, d->a_type, d->c_type, d->b_transposed, d->has_bias,
                                d->path, d->chunks, d->fetch_ctas, d->k_group, d->stage_a, d->trace, d->gemm_streams};
    if ((st = iris_detail_plan_meet(&iris_ag_gemm_kind, ctx, desc, out, mine, 16)) != IRIS_SUCCESS) return st;
  }
  W = iris_world_size(ctx);
  me = iris_rank(ctx);
  if ((st = iris_ag_gemm_check_desc(desc, W, me)) != IRIS_SUCCESS) return st; /* the same verdict on every rank */
  if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st;          /* the device barrier, before any capture */
  old = iris_detail_plan_device(ctx);
  /* no exchange of its own: after the allocation, only local steps until the agreement */
  if ((g = (iris_ag_gemm_t *)iris_detail_plan_alloc(&iris_ag_gemm_kind, ctx, sizeof *g, &st)) != NULL) {
    g->ctx = ctx;
    g->d = *desc;
    g->W = W;
    g->me = me;
    g->es = iris_dtype_size(desc->a_type);
    g->cs = iris_dtype_size(desc->c_type);
    g->path = iris_ag_gemm_choose_path(desc, W);
    g->coll = g->path == IRIS_GEMM_PATH_UNFUSED && desc->layout == IRIS_GEMM_A_ROWS && W > 1 && iris_coll_stages(ctx); /* the local M x K is off the heap */
    /* heap blocks: the same sequence on every rank */
    st = iris_calloc(ctx, iris_ag_gemm_flag_words(desc, W) * sizeof(unsigned), (void **)&g->flag_block);
    if (st == IRIS_SUCCESS && desc->stage_a)
      st = iris_malloc(ctx, (size_t)(desc->layout == IRIS_GEMM_A_ROWS ? desc->M / W * desc->K : desc->M * (desc->K / W)) * g->es, (void **)&g->a_heap);
    /* the fused kernels' grid takes every SM and waits for the peers' grids: where another
     * rank of this process runs on the same GPU (one CUDA context, kernels run side by
     * side) every call would wait out its bound (docs/gemm_waits.md, "Residency") */
    if (st == IRIS_SUCCESS && W > 1 && (g->path == IRIS_GEMM_PATH_FUSED || g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED) && iris_detail_gpu_shared(ctx))
      st = iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_ag_gemm_create: path '%s' needs a GPU of its own per rank; another rank of this process runs on this GPU (use the pipelined "
                            "or unfused path, or one process per GPU)",
                            me, iris_gemm_path_name(g->path));
    if (st == IRIS_SUCCESS) st = iris_ag_gemm_create_local(g);
  }
  /* agree: a plan on every rank or on none, and the fused kernel cut the same way
   * everywhere: a rank waits for epoch * (the peers' fetcher count) signals, counted with
   * its own count (different GPUs, SM counts or IRIS_GEMM_TMA settings would make every
   * call wait out the bound) */
#if defined(IRIS_GEMM_HAVE_CORE)
  if (st == IRIS_SUCCESS && (g->path == IRIS_GEMM_PATH_FUSED || g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED)) {
    st = iris_ag_gemm_start_near_wrap(g);
    cut[0] = g->dev.fetchers; cut[1] = g->dev.gemm_ctas; cut[2] = g->dev.side_fetch; cut[3] = g->dev.kg; cut[4] = g->tma;
  }
#endif
  st = iris_detail_plan_agree(ctx, st, "iris_ag_gemm_create", cut, 5, "fetcher CTAs, GEMM CTAs, side fetch, k-group, TMA core",
                              "give every rank the same GPU model and the same IRIS_GEMM_TMA");
  st = iris_detail_plan_finish(st, g, out, iris_ag_gemm_destroy_plan);
  iris_detail_plan_device_back(old);
  return st;
}

/* The bytes of this rank's A shard. */
static size_t iris_ag_gemm_shard_bytes(const iris_ag_gemm_t *g) {
  const iris_ag_gemm_desc_t *d = &g->d;
  return (size_t)(d->layout == IRIS_GEMM_A_ROWS ? d->M / g->W * d->K : d->M * (d->K / g->W)) * g->es;
}

/* The run's rules on its arguments (iris_gemm.h, Rules): IRIS_SUCCESS, or the refusal
 * naming the rule. Nothing is enqueued. */
static iris_status_t iris_ag_gemm_check_args(const iris_ag_gemm_t *g, const void *a_shard, const void *b, const void *bias, const void *c) {
  const iris_ag_gemm_desc_t *d = &g->d;
  const size_t shard_bytes = iris_ag_gemm_shard_bytes(g);
  const int align = g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED ? 256 : 16;
  size_t off;
  if (!a_shard || !b || !c) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_run: NULL buffer", g->me);
  if (!d->has_bias != !bias) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_run: bias %s, but the plan says has_bias = %d", g->me, bias ? "given" : "NULL", d->has_bias);
  if (((uintptr_t)b | (uintptr_t)c | (uintptr_t)bias | (uintptr_t)a_shard) % (uintptr_t)align)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_run: A, B, C and bias must be %d-byte aligned on path '%s'", g->me, align, iris_gemm_path_name(g->path));
  if (!d->stage_a && (iris_heap_offset(g->ctx, a_shard, &off) != IRIS_SUCCESS || shard_bytes > iris_heap_size(g->ctx) - off))
    return iris_detail_fail(IRIS_ERROR_NOT_IN_HEAP, "rank %d: iris_ag_gemm_run: the A shard (%zu bytes) must lie on the symmetric heap (iris_malloc), or create the plan with stage_a = 1",
                            g->me, shard_bytes);
  {
    /* C is written while the GEMM still reads B and the bias, and (the shard on the heap)
     * while the peers still read this rank's A: an overlap gives a wrong C, here or there */
    const size_t c_bytes = (size_t)d->M * d->N * g->cs;
    const char *with = iris_gemm_overlap(c, c_bytes, b, (size_t)d->K * d->N * g->es)        ? "B"
                       : iris_gemm_overlap(c, c_bytes, bias, (size_t)d->N * g->cs)           ? "the bias"
                       : !d->stage_a && iris_gemm_overlap(c, c_bytes, a_shard, shard_bytes) ? "the A shard"
                                                                                             : NULL;
    if (with)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_run: C (%p, %zu bytes) overlaps %s: C is written while %s is still read; give C memory of its own",
                              g->me, c, c_bytes, with, with);
  }
  return IRIS_SUCCESS;
}

#if defined(IRIS_DEBUG)
/* IRIS_DEBUG, outside capture: the shard `a` (heap) must sit at the same heap offset
 * everywhere (a host exchange). A refused run (a NULL) takes part with a marker and is
 * compared with nobody: its refusal is reported otherwise. */
static iris_status_t iris_ag_gemm_debug_offsets(iris_ag_gemm_t *g, const void *a, iris_stream_t stream) {
  const size_t refused = ~(size_t)0;
  size_t mine = refused, *offs;
  int q;
  iris_status_t st;
  unsigned long long capture = 0;
  iris_gpu_capture_id(stream, &capture);
  if (capture) return IRIS_SUCCESS;
  if (a) iris_heap_offset(g->ctx, a, &mine);
  offs = (size_t *)calloc((size_t)g->W, sizeof *offs);
  if (!offs) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  if ((st = iris_allgather_host(g->ctx, &mine, offs, sizeof mine)) != IRIS_SUCCESS) { free(offs); return st; }
  for (q = 0; a && q < g->W; ++q)
    if (offs[q] != mine && offs[q] != refused) {
      const size_t theirs = offs[q];
      free(offs);
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: iris_ag_gemm_run: rank %d's A shard is at heap offset %zu, this rank's at %zu", g->me, q, theirs, mine);
    }
  free(offs);
  return IRIS_SUCCESS;
}
#endif

/* The part a run refused on this rank takes in the call (internal/gemm/host.h, "Refused
 * runs"; the order region open), so that the peers' run of it ends at once:
 *   pipelined, unfused by copy engines: their run makes two device barriers (the opening
 *     one, the close after the copies): a refused barrier (their opening barrier sees a
 *     mismatch naming this rank: IRIS_ERROR_MISMATCH through the context), then a plain
 *     one (they meet in the close, as ever);
 *   unfused through iris_all_gather: one refused barrier, as a refused collective takes
 *     part (their all-gather mismatches it: nothing gathered; fatal to the context where
 *     their all-gather is split into several launches, an A shard over the staging area);
 *   fused, kernel-unfused: iris_ag_gemm_refused_kernel (their waits for this rank end at
 *     once and iris_ag_gemm_check names it; the epochs move on by one call everywhere).
 * Their C of the call is wrong (computed with whatever this rank's A held); nothing of this
 * rank's is read or written. Returns whether it launched (nothing at world size 1). */
static int iris_ag_gemm_take_part(iris_ag_gemm_t *g, iris_stream_t stream) {
  if (g->W < 2) return 0;
  switch (g->path) {
  case IRIS_GEMM_PATH_PIPELINED:
  case IRIS_GEMM_PATH_UNFUSED: return iris_gemm_part_barriers(g->ctx, 1, g->coll ? 1 : 2, stream);
#if defined(IRIS_GEMM_HAVE_CORE)
  case IRIS_GEMM_PATH_FUSED:
  case IRIS_GEMM_PATH_KERNEL_UNFUSED:
    static_assert(IRIS_MAX_RANKS <= 256, "iris_ag_gemm_refused_kernel: a thread per peer");
    iris_ag_gemm_refused_kernel<<<1, 256, 0, stream>>>(g->dev);
    return iris_gpu_last_error() == IRIS_GPU_SUCCESS;
#endif
  default: return 0;
  }
}
/* A run refused with st before any launch of its call, its order region open: it takes
 * part, and st is returned with its detail, which says so where it did. */
static iris_status_t iris_ag_gemm_refuse_in(iris_ag_gemm_t *g, iris_status_t st, iris_stream_t stream) {
  char why[sizeof iris_detail_errbuf];
  int took;
  iris_detail_copy(why, sizeof why, iris_detail_errbuf);
  took = iris_ag_gemm_take_part(g, stream);
  return iris_detail_fail(st, "%s%s", why, took ? IRIS_GEMM_TOOK_PART : "");
}
/* The same before the run's order region: it opens one for the part (none where the
 * context has a fatal fault: then every peer's wait gives up anyway). */
static iris_status_t iris_ag_gemm_refuse(iris_ag_gemm_t *g, iris_status_t st, iris_stream_t stream) {
  char why[sizeof iris_detail_errbuf];
  int took = 0;
  iris_detail_copy(why, sizeof why, iris_detail_errbuf);
  if (iris_detail_plan_run_begin(g->ctx, stream) == IRIS_SUCCESS) {
    took = iris_ag_gemm_take_part(g, stream);
    (void)iris_detail_plan_run_end(g->ctx, stream, IRIS_SUCCESS);
  }
  return iris_detail_fail(st, "%s%s", why, took ? IRIS_GEMM_TOOK_PART : "");
}

/* The call's launches (its order region open; the arguments checked). A failure before the
 * first launch the peers pair with (staging A, clearing the trace) takes part as a
 * refusal; one after it marks the plan broken (iris_gemm_refuse_broken). */
static iris_status_t iris_ag_gemm_run_plan(iris_ag_gemm_t *g, const void *a_shard, const void *b, const void *bias, void *c, iris_stream_t stream) {
  const char *a = g->d.stage_a ? g->a_heap : (const char *)a_shard;
  if (g->d.stage_a) {
#if IRIS_DEVICE_BLASLT || defined(IRIS_GEMM_HAVE_CORE)
    if (iris_gpu_memcpy_async(g->a_heap, a_shard, iris_ag_gemm_shard_bytes(g), stream) != IRIS_GPU_SUCCESS)
      return iris_ag_gemm_refuse_in(g, iris_ag_gemm_gpu_fail(g->ctx, "staging A into the heap", iris_gpu_last_error()), stream);
#endif
  }
#if !IRIS_DEVICE_BLASLT && !defined(IRIS_GEMM_HAVE_CORE)
  (void)a;
  (void)b;
  (void)bias;
  (void)c;
  return iris_ag_gemm_refuse_in(g, iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_run: " IRIS_GEMM_MFMA_OFF_MSG, g->me), stream);
#else
  {
    iris_status_t st;
    /* every rank has reached this call: its A is written (and the last call's readers are
     * gone, closed by that call's barrier) */
    if ((g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED) && !g->coll) {
      if ((st = iris_barrier_device(g->ctx, stream)) != IRIS_SUCCESS) return st;
    }
    switch (g->path) {
#if defined(IRIS_GEMM_HAVE_BLAS)
    case IRIS_GEMM_PATH_PIPELINED:
    case IRIS_GEMM_PATH_UNFUSED:
      st = g->path == IRIS_GEMM_PATH_PIPELINED ? iris_ag_gemm_run_pipelined(g, a, b, bias, c, stream) : iris_ag_gemm_run_unfused(g, a, b, bias, c, stream);
      if (st != IRIS_SUCCESS && !g->coll) g->broken = 1; /* after the barrier */
      return st;
#endif
#if defined(IRIS_GEMM_HAVE_CORE)
    case IRIS_GEMM_PATH_FUSED:
    case IRIS_GEMM_PATH_KERNEL_UNFUSED: {
      iris_gpu_error_t e;
      g->dev.a_shard = a;
#if defined(IRIS_GEMM_TRACE)
      if (g->trace) {
        /* the event counts restart each run: zero only the count words */
        const int slots = g->dev.fetchers + g->dev.gemm_ctas;
        if (iris_gpu_memset2d_async(g->trace, (1 + 4 * (size_t)g->dev.trace_cap) * 8, 0, 8, 3 * (size_t)slots, stream) != IRIS_GPU_SUCCESS)
          return iris_ag_gemm_refuse_in(g, iris_ag_gemm_gpu_fail(g->ctx, "clearing the trace", iris_gpu_last_error()), stream);
      }
#endif
      if (g->path == IRIS_GEMM_PATH_FUSED) e = iris_ag_gemm_launch(g, b, bias, c, 0, g->dev.fetchers + g->dev.gemm_ctas, stream, 0);
      else {
        e = iris_ag_gemm_launch(g, b, bias, c, 0, g->dev.fetchers, stream, 0);
        if (e == IRIS_GPU_SUCCESS) {
          e = iris_ag_gemm_launch(g, b, bias, c, g->dev.fetchers, g->dev.gemm_ctas, stream, 0);
          if (e != IRIS_GPU_SUCCESS) g->broken = 1; /* the fetchers' epochs moved on, the GEMM CTAs' did not */
        }
      }
      if (e != IRIS_GPU_SUCCESS) return iris_ag_gemm_gpu_fail(g->ctx, "launching the fused kernel", e);
      return IRIS_SUCCESS;
    }
#endif
    default: return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_run: path '%s' is not in this build", g->me, iris_gemm_path_name(g->path));
    }
  }
#endif
}

/* Both runs. A context's fatal fault refuses the run at once; the run is ordered after the
 * context's previous communication call, whatever its stream (iris_detail_order_begin,
 * iris.h). A run refused for its arguments (unscaled: iris_ag_gemm_run, which an fp8 plan
 * refuses) takes part (iris_ag_gemm_take_part); a broken plan's run takes none (its calls
 * are out of step already: every rank destroys it). */
static iris_status_t iris_ag_gemm_run_any(iris_ag_gemm_t *g, const void *a_shard, const void *b, const float *a_scale, const float *b_scale, const void *bias, void *c,
                                          iris_stream_t stream, int unscaled) {
  iris_status_t st;
  if (!g) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_run: NULL plan");
  if ((st = iris_gemm_refuse_broken(g->broken, "iris_ag_gemm_run", g->me)) != IRIS_SUCCESS) return st;
  if (unscaled && g->d.a_type == IRIS_FLOAT8_E4M3)
    st = iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_run: an fp8 plan needs per-tensor scales: call iris_ag_gemm_run_scaled", g->me);
  else if ((st = iris_gemm_check_scales(g->d.a_type, a_scale, b_scale, "iris_ag_gemm_run_scaled", g->me)) == IRIS_SUCCESS)
    st = iris_ag_gemm_check_args(g, a_shard, b, bias, c);
#if defined(IRIS_DEBUG)
  {
    /* every rank's run makes the exchange, a refused one too (its refusal's detail kept) */
    char why[sizeof iris_detail_errbuf];
    iris_status_t ex;
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    ex = iris_ag_gemm_debug_offsets(g, st != IRIS_SUCCESS ? NULL : g->d.stage_a ? (const void *)g->a_heap : a_shard, stream);
    if (st != IRIS_SUCCESS) iris_detail_copy(iris_detail_errbuf, sizeof iris_detail_errbuf, why);
    else st = ex;
  }
#endif
  if (st != IRIS_SUCCESS) return iris_ag_gemm_refuse(g, st, stream);
  if ((st = iris_detail_plan_run_begin(g->ctx, stream)) != IRIS_SUCCESS) return st;
#if defined(IRIS_GEMM_HAVE_BLAS)
  if (a_scale && (st = iris_gemm_blas_set_scales(&g->blas, a_scale, b_scale, stream)) != IRIS_SUCCESS) st = iris_ag_gemm_refuse_in(g, st, stream);
#endif
  if (st == IRIS_SUCCESS) st = iris_ag_gemm_run_plan(g, a_shard, b, bias, c, stream);
  return iris_detail_plan_run_end(g->ctx, stream, st);
}
IRIS_DEF iris_status_t iris_ag_gemm_run(iris_ag_gemm_t *g, const void *a_shard, const void *b, const void *bias, void *c, iris_stream_t stream) {
  return iris_ag_gemm_run_any(g, a_shard, b, NULL, NULL, bias, c, stream, 1);
}
IRIS_DEF iris_status_t iris_ag_gemm_run_scaled(iris_ag_gemm_t *g, const void *a_shard, const void *b, const float *a_scale, const float *b_scale, const void *bias,
                                               void *c, iris_stream_t stream) {
  return iris_ag_gemm_run_any(g, a_shard, b, a_scale, b_scale, bias, c, stream, 0);
}

IRIS_DEF iris_status_t iris_ag_gemm_check(iris_ag_gemm_t *g) {
#if defined(IRIS_GEMM_HAVE_CORE)
  iris_gemm_err_t e;
  iris_gpu_error_t rc;
  int peer;
  const char *path;
  double bound, pipe = 0;
  if (!g) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_check: NULL plan");
#if defined(IRIS_GEMM_PIPE_TIMEOUT_NS)
  pipe = (double)IRIS_GEMM_PIPE_TIMEOUT_NS * 1e-9;
#endif
  if (g->path != IRIS_GEMM_PATH_FUSED && g->path != IRIS_GEMM_PATH_KERNEL_UNFUSED) return IRIS_SUCCESS;
  {
    const int old = iris_detail_plan_device(g->ctx); /* the record's copies and clears on the plan's GPU, whatever device is current */
    rc = iris_gemm_err_take(g->dev.err, &e, &g->err_taken);
    iris_detail_plan_device_back(old);
  }
  if (rc != IRIS_GPU_SUCCESS) return iris_ag_gemm_gpu_fail(g->ctx, "iris_ag_gemm_check: reading the error record", rc);
  if (!e.what) return IRIS_SUCCESS;
  path = iris_gemm_path_name(g->path);
  peer = (int)e.peer;
  bound = (double)IRIS_WAIT_TIMEOUT_NS * 1e-9;
  switch (e.what) {
  case IRIS_GEMM_WAIT_ARRIVE:
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: the wait for rank %d's \"A is ready\" signal (arrive[%d] holds %u, want %u) ran past the wait "
                            "bound (%.1f s) in CTA %u: rank %d is stuck, dead, far behind, or not making the same calls; C of that call is wrong",
                            g->me, path, e.epoch, peer, peer, e.got, e.want, bound, e.block, peer);
  case IRIS_GEMM_WAIT_DONE:
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: the wait for rank %d to finish reading this rank's A (done[%d] holds %u signals, want %u) ran "
                            "past the wait bound (%.1f s) in CTA %u: rank %d is stuck, dead or far behind, and may still read this rank's A",
                            g->me, path, e.epoch, peer, peer, e.got, e.want, (double)IRIS_GEMM_DONE_TIMEOUT_NS * 1e-9, e.block, peer);
  case IRIS_GEMM_WAIT_READY:
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: the wait for this rank's own ready flag of A block (m-tile %u, k-group %u) (holds %u, want %u) ran "
                            "past %.1f s in CTA %u: the fetching CTA of this rank did not run (not resident: other work on the GPU holding its SMs?) or "
                            "stopped; C of that call is wrong",
                            g->me, path, e.epoch, e.item / (unsigned)g->dev.groups_k, e.item % (unsigned)g->dev.groups_k,
                            e.got, e.want, (double)IRIS_GEMM_READY_TIMEOUT_NS * 1e-9, e.block);
  case IRIS_GEMM_WAIT_REFUSED:
    return iris_detail_fail(IRIS_ERROR_MISMATCH,
                            "rank %d: iris_ag_gemm (%s): call %u: rank %d's run of this call was refused (its arguments; see its error) and took part with "
                            "nothing: C of that call is wrong here; the plan stays in step on every rank",
                            g->me, path, e.epoch, peer);
  case IRIS_GEMM_WAIT_PEER_FAILED: {
    const unsigned w = e.got;
    const int q = (int)e.want;
    char cause[96];
    if ((w == IRIS_GEMM_WAIT_ARRIVE || w == IRIS_GEMM_WAIT_DONE) && q >= 0) snprintf(cause, sizeof cause, "its wait for rank %d's signal (%s)", q, w == IRIS_GEMM_WAIT_ARRIVE ? "A is ready" : "done reading");
    else snprintf(cause, sizeof cause, "%s", w == IRIS_GEMM_WAIT_READY ? "its wait for its own fetcher CTAs" : w == IRIS_GEMM_WAIT_PIPELINE ? "a TMA pipeline wait" : "a wait");
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: rank %d gave up on this call (%s ran past the wait bound; see its error): it may have "
                            "overwritten its A while this rank read it, so C of that call may be wrong here too",
                            g->me, path, e.epoch, peer, cause);
  }
  default:
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: a pipeline (mbarrier) wait of the TMA core ran past its bound (%.1f s) in CTA %u: a bug in "
                            "internal/gemm/core_tma.h; C of that call is wrong",
                            g->me, path, e.epoch, pipe, e.block);
  }
#else
  if (!g) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_check: NULL plan");
  return IRIS_SUCCESS;
#endif
}

IRIS_DEF iris_status_t iris_ag_gemm_trace_write(iris_ag_gemm_t *g, const char *path) {
#if defined(IRIS_GEMM_TRACE) && defined(IRIS_GEMM_HAVE_CORE)
  unsigned long long *h, t_min = ~0ull;
  FILE *f;
  int slot, slots, first = 1;
  size_t row_words, n, i;
  static const char *const names[4] = {"?", "fetch", "wait", "tile"};
  if (!g || !path) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_trace_write: NULL argument");
  if (!g->trace) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_trace_write: the plan was created without desc.trace", g->me);
  slots = 3 * (g->dev.fetchers + g->dev.gemm_ctas); /* rows */
  row_words = 1 + 4 * (size_t)g->dev.trace_cap;
  h = (unsigned long long *)malloc(g->trace_words * 8);
  if (!h) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  if (iris_gpu_copy_to_host(h, g->trace, g->trace_words * 8) != IRIS_GPU_SUCCESS) {
    free(h);
    return iris_ag_gemm_gpu_fail(g->ctx, "reading the trace", iris_gpu_last_error());
  }
  for (slot = 0; slot < slots; ++slot)
    for (n = h[slot * row_words], i = 0; i < n; ++i) t_min = h[slot * row_words + 1 + 4 * i] < t_min ? h[slot * row_words + 1 + 4 * i] : t_min;
  if (!(f = fopen(path, "w"))) {
    free(h);
    return iris_detail_fail(IRIS_ERROR_SYSTEM, "rank %d: iris_ag_gemm_trace_write: cannot open %s", g->me, path);
  }
  fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"rank\":%d,\"fetchers\":%d,\"gemm_ctas\":%d,\"path\":\"%s\"},\"traceEvents\":[\n", g->me, g->dev.fetchers,
          g->dev.gemm_ctas, iris_gemm_path_name(g->path));
  for (slot = 0; slot < slots; ++slot) {
    n = h[slot * row_words];
    for (i = 0; i < n; ++i) {
      const unsigned long long *e = h + slot * row_words + 1 + 4 * i;
      const int kind = (int)(e[2] & 255);
      fprintf(f, "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"index\":%llu}}", first ? "" : ",\n",
              names[kind < 4 ? kind : 0], kind == IRIS_GEMM_EV_FETCH ? "fetcher" : "gemm", g->me, slot, (double)(e[0] - t_min) / 1e3, (double)(e[1] - e[0]) / 1e3,
              e[2] >> 8);
      first = 0;
    }
  }
  fprintf(f, "\n]}\n");
  fclose(f);
  free(h);
  return IRIS_SUCCESS;
#else
  (void)path;
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_trace_write: build with -DIRIS_GEMM_TRACE and create the plan with desc.trace = 1", g ? g->me : -1);
#endif
}

IRIS_DEF iris_status_t iris_ag_gemm_destroy(iris_ag_gemm_t *g) {
  int q, j;
  if (!g) return IRIS_SUCCESS;
#if IRIS_DEVICE_BLASLT
  {
    int old = -1;
    iris_gpu_get_device(&old);
    iris_gpu_set_device(iris_device_ordinal(g->ctx));
    iris_gpu_synchronize();
    if (old >= 0) iris_gpu_set_device(old);
  }
  for (q = 0; q < IRIS_MAX_RANKS; ++q) {
    if (g->copy[q]) iris_gpu_stream_destroy(g->copy[q]);
    if (g->tail[q]) iris_gpu_event_destroy(g->tail[q]);
    for (j = 0; j < IRIS_GEMM_MAX_CHUNKS; ++j)
      if (g->ev[q][j]) iris_gpu_event_destroy(g->ev[q][j]);
  }
  if (g->fork) iris_gpu_event_destroy(g->fork);
  if (g->join) iris_gpu_event_destroy(g->join);
  if (g->aux) iris_gpu_stream_destroy(g->aux);
  if (g->aux_join) iris_gpu_event_destroy(g->aux_join);
  if (g->staged) iris_gpu_free(g->staged);
  if (g->trace) iris_gpu_free(g->trace);
#if defined(IRIS_GEMM_HAVE_BLAS)
  iris_gemm_blas_destroy(&g->blas);
#endif
#else
  /* AMD: only the fused kernel's buffers exist (iris_ag_gemm_create_local_hip) */
  if (g->staged || g->trace) {
    int old = -1;
    iris_gpu_get_device(&old);
    iris_gpu_set_device(iris_device_ordinal(g->ctx));
    iris_gpu_synchronize();
    if (g->staged) iris_gpu_free(g->staged);
    if (g->trace) iris_gpu_free(g->trace);
    if (old >= 0) iris_gpu_set_device(old);
  }
#endif
  (void)q;
  (void)j;
  /* heap blocks: freed in reverse order on every rank (a local operation) */
  if (g->a_heap) iris_free(g->ctx, g->a_heap);
  if (g->flag_block) iris_free(g->ctx, g->flag_block);
  free(g);
  return IRIS_SUCCESS;
}
#endif /* IRIS_INTERNAL_GEMM_AG_H */
