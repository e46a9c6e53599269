/* internal/moe/kernels.h: the MoE dispatch and combine (iris_moe.h): what crosses GPUs
 * (flags, count vectors, rows, source ids) as types, the device state, the building
 * blocks' bodies and the two kernels (dispatch, combine). Device code (nvcc,
 * hipcc). Part of iris_moe.h; not a public header. docs/moe.md has the protocol.
 *
 * One call, on rank `me` (W ranks, E experts, L = E/W local ones):
 *   dispatch  one kernel. CTA 0 routes: validate topk_idx, count this rank's rows per
 *             global expert and give each (token, k) its place among them; store the
 *             count vector (E ints) into every rank's `counts[me]` and release
 *             flags.count[me] there (epoch e); wait for the W count flags here; from
 *             the W x E counts every rank computes, alike, where each source's rows for
 *             each expert start on the expert's rank (sources in rank order, packed from
 *             the expert's first row), and its own recv counts and offsets; it releases
 *             flags.route (device scope), which the other CTAs wait for. Then every
 *             CTA: a warp per (token, slice of hidden) loads the
 *             slice once (fp8: quantises it), stores it with 16-byte stores into each of
 *             the token's destinations (recv_x row, scales, source id); the last CTA to
 *             finish releases flags.data[me] on every rank and waits for the W data
 *             flags here.
 *   combine   one kernel: a warp per (received row, slice) stores y's slice into the
 *             source rank's combine slot (token * top_k + k); the last CTA releases
 *             flags.comb[me] on every rank; then every CTA waits for the W comb flags
 *             and out[t] = round(sum_k w * slot(t, k)) in fp32.
 * Both kernels have CTAs that wait for other CTAs of the same grid: the grid is at most
 * the SM count (one CTA per SM fits), so all of it is resident.
 * Epochs live in iris_moe_state_t (device memory), advanced by the kernels: graph
 * replays count on. Flags only count up (IRIS_CMP_EPOCH), never reset.
 * A wait that gives up (its bound, or the context's fatal fault) still releases the
 * call's flags, so no peer waits out its bound for it, but first marks every peer
 * (iris_moe_marks_t.gaveup, iris_moe_finish): the peers' iris_moe_check then reports
 * IRIS_ERROR_TIMEOUT instead of SUCCESS on rows or sums that rank did not (or could not
 * rightly) send; from then on that rank's plan takes part with nothing of its own. */
#ifndef IRIS_MOE_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_moe.h"
#endif
#ifndef IRIS_INTERNAL_MOE_KERNELS_H
#define IRIS_INTERNAL_MOE_KERNELS_H
#include "../device/platform.h"
#include "../device/trace.h"
#include "../coll/types.h"

/* ---------------------------------------------------------------- protocol types -- */
/* On every rank's heap (iris_calloc: zero once). Rank q's release of epoch e into this
 * rank's word [q] says: count[q] — q's count vector of dispatch e is in `counts`;
 * data[q] — every row of dispatch e from q is here; comb[q] — every combine row of call
 * e that q's experts computed for this rank's tokens is here. */
typedef struct iris_moe_flags {
  unsigned count[IRIS_MAX_RANKS];
  unsigned data[IRIS_MAX_RANKS];
  unsigned comb[IRIS_MAX_RANKS];
  unsigned route;  /* this rank only: the dispatch kernel's routing CTA has finished call `route` */
  unsigned pad[3];
} iris_moe_flags_t;
static_assert(sizeof(iris_moe_flags_t) == 12 * IRIS_MAX_RANKS + 16 && offsetof(iris_moe_flags_t, data) == 4 * IRIS_MAX_RANKS &&
                  offsetof(iris_moe_flags_t, comb) == 8 * IRIS_MAX_RANKS && offsetof(iris_moe_flags_t, route) == 12 * IRIS_MAX_RANKS,
              "iris_moe_flags_t: three arrays of one 32-bit epoch per source rank, then the routing word");

