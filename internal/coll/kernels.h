/* internal/coll/kernels.h: the bandwidth kernels: the two-shot all-reduce and
 * reduce-scatter (load/store and store), the copy kernel (all-gather, all-to-all, direct
 * broadcast), the relay and chain broadcasts, and the device barrier. Device code.
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_KERNELS_H
#define IRIS_INTERNAL_COLL_KERNELS_H
#include "../device/trace.h"
#include "plan.h"
#include "types.h"
#include "protocol.h"

/* ---- the bandwidth kernels: pull with 16-byte loads between per-CTA barriers. */
template <typename T, int OP, int W_STATIC>
IRIS_DEVICE_INLINE uint4 iris_coll_reduce16(const iris_device_ctx_t &ctx, const T *const *src, size_t v, int W, int op) {
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
      for (int k = 0; k < per; k++) acc[k] = iris_coll_combine_op<OP>(acc[k], iris_coll_up(in[r].e[k]), op);
  } else {
    U x;
    x.u = ((const uint4 *)src[0])[v];
    for (int k = 0; k < per; k++) acc[k] = iris_coll_up(x.e[k]);
    for (int r = 1; r < W; r++) {
      x.u = ((const uint4 *)src[r])[v];
      for (int k = 0; k < per; k++) acc[k] = iris_coll_combine_op<OP>(acc[k], iris_coll_up(x.e[k]), op);
    }
  }
  U out;
#pragma unroll
  for (int k = 0; k < per; k++) out.e[k] = iris_coll_result_op<T, OP>(acc[k], W_STATIC > 0 ? W_STATIC : W, op);
  return out.u;
}
template <typename T, int OP>
IRIS_DEVICE_INLINE T iris_coll_reduce1(const T *const *src, size_t i, int W, int op) {
  typename iris_coll_acc<T>::type acc = iris_coll_up(src[0][i]);
  for (int r = 1; r < W; r++) acc = iris_coll_combine_op<OP>(acc, iris_coll_up(src[r][i]), op);
  return iris_coll_result_op<T, OP>(acc, W, op);
}

/* Reduce elements [lo, hi) of the W sources into each of the nd destinations (the
 * first one local, the others may be peers' buffers), 16 bytes at a time where all
 * pointers are 16-byte aligned. Cooperative: thread tid of nt (the grid or a block). */
template <typename T, int OP, int W_STATIC>
IRIS_DEVICE_INLINE void iris_coll_reduce_range(const iris_device_ctx_t &ctx, const T *const *src, T *const *dst, int nd, size_t lo, size_t hi, int W, bool vec,
                                               size_t tid, size_t nt, int op) {
  const size_t per = 16 / sizeof(T);
  size_t done = lo;
  const size_t v0 = (lo + per - 1) / per, v1 = hi / per;
  int j;
  if (vec && v1 > v0) {
    for (size_t v = v0 + tid; v < v1; v += nt) {
      const uint4 x = iris_coll_reduce16<T, OP, W_STATIC>(ctx, src, v, W, op);
      for (j = 0; j < nd; j++) ((uint4 *)dst[j])[v] = x;
    }
    for (size_t i = lo + tid; i < v0 * per; i += nt) {
      const T x = iris_coll_reduce1<T, OP>(src, i, W, op);
      for (j = 0; j < nd; j++) dst[j][i] = x;
    }
    done = v1 * per;
  }
  for (size_t i = done + tid; i < hi; i += nt) {
    const T x = iris_coll_reduce1<T, OP>(src, i, W, op);
    for (j = 0; j < nd; j++) dst[j][i] = x;
  }
}

/* Copy elements [lo, hi) of src into dst with the thread of each element that
 * iris_coll_reduce_range gives it for the same lo, hi, vec, tid and nt: where a barrier
 * orders only CTA b of every rank, a CTA must read only what its namesakes wrote (a byte
 * or word split would hand an element to another CTA: on buffers off 16-byte alignment
 * at 3 and 4 ranks, the pull phase read chunks before their owners had reduced them). */
