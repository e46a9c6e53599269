/* tests/host/launcher.c: iris_launch_local / iris_launch_wait: the ranks' environment, failed, signalled and timed-out ranks, bad arguments, the GPU count. */
#include "harness.h"

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

/* A rank that does not end after SIGKILL (asleep in the kernel: a GPU driver call that
 * never returns) must not hold the launcher: the wait for it is bounded (the grace period
 * again, at least 1 s), it is named and left unreaped (exit code -1), and a later wait
 * reaps it. The library's waitpid is replaced by one that hides rank 1's end. */
static pid_t unkillable_pid;
static pid_t waitpid_hiding(pid_t pid, int *status, int options) {
  if (pid == unkillable_pid) return 0; /* "still running" */
  return waitpid(pid, status, options);
}
static void test_launcher_unkillable(void) {
  iris_launch_t L;
  int my = -2;
  iris_status_t st, w1, w2;
  long long t0, ms;
  char d1[1024];
  setenv("IRIS_LAUNCH_GRACE_MS", "300", 1);
  st = iris_launch_local(2, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) {
    if (my == 1) {
      signal(SIGTERM, SIG_IGN); /* so SIGKILL is what ends it */
      for (;;) pause();
    }
    _exit(0);
  }
  unsetenv("IRIS_LAUNCH_GRACE_MS");
  if (st != IRIS_SUCCESS) {
    check(0, "launcher: a rank that survives SIGKILL is named, not waited for", "iris_launch_local: %s", sname(st));
    return;
  }
  unkillable_pid = (pid_t)L.pids[1];
  iris_detail_launch_waitpid = waitpid_hiding;
  setenv("IRIS_LAUNCH_GRACE_MS", "300", 1);
  t0 = now_ms();
  w1 = iris_launch_wait(&L, 300);
  ms = now_ms() - t0;
  snprintf(d1, sizeof d1, "%s", iris_error_detail());
  const int c0 = L.exit_codes[0], c1 = L.exit_codes[1];
  iris_detail_launch_waitpid = waitpid;
  w2 = iris_launch_wait(&L, 5000); /* rank 1 really was killed: now it is reaped */
  unsetenv("IRIS_LAUNCH_GRACE_MS");
  check(w1 == IRIS_ERROR_TIMEOUT && ms >= 1500 && ms < 3500 && has(d1, "did not end within 1000 ms of SIGKILL") && names_rank(d1, 1) && c0 == 0 && c1 == -1,
        "launcher: a rank that survives SIGKILL is named, not waited for", "%s after %lld ms (timeout 300, grace 300, then at most 1000), codes %d %d: '%s'",
        sname(w1), ms, c0, c1, d1);
  check(w2 == IRIS_ERROR_RANK_FAILED && L.exit_codes[1] == 128 + SIGKILL && L.exit_codes[0] == 0 && names_rank(iris_error_detail(), 1) &&
            !names_rank(iris_error_detail(), 0),
        "launcher: a later wait reaps the rank that outlived SIGKILL", "%s, codes %d %d: '%s'", sname(w2), L.exit_codes[0], L.exit_codes[1], iris_error_detail());
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

/* IRIS_LAUNCH_GRACE_MS malformed: refused before any rank is forked (iris_launch_wait would
 * refuse it too, with the ranks left running and unwaited) */
static void test_launcher_bad_grace(void) {
  iris_launch_t L;
  int my = -2;
  iris_status_t st;
  pid_t w;
  setenv("IRIS_LAUNCH_GRACE_MS", "abc", 1);
  st = iris_launch_local(2, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) _exit(0);
  unsetenv("IRIS_LAUNCH_GRACE_MS");
  errno = 0;
  w = waitpid(-1, NULL, WNOHANG);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_LAUNCH_GRACE_MS") && w == -1 && errno == ECHILD,
        "launcher: a malformed IRIS_LAUNCH_GRACE_MS is refused before any rank is forked", "%s '%s', waitpid %d", sname(st), iris_error_detail(), (int)w);
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
  check(st == IRIS_ERROR_GPU && w == -1 && errno == ECHILD && has(iris_error_detail(), "no GPU") && has(iris_error_detail(), "CUDA_VISIBLE_DEVICES is empty"),
        "launcher 0 ranks with no GPU visible: IRIS_ERROR_GPU, naming CUDA_VISIBLE_DEVICES", "%s, waitpid %d, '%s'", sname(st), (int)w, iris_error_detail());
  if (access("/proc/driver/nvidia/gpus", F_OK) != 0) {
    unsetenv("CUDA_VISIBLE_DEVICES");
    st = iris_launch_local(0, &L, &my);
    check(st == IRIS_ERROR_GPU && has(iris_error_detail(), "no GPU") && has(iris_error_detail(), "no NVIDIA driver is loaded") && !has(iris_error_detail(), "pass the number"),
          "launcher 0 ranks on a host without a driver: IRIS_ERROR_GPU (as iris_init), one cause: no GPU, no driver", "%s, '%s'", sname(st), iris_error_detail());
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

/* A second iris_launch_wait on the same launch is refused and keeps what the first found
 * (it reaped the ranks: was every rank reported as exiting with 255); a launcher whose SIGCHLD is ignored (the kernel then reaps the ranks
 * itself) still learns how ranks that end while it waits exited. */
/* A rank reaped by the caller (its status lost): a second wait looks for it only, and the
 * other ranks' codes stay as the first wait filled them */
static void test_launcher_wait_lost(void) {
  iris_launch_t L;
  int my = -2;
  iris_status_t st, w1, w2;
  st = iris_launch_local(2, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) _exit(my == 1 ? 4 : 0);
  if (st != IRIS_SUCCESS) {
    check(0, "launcher: a second wait after a lost status keeps the other ranks' codes", "iris_launch_local: %s", sname(st));
    return;
  }
  (void)waitpid((pid_t)L.pids[0], NULL, 0); /* reaped here: the launcher cannot learn rank 0's status */
  w1 = iris_launch_wait(&L, 10000);
  const int c0 = L.exit_codes[0], c1 = L.exit_codes[1];
  w2 = iris_launch_wait(&L, 10000);
  check(w1 == IRIS_ERROR_RANK_FAILED && c0 == -1 && c1 == 4 && w2 == IRIS_ERROR_RANK_FAILED && L.exit_codes[0] == -1 && L.exit_codes[1] == 4 &&
            has(iris_error_detail(), "unknown") && !names_rank(iris_error_detail(), 1),
        "launcher: a second wait after a lost status keeps the other ranks' codes", "first %s (codes %d %d), second %s (codes %d %d): '%s'", sname(w1), c0, c1,
        sname(w2), L.exit_codes[0], L.exit_codes[1], iris_error_detail());
}

static void test_launcher_wait_again(void) {
  iris_launch_t L;
  int my = -2;
  iris_status_t st, w1, w2;
  char d1[1024];
  struct sigaction ign, old;
  st = iris_launch_local(2, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) _exit(my == 1 ? 3 : 0);
  if (st != IRIS_SUCCESS) {
    check(0, "launcher wait twice: refused, the first wait's exit codes kept", "iris_launch_local: %s", sname(st));
    return;
  }
  w1 = iris_launch_wait(&L, 10000);
  snprintf(d1, sizeof d1, "%s", iris_error_detail());
  w2 = iris_launch_wait(&L, 10000);
  check(w1 == IRIS_ERROR_RANK_FAILED && w2 == IRIS_ERROR_INVALID_ARGUMENT && L.exit_codes[0] == 0 && L.exit_codes[1] == 3 && has(iris_error_detail(), "already"),
        "launcher wait twice: refused, the first wait's exit codes kept", "first %s '%s', second %s '%s', exit codes %d %d (want 0 3)", sname(w1), d1, sname(w2),
        iris_error_detail(), L.exit_codes[0], L.exit_codes[1]);
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGCHLD, &ign, &old);
  st = iris_launch_local(2, &L, &my);
  if (st == IRIS_SUCCESS && my >= 0) {
    sleep_ms(300); /* ends while the launcher waits */
    _exit(my == 1 ? 5 : 0);
  }
  {
    pid_t other = -1;
    int zombie = 0;
    if (st == IRIS_SUCCESS) { /* a child of the caller's own that ends while the launcher waits */
      other = fork();
      if (other == 0) {
        sleep_ms(100);
        _exit(0);
      }
    }
    w1 = st == IRIS_SUCCESS ? iris_launch_wait(&L, 10000) : st;
    if (other > 0) {
      sleep_ms(50);
      zombie = waitpid(other, NULL, WNOHANG) == other; /* reaped as the ignored SIGCHLD would have: ECHILD */
      if (!zombie) (void)waitpid(other, NULL, 0);
    }
    check(other > 0 && !zombie, "launcher with SIGCHLD ignored: the caller's other children that end while it waits are not left as zombies",
          "fork %d, left as a zombie: %s", (int)other, zombie ? "yes" : "no");
  }
  w2 = IRIS_ERROR_SYSTEM;
  d1[0] = 0;
  if (st == IRIS_SUCCESS) { /* ranks gone before the wait: their status is unknown, not 255 */
    iris_launch_t L2;
    iris_status_t st2 = iris_launch_local(2, &L2, &my);
    if (st2 == IRIS_SUCCESS && my >= 0) _exit(0);
    sleep_ms(300);
    w2 = st2 == IRIS_SUCCESS ? iris_launch_wait(&L2, 10000) : st2;
    snprintf(d1, sizeof d1, "%s", iris_error_detail());
    check(w2 == IRIS_ERROR_RANK_FAILED && L2.exit_codes[0] == -1 && L2.exit_codes[1] == -1 && has(d1, "status unknown") && has(d1, "SIGCHLD") && !has(d1, "255"),
          "launcher with SIGCHLD ignored: ranks reaped before the wait are named as unknown, not exit 255", "%s '%s', exit codes %d %d (want -1 -1)", sname(w2), d1,
          L2.exit_codes[0], L2.exit_codes[1]);
  }
  {
    struct sigaction now;
    sigaction(SIGCHLD, NULL, &now);
    sigaction(SIGCHLD, &old, NULL);
    check(w1 == IRIS_ERROR_RANK_FAILED && L.exit_codes[0] == 0 && L.exit_codes[1] == 5 && now.sa_handler == SIG_IGN,
          "launcher with SIGCHLD ignored: exit codes of ranks that end while it waits", "%s, exit codes %d %d (want 0 5), SIGCHLD %s after", sname(w1),
          L.exit_codes[0], L.exit_codes[1], now.sa_handler == SIG_IGN ? "ignored" : "not ignored");
  }
}
