/* tests/host/harness.h: what every topic of the host unit tests shares: the checks'
 * reporting (one PASS / FAIL line each), clocks and random numbers, status names, and the
 * forked multi-rank runs (one child process per rank, results in shared memory). */
#ifndef IRIS_HOST_TEST_HARNESS_H
#define IRIS_HOST_TEST_HARNESS_H
#define IRIS_IMPLEMENTATION
#define IRIS_TEST_HOOKS /* the library's failure injections (internal/core/plan.h) */
#include "iris.h"
#include "iris_collectives.h" /* C part only: declarations and the planning arithmetic */
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>

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

#endif /* IRIS_HOST_TEST_HARNESS_H */
