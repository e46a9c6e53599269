/* internal/gemm/rs_kernels.h: the GEMM + reduce-scatter / all-reduce's kernels
 * (iris_gemm_reduce.h). Part of its implementation; not a public header. Device code only.
 *   The SM reduction kernel of every path (W partials of the wire type summed in fp32 in
 *   rank order, bias, one rounding, into one or more outputs); the fused path (NVIDIA sm_90a): the kernels'
 *   view of a plan and its flags, the TMA-core GEMM whose epilogue pushes each tile's rows
 *   to their owners and signals them, and the owner's reduce kernel. Uses only
 *   internal/gemm/common.h (error record, bounded waits, tile sequence) and the core. */
#ifndef IRIS_INTERNAL_GEMM_RS_KERNELS_H
#define IRIS_INTERNAL_GEMM_RS_KERNELS_H
#include "../../iris_collectives.h"
#include "../device/platform.h"
#include "../coll/types.h"
#include "common.h"

/* ========================================================================= */
/*                the plan's reduction kernel (SM, vectorised)               */
/* ========================================================================= */
/* Rows x N values of the wire type from each of nsrc sources (row stride N), summed in
 * fp32 in source order, plus bias, rounded once, stored into each of nout outputs (row
 * stride N). */
typedef struct iris_gemm_rs_red {
  const void *src[IRIS_MAX_RANKS];
  void *out[IRIS_MAX_RANKS];
  const void *bias;
  long long rows, N;
  int nsrc, nout;
} iris_gemm_rs_red_t;

/* V values of T in one aligned vector (V * sizeof(T) bytes) */
template <typename T, int V>
struct alignas(V * sizeof(T)) iris_gemm_rs_vec {
  T v[V];
};
/* One thread: the values of vector i of the rows x N block (elements V i .. V i + V - 1,
 * V = 16 bytes of the wire type WT: 4 fp32 or 8 bf16/fp16 values; N % 8 == 0, so a vector
 * never straddles two rows). OutT: the output (and bias) type. */
template <typename OutT, typename WT>
IRIS_DEVICE_INLINE void iris_gemm_rs_sumv(const iris_gemm_rs_red_t &a, long long i) {
  constexpr int V = 16 / (int)sizeof(WT);
  typedef iris_gemm_rs_vec<WT, V> In;
  const OutT *bias = (const OutT *)a.bias;
  const long long col = (i * V) % a.N;
  float s[V];
  In x = ((const In *)a.src[0])[i];
#pragma unroll
  for (int k = 0; k < V; ++k) s[k] = iris_coll_up<WT>(x.v[k]);
  for (int q = 1; q < a.nsrc; ++q) {
    x = ((const In *)a.src[q])[i];
#pragma unroll
    for (int k = 0; k < V; ++k) s[k] += iris_coll_up<WT>(x.v[k]);
  }
  if (bias)
#pragma unroll
    for (int k = 0; k < V; ++k) s[k] += iris_coll_up<OutT>(bias[col + k]);
  iris_gemm_rs_vec<OutT, V> o;
#pragma unroll
  for (int k = 0; k < V; ++k) o.v[k] = iris_coll_down<OutT>(s[k]);
  for (int k = 0; k < a.nout; ++k) ((iris_gemm_rs_vec<OutT, V> *)a.out[k])[i] = o;
}
template <typename OutT, typename WT>
__global__ void iris_gemm_rs_reduce_kernel(iris_gemm_rs_red_t a) {
  const long long nv = a.rows * a.N / (16 / (int)sizeof(WT));
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nv; i += (long long)gridDim.x * blockDim.x) iris_gemm_rs_sumv<OutT, WT>(a, i);
}

