/* internal/core/setup.h: one rank's GPU resources: the resolved configuration, the heap and the
 * fault words allocated on its GPU, the peers' heaps mapped (peer access or IPC), and the
 * release of all of it. Part of iris's implementation, included by iris.h under
 * IRIS_IMPLEMENTATION (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_SETUP_H
#define IRIS_INTERNAL_CORE_SETUP_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"
#include "status.h"
#include "util.h"
#include "../rendezvous/group.h"
#include "context.h"
#include "exchange.h"
#include "nodes.h"
#include "watch.h"

IRIS_INTERNAL void iris_detail_release_gpu(iris_t *ctx) {
  /* until iris_init groups a world into nodes, local_rank and local_size are the world's,
   * which may exceed the per-node arrays (a world above IRIS_MAX_RANKS failing before
   * then): nothing was mapped or allocated yet, and nothing past the arrays is touched */
  const int n = ctx->local_size < IRIS_MAX_RANKS ? ctx->local_size : IRIS_MAX_RANKS;
  int r, old = -1;
  iris_gpu_get_device(&old);
  iris_gpu_set_device(ctx->device);
  for (r = 0; r < n; r++)
    if (ctx->ipc_opened[r]) { iris_gpu_ipc_close(ctx->bases[r]); ctx->ipc_opened[r] = 0; }
  if (ctx->local_rank >= 0 && ctx->local_rank < IRIS_MAX_RANKS) {
    if (ctx->bases[ctx->local_rank]) iris_gpu_free(ctx->bases[ctx->local_rank]);
    ctx->bases[ctx->local_rank] = NULL;
  }
  if (ctx->fault_host) iris_gpu_host_free(ctx->fault_host);
  ctx->fault_host = ctx->fault_dev = NULL;
  if (ctx->order_events) {
    iris_gpu_event_destroy(ctx->order_eager);
    iris_gpu_event_destroy(ctx->order_cap);
    ctx->order_events = 0;
  }
  if (old >= 0) iris_gpu_set_device(old);
}
/* Frees everything ctx holds; the struct itself stays (iris_finalize keeps it as a
 * tombstone, iris_detail_destroy frees it). */
IRIS_INTERNAL void iris_detail_release(iris_t *ctx) {
  iris_detail_watch_stop(ctx); /* first: the thread reads ctx */
  if (ctx->teams_op) ctx->teams_op(ctx, IRIS_DETAIL_TEAMS_FREE);
  if (ctx->ext && ctx->ext_free) ctx->ext_free(ctx->ext);
  ctx->ext = NULL;
  if (ctx->mode != 0) iris_detail_release_gpu(ctx); /* mode 0: a host-only test context */
  if (ctx->world_comm && ctx->world_owned && ctx->nccl) ((const iris_detail_nccl_lib_t *)(const void *)ctx->nccl)->comm_destroy(ctx->world_comm);
  ctx->world_comm = NULL;
  ctx->world_owned = 0;
  if (ctx->rail && ctx->rail_owned && ctx->nccl) ((const iris_detail_nccl_lib_t *)(const void *)ctx->nccl)->comm_destroy(ctx->rail);
  ctx->rail = NULL;
  ctx->nccl = NULL;
  if (ctx->rdv) iris_rendezvous_close(ctx->rdv);
  if (ctx->group) iris_detail_group_release(ctx->group);
  free(ctx->blocks);
  ctx->rdv = NULL;
  ctx->group = NULL;
  ctx->blocks = NULL;
  ctx->nblocks = ctx->capblocks = 0;
  memset(ctx->bases, 0, sizeof ctx->bases);
}
IRIS_INTERNAL void iris_detail_destroy(iris_t *ctx) {
  if (!ctx) return;
  iris_detail_release(ctx);
  free(ctx);
}

