/* iris_gemm.h — all-gather + GEMM, fused (C host API, C++ kernels and building blocks)
 *
 * What it is
 *   C = all_gather(A) * B (+ bias), where each rank holds a shard of A:
 *     IRIS_GEMM_A_ROWS  rank r holds rows [r*M/W, (r+1)*M/W) of A: an (M/W) x K shard
 *                       (sequence parallelism);
 *     IRIS_GEMM_A_COLS  rank r holds columns [r*K/W, (r+1)*K/W): an M x (K/W) shard
 *                       (the Iris layout).
 *   B is K x N on every rank (row-major; or N x K, "transposed", the PyTorch Linear
 *   weight layout), C is M x N on every rank. bf16 or fp16 inputs, fp32 accumulation,
 *   bf16/fp16/fp32 output, optional bias (N values of the output type). fp8 e4m3 inputs
 *   with per-tensor scales on the cuBLASLt paths (iris_ag_gemm_run_scaled; see Rules).
 *
 *   Three ways to run it, chosen per shape (iris_ag_gemm_path tells which one ran):
 *     IRIS_GEMM_PATH_PIPELINED   the copy engines pull peers' A chunks into a local
 *                                staging buffer while cuBLASLt multiplies the chunks
 *                                that have arrived (events order them). For
 *                                IRIS_GEMM_A_ROWS the local shard is multiplied first,
 *                                so the first copy is hidden too.
 *                                The chunk GEMMs alternate between two streams
 *                                (desc.gemm_streams) so one's last wave overlaps
 *                                the next one's first.
 *     IRIS_GEMM_PATH_FUSED       one persistent kernel in the Iris "HBM buffer" design:
 *                                fetcher CTAs pull (m-tile, k-group) blocks of A into
 *                                the staging buffer and raise a ready flag per block;
 *                                GEMM CTAs wait on those flags k-group by k-group, so
 *                                no all-gather barrier stands in the way. Their engine
 *                                (iris_ag_gemm_engine): on sm_90a the persistent,
 *                                warp-specialized TMA + wgmma core
 *                                (internal/gemm/core_tma.h; its producer thread waits on
 *                                the flags and runs ahead of the math), else mma.sync;
 *                                on AMD MFMA, unverified: see Rules.
 *     IRIS_GEMM_PATH_UNFUSED     gather everything, then one cuBLASLt GEMM: A in rows
 *                                through iris_all_gather (the collectives' latency
 *                                kernels), A in columns by copy engines. AUTO's choice
 *                                below IRIS_AG_GEMM_PIPELINE_MIN_ROWS rows per rank.
 *     IRIS_GEMM_PATH_KERNEL_UNFUSED  the fused kernel's two roles one after the other
 *                                (all fetchers, then all GEMM CTAs): the baseline
 *                                that shows what the fusion buys.
 *
 * Quick start
 *     #define IRIS_IMPLEMENTATION
 *     #include "iris_gemm.h"        // also iris.h, iris_device.h, iris_collectives.h
 *     iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
 *     d.layout = IRIS_GEMM_A_ROWS; d.M = 8192; d.N = 3584; d.K = 8192;
 *     iris_ag_gemm_t *g;
 *     iris_ag_gemm_create(ctx, &d, &g);                 // collective, outside capture
 *     iris_malloc(ctx, d.M / W * d.K * 2, &a_shard);    // A shards live on the heap
 *     iris_ag_gemm_run(g, a_shard, b, NULL, c, stream); // capturable; every rank
 *     iris_ag_gemm_destroy(g);
 *   Link -lcublasLt (nvcc). Build with -arch=sm_90a: the fused kernel then runs the TMA
 *   core (with -arch=sm_90 it falls back to the slower mma.sync core, still correct).
 *
 * Rules
 *   - Collective: every rank creates the plan with the same description and calls run
 *     the same number of times in the same order. A shards are on the symmetric heap at
 *     the same offset on every rank (as iris_malloc gives), or set desc.stage_a = 1 and
 *     the plan copies the shard into a heap buffer of its own first.
 *   - Shapes: layout ROWS needs M % W == 0; COLS needs K % W == 0 and (K/W) % 8 == 0.
 *     K % 8 == 0 and N % 8 == 0 (16-byte rows); M and N need not be tile multiples
 *     (edge tiles are masked). A shard, B, C and bias 16-byte aligned (256 for the
 *     cuBLASLt paths); C overlaps none of B, the bias and (without stage_a) the A shard.
 *     Anything else: IRIS_ERROR_INVALID_ARGUMENT naming the rule.
 *   - fp8 (a_type IRIS_FLOAT8_E4M3, B the same): the pipelined and unfused paths only
 *     (AUTO picks one of them; the fused kernels: IRIS_ERROR_UNSUPPORTED), b_transposed = 1
 *     (cuBLASLt's fp8 GEMM takes only the "TN" layout), K % 16 == 0 (COLS: (K/W) % 16),
 *     no bias with an fp32 C (cuBLASLt takes no fp32 bias there); e5m2: UNSUPPORTED. Run
 *     it through iris_ag_gemm_run_scaled: C = (a_scale * gathered A) * (b_scale * B),
 *     a_scale and b_scale device pointers to one float each, read when the GEMM runs
 *     (a graph replay reads the current values). a_scale is the scale of the whole
 *     gathered A: the same value on every rank (e.g. from an all-reduced amax).
 *   - Ordering: when run's work completes on the stream, C is final on this rank and
 *     no peer reads this rank's A shard any more (a device barrier closes the copies),
 *     so the caller may overwrite A. Run waits (on the GPU) until every peer has reached
 *     the same call, so A written earlier on each peer's stream is what is read.
 *   - Failures: no wait is unbounded. A peer that does not make the call (stuck, dead,
 *     or far behind), or a fetcher CTA that cannot run, ends the fused call within about
 *     the wait bound (IRIS_WAIT_TIMEOUT_NS, 10 minutes by default) with a wrong C, and
 *     iris_ag_gemm_check (after the stream is synchronised) returns IRIS_ERROR_TIMEOUT
 *     naming the wait and the peer. Check after runs whose results matter; after such an
 *     error destroy the plan (every rank). docs/gemm_waits.md lists every wait. A run that
 *     fails after enqueuing its barrier or first kernel (a runtime failure) marks the plan
 *     broken: later runs return IRIS_ERROR_INVALID_ARGUMENT saying so (a broken plan's run
 *     takes no part: destroy it on every rank).
 *   - A run refused on one rank (its arguments: a NULL buffer, a bias against the plan,
 *     misalignment, an A shard off the heap without stage_a, C over an input, an fp8 plan
 *     without both scales; all checked before anything is enqueued) still takes part in
 *     the call there, so that no peer waits for it: that rank returns the refusal (its
 *     detail says the run took part), reads and writes no buffer of the user's, and
 *     launches in place of the call what the peers' call pairs with: on the pipelined and
 *     copy-engine unfused paths a device barrier with the signature of a refused collective,
 *     then a plain one; on the unfused path through iris_all_gather the refused barrier
 *     alone (as a refused collective takes part); on the fused and kernel-unfused paths a
 *     one-block kernel that tells every peer, moves the peers' "done reading" counts and
 *     its own epochs on by one call, and ends when every peer's run of the call is done
 *     reading (bounded, as a normal run's end). The peers' run of the call
 *     ends at once (no wait runs out) with C of that call wrong (computed with whatever
 *     the refusing rank's A held), and IRIS_ERROR_MISMATCH naming the refusing rank: from
 *     iris_ag_gemm_check on the fused and kernel-unfused paths, else as the context's
 *     collective mismatch (iris_get_async_error, iris_collectives_check, iris_barrier;
 *     the refusing rank's too). Every rank's calls and epochs stay in step: the next
 *     well-formed run is exact everywhere. Exceptions: on the unfused path through
 *     iris_all_gather, an A shard larger than the collectives' staging area per rank makes
 *     the peers' all-gather several launches, and its mismatch with the refusal is fatal to
 *     the context (IRIS_ERROR_MISMATCH on every call: finalize it), as for a refused
 *     collective; with IRIS_COLL_CHECK=0 that all-gather reads no headers and waits out its
 *     bound; a fused call at epoch 0 (once in 2^32 calls) has no abort marker, and its
 *     waits end by their bound. Where every rank refused the call alike, nothing waits and
 *     nothing is reported beyond the refusals. The normal run pays nothing for this: no
 *     extra launch or wait (the peers notice through the barrier's header exchange and the
 *     waits' abort word, which they check anyway).
 *   - The fused kernels run one CTA per SM on every SM and their CTAs wait on each other,
 *     and on the peers' kernels: give them the GPU. Where other work holds SMs (kernels
 *     on other streams, other processes under MPS), the TMA kernel with fetcher CTAs
 *     still completes (its GEMM CTAs fetch what a missing fetcher has not claimed after
 *     IRIS_GEMM_HELP_AFTER_NS, 20 ms); side fetch, the cp.async core and the
 *     kernel-unfused path fail as above instead (docs/gemm_waits.md, Residency).
 *   - Graphs: run allocates nothing and never synchronises the host; flags are
 *     monotonic epochs kept on the device, so a captured run replays any number of
 *     times. Create the plan (and call iris_collectives_setup) before capturing.
 *   - Mismatched descriptions across ranks: create returns IRIS_ERROR_MISMATCH on every
 *     rank. With IRIS_DEBUG, run also checks that the A shard sits at the same heap
 *     offset everywhere (a host exchange: not during capture).
 *   - AMD (hipcc): UNVERIFIED, off by default. The fused and kernel-unfused paths have an
 *     MFMA core (internal/gemm/core_mfma.h, gfx90a and gfx940) that compiles but has NEVER
 *     BEEN RUN on AMD hardware. Without IRIS_GEMM_MFMA_UNVERIFIED defined (before the
 *     include, in every unit that includes iris_gemm.h) create and run return
 *     IRIS_ERROR_UNSUPPORTED saying so; with it, the MFMA core is compiled and used. The
 *     pipelined and unfused paths need a vendor BLAS (cuBLASLt; there is no hipBLASLt
 *     path): on AMD, create refuses them with IRIS_ERROR_UNSUPPORTED, and AUTO picks the
 *     fused kernel. Nothing here has been measured or tested on AMD.
 *
 * Tracing
 *   Compile with -DIRIS_GEMM_TRACE and set desc.trace = 1: every fetcher and GEMM CTA of
 *   the fused kernel records start and end times (globaltimer) of each fetch, wait and
 *   tile; iris_ag_gemm_trace_write exports a Chrome/Perfetto trace (JSON) of the last
 *   run, and tools/trace_gantt.py draws it as a Gantt chart (PNG). Without the macro the
 *   recording code is not compiled at all.
 */
