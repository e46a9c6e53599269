/* internal/coll/plan.h: the planning side of the collectives: the sizes of the
 * collective state, the tuning constants (the measurements behind them: docs/tuning.md), and the
 * arithmetic that decides who moves which bytes. Host and device, C and C++.
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_PLAN_H
#define IRIS_INTERNAL_COLL_PLAN_H

/* Kinds of collective. */
enum { IRIS_COLL_AR = 0, IRIS_COLL_AG, IRIS_COLL_RS, IRIS_COLL_A2A, IRIS_COLL_BC, IRIS_COLL_KINDS };

#ifndef IRIS_COLL_PUSH
#define IRIS_COLL_PUSH 1 /* 1: the all-gather and all-to-all bandwidth kernels and the all-reduce's second
                            phase store into peers; 0: they load from peers (slower: docs/tuning.md) */
#endif
/* All-reduce, bandwidth path: below this size the reduced chunk is pushed into the peers (2
 * barriers), from it on the peers pull it (3 barriers); measured: docs/tuning.md. */
#ifndef IRIS_COLL_AR_PUSH_MAX
#define IRIS_COLL_AR_PUSH_MAX ((size_t)4 << 20)
#endif
#ifndef IRIS_COLL_LL2_BYTES
#define IRIS_COLL_LL2_BYTES ((size_t)512 << 10)      /* two-shot LL: payload per chunk (the message / W) */
#endif
/* The store two-shot all-reduce (iris_coll_ar_store_kernel): its heap scratch (a round
 * moves at most W/2 x this), the size from which it replaces the load/store two-shot, and
 * its CTAs; measured: docs/tuning.md. */
#ifndef IRIS_COLL_AR_SCRATCH_BYTES
#define IRIS_COLL_AR_SCRATCH_BYTES ((size_t)32 << 20)
#endif
#ifndef IRIS_COLL_AR_STORE_MIN
#define IRIS_COLL_AR_STORE_MIN ((size_t)8 << 20)
#endif
#ifndef IRIS_COLL_AR_STORE_CTAS
#define IRIS_COLL_AR_STORE_CTAS 64
#endif
/* CTAs of the load/store two-shot all-reduce (below IRIS_COLL_AR_STORE_MIN): 64, as fast
 * as one per SM and leaving SMs to compute beside it; measured: docs/tuning.md. */
#ifndef IRIS_COLL_AR_CTAS
#define IRIS_COLL_AR_CTAS 64
#endif
#define IRIS_COLL_STAGING_BYTES ((size_t)64 << 20)   /* non-heap buffers: in and out, each */
/* Buffers off the heap whose kernel stores into the peers' recv (all-gather, all-to-all,
 * the direct broadcast, the store two-shot all-reduce): the peers store into this rank's
 * staging area instead and each CTA copies what arrived into recv while the next chunk
 * moves (iris_coll_staged_kernel, iris_coll_ar_store_kernel with a stage), in about
 * IRIS_COLL_STAGED_STEPS chunks per CTA of at least IRIS_COLL_STAGED_MIN_CHUNK bytes;
 * the send is read where it lies. An all-reduce takes the store two-shot this way from
 * IRIS_COLL_AR_STAGED_MIN (below it: copy in, the load/store two-shot, copy out), and a
 * reduce-scatter whose input is at least that large the store reduce-scatter, which
 * touches no peer's user buffer (below: copy in, the pull reduce-scatter). Below
 * IRIS_COLL_AR_STAGED_MIN an all-reduce keeps the copies around its kernel: the
 * two-shot copying in and out itself (after its start, each CTA the elements its
 * namesakes reduce, then a barrier of that CTA index) measured slower in graphs on 2
 * H200s (bf16, 1 / 2 MB: 11.9 / 15.8 us with the copies, 12.9 / 17.3 in the kernel; eager
 * 16.5 / 19.5 against 14.7 / 19.2): its extra barrier costs more than two copy nodes.
 * IRIS_COLL_FUSED_STAGING=0 in the environment: the separate copies for every kind. */
#ifndef IRIS_COLL_STAGED_STEPS
#define IRIS_COLL_STAGED_STEPS 4
#endif
#ifndef IRIS_COLL_STAGED_MIN_CHUNK
#define IRIS_COLL_STAGED_MIN_CHUNK ((size_t)16 << 10)
#endif
#ifndef IRIS_COLL_AR_STAGED_MIN
#define IRIS_COLL_AR_STAGED_MIN ((size_t)2 << 20)
#endif
/* At 2 ranks the all-reduce's copies win up to 4 MB: on 2 H200s, bf16, graph / eager us,
 * copies against staged: 2 MB 15.7 / 19.3 against 19.3 / 21.3, 4 MB 25.3 / 29.1 against
 * 25.0 / 27.0, 8 MB 42.5 against 38.6 (docs/tuning.md). */
