/* iris_device.h — device API: remote memory access, atomics and flags across ranks
 *
 * What it is
 *   Inline device functions for kernels that read, write and atomically update any
 *   rank's symmetric heap (iris.h). A heap pointer is always given in *this* rank's
 *   address space plus a target rank; the functions translate it.
 *
 * Quick start
 *     #include "iris_device.h"
 *     __global__ void push(iris_device_ctx_t ctx, float *buf, unsigned *flag, int peer) {
 *       // every thread of the block writes its part of buf on `peer` ...
 *       iris_put_bulk(ctx, buf, local_src, bytes, peer, threadIdx.x, blockDim.x);
 *       // ... then the block publishes it: barrier, one release at system scope
 *       iris_signal_block(ctx, flag, 1u, peer);
 *     }
 *     // on `peer`: iris_wait_until(ctx, flag, IRIS_CMP_GE, 1u) (acquire), then read buf.
 *   nvcc -arch=sm_90 ...   or   hipcc --offload-arch=gfx90a ...
 *
 * Memory-model rules (what users must follow)
 *   1. Data handed to another GPU is published by a release and picked up by an acquire,
 *      both at IRIS_SCOPE_SYSTEM: iris_signal / iris_signal_add (release) and
 *      iris_wait_until (acquire). The relaxed variants order nothing: use them only
 *      to synchronise execution, never to hand over data.
 *   2. A release by one thread covers that thread's own earlier writes. When many
 *      threads wrote the data, they must all finish first: __syncthreads() and then one
 *      thread releases (iris_signal_block does exactly that).
 *   3. A waiting kernel must not depend on a kernel that cannot run: spin waits assume
 *      the producer is resident (persistent grids, or launch order that guarantees it).
 *   4. Flags count up (epochs) and are compared wrap-safely (iris_epoch_reached,
 *      IRIS_CMP_EPOCH); never reset a flag a peer may still be reading.
 *   5. Every heap pointer must come from iris_malloc in the same order on every rank.
 *   6. Multi-node worlds (docs/multinode.md): ranks are global, but the heap is mapped
 *      among one node's ranks only: a kernel may address ranks ctx.node *
 *      ctx.local_size to that + ctx.local_size - 1; any other rank is undefined
 *      behaviour (IRIS_DEBUG traps naming it). Between nodes use the collectives.
 *   Every spin wait is bounded and returns false when it runs out; it then records a
 *   fatal fault in the context (iris_device_ctx_t's fault words: the host sees it through
 *   iris_get_async_error and every later call), and every other wait of the context gives
 *   up once it next looks at the fault words (about every 8 ms, the first time 1 to 8 ms
 *   into the wait: internal/device/wait.h). The bound: IRIS_WAIT_TIMEOUT_MS at run time
 *   (read by iris_init; at least 100), else IRIS_WAIT_TIMEOUT_NS of the unit, 10 minutes
 *   by default (torch's NCCL watchdog waits as long): a rank that arrives late, after a
 *   checkpoint or host work, is not a fault; a stuck or dead one is reported after the
 *   bound. With IRIS_DEBUG, a timed-out wait prints which wait, on which rank, block and
 *   thread, and traps; remote operations check that their pointer lies in the heap and
 *   their rank in [0, world_size).
 *
 * Options: IRIS_DEBUG, IRIS_WAIT_TIMEOUT_NS (per unit); environment: IRIS_WAIT_TIMEOUT_MS.
 */
#ifndef IRIS_DEVICE_H
#define IRIS_DEVICE_H

#include "iris.h"
/* The device vendor layer (the only vendor-specific file of the device code): the
 * vendor's runtime header, IRIS_DEVICE_INLINE, IRIS_WARP_SIZE (threads per warp, on the
 * device only: 64 on AMD CDNA, 32 on NVIDIA), the atomic primitives for each order and
 * scope (PTX on NVIDIA, __hip_atomic_* on AMD) and the device clock. */
#include "internal/device/platform.h"
#include <stdint.h>
#include <stdio.h>
#include <type_traits>

