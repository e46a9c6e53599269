/* internal/core/team.h: teams on the host: the context's team table (IRIS_TEAM_MAX slots of
 * barrier and exchange words on the heap, a pool of collective states, the teams' fault
 * words), the predefined teams, the splits (MPI's color/key, NVSHMEM's strided and 2-D),
 * the members' exchange over the heap, destroy, iris_team_check, and what
 * iris_collectives.h asks of a team (its collective area, call order, faults).
 *
 * Slots. Every rank keeps its own bitmap of the slots its live teams hold. A split takes
 * the lowest slot free on every member of the parent (their bitmaps travel with the
 * split's exchange), so the members of a new team agree on its slot, and a rank never
 * holds one slot twice. All teams of one split share the slot: their members are
 * disjoint, so no word is written by two teams. The same rule hands out the collective
 * states. Nothing is allocated after the table: the heap stays alike on every rank.
 *
 * Part of iris's implementation, included by iris.h under IRIS_IMPLEMENTATION (inside its
 * extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_TEAM_H
#define IRIS_INTERNAL_CORE_TEAM_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"
#include "status.h"
#include "util.h"
#include "context.h"
#include "faults.h"
#include "stream_order.h"

/* ---- the collective area of a team (iris_collectives.h lays its state out in it and
 * checks these sizes against its own at compile time: internal/coll/team.h). Per rank:
 * the control block | the LL lines (2 parities x W sources) | the two-shot LL lines
 * (2 parities x 2 phases x W) | the store two-shot's scratch; W = ranks per node. */
#ifdef IRIS_COLL_MAX_CTAS
#define IRIS_DETAIL_TEAM_CTAS IRIS_COLL_MAX_CTAS
#else
#define IRIS_DETAIL_TEAM_CTAS 256
#endif
#ifdef IRIS_COLL_LL_BYTES
#define IRIS_DETAIL_TEAM_LL IRIS_COLL_LL_BYTES
#else
#define IRIS_DETAIL_TEAM_LL ((size_t)512 << 10)
#endif
#ifdef IRIS_COLL_LL2_BYTES
#define IRIS_DETAIL_TEAM_LL2 IRIS_COLL_LL2_BYTES
#else
#define IRIS_DETAIL_TEAM_LL2 ((size_t)512 << 10)
#endif
#ifdef IRIS_COLL_AR_SCRATCH_BYTES
#define IRIS_DETAIL_TEAM_SCRATCH IRIS_COLL_AR_SCRATCH_BYTES
#else
#define IRIS_DETAIL_TEAM_SCRATCH ((size_t)32 << 20)
#endif
#define IRIS_DETAIL_TEAM_CTL_BYTES ((((size_t)2 * IRIS_DETAIL_TEAM_CTAS * IRIS_MAX_RANKS + 2 * IRIS_MAX_RANKS) * 8 + 256 + 255) / 256 * 256)
#define IRIS_DETAIL_TEAM_LL_BYTES(W) ((size_t)2 * (size_t)(W) * (IRIS_DETAIL_TEAM_LL / 8) * 16)
#define IRIS_DETAIL_TEAM_LL2_BYTES(W) ((size_t)4 * (size_t)(W) * (IRIS_DETAIL_TEAM_LL2 / 8) * 16)
#define IRIS_DETAIL_TEAM_COLL_BYTES(W) (IRIS_DETAIL_TEAM_CTL_BYTES + IRIS_DETAIL_TEAM_LL_BYTES(W) + IRIS_DETAIL_TEAM_LL2_BYTES(W) + IRIS_DETAIL_TEAM_SCRATCH)
#define IRIS_DETAIL_TEAMS_COLL_DEFAULT 2 /* IRIS_TEAMS_COLL: collective states in the pool */
#define IRIS_DETAIL_TEAMS_COLL_MAX 32

/* A team's grid rule: every member sizes its collectives' grids by these, so that every
 * member launches the same grid (a grid is in each call's signature). sms: the fewest SMs
 * among the members (at least 1). ctas: their IRIS_COLL_CTAS, alike on every member, else
 * IRIS_DETAIL_TEAM_CTAS_MALFORMED (world rank bad_rank's could not be read) or
 * IRIS_DETAIL_TEAM_CTAS_DIFFER (world rank bad_rank has `theirs`, member 0 `first`): the
 * team's collectives then refuse on every member alike (iris_detail_team_lookup). */
enum { IRIS_DETAIL_TEAM_CTAS_MALFORMED = -1, IRIS_DETAIL_TEAM_CTAS_DIFFER = -2 };
typedef struct iris_detail_team_grid {
  int sms, ctas, bad_rank, first, theirs;
} iris_detail_team_grid_t;

/* The table, one per context (ctx->teams). */
typedef struct iris_detail_teams {
  char *area;                    /* heap: IRIS_TEAM_MAX slots of iris_detail_team_area_t */
  char *coll;                    /* heap: coll_slots collective areas of coll_bytes; NULL: none */
  size_t coll_bytes;
  int coll_slots;
  unsigned long long used;       /* bit s: a live team of this rank holds slot s */
  unsigned coll_used;            /* bit c: a live team of this rank holds collective state c */
  unsigned long long *fault_host, *fault_dev; /* IRIS_TEAM_MAX x IRIS_FAULT_WORDS, pinned and mapped */
  iris_stream_t meet;            /* a non-blocking stream of its own for the meetings' copies (NULL: none yet) */
  int meet_made;
  unsigned seq[IRIS_TEAM_MAX];   /* exchanges so far on the slot's team */
  unsigned char broken[IRIS_TEAM_MAX]; /* a meeting of the slot's team failed on this rank: its members' counts may differ, it meets no more */
  unsigned long long next_serial;
  iris_team_t team[IRIS_TEAM_MAX];           /* the live team of each slot */
  iris_detail_team_grid_t grid[IRIS_TEAM_MAX]; /* the slot's team's grid rule, agreed at its split (iris_detail_team_plan) */
  void *coll_state[IRIS_TEAM_MAX];           /* iris_collectives.h's state of the slot's team (malloc'd; freed here) */
  iris_gpu_event_t order_eager[IRIS_TEAM_MAX], order_cap[IRIS_TEAM_MAX]; /* the call order of the slot's team */
  unsigned char order_made[IRIS_TEAM_MAX], order_have_eager[IRIS_TEAM_MAX];
  iris_stream_t order_eager_stream[IRIS_TEAM_MAX], order_cap_stream[IRIS_TEAM_MAX];
  unsigned long long order_cap_id[IRIS_TEAM_MAX];
} iris_detail_teams_t;

/* ---- planning a split: pure arithmetic on the members' records (unit-tested on the host) */
typedef struct iris_detail_team_rec {
  int color, key;
  unsigned long long free_slots; /* the slots free on that rank */
  unsigned free_coll;            /* the collective states free on that rank */
  int sms;                       /* its GPU's SMs (0: unknown) */
  int ctas;                      /* its IRIS_COLL_CTAS: 0 unset, 1..IRIS_DETAIL_TEAM_CTAS; IRIS_DETAIL_TEAM_CTAS_MALFORMED */
} iris_detail_team_rec_t;
typedef struct iris_detail_team_plan {
  int slot, coll; /* the new teams' slot (-1: no team is formed) and collective state (-1: none) */
  int size, rank; /* this rank's new team (0, -1 when it opted out) */
  int world[IRIS_MAX_RANKS];
  iris_detail_team_grid_t grid; /* this rank's new team's grid rule (its members' records only) */
} iris_detail_team_plan_t;
/* recs[i]: parent rank i's record; parent_world[i]: its world rank; me: this rank's parent
 * rank. Every member computes the same slot, collective state and error, and every member
 * of a new team the same grid rule. Nodes: world ranks r and q are on one node iff r /
 * local_size == q / local_size (nodes > 1 only). */
