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
 *                                (internal/gemm_core_tma.h; its producer thread waits on
 *                                the flags and runs ahead of the math), else mma.sync;
 *                                on AMD MFMA, unverified: see Rules.
 *     IRIS_GEMM_PATH_UNFUSED     gather everything (copy engines), then one cuBLASLt
 *                                GEMM: a baseline.
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
 *     (edge tiles are masked). B, C and bias 16-byte aligned (256 for the cuBLASLt
 *     paths). Anything else: IRIS_ERROR_INVALID_ARGUMENT naming the rule.
 *   - fp8 (a_type IRIS_FLOAT8_E4M3, B the same): the pipelined and unfused paths only
 *     (AUTO picks pipelined; the fused kernels: IRIS_ERROR_UNSUPPORTED), b_transposed = 1
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
 *     the wait bound (IRIS_WAIT_TIMEOUT_NS, 10 s by default) with a wrong C, and
 *     iris_ag_gemm_check (after the stream is synchronised) returns IRIS_ERROR_TIMEOUT
 *     naming the wait and the peer. Check after runs whose results matter; after such an
 *     error destroy the plan (every rank). docs/gemm_waits.md lists every wait.
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
 *     MFMA core (internal/gemm_core_mfma.h, gfx90a and gfx940) that compiles but has NEVER
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

typedef enum iris_gemm_layout { IRIS_GEMM_A_ROWS = 0, IRIS_GEMM_A_COLS } iris_gemm_layout_t;
typedef enum iris_gemm_path {
  IRIS_GEMM_PATH_AUTO = 0,
  IRIS_GEMM_PATH_PIPELINED,
  IRIS_GEMM_PATH_FUSED,
  IRIS_GEMM_PATH_UNFUSED,
  IRIS_GEMM_PATH_KERNEL_UNFUSED,
  IRIS_GEMM_PATH_COUNT
} iris_gemm_path_t;

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
 * and the flags (heap), and prepare the GEMMs. */
IRIS_API iris_status_t iris_ag_gemm_create(iris_t *ctx, const iris_ag_gemm_desc_t *desc, iris_ag_gemm_t **out);
/* Every rank, same order: C = all_gather(A) * B (+ bias) on stream. bias: NULL unless
 * desc.has_bias. Enqueues only (capturable); see Rules for ordering. Runs after the
 * context's previous communication call (collectives, device barrier, other plans),
 * whatever the stream, as the collectives do; returns the context's fatal fault at once
 * (iris_get_async_error, iris.h). Failed waits of a run: iris_ag_gemm_check. */
IRIS_API iris_status_t iris_ag_gemm_run(iris_ag_gemm_t *g, const void *a_shard, const void *b, const void *bias, void *c, iris_stream_t stream);
/* As iris_ag_gemm_run, with per-tensor scales for fp8 inputs (device pointers to one float
 * each: C = (a_scale * A) * (b_scale * B) (+ bias)). An fp8 plan must come here with both
 * scales (iris_ag_gemm_run refuses it); a bf16/fp16 plan takes NULL scales. Else
 * IRIS_ERROR_INVALID_ARGUMENT naming the rule. */
IRIS_API iris_status_t iris_ag_gemm_run_scaled(iris_ag_gemm_t *g, const void *a_shard, const void *b, const float *a_scale, const float *b_scale, const void *bias,
                                               void *c, iris_stream_t stream);
/* Synchronous; call it once the plan's runs have completed on their streams (e.g. after
 * cudaStreamSynchronize: it reads device memory and does not wait for other streams).
 * The fused and kernel-unfused kernels bound every wait (IRIS_WAIT_TIMEOUT_NS; local
 * ready flags 1.25 times that, the TMA core's pipeline twice that); the first wait that
 * runs past its bound in a call aborts the call (its other waits return at once, C is
 * wrong) and is recorded. Returns IRIS_ERROR_TIMEOUT if a wait ran past its bound since
 * the last check, with a detail naming the wait, the peer rank it waited for and the call
 * (1 = the plan's first run), and clears the record; else IRIS_SUCCESS. The plan stays
 * usable, but a peer that skipped a call leaves it out of step for good: destroy it.
 * The pipelined and unfused paths wait only in the device barrier of iris_collectives.h,
 * which reports its own timeouts; for them this returns IRIS_SUCCESS. */
IRIS_API iris_status_t iris_ag_gemm_check(iris_ag_gemm_t *g);
/* The path the plan runs. */
IRIS_API iris_gemm_path_t iris_ag_gemm_path(const iris_ag_gemm_t *g);
IRIS_API const char *iris_gemm_path_name(iris_gemm_path_t path);
/* The GEMM engine the plan's path runs: "cublaslt" (pipelined, unfused), or for the fused
 * and kernel-unfused paths "tma-wgmma" (internal/gemm_core_tma.h, sm_90a), "mma.sync" (no sm_90a
 * device pass) or "mfma" (AMD). Set IRIS_GEMM_TMA=0 in the environment before create to run
 * the cp.async core ("cp.async-wgmma") instead, for comparison. */
IRIS_API const char *iris_ag_gemm_engine(const iris_ag_gemm_t *g);
/* The path AUTO picks for a description on this build (no GPU work). */
IRIS_API iris_gemm_path_t iris_ag_gemm_choose_path(const iris_ag_gemm_desc_t *desc, int world_size);
/* Synchronous: write the last run's trace as Chrome trace JSON (needs desc.trace and
 * -DIRIS_GEMM_TRACE; IRIS_ERROR_UNSUPPORTED otherwise). */
IRIS_API iris_status_t iris_ag_gemm_trace_write(iris_ag_gemm_t *g, const char *json_path);
/* Collective: free the plan (synchronises the device first). */
IRIS_API iris_status_t iris_ag_gemm_destroy(iris_ag_gemm_t *g);
#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
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
 * read the block's data. False in every thread if the wait timed out. */
template <iris_scope_t S = IRIS_SCOPE_DEVICE>
IRIS_DEVICE_INLINE bool iris_gemm_wait_tile(const iris_device_ctx_t &ctx, iris_gemm_ready_t r, int m, int k, unsigned epoch) {
  int ok = 1;
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
    ok = iris_wait_until<S>(ctx, r.flags + (size_t)m * r.groups_k + k, IRIS_CMP_EPOCH, epoch, "iris_gemm_wait_tile") ? 1 : 0;
  return __syncthreads_and(ok) != 0;
}

/* The tile GEMM core: CUDA always; AMD (MFMA, never run on hardware) only with
 * IRIS_GEMM_MFMA_UNVERIFIED. */
#if !defined(IRIS_GEMM_NO_CORE) && (!defined(IRIS_USE_HIP) || defined(IRIS_GEMM_MFMA_UNVERIFIED))
#include "internal/gemm_core_tma.h"  /* includes internal/gemm_core.h; empty outside nvcc */
#include "internal/gemm_core_mfma.h" /* empty unless hipcc and IRIS_GEMM_MFMA_UNVERIFIED */
#if defined(IRIS_GEMM_CORE_AVAILABLE)
#define IRIS_GEMM_HAVE_CORE 1
#endif
#endif

/* ========================================================================= */
/*                 the fused kernel (fetcher and GEMM roles)                 */
/* ========================================================================= */
/* 16-byte loads each fetcher thread keeps in flight (see iris_ag_gemm_fetch). */
#ifndef IRIS_GEMM_FETCH_UNROLL
#define IRIS_GEMM_FETCH_UNROLL 16
#endif
/* Trace events: 4 words each: start ns, end ns, kind | index << 8, slot. */
enum { IRIS_GEMM_EV_FETCH = 1, IRIS_GEMM_EV_WAIT = 2, IRIS_GEMM_EV_TILE = 3 };

typedef struct iris_ag_gemm_dev {
  iris_device_ctx_t ctx;
  const char *a_shard;     /* heap address, the same offset on every rank */
  char *staged;            /* local M x K */
  iris_gemm_ready_t ready; /* [tiles_m][groups_k] on the heap; local use */
  unsigned *claim;         /* heap [tiles_m * groups_k], local use (d.help): the last call whose
                            * block was claimed by a fetcher or a helper */
  unsigned *arrive;        /* heap [IRIS_MAX_RANKS]: the epoch rank q's A is ready at */
  unsigned *done;          /* heap [IRIS_MAX_RANKS]: rank q's fetcher CTAs done reading ours */
  unsigned *err;           /* heap [IRIS_GEMM_ERR_WORDS], local use: the first failed wait
                            * (see iris_ag_gemm_fail) and the abort word */
  unsigned *counters;      /* heap [slots]: this rank's epoch per CTA slot */
  unsigned long long *trace; /* [3 * slots][1 + trace_cap * 4]: count, then events; row slot:
                              * the slot's fetches or tiles, slots + slot: the TMA producer's
                              * waits, 2 * slots + slot: the side fetches (one writer each) */
  int trace_cap;
  int M, N, K, layout, bm, kg, tiles_m, tiles_n, groups_k, fetchers, gemm_ctas, rot;
  int raster;              /* TMA core: m-tiles per group of the tile order (1: row by row) */
  int side_fetch;          /* fused TMA kernel: A is fetched by the GEMM CTAs' side warps */
  int help;                /* fused TMA kernel with fetcher CTAs: the GEMM CTAs' side warps
                            * fetch what no fetcher has claimed after IRIS_GEMM_HELP_AFTER_NS */
} iris_ag_gemm_dev_t;

#if defined(IRIS_GEMM_TRACE)
/* One event [t0, t1) in trace row r (see iris_ag_gemm_dev_t::trace); one thread per row writes. */
IRIS_DEVICE_INLINE void iris_gemm_trace_at(const iris_ag_gemm_dev_t &d, int r, unsigned long long t0, unsigned long long t1, int kind, int index) {
  if (!d.trace) return;
  unsigned long long *row = d.trace + (size_t)r * (1 + 4 * (size_t)d.trace_cap);
  const unsigned long long n = row[0];
  if (n < (unsigned long long)d.trace_cap) {
    unsigned long long *e = row + 1 + 4 * n;
    e[0] = t0;
    e[1] = t1;
    e[2] = (unsigned long long)kind | ((unsigned long long)index << 8);
    e[3] = (unsigned long long)r;
    row[0] = n + 1;
  }
}
IRIS_DEVICE_INLINE void iris_gemm_trace(const iris_ag_gemm_dev_t &d, int slot, unsigned long long t0, int kind, int index) {
  if (threadIdx.x == 0) iris_gemm_trace_at(d, slot, t0, iris_detail_time_ns(), kind, index);
}
#define IRIS_GEMM_T0() unsigned long long iris_t0_ = d.trace ? iris_detail_time_ns() : 0
#define IRIS_GEMM_TRACE_EV(slot, kind, index) iris_gemm_trace(d, slot, iris_t0_, kind, index)
#else
#define IRIS_GEMM_T0() ((void)0)
#define IRIS_GEMM_TRACE_EV(slot, kind, index) ((void)0)
#endif

/* ---- bounded waits with one error record per plan (docs/gemm_waits.md lists them all).
 * Every wait of the fused kernels is bounded. The first one that expires in a call records
 * what it waited for (iris_ag_gemm_fail) and stores the call's epoch into the abort word;
 * every later wait of that call (any CTA, any launch of the call) sees the abort word and
 * returns at once, so a stuck peer costs one wait bound per call, not one per tile. The
 * host reads the record with iris_ag_gemm_check. Waits never skip the signals that peers
 * wait for (arrive, done, ready), so a slow peer is never blocked by this rank's abort. */
enum {
  IRIS_GEMM_ERR_WHAT = 0,  /* 0: none; else the IRIS_GEMM_WAIT_* that expired first */
  IRIS_GEMM_ERR_PEER,      /* the rank whose signal was missing (-1: this rank's own CTAs) */
  IRIS_GEMM_ERR_EPOCH,     /* the call (1 = the plan's first run) */
  IRIS_GEMM_ERR_BLOCK,     /* the CTA slot that waited */
  IRIS_GEMM_ERR_GOT,       /* the flag's value at expiry */
  IRIS_GEMM_ERR_WANT,      /* the value it waited for */
  IRIS_GEMM_ERR_ITEM,      /* ready flags: m-tile * groups_k + k-group */
  IRIS_GEMM_ERR_ABORT,     /* the epoch of the last call that failed: its waits return at once */
  IRIS_GEMM_ERR_PEER_ABORT,/* the same, written by a peer whose call failed (iris_ag_gemm_tell_peers) */
  IRIS_GEMM_ERR_WORDS
};
/* What failed. PEER_FAILED: a peer gave up on the call (PEER: that rank, GOT: its own
 * IRIS_GEMM_WAIT_*, WANT: the rank its wait was for, or -1). */
/* TILE: iris_gemm_reduce.h's fused path, an owner's wait for a peer's pushed tile (PEER:
 * that rank, ITEM: the 64-row half * n-tiles + n-tile). */
enum { IRIS_GEMM_WAIT_ARRIVE = 1, IRIS_GEMM_WAIT_DONE, IRIS_GEMM_WAIT_READY, IRIS_GEMM_WAIT_PIPELINE, IRIS_GEMM_WAIT_PEER_FAILED, IRIS_GEMM_WAIT_TILE };

/* One thread: record a failed wait of call `epoch` (the first since the host last read the
 * record keeps its details) and abort the call. */
IRIS_DEVICE_INLINE void iris_ag_gemm_fail(unsigned *err, unsigned epoch, int what, int peer, unsigned got, unsigned want, int item) {
  iris_atomic_store<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(err + IRIS_GEMM_ERR_ABORT, epoch);
  if (atomicCAS(err + IRIS_GEMM_ERR_WHAT, 0u, (unsigned)what) == 0u) {
    err[IRIS_GEMM_ERR_PEER] = (unsigned)peer;
    err[IRIS_GEMM_ERR_EPOCH] = epoch;
    err[IRIS_GEMM_ERR_BLOCK] = blockIdx.x;
    err[IRIS_GEMM_ERR_GOT] = got;
    err[IRIS_GEMM_ERR_WANT] = want;
    err[IRIS_GEMM_ERR_ITEM] = (unsigned)item;
  }
}
/* Whether call `epoch` has already failed somewhere on this rank, or a peer said it failed
 * there. */
IRIS_DEVICE_INLINE bool iris_ag_gemm_aborted(const unsigned *err, unsigned epoch) {
  return iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(err + IRIS_GEMM_ERR_ABORT) == epoch ||
         iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(err + IRIS_GEMM_ERR_PEER_ABORT) == epoch;
}
/* A short pause between polls of a wait that is taking long (frees issue slots and L2 for
 * the CTAs that do the work, and yields when ranks share a GPU). */
IRIS_DEVICE_INLINE void iris_ag_gemm_pause(void) {
#if defined(IRIS_USE_HIP)
  __builtin_amdgcn_s_sleep(2);
#else
  __nanosleep(256);
#endif
}
/* Local ready flags wait a quarter bound longer than waits on peers: when a peer is stuck,
 * the wait on the peer expires first and the record names it. */
#define IRIS_GEMM_READY_TIMEOUT_NS ((unsigned long long)IRIS_WAIT_TIMEOUT_NS + (unsigned long long)IRIS_WAIT_TIMEOUT_NS / 4)