#ifndef IRIS_GEMM_H
#define IRIS_GEMM_H
#include "iris_collectives.h"
#include "internal/gemm/types.h" /* iris_gemm_path_t, iris_gemm_path_name: shared with iris_gemm_reduce.h */

typedef enum iris_gemm_layout { IRIS_GEMM_A_ROWS = 0, IRIS_GEMM_A_COLS } iris_gemm_layout_t;

/* What to compute and how. Start from IRIS_AG_GEMM_DESC_INIT. */
typedef struct iris_ag_gemm_desc {
  size_t struct_size;
  iris_gemm_layout_t layout;
  long long M, N, K;    /* the gathered problem: A is M x K */
  iris_dtype_t a_type;  /* IRIS_BFLOAT16 or IRIS_FLOAT16 (or IRIS_FLOAT8_E4M3: see Rules); B has the same type */
  iris_dtype_t c_type;  /* IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT32; bias too */
  int b_transposed;     /* 0: B is K x N row-major; 1: B is N x K row-major */
  int has_bias;         /* 1: run takes N bias values, added to every row of C */
  iris_gemm_path_t path;/* IRIS_GEMM_PATH_AUTO: see iris_ag_gemm_choose_path */
  int chunks;           /* pipelined: chunks per peer (ROWS) or in all (COLS); 0 = auto */
  int fetch_ctas;       /* fused kernel: fetcher CTAs; 0 = auto; -1 = none, the GEMM CTAs'
                         * side warps fetch (the TMA core; without it: auto) */
  int k_group;          /* fused kernel: columns of A per ready flag; 0 = auto */
  int stage_a;          /* 1: A shards are not on the heap; copy them into the plan's */
  int trace;            /* 1: record a trace (needs -DIRIS_GEMM_TRACE) */
  int gemm_streams;     /* pipelined: streams the chunk GEMMs alternate on, 1 or 2; 0 = auto */
} iris_ag_gemm_desc_t;
#define IRIS_AG_GEMM_DESC_INIT \
  {sizeof(iris_ag_gemm_desc_t), IRIS_GEMM_A_ROWS, 0, 0, 0, IRIS_BFLOAT16, IRIS_BFLOAT16, 0, 0, IRIS_GEMM_PATH_AUTO, 0, 0, 0, 0, 0, 0}

