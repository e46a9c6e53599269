/* iris_moe.h — mixture-of-experts expert-parallel token dispatch and combine over the
 * symmetric heap (C host API, C++ device building blocks)
 *
 * What it is
 *   The two all-to-alls of an expert-parallel MoE layer. W ranks, E experts in all,
 *   L = E/W per rank: expert g lives on rank g / L as its local expert g % L.
 *     dispatch  every rank sends each of its tokens to the ranks holding the token's top-k
 *               experts, once per (token, expert): a token with two experts on one rank
 *               arrives there twice, once in each expert's rows (as DeepEP's low-latency
 *               mode). Tokens for this rank's own experts never leave the GPU. The rows
 *               land grouped by local expert, packed from each expert's first row, in the
 *               dispatch type (bf16, or fp8 e4m3 with one fp32 scale per 128 channels,
 *               scale = amax / 448 of those 128 values, quantised in the kernel).
 *     combine   the expert outputs y (laid out as the received rows, bf16) go back to the
 *               tokens' ranks, which write out[t] = sum over the token's k experts of
 *               weight_k * y_k, accumulated in fp32 and rounded once to bf16.
 *   Both are one-sided stores straight into the peers' heaps (16-byte vectors, a warp per
 *   token and slice of the hidden dimension), released by per-source epoch flags; the
 *   per-(source, expert) counts travel ahead of the data, so every row goes to its final
 *   place with no copy on the receiver. No host synchronisation, no allocation per call:
 *   capture dispatch and combine in CUDA/HIP graphs and replay them with new routings.
 *   docs/moe.md has the protocol and the sizing rules.
 *
 *   Modes (desc.mode):
 *     IRIS_MOE_LOW_LATENCY     recv_x is [L][W*max_tokens][hidden]: local expert l's rows
 *                              are rows [0, recv_count[l]) of its slab (DeepEP's LL
 *                              layout). For decoding: small batches, all SMs by default.
 *     IRIS_MOE_HIGH_THROUGHPUT recv_x is [max_recv_rows][hidden], compact: local expert
 *                              l's rows are [recv_offsets[l], recv_offsets[l+1]), for a
 *                              grouped GEMM. For prefill: thousands of tokens, few SMs
 *                              (20 by default), smaller buffers.
 *
 * Quick start
 *     #define IRIS_IMPLEMENTATION
 *     #include "iris_moe.h"          // also iris.h, iris_device.h, iris_collectives.h
 *     iris_moe_desc_t d = IRIS_MOE_DESC_INIT;
 *     d.max_tokens = 128; d.hidden = 7168; d.top_k = 8; d.num_experts = 256;
 *     d.dispatch_type = IRIS_FLOAT8_E4M3;
 *     iris_moe_t *m;  iris_moe_recv_t r;
 *     iris_moe_create(ctx, &d, &m);                          // collective, outside capture
 *     iris_moe_get_recv(m, &r);                              // r.x, r.scales, r.count, ...
 *     iris_moe_dispatch(m, x, n, topk_idx, topk_w, stream);  // capturable; every rank
 *     my_experts<<<...>>>(r.x, r.scales, r.count, y);        // y: same rows as r.x, bf16
 *     iris_moe_combine(m, y, out, stream);                   // capturable; every rank
 *     iris_moe_destroy(m);                                   // collective
 *   nvcc -arch=sm_90 ...   or   hipcc --offload-arch=gfx942 ...
 *
 * Rules
 *   - Collective: every rank creates the plan with the same description (else
 *     IRIS_ERROR_MISMATCH on every rank) and calls dispatch, combine in the same order.
 *     num_tokens may differ between ranks and calls (0..max_tokens; 0 still takes part).
 *   - Description: 1 <= top_k <= IRIS_MOE_MAX_TOP_K; num_experts a multiple of the world
 *     size, at most IRIS_MOE_MAX_EXPERTS; hidden a multiple of 8 (bf16) or 128 (fp8);
 *     max_tokens * top_k < 2^24; dispatch_type IRIS_BFLOAT16 or IRIS_FLOAT8_E4M3;
 *     combine_type IRIS_BFLOAT16; one node. Else IRIS_ERROR_INVALID_ARGUMENT (or
 *     _UNSUPPORTED) naming the rule.
 *   - Inputs (ordinary device memory): x [num_tokens][hidden] bf16, 16-byte aligned;
 *     topk_idx [num_tokens][top_k] int32 (torch: topk_idx.int()), -1 = no expert;
 *     topk_weights [num_tokens][top_k] float. They are read by the call's kernels only
 *     (weights are kept in the plan for combine). A token's experts must be distinct: a
 *     repeat of an expert in the same token, or an index outside [-1, num_experts), is
 *     skipped (nothing written anywhere for it, its combine term is 0) and recorded for
 *     iris_moe_check. NULL pointers (with num_tokens > 0), num_tokens outside
 *     [0, max_tokens], a misaligned x or y, topk_idx or topk_weights not 4-byte aligned,
 *     an out that is NULL or misaligned where the dispatch had tokens:
 *     IRIS_ERROR_INVALID_ARGUMENT naming the rule, and the call still takes part, with nothing of this rank's (the ranks pair
 *     their calls by count: a rank that skipped one would pair its later calls with the
 *     peers' earlier ones): a refused dispatch sends no tokens; a refused combine with no
 *     usable y sends NaN rows in place of its experts' outputs, so the tokens they serve
 *     come out NaN on every rank, whose iris_moe_check reports it
 *     (IRIS_ERROR_INVALID_ARGUMENT naming the rank); with no usable out it writes nothing
 *     here. Combine without any dispatch before it:
 *     IRIS_ERROR_INVALID_ARGUMENT, nothing enqueued.
 *   - Outputs (iris_moe_get_recv; fixed for the plan's life, so graphs capture them):
 *     x, scales (fp8) and src on this rank's heap, count and offsets in device memory:
 *     the host never needs them. src[row] = IRIS_MOE_SRC(source rank, token * top_k + k)
 *     names the token each row came from. Rows past an expert's count are not written.
 *   - Combine: y has recv_x's row layout in bf16 (only received rows are read), out is
 *     [num_tokens of the matching dispatch][hidden] bf16; a token with no valid expert
 *     gets zeros. The weights are the dispatch's.
 *   - Lifetime: the received rows (x, scales, src) stay as the dispatch left them until
 *     this rank's next dispatch starts on the device: a peer stores the rows of its next
 *     dispatch only after this rank's count vector of that dispatch reached it, and this
 *     rank's dispatch sends it first, after the work before it on its stream. So work
 *     ordered before this rank's next dispatch (the experts, the combine) reads them
 *     safely; dispatching twice without combine (timing loops) overwrites nothing early
 *     (combine then returns the last dispatch's rows). count and offsets are rewritten by
 *     this rank's next dispatch. y and out are the caller's.
 *   - High-throughput capacity: max_recv_rows (0: the worst case W * max_tokens *
 *     min(top_k, L)). Rows beyond it are dropped on every rank alike (recv_offsets stop at
 *     it, their combine terms are 0) and iris_moe_check reports IRIS_ERROR_OUT_OF_MEMORY.
 *   - Workspace (symmetric heap; iris_moe_workspace_bytes): rows * hidden * (1 or 2)
 *     received rows, rows * hidden/128 * 4 scales (fp8), rows * 4 source ids,
 *     max_tokens * top_k * hidden * 2 combine slots, W * E * 4 counts, 208 bytes of flags (12 * IRIS_MAX_RANKS + 16), 192 bytes of marks (12 * IRIS_MAX_RANKS)
 *     (rows: L * W * max_tokens for low latency, max_recv_rows for high throughput).
 *     A heap that cannot hold it: IRIS_ERROR_OUT_OF_MEMORY naming the bytes.
 *   - Ordering: each call is ordered after the context's previous communication call,
 *     whatever its stream (as the collectives); a fatal fault refuses it at once. Your own
 *     kernels between dispatch and combine (the experts) must be ordered by you, and so
 *     must a graph's replay against calls made outside it on another stream (the order
 *     is the host's, when it enqueues; a replay enqueues nothing through the library):
 *     two kernels of one plan must never run at once.
 *   - Waits: every wait is bounded (IRIS_WAIT_TIMEOUT_MS, else IRIS_WAIT_TIMEOUT_NS); one
 *     that runs out records the context's fault (iris_get_async_error) and the call's
 *     outputs are then undefined. That rank still releases the call's flags (no peer
 *     waits out its bound for it) but first marks every peer: their iris_moe_check
 *     reports IRIS_ERROR_TIMEOUT naming it, at every check from then on, instead of
 *     SUCCESS on rows or sums it did not send. Its plan takes part in the calls already
 *     enqueued there with nothing of its own (no rows; NaN rows from its combines), and
 *     its context refuses every later call: destroy the plan. A combine whose last wait
 *     (for the peers' rows of its own tokens) ran out had sent its rows whole: only its
 *     own out is undefined.
 *   - Ranks sharing one GPU (separate processes) work, slowly (docs/shared_gpu.md). Ranks of
 *     one process sharing a GPU (iris_init_local with a device listed twice, threads) run
 *     their kernels at once: there each plan's grid takes at most 1 / W of the SMs (W: the
 *     node's ranks; num_sms is capped to it), so that every rank's grid is resident.
 *
 * Device building blocks (C++, for users' own fused kernels): iris_moe_quant_fp8 (a
 * warp quantises a slice of a bf16 row to fp8 e4m3 with per-128 scales) and
 * iris_moe_weighted_sum (a warp's fp32 weighted sum of k bf16 rows).
 */