/* Marks a rank stores into every rank's block (its own included) before it releases the
 * call's flag there; on the heap (iris_calloc: zero once), read only by iris_moe_check on
 * the host, so the kernels pay nothing for them (a load of them after the flag wait cost
 * 0.5-0.7 us per call on 2 H200s). Only rank q writes word [q], anywhere.
 *   nocomb[q]  rank q's combines refused so far (no usable y: it sent NaN rows) << 32 | the
 *              last one's call number. The count, not the call number, says "a new one":
 *              a call number alone cannot, since the block starts at 0 and call 0 comes
 *              after 2^32 combines (iris_moe_check keeps the last word it reported).
 *   gaveup[q]  1 once rank q took part in a call of the plan after a wait of its plan gave
 *              up there (iris_moe_state_t.failed); never cleared. */
typedef struct iris_moe_marks {
  unsigned long long nocomb[IRIS_MAX_RANKS];
  unsigned gaveup[IRIS_MAX_RANKS];
} iris_moe_marks_t;
static_assert(offsetof(iris_moe_marks_t, gaveup) == 8 * IRIS_MAX_RANKS && sizeof(iris_moe_marks_t) <= 12 * IRIS_MAX_RANKS + 4,
              "iris_moe_marks_t: one 64-bit refusal word, then one give-up word, per source rank");

/* The first routing error a kernel met (what: IRIS_MOE_ERR_*; 0: none). TOKENS: a combine
 * asked for another token count than the dispatch it follows on the device routed (value:
 * the dispatch's, token: the combine's, k: the rows of out it wrote: the fewer, none
 * without an out); PEER: rank `value` refused its combine of the call and sent NaN rows
 * (the tokens they serve are NaN in out); GAVEUP: rank `value` gave up waiting in this
 * plan (PEER and GAVEUP: found by iris_moe_check in the marks block, not recorded by a
 * kernel). */
enum { IRIS_MOE_ERR_NONE = 0, IRIS_MOE_ERR_EXPERT, IRIS_MOE_ERR_REPEAT, IRIS_MOE_ERR_OVERFLOW, IRIS_MOE_ERR_SOURCE, IRIS_MOE_ERR_TOKENS, IRIS_MOE_ERR_PEER, IRIS_MOE_ERR_GAVEUP };
typedef struct iris_moe_err {
  unsigned what, call; /* IRIS_MOE_ERR_*, the dispatch number (1, 2, ...) */
  int token, k;        /* the (token, k) entry of topk_idx, or -1 */
  long long value;     /* the bad index, the rows needed, the bad source word */
} iris_moe_err_t;
static_assert(sizeof(iris_moe_err_t) == 24 && offsetof(iris_moe_err_t, value) == 16, "iris_moe_err_t layout");

/* This rank's state in device memory (zeroed at create). */
typedef struct iris_moe_state {
  unsigned disp_epoch; /* dispatches so far (the dispatch kernel's last CTA advances it) */
  unsigned comb_epoch; /* combines so far (the combine kernel's last CTA advances it) */
  unsigned ticket;     /* CTAs of the running kernel that are done (+ IRIS_MOE_TICKET_FAILED per failed one); back to 0 by the last */
  int n;               /* tokens of the last dispatch routed (the rows its slots and weights hold) */
  unsigned failed;     /* 1 once a wait of this plan gave up here before what it waited for was sent on (never cleared): iris_moe_finish */
  unsigned pad;
  iris_moe_err_t err;
} iris_moe_state_t;
static_assert(sizeof(iris_moe_state_t) == 48 && offsetof(iris_moe_state_t, failed) == 16 && offsetof(iris_moe_state_t, err) == 24, "iris_moe_state_t layout");

/* The kernels' view of a plan (by value). */
typedef struct iris_moe_dev {
  iris_device_ctx_t ctx;
  iris_moe_flags_t *flags; /* heap */
  int *counts;             /* heap: [W][E], counts[q][g] = rows rank q sends to expert g this call */
  char *recv_x;            /* heap: [cap][H] of the dispatch type */
  float *recv_scales;      /* heap, fp8: [cap][H/128] */
  int *recv_src;           /* heap: [cap] */
  iris_bf16_t *comb;       /* heap: [T * K][H], slot (t, k) for expert k's output of token t */
  iris_moe_marks_t *marks; /* heap: the refusal and give-up marks (iris_moe_marks_t), stored before the flag of their call */
  iris_moe_state_t *st;    /* device */
  int *slot;               /* device: [T * K], destination row of (t, k) on its expert's rank, -1: none */
  float *w;                /* device: [T * K], the dispatch's weights */
  int *count, *offsets;    /* device: [L], [L + 1] */
  long long cap;           /* rows of recv_x */
  int W, me, E, L, T, H, K;
  int ht;                  /* high-throughput layout */
} iris_moe_dev_t;