typedef struct iris_ag_gemm iris_ag_gemm_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Collective, outside graph capture: check the description (the same on every rank,
 * else IRIS_ERROR_MISMATCH), choose the path, allocate the staging buffer (local, M x K)
 * and the flags (heap), and prepare the GEMMs. A plan exists on every rank or on none; on
 * failure *out is NULL. A NULL desc or out on some ranks: IRIS_ERROR_INVALID_ARGUMENT there
 * and IRIS_ERROR_MISMATCH naming them on the others (the call still meets the peers, so
 * none waits for it); a NULL ctx: IRIS_ERROR_INVALID_ARGUMENT at once.
 * A step that fails on one rank only (host or heap memory, a GPU call): its error there
 * and IRIS_ERROR_MISMATCH naming it on the others, at once (the failing rank still takes
 * part in every exchange of the create). */
IRIS_API iris_status_t iris_ag_gemm_create(iris_t *ctx, const iris_ag_gemm_desc_t *desc, iris_ag_gemm_t **out);
/* Every rank, same order: C = all_gather(A) * B (+ bias) on stream. bias: NULL unless
 * desc.has_bias. Enqueues only (capturable); see Rules for ordering. Runs after the
 * context's previous communication call (collectives, device barrier, other plans),
 * whatever the stream, as the collectives do; returns the context's fatal fault at once
 * (iris_get_async_error, iris.h). Failed waits of a run: iris_ag_gemm_check. Bad
 * arguments: IRIS_ERROR_INVALID_ARGUMENT (IRIS_ERROR_NOT_IN_HEAP for an A shard off the
 * heap) naming the rule; the run still takes part in the call, touching no buffer (Rules:
 * "A run refused on one rank"). */
