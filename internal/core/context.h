/* internal/core/context.h: struct iris, the host context: its fields, the liveness check every
 * entry point makes, the exchanges among a node's ranks and among the world's (whichever
 * bring-up mode carries them), and the slot the other iris headers keep their state in.
 * Part of iris's implementation, included by iris.h under IRIS_IMPLEMENTATION (inside its
 * extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_CONTEXT_H
#define IRIS_INTERNAL_CORE_CONTEXT_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"
#include "status.h"
#include "../rendezvous/rendezvous.h"
#include "../rendezvous/group.h"

enum { IRIS_DETAIL_MODE_RENDEZVOUS = 1, IRIS_DETAIL_MODE_HOOKS, IRIS_DETAIL_MODE_LOCAL };

typedef struct iris_detail_block {
  size_t off, size;
  size_t req; /* bytes asked for (live blocks) */
  int used;
} iris_detail_block_t;

#define IRIS_DETAIL_CTX_LIVE 0x4c495249u /* "IRIL" */
#define IRIS_DETAIL_CTX_DEAD 0x44495249u /* "IRID": finalized, a tombstone */
struct iris {
  uint32_t magic;
  struct iris *next_dead; /* finalized: the next tombstone (internal/core/init.h) */
  int closing;            /* iris_finalize has begun freeing: iris_abort and iris_get_async_error keep off (iris_detail_fault_lock) */
  int local_rank, local_size; /* this rank on its node, the ranks per node (the world's: grank, gworld) */
  int device, mode;
  int gpu_shared; /* another rank of this process runs on the same GPU (iris_init_local with
                     a device listed twice, or threads of one process through iris_init):
                     their kernels share one context and its work queues (docs/shared_gpu.md) */
  int gpu_shared_any; /* gpu_shared holds on some rank of this node: the same on every rank */
  size_t heap_size;
  iris_heap_memory_t heap_memory;
  char *bases[IRIS_MAX_RANKS];
  unsigned char ipc_opened[IRIS_MAX_RANKS];
  int timeout_ms, barrier_timeout_ms;
  /* communication */
  iris_rendezvous_t *rdv;
  iris_bootstrap_t hooks;
  iris_detail_group_t *group;
  /* per-context state of iris_collectives.h (NULL until used); freed by ext_free */
  void *ext;
  void (*ext_free)(void *);
  /* allocator: blocks sorted by offset, covering the heap */
  iris_detail_block_t *blocks;
  int nblocks, capblocks;
  size_t used;
  /* faults: IRIS_FAULT_WORDS words of pinned host memory mapped into the GPU
   * (iris_device_ctx_t.fault; internal/core/layout.h) */
  unsigned long long *fault_host, *fault_dev;
  int64_t pids[IRIS_MAX_RANKS]; /* the ranks' process ids (0: unknown or another pid namespace) */
  unsigned long long wait_bound_ns; /* the BOUND word as set up (IRIS_WAIT_TIMEOUT_MS in ns; 0: the units' bound) */
  struct iris_detail_watch *watch;  /* the peer watch (internal/core/watch.h); NULL: none */
  int gone; /* 1 + the rank of this node whose process the peer watch saw end; 0: none (atomic) */
  /* call order across streams (iris_detail_order_*): the last eager call's event and
   * stream, and the last captured call's event, stream and capture id */
  iris_gpu_event_t order_eager, order_cap;
  int order_have_eager, order_events;
  iris_stream_t order_eager_stream, order_cap_stream;
  unsigned long long order_cap_id;
  /* nodes (docs/multinode.md): local_rank and local_size above are this node's (the
   * heap, the records, every in-node call); these are the world's, set by iris_init
   * (a context of iris_init_local has grank = gworld = nodes = 0). nodes <= 1: one node */
  int grank, gworld, node, nodes;
  void *rail;          /* multi-node: the rail communicator (ncclComm_t) */
  int rail_owned;      /* 1: iris created it (and destroys it) */
  void *world_comm;    /* multi-node: an NCCL communicator over every rank (rank = global rank),
                          for calls handed to NCCL whole; the rail when local_size is 1; NULL:
                          none (internal/core/nodes.h says when) */
  int world_owned;     /* 1: iris created world_comm apart from the rail (and destroys it) */
  const iris_nccl_api_t *nccl;
  /* teams (internal/core/team.h; NULL until the first team call): the table, and what the
   * fault and teardown paths ask of it (op: IRIS_DETAIL_TEAMS_POLL, _ABORT, _FREE, _GONE) */
  struct iris_detail_teams *teams;
  void (*teams_op)(struct iris *ctx, int op);
};
enum { IRIS_DETAIL_TEAMS_POLL = 0, IRIS_DETAIL_TEAMS_ABORT, IRIS_DETAIL_TEAMS_FREE, IRIS_DETAIL_TEAMS_GONE };