#ifndef IRIS_COLL_AR_STAGED_MIN_W2
#define IRIS_COLL_AR_STAGED_MIN_W2 ((size_t)4 << 20)
#endif
/* The smallest staging area (IRIS_COLL_STAGING is rounded up to it): 16 elements of 8
 * bytes for each of IRIS_MAX_RANKS ranks, so every staged launch moves whole 16-element
 * steps and a chunked (world_size x step) input always fits. */
#define IRIS_COLL_STAGING_MIN ((size_t)16 * 8 * IRIS_MAX_RANKS)

/* Relay broadcast tuning (global: every rank must use the same values; see
 * iris_coll_relay_kernel). The pipeline fills and drains over about one step, which
 * costs about 1/IRIS_COLL_RELAY_STEPS of the time; each step costs a flag handshake (a
 * release and an acquire across GPUs, a few us, hidden by the other CTAs while the links
 * stay busy). So chunks are sized for about IRIS_COLL_RELAY_STEPS steps per CTA: 1 GB at
 * 4 ranks over 132 CTAs gives 165 KB chunks. The minimum, 16 KB (two 16-byte loads per
 * thread of a 512-thread CTA), keeps the handshake from dominating mid-size messages,
 * which then use fewer steps or fewer CTAs; the maximum bounds the pipeline's
 * granularity when few CTAs are forced. */
#ifndef IRIS_COLL_RELAY_STEPS
#define IRIS_COLL_RELAY_STEPS 16
#endif
#ifndef IRIS_COLL_RELAY_MIN_CHUNK
#define IRIS_COLL_RELAY_MIN_CHUNK ((size_t)16 << 10)
#endif
#ifndef IRIS_COLL_RELAY_MAX_CHUNK
#define IRIS_COLL_RELAY_MAX_CHUNK ((size_t)1 << 20)
#endif
#define IRIS_COLL_RELAY_ABANDON 0xffffffffu /* a count no real progress reaches */
/* Chain broadcast (iris_coll_chain_kernel): chunks per CTA (its pipeline fills over W-1
 * chunks, so more and smaller chunks than the relay's). */
#ifndef IRIS_COLL_CHAIN_STEPS
#define IRIS_COLL_CHAIN_STEPS 64
#endif

/* The kernel family one launch runs: what IRIS_ALGO_AUTO, or the algorithm a caller
 * forces, resolves to for this call. The value enters the call's signature. */
typedef enum iris_coll_path {
  IRIS_COLL_PATH_BW = 0, /* bandwidth: many CTAs between barriers (IRIS_ALGO_BANDWIDTH) */
  IRIS_COLL_PATH_LL = 1, /* the one-hop LL kernel (IRIS_ALGO_LATENCY) */
  IRIS_COLL_PATH_LL2 = 2, /* two hops in LL form: all-reduce, broadcast at 3+ ranks (IRIS_ALGO_TWO_SHOT_LL) */
  IRIS_COLL_PATH_ARM = 3, /* the armed one-shot: fp32/fp16/bf16 sums and averages (IRIS_ALGO_LATENCY) */
  IRIS_COLL_PATH_STAGED = 4 /* bandwidth, recv off the heap: the peers store into the staging area, copied out in the kernel */
} iris_coll_path_t;

/* Whether the unit with IRIS_IMPLEMENTATION compiles the kernels of reductions of type t
 * with op (IRIS_COLL_TYPES, IRIS_COLL_OPS in iris_collectives.h); t and op valid. */
static inline int iris_coll_compiled_in(iris_dtype_t t, iris_redop_t op) {
  return (int)((((unsigned)(IRIS_COLL_TYPES) >> (unsigned)t) & ((unsigned)(IRIS_COLL_OPS) >> (unsigned)op)) & 1u);
}

/* ---- Barrier and progress words (internal/coll/protocol.h): whether a word that a peer's
 * CTA publishes has reached `target`, i.e. holds it or a value at most
 * IRIS_COLL_SYNC_AHEAD barriers past it. A peer is never further ahead (no rank starts a
 * call's barriers before every rank has ended the call before), so anything further is a
 * value left long ago: a row that no call with that many CTAs has written for 2^28
 * calls or more, or a row never written once the call numbers pass 2^28 (barrier epochs
 * are call x 8 + j on 32 bits). The half-range test (iris_epoch_reached) takes such a
 * value for reached about half of the time; this one only when its age lies within 8
 * calls of a multiple of 2^29. Progress words are (epoch << 32) | steps. */
