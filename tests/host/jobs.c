/* tests/host/jobs.c: process tokens, PID namespaces, jobs that share a rendezvous name. */
#include "harness.h"

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

/* A raw client of a rank 0's socket. The path exists from bind() on, and listen() comes
 * after it: a connect in between is refused (ECONNREFUSED), so try again until ms. */
static int connect_unix(const char *path, int ms) {
  struct sockaddr_un addr;
  long long t0 = now_ms();
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%.100s", path);
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) return fd;
    close(fd);
    if ((errno != ECONNREFUSED && errno != ENOENT) || now_ms() - t0 >= ms) return -1;
    sleep_ms(2);
  }
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

/* A connection that sends a hello's header and then stalls must not hold rank 0 for the
 * whole bring-up: its body gets the header's 5-s cap, then rank 0 lets the real rank 1 in. */
static void test_stalled_hello(void) {
  char name[80], path[256];
  gen_arg_t a;
  pid_t pid, p1 = -1;
  iris_detail_frame_t f;
  int fd = -1, status = 0, sent = 0;
  long long t0 = now_ms(), ms;
  if ((pid = start_rank0(&a, name, sizeof name, path, sizeof path, "stall", 30000)) > 0) {
    memset(&f, 0, sizeof f);
    f.magic = IRIS_DETAIL_MAGIC;
    f.type = IRIS_DETAIL_HELLO;
    f.rank = 1;
    f.len = sizeof(iris_detail_hello_t); /* the body never comes */
    fd = connect_unix(path, 2000);
    sent = fd >= 0 && write(fd, &f, sizeof f) == (ssize_t)sizeof f;
    sleep_ms(200);
    fflush(stdout);
    p1 = fork();
    if (p1 == 0) _exit(child_rank0_wait(1, &a)); /* the real rank 1, same job */
    waitpid(pid, &status, 0);
  }
  ms = now_ms() - t0;
  if (p1 > 0) waitpid(p1, NULL, 0);
  if (fd >= 0) close(fd);
  check(pid > 0 && sent && WIFEXITED(status) && WEXITSTATUS(status) == IRIS_SUCCESS && ms < 15000, "a connection that stalls in its hello holds rank 0 for 5 s, not the whole bring-up",
        "rank 0 started %d, stall sent %d, rank 0 exit %d after %lld ms (bound 30000): %s", pid > 0, sent, WIFEXITED(status) ? WEXITSTATUS(status) : -1, ms,
        g_res[0].detail);
}
