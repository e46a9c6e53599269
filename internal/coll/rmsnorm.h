/* internal/coll/rmsnorm.h: all-reduce + residual add + RMSNorm (+ fp8), device side:
 * the fixed order of the sum of squares, the block building blocks, the one-shot fused
 * kernel and the norm kernel of the separate path. Device code (nvcc, hipcc).
 * Part of iris_collectives.h; not a public header.
 *
 * Arithmetic (the contract in iris_collectives.h, "all-reduce + RMSNorm"), per row of
 * `hidden` elements of T (bf16 or fp16), with up() the exact widening to float and
 * down() round-to-nearest-even to T:
 *   s[i]   = down(sum over ranks r = 0..W-1 of up(x_r[i]), in fp32)    the all-reduce's bits
 *   res[i] = down(up(s[i]) + up(res[i]))                                residual, in place
 *   ss     = the tree sum below of up(res[i])^2, in fp32
 *   inv    = 1 / sqrtf(ss / hidden + eps)                               IEEE division, sqrt
 *   out[i] = down((up(res[i]) * inv) * up(w[i]))
 *   fp8:     per tensor  q[i] = e4m3(up(out[i]) * (1 / scale))           scale read
 *            per token   amax = max |up(out[i])|, scale = max(amax / 448, 1 / (448 * 512)),
 *                        q[i] = e4m3(up(out[i]) * (1 / scale))           scale written
 * The sum of squares has one order whatever the grid: element squares of a line (4
 * elements, 8 bytes) by fmaf in element order; lines in chunks of 32, each chunk a
 * pairwise tree over its lines (lane l holds line l, xor-shuffle masks 1, 2, 4, 8, 16);
 * chunks padded with zeros to a power of two P and summed in a pairwise tree over chunk
 * index. A CTA that owns an aligned power-of-two range of chunks computes a complete
 * subtree; CTAs of one row combine their subtrees in the same tree. So the fused kernel
 * (a row over several CTAs) and the norm kernel (a row in one CTA) give the same bits,
 * on every rank, and a host can reproduce them (tests/fused_test.cu does). */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_RMSNORM_H
#define IRIS_INTERNAL_COLL_RMSNORM_H
#include "../device/platform.h"
#include "plan.h"
#include "types.h"
#include "fp8.h"
#include "protocol.h"
#include "ll.h"
#include "kernels.h"

/* Lines per chunk (the shuffle tree's width: a half-wave on AMD, a warp on NVIDIA). */
#define IRIS_RMSNORM_CHUNK 32
/* 32-lane groups of a CTA, at most: a thread walks its lines one after another, each a
 * wait and loads in sequence (about 1.5 us apiece on one H200 with the ranks as threads:
 * tools/proxy_fused.cu), so more threads per row, fewer lines each. 512 threads keep the
 * kernels within 128 registers. Not yet measured on several GPUs: 8 (at compile time)
 * gives the 256-thread CTAs of before. */
#ifndef IRIS_RMSNORM_MAX_GROUPS
#define IRIS_RMSNORM_MAX_GROUPS 16
#endif
#if defined(__cplusplus)
static_assert(IRIS_RMSNORM_MAX_GROUPS >= 2 && IRIS_RMSNORM_MAX_GROUPS <= 32, "IRIS_RMSNORM_MAX_GROUPS: 2..32 groups of 32 lanes (64..1024 threads)");
#endif
#define IRIS_RMSNORM_MAX_THREADS (IRIS_RMSNORM_MAX_GROUPS * IRIS_RMSNORM_CHUNK)
/* Chunks of the longest row (IRIS_RMSNORM_MAX_HIDDEN elements, 4 per line). */
#define IRIS_RMSNORM_MAX_CHUNKS (IRIS_RMSNORM_MAX_HIDDEN / 4 / IRIS_RMSNORM_CHUNK)
static_assert(IRIS_RMSNORM_MAX_HIDDEN % (4 * IRIS_RMSNORM_CHUNK) == 0 && (IRIS_RMSNORM_MAX_CHUNKS & (IRIS_RMSNORM_MAX_CHUNKS - 1)) == 0,
              "IRIS_RMSNORM_MAX_HIDDEN: a power of two of whole chunks");
static_assert(IRIS_WARP_SIZE % IRIS_RMSNORM_CHUNK == 0, "a chunk's lanes lie in one warp");

/* The shape of one row, the same on every rank for the same call (host and device). */
typedef struct iris_rmsnorm_shape {
  long long hidden; /* elements per row */
  int lines;        /* 8-byte lines per row: ceil(hidden / 4) */
  int chunks;       /* ceil(lines / IRIS_RMSNORM_CHUNK) */
  int pow2;         /* chunks rounded up to a power of two */
  int cpr;          /* CTAs per row (a power of two <= pow2) */
  int per_cta;      /* chunks per CTA: pow2 / cpr */
} iris_rmsnorm_shape_t;
static inline IRIS_HOST_DEVICE iris_rmsnorm_shape_t iris_rmsnorm_shape(long long hidden, int cpr) {
  iris_rmsnorm_shape_t s;
  s.hidden = hidden;
  s.lines = (int)((hidden + 3) / 4);
  s.chunks = (s.lines + IRIS_RMSNORM_CHUNK - 1) / IRIS_RMSNORM_CHUNK;
  s.pow2 = 1;
  while (s.pow2 < s.chunks) s.pow2 *= 2;
  s.cpr = cpr < 1 ? 1 : cpr > s.pow2 ? s.pow2 : cpr;
  s.per_cta = s.pow2 / s.cpr;
  return s;
}

/* 16-byte vectors (two lines) per thread that iris_rmsnorm_row16 keeps in registers
 * (host and device: the bandwidth kernel's grid depends on it). */
#define IRIS_RMSNORM_VECS 4
/* The bandwidth kernel's scratch rows: elements from one to the next (hidden rounded up
 * to 16 bytes). Host and device. */
static inline IRIS_HOST_DEVICE size_t iris_rmsnorm_bw_pitch(long long hidden) { return (size_t)(hidden + 7) / 8 * 8; }

#if defined(IRIS_DETAIL_GPU_COMPILER)
/* ---- element helpers (T: iris_bf16_t or iris_f16_t, 4 per 8-byte line) */
template <typename T> struct iris_rmsnorm_type_ok { static const bool value = false; };
template <> struct iris_rmsnorm_type_ok<iris_bf16_t> { static const bool value = true; };
template <> struct iris_rmsnorm_type_ok<iris_f16_t> { static const bool value = true; };
template <typename T> union iris_rmsnorm_line {
  uint2 u;
  T e[4];
};
/* fmaf chain in element order: the same instructions wherever it is inlined */
IRIS_DEVICE_INLINE float iris_rmsnorm_line_ss(const float (&r)[4]) { return fmaf(r[3], r[3], fmaf(r[2], r[2], fmaf(r[1], r[1], r[0] * r[0]))); }
/* The pairwise tree over the 32 lanes of a chunk (lane l's value at leaf l): xor masks
 * in increasing order pair neighbours first. Every lane of the warp calls it; each gets
 * the sum of its 32-lane group (float addition commutes, so both lanes of a pair agree). */
