/* internal/moe/host.h: the MoE dispatch / combine plan and host API (iris_moe.h): struct
 * iris_moe, the description's rules, create (heap workspace, device state), dispatch,
 * combine, check, destroy. Part of its implementation (IRIS_IMPLEMENTATION); not a public
 * header. The kernels are in internal/moe/kernels.h. */
#ifndef IRIS_INTERNAL_MOE_HOST_H
#define IRIS_INTERNAL_MOE_HOST_H
#include "../../iris_moe.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "../core/plan.h"
#include "grid.h"
#include "kernels.h"

struct iris_moe {
  iris_t *ctx;
  iris_moe_desc_t d;
  int W, me, L, sms;
  long long cap;       /* rows of recv_x */
  size_t es;           /* bytes per received element (1: fp8, 2: bf16) */
  int dispatched;      /* a dispatch was enqueued (combine needs its handle) */
  int last_n;          /* num_tokens of the last dispatch */
  unsigned long long seen[IRIS_MAX_RANKS]; /* the refusal word (marks.nocomb) of each rank that iris_moe_check last reported, or 0 */
  /* heap blocks, in allocation order */
  iris_moe_flags_t *flags;
  int *counts;
  char *recv_x;
  float *recv_scales;
  int *recv_src;
  iris_bf16_t *comb;
  iris_moe_marks_t *marks; /* the refusal and give-up marks: last, so the blocks before it lie as they did without it */
  /* device memory: state | slot | w | count | offsets */
  char *local;
  iris_moe_dev_t dev;
};

/* Threads of the kernels: low latency 512 (16 warps on NVIDIA, 8 wavefronts on AMD) on
 * every SM; high throughput 1024 on its few SMs, twice the stores in flight per SM. */
#define IRIS_MOE_LL_THREADS 512
#define IRIS_MOE_HT_THREADS 1024
#define IRIS_MOE_THREADS(p) ((p)->d.mode == IRIS_MOE_HIGH_THROUGHPUT ? IRIS_MOE_HT_THREADS : IRIS_MOE_LL_THREADS)

static long long iris_moe_rows(const iris_moe_desc_t *d, int W) {
  const long long L = d->num_experts / W, kl = d->top_k < L ? d->top_k : L;
  if (d->mode == IRIS_MOE_LOW_LATENCY) return L * W * (long long)d->max_tokens;
  return d->max_recv_rows > 0 ? d->max_recv_rows : (long long)W * d->max_tokens * kl;
}

/* The rules of the header comment on one rank's description (the same verdict everywhere:
 * the descriptions agree by then). NULL if it is valid, else the broken rule. */
static const char *iris_moe_bad_desc(const iris_moe_desc_t *d, int W) {
  if (d->struct_size != sizeof(iris_moe_desc_t)) return "struct_size is wrong: start from IRIS_MOE_DESC_INIT";
  if (d->mode != IRIS_MOE_LOW_LATENCY && d->mode != IRIS_MOE_HIGH_THROUGHPUT) return "mode must be IRIS_MOE_LOW_LATENCY or IRIS_MOE_HIGH_THROUGHPUT";
  if (d->max_tokens < 1 || d->hidden < 1 || d->num_experts < 1) return "max_tokens, hidden and num_experts must be positive";
  if (d->top_k < 1 || d->top_k > IRIS_MOE_MAX_TOP_K) return "top_k must be in 1..IRIS_MOE_MAX_TOP_K (32)";
  if (d->num_experts % W) return "num_experts must be a multiple of the world size (expert g lives on rank g / (num_experts / W))";
  if (d->num_experts > IRIS_MOE_MAX_EXPERTS) return "num_experts must be at most IRIS_MOE_MAX_EXPERTS (1024)";
  if (W > 255) return "the world size must be below 256 (a received row's source id holds the rank in 8 bits)";
  if ((long long)d->max_tokens * d->top_k >= (1LL << 24)) return "max_tokens * top_k must be below 2^24 (a received row's source id holds token * top_k + k in 24 bits)";
  if (d->dispatch_type != IRIS_BFLOAT16 && d->dispatch_type != IRIS_FLOAT8_E4M3) return "dispatch_type must be IRIS_BFLOAT16 or IRIS_FLOAT8_E4M3";
  if (d->combine_type != IRIS_BFLOAT16) return "combine_type must be IRIS_BFLOAT16";
  if (d->hidden % 8) return "hidden must be a multiple of 8 (16-byte rows)";
  if (d->dispatch_type == IRIS_FLOAT8_E4M3 && d->hidden % 128) return "fp8 dispatch needs hidden a multiple of 128 (one scale per 128 channels)";
  if (d->num_sms < 0) return "num_sms must be 0 (the mode's default) or positive";
  if (d->max_recv_rows < 0 || (d->mode == IRIS_MOE_LOW_LATENCY && d->max_recv_rows)) return "max_recv_rows must be 0 (low latency) or non-negative (high throughput)";
  if (iris_moe_rows(d, W) >= (1LL << 31)) return "the received rows must be below 2^31";
  return NULL;
}

