/* internal/device/team.h: the device API on teams (iris_device.h's team section): the
 * cooperation levels (types), peers addressed by team rank (translate, load/store, bulk,
 * atomics, signals), bounded waits that name the world rank of a missing member, and the
 * team barrier and its session.
 *
 * Part of iris_device.h (device code, included by it); not a public header. */
#ifndef IRIS_DEVICE_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_device.h"
#endif
#ifndef IRIS_INTERNAL_DEVICE_TEAM_H
#define IRIS_INTERNAL_DEVICE_TEAM_H
#include "../core/layout.h"
#include "platform.h"
#include "debug.h"
#include "wait.h"

/* ---- cooperation levels: who calls a cooperative operation together. Each is a type
 * with thread_rank() and size() (this thread's index among the participants, how many),
 * sync() (they meet; their memory operations before are ordered before those after) and
 * all(p) (they meet; true in every participant iff p was true in every one). */
struct iris_coop_thread { /* one thread alone */
  IRIS_DEVICE_INLINE int thread_rank() const { return 0; }
  IRIS_DEVICE_INLINE int size() const { return 1; }
  IRIS_DEVICE_INLINE void sync() const {}
  IRIS_DEVICE_INLINE bool all(bool p) const { return p; }
};
struct iris_coop_warp { /* every lane of one warp (IRIS_WARP_SIZE: 32 on NVIDIA, 64 on AMD CDNA), converged */
  IRIS_DEVICE_INLINE int thread_rank() const { return (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % IRIS_WARP_SIZE); }
  IRIS_DEVICE_INLINE int size() const { return IRIS_WARP_SIZE; }
  IRIS_DEVICE_INLINE void sync() const { iris_detail_warp_sync(); }
  /* the vote, then a warp barrier: a vote is not documented to order memory between lanes,
   * and after a barrier's waits a lane reads what another lane acquired */
  IRIS_DEVICE_INLINE bool all(bool p) const {
    const bool r = iris_detail_warp_all(p);
    iris_detail_warp_sync();
    return r;
  }
};
struct iris_coop_block { /* every thread of the block */
  IRIS_DEVICE_INLINE int thread_rank() const { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)); }
  IRIS_DEVICE_INLINE int size() const { return (int)(blockDim.x * blockDim.y * blockDim.z); }
  IRIS_DEVICE_INLINE void sync() const { __syncthreads(); }
  IRIS_DEVICE_INLINE bool all(bool p) const { return __syncthreads_and(p ? 1 : 0) != 0; }
};
template <typename C> struct iris_detail_is_coop { static const bool value = false; };
template <> struct iris_detail_is_coop<iris_coop_thread> { static const bool value = true; };
template <> struct iris_detail_is_coop<iris_coop_warp> { static const bool value = true; };
template <> struct iris_detail_is_coop<iris_coop_block> { static const bool value = true; };

/* ---- peers by team rank */
/* Member team_rank's index in the context's world (the rank iris_translate takes).
 * Requires 0 <= team_rank < team.size (IRIS_DEBUG: traps naming it; a rank past a split
 * team's members named a stale world[] entry, a valid world rank, so the world-rank check
 * of the access did not catch it). */
IRIS_DEVICE_INLINE int iris_team_peer(const iris_team_t &team, int team_rank) {
#if defined(IRIS_DEBUG)
  if (team_rank < 0 || team_rank >= team.size) {
    printf("iris: team rank %d outside [0, %d) (block %d, thread %d): a team operation addresses its members by team rank\n", team_rank, team.size,
           (int)blockIdx.x, (int)threadIdx.x);
    iris_detail_trap();
  }
#endif
  return iris_team_world_rank(&team, team_rank);
}
/* A fault word's peer: a world rank as a rank of this node (what the host decodes). */
IRIS_DEVICE_INLINE int iris_detail_team_fault_peer(const iris_device_ctx_t &ctx, int world_rank) { return world_rank - ctx.node * ctx.local_size; }

