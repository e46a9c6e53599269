/* internal/coll/tile.h: the bodies of the tile building blocks declared in
 * iris_collectives.h (iris_tile_*), and their helpers. Device code.
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_TILE_H
#define IRIS_INTERNAL_COLL_TILE_H
#include "../core/layout.h"
#include "types.h"
#include "protocol.h"

/* Whether tile is one of the flags' [0, f.num_tiles) and the block has a thread per rank
 * (thread r signals and waits for rank r). Another tile would be another tile's words or
 * past the flags' block, here and in every peer's heap (the signals); with fewer threads
 * the ranks past them were neither signalled nor waited for, and the sync passed without
 * them. The operations then touch nothing and return false (IRIS_DEBUG: traps). Every
 * thread of the block has the same arguments, so all of them return. */
IRIS_DEVICE_INLINE bool iris_detail_tile_valid(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile) {
  const int nt = (int)(blockDim.x * blockDim.y * blockDim.z);
  if ((unsigned)tile < (unsigned)f.num_tiles && nt >= ctx.world_size) return true;
#if defined(IRIS_DEBUG)
  if ((unsigned)tile >= (unsigned)f.num_tiles)
    printf("iris: tile %d (block %d, thread %d) is outside the flags' [0, %d)\n", tile, (int)blockIdx.x, (int)threadIdx.x, f.num_tiles);
  else
    printf("iris: tile %d (block %d, thread %d): the block has %d threads, fewer than the world's %d ranks (a tile operation needs one per rank)\n", tile,
           (int)blockIdx.x, (int)threadIdx.x, nt, ctx.world_size);
  iris_detail_trap();
#endif
  return false;
}
/* The tile's epoch: read by every thread at the start, stored by one at the end. */
IRIS_DEVICE_INLINE unsigned iris_detail_tile_begin(const iris_tile_flags_t &f, int tile) {
  __syncthreads(); /* thread 0's store of the block's previous call on this tile (iris_detail_tile_end) comes before every thread's load */
  unsigned e = *(volatile unsigned *)(f.counters + tile);
  __syncthreads();
  return e;
}
IRIS_DEVICE_INLINE void iris_detail_tile_end(const iris_tile_flags_t &f, int tile, unsigned epoch) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) f.counters[tile] = epoch;
}
IRIS_DEVICE_INLINE int iris_detail_block_tid(void) { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
IRIS_DEVICE_INLINE int iris_detail_block_threads(void) { return blockDim.x * blockDim.y * blockDim.z; }

/* iris_tile_sync: declared, with its contract, in iris_collectives.h */
IRIS_DEVICE_INLINE bool iris_tile_sync(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile) {
  if (!iris_detail_tile_valid(ctx, f, tile)) return false;
  unsigned epoch = iris_detail_tile_begin(f, tile);
  bool ok = iris_detail_rank_sync(ctx, f.flags + (size_t)tile * IRIS_MAX_RANKS, epoch, IRIS_SITE_BARRIER, 0);
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

/* Copy a rows x cols block of elem-byte elements (row strides in elements), 16 bytes at
 * a time where every row start allows it. Cooperative over the block. */
IRIS_DEVICE_INLINE void iris_detail_tile_copy(char *dst, long long dstride, const char *src, long long sstride, int rows, int cols, int elem) {
  const int tid = iris_detail_block_tid(), nt = iris_detail_block_threads();
  const long long row_bytes = (long long)cols * elem;
  if (rows <= 0 || cols <= 0) return;
  if (((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) && (row_bytes & 15) == 0 && ((dstride * elem) & 15) == 0 && ((sstride * elem) & 15) == 0) {
    const long long vpr = row_bytes / 16, n = vpr * rows;
    for (long long k = tid; k < n; k += nt) {
      const long long r = k / vpr, v = k % vpr;
      ((uint4 *)(dst + r * dstride * elem))[v] = ((const uint4 *)(src + r * sstride * elem))[v];
    }
  } else {
    const long long n = (long long)rows * cols;
    for (long long k = tid; k < n; k += nt) {
      const long long r = k / cols, c = k % cols;
      const char *s = src + (r * sstride + c) * elem;
      char *d = dst + (r * dstride + c) * elem;
      switch (elem) {
      case 2: *(unsigned short *)d = *(const unsigned short *)s; break;
      case 4: *(unsigned *)d = *(const unsigned *)s; break;
      case 8: *(unsigned long long *)d = *(const unsigned long long *)s; break;
      default: for (int b = 0; b < elem; b++) d[b] = s[b];
      }
    }
  }
}

/* iris_tile_all_reduce: declared, with its contract, in iris_collectives.h */
#define IRIS_DETAIL_TILE_OP_CHECK(OP) static_assert((OP) >= IRIS_SUM && (OP) < IRIS_REDOP_COUNT, "iris_tile_*: OP must be IRIS_SUM, IRIS_MIN, IRIS_MAX or IRIS_AVG")
template <typename T, int OP>
IRIS_DEVICE_INLINE bool iris_tile_all_reduce(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst, int bm, int bn) {
  IRIS_DETAIL_TILE_OP_CHECK(OP);
  if (!iris_detail_tile_valid(ctx, f, tile)) return false;
  long long tm, tn;
  iris_view_tile_coords(src, bn, tile, &tm, &tn);
  const int rows = iris_view_tile_rows(src, bm, tm), cols = iris_view_tile_cols(src, bn, tn), W = ctx.world_size;
  const int tid = iris_detail_block_tid(), nt = iris_detail_block_threads();
  unsigned epoch = iris_detail_tile_begin(f, tile);
  unsigned long long *row = f.flags + (size_t)tile * IRIS_MAX_RANKS;
  bool ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0); /* every rank's src tile is ready */
  if (ok) {
    const T *s0 = (const T *)iris_view_elem(src, tm * bm, tn * bn);
    T *d0 = (T *)iris_view_elem(dst, tm * bm, tn * bn);
    for (long long k = tid; k < (long long)rows * cols; k += nt) {
      const long long r = k / cols, c = k % cols;
      typename iris_coll_acc<T>::type acc = iris_coll_up(*iris_translate(ctx, s0 + r * src.stride + c, 0));
      for (int q = 1; q < W; q++) acc = iris_coll_combine<OP>(acc, iris_coll_up(*iris_translate(ctx, s0 + r * src.stride + c, q)));
      d0[r * dst.stride + c] = iris_coll_result<T, OP>(acc, W);
    }
  }
  ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0) && ok; /* nobody still reads our src */
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

/* iris_tile_all_gather: declared, with its contract, in iris_collectives.h */
template <typename T>
IRIS_DEVICE_INLINE bool iris_tile_all_gather(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst, int dim, int bm,
                                             int bn) {
  if (!iris_detail_tile_valid(ctx, f, tile)) return false;
  if (dim != 0 && dim != 1) { /* every rank's tile would land at the same place of every dst: touch nothing */
#if defined(IRIS_DEBUG)
    printf("iris: iris_tile_all_gather tile %d (block %d, thread %d): dim %d is not 0 or 1\n", tile, (int)blockIdx.x, (int)threadIdx.x, dim);
    iris_detail_trap();
#endif
    return false;
  }
  long long tm, tn;
  iris_view_tile_coords(src, bn, tile, &tm, &tn);
  const int rows = iris_view_tile_rows(src, bm, tm), cols = iris_view_tile_cols(src, bn, tn), W = ctx.world_size;
  unsigned epoch = iris_detail_tile_begin(f, tile);
  unsigned long long *row = f.flags + (size_t)tile * IRIS_MAX_RANKS;
  bool ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0); /* every rank is done with the previous contents */
  if (ok) {
    const long long r0 = tm * bm + (dim == 0 ? (long long)ctx.rank * src.rows : 0), c0 = tn * bn + (dim == 1 ? (long long)ctx.rank * src.cols : 0);
    for (int k = 0; k < W; k++) {
      const int p = (ctx.rank + k) % W;
      iris_detail_tile_copy((char *)iris_translate(ctx, (T *)iris_view_elem(dst, r0, c0), p), dst.stride, (const char *)iris_view_elem(src, tm * bm, tn * bn),
                            src.stride, rows, cols, (int)sizeof(T));
    }
  }
  ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0) && ok; /* every rank's tile has arrived */
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

/* iris_tile_reduce_scatter: declared, with its contract, in iris_collectives.h */
template <typename T, int OP>
IRIS_DEVICE_INLINE bool iris_tile_reduce_scatter(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst, int bm,
                                                 int bn) {
  IRIS_DETAIL_TILE_OP_CHECK(OP);
  if (!iris_detail_tile_valid(ctx, f, tile)) return false;
  long long tm, tn;
  iris_view_tile_coords(src, bn, tile, &tm, &tn);
  const int rows = iris_view_tile_rows(src, bm, tm), cols = iris_view_tile_cols(src, bn, tn), W = ctx.world_size;
  const int tid = iris_detail_block_tid(), nt = iris_detail_block_threads();
  unsigned epoch = iris_detail_tile_begin(f, tile);
  unsigned long long *row = f.flags + (size_t)tile * IRIS_MAX_RANKS;
  bool ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0);
  if (ok && tile % W == ctx.rank) {
    const T *s0 = (const T *)iris_view_elem(src, tm * bm, tn * bn);
    T *d0 = (T *)iris_view_elem(dst, tm * bm, tn * bn);
    for (long long k = tid; k < (long long)rows * cols; k += nt) {
      const long long r = k / cols, c = k % cols;
      typename iris_coll_acc<T>::type acc = iris_coll_up(*iris_translate(ctx, s0 + r * src.stride + c, 0));
      for (int q = 1; q < W; q++) acc = iris_coll_combine<OP>(acc, iris_coll_up(*iris_translate(ctx, s0 + r * src.stride + c, q)));
      d0[r * dst.stride + c] = iris_coll_result<T, OP>(acc, W);
    }
  }
  ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0) && ok;
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