/* ---------------------------------------------------------------- small helpers -- */
/* Items a warp of the combine kernel's store phase handles per pass (their loads overlap). */
#define IRIS_MOE_UNROLL 4
IRIS_DEVICE_INLINE float iris_moe_bf16_lo(unsigned u) { return __uint_as_float(u << 16); }
IRIS_DEVICE_INLINE float iris_moe_bf16_hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
IRIS_DEVICE_INLINE unsigned iris_moe_pack_bf16(float a, float b) {
  return (unsigned)iris_coll_down<iris_bf16_t>(a).bits | ((unsigned)iris_coll_down<iris_bf16_t>(b).bits << 16);
}
/* acc[0..8) += w * the 8 bf16 values of v */
IRIS_DEVICE_INLINE void iris_moe_axpy8(float *acc, float w, uint4 v) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc[2 * i] += w * iris_moe_bf16_lo(u[i]);
    acc[2 * i + 1] += w * iris_moe_bf16_hi(u[i]);
  }
}
IRIS_DEVICE_INLINE uint4 iris_moe_round8(const float *acc) {
  uint4 r;
  r.x = iris_moe_pack_bf16(acc[0], acc[1]);
  r.y = iris_moe_pack_bf16(acc[2], acc[3]);
  r.z = iris_moe_pack_bf16(acc[4], acc[5]);
  r.w = iris_moe_pack_bf16(acc[6], acc[7]);
  return r;
}
/* The first error wins; the others are dropped. */
IRIS_DEVICE_INLINE void iris_moe_record(const iris_moe_dev_t &d, unsigned what, unsigned call, int token, int k, long long value) {
  if (atomicCAS(&d.st->err.what, 0u, what) != 0u) return;
  d.st->err.call = call;
  d.st->err.token = token;
  d.st->err.k = k;
  d.st->err.value = value;
}

/* ------------------------------------------------------------ building blocks -- */
/* Four floats to four e4m3 codes (byte i = value i), rounded to nearest even, saturated at
 * +-448: NVIDIA sm_89+ converts two per instruction (cvt.rn.satfinite.e4m3x2.f32: the
 * first operand lands in the upper byte); elsewhere the library's software encoder, which
 * gives the same codes for finite inputs. */
IRIS_DEVICE_INLINE unsigned iris_moe_fp8x4(float a, float b, float c, float d) {
#if IRIS_DEVICE_FP8_CVT
  return iris_detail_e4m3x4(a, b, c, d);
#else
  return (unsigned)iris_float_to_fp8_e4m3(a) | ((unsigned)iris_float_to_fp8_e4m3(b) << 8) | ((unsigned)iris_float_to_fp8_e4m3(c) << 16) |
         ((unsigned)iris_float_to_fp8_e4m3(d) << 24);
#endif
}
/* iris_moe_quant_fp8; HALF: a lane's second 8 values only where the row has them (hidden
 * a multiple of 8: the public block); the dispatch kernel's rows are whole 128-value groups
 * (create's rule), and the test cost its fp8 high-throughput dispatch 0.3-0.5%. */
