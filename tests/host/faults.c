/* tests/host/faults.c: the host side of the fault words. */
#include "harness.h"

/* ----------------------------------------------------------------- faults -- */
/* The host side of the fault words (iris_get_async_error, iris_abort, the fatal check
 * every call makes): decoded names, PEER_FAILED only for a rank whose process is gone,
 * a mismatch reported once, an abort that sticks. The GPU side is tests/fault_test.cu. */
static void test_faults(void) {
  static char heap[1 << 16];
  unsigned long long words[IRIS_FAULT_WORDS] = {0, 0}, w;
  iris_t *ctx = iris_detail_host_only_ctx(sizeof heap, heap);
  iris_status_t st;
  pid_t child;
  if (!ctx) { check(0, "faults: host-only context", "out of memory"); return; }
  ctx->local_size = 3;
  ctx->fault_host = words;
  ctx->pids[1] = (int64_t)getpid(); /* alive */
  child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  ctx->pids[2] = (int64_t)child; /* gone */
  check(iris_get_async_error(ctx) == IRIS_SUCCESS && iris_detail_check_fault(ctx) == IRIS_SUCCESS, "faults: none recorded, none reported", "%s", iris_error_detail());
  w = IRIS_FAULT_MAKE(IRIS_FAULT_TIMEOUT, (unsigned)getpid() & 0xff, IRIS_FAULT_SITE_MAKE(7, IRIS_SITE_GEMM), (unsigned)getpid() * 2654435761u);
  check(IRIS_FAULT_KIND(w) == IRIS_FAULT_TIMEOUT && IRIS_FAULT_PEER(w) == ((unsigned)getpid() & 0xff) && IRIS_FAULT_SITE_COLL(IRIS_FAULT_SITE(w)) == 7 &&
            IRIS_FAULT_SITE_WHAT(IRIS_FAULT_SITE(w)) == IRIS_SITE_GEMM && IRIS_FAULT_CALL(w) == (unsigned)getpid() * 2654435761u,
        "faults: a word's fields read back through the accessors", "word %016llx", w);
  words[IRIS_FAULT_WORD_MISMATCH] = IRIS_FAULT_MAKE(IRIS_FAULT_MISMATCH, 1, IRIS_FAULT_SITE_MAKE(1, IRIS_SITE_HEADER), 42);
  st = iris_get_async_error(ctx);
  check(st == IRIS_ERROR_MISMATCH && strstr(iris_error_detail(), "rank 1") && strstr(iris_error_detail(), "#42") && words[IRIS_FAULT_WORD_MISMATCH] == 0 &&
            iris_get_async_error(ctx) == IRIS_SUCCESS && iris_detail_check_fault(ctx) == IRIS_SUCCESS,
        "faults: a mismatch is reported once, naming the rank and the call, and is not fatal", "%s: %s", sname(st), iris_error_detail());
  words[IRIS_FAULT_WORD_FATAL] = IRIS_FAULT_MAKE(IRIS_FAULT_TIMEOUT, 1, IRIS_FAULT_SITE_MAKE(2, IRIS_SITE_BARRIER), 7);
  st = iris_get_async_error(ctx);
  check(st == IRIS_ERROR_TIMEOUT && strstr(iris_error_detail(), "rank 1") && strstr(iris_error_detail(), "iris_all_gather") &&
            strstr(iris_error_detail(), "barrier") && strstr(iris_error_detail(), "#7") && iris_detail_check_fault(ctx) == IRIS_ERROR_TIMEOUT &&
            iris_get_async_error(ctx) == IRIS_ERROR_TIMEOUT,
        "faults: a timed-out wait for a live rank is IRIS_ERROR_TIMEOUT naming the rank, the collective, the wait and the call, and it stays", "%s: %s", sname(st),
        iris_error_detail());
  /* 8: IRIS_COLL_KIND_RMSNORM + 1 (internal/coll/protocol.h), the fused kernels' waits */
  words[IRIS_FAULT_WORD_FATAL] = IRIS_FAULT_MAKE(IRIS_FAULT_TIMEOUT, 1, IRIS_FAULT_SITE_MAKE(8, IRIS_SITE_LL), 11);
  st = iris_get_async_error(ctx);
  check(st == IRIS_ERROR_TIMEOUT && strstr(iris_error_detail(), "of iris_all_reduce_rmsnorm") && strstr(iris_error_detail(), "#11"),
        "faults: a timed-out wait of the fused all-reduce + RMSNorm names iris_all_reduce_rmsnorm", "%s: %s", sname(st), iris_error_detail());
  words[IRIS_FAULT_WORD_FATAL] = IRIS_FAULT_MAKE(IRIS_FAULT_TIMEOUT, 2, IRIS_FAULT_SITE_MAKE(1, IRIS_SITE_LL), 9);
  st = iris_get_async_error(ctx);
  check(st == IRIS_ERROR_PEER_FAILED && strstr(iris_error_detail(), "rank 2") && strstr(iris_error_detail(), "died"),
        "faults: a timed-out wait for a rank whose process is gone is IRIS_ERROR_PEER_FAILED naming it", "%s: %s", sname(st), iris_error_detail());
  /* a mismatch of a split call (internal/coll/plan.h, IRIS_COLL_SIG_SPLIT): fatal, but named a mismatch */
  words[IRIS_FAULT_WORD_FATAL] = IRIS_FAULT_MAKE(IRIS_FAULT_MISMATCH_FATAL, 1, IRIS_FAULT_SITE_MAKE(1, IRIS_SITE_HEADER), 13);
  st = iris_get_async_error(ctx);
  check(st == IRIS_ERROR_MISMATCH && strstr(iris_error_detail(), "rank 1") && strstr(iris_error_detail(), "#13") && strstr(iris_error_detail(), "split") &&
            strstr(iris_error_detail(), "out of step") && strstr(iris_error_detail(), "iris_finalize") && iris_get_async_error(ctx) == IRIS_ERROR_MISMATCH &&
            iris_detail_check_fault(ctx) == IRIS_ERROR_MISMATCH && iris_detail_check_fault(ctx) == IRIS_ERROR_MISMATCH,
        "faults: a mismatch of a split call is IRIS_ERROR_MISMATCH naming the split and the call numbers out of step, and it stays (fatal)", "%s: %s", sname(st),
        iris_error_detail());
  /* a peer past the call this rank waited in (it faulted, and its later launches took the header slot): fatal, a mismatch naming that peer */
  words[IRIS_FAULT_WORD_FATAL] = IRIS_FAULT_MAKE(IRIS_FAULT_OUT_OF_STEP, 2, IRIS_FAULT_SITE_MAKE(1, IRIS_SITE_HEADER), 21);
  st = iris_get_async_error(ctx);
  check(st == IRIS_ERROR_MISMATCH && strstr(iris_error_detail(), "rank 2") && strstr(iris_error_detail(), "#21") && strstr(iris_error_detail(), "later call") &&
            strstr(iris_error_detail(), "out of step") && iris_detail_check_fault(ctx) == IRIS_ERROR_MISMATCH,
        "faults: a peer already past the call is IRIS_ERROR_MISMATCH naming it and the call numbers out of step, and it stays (fatal)", "%s: %s", sname(st),
        iris_error_detail());
  words[IRIS_FAULT_WORD_FATAL] = 0;
  void *before = NULL;
  check(iris_malloc(ctx, 1024, &before) == IRIS_SUCCESS && before, "faults: a block allocated before the abort", "%s", iris_error_detail());
  check(iris_abort(ctx) == IRIS_SUCCESS && iris_get_async_error(ctx) == IRIS_ERROR_ABORTED && iris_detail_check_fault(ctx) == IRIS_ERROR_ABORTED &&
            iris_abort(ctx) == IRIS_SUCCESS && iris_get_async_error(ctx) == IRIS_ERROR_ABORTED,
        "faults: iris_abort makes every later check IRIS_ERROR_ABORTED (twice is harmless)", "%s", iris_error_detail());
  { /* the host exchanges too return the fault at once (no wait for peers) */
    int x = 1, y[3] = {0, 0, 0};
    const iris_status_t sa = iris_allgather_host(ctx, &x, y, sizeof x), sv = iris_heap_verify(ctx);
    check(sa == IRIS_ERROR_ABORTED && sv == IRIS_ERROR_ABORTED, "faults: after iris_abort, iris_allgather_host and iris_heap_verify return it at once",
          "%s / %s: %s", sname(sa), sname(sv), iris_error_detail());
  }
  { /* the heap: no new block (iris_calloc would launch and wait), but a block is returned
     * (local bookkeeping: cleanup code runs); the calls before the abort are the block */
    void *p = (void *)1, *q = (void *)1, *r = (void *)1;
    const iris_status_t sm = iris_malloc(ctx, 512, &p), sc = iris_calloc(ctx, 512, &q), sl = iris_malloc_aligned(ctx, 512, 4096, &r);
    check(sm == IRIS_ERROR_ABORTED && sc == IRIS_ERROR_ABORTED && sl == IRIS_ERROR_ABORTED && !p && !q && !r,
          "faults: after iris_abort, iris_malloc, iris_calloc and iris_malloc_aligned return it at once and allocate nothing", "%s / %s / %s: %s", sname(sm),
          sname(sc), sname(sl), iris_error_detail());
    check(iris_free(ctx, before) == IRIS_SUCCESS, "faults: after iris_abort, iris_free still returns a block (cleanup runs)", "%s", iris_error_detail());
  }
  check(iris_abort(NULL) == IRIS_ERROR_INVALID_ARGUMENT && iris_get_async_error(NULL) == IRIS_ERROR_INVALID_ARGUMENT, "faults: NULL context refused", "%s",
        iris_error_detail());
  ctx->fault_host = NULL;
  iris_detail_host_only_free(ctx);
}