template <typename T>
IRIS_DEVICE_INLINE void iris_coll_copy_range(T *dst, const T *src, size_t lo, size_t hi, bool vec, size_t tid, size_t nt) {
  const size_t per = 16 / sizeof(T);
  size_t done = lo;
  const size_t v0 = (lo + per - 1) / per, v1 = hi / per;
  if (vec && v1 > v0) {
    iris_detail_copy_words((uint4 *)dst + v0, (const uint4 *)src + v0, v1 - v0, tid, nt); /* vector v0 + k: thread k mod nt, four loads in flight */
    for (size_t i = lo + tid; i < v0 * per; i += nt) dst[i] = src[i];
    done = v1 * per;
  }
  for (size_t i = done + tid; i < hi; i += nt) dst[i] = src[i];
}

/* Two-shot all-reduce and reduce-scatter (pull). AR: rank r reduces chunk r of every
 * rank's send into its recv, then (after a barrier) pulls every other reduced chunk
 * from its owner's recv. RS: rank r reduces block r of every send into recv. */
template <typename T, int KIND, int OP, int W_STATIC>
__global__ void iris_coll_reduce_kernel(iris_coll_dev_t d, const T *send, T *recv, size_t count, unsigned long long sig, int vec, int push, int op) {
  const int W = d.ctx.world_size, me = d.ctx.rank;
  unsigned c, epoch;
  const size_t per = 16 / sizeof(T);
  const T *src[IRIS_MAX_RANKS];
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_BW);
  /* every rank runs this call and its send is ready (the header is the start barrier);
   * on a mismatch or a failed wait nothing moves */
  if (!iris_coll_kernel_start(d, sig, KIND, c, epoch)) {
    IRIS_TRACE_END(c, me);
    return;
  }
  IRIS_TRACE_MARK(1);
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
                                            (size_t)gridDim.x * blockDim.x, op);
  }
  if (KIND == IRIS_COLL_AR && push) { /* every chunk is in every recv; no peer still reads our send */
    IRIS_TRACE_MARK(2);
    iris_coll_barrier(d, epoch, c, KIND);
    IRIS_TRACE_END(c, me);
    return;
  }
  IRIS_TRACE_MARK(2);
  if (KIND == IRIS_COLL_AR) {
    if (!iris_coll_barrier(d, epoch, c, KIND)) { /* every reduced chunk is in its owner's recv */
      IRIS_TRACE_END(c, me);
      return;
    }
    for (int k = 1; k < W; k++) { /* CTAs start at different peers: every link busy at once */
      const int p = iris_coll_ar_peer(me, k, (int)blockIdx.x, W);
      size_t lo, hi;
      iris_coll_ar_range(count, W, per, p, &lo, &hi);
      if (lo >= hi) continue;
      iris_coll_copy_range<T>(recv, iris_translate(d.ctx, (const T *)recv, p), lo, hi, vec != 0, blockIdx.x * (size_t)blockDim.x + threadIdx.x,
                              (size_t)gridDim.x * blockDim.x);
    }
    iris_coll_barrier(d, epoch, c, KIND); /* no peer still reads our recv: the caller may write it */
  } else {
    iris_coll_barrier(d, epoch, c, KIND); /* no peer still reads our send */
  }
  IRIS_TRACE_END(c, me);
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
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_BW);
  if (!iris_coll_kernel_start(d, sig, KIND, c, epoch)) { /* mismatch or timeout: move nothing */
    IRIS_TRACE_END(c, me);
    return;
  }
  IRIS_TRACE_MARK(1);
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
  IRIS_TRACE_MARK(2);
  iris_coll_barrier(d, epoch, c, KIND);
  IRIS_TRACE_END(c, me);
}

