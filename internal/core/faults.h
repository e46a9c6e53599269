/* internal/core/faults.h: the host side of the fault words (their encoding: internal/core/layout.h):
 * reading them, naming a fault in the error detail (iris_get_async_error,
 * iris_detail_check_fault), and iris_abort. Part of iris's implementation, included by
 * iris.h under IRIS_IMPLEMENTATION (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_FAULTS_H
#define IRIS_INTERNAL_CORE_FAULTS_H
#include "../../iris.h"
#include "sys.h"
#include "status.h"
#include "context.h"

static const char *const iris_detail_site_names[IRIS_SITE_COUNT] = {"a wait in a user kernel (iris_wait_until)", "the call header", "a barrier",
                                                                    "an LL data line", "a progress flag", "a GEMM tile flag"};
static const char *const iris_detail_coll_names[] = {"", "iris_all_reduce", "iris_all_gather", "iris_reduce_scatter", "iris_all_to_all", "iris_broadcast",
                                                     "iris_barrier_device", "an all-gather + GEMM plan", "iris_all_reduce_rmsnorm"};
/* Word `which` (IRIS_FAULT_WORD_*) of the context; 0 when it has none. */
IRIS_INTERNAL unsigned long long iris_detail_fault_read(const iris_t *ctx, int which) {
  return ctx->fault_host ? __atomic_load_n(ctx->fault_host + which, __ATOMIC_ACQUIRE) : 0;
}
/* Names a fault word in the thread's detail; returns its status. */
IRIS_INTERNAL iris_status_t iris_detail_fault_status(const iris_t *ctx, unsigned long long f) {
  const unsigned kind = IRIS_FAULT_KIND(f), peer = IRIS_FAULT_PEER(f), site = IRIS_FAULT_SITE(f), call = IRIS_FAULT_CALL(f);
  const unsigned coll = IRIS_FAULT_SITE_COLL(site), what = IRIS_FAULT_SITE_WHAT(site);
  const char *cname = coll < sizeof iris_detail_coll_names / sizeof iris_detail_coll_names[0] ? iris_detail_coll_names[coll] : "?";
  const char *wname = what < IRIS_SITE_COUNT ? iris_detail_site_names[what] : "?";
  char who[48];
  if (kind == IRIS_FAULT_ABORT) return iris_detail_fail(IRIS_ERROR_ABORTED, "rank %d: the context was aborted (iris_abort)", ctx->local_rank);
  if (peer < (unsigned)ctx->local_size && ctx->nodes > 1) /* the world rank, as every other message names ranks (the word holds this node's index) */
    snprintf(who, sizeof who, "rank %u (rank %u of node %d)", peer + (unsigned)(ctx->node * ctx->local_size), peer, ctx->node);
  else if (peer < (unsigned)ctx->local_size) snprintf(who, sizeof who, "rank %u", peer);
  else snprintf(who, sizeof who, "a peer");
  if (kind == IRIS_FAULT_MISMATCH)
    return iris_detail_fail(IRIS_ERROR_MISMATCH,
                            "rank %d: collective call #%u: %s called a different collective (kind, count, type, op, root or buffers) at the same point; "
                            "no rank moved data for that call",
                            ctx->local_rank, call, who);
  if (kind == IRIS_FAULT_MISMATCH_FATAL)
    return iris_detail_fail(IRIS_ERROR_MISMATCH,
                            "rank %d: collective call #%u: %s called a different collective (kind, count, type, op, root or buffers) at the same point, and "
                            "the mismatched call was split into several launches (buffers off the heap through the staging area), so the ranks' call numbers "
                            "are out of step; no rank moved data for that call; the context is unusable: iris_finalize it",
                            ctx->local_rank, call, who);
  if (kind == IRIS_FAULT_OUT_OF_STEP)
    return iris_detail_fail(IRIS_ERROR_MISMATCH,
                            "rank %d: collective call #%u: %s had already gone on to a later call: it left this one on a fatal fault of its own (a "
                            "mismatch of a call split into several launches, a wait that ran out, or iris_abort; its own error names which), so the ranks' "
                            "call numbers are out of step; no rank moved data for that call; the context is unusable: iris_finalize it",
                            ctx->local_rank, call, who);
  {
    /* the peer watch saw a process of this node end, and then this wait ran past the
     * lowered bound (internal/core/watch.h): name the dead rank, and the one waited for */
    const int g = __atomic_load_n(&ctx->gone, __ATOMIC_ACQUIRE);
    if (g > 0 && g <= ctx->local_size) {
      char dead[48];
      if (ctx->nodes > 1) snprintf(dead, sizeof dead, "rank %d (rank %d of node %d)", g - 1 + ctx->node * ctx->local_size, g - 1, ctx->node);
      else snprintf(dead, sizeof dead, "rank %d", g - 1);
      return iris_detail_fail(IRIS_ERROR_PEER_FAILED,
                              "rank %d: %s (pid %lld) has died (the peer watch saw its process end); %s%s%s (call #%u) then gave up waiting for %s; the "
                              "context is unusable: iris_finalize it",
                              ctx->local_rank, dead, (long long)ctx->pids[g - 1], wname, *cname ? " of " : "", cname, call, who);
    }
  }
  if (peer < (unsigned)ctx->local_size && ctx->pids[peer] > 0 && kill((pid_t)ctx->pids[peer], 0) != 0 && errno == ESRCH)
    return iris_detail_fail(IRIS_ERROR_PEER_FAILED, "rank %d: %s (pid %lld) has died; %s%s%s waited for it in vain (call #%u); the context is unusable: iris_finalize it",
                            ctx->local_rank, who, (long long)ctx->pids[peer], wname, *cname ? " of " : "", cname, call);
  return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                          "rank %d: %s%s%s (call #%u) waited for %s longer than the wait bound (IRIS_WAIT_TIMEOUT_MS, else the unit's IRIS_WAIT_TIMEOUT_NS); the context is unusable: iris_finalize it",
                          ctx->local_rank, wname, *cname ? " of " : "", cname, call, who);
}
/* The fatal fault of ctx, if any (for every entry point that launches or waits). */
IRIS_DEF iris_status_t iris_detail_check_fault(const iris_t *ctx) {
  unsigned long long f;
  if (ctx && !IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "a call on this context");
  if (ctx && ctx->teams_op) ctx->teams_op((iris_t *)ctx, IRIS_DETAIL_TEAMS_POLL); /* a team's fatal fault becomes the context's */
  f = ctx ? iris_detail_fault_read(ctx, IRIS_FAULT_WORD_FATAL) : 0;
  return f ? iris_detail_fault_status(ctx, f) : IRIS_SUCCESS;
}
/* iris_abort and iris_get_async_error may run in any thread, also while another thread
 * finalizes the context: they touch the fault words (and the teams') only under this
 * lock, and not once iris_finalize has set ctx->closing under it (it frees them after). */