template <bool HALF>
IRIS_DEVICE_INLINE bool iris_moe_detail_quant_fp8(const iris_bf16_t *row, int hidden, int col0, uint4 *q, float *scale) {
  const int lane = (int)(threadIdx.x % IRIS_WARP_SIZE), col = col0 + 16 * lane;
  const bool in = col < hidden;
  uint4 a = make_uint4(0, 0, 0, 0), b = make_uint4(0, 0, 0, 0);
  if (in) {
    a = *(const uint4 *)(row + col);
    if (!HALF || col + 8 < hidden) b = *(const uint4 *)(row + col + 8);
  }
  const unsigned u[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  float v[16], amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    v[2 * i] = iris_moe_bf16_lo(u[i]);
    v[2 * i + 1] = iris_moe_bf16_hi(u[i]);
    amax = fmaxf(amax, fmaxf(fabsf(v[2 * i]), fabsf(v[2 * i + 1])));
  }
  /* 8 lanes hold one 128-value group */
  amax = fmaxf(amax, iris_detail_shfl_xor(amax, 1));
  amax = fmaxf(amax, iris_detail_shfl_xor(amax, 2));
  amax = fmaxf(amax, iris_detail_shfl_xor(amax, 4));
  const float inv = amax > 0.0f ? 448.0f / amax : 0.0f;
  *scale = amax > 0.0f ? amax / 448.0f : 1.0f;
  unsigned o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = iris_moe_fp8x4(v[4 * i] * inv, v[4 * i + 1] * inv, v[4 * i + 2] * inv, v[4 * i + 3] * inv);
  *q = make_uint4(o[0], o[1], o[2], o[3]);
  return in;
}
IRIS_DEVICE_INLINE bool iris_moe_quant_fp8(const iris_bf16_t *row, int hidden, int col0, uint4 *q, float *scale) {
  return iris_moe_detail_quant_fp8<true>(row, hidden, col0, q, scale);
}
IRIS_DEVICE_INLINE bool iris_moe_weighted_sum(const iris_bf16_t *const *rows, const float *w, int n, int hidden, int col0, uint4 *out) {
  const int col = col0 + 8 * (int)(threadIdx.x % IRIS_WARP_SIZE);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (col >= hidden) return false;
  for (int j = 0; j < n; ++j)
    if (rows[j]) iris_moe_axpy8(acc, w[j], *(const uint4 *)(rows[j] + col));
  *out = iris_moe_round8(acc);
  return true;
}

/* What a CTA adds to the ticket on top of its 1 when it failed (one of its waits gave up, or
 * the plan had failed before the kernel): the low 16 bits count the CTAs (grid <= SMs <
 * 2^16), the rest the failed ones. */
#define IRIS_MOE_TICKET_FAILED 0x10000u

/* Whole block, after a data kernel's stores: the last CTA to get here (every CTA's stores
 * are then done: each released its ticket at system scope after a block barrier, the
 * last acquired them all) stores e into *epoch_word (every CTA read the old value at its
 * start), releases flag[me] = e on every rank and, with `wait`, waits for the W flags of
 * this rank. Returns false if that wait ran out. The kernel's grid must be resident at
 * once when other CTAs wait for what the last one signals (grid <= SMs).
 * failed: this CTA took part with nothing, or with part of its work (the plan had failed
 * before, or a wait of this CTA gave up; the context has a fatal fault then). If any CTA
 * failed, the last one sets the plan's sticky `failed` word and, before each release,
 * stores gaveup[me] = 1 on that rank: the peers' iris_moe_check reports it instead of
 * SUCCESS on rows or sums they cannot trust. A failed wait here sets the word as well:
 * this kernel's stores went out whole before it, but what this rank received (the rows its
 * combine sends back) may not have. The usual call pays a register test: the failures
 * ride on the ticket's add.
 * refused: a combine refused on this rank (no usable y): its refusal word goes to every
 * rank before the release (iris_moe_marks_t.nocomb). */
