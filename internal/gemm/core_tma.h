/* internal/gemm/core_tma.h — persistent, warp-specialized wgmma GEMM core fed by TMA (Hopper, sm_90a)
 *
 * What it is
 *   The fast NVIDIA core beside internal/gemm/core.h (which it includes). Include this file
 *   for the TMA core (iris_gemm.h does); under other compilers than nvcc it is empty.
 *   One persistent CTA of 384 threads computes a sequence of BM x BN tiles (BM = 128) of
 *   C = A * B (+ bias), fp32 accumulation:
 *     warpgroup 0  producer: one thread issues TMA loads (cp.async.bulk.tensor) of A and B
 *                  k-slabs (64 wide) into a STAGES-deep shared-memory ring, each stage
 *                  guarded by a "full" and an "empty" mbarrier; it gives up registers
 *                  (setmaxnreg 40) and runs ahead into the next tile while the consumers
 *                  store the previous one;
 *     warpgroups 1, 2  consumers (cooperative, the default; see iris_gemm_tma_cfg for the
 *                  ping-pong schedule, where each takes every other tile whole): each
 *                  multiplies a 64 x BN half of the tile with
 *                  wgmma.m64nBNk16 straight from the 128-byte-swizzled stages (the layout
 *                  TMA writes), frees a stage as soon as the wgmma that read it retired,
 *                  then stores its half of C from registers (bias, rounding, 16-byte
 *                  stores; masked edges) while the producer refills the ring.
 *   No thread computes an address per element and nothing waits on a block barrier
 *   inside the k loop: this is what lifts the cp.async wgmma core (69-85% of cuBLAS) to
 *   cuBLAS's class.
 *
 * Quick start (one GPU; see bench/bench_gemm_core.cu and tests/gemm_core_test.cu)
 *     typedef iris_gemm_tma_cfg<256, 4> Cfg;
 *     struct Sched { int tiles_m, ntiles;            // tile i of this CTA, or false
 *       __device__ bool operator()(int i, int &m0, int &n0) const {
 *         const int t = blockIdx.x + i * gridDim.x; if (t >= ntiles) return false;
 *         m0 = t % tiles_m * Cfg::BM; n0 = t / tiles_m * Cfg::BN; return true; } };
 *     __global__ void __launch_bounds__(Cfg::threads, 1)
 *     k(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
 *       __nv_bfloat16 *C, int M, int N, int K, Sched s) {
 *       extern __shared__ __align__(16) char smem[];
 *       iris_gemm_tma_tiles<Cfg, __nv_bfloat16, true, __nv_bfloat16>(&ta, &tb, C, N, nullptr,
 *           M, N, K, s, iris_gemm_no_wait(), smem);
 *     }
 *     // host
 *     CUtensorMap ta, tb;
 *     iris_gemm_tma_map(&ta, A, 0, M, K, lda, Cfg::BM);             // A: M x K
 *     iris_gemm_tma_map_b<Cfg>(&tb, B, 0, true, K, N, ldb);          // B: K x N
 *     cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::smem_bytes);
 *     k<<<sms, Cfg::threads, Cfg::smem_bytes>>>(ta, tb, C, M, N, K, s);
 *
 * Interface
 *   template <class Cfg, typename T, bool B_KN, typename OutT, class Sched, class WaitA, typename BiasT>
 *   __device__ void iris_gemm_tma_tiles(const CUtensorMap *ta, const CUtensorMap *tb, OutT *C, int ldc,
 *                                       const BiasT *bias, int M, int N, int K, Sched sched,
 *                                       WaitA wait_a, char *smem);
 *     ta, tb  addresses of `const __grid_constant__ CUtensorMap` kernel parameters, made by
 *             iris_gemm_tma_map (A: M x K, box BM x 64) and iris_gemm_tma_map_b<Cfg> (B);
 *             T, B_KN, M, N, K must be what they describe.
 *     sched   sched(i, m0, n0): the i-th tile of this CTA (i = 0, 1, ...), false when there
 *             is none; a pure function of i (the producer and the consumers each call it).
 *             Tiles with m0 >= M or n0 >= N are skipped. Cfg::CLUSTER 2: launch with
 *             cluster dims (2, 1, 1); sched gives 256-row cluster tiles, the same sequence
 *             on both CTAs of a cluster (index it by blockIdx.x / 2, gridDim.x / 2), and
 *             CTA rank c computes rows m0 + 128 c (see iris_gemm_tma_cfg).
 *     wait_a  wait_a(m0, k0): called by the producer thread only, before the TMA load of
 *             A[m0:m0+BM, k0:k0+64), in k order per tile. It may spin; to consume data that
 *             other CTAs or GPUs wrote, it acquires their flag (the core then issues
 *             fence.proxy.async so the TMA, an async-proxy read, sees the data). B is read
 *             without a wait. iris_gemm_no_wait: no call. A wait_a that may spin must be
 *             bounded. Optional member `void stalled() const`: called (by the producer or
 *             by lane 0 of a consumer warp) when a pipeline wait of this CTA passes
 *             IRIS_GEMM_PIPE_TIMEOUT_NS (default twice IRIS_WAIT_TIMEOUT_NS where that is
 *             defined, else 20 s); such a thread stops waiting from then on (C is then
 *             wrong), so no thread stays stuck. Reached only through a bug: while wait_a
 *             returns, the ring always moves.
 *     smem    Cfg::smem_bytes of dynamic shared memory (16-byte aligned; the core aligns it).
 *   Every thread of the CTA (blockDim.x == 384) calls it with the same arguments. It begins
 *   and ends with __syncthreads(); on return every copy and MMA is complete.
 *
 *   template <..., typename OutT, class Out, ...>
 *   __device__ void iris_gemm_tma_tiles_out(ta, tb, Out out, bias, M, N, K, sched, wait_a, smem, side);
 *     The same with an output policy instead of (C, ldc) (iris_gemm_tma_tiles passes
 *     iris_gemm_tma_out<OutT>{C, ldc}: the code and speed of the plain call are unchanged):
 *       OutT *out(int row) const        where row `row` (< M) of the tile goes: a pointer to
 *                                       its column 0 (rows of one tile may go to different
 *                                       buffers, e.g. to the GPUs that own them);
 *                                       optional `static constexpr bool hoist = true`:
 *                                       call it once per row per tile (costly maps);
 *                                       optional `static constexpr bool direct = true`:
 *                                       store the MMA's pairs without the quad transpose
 *                                       (internal/gemm/core.h, iris_gc_rows_direct);
 *       void out.done(int r0, int n0, int cw) const
 *                                       called by all 128 threads of consumer warpgroup cw
 *                                       (threads 128 + 128 * cw ...) after each stored
 *                                       their part of rows [r0, r0 + 64) x columns
 *                                       (ping-pong: twice per tile, r0 = m0 then m0 + 64,
 *                                       by the warpgroup that owns the tile)
 *                                       [n0, n0 + BN) (r0 may be >= M: nothing stored). To
 *                                       publish the half, meet on a named barrier of the
 *                                       128 threads (ids 2 and 3 are free: bar.sync 2 + cw,
 *                                       128; 0 is __syncthreads, 1 the side work's), then
 *                                       one thread releases a flag; or hand the release to
 *                                       a side warp: bar.arrive on a barrier shared with it
 *                                       (ids 2..13 are free for the policy and the side work
 *                                       together; 14, 15: the ping-pong order; iris_gemm_reduce.h's offloaded policy
 *                                       uses 2..5). It must not touch smem.
 *     GEMM + reduce-scatter's fused path (iris_gemm_reduce.h) pushes each half to its
 *     owner GPU this way.
 *
 * Rules (the host side checks them)
 *   - A, B, C, bias 16-byte aligned; lda, ldb, ldc multiples of 8 elements; K % 8 == 0
 *     (K == 0: C = bias or 0). M, N arbitrary: TMA fills rows, columns and k beyond the
 *     matrix with zeros; stores are masked.
 *   - Compiled only in an sm_90a device pass (IRIS_GC_WGMMA); elsewhere the function does
 *     nothing and iris_gemm_tma_compiled() returns 0: check it (iris_gemm.h does) and use
 *     iris_gemm_tile instead.
 */
