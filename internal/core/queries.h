/* internal/core/queries.h: the queries on a context (ranks, nodes, heap, device contexts),
 * iris_translate_host and iris_device_context_from_peers. Part of iris's implementation,
 * included by iris.h under IRIS_IMPLEMENTATION (inside its extern "C" block); not a public
 * header. */
#ifndef IRIS_INTERNAL_CORE_QUERIES_H
#define IRIS_INTERNAL_CORE_QUERIES_H
#include "../../iris.h"
#include "sys.h"
#include "status.h"
#include "context.h"

IRIS_DEF int iris_rank(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? (ctx->nodes > 1 ? ctx->grank : ctx->local_rank) : -1; }
IRIS_DEF int iris_world_size(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? (ctx->nodes > 1 ? ctx->gworld : ctx->local_size) : 0; }
IRIS_DEF int iris_local_rank(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->local_rank : -1; }
IRIS_DEF int iris_local_size(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->local_size : 0; }
IRIS_DEF int iris_node(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? (ctx->nodes > 1 ? ctx->node : 0) : -1; }
IRIS_DEF int iris_num_nodes(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? (ctx->nodes > 1 ? ctx->nodes : 1) : 0; }
IRIS_DEF void *iris_rail_comm(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) && ctx->nodes > 1 ? ctx->rail : NULL; }
/* A global rank's index on this node (-1: another node's rank or out of range). */
IRIS_INTERNAL int iris_detail_local_index(const iris_t *ctx, int rank) {
  int first = ctx->nodes > 1 ? ctx->node * ctx->local_size : 0;
  return rank >= first && rank < first + ctx->local_size ? rank - first : -1;
}
IRIS_DEF int iris_device_ordinal(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->device : -1; }
IRIS_DEF int iris_detail_gpu_shared(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->gpu_shared : 0; }
IRIS_DEF int iris_detail_gpu_shared_any(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->gpu_shared_any : 0; }
IRIS_DEF int iris_device(const iris_t *ctx) { return iris_device_ordinal(ctx); }
IRIS_DEF size_t iris_heap_size(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->heap_size : 0; }
IRIS_DEF size_t iris_heap_used(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->used : 0; }
IRIS_DEF void *iris_heap_base(const iris_t *ctx, int rank) {
  int l = IRIS_DETAIL_IS_LIVE(ctx) ? iris_detail_local_index(ctx, rank) : -1;
  return l >= 0 ? ctx->bases[l] : NULL;
}
IRIS_DEF iris_device_ctx_t iris_device_context(const iris_t *ctx) {
  iris_device_ctx_t d;
  int r;
  memset(&d, 0, sizeof d);
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return d;
  d.rank = iris_rank(ctx);
  d.world_size = iris_world_size(ctx);
  d.heap_size = ctx->heap_size;
  for (r = 0; r < ctx->local_size; r++) d.bases[r] = ctx->bases[r];
  d.fault = ctx->fault_dev;
  d.local_rank = ctx->local_rank;
  d.local_size = ctx->local_size;
  d.node = iris_node(ctx);
  d.num_nodes = iris_num_nodes(ctx);
  return d;
}
IRIS_DEF iris_device_ctx_t iris_device_context_node(const iris_t *ctx) {
  iris_device_ctx_t d = iris_device_context(ctx);
  d.rank = d.local_rank;
  d.world_size = d.local_size;
  d.node = 0;
  d.num_nodes = d.world_size > 0 ? 1 : 0;
  return d;
}
IRIS_DEF iris_status_t iris_device_context_from_peers(int rank, int world_size, size_t bytes, void *const *peers, iris_device_ctx_t *out) {
  int r;
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: NULL out");
  memset(out, 0, sizeof *out);
  if (world_size < 1 || world_size > IRIS_MAX_RANKS)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: world size %d outside [1, %d] (IRIS_MAX_RANKS)", world_size,
                            IRIS_MAX_RANKS);
  if (rank < 0 || rank >= world_size)
    return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "iris_device_context_from_peers: rank %d outside [0, %d)", rank, world_size);
  if (bytes == 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: rank %d: bytes is 0", rank);
  if (!peers) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: rank %d: NULL peers", rank);
  for (r = 0; r < world_size; r++)
    if (!peers[r])
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: rank %d: peers[%d] is NULL%s", rank, r,
                              r == rank ? " (this rank's own buffer)" : "");
  out->rank = out->local_rank = rank;
  out->world_size = out->local_size = world_size;
  out->heap_size = bytes;
  for (r = 0; r < world_size; r++) out->bases[r] = (char *)peers[r];
  out->node = 0;
  out->num_nodes = 1;
  return IRIS_SUCCESS;
}
IRIS_DEF iris_status_t iris_translate_host(const iris_t *ctx, const void *ptr, int to_rank, void **out) {
  size_t off;
  iris_status_t st;
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_translate_host: NULL argument");
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_translate_host");
  if (to_rank < 0 || to_rank >= iris_world_size(ctx))
    return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rank %d: iris_translate_host to rank %d outside [0, %d)", iris_rank(ctx), to_rank, iris_world_size(ctx));
  if (iris_detail_local_index(ctx, to_rank) < 0)
    return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rank %d: iris_translate_host to rank %d, on node %d: heaps are mapped within a node (this is node %d)",
                            iris_rank(ctx), to_rank, to_rank / ctx->local_size, iris_node(ctx));
  if ((st = iris_heap_offset(ctx, ptr, &off)) != IRIS_SUCCESS) return st;
  *out = ctx->bases[iris_detail_local_index(ctx, to_rank)] + off;
  return IRIS_SUCCESS;
}

#endif /* IRIS_INTERNAL_CORE_QUERIES_H */
