/* internal/coll/ll.h: the latency kernels: the one-shot LL kernel (every
 * kind), the two-shot LL all-reduce and the two-hop LL broadcast. Device code.
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_LL_H
#define IRIS_INTERNAL_COLL_LL_H
#include "../device/trace.h"
#include "plan.h"
#include "types.h"
#include "protocol.h"

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
__global__ void iris_coll_ll_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, int root, unsigned long long sig, int op) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const size_t lines = (count * sizeof(T) + 7) / 8, stride = (size_t)gridDim.x * blockDim.x;
  const unsigned c = iris_coll_call_enter(d), epoch = c + 1, sig32 = iris_coll_sig32(sig);
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me);
  /* the headers to match: every peer's; with IRIS_COLL_CHECK=0 only a broadcast root's
   * (its one flow control: no rank is two calls behind) */
  const iris_coll_mask_t all = d.check || (KIND == IRIS_COLL_BC && me == root) ? peers : 0ULL;
  uint4 *mine = IRIS_COLL_LL_ROWS(d, c, W); /* [src][line] for this parity */
  const bool chunked = KIND == IRIS_COLL_RS || KIND == IRIS_COLL_A2A; /* send has one chunk per peer */
  iris_coll_mask_t seen = 0;
  int ok = 1;
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_LL);
  iris_coll_announce(d, c, sig32);
  /* push */
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < lines; i += stride) {
    if (KIND == IRIS_COLL_BC && me != root) break;
    uint2 v = iris_coll_read8(send, i, count);
    for (int k = 1; k < W; k++) {
      const int p = (me + k) % W;
      if (chunked) v = iris_coll_read8(send + (size_t)p * count, i, count);
      iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL_SLOT(mine, d, me, i), p), v, epoch);
    }
  }
  IRIS_TRACE_MARK(1);
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
          for (int k = 0; k < (int)(8 / sizeof(T)); k++) acc[k] = r == 0 ? iris_coll_up(x.e[k]) : iris_coll_combine_op<OP>(acc[k], iris_coll_up(x.e[k]), op);
        }
      }
      if (ok <= 0) break;
#pragma unroll
      for (int k = 0; k < (int)(8 / sizeof(T)); k++) x.e[k] = iris_coll_result_op<T, OP>(acc[k], W, op);
      iris_coll_write8(recv, i, count, x.u);
    } else if (KIND == IRIS_COLL_BC) {
      uint2 v;
      if (me == root) { /* no data to wait for; the headers still */
        if ((ok = iris_coll_ll_wait(d, NULL, epoch, &v, root, c, sig32, all, seen, KIND)) <= 0) break;
        v = iris_coll_read8(send, i, count);
      } else if ((ok = iris_coll_ll_wait(d, IRIS_COLL_LL_SLOT(mine, d, root, i), epoch, &v, root, c, sig32, all, seen, KIND)) <= 0) {
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
  IRIS_TRACE_END(c, me);
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
__global__ void __launch_bounds__(IRIS_COLL_LL2_THREADS, 2) iris_coll_ll2_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, unsigned long long sig,
                                                                              int op) {
  typedef typename iris_coll_acc<T>::type A;
  enum { per = 8 / sizeof(T) };
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const size_t ce = iris_coll_ar_chunk(count, W, per), lines = ce / per; /* the chunks of iris_coll_ar_range, in LL lines */
  const size_t l = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const unsigned c = iris_coll_call_enter(d), epoch = c + 1, sig32 = iris_coll_sig32(sig);
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me), all = d.check ? peers : 0ULL;
  uint4 *const ph0 = IRIS_COLL_LL2_PHASE0(d, c, W), *const ph1 = IRIS_COLL_LL2_PHASE1(ph0, d, W);
#define IRIS_COLL_LL2_N(j) ((size_t)(j) * ce >= count ? (size_t)0 : count - (size_t)(j) * ce < ce ? count - (size_t)(j) * ce : ce) /* elements of chunk j */
  union { uint2 u; T e[per]; } x;
  iris_coll_mask_t seen = 0;
  int k, r;
  iris_coll_announce(d, c, sig32);
  if (l >= lines) return;
  for (k = 1; k < W; k++) { /* 1. push */
    const int p = (me + k) % W;
    x.u = iris_coll_read8(send + (size_t)p * ce, l, IRIS_COLL_LL2_N(p));
    iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL2_SLOT(ph0, d, me, l), p), x.u, epoch);
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
      for (k = 0; k < per; k++) acc[k] = r == 0 ? iris_coll_up(x.e[k]) : iris_coll_combine_op<OP>(acc[k], iris_coll_up(x.e[k]), op);
    }
  }
#pragma unroll
  for (k = 0; k < per; k++) x.e[k] = iris_coll_result_op<T, OP>(acc[k], W, op);
  iris_coll_write8(recv + (size_t)me * ce, l, IRIS_COLL_LL2_N(me), x.u);
  for (k = 1; k < W; k++) iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL2_SLOT(ph1, d, me, l), (me + k) % W), x.u, epoch);
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
  uint4 *const ph0 = IRIS_COLL_LL2_PHASE0(d, c, W), *const ph1 = IRIS_COLL_LL2_PHASE1(ph0, d, W);
  iris_coll_mask_t seen = 0;
  uint2 v;
  iris_coll_announce(d, c, sig32);
  if (l >= pl) return;
  if (me == root) {
    for (int p = 0; p < W - 1; p++)
      if ((size_t)p * pl + l < lines)
        iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL2_SLOT(ph0, d, root, l), iris_coll_relay_owner(p, root, W)), iris_coll_read8(send, (size_t)p * pl + l, count),
                           epoch);
    if (iris_coll_ll_wait(d, NULL, epoch, &v, root, c, sig32, all, seen, IRIS_COLL_BC) <= 0 || send == recv) return;
    for (int p = 0; p < W - 1; p++)
      if ((size_t)p * pl + l < lines) iris_coll_write8(recv, (size_t)p * pl + l, count, iris_coll_read8(send, (size_t)p * pl + l, count));
    return;
  }
  const int q = iris_coll_relay_part(me, root, W); /* my part */
  uint2 in[IRIS_COLL_LL_GROUP];
  if ((size_t)q * pl + l < lines) {
    if (iris_coll_ll_wait(d, IRIS_COLL_LL2_SLOT(ph0, d, root, l), epoch, &v, root, c, sig32, all, seen, IRIS_COLL_BC) <= 0) return;
    iris_coll_write8(recv, (size_t)q * pl + l, count, v);
    for (int k = 1; k < W; k++) {
      const int r = (me + k) % W;
      if (r != root) iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL2_SLOT(ph1, d, me, l), r), v, epoch);
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

#endif /* IRIS_INTERNAL_COLL_LL_H */