#ifndef IRIS_COLL_SYNC_AHEAD /* tests only: 0x80000000u gives the half-range test back */
#define IRIS_COLL_SYNC_AHEAD 64u
#endif
/* Barriers per call at most (a kernel's barrier j of call c has epoch c * this + j + 1). */
#define IRIS_COLL_SYNCS_PER_CALL 8u
static inline IRIS_HOST_DEVICE int iris_coll_sync_reached(unsigned got, unsigned target) { return got - target < IRIS_COLL_SYNC_AHEAD; }
static inline IRIS_HOST_DEVICE int iris_coll_progress_reached(unsigned long long got, unsigned long long target) {
  return got - target < ((unsigned long long)IRIS_COLL_SYNC_AHEAD << 32);
}

/* ---- Planning arithmetic: who moves which bytes, as pure functions of the call and
 * the world size W. Host and device, C and C++ (every rank computes the same from the
 * same call; tests/host/world_size.c checks them for W from 2 to 16). Internal. */

/* Two-shot all-reduce: rank r reduces elements [*lo, *hi) of every rank's send, then
 * every rank pulls each such chunk from its owner. Chunks are ceil(count / W) rounded up
 * to whole vectors of `per` elements (16 bytes), so every chunk starts 16-byte aligned;
 * the last ranks' chunks may be short or empty (*lo == *hi). */
static inline IRIS_HOST_DEVICE size_t iris_coll_ar_chunk(size_t count, int W, size_t per) { return ((count + (size_t)W - 1) / (size_t)W + per - 1) / per * per; }
static inline IRIS_HOST_DEVICE void iris_coll_ar_range(size_t count, int W, size_t per, int r, size_t *lo, size_t *hi) {
  const size_t chunk = iris_coll_ar_chunk(count, W, per);
  *lo = (size_t)r * chunk;
  *hi = *lo + chunk < count ? *lo + chunk : count;
  if (*lo > *hi) *lo = *hi;
}
/* The peer rank `me` pulls its k-th (1 <= k < W) reduced chunk from, in CTA b: every
 * peer once, CTAs starting at different peers so that every link is busy at once. */
static inline IRIS_HOST_DEVICE int iris_coll_ar_peer(int me, int k, int b, int W) { return (me + 1 + (k - 1 + b) % (W - 1)) % W; }
/* Store two-shot all-reduce: elements of one (CTA, source) slot of the scratch area
 * (whole 16-byte vectors; at least one), and the rounds that cover a chunk with `ctas`
 * CTAs. The same on every rank for the same call. */
static inline IRIS_HOST_DEVICE size_t iris_coll_ar_slice(size_t es, int W, int ctas, size_t count) {
  const size_t per = 16 / es, G = (size_t)(ctas > 0 ? ctas : 1);
  size_t slice = IRIS_COLL_AR_SCRATCH_BYTES / (2 * G * (size_t)(W > 0 ? W : 1) * es);
  /* a chunk that fits one round is spread over every CTA (slices sized by the scratch
   * alone left half the CTAs of an 8 MB call without work) */
  const size_t even = (iris_coll_ar_chunk(count, W > 0 ? W : 1, per) + G - 1) / G;
  if (even < slice) slice = even;
  slice = (slice + per - 1) / per * per;
  if (slice * G * (size_t)(W > 0 ? W : 1) * es * 2 > IRIS_COLL_AR_SCRATCH_BYTES) slice -= per; /* rounding up stays inside the scratch */
  return slice ? slice : per;
}
static inline IRIS_HOST_DEVICE size_t iris_coll_ar_rounds(size_t count, int W, size_t per, int ctas, size_t slice) {
  const size_t per_round = (size_t)(ctas > 0 ? ctas : 1) * slice;
  return (iris_coll_ar_chunk(count, W, per) + per_round - 1) / per_round;
}

/* Bandwidth kernels: CTAs per rank. Forced (ctas > 0) or about one per 32 KB that a
 * rank moves to its peers, at most one per SM; never above IRIS_COLL_MAX_CTAS. */
static inline IRIS_HOST_DEVICE int iris_coll_auto_ctas(int all_reduce, size_t bytes, int W, int sms, int ctas) {
  int blocks = ctas;
  if (blocks <= 0) {
    /* all-reduce: IRIS_COLL_AR_CTAS (the store two-shot: IRIS_COLL_AR_STORE_CTAS).
     * Other kinds: 32 KB per peer and CTA. */
    const size_t moved = all_reduce ? bytes / (size_t)W : bytes; /* per rank, per peer */
    size_t want = all_reduce ? (size_t)IRIS_COLL_AR_CTAS : moved * (size_t)(W > 1 ? W - 1 : 1) / (512 * 16 * 4) + 1;
    if (all_reduce && IRIS_COLL_PUSH && bytes >= IRIS_COLL_AR_STORE_MIN) want = IRIS_COLL_AR_STORE_CTAS; /* the store two-shot */
    blocks = want > (size_t)(sms > 0 ? sms : 1) ? (sms > 0 ? sms : 1) : (int)want;
  }
  return blocks > IRIS_COLL_MAX_CTAS ? IRIS_COLL_MAX_CTAS : blocks;
}

