/* iris_collectives.h — collectives over the symmetric heap (C host API, C++ kernels)
 *
 * What it is
 *   All-reduce, all-gather, reduce-scatter, all-to-all, broadcast and a barrier, with
 *   NCCL's semantics so they can be swapped in, enqueued on a stream, capturable in
 *   CUDA/HIP graphs. Two kinds of algorithm:
 *     latency   (IRIS_ALGO_LATENCY): one kernel, no barrier. Each rank pushes its data
 *               into every peer's receive area in "LL" form: every 8 bytes carry 4 data
 *               bytes and a 4-byte epoch, stored by one instruction, so a reader that
 *               sees the epoch sees the data. For all-reduce this is the one-shot. On
 *               NVIDIA sm_90 these kernels launch with programmatic dependent launch
 *               (PDL): a call's launch, and the atomic that numbers it, overlap the end
 *               of the kernel before it on the stream. IRIS_ALGO_ONE_SHOT_ARMED (opt-in:
 *               slower than the LL lines on 2 H200s, docs/tuning.md) sends sums and averages of fp32, fp16 and bf16
 *               through "armed" slots instead: they hold all-ones bits (a NaN in every
 *               float type) until the data land, 16 data bytes a store, and the reader
 *               re-arms them (an input element with all-ones bits arrives as its type's
 *               canonical NaN: still a NaN).
 *     bandwidth (IRIS_ALGO_BANDWIDTH): many CTAs, 16-byte accesses, per-CTA barriers
 *               with release/acquire epochs. All-gather and all-to-all store each
 *               rank's blocks into the peers (IRIS_COLL_PUSH; stores were measured
 *               faster than loads: 348 against 320 GB/s busbw at 256 MB). For
 *               all-reduce this is the two-shot: up to IRIS_COLL_AR_STORE_MIN each
 *               rank loads its chunk from every peer, reduces it and stores the result
 *               into every rank's recv; from there on the store two-shot, where both
 *               phases store (each rank stores its piece of chunk j into a scratch
 *               slot of rank j, in rounds). For broadcast at 3+ ranks it is a
 *               pipelined relay: the root stores one (W-1)-th of the message into
 *               each non-root in chunks, and each non-root stores every chunk it got
 *               into the other non-roots as soon as it lands; for large messages a
 *               pipelined chain (root -> root+1 -> ... -> root-1, chunk by chunk).
 *     two-shot LL (IRIS_ALGO_TWO_SHOT_LL, all-reduce; broadcast at 3+ ranks): two hops
 *               in LL form, one kernel, no barrier. All-reduce: rank j receives chunk
 *               j from every rank, reduces it as the lines arrive and pushes the result
 *               to every rank (half the bytes per rank of the one-shot). Broadcast: the
 *               root pushes one (W-1)-th of the message to each non-root, which
 *               forwards it to the others as it lands (the root sends each byte once).
 *   IRIS_ALGO_AUTO picks by message size (thresholds below, measured on 4xH100 and 4xH200).
 *
 * Quick start
 *     #define IRIS_IMPLEMENTATION
 *     #include "iris_collectives.h"          // also includes iris.h and iris_device.h
 *     iris_all_reduce(ctx, x, x, n, IRIS_BFLOAT16, IRIS_SUM, stream);  // in place
 *   Build with nvcc -arch=sm_90 or hipcc; a C unit may include this header for the
 *   declarations and call the functions defined in a GPU-compiled unit.
 *
 * Rules
 *   - Collective: every rank calls the same collective with the same count, type, op
 *     (and root), in the same order, on its own stream, with heap buffers at the same
 *     offsets (as symmetric allocation gives). Counts may be anything >= 1, not only
 *     multiples of the world size or the vector width. In-place layouts as NCCL's:
 *     all-gather send = recv + rank*count, reduce-scatter recv = send + rank*count.
 *   - Buffers on the symmetric heap take the fast path. Other device buffers work
 *     through a staging area on the heap, in chunks of at most IRIS_COLL_STAGING_BYTES:
 *     peers store into this rank's staging area and the kernel copies each chunk into
 *     recv as it arrives (all-gather, all-to-all, direct broadcast, all-reduce from
 *     IRIS_COLL_AR_STAGED_MIN); only what peers must load or store elsewhere is copied
 *     in or out on the stream (docs/collectives.md, "Buffers").
 *   - In place (send == recv) works everywhere.
 *   - The result is bitwise identical on every rank: reductions run in rank order
 *     0..W-1 in float (half, bfloat16 and fp8 types), double-free integer arithmetic,
 *     or the type itself.
 *   - Types and ops (see "Element types and reductions" below): fp32, fp16, bf16,
 *     int32, int64, uint8, fp8 e4m3 and e5m2; SUM, MIN, MAX, AVG. The data-moving
 *     collectives (all-gather, all-to-all, broadcast) move any type as bytes. Half,
 *     bfloat16 and fp8 reductions accumulate in fp32 and round once at the end;
 *     AVG is the sum divided by the world size, then rounded once.
 *   - Graphs: no allocation, no host synchronisation and no reset happens inside a
 *     call once the collective state exists. It is created by iris_collectives_setup
 *     (collective, outside capture) or by the first collective call; capture a graph
 *     only after one of them. Epochs live in device memory and count up, so a graph
 *     replayed any number of times stays correct, mixed with eager calls.
 *   - Streams: a context's calls run one after another in the order the host issued
 *     them, whatever their streams (the library makes each wait for the previous one);
 *     inside one capture too. A graph must not run concurrently with other calls of
 *     the same context. To overlap two collectives, use two contexts.
 *   - Every call announces a header (call number + signature) to every peer, and no
 *     rank writes a user buffer before every peer's header matched: a rank that calls
 *     something else is seen by every rank, whatever the skew; nothing of that call
 *     reaches a user buffer and iris_collectives_check reports IRIS_ERROR_MISMATCH once.
 *     A call that the host splits into several launches (buffers off the heap, through
 *     the staging area a chunk per launch) is matched as one: each launch's signature
 *     also names the call's total count, its index and the number of launches, so ranks
 *     whose calls differ mismatch in the first launch and nothing reaches a user buffer.
 *     Where either rank's side of a mismatch is such a split call, the ranks have
 *     enqueued different numbers of launches and their call numbers are out of step:
 *     that mismatch is fatal (reported as IRIS_ERROR_MISMATCH on every rank, by every
 *     later call too, as a fatal fault below); finalize the context. A recv off the heap
 *     whose result is copied out of the staging area in a pass of its own is copied
 *     only where every peer matched the launch, so it too stays as it was. A count of 0
 *     moves nothing but takes part (one device barrier, of a signature of its own, on one
 *     node at 2 ranks or more): on every rank, the ranks meet; on some ranks only, the
 *     others' call is a mismatch as above instead of a wait. A call refused for its
 *     arguments (a NULL buffer, a root, type, op, option or size out of range: refused
 *     before any launch) still takes part on one node (setting up the collective state
 *     first where the call would have): where the others called it well, theirs is a
 *     mismatch as above (the refusing rank's check reports it too; with IRIS_COLL_CHECK=0
 *     the latency path still waits out its bound), and where every rank refused it alike,
 *     the ranks meet in it; either way the call numbers stay in step. A refused
 *     iris_all_reduce_rmsnorm takes part marked split (its peers may make several
 *     launches), so that mismatch is fatal. A team call refused with
 *     IRIS_ERROR_NOT_IN_HEAP takes part as well.
 *     The latency path checks the headers in the polls that wait for its data, at no
 *     extra round trip; IRIS_COLL_CHECK=0 in the environment turns that check off.
 *   - A rank that stops participating: every wait is bounded (IRIS_WAIT_TIMEOUT_MS at run
 *     time, else the unit's IRIS_WAIT_TIMEOUT_NS: 10 minutes by default, so a rank that
 *     arrives minutes late is no fault; set it lower to learn of a dead one sooner); the
 *     first that runs out records a fatal fault in the context, every other wait gives
 *     up at once, and every later call returns the error (iris_get_async_error names
 *     the wait, the rank and the call); iris_finalize then skips the final barrier.
 *     With IRIS_DEBUG the waiting kernel also reports and traps.
 *
 * Options
 *   Compile time, global (every unit of a program alike): the sizes and thresholds
 *   IRIS_COLL_* (docs/options.md; their defaults and the measurements behind them are in
 *   internal/coll/plan.h). Compile time, for the unit that defines IRIS_IMPLEMENTATION
 *   only: IRIS_COLL_TYPES and IRIS_COLL_OPS (below), which kernels it compiles.
 *   Environment, read at setup: IRIS_COLL_STAGING (bytes of each staging area, 0: none),
 *   IRIS_COLL_CHECK (0: the latency path skips matching the call headers; a mismatched
 *   call is then undefined, later calls included; alike on every rank, else the setup
 *   fails with IRIS_ERROR_MISMATCH), IRIS_COLL_PDL (0: the latency kernels
 *   launch without PDL), IRIS_COLL_PRELOAD (0: the setup does not load the unit's kernels;
 *   under lazy loading each first launch then waits for every kernel running on the GPU),
 *   IRIS_COLL_CTAS (n: every call that gives no opts.ctas runs as if it gave n, fewer SMs
 *   beside compute; alike on every rank, else the setup fails with IRIS_ERROR_MISMATCH).
 *
 * Compile time
 *   A unit with IRIS_IMPLEMENTATION compiles every collective kernel: about 85 s of one
 *   core (nvcc 13.0, sm_90, the 2-core x86 VM of CI; 21 s with fp32 and bf16 sums only;
 *   docs/collectives.md, "Compile time"). SUM and AVG
 *   of fp32, fp16 and bf16 have kernels of their own, specialised for 2, 4 and 8 ranks;
 *   the other reductions (integer and fp8 types, MIN and MAX) share one kernel per type
 *   with the op a run-time argument. To compile less, limit the reductions with
 *   IRIS_COLL_TYPES / IRIS_COLL_OPS, or link libiris.so (make lib) instead.
 */