template <typename T>
IRIS_DEVICE_INLINE T *iris_team_translate(const iris_device_ctx_t &ctx, const iris_team_t &team, T *ptr, int team_rank) {
  return iris_translate(ctx, ptr, iris_team_peer(team, team_rank));
}
template <typename T>
IRIS_DEVICE_INLINE T iris_team_load(const iris_device_ctx_t &ctx, const iris_team_t &team, const T *ptr, int team_rank) {
  return iris_load(ctx, ptr, iris_team_peer(team, team_rank));
}
template <typename T>
IRIS_DEVICE_INLINE void iris_team_store(const iris_device_ctx_t &ctx, const iris_team_t &team, T *ptr, IRIS_DETAIL_V(T) value, int team_rank) {
  iris_store(ctx, ptr, (T)value, iris_team_peer(team, team_rank));
}
template <typename T>
IRIS_DEVICE_INLINE void iris_team_get(const iris_device_ctx_t &ctx, const iris_team_t &team, T *local_dst, const T *ptr, int team_rank) {
  iris_get(ctx, local_dst, ptr, iris_team_peer(team, team_rank));
}
template <typename T>
IRIS_DEVICE_INLINE void iris_team_put(const iris_device_ctx_t &ctx, const iris_team_t &team, T *ptr, const T *local_src, int team_rank) {
  iris_put(ctx, ptr, local_src, iris_team_peer(team, team_rank));
}
IRIS_DEVICE_INLINE void iris_team_get_bulk(const iris_device_ctx_t &ctx, const iris_team_t &team, void *local_dst, const void *ptr, size_t bytes, int team_rank, int tid,
                                           int nthreads) {
  iris_get_bulk(ctx, local_dst, ptr, bytes, iris_team_peer(team, team_rank), tid, nthreads);
}
IRIS_DEVICE_INLINE void iris_team_put_bulk(const iris_device_ctx_t &ctx, const iris_team_t &team, void *ptr, const void *local_src, size_t bytes, int team_rank, int tid,
                                           int nthreads) {
  iris_put_bulk(ctx, ptr, local_src, bytes, iris_team_peer(team, team_rank), tid, nthreads);
}

/* ---- atomics by team rank: iris_atomic_* on member team_rank's copy (same orders, scopes, results) */
#define IRIS_DETAIL_TEAM_RMW(NAME)                                                                                                          \
  template <iris_order_t O = IRIS_ORDER_ACQ_REL, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>                                              \
  IRIS_DEVICE_INLINE T iris_team_atomic_##NAME(const iris_device_ctx_t &ctx, const iris_team_t &team, T *ptr, IRIS_DETAIL_V(T) value, int team_rank) { \
    return iris_atomic_##NAME<O, S>(ctx, ptr, value, iris_team_peer(team, team_rank));                                                     \
  }
IRIS_DETAIL_TEAM_RMW(add)
IRIS_DETAIL_TEAM_RMW(sub)
IRIS_DETAIL_TEAM_RMW(and)
IRIS_DETAIL_TEAM_RMW(or)
IRIS_DETAIL_TEAM_RMW(xor)
IRIS_DETAIL_TEAM_RMW(min)
IRIS_DETAIL_TEAM_RMW(max)
IRIS_DETAIL_TEAM_RMW(xchg)
#undef IRIS_DETAIL_TEAM_RMW
template <iris_order_t O = IRIS_ORDER_ACQ_REL, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE T iris_team_atomic_cas(const iris_device_ctx_t &ctx, const iris_team_t &team, T *ptr, IRIS_DETAIL_V(T) expected, IRIS_DETAIL_V(T) desired,
                                          int team_rank) {
  return iris_atomic_cas<O, S>(ctx, ptr, expected, desired, iris_team_peer(team, team_rank));
}
template <iris_order_t O = IRIS_ORDER_ACQUIRE, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE T iris_team_atomic_load(const iris_device_ctx_t &ctx, const iris_team_t &team, const T *ptr, int team_rank) {
  return iris_atomic_load<O, S>(ctx, ptr, iris_team_peer(team, team_rank));
}
template <iris_order_t O = IRIS_ORDER_RELEASE, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE void iris_team_atomic_store(const iris_device_ctx_t &ctx, const iris_team_t &team, T *ptr, IRIS_DETAIL_V(T) value, int team_rank) {
  iris_atomic_store<O, S>(ctx, ptr, value, iris_team_peer(team, team_rank));
}