/* One thread: spin until *flag has reached want (wrap-safe), each poll a load of order O
 * at scope S (acquire: what the signaller released is visible after it). Bounded by
 * bound_ns; polls without pause for the first 2048 rounds, then pauses between them.
 * Returns false at once if call `epoch` failed elsewhere, and on expiry records the
 * failure (what, peer, item) and aborts the call. IRIS_DEBUG: reports and traps. */
template <iris_order_t O, iris_scope_t S>
IRIS_DEVICE_INLINE bool iris_ag_gemm_wait_flag(unsigned *err, const unsigned *flag, unsigned want, unsigned epoch, int what, int peer, int item,
                                               unsigned long long bound_ns = IRIS_WAIT_TIMEOUT_NS) {
  unsigned spins = 0, got;
  unsigned long long start = 0;
  for (;;) {
    got = iris_atomic_load<O, S>(flag);
    if (iris_epoch_reached(got, want)) return true;
    if ((++spins & 255) == 0) {
      const unsigned long long now = iris_detail_time_ns();
      if (iris_ag_gemm_aborted(err, epoch)) return false;
      if (!start) start = now;
      else if (now - start > bound_ns) break;
    }
    if (spins > 2048) iris_ag_gemm_pause();
  }
#if defined(IRIS_DEBUG)
  printf("iris: iris_ag_gemm: wait %d (1 peer's A ready, 2 peers done reading A, 3 ready flag, see docs/gemm_waits.md) timed out: block %d, call %u, peer %d, item %d: flag holds %u, want %u\n",
         what, (int)blockIdx.x, epoch, peer, item, got, want);
  iris_detail_trap();
#endif
  iris_ag_gemm_fail(err, epoch, what, peer, got, want, item);
  return false;
}
/* One thread: wait until local ready flag `item` (of d.ready) reaches epoch (acquire, device
 * scope: the fetchers are on this GPU). False if the call failed (recorded). */
IRIS_DEVICE_INLINE bool iris_ag_gemm_wait_ready(unsigned *err, const unsigned *flags, int item, unsigned epoch) {
  return iris_ag_gemm_wait_flag<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_DEVICE>(err, flags + item, epoch, epoch, IRIS_GEMM_WAIT_READY, -1, item, IRIS_GEMM_READY_TIMEOUT_NS);
}
/* Whole block: the same by thread 0, then the block meets. */
IRIS_DEVICE_INLINE void iris_ag_gemm_wait_local(unsigned *err, const unsigned *flags, int item, unsigned epoch) {
  if (threadIdx.x == 0) iris_ag_gemm_wait_ready(err, flags, item, epoch);
  __syncthreads();
}
/* One thread per CTA, at the CTA's end: if call `epoch` failed on this rank, tell every
 * peer (their waits of the call return at once, and their record says which rank gave up
 * and why: after a timed-out wait this rank may overwrite its A while a slow peer still
 * reads it, so the peer's C is suspect too). Idempotent: every CTA of the call does it. */
IRIS_DEVICE_INLINE void iris_gemm_err_tell_peers(const iris_device_ctx_t &ctx, unsigned *err, unsigned epoch) {
  if (iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(err + IRIS_GEMM_ERR_ABORT) != epoch) return;
  const unsigned what = err[IRIS_GEMM_ERR_WHAT], why = err[IRIS_GEMM_ERR_PEER];
  for (int q = 0; q < ctx.world_size; ++q) {
    if (q == ctx.rank) continue;
    unsigned *e = iris_translate(ctx, err, q);
    iris_atomic_store<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(e + IRIS_GEMM_ERR_PEER_ABORT, epoch);
    if (iris_atomic_cas<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(e + IRIS_GEMM_ERR_WHAT, 0u, (unsigned)IRIS_GEMM_WAIT_PEER_FAILED) == 0u) {
      e[IRIS_GEMM_ERR_PEER] = (unsigned)ctx.rank;
      e[IRIS_GEMM_ERR_EPOCH] = epoch;
      e[IRIS_GEMM_ERR_BLOCK] = blockIdx.x;
      e[IRIS_GEMM_ERR_GOT] = what;
      e[IRIS_GEMM_ERR_WANT] = why;
      e[IRIS_GEMM_ERR_ITEM] = ~0u;
    }
  }
}
IRIS_DEVICE_INLINE void iris_ag_gemm_tell_peers(const iris_ag_gemm_dev_t &d, unsigned epoch) { iris_gemm_err_tell_peers(d.ctx, d.err, epoch); }

/* Which rank holds element (row, col) of A, and its address there (before translation). */
IRIS_DEVICE_INLINE int iris_ag_gemm_owner(const iris_ag_gemm_dev_t &d, int row, int col) {
  return d.layout == IRIS_GEMM_A_ROWS ? row / (d.M / d.ctx.world_size) : col / (d.K / d.ctx.world_size);
}
IRIS_DEVICE_INLINE size_t iris_ag_gemm_shard_offset(const iris_ag_gemm_dev_t &d, int row, int col, int owner) {
  if (d.layout == IRIS_GEMM_A_ROWS) return ((size_t)(row - owner * (d.M / d.ctx.world_size)) * d.K + col) * 2;
  const int kl = d.K / d.ctx.world_size;
  return ((size_t)row * kl + (col - owner * kl)) * 2;
}

/* Thread groups that fetch: the whole block, or the 96 side threads of a TMA-core CTA
 * (warps 1-3 of its producer warpgroup; named barrier 1). */
struct iris_ag_gemm_block_group {
  __device__ int tid() const { return (int)threadIdx.x; }
  __device__ int size() const { return (int)blockDim.x; }
  __device__ void sync() const { __syncthreads(); }
};
struct iris_ag_gemm_side_group {
  int t;
  __device__ int tid() const { return t; }
  __device__ int size() const { return 96; }
  __device__ void sync() const { asm volatile("bar.sync 1, 96;\n" ::: "memory"); }
  /* the group meets (named barrier 1); nonzero in every thread if v was in any */
  __device__ int any(int v) const {
    int r;
    asm volatile("{\n.reg .pred p, q;\nsetp.ne.s32 p, %1, 0;\nbar.red.or.pred q, 1, 96, p;\nselp.s32 %0, 1, 0, q;\n}\n" : "=r"(r) : "r"(v) : "memory");
    return r;
  }
};

/* Whole group (fetcher): copy block (mt, kg) of the gathered A into the staging buffer,
 * then publish it (every thread's stores, a group barrier, one release at device
 * scope). Before the first read from a peer it waits for that peer's "A is ready" epoch
 * (seen: bitmask of peers already waited for, the same in every thread). UNROLL 16-byte
 * loads in flight per thread. */
template <typename T, int UNROLL, class G>
IRIS_DEVICE_INLINE void iris_ag_gemm_fetch_by(const G &grp, const iris_ag_gemm_dev_t &d, int mt, int kg, unsigned epoch, unsigned &seen) {
  const int r0 = mt * d.bm, r1 = min(d.M, r0 + d.bm), c0 = kg * d.kg, c1 = min(d.K, c0 + d.kg);
  const int q0 = iris_ag_gemm_owner(d, r0, c0), q1 = iris_ag_gemm_owner(d, r1 - 1, c1 - 1);
  const int tid = grp.tid(), nt = grp.size();
  for (int q = q0; q <= q1; ++q) {
    if (q == d.ctx.rank || (seen >> q & 1u)) continue;
    if (tid == 0) iris_ag_gemm_wait_flag<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(d.err, d.arrive + q, epoch, epoch, IRIS_GEMM_WAIT_ARRIVE, q, -1);
    seen |= 1u << q;
  }
  grp.sync();
  const int vpr = (c1 - c0) / 8, n = (r1 - r0) * vpr; /* 16-byte vectors */
  if (q0 == q1) {
    /* one owner (the usual case): UNROLL loads in flight per thread before their
     * stores, so a few fetchers keep enough bytes in flight to cover the NVLink latency */
    const char *src = (const char *)iris_translate(d.ctx, d.a_shard, q0) + iris_ag_gemm_shard_offset(d, r0, c0, q0);
    char *dst = d.staged + ((size_t)r0 * d.K + c0) * 2;
    const size_t sstride = (size_t)(d.layout == IRIS_GEMM_A_ROWS ? d.K : d.K / d.ctx.world_size) * 2, dstride = (size_t)d.K * 2;
    /* (row, vector) of index i without a division per vector when vpr is a power of two
     * (every full k-group); the index math must stay cheap: a few fetcher CTAs move all
     * of A, and with a division per 16 bytes they were instruction-bound */
    const int sh = (vpr & (vpr - 1)) == 0 ? __ffs(vpr) - 1 : -1;
    for (int i0 = tid; i0 < n; i0 += UNROLL * nt) {
      uint4 v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = i0 + u * nt, row = sh >= 0 ? i >> sh : i / vpr, vec = i - row * vpr;
        if (i < n) v[u] = *(const uint4 *)(src + row * sstride + vec * 16);
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = i0 + u * nt, row = sh >= 0 ? i >> sh : i / vpr, vec = i - row * vpr;
        if (i < n) *(uint4 *)(dst + row * dstride + vec * 16) = v[u];
      }
    }
  } else {
    /* a block that straddles two owners' rows */
    for (int i = tid; i < n; i += nt) {
      const int row = r0 + i / vpr, col = c0 + (i % vpr) * 8, q = iris_ag_gemm_owner(d, row, col);
      *(uint4 *)(d.staged + ((size_t)row * d.K + col) * 2) =
          *(const uint4 *)((const char *)iris_translate(d.ctx, d.a_shard, q) + iris_ag_gemm_shard_offset(d, row, col, q));
    }
  }
  grp.sync();
  if (tid == 0) iris_atomic_store<IRIS_ORDER_RELEASE, IRIS_SCOPE_DEVICE>(d.ready.flags + (size_t)mt * d.ready.groups_k + kg, epoch);
}
/* Whole block (fetcher CTA): iris_ag_gemm_fetch_by with the block. */
template <typename T>
IRIS_DEVICE_INLINE void iris_ag_gemm_fetch(const iris_ag_gemm_dev_t &d, int mt, int kg, unsigned epoch, unsigned &seen) {
  iris_ag_gemm_fetch_by<T, IRIS_GEMM_FETCH_UNROLL>(iris_ag_gemm_block_group(), d, mt, kg, epoch, seen);
}

/* The GEMM core's hook, called by the whole block before it loads A columns
 * [k0, k0 + BK) of m-tile mt: wait for every k-group that starts in that slab (a group
 * starting earlier was waited for at the slab holding its start). */
template <int BK>
struct iris_ag_gemm_waiter {
  unsigned *err;
  const unsigned *flags; /* d.ready.flags */
  int row, kg, K;        /* row: m-tile mt's first flag (mt * groups_k) */
  unsigned epoch;
#if defined(IRIS_GEMM_TRACE)
  const iris_ag_gemm_dev_t *d;
  int mt, slot;
#endif
  __device__ void operator()(int k0) const {
    const int end = min(K, k0 + BK);
    for (int g = k0 == 0 ? 0 : (k0 + kg - 1) / kg; g * kg < end; ++g) {
#if defined(IRIS_GEMM_TRACE)
      const unsigned long long t0 = d->trace ? iris_detail_time_ns() : 0;
      iris_ag_gemm_wait_local(err, flags, row + g, epoch);
      if (d->trace && iris_detail_time_ns() - t0 > 1000) iris_gemm_trace(*d, slot, t0, IRIS_GEMM_EV_WAIT, mt);
#else
      iris_ag_gemm_wait_local(err, flags, row + g, epoch);
#endif
    }
  }
};

/* Whole block, at the end of a call: threads 0..W-1 (but this rank's) wait until peer q's
 * `per_call` CTAs have each said, at every call so far, that they are done reading this
 * rank's A (relaxed: execution only, no data is handed over). */
IRIS_DEVICE_INLINE void iris_ag_gemm_wait_done(const iris_ag_gemm_dev_t &d, unsigned epoch, unsigned per_call) {
  const int q = (int)threadIdx.x;
  if (q < d.ctx.world_size && q != d.ctx.rank)
    iris_ag_gemm_wait_flag<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(d.err, d.done + q, epoch * per_call, epoch, IRIS_GEMM_WAIT_DONE, q, -1);
}

/* Whole block, fetcher slot `slot` of a call at epoch: announce this rank's A (slot 0),
 * copy the slot's (m-tile, k-group) blocks into the staging buffer, publish each, then
 * tell every peer this CTA is done reading its A (slot 0 also waits until every peer's
 * fetchers are done reading ours). The protocol is described at the kernel below. */
template <typename T>
IRIS_DEVICE_INLINE void iris_ag_gemm_fetch_role(const iris_ag_gemm_dev_t &d, int slot, unsigned epoch) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
#if defined(IRIS_GEMM_FETCHER_DELAY_NS)
  /* test hook (gemm_test_t2): every fetcher CTA starts this late, as if the GPU ran it late */
  if (threadIdx.x == 0)
    for (const unsigned long long t0 = iris_detail_time_ns(); iris_detail_time_ns() - t0 < (unsigned long long)(IRIS_GEMM_FETCHER_DELAY_NS);) iris_ag_gemm_pause();
  __syncthreads();
#endif
  if (slot == 0 && threadIdx.x < (unsigned)W && (int)threadIdx.x != me) iris_signal(d.ctx, d.arrive + me, epoch, (int)threadIdx.x);
  unsigned seen = 0;
  const int items = d.tiles_m * d.groups_k;
  for (int it = slot; it < items; it += d.fetchers) {
    IRIS_GEMM_T0();
    const int mt = (it / d.groups_k + d.rot) % d.tiles_m, kg = it % d.groups_k;
    if (d.help) { /* a GEMM CTA's helper may have taken the block (this CTA came late) */
      int won = 0;
      if (threadIdx.x == 0) won = atomicExch(d.claim + mt * d.groups_k + kg, epoch) != epoch;
      if (!__syncthreads_or(won)) continue;
    }
    iris_ag_gemm_fetch<T>(d, mt, kg, epoch, seen);
    IRIS_GEMM_TRACE_EV(slot, IRIS_GEMM_EV_FETCH, mt * d.groups_k + kg);
  }
  __syncthreads(); /* every read of peers' A has returned */
  if (threadIdx.x < (unsigned)W && (int)threadIdx.x != me) iris_signal_add(d.ctx, d.done + me, 1u, (int)threadIdx.x);
  if (slot == 0) iris_ag_gemm_wait_done(d, epoch, (unsigned)(d.fetchers + (d.help ? d.gemm_ctas : 0)));
}

