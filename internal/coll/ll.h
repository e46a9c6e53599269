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

/* sizeof(V) bytes (V: uint2, uint4) of a T array at vector i: one access where the vector
 * is whole and aligned, else element by element (elements past n read as 0, none read or
 * written out of bounds). */
template <typename V, typename T>
IRIS_DEVICE_INLINE V iris_coll_read_vec(const T *base, size_t i, size_t n) {
  const size_t per = sizeof(V) / sizeof(T);
  union { V u; T e[sizeof(V) / sizeof(T)]; } v;
  if ((i + 1) * per <= n && (((uintptr_t)base) & (sizeof(V) - 1)) == 0) return *(const V *)(base + i * per);
  v.u = V();
  for (size_t k = 0; k < per && i * per + k < n; k++) v.e[k] = base[i * per + k];
  return v.u;
}
template <typename V, typename T>
IRIS_DEVICE_INLINE void iris_coll_write_vec(T *base, size_t i, size_t n, V data) {
  const size_t per = sizeof(V) / sizeof(T);
  union { V u; T e[sizeof(V) / sizeof(T)]; } v;
  v.u = data;
  if ((i + 1) * per <= n && (((uintptr_t)base) & (sizeof(V) - 1)) == 0) { *(V *)(base + i * per) = data; return; }
  for (size_t k = 0; k < per && i * per + k < n; k++) base[i * per + k] = v.e[k];
}
/* 8 bytes (an LL line's data) at line i; 16 bytes (an armed vector) at vector i. */
template <typename T> IRIS_DEVICE_INLINE uint2 iris_coll_read8(const T *base, size_t i, size_t n) { return iris_coll_read_vec<uint2>(base, i, n); }
template <typename T> IRIS_DEVICE_INLINE void iris_coll_write8(T *base, size_t i, size_t n, uint2 data) { iris_coll_write_vec<uint2>(base, i, n, data); }
template <typename T> IRIS_DEVICE_INLINE uint4 iris_coll_read16(const T *base, size_t i, size_t n) { return iris_coll_read_vec<uint4>(base, i, n); }
template <typename T> IRIS_DEVICE_INLINE void iris_coll_write16(T *base, size_t i, size_t n, uint4 data) { iris_coll_write_vec<uint4>(base, i, n, data); }
/* The collect step of iris_coll_ll_body (after its pushes): every line of this thread, from
 * every rank, in batches of NG peers (iris_coll_ll_batch). Returns what the waits did (1:
 * all in; 0: a wait ran out; -1: a mismatch). */
