/* tests/host/plans.c: the host side of the GEMM and MoE plans (iris_gemm.h,
 * iris_gemm_reduce.h, iris_moe.h) that needs no GPU: the MoE kernels' grid
 * (internal/moe/grid.h). The GPU side is tests/moe_test.cu, tests/gemm_test.cu and
 * tests/gemm_rs_test.cu. */
#include "harness.h"
#include "iris_moe.h" /* C part only: the description */
#include "internal/moe/grid.h"

/* ------------------------------------------------------------- MoE grid -- */
/* The dispatch and combine kernels' CTAs wait for each other and for the peers' kernels:
 * at most one per SM, and where ranks of one process share the GPU (their kernels run at
 * once) within 1 / W of the SMs, so every rank's grid is resident (as the collectives';
 * docs/shared_gpu.md). Uncapped, a low-latency plan took every SM on every rank. */
static void test_moe_grid(void) {
  static char heap[1 << 12];
  iris_t *ctx = iris_detail_host_only_ctx(sizeof heap, heap);
  int ll, ht, asked, asked_big, one, tiny;
  if (!ctx) { check(0, "moe grid: host-only context", "out of memory"); return; }
  /* a GPU of its own (one rank, or ranks on GPUs of their own): the mode's default, num_sms, at most the SMs */
  ctx->local_size = 4;
  ll = iris_moe_grid(ctx, 0, 0, 132), ht = iris_moe_grid(ctx, 1, 0, 132), asked = iris_moe_grid(ctx, 0, 24, 132), asked_big = iris_moe_grid(ctx, 1, 500, 132);
  tiny = iris_moe_grid(ctx, 0, 0, 0);
  check(ll == 132 && ht == IRIS_MOE_HT_SMS && asked == 24 && asked_big == 132 && tiny == 1,
        "moe grid: a GPU of its own: every SM (low latency), 20 (high throughput), num_sms up to the SMs", "low latency %d, high throughput %d, 24 -> %d, 500 -> %d, 0 SMs -> %d",
        ll, ht, asked, asked_big, tiny);
  /* 4 ranks of this process on one GPU of 132 SMs: each grid within 132 / 4 = 33 */
  ctx->gpu_shared = ctx->gpu_shared_any = 1;
  ll = iris_moe_grid(ctx, 0, 0, 132), ht = iris_moe_grid(ctx, 1, 0, 132), asked = iris_moe_grid(ctx, 0, 24, 132), asked_big = iris_moe_grid(ctx, 1, 500, 132);
  check(ll == 33 && ht == IRIS_MOE_HT_SMS && asked == 24 && asked_big == 33 && 4 * ll <= 132,
        "moe grid: 4 ranks of one process sharing a GPU: each grid within 1 / 4 of the SMs, so all four are resident at once",
        "low latency %d, high throughput %d, 24 -> %d, 500 -> %d (want 33, 20, 24, 33)", ll, ht, asked, asked_big);
  /* more ranks than SMs: one CTA each */
  ctx->local_size = 16;
  one = iris_moe_grid(ctx, 0, 0, 8);
  check(one == 1, "moe grid: more ranks sharing the GPU than it has SMs: one CTA a rank", "%d", one);
  ctx->gpu_shared = ctx->gpu_shared_any = 0;
  iris_detail_host_only_free(ctx);
}

/* --------------------------------------------------- plan create's meet -- */
/* Every plan's create (iris_ag_gemm_create, iris_gemm_rs_create, iris_moe_create) opens
 * with iris_detail_plan_args and iris_detail_plan_meet (internal/core/plan.h). A rank
 * whose desc or out is NULL takes part in the meet, so every rank refuses the create at
 * once: before, it returned at once and its peers waited in the meet for the exchange's
 * bound (here 3 s), then failed with IRIS_ERROR_TIMEOUT. Two ranks as threads of this
 * process on host-only contexts joined by an in-process group. */