IRIS_DEVICE_INLINE float iris_rmsnorm_chunk_sum(float v) {
#pragma unroll
  for (int m = 1; m < IRIS_RMSNORM_CHUNK; m *= 2) v = v + iris_detail_shfl_xor(v, m);
  return v;
}
IRIS_DEVICE_INLINE float iris_rmsnorm_chunk_max(float v) {
#pragma unroll
  for (int m = 1; m < IRIS_RMSNORM_CHUNK; m *= 2) v = fmaxf(v, iris_detail_shfl_xor(v, m));
  return v;
}
/* One 32-lane group: the pairwise tree over v[0..n) (n a power of two <= 8 * 32): lane l
 * sums its n/32 consecutive leaves in a tree (or takes leaf l, 0 past n), then the lanes'
 * tree. max_op: the maximum instead (order does not matter for it). */
IRIS_DEVICE_INLINE float iris_rmsnorm_tree(const float *v, int n, int lane, bool max_op) {
  if (n <= IRIS_RMSNORM_CHUNK) { /* a leaf per lane: the lanes' tree alone (a CTA's own chunks at decode sizes) */
    const float a = lane < n ? v[lane] : 0.f;
    return max_op ? iris_rmsnorm_chunk_max(a) : iris_rmsnorm_chunk_sum(a);
  }
  const int m = n / IRIS_RMSNORM_CHUNK;
  float a[IRIS_RMSNORM_MAX_CHUNKS / IRIS_RMSNORM_CHUNK > 1 ? IRIS_RMSNORM_MAX_CHUNKS / IRIS_RMSNORM_CHUNK : 1];
  const int cap = (int)(sizeof a / sizeof a[0]);
#pragma unroll
  for (int j = 0; j < cap; j++) a[j] = j < m && lane * m + j < n ? v[lane * m + j] : 0.f;
#pragma unroll
  for (int w = 1; w < cap; w *= 2)
#pragma unroll
    for (int j = 0; j + w < cap; j += 2 * w)
      if (w < m) a[j] = max_op ? fmaxf(a[j], a[j + w]) : a[j] + a[j + w];
  return max_op ? iris_rmsnorm_chunk_max(a[0]) : iris_rmsnorm_chunk_sum(a[0]);
}
static_assert(IRIS_RMSNORM_MAX_CHUNKS <= 8 * IRIS_RMSNORM_CHUNK, "iris_rmsnorm_tree: at most 8 leaves per lane");

/* Four floats to four e4m3 codes (byte k = value k), round to nearest even, saturated. */
IRIS_DEVICE_INLINE unsigned iris_rmsnorm_fp8x4(const float (&q)[4]) {
#if IRIS_DEVICE_FP8_CVT
  return iris_detail_e4m3x4(q[0], q[1], q[2], q[3]);
#else
  return (unsigned)iris_float_to_fp8_e4m3(q[0]) | ((unsigned)iris_float_to_fp8_e4m3(q[1]) << 8) | ((unsigned)iris_float_to_fp8_e4m3(q[2]) << 16) |
         ((unsigned)iris_float_to_fp8_e4m3(q[3]) << 24);
#endif
}
/* Line `line` (4 codes) of an fp8 row of n bytes. */
IRIS_DEVICE_INLINE void iris_rmsnorm_write_fp8(unsigned char *row, long long line, long long n, unsigned codes) {
  unsigned char *p = row + line * 4;
  if (line * 4 + 4 <= n && ((uintptr_t)p & 3) == 0) { *(unsigned *)p = codes; return; }
  for (int k = 0; k < 4 && line * 4 + k < n; k++) p[k] = (unsigned char)(codes >> (8 * k));
}
/* The per-token scale from the row's amax (IRIS_QUANT_FP8_PER_TOKEN). */
IRIS_DEVICE_INLINE float iris_rmsnorm_token_scale(float amax) {
  const float s = amax / 448.f, floor_ = 1.f / (448.f * 512.f);
  return s > floor_ ? s : floor_;
}

/* Lines per thread whose residual and weight the fused kernel loads before the line's
 * wait and keeps in shared memory for the norm (uint2 [IRIS_RMSNORM_HELD][threads] each:
 * 32 KB at 512 threads; 2 lines above 512 threads, within the 48 KB of static shared
 * memory), so the norm loop reads no global memory for them. With one CTA per row on the
 * one-GPU proxy (tools/proxy_fused.cu): 13.1 -> 12.5 us at 8192 (4 lines a thread), 23.3
 * -> 22.3 at 16384. Static, for every block size: sized to the block (dynamic shared
 * memory) the fused op at 1 token x 8192 read 5.09-5.15 us against 4.99-5.02 on the
 * proxy. */
#define IRIS_RMSNORM_HELD (IRIS_RMSNORM_MAX_GROUPS <= 16 ? 4 : 2)
static_assert(2 * IRIS_RMSNORM_HELD * IRIS_RMSNORM_MAX_THREADS * 8 + IRIS_RMSNORM_MAX_CHUNKS * 4 + 256 <= 48 * 1024,
              "the held lines and the chunk sums fit the 48 KB of static shared memory");
/* What the norm loop of iris_rmsnorm_finish takes from shared memory instead of global:
 * the residual (after the add) and the weight of the thread's first n lines. n = 0:
 * nothing held (the norm kernel). */
struct iris_rmsnorm_pre {
  int n;
  const uint2 (*r)[IRIS_RMSNORM_MAX_THREADS];
  const uint2 (*w)[IRIS_RMSNORM_MAX_THREADS];
};
IRIS_DEVICE_INLINE iris_rmsnorm_pre iris_rmsnorm_no_pre() {
  iris_rmsnorm_pre p;
  p.n = 0;
  p.r = p.w = NULL;
  return p;
}

/* The cross-CTA step for a row split over several CTAs, called by every 32-lane group
 * with the CTA's value in every lane: `solo` (one CTA per row) keeps it. */
struct iris_rmsnorm_solo {
  IRIS_DEVICE_INLINE bool combine(float &, int, bool) const { return true; }
};

/* The second half of a row, once pass 1 has written this CTA's residual lines and left
 * their chunk sums in cs[0 .. sh.per_cta), and a barrier made them visible to the block:
 * whole block. Every 32-lane group computes the block tree itself (the same bits in each)
 * and combines it with the row's other CTAs (X), with no further barrier; then inv, the
 * out (and fp8) lines of this CTA. (Against one group computing and broadcasting through
 * shared memory between barriers: 0.2 us less at 1 token x 8192 on one H200, ranks as
 * threads, tools/proxy_fused.cu.) False if X failed (a wait ran out): then this group
 * writes nothing more. */
