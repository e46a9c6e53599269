/* iris_gemm_reduce.h — GEMM + reduce-scatter and GEMM + all-reduce: the row-parallel half
 * of tensor parallelism (C host API, C++ device building blocks)
 *
 * What it is
 *   Rank r holds A_r (M x K/W, row-major) and B_r (K/W x N row-major, or N x K/W with
 *   desc.b_transposed = 1: the PyTorch Linear weight layout); the result is
 *     C = sum over r of A_r * B_r  (+ bias)                          (M x N)
 *   bf16 or fp16 inputs, fp32 accumulation. Numerics (desc.exact):
 *     exact = 0 (default): each rank's partial A_r * B_r is rounded to the output type, the
 *       partials cross NVLink in that type, the owner sums them in fp32 in the fixed rank
 *       order 0, 1, ..., W-1, adds the bias (N values of the output type) and rounds once
 *       more: two roundings, the numerics of NCCL's reduce-scatter after a local GEMM and
 *       of torch's fused_matmul_reduce_scatter. Per element, |C - C_exact| <=
 *       u (sum_r |P_r| + |C_exact|) (u: the output type's unit roundoff, 2^-8 for bf16,
 *       P_r = A_r B_r), beside the fp32 accumulation's own error.
 *     exact = 1: the partials stay fp32 on the wire (twice the bytes with a bf16 or fp16
 *       output: up to 2x the communication time where it does not hide under the GEMM),
 *       summed as above: one rounding, the same bits for a given W.
 *     An fp32 output (c_type IRIS_FLOAT32) is always the exact case, and so are mixed 16-bit
 *     types (bf16 in, fp16 out or the reverse: cuBLASLt cannot round one to the other).

 *   fp8 e4m3 inputs (A and B) with per-tensor scales (iris_gemm_rs_run_scaled: device
 *   pointers to one float each, per rank): C = sum over r of (a_scale_r A_r)(b_scale_r B_r)
 *   (+ bias); cuBLASLt's fp8 GEMM writes the scaled product into the partial (fp32
 *   accumulation, fast accumulation off), and the rest is as above.
 *     IRIS_GEMM_REDUCE_SCATTER  rank r receives rows [r*M/W, (r+1)*M/W) of C: its C is an
 *                               (M/W) x N matrix (sequence parallelism);
 *     IRIS_GEMM_ALL_REDUCE      every rank receives all of C (M x N), bitwise the same on
 *                               every rank.
 *
 *   Paths (iris_gemm_rs_path tells which one a plan runs):
 *     IRIS_GEMM_PATH_PIPELINED  cuBLASLt computes this rank's partial of C in W chunks
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
 *     IRIS_GEMM_PATH_UNFUSED    one cuBLASLt GEMM of the whole partial into the heap, then
 *                               iris_reduce_scatter / iris_all_reduce of it into C (the
 *                               collectives' latency kernels; same numerics) where the
 *                               partials are of the output type and there is no bias;
 *                               otherwise a device barrier, then one SM kernel that reads
 *                               the W partials of its rows through the heap (all rows for
 *                               ALL_REDUCE) and reduces them (and adds the bias).
 *     IRIS_GEMM_PATH_FUSED      (NVIDIA Hopper, sm_90a build with the GEMM core; bf16/fp16
 *                               inputs) one persistent kernel on the TMA/wgmma core
 *                               (internal/gemm/core_tma.h, one CTA per SM) computes the fp32
 *                               partial in 128 x 256 tiles in owner order (rows of rank r+1
 *                               first, own rows last); its epilogue stores each tile's rows
 *                               straight into their owners' receive slots (a tile may span
 *                               owners) and, per 64-row half tile, release-signals a flag
 *                               on each owner (system scope, the call's epoch). A reduce
 *                               kernel on the same stream waits (bounded) for the W flags of
 *                               each of its half tiles and reduces as above (ALL_REDUCE:
 *                               the same all-gather of the rounded rows as the pipelined
 *                               path). Epochs come from per-CTA counters on the device, so
 *                               graph replays work. Its partials are always fp32 (the
 *                               exact numerics, whatever desc.exact). Elsewhere (AMD, no
 *                               core, no sm_90a pass): create returns IRIS_ERROR_UNSUPPORTED.
 *   AUTO picks per shape (iris_gemm_rs_choose_path): pipelined for W > 1 (on 2 H100s the fastest
 *   at 45-46 of 48 shapes x ops x types, unfused at most 8% ahead at the others; the fused
 *   path 1.09-1.72x its time: BENCHMARKS.md), unfused for W = 1 and below 256 rows per
 *   rank (M/W < IRIS_GEMM_RS_PIPELINE_MIN_ROWS: decode sizes, where W chunk GEMMs of a few
 *   rows cost more than they hide), below 512 (IRIS_GEMM_AR_PIPELINE_MIN_ROWS) for an
 *   ALL_REDUCE that sums through iris_all_reduce. The fused path stays for
 *   study and as the worked example of the device building blocks; AUTO never picks it.

 *
 * Quick start
 *     #define IRIS_IMPLEMENTATION
 *     #include "iris_gemm_reduce.h"   // also iris.h, iris_device.h, iris_collectives.h
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
 *     A and B 256-byte aligned (cuBLASLt), C and bias 16-byte aligned; C overlaps none
 *     of A, B and the bias. Anything else: IRIS_ERROR_INVALID_ARGUMENT naming the rule.
 *   - fp8 (a_type IRIS_FLOAT8_E4M3, B the same): b_transposed = 1 (cuBLASLt's fp8 GEMM on
 *     Hopper takes only the "TN" layout; else IRIS_ERROR_UNSUPPORTED), (K/W) % 16 == 0
 *     (else IRIS_ERROR_INVALID_ARGUMENT); run through iris_gemm_rs_run_scaled with both
 *     scales (iris_gemm_rs_run, or a NULL scale: IRIS_ERROR_INVALID_ARGUMENT). e5m2:
 *     IRIS_ERROR_UNSUPPORTED. Needs an sm_89+ GPU (cuBLASLt finds no algorithm elsewhere:
 *     create returns IRIS_ERROR_UNSUPPORTED).
 *   - One node: a context that spans several nodes (iris_num_nodes > 1) is refused with
 *     IRIS_ERROR_UNSUPPORTED, as by iris_ag_gemm_create.
 *   - Workspace, on the symmetric heap (w: the wire's element size: sizeof(C type), or 4
 *     with exact = 1 and on the fused path): pipelined and fused M*N*w bytes (the receive
 *     slots), plus M*N*sizeof(C type) for ALL_REDUCE; fused also 4 * (W * ceil(M/64) *
 *     ceil(N/128) + 1035) bytes of flags, error record and counters; unfused M*N*w. Local
 *     memory: pipelined (W-1)/W*M*N*w bytes of chunk staging, and (pipelined, unfused) 32
 *     MB of cuBLASLt workspace.
 A heap that cannot hold the workspace:
 *     IRIS_ERROR_OUT_OF_MEMORY naming the bytes.
 *   - Ordering: run starts with a device barrier (every rank has reached the call, so its
 *     previous call's readers of the workspace are gone; the unfused path through a
 *     collective needs none: the collective meets the peers); when its work completes on the
 *     stream, C is final on this rank and A, B may be overwritten.
 *   - Waits: the device barriers of iris_collectives.h (bounded by IRIS_WAIT_TIMEOUT_MS,
 *     else IRIS_WAIT_TIMEOUT_NS: 10 minutes by default; a timeout is the context's fault,
 *     iris_get_async_error); fused path: the reduce kernel's waits for the peers' tiles,
 *     bounded by the unit's IRIS_WAIT_TIMEOUT_NS (compile time only), the first
 *     expiry recorded in the plan's error record (the rest of that call's waits then
 *     return at once, and the peers are told); iris_gemm_rs_check reports it.
 *   - A run refused on one rank (its arguments: a NULL or misaligned buffer, a bias against
 *     the plan, C over an input, an fp8 plan without both scales; all checked before
 *     anything is enqueued) still takes part in the call there, so that no peer waits for
 *     it: that rank returns the refusal (its detail says the run took part), reads and
 *     writes no buffer of the user's, and launches in place of the call what the peers'
 *     call pairs with: on the pipelined and barrier-and-pull unfused paths a device barrier
 *     with the signature of a refused collective, then plain ones (as many as the peers'
 *     call makes); on the unfused path through a collective the refused barrier alone (as a
 *     refused collective takes part); on the fused path a plain opening barrier, a one-block
 *     kernel that tells every peer and moves its own epochs on by one call, and (ALL_REDUCE)
 *     the plain gather barrier. The peers' run of the call ends at once (no wait runs out),
 *     and they get IRIS_ERROR_MISMATCH naming the refusing rank: from iris_gemm_rs_check on
 *     the fused path, else as the context's collective mismatch (iris_get_async_error,
 *     iris_collectives_check, iris_barrier; the refusing rank's too). Their C of that call:
 *     left as it was on the fused path's REDUCE_SCATTER (its reduce writes no row);
 *     elsewhere undefined (written from a stale partial of the refusing rank, or left as
 *     it was where a mismatched collective writes nothing). Every rank's
 *     calls and epochs stay in step: the next well-formed run is exact everywhere.
 *     Exceptions: on the unfused path through a collective, a peer's collective split into
 *     several launches (C off the heap, larger than the collectives' staging area) makes
 *     the mismatch fatal to the context (IRIS_ERROR_MISMATCH on every call: finalize it), as
 *     for a refused collective; with IRIS_COLL_CHECK=0 its latency path reads no headers and
 *     waits out its bound; a fused call at epoch 0 (once in 2^32 calls) has no abort marker,
 *     and the peers' reduce waits end by their bound. Where every rank refused the call
 *     alike, nothing waits and nothing is reported beyond the refusals. The normal run pays
 *     nothing for this: no extra launch or wait (the peers notice through the barrier's
 *     header exchange and the waits' abort word, which they check anyway).
 *   - A run that fails after its opening barrier (a runtime or cuBLASLt failure) marks the
 *     plan broken: later runs return IRIS_ERROR_INVALID_ARGUMENT saying so (a broken plan's
 *     run takes no part: destroy it on every rank).
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
#include "iris_collectives.h"
#include "internal/gemm/types.h" /* iris_gemm_path_t, iris_gemm_path_name: shared with iris_gemm.h */

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
  iris_gemm_path_t path; /* IRIS_GEMM_PATH_AUTO, _PIPELINED, _UNFUSED or _FUSED */
  int exact;             /* 0 (default): partials cross in the output type (two roundings); 1: fp32 partials (one rounding) */
} iris_gemm_rs_desc_t;
#define IRIS_GEMM_RS_DESC_INIT {sizeof(iris_gemm_rs_desc_t), IRIS_GEMM_REDUCE_SCATTER, 0, 0, 0, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, IRIS_GEMM_PATH_AUTO, 0}

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
 * allocated and *out is NULL. A NULL desc or out on some ranks: IRIS_ERROR_INVALID_ARGUMENT
 * there and IRIS_ERROR_MISMATCH naming them on the others (the call still meets the peers,
 * so none waits for it); a NULL ctx: IRIS_ERROR_INVALID_ARGUMENT at once.
 * A step that fails on one rank only (host or heap memory, a GPU call): its error there
 * and IRIS_ERROR_MISMATCH naming it on the others, at once (the failing rank still takes
 * part in every exchange of the create). */
