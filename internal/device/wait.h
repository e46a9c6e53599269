/* internal/device/wait.h: what every bounded wait of the device code runs on: the spin
 * bound (IRIS_WAIT_TIMEOUT_NS, the clock read every 256 polls), the context's fault words
 * on the device (recording a fault, giving up once one is fatal), the comparisons of
 * iris_cmp_t, and the wait loop behind iris_wait_until and iris_wait_until_relaxed.
 *
 * Part of iris_device.h (device code, included by it); not a public header. */
#ifndef IRIS_DEVICE_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_device.h"
#endif
#ifndef IRIS_INTERNAL_DEVICE_WAIT_H
#define IRIS_INTERNAL_DEVICE_WAIT_H
#include "../core/layout.h"
#include "platform.h"
#include "debug.h"

/* One bounded wait's state (a local variable of the waiting thread; IRIS_DETAIL_SPIN_INIT). */
typedef struct iris_detail_spin {
  unsigned long long start; /* %globaltimer at the first clock reading; 0 before it */
  unsigned polls;           /* polls so far */
  unsigned step;            /* the last window of 8 steps of 2^20 ns in which this thread looked */
} iris_detail_spin_t;
#define IRIS_DETAIL_SPIN_INIT {0ULL, 0u, 0u}

/* Records a fault in the context's fault word (system scope, so the host and every
 * kernel of the context see it; an earlier fault is kept, so the word names the first
 * one, give or take a race between two recorders). kind: IRIS_FAULT_*; a mismatch goes
 * to IRIS_FAULT_WORD_MISMATCH, the others (IRIS_FAULT_MISMATCH_FATAL too) to IRIS_FAULT_WORD_FATAL (the encoding:
 * internal/core/layout.h). The words are pinned host memory, where GPU atomics need not be
 * atomic across PCIe: a load and a store, no read-modify-write. */
IRIS_DEVICE_INLINE void iris_detail_record_fault(const iris_device_ctx_t &ctx, unsigned kind, int peer, unsigned site, unsigned call) {
  if (!ctx.fault) return;
  unsigned long long *w = ctx.fault + (kind == IRIS_FAULT_MISMATCH ? IRIS_FAULT_WORD_MISMATCH : IRIS_FAULT_WORD_FATAL);
  if (iris_detail_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>((const unsigned long long *)w) == 0)
    iris_detail_store<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(w, IRIS_FAULT_MAKE(kind, peer, site, call));
}
/* Whether the context has a fatal fault (a wait of any kernel of it ran out, a mismatch
 * of a split call, or iris_abort): then every wait gives up. Reads pinned host memory: call it rarely. */
IRIS_DEVICE_INLINE bool iris_detail_faulted(const iris_device_ctx_t &ctx) {
  return ctx.fault && iris_detail_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>((const unsigned long long *)ctx.fault + IRIS_FAULT_WORD_FATAL) != 0;
}
/* Bounded spinning for a wait of `ctx`: call once per poll. True once the wait bound has
 * passed (then it records a timeout fault naming `peer`, `site` and `call`), or once the
 * context has a fatal fault (another wait ran out, iris_abort), so one expired wait never
 * makes every later wait of the context spin out its own bound. The bound: the context's
 * IRIS_WAIT_TIMEOUT_MS (a word the host wrote at init, read only once a wait has lasted
 * IRIS_DETAIL_WAIT_FLOOR_NS), else the unit's IRIS_WAIT_TIMEOUT_NS.
 *
 * The fault words are pinned host memory: every read of them crosses PCIe. A wait reads
 * the clock every 256 polls and nothing else until it has lasted one 2^20 ns step (about
 * 1 ms); from then on one lane in 8 of each warp looks at the host words in each step, so
 * a fault is seen within about 8 ms and a GPU full of waiting threads sends at most one
 * read per 8 threads per step. Reading them every 256 polls was what stalled calls that
 * run every SM (docs/stalls.md): hundreds of waiting threads of a rank that arrived early
 * queued enough PCIe reads that they saw the last rank's flag 60-200 us after it landed,
 * and left the call that much apart, so the next call started skewed again. */
#define IRIS_DETAIL_WAIT_FLOOR_NS 100000000ULL /* 100 ms: IRIS_WAIT_TIMEOUT_MS's least value */
#define IRIS_DETAIL_WAIT_STEP_SHIFT 20         /* 2^20 ns: how often a long wait looks at the fault words */
IRIS_DEVICE_INLINE bool iris_detail_wait_expired(const iris_device_ctx_t &ctx, iris_detail_spin_t &s, int peer, unsigned site, unsigned call) {
  if ((++s.polls & 255) != 0) return false;
  const unsigned long long now = iris_detail_time_ns();
  if (!s.start) {
    s.start = now;
    return false;
  }
  const unsigned long long waited = now - s.start;
  /* this lane's window of 8 steps, staggered by lane: it looks once per window, at its
   * first clock reading in it (a wait whose polls are slow skips no window) */
  const unsigned window = ((unsigned)(waited >> IRIS_DETAIL_WAIT_STEP_SHIFT) + (threadIdx.x & 7u)) >> 3;
  if (window == s.step) return false;
  s.step = window;
  if (iris_detail_faulted(ctx)) return true;
  if (waited <= IRIS_DETAIL_WAIT_FLOOR_NS && waited <= (unsigned long long)IRIS_WAIT_TIMEOUT_NS) return false;
  {
    unsigned long long bound = ctx.fault ? iris_detail_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>((const unsigned long long *)ctx.fault + IRIS_FAULT_WORD_BOUND) : 0;
    if (!bound) bound = (unsigned long long)IRIS_WAIT_TIMEOUT_NS;
    if (waited <= bound) return false;
  }
  iris_detail_record_fault(ctx, IRIS_FAULT_TIMEOUT, peer, site, call);
  return true;
}

