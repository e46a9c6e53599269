/* internal/moe/grid.h: the CTAs of the MoE plan's kernels (iris_moe.h): the mode's default,
 * desc.num_sms, the GPU's SMs, and the room left for the peers' grids where ranks of one
 * process share the GPU. C, no device code (host tests include it). Part of the MoE
 * implementation (IRIS_IMPLEMENTATION); not a public header. */
#ifndef IRIS_INTERNAL_MOE_GRID_H
#define IRIS_INTERNAL_MOE_GRID_H
#include "../../iris.h"

/* High throughput's default CTAs: DeepEP's 20 SMs reach its 4096-token figures (8xH100). */
#define IRIS_MOE_HT_SMS 20

/* CTAs of the dispatch and combine kernels on a GPU of sm_count SMs: desc.num_sms (ht: the
 * mode is IRIS_MOE_HIGH_THROUGHPUT), 0 for the mode's default (every SM for low latency,
 * IRIS_MOE_HT_SMS for high throughput), at most one per SM. The kernels' CTAs wait for
 * each other and for the peers' kernels, so the grid must be resident with the peers'
 * grids: where ranks of this process share the GPU (iris_init_local with a device listed
 * twice, threads; their kernels run at once in one context) each rank's grid takes at
 * most 1 / W of the SMs (W: the node's ranks), as the collectives' do (docs/shared_gpu.md).
 * Uncapped, one rank's grid held every SM and each call waited out its bound for a peer's
 * grid that could not start. The ranks' grids need not agree (the protocol counts flags
 * per source rank, not CTAs). */
static inline int iris_moe_grid(const iris_t *ctx, int ht, int num_sms, int sm_count) {
  int n = sm_count > 0 ? sm_count : 1, g;
  g = num_sms > 0 ? num_sms : ht ? IRIS_MOE_HT_SMS : n;
  if (g > n) g = n;
  if (iris_detail_gpu_shared_any(ctx) && iris_local_size(ctx) > 1) {
    const int cap = n / iris_local_size(ctx) > 0 ? n / iris_local_size(ctx) : 1;
    if (g > cap) g = cap;
  }
  return g;
}

#endif /* IRIS_INTERNAL_MOE_GRID_H */
