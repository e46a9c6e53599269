/* tests/host/life_cycle.c: launched ranks that die, iris_init / iris_finalize cycles. */
#include "harness.h"

/* ----------------------------------------------- launcher life and death -- */
/* A launcher process (child of this test) starts 2 ranks that record their pids and
 * wait forever; the test then kills the launcher with sig and checks that no rank
 * survives 2 s later. */
static int launcher_child(int slot, void *arg) {
  iris_launch_t L;
  int my = -2;
  iris_status_t st;
  struct sigaction now;
  (void)slot, (void)arg;
  st = iris_launch_local(2, &L, &my);
  if (st != IRIS_SUCCESS) return child_fail(15, "launch: %s", iris_error_detail());
  if (my >= 0) {
    g_res[my].open_st = (int)getpid();
    for (;;) pause();
  }
  st = iris_launch_wait(&L, 20000);
  g_res[15].op_st = (int)st;
  snprintf(g_res[15].op_detail, sizeof g_res[15].op_detail, "%s", iris_error_detail());
  sigaction(SIGTERM, NULL, &now);
  g_res[15].out_null = now.sa_handler == SIG_DFL; /* the caller's handler is back */
  return 0;
}

static void test_launcher_killed(int sig) {
  int ranks[1] = {0}, i, gone = 0;
  char nm[96];
  pid_t lpid;
  long long t0;
  snprintf(nm, sizeof nm, "launcher killed by %s: no rank survives 2 s", sig == SIGKILL ? "SIGKILL" : "SIGTERM");
  (void)ranks;
  memset(g_res, 0, sizeof *g_res * MAXR);
#if defined(__linux__)
  prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphaned ranks become our children, so we can reap them */
#endif
  fflush(stdout);
  lpid = fork();
  if (lpid == 0) _exit(launcher_child(0, NULL));
  t0 = now_ms();
  while ((g_res[0].open_st == 0 || g_res[1].open_st == 0) && now_ms() - t0 < 3000) sleep_ms(2);
  if (g_res[0].open_st == 0 || g_res[1].open_st == 0) {
    check(0, nm, "the ranks never started: %s", g_res[15].why);
    kill(lpid, SIGKILL);
    waitpid(lpid, NULL, 0);
    return;
  }
  kill(lpid, sig);
  waitpid(lpid, NULL, 0);
  t0 = now_ms();
  while (now_ms() - t0 < 2000 && gone < 2) {
    gone = 0;
    for (i = 0; i < 2; i++) {
      pid_t p = (pid_t)g_res[i].open_st;
      waitpid(p, NULL, WNOHANG); /* reap it if it was handed to us */
      errno = 0;
      gone += kill(p, 0) != 0 && errno == ESRCH;
    }
    if (gone < 2) sleep_ms(5);
  }
  for (i = 0; i < 2; i++)
    if (kill((pid_t)g_res[i].open_st, 0) == 0) { /* do not leave it behind */
      kill((pid_t)g_res[i].open_st, SIGKILL);
      waitpid((pid_t)g_res[i].open_st, NULL, 0);
    }
#if defined(__linux__)
  prctl(PR_SET_CHILD_SUBREAPER, 0);
#endif
  check(gone == 2, nm, "%d of 2 ranks gone after %lld ms", gone, now_ms() - t0);
  if (sig == SIGTERM)
    check(g_res[15].op_st == IRIS_ERROR_RANK_FAILED && has(g_res[15].op_detail, "forwarded") && g_res[15].out_null, "launcher forwards SIGTERM and restores its handler",
          "wait: %s '%s', handler restored %d", sname((iris_status_t)g_res[15].op_st), g_res[15].op_detail, g_res[15].out_null);
}