IRIS_DEVICE_INLINE bool iris_moe_finish(const iris_moe_dev_t &d, unsigned *flag, unsigned e, unsigned *epoch_word, bool wait, const char *what, bool failed,
                                        bool refused = false) {
  __shared__ int last, any;
  __shared__ unsigned long long refusal;
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned old = iris_atomic_add<IRIS_ORDER_ACQ_REL, IRIS_SCOPE_SYSTEM>(&d.st->ticket, failed ? IRIS_MOE_TICKET_FAILED + 1u : 1u);
    last = (old & (IRIS_MOE_TICKET_FAILED - 1u)) == gridDim.x - 1;
    any = failed || old >= IRIS_MOE_TICKET_FAILED;
    if (last) {
      d.st->ticket = 0; /* the next kernel to use it starts after this one ends */
      *epoch_word = e;
      if (any) d.st->failed = 1u;
      /* only this rank writes word [me], and its previous value is here */
      if (refused) refusal = ((d.marks->nocomb[d.me] >> 32) + 1ull) << 32 | e;
    }
  }
  __syncthreads();
  if (!last) return true;
  const int q = (int)threadIdx.x;
  int ok = 1;
  if (q < d.W) { /* the marks before the release below, by the same thread */
    if (refused) iris_store(d.ctx, &d.marks->nocomb[d.me], refusal, q);
    if (any) iris_store(d.ctx, &d.marks->gaveup[d.me], 1u, q);
    iris_signal(d.ctx, flag + d.me, e, q);
    if (wait) ok = iris_wait_until(d.ctx, flag + q, IRIS_CMP_EPOCH, e, what);
  }
  ok = __syncthreads_and(ok);
  if (!ok && threadIdx.x == 0) d.st->failed = 1u;
  return ok != 0;
}

/* --------------------------------------------------------------------- kernels -- */
/* Dispatch's routing, by one CTA (every thread; `sh`: 3 * E ints of shared memory) for
 * call e. See the file's head. Ends with a device-scope release of flags.route = e.
 * Returns false (every thread) if the wait for the count vectors gave up: then no row
 * goes anywhere, but this rank's count vector went out, so the peers expect rows from it
 * (the caller marks them: iris_moe_finish). */
IRIS_DEVICE_INLINE bool iris_moe_route(const iris_moe_dev_t &d, const int *idx, const float *wts, int n, unsigned e, int *sh) {
  int *cnt = sh, *base = cnt + d.E, *tot = base + d.E;
  const int tid = (int)threadIdx.x, nt = (int)blockDim.x, K = d.K, E = d.E, L = d.L, W = d.W, me = d.me, nk = n * K;
  for (int i = tid; i < E; i += nt) cnt[i] = 0;
  __syncthreads();
  for (int i = tid; i < nk; i += nt) {
    const int t = i / K, k = i - t * K, g = idx[i];
    int pos = -1;
    if (g < -1 || g >= E) iris_moe_record(d, IRIS_MOE_ERR_EXPERT, e, t, k, g);
    else if (g >= 0) {
      bool rep = false;
      for (int j = 0; j < k; ++j) rep |= idx[t * K + j] == g;
      if (rep) iris_moe_record(d, IRIS_MOE_ERR_REPEAT, e, t, k, g);
      else pos = atomicAdd(&cnt[g], 1);
    }
    d.slot[i] = pos;
    d.w[i] = wts[i];
  }
  __syncthreads();
  for (int i = tid; i < W * E; i += nt) {
    const int q = i / E, g = i - q * E;
    iris_store(d.ctx, d.counts + (size_t)me * E + g, cnt[g], q);
  }
  __syncthreads(); /* the block's stores, then the W releases */
  int ok = 1;
  if (tid < W) {
    iris_signal(d.ctx, &d.flags->count[me], e, tid);
    ok = iris_wait_until(d.ctx, &d.flags->count[tid], IRIS_CMP_EPOCH, e, "iris_moe_dispatch: count vectors");
  }
  ok = __syncthreads_and(ok);
  if (ok) {
    for (int g = tid; g < E; g += nt) {
      int s = 0, before = 0;
      for (int q = 0; q < W; ++q) {
        const int c = d.counts[(size_t)q * E + g];
        s += c;
        before += q < me ? c : 0;
      }
      tot[g] = s;
      base[g] = before;
    }
    __syncthreads();
    if (tid < W) { /* rank tid's experts: where each starts on it (the same numbers on every rank) */
      long long acc = 0;
      for (int l = 0; l < L; ++l) {
        const int g = tid * L + l, c = tot[g];
        const long long off = d.ht ? acc : (long long)l * W * d.T;
        base[g] = (int)(off + base[g] < d.cap ? off + base[g] : d.cap);
        if (tid == me) {
          const long long o = d.ht && acc > d.cap ? d.cap : acc, o2 = d.ht && acc + c > d.cap ? d.cap : acc + c;
          d.offsets[l] = (int)o;
          d.count[l] = (int)(o2 - o);
        }
        acc += c;
      }
      if (tid == me) {
        d.offsets[L] = (int)(d.ht && acc > d.cap ? d.cap : acc);
        if (d.ht && acc > d.cap) iris_moe_record(d, IRIS_MOE_ERR_OVERFLOW, e, -1, -1, acc);
      }
    }
    __syncthreads();
    for (int i = tid; i < nk; i += nt) {
      const int pos = d.slot[i];
      if (pos < 0) continue;
      const long long row = (long long)base[idx[i]] + pos;
      if (row >= d.cap) { /* high throughput past max_recv_rows: dropped alike on both sides */
        d.slot[i] = -1;
        iris_moe_record(d, IRIS_MOE_ERR_OVERFLOW, e, i / K, i % K, row + 1);
      } else {
        d.slot[i] = (int)row;
      }
    }
  } else { /* a count vector never came (the context's fault is recorded): send nothing */
    for (int i = tid; i < nk; i += nt) d.slot[i] = -1;
    for (int l = tid; l <= L; l += nt) {
      d.offsets[l] = 0;
      if (l < L) d.count[l] = 0;
    }
  }
  if (tid == 0) d.st->n = n; /* what the combine after this dispatch sums */
  __syncthreads(); /* the block's slots, counts and offsets, then the release */
  if (tid == 0) iris_signal<IRIS_SCOPE_DEVICE>(d.ctx, &d.flags->route, e, me);
  return ok != 0;
}