IRIS_INTERNAL iris_status_t iris_detail_team_plan(const iris_detail_team_rec_t *recs, const int *parent_world, int n, int me, int local_size, int nodes,
                                                  iris_detail_team_plan_t *out) {
  unsigned long long slots = ~0ULL;
  unsigned coll = ~0u;
  int i, j, any = 0;
  memset(out, 0, sizeof *out);
  out->slot = out->coll = out->rank = -1;
  for (i = 0; i < n; i++) {
    slots &= recs[i].free_slots;
    coll &= recs[i].free_coll;
    if (recs[i].color < 0) continue;
    any = 1;
    if (nodes > 1)
      for (j = 0; j < i; j++)
        if (recs[j].color == recs[i].color && parent_world[j] / local_size != parent_world[i] / local_size)
          return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_team_split: color %d joins world ranks %d and %d of different nodes: a team lies within one node "
                                  "(the heap is mapped among a node's ranks)", recs[i].color, parent_world[j], parent_world[i]);
  }
  if (!any) return IRIS_SUCCESS;
  for (i = 0; i < IRIS_TEAM_MAX; i++)
    if (slots >> i & 1) break;
  if (i == IRIS_TEAM_MAX)
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "iris_team_split: no team slot is free on every member of the parent (IRIS_TEAM_MAX %d): destroy a team",
                            IRIS_TEAM_MAX);
  out->slot = i;
  for (i = 0; i < IRIS_DETAIL_TEAMS_COLL_MAX; i++)
    if (coll >> i & 1) break;
  out->coll = i < IRIS_DETAIL_TEAMS_COLL_MAX ? i : -1;
  if (recs[me].color < 0) return IRIS_SUCCESS;
  /* my color's members, ordered by (key, parent rank): an insertion sort over parent
   * ranks in order, which keeps equal keys in parent-rank order */
  {
    int keys[IRIS_MAX_RANKS];
    for (i = 0; i < n; i++) {
      int at;
      if (recs[i].color != recs[me].color) continue;
      if (out->size == IRIS_MAX_RANKS)
        return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_team_split: a team of more than IRIS_MAX_RANKS (%d) ranks", IRIS_MAX_RANKS);
      for (at = out->size; at > 0 && keys[at - 1] > recs[i].key; at--) {
        keys[at] = keys[at - 1];
        out->world[at] = out->world[at - 1];
      }
      keys[at] = recs[i].key;
      out->world[at] = parent_world[i];
      out->size++;
    }
  }
  for (i = 0; i < out->size; i++)
    if (out->world[i] == parent_world[me]) out->rank = i;
  { /* the grid rule over my color's members: the fewest SMs; IRIS_COLL_CTAS alike (member
     * 0's the reference), the first malformed one (in parent order) named before a difference */
    int first = 0;
    for (i = 0; i < n; i++)
      if (recs[i].color == recs[me].color && parent_world[i] == out->world[0]) first = i;
    out->grid.ctas = out->grid.first = recs[first].ctas;
    out->grid.bad_rank = -1;
    for (i = 0; i < n; i++) {
      if (recs[i].color != recs[me].color) continue;
      if (recs[i].sms > 0 && (out->grid.sms == 0 || recs[i].sms < out->grid.sms)) out->grid.sms = recs[i].sms;
      if (recs[i].ctas < 0 && out->grid.bad_rank < 0) {
        out->grid.ctas = IRIS_DETAIL_TEAM_CTAS_MALFORMED;
        out->grid.bad_rank = parent_world[i];
      }
    }
    for (i = 0; i < n && out->grid.bad_rank < 0; i++)
      if (recs[i].color == recs[me].color && recs[i].ctas != out->grid.first) {
        out->grid.ctas = IRIS_DETAIL_TEAM_CTAS_DIFFER;
        out->grid.bad_rank = parent_world[i];
        out->grid.theirs = recs[i].ctas;
      }
    if (out->grid.sms == 0) out->grid.sms = 1; /* as the world's rule: at least one SM */
  }
  return IRIS_SUCCESS;
}
/* Fills team's member description from world[0..size): the stride form when the members
 * are an arithmetic progression (a team of one: stride 1), else the table (stride 0). */
IRIS_INTERNAL void iris_detail_team_members(iris_team_t *t, const int *world, int size) {
  int i, arith = size >= 1;
  for (i = 0; i < size && i < IRIS_MAX_RANKS; i++) t->world[i] = world[i];
  t->size = size;
  if (size >= 2 && world[1] - world[0] > 0) {
    for (i = 2; i < size; i++)
      if (world[i] - world[i - 1] != world[1] - world[0]) arith = 0;
  } else if (size >= 2) {
    arith = 0;
  }
  t->start = size >= 1 ? world[0] : 0;
  t->stride = arith ? (size >= 2 ? world[1] - world[0] : 1) : 0;
}

/* ---- the table */
IRIS_INTERNAL iris_detail_team_area_t *iris_detail_team_area(const iris_detail_teams_t *T, int slot) {
  return (iris_detail_team_area_t *)(T->area + (size_t)slot * sizeof(iris_detail_team_area_t));
}
/* The barrier words a slot's team carries (iris_team_t.sync): the slot's area, but none for
 * the world team of a multi-node world, which is host-only: its members on other nodes
 * are not in the heap's mapping, so a barrier on it would signal through no mapping. With
 * sync NULL the device API refuses it (iris_device.h: the barrier returns false, touching
 * nothing); its host calls (splits, collectives, check) go through the world's exchange. */
IRIS_INTERNAL unsigned long long *iris_detail_team_sync(const iris_t *ctx, const iris_detail_teams_t *T, int slot) {
  return slot == 0 && ctx->nodes > 1 ? NULL : (unsigned long long *)(void *)iris_detail_team_area(T, slot);
}
/* Whether a team handle is a live team of ctx with this rank a member (so it may be used). */
IRIS_INTERNAL iris_status_t iris_detail_team_valid(const iris_t *ctx, const iris_team_t *t, const char *call) {
  const iris_detail_teams_t *T = ctx->teams;
  if (!t) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL team", call);
  if (t->rank < 0 || t->size < 1 || t->rank >= t->size)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: rank %d is not a member of the team (size %d, team rank %d)", call, iris_rank(ctx), t->size, t->rank);
  if (t->slot < 0) return IRIS_SUCCESS; /* the rail team, a team of one: no slot */
  /* the serial counts this context's splits (another context making the same splits hands
   * out the same serials); the slot's words are this context's heap */
  if (!T || t->slot >= IRIS_TEAM_MAX || !(T->used >> t->slot & 1) || T->team[t->slot].serial != t->serial ||
      t->sync != iris_detail_team_sync(ctx, T, t->slot))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: rank %d: the team is not live in this context (destroyed, or of another context)", call, iris_rank(ctx));
  return IRIS_SUCCESS;
}
/* The wait bound of team t's collectives (its BOUND fault word): the context's as set up,
 * or IRIS_DETAIL_BOUND_GONE once the peer watch has seen a member's process end (a team
 * whose members all live keeps its bound: its calls need no other rank). */