/* iris_tile_all_to_all: declared, with its contract, in iris_collectives.h */
template <typename T>
IRIS_DEVICE_INLINE bool iris_tile_all_to_all(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst,
                                             long long n_per_rank, int bm, int bn) {
  if (!iris_detail_tile_valid(ctx, f, tile)) return false;
  const iris_view2d_t block = iris_view2d(src.ptr, src.rows, n_per_rank, src.stride, src.elem_size); /* the tile grid */
  long long tm, tn;
  iris_view_tile_coords(block, bn, tile, &tm, &tn);
  const int rows = iris_view_tile_rows(block, bm, tm), cols = iris_view_tile_cols(block, bn, tn), W = ctx.world_size;
  unsigned epoch = iris_detail_tile_begin(f, tile);
  unsigned long long *row = f.flags + (size_t)tile * IRIS_MAX_RANKS;
  bool ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0);
  if (ok) {
    for (int k = 0; k < W; k++) {
      const int r = (ctx.rank + k) % W;
      const T *s = iris_translate(ctx, (const T *)iris_view_elem(src, tm * bm, (long long)ctx.rank * n_per_rank + tn * bn), r);
      iris_detail_tile_copy((char *)iris_view_elem(dst, tm * bm, (long long)r * n_per_rank + tn * bn), dst.stride, (const char *)s, src.stride, rows, cols,
                            (int)sizeof(T));
    }
  }
  ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0) && ok;
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

#endif /* IRIS_INTERNAL_COLL_TILE_H */
