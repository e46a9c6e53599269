/* internal/gemm/common.h: what the all-gather + GEMM (iris_gemm.h) and the GEMM +
 * reduce-scatter / all-reduce (iris_gemm_reduce.h) share. Part of their implementation,
 * included by both (either may come first, or only one); not a public header. Device
 * compilers only (nvcc, hipcc).
 * The tile GEMM cores (internal/gemm_core*.h); a plan's error record and the bounded flag
 * wait that fills it; the TMA core's tile sequence. The host side is internal/gemm/host.h. */
#ifndef IRIS_INTERNAL_GEMM_COMMON_H
#define IRIS_INTERNAL_GEMM_COMMON_H
#include "../../iris_device.h"
#include "../device/platform.h"
#include "../device/debug.h"

/* The tile GEMM core: CUDA always; AMD (MFMA, never run on hardware) only with
 * IRIS_GEMM_MFMA_UNVERIFIED. */
#if !defined(IRIS_GEMM_NO_CORE) && (IRIS_DEVICE_TMA || defined(IRIS_GEMM_MFMA_UNVERIFIED))
#include "core_tma.h"  /* includes core.h; empty outside nvcc */
#include "core_mfma.h" /* empty unless hipcc and IRIS_GEMM_MFMA_UNVERIFIED */
#if defined(IRIS_GEMM_CORE_AVAILABLE)
#define IRIS_GEMM_HAVE_CORE 1
#endif
#endif
/* IRIS_GEMM_HAVE_TMA: the core is NVIDIA's TMA / wgmma one (the fused GEMM + reduce path,
 * the all-gather + GEMM's TMA kernel); a core without it is AMD's MFMA one. */
#if defined(IRIS_GEMM_HAVE_CORE) && IRIS_DEVICE_TMA
#define IRIS_GEMM_HAVE_TMA 1
#endif

/* ========================================================================= */
/*         the error record: bounded waits, one failure per call             */
/* ========================================================================= */
/* docs/gemm_waits.md lists every wait. Every wait of the fused kernels is bounded. The
 * first one that expires in a call records what it waited for (iris_gemm_err_fail) and
 * stores the call's epoch into the abort word; every later wait of that call (any CTA, any
 * launch of the call) sees the abort word and returns at once, so a stuck peer costs one
 * wait bound per call, not one per tile. The host reads the record with
 * iris_gemm_err_take (iris_ag_gemm_check, iris_gemm_rs_check). Waits never skip the
 * signals that peers wait for, so a slow peer is never blocked by this rank's abort. */

/* What failed (iris_gemm_err_t::what).
 *   ARRIVE, DONE, READY   the all-gather + GEMM's waits: a peer's "A is ready", the peers'
 *                         "done reading A", this rank's own ready flags;
 *   PIPELINE              a pipeline (mbarrier) wait of the TMA core (a bug);
 *   PEER_FAILED           a peer gave up on the call (peer: that rank, got: its own
 *                         IRIS_GEMM_WAIT_*, want: the rank its wait was for, or -1);
 *   TILE                  the GEMM + reduce-scatter's fused path: an owner's wait for a
 *                         peer's pushed tile (peer: that rank, item: the 64-row half *
 *                         n-tiles + n-tile);
 *   REFUSED               not a wait that ran out: a peer's run of the call was refused on
 *                         the host (its arguments) and took part with nothing
 *                         (iris_gemm_err_refuse_peer; peer: that rank). */
enum { IRIS_GEMM_WAIT_ARRIVE = 1, IRIS_GEMM_WAIT_DONE, IRIS_GEMM_WAIT_READY, IRIS_GEMM_WAIT_PIPELINE, IRIS_GEMM_WAIT_PEER_FAILED, IRIS_GEMM_WAIT_TILE,
       IRIS_GEMM_WAIT_REFUSED };

/* A plan's error record, on the symmetric heap (zeroed at create): written by this rank's
 * CTAs and, for peer_abort_epoch and a PEER_FAILED record, by its peers' CTAs
 * (iris_gemm_err_tell_peers), for peer_abort_epoch and the refusal words by the kernel a
 * peer's refused run takes part with (iris_gemm_err_refuse_peer); read and cleared by the
 * host (the refusal words are not cleared: they count only with an abort word of the same
 * call). */