/* ---- the staged copy: all-gather, all-to-all and the direct broadcast with recv off
 * the heap (IRIS_COLL_PATH_STAGED).
 *
 * What it does. Peers cannot store into a recv that is not on the heap, so they store
 * into this rank's staging area (stage: the heap, the same offset on every rank; block r
 * at r * bytes, the broadcast's one block at 0), and the rank copies what arrived into
 * recv inside the kernel, a chunk behind the stores, so the local copy overlaps the
 * transfers instead of being a pass of its own after them. Every block is cut into
 * chunks of `chunk` bytes; chunk j belongs to CTA j % G of every rank as its step j / G.
 * At step s CTA b of each sender stores chunk s of its block(s) into every peer's
 * staging area (its own block straight into its recv) and publishes step s + 1 to every
 * peer; then it waits for every sender's step s (s >= 1) and copies chunk s - 1 of every
 * peer's block from its staging area into recv. Senders: every rank (all-gather,
 * all-to-all), the root (broadcast). The send and recv blocks of rank r lie at
 * r * sstride and r * rstride (the user's layout, so a launch that is one slice of a
 * larger call reads and writes in place).
 *
 * Who waits for whom, and why it is safe.
 *   - Start barrier (the call headers, with the signature): every peer has started this
 *     call, so its previous kernel has ended: it has copied out everything that arrived
 *     in its staging area in the previous call, which may now be overwritten.
 *   - A chunk is read from the staging area only after the acquire of its sender's
 *     progress flag (the sender's block met at __syncthreads after its stores, then one
 *     thread released the flag at system scope), then a block barrier.
 *   - In place (all-to-all send == recv; all-gather send = this rank's recv block): CTA b
 *     stores chunk s of block r to peer r at step s and overwrites the same bytes with
 *     peer r's chunk s only at step s + 1, after a block barrier (the publish).
 *   - No end barrier: every CTA has copied out all it waited for; recv is this rank's.
 *   A rank that stops early publishes IRIS_COLL_RELAY_ABANDON, so no peer waits in vain. */
template <int KIND>
__global__ void IRIS_DEVICE_HIP_BOUNDS(IRIS_COLL_BW_THREADS) iris_coll_staged_kernel(iris_coll_dev_t d, const char *send, size_t sstride, char *recv, size_t rstride, char *stage,
                                                                    size_t bytes, size_t chunk, int root, unsigned long long sig) {
  const int W = d.ctx.world_size, me = d.ctx.rank, b = (int)blockIdx.x, G = (int)gridDim.x;
  const size_t chunks = (bytes + chunk - 1) / chunk, steps = (size_t)b < chunks ? (chunks - 1 - (size_t)b) / (size_t)G + 1 : 0;
  const bool sends = KIND != IRIS_COLL_BC || me == root, receives = KIND != IRIS_COLL_BC || me != root;
  unsigned call, epoch;
  bool ok = true;
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_BW);
  if (!iris_coll_kernel_start(d, sig, KIND, call, epoch)) { /* on a mismatch or timeout: move nothing */
    IRIS_TRACE_END(call, me);
    return;
  }
  (void)epoch;
  IRIS_TRACE_MARK(1);
  for (size_t s = 0; ok && s <= steps; s++) {
    if (sends && s < steps) {
      const size_t lo = (s * (size_t)G + (size_t)b) * chunk, n = bytes - lo < chunk ? bytes - lo : chunk;
      for (int k = 0; k < W; k++) {
        const int r = (me + k + b) % W; /* CTAs start at different peers: every link busy */
        const char *src = send + (KIND == IRIS_COLL_A2A ? (size_t)r * sstride : 0) + lo;
        if (r == me) {
          char *own = recv + (KIND == IRIS_COLL_BC ? 0 : (size_t)me * rstride) + lo;
          if (own != src) iris_copy_bytes(own, src, n, threadIdx.x, blockDim.x);
        } else {
          iris_put_bulk(d.ctx, stage + (KIND == IRIS_COLL_BC ? 0 : (size_t)me * bytes) + lo, src, n, r, threadIdx.x, blockDim.x);
        }
      }
      iris_coll_progress_publish(d, -1, iris_coll_progress_value(call, (unsigned)(s + 1)));
    }
    if (receives && s > 0) { /* chunk s - 1 of every sender: staging area -> recv */
      const size_t lo = ((s - 1) * (size_t)G + (size_t)b) * chunk, n = bytes - lo < chunk ? bytes - lo : chunk;
      if (!(ok = iris_coll_progress_wait(d, KIND == IRIS_COLL_BC ? root : -1, call, (unsigned)s, KIND))) break;
      for (int r = 0; r < W; r++) {
        if (r == me || (KIND == IRIS_COLL_BC && r != root)) continue;
        iris_copy_bytes(recv + (KIND == IRIS_COLL_BC ? 0 : (size_t)r * rstride) + lo, stage + (KIND == IRIS_COLL_BC ? 0 : (size_t)r * bytes) + lo, n, threadIdx.x,
                        blockDim.x);
      }
    }
  }
  if (!ok) iris_coll_progress_publish(d, -1, iris_coll_progress_value(call, IRIS_COLL_RELAY_ABANDON)); /* nobody waits on us in vain */
  IRIS_TRACE_END(call, me);
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
 *   - Owner CTA b waits, in its own heap, on progress[b][root] (the progress flags,
 *     internal/coll/protocol.h): the root's CTA b has stored chunk s of its part. Only CTA b produces and
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