template <int NG, typename T, int KIND, int OP>
IRIS_DEVICE_INLINE int iris_coll_ll_collect(const iris_coll_dev_t &d, const T *send, T *recv, size_t count, int root, int op, unsigned c, unsigned epoch,
                                            unsigned tag, unsigned sig32, iris_coll_mask_t peers, iris_coll_mask_t all, iris_coll_mask_t &seen) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const size_t lines = (count * sizeof(T) + 7) / 8, stride = (size_t)gridDim.x * blockDim.x;
  uint4 *mine = IRIS_COLL_LL_ROWS(d, c, W);
  const bool chunked = KIND == IRIS_COLL_RS || KIND == IRIS_COLL_A2A;
  int ok = 1;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; ok > 0 && i < lines; i += stride) {
    if (KIND == IRIS_COLL_AR || KIND == IRIS_COLL_RS) {
      typedef typename iris_coll_acc<T>::type A;
      union { uint2 u; T e[8 / sizeof(T)]; } x;
      A acc[8 / sizeof(T)];
      uint2 in[NG];
      const uint2 own = iris_coll_read8(send + (chunked ? (size_t)me * count : 0), i, count);
      for (int r0 = 0; ok > 0 && r0 < W; r0 += NG) { /* rank order, accumulated wide: the same result on every rank */
        if ((ok = iris_coll_ll_wait_n<NG>(d, mine + i, d.ll_lines, peers, r0, epoch, tag, in, c, sig32, all, seen, KIND)) <= 0) break;
#pragma unroll
        for (int j = 0; j < NG; j++) {
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
        if ((ok = iris_coll_ll_wait(d, NULL, epoch, epoch, &v, root, c, sig32, all, seen, KIND)) <= 0) break;
        v = iris_coll_read8(send, i, count);
      } else if ((ok = iris_coll_ll_wait(d, IRIS_COLL_LL_SLOT(mine, d, root, i), epoch, tag, &v, root, c, sig32, all, seen, KIND)) <= 0) {
        break;
      }
      iris_coll_write8(recv, i, count, v);
    } else { /* AG, A2A */
      uint2 in[NG];
      const uint2 own = iris_coll_read8(send + (chunked ? (size_t)me * count : 0), i, count);
      for (int r0 = 0; ok > 0 && r0 < W; r0 += NG) {
        if ((ok = iris_coll_ll_wait_n<NG>(d, mine + i, d.ll_lines, peers, r0, epoch, tag, in, c, sig32, all, seen, KIND)) <= 0) break;
#pragma unroll
        for (int j = 0; j < NG; j++) {
          const int r = r0 + j;
          if (r >= W) break;
          iris_coll_write8(recv + (size_t)r * count, i, count, r == me ? own : in[j]);
        }
      }
    }
  }
  return ok;
}
/* The push step of iris_coll_ll_body: this thread's lines of send into every peer's LL
 * slots [me]; a reduce-scatter's or all-to-all's chunk per peer in batches of NG peers
 * (iris_coll_ll_batch), a batch's loads in flight together. */
template <int NG, typename T, int KIND>
IRIS_DEVICE_INLINE void iris_coll_ll_push(const iris_coll_dev_t &d, const T *send, size_t count, int root, unsigned c, unsigned epoch, unsigned tag) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const size_t lines = (count * sizeof(T) + 7) / 8, stride = (size_t)gridDim.x * blockDim.x;
  uint4 *mine = IRIS_COLL_LL_ROWS(d, c, W);
  const bool chunked = KIND == IRIS_COLL_RS || KIND == IRIS_COLL_A2A;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < lines; i += stride) {
    if (KIND == IRIS_COLL_BC && me != root) break;
    if (!chunked) {
      const uint2 v = iris_coll_read8(send, i, count);
      for (int k = 1; k < W; k++) iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL_SLOT(mine, d, me, i), (me + k) % W), v, epoch, tag);
    } else {
      for (int k0 = 1; k0 < W; k0 += NG) { /* a chunk per peer: a batch's loads in flight together, then its stores */
        uint2 v[NG];
#pragma unroll
        for (int j = 0; j < NG; j++)
          if (k0 + j < W) v[j] = iris_coll_read8(send + (size_t)((me + k0 + j) % W) * count, i, count);
#pragma unroll
        for (int j = 0; j < NG; j++)
          if (k0 + j < W) iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL_SLOT(mine, d, me, i), (me + k0 + j) % W), v[j], epoch, tag);
      }
    }
  }
}
/* ---- the latency kernel: every kind, one launch, no barrier.
 * Lines are spread over the grid the same way on every rank. CTA 0 announces the call;
 * each thread pushes its lines to every peer, then collects its lines from every peer in
 * rank order, writing recv only once every peer matched this call. The lines carry the
 * call number + 1 (iris_coll_ll_epoch) and, but for a broadcast's, the call's tag
 * (iris_coll_ll_tag): a thread that has a line of every peer has matched every peer's
 * signature, without reading a header. A broadcast's non-root waits for the root's
 * lines only, so there every thread matches every peer's header (iris_coll_ll_wait); so
 * does an all-gather or all-to-all of more than IRIS_COLL_LL_GROUP ranks, which writes
 * recv after each batch of peers.
 * The receive slots alternate by call parity. Two parities suffice: a rank's call c
 * pushes into slot parity c & 1 of a peer, which that peer last read in its call c - 2;
 * our call c - 1 saw that peer's header or lines of call c - 1, so its call c - 2 was
 * over. (A broadcast root waits for nobody's data, but it too waits for every header.) */