#ifndef IRIS_WAIT_TIMEOUT_NS
#define IRIS_WAIT_TIMEOUT_NS 600000000000ULL /* 10 min, as torch's NCCL watchdog */
#endif

/* Comparisons for iris_wait_until. IRIS_CMP_EPOCH is "value reached", wrap-safe for
 * counters that only count up: (signed)(flag - value) >= 0 (on a float or double flag,
 * which does not wrap: IRIS_CMP_GE). Another value is undefined (IRIS_DEBUG: the wait
 * traps naming it). */
typedef enum iris_cmp { IRIS_CMP_EQ = 0, IRIS_CMP_NE, IRIS_CMP_GE, IRIS_CMP_GT, IRIS_CMP_LE, IRIS_CMP_LT, IRIS_CMP_EPOCH } iris_cmp_t;

/* ================================================================ declarations ==
 * (the contract; definitions follow below)
 *
 * translation
 *   T *iris_translate(ctx, T *ptr, int to_rank)
 * scalar and 16-byte remote access (one thread each)
 *   T    iris_load(ctx, const T *ptr, int from_rank)
 *   void iris_store(ctx, T *ptr, T value, int to_rank)
 *   void iris_get(ctx, T *local_dst, const T *ptr, int from_rank)
 *   void iris_put(ctx, T *ptr, const T *local_src, int to_rank)
 *   void iris_copy(ctx, T *dst, const T *src, int from_rank, int to_rank)
 *   uint4 iris_load_v16(ctx, const void *ptr, int from_rank)
 *   void  iris_store_v16(ctx, void *ptr, uint4 value, int to_rank)
 * cooperative bulk copies (threads tid = 0..nthreads-1 each call with the same arguments)
 *   void iris_get_bulk(ctx, void *local_dst, const void *ptr, size_t bytes, int from_rank, int tid, int nthreads)
 *   void iris_put_bulk(ctx, void *ptr, const void *local_src, size_t bytes, int to_rank, int tid, int nthreads)
 *   void iris_copy_bulk(ctx, void *dst, const void *src, size_t bytes, int from_rank, int to_rank, int tid, int nthreads)
 *   void iris_copy_bytes(void *dst, const void *src, size_t bytes, int tid, int nthreads)
 * atomics, O = memory order, S = scope (defaults: IRIS_ORDER_ACQ_REL, IRIS_SCOPE_SYSTEM);
 * each returns the old value; the (ptr, value) forms take an address already translated
 *   T iris_atomic_{add,sub,and,or,xor,min,max,xchg}<O,S>(ctx, T *ptr, T value, int to_rank)
 *   T iris_atomic_cas<O,S>(ctx, T *ptr, T expected, T desired, int to_rank)
 *   T iris_atomic_load<O,S>(ctx, const T *ptr, int from_rank)     O: RELAXED or ACQUIRE
 *   void iris_atomic_store<O,S>(ctx, T *ptr, T value, int to_rank) O: RELAXED or RELEASE
 *   integer types of 4 and 8 bytes; add, xchg, load and store also float and double
 * fences and flags
 *   void iris_fence<O,S>()
 *   void iris_signal<S>(ctx, T *flag, T value, int to_rank)         release store
 *   T    iris_signal_add<S>(ctx, T *flag, T inc, int to_rank)       release add
 *   void iris_signal_relaxed / T iris_signal_add_relaxed            execution only
 *   void iris_signal_block(ctx, T *flag, T value, int to_rank)      whole block, release
 *   bool iris_wait_until<S>(ctx, const T *flag, iris_cmp_t, T value[, what])   acquire
 *   bool iris_wait_until_relaxed<S>(...)                            execution only
 *   bool iris_wait_block(ctx, const T *flag, iris_cmp_t, T value[, what])       whole block
 *   bool iris_epoch_reached(T got, T target)
 * teams (iris.h's iris_team_t; docs/teams.md): peers by team rank, r = 0..team.size-1
 *   T   *iris_team_translate(ctx, team, T *ptr, r)                  int iris_team_peer(team, r): r's world rank
 *   T    iris_team_load / void iris_team_store / iris_team_get / iris_team_put (ctx, team, ..., r)
 *   void iris_team_get_bulk / iris_team_put_bulk (ctx, team, ..., r, tid, nthreads)
 *   T    iris_team_atomic_{add,sub,and,or,xor,min,max,xchg,cas,load,store}<O,S>(ctx, team, ..., r)
 *   T    iris_team_signal_op<OP,S>(ctx, team, T *flag, T value, r)  OP: IRIS_SIGNAL_SET, _ADD, _OR, _XOR; release
 *        (SET and ADD: the types of iris_atomic_store / _add, float and double too; OR, XOR: integers)
 *   void iris_team_signal / T iris_team_signal_add (ctx, team, flag, value, r)
 *   bool iris_team_wait_until<S>(ctx, team, const T *flag, iris_cmp_t, T value, int from_r[, what])  acquire, bounded
 *   bool iris_team_barrier(C coop, ctx, team[, index])               C: iris_coop_thread, _warp, _block
 *   iris_team_barrier_session<C> s(coop, ctx, team, index); s.sync() ...   the epoch kept in registers
 */