#if defined(IRIS_GEMM_HAVE_CORE)
/* One launch covers the CTA slots [slot0, slot0 + gridDim.x). Slots below d.fetchers
 * fetch, the others compute. Fused: one launch of every slot, no more CTAs than SMs at
 * one CTA per SM, fetchers first (the block scheduler hands out low indices first, so
 * on a GPU this launch has to itself they are resident before any GEMM CTA waits on
 * them; where other work holds SMs nothing guarantees it: the TMA kernel's GEMM CTAs
 * then fetch for them (d.help), this one's bounded waits end the call with an error;
 * docs/gemm_waits.md). Kernel-unfused: a launch of the fetcher slots, then one of the
 * GEMM slots.
 * Every wait is bounded and the first expiry aborts the whole call (iris_ag_gemm_wait_flag);
 * every signal below is sent whatever happened, so the peers stay in step.
 * Cross-rank protocol, per call (epoch = the slot's counter + 1, the same number on every
 * rank and slot because every call runs every slot once; the TMA kernel's variants, side
 * fetch and help, at iris_ag_gemm_side_fetch):
 *   start:  fetcher slot 0 release-stores epoch into arrive[me] of every peer: this
 *           rank's A (written by earlier work on its stream) is ready;
 *   fetch:  before reading peer q, wait arrive[q] >= epoch (acquire, system);
 *   end:    each fetcher CTA adds 1 to done[me] on every peer (release) after its
 *           reads; fetcher slot 0 then waits until done[q] = epoch * fetchers for every
 *           peer q, so the kernel ends only when nobody reads this rank's A. */
template <class Cfg, typename T, bool B_KN, typename OutT>
__global__ void __launch_bounds__(Cfg::threads) iris_ag_gemm_kernel(iris_ag_gemm_dev_t d, const T *B, const OutT *bias, OutT *C, int slot0) {
  extern __shared__ __align__(128) char iris_gemm_smem[];
  const int slot = slot0 + (int)blockIdx.x;
  const unsigned epoch = d.counters[slot] + 1;
  if (slot < d.fetchers) {
    iris_ag_gemm_fetch_role<T>(d, slot, epoch);
  } else {
    const int g = slot - d.fetchers, tiles = d.tiles_m * d.tiles_n;
    const int ldb = B_KN ? d.N : d.K;
    for (int t = g; t < tiles; t += d.gemm_ctas) {
      IRIS_GEMM_T0();
      const int mt = (t / d.tiles_n + d.rot) % d.tiles_m, nt = t % d.tiles_n;
      iris_ag_gemm_waiter<Cfg::BK> w;
      w.err = d.err;
      w.flags = d.ready.flags;
      w.row = mt * d.groups_k;
      w.kg = d.kg;
      w.K = d.K;
      w.epoch = epoch;
#if defined(IRIS_GEMM_TRACE)
      w.d = &d;
      w.mt = mt;
      w.slot = slot;
#endif
      iris_gemm_tile<Cfg, T, B_KN, OutT>((const T *)d.staged, d.K, B, ldb, C, d.N, bias, d.M, d.N, d.K, mt * Cfg::BM, nt * Cfg::BN, iris_gemm_smem, w);
      IRIS_GEMM_TRACE_EV(slot, IRIS_GEMM_EV_TILE, t);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    iris_ag_gemm_tell_peers(d, epoch);
    d.counters[slot] = epoch;
  }
}
#if !defined(IRIS_USE_HIP)
/* The TMA core's tile sequence for GEMM slot `first`: tiles first, first + stride, ... of
 * a grouped raster over m-tiles rotated so each rank starts with its own shard's rows
 * (the order the fetchers fill them in). With IRIS_GEMM_TRACE, the first consumer thread records each tile as the
 * span between its two calls (from the tile's first wait on a stage to its stores). */
struct iris_ag_gemm_sched {
  int first, stride, tiles, tiles_m, tiles_n, rot, bm, bn, raster;
#if defined(IRIS_GEMM_TRACE)
  const iris_ag_gemm_dev_t *d;
  int slot;
  unsigned long long t0;
#endif
  __device__ bool operator()(int i, int &m0, int &n0) {
    const int t = first + i * stride;
#if defined(IRIS_GEMM_TRACE)
    if (threadIdx.x == 128 && d && d->trace) {
      const unsigned long long now = iris_detail_time_ns();
      if (i > 0) iris_gemm_trace_at(*d, slot, t0, now, IRIS_GEMM_EV_TILE, t - stride);
      t0 = now;
    }
#endif
    if (t >= tiles) return false;
    /* grouped raster: `raster` m-tiles (in the rotated order) sweep the n-tiles together,
     * m fastest, so the CTAs running at once share B tiles in L2 */
    const int per = raster * tiles_n, g0 = t / per * raster, gsize = min(tiles_m - g0, raster), l = t - t / per * per;
    m0 = (g0 + l % gsize + rot) % tiles_m * bm;
    n0 = l / gsize * bn;
    return true;
  }
};
/* The sequence of GEMM slot `first` of `stride` over tiles_m x tiles_n tiles of Cfg (no
 * trace plan: the caller sets d and slot to trace it). */
template <class Cfg>
IRIS_DEVICE_INLINE iris_ag_gemm_sched iris_ag_gemm_make_sched(int first, int stride, int tiles_m, int tiles_n, int rot, int raster) {
  iris_ag_gemm_sched sc;
  sc.first = first;
  sc.stride = stride;
  sc.tiles = tiles_m * tiles_n;
  sc.tiles_m = tiles_m;
  sc.tiles_n = tiles_n;
  sc.rot = rot;
  sc.bm = Cfg::BM;
  sc.bn = Cfg::BN;
  sc.raster = raster;
#if defined(IRIS_GEMM_TRACE)
  sc.d = nullptr;
  sc.slot = 0;
  sc.t0 = 0;
#endif
  return sc;
}
/* The TMA core's wait_a (the producer thread): before A[m0:m0+BM, k0:k0+64) is loaded,
 * wait for every k-group of that m-tile that starts in the slab (acquire, device scope:
 * the fetchers are on this GPU; the core adds the proxy fence before its TMA). */
struct iris_ag_gemm_tma_waiter {
  unsigned *err;
  const unsigned *flags;
  int groups_k, kg, K, bm;
  unsigned epoch;
#if defined(IRIS_GEMM_TRACE)
  const iris_ag_gemm_dev_t *d;
  int slot;
#endif
  __device__ void operator()(int m0, int k0) const {
    const int row = m0 / bm * groups_k;
    const int end = min(K, k0 + 64);
#if defined(IRIS_GEMM_TRACE)
    const unsigned long long t0 = d->trace ? iris_detail_time_ns() : 0;
#endif
    for (int g = k0 == 0 ? 0 : (k0 + kg - 1) / kg; g * kg < end; ++g) iris_ag_gemm_wait_ready(err, flags, row + g, epoch);
#if defined(IRIS_GEMM_TRACE)
    if (d->trace) {
      const unsigned long long t1 = iris_detail_time_ns();
      if (t1 - t0 > 1000) iris_gemm_trace_at(*d, d->fetchers + d->gemm_ctas + slot, t0, t1, IRIS_GEMM_EV_WAIT, m0 / bm);
    }
#endif
  }
  /* the core's pipeline (mbarrier) wait ran past its bound: a bug, not a peer (the
   * producer's waits above are bounded), recorded so the host hears of it */
  __device__ void stalled() const { iris_ag_gemm_fail(err, epoch, IRIS_GEMM_WAIT_PIPELINE, -1, 0, 0, -1); }
};
/* How long a helper (d.help) leaves a block to the fetcher CTAs before it claims it: far
 * longer than any fetch takes while the fetchers run (a few ms for the largest A), far
 * shorter than the wait bound. */
#ifndef IRIS_GEMM_HELP_AFTER_NS
#define IRIS_GEMM_HELP_AFTER_NS 20000000ULL
#endif
/* Thread 0 of a helper: whether it has claimed block `item` for call epoch: the block is
 * not ready `patience` ns after this helper began to wait for it, and no fetcher claimed
 * it first. Sparse polls (the producer polls the same flag closely); patience drops to 0
 * once a block came late (the fetchers are missing or behind: unclaimed blocks are taken
 * at once). */
IRIS_DEVICE_INLINE bool iris_ag_gemm_help_claim(const iris_ag_gemm_dev_t &d, int item, unsigned epoch, unsigned long long &patience) {
  const unsigned long long t0 = iris_detail_time_ns();
  while (!iris_epoch_reached(iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(d.ready.flags + item), epoch) && !iris_ag_gemm_aborted(d.err, epoch)) {
    if (iris_detail_time_ns() - t0 >= patience) {
      patience = 0;
      return atomicExch(d.claim + item, epoch) != epoch;
    }
    iris_ag_gemm_pause();
  }
  return false;
}
/* The side work of a fused TMA-kernel CTA, on its 96 idle producer threads: A blocks
 * it = unit, unit + units, ... (unit = the GEMM slot, units = the GEMM CTAs) in the fetcher
 * order (rotated m-tiles, k-groups).
 *   d.side_fetch: they are this CTA's to fetch (no fetcher CTAs), so every SM moves A while
 *   it multiplies and no SM is set aside for fetching.
 *   d.help (fetcher CTAs exist): they stand by; a block still not ready after
 *   IRIS_GEMM_HELP_AFTER_NS and not yet claimed by its fetcher is claimed and fetched
 *   here, so the GEMM CTAs finish even when a fetcher CTA is not on the GPU (other work
 *   holding SMs). A block is fetched once: by whoever claims it first (d.claim).
 * Unit 0 announces this rank's A (with d.help every unit does: fetcher slot 0 may be the
 * missing CTA); each unit tells every peer when it is done reading (with d.help fetcher
 * slot 0 counts fetchers + GEMM CTAs; else GEMM slot 0 counts GEMM CTAs). */
template <typename T>
struct iris_ag_gemm_side_fetch {
  const iris_ag_gemm_dev_t *d;
  int unit, units, row;
  unsigned epoch;
  __device__ void operator()(int t) const {
    const iris_ag_gemm_side_group grp = {t};
    const int W = d->ctx.world_size, me = d->ctx.rank;
    if ((unit == 0 || d->help) && t < W && t != me) iris_signal(d->ctx, d->arrive + me, epoch, t);
    unsigned seen = 0;
    unsigned long long patience = IRIS_GEMM_HELP_AFTER_NS;
    const int items = d->tiles_m * d->groups_k;
    for (int it = unit; it < items; it += units) {
      const int mt = (it / d->groups_k + d->rot) % d->tiles_m, kg = it % d->groups_k;
      if (d->help && !grp.any(t == 0 && iris_ag_gemm_help_claim(*d, mt * d->groups_k + kg, epoch, patience))) continue;
#if defined(IRIS_GEMM_TRACE)
      const unsigned long long t0 = d->trace ? iris_detail_time_ns() : 0;
#endif
      iris_ag_gemm_fetch_by<T, 4>(grp, *d, mt, kg, epoch, seen);
#if defined(IRIS_GEMM_TRACE)
      if (t == 0) iris_gemm_trace_at(*d, row, t0, iris_detail_time_ns(), IRIS_GEMM_EV_FETCH, mt * d->groups_k + kg);
#endif
    }
    grp.sync(); /* every read of peers' A has returned */
    if (t < W && t != me) iris_signal_add(d->ctx, d->done + me, 1u, t);
  }
};
/* The fused kernel with the TMA core (sm_90a; iris_gemm_tma_compiled() says whether this
 * device pass has it: the host checks at create and otherwise launches
 * iris_ag_gemm_kernel). The same slots, fetcher role and protocol as iris_ag_gemm_kernel;
 * a GEMM slot runs every tile of its sequence in one call of the persistent core:
 * ta maps the staging buffer (M x K), tb maps B. */
template <class Cfg, typename T, bool B_KN, typename OutT>
__global__ void __launch_bounds__(Cfg::threads, 1) iris_ag_gemm_tma_kernel(iris_ag_gemm_dev_t d, const __grid_constant__ CUtensorMap ta,
                                                                          const __grid_constant__ CUtensorMap tb, const OutT *bias, OutT *C, int slot0) {
  extern __shared__ __align__(128) char iris_gemm_smem[];
  const int slot = slot0 + (int)blockIdx.x;
  const unsigned epoch = d.counters[slot] + 1;
  if (slot < d.fetchers) {
    iris_ag_gemm_fetch_role<T>(d, slot, epoch);
  } else {
    iris_ag_gemm_sched sc = iris_ag_gemm_make_sched<Cfg>(slot - d.fetchers, d.gemm_ctas, d.tiles_m, d.tiles_n, d.rot, d.raster);
    iris_ag_gemm_tma_waiter w;
    w.err = d.err;
    w.flags = d.ready.flags;
    w.groups_k = d.groups_k;
    w.kg = d.kg;
    w.K = d.K;
    w.bm = Cfg::BM;
    w.epoch = epoch;
#if defined(IRIS_GEMM_TRACE)
    sc.d = &d;
    sc.slot = slot;
    w.d = &d;
    w.slot = slot;
#endif
    if (d.side_fetch || d.help) {
      iris_ag_gemm_side_fetch<T> side;
      side.d = &d;
      side.unit = slot - d.fetchers;
      side.units = d.gemm_ctas;
      side.row = 2 * (d.fetchers + d.gemm_ctas) + slot;
      side.epoch = epoch;
      iris_gemm_tma_tiles<Cfg, T, B_KN, OutT>(&ta, &tb, C, d.N, bias, d.M, d.N, d.K, sc, w, iris_gemm_smem, side);
    } else {
      iris_gemm_tma_tiles<Cfg, T, B_KN, OutT>(&ta, &tb, C, d.N, bias, d.M, d.N, d.K, sc, w, iris_gemm_smem);
    }
  }
  __syncthreads();
  /* side fetch: the kernel ends only when no peer reads this rank's A any more */
  if (d.side_fetch && slot == d.fetchers) iris_ag_gemm_wait_done(d, epoch, (unsigned)d.gemm_ctas);
  if (threadIdx.x == 0) {
    iris_ag_gemm_tell_peers(d, epoch);
    d.counters[slot] = epoch;
  }
}
#endif /* !IRIS_USE_HIP */
#endif /* IRIS_GEMM_HAVE_CORE */

/* ========================================================================= */
/*                               host side                                   */
/* ========================================================================= */
#if defined(IRIS_IMPLEMENTATION)
#if !defined(IRIS_USE_HIP) && !defined(IRIS_GEMM_NO_BLAS) && defined(__has_include)
#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
#define IRIS_GEMM_HAVE_BLAS 1
#endif
#endif

#if defined(IRIS_USE_HIP)
typedef hipEvent_t iris_gemm_event_t;
#else
typedef cudaEvent_t iris_gemm_event_t;
#endif

#define IRIS_GEMM_MAX_CHUNKS 16
#define IRIS_GEMM_MAX_SLOTS 1024
#define IRIS_GEMM_BLAS_SHAPES 6

#if defined(IRIS_GEMM_HAVE_BLAS)
/* One prepared cuBLASLt GEMM for a given number of rows of A and C. */
typedef struct iris_gemm_blas_shape {
  long long rows;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
} iris_gemm_blas_shape_t;
#endif

struct iris_ag_gemm {
  iris_t *ctx;
  iris_ag_gemm_desc_t d;
  iris_gemm_path_t path;
  int W, me, sms;
  size_t es, cs;                  /* element sizes of A/B and of C */
  char *staged;                   /* local M x K */
  char *a_heap;                   /* stage_a: the plan's heap copy of the shard */
  unsigned *flag_block;           /* heap: ready | claim | arrive | done | error record | counters */
  iris_stream_t copy[IRIS_MAX_RANKS];
  iris_gemm_event_t fork, join, tail[IRIS_MAX_RANKS], ev[IRIS_MAX_RANKS][IRIS_GEMM_MAX_CHUNKS];
  iris_stream_t aux;              /* pipelined: the second GEMM stream */
  iris_gemm_event_t aux_join;
  int gemm_streams;
  int nchunks;
  long long chunk_row[IRIS_GEMM_MAX_CHUNKS + 1];
#if defined(IRIS_GEMM_HAVE_CORE)
  iris_ag_gemm_dev_t dev;
  int unfused_fetchers, unfused_gemm;
  int wgmma;                      /* the kernels' device pass has wgmma and TMA (sm_90a) */
  int tma;                        /* the fused kernel runs the TMA core (internal/gemm_core_tma.h) */
#endif
  unsigned long long *trace;
  size_t trace_words;
#if defined(IRIS_GEMM_HAVE_BLAS)
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  void *lt_ws[2];                 /* one workspace per GEMM stream */
  size_t lt_ws_bytes;
  float *lt_scales;               /* fp8: 16-byte aligned copies of scales that are not ([0]: A, [4]: B) */
  int nshapes;
  iris_gemm_blas_shape_t shapes[IRIS_GEMM_BLAS_SHAPES];
#endif
};

#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
/* The fused kernel's tile configuration (see internal/gemm_core.h): the wgmma core where the
 * unit is compiled for sm_90a, else the mma.sync core of the same tile. */
typedef iris_gemm_cfg_wgmma_large iris_ag_gemm_cfg;
/* ... and where the device pass has sm_90a, the persistent TMA core of the same tile */
typedef iris_gemm_cfg_tma_large iris_ag_gemm_tma_cfg;
static_assert(iris_ag_gemm_tma_cfg::BM == iris_ag_gemm_cfg::BM && iris_ag_gemm_tma_cfg::BN == iris_ag_gemm_cfg::BN, "iris_gemm: one tile plan for both cores");
/* the element types the kernels are instantiated with */
typedef __nv_bfloat16 iris_gemm_elem_bf16_t;
typedef __half iris_gemm_elem_f16_t;
#elif defined(IRIS_GEMM_HAVE_CORE)
/* AMD: the MFMA core (internal/gemm_core_mfma.h; UNVERIFIED, never run on hardware), 128 x 128
 * tiles, 256 threads, 32 KB of LDS. */
typedef iris_gemm_cfg_mfma_large iris_ag_gemm_cfg;
typedef hip_bfloat16 iris_gemm_elem_bf16_t;
typedef __half iris_gemm_elem_f16_t;
#endif

static const char *const iris_gemm_path_names[IRIS_GEMM_PATH_COUNT] = {"auto", "pipelined", "fused", "unfused", "kernel-unfused"};
IRIS_DEF const char *iris_gemm_path_name(iris_gemm_path_t p) { return (unsigned)p < IRIS_GEMM_PATH_COUNT ? iris_gemm_path_names[p] : "invalid"; }
IRIS_DEF iris_gemm_path_t iris_ag_gemm_path(const iris_ag_gemm_t *g) { return g ? g->path : IRIS_GEMM_PATH_AUTO; }
IRIS_DEF const char *iris_ag_gemm_engine(const iris_ag_gemm_t *g) {
  if (!g) return "none";
  if (g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED) return "cublaslt";
#if defined(IRIS_USE_HIP) && defined(IRIS_GEMM_HAVE_CORE)
  return "mfma";
#elif defined(IRIS_GEMM_HAVE_CORE)
  return g->tma ? "tma-wgmma" : g->wgmma ? "cp.async-wgmma" : "mma.sync";
#else
  return "none";
#endif
}

/* AUTO (measured on 4xH200 and 2xH200, BENCHMARKS.md): with cuBLASLt, the pipelined
 * path; it beat the unfused one (gather, then one GEMM) at every benchmarked shape, from
 * M = 1024 (0.124 against 0.172 ms at N = 3584, K = 8192) up, and the fused kernel too.
 * Without cuBLASLt (AMD included: no hipBLASLt path), the fused kernel. */
IRIS_DEF iris_gemm_path_t iris_ag_gemm_choose_path(const iris_ag_gemm_desc_t *d, int W) {
  (void)W;
  if (d->path != IRIS_GEMM_PATH_AUTO) return d->path;
#if defined(IRIS_GEMM_HAVE_BLAS)
  return IRIS_GEMM_PATH_PIPELINED;
#else
  return IRIS_GEMM_PATH_FUSED;
#endif
}

static iris_status_t iris_gemm_gpu_fail(iris_t *ctx, const char *what, int e) {
#if defined(IRIS_USE_HIP)
  return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: iris_ag_gemm: %s failed: %s", iris_rank(ctx), what, hipGetErrorString((hipError_t)e));
#else
  return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: iris_ag_gemm: %s failed: %s", iris_rank(ctx), what, cudaGetErrorString((cudaError_t)e));
#endif
}
#if defined(IRIS_USE_HIP)
#define IRIS_GEMM_OK hipSuccess
#else
#define IRIS_GEMM_OK cudaSuccess
#endif
#define IRIS_GEMM_TRY(call, what)                                    \
  do {                                                               \
    int e_ = (int)(call);                                            \
    if (e_ != (int)IRIS_GEMM_OK) return iris_gemm_gpu_fail(g->ctx, what, e_); \
  } while (0)

/* The rules of the header comment, checked on one rank's description. */
static iris_status_t iris_gemm_check_desc(const iris_ag_gemm_desc_t *d, int W, int me) {
  const char *bad = NULL;
  if (d->struct_size != sizeof(iris_ag_gemm_desc_t)) bad = "struct_size is wrong: start from IRIS_AG_GEMM_DESC_INIT";
  else if (d->layout != IRIS_GEMM_A_ROWS && d->layout != IRIS_GEMM_A_COLS) bad = "layout must be IRIS_GEMM_A_ROWS or IRIS_GEMM_A_COLS";
  else if (d->M < 1 || d->N < 1 || d->K < 1) bad = "M, N and K must be positive";
  else if (d->M > 0x7fffffffLL || d->N > 0x7fffffffLL || d->K > 0x7fffffffLL) bad = "M, N and K must be below 2^31";
  else if (d->a_type == IRIS_FLOAT8_E5M2)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: fp8 e5m2 inputs are not supported (cuBLASLt has no e5m2 x e5m2 GEMM); use IRIS_FLOAT8_E4M3", me);
  else if (d->a_type != IRIS_BFLOAT16 && d->a_type != IRIS_FLOAT16 && d->a_type != IRIS_FLOAT8_E4M3) bad = "a_type must be IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT8_E4M3";
  else if (d->c_type != IRIS_BFLOAT16 && d->c_type != IRIS_FLOAT16 && d->c_type != IRIS_FLOAT32) bad = "c_type must be IRIS_BFLOAT16, IRIS_FLOAT16 or IRIS_FLOAT32";
  else if (d->a_type == IRIS_FLOAT8_E4M3 && iris_ag_gemm_choose_path(d, W) != IRIS_GEMM_PATH_PIPELINED && iris_ag_gemm_choose_path(d, W) != IRIS_GEMM_PATH_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: fp8 inputs run on the cuBLASLt paths only (pipelined, unfused), not on path '%s'", me,
                            iris_gemm_path_name(iris_ag_gemm_choose_path(d, W)));
  else if (d->a_type == IRIS_FLOAT8_E4M3 && !d->b_transposed)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_ag_gemm_create: fp8 inputs need b_transposed = 1 (B stored N x K: cuBLASLt's fp8 GEMM on Hopper takes only the \"TN\" layout)", me);
  else if (d->a_type == IRIS_FLOAT8_E4M3 && (d->K % 16 || (d->layout == IRIS_GEMM_A_COLS && (d->K % W || (d->K / W) % 16))))
    bad = "fp8 inputs need K a multiple of 16 (layout COLS: K/world_size), 16-byte rows of A and B (cuBLASLt's fp8 rule)";
  else if (d->a_type == IRIS_FLOAT8_E4M3 && d->has_bias && d->c_type == IRIS_FLOAT32)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: fp8 inputs with a bias need c_type bf16 or fp16 (cuBLASLt takes no fp32 bias with fp8)", me);
  else if (d->K % 8 || d->N % 8) bad = "K and N must be multiples of 8 (16-byte rows)";
  else if (d->layout == IRIS_GEMM_A_ROWS && d->M % W) bad = "layout IRIS_GEMM_A_ROWS needs M divisible by the world size";
  else if (d->layout == IRIS_GEMM_A_COLS && (d->K % W || (d->K / W) % 8)) bad = "layout IRIS_GEMM_A_COLS needs K/world_size to be a whole multiple of 8";
  else if ((unsigned)d->path >= IRIS_GEMM_PATH_COUNT) bad = "unknown path";
  else if (d->chunks < 0 || d->chunks > IRIS_GEMM_MAX_CHUNKS) bad = "chunks must be in [0, 16]";
  else if (d->fetch_ctas < -1 || d->k_group < 0 || d->k_group % 64) bad = "fetch_ctas must be >= -1 and k_group a multiple of 64";
  else if (d->gemm_streams < 0 || d->gemm_streams > 2) bad = "gemm_streams must be 0 (auto), 1 or 2";
  if (bad) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_create: %s", me, bad);
  return IRIS_SUCCESS;
}

/* The scale rules of run_scaled (both ops): an fp8 plan takes both scales, 4-byte aligned;
 * any other plan takes none. */
static iris_status_t iris_gemm_check_scales(iris_dtype_t a_type, const float *a_scale, const float *b_scale, const char *fn, int me) {
  const int fp8 = a_type == IRIS_FLOAT8_E4M3;
  if (fp8 && (!a_scale || !b_scale))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: fp8 inputs need both per-tensor scales (a_scale %p, b_scale %p)", me, fn, (const void *)a_scale,
                            (const void *)b_scale);
  if (!fp8 && (a_scale || b_scale))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: scales apply to fp8 inputs only (this plan's a_type is %d, not IRIS_FLOAT8_E4M3): pass NULL", me, fn,
                            (int)a_type);
  if (((uintptr_t)a_scale | (uintptr_t)b_scale) % 4)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: the scales must be 4-byte aligned floats: a_scale %p, b_scale %p", me, fn, (const void *)a_scale,
                            (const void *)b_scale);
  return IRIS_SUCCESS;
}