template <typename T, typename X>
IRIS_DEVICE_INLINE bool iris_rmsnorm_finish(const iris_rmsnorm_shape_t &sh, int k, T *res, const T *weight, T *out, int quant, unsigned char *q8, float *scale,
                                            float eps, const float *cs, const X &x, const iris_rmsnorm_pre pre) {
  __shared__ float s_amax[1024 / IRIS_RMSNORM_CHUNK]; /* per group: the building blocks take 1024 threads, past the kernels' IRIS_RMSNORM_MAX_GROUPS */
  const int tid = (int)threadIdx.x, lane = tid % IRIS_RMSNORM_CHUNK, g = tid / IRIS_RMSNORM_CHUNK, G = (int)blockDim.x / IRIS_RMSNORM_CHUNK;
  const int iters = (sh.per_cta + G - 1) / G;
  float ss = iris_rmsnorm_tree(cs, sh.per_cta, lane, false);
  const bool ok = x.combine(ss, 0, false);
  if (!ok && quant != IRIS_QUANT_FP8_PER_TOKEN) return false;
  const float inv = 1.f / sqrtf(ss / (float)sh.hidden + eps);
  float inv_scale = 0.f, amax = 0.f;
  if (quant == IRIS_QUANT_FP8_PER_TENSOR) inv_scale = 1.f / *scale;
  for (int it = 0; ok && it < iters; it++) {
    const int j = it * G + g;
    const long long line = ((long long)k * sh.per_cta + j) * IRIS_RMSNORM_CHUNK + lane;
    if (j >= sh.per_cta || line >= sh.lines) continue;
    iris_rmsnorm_line<T> r, w, y;
    r.u = it < pre.n ? pre.r[it][tid] : iris_coll_read8(res, (size_t)line, (size_t)sh.hidden);
    w.u = it < pre.n ? pre.w[it][tid] : iris_coll_read8(weight, (size_t)line, (size_t)sh.hidden);
    float f[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
      y.e[e] = iris_coll_down<T>((iris_coll_up(r.e[e]) * inv) * iris_coll_up(w.e[e]));
      f[e] = iris_coll_up(y.e[e]);
      if (line * 4 + e < sh.hidden) amax = fmaxf(amax, fabsf(f[e]));
    }
    iris_coll_write8(out, (size_t)line, (size_t)sh.hidden, y.u);
    if (quant == IRIS_QUANT_FP8_PER_TENSOR) {
#pragma unroll
      for (int e = 0; e < 4; e++) f[e] *= inv_scale;
      iris_rmsnorm_write_fp8(q8, line, sh.hidden, iris_rmsnorm_fp8x4(f));
    }
  }
  if (quant != IRIS_QUANT_FP8_PER_TOKEN) return true;
  /* per token: the row's amax (order does not matter), its scale, then the codes; a
   * group whose combine failed meets the barrier all the same */
  amax = iris_rmsnorm_chunk_max(amax);
  if (lane == 0) s_amax[g] = amax;
  if (__syncthreads_or(!ok)) return false;
  amax = iris_rmsnorm_chunk_max(lane < G ? s_amax[lane] : 0.f);
  if (!x.combine(amax, 1, true)) return false;
  const float sc = iris_rmsnorm_token_scale(amax);
  inv_scale = 1.f / sc;
  if (k == 0 && tid == 0) *scale = sc;
  for (int it = 0; it < iters; it++) {
    const int j = it * G + g;
    const long long line = ((long long)k * sh.per_cta + j) * IRIS_RMSNORM_CHUNK + lane;
    if (j >= sh.per_cta || line >= sh.lines) continue;
    iris_rmsnorm_line<T> y;
    y.u = iris_coll_read8(out, (size_t)line, (size_t)sh.hidden); /* this thread's own store */
    float f[4];
#pragma unroll
    for (int e = 0; e < 4; e++) f[e] = iris_coll_up(y.e[e]) * inv_scale;
    iris_rmsnorm_write_fp8(q8, line, sh.hidden, iris_rmsnorm_fp8x4(f));
  }
  return true;
}

/* A thread's vectors of iris_rmsnorm_row16: the NS sources' (in rank order), the
 * residual's and the weight's. */
template <int NS> struct iris_rmsnorm_row16_in {
  uint4 s[IRIS_RMSNORM_VECS][NS > 0 ? NS : 1];
  uint4 r[IRIS_RMSNORM_VECS], w[IRIS_RMSNORM_VECS];
};
/* Loads into in, all in flight together: source `only` (-1: every source but `skip`, -1:
 * none skipped), and the residual and weight when rw. */
template <typename T, int NS>
IRIS_DEVICE_INLINE void iris_rmsnorm_row16_load(iris_rmsnorm_row16_in<NS> &in, const T *const *src, int only, int skip, bool rw, const T *residual, const T *weight,
                                                long long hidden) {
  const int tid = (int)threadIdx.x, nt = (int)blockDim.x, nv = (int)(hidden / 8);
#pragma unroll
  for (int i = 0; i < IRIS_RMSNORM_VECS; i++) {
    const int v = tid + i * nt;
    if (v < nv) {
#pragma unroll
      for (int k = 0; k < NS; k++)
        if (only < 0 ? k != skip : k == only) in.s[i][k] = ((const uint4 *)src[k])[v];
      if (rw) {
        in.r[i] = ((const uint4 *)residual)[v];
        in.w[i] = ((const uint4 *)weight)[v];
      }
    }
  }
}
template <typename T, int NS>
IRIS_DEVICE_INLINE void iris_rmsnorm_row16_norm(const iris_rmsnorm_row16_in<NS> &in, T *residual, T *out, long long hidden, float eps, int quant,
                                                unsigned char *out_fp8, float *scale);
/* One row by one block (iris_add_rmsnorm_block's contract) where every access can be 16
 * bytes: hidden a multiple of 8, src[], residual, weight, out 16-byte aligned, out_fp8 8,
 * hidden / 8 <= IRIS_RMSNORM_VECS x blockDim.x. The row's sum is src[0] (NS = 1) or, for
 * NS ranks' rows in rank order, down(their fp32 sum in rank order): the all-reduce's bits.
 * A thread loads all of its vectors of the sources, residual and weight at once, keeps
 * residual and weight in registers through the sum of squares, and writes out from them:
 * one round trip to memory where the line by line loop makes one per line and pass (on 2
 * H200s, the separate path at 1 token x 8192: 11.3 -> 8.5 us). The same bits: vector v
 * holds lines 2v and 2v+1, so a thread's own pair is the chunk tree's first level (a + b
 * = b + a) and xor masks 1-8 over 16 lanes are its levels 2-5; the chunks' tree is
 * iris_rmsnorm_tree's. */
template <typename T, int NS>
IRIS_DEVICE_INLINE void iris_rmsnorm_row16(const T *const *src, T *residual, const T *weight, T *out, long long hidden, float eps, int quant, unsigned char *out_fp8,
                                           float *scale) {
  iris_rmsnorm_row16_in<NS> in;
  iris_rmsnorm_row16_load<T, NS>(in, src, -1, -1, true, residual, weight, hidden); /* every load in flight before the first use */
  iris_rmsnorm_row16_norm<T, NS>(in, residual, out, hidden, eps, quant, out_fp8, scale);
}
/* The sum, the residual and the norm of a row whose vectors are in `in`
 * (iris_rmsnorm_row16's second half). */