/* =============================================================== debug checks == */
/* IRIS_DETAIL_CHECK(ctx, p, bytes, rank, what): under IRIS_DEBUG, every remote access
 * checks its rank and its pointer and traps naming `what`; else nothing. */
#include "internal/device/debug.h"

/* ================================================================ translation == */

/* Any thread. ptr (in this rank's heap) as seen at rank to_rank's copy. No memory
 * access. Requires ptr in the heap (checked under IRIS_DEBUG). */
template <typename T>
IRIS_DEVICE_INLINE T *iris_translate(const iris_device_ctx_t &ctx, T *ptr, int to_rank) {
  IRIS_DETAIL_CHECK(ctx, (const void *)ptr, 0, to_rank, "iris_translate");
  uintptr_t off = (uintptr_t)ptr - (uintptr_t)ctx.bases[ctx.local_rank];
  return (T *)(ctx.bases[to_rank - ctx.node * ctx.local_size] + off);
}

/* ============================================================ scalar, 16 bytes == */
/* One thread each. Plain (weak) accesses: they order nothing by themselves. Read data
 * that a peer produced only after an acquire (iris_wait_until) that saw its release. */
template <typename T>
IRIS_DEVICE_INLINE T iris_load(const iris_device_ctx_t &ctx, const T *ptr, int from_rank) {
  IRIS_DETAIL_CHECK(ctx, ptr, sizeof(T), from_rank, "iris_load");
  return *iris_translate(ctx, ptr, from_rank);
}
template <typename T>
IRIS_DEVICE_INLINE void iris_store(const iris_device_ctx_t &ctx, T *ptr, T value, int to_rank) {
  IRIS_DETAIL_CHECK(ctx, ptr, sizeof(T), to_rank, "iris_store");
  *iris_translate(ctx, ptr, to_rank) = value;
}
/* Remote load from from_rank's ptr into local_dst (any local memory). */
template <typename T>
IRIS_DEVICE_INLINE void iris_get(const iris_device_ctx_t &ctx, T *local_dst, const T *ptr, int from_rank) {
  *local_dst = iris_load(ctx, ptr, from_rank);
}
/* Local load from local_src, remote store to to_rank's ptr. */
template <typename T>
IRIS_DEVICE_INLINE void iris_put(const iris_device_ctx_t &ctx, T *ptr, const T *local_src, int to_rank) {
  iris_store(ctx, ptr, *local_src, to_rank);
}
/* from_rank's src to to_rank's dst; any two ranks (every heap is mapped here). */
template <typename T>
IRIS_DEVICE_INLINE void iris_copy(const iris_device_ctx_t &ctx, T *dst, const T *src, int from_rank, int to_rank) {
  iris_store(ctx, dst, iris_load(ctx, src, from_rank), to_rank);
}
/* 16-byte accesses; ptr must be 16-byte aligned. One 128-bit instruction each. */
IRIS_DEVICE_INLINE uint4 iris_load_v16(const iris_device_ctx_t &ctx, const void *ptr, int from_rank) {
  IRIS_DETAIL_CHECK(ctx, ptr, 16, from_rank, "iris_load_v16");
  return *iris_translate(ctx, (const uint4 *)ptr, from_rank);
}
IRIS_DEVICE_INLINE void iris_store_v16(const iris_device_ctx_t &ctx, void *ptr, uint4 value, int to_rank) {
  IRIS_DETAIL_CHECK(ctx, ptr, 16, to_rank, "iris_store_v16");
  *iris_translate(ctx, (uint4 *)ptr, to_rank) = value;
}