IRIS_API iris_status_t iris_gemm_rs_create(iris_t *ctx, const iris_gemm_rs_desc_t *desc, iris_gemm_rs_t **out);
/* Every rank, the same sequence of calls. Enqueues C = sum_r A_r * B_r (+ bias) on stream
 * (REDUCE_SCATTER: this rank's M/W rows; ALL_REDUCE: all M rows). a: M x K/W, b: this
 * rank's B shard, bias: NULL unless desc.has_bias, c: the output. Capturable; allocates
 * nothing. Ordered after the context's previous communication call whatever its stream (as
 * the collectives and iris_ag_gemm_run); returns the context's fatal fault at once
 * (iris_get_async_error). Bad pointers: IRIS_ERROR_INVALID_ARGUMENT naming the rule; the run
 * still takes part in the call, touching no buffer (Rules: "A run refused on one rank"). */
IRIS_API iris_status_t iris_gemm_rs_run(iris_gemm_rs_t *p, const void *a, const void *b, const void *bias, void *c, iris_stream_t stream);
/* As iris_gemm_rs_run, with per-tensor scales for fp8 inputs: C = sum_r (a_scale_r * A_r) *
 * (b_scale_r * B_r) (+ bias), where a_scale and b_scale point to one float each in device
 * memory (read when the GEMM runs, so a graph replay reads the current values). An fp8
 * plan must come here (iris_gemm_rs_run refuses it) with both scales; a bf16/fp16 plan
 * takes NULL scales (then this is iris_gemm_rs_run). Else IRIS_ERROR_INVALID_ARGUMENT
 * naming the rule (the run takes part as a refused one). */