#if defined(IRIS_GEMM_HAVE_TMA)
/* ========================================================================= */
/*     the fused path: a TMA-core GEMM that pushes its tiles to their owners    */
/* ========================================================================= */
/* Protocol of a call (epoch e = the CTA's counter + 1: every call runs every CTA of the
 * GEMM kernel once, so e is the same on every rank and CTA; kept on the device, so graph
 * replays advance it):
 *   GEMM kernel (grid: one CTA per SM): this rank's fp32 partial P = A_r * B_r, 128 x BN
 *     tiles (BN 256 on the cooperative core, 128 on the ping-pong core:
 *     IRIS_GEMM_RS_PINGPONG) in owner order (m-tiles from the row owned by rank me+1 on,
 *     wrapping: this rank's own rows last; groups of `raster` m-tiles share B in L2). The
 *     epilogue stores row `row` of a tile into slot `me` of its owner q = row / ml (part
 *     on rank q: [W][ml][N] fp32; a tile's rows may go to several owners). After a consumer
 *     warpgroup stored its 64-row half, thread t of the releasing threads release-stores
 *     e (system scope) into flag (me, half, n-tile) of the t-th owner of the half's rows
 *     (one flag per 128 columns):
 *     by default warp 1 of the producer warpgroup, which meets the warpgroup on a named
 *     barrier (iris_gemm_rs_push_out_offload); with IRIS_GEMM_RS_SIGNAL_OFFLOAD=0 the
 *     warpgroup's own 128 threads after bar.sync 2 + cw, 128 (iris_gemm_rs_push_out).
 *   reduce kernel (same stream, after it): for each (64-row half, n-tile) that holds rows
 *     of this rank, threads 0..W-1 wait (acquire, system, bounded) until flag (q, half,
 *     n-tile) reached e, the block meets, then sums slots 0..W-1 in that order (+ bias,
 *     one rounding) into C (and, ALL_REDUCE, into every peer's `red` copy).
 *   Slot reuse: run opens with a device barrier, which a rank passes only after every
 *     rank's reduce kernel of the previous call has finished: no push of call e+1 lands
 *     in a slot before its owner has read it for call e. */
typedef struct iris_gemm_rs_fused_dev {
  iris_device_ctx_t ctx;
  float *part;          /* heap [W][ml][N] fp32: slot q holds rank q's partial of this rank's rows */
  unsigned *flags;      /* heap [W][halves][tiles_n]: epochs (source, 64-row half, 128-column
                         * n-tile), written by the source rank: iris_gemm_rs_flag */
  iris_gemm_err_t *err; /* heap: the plan's error record (internal/gemm/common.h) */
  unsigned *counters;   /* heap [ctas], local use: the epoch of each GEMM CTA */
  int M, N, K, ml, halves, tiles_m, tiles_n, rot, raster;
} iris_gemm_rs_fused_dev_t;

/* Flags are kept per 128 columns (IRIS_GEMM_RS_FLAG_BN), whatever the GEMM's tile width:
 * a 128 x 256 tile's half signals two. */
#define IRIS_GEMM_RS_FLAG_BN 128
/* Flag (src, half, nt) of a rank's flags: the epoch at which rank src's rows of global 64-row
 * half tile `half`, columns [nt * 128, nt * 128 + 128), reached this rank's slot src. */
IRIS_DEVICE_INLINE unsigned *iris_gemm_rs_flag(const iris_gemm_rs_fused_dev_t &d, size_t src, int half, int nt) {
  return d.flags + (src * d.halves + half) * d.tiles_n + nt;
}
/* The release of one finished 64-row half tile (rows [r0, r0 + 64), columns [n0, n0 + BN))
 * to the owners of its rows, by `n` threads t = 0..n-1 of which the half's stores are
 * visible (after a barrier with the storing threads): thread t release-stores the epoch
 * (system scope) into flags (me, half, each 128-column tile of the half) of owners q0 + t,
 * q0 + t + n, ... Nothing for a half beyond M. */
template <int BN>
__device__ __forceinline__ void iris_gemm_rs_signal_half(const iris_gemm_rs_fused_dev_t &d, unsigned epoch, int r0, int n0, int t, int n) {
  if (r0 >= d.M) return;
  const int q0 = r0 / d.ml, q1 = (min(r0 + 64, d.M) - 1) / d.ml;
  unsigned *flag = iris_gemm_rs_flag(d, (size_t)d.ctx.rank, r0 / 64, n0 / IRIS_GEMM_RS_FLAG_BN);
  const int nf = (min(n0 + BN, d.N) - n0 + IRIS_GEMM_RS_FLAG_BN - 1) / IRIS_GEMM_RS_FLAG_BN;
  for (int q = q0 + t; q <= q1; q += n)
    for (int f = 0; f < nf; ++f) iris_signal(d.ctx, flag + f, epoch, q);
}