template <typename T, int NS>
IRIS_DEVICE_INLINE void iris_rmsnorm_row16_norm(const iris_rmsnorm_row16_in<NS> &in, T *residual, T *out, long long hidden, float eps, int quant,
                                                unsigned char *out_fp8, float *scale) {
  __shared__ float cs[IRIS_RMSNORM_MAX_CHUNKS];
  __shared__ float s_amax[32];
  union V {
    uint4 u;
    T e[8];
  };
  const iris_rmsnorm_shape_t sh = iris_rmsnorm_shape(hidden, 1);
  const int tid = (int)threadIdx.x, nt = (int)blockDim.x, nv = (int)(hidden / 8), lane = tid % IRIS_RMSNORM_CHUNK;
  V r[IRIS_RMSNORM_VECS], w[IRIS_RMSNORM_VECS];
#pragma unroll
  for (int i = 0; i < IRIS_RMSNORM_VECS; i++) {
    r[i].u = in.r[i];
    w[i].u = in.w[i];
  }
  __syncthreads(); /* cs is free (a previous row's tree is over in every thread) */
  for (int j = sh.chunks + tid; j < sh.pow2; j += nt) cs[j] = 0.f; /* the padding chunks */
#pragma unroll
  for (int i = 0; i < IRIS_RMSNORM_VECS; i++) {
    const int v = tid + i * nt;
    if (i * nt >= nv) break; /* uniform: no thread has a vector in this slot or later */
    float q = 0.f;
    if (v < nv) {
      V sx;
      float f[8];
      sx.u = in.s[i][0];
      if (NS > 1) {
        float acc[8];
#pragma unroll
        for (int e = 0; e < 8; e++) acc[e] = iris_coll_up(sx.e[e]);
#pragma unroll
        for (int k = 1; k < NS; k++) {
          V a;
          a.u = in.s[i][k];
#pragma unroll
          for (int e = 0; e < 8; e++) acc[e] = acc[e] + iris_coll_up(a.e[e]);
        }
#pragma unroll
        for (int e = 0; e < 8; e++) sx.e[e] = iris_coll_down<T>(acc[e]);
      }
#pragma unroll
      for (int e = 0; e < 8; e++) {
        r[i].e[e] = iris_coll_down<T>(iris_coll_up(sx.e[e]) + iris_coll_up(r[i].e[e]));
        f[e] = iris_coll_up(r[i].e[e]);
      }
      ((uint4 *)residual)[v] = r[i].u;
      const float lo[4] = {f[0], f[1], f[2], f[3]}, hi[4] = {f[4], f[5], f[6], f[7]};
      q = iris_rmsnorm_line_ss(lo) + iris_rmsnorm_line_ss(hi);
    }
#pragma unroll
    for (int m = 1; m < IRIS_RMSNORM_CHUNK / 2; m *= 2) q = q + iris_detail_shfl_xor(q, m);
    if ((tid & (IRIS_RMSNORM_CHUNK / 2 - 1)) == 0 && v / (IRIS_RMSNORM_CHUNK / 2) < sh.chunks) cs[v / (IRIS_RMSNORM_CHUNK / 2)] = q;
  }
  __syncthreads();
  const float ss = iris_rmsnorm_tree(cs, sh.pow2, lane, false);
  const float inv = 1.f / sqrtf(ss / (float)hidden + eps);
  const float inv_scale = quant == IRIS_QUANT_FP8_PER_TENSOR ? 1.f / *scale : 0.f;
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < IRIS_RMSNORM_VECS; i++) {
    const int v = tid + i * nt;
    if (v >= nv) break;
    float f[8];
#pragma unroll
    for (int e = 0; e < 8; e++) {
      r[i].e[e] = iris_coll_down<T>((iris_coll_up(r[i].e[e]) * inv) * iris_coll_up(w[i].e[e])); /* r now holds out */
      f[e] = iris_coll_up(r[i].e[e]);
      amax = fmaxf(amax, fabsf(f[e]));
    }
    ((uint4 *)out)[v] = r[i].u;
    if (quant == IRIS_QUANT_FP8_PER_TENSOR) {
      const float a[4] = {f[0] * inv_scale, f[1] * inv_scale, f[2] * inv_scale, f[3] * inv_scale};
      const float b[4] = {f[4] * inv_scale, f[5] * inv_scale, f[6] * inv_scale, f[7] * inv_scale};
      ((uint2 *)out_fp8)[v] = make_uint2(iris_rmsnorm_fp8x4(a), iris_rmsnorm_fp8x4(b));
    }
  }
  if (quant != IRIS_QUANT_FP8_PER_TOKEN) return;
  /* per token: the row's amax (order does not matter), its scale, the codes from r */
  amax = iris_rmsnorm_chunk_max(amax);
  if (lane == 0) s_amax[tid / IRIS_RMSNORM_CHUNK] = amax;
  __syncthreads();
  amax = iris_rmsnorm_chunk_max(lane < nt / IRIS_RMSNORM_CHUNK ? s_amax[lane] : 0.f);
  const float sc = iris_rmsnorm_token_scale(amax), is = 1.f / sc;
  if (tid == 0) *scale = sc;
#pragma unroll
  for (int i = 0; i < IRIS_RMSNORM_VECS; i++) {
    const int v = tid + i * nt;
    if (v >= nv) break;
    float a[4], b[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
      a[e] = iris_coll_up(r[i].e[e]) * is;
      b[e] = iris_coll_up(r[i].e[e + 4]) * is;
    }
    ((uint2 *)out_fp8)[v] = make_uint2(iris_rmsnorm_fp8x4(a), iris_rmsnorm_fp8x4(b));
  }
}

/* iris_add_rmsnorm_block: declared, with its contract, in iris_collectives.h */
template <typename T>
IRIS_DEVICE_INLINE void iris_add_rmsnorm_block(const T *sum, T *residual, const T *weight, T *out, long long hidden, float eps, iris_quant_t quant,
                                               unsigned char *out_fp8, float *scale) {
  static_assert(iris_rmsnorm_type_ok<T>::value, "iris_add_rmsnorm_block: T is iris_bf16_t or iris_f16_t");
  if (hidden % 8 == 0 && hidden / 8 <= (long long)IRIS_RMSNORM_VECS * blockDim.x &&
      ((((uintptr_t)sum | (uintptr_t)residual | (uintptr_t)weight | (uintptr_t)out) & 15) | ((uintptr_t)out_fp8 & 7)) == 0) {
    iris_rmsnorm_row16<T, 1>(&sum, residual, weight, out, hidden, eps, (int)quant, out_fp8, scale);
    return;
  }
  __shared__ float cs[IRIS_RMSNORM_MAX_CHUNKS];
  const iris_rmsnorm_shape_t sh = iris_rmsnorm_shape(hidden, 1);
  const int tid = (int)threadIdx.x, lane = tid % IRIS_RMSNORM_CHUNK, g = tid / IRIS_RMSNORM_CHUNK, G = (int)blockDim.x / IRIS_RMSNORM_CHUNK;
  const int iters = (sh.per_cta + G - 1) / G;
  __syncthreads(); /* cs is free (a previous row's finish is over in every thread) */
  for (int it = 0; it < iters; it++) {
    const int j = it * G + g;
    const long long line = (long long)j * IRIS_RMSNORM_CHUNK + lane;
    float q = 0.f;
    if (j < sh.per_cta && line < sh.lines) {
      iris_rmsnorm_line<T> s, r;
      float f[4];
      s.u = iris_coll_read8(sum, (size_t)line, (size_t)hidden);
      r.u = iris_coll_read8(residual, (size_t)line, (size_t)hidden);
#pragma unroll
      for (int e = 0; e < 4; e++) {
        r.e[e] = iris_coll_down<T>(iris_coll_up(s.e[e]) + iris_coll_up(r.e[e]));
        f[e] = line * 4 + e < hidden ? iris_coll_up(r.e[e]) : 0.f;
      }
      iris_coll_write8(residual, (size_t)line, (size_t)hidden, r.u);
      q = iris_rmsnorm_line_ss(f);
    }
    q = iris_rmsnorm_chunk_sum(q);
    if (lane == 0 && j < sh.per_cta) cs[j] = q;
  }
  __syncthreads();
  iris_rmsnorm_finish<T>(sh, 0, residual, weight, out, (int)quant, out_fp8, scale, eps, cs, iris_rmsnorm_solo(), iris_rmsnorm_no_pre());
}