/* At 2 ranks the copy kernels (all-gather, all-to-all, broadcast) on the bandwidth path
 * run at most IRIS_COLL_COPY_CTAS_W2 CTAs up to IRIS_COLL_COPY_CAPPED_MAX_W2 bytes per
 * peer: alone as fast as with the automatic grid (2 H200s, us, automatic / 16 CTAs:
 * all-gather 4 MB 17.2 / 17.1, 16 MB 56.8 / 56.5; all-to-all 4 MB 11.3 / 11.2; broadcast
 * 4 MB 17.1 / 16.9), and beside a GEMM they slow it less (4 MB: all-gather 1.35-1.43x ->
 * 1.11-1.14x, all-to-all 1.22-1.24x -> 1.10-1.14x, broadcast 1.26-1.29x -> 1.08-1.16x).
 * From 64 MB the cap costs 3-5% alone, so larger calls keep the automatic grid;
 * docs/tuning.md. The reductions need their CTAs (reduce-scatter 4 MB: 12.5 -> 23.7 us). */
#ifndef IRIS_COLL_COPY_CTAS_W2
#define IRIS_COLL_COPY_CTAS_W2 16
#endif
#ifndef IRIS_COLL_COPY_CAPPED_MAX_W2
#define IRIS_COLL_COPY_CAPPED_MAX_W2 ((size_t)8 << 20)
#endif
/* The bandwidth path's grid for a call of `kind` (IRIS_COLL_AR ... IRIS_COLL_BC) moving
 * `bytes` per peer (the all-reduce: its whole message): iris_coll_auto_ctas, with the
 * copy kernels' cap at 2 ranks. A forced count (ctas > 0) is kept. */
static inline IRIS_HOST_DEVICE int iris_coll_bw_ctas(int kind, size_t bytes, int W, int sms, int ctas) {
  const int blocks = iris_coll_auto_ctas(kind == IRIS_COLL_AR, bytes, W, sms, ctas);
  const int copy = kind == IRIS_COLL_AG || kind == IRIS_COLL_A2A || kind == IRIS_COLL_BC;
  return ctas <= 0 && copy && W == 2 && bytes <= IRIS_COLL_COPY_CAPPED_MAX_W2 && blocks > IRIS_COLL_COPY_CTAS_W2 ? IRIS_COLL_COPY_CTAS_W2 : blocks;
}

/* The staged copy kernel's chunk for a block of `bytes` over G CTAs: about
 * IRIS_COLL_STAGED_STEPS chunks per CTA, whole 16-byte vectors, at least
 * IRIS_COLL_STAGED_MIN_CHUNK. The same on every rank for the same call. */
static inline IRIS_HOST_DEVICE size_t iris_coll_staged_chunk(size_t bytes, int G) {
  size_t c = (bytes + (size_t)(G > 0 ? G : 1) * IRIS_COLL_STAGED_STEPS - 1) / ((size_t)(G > 0 ? G : 1) * IRIS_COLL_STAGED_STEPS);
  c = (c + 15) / 16 * 16;
  return c < IRIS_COLL_STAGED_MIN_CHUNK ? IRIS_COLL_STAGED_MIN_CHUNK : c;
}

/* Staging area bytes for a requested size (0: staging off). */
static inline IRIS_HOST_DEVICE size_t iris_coll_staging_bytes(size_t requested) {
  return requested && requested < IRIS_COLL_STAGING_MIN ? IRIS_COLL_STAGING_MIN : requested;
}
/* Elements per staged launch: a chunked buffer (W blocks per rank) of step elements of
 * es bytes, or a plain one, fits the staging area; a multiple of 16 elements. */
static inline IRIS_HOST_DEVICE size_t iris_coll_staging_step(size_t stage_bytes, size_t es, int W, int chunked) {
  size_t step = stage_bytes / (es * (size_t)(chunked ? W : 1));
  step -= step % 16; /* keep chunks 16-byte aligned */
  return step ? step : 1; /* only below IRIS_COLL_STAGING_MIN */
}

/* Relay broadcast (W >= 3): the message is cut into W-1 parts, part p = [p*part,
 * (p+1)*part) clipped to the message, owned by non-root rank (root + 1 + p) % W; every
 * part is cut into `chunks` chunks of `chunk` bytes (trailing ones may be short or
 * empty); chunk j of every part belongs to CTA j % G as its step j / G. */