template <typename T, int KIND, int OP>
IRIS_DEVICE_INLINE int iris_coll_ll_body(const iris_coll_dev_t &d, const T *send, T *recv, size_t count, int root, unsigned long long sig, int op, unsigned c) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const unsigned epoch = iris_coll_ll_epoch(c), sig32 = iris_coll_sig32(sig);
  /* tagged lines (whatever IRIS_COLL_CHECK says: the tag costs nothing, and the setup makes
   * every rank's setting alike) but for a broadcast's, and for an all-gather's or
   * all-to-all's beyond one batch of peers (it writes recv batch by batch: the first
   * batch's tags alone would not have matched the peers of the later ones; the headers
   * do) */
  const bool tagged = KIND != IRIS_COLL_BC && (KIND == IRIS_COLL_AR || KIND == IRIS_COLL_RS || W <= IRIS_COLL_LL_GROUP);
  const unsigned tag = tagged ? iris_coll_ll_tag(epoch, sig32) : epoch;
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me);
  /* the headers to match: every peer's; with IRIS_COLL_CHECK=0 only a broadcast's, on
   * every rank: they are its flow control (a non-root waits for the root's lines alone,
   * so without them one non-root could end this call and the next while another still
   * reads the slots of this parity: it would find them overwritten). Other kinds wait
   * for every peer's lines of the call. The match takes no round trip of its own. */
  const iris_coll_mask_t all = d.check || KIND == IRIS_COLL_BC ? peers : 0ULL;
  const bool chunked = KIND == IRIS_COLL_RS || KIND == IRIS_COLL_A2A; /* send has one chunk per peer */
  iris_coll_mask_t seen = 0;
  int ok = 1;
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_LL);
  iris_coll_announce(d, c, sig32);
  const int nb = iris_coll_ll_batch(W);
  /* push (a chunk per peer: in batches of iris_coll_ll_batch(W) peers) */
  if (!chunked || nb > 4) iris_coll_ll_push<IRIS_COLL_LL_GROUP, T, KIND>(d, send, count, root, c, epoch, tag);
  else if (nb == 2) iris_coll_ll_push<2, T, KIND>(d, send, count, root, c, epoch, tag);
  else iris_coll_ll_push<4, T, KIND>(d, send, count, root, c, epoch, tag);
  IRIS_TRACE_MARK(1);
  /* collect, in batches of iris_coll_ll_batch(W) peers (a broadcast waits for one line) */
  if (KIND == IRIS_COLL_BC || nb > 4) ok = iris_coll_ll_collect<IRIS_COLL_LL_GROUP, T, KIND, OP>(d, send, recv, count, root, op, c, epoch, tag, sig32, peers, all, seen);
  else if (nb == 2) ok = iris_coll_ll_collect<2, T, KIND, OP>(d, send, recv, count, root, op, c, epoch, tag, sig32, peers, all, seen);
  else ok = iris_coll_ll_collect<4, T, KIND, OP>(d, send, recv, count, root, op, c, epoch, tag, sig32, peers, all, seen);
  IRIS_TRACE_END(c, me);
  return ok;
}
/* The kernel: the call number (its atomic overlaps the end of the kernel before it on
 * the stream: iris_coll_call_enter), then the wait for that kernel (PDL), then the next
 * kernel may start its launch (PDL) while this one moves the data. Its block size
 * is told to hipcc (which spilled VGPRs at its default cap of 128, make asm). (Loading the
 * first line of send before the call word's atomic measured no faster on the one-GPU
 * proxy, tools/proxy_fused.cu.) */
template <typename T, int KIND, int OP>
__global__ void IRIS_DEVICE_HIP_BOUNDS(IRIS_COLL_LL_THREADS) iris_coll_ll_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, int root, unsigned long long sig,
                                                                          int op) {
  const unsigned c = iris_coll_call_enter(d);
  iris_detail_pdl_wait();
  iris_detail_pdl_trigger();
  (void)iris_coll_ll_body<T, KIND, OP>(d, send, recv, count, root, sig, op, c);
}