/* Dispatch (one kernel of 512 or 1024 threads; dynamic shared memory 3 * E ints): CTA 0 routes, the others wait
 * for it (device scope); then a warp per (token, slice of IRIS_WARP_SIZE x V channels),
 * V = 16 (fp8: one 128-channel group per 8 lanes) or 8 (bf16), stores the slice into
 * every destination of the token. A plan that failed before (st->failed: a wait of it gave
 * up in an earlier call) takes part with no tokens (a count vector of zeros: the peers'
 * layouts stay consistent) and marks the peers; so does a call in which a wait gives up
 * before the rows went out (iris_moe_finish). */
template <bool FP8>
__global__ void __launch_bounds__(1024) iris_moe_dispatch_kernel(iris_moe_dev_t d, const iris_bf16_t *x, const int *idx, const float *wts, int n) {
  extern __shared__ int iris_moe_sh[];
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_MOE_DISP);
  const unsigned e = d.st->disp_epoch + 1;
  bool failed = d.st->failed != 0u;
  if (failed) n = 0;
  if (blockIdx.x == 0) {
    failed |= !iris_moe_route(d, idx, wts, n, e, iris_moe_sh);
  } else {
    int ok = 1;
    if (threadIdx.x == 0) ok = iris_wait_until<IRIS_SCOPE_DEVICE>(d.ctx, &d.flags->route, IRIS_CMP_EPOCH, e, "iris_moe_dispatch: routing");
    if (!__syncthreads_and(ok)) { /* the context has a fault: store nothing (the other CTAs may have) */
      n = 0;
      failed = true;
    }
  }
  IRIS_TRACE_MARK(1);
  const int V = FP8 ? 16 : 8, chunk = IRIS_WARP_SIZE * V, nch = (d.H + chunk - 1) / chunk, K = d.K;
  const int lane = (int)(threadIdx.x % IRIS_WARP_SIZE), wpb = (int)(blockDim.x / IRIS_WARP_SIZE);
  const long long items = (long long)n * nch, nwarps = (long long)gridDim.x * wpb;
  const size_t es = FP8 ? 1 : 2;
  for (long long it = (long long)blockIdx.x * wpb + threadIdx.x / IRIS_WARP_SIZE; it < items; it += nwarps) {
    const int t = (int)(it / nch), c = (int)(it - (long long)t * nch), col = c * chunk + lane * V;
    const iris_bf16_t *row = x + (size_t)t * d.H;
    uint4 v = make_uint4(0, 0, 0, 0);
    float sc = 1.0f;
    bool in;
    if (FP8) {
      in = iris_moe_detail_quant_fp8<false>(row, d.H, c * chunk, &v, &sc);
    } else {
      in = col < d.H;
      if (in) v = *(const uint4 *)(row + col);
    }
    for (int k = 0; k < K; ++k) {
      const int r = d.slot[t * K + k]; /* the same in every lane */
      if (r < 0) continue;
      const int dst = idx[t * K + k] / d.L;
      if (in) iris_store_v16(d.ctx, d.recv_x + ((size_t)r * d.H + col) * es, v, dst);
      if (FP8 && in && (lane & 7) == 0) iris_store(d.ctx, d.recv_scales + (size_t)r * (d.H / 128) + col / 128, sc, dst);
      if (c == 0 && lane == 0) iris_store(d.ctx, d.recv_src + r, IRIS_MOE_SRC(d.me, t * K + k), dst);
    }
  }
  IRIS_TRACE_MARK(2);
  iris_moe_finish(d, d.flags->data, e, &d.st->disp_epoch, true, "iris_moe_dispatch: rows", failed);
  IRIS_TRACE_END(e, d.me);
}