#ifndef IRIS_MOE_H
#define IRIS_MOE_H
#include "iris_collectives.h"

#define IRIS_MOE_MAX_TOP_K 32
#define IRIS_MOE_MAX_EXPERTS 1024
/* A received row's source: rank (< 256) and slot = token * top_k + k (< 2^24). */
#define IRIS_MOE_SRC(rank, slot) ((int)(((unsigned)(rank) << 24) | ((unsigned)(slot) & 0xffffffu)))
#define IRIS_MOE_SRC_RANK(v) ((int)((unsigned)(v) >> 24))
#define IRIS_MOE_SRC_SLOT(v) ((int)((unsigned)(v) & 0xffffffu))

typedef enum iris_moe_mode { IRIS_MOE_LOW_LATENCY = 0, IRIS_MOE_HIGH_THROUGHPUT } iris_moe_mode_t;

/* What to move. Start from IRIS_MOE_DESC_INIT. */
typedef struct iris_moe_desc {
  size_t struct_size;
  iris_moe_mode_t mode;
  int max_tokens;              /* tokens per rank per call, at most */
  int hidden;                  /* channels per token */
  int top_k;                   /* experts per token, 1..IRIS_MOE_MAX_TOP_K */
  int num_experts;             /* in all ranks; a multiple of the world size */
  iris_dtype_t dispatch_type;  /* IRIS_BFLOAT16 or IRIS_FLOAT8_E4M3 (per-128-channel scales) */
  iris_dtype_t combine_type;   /* IRIS_BFLOAT16 */
  int num_sms;                 /* CTAs of the data kernels; 0: all SMs (low latency), 20 (high throughput); at most the SMs (1 / W of them where ranks of one process share the GPU) */
  long long max_recv_rows;     /* high throughput: rows of recv_x; 0: W * max_tokens * min(top_k, L). Low latency: 0 */
} iris_moe_desc_t;
#define IRIS_MOE_DESC_INIT {sizeof(iris_moe_desc_t), IRIS_MOE_LOW_LATENCY, 0, 0, 0, 0, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0}

