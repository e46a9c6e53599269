/* iris_gemm_reduce.h — GEMM + reduce-scatter and GEMM + all-reduce: the row-parallel half
 * of tensor parallelism (C host API, C++ device building blocks)
 *
 * What it is
 *   Rank r holds A_r (M x K/W, row-major) and B_r (K/W x N row-major, or N x K/W with
 *   desc.b_transposed = 1: the PyTorch Linear weight layout); the result is
 *     C = sum over r of A_r * B_r  (+ bias)                          (M x N)
 *   bf16 or fp16 inputs, fp32 accumulation, the sum across ranks in fp32 in the fixed rank
 *   order 0, 1, ..., W-1, the bias (N values of the output type) added once, and one
 *   rounding to the output type (bf16, fp16 or fp32).
 *   fp8 e4m3 inputs (A and B) with per-tensor scales (iris_gemm_rs_run_scaled: device
 *   pointers to one float each, per rank): C = sum over r of (a_scale_r A_r)(b_scale_r B_r)
 *   (+ bias); cuBLASLt's fp8 GEMM writes the scaled product into the fp32 partial (fp32
 *   accumulation, fast accumulation off), and the rest is as above: one rounding.
 *     IRIS_GEMM_REDUCE_SCATTER  rank r receives rows [r*M/W, (r+1)*M/W) of C: its C is an
 *                               (M/W) x N matrix (sequence parallelism);
 *     IRIS_GEMM_ALL_REDUCE      every rank receives all of C (M x N), bitwise the same on
 *                               every rank.
 *
 *   Paths (iris_gemm_rs_path tells which one a plan runs):
 *     IRIS_GEMM_PATH_PIPELINED  cuBLASLt computes this rank's fp32 partial of C in W chunks
 *                               of M/W rows, in owner order: first the rows owned by rank
 *                               r+1, then r+2, ..., its own rows last. While the next chunk
 *                               computes, a copy engine pushes the finished chunk into its
 *                               owner's receive slot (symmetric heap); the own chunk is
 *                               computed straight into the own slot. After a device barrier
 *                               each rank reduces the W slots of its rows (one SM kernel).
 *                               ALL_REDUCE: that kernel also stores the reduced rows into
 *                               every peer's heap copy of C, and after a second barrier each
 *                               rank copies the peers' rows into its C (an all-gather of
 *                               the rounded rows, hence bitwise equal everywhere).
 *     IRIS_GEMM_PATH_UNFUSED    the baseline: one cuBLASLt GEMM of the whole fp32 partial
 *                               into the heap, a device barrier, then one SM kernel that
 *                               reads the W partials of its rows through the heap (all rows
 *                               for ALL_REDUCE) and reduces them.
 *     IRIS_GEMM_PATH_FUSED      (NVIDIA Hopper, sm_90a build with the GEMM core; bf16/fp16
 *                               inputs) one persistent kernel on the TMA/wgmma core
 *                               (internal/gemm_core_tma.h, one CTA per SM) computes the fp32
 *                               partial in 128 x 256 tiles in owner order (rows of rank r+1
 *                               first, own rows last); its epilogue stores each tile's rows
 *                               straight into their owners' receive slots (a tile may span
 *                               owners) and, per 64-row half tile, release-signals a flag
 *                               on each owner (system scope, the call's epoch). A reduce
 *                               kernel on the same stream waits (bounded) for the W flags of
 *                               each of its half tiles and reduces as above (ALL_REDUCE:
 *                               the same all-gather of the rounded rows as the pipelined
 *                               path). Epochs come from per-CTA counters on the device, so
 *                               graph replays work. Elsewhere (AMD, no core, no sm_90a
 *                               pass): create returns IRIS_ERROR_UNSUPPORTED.
 *   AUTO picks per shape (iris_gemm_rs_choose_path): pipelined for W > 1 (not yet measured
 *   against the fused path on several GPUs), unfused for W = 1.
 *
 * Quick start
 *     #define IRIS_IMPLEMENTATION
 *     #include "iris_gemm_reduce.h"   // also iris.h, iris_device.h, iris_collectives.h, iris_gemm.h
 *     iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
 *     d.op = IRIS_GEMM_REDUCE_SCATTER; d.M = 8192; d.N = 8192; d.K = 28672; // K: the total
 *     d.b_transposed = 1;
 *     iris_gemm_rs_t *p;
 *     iris_gemm_rs_create(ctx, &d, &p);                 // collective, outside capture
 *     iris_gemm_rs_run(p, a_r, b_r, NULL, c_r, stream); // capturable; every rank
 *     iris_gemm_rs_destroy(p);                          // collective
 *   Link -lcublasLt. A, B, bias and C are ordinary device memory (not the heap): the plan
 *   keeps its fp32 workspace on the symmetric heap.
 *
 * Rules
 *   - Collective: every rank creates the plan with the same description and calls run the
 *     same number of times in the same order.
 *   - Shapes: M % W == 0 (for both ops: rows are reduced by their owner), K % W == 0 and
 *     (K/W) % 8 == 0, N % 8 == 0 (16-byte rows). M, N, K/W need not be tile multiples.
 *     A and B 256-byte aligned (cuBLASLt), C and bias 16-byte aligned. Anything else:
 *     IRIS_ERROR_INVALID_ARGUMENT naming the rule.
 *   - fp8 (a_type IRIS_FLOAT8_E4M3, B the same): b_transposed = 1 (cuBLASLt's fp8 GEMM on
 *     Hopper takes only the "TN" layout; else IRIS_ERROR_UNSUPPORTED), (K/W) % 16 == 0
 *     (else IRIS_ERROR_INVALID_ARGUMENT); run through iris_gemm_rs_run_scaled with both
 *     scales (iris_gemm_rs_run, or a NULL scale: IRIS_ERROR_INVALID_ARGUMENT). e5m2:
 *     IRIS_ERROR_UNSUPPORTED. Needs an sm_89+ GPU (cuBLASLt finds no algorithm elsewhere:
 *     create returns IRIS_ERROR_UNSUPPORTED).
 *   - One node: a context that spans several nodes (iris_num_nodes > 1) is refused with
 *     IRIS_ERROR_UNSUPPORTED, as by iris_ag_gemm_create.
 *   - Workspace, on the symmetric heap: pipelined and fused M*N*4 bytes (the receive
 *     slots), plus M*N*sizeof(C type) for ALL_REDUCE; fused also 4 * (W * ceil(M/64) *
 *     ceil(N/256) + 1033) bytes of flags, error record and counters; unfused M*N*4. Local
 *     memory: pipelined (W-1)/W*M*N*4 bytes of chunk staging, and (pipelined, unfused) 32
 *     MB of cuBLASLt workspace. A heap that cannot hold the workspace:
 *     IRIS_ERROR_OUT_OF_MEMORY naming the bytes.
 *   - Ordering: run starts with a device barrier (every rank has reached the call, so its
 *     previous call's readers of the workspace are gone); when its work completes on the
 *     stream, C is final on this rank and A, B may be overwritten.
 *   - Waits: the device barriers of iris_collectives.h (bounded by IRIS_WAIT_TIMEOUT_NS;
 *     a timeout is the context's fault, iris_get_async_error); fused path: the reduce
 *     kernel's waits for the peers' tiles, bounded by IRIS_WAIT_TIMEOUT_NS, the first
 *     expiry recorded in the plan's error record (iris_gemm.h's, the rest of that call's
 *     waits then return at once, and the peers are told); iris_gemm_rs_check reports it.
 *   - Graphs: run allocates nothing and never synchronises the host: capture and replay
 *     freely. Create the plan before capturing.
 *   - AMD (hipcc): the paths need cuBLASLt or the TMA core; create returns
 *     IRIS_ERROR_UNSUPPORTED (fp8 included). The device building blocks compile there
 *     (unverified on hardware).
 *   - Fused path: bf16/fp16 inputs only (fp8: IRIS_ERROR_UNSUPPORTED); create needs the
 *     TMA core in this binary for this GPU (an sm_90a pass, IRIS_GEMM_NO_CORE not defined;
 *     else IRIS_ERROR_UNSUPPORTED).
 *
 * Device building blocks (C++, for users' own GEMM kernels; see
 * examples/gemm_reduce_scatter.cu): a grid of fp32 contribution slots on the heap,
 * iris_gemm_contrib_t; iris_gemm_push_tile stores a finished fp32 tile into its owner's
 * slot for this rank and signals it (system-scope release, an epoch); iris_gemm_reduce_tile
 * waits (bounded, acquire) for the W contributions of a tile and sums them in rank order,
 * adds the bias, rounds once. docs/gemm_reduce.md has the protocol.
 */