/* The GEMM's output policy (internal/gemm/core_tma.h): rows into their owners' slots,
 * each finished half tile signalled to the owners of its rows. */
template <int BN, bool DIRECT = false>
struct iris_gemm_rs_push_out {
  const iris_gemm_rs_fused_dev_t *d;
  size_t off; /* slot `me` of part, from this rank's heap base */
  unsigned epoch;
  static constexpr bool hoist = true;    /* a division and a table per row: once per row */
  static constexpr bool direct = DIRECT; /* fp32 pairs stored without the quad transpose (IRIS_GEMM_RS_DIRECT_STORES) */
  /* one node (checked at create): rank q's heap is bases[q] */
  __device__ __forceinline__ float *operator()(int row) const {
    const int q = row / d->ml;
    return (float *)(d->ctx.bases[q] + off) + (size_t)(row - q * d->ml) * d->N;
  }
  __device__ __forceinline__ void done(int r0, int n0, int cw) const {
    /* the warpgroup's stores are done (ids fixed at compile time: ptxas then reserves 4) */
    if (cw == 0) asm volatile("bar.sync 2, 128;\n" ::: "memory");
    else asm volatile("bar.sync 3, 128;\n" ::: "memory");
    iris_gemm_rs_signal_half<BN>(*d, epoch, r0, n0, (int)threadIdx.x & 127, 128);
  }
};

/* The same policy with the signals offloaded (IRIS_GEMM_RS_SIGNAL_OFFLOAD, the default):
 * a consumer warpgroup that stored its half only arrives (bar.arrive, no wait) on named
 * barrier 2 + cw (160 threads: its 128 and warp 1 of the producer warpgroup) and goes on
 * to the next tile's MMAs; warp 1 (iris_gemm_rs_signal_side) walks the same tile
 * sequence, waits on that barrier (bar.sync) for each half, and releases the half's flags.
 * Back-pressure, so that a warpgroup never arrives for half k+1 before warp 1 has passed
 * the barrier of half k (an early arrival would complete half k's barrier without warp 1):
 * after passing barrier 2 + cw for half k, warp 1 arrives on barrier 4 + cw (160), and the
 * warpgroup syncs on 4 + cw before it arrives for half k+1 (by then warp 1 has long passed
 * it: the wait is a whole tile's MMAs away). Warp 1 leaves out that arrive after the last
 * half, so every barrier ends its last phase complete.
 * Memory model (PTX ISA, "bar, barrier": "barrier{.cta}.sync, .red or .arrive guarantees
 * that when the barrier completes, prior memory accesses requested by this thread are
 * performed relative to all threads participating in the barrier"; Memory Consistency
 * Model: bar.arrive synchronizes with the bar.sync of the same barrier phase, so the
 * stores precede the release in causality order, and a release is cumulative over what
 * precedes it in causality order): the consumers' stores, barrier, one lane's
 * st.release.sys (iris_signal) is the "block barrier, then one thread releases" pattern
 * of iris_signal_block, with the barrier shared by the storing and the releasing threads. */
template <int BN, bool DIRECT>
struct iris_gemm_rs_push_out_offload : iris_gemm_rs_push_out<BN, DIRECT> {
  mutable bool first = true; /* per thread: the first half has no earlier one to wait for */
  __device__ __forceinline__ void done(int, int, int cw) const {
    if (cw == 0) {
      if (!first) asm volatile("bar.sync 4, 160;\n" ::: "memory");
      asm volatile("bar.arrive 2, 160;\n" ::: "memory");
    } else {
      if (!first) asm volatile("bar.sync 5, 160;\n" ::: "memory");
      asm volatile("bar.arrive 3, 160;\n" ::: "memory");
    }
    first = false;
  }
};
/* The side work of the offloaded policy (internal/gemm/core_tma.h: threads 32..127 of the
 * producer warpgroup, 40 registers, no smem): warp 1 (side index 0..31) releases the
 * flags of every half tile the consumers stored, in their order; warps 2, 3 do nothing.
 * Cooperative core: half h of each tile comes from warpgroup h; ping-pong (PP): both
 * halves of the v-th stored tile come from warpgroup v % 2. After each half of warpgroup
 * c but c's last, warp 1 arrives on 4 + c (the back-pressure above). */