/* ---- cuBLASLt: C rows = A rows * B (+ bias), row-major, as the column-major
 * C^T = B^T A^T. Lt's "A" is our B, Lt's "B" is our A, bias runs along Lt's rows = N. */
#if defined(IRIS_GEMM_HAVE_BLAS)
static cudaDataType_t iris_gemm_cuda_type(iris_dtype_t t) {
  return t == IRIS_BFLOAT16 ? CUDA_R_16BF : t == IRIS_FLOAT16 ? CUDA_R_16F : t == IRIS_FLOAT8_E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_32F;
}

/* fp8: point the GEMM at per-tensor scales (device pointers to one float; A's and B's in
 * our terms: Lt's "A" is our B). cuBLASLt refuses, at matmul time with
 * CUBLAS_STATUS_NOT_SUPPORTED, a scale pointer that is not 16-byte aligned (measured on an
 * H100 with cuBLASLt 13.1: a 4-byte offset fails), so such a scale is first copied on
 * `stream` into the plan's aligned lt_scales (a graph replay still reads the current value). */
static iris_status_t iris_gemm_blas_set_scales(iris_ag_gemm_t *g, const float *a_scale, const float *b_scale, iris_stream_t stream) {
  const float *src[2] = {a_scale, b_scale};
  const void *use[2];
  int i;
  for (i = 0; i < 2; ++i) {
    use[i] = src[i];
    if ((uintptr_t)src[i] % 16 == 0) continue;
    IRIS_GEMM_TRY(cudaMemcpyAsync(g->lt_scales + 4 * i, src[i], sizeof(float), cudaMemcpyDeviceToDevice, stream), "copying an fp8 scale to 16-byte alignment");
    use[i] = g->lt_scales + 4 * i;
  }
  if (cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &use[1], sizeof use[1]) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &use[0], sizeof use[0]) != CUBLAS_STATUS_SUCCESS)
    return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: cuBLASLt refused the fp8 scale pointers", g->me);
  return IRIS_SUCCESS;
}

static iris_status_t iris_gemm_blas_init(iris_ag_gemm_t *g) {
  const cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  const cudaDataType_t st = CUDA_R_32F;
  const cublasOperation_t ta = g->d.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: cublasLtCreate failed", g->me);
  if (cublasLtMatmulDescCreate(&g->op, ct, st) != CUBLAS_STATUS_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: cublasLtMatmulDescCreate failed", g->me);
  cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (g->d.has_bias) {
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
  }
  g->lt_ws_bytes = (size_t)32 << 20;
  IRIS_GEMM_TRY(cudaMalloc(&g->lt_ws[0], g->lt_ws_bytes), "cudaMalloc of the cuBLASLt workspace");
  if (g->gemm_streams > 1) IRIS_GEMM_TRY(cudaMalloc(&g->lt_ws[1], g->lt_ws_bytes), "cudaMalloc of the second cuBLASLt workspace");
  if (g->d.a_type == IRIS_FLOAT8_E4M3) { /* the heuristic must see a scaled GEMM: point at the plan's copies until run */
    IRIS_GEMM_TRY(cudaMalloc((void **)&g->lt_scales, 8 * sizeof(float)), "cudaMalloc of the fp8 scale copies");
    return iris_gemm_blas_set_scales(g, g->lt_scales, g->lt_scales + 4, NULL);
  }
  return IRIS_SUCCESS;
}

/* Prepare (once) the GEMM of `rows` rows of A with leading dimension lda. */
static iris_status_t iris_gemm_blas_shape(iris_ag_gemm_t *g, long long rows, long long lda, iris_gemm_blas_shape_t **out) {
  const iris_ag_gemm_desc_t *d = &g->d;
  const cudaDataType_t ab = iris_gemm_cuda_type(d->a_type), ct = iris_gemm_cuda_type(d->c_type);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0, i;
  uint32_t align = 256;
  iris_gemm_blas_shape_t *s;
  for (i = 0; i < g->nshapes; ++i)
    if (g->shapes[i].rows == rows) { *out = &g->shapes[i]; return IRIS_SUCCESS; }
  if (g->nshapes == IRIS_GEMM_BLAS_SHAPES) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm: too many chunk shapes", g->me);
  s = &g->shapes[g->nshapes];
  s->rows = rows;
  if (d->b_transposed) cublasLtMatrixLayoutCreate(&s->a, ab, (uint64_t)d->K, (uint64_t)d->N, d->K);
  else cublasLtMatrixLayoutCreate(&s->a, ab, (uint64_t)d->N, (uint64_t)d->K, d->N);
  cublasLtMatrixLayoutCreate(&s->b, ab, (uint64_t)d->K, (uint64_t)rows, lda);
  cublasLtMatrixLayoutCreate(&s->c, ct, (uint64_t)d->N, (uint64_t)rows, d->N);
  /* chunk starts are row offsets: the alignment the algorithm may assume is what
   * every chunk start keeps (bases are 256-byte aligned, run checks it) */
  while (align > 16 && ((g->d.N * (long long)g->cs) % align || (lda * (long long)g->es) % align)) align >>= 1;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->lt_ws_bytes, sizeof g->lt_ws_bytes);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align);
  if (cublasLtMatmulAlgoGetHeuristic(g->lt, g->op, s->a, s->b, s->c, s->c, pref, 1, &res, &found) != CUBLAS_STATUS_SUCCESS || found < 1) {
    cublasLtMatmulPreferenceDestroy(pref);
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm: cuBLASLt has no algorithm for %lld x %lld x %lld", g->me, rows, d->N, d->K);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  s->algo = res.algo;
  g->nshapes++;
  *out = s;
  return IRIS_SUCCESS;
}