#ifndef IRIS_GEMM_REDUCE_H
#define IRIS_GEMM_REDUCE_H
#include "iris_gemm.h"

typedef enum iris_gemm_reduce_op { IRIS_GEMM_REDUCE_SCATTER = 0, IRIS_GEMM_ALL_REDUCE } iris_gemm_reduce_op_t;

/* What to compute and how. Start from IRIS_GEMM_RS_DESC_INIT. */
typedef struct iris_gemm_rs_desc {
  size_t struct_size;
  iris_gemm_reduce_op_t op;
  long long M, N, K;     /* the whole problem: C is M x N, K the total (each rank has K/W) */
  iris_dtype_t a_type;   /* IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT8_E4M3 (with scales); B has the same type */
  iris_dtype_t c_type;   /* IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT32; bias too */
  int b_transposed;      /* 0: B_r is K/W x N row-major; 1: B_r is N x K/W row-major */
  int has_bias;          /* 1: run takes N bias values, added once to every row of C */
  iris_gemm_path_t path; /* IRIS_GEMM_PATH_AUTO, _PIPELINED or _UNFUSED */
} iris_gemm_rs_desc_t;
#define IRIS_GEMM_RS_DESC_INIT {sizeof(iris_gemm_rs_desc_t), IRIS_GEMM_REDUCE_SCATTER, 0, 0, 0, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, IRIS_GEMM_PATH_AUTO}

typedef struct iris_gemm_rs iris_gemm_rs_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Every rank, collective, outside graph capture. Checks the description (the same on
 * every rank, else IRIS_ERROR_MISMATCH on every rank; then the shape rules, else
 * IRIS_ERROR_INVALID_ARGUMENT naming the rule; e5m2, fp8 with b_transposed = 0, the fused
 * path without the TMA core or with fp8, the kernel-unfused path, a multi-node context, no
 * cuBLASLt: IRIS_ERROR_UNSUPPORTED), chooses the path,
 * allocates the heap workspace (the same sequence on every rank; IRIS_ERROR_OUT_OF_MEMORY
 * naming the bytes when the heap cannot hold it) and the local buffers, prepares the
 * cuBLASLt GEMMs. A plan exists on every rank or on none; on failure nothing stays
 * allocated and *out is NULL. */
IRIS_API iris_status_t iris_gemm_rs_create(iris_t *ctx, const iris_gemm_rs_desc_t *desc, iris_gemm_rs_t **out);
/* Every rank, the same sequence of calls. Enqueues C = sum_r A_r * B_r (+ bias) on stream
 * (REDUCE_SCATTER: this rank's M/W rows; ALL_REDUCE: all M rows). a: M x K/W, b: this
 * rank's B shard, bias: NULL unless desc.has_bias, c: the output. Capturable; allocates
 * nothing. Ordered after the context's previous communication call whatever its stream (as
 * the collectives and iris_ag_gemm_run); returns the context's fatal fault at once
 * (iris_get_async_error). Bad pointers: IRIS_ERROR_INVALID_ARGUMENT, nothing enqueued. */
IRIS_API iris_status_t iris_gemm_rs_run(iris_gemm_rs_t *p, const void *a, const void *b, const void *bias, void *c, iris_stream_t stream);
/* As iris_gemm_rs_run, with per-tensor scales for fp8 inputs: C = sum_r (a_scale_r * A_r) *
 * (b_scale_r * B_r) (+ bias), where a_scale and b_scale point to one float each in device
 * memory (read when the GEMM runs, so a graph replay reads the current values). An fp8
 * plan must come here (iris_gemm_rs_run refuses it) with both scales; a bf16/fp16 plan
 * takes NULL scales (then this is iris_gemm_rs_run). Else IRIS_ERROR_INVALID_ARGUMENT
 * naming the rule, nothing enqueued. */
IRIS_API iris_status_t iris_gemm_rs_run_scaled(iris_gemm_rs_t *p, const void *a, const void *b, const float *a_scale, const float *b_scale, const void *bias, void *c,
                                               iris_stream_t stream);
/* Synchronous, after the plan's runs have completed on their streams. The pipelined and
 * unfused paths wait only in the device barriers of iris_collectives.h, which report their
 * own timeouts (iris_get_async_error): this returns IRIS_SUCCESS for them (and
 * IRIS_ERROR_INVALID_ARGUMENT for a NULL plan). Fused path: the first wait for a peer's
 * tile that ran past IRIS_WAIT_TIMEOUT_NS since the last check (IRIS_ERROR_TIMEOUT naming
 * the call, the peer, the tile; or a peer that gave up on a call, or a stuck TMA pipeline),
 * and clears the record; IRIS_SUCCESS when none. */
IRIS_API iris_status_t iris_gemm_rs_check(iris_gemm_rs_t *p);
/* The path the plan runs (IRIS_GEMM_PATH_AUTO for NULL). */
IRIS_API iris_gemm_path_t iris_gemm_rs_path(const iris_gemm_rs_t *p);
/* The path AUTO picks for a description at a world size on this build (no GPU work). */
IRIS_API iris_gemm_path_t iris_gemm_rs_choose_path(const iris_gemm_rs_desc_t *desc, int world_size);
/* Every rank, collective: free the plan (synchronises the device first, then frees the heap
 * blocks in reverse order). NULL: IRIS_SUCCESS. */
IRIS_API iris_status_t iris_gemm_rs_destroy(iris_gemm_rs_t *p);
#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
/* ========================================================================= */
/*        device building blocks: push a tile to its owner, reduce it          */
/* ========================================================================= */
/* Contribution slots on the symmetric heap, the same on every rank: for each of the
 * owner's tiles (an index the kernel chooses), one slot of tile_elems fp32 values per
 * source rank, and one epoch flag per (tile, source rank). Flags start at 0 (iris_calloc)
 * and are never reset: each use passes the next epoch (1, 2, ...). */
typedef struct iris_gemm_contrib {
  float *data;     /* heap: [tiles][world_size][tile_elems] */
  unsigned *flags; /* heap: [tiles][world_size] */
  int tile_elems;
} iris_gemm_contrib_t;

/* Whole block (1-D, every thread, same arguments). Stores the rows x cols fp32 values at
 * src (row stride ld_src; global or shared memory) into owner's slot (tile, this rank),
 * packed with row stride cols (rows * cols <= tile_elems), then, after a block barrier,
 * thread 0 release-stores epoch into owner's flag (tile, this rank) at system scope: a
 * thread of the owner that acquires the flag sees the tile. owner may be this rank. The
 * caller must not push epoch e+1 into a slot before the owner has reduced epoch e (a
 * barrier between calls, or a flag back). */
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

/* Whole block (1-D, blockDim.x >= world_size). Threads 0..W-1 each wait (acquire, system
 * scope, bounded by IRIS_WAIT_TIMEOUT_NS) until this rank's flag (tile, q) has reached
 * epoch (wrap-safe), the block meets, then out[r * ld_out + c] = round(sum over q = 0..W-1
 * in that order of slot (tile, q)[r * cols + c] (fp32) + bias[c]) for the rows x cols tile;
 * bias: NULL or the tile's first column. OutT: float, iris_bf16_t or iris_f16_t
 * (iris_collectives.h). Returns false in every thread, and writes nothing, if a wait
 * timed out (a peer did not push: stuck, dead, or not making the same calls). */
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

/* ========================================================================= */
/*                the plan's reduction kernel (SM, vectorised)               */
/* ========================================================================= */
/* Rows x N fp32 values from each of nsrc sources (row stride N), summed in source order,
 * plus bias, rounded once, stored into each of nout outputs (row stride N). */
typedef struct iris_gemm_rs_red {
  const float *src[IRIS_MAX_RANKS];
  void *out[IRIS_MAX_RANKS];
  const void *bias;
  long long rows, N;
  int nsrc, nout;
} iris_gemm_rs_red_t;

