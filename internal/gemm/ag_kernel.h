/* internal/gemm/ag_kernel.h: the all-gather + GEMM's fused kernel (iris_gemm.h). Part of
 * its implementation; not a public header. Device code only.
 *   The kernel's view of a plan (iris_ag_gemm_dev_t) and its flag block; the trace
 *   recorder (IRIS_GEMM_TRACE); the fetcher role (copies (m-tile, k-group) blocks of the
 *   gathered A into the staging buffer and publishes a ready flag per block); the GEMM
 *   role's waits on those flags; iris_ag_gemm_kernel (per-tile cores: cp.async/wgmma,
 *   mma.sync, MFMA) and iris_ag_gemm_tma_kernel (the persistent TMA core, with side fetch
 *   and help). The cross-rank protocol is described at iris_ag_gemm_kernel; every wait in
 *   docs/gemm_waits.md. */
#ifndef IRIS_GEMM_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_gemm.h"
#endif
#ifndef IRIS_INTERNAL_GEMM_AG_KERNEL_H
#define IRIS_INTERNAL_GEMM_AG_KERNEL_H
#include "../device/platform.h"
#include "common.h"

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
  unsigned *arrive;        /* heap, iris_ag_gemm_sync_t::arrive */
  unsigned *done;          /* heap, iris_ag_gemm_sync_t::done */
  iris_gemm_err_t *err;    /* heap, in the sync block: the plan's error record (the first failed
                            * wait, see iris_gemm_err_fail, and the abort words) */
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

/* The fixed part of a plan's flag block on the heap (after the ready flags and as many
 * claim words; the CTA slots' epoch counters follow it). Zeroed at create, never reset. */
typedef struct iris_ag_gemm_sync {
  unsigned arrive[IRIS_MAX_RANKS]; /* [q]: the epoch rank q's A is ready at (release-stored by q) */
  unsigned done[IRIS_MAX_RANKS];   /* [q]: rank q's fetcher CTAs done reading this rank's A (one add each per call, by q) */
  iris_gemm_err_t err;             /* the plan's error record (internal/gemm/common.h) */
} iris_ag_gemm_sync_t;
static_assert(offsetof(iris_ag_gemm_sync_t, arrive) == 0 && offsetof(iris_ag_gemm_sync_t, done) == IRIS_MAX_RANKS * sizeof(unsigned) &&
                  offsetof(iris_ag_gemm_sync_t, err) == 2 * IRIS_MAX_RANKS * sizeof(unsigned) &&
                  sizeof(iris_ag_gemm_sync_t) == (2 * IRIS_MAX_RANKS + IRIS_GEMM_ERR_WORDS) * sizeof(unsigned),
              "iris_ag_gemm_sync_t: arrive, done, the error record, no padding");

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

/* Waits whose signaller itself waits on peers are a quarter bound longer than the waits on
 * a peer's "A is ready": this rank's ready flags (its fetchers wait on peers) and the peers'
 * "done reading" (a peer's CTA is done only after its own waits on third ranks). When one
 * rank is stuck, the waits on it expire first, and the record names it, not a healthy peer
 * held up by it (measured: with the GEMM CTAs fetching, 4 ranks, one stuck, an equal bound
 * let "rank q did not finish reading" win the record in 5 of 6 runs). */
#define IRIS_GEMM_READY_TIMEOUT_NS ((unsigned long long)IRIS_WAIT_TIMEOUT_NS + (unsigned long long)IRIS_WAIT_TIMEOUT_NS / 4)
#define IRIS_GEMM_DONE_TIMEOUT_NS IRIS_GEMM_READY_TIMEOUT_NS

/* One thread: wait until local ready flag `item` (of d.ready) reaches epoch (acquire, device
 * scope: the fetchers are on this GPU). False if the call failed (recorded). */
IRIS_DEVICE_INLINE bool iris_ag_gemm_wait_ready(iris_gemm_err_t *err, const unsigned *flags, int item, unsigned epoch) {
  return iris_gemm_wait_flag<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_DEVICE>(err, flags + item, epoch, epoch, IRIS_GEMM_WAIT_READY, -1, item, IRIS_GEMM_READY_TIMEOUT_NS);
}
/* Whole block: the same by thread 0, then the block meets. */
IRIS_DEVICE_INLINE void iris_ag_gemm_wait_local(iris_gemm_err_t *err, const unsigned *flags, int item, unsigned epoch) {
  if (threadIdx.x == 0) iris_ag_gemm_wait_ready(err, flags, item, epoch);
  __syncthreads();
}
/* One thread per CTA, at its end: iris_gemm_err_tell_peers with the plan's record. */
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

/* The peers a fetcher has waited for, a bit each: 32 bits unless IRIS_MAX_RANKS asks for
 * more (1u << q past 31 is undefined). */
#if IRIS_MAX_RANKS > 32
typedef unsigned long long iris_ag_seen_t;
#else
typedef unsigned iris_ag_seen_t;
#endif

