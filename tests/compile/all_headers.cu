// Compile check: every header, and every device template instantiated once, under
// nvcc (sm_90) and hipcc (gfx90a, gfx940). Built as an object; never run.
#define IRIS_IMPLEMENTATION
#include "../../iris.h"
#include "../../iris_device.h"
#include "../../iris_collectives.h"
#include "../../iris_gemm.h"
#include "../../iris_gemm_reduce.h"
#include "../../iris_moe.h"

template <iris_order_t O, iris_scope_t S, typename T>
__device__ void all_rmw(const iris_device_ctx_t &ctx, T *p, T v, int r, T *out) {
  out[0] = iris_atomic_add<O, S>(ctx, p, v, r);
  out[1] = iris_atomic_sub<O, S>(ctx, p, v, r);
  out[2] = iris_atomic_and<O, S>(ctx, p, v, r);
  out[3] = iris_atomic_or<O, S>(ctx, p, v, r);
  out[4] = iris_atomic_xor<O, S>(ctx, p, v, r);
  out[5] = iris_atomic_min<O, S>(ctx, p, v, r);
  out[6] = iris_atomic_max<O, S>(ctx, p, v, r);
  out[7] = iris_atomic_xchg<O, S>(ctx, p, v, r);
  out[8] = iris_atomic_cas<O, S>(ctx, p, v, (T)(v + 1), r);
}
template <iris_scope_t S, typename T>
__device__ void all_orders(const iris_device_ctx_t &ctx, T *p, T v, int r, T *out) {
  all_rmw<IRIS_ORDER_RELAXED, S>(ctx, p, v, r, out);
  all_rmw<IRIS_ORDER_ACQUIRE, S>(ctx, p, v, r, out);
  all_rmw<IRIS_ORDER_RELEASE, S>(ctx, p, v, r, out);
  all_rmw<IRIS_ORDER_ACQ_REL, S>(ctx, p, v, r, out);
  out[9] = iris_atomic_load<IRIS_ORDER_RELAXED, S>(ctx, p, r) + iris_atomic_load<IRIS_ORDER_ACQUIRE, S>(ctx, p, r);
  iris_atomic_store<IRIS_ORDER_RELAXED, S>(ctx, p, v, r);
  iris_atomic_store<IRIS_ORDER_RELEASE, S>(ctx, p, v, r);
  iris_fence<IRIS_ORDER_ACQ_REL, S>();
}
template <typename T>
__device__ void all_scopes(const iris_device_ctx_t &ctx, T *p, T v, int r, T *out) {
  all_orders<IRIS_SCOPE_BLOCK>(ctx, p, v, r, out);
  all_orders<IRIS_SCOPE_DEVICE>(ctx, p, v, r, out);
  all_orders<IRIS_SCOPE_SYSTEM>(ctx, p, v, r, out);
}

__global__ void instantiate_all(iris_device_ctx_t ctx, int *i32, unsigned *u32, long long *i64, unsigned long long *u64, long *l64, float *f, double *d,
                                char *bytes, int peer) {
  all_scopes(ctx, i32, 3, peer, i32 + 16);
  all_scopes(ctx, u32, 3u, peer, u32 + 16);
  all_scopes(ctx, i64, 3ll, peer, i64 + 16);
  all_scopes(ctx, u64, 3ull, peer, u64 + 16);
  all_scopes(ctx, l64, 3l, peer, l64 + 16);
  f[1] = iris_atomic_add(ctx, f, 1.5f, peer) + iris_atomic_xchg(ctx, f, 2.f, peer) + iris_atomic_load(ctx, f, peer);
  d[1] = iris_atomic_add(ctx, d, 1.5, peer) + iris_atomic_xchg(ctx, d, 2., peer);
  iris_atomic_store(ctx, f, 1.f, peer);
  f[2] = iris_load(ctx, f, peer);
  iris_store(ctx, f + 3, 1.f, peer);
  iris_get(ctx, f + 4, f, peer);
  iris_put(ctx, f + 5, f, peer);
  iris_copy(ctx, f + 6, f, peer, ctx.rank);
  iris_store_v16(ctx, bytes, iris_load_v16(ctx, bytes + 16, peer), peer);
  iris_get_bulk(ctx, bytes + 64, bytes, 1000, peer, threadIdx.x, blockDim.x);
  iris_put_bulk(ctx, bytes + 2048, bytes, 1000, peer, threadIdx.x, blockDim.x);
  iris_copy_bulk(ctx, bytes + 4096, bytes, 1000, peer, 0, threadIdx.x, blockDim.x);
  iris_signal(ctx, u32, 1u, peer);
  iris_signal_add(ctx, u64, 1ull, peer);
  iris_signal_relaxed(ctx, u32, 1u, peer);
  iris_signal_add_relaxed(ctx, u32, 1u, peer);
  iris_signal_block(ctx, u32, 2u, peer);
  if (!iris_wait_until(ctx, u32, IRIS_CMP_EPOCH, 5u)) u32[1] = 1;
  if (!iris_wait_until_relaxed(ctx, u64, IRIS_CMP_GE, 5ull)) u32[2] = 1;
  if (!iris_wait_block(ctx, u32, IRIS_CMP_EQ, 7u)) u32[3] = 1;
  iris_view2d_t v = iris_view2d(f, 100, 60, 64, 4);
  long long tm, tn;
  iris_view_tile_coords(v, 16, 5, &tm, &tn);
  f[7] = (float)iris_view_tile_rows(v, 32, tm) + (float)iris_view_num_tiles(v, 32, 16);
  u32[4] = IRIS_WARP_SIZE;
}

