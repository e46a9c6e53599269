/* internal/core/heap.h: the symmetric heap's allocator: blocks sorted by offset that cover the
 * heap, iris_malloc*, iris_calloc, iris_free, iris_heap_offset, and iris_heap_verify (the
 * live blocks hashed and compared among a node's ranks); and a bookkeeping-only context
 * for the host tests. Part of iris's implementation, included by iris.h under
 * IRIS_IMPLEMENTATION (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_HEAP_H
#define IRIS_INTERNAL_CORE_HEAP_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"
#include "status.h"
#include "util.h"
#include "context.h"

IRIS_INTERNAL int iris_detail_blocks_insert(iris_t *ctx, int at, size_t off, size_t size, int used) {
  if (ctx->nblocks == ctx->capblocks) {
    int cap = ctx->capblocks ? 2 * ctx->capblocks : 64;
    iris_detail_block_t *nb = (iris_detail_block_t *)realloc(ctx->blocks, sizeof *nb * (size_t)cap);
    if (!nb) return -1;
    ctx->blocks = nb;
    ctx->capblocks = cap;
  }
  memmove(ctx->blocks + at + 1, ctx->blocks + at, sizeof *ctx->blocks * (size_t)(ctx->nblocks - at));
  ctx->blocks[at].off = off;
  ctx->blocks[at].size = size;
  ctx->blocks[at].used = used;
  ctx->nblocks++;
  return 0;
}
IRIS_INTERNAL void iris_detail_blocks_erase(iris_t *ctx, int at) {
  memmove(ctx->blocks + at, ctx->blocks + at + 1, sizeof *ctx->blocks * (size_t)(ctx->nblocks - at - 1));
  ctx->nblocks--;
}
IRIS_INTERNAL iris_status_t iris_detail_heap_reset(iris_t *ctx) {
  ctx->nblocks = 0;
  ctx->used = 0;
  if (iris_detail_blocks_insert(ctx, 0, 0, ctx->heap_size, 0)) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_malloc_aligned(iris_t *ctx, size_t bytes, size_t alignment, void **ptr) {
  size_t size, largest = 0;
  int i;
  iris_status_t st;
  if (!ptr) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_malloc: NULL result pointer");
  *ptr = NULL;
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_malloc");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st; /* a fatal fault: no new block (iris_calloc would launch and wait) */
  if (alignment & (alignment - 1)) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_malloc: alignment %zu is not a power of two", alignment);
  if (alignment < IRIS_HEAP_ALIGN) alignment = IRIS_HEAP_ALIGN;
  if (bytes == 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_malloc of 0 bytes", ctx->local_rank);
  for (i = 0; i < ctx->nblocks; i++)
    if (!ctx->blocks[i].used && ctx->blocks[i].size > largest) largest = ctx->blocks[i].size;
  if (bytes > ctx->heap_size) goto oom;
  size = (bytes + IRIS_HEAP_ALIGN - 1) & ~(size_t)(IRIS_HEAP_ALIGN - 1);
  for (i = 0; i < ctx->nblocks; i++) {
    iris_detail_block_t b = ctx->blocks[i];
    size_t start, pad;
    if (b.used) continue;
    start = (b.off + alignment - 1) & ~(alignment - 1);
    pad = start - b.off;
    if (pad > b.size || b.size - pad < size) continue;
    /* need up to two more block entries: reserve them first so failure changes nothing */
    if (ctx->nblocks + 2 > ctx->capblocks) {
      int cap = ctx->capblocks * 2 + 2;
      iris_detail_block_t *nb = (iris_detail_block_t *)realloc(ctx->blocks, sizeof *nb * (size_t)cap);
      if (!nb) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", ctx->local_rank);
      ctx->blocks = nb;
      ctx->capblocks = cap;
    }
    if (b.size - pad > size) iris_detail_blocks_insert(ctx, i + 1, start + size, b.size - pad - size, 0);
    if (pad) {
      ctx->blocks[i].size = pad;
      iris_detail_blocks_insert(ctx, i + 1, start, size, 1);
      i++;
    } else {
      ctx->blocks[i].size = size;
      ctx->blocks[i].used = 1;
    }
    ctx->blocks[i].req = bytes;
    ctx->used += size;
    *ptr = ctx->bases[ctx->local_rank] + start;
    return IRIS_SUCCESS;
  }
oom:
  return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: symmetric heap exhausted: %zu bytes requested, %zu of %zu in use, largest free block %zu",
                          ctx->local_rank, bytes, ctx->used, ctx->heap_size, largest);
}
IRIS_DEF iris_status_t iris_malloc(iris_t *ctx, size_t bytes, void **ptr) { return iris_malloc_aligned(ctx, bytes, IRIS_HEAP_ALIGN, ptr); }

