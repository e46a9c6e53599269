/* iris_collectives.h — collectives over the symmetric heap (C host API, C++ kernels)
 *
 * What it is
 *   All-reduce, all-gather, reduce-scatter, all-to-all, broadcast and a barrier, with
 *   NCCL's semantics so they can be swapped in, enqueued on a stream, capturable in
 *   CUDA/HIP graphs. Two kinds of algorithm:
 *     latency   (IRIS_ALGO_LATENCY): one kernel, no barrier. Each rank pushes its data
 *               into every peer's receive area in "LL" form: every 8 bytes carry 4 data
 *               bytes and a 4-byte epoch, stored by one instruction, so a reader that
 *               sees the epoch sees the data. For all-reduce this is the one-shot.
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
 *     through a staging area on the heap: the data are copied in and out on the stream
 *     (one extra local copy each way, about 1 ms per 2 GB at HBM speed), in chunks of
 *     at most IRIS_COLL_STAGING_BYTES.
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
 *     The latency path checks the headers in the polls that wait for its data, at no
 *     extra round trip; IRIS_COLL_CHECK=0 in the environment turns that check off.
 *   - A rank that stops participating: every wait is bounded (IRIS_WAIT_TIMEOUT_NS); the
 *     first that runs out records a fatal fault in the context, every other wait gives
 *     up at once, and every later call returns the error (iris_get_async_error names
 *     the wait, the rank and the call); iris_finalize then skips the final barrier.
 *     With IRIS_DEBUG the waiting kernel also reports and traps.
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
 *                       before summing; iris divides the sum, which rounds once.) */
typedef enum iris_dtype {
  IRIS_FLOAT32 = 0, IRIS_FLOAT16, IRIS_BFLOAT16, IRIS_INT32, IRIS_INT64, IRIS_UINT8, IRIS_FLOAT8_E4M3, IRIS_FLOAT8_E5M2, IRIS_DTYPE_COUNT
} iris_dtype_t;
typedef enum iris_redop { IRIS_SUM = 0, IRIS_MIN, IRIS_MAX, IRIS_AVG, IRIS_REDOP_COUNT } iris_redop_t;
typedef enum iris_algo { IRIS_ALGO_AUTO = 0, IRIS_ALGO_LATENCY, IRIS_ALGO_BANDWIDTH, IRIS_ALGO_TWO_SHOT_LL } iris_algo_t;

/* Per-call options (NULL = defaults). Start from IRIS_COLL_OPTS_INIT. */
typedef struct iris_coll_opts {
  size_t struct_size;
  iris_algo_t algo; /* IRIS_ALGO_AUTO: by size, see iris_coll_choose */
  int ctas;         /* bandwidth algorithms: CTAs per rank; 0 = automatic */
} iris_coll_opts_t;
#define IRIS_COLL_OPTS_INIT {sizeof(iris_coll_opts_t), IRIS_ALGO_AUTO, 0}

/* Sizes of the collective state on the heap (per rank, allocated once). */
#define IRIS_COLL_MAX_CTAS 256                       /* CTAs of one bandwidth kernel */
#define IRIS_COLL_LL_BYTES ((size_t)512 << 10)       /* latency path: payload per peer */
#ifndef IRIS_COLL_PUSH
#define IRIS_COLL_PUSH 1 /* 1: the all-gather and all-to-all bandwidth kernels and the all-reduce's second
                            phase store into peers; 0: they load from peers (measured slower) */
#endif
/* All-reduce on the bandwidth path: below this size the reduced chunk is stored into the
 * peers as it is computed (2 barriers); from it on, the peers pull it after a second
 * barrier (3 barriers). Measured on 4xH200 (BENCHMARKS.md): pushing took 13.3 against
 * 14.4 us at 1 MB, but 30.5 against 28.0 us at 4 MB and 1259 against 1230 us at 256 MB. */
#ifndef IRIS_COLL_AR_PUSH_MAX
#define IRIS_COLL_AR_PUSH_MAX ((size_t)4 << 20)
#endif
#ifndef IRIS_COLL_LL2_BYTES
#define IRIS_COLL_LL2_BYTES ((size_t)512 << 10)      /* two-shot LL: payload per chunk (the message / W) */
#endif
/* The store two-shot all-reduce (iris_coll_ar_store_kernel): its scratch area on the
 * heap (a round moves at most W/2 x this), the size from which it replaces the
 * load/store two-shot, and its CTAs. Measured on 4xH200, bf16, us: 84.3 / 306 / 1192 /
 * 4752 at 16 MB / 64 MB / 256 MB / 1 GB with 64 CTAs against 89.0 / 317 / 1228 / 4868 for
 * the load/store two-shot. On 4xH100 with 48 / 64 / 96 / 128 CTAs: 341 / 305 / 312 / 298 us
 * at 64 MB and 1321 / 1196 / 1200 / 1145 at 256 MB (NCCL 323, 1182); 128 is not taken:
 * see IRIS_COLL_AR_CTAS. Below 4 MB the load/store two-shot is faster (13.3 against 21.4
 * us at 1 MB, 17.9 against 25.6 at 2 MB); at 4 MB they tie (32.3, 31.8). */
#ifndef IRIS_COLL_AR_SCRATCH_BYTES
#define IRIS_COLL_AR_SCRATCH_BYTES ((size_t)32 << 20)
#endif
#ifndef IRIS_COLL_AR_STORE_MIN
#define IRIS_COLL_AR_STORE_MIN ((size_t)8 << 20)
#endif
#ifndef IRIS_COLL_AR_STORE_CTAS
#define IRIS_COLL_AR_STORE_CTAS 64
#endif
/* CTAs of the load/store two-shot all-reduce (below IRIS_COLL_AR_STORE_MIN). Measured on
 * 4xH100 through libiris.so from torch (BENCHMARKS.md): with 128 or 132 CTAs (one per SM)
 * it sometimes took 200-310 us per call at 1-4 MB, eager and in graphs, against 14-35 us
 * with 64 or 96 (relaxed polling did not change it); the C benchmark saw the same stall
 * once with the store two-shot on 132 CTAs (305 us at 2 MB). With 64 CTAs: 14.6 / 19.4 /
 * 33.3 us at 1 / 2 / 4 MB in graphs, against 13.3 / 17.9 / 32.4 for 132 CTAs when they do
 * not stall. */
#ifndef IRIS_COLL_AR_CTAS
#define IRIS_COLL_AR_CTAS 64
#endif
#define IRIS_COLL_STAGING_BYTES ((size_t)64 << 20)   /* non-heap buffers: in and out, each */
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

/* ---- Planning arithmetic: who moves which bytes, as pure functions of the call and
 * the world size W. Host and device, C and C++ (every rank computes the same from the
 * same call; tests/host_test.c checks them for W from 2 to 16). Internal. */

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
static inline IRIS_HOST_DEVICE size_t iris_coll_ar_slice(size_t es, int W, int ctas) {
  const size_t per = 16 / es;
  size_t slice = IRIS_COLL_AR_SCRATCH_BYTES / (2 * (size_t)(ctas > 0 ? ctas : 1) * (size_t)(W > 0 ? W : 1) * es);
  slice -= slice % per;
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
static inline IRIS_HOST_DEVICE unsigned iris_detail_f32_bits(float f) {
  union { float f; unsigned u; } x;
  x.f = f;
  return x.u;
}
static inline IRIS_HOST_DEVICE float iris_detail_bits_f32(unsigned u) {
  union { float f; unsigned u; } x;
  x.u = u;
  return x.f;
}
/* A finite fp8 code of `mbits` mantissa bits and exponent bias `bias` as a float. */
static inline IRIS_HOST_DEVICE float iris_detail_fp8_decode(unsigned c, int mbits, int bias) {
  const unsigned sign = (c & 0x80u) << 24, e = (c & 0x7fu) >> mbits, m = c & ((1u << mbits) - 1u);
  if (e == 0) /* zero or subnormal: m x 2^(1 - bias - mbits), an exact product */
    return iris_detail_bits_f32(sign | iris_detail_f32_bits((float)m * iris_detail_bits_f32((unsigned)(127 + 1 - bias - mbits) << 23)));
  return iris_detail_bits_f32(sign | ((e + (unsigned)(127 - bias)) << 23) | (m << (23 - mbits)));
}
/* A float rounded to nearest even into the fp8 format of `mbits` mantissa bits and bias
 * `bias`, saturated to `maxcode` (the largest finite code); NaN gives 0x7F. */
static inline IRIS_HOST_DEVICE unsigned char iris_detail_fp8_encode(float f, int mbits, int bias, unsigned maxcode) {
  const unsigned u = iris_detail_f32_bits(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  unsigned mant, r, rem, half, code;
  int e, shift;
  if (a > 0x7f800000u) return 0x7f;
  if (a < 0x00800000u) return (unsigned char)sign; /* zero, float subnormals: far below half the smallest fp8 value */
  e = (int)(a >> 23) - 127 + bias;                 /* the fp8 exponent field if the result is normal */
  shift = 23 - mbits + (e < 1 ? 1 - e : 0);        /* float mantissa bits dropped (more below the normal range) */
  if (shift > 24) return (unsigned char)sign;      /* below half the smallest subnormal */
  mant = (a & 0x7fffffu) | 0x800000u;
  r = mant >> shift;
  rem = mant & ((1u << shift) - 1u);
  half = 1u << (shift - 1);
  r += (rem > half || (rem == half && (r & 1u))) ? 1u : 0u;
  /* a carry out of the mantissa (r == 2^(mbits+1), or 2^mbits for a subnormal) moves to
   * the next exponent by itself */
  code = ((unsigned)(e < 1 ? 0 : e - 1) << mbits) + r;
  return (unsigned char)(sign | (code > maxcode ? maxcode : code));
}
static inline IRIS_HOST_DEVICE float iris_fp8_e4m3_to_float(unsigned char c) {
  if ((c & 0x7fu) == 0x7fu) return iris_detail_bits_f32(((unsigned)(c & 0x80u) << 24) | 0x7fc00000u);
  return iris_detail_fp8_decode(c, 3, 7);
}
static inline IRIS_HOST_DEVICE float iris_fp8_e5m2_to_float(unsigned char c) {
  if ((c & 0x7cu) == 0x7cu) return iris_detail_bits_f32(((unsigned)(c & 0x80u) << 24) | ((c & 3u) ? 0x7fc00000u : 0x7f800000u));
  return iris_detail_fp8_decode(c, 2, 15);
}
static inline IRIS_HOST_DEVICE unsigned char iris_float_to_fp8_e4m3(float f) { return iris_detail_fp8_encode(f, 3, 7, 0x7eu); }
static inline IRIS_HOST_DEVICE unsigned char iris_float_to_fp8_e5m2(float f) { return iris_detail_fp8_encode(f, 2, 15, 0x7bu); }

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
/* recv[i] = send_root[i] (send is read on the root only). */
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
 * then a barrier): flags for num_tiles tiles. Free with iris_tile_flags_destroy. On a
 * failure after the allocation (the zeroing or the barrier), *out still holds the block:
 * destroy it on every rank, so the heaps stay alike. */
IRIS_API iris_status_t iris_tile_flags_create(iris_t *ctx, int num_tiles, iris_tile_flags_t *out);
IRIS_API iris_status_t iris_tile_flags_destroy(iris_t *ctx, iris_tile_flags_t *flags);

/* Synchronous (waits for this rank's GPU): the context's faults, as
 * iris_get_async_error (iris.h) reports them: a fatal one (a wait that ran out:
 * IRIS_ERROR_TIMEOUT / IRIS_ERROR_PEER_FAILED; iris_abort: IRIS_ERROR_ABORTED), else
 * IRIS_ERROR_MISMATCH if, since the last report, a peer called a different collective
 * (kind, count, type, op, root, buffers) at the same point — every kernel, latency path
 * included, sees that on every rank and moves no data for the call; the mismatch record
 * is then cleared (not fatal). */
IRIS_API iris_status_t iris_collectives_check(iris_t *ctx);
#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#include "iris_device.h"

/* ========================================================================= */
/*                     device building blocks (C++ templates)                */
/* ========================================================================= */
#if defined(IRIS_USE_HIP)
#include <hip/hip_fp16.h>
#else
#include <cuda_fp16.h>
#endif

/* Element storage types; half and fp8 types are kept as raw bits and computed in float
 * (IRIS_UINT8 is unsigned char, computed in itself: its sums wrap modulo 256). */
typedef struct iris_f16 { unsigned short bits; } iris_f16_t;
typedef struct iris_bf16 { unsigned short bits; } iris_bf16_t;
typedef struct iris_fp8_e4m3 { unsigned char bits; } iris_fp8_e4m3_t;
typedef struct iris_fp8_e5m2 { unsigned char bits; } iris_fp8_e5m2_t;

template <typename T> struct iris_coll_acc { typedef T type; };
template <> struct iris_coll_acc<iris_f16_t> { typedef float type; };
template <> struct iris_coll_acc<iris_bf16_t> { typedef float type; };
template <> struct iris_coll_acc<iris_fp8_e4m3_t> { typedef float type; };
template <> struct iris_coll_acc<iris_fp8_e5m2_t> { typedef float type; };
template <typename T> IRIS_DEVICE_INLINE typename iris_coll_acc<T>::type iris_coll_up(T v) { return v; }
template <> IRIS_DEVICE_INLINE float iris_coll_up<iris_f16_t>(iris_f16_t v) { return __half2float(__ushort_as_half(v.bits)); }
template <> IRIS_DEVICE_INLINE float iris_coll_up<iris_bf16_t>(iris_bf16_t v) { return __uint_as_float((unsigned)v.bits << 16); }
template <> IRIS_DEVICE_INLINE float iris_coll_up<iris_fp8_e4m3_t>(iris_fp8_e4m3_t v) { return iris_fp8_e4m3_to_float(v.bits); }
template <> IRIS_DEVICE_INLINE float iris_coll_up<iris_fp8_e5m2_t>(iris_fp8_e5m2_t v) { return iris_fp8_e5m2_to_float(v.bits); }
template <typename T> IRIS_DEVICE_INLINE T iris_coll_down(typename iris_coll_acc<T>::type v) { return v; }
template <> IRIS_DEVICE_INLINE iris_f16_t iris_coll_down<iris_f16_t>(float v) { iris_f16_t r; r.bits = __half_as_ushort(__float2half_rn(v)); return r; }
template <> IRIS_DEVICE_INLINE iris_bf16_t iris_coll_down<iris_bf16_t>(float v) {
  unsigned u = __float_as_uint(v);
  iris_bf16_t r;
  if ((u & 0x7fffffffu) > 0x7f800000u) r.bits = (unsigned short)((u >> 16) | 0x40); /* NaN stays NaN */
  else r.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);          /* round to nearest even */
  return r;
}
template <> IRIS_DEVICE_INLINE iris_fp8_e4m3_t iris_coll_down<iris_fp8_e4m3_t>(float v) { iris_fp8_e4m3_t r; r.bits = iris_float_to_fp8_e4m3(v); return r; }
template <> IRIS_DEVICE_INLINE iris_fp8_e5m2_t iris_coll_down<iris_fp8_e5m2_t>(float v) { iris_fp8_e5m2_t r; r.bits = iris_float_to_fp8_e5m2(v); return r; }
/* a + b; signed integers wrap (computed unsigned: no undefined overflow), unsigned char
 * wraps modulo 256 on the way back */