/* iris_tile_all_reduce_rmsnorm: declared, with its contract, in iris_collectives.h */
template <typename T>
IRIS_DEVICE_INLINE bool iris_tile_all_reduce_rmsnorm(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t x, T *residual,
                                                     const T *weight, T *out, int rows_per_tile, float eps, iris_quant_t quant, unsigned char *out_fp8,
                                                     float *scale) {
  const long long hidden = x.cols, r0 = (long long)tile * rows_per_tile;
  iris_view2d_t dst = iris_view2d(out, x.rows, hidden, hidden, (int)sizeof(T));
  if (!iris_tile_all_reduce<T, IRIS_SUM>(ctx, f, tile, x, dst, rows_per_tile, (int)hidden)) return false;
  for (long long r = r0; r < r0 + rows_per_tile && r < x.rows; r++)
    iris_add_rmsnorm_block<T>(out + r * hidden, residual + r * hidden, weight, out + r * hidden, hidden, eps, quant, out_fp8 ? out_fp8 + r * hidden : NULL,
                              quant == IRIS_QUANT_FP8_PER_TOKEN ? scale + r : scale);
  return true;
}

/* ---- the fused kernels: one launch, no barrier (the LL protocol of iris_coll_ll_kernel).
 * Row t is split over sh.cpr CTAs (blockIdx.x = t * cpr + k); CTA k owns chunks
 * [k * per_cta, (k+1) * per_cta) of the row, and every thread the same lines in every
 * phase, so out may be x.
 *   one-shot (TWO = false): every rank pushes its lines of row t into every peer's one-shot
 *     LL slots (call c's parity, source me, line t * lines + l) and sums the row's lines
 *     of every rank in rank order.
 *   two-shot (TWO = true): row t belongs to rank t % W (its q = t / W-th row). Every rank
 *     pushes its lines of row t into the owner's two-shot LL phase-0 slots (source me, line
 *     q * lines + l); the owner sums them in rank order (with its own) and pushes the sum
 *     (already rounded to T) into every peer's phase-1 slots (source owner, the same line);
 *     the others take it from there. Half the bytes per rank of the one-shot at 4 ranks,
 *     one hop more; the slots hold W times the rows.
 * Then each CTA adds the residual and the row's CTAs exchange their sums of squares (and
 * amax) through this rank's own one-shot row of the call's parity (source me: peers never
 * write it, the one-shot kernels never read it), as LL lines with the call's epoch. On one
 * H200 with the ranks as threads (tools/proxy_fused.cu, 1 token x 8192) the exchange is
 * about 1.1 us of the op's 2.1 over the bare all-reduce. The row's CTAs as one thread
 * block cluster exchanging through distributed shared memory: 4.6 against 4.8 us at 2
 * ranks, 5.6 against 5.6 at 4; not used, as its grids of 16-CTA clusters at 4 ranks x 8
 * tokens never all started on that GPU (every rank waited out its bound). A
 * mismatched call writes nothing: the peers' lines carry the call's tag
 * (iris_coll_ll_tag), so a line of a peer whose call differs never arrives, and a phase-1
 * line is pushed only by an owner that matched every peer; the waits read the headers
 * only when they last (iris_coll_ll_wait_n), to name the mismatch. Two parities suffice as
 * for the LL kernels: no rank ends call c before every rank pushed what it reads in
 * call c. */
struct iris_rmsnorm_xchg {
  const iris_coll_dev_t *d;
  uint4 *own; /* this rank's own row of the call's parity */
  long long slot0; /* this row's first exchange slot: t * cpr (amax: + tokens * cpr) */
  long long amax_off;
  int cpr, k;
  unsigned epoch, c;
#if defined(IRIS_TRACE)
  unsigned long long *mark; /* thread 0: when the combine of the sums of squares ended (IRIS_TRACE_K_RMS's t2) */
#endif
  /* Every 32-lane group, v the CTA's value in every lane: v = the tree sum (or max) of the
   * row's CTAs' values, in CTA order. Thread 0 publishes the CTA's value; in every group,
   * lane l (< cpr, not k) polls CTA l's slot, and the lanes' shuffle tree combines them:
   * no barrier and no shared memory, each group on its own. */
  IRIS_DEVICE_INLINE bool combine(float &v, int which, bool max_op) const {
    const int lane = (int)threadIdx.x % IRIS_RMSNORM_CHUNK;
    if (cpr == 1) return true;
    uint4 *slots = own + slot0 + (which ? amax_off : 0);
    if (threadIdx.x == 0) iris_coll_ll_store(slots + k, make_uint2(__float_as_uint(v), 0u), epoch);
    float mine = 0.f;
    int ok = 1;
    if (lane == k) mine = v;
    else if (lane < cpr) {
      iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
      uint2 got;
      for (;;) {
        if (iris_coll_ll_ready(iris_coll_ll_peek(slots + lane), epoch, &got)) { mine = __uint_as_float(got.x); break; }
        if (iris_detail_wait_expired(d->ctx, spin, d->ctx.rank, IRIS_COLL_SITE(IRIS_COLL_KIND_RMSNORM, IRIS_SITE_LL), c)) { ok = 0; break; }
      }
    }
    if (!iris_detail_warp_all(ok != 0)) return false; /* a warp of two groups (AMD) gives up together */
    v = max_op ? iris_rmsnorm_chunk_max(mine) : iris_rmsnorm_chunk_sum(mine);
#if defined(IRIS_TRACE)
    if (threadIdx.x == 0 && which == 0 && mark) *mark = iris_detail_time_ns();
#endif
    return true;
  }
};
static_assert(IRIS_MAX_RANKS <= 64, "the fused kernels' blocks have at least 64 threads, one per rank for the headers");

/* One line of the fused kernels' sums: every rank's line (this rank's: own), in rank order,
 * into acc, the peers' from their LL lines at line + r * stride, in batches of NG peers
 * (iris_coll_ll_batch). Returns what the waits did (iris_coll_ll_wait_n). */
template <int NG, typename T>
IRIS_DEVICE_INLINE int iris_rmsnorm_sum_ranks(const iris_coll_dev_t &d, const uint4 *line, size_t stride, iris_coll_mask_t peers, unsigned epoch, unsigned tag, unsigned c,
                                              unsigned sig32, iris_coll_mask_t all, iris_coll_mask_t &seen, uint2 own, float (&acc)[4]) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
  iris_rmsnorm_line<T> xv;
  uint2 in[NG];
  int ok = 1;
  for (int r0 = 0; ok > 0 && r0 < W; r0 += NG) {
    if ((ok = iris_coll_ll_wait_n<NG>(d, line, stride, peers, r0, epoch, tag, in, c, sig32, all, seen, IRIS_COLL_KIND_RMSNORM)) <= 0) break;
#pragma unroll
    for (int j = 0; j < NG; j++) {
      const int r = r0 + j;
      if (r >= W) break;
      xv.u = r == me ? own : in[j];
#pragma unroll
      for (int e = 0; e < 4; e++) acc[e] = r == 0 ? iris_coll_up(xv.e[e]) : acc[e] + iris_coll_up(xv.e[e]);
    }
  }
  return ok;
}

