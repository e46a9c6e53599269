#define IRIS_IMPLEMENTATION
#include "iris.h"
#include "iris_collectives.h" /* C part only: declarations and the planning arithmetic */
/* Host unit tests for iris.h (and the world-size arithmetic of iris_collectives.h): no
 * GPU needed.
 *
 *   make build/host_test && ./build/host_test
 *
 * Every check prints exactly one line, "PASS: <name>" or "FAIL: <name>: <reason>", on
 * stdout; the exit status is 0 iff nothing failed. Multi-rank scenarios fork one
 * process per rank; a child never prints: it reports through its exit code and a
 * shared (mmap) result slot, and the parent prints the check. */
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <sched.h>
#include <sys/mman.h>

/* ------------------------------------------------------------ reporting -- */
static int g_pass, g_fail;

/* One check line; the reason (printf-style) is only formatted on failure. */
static int check(int ok, const char *name, const char *fmt, ...) {
  if (ok) {
    printf("PASS: %s\n", name);
    g_pass++;
  } else {
    char why[1600];
    char *c;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    for (c = why; *c; c++)
      if (*c == '\n' || *c == '\r') *c = ' ';
    printf("FAIL: %s: %s\n", name, why);
    g_fail++;
  }
  fflush(stdout);
  return ok;
}

static void on_alarm(int sig) {
  static const char msg[] = "FAIL: watchdog: host_test ran for more than 55 s\n";
  ssize_t w;
  (void)sig;
  w = write(1, msg, sizeof msg - 1);
  (void)w;
  _exit(1);
}

/* ------------------------------------------------------------- helpers -- */
static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
static void sleep_ms(int ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
typedef struct { uint64_t s; } rng_t;
static uint64_t rng_next(rng_t *r) { return mix64(r->s++); }

static const char *sname(iris_status_t s) {
  static const char *names[] = {"IRIS_SUCCESS",       "IRIS_ERROR_INVALID_ARGUMENT", "IRIS_ERROR_INVALID_RANK", "IRIS_ERROR_OUT_OF_MEMORY",
                                "IRIS_ERROR_NOT_IN_HEAP", "IRIS_ERROR_MISMATCH",     "IRIS_ERROR_TIMEOUT",      "IRIS_ERROR_GPU",
                                "IRIS_ERROR_SYSTEM",  "IRIS_ERROR_PERMISSION",       "IRIS_ERROR_DIFFERENT_HOST", "IRIS_ERROR_UNSUPPORTED",
                                "IRIS_ERROR_BOOTSTRAP", "IRIS_ERROR_RANK_FAILED",      "IRIS_ERROR_PEER_FAILED", "IRIS_ERROR_ABORTED", "IRIS_ERROR_IN_USE"};
  if ((int)s >= 0 && (size_t)s < sizeof names / sizeof names[0]) return names[s];
  return "(not a status)";
}

/* Does s name rank r, as in "rank 2", "ranks 2", "ranks 0,2,3"? */
static int names_rank(const char *s, int r) {
  const char *p = s;
  while ((p = strstr(p, "rank")) != NULL) {
    p += 4;
    if (*p == 's') p++;
    while (*p == ' ') p++;
    while (*p >= '0' && *p <= '9') {
      char *end;
      long v = strtol(p, &end, 10);
      if (v == r) return 1;
      p = end;
      if (*p != ',') break;
      p++;
    }
  }
  return 0;
}
static int has(const char *s, const char *needle) { return s && strstr(s, needle) != NULL; }

/* ------------------------------------------------- forked multi-rank runs -- */
#define MAXR 16
typedef struct child_res {
  int open_st, op_st, out_null;
  long long open_ms, op_ms;
  char detail[1024];    /* iris_error_detail() after a failed open */
  char op_detail[1024]; /* ... after a failed collective */
  char why[512];        /* set when the child's own checks failed */
  char text[160];       /* free-form data for the parent (launcher tests) */
} child_res_t;
static child_res_t *g_res; /* MAP_SHARED: written by children, read by the parent */
static uint64_t g_seed;    /* chosen before any fork; children inherit it */
static char g_dir[64];     /* private (0700) directory for every rendezvous */
static int g_name_counter;

static void unique_name(char *buf, size_t cap, const char *tag) {
  snprintf(buf, cap, "ht-%ld-%d-%s", (long)getpid(), g_name_counter++, tag);
}

static int child_fail(int rank, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_res[rank].why, sizeof g_res[rank].why, fmt, ap);
  va_end(ap);
  return 1;
}

typedef int (*child_fn)(int rank, void *arg);

/* Fork one child per entry of ranks[], run fn(rank, arg) there, exit with its value.
 * Waits at most limit_ms (then kills what still runs and sets *hung). codes[i]:
 * exit code, 128+signal, or -1 when killed here. Returns the elapsed ms. */
static long long run_children(int n, const int *ranks, child_fn fn, void *arg, int limit_ms, int *codes, int *hung) {
  pid_t pids[MAXR];
  int running[MAXR], i, left = 0;
  long long t0;
  memset(g_res, 0, sizeof *g_res * MAXR);
  *hung = 0;
  fflush(stdout);
  fflush(stderr);
  t0 = now_ms();
  for (i = 0; i < n; i++) {
    pid_t pid = fork();
    running[i] = 0;
    codes[i] = -2;
    if (pid < 0) continue;
    if (pid == 0) {
      int rc = fn(ranks[i], arg);
      _exit(rc & 0xff);
    }
    pids[i] = pid;
    running[i] = 1;
    left++;
  }
  while (left > 0) {
    int progressed = 0;
    for (i = 0; i < n; i++) {
      int status = 0;
      pid_t w;
      if (!running[i]) continue;
      w = waitpid(pids[i], &status, WNOHANG);
      if (w == 0) continue;
      running[i] = 0;
      left--;
      progressed = 1;
      codes[i] = w < 0 ? -3 : WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -3;
    }
    if (left > 0 && now_ms() - t0 > limit_ms) {
      for (i = 0; i < n; i++)
        if (running[i]) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], NULL, 0);
          running[i] = 0;
          codes[i] = -1;
        }
      *hung = 1;
      break;
    }
    if (!progressed) sleep_ms(2);
  }
  return now_ms() - t0;
}

/* PASS iff every child exited 0 in time. */
static void expect_children_ok(const char *name, int n, const int *ranks, const int *codes, int hung, long long ms) {
  int i;
  if (hung) {
    check(0, name, "ranks still running after %lld ms were killed (hang)", ms);
    return;
  }
  for (i = 0; i < n; i++)
    if (codes[i] != 0) {
      check(0, name, "rank %d exited with %d: %s", ranks[i], codes[i], g_res[ranks[i]].why[0] ? g_res[ranks[i]].why : "(no reason recorded)");
      return;
    }
  check(1, name, "");
}

static void set_params(iris_rendezvous_params_t *p, const char *name, const char *dir, int rank, int world, int timeout_ms, unsigned long long heap) {
  memset(p, 0, sizeof *p);
  p->name = name;
  p->dir = dir;
  p->rank = rank;
  p->world_size = world;
  p->timeout_ms = timeout_ms;
  p->heap_size = heap;
}

static unsigned char pay(uint64_t seed, int rank, int iter, int j) {
  return (unsigned char)(mix64(seed ^ ((uint64_t)(unsigned)rank << 48) ^ ((uint64_t)(unsigned)iter << 20) ^ (uint64_t)(unsigned)j) >> 13);
}

/* One allgather of `bytes` bytes of pay(seed, rank, iter, .) and its verification,
 * including that nothing past world*bytes was written. */
static int gather_and_verify(iris_rendezvous_t *r, int rank, int world, int iter, size_t bytes) {
  unsigned char send[64], table[MAXR * 64 + 64];
  size_t j, k;
  int q;
  iris_status_t st;
  for (j = 0; j < bytes; j++) send[j] = pay(g_seed, rank, iter, (int)j);
  memset(table, 0xA5, sizeof table);
  st = iris_rendezvous_allgather(r, send, table, bytes);
  if (st != IRIS_SUCCESS) return child_fail(rank, "allgather #%d of %zu bytes: %s: %s", iter, bytes, sname(st), iris_error_detail());
  for (q = 0; q < world; q++)
    for (j = 0; j < bytes; j++)
      if (table[(size_t)q * bytes + j] != pay(g_seed, q, iter, (int)j))
        return child_fail(rank, "allgather #%d: byte %zu of rank %d's block is %u, expected %u", iter, j, q, table[(size_t)q * bytes + j],
                          pay(g_seed, q, iter, (int)j));
  for (k = (size_t)world * bytes; k < sizeof table; k++)
    if (table[k] != 0xA5) return child_fail(rank, "allgather #%d wrote past world*bytes (byte %zu)", iter, k);
  return 0;
}

/* ------------------------------------------------- scenario: success -- */
typedef struct succ_arg {
  const char *name, *dir;
  int world, late_rank, late_ms, iters, timeout_ms;
} succ_arg_t;

static int child_success(int rank, void *argp) {
  const succ_arg_t *a = (const succ_arg_t *)argp;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  iris_status_t st;
  int i;
  if (rank == a->late_rank) sleep_ms(a->late_ms);
  set_params(&p, a->name, a->dir, rank, a->world, a->timeout_ms, 1ULL << 30);
  st = iris_rendezvous_open(&p, &r);
  if (st != IRIS_SUCCESS) return child_fail(rank, "open: %s: %s", sname(st), iris_error_detail());
  if (!r) return child_fail(rank, "open succeeded but *out is NULL");
  if (gather_and_verify(r, rank, a->world, 0, 40)) return 1;
  for (i = 1; i <= a->iters; i++) {
    size_t bytes = 1 + (size_t)((i * 13 + 5) % 64);
    if ((st = iris_rendezvous_barrier(r)) != IRIS_SUCCESS) return child_fail(rank, "barrier #%d: %s: %s", i, sname(st), iris_error_detail());
    if (gather_and_verify(r, rank, a->world, i, bytes)) return 1;
  }
  iris_rendezvous_close(r);
  return 0;
}

static void run_success(const char *check_name, int world, int late_rank, int late_ms, int iters, const char *dir, char *name_out, size_t name_cap) {
  char name[80];
  int ranks[MAXR], codes[MAXR], hung, i;
  long long ms;
  succ_arg_t a;
  unique_name(name, sizeof name, "ok");
  a.name = name;
  a.dir = dir;
  a.world = world;
  a.late_rank = late_rank;
  a.late_ms = late_ms;
  a.iters = iters;
  a.timeout_ms = 5000;
  for (i = 0; i < MAXR; i++) ranks[i] = i;
  ms = run_children(world, ranks, child_success, &a, 15000, codes, &hung);
  expect_children_ok(check_name, world, ranks, codes, hung, ms);
  if (name_out) snprintf(name_out, name_cap, "%s", name);
}

/* ------------------------------- scenario: failures at or after bring-up -- */
typedef struct gen_arg {
  const char *name, *dir;
  int world[MAXR];              /* world size each rank claims */
  unsigned long long heap[MAXR];/* heap size each rank claims */
  int timeout_ms;
  int leaver;                   /* this rank closes and exits right after open */
  int barrier_after;            /* the others call a barrier after a good open */
} gen_arg_t;

/* Exit code: the iris status of the last step (100: a failed open left *out set). */
static int child_generic(int rank, void *argp) {
  const gen_arg_t *a = (const gen_arg_t *)argp;
  child_res_t *res = &g_res[rank];
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = (iris_rendezvous_t *)&p; /* a non-NULL sentinel: open must clear it on failure */
  iris_status_t st;
  long long t0;
  set_params(&p, a->name, a->dir, rank, a->world[rank], a->timeout_ms, a->heap[rank]);
  t0 = now_ms();
  st = iris_rendezvous_open(&p, &r);
  res->open_ms = now_ms() - t0;
  res->open_st = (int)st;
  res->out_null = r == NULL;
  snprintf(res->detail, sizeof res->detail, "%s", iris_error_detail());
  if (st != IRIS_SUCCESS) return r ? 100 : (int)st;
  if (rank == a->leaver) {
    iris_rendezvous_close(r);
    return 0;
  }
  if (a->barrier_after) {
    t0 = now_ms();
    st = iris_rendezvous_barrier(r);
    res->op_ms = now_ms() - t0;
    res->op_st = (int)st;
    snprintf(res->op_detail, sizeof res->op_detail, "%s", iris_error_detail());
  }
  iris_rendezvous_close(r);
  return (int)st;
}

static void gen_init(gen_arg_t *a, const char *name, int world, int timeout_ms) {
  int i;
  memset(a, 0, sizeof *a);
  a->name = name;
  a->dir = g_dir;
  a->timeout_ms = timeout_ms;
  a->leaver = -1;
  for (i = 0; i < MAXR; i++) {
    a->world[i] = world;
    a->heap[i] = 1ULL << 30;
  }
}

static void test_rendezvous_missing_rank(void) {
  const int timeout = 1500;
  char name[80];
  gen_arg_t a;
  int ranks[2] = {0, 1}, codes[2], hung;
  long long ms;
  unique_name(name, sizeof name, "missing");
  gen_init(&a, name, 3, timeout);
  ms = run_children(2, ranks, child_generic, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && codes[1] == IRIS_ERROR_TIMEOUT, "rendezvous missing rank timeout status",
        "hung %d, rank 0 exit %d (%s), rank 1 exit %d (%s); detail 0: %s; detail 1: %s", hung, codes[0], sname((iris_status_t)codes[0]), codes[1],
        sname((iris_status_t)codes[1]), g_res[0].detail, g_res[1].detail);
  check(!hung && g_res[0].out_null && g_res[1].out_null, "rendezvous missing rank out is null", "a failed open left *out non-NULL (%d, %d)", g_res[0].out_null,
        g_res[1].out_null);
  check(names_rank(g_res[0].detail, 2) && !names_rank(g_res[0].detail, 1) && has(g_res[0].detail, "never arrived"), "rendezvous missing rank detail rank 0",
        "detail should name rank 2 (only) as never arrived: '%s'", g_res[0].detail);
  check(names_rank(g_res[1].detail, 2) || has(g_res[1].detail, "timed out"), "rendezvous missing rank detail rank 1",
        "detail should name rank 2 or say it timed out: '%s'", g_res[1].detail);
  check(!hung && g_res[0].open_ms >= timeout - 50 && g_res[0].open_ms <= timeout + 3000 && g_res[1].open_ms <= timeout + 3000 && ms <= timeout + 3500,
        "rendezvous missing rank timing", "timeout %d ms: rank 0 gave up after %lld ms, rank 1 after %lld ms, whole run %lld ms", timeout, g_res[0].open_ms,
        g_res[1].open_ms, ms);
}

static void test_rendezvous_rank1_alone(void) {
  char name[80];
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  iris_status_t st;
  long long t0, ms;
  unique_name(name, sizeof name, "alone");
  set_params(&p, name, g_dir, 1, 2, 300, 1ULL << 30);
  t0 = now_ms();
  st = iris_rendezvous_open(&p, &r);
  ms = now_ms() - t0;
  check(st == IRIS_ERROR_TIMEOUT && r == NULL && ms >= 250 && ms < 3000 && has(iris_error_detail(), "rank 0"), "rendezvous rank 1 alone times out",
        "status %s after %lld ms (timeout 300), out %p, detail '%s'", sname(st), ms, (void *)r, iris_error_detail());
}

static void test_rendezvous_mismatch(const char *check_name, int w0, int w1, unsigned long long h0, unsigned long long h1, const char *word) {
  char name[80];
  gen_arg_t a;
  int ranks[2] = {0, 1}, codes[2], hung;
  long long ms;
  unique_name(name, sizeof name, "mm");
  gen_init(&a, name, 2, 5000);
  a.world[0] = w0;
  a.world[1] = w1;
  a.heap[0] = h0;
  a.heap[1] = h1;
  ms = run_children(2, ranks, child_generic, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_MISMATCH && codes[1] == IRIS_ERROR_MISMATCH && has(g_res[0].detail, word) && has(g_res[1].detail, word) && ms < 4000,
        check_name, "hung %d after %lld ms; rank 0: %s '%s'; rank 1: %s '%s' (want IRIS_ERROR_MISMATCH mentioning '%s' on both, promptly)", hung, ms,
        sname((iris_status_t)codes[0]), g_res[0].detail, sname((iris_status_t)codes[1]), g_res[1].detail, word);
}

static void test_rendezvous_rank_leaves(void) {
  char name[80];
  gen_arg_t a;
  int ranks[3] = {0, 1, 2}, codes[3], hung;
  long long ms;
  unique_name(name, sizeof name, "leave");
  gen_init(&a, name, 3, 5000);
  a.leaver = 2;
  a.barrier_after = 1;
  ms = run_children(3, ranks, child_generic, &a, 12000, codes, &hung);
  if (hung || g_res[0].open_st != IRIS_SUCCESS || g_res[1].open_st != IRIS_SUCCESS || g_res[2].open_st != IRIS_SUCCESS) {
    check(0, "rendezvous rank leaves rank 0", "bring-up failed first: hung %d (%lld ms); open: %s, %s, %s; '%s'", hung, ms, sname((iris_status_t)g_res[0].open_st),
          sname((iris_status_t)g_res[1].open_st), sname((iris_status_t)g_res[2].open_st), g_res[0].detail);
    check(0, "rendezvous rank leaves rank 1", "bring-up failed first");
    return;
  }
  check(codes[0] != IRIS_SUCCESS && g_res[0].op_st != IRIS_SUCCESS && g_res[0].op_ms < 1500 && names_rank(g_res[0].op_detail, 2), "rendezvous rank leaves rank 0",
        "rank 0's barrier (timeout 5000 ms) returned %s after %lld ms, detail '%s' (want a failure within 1.5 s naming rank 2)",
        sname((iris_status_t)g_res[0].op_st), g_res[0].op_ms, g_res[0].op_detail);
  check(codes[1] != IRIS_SUCCESS && g_res[1].op_st != IRIS_SUCCESS && g_res[1].op_ms < 3500 && names_rank(g_res[1].op_detail, 2), "rendezvous rank leaves rank 1",
        "rank 1's barrier returned %s after %lld ms, detail '%s' (want a failure naming rank 2, forwarded by rank 0)", sname((iris_status_t)g_res[1].op_st),
        g_res[1].op_ms, g_res[1].op_detail);
}

/* ------------------------------------------- in-process rendezvous checks -- */
static void expect_open(const char *check_name, const iris_rendezvous_params_t *p, int null_out, iris_status_t want) {
  iris_rendezvous_t *r = (iris_rendezvous_t *)&g_seed; /* sentinel */
  iris_status_t st;
  long long t0 = now_ms(), ms;
  st = iris_rendezvous_open(p, null_out ? NULL : &r);
  ms = now_ms() - t0;
  if (st == IRIS_SUCCESS && !null_out && r && r != (iris_rendezvous_t *)&g_seed) iris_rendezvous_close(r);
  check(st == want && (null_out || r == NULL) && iris_error_detail()[0] != 0 && ms < 1000, check_name, "status %s (want %s), out %s, after %lld ms, detail '%s'",
        sname(st), sname(want), null_out ? "n/a" : r == NULL ? "NULL" : "not NULL", ms, iris_error_detail());
}