#ifndef IRIS_COLLECTIVES_H
#define IRIS_COLLECTIVES_H
#include "iris.h"

/* Element types and reductions (values match nothing else; use the names; new ones are
 * appended, so the values stay).
 *   IRIS_UINT8          unsigned 8-bit integer. SUM wraps modulo 256 (as NCCL's ncclUint8).
 *   IRIS_FLOAT8_E4M3    OCP fp8 E4M3 (bit-compatible with CUDA's __nv_fp8_e4m3): 4 exponent
 *                       bits (bias 7), 3 mantissa bits, no infinities, largest finite
 *                       448, NaN = S.1111.111.
 *   IRIS_FLOAT8_E5M2    OCP fp8 E5M2 (as CUDA's __nv_fp8_e5m2): 5 exponent bits (bias
 *                       15), 2 mantissa bits, IEEE-like with infinities and NaNs,
 *                       largest finite 57344.
 *   fp8 reductions convert every input to fp32 exactly, accumulate in fp32 in rank order
 *   0..W-1 and round once to fp8, as iris_float_to_fp8_e4m3 / _e5m2 below do.
 *   IRIS_AVG            the sum divided by the world size W:
 *     fp32:             the fp32 sum (rank order) / W in fp32 (IEEE division);
 *     fp16, bf16, fp8:  the fp32 sum / W in fp32, then rounded once to the type;
 *     integers:         as NCCL's ncclAvg for integers (FuncSumPostDiv in NCCL's
 *                       src/device/reduce_kernel.h): the sum in the type itself
 *                       (wrapping), then divided by W in integer arithmetic, truncating
 *                       toward zero for the signed types (C's /).
 *                       (NCCL's ncclAvg on floating types multiplies each input by 1/W
 *                       before summing; iris divides the sum, which rounds once.)
 *   IRIS_MIN, IRIS_MAX  floating types, in rank order in fp32: a NaN gives way to the
 *                       other value (as NCCL's fminf / fmaxf), so only an element that is
 *                       NaN on every rank gives NaN; of +0 and -0 the lower rank's stays
 *                       (NCCL's sign of such a zero may differ); integers compare. */