#ifndef IRIS_INTERNAL_GEMM_CORE_TMA_H
#define IRIS_INTERNAL_GEMM_CORE_TMA_H
#include "core.h"
#if defined(IRIS_GEMM_CORE_CUDA)
#include <cuda.h> /* CUtensorMap and its enums only; the driver function is looked up at run time */
#include "../core/platform.h" /* iris_gpu_driver_function */

/* ---- configuration ---- */
/* Bound of one pipeline (mbarrier) wait, in ns: twice the flag-wait bound, because a stage
   may legitimately wait while the producer waits (bounded) in wait_a. */
#ifndef IRIS_GEMM_PIPE_TIMEOUT_NS
#if defined(IRIS_WAIT_TIMEOUT_NS)
#define IRIS_GEMM_PIPE_TIMEOUT_NS (2ULL * (IRIS_WAIT_TIMEOUT_NS))
#else
#define IRIS_GEMM_PIPE_TIMEOUT_NS 20000000000ULL
#endif
#endif

/* PINGPONG_ false (cooperative): both consumer warpgroups multiply each tile (64 rows each)
   and store it together. true (ping-pong, BN 128 only): warpgroup 1 takes the 1st, 3rd, ...
   tile of the CTA, warpgroup 2 the 2nd, 4th, ...; each multiplies and stores the whole
   128-row tile, so one warpgroup's stores overlap the other's MMAs (the ring hands out the
   stages in tile order, which staggers the two by about a tile). Wins where the epilogue
   is heavy (fp32 C pushed to other GPUs: iris_gemm_reduce.h). */