template <typename A> IRIS_DEVICE_INLINE A iris_coll_add(A a, A b) { return (A)(a + b); }
template <> IRIS_DEVICE_INLINE int iris_coll_add<int>(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
template <> IRIS_DEVICE_INLINE long long iris_coll_add<long long>(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
/* One step of the reduction (AVG sums; its division comes once, in iris_coll_result). */
template <int OP, typename A> IRIS_DEVICE_INLINE A iris_coll_combine(A a, A b) {
  return OP == IRIS_SUM || OP == IRIS_AVG ? iris_coll_add(a, b) : OP == IRIS_MIN ? (b < a ? b : a) : (b > a ? b : a);
}
/* The reduced value in the element type: AVG divides the sum by the world size W first
 * (fp32 division for the float types, rounded once to T by iris_coll_down; integer
 * division, truncating toward zero, for the integer types: NCCL's ncclAvg rule, see
 * IRIS_AVG at the top). */
template <typename T, int OP> IRIS_DEVICE_INLINE T iris_coll_result(typename iris_coll_acc<T>::type acc, int W) {
  typedef typename iris_coll_acc<T>::type A;
  return iris_coll_down<T>(OP == IRIS_AVG ? (A)(acc / (A)W) : acc);
}

/* Kinds of collective. */
enum { IRIS_COLL_AR = 0, IRIS_COLL_AG, IRIS_COLL_RS, IRIS_COLL_A2A, IRIS_COLL_BC, IRIS_COLL_KINDS };
/* A flag OR'ed into the kind given to iris_coll_enqueue (multi-node compositions only):
 * a reduce-scatter whose recv sits at a heap offset that differs from rank to rank (the
 * composition's own part of a buffer). A reduce-scatter's peers never touch its recv (the
 * pull kernel and the LL path write only their own), so recv then enters the call's
 * signature as such, not by its offset. Single-node calls never set it. */
#define IRIS_COLL_OWN_RECV 0x100

/* Everything a collective kernel needs; plain data, passed by value. The state lives
 * on the heap at the same offsets on every rank.
 *
 * Calls and epochs. Every kernel launch of a collective is one "call" of the context,
 * numbered by the call word in device memory (call << 32 | CTAs of that call that have
 * started): every CTA adds one to it as it starts, and the CTA that completes the count
 * moves it on to the next call (iris_coll_call_enter), so a kernel has nothing to do at
 * its end. The host orders a context's launches one after another whatever the stream
 * (iris_detail_order_begin/end in iris.h), so every rank numbers its calls alike, and
 * every value derived from the number (barrier epochs, LL line epochs, progress values)
 * is fresh for every call: a call that failed (a mismatch, a timeout) leaves nothing that
 * a later call could mistake for its own. Nothing is reset; graphs replay.
 *
 * Headers. Each call starts with CTA 0 announcing (call number, signature) into every
 * peer's hdr[call & 1][me]. A rank accepts nothing of a call before it has seen every
 * peer announce the same call with the same signature; a different signature is a
 * mismatch: every rank sees it (each compares every peer's header), none writes a user
 * buffer, and the call is recorded as IRIS_FAULT_MISMATCH.
 *   - The barrier kernels (bandwidth path, device barrier) wait for every header before
 *     they touch anything (iris_coll_call_begin, release/acquire): the header exchange is
 *     their start barrier (a peer that announced call c has finished its call c - 1, so
 *     its buffers are free).
 *   - The LL kernels do not wait for it: they announce (relaxed), push their lines, and
 *     check the headers in the same polls that wait for the peers' lines, so the check
 *     adds no round trip (iris_coll_ll_wait). Their lines land in the LL slots, never in
 *     a user buffer, until every header matched.
 * Two parities suffice: no rank can be two calls ahead of another, because no call of a
 * rank ends before it has seen every peer's header of that call. */
typedef struct iris_coll_dev {
  iris_device_ctx_t ctx;
  unsigned long long *calls; /* the call word: (call number << 32) | CTAs of that call that have started */
  unsigned long long *hdr;   /* [2 parity][IRIS_MAX_RANKS] peers' call headers (signature << 32 | call) */
  unsigned long long *flags; /* [IRIS_COLL_MAX_CTAS][IRIS_MAX_RANKS] barrier epoch that peer p's CTA b reached */
  unsigned long long *progress; /* [IRIS_COLL_MAX_CTAS][IRIS_MAX_RANKS] relay broadcast: owners' (call << 32 | chunks done) */
  uint4 *ll;                 /* [2 parity][world src][ll_lines] LL lines */
  size_t ll_lines;           /* lines per (parity, src) */
  uint4 *ll2;                /* two-shot LL: [2 parity][2 phase][world src][ll2_lines] */
  size_t ll2_lines;          /* lines per (parity, phase, src) */
  char *scratch;             /* store two-shot: [2 halves][CTA][world src][slice], IRIS_COLL_AR_SCRATCH_BYTES */
  int check;                 /* 1: the LL kernels match every peer's call header (IRIS_COLL_CHECK, default) */
} iris_coll_dev_t;

/* Barriers per call at most (a kernel's barrier j of call c has epoch c * this + j + 1). */
#define IRIS_COLL_SYNCS_PER_CALL 8u
/* The fault-word site of wait `what` (IRIS_SITE_*) in a collective of kind KIND. */
#define IRIS_COLL_SITE(kind, what) ((unsigned)(((kind) + 1) << 8) | (unsigned)(what))
#define IRIS_COLL_KIND_DEVICE_BARRIER 5 /* iris_barrier_device, for fault reports */

/* Whole block, first thing of every collective kernel: this launch's call number. One
 * atomic per CTA on the call word; the CTA that completes the launch's count moves the
 * word to the next call (nobody of this launch touches it afterwards, and the next launch
 * starts after this one ends). Thread 0 asks; a block barrier hands the number out. */
IRIS_DEVICE_INLINE unsigned iris_coll_call_enter(const iris_coll_dev_t &d) {
  __shared__ unsigned s_call;
  if (threadIdx.x == 0) {
    const unsigned long long old = atomicAdd(d.calls, 1ULL);
    if ((unsigned)old + 1u == gridDim.x) atomicAdd(d.calls, (1ULL << 32) - gridDim.x);
    s_call = (unsigned)(old >> 32);
  }
  __syncthreads();
  return s_call;
}
/* The epoch before barrier 0 of call c (each barrier adds one). */
IRIS_DEVICE_INLINE unsigned iris_coll_sync_base(unsigned c) { return c * IRIS_COLL_SYNCS_PER_CALL; }
/* The signature as carried in headers: 32 bits, never 0. */
IRIS_DEVICE_INLINE unsigned iris_coll_sig32(unsigned long long sig) { return ((unsigned)sig ^ (unsigned)(sig >> 32)) | 1u; }

/* Whole block; blockDim.x >= world_size. The row's slot p holds the epoch that rank p's
 * block reached; each call advances `epoch` by one and meets every rank's block there:
 * every write this block made before is visible to the other ranks' blocks after it
 * (block barrier, then a release per peer at system scope; acquire per peer, then a
 * block barrier). Returns false in every thread if a wait ran out (the fault is
 * recorded: `site`, the peer, `call`) or the context has a fatal fault. Graph-safe:
 * the epochs are device counters that only count up. */
IRIS_DEVICE_INLINE bool iris_detail_rank_sync(const iris_device_ctx_t &ctx, unsigned long long *row, unsigned &epoch, unsigned site, unsigned call) {
  const int W = ctx.world_size, t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z), me = ctx.rank;
  int ok = 1;
  epoch += 1;
  __syncthreads();
  if (t < W) {
    unsigned long long got = 0, start = 0;
    unsigned spins = 0;
    iris_signal(ctx, row + me, (unsigned long long)epoch, t);
    for (;;) {
      got = iris_atomic_load<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(row + t);
      if (iris_epoch_reached((unsigned)got, epoch)) break;
      if (iris_detail_wait_expired(ctx, spins, start, t, site, call)) { ok = 0; break; }
    }
#if defined(IRIS_DEBUG)
    if (!ok) {
      printf("iris: rank sync timed out on rank %d (block %d): rank %d never reached epoch %u\n", me, (int)blockIdx.x, t, epoch);
      iris_detail_trap();
    }
#endif
  }
  return __syncthreads_and(ok) != 0;
}
/* Whole block: barrier number (epoch - base) of call c for this CTA index. */
IRIS_DEVICE_INLINE bool iris_coll_barrier(const iris_coll_dev_t &d, unsigned &epoch, unsigned c, int kind) {
  return iris_detail_rank_sync(d.ctx, d.flags + (size_t)blockIdx.x * IRIS_MAX_RANKS, epoch, IRIS_COLL_SITE(kind, IRIS_SITE_BARRIER), c);
}

/* Whole block, before the kernel reads anything a peer wrote in this call: CTA 0
 * announces call c with signature sig32 to every peer (release at system scope), and
 * every CTA waits (acquire) until every peer has announced call c. True if they all
 * announced the same signature. False in every thread on a mismatch (recorded as
 * IRIS_FAULT_MISMATCH; every rank sees it, so no rank moves data for the call), a wait
 * that ran out, or a fatal fault of the context. */
IRIS_DEVICE_INLINE bool iris_coll_call_begin(const iris_coll_dev_t &d, unsigned c, unsigned sig32, int kind) {
  const int W = d.ctx.world_size, me = d.ctx.rank, t = threadIdx.x;
  unsigned long long *hdr = d.hdr + (size_t)(c & 1) * IRIS_MAX_RANKS;
  int ok = 1;
  if (blockIdx.x == 0 && t < W && t != me) iris_signal(d.ctx, hdr + me, ((unsigned long long)sig32 << 32) | c, t);
  if (t < W && t != me) {
    unsigned long long v = 0, start = 0;
    unsigned spins = 0;
    for (;;) {
      v = iris_atomic_load<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(hdr + t);
      if ((v >> 32) != 0 && (unsigned)v == c) break;
      if (iris_detail_wait_expired(d.ctx, spins, start, t, IRIS_COLL_SITE(kind, IRIS_SITE_HEADER), c)) { ok = 0; break; }
    }
#if defined(IRIS_DEBUG)
    if (!ok) {
      printf("iris: collective call %u on rank %d (block %d): rank %d never announced it\n", c, me, (int)blockIdx.x, t);
      iris_detail_trap();
    }
#endif
    if (ok && (unsigned)(v >> 32) != sig32) {
      ok = 0;
      if (blockIdx.x == 0) iris_detail_record_fault(d.ctx, IRIS_FAULT_MISMATCH, t, IRIS_COLL_SITE(kind, IRIS_SITE_HEADER), c);
#if defined(IRIS_DEBUG)
      printf("iris: collective mismatch on rank %d (block %d, call %u): rank %d called a different collective, count, type, op, root or buffers\n", me,
             (int)blockIdx.x, c, t);
      iris_detail_trap();
#endif
    }
  }
  return __syncthreads_and(ok) != 0;
}

/* Whole block, first thing of every barrier-based kernel: this launch's call number and
 * the epoch before its first barrier; false when the call must not go on: a mismatch,
 * a wait that ran out, or a fatal fault. Then the kernel returns. */
IRIS_DEVICE_INLINE bool iris_coll_kernel_start(const iris_coll_dev_t &d, unsigned long long sig, int kind, unsigned &call, unsigned &epoch) {
  call = iris_coll_call_enter(d);
  epoch = iris_coll_sync_base(call);
  return iris_coll_call_begin(d, call, iris_coll_sig32(sig), kind);
}

/* ---- LL lines: 16 bytes = 8 data bytes + the epoch twice, stored and loaded so that
 * each 8-byte half (4 data bytes + epoch) is one single-copy-atomic access. */
IRIS_DEVICE_INLINE void iris_coll_ll_store(uint4 *p, uint2 data, unsigned epoch) {
#if defined(IRIS_USE_HIP)
  unsigned long long lo = (unsigned long long)data.x | ((unsigned long long)epoch << 32), hi = (unsigned long long)data.y | ((unsigned long long)epoch << 32);
  __hip_atomic_store((unsigned long long *)p, lo, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  __hip_atomic_store((unsigned long long *)p + 1, hi, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(data.x), "r"(epoch), "r"(data.y), "r"(epoch) : "memory");
#endif
}
/* One read of an LL line (each 8-byte half single-copy atomic). */
IRIS_DEVICE_INLINE uint4 iris_coll_ll_peek(const uint4 *p) {
#if defined(IRIS_USE_HIP)
  unsigned long long lo = __hip_atomic_load((const unsigned long long *)p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  unsigned long long hi = __hip_atomic_load((const unsigned long long *)p + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  return make_uint4((unsigned)lo, (unsigned)(lo >> 32), (unsigned)hi, (unsigned)(hi >> 32));
#else
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
#endif
}
/* Whether a line read by iris_coll_ll_peek carries epoch in both halves (then *data). */
IRIS_DEVICE_INLINE bool iris_coll_ll_ready(uint4 v, unsigned epoch, uint2 *data) {
  if (v.y != epoch || v.w != epoch) return false;
  data->x = v.x;
  data->y = v.z;
  return true;
}
/* ---- call headers seen from the LL kernels (see "Headers" above iris_coll_dev_t) */
/* Bit r set for every peer r of rank me in a world of W (W <= IRIS_MAX_RANKS <= 64). */
typedef unsigned long long iris_coll_mask_t;
IRIS_DEVICE_INLINE iris_coll_mask_t iris_coll_peer_mask(int W, int me) { return (W >= 64 ? ~0ULL : (1ULL << W) - 1ULL) & ~(1ULL << me); }
/* CTA 0, one thread per peer: announce call c with signature sig32 in every peer's header
 * slot, without waiting (relaxed: an LL line carries its own flag, and no data is read
 * on the strength of a header). */
IRIS_DEVICE_INLINE void iris_coll_announce(const iris_coll_dev_t &d, unsigned c, unsigned sig32) {
  const int t = threadIdx.x;
  if (blockIdx.x == 0 && t < d.ctx.world_size && t != d.ctx.rank)
    iris_signal_relaxed(d.ctx, d.hdr + (size_t)(c & 1) * IRIS_MAX_RANKS + d.ctx.rank, ((unsigned long long)sig32 << 32) | c, t);
}
/* Two adjacent 8-byte words, each read single-copy atomically (one 16-byte load on NVIDIA;
 * a header row pair starts 16-byte aligned because IRIS_MAX_RANKS is even). */
static_assert(IRIS_MAX_RANKS % 2 == 0, "IRIS_MAX_RANKS must be even (the call headers are read in 16-byte pairs)");
IRIS_DEVICE_INLINE void iris_coll_ld2(const unsigned long long *p, unsigned long long &a, unsigned long long &b) {
#if defined(IRIS_USE_HIP)
  a = __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  b = __hip_atomic_load(p + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
#endif
}
/* One thread: reads every peer's header slot of call c at once (all loads in flight) and
 * sets bit r of `seen` for each peer r that announced (c, sig32). Returns 1 once every
 * peer of `all` is seen, 0 while some have not announced call c yet (*who: one of them),
 * -1 if a peer announced call c with another signature (*who: that peer). */
IRIS_DEVICE_INLINE int iris_coll_headers_poll(const iris_coll_dev_t &d, unsigned c, unsigned sig32, iris_coll_mask_t all, iris_coll_mask_t &seen, int &who) {
  const unsigned long long *row = d.hdr + (size_t)(c & 1) * IRIS_MAX_RANKS, want = ((unsigned long long)sig32 << 32) | c;
  const int W = d.ctx.world_size;
  int st = 1;
#pragma unroll
  for (int k = 0; k < IRIS_MAX_RANKS; k += 2) {
    unsigned long long v[2];
    if (k >= W) break;
    iris_coll_ld2(row + k, v[0], v[1]);
#pragma unroll
    for (int j = 0; j < 2; j++) {
      if (!((all & ~seen) >> (k + j) & 1)) continue;
      if (v[j] == want) seen |= 1ULL << (k + j);
      else if ((unsigned)v[j] == c && (v[j] >> 32) != 0) { who = k + j; return -1; }
      else { who = k + j; st = 0; }
    }
  }
  return st;
}
/* After a mismatch in an LL kernel (peer `who` announced call c with another signature):
 * record it (CTA 0), then wait until every peer has announced call c, whatever its
 * signature, so that this rank ends the call only when no peer can still be in call
 * c - 1 (what the good path guarantees by matching every header). Returns -1. */
IRIS_DEVICE_INLINE int iris_coll_ll_mismatch(const iris_coll_dev_t &d, unsigned c, int who, int kind) {
  const unsigned long long *row = d.hdr + (size_t)(c & 1) * IRIS_MAX_RANKS;
  const unsigned site = IRIS_COLL_SITE(kind, IRIS_SITE_HEADER);
  unsigned long long start = 0;
  unsigned spins = 0;
  if (blockIdx.x == 0) iris_detail_record_fault(d.ctx, IRIS_FAULT_MISMATCH, who, site, c);
#if defined(IRIS_DEBUG)
  printf("iris: collective mismatch on rank %d (block %d, call %u): rank %d called a different collective, count, type, op, root or buffers\n", d.ctx.rank,
         (int)blockIdx.x, c, who);
  iris_detail_trap();
#endif
  for (int r = 0; r < d.ctx.world_size; r++)
    while (r != d.ctx.rank && (unsigned)iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(row + r) != c)
      if (iris_detail_wait_expired(d.ctx, spins, start, r, site, c)) return -1;
  return -1;
}
/* One thread of an LL kernel of kind `kind`, call c: waits until the LL line p written by
 * `peer` carries epoch (then *data) AND every peer of `all` has announced (c, sig32)
 * (checked in the same polls, so it costs no round trip; `seen` remembers who did).
 * p == NULL: the headers alone. Returns 1 when both hold, so the caller may write its
 * output; 0 when a wait ran out (recorded as a fault) or the context has a fatal fault;
 * -1 on a mismatch (recorded). */
IRIS_DEVICE_INLINE int iris_coll_ll_wait(const iris_coll_dev_t &d, const uint4 *p, unsigned epoch, uint2 *data, int peer, unsigned c, unsigned sig32,
                                         iris_coll_mask_t all, iris_coll_mask_t &seen, int kind) {
  unsigned long long start = 0;
  unsigned spins = 0;
  for (;;) {
    const uint4 v = p ? iris_coll_ll_peek(p) : make_uint4(0, 0, 0, 0);
    int who = peer;
    if (seen != all && iris_coll_headers_poll(d, c, sig32, all, seen, who) < 0) return iris_coll_ll_mismatch(d, c, who, kind);
    if (seen == all && (!p || iris_coll_ll_ready(v, epoch, data))) return 1;
    if (iris_detail_wait_expired(d.ctx, spins, start, who, IRIS_COLL_SITE(kind, seen == all ? IRIS_SITE_LL : IRIS_SITE_HEADER), c)) break;
  }
#if defined(IRIS_DEBUG)
  printf("iris: LL wait timed out on rank %d (block %d, thread %d, call %u): %s of rank %d never came\n", d.ctx.rank, (int)blockIdx.x, (int)threadIdx.x, c,
         seen == all ? "a data line" : "the call header", peer);
  iris_detail_trap();
#endif
  return 0;
}

/* Peers per batch of iris_coll_ll_wait_all: its loads are in flight together, and its
 * registers (a 16-byte line and 8 bytes of data per peer) bound the LL kernels' size. */
#define IRIS_COLL_LL_GROUP 8
/* One thread of an LL kernel: as iris_coll_ll_wait, for the peers of `want` among ranks
 * r0 .. r0 + IRIS_COLL_LL_GROUP - 1 at once; the line of rank r is at base + r * stride.
 * Each poll peeks at every pending line (all loads in flight, so the peers cost one
 * memory round trip, not one each) and, until all are seen, the headers. Fills
 * in[r - r0] for every r of the batch in `want`. */
IRIS_DEVICE_INLINE int iris_coll_ll_wait_all(const iris_coll_dev_t &d, const uint4 *base, size_t stride, iris_coll_mask_t want, int r0, unsigned epoch,
                                             uint2 (&in)[IRIS_COLL_LL_GROUP], unsigned c, unsigned sig32, iris_coll_mask_t all, iris_coll_mask_t &seen, int kind) {
  unsigned long long start = 0;
  unsigned spins = 0;
  unsigned pending = (unsigned)(want >> r0) & ((1u << IRIS_COLL_LL_GROUP) - 1u);
  base += (size_t)r0 * stride;
  for (;;) {
    uint4 v[IRIS_COLL_LL_GROUP];
#pragma unroll
    for (int k = 0; k < IRIS_COLL_LL_GROUP; k++) v[k] = pending >> k & 1 ? iris_coll_ll_peek(base + (size_t)k * stride) : make_uint4(0, 0, 0, 0);
    int who = -1;
    if (seen != all && iris_coll_headers_poll(d, c, sig32, all, seen, who) < 0) return iris_coll_ll_mismatch(d, c, who, kind);
#pragma unroll
    for (int k = 0; k < IRIS_COLL_LL_GROUP; k++)
      if ((pending >> k & 1) && iris_coll_ll_ready(v[k], epoch, &in[k])) pending &= ~(1u << k);
    if (!pending && seen == all) return 1;
    if (who < 0) who = pending ? r0 + __ffs(pending) - 1 : 0;
    if (iris_detail_wait_expired(d.ctx, spins, start, who, IRIS_COLL_SITE(kind, seen == all ? IRIS_SITE_LL : IRIS_SITE_HEADER), c)) break;
  }
#if defined(IRIS_DEBUG)
  printf("iris: LL wait timed out on rank %d (block %d, thread %d, call %u): %s of rank %d never came\n", d.ctx.rank, (int)blockIdx.x, (int)threadIdx.x, c,
         seen == all ? "a data line" : "the call header", pending ? r0 + __ffs(pending) - 1 : 0);
  iris_detail_trap();
#endif
  return 0;
}

/* 8 bytes of a T array at line i (elements past n read as 0, none read out of bounds). */
template <typename T>
IRIS_DEVICE_INLINE uint2 iris_coll_read8(const T *base, size_t i, size_t n) {
  const size_t per = 8 / sizeof(T);
  union { uint2 u; T e[8 / sizeof(T)]; } v;
  if ((i + 1) * per <= n && (((uintptr_t)base) & 7) == 0) return *(const uint2 *)(base + i * per);
  v.u = make_uint2(0, 0);
  for (size_t k = 0; k < per && i * per + k < n; k++) v.e[k] = base[i * per + k];
  return v.u;
}
template <typename T>
IRIS_DEVICE_INLINE void iris_coll_write8(T *base, size_t i, size_t n, uint2 data) {
  const size_t per = 8 / sizeof(T);
  union { uint2 u; T e[8 / sizeof(T)]; } v;
  v.u = data;
  if ((i + 1) * per <= n && (((uintptr_t)base) & 7) == 0) { *(uint2 *)(base + i * per) = data; return; }
  for (size_t k = 0; k < per && i * per + k < n; k++) base[i * per + k] = v.e[k];
}
/* ---- the latency kernel: every kind, one launch, no barrier.
 * Lines are spread over the grid the same way on every rank. CTA 0 announces the call;
 * each thread pushes its lines to every peer, then collects its lines from every peer in
 * rank order, writing recv only once every peer's header of this call matched
 * (iris_coll_ll_wait). The lines carry the call number + 1, and the receive slots
 * alternate by call parity. Two parities suffice: a rank's call c pushes into slot
 * parity c & 1 of a peer, which that peer last read in its call c - 2; our call c - 1
 * saw that peer's header of call c - 1, so its call c - 2 was over. (A broadcast root
 * waits for nobody's data, but it too waits for every header.) */
template <typename T, int KIND, int OP>
__global__ void iris_coll_ll_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, int root, unsigned long long sig) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const size_t lines = (count * sizeof(T) + 7) / 8, stride = (size_t)gridDim.x * blockDim.x;
  const unsigned c = iris_coll_call_enter(d), epoch = c + 1, sig32 = iris_coll_sig32(sig);
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me);
  /* the headers to match: every peer's; with IRIS_COLL_CHECK=0 only a broadcast root's
   * (its one flow control: no rank is two calls behind) */
  const iris_coll_mask_t all = d.check || (KIND == IRIS_COLL_BC && me == root) ? peers : 0ULL;
  uint4 *mine = d.ll + ((size_t)(c & 1) * W) * d.ll_lines; /* [src][line] for this parity */
  const bool chunked = KIND == IRIS_COLL_RS || KIND == IRIS_COLL_A2A; /* send has one chunk per peer */
  iris_coll_mask_t seen = 0;
  int ok = 1;
  iris_coll_announce(d, c, sig32);
  /* push */
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < lines; i += stride) {
    if (KIND == IRIS_COLL_BC && me != root) break;
    uint2 v = iris_coll_read8(send, i, count);
    for (int k = 1; k < W; k++) {
      const int p = (me + k) % W;
      if (chunked) v = iris_coll_read8(send + (size_t)p * count, i, count);
      iris_coll_ll_store(iris_translate(d.ctx, mine + (size_t)me * d.ll_lines + i, p), v, epoch);
    }
  }
  /* collect */
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; ok > 0 && i < lines; i += stride) {
    if (KIND == IRIS_COLL_AR || KIND == IRIS_COLL_RS) {
      typedef typename iris_coll_acc<T>::type A;
      union { uint2 u; T e[8 / sizeof(T)]; } x;
      A acc[8 / sizeof(T)];
      uint2 in[IRIS_COLL_LL_GROUP];
      const uint2 own = iris_coll_read8(send + (chunked ? (size_t)me * count : 0), i, count);
      for (int r0 = 0; ok > 0 && r0 < W; r0 += IRIS_COLL_LL_GROUP) { /* rank order, accumulated wide: the same result on every rank */
        if ((ok = iris_coll_ll_wait_all(d, mine + i, d.ll_lines, peers, r0, epoch, in, c, sig32, all, seen, KIND)) <= 0) break;
#pragma unroll
        for (int j = 0; j < IRIS_COLL_LL_GROUP; j++) {
          const int r = r0 + j;
          if (r >= W) break;
          x.u = r == me ? own : in[j];
#pragma unroll
          for (int k = 0; k < (int)(8 / sizeof(T)); k++) acc[k] = r == 0 ? iris_coll_up(x.e[k]) : iris_coll_combine<OP>(acc[k], iris_coll_up(x.e[k]));
        }
      }
      if (ok <= 0) break;
#pragma unroll
      for (int k = 0; k < (int)(8 / sizeof(T)); k++) x.e[k] = iris_coll_result<T, OP>(acc[k], W);
      iris_coll_write8(recv, i, count, x.u);
    } else if (KIND == IRIS_COLL_BC) {
      uint2 v;
      if (me == root) { /* no data to wait for; the headers still */
        if ((ok = iris_coll_ll_wait(d, NULL, epoch, &v, root, c, sig32, all, seen, KIND)) <= 0) break;
        v = iris_coll_read8(send, i, count);
      } else if ((ok = iris_coll_ll_wait(d, mine + (size_t)root * d.ll_lines + i, epoch, &v, root, c, sig32, all, seen, KIND)) <= 0) {
        break;
      }
      iris_coll_write8(recv, i, count, v);
    } else { /* AG, A2A */
      uint2 in[IRIS_COLL_LL_GROUP];
      const uint2 own = iris_coll_read8(send + (chunked ? (size_t)me * count : 0), i, count);
      for (int r0 = 0; ok > 0 && r0 < W; r0 += IRIS_COLL_LL_GROUP) {
        if ((ok = iris_coll_ll_wait_all(d, mine + i, d.ll_lines, peers, r0, epoch, in, c, sig32, all, seen, KIND)) <= 0) break;
#pragma unroll
        for (int j = 0; j < IRIS_COLL_LL_GROUP; j++) {
          const int r = r0 + j;
          if (r >= W) break;
          iris_coll_write8(recv + (size_t)r * count, i, count, r == me ? own : in[j]);
        }
      }
    }
  }
}

