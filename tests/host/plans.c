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