/* CLUSTER_ 2: the kernel runs in clusters of 2 CTAs (launch with cluster dims (2, 1, 1):
   __cluster_dims__ or cudaLaunchKernelEx) that take vertically adjacent tiles with the
   same columns: the sched gives 256-row "cluster tiles" (m0 a multiple of 256, the same
   sequence on both CTAs of a cluster: index it by blockIdx.x / 2 and gridDim.x / 2), CTA
   rank c of the cluster computes rows m0 + 128 c. Each CTA loads its own A and half of
   the B slab, multicast to both (cp.async.bulk.tensor .multicast::cluster): B is read
   from L2 once per two tiles, which is what 128 x 128 tiles need (measured on one H100:
   alone they saturate L2 at long K). A cluster tile is skipped only where m0 >= M (the
   second CTA's rows past M are computed from TMA's zero fill and not stored).
   Measured on one H100 (the 20 local shapes of bench_gemm_rs): mixed. The ping-pong
   core in clusters of 2 ran 0.87-1.34x its own speed at long K and 0.87-1.04x at short
   K; the cooperative core 0.84-1.08x. No library path uses it. */
template <int BN_, int STAGES_, bool PINGPONG_ = false, int CLUSTER_ = 1> struct iris_gemm_tma_cfg {
  static constexpr int BM = 128, BN = BN_, BK = 64, STAGES = STAGES_, CLUSTER = CLUSTER_;
  static constexpr bool PINGPONG = PINGPONG_;
  static constexpr int threads = 384; /* producer warpgroup + 2 consumer warpgroups */
  /* consumer warps that free each stage: every reader of the stage in every CTA the
     stage's B half is multicast to */
  static constexpr int stage_readers = (PINGPONG ? 4 : 8) * CLUSTER;
  static constexpr int a_bytes = BM * 128, b_bytes = BN * 128, stage_bytes = a_bytes + b_bytes;
  static constexpr int smem_bytes = STAGES * stage_bytes + 2 * STAGES * 8 + 1024; /* ring, barriers, alignment slack */
  static_assert(BN == 128 || BN == 256, "iris_gemm_tma_cfg: BN must be 128 or 256");
  static_assert(!PINGPONG || BN == 128, "iris_gemm_tma_cfg: a ping-pong warpgroup holds a 128 x 128 fp32 tile: BN must be 128");
  static_assert(STAGES >= 2 && smem_bytes <= 227 * 1024, "iris_gemm_tma_cfg: STAGES >= 2, at most 227 KB of shared memory");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "iris_gemm_tma_cfg: CLUSTER must be 1 or 2");
};
/* 128 x 256 tiles, 4 stages (193 KB): the large-GEMM configuration */
typedef iris_gemm_tma_cfg<256, 4> iris_gemm_cfg_tma_large;
/* 128 x 128 tiles, ping-pong, 6 stages (193 KB): heavy epilogues */
typedef iris_gemm_tma_cfg<128, 6, true> iris_gemm_cfg_tma_pingpong;
/* the same in clusters of 2 sharing B (multicast) */
typedef iris_gemm_tma_cfg<128, 6, true, 2> iris_gemm_cfg_tma_pingpong_c2;

/* 1 where this device pass has the TMA core (sm_90a), 0 where iris_gemm_tma_tiles is empty */
__device__ __forceinline__ int iris_gemm_tma_compiled() { return IRIS_GC_WGMMA; }

/* wait_a types that never wait (no call, no proxy fence) */
template <class W> struct iris_gc_waits { enum { value = 1 }; };
template <> struct iris_gc_waits<iris_gemm_no_wait> { enum { value = 0 }; };