/* ---- the two-shot LL all-reduce: one kernel, no barrier, every flag in the data.
 * Chunk j (ce elements, whole LL lines) belongs to rank j. Each thread owns one line
 * index l of every chunk:
 *   1. push   its line l of chunk p into rank p's phase-0 slot [me], for every peer p;
 *   2. reduce line l of its own chunk: its own value and the W-1 lines that arrive in
 *             its phase-0 slots, in rank order (these waits also match every peer's
 *             header); write it to recv and push it into every peer's phase-1 slot [me];
 *   3. collect line l of every other chunk from its phase-1 slots into recv.
 * Line l of every slot is always handled by thread index l (one line per thread, the
 * grid covers the chunk), so the epochs a line carries only grow whatever the calls
 * before were. Two parities suffice: no rank finishes a call before every rank has
 * pushed its part of it. In place works: a thread reads line l of every chunk of send
 * (step 1) before it writes line l of any chunk of recv. */
#define IRIS_COLL_LL2_THREADS 256
static_assert(IRIS_COLL_LL2_BYTES % 8 == 0 && IRIS_COLL_LL2_BYTES / 8 <= (size_t)IRIS_COLL_MAX_CTAS * IRIS_COLL_LL2_THREADS, "a two-shot LL chunk must fit the grid");
template <typename T, int OP>
__global__ void __launch_bounds__(IRIS_COLL_LL2_THREADS, 2) iris_coll_ll2_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, unsigned long long sig) {
  typedef typename iris_coll_acc<T>::type A;
  enum { per = 8 / sizeof(T) };
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const size_t ce = iris_coll_ar_chunk(count, W, per), lines = ce / per; /* the chunks of iris_coll_ar_range, in LL lines */
  const size_t l = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const unsigned c = iris_coll_call_enter(d), epoch = c + 1, sig32 = iris_coll_sig32(sig);
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me), all = d.check ? peers : 0ULL;
  uint4 *const ph0 = d.ll2 + (size_t)(c & 1) * 2 * W * d.ll2_lines, *const ph1 = ph0 + (size_t)W * d.ll2_lines;
#define IRIS_COLL_LL2_N(j) ((size_t)(j) * ce >= count ? (size_t)0 : count - (size_t)(j) * ce < ce ? count - (size_t)(j) * ce : ce) /* elements of chunk j */
  union { uint2 u; T e[per]; } x;
  iris_coll_mask_t seen = 0;
  int k, r;
  iris_coll_announce(d, c, sig32);
  if (l >= lines) return;
  for (k = 1; k < W; k++) { /* 1. push */
    const int p = (me + k) % W;
    x.u = iris_coll_read8(send + (size_t)p * ce, l, IRIS_COLL_LL2_N(p));
    iris_coll_ll_store(iris_translate(d.ctx, ph0 + (size_t)me * d.ll2_lines + l, p), x.u, epoch);
  }
  uint2 in[IRIS_COLL_LL_GROUP];
  const uint2 own = iris_coll_read8(send + (size_t)me * ce, l, IRIS_COLL_LL2_N(me));
  A acc[per];
  for (int r0 = 0; r0 < W; r0 += IRIS_COLL_LL_GROUP) { /* 2. reduce, rank order: the same result on every rank */
    if (iris_coll_ll_wait_all(d, ph0 + l, d.ll2_lines, peers, r0, epoch, in, c, sig32, all, seen, IRIS_COLL_AR) <= 0) return;
#pragma unroll
    for (int j = 0; j < IRIS_COLL_LL_GROUP; j++) {
      r = r0 + j;
      if (r >= W) break;
      x.u = r == me ? own : in[j];
#pragma unroll
      for (k = 0; k < per; k++) acc[k] = r == 0 ? iris_coll_up(x.e[k]) : iris_coll_combine<OP>(acc[k], iris_coll_up(x.e[k]));
    }
  }
#pragma unroll
  for (k = 0; k < per; k++) x.e[k] = iris_coll_result<T, OP>(acc[k], W);
  iris_coll_write8(recv + (size_t)me * ce, l, IRIS_COLL_LL2_N(me), x.u);
  for (k = 1; k < W; k++) iris_coll_ll_store(iris_translate(d.ctx, ph1 + (size_t)me * d.ll2_lines + l, (me + k) % W), x.u, epoch);
  for (int r0 = 0; r0 < W; r0 += IRIS_COLL_LL_GROUP) { /* 3. collect */
    if (iris_coll_ll_wait_all(d, ph1 + l, d.ll2_lines, peers, r0, epoch, in, c, sig32, all, seen, IRIS_COLL_AR) <= 0) return;
#pragma unroll
    for (int j = 0; j < IRIS_COLL_LL_GROUP; j++) {
      r = r0 + j;
      if (r >= W) break;
      if (r != me) iris_coll_write8(recv + (size_t)r * ce, l, IRIS_COLL_LL2_N(r), in[j]);
    }
  }
#undef IRIS_COLL_LL2_N
}

/* ---- the two-hop LL broadcast (IRIS_ALGO_TWO_SHOT_LL for broadcast, W >= 3): the LL
 * form of the relay, for mid sizes. The message's LL lines are cut into W-1 parts of
 * `pl` lines (the last may be short); part p belongs to non-root (root + 1 + p) % W
 * (iris_coll_relay_owner). Thread l handles line l of every part:
 *   root:     pushes line l of part p into its owner's phase-0 slot [root], for every p;
 *             then matches every peer's header and copies its own lines into recv;
 *   non-root: waits for line l of its part (phase 0, from the root; the headers in the
 *             same polls), writes it to recv and pushes it into every other non-root's
 *             phase-1 slot [me]; then collects line l of every other part from phase 1.
 * The root's links carry the message once (in LL form), not W - 1 times as in the
 * one-hop LL kernel; one more hop of latency. Slots, epochs and parities as the
 * two-shot LL all-reduce (the two kernels share its area): line l of every slot is
 * always handled by thread l; the root matches every header (even with IRIS_COLL_CHECK=0:
 * it is its flow control), every non-root hears from every other non-root. */
template <typename T>
__global__ void __launch_bounds__(IRIS_COLL_LL2_THREADS, 2) iris_coll_bc_ll2_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, int root,
                                                                                 unsigned long long sig) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const size_t lines = (count * sizeof(T) + 7) / 8, pl = (lines + (size_t)W - 2) / (size_t)(W - 1);
  const size_t l = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const unsigned c = iris_coll_call_enter(d), epoch = c + 1, sig32 = iris_coll_sig32(sig);
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me);
  const iris_coll_mask_t all = d.check || me == root ? peers : 0ULL, others = peers & ~(1ULL << root); /* the other non-roots */
  uint4 *const ph0 = d.ll2 + (size_t)(c & 1) * 2 * W * d.ll2_lines, *const ph1 = ph0 + (size_t)W * d.ll2_lines;
  iris_coll_mask_t seen = 0;
  uint2 v;
  iris_coll_announce(d, c, sig32);
  if (l >= pl) return;
  if (me == root) {
    for (int p = 0; p < W - 1; p++)
      if ((size_t)p * pl + l < lines)
        iris_coll_ll_store(iris_translate(d.ctx, ph0 + (size_t)root * d.ll2_lines + l, iris_coll_relay_owner(p, root, W)), iris_coll_read8(send, (size_t)p * pl + l, count),
                           epoch);
    if (iris_coll_ll_wait(d, NULL, epoch, &v, root, c, sig32, all, seen, IRIS_COLL_BC) <= 0 || send == recv) return;
    for (int p = 0; p < W - 1; p++)
      if ((size_t)p * pl + l < lines) iris_coll_write8(recv, (size_t)p * pl + l, count, iris_coll_read8(send, (size_t)p * pl + l, count));
    return;
  }
  const int q = iris_coll_relay_part(me, root, W); /* my part */
  uint2 in[IRIS_COLL_LL_GROUP];
  if ((size_t)q * pl + l < lines) {
    if (iris_coll_ll_wait(d, ph0 + (size_t)root * d.ll2_lines + l, epoch, &v, root, c, sig32, all, seen, IRIS_COLL_BC) <= 0) return;
    iris_coll_write8(recv, (size_t)q * pl + l, count, v);
    for (int k = 1; k < W; k++) {
      const int r = (me + k) % W;
      if (r != root) iris_coll_ll_store(iris_translate(d.ctx, ph1 + (size_t)me * d.ll2_lines + l, r), v, epoch);
    }
  }
  iris_coll_mask_t want = 0; /* the other parts that have a line l */
  for (int r = 0; r < W; r++)
    if ((others >> r & 1) && r != me && (size_t)iris_coll_relay_part(r, root, W) * pl + l < lines) want |= 1ULL << r;
  for (int r0 = 0; r0 < W; r0 += IRIS_COLL_LL_GROUP) {
    if (iris_coll_ll_wait_all(d, ph1 + l, d.ll2_lines, want, r0, epoch, in, c, sig32, all, seen, IRIS_COLL_BC) <= 0) return;
#pragma unroll
    for (int j = 0; j < IRIS_COLL_LL_GROUP; j++)
      if (r0 + j < W && (want >> (r0 + j) & 1)) iris_coll_write8(recv, (size_t)iris_coll_relay_part(r0 + j, root, W) * pl + l, count, in[j]);
  }
}

/* ---- the bandwidth kernels: pull with 16-byte loads between per-CTA barriers. */
template <typename T, int OP, int W_STATIC>
IRIS_DEVICE_INLINE uint4 iris_coll_reduce16(const iris_device_ctx_t &ctx, const T *const *src, size_t v, int W) {
  union U { uint4 u; T e[16 / sizeof(T)]; };
  typedef typename iris_coll_acc<T>::type A;
  const int per = 16 / sizeof(T);
  U in[W_STATIC > 0 ? W_STATIC : 1];
  A acc[16 / sizeof(T)];
  (void)ctx;
  if (W_STATIC > 0) {
#pragma unroll
    for (int r = 0; r < (W_STATIC > 0 ? W_STATIC : 1); r++) in[r].u = ((const uint4 *)src[r])[v]; /* all loads in flight first */
#pragma unroll
    for (int k = 0; k < per; k++) acc[k] = iris_coll_up(in[0].e[k]);
#pragma unroll
    for (int r = 1; r < (W_STATIC > 0 ? W_STATIC : 1); r++)
#pragma unroll
      for (int k = 0; k < per; k++) acc[k] = iris_coll_combine<OP>(acc[k], iris_coll_up(in[r].e[k]));
  } else {
    U x;
    x.u = ((const uint4 *)src[0])[v];
    for (int k = 0; k < per; k++) acc[k] = iris_coll_up(x.e[k]);
    for (int r = 1; r < W; r++) {
      x.u = ((const uint4 *)src[r])[v];
      for (int k = 0; k < per; k++) acc[k] = iris_coll_combine<OP>(acc[k], iris_coll_up(x.e[k]));
    }
  }
  U out;
#pragma unroll
  for (int k = 0; k < per; k++) out.e[k] = iris_coll_result<T, OP>(acc[k], W_STATIC > 0 ? W_STATIC : W);
  return out.u;
}
template <typename T, int OP>
IRIS_DEVICE_INLINE T iris_coll_reduce1(const T *const *src, size_t i, int W) {
  typename iris_coll_acc<T>::type acc = iris_coll_up(src[0][i]);
  for (int r = 1; r < W; r++) acc = iris_coll_combine<OP>(acc, iris_coll_up(src[r][i]));
  return iris_coll_result<T, OP>(acc, W);
}

/* Reduce elements [lo, hi) of the W sources into each of the nd destinations (the
 * first one local, the others may be peers' buffers), 16 bytes at a time where all
 * pointers are 16-byte aligned. Cooperative: thread tid of nt (the grid or a block). */
template <typename T, int OP, int W_STATIC>
IRIS_DEVICE_INLINE void iris_coll_reduce_range(const iris_device_ctx_t &ctx, const T *const *src, T *const *dst, int nd, size_t lo, size_t hi, int W, bool vec,
                                               size_t tid, size_t nt) {
  const size_t per = 16 / sizeof(T);
  size_t done = lo;
  const size_t v0 = (lo + per - 1) / per, v1 = hi / per;
  int j;
  if (vec && v1 > v0) {
    for (size_t v = v0 + tid; v < v1; v += nt) {
      const uint4 x = iris_coll_reduce16<T, OP, W_STATIC>(ctx, src, v, W);
      for (j = 0; j < nd; j++) ((uint4 *)dst[j])[v] = x;
    }
    for (size_t i = lo + tid; i < v0 * per; i += nt) {
      const T x = iris_coll_reduce1<T, OP>(src, i, W);
      for (j = 0; j < nd; j++) dst[j][i] = x;
    }
    done = v1 * per;
  }
  for (size_t i = done + tid; i < hi; i += nt) {
    const T x = iris_coll_reduce1<T, OP>(src, i, W);
    for (j = 0; j < nd; j++) dst[j][i] = x;
  }
}

/* Two-shot all-reduce and reduce-scatter (pull). AR: rank r reduces chunk r of every
 * rank's send into its recv, then (after a barrier) pulls every other reduced chunk
 * from its owner's recv. RS: rank r reduces block r of every send into recv. */