template <typename OutT>
struct alignas(4 * sizeof(OutT)) iris_gemm_rs_vec4 {
  OutT v[4];
};
/* One thread: the 4 values of vector i (elements 4i .. 4i+3 of the rows x N block) of a. */
template <typename OutT>
IRIS_DEVICE_INLINE void iris_gemm_rs_sum4(const iris_gemm_rs_red_t &a, long long i) {
  const OutT *bias = (const OutT *)a.bias;
  {
    const long long col = (i * 4) % a.N;
    float4 s = *((const float4 *)a.src[0] + i);
    for (int q = 1; q < a.nsrc; ++q) {
      const float4 x = *((const float4 *)a.src[q] + i);
      s.x += x.x; s.y += x.y; s.z += x.z; s.w += x.w;
    }
    if (bias) {
      s.x += iris_coll_up<OutT>(bias[col]);
      s.y += iris_coll_up<OutT>(bias[col + 1]);
      s.z += iris_coll_up<OutT>(bias[col + 2]);
      s.w += iris_coll_up<OutT>(bias[col + 3]);
    }
    iris_gemm_rs_vec4<OutT> o;
    o.v[0] = iris_coll_down<OutT>(s.x);
    o.v[1] = iris_coll_down<OutT>(s.y);
    o.v[2] = iris_coll_down<OutT>(s.z);
    o.v[3] = iris_coll_down<OutT>(s.w);
    for (int k = 0; k < a.nout; ++k) ((iris_gemm_rs_vec4<OutT> *)a.out[k])[i] = o;
  }
}
template <typename OutT>
__global__ void iris_gemm_rs_reduce_kernel(iris_gemm_rs_red_t a) {
  const long long nv = a.rows * a.N / 4;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nv; i += (long long)gridDim.x * blockDim.x) iris_gemm_rs_sum4<OutT>(a, i);
}

#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
/* ========================================================================= */
/*     the fused path: a TMA-core GEMM that pushes its tiles to their owners    */
/* ========================================================================= */
/* Protocol of a call (epoch e = the CTA's counter + 1: every call runs every CTA of the
 * GEMM kernel once, so e is the same on every rank and CTA; kept on the device, so graph
 * replays advance it):
 *   GEMM kernel (grid: one CTA per SM): this rank's fp32 partial P = A_r * B_r, 128 x BN
 *     tiles (ping-pong core, 128 x 128, by default; IRIS_GEMM_RS_PINGPONG) in owner order (m-tiles from the row owned by rank me+1 on, wrapping: this
 *     rank's own rows last; groups of `raster` m-tiles share B in L2). The epilogue
 *     stores row `row` of a tile into slot `me` of its owner q = row / ml (part on rank q:
 *     [W][ml][N] fp32; a tile's rows may go to several owners). After a consumer
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
  float *part;        /* heap [W][ml][N] fp32: slot q holds rank q's partial of this rank's rows */
  unsigned *flags;    /* heap [W][halves][tiles_n]: epochs (source, 64-row half, 128-column n-tile) */
  unsigned *err;      /* heap [IRIS_GEMM_ERR_WORDS], local use: the error record (iris_gemm.h) */
  unsigned *counters; /* heap [ctas], local use: the epoch of each GEMM CTA */
  int M, N, K, ml, halves, tiles_m, tiles_n, rot, raster;
} iris_gemm_rs_fused_dev_t;

/* Flags are kept per 128 columns (IRIS_GEMM_RS_FLAG_BN), whatever the GEMM's tile width:
 * a 128 x 256 tile's half signals two. */
#define IRIS_GEMM_RS_FLAG_BN 128
/* The release of one finished 64-row half tile (rows [r0, r0 + 64), columns [n0, n0 + BN))
 * to the owners of its rows, by `n` threads t = 0..n-1 of which the half's stores are
 * visible (after a barrier with the storing threads): thread t release-stores the epoch
 * (system scope) into flags (me, half, each 128-column tile of the half) of owners q0 + t,
 * q0 + t + n, ... Nothing for a half beyond M. */
template <int BN>
__device__ __forceinline__ void iris_gemm_rs_signal_half(const iris_gemm_rs_fused_dev_t &d, unsigned epoch, int r0, int n0, int t, int n) {
  if (r0 >= d.M) return;
  const int q0 = r0 / d.ml, q1 = (min(r0 + 64, d.M) - 1) / d.ml;
  unsigned *flag = d.flags + ((size_t)d.ctx.rank * d.halves + r0 / 64) * d.tiles_n + n0 / IRIS_GEMM_RS_FLAG_BN;
  const int nf = (min(n0 + BN, d.N) - n0 + IRIS_GEMM_RS_FLAG_BN - 1) / IRIS_GEMM_RS_FLAG_BN;
  for (int q = q0 + t; q <= q1; q += n)
    for (int f = 0; f < nf; ++f) iris_signal(d.ctx, flag + f, epoch, q);
}

/* The GEMM's output policy (internal/gemm_core_tma.h): rows into their owners' slots,
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
/* The side work of the offloaded policy (internal/gemm_core_tma.h: threads 32..127 of the
 * producer warpgroup, 40 registers, no smem): warp 1 (side index 0..31) releases the
 * flags of every half tile the consumers stored, in their order; warps 2, 3 do nothing.
 * Cooperative core: half h of each tile comes from warpgroup h; ping-pong (PP): both
 * halves of the v-th stored tile come from warpgroup v % 2. After each half of warpgroup
 * c but c's last, warp 1 arrives on 4 + c (the back-pressure above). */
template <int BN, bool PP>
struct iris_gemm_rs_signal_side {
  const iris_gemm_rs_fused_dev_t *d;
  iris_ag_gemm_sched sched;
  unsigned epoch;
  int M, N;
  __device__ __forceinline__ void operator()(int s) const {
    if (s >= 32) return;
    iris_ag_gemm_sched sc = sched;
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
  unsigned *err;
  unsigned epoch;
  __device__ void operator()(int, int) const {}
  __device__ void stalled() const { iris_ag_gemm_fail(err, epoch, IRIS_GEMM_WAIT_PIPELINE, -1, 0, 0, -1); }
};
template <> struct iris_gc_waits<iris_gemm_rs_no_wait> { enum { value = 0 }; };

/* Where the fused GEMM releases its half tiles' flags: 1 (default) warp 1 of the producer
 * warpgroup (iris_gemm_rs_push_out_offload), 0 the consumer warpgroups themselves (each
 * waits for its release before the next tile's MMAs). */
#ifndef IRIS_GEMM_RS_SIGNAL_OFFLOAD
#define IRIS_GEMM_RS_SIGNAL_OFFLOAD 1
#endif
/* 1 (default): the fused GEMM stores its fp32 tiles as the MMA left them (8-byte pairs,
 * no quad transpose: iris_gc_rows_direct, internal/gemm_core.h); 0: 16-byte stores after
 * the transpose, as the plain core. The same values at the same places either way. On one
 * H100 (session 8, bench_gemm_rs local) the direct stores were faster at all 24 shapes,
 * by up to 13% (16384 x 8192 x 8192: 3.485 against 3.944 ms). */
#ifndef IRIS_GEMM_RS_DIRECT_STORES
#define IRIS_GEMM_RS_DIRECT_STORES 1
#endif
/* The fused GEMM kernel's variant: bit 0 IRIS_GEMM_RS_SIGNAL_OFFLOAD, bit 1
 * IRIS_GEMM_RS_DIRECT_STORES; bit 2 (the ping-pong core) is chosen per plan (the bench
 * compares them). On the ping-pong core the stores are always the transposed 16-byte
 * ones: the direct 8-byte pairs measured up to 25% slower there (session 9, run 4), while
 * they are faster on the cooperative core. */
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
 * (iris_gemm_rs_choose_pingpong). Measured on one H100 (BENCHMARKS.md, session 9): the
 * ping-pong core wins where 128 x 256 tiles quantise badly (M = 1024, N = 5120: 160 tiles
 * on 132 SMs; 19-26% faster) and at short K (K/W = 1024-1728: up to 12% faster, its
 * epilogue hidden), and loses at long K (its mainloop reached only 55-90% of the
 * cooperative core's rate; session 10: the 128 x 128 tiles' L2 and DRAM traffic, see
 * docs/gemm_reduce.md). */
#ifndef IRIS_GEMM_RS_PINGPONG
#define IRIS_GEMM_RS_PINGPONG (-1)
#endif
/* The kernel's core call, per signal placement (a tag: only one is instantiated). */
template <int SIG> struct iris_gemm_rs_sig {};
template <class Cfg, typename T, bool B_KN, bool DIRECT>
__device__ __forceinline__ void iris_gemm_rs_fused_tiles(const CUtensorMap &ta, const CUtensorMap &tb, const iris_gemm_rs_push_out<Cfg::BN, DIRECT> &out,
                                                         const iris_ag_gemm_sched &sc, const iris_gemm_rs_no_wait &w, char *smem, iris_gemm_rs_sig<0>) {
  const iris_gemm_rs_fused_dev_t &d = *out.d;
  iris_gemm_tma_tiles_out<Cfg, T, B_KN, float>(&ta, &tb, out, (const float *)nullptr, d.M, d.N, d.K, sc, w, smem, iris_gemm_no_side());
}
template <class Cfg, typename T, bool B_KN, bool DIRECT>
__device__ __forceinline__ void iris_gemm_rs_fused_tiles(const CUtensorMap &ta, const CUtensorMap &tb, const iris_gemm_rs_push_out<Cfg::BN, DIRECT> &out,
                                                         const iris_ag_gemm_sched &sc, const iris_gemm_rs_no_wait &w, char *smem, iris_gemm_rs_sig<1>) {
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
  const iris_ag_gemm_sched sc =
      iris_ag_gemm_make_sched<Cfg>((int)blockIdx.x, (int)gridDim.x, d.tiles_m, (d.N + Cfg::BN - 1) / Cfg::BN, d.rot, d.raster);
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
      ok = iris_ag_gemm_wait_flag<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(d.err, d.flags + ((size_t)threadIdx.x * d.halves + h) * d.tiles_n + nt, epoch, epoch,
                                                                         IRIS_GEMM_WAIT_TILE, (int)threadIdx.x, h * d.tiles_n + nt);
    if (!__syncthreads_and(ok)) continue; /* recorded; these rows of C stay unwritten */
    const int ra = max(h * 64, row0) - row0, rb = min(h * 64 + 64, row0 + d.ml) - row0;
    const int ca = nt * bn / 4, w = min(nt * bn + bn, d.N) / 4 - ca;
    for (int i = (int)threadIdx.x; i < (rb - ra) * w; i += (int)blockDim.x) iris_gemm_rs_sum4<OutT>(r, (long long)(ra + i / w) * nq + ca + i % w);
  }
  __syncthreads();
  if (threadIdx.x == 0) iris_gemm_err_tell_peers(d.ctx, d.err, epoch);
}
#endif /* IRIS_GEMM_HAVE_CORE && !IRIS_USE_HIP */