/* ================================================================= bulk copies == */

/* n words from s to d by thread i of `stride`, four loads in flight before the stores;
 * returns n. */
template <typename W>
IRIS_DEVICE_INLINE size_t iris_detail_copy_words(W *d, const W *s, size_t n, size_t i, size_t stride) {
  for (; i + 3 * stride < n; i += 4 * stride) {
    W a = s[i], b = s[i + stride], c = s[i + 2 * stride], e = s[i + 3 * stride];
    d[i] = a;
    d[i + stride] = b;
    d[i + 2 * stride] = c;
    d[i + 3 * stride] = e;
  }
  for (; i < n; i += stride) d[i] = s[i];
  return n;
}
/* Cooperative: threads tid = 0..nthreads-1 each call it with the same arguments and
 * together copy `bytes` from src to dst (raw addresses, local or already translated).
 * 16-byte accesses, four in flight per thread, when both addresses are 16-byte
 * aligned; 4-byte accesses when both are 4-byte aligned; bytes otherwise. No ordering:
 * publish the result with iris_signal_block. A thread whose tid is outside [0, nthreads)
 * (nthreads < 1 included) copies nothing (IRIS_DEBUG: traps naming them): a stride of 0
 * never ended, and a negative one or a negative tid wrote before dst. */
IRIS_DEVICE_INLINE void iris_copy_bytes(void *dst, const void *src, size_t bytes, int tid, int nthreads) {
  char *d = (char *)dst;
  const char *s = (const char *)src;
  const size_t stride = (size_t)nthreads;
  size_t i = (size_t)tid, done = 0;
  if (nthreads < 1 || tid < 0 || tid >= nthreads) {
#if defined(IRIS_DEBUG)
    printf("iris: iris_copy_bytes: tid %d of %d threads (block %d, thread %d): a cooperative copy needs 0 <= tid < nthreads\n", tid, nthreads,
           (int)blockIdx.x, (int)threadIdx.x);
    iris_detail_trap();
#endif
    return;
  }
  if ((((uintptr_t)d | (uintptr_t)s) & 15) == 0) done = iris_detail_copy_words((uint4 *)d, (const uint4 *)s, bytes >> 4, i, stride) << 4;
  else if ((((uintptr_t)d | (uintptr_t)s) & 3) == 0) done = iris_detail_copy_words((unsigned *)d, (const unsigned *)s, bytes >> 2, i, stride) << 2;
  for (i = done + (size_t)tid; i < bytes; i += stride) d[i] = s[i];
}
/* Cooperative (see iris_copy_bytes): from_rank's heap range [ptr, ptr+bytes) into
 * local_dst. */
IRIS_DEVICE_INLINE void iris_get_bulk(const iris_device_ctx_t &ctx, void *local_dst, const void *ptr, size_t bytes, int from_rank, int tid, int nthreads) {
  IRIS_DETAIL_CHECK(ctx, ptr, bytes, from_rank, "iris_get_bulk");
  iris_copy_bytes(local_dst, iris_translate(ctx, (const char *)ptr, from_rank), bytes, tid, nthreads);
}
/* Cooperative: local_src into to_rank's heap range [ptr, ptr+bytes). */
IRIS_DEVICE_INLINE void iris_put_bulk(const iris_device_ctx_t &ctx, void *ptr, const void *local_src, size_t bytes, int to_rank, int tid, int nthreads) {
  IRIS_DETAIL_CHECK(ctx, ptr, bytes, to_rank, "iris_put_bulk");
  iris_copy_bytes(iris_translate(ctx, (char *)ptr, to_rank), local_src, bytes, tid, nthreads);
}
/* Cooperative: from_rank's src range into to_rank's dst range (both heap pointers). */
IRIS_DEVICE_INLINE void iris_copy_bulk(const iris_device_ctx_t &ctx, void *dst, const void *src, size_t bytes, int from_rank, int to_rank, int tid, int nthreads) {
  IRIS_DETAIL_CHECK(ctx, src, bytes, from_rank, "iris_copy_bulk (source)");
  IRIS_DETAIL_CHECK(ctx, dst, bytes, to_rank, "iris_copy_bulk (destination)");
  iris_copy_bytes(iris_translate(ctx, (char *)dst, to_rank), iris_translate(ctx, (const char *)src, from_rank), bytes, tid, nthreads);
}