/* ---- the armed one-shot: all-reduce and reduce-scatter of fp32, fp16 and bf16 sums and
 * averages, the data its own flag.
 * Every slot that a peer stores into holds all-ones bits until the peer's data arrive:
 * 0xff bytes are a NaN in every float type, and a sender replaces any element whose bits
 * are all ones by its type's canonical NaN (a NaN still, so every result is the same, and
 * the result's bits too: a sum with a NaN gives the canonical NaN). So a reader that finds
 * no all-ones element in a 16-byte vector has the sender's data: 16 data bytes a store,
 * twice the LL line's 8, and no epoch to compare (each element is single-copy atomic).
 * The reader re-arms each vector (all ones again) once it has used it.
 * Two parities suffice: a slot of parity c & 1 is next written in call c + 2, and a peer
 * starts call c + 2 only after it has this rank's data of call c + 1, which this rank
 * pushes after its call c ended (its re-arming included).
 * Mismatches: the headers are matched in the same polls as in the LL kernel, and nothing
 * reaches recv before they all matched. A mismatched call can leave stores in these slots
 * that no reader re-arms, so every rank of such a call marks both parities dirty
 * (iris_coll_arm_give_up). A call whose parity is dirty runs the LL algorithm
 * (iris_coll_ll_body) on the LL lines instead, on every rank alike (the marks change in
 * the same calls everywhere); once its data are in, every peer has started this call, so
 * no store of the mismatched call is still on its way, and no peer stores into this
 * parity before this rank's next call: CTA 0 re-arms the parity's slots and clears its
 * mark. So two such calls after a mismatch, one per parity, the slots serve again. */
template <typename T> struct iris_coll_arm_elem; /* the element's bits, its canonical NaN */
template <> struct iris_coll_arm_elem<float> { static const unsigned nan_bits = 0x7fc00000u; static const int bits = 32; };
template <> struct iris_coll_arm_elem<iris_f16_t> { static const unsigned nan_bits = 0x7e00u; static const int bits = 16; };
template <> struct iris_coll_arm_elem<iris_bf16_t> { static const unsigned nan_bits = 0x7fc0u; static const int bits = 16; };
/* A 32-bit word of data as sent: all-ones elements replaced by the canonical NaN. */
template <typename T>
IRIS_DEVICE_INLINE unsigned iris_coll_arm_clean(unsigned w) {
  if (iris_coll_arm_elem<T>::bits == 32) return w == 0xffffffffu ? iris_coll_arm_elem<T>::nan_bits : w;
  if ((w & 0xffffu) == 0xffffu) w = (w & 0xffff0000u) | iris_coll_arm_elem<T>::nan_bits;
  if ((w >> 16) == 0xffffu) w = (w & 0xffffu) | (iris_coll_arm_elem<T>::nan_bits << 16);
  return w;
}
template <typename T>
IRIS_DEVICE_INLINE uint4 iris_coll_arm_clean4(uint4 v) {
  return make_uint4(iris_coll_arm_clean<T>(v.x), iris_coll_arm_clean<T>(v.y), iris_coll_arm_clean<T>(v.z), iris_coll_arm_clean<T>(v.w));
}
/* Whether a 32-bit word still holds an unarrived (all-ones) element. */
template <typename T>
IRIS_DEVICE_INLINE bool iris_coll_arm_waiting(unsigned w) {
  if (iris_coll_arm_elem<T>::bits == 32) return w == 0xffffffffu;
  return (w & 0xffffu) == 0xffffu || (w >> 16) == 0xffffu;
}
template <typename T>
IRIS_DEVICE_INLINE bool iris_coll_arm_ready(uint4 v) {
  return !(iris_coll_arm_waiting<T>(v.x) || iris_coll_arm_waiting<T>(v.y) || iris_coll_arm_waiting<T>(v.z) || iris_coll_arm_waiting<T>(v.w));
}
/* One thread: as iris_coll_ll_wait_all, on armed slots: waits until the vector of every
 * peer of `want` among ranks r0 .. r0 + IRIS_COLL_LL_GROUP - 1 has arrived (the vector of
 * rank r at base + r * stride) and every peer of `all` announced (c, sig32); fills
 * in[r - r0] and re-arms each slot it read. 1, 0 (timeout) or -1 (mismatch). */