template <typename T, int KIND, int OP, int W_STATIC>
__global__ void iris_coll_reduce_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, unsigned long long sig, int vec, int push) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
  unsigned c, epoch;
  const size_t per = 16 / sizeof(T);
  const T *src[IRIS_MAX_RANKS];
  /* every rank runs this call and its send is ready (the header is the start barrier);
   * on a mismatch or a failed wait nothing moves */
  if (!iris_coll_kernel_start(d, sig, KIND, c, epoch)) return;
  for (int r = 0; r < W; r++) src[r] = iris_translate(d.ctx, send, r) + (KIND == IRIS_COLL_RS ? (size_t)me * count : 0);
  { /* AR: this rank's chunk of whole vectors (iris_coll_ar_range); RS: all of its block */
    size_t lo = 0, hi = count;
    T *dst[IRIS_MAX_RANKS];
    int nd = 1;
    dst[0] = recv;
    if (KIND == IRIS_COLL_AR) {
      iris_coll_ar_range(count, W, per, me, &lo, &hi);
      /* push: the reduced chunk goes to every rank's recv as it is computed */
      if (push)
        for (int k = 1; k < W; k++) dst[nd++] = iris_translate(d.ctx, recv, iris_coll_ar_peer(me, k, (int)blockIdx.x, W));
    }
    iris_coll_reduce_range<T, OP, W_STATIC>(d.ctx, src, dst, nd, lo, hi, W, vec != 0, blockIdx.x * (size_t)blockDim.x + threadIdx.x,
                                            (size_t)gridDim.x * blockDim.x);
  }
  if (KIND == IRIS_COLL_AR && push) { /* every chunk is in every recv; no peer still reads our send */
    iris_coll_barrier(d, epoch, c, KIND);
    return;
  }
  if (KIND == IRIS_COLL_AR) {
    if (!iris_coll_barrier(d, epoch, c, KIND)) return; /* every reduced chunk is in its owner's recv */
    for (int k = 1; k < W; k++) { /* CTAs start at different peers: every link busy at once */
      const int p = iris_coll_ar_peer(me, k, (int)blockIdx.x, W);
      size_t lo, hi;
      iris_coll_ar_range(count, W, per, p, &lo, &hi);
      if (lo >= hi) continue;
      iris_copy_bytes(recv + lo, iris_translate(d.ctx, (const T *)recv, p) + lo, (hi - lo) * sizeof(T), blockIdx.x * blockDim.x + threadIdx.x,
                      gridDim.x * blockDim.x);
    }
    iris_coll_barrier(d, epoch, c, KIND); /* no peer still reads our recv: the caller may write it */
  } else {
    iris_coll_barrier(d, epoch, c, KIND); /* no peer still reads our send */
  }
}

/* All-gather, all-to-all, and broadcast at 2 ranks or below IRIS_COLL_RELAY_MIN_BYTES:
 * each rank stores its blocks into the peers (IRIS_COLL_PUSH; or loads the peers'
 * blocks), between a start barrier (every peer's recv is free) and an end barrier
 * (every block has landed; no peer still reads our send). (A larger broadcast at 3 or
 * more ranks uses the relay, iris_coll_relay_kernel below.) */
template <int KIND>
__global__ void iris_coll_copy_kernel(iris_coll_dev_t d, const char *send, char *recv, size_t bytes, int root, unsigned long long sig) {
  const int W = d.ctx.world_size, me = d.ctx.rank, tid = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
  unsigned c, epoch;
  if (!iris_coll_kernel_start(d, sig, KIND, c, epoch)) return; /* mismatch or timeout: move nothing */
  if (KIND == IRIS_COLL_BC) {
#if IRIS_COLL_PUSH
    if (me == root) /* push: the root stores into every peer's recv (the closing barrier publishes it) */
      for (int k = 0; k < W; k++) {
        const int r = (me + k + (int)blockIdx.x) % W; /* CTAs start at different peers */
        if (r != me) iris_put_bulk(d.ctx, recv, send, bytes, r, tid, nt);
        else if (send != recv) iris_copy_bytes(recv, send, bytes, tid, nt);
      }
#else
    if (me != root) iris_get_bulk(d.ctx, recv, send, bytes, root, tid, nt);
    else if (send != recv) iris_copy_bytes(recv, send, bytes, tid, nt);
#endif
  } else {
    /* an in-place all-gather's input is recv's own block, at a different offset on
     * every rank: pull rank r's block from rank r's recv */
    const bool ag_in_place = KIND == IRIS_COLL_AG && send == recv + (size_t)me * bytes;
    for (int k = 0; k < W; k++) {
      const int r = (me + k + (int)blockIdx.x) % W; /* CTAs start at different peers */
#if IRIS_COLL_PUSH
      /* push: this rank's block for r into r's recv (the closing barrier publishes it) */
      const char *mine = KIND == IRIS_COLL_A2A ? send + (size_t)r * bytes : send;
      if (r == me) {
        if (KIND == IRIS_COLL_A2A ? send != recv : !ag_in_place) iris_copy_bytes(recv + (size_t)me * bytes, mine, bytes, tid, nt);
      } else {
        iris_put_bulk(d.ctx, recv + (size_t)me * bytes, mine, bytes, r, tid, nt);
      }
#else
      const char *src = ag_in_place ? recv + (size_t)r * bytes : send + (KIND == IRIS_COLL_A2A ? (size_t)me * bytes : 0);
      if (r == me) {
        if (KIND == IRIS_COLL_A2A ? send != recv : send != recv + (size_t)me * bytes) iris_copy_bytes(recv + (size_t)me * bytes, src, bytes, tid, nt);
      } else {
        iris_get_bulk(d.ctx, recv + (size_t)r * bytes, src, bytes, r, tid, nt);
      }
#endif
    }
  }
  iris_coll_barrier(d, epoch, c, KIND);
}

/* ---- progress flags: one producer CTA tells the same CTA index of other ranks how far
 * it got in this call. progress[b][p] in rank c's heap is written only by CTA b of rank
 * p. A value is (call << 32 | steps done), where call is the CTA's epoch after the
 * call's start barrier: the same on every rank and larger than in any earlier call, so
 * a value left from an earlier call never passes for this one. Values are compared
 * wrap-safely (iris_epoch_reached on 64 bits) and never reset, so graphs replay. A rank
 * that stops early (signature mismatch, a timed-out wait) publishes steps =
 * IRIS_COLL_RELAY_ABANDON to every peer: every wait on it ends at once, the waiter
 * abandons in turn, and every CTA still meets the end barrier, so epochs stay in step. */
static_assert(IRIS_COLL_AR_SCRATCH_BYTES >= (size_t)2 * IRIS_COLL_MAX_CTAS * 64 * 16, "the store two-shot needs a 16-byte slot per (half, CTA, rank)");
/* Every collective kernel gives each rank one thread of a block (iris_barrier_device's
 * block has 64 threads, the others 256 or 512): a larger IRIS_MAX_RANKS needs those widened. */
static_assert(IRIS_MAX_RANKS <= 64, "iris_collectives.h supports at most 64 ranks (IRIS_MAX_RANKS)");

IRIS_DEVICE_INLINE unsigned long long iris_coll_progress_value(unsigned call, unsigned done) { return ((unsigned long long)call << 32) | done; }

/* This rank's copy of the progress flag that `from`'s CTA blockIdx.x raises. */
IRIS_DEVICE_INLINE unsigned long long *iris_coll_progress_flag(const iris_coll_dev_t &d, int from) {
  return d.progress + (size_t)blockIdx.x * IRIS_MAX_RANKS + from;
}

/* Whole block: once every thread's earlier stores (local or remote) are done
 * (__syncthreads), release-store value at system scope into rank `to`'s copy of this
 * CTA's flag (to = -1: into every peer's, thread t serving rank t). */
IRIS_DEVICE_INLINE void iris_coll_progress_publish(const iris_coll_dev_t &d, int to, unsigned long long value) {
  const int t = threadIdx.x;
  __syncthreads();
  if (to < 0 ? t < d.ctx.world_size && t != d.ctx.rank : t == 0) iris_signal(d.ctx, iris_coll_progress_flag(d, d.ctx.rank), value, to < 0 ? t : to);
}

/* Whole block: wait until rank `from` (-1: every peer) has published `done` steps of
 * this call (acquire at system scope; then the block meets, so every thread may read
 * what the publisher stored before). False in every thread on a timeout or if a
 * publisher abandoned the call. */
IRIS_DEVICE_INLINE bool iris_coll_progress_wait(const iris_coll_dev_t &d, int from, unsigned call, unsigned done, int kind) {
  const int t = threadIdx.x;
  int ok = 1;
  if (from < 0 ? t < d.ctx.world_size && t != d.ctx.rank : t == from) {
    const unsigned long long *flag = iris_coll_progress_flag(d, t);
    const unsigned long long want = iris_coll_progress_value(call, done);
    unsigned long long start = 0;
    unsigned spins = 0;
    for (;;) {
      if (iris_epoch_reached(iris_atomic_load<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(flag), want)) break;
      if (iris_detail_wait_expired(d.ctx, spins, start, t, IRIS_COLL_SITE(kind, IRIS_SITE_PROGRESS), call)) { ok = 0; break; }
    }
#if defined(IRIS_DEBUG)
    if (!ok) {
      printf("iris: progress wait timed out on rank %d (block %d): rank %d never reached step %u of call %u\n", d.ctx.rank, (int)blockIdx.x, t, done, call);
      iris_detail_trap();
    }
#endif
    ok = ok && (unsigned)iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(flag) != IRIS_COLL_RELAY_ABANDON;
  }
  return __syncthreads_and(ok) != 0;
}

/* ---- the relay broadcast: the bandwidth path at 3 or more ranks.
 *
 * What it does. Storing the whole message into every peer from the root would put
 * (W-1) x bytes on the root's links. Here the message is cut into W-1 parts, one per
 * non-root rank, its owner: part p = [p*part, (p+1)*part) clipped to the message (part
 * is a multiple of 16 bytes, so the last parts may be short or empty), owned by rank
 * (root + 1 + p) % W. Every part is cut into the same number of chunks; chunk j of every
 * part belongs to CTA j % G of every rank (G CTAs), as that CTA's step j / G. At step s
 * the root's CTA b stores chunk s of each part into the part's owner's recv and
 * publishes that to the owner; the owner's CTA b waits for it and stores the chunk from
 * its recv into the recv of every other non-root. The root copies send to its own recv
 * as it goes (if not in place). So the root's links carry the message once, every
 * non-root receives it once, each owner sends its part to W-2 peers, and the three
 * overlap. Everything moves by stores (measured faster than loads on NVLink: a store is
 * posted, a load keeps a round trip in flight).
 *
 * Who waits for whom.
 *   - Start barrier (CTA b of every rank, with the call's signature): every rank has
 *     started this call, so its previous kernel has ended and nothing of it still uses
 *     its recv; and all ranks agree on the call.
 *   - Owner CTA b waits, in its own heap, on progress[b][root] (the progress flags
 *     above): the root's CTA b has stored chunk s of its part. Only CTA b produces and
 *     consumes the chunks of CTA b. The root waits for nobody.
 *   - End barrier: CTA b of every rank has finished its stores, so every recv is
 *     complete when the kernel (all of its CTAs) ends.
 *
 * Why the ordering is correct. The root's block stores the chunk into the owner's recv
 * (plain remote stores), meets at __syncthreads, then one thread release-stores the
 * progress value at system scope into the owner's heap; the owner acquire-loads it at
 * system scope, its block meets, and only then does any thread read the chunk from its
 * recv. The stores into the other non-roots are made visible by the end barrier (a block
 * barrier and a system-scope release per peer). */

/* Tuning: IRIS_COLL_RELAY_STEPS, _MIN_CHUNK, _MAX_CHUNK at the top of this header; the
 * plan (parts, chunks, owners): iris_coll_relay_plan and its neighbours there. */
static_assert(IRIS_COLL_RELAY_MIN_CHUNK >= 4096 && IRIS_COLL_RELAY_MIN_CHUNK % 16 == 0 && IRIS_COLL_RELAY_MAX_CHUNK % 16 == 0 &&
                  IRIS_COLL_RELAY_MAX_CHUNK >= IRIS_COLL_RELAY_MIN_CHUNK,
              "relay chunks: multiples of 16 bytes, at least 4 KB (so that chunk counts stay far below IRIS_COLL_RELAY_ABANDON)");

/* Steps of CTA b (chunks b, b + G, ... of every part). */
IRIS_DEVICE_INLINE size_t iris_coll_relay_steps_of(const iris_coll_relay_t &r) {
  const size_t b = blockIdx.x, G = gridDim.x;
  return b < r.chunks ? (r.chunks - 1 - b) / G + 1 : 0;
}

/* Whole block, on the root: every step, chunk s of each part into its owner's recv
 * (CTAs start at different owners, so every link is busy), each published to its owner
 * as soon as it is stored; the root's own copy on the way. */
IRIS_DEVICE_INLINE void iris_coll_relay_root(const iris_coll_dev_t &d, const iris_coll_relay_t &r, const char *send, char *recv, size_t bytes, unsigned call) {
  const int W = d.ctx.world_size, root = d.ctx.rank, b = blockIdx.x, G = gridDim.x;
  const size_t steps = iris_coll_relay_steps_of(r);
  size_t lo, hi;
  for (size_t s = 0; s < steps; s++) {
    for (int k = 0; k < W - 1; k++) {
      const int p = (k + b) % (W - 1), owner = iris_coll_relay_owner(p, root, W);
      iris_coll_relay_range(&r, bytes, p, s * G + b, &lo, &hi);
      if (lo < hi) {
        iris_put_bulk(d.ctx, recv + lo, send + lo, hi - lo, owner, threadIdx.x, blockDim.x);
        if (send != recv) iris_copy_bytes(recv + lo, send + lo, hi - lo, threadIdx.x, blockDim.x);
      }
      iris_coll_progress_publish(d, owner, iris_coll_progress_value(call, (unsigned)(s + 1)));
    }
  }
}

/* Whole block, on a non-root rank: every step, wait for chunk s of its own part from
 * the root, then store it into every other non-root's recv. False if it stopped early
 * (a timeout or an abandoned call). */
IRIS_DEVICE_INLINE bool iris_coll_relay_owner_steps(const iris_coll_dev_t &d, const iris_coll_relay_t &r, char *recv, size_t bytes, int root, unsigned call) {
  const int W = d.ctx.world_size, me = d.ctx.rank, b = blockIdx.x, G = gridDim.x;
  const int mine = iris_coll_relay_part(me, root, W); /* the part this rank owns */
  const size_t steps = iris_coll_relay_steps_of(r);
  size_t lo, hi;
  for (size_t s = 0; s < steps; s++) {
    if (!iris_coll_progress_wait(d, root, call, (unsigned)(s + 1), IRIS_COLL_BC)) return false;
    iris_coll_relay_range(&r, bytes, mine, s * G + b, &lo, &hi);
    if (lo >= hi) continue;
    for (int k = 0; k < W - 2; k++) { /* CTAs start at different peers: every link busy */
      const int to = iris_coll_relay_owner(iris_coll_relay_peer_part(mine, k, b, W), root, W);
      iris_put_bulk(d.ctx, recv + lo, recv + lo, hi - lo, to, threadIdx.x, blockDim.x);
    }
  }
  return true;
}

/* The relay broadcast kernel (W >= 3; 512 threads, any number of CTAs up to
 * IRIS_COLL_MAX_CTAS; chunk from iris_coll_relay_plan on the host). */
__global__ void iris_coll_relay_kernel(iris_coll_dev_t d, const char *send, char *recv, size_t bytes, size_t chunk, int root, unsigned long long sig) {
  const int me = d.ctx.rank;
  const iris_coll_relay_t r = iris_coll_relay_plan(bytes, d.ctx.world_size, gridDim.x, chunk);
  unsigned call, epoch;
  bool ok = true;
  if (!iris_coll_kernel_start(d, sig, IRIS_COLL_BC, call, epoch)) return; /* on a mismatch or timeout: move nothing */
  if (me == root) iris_coll_relay_root(d, r, send, recv, bytes, call);
  else ok = iris_coll_relay_owner_steps(d, r, recv, bytes, root, call);
  if (!ok) iris_coll_progress_publish(d, -1, iris_coll_progress_value(call, IRIS_COLL_RELAY_ABANDON)); /* nobody waits on us in vain */
  iris_coll_barrier(d, epoch, call, IRIS_COLL_BC); /* every store of every rank is done */
}

/* ---- the store two-shot all-reduce: the bandwidth path for large messages.
 *
 * What it does. The pull two-shot (iris_coll_reduce_kernel) loads each rank's chunk
 * from W-1 peers at once; loads over NVLink keep a round trip in flight per 16 bytes
 * and measured slower than stores. Here both phases store. Chunk j of the message
 * (iris_coll_ar_range) is reduced by rank j. The chunks are walked in rounds; in round
 * rd, CTA b takes the piece [rd*G + b, rd*G + b + 1) x slice of every chunk (slice:
 * iris_coll_ar_slice elements; G CTAs) and
 *   A. stores its rank's piece of chunk j into slot `me` of CTA b's scratch half rd % 2
 *      on rank j, for every peer j, and publishes round rd to every peer (progress
 *      flags, above);
 *   B. waits until every peer has published round rd, reduces its own chunk's piece
 *      from its send and the W-1 slots in rank order (bitwise the same on every rank),
 *      and stores the result into every rank's recv.
 * Every rank's links carry 2 (W-1)/W of the message, all of it by stores, as the pull
 * two-shot; the scratch area (IRIS_COLL_AR_SCRATCH_BYTES) bounds a round.
 *
 * Who waits for whom, and why it is safe.
 *   - Start barrier (with the call's signature): every rank has started this call, so
 *     its earlier kernels no longer use its recv.
 *   - B(rd) of rank j reads slots that peer i stored in A(rd) before publishing rd;
 *     the publish is a block barrier, then a system-scope release; the wait an acquire,
 *     then a block barrier.
 *   - A(rd + 2) of rank i overwrites half rd % 2 on rank j, which rank j read in B(rd).
 *     Rank i got there after waiting for rank j's round rd + 1, which rank j published
 *     after B(rd). So two halves suffice and nobody acknowledges anything.
 *   - In place (send == recv): B(rd) of rank j overwrites piece (rd, b) of chunk j in
 *     rank k's recv = send; rank k read it in its A(rd), before publishing rd.
 *   - End barrier: every store into every recv is done when the kernel ends; the next
 *     call's A(0) may write scratch because every B of this call is over.
 *   A rank that stops early publishes IRIS_COLL_RELAY_ABANDON (see progress flags), so
 *   the same fixed two barriers run on every rank and the epochs stay in step. */