/* IRIS_TRACE: per-CTA timelines of the library's kernels (off by default; a diagnostic) */
#include "internal/device/trace.h"

/* ================================================================ public atomics == */
/* Value parameters take their type from the pointer (not deduced), so
 * iris_atomic_add(ctx, (unsigned long long *)p, (uint64_t)1, r) works as expected. */
template <typename T>
struct iris_detail_id {
  typedef T type;
};
#define IRIS_DETAIL_V(T) typename iris_detail_id<T>::type
/* Canonical storage type of T: unsigned for 4-byte integers, unsigned long long for
 * 8-byte ones (two's-complement add/and/or/xor/xchg/cas do not care about sign). */
template <typename T>
struct iris_detail_bits {
  static_assert(std::is_integral<T>::value && (sizeof(T) == 4 || sizeof(T) == 8), "iris atomics: 4- or 8-byte integers (add/xchg/load/store: float, double too)");
  typedef typename std::conditional<sizeof(T) == 4, unsigned, unsigned long long>::type type;
  typedef typename std::conditional<sizeof(T) == 4, int, long long>::type signed_type;
};
template <typename T, bool F = std::is_floating_point<T>::value>
struct iris_detail_word { typedef typename iris_detail_bits<T>::type type; };
template <typename T>
struct iris_detail_word<T, true> {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "iris atomics: float or double");
  typedef T type;
};

#define IRIS_DETAIL_ORDER_SCOPE template <iris_order_t O = IRIS_ORDER_ACQ_REL, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>

/* One thread each. Atomically op= value at `ptr` (an address already translated, or
 * local), with order O at scope S; returns the old value. */
IRIS_DETAIL_ORDER_SCOPE IRIS_DEVICE_INLINE T iris_atomic_add(T *ptr, IRIS_DETAIL_V(T) value) {
  typedef typename iris_detail_word<T>::type W;
  return (T)iris_detail_add<O, S>((W *)ptr, (W)value);
}
IRIS_DETAIL_ORDER_SCOPE IRIS_DEVICE_INLINE T iris_atomic_sub(T *ptr, IRIS_DETAIL_V(T) value) {
  static_assert(std::is_integral<T>::value, "iris_atomic_sub: integers only (add a negative float instead)");
  typedef typename iris_detail_bits<T>::type W;
  return (T)iris_detail_add<O, S>((W *)ptr, (W)0 - (W)value);
}
#define IRIS_DETAIL_BITWISE(NAME)                                       \
  IRIS_DETAIL_ORDER_SCOPE IRIS_DEVICE_INLINE T iris_atomic_##NAME(T *ptr, IRIS_DETAIL_V(T) value) { \
    typedef typename iris_detail_bits<T>::type W;                       \
    return (T)iris_detail_##NAME<O, S>((W *)ptr, (W)value);             \
  }
IRIS_DETAIL_BITWISE(and)
IRIS_DETAIL_BITWISE(or)
IRIS_DETAIL_BITWISE(xor)
#undef IRIS_DETAIL_BITWISE
#define IRIS_DETAIL_MINMAX(NAME)                                                                                        \
  IRIS_DETAIL_ORDER_SCOPE IRIS_DEVICE_INLINE T iris_atomic_##NAME(T *ptr, IRIS_DETAIL_V(T) value) {                                     \
    typedef typename std::conditional<std::is_signed<T>::value, typename iris_detail_bits<T>::signed_type,               \
                                      typename iris_detail_bits<T>::type>::type W;                                       \
    return (T)iris_detail_##NAME<O, S>((W *)ptr, (W)value);                                                              \
  }