/* Enqueue C[row0 : row0 + rows] = A(rows, lda) * B (+ bias) on GEMM stream `which`
 * (0: the caller's stream, 1: the plan's second one; each has its own workspace). */
static iris_status_t iris_gemm_blas_run(iris_ag_gemm_t *g, const char *a, long long lda, long long rows, long long row0, const void *b, const void *bias, void *c,
                                        iris_stream_t main_stream, int which) {
  iris_stream_t stream = which ? g->aux : main_stream;
  iris_gemm_blas_shape_t *s;
  iris_status_t st;
  const float one = 1.0f, zero = 0.0f;
  char *cr = (char *)c + (size_t)row0 * g->d.N * g->cs;
  if ((st = iris_gemm_blas_shape(g, rows, lda, &s)) != IRIS_SUCCESS) return st;
  if (g->d.has_bias) cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  const cublasStatus_t bs = cublasLtMatmul(g->lt, g->op, &one, b, s->a, a, s->b, &zero, cr, s->c, cr, s->c, &s->algo, g->lt_ws[which], g->lt_ws_bytes, stream);
  if (bs != CUBLAS_STATUS_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: iris_ag_gemm: cublasLtMatmul failed (%lld rows; cuBLAS status %d)", g->me, rows, (int)bs);
  return IRIS_SUCCESS;
}
#endif /* IRIS_GEMM_HAVE_BLAS */

/* ---- copies of peers' A pieces into the staging buffer (copy engines; the runtime
 * wrappers are iris_collectives.h's) */
static int iris_gemm_record(iris_gemm_event_t e, iris_stream_t s) {
#if defined(IRIS_USE_HIP)
  return (int)hipEventRecord(e, s);
#else
  return (int)cudaEventRecord(e, s);
#endif
}
static int iris_gemm_wait_event(iris_stream_t s, iris_gemm_event_t e) {
#if defined(IRIS_USE_HIP)
  return (int)hipStreamWaitEvent(s, e, 0);
#else
  return (int)cudaStreamWaitEvent(s, e, 0);
#endif
}

/* Rows [r0, r1) of the gathered A from its owner(s) into the staging buffer, on copy
 * stream(s); `local` says whether this rank's own piece is copied too. ROWS: one
 * contiguous piece per owner; COLS: a 2D piece (the rows' slice of K/W columns) from
 * every rank, each on the owner's stream so they run side by side. */
static iris_status_t iris_gemm_copy_rows(iris_ag_gemm_t *g, const char *a, long long r0, long long r1, int local) {
  const iris_ag_gemm_desc_t *d = &g->d;
  const size_t row_bytes = (size_t)d->K * g->es;
  int q;
  void *src;
  if (d->layout == IRIS_GEMM_A_ROWS) {
    const long long ml = d->M / g->W;
    while (r0 < r1) {
      const long long q_ = r0 / ml, end = (q_ + 1) * ml < r1 ? (q_ + 1) * ml : r1;
      q = (int)q_;
      if (q != g->me || local) {
        iris_translate_host(g->ctx, a, q, &src);
        IRIS_GEMM_TRY(iris_coll_memcpy_async(g->staged + (size_t)r0 * row_bytes, (const char *)src + (size_t)(r0 - q_ * ml) * row_bytes, (size_t)(end - r0) * row_bytes,
                                       g->copy[0]),
                      "copying a peer's rows of A");
      }
      r0 = end;
    }
    return IRIS_SUCCESS;
  }
  {
    const size_t kl_bytes = (size_t)(d->K / g->W) * g->es;
    for (q = 0; q < g->W; ++q) {
      if (q == g->me && !local) continue;
      iris_translate_host(g->ctx, a, q, &src);
      IRIS_GEMM_TRY(iris_coll_memcpy2d_async(g->staged + (size_t)r0 * row_bytes + q * kl_bytes, row_bytes, (const char *)src + (size_t)r0 * kl_bytes, kl_bytes, kl_bytes,
                                       (size_t)(r1 - r0), g->copy[q]),
                    "copying a peer's columns of A");
    }
    return IRIS_SUCCESS;
  }
}

/* Every copy stream waits for the main stream (fork); the main stream waits for every
 * copy stream (join). */
static iris_status_t iris_gemm_fork(iris_ag_gemm_t *g, iris_stream_t s) {
  int q;
  IRIS_GEMM_TRY(iris_gemm_record(g->fork, s), "recording the fork event");
  for (q = 0; q < g->W; ++q) IRIS_GEMM_TRY(iris_gemm_wait_event(g->copy[q], g->fork), "joining a copy stream");
  return IRIS_SUCCESS;
}
/* Copies done on every stream -> a device barrier on copy stream 0 (after it, no peer
 * reads our A) -> the main stream waits for it. */
static iris_status_t iris_gemm_close(iris_ag_gemm_t *g, iris_stream_t s) {
  int q;
  iris_status_t st;
  for (q = 1; q < g->W; ++q) {
    IRIS_GEMM_TRY(iris_gemm_record(g->tail[q], g->copy[q]), "recording a copy-stream end");
    IRIS_GEMM_TRY(iris_gemm_wait_event(g->copy[0], g->tail[q]), "joining the copy streams");
  }
  if ((st = iris_barrier_device(g->ctx, g->copy[0])) != IRIS_SUCCESS) return st;
  IRIS_GEMM_TRY(iris_gemm_record(g->join, g->copy[0]), "recording the join event");
  IRIS_GEMM_TRY(iris_gemm_wait_event(s, g->join), "waiting for the copies");
  return IRIS_SUCCESS;
}

/* A GEMM of `rows` rows that fills the GPU for a long time on its own (2^38 multiply-adds,
 * ~0.7 ms on an H200): no chunking, one GEMM stream. Measured on 4xH200: at M = 16384,
 * N = 6656, K = 16384 one stream and one chunk per shard took 5.38 and 5.44 ms against
 * 5.69 and 5.57 with two of each (two runs); at N = 3584, K = 8192 two of each won
 * (1.447 against 1.555 ms). */
static int iris_gemm_big_chunk(long long rows, const iris_ag_gemm_desc_t *d) { return (double)rows * (double)d->N * (double)d->K >= 274877906944.0; }

/* Chunk boundaries (rows). ROWS: the chunks of each peer's shard; COLS: chunks of all
 * M rows, the first one half as tall so the exposed first copy is short. */
static void iris_gemm_plan_chunks(iris_ag_gemm_t *g) {
  const iris_ag_gemm_desc_t *d = &g->d;
  int n = d->chunks, i;
  if (d->layout == IRIS_GEMM_A_ROWS) {
    const long long ml = d->M / g->W;
    /* automatic: two chunks per shard where they stay large (4096 rows) or where the
     * copies weigh most against the GEMMs (small N); measured on 4xH200 with two GEMM
     * streams (BENCHMARKS.md): 0.371 against 0.395 ms at M = 16384, N = 1792, K = 4096;
     * 5.57 against 5.86 ms at M = 16384, N = 6656, K = 16384; but 0.763 against 0.724
     * at M = 8192, N = 3584, K = 8192 */
    if (!n) n = !iris_gemm_big_chunk(ml, d) && (ml >= 4096 || (ml >= 2048 && d->N <= 2048)) ? 2 : 1;
    if (n > ml) n = (int)ml;
    for (i = 0; i <= n; ++i) g->chunk_row[i] = ml * i / n;
  } else {
    long long first, rest;
    if (!n) n = d->M >= 4096 ? 4 : d->M >= 1024 ? 2 : 1;
    if (n > d->M) n = (int)d->M;
    first = n > 1 ? (d->M / (2 * n - 1) + 127) / 128 * 128 : d->M;
    if (first >= d->M || first < 1) first = d->M / n;
    rest = d->M - first;
    g->chunk_row[0] = 0;
    g->chunk_row[1] = n > 1 ? first : d->M;
    for (i = 2; i <= n; ++i) g->chunk_row[i] = first + rest * (i - 1) / (n - 1);
  }
  g->nchunks = n;
}

#if defined(IRIS_GEMM_HAVE_BLAS)
/* PIPELINED. ROWS: copies of peers' shards in ring order (me+1, me+2, ...) on one copy
 * stream, one event per chunk; the local shard is multiplied straight from the heap,
 * then each chunk as its event fires. COLS: chunk c's pieces from every rank (local one
 * included) on the owners' streams; chunk c's GEMM waits for all of them.
 * The GEMMs alternate between the caller's stream and a second one (gemm_streams = 2),
 * so the last wave of one GEMM overlaps the first of the next: each GEMM covers only
 * M/W (or M/chunks) rows, and run one after another they lose their tails to wave
 * quantization (BENCHMARKS.md, "W chunks"). Their C rows are disjoint. */
static iris_status_t iris_gemm_run_pipelined(iris_ag_gemm_t *g, const char *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  const iris_ag_gemm_desc_t *d = &g->d;
  iris_status_t st;
  int i, j, q, k = 0;
  if ((st = iris_gemm_fork(g, s)) != IRIS_SUCCESS) return st;
  if (g->gemm_streams > 1) IRIS_GEMM_TRY(iris_gemm_wait_event(g->aux, g->fork), "forking the second GEMM stream");
#define IRIS_GEMM_NEXT_STREAM() (g->gemm_streams > 1 ? (k++ & 1) : 0)
  if (d->layout == IRIS_GEMM_A_ROWS) {
    const long long ml = d->M / g->W;
    for (i = 1; i < g->W; ++i) {
      q = (g->me + i) % g->W;
      for (j = 0; j < g->nchunks; ++j) {
        if ((st = iris_gemm_copy_rows(g, a, q * ml + g->chunk_row[j], q * ml + g->chunk_row[j + 1], 0)) != IRIS_SUCCESS) return st;
        IRIS_GEMM_TRY(iris_gemm_record(g->ev[q][j], g->copy[0]), "recording a chunk event");
      }
    }
    if ((st = iris_gemm_blas_run(g, a, d->K, ml, g->me * ml, b, bias, c, s, IRIS_GEMM_NEXT_STREAM())) != IRIS_SUCCESS) return st;
    for (i = 1; i < g->W; ++i) {
      q = (g->me + i) % g->W;
      for (j = 0; j < g->nchunks; ++j) {
        const long long r0 = q * ml + g->chunk_row[j];
        const int w = IRIS_GEMM_NEXT_STREAM();
        IRIS_GEMM_TRY(iris_gemm_wait_event(w ? g->aux : s, g->ev[q][j]), "waiting for a chunk");
        if ((st = iris_gemm_blas_run(g, g->staged + (size_t)r0 * d->K * g->es, d->K, g->chunk_row[j + 1] - g->chunk_row[j], r0, b, bias, c, s, w)) != IRIS_SUCCESS)
          return st;
      }
    }
  } else {
    for (j = 0; j < g->nchunks; ++j) {
      if ((st = iris_gemm_copy_rows(g, a, g->chunk_row[j], g->chunk_row[j + 1], 1)) != IRIS_SUCCESS) return st;
      for (q = 0; q < g->W; ++q) IRIS_GEMM_TRY(iris_gemm_record(g->ev[q][j], g->copy[q]), "recording a chunk event");
    }
    for (j = 0; j < g->nchunks; ++j) {
      const long long r0 = g->chunk_row[j];
      const int w = IRIS_GEMM_NEXT_STREAM();
      for (q = 0; q < g->W; ++q) IRIS_GEMM_TRY(iris_gemm_wait_event(w ? g->aux : s, g->ev[q][j]), "waiting for a chunk");
      if ((st = iris_gemm_blas_run(g, g->staged + (size_t)r0 * d->K * g->es, d->K, g->chunk_row[j + 1] - r0, r0, b, bias, c, s, w)) != IRIS_SUCCESS) return st;
    }
  }
#undef IRIS_GEMM_NEXT_STREAM
  if (g->gemm_streams > 1) {
    IRIS_GEMM_TRY(iris_gemm_record(g->aux_join, g->aux), "recording the second GEMM stream's end");
    IRIS_GEMM_TRY(iris_gemm_wait_event(s, g->aux_join), "joining the second GEMM stream");
  }
  return iris_gemm_close(g, s);
}

/* UNFUSED: gather all of A (copy engines, every owner's stream), then one GEMM. */
static iris_status_t iris_gemm_run_unfused(iris_ag_gemm_t *g, const char *a, const void *b, const void *bias, void *c, iris_stream_t s) {
  const iris_ag_gemm_desc_t *d = &g->d;
  iris_status_t st;
  if ((st = iris_gemm_fork(g, s)) != IRIS_SUCCESS) return st;
  if (d->layout == IRIS_GEMM_A_ROWS) {
    const long long ml = d->M / g->W;
    int q;
    for (q = 0; q < g->W; ++q) {
      void *src;
      iris_translate_host(g->ctx, a, q, &src);
      IRIS_GEMM_TRY(iris_coll_memcpy_async(g->staged + (size_t)q * ml * d->K * g->es, src, (size_t)ml * d->K * g->es, g->copy[q]), "copying a shard of A");
    }
  } else if ((st = iris_gemm_copy_rows(g, a, 0, d->M, 1)) != IRIS_SUCCESS)
    return st;
  if ((st = iris_gemm_close(g, s)) != IRIS_SUCCESS) return st; /* the GEMM needs every copy */
  return iris_gemm_blas_run(g, g->staged, d->K, d->M, 0, b, bias, c, s, 0);
}
#endif /* IRIS_GEMM_HAVE_BLAS */

#if defined(IRIS_GEMM_HAVE_CORE)
#if !defined(IRIS_USE_HIP)
/* The TMA core's launch: tensor maps of the staging buffer and of B (made per call, on
 * the host: B may change between calls; no GPU work, so capture is fine). */
template <typename T, bool B_KN, typename OutT>
static int iris_gemm_launch_tma(iris_ag_gemm_t *g, const void *b, const void *bias, void *c, int slot0, int ctas, iris_stream_t s, int setup) {
  typedef iris_ag_gemm_tma_cfg Cfg;
  void (*k)(iris_ag_gemm_dev_t, const CUtensorMap, const CUtensorMap, const OutT *, OutT *, int) = iris_ag_gemm_tma_kernel<Cfg, T, B_KN, OutT>;
  CUtensorMap ta, tb;
  const int f16 = g->d.a_type == IRIS_FLOAT16;
  cudaError_t e;
  if (setup) return (int)cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Cfg::smem_bytes);
  if ((e = iris_gemm_tma_map(&ta, g->staged, f16, g->d.M, g->d.K, g->d.K, Cfg::BM)) != cudaSuccess) return (int)e;
  if ((e = iris_gemm_tma_map_b<Cfg>(&tb, b, f16, B_KN, g->d.K, g->d.N, B_KN ? g->d.N : g->d.K)) != cudaSuccess) return (int)e;
  k<<<ctas, Cfg::threads, Cfg::smem_bytes, s>>>(g->dev, ta, tb, (const OutT *)bias, (OutT *)c, slot0);
  return (int)cudaGetLastError();
}
#endif
template <typename T, bool B_KN, typename OutT>
static int iris_gemm_launch_typed(iris_ag_gemm_t *g, const void *b, const void *bias, void *c, int slot0, int ctas, iris_stream_t s, int setup) {
  void (*k)(iris_ag_gemm_dev_t, const T *, const OutT *, OutT *, int) = iris_ag_gemm_kernel<iris_ag_gemm_cfg, T, B_KN, OutT>;
#if !defined(IRIS_USE_HIP)
  if (g->tma) return iris_gemm_launch_tma<T, B_KN, OutT>(g, b, bias, c, slot0, ctas, s, setup);
#endif
#if defined(IRIS_USE_HIP)
  if (setup) return (int)hipSuccess; /* LDS (<= 64 KB, static_assert in the cfg) needs no opt-in */
  k<<<ctas, iris_ag_gemm_cfg::threads, iris_ag_gemm_cfg::smem_bytes, s>>>(g->dev, (const T *)b, (const OutT *)bias, (OutT *)c, slot0);
  return (int)hipGetLastError();
#else
  if (setup) return (int)cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)iris_ag_gemm_cfg::smem_bytes);
  k<<<ctas, iris_ag_gemm_cfg::threads, iris_ag_gemm_cfg::smem_bytes, s>>>(g->dev, (const T *)b, (const OutT *)bias, (OutT *)c, slot0);
  return (int)cudaGetLastError();