/* ---- host: tensor maps ---- */
typedef CUresult (*iris_gc_encode_fn_t)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                                        const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                        CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* Host. A map over a row-major rows x cols matrix of 2-byte elements (f16: 1 fp16, 0 bf16)
   with leading dimension ld, in boxes of box_rows x 64 columns laid out with the 128-byte
   swizzle; elements outside the matrix read as zero. cudaSuccess, or
   cudaErrorInvalidValue for a shape TMA cannot describe (alignment, ld, sizes), or the
   error of the driver lookup. */
static inline cudaError_t iris_gemm_tma_map(CUtensorMap *map, const void *base, int f16, long long rows, long long cols, long long ld, int box_rows) {
  static iris_gc_encode_fn_t encode = nullptr; /* the same value from every thread that races here */
  if (!encode) {
    void *fn = nullptr;
    const cudaError_t e = iris_gpu_driver_function("cuTensorMapEncodeTiled", 12000, &fn); /* the host vendor layer */
    if (e != cudaSuccess) return e;
    encode = (iris_gc_encode_fn_t)fn;
  }
  if (!map || !base || ((uintptr_t)base & 15) || rows < 1 || cols < 1 || ld < cols || (ld * 2) % 16 || box_rows < 1 || box_rows > 256 ||
      rows > (1ll << 32) || cols > (1ll << 32) || ld * 2 >= (1ll << 40))
    return cudaErrorInvalidValue;
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)ld * 2};
  const cuuint32_t box[2] = {64, (cuuint32_t)box_rows}, estr[2] = {1, 1};
  const CUresult r = encode(map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}
/* Host. The map of B for Cfg: b_kn (K x N row-major, ldb >= N): boxes of 64 k-rows x 64
   columns; else (N x K, ldb >= K): boxes of BN / CLUSTER rows x 64 k (each CTA of a
   cluster loads its part). */
template <class Cfg> static inline cudaError_t iris_gemm_tma_map_b(CUtensorMap *map, const void *B, int f16, bool b_kn, long long K, long long N, long long ldb) {
  return b_kn ? iris_gemm_tma_map(map, B, f16, K, N, ldb, 64) : iris_gemm_tma_map(map, B, f16, N, K, ldb, Cfg::BN / Cfg::CLUSTER);
}

/* ---- device ---- */
#if IRIS_GC_WGMMA
__device__ __forceinline__ void iris_gc_mbar_init(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void iris_gc_mbar_expect_tx(uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void iris_gc_mbar_arrive(uint32_t bar) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory"); }
/* this CTA's rank in its cluster (0 without clusters) */
__device__ __forceinline__ uint32_t iris_gc_cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
/* every thread of every CTA of the cluster (release / acquire at cluster scope) */
__device__ __forceinline__ void iris_gc_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* A stage is free: arrive on its "empty" barrier in every CTA of the cluster (the other
   CTA's producer multicasts into this CTA's copy of the stage). */
template <int CLUSTER> __device__ __forceinline__ void iris_gc_stage_free(uint32_t bar) {
  if (CLUSTER == 1) {
    iris_gc_mbar_arrive(bar);
  } else {
    /* mbarrier.arrive's default semantics (release, CTA scope), as CUTLASS's cluster
       barrier: the wgmma that read the stage has completed. With .release.cluster the
       same kernels ran 2.5 to 5 times slower on an H100. */
#pragma unroll
    for (uint32_t c = 0; c < (uint32_t)CLUSTER; ++c)
      asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar), "r"(c) : "memory");
  }
}
__device__ __forceinline__ unsigned long long iris_gc_time_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/* Until the phase of parity `parity` of the barrier has completed: true. False once
   IRIS_GEMM_PIPE_TIMEOUT_NS has passed (each try_wait suspends the thread for a while in
   hardware; the clock is read every 64 tries), or at once when `broken` (an earlier wait
   of this thread expired): a bound for bugs, never reached while the other side of the
   ring makes progress. */