/* Heap bytes of each block, in allocation order. */
static void iris_moe_block_bytes(const iris_moe_desc_t *d, int W, size_t b[7]) {
  const size_t rows = (size_t)iris_moe_rows(d, W), H = (size_t)d->hidden;
  b[0] = sizeof(iris_moe_flags_t);
  b[1] = (size_t)W * d->num_experts * sizeof(int);
  b[2] = rows * H * (d->dispatch_type == IRIS_FLOAT8_E4M3 ? 1 : 2);
  b[3] = d->dispatch_type == IRIS_FLOAT8_E4M3 ? rows * (H / 128) * sizeof(float) : 0;
  b[4] = rows * sizeof(int);
  b[5] = (size_t)d->max_tokens * d->top_k * H * 2;
  b[6] = sizeof(iris_moe_marks_t);
}

IRIS_DEF size_t iris_moe_workspace_bytes(const iris_moe_desc_t *desc, int W) {
  size_t b[7], s = 0;
  int i;
  if (!desc || W < 1 || iris_moe_bad_desc(desc, W)) return 0;
  iris_moe_block_bytes(desc, W, b);
  for (i = 0; i < 7; ++i) s += b[i];
  return s;
}

IRIS_DEF iris_status_t iris_moe_destroy(iris_moe_t *p) {
  if (!p) return IRIS_SUCCESS;
  {
    int old = -1;
    (void)iris_gpu_get_device(&old);
    (void)iris_gpu_set_device(iris_device_ordinal(p->ctx));
    (void)iris_gpu_synchronize();
    if (p->local) (void)iris_gpu_free(p->local);
    if (old >= 0) (void)iris_gpu_set_device(old);
  }
  /* heap blocks: reverse order, every rank */
  if (p->marks) iris_free(p->ctx, p->marks);
  if (p->comb) iris_free(p->ctx, p->comb);
  if (p->recv_src) iris_free(p->ctx, p->recv_src);
  if (p->recv_scales) iris_free(p->ctx, p->recv_scales);
  if (p->recv_x) iris_free(p->ctx, p->recv_x);
  if (p->counts) iris_free(p->ctx, p->counts);
  if (p->flags) iris_free(p->ctx, p->flags);
  free(p);
  return IRIS_SUCCESS;
}