template <typename T, int OP, int W_STATIC>
__global__ void iris_coll_ar_store_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, size_t slice, unsigned long long sig, int vec) {
  const int W = d.ctx.world_size, me = d.ctx.rank, b = (int)blockIdx.x, G = (int)gridDim.x;
  const size_t per = 16 / sizeof(T), rounds = iris_coll_ar_rounds(count, W, per, G, slice);
  unsigned call, epoch;
  bool ok = true;
  if (!iris_coll_kernel_start(d, sig, IRIS_COLL_AR, call, epoch)) return; /* on a mismatch or timeout: move nothing */
  size_t lo, hi, mlo, mhi;
  const T *src[W_STATIC > 0 ? W_STATIC : IRIS_MAX_RANKS];
  T *dst[W_STATIC > 0 ? W_STATIC : IRIS_MAX_RANKS];
  iris_coll_ar_range(count, W, per, me, &mlo, &mhi);
  for (size_t rd = 0; ok && rd < rounds; rd++) {
    const size_t off = (rd * (size_t)G + (size_t)b) * slice;
    T *half = (T *)d.scratch + ((rd & 1) * (size_t)G + (size_t)b) * (size_t)W * slice; /* this CTA's W slots */
    for (int k = 1; k < W; k++) { /* A: our piece of chunk j into rank j's slot `me` */
      const int j = iris_coll_ar_peer(me, k, b, W);
      iris_coll_ar_range(count, W, per, j, &lo, &hi);
      lo += off;
      if (lo < hi) iris_put_bulk(d.ctx, half + (size_t)me * slice, send + lo, ((hi - lo < slice ? hi - lo : slice)) * sizeof(T), j, threadIdx.x, blockDim.x);
    }
    iris_coll_progress_publish(d, -1, iris_coll_progress_value(call, (unsigned)(rd + 1)));
    if (!(ok = iris_coll_progress_wait(d, -1, call, (unsigned)(rd + 1), IRIS_COLL_AR))) break;
    lo = mlo + off; /* B: reduce our chunk's piece, store it into every recv */
    if (lo >= mhi) continue;
    const size_t n = mhi - lo < slice ? mhi - lo : slice;
    for (int r = 0; r < W; r++) src[r] = r == me ? send + lo : half + (size_t)r * slice;
    dst[0] = recv + lo;
    for (int k = 1; k < W; k++) dst[k] = iris_translate(d.ctx, recv, iris_coll_ar_peer(me, k, b, W)) + lo;
    iris_coll_reduce_range<T, OP, W_STATIC>(d.ctx, src, dst, W, 0, n, W, vec != 0, threadIdx.x, blockDim.x);
  }
  if (!ok) iris_coll_progress_publish(d, -1, iris_coll_progress_value(call, IRIS_COLL_RELAY_ABANDON)); /* nobody waits on us in vain */
  iris_coll_barrier(d, epoch, call, IRIS_COLL_AR); /* every recv is complete */
}

/* ---- the chain broadcast: the bandwidth path at 3 or more ranks for large messages.
 *
 * What it does. The ranks form a chain from the root: root, root + 1, ..., root - 1
 * (mod W). The message is cut into chunks (iris_coll_chain_chunk); chunk j belongs to
 * CTA j % G of every rank as its step j / G. At each step a CTA waits until its
 * predecessor's CTA has stored the chunk into its recv (the root waits for nobody),
 * then stores it into its successor's recv and publishes that; the last rank sends
 * nothing and waits only at the end barrier. Every GPU but the last sends the message
 * once to one peer, and every GPU but the root receives it once from one peer, as in
 * NCCL's ring, where the relay has every rank send to several peers at once. Its
 * pipeline fills over W-1 chunks instead of one, which smaller chunks keep short
 * (IRIS_COLL_CHAIN_STEPS).
 *
 * Who waits for whom, and why it is safe: the same barriers and progress flags as the
 * relay. Start barrier (with the signature): every rank has started, so its recv is
 * free. CTA b of rank r publishes step s to rank r + 1 only after its block stored chunk
 * s into that rank's recv (block barrier, system-scope release); CTA b of rank r + 1
 * acquires it before reading that chunk from its own recv to pass it on. End barrier:
 * every store has landed. A rank that stops early abandons (progress flags above). */

__global__ void iris_coll_chain_kernel(iris_coll_dev_t d, const char *send, char *recv, size_t bytes, size_t chunk, int root, unsigned long long sig) {
  const int W = d.ctx.world_size, me = d.ctx.rank, b = (int)blockIdx.x, G = (int)gridDim.x;
  const int pos = (me - root + W) % W, pred = (me - 1 + W) % W, succ = (me + 1) % W;
  const size_t chunks = iris_coll_chain_chunks(bytes, chunk), steps = (size_t)b < chunks ? (chunks - 1 - (size_t)b) / (size_t)G + 1 : 0;
  unsigned call, epoch;
  bool ok = true;
  if (!iris_coll_kernel_start(d, sig, IRIS_COLL_BC, call, epoch)) return; /* on a mismatch or timeout: move nothing */
  for (size_t s = 0; ok && pos < W - 1 && s < steps; s++) {
    const size_t lo = (s * (size_t)G + (size_t)b) * chunk, hi = lo + chunk < bytes ? lo + chunk : bytes;
    if (pos > 0 && !(ok = iris_coll_progress_wait(d, pred, call, (unsigned)(s + 1), IRIS_COLL_BC))) break;
    iris_put_bulk(d.ctx, recv + lo, (pos == 0 ? send : recv) + lo, hi - lo, succ, threadIdx.x, blockDim.x);
    if (pos == 0 && send != recv) iris_copy_bytes(recv + lo, send + lo, hi - lo, threadIdx.x, blockDim.x);
    iris_coll_progress_publish(d, succ, iris_coll_progress_value(call, (unsigned)(s + 1)));
  }
  if (!ok) iris_coll_progress_publish(d, -1, iris_coll_progress_value(call, IRIS_COLL_RELAY_ABANDON)); /* nobody waits on us in vain */
  iris_coll_barrier(d, epoch, call, IRIS_COLL_BC); /* every store of every rank is done */
}

/* iris_barrier_device: the header exchange alone is a barrier (a release by each rank
 * after its earlier work, an acquire of every peer's). One CTA. */
__global__ void iris_coll_barrier_kernel(iris_coll_dev_t d, unsigned long long sig) {
  iris_coll_call_begin(d, iris_coll_call_enter(d), iris_coll_sig32(sig), IRIS_COLL_KIND_DEVICE_BARRIER);
}


/* ========================================================================= */
/*          tile-level building blocks, for collectives inside user kernels  */
/* ========================================================================= */
/* Participation contract (all four operations):
 *   - Whole block: every thread of the calling block calls with the same arguments.
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
 * Returns false in every thread if a wait timed out (IRIS_WAIT_TIMEOUT_NS). */

/* The tile's epoch: read by every thread at the start, stored by one at the end. */
IRIS_DEVICE_INLINE unsigned iris_detail_tile_begin(const iris_tile_flags_t &f, int tile) {
  unsigned e = *(volatile unsigned *)(f.counters + tile);
  __syncthreads();
  return e;
}
IRIS_DEVICE_INLINE void iris_detail_tile_end(const iris_tile_flags_t &f, int tile, unsigned epoch) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) f.counters[tile] = epoch;
}
IRIS_DEVICE_INLINE int iris_detail_block_tid(void) { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
IRIS_DEVICE_INLINE int iris_detail_block_threads(void) { return blockDim.x * blockDim.y * blockDim.z; }

/* Whole block: a rank-wide rendezvous of the blocks handling `tile`: every write any of
 * them made before is visible to all of them after. Advances the tile's epoch. */
IRIS_DEVICE_INLINE bool iris_tile_sync(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile) {
  unsigned epoch = iris_detail_tile_begin(f, tile);
  bool ok = iris_detail_rank_sync(ctx, f.flags + (size_t)tile * IRIS_MAX_RANKS, epoch, IRIS_SITE_BARRIER, 0);
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

/* Copy a rows x cols block of elem-byte elements (row strides in elements), 16 bytes at
 * a time where every row start allows it. Cooperative over the block. */
IRIS_DEVICE_INLINE void iris_detail_tile_copy(char *dst, long long dstride, const char *src, long long sstride, int rows, int cols, int elem) {
  const int tid = iris_detail_block_tid(), nt = iris_detail_block_threads();
  const long long row_bytes = (long long)cols * elem;
  if (rows <= 0 || cols <= 0) return;
  if (((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) && (row_bytes & 15) == 0 && ((dstride * elem) & 15) == 0 && ((sstride * elem) & 15) == 0) {
    const long long vpr = row_bytes / 16, n = vpr * rows;
    for (long long k = tid; k < n; k += nt) {
      const long long r = k / vpr, v = k % vpr;
      ((uint4 *)(dst + r * dstride * elem))[v] = ((const uint4 *)(src + r * sstride * elem))[v];
    }
  } else {
    const long long n = (long long)rows * cols;
    for (long long k = tid; k < n; k += nt) {
      const long long r = k / cols, c = k % cols;
      const char *s = src + (r * sstride + c) * elem;
      char *d = dst + (r * dstride + c) * elem;
      switch (elem) {
      case 2: *(unsigned short *)d = *(const unsigned short *)s; break;
      case 4: *(unsigned *)d = *(const unsigned *)s; break;
      case 8: *(unsigned long long *)d = *(const unsigned long long *)s; break;
      default: for (int b = 0; b < elem; b++) d[b] = s[b];
      }
    }
  }
}

/* All-reduce of one tile. src: (M, N) view on the heap holding this rank's partial
 * values; dst: (M, N) view of any device memory (not src). dst's tile (tm, tn) =
 * op over ranks (rank order, wide accumulation) of every rank's src tile. T: float,
 * iris_f16_t, iris_bf16_t, int, long long, unsigned char, iris_fp8_e4m3_t,
 * iris_fp8_e5m2_t; OP: IRIS_SUM, IRIS_MIN, IRIS_MAX or IRIS_AVG, computed as by
 * iris_all_reduce (AVG: the sum divided by the world size, rounded once). */
#define IRIS_DETAIL_TILE_OP_CHECK(OP) static_assert((OP) >= IRIS_SUM && (OP) < IRIS_REDOP_COUNT, "iris_tile_*: OP must be IRIS_SUM, IRIS_MIN, IRIS_MAX or IRIS_AVG")
template <typename T, int OP = IRIS_SUM>
IRIS_DEVICE_INLINE bool iris_tile_all_reduce(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst, int bm, int bn) {
  IRIS_DETAIL_TILE_OP_CHECK(OP);
  long long tm, tn;
  iris_view_tile_coords(src, bn, tile, &tm, &tn);
  const int rows = iris_view_tile_rows(src, bm, tm), cols = iris_view_tile_cols(src, bn, tn), W = ctx.world_size;
  const int tid = iris_detail_block_tid(), nt = iris_detail_block_threads();
  unsigned epoch = iris_detail_tile_begin(f, tile);
  unsigned long long *row = f.flags + (size_t)tile * IRIS_MAX_RANKS;
  bool ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0); /* every rank's src tile is ready */
  if (ok) {
    const T *s0 = (const T *)iris_view_elem(src, tm * bm, tn * bn);
    T *d0 = (T *)iris_view_elem(dst, tm * bm, tn * bn);
    for (long long k = tid; k < (long long)rows * cols; k += nt) {
      const long long r = k / cols, c = k % cols;
      typename iris_coll_acc<T>::type acc = iris_coll_up(*iris_translate(ctx, s0 + r * src.stride + c, 0));
      for (int q = 1; q < W; q++) acc = iris_coll_combine<OP>(acc, iris_coll_up(*iris_translate(ctx, s0 + r * src.stride + c, q)));
      d0[r * dst.stride + c] = iris_coll_result<T, OP>(acc, W);
    }
  }
  ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0) && ok; /* nobody still reads our src */
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

/* All-gather of one tile. src: (M_local, N_local) view of any device memory, this rank's
 * shard; dst: the gathered view on the heap, (W*M_local, N_local) for dim 0 or
 * (M_local, W*N_local) for dim 1. Tile (tm, tn) of the shard goes to every rank's dst at
 * rank*M_local rows (dim 0) or rank*N_local columns (dim 1) further. */
template <typename T>
IRIS_DEVICE_INLINE bool iris_tile_all_gather(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst, int dim, int bm,
                                             int bn) {
  long long tm, tn;
  iris_view_tile_coords(src, bn, tile, &tm, &tn);
  const int rows = iris_view_tile_rows(src, bm, tm), cols = iris_view_tile_cols(src, bn, tn), W = ctx.world_size;
  unsigned epoch = iris_detail_tile_begin(f, tile);
  unsigned long long *row = f.flags + (size_t)tile * IRIS_MAX_RANKS;
  bool ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0); /* every rank is done with the previous contents */
  if (ok) {
    const long long r0 = tm * bm + (dim == 0 ? (long long)ctx.rank * src.rows : 0), c0 = tn * bn + (dim == 1 ? (long long)ctx.rank * src.cols : 0);
    for (int k = 0; k < W; k++) {
      const int p = (ctx.rank + k) % W;
      iris_detail_tile_copy((char *)iris_translate(ctx, (T *)iris_view_elem(dst, r0, c0), p), dst.stride, (const char *)iris_view_elem(src, tm * bm, tn * bn),
                            src.stride, rows, cols, (int)sizeof(T));
    }
  }
  ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0) && ok; /* every rank's tile has arrived */
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

/* Reduce-scatter of one tile: tile `tile` belongs to rank tile % world_size, which gets
 * op over ranks of every rank's src tile in its dst; the other ranks' dst is untouched.
 * src: (M, N) on the heap; dst: (M, N) of any device memory. T and OP as for
 * iris_tile_all_reduce. */
template <typename T, int OP = IRIS_SUM>
IRIS_DEVICE_INLINE bool iris_tile_reduce_scatter(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst, int bm,
                                                 int bn) {
  IRIS_DETAIL_TILE_OP_CHECK(OP);
  long long tm, tn;
  iris_view_tile_coords(src, bn, tile, &tm, &tn);
  const int rows = iris_view_tile_rows(src, bm, tm), cols = iris_view_tile_cols(src, bn, tn), W = ctx.world_size;
  const int tid = iris_detail_block_tid(), nt = iris_detail_block_threads();
  unsigned epoch = iris_detail_tile_begin(f, tile);
  unsigned long long *row = f.flags + (size_t)tile * IRIS_MAX_RANKS;
  bool ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0);
  if (ok && tile % W == ctx.rank) {
    const T *s0 = (const T *)iris_view_elem(src, tm * bm, tn * bn);
    T *d0 = (T *)iris_view_elem(dst, tm * bm, tn * bn);
    for (long long k = tid; k < (long long)rows * cols; k += nt) {
      const long long r = k / cols, c = k % cols;
      typename iris_coll_acc<T>::type acc = iris_coll_up(*iris_translate(ctx, s0 + r * src.stride + c, 0));
      for (int q = 1; q < W; q++) acc = iris_coll_combine<OP>(acc, iris_coll_up(*iris_translate(ctx, s0 + r * src.stride + c, q)));
      d0[r * dst.stride + c] = iris_coll_result<T, OP>(acc, W);
    }
  }
  ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0) && ok;
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

/* All-to-all of one tile, each rank owning n_per_rank columns (the Iris shape). src and
 * dst: (M, W*n_per_rank); src on the heap, dst any device memory. Tiles number the
 * (M, n_per_rank) grid: for every rank r, dst[rows, r*n_per_rank + cols] =
 * src_r[rows, rank*n_per_rank + cols]. */
template <typename T>
IRIS_DEVICE_INLINE bool iris_tile_all_to_all(const iris_device_ctx_t &ctx, const iris_tile_flags_t &f, int tile, iris_view2d_t src, iris_view2d_t dst,
                                             long long n_per_rank, int bm, int bn) {
  const iris_view2d_t block = iris_view2d(src.ptr, src.rows, n_per_rank, src.stride, src.elem_size); /* the tile grid */
  long long tm, tn;
  iris_view_tile_coords(block, bn, tile, &tm, &tn);
  const int rows = iris_view_tile_rows(block, bm, tm), cols = iris_view_tile_cols(block, bn, tn), W = ctx.world_size;
  unsigned epoch = iris_detail_tile_begin(f, tile);
  unsigned long long *row = f.flags + (size_t)tile * IRIS_MAX_RANKS;
  bool ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0);
  if (ok) {
    for (int k = 0; k < W; k++) {
      const int r = (ctx.rank + k) % W;
      const T *s = iris_translate(ctx, (const T *)iris_view_elem(src, tm * bm, (long long)ctx.rank * n_per_rank + tn * bn), r);
      iris_detail_tile_copy((char *)iris_view_elem(dst, tm * bm, (long long)r * n_per_rank + tn * bn), dst.stride, (const char *)s, src.stride, rows, cols,
                            (int)sizeof(T));
    }
  }
  ok = iris_detail_rank_sync(ctx, row, epoch, IRIS_SITE_BARRIER, 0) && ok;
  iris_detail_tile_end(f, tile, epoch);
  return ok;
}

/* ========================================================================= */
/*                               host side                                   */
/* ========================================================================= */
#if defined(IRIS_IMPLEMENTATION)
#if defined(IRIS_USE_HIP) /* the runtime calls used below */
#define iris_coll_memcpy_async(d, s, n, st) hipMemcpyAsync(d, s, n, hipMemcpyDeviceToDevice, st)
#define iris_coll_memcpy2d_async(d, dp, s, sp, w, h, st) hipMemcpy2DAsync(d, dp, s, sp, w, h, hipMemcpyDeviceToDevice, st)
#define iris_coll_get_last_error hipGetLastError
#define iris_coll_error_text hipGetErrorString
#define iris_coll_success hipSuccess
typedef hipError_t iris_coll_err_t;
static inline int iris_coll_capturing(iris_stream_t s) { hipStreamCaptureStatus c = hipStreamCaptureStatusNone; hipStreamIsCapturing(s, &c); return c != hipStreamCaptureStatusNone; }
static inline int iris_coll_sm_count(int dev) { int n = 0; hipDeviceGetAttribute(&n, hipDeviceAttributeMultiprocessorCount, dev); return n > 0 ? n : 1; }
static inline iris_coll_err_t iris_coll_read_word(unsigned *h, const unsigned *d) { return hipMemcpy(h, d, sizeof *h, hipMemcpyDeviceToHost); }
#else
#define iris_coll_memcpy_async(d, s, n, st) cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, st)
#define iris_coll_memcpy2d_async(d, dp, s, sp, w, h, st) cudaMemcpy2DAsync(d, dp, s, sp, w, h, cudaMemcpyDeviceToDevice, st)
#define iris_coll_get_last_error cudaGetLastError
#define iris_coll_error_text cudaGetErrorString
#define iris_coll_success cudaSuccess
typedef cudaError_t iris_coll_err_t;
static inline int iris_coll_capturing(iris_stream_t s) { cudaStreamCaptureStatus c = cudaStreamCaptureStatusNone; cudaStreamIsCapturing(s, &c); return c != cudaStreamCaptureStatusNone; }
static inline int iris_coll_sm_count(int dev) { int n = 0; cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev); return n > 0 ? n : 1; }
static inline iris_coll_err_t iris_coll_read_word(unsigned *h, const unsigned *d) { return cudaMemcpy(h, d, sizeof *h, cudaMemcpyDeviceToHost); }
#endif