__device__ __forceinline__ bool iris_gc_mbar_wait(uint32_t bar, uint32_t parity, bool &broken) {
  uint32_t done;
  unsigned tries = 0;
  unsigned long long start = 0;
  if (broken) return false;
  for (;;) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    if (done) return true;
    if ((++tries & 63) == 0) {
      const unsigned long long now = iris_gc_time_ns();
      if (!start) start = now;
      else if (now - start > (unsigned long long)(IRIS_GEMM_PIPE_TIMEOUT_NS)) break;
    }
  }
  broken = true;
  return false;
}
/* wait_a.stalled() where WaitA has it (the fused kernel records the failure), else nothing */
template <class W> __device__ __forceinline__ auto iris_gc_report_stall(const W &w, int) -> decltype(w.stalled(), void()) { w.stalled(); }
template <class W> __device__ __forceinline__ void iris_gc_report_stall(const W &, long) {}
/* 2-D TMA load of the box at (c0 = column, c1 = row) into shared dst, completing on bar */
__device__ __forceinline__ void iris_gc_tma_load(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
               "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}
/* the same box into the same offsets of every CTA in `mask` (this cluster), completing on
   each one's barrier at `bar` */
__device__ __forceinline__ void iris_gc_tma_load_mc(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar, uint16_t mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
               "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
               : "memory");
}
/* Where this CTA's rows start in a tile of the sched: 0, or with clusters 128 x its rank
   in the cluster. The sched's tile (a cluster tile) is skipped where it starts past M or
   N, the same test on every CTA of a cluster; the offset is added after it. */
template <class Cfg> __device__ __forceinline__ int iris_gc_cta_row() { return Cfg::CLUSTER > 1 ? (int)iris_gc_cluster_rank() * Cfg::BM : 0; }
__device__ __forceinline__ void iris_gc_fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }
__device__ __forceinline__ void iris_gc_fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
template <int R> __device__ __forceinline__ void iris_gc_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R> __device__ __forceinline__ void iris_gc_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }

/* The producer thread: every k-slab of every tile of this CTA, in order, into the ring. */
template <class Cfg, bool B_KN, class Sched, class WaitA>
__device__ __forceinline__ void iris_gc_tma_produce(const CUtensorMap *ta, const CUtensorMap *tb, int M, int N, int K, Sched &sched, WaitA &wait_a,
                                                    uint32_t ring, uint32_t full, uint32_t empty) {
  constexpr int S = Cfg::STAGES;
  const int KT = (K + 63) / 64;
  int s = 0;
  uint32_t phase = 0;
  int m0, n0;
  bool broken = false;
  const int crank = Cfg::CLUSTER > 1 ? (int)iris_gc_cluster_rank() : 0;
  for (int i = 0; sched(i, m0, n0); ++i) {
    if (m0 >= M || n0 >= N) continue;
    m0 += iris_gc_cta_row<Cfg>();
    for (int kt = 0; kt < KT; ++kt) {
      /* the consumers freed this stage (a fresh barrier passes); past the bound: stop
         loading (the consumers' waits then expire too, and the CTA ends) */
      if (!iris_gc_mbar_wait(empty + 8 * s, phase ^ 1, broken)) {
        iris_gc_report_stall(wait_a, 0);
        return;
      }
      if (iris_gc_waits<WaitA>::value) {
        wait_a(m0, kt * 64);
        iris_gc_fence_proxy_async_global();
      }
      const uint32_t sa = ring + s * Cfg::stage_bytes, sb = sa + Cfg::a_bytes, bar = full + 8 * s;
      iris_gc_mbar_expect_tx(bar, Cfg::stage_bytes);
      iris_gc_tma_load(sa, ta, kt * 64, m0, bar);
      if (Cfg::CLUSTER > 1) { /* this CTA's part of B, to every CTA of the cluster */
        constexpr uint16_t all = (uint16_t)((1u << Cfg::CLUSTER) - 1);
        if (B_KN) {
          constexpr int per = Cfg::BN / 64 / Cfg::CLUSTER;
#pragma unroll
          for (int jj = 0; jj < per; ++jj) {
            const int j = crank * per + jj;
            iris_gc_tma_load_mc(sb + j * 8192, tb, n0 + 64 * j, kt * 64, bar, all);
          }
        } else {
          constexpr int rows = Cfg::BN / Cfg::CLUSTER;
          iris_gc_tma_load_mc(sb + crank * rows * 128, tb, kt * 64, n0 + crank * rows, bar, all);
        }
      } else if (B_KN) {
#pragma unroll
        for (int j = 0; j < Cfg::BN / 64; ++j) iris_gc_tma_load(sb + j * 8192, tb, n0 + 64 * j, kt * 64, bar);
      } else {
        iris_gc_tma_load(sb, tb, kt * 64, n0, bar);
      }
      if (++s == S) { s = 0; phase ^= 1; }
    }
  }
}