template <typename T, bool TWO>
__global__ void __launch_bounds__(IRIS_RMSNORM_MAX_THREADS, 1) iris_rmsnorm_fused_kernel(iris_coll_dev_t d, const T *x, T *residual, const T *weight, T *out, long long tokens,
                                                                 iris_rmsnorm_shape_t sh, float eps, int quant, unsigned char *q8, float *scale,
                                                                 unsigned long long sig) {
  __shared__ float cs[IRIS_RMSNORM_MAX_CHUNKS];
  __shared__ uint2 s_r[IRIS_RMSNORM_HELD][IRIS_RMSNORM_MAX_THREADS], s_w[IRIS_RMSNORM_HELD][IRIS_RMSNORM_MAX_THREADS];
  const int W = d.ctx.world_size, me = d.ctx.rank, tid = (int)threadIdx.x;
  const int lane = tid % IRIS_RMSNORM_CHUNK, g = tid / IRIS_RMSNORM_CHUNK, G = (int)blockDim.x / IRIS_RMSNORM_CHUNK;
  const long long t = blockIdx.x / sh.cpr;
  const int k = (int)(blockIdx.x % sh.cpr), iters = (sh.per_cta + G - 1) / G;
  const int owner = (int)(t % W); /* two-shot: the rank that sums row t */
  const T *xr = x + t * sh.hidden;
  T *rr = residual + t * sh.hidden;
  /* the call number before the PDL wait (iris_coll_call_enter), so that its atomic
   * overlaps the end of the kernel before; nothing is read before the wait */
  const unsigned c = iris_coll_call_enter(d), epoch = iris_coll_ll_epoch(c), sig32 = iris_coll_sig32(sig);
  iris_detail_pdl_wait();
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_RMS);
  /* this thread's first line of x, loaded before the signature's tag is formed; its
   * residual and weight lines after the pushes, in flight while the peers' lines are
   * polled (loaded before the pushes they delayed them: 0.1-0.3 us more at 1-32 tokens x
   * 8192 on 2 H200s) */
  uint2 x0 = make_uint2(0u, 0u), res0 = x0, wt0 = x0;
  const bool first = g < sh.per_cta && ((long long)k * sh.per_cta + g) * IRIS_RMSNORM_CHUNK + lane < sh.lines;
  const size_t line0 = (size_t)(((long long)k * sh.per_cta + g) * IRIS_RMSNORM_CHUNK + lane);
  if (first) x0 = iris_coll_read8(xr, line0, (size_t)sh.hidden);
  const unsigned tag = iris_coll_ll_tag(epoch, sig32); /* the peers' lines carry the signature, whatever IRIS_COLL_CHECK says */
  iris_detail_pdl_trigger();
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me), all = d.check ? peers : 0ULL;
  uint4 *const mine = IRIS_COLL_LL_ROWS(d, c, W);                          /* one-shot [src][line] of this parity */
  uint4 *const ph0 = IRIS_COLL_LL2_PHASE0(d, c, W), *const ph1 = IRIS_COLL_LL2_PHASE1(ph0, d, W); /* two-shot */
  const long long base = TWO ? (t / W) * sh.lines : t * sh.lines;         /* the row's first slot line */
  uint4 *const sums = TWO ? ph0 : mine;
  const size_t stride = TWO ? d.ll2_lines : d.ll_lines;
  iris_coll_mask_t seen = 0;
  int ok = 1;
  iris_coll_announce(d, c, sig32);
  /* push: this CTA's lines of row t into every peer's slots [me] (two-shot: the owner's).
   * (Loading a thread's lines all before their stores measured slower on the proxy.) */
  for (int it = 0; it < iters; it++) {
    const int j = it * G + g;
    const long long line = ((long long)k * sh.per_cta + j) * IRIS_RMSNORM_CHUNK + lane;
    if (j >= sh.per_cta || line >= sh.lines) continue;
    const uint2 v = it == 0 ? x0 : iris_coll_read8(xr, (size_t)line, (size_t)sh.hidden);
    if (TWO) {
      if (owner != me) iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL2_SLOT(ph0, d, me, base + line), owner), v, epoch, tag);
    } else {
      for (int p = 1; p < W; p++) iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL_SLOT(mine, d, me, base + line), (me + p) % W), v, epoch, tag);
    }
  }
  if (first) {
    res0 = iris_coll_read8(rr, line0, (size_t)sh.hidden);
    wt0 = iris_coll_read8(weight, line0, (size_t)sh.hidden);
  }
  if (tid == 0 && (long long)k * sh.per_cta * IRIS_RMSNORM_CHUNK >= sh.lines) { /* a CTA of padding only: it has no line to see a mismatch by, so it
                                                                                   matches the headers (else it would wait for its row's CTAs, gone) */
    uint2 none;
    ok = iris_coll_ll_wait(d, NULL, epoch, epoch, &none, me, c, sig32, all, seen, IRIS_COLL_KIND_RMSNORM);
  }
  /* the row's sum (in rank order), the residual, the chunk sums of squares */
  for (int it = 0; it < iters; it++) {
    const int j = it * G + g;
    const long long line = ((long long)k * sh.per_cta + j) * IRIS_RMSNORM_CHUNK + lane;
    float q = 0.f;
    if (ok > 0 && j < sh.per_cta && line < sh.lines) {
      iris_rmsnorm_line<T> sv, rv;
      float acc[4], f[4];
      /* the residual and weight lines are in flight during the wait */
      rv.u = it == 0 ? res0 : iris_coll_read8(rr, (size_t)line, (size_t)sh.hidden);
      uint2 wl = wt0;
      if (it > 0 && it < IRIS_RMSNORM_HELD) wl = iris_coll_read8(weight, (size_t)line, (size_t)sh.hidden);
      if (!TWO || owner == me) {
        const uint2 own = it == 0 ? x0 : iris_coll_read8(xr, (size_t)line, (size_t)sh.hidden);
        const int nb = iris_coll_ll_batch(W); /* the rank order's sums, in batches of nb peers */
        if (nb == 2) ok = iris_rmsnorm_sum_ranks<2, T>(d, sums + base + line, stride, peers, epoch, tag, c, sig32, all, seen, own, acc);
        else if (nb == 4) ok = iris_rmsnorm_sum_ranks<4, T>(d, sums + base + line, stride, peers, epoch, tag, c, sig32, all, seen, own, acc);
        else ok = iris_rmsnorm_sum_ranks<IRIS_COLL_LL_GROUP, T>(d, sums + base + line, stride, peers, epoch, tag, c, sig32, all, seen, own, acc);
        if (ok > 0) {
#pragma unroll
          for (int e = 0; e < 4; e++) sv.e[e] = iris_coll_down<T>(acc[e]); /* the all-reduce's bits */
          if (TWO)
            for (int p = 1; p < W; p++) iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL2_SLOT(ph1, d, me, base + line), (me + p) % W), sv.u, epoch, tag);
        }
      } else {
        ok = iris_coll_ll_wait(d, IRIS_COLL_LL2_SLOT(ph1, d, owner, base + line), epoch, tag, &sv.u, owner, c, sig32, all, seen, IRIS_COLL_KIND_RMSNORM);
      }
      if (ok > 0) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          rv.e[e] = iris_coll_down<T>(iris_coll_up(sv.e[e]) + iris_coll_up(rv.e[e]));
          f[e] = line * 4 + e < sh.hidden ? iris_coll_up(rv.e[e]) : 0.f;
        }
        iris_coll_write8(rr, (size_t)line, (size_t)sh.hidden, rv.u);
        if (it < IRIS_RMSNORM_HELD) { /* the new residual and the weight, for the norm */
          s_r[it][tid] = rv.u;
          s_w[it][tid] = wl;
        }
        q = iris_rmsnorm_line_ss(f);
      }
    }
    q = iris_rmsnorm_chunk_sum(q);
    if (lane == 0 && j < sh.per_cta) cs[j] = q;
  }
  if (__syncthreads_or(ok <= 0)) return; /* a mismatch (seen by every CTA: by a tagged line that never arrives, or by the headers) or a wait that ran out */
  IRIS_TRACE_MARK(1);
  iris_rmsnorm_xchg xg;
  xg.d = &d;
  xg.own = IRIS_COLL_LL_SLOT(mine, d, me, 0);
  xg.slot0 = t * sh.cpr;
  xg.amax_off = tokens * sh.cpr;
  xg.cpr = sh.cpr;
  xg.k = k;
  xg.epoch = epoch;
  xg.c = c;