IRIS_DEF iris_status_t iris_calloc(iris_t *ctx, size_t bytes, void **ptr) {
  iris_status_t st = iris_malloc(ctx, bytes, ptr);
  int old = -1;
  iris_gpu_error_t e = IRIS_GPU_SUCCESS;
  if (st != IRIS_SUCCESS) return st;
  iris_gpu_get_device(&old);
  if ((e = iris_gpu_set_device(ctx->device)) == IRIS_GPU_SUCCESS && (e = iris_gpu_memset(*ptr, 0, bytes)) == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
  if (old >= 0) iris_gpu_set_device(old);
  if (e != IRIS_GPU_SUCCESS) /* the block stays allocated (and *ptr set): offsets stay equal on every rank */
    return iris_detail_gpu_fail(ctx->local_rank, "iris_calloc: memset (the block stays allocated; free it on every rank)", e);
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_heap_offset(const iris_t *ctx, const void *ptr, size_t *offset) {
  const char *p = (const char *)ptr;
  if (!offset) {
    iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_heap_offset: NULL argument");
    return IRIS_ERROR_INVALID_ARGUMENT;
  }
  if (!IRIS_DETAIL_IS_LIVE(ctx)) {
    iris_detail_live(ctx, "iris_heap_offset");
    return IRIS_ERROR_INVALID_ARGUMENT; /* a constant, as below */
  }
  if (p < ctx->bases[ctx->local_rank] || p >= ctx->bases[ctx->local_rank] + ctx->heap_size) {
    iris_detail_fail(IRIS_ERROR_NOT_IN_HEAP, "rank %d: pointer %p is outside the symmetric heap [%p, %p)", ctx->local_rank, ptr, (void *)ctx->bases[ctx->local_rank],
                     (void *)(ctx->bases[ctx->local_rank] + ctx->heap_size));
    return IRIS_ERROR_NOT_IN_HEAP; /* a constant: callers' "set on success" reasoning sees it */
  }
  *offset = (size_t)(p - ctx->bases[ctx->local_rank]);
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_free(iris_t *ctx, void *ptr) {
  size_t off;
  int i;
  iris_status_t st;
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_free");
  if (!ptr) return IRIS_SUCCESS;
  if ((st = iris_heap_offset(ctx, ptr, &off)) != IRIS_SUCCESS) return st;
  for (i = 0; i < ctx->nblocks; i++)
    if (ctx->blocks[i].off == off && ctx->blocks[i].used) break;
  if (i == ctx->nblocks) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_free(%p): not the start of a live heap block", ctx->local_rank, ptr);
  ctx->blocks[i].used = 0;
  ctx->used -= ctx->blocks[i].size;
  if (i + 1 < ctx->nblocks && !ctx->blocks[i + 1].used) {
    ctx->blocks[i].size += ctx->blocks[i + 1].size;
    iris_detail_blocks_erase(ctx, i + 1);
  }
  if (i > 0 && !ctx->blocks[i - 1].used) {
    ctx->blocks[i - 1].size += ctx->blocks[i].size;
    iris_detail_blocks_erase(ctx, i);
  }
  return IRIS_SUCCESS;
}

/* A rank's live blocks as iris_heap_verify exchanges them: their count, and their
 * (offset, bytes asked for) hashed; equal on every rank exactly when the same
 * allocations are live at the same offsets. */
typedef struct iris_detail_heap_layout {
  uint64_t blocks, hash;
} iris_detail_heap_layout_t;
IRIS_DETAIL_STATIC_ASSERT(sizeof(iris_detail_heap_layout_t) == 16 && offsetof(iris_detail_heap_layout_t, hash) == 8, heap_layout_layout);
IRIS_INTERNAL void iris_detail_layout(const iris_t *ctx, iris_detail_heap_layout_t *out) {
  uint64_t h = 14695981039346656037ULL, n = 0;
  int i;
  for (i = 0; i < ctx->nblocks; i++) {
    if (!ctx->blocks[i].used) continue;
    h = iris_detail_fnv(iris_detail_fnv(h, ctx->blocks[i].off), ctx->blocks[i].req);
    n++;
  }
  out->blocks = n;
  out->hash = h;
}

IRIS_DEF iris_status_t iris_heap_verify(iris_t *ctx) {
  iris_detail_heap_layout_t mine, *all;
  unsigned char bad[IRIS_MAX_RANKS];
  char list[512];
  int r, nbad = 0;
  iris_status_t st;
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_heap_verify");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st; /* a fatal fault: at once, as every call */
  all = (iris_detail_heap_layout_t *)malloc(sizeof mine * (size_t)ctx->local_size);
  if (!all) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  iris_detail_layout(ctx, &mine);
  st = iris_detail_comm_allgather(ctx, &mine, all, sizeof mine, ctx->barrier_timeout_ms);
  if (st == IRIS_SUCCESS) {
    for (r = 0; r < ctx->local_size; r++) {
      bad[r] = (unsigned char)(all[r].blocks != all[0].blocks || all[r].hash != all[0].hash);
      nbad += bad[r];
    }
    if (nbad)
      st = iris_detail_fail(IRIS_ERROR_MISMATCH,
                            "rank %d: symmetric-heap allocations diverge: ranks %s hold different live blocks than rank 0 (%llu blocks there); "
                            "every rank must make the same iris_malloc/iris_free calls with the same sizes, in the same order",
                            ctx->local_rank, iris_detail_rank_list(bad, ctx->local_size, list, sizeof list), (unsigned long long)all[0].blocks);
  }
  free(all);
  return st;
}

/* ------------------------------------------------------------ for host tests --
 * A context with bookkeeping only: no GPU, no peers. fake_base is never dereferenced
 * by the allocator. Used by tests/host/heap.c to test the allocator on machines
 * without GPUs; not part of the public API. */
static inline iris_t *iris_detail_host_only_ctx(size_t heap_size, void *fake_base) {
  iris_t *ctx = (iris_t *)calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->magic = IRIS_DETAIL_CTX_LIVE;
  ctx->local_size = 1;
  ctx->heap_size = heap_size;
  ctx->bases[0] = (char *)fake_base;
  ctx->device = -1;
  if (iris_detail_heap_reset(ctx) != IRIS_SUCCESS) { free(ctx); return NULL; }
  return ctx;
}
static inline void iris_detail_host_only_free(iris_t *ctx) {
  if (!ctx) return;
  free(ctx->blocks);
  free(ctx);
}

#endif /* IRIS_INTERNAL_CORE_HEAP_H */