static void test_rendezvous_bad_args(void) {
  iris_rendezvous_params_t p;
  char name[80], longname[80], longdir[240], deepdir[120];
  iris_rendezvous_t *r = NULL;
  iris_status_t st;
  unsigned char buf[16];
  unique_name(name, sizeof name, "bad");

  expect_open("rendezvous bad args null params", NULL, 0, IRIS_ERROR_INVALID_ARGUMENT);
  set_params(&p, name, g_dir, 0, 2, 1500, 0);
  expect_open("rendezvous bad args null out", &p, 1, IRIS_ERROR_INVALID_ARGUMENT);
  set_params(&p, NULL, g_dir, 0, 2, 1500, 0);
  expect_open("rendezvous bad args null name", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  set_params(&p, "", g_dir, 0, 2, 1500, 0);
  expect_open("rendezvous bad args empty name", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  set_params(&p, "a/b", g_dir, 0, 2, 1500, 0);
  expect_open("rendezvous bad args name with slash", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  set_params(&p, "../escape", g_dir, 0, 2, 1500, 0);
  expect_open("rendezvous bad args name with dotdot slash", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  set_params(&p, "a b", g_dir, 0, 2, 1500, 0);
  expect_open("rendezvous bad args name with space", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  memset(longname, 'x', 65);
  longname[65] = 0;
  set_params(&p, longname, g_dir, 0, 2, 1500, 0);
  expect_open("rendezvous bad args name of 65 chars", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  set_params(&p, name, g_dir, 2, 2, 1500, 0);
  expect_open("rendezvous bad args rank equals world", &p, 0, IRIS_ERROR_INVALID_RANK);
  set_params(&p, name, g_dir, 5, 2, 1500, 0);
  expect_open("rendezvous bad args rank above world", &p, 0, IRIS_ERROR_INVALID_RANK);
  set_params(&p, name, g_dir, -1, 2, 1500, 0);
  expect_open("rendezvous bad args negative rank", &p, 0, IRIS_ERROR_INVALID_RANK);
  set_params(&p, name, g_dir, 0, 0, 1500, 0);
  expect_open("rendezvous bad args world 0", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  set_params(&p, name, g_dir, 0, 2, 0, 0);
  expect_open("rendezvous bad args timeout 0", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  set_params(&p, name, g_dir, 0, 2, -5, 0);
  expect_open("rendezvous bad args negative timeout", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  memset(longdir, 'd', sizeof longdir - 1);
  longdir[0] = '/';
  longdir[sizeof longdir - 1] = 0;
  set_params(&p, name, longdir, 0, 2, 1500, 0);
  expect_open("rendezvous bad args dir too long", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);
  /* fits the 160-byte dir buffer but not a Unix socket path (108 bytes) */
  memset(deepdir, 'e', sizeof deepdir - 1);
  memcpy(deepdir, "/tmp/", 5);
  deepdir[sizeof deepdir - 1] = 0;
  set_params(&p, name, deepdir, 0, 2, 1500, 0);
  expect_open("rendezvous bad args socket path too long", &p, 0, IRIS_ERROR_INVALID_ARGUMENT);

  /* boundary: 64 characters is legal (world 1 needs no peer) */
  memset(longname, 'y', 64);
  longname[64] = 0;
  set_params(&p, longname, g_dir, 0, 1, 1500, 0);
  st = iris_rendezvous_open(&p, &r);
  check(st == IRIS_SUCCESS && r != NULL, "rendezvous name of 64 chars accepted", "status %s, detail '%s'", sname(st), iris_error_detail());
  if (st == IRIS_SUCCESS) iris_rendezvous_close(r);

  st = iris_rendezvous_allgather(NULL, buf, buf, 4);
  check(st == IRIS_ERROR_INVALID_ARGUMENT, "rendezvous bad args allgather null", "status %s", sname(st));
  st = iris_rendezvous_barrier(NULL);
  check(st == IRIS_ERROR_INVALID_ARGUMENT, "rendezvous bad args barrier null", "status %s", sname(st));
  iris_rendezvous_close(NULL); /* must not crash */
  check(1, "rendezvous close null", "");
}

static void test_rendezvous_world1(void) {
  char name[80];
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  unsigned char send[40], recv[40 + 8];
  iris_status_t st, st2 = IRIS_SUCCESS, st3 = IRIS_SUCCESS;
  int j, ok = 1;
  unique_name(name, sizeof name, "w1");
  set_params(&p, name, g_dir, 0, 1, 1500, 0);
  st = iris_rendezvous_open(&p, &r);
  if (st == IRIS_SUCCESS) {
    for (j = 0; j < 40; j++) send[j] = pay(g_seed, 0, 99, j);
    memset(recv, 0xA5, sizeof recv);
    st2 = iris_rendezvous_allgather(r, send, recv, 40);
    st3 = iris_rendezvous_barrier(r);
    for (j = 0; j < 40; j++) ok &= recv[j] == send[j];
    for (j = 40; j < 48; j++) ok &= recv[j] == 0xA5;
    st = iris_rendezvous_allgather(r, NULL, recv, 4);
    ok &= st == IRIS_ERROR_INVALID_ARGUMENT;
    iris_rendezvous_close(r);
    st = IRIS_SUCCESS;
  }
  check(st == IRIS_SUCCESS && st2 == IRIS_SUCCESS && st3 == IRIS_SUCCESS && ok, "rendezvous world 1", "open %s, allgather %s, barrier %s, table ok %d; '%s'", sname(st),
        sname(st2), sname(st3), ok, iris_error_detail());
}

static void test_rendezvous_unsafe_dir(void) {
  char open_dir[128], link_dir[128], name[80];
  iris_rendezvous_params_t p;
  snprintf(open_dir, sizeof open_dir, "%s/open", g_dir);
  snprintf(link_dir, sizeof link_dir, "%s/link", g_dir);
  if (mkdir(open_dir, 0755) != 0 || chmod(open_dir, 0755) != 0) {
    check(0, "rendezvous unsafe dir rank 0", "cannot create %s: %s", open_dir, strerror(errno));
    return;
  }
  unique_name(name, sizeof name, "unsafe");
  set_params(&p, name, open_dir, 0, 2, 1500, 0);
  expect_open("rendezvous unsafe dir rank 0", &p, 0, IRIS_ERROR_PERMISSION);
  check(has(iris_error_detail(), "private") && has(iris_error_detail(), "0700"), "rendezvous unsafe dir detail", "detail should say private/0700: '%s'",
        iris_error_detail());
  set_params(&p, name, open_dir, 1, 2, 1500, 0);
  expect_open("rendezvous unsafe dir rank 1", &p, 0, IRIS_ERROR_PERMISSION);
  /* a symlink to a private directory is not itself a private directory */
  if (symlink(g_dir, link_dir) != 0) {
    check(0, "rendezvous symlink dir refused", "symlink: %s", strerror(errno));
  } else {
    set_params(&p, name, link_dir, 0, 2, 1500, 0);
    expect_open("rendezvous symlink dir refused", &p, 0, IRIS_ERROR_PERMISSION);
    unlink(link_dir);
  }
  rmdir(open_dir);
}

static void test_rendezvous_creates_dir(void) {
  char sub[128];
  struct stat st;
  snprintf(sub, sizeof sub, "%s/sub", g_dir);
  run_success("rendezvous creates missing dir", 2, 0, 100, 1, sub, NULL, 0);
  check(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700, "rendezvous created dir is 0700", "lstat %s: mode %03o",
        sub, (unsigned)(st.st_mode & 0777));
  rmdir(sub);
}

/* ------------------------------------------------------------ launcher -- */
static int child_launch_env(int my_rank, int world, int wfd) {
  const char *er = getenv("IRIS_RANK"), *ew = getenv("IRIS_WORLD_SIZE"), *en = getenv("IRIS_RENDEZVOUS");
  char line[200], want[16];
  ssize_t w;
  int code = 0;
  snprintf(want, sizeof want, "%d", my_rank);
  if (!er || strcmp(er, want) != 0) code = 10;
  snprintf(want, sizeof want, "%d", world);
  if (!ew || strcmp(ew, want) != 0) code = code ? code : 11;
  if (!en || !*en) code = code ? code : 12;
  snprintf(line, sizeof line, "%d %s\n", my_rank, en && *en ? en : "-");
  w = write(wfd, line, strlen(line));
  if (w != (ssize_t)strlen(line)) code = code ? code : 13;
  snprintf(g_res[my_rank].why, sizeof g_res[my_rank].why, "IRIS_RANK=%s IRIS_WORLD_SIZE=%s IRIS_RENDEZVOUS=%s", er ? er : "(unset)", ew ? ew : "(unset)",
           en ? en : "(unset)");
  return code;
}

/* Launch 3 ranks; each checks its environment and sends "rank name" through a
 * pipe. Returns the rendezvous name seen (for the freshness check). */
static void test_launcher_env(char *name_out, size_t cap) {
  iris_launch_t L;
  int fds[2], my = -2, i, seen[3] = {0, 0, 0}, lines = 0, bad = 0;
  iris_status_t st, wst;
  char buf[1024], first[160] = "", why[700] = "";
  const char *parent_before = getenv("IRIS_RENDEZVOUS");
  char parent_saved[160];
  size_t got = 0;
  ssize_t k;
  snprintf(parent_saved, sizeof parent_saved, "%s", parent_before ? parent_before : "");
  name_out[0] = 0;
  if (pipe(fds) != 0) {
    check(0, "launcher 3 ranks environment", "pipe: %s", strerror(errno));
    return;
  }
  memset(g_res, 0, sizeof *g_res * MAXR);
  fflush(stdout);
  st = iris_launch_local(3, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) {
    int code;
    close(fds[0]);
    code = child_launch_env(my, 3, fds[1]);
    close(fds[1]);
    _exit(code);
  }
  close(fds[1]);
  if (st != IRIS_SUCCESS) {
    close(fds[0]);
    check(0, "launcher 3 ranks environment", "iris_launch_local: %s: %s", sname(st), iris_error_detail());
    return;
  }
  wst = iris_launch_wait(&L, 10000);
  while (got < sizeof buf - 1 && (k = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)k;
  buf[got] = 0;
  close(fds[0]);
  {
    char *save = NULL, *ln;
    for (ln = strtok_r(buf, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
      int rk = -1;
      char nm[160];
      lines++;
      if (sscanf(ln, "%d %159s", &rk, nm) != 2 || rk < 0 || rk > 2) {
        bad = 1;
        snprintf(why, sizeof why, "malformed line '%s'", ln);
        continue;
      }
      seen[rk]++;
      if (!first[0]) snprintf(first, sizeof first, "%s", nm);
      else if (strcmp(first, nm) != 0) {
        bad = 1;
        snprintf(why, sizeof why, "ranks saw different names: '%s' vs '%s'", first, nm);
      }
    }
  }
  for (i = 0; i < 3; i++)
    if (L.exit_codes[i] != 0 && !why[0]) snprintf(why, sizeof why, "rank %d exited %d: %s", i, L.exit_codes[i], g_res[i].why);
  check(wst == IRIS_SUCCESS && L.num_ranks == 3 && L.exit_codes[0] == 0 && L.exit_codes[1] == 0 && L.exit_codes[2] == 0, "launcher 3 ranks exit 0",
        "iris_launch_wait: %s (%s), num_ranks %d, exit codes %d %d %d; %s", sname(wst), iris_error_detail(), L.num_ranks, L.exit_codes[0], L.exit_codes[1],
        L.exit_codes[2], why);
  check(L.pids[0] > 0 && L.pids[1] > 0 && L.pids[2] > 0 && L.pids[0] != L.pids[1] && L.pids[1] != L.pids[2] && L.pids[0] != L.pids[2] &&
            L.pids[0] != (int)getpid(),
        "launcher 3 ranks distinct pids", "pids %d %d %d", L.pids[0], L.pids[1], L.pids[2]);
  check(!bad && lines == 3 && seen[0] == 1 && seen[1] == 1 && seen[2] == 1 && first[0] && strcmp(first, "-") != 0, "launcher 3 ranks environment",
        "%d lines, ranks seen %d/%d/%d, name '%s'; %s", lines, seen[0], seen[1], seen[2], first, why);
  {
    const char *after = getenv("IRIS_RENDEZVOUS");
    check((parent_before == NULL) == (after == NULL) && strcmp(parent_saved, after ? after : "") == 0, "launcher leaves parent environment",
          "parent IRIS_RENDEZVOUS was '%s', now '%s'", parent_saved, after ? after : "(unset)");
  }
  snprintf(name_out, cap, "%s", first);
}

/* Launched ranks meet at the rendezvous the launcher named. */
static void test_launcher_rendezvous(const char *earlier_name) {
  iris_launch_t L;
  int my = -2, i, ok;
  iris_status_t st, wst;
  char why[700] = "";
  memset(g_res, 0, sizeof *g_res * MAXR);
  st = iris_launch_local(3, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) {
    iris_rendezvous_params_t p;
    iris_rendezvous_t *r = NULL;
    const char *en = getenv("IRIS_RENDEZVOUS"), *er = getenv("IRIS_RANK"), *ew = getenv("IRIS_WORLD_SIZE");
    int rank, world;
    if (!en || !er || !ew) _exit(child_fail(my, "environment incomplete"));
    snprintf(g_res[my].text, sizeof g_res[my].text, "%s", en);
    rank = atoi(er);
    world = atoi(ew);
    set_params(&p, en, g_dir, rank, world, 5000, 1ULL << 30);
    st = iris_rendezvous_open(&p, &r);
    if (st != IRIS_SUCCESS) _exit(child_fail(my, "open '%s': %s: %s", en, sname(st), iris_error_detail()));
    if (gather_and_verify(r, rank, world, 7, 40)) _exit(1);
    if ((st = iris_rendezvous_barrier(r)) != IRIS_SUCCESS) _exit(child_fail(my, "barrier: %s: %s", sname(st), iris_error_detail()));
    iris_rendezvous_close(r);
    _exit(0);
  }
  if (st != IRIS_SUCCESS) {
    check(0, "launcher ranks meet at rendezvous", "iris_launch_local: %s: %s", sname(st), iris_error_detail());
    return;
  }
  wst = iris_launch_wait(&L, 10000);
  for (i = 0; i < 3; i++)
    if (L.exit_codes[i] != 0 && !why[0]) snprintf(why, sizeof why, "rank %d exited %d: %s", i, L.exit_codes[i], g_res[i].why);
  check(wst == IRIS_SUCCESS && !why[0], "launcher ranks meet at rendezvous", "iris_launch_wait: %s (%s); %s", sname(wst), iris_error_detail(), why);
  ok = g_res[0].text[0] && strcmp(g_res[0].text, earlier_name) != 0;
  check(ok, "launcher fresh rendezvous name", "this launch's name '%s', the earlier launch's '%s'", g_res[0].text, earlier_name);
}

static void test_launcher_failed_rank(void) {
  iris_launch_t L;
  int my = -2;
  iris_status_t st, wst;
  const char *d;
  st = iris_launch_local(3, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) _exit(my == 1 ? 3 : 0);
  if (st != IRIS_SUCCESS) {
    check(0, "launcher failed rank status", "iris_launch_local: %s", sname(st));
    return;
  }
  wst = iris_launch_wait(&L, 10000);
  d = iris_error_detail();
  check(wst == IRIS_ERROR_RANK_FAILED, "launcher failed rank status", "iris_launch_wait: %s (want IRIS_ERROR_RANK_FAILED): '%s'", sname(wst), d);
  check(L.exit_codes[0] == 0 && L.exit_codes[1] == 3 && L.exit_codes[2] == 0, "launcher failed rank exit codes", "exit codes %d %d %d (want 0 3 0)", L.exit_codes[0],
        L.exit_codes[1], L.exit_codes[2]);
  check(names_rank(d, 1) && !names_rank(d, 0) && !names_rank(d, 2) && has(d, "3"), "launcher failed rank detail", "detail should name rank 1 (only) and code 3: '%s'", d);
  /* a large exit code is an exit code, not a signal */
  st = iris_launch_local(2, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) _exit(my == 0 ? 200 : 0);
  wst = iris_launch_wait(&L, 10000);
  d = iris_error_detail();
  check(wst == IRIS_ERROR_RANK_FAILED && has(d, "exited with 200") && !has(d, "signal"), "launcher exit code 200 is not a signal", "%s: '%s'", sname(wst), d);
}

static void test_launcher_signal(void) {
  iris_launch_t L;
  int my = -2;
  iris_status_t st, wst;
  st = iris_launch_local(2, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) {
    if (my == 0) {
      signal(SIGTERM, SIG_DFL);
      kill(getpid(), SIGTERM);
      sleep_ms(5000);
    }
    _exit(0);
  }
  if (st != IRIS_SUCCESS) {
    check(0, "launcher killed rank", "iris_launch_local: %s", sname(st));
    return;
  }
  wst = iris_launch_wait(&L, 10000);
  check(wst == IRIS_ERROR_RANK_FAILED && L.exit_codes[0] == 128 + SIGTERM && L.exit_codes[1] == 0 && names_rank(iris_error_detail(), 0) &&
            has(iris_error_detail(), "signal"),
        "launcher killed rank", "status %s, exit codes %d %d (want %d 0), detail '%s'", sname(wst), L.exit_codes[0], L.exit_codes[1], 128 + SIGTERM,
        iris_error_detail());
}

/* deaf: rank 1 ignores SIGTERM, so only the SIGKILL after the grace period ends it */
static void test_launcher_timeout(int deaf) {
  iris_launch_t L;
  int my = -2, gone, want = deaf ? SIGKILL : SIGTERM;
  iris_status_t st, wst;
  long long t0, ms;
  const char *d;
  if (deaf) setenv("IRIS_LAUNCH_GRACE_MS", "300", 1);
  st = iris_launch_local(2, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) {
    if (my == 1) {
      if (deaf) signal(SIGTERM, SIG_IGN);
      for (;;) pause();
    }
    _exit(0);
  }
  if (st != IRIS_SUCCESS) {
    check(0, "launcher timeout status", "iris_launch_local: %s", sname(st));
    return;
  }
  t0 = now_ms();
  wst = iris_launch_wait(&L, 500);
  ms = now_ms() - t0;
  d = iris_error_detail();
  unsetenv("IRIS_LAUNCH_GRACE_MS");
  check(wst == IRIS_ERROR_TIMEOUT && ms >= 450 && ms < (deaf ? 800 + 1000 : 3000), deaf ? "launcher timeout status (rank ignores SIGTERM)" : "launcher timeout status",
        "status %s after %lld ms (wait timeout 500 ms): '%s'", sname(wst), ms, d);
  check(names_rank(d, 1) && !names_rank(d, 0) && has(d, "killed"), deaf ? "launcher timeout detail (rank ignores SIGTERM)" : "launcher timeout detail",
        "detail should name rank 1 (only) as killed: '%s'", d);
  errno = 0;
  gone = kill((pid_t)L.pids[1], 0) != 0 && errno == ESRCH;
  if (!gone) { /* do not leave it behind whatever the library did */
    kill((pid_t)L.pids[1], SIGKILL);
    waitpid((pid_t)L.pids[1], NULL, 0);
  }
  check(gone && L.exit_codes[1] == 128 + want && L.exit_codes[0] == 0, deaf ? "launcher timeout: SIGKILL after the grace period" : "launcher timeout: SIGTERM first",
        "rank 1 %s, exit codes %d %d (want 0 %d)", gone ? "is gone" : "still exists", L.exit_codes[0], L.exit_codes[1], 128 + want);
}

static void test_launcher_bad_args(void) {
  iris_launch_t L;
  int my = -2;
  iris_status_t s1, s2, s3, s4, s5;
  pid_t w;
  s1 = iris_launch_local(-1, &L, &my);
  s2 = iris_launch_local(IRIS_LAUNCH_MAX + 1, &L, &my);
  s3 = iris_launch_local(2, NULL, &my);
  s4 = iris_launch_local(2, &L, NULL);
  s5 = iris_launch_wait(NULL, 100);
  errno = 0;
  w = waitpid(-1, NULL, WNOHANG); /* no child may have been started */
  check(s1 == IRIS_ERROR_INVALID_ARGUMENT && s2 == IRIS_ERROR_UNSUPPORTED && s3 == IRIS_ERROR_INVALID_ARGUMENT && s4 == IRIS_ERROR_INVALID_ARGUMENT &&
            s5 == IRIS_ERROR_INVALID_ARGUMENT && w == -1 && errno == ECHILD,
        "launcher bad args", "-1 ranks %s, %d ranks %s, NULL launch %s, NULL rank %s, wait(NULL) %s, waitpid %d", sname(s1), IRIS_LAUNCH_MAX + 1, sname(s2),
        sname(s3), sname(s4), sname(s5), (int)w);
}

/* num_ranks 0 counts the visible GPUs; a process a launcher already started forks nothing */
static void test_launcher_auto(void) {
  iris_launch_t L;
  int my = -2;
  iris_status_t st;
  const char *old = getenv("CUDA_VISIBLE_DEVICES");
  char saved[256];
  pid_t w;
  snprintf(saved, sizeof saved, "%s", old ? old : "");
  setenv("CUDA_VISIBLE_DEVICES", "0,1,2", 1);
  st = iris_launch_local(0, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) {
    const char *ws = getenv("IRIS_WORLD_SIZE");
    _exit(ws && !strcmp(ws, "3") ? 0 : 1);
  }
  if (st == IRIS_SUCCESS) st = iris_launch_wait(&L, 10000);
  check(st == IRIS_SUCCESS && L.num_ranks == 3, "launcher 0 ranks = one per visible GPU", "%s, %d ranks: '%s'", sname(st), L.num_ranks, iris_error_detail());
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  st = iris_launch_local(0, &L, &my);
  errno = 0;
  w = waitpid(-1, NULL, WNOHANG);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && w == -1 && errno == ECHILD && has(iris_error_detail(), "CUDA_VISIBLE_DEVICES is empty"),
        "launcher 0 ranks with no GPU visible is refused, naming CUDA_VISIBLE_DEVICES", "%s, waitpid %d, '%s'", sname(st), (int)w, iris_error_detail());
  if (access("/proc/driver/nvidia/gpus", F_OK) != 0) {
    unsetenv("CUDA_VISIBLE_DEVICES");
    st = iris_launch_local(0, &L, &my);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "no NVIDIA driver is loaded"), "launcher 0 ranks on a host without a driver names the cause",
          "%s, '%s'", sname(st), iris_error_detail());
  }
  if (old) setenv("CUDA_VISIBLE_DEVICES", saved, 1);
  else unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("IRIS_RANK", "5", 1);
  setenv("IRIS_WORLD_SIZE", "8", 1);
  my = -2;
  st = iris_launch_local(4, &L, &my);
  unsetenv("IRIS_RANK");
  unsetenv("IRIS_WORLD_SIZE");
  errno = 0;
  w = waitpid(-1, NULL, WNOHANG);
  check(st == IRIS_SUCCESS && my == 5 && L.num_ranks == 0 && w == -1 && errno == ECHILD, "launcher steps aside when IRIS_RANK is set",
        "%s, my_rank %d, num_ranks %d, waitpid %d", sname(st), my, L.num_ranks, (int)w);
}

/* ------------------------------------------------------------ allocator -- */
#define FAKE_BASE ((void *)(uintptr_t)0x100000000ULL)
#define ROUND256(n) (((size_t)(n) + 255) & ~(size_t)255)

typedef struct live {
  void *p;
  size_t bytes;
} live_t;

static int cmp_live(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const live_t *)a)->p, y = (uintptr_t)((const live_t *)b)->p;
  return x < y ? -1 : x > y;
}

/* Checks the invariants of the live set; returns 0 or writes why. */
static int heap_invariants(const iris_t *ctx, void *base, size_t heap, live_t *lv, int n, char *why, size_t cap) {
  live_t sorted[512];
  size_t used = 0, off;
  int i;
  uintptr_t b = (uintptr_t)base;
  memcpy(sorted, lv, sizeof *lv * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_live);
  for (i = 0; i < n; i++) {
    uintptr_t p = (uintptr_t)sorted[i].p;
    size_t sz = ROUND256(sorted[i].bytes);
    if (p < b || p + sz > b + heap) return snprintf(why, cap, "block %#lx+%zu outside [base, base+%zu)", (unsigned long)(p - b), sz, heap), 1;
    if ((p - b) % IRIS_HEAP_ALIGN || p % IRIS_HEAP_ALIGN) return snprintf(why, cap, "block at offset %lu not 256-aligned", (unsigned long)(p - b)), 1;
    if (i > 0 && (uintptr_t)sorted[i - 1].p + ROUND256(sorted[i - 1].bytes) > p)
      return snprintf(why, cap, "blocks at offsets %lu (+%zu) and %lu overlap", (unsigned long)((uintptr_t)sorted[i - 1].p - b),
                      ROUND256(sorted[i - 1].bytes), (unsigned long)(p - b)),
             1;
    if (iris_heap_offset(ctx, sorted[i].p, &off) != IRIS_SUCCESS || off != p - b)
      return snprintf(why, cap, "iris_heap_offset of offset %lu gives %zu", (unsigned long)(p - b), off), 1;
    used += sz;
  }
  if (iris_heap_used(ctx) != used) return snprintf(why, cap, "iris_heap_used %zu, live blocks (rounded to 256) %zu", iris_heap_used(ctx), used), 1;
  return 0;
}

/* A seeded sequence of mallocs and frees; records each op's resulting offset
 * (SIZE_MAX for a failure) and checks the invariants after every op. Returns the
 * number of invariant violations (first reason in why). */
#define NOPS 2000
static int random_ops(iris_t *ctx, void *base, size_t heap, uint64_t seed, size_t *offs, int *nooms, char *why, size_t cap) {
  live_t lv[512];
  int n = 0, op, bad = 0;
  rng_t rg;
  char w[300];
  rg.s = seed;
  *nooms = 0;
  for (op = 0; op < NOPS; op++) {
    uint64_t x = rng_next(&rg);
    if (n > 0 && (x % 3 == 0 || n == 400)) {
      int k = (int)((x >> 8) % (uint64_t)n);
      iris_status_t st = iris_free(ctx, lv[k].p);
      offs[op] = (size_t)((uintptr_t)lv[k].p - (uintptr_t)base) | ((size_t)1 << 62);
      if (st != IRIS_SUCCESS && !bad++) snprintf(why, cap, "op %d: iris_free: %s: %s", op, sname(st), iris_error_detail());
      lv[k] = lv[--n];
    } else {
      size_t bytes = 1 + (size_t)((x >> 8) % ((uint64_t)1 << ((x >> 40) % 21))); /* 1 B .. 1 MiB, log-spread */
      void *p = (void *)&rg;
      size_t used0 = iris_heap_used(ctx);
      iris_status_t st = iris_malloc(ctx, bytes, &p);
      if (st == IRIS_SUCCESS) {
        offs[op] = (size_t)((uintptr_t)p - (uintptr_t)base);
        lv[n].p = p;
        lv[n].bytes = bytes;
        n++;
      } else {
        offs[op] = SIZE_MAX;
        ++*nooms;
        if ((st != IRIS_ERROR_OUT_OF_MEMORY || p != NULL || iris_heap_used(ctx) != used0) && !bad++)
          snprintf(why, cap, "op %d: iris_malloc(%zu) failed with %s, ptr %p, used %zu -> %zu", op, bytes, sname(st), p, used0, iris_heap_used(ctx));
      }
    }
    if (heap_invariants(ctx, base, heap, lv, n, w, sizeof w) && !bad++) snprintf(why, cap, "after op %d: %s", op, w);
  }
  while (n > 0) {
    iris_status_t st = iris_free(ctx, lv[--n].p);
    if (st != IRIS_SUCCESS && !bad++) snprintf(why, cap, "final free: %s", sname(st));
  }
  if (iris_heap_used(ctx) != 0 && !bad++) snprintf(why, cap, "%zu bytes still used after freeing everything", iris_heap_used(ctx));
  return bad;
}

static void test_alloc_random(void) {
  const size_t heap = (size_t)8 << 20;
  void *base_b = (void *)(uintptr_t)0x7f0000000000ULL;
  static size_t offs_a[NOPS], offs_b[NOPS], offs_c[NOPS];
  iris_t *a = iris_detail_host_only_ctx(heap, FAKE_BASE), *b = iris_detail_host_only_ctx(heap, base_b), *c = iris_detail_host_only_ctx(heap, FAKE_BASE);
  char why_a[400] = "", why_b[400] = "", why_c[400] = "";
  int bad_a, bad_b, bad_c, ooms_a, ooms_b, ooms_c, i, first_diff = -1, ndiff = 0;
  void *p = NULL;
  if (!a || !b || !c) {
    check(0, "allocator random invariants", "iris_detail_host_only_ctx returned NULL");
    iris_detail_host_only_free(a);
    iris_detail_host_only_free(b);
    iris_detail_host_only_free(c);
    return;
  }
  bad_a = random_ops(a, FAKE_BASE, heap, 12345, offs_a, &ooms_a, why_a, sizeof why_a);
  bad_b = random_ops(b, base_b, heap, 12345, offs_b, &ooms_b, why_b, sizeof why_b);
  bad_c = random_ops(c, FAKE_BASE, heap, 54321, offs_c, &ooms_c, why_c, sizeof why_c);
  check(!bad_a && !bad_b && !bad_c, "allocator random invariants", "%d/%d/%d violations: %s %s %s", bad_a, bad_b, bad_c, why_a, why_b, why_c);
  for (i = 0; i < NOPS; i++)
    if (offs_a[i] != offs_b[i]) {
      if (first_diff < 0) first_diff = i;
      ndiff++;
    }
  check(ndiff == 0 && ooms_a == ooms_b, "allocator deterministic offsets", "%d of %d ops differ (first at op %d: %zu vs %zu), ooms %d vs %d", ndiff, NOPS,
        first_diff, first_diff >= 0 ? offs_a[first_diff] : 0, first_diff >= 0 ? offs_b[first_diff] : 0, ooms_a, ooms_b);
  for (ndiff = 0, i = 0; i < NOPS; i++) ndiff += offs_a[i] != offs_c[i];
  check(ndiff > 0, "allocator different sequence detected", "a different seed gave the very same %d offsets", NOPS);
  /* after everything was freed the whole heap is one block again, on both */
  check(iris_malloc(a, heap, &p) == IRIS_SUCCESS && p == FAKE_BASE && iris_free(a, p) == IRIS_SUCCESS, "allocator random coalesces",
        "full-heap malloc after the sequence: ptr %p, '%s'", p, iris_error_detail());
  iris_detail_host_only_free(a);
  iris_detail_host_only_free(b);
  iris_detail_host_only_free(c);
}

static void test_alloc_alignment(void) {
  const size_t heap = (size_t)16 << 20;
  iris_t *ctx = iris_detail_host_only_ctx(heap, FAKE_BASE);
  void *p1 = NULL, *pa = NULL, *pb = NULL, *pc = NULL, *bad = NULL;
  iris_status_t s1, sa, sb, sc, st;
  uintptr_t b = (uintptr_t)FAKE_BASE;
  size_t npot[] = {3, 100, 384, 1000, 4097, (size_t)3 << 20};
  unsigned i;
  char why[300];
  live_t lv[4];
  if (!ctx) {
    check(0, "allocator alignment 256", "iris_detail_host_only_ctx returned NULL");
    return;
  }
  s1 = iris_malloc(ctx, 1, &p1);
  sa = iris_malloc_aligned(ctx, 100, 4096, &pa);
  sb = iris_malloc_aligned(ctx, 100, (size_t)1 << 20, &pb);
  sc = iris_malloc(ctx, 300, &pc);
  check(s1 == IRIS_SUCCESS && sc == IRIS_SUCCESS && ((uintptr_t)p1 - b) % 256 == 0 && (uintptr_t)p1 % 256 == 0 && ((uintptr_t)pc - b) % 256 == 0 &&
            (uintptr_t)pc % 256 == 0,
        "allocator alignment 256", "malloc: %s %s, offsets %lu %lu", sname(s1), sname(sc), (unsigned long)((uintptr_t)p1 - b), (unsigned long)((uintptr_t)pc - b));
  check(sa == IRIS_SUCCESS && ((uintptr_t)pa - b) % 4096 == 0 && (uintptr_t)pa % 4096 == 0, "allocator alignment 4096", "%s, offset %lu", sname(sa),
        (unsigned long)((uintptr_t)pa - b));
  check(sb == IRIS_SUCCESS && ((uintptr_t)pb - b) % ((size_t)1 << 20) == 0 && (uintptr_t)pb % ((size_t)1 << 20) == 0 && pb != FAKE_BASE, "allocator alignment 1 MiB",
        "%s, offset %lu", sname(sb), (unsigned long)((uintptr_t)pb - b));
  lv[0].p = p1, lv[0].bytes = 1;
  lv[1].p = pa, lv[1].bytes = 100;
  lv[2].p = pb, lv[2].bytes = 100;
  lv[3].p = pc, lv[3].bytes = 300;
  check(s1 == IRIS_SUCCESS && sa == IRIS_SUCCESS && sb == IRIS_SUCCESS && sc == IRIS_SUCCESS && !heap_invariants(ctx, FAKE_BASE, heap, lv, 4, why, sizeof why),
        "allocator aligned blocks accounting", "%s", why);
  for (i = 0; i < sizeof npot / sizeof npot[0]; i++) {
    char nm[64];
    size_t used0 = iris_heap_used(ctx);
    bad = (void *)ctx;
    st = iris_malloc_aligned(ctx, 64, npot[i], &bad);
    snprintf(nm, sizeof nm, "allocator alignment %zu refused", npot[i]);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && bad == NULL && iris_heap_used(ctx) == used0, nm, "status %s, ptr %p, used %zu -> %zu", sname(st), bad, used0,
          iris_heap_used(ctx));
  }
  bad = (void *)ctx;
  st = iris_malloc(ctx, 0, &bad);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && bad == NULL, "allocator zero bytes refused", "status %s, ptr %p", sname(st), bad);
  bad = (void *)ctx;
  st = iris_malloc_aligned(ctx, 0, 4096, &bad);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && bad == NULL, "allocator aligned zero bytes refused", "status %s, ptr %p", sname(st), bad);
  /* free everything; the alignment padding must merge back into one block */
  st = iris_free(ctx, pb);
  if (st == IRIS_SUCCESS) st = iris_free(ctx, p1);
  if (st == IRIS_SUCCESS) st = iris_free(ctx, pc);
  if (st == IRIS_SUCCESS) st = iris_free(ctx, pa);
  bad = NULL;
  s1 = iris_malloc(ctx, heap, &bad);
  check(st == IRIS_SUCCESS && iris_heap_used(ctx) == heap && s1 == IRIS_SUCCESS && bad == FAKE_BASE && iris_free(ctx, bad) == IRIS_SUCCESS && iris_heap_used(ctx) == 0,
        "allocator aligned padding coalesces", "frees %s, full-heap malloc %s at %p, used %zu", sname(st), sname(s1), bad, iris_heap_used(ctx));
  iris_detail_host_only_free(ctx);
}

static void test_alloc_exhaustion(void) {
  const size_t heap = (size_t)1 << 20, req = 3000, blk = ROUND256(req);
  const int expect_n = (int)(heap / blk);
  static void *ptrs[1200];
  iris_t *ctx = iris_detail_host_only_ctx(heap, FAKE_BASE);
  int n = 0, i, ok;
  iris_status_t st = IRIS_SUCCESS;
  size_t used_before, used_after;
  void *p;
  char detail[1024];
  rng_t rg;
  if (!ctx) {
    check(0, "allocator exhaustion count", "iris_detail_host_only_ctx returned NULL");
    return;
  }
  while (n < 1200) {
    p = NULL;
    used_before = iris_heap_used(ctx);
    st = iris_malloc(ctx, req, &p);
    if (st != IRIS_SUCCESS) break;
    ptrs[n++] = p;
  }
  snprintf(detail, sizeof detail, "%s", iris_error_detail());
  used_after = iris_heap_used(ctx);
  check(st == IRIS_ERROR_OUT_OF_MEMORY && n == expect_n && used_after == (size_t)n * blk, "allocator exhaustion count",
        "%d blocks of %zu bytes before %s (want %d = %zu / %zu), used %zu", n, req, sname(st), expect_n, heap, blk, used_after);
  check(st == IRIS_ERROR_OUT_OF_MEMORY && p == NULL && used_after == used_before && has(detail, "exhausted"), "allocator exhaustion leaves heap unchanged",
        "ptr %p (want NULL), used %zu -> %zu, detail '%s'", p, used_before, used_after, detail);
  /* the tail (heap - n*blk bytes) is still usable, then nothing is */
  {
    size_t tail = heap - (size_t)n * blk;
    void *t = NULL, *u = (void *)ctx;
    iris_status_t s1 = tail ? iris_malloc(ctx, tail, &t) : IRIS_SUCCESS, s2 = iris_malloc(ctx, 1, &u);
    check(s1 == IRIS_SUCCESS && s2 == IRIS_ERROR_OUT_OF_MEMORY && u == NULL && iris_heap_used(ctx) == heap, "allocator exhaustion tail",
          "tail of %zu: %s; then 1 byte: %s, ptr %p, used %zu", tail, sname(s1), sname(s2), u, iris_heap_used(ctx));
    if (t) ptrs[n++] = t;
  }
  /* free one block in the middle: an allocation of that size fits again, there */
  {
    int k = expect_n / 2;
    void *q = NULL, *old = ptrs[k];
    iris_status_t s1 = iris_free(ctx, old), s2 = iris_malloc(ctx, req, &q);
    check(s1 == IRIS_SUCCESS && s2 == IRIS_SUCCESS && q == old, "allocator usable after exhaustion", "free %s, malloc %s at %p (the freed block was %p)", sname(s1),
          sname(s2), q, old);
    if (q) ptrs[k] = q;
  }
  /* fragmentation: every other block free; a 2-block request must not fit */
  {
    void *q = (void *)ctx;
    iris_status_t s2;
    size_t used0;
    ok = 1;
    for (i = 0; i < expect_n; i += 2) ok &= iris_free(ctx, ptrs[i]) == IRIS_SUCCESS;
    used0 = iris_heap_used(ctx);
    s2 = iris_malloc(ctx, 2 * blk, &q);
    check(ok && s2 == IRIS_ERROR_OUT_OF_MEMORY && q == NULL && used0 == heap - (size_t)((expect_n + 1) / 2) * blk, "allocator no false coalescing",
          "frees ok %d, %zu-byte malloc into a heap of free %zu-byte holes gave %s at %p, used %zu", ok, 2 * blk, blk, sname(s2), q, used0);
    for (i = 0; i < expect_n; i += 2) ptrs[i] = NULL;
  }
  /* free the rest in random order: the heap is one block again */
  {
    void *q = NULL;
    iris_status_t s2;
    rg.s = 777;
    for (i = n - 1; i > 0; i--) {
      int j = (int)(rng_next(&rg) % (uint64_t)(i + 1));
      void *tmp = ptrs[i];
      ptrs[i] = ptrs[j];
      ptrs[j] = tmp;
    }
    ok = 1;
    for (i = 0; i < n; i++)
      if (ptrs[i]) ok &= iris_free(ctx, ptrs[i]) == IRIS_SUCCESS;
    s2 = iris_malloc(ctx, heap, &q);
    check(ok && s2 == IRIS_SUCCESS && q == FAKE_BASE && iris_heap_used(ctx) == heap, "allocator full heap after freeing all",
          "frees ok %d, full-heap malloc %s at %p, used %zu: '%s'", ok, sname(s2), q, iris_heap_used(ctx), iris_error_detail());
    if (q) iris_free(ctx, q);
  }
  {
    void *q = (void *)ctx;
    st = iris_malloc(ctx, heap + 1, &q);
    char largest[64];
    snprintf(largest, sizeof largest, "largest free block %zu", heap);
    check(st == IRIS_ERROR_OUT_OF_MEMORY && q == NULL && iris_heap_used(ctx) == 0 && has(iris_error_detail(), "exhausted") && has(iris_error_detail(), largest),
          "allocator larger than heap", "%s, ptr %p, used %zu, '%s' (want '%s')", sname(st), q, iris_heap_used(ctx), iris_error_detail(), largest);
  }
  iris_detail_host_only_free(ctx);
}

static void test_alloc_errors(void) {
  const size_t heap = (size_t)4 << 20;
  iris_t *ctx = iris_detail_host_only_ctx(heap, FAKE_BASE);
  char *base = (char *)FAKE_BASE;
  void *p = NULL, *q = NULL, *out;
  size_t off = 12345, used0;
  iris_status_t s1, s2, s3, s4, s5;
  iris_device_ctx_t dc;
  if (!ctx) {
    check(0, "allocator free outside heap", "iris_detail_host_only_ctx returned NULL");
    return;
  }
  s1 = iris_malloc(ctx, 1024, &p);
  s2 = iris_malloc(ctx, 1024, &q);
  if (s1 != IRIS_SUCCESS || s2 != IRIS_SUCCESS) {
    check(0, "allocator free outside heap", "setup mallocs failed: %s %s", sname(s1), sname(s2));
    iris_detail_host_only_free(ctx);
    return;
  }
  used0 = iris_heap_used(ctx);
  s1 = iris_free(ctx, base - 256);
  s2 = iris_free(ctx, base + heap);
  s3 = iris_free(ctx, base + heap + 4096);
  check(s1 == IRIS_ERROR_NOT_IN_HEAP && s2 == IRIS_ERROR_NOT_IN_HEAP && s3 == IRIS_ERROR_NOT_IN_HEAP && iris_heap_used(ctx) == used0, "allocator free outside heap",
        "base-256: %s, base+heap: %s, base+heap+4096: %s", sname(s1), sname(s2), sname(s3));
  s1 = iris_free(ctx, (char *)p + 256);
  s2 = iris_free(ctx, (char *)p + 1);
  s3 = iris_free(ctx, base + heap / 2); /* start of nothing: inside the free tail */
  check(s1 == IRIS_ERROR_INVALID_ARGUMENT && s2 == IRIS_ERROR_INVALID_ARGUMENT && s3 == IRIS_ERROR_INVALID_ARGUMENT && iris_heap_used(ctx) == used0,
        "allocator free not a block start", "p+256: %s, p+1: %s, mid-heap: %s, used %zu -> %zu", sname(s1), sname(s2), sname(s3), used0, iris_heap_used(ctx));
  s1 = iris_free(ctx, p);
  used0 = iris_heap_used(ctx);
  s2 = iris_free(ctx, p);
  check(s1 == IRIS_SUCCESS && s2 == IRIS_ERROR_INVALID_ARGUMENT && iris_heap_used(ctx) == used0 && used0 == ROUND256(1024), "allocator double free",
        "first free %s, second %s, used %zu", sname(s1), sname(s2), iris_heap_used(ctx));
  s1 = iris_free(ctx, NULL);
  check(s1 == IRIS_SUCCESS, "allocator free null", "iris_free(ctx, NULL) gave %s", sname(s1));
  s1 = iris_free(NULL, q);
  s2 = iris_malloc(NULL, 16, &out);
  s3 = iris_malloc(ctx, 16, NULL);
  s4 = iris_heap_offset(ctx, q, NULL);
  s5 = iris_heap_offset(NULL, q, &off);
  check(s1 == IRIS_ERROR_INVALID_ARGUMENT && s2 == IRIS_ERROR_INVALID_ARGUMENT && s3 == IRIS_ERROR_INVALID_ARGUMENT && s4 == IRIS_ERROR_INVALID_ARGUMENT &&
            s5 == IRIS_ERROR_INVALID_ARGUMENT,
        "allocator null arguments", "free(NULL ctx) %s, malloc(NULL ctx) %s, malloc(NULL ptr) %s, offset(NULL out) %s, offset(NULL ctx) %s", sname(s1), sname(s2),
        sname(s3), sname(s4), sname(s5));
  off = 12345;
  s1 = iris_heap_offset(ctx, base - 1, &off);
  s2 = iris_heap_offset(ctx, base + heap, &off);
  check(s1 == IRIS_ERROR_NOT_IN_HEAP && s2 == IRIS_ERROR_NOT_IN_HEAP && off == 12345, "allocator offset outside heap", "base-1: %s, base+heap: %s", sname(s1),
        sname(s2));
  s1 = iris_heap_offset(ctx, q, &off);
  s2 = iris_heap_offset(ctx, base + heap - 1, &off);
  check(s1 == IRIS_SUCCESS && s2 == IRIS_SUCCESS && off == heap - 1, "allocator offset inside heap", "%s %s, last byte's offset %zu", sname(s1), sname(s2), off);
  out = NULL;
  s1 = iris_translate_host(ctx, q, 1, &out);
  s2 = iris_translate_host(ctx, q, -1, &out);
  check(s1 == IRIS_ERROR_INVALID_RANK && s2 == IRIS_ERROR_INVALID_RANK && out == NULL, "allocator translate bad rank", "rank 1: %s, rank -1: %s", sname(s1), sname(s2));
  s1 = iris_translate_host(ctx, q, 0, &out);
  s2 = iris_translate_host(ctx, base - 8, 0, &out);
  check(s1 == IRIS_SUCCESS && out == q && s2 == IRIS_ERROR_NOT_IN_HEAP, "allocator translate own rank", "%s (ptr %p vs %p), outside: %s", sname(s1), out, q,
        sname(s2));
  dc = iris_device_context(ctx);
  check(iris_rank(ctx) == 0 && iris_world_size(ctx) == 1 && iris_heap_size(ctx) == heap && iris_heap_base(ctx, 0) == FAKE_BASE && iris_heap_base(ctx, 1) == NULL &&
            iris_heap_base(ctx, -1) == NULL && dc.rank == 0 && dc.world_size == 1 && dc.heap_size == heap && dc.bases[0] == base && dc.bases[1] == NULL,
        "allocator context queries", "rank %d world %d heap %zu base0 %p base1 %p; device ctx rank %d world %d heap %llu base0 %p", iris_rank(ctx),
        iris_world_size(ctx), iris_heap_size(ctx), iris_heap_base(ctx, 0), iris_heap_base(ctx, 1), dc.rank, dc.world_size, dc.heap_size, (void *)dc.bases[0]);
  dc = iris_device_context(NULL);
  check(iris_rank(NULL) == -1 && iris_world_size(NULL) == 0 && iris_heap_size(NULL) == 0 && iris_heap_used(NULL) == 0 && iris_heap_base(NULL, 0) == NULL &&
            dc.world_size == 0 && dc.bases[0] == NULL,
        "queries on null context", "rank %d world %d heap %zu", iris_rank(NULL), iris_world_size(NULL), iris_heap_size(NULL));
  iris_free(ctx, q);
  iris_detail_host_only_free(ctx);
}

/* ------------------------------------------------------ exchange records -- */
static void make_recs(iris_detail_record_t *rec, int world) {
  int r;
  memset(rec, 0, sizeof *rec * (size_t)world);
  for (r = 0; r < world; r++) {
    rec[r].magic = IRIS_DETAIL_MAGIC;
    rec[r].version = IRIS_VERSION;
    rec[r].rank = r;
    rec[r].world = world;
    rec[r].heap_size = 1ULL << 30;
    rec[r].heap_memory = IRIS_HEAP_MEMORY_FINE;
    rec[r].device = r;
    rec[r].pid = 4000 + r;
    rec[r].uid = 1000;
    rec[r].base = 0x7f0000000000ULL + ((uint64_t)r << 32);
    snprintf(rec[r].host, sizeof rec[r].host, "%s", "node-a");
    snprintf(rec[r].boot_id, sizeof rec[r].boot_id, "%s", "0b5c2a7e-1111-2222-3333-444455556666");
    snprintf(rec[r].pci, sizeof rec[r].pci, "0000:%02x:00.0", 0x10 + r);
  }
}

static void expect_recs(const char *check_name, iris_detail_record_t *rec, int world, iris_status_t want, int rank_named, const char *word) {
  iris_status_t st = iris_detail_check_records(rec, world);
  const char *d = iris_error_detail();
  int ok = st == want;
  if (want != IRIS_SUCCESS) {
    ok &= d[0] != 0;
    if (rank_named >= 0) ok &= names_rank(d, rank_named);
    if (word) ok &= has(d, word);
  }
  check(ok, check_name, "status %s (want %s), detail '%s' (want rank %d%s%s%s)", sname(st), sname(want), d, rank_named, word ? " and '" : "", word ? word : "",
        word ? "'" : "");
}

static void test_records(void) {
  iris_detail_record_t rec[4];
  make_recs(rec, 4);
  expect_recs("records all equal", rec, 4, IRIS_SUCCESS, -1, NULL);
  make_recs(rec, 1);
  expect_recs("records world 1", rec, 1, IRIS_SUCCESS, -1, NULL);
  make_recs(rec, 4);
  snprintf(rec[2].host, sizeof rec[2].host, "%s", "node-b");
  expect_recs("records other host", rec, 4, IRIS_ERROR_DIFFERENT_HOST, 2, "hosts");
  make_recs(rec, 4);
  rec[2].boot_id[0] = 'f';
  expect_recs("records other boot id", rec, 4, IRIS_ERROR_DIFFERENT_HOST, 2, "boot id");
  make_recs(rec, 4);
  rec[2].uid = 1001;
  expect_recs("records other uid", rec, 4, IRIS_ERROR_PERMISSION, 2, "uid");
  make_recs(rec, 4);
  rec[2].world = 8;
  expect_recs("records other world size", rec, 4, IRIS_ERROR_MISMATCH, 2, "world size");
  make_recs(rec, 4);
  rec[0].world = 3;
  expect_recs("records rank 0 other world size", rec, 4, IRIS_ERROR_MISMATCH, -1, "world size");
  make_recs(rec, 4);
  rec[2].heap_size = 1ULL << 31;
  expect_recs("records other heap size", rec, 4, IRIS_ERROR_MISMATCH, 2, "heap");
  make_recs(rec, 4);
  rec[2].heap_memory = IRIS_HEAP_MEMORY_COARSE;
  expect_recs("records other heap memory", rec, 4, IRIS_ERROR_MISMATCH, 2, "heap memory");
  make_recs(rec, 4);
  rec[2].version = IRIS_VERSION + 1;
  expect_recs("records other version", rec, 4, IRIS_ERROR_MISMATCH, 2, "version");
  make_recs(rec, 4);
  rec[2].status = IRIS_ERROR_GPU;
  snprintf(rec[2].err, sizeof rec[2].err, "%s", "rank 2: cudaMalloc failed: out of memory (zq-7781)");
  expect_recs("records failed rank status", rec, 4, IRIS_ERROR_GPU, 2, "out of memory (zq-7781)");
  make_recs(rec, 4);
  rec[2].status = 99;
  snprintf(rec[2].err, sizeof rec[2].err, "%s", "a status from nowhere");
  expect_recs("records unknown failure status is a system error", rec, 4, IRIS_ERROR_SYSTEM, 2, "from nowhere");
  make_recs(rec, 4);
  rec[1].rank = 2;
  rec[2].rank = 1;
  expect_recs("records slots out of order", rec, 4, IRIS_ERROR_MISMATCH, 2, "slot 1");
  make_recs(rec, 4);
  rec[3].magic = 0;
  expect_recs("records bad magic", rec, 4, IRIS_ERROR_MISMATCH, 3, "slot 3");
}

/* -------------------------------------------------------------- config -- */
static void expect_init(const char *check_name, const iris_config_t *cfg, int null_out, iris_status_t want, const char *word) {
  iris_t *ctx = (iris_t *)&g_seed; /* sentinel */
  iris_status_t st = iris_init(cfg, null_out ? NULL : &ctx);
  const char *d = iris_error_detail();
  int ok = st == want && (null_out || ctx == NULL) && d[0] != 0 && (!word || has(d, word));
  if (st == IRIS_SUCCESS && !null_out && ctx && ctx != (iris_t *)&g_seed) iris_finalize(ctx);
  check(ok, check_name, "status %s (want %s), out %s, detail '%s'%s%s", sname(st), sname(want), null_out ? "n/a" : ctx == NULL ? "NULL" : "not NULL", d,
        word ? " (want it to mention " : "", word ? word : "");
}

static void cfg_base(iris_config_t *c, int rank, int world) {
  iris_config_t def = IRIS_CONFIG_INIT;
  *c = def;
  c->rank = rank;
  c->world_size = world;
  c->heap_size = (size_t)2 << 20;
  c->timeout_ms = 1500;
  c->barrier_timeout_ms = 1500;
  c->rendezvous_dir = g_dir;
}

static int bad_cb_allgather(void *u, const void *s, void *r, size_t n) {
  (void)u, (void)s, (void)r, (void)n;
  return 1;
}

static void test_config(void) {
  iris_config_t c;
  iris_bootstrap_t hooks;
  char name[80];
  int ndev = -1;
  cudaError_t e;
  unique_name(name, sizeof name, "init");

  cfg_base(&c, 0, 1);
  c.struct_size = sizeof c - 8;
  expect_init("config wrong struct size", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "struct_size");
  cfg_base(&c, 0, 1);
  c.struct_size = 0;
  expect_init("config zero struct size", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "struct_size");
  cfg_base(&c, 5, 2);
  expect_init("config rank above world", &c, 0, IRIS_ERROR_INVALID_RANK, NULL);
  cfg_base(&c, 2, 2);
  expect_init("config rank equals world", &c, 0, IRIS_ERROR_INVALID_RANK, NULL);
  cfg_base(&c, 0, 1000);
  expect_init("config world above max ranks", &c, 0, IRIS_ERROR_UNSUPPORTED, "IRIS_MAX_RANKS");
  cfg_base(&c, 0, IRIS_MAX_RANKS + 1);
  expect_init("config world max ranks plus 1", &c, 0, IRIS_ERROR_UNSUPPORTED, NULL);
  expect_init("config null null", NULL, 1, IRIS_ERROR_INVALID_ARGUMENT, NULL);
  cfg_base(&c, 0, 1);
  expect_init("config null out", &c, 1, IRIS_ERROR_INVALID_ARGUMENT, NULL);
  cfg_base(&c, 0, 1);
  c.heap_memory = (iris_heap_memory_t)99;
  expect_init("config bad heap memory", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "heap_memory");
  cfg_base(&c, 0, 1);
  hooks.user = NULL;
  hooks.allgather = bad_cb_allgather;
  hooks.barrier = NULL;
  c.bootstrap = &hooks;
  expect_init("config bootstrap without barrier", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "barrier");

  /* real bring-up of one rank: no GPU here means a clean IRIS_ERROR_GPU */
  e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev <= 0) {
    int i;
    for (i = 0; i < 2; i++) {
      iris_t *ctx = (iris_t *)&g_seed;
      iris_status_t st;
      const char *d;
      char nm[64];
      cfg_base(&c, 0, 1);
      c.rendezvous = name;
      st = iris_init(&c, &ctx);
      d = iris_error_detail();
      snprintf(nm, sizeof nm, "config no gpu init fails%s", i ? " again" : "");
      check(st == IRIS_ERROR_GPU && ctx == NULL && d[0] && (e != cudaSuccess ? has(d, "GetDeviceCount") : has(d, "no GPU")), nm,
            "cudaGetDeviceCount gave %d (%d devices); iris_init: %s, out %s, detail '%s'", (int)e, ndev, sname(st), ctx == NULL ? "NULL" : "not NULL", d);
      if (i == 0 && access("/proc/driver/nvidia/version", F_OK) != 0) /* a machine without any driver says so, not "driver too old" */
        check(has(d, "no NVIDIA driver is loaded on this host"), "config no gpu: the detail names the missing driver", "detail '%s'", d);
      if (st == IRIS_SUCCESS && ctx && ctx != (iris_t *)&g_seed) iris_finalize(ctx);
    }
  } else {
    int i;
    for (i = 0; i < 2; i++) {
      iris_t *ctx = NULL;
      iris_status_t st, fs = IRIS_ERROR_INVALID_ARGUMENT;
      char nm[64];
      cfg_base(&c, 0, 1);
      c.rendezvous = name;
      st = iris_init(&c, &ctx);
      snprintf(nm, sizeof nm, "config gpu init and finalize%s", i ? " again" : "");
      if (st == IRIS_SUCCESS) {
        int ok = iris_rank(ctx) == 0 && iris_world_size(ctx) == 1 && iris_heap_size(ctx) >= c.heap_size;
        fs = iris_finalize(ctx);
        check(ok && fs == IRIS_SUCCESS, nm, "queries ok %d, finalize %s: '%s'", ok, sname(fs), iris_error_detail());
      } else {
        check(0, nm, "iris_init: %s: '%s'", sname(st), iris_error_detail());
      }
    }
  }
}

/* ---------------------------------------------------------- status strings -- */
#define STATUS_ENTRY(x) {x, #x}
static const struct {
  iris_status_t s;
  const char *name;
} k_status[] = {STATUS_ENTRY(IRIS_SUCCESS),          STATUS_ENTRY(IRIS_ERROR_INVALID_ARGUMENT), STATUS_ENTRY(IRIS_ERROR_INVALID_RANK),
                STATUS_ENTRY(IRIS_ERROR_OUT_OF_MEMORY), STATUS_ENTRY(IRIS_ERROR_NOT_IN_HEAP),   STATUS_ENTRY(IRIS_ERROR_MISMATCH),
                STATUS_ENTRY(IRIS_ERROR_TIMEOUT),       STATUS_ENTRY(IRIS_ERROR_GPU),           STATUS_ENTRY(IRIS_ERROR_SYSTEM),
                STATUS_ENTRY(IRIS_ERROR_PERMISSION),    STATUS_ENTRY(IRIS_ERROR_DIFFERENT_HOST), STATUS_ENTRY(IRIS_ERROR_UNSUPPORTED),
                STATUS_ENTRY(IRIS_ERROR_BOOTSTRAP),     STATUS_ENTRY(IRIS_ERROR_RANK_FAILED),   STATUS_ENTRY(IRIS_ERROR_PEER_FAILED), STATUS_ENTRY(IRIS_ERROR_ABORTED), STATUS_ENTRY(IRIS_ERROR_IN_USE)};

static void test_status_strings(void) {
  const int n = (int)(sizeof k_status / sizeof k_status[0]);
  int i, j, distinct = 1, di = -1, dj = -1;
  check(n == IRIS_STATUS_COUNT, "status table covers every status", "the test knows %d statuses, IRIS_STATUS_COUNT is %d", n, (int)IRIS_STATUS_COUNT);
  for (i = 0; i < n; i++) {
    const char *s = iris_status_string(k_status[i].s);
    size_t len = strlen(k_status[i].name);
    char nm[80];
    int k;
    snprintf(nm, sizeof nm, "status string %s", k_status[i].name + 5); /* drop "IRIS_" */
    for (k = 0; nm[k]; k++)
      if (nm[k] >= 'A' && nm[k] <= 'Z') nm[k] = (char)(nm[k] - 'A' + 'a');
    check((int)k_status[i].s == i && s && s[0] && strncmp(s, k_status[i].name, len) == 0 && (s[len] == 0 || s[len] == ':'), nm, "value %d gives '%s'",
          (int)k_status[i].s, s ? s : "(NULL)");
  }
  for (i = 0; i < IRIS_STATUS_COUNT; i++)
    for (j = i + 1; j < IRIS_STATUS_COUNT; j++)
      if (strcmp(iris_status_string((iris_status_t)i), iris_status_string((iris_status_t)j)) == 0 && distinct) distinct = 0, di = i, dj = j;
  check(distinct, "status strings distinct", "statuses %d and %d share '%s'", di, dj, distinct ? "" : iris_status_string((iris_status_t)di));
  {
    const char *a = iris_status_string((iris_status_t)IRIS_STATUS_COUNT), *b = iris_status_string((iris_status_t)-1),
               *c = iris_status_string((iris_status_t)1000);
    int ok = a && b && c && a[0] && b[0] && c[0];
    for (i = 0; ok && i < IRIS_STATUS_COUNT; i++) ok = strcmp(a, iris_status_string((iris_status_t)i)) != 0;
    check(ok, "status string out of range", "COUNT: '%s', -1: '%s', 1000: '%s'", a ? a : "(NULL)", b ? b : "(NULL)", c ? c : "(NULL)");
  }
}

/* ---------------------------------------------------------------- tile views -- */
/* Checks a view against tile arithmetic computed here; returns 0 or writes why. */
static int check_tiles(long long rows, long long cols, long long stride, int elem, int bm, int bn, char *why, size_t cap) {
  static unsigned char mark[256 * 256];
  static char buf[256 * 256 * 8];
  iris_view2d_t v = iris_view2d(buf, rows, cols, stride, elem);
  long long tm_count = 0, tn_count = 0, r0, c0, id, r, c;
  long long last_rows, last_cols;
  if (rows * stride * elem > (long long)sizeof buf || rows * cols > (long long)sizeof mark) return snprintf(why, cap, "test buffer too small"), 1;
  for (r0 = 0; r0 < rows; r0 += bm) tm_count++;
  for (c0 = 0; c0 < cols; c0 += bn) tn_count++;
  last_rows = rows - (tm_count - 1) * bm;
  last_cols = cols - (tn_count - 1) * bn;
  if (iris_view_tiles_m(v, bm) != tm_count || iris_view_tiles_n(v, bn) != tn_count || iris_view_num_tiles(v, bm, bn) != tm_count * tn_count)
    return snprintf(why, cap, "tiles_m %lld tiles_n %lld num %lld, counted %lld x %lld", iris_view_tiles_m(v, bm), iris_view_tiles_n(v, bn),
                    iris_view_num_tiles(v, bm, bn), tm_count, tn_count),
           1;
  for (r = 0; r < tm_count; r++)
    if (iris_view_tile_rows(v, bm, r) != (r == tm_count - 1 ? last_rows : bm))
      return snprintf(why, cap, "tile row %lld has %d rows, want %lld", r, iris_view_tile_rows(v, bm, r), r == tm_count - 1 ? last_rows : (long long)bm), 1;
  for (c = 0; c < tn_count; c++)
    if (iris_view_tile_cols(v, bn, c) != (c == tn_count - 1 ? last_cols : bn))
      return snprintf(why, cap, "tile col %lld has %d cols, want %lld", c, iris_view_tile_cols(v, bn, c), c == tn_count - 1 ? last_cols : (long long)bn), 1;
  if (iris_view_tile_rows(v, bm, tm_count) != 0 || iris_view_tile_cols(v, bn, tn_count) != 0)
    return snprintf(why, cap, "a tile past the edge is not empty (%d rows, %d cols)", iris_view_tile_rows(v, bm, tm_count), iris_view_tile_cols(v, bn, tn_count)), 1;
  for (r = 0; r < rows; r++)
    for (c = 0; c < cols; c++)
      if ((char *)iris_view_elem(v, r, c) != buf + (r * stride + c) * elem)
        return snprintf(why, cap, "iris_view_elem(%lld, %lld) is at byte %ld, want %lld", r, c, (long)((char *)iris_view_elem(v, r, c) - buf),
                        (r * stride + c) * elem),
               1;
  memset(mark, 0, sizeof mark);
  id = 0;
  for (r0 = 0; r0 < tm_count; r0++)
    for (c0 = 0; c0 < tn_count; c0++, id++) {
      long long tm = -1, tn = -1, i, j;
      iris_view2d_t t;
      iris_view_tile_coords(v, bn, id, &tm, &tn);
      if (tm != r0 || tn != c0) return snprintf(why, cap, "tile %lld -> (%lld, %lld), want (%lld, %lld)", id, tm, tn, r0, c0), 1;
      t = iris_view_tile(v, bm, bn, tm, tn);
      if (t.stride != stride || t.elem_size != elem || t.rows != iris_view_tile_rows(v, bm, tm) || t.cols != iris_view_tile_cols(v, bn, tn))
        return snprintf(why, cap, "tile %lld: sub-view %lld x %lld stride %lld elem %d", id, t.rows, t.cols, t.stride, t.elem_size), 1;
      for (i = 0; i < t.rows; i++)
        for (j = 0; j < t.cols; j++) {
          long long at = (long long)((char *)iris_view_elem(t, i, j) - buf), e, er, ec;
          if (at < 0 || at % elem) return snprintf(why, cap, "tile %lld elem (%lld, %lld) at byte %lld", id, i, j, at), 1;
          e = at / elem;
          er = e / stride;
          ec = e % stride;
          if (er >= rows || ec >= cols) return snprintf(why, cap, "tile %lld elem (%lld, %lld) maps outside the view to (%lld, %lld)", id, i, j, er, ec), 1;
          mark[er * cols + ec]++;
        }
    }
  for (r = 0; r < rows; r++)
    for (c = 0; c < cols; c++)
      if (mark[r * cols + c] != 1) return snprintf(why, cap, "element (%lld, %lld) covered %d times", r, c, mark[r * cols + c]), 1;
  return 0;
}

static void test_tiles(void) {
  char why[300] = "";
  iris_view2d_t v = iris_view2d((void *)0, 100, 60, 64, 4);
  long long tm = -1, tn = -1, n = 0, r0;
  int ok;
  /* the 100x60 case: the brief's numbers, counted here */
  for (r0 = 0; r0 < 100; r0 += 32) n++;
  check(iris_view_tiles_m(v, 32) == n, "tiles 100x60 tiles_m", "tiles_m %lld, counted %lld", iris_view_tiles_m(v, 32), n);
  for (n = 0, r0 = 0; r0 < 60; r0 += 16) n++;
  check(iris_view_tiles_n(v, 16) == n, "tiles 100x60 tiles_n", "tiles_n %lld, counted %lld", iris_view_tiles_n(v, 16), n);
  check(iris_view_num_tiles(v, 32, 16) == iris_view_tiles_m(v, 32) * iris_view_tiles_n(v, 16) && iris_view_num_tiles(v, 32, 16) == 16, "tiles 100x60 num_tiles",
        "num_tiles %lld", iris_view_num_tiles(v, 32, 16));
  check(iris_view_tile_rows(v, 32, 3) == 100 - 3 * 32 && iris_view_tile_cols(v, 16, 3) == 60 - 3 * 16 && iris_view_tile_rows(v, 32, 0) == 32 &&
            iris_view_tile_cols(v, 16, 2) == 16,
        "tiles 100x60 edge extents", "last tile row %d rows, last tile col %d cols", iris_view_tile_rows(v, 32, 3), iris_view_tile_cols(v, 16, 3));
  iris_view_tile_coords(v, 16, 13, &tm, &tn);
  check(tm == 3 && tn == 1, "tiles 100x60 tile coords", "tile 13 -> (%lld, %lld)", tm, tn);
  ok = !check_tiles(100, 60, 64, 4, 32, 16, why, sizeof why);
  check(ok, "tiles 100x60 cover every element once", "%s", why);
  ok = !check_tiles(64, 64, 64, 8, 32, 16, why, sizeof why);
  check(ok, "tiles exact fit", "%s", why);
  ok = !check_tiles(5, 3, 7, 2, 32, 16, why, sizeof why);
  check(ok, "tiles view smaller than a tile", "%s", why);
  ok = !check_tiles(97, 131, 140, 1, 8, 24, why, sizeof why);
  check(ok, "tiles odd sizes", "%s", why);
}

/* ---------------------------------------------------------- world sizes -- */
/* What depends on the world size W, checked at W = 2, 3, 4, 5, 7, 8 and 16 (MAXR ==
 * IRIS_MAX_RANKS): the rendezvous and the bring-up records at those sizes, and the
 * collectives' planning arithmetic (iris_collectives.h): who reduces, relays and stages
 * which bytes. docs/world_size.md lists what only a machine with that many GPUs shows. */
static const int k_worlds[] = {2, 3, 4, 5, 7, 8, 16};
#define NWORLDS ((int)(sizeof k_worlds / sizeof k_worlds[0]))

/* The rendezvous (iris_init's mode 1) among W forked ranks; the last one late at 8 and 16. */
static void test_world_rendezvous(void) {
  int i;
  char name[96];
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    if (W == 2 || W == 4) continue; /* above */
    snprintf(name, sizeof name, "world %d: rendezvous allgather and 20 barriers + allgathers%s", W, W >= 8 ? ", last rank 200 ms late" : "");
    run_success(name, W, W >= 8 ? W - 1 : -1, 200, 20, g_dir, NULL, 0);
  }
}

/* 13 of 16 ranks come: rank 0's timeout names exactly the 3 that never arrived. */
static void test_world_missing_ranks(void) {
  const int timeout = 1000, n = 13;
  char name[80];
  gen_arg_t a;
  int ranks[MAXR], codes[MAXR], hung, i, ok;
  long long ms;
  unique_name(name, sizeof name, "missing16");
  gen_init(&a, name, MAXR, timeout);
  for (i = 0; i < n; i++) ranks[i] = i;
  ms = run_children(n, ranks, child_generic, &a, 10000, codes, &hung);
  ok = !hung;
  for (i = 0; i < n; i++) ok &= codes[i] == IRIS_ERROR_TIMEOUT;
  for (i = 0; i < MAXR; i++) ok &= names_rank(g_res[0].detail, i) == (i >= n);
  check(ok && has(g_res[0].detail, "13 of 16 present"), "world 16: rendezvous timeout names exactly the 3 missing ranks",
        "hung %d after %lld ms, rank 0 exit %d, detail '%s'", hung, ms, codes[0], g_res[0].detail);
}

/* Bring-up records at every W: equal ones pass; a different world size on the last rank
 * is named; iris_detail_rank_list names every flagged rank of a full world. */
static void test_world_records(void) {
  iris_detail_record_t rec[MAXR];
  char list[512], want[512], name[96];
  unsigned char flags[MAXR];
  int i, r;
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    make_recs(rec, W);
    snprintf(name, sizeof name, "world %d: bring-up records all equal", W);
    expect_recs(name, rec, W, IRIS_SUCCESS, -1, NULL);
    make_recs(rec, W);
    rec[W - 1].world = W == 8 ? 4 : 8;
    snprintf(name, sizeof name, "world %d: bring-up records name the last rank's other world size", W);
    expect_recs(name, rec, W, IRIS_ERROR_MISMATCH, W - 1, "world size");
    size_t len = 0;
    want[0] = 0;
    for (r = 0; r < W; r++) {
      flags[r] = 1;
      len += (size_t)snprintf(want + len, sizeof want - len, r ? ",%d" : "%d", r);
    }
    iris_detail_rank_list(flags, W, list, sizeof list);
    snprintf(name, sizeof name, "world %d: rank list names all %d ranks", W, W);
    check(!strcmp(list, want), name, "'%s', want '%s'", list, want);
  }
}