#include "internal/core/plan.h"
typedef struct plan_rank {
  iris_t *ctx;
  const long long *desc; /* the description's fields; NULL: a NULL desc */
  int null_out;
  iris_status_t st;
  long long ms;
  char detail[1100];
} plan_rank_t;
static const iris_detail_plan_kind_t test_plan_kind = {"test_plan_create", "the test plan", "problem", "shape"};
static void *plan_rank_thread(void *p) {
  plan_rank_t *r = (plan_rank_t *)p;
  void *plan = (void *)&g_seed, **out = r->null_out ? NULL : &plan;
  const long long t0 = now_ms();
  /* the creates' opening, as in iris_moe_create */
  r->st = iris_detail_plan_args(&test_plan_kind, r->ctx, r->desc, out);
  if (r->st == IRIS_SUCCESS) {
    if (out) *out = NULL;
    r->st = iris_detail_plan_meet(&test_plan_kind, r->ctx, r->desc, out, r->desc, 3);
  }
  r->ms = now_ms() - t0;
  snprintf(r->detail, sizeof r->detail, "%s", r->st == IRIS_SUCCESS ? "" : iris_error_detail());
  return NULL;
}
/* Runs the two ranks' opening: descs[r] (NULL: a NULL desc), null_out[r]. */
static void plan_meet_2(const long long *d0, const long long *d1, int null_out0, int null_out1, plan_rank_t *r) {
  iris_detail_group_t *g = iris_detail_group_create(2);
  static char heaps[2][1 << 12];
  pthread_t th[2];
  int i;
  for (i = 0; i < 2; i++) {
    memset(&r[i], 0, sizeof r[i]);
    r[i].ctx = iris_detail_host_only_ctx(sizeof heaps[i], heaps[i]);
    r[i].st = IRIS_ERROR_OUT_OF_MEMORY;
    if (!r[i].ctx || !g) continue;
    r[i].ctx->mode = IRIS_DETAIL_MODE_LOCAL;
    r[i].ctx->group = g;
    r[i].ctx->local_rank = i;
    r[i].ctx->local_size = 2;
    r[i].ctx->barrier_timeout_ms = 3000;
  }
  r[0].desc = d0, r[1].desc = d1, r[0].null_out = null_out0, r[1].null_out = null_out1;
  if (g && r[0].ctx && r[1].ctx) {
    for (i = 0; i < 2; i++) pthread_create(&th[i], NULL, plan_rank_thread, &r[i]);
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
  }
  for (i = 0; i < 2; i++) iris_detail_host_only_free(r[i].ctx);
  if (g) {
    iris_detail_group_release(g);
    iris_detail_group_release(g);
  }
}
static void test_plan_meet(void) {
  const long long a[3] = {64, 2048, 8}, b[3] = {64, 4096, 8};
  plan_rank_t r[2];
  plan_meet_2(a, a, 0, 0, r);
  check(r[0].st == IRIS_SUCCESS && r[1].st == IRIS_SUCCESS, "plan create: the same description on both ranks meets", "%s '%s' / %s '%s'", sname(r[0].st), r[0].detail,
        sname(r[1].st), r[1].detail);
  plan_meet_2(a, b, 0, 0, r);
  check(r[0].st == IRIS_ERROR_MISMATCH && r[1].st == IRIS_ERROR_MISMATCH && names_rank(r[0].detail, 1) && names_rank(r[1].detail, 0),
        "plan create: another description on one rank: IRIS_ERROR_MISMATCH on both, naming the other", "%s '%s' / %s '%s'", sname(r[0].st), r[0].detail, sname(r[1].st),
        r[1].detail);
  plan_meet_2(NULL, a, 0, 0, r);
  check(r[0].st == IRIS_ERROR_INVALID_ARGUMENT && has(r[0].detail, "NULL") && r[1].st == IRIS_ERROR_MISMATCH && names_rank(r[1].detail, 0) &&
            has(r[1].detail, "NULL") && r[0].ms < 1500 && r[1].ms < 1500,
        "plan create: a NULL desc on rank 0 only: refused there (INVALID_ARGUMENT), and at once on rank 1 (MISMATCH naming rank 0), no wait for the bound",
        "rank 0 %s '%s' (%lld ms), rank 1 %s '%s' (%lld ms)", sname(r[0].st), r[0].detail, r[0].ms, sname(r[1].st), r[1].detail, r[1].ms);
  plan_meet_2(a, a, 0, 1, r);
  check(r[1].st == IRIS_ERROR_INVALID_ARGUMENT && r[0].st == IRIS_ERROR_MISMATCH && names_rank(r[0].detail, 1) && r[0].ms < 1500 && r[1].ms < 1500,
        "plan create: a NULL out on rank 1 only: refused on both ranks at once", "rank 0 %s '%s' (%lld ms), rank 1 %s '%s' (%lld ms)", sname(r[0].st), r[0].detail,
        r[0].ms, sname(r[1].st), r[1].detail, r[1].ms);
  plan_meet_2(NULL, NULL, 0, 0, r);
  check(r[0].st == IRIS_ERROR_INVALID_ARGUMENT && r[1].st == IRIS_ERROR_INVALID_ARGUMENT, "plan create: a NULL desc on every rank: INVALID_ARGUMENT on every rank",
        "%s / %s", sname(r[0].st), sname(r[1].st));
  check(iris_detail_plan_args(&test_plan_kind, NULL, a, r) == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "test_plan_create"),
        "plan create: a NULL context is refused at once", "%s", iris_error_detail());
}

/* ------------------------------------------------ plan create's host memory -- */
/* A create whose plan struct cannot be allocated on one rank (iris_detail_plan_alloc,
 * failed there by the IRIS_TEST_HOOKS hook) goes on without a plan to the agreement:
 * that rank returns IRIS_ERROR_OUT_OF_MEMORY and its peer IRIS_ERROR_MISMATCH naming it,
 * both at once. Before, the rank returned at once and its peer waited in
 * iris_detail_plan_agree for the exchange's bound (here 3 s), then paired its next
 * exchange with that rank's next one. The peer's heap block is freed, and the next create
 * meets and succeeds on both ranks. test_plan_create is the creates' lifecycle with one
 * heap block as the local step. */