IRIS_INTERNAL unsigned long long iris_detail_team_bound(const iris_t *ctx, const iris_team_t *t) {
  const int g = __atomic_load_n(&ctx->gone, __ATOMIC_ACQUIRE);
  if (g > 0 && iris_team_rank_of(t, (ctx->nodes > 1 ? ctx->node * ctx->local_size : 0) + g - 1) >= 0) return IRIS_DETAIL_BOUND_GONE;
  return ctx->wait_bound_ns;
}
/* Binds slot s (and collective state c >= 0) to team t in table T: the bookkeeping of a
 * take, which cannot fail (the table's setup binds the predefined teams before it
 * publishes the table, so a table is never seen half made). Under the fault lock, as
 * iris_detail_team_drop: a watchdog's iris_get_async_error reads the table's teams
 * (IRIS_DETAIL_TEAMS_POLL) while this thread splits or destroys. */
IRIS_INTERNAL void iris_detail_team_bind(const iris_t *ctx, iris_detail_teams_t *T, iris_team_t *t, int s, int c) {
  unsigned long long *f = T->fault_host + (size_t)s * IRIS_FAULT_WORDS;
  pthread_mutex_lock(&iris_detail_fault_lock);
  __atomic_store_n(f + IRIS_FAULT_WORD_FATAL, 0ULL, __ATOMIC_RELEASE);
  __atomic_store_n(f + IRIS_FAULT_WORD_MISMATCH, 0ULL, __ATOMIC_RELEASE);
  f[IRIS_FAULT_WORD_BOUND] = iris_detail_team_bound(ctx, t);
  T->used |= 1ULL << s;
  if (c >= 0) T->coll_used |= 1u << c;
  T->seq[s] = 0;
  T->broken[s] = 0;
  free(T->coll_state[s]);
  T->coll_state[s] = NULL;
  t->slot = s;
  t->coll = c;
  t->sync = iris_detail_team_sync(ctx, T, s);
  t->fault = T->fault_dev + (size_t)s * IRIS_FAULT_WORDS;
  t->serial = ++T->next_serial;
  T->team[s] = *t;
  pthread_mutex_unlock(&iris_detail_fault_lock);
}
/* Takes slot s (and collective state c >= 0) for team t on this rank (a split, before
 * its members meet again): zeroes their words, then binds them, with the grid rule its
 * members agreed on. Only a split takes: the table's setup zeroed the whole table before
 * the world's meeting and only binds slots 0 and 1 (zeroing them after it would erase a
 * barrier signal a faster rank has already sent into them). */