/* Two-shot all-reduce (iris_coll_reduce_kernel): the chunks of ranks 0..W-1 tile
 * [0, count) in rank order, each starting on a whole 16-byte vector, none more than one
 * vector above its share; each rank's CTAs pull every peer's chunk once. */
static void test_world_all_reduce_plan(void) {
  static const size_t fixed[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 64, 100, 1001, 4097, 8195, 65539, 300007, (size_t)1 << 20, ((size_t)1 << 20) + 3,
                                 ((size_t)1 << 28) + 5};
  static const size_t pers[] = {2, 4, 8}; /* 16-byte vectors of int64, fp32/int32, fp16/bf16 */
  rng_t g = {g_seed ^ 0x5eed};
  int i;
  char name[160], why[256];
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    int ok = 1, me, k, b, pi, c;
    why[0] = 0;
    for (pi = 0; pi < 3 && ok; pi++) {
      const size_t per = pers[pi];
      for (c = 0; c < (int)(sizeof fixed / sizeof fixed[0]) + 12 + 40 && ok; c++) {
        const int nf = (int)(sizeof fixed / sizeof fixed[0]);
        size_t count, prev = 0, share, lo, hi;
        int r;
        if (c < nf) count = fixed[c];
        else if (c < nf + 12) count = (size_t)W * per * (size_t)(1 + (c - nf) / 3) + (size_t)((c - nf) % 3) - 1; /* around multiples of W vectors */
        else count = 1 + (size_t)(rng_next(&g) % 5000000);
        share = (count + (size_t)W - 1) / (size_t)W;
        for (r = 0; r < W && ok; r++) {
          iris_coll_ar_range(count, W, per, r, &lo, &hi);
          if (lo != prev || hi < lo || hi > count || (lo < hi && lo % per) || hi - lo >= share + per)
            ok = 0, snprintf(why, sizeof why, "count %zu per %zu: rank %d gets [%zu, %zu) after [.., %zu) (share %zu)", count, per, r, lo, hi, prev, share);
          prev = hi;
        }
        if (ok && prev != count) ok = 0, snprintf(why, sizeof why, "count %zu per %zu: the chunks end at %zu", count, per, prev);
      }
    }
    snprintf(name, sizeof name, "world %d: two-shot all-reduce chunks tile the count once, in rank order, vector-aligned, balanced", W);
    check(ok, name, "%s", why);
    ok = 1;
    for (me = 0; me < W && ok; me++) {
      unsigned firsts[MAXR] = {0};
      for (b = 0; b < 2 * W + 3 && ok; b++) {
        unsigned seen = 0;
        for (k = 1; k < W && ok; k++) {
          const int p = iris_coll_ar_peer(me, k, b, W);
          if (p < 0 || p >= W || p == me || (seen >> p & 1u)) ok = 0, snprintf(why, sizeof why, "rank %d CTA %d: pull %d goes to rank %d", me, b, k, p);
          else seen |= 1u << p;
        }
        if (b < W - 1 && ok) firsts[iris_coll_ar_peer(me, 1, b, W)]++;
      }
      for (k = 0; k < W && ok; k++)
        if (k != me && firsts[k] != 1) ok = 0, snprintf(why, sizeof why, "rank %d: CTAs 0..%d start at rank %d %u times", me, W - 2, k, firsts[k]);
    }
    snprintf(name, sizeof name, "world %d: two-shot all-reduce gather: every CTA pulls each peer's chunk once, W-1 CTAs start at W-1 different peers", W);
    check(ok, name, "%s", why);
  }
}