typedef struct test_plan {
  iris_t *ctx;
  void *block;
} test_plan_t;
static void test_plan_destroy(test_plan_t *p) {
  if (!p) return;
  if (p->block) iris_free(p->ctx, p->block);
  free(p);
}
static iris_status_t test_plan_create(iris_t *ctx, const long long *desc, test_plan_t **out) {
  iris_status_t st;
  test_plan_t *p;
  if ((st = iris_detail_plan_args(&test_plan_kind, ctx, desc, out)) != IRIS_SUCCESS) return st;
  *out = NULL;
  if ((st = iris_detail_plan_meet(&test_plan_kind, ctx, desc, out, desc, 3)) != IRIS_SUCCESS) return st;
  if ((p = (test_plan_t *)iris_detail_plan_alloc(&test_plan_kind, ctx, sizeof *p, &st)) != NULL) {
    p->ctx = ctx;
    st = iris_malloc(ctx, 1024, &p->block);
  }
  st = iris_detail_plan_agree(ctx, st, "test_plan_create", NULL, 0, "", "");
  if (st != IRIS_SUCCESS) {
    test_plan_destroy(p);
    return st;
  }
  *out = p;
  return IRIS_SUCCESS;
}
typedef struct alloc_rank {
  iris_t *ctx;
  iris_status_t st;
  long long ms;
  size_t used; /* heap bytes in use after the create's failure */
  char detail[1100];
} alloc_rank_t;
static void *alloc_rank_thread(void *arg) {
  alloc_rank_t *r = (alloc_rank_t *)arg;
  static const long long desc[3] = {64, 2048, 8};
  test_plan_t *p = NULL;
  const long long t0 = now_ms();
  r->st = test_plan_create(r->ctx, desc, &p);
  r->ms = now_ms() - t0;
  snprintf(r->detail, sizeof r->detail, "%s", r->st == IRIS_SUCCESS ? "" : iris_error_detail());
  r->used = iris_heap_used(r->ctx);
  test_plan_destroy(p);
  return NULL;
}
/* One create on both ranks (threads), the hook failing rank fail_rank's allocation (-1: none). */
static void alloc_run_2(alloc_rank_t *r, int fail_rank) {
  pthread_t th[2];
  int i;
  iris_detail_test_plan_alloc_fails = fail_rank; /* set while no create runs */
  for (i = 0; i < 2; i++) pthread_create(&th[i], NULL, alloc_rank_thread, &r[i]);
  for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
  iris_detail_test_plan_alloc_fails = -1;
}
static void test_plan_alloc_fails(void) {
  iris_detail_group_t *g = iris_detail_group_create(2);
  static char heaps[2][1 << 12];
  alloc_rank_t r[2];
  int i, ok = g != NULL;
  for (i = 0; i < 2; i++) {
    memset(&r[i], 0, sizeof r[i]);
    r[i].ctx = iris_detail_host_only_ctx(sizeof heaps[i], heaps[i]);
    if (!r[i].ctx || !g) {
      ok = 0;
      continue;
    }
    r[i].ctx->mode = IRIS_DETAIL_MODE_LOCAL;
    r[i].ctx->group = g;
    r[i].ctx->local_rank = i;
    r[i].ctx->local_size = 2;
    r[i].ctx->bases[i] = heaps[i]; /* this rank's heap: iris_free finds its blocks */
    r[i].ctx->barrier_timeout_ms = 3000;
  }
  if (!ok) check(0, "plan create: host memory short on one rank", "setup: out of memory");
  else {
    alloc_run_2(r, 1);
    check(r[1].st == IRIS_ERROR_OUT_OF_MEMORY && has(r[1].detail, "host memory") && r[0].st == IRIS_ERROR_MISMATCH && names_rank(r[0].detail, 1) && r[0].ms < 1500 &&
              r[1].ms < 1500 && r[0].used == 0 && r[1].used == 0,
          "plan create: host memory short for the plan on rank 1 only: OUT_OF_MEMORY there, MISMATCH naming it on rank 0, both at once, no heap block left",
          "rank 0 %s '%s' (%lld ms, %zu heap bytes), rank 1 %s '%s' (%lld ms, %zu heap bytes)", sname(r[0].st), r[0].detail, r[0].ms, r[0].used, sname(r[1].st),
          r[1].detail, r[1].ms, r[1].used);
    alloc_run_2(r, -1);
    check(r[0].st == IRIS_SUCCESS && r[1].st == IRIS_SUCCESS && r[0].ms < 1500 && r[1].ms < 1500,
          "plan create: after a create refused for host memory, the next create meets and succeeds on both ranks (the exchanges stay paired)",
          "rank 0 %s '%s' (%lld ms), rank 1 %s '%s' (%lld ms)", sname(r[0].st), r[0].detail, r[0].ms, sname(r[1].st), r[1].detail, r[1].ms);
  }
  for (i = 0; i < 2; i++) iris_detail_host_only_free(r[i].ctx);
  if (g) {
    iris_detail_group_release(g);
    iris_detail_group_release(g);
  }
}