/* Where dispatch's results live (device pointers, the same for every call of a plan). */
typedef struct iris_moe_recv {
  void *x;              /* heap: [rows][hidden] of dispatch_type (low latency: [L][W*max_tokens] rows) */
  float *scales;        /* heap, fp8 only (else NULL): [rows][hidden/128], x ~= fp8 value * scale */
  int *src;             /* heap: [rows], IRIS_MOE_SRC(rank, token * top_k + k) */
  int *count;           /* device: [L] rows received per local expert */
  int *offsets;         /* device: [L+1] exclusive prefix of count (high throughput: expert l's first row) */
  long long rows;       /* rows of x */
  long long expert_stride; /* low latency: rows between two experts' first rows (W*max_tokens); high throughput: 0 */
  int num_local_experts;
} iris_moe_recv_t;

typedef struct iris_moe iris_moe_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Every rank, collective, outside graph capture. Checks the description (the same on every
 * rank, else IRIS_ERROR_MISMATCH on every rank; then the rules above), allocates the heap
 * workspace (the same sequence on every rank) and the device state, and meets the other
 * ranks (a host barrier: the zeroed flags are everywhere before any peer signals). A plan
 * exists on every rank or on none; on failure nothing stays allocated and *out is NULL.
 * A NULL desc or out on some ranks: IRIS_ERROR_INVALID_ARGUMENT there and
 * IRIS_ERROR_MISMATCH naming them on the others (the call still meets the peers, so none
 * waits for it); a NULL ctx: IRIS_ERROR_INVALID_ARGUMENT at once.
 * A step that fails on one rank only (host or heap memory, a GPU call): its error there
 * and IRIS_ERROR_MISMATCH naming it on the others, at once (the failing rank still takes
 * part in every exchange of the create). */
IRIS_API iris_status_t iris_moe_create(iris_t *ctx, const iris_moe_desc_t *desc, iris_moe_t **out);
/* Heap bytes a description needs at a world size (0 for an invalid one). Local. */
IRIS_API size_t iris_moe_workspace_bytes(const iris_moe_desc_t *desc, int world_size);
/* The received rows' buffers (local, no GPU work). */
IRIS_API iris_status_t iris_moe_get_recv(const iris_moe_t *m, iris_moe_recv_t *out);
/* Every rank, the same sequence. Enqueues the dispatch of num_tokens tokens on stream:
 * one kernel (its first CTA routes: count vectors to every rank; then every CTA stores
 * rows). Capturable; allocates nothing; never synchronises the host. When its work completes on the stream, this
 * rank's received rows, counts and offsets are final, and x, topk_idx, topk_weights may
 * be overwritten. */