template <typename T>
IRIS_DEVICE_INLINE int iris_coll_arm_wait_all(const iris_coll_dev_t &d, uint4 *base, size_t stride, iris_coll_mask_t want, int r0, uint4 (&in)[IRIS_COLL_LL_GROUP],
                                              unsigned c, unsigned sig32, iris_coll_mask_t all, iris_coll_mask_t &seen, int kind) {
  iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
  unsigned pending = (unsigned)(want >> r0) & ((1u << IRIS_COLL_LL_GROUP) - 1u);
  const unsigned mine = pending;
  base += (size_t)r0 * stride;
  for (;;) {
    uint4 v[IRIS_COLL_LL_GROUP];
#pragma unroll
    for (int k = 0; k < IRIS_COLL_LL_GROUP; k++) v[k] = pending >> k & 1 ? iris_detail_ld16_volatile(base + (size_t)k * stride) : make_uint4(0, 0, 0, 0);
    int who = -1;
    if (seen != all && iris_coll_headers_poll(d, c, sig32, all, seen, who) < 0) return iris_coll_ll_mismatch(d, c, sig32, who, kind);
#pragma unroll
    for (int k = 0; k < IRIS_COLL_LL_GROUP; k++)
      if ((pending >> k & 1) && iris_coll_arm_ready<T>(v[k])) {
        in[k] = v[k];
        pending &= ~(1u << k);
      }
    if (!pending && seen == all) break;
    if (who < 0) who = pending ? r0 + __ffs(pending) - 1 : 0;
    if (iris_detail_wait_expired(d.ctx, spin, who, IRIS_COLL_SITE(kind, seen == all ? IRIS_SITE_LL : IRIS_SITE_HEADER), c)) {
#if defined(IRIS_DEBUG)
      printf("iris: armed one-shot wait timed out on rank %d (block %d, thread %d, call %u): %s of rank %d never came\n", d.ctx.rank, (int)blockIdx.x,
             (int)threadIdx.x, c, seen == all ? "a data vector" : "the call header", who);
      iris_detail_trap();
#endif
      return 0;
    }
  }
#pragma unroll
  for (int k = 0; k < IRIS_COLL_LL_GROUP; k++)
    if (mine >> k & 1) iris_detail_st16_volatile(base + (size_t)k * stride, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  return 1;
}
template <typename T, int KIND, int OP>
__global__ void __launch_bounds__(IRIS_COLL_ARM_THREADS) iris_coll_arm_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, unsigned long long sig) {
  typedef typename iris_coll_acc<T>::type A;
  enum { per = 16 / sizeof(T) };
  __shared__ unsigned long long s_dirty;
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const size_t vecs = (count + per - 1) / per, stride = (size_t)gridDim.x * blockDim.x;
  iris_detail_pdl_wait(); /* here before the call word's atomic, unlike the other latency kernels: the kernel before may set the dirty bits */
  /* the dirty bits, read before this CTA's call-word atomic (acquire: the atomic waits for
   * the load), so CTA 0, which clears a bit only once every CTA of the launch has done its
   * atomic, never clears it under a CTA that has yet to read it: every CTA of every rank
   * takes the same path */
  if (threadIdx.x == 0) s_dirty = iris_atomic_load<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_DEVICE>((const unsigned long long *)d.arm_dirty);
  const unsigned c = iris_coll_call_enter(d), sig32 = iris_coll_sig32(sig);
  iris_detail_pdl_trigger();
  if (s_dirty >> (c & 1) & 1) { /* after a mismatch: the LL lines, then re-arm this parity (every rank alike) */
    const int ok = iris_coll_ll_body<T, KIND, OP>(d, send, recv, count, 0, sig, OP, c);
    if (blockIdx.x == 0 && __syncthreads_and(ok > 0)) {
      uint4 *rows = IRIS_COLL_ARM_ROWS(d, c, W);
      for (size_t i = threadIdx.x; i < (size_t)W * d.arm_vecs; i += blockDim.x) iris_detail_st16_volatile(rows + i, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
      int entered = 1;
      if (threadIdx.x == 0) { /* every CTA of this launch has read the bits: the call word has moved on to c + 1 */
        iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
        while ((unsigned)(iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>((const unsigned long long *)IRIS_COLL_CALL_WORD(d)) >> 32) == c)
          if (iris_detail_wait_expired(d.ctx, spin, me, IRIS_COLL_SITE(KIND, IRIS_SITE_LL), c)) { entered = 0; break; }
      }
      if (__syncthreads_and(entered) && threadIdx.x == 0)
        *(volatile unsigned long long *)d.arm_dirty = s_dirty & ~(1ULL << (c & 1)); /* nothing else writes it in this call */
    }
    return;
  }
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me), all = d.check ? peers : 0ULL;
  uint4 *mine = IRIS_COLL_ARM_ROWS(d, c, W); /* [src][vector] for this parity */
  const bool chunked = KIND == IRIS_COLL_RS; /* send has one chunk per peer */
  iris_coll_mask_t seen = 0;
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_ARM);
  iris_coll_announce(d, c, sig32);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < vecs; i += stride) { /* push */
    uint4 v = iris_coll_arm_clean4<T>(iris_coll_read16(send, i, count));
    for (int k = 1; k < W; k++) {
      const int p = (me + k) % W;
      if (chunked) v = iris_coll_arm_clean4<T>(iris_coll_read16(send + (size_t)p * count, i, count));
      uint4 *slot = iris_translate(d.ctx, IRIS_COLL_ARM_SLOT(mine, d, me, i), p);
      iris_detail_st16_volatile(slot, v.x, v.y, v.z, v.w);
    }
  }
  IRIS_TRACE_MARK(1);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < vecs; i += stride) { /* collect, rank order: the same result on every rank */
    union { uint4 u; T e[per]; } x;
    A acc[per];
    uint4 in[IRIS_COLL_LL_GROUP];
    const uint4 own = iris_coll_arm_clean4<T>(iris_coll_read16(send + (chunked ? (size_t)me * count : 0), i, count));
    for (int r0 = 0; r0 < W; r0 += IRIS_COLL_LL_GROUP) {
      if (iris_coll_arm_wait_all<T>(d, mine + i, d.arm_vecs, peers, r0, in, c, sig32, all, seen, KIND) <= 0) return;
#pragma unroll
      for (int j = 0; j < IRIS_COLL_LL_GROUP; j++) {
        const int r = r0 + j;
        if (r >= W) break;
        x.u = r == me ? own : in[j];
#pragma unroll
        for (int k = 0; k < per; k++) acc[k] = r == 0 ? iris_coll_up(x.e[k]) : iris_coll_combine<OP>(acc[k], iris_coll_up(x.e[k]));
      }
    }
#pragma unroll
    for (int k = 0; k < per; k++) x.e[k] = iris_coll_result<T, OP>(acc[k], W);
    iris_coll_write16(recv, i, count, x.u);
  }
  IRIS_TRACE_END(c, me);
}

