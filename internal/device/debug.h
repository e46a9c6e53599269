/* internal/device/debug.h: the debug checks of iris_device.h: under
 * IRIS_DEBUG the check of every remote access (the target rank on this rank's node, the
 * pointer and its extent in the heap) behind IRIS_DETAIL_CHECK, which prints what failed
 * and traps.
 *
 * Part of iris_device.h (device code, included by it); not a public header. */
#ifndef IRIS_INTERNAL_DEVICE_DEBUG_H
#define IRIS_INTERNAL_DEVICE_DEBUG_H
#include "../../iris.h"
#include "platform.h"

#if defined(IRIS_DEBUG)
IRIS_DEVICE_INLINE void iris_detail_check(const iris_device_ctx_t &ctx, const void *p, size_t bytes, int rank, const char *what) {
  uintptr_t a = (uintptr_t)p, b = (uintptr_t)ctx.bases[ctx.local_rank];
  if (rank < 0 || rank >= ctx.world_size) {
    printf("iris: %s on rank %d (block %d, thread %d): target rank %d outside [0, %d)\n", what, ctx.rank, (int)blockIdx.x, (int)threadIdx.x, rank,
           ctx.world_size);
    iris_detail_trap();
  }
  if (rank / ctx.local_size != ctx.node) {
    printf("iris: %s on rank %d (block %d, thread %d): target rank %d is on node %d, not on this rank's node %d: device RMA reaches only the ranks of "
           "one node (docs/multinode.md)\n", what, ctx.rank, (int)blockIdx.x, (int)threadIdx.x, rank, rank / ctx.local_size, ctx.node);
    iris_detail_trap();
  }
  /* a - b and heap_size - (a - b) cannot wrap once a >= b and a - b <= heap_size: a huge
   * `bytes` (a negative size cast to size_t) is refused, not wrapped past the end */
  if (a < b || a - b > ctx.heap_size || bytes > ctx.heap_size - (a - b)) {
    printf("iris: %s on rank %d (block %d, thread %d): pointer %p (+%llu bytes) is outside the symmetric heap [%p, %p)\n", what, ctx.rank, (int)blockIdx.x,
           (int)threadIdx.x, p, (unsigned long long)bytes, (void *)b, (void *)(b + ctx.heap_size));
    iris_detail_trap();
  }
}
#define IRIS_DETAIL_CHECK(ctx, p, bytes, rank, what) iris_detail_check(ctx, p, bytes, rank, what)
#else
#define IRIS_DETAIL_CHECK(ctx, p, bytes, rank, what) ((void)0)
#endif

#endif /* IRIS_INTERNAL_DEVICE_DEBUG_H */