/* A consumer warpgroup (cw = 0 or 1: rows 64*cw of each tile). */
template <class Cfg, typename T, bool B_KN, typename OutT, class Out, class Sched, class WaitA, typename BiasT>
__device__ __forceinline__ void iris_gc_tma_consume(const Out &out, const BiasT *__restrict__ bias, int M, int N, int K, Sched &sched,
                                                    const WaitA &wait_a, uint32_t ring, uint32_t full, uint32_t empty, int cw) {
  constexpr int S = Cfg::STAGES, BN = Cfg::BN;
  constexpr bool F16 = iris_gc_elem<T>::f16 != 0;
  const int KT = (K + 63) / 64, lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3;
  float acc[1][BN / 8][4];
  float(&d)[BN / 2] = reinterpret_cast<float(&)[BN / 2]>(acc);
  int s = 0;
  uint32_t phase = 0;
  int m0, n0;
  bool broken = false;
  for (int i = 0; sched(i, m0, n0); ++i) {
    if (m0 >= M || n0 >= N) continue;
    m0 += iris_gc_cta_row<Cfg>();
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) d[j] = 0.f;
    int prev = -1;
    for (int kt = 0; kt < KT; ++kt) {
      /* past the bound (a bug): reported once, then no more waiting (C is wrong, and
         said so; no thread stays stuck) */
      const bool was_broken = broken;
      if (!iris_gc_mbar_wait(full + 8 * s, phase, broken) && !was_broken && lane == 0) iris_gc_report_stall(wait_a, 0);
      const uint32_t sa = ring + s * Cfg::stage_bytes + cw * 64 * 128, sb = ring + s * Cfg::stage_bytes + Cfg::a_bytes;
      iris_gc_wgmma_slab<BN, F16, B_KN>(d, sa, sb);
      iris_gc_wgmma_wait<1>(); /* the slab before this one is no longer read */
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) iris_gc_fence_reg(d[j]);
      if (prev >= 0 && lane == 0) iris_gc_stage_free<Cfg::CLUSTER>(empty + 8 * prev);
      prev = s;
      if (++s == S) { s = 0; phase ^= 1; }
    }
    iris_gc_wgmma_wait<0>();
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) iris_gc_fence_reg(d[j]);
    if (prev >= 0 && lane == 0) iris_gc_stage_free<Cfg::CLUSTER>(empty + 8 * prev);
    iris_gc_epilogue_rows<1, BN / 8, OutT>(acc, out, bias, M, N, m0 + 64 * cw + 16 * wq, n0, lane);
    out.done(m0 + 64 * cw, n0, cw); /* this warpgroup's 64 x BN half is stored */
  }
}

/* The ping-pong order (named barriers 14 and 15, 256 threads): warpgroup cw's mainloop of
   its tile v starts only after the other warpgroup has passed every "full" wait of tile
   v-1. Needed for correctness, not only speed: a stage's barrier is waited on by parity,
   and a warpgroup that skipped the other's KT stages could otherwise see an earlier phase
   of the same parity complete and read the other tile's data. 14: warpgroup 0 arrives,
   1 waits; 15: the reverse. Each arrival is matched (none after the last tile), so the
   barriers end every call complete. */
__device__ __forceinline__ void iris_gc_pp_order_wait(int cw) {
  if (cw == 0) asm volatile("bar.sync 15, 256;\n" ::: "memory");
  else asm volatile("bar.sync 14, 256;\n" ::: "memory");
}
__device__ __forceinline__ void iris_gc_pp_order_arrive(int cw) {
  if (cw == 0) asm volatile("bar.arrive 14, 256;\n" ::: "memory");
  else asm volatile("bar.arrive 15, 256;\n" ::: "memory");
}
/* A ping-pong consumer warpgroup (Cfg::PINGPONG; cw = 0 or 1): the tiles of this CTA with
   an even (cw 0) or odd (cw 1) index among those it stores, whole (128 x BN, two
   accumulators of 64 rows); the other warpgroup's tiles only advance its ring position.
   The mainloops alternate (the order above); each warpgroup's epilogue runs during the
   other's mainloop. */