IRIS_INTERNAL iris_status_t iris_detail_team_take(iris_t *ctx, iris_team_t *t, int s, int c, const iris_detail_team_grid_t *grid) {
  iris_detail_teams_t *T = ctx->teams;
  iris_gpu_error_t e;
  int old = -1;
  iris_gpu_get_device(&old);
  e = iris_gpu_set_device(ctx->device);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_memset(iris_detail_team_area(T, s), 0, sizeof(iris_detail_team_area_t));
  if (e == IRIS_GPU_SUCCESS && c >= 0) e = iris_gpu_memset(T->coll + (size_t)c * T->coll_bytes, 0, T->coll_bytes - IRIS_DETAIL_TEAM_SCRATCH);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
  if (old >= 0) iris_gpu_set_device(old);
  if (e != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(iris_rank(ctx), "zeroing a team's words", e);
  iris_detail_team_bind(ctx, T, t, s, c);
  T->grid[s] = *grid;
  return IRIS_SUCCESS;
}
IRIS_INTERNAL void iris_detail_team_drop(iris_detail_teams_t *T, int s) {
  if (s < 0 || s >= IRIS_TEAM_MAX) return;
  pthread_mutex_lock(&iris_detail_fault_lock);
  if (T->team[s].coll >= 0) T->coll_used &= ~(1u << T->team[s].coll);
  T->used &= ~(1ULL << s);
  free(T->coll_state[s]);
  T->coll_state[s] = NULL;
  memset(&T->team[s], 0, sizeof T->team[s]);
  T->team[s].slot = T->team[s].coll = -1;
  pthread_mutex_unlock(&iris_detail_fault_lock);
}

/* What faults.h and setup.h ask of the table (ctx->teams_op). POLL: a team's fatal fault
 * (its peer a team rank) becomes the context's (the peer as a rank of this node), so every
 * call of the context reports it; then the context's fatal fault (the world's, another
 * team's, iris_abort's) is copied into every live team's fatal word, so that the team
 * collectives already queued give up at their next check, as the world's do (their
 * kernels read the team's words only). ABORT: every team's collectives stop waiting; FREE:
 * the table's host memory (its heap blocks go with the heap); GONE: the peer watch saw a
 * process of this node end: the teams it was a member of get the lowered bound. */
IRIS_INTERNAL unsigned long long iris_detail_team_fault_to_ctx(const iris_t *ctx, const iris_team_t *t, unsigned long long f) {
  unsigned peer = IRIS_FAULT_PEER(f);
  if (peer < (unsigned)t->size && peer < IRIS_MAX_RANKS) {
    int w = iris_team_world_rank(t, (int)peer), first = ctx->nodes > 1 ? ctx->node * ctx->local_size : 0;
    peer = w - first >= 0 && w - first < ctx->local_size ? (unsigned)(w - first) : 0xffu;
  } else {
    peer = 0xffu;
  }
  return IRIS_FAULT_MAKE(IRIS_FAULT_KIND(f), peer, IRIS_FAULT_SITE(f), IRIS_FAULT_CALL(f));
}
IRIS_INTERNAL void iris_detail_teams_op(iris_t *ctx, int op) {
  iris_detail_teams_t *T = ctx->teams;
  unsigned long long f0;
  int s;
  if (!T) return;
  if (op == IRIS_DETAIL_TEAMS_FREE) {
    for (s = 0; s < IRIS_TEAM_MAX; s++) {
      free(T->coll_state[s]);
      if (T->order_made[s]) {
        iris_gpu_event_destroy(T->order_eager[s]);
        iris_gpu_event_destroy(T->order_cap[s]);
      }
    }
    if (T->fault_host) iris_gpu_host_free(T->fault_host);
    if (T->meet_made) iris_gpu_stream_destroy(T->meet);
    free(T);
    ctx->teams = NULL;
    ctx->teams_op = NULL;
    return;
  }
  for (s = 0; s < IRIS_TEAM_MAX; s++) {
    unsigned long long *f = T->fault_host + (size_t)s * IRIS_FAULT_WORDS, zero = 0, w;
    if (!(T->used >> s & 1)) continue;
    if (op == IRIS_DETAIL_TEAMS_ABORT) {
      __atomic_compare_exchange_n(f + IRIS_FAULT_WORD_FATAL, &zero, IRIS_FAULT_MAKE(IRIS_FAULT_ABORT, 0xff, 0, 0), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    } else if (op == IRIS_DETAIL_TEAMS_GONE) {
      __atomic_store_n(f + IRIS_FAULT_WORD_BOUND, iris_detail_team_bound(ctx, &T->team[s]), __ATOMIC_RELEASE);
    } else if ((w = __atomic_load_n(f + IRIS_FAULT_WORD_FATAL, __ATOMIC_ACQUIRE)) != 0 && ctx->fault_host) {
      zero = 0;
      w = iris_detail_team_fault_to_ctx(ctx, &T->team[s], w);
      __atomic_compare_exchange_n(ctx->fault_host + IRIS_FAULT_WORD_FATAL, &zero, w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
  }
  if (op == IRIS_DETAIL_TEAMS_POLL && ctx->fault_host && (f0 = __atomic_load_n(ctx->fault_host + IRIS_FAULT_WORD_FATAL, __ATOMIC_ACQUIRE)) != 0) {
    /* the context's peer is a rank of this node, a team's a team rank: "a peer" (0xff) in the
     * copy (the host reports the context's word, which names the rank, before any team's) */
    const unsigned long long tw = IRIS_FAULT_MAKE(IRIS_FAULT_KIND(f0), 0xffu, IRIS_FAULT_SITE(f0), IRIS_FAULT_CALL(f0));
    for (s = 0; s < IRIS_TEAM_MAX; s++) {
      unsigned long long zero = 0;
      if (T->used >> s & 1)
        __atomic_compare_exchange_n(T->fault_host + (size_t)s * IRIS_FAULT_WORDS + IRIS_FAULT_WORD_FATAL, &zero, tw, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
  }
}

/* The table's predefined teams, bound after the world's meeting of its setup: slot 0 the
 * world, slot 1 (multi-node worlds) the node. Their words were zeroed before the meeting (a
 * peer past it may already have signalled into them): bound only, and the table published
 * whole after, so nothing after the meeting can fail and leave a half-made table behind.
 * Host memory only (unit-tested on the host). */
IRIS_INTERNAL void iris_detail_teams_bind_predefined(iris_t *ctx, iris_detail_teams_t *T) {
  iris_team_t t;
  int s, r;
  for (s = 0; s < IRIS_TEAM_MAX; s++) {
    T->team[s].slot = T->team[s].coll = -1;
    T->fault_host[(size_t)s * IRIS_FAULT_WORDS + IRIS_FAULT_WORD_BOUND] = ctx->wait_bound_ns; /* a bound team's: iris_detail_team_bound */
  }
  memset(&t, 0, sizeof t);
  t.rank = iris_rank(ctx);
  t.size = iris_world_size(ctx);
  t.start = 0;
  t.stride = 1;
  for (r = 0; r < t.size && r < IRIS_MAX_RANKS; r++) t.world[r] = r;
  iris_detail_team_bind(ctx, T, &t, 0, -1); /* (its sync NULL in a multi-node world: iris_detail_team_sync) */
  T->team[0].fault = ctx->fault_dev;         /* the world's collectives are the context's */
  if (ctx->nodes > 1) {
    int w[IRIS_MAX_RANKS];
    for (r = 0; r < ctx->local_size; r++) w[r] = ctx->node * ctx->local_size + r;
    memset(&t, 0, sizeof t);
    t.rank = ctx->local_rank;
    iris_detail_team_members(&t, w, ctx->local_size);
    iris_detail_team_bind(ctx, T, &t, 1, -1);
  }
}

/* A test's hook between the world's meeting of the table's setup and the takes of the
 * predefined teams (tests/team_test.cu first-call delays one rank there); nothing by default. */
#ifndef IRIS_DETAIL_TEAMS_SETUP_AFTER_MEET
#define IRIS_DETAIL_TEAMS_SETUP_AFTER_MEET(ctx) ((void)0)
#endif
/* Collective over the world, once: the table on the heap (every rank allocates alike),
 * the teams' fault words, the world team in slot 0 and, in a multi-node world, the node
 * team in slot 1. The pool of collective states takes IRIS_TEAMS_COLL (default 2) areas
 * of IRIS_DETAIL_TEAM_COLL_BYTES(ranks per node); a heap too small for them leaves the
 * pool empty on every rank alike (teams' host collectives then report it). The ranks
 * agree on IRIS_TEAMS_COLL (the pool is a heap block: a count that differs would leave
 * every later allocation at another offset on each rank); a malformed value fails every
 * rank at the meeting, not this rank alone. */
IRIS_INTERNAL iris_status_t iris_detail_teams_setup(iris_t *ctx) {
  iris_detail_teams_t *T;
  iris_status_t st, bad = IRIS_SUCCESS;
  int ncoll = IRIS_DETAIL_TEAMS_COLL_DEFAULT, r, failed = -1, differs = -1, old = -1;
  int32_t mine[2], *all;
  iris_gpu_error_t e;
  void *h = NULL, *d = NULL;
  char why[sizeof iris_detail_errbuf];
  if (ctx->teams) return IRIS_SUCCESS;
  why[0] = 0;
  if (iris_detail_env_int("IRIS_TEAMS_COLL", &ncoll) < 0) {
    bad = IRIS_ERROR_INVALID_ARGUMENT;
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    ncoll = IRIS_DETAIL_TEAMS_COLL_DEFAULT;
  } else if (ncoll < 0 || ncoll > IRIS_DETAIL_TEAMS_COLL_MAX) {
    bad = IRIS_ERROR_INVALID_ARGUMENT;
    snprintf(why, sizeof why, "IRIS_TEAMS_COLL=%d: 0 to %d collective states", ncoll, IRIS_DETAIL_TEAMS_COLL_MAX);
    ncoll = IRIS_DETAIL_TEAMS_COLL_DEFAULT;
  }
  if (!(T = (iris_detail_teams_t *)calloc(1, sizeof *T)) || !(all = (int32_t *)calloc(2 * (size_t)iris_world_size(ctx), sizeof *all))) {
    free(T);
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", iris_rank(ctx));
  }
  if ((st = iris_malloc(ctx, (size_t)IRIS_TEAM_MAX * sizeof(iris_detail_team_area_t), (void **)&T->area)) != IRIS_SUCCESS) {
    free(all);
    free(T);
    return iris_detail_prefix(st, "iris_team_get (the team table)");
  }
  T->coll_bytes = IRIS_DETAIL_TEAM_COLL_BYTES(ctx->local_size);
  T->coll_slots = ncoll;
  if (ncoll > 0 && iris_malloc(ctx, (size_t)ncoll * T->coll_bytes, (void **)&T->coll) != IRIS_SUCCESS) { /* alike on every rank */
    T->coll = NULL;
    T->coll_slots = 0;
  }
  iris_gpu_get_device(&old);
  e = iris_gpu_set_device(ctx->device);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_memset(T->area, 0, (size_t)IRIS_TEAM_MAX * sizeof(iris_detail_team_area_t));
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
  if (e == IRIS_GPU_SUCCESS && (e = iris_gpu_stream_create(&T->meet)) == IRIS_GPU_SUCCESS) T->meet_made = 1;
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_host_alloc_mapped(&h, (size_t)IRIS_TEAM_MAX * IRIS_FAULT_WORDS * sizeof(unsigned long long));
  if (e == IRIS_GPU_SUCCESS) {
    memset(h, 0, (size_t)IRIS_TEAM_MAX * IRIS_FAULT_WORDS * sizeof(unsigned long long));
    e = iris_gpu_host_device_ptr(&d, h);
  }
  if (old >= 0) iris_gpu_set_device(old);
  T->fault_host = (unsigned long long *)h;
  T->fault_dev = (unsigned long long *)d;
  mine[0] = e != IRIS_GPU_SUCCESS ? (int32_t)iris_detail_gpu_fail(iris_rank(ctx), "setting up the team table", e) : (int32_t)bad;
  mine[1] = ncoll;
  /* the ranks agree (and meet: every table is zero before a peer signals into it) */
  st = iris_allgather_host(ctx, mine, all, sizeof mine);
  for (r = 0; st == IRIS_SUCCESS && r < iris_world_size(ctx); r++) {
    if (all[2 * r] != IRIS_SUCCESS && failed < 0) failed = r;
    if (all[2 * r + 1] != all[1] && differs < 0) differs = r;
  }
  if (st != IRIS_SUCCESS || failed >= 0 || differs >= 0) {
    const int theirs = differs >= 0 ? all[2 * differs + 1] : 0, first = all[1];
    const iris_status_t peer_st = failed >= 0 ? iris_detail_peer_status(all[2 * failed]) : IRIS_ERROR_GPU;
    free(all);
    if (h) iris_gpu_host_free(h);
    if (T->meet_made) iris_gpu_stream_destroy(T->meet);
    iris_free(ctx, T->coll);
    iris_free(ctx, T->area);
    free(T);
    if (st != IRIS_SUCCESS) return iris_detail_prefix(st, "iris_team_get (the team table)");
    if (bad != IRIS_SUCCESS) return iris_detail_fail(bad, "iris_team_get: %s; every rank released its part", why);
    if (failed >= 0) return iris_detail_fail(peer_st, "iris_team_get: rank %d could not set up its team table (see its error); every rank released its part", failed);
    return iris_detail_fail(IRIS_ERROR_MISMATCH, "iris_team_get: rank %d runs with IRIS_TEAMS_COLL %d, rank 0 with %d; set it alike on every rank (or on none); every "
                                                 "rank released its part", differs, theirs, first);
  }
  free(all);
  IRIS_DETAIL_TEAMS_SETUP_AFTER_MEET(ctx);
  iris_detail_teams_bind_predefined(ctx, T);
  pthread_mutex_lock(&iris_detail_fault_lock); /* a watchdog's iris_get_async_error sees no table or a whole one */
  ctx->teams = T;
  ctx->teams_op = iris_detail_teams_op;
  pthread_mutex_unlock(&iris_detail_fault_lock);
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_team_get(iris_t *ctx, iris_team_which_t which, iris_team_t *out) {
  iris_status_t st;
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_team_get: NULL out");
  memset(out, 0, sizeof *out);
  out->rank = out->slot = out->coll = -1;
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_team_get");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  if ((unsigned)which > (unsigned)IRIS_TEAM_RAIL) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_team_get: unknown team %d", (int)which);
  if ((st = iris_detail_teams_setup(ctx)) != IRIS_SUCCESS) return st;
  if (which == IRIS_TEAM_WORLD || (which == IRIS_TEAM_NODE && ctx->nodes <= 1)) {
    *out = ctx->teams->team[0];
  } else if (which == IRIS_TEAM_NODE) {
    *out = ctx->teams->team[1];
  } else { /* the rail: this local rank on every node (a team of one on a single node) */
    out->size = iris_num_nodes(ctx);
    out->rank = iris_node(ctx);
    out->start = ctx->nodes > 1 ? ctx->local_rank : iris_rank(ctx);
    out->stride = ctx->nodes > 1 ? ctx->local_size : 1;
    {
      int i;
      for (i = 0; i < out->size && i < IRIS_MAX_RANKS; i++) out->world[i] = out->start + i * out->stride;
    }
    out->fault = ctx->fault_dev;
  }
  return IRIS_SUCCESS;
}

/* ---- the members' exchange: every member of t passes IRIS_DETAIL_TEAM_XW words, all
 * receives t->size records (team rank order). The world team: the rendezvous's
 * allgather. Others: each member writes its record into every member's slot words
 * (xchg[parity][me], each word tagged with the exchange's sequence number), then reads its
 * own until every member's record carries it. Two parities suffice: no member starts
 * exchange n + 1 before it has read every record of n, so none can still be waiting for
 * a record of n - 1 in the parity n + 1 overwrites. Bounded by the barrier timeout. */
/* The meetings, tagged in a record's last word: members in different team calls (one
 * splits a team another destroys) fail with IRIS_ERROR_MISMATCH instead of reading each
 * other's words as their own. */
enum { IRIS_DETAIL_TEAM_OP_SPLIT = 0x5370u, IRIS_DETAIL_TEAM_OP_TAKE = 0x5371u, IRIS_DETAIL_TEAM_OP_DESTROY = 0x5372u, IRIS_DETAIL_TEAM_OP_STAGING = 0x5373u };
static inline const char *iris_detail_team_op_name(uint32_t op) {
  return op == IRIS_DETAIL_TEAM_OP_SPLIT     ? "a split"
         : op == IRIS_DETAIL_TEAM_OP_TAKE    ? "a split's second meeting"
         : op == IRIS_DETAIL_TEAM_OP_DESTROY ? "iris_team_destroy"
         : op == IRIS_DETAIL_TEAM_OP_STAGING ? "iris_team_set_staging"
                                             : "another call";
}
static iris_status_t iris_detail_team_gather_words(iris_t *ctx, const iris_team_t *t, const uint32_t *mine, uint32_t *all);
IRIS_INTERNAL iris_status_t iris_detail_team_allgather(iris_t *ctx, const iris_team_t *t, uint32_t op, uint32_t *mine, uint32_t *all) {
  iris_status_t st;
  int p;
  mine[IRIS_DETAIL_TEAM_XW - 1] = op;
  if ((st = iris_detail_team_gather_words(ctx, t, mine, all)) != IRIS_SUCCESS) return st;
  for (p = 0; p < t->size; p++) {
    const uint32_t theirs = all[(size_t)p * IRIS_DETAIL_TEAM_XW + IRIS_DETAIL_TEAM_XW - 1];
    if (theirs != op)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: team members are in different team calls: this rank is in %s, world rank %d (team rank %d) in %s "
                              "(every member must make the same split / destroy calls on a team, in the same order)",
                              iris_rank(ctx), iris_detail_team_op_name(op), iris_team_world_rank(t, p), p, iris_detail_team_op_name(theirs));
  }
  return IRIS_SUCCESS;
}
static iris_status_t iris_detail_team_gather_words(iris_t *ctx, const iris_team_t *t, const uint32_t *mine, uint32_t *all) {
  iris_detail_teams_t *T = ctx->teams;
  unsigned long long rec[IRIS_DETAIL_TEAM_XW], got[IRIS_MAX_RANKS][IRIS_DETAIL_TEAM_XW];
  unsigned seq;
  size_t off;
  long long t0;
  int p, k, old = -1, missing = -1;
  iris_gpu_error_t e = IRIS_GPU_SUCCESS;
  if (t->size == 1) {
    memcpy(all, mine, IRIS_DETAIL_TEAM_XW * sizeof *all);
    return IRIS_SUCCESS;
  }
  if (t->slot == 0) return iris_allgather_host(ctx, mine, all, IRIS_DETAIL_TEAM_XW * sizeof *all);
  if (t->slot < 0) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: the rail team of a multi-node world has no heap words to meet on: use the rail communicator", iris_rank(ctx));
  /* A meeting that failed here (a member late or gone, a GPU error) may have completed on
   * another member, or its record may still land: the members' counts no longer agree, and
   * a later meeting would read a stale record as a fresh one (a false MISMATCH, or a wait
   * out of step). The team meets no more: every later split / destroy of it fails at once. */
  if (T->broken[t->slot])
    return iris_detail_fail(IRIS_ERROR_TIMEOUT, "rank %d: an earlier meeting on this team (a split or destroy) failed: it cannot meet again; destroy it (its slot stays "
                            "taken until iris_finalize) and split a new team from a parent that works", iris_rank(ctx));
  T->broken[t->slot] = 1; /* cleared once the meeting is over */
  seq = ++T->seq[t->slot];
  for (k = 0; k < IRIS_DETAIL_TEAM_XW; k++) rec[k] = ((unsigned long long)seq << 32) | mine[k];
  off = (size_t)((char *)&iris_detail_team_area(T, t->slot)->xchg[seq & 1][t->rank][0] - ctx->bases[ctx->local_rank]);
  iris_gpu_get_device(&old);
  e = iris_gpu_set_device(ctx->device);
  for (p = 0; e == IRIS_GPU_SUCCESS && p < t->size; p++) {
    char *base = (char *)iris_heap_base(ctx, iris_team_world_rank(t, p));
    if (!base) {
      if (old >= 0) iris_gpu_set_device(old);
      return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: team member %d (world rank %d) is on another node", iris_rank(ctx), p, iris_team_world_rank(t, p));
    }
    e = iris_gpu_copy_on(base + off, rec, sizeof rec, T->meet);
  }
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_stream_synchronize(T->meet); /* (rec is on this stack) */
  t0 = iris_detail_now_ms();
  while (e == IRIS_GPU_SUCCESS) {
    int done = 1;
    e = iris_gpu_copy_on(got, &iris_detail_team_area(T, t->slot)->xchg[seq & 1][0][0], (size_t)t->size * sizeof got[0], T->meet);
    if (e == IRIS_GPU_SUCCESS) e = iris_gpu_stream_synchronize(T->meet);
    for (p = 0; e == IRIS_GPU_SUCCESS && p < t->size && done; p++)
      for (k = 0; k < IRIS_DETAIL_TEAM_XW; k++)
        if ((unsigned)(got[p][k] >> 32) != seq) { done = 0; missing = p; break; }
    if (e != IRIS_GPU_SUCCESS || done) break;
    if (iris_detail_now_ms() - t0 > ctx->barrier_timeout_ms) {
      if (old >= 0) iris_gpu_set_device(old);
      return iris_detail_fail(IRIS_ERROR_TIMEOUT, "rank %d: a team meeting: world rank %d (team rank %d) did not arrive within %d ms; the team meets no more (destroy it)", iris_rank(ctx),
                              iris_team_world_rank(t, missing), missing, ctx->barrier_timeout_ms);
    }
    if (iris_detail_check_fault(ctx) != IRIS_SUCCESS) {
      if (old >= 0) iris_gpu_set_device(old);
      return iris_detail_check_fault(ctx);
    }
    iris_detail_sleep_ms(0);
  }
  if (old >= 0) iris_gpu_set_device(old);
  if (e != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(iris_rank(ctx), "a team meeting (copy over the heap)", e);
  T->broken[t->slot] = 0;
  for (p = 0; p < t->size; p++)
    for (k = 0; k < IRIS_DETAIL_TEAM_XW; k++) all[(size_t)p * IRIS_DETAIL_TEAM_XW + k] = (uint32_t)got[p][k];
  return IRIS_SUCCESS;
}

/* This rank's part of a new team's grid rule (iris_detail_team_rec_t): its GPU's SMs (0
 * where the query fails) and its IRIS_COLL_CTAS as iris_collectives.h takes it (0 unset;
 * IRIS_DETAIL_TEAM_CTAS_MALFORMED for a value it refuses: the split still succeeds, the
 * team's collectives refuse; the error detail is left as it was). */
IRIS_INTERNAL void iris_detail_team_grid_mine(const iris_t *ctx, int *sms, int *ctas) {
  char keep[sizeof iris_detail_errbuf];
  int v = 0, got;
  if (iris_gpu_sm_count(sms, ctx->device) != IRIS_GPU_SUCCESS || *sms < 0) *sms = 0;
  iris_detail_copy(keep, sizeof keep, iris_detail_errbuf);
  got = iris_detail_env_int("IRIS_COLL_CTAS", &v);
  iris_detail_copy(iris_detail_errbuf, sizeof iris_detail_errbuf, keep);
  *ctas = got < 0 || v > IRIS_DETAIL_TEAM_CTAS ? IRIS_DETAIL_TEAM_CTAS_MALFORMED : got > 0 ? v : 0;
}

/* The common part of the splits: every member of parent passes its color and key. */
IRIS_INTERNAL iris_status_t iris_detail_team_split(iris_t *ctx, const iris_team_t *parent, int color, int key, iris_team_t *out, const char *call) {
  iris_detail_teams_t *T;
  iris_detail_team_rec_t *recs = NULL;
  iris_detail_team_plan_t plan;
  uint32_t mine[IRIS_DETAIL_TEAM_XW], *all = NULL, ok;
  int *pw = NULL, i, n, bad = -1, met, sms = 0, ctas = 0;
  iris_status_t st;
  iris_team_t pcopy;
  if (parent) { /* out may alias parent: it is zeroed below */
    pcopy = *parent;
    parent = &pcopy;
  }
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL out", call);
  memset(out, 0, sizeof *out);
  out->rank = out->slot = out->coll = -1;
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, call);
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  if (parent && parent->slot == 0 && (st = iris_detail_teams_setup(ctx)) != IRIS_SUCCESS) return st; /* (a world copied before the table: slot 0) */
  if (!ctx->teams) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: rank %d: no team table yet: get the parent from iris_team_get or a split", call, iris_rank(ctx));
  if ((st = iris_detail_team_valid(ctx, parent, call)) != IRIS_SUCCESS) return st;
  T = ctx->teams;
  n = parent->size;
  memset(mine, 0, sizeof mine);
  mine[0] = (uint32_t)(color < 0 ? -1 : color);
  mine[1] = (uint32_t)key;
  mine[2] = (uint32_t)~T->used;
  mine[3] = (uint32_t)(~T->used >> 32);
  mine[4] = ~T->coll_used & (T->coll_slots >= 32 ? ~0u : (1u << T->coll_slots) - 1u);
  iris_detail_team_grid_mine(ctx, &sms, &ctas);
  mine[5] = (uint32_t)sms;
  mine[6] = (uint32_t)ctas; /* (mine[7]: the meeting's tag) */
  recs = (iris_detail_team_rec_t *)calloc((size_t)n, sizeof *recs);
  pw = (int *)calloc((size_t)n, sizeof *pw);
  all = (uint32_t *)calloc((size_t)n * IRIS_DETAIL_TEAM_XW, sizeof *all);
  if (!recs || !pw || !all) {
    free(recs), free(pw), free(all);
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", iris_rank(ctx));
  }
  if ((st = iris_detail_team_allgather(ctx, parent, IRIS_DETAIL_TEAM_OP_SPLIT, mine, all)) != IRIS_SUCCESS) goto done;
  for (i = 0; i < n; i++) {
    const uint32_t *a = all + (size_t)i * IRIS_DETAIL_TEAM_XW;
    recs[i].color = (int)a[0];
    recs[i].key = (int)a[1];
    recs[i].free_slots = (unsigned long long)a[2] | (unsigned long long)a[3] << 32;
    recs[i].free_coll = a[4];
    recs[i].sms = (int)a[5];
    recs[i].ctas = (int)a[6];
    pw[i] = iris_team_world_rank(parent, i);
  }
  if ((st = iris_detail_team_plan(recs, pw, n, parent->rank, ctx->local_size, ctx->nodes, &plan)) != IRIS_SUCCESS) {
    st = iris_detail_prefix(st, call);
    goto done;
  }
  ok = IRIS_SUCCESS;
  if (plan.rank >= 0) {
    iris_team_t t;
    memset(&t, 0, sizeof t);
    t.rank = plan.rank;
    iris_detail_team_members(&t, plan.world, plan.size);
    if ((st = iris_detail_team_take(ctx, &t, plan.slot, plan.coll, &plan.grid)) == IRIS_SUCCESS) *out = t;
    ok = (uint32_t)st;
  }
  /* meet again: every new team's words are zero before any member uses them; a member
   * that failed makes every member fail (and give its slot back) */
  memset(mine, 0, sizeof mine);
  mine[0] = ok;
  if ((met = (st = iris_detail_team_allgather(ctx, parent, IRIS_DETAIL_TEAM_OP_TAKE, mine, all)) == IRIS_SUCCESS)) {
    for (i = 0; i < n; i++)
      if (all[(size_t)i * IRIS_DETAIL_TEAM_XW] != IRIS_SUCCESS && bad < 0) bad = i;
    if (bad >= 0) st = iris_detail_fail((iris_status_t)all[(size_t)bad * IRIS_DETAIL_TEAM_XW], "%s: world rank %d could not take the new team's slot", call, pw[bad]);
  }
  if (st != IRIS_SUCCESS && out->slot >= 0) {
    /* every member met and saw the failed take: every member gives the slot back. The
     * meeting itself failed here (a member late or gone): it may have completed on other
     * members, which then hold the team and may use its words on this rank's heap; the slot
     * (and collective state) stay taken here, its team meeting no more, as a failed destroy
     * leaves them, so that no later split hands them to another team (slot numbering stays
     * alike: the members that hold it have it taken too) */
    if (met) iris_detail_team_drop(T, out->slot);
    else T->broken[out->slot] = 1;
    memset(out, 0, sizeof *out);
    out->rank = out->slot = out->coll = -1;
  }
done:
  free(recs);
  free(pw);
  free(all);
  return st;
}

IRIS_DEF iris_status_t iris_team_split(iris_t *ctx, const iris_team_t *parent, int color, int key, iris_team_t *out) {
  return iris_detail_team_split(ctx, parent, color < 0 ? IRIS_TEAM_NONE : color, key, out, "iris_team_split");
}
IRIS_DEF iris_status_t iris_team_split_strided(iris_t *ctx, const iris_team_t *parent, int start, int stride, int size, iris_team_t *out) {
  iris_team_t p;
  int me, in;
  if (parent) p = *parent; /* out may alias parent */
  if (out) { /* on every failure *out holds no team, as the other splits leave it */
    memset(out, 0, sizeof *out);
    out->rank = out->slot = out->coll = -1;
  }
  if (!parent || !out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_team_split_strided: NULL argument");
  if (p.size < 1 || p.rank < 0 || p.rank >= p.size)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_team_split_strided: the parent (size %d, team rank %d) is not a team this rank is a member of", p.size, p.rank);
  if (start < 0 || stride < 1 || size < 1 || start + (long long)(size - 1) * stride >= p.size)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_team_split_strided: start %d, stride %d, size %d do not fit a parent of %d ranks", start, stride, size,
                            p.size);
  me = p.rank;
  in = me >= start && (me - start) % stride == 0 && (me - start) / stride < size;
  return iris_detail_team_split(ctx, &p, in ? 0 : IRIS_TEAM_NONE, in ? (me - start) / stride : 0, out, "iris_team_split_strided");
}
/* split_2d's colors and keys for parent rank r of a parent of n ranks, rows of xrange
 * (clamped to n; the caller has checked n >= 1, 0 <= r < n, xrange >= 1): the x split
 * (rows) and the y split (columns). */
IRIS_INTERNAL void iris_detail_team_2d(int r, int n, int xrange, int *xcolor, int *xkey, int *ycolor, int *ykey) {
  if (xrange > n) xrange = n;
  *xcolor = r / xrange;
  *xkey = r % xrange;
  *ycolor = r % xrange;
  *ykey = r / xrange;
}
IRIS_DEF iris_status_t iris_team_split_2d(iris_t *ctx, const iris_team_t *parent, int xrange, iris_team_t *xteam, iris_team_t *yteam) {
  iris_status_t st = IRIS_SUCCESS;
  iris_team_t p;
  int xc, xk, yc, yk;
  if (parent) p = *parent; /* xteam or yteam may alias parent */
  /* on failure nothing is left made: both outputs hold no team (iris_team_destroy of them
   * is a no-op), the x team of a failed y split destroyed again */
  if (xteam) {
    memset(xteam, 0, sizeof *xteam);
    xteam->rank = xteam->slot = xteam->coll = -1;
  }
  if (yteam) {
    memset(yteam, 0, sizeof *yteam);
    yteam->rank = yteam->slot = yteam->coll = -1;
  }
  if (!parent || xrange < 1) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_team_split_2d: NULL parent or xrange < 1");
  /* a rank that opted out of the parent's split (size 0, rank -1) or a handle of garbage:
   * refused before the grid's arithmetic divides by its size */
  if (p.size < 1 || p.rank < 0 || p.rank >= p.size)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_team_split_2d: the parent (size %d, team rank %d) is not a team this rank is a member of", p.size, p.rank);
  iris_detail_team_2d(p.rank, p.size, xrange, &xc, &xk, &yc, &yk);
  if (xteam && (st = iris_detail_team_split(ctx, &p, xc, xk, xteam, "iris_team_split_2d (x)")) != IRIS_SUCCESS) return st;
  if (yteam && (st = iris_detail_team_split(ctx, &p, yc, yk, yteam, "iris_team_split_2d (y)")) != IRIS_SUCCESS && xteam) {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    (void)iris_team_destroy(ctx, xteam); /* collective over the x team: the y split failed on every rank alike */
    iris_detail_fail(st, "%s", why);
  }
  return st;
}

IRIS_DEF iris_status_t iris_team_destroy(iris_t *ctx, iris_team_t *team) {
  uint32_t mine[IRIS_DETAIL_TEAM_XW], all[IRIS_MAX_RANKS * IRIS_DETAIL_TEAM_XW];
  iris_status_t st = IRIS_SUCCESS;
  int old = -1;
  if (!team) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_team_destroy: NULL team");
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_team_destroy");
  if (team->slot == 0 || (team->slot == 1 && ctx->nodes > 1)) return iris_detail_check_fault(ctx); /* the world, the node: predefined */
  if (team->size < 1 || team->rank < 0 || team->slot < 0) { /* nothing held (an opted-out rank, the rail team) */
    memset(team, 0, sizeof *team);
    team->rank = team->slot = team->coll = -1;
    return iris_detail_check_fault(ctx);
  }
  if ((st = iris_detail_team_valid(ctx, team, "iris_team_destroy")) != IRIS_SUCCESS) return st;
  /* a context with a fatal fault: no wait, no meeting (every call returns the fault at
   * once); this rank's part is released (the context is only good for iris_finalize) */
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) { /* (the detail names the fault) */
    iris_detail_team_drop(ctx->teams, team->slot);
    memset(team, 0, sizeof *team);
    team->rank = team->slot = team->coll = -1;
    return st;
  }
  iris_gpu_get_device(&old);
  if (iris_gpu_set_device(ctx->device) == IRIS_GPU_SUCCESS) iris_gpu_synchronize();
  if (old >= 0) iris_gpu_set_device(old);
  memset(mine, 0, sizeof mine);
  st = iris_detail_team_allgather(ctx, team, IRIS_DETAIL_TEAM_OP_DESTROY, mine, all); /* no member still uses the words */
  /* members in different team calls (IRIS_ERROR_MISMATCH: every record arrived): the team
   * stays as it was, so that a destroy in step on every member frees it */
  if (st == IRIS_ERROR_MISMATCH) return st;
  /* a meeting that failed (a member late or gone) leaves the slot taken: that member's
   * record could still land in its exchange rows and be read by the slot's next team */
  if (st == IRIS_SUCCESS) iris_detail_team_drop(ctx->teams, team->slot);
  memset(team, 0, sizeof *team);
  team->rank = team->slot = team->coll = -1;
  return st;
}

IRIS_DEF iris_status_t iris_team_check(iris_t *ctx, const iris_team_t *team) {
  iris_status_t st;
  iris_gpu_error_t e;
  unsigned long long f;
  int old = -1;
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "iris_team_check");
  if ((st = iris_detail_team_valid(ctx, team, "iris_team_check")) != IRIS_SUCCESS) return st;
  iris_gpu_get_device(&old);
  e = iris_gpu_set_device(ctx->device);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
  if (old >= 0) iris_gpu_set_device(old);
  if (e != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(iris_rank(ctx), "iris_team_check: device synchronize", e);
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st; /* the team's fatal fault included (POLL) */
  if (team->slot == 0) return iris_get_async_error(ctx);
  if (team->slot < 0 || !ctx->teams) return IRIS_SUCCESS;
  f = __atomic_exchange_n(ctx->teams->fault_host + (size_t)team->slot * IRIS_FAULT_WORDS + IRIS_FAULT_WORD_MISMATCH, 0ULL, __ATOMIC_ACQ_REL);
  return f ? iris_detail_fault_status(ctx, iris_detail_team_fault_to_ctx(ctx, team, f)) : IRIS_SUCCESS;
}

/* ---- for iris_collectives.h (internal/core/detail_api.h) */
IRIS_DEF iris_status_t iris_detail_team_lookup(iris_t *ctx, const iris_team_t *team, iris_detail_team_view_t *out) {
  iris_detail_teams_t *T;
  iris_status_t st;
  int r;
  memset(out, 0, sizeof *out);
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "a team collective");
  if ((st = iris_detail_team_valid(ctx, team, "a team collective")) != IRIS_SUCCESS) return st;
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  T = ctx->teams;
  out->world = team->slot == 0;
  if (out->world || team->size == 1) return IRIS_SUCCESS;
  if (team->slot < 0 || team->coll < 0 || !T)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: the team (size %d) has no collective state: the pool (IRIS_TEAMS_COLL, %d) was %s when it was split; "
                            "destroy a team, or raise IRIS_TEAMS_COLL (and the heap) before the first team call", iris_rank(ctx), team->size,
                            T ? T->coll_slots : 0, T && T->coll_slots ? "taken" : "empty");
  { /* the grid rule: alike on every member, so a refusal here is every member's (no launch, no wait) */
    const iris_detail_team_grid_t *g = &T->grid[team->slot];
    if (g->ctas == IRIS_DETAIL_TEAM_CTAS_MALFORMED)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: the team's collectives are refused on every member: IRIS_COLL_CTAS on world rank %d could not be read "
                              "when the team was split (0 to %d; see docs/options.md): fix it and split the team again", iris_rank(ctx), g->bad_rank, IRIS_DETAIL_TEAM_CTAS);
    if (g->ctas == IRIS_DETAIL_TEAM_CTAS_DIFFER)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: the team's collectives are refused on every member: world rank %d ran with IRIS_COLL_CTAS %d, the team's "
                              "member 0 (world rank %d) with %d when the team was split (0: unset); set it alike on every rank (or on none) and split the team again",
                              iris_rank(ctx), g->bad_rank, g->theirs, iris_team_world_rank(team, 0), g->first);
    out->sms = g->sms;
    out->ctas = g->ctas;
  }
  out->state = &T->coll_state[team->slot];
  out->coll_base = T->coll + (size_t)team->coll * T->coll_bytes;
  out->coll_bytes = T->coll_bytes;
  out->ctl_bytes = IRIS_DETAIL_TEAM_CTL_BYTES;
  out->node_size = ctx->local_size;
  /* the team as a world of its own: team rank r at bases[r] */
  out->dev = iris_device_context_node(ctx);
  out->dev.rank = out->dev.local_rank = team->rank;
  out->dev.world_size = out->dev.local_size = team->size;
  for (r = 0; r < IRIS_MAX_RANKS; r++) out->dev.bases[r] = r < team->size ? (char *)iris_heap_base(ctx, iris_team_world_rank(team, r)) : NULL;
  out->dev.fault = team->fault;
  return IRIS_SUCCESS;
}
/* The call order of a team's calls across streams: internal/core/stream_order.h's rule,
 * with the team's own events (teams' calls are not ordered with each other's or the
 * world's: that is what lets two teams run at once). */