/* ---- signals by team rank. OP: what the signal does to member team_rank's flag, with
 * release order at scope S (this thread's earlier writes, and its block's after a
 * __syncthreads, are visible to whoever acquires the flag and sees the result). SET
 * returns 0; the others return the old value. */
typedef enum iris_signal_op { IRIS_SIGNAL_SET = 0, IRIS_SIGNAL_ADD, IRIS_SIGNAL_OR, IRIS_SIGNAL_XOR } iris_signal_op_t;
/* One operation per specialisation, so that only OP's atomic is instantiated: SET and ADD
 * take every type iris_atomic_store / iris_atomic_add take (float and double too), OR and
 * XOR integers (a branch per OP in one body instantiated all four, and a float flag failed
 * to compile in iris_atomic_or's static_assert even for SET). */
template <iris_signal_op_t OP> struct iris_detail_team_signal;
template <> struct iris_detail_team_signal<IRIS_SIGNAL_SET> {
  template <iris_scope_t S, typename T> static IRIS_DEVICE_INLINE T apply(const iris_device_ctx_t &ctx, T *flag, T value, int to) {
    iris_atomic_store<IRIS_ORDER_RELEASE, S>(ctx, flag, value, to);
    return (T)0;
  }
};
template <> struct iris_detail_team_signal<IRIS_SIGNAL_ADD> {
  template <iris_scope_t S, typename T> static IRIS_DEVICE_INLINE T apply(const iris_device_ctx_t &ctx, T *flag, T value, int to) {
    return iris_atomic_add<IRIS_ORDER_RELEASE, S>(ctx, flag, value, to);
  }
};
template <> struct iris_detail_team_signal<IRIS_SIGNAL_OR> {
  template <iris_scope_t S, typename T> static IRIS_DEVICE_INLINE T apply(const iris_device_ctx_t &ctx, T *flag, T value, int to) {
    return iris_atomic_or<IRIS_ORDER_RELEASE, S>(ctx, flag, value, to);
  }
};
template <> struct iris_detail_team_signal<IRIS_SIGNAL_XOR> {
  template <iris_scope_t S, typename T> static IRIS_DEVICE_INLINE T apply(const iris_device_ctx_t &ctx, T *flag, T value, int to) {
    return iris_atomic_xor<IRIS_ORDER_RELEASE, S>(ctx, flag, value, to);
  }
};
template <iris_signal_op_t OP, iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE T iris_team_signal_op(const iris_device_ctx_t &ctx, const iris_team_t &team, T *flag, IRIS_DETAIL_V(T) value, int team_rank) {
  static_assert(OP == IRIS_SIGNAL_SET || OP == IRIS_SIGNAL_ADD || OP == IRIS_SIGNAL_OR || OP == IRIS_SIGNAL_XOR, "iris_team_signal_op: SET, ADD, OR or XOR");
  return iris_detail_team_signal<OP>::template apply<S, T>(ctx, flag, (T)value, iris_team_peer(team, team_rank));
}
template <iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE void iris_team_signal(const iris_device_ctx_t &ctx, const iris_team_t &team, T *flag, IRIS_DETAIL_V(T) value, int team_rank) {
  iris_team_signal_op<IRIS_SIGNAL_SET, S>(ctx, team, flag, value, team_rank);
}
template <iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE T iris_team_signal_add(const iris_device_ctx_t &ctx, const iris_team_t &team, T *flag, IRIS_DETAIL_V(T) inc, int team_rank) {
  return iris_team_signal_op<IRIS_SIGNAL_ADD, S>(ctx, team, flag, inc, team_rank);
}

