/* internal/coll/api.h: the bodies of the public host functions of
 * iris_collectives.h: the collectives, the tile flags, iris_barrier_device. Under
 * IRIS_IMPLEMENTATION.
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_INTERNAL_COLL_API_H
#define IRIS_INTERNAL_COLL_API_H
#include "../../iris_collectives.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "../core/plan.h"
#include "protocol.h"
#include "kernels.h"
#include "launch.h"
#include "host.h"
#include "multinode.h"

/* Every collective: refuse a context with a fatal fault at once (no launch, no wait),
 * then enqueue after the context's previous call, whatever its stream. */
static iris_status_t iris_coll_run(iris_t *ctx, int kind, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op, int root,
                                   iris_stream_t stream, const iris_coll_opts_t *opts) {
  iris_status_t st, st2;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL context", iris_coll_names[kind]);
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  if (iris_num_nodes(ctx) > 1) return iris_coll_mn_run(ctx, kind, send, recv, count, t, op, root, stream, opts);
  /* a world of one copies, ordered as every call (whatever the streams); a count of 0
   * takes part (iris_coll_enqueue_on) */
  if ((st = iris_detail_order_begin(ctx, stream)) != IRIS_SUCCESS) return st;
  st = iris_coll_enqueue(ctx, kind, send, recv, count, t, op, root, stream, opts);
  st2 = iris_detail_order_end(ctx, stream);
  return st != IRIS_SUCCESS ? st : st2;
}

IRIS_DEF iris_status_t iris_all_reduce_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op, iris_stream_t stream,
                                          const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_AR, send, recv, count, type, op, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_all_gather_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                          const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_AG, send, recv, count, type, IRIS_SUM, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_reduce_scatter_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op,
                                              iris_stream_t stream, const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_RS, send, recv, count, type, op, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_all_to_all_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                          const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_A2A, send, recv, count, type, IRIS_SUM, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_broadcast_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, int root, iris_stream_t stream,
                                         const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_BC, send, recv, count, type, IRIS_SUM, root, stream, opts);
}
IRIS_DEF iris_status_t iris_all_reduce(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op, iris_stream_t stream) {
  return iris_all_reduce_ex(ctx, send, recv, count, type, op, stream, NULL);
}
IRIS_DEF iris_status_t iris_all_gather(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream) {
  return iris_all_gather_ex(ctx, send, recv, count, type, stream, NULL);
}
IRIS_DEF iris_status_t iris_reduce_scatter(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op, iris_stream_t stream) {
  return iris_reduce_scatter_ex(ctx, send, recv, count, type, op, stream, NULL);
}
IRIS_DEF iris_status_t iris_all_to_all(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream) {
  return iris_all_to_all_ex(ctx, send, recv, count, type, stream, NULL);
}
IRIS_DEF iris_status_t iris_broadcast(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, int root, iris_stream_t stream) {
  return iris_broadcast_ex(ctx, send, recv, count, type, root, stream, NULL);
}
IRIS_DEF iris_status_t iris_tile_flags_create(iris_t *ctx, int num_tiles, iris_tile_flags_t *out) {
  iris_status_t st;
  char *base = NULL;
  size_t bytes;
  int q;
  if (!ctx || !out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_tile_flags_create: NULL argument (ctx %p, out %p)", (void *)ctx, (void *)out);
  memset(out, 0, sizeof *out);
  /* every rank the same count, judged on every rank alike: the block's size decides where
   * the next heap block starts (different counts would leave the heaps out of step, and a
   * count refused on one rank only would leave the others waiting in the barrier) */
  {
    const long long mine = num_tiles;
    if ((st = iris_detail_meet_same(ctx, &mine, 1, &q)) != IRIS_SUCCESS) return st;
  }
  if (q >= 0)
    return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: iris_tile_flags_create: rank %d asks for another number of tiles than this rank's %d: every rank passes the same num_tiles",
                            iris_rank(ctx), q, num_tiles);
  if (num_tiles < 1) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_tile_flags_create: num_tiles is %d, must be at least 1", iris_rank(ctx), num_tiles);
  bytes = (size_t)num_tiles * (IRIS_MAX_RANKS * sizeof(unsigned long long) + sizeof(unsigned));
  st = iris_calloc(ctx, bytes, (void **)&base); /* on a failed memset the block stays (offsets stay equal) */
  if (!base) return st;
  /* *out owns the block from here, also on failure: iris_tile_flags_destroy frees it */
  out->flags = (unsigned long long *)base;
  out->counters = (unsigned *)(base + (size_t)num_tiles * IRIS_MAX_RANKS * sizeof(unsigned long long));
  out->num_tiles = num_tiles;
  if (st != IRIS_SUCCESS) return st;
  return iris_barrier(ctx); /* zero everywhere before anyone signals */
}
IRIS_DEF iris_status_t iris_tile_flags_destroy(iris_t *ctx, iris_tile_flags_t *f) {
  iris_status_t st;
  if (!ctx || !f) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_tile_flags_destroy: NULL argument");
  if (!f->flags) return IRIS_SUCCESS;
  st = iris_free(ctx, f->flags);
  memset(f, 0, sizeof *f);
  return st;
}

/* iris_barrier_device's launches, between iris_detail_order_begin and _end. */
static iris_status_t iris_coll_barrier_enqueue(iris_t *ctx, iris_coll_state_t *s, iris_stream_t stream) {
  iris_gpu_error_t e;
  if (iris_local_size(ctx) > 1) iris_coll_barrier_kernel<<<1, 64, 0, stream>>>(s->dev, IRIS_COLL_SIG_BARRIER); /* a signature no collective has */
  e = iris_gpu_last_error();
  if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "iris_barrier_device: launch failed: %s", iris_gpu_error_text(e));
  if (iris_num_nodes(ctx) > 1) { /* then the nodes meet over the rails (a one-word all-reduce), then the node again */
    const iris_nccl_api_t *nc = iris_detail_nccl(ctx);
    int r = nc->all_reduce(s->mn_scratch, s->mn_scratch, 1, 2 /* ncclInt32 */, 0 /* ncclSum */, iris_rail_comm(ctx), stream);
    if (r != 0) return iris_detail_fail(IRIS_ERROR_SYSTEM, "rank %d: iris_barrier_device: the rail all-reduce (NCCL) failed: %s", iris_rank(ctx), nc->get_error_string(r));
    if (iris_local_size(ctx) > 1) iris_coll_barrier_kernel<<<1, 64, 0, stream>>>(s->dev, IRIS_COLL_SIG_BARRIER_2);
    e = iris_gpu_last_error();
    if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "iris_barrier_device: launch failed: %s", iris_gpu_error_text(e));
  }
  return IRIS_SUCCESS;
}
IRIS_DEF iris_status_t iris_barrier_device(iris_t *ctx, iris_stream_t stream) {
  iris_coll_state_t *s;
  iris_status_t st, st2;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_barrier_device: NULL context");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  if (!(s = (iris_coll_state_t *)iris_detail_get_ext(ctx))) {
    if (iris_gpu_stream_capturing(stream))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_barrier_device: call iris_collectives_setup before graph capture");
    if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st;
    s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  }
  if (iris_world_size(ctx) == 1) return IRIS_SUCCESS;
  if ((st = iris_detail_order_begin(ctx, stream)) != IRIS_SUCCESS) return st;
  st = iris_coll_barrier_enqueue(ctx, s, stream);
  st2 = iris_detail_order_end(ctx, stream); /* also after a failure: what was enqueued stays ordered before the next call */
  return st != IRIS_SUCCESS ? st : st2;
}

#endif /* IRIS_INTERNAL_COLL_API_H */