// the tile building blocks, every operation and a few types and ops
// all-reduce + RMSNorm building blocks, both types, every quantisation
__global__ void instantiate_rmsnorm(iris_device_ctx_t ctx, iris_tile_flags_t f, iris_view2d_t a, unsigned short *r, const unsigned short *w, unsigned short *o,
                                    unsigned char *q, float *sc) {
  iris_tile_all_reduce_rmsnorm<iris_bf16_t>(ctx, f, 0, a, (iris_bf16_t *)r, (const iris_bf16_t *)w, (iris_bf16_t *)o, 4, 1e-6f, IRIS_QUANT_FP8_PER_TOKEN, q, sc);
  iris_tile_all_reduce_rmsnorm<iris_f16_t>(ctx, f, 1, a, (iris_f16_t *)r, (const iris_f16_t *)w, (iris_f16_t *)o, 2, 1e-6f, IRIS_QUANT_NONE, NULL, NULL);
  iris_add_rmsnorm_block<iris_f16_t>((const iris_f16_t *)o, (iris_f16_t *)r, (const iris_f16_t *)w, (iris_f16_t *)o, 1001, 1e-5f, IRIS_QUANT_FP8_PER_TENSOR, q, sc);
  iris_add_rmsnorm_block<iris_bf16_t>((const iris_bf16_t *)o, (iris_bf16_t *)r, (const iris_bf16_t *)w, (iris_bf16_t *)o, 8192, 1e-5f, IRIS_QUANT_NONE, NULL, NULL);
}
__global__ void instantiate_tiles(iris_device_ctx_t ctx, iris_tile_flags_t f, iris_view2d_t a, iris_view2d_t b) {
  iris_tile_sync(ctx, f, 0);
  iris_tile_all_reduce<float>(ctx, f, 1, a, b, 32, 64);
  iris_tile_all_reduce<iris_bf16_t, IRIS_MAX>(ctx, f, 1, a, b, 32, 64);
  iris_tile_all_reduce<long long, IRIS_MIN>(ctx, f, 1, a, b, 32, 64);
  iris_tile_all_gather<float>(ctx, f, 2, a, b, 0, 32, 64);
  iris_tile_all_gather<iris_f16_t>(ctx, f, 2, a, b, 1, 32, 64);
  iris_tile_reduce_scatter<int>(ctx, f, 3, a, b, 32, 64);
  iris_tile_all_reduce<iris_fp8_e4m3_t, IRIS_AVG>(ctx, f, 1, a, b, 32, 64);
  iris_tile_reduce_scatter<iris_fp8_e5m2_t, IRIS_SUM>(ctx, f, 3, a, b, 32, 64);
  iris_tile_reduce_scatter<unsigned char, IRIS_AVG>(ctx, f, 3, a, b, 32, 64);
  iris_tile_all_gather<iris_fp8_e4m3_t>(ctx, f, 2, a, b, 0, 32, 64);
  iris_tile_all_to_all<iris_f16_t>(ctx, f, 4, a, b, 100, 32, 64);
}

// the GEMM + reduce building blocks (iris_gemm_reduce.h), every output type
__global__ void instantiate_gemm_reduce(iris_device_ctx_t ctx, iris_gemm_contrib_t cb, const float *src, float *o32, iris_bf16_t *o16, iris_f16_t *oh) {
  iris_gemm_push_tile(ctx, cb, 3, 1, src, 64, 32, 64, 5u);
  if (!iris_gemm_reduce_tile<float>(ctx, cb, 3, 32, 64, o32, o32, 128, 5u)) o32[0] = 1;
  if (!iris_gemm_reduce_tile<iris_bf16_t>(ctx, cb, 3, 32, 64, NULL, o16, 128, 5u)) o32[1] = 1;
  if (!iris_gemm_reduce_tile<iris_f16_t>(ctx, cb, 3, 32, 64, oh, oh, 128, 5u)) o32[2] = 1;
}

// the MoE building blocks (iris_moe.h): a warp's fp8 quantisation and weighted sum
__global__ void instantiate_moe(const iris_bf16_t *row, const iris_bf16_t *const *rows, const float *w, uint4 *o, float *s) {
  uint4 q;
  float sc;
  if (iris_moe_quant_fp8(row, 256, 0, &q, &sc)) o[0] = q, s[0] = sc;
  iris_moe_weighted_sum(rows, w, 2, 256, 0, o + 1);
}
