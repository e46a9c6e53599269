/* internal/core/layout.h: the layouts that the host and the GPUs share, with compile-time
 * checks: the offsets of iris_device_ctx_t, and the fault word's encoding (IRIS_FAULT_*,
 * IRIS_SITE_*, IRIS_FAULT_MAKE and the accessors that take a word apart). Also
 * IRIS_DETAIL_STATIC_ASSERT, with which the implementation checks its wire structs
 * (rendezvous frames, exchange records, rail messages). Included by iris.h in every
 * unit, after the public declarations; not for users. */
#ifndef IRIS_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris.h"
#endif
#ifndef IRIS_INTERNAL_CORE_LAYOUT_H
#define IRIS_INTERNAL_CORE_LAYOUT_H

/* A compile-time check in C99 (a negative array size), C11 and C++. tag names the check
 * in the compiler's message; it must be unique among the checks. */
#if defined(__cplusplus)
#define IRIS_DETAIL_STATIC_ASSERT(cond, tag) static_assert(cond, "iris: " #tag)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define IRIS_DETAIL_STATIC_ASSERT(cond, tag) _Static_assert(cond, "iris: " #tag)
#else
#define IRIS_DETAIL_STATIC_ASSERT(cond, tag) typedef char iris_detail_assert_##tag[(cond) ? 1 : -1]
#endif

/* -------------------------------------------------------------- the device context --
 * iris_device_ctx_t is passed by value from host code to kernels (possibly built by
 * another compiler) and crosses the C ABI to bindings (python/iris_gpu/_lib.py mirrors
 * it; lib/iris.cu reports its size). Its layout on 64-bit hosts and GPUs: */
IRIS_DETAIL_STATIC_ASSERT(sizeof(char *) == 8 && sizeof(unsigned long long) == 8 && sizeof(int) == 4, device_ctx_lp64);
IRIS_DETAIL_STATIC_ASSERT(offsetof(iris_device_ctx_t, rank) == 0 && offsetof(iris_device_ctx_t, world_size) == 4 &&
                              offsetof(iris_device_ctx_t, heap_size) == 8 && offsetof(iris_device_ctx_t, bases) == 16,
                          device_ctx_head_offsets);
IRIS_DETAIL_STATIC_ASSERT(offsetof(iris_device_ctx_t, fault) == 16 + 8 * IRIS_MAX_RANKS &&
                              offsetof(iris_device_ctx_t, local_rank) == 24 + 8 * IRIS_MAX_RANKS &&
                              offsetof(iris_device_ctx_t, local_size) == 28 + 8 * IRIS_MAX_RANKS &&
                              offsetof(iris_device_ctx_t, node) == 32 + 8 * IRIS_MAX_RANKS &&
                              offsetof(iris_device_ctx_t, num_nodes) == 36 + 8 * IRIS_MAX_RANKS,
                          device_ctx_tail_offsets);
IRIS_DETAIL_STATIC_ASSERT(sizeof(iris_device_ctx_t) == 40 + 8 * IRIS_MAX_RANKS, device_ctx_size);

/* iris_team_t, passed by value to kernels and mirrored by bindings: */
IRIS_DETAIL_STATIC_ASSERT(offsetof(iris_team_t, size) == 0 && offsetof(iris_team_t, rank) == 4 && offsetof(iris_team_t, start) == 8 &&
                              offsetof(iris_team_t, stride) == 12 && offsetof(iris_team_t, world) == 16 &&
                              offsetof(iris_team_t, slot) == 16 + 4 * IRIS_MAX_RANKS && offsetof(iris_team_t, coll) == 20 + 4 * IRIS_MAX_RANKS &&
                              offsetof(iris_team_t, sync) == 24 + 4 * IRIS_MAX_RANKS && offsetof(iris_team_t, fault) == 32 + 4 * IRIS_MAX_RANKS &&
                              offsetof(iris_team_t, serial) == 40 + 4 * IRIS_MAX_RANKS && sizeof(iris_team_t) == 48 + 4 * IRIS_MAX_RANKS,
                          team_layout);