/* IRIS_SUCCESS for a live context; else IRIS_ERROR_INVALID_ARGUMENT naming the call. */
IRIS_INTERNAL iris_status_t iris_detail_live(const iris_t *ctx, const char *call) {
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL context", call);
  if (ctx->magic == IRIS_DETAIL_CTX_DEAD) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: the context was finalized (rank %d)", call, ctx->local_rank);
  if (ctx->magic != IRIS_DETAIL_CTX_LIVE) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: not an iris context", call);
  return IRIS_SUCCESS;
}
#define IRIS_DETAIL_IS_LIVE(ctx) ((ctx) && (ctx)->magic == IRIS_DETAIL_CTX_LIVE)

/* The exchange over every rank of the world (global ranks). */
IRIS_INTERNAL iris_status_t iris_detail_comm_allgather_world(iris_t *ctx, const void *send, void *recv, size_t bytes, int timeout_ms) {
  switch (ctx->mode) {
  case IRIS_DETAIL_MODE_RENDEZVOUS: return iris_detail_rdv_allgather(ctx->rdv, send, recv, bytes, timeout_ms);
  case IRIS_DETAIL_MODE_HOOKS:
    if (ctx->hooks.allgather(ctx->hooks.user, send, recv, bytes) != 0)
      return iris_detail_fail(IRIS_ERROR_BOOTSTRAP, "rank %d: the bootstrap allgather callback returned an error", ctx->grank);
    return IRIS_SUCCESS;
  default: return iris_detail_group_allgather(ctx->group, ctx->local_rank, send, recv, bytes, timeout_ms);
  }
}
/* The exchange among this node's ranks (ctx->local_rank, ctx->local_size): in a
 * multi-node world, the world's exchange (every rank takes part) of which this node's
 * slice is kept. */
IRIS_INTERNAL iris_status_t iris_detail_comm_allgather(iris_t *ctx, const void *send, void *recv, size_t bytes, int timeout_ms) {
  char *all;
  iris_status_t st;
  if (ctx->nodes <= 1 || !bytes) return iris_detail_comm_allgather_world(ctx, send, recv, bytes, timeout_ms);
  if (!(all = (char *)malloc((size_t)ctx->gworld * bytes))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", ctx->grank);
  st = iris_detail_comm_allgather_world(ctx, send, all, bytes, timeout_ms);
  if (st == IRIS_SUCCESS) memcpy(recv, all + (size_t)ctx->node * (size_t)ctx->local_size * bytes, (size_t)ctx->local_size * bytes);
  free(all);
  return st;
}
IRIS_INTERNAL iris_status_t iris_detail_comm_barrier(iris_t *ctx, int timeout_ms) {
  if (ctx->mode == IRIS_DETAIL_MODE_HOOKS) {
    if (ctx->hooks.barrier(ctx->hooks.user) != 0)
      return iris_detail_fail(IRIS_ERROR_BOOTSTRAP, "rank %d: the bootstrap barrier callback returned an error", ctx->grank);
    return IRIS_SUCCESS;
  }
  return iris_detail_comm_allgather(ctx, NULL, NULL, 0, timeout_ms);
}

/* Per-context slot for the other iris headers (not for users). */
IRIS_DEF void iris_detail_set_ext(iris_t *ctx, void *ext, void (*free_fn)(void *)) {
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return;
  ctx->ext = ext;
  ctx->ext_free = free_fn;
}
IRIS_DEF void *iris_detail_get_ext(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->ext : NULL; }

#endif /* IRIS_INTERNAL_CORE_CONTEXT_H */