template <int BN, bool PP>
struct iris_gemm_rs_signal_side {
  const iris_gemm_rs_fused_dev_t *d;
  iris_gemm_sched sched;
  unsigned epoch;
  int M, N;
  __device__ __forceinline__ void operator()(int s) const {
    if (s >= 32) return;
    iris_gemm_sched sc = sched;
    int m0, n0, v = 0, halves0 = 0, halves1 = 0, seen0 = 0, seen1 = 0; /* scalars: no local memory */
    for (int i = 0; sc(i, m0, n0); ++i) /* the halves each warpgroup stores */
      if (m0 < M && n0 < N) {
        if (!PP) ++halves0, ++halves1;
        else if (v & 1) halves1 += 2;
        else halves0 += 2;
        ++v;
      }
    v = 0;
    for (int i = 0; sc(i, m0, n0); ++i) {
      if (m0 >= M || n0 >= N) continue;
      for (int h = 0; h < 2; ++h) {
        const int c = PP ? (v & 1) : h;
        __syncwarp(); /* bar.sync is .aligned: the warp converged (the signals diverge) */
        if (c == 0) {
          asm volatile("bar.sync 2, 160;\n" ::: "memory");
          if (++seen0 < halves0) asm volatile("bar.arrive 4, 160;\n" ::: "memory");
        } else {
          asm volatile("bar.sync 3, 160;\n" ::: "memory");
          if (++seen1 < halves1) asm volatile("bar.arrive 5, 160;\n" ::: "memory");
        }
        iris_gemm_rs_signal_half<BN>(*d, epoch, m0 + 64 * h, n0, s, 32);
      }
      ++v;
    }
  }
};
/* The GEMM waits for nothing (A and B are local); a stuck pipeline wait (a bug) is
 * recorded in the error word. */
struct iris_gemm_rs_no_wait {
  iris_gemm_err_t *err;
  unsigned epoch;
  __device__ void operator()(int, int) const {}
  __device__ void stalled() const { iris_gemm_err_fail(err, epoch, IRIS_GEMM_WAIT_PIPELINE, -1, 0, 0, -1); }
};
template <> struct iris_gc_waits<iris_gemm_rs_no_wait> { enum { value = 0 }; };

/* Where the fused GEMM releases its half tiles' flags: 1 (default) warp 1 of the producer
 * warpgroup (iris_gemm_rs_push_out_offload), 0 the consumer warpgroups themselves (each
 * waits for its release before the next tile's MMAs). */
#ifndef IRIS_GEMM_RS_SIGNAL_OFFLOAD
#define IRIS_GEMM_RS_SIGNAL_OFFLOAD 1
#endif
/* 1 (default): the fused GEMM stores its fp32 tiles as the MMA left them (8-byte pairs,
 * no quad transpose: iris_gc_rows_direct, internal/gemm/core.h); 0: 16-byte stores after
 * the transpose, as the plain core. The same values at the same places either way
 * (docs/tuning.md). */
#ifndef IRIS_GEMM_RS_DIRECT_STORES
#define IRIS_GEMM_RS_DIRECT_STORES 1
#endif
/* The fused GEMM kernel's variant: bit 0 IRIS_GEMM_RS_SIGNAL_OFFLOAD, bit 1
 * IRIS_GEMM_RS_DIRECT_STORES; bit 2 (the ping-pong core) is chosen per plan (the bench
 * compares them). On the ping-pong core the stores are always the transposed 16-byte ones
 * (docs/tuning.md). */