IRIS_API iris_status_t iris_ag_gemm_run(iris_ag_gemm_t *g, const void *a_shard, const void *b, const void *bias, void *c, iris_stream_t stream);
/* As iris_ag_gemm_run, with per-tensor scales for fp8 inputs (device pointers to one float
 * each: C = (a_scale * A) * (b_scale * B) (+ bias)). An fp8 plan must come here with both
 * scales (iris_ag_gemm_run refuses it); a bf16/fp16 plan takes NULL scales. Else
 * IRIS_ERROR_INVALID_ARGUMENT naming the rule (the run takes part as a refused one). */
IRIS_API iris_status_t iris_ag_gemm_run_scaled(iris_ag_gemm_t *g, const void *a_shard, const void *b, const float *a_scale, const float *b_scale, const void *bias,
                                               void *c, iris_stream_t stream);
/* Synchronous; call it once the plan's runs have completed on their streams (e.g. after
 * cudaStreamSynchronize: it reads device memory and does not wait for other streams).
 * The fused and kernel-unfused kernels bound every wait (IRIS_WAIT_TIMEOUT_NS; local
 * ready flags 1.25 times that, the TMA core's pipeline twice that); the first wait that
 * runs past its bound in a call aborts the call (its other waits return at once, C is
 * wrong) and is recorded. Returns IRIS_ERROR_TIMEOUT if a wait ran past its bound since
 * the last check, with a detail naming the wait, the peer rank it waited for and the call
 * (1 = the plan's first run), and clears the record; IRIS_ERROR_MISMATCH where a peer's run
 * of a call was refused (Rules: "A run refused on one rank"; naming the call and the peer:
 * C of that call is wrong here, the plan stays in step); else IRIS_SUCCESS. The plan stays
 * usable, but a peer that skipped a call leaves it out of step for good: destroy it.
 * The pipelined and unfused paths wait only in the device barrier of iris_collectives.h,
 * which reports its own timeouts; for them this returns IRIS_SUCCESS. */
IRIS_API iris_status_t iris_ag_gemm_check(iris_ag_gemm_t *g);
/* The path the plan runs (its name: iris_gemm_path_name). */
IRIS_API iris_gemm_path_t iris_ag_gemm_path(const iris_ag_gemm_t *g);
/* The GEMM engine the plan's path runs: "cublaslt" (pipelined, unfused), or for the fused
 * and kernel-unfused paths "tma-wgmma" (internal/gemm/core_tma.h, sm_90a), "mma.sync" (no sm_90a
 * device pass) or "mfma" (AMD). Set IRIS_GEMM_TMA=0 in the environment before create to run
 * the cp.async core ("cp.async-wgmma") instead, for comparison. */
IRIS_API const char *iris_ag_gemm_engine(const iris_ag_gemm_t *g);
/* The path AUTO picks for a description on this build (no GPU work): with cuBLASLt,
 * unfused below 256 rows per rank (M/W < IRIS_AG_GEMM_PIPELINE_MIN_ROWS) and, layout
 * ROWS, below 512 for a GEMM under 2^35 FLOP (2MNK < IRIS_AG_GEMM_SMALL_FLOP), else
 * pipelined; without it, fused. */
IRIS_API iris_gemm_path_t iris_ag_gemm_choose_path(const iris_ag_gemm_desc_t *desc, int world_size);
/* Synchronous: write the last run's trace as Chrome trace JSON (needs desc.trace and
 * -DIRIS_GEMM_TRACE; IRIS_ERROR_UNSUPPORTED otherwise). */