/* The device state block: state | slot [T*K] | w [T*K] | count [L] | offsets [L+1]. */
static iris_status_t iris_moe_create_local(iris_moe_t *p) {
  const size_t tk = (size_t)p->d.max_tokens * p->d.top_k, bytes = sizeof(iris_moe_state_t) + tk * 8 + (size_t)(2 * p->L + 1) * sizeof(int);
  iris_moe_dev_t *v = &p->dev;
  iris_gpu_error_t e;
  int n = 0;
  if (iris_gpu_malloc((void **)&p->local, bytes, IRIS_HEAP_MEMORY_COARSE) != IRIS_GPU_SUCCESS) {
    (void)iris_gpu_last_error();
    p->local = NULL;
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: iris_moe_create: no device memory for the plan's state (%zu bytes)", p->me, bytes);
  }
  if ((e = iris_gpu_memset(p->local, 0, bytes)) != IRIS_GPU_SUCCESS || (e = iris_gpu_synchronize()) != IRIS_GPU_SUCCESS)
    return iris_detail_gpu_fail(p->me, "iris_moe_create: zeroing the plan's state", e);
  /* CTAs of the grid wait for each other and for the peers' grids: at most one per SM, and
   * within 1 / W of the SMs where ranks of this process share the GPU (grid.h) */
  if ((e = iris_gpu_sm_count(&n, iris_device_ordinal(p->ctx))) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(p->me, "iris_moe_create: reading the SM count", e);
  p->sms = iris_moe_grid(p->ctx, p->d.mode == IRIS_MOE_HIGH_THROUGHPUT, p->d.num_sms, n);
  memset(v, 0, sizeof *v);
  v->ctx = iris_device_context(p->ctx);
  v->flags = p->flags;
  v->counts = p->counts;
  v->recv_x = p->recv_x;
  v->recv_scales = p->recv_scales;
  v->recv_src = p->recv_src;
  v->comb = p->comb;
  v->marks = p->marks;
  v->st = (iris_moe_state_t *)p->local;
  v->slot = (int *)(p->local + sizeof(iris_moe_state_t));
  v->w = (float *)(v->slot + tk);
  v->count = (int *)(v->w + tk);
  v->offsets = v->count + p->L;
  v->cap = p->cap;
  v->W = p->W;
  v->me = p->me;
  v->E = p->d.num_experts;
  v->L = p->L;
  v->T = p->d.max_tokens;
  v->H = p->d.hidden;
  v->K = p->d.top_k;
  v->ht = p->d.mode == IRIS_MOE_HIGH_THROUGHPUT;
  return IRIS_SUCCESS;
}

static inline iris_status_t iris_moe_destroy_plan(iris_moe_t *p) { return iris_moe_destroy(p); }

#if defined(IRIS_TEST_HOOKS)
/* Tests only: a plan created while this is n > 0 starts as if 2^32 - n dispatches and
 * combines had run (its epochs and flags at 0 - n, as those calls leave them), so its
 * call numbers cross 0xffffffff -> 0 within n calls. Every rank sets the same n, while no
 * create runs. */
static int iris_detail_test_moe_wrap = 0;
static iris_status_t iris_moe_test_wrap(iris_moe_t *p) {
  const unsigned e = 0u - (unsigned)iris_detail_test_moe_wrap;
  const unsigned epochs[2] = {e, e}; /* disp_epoch, comb_epoch: the state's first words */
  iris_moe_flags_t f;
  iris_gpu_error_t g;
  int q;
  if (iris_detail_test_moe_wrap <= 0) return IRIS_SUCCESS;
  memset(&f, 0, sizeof f);
  for (q = 0; q < IRIS_MAX_RANKS; ++q) f.count[q] = f.data[q] = f.comb[q] = e;
  f.route = e;
  if ((g = iris_gpu_copy_to_device(p->flags, &f, sizeof f)) != IRIS_GPU_SUCCESS || (g = iris_gpu_copy_to_device(p->dev.st, epochs, sizeof epochs)) != IRIS_GPU_SUCCESS ||
      (g = iris_gpu_synchronize()) != IRIS_GPU_SUCCESS)
    return iris_detail_gpu_fail(p->me, "iris_moe_create: the test hook's epochs near the wrap", g);
  return IRIS_SUCCESS;
}
#endif

/* The lifecycle of internal/core/plan.h. */
static const iris_detail_plan_kind_t iris_moe_kind = {"iris_moe_create", "the MoE dispatch / combine", "layer",
                                                      "mode, max_tokens, hidden, top_k, num_experts, types, num_sms or max_recv_rows"};

IRIS_DEF iris_status_t iris_moe_create(iris_t *ctx, const iris_moe_desc_t *desc, iris_moe_t **out) {
  iris_status_t st;
  iris_moe_t *p;
  const char *bad;
  int W, me, q, old;
  size_t b[7], total = 0;
  if ((st = iris_detail_plan_args(&iris_moe_kind, ctx, desc, out)) != IRIS_SUCCESS) return st;
  if (out) *out = NULL;
  {
    iris_moe_desc_t none; /* a NULL desc or out: plan_meet refuses it on every rank */
    const iris_moe_desc_t *d = desc && out ? desc : (memset(&none, 0, sizeof none), &none);
    const long long mine[10] = {(long long)d->struct_size, d->mode, d->max_tokens, d->hidden, d->top_k, d->num_experts, d->dispatch_type, d->combine_type, d->num_sms,
                                d->max_recv_rows};
    if ((st = iris_detail_plan_meet(&iris_moe_kind, ctx, desc, out, mine, 10)) != IRIS_SUCCESS) return st;
  }
  W = iris_world_size(ctx);
  me = iris_rank(ctx);
  if ((bad = iris_moe_bad_desc(desc, W)) != NULL) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_moe_create: %s", me, bad);
  old = iris_detail_plan_device(ctx);
  iris_moe_block_bytes(desc, W, b);
  for (q = 0; q < 7; ++q) total += b[q];
  /* no exchange of its own before the agreement: after the allocation, only local steps */
  if ((p = (iris_moe_t *)iris_detail_plan_alloc(&iris_moe_kind, ctx, sizeof *p, &st)) != NULL) {
    p->ctx = ctx;
    p->d = *desc;
    p->W = W;
    p->me = me;
    p->L = desc->num_experts / W;
    p->cap = iris_moe_rows(desc, W);
    p->es = desc->dispatch_type == IRIS_FLOAT8_E4M3 ? 1 : 2;
    /* heap blocks: the same sequence on every rank (the heap is symmetric, so the verdict
     * is the same everywhere); the flags start at 0 and are never reset */
    st = iris_calloc(ctx, b[0], (void **)&p->flags);
    if (st == IRIS_SUCCESS) st = iris_malloc(ctx, b[1], (void **)&p->counts);
    if (st == IRIS_SUCCESS) st = iris_malloc(ctx, b[2], (void **)&p->recv_x);
    if (st == IRIS_SUCCESS && b[3]) st = iris_malloc(ctx, b[3], (void **)&p->recv_scales);
    if (st == IRIS_SUCCESS) st = iris_malloc(ctx, b[4], (void **)&p->recv_src);
    if (st == IRIS_SUCCESS) st = iris_malloc(ctx, b[5], (void **)&p->comb);
    if (st == IRIS_SUCCESS) st = iris_calloc(ctx, b[6], (void **)&p->marks); /* zero: no refusal, no rank gave up */
    if (st != IRIS_SUCCESS)
      st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY,
                            "rank %d: iris_moe_create: the symmetric heap (%zu bytes, %zu in use) cannot hold the plan's workspace (%zu bytes: %lld received rows of "
                            "%d channels, %zu bytes of combine slots); give iris_init a larger heap_size%s",
                            me, iris_heap_size(ctx), iris_heap_used(ctx), total, p->cap, desc->hidden, b[5],
                            desc->mode == IRIS_MOE_HIGH_THROUGHPUT ? " or set max_recv_rows" : "");
  }
  if (st == IRIS_SUCCESS) st = iris_moe_create_local(p);
#if defined(IRIS_TEST_HOOKS)
  if (st == IRIS_SUCCESS) st = iris_moe_test_wrap(p);
#endif
  st = iris_detail_plan_agree(ctx, st, "iris_moe_create", NULL, 0, "", ""); /* a plan on every rank or on none */
  /* every rank's zeroed flags before any peer signals into them */
  if (st == IRIS_SUCCESS) st = iris_barrier(ctx);
  iris_detail_plan_device_back(old);
  return iris_detail_plan_finish(st, p, out, iris_moe_destroy_plan);
}