/* ---- the two-shot LL all-reduce: one kernel, no barrier, every flag in the data.
 * Chunk j (ce elements, whole LL lines) belongs to rank j. Each thread owns one line
 * index l of every chunk:
 *   1. push   its line l of chunk p into rank p's phase-0 slot [me], for every peer p;
 *   2. reduce line l of its own chunk: its own value and the W-1 lines that arrive in
 *             its phase-0 slots, in rank order (their tags match every peer's
 *             signature); write it to recv and push it into every peer's phase-1 slot [me];
 *   3. collect line l of every other chunk from its phase-1 slots into recv.
 * Line l of every slot is always handled by thread index l (one line per thread, the
 * grid covers the chunk), so the epochs a line carries only grow whatever the calls
 * before were. Two parities suffice: no rank finishes a call before every rank has
 * pushed its part of it. In place works: a thread reads line l of every chunk of send
 * (step 1) before it writes line l of any chunk of recv. */
#define IRIS_COLL_LL2_THREADS 256
static_assert(IRIS_COLL_LL2_BYTES % 8 == 0 && IRIS_COLL_LL2_BYTES / 8 <= (size_t)IRIS_COLL_MAX_CTAS * IRIS_COLL_LL2_THREADS, "a two-shot LL chunk must fit the grid");
/* Elements of chunk j of the two-shot LL all-reduce (chunks of ce elements over count). */
IRIS_DEVICE_INLINE size_t iris_coll_ll2_n(size_t ce, size_t count, int j) {
  return (size_t)j * ce >= count ? (size_t)0 : count - (size_t)j * ce < ce ? count - (size_t)j * ce : ce;
}
/* Steps 1 to 3 of iris_coll_ll2_kernel for line l, in batches of NG peers (iris_coll_ll_batch). */
template <int NG, typename T, int OP>
IRIS_DEVICE_INLINE void iris_coll_ll2_steps(const iris_coll_dev_t &d, const T *send, T *recv, size_t count, size_t ce, size_t l, uint4 *ph0, uint4 *ph1, unsigned c,
                                            unsigned epoch, unsigned tag, unsigned sig32, iris_coll_mask_t peers, iris_coll_mask_t all, int op) {
  typedef typename iris_coll_acc<T>::type A;
  enum { per = 8 / sizeof(T) };
  const int W = d.ctx.world_size, me = d.ctx.rank;
  union { uint2 u; T e[per]; } x;
  iris_coll_mask_t seen = 0;
  int k, r;
  for (int k0 = 1; k0 < W; k0 += NG) { /* 1. push: a batch's loads in flight together, then its stores */
    uint2 v[NG];
#pragma unroll
    for (int j = 0; j < NG; j++) {
      const int p = (me + k0 + j) % W;
      if (k0 + j < W) v[j] = iris_coll_read8(send + (size_t)p * ce, l, iris_coll_ll2_n(ce, count, p));
    }
#pragma unroll
    for (int j = 0; j < NG; j++)
      if (k0 + j < W) iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL2_SLOT(ph0, d, me, l), (me + k0 + j) % W), v[j], epoch, tag);
  }
  uint2 in[NG];
  const uint2 own = iris_coll_read8(send + (size_t)me * ce, l, iris_coll_ll2_n(ce, count, me));
  A acc[per];
  for (int r0 = 0; r0 < W; r0 += NG) { /* 2. reduce, rank order: the same result on every rank */
    if (iris_coll_ll_wait_n<NG>(d, ph0 + l, d.ll2_lines, peers, r0, epoch, tag, in, c, sig32, all, seen, IRIS_COLL_AR) <= 0) return;
#pragma unroll
    for (int j = 0; j < NG; j++) {
      r = r0 + j;
      if (r >= W) break;
      x.u = r == me ? own : in[j];
#pragma unroll
      for (k = 0; k < per; k++) acc[k] = r == 0 ? iris_coll_up(x.e[k]) : iris_coll_combine_op<OP>(acc[k], iris_coll_up(x.e[k]), op);
    }
  }