#define IRIS_GEMM_RS_FUSED_VARIANT ((IRIS_GEMM_RS_SIGNAL_OFFLOAD ? 1 : 0) | (IRIS_GEMM_RS_DIRECT_STORES ? 2 : 0))
#define IRIS_GEMM_RS_PP_VARIANT ((IRIS_GEMM_RS_SIGNAL_OFFLOAD ? 1 : 0) | 4)
/* The core configuration of variant SIG */
template <int SIG> struct iris_gemm_rs_cfg { typedef iris_gemm_cfg_tma_large type; };
template <> struct iris_gemm_rs_cfg<4> { typedef iris_gemm_cfg_tma_pingpong type; };
template <> struct iris_gemm_rs_cfg<5> { typedef iris_gemm_cfg_tma_pingpong type; };
template <> struct iris_gemm_rs_cfg<6> { typedef iris_gemm_cfg_tma_pingpong type; };
template <> struct iris_gemm_rs_cfg<7> { typedef iris_gemm_cfg_tma_pingpong type; };
/* The fused GEMM's core: 0 the cooperative 128 x 256 core (iris_gemm_cfg_tma_large), 1 the
 * ping-pong schedule on 128 x 128 tiles (iris_gemm_cfg_tma_pingpong: one warpgroup stores
 * its fp32 tile while the other multiplies), -1 (default) per plan: ping-pong where the
 * cooperative tiles leave the last wave of SMs mostly idle or K/W <= 2048
 * (iris_gemm_rs_choose_pingpong; docs/tuning.md). */
#ifndef IRIS_GEMM_RS_PINGPONG
#define IRIS_GEMM_RS_PINGPONG (-1)
#endif
/* The kernel's core call, per signal placement (a tag: only one is instantiated). */
template <int SIG> struct iris_gemm_rs_sig {};
template <class Cfg, typename T, bool B_KN, bool DIRECT>
__device__ __forceinline__ void iris_gemm_rs_fused_tiles(const CUtensorMap &ta, const CUtensorMap &tb, const iris_gemm_rs_push_out<Cfg::BN, DIRECT> &out,
                                                         const iris_gemm_sched &sc, const iris_gemm_rs_no_wait &w, char *smem, iris_gemm_rs_sig<0>) {
  const iris_gemm_rs_fused_dev_t &d = *out.d;
  iris_gemm_tma_tiles_out<Cfg, T, B_KN, float>(&ta, &tb, out, (const float *)nullptr, d.M, d.N, d.K, sc, w, smem, iris_gemm_no_side());
}
template <class Cfg, typename T, bool B_KN, bool DIRECT>
__device__ __forceinline__ void iris_gemm_rs_fused_tiles(const CUtensorMap &ta, const CUtensorMap &tb, const iris_gemm_rs_push_out<Cfg::BN, DIRECT> &out,
                                                         const iris_gemm_sched &sc, const iris_gemm_rs_no_wait &w, char *smem, iris_gemm_rs_sig<1>) {
  const iris_gemm_rs_fused_dev_t &d = *out.d;
  iris_gemm_rs_push_out_offload<Cfg::BN, DIRECT> o;
  o.d = out.d;
  o.off = out.off;
  o.epoch = out.epoch;
  const iris_gemm_rs_signal_side<Cfg::BN, Cfg::PINGPONG> side = {out.d, sc, out.epoch, d.M, d.N};
  iris_gemm_tma_tiles_out<Cfg, T, B_KN, float>(&ta, &tb, o, (const float *)nullptr, d.M, d.N, d.K, sc, w, smem, side);
}
/* SIG: a variant as IRIS_GEMM_RS_FUSED_VARIANT (the bench compares them). */
template <class Cfg, typename T, bool B_KN, int SIG = IRIS_GEMM_RS_FUSED_VARIANT>
__global__ void __launch_bounds__(Cfg::threads, 1) iris_gemm_rs_fused_kernel(const __grid_constant__ iris_gemm_rs_fused_dev_t d, const __grid_constant__ CUtensorMap ta,
                                                                             const __grid_constant__ CUtensorMap tb) {
  extern __shared__ __align__(128) char iris_gemm_smem[];
  const unsigned epoch = d.counters[blockIdx.x] + 1;
  const iris_gemm_sched sc = iris_gemm_make_sched<Cfg>((int)blockIdx.x, (int)gridDim.x, d.tiles_m, (d.N + Cfg::BN - 1) / Cfg::BN, d.rot, d.raster);
  iris_gemm_rs_push_out<Cfg::BN, (SIG & 2) != 0> out;
  out.d = &d;
  out.off = (size_t)((const char *)(d.part + (size_t)d.ctx.rank * d.ml * d.N) - d.ctx.bases[d.ctx.local_rank]);
  out.epoch = epoch;
  iris_gemm_rs_fused_tiles<Cfg, T, B_KN>(ta, tb, out, sc, iris_gemm_rs_no_wait{d.err, epoch}, iris_gemm_smem, iris_gemm_rs_sig<SIG & 1>());
  if (threadIdx.x == 0) {
    iris_gemm_err_tell_peers(d.ctx, d.err, epoch);
    d.counters[blockIdx.x] = epoch;
  }
}