/* Automatic choice (bytes each rank sends to one peer): the latency kernel up to these
 * sizes, the bandwidth one above. Measured on 4xH100 (NV18, BENCHMARKS.md), bf16, graph
 * us: all-reduce at 3+ ranks, the one-shot up to 128 KB (5.9 us), the two-shot LL from
 * there to 512 KB (7.6 against 8.1 for the one-shot at 256 KB; 9.4 against 13.4 at
 * 512 KB), the bandwidth two-shot above (13.3 against 13.4 for the two-shot LL at 1 MB,
 * 17.9 against 22.6 at 2 MB). At 2 ranks the one-shot stores no more bytes than the
 * two-shot LL and saves a hop: it runs to its 512 KB limit, the bandwidth two-shot above. */
#ifndef IRIS_COLL_LL_MAX_AR
#define IRIS_COLL_LL_MAX_AR ((size_t)128 << 10)
#endif
/* Threads per CTA of the latency kernel (one 16-byte line each per pass; at least 64,
 * a thread per rank). Fewer threads spread a message over more SMs, each of which
 * stores only so fast into the links. Measured on 4xH200 (session 4), bf16 all-reduce,
 * graph us at 4 / 8 / 16 KB: 128 threads 3.35 / 3.53 / 3.80, 256: 3.45 / 3.57 / 3.81,
 * 512: 3.63 / 3.79 / 3.89; the same or better for all-gather up to 256 KB. */
#ifndef IRIS_COLL_LL_THREADS
#define IRIS_COLL_LL_THREADS 128
#endif
static_assert(IRIS_COLL_LL_THREADS >= 64 && IRIS_COLL_LL_THREADS <= 1024 && IRIS_COLL_LL_THREADS % 64 == 0, "IRIS_COLL_LL_THREADS: 64..1024, whole warps of 64");
#ifndef IRIS_COLL_LL_MAX_AR_W2
#define IRIS_COLL_LL_MAX_AR_W2 IRIS_COLL_LL_BYTES
#endif
#ifndef IRIS_COLL_LL2_MAX_AR
#define IRIS_COLL_LL2_MAX_AR ((size_t)512 << 10)
#endif
#ifndef IRIS_COLL_LL_MAX_OTHER
#define IRIS_COLL_LL_MAX_OTHER IRIS_COLL_LL_BYTES
#endif
/* All-gather: the latency kernel up to 256 KB per rank. Measured on 4xH100: 8.1 against
 * 9.6 us for the bandwidth kernel at 256 KB (NCCL symmetric 8.9), 13.2 against 12.0 at
 * 512 KB. */
#ifndef IRIS_COLL_LL_MAX_AG
#define IRIS_COLL_LL_MAX_AG ((size_t)256 << 10)
#endif
/* Broadcast: the latency kernel up to 128 KB (4.2 us on 4xH100), then at 3+ ranks the
 * two-hop LL (6.3 against 6.5 us at 256 KB, 7.6 against 10.8 at 512 KB, 12.2 against
 * 16.0 for the bandwidth path at 1 MB) up to IRIS_COLL_LL2_MAX_BC while a part fits
 * IRIS_COLL_LL2_BYTES, then the bandwidth path (a single pull at 2 ranks, the relay at 3
 * or more). */
#ifndef IRIS_COLL_LL_MAX_BC
#define IRIS_COLL_LL_MAX_BC ((size_t)128 << 10)
#endif
#ifndef IRIS_COLL_LL2_MAX_BC
#define IRIS_COLL_LL2_MAX_BC ((size_t)3 << 20)
#endif
/* Broadcast on the bandwidth path: the direct pull below this size, the relay from it
 * (W >= 3). Measured on 4xH200 (BENCHMARKS.md): the relay's pipeline costs more than the
 * root's egress saves at 512 KB (16.6 against 10.5 us) and 1 MB (17.9 against 14.5 us);
 * it wins from 2 MB (21.7 against 23.0 us) and by 1.9x at 1 GB. */
#ifndef IRIS_COLL_RELAY_MIN_BYTES
#define IRIS_COLL_RELAY_MIN_BYTES ((size_t)2 << 20)
#endif
/* Broadcast at 3+ ranks: the chain from this size on. Measured on 4xH200 (session 4),
 * graph us, chain (64 steps) against relay against NCCL: 1 GB 3001 / 3204 / 2965,
 * 512 MB 1548 / ~1600 / 1501, 256 MB 806 / 802 / 761, 64 MB 251 / 226 / 205, 16 MB
 * 75.5 / 67 / 64.5. Below 512 MB the chain's chunks are too small for their
 * handshake (16 steps per CTA: 229 us at 64 MB, but 3197 at 1 GB). */
/* Multi-node worlds: the all-reduce's one-shot composition (node all-reduce, rail 0,
 * node broadcast) up to this many bytes, the reduce-scatter composition above; the
 * heap scratch of the rail steps (reduce-scatter pieces). Not measured yet. */
#ifndef IRIS_COLL_MN_ONESHOT_MAX
#define IRIS_COLL_MN_ONESHOT_MAX ((size_t)256 << 10)
#endif
#ifndef IRIS_COLL_MN_SCRATCH_BYTES
#define IRIS_COLL_MN_SCRATCH_BYTES ((size_t)32 << 20)
#endif
#ifndef IRIS_COLL_CHAIN_MIN_BYTES
#define IRIS_COLL_CHAIN_MIN_BYTES ((size_t)512 << 20)
#endif

typedef struct iris_coll_state {
  iris_coll_dev_t dev;
  char *stage_in, *stage_out; /* NULL when IRIS_COLL_STAGING=0 */
  char *mn_scratch;           /* multi-node worlds: IRIS_COLL_MN_SCRATCH_BYTES for the rail steps */
  size_t stage_bytes;
  int sms;
} iris_coll_state_t;

static void iris_coll_state_free(void *p) { free(p); } /* its heap blocks go with the heap */

IRIS_DEF size_t iris_dtype_size(iris_dtype_t t) {
  switch (t) {
  case IRIS_FLOAT32: case IRIS_INT32: return 4;
  case IRIS_FLOAT16: case IRIS_BFLOAT16: return 2;
  case IRIS_INT64: return 8;
  case IRIS_UINT8: case IRIS_FLOAT8_E4M3: case IRIS_FLOAT8_E5M2: return 1;
  default: return 0;
  }
}

/* Frees the heap blocks of a state that could not be completed (every rank frees the
 * same ones: the ranks' allocators stay alike). */
static void iris_coll_state_unwind(iris_t *ctx, iris_coll_state_t *s, char *ctl) {
  iris_free(ctx, s->mn_scratch);
  iris_free(ctx, s->stage_out);
  iris_free(ctx, s->stage_in);
  iris_free(ctx, s->dev.ll2);
  iris_free(ctx, s->dev.ll);
  iris_free(ctx, s->dev.scratch);
  iris_free(ctx, ctl);
  free(s);
}

IRIS_DEF iris_status_t iris_collectives_setup(iris_t *ctx) {
  iris_coll_state_t *s;
  iris_status_t st;
  size_t ctl, ll_bytes, ll2_bytes;
  char *base = NULL;
  const char *env = getenv("IRIS_COLL_STAGING");
  int W, r, failed_rank = -1;
  int32_t mine, *all;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_collectives_setup: NULL context");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  if (iris_detail_get_ext(ctx)) return IRIS_SUCCESS;
  W = iris_local_size(ctx); /* the kernels work within the node; rails join the nodes */
  s = (iris_coll_state_t *)calloc(1, sizeof *s);
  all = (int32_t *)calloc((size_t)iris_world_size(ctx), sizeof *all);
  if (!s || !all) { free(s); free(all); return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory"); }
  s->dev.ctx = iris_device_context_node(ctx);
  s->dev.ll_lines = IRIS_COLL_LL_BYTES / 8;
  s->dev.ll2_lines = IRIS_COLL_LL2_BYTES / 8;
  s->stage_bytes = IRIS_COLL_STAGING_BYTES;
  if (env && !strcmp(env, "0")) s->stage_bytes = 0;
  else if (env && (st = iris_detail_parse_size_var("IRIS_COLL_STAGING", env, &s->stage_bytes)) != IRIS_SUCCESS) { /* set but empty: an error too */
    free(s);
    free(all);
    return st;
  }
  s->stage_bytes = iris_coll_staging_bytes(s->stage_bytes); /* at least IRIS_COLL_STAGING_MIN: a chunked step must fit */
  s->dev.check = 1;
  if ((env = getenv("IRIS_COLL_CHECK")) != NULL) {
    if (!strcmp(env, "0")) s->dev.check = 0;
    else if (strcmp(env, "1")) {
      free(s);
      free(all);
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_COLL_CHECK='%s': give 0 (the latency path does not match call headers) or 1 (the default)", env);
    }
  }
  s->sms = iris_coll_sm_count(iris_device(ctx));
  /* control words: flags | progress | headers | calls; zeroed, then the ranks meet, so no
   * peer signals into them before they are zero */
  ctl = 2 * IRIS_COLL_MAX_CTAS * IRIS_MAX_RANKS * sizeof(unsigned long long) + 2 * IRIS_MAX_RANKS * sizeof(unsigned long long) + 256;
  ll_bytes = 2 * (size_t)W * s->dev.ll_lines * sizeof(uint4);
  ll2_bytes = 4 * (size_t)W * s->dev.ll2_lines * sizeof(uint4);
  /* 1. the blocks: every rank's allocator is in the same state, so this succeeds or fails
   *    alike everywhere; on failure every rank frees what it took */
  if ((st = iris_malloc(ctx, ctl, (void **)&base)) != IRIS_SUCCESS || (st = iris_malloc(ctx, IRIS_COLL_AR_SCRATCH_BYTES, (void **)&s->dev.scratch)) != IRIS_SUCCESS ||
      (st = iris_malloc(ctx, ll_bytes, (void **)&s->dev.ll)) != IRIS_SUCCESS || (st = iris_malloc(ctx, ll2_bytes, (void **)&s->dev.ll2)) != IRIS_SUCCESS ||
      (s->stage_bytes && ((st = iris_malloc(ctx, s->stage_bytes, (void **)&s->stage_in)) != IRIS_SUCCESS ||
                          (st = iris_malloc(ctx, s->stage_bytes, (void **)&s->stage_out)) != IRIS_SUCCESS)) ||
      (iris_num_nodes(ctx) > 1 && (st = iris_malloc(ctx, IRIS_COLL_MN_SCRATCH_BYTES, (void **)&s->mn_scratch)) != IRIS_SUCCESS)) {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    iris_coll_state_unwind(ctx, s, base);
    free(all);
    return iris_detail_fail(st, "iris_collectives_setup: %s", why);
  }
  s->dev.flags = (unsigned long long *)base;
  s->dev.progress = s->dev.flags + IRIS_COLL_MAX_CTAS * IRIS_MAX_RANKS;
  s->dev.hdr = s->dev.progress + IRIS_COLL_MAX_CTAS * IRIS_MAX_RANKS;
  s->dev.calls = s->dev.hdr + 2 * IRIS_MAX_RANKS; /* the call word: one 8-byte word, 8-byte aligned */
  /* 2. zero the control words and LL lines (a local GPU failure is possible here) */
  {
    int old = -1;
    iris_coll_err_t e;
    iris_gpu_get_device(&old);
    e = (iris_coll_err_t)iris_gpu_set_device(iris_device(ctx));
    if (e == iris_coll_success) e = (iris_coll_err_t)iris_gpu_memset(base, 0, ctl);
    if (e == iris_coll_success) e = (iris_coll_err_t)iris_gpu_memset(s->dev.ll, 0, ll_bytes);
    if (e == iris_coll_success) e = (iris_coll_err_t)iris_gpu_memset(s->dev.ll2, 0, ll2_bytes);
    if (e == iris_coll_success) e = (iris_coll_err_t)iris_gpu_synchronize();
    if (old >= 0) iris_gpu_set_device(old);
    mine = e == iris_coll_success ? IRIS_SUCCESS : (int32_t)iris_detail_fail(IRIS_ERROR_GPU, "rank %d: iris_collectives_setup: zeroing the state failed: %s",
                                                                             iris_rank(ctx), iris_coll_error_text(e));
  }
  /* 3. the ranks agree on the outcome (and meet: every rank's state is zero before any
   *    peer signals into it); if any failed, all unwind alike */
  if ((st = iris_allgather_host(ctx, &mine, all, sizeof mine)) != IRIS_SUCCESS) {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    iris_coll_state_unwind(ctx, s, base);
    free(all);
    return iris_detail_fail(st, "iris_collectives_setup: the ranks could not agree on the setup (%s); the heap of this rank may now differ from the others': "
                                "finalize the context", why);
  }
  for (r = 0; r < iris_world_size(ctx); r++) /* every rank of every node */
    if (all[r] != IRIS_SUCCESS && failed_rank < 0) failed_rank = r;
  if (failed_rank >= 0) {
    st = iris_detail_peer_status(all[failed_rank]);
    iris_coll_state_unwind(ctx, s, base);
    free(all);
    return iris_detail_fail(st, "iris_collectives_setup: rank %d could not set up its collective state; every rank released its part", failed_rank);
  }
  free(all);
  iris_detail_set_ext(ctx, s, iris_coll_state_free);
  return IRIS_SUCCESS;
}

/* Synchronous: waits for this rank's GPU, then reports the context's faults (see
 * iris_get_async_error in iris.h): a fatal one, else a pending mismatch (then cleared). */
IRIS_DEF iris_status_t iris_collectives_check(iris_t *ctx) {
  int old = -1;
  iris_coll_err_t e;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_collectives_check: NULL context");
  iris_gpu_get_device(&old);
  e = (iris_coll_err_t)iris_gpu_set_device(iris_device(ctx));
  if (e == iris_coll_success) e = (iris_coll_err_t)iris_gpu_synchronize();
  if (old >= 0) iris_gpu_set_device(old);
  if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: iris_collectives_check: device synchronize failed: %s", iris_rank(ctx), iris_coll_error_text(e));
  return iris_get_async_error(ctx);
}

static int iris_coll_in_heap(iris_t *ctx, const void *p, size_t bytes) {
  size_t off;
  return iris_heap_offset(ctx, p, &off) == IRIS_SUCCESS && bytes <= iris_heap_size(ctx) - off;
}

/* ---- typed launches */
static int iris_coll_ll_blocks(size_t count, size_t es) {
  const size_t lines = (count * es + 7) / 8;
  int blocks = (int)((lines + IRIS_COLL_LL_THREADS - 1) / IRIS_COLL_LL_THREADS);
  if (blocks > IRIS_COLL_MAX_CTAS) blocks = IRIS_COLL_MAX_CTAS;
  return blocks < 1 ? 1 : blocks;
}
template <typename T, int KIND, int OP>
static void iris_coll_launch_ll(const iris_coll_state_t *s, const void *send, void *recv, size_t count, int root, unsigned long long sig, iris_stream_t stream) {
  iris_coll_ll_kernel<T, KIND, OP><<<iris_coll_ll_blocks(count, sizeof(T)), IRIS_COLL_LL_THREADS, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, root, sig);
}
template <typename T, int OP>
static void iris_coll_launch_ll2(const iris_coll_state_t *s, const void *send, void *recv, size_t count, unsigned long long sig, iris_stream_t stream) {
  const int W = s->dev.ctx.world_size;
  const size_t per = 8 / sizeof(T), lines = iris_coll_ar_chunk(count, W, per) / per;
  const int blocks = (int)((lines + IRIS_COLL_LL2_THREADS - 1) / IRIS_COLL_LL2_THREADS);
  iris_coll_ll2_kernel<T, OP><<<blocks, IRIS_COLL_LL2_THREADS, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, sig);
}
template <typename T>
static void iris_coll_launch_bc_ll2(const iris_coll_state_t *s, const void *send, void *recv, size_t count, int root, unsigned long long sig, iris_stream_t stream) {
  const int W = s->dev.ctx.world_size;
  const size_t pl = ((count * sizeof(T) + 7) / 8 + (size_t)W - 2) / (size_t)(W - 1);
  const int blocks = (int)((pl + IRIS_COLL_LL2_THREADS - 1) / IRIS_COLL_LL2_THREADS);
  iris_coll_bc_ll2_kernel<T><<<blocks > 0 ? blocks : 1, IRIS_COLL_LL2_THREADS, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, root, sig);
}
/* The store two-shot all-reduce: the slot size for this grid (every rank computes the
 * same from the same call). */
template <typename T, int OP>
static void iris_coll_launch_ar_store(const iris_coll_state_t *s, const void *send, void *recv, size_t count, unsigned long long sig, int vec, int blocks,
                                      iris_stream_t stream) {
  const size_t slice = iris_coll_ar_slice(sizeof(T), s->dev.ctx.world_size, blocks);
  switch (s->dev.ctx.world_size) {
  case 2: iris_coll_ar_store_kernel<T, OP, 2><<<blocks, 512, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, slice, sig, vec); break;
  case 4: iris_coll_ar_store_kernel<T, OP, 4><<<blocks, 512, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, slice, sig, vec); break;
  case 8: iris_coll_ar_store_kernel<T, OP, 8><<<blocks, 512, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, slice, sig, vec); break;
  default: iris_coll_ar_store_kernel<T, OP, 0><<<blocks, 512, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, slice, sig, vec); break;
  }
}
template <typename T, int KIND, int OP>
static void iris_coll_launch_reduce(const iris_coll_state_t *s, const void *send, void *recv, size_t count, unsigned long long sig, int vec, int blocks,
                                    iris_stream_t stream) {
  /* all-reduce: the second phase pushes below IRIS_COLL_AR_PUSH_MAX bytes, pulls above;
   * from IRIS_COLL_AR_STORE_MIN both phases store (the store two-shot) */
  const int push = IRIS_COLL_PUSH && KIND == IRIS_COLL_AR && count * sizeof(T) < IRIS_COLL_AR_PUSH_MAX;
  if (KIND == IRIS_COLL_AR && IRIS_COLL_PUSH && count * sizeof(T) >= IRIS_COLL_AR_STORE_MIN) {
    iris_coll_launch_ar_store<T, OP>(s, send, recv, count, sig, vec, blocks, stream);
    return;
  }
  switch (s->dev.ctx.world_size) {
  case 2: iris_coll_reduce_kernel<T, KIND, OP, 2><<<blocks, 512, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, sig, vec, push); break;
  case 4: iris_coll_reduce_kernel<T, KIND, OP, 4><<<blocks, 512, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, sig, vec, push); break;
  case 8: iris_coll_reduce_kernel<T, KIND, OP, 8><<<blocks, 512, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, sig, vec, push); break;
  default: iris_coll_reduce_kernel<T, KIND, OP, 0><<<blocks, 512, 0, stream>>>(s->dev, (const T *)send, (T *)recv, count, sig, vec, push); break;
  }
}
/* The relay broadcast (W >= 3): the chunk size for this grid, and no more CTAs than
 * chunks per part (a CTA without a chunk would only add barrier traffic). Every rank
 * computes the same from the same call. */