#pragma unroll
  for (k = 0; k < per; k++) x.e[k] = iris_coll_result_op<T, OP>(acc[k], W, op);
  iris_coll_write8(recv + (size_t)me * ce, l, iris_coll_ll2_n(ce, count, me), x.u);
  for (k = 1; k < W; k++) iris_coll_ll_store(iris_translate(d.ctx, IRIS_COLL_LL2_SLOT(ph1, d, me, l), (me + k) % W), x.u, epoch, tag);
  for (int r0 = 0; r0 < W; r0 += NG) { /* 3. collect */
    if (iris_coll_ll_wait_n<NG>(d, ph1 + l, d.ll2_lines, peers, r0, epoch, tag, in, c, sig32, all, seen, IRIS_COLL_AR) <= 0) return;
#pragma unroll
    for (int j = 0; j < NG; j++) {
      r = r0 + j;
      if (r >= W) break;
      if (r != me) iris_coll_write8(recv + (size_t)r * ce, l, iris_coll_ll2_n(ce, count, r), in[j]);
    }
  }
}
template <typename T, int OP>
__global__ void __launch_bounds__(IRIS_COLL_LL2_THREADS, 2) iris_coll_ll2_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, unsigned long long sig,
                                                                              int op) {
  enum { per = 8 / sizeof(T) };
  const int W = d.ctx.world_size, me = d.ctx.rank;
  const size_t ce = iris_coll_ar_chunk(count, W, per), lines = ce / per; /* the chunks of iris_coll_ar_range, in LL lines */
  const size_t l = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const unsigned c = iris_coll_call_enter(d), epoch = iris_coll_ll_epoch(c), sig32 = iris_coll_sig32(sig);
  iris_detail_pdl_wait();
  const unsigned tag = iris_coll_ll_tag(epoch, sig32); /* whatever IRIS_COLL_CHECK says (iris_coll_ll_body) */
  iris_detail_pdl_trigger();
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me), all = d.check ? peers : 0ULL;
  uint4 *const ph0 = IRIS_COLL_LL2_PHASE0(d, c, W), *const ph1 = IRIS_COLL_LL2_PHASE1(ph0, d, W);
  iris_coll_announce(d, c, sig32);
  if (l >= lines) return;
  /* in batches of iris_coll_ll_batch(W) peers */
  const int nb = iris_coll_ll_batch(W);
  if (nb == 2) iris_coll_ll2_steps<2, T, OP>(d, send, recv, count, ce, l, ph0, ph1, c, epoch, tag, sig32, peers, all, op);
  else if (nb == 4) iris_coll_ll2_steps<4, T, OP>(d, send, recv, count, ce, l, ph0, ph1, c, epoch, tag, sig32, peers, all, op);
  else iris_coll_ll2_steps<IRIS_COLL_LL_GROUP, T, OP>(d, send, recv, count, ce, l, ph0, ph1, c, epoch, tag, sig32, peers, all, op);
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
  const unsigned c = iris_coll_call_enter(d), epoch = iris_coll_ll_epoch(c), sig32 = iris_coll_sig32(sig);
  iris_detail_pdl_wait();
  iris_detail_pdl_trigger();
  const iris_coll_mask_t peers = iris_coll_peer_mask(W, me);
  const iris_coll_mask_t all = peers, others = peers & ~(1ULL << root); /* every header, whatever IRIS_COLL_CHECK says: the flow control (iris_coll_ll_body) */
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
    if (iris_coll_ll_wait(d, NULL, epoch, epoch, &v, root, c, sig32, all, seen, IRIS_COLL_BC) <= 0 || send == recv) return;
    for (int p = 0; p < W - 1; p++)
      if ((size_t)p * pl + l < lines) iris_coll_write8(recv, (size_t)p * pl + l, count, iris_coll_read8(send, (size_t)p * pl + l, count));
    return;
  }
  const int q = iris_coll_relay_part(me, root, W); /* my part */
  uint2 in[IRIS_COLL_LL_GROUP];
  if ((size_t)q * pl + l < lines) {
    if (iris_coll_ll_wait(d, IRIS_COLL_LL2_SLOT(ph0, d, root, l), epoch, epoch, &v, root, c, sig32, all, seen, IRIS_COLL_BC) <= 0) return;
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