IRIS_DETAIL_MINMAX(min)
IRIS_DETAIL_MINMAX(max)
#undef IRIS_DETAIL_MINMAX
IRIS_DETAIL_ORDER_SCOPE IRIS_DEVICE_INLINE T iris_atomic_xchg(T *ptr, IRIS_DETAIL_V(T) value) {
  typedef typename std::conditional<sizeof(T) == 4, unsigned, unsigned long long>::type W;
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "iris_atomic_xchg: 4- or 8-byte types");
  W v, r;
  memcpy(&v, &value, sizeof v);
  r = iris_detail_xchg<O, S>((W *)ptr, v);
  memcpy(&value, &r, sizeof r);
  return value;
}
/* Compare-and-swap: if *ptr == expected, *ptr = desired. Returns the old value (equal
 * to expected exactly when the swap happened). */
IRIS_DETAIL_ORDER_SCOPE IRIS_DEVICE_INLINE T iris_atomic_cas(T *ptr, IRIS_DETAIL_V(T) expected, IRIS_DETAIL_V(T) desired) {
  typedef typename iris_detail_bits<T>::type W;
  return (T)iris_detail_cas<O, S>((W *)ptr, (W)expected, (W)desired);
}
/* Atomic load (O: RELAXED or ACQUIRE) and store (O: RELAXED or RELEASE). */
template <iris_order_t O = IRIS_ORDER_ACQUIRE, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE T iris_atomic_load(const T *ptr) {
  static_assert(O == IRIS_ORDER_RELAXED || O == IRIS_ORDER_ACQUIRE, "iris_atomic_load: order RELAXED or ACQUIRE");
  typedef typename iris_detail_word<T>::type W;
  return (T)iris_detail_load<O, S>((const W *)ptr);
}
template <iris_order_t O = IRIS_ORDER_RELEASE, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE void iris_atomic_store(T *ptr, IRIS_DETAIL_V(T) value) {
  static_assert(O == IRIS_ORDER_RELAXED || O == IRIS_ORDER_RELEASE, "iris_atomic_store: order RELAXED or RELEASE");
  typedef typename iris_detail_word<T>::type W;
  iris_detail_store<O, S>((W *)ptr, (W)value);
}

/* Remote forms: ptr is in this rank's heap; the operation applies to rank to_rank's
 * copy. Same orders, scopes and results as above. */
#define IRIS_DETAIL_REMOTE_RMW(NAME)                                                                                 \
  IRIS_DETAIL_ORDER_SCOPE IRIS_DEVICE_INLINE T iris_atomic_##NAME(const iris_device_ctx_t &ctx, T *ptr, IRIS_DETAIL_V(T) value, int to_rank) { \
    IRIS_DETAIL_CHECK(ctx, ptr, sizeof(T), to_rank, "iris_atomic_" #NAME);                                          \
    return iris_atomic_##NAME<O, S>(iris_translate(ctx, ptr, to_rank), value);                                       \
  }
