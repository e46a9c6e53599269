/* internal/core/stream_order.h: the call order of a context's communication calls across
 * streams (iris_detail_order_begin, iris_detail_order_end).
 *
 * Every call of a context that launches communication kernels (collectives, the device
 * barrier, GEMM + communication plans) brackets its launches with these, so that the
 * context's calls run one after another in the order the host issued them, whatever
 * streams they are issued on: a call on another stream than the previous one first waits
 * for the previous one (an event). Eager calls and calls captured into one graph (also
 * across the streams of that capture) are ordered; the first call of a capture cannot
 * depend on eager work (CUDA forbids crossing the capture boundary), so a graph must not
 * run concurrently with other calls of the same context (launch it on a stream that is
 * ordered with them).
 *
 * Part of iris's implementation, included by iris.h under IRIS_IMPLEMENTATION (inside its
 * extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_STREAM_ORDER_H
#define IRIS_INTERNAL_CORE_STREAM_ORDER_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"
#include "status.h"
#include "context.h"

IRIS_DEF iris_status_t iris_detail_order_begin(iris_t *ctx, iris_stream_t stream) {
  unsigned long long cap = 0;
  iris_gpu_error_t e;
  if ((e = iris_gpu_capture_id(stream, &cap)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "querying the stream's capture state", e);
  if (!cap) {
    if (ctx->order_have_eager && ctx->order_eager_stream != stream && (e = iris_gpu_stream_wait(stream, ctx->order_eager)) != IRIS_GPU_SUCCESS)
      return iris_detail_gpu_fail(ctx->local_rank, "ordering after the previous call (stream wait)", e);
  } else if (ctx->order_cap_id == cap && ctx->order_cap_stream != stream && (e = iris_gpu_stream_wait(stream, ctx->order_cap)) != IRIS_GPU_SUCCESS) {
    return iris_detail_gpu_fail(ctx->local_rank, "ordering after the previous captured call (stream wait)", e);
  }
  return IRIS_SUCCESS;
}
IRIS_DEF iris_status_t iris_detail_order_end(iris_t *ctx, iris_stream_t stream) {
  unsigned long long cap = 0;
  iris_gpu_error_t e;
  if ((e = iris_gpu_capture_id(stream, &cap)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "querying the stream's capture state", e);
  if (!cap) {
    if ((e = iris_gpu_event_record(ctx->order_eager, stream)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "recording the call's event", e);
    ctx->order_have_eager = 1;
    ctx->order_eager_stream = stream;
  } else {
    if ((e = iris_gpu_event_record(ctx->order_cap, stream)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "recording the captured call's event", e);
    ctx->order_cap_id = cap;
    ctx->order_cap_stream = stream;
  }
  return IRIS_SUCCESS;
}

#endif /* IRIS_INTERNAL_CORE_STREAM_ORDER_H */