IRIS_API iris_status_t iris_gemm_rs_run_scaled(iris_gemm_rs_t *p, const void *a, const void *b, const float *a_scale, const float *b_scale, const void *bias, void *c,
                                               iris_stream_t stream);
/* Synchronous, after the plan's runs have completed on their streams. The pipelined and
 * unfused paths wait only in the device barriers of iris_collectives.h, which report their
 * own timeouts (iris_get_async_error): this returns IRIS_SUCCESS for them (and
 * IRIS_ERROR_INVALID_ARGUMENT for a NULL plan). Fused path: the first wait for a peer's
 * tile that ran past IRIS_WAIT_TIMEOUT_NS since the last check (IRIS_ERROR_TIMEOUT naming
 * the call, the peer, the tile; or a peer that gave up on a call, or a stuck TMA pipeline),
 * or a peer's run of a call that was refused (IRIS_ERROR_MISMATCH naming the call and the
 * peer: Rules, "A run refused on one rank"), and clears the record; IRIS_SUCCESS when none. */
IRIS_API iris_status_t iris_gemm_rs_check(iris_gemm_rs_t *p);
/* The path the plan runs (IRIS_GEMM_PATH_AUTO for NULL). */
IRIS_API iris_gemm_path_t iris_gemm_rs_path(const iris_gemm_rs_t *p);
/* The path AUTO picks for a description at a world size on this build (no GPU work). */
IRIS_API iris_gemm_path_t iris_gemm_rs_choose_path(const iris_gemm_rs_desc_t *desc, int world_size);
/* Every rank, collective: free the plan (synchronises the device first, then frees the heap
 * blocks in reverse order). NULL: IRIS_SUCCESS. The pointer is invalid afterwards: destroy a plan once, before iris_finalize, and call
 * nothing of it after (no check can catch a freed plan). */