/* IRIS_CMP_EPOCH: iris_epoch_reached for integers; on a float or double flag (which
 * iris_signal and iris_signal_add take, and which does not wrap) it is IRIS_CMP_GE, so a
 * wait on such a flag compiles whatever its comparison (iris_epoch_reached takes integers
 * only, and the comparison is a run-time value). */
template <typename T, bool I = std::is_integral<T>::value>
struct iris_detail_epoch_cmp {
  static IRIS_DEVICE_INLINE bool reached(T got, T value) { return iris_epoch_reached(got, value); }
};
template <typename T>
struct iris_detail_epoch_cmp<T, false> {
  static IRIS_DEVICE_INLINE bool reached(T got, T value) { return got >= value; }
};
template <typename T>
IRIS_DEVICE_INLINE bool iris_detail_compare(T got, iris_cmp_t cmp, T value) {
  switch (cmp) {
  case IRIS_CMP_EQ: return got == value;
  case IRIS_CMP_NE: return got != value;
  case IRIS_CMP_GE: return got >= value;
  case IRIS_CMP_GT: return got > value;
  case IRIS_CMP_LE: return got <= value;
  case IRIS_CMP_LT: return got < value;
  default: return iris_detail_epoch_cmp<T>::reached(got, value);
  }
}

/* IRIS_DEBUG: a comparison outside iris_cmp_t traps naming the wait (without it, such a
 * value compares as IRIS_CMP_EPOCH). */
#if defined(IRIS_DEBUG)
IRIS_DEVICE_INLINE void iris_detail_check_cmp(const iris_device_ctx_t &ctx, iris_cmp_t cmp, const char *what) {
  if ((unsigned)cmp > (unsigned)IRIS_CMP_EPOCH) {
    printf("iris: wait '%s' on rank %d (block %d, thread %d): comparison %d is not an iris_cmp_t (IRIS_CMP_EQ .. IRIS_CMP_EPOCH)\n", what, ctx.rank,
           (int)blockIdx.x, (int)threadIdx.x, (int)cmp);
    iris_detail_trap();
  }
}
#define IRIS_DETAIL_CHECK_CMP(ctx, cmp, what) iris_detail_check_cmp(ctx, cmp, what)
#else
#define IRIS_DETAIL_CHECK_CMP(ctx, cmp, what) ((void)0)
#endif

template <iris_order_t O, iris_scope_t S, typename T>
IRIS_DEVICE_INLINE bool iris_detail_wait(const iris_device_ctx_t &ctx, const T *flag, iris_cmp_t cmp, IRIS_DETAIL_V(T) value, const char *what) {
  iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
  T got;
  IRIS_DETAIL_CHECK(ctx, flag, sizeof(T), ctx.rank, what);
  IRIS_DETAIL_CHECK_CMP(ctx, cmp, what);
  for (;;) {
#if IRIS_DEVICE_POLL_CONFIRM
    /* AMD: an acquire invalidates caches, so poll relaxed and confirm with one acquire */
    got = iris_atomic_load<IRIS_ORDER_RELAXED, S>(flag);
    if (iris_detail_compare(got, cmp, value)) {
      if (O == IRIS_ORDER_RELAXED) return true;
      got = iris_atomic_load<IRIS_ORDER_ACQUIRE, S>(flag);
      if (iris_detail_compare(got, cmp, value)) return true;
    }
#else
    /* NVIDIA: an acquire load of local memory is cheap, and polling with it saves the
     * confirming load (docs/tuning.md) */
    got = iris_atomic_load<O == IRIS_ORDER_RELAXED ? IRIS_ORDER_RELAXED : IRIS_ORDER_ACQUIRE, S>(flag);
    if (iris_detail_compare(got, cmp, value)) return true;
#endif
    if (iris_detail_wait_expired(ctx, spin, 0xff, IRIS_SITE_USER, 0)) break;
  }
#if defined(IRIS_DEBUG)
  /* the time it waited: the bound may be IRIS_WAIT_TIMEOUT_MS, or another wait's fault ended it sooner */
  printf("iris: wait '%s' timed out on rank %d (block %d, thread %d) after %.1f s: flag %p holds %llu, waiting for cmp %d against %llu\n", what, ctx.rank,
         (int)blockIdx.x, (int)threadIdx.x, (double)(iris_detail_time_ns() - spin.start) * 1e-9, (const void *)flag, (unsigned long long)got, (int)cmp,
         (unsigned long long)value);
  iris_detail_trap();
#endif
  (void)got;
  (void)ctx;
  (void)what;
  return false;
}

#endif /* IRIS_INTERNAL_DEVICE_WAIT_H */