/* ========================================================================= */
/*                               host side                                   */
/* ========================================================================= */
#if defined(IRIS_IMPLEMENTATION)
struct iris_gemm_rs {
  iris_t *ctx;
  iris_gemm_rs_desc_t d;
  iris_gemm_path_t path;
  int W, me;
  long long ml, kl;      /* rows per owner (M/W), K per rank (K/W) */
  size_t es, cs;         /* element sizes of A/B and of C */
  float *part;           /* heap: unfused, the M x N fp32 partial; pipelined, W receive slots of ml x N */
  char *red;             /* heap, pipelined ALL_REDUCE: M x N of the output type (peers' reduced rows) */
  float *stage;          /* local, pipelined: W-1 chunks of ml x N fp32 */
  iris_ag_gemm_t *blas;  /* the cuBLASLt GEMM of iris_gemm.h (its helpers; K = K/W, fp32 out, no bias) */
  iris_stream_t copy;    /* pipelined: the push stream */
  iris_gemm_event_t fork, join, done[IRIS_MAX_RANKS];
  int sms;
  int pingpong;          /* fused: the GEMM kernel runs the ping-pong core (iris_gemm_rs_choose_pingpong) */
  unsigned *sync;        /* heap, fused: the flags [W][halves][tiles_n], the error record, the CTA counters */
  int rctas;             /* fused: CTAs of the reduce kernel */
#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
  iris_gemm_rs_fused_dev_t fd; /* fused: the kernels' view */
#endif
};
/* The fused path's tile height (both core configurations). */
#define IRIS_GEMM_RS_BM 128
/* Words of the fused path's `sync` block (flags, error record, one counter per CTA slot). */
static inline size_t iris_gemm_rs_sync_words(const iris_gemm_rs_desc_t *d, int W) {
  return (size_t)W * (size_t)((d->M + 63) / 64) * (size_t)((d->N + 127) / 128) + IRIS_GEMM_ERR_WORDS + IRIS_GEMM_MAX_SLOTS;
}

IRIS_DEF iris_gemm_path_t iris_gemm_rs_path(const iris_gemm_rs_t *p) { return p ? p->path : IRIS_GEMM_PATH_AUTO; }

/* AUTO: the pipelined path (its pushes overlap the chunk GEMMs; the unfused path moves
 * every partial after the whole GEMM). Not yet measured on a GPU: see docs/gemm_reduce.md.
 * At world size 1 there is nothing to overlap: unfused (one GEMM, one pass). */
IRIS_DEF iris_gemm_path_t iris_gemm_rs_choose_path(const iris_gemm_rs_desc_t *d, int W) {
  if (!d) return IRIS_GEMM_PATH_AUTO;
  if (d->path != IRIS_GEMM_PATH_AUTO) return d->path;
  return W > 1 ? IRIS_GEMM_PATH_PIPELINED : IRIS_GEMM_PATH_UNFUSED;
}

/* The rules of the header comment on one rank's description (the same verdict everywhere:
 * the descriptions agree by then). */