#endif
}
template <typename T, bool B_KN>
static int iris_gemm_launch_out(iris_ag_gemm_t *g, const void *b, const void *bias, void *c, int slot0, int ctas, iris_stream_t s, int setup) {
  switch (g->d.c_type) {
  case IRIS_BFLOAT16: return iris_gemm_launch_typed<T, B_KN, iris_gemm_elem_bf16_t>(g, b, bias, c, slot0, ctas, s, setup);
  case IRIS_FLOAT16: return iris_gemm_launch_typed<T, B_KN, iris_gemm_elem_f16_t>(g, b, bias, c, slot0, ctas, s, setup);
  default: return iris_gemm_launch_typed<T, B_KN, float>(g, b, bias, c, slot0, ctas, s, setup);
  }
}
/* setup = 1: only raise the kernel's shared-memory limit (at create). */
static int iris_gemm_launch(iris_ag_gemm_t *g, const void *b, const void *bias, void *c, int slot0, int ctas, iris_stream_t s, int setup) {
  const int kn = !g->d.b_transposed;
  if (g->d.a_type == IRIS_BFLOAT16)
    return kn ? iris_gemm_launch_out<iris_gemm_elem_bf16_t, true>(g, b, bias, c, slot0, ctas, s, setup)
              : iris_gemm_launch_out<iris_gemm_elem_bf16_t, false>(g, b, bias, c, slot0, ctas, s, setup);
  return kn ? iris_gemm_launch_out<iris_gemm_elem_f16_t, true>(g, b, bias, c, slot0, ctas, s, setup)
            : iris_gemm_launch_out<iris_gemm_elem_f16_t, false>(g, b, bias, c, slot0, ctas, s, setup);
}

/* The fused kernel's plan: tile counts, k-group, fetcher count (each fetcher keeps
 * 64 KB of loads in flight). */
static size_t iris_gemm_flag_words(const iris_ag_gemm_desc_t *d, int W);
static iris_status_t iris_gemm_plan_kernel(iris_ag_gemm_t *g, unsigned *flags) {
  const iris_ag_gemm_desc_t *d = &g->d;
  iris_ag_gemm_dev_t *v = &g->dev;
  int kg = d->k_group;
  memset(v, 0, sizeof *v);
  v->ctx = iris_device_context(g->ctx);
  v->M = (int)d->M; v->N = (int)d->N; v->K = (int)d->K;
  v->layout = d->layout;
  v->bm = iris_ag_gemm_cfg::BM;
  v->tiles_m = (int)iris_cdiv(d->M, iris_ag_gemm_cfg::BM);
  v->tiles_n = (int)iris_cdiv(d->N, iris_ag_gemm_cfg::BN);
  if (!kg) kg = d->K >= 8192 ? 512 : d->K >= 2048 ? 256 : 128;
  if (d->layout == IRIS_GEMM_A_COLS) /* a k-group never straddles two owners */
    while (kg > 64 && (d->K / g->W) % kg) kg /= 2;
  if (d->layout == IRIS_GEMM_A_COLS && (d->K / g->W) % kg) kg = (int)(d->K / g->W);
  v->kg = kg;
  v->groups_k = (int)iris_cdiv(d->K, kg);
  v->ready.tiles_m = v->tiles_m;
  v->ready.groups_k = v->groups_k;
  v->ready.flags = flags;
  v->claim = flags + (size_t)v->tiles_m * v->groups_k;
  v->arrive = v->claim + (size_t)v->tiles_m * v->groups_k;
  v->done = v->arrive + IRIS_MAX_RANKS;
  v->err = v->done + IRIS_MAX_RANKS;
  v->counters = v->err + IRIS_GEMM_ERR_WORDS;
  v->rot = d->layout == IRIS_GEMM_A_ROWS ? (int)((d->M / g->W) * g->me / iris_ag_gemm_cfg::BM) : 0;
  /* fetchers: the fewer N columns per A byte, the faster A must arrive. Measured on
   * 4xH200 (BENCHMARKS.md): 12-16 best at N = 3584, 24 at N = 1792, 12 at N = 6656 */
  v->fetchers = d->fetch_ctas > 0 ? d->fetch_ctas : (int)((long long)g->sms * 360 / d->N);
  if (d->fetch_ctas <= 0 && v->fetchers < 12) v->fetchers = 12;
  if (d->fetch_ctas <= 0 && v->fetchers > g->sms / 4) v->fetchers = g->sms / 4;
  if (v->fetchers >= g->sms) v->fetchers = g->sms / 2;
  v->gemm_ctas = g->sms - v->fetchers;
  g->unfused_fetchers = g->sms;
  g->unfused_gemm = g->sms;
  if (g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED) { v->fetchers = g->unfused_fetchers; v->gemm_ctas = g->unfused_gemm; }
  /* fused with the TMA core and wide N (few fetchers wanted: A is needed slowly): no
   * fetcher CTAs, every SM multiplies and its producer warpgroup's 3 idle warps fetch.
   * Measured on 2xH200 (BENCHMARKS.md, session 5): side fetch 12-18% faster at N = 3584
   * and 6656, 9-12% slower at N = 1792, where 24+ fetcher CTAs move A faster.
   * desc.fetch_ctas > 0 always keeps fetcher CTAs, -1 asks for side fetch. */
  v->side_fetch = g->path == IRIS_GEMM_PATH_FUSED && g->tma && (d->fetch_ctas == -1 || (!d->fetch_ctas && (long long)g->sms * 360 / d->N < 20));
  if (v->side_fetch) { v->fetchers = 0; v->gemm_ctas = g->sms; }
  /* fused TMA kernel with fetcher CTAs: the GEMM CTAs' idle side warps stand by (d.help) */
  v->help = g->path == IRIS_GEMM_PATH_FUSED && g->tma && !v->side_fetch;
  /* tile order of the TMA core. Fused with fetcher CTAs: row by row, the order the
   * fetchers fill A in (groups of 8 m-tiles measured 4-19% slower at N = 1792 and 6656 on
   * 2xH200: a group waits for 8 m-tiles). Fused with side fetch, and kernel-unfused (A is
   * all there): groups of 8, which share B tiles in L2 (side fetch: 1-6% faster at all four
   * shapes tried on 4xH200, session 5; kernel-unfused: up to 5%). Default since session 8,
   * after gemm_test passed with it. IRIS_GEMM_RASTER overrides all. */
#if defined(IRIS_GEMM_RASTER)
  v->raster = IRIS_GEMM_RASTER;
#else
  v->raster = g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED || v->side_fetch ? 8 : 1;
#endif
  v->staged = g->staged;
  if ((size_t)v->fetchers + v->gemm_ctas > IRIS_GEMM_MAX_SLOTS) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm: too many CTAs");
  if (2 * (size_t)v->tiles_m * v->groups_k + 2 * IRIS_MAX_RANKS + IRIS_GEMM_ERR_WORDS + IRIS_GEMM_MAX_SLOTS > iris_gemm_flag_words(d, g->W))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm: the flag block is too small for %d x %d ready flags", g->me, v->tiles_m, v->groups_k);
  return IRIS_SUCCESS;
}

#endif /* IRIS_GEMM_HAVE_CORE */

static size_t iris_gemm_flag_words(const iris_ag_gemm_desc_t *d, int W) {
  /* ready flags for the smallest tile and k-group the kernel may pick (64 rows; 64
   * columns, or K/W columns when a COLS shard is narrower: then W groups) and as many
   * claim words, then arrive, done, the error record and counters */
  const size_t groups = (size_t)iris_cdiv(d->K, 64) > (size_t)W ? (size_t)iris_cdiv(d->K, 64) : (size_t)W;
  return 2 * (size_t)iris_cdiv(d->M, 64) * groups + 2 * IRIS_MAX_RANKS + IRIS_GEMM_ERR_WORDS + IRIS_GEMM_MAX_SLOTS;
}

#if defined(IRIS_USE_HIP)
#define IRIS_GEMM_MFMA_OFF_MSG                                                                                     \
  "the AMD GEMM core (MFMA, internal/gemm_core_mfma.h) has never been run on AMD hardware, so it is off by default; " \
  "define IRIS_GEMM_MFMA_UNVERIFIED before including iris_gemm.h to compile and use it anyway (untested)"
#endif

#if defined(IRIS_USE_HIP) && defined(IRIS_GEMM_HAVE_CORE)
/* AMD (IRIS_GEMM_MFMA_UNVERIFIED): the local part of create for the fused and the
 * kernel-unfused paths, the only ones there (no vendor BLAS): staging buffer, kernel plan,
 * trace. No copy streams: those paths use none. Returns the first failure. */
static iris_status_t iris_gemm_create_local_hip(iris_ag_gemm_t *g) {
  const iris_ag_gemm_desc_t *desc = &g->d;
  iris_t *ctx = g->ctx;
  const int me = g->me;
  iris_status_t st;
  (void)iris_gemm_copy_rows; (void)iris_gemm_fork; (void)iris_gemm_close; (void)iris_gemm_plan_chunks;
  if (g->path != IRIS_GEMM_PATH_FUSED && g->path != IRIS_GEMM_PATH_KERNEL_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_ag_gemm_create: path '%s' needs a vendor BLAS (cuBLASLt; this version has no hipBLASLt path): on AMD use "
                            "IRIS_GEMM_PATH_FUSED, IRIS_GEMM_PATH_KERNEL_UNFUSED or IRIS_GEMM_PATH_AUTO",
                            me, iris_gemm_path_name(g->path));
#if !defined(IRIS_GEMM_TRACE)
  if (desc->trace) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: desc.trace needs -DIRIS_GEMM_TRACE", me);
#endif
  if (hipDeviceGetAttribute(&g->sms, hipDeviceAttributeMultiprocessorCount, iris_device(ctx)) != hipSuccess)
    return iris_gemm_gpu_fail(ctx, "hipDeviceGetAttribute (compute units)", (int)hipGetLastError());
  if (g->sms < 2) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: the fused kernel needs 2 compute units or more (%d)", me, g->sms);
  if (hipMalloc((void **)&g->staged, (size_t)desc->M * desc->K * g->es) != hipSuccess) {
    (void)hipGetLastError();
    g->staged = NULL;
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: iris_ag_gemm_create: no room for the %lld x %lld staging buffer (%.1f MB)", me, desc->M, desc->K,
                            (double)desc->M * desc->K * g->es / 1e6);
  }
  g->gemm_streams = 1;
  if ((st = iris_gemm_plan_kernel(g, g->flag_block)) != IRIS_SUCCESS) return st;
#if defined(IRIS_GEMM_TRACE)
  if (desc->trace) {
    const int slots = g->dev.fetchers + g->dev.gemm_ctas;
    g->dev.trace_cap = 4096;
    g->trace_words = 3 * (size_t)slots * (1 + 4 * (size_t)g->dev.trace_cap);
    if (hipMalloc((void **)&g->trace, g->trace_words * 8) != hipSuccess) {
      g->trace = NULL;
      return iris_gemm_gpu_fail(ctx, "hipMalloc of the trace", (int)hipGetLastError());
    }
    if (hipMemset(g->trace, 0, g->trace_words * 8) != hipSuccess) return iris_gemm_gpu_fail(ctx, "clearing the trace", (int)hipGetLastError());
    g->dev.trace = g->trace;
  }
#endif
  return IRIS_SUCCESS;
}
#endif

#if defined(IRIS_GEMM_HAVE_CORE) && !defined(IRIS_USE_HIP)
static __global__ void iris_ag_gemm_tma_probe(int *out) { *out = iris_gemm_tma_compiled(); }
/* 1 when the kernels were compiled with an sm_90a device pass that runs on this GPU
 * (wgmma and TMA), from a one-thread kernel of the same unit (synchronous, at create). */