static void iris_coll_launch_relay(const iris_coll_state_t *s, const void *send, void *recv, size_t bytes, int root, unsigned long long sig, int blocks,
                                   iris_stream_t stream) {
  const iris_coll_relay_t r = iris_coll_relay_plan(bytes, s->dev.ctx.world_size, blocks, 0);
  blocks = iris_coll_relay_ctas(&r, blocks);
  iris_coll_relay_kernel<<<blocks, 512, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, r.chunk, root, sig);
}
/* The chain broadcast (W >= 3): no more CTAs than chunks. */
static void iris_coll_launch_chain(const iris_coll_state_t *s, const void *send, void *recv, size_t bytes, int root, unsigned long long sig, int blocks,
                                   iris_stream_t stream) {
  const size_t chunk = iris_coll_chain_chunk(bytes, blocks), chunks = iris_coll_chain_chunks(bytes, chunk);
  if ((size_t)blocks > chunks) blocks = (int)chunks;
  iris_coll_chain_kernel<<<blocks, 512, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, chunk, root, sig);
}
template <typename T, int KIND, int OP>
static void iris_coll_dispatch_op(const iris_coll_state_t *s, int ll, const void *send, void *recv, size_t count, int root, unsigned long long sig, int vec,
                                  int blocks, iris_stream_t stream) {
  if (ll == 2) iris_coll_launch_ll2<T, OP>(s, send, recv, count, sig, stream);
  else if (ll) iris_coll_launch_ll<T, KIND, OP>(s, send, recv, count, root, sig, stream);
  else iris_coll_launch_reduce<T, KIND, OP>(s, send, recv, count, sig, vec, blocks, stream);
}
/* Reductions (all-reduce, reduce-scatter): one instantiation per type and op. */
template <typename T, int KIND>
static void iris_coll_dispatch_reduce(const iris_coll_state_t *s, int ll, iris_redop_t op, const void *send, void *recv, size_t count,
                                      unsigned long long sig, int vec, int blocks, iris_stream_t stream) {
  if (op == IRIS_SUM) iris_coll_dispatch_op<T, KIND, IRIS_SUM>(s, ll, send, recv, count, 0, sig, vec, blocks, stream);
  else if (op == IRIS_MIN) iris_coll_dispatch_op<T, KIND, IRIS_MIN>(s, ll, send, recv, count, 0, sig, vec, blocks, stream);
  else if (op == IRIS_MAX) iris_coll_dispatch_op<T, KIND, IRIS_MAX>(s, ll, send, recv, count, 0, sig, vec, blocks, stream);
  else iris_coll_dispatch_op<T, KIND, IRIS_AVG>(s, ll, send, recv, count, 0, sig, vec, blocks, stream);
}
template <int KIND>
static void iris_coll_dispatch_type(const iris_coll_state_t *s, int ll, iris_dtype_t t, iris_redop_t op, const void *send, void *recv, size_t count,
                                    unsigned long long sig, int vec, int blocks, iris_stream_t stream) {
  switch (t) {
  case IRIS_FLOAT32: iris_coll_dispatch_reduce<float, KIND>(s, ll, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_FLOAT16: iris_coll_dispatch_reduce<iris_f16_t, KIND>(s, ll, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_BFLOAT16: iris_coll_dispatch_reduce<iris_bf16_t, KIND>(s, ll, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_INT32: iris_coll_dispatch_reduce<int, KIND>(s, ll, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_INT64: iris_coll_dispatch_reduce<long long, KIND>(s, ll, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_UINT8: iris_coll_dispatch_reduce<unsigned char, KIND>(s, ll, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_FLOAT8_E4M3: iris_coll_dispatch_reduce<iris_fp8_e4m3_t, KIND>(s, ll, op, send, recv, count, sig, vec, blocks, stream); break;
  default: iris_coll_dispatch_reduce<iris_fp8_e5m2_t, KIND>(s, ll, op, send, recv, count, sig, vec, blocks, stream); break;
  }
}
/* Data movement (all-gather, all-to-all, broadcast): bytes are bytes, so one
 * instantiation per element size (E: an unsigned type of that size) serves every type. */
template <typename E, int KIND>
static void iris_coll_dispatch_move(const iris_coll_state_t *s, int ll, const void *send, void *recv, size_t count, int root, unsigned long long sig, int blocks,
                                    iris_stream_t stream) {
  const size_t bytes = count * sizeof(E);
  if (KIND == IRIS_COLL_BC && ll == 2) iris_coll_launch_bc_ll2<E>(s, send, recv, count, root, sig, stream);
  else if (ll) iris_coll_launch_ll<E, KIND, IRIS_SUM>(s, send, recv, count, root, sig, stream);
  else if (KIND == IRIS_COLL_AG) iris_coll_copy_kernel<IRIS_COLL_AG><<<blocks, 512, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, root, sig);
  else if (KIND == IRIS_COLL_A2A) iris_coll_copy_kernel<IRIS_COLL_A2A><<<blocks, 512, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, root, sig);
  else if (s->dev.ctx.world_size >= 3 && bytes >= IRIS_COLL_CHAIN_MIN_BYTES) iris_coll_launch_chain(s, send, recv, bytes, root, sig, blocks, stream);
  else if (s->dev.ctx.world_size >= 3 && bytes >= IRIS_COLL_RELAY_MIN_BYTES) iris_coll_launch_relay(s, send, recv, bytes, root, sig, blocks, stream);
  else iris_coll_copy_kernel<IRIS_COLL_BC><<<blocks, 512, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, root, sig);
}
template <int KIND>
static void iris_coll_dispatch_size(const iris_coll_state_t *s, int ll, size_t es, const void *send, void *recv, size_t count, int root, unsigned long long sig,
                                    int blocks, iris_stream_t stream) {
  switch (es) {
  case 1: iris_coll_dispatch_move<unsigned char, KIND>(s, ll, send, recv, count, root, sig, blocks, stream); break;
  case 2: iris_coll_dispatch_move<unsigned short, KIND>(s, ll, send, recv, count, root, sig, blocks, stream); break;
  case 4: iris_coll_dispatch_move<unsigned, KIND>(s, ll, send, recv, count, root, sig, blocks, stream); break;
  default: iris_coll_dispatch_move<unsigned long long, KIND>(s, ll, send, recv, count, root, sig, blocks, stream); break;
  }
}

/* A buffer as it enters a call's signature: its heap offset + 2, or 0 off the heap. */
static unsigned long long iris_coll_sig_offset(const iris_device_ctx_t *c, const void *p) {
  const char *base = c->bases[c->rank], *q = (const char *)p;
  return q >= base && q < base + c->heap_size ? (unsigned long long)(q - base) + 2 : 0;
}

/* One launch on buffers that suit the chosen algorithm. The call's signature (announced
 * in every kernel's call header and compared by every rank) hashes the kind, count, type,
 * op, root, the buffers' heap offsets, the algorithm and the grid; type and op enter as
 * type * 16 + op, distinct for each pair. */
static_assert(IRIS_REDOP_COUNT <= 16, "the call signature packs type * 16 + op");
static void iris_coll_launch(const iris_coll_state_t *s, int kind_flags, int ll, iris_dtype_t t, iris_redop_t op, const void *send, void *recv, size_t count,
                             int root, int ctas, iris_stream_t stream) {
  const int W = s->dev.ctx.world_size, kind = kind_flags & ~IRIS_COLL_OWN_RECV;
  const size_t es = iris_dtype_size(t), bytes = count * es;
  unsigned long long sig = 1469598103934665603ULL;
  int vec, blocks;
  sig = (sig ^ (unsigned long long)kind) * 1099511628211ULL;
  sig = (sig ^ (unsigned long long)count) * 1099511628211ULL;
  sig = (sig ^ (unsigned long long)(t * 16 + op)) * 1099511628211ULL;
  sig = (sig ^ (unsigned long long)(root + 1)) * 1099511628211ULL;
  { /* heap buffers must sit at the same heap offsets on every rank; buffers off the heap
     * (the LL paths take any device memory: peers never touch them) enter as "off heap",
     * since their addresses differ from rank to rank */
    const int ag_in_place = kind == IRIS_COLL_AG && (const char *)send == (const char *)recv + (size_t)s->dev.ctx.rank * bytes;
    const int rs_in_place = kind == IRIS_COLL_RS && ((kind_flags & IRIS_COLL_OWN_RECV) || (const char *)recv == (const char *)send + (size_t)s->dev.ctx.rank * bytes);
    sig = (sig ^ (ag_in_place ? 1ULL : iris_coll_sig_offset(&s->dev.ctx, send))) * 1099511628211ULL;
    sig = (sig ^ (rs_in_place ? 1ULL : iris_coll_sig_offset(&s->dev.ctx, recv))) * 1099511628211ULL;
  }
  /* 16-byte path: every pointer and every per-rank block start is 16-byte aligned */
  vec = ((((uintptr_t)send | (uintptr_t)recv) & 15) == 0) && (kind == IRIS_COLL_AR || (bytes & 15) == 0);
  blocks = iris_coll_auto_ctas(kind == IRIS_COLL_AR, bytes, W, s->sms, ctas);
  /* the algorithm and grid too: ranks that would launch different kernels must not agree */
  sig = (sig ^ (unsigned long long)(ll * 1024 + blocks)) * 1099511628211ULL;
  switch (kind) {
  case IRIS_COLL_AR: iris_coll_dispatch_type<IRIS_COLL_AR>(s, ll, t, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_COLL_RS: iris_coll_dispatch_type<IRIS_COLL_RS>(s, ll, t, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_COLL_AG: iris_coll_dispatch_size<IRIS_COLL_AG>(s, ll, es, send, recv, count, root, sig, blocks, stream); break;
  case IRIS_COLL_A2A: iris_coll_dispatch_size<IRIS_COLL_A2A>(s, ll, es, send, recv, count, root, sig, blocks, stream); break;
  default: iris_coll_dispatch_size<IRIS_COLL_BC>(s, ll, es, send, recv, count, root, sig, blocks, stream); break;
  }
}

static const char *const iris_coll_names[IRIS_COLL_KINDS] = {"iris_all_reduce", "iris_all_gather", "iris_reduce_scatter", "iris_all_to_all", "iris_broadcast"};

static iris_status_t iris_coll_enqueue(iris_t *ctx, int kind_flags, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op, int root,
                                       iris_stream_t stream, const iris_coll_opts_t *opts) {
  const int kind = kind_flags & ~IRIS_COLL_OWN_RECV; /* the flag only reaches the signature (iris_coll_launch) */
  const char *name = iris_coll_names[kind];
  iris_coll_state_t *s;
  iris_status_t st;
  iris_coll_err_t e;
  size_t es = iris_dtype_size(t), in_elems, out_elems;
  int W, me, ll, ctas = 0, chunked_in, chunked_out;
  iris_algo_t algo = IRIS_ALGO_AUTO;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL context", name);
  W = iris_local_size(ctx); /* the node's ranks (a multi-node call composes these with the rails) */
  me = iris_local_rank(ctx);
  if (!es) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: unknown data type %d", me, name, (int)t);
  if ((kind == IRIS_COLL_AR || kind == IRIS_COLL_RS) && (op < IRIS_SUM || op >= IRIS_REDOP_COUNT))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: unknown reduction %d", me, name, (int)op);
  if (kind == IRIS_COLL_BC && (root < 0 || root >= W)) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rank %d: %s: root %d outside [0, %d)", me, name, root, W);
  if (opts) {
    if (opts->struct_size != sizeof(iris_coll_opts_t))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: iris_coll_opts_t.struct_size is wrong: start from IRIS_COLL_OPTS_INIT", name);
    if ((unsigned)opts->algo > (unsigned)IRIS_ALGO_TWO_SHOT_LL) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: unknown algorithm %d", name, (int)opts->algo);
    algo = opts->algo;
    ctas = opts->ctas;
    if (ctas < 0 || ctas > IRIS_COLL_MAX_CTAS) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: ctas %d outside [0, %d]", name, ctas, IRIS_COLL_MAX_CTAS);
  }
  if (count == 0) return IRIS_SUCCESS;
  if (!send || !recv) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: NULL buffer", me, name);
  if (count > ((size_t)1 << 40) / es) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: count %zu is too large", me, name, count);
  if (!(s = (iris_coll_state_t *)iris_detail_get_ext(ctx))) {
    if (iris_coll_capturing(stream))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: the first collective call (or iris_collectives_setup) must come before graph capture", me, name);
    if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st;
    s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  }
  chunked_in = kind == IRIS_COLL_RS || kind == IRIS_COLL_A2A;
  chunked_out = kind == IRIS_COLL_AG || kind == IRIS_COLL_A2A;
  in_elems = chunked_in ? (size_t)W * count : count;
  out_elems = chunked_out ? (size_t)W * count : count;
  ll = algo == IRIS_ALGO_LATENCY ||
       (algo == IRIS_ALGO_AUTO &&
        count * es <= (kind == IRIS_COLL_AR ? (W == 2 ? IRIS_COLL_LL_MAX_AR_W2 : IRIS_COLL_LL_MAX_AR)
                       : kind == IRIS_COLL_BC ? IRIS_COLL_LL_MAX_BC
                       : kind == IRIS_COLL_AG ? IRIS_COLL_LL_MAX_AG
                                              : IRIS_COLL_LL_MAX_OTHER));
  if (ll && count * es > IRIS_COLL_LL_BYTES) {
    if (algo == IRIS_ALGO_LATENCY)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_ALGO_LATENCY takes at most %zu bytes per rank, not %zu", me, name, IRIS_COLL_LL_BYTES,
                              count * es);
    ll = 0;
  }
  if (kind == IRIS_COLL_AR && W > 1) { /* the two-shot LL: does the chunk fit its slots? */
    const size_t chunk_bytes = iris_coll_ar_chunk(count, W, 8 / es) * es;
    if (algo == IRIS_ALGO_TWO_SHOT_LL && chunk_bytes > IRIS_COLL_LL2_BYTES)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_ALGO_TWO_SHOT_LL takes at most %zu bytes per rank's chunk (the message / %d), not %zu", me,
                              name, IRIS_COLL_LL2_BYTES, W, chunk_bytes);
    if (algo == IRIS_ALGO_TWO_SHOT_LL || (algo == IRIS_ALGO_AUTO && !ll && count * es <= IRIS_COLL_LL2_MAX_AR && chunk_bytes <= IRIS_COLL_LL2_BYTES)) ll = 2;
  } else if (kind == IRIS_COLL_BC && W >= 3) { /* the two-hop LL broadcast: does a part fit its slots? */
    const size_t part_bytes = ((count * es + 7) / 8 + (size_t)W - 2) / (size_t)(W - 1) * 8;
    if (algo == IRIS_ALGO_TWO_SHOT_LL && part_bytes > IRIS_COLL_LL2_BYTES)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_ALGO_TWO_SHOT_LL takes at most %zu bytes per part (the message / %d), not %zu", me, name,
                              IRIS_COLL_LL2_BYTES, W - 1, part_bytes);
    if (algo == IRIS_ALGO_TWO_SHOT_LL || (algo == IRIS_ALGO_AUTO && !ll && count * es <= IRIS_COLL_LL2_MAX_BC && part_bytes <= IRIS_COLL_LL2_BYTES)) ll = 2;
  } else if (algo == IRIS_ALGO_TWO_SHOT_LL) {
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_ALGO_TWO_SHOT_LL is an all-reduce algorithm, and a broadcast one at 3 or more ranks", me,
                            name);
  }
  if (ll || W == 1) {
    /* peers never touch the user's buffers: any device memory works */
    if (W == 1) {
      if (send != recv) e = iris_coll_memcpy_async(recv, send, out_elems * es, stream);
      else e = iris_coll_success;
    } else {
      iris_coll_launch(s, kind_flags, ll, t, op, send, recv, count, root, ctas, stream);
      e = iris_coll_get_last_error();
    }
    if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed: %s", me, name, iris_coll_error_text(e));
    return IRIS_SUCCESS;
  }
  {
    /* bandwidth path: peers read our buffers, so they must be on the heap; otherwise
     * (and for an in-place all-to-all, whose input peers read while we overwrite it)
     * go through the staging area, one chunk of `step` elements per launch */
    const int heap_in = iris_coll_in_heap(ctx, send, in_elems * es) && !(kind == IRIS_COLL_A2A && send == recv);
    const int heap_out = iris_coll_in_heap(ctx, recv, out_elems * es);
    size_t step = count, c0;
    if (heap_in && heap_out) {
      iris_coll_launch(s, kind_flags, 0, t, op, send, recv, count, root, ctas, stream);
      e = iris_coll_get_last_error();
      if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed: %s", me, name, iris_coll_error_text(e));
      return IRIS_SUCCESS;
    }
    if (!s->stage_bytes)
      return iris_detail_fail(IRIS_ERROR_NOT_IN_HEAP, "rank %d: %s: buffers off the symmetric heap need the staging area (IRIS_COLL_STAGING is 0)", me, name);
    step = iris_coll_staging_step(s->stage_bytes, es, W, chunked_in || chunked_out);
    for (c0 = 0; c0 < count; c0 += step) {
      const size_t n = count - c0 < step ? count - c0 : step;
      const char *in = heap_in ? (const char *)send + c0 * es : s->stage_in;
      char *out = heap_out ? (char *)recv + c0 * es : s->stage_out;
      e = iris_coll_success;
      if (heap_in && chunked_in) in = NULL; /* a chunked input on the heap is still strided: stage it */
      if (heap_out && chunked_out) out = NULL;
      if (!in) in = s->stage_in;
      if (!out) out = s->stage_out;
      if (in == s->stage_in) {
        if (chunked_in) e = iris_coll_memcpy2d_async(s->stage_in, n * es, (const char *)send + c0 * es, count * es, n * es, (size_t)W, stream);
        else e = iris_coll_memcpy_async(s->stage_in, (const char *)send + c0 * es, n * es, stream);
      }
      if (e == iris_coll_success) {
        iris_coll_launch(s, kind_flags, 0, t, op, in, out, n, root, ctas, stream);
        e = iris_coll_get_last_error();
      }
      if (e == iris_coll_success && out == s->stage_out) {
        if (chunked_out) e = iris_coll_memcpy2d_async((char *)recv + c0 * es, count * es, s->stage_out, n * es, n * es, (size_t)W, stream);
        else e = iris_coll_memcpy_async((char *)recv + c0 * es, s->stage_out, n * es, stream);
      }
      if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: staging failed: %s", me, name, iris_coll_error_text(e));
    }
    return IRIS_SUCCESS;
  }
}

/* ---- multi-node worlds (docs/multinode.md): the node's ranks run the iris kernels
 * above (iris_coll_enqueue works on the node), the rails (one NCCL/RCCL communicator
 * per local rank across the nodes) join the nodes. L ranks per node, N nodes, global
 * rank g = node * L + local rank. */
/* ncclDataType_t of an iris type (-1: none), ncclRedOp_t of an iris op */
static int iris_coll_nccl_type(iris_dtype_t t) {
  static const int map[IRIS_DTYPE_COUNT] = {7 /* ncclFloat32 */, 6 /* ncclFloat16 */, 9 /* ncclBfloat16 */, 2 /* ncclInt32 */,
                                            4 /* ncclInt64 */,   1 /* ncclUint8 */,   10 /* ncclFloat8e4m3 */, 11 /* ncclFloat8e5m2 */};
  return (unsigned)t < IRIS_DTYPE_COUNT ? map[t] : -1;
}
static int iris_coll_nccl_op(iris_redop_t op) { return op == IRIS_SUM ? 0 : op == IRIS_MAX ? 2 : op == IRIS_MIN ? 3 : 4 /* ncclAvg */; }
/* What the rails cannot do, refused before anything is enqueued. */
static iris_status_t iris_coll_mn_check(iris_t *ctx, const char *name, int kind, iris_dtype_t t, iris_redop_t op, const iris_nccl_api_t *nc) {
  const int me = iris_rank(ctx);
  if (!nc) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: the context has no rail communicator", me, name);
  if (iris_coll_nccl_type(t) < 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: unknown data type %d", me, name, (int)t);
  if ((t == IRIS_FLOAT8_E4M3 || t == IRIS_FLOAT8_E5M2) && nc->version < 22400 && (kind == IRIS_COLL_AR || kind == IRIS_COLL_RS))
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: fp8 reductions between nodes need NCCL 2.24 or later (loaded: version code %d)", me, name,
                            nc->version);
  if ((kind == IRIS_COLL_AR || kind == IRIS_COLL_RS) && (op < IRIS_SUM || op >= IRIS_REDOP_COUNT))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: unknown reduction %d", me, name, (int)op);
  if ((kind == IRIS_COLL_AR || kind == IRIS_COLL_RS) && op == IRIS_AVG && (t == IRIS_INT32 || t == IRIS_INT64 || t == IRIS_UINT8))
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: IRIS_AVG of an integer type across nodes (its truncation does not compose over nodes); use IRIS_SUM "
                            "and divide", me, name);
  return IRIS_SUCCESS;
}
static iris_status_t iris_coll_nccl_fail(iris_t *ctx, const char *name, const char *step, const iris_nccl_api_t *nc, int r) {
  return iris_detail_fail(IRIS_ERROR_SYSTEM, "rank %d (node %d): %s: the rail %s (NCCL) failed: %s", iris_rank(ctx), iris_node(ctx), name, step,
                          nc->get_error_string(r));
}
#define IRIS_COLL_MN_STEP(call)                          \
  do {                                                   \
    if ((st = (call)) != IRIS_SUCCESS) return st;        \
  } while (0)