IRIS_DETAIL_STATIC_ASSERT(IRIS_TEAM_MAX >= 2 && IRIS_TEAM_MAX <= 64, team_max_in_a_mask);

/* A team slot's words on each rank's heap (iris_team_t.sync points at this rank's copy):
 * bar[i].from[p] is the epoch that member p's barrier i reached (written by p, release at
 * system scope); epoch[i] this rank's own count of barrier i (read and written by the
 * participant that holds index i: an epoch never resets, so graphs replay); xchg the
 * host exchange of the team's splits and meetings: [parity][p] member p's record, each
 * word (sequence << 32) | payload. Zeroed when the slot is given to a new team, before
 * its members meet. */
#define IRIS_DETAIL_TEAM_XW 8 /* payload words of an exchange record */
typedef struct iris_detail_team_area {
  unsigned long long bar[IRIS_TEAM_BARRIERS][IRIS_MAX_RANKS];
  unsigned long long epoch[IRIS_TEAM_BARRIERS];
  unsigned long long xchg[2][IRIS_MAX_RANKS][IRIS_DETAIL_TEAM_XW];
} iris_detail_team_area_t;
IRIS_DETAIL_STATIC_ASSERT(offsetof(iris_detail_team_area_t, epoch) == 8 * IRIS_TEAM_BARRIERS * IRIS_MAX_RANKS &&
                              offsetof(iris_detail_team_area_t, xchg) == 8 * IRIS_TEAM_BARRIERS * (IRIS_MAX_RANKS + 1) &&
                              sizeof(iris_detail_team_area_t) % 256 == 0,
                          team_area_layout);

/* ---------------------------------------------------------------------- fault words --
 * iris_device_ctx_t.fault points at three 64-bit words of pinned host memory: two
 * written by kernels (iris_device.h, iris_collectives.h, iris_gemm.h) and read by the host
 * (internal/core/faults.h), one written by the host at init and read by waits that have run
 * long. Which word holds what: */
enum {
  IRIS_FAULT_WORD_FATAL = 0,    /* the first fatal fault: a wait that ran out, iris_abort, a mismatch of a split call */
  IRIS_FAULT_WORD_MISMATCH = 1, /* the last collective mismatch (not fatal) */
  IRIS_FAULT_WORD_BOUND = 2,    /* the wait bound in ns from IRIS_WAIT_TIMEOUT_MS; 0: IRIS_WAIT_TIMEOUT_NS */
  IRIS_FAULT_WORDS = 3
};
/* The BOUND word once the peer watch (internal/core/watch.h) has seen a peer process of
 * this node end: every wait then gives up at IRIS_DETAIL_WAIT_FLOOR_NS (100 ms), the least
 * bound a wait honours, and the host names the dead rank (IRIS_ERROR_PEER_FAILED). */
#define IRIS_DETAIL_BOUND_GONE 1ULL
/* A word: kind << 56 | peer << 48 | site << 32 | call. kind: IRIS_FAULT_*; peer: the rank
 * waited for (0xff: unknown); site: what waited (high byte: the collective kind + 1, 0
 * for none; low byte: IRIS_SITE_*); call: the collective call number of the context (or
 * 0). A word of 0 is no fault. */
/* IRIS_FAULT_MISMATCH_FATAL: a mismatch in which a rank's launch was one of several of a
 * user call (internal/coll/plan.h, IRIS_COLL_SIG_SPLIT): the ranks' call numbers are out of
 * step, so it goes to the fatal word. */
/* IRIS_FAULT_OUT_OF_STEP: a peer's header announced a later call than the one this rank
 * waited in: that peer left the call without matching this rank, which only a fatal fault
 * of its own does (its later launches still announce, and overwrite the slot this rank
 * waited on), so this rank will never see the call it waits for. */