/* ------------------------------------------------------------- peer watch -- */
/* A child that sleeps until killed (the caller reaps it). */
static pid_t watch_sleeper(void) {
  pid_t p = fork();
  if (p == 0) {
    for (;;) pause();
  }
  return p;
}
/* Waits up to limit ms for ctx->gone; the ms it took, or -1. */
static long long watch_wait_gone(iris_t *ctx, long long limit) {
  const long long t0 = now_ms();
  while (!__atomic_load_n(&ctx->gone, __ATOMIC_ACQUIRE) && now_ms() - t0 < limit) usleep(1000);
  return __atomic_load_n(&ctx->gone, __ATOMIC_ACQUIRE) ? now_ms() - t0 : -1;
}
/* One round of the peer watch (internal/core/watch.h) over two live children as ranks 1
 * and 2 of a host-only context: nothing changes while they live; rank 2 killed (left a
 * zombie, as a launcher that has not reaped it yet) lowers the wait bound within limit ms
 * and names rank 2; a wait that then runs out is IRIS_ERROR_PEER_FAILED naming rank 2 and
 * the rank it waited for; the stop joins at once. */
/* The check name "peer watch (how): what" in buf. */
static const char *watch_name(char *buf, size_t n, const char *how, const char *what) {
  snprintf(buf, n, "peer watch (%s): %s", how, what);
  return buf;
}
static void watch_round(const char *how, int pidfd, long long limit) {
  char name[256];
  static char heap[1 << 16];
  unsigned long long words[IRIS_FAULT_WORDS] = {0, 0, 0};
  iris_t *ctx = iris_detail_host_only_ctx(sizeof heap, heap);
  pid_t a = watch_sleeper(), b = watch_sleeper();
  long long took, t0;
  iris_status_t st;
  if (!ctx || a < 0 || b < 0) {
    check(0, "peer watch: setup", "context %p, children %d %d", (void *)ctx, (int)a, (int)b);
    if (a > 0) { kill(a, SIGKILL); waitpid(a, NULL, 0); }
    if (b > 0) { kill(b, SIGKILL); waitpid(b, NULL, 0); }
    iris_detail_host_only_free(ctx);
    return;
  }
  ctx->local_size = 3;
  ctx->fault_host = words;
  ctx->wait_bound_ns = words[IRIS_FAULT_WORD_BOUND] = 5000000000ULL;
  ctx->pids[0] = (int64_t)getpid();
  ctx->pids[1] = (int64_t)a;
  ctx->pids[2] = (int64_t)b;
  iris_detail_watch_start(ctx);
  snprintf(name, sizeof name, "peer watch (%s): started over the two peers%s", how, pidfd ? ", each with a pidfd" : "");
  check(ctx->watch && ctx->watch->n == 2 && (!pidfd || (ctx->watch->pidfd[0] >= 0 && ctx->watch->pidfd[1] >= 0)), name, "%s: watch %p, %d peers", how, (void *)ctx->watch, ctx->watch ? ctx->watch->n : -1);
  usleep(120000);
  check(!ctx->gone && words[IRIS_FAULT_WORD_BOUND] == 5000000000ULL && iris_get_async_error(ctx) == IRIS_SUCCESS,
        watch_name(name, sizeof name, how, "while every peer lives, nothing changes"), "%s: gone %d, bound %llu", how, ctx->gone, words[IRIS_FAULT_WORD_BOUND]);
  kill(b, SIGKILL); /* not reaped yet: a zombie */
  took = watch_wait_gone(ctx, 3000);
  check(took >= 0 && took <= limit && ctx->gone == 3 && words[IRIS_FAULT_WORD_BOUND] == IRIS_DETAIL_BOUND_GONE && !words[IRIS_FAULT_WORD_FATAL],
        watch_name(name, sizeof name, how, "a peer's process killed (not yet reaped) lowers the wait bound at once, naming it, and records no fault"), "%s: %lld ms (limit %lld), gone %d, bound %llu",
        how, took, limit, ctx->gone, words[IRIS_FAULT_WORD_BOUND]);
  /* a wait of a kernel runs past the lowered bound: it records a timeout naming the peer it waited for */
  words[IRIS_FAULT_WORD_FATAL] = IRIS_FAULT_MAKE(IRIS_FAULT_TIMEOUT, 1, IRIS_FAULT_SITE_MAKE(1, IRIS_SITE_BARRIER), 17);
  st = iris_get_async_error(ctx);
  check(st == IRIS_ERROR_PEER_FAILED && strstr(iris_error_detail(), "rank 2 (pid") && strstr(iris_error_detail(), "has died") &&
            strstr(iris_error_detail(), "peer watch") && strstr(iris_error_detail(), "waiting for rank 1") && strstr(iris_error_detail(), "#17"),
        watch_name(name, sizeof name, how, "the wait that then runs out is IRIS_ERROR_PEER_FAILED naming the dead rank and the one it waited for"), "%s: %s: %s", how, sname(st),
        iris_error_detail());
  t0 = now_ms();
  iris_detail_watch_stop(ctx);
  check(!ctx->watch && now_ms() - t0 < 500, watch_name(name, sizeof name, how, "stopped and joined"), "%s: %lld ms", how, now_ms() - t0);
  /* a watch over a live peer only: the stop wakes the thread at once (pidfd: asleep in poll without a timeout) */
  ctx->pids[2] = 0;
  __atomic_store_n(&ctx->gone, 0, __ATOMIC_RELEASE);
  iris_detail_watch_start(ctx);
  usleep(20000);
  t0 = now_ms();
  iris_detail_watch_stop(ctx);
  check(now_ms() - t0 < 200 && !ctx->gone, watch_name(name, sizeof name, how, "a watch whose peers live stops at once"), "%s: %lld ms", how, now_ms() - t0);
  { /* a fork's child (a DataLoader worker) that finalizes its copy of the context: it has
     * the watch's struct but not its thread, so the stop must not join */
    pid_t c;
    int status = -1;
    long long waited;
    iris_detail_watch_start(ctx);
    c = fork();
    if (c == 0) {
      iris_detail_watch_stop(ctx);
      _exit(ctx->watch == NULL ? 0 : 3);
    }
    t0 = now_ms();
    while (c > 0 && waitpid(c, &status, WNOHANG) == 0 && now_ms() - t0 < 2000) usleep(1000);
    waited = now_ms() - t0;
    if (c > 0 && waited >= 2000) { kill(c, SIGKILL); waitpid(c, &status, 0); }
    check(c > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && waited < 2000 && ctx->watch,
          watch_name(name, sizeof name, how, "a fork's child stops its copy without joining the parent's thread"), "%s: status %d after %lld ms", how,
          status, waited);
    iris_detail_watch_stop(ctx);
  }
  kill(a, SIGKILL);
  waitpid(a, NULL, 0);
  waitpid(b, NULL, 0);
  ctx->fault_host = NULL;
  iris_detail_host_only_free(ctx);
}
static void test_peer_watch(void) {
  pid_t z;
  const char *was = getenv("IRIS_PEER_WATCH");
  /* iris_detail_pid_gone: this process lives; a zombie and a reaped child are gone */
  z = fork();
  if (z == 0) _exit(0);
  usleep(50000);
  {
    const int zombie = iris_detail_pid_gone((int64_t)z);
    waitpid(z, NULL, 0);
    check(!iris_detail_pid_gone((int64_t)getpid()) && zombie && iris_detail_pid_gone((int64_t)z) && !iris_detail_pid_gone(0),
          "peer watch: a process ended is gone (a zombie too, and once reaped); this one and pid 0 are not", "zombie %d", zombie);
  }
  char keep[64];
  snprintf(keep, sizeof keep, "%s", was ? was : "");
  unsetenv("IRIS_PEER_WATCH"); /* the default: on (restored after) */
  {
    const int fd = iris_detail_pidfd_open((int64_t)getpid());
    if (fd >= 0) {
      close(fd);
      watch_round("pidfd", 1, 200);
    } else {
      printf("SKIP: peer watch (pidfd): pidfd_open refused here (%s); the /proc fallback below is the watch's path on this machine\n", strerror(errno));
    }
  }
  iris_detail_watch_no_pidfd = 1;
  watch_round("/proc fallback", 0, 300);
  iris_detail_watch_no_pidfd = 0;
  { /* IRIS_PEER_WATCH: 0 starts no watch; anything but 0 and 1 is refused by iris_init's config check */
    static char heap[1 << 16];
    unsigned long long words[IRIS_FAULT_WORDS] = {0, 0, 0};
    iris_t *ctx = iris_detail_host_only_ctx(sizeof heap, heap);
    iris_config_t c;
    iris_status_t st;
    if (ctx) {
      ctx->local_size = 2;
      ctx->fault_host = words;
      ctx->pids[1] = (int64_t)getppid();
      setenv("IRIS_PEER_WATCH", "0", 1);
      iris_detail_watch_start(ctx);
      check(!ctx->watch, "peer watch: IRIS_PEER_WATCH=0 starts none", "");
      iris_detail_watch_stop(ctx);
      ctx->fault_host = NULL;
      iris_detail_host_only_free(ctx);
    }
    setenv("IRIS_PEER_WATCH", "yes", 1);
    st = iris_detail_resolve_config(NULL, &c);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "IRIS_PEER_WATCH"), "peer watch: IRIS_PEER_WATCH=yes is refused, naming it", "%s: %s",
          sname(st), iris_error_detail());
    if (was) setenv("IRIS_PEER_WATCH", keep, 1);
    else unsetenv("IRIS_PEER_WATCH");
  }
  { /* teams: the lowered bound goes to a team the dead rank is a member of, not to another */
    static char heap[1 << 16];
    iris_t *ctx = iris_detail_host_only_ctx(sizeof heap, heap);
    iris_team_t with, without;
    memset(&with, 0, sizeof with);
    memset(&without, 0, sizeof without);
    with.size = 2;
    with.world[0] = 0;
    with.world[1] = 2;
    without.size = 2;
    without.start = 0;
    without.stride = 1; /* ranks 0 and 1 */
    if (ctx) {
      ctx->local_size = 3;
      ctx->wait_bound_ns = 7000000000ULL;
      ctx->gone = 3; /* rank 2 */
      check(iris_detail_team_bound(ctx, &with) == IRIS_DETAIL_BOUND_GONE && iris_detail_team_bound(ctx, &without) == 7000000000ULL,
            "peer watch: a team with the dead rank gets the lowered bound, a team without it keeps its own", "%llu / %llu", iris_detail_team_bound(ctx, &with),
            iris_detail_team_bound(ctx, &without));
      ctx->gone = 0;
      check(iris_detail_team_bound(ctx, &with) == 7000000000ULL, "peer watch: no death, no change to a team's bound", "");
      iris_detail_host_only_free(ctx);
    }
  }
}