IRIS_DETAIL_REMOTE_RMW(add)
IRIS_DETAIL_REMOTE_RMW(sub)
IRIS_DETAIL_REMOTE_RMW(and)
IRIS_DETAIL_REMOTE_RMW(or)
IRIS_DETAIL_REMOTE_RMW(xor)
IRIS_DETAIL_REMOTE_RMW(min)
IRIS_DETAIL_REMOTE_RMW(max)
IRIS_DETAIL_REMOTE_RMW(xchg)
#undef IRIS_DETAIL_REMOTE_RMW
IRIS_DETAIL_ORDER_SCOPE IRIS_DEVICE_INLINE T iris_atomic_cas(const iris_device_ctx_t &ctx, T *ptr, IRIS_DETAIL_V(T) expected, IRIS_DETAIL_V(T) desired, int to_rank) {
  IRIS_DETAIL_CHECK(ctx, ptr, sizeof(T), to_rank, "iris_atomic_cas");
  return iris_atomic_cas<O, S>(iris_translate(ctx, ptr, to_rank), expected, desired);
}
template <iris_order_t O = IRIS_ORDER_ACQUIRE, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE T iris_atomic_load(const iris_device_ctx_t &ctx, const T *ptr, int from_rank) {
  IRIS_DETAIL_CHECK(ctx, ptr, sizeof(T), from_rank, "iris_atomic_load");
  return iris_atomic_load<O, S>(iris_translate(ctx, ptr, from_rank));
}
template <iris_order_t O = IRIS_ORDER_RELEASE, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE void iris_atomic_store(const iris_device_ctx_t &ctx, T *ptr, IRIS_DETAIL_V(T) value, int to_rank) {
  IRIS_DETAIL_CHECK(ctx, ptr, sizeof(T), to_rank, "iris_atomic_store");
  iris_atomic_store<O, S>(iris_translate(ctx, ptr, to_rank), value);
}
#undef IRIS_DETAIL_ORDER_SCOPE

/* One thread. A memory fence of order O (RELAXED: none; the others: acquire-release)
 * at scope S. */
template <iris_order_t O = IRIS_ORDER_ACQ_REL, iris_scope_t S = IRIS_SCOPE_SYSTEM>
IRIS_DEVICE_INLINE void iris_fence() {
  iris_detail_fence<O, S>();
}

/* ========================================================================= flags == */

/* Wrap-safe "got has reached target" for counters that only count up. */
template <typename T>
IRIS_HOST_DEVICE inline bool iris_epoch_reached(T got, IRIS_DETAIL_V(T) target) {
  typedef typename iris_detail_bits<T>::type U;
  typedef typename iris_detail_bits<T>::signed_type I;
  return (I)((U)got - (U)target) >= 0;
}

/* One thread. Release-store value into to_rank's flag at scope S: this thread's
 * earlier writes (and, after a __syncthreads(), its block's) are visible to any thread
 * that acquires the flag and sees the value. */
template <iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE void iris_signal(const iris_device_ctx_t &ctx, T *flag, IRIS_DETAIL_V(T) value, int to_rank) {
  iris_atomic_store<IRIS_ORDER_RELEASE, S>(ctx, flag, value, to_rank);
}
/* One thread. Release-add inc to to_rank's flag (epochs, counters of arrivals);
 * returns the old value. */
template <iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE T iris_signal_add(const iris_device_ctx_t &ctx, T *flag, IRIS_DETAIL_V(T) inc, int to_rank) {
  return iris_atomic_add<IRIS_ORDER_RELEASE, S>(ctx, flag, inc, to_rank);
}
/* Relaxed variants: execution synchronisation only. They publish no data. */
template <iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE void iris_signal_relaxed(const iris_device_ctx_t &ctx, T *flag, IRIS_DETAIL_V(T) value, int to_rank) {
  iris_atomic_store<IRIS_ORDER_RELAXED, S>(ctx, flag, value, to_rank);
}
template <iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE T iris_signal_add_relaxed(const iris_device_ctx_t &ctx, T *flag, IRIS_DETAIL_V(T) inc, int to_rank) {
  return iris_atomic_add<IRIS_ORDER_RELAXED, S>(ctx, flag, inc, to_rank);
}

/* The bounded spin, the fault words and the wait loop behind the waits below. */
#include "internal/device/wait.h"

/* One thread. Spin until this rank's flag (a local heap address) satisfies
 * `flag cmp value`, then acquire at scope S: the writes the signalling side released
 * are visible. Returns false if IRIS_WAIT_TIMEOUT_NS passes first (IRIS_DEBUG: reports
 * `what`, the rank, block and thread, and traps). */