typedef enum iris_dtype {
  IRIS_FLOAT32 = 0, IRIS_FLOAT16, IRIS_BFLOAT16, IRIS_INT32, IRIS_INT64, IRIS_UINT8, IRIS_FLOAT8_E4M3, IRIS_FLOAT8_E5M2, IRIS_DTYPE_COUNT
} iris_dtype_t;
typedef enum iris_redop { IRIS_SUM = 0, IRIS_MIN, IRIS_MAX, IRIS_AVG, IRIS_REDOP_COUNT } iris_redop_t;
/* IRIS_ALGO_ONE_SHOT_LL: the one-shot on LL lines (what IRIS_ALGO_LATENCY runs).
 * IRIS_ALGO_ONE_SHOT_ARMED: the one-shot on armed slots (all-reduce and reduce-scatter of
 * fp32, fp16, bf16 with SUM or AVG, up to IRIS_COLL_ARM_BYTES per peer; other calls are
 * refused with IRIS_ERROR_INVALID_ARGUMENT); see "What it is" above. */
typedef enum iris_algo {
  IRIS_ALGO_AUTO = 0, IRIS_ALGO_LATENCY, IRIS_ALGO_BANDWIDTH, IRIS_ALGO_TWO_SHOT_LL, IRIS_ALGO_ONE_SHOT_LL, IRIS_ALGO_ONE_SHOT_ARMED
} iris_algo_t;

/* Which reductions the unit that defines IRIS_IMPLEMENTATION compiles kernels for (in
 * other units they change nothing): bit (1 << t) of IRIS_COLL_TYPES for each
 * iris_dtype_t t, bit (1 << op) of IRIS_COLL_OPS for each iris_redop_t op; default: all.
 * An all-reduce or reduce-scatter of a type or op left out returns IRIS_ERROR_UNSUPPORTED
 * on every rank, before anything is launched or written. All-gather, all-to-all and
 * broadcast move every type whatever these say. For example, bf16 and fp32 sums only:
 *   -DIRIS_COLL_TYPES='(1 << IRIS_FLOAT32 | 1 << IRIS_BFLOAT16)' -DIRIS_COLL_OPS='(1 << IRIS_SUM)' */
#ifndef IRIS_COLL_TYPES
#define IRIS_COLL_TYPES ((1u << IRIS_DTYPE_COUNT) - 1u)
#endif
#ifndef IRIS_COLL_OPS
#define IRIS_COLL_OPS ((1u << IRIS_REDOP_COUNT) - 1u)
#endif

/* Per-call options (NULL = defaults). Start from IRIS_COLL_OPTS_INIT. */
typedef struct iris_coll_opts {
  size_t struct_size;
  iris_algo_t algo; /* IRIS_ALGO_AUTO: by size (docs/collectives.md, "Algorithms") */
  int ctas;         /* CTAs per rank: the bandwidth algorithms use this many, the one-shot latency kernel at most this many (fewer SMs beside compute); 0 = IRIS_COLL_CTAS where set, else automatic; where ranks of one process share a GPU, at most 1 / W of its SMs whatever this says */
  unsigned flags;   /* IRIS_COLL_STAGE, 0 = none. (Callers built against the struct without it
                     * pass the smaller struct_size; flags is then 0.) */
} iris_coll_opts_t;
#define IRIS_COLL_OPTS_INIT {sizeof(iris_coll_opts_t), IRIS_ALGO_AUTO, 0, 0u}
/* flags: treat send and recv as off the heap even where they lie on it (the staging
 * path; their addresses do not enter the call's signature either, so ranks whose
 * buffers sit at different heap offsets, or on the heap on some ranks only, still
 * match). For callers that cannot promise a heap buffer lies at the same offset on every
 * rank (the NCCL-API library for memory it did not see registered). Every rank passes
 * the same flags. */
#define IRIS_COLL_STAGE 1u

/* Sizes of the collective state on the heap (per rank, allocated once). */
#define IRIS_COLL_MAX_CTAS 256                       /* CTAs of one bandwidth kernel */
#define IRIS_COLL_LL_BYTES ((size_t)512 << 10)       /* latency path: payload per peer */
#define IRIS_COLL_LL_BYTES_W2 ((size_t)1 << 20)      /* the same in a world of 2 ranks (per node) */