static pthread_mutex_t iris_detail_fault_lock = PTHREAD_MUTEX_INITIALIZER;
static inline iris_status_t iris_detail_fault_enter(iris_t *ctx, const char *call) {
  int closing;
  pthread_mutex_lock(&iris_detail_fault_lock);
  if (IRIS_DETAIL_IS_LIVE(ctx) && !ctx->closing) return IRIS_SUCCESS; /* the lock stays held */
  closing = IRIS_DETAIL_IS_LIVE(ctx) && ctx->closing;
  pthread_mutex_unlock(&iris_detail_fault_lock);
  if (closing) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: the context is being finalized (rank %d)", call, ctx->local_rank);
  return iris_detail_live(ctx, call);
}
IRIS_DEF iris_status_t iris_get_async_error(iris_t *ctx) {
  unsigned long long f;
  iris_status_t st = IRIS_SUCCESS;
  if ((st = iris_detail_fault_enter(ctx, "iris_get_async_error")) != IRIS_SUCCESS) return st;
  if (ctx->teams_op) ctx->teams_op(ctx, IRIS_DETAIL_TEAMS_POLL);
  if ((f = iris_detail_fault_read(ctx, IRIS_FAULT_WORD_FATAL)) != 0) st = iris_detail_fault_status(ctx, f);
  else if (ctx->fault_host && (f = __atomic_exchange_n(ctx->fault_host + IRIS_FAULT_WORD_MISMATCH, 0ULL, __ATOMIC_ACQ_REL)) != 0) st = iris_detail_fault_status(ctx, f);
  pthread_mutex_unlock(&iris_detail_fault_lock);
  return st;
}
IRIS_DEF iris_status_t iris_abort(iris_t *ctx) {
  unsigned long long zero = 0;
  iris_status_t st;
  if ((st = iris_detail_fault_enter(ctx, "iris_abort")) != IRIS_SUCCESS) return st;
  if (ctx->fault_host)
    __atomic_compare_exchange_n(ctx->fault_host + IRIS_FAULT_WORD_FATAL, &zero, IRIS_FAULT_MAKE(IRIS_FAULT_ABORT, 0xff, 0, 0), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  if (ctx->teams_op) ctx->teams_op(ctx, IRIS_DETAIL_TEAMS_ABORT); /* the teams' collectives stop waiting too */
  pthread_mutex_unlock(&iris_detail_fault_lock);
  return IRIS_SUCCESS;
}

#endif /* IRIS_INTERNAL_CORE_FAULTS_H */
