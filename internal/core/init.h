/* internal/core/init.h: bring-up and teardown: iris_init (modes 1 and 2), iris_init_local (mode
 * 3), iris_barrier, iris_allgather_host and iris_finalize. Part of iris's implementation,
 * included by iris.h under IRIS_IMPLEMENTATION (inside its extern "C" block); not a public
 * header. */
#ifndef IRIS_INTERNAL_CORE_INIT_H
#define IRIS_INTERNAL_CORE_INIT_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"
#include "status.h"
#include "util.h"
#include "../rendezvous/wire.h"
#include "../rendezvous/group.h"
#include "context.h"
#include "faults.h"
#include "watch.h"
#include "heap.h"
#include "exchange.h"
#include "nodes.h"
#include "setup.h"
#include "launch_env.h"

IRIS_DEF iris_status_t iris_init(const iris_config_t *cfg, iris_t **out) {
  iris_config_t c;
  iris_t *ctx;
  iris_detail_record_t *recs = NULL, *me;
  iris_status_t st, local;
  iris_launch_env_t env;
  int ndev = 0, old = -1, local_rank = 0, tcp = 0, port = 0;
  char name[72], addr[96];
  const char *source = "iris_config_t"; /* where rank and world came from */
  const char *given, *host_id = NULL;
  iris_gpu_error_t e;
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init: out is NULL");
  *out = NULL;
  if ((st = iris_detail_resolve_config(cfg, &c)) != IRIS_SUCCESS) return st;
  if (iris_detail_env("IRIS_HOST_ID", &host_id) < 0) return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_init"); /* set but empty: never read as unset */
  /* rank, world and local rank: cfg's, else the launcher's environment. When cfg gives
   * both, the environment only lends its job id (and its errors do not count). */
  st = iris_launch_env(NULL, NULL, &env);
  if (st != IRIS_SUCCESS) {
    if (c.rank < 0 || c.world_size <= 0) return iris_detail_prefix(st, "iris_init");
    memset(&env, 0, sizeof env);
  }
  if (c.rank < 0 && c.world_size <= 0) {
    c.rank = env.world_size > 0 ? env.rank : 0;
    c.world_size = env.world_size > 0 ? env.world_size : 1;
    local_rank = env.local_rank;
    source = env.launcher_name;
  } else if (c.rank < 0 || c.world_size <= 0) {
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init: cfg gives %s but not %s; set both iris_config_t.rank and .world_size, or neither",
                            c.rank < 0 ? "world_size" : "rank", c.rank < 0 ? "rank" : "world_size");
  } else { /* cfg's rank; the launcher's local rank when it describes the same rank */
    local_rank = env.launcher != IRIS_LAUNCHER_NONE && env.rank == c.rank && env.world_size == c.world_size ? env.local_rank : c.rank;
  }
  given = c.rendezvous;
  if (!given && iris_detail_env("IRIS_RENDEZVOUS", &given) < 0) return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_init"); /* set but empty: an error */
  /* the launcher's node layout picks TCP only for the world it describes (a cfg world of
   * other ranks or size takes only its job id) */
  if (!c.bootstrap &&
      (st = iris_detail_tcp_choice(NULL, NULL, given, env.launcher != IRIS_LAUNCHER_NONE && env.rank == c.rank && env.world_size == c.world_size ? &env : NULL, &tcp, addr,
                                   sizeof addr, &port)) != IRIS_SUCCESS)
    return iris_detail_prefix(st, "iris_init");
  /* worlds that may span nodes (TCP, a bootstrap, IRIS_HOST_ID) check the node size
   * once the ranks are grouped; a world on one host's Unix socket is one node */
  if (c.world_size > IRIS_MAX_RANKS && !tcp && !c.bootstrap && !host_id)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_init: world size %d exceeds IRIS_MAX_RANKS (%d); rebuild every unit with a larger -DIRIS_MAX_RANKS",
                            c.world_size, IRIS_MAX_RANKS);
  if (c.world_size > 65536) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_init: world size %d exceeds 65536", c.world_size);
  if (c.rank < 0 || c.rank >= c.world_size)
    return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "iris_init: rank %d outside [0, %d) (set IRIS_RANK)", c.rank, c.world_size);
  if (c.bootstrap && (!c.bootstrap->allgather || !c.bootstrap->barrier))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init: the bootstrap needs both an allgather and a barrier callback");
  if ((st = iris_detail_default_rendezvous(given, env.job, name, sizeof name)) != IRIS_SUCCESS) return iris_detail_prefix(st, "iris_init");
  if (tcp && !name[0]) iris_detail_copy(name, sizeof name, "tcp");
  if (!c.bootstrap && !name[0] && c.world_size > 1)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT,
                            "iris_init: rank %d of %d (from %s) has no rendezvous name: the launcher gives no job id; set IRIS_RENDEZVOUS (or "
                            "iris_config_t.rendezvous) to a name shared by this job's ranks and unique on this host",
                            c.rank, c.world_size, source);
  if (!name[0]) iris_detail_copy(name, sizeof name, "single");

  ctx = (iris_t *)calloc(1, sizeof *ctx);
  recs = (iris_detail_record_t *)calloc((size_t)c.world_size + 1, sizeof *recs);
  if (!ctx || !recs) { free(ctx); free(recs); return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "iris_init: out of host memory"); }
  ctx->magic = IRIS_DETAIL_CTX_LIVE;
  ctx->local_rank = c.rank; /* the world as one node, until 1b groups the ranks */
  ctx->local_size = c.world_size;
  ctx->heap_size = c.heap_size;
  ctx->heap_memory = c.heap_memory;
  ctx->timeout_ms = c.timeout_ms;
  ctx->barrier_timeout_ms = c.barrier_timeout_ms;
  ctx->device = -1;
  ctx->grank = c.rank;
  ctx->gworld = c.world_size;
  ctx->nodes = 1;

  /* 1. meet the other ranks (this also refuses mismatched world or heap sizes) */
  if (c.bootstrap) {
    ctx->mode = IRIS_DETAIL_MODE_HOOKS;
    ctx->hooks = *c.bootstrap;
  } else {
    iris_rendezvous_params_t p;
    ctx->mode = IRIS_DETAIL_MODE_RENDEZVOUS;
    memset(&p, 0, sizeof p);
    p.job = env.job;
    p.name = name;
    p.dir = c.rendezvous_dir;
    p.rank = c.rank;
    p.world_size = c.world_size;
    p.timeout_ms = c.timeout_ms;
    p.heap_size = c.heap_size;
    if ((st = tcp ? iris_rendezvous_open_tcp(&p, addr, port, &ctx->rdv) : iris_rendezvous_open(&p, &ctx->rdv)) != IRIS_SUCCESS) goto fail;
  }

  /* 1b. group the ranks by host identity (docs/multinode.md); from here on
   *     ctx->local_rank and ctx->local_size are this node's. Worlds that may span hosts
   *     (TCP, a bootstrap) are always grouped; on one host's Unix socket only where
   *     IRIS_HOST_ID is set, and every rank takes part so that they agree on it. */
  if (c.world_size > 1) {
    const int spans = tcp || c.bootstrap != NULL;
    iris_detail_node_msg_t mine, *all = (iris_detail_node_msg_t *)malloc((size_t)c.world_size * sizeof mine);
    int group = 0;
    memset(&mine, 0, sizeof mine);
    mine.host_id_set = host_id != NULL;
    local = spans || host_id ? iris_detail_host_id(NULL, NULL, mine.id, sizeof mine.id) : IRIS_SUCCESS;
    if (local != IRIS_SUCCESS) { /* every rank must still take part: say so, fail after */
      mine.failed = 1;
      mine.id[0] = 0;
    }
    if (!all) st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "iris_init: out of host memory");
    else if ((st = iris_detail_comm_allgather_world(ctx, &mine, all, sizeof mine, c.timeout_ms)) == IRIS_SUCCESS &&
             (st = iris_detail_host_id_agree(all, c.world_size, spans, &group)) != IRIS_SUCCESS)
      st = iris_detail_prefix(st, "iris_init");
    if (st == IRIS_SUCCESS && group) {
      int r;
      for (r = 0; r < c.world_size; r++) {
        all[r].id[sizeof all[r].id - 1] = 0;
        if ((all[r].failed || !all[r].id[0]) && st == IRIS_SUCCESS)
          st = local != IRIS_SUCCESS && r == c.rank ? iris_detail_prefix(local, "iris_init")
                                                    : iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init: rank %d has no valid host identity (see its IRIS_HOST_ID)", r);
      }
      if (st == IRIS_SUCCESS && (st = iris_detail_group_nodes(all[0].id, sizeof *all, c.world_size, c.rank, &ctx->node, &ctx->nodes, &ctx->local_rank,
                                                              &ctx->local_size)) != IRIS_SUCCESS)
        st = iris_detail_prefix(st, "iris_init");
    }
    free(all);
    if (st != IRIS_SUCCESS) goto fail;
  } /* the GPU stays the launcher's local rank % GPUs (virtual nodes of one machine spread over its GPUs) */

  /* 2. set up our GPU; a failure here is reported to every rank through the record */
  iris_gpu_get_device(&old);
  me = &recs[c.world_size];
  me->magic = IRIS_DETAIL_MAGIC;
  me->version = IRIS_VERSION;
  me->rank = ctx->local_rank;
  me->world = ctx->local_size;
  me->heap_size = c.heap_size;
  me->heap_memory = (int32_t)c.heap_memory;
  me->pid = (int64_t)getpid();
  me->uid = (uint32_t)getuid();
  iris_detail_process_token(me->proc_token);
  iris_detail_host_identity(me);
  e = iris_gpu_device_count(&ndev);
  if (e != IRIS_GPU_SUCCESS || ndev <= 0) {
    local = e != IRIS_GPU_SUCCESS ? iris_detail_gpu_fail(c.rank, "counting GPUs (" IRIS_GPU_NAME " GetDeviceCount)", e)
                                  : iris_detail_fail(IRIS_ERROR_GPU, "rank %d: no GPU is visible to this process", c.rank);
  } else {
    int got = c.device < 0 ? iris_detail_env_int("IRIS_DEVICE", &c.device) : 1;
    if (got == 0) c.device = local_rank % ndev; /* ranks beyond the GPU count share GPUs */
    ctx->device = c.device;
    me->device = c.device;
    if (got < 0)
      local = iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_init");
    else if (c.device < 0 || c.device >= ndev)
      local = iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: device %d does not exist (%d visible)", c.rank, c.device, ndev);
    else
      local = iris_detail_setup_gpu(ctx, me);
  }
  if (local != IRIS_SUCCESS) {
    me->status = (int32_t)local;
    iris_detail_copy(me->err, sizeof me->err, iris_detail_errbuf);
  }

  /* 3. exchange records, check them, map the peers, and meet once more so nobody
   *    returns before every rank can reach every heap */
  if ((st = iris_detail_comm_allgather(ctx, me, recs, sizeof *me, c.timeout_ms)) != IRIS_SUCCESS) goto fail;
  if (local != IRIS_SUCCESS) { st = iris_detail_fail(local, "%s", me->err); goto fail; }
  if ((st = iris_detail_check_node_records(recs, ctx->local_size, ctx->node * ctx->local_size)) != IRIS_SUCCESS) goto fail;
  {
    int r;
    for (r = 0; r < ctx->local_size; r++) {
      ctx->pids[r] = recs[r].pidns && recs[r].pidns == me->pidns ? recs[r].pid : 0;
      if (r != ctx->local_rank && recs[r].device == me->device && iris_detail_same_process(&recs[r])) ctx->gpu_shared = 1;
    }
    for (r = 0; r < ctx->local_size; r++) { /* the same test between every two records */
      int q;
      for (q = r + 1; q < ctx->local_size; q++)
        if (recs[q].device == recs[r].device && recs[q].pid == recs[r].pid && memcmp(recs[q].proc_token, recs[r].proc_token, sizeof recs[r].proc_token) == 0)
          ctx->gpu_shared_any = 1;
    }
  }
  {
    /* a mapping failure on one rank must fail all ranks: exchange the outcome */
    int32_t ok = (int32_t)iris_detail_map_peers(ctx, recs), *all = (int32_t *)recs; /* recs is no longer needed */
    char why[256];
    int r;
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    if ((st = iris_detail_comm_allgather(ctx, &ok, all, sizeof ok, c.timeout_ms)) != IRIS_SUCCESS) goto fail;
    if (ok != IRIS_SUCCESS) { st = iris_detail_fail((iris_status_t)ok, "%s", why); goto fail; }
    for (r = 0; r < ctx->local_size; r++)
      if (all[r] != IRIS_SUCCESS) { st = iris_detail_fail(iris_detail_peer_status(all[r]), "rank %d could not map its peers' heaps (see that rank's error)", ctx->node * ctx->local_size + r); goto fail; }
  }
  if ((st = iris_detail_heap_reset(ctx)) != IRIS_SUCCESS) goto fail;
  free(recs);
  recs = NULL;
  iris_gpu_set_device(ctx->device); /* this rank's GPU stays current for the caller */
  if (ctx->nodes > 1 && (st = iris_detail_rails_setup(ctx, c.rail_comm)) != IRIS_SUCCESS) goto fail;
  iris_detail_watch_start(ctx);
  *out = ctx;
  return IRIS_SUCCESS;
