/* internal/coll/team_staged.h: iris_detail_team_staged (internal/core/detail_api.h), one
 * chunk of a team call that the torch layer stages through two heap areas of its own
 * (python/iris_gpu/torch/team.py: a team has no staging area of the library's). Under
 * IRIS_IMPLEMENTATION. Part of iris_collectives.h; not a public header.
 *
 * Each chunk is one team call on the areas, which lie at the same heap offsets on every
 * member, so by itself chunk 0 of two calls of different sizes would match. The chunk is
 * therefore enqueued as launch k of n of a user call of `total` elements (the `outer` part
 * of iris_coll_enqueue_args): its signature carries the user call and the split bit, so
 * members whose calls differ (count, placement, the staging's size) mismatch at launch 0,
 * fatally (their call numbers would be out of step), as the world's staged calls do. The
 * out area reaches the user's recv through the copy-out kernel, which copies only where
 * every member announced that launch with its signature: a mismatched call writes no user
 * buffer. */
#ifndef IRIS_INTERNAL_COLL_TEAM_STAGED_H
#define IRIS_INTERNAL_COLL_TEAM_STAGED_H
#include "../../iris_collectives.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "plan.h"
#include "protocol.h"
#include "launch.h"
#include "host.h"
#include "team.h"

/* The chunk's own arguments (the call's are iris_coll_enqueue_args's): the areas on the
 * heap, k of n, count within total, a recv of rows x width bytes. Refused here, the chunk
 * still takes part (iris_detail_team_staged). */
static iris_status_t iris_coll_team_staged_args(iris_t *ctx, int kind, const void *area_in, const void *area_out, size_t count, size_t es, int W, size_t total,
                                                size_t k, size_t n, const void *dst, size_t dpitch, size_t width, int rows) {
  const char *name = iris_coll_names[kind];
  const int chunked_in = kind == IRIS_COLL_RS || kind == IRIS_COLL_A2A, chunked_out = kind == IRIS_COLL_AG || kind == IRIS_COLL_A2A;
  const int me = iris_rank(ctx);
  if (!es) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s (staged): unknown data type", me, name);
  if (count == 0 || count > total || n == 0 || k >= n || count > ((size_t)1 << 40) / es)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s (staged): chunk %zu of %zu, %zu of %zu elements: not a chunk of the call", me, name, k, n, count, total);
  if (!area_in || !area_out || !iris_coll_in_heap(ctx, area_in, count * es * (chunked_in ? (size_t)W : 1)) ||
      !iris_coll_in_heap(ctx, area_out, count * es * (chunked_out ? (size_t)W : 1)))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s (staged): the staging areas must lie on the heap", me, name);
  if (!dst || width != count * es || rows != (chunked_out ? W : 1) || (rows > 1 && dpitch < width))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s (staged): recv of %d rows of %zu bytes (pitch %zu) for a chunk of %zu elements", me, name, rows, width,
                            dpitch, count);
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_detail_team_staged(iris_t *ctx, const iris_team_t *team, int kind, const void *area_in, void *area_out, size_t count, int type, int op, int root,
                                               size_t total, size_t k, size_t n, void *dst, size_t dpitch, size_t width, int rows, iris_stream_t stream,
                                               const struct iris_coll_opts *opts) {
  iris_detail_team_view_t v;
  iris_coll_state_t *s;
  iris_coll_part_t outer;
  iris_status_t st, st2;
  iris_gpu_error_t e;
  if ((unsigned)kind >= (unsigned)IRIS_COLL_KINDS) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_detail_team_staged: unknown kind %d", kind);
  if ((st = iris_detail_team_lookup(ctx, team, &v)) != IRIS_SUCCESS) return iris_detail_prefix(st, iris_coll_names[kind]);
  if (v.world || team->size == 1) /* the torch layer stages only what a team of 2 or more refused (the world and a team of one take any buffer) */
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s (staged): the world team and a team of one take their buffers as they are", iris_rank(ctx),
                            iris_coll_names[kind]);
  if ((st = iris_coll_team_state(ctx, &v, &s, stream)) != IRIS_SUCCESS) return st;
  if ((st = iris_detail_team_order(ctx, team, stream, 0)) != IRIS_SUCCESS) return st;
  outer.total = total;
  outer.k = k;
  outer.n = n;
  st = iris_coll_team_staged_args(ctx, kind, area_in, area_out, count, iris_dtype_size((iris_dtype_t)type), team->size, total, k, n, dst, dpitch, width, rows);
  if (st == IRIS_SUCCESS) {
    s->last_sig = 0;
    st = iris_coll_enqueue_args(ctx, s, kind, area_in, area_out, count, (iris_dtype_t)type, (iris_redop_t)op, root, stream, opts, &outer);
  }
  if (st != IRIS_SUCCESS) {
    /* refused for its arguments: one refused-call launch, as the team calls take part
     * (marked split where the members' call is: a mismatch with it is then fatal) */
    iris_coll_refused_take_part(ctx, s, st, n > 1 ? IRIS_COLL_SIG_REFUSED_SPLIT : IRIS_COLL_SIG_REFUSED, stream);
  } else {
    /* the out area into recv: the copy-out kernel, which moves nothing unless every member
     * announced the launch with its signature. The bandwidth kernels always compare the
     * headers; a latency path does only with IRIS_COLL_CHECK (its lines carry the
     * signature instead): without it a plain copy, as mismatches go undetected there */
    e = IRIS_GPU_SUCCESS;
    if (s->last_path == IRIS_COLL_PATH_BW || s->dev.check)
      iris_coll_launch_copy_out(s, dst, dpitch, area_out, width, width, rows, s->last_sig, stream);
    else
      e = iris_gpu_memcpy2d_async(dst, dpitch, area_out, width, width, (size_t)rows, stream);
    if (e == IRIS_GPU_SUCCESS) e = iris_gpu_last_error();
    if (e != IRIS_GPU_SUCCESS) st = iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s (staged): copy out failed: %s", iris_rank(ctx), iris_coll_names[kind], iris_gpu_error_text(e));
  }
  st2 = iris_detail_team_order(ctx, team, stream, 1);
  return st != IRIS_SUCCESS ? st : st2;
}

#endif /* IRIS_INTERNAL_COLL_TEAM_STAGED_H */