/* One thread. As iris_wait_until (acquire at scope S, bounded), for a flag that member
 * from_rank of team raises: a wait that runs out records a fault naming that member's
 * world rank (from_rank < 0: no one in particular). */
template <iris_scope_t S = IRIS_SCOPE_SYSTEM, typename T>
IRIS_DEVICE_INLINE bool iris_team_wait_until(const iris_device_ctx_t &ctx, const iris_team_t &team, const T *flag, iris_cmp_t cmp, IRIS_DETAIL_V(T) value,
                                             int from_rank, const char *what = "iris_team_wait_until") {
  const int peer = from_rank >= 0 && from_rank < team.size ? iris_team_peer(team, from_rank) : -1;
  iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
  T got = 0;
  IRIS_DETAIL_CHECK(ctx, flag, sizeof(T), ctx.rank, what);
  IRIS_DETAIL_CHECK_CMP(ctx, cmp, what);
  for (;;) {
#if IRIS_DEVICE_POLL_CONFIRM
    got = iris_atomic_load<IRIS_ORDER_RELAXED, S>(flag);
    if (iris_detail_compare(got, cmp, (T)value)) {
      got = iris_atomic_load<IRIS_ORDER_ACQUIRE, S>(flag);
      if (iris_detail_compare(got, cmp, (T)value)) return true;
    }
#else
    got = iris_atomic_load<IRIS_ORDER_ACQUIRE, S>(flag);
    if (iris_detail_compare(got, cmp, (T)value)) return true;
#endif
    if (iris_detail_wait_expired(ctx, spin, peer >= 0 ? iris_detail_team_fault_peer(ctx, peer) : 0xff, IRIS_SITE_USER, 0)) break;
  }
#if defined(IRIS_DEBUG)
  printf("iris: wait '%s' timed out on rank %d (block %d, thread %d): world rank %d (team rank %d) never raised flag %p (it holds %llu)\n", what, ctx.rank,
         (int)blockIdx.x, (int)threadIdx.x, peer, from_rank, (const void *)flag, (unsigned long long)got);
  iris_detail_trap();
#endif
  (void)what;
  (void)got;
  return false;
}

/* ---- the team barrier. Barrier `index` (0 .. IRIS_TEAM_BARRIERS - 1) of a team is one
 * meeting point: at any time at most one participant set (of the level C) per rank may use
 * it, and every member's uses of it pair up in order. A session keeps the index's epoch in
 * registers from its start to its end, so each sync() costs one signal to and one wait for
 * each peer: the participants meet (C's sync), then they release-store the new epoch into
 * every peer's word of this rank (system scope, one thread per peer), and acquire-wait
 * until every peer's word in this rank's copy has reached it; then they meet again.
 * Everything any participant wrote before sync() on any rank is visible to every
 * participant of every member after it. Every wait is bounded: sync() returns false in
 * every participant when one ran out (the fault names the world rank of the member that
 * never came) or the context has a fatal fault. Epochs count up and are never reset, so
 * graphs replay. */