#define IRIS_COLL_MN_NCCL(step, call)                                            \
  do {                                                                           \
    int nr_ = (call);                                                            \
    if (nr_ != 0) return iris_coll_nccl_fail(ctx, name, step, nc, nr_);          \
  } while (0)

/* The composition, between the caller's iris_detail_order_begin and _end. */
static iris_status_t iris_coll_mn_enqueue(iris_t *ctx, int kind, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op, int root,
                                          iris_stream_t stream, const iris_coll_opts_t *opts) {
  const char *name = iris_coll_names[kind];
  const iris_nccl_api_t *nc = iris_detail_nccl(ctx);
  void *rail = iris_rail_comm(ctx);
  const int L = iris_local_size(ctx), N = iris_num_nodes(ctx), l = iris_local_rank(ctx), n = iris_node(ctx);
  const int nt = iris_coll_nccl_type(t), nop = iris_coll_nccl_op(op);
  const size_t es = iris_dtype_size(t), W = (size_t)N * (size_t)L;
  iris_coll_state_t *s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  iris_status_t st;
  if (kind == IRIS_COLL_AR) {
    if (L == 1) { /* one rank per node: the rail is the world */
      IRIS_COLL_MN_NCCL("all-reduce", nc->all_reduce(send, recv, count, nt, nop, rail, stream));
    } else if (count % (size_t)L == 0 && count * es > IRIS_COLL_MN_ONESHOT_MAX) {
      /* in-node reduce-scatter into this rank's part of recv, the rail all-reduces that
       * part, in-node all-gather in place: each element is reduced by one rail */
      const size_t c = count / (size_t)L;
      char *part = (char *)recv + (size_t)l * c * es;
      IRIS_COLL_MN_STEP(iris_coll_enqueue(ctx, IRIS_COLL_RS | IRIS_COLL_OWN_RECV, send, part, c, t, op, 0, stream, opts)); /* part: offset l c */
      IRIS_COLL_MN_NCCL("all-reduce", nc->all_reduce(part, part, c, nt, nop, rail, stream));
      IRIS_COLL_MN_STEP(iris_coll_enqueue(ctx, IRIS_COLL_AG, part, recv, c, t, op, 0, stream, opts));
    } else {
      /* small (or not divisible by L): in-node all-reduce, rail 0 all-reduces across the
       * nodes, in-node broadcast from local rank 0 */
      IRIS_COLL_MN_STEP(iris_coll_enqueue(ctx, IRIS_COLL_AR, send, recv, count, t, op, 0, stream, opts));
      if (l == 0) IRIS_COLL_MN_NCCL("all-reduce", nc->all_reduce(recv, recv, count, nt, nop, rail, stream));
      IRIS_COLL_MN_STEP(iris_coll_enqueue(ctx, IRIS_COLL_BC, recv, recv, count, t, op, 0, stream, opts));
    }
  } else if (kind == IRIS_COLL_AG) {
    /* in-node all-gather into this node's slot of recv (global order), then every rail
     * all-gathers the node slots in place */
    char *slot = (char *)recv + (size_t)n * (size_t)L * count * es;
    IRIS_COLL_MN_STEP(iris_coll_enqueue(ctx, IRIS_COLL_AG, send, slot, count, t, op, 0, stream, opts));
    IRIS_COLL_MN_NCCL("all-gather", nc->all_gather(slot, recv, (size_t)L * count * es, 1 /* ncclUint8: data moves as bytes */, rail, stream));
  } else if (kind == IRIS_COLL_RS) {
    /* per piece of k elements of each rank's count: the W blocks are copied contiguous
     * (unless k == count), the rail reduce-scatters the node blocks (L * k each), the
     * node reduce-scatters its block: rank g gets block g reduced over the world */
    const size_t cap = IRIS_COLL_MN_SCRATCH_BYTES / es / (W + (size_t)L);
    size_t k = count < cap ? count : cap, c0;
    if (L == 1) {
      IRIS_COLL_MN_NCCL("reduce-scatter", nc->reduce_scatter(send, recv, count, nt, nop, rail, stream));
      return IRIS_SUCCESS;
    }
    if (k == 0) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: IRIS_COLL_MN_SCRATCH_BYTES is too small for %zu ranks", iris_rank(ctx), name, W);
    for (c0 = 0; c0 < count; c0 += k) {
      const size_t m = count - c0 < k ? count - c0 : k;
      const char *in = (const char *)send;
      char *mid = s->mn_scratch + W * k * es;
      if (m != count) {
        iris_coll_err_t e = iris_coll_memcpy2d_async(s->mn_scratch, m * es, (const char *)send + c0 * es, count * es, m * es, W, stream);
        if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", iris_rank(ctx), name, iris_coll_error_text(e));
        in = s->mn_scratch;
      }
      IRIS_COLL_MN_NCCL("reduce-scatter", nc->reduce_scatter(in, mid, (size_t)L * m, nt, nop, rail, stream));
      /* recv: in place it is send + g count, at an offset that differs by rank */
      IRIS_COLL_MN_STEP(iris_coll_enqueue(ctx, IRIS_COLL_RS | IRIS_COLL_OWN_RECV, mid, (char *)recv + c0 * es, m, t, op, 0, stream, opts));
    }
  } else if (kind == IRIS_COLL_A2A) {
    /* per piece of k elements of each block: s1[l'][n'] = send[n' L + l'] (copies), in-node
     * all-to-all of N k per peer into s2[l][n'], s3[n'][l] = s2[l][n'] (copies), rail
     * send/recv of L k per node into s2[n'][l] = the blocks of ranks n' L + l, copied to
     * recv (received in place when one piece holds the whole block) */
    const size_t cap = IRIS_COLL_MN_SCRATCH_BYTES / es / (3 * W);
    const size_t k = count < cap ? count : cap;
    size_t c0;
    int q;
    if (k == 0) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: IRIS_COLL_MN_SCRATCH_BYTES is too small for %zu ranks", iris_rank(ctx), name, W);
    for (c0 = 0; c0 < count; c0 += k) {
      const size_t m = count - c0 < k ? count - c0 : k, blk = m * es;
      char *s1 = s->mn_scratch, *s2 = s1 + W * blk, *s3 = s2 + W * blk;
      iris_coll_err_t e = iris_coll_success;
      for (q = 0; q < L && e == iris_coll_success; q++)
        e = iris_coll_memcpy2d_async(s1 + (size_t)q * N * blk, blk, (const char *)send + ((size_t)q * count + c0) * es, (size_t)L * count * es, blk, (size_t)N, stream);
      if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", iris_rank(ctx), name, iris_coll_error_text(e));
      IRIS_COLL_MN_STEP(iris_coll_enqueue(ctx, IRIS_COLL_A2A, s1, s2, (size_t)N * m, t, op, 0, stream, opts));
      for (q = 0; q < N && e == iris_coll_success; q++)
        e = iris_coll_memcpy2d_async(s3 + (size_t)q * L * blk, blk, s2 + (size_t)q * blk, (size_t)N * blk, blk, (size_t)L, stream);
      if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", iris_rank(ctx), name, iris_coll_error_text(e));
      IRIS_COLL_MN_NCCL("group start", nc->group_start());
      for (q = 0; q < N; q++) {
        char *into = m == count ? (char *)recv + (size_t)q * L * count * es : s2 + (size_t)q * L * blk;
        int r1 = nc->send(s3 + (size_t)q * L * blk, (size_t)L * blk, 1 /* ncclUint8 */, q, rail, stream);
        int r2 = r1 ? 0 : nc->recv(into, (size_t)L * blk, 1, q, rail, stream);
        if (r1 || r2) { nc->group_end(); return iris_coll_nccl_fail(ctx, name, "send/recv", nc, r1 ? r1 : r2); }
      }
      IRIS_COLL_MN_NCCL("group end", nc->group_end());
      for (q = 0; m != count && q < N && e == iris_coll_success; q++)
        e = iris_coll_memcpy2d_async((char *)recv + ((size_t)q * L * count + c0) * es, count * es, s2 + (size_t)q * L * blk, blk, blk, (size_t)L, stream);
      if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", iris_rank(ctx), name, iris_coll_error_text(e));
    }
  } else { /* broadcast: the root's rail carries it to every node, each node broadcasts it */
    const int rn = root / L, rl = root % L;
    if (l == rl) IRIS_COLL_MN_NCCL("broadcast", nc->broadcast(send, recv, count * es, 1 /* ncclUint8 */, rn, rail, stream));
    if (L > 1) IRIS_COLL_MN_STEP(iris_coll_enqueue(ctx, IRIS_COLL_BC, recv, recv, count, t, op, rl, stream, opts));
  }
  return IRIS_SUCCESS;
}

static iris_status_t iris_coll_mn_run(iris_t *ctx, int kind, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op, int root,
                                      iris_stream_t stream, const iris_coll_opts_t *opts) {
  const char *name = iris_coll_names[kind];
  const int me = iris_rank(ctx), W = iris_world_size(ctx);
  iris_status_t st, st2;
  if ((st = iris_coll_mn_check(ctx, name, kind, t, op, iris_detail_nccl(ctx))) != IRIS_SUCCESS) return st;
  if (kind == IRIS_COLL_BC && (root < 0 || root >= W)) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rank %d: %s: root %d outside [0, %d)", me, name, root, W);
  if (opts && opts->struct_size != sizeof(iris_coll_opts_t))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: iris_coll_opts_t.struct_size is wrong: start from IRIS_COLL_OPTS_INIT", name);
  if (count == 0) return IRIS_SUCCESS;
  if (!send || !recv) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: NULL buffer", me, name);
  if (!iris_detail_get_ext(ctx)) {
    if (iris_coll_capturing(stream))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: the first collective call (or iris_collectives_setup) must come before graph capture", me, name);
    if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st;
  }
  if ((st = iris_detail_order_begin(ctx, stream)) != IRIS_SUCCESS) return st;
  st = iris_coll_mn_enqueue(ctx, kind, send, recv, count, t, op, root, stream, opts);
  st2 = iris_detail_order_end(ctx, stream);
  return st != IRIS_SUCCESS ? st : st2;
}

/* Every collective: refuse a context with a fatal fault at once (no launch, no wait),
 * then enqueue after the context's previous call, whatever its stream. */
static iris_status_t iris_coll_run(iris_t *ctx, int kind, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op, int root,
                                   iris_stream_t stream, const iris_coll_opts_t *opts) {
  iris_status_t st, st2;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL context", iris_coll_names[kind]);
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  if (iris_num_nodes(ctx) > 1) return iris_coll_mn_run(ctx, kind, send, recv, count, t, op, root, stream, opts);
  if (iris_world_size(ctx) == 1 || count == 0) return iris_coll_enqueue(ctx, kind, send, recv, count, t, op, root, stream, opts);
  if ((st = iris_detail_order_begin(ctx, stream)) != IRIS_SUCCESS) return st;
  st = iris_coll_enqueue(ctx, kind, send, recv, count, t, op, root, stream, opts);
  st2 = iris_detail_order_end(ctx, stream);
  return st != IRIS_SUCCESS ? st : st2;
}

IRIS_DEF iris_status_t iris_all_reduce_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op, iris_stream_t stream,
                                          const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_AR, send, recv, count, type, op, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_all_gather_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                          const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_AG, send, recv, count, type, IRIS_SUM, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_reduce_scatter_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op,
                                              iris_stream_t stream, const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_RS, send, recv, count, type, op, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_all_to_all_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                          const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_A2A, send, recv, count, type, IRIS_SUM, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_broadcast_ex(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, int root, iris_stream_t stream,
                                         const iris_coll_opts_t *opts) {
  return iris_coll_run(ctx, IRIS_COLL_BC, send, recv, count, type, IRIS_SUM, root, stream, opts);
}
IRIS_DEF iris_status_t iris_all_reduce(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op, iris_stream_t stream) {
  return iris_all_reduce_ex(ctx, send, recv, count, type, op, stream, NULL);
}
IRIS_DEF iris_status_t iris_all_gather(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream) {
  return iris_all_gather_ex(ctx, send, recv, count, type, stream, NULL);
}
IRIS_DEF iris_status_t iris_reduce_scatter(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op, iris_stream_t stream) {
  return iris_reduce_scatter_ex(ctx, send, recv, count, type, op, stream, NULL);
}
IRIS_DEF iris_status_t iris_all_to_all(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream) {
  return iris_all_to_all_ex(ctx, send, recv, count, type, stream, NULL);
}
IRIS_DEF iris_status_t iris_broadcast(iris_t *ctx, const void *send, void *recv, size_t count, iris_dtype_t type, int root, iris_stream_t stream) {
  return iris_broadcast_ex(ctx, send, recv, count, type, root, stream, NULL);
}
IRIS_DEF iris_status_t iris_tile_flags_create(iris_t *ctx, int num_tiles, iris_tile_flags_t *out) {
  iris_status_t st;
  char *base = NULL;
  size_t bytes;
  if (!ctx || !out || num_tiles < 1) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_tile_flags_create: NULL argument or num_tiles < 1");
  memset(out, 0, sizeof *out);
  bytes = (size_t)num_tiles * (IRIS_MAX_RANKS * sizeof(unsigned long long) + sizeof(unsigned));
  st = iris_calloc(ctx, bytes, (void **)&base); /* on a failed memset the block stays (offsets stay equal) */
  if (!base) return st;
  /* *out owns the block from here, also on failure: iris_tile_flags_destroy frees it */
  out->flags = (unsigned long long *)base;
  out->counters = (unsigned *)(base + (size_t)num_tiles * IRIS_MAX_RANKS * sizeof(unsigned long long));
  out->num_tiles = num_tiles;
  if (st != IRIS_SUCCESS) return st;
  return iris_barrier(ctx); /* zero everywhere before anyone signals */
}
IRIS_DEF iris_status_t iris_tile_flags_destroy(iris_t *ctx, iris_tile_flags_t *f) {
  iris_status_t st;
  if (!ctx || !f) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_tile_flags_destroy: NULL argument");
  if (!f->flags) return IRIS_SUCCESS;
  st = iris_free(ctx, f->flags);
  memset(f, 0, sizeof *f);
  return st;
}

IRIS_DEF iris_status_t iris_barrier_device(iris_t *ctx, iris_stream_t stream) {
  iris_coll_state_t *s;
  iris_status_t st;
  iris_coll_err_t e;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_barrier_device: NULL context");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  if (!(s = (iris_coll_state_t *)iris_detail_get_ext(ctx))) {
    if (iris_coll_capturing(stream))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_barrier_device: call iris_collectives_setup before graph capture");
    if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st;
    s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  }
  if (iris_world_size(ctx) == 1) return IRIS_SUCCESS;
  if ((st = iris_detail_order_begin(ctx, stream)) != IRIS_SUCCESS) return st;
  if (iris_local_size(ctx) > 1) iris_coll_barrier_kernel<<<1, 64, 0, stream>>>(s->dev, 0x6261727269657221ULL); /* a signature no collective has */
  e = iris_coll_get_last_error();
  if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "iris_barrier_device: launch failed: %s", iris_coll_error_text(e));
  if (iris_num_nodes(ctx) > 1) { /* then the nodes meet over the rails (a one-word all-reduce), then the node again */
    const iris_nccl_api_t *nc = iris_detail_nccl(ctx);
    int r = nc->all_reduce(s->mn_scratch, s->mn_scratch, 1, 2 /* ncclInt32 */, 0 /* ncclSum */, iris_rail_comm(ctx), stream);
    if (r != 0) return iris_detail_fail(IRIS_ERROR_SYSTEM, "rank %d: iris_barrier_device: the rail all-reduce (NCCL) failed: %s", iris_rank(ctx), nc->get_error_string(r));
    if (iris_local_size(ctx) > 1) iris_coll_barrier_kernel<<<1, 64, 0, stream>>>(s->dev, 0x6261727269657222ULL);
    e = iris_coll_get_last_error();
    if (e != iris_coll_success) return iris_detail_fail(IRIS_ERROR_GPU, "iris_barrier_device: launch failed: %s", iris_coll_error_text(e));
  }
  return iris_detail_order_end(ctx, stream);
}
#endif /* IRIS_IMPLEMENTATION */

#endif
#endif /* IRIS_COLLECTIVES_H */