/* Tuning: IRIS_COLL_RELAY_STEPS, _MIN_CHUNK, _MAX_CHUNK; the plan (parts, chunks,
 * owners): iris_coll_relay_plan and its neighbours (all in internal/coll/plan.h). */
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
 *      flags, internal/coll/protocol.h);
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
/* Piece (rd, CTA b) of every peer's chunk, from this rank's staging area (where the
 * peers' B(rd) stored it) into recv: the copy-out of the staged store two-shot. */
template <typename T>
IRIS_DEVICE_INLINE void iris_coll_ar_staged_out(const T *stage, T *recv, size_t count, size_t slice, size_t rd, int W, int me, size_t per) {
  const size_t off = (rd * (size_t)gridDim.x + blockIdx.x) * slice;
  size_t lo, hi;
  for (int j = 0; j < W; j++) {
    if (j == me) continue;
    iris_coll_ar_range(count, W, per, j, &lo, &hi);
    lo += off;
    if (lo < hi) iris_copy_bytes(recv + lo, stage + lo, ((hi - lo < slice ? hi - lo : slice)) * sizeof(T), threadIdx.x, blockDim.x);
  }
}

/* Chunk j of the store two-shot: the all-reduce's chunk j (iris_coll_ar_range) or, for a
 * reduce-scatter (rs), block j of the send ([j * count, (j + 1) * count)). */
IRIS_DEVICE_INLINE void iris_coll_store_range(size_t count, int W, size_t per, int j, int rs, size_t *lo, size_t *hi) {
  if (rs) *lo = (size_t)j * count, *hi = *lo + count;
  else iris_coll_ar_range(count, W, per, j, lo, hi);
}

/* rs (run-time, as stage): the reduce-scatter on the same rounds: A as above (block j
 * into rank j's slot), B reduces this rank's block into its own recv only. No peer loads
 * or stores a user buffer, so send and recv may lie anywhere: the reduce-scatter for
 * buffers off the heap (IRIS_COLL_PATH_STAGED), without a copy in.
 * stage != NULL (recv off the heap; a run-time choice, which keeps the kernel count):
 * B stores the reduced piece into this rank's recv and into the peers' staging areas
 * (stage: the same offsets as recv); each CTA copies piece
 * (rd - 1, b) of every peer's chunk from its staging area into recv after its wait for
 * round rd (a peer publishes rd only after its B(rd - 1): the acquire covers it), and
 * the last round's after one more publish (rounds + 1) and wait. */