/* ------------------------------------------------------------ life cycle -- */
static void test_life_cycle(void) {
  iris_t *ctx = iris_detail_host_only_ctx((size_t)1 << 20, FAKE_BASE);
  iris_status_t s1, s2, s3, s4, s5;
  void *p = NULL, *q = NULL;
  size_t used;
  if (!ctx) {
    check(0, "finalize twice", "no host-only context");
    return;
  }
  /* iris_calloc's zeroing fails here (no GPU, device -1): the block stays allocated */
  s1 = iris_calloc(ctx, 1000, &p);
  used = iris_heap_used(ctx);
  s2 = iris_malloc(ctx, 256, &q);
  check(s1 == IRIS_ERROR_GPU && p == FAKE_BASE && used == 1024 && s2 == IRIS_SUCCESS && q == (char *)FAKE_BASE + 1024,
        "calloc failure keeps the block (offsets stay symmetric)", "calloc %s (p %p), used %zu, next malloc %s at %p", sname(s1), p, used, sname(s2), q);
  s1 = iris_finalize(ctx);
  s2 = iris_finalize(ctx);
  check(s1 == IRIS_SUCCESS && s2 == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "finalized"), "finalize twice: the second is refused, harmlessly",
        "first %s, second %s: '%s'", sname(s1), sname(s2), iris_error_detail());
  p = (void *)&g_seed;
  s1 = iris_malloc(ctx, 256, &p);
  s2 = iris_barrier(ctx);
  s3 = iris_free(ctx, q);
  s4 = iris_heap_verify(ctx);
  s5 = iris_allgather_host(ctx, NULL, NULL, 0);
  check(s1 == IRIS_ERROR_INVALID_ARGUMENT && p == NULL && s2 == IRIS_ERROR_INVALID_ARGUMENT && s3 == IRIS_ERROR_INVALID_ARGUMENT &&
            s4 == IRIS_ERROR_INVALID_ARGUMENT && s5 == IRIS_ERROR_INVALID_ARGUMENT && iris_rank(ctx) == -1 && iris_world_size(ctx) == 0 &&
            iris_heap_base(ctx, 0) == NULL && iris_device_context(ctx).world_size == 0 && iris_detail_get_ext(ctx) == NULL,
        "a finalized context is refused by every call", "malloc %s, barrier %s, free %s, verify %s, allgather %s, rank %d", sname(s1), sname(s2), sname(s3),
        sname(s4), sname(s5), iris_rank(ctx));
  free(ctx); /* the tombstone */
  {
    iris_launch_t L;
    int my = -2;
    pid_t w;
    iris_status_t st = iris_launch_local(IRIS_MAX_RANKS + 1, &L, &my);
    errno = 0;
    w = waitpid(-1, NULL, WNOHANG);
    check(st == IRIS_ERROR_UNSUPPORTED && w == -1 && errno == ECHILD && has(iris_error_detail(), "IRIS_MAX_RANKS"), "launcher refuses more than IRIS_MAX_RANKS ranks",
          "%d ranks: %s '%s'", IRIS_MAX_RANKS + 1, sname(st), iris_error_detail());
  }
  {
    /* the in-process group barrier times out on the monotonic clock, naming the absent */
    iris_detail_group_t *g = iris_detail_group_create(2);
    long long t0 = now_ms(), ms;
    iris_status_t st = g ? iris_detail_group_allgather(g, 0, NULL, NULL, 0, 200) : IRIS_ERROR_OUT_OF_MEMORY;
    ms = now_ms() - t0;
    check(st == IRIS_ERROR_TIMEOUT && ms >= 190 && ms < 1500 && names_rank(iris_error_detail(), 1), "in-process barrier times out (monotonic clock)",
          "%s after %lld ms: '%s'", sname(st), ms, iris_error_detail());
    if (g) {
      iris_detail_group_release(g);
      iris_detail_group_release(g);
    }
  }
  {
    /* peers' strings are compared with a terminator forced in */
    iris_detail_record_t rec[2];
    make_recs(rec, 2);
    memset(rec[0].host, 'h', sizeof rec[0].host);
    memset(rec[1].host, 'h', sizeof rec[1].host);
    memset(rec[1].boot_id, 'b', sizeof rec[1].boot_id);
    memset(rec[0].boot_id, 'b', sizeof rec[0].boot_id);
    expect_recs("records: unterminated peer strings are cut, not overread", rec, 2, IRIS_SUCCESS, -1, NULL);
    check(rec[1].host[sizeof rec[1].host - 1] == 0 && rec[1].boot_id[sizeof rec[1].boot_id - 1] == 0, "records: terminators forced", "");
  }
}

/* Mode 3's in-process group: one rank's allgather met by another's barrier is a mismatch
 * (as the rendezvous reports it), never a barrier that passes and an allgather that
 * hands out the other rank's stale block. */
typedef struct group_call {
  iris_detail_group_t *g;
  int rank, delay_ms, calls;
  size_t bytes;
  iris_status_t st[2];
  unsigned char recv[2 * 8];
} group_call_t;
static void *group_call_thread(void *p) {
  group_call_t *c = (group_call_t *)p;
  unsigned char send[8];
  int i;
  memset(send, 0x40 + c->rank, sizeof send);
  sleep_ms(c->delay_ms);
  for (i = 0; i < c->calls; i++) c->st[i] = iris_detail_group_allgather(c->g, c->rank, send, c->recv, c->bytes, 400);
  return NULL;
}
static void test_group_mismatched_calls(void) {
  iris_detail_group_t *g = iris_detail_group_create(2);
  group_call_t a, b;
  pthread_t ta, tb;
  if (!g) {
    check(0, "in-process group: an allgather met by a barrier is a mismatch", "out of memory");
    return;
  }
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.g = b.g = g;
  a.rank = 0, a.bytes = 8, a.calls = 1, a.delay_ms = 0;                   /* rank 0: iris_allgather_host of 8 bytes */
  b.rank = 1, b.bytes = 0, b.calls = 2, b.delay_ms = 50;                  /* rank 1: two iris_barrier calls */
  pthread_create(&ta, NULL, group_call_thread, &a);
  pthread_create(&tb, NULL, group_call_thread, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  check(a.st[0] != IRIS_SUCCESS && b.st[0] == IRIS_ERROR_MISMATCH, "in-process group: an allgather met by a barrier is a mismatch",
        "rank 0's allgather %s (rank 1's block %02x, want 41), rank 1's barriers %s, %s", sname(a.st[0]), a.recv[8], sname(b.st[0]), sname(b.st[1]));
  iris_detail_group_release(g);
  iris_detail_group_release(g);
}