IRIS_API iris_status_t iris_moe_dispatch(iris_moe_t *m, const void *x, int num_tokens, const int *topk_idx, const float *topk_weights, iris_stream_t stream);
/* Every rank, after its dispatch (and the caller's expert kernels). Enqueues the combine:
 * y's received rows go back to their tokens' ranks; out[t] = round(sum_k w[t][k] * y_k)
 * for the num_tokens of the last dispatch. Capturable, as dispatch. The rows summed are
 * those of the dispatch that ran before it on the stream: where that is not the last one
 * this host issued (a graph of another dispatch replayed in between), the fewer tokens
 * are written and iris_moe_check reports it, with or without an out (a NULL out, which
 * the host takes after a dispatch of 0 tokens, writes nothing; a dispatch with tokens
 * that ran in its place is reported all the same). A combine repeated
 * after one dispatch (as a timing loop does) must pass the same y: a rank that ends one
 * combine may store the next one's rows while a peer still sums the first one's (nothing
 * orders two combines but a dispatch); with another y, put a dispatch or an iris_barrier
 * between them. */
IRIS_API iris_status_t iris_moe_combine(iris_moe_t *m, const void *y, void *out, iris_stream_t stream);
/* Synchronous, after the plan's calls have completed on their streams. First, a peer that
 * gave up waiting in this plan (IRIS_ERROR_TIMEOUT naming it, at every check from then on:
 * this plan's results that involve it are undefined since, and it takes part in no call
 * issued after; where this rank's own context has a fatal fault, that fault instead);
 * else the first routing error this rank's kernels met since the last check
 * (IRIS_ERROR_INVALID_ARGUMENT naming the call, token, k and the bad index, or a combine
 * whose token count differs from its dispatch's; IRIS_ERROR_OUT_OF_MEMORY for
 * high-throughput rows beyond max_recv_rows); else the peers whose combines were refused
 * since the last check reported here (IRIS_ERROR_INVALID_ARGUMENT naming each: a check
 * that reported this rank's own error leaves them to the next); else the context's fatal
 * fault; else IRIS_SUCCESS. Every check clears the routing error record. */
IRIS_API iris_status_t iris_moe_check(iris_moe_t *m);
/* Every rank, collective: synchronises the device, frees the plan (heap blocks in reverse
 * order). NULL: IRIS_SUCCESS. The pointer is invalid afterwards: destroy a plan once, before iris_finalize, and call
 * nothing of it after (no check can catch a freed plan). */
IRIS_API iris_status_t iris_moe_destroy(iris_moe_t *m);
#ifdef __cplusplus
}
#endif

#if defined(IRIS_DETAIL_GPU_COMPILER)
/* ========================================================================= */
/*                        device building blocks                             */
/* ========================================================================= */
/* Whole warp (every lane, same arguments; IRIS_WARP_SIZE lanes). Lane i takes the 16
 * bf16 values at row[col0 + 16*i .. +16) (16-byte aligned; hidden a multiple of 8; values
 * past `hidden` are not read and count as zeros) and returns them as 16 fp8 e4m3 codes in *q, scaled by the amax of its 128-value
 * group: *scale = amax / 448 (1 for an all-zero group), code = fp8(v * (448 / amax)).
 * col0 must be a multiple of 128. Returns whether the lane holds data (col < hidden). */
IRIS_DEVICE_INLINE bool iris_moe_quant_fp8(const iris_bf16_t *row, int hidden, int col0, uint4 *q, float *scale);
/* Whole warp. Lane i computes the 8 channels [col0 + 8*i, +8) of sum over j < n of
 * w[j] * rows[j] (bf16 rows, 16-byte aligned; rows[j] NULL: skipped) in fp32 and returns
 * them rounded to bf16 in *out. */
IRIS_DEVICE_INLINE bool iris_moe_weighted_sum(const iris_bf16_t *const *rows, const float *w, int n, int hidden, int col0, uint4 *out);

/* ========================================================================= */
/*                            implementation                                 */
/* ========================================================================= */
#include "internal/moe/kernels.h" /* the protocol structs, the dispatch and combine kernels */
#endif /* device compiler */
#endif /* IRIS_MOE_H */

/* The implementation (IRIS_IMPLEMENTATION, nvcc or hipcc), after the include guard as in
 * iris.h: a unit may include this header before it defines IRIS_IMPLEMENTATION. */
#if defined(IRIS_IMPLEMENTATION) && !defined(IRIS_MOE_IMPLEMENTATION_DONE) && defined(IRIS_DETAIL_GPU_COMPILER)
#define IRIS_MOE_IMPLEMENTATION_DONE
#include "iris_collectives.h"
#include "internal/moe/host.h"         /* the plan: rules, create, dispatch, combine, check, destroy */
#endif