static int iris_gemm_probe_wgmma(void) {
  int *d = NULL, h = 0;
  if (cudaMalloc((void **)&d, sizeof(int)) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  iris_ag_gemm_tma_probe<<<1, 1>>>(d);
  if (cudaGetLastError() != cudaSuccess || cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) {
    cudaGetLastError();
    h = 0;
  }
  cudaFree(d);
  return h;
}
#endif

/* The local part of create, after the heap blocks: staging, streams, events, GEMM
 * preparation. Returns the first failure. */
static iris_status_t iris_gemm_create_local(iris_ag_gemm_t *g) {
  const iris_ag_gemm_desc_t *desc = &g->d;
  iris_t *ctx = g->ctx;
  const int me = g->me;
  int q, j;
#if defined(IRIS_USE_HIP)
  (void)desc; (void)ctx; (void)q; (void)j;
#if defined(IRIS_GEMM_HAVE_CORE)
  (void)me;
  return iris_gemm_create_local_hip(g);
#else
  (void)iris_gemm_copy_rows; (void)iris_gemm_fork; (void)iris_gemm_close; (void)iris_gemm_plan_chunks;
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: " IRIS_GEMM_MFMA_OFF_MSG " (see iris_gemm.h, Rules)", me);
#endif
#else
#if !defined(IRIS_GEMM_HAVE_BLAS)
  if (g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: path '%s' needs cuBLASLt (cublasLt.h was not found, or IRIS_GEMM_NO_BLAS)", me,
                            iris_gemm_path_name(g->path));
#endif
#if !defined(IRIS_GEMM_HAVE_CORE)
  if (g->path == IRIS_GEMM_PATH_FUSED || g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: the fused kernel needs the sm_80+ core", me);
#endif
  if (desc->trace && (g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED))
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: tracing records the fused kernel; path '%s' has none", me, iris_gemm_path_name(g->path));
  cudaDeviceGetAttribute(&g->sms, cudaDevAttrMultiProcessorCount, iris_device(ctx));
  if (cudaMalloc((void **)&g->staged, (size_t)desc->M * desc->K * g->es) != cudaSuccess) {
    cudaGetLastError();
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: iris_ag_gemm_create: no room for the %lld x %lld staging buffer (%.1f MB)", me, desc->M, desc->K,
                            (double)desc->M * desc->K * g->es / 1e6);
  }
  for (q = 0; q < g->W; ++q) {
    if (cudaStreamCreateWithFlags(&g->copy[q], cudaStreamNonBlocking) != cudaSuccess || cudaEventCreateWithFlags(&g->tail[q], cudaEventDisableTiming) != cudaSuccess)
      return iris_gemm_gpu_fail(ctx, "creating a copy stream", (int)cudaGetLastError());
    for (j = 0; j < IRIS_GEMM_MAX_CHUNKS; ++j)
      if (cudaEventCreateWithFlags(&g->ev[q][j], cudaEventDisableTiming) != cudaSuccess) return iris_gemm_gpu_fail(ctx, "creating an event", (int)cudaGetLastError());
  }
  if (cudaEventCreateWithFlags(&g->fork, cudaEventDisableTiming) != cudaSuccess || cudaEventCreateWithFlags(&g->join, cudaEventDisableTiming) != cudaSuccess)
    return iris_gemm_gpu_fail(ctx, "creating an event", (int)cudaGetLastError());
  iris_gemm_plan_chunks(g);
  g->gemm_streams = g->path != IRIS_GEMM_PATH_PIPELINED ? 1 : desc->gemm_streams ? desc->gemm_streams : iris_gemm_big_chunk(g->chunk_row[1] - g->chunk_row[0], desc) ? 1 : 2;
  if (g->gemm_streams > 1 &&
      (cudaStreamCreateWithFlags(&g->aux, cudaStreamNonBlocking) != cudaSuccess || cudaEventCreateWithFlags(&g->aux_join, cudaEventDisableTiming) != cudaSuccess))
    return iris_gemm_gpu_fail(ctx, "creating the second GEMM stream", (int)cudaGetLastError());
#if defined(IRIS_GEMM_HAVE_BLAS)
  if (g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED) {
    iris_status_t st;
    iris_gemm_blas_shape_t *unused;
    if ((st = iris_gemm_blas_init(g)) != IRIS_SUCCESS) return st;
    /* prepare every chunk shape now: run only looks them up */
    if (g->path == IRIS_GEMM_PATH_UNFUSED) return iris_gemm_blas_shape(g, desc->M, desc->K, &unused);
    if (desc->layout == IRIS_GEMM_A_ROWS && (st = iris_gemm_blas_shape(g, desc->M / g->W, desc->K, &unused)) != IRIS_SUCCESS) return st;
    for (j = 0; j < g->nchunks; ++j)
      if ((st = iris_gemm_blas_shape(g, g->chunk_row[j + 1] - g->chunk_row[j], desc->K, &unused)) != IRIS_SUCCESS) return st;
  }
#endif
#if defined(IRIS_GEMM_HAVE_CORE)
  if (g->path == IRIS_GEMM_PATH_FUSED || g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED) {
    iris_status_t st;
    int e;
    g->wgmma = iris_gemm_probe_wgmma();
    g->tma = g->wgmma && !(getenv("IRIS_GEMM_TMA") && getenv("IRIS_GEMM_TMA")[0] == '0');
    if ((st = iris_gemm_plan_kernel(g, g->flag_block)) != IRIS_SUCCESS) return st;
    if ((e = iris_gemm_launch(g, NULL, NULL, NULL, 0, 0, 0, 1)) != (int)cudaSuccess) return iris_gemm_gpu_fail(ctx, "setting the kernel's shared memory", e);
    if (desc->trace) {
#if defined(IRIS_GEMM_TRACE)
      const int slots = g->dev.fetchers + g->dev.gemm_ctas;
      g->dev.trace_cap = 4096;
      g->trace_words = 3 * (size_t)slots * (1 + 4 * (size_t)g->dev.trace_cap);
      if (cudaMalloc((void **)&g->trace, g->trace_words * 8) != cudaSuccess) return iris_gemm_gpu_fail(ctx, "cudaMalloc of the trace", (int)cudaGetLastError());
      if (cudaMemset(g->trace, 0, g->trace_words * 8) != cudaSuccess) return iris_gemm_gpu_fail(ctx, "clearing the trace", (int)cudaGetLastError());
      g->dev.trace = g->trace;
#else
      return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_create: desc.trace needs -DIRIS_GEMM_TRACE", me);
#endif
    }
  }
#endif
  return IRIS_SUCCESS;
#endif
}

#if defined(IRIS_USE_HIP)
#define iris_gemm_get_device hipGetDevice
#define iris_gemm_set_device hipSetDevice
#else
#define iris_gemm_get_device cudaGetDevice
#define iris_gemm_set_device cudaSetDevice
#endif

IRIS_DEF iris_status_t iris_ag_gemm_create(iris_t *ctx, const iris_ag_gemm_desc_t *desc, iris_ag_gemm_t **out) {
  iris_ag_gemm_t *g;
  iris_status_t st;
  int W, me, q, old = -1;
  int mine[6] = {0, 0, 0, 0, 0, 0}, *oks;
  if (!ctx || !desc || !out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_create: NULL argument");
  *out = NULL;
  if (iris_num_nodes(ctx) > 1) /* refused alike on every rank, before any exchange */
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: iris_ag_gemm_create: the all-gather + GEMM runs within one node, and this context spans %d nodes; create it on a "
                            "node-local context (docs/multinode.md)", iris_rank(ctx), iris_num_nodes(ctx));
  W = iris_world_size(ctx);
  me = iris_rank(ctx);
  /* every rank must describe the same problem: exchange first, so a rank with a bad
   * description does not leave the others waiting (fields, not bytes: the struct has
   * padding) */
  {
    const int nf = 16;
    long long mine[16] = {(long long)desc->struct_size, desc->layout, desc->M, desc->N, desc->K, desc->a_type, desc->c_type, desc->b_transposed, desc->has_bias,
                          desc->path, desc->chunks, desc->fetch_ctas, desc->k_group, desc->stage_a, desc->trace, desc->gemm_streams};
    long long *all = (long long *)calloc((size_t)W * nf, sizeof *all);
    if (!all) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
    if ((st = iris_allgather_host(ctx, mine, all, sizeof mine)) != IRIS_SUCCESS) { free(all); return st; }
    for (q = 0; q < W; ++q)
      if (memcmp(all + (size_t)q * nf, mine, sizeof mine)) {
        free(all);
        return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: iris_ag_gemm_create: rank %d describes a different problem (shape, types, layout, path or options)", me, q);
      }
    free(all);
  }
  if ((st = iris_gemm_check_desc(desc, W, me)) != IRIS_SUCCESS) return st; /* the same verdict on every rank */
  if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st;       /* the device barrier, before any capture */
  g = (iris_ag_gemm_t *)calloc(1, sizeof *g);
  if (!g) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  g->ctx = ctx;
  g->d = *desc;
  g->W = W;
  g->me = me;
  g->es = iris_dtype_size(desc->a_type);
  g->cs = iris_dtype_size(desc->c_type);
  g->path = iris_ag_gemm_choose_path(desc, W);
  iris_gemm_get_device(&old);
  iris_gemm_set_device(iris_device(ctx));
  /* heap blocks: the same sequence on every rank */
  st = iris_calloc(ctx, iris_gemm_flag_words(desc, W) * sizeof(unsigned), (void **)&g->flag_block);
  if (st == IRIS_SUCCESS && desc->stage_a)
    st = iris_malloc(ctx, (size_t)(desc->layout == IRIS_GEMM_A_ROWS ? desc->M / W * desc->K : desc->M * (desc->K / W)) * g->es, (void **)&g->a_heap);
  if (st == IRIS_SUCCESS) st = iris_gemm_create_local(g);
  /* agree: a plan exists on every rank or on none (heap blocks then go on every rank), and
   * the fused kernel is cut the same way everywhere: a rank waits for epoch * (the peers'
   * fetcher count) signals, counted with its own count (different GPUs, SM counts or
   * IRIS_GEMM_TMA settings would make every call wait out the bound) */
  mine[0] = st == IRIS_SUCCESS;
#if defined(IRIS_GEMM_HAVE_CORE)
  if (st == IRIS_SUCCESS && (g->path == IRIS_GEMM_PATH_FUSED || g->path == IRIS_GEMM_PATH_KERNEL_UNFUSED)) {
    mine[1] = g->dev.fetchers; mine[2] = g->dev.gemm_ctas; mine[3] = g->dev.side_fetch; mine[4] = g->dev.kg; mine[5] = g->tma;
  }
#endif
  oks = (int *)calloc((size_t)W * 6, sizeof *oks);
  if (!oks) st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  else if (iris_allgather_host(ctx, mine, oks, sizeof mine) != IRIS_SUCCESS) st = st == IRIS_SUCCESS ? IRIS_ERROR_TIMEOUT : st;
  else
    for (q = 0; q < W && st == IRIS_SUCCESS; ++q) {
      const int *o = oks + (size_t)q * 6;
      if (!o[0]) st = iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: iris_ag_gemm_create: rank %d could not create its plan (see its error)", me, q);
      else if (memcmp(o + 1, mine + 1, 5 * sizeof *o))
        st = iris_detail_fail(IRIS_ERROR_MISMATCH,
                              "rank %d: iris_ag_gemm_create: rank %d cuts the fused kernel differently (fetcher CTAs %d, GEMM CTAs %d, side fetch %d, k-group %d, "
                              "TMA core %d; here %d, %d, %d, %d, %d): give every rank the same GPU model and the same IRIS_GEMM_TMA",
                              me, q, o[1], o[2], o[3], o[4], o[5], mine[1], mine[2], mine[3], mine[4], mine[5]);
    }
  free(oks);
  if (st != IRIS_SUCCESS) {
    iris_ag_gemm_destroy(g);
    if (old >= 0) iris_gemm_set_device(old);
    return st;
  }
  *out = g;
  if (old >= 0) iris_gemm_set_device(old);
  return IRIS_SUCCESS;
}

static iris_status_t iris_gemm_run_plan(iris_ag_gemm_t *g, const void *a_shard, const void *b, const void *bias, void *c, iris_stream_t stream) {
  const iris_ag_gemm_desc_t *d;
  const char *a = (const char *)a_shard;
  size_t off, shard_bytes;
  int align;
  if (!g) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_run: NULL plan");
  d = &g->d;
  if (!a_shard || !b || !c) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_run: NULL buffer", g->me);
  if (!d->has_bias != !bias) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_run: bias %s, but the plan says has_bias = %d", g->me, bias ? "given" : "NULL", d->has_bias);
  align = g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED ? 256 : 16;
  if (((uintptr_t)b | (uintptr_t)c | (uintptr_t)bias | (uintptr_t)a_shard) % (uintptr_t)align)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_run: A, B, C and bias must be %d-byte aligned on path '%s'", g->me, align, iris_gemm_path_name(g->path));
  shard_bytes = (size_t)(d->layout == IRIS_GEMM_A_ROWS ? d->M / g->W * d->K : d->M * (d->K / g->W)) * g->es;
  if (d->stage_a) {
#if !defined(IRIS_USE_HIP)
    if (cudaMemcpyAsync(g->a_heap, a_shard, shard_bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
      return iris_gemm_gpu_fail(g->ctx, "staging A into the heap", (int)cudaGetLastError());
#elif defined(IRIS_GEMM_HAVE_CORE)
    if (hipMemcpyAsync(g->a_heap, a_shard, shard_bytes, hipMemcpyDeviceToDevice, stream) != hipSuccess)
      return iris_gemm_gpu_fail(g->ctx, "staging A into the heap", (int)hipGetLastError());
#endif
    a = g->a_heap;
  } else if (iris_heap_offset(g->ctx, a_shard, &off) != IRIS_SUCCESS || shard_bytes > iris_heap_size(g->ctx) - off) {
    return iris_detail_fail(IRIS_ERROR_NOT_IN_HEAP, "rank %d: iris_ag_gemm_run: the A shard (%zu bytes) must lie on the symmetric heap (iris_malloc), or create the plan with stage_a = 1",
                            g->me, shard_bytes);
  }
#if defined(IRIS_DEBUG)
  {
    /* the shard must sit at the same heap offset everywhere (a host exchange) */
    size_t mine = 0, *offs;
    int q;
    iris_status_t st;
    if (!iris_coll_capturing(stream)) {
      iris_heap_offset(g->ctx, a, &mine);
      offs = (size_t *)calloc((size_t)g->W, sizeof *offs);
      if (!offs) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
      if ((st = iris_allgather_host(g->ctx, &mine, offs, sizeof mine)) != IRIS_SUCCESS) { free(offs); return st; }
      for (q = 0; q < g->W; ++q)
        if (offs[q] != mine) {
          free(offs);
          return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: iris_ag_gemm_run: rank %d's A shard is at heap offset %zu, this rank's at %zu", g->me, q, offs[q], mine);
        }
      free(offs);
    }
  }
#endif
#if defined(IRIS_USE_HIP) && !defined(IRIS_GEMM_HAVE_CORE)
  (void)a;
  (void)stream;
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_run: " IRIS_GEMM_MFMA_OFF_MSG, g->me);
#else
  {
    iris_status_t st;
    /* every rank has reached this call: its A is written (and the last call's readers are
     * gone, closed by that call's barrier) */
    if (g->path == IRIS_GEMM_PATH_PIPELINED || g->path == IRIS_GEMM_PATH_UNFUSED) {
      if ((st = iris_barrier_device(g->ctx, stream)) != IRIS_SUCCESS) return st;
    }
    switch (g->path) {
#if defined(IRIS_GEMM_HAVE_BLAS)
    case IRIS_GEMM_PATH_PIPELINED: return iris_gemm_run_pipelined(g, a, b, bias, c, stream);
    case IRIS_GEMM_PATH_UNFUSED: return iris_gemm_run_unfused(g, a, b, bias, c, stream);
#endif
#if defined(IRIS_GEMM_HAVE_CORE)
    case IRIS_GEMM_PATH_FUSED:
    case IRIS_GEMM_PATH_KERNEL_UNFUSED: {
      int e;
      g->dev.a_shard = a;
#if defined(IRIS_GEMM_TRACE)
      if (g->trace) {
        /* the event counts restart each run: zero only the count words */
        const int slots = g->dev.fetchers + g->dev.gemm_ctas;
#if defined(IRIS_USE_HIP)
        if (hipMemset2DAsync(g->trace, (1 + 4 * (size_t)g->dev.trace_cap) * 8, 0, 8, 3 * (size_t)slots, stream) != hipSuccess)
          return iris_gemm_gpu_fail(g->ctx, "clearing the trace", (int)hipGetLastError());
#else
        if (cudaMemset2DAsync(g->trace, (1 + 4 * (size_t)g->dev.trace_cap) * 8, 0, 8, 3 * (size_t)slots, stream) != cudaSuccess)
          return iris_gemm_gpu_fail(g->ctx, "clearing the trace", (int)cudaGetLastError());
#endif
      }
#endif
      if (g->path == IRIS_GEMM_PATH_FUSED) e = iris_gemm_launch(g, b, bias, c, 0, g->dev.fetchers + g->dev.gemm_ctas, stream, 0);
      else {
        e = iris_gemm_launch(g, b, bias, c, 0, g->dev.fetchers, stream, 0);
        if (e == (int)IRIS_GEMM_OK) e = iris_gemm_launch(g, b, bias, c, g->dev.fetchers, g->dev.gemm_ctas, stream, 0);
      }
      if (e != (int)IRIS_GEMM_OK) return iris_gemm_gpu_fail(g->ctx, "launching the fused kernel", e);
      return IRIS_SUCCESS;
    }
#endif
    default: return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_run: path '%s' is not in this build", g->me, iris_gemm_path_name(g->path));
    }
  }
#endif
}


/* A context's fatal fault refuses the run at once; the run is ordered after the context's
 * previous communication call, whatever its stream (iris_detail_order_begin, iris.h). */
IRIS_DEF iris_status_t iris_ag_gemm_run(iris_ag_gemm_t *g, const void *a_shard, const void *b, const void *bias, void *c, iris_stream_t stream) {
  if (g && g->d.a_type == IRIS_FLOAT8_E4M3)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_ag_gemm_run: an fp8 plan needs per-tensor scales: call iris_ag_gemm_run_scaled", g->me);
  return iris_ag_gemm_run_scaled(g, a_shard, b, NULL, NULL, bias, c, stream);
}

IRIS_DEF iris_status_t iris_ag_gemm_run_scaled(iris_ag_gemm_t *g, const void *a_shard, const void *b, const float *a_scale, const float *b_scale, const void *bias,
                                               void *c, iris_stream_t stream) {
  iris_status_t st, st2;
  if (!g) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_run: NULL plan");
  if ((st = iris_gemm_check_scales(g->d.a_type, a_scale, b_scale, "iris_ag_gemm_run_scaled", g->me)) != IRIS_SUCCESS) return st;
  if ((st = iris_detail_check_fault(g->ctx)) != IRIS_SUCCESS) return st;
  if ((st = iris_detail_order_begin(g->ctx, stream)) != IRIS_SUCCESS) return st;
#if defined(IRIS_GEMM_HAVE_BLAS)
  if (a_scale) st = iris_gemm_blas_set_scales(g, a_scale, b_scale, stream);
#endif
  if (st == IRIS_SUCCESS) st = iris_gemm_run_plan(g, a_shard, b, bias, c, stream);
  st2 = iris_detail_order_end(g->ctx, stream);
  return st != IRIS_SUCCESS ? st : st2;
}

#if defined(IRIS_GEMM_HAVE_CORE)
/* Synchronous: copy a plan's error record (IRIS_GEMM_ERR_WORDS words at err, device) into
 * e and clear its WHAT word when set (the next failure is recorded afresh). The runtime's
 * status (IRIS_GEMM_OK: done). */
static int iris_gemm_err_take(unsigned *err, unsigned *e) {
  const unsigned zero = 0;
  int rc;
#if defined(IRIS_USE_HIP)
  rc = (int)hipMemcpy(e, err, IRIS_GEMM_ERR_WORDS * sizeof(unsigned), hipMemcpyDeviceToHost);
  if (rc == (int)hipSuccess && e[IRIS_GEMM_ERR_WHAT]) rc = (int)hipMemcpy(err + IRIS_GEMM_ERR_WHAT, &zero, sizeof zero, hipMemcpyHostToDevice);
#else
  rc = (int)cudaMemcpy(e, err, IRIS_GEMM_ERR_WORDS * sizeof(unsigned), cudaMemcpyDeviceToHost);
  if (rc == (int)cudaSuccess && e[IRIS_GEMM_ERR_WHAT]) rc = (int)cudaMemcpy(err + IRIS_GEMM_ERR_WHAT, &zero, sizeof zero, cudaMemcpyHostToDevice);
#endif
  return rc;
}
#endif

IRIS_DEF iris_status_t iris_ag_gemm_check(iris_ag_gemm_t *g) {
#if defined(IRIS_GEMM_HAVE_CORE)
  unsigned e[IRIS_GEMM_ERR_WORDS];
  int rc, peer;
  const char *path;
  double bound, pipe = 0;
  if (!g) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_check: NULL plan");
#if defined(IRIS_GEMM_PIPE_TIMEOUT_NS)
  pipe = (double)IRIS_GEMM_PIPE_TIMEOUT_NS * 1e-9;
#endif
  if (g->path != IRIS_GEMM_PATH_FUSED && g->path != IRIS_GEMM_PATH_KERNEL_UNFUSED) return IRIS_SUCCESS;
  rc = iris_gemm_err_take(g->dev.err, e);
  if (rc != (int)IRIS_GEMM_OK) return iris_gemm_gpu_fail(g->ctx, "iris_ag_gemm_check: reading the error record", rc);
  if (!e[IRIS_GEMM_ERR_WHAT]) return IRIS_SUCCESS;
  path = iris_gemm_path_name(g->path);
  peer = (int)e[IRIS_GEMM_ERR_PEER];
  bound = (double)IRIS_WAIT_TIMEOUT_NS * 1e-9;
  switch (e[IRIS_GEMM_ERR_WHAT]) {
  case IRIS_GEMM_WAIT_ARRIVE:
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: the wait for rank %d's \"A is ready\" signal (arrive[%d] holds %u, want %u) ran past the wait "
                            "bound (%.1f s) in CTA %u: rank %d is stuck, dead, far behind, or not making the same calls; C of that call is wrong",
                            g->me, path, e[IRIS_GEMM_ERR_EPOCH], peer, peer, e[IRIS_GEMM_ERR_GOT], e[IRIS_GEMM_ERR_WANT], bound, e[IRIS_GEMM_ERR_BLOCK], peer);
  case IRIS_GEMM_WAIT_DONE:
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: the wait for rank %d to finish reading this rank's A (done[%d] holds %u signals, want %u) ran "
                            "past the wait bound (%.1f s) in CTA %u: rank %d is stuck, dead or far behind, and may still read this rank's A",
                            g->me, path, e[IRIS_GEMM_ERR_EPOCH], peer, peer, e[IRIS_GEMM_ERR_GOT], e[IRIS_GEMM_ERR_WANT], bound, e[IRIS_GEMM_ERR_BLOCK], peer);
  case IRIS_GEMM_WAIT_READY:
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: the wait for this rank's own ready flag of A block (m-tile %u, k-group %u) (holds %u, want %u) ran "
                            "past %.1f s in CTA %u: the fetching CTA of this rank did not run (not resident: other work on the GPU holding its SMs?) or "
                            "stopped; C of that call is wrong",
                            g->me, path, e[IRIS_GEMM_ERR_EPOCH], e[IRIS_GEMM_ERR_ITEM] / (unsigned)g->dev.groups_k, e[IRIS_GEMM_ERR_ITEM] % (unsigned)g->dev.groups_k,
                            e[IRIS_GEMM_ERR_GOT], e[IRIS_GEMM_ERR_WANT], (double)IRIS_GEMM_READY_TIMEOUT_NS * 1e-9, e[IRIS_GEMM_ERR_BLOCK]);
  case IRIS_GEMM_WAIT_PEER_FAILED: {
    const unsigned w = e[IRIS_GEMM_ERR_GOT];
    const int q = (int)e[IRIS_GEMM_ERR_WANT];
    char cause[96];
    if ((w == IRIS_GEMM_WAIT_ARRIVE || w == IRIS_GEMM_WAIT_DONE) && q >= 0) snprintf(cause, sizeof cause, "its wait for rank %d's signal (%s)", q, w == IRIS_GEMM_WAIT_ARRIVE ? "A is ready" : "done reading");
    else snprintf(cause, sizeof cause, "%s", w == IRIS_GEMM_WAIT_READY ? "its wait for its own fetcher CTAs" : w == IRIS_GEMM_WAIT_PIPELINE ? "a TMA pipeline wait" : "a wait");
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: rank %d gave up on this call (%s ran past the wait bound; see its error): it may have "
                            "overwritten its A while this rank read it, so C of that call may be wrong here too",
                            g->me, path, e[IRIS_GEMM_ERR_EPOCH], peer, cause);
  }
  default:
    return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                            "rank %d: iris_ag_gemm (%s): call %u: a pipeline (mbarrier) wait of the TMA core ran past its bound (%.1f s) in CTA %u: a bug in "
                            "internal/gemm_core_tma.h; C of that call is wrong",
                            g->me, path, e[IRIS_GEMM_ERR_EPOCH], pipe, e[IRIS_GEMM_ERR_BLOCK]);
  }