/* ---- fp8 conversions (OCP E4M3 and E5M2), host and device, C and C++. Bit-compatible
 * with CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2 (cuda_fp8.h) without needing it; the
 * collectives use them on both vendors. tests/types_test.cu checks them against CUDA's
 * host conversions.
 *   iris_fp8_e4m3_to_float, iris_fp8_e5m2_to_float: exact (every fp8 value is a float);
 *     NaN codes give a quiet NaN with the code's sign; E5M2's infinities stay infinite.
 *   iris_float_to_fp8_e4m3, iris_float_to_fp8_e5m2: round to nearest, ties to even, and
 *     saturate, as CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) (what the
 *     __nv_fp8_* constructors use, and so what NCCL's fp8 reductions round with):
 *     a magnitude beyond the largest finite value, infinity included, gives the largest
 *     finite value with the sign (448 for E4M3, 57344 for E5M2); every NaN gives
 *     CUDA's canonical NaN, 0x7F in both formats; the sign of zero is kept. Chosen over the non-saturating convention (overflow to NaN
 *     or infinity) because a sum that exceeds the range then stays a usable number, as
 *     with NCCL. */
static inline IRIS_HOST_DEVICE float iris_fp8_e4m3_to_float(unsigned char c);
static inline IRIS_HOST_DEVICE float iris_fp8_e5m2_to_float(unsigned char c);
static inline IRIS_HOST_DEVICE unsigned char iris_float_to_fp8_e4m3(float f);
static inline IRIS_HOST_DEVICE unsigned char iris_float_to_fp8_e5m2(float f);

#ifdef __cplusplus
extern "C" {
#endif
/* Collective, outside graph capture: create the collective state (heap allocations, in
 * the same order on every rank). Optional: the first collective call does it. */
IRIS_API iris_status_t iris_collectives_setup(iris_t *ctx);

/* recv[i] = op over ranks r of send_r[i], i < count. */
IRIS_API iris_status_t iris_all_reduce(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op, iris_stream_t stream);
/* recv[r*count + i] = send_r[i]: recv holds world_size * count elements. */
IRIS_API iris_status_t iris_all_gather(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream);
/* recv[i] = op over ranks r of send_r[rank*count + i]: send holds world_size * count. */
IRIS_API iris_status_t iris_reduce_scatter(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op,
                                           iris_stream_t stream);
/* recv[r*count + i] = send_r[rank*count + i]: both hold world_size * count. */
IRIS_API iris_status_t iris_all_to_all(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream);
/* recv[i] = send_root[i]. send's data is read on the root only, but send is not NULL on
 * any rank and, on the heap, sits at the same offset everywhere (the peers take the
 * root's through their own send's offset): pass send = recv on the others when the root
 * does, or any buffer off the heap on every rank. */
IRIS_API iris_status_t iris_broadcast(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, int root, iris_stream_t stream);
/* Enqueue a barrier across all ranks on the stream (GPU side; capturable). */
IRIS_API iris_status_t iris_barrier_device(iris_t *ctx, iris_stream_t stream);

/* The same with per-call options. */
IRIS_API iris_status_t iris_all_reduce_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op, iris_stream_t stream,
                                          const iris_coll_opts_t *opts);
IRIS_API iris_status_t iris_all_gather_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                          const iris_coll_opts_t *opts);
IRIS_API iris_status_t iris_reduce_scatter_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op,
                                              iris_stream_t stream, const iris_coll_opts_t *opts);
IRIS_API iris_status_t iris_all_to_all_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                          const iris_coll_opts_t *opts);
IRIS_API iris_status_t iris_broadcast_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, int root, iris_stream_t stream,
                                         const iris_coll_opts_t *opts);
/* The same over a team (iris.h: iris_team_t from iris_team_get / iris_team_split):
 * collective over the team's members, every count, root and rank a team rank, W the
 * team's size (all-gather: recv holds team size * count). Semantics, rules and options as
 * above, with these differences:
 *   - Each team has its own call numbers, headers and call order across streams: a team's
 *     calls run one after another whatever their streams, but are not ordered with the
 *     world's or another team's calls, so two teams' collectives may run at the same time on
 *     different streams (a rank in both: the TP and DP teams of TP x DP).
 *   - A mismatch among a team's members is recorded for that team (iris_team_check
 *     reports it and clears it); other teams and the world go on. A wait that runs out is
 *     fatal for the context, as the world's (iris_team_check, iris_get_async_error name the
 *     world rank waited for). The team's kernels read the team's own fault words: a fatal
 *     fault of the context (the world's, another team's, iris_abort) reaches them when the
 *     host next looks (any call on ctx, iris_get_async_error: a watchdog), and they then
 *     give up at their next check; a team's fault reaches the world's kernels the same way.
 *   - Buffers off the heap: the latency paths take any device memory (a team of 2 in a
 *     node of 4 or more ranks: to 1 MB per peer, as a world of 2); the bandwidth path
 *     stages them through the team's staging areas (iris_team_set_staging), exactly as
 *     the world's calls through theirs. A team without areas (as split) takes heap
 *     buffers only there: IRIS_ERROR_NOT_IN_HEAP otherwise, a refusal that takes part as
 *     the others above (a member that passes buffers off the heap where its peers pass
 *     heap buffers makes their call a mismatch, not a wait).
 *   - The grids follow the team's members, agreed at the split (iris_team_split): their
 *     fewest SMs and their IRIS_COLL_CTAS, whether or not the world's collectives are set
 *     up; members whose IRIS_COLL_CTAS differed at the split have every call of the team
 *     refused, on every member alike (IRIS_ERROR_MISMATCH; IRIS_ERROR_INVALID_ARGUMENT for
 *     a value one could not read), before any launch.
 *   - The world team runs the world's calls; a team of one copies; any other team needs a
 *     collective state from the context's pool (IRIS_TEAMS_COLL, default 2, taken at the
 *     split: IRIS_ERROR_UNSUPPORTED when the team got none). Capturable from the first
 *     call: the state is laid out in place, nothing is allocated. */
