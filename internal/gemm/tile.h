/* internal/gemm/tile.h: the bodies of the tile building blocks declared in
 * iris_gemm_reduce.h: pushing a tile of fp32 contributions to its owner
 * (iris_gemm_push_tile) and reducing the contributions of every rank
 * (iris_gemm_reduce_tile). Device code. Part of iris_gemm_reduce.h; not a public header. */
#ifndef IRIS_GEMM_REDUCE_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_gemm_reduce.h"
#endif
#ifndef IRIS_INTERNAL_GEMM_TILE_H
#define IRIS_INTERNAL_GEMM_TILE_H
#include "../device/platform.h"
#include "../coll/types.h"

IRIS_DEVICE_INLINE void iris_gemm_push_tile(const iris_device_ctx_t &ctx, iris_gemm_contrib_t cb, int tile, int owner, const float *src, int ld_src, int rows,
                                            int cols, unsigned epoch) {
  const size_t slot = (size_t)tile * ctx.world_size + ctx.rank;
  float *dst = iris_translate(ctx, cb.data + slot * cb.tile_elems, owner);
  for (int i = (int)threadIdx.x; i < rows * cols; i += (int)blockDim.x) {
    const int r = i / cols, c = i - r * cols;
    dst[i] = src[(size_t)r * ld_src + c];
  }
  iris_signal_block(ctx, cb.flags + slot, epoch, owner);
}

template <typename OutT>
IRIS_DEVICE_INLINE bool iris_gemm_reduce_tile(const iris_device_ctx_t &ctx, iris_gemm_contrib_t cb, int tile, int rows, int cols, const OutT *bias, OutT *out,
                                              long long ld_out, unsigned epoch) {
  const int W = ctx.world_size;
  const size_t base = (size_t)tile * W;
  int ok = 1;
  if ((int)threadIdx.x < W) ok = iris_wait_until<IRIS_SCOPE_SYSTEM>(ctx, cb.flags + base + threadIdx.x, IRIS_CMP_EPOCH, epoch, "iris_gemm_reduce_tile") ? 1 : 0;
  if (!__syncthreads_and(ok)) return false;
  for (int i = (int)threadIdx.x; i < rows * cols; i += (int)blockDim.x) {
    const int r = i / cols, c = i - r * cols;
    float acc = 0.0f;
    for (int q = 0; q < W; ++q) acc += cb.data[(base + q) * cb.tile_elems + i];
    if (bias) acc += iris_coll_up<OutT>(bias[c]);
    out[(size_t)r * ld_out + c] = iris_coll_down<OutT>(acc);
  }
  return true;
}

#endif /* IRIS_INTERNAL_GEMM_TILE_H */