#else
  if (!g) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_check: NULL plan");
  return IRIS_SUCCESS;
#endif
}

IRIS_DEF iris_status_t iris_ag_gemm_trace_write(iris_ag_gemm_t *g, const char *path) {
#if defined(IRIS_GEMM_TRACE) && defined(IRIS_GEMM_HAVE_CORE)
  unsigned long long *h, t_min = ~0ull;
  FILE *f;
  int slot, slots, first = 1;
  size_t row_words, n, i;
  static const char *const names[4] = {"?", "fetch", "wait", "tile"};
  if (!g || !path) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_ag_gemm_trace_write: NULL argument");
  if (!g->trace) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_trace_write: the plan was created without desc.trace", g->me);
  slots = 3 * (g->dev.fetchers + g->dev.gemm_ctas); /* rows */
  row_words = 1 + 4 * (size_t)g->dev.trace_cap;
  h = (unsigned long long *)malloc(g->trace_words * 8);
  if (!h) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
#if defined(IRIS_USE_HIP)
  if (hipMemcpy(h, g->trace, g->trace_words * 8, hipMemcpyDeviceToHost) != hipSuccess) {
    free(h);
    return iris_gemm_gpu_fail(g->ctx, "reading the trace", (int)hipGetLastError());
  }
#else
  if (cudaMemcpy(h, g->trace, g->trace_words * 8, cudaMemcpyDeviceToHost) != cudaSuccess) {
    free(h);
    return iris_gemm_gpu_fail(g->ctx, "reading the trace", (int)cudaGetLastError());
  }
#endif
  for (slot = 0; slot < slots; ++slot)
    for (n = h[slot * row_words], i = 0; i < n; ++i) t_min = h[slot * row_words + 1 + 4 * i] < t_min ? h[slot * row_words + 1 + 4 * i] : t_min;
  if (!(f = fopen(path, "w"))) {
    free(h);
    return iris_detail_fail(IRIS_ERROR_SYSTEM, "rank %d: iris_ag_gemm_trace_write: cannot open %s", g->me, path);
  }
  fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"rank\":%d,\"fetchers\":%d,\"gemm_ctas\":%d,\"path\":\"%s\"},\"traceEvents\":[\n", g->me, g->dev.fetchers,
          g->dev.gemm_ctas, iris_gemm_path_name(g->path));
  for (slot = 0; slot < slots; ++slot) {
    n = h[slot * row_words];
    for (i = 0; i < n; ++i) {
      const unsigned long long *e = h + slot * row_words + 1 + 4 * i;
      const int kind = (int)(e[2] & 255);
      fprintf(f, "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"index\":%llu}}", first ? "" : ",\n",
              names[kind < 4 ? kind : 0], kind == IRIS_GEMM_EV_FETCH ? "fetcher" : "gemm", g->me, slot, (double)(e[0] - t_min) / 1e3, (double)(e[1] - e[0]) / 1e3,
              e[2] >> 8);
      first = 0;
    }
  }
  fprintf(f, "\n]}\n");
  fclose(f);
  free(h);
  return IRIS_SUCCESS;
#else
  (void)path;
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: iris_ag_gemm_trace_write: build with -DIRIS_GEMM_TRACE and create the plan with desc.trace = 1", g ? g->me : -1);
#endif
}

IRIS_DEF iris_status_t iris_ag_gemm_destroy(iris_ag_gemm_t *g) {
  int q, j;
  if (!g) return IRIS_SUCCESS;
#if !defined(IRIS_USE_HIP)
  {
    int old = -1;
    cudaGetDevice(&old);
    cudaSetDevice(iris_device(g->ctx));
    cudaDeviceSynchronize();
    if (old >= 0) cudaSetDevice(old);
  }
  for (q = 0; q < IRIS_MAX_RANKS; ++q) {
    if (g->copy[q]) cudaStreamDestroy(g->copy[q]);
    if (g->tail[q]) cudaEventDestroy(g->tail[q]);
    for (j = 0; j < IRIS_GEMM_MAX_CHUNKS; ++j)
      if (g->ev[q][j]) cudaEventDestroy(g->ev[q][j]);
  }
  if (g->fork) cudaEventDestroy(g->fork);
  if (g->join) cudaEventDestroy(g->join);
  if (g->aux) cudaStreamDestroy(g->aux);
  if (g->aux_join) cudaEventDestroy(g->aux_join);
  if (g->staged) cudaFree(g->staged);
  if (g->trace) cudaFree(g->trace);
#if defined(IRIS_GEMM_HAVE_BLAS)
  for (j = 0; j < g->nshapes; ++j) {
    cublasLtMatrixLayoutDestroy(g->shapes[j].a);
    cublasLtMatrixLayoutDestroy(g->shapes[j].b);
    cublasLtMatrixLayoutDestroy(g->shapes[j].c);
  }
  if (g->op) cublasLtMatmulDescDestroy(g->op);
  if (g->lt) cublasLtDestroy(g->lt);
  if (g->lt_ws[0]) cudaFree(g->lt_ws[0]);
  if (g->lt_ws[1]) cudaFree(g->lt_ws[1]);
  if (g->lt_scales) cudaFree(g->lt_scales);
#endif
#else
  /* AMD: only the fused kernel's buffers exist (iris_gemm_create_local_hip) */
  if (g->staged || g->trace) {
    int old = -1;
    hipGetDevice(&old);
    hipSetDevice(iris_device(g->ctx));
    hipDeviceSynchronize();
    if (g->staged) hipFree(g->staged);
    if (g->trace) hipFree(g->trace);
    if (old >= 0) hipSetDevice(old);
  }
#endif
  (void)q;
  (void)j;
  /* heap blocks: freed in reverse order on every rank (a local operation) */
  if (g->a_heap) iris_free(g->ctx, g->a_heap);
  if (g->flag_block) iris_free(g->ctx, g->flag_block);
  free(g);
  return IRIS_SUCCESS;
}
#endif /* IRIS_IMPLEMENTATION */
#endif /* device compiler */
#endif /* IRIS_GEMM_H */