IRIS_API iris_status_t iris_all_reduce_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op,
                                            iris_stream_t stream, const iris_coll_opts_t *opts);
IRIS_API iris_status_t iris_all_gather_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                            const iris_coll_opts_t *opts);
IRIS_API iris_status_t iris_reduce_scatter_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op,
                                                iris_stream_t stream, const iris_coll_opts_t *opts);
IRIS_API iris_status_t iris_all_to_all_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                            const iris_coll_opts_t *opts);
IRIS_API iris_status_t iris_broadcast_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, int root,
                                           iris_stream_t stream, const iris_coll_opts_t *opts);
IRIS_API iris_status_t iris_barrier_device_team(iris_t *ctx, const iris_team_t *team, iris_stream_t stream);
/* Collective over the team's members (a host meeting): staging areas for the team's calls
 * with buffers off the heap. area_in, area_out: two distinct, non-overlapping, 16-byte
 * aligned heap blocks of `bytes` each (at least 2 KiB; each a chunk of every member's
 * block, as IRIS_COLL_STAGING's), at the same heap offsets on every member: allocate them
 * with iris_malloc in the same order on every rank of the context, and keep them until
 * the team is destroyed or other areas are set (after the calls that used them complete).
 * The members compare what they pass: a difference is IRIS_ERROR_MISMATCH on every member,
 * a member's refused areas IRIS_ERROR_INVALID_ARGUMENT on every member (its own detail
 * there, naming it elsewhere); either way no member's staging changes. NULL, NULL, 0:
 * none (as after the split). Replaces earlier areas for the calls made after it. The
 * teams of one split are disjoint and may share a pair; teams sharing a member may not
 * (their calls may run at once). The
 * world team (it stages through the world's areas) and a team of one: IRIS_SUCCESS, no
 * meeting. The torch layer sets them at each split (staging_bytes, docs/teams.md). */
IRIS_API iris_status_t iris_team_set_staging(iris_t *ctx, const iris_team_t *team, void *area_in, void *area_out, size_t bytes);
/* Bytes per element of a type (0 for an invalid one). */
IRIS_API size_t iris_dtype_size(iris_dtype_t type);
/* Flags for the tile-level building blocks (iris_tile_* below): one epoch per tile and
 * rank on the heap. Plain data; pass it by value to kernels. */
typedef struct iris_tile_flags {
  unsigned long long *flags; /* [num_tiles][IRIS_MAX_RANKS]: epochs the peers signalled */
  unsigned *counters;        /* [num_tiles]: this rank's epoch per tile */
  int num_tiles;
} iris_tile_flags_t;
/* Collective, outside graph capture (heap allocations in the same order on every rank,
 * then a barrier): flags for num_tiles tiles. Every rank passes the same num_tiles (else
 * IRIS_ERROR_MISMATCH on every rank; below 1: IRIS_ERROR_INVALID_ARGUMENT on every rank;
 * nothing allocated). Free with iris_tile_flags_destroy. On a failure after the allocation
 * (the zeroing or the barrier), *out still holds the block: destroy it on every rank, so
 * the heaps stay alike. */
IRIS_API iris_status_t iris_tile_flags_create(iris_t *ctx, int num_tiles, iris_tile_flags_t *out);
IRIS_API iris_status_t iris_tile_flags_destroy(iris_t *ctx, iris_tile_flags_t *flags);

/* Synchronous (waits for this rank's GPU): the context's faults, as
 * iris_get_async_error (iris.h) reports them: a fatal one (a wait that ran out:
 * IRIS_ERROR_TIMEOUT / IRIS_ERROR_PEER_FAILED; iris_abort: IRIS_ERROR_ABORTED), else
 * IRIS_ERROR_MISMATCH if, since the last report, a peer called a different collective
 * (kind, count, type, op, root, buffers) at the same point — every kernel, latency path
 * included, sees that on every rank and moves no data for the call; the mismatch record
 * is then cleared (not fatal), except where a side of it was a call split into several
 * launches: then it is fatal, and stays. */
IRIS_API iris_status_t iris_collectives_check(iris_t *ctx);