template <typename C>
struct iris_team_barrier_session {
  static_assert(iris_detail_is_coop<C>::value, "iris_team_barrier_session<C>: C is a cooperation level (iris_coop_thread, iris_coop_warp, iris_coop_block)");
  const iris_device_ctx_t &ctx;
  const iris_team_t &team;
  C coop;
  int index;
  unsigned long long epoch;
  /* Every participant: starts a session on barrier `index`. An index outside [0,
   * IRIS_TEAM_BARRIERS), a team with no barrier area (sync NULL: the host-only rail and
   * world teams of a multi-node world, whose members on other nodes the heap does not map)
   * or one larger than a barrier row (IRIS_MAX_RANKS: no team the host hands out) touches
   * nothing: its sync() returns false (IRIS_DEBUG: traps), as its words would be another
   * barrier's or another team's, or none. */
  IRIS_DEVICE_INLINE iris_team_barrier_session(C c, const iris_device_ctx_t &x, const iris_team_t &t, int i) : ctx(x), team(t), coop(c), index(i) {
    const iris_detail_team_area_t *a = (const iris_detail_team_area_t *)(const void *)team.sync;
    epoch = team.size > 1 && valid() ? iris_atomic_load<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(&a->epoch[index]) : 0ULL;
  }
  /* Every participant: ends it (the epoch goes back to the heap for the next session). */
  IRIS_DEVICE_INLINE ~iris_team_barrier_session() {
    iris_detail_team_area_t *a = (iris_detail_team_area_t *)(void *)team.sync;
    if (team.size > 1 && valid() && coop.thread_rank() == 0) iris_atomic_store<IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE>(&a->epoch[index], epoch);
    coop.sync();
  }
  IRIS_DEVICE_INLINE bool valid() const {
    return (unsigned)index < (unsigned)IRIS_TEAM_BARRIERS && team.size <= IRIS_MAX_RANKS && (team.sync != NULL || team.size <= 1);
  }
  /* Every participant: one barrier over the team. */
  IRIS_DEVICE_INLINE bool sync() {
    const int me = team.rank, n = team.size, tid = coop.thread_rank(), nt = coop.size();
    iris_detail_team_area_t *a = (iris_detail_team_area_t *)(void *)team.sync;
    bool ok = true;
    if (!valid()) {
#if defined(IRIS_DEBUG)
      printf("iris: team barrier index %d on rank %d (block %d, thread %d): outside [0, %d), or a team without a barrier area (host-only: a multi-node world's world "
             "or rail team), or of more than %d members\n", index, ctx.rank, (int)blockIdx.x, (int)threadIdx.x, IRIS_TEAM_BARRIERS, IRIS_MAX_RANKS);
      iris_detail_trap();
#endif
      return coop.all(false);
    }
    if (n <= 1) return coop.all(true);
    epoch += 1;
    coop.sync();
    for (int p = tid; p < n; p += nt)
      if (p != me) iris_atomic_store<IRIS_ORDER_RELEASE, IRIS_SCOPE_SYSTEM>(ctx, &a->bar[index][me], epoch, iris_team_peer(team, p));
    for (int p = tid; p < n && ok; p += nt) {
      iris_detail_spin_t spin = IRIS_DETAIL_SPIN_INIT;
      if (p == me) continue;
      for (;;) {
        if (iris_epoch_reached(iris_atomic_load<IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM>(&a->bar[index][p]), epoch)) break;
        if (iris_detail_wait_expired(ctx, spin, iris_detail_team_fault_peer(ctx, iris_team_peer(team, p)), IRIS_FAULT_SITE_MAKE(0, IRIS_SITE_BARRIER), 0)) {
          ok = false;
          break;
        }
      }
#if defined(IRIS_DEBUG)
      if (!ok) {
        printf("iris: team barrier %d timed out on rank %d (block %d, thread %d): world rank %d (team rank %d) never reached epoch %llu\n", index, ctx.rank,
               (int)blockIdx.x, (int)threadIdx.x, iris_team_peer(team, p), p, epoch);
        iris_detail_trap();
      }
#endif
    }
    return coop.all(ok);
  }
};
/* Every participant of C: one barrier over the team on `index` (a session of one sync). */
template <typename C>
IRIS_DEVICE_INLINE bool iris_team_barrier(C coop, const iris_device_ctx_t &ctx, const iris_team_t &team, int index = 0) {
  iris_team_barrier_session<C> s(coop, ctx, team, index);
  return s.sync();
}

#endif /* IRIS_INTERNAL_DEVICE_TEAM_H */