typedef struct iris_coll_relay {
  size_t part;   /* bytes per part, a multiple of 16 */
  size_t chunk;  /* bytes per chunk, a multiple of 16 */
  size_t chunks; /* chunks per part (every part has as many; trailing ones may be empty) */
} iris_coll_relay_t;

/* The plan for a message of `bytes` over W >= 3 ranks and `ctas` CTAs (chunk 0: chosen
 * here; the host sizes the grid by it and passes the chunk size to the kernel, which
 * recomputes the same plan from it). */
static inline IRIS_HOST_DEVICE iris_coll_relay_t iris_coll_relay_plan(size_t bytes, int W, int ctas, size_t chunk) {
  iris_coll_relay_t r;
  r.part = ((bytes + (size_t)W - 2) / (size_t)(W - 1) + 15) / 16 * 16;
  if (!chunk) { /* about IRIS_COLL_RELAY_STEPS chunks per CTA, within the limits */
    const size_t n = (size_t)(ctas > 0 ? ctas : 1) * IRIS_COLL_RELAY_STEPS;
    chunk = ((r.part + n - 1) / n + 15) / 16 * 16;
    if (chunk < IRIS_COLL_RELAY_MIN_CHUNK) chunk = IRIS_COLL_RELAY_MIN_CHUNK;
    if (chunk > IRIS_COLL_RELAY_MAX_CHUNK) chunk = IRIS_COLL_RELAY_MAX_CHUNK;
  }
  r.chunk = chunk;
  r.chunks = (r.part + chunk - 1) / chunk;
  if (!r.chunks) r.chunks = 1;
  return r;
}
/* Bytes [*lo, *hi) of chunk j of part p, clipped to the message (empty past its end). */
static inline IRIS_HOST_DEVICE void iris_coll_relay_range(const iris_coll_relay_t *r, size_t bytes, int p, size_t j, size_t *lo, size_t *hi) {
  size_t end = (size_t)(p + 1) * r->part;
  if (end > bytes) end = bytes;
  *lo = (size_t)p * r->part + j * r->chunk;
  *hi = *lo + r->chunk < end ? *lo + r->chunk : end;
  if (*lo > *hi) *lo = *hi;
}
/* The part non-root `rank` owns, and the owner of part p. */
static inline IRIS_HOST_DEVICE int iris_coll_relay_part(int rank, int root, int W) { return (rank - root - 1 + W) % W; }
static inline IRIS_HOST_DEVICE int iris_coll_relay_owner(int p, int root, int W) { return (root + 1 + p) % W; }
/* The k-th (0 <= k < W-2) other part that CTA b of part `mine`'s owner pulls from its
 * owner: every other part once, CTAs starting at different owners. */
static inline IRIS_HOST_DEVICE int iris_coll_relay_peer_part(int mine, int k, int b, int W) { return (mine + 1 + (k + b) % (W - 2)) % (W - 1); }
/* CTAs of the relay kernel: no more than chunks per part (a CTA without a chunk would
 * only add barrier traffic). */
static inline IRIS_HOST_DEVICE int iris_coll_relay_ctas(const iris_coll_relay_t *r, int blocks) { return (size_t)blocks > r->chunks ? (int)r->chunks : blocks; }
/* Chain broadcast (W >= 3, large messages): bytes per chunk for `ctas` CTAs, about
 * IRIS_COLL_CHAIN_STEPS chunks per CTA within the relay's chunk limits (a multiple of 16
 * bytes); the kernel takes it from the host. */
static inline IRIS_HOST_DEVICE size_t iris_coll_chain_chunk(size_t bytes, int ctas) {
  const size_t n = (size_t)(ctas > 0 ? ctas : 1) * IRIS_COLL_CHAIN_STEPS;
  size_t chunk = ((bytes + n - 1) / n + 15) / 16 * 16;
  if (chunk < IRIS_COLL_RELAY_MIN_CHUNK) chunk = IRIS_COLL_RELAY_MIN_CHUNK;
  if (chunk > IRIS_COLL_RELAY_MAX_CHUNK) chunk = IRIS_COLL_RELAY_MAX_CHUNK;
  return chunk;
}
static inline IRIS_HOST_DEVICE size_t iris_coll_chain_chunks(size_t bytes, size_t chunk) { return chunk ? (bytes + chunk - 1) / chunk : 0; }

/* Automatic choice (bytes each rank sends to one peer): the latency kernel up to these
 * sizes, the bandwidth one above; at 2 ranks the one-shot runs further (it stores no more
 * bytes than the two-shot LL and saves a hop): the _W2 limits below; docs/tuning.md. */