/* ---- all-reduce + residual add + RMSNorm (+ fp8): the serving engines' fused op ----
 * Tensor-parallel decode ends every attention and MLP block with
 *     residual += all_reduce(x);  out = rmsnorm(residual) * weight
 * (vLLM's fused_add_rms_norm after its custom all-reduce; FlashInfer's
 * trtllm_allreduce_fusion). iris_all_reduce_rmsnorm does it in one call, and for small
 * batches in one kernel with no barrier: every rank pushes its rows of x into every
 * peer's LL slots, each CTA collects its part of a row from every rank in rank order,
 * adds the residual and normalises the row (larger batches: two hops, see Paths).
 *   x         [tokens][hidden] of `type`, this rank's partial sums; any device memory, placed
 *             alike or not on the ranks (but with IRIS_COLL_STAGING=0, and multi-node:
 *             as iris_all_reduce's send, on the heap at one offset or off it everywhere)
 *   residual  [tokens][hidden], updated in place (not x, not out)
 *   weight    [hidden]
 *   out       [tokens][hidden]; may be x (in place, as vLLM's fused_add_rms_norm)
 *   type      IRIS_BFLOAT16 or IRIS_FLOAT16 (x, residual, weight, out alike)
 *   hidden    1 .. IRIS_RMSNORM_MAX_HIDDEN, any value (odd ones too); tokens 1 .. 2^31 - 1,
 *             tokens x hidden at most 2^39 (0 tokens: nothing moved, whatever the
 *             buffers; it takes part as a count of 0 does, marked split as a refusal)
 *   eps       finite, at least 0, the same on every rank (it is in the call's signature)
 *   Buffers 2-byte aligned, scale 4-byte aligned; anything else is refused.
 * Arithmetic, per row (up: exact widening to fp32; down: round to nearest even to type):
 *   s      = down(fp32 sum of up(x_r) over ranks r = 0..W-1 in rank order)  = iris_all_reduce's bits
 *   res    = down(up(s) + up(res))
 *   inv    = 1 / sqrtf(ss / hidden + eps), ss = the sum of up(res)^2 in fp32, in one fixed
 *            order (a pairwise tree: internal/coll/rmsnorm.h), whatever the path or grid
 *   out    = down((up(res) * inv) * up(weight))
 * so every rank gets the same bits (given the same residual and weight), on either path.
 * fp8 (iris_rmsnorm_opts_t.quant), besides out: out_fp8 [tokens][hidden] OCP e4m3 codes
 * (iris_float_to_fp8_e4m3: nearest even, saturating at 448), q = e4m3(up(out) * (1 / scale)):
 *   IRIS_QUANT_FP8_PER_TENSOR  scale: device pointer to one float, read (a static scale)
 *   IRIS_QUANT_FP8_PER_TOKEN   scale: [tokens] floats, written: max(amax / 448, 1 / (448 * 512)),
 *                              amax = max |up(out)| of the row (vLLM's dynamic per-token scale)
 * Paths (IRIS_RMSNORM_AUTO takes the first that fits, in this order; the two fused LL
 * kernels up to IRIS_RMSNORM_FUSED_MAX_TOKENS tokens):
 *   IRIS_RMSNORM_FUSED     the one-shot kernel above: up to IRIS_RMSNORM_ONESHOT_MAX_BYTES
 *                          (at 2 ranks: as far as IRIS_COLL_LL_BYTES of the one-shot LL slots go)
 *   IRIS_RMSNORM_TWO_SHOT  one kernel, two hops: row t is summed by rank t % W, which
 *                          pushes the sum to the others (half the bytes per rank at 4
 *                          ranks); up to IRIS_RMSNORM_FUSED_MAX_BYTES where its slots
 *                          (IRIS_COLL_LL2_BYTES per rank's rows) hold it
 *   IRIS_RMSNORM_BANDWIDTH beyond (any number of tokens; at 2 ranks from where the
 *                          one-shot stops): one kernel, whole rows between barriers, no
 *                          LL lines: each rank pushes its copy of a row to the row's
 *                          owner (a block of ceil(tokens / W) rows per rank), the owner
 *                          pushes the sum to every rank, every rank adds the residual and
 *                          normalises; at 2 ranks up to 2 MB, one hop (each rank pushes
 *                          its rows to the other and sums both). Where its rows (one hop:
 *                          2 x tokens; two: W * ceil(tokens / W) + tokens; hidden rounded
 *                          up to 16 bytes) fit the collectives' heap scratch
 *                          (IRIS_COLL_AR_SCRATCH_BYTES, 32 MB)
 *   IRIS_RMSNORM_SEPARATE  beyond: iris_all_reduce of x into the staging area (into out
 *                          when IRIS_COLL_STAGING=0), then a norm kernel
 * all with the same arithmetic, bit for bit. A forced FUSED, TWO_SHOT or BANDWIDTH that
 * does not fit is refused (IRIS_ERROR_INVALID_ARGUMENT). Multi-node worlds: the separate
 * path. Where ranks of one process share a GPU, each rank's grids take at most 1 / W of
 * its SMs, so that every rank's kernels are resident at once: the fused LL kernels then
 * fit up to that many tokens (docs/shared_gpu.md). IRIS_COLL_CTAS caps every grid of the
 * op as it caps the collectives': the fused LL kernels then only where tokens x the
 * row's CTAs fit under it.
 * Rules as for the other collectives (collective, same order, capturable once the
 * collective state exists, stream ordering). Mismatch: a call whose tokens, hidden,
 * type, quantisation or eps differ between ranks is seen on every rank, writes no user
 * buffer (the separate path may have written out where the staging area holds no whole
 * row, IRIS_COLL_STAGING=0 included, and in multi-node worlds, whose all-reduce writes
 * out before the norm kernel matches), and
 * iris_collectives_check reports IRIS_ERROR_MISMATCH. Buffers are read and written by
 * this rank only; peers never touch them (but with IRIS_COLL_STAGING=0, where x and out
 * are the all-reduce's buffers). */