template <class Cfg, typename T, bool B_KN, typename OutT, class Out, class Sched, class WaitA, typename BiasT>
__device__ __forceinline__ void iris_gc_tma_consume_pp(const Out &out, const BiasT *__restrict__ bias, int M, int N, int K, Sched &sched,
                                                       const WaitA &wait_a, uint32_t ring, uint32_t full, uint32_t empty, int cw) {
  constexpr int S = Cfg::STAGES, BN = Cfg::BN;
  constexpr bool F16 = iris_gc_elem<T>::f16 != 0;
  const int KT = (K + 63) / 64, lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3;
  float acc[2][BN / 8][4];
  float(&d0)[BN / 2] = reinterpret_cast<float(&)[BN / 2]>(acc[0]);
  float(&d1)[BN / 2] = reinterpret_cast<float(&)[BN / 2]>(acc[1]);
  int s = 0, v = 0, nv = 0;
  uint32_t phase = 0;
  int m0, n0;
  bool broken = false;
  for (int i = 0; sched(i, m0, n0); ++i) nv += m0 < M && n0 < N; /* the tiles computed */
  for (int i = 0; sched(i, m0, n0); ++i) {
    if (m0 >= M || n0 >= N) continue;
    m0 += iris_gc_cta_row<Cfg>();
    const int me = v++;
    if ((me & 1) != cw) { /* the other warpgroup's tile: its KT stages pass by */
      const int t = s + KT;
      s = t % S;
      phase ^= (uint32_t)((t / S) & 1);
      continue;
    }
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) d0[j] = d1[j] = 0.f;
    if (me > 0) iris_gc_pp_order_wait(cw); /* the other's mainloop of tile me-1 is issued */
    int prev = -1;
    for (int kt = 0; kt < KT; ++kt) {
      const bool was_broken = broken;
      if (!iris_gc_mbar_wait(full + 8 * s, phase, broken) && !was_broken && lane == 0) iris_gc_report_stall(wait_a, 0);
      const uint32_t sa = ring + s * Cfg::stage_bytes, sb = sa + Cfg::a_bytes;
      iris_gc_wgmma_slab2<BN, F16, B_KN>(d0, d1, sa, sb);
      iris_gc_wgmma_wait<1>(); /* the slab before this one is no longer read */
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) { iris_gc_fence_reg(d0[j]); iris_gc_fence_reg(d1[j]); }
      if (prev >= 0 && lane == 0) iris_gc_stage_free<Cfg::CLUSTER>(empty + 8 * prev);
      prev = s;
      if (++s == S) { s = 0; phase ^= 1; }
    }
    if (me + 1 < nv) iris_gc_pp_order_arrive(cw); /* every full wait of this tile passed */
    iris_gc_wgmma_wait<0>();
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) { iris_gc_fence_reg(d0[j]); iris_gc_fence_reg(d1[j]); }
    if (prev >= 0 && lane == 0) iris_gc_stage_free<Cfg::CLUSTER>(empty + 8 * prev);
    iris_gc_epilogue_rows<1, BN / 8, OutT>(reinterpret_cast<const float(&)[1][BN / 8][4]>(acc[0]), out, bias, M, N, m0 + 16 * wq, n0, lane);
    out.done(m0, n0, cw);
    iris_gc_epilogue_rows<1, BN / 8, OutT>(reinterpret_cast<const float(&)[1][BN / 8][4]>(acc[1]), out, bias, M, N, m0 + 64 + 16 * wq, n0, lane);
    out.done(m0 + 64, n0, cw);
  }
}
/* the consumer of Cfg::PINGPONG (only the one in use is instantiated) */
template <bool PP> struct iris_gc_tma_consumer {
  template <class Cfg, typename T, bool B_KN, typename OutT, class Out, class Sched, class WaitA, typename BiasT>
  static __device__ __forceinline__ void run(const Out &out, const BiasT *bias, int M, int N, int K, Sched &sched, const WaitA &wait_a, uint32_t ring,
                                             uint32_t full, uint32_t empty, int cw) {
    iris_gc_tma_consume<Cfg, T, B_KN, OutT>(out, bias, M, N, K, sched, wait_a, ring, full, empty, cw);
  }
};
template <> struct iris_gc_tma_consumer<true> {
  template <class Cfg, typename T, bool B_KN, typename OutT, class Out, class Sched, class WaitA, typename BiasT>
  static __device__ __forceinline__ void run(const Out &out, const BiasT *bias, int M, int N, int K, Sched &sched, const WaitA &wait_a, uint32_t ring,
                                             uint32_t full, uint32_t empty, int cw) {
    iris_gc_tma_consume_pp<Cfg, T, B_KN, OutT>(out, bias, M, N, K, sched, wait_a, ring, full, empty, cw);
  }
};
#endif /* IRIS_GC_WGMMA */

/* The default output policy: row r of C at C + r * ldc, nothing after a tile's half. */
template <typename OutT> struct iris_gemm_tma_out {
  OutT *C;
  int ldc;
  __device__ __forceinline__ OutT *operator()(int row) const { return C + (size_t)row * ldc; }
  __device__ __forceinline__ void done(int, int, int) const {}
};

/* Side work that does nothing (the default). */
struct iris_gemm_no_side {
  __device__ __forceinline__ void operator()(int) const {}
};