/* Whole group (fetcher): copy block (mt, kg) of the gathered A into the staging buffer,
 * then publish it (every thread's stores, a group barrier, one release at device
 * scope). Before the first read from a peer it waits for that peer's "A is ready" epoch
 * (seen: bitmask of peers already waited for, the same in every thread). UNROLL 16-byte
 * loads in flight per thread. */
template <typename T, int UNROLL, class G>
IRIS_DEVICE_INLINE void iris_ag_gemm_fetch_by(const G &grp, const iris_ag_gemm_dev_t &d, int mt, int kg, unsigned epoch, iris_ag_seen_t &seen) {
  const int r0 = mt * d.bm, r1 = min(d.M, r0 + d.bm), c0 = kg * d.kg, c1 = min(d.K, c0 + d.kg);
  const int q0 = iris_ag_gemm_owner(d, r0, c0), q1 = iris_ag_gemm_owner(d, r1 - 1, c1 - 1);
  const int tid = grp.tid(), nt = grp.size();
  for (int q = q0; q <= q1; ++q) {
    if (q == d.ctx.rank || (seen >> q & 1u)) continue;
    /* a peer whose run of this call was refused and that has moved on to its next call
     * has signalled past this epoch already, so the wait passes at its first poll: the
     * refusal it wrote before that signal is looked for once here (one local load per
     * peer and fetch group per call) */
    if (tid == 0 && iris_gemm_wait_flag<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(d.err, d.arrive + q, epoch, epoch, IRIS_GEMM_WAIT_ARRIVE, q, -1) &&
        iris_gemm_err_aborted(d.err, epoch))
      iris_gemm_err_note_refused(d.err, epoch);
    seen |= (iris_ag_seen_t)1 << q;
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
IRIS_DEVICE_INLINE void iris_ag_gemm_fetch(const iris_ag_gemm_dev_t &d, int mt, int kg, unsigned epoch, iris_ag_seen_t &seen) {
  iris_ag_gemm_fetch_by<T, IRIS_GEMM_FETCH_UNROLL>(iris_ag_gemm_block_group(), d, mt, kg, epoch, seen);
}

/* The GEMM core's hook, called by the whole block before it loads A columns
 * [k0, k0 + BK) of m-tile mt: wait for every k-group that starts in that slab (a group
 * starting earlier was waited for at the slab holding its start). */
template <int BK>
struct iris_ag_gemm_waiter {
  iris_gemm_err_t *err;
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
 * rank's A (relaxed: execution only, no data is handed over). abortable: as
 * iris_gemm_wait_flag's (false in a refused run's kernel). */
IRIS_DEVICE_INLINE void iris_ag_gemm_wait_done(const iris_ag_gemm_dev_t &d, unsigned epoch, unsigned per_call, bool abortable = true) {
  const int q = (int)threadIdx.x;
  if (q < d.ctx.world_size && q != d.ctx.rank)
    iris_gemm_wait_flag<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(d.err, d.done + q, epoch * per_call, epoch, IRIS_GEMM_WAIT_DONE, q, -1, IRIS_GEMM_DONE_TIMEOUT_NS,
                                                               abortable);
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
    for (const unsigned long long t0 = iris_detail_time_ns(); iris_detail_time_ns() - t0 < (unsigned long long)(IRIS_GEMM_FETCHER_DELAY_NS);) iris_detail_pause();
  __syncthreads();
#endif
  if (slot == 0 && threadIdx.x < (unsigned)W && (int)threadIdx.x != me) iris_signal(d.ctx, d.arrive + me, epoch, (int)threadIdx.x);
  iris_ag_seen_t seen = 0;
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
 * Every wait is bounded and the first expiry aborts the whole call (iris_gemm_wait_flag);
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
#if defined(IRIS_GEMM_HAVE_TMA)
/* The TMA core's tile sequence (iris_gemm_sched) of a GEMM slot; with IRIS_GEMM_TRACE the
 * first consumer thread also records each tile as the span between its two calls (from the
 * tile's first wait on a stage to its stores). */
#if defined(IRIS_GEMM_TRACE)
struct iris_ag_gemm_sched : iris_gemm_sched {
  const iris_ag_gemm_dev_t *d;
  int slot;
  unsigned long long t0;
  __device__ bool operator()(int i, int &m0, int &n0) {
    if (threadIdx.x == 128 && d && d->trace) {
      const int t = first + i * stride;
      const unsigned long long now = iris_detail_time_ns();
      if (i > 0) iris_gemm_trace_at(*d, slot, t0, now, IRIS_GEMM_EV_TILE, t - stride);
      t0 = now;
    }
    return iris_gemm_sched::operator()(i, m0, n0);
  }
};
#else
typedef iris_gemm_sched iris_ag_gemm_sched;
#endif
/* GEMM slot `slot`'s tiles: slot - fetchers, then every gemm_ctas-th, over m-tiles rotated
 * so each rank starts with its own shard's rows (the order the fetchers fill them in). */
template <class Cfg>
IRIS_DEVICE_INLINE iris_ag_gemm_sched iris_ag_gemm_make_sched(const iris_ag_gemm_dev_t &d, int slot) {
  iris_ag_gemm_sched sc;
  static_cast<iris_gemm_sched &>(sc) = iris_gemm_make_sched<Cfg>(slot - d.fetchers, d.gemm_ctas, d.tiles_m, d.tiles_n, d.rot, d.raster);
#if defined(IRIS_GEMM_TRACE)
  sc.d = &d;
  sc.slot = slot;
  sc.t0 = 0;
#endif
  return sc;
}
/* The TMA core's wait_a (the producer thread): before A[m0:m0+BM, k0:k0+64) is loaded,
 * wait for every k-group of that m-tile that starts in the slab (acquire, device scope:
 * the fetchers are on this GPU; the core adds the proxy fence before its TMA). */
struct iris_ag_gemm_tma_waiter {
  iris_gemm_err_t *err;
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
  __device__ void stalled() const { iris_gemm_err_fail(err, epoch, IRIS_GEMM_WAIT_PIPELINE, -1, 0, 0, -1); }
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
  while (!iris_epoch_reached(iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(d.ready.flags + item), epoch) && !iris_gemm_err_aborted(d.err, epoch)) {
    if (iris_detail_time_ns() - t0 >= patience) {
      patience = 0;
      return atomicExch(d.claim + item, epoch) != epoch;
    }
    iris_detail_pause();
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
    iris_ag_seen_t seen = 0;
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
    iris_ag_gemm_sched sc = iris_ag_gemm_make_sched<Cfg>(d, slot);
    iris_ag_gemm_tma_waiter w;
    w.err = d.err;
    w.flags = d.ready.flags;
    w.groups_k = d.groups_k;
    w.kg = d.kg;
    w.K = d.K;
    w.bm = Cfg::BM;
    w.epoch = epoch;
#if defined(IRIS_GEMM_TRACE)
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
  __syncthreads(); /* every thread's "done reading" wait has ended (and recorded its failure) before thread 0 tells the peers */
  if (threadIdx.x == 0) {
    iris_ag_gemm_tell_peers(d, epoch);
    d.counters[slot] = epoch;
  }
}
#endif /* IRIS_GEMM_HAVE_TMA */
/* The part a run refused on this rank (its arguments, on the host: iris_ag_gemm_take_part)
 * takes in a call of the fused and kernel-unfused paths, in place of their kernels. One
 * block of at least W threads; nothing of the user's is read or written:
 *   - every peer's count of this rank's "done reading" signals moves on by one call's
 *     worth (the peer's final wait of this call, and of every later one, counts them);
 *   - every peer is told (iris_gemm_err_refuse_peer): its waits of this call return at
 *     once, and the first of them records IRIS_GEMM_WAIT_REFUSED naming this rank. This
 *     rank's arrive is not signalled, so a peer that runs the call does wait for it (its
 *     fetchers wait before they read this rank's A) and sees the refusal; where every rank
 *     refused the call, nobody waits and nothing is recorded;
 *   - this rank's CTA slot counters move on to the call's epoch: its next call runs at the
 *     peers' next epoch. Its ready flags and claim words are local and hold an older
 *     epoch, which the next call passes over as ever;
 *   - it ends, as the normal call does, only when every peer's CTAs of this call are done
 *     reading (iris_ag_gemm_wait_done, bounded, not cut short by the peers' abort words).
 *     A peer signals that only after its wait for this rank's arrive has ended, i.e. after
 *     it saw this call's refusal: otherwise a refusal of this rank's next call could
 *     overwrite the words first, and a late peer's wait of this call would run to its
 *     bound (or pass on the next call's arrive with no error at all).
 * The normal call pays nothing for this: its kernels are unchanged (the record is written
 * on the cold path of a wait that is aborted already). */
__global__ void iris_ag_gemm_refused_kernel(iris_ag_gemm_dev_t d) {
  const int W = d.ctx.world_size, me = d.ctx.rank, slots = d.fetchers + d.gemm_ctas, t = (int)threadIdx.x;
  const unsigned epoch = d.counters[0] + 1; /* every slot's counter holds the last call (each call runs every slot once) */
  const unsigned per_call = (unsigned)d.fetchers + (d.side_fetch || d.help ? (unsigned)d.gemm_ctas : 0u); /* as the peers' iris_ag_gemm_wait_done counts */
  __syncthreads(); /* counters[0] read by every thread before any stores it */
  for (int q = t; q < W; q += (int)blockDim.x) {
    if (q == me) continue;
    iris_signal_add(d.ctx, d.done + me, per_call, q);
    iris_gemm_err_refuse_peer(d.ctx, d.err, epoch, q);
  }
  for (int i = t; i < slots; i += (int)blockDim.x) d.counters[i] = epoch;
  iris_ag_gemm_wait_done(d, epoch, per_call, false);
}
#endif /* IRIS_GEMM_HAVE_CORE */
#endif /* IRIS_INTERNAL_GEMM_AG_KERNEL_H */
