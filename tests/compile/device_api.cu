// Compile check: the device API as a user's kernel calls it, with every nvcc front-end
// warning an error (-Werror all-warnings): each order and scope of iris_fence (RELAXED
// included: "no instruction"), and the atomics and waits on the types the docs list that
// all_headers.cu does not instantiate. Built as an object; never run.
#include "../../iris_device.h"

template <iris_scope_t S>
__device__ void fences() {
  iris_fence<IRIS_ORDER_RELAXED, S>();
  iris_fence<IRIS_ORDER_ACQUIRE, S>();
  iris_fence<IRIS_ORDER_RELEASE, S>();
  iris_fence<IRIS_ORDER_ACQ_REL, S>();
}

__global__ void device_api(iris_device_ctx_t ctx, unsigned long *ul, double *d, int *i32, long long *i64, int peer) {
  fences<IRIS_SCOPE_BLOCK>();
  fences<IRIS_SCOPE_DEVICE>();
  fences<IRIS_SCOPE_SYSTEM>();
  iris_fence();
  ul[1] = iris_atomic_min(ctx, ul, 3ul, peer) + iris_atomic_cas(ctx, ul, 1ul, 2ul, peer) + iris_atomic_load(ctx, ul, peer);
  d[1] = iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(ctx, d, peer);
  iris_atomic_store(ctx, d, 2.0, peer);
  if (!iris_wait_until(ctx, i32, IRIS_CMP_EPOCH, 5)) i32[1] = 1;
  if (!iris_wait_until<IRIS_SCOPE_DEVICE>(ctx, i64, IRIS_CMP_GT, 5ll)) i32[2] = 1;
  if (!iris_wait_block(ctx, ul, IRIS_CMP_EPOCH, 9ul)) i32[3] = 1;
}