IRIS_DEF iris_status_t iris_moe_get_recv(const iris_moe_t *p, iris_moe_recv_t *r) {
  if (!p || !r) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_moe_get_recv: NULL argument");
  r->x = p->recv_x;
  r->scales = p->recv_scales;
  r->src = p->recv_src;
  r->count = p->dev.count;
  r->offsets = p->dev.offsets;
  r->rows = p->cap;
  r->expert_stride = p->d.mode == IRIS_MOE_LOW_LATENCY ? (long long)p->W * p->d.max_tokens : 0;
  r->num_local_experts = p->L;
  return IRIS_SUCCESS;
}

/* A call refused on this rank still takes part (the peers count calls: a rank that
 * skipped one would pair its later calls with their earlier ones); its detail says so. */
#define IRIS_MOE_TOOK_PART " (the call took part with nothing of this rank's, so every rank's calls stay paired)"

IRIS_DEF iris_status_t iris_moe_dispatch(iris_moe_t *p, const void *x, int n, const int *topk_idx, const float *topk_weights, iris_stream_t stream) {
  iris_status_t st, bad = IRIS_SUCCESS;
  char why[512];
  if (!p) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_moe_dispatch: NULL plan");
  if (n < 0 || n > p->d.max_tokens) {
    snprintf(why, sizeof why, "rank %d: iris_moe_dispatch: num_tokens %d is outside [0, max_tokens = %d]", p->me, n, p->d.max_tokens);
    bad = IRIS_ERROR_INVALID_ARGUMENT;
  } else if (n > 0 && (!x || !topk_idx || !topk_weights)) {
    snprintf(why, sizeof why, "rank %d: iris_moe_dispatch: NULL input with %d tokens (x %p, topk_idx %p, topk_weights %p)", p->me, n, x, (const void *)topk_idx,
             (const void *)topk_weights);
    bad = IRIS_ERROR_INVALID_ARGUMENT;
  } else if ((uintptr_t)x % 16 || (uintptr_t)topk_idx % 4 || (uintptr_t)topk_weights % 4) {
    snprintf(why, sizeof why, "rank %d: iris_moe_dispatch: x must be 16-byte aligned, topk_idx and topk_weights 4-byte aligned (x %p)", p->me, x);
    bad = IRIS_ERROR_INVALID_ARGUMENT;
  }
  if (bad != IRIS_SUCCESS) { /* no tokens from this rank */
    n = 0;
    x = NULL;
    topk_idx = NULL;
    topk_weights = NULL;
  }
  if ((st = iris_detail_plan_run_begin(p->ctx, stream)) != IRIS_SUCCESS) return st;
  {
    const int nt = IRIS_MOE_THREADS(p);
    const size_t sh = 3 * (size_t)p->d.num_experts * sizeof(int);
    if (p->d.dispatch_type == IRIS_FLOAT8_E4M3) iris_moe_dispatch_kernel<true><<<p->sms, nt, sh, stream>>>(p->dev, (const iris_bf16_t *)x, topk_idx, topk_weights, n);
    else iris_moe_dispatch_kernel<false><<<p->sms, nt, sh, stream>>>(p->dev, (const iris_bf16_t *)x, topk_idx, topk_weights, n);
  }
  st = iris_detail_plan_launched(p->me, st, "iris_moe_dispatch: launching the dispatch kernel");
  if (st == IRIS_SUCCESS) {
    p->dispatched = 1;
    p->last_n = n;
  }
  st = iris_detail_plan_run_end(p->ctx, stream, st);
  if (st == IRIS_SUCCESS && bad != IRIS_SUCCESS) return iris_detail_fail(bad, "%s" IRIS_MOE_TOOK_PART, why);
  return st;
}