static iris_status_t iris_gemm_rs_check_desc(const iris_gemm_rs_desc_t *d, int W, int me) {
  const char *bad = NULL;
  if (d->struct_size != sizeof(iris_gemm_rs_desc_t)) bad = "struct_size is wrong: start from IRIS_GEMM_RS_DESC_INIT";
  else if (d->op != IRIS_GEMM_REDUCE_SCATTER && d->op != IRIS_GEMM_ALL_REDUCE) bad = "op must be IRIS_GEMM_REDUCE_SCATTER or IRIS_GEMM_ALL_REDUCE";
  else if (d->M < 1 || d->N < 1 || d->K < 1) bad = "M, N and K must be positive";
  else if (d->M > 0x7fffffffLL || d->N > 0x7fffffffLL || d->K > 0x7fffffffLL) bad = "M, N and K must be below 2^31";
  else if (d->a_type == IRIS_FLOAT8_E5M2)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: fp8 e5m2 inputs are not supported (cuBLASLt has no e5m2 x e5m2 GEMM); use IRIS_FLOAT8_E4M3", me);
  else if (d->a_type == IRIS_FLOAT8_E4M3 && !d->b_transposed)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_gemm_rs_create: fp8 inputs need b_transposed = 1 (B_r stored N x K/W: cuBLASLt's fp8 GEMM on Hopper takes only the \"TN\" layout)", me);
  else if (d->a_type != IRIS_BFLOAT16 && d->a_type != IRIS_FLOAT16 && d->a_type != IRIS_FLOAT8_E4M3) bad = "a_type must be IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT8_E4M3";
  else if (d->c_type != IRIS_BFLOAT16 && d->c_type != IRIS_FLOAT16 && d->c_type != IRIS_FLOAT32) bad = "c_type must be IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT32";
  else if (d->M % W) bad = "M must be divisible by the world size (rank r owns rows [r*M/W, (r+1)*M/W))";
  else if (d->K % W || (d->K / W) % 8) bad = "K must be divisible by the world size, and K/world_size a multiple of 8 (16-byte rows of A)";
  else if (d->N % 8) bad = "N must be a multiple of 8 (16-byte rows)";
  else if (d->a_type == IRIS_FLOAT8_E4M3 && (d->K / W) % 16) bad = "fp8 inputs need K/world_size a multiple of 16 (16-byte rows of A and B, cuBLASLt's fp8 rule)";
  else if ((unsigned)d->path >= IRIS_GEMM_PATH_COUNT) bad = "unknown path";
  if (bad) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_create: %s", me, bad);
  if (d->path == IRIS_GEMM_PATH_KERNEL_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: path '%s' is not in this version: use IRIS_GEMM_PATH_PIPELINED, _UNFUSED, _FUSED or _AUTO",
                            me, iris_gemm_path_name(d->path));
#if !defined(IRIS_GEMM_HAVE_CORE) || defined(IRIS_USE_HIP)
  if (d->path == IRIS_GEMM_PATH_FUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_gemm_rs_create: the fused path needs NVIDIA's TMA GEMM core, not in this build (AMD, or IRIS_GEMM_NO_CORE): use "
                            "IRIS_GEMM_PATH_PIPELINED, _UNFUSED or _AUTO", me);
#endif
  if (d->path == IRIS_GEMM_PATH_FUSED && d->a_type == IRIS_FLOAT8_E4M3)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: the fused path takes bf16 or fp16 inputs (not fp8)", me);
  return IRIS_SUCCESS;
}

#if defined(IRIS_GEMM_HAVE_BLAS)
#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
/* The fused GEMM kernel's launch for one input type and B layout (setup = 1: only raise
 * its shared-memory limit, at create). Tensor maps of A_r (M x K/W) and B_r, made per call
 * on the host (the buffers may change between calls; no GPU work, so capture is fine). */
template <typename T, bool B_KN, int SIG = IRIS_GEMM_RS_FUSED_VARIANT>
static int iris_gemm_rs_launch_fused(iris_gemm_rs_t *p, const void *a, const void *b, iris_stream_t s, int setup) {
  typedef typename iris_gemm_rs_cfg<SIG>::type Cfg;
  static_assert(Cfg::BM == IRIS_GEMM_RS_BM && Cfg::BN % IRIS_GEMM_RS_FLAG_BN == 0, "iris_gemm_rs: the flags are laid out for 128-row tiles, 128 columns each");
  void (*k)(const iris_gemm_rs_fused_dev_t, const CUtensorMap, const CUtensorMap) = iris_gemm_rs_fused_kernel<Cfg, T, B_KN, SIG>;
  CUtensorMap ta, tb;
  const int f16 = p->d.a_type == IRIS_FLOAT16;
  cudaError_t e;
  if (setup) return (int)cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Cfg::smem_bytes);
  if ((e = iris_gemm_tma_map(&ta, a, f16, p->d.M, p->kl, p->kl, Cfg::BM)) != cudaSuccess) return (int)e;
  if ((e = iris_gemm_tma_map_b<Cfg>(&tb, b, f16, B_KN, p->kl, p->d.N, B_KN ? p->d.N : p->kl)) != cudaSuccess) return (int)e;
  k<<<p->sms, Cfg::threads, Cfg::smem_bytes, s>>>(p->fd, ta, tb);
  return (int)cudaGetLastError();
}
/* The plan's variant (setup: both cores' kernels of this type and layout) */
template <typename T, bool B_KN>
static int iris_gemm_rs_launch_fused_plan(iris_gemm_rs_t *p, const void *a, const void *b, iris_stream_t s, int setup) {
  int e;
  if (setup && (e = iris_gemm_rs_launch_fused<T, B_KN, IRIS_GEMM_RS_PP_VARIANT>(p, a, b, s, 1)) != (int)cudaSuccess) return e;
  if (!setup && p->pingpong) return iris_gemm_rs_launch_fused<T, B_KN, IRIS_GEMM_RS_PP_VARIANT>(p, a, b, s, 0);
  return iris_gemm_rs_launch_fused<T, B_KN, IRIS_GEMM_RS_FUSED_VARIANT>(p, a, b, s, setup);
}
static int iris_gemm_rs_launch_fused_any(iris_gemm_rs_t *p, const void *a, const void *b, iris_stream_t s, int setup) {
  const int kn = !p->d.b_transposed;
  if (p->d.a_type == IRIS_FLOAT16)
    return kn ? iris_gemm_rs_launch_fused_plan<iris_gemm_elem_f16_t, true>(p, a, b, s, setup) : iris_gemm_rs_launch_fused_plan<iris_gemm_elem_f16_t, false>(p, a, b, s, setup);
  return kn ? iris_gemm_rs_launch_fused_plan<iris_gemm_elem_bf16_t, true>(p, a, b, s, setup) : iris_gemm_rs_launch_fused_plan<iris_gemm_elem_bf16_t, false>(p, a, b, s, setup);
}
#endif
/* Ping-pong (128 x 128 tiles) or cooperative (128 x 256) core for an M x N x kl (K/W)
 * partial on `sms` SMs; force 0 or 1 decides, -1 measures: ping-pong at short K (kl <=
 * 2048: the fp32 epilogue is a large share of a tile's time there, and ping-pong hides it)
 * or where the cooperative tiles keep under 75% of the SM-waves busy and the smaller
 * tiles keep more. */
static inline int iris_gemm_rs_choose_pingpong(long long M, long long N, long long kl, int sms, int force) {
  if (force >= 0) return force != 0;
  if (sms < 1) return 0;
  if (kl <= 2048) return 1;
  const long long tm = (M + 127) / 128, coop = tm * ((N + 255) / 256), pp = tm * ((N + 127) / 128);
  const double e_coop = (double)coop / (double)(((coop + sms - 1) / sms) * sms), e_pp = (double)pp / (double)(((pp + sms - 1) / sms) * sms);
  return e_coop < 0.75 && e_pp > e_coop;
}
#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
/* (the fused path's create, below) */
#endif

/* The fused path's local part of create (after the heap blocks). Collective first (every
 * rank gets here: the heap verdict is the same everywhere): which ranks share this GPU,
 * to size the reduce kernel (its CTAs wait for peers' tiles, so where ranks share a GPU
 * they hold at most half of its SMs together and the peers' GEMM CTAs always find SMs).
 * Then the TMA core's presence (else IRIS_ERROR_UNSUPPORTED) and the kernels' setup. */
static iris_status_t iris_gemm_rs_create_fused(iris_gemm_rs_t *p) {
#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
  iris_gemm_rs_fused_dev_t *v = &p->fd;
  const long long halves = (p->d.M + 63) / 64, tiles_n = (p->d.N + IRIS_GEMM_RS_FLAG_BN - 1) / IRIS_GEMM_RS_FLAG_BN; /* flag columns */
  int key[3] = {0, 0, 0}, keys[IRIS_MAX_RANKS][3], share = 0, q, e;
  iris_status_t st;
  cudaDeviceGetAttribute(&key[0], cudaDevAttrPciDomainId, iris_device(p->ctx));
  cudaDeviceGetAttribute(&key[1], cudaDevAttrPciBusId, iris_device(p->ctx));
  cudaDeviceGetAttribute(&key[2], cudaDevAttrPciDeviceId, iris_device(p->ctx));
  if ((st = iris_allgather_host(p->ctx, key, keys, sizeof key)) != IRIS_SUCCESS) return st;
  for (q = 0; q < p->W; ++q) share += !memcmp(keys[q], key, sizeof key);
  if (!iris_gemm_probe_wgmma())
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_gemm_rs_create: the fused path needs the TMA GEMM core (wgmma): build with an sm_90a device pass (-arch=sm_90a) and "
                            "run on a Hopper GPU", p->me);
  if (p->sms < 1 || p->sms > IRIS_GEMM_MAX_SLOTS) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: %d SMs", p->me, p->sms);
  if ((e = iris_gemm_rs_launch_fused_any(p, NULL, NULL, NULL, 1)) != (int)cudaSuccess) return iris_gemm_gpu_fail(p->ctx, "setting the fused kernel's shared memory", e);
  {
    /* the environment's IRIS_GEMM_RS_PINGPONG (0, 1 or auto) overrides the macro's default */
    const char *env = getenv("IRIS_GEMM_RS_PINGPONG");
    int force = IRIS_GEMM_RS_PINGPONG;
    if (env && *env) {
      if (!strcmp(env, "0") || !strcmp(env, "1")) force = env[0] - '0';
      else if (!strcmp(env, "auto")) force = -1;
      else
        return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_create: IRIS_GEMM_RS_PINGPONG='%s': use 0, 1 or auto", p->me, env);
    }
    p->pingpong = iris_gemm_rs_choose_pingpong(p->d.M, p->d.N, p->kl, p->sms, force);
  }
  /* one rank on this GPU: its GEMM kernel is done when the reduce kernel starts (same
   * stream) and the peers multiply on their own GPUs, so the reducers take every SM (at
   * world 1, half the SMs made the reduce 4x slower than its memory traffic, session 8) */
  p->rctas = share <= 1 ? p->sms : p->sms / (2 * share);
  if (p->rctas < 1) p->rctas = 1;
  if ((long long)p->rctas > ((p->ml + 63) / 64 + 1) * tiles_n) p->rctas = (int)(((p->ml + 63) / 64 + 1) * tiles_n);
  memset(v, 0, sizeof *v);
  v->ctx = iris_device_context(p->ctx);
  v->part = p->part;
  v->flags = p->sync;
  v->err = p->sync + (size_t)p->W * halves * tiles_n;
  v->counters = v->err + IRIS_GEMM_ERR_WORDS;
  v->M = (int)p->d.M;
  v->N = (int)p->d.N;
  v->K = (int)p->kl;
  v->ml = (int)p->ml;
  v->halves = (int)halves;
  v->tiles_m = (int)((p->d.M + IRIS_GEMM_RS_BM - 1) / IRIS_GEMM_RS_BM);
  v->tiles_n = (int)tiles_n;
  /* owner order: first the m-tile that holds rank me+1's first row */
  v->rot = (int)((long long)((p->me + 1) % p->W) * p->ml / IRIS_GEMM_RS_BM);
  v->raster = 8; /* groups of 8 m-tiles share B tiles in L2 */
  return IRIS_SUCCESS;