#ifndef IRIS_COLL_LL_MAX_AR
#define IRIS_COLL_LL_MAX_AR ((size_t)128 << 10)
#endif
/* A caller's CTA cap (opts.ctas) with IRIS_ALGO_AUTO: the one-shot latency kernel only
 * while each thread moves at most this many lines in sequence, else the bandwidth kernel
 * with the same cap. On 2 H200s each further line a thread moves costs about 1.1 us (a
 * 1 MB reduce-scatter at 32 CTAs: 18.9 us one-shot against 8.5 on the bandwidth kernel;
 * a 256 KB one at 32 CTAs, 4 lines a thread: 5.8 against 6.5); docs/tuning.md. */
#ifndef IRIS_COLL_LL_CAPPED_LINES
#define IRIS_COLL_LL_CAPPED_LINES 4
#endif
/* Threads per CTA of the bandwidth kernels (launch.h), also told to hipcc where a kernel
 * declares its bound (IRIS_DEVICE_HIP_BOUNDS): one constant, so the two cannot differ. */
#define IRIS_COLL_BW_THREADS 512
/* Threads per CTA of the latency kernel (one 16-byte line each per pass; at least 64, a
 * thread per rank): fewer threads spread a message over more SMs; measured: docs/tuning.md. */
#ifndef IRIS_COLL_LL_THREADS
#define IRIS_COLL_LL_THREADS 128
#endif
#ifdef __cplusplus
static_assert(IRIS_COLL_LL_THREADS >= 64 && IRIS_COLL_LL_THREADS <= 1024 && IRIS_COLL_LL_THREADS % 64 == 0, "IRIS_COLL_LL_THREADS: 64..1024, whole warps of 64");
#endif
/* Under a CTA cap (ctas > 0), whether the one-shot's threads move at most
 * IRIS_COLL_LL_CAPPED_LINES lines each for `bytes` per peer (always, uncapped). */
static inline IRIS_HOST_DEVICE int iris_coll_ll_within_cap(size_t bytes, int ctas) {
  return ctas <= 0 || (bytes + 7) / 8 <= (size_t)ctas * IRIS_COLL_LL_THREADS * IRIS_COLL_LL_CAPPED_LINES;
}
/* The armed one-shot (iris_coll_arm_kernel): payload per peer that its slots hold (they
 * take 2 x W x this per rank), and threads per CTA (one 16-byte vector each per pass). */
#ifndef IRIS_COLL_ARM_BYTES
#define IRIS_COLL_ARM_BYTES ((size_t)256 << 10)
#endif
#ifndef IRIS_COLL_ARM_THREADS
#define IRIS_COLL_ARM_THREADS 128
#endif
#ifdef __cplusplus
static_assert(IRIS_COLL_ARM_BYTES % 16 == 0 && IRIS_COLL_ARM_BYTES <= IRIS_COLL_LL_BYTES, "IRIS_COLL_ARM_BYTES: whole vectors, at most the LL path's payload");
static_assert(IRIS_COLL_ARM_THREADS >= 64 && IRIS_COLL_ARM_THREADS <= 1024 && IRIS_COLL_ARM_THREADS % 64 == 0, "IRIS_COLL_ARM_THREADS: 64..1024, whole warps of 64");
#endif
/* The one-shot LL slots' payload per peer: at 2 ranks (per node) IRIS_COLL_LL_BYTES_W2,
 * else IRIS_COLL_LL_BYTES (the slots take 2 parities x W x 2 x this per rank: 8 MiB at 2
 * ranks). A team's slots hold IRIS_COLL_LL_BYTES, but a team of 2 in a node of 4 or more
 * ranks has this too (its area is sized for the node's ranks). */
static inline IRIS_HOST_DEVICE size_t iris_coll_ll_payload(int W) { return W == 2 ? IRIS_COLL_LL_BYTES_W2 : IRIS_COLL_LL_BYTES; }
/* At 2 ranks a call whose bandwidth path would stage a buffer off the heap (or every
 * buffer: IRIS_COLL_STAGE) takes the one-shot to its slots' 1 MB per peer. On 2 H200s
 * (bf16, graph / eager us, one-shot against the staged bandwidth path, NCCL in graphs):
 * all-reduce 1 MB 9.9 / 10.5 against 11.9 / 19.3 (13.8), all-gather 1 MB per rank 9.8 /
 * 10.4 against 13.1 / 15.0 (16.2), reduce-scatter and all-to-all 1 MB per peer 10.4 /
 * 11.0 and 10.0 / 10.7 against 13.5 / 15.4 and 13.7 / 15.5 (14.5, 14.7), broadcast 1 MB
 * 8.1 / 8.7 against 11.9 / 13.7 (11.3). With both buffers on the heap the limits stay
 * (the one-shot's grid of a thread per line slows a GEMM beside it more; the all-reduce
 * at 1 MB: 9.9 against the bandwidth kernel's 9.5); docs/tuning.md. */
