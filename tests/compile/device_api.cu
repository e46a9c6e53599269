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

__global__ void device_api(iris_device_ctx_t ctx, unsigned long *ul, double *d, int *i32, long long *i64, int peer, iris_team_t team, float *f) {
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
  // team signals on every type their non-team forms take: SET and ADD on float and
  // double (iris_signal, iris_signal_add), OR and XOR on integers
  iris_team_signal(ctx, team, f, 1.0f, 1);
  d[2] = iris_team_signal_add(ctx, team, d, 1.0, 1);
  i32[4] = iris_team_signal_op<IRIS_SIGNAL_OR>(ctx, team, i32, 4, 1) + iris_team_signal_op<IRIS_SIGNAL_XOR>(ctx, team, i32, 8, 1);
  // waits on the flags those signals raise: float and double (IRIS_CMP_EPOCH is GE there)
  if (!iris_wait_until(ctx, f, IRIS_CMP_GE, 1.0f)) i32[5] = 1;
  if (!iris_wait_block(ctx, d, IRIS_CMP_EPOCH, 2.0)) i32[6] = 1;
  if (!iris_team_wait_until(ctx, team, f, IRIS_CMP_EQ, 1.0f, 1)) i32[7] = 1;
}