/* Relay broadcast (iris_coll_launch_relay, iris_coll_relay_root, _owner_steps), W >= 3:
 * the kernel's plan from the host's chunk equals the host's, and every CTA has a chunk;
 * the W-1 parts have distinct non-root owners; the parts' chunks tile the message; and
 * replaying the stores of every CTA of the root and of every owner, each chunk of every
 * part lands exactly once in every non-root (its own part from the root, the others
 * from their owners). */
static int relay_case(int W, size_t bytes, int ctas, int root, unsigned char *seen, size_t seen_cap, char *why, size_t cap) {
  const iris_coll_relay_t r = iris_coll_relay_plan(bytes, W, ctas, 0);
  const int G = iris_coll_relay_ctas(&r, ctas);
  const iris_coll_relay_t k = iris_coll_relay_plan(bytes, W, G, r.chunk);
  size_t lo, hi, prev = 0, j;
  int p, me, b, q;
  unsigned owners = 0;
  if (k.part != r.part || k.chunk != r.chunk || k.chunks != r.chunks)
    return snprintf(why, cap, "bytes %zu ctas %d: host plan (%zu, %zu, %zu), kernel's with %d CTAs (%zu, %zu, %zu)", bytes, ctas, r.part, r.chunk, r.chunks, G, k.part,
                    k.chunk, k.chunks), 1;
  if (G < 1 || G > ctas || (size_t)G > r.chunks || r.part % 16 || r.chunk % 16 || r.chunk < IRIS_COLL_RELAY_MIN_CHUNK || r.chunk > IRIS_COLL_RELAY_MAX_CHUNK ||
      r.part * (size_t)(W - 1) < bytes || r.part >= (bytes + (size_t)W - 2) / (size_t)(W - 1) + 16 || r.chunks * r.chunk < r.part ||
      r.chunks >= IRIS_COLL_RELAY_ABANDON)
    return snprintf(why, cap, "bytes %zu ctas %d: plan part %zu chunk %zu chunks %zu, %d CTAs", bytes, ctas, r.part, r.chunk, r.chunks, G), 1;
  if ((size_t)(W - 1) * r.chunks > seen_cap) return snprintf(why, cap, "bytes %zu: %zu chunks per part: test buffer too small", bytes, r.chunks), 1;
  for (p = 0; p < W - 1; p++) { /* owners, and the tiling */
    q = iris_coll_relay_owner(p, root, W);
    if (q < 0 || q >= W || q == root || (owners >> q & 1u) || iris_coll_relay_part(q, root, W) != p)
      return snprintf(why, cap, "root %d: part %d owned by rank %d (part of that rank: %d)", root, p, q, iris_coll_relay_part(q, root, W)), 1;
    owners |= 1u << q;
    for (j = 0; j < r.chunks; j++) {
      iris_coll_relay_range(&r, bytes, p, j, &lo, &hi);
      if (lo != prev && lo != hi) return snprintf(why, cap, "bytes %zu: chunk %zu of part %d is [%zu, %zu), after %zu", bytes, j, p, lo, hi, prev), 1;
      if (hi > bytes || lo > hi) return snprintf(why, cap, "bytes %zu: chunk %zu of part %d is [%zu, %zu)", bytes, j, p, lo, hi), 1;
      if (lo < hi) prev = hi;
    }
  }
  if (prev != bytes) return snprintf(why, cap, "bytes %zu: the parts end at %zu", bytes, prev), 1;
  for (me = 0; me < W; me++) { /* replay every CTA of the root and of every owner: what lands in rank me */
    if (me == root) continue;
    memset(seen, 0, (size_t)(W - 1) * r.chunks);
    for (b = 0; b < G; b++) {
      const size_t steps = (size_t)b < r.chunks ? (r.chunks - 1 - (size_t)b) / (size_t)G + 1 : 0;
      size_t s;
      unsigned parts = 0;
      for (q = 0; q < W - 1; q++) { /* iris_coll_relay_root: chunk s of part (q + b) % (W-1) to its owner */
        p = (q + b) % (W - 1);
        if (parts >> p & 1u) return snprintf(why, cap, "root CTA %d visits part %d twice", b, p), 1;
        parts |= 1u << p;
      }
      for (s = 0; s < steps; s++) {
        if (s * G + b >= r.chunks) return snprintf(why, cap, "CTA %d step %zu: chunk %zu of %zu", b, s, s * G + b, r.chunks), 1;
        for (q = 0; q < W - 1; q++)
          if (iris_coll_relay_owner((q + b) % (W - 1), root, W) == me) seen[(size_t)((q + b) % (W - 1)) * r.chunks + s * G + b]++;
        for (int o = 0; o < W; o++) { /* iris_coll_relay_owner_steps on owner o: its chunk s to the other non-roots */
          const int mine = iris_coll_relay_part(o, root, W);
          if (o == root || o == me) continue;
          parts = 1u << mine;
          for (q = 0; q < W - 2; q++) {
            p = iris_coll_relay_peer_part(mine, q, b, W);
            if (p < 0 || p >= W - 1 || (parts >> p & 1u)) return snprintf(why, cap, "owner %d CTA %d: store %d goes to part %d", o, b, q, p), 1;
            parts |= 1u << p;
            if (iris_coll_relay_owner(p, root, W) == me) seen[(size_t)mine * r.chunks + s * G + b]++;
          }
        }
      }
    }
    for (j = 0; j < (size_t)(W - 1) * r.chunks; j++)
      if (seen[j] != 1)
        return snprintf(why, cap, "bytes %zu, %d CTAs, root %d: rank %d gets chunk %zu of part %zu %u times", bytes, G, root, me, j % r.chunks, j / r.chunks, seen[j]), 1;
  }
  return 0;
}
/* Store two-shot all-reduce (iris_coll_ar_store_kernel): a slot is whole 16-byte
 * vectors, the two halves of every CTA's W slots fit the scratch area, the rounds cover
 * each chunk exactly (no round left empty for every CTA, none missing), and round
 * numbers stay below IRIS_COLL_RELAY_ABANDON. */