IRIS_DEF iris_status_t iris_detail_team_order(iris_t *ctx, const iris_team_t *team, iris_stream_t stream, int end) {
  iris_detail_teams_t *T = ctx->teams;
  const int s = team->slot;
  unsigned long long cap = 0;
  iris_gpu_error_t e;
  if (!T || s <= 0) return end ? iris_detail_order_end(ctx, stream) : iris_detail_order_begin(ctx, stream);
  if (!T->order_made[s]) {
    if ((e = iris_gpu_event_create(&T->order_eager[s])) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(iris_rank(ctx), "creating a team's event", e);
    if ((e = iris_gpu_event_create(&T->order_cap[s])) != IRIS_GPU_SUCCESS) {
      iris_gpu_event_destroy(T->order_eager[s]);
      return iris_detail_gpu_fail(iris_rank(ctx), "creating a team's event", e);
    }
    T->order_made[s] = 1;
  }
  if ((e = iris_gpu_capture_id(stream, &cap)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(iris_rank(ctx), "querying the stream's capture state", e);
  if (!end) {
    if (!cap) {
      if (T->order_have_eager[s] && T->order_eager_stream[s] != stream && (e = iris_gpu_stream_wait(stream, T->order_eager[s])) != IRIS_GPU_SUCCESS)
        return iris_detail_gpu_fail(iris_rank(ctx), "ordering after the team's previous call (stream wait)", e);
    } else if (T->order_cap_id[s] == cap && T->order_cap_stream[s] != stream && (e = iris_gpu_stream_wait(stream, T->order_cap[s])) != IRIS_GPU_SUCCESS) {
      return iris_detail_gpu_fail(iris_rank(ctx), "ordering after the team's previous captured call (stream wait)", e);
    }
    return IRIS_SUCCESS;
  }
  if (!cap) {
    if ((e = iris_gpu_event_record(T->order_eager[s], stream)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(iris_rank(ctx), "recording the team call's event", e);
    T->order_have_eager[s] = 1;
    T->order_eager_stream[s] = stream;
  } else {
    if ((e = iris_gpu_event_record(T->order_cap[s], stream)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(iris_rank(ctx), "recording the team call's event", e);
    T->order_cap_id[s] = cap;
    T->order_cap_stream[s] = stream;
  }
  return IRIS_SUCCESS;
}

#endif /* IRIS_INTERNAL_CORE_TEAM_H */