enum { IRIS_FAULT_NONE = 0, IRIS_FAULT_TIMEOUT = 1, IRIS_FAULT_ABORT = 2, IRIS_FAULT_MISMATCH = 3, IRIS_FAULT_MISMATCH_FATAL = 4, IRIS_FAULT_OUT_OF_STEP = 5 };
enum { IRIS_SITE_USER = 0, IRIS_SITE_HEADER, IRIS_SITE_BARRIER, IRIS_SITE_LL, IRIS_SITE_PROGRESS, IRIS_SITE_GEMM, IRIS_SITE_COUNT };
#define IRIS_FAULT_MAKE(kind, peer, site, call)                                                                    \
  (((unsigned long long)(kind) << 56) | ((unsigned long long)((peer) & 0xff) << 48) | ((unsigned long long)((site) & 0xffff) << 32) | \
   (unsigned long long)(unsigned)(call))
/* The fields of a word w (constant expressions for a constant w). */
#define IRIS_FAULT_KIND(w) ((unsigned)((unsigned long long)(w) >> 56))
#define IRIS_FAULT_PEER(w) ((unsigned)((unsigned long long)(w) >> 48) & 0xffu)
#define IRIS_FAULT_SITE(w) ((unsigned)((unsigned long long)(w) >> 32) & 0xffffu)
#define IRIS_FAULT_CALL(w) ((unsigned)(unsigned long long)(w))
/* A site's halves: the collective kind + 1 (0: none), and the IRIS_SITE_* that waited. */
#define IRIS_FAULT_SITE_MAKE(coll, what) ((((unsigned)(coll) & 0xffu) << 8) | ((unsigned)(what) & 0xffu))
#define IRIS_FAULT_SITE_COLL(site) ((unsigned)(site) >> 8)
#define IRIS_FAULT_SITE_WHAT(site) ((unsigned)(site) & 0xffu)
IRIS_DETAIL_STATIC_ASSERT(sizeof(unsigned long long) == 8 && IRIS_FAULT_MAKE(0, 0, 0, 0) == 0, fault_word_zero_is_none);
IRIS_DETAIL_STATIC_ASSERT(IRIS_FAULT_KIND(IRIS_FAULT_MAKE(IRIS_FAULT_MISMATCH, 0xfe, 0xabcd, 0xfedcba98u)) == IRIS_FAULT_MISMATCH &&
                              IRIS_FAULT_PEER(IRIS_FAULT_MAKE(IRIS_FAULT_MISMATCH, 0xfe, 0xabcd, 0xfedcba98u)) == 0xfe &&
                              IRIS_FAULT_SITE(IRIS_FAULT_MAKE(IRIS_FAULT_MISMATCH, 0xfe, 0xabcd, 0xfedcba98u)) == 0xabcd &&
                              IRIS_FAULT_CALL(IRIS_FAULT_MAKE(IRIS_FAULT_MISMATCH, 0xfe, 0xabcd, 0xfedcba98u)) == 0xfedcba98u,
                          fault_word_fields_round_trip);
IRIS_DETAIL_STATIC_ASSERT(IRIS_FAULT_PEER(IRIS_FAULT_MAKE(IRIS_FAULT_TIMEOUT, 0x1ff, 0, 0)) == 0xff &&
                              IRIS_FAULT_KIND(IRIS_FAULT_MAKE(IRIS_FAULT_TIMEOUT, 0x1ff, 0x1ffff, 0)) == IRIS_FAULT_TIMEOUT,
                          fault_word_fields_do_not_overlap);
IRIS_DETAIL_STATIC_ASSERT(IRIS_FAULT_SITE_COLL(IRIS_FAULT_SITE_MAKE(7, IRIS_SITE_GEMM)) == 7 &&
                              IRIS_FAULT_SITE_WHAT(IRIS_FAULT_SITE_MAKE(7, IRIS_SITE_GEMM)) == IRIS_SITE_GEMM && IRIS_SITE_COUNT <= 256,
                          fault_site_halves);

#endif /* IRIS_INTERNAL_CORE_LAYOUT_H */