static void test_world_ar_store_plan(void) {
  const size_t GB = (size_t)1 << 30;
  const size_t bytes[] = {16, 4 << 20, (4 << 20) + 2, 80000006, GB, 16 * GB + 8};
  const int ctas[] = {1, 3, 7, 78, 132, 256};
  static const size_t ess[] = {2, 4, 8};
  char name[160], why[256];
  int i;
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    int ok = 1, ei, ci, bi;
    why[0] = 0;
    for (ei = 0; ei < 3 && ok; ei++)
      for (ci = 0; ci < 6 && ok; ci++) {
        const size_t es = ess[ei], per = 16 / es, slice = iris_coll_ar_slice(es, W, ctas[ci]);
        if (slice < per || slice % per || 2 * (size_t)ctas[ci] * (size_t)W * slice * es > IRIS_COLL_AR_SCRATCH_BYTES)
          ok = 0, snprintf(why, sizeof why, "es %zu, %d CTAs: slot of %zu elements", es, ctas[ci], slice);
        for (bi = 0; bi < 6 && ok; bi++) {
          const size_t count = bytes[bi] / es, chunk = iris_coll_ar_chunk(count, W, per), rounds = iris_coll_ar_rounds(count, W, per, ctas[ci], slice);
          const size_t round = (size_t)ctas[ci] * slice;
          if (rounds * round < chunk || (rounds && (rounds - 1) * round >= chunk) || rounds >= IRIS_COLL_RELAY_ABANDON)
            ok = 0, snprintf(why, sizeof why, "es %zu, %d CTAs, count %zu: %zu rounds of %zu for a chunk of %zu", es, ctas[ci], count, rounds, round, chunk);
        }
      }
    snprintf(name, sizeof name, "world %d: store two-shot all-reduce: slots fit the scratch area, rounds cover every chunk once", W);
    check(ok, name, "%s", why);
  }
}
/* Chain broadcast (iris_coll_launch_chain, iris_coll_chain_kernel): chunks are 16-byte
 * multiples within the relay's limits, tile the message once, the grid has no CTA
 * without a chunk, and replaying every CTA's steps visits each chunk exactly once. */
static void test_chain_plan(void) {
  const size_t MB = (size_t)1 << 20;
  const size_t sizes[] = {1, 17, 16 * MB, 16 * MB + 20, 80 * MB + 6, 1024 * MB + 7, (size_t)13 << 30};
  const int ctas[] = {1, 3, 7, 78, 132, 256};
  char why[256] = "";
  int ok = 1, si, ci;
  for (si = 0; si < 7 && ok; si++)
    for (ci = 0; ci < 6 && ok; ci++) {
      const size_t bytes = sizes[si], chunk = iris_coll_chain_chunk(bytes, ctas[ci]), chunks = iris_coll_chain_chunks(bytes, chunk);
      const int G = (size_t)ctas[ci] > chunks ? (int)chunks : ctas[ci];
      size_t visited = 0, b;
      if (chunk % 16 || chunk < IRIS_COLL_RELAY_MIN_CHUNK || chunk > IRIS_COLL_RELAY_MAX_CHUNK || chunks * chunk < bytes || (chunks - 1) * chunk >= bytes ||
          chunks >= IRIS_COLL_RELAY_ABANDON || G < 1)
        ok = 0, snprintf(why, sizeof why, "bytes %zu, %d CTAs: chunk %zu, %zu chunks, %d CTAs", bytes, ctas[ci], chunk, chunks, G);
      for (b = 0; b < (size_t)G && ok; b++) { /* steps of CTA b: chunks b, b + G, ... */
        const size_t steps = b < chunks ? (chunks - 1 - b) / (size_t)G + 1 : 0;
        if (!steps || (steps - 1) * (size_t)G + b >= chunks) ok = 0, snprintf(why, sizeof why, "bytes %zu: CTA %zu has %zu steps", bytes, b, steps);
        visited += steps;
      }
      if (ok && visited != chunks) ok = 0, snprintf(why, sizeof why, "bytes %zu, %d CTAs: %zu chunks visited of %zu", bytes, G, visited, chunks);
    }
  check(ok, "chain broadcast: chunks tile the message once, every CTA has one, each is visited once", "%s", why);
}
static void test_world_relay_plan(void) {
  const size_t MB = (size_t)1 << 20;
  const size_t sizes[] = {1, 16, 17, 1000, 65536 + 3, 2 * MB, 2 * MB + 1, 2 * MB + 16 * 15 + 3, 4000012, 24 * MB + 2, 80 * MB + 6, 1024 * MB, 1024 * MB + 7};
  const int ctas[] = {1, 3, 7, 78, 132, 256};
  const size_t cap = (size_t)16 * 70000;
  unsigned char *seen = (unsigned char *)malloc(cap);
  char name[160], why[256];
  int i;
  if (!seen) {
    check(0, "relay plan test buffer", "out of host memory");
    return;
  }
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    int bad = 0, si, ci;
    if (W < 3) continue; /* one pull from the root at 2 ranks */
    why[0] = 0;
    for (si = 0; si < (int)(sizeof sizes / sizeof sizes[0]) && !bad; si++)
      for (ci = 0; ci < (int)(sizeof ctas / sizeof ctas[0]) && !bad; ci++) {
        const int roots[3] = {0, W / 2, W - 1};
        int ri;
        for (ri = 0; ri < 3 && !bad; ri++)
          if (sizes[si] < 1024 * MB || ri == 0) bad = relay_case(W, sizes[si], ctas[ci], roots[ri], seen, cap, why, sizeof why);
      }
    snprintf(name, sizeof name, "world %d: relay broadcast: W-1 parts with distinct owners, the kernel's plan is the host's, every rank gets every chunk once", W);
    check(!bad, name, "%s", why);
  }
  free(seen);
}

/* CTA counts of the bandwidth kernels and the staging steps at every W. */
static void test_world_ctas_staging(void) {
  const size_t sizes[] = {1, 1000, 32768, (size_t)1 << 20, (size_t)64 << 20, (size_t)1 << 30, (size_t)1 << 40};
  const int smss[] = {1, 78, 132, 300}, forced[] = {1, 7, 256};
  const size_t requests[] = {1, 100, IRIS_COLL_STAGING_MIN - 1, IRIS_COLL_STAGING_MIN, IRIS_COLL_STAGING_MIN + 1, 3000, ((size_t)1 << 20) + 7,
                             IRIS_COLL_STAGING_BYTES};
  char name[160], why[256];
  int i;
  for (i = 0; i < NWORLDS; i++) {
    const int W = k_worlds[i];
    int ok = 1, si, mi, fi, ar;
    why[0] = 0;
    for (ar = 0; ar < 2; ar++)
      for (mi = 0; mi < 4 && ok; mi++) {
        int last = 0;
        for (si = 0; si < (int)(sizeof sizes / sizeof sizes[0]) && ok; si++) {
          const int n = iris_coll_auto_ctas(ar, sizes[si], W, smss[mi], 0), cap = smss[mi] < IRIS_COLL_MAX_CTAS ? smss[mi] : IRIS_COLL_MAX_CTAS;
          const int store = ar && IRIS_COLL_PUSH && sizes[si] >= IRIS_COLL_AR_STORE_MIN; /* the store two-shot: a fixed count */
          const int want_store = IRIS_COLL_AR_STORE_CTAS < cap ? IRIS_COLL_AR_STORE_CTAS : cap;
          if (n < 1 || n > cap || (!store && n < last) || (store && n != want_store) || (!ar && sizes[si] == (size_t)1 << 40 && n != cap))
            ok = 0, snprintf(why, sizeof why, "%s %zu bytes, %d SMs: %d CTAs (after %d)", ar ? "all-reduce" : "other", sizes[si], smss[mi], n, last);
          last = n;
        }
        for (fi = 0; fi < 3 && ok; fi++)
          if (iris_coll_auto_ctas(ar, (size_t)1 << 20, W, smss[mi], forced[fi]) != forced[fi])
            ok = 0, snprintf(why, sizeof why, "forced %d CTAs gave %d", forced[fi], iris_coll_auto_ctas(ar, (size_t)1 << 20, W, smss[mi], forced[fi]));
      }
    snprintf(name, sizeof name, "world %d: bandwidth kernels: 1..min(SMs, %d) CTAs, growing with size (the store all-reduce: fixed), forced counts kept", W, IRIS_COLL_MAX_CTAS);
    check(ok, name, "%s", why);
    ok = iris_coll_staging_bytes(0) == 0;
    for (si = 0; si < (int)(sizeof requests / sizeof requests[0]) && ok; si++) {
      const size_t S = iris_coll_staging_bytes(requests[si]), ess[3] = {2, 4, 8};
      int e, chunked;
      if (S < requests[si] || S < IRIS_COLL_STAGING_MIN) ok = 0, snprintf(why, sizeof why, "staging request %zu gives %zu bytes", requests[si], S);
      for (e = 0; e < 3 && ok; e++)
        for (chunked = 0; chunked < 2 && ok; chunked++) {
          const size_t step = iris_coll_staging_step(S, ess[e], W, chunked);
          if (step < 16 || step % 16 || step * ess[e] * (size_t)(chunked ? W : 1) > S)
            ok = 0, snprintf(why, sizeof why, "staging %zu bytes (asked %zu), %zu-byte elements, %s: step %zu", S, requests[si], ess[e], chunked ? "W blocks" : "plain", step);
        }
    }
    snprintf(name, sizeof name, "world %d: staged launches: whole 16-element steps that fit the staging area (W blocks for chunked buffers)", W);
    check(ok, name, "%s", why);
  }
}

static void remove_tree(const char *dir, int depth);

/* ------------------------------------------------ launchers' environments -- */
/* An environment as "NAME=VALUE" strings, NULL-terminated; looked up by iris_launch_env. */
static const char *table_getenv(void *user, const char *name) {
  const char *const *kv = (const char *const *)user;
  size_t n = strlen(name);
  for (; *kv; kv++)
    if (strncmp(*kv, name, n) == 0 && (*kv)[n] == '=') return *kv + n + 1;
  return NULL;
}

typedef struct env_case {
  const char *what;
  const char *env[16];
  iris_status_t want;
  iris_launcher_t launcher;
  int rank, world, local_rank, local_size;
  const char *job;   /* exact job id on success */
  const char *words; /* on failure: '|'-separated words the detail must hold */
} env_case_t;

#define OK_CASE(what, launcher, r, w, lr, ls, job, ...) {what, {__VA_ARGS__, NULL}, IRIS_SUCCESS, launcher, r, w, lr, ls, job, NULL}
#define BAD_CASE(what, st, words, ...) {what, {__VA_ARGS__, NULL}, st, IRIS_LAUNCHER_NONE, 0, 0, 0, 0, NULL, words}

static const env_case_t k_env_cases[] = {
    {"nothing set: one rank", {NULL}, IRIS_SUCCESS, IRIS_LAUNCHER_NONE, 0, 1, 0, 1, "", NULL},
    OK_CASE("empty values count as unset", IRIS_LAUNCHER_NONE, 0, 1, 0, 1, "", "RANK=", "WORLD_SIZE="),
    OK_CASE("iris_launch_local's ranks", IRIS_LAUNCHER_IRIS, 1, 3, 1, 3, "c0ffee", "IRIS_RANK=1", "IRIS_WORLD_SIZE=3", "IRIS_JOB_TOKEN=c0ffee"),
    OK_CASE("IRIS_* override torchrun", IRIS_LAUNCHER_IRIS, 0, 2, 0, 2, "", "IRIS_RANK=0", "IRIS_WORLD_SIZE=2", "RANK=5", "WORLD_SIZE=8"),
    OK_CASE("IRIS_* with local rank", IRIS_LAUNCHER_IRIS, 3, 4, 1, 2, "", "IRIS_RANK=3", "IRIS_WORLD_SIZE=4", "IRIS_LOCAL_RANK=1", "IRIS_LOCAL_WORLD_SIZE=2"),
    OK_CASE("torchrun", IRIS_LAUNCHER_TORCHRUN, 1, 2, 1, 2, "torch.xyz.r0.p29500", "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
            "TORCHELASTIC_RUN_ID=xyz", "TORCHELASTIC_RESTART_COUNT=0", "MASTER_PORT=29500", "MASTER_ADDR=localhost"),
    OK_CASE("torchrun without run id: master address and port", IRIS_LAUNCHER_TORCHRUN, 0, 2, 0, 0, "torch.node7.p1234", "RANK=0", "WORLD_SIZE=2",
            "MASTER_ADDR=node7", "MASTER_PORT=1234"),
    OK_CASE("torchrun inside an srun step: Slurm's set is ignored", IRIS_LAUNCHER_TORCHRUN, 3, 4, 3, 4, "torch.none.r2", "RANK=3", "WORLD_SIZE=4",
            "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=4", "TORCHELASTIC_RUN_ID=none", "TORCHELASTIC_RESTART_COUNT=2", "SLURM_PROCID=0", "SLURM_NTASKS=1",
            "SLURM_STEP_ID=0", "SLURM_JOB_ID=77"),
    OK_CASE("torchrun without a job id inside Slurm: Slurm's job.step", IRIS_LAUNCHER_TORCHRUN, 0, 2, 0, 0, "slurm.77.3", "RANK=0", "WORLD_SIZE=2",
            "SLURM_JOB_ID=77", "SLURM_STEP_ID=3"),
    OK_CASE("torchrun without any job id", IRIS_LAUNCHER_TORCHRUN, 1, 2, 1, 0, "", "RANK=1", "WORLD_SIZE=2"),
    OK_CASE("srun step", IRIS_LAUNCHER_SLURM, 2, 4, 2, 0, "slurm.123.0", "SLURM_PROCID=2", "SLURM_NTASKS=4", "SLURM_LOCALID=2", "SLURM_STEP_ID=0",
            "SLURM_JOB_ID=123"),
    OK_CASE("srun step (SLURM_STEPID spelling)", IRIS_LAUNCHER_SLURM, 1, 2, 0, 0, "slurm.9.5", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
            "SLURM_STEPID=5", "SLURM_JOBID=9", "SLURM_JOB_ID=9"),
    OK_CASE("sbatch script outside srun: not a step", IRIS_LAUNCHER_NONE, 0, 1, 0, 1, "", "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=123"),
    OK_CASE("Slurm's batch step id is not a step", IRIS_LAUNCHER_NONE, 0, 1, 0, 1, "", "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=123",
            "SLURM_STEP_ID=4294967291"),
    OK_CASE("MPICH/Hydra with PMI_JOBID", IRIS_LAUNCHER_MPICH, 3, 4, 3, 4, "j9", "PMI_RANK=3", "PMI_SIZE=4", "MPI_LOCALRANKID=3", "MPI_LOCALNRANKS=4",
            "PMI_JOBID=j9"),
    OK_CASE("Intel MPI", IRIS_LAUNCHER_MPICH, 0, 2, 0, 2, "uu-1", "PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=2",
            "I_MPI_HYDRA_UUID=uu-1"),
    OK_CASE("MPICH/Hydra without a job id", IRIS_LAUNCHER_MPICH, 1, 2, 1, 0, "", "PMI_RANK=1", "PMI_SIZE=2"),
    OK_CASE("Open MPI", IRIS_LAUNCHER_OPENMPI, 1, 2, 1, 2, "prterun-h-1@1", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
            "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=prterun-h-1@1"),
    OK_CASE("Open MPI (ess job id)", IRIS_LAUNCHER_OPENMPI, 0, 3, 0, 0, "4242", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=3",
            "OMPI_MCA_ess_base_jobid=4242"),
    OK_CASE("mpirun inside a Slurm allocation: Slurm's set is ignored", IRIS_LAUNCHER_OPENMPI, 1, 4, 1, 0, "ns1", "OMPI_COMM_WORLD_RANK=1",
            "OMPI_COMM_WORLD_SIZE=4", "PMIX_NAMESPACE=ns1", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=2", "SLURM_JOB_ID=5"),
    OK_CASE("Open MPI and PMI agreeing: Open MPI first", IRIS_LAUNCHER_OPENMPI, 1, 2, 1, 0, "", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
            "PMI_RANK=1", "PMI_SIZE=2"),
    OK_CASE("world of IRIS_MAX_RANKS", IRIS_LAUNCHER_TORCHRUN, 15, 16, 15, 0, "", "RANK=15", "WORLD_SIZE=16"),
    BAD_CASE("RANK=abc", IRIS_ERROR_INVALID_ARGUMENT, "RANK=abc", "RANK=abc", "WORLD_SIZE=2"),
    BAD_CASE("WORLD_SIZE=0", IRIS_ERROR_INVALID_ARGUMENT, "WORLD_SIZE=0", "RANK=0", "WORLD_SIZE=0"),
    BAD_CASE("WORLD_SIZE=99999999999", IRIS_ERROR_INVALID_ARGUMENT, "WORLD_SIZE=99999999999|out of range", "RANK=0", "WORLD_SIZE=99999999999"),
    BAD_CASE("RANK=-1", IRIS_ERROR_INVALID_ARGUMENT, "RANK=-1", "RANK=-1", "WORLD_SIZE=2"),
    BAD_CASE("RANK=+1", IRIS_ERROR_INVALID_ARGUMENT, "RANK=+1", "RANK=+1", "WORLD_SIZE=2"),
    BAD_CASE("RANK with a space", IRIS_ERROR_INVALID_ARGUMENT, "RANK= 1", "RANK= 1", "WORLD_SIZE=2"),
    BAD_CASE("WORLD_SIZE=2.0", IRIS_ERROR_INVALID_ARGUMENT, "WORLD_SIZE=2.0", "RANK=1", "WORLD_SIZE=2.0"),
    BAD_CASE("world above IRIS_MAX_RANKS", IRIS_ERROR_UNSUPPORTED, "WORLD_SIZE=17|IRIS_MAX_RANKS", "RANK=0", "WORLD_SIZE=17"),
    BAD_CASE("rank equals world", IRIS_ERROR_INVALID_RANK, "RANK=2|WORLD_SIZE=2", "RANK=2", "WORLD_SIZE=2"),
    BAD_CASE("rank without world", IRIS_ERROR_INVALID_ARGUMENT, "RANK=1|WORLD_SIZE", "RANK=1"),
    BAD_CASE("world without rank", IRIS_ERROR_INVALID_ARGUMENT, "WORLD_SIZE=2|RANK", "WORLD_SIZE=2"),
    BAD_CASE("IRIS_RANK without IRIS_WORLD_SIZE", IRIS_ERROR_INVALID_ARGUMENT, "IRIS_RANK=5|IRIS_WORLD_SIZE", "IRIS_RANK=5"),
    BAD_CASE("local rank equals local size", IRIS_ERROR_INVALID_RANK, "LOCAL_RANK=2|LOCAL_WORLD_SIZE=2", "RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=2",
             "LOCAL_WORLD_SIZE=2"),
    BAD_CASE("local size above world", IRIS_ERROR_INVALID_ARGUMENT, "LOCAL_WORLD_SIZE=4|WORLD_SIZE=2", "RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=4"),
    BAD_CASE("LOCAL_RANK=x", IRIS_ERROR_INVALID_ARGUMENT, "LOCAL_RANK=x", "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=x"),
    BAD_CASE("torchrun and Open MPI disagree", IRIS_ERROR_MISMATCH, "WORLD_SIZE=2|OMPI_COMM_WORLD_SIZE=4", "RANK=0", "WORLD_SIZE=2",
             "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4"),
    BAD_CASE("Open MPI and PMI disagree", IRIS_ERROR_MISMATCH, "OMPI_COMM_WORLD_SIZE=2|PMI_SIZE=3", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
             "PMI_RANK=0", "PMI_SIZE=3"),
    BAD_CASE("a malformed lower set is still an error", IRIS_ERROR_INVALID_ARGUMENT, "PMI_RANK=abc", "RANK=0", "WORLD_SIZE=2", "PMI_RANK=abc", "PMI_SIZE=2"),
    BAD_CASE("SLURM_PROCID=abc in a step", IRIS_ERROR_INVALID_ARGUMENT, "SLURM_PROCID=abc", "SLURM_PROCID=abc", "SLURM_NTASKS=2", "SLURM_STEP_ID=0"),
    BAD_CASE("SLURM_NTASKS=0 in a step", IRIS_ERROR_INVALID_ARGUMENT, "SLURM_NTASKS=0", "SLURM_PROCID=0", "SLURM_NTASKS=0", "SLURM_STEP_ID=0"),
    BAD_CASE("PMI_SIZE=0", IRIS_ERROR_INVALID_ARGUMENT, "PMI_SIZE=0", "PMI_RANK=0", "PMI_SIZE=0"),
    BAD_CASE("PMI rank beyond size", IRIS_ERROR_INVALID_RANK, "PMI_RANK=4|PMI_SIZE=4", "PMI_RANK=4", "PMI_SIZE=4"),
    BAD_CASE("OMPI_COMM_WORLD_RANK=x", IRIS_ERROR_INVALID_ARGUMENT, "OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_SIZE=2"),
    BAD_CASE("MPI_LOCALRANKID=-1", IRIS_ERROR_INVALID_ARGUMENT, "MPI_LOCALRANKID=-1", "PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALRANKID=-1"),
};

/* Does the '|'-separated list of words all occur in s? */
static int has_all(const char *s, const char *words) {
  char buf[256], *save = NULL, *w;
  snprintf(buf, sizeof buf, "%s", words);
  for (w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save))
    if (!has(s, w)) return 0;
  return 1;
}