template <typename T, int OP, int W_STATIC>
__global__ void IRIS_DEVICE_HIP_BOUNDS(IRIS_COLL_BW_THREADS) iris_coll_ar_store_kernel(iris_coll_dev_t d, const T *send, T *recv, T *stage, size_t count, size_t slice,
                                                                      unsigned long long sig, int vec, int op, int rs) {
  const int W = d.ctx.world_size, me = d.ctx.rank, b = (int)blockIdx.x, G = (int)gridDim.x;
  const size_t per = 16 / sizeof(T), rounds = iris_coll_ar_rounds(rs ? count * (size_t)W : count, W, per, G, slice);
  const int kind = rs ? IRIS_COLL_RS : IRIS_COLL_AR; /* what a fault record names */
  unsigned call, epoch;
  bool ok = true;
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_BW);
  if (!iris_coll_kernel_start(d, sig, kind, call, epoch)) { /* on a mismatch or timeout: move nothing */
    IRIS_TRACE_END(call, me);
    return;
  }
  IRIS_TRACE_MARK(1);
  size_t lo, hi, mlo, mhi;
  const T *src[W_STATIC > 0 ? W_STATIC : IRIS_MAX_RANKS];
  T *dst[W_STATIC > 0 ? W_STATIC : IRIS_MAX_RANKS];
  iris_coll_store_range(count, W, per, me, rs, &mlo, &mhi);
  for (size_t rd = 0; ok && rd < rounds; rd++) {
    const size_t off = (rd * (size_t)G + (size_t)b) * slice;
    T *half = IRIS_COLL_SCRATCH_SLOTS(d, T, rd, G, b, W, slice); /* this CTA's W slots */
    for (int k = 1; k < W; k++) { /* A: our piece of chunk j into rank j's slot `me` */
      const int j = iris_coll_ar_peer(me, k, b, W);
      iris_coll_store_range(count, W, per, j, rs, &lo, &hi);
      lo += off;
      if (lo < hi) iris_put_bulk(d.ctx, half + (size_t)me * slice, send + lo, ((hi - lo < slice ? hi - lo : slice)) * sizeof(T), j, threadIdx.x, blockDim.x);
    }
    iris_coll_progress_publish(d, -1, iris_coll_progress_value(call, (unsigned)(rd + 1)));
    if (!(ok = iris_coll_progress_wait(d, -1, call, (unsigned)(rd + 1), kind))) break;
    if (stage && rd > 0) iris_coll_ar_staged_out(stage, recv, count, slice, rd - 1, W, me, per);
    lo = mlo + off; /* B: reduce our chunk's piece, store it into every recv */
    if (lo >= mhi) continue;
    const size_t n = mhi - lo < slice ? mhi - lo : slice;
    for (int r = 0; r < W; r++) src[r] = r == me ? send + lo : half + (size_t)r * slice;
    dst[0] = recv + (rs ? lo - mlo : lo);
    if (!rs)
      for (int k = 1; k < W; k++) dst[k] = iris_translate(d.ctx, stage ? stage : recv, iris_coll_ar_peer(me, k, b, W)) + lo;
    iris_coll_reduce_range<T, OP, W_STATIC>(d.ctx, src, dst, rs ? 1 : W, 0, n, W, vec != 0, threadIdx.x, blockDim.x, op);
  }
  if (stage && ok && rounds > 0) { /* the last round: every peer's B is done */
    iris_coll_progress_publish(d, -1, iris_coll_progress_value(call, (unsigned)(rounds + 1)));
    if ((ok = iris_coll_progress_wait(d, -1, call, (unsigned)(rounds + 1), kind))) iris_coll_ar_staged_out(stage, recv, count, slice, rounds - 1, W, me, per);
  }
  if (!ok) iris_coll_progress_publish(d, -1, iris_coll_progress_value(call, IRIS_COLL_RELAY_ABANDON)); /* nobody waits on us in vain */
  IRIS_TRACE_MARK(2);
  iris_coll_barrier(d, epoch, call, kind); /* every recv is complete */
  IRIS_TRACE_END(call, me);
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
 * every store has landed. A rank that stops early abandons (progress flags,
 * internal/coll/protocol.h). */

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
  IRIS_TRACE_BEGIN(IRIS_TRACE_K_BARRIER);
  const unsigned c = iris_coll_call_enter(d);
  iris_coll_call_begin(d, c, iris_coll_sig32(sig), IRIS_COLL_KIND_DEVICE_BARRIER);
  IRIS_TRACE_END(c, d.ctx.rank);
}