#define IRIS_RMSNORM_MAX_HIDDEN 32768
#ifndef IRIS_RMSNORM_FUSED_MAX_TOKENS
#define IRIS_RMSNORM_FUSED_MAX_TOKENS 512
#endif
#ifndef IRIS_RMSNORM_ONESHOT_MAX_BYTES
#define IRIS_RMSNORM_ONESHOT_MAX_BYTES ((size_t)128 << 10)
#endif
#ifndef IRIS_RMSNORM_FUSED_MAX_BYTES
#define IRIS_RMSNORM_FUSED_MAX_BYTES ((size_t)2 << 20)
#endif
typedef enum iris_quant { IRIS_QUANT_NONE = 0, IRIS_QUANT_FP8_PER_TENSOR, IRIS_QUANT_FP8_PER_TOKEN } iris_quant_t;
typedef enum iris_rmsnorm_algo { IRIS_RMSNORM_AUTO = 0, IRIS_RMSNORM_FUSED, IRIS_RMSNORM_SEPARATE, IRIS_RMSNORM_TWO_SHOT, IRIS_RMSNORM_BANDWIDTH } iris_rmsnorm_algo_t;
/* Per-call options (NULL = defaults). Start from IRIS_RMSNORM_OPTS_INIT. */
typedef struct iris_rmsnorm_opts {
  size_t struct_size;
  iris_quant_t quant;       /* IRIS_QUANT_NONE: out only */
  void *out_fp8;            /* [tokens][hidden] e4m3 codes (quant != NONE) */
  float *scale;             /* device memory: 1 float read (per tensor) or [tokens] written (per token) */
  iris_rmsnorm_algo_t algo; /* IRIS_RMSNORM_AUTO; FUSED, TWO_SHOT, BANDWIDTH: refused (IRIS_ERROR_INVALID_ARGUMENT) when the call does not fit */
} iris_rmsnorm_opts_t;
#define IRIS_RMSNORM_OPTS_INIT {sizeof(iris_rmsnorm_opts_t), IRIS_QUANT_NONE, NULL, NULL, IRIS_RMSNORM_AUTO}
IRIS_API iris_status_t iris_all_reduce_rmsnorm(iris_t *ctx, const void *x, void *residual, const void *weight, void *out, size_t tokens, size_t hidden, float eps,
                                               iris_dtype_t type, iris_stream_t stream);
IRIS_API iris_status_t iris_all_reduce_rmsnorm_ex(iris_t *ctx, const void *x, void *residual, const void *weight, void *out, size_t tokens, size_t hidden, float eps,
                                                  iris_dtype_t type, iris_stream_t stream, const iris_rmsnorm_opts_t *opts);
#ifdef __cplusplus
}
#endif

#if defined(IRIS_DETAIL_GPU_COMPILER)
#include "iris_device.h"

/* ========================================================================= */
/*                     device building blocks (C++ templates)                */
/* ========================================================================= */

/* Element storage types; half and fp8 types are kept as raw bits and computed in float
 * (IRIS_UINT8 is unsigned char, computed in itself: its sums wrap modulo 256). */
typedef struct iris_f16 { unsigned short bits; } iris_f16_t;
typedef struct iris_bf16 { unsigned short bits; } iris_bf16_t;
typedef struct iris_fp8_e4m3 { unsigned char bits; } iris_fp8_e4m3_t;
typedef struct iris_fp8_e5m2 { unsigned char bits; } iris_fp8_e5m2_t;

/* ========================================================================= */
/*          tile-level building blocks, for collectives inside user kernels  */
/* ========================================================================= */
/* Participation contract (all four operations):
 *   - Whole block: every thread of the calling block calls with the same arguments; the
 *     block has at least ctx.world_size threads (thread r signals and waits for rank r).
 *   - ctx numbers the peers 0..world_size-1 on one node: iris_device_context_node (iris.h),
 *     the same as iris_device_context in a single-node world.
 *   - Every rank calls the operation for the same tile ids, each tile on one block, in
 *     the same order per tile; other tiles may go to other blocks in any order.
 *   - Views: `src`/`dst` as documented per operation; heap views must sit at the same
 *     offsets on every rank (symmetric allocation gives that).
 *   - The blocks that wait on each other must be resident together: use a persistent
 *     grid no larger than what fits on the GPU at once (iris_device.h, rule 3).
 * Ordering: on return, the block's result is complete and every thread may read it; the
 * operation's reads of peers' heap data are finished on every rank (so the caller may
 * overwrite its `src` tile right away). Each call advances the tile's epoch in
 * `flags`, kept in device memory, so kernels that use them replay in graphs.
 * Returns false in every thread if a wait timed out (the wait bound, IRIS_WAIT_TIMEOUT_MS),
 * and, touching nothing, for a tile outside [0, f.num_tiles) or a block of fewer than
 * ctx.world_size threads (IRIS_DEBUG: traps). */


/* Whole block: a rank-wide rendezvous of the blocks handling `tile`: every write any of
 * them made before is visible to all of them after. Advances the tile's epoch. */
IRIS_DEVICE_INLINE bool iris_tile_sync(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile);

/* All-reduce of one tile. src: (M, N) view on the heap holding this rank's partial
 * values; dst: (M, N) view of any device memory (not src). dst's tile (tm, tn) =
 * op over ranks (rank order, wide accumulation) of every rank's src tile. T: float,
 * iris_f16_t, iris_bf16_t, int, long long, unsigned char, iris_fp8_e4m3_t,
 * iris_fp8_e5m2_t; OP: IRIS_SUM, IRIS_MIN, IRIS_MAX or IRIS_AVG, computed as by
 * iris_all_reduce (AVG: the sum divided by the world size, rounded once). */