typedef struct iris_gemm_err {
  unsigned what;             /* 0: none; else the IRIS_GEMM_WAIT_* that expired first */
  unsigned peer;             /* the rank whose signal was missing (-1: this rank's own CTAs) */
  unsigned epoch;            /* the call (1 = the plan's first run) */
  unsigned block;            /* the CTA slot that waited */
  unsigned got;              /* the flag's value at expiry */
  unsigned want;             /* the value it waited for */
  unsigned item;             /* READY: m-tile * groups_k + k-group; TILE: see above */
  unsigned abort_epoch;      /* the epoch of the last call that failed: its waits return at once */
  unsigned peer_abort_epoch; /* the same, written by a peer whose call failed or was refused */
  unsigned refused_epoch;    /* a peer's refused run: its call, written before peer_abort_epoch (iris_gemm_err_refuse_peer) */
  unsigned refused_by;       /* ... and that peer's rank */
} iris_gemm_err_t;
enum { IRIS_GEMM_ERR_WORDS = 11 }; /* words of the record in a plan's flag block */
static_assert(sizeof(iris_gemm_err_t) == IRIS_GEMM_ERR_WORDS * sizeof(unsigned), "iris_gemm_err_t: 11 words, no padding");
static_assert(offsetof(iris_gemm_err_t, what) == 0 && offsetof(iris_gemm_err_t, item) == 6 * sizeof(unsigned) &&
                  offsetof(iris_gemm_err_t, abort_epoch) == 7 * sizeof(unsigned) && offsetof(iris_gemm_err_t, peer_abort_epoch) == 8 * sizeof(unsigned) &&
                  offsetof(iris_gemm_err_t, refused_epoch) == 9 * sizeof(unsigned) && offsetof(iris_gemm_err_t, refused_by) == 10 * sizeof(unsigned),
              "iris_gemm_err_t: the words in their order");

/* One thread: record a failed wait of call `epoch` (the first since the host last read the
 * record keeps its details) and abort the call. */
IRIS_DEVICE_INLINE void iris_gemm_err_fail(iris_gemm_err_t *err, unsigned epoch, int what, int peer, unsigned got, unsigned want, int item) {
  iris_atomic_store<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(&err->abort_epoch, epoch);
  /* system scope: peers CAS this word too (iris_gemm_err_tell_peers), from other GPUs */
  if (iris_atomic_cas<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(&err->what, 0u, (unsigned)what) == 0u) {
    err->peer = (unsigned)peer;
    err->epoch = epoch;
    err->block = blockIdx.x;
    err->got = got;
    err->want = want;
    err->item = (unsigned)item;
  }
}
/* Whether call `epoch` has already failed somewhere on this rank, or a peer said it failed
 * there. The words start at 0, so epoch 0 (a slot's call after 2^32 calls) has no marker:
 * its waits end by their bounds alone, and its failures reach the peers that way too. */
IRIS_DEVICE_INLINE bool iris_gemm_err_aborted(const iris_gemm_err_t *err, unsigned epoch) {
  return epoch != 0u && (iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(&err->abort_epoch) == epoch ||
                         iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(&err->peer_abort_epoch) == epoch);
}
/* One thread, on the cold path of a wait whose call `epoch` has been aborted: where the
 * abort came from a peer's refused run of that call (iris_gemm_err_refuse_peer: the refusal
 * words hold this call), record IRIS_GEMM_WAIT_REFUSED naming that peer, unless the record
 * holds a failure already. Only a rank that runs the call gets here: where every rank
 * refused the call, nobody waits in it and nothing is recorded. */
IRIS_DEVICE_INLINE void iris_gemm_err_note_refused(iris_gemm_err_t *err, unsigned epoch) {
  if (iris_atomic_load<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(&err->peer_abort_epoch) != epoch ||
      iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(&err->refused_epoch) != epoch)
    return;
  if (iris_atomic_cas<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(&err->what, 0u, (unsigned)IRIS_GEMM_WAIT_REFUSED) == 0u) {
    err->peer = iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(&err->refused_by);
    err->epoch = epoch;
    err->block = blockIdx.x;
    err->got = 0u;
    err->want = 0u;
    err->item = ~0u;
  }
}
/* One thread, on the rank whose run of call `epoch` was refused on the host (its
 * arguments), for one peer q: tell q. The refusal words first, then the abort word (release,
 * system scope): q's waits of that call return at once (iris_gemm_wait_flag), and the first
 * of them records IRIS_GEMM_WAIT_REFUSED naming this rank (iris_gemm_err_note_refused).
 * Epoch 0 has no abort marker (above): there q's waits end by their bounds. */
IRIS_DEVICE_INLINE void iris_gemm_err_refuse_peer(const iris_device_ctx_t &ctx, iris_gemm_err_t *err, unsigned epoch, int q) {
  iris_atomic_store<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(ctx, &err->refused_by, (unsigned)ctx.rank, q);
  iris_atomic_store<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(ctx, &err->refused_epoch, epoch, q);
  iris_atomic_store<IRIS_ORDER_RELEASE, IRIS_SCOPE_SYSTEM>(ctx, &err->peer_abort_epoch, epoch, q);
}
/* One thread: spin until *flag has reached want (wrap-safe), each poll a load of order O
 * at scope S (acquire: what the signaller released is visible after it). Bounded by
 * bound_ns; polls without pause for the first 2048 rounds, then pauses between them.
 * Returns false at once if call `epoch` failed elsewhere (a peer's refused run of it is
 * recorded then, on that cold path only: iris_gemm_err_note_refused), unless abortable is
 * false (a refused run's own wait: the peers' abort words of its call are no failure of
 * its rank's); on expiry records the failure (what, peer, item) and aborts the call.
 * IRIS_DEBUG: reports and traps. */