static void test_launch_env_table(void) {
  size_t i;
  for (i = 0; i < sizeof k_env_cases / sizeof k_env_cases[0]; i++) {
    const env_case_t *c = &k_env_cases[i];
    iris_launch_env_t e;
    iris_status_t st;
    char nm[160];
    memset(&e, 0x5a, sizeof e);
    st = iris_launch_env(table_getenv, (void *)c->env, &e);
    snprintf(nm, sizeof nm, "launch env: %s", c->what);
    if (c->want == IRIS_SUCCESS)
      check(st == IRIS_SUCCESS && e.launcher == c->launcher && e.rank == c->rank && e.world_size == c->world && e.local_rank == c->local_rank &&
                e.local_size == c->local_size && !strcmp(e.job, c->job) && e.launcher_name && e.launcher_name[0],
            nm, "status %s '%s'; launcher %d (want %d), rank %d/%d (want %d/%d), local %d/%d (want %d/%d), job '%s' (want '%s')", sname(st),
            st ? iris_error_detail() : "", (int)e.launcher, (int)c->launcher, e.rank, e.world_size, c->rank, c->world, e.local_rank, e.local_size,
            c->local_rank, c->local_size, st ? "" : e.job, c->job);
    else
      check(st == c->want && has_all(iris_error_detail(), c->words), nm, "status %s (want %s), detail '%s' (want it to name %s)", sname(st), sname(c->want),
            iris_error_detail(), c->words);
  }
  {
    /* a job id too long for the token is cut and hashed; two that differ only at the end stay different */
    static char a[300], b[300];
    const char *ea[] = {"PMI_RANK=0", "PMI_SIZE=2", a, NULL}, *eb[] = {"PMI_RANK=0", "PMI_SIZE=2", b, NULL};
    iris_launch_env_t x, y;
    memset(a, 'j', sizeof a - 1);
    memcpy(a, "PMI_JOBID=", 10);
    a[sizeof a - 1] = 0;
    memcpy(b, a, sizeof b);
    b[sizeof b - 2] = 'k';
    check(iris_launch_env(table_getenv, (void *)ea, &x) == IRIS_SUCCESS && iris_launch_env(table_getenv, (void *)eb, &y) == IRIS_SUCCESS &&
              strlen(x.job) < sizeof x.job && strcmp(x.job, y.job) != 0,
          "launch env: long job ids are hashed, not cut alike", "'%s' vs '%s'", x.job, y.job);
  }
  check(iris_launch_env(NULL, NULL, NULL) == IRIS_ERROR_INVALID_ARGUMENT, "launch env: NULL out", "%s", iris_error_detail());
}

/* Sets NAME=VALUE pairs in the real environment; env_clear unsets them again. */
static void env_set(const char *const *kv) {
  for (; *kv; kv++) {
    char name[64];
    const char *eq = strchr(*kv, '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq - *kv), *kv);
    setenv(name, eq + 1, 1);
  }
}
static void env_clear(const char *const *kv) {
  for (; *kv; kv++) {
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(strchr(*kv, '=') - *kv), *kv);
    unsetenv(name);
  }
}

/* iris_init and iris_launch_local read the same environment, before any GPU call. */
static void test_launch_env_init(void) {
  static const char *no_job[] = {"RANK=1", "WORLD_SIZE=2", NULL}, *bad[] = {"RANK=abc", "WORLD_SIZE=2", NULL},
                    *hosts[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "IRIS_RENDEZVOUS=x", NULL},
                    *over[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=99999999999", NULL};
  iris_t *ctx = (iris_t *)&g_seed;
  iris_launch_t L;
  iris_status_t st;
  int my = -2;
  pid_t w;
  env_set(no_job);
  st = iris_init(NULL, &ctx);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && ctx == NULL && has(iris_error_detail(), "IRIS_RENDEZVOUS") && has(iris_error_detail(), "torchrun"),
        "init: a launcher's world of 2 without job id asks for IRIS_RENDEZVOUS", "%s: '%s'", sname(st), iris_error_detail());
  st = iris_launch_local(4, &L, &my);
  errno = 0;
  w = waitpid(-1, NULL, WNOHANG);
  check(st == IRIS_SUCCESS && my == 1 && L.num_ranks == 0 && w == -1 && errno == ECHILD, "launcher steps aside under torchrun", "%s, my_rank %d, %d ranks",
        sname(st), my, L.num_ranks);
  env_clear(no_job);
  env_set(bad);
  ctx = (iris_t *)&g_seed;
  st = iris_init(NULL, &ctx);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && ctx == NULL && has(iris_error_detail(), "RANK=abc"), "init: RANK=abc is an error", "%s: '%s'", sname(st),
        iris_error_detail());
  my = -2;
  st = iris_launch_local(2, &L, &my);
  errno = 0;
  w = waitpid(-1, NULL, WNOHANG);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && w == -1 && errno == ECHILD && has(iris_error_detail(), "RANK=abc"), "launcher: RANK=abc forks nothing",
        "%s: '%s'", sname(st), iris_error_detail());
  env_clear(bad);
  env_set(hosts);
  ctx = (iris_t *)&g_seed;
  st = iris_init(NULL, &ctx);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && ctx == NULL && has(iris_error_detail(), "MASTER_ADDR") && has(iris_error_detail(), "local size 1 of world size 2"),
        "init: a world over two hosts without MASTER_ADDR asks for it", "%s: '%s'", sname(st), iris_error_detail());
  env_clear(hosts);
  env_set(over);
  ctx = (iris_t *)&g_seed;
  st = iris_init(NULL, &ctx);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "OMPI_COMM_WORLD_SIZE=99999999999"), "init: an overflowing world size is an error",
        "%s: '%s'", sname(st), iris_error_detail());
  env_clear(over);
}

/* Two forked ranks with a launcher's variables meet through iris_init(NULL, ...) at the
 * rendezvous named after the job: they get past the rendezvous (IRIS_SUCCESS with a GPU,
 * else the GPU error of a machine without one), never a timeout or a world of 1. */
typedef struct bringup_arg {
  const char *env[2][8]; /* per rank */
} bringup_arg_t;

static int child_bringup(int rank, void *argp) {
  const bringup_arg_t *a = (const bringup_arg_t *)argp;
  iris_t *ctx = NULL;
  iris_status_t st;
  setenv("IRIS_RENDEZVOUS_DIR", g_dir, 1);
  setenv("IRIS_TIMEOUT_MS", "4000", 1);
  setenv("IRIS_HEAP_SIZE", "2MiB", 1);
  env_set(a->env[rank]);
  st = iris_init(NULL, &ctx);
  g_res[rank].open_st = (int)st;
  snprintf(g_res[rank].detail, sizeof g_res[rank].detail, "%s", iris_error_detail());
  if (st == IRIS_SUCCESS) {
    snprintf(g_res[rank].text, sizeof g_res[rank].text, "%d/%d", iris_rank(ctx), iris_world_size(ctx));
    st = iris_finalize(ctx);
  }
  return (int)st;
}