fail:
  free(recs);
  iris_detail_destroy(ctx);
  if (old >= 0) iris_gpu_set_device(old);
  return st;
}

IRIS_DEF iris_status_t iris_init_local(const iris_config_t *cfg, int num_gpus, const int *devices, iris_t **out_ctxs) {
  iris_config_t c;
  iris_detail_group_t *g;
  iris_detail_record_t rec;
  iris_status_t st;
  int i, j, ndev = 0, old = -1;
  iris_gpu_error_t e;
  if (!out_ctxs) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init_local: out_ctxs is NULL");
  if (num_gpus < 1 || num_gpus > IRIS_MAX_RANKS)
    return iris_detail_fail(num_gpus < 1 ? IRIS_ERROR_INVALID_ARGUMENT : IRIS_ERROR_UNSUPPORTED, "iris_init_local: %d GPUs requested; 1 to IRIS_MAX_RANKS (%d) supported",
                            num_gpus, IRIS_MAX_RANKS);
  for (i = 0; i < num_gpus; i++) out_ctxs[i] = NULL;
  if ((st = iris_detail_resolve_config(cfg, &c)) != IRIS_SUCCESS) return st;
  if ((e = iris_gpu_device_count(&ndev)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(0, "counting GPUs (" IRIS_GPU_NAME " GetDeviceCount)", e);
  for (i = 0; i < num_gpus; i++) {
    int d = devices ? devices[i] : i;
    if (d < 0 || d >= ndev) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init_local: device %d for rank %d does not exist (%d visible)", d, i, ndev);
  }
  if (!(g = iris_detail_group_create(num_gpus))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  for (i = 0; i < num_gpus; i++) g->devices[i] = devices ? devices[i] : i;
  iris_gpu_get_device(&old);
  st = IRIS_SUCCESS;
  for (i = 0; i < num_gpus; i++) {
    iris_t *ctx = (iris_t *)calloc(1, sizeof *ctx);
    if (!ctx) { st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory"); break; }
    ctx->local_rank = i;
    ctx->local_size = num_gpus;
    ctx->device = devices ? devices[i] : i;
    ctx->mode = IRIS_DETAIL_MODE_LOCAL;
    ctx->magic = IRIS_DETAIL_CTX_LIVE;
    ctx->heap_size = c.heap_size;
    ctx->heap_memory = c.heap_memory;
    ctx->timeout_ms = c.timeout_ms;
    ctx->barrier_timeout_ms = c.barrier_timeout_ms;
    ctx->group = g;
    out_ctxs[i] = ctx;
    memset(&rec, 0, sizeof rec);
    if ((st = iris_detail_setup_gpu(ctx, &rec)) != IRIS_SUCCESS) break;
    if ((st = iris_detail_heap_reset(ctx)) != IRIS_SUCCESS) break;
  }
  for (i = 0; st == IRIS_SUCCESS && i < num_gpus; i++) {
    iris_t *a = out_ctxs[i];
    for (j = 0; j < num_gpus; j++) {
      iris_t *b = out_ctxs[j];
      a->bases[j] = b->bases[j];
      if (j != i && a->device == b->device) {
        int k;
        a->gpu_shared = 1;
        for (k = 0; k < num_gpus; k++) out_ctxs[k]->gpu_shared_any = 1;
      }
      if (j == i || a->device == b->device) continue;
      {
        int ok = 0;
        if ((e = iris_gpu_can_access_peer(&ok, a->device, b->device)) != IRIS_GPU_SUCCESS) { st = iris_detail_gpu_fail(i, "DeviceCanAccessPeer", e); break; }
        if (!ok) {
          st = iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_init_local: GPU %d cannot access GPU %d directly; iris needs peer-to-peer access", a->device, b->device);
          break;
        }
        if ((e = iris_gpu_set_device(a->device)) != IRIS_GPU_SUCCESS || (e = iris_gpu_enable_peer(b->device)) != IRIS_GPU_SUCCESS) {
          st = iris_detail_gpu_fail(i, "DeviceEnablePeerAccess", e);
          break;
        }
      }
    }
  }
  if (st != IRIS_SUCCESS) {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    for (i = 0; i < num_gpus; i++) {
      if (out_ctxs[i]) {
        for (j = 0; j < num_gpus; j++)
          if (j != i) out_ctxs[i]->bases[j] = NULL; /* only free our own */
        iris_detail_destroy(out_ctxs[i]);
      } else {
        iris_detail_group_release(g);
      }
      out_ctxs[i] = NULL;
    }
    iris_detail_fail(st, "%s", why);
  }
  if (old >= 0) iris_gpu_set_device(old);
  return st;
}

IRIS_DEF iris_status_t iris_barrier(iris_t *ctx) {
  iris_status_t st;
  iris_gpu_error_t e;
  int old = -1;
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_barrier");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  iris_gpu_get_device(&old);
  e = iris_gpu_set_device(ctx->device);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
  if (old >= 0) iris_gpu_set_device(old);
  if (e != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "iris_barrier: device synchronize", e);
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st; /* a kernel of ours gave up waiting */
  st = iris_detail_comm_barrier(ctx, ctx->barrier_timeout_ms);
#if defined(IRIS_DEBUG)
  if (st == IRIS_SUCCESS) st = iris_heap_verify(ctx);
#endif
  if (st == IRIS_SUCCESS && ctx->fault_host && iris_detail_fault_read(ctx, IRIS_FAULT_WORD_MISMATCH)) st = iris_get_async_error(ctx); /* a pending mismatch */
  return st;
}

IRIS_DEF iris_status_t iris_allgather_host(iris_t *ctx, const void *send, void *recv, size_t bytes) {
  iris_status_t st;
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_allgather_host");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st; /* a fatal fault: at once, as every call */
  if (bytes && (!send || !recv)) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_allgather_host: NULL argument");
  if (ctx->mode == IRIS_DETAIL_MODE_RENDEZVOUS || ctx->mode == IRIS_DETAIL_MODE_LOCAL || bytes)
    return iris_detail_comm_allgather_world(ctx, send, recv, bytes, ctx->barrier_timeout_ms);
  return IRIS_SUCCESS;
}

/* A finalized context stays allocated (a call through the stale pointer then says
 * "finalized", and its address is never handed to a new context) and reachable from this
 * list, so a leak checker sees memory in use, not a leak (valgrind: "still reachable",
 * not "definitely lost"). */
static iris_t *iris_detail_tombstones;
static pthread_mutex_t iris_detail_tombstones_lock = PTHREAD_MUTEX_INITIALIZER;
IRIS_INTERNAL void iris_detail_keep_tombstone(iris_t *ctx) {
  pthread_mutex_lock(&iris_detail_tombstones_lock);
  ctx->next_dead = iris_detail_tombstones;
  iris_detail_tombstones = ctx;
  pthread_mutex_unlock(&iris_detail_tombstones_lock);
}

IRIS_DEF iris_status_t iris_finalize(iris_t *ctx) {
  iris_status_t st = IRIS_SUCCESS;
  int old = -1;
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_finalize");
  if (ctx->mode == 0) {
    /* a host-only test context: no GPU, no peers */
  } else if (ctx->mode == IRIS_DETAIL_MODE_LOCAL) {
    /* one thread may finalize all contexts in turn, so no cross-thread barrier here;
     * instead wait for every GPU of the group, so no peer kernel still uses this heap */
    int r;
    iris_gpu_get_device(&old);
    for (r = 0; r < ctx->group->world; r++)
      if (iris_gpu_set_device(ctx->group->devices[r]) == IRIS_GPU_SUCCESS) iris_gpu_synchronize();
    if (old >= 0) iris_gpu_set_device(old);
  } else if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) {
    /* a peer died or hangs (or iris_abort): do not meet the others; our kernels have
     * given up their waits, so the device synchronises, and then everything is freed */
    int old2 = -1;
    iris_gpu_get_device(&old2);
    if (iris_gpu_set_device(ctx->device) == IRIS_GPU_SUCCESS) iris_gpu_synchronize();
    if (old2 >= 0) iris_gpu_set_device(old2);
    st = IRIS_SUCCESS; /* the fault was reported by the calls before; this teardown worked */
  } else {
    st = iris_barrier(ctx);
  }
  if (ctx->mode == IRIS_DETAIL_MODE_LOCAL) {
    int r;
    for (r = 0; r < ctx->local_size; r++)
      if (r != ctx->local_rank) ctx->bases[r] = NULL;
  }
  {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    pthread_mutex_lock(&iris_detail_fault_lock); /* iris_abort / iris_get_async_error of other threads keep off from here */
    ctx->closing = 1;
    pthread_mutex_unlock(&iris_detail_fault_lock);
    iris_detail_release(ctx);
    ctx->magic = IRIS_DETAIL_CTX_DEAD; /* the tombstone: later calls see "finalized" */
    iris_detail_keep_tombstone(ctx);
    if (st != IRIS_SUCCESS) iris_detail_fail(st, "%s", why);
  }
  return st;
}

#endif /* IRIS_INTERNAL_CORE_INIT_H */