#if defined(IRIS_TRACE)
  xg.mark = threadIdx.x == 0 ? &iris_tr_.t[2] : NULL;
#endif
  iris_rmsnorm_pre pre;
  pre.n = iters < IRIS_RMSNORM_HELD ? iters : IRIS_RMSNORM_HELD;
  pre.r = s_r;
  pre.w = s_w;
  iris_rmsnorm_finish<T>(sh, k, rr, weight, out + t * sh.hidden, quant, q8 ? q8 + t * sh.hidden : NULL, quant == IRIS_QUANT_FP8_PER_TOKEN ? scale + t : scale, eps,
                         cs, xg, pre);
  IRIS_TRACE_END(c, me);
}

/* ---- the separate path's norm kernel: rows t = blockIdx.x, + gridDim.x, ... of `rows`
 * (one CTA per row unless the host caps the grid), after the all-reduce wrote the sums
 * into `sum`. A call of its own (its header exchange is its start barrier), so a
 * mismatched call (other tokens, hidden, quantisation) writes no user buffer here: the
 * all-reduce before it wrote only `sum` (the staging area when there is one). Every CTA
 * waits for the peers' headers, so where ranks of one process share a GPU the host caps
 * the grid to 1 / W of the SMs: every rank's CTAs resident at once. */
template <typename T>
__global__ void __launch_bounds__(IRIS_RMSNORM_MAX_THREADS, 1) iris_rmsnorm_norm_kernel(iris_coll_dev_t d, const T *sum, T *residual, const T *weight, T *out, long long rows,
                                                                long long hidden, float eps, int quant, unsigned char *q8, float *scale, unsigned long long sig,
                                                                int check) {
  if (check) {
    unsigned call, epoch;
    if (!iris_coll_kernel_start(d, sig, IRIS_COLL_KIND_RMSNORM, call, epoch)) return;
  }
  for (long long t = blockIdx.x; t < rows; t += gridDim.x)
    iris_add_rmsnorm_block<T>(sum + t * hidden, residual + t * hidden, weight, out + t * hidden, hidden, eps, (iris_quant_t)quant, q8 ? q8 + t * hidden : NULL,
                              quant == IRIS_QUANT_FP8_PER_TOKEN ? scale + t : scale);
}

/* ---- the bandwidth kernel (IRIS_RMSNORM_BANDWIDTH): one launch for batches past the LL
 * slots, rows whole through the heap scratch (d.scratch) between per-CTA barriers, no
 * LL lines (their flag words double the bytes: 4 MB of them move at 128 tokens x 8192).
 * Row t belongs, on every rank and in every phase, to CTA t % gridDim.x alone, so a
 * barrier between CTA b of every rank orders all that a phase of CTA b reads. Two forms:
 *   ONE (one hop; the host takes it at 2 ranks, where it moves the bytes of the other):
 *     1. CTA b pushes its rows of x into every peer's scratch (source me);
 *     2. (barrier) every rank sums each of CTA b's rows in rank order (its own x, the
 *        peers' copies), adds the residual and normalises, from registers. A CTA with
 *        one row loads its own x, residual and weight before the barrier, so after it
 *        only the peers' copies (on 2 H200s, 128 tokens x 8192: 15.6 -> 13.8 us).
 *   two hops (row t belongs to rank t / R, R = ceil(tokens / W), a block of rows each):
 *     1. CTA b pushes its rows of x that a peer owns into that peer's scratch;
 *     2. (barrier) the owner sums its rows in rank order and stores the sum, rounded to
 *        T, into every rank's scratch;
 *     3. (barrier) every rank adds the residual and normalises each of CTA b's rows.
 * The sums and the norm are the all-reduce's and iris_add_rmsnorm_block's arithmetic, so
 * the same bits as every path. Peers never touch x, residual or out (any device memory);
 * CTA b writes out only in rows it alone read, so out may be x. The call header comes
 * first (its signature holds the fused op's shape), so a mismatched call writes nothing.
 * Launched with PDL like the latency kernels: the call number before the PDL wait
 * (iris_coll_call_enter), the header after it, the trigger after the header. A later
 * call's pushes wait for its header, which a rank announces only after its PDL wait, so
 * after this kernel has ended on that rank (a kernel launched without PDL starts after
 * it ends). Scratch, rows `pitch` elements apart (hidden rounded up to 16 bytes): ONE
 * [W][tokens] pushed rows; two hops [W][R] pushed rows, then [tokens] sums. */
/* The arguments of one call of the bandwidth kernel, as its phases see them. */
template <typename T> struct iris_rmsnorm_bw_call {
  const T *x;
  T *residual;
  const T *weight;
  T *out;
  long long tokens, hidden, R; /* R: rows of one source's part of the scratch */
  float eps;
  int quant;
  unsigned char *q8;
  float *scale;
  T *in;        /* the scratch: [W][R] pushed rows */
  size_t pitch; /* elements from one scratch row to the next */
};
/* ONE, after the barrier: the sums of CTA b's rows in rank order and their norm. */
template <typename T, int W_STATIC>
IRIS_DEVICE_INLINE void iris_rmsnorm_bw_one_rows(const iris_coll_dev_t &d, const iris_rmsnorm_bw_call<T> &a, bool vec) {
  const int W = W_STATIC > 0 ? W_STATIC : d.ctx.world_size, me = d.ctx.rank, tid = (int)threadIdx.x, nt = (int)blockDim.x;
  for (long long t = blockIdx.x; t < a.tokens; t += gridDim.x) {
    const T *src[W_STATIC > 0 ? W_STATIC : IRIS_MAX_RANKS];
    for (int r = 0; r < W; r++) src[r] = r == me ? a.x + t * a.hidden : a.in + ((size_t)r * (size_t)a.R + (size_t)t) * a.pitch;
    T *const rr = a.residual + t * a.hidden, *const orow = a.out + t * a.hidden;
    unsigned char *const qrow = a.q8 ? a.q8 + t * a.hidden : NULL;
    float *const sc = a.quant == IRIS_QUANT_FP8_PER_TOKEN ? a.scale + t : a.scale;
    if (W_STATIC > 0 && vec && a.hidden / 8 <= (long long)IRIS_RMSNORM_VECS * nt &&
        ((((uintptr_t)rr | (uintptr_t)a.weight | (uintptr_t)orow) & 15) | ((uintptr_t)qrow & 7)) == 0) {
      iris_rmsnorm_row16<T, (W_STATIC > 0 ? W_STATIC : 1)>(src, rr, a.weight, orow, a.hidden, a.eps, a.quant, qrow, sc);
    } else { /* the sum into my own slot of the scratch (no peer writes it in this form), then the norm */
      T *const mine = a.in + ((size_t)me * (size_t)a.R + (size_t)t) * a.pitch;
      T *dst[1] = {mine};
      iris_coll_reduce_range<T, IRIS_SUM, W_STATIC>(d.ctx, src, dst, 1, 0, (size_t)a.hidden, W, vec, (size_t)tid, (size_t)nt, IRIS_SUM);
      __syncthreads();
      iris_add_rmsnorm_block<T>(mine, rr, a.weight, orow, a.hidden, a.eps, (iris_quant_t)a.quant, qrow, sc);
    }
  }
}
/* Two hops, after the first barrier: this rank's rows' sums into every rank's scratch,
 * the second barrier, then the residual and the norm of CTA b's rows. */