#ifndef IRIS_COLL_LL_MAX_STAGED_W2
#define IRIS_COLL_LL_MAX_STAGED_W2 IRIS_COLL_LL_BYTES_W2
#endif
#ifndef IRIS_COLL_LL_MAX_AR_W2
#define IRIS_COLL_LL_MAX_AR_W2 IRIS_COLL_LL_BYTES
#endif
#ifndef IRIS_COLL_LL2_MAX_AR
#define IRIS_COLL_LL2_MAX_AR ((size_t)512 << 10)
#endif
#ifndef IRIS_COLL_LL_MAX_OTHER
#define IRIS_COLL_LL_MAX_OTHER IRIS_COLL_LL_BYTES
#endif
/* All-to-all at 2 ranks with both buffers on the heap: the one-shot up to 256 KB per
 * peer, the bandwidth kernel (16 CTAs) above: at 512 KB per peer on 2 H200s 6.8 us
 * against the one-shot's 6.6, and beside a GEMM it slows the GEMM 1.10-1.14x where the
 * one-shot's grid (a thread per line: every SM) slows it 1.33-1.41x (NCCL 1.08-1.12).
 * Off the heap the bandwidth path is the staged kernel: the one-shot runs to its slots'
 * 1 MB (IRIS_COLL_LL_MAX_STAGED_W2). */
#ifndef IRIS_COLL_LL_MAX_A2A_HEAP_W2
#define IRIS_COLL_LL_MAX_A2A_HEAP_W2 ((size_t)256 << 10)
#endif
/* All-gather: the latency kernel up to 256 KB per rank; at 2 ranks with recv off the heap
 * (the bandwidth path would be the staged kernel) up to its slots' 1 MB
 * (IRIS_COLL_LL_MAX_STAGED_W2): on 2 H200s at 512 KB 6.3 us against the staged kernel's
 * 12.1 (NCCL 10.5), at 1 MB 9.8 against 13.1 (NCCL 16.2); on the heap the bandwidth
 * kernel stays (7.0, and beside a GEMM it slows it 1.15x where the one-shot's grid of a
 * thread per line slows it 1.34x); measured: docs/tuning.md. */
#ifndef IRIS_COLL_LL_MAX_AG
#define IRIS_COLL_LL_MAX_AG ((size_t)256 << 10)
#endif
/* Broadcast: the latency kernel up to 128 KB, then at 3+ ranks the two-hop LL up to
 * IRIS_COLL_LL2_MAX_BC while a part fits IRIS_COLL_LL2_BYTES, then the bandwidth path (a
 * single pull at 2 ranks, the relay at 3 or more); measured: docs/tuning.md. */
#ifndef IRIS_COLL_LL_MAX_BC
#define IRIS_COLL_LL_MAX_BC ((size_t)128 << 10)
#endif
#ifndef IRIS_COLL_LL2_MAX_BC
#define IRIS_COLL_LL2_MAX_BC ((size_t)3 << 20)
#endif
/* At 2 ranks the one-hop LL broadcast runs to 512 KB on the heap, to the slots' 1 MB off
 * it (IRIS_COLL_LL_MAX_STAGED_W2); measured: docs/tuning.md. */
#ifndef IRIS_COLL_LL_MAX_BC_W2
#define IRIS_COLL_LL_MAX_BC_W2 IRIS_COLL_LL_BYTES
#endif
/* Broadcast on the bandwidth path: the direct pull below this size, the relay from it
 * (W >= 3); measured: docs/tuning.md. */
#ifndef IRIS_COLL_RELAY_MIN_BYTES
#define IRIS_COLL_RELAY_MIN_BYTES ((size_t)2 << 20)
#endif
/* Broadcast at 3+ ranks: the chain from this size on (below it the chain's chunks are too
 * small for their handshake); measured: docs/tuning.md. */
#ifndef IRIS_COLL_CHAIN_MIN_BYTES
#define IRIS_COLL_CHAIN_MIN_BYTES ((size_t)512 << 20)
#endif
/* Multi-node worlds: the all-reduce's one-shot composition (node all-reduce, rail 0,
 * node broadcast) up to this many bytes, the reduce-scatter composition above; the
 * heap scratch of the rail steps (reduce-scatter pieces). Not measured yet. */
#ifndef IRIS_COLL_MN_ONESHOT_MAX
#define IRIS_COLL_MN_ONESHOT_MAX ((size_t)256 << 10)
#endif
#ifndef IRIS_COLL_MN_SCRATCH_BYTES
#define IRIS_COLL_MN_SCRATCH_BYTES ((size_t)32 << 20)
#endif