IRIS_DEF iris_status_t iris_moe_combine(iris_moe_t *p, const void *y, void *out, iris_stream_t stream) {
  iris_status_t st;
  int y_ok, out_ok;
  if (!p) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_moe_combine: NULL plan");
  if (!p->dispatched) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_moe_combine: no dispatch before it (combine returns a dispatch's rows)", p->me);
  /* a y that cannot be read: no rows go out (the peers' combines of this call see it and
   * leave their out); an out that cannot be written: nothing is summed here */
  y_ok = y && (uintptr_t)y % 16 == 0;
  out_ok = out && (uintptr_t)out % 16 == 0;
  if ((st = iris_detail_plan_run_begin(p->ctx, stream)) != IRIS_SUCCESS) return st;
  iris_moe_combine_kernel<<<p->sms, IRIS_MOE_THREADS(p), 0, stream>>>(p->dev, y_ok ? (const iris_bf16_t *)y : NULL, out_ok ? (iris_bf16_t *)out : NULL, p->last_n);
  out_ok |= p->last_n == 0; /* no rows to write: any out will do (an empty tensor's) */
  st = iris_detail_plan_launched(p->me, st, "iris_moe_combine: launching the combine kernel");
  st = iris_detail_plan_run_end(p->ctx, stream, st);
  if (st == IRIS_SUCCESS && (!y_ok || !out_ok))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT,
                            "rank %d: iris_moe_combine: y must be given, y and out 16-byte aligned, out given when the dispatch had tokens (y %p, out %p)%s%s", p->me, y, out,
                            y_ok ? " (the rows went out; nothing was written to out)"
                                 : " (its rows went out as NaN: the tokens they serve come out NaN on every rank, whose iris_moe_check names this rank)",
                            IRIS_MOE_TOOK_PART);
  return st;
}