/* The staging area's copy out (internal/coll/host.h): after a bandwidth launch whose recv
 * lies off the heap, `rows` rows of `width` bytes from the staging area into recv (pitches
 * in bytes), but only if every peer announced that launch's call with its signature `sig`:
 * a mismatched launch, or one a peer never reached, moves nothing, so this copy leaves
 * recv as it was too. That launch is the context's latest (this kernel follows it on the
 * stream, and the host orders the context's launches), so the call word names call c + 1;
 * call c's header row still holds every peer's word for c: a peer cannot announce c + 2
 * before this rank announces c + 1. Both were written before that launch ended, so plain
 * device-scope loads see them. No PDL: a launch after this one starts only once every CTA
 * of this one has read the call word. It takes the call word and the header rows
 * (d.calls, d.hdr), not the whole device view. VEC (the host's choice: every address,
 * pitch and the width 16-byte aligned): a 16-byte vector per thread and step over the
 * rows as one index space; else iris_copy_bytes row by row. On one H200, against the
 * memcpy it replaces: 0.5-0.9 us slower per copy in graphs, about as fast eagerly up to
 * 2 MB, faster for rows from 1 MB (docs/tuning.md, "The staging area's copy out"). */
static_assert(IRIS_COLL_BW_THREADS >= IRIS_MAX_RANKS, "the copy out reads a peer's header per thread");
template <bool VEC>
__global__ void iris_coll_copy_out_kernel(const unsigned long long *calls, const iris_coll_hdr_row_t *hdr, int W, int me, char *dst, size_t dpitch, const char *src,
                                          size_t spitch, size_t width, int rows, unsigned long long sig) {
  const int t = threadIdx.x, tid = blockIdx.x * blockDim.x + t, nt = gridDim.x * blockDim.x;
  const unsigned long long w = iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(calls);
  const unsigned c = (unsigned)(w >> 32) - 1u;
  int ok = 1;
  if (t < W && t != me) { /* both parities at once, with the call word: one load latency (blockDim.x >= W: IRIS_COLL_BW_THREADS) */
    const unsigned long long h0 = iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(hdr[0].from + t);
    const unsigned long long h1 = iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(hdr[1].from + t);
    ok = ((c & 1) ? h1 : h0) == IRIS_COLL_HDR_WORD(iris_coll_sig32(sig), c);
  }
  if (!__syncthreads_and(ok)) return;
  if (VEC) {
    const unsigned per = (unsigned)(width / 16), total = per * (unsigned)rows;
    for (unsigned v = (unsigned)tid; v < total; v += (unsigned)nt)
      *(uint4 *)(dst + (size_t)(v / per) * dpitch + (size_t)(v % per) * 16) = *(const uint4 *)(src + (size_t)(v / per) * spitch + (size_t)(v % per) * 16);
  } else {
    for (int r = 0; r < rows; r++) iris_copy_bytes(dst + (size_t)r * dpitch, src + (size_t)r * spitch, width, tid, nt);
  }
}

#endif /* IRIS_INTERNAL_COLL_KERNELS_H */