/* The same, with side work for the three idle warps of the producer warpgroup: threads
   32..127 each call side(threadIdx.x - 32) once, concurrently with the producer and the
   consumers, and the function returns when it and every tile are done. Side work runs
   with at most 40 registers per thread (setmaxnreg), may use named barrier 1 for its 96
   threads (bar.sync 1, 96), may meet the consumers on barriers the output policy shares
   with it (ids 2..13; the fused GEMM + reduce-scatter releases the consumers' half tiles
   from warp 1 this way) and must not touch smem. The fused all-gather + GEMM uses it
   to fetch A on every SM while the same SMs multiply. */
template <class Cfg, typename T, bool B_KN, typename OutT, class Out, class Sched, class WaitA, typename BiasT, class Side>
__device__ __forceinline__ void iris_gemm_tma_tiles_out(const CUtensorMap *ta, const CUtensorMap *tb, Out out, const BiasT *bias, int M, int N, int K,
                                                        Sched sched, WaitA wait_a, char *smem, Side side) {
#if IRIS_GC_WGMMA
  const uint32_t ring = (iris_gc_smem_u32(smem) + 1023u) & ~1023u, full = ring + Cfg::STAGES * Cfg::stage_bytes, empty = full + 8 * Cfg::STAGES;
  __syncthreads(); /* the previous user of smem is done */
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::STAGES; ++s) {
      iris_gc_mbar_init(full + 8 * s, 1);  /* the producer's arrive + the TMA bytes */
      iris_gc_mbar_init(empty + 8 * s, Cfg::stage_readers); /* lane 0 of each consumer warp that reads it */
    }
    iris_gc_fence_barrier_init();
    iris_gc_fence_proxy_async(); /* the TMA unit (async proxy) signals these barriers */
  }
  if (Cfg::CLUSTER > 1) iris_gc_cluster_sync(); /* the other CTA's barriers exist before its multicasts and arrivals */
  else __syncthreads();
  const int wg = threadIdx.x >> 7;
  if (wg == 0) {
    iris_gc_setmaxnreg_dec<40>();
    if (threadIdx.x == 0) iris_gc_tma_produce<Cfg, B_KN>(ta, tb, M, N, K, sched, wait_a, ring, full, empty);
    else if (threadIdx.x >= 32) side((int)threadIdx.x - 32);
    __syncwarp();
    iris_gc_setmaxnreg_inc<168>(); /* back to the kernel's count for the caller's code */
  } else {
    iris_gc_setmaxnreg_inc<232>();
    iris_gc_tma_consumer<Cfg::PINGPONG>::template run<Cfg, T, B_KN, OutT>(out, bias, M, N, K, sched, wait_a, ring, full, empty, wg - 1);
    iris_gc_setmaxnreg_dec<168>();
  }
  __syncthreads(); /* every TMA has landed (the consumers waited for all) and every wgmma retired */
  if (Cfg::CLUSTER > 1) iris_gc_cluster_sync(); /* no arrival of the other CTA on this CTA's barriers is still on its way */
#else
  (void)ta; (void)tb; (void)out; (void)bias; (void)M; (void)N; (void)K; (void)sched; (void)wait_a; (void)smem; (void)side;
#endif
}
template <class Cfg, typename T, bool B_KN, typename OutT, class Sched, class WaitA, typename BiasT, class Side>
__device__ __forceinline__ void iris_gemm_tma_tiles(const CUtensorMap *ta, const CUtensorMap *tb, OutT *C, int ldc, const BiasT *bias, int M, int N, int K,
                                                    Sched sched, WaitA wait_a, char *smem, Side side) {
  const iris_gemm_tma_out<OutT> out = {C, ldc};
  iris_gemm_tma_tiles_out<Cfg, T, B_KN, OutT>(ta, tb, out, bias, M, N, K, sched, wait_a, smem, side);
}
template <class Cfg, typename T, bool B_KN, typename OutT, class Sched, class WaitA, typename BiasT>
__device__ __forceinline__ void iris_gemm_tma_tiles(const CUtensorMap *ta, const CUtensorMap *tb, OutT *C, int ldc, const BiasT *bias, int M, int N, int K,
                                                    Sched sched, WaitA wait_a, char *smem) {
  iris_gemm_tma_tiles<Cfg, T, B_KN, OutT, Sched, WaitA, BiasT, iris_gemm_no_side>(ta, tb, C, ldc, bias, M, N, K, sched, wait_a, smem, iris_gemm_no_side());
}
#endif /* IRIS_GEMM_CORE_CUDA */
#endif /* IRIS_INTERNAL_GEMM_CORE_TMA_H */