IRIS_INTERNAL iris_status_t iris_detail_resolve_config(const iris_config_t *cfg, iris_config_t *c) {
  iris_config_t def = IRIS_CONFIG_INIT;
  *c = def;
  if (cfg) {
    if (cfg->struct_size != sizeof(iris_config_t))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_config_t.struct_size is %zu, this iris expects %zu: start from IRIS_CONFIG_INIT",
                              cfg->struct_size, sizeof(iris_config_t));
    *c = *cfg;
  }
  if (c->heap_size == 0) {
    const char *env = NULL;
    iris_status_t st;
    if (iris_detail_env("IRIS_HEAP_SIZE", &env) < 0) return IRIS_ERROR_INVALID_ARGUMENT; /* set but empty: an error, never the default */
    if (env) {
      if ((st = iris_detail_parse_size_var("IRIS_HEAP_SIZE", env, &c->heap_size)) != IRIS_SUCCESS) return st;
      if (c->heap_size == 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_HEAP_SIZE=%s: the heap needs at least 1 byte", env);
    } else {
      c->heap_size = IRIS_DEFAULT_HEAP_SIZE;
    }
  }
  if (c->heap_size > SIZE_MAX - (((size_t)2 << 20) - 1))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "heap size %zu bytes (iris_config_t.heap_size or IRIS_HEAP_SIZE) overflows when rounded up to 2 MiB",
                            c->heap_size);
  c->heap_size = (c->heap_size + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1); /* whole 2 MiB pages */
  if (c->timeout_ms <= 0) {
    int ms = IRIS_DEFAULT_TIMEOUT_MS;
    if (iris_detail_env_ms("IRIS_TIMEOUT_MS", 1, &ms) != IRIS_SUCCESS) return IRIS_ERROR_INVALID_ARGUMENT;
    c->timeout_ms = ms;
  }
  if (c->barrier_timeout_ms <= 0) {
    int ms = IRIS_DEFAULT_BARRIER_TIMEOUT_MS;
    if (iris_detail_env_ms("IRIS_BARRIER_TIMEOUT_MS", 1, &ms) != IRIS_SUCCESS) return IRIS_ERROR_INVALID_ARGUMENT;
    c->barrier_timeout_ms = ms;
  }
  { /* checked here, read again at setup (iris_detail_setup_gpu) */
    int ms = 0;
    if (iris_detail_env_ms("IRIS_WAIT_TIMEOUT_MS", 100, &ms) != IRIS_SUCCESS) return IRIS_ERROR_INVALID_ARGUMENT;
  }
  { /* checked here, read again when the watch starts (iris_detail_watch_start) */
    int on = 1;
    if (iris_detail_env_flag("IRIS_PEER_WATCH", " (0: no peer watch; 1: a dead peer of this node ends every wait within about 100 ms, the default)", &on) < 0)
      return IRIS_ERROR_INVALID_ARGUMENT;
  }
  if (c->heap_memory < IRIS_HEAP_MEMORY_DEFAULT || c->heap_memory > IRIS_HEAP_MEMORY_COARSE)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_config_t.heap_memory %d is not an iris_heap_memory_t", (int)c->heap_memory);
  if (c->heap_memory == IRIS_HEAP_MEMORY_DEFAULT) c->heap_memory = IRIS_HEAP_MEMORY_FINE;
  return IRIS_SUCCESS;
}

