/* internal/core/detail_api.h: the internal API that the other iris headers (iris_collectives.h,
 * iris_gemm.h, iris_gemm_reduce.h) and lib/iris.cu call. Declared in every unit that
 * includes iris.h, defined by the implementation (internal/core/context.h, faults.h,
 * stream_order.h, nodes.h). Not for users: names and signatures change without notice. */
#ifndef IRIS_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris.h"
#endif
#ifndef IRIS_INTERNAL_CORE_DETAIL_API_H
#define IRIS_INTERNAL_CORE_DETAIL_API_H

#ifdef __cplusplus
extern "C" {
#endif

/* The NCCL/RCCL functions iris calls, resolved at run time (dlsym), with nccl.h's ABI
 * (ncclResult_t, ncclDataType_t and ncclRedOp_t are ints; ncclComm_t a pointer).
 * iris_detail_nccl returns the table of a multi-node context, else NULL. */
typedef struct iris_nccl_api {
  const char *(*get_error_string)(int result);
  int (*all_reduce)(const void *send, void *recv, size_t count, int type, int op, void *comm, iris_stream_t stream);
  int (*all_gather)(const void *send, void *recv, size_t count, int type, void *comm, iris_stream_t stream);
  int (*reduce_scatter)(const void *send, void *recv, size_t count, int type, int op, void *comm, iris_stream_t stream);
  int (*broadcast)(const void *send, void *recv, size_t count, int type, int root, void *comm, iris_stream_t stream);
  int (*send)(const void *buf, size_t count, int type, int peer, void *comm, iris_stream_t stream);
  int (*recv)(void *buf, size_t count, int type, int peer, void *comm, iris_stream_t stream);
  int (*group_start)(void);
  int (*group_end)(void);
  int version; /* ncclGetVersion's code (e.g. 22803), 0 if unknown */
} iris_nccl_api_t;
IRIS_API const iris_nccl_api_t *iris_detail_nccl(const iris_t *ctx);
/* A multi-node context's NCCL communicator over every rank (an ncclComm_t, rank = global
 * rank; the rail itself with one rank per node), or NULL: none (single node, or left
 * out: internal/core/nodes.h). The same answer on every rank of the world. */
IRIS_API void *iris_detail_world_comm(const iris_t *ctx);
/* 1 if another rank of this process runs on the same GPU as ctx (ranks as threads: their
 * kernels share one context, its SMs and its work queues), else 0. */
IRIS_API int iris_detail_gpu_shared(const iris_t *ctx);
/* 1 if that holds on any rank of ctx's node (the same answer on each of them), else 0. */
IRIS_API int iris_detail_gpu_shared_any(const iris_t *ctx);
/* A per-context slot that iris_collectives.h keeps its state in. */
IRIS_API void iris_detail_set_ext(iris_t *ctx, void *ext, void (*free_fn)(void *));
IRIS_API void *iris_detail_get_ext(const iris_t *ctx);
/* The context's fatal fault (IRIS_SUCCESS if none), and the call order of the
 * communication calls across streams (internal/core/stream_order.h). */
IRIS_API iris_status_t iris_detail_check_fault(const iris_t *ctx);
IRIS_API iris_status_t iris_detail_order_begin(iris_t *ctx, iris_stream_t stream);
IRIS_API iris_status_t iris_detail_order_end(iris_t *ctx, iris_stream_t stream);

/* Teams (internal/core/team.h), for iris_collectives.h's *_team calls. lookup: checks that
 * team is live and this rank a member, refuses a context with a fatal fault, and says where
 * the team's collective state lives: world = 1 for the world team (the world's own calls
 * serve it); else, for a team of 2 or more, *state (the collective layer's cached state,
 * malloc'd, freed with the team), this rank's collective area on the heap (ctl_bytes of
 * control block first), and dev: the team as a world of its own (rank = team rank,
 * bases[r] = member r's heap, fault = the team's fault words), and the grid rule its
 * members agreed on at the split (sms: their fewest SMs; ctas: their IRIS_COLL_CTAS, 0
 * unset; a team whose members' values differ, or one of them malformed, is refused here
 * on every member alike). order: the team's call order across streams (end 0 before the
 * launches, 1 after). */
typedef struct iris_detail_team_view {
  int world;
  void **state;
  char *coll_base;
  size_t coll_bytes, ctl_bytes;
  int node_size;
  iris_device_ctx_t dev;
  int sms, ctas;
} iris_detail_team_view_t;
IRIS_API iris_status_t iris_detail_team_lookup(iris_t *ctx, const iris_team_t *team, iris_detail_team_view_t *out);
IRIS_API iris_status_t iris_detail_team_order(iris_t *ctx, const iris_team_t *team, iris_stream_t stream, int end);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* IRIS_INTERNAL_CORE_DETAIL_API_H */