/* The combine's store phase: a warp per (received row, slice) stores y's slice into the
 * source's combine slot; Y = false: NaN rows instead (a combine refused on this rank).
 * Two instances, so the usual one carries no test of y per item. */
template <bool Y>
IRIS_DEVICE_INLINE void iris_moe_combine_rows(const iris_moe_dev_t &d, const iris_bf16_t *y, const int *off, unsigned e) {
  const int L = d.L, K = d.K, chunk = IRIS_WARP_SIZE * 8, nch = (d.H + chunk - 1) / chunk;
  const int lane = (int)(threadIdx.x % IRIS_WARP_SIZE), wpb = (int)(blockDim.x / IRIS_WARP_SIZE), slots = d.T * K;
  const long long first = (long long)blockIdx.x * wpb + threadIdx.x / IRIS_WARP_SIZE, nwarps = (long long)gridDim.x * wpb;
  const long long items = (long long)off[L] * nch;
  /* IRIS_MOE_UNROLL items per warp and pass: their loads are all in flight before the stores */
  for (long long it0 = first; it0 < items; it0 += IRIS_MOE_UNROLL * nwarps) {
    uint4 v[IRIS_MOE_UNROLL];
    iris_bf16_t *dst[IRIS_MOE_UNROLL];
    int to[IRIS_MOE_UNROLL];
#pragma unroll
    for (int u = 0; u < IRIS_MOE_UNROLL; ++u) {
      const long long it = it0 + u * nwarps;
      to[u] = -1;
      if (it >= items) continue;
      const int j = (int)(it / nch), c = (int)(it - (long long)j * nch), col = c * chunk + lane * 8;
      long long r = j;
      if (!d.ht) { /* low latency: the expert l with off[l] <= j < off[l+1], row j - off[l] of its slab */
        int lo = 0, hi = L - 1;
        while (lo < hi) {
          const int mid = (lo + hi + 1) >> 1;
          if (off[mid] <= j) lo = mid;
          else hi = mid - 1;
        }
        r = (long long)lo * d.W * d.T + (j - off[lo]);
      }
      const int src = d.recv_src[r], s = IRIS_MOE_SRC_RANK(src), slot = IRIS_MOE_SRC_SLOT(src);
      if (s >= d.W || slot >= slots) {
        if (lane == 0 && c == 0) iris_moe_record(d, IRIS_MOE_ERR_SOURCE, e, -1, -1, src);
        continue;
      }
      if (col < d.H) {
        v[u] = Y ? *(const uint4 *)(y + (size_t)r * d.H + col) : make_uint4(0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u); /* !Y: NaN */
        dst[u] = d.comb + (size_t)slot * d.H + col;
        to[u] = s;
      }
    }
#pragma unroll
    for (int u = 0; u < IRIS_MOE_UNROLL; ++u)
      if (to[u] >= 0) iris_store_v16(d.ctx, dst[u], v[u], to[u]);
  }
}