template <iris_order_t O, iris_scope_t S>
IRIS_DEVICE_INLINE bool iris_gemm_wait_flag(iris_gemm_err_t *err, const unsigned *flag, unsigned want, unsigned epoch, int what, int peer, int item,
                                            unsigned long long bound_ns = IRIS_WAIT_TIMEOUT_NS, bool abortable = true) {
  unsigned spins = 0, got;
  unsigned long long start = 0;
  for (;;) {
    got = iris_atomic_load<O, S>(flag);
    if (iris_epoch_reached(got, want)) return true;
    if ((++spins & 255) == 0) {
      const unsigned long long now = iris_detail_time_ns();
      if (abortable && iris_gemm_err_aborted(err, epoch)) { /* cold: the call failed or a peer refused it */
        iris_gemm_err_note_refused(err, epoch);
        return false;
      }
      if (!start) start = now;
      else if (now - start > bound_ns) break;
    }
    if (spins > 2048) iris_detail_pause();
  }
#if defined(IRIS_DEBUG)
  printf("iris: iris_ag_gemm: wait %d (1 peer's A ready, 2 peers done reading A, 3 ready flag, see docs/gemm_waits.md) timed out: block %d, call %u, peer %d, item %d: flag holds %u, want %u\n",
         what, (int)blockIdx.x, epoch, peer, item, got, want);
  iris_detail_trap();
#endif
  iris_gemm_err_fail(err, epoch, what, peer, got, want, item);
  return false;
}

/* One thread per CTA, at the CTA's end: if call `epoch` failed on this rank, tell every
 * peer (their waits of the call return at once, and their record says which rank gave up
 * and why: after a timed-out wait this rank may overwrite its inputs while a slow peer
 * still reads them, so the peer's result is suspect too). Idempotent: every CTA of the
 * call does it. */
IRIS_DEVICE_INLINE void iris_gemm_err_tell_peers(const iris_device_ctx_t &ctx, iris_gemm_err_t *err, unsigned epoch) {
  if (epoch == 0u || iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(&err->abort_epoch) != epoch) return; /* epoch 0: no marker (above) */
  const unsigned what = err->what, why = err->peer;
  for (int q = 0; q < ctx.world_size; ++q) {
    if (q == ctx.rank) continue;
    iris_gemm_err_t *e = iris_translate(ctx, err, q);
    iris_atomic_store<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(&e->peer_abort_epoch, epoch);
    if (iris_atomic_cas<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(&e->what, 0u, (unsigned)IRIS_GEMM_WAIT_PEER_FAILED) == 0u) {
      e->peer = (unsigned)ctx.rank;
      e->epoch = epoch;
      e->block = blockIdx.x;
      e->got = what;
      e->want = why;
      e->item = ~0u;
    }
  }
}

#if defined(IRIS_GEMM_HAVE_TMA)
/* ========================================================================= */
/*                     the TMA core's tile sequence                          */
/* ========================================================================= */
/* The tiles of one persistent CTA: first, first + stride, ... of tiles_m x tiles_n tiles
 * in a grouped raster over m-tiles rotated by `rot` (a plan starts where its data arrives
 * first: the all-gather + GEMM with this rank's own rows, the GEMM + reduce-scatter with
 * the next owner's). Sched of internal/gemm/core_tma.h: a pure function of i. */
struct iris_gemm_sched {
  int first, stride, tiles, tiles_m, tiles_n, rot, bm, bn, raster;
  __device__ bool operator()(int i, int &m0, int &n0) {
    const int t = first + i * stride;
    if (t >= tiles) return false;
    /* grouped raster: `raster` m-tiles (in the rotated order) sweep the n-tiles together,
     * m fastest, so the CTAs running at once share B tiles in L2 */
    const int per = raster * tiles_n, g0 = t / per * raster, gsize = min(tiles_m - g0, raster), l = t - t / per * per;
    m0 = (g0 + l % gsize + rot) % tiles_m * bm;
    n0 = l / gsize * bn;
    return true;
  }
};
/* The sequence of slot `first` of `stride` over tiles_m x tiles_n tiles of Cfg. */
template <class Cfg>
IRIS_DEVICE_INLINE iris_gemm_sched iris_gemm_make_sched(int first, int stride, int tiles_m, int tiles_n, int rot, int raster) {
  iris_gemm_sched sc;
  sc.first = first;
  sc.stride = stride;
  sc.tiles = tiles_m * tiles_n;
  sc.tiles_m = tiles_m;
  sc.tiles_n = tiles_n;
  sc.rot = rot;
  sc.bm = Cfg::BM;
  sc.bn = Cfg::BN;
  sc.raster = raster;
  return sc;
}
#endif /* IRIS_GEMM_HAVE_TMA */

#endif /* IRIS_INTERNAL_GEMM_COMMON_H */