static void test_launch_env_bringup(void) {
  static const bringup_arg_t cases[] = {
      {{{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=ht", "MASTER_PORT=1", NULL},
        {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=ht", "MASTER_PORT=1", NULL}}},
      {{{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", "SLURM_JOB_ID=4242", NULL},
        {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1", "SLURM_STEP_ID=0", "SLURM_JOB_ID=4242", NULL}}},
      {{{"PMI_RANK=0", "PMI_SIZE=2", "PMI_JOBID=ht:1", NULL}, {"PMI_RANK=1", "PMI_SIZE=2", "PMI_JOBID=ht:1", NULL}}},
      {{{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "PMIX_NAMESPACE=ht@1", NULL},
        {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "PMIX_NAMESPACE=ht@1", NULL}}}};
  static const char *names[] = {"torchrun", "srun", "mpiexec (Hydra)", "mpirun (Open MPI)"};
  int i, ranks[2] = {0, 1}, codes[2], hung;
  for (i = 0; i < 4; i++) {
    char nm[96];
    int ok;
    run_children(2, ranks, child_bringup, (void *)&cases[i], 15000, codes, &hung);
    ok = !hung && codes[0] == codes[1] && (codes[0] == IRIS_SUCCESS || codes[0] == IRIS_ERROR_GPU);
    if (ok && codes[0] == IRIS_SUCCESS) ok = !strcmp(g_res[0].text, "0/2") && !strcmp(g_res[1].text, "1/2");
    if (ok && codes[0] == IRIS_ERROR_GPU) ok = names_rank(g_res[1].detail, 1) && !names_rank(g_res[1].detail, 0); /* not a world of 1 */
    snprintf(nm, sizeof nm, "bring-up under %s's variables meets at the job's rendezvous", names[i]);
    check(ok, nm, "hung %d; rank 0: %s '%s' (%s); rank 1: %s '%s' (%s)", hung, sname((iris_status_t)codes[0]), g_res[0].detail, g_res[0].text,
          sname((iris_status_t)codes[1]), g_res[1].detail, g_res[1].text);
  }
}

/* --------------------------------------------------------- size parser -- */
static void test_size_parser(void) {
  static const struct { const char *text; unsigned long long want; } good[] = {
      {"0", 0}, {"1", 1}, {"512", 512}, {"512B", 512}, {"64K", 65536}, {"64k", 65536}, {"64KB", 65536}, {"64KiB", 65536}, {"2M", 2ULL << 20},
      {"2MiB", 2ULL << 20}, {"1G", 1ULL << 30}, {"1gib", 0}, {"3GB", 3ULL << 30}, {"1T", 1ULL << 40}, {"16777215T", 16777215ULL << 40},
      {"18446744073709551615", 18446744073709551615ULL}, {"007", 7}};
  static const char *bad[] = {"", "-1", "+1", " 1", "1 ", "4iB", "1bB", "1b", "1Ki", "1KiBB", "1KK", "1.5G", "G", "0x10", "1e3", "16777216T",
                              "17179869184G", "18446744073709551616", "99999999999999999999999", "1 G"};
  size_t i;
  for (i = 0; i < sizeof good / sizeof good[0]; i++) {
    size_t v = 12345;
    iris_status_t st = iris_detail_parse_size_var("IRIS_HEAP_SIZE", good[i].text, &v);
    char nm[96];
    snprintf(nm, sizeof nm, "size parser accepts '%s'", good[i].text);
    if (!strcmp(good[i].text, "1gib")) { /* "iB" is case-sensitive: lower-case "ib" is refused */
      snprintf(nm, sizeof nm, "size parser refuses '%s'", good[i].text);
      check(st == IRIS_ERROR_INVALID_ARGUMENT, nm, "%s, %zu", sname(st), v);
      continue;
    }
    check(st == IRIS_SUCCESS && v == (size_t)good[i].want, nm, "%s, %zu (want %llu): '%s'", sname(st), v, good[i].want, iris_error_detail());
  }
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t v = 12345;
    iris_status_t st = iris_detail_parse_size_var("IRIS_HEAP_SIZE", bad[i], &v);
    char nm[96], want[64];
    snprintf(nm, sizeof nm, "size parser refuses '%s'", bad[i]);
    snprintf(want, sizeof want, "IRIS_HEAP_SIZE=%s", bad[i]);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && v == 12345 && (bad[i][0] ? has(iris_error_detail(), want) : has(iris_error_detail(), "IRIS_HEAP_SIZE")), nm,
          "%s, value %zu, detail '%s'", sname(st), v, iris_error_detail());
  }
  check(iris_detail_parse_size("64M") == (64u << 20) && iris_detail_parse_size("4iB") == 0 && iris_detail_parse_size(NULL) == 0,
        "size parser compatibility form", "64M %zu, 4iB %zu", iris_detail_parse_size("64M"), iris_detail_parse_size("4iB"));
  {
    /* the config: SIZE_MAX, values that overflow the 2 MiB rounding, bad IRIS_HEAP_SIZE */
    static const char *envs[] = {"-1", "17179869184G", "4iB", "0", "16777216T"};
    iris_config_t c;
    cfg_base(&c, 0, 1);
    c.heap_size = SIZE_MAX;
    expect_init("config heap_size SIZE_MAX", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "overflows");
    c.heap_size = SIZE_MAX - (1u << 20);
    expect_init("config heap_size overflowing the 2 MiB rounding", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "overflows");
    for (i = 0; i < sizeof envs / sizeof envs[0]; i++) {
      char nm[96], want[64];
      cfg_base(&c, 0, 1);
      c.heap_size = 0;
      setenv("IRIS_HEAP_SIZE", envs[i], 1);
      snprintf(nm, sizeof nm, "config IRIS_HEAP_SIZE=%s refused", envs[i]);
      snprintf(want, sizeof want, "IRIS_HEAP_SIZE=%s", envs[i]);
      expect_init(nm, &c, 0, IRIS_ERROR_INVALID_ARGUMENT, want);
    }
    unsetenv("IRIS_HEAP_SIZE");
    setenv("IRIS_TIMEOUT_MS", "10s", 1);
    cfg_base(&c, 0, 1);
    c.timeout_ms = 0;
    expect_init("config IRIS_TIMEOUT_MS=10s refused", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "IRIS_TIMEOUT_MS=10s");
    unsetenv("IRIS_TIMEOUT_MS");
  }
  {
    /* a rendezvous name outside [A-Za-z0-9._-]{1,64} is an error naming it, never rewritten */
    static const char *bad[] = {"bad/name", "", "a b", "x123456789x123456789x123456789x123456789x123456789x123456789x1234"};
    size_t k;
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      iris_config_t c;
      char nm[160];
      cfg_base(&c, 0, 1);
      c.rendezvous = NULL;
      setenv("IRIS_RENDEZVOUS", bad[k], 1);
      snprintf(nm, sizeof nm, "config IRIS_RENDEZVOUS='%.20s%s' refused, not rewritten", bad[k], strlen(bad[k]) > 20 ? "..." : "");
      expect_init(nm, &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "rendezvous name");
      unsetenv("IRIS_RENDEZVOUS");
      cfg_base(&c, 0, 1);
      c.rendezvous = bad[k];
      snprintf(nm, sizeof nm, "config .rendezvous='%.20s%s' refused, not rewritten", bad[k], strlen(bad[k]) > 20 ? "..." : "");
      expect_init(nm, &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "rendezvous name");
    }
  }
  {
    /* values that say nothing are errors, never the default: set but empty, and 0 for a
     * bound (each variable alone, the others unset) */
    static const struct { const char *var, *val, *want; int field; } cases[] = {
        {"IRIS_HEAP_SIZE", "", "IRIS_HEAP_SIZE is empty", 0},
        {"IRIS_TIMEOUT_MS", "", "IRIS_TIMEOUT_MS is set but empty", 1},
        {"IRIS_TIMEOUT_MS", "0", "IRIS_TIMEOUT_MS=0", 1},
        {"IRIS_BARRIER_TIMEOUT_MS", "", "IRIS_BARRIER_TIMEOUT_MS is set but empty", 2},
        {"IRIS_BARRIER_TIMEOUT_MS", "0", "IRIS_BARRIER_TIMEOUT_MS=0", 2},
        {"IRIS_WAIT_TIMEOUT_MS", "", "IRIS_WAIT_TIMEOUT_MS is set but empty", 3},
        {"IRIS_WAIT_TIMEOUT_MS", "0", "IRIS_WAIT_TIMEOUT_MS=0", 3},
        {"IRIS_WAIT_TIMEOUT_MS", "99", "at least 100 ms", 3},
        {"IRIS_WAIT_TIMEOUT_MS", "2s", "IRIS_WAIT_TIMEOUT_MS=2s", 3},
    };
    size_t k;
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      iris_config_t c;
      char nm[128];
      cfg_base(&c, 0, 1);
      if (cases[k].field == 0) c.heap_size = 0;
      if (cases[k].field == 1) c.timeout_ms = 0;
      if (cases[k].field == 2) c.barrier_timeout_ms = 0;
      setenv(cases[k].var, cases[k].val, 1);
      snprintf(nm, sizeof nm, "config %s='%s' refused, not read as the default", cases[k].var, cases[k].val);
      expect_init(nm, &c, 0, IRIS_ERROR_INVALID_ARGUMENT, cases[k].want);
      unsetenv(cases[k].var);
    }
  }
}

/* ------------------------------------------------------- process token -- */
static int child_token(int rank, void *arg) {
  unsigned char t[IRIS_DETAIL_TOKEN_BYTES];
  (void)arg;
  iris_detail_process_token(t);
  memcpy(g_res[rank].text, t, sizeof t);
  return 0;
}
static void test_process_token(void) {
  unsigned char a[IRIS_DETAIL_TOKEN_BYTES], b[IRIS_DETAIL_TOKEN_BYTES], zero[IRIS_DETAIL_TOKEN_BYTES];
  iris_detail_record_t rec;
  int codes[1], hung, ranks[1] = {0};
  iris_detail_process_token(a);
  iris_detail_process_token(b);
  memset(zero, 0, sizeof zero);
  check(!memcmp(a, b, sizeof a) && memcmp(a, zero, sizeof a) != 0, "process token stable within a process", "two calls differ, or the token is zero");
  memset(g_res, 0, sizeof *g_res);
  run_children(1, ranks, child_token, NULL, 5000, codes, &hung);
  check(!hung && codes[0] == 0 && memcmp(g_res[0].text, a, sizeof a) != 0, "process token differs in a forked child", "hung %d, code %d, equal %d", hung,
        codes[0], !memcmp(g_res[0].text, a, sizeof a));
  /* "same process" needs the token: a peer with our pid (another PID namespace) but
   * another token is another process; our token with another pid is not us either */
  memset(&rec, 0, sizeof rec);
  rec.pid = (int64_t)getpid();
  memcpy(rec.proc_token, a, sizeof a);
  check(iris_detail_same_process(&rec), "same process: pid and token match", "");
  rec.proc_token[3] ^= 1;
  check(!iris_detail_same_process(&rec), "same process: equal pid, other token is another process", "a pid alone was taken for this process");
  rec.proc_token[3] ^= 1;
  rec.pid = 1;
  check(!iris_detail_same_process(&rec) || getpid() == 1, "same process: our token with another pid is not us", "");
}

/* Two processes in PID namespaces of their own, both pid 1 (as in two containers of
 * one pod): each is "another process" to the other. Needs CAP_SYS_ADMIN (SKIP else). */
static int pidns_member(int slot) {
  pid_t pid;
  int status = 0;
  if (unshare(CLONE_NEWPID) != 0) return 10 + (errno == EPERM || errno == EINVAL);
  pid = fork(); /* the child is pid 1 of the new namespace */
  if (pid < 0) return 20;
  if (pid == 0) {
    iris_detail_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.pid = (int64_t)getpid();
    iris_detail_process_token(rec.proc_token);
    if (slot == 0) { /* the first one's identity, for the second */
      memcpy(g_res[0].text, &rec.pid, 8);
      memcpy(g_res[0].text + 8, rec.proc_token, sizeof rec.proc_token);
    }
    if (slot == 1) {
      iris_detail_record_t peer;
      memset(&peer, 0, sizeof peer);
      memcpy(&peer.pid, g_res[0].text, 8);
      memcpy(peer.proc_token, g_res[0].text + 8, sizeof peer.proc_token);
      g_res[1].op_st = (int)peer.pid;
      g_res[1].open_st = iris_detail_same_process(&peer);
    }
    g_res[slot].out_null = (int)getpid();
    _exit(0);
  }
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 30;
}
static void test_pid_namespaces(void) {
  int slot, codes[2] = {-1, -1};
  memset(g_res, 0, sizeof *g_res * 2);
  g_res[1].open_st = -1;
  for (slot = 0; slot < 2; slot++) {
    pid_t pid;
    int status = 0;
    fflush(stdout);
    pid = fork();
    if (pid == 0) _exit(pidns_member(slot));
    waitpid(pid, &status, 0);
    codes[slot] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (codes[slot] == 11) {
      printf("SKIP: pid namespaces: two pid-1 ranks are two processes: this process may not create PID namespaces (unshare: no permission); the token logic "
             "is checked above\n");
      return;
    }
  }
  check(codes[0] == 0 && codes[1] == 0 && g_res[0].out_null == 1 && g_res[1].out_null == 1 && g_res[1].op_st == 1 && g_res[1].open_st == 0,
        "pid namespaces: two pid-1 ranks are two processes", "codes %d %d, pids %d %d, the peer's pid %d, same process %d", codes[0], codes[1],
        g_res[0].out_null, g_res[1].out_null, g_res[1].op_st, g_res[1].open_st);
}

/* ------------------------------------------------ jobs sharing a name -- */
/* Slot s in 0..3: job 'A' + s / 2, rank s % 2. Each process that forms a world checks,
 * by an allgather of its job letter, that every member is of its own job. */
typedef struct jobs_arg {
  const char *name;
  int delay_ms[4];
  int timeout_ms;
} jobs_arg_t;

static int child_job(int slot, void *argp) {
  const jobs_arg_t *a = (const jobs_arg_t *)argp;
  child_res_t *res = &g_res[slot];
  char job[2] = {(char)('A' + slot / 2), 0}, table[2];
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  iris_status_t st;
  sleep_ms(a->delay_ms[slot]);
  set_params(&p, a->name, g_dir, slot % 2, 2, a->timeout_ms, 1ULL << 30);
  p.job = job;
  st = iris_rendezvous_open(&p, &r);
  res->open_st = (int)st;
  snprintf(res->detail, sizeof res->detail, "%s", iris_error_detail());
  if (st != IRIS_SUCCESS) return 0;
  st = iris_rendezvous_allgather(r, job, table, 1);
  res->op_st = (int)st;
  if (st == IRIS_SUCCESS && (table[0] != job[0] || table[1] != job[0])) snprintf(res->why, sizeof res->why, "world of %c%c", table[0], table[1]);
  iris_rendezvous_close(r);
  return 0;
}

/* Each job formed its own world (both ranks succeeded, nobody of the other job in it),
 * or failed with a clear word: IRIS_ERROR_IN_USE naming IRIS_RENDEZVOUS on at least one
 * rank, the other failing too (in use or timed out), nobody in a mixed world. */
static int jobs_outcome_ok(char *why, size_t cap) {
  int j, k;
  for (k = 0; k < 4; k++)
    if (g_res[k].why[0]) return snprintf(why, cap, "slot %d formed a mixed %s", k, g_res[k].why), 0;
  for (j = 0; j < 2; j++) {
    const child_res_t *r0 = &g_res[2 * j], *r1 = &g_res[2 * j + 1];
    int ok0 = r0->open_st == IRIS_SUCCESS && r0->op_st == IRIS_SUCCESS, ok1 = r1->open_st == IRIS_SUCCESS && r1->op_st == IRIS_SUCCESS;
    int in_use = (r0->open_st == IRIS_ERROR_IN_USE && has(r0->detail, "IRIS_RENDEZVOUS")) || (r1->open_st == IRIS_ERROR_IN_USE && has(r1->detail, "IRIS_RENDEZVOUS"));
    if (ok0 && ok1) continue;
    if (!ok0 && !ok1 && in_use) continue;
    return snprintf(why, cap, "job %c: rank 0 %s/%s '%s'; rank 1 %s/%s '%s'", 'A' + j, sname((iris_status_t)r0->open_st), sname((iris_status_t)r0->op_st),
                    r0->detail, sname((iris_status_t)r1->open_st), sname((iris_status_t)r1->op_st), r1->detail),
           0;
  }
  return 1;
}

static void test_jobs_interleavings(void) {
  /* every order of the four starts with job A's first process first (the rest is the
   * same up to swapping the jobs' names), 60 ms apart; then all at once */
  int perm[4] = {0, 1, 2, 3}, ranks[4] = {0, 1, 2, 3}, codes[4], hung, n = 0, bad = 0, formed = 0, i;
  char why[1400] = "", name[80];
  jobs_arg_t a;
  long long t0 = now_ms();
  for (;;) {
    if (perm[0] == 0 || perm[0] == 1) {
      unique_name(name, sizeof name, "jobs");
      a.name = name;
      a.timeout_ms = 700;
      for (i = 0; i < 4; i++) a.delay_ms[perm[i]] = 60 * i;
      run_children(4, ranks, child_job, &a, 8000, codes, &hung);
      n++;
      if (hung || !jobs_outcome_ok(why, sizeof why)) {
        if (!bad) snprintf(why + strlen(why), sizeof why - strlen(why), " (order %d%d%d%d%s)", perm[0], perm[1], perm[2], perm[3], hung ? ", hung" : "");
        bad++;
        break;
      }
      formed += g_res[0].open_st == IRIS_SUCCESS && g_res[2].open_st == IRIS_SUCCESS;
    }
    /* next permutation */
    {
      int k = 2, l = 3, t;
      while (k >= 0 && perm[k] > perm[k + 1]) k--;
      if (k < 0) break;
      while (perm[l] < perm[k]) l--;
      t = perm[k], perm[k] = perm[l], perm[l] = t;
      for (l = k + 1, t = 3; l < t; l++, t--) {
        int u = perm[l];
        perm[l] = perm[t], perm[t] = u;
      }
    }
  }
  for (i = 0; !bad && i < 3; i++) {
    unique_name(name, sizeof name, "jobs-now");
    a.name = name;
    a.timeout_ms = 700;
    memset(a.delay_ms, 0, sizeof a.delay_ms);
    run_children(4, ranks, child_job, &a, 8000, codes, &hung);
    n++;
    if (hung || !jobs_outcome_ok(why, sizeof why)) bad++;
  }
  check(!bad, "two jobs with one rendezvous name: each forms its own world or hears 'in use'", "%s", why);
  fprintf(stderr, "# host_test: %d two-job interleavings, %d with both worlds formed, %lld ms\n", n, formed, now_ms() - t0);
}

/* A job killed at bring-up leaves a stale socket: the next job of that name starts. A
 * live rank 0's socket is never removed by another job, and a rank 0 unlinks only its
 * own socket. */
static int child_rank0_wait(int rank, void *argp) {
  const gen_arg_t *a = (const gen_arg_t *)argp;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  iris_status_t st;
  set_params(&p, a->name, a->dir, rank, 2, a->timeout_ms, 1ULL << 30);
  p.job = "J1";
  st = iris_rendezvous_open(&p, &r);
  g_res[rank].open_st = (int)st;
  snprintf(g_res[rank].detail, sizeof g_res[rank].detail, "%s", iris_error_detail());
  if (r) iris_rendezvous_close(r);
  return (int)st;
}

static int wait_for_path(const char *path, int ms) {
  long long t0 = now_ms();
  struct stat st;
  while (now_ms() - t0 < ms) {
    if (lstat(path, &st) == 0) return 1;
    sleep_ms(2);
  }
  return 0;
}

/* Forks a rank 0 (world 2, job "J1") of a fresh name (tag), waiting timeout_ms for its
 * rank 1; returns its pid once its socket exists, or -1 if it never bound. */
static pid_t start_rank0(gen_arg_t *a, char *name, size_t name_cap, char *path, size_t path_cap, const char *tag, int timeout_ms) {
  pid_t pid;
  unique_name(name, name_cap, tag);
  snprintf(path, path_cap, "%s/%s.sock", g_dir, name);
  gen_init(a, name, 2, timeout_ms);
  fflush(stdout);
  pid = fork();
  if (pid == 0) _exit(child_rank0_wait(0, a));
  if (pid > 0 && !wait_for_path(path, 3000)) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
  }
  return pid;
}

static void test_stale_and_live_sockets(void) {
  char name[80], path[256];
  gen_arg_t a;
  pid_t pid;
  struct stat before, after;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = (iris_rendezvous_t *)&g_seed;
  iris_status_t st;
  long long t0;
  /* 1. stale: rank 0 killed while it waits */
  if ((pid = start_rank0(&a, name, sizeof name, path, sizeof path, "stale", 5000)) < 0) {
    check(0, "stale socket of a killed job is replaced", "rank 0 never bound %s", path);
    return;
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  check(lstat(path, &before) == 0 && S_ISSOCK(before.st_mode), "killed job leaves a stale socket (precondition)", "no socket at %s", path);
  {
    succ_arg_t s;
    int ranks[2] = {0, 1}, codes[2], hung;
    long long ms;
    s.name = name, s.dir = g_dir, s.world = 2, s.late_rank = -1, s.late_ms = 0, s.iters = 2, s.timeout_ms = 3000;
    ms = run_children(2, ranks, child_success, &s, 10000, codes, &hung);
    expect_children_ok("stale socket of a killed job is replaced: the next job starts", 2, ranks, codes, hung, ms);
  }
  /* 2. live: another job's rank 0 finds the name in use and leaves the socket alone */
  if ((pid = start_rank0(&a, name, sizeof name, path, sizeof path, "live", 3000)) < 0 || lstat(path, &before) != 0) {
    check(0, "a live socket is never removed", "rank 0 never bound %s", path);
    return;
  }
  set_params(&p, name, g_dir, 0, 2, 1000, 1ULL << 30);
  p.job = "J2";
  t0 = now_ms();
  st = iris_rendezvous_open(&p, &r);
  check(st == IRIS_ERROR_IN_USE && r == NULL && now_ms() - t0 < 500 && has(iris_error_detail(), name) && has(iris_error_detail(), "IRIS_RENDEZVOUS"),
        "a second rank 0 of the name hears 'in use' at once", "%s after %lld ms: '%s'", sname(st), now_ms() - t0, iris_error_detail());
  check(lstat(path, &after) == 0 && after.st_ino == before.st_ino && after.st_dev == before.st_dev, "a live socket is never removed",
        "the socket at %s is gone or replaced", path);
  /* 3. the live job completes: its rank 1 (same token) joins after the refusal above */
  {
    int codes[1], hung, ranks[1] = {1};
    int status = 0;
    run_children(1, ranks, child_rank0_wait, &a, 8000, codes, &hung);
    waitpid(pid, &status, 0);
    check(!hung && codes[0] == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the job holding the name completes after refusing another",
          "rank 1 exit %d, rank 0 status %d: '%s'", codes[0], status, g_res[1].detail);
  }
  /* 4. only its own socket: a newer socket at the path survives rank 0's exit */
  if ((pid = start_rank0(&a, name, sizeof name, path, sizeof path, "own", 600)) > 0) {
    struct sockaddr_un addr;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0), status = 0;
    unlink(path);
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%.100s", path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 4) != 0 || lstat(path, &before) != 0) {
      check(0, "rank 0 unlinks only its own socket", "could not bind the newer socket: %s", strerror(errno));
      kill(pid, SIGKILL);
    }
    waitpid(pid, &status, 0); /* it times out (rank 1 never comes) and cleans up */
    if (fd >= 0 && lstat(path, &before) == 0)
      check(lstat(path, &after) == 0 && after.st_ino == before.st_ino, "rank 0 unlinks only its own socket", "the newer socket at %s was removed", path);
    if (fd >= 0) close(fd);
    unlink(path);
  } else {
    check(0, "rank 0 unlinks only its own socket", "rank 0 never bound %s", path);
  }
}

/* ------------------------------------------------ rendezvous directories -- */
static void test_rendezvous_dirs(void) {
  char dir[160], sub[200], name[80];
  iris_rendezvous_params_t p;
  unique_name(name, sizeof name, "dirs");
  /* owned by someone else: root can make one; anyone else can use / (root's) */
  if (getuid() == 0) {
    snprintf(dir, sizeof dir, "%s/foreign", g_dir);
    if (mkdir(dir, 0700) != 0 || chown(dir, 12345, 12345) != 0) {
      check(0, "rendezvous dir of another user", "cannot prepare %s: %s", dir, strerror(errno));
      return;
    }
  } else {
    snprintf(dir, sizeof dir, "/");
  }
  set_params(&p, name, dir, 0, 2, 1000, 0);
  expect_open("rendezvous dir of another user refused (rank 0)", &p, 0, IRIS_ERROR_PERMISSION);
  check(has(iris_error_detail(), "IRIS_RENDEZVOUS_DIR") && has(iris_error_detail(), "belongs to uid"), "rendezvous dir of another user names IRIS_RENDEZVOUS_DIR",
        "'%s'", iris_error_detail());
  set_params(&p, name, dir, 1, 2, 1000, 0);
  expect_open("rendezvous dir of another user refused (rank 1)", &p, 0, IRIS_ERROR_PERMISSION);
  if (getuid() == 0) rmdir(dir);
  /* a parent that others may write (not sticky) */
  snprintf(dir, sizeof dir, "%s/open2", g_dir);
  snprintf(sub, sizeof sub, "%s/priv", dir);
  if (mkdir(dir, 0777) != 0 || chmod(dir, 0777) != 0) {
    check(0, "rendezvous dir under a world-writable parent refused", "mkdir %s: %s", dir, strerror(errno));
    return;
  }
  set_params(&p, name, sub, 0, 2, 1000, 0);
  expect_open("rendezvous dir under a world-writable parent refused", &p, 0, IRIS_ERROR_PERMISSION);
  check(has(iris_error_detail(), dir) && has(iris_error_detail(), "writable by other users"), "rendezvous dir parent check names the parent", "'%s'",
        iris_error_detail());
  /* ... but a sticky one (like /tmp) is fine */
  chmod(dir, 01777);
  run_success("rendezvous dir under a sticky world-writable parent", 2, -1, 0, 1, sub, NULL, 0);
  remove_tree(dir, 0);
  /* the default: $XDG_RUNTIME_DIR/iris when set */
  snprintf(dir, sizeof dir, "%s/xdg", g_dir);
  snprintf(sub, sizeof sub, "%s/iris", dir);
  if (mkdir(dir, 0700) == 0) {
    struct stat st;
    const char *old = getenv("IRIS_RENDEZVOUS_DIR");
    char saved[256];
    snprintf(saved, sizeof saved, "%s", old ? old : "");
    unsetenv("IRIS_RENDEZVOUS_DIR");
    setenv("XDG_RUNTIME_DIR", dir, 1);
    run_success("rendezvous default dir is $XDG_RUNTIME_DIR/iris", 2, -1, 0, 1, NULL, NULL, 0);
    check(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700, "rendezvous created $XDG_RUNTIME_DIR/iris 0700", "lstat %s", sub);
    unsetenv("XDG_RUNTIME_DIR");
    if (old) setenv("IRIS_RENDEZVOUS_DIR", saved, 1);
    remove_tree(dir, 0);
  }
}

/* ---------------------------------------------- a peer's ERROR frames -- */
/* A fake rank 0 at <g_dir>/<name>.sock: answers the hello (phase 0), or welcomes and
 * answers the first collective (phase 1), with an ERROR frame of the given status. */
typedef struct fake_arg {
  const char *name;
  int phase, status;
} fake_arg_t;

static int fake_rank0(int rank, void *argp) {
  const fake_arg_t *a = (const fake_arg_t *)argp;
  struct sockaddr_un addr;
  iris_detail_frame_t f;
  iris_detail_hello_t h;
  char buf[256];
  long long dl = now_ms() + 4000;
  int lfd = socket(AF_UNIX, SOCK_STREAM, 0), fd;
  (void)rank;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%.50s/%.45s.sock", g_dir, a->name);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 4) != 0) return 2;
  fd = accept(lfd, NULL, NULL);
  if (fd < 0 || iris_detail_recv_header(fd, &f, dl) || iris_detail_io(fd, &h, sizeof h, dl, 0)) return 3;
  if (a->phase == 1) {
    if (iris_detail_send_frame(fd, IRIS_DETAIL_WELCOME, 0, 0, 0, NULL, 0, dl)) return 4;
    if (iris_detail_recv_header(fd, &f, dl) || (f.len && f.len < sizeof buf && iris_detail_io(fd, buf, (size_t)f.len, dl, 0))) return 5;
  }
  snprintf(buf, sizeof buf, "all is well (fake, status %d)", a->status);
  iris_detail_send_frame(fd, IRIS_DETAIL_ERROR, 0, a->status, f.seq, buf, strlen(buf) + 1, dl);
  sleep_ms(300);
  close(fd);
  close(lfd);
  unlink(addr.sun_path);
  return 0;
}

static void test_error_frames(void) {
  static const int statuses[] = {0, -5, IRIS_STATUS_COUNT, 99, IRIS_ERROR_MISMATCH};
  int phase, i;
  for (phase = 0; phase < 2; phase++)
    for (i = 0; i < (int)(sizeof statuses / sizeof statuses[0]); i++) {
      char name[80], nm[120];
      fake_arg_t a;
      pid_t pid;
      iris_rendezvous_params_t p;
      iris_rendezvous_t *r = NULL;
      iris_status_t st, want = statuses[i] == IRIS_ERROR_MISMATCH ? IRIS_ERROR_MISMATCH : IRIS_ERROR_SYSTEM;
      unsigned char one = 1, table[2];
      int status = 0;
      unique_name(name, sizeof name, "fake");
      a.name = name, a.phase = phase, a.status = statuses[i];
      fflush(stdout);
      pid = fork();
      if (pid == 0) _exit(fake_rank0(0, &a));
      set_params(&p, name, g_dir, 1, 2, 3000, 1ULL << 30);
      st = iris_rendezvous_open(&p, &r);
      if (phase == 1 && st == IRIS_SUCCESS) {
        st = iris_rendezvous_allgather(r, &one, table, 1);
        iris_rendezvous_close(r);
        r = NULL;
      }
      waitpid(pid, &status, 0);
      snprintf(nm, sizeof nm, "peer ERROR frame with status %d at %s is %s", statuses[i], phase ? "an allgather" : "bring-up",
               want == IRIS_ERROR_SYSTEM ? "a protocol error" : "that error");
      check(st == want && r == NULL && (want != IRIS_ERROR_SYSTEM || has(iris_error_detail(), "protocol error")), nm, "%s: '%s' (fake rank 0 exit %d)",
            sname(st), iris_error_detail(), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

/* Rank 1 fails after bring-up and says so (an ERROR frame where its GATHER was due):
 * rank 0's allgather reports that rank's failure and status, not "out of step". */
static void test_error_frame_to_rank0(void) {
  char name[80];
  pid_t pid;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  iris_status_t st;
  unsigned char one = 1, table[2];
  int status = 0;
  unique_name(name, sizeof name, "errto0");
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    static const char msg[] = "rank 1: out of GPU memory (fake)";
    set_params(&p, name, g_dir, 1, 2, 3000, 1ULL << 30);
    if (iris_rendezvous_open(&p, &r) != IRIS_SUCCESS) _exit(2);
    iris_detail_send_frame(r->fds[0], IRIS_DETAIL_ERROR, 1, (int)IRIS_ERROR_OUT_OF_MEMORY, 1, msg, sizeof msg, now_ms() + 2000);
    sleep_ms(300);
    iris_rendezvous_close(r);
    _exit(0);
  }
  set_params(&p, name, g_dir, 0, 2, 3000, 1ULL << 30);
  st = iris_rendezvous_open(&p, &r);
  if (st == IRIS_SUCCESS) {
    st = iris_rendezvous_allgather(r, &one, table, 1);
    iris_rendezvous_close(r);
  }
  waitpid(pid, &status, 0);
  check(st == IRIS_ERROR_OUT_OF_MEMORY && has(iris_error_detail(), "rank 1 failed") && has(iris_error_detail(), "out of GPU memory (fake)"),
        "rank 0: a peer's ERROR frame where a GATHER was due is that peer's failure, not a mismatch", "%s: '%s' (rank 1 exit %d)", sname(st),
        iris_error_detail(), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* A hello of another size (another build of iris) is answered with a reason. */
static void test_hello_other_build(void) {
  char name[80], path[256];
  gen_arg_t a;
  pid_t pid;
  struct sockaddr_un addr;
  iris_detail_frame_t f;
  char junk[24], msg[1100];
  int fd = -1, ok = 0, status = 0;
  long long dl;
  msg[0] = 0;
  if ((pid = start_rank0(&a, name, sizeof name, path, sizeof path, "build", 800)) > 0) {
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%.100s", path);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    dl = now_ms() + 2000;
    memset(junk, 0, sizeof junk);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
        iris_detail_send_frame(fd, IRIS_DETAIL_HELLO, 1, 0, 0, junk, sizeof junk, dl) == 0 && iris_detail_recv_header(fd, &f, dl) == 0)
      ok = f.type == IRIS_DETAIL_ERROR && f.status == IRIS_ERROR_MISMATCH;
    snprintf(msg, sizeof msg, "%s", iris_error_detail());
  }
  if (fd >= 0) close(fd);
  if (pid > 0) waitpid(pid, &status, 0);
  check(ok && has(msg, "different builds"), "a hello of another size gets a reason", "answer ok %d, message '%s'", ok, msg);
}

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

/* ------------------------------------------------------------------- main -- */
/* Remove dir and what a failing run may have left in it (sockets, subdirectories). */
static void remove_tree(const char *dir, int depth) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[512];
  if (d) {
    while ((e = readdir(d)) != NULL) {
      struct stat st;
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && depth < 2) remove_tree(path, depth + 1);
      else unlink(path);
    }
    closedir(d);
  }
  if (rmdir(dir) != 0) fprintf(stderr, "# host_test: could not remove %s: %s\n", dir, strerror(errno));
}

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
  words[IRIS_FAULT_WORD_FATAL] = IRIS_FAULT_MAKE(IRIS_FAULT_TIMEOUT, 2, IRIS_FAULT_SITE_MAKE(1, IRIS_SITE_LL), 9);
  st = iris_get_async_error(ctx);
  check(st == IRIS_ERROR_PEER_FAILED && strstr(iris_error_detail(), "rank 2") && strstr(iris_error_detail(), "died"),
        "faults: a timed-out wait for a rank whose process is gone is IRIS_ERROR_PEER_FAILED naming it", "%s: %s", sname(st), iris_error_detail());
  words[IRIS_FAULT_WORD_FATAL] = 0;
  check(iris_abort(ctx) == IRIS_SUCCESS && iris_get_async_error(ctx) == IRIS_ERROR_ABORTED && iris_detail_check_fault(ctx) == IRIS_ERROR_ABORTED &&
            iris_abort(ctx) == IRIS_SUCCESS && iris_get_async_error(ctx) == IRIS_ERROR_ABORTED,
        "faults: iris_abort makes every later check IRIS_ERROR_ABORTED (twice is harmless)", "%s", iris_error_detail());
  check(iris_abort(NULL) == IRIS_ERROR_INVALID_ARGUMENT && iris_get_async_error(NULL) == IRIS_ERROR_INVALID_ARGUMENT, "faults: NULL context refused", "%s",
        iris_error_detail());
  ctx->fault_host = NULL;
  iris_detail_host_only_free(ctx);
}

/* ------------------------------------------------ multi-node: grouping, TCP -- */
static iris_status_t group_of(const char *const *ids, int world, int rank, int *node, int *nodes, int *lr, int *ls) {
  char buf[MAXR * 2][IRIS_DETAIL_HOST_ID_BYTES];
  int r;
  memset(buf, 0, sizeof buf);
  for (r = 0; r < world; r++) snprintf(buf[r], sizeof buf[r], "%s", ids[r]);
  return iris_detail_group_nodes(&buf[0][0], sizeof buf[0], world, rank, node, nodes, lr, ls);
}
static void test_node_grouping(void) {
  static const char *const two[] = {"A", "A", "B", "B"}, *const one[] = {"h/x", "h/x", "h/x"}, *const uneven[] = {"A", "A", "A", "B"},
                           *const split[] = {"A", "B", "A", "B"}, *const back[] = {"A", "A", "B", "B", "A", "A"}, *const third[] = {"A", "A", "B", "B", "C"};
  const char *big[MAXR * 2];
  int node = -1, nodes = -1, lr = -1, ls = -1, r, ok = 1;
  iris_status_t st;
  for (r = 0; r < 4 && ok; r++) {
    st = group_of(two, 4, r, &node, &nodes, &lr, &ls);
    ok = st == IRIS_SUCCESS && node == r / 2 && nodes == 2 && lr == r % 2 && ls == 2;
  }
  check(ok, "nodes: 2 hosts x 2 ranks group by block", "rank %d: %s node %d of %d, local %d of %d", r - 1, sname(st), node, nodes, lr, ls);
  st = group_of(one, 3, 2, &node, &nodes, &lr, &ls);
  check(st == IRIS_SUCCESS && node == 0 && nodes == 1 && lr == 2 && ls == 3, "nodes: one host is one node", "%s node %d of %d, local %d of %d", sname(st), node,
        nodes, lr, ls);
  st = group_of(uneven, 4, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_MISMATCH && has(iris_error_detail(), "'B'") && has(iris_error_detail(), "has 1 ranks") && has(iris_error_detail(), "has 3"),
        "nodes: unequal rank counts are refused naming node and counts", "%s: '%s'", sname(st), iris_error_detail());
  st = group_of(third, 5, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_MISMATCH && has(iris_error_detail(), "'C'"), "nodes: a short last node is refused", "%s: '%s'", sname(st), iris_error_detail());
  st = group_of(split, 4, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "not consecutive") && has(iris_error_detail(), "block"),
        "nodes: round-robin placement is refused", "%s: '%s'", sname(st), iris_error_detail());
  st = group_of(back, 6, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "'A'") && names_rank(iris_error_detail(), 4),
        "nodes: a node whose ranks come back later is refused", "%s: '%s'", sname(st), iris_error_detail());
  for (r = 0; r < IRIS_MAX_RANKS + 1; r++) big[r] = "same";
  st = group_of(big, IRIS_MAX_RANKS + 1, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "IRIS_MAX_RANKS"), "nodes: a node above IRIS_MAX_RANKS is refused", "%s: '%s'", sname(st),
        iris_error_detail());
}