/* The staging area's copy out (iris_coll_copy_out_kernel): at most this many CTAs per SM
 * (a 16-byte vector per thread below that); 8 and 16 were no faster on one H200, and
 * slower at 8 MB (every CTA reads the headers first): docs/tuning.md. */
#ifndef IRIS_COLL_COPY_OUT_WAVES
#define IRIS_COLL_COPY_OUT_WAVES 2
#endif

/* Whether a bandwidth-path call whose buffers are not both on the heap runs a staged
 * kernel (IRIS_COLL_PATH_STAGED) rather than the copies in and out around the kernel:
 * bytes = count x the type's size, in_bytes = the send's bytes (W x that for a
 * reduce-scatter), heap_out = recv lies on the heap, fused = IRIS_COLL_FUSED_STAGING.
 * Values every rank has alike, except heap_out, which the call's signature compares. */
static inline IRIS_HOST_DEVICE int iris_coll_takes_staged(int kind, int W, size_t bytes, size_t in_bytes, int heap_out, int fused) {
  if (!fused) return 0;
  if (kind == IRIS_COLL_RS) return in_bytes >= IRIS_COLL_AR_STAGED_MIN; /* the store reduce-scatter: no staging area at all */
  if (heap_out) return 0; /* recv on the heap: the peers store into it, nothing to copy out */
  return kind == IRIS_COLL_AG || kind == IRIS_COLL_A2A || (kind == IRIS_COLL_BC && (W == 2 || bytes < IRIS_COLL_RELAY_MIN_BYTES)) ||
         (kind == IRIS_COLL_AR && bytes >= (W == 2 ? IRIS_COLL_AR_STAGED_MIN_W2 : IRIS_COLL_AR_STAGED_MIN));
}

/* ---- The last steps of a call's signature (iris_coll_launch_strided, internal/coll/launch.h).
 * A user call that the host splits into several launches (off-heap buffers through the
 * staging area, a chunk of `step` elements per launch) is one call to the user but several
 * to the GPUs, each matched on its own. So each of its launches also hashes the user
 * call's total count, the launch's index and the number of launches: ranks whose calls
 * differ (count, placement, staging settings) mismatch in launch 0 already, before any
 * chunk reaches a user buffer. And bit 1 of the 32-bit signature as the headers carry it
 * (iris_coll_sig32: bit 0 is always set) says "a launch of a split call": a mismatch in
 * which either side has it leaves the ranks' call numbers out of step (they enqueue
 * different numbers of launches), so the kernels record it as fatal
 * (IRIS_FAULT_MISMATCH_FATAL). Every signature a kernel announces passes through
 * iris_coll_sig_mark, so the bit is clear for every single launch. */
#define IRIS_COLL_SIG_SPLIT 2u
/* One FNV-1a step of the signature. */
static inline unsigned long long iris_coll_sig_mix(unsigned long long sig, unsigned long long v) { return (sig ^ v) * 1099511628211ULL; }
/* The 32 bits a kernel announces for sig, never 0 (bit 0 set): host and device (the
 * kernels' iris_coll_sig32 is this). */
static inline IRIS_HOST_DEVICE unsigned iris_coll_sig_fold(unsigned long long sig) { return ((unsigned)sig ^ (unsigned)(sig >> 32)) | 1u; }
/* sig with the split bit of its 32-bit form set (split) or clear (not): bit 1 of the low
 * word flipped where needed. */
static inline unsigned long long iris_coll_sig_mark(unsigned long long sig, int split) {
  return ((iris_coll_sig_fold(sig) & IRIS_COLL_SIG_SPLIT) != 0) == (split != 0) ? sig : sig ^ (unsigned long long)IRIS_COLL_SIG_SPLIT;
}
/* Launch k of n of a user call of `total` elements: n <= 1 (a call in one launch) leaves
 * the signature's inputs as they are; n > 1 adds total, k and n. Then the split bit. */
static inline unsigned long long iris_coll_sig_part(unsigned long long sig, size_t total, size_t k, size_t n) {
  if (n > 1) sig = iris_coll_sig_mix(iris_coll_sig_mix(iris_coll_sig_mix(sig, (unsigned long long)total), (unsigned long long)k), (unsigned long long)n);
  return iris_coll_sig_mark(sig, n > 1);
}
/* Whether a 32-bit signature (as announced) is a launch of a split call. */
static inline IRIS_HOST_DEVICE int iris_coll_sig_is_split(unsigned sig32) { return (sig32 & IRIS_COLL_SIG_SPLIT) != 0; }

#endif /* IRIS_INTERNAL_COLL_PLAN_H */