/* Combine (one kernel, grid resident at once): a warp per (received row, slice of
 * IRIS_WARP_SIZE x 8 channels) stores y's slice into the source's combine slot; the last
 * CTA releases flags.comb[me] on every rank; every CTA then waits for the W comb flags
 * and a warp per (token, slice) sums the token's valid slots with their weights in fp32,
 * rounds once. y NULL (a call refused on this rank): its rows go out as NaN (bf16 0x7fc0)
 * and the refusal is marked on every rank (marks.nocomb, read by iris_moe_check on the
 * host): the tokens it served come out NaN there, the others exact. A plan that failed
 * before (st->failed) sends NaN rows too (its y may come from rows that never arrived)
 * and marks the peers' gaveup word (iris_moe_finish). out NULL: nothing summed. n: the
 * tokens the host expects; the sum covers the fewer of n and the dispatch's own count,
 * and a difference is recorded, with or without an out (a plan that failed before
 * records none: its dispatch routed no tokens). */
__global__ void __launch_bounds__(1024) iris_moe_combine_kernel(iris_moe_dev_t d, const iris_bf16_t *y, iris_bf16_t *out, int n) {
  __shared__ int off[IRIS_MOE_MAX_EXPERTS + 1];
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_MOE_COMB);
  const unsigned e = d.st->comb_epoch + 1;
  const int routed = d.st->n; /* the dispatch before this kernel on the stream wrote it; compared at the end */
  const bool failed = d.st->failed != 0u;
  const int L = d.L, K = d.K, chunk = IRIS_WARP_SIZE * 8, nch = (d.H + chunk - 1) / chunk;
  for (int l = (int)threadIdx.x; l <= L; l += (int)blockDim.x) off[l] = d.offsets[l];
  __syncthreads();
  const int lane = (int)(threadIdx.x % IRIS_WARP_SIZE), wpb = (int)(blockDim.x / IRIS_WARP_SIZE);
  const long long first = (long long)blockIdx.x * wpb + threadIdx.x / IRIS_WARP_SIZE, nwarps = (long long)gridDim.x * wpb;
  if (y && !failed) iris_moe_combine_rows<true>(d, y, off, e);
  else iris_moe_combine_rows<false>(d, y, off, e);
  IRIS_TRACE_MARK(1);
  iris_moe_finish(d, d.flags->comb, e, &d.st->comb_epoch, false, "", failed, !y);
  int ok = 1;
  if ((int)threadIdx.x < d.W) ok = iris_wait_until(d.ctx, &d.flags->comb[threadIdx.x], IRIS_CMP_EPOCH, e, "iris_moe_combine: rows");
  if (!__syncthreads_and(ok)) { /* its rows went out whole; only its own out is undefined (the context's fault says so): nothing it sends later depends on the slots */
    IRIS_TRACE_END(e, d.me);
    return;
  }
  IRIS_TRACE_MARK(2);
  const int asked = n, rows = out ? (n < routed ? n : routed) : 0;
  const long long items = (long long)rows * nch;
  for (long long it = first; it < items; it += nwarps) {
    const int t = (int)(it / nch), c = (int)(it - (long long)t * nch), col = c * chunk + lane * 8;
    if (col >= d.H) continue;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k0 = 0; k0 < K; k0 += 8) { /* 8 slots' loads in flight, then the sums in k order */
      uint4 v[8];
      bool ok8[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int k = k0 + j;
        ok8[j] = k < K && d.slot[t * K + k] >= 0;
        if (ok8[j]) v[j] = *(const uint4 *)(d.comb + (size_t)(t * K + k) * d.H + col);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (ok8[j]) iris_moe_axpy8(acc, d.w[t * K + k0 + j], v[j]);
    }
    *(uint4 *)(out + (size_t)t * d.H + col) = iris_moe_round8(acc);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && routed != asked && !d.st->failed) iris_moe_record(d, IRIS_MOE_ERR_TOKENS, e, asked, rows, routed);
  IRIS_TRACE_END(e, d.me);
}

#endif /* IRIS_INTERNAL_MOE_KERNELS_H */