/* The owner's reduction: work items (64-row half, n-tile) over this rank's rows; r as for
 * iris_gemm_rs_reduce_kernel (rows: ml, src: the W slots). The epoch: counters[0], stored
 * by the GEMM kernel of this call, which completed before (stream order). */
template <typename OutT>
__global__ void __launch_bounds__(512) iris_gemm_rs_fused_reduce_kernel(const __grid_constant__ iris_gemm_rs_fused_dev_t d, const __grid_constant__ iris_gemm_rs_red_t r,
                                                                        int bn) {
  const int W = d.ctx.world_size, row0 = d.ctx.rank * d.ml, h0 = row0 / 64, h1 = (row0 + d.ml - 1) / 64;
  const int items = (h1 - h0 + 1) * d.tiles_n, nq = d.N / 4;
  const unsigned epoch = d.counters[0];
  for (int it = (int)blockIdx.x; it < items; it += (int)gridDim.x) {
    const int h = h0 + it / d.tiles_n, nt = it % d.tiles_n;
    int ok = 1;
    if ((int)threadIdx.x < W)
      ok = iris_gemm_wait_flag<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(d.err, iris_gemm_rs_flag(d, threadIdx.x, h, nt), epoch, epoch, IRIS_GEMM_WAIT_TILE,
                                                                      (int)threadIdx.x, h * d.tiles_n + nt);
    if (!__syncthreads_and(ok)) continue; /* recorded; these rows of C stay unwritten */
    const int ra = max(h * 64, row0) - row0, rb = min(h * 64 + 64, row0 + d.ml) - row0;
    const int ca = nt * bn / 4, w = min(nt * bn + bn, d.N) / 4 - ca;
    for (int i = (int)threadIdx.x; i < (rb - ra) * w; i += (int)blockDim.x) iris_gemm_rs_sumv<OutT, float>(r, (long long)(ra + i / w) * nq + ca + i % w);
  }
  __syncthreads();
  if (threadIdx.x == 0) iris_gemm_err_tell_peers(d.ctx, d.err, epoch);
}
/* The part a run refused on this rank (its arguments, on the host: iris_gemm_rs_take_part)
 * takes in a call of the fused path, in place of its two kernels (after the call's opening
 * barrier, in which the ranks meet). One block of any size; nothing of the user's is read
 * or written, no tile is pushed, and nothing waits:
 *   - every peer is told (iris_gemm_err_refuse_peer): its reduce kernel's waits for this
 *     rank's tiles of the call, which never come, return at once (the first records
 *     IRIS_GEMM_WAIT_REFUSED naming this rank), so it writes none of its rows of C (the
 *     all-reduce: nor the peers' heap copies); where every rank refused the call, nobody
 *     waits and nothing is recorded;
 *   - this rank's GEMM CTA counters (ctas of them: the GEMM kernel's grid) move on to the
 *     call's epoch: its next call pushes and waits at the peers' next epoch. The peers'
 *     pushes of this call into this rank's slots are overwritten by their next ones, after
 *     the next call's opening barrier, as ever.
 * The normal call pays nothing for this: its kernels are unchanged (the record is written
 * on the cold path of a wait that is aborted already). */
__global__ void iris_gemm_rs_refused_kernel(const __grid_constant__ iris_gemm_rs_fused_dev_t d, int ctas) {
  const int W = d.ctx.world_size, me = d.ctx.rank, t = (int)threadIdx.x;
  const unsigned epoch = d.counters[0] + 1; /* every GEMM CTA's counter holds the last call */
  __syncthreads(); /* counters[0] read by every thread before any stores it */
  for (int q = t; q < W; q += (int)blockDim.x)
    if (q != me) iris_gemm_err_refuse_peer(d.ctx, d.err, epoch, q);
  for (int i = t; i < ctas; i += (int)blockDim.x) d.counters[i] = epoch;
}
#endif /* IRIS_GEMM_HAVE_TMA */

#endif /* IRIS_INTERNAL_GEMM_RS_KERNELS_H */