IRIS_API iris_status_t iris_ag_gemm_trace_write(iris_ag_gemm_t *g, const char *json_path);
/* Collective: free the plan (synchronises the device first, then frees the heap blocks in
 * reverse order). NULL: IRIS_SUCCESS. The pointer is invalid afterwards: destroy a plan once, before iris_finalize, and call
 * nothing of it after (no check can catch a freed plan). */
IRIS_API iris_status_t iris_ag_gemm_destroy(iris_ag_gemm_t *g);
#ifdef __cplusplus
}
#endif

#if defined(IRIS_DETAIL_GPU_COMPILER)
/* ========================================================================= */
/*              device building blocks: per-tile ready flags                 */
/* ========================================================================= */
/* A grid of ready flags over (m-tile, k-group) blocks of a matrix, one unsigned epoch
 * each, on the symmetric heap. A producer publishes a block for epoch e once it is
 * complete; a consumer waits until the block's flag has reached e (wrap-safe). Flags
 * are never reset: each use of the protocol passes the next epoch. */
typedef struct iris_gemm_ready {
  unsigned *flags; /* [tiles_m * groups_k], heap */
  int tiles_m, groups_k;
} iris_gemm_ready_t;

/* Whole block, producer on the same GPU as the consumer. Every thread's earlier stores
 * finish (__syncthreads), then thread 0 release-stores epoch at device scope. */
IRIS_DEVICE_INLINE void iris_gemm_publish_tile(iris_gemm_ready_t r, int m, int k, unsigned epoch) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
    iris_atomic_store<IRIS_ORDER_RELEASE, IRIS_SCOPE_DEVICE>(r.flags + (size_t)m * r.groups_k + k, epoch);
}
/* Whole block, consumer on another GPU: the same, but the flag is to_rank's and the
 * release is at system scope (the block's stores, local or remote, are visible to a
 * thread of to_rank that acquires the flag). */
IRIS_DEVICE_INLINE void iris_gemm_publish_tile_to(const iris_device_ctx_t &ctx, iris_gemm_ready_t r, int m, int k, unsigned epoch, int to_rank) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) iris_signal(ctx, r.flags + (size_t)m * r.groups_k + k, epoch, to_rank);
}
/* Whole block. Thread 0 waits until this rank's flag (m, k) has reached epoch, acquiring
 * at scope S (IRIS_SCOPE_DEVICE when the producer is on this GPU, IRIS_SCOPE_SYSTEM when
 * it published with iris_gemm_publish_tile_to), then the block meets: every thread may
 * read the block's data. False in every thread if the wait timed out. "Reached" is the
 * half-range test (IRIS_CMP_EPOCH): a flag left 2^31 epochs or more behind reads as
 * reached, so publish every tile's flag at least once every 2^31 epochs (a tile that a
 * call of fewer rows skips included), or give each shape its own flags. */
template <iris_scope_t S = IRIS_SCOPE_DEVICE>
IRIS_DEVICE_INLINE bool iris_gemm_wait_tile(const iris_device_ctx_t &ctx, iris_gemm_ready_t r, int m, int k, unsigned epoch) {
  int ok = 1;
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
    ok = iris_wait_until<S>(ctx, r.flags + (size_t)m * r.groups_k + k, IRIS_CMP_EPOCH, epoch, "iris_gemm_wait_tile") ? 1 : 0;
  return __syncthreads_and(ok) != 0;
}

/* ========================================================================= */
/*                            implementation                                 */
/* ========================================================================= */
#include "internal/gemm/common.h"       /* shared with iris_gemm_reduce.h: the GEMM cores, error record, waits */
#include "internal/gemm/ag_kernel.h"    /* the fused kernel: fetcher and GEMM roles, the cross-rank protocol */
#endif /* device compiler */
#endif /* IRIS_GEMM_H */

/* The implementation (IRIS_IMPLEMENTATION, nvcc or hipcc), after the include guard as in
 * iris.h: a unit may include this header before it defines IRIS_IMPLEMENTATION. */
#if defined(IRIS_IMPLEMENTATION) && !defined(IRIS_GEMM_IMPLEMENTATION_DONE) && defined(IRIS_DETAIL_GPU_COMPILER)
#define IRIS_GEMM_IMPLEMENTATION_DONE
#include "iris_collectives.h"
#include "internal/gemm/host.h" /* shared with the other GEMM header: cuBLASLt, path names, the description agreement */
#include "internal/gemm/ag_plan.h"      /* the plan: AUTO, the description's rules, the kernel's cut, launches */
#include "internal/gemm/ag_pipelined.h" /* the copy-engine paths: pipelined and unfused */
#include "internal/gemm/ag.h"           /* create, run, check, trace, destroy */
#endif