IRIS_API iris_status_t iris_gemm_rs_destroy(iris_gemm_rs_t *p);
#ifdef __cplusplus
}
#endif

#if defined(IRIS_DETAIL_GPU_COMPILER)
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
                                            int cols, unsigned epoch);

/* Whole block (1-D, blockDim.x >= world_size). Threads 0..W-1 each wait (acquire, system
 * scope, bounded by IRIS_WAIT_TIMEOUT_NS) until this rank's flag (tile, q) has reached
 * epoch (wrap-safe over half the range: push every tile at least once every 2^31 epochs,
 * as iris_gemm_wait_tile says), the block meets, then out[r * ld_out + c] = round(sum over q = 0..W-1
 * in that order of slot (tile, q)[r * cols + c] (fp32) + bias[c]) for the rows x cols tile;
 * bias: NULL or the tile's first column. OutT: float, iris_bf16_t or iris_f16_t
 * (iris_collectives.h). Returns false in every thread, and writes nothing, if a wait
 * timed out (a peer did not push: stuck, dead, or not making the same calls). */
template <typename OutT>
IRIS_DEVICE_INLINE bool iris_gemm_reduce_tile(const iris_device_ctx_t &ctx, iris_gemm_contrib_t cb, int tile, int rows, int cols, const OutT *bias, OutT *out,
                                              long long ld_out, unsigned epoch);

/* ========================================================================= */
/*                            implementation                                 */
/* ========================================================================= */
#include "internal/gemm/common.h"     /* shared with iris_gemm.h: the GEMM cores, error record, waits */
#include "internal/gemm/tile.h"       /* the bodies of the tile building blocks above */
#include "internal/gemm/rs_kernels.h" /* the reduction kernel; the fused path's GEMM and reduce kernels, protocol */
#endif /* device compiler */
#endif /* IRIS_GEMM_REDUCE_H */

/* The implementation (IRIS_IMPLEMENTATION, nvcc or hipcc), after the include guard as in
 * iris.h: a unit may include this header before it defines IRIS_IMPLEMENTATION. */
#if defined(IRIS_IMPLEMENTATION) && !defined(IRIS_GEMM_REDUCE_IMPLEMENTATION_DONE) && defined(IRIS_DETAIL_GPU_COMPILER)
#define IRIS_GEMM_REDUCE_IMPLEMENTATION_DONE
#include "iris_collectives.h"
#include "internal/gemm/host.h" /* shared with the other GEMM header: cuBLASLt, path names, the description agreement */
#include "internal/gemm/rs.h"         /* the plan: AUTO, rules, create, run (pipelined, unfused, fused), check, destroy */
#endif