/* Allocate and zero this rank's heap on ctx->device; fill the exchange record. */
IRIS_INTERNAL iris_status_t iris_detail_setup_gpu(iris_t *ctx, iris_detail_record_t *rec) {
  void *heap = NULL;
  iris_gpu_ipc_handle_t h;
  iris_gpu_error_t e;
  if ((e = iris_gpu_set_device(ctx->device)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_set_device(ctx->device)", e);
  if ((e = iris_gpu_malloc(&heap, ctx->heap_size, ctx->heap_memory)) != IRIS_GPU_SUCCESS)
    return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_malloc(&heap, ctx->heap_size, ctx->heap_memory)", e);
  ctx->bases[ctx->local_rank] = (char *)heap;
  if ((e = iris_gpu_memset(heap, 0, ctx->heap_size)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_memset(heap, 0, ctx->heap_size)", e);
  if ((e = iris_gpu_synchronize()) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_synchronize()", e);
  {
    void *h = NULL, *d = NULL;
    if ((e = iris_gpu_host_alloc_mapped(&h, IRIS_FAULT_WORDS * sizeof(unsigned long long))) != IRIS_GPU_SUCCESS)
      return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_host_alloc_mapped(&h, IRIS_FAULT_WORDS * sizeof(unsigned long long))", e);
    ctx->fault_host = (unsigned long long *)h;
    ctx->fault_host[IRIS_FAULT_WORD_FATAL] = ctx->fault_host[IRIS_FAULT_WORD_MISMATCH] = 0;
    int wait_ms = 0; /* IRIS_WAIT_TIMEOUT_MS (checked by iris_detail_resolve_config); 0: the units' IRIS_WAIT_TIMEOUT_NS */
    (void)iris_detail_env_ms("IRIS_WAIT_TIMEOUT_MS", 100, &wait_ms);
    ctx->wait_bound_ns = (unsigned long long)wait_ms * 1000000ULL;
    ctx->fault_host[IRIS_FAULT_WORD_BOUND] = ctx->wait_bound_ns;
    if ((e = iris_gpu_host_device_ptr(&d, h)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_host_device_ptr(&d, h)", e);
    ctx->fault_dev = (unsigned long long *)d;
  }
  if ((e = iris_gpu_event_create(&ctx->order_eager)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_event_create(&ctx->order_eager)", e);
  if (iris_gpu_event_create(&ctx->order_cap) != IRIS_GPU_SUCCESS) {
    iris_gpu_event_destroy(ctx->order_eager);
    return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: creating an event failed", ctx->local_rank);
  }
  ctx->order_events = 1;
  if (ctx->mode != IRIS_DETAIL_MODE_LOCAL) {
    if ((e = iris_gpu_ipc_get(&h, heap)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_ipc_get(&h, heap)", e);
    memcpy(rec->ipc, &h, sizeof h < sizeof rec->ipc ? sizeof h : sizeof rec->ipc);
  }
  rec->base = (uint64_t)(uintptr_t)heap;
  iris_gpu_pci_bus_id(rec->pci, (int)sizeof rec->pci, ctx->device);
  return IRIS_SUCCESS;
}

/* Map every peer's heap: same process -> peer access; other process -> IPC. */
IRIS_INTERNAL iris_status_t iris_detail_map_peers(iris_t *ctx, const iris_detail_record_t *rec) {
  int r;
  for (r = 0; r < ctx->local_size; r++) {
    if (r == ctx->local_rank) continue;
    if (iris_detail_same_process(&rec[r])) {
      if (rec[r].device != ctx->device) {
        int ok = 0;
        iris_gpu_error_t e;
        if ((e = iris_gpu_can_access_peer(&ok, ctx->device, rec[r].device)) != IRIS_GPU_SUCCESS)
          return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_can_access_peer(&ok, ctx->device, rec[r].device)", e);
        if (!ok)
          return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: GPU %d cannot access GPU %d (rank %d) directly; iris needs peer-to-peer access", ctx->local_rank,
                                  ctx->device, rec[r].device, r);
        if ((e = iris_gpu_enable_peer(rec[r].device)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->local_rank, "iris_gpu_enable_peer(rec[r].device)", e);
      }
      ctx->bases[r] = (char *)(uintptr_t)rec[r].base;
    } else {
      iris_gpu_ipc_handle_t h;
      void *p = NULL;
      iris_gpu_error_t e;
      memcpy(&h, rec[r].ipc, sizeof h < sizeof rec[r].ipc ? sizeof h : sizeof rec[r].ipc);
      e = iris_gpu_ipc_open(&p, h);
      if (e != IRIS_GPU_SUCCESS)
        return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: mapping rank %d's heap (GPU %s) failed: %s (" IRIS_GPU_NAME " error %d); the GPUs must be on one host and able to reach each other peer-to-peer",
                                ctx->local_rank, r, rec[r].pci, iris_gpu_error_text(e), (int)e);
      ctx->bases[r] = (char *)p;
      ctx->ipc_opened[r] = 1;
    }
  }
  return IRIS_SUCCESS;
}

#endif /* IRIS_INTERNAL_CORE_SETUP_H */