static const char *table_env(void *user, const char *name) {
  const char *const *kv = (const char *const *)user;
  size_t n = strlen(name);
  for (; *kv; kv++)
    if (strncmp(*kv, name, n) == 0 && (*kv)[n] == '=') return *kv + n + 1;
  return NULL;
}
static void test_node_env(void) {
  static const char *id_set[] = {"IRIS_HOST_ID=vnode1", NULL}, *none[] = {NULL}, *long_id[] = {
      "IRIS_HOST_ID=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", NULL};
  static const char *tcp_ok[] = {"MASTER_ADDR=node7", "MASTER_PORT=29500", NULL}, *no_addr[] = {"MASTER_PORT=29500", NULL},
                    *bad_port[] = {"MASTER_ADDR=node7", "MASTER_PORT=70000", NULL}, *junk_port[] = {"MASTER_ADDR=node7", "MASTER_PORT=29x", NULL};
  char id[IRIS_DETAIL_HOST_ID_BYTES], addr[96];
  iris_launch_env_t env;
  int use = -1, port = 0;
  iris_status_t st;
  st = iris_detail_host_id(table_env, (void *)id_set, id, sizeof id);
  check(st == IRIS_SUCCESS && strcmp(id, "vnode1") == 0, "nodes: IRIS_HOST_ID is the host id", "%s '%s'", sname(st), id);
  st = iris_detail_host_id(table_env, (void *)none, id, sizeof id);
  check(st == IRIS_SUCCESS && strchr(id, '/') && id[0] != '/', "nodes: default host id is hostname/boot id", "%s '%s'", sname(st), id);
  st = iris_detail_host_id(table_env, (void *)long_id, id, sizeof id);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_HOST_ID"), "nodes: an overlong IRIS_HOST_ID is an error", "%s: '%s'", sname(st),
        iris_error_detail());
  memset(&env, 0, sizeof env);
  env.launcher_name = "torchrun";
  env.world_size = 4;
  env.local_size = 4;
  st = iris_detail_tcp_choice(table_env, (void *)tcp_ok, NULL, &env, &use, addr, sizeof addr, &port);
  check(st == IRIS_SUCCESS && use == 0, "rendezvous choice: one host stays on the Unix socket", "%s use %d", sname(st), use);
  st = iris_detail_tcp_choice(table_env, (void *)tcp_ok, "tcp", NULL, &use, addr, sizeof addr, &port);
  check(st == IRIS_SUCCESS && use == 1 && port == 29500 && strcmp(addr, "node7") == 0, "rendezvous choice: IRIS_RENDEZVOUS=tcp uses MASTER_ADDR:MASTER_PORT",
        "%s use %d %s:%d", sname(st), use, addr, port);
  env.local_size = 2;
  st = iris_detail_tcp_choice(table_env, (void *)tcp_ok, NULL, &env, &use, addr, sizeof addr, &port);
  check(st == IRIS_SUCCESS && use == 1, "rendezvous choice: a world over hosts uses TCP", "%s use %d", sname(st), use);
  st = iris_detail_tcp_choice(table_env, (void *)no_addr, NULL, &env, &use, addr, sizeof addr, &port);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "MASTER_ADDR") && has(iris_error_detail(), "local size 2 of world size 4"),
        "rendezvous choice: no MASTER_ADDR is an error naming it", "%s: '%s'", sname(st), iris_error_detail());
  st = iris_detail_tcp_choice(table_env, (void *)bad_port, "tcp", NULL, &use, addr, sizeof addr, &port);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "MASTER_PORT=70000"), "rendezvous choice: MASTER_PORT out of range", "%s: '%s'", sname(st),
        iris_error_detail());
  st = iris_detail_tcp_choice(table_env, (void *)junk_port, "tcp", NULL, &use, addr, sizeof addr, &port);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "MASTER_PORT=29x"), "rendezvous choice: a malformed MASTER_PORT", "%s: '%s'", sname(st),
        iris_error_detail());
}

/* A port nobody listens on now (bound to 0, read back, closed). */
static int free_port(void) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0) port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}
typedef struct tcp_arg {
  int port, world[MAXR], timeout_ms, gathers;
  const char *job[MAXR];
} tcp_arg_t;
/* Exit code: the status of open (or of the first failing allgather). */
static int child_tcp(int rank, void *argp) {
  const tcp_arg_t *a = (const tcp_arg_t *)argp;
  child_res_t *res = &g_res[rank];
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = (iris_rendezvous_t *)&p;
  iris_status_t st;
  long long t0;
  int i;
  set_params(&p, "tcp-test", NULL, rank, a->world[rank], a->timeout_ms, 1ULL << 30);
  p.job = a->job[rank];
  t0 = now_ms();
  st = iris_rendezvous_open_tcp(&p, "127.0.0.1", a->port, &r);
  res->open_ms = now_ms() - t0;
  res->out_null = r == NULL;
  snprintf(res->detail, sizeof res->detail, "%s", iris_error_detail());
  if (st != IRIS_SUCCESS) return r ? 100 : (int)st;
  for (i = 0; i < a->gathers; i++)
    if (gather_and_verify(r, rank, a->world[rank], i, 1 + (size_t)(i * 7) % 60)) { iris_rendezvous_close(r); return 99; }
  iris_rendezvous_close(r);
  return 0;
}
static void tcp_init(tcp_arg_t *a, int world, int timeout_ms, int gathers) {
  int i;
  memset(a, 0, sizeof *a);
  a->port = free_port();
  a->timeout_ms = timeout_ms;
  a->gathers = gathers;
  for (i = 0; i < MAXR; i++) {
    a->world[i] = world;
    a->job[i] = "job-1";
  }
}
static void test_tcp_rendezvous(void) {
  tcp_arg_t a;
  int ranks[MAXR], codes[MAXR], hung, i, lfd, one = 1;
  long long ms;
  struct sockaddr_in sa;
  for (i = 0; i < MAXR; i++) ranks[i] = i;
  /* 4 ranks, 30 allgathers; then again on the same port at once (left in TIME_WAIT) */
  tcp_init(&a, 4, 5000, 30);
  ms = run_children(4, ranks, child_tcp, &a, 15000, codes, &hung);
  expect_children_ok("tcp rendezvous 4 ranks 30 allgathers", 4, ranks, codes, hung, ms);
  ms = run_children(4, ranks, child_tcp, &a, 15000, codes, &hung);
  expect_children_ok("tcp rendezvous reuses a port its last job just left (stale port)", 4, ranks, codes, hung, ms);
  /* a missing peer: rank 0 names it, within the timeout */
  tcp_init(&a, 3, 800, 1);
  ms = run_children(2, ranks, child_tcp, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && codes[1] == IRIS_ERROR_TIMEOUT && names_rank(g_res[0].detail, 2) && !names_rank(g_res[0].detail, 1) &&
            has(g_res[0].detail, "MASTER_ADDR") && g_res[0].out_null && g_res[1].out_null && ms < 4000,
        "tcp rendezvous missing rank times out naming it", "hung %d after %lld ms; rank 0 %s '%s'; rank 1 %s '%s'", hung, ms, sname((iris_status_t)codes[0]),
        g_res[0].detail, sname((iris_status_t)codes[1]), g_res[1].detail);
  /* no rank 0 at all: rank 1 names the address */
  ms = run_children(1, ranks + 1, child_tcp, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && has(g_res[1].detail, "127.0.0.1:") && has(g_res[1].detail, "MASTER_ADDR") && ms >= 700 && ms < 4000,
        "tcp rendezvous with no rank 0 times out naming MASTER_ADDR:MASTER_PORT", "%lld ms, %s '%s'", ms, sname((iris_status_t)codes[0]), g_res[1].detail);
  /* a wrong world size */
  tcp_init(&a, 2, 5000, 1);
  a.world[1] = 3;
  ms = run_children(2, ranks, child_tcp, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_MISMATCH && codes[1] == IRIS_ERROR_MISMATCH && has(g_res[0].detail, "world size") && has(g_res[1].detail, "world size") &&
            ms < 4000,
        "tcp rendezvous refuses a wrong world size", "hung %d after %lld ms; rank 0 %s '%s'; rank 1 %s '%s'", hung, ms, sname((iris_status_t)codes[0]),
        g_res[0].detail, sname((iris_status_t)codes[1]), g_res[1].detail);
  /* a rank of another job: refused, rank 0 keeps waiting for its own */
  tcp_init(&a, 2, 1200, 1);
  a.job[1] = "job-2";
  ms = run_children(2, ranks, child_tcp, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && codes[1] == IRIS_ERROR_IN_USE && has(g_res[0].detail, "another job") && has(g_res[1].detail, "another job"),
        "tcp rendezvous refuses a rank of another job", "hung %d after %lld ms; rank 0 %s '%s'; rank 1 %s '%s'", hung, ms, sname((iris_status_t)codes[0]),
        g_res[0].detail, sname((iris_status_t)codes[1]), g_res[1].detail);
  /* the port is taken by a live listener: rank 0 says so at once */
  tcp_init(&a, 2, 3000, 1);
  lfd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons((unsigned short)a.port);
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 4) != 0) {
    check(0, "tcp rendezvous refuses a port in use", "could not occupy port %d: %s", a.port, strerror(errno));
  } else {
    ms = run_children(1, ranks, child_tcp, &a, 10000, codes, &hung);
    check(!hung && codes[0] == IRIS_ERROR_IN_USE && has(g_res[0].detail, "MASTER_PORT") && ms < 1000, "tcp rendezvous refuses a port in use",
          "%lld ms, %s '%s'", ms, sname((iris_status_t)codes[0]), g_res[0].detail);
  }
  if (lfd >= 0) close(lfd);
  {
    iris_rendezvous_params_t p;
    iris_rendezvous_t *r = (iris_rendezvous_t *)&p;
    iris_status_t st;
    set_params(&p, "tcp-test", NULL, 1, 2, 500, 1ULL << 30);
    st = iris_rendezvous_open_tcp(&p, "no-such-host.invalid", 29500, &r);
    check((st == IRIS_ERROR_INVALID_ARGUMENT || st == IRIS_ERROR_TIMEOUT) && r == NULL && has(iris_error_detail(), "no-such-host.invalid"),
          "tcp rendezvous names an unresolvable MASTER_ADDR", "%s: '%s'", sname(st), iris_error_detail());
    st = iris_rendezvous_open_tcp(&p, "127.0.0.1", 0, &r);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && r == NULL && has(iris_error_detail(), "MASTER_PORT"), "tcp rendezvous refuses port 0", "%s: '%s'", sname(st),
          iris_error_detail());
  }
}

static void test_nccl_loader(void) {
  const iris_detail_nccl_lib_t *lib = NULL;
  iris_status_t st;
  void *h;
  setenv("IRIS_NCCL_LIBRARY", "/nonexistent/libnccl-test.so.2", 1);
  st = iris_detail_nccl_load(&lib);
  check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "/nonexistent/libnccl-test.so.2") && has(iris_error_detail(), "IRIS_NCCL_LIBRARY"),
        "nccl loader: a missing library is refused naming it", "%s: '%s'", sname(st), iris_error_detail());
  unsetenv("IRIS_NCCL_LIBRARY");
  h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libnccl.so.2", RTLD_NOW);
  if (!h) {
    printf("SKIP: nccl loader: resolves every function: no libnccl.so.2 here\n");
    return;
  }
  st = iris_detail_nccl_load(&lib);
  check(st == IRIS_SUCCESS && lib && lib->api.all_reduce && lib->api.all_gather && lib->api.reduce_scatter && lib->api.broadcast && lib->comm_init_rank &&
            lib->get_unique_id && lib->api.version >= 20700,
        "nccl loader: resolves every function from libnccl.so.2 (no link dependency)", "%s: '%s', version %d", sname(st), iris_error_detail(),
        lib ? lib->api.version : -1);
}

/* iris_init over virtual nodes (IRIS_HOST_ID) and the TCP rendezvous, without a GPU:
 * the ranks meet and are grouped before any GPU call, so an uneven layout is refused on
 * every rank (naming the node and counts), and an even one gets past the grouping (to
 * the GPU error here, or further on a machine with a GPU), never a timeout. */
typedef struct vinit_arg { const char *ids[4]; int port; } vinit_arg_t;
static int child_vinit(int rank, void *argp) {
  const vinit_arg_t *a = (const vinit_arg_t *)argp;
  char port[16], r[8];
  iris_t *ctx = NULL;
  iris_status_t st;
  snprintf(port, sizeof port, "%d", a->port);
  snprintf(r, sizeof r, "%d", rank);
  setenv("IRIS_RANK", r, 1);
  setenv("IRIS_WORLD_SIZE", "4", 1);
  setenv("IRIS_RENDEZVOUS", "tcp", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", port, 1);
  setenv("IRIS_HOST_ID", a->ids[rank], 1);
  setenv("IRIS_TIMEOUT_MS", "5000", 1);
  setenv("IRIS_HEAP_SIZE", "4M", 1);
  st = iris_init(NULL, &ctx);
  snprintf(g_res[rank].detail, sizeof g_res[rank].detail, "%s", iris_error_detail());
  g_res[rank].out_null = ctx == NULL;
  if (st == IRIS_SUCCESS) iris_finalize(ctx);
  return (int)st;
}
static void test_init_virtual_nodes(void) {
  vinit_arg_t a = {{"vA", "vA", "vA", "vB"}, 0};
  int ranks[4] = {0, 1, 2, 3}, codes[4], hung, i, ok = 1;
  long long ms;
  a.port = free_port();
  ms = run_children(4, ranks, child_vinit, &a, 20000, codes, &hung);
  for (i = 0; i < 4; i++) ok = ok && codes[i] == IRIS_ERROR_MISMATCH && has(g_res[i].detail, "'vB'") && has(g_res[i].detail, "has 1 ranks") && g_res[i].out_null;
  check(!hung && ok && ms < 5000, "init: virtual nodes of 3 and 1 ranks are refused on every rank", "hung %d after %lld ms; rank 0 %s '%s'; rank 3 %s '%s'", hung, ms,
        sname((iris_status_t)codes[0]), g_res[0].detail, sname((iris_status_t)codes[3]), g_res[3].detail);
  a.ids[2] = "vB";
  a.port = free_port();
  ms = run_children(4, ranks, child_vinit, &a, 30000, codes, &hung);
  for (i = 0, ok = 1; i < 4; i++) ok = ok && codes[i] != IRIS_ERROR_TIMEOUT && codes[i] != IRIS_ERROR_MISMATCH && codes[i] != IRIS_ERROR_INVALID_ARGUMENT;
  check(!hung && ok, "init: 2 virtual nodes x 2 ranks meet over TCP and group (then the GPU step)", "hung %d after %lld ms; rank 0 %s '%s'; rank 3 %s '%s'", hung,
        ms, sname((iris_status_t)codes[0]), g_res[0].detail, sname((iris_status_t)codes[3]), g_res[3].detail);
}

int main(void) {
  long long t0 = now_ms();
  struct timespec ts;
  char name1[160] = "", sockpath[256];
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  alarm(55);
  signal(SIGPIPE, SIG_IGN);

  clock_gettime(CLOCK_REALTIME, &ts);
  g_seed = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 17));
  fprintf(stderr, "# host_test: seed %llu\n", (unsigned long long)g_seed);
  g_res = (child_res_t *)mmap(NULL, sizeof *g_res * MAXR, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_res == MAP_FAILED) {
    check(0, "setup shared memory", "mmap: %s", strerror(errno));
    return 1;
  }
  snprintf(g_dir, sizeof g_dir, "/tmp/iris-host-test-XXXXXX");
  if (!mkdtemp(g_dir) || chmod(g_dir, 0700) != 0) {
    check(0, "setup private dir", "mkdtemp: %s", strerror(errno));
    return 1;
  }

  test_status_strings();

  /* rendezvous among forked ranks */
  run_success("rendezvous 2 ranks allgather", 2, -1, 0, 0, g_dir, NULL, 0);
  run_success("rendezvous 4 ranks allgather", 4, -1, 0, 0, g_dir, name1, sizeof name1);
  snprintf(sockpath, sizeof sockpath, "%s/%s.sock", g_dir, name1);
  check(access(sockpath, F_OK) != 0 && errno == ENOENT, "rendezvous leaves no socket file", "%s still exists", sockpath);
  run_success("rendezvous 2 ranks 200 collectives", 2, -1, 0, 200, g_dir, NULL, 0);
  run_success("rendezvous 4 ranks 200 collectives", 4, -1, 0, 200, g_dir, NULL, 0);
  run_success("rendezvous late rank 0", 2, 0, 300, 3, g_dir, NULL, 0);
  run_success("rendezvous late rank 3", 4, 3, 300, 3, g_dir, NULL, 0);
  test_world_rendezvous();
  test_world_missing_ranks();
  test_rendezvous_creates_dir();
  test_rendezvous_world1();
  test_rendezvous_missing_rank();
  test_rendezvous_rank1_alone();
  test_rendezvous_mismatch("rendezvous world size mismatch", 2, 3, 1ULL << 30, 1ULL << 30, "world size");
  test_rendezvous_mismatch("rendezvous world size mismatch reversed", 3, 2, 1ULL << 30, 1ULL << 30, "world size");
  test_rendezvous_mismatch("rendezvous heap size mismatch", 2, 2, 1ULL << 30, 1ULL << 31, "heap");
  test_rendezvous_bad_args();
  test_rendezvous_unsafe_dir();
  test_rendezvous_rank_leaves();
  test_node_grouping();
  test_node_env();
  test_tcp_rendezvous();
  test_nccl_loader();
  test_init_virtual_nodes();

  /* launcher */
  test_launcher_bad_args();
  test_launcher_auto();
  test_launcher_env(name1, sizeof name1);
  test_launcher_rendezvous(name1);
  test_launcher_failed_rank();
  test_launcher_signal();
  test_launcher_timeout(0);
  test_launcher_timeout(1);
  test_launcher_killed(SIGTERM);
  test_launcher_killed(SIGKILL);

  /* launchers' environments, jobs, directories, protocol */
  test_launch_env_table();
  test_launch_env_init();
  test_launch_env_bringup();
  test_size_parser();
  test_process_token();
  test_pid_namespaces();
  test_rendezvous_dirs();
  test_error_frames();
  test_error_frame_to_rank0();
  test_stale_and_live_sockets();
  test_hello_other_build();
  test_jobs_interleavings();

  /* allocator, records, tiles */
  test_alloc_alignment();
  test_alloc_random();
  test_alloc_exhaustion();
  test_alloc_errors();
  test_records();
  test_tiles();
  test_world_records();
  test_world_all_reduce_plan();
  test_world_relay_plan();
  test_world_ar_store_plan();
  test_chain_plan();
  test_world_ctas_staging();
  test_faults();

  /* last: these may initialise the CUDA runtime, after which no more forks */
  test_life_cycle();
  test_config();

  remove_tree(g_dir, 0);
  fprintf(stderr, "# host_test: %d passed, %d failed, %lld ms\n", g_pass, g_fail, now_ms() - t0);
  return g_fail ? 1 : 0;
}