/* The error record, the combines so far and the marks read, the record cleared when it
 * held one; on the plan's GPU, whatever device is current (the synchronize that makes the
 * clear land before the next run is that GPU's). */
static iris_gpu_error_t iris_moe_take_errors(iris_moe_t *p, iris_moe_err_t *e, unsigned *combs, iris_moe_marks_t *marks, const char **what) {
  iris_moe_err_t zero;
  iris_gpu_error_t g;
  *what = "reading the error record";
  if ((g = iris_gpu_copy_to_host(e, &p->dev.st->err, sizeof *e)) != IRIS_GPU_SUCCESS) return g;
  *what = "reading the marks";
  if ((g = iris_gpu_copy_to_host(combs, &p->dev.st->comb_epoch, sizeof *combs)) != IRIS_GPU_SUCCESS ||
      (g = iris_gpu_copy_to_host(marks, p->marks, sizeof *marks)) != IRIS_GPU_SUCCESS)
    return g;
  if (e->what == IRIS_MOE_ERR_NONE) return IRIS_GPU_SUCCESS;
  *what = "clearing the error record";
  memset(&zero, 0, sizeof zero);
  if ((g = iris_gpu_copy_to_device(&p->dev.st->err, &zero, sizeof zero)) != IRIS_GPU_SUCCESS) return g;
  return iris_gpu_synchronize();
}