template <typename T, int OP = IRIS_SUM>
IRIS_DEVICE_INLINE bool iris_tile_all_reduce(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst, int bm, int bn);

/* All-gather of one tile. src: (M_local, N_local) view of any device memory, this rank's
 * shard; dst: the gathered view on the heap, (W*M_local, N_local) for dim 0 or
 * (M_local, W*N_local) for dim 1. Tile (tm, tn) of the shard goes to every rank's dst at
 * rank*M_local rows (dim 0) or rank*N_local columns (dim 1) further. Another dim: false in
 * every thread, nothing touched (IRIS_DEBUG: traps). */
template <typename T>
IRIS_DEVICE_INLINE bool iris_tile_all_gather(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst, int dim, int bm,
                                             int bn);

/* Reduce-scatter of one tile: tile `tile` belongs to rank tile % world_size, which gets
 * op over ranks of every rank's src tile in its dst; the other ranks' dst is untouched.
 * src: (M, N) on the heap; dst: (M, N) of any device memory. T and OP as for
 * iris_tile_all_reduce. */
template <typename T, int OP = IRIS_SUM>
IRIS_DEVICE_INLINE bool iris_tile_reduce_scatter(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst, int bm,
                                                 int bn);

/* All-to-all of one tile, each rank owning n_per_rank columns (the Iris shape). src and
 * dst: (M, W*n_per_rank); src on the heap, dst any device memory. Tiles number the
 * (M, n_per_rank) grid: for every rank r, dst[rows, r*n_per_rank + cols] =
 * src_r[rows, rank*n_per_rank + cols]. */
template <typename T>
IRIS_DEVICE_INLINE bool iris_tile_all_to_all(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst,
                                             long long n_per_rank, int bm, int bn);


/* ---- all-reduce + residual add + RMSNorm building blocks (the arithmetic of
 * iris_all_reduce_rmsnorm above, bit for bit). T: iris_bf16_t or iris_f16_t. Whole block:
 * every thread calls with the same arguments; blockDim.x a multiple of 32, at most 1024;
 * hidden 1 .. IRIS_RMSNORM_MAX_HIDDEN (the block's shared chunk sums hold no more).
 * quant, out_fp8, scale: as iris_rmsnorm_opts_t (IRIS_QUANT_NONE: both may be NULL); the
 * scale here is this row's (per token) or the tensor's. */
/* One row, local: residual += sum; out = rmsnorm(residual) * weight. sum may be out. On
 * return the block's writes are done (each thread's own; a __syncthreads orders them for
 * the block). */
template <typename T>
IRIS_DEVICE_INLINE void iris_add_rmsnorm_block(const T *sum, T *residual, const T *weight, T *out, long long hidden, float eps, iris_quant_t quant,
                                               unsigned char *out_fp8, float *scale);
/* The same after an all-reduce of rows tile*rows_per_tile .. +rows_per_tile of x (an (M,
 * hidden) view on the heap, as iris_tile_all_reduce takes it; its contract applies):
 * residual, out: (M, hidden) row-major device memory, out not x; out_fp8 (M, hidden),
 * scale [M] (per token) or 1 float. False in every thread if a wait ran out. */
template <typename T>
IRIS_DEVICE_INLINE bool iris_tile_all_reduce_rmsnorm(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t x, T *residual,
                                                     const T *weight, T *out, int rows_per_tile, float eps, iris_quant_t quant, unsigned char *out_fp8,
                                                     float *scale);

#endif /* nvcc, hipcc */

/* ========================================================================= */
/*          the implementation: one file per topic, in internal/coll/         */
/* ========================================================================= */
#include "internal/coll/plan.h"      /* tuning constants, sizes, who moves which bytes */
#include "internal/coll/fp8.h"       /* the fp8 conversions */
#if defined(IRIS_DETAIL_GPU_COMPILER)
#include "internal/coll/types.h"     /* element arithmetic of the reductions */
#include "internal/coll/protocol.h"  /* calls, headers, barriers, LL lines, progress flags */
#include "internal/coll/ll.h"        /* the latency kernels */
#include "internal/coll/kernels.h"   /* the bandwidth kernels */
#include "internal/coll/tile.h"      /* the tile building blocks */
#include "internal/coll/rmsnorm.h"   /* all-reduce + RMSNorm: the order of the norm, its kernels and building blocks */
#endif

#endif /* IRIS_COLLECTIVES_H */

/* The implementation (IRIS_IMPLEMENTATION, nvcc or hipcc), after the include guard as in
 * iris.h: a unit may include this header before it defines IRIS_IMPLEMENTATION. */
#if defined(IRIS_IMPLEMENTATION) && !defined(IRIS_COLLECTIVES_IMPLEMENTATION_DONE) && defined(IRIS_DETAIL_GPU_COMPILER)
#define IRIS_COLLECTIVES_IMPLEMENTATION_DONE
#include "iris.h"
#include "iris_device.h"
#include "internal/coll/launch.h"    /* collective state, typed launches, dispatch */
#include "internal/coll/host.h"      /* setup, check, one call on one node */
#include "internal/coll/multinode.h" /* calls over several nodes (rails) */
#include "internal/coll/api.h"       /* the public host functions */
#include "internal/coll/team.h"      /* the same over a team */
#include "internal/coll/rmsnorm_host.h" /* iris_all_reduce_rmsnorm */
#endif