template <iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE bool iris_wait_until(const iris_device_ctx_t &ctx, const T *flag, iris_cmp_t cmp, IRIS_DETAIL_V(T) value, const char *what = "iris_wait_until") {
  return iris_detail_wait<IRIS_ORDER_ACQUIRE, S>(ctx, flag, cmp, value, what);
}
/* As iris_wait_until, without the acquire: execution synchronisation only. */
template <iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE bool iris_wait_until_relaxed(const iris_device_ctx_t &ctx, const T *flag, iris_cmp_t cmp, IRIS_DETAIL_V(T) value,
                                                const char *what = "iris_wait_until_relaxed") {
  return iris_detail_wait<IRIS_ORDER_RELAXED, S>(ctx, flag, cmp, value, what);
}

/* Whole block (every thread calls it, same arguments). Waits until every thread's
 * earlier writes are done (__syncthreads), then thread 0 release-stores value into
 * to_rank's flag at system scope. */
template <typename T>
IRIS_DEVICE_INLINE void iris_signal_block(const iris_device_ctx_t &ctx, T *flag, IRIS_DETAIL_V(T) value, int to_rank) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) iris_signal(ctx, flag, value, to_rank);
}
/* Whole block. Thread 0 waits (acquire, system scope) for the local flag, then the
 * block meets at __syncthreads, after which every thread may read the published
 * data. Returns false in every thread if the wait timed out. */
template <typename T>
IRIS_DEVICE_INLINE bool iris_wait_block(const iris_device_ctx_t &ctx, const T *flag, iris_cmp_t cmp, IRIS_DETAIL_V(T) value, const char *what = "iris_wait_block") {
  int ok = 1;
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) ok = iris_wait_until(ctx, flag, cmp, value, what) ? 1 : 0;
  return __syncthreads_and(ok) != 0;
}

/* ========================================================================= teams ==
 * A team (iris.h: iris_team_t, made by iris_team_get / iris_team_split on the host, passed
 * by value) numbers some of the world's ranks 0..team.size-1; these address a member by
 * that team rank and otherwise behave exactly as the functions above (same orders, scopes,
 * checks). The kernel also takes the world's device context (iris_device_context), which
 * maps the heaps. Rule 6 holds: a team used here lies within one node.
 *
 * Cooperation levels are types: iris_coop_thread (one thread), iris_coop_warp (every lane of
 * a converged warp: IRIS_WARP_SIZE lanes, 64 on AMD CDNA), iris_coop_block (every thread of
 * the block). A cooperative call is made by every participant with the same arguments.
 *
 * Waits name a member: iris_team_wait_until(ctx, team, flag, cmp, value, from_r) is
 * iris_wait_until whose fault (when the bound runs out) names the world rank of team rank
 * from_r; the team barrier names the member that never came.
 *
 * Team barrier: iris_team_barrier(iris_coop_block(), ctx, team, i) meets every member's
 * participants on barrier index i (0 .. IRIS_TEAM_BARRIERS - 1). Every write made before
 * it by any participant of any member is visible to every participant after it (release
 * / acquire at system scope). At most one participant set per rank uses an index at a
 * time (give each block its own index), and every member uses it the same number of
 * times. A session (iris_team_barrier_session<C>) keeps the index's epoch in registers
 * between several sync() calls: one signal and one wait per peer each. Returns false in
 * every participant if a wait ran out (the fault names the world rank missing) or the
 * context has a fatal fault, and, touching nothing, for an index outside [0,
 * IRIS_TEAM_BARRIERS) or a team without barrier words (team.sync NULL: a multi-node
 * world's host-only world and rail teams) or of more than IRIS_MAX_RANKS members
 * (IRIS_DEBUG: traps). A team of one meets only itself. */
#include "internal/device/team.h"

#endif /* IRIS_DEVICE_H */

/* The implementation (IRIS_IMPLEMENTATION), after the include guard as in iris.h: a unit
 * may include this header before it defines IRIS_IMPLEMENTATION. iris.h's, and with
 * IRIS_TRACE the reader of the kernels' timelines (iris_trace_read). */
#if defined(IRIS_IMPLEMENTATION) && !defined(IRIS_DEVICE_IMPLEMENTATION_DONE)
#define IRIS_DEVICE_IMPLEMENTATION_DONE
#include "iris.h"
#include "internal/device/trace_host.h"
#endif