template <typename T, int W_STATIC>
IRIS_DEVICE_INLINE void iris_rmsnorm_bw_two_rows(const iris_coll_dev_t &d, const iris_rmsnorm_bw_call<T> &a, bool vec, unsigned c, unsigned &epoch) {
  const int W = W_STATIC > 0 ? W_STATIC : d.ctx.world_size, me = d.ctx.rank, tid = (int)threadIdx.x, nt = (int)blockDim.x;
  T *const sums = a.in + (size_t)W * (size_t)a.R * a.pitch; /* [tokens] */
  for (long long t = blockIdx.x; t < a.tokens; t += gridDim.x) {
    if ((int)(t / a.R) != me) continue;
    const size_t j = (size_t)(t - (long long)me * a.R);
    const T *src[IRIS_MAX_RANKS];
    T *dst[IRIS_MAX_RANKS];
    for (int r = 0; r < W; r++) src[r] = r == me ? a.x + t * a.hidden : a.in + ((size_t)r * (size_t)a.R + j) * a.pitch;
    dst[0] = sums + (size_t)t * a.pitch;
    for (int k = 1; k < W; k++) dst[k] = iris_translate(d.ctx, dst[0], (me + k) % W);
    iris_coll_reduce_range<T, IRIS_SUM, W_STATIC>(d.ctx, src, dst, W, 0, (size_t)a.hidden, W, vec, (size_t)tid, (size_t)nt, IRIS_SUM);
  }
  if (!iris_coll_barrier(d, epoch, c, IRIS_COLL_KIND_RMSNORM)) return;
  for (long long t = blockIdx.x; t < a.tokens; t += gridDim.x)
    iris_add_rmsnorm_block<T>(sums + (size_t)t * a.pitch, a.residual + t * a.hidden, a.weight, a.out + t * a.hidden, a.hidden, a.eps, (iris_quant_t)a.quant,
                              a.q8 ? a.q8 + t * a.hidden : NULL, a.quant == IRIS_QUANT_FP8_PER_TOKEN ? a.scale + t : a.scale);
}
template <typename T, int W_STATIC, bool ONE>
__global__ void __launch_bounds__(IRIS_RMSNORM_MAX_THREADS, 1) iris_rmsnorm_bw_kernel(iris_coll_dev_t d, const T *x, T *residual, const T *weight, T *out,
                                                                                     long long tokens, long long hidden, float eps, int quant, unsigned char *q8,
                                                                                     float *scale, unsigned long long sig) {
  const int W = W_STATIC > 0 ? W_STATIC : d.ctx.world_size, me = d.ctx.rank, tid = (int)threadIdx.x, nt = (int)blockDim.x;
  iris_rmsnorm_bw_call<T> a;
  a.x = x;
  a.residual = residual;
  a.weight = weight;
  a.out = out;
  a.tokens = tokens;
  a.hidden = hidden;
  a.R = ONE ? tokens : (tokens + W - 1) / W;
  a.eps = eps;
  a.quant = quant;
  a.q8 = q8;
  a.scale = scale;
  a.in = (T *)d.scratch;
  a.pitch = iris_rmsnorm_bw_pitch(hidden);
  const unsigned c = iris_coll_call_enter(d);
  iris_detail_pdl_wait(); /* nothing of the kernel before is read or written before it */
  unsigned epoch = iris_coll_sync_base(c);
  if (!iris_coll_call_begin(d, c, iris_coll_sig32(sig), IRIS_COLL_KIND_RMSNORM)) return;
  iris_detail_pdl_trigger();
  /* 1. my copies of CTA b's rows into the peers (ONE: every peer; else the row's owner) */
  for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int owner = (int)(t / a.R);
    for (int k = 1; k < W; k++) {
      const int p = ONE ? (me + k) % W : owner;
      if (p != me)
        iris_copy_bytes(iris_translate(d.ctx, a.in + ((size_t)me * (size_t)a.R + (size_t)(ONE ? t : t - (long long)p * a.R)) * a.pitch, p), x + t * hidden,
                        (size_t)hidden * sizeof(T), tid, nt);
      if (!ONE) break;
    }
  }
  /* ONE with a row per CTA that iris_rmsnorm_row16 takes: the row's own x, residual and
   * weight loaded after the pushes, in flight during the barrier; after it only the
   * peers' copies */
  const bool vec = hidden % 8 == 0 && ((uintptr_t)x & 15) == 0;
  const long long t0 = blockIdx.x;
  T *const rr0 = residual + t0 * hidden, *const orow0 = out + t0 * hidden;
  unsigned char *const qrow0 = q8 ? q8 + t0 * hidden : NULL;
  const bool pre = ONE && W_STATIC > 0 && vec && tokens <= (long long)gridDim.x && hidden / 8 <= (long long)IRIS_RMSNORM_VECS * nt &&
                   ((((uintptr_t)rr0 | (uintptr_t)weight | (uintptr_t)orow0) & 15) | ((uintptr_t)qrow0 & 7)) == 0;
  iris_rmsnorm_row16_in<(W_STATIC > 0 ? W_STATIC : 1)> in;
  const T *src[W_STATIC > 0 ? W_STATIC : 1];
  if (pre) {
    for (int r = 0; r < (W_STATIC > 0 ? W_STATIC : 1); r++) src[r] = r == me ? x + t0 * hidden : a.in + ((size_t)r * (size_t)a.R + (size_t)t0) * a.pitch;
    iris_rmsnorm_row16_load<T, (W_STATIC > 0 ? W_STATIC : 1)>(in, src, me, -1, true, rr0, weight, hidden);
  }
  if (!iris_coll_barrier(d, epoch, c, IRIS_COLL_KIND_RMSNORM)) return;
  if (pre) {
    iris_rmsnorm_row16_load<T, (W_STATIC > 0 ? W_STATIC : 1)>(in, src, -1, me, false, rr0, weight, hidden);
    iris_rmsnorm_row16_norm<T, (W_STATIC > 0 ? W_STATIC : 1)>(in, rr0, orow0, hidden, eps, quant, qrow0,
                                                              quant == IRIS_QUANT_FP8_PER_TOKEN ? scale + t0 : scale);
  } else if (ONE) {
    iris_rmsnorm_bw_one_rows<T, W_STATIC>(d, a, vec);
  } else {
    iris_rmsnorm_bw_two_rows<T, W_STATIC>(d, a, vec, c, epoch);
  }
}
#endif /* IRIS_DETAIL_GPU_COMPILER */

#endif /* IRIS_INTERNAL_COLL_RMSNORM_H */