#else
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: no fused path in this build", p->me);
#endif
}

/* The local part of create, after the heap blocks: cuBLASLt (through iris_gemm.h's helpers,
 * on a bare iris_ag_gemm_t that describes the local GEMM), chunk staging, the push stream
 * and its events. Returns the first failure. */
static iris_status_t iris_gemm_rs_create_local(iris_gemm_rs_t *p) {
  iris_ag_gemm_t *g;
  iris_gemm_blas_shape_t *unused;
  iris_status_t st;
  int q;
  cudaDeviceGetAttribute(&p->sms, cudaDevAttrMultiProcessorCount, iris_device(p->ctx));
  if (p->path == IRIS_GEMM_PATH_FUSED) return iris_gemm_rs_create_fused(p);
  if (!(g = p->blas = (iris_ag_gemm_t *)calloc(1, sizeof *g))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  g->ctx = p->ctx;
  g->W = p->W;
  g->me = p->me;
  g->d.M = p->d.M;
  g->d.N = p->d.N;
  g->d.K = p->kl;
  g->d.a_type = p->d.a_type;
  g->d.c_type = IRIS_FLOAT32;
  g->d.b_transposed = p->d.b_transposed;
  g->es = p->es;
  g->cs = 4;
  g->gemm_streams = 1;
  g->path = p->path;
  if ((st = iris_gemm_blas_init(g)) != IRIS_SUCCESS) return st;
  if ((st = iris_gemm_blas_shape(g, p->path == IRIS_GEMM_PATH_UNFUSED ? p->d.M : p->ml, p->kl, &unused)) != IRIS_SUCCESS) return st;
  if (p->path != IRIS_GEMM_PATH_PIPELINED) return IRIS_SUCCESS;
  if (p->W > 1 && cudaMalloc((void **)&p->stage, (size_t)(p->W - 1) * p->ml * p->d.N * 4) != cudaSuccess) {
    cudaGetLastError();
    p->stage = NULL;
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: iris_gemm_rs_create: no device memory for the chunk staging buffer (%zu bytes)", p->me,
                            (size_t)(p->W - 1) * p->ml * p->d.N * 4);
  }
  if (cudaStreamCreateWithFlags(&p->copy, cudaStreamNonBlocking) != cudaSuccess || cudaEventCreateWithFlags(&p->fork, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventCreateWithFlags(&p->join, cudaEventDisableTiming) != cudaSuccess)
    return iris_gemm_gpu_fail(p->ctx, "creating the push stream", (int)cudaGetLastError());
  for (q = 0; q < p->W; ++q)
    if (cudaEventCreateWithFlags(&p->done[q], cudaEventDisableTiming) != cudaSuccess) return iris_gemm_gpu_fail(p->ctx, "creating a chunk event", (int)cudaGetLastError());
  return IRIS_SUCCESS;
}

/* Enqueue the reduction: rows x N from srcs into outs (see iris_gemm_rs_red_t). */
static iris_status_t iris_gemm_rs_reduce(iris_gemm_rs_t *p, iris_gemm_rs_red_t *r, iris_stream_t s) {
  const long long nv = r->rows * r->N / 4;
  long long blocks = (nv + 255) / 256;
  if (blocks > 8LL * p->sms) blocks = 8LL * p->sms;
  if (blocks < 1) blocks = 1;
  switch (p->d.c_type) {
  case IRIS_BFLOAT16: iris_gemm_rs_reduce_kernel<iris_bf16_t><<<(unsigned)blocks, 256, 0, s>>>(*r); break;
  case IRIS_FLOAT16: iris_gemm_rs_reduce_kernel<iris_f16_t><<<(unsigned)blocks, 256, 0, s>>>(*r); break;
  default: iris_gemm_rs_reduce_kernel<float><<<(unsigned)blocks, 256, 0, s>>>(*r); break;
  }
  if (cudaGetLastError() != cudaSuccess) return iris_gemm_gpu_fail(p->ctx, "launching the reduction kernel", (int)cudaGetLastError());
  return IRIS_SUCCESS;
}

/* UNFUSED: the whole partial into the heap, a barrier, every rank reduces its rows (all
 * rows for ALL_REDUCE) from the W partials, read through the heap. The next call's
 * opening barrier keeps a peer from overwriting its partial while this rank reads it. */
static iris_status_t iris_gemm_rs_run_unfused(iris_gemm_rs_t *p, const char *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  const long long N = p->d.N, row0 = p->d.op == IRIS_GEMM_ALL_REDUCE ? 0 : p->me * p->ml;
  iris_gemm_rs_red_t r;
  iris_status_t st;
  int q;
  if ((st = iris_gemm_blas_run(p->blas, a, p->kl, p->d.M, 0, b, NULL, p->part, s, 0)) != IRIS_SUCCESS) return st;
  if ((st = iris_barrier_device(p->ctx, s)) != IRIS_SUCCESS) return st;
  memset(&r, 0, sizeof r);
  for (q = 0; q < p->W; ++q) {
    void *src;
    iris_translate_host(p->ctx, p->part, q, &src);
    r.src[q] = (const float *)src + row0 * N;
  }
  r.nsrc = p->W;
  r.out[0] = c;
  r.nout = 1;
  r.bias = bias;
  r.rows = p->d.op == IRIS_GEMM_ALL_REDUCE ? p->d.M : p->ml;
  r.N = N;
  return iris_gemm_rs_reduce(p, &r, s);
}

/* The reduction of this rank's rows from the W receive slots (pipelined, fused): into C
 * (ALL_REDUCE: its own rows of C, and the same rows of every peer's `red` copy). */
static void iris_gemm_rs_own_rows(iris_gemm_rs_t *g, iris_gemm_rs_red_t *r, const void *bias, void *c) {
  const long long N = g->d.N, ml = g->ml;
  const int all = g->d.op == IRIS_GEMM_ALL_REDUCE;
  int q;
  memset(r, 0, sizeof *r);
  for (q = 0; q < g->W; ++q) r->src[q] = g->part + (size_t)q * ml * N;
  r->nsrc = g->W;
  r->bias = bias;
  r->rows = ml;
  r->N = N;
  r->out[r->nout++] = all ? (char *)c + (size_t)g->me * ml * N * g->cs : c;
  if (all)
    for (q = 0; q < g->W; ++q) {
      void *dst;
      if (q == g->me) continue;
      iris_translate_host(g->ctx, g->red + (size_t)g->me * ml * N * g->cs, q, &dst);
      r->out[r->nout++] = dst;
    }
}
/* ALL_REDUCE after the reduction of the own rows: a barrier (every rank's rows are in
 * `red`), then this rank copies the peers' rows from `red` into C. */
static iris_status_t iris_gemm_rs_gather(iris_gemm_rs_t *g, void *c, iris_stream_t s) {
  const size_t rows_bytes = (size_t)g->ml * g->d.N * g->cs;
  iris_status_t st;
  int q;
  if ((st = iris_barrier_device(g->ctx, s)) != IRIS_SUCCESS) return st;
  for (q = 0; q < g->W; ++q) {
    if (q == g->me) continue;
    IRIS_GEMM_TRY(iris_coll_memcpy_async((char *)c + q * rows_bytes, g->red + q * rows_bytes, rows_bytes, s), "copying the peers' rows into C");
  }
  return IRIS_SUCCESS;
}

/* PIPELINED: the chunk GEMMs in owner order (me+1, ..., me-1, me) on the caller's stream;
 * each non-own chunk goes to the staging buffer, and the push stream copies it into its
 * owner's slot `me` as soon as it is done; the own chunk lands in the own slot. Then the
 * push stream joins, a barrier (every slot on every rank is full), the reduction of the
 * own rows. ALL_REDUCE: the reduction also stores the rounded rows into every peer's `red`
 * copy; a second barrier, then this rank copies the peers' rows from `red` into C. The
 * next call's opening barrier keeps peers from refilling the slots (or `red`) before
 * this rank has read them. */
static iris_status_t iris_gemm_rs_run_pipelined(iris_gemm_rs_t *g, const char *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  const long long N = g->d.N, ml = g->ml;
  const size_t chunk = (size_t)ml * N * 4, a_rows = (size_t)ml * g->kl * g->es;
  const int all = g->d.op == IRIS_GEMM_ALL_REDUCE;
  iris_gemm_rs_red_t r;
  iris_status_t st;
  int i, q;
  IRIS_GEMM_TRY(iris_gemm_record(g->fork, s), "recording the fork event");
  IRIS_GEMM_TRY(iris_gemm_wait_event(g->copy, g->fork), "forking the push stream");
  for (i = 1; i < g->W; ++i) {
    float *st_i = g->stage + (size_t)(i - 1) * ml * N;
    void *dst;
    q = (g->me + i) % g->W;
    if ((st = iris_gemm_blas_run(g->blas, a + (size_t)q * a_rows, g->kl, ml, 0, b, NULL, st_i, s, 0)) != IRIS_SUCCESS) return st;
    IRIS_GEMM_TRY(iris_gemm_record(g->done[q], s), "recording a chunk event");
    IRIS_GEMM_TRY(iris_gemm_wait_event(g->copy, g->done[q]), "waiting for a chunk");
    iris_translate_host(g->ctx, (char *)g->part + (size_t)g->me * chunk, q, &dst);
    IRIS_GEMM_TRY(iris_coll_memcpy_async(dst, st_i, chunk, g->copy), "pushing a chunk to its owner");
  }
  if ((st = iris_gemm_blas_run(g->blas, a + (size_t)g->me * a_rows, g->kl, ml, 0, b, NULL, (char *)g->part + (size_t)g->me * chunk, s, 0)) != IRIS_SUCCESS) return st;
  IRIS_GEMM_TRY(iris_gemm_record(g->join, g->copy), "recording the push stream's end");
  IRIS_GEMM_TRY(iris_gemm_wait_event(s, g->join), "joining the push stream");
  if ((st = iris_barrier_device(g->ctx, s)) != IRIS_SUCCESS) return st; /* every slot full */
  iris_gemm_rs_own_rows(g, &r, bias, c);
  if ((st = iris_gemm_rs_reduce(g, &r, s)) != IRIS_SUCCESS || !all) return st;
  return iris_gemm_rs_gather(g, c, s);
}

#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
/* FUSED: the GEMM kernel (pushes every tile to its owner, signals it), then the reduce
 * kernel (waits for the W contributions of each of its tiles, reduces them); ALL_REDUCE:
 * as the pipelined path after its reduction (iris_gemm_rs_gather). Protocol at
 * iris_gemm_rs_fused_dev_t. */
static iris_status_t iris_gemm_rs_run_fused(iris_gemm_rs_t *g, const void *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  iris_gemm_rs_red_t r;
  int e;
  if ((e = iris_gemm_rs_launch_fused_any(g, a, b, s, 0)) != (int)cudaSuccess) return iris_gemm_gpu_fail(g->ctx, "launching the fused GEMM kernel", e);
  iris_gemm_rs_own_rows(g, &r, bias, c);
  switch (g->d.c_type) {
  case IRIS_BFLOAT16: iris_gemm_rs_fused_reduce_kernel<iris_bf16_t><<<g->rctas, 512, 0, s>>>(g->fd, r, IRIS_GEMM_RS_FLAG_BN); break;
  case IRIS_FLOAT16: iris_gemm_rs_fused_reduce_kernel<iris_f16_t><<<g->rctas, 512, 0, s>>>(g->fd, r, IRIS_GEMM_RS_FLAG_BN); break;
  default: iris_gemm_rs_fused_reduce_kernel<float><<<g->rctas, 512, 0, s>>>(g->fd, r, IRIS_GEMM_RS_FLAG_BN); break;
  }
  if ((e = (int)cudaGetLastError()) != (int)cudaSuccess) return iris_gemm_gpu_fail(g->ctx, "launching the fused reduce kernel", e);
  return g->d.op == IRIS_GEMM_ALL_REDUCE ? iris_gemm_rs_gather(g, c, s) : IRIS_SUCCESS;
}
#endif
#endif /* IRIS_GEMM_HAVE_BLAS */

IRIS_DEF iris_status_t iris_gemm_rs_destroy(iris_gemm_rs_t *p) {
  int q;
  if (!p) return IRIS_SUCCESS;
#if defined(IRIS_GEMM_HAVE_BLAS)
  {
    int old = -1;
    cudaGetDevice(&old);
    cudaSetDevice(iris_device(p->ctx));
    cudaDeviceSynchronize();
    if (p->copy) cudaStreamDestroy(p->copy);
    if (p->fork) cudaEventDestroy(p->fork);
    if (p->join) cudaEventDestroy(p->join);
    for (q = 0; q < IRIS_MAX_RANKS; ++q)
      if (p->done[q]) cudaEventDestroy(p->done[q]);
    if (p->stage) cudaFree(p->stage);
    if (old >= 0) cudaSetDevice(old);
  }
  if (p->blas) iris_ag_gemm_destroy(p->blas); /* the cuBLASLt state only (no heap blocks) */
#endif
  (void)q;
  /* heap blocks: reverse order, every rank */
  if (p->sync) iris_free(p->ctx, p->sync);
  if (p->red) iris_free(p->ctx, p->red);
  if (p->part) iris_free(p->ctx, p->part);
  free(p);
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_gemm_rs_create(iris_t *ctx, const iris_gemm_rs_desc_t *desc, iris_gemm_rs_t **out) {
  iris_status_t st;
  int W, me, q;
  if (!ctx || !desc || !out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_gemm_rs_create: NULL argument");
  *out = NULL;
  if (iris_num_nodes(ctx) > 1) /* refused alike on every rank, before any exchange */
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_gemm_rs_create: the GEMM + reduce-scatter / all-reduce runs within one node, and this context spans %d nodes; create it "
                            "on a node-local context (docs/multinode.md)", iris_rank(ctx), iris_num_nodes(ctx));
  W = iris_world_size(ctx);
  me = iris_rank(ctx);
  /* every rank must describe the same problem: exchange first (fields, not bytes) */
  {
    enum { nf = 10 };
    long long mine[nf] = {(long long)desc->struct_size, desc->op, desc->M, desc->N, desc->K, desc->a_type, desc->c_type, desc->b_transposed, desc->has_bias, desc->path};
    long long *all = (long long *)calloc((size_t)W * nf, sizeof *all);
    if (!all) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
    if ((st = iris_allgather_host(ctx, mine, all, sizeof mine)) != IRIS_SUCCESS) { free(all); return st; }
    for (q = 0; q < W; ++q)
      if (memcmp(all + (size_t)q * nf, mine, sizeof mine)) {
        free(all);
        return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: iris_gemm_rs_create: rank %d describes a different problem (op, shape, types, layout, bias or path)", me, q);
      }
    free(all);
  }
  if ((st = iris_gemm_rs_check_desc(desc, W, me)) != IRIS_SUCCESS) return st;
#if !defined(IRIS_GEMM_HAVE_BLAS)
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_gemm_rs_create: the GEMM + reduce paths need cuBLASLt (not found, IRIS_GEMM_NO_BLAS, or AMD: no hipBLASLt path)", me);
#else
  iris_gemm_rs_t *p;
  int ok, *oks;
  size_t part_bytes, red_bytes, sync_bytes;
  if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st; /* the device barrier, before any capture */
  if (!(p = (iris_gemm_rs_t *)calloc(1, sizeof *p))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  p->ctx = ctx;
  p->d = *desc;
  p->W = W;
  p->me = me;
  p->ml = desc->M / W;
  p->kl = desc->K / W;
  p->es = iris_dtype_size(desc->a_type);
  p->cs = iris_dtype_size(desc->c_type);
  p->path = iris_gemm_rs_choose_path(desc, W);
  {
    int old = -1;
    cudaGetDevice(&old);
    cudaSetDevice(iris_device(ctx));
    /* heap blocks: the same sequence on every rank (the heap is symmetric, so the verdict
     * is the same everywhere) */
    part_bytes = (size_t)desc->M * desc->N * 4;
    red_bytes = p->path != IRIS_GEMM_PATH_UNFUSED && desc->op == IRIS_GEMM_ALL_REDUCE ? (size_t)desc->M * desc->N * p->cs : 0;
    sync_bytes = p->path == IRIS_GEMM_PATH_FUSED ? iris_gemm_rs_sync_words(desc, W) * sizeof(unsigned) : 0;
    st = iris_malloc(ctx, part_bytes, (void **)&p->part);
    if (st == IRIS_SUCCESS && red_bytes) st = iris_malloc(ctx, red_bytes, (void **)&p->red);
    if (st == IRIS_SUCCESS && sync_bytes) st = iris_calloc(ctx, sync_bytes, (void **)&p->sync); /* flags start at 0, never reset */
    if (st != IRIS_SUCCESS)
      st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY,
                            "rank %d: iris_gemm_rs_create: the symmetric heap (%zu bytes, %zu in use) cannot hold the plan's workspace (%zu bytes: the fp32 partials, M x N x 4%s); "
                            "give iris_init a larger heap_size",
                            me, iris_heap_size(ctx), iris_heap_used(ctx), part_bytes + red_bytes + sync_bytes, red_bytes ? ", and M x N of the output type" : "");
    if (st == IRIS_SUCCESS) st = iris_gemm_rs_create_local(p);
    /* agree: a plan exists on every rank or on none */
    ok = st == IRIS_SUCCESS;
    oks = (int *)calloc((size_t)W, sizeof *oks);
    if (!oks) st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
    else if (iris_allgather_host(ctx, &ok, oks, sizeof ok) != IRIS_SUCCESS) st = st == IRIS_SUCCESS ? IRIS_ERROR_TIMEOUT : st;
    else
      for (q = 0; q < W && st == IRIS_SUCCESS; ++q)
        if (!oks[q]) st = iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: iris_gemm_rs_create: rank %d could not create its plan (see its error)", me, q);
    free(oks);
    if (old >= 0) cudaSetDevice(old);
  }
  if (st != IRIS_SUCCESS) {
    iris_gemm_rs_destroy(p);
    return st;
  }
  *out = p;
  return IRIS_SUCCESS;
#endif
}

/* A context's fatal fault refuses the run at once; the run is ordered after the context's
 * previous communication call, whatever its stream (iris_detail_order_begin, iris.h). */
IRIS_DEF iris_status_t iris_gemm_rs_run(iris_gemm_rs_t *p, const void *a, const void *b, const void *bias, void *c, iris_stream_t stream) {
  if (p && p->d.a_type == IRIS_FLOAT8_E4M3)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: an fp8 plan needs per-tensor scales: call iris_gemm_rs_run_scaled", p->me);
  return iris_gemm_rs_run_scaled(p, a, b, NULL, NULL, bias, c, stream);
}

IRIS_DEF iris_status_t iris_gemm_rs_run_scaled(iris_gemm_rs_t *p, const void *a, const void *b, const float *a_scale, const float *b_scale, const void *bias, void *c,
                                               iris_stream_t stream) {
  iris_status_t st, st2;
  if (!p) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_gemm_rs_run: NULL plan");
  if (!a || !b || !c) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: NULL buffer (a %p, b %p, c %p)", p->me, a, b, c);
  if ((st = iris_gemm_check_scales(p->d.a_type, a_scale, b_scale, "iris_gemm_rs_run_scaled", p->me)) != IRIS_SUCCESS) return st;
  if (!p->d.has_bias != !bias)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: bias %s, but the plan says has_bias = %d", p->me, bias ? "given" : "NULL", p->d.has_bias);
  if (((uintptr_t)a | (uintptr_t)b) % 256)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: A and B must be 256-byte aligned (cuBLASLt): a %p, b %p", p->me, a, b);
  if (((uintptr_t)c | (uintptr_t)bias) % 16)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_gemm_rs_run: C and bias must be 16-byte aligned: c %p, bias %p", p->me, c, bias);
  if ((st = iris_detail_check_fault(p->ctx)) != IRIS_SUCCESS) return st;
  if ((st = iris_detail_order_begin(p->ctx, stream)) != IRIS_SUCCESS) return st;
  /* every rank has reached this call: the previous call's readers of the workspace are gone */
  st = iris_barrier_device(p->ctx, stream);
#if defined(IRIS_GEMM_HAVE_BLAS)
  if (st == IRIS_SUCCESS && a_scale) st = iris_gemm_blas_set_scales(p->blas, a_scale, b_scale, stream);
  if (st == IRIS_SUCCESS && p->path == IRIS_GEMM_PATH_FUSED) {
#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
    st = iris_gemm_rs_run_fused(p, a, b, bias, c, stream);
#endif
  } else if (st == IRIS_SUCCESS) {
    st = p->path == IRIS_GEMM_PATH_PIPELINED ? iris_gemm_rs_run_pipelined(p, (const char *)a, b, bias, c, stream) : iris_gemm_rs_run_unfused(p, (const char *)a, b, bias, c, stream);
  }
#endif
  st2 = iris_detail_order_end(p->ctx, stream);
  return st != IRIS_SUCCESS ? st : st2;
}

IRIS_DEF iris_status_t iris_gemm_rs_check(iris_gemm_rs_t *p) {
  if (!p) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_gemm_rs_check: NULL plan");
#if defined(IRIS_GEMM_HAVE_BLAS) && defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
  if (p->path == IRIS_GEMM_PATH_FUSED) {
    unsigned e[IRIS_GEMM_ERR_WORDS];
    const int rc = iris_gemm_err_take(p->fd.err, e);
    if (rc != (int)cudaSuccess) return iris_gemm_gpu_fail(p->ctx, "iris_gemm_rs_check: reading the error record", rc);
    switch (e[IRIS_GEMM_ERR_WHAT]) {
    case 0: return IRIS_SUCCESS;
    case IRIS_GEMM_WAIT_TILE:
      return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                              "rank %d: iris_gemm_rs (fused): call %u: the wait for rank %d's contribution to tile (64-row half %u, n-tile %u) (flag holds %u, want "
                              "%u) ran past the wait bound (%.1f s) in CTA %u: rank %d is stuck, dead, far behind, or not making the same calls; C of that call is wrong",
                              p->me, e[IRIS_GEMM_ERR_EPOCH], (int)e[IRIS_GEMM_ERR_PEER], e[IRIS_GEMM_ERR_ITEM] / (unsigned)p->fd.tiles_n,
                              e[IRIS_GEMM_ERR_ITEM] % (unsigned)p->fd.tiles_n, e[IRIS_GEMM_ERR_GOT], e[IRIS_GEMM_ERR_WANT], (double)IRIS_WAIT_TIMEOUT_NS * 1e-9,
                              e[IRIS_GEMM_ERR_BLOCK], (int)e[IRIS_GEMM_ERR_PEER]);
    case IRIS_GEMM_WAIT_PEER_FAILED:
      return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                              "rank %d: iris_gemm_rs (fused): call %u: rank %d gave up on this call (its wait %u for rank %d ran past the wait bound; see its error): "
                              "C of that call may be wrong here too",
                              p->me, e[IRIS_GEMM_ERR_EPOCH], (int)e[IRIS_GEMM_ERR_PEER], e[IRIS_GEMM_ERR_GOT], (int)e[IRIS_GEMM_ERR_WANT]);
    default:
      return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                              "rank %d: iris_gemm_rs (fused): call %u: a pipeline (mbarrier) wait of the TMA core ran past its bound in CTA %u: a bug in "
                              "internal/gemm_core_tma.h; C of that call is wrong",
                              p->me, e[IRIS_GEMM_ERR_EPOCH], e[IRIS_GEMM_ERR_BLOCK]);
    }
  }
#endif
  return IRIS_SUCCESS;
}
#endif /* IRIS_IMPLEMENTATION */
#endif /* device compiler */
#endif /* IRIS_GEMM_REDUCE_H */
