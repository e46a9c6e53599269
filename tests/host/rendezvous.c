/* tests/host/rendezvous.c: the library's own rendezvous among forked ranks: allgathers, barriers, late, missing and leaving ranks, mismatched worlds and heaps, bad arguments, unsafe directories. */
#include "harness.h"

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

/* A large allgather (more than the socket buffers hold) while rank 0 never joins: rank 1
 * must give up at its timeout, not block in send() until rank 0 reads or leaves. */
typedef struct big_arg { const char *name; int timeout_ms, hold_ms; size_t bytes; } big_arg_t;
static int child_big_gather(int rank, void *argp) {
  const big_arg_t *a = (const big_arg_t *)argp;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  long long t0;
  char *send, *recv;
  set_params(&p, a->name, g_dir, rank, 2, a->timeout_ms, 0);
  g_res[rank].open_st = (int)iris_rendezvous_open(&p, &r);
  if (g_res[rank].open_st != IRIS_SUCCESS) return child_fail(rank, "open: %s", iris_error_detail());
  if (rank == 0) { /* joins nothing; holds its end open (the process stays) */
    sleep_ms(a->hold_ms);
    iris_rendezvous_close(r);
    return 0;
  }
  send = (char *)calloc(a->bytes, 1);
  recv = (char *)calloc(a->bytes, 2);
  if (!send || !recv) return child_fail(rank, "out of memory");
  t0 = now_ms();
  g_res[rank].op_st = (int)iris_rendezvous_allgather(r, send, recv, a->bytes);
  g_res[rank].op_ms = now_ms() - t0;
  snprintf(g_res[rank].op_detail, sizeof g_res[rank].op_detail, "%s", iris_error_detail());
  iris_rendezvous_close(r);
  return 0;
}
static void test_rendezvous_big_gather_bounded(void) {
  char name[80];
  big_arg_t a;
  int ranks[2] = {0, 1}, codes[2], hung;
  long long ms;
  unique_name(name, sizeof name, "big");
  a.name = name;
  a.timeout_ms = 600;
  a.hold_ms = 3000;
  a.bytes = (size_t)8 << 20;
  ms = run_children(2, ranks, child_big_gather, &a, 10000, codes, &hung);
  check(!hung && g_res[1].open_st == IRIS_SUCCESS && g_res[1].op_st == IRIS_ERROR_TIMEOUT && g_res[1].op_ms < 2000,
        "rendezvous large allgather, rank 0 absent: rank 1 times out at its bound", "hung %d (%lld ms); rank 1 open %s, allgather %s after %lld ms (timeout %d ms, rank 0 held %d ms): '%s'",
        hung, ms, sname((iris_status_t)g_res[1].open_st), sname((iris_status_t)g_res[1].op_st), g_res[1].op_ms, a.timeout_ms, a.hold_ms, g_res[1].op_detail);
}

/* The rendezvous sockets are close-on-exec: a program the rank runs (system(), a
 * subprocess) must not hold the rank's connection, or rank 0 does not see the rank die
 * and waits out its whole bound instead of naming the rank that left. */
static int child_exec_then_die(int rank, void *argp) {
  const char *name = (const char *)argp;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  long long t0;
  set_params(&p, name, g_dir, rank, 2, 6000, 0);
  g_res[rank].open_st = (int)iris_rendezvous_open(&p, &r);
  if (g_res[rank].open_st != IRIS_SUCCESS) return child_fail(rank, "open: %s", iris_error_detail());
  if (rank == 1) {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sleep", "sleep", "4", (char *)NULL);
      _exit(127);
    }
    snprintf(g_res[rank].text, sizeof g_res[rank].text, "%ld", (long)pid);
    sleep_ms(100);
    _exit(0); /* dies without closing: only the kernel closes its sockets */
  }
  t0 = now_ms();
  g_res[rank].op_st = (int)iris_rendezvous_barrier(r);
  g_res[rank].op_ms = now_ms() - t0;
  snprintf(g_res[rank].op_detail, sizeof g_res[rank].op_detail, "%s", iris_error_detail());
  iris_rendezvous_close(r);
  return 0;
}
static void test_rendezvous_sockets_cloexec(void) {
  char name[80];
  int ranks[2] = {0, 1}, codes[2], hung;
  long long ms;
  long grandchild;
  unique_name(name, sizeof name, "cloexec");
  ms = run_children(2, ranks, child_exec_then_die, name, 12000, codes, &hung);
  grandchild = atol(g_res[1].text);
  if (grandchild > 0) kill((pid_t)grandchild, SIGKILL);
  check(!hung && g_res[0].open_st == IRIS_SUCCESS && g_res[0].op_st != IRIS_SUCCESS && g_res[0].op_ms < 2000 && names_rank(g_res[0].op_detail, 1),
        "rendezvous sockets are close-on-exec: a rank that dies beside a program it ran is seen at once",
        "hung %d (%lld ms); rank 0 open %s, barrier %s after %lld ms (bound 6000 ms, the program lives 4 s): '%s'", hung, ms,
        sname((iris_status_t)g_res[0].open_st), sname((iris_status_t)g_res[0].op_st), g_res[0].op_ms, g_res[0].op_detail);
}

/* Ranks in different host collectives (rank 0 gathers 8 bytes, rank 1 16): both see
 * IRIS_ERROR_MISMATCH; every later collective of that rendezvous is refused at once naming
 * the first failure (the unread bytes would otherwise be read as the next message). */
static int child_out_of_step(int rank, void *argp) {
  const char *name = (const char *)argp;
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = NULL;
  char send[16] = {0}, recv[32];
  long long t0;
  set_params(&p, name, g_dir, rank, 2, 3000, 0);
  g_res[rank].open_st = (int)iris_rendezvous_open(&p, &r);
  if (g_res[rank].open_st != IRIS_SUCCESS) return child_fail(rank, "open: %s", iris_error_detail());
  g_res[rank].op_st = (int)iris_rendezvous_allgather(r, send, recv, rank == 0 ? 8 : 16);
  t0 = now_ms();
  g_res[rank].out_null = (int)iris_rendezvous_barrier(r); /* the next collective's status */
  g_res[rank].op_ms = now_ms() - t0;
  snprintf(g_res[rank].op_detail, sizeof g_res[rank].op_detail, "%s", iris_error_detail());
  iris_rendezvous_close(r);
  return 0;
}
static void test_rendezvous_out_of_step(void) {
  char name[80];
  int ranks[2] = {0, 1}, codes[2], hung, r, ok = 1;
  long long ms;
  unique_name(name, sizeof name, "step");
  ms = run_children(2, ranks, child_out_of_step, name, 12000, codes, &hung);
  for (r = 0; r < 2; r++)
    ok &= g_res[r].op_st == IRIS_ERROR_MISMATCH && g_res[r].out_null == IRIS_ERROR_MISMATCH && g_res[r].op_ms < 500 && has(g_res[r].op_detail, "earlier host collective");
  check(!hung && ok, "rendezvous: ranks in different collectives both see a mismatch; every later collective is refused at once, naming it",
        "hung %d (%lld ms); rank 0: %s then %s (%lld ms) '%s'; rank 1: %s then %s (%lld ms) '%s'", hung, ms, sname((iris_status_t)g_res[0].op_st),
        sname((iris_status_t)g_res[0].out_null), g_res[0].op_ms, g_res[0].op_detail, sname((iris_status_t)g_res[1].op_st), sname((iris_status_t)g_res[1].out_null),
        g_res[1].op_ms, g_res[1].op_detail);
}