/* ------------------------------------------------------- call signatures -- */
/* The last steps of a collective launch's signature (internal/coll/plan.h): a call in
 * one launch keeps its inputs (only the split bit cleared); each launch of a split call
 * hashes the call's total count, its index and the number of launches, and carries the
 * split bit in its 32-bit form. The GPU side is tests/fault_test.cu (split-count,
 * split-place). */
static void test_coll_signature(void) {
  int ok = 1, bit_ok = 1;
  unsigned long long i;
  const unsigned long long chunk = 0x9e3779b97f4a7c15ULL; /* some chunk's signature inputs so far */
  for (i = 0; i < 4096; i++) { /* the split bit: set exactly for n > 1; every other bit of the 32-bit form kept */
    const unsigned long long sig = mix64(g_seed + i);
    const unsigned one = iris_coll_sig_fold(iris_coll_sig_part(sig, 300000, 0, 1)), marked = iris_coll_sig_fold(iris_coll_sig_mark(sig, 1));
    bit_ok &= !iris_coll_sig_is_split(one) && (one | IRIS_COLL_SIG_SPLIT) == (iris_coll_sig_fold(sig) | IRIS_COLL_SIG_SPLIT) && iris_coll_sig_is_split(marked) &&
              (marked & ~IRIS_COLL_SIG_SPLIT) == (one & ~IRIS_COLL_SIG_SPLIT) && iris_coll_sig_is_split(iris_coll_sig_fold(iris_coll_sig_part(sig, 300000, i % 5, 2 + i % 7))) &&
              (iris_coll_sig_fold(sig) & 1u);
  }
  check(bit_ok, "coll signature: the split bit is set for the launches of a split call only, the other bits as before", "seed %llu", (unsigned long long)g_seed);
  /* one launch: n 0 or 1 ignores total and k (the inputs of an unsplit call do not change) */
  ok = iris_coll_sig_part(chunk, 300000, 0, 1) == iris_coll_sig_mark(chunk, 0) && iris_coll_sig_part(chunk, 290000, 7, 1) == iris_coll_sig_mark(chunk, 0) &&
       iris_coll_sig_part(chunk, 5, 0, 0) == iris_coll_sig_mark(chunk, 0) && (iris_coll_sig_mark(chunk, 0) | 2ULL) == (chunk | 2ULL);
  check(ok, "coll signature: a call in one launch keeps its signature's inputs (total, index and count of launches left out)", "");
  /* 2 ranks, IRIS_COLL_STAGING=1M, fp32: step 262144; 300000 vs 290000 elements: launch 0
   * has the same chunk on both ranks, but not the same signature */
  ok = iris_coll_staging_step((size_t)1 << 20, 4, 2, 0) == 262144 && iris_coll_sig_part(chunk, 300000, 0, 2) != iris_coll_sig_part(chunk, 290000, 0, 2) &&
       iris_coll_sig_fold(iris_coll_sig_part(chunk, 300000, 0, 2)) != iris_coll_sig_fold(iris_coll_sig_part(chunk, 290000, 0, 2));
  check(ok, "coll signature: count 300000 vs 290000 in chunks of 262144: launch 0 differs already", "");
  /* the index and the number of launches enter too; a split launch never equals the unsplit one */
  ok = iris_coll_sig_part(chunk, 600000, 0, 3) != iris_coll_sig_part(chunk, 600000, 1, 3) && iris_coll_sig_part(chunk, 600000, 0, 3) != iris_coll_sig_part(chunk, 600000, 0, 2) &&
       iris_coll_sig_fold(iris_coll_sig_part(chunk, 300000, 0, 2)) != iris_coll_sig_fold(iris_coll_sig_part(chunk, 300000, 0, 1));
  check(ok, "coll signature: the launch's index and the number of launches enter; a split launch differs from the same call in one launch", "");
}