IRIS_DEF iris_status_t iris_moe_check(iris_moe_t *p) {
  iris_moe_err_t e;
  iris_moe_marks_t marks;
  iris_gpu_error_t g;
  iris_status_t st;
  unsigned combs = 0;
  const char *what = "";
  char call[96], others[512] = "";
  int q, old;
  if (!p) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_moe_check: NULL plan");
  old = iris_detail_plan_device(p->ctx);
  g = iris_moe_take_errors(p, &e, &combs, &marks, &what);
  iris_detail_plan_device_back(old);
  snprintf(call, sizeof call, "iris_moe_check: %s", what);
  if (g != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(p->me, call, g);
  /* a peer that gave up (its context is fatal: it takes part in no call issued after it):
   * this plan's results since then are undefined, so every check says so, first (a
   * routing error of this rank may be one of its effects). Where this rank's context has
   * a fatal fault, that fault, which says more. */
  for (q = 0; q < p->W; q++)
    if (q != p->me && marks.gaveup[q]) {
      if (e.what != IRIS_MOE_ERR_GAVEUP) {
        e.what = IRIS_MOE_ERR_GAVEUP;
        e.value = q;
      } else
        snprintf(others + strlen(others), sizeof others - strlen(others), ", rank %d", q);
    }
  if (e.what == IRIS_MOE_ERR_GAVEUP && (st = iris_detail_check_fault(p->ctx)) != IRIS_SUCCESS) return st;
  /* the peers' refused combines not reported yet: a refusal word other than the one last
   * reported for that rank (a count and a call number: equal words are the same refusal,
   * whatever the call numbers' wrap), unless it names the combine after this rank's last
   * (a peer one combine ahead, as repeated combines allow: the next check names it). This
   * rank's own error goes first; the words then stay unreported, for the next check. */
  if (e.what == IRIS_MOE_ERR_NONE)
    for (q = 0; q < p->W; q++) {
      const unsigned long long w = marks.nocomb[q];
      if (w == p->seen[q] || (unsigned)w == combs + 1u) continue;
      p->seen[q] = w;
      if (e.what == IRIS_MOE_ERR_NONE) {
        e.what = IRIS_MOE_ERR_PEER;
        e.call = (unsigned)w;
        e.value = q;
      } else
        snprintf(others + strlen(others), sizeof others - strlen(others), ", rank %d's (call %u)", q, (unsigned)w);
    }
  switch (e.what) {
  case IRIS_MOE_ERR_NONE: return iris_detail_check_fault(p->ctx);
  case IRIS_MOE_ERR_EXPERT:
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_moe_dispatch (call %u): topk_idx[%d][%d] = %lld is outside [-1, num_experts = %d): skipped", p->me,
                            e.call, e.token, e.k, e.value, p->d.num_experts);
  case IRIS_MOE_ERR_REPEAT:
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_moe_dispatch (call %u): topk_idx[%d][%d] = %lld repeats an expert of the same token: skipped", p->me,
                            e.call, e.token, e.k, e.value);
  case IRIS_MOE_ERR_OVERFLOW:
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: iris_moe_dispatch (call %u): %lld received rows needed, max_recv_rows is %lld: the rows past it were dropped",
                            p->me, e.call, e.value, p->cap);
  case IRIS_MOE_ERR_TOKENS:
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT,
                            "rank %d: iris_moe_combine (call %u): it was issued for %d tokens but follows a dispatch of %lld on the stream (a graph of another dispatch "
                            "replayed in between?): it wrote %d rows of out",
                            p->me, e.call, e.token, e.value, e.k);
  case IRIS_MOE_ERR_GAVEUP:
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_moe_check: rank %lld gave up waiting in a call of this plan (a wait there ran past the bound, or its context had another fatal "
                            "fault: see its error) and took part in its calls since with nothing of its own: this rank's received rows and sums since then are "
                            "undefined where they involve it, and it takes part in no call issued after it; destroy the plan (every check reports this)%s%s",
                            p->me, e.value, others[0] ? "; so did " : "", others[0] ? others + 2 : "");
  case IRIS_MOE_ERR_PEER:
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT,
                            "rank %d: iris_moe_combine (call %u): rank %lld's combine of this call was refused (see its error): the tokens with an expert there are NaN "
                            "in out%s%s",
                            p->me, e.call, e.value, others[0] ? "; refused as well since the last check: " : "", others[0] ? others + 2 : "");
  default:
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_moe_combine: a received row names source 0x%llx (not a rank and token of this plan): skipped", p->me,
                            (unsigned long long)e.value);
  }
}
#endif /* IRIS_INTERNAL_MOE_HOST_H */
