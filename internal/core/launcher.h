/* internal/core/launcher.h: the fork launcher: iris_launch_local (N ranks of this program on
 * this host) and iris_launch_wait (waiting for them, timeouts, SIGINT and SIGTERM
 * forwarded). Part of iris's implementation, included by iris.h under IRIS_IMPLEMENTATION
 * (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_LAUNCHER_H
#define IRIS_INTERNAL_CORE_LAUNCHER_H
#include "../../iris.h"
#include "sys.h"
#include "status.h"
#include "platform.h"
#include "util.h"

/* The most ranks iris_launch_local starts: both its pid table and a device context
 * must hold them. */
#define IRIS_DETAIL_LAUNCH_LIMIT (IRIS_MAX_RANKS < IRIS_LAUNCH_MAX ? IRIS_MAX_RANKS : IRIS_LAUNCH_MAX)

IRIS_DEF iris_status_t iris_launch_local(int num_ranks, iris_launch_t *L, int *my_rank) {
  static int launches = 0;
  unsigned char nonce[16];
  char name[72], token[40], buf[32];
  iris_launch_env_t env;
  iris_status_t st;
  pid_t parent = getpid();
  int i;
  if (!L || !my_rank) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_local: NULL argument");
  memset(L, 0, sizeof *L);
  if ((st = iris_launch_env(NULL, NULL, &env)) != IRIS_SUCCESS) return iris_detail_prefix(st, "iris_launch_local");
  if (env.launcher != IRIS_LAUNCHER_NONE) { /* started by a launcher already: this process is a rank */
    *my_rank = env.rank;
    return IRIS_SUCCESS;
  }
  { /* iris_launch_wait's variable, judged before any rank exists (a bad one there would leave them unwaited) */
    int grace;
    if (iris_detail_env_int("IRIS_LAUNCH_GRACE_MS", &grace) < 0) return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_local");
  }
  if (num_ranks == 0) {
    num_ranks = iris_gpu_count_without_runtime();
    if (num_ranks < 1) /* no GPU: the status iris_init gives on such a host, one cause */
      return iris_detail_fail(IRIS_ERROR_GPU, "iris_launch_local: no GPU to start a rank on: %s",
                              num_ranks == 0 ? "none is visible (" IRIS_GPU_VISIBLE_VAR " is empty)" : IRIS_GPU_NO_DRIVER_TEXT);
  }
  if (num_ranks < 1) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_local: %d ranks requested", num_ranks);
  if (num_ranks > IRIS_DETAIL_LAUNCH_LIMIT)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_launch_local: %d ranks requested; at most %d (IRIS_MAX_RANKS %d, IRIS_LAUNCH_MAX %d)", num_ranks,
                            IRIS_DETAIL_LAUNCH_LIMIT, IRIS_MAX_RANKS, IRIS_LAUNCH_MAX);
  L->num_ranks = num_ranks;
  iris_detail_random(nonce, sizeof nonce); /* this launch's job token */
  for (i = 0; i < 16; i++) snprintf(token + 2 * i, 3, "%02x", nonce[i]);
  snprintf(name, sizeof name, "launch-%ld-%d-%.8s", (long)parent, launches++, token);
  fflush(NULL); /* buffered output would otherwise be written once per child */
  for (i = 0; i < num_ranks; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      int e = errno, j;
      for (j = 0; j < i; j++) kill(L->pids[j], SIGKILL);
      for (j = 0; j < i; j++) waitpid(L->pids[j], NULL, 0);
      memset(L, 0, sizeof *L);
      return iris_detail_sys_fail(-1, "iris_launch_local: fork", e);
    }
    if (pid == 0) {
      setpgid(0, 0); /* a process group of its own: the launcher signals the rank and what it starts */
#if defined(__linux__)
      prctl(PR_SET_PDEATHSIG, SIGTERM); /* die with the launcher ... */
#endif
      if (getppid() != parent) raise(SIGTERM); /* ... even if it died before the line above */
      snprintf(buf, sizeof buf, "%d", i);
      setenv("IRIS_RANK", buf, 1);
      snprintf(buf, sizeof buf, "%d", num_ranks);
      setenv("IRIS_WORLD_SIZE", buf, 1);
      setenv("IRIS_RENDEZVOUS", name, 1);
      setenv("IRIS_JOB_TOKEN", token, 1);
      unsetenv("IRIS_LOCAL_RANK");
      unsetenv("IRIS_LOCAL_WORLD_SIZE");
      memset(L, 0, sizeof *L);
      *my_rank = i;
      return IRIS_SUCCESS;
    }
    setpgid(pid, pid); /* also here: whichever runs first */
    L->pids[i] = (int)pid;
    L->exit_codes[i] = -1; /* not reaped yet (iris_launch_wait fills it) */
  }
  *my_rank = -1;
  return IRIS_SUCCESS;
}

/* iris_launch_wait's waitpid; tests put one in its place that reports a rank as still
 * running after SIGKILL (a process asleep in the kernel, e.g. in a GPU driver call that
 * never returns, ends only when that call does). */
typedef pid_t (*iris_detail_waitpid_fn)(pid_t pid, int *status, int options);
static iris_detail_waitpid_fn iris_detail_launch_waitpid = waitpid;

/* SIGINT/SIGTERM that arrive while iris_launch_wait runs (forwarded to the ranks). */
static volatile sig_atomic_t iris_detail_launch_signal = 0;
IRIS_INTERNAL void iris_detail_launch_on_signal(int sig) { iris_detail_launch_signal = sig; }

/* Signal every running rank's process group (the rank itself if it has none). */
IRIS_INTERNAL void iris_detail_signal_ranks(const iris_launch_t *L, const unsigned char *running, int sig) {
  int i;
  for (i = 0; i < L->num_ranks; i++)
    if (running[i] && kill(-(pid_t)L->pids[i], sig) != 0) kill((pid_t)L->pids[i], sig);
}

IRIS_DEF iris_status_t iris_launch_wait(iris_launch_t *L, int timeout_ms) {
  long long deadline = iris_detail_now_ms() + (timeout_ms > 0 ? timeout_ms : 1LL << 40), kill_at = -1;
  unsigned char running[IRIS_LAUNCH_MAX], failed[IRIS_LAUNCH_MAX], killed[IRIS_LAUNCH_MAX], signaled[IRIS_LAUNCH_MAX], lost[IRIS_LAUNCH_MAX], stuck[IRIS_LAUNCH_MAX];
  int left, i, nfail = 0, nkill = 0, nstuck = 0, grace = 2000, forwarded = 0, timed_out = 0, chld_ignored;
  char l1[512], l2[512], l3[400];
  struct sigaction sa, old_int, old_term, old_chld;
  if (!L || L->num_ranks < 1 || L->num_ranks > IRIS_LAUNCH_MAX) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_wait: not a launch");
  for (i = 0; i < L->num_ranks && L->exit_codes[i] >= 0; i++) {
  }
  if (i == L->num_ranks) /* every rank reaped by an earlier call: its codes stay as they are */
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_wait: the ranks were waited for already (their exit codes are in launch->exit_codes)");
  if (iris_detail_env_int("IRIS_LAUNCH_GRACE_MS", &grace) < 0) return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_wait");
  /* a rank whose code an earlier call filled in is neither waited for nor signalled again
   * (its pid may be another process's by now); one whose status was lost is looked for */
  left = 0;
  for (i = 0; i < L->num_ranks; i++) running[i] = L->exit_codes[i] < 0, failed[i] = 0, killed[i] = 0, signaled[i] = 0, lost[i] = 0, stuck[i] = 0, left += running[i];
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = iris_detail_launch_on_signal;
  sigemptyset(&sa.sa_mask);
  iris_detail_launch_signal = 0;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  /* SIGCHLD ignored (or SA_NOCLDWAIT): the kernel reaps the ranks and waitpid learns
   * nothing; while it waits the default holds, so ranks that end now are reaped here */
  sigaction(SIGCHLD, NULL, &old_chld);
  chld_ignored = old_chld.sa_handler == SIG_IGN || (old_chld.sa_flags & SA_NOCLDWAIT);
  if (chld_ignored) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, NULL);
  }
  while (left > 0) {
    int progressed = 0;
    for (i = 0; i < L->num_ranks; i++) {
      int status = 0;
      pid_t w;
      if (!running[i]) continue;
      w = iris_detail_launch_waitpid(L->pids[i], &status, WNOHANG);
      if (w == 0) continue;
      running[i] = 0;
      left--;
      progressed = 1;
      if (w < 0) L->exit_codes[i] = -1, lost[i] = 1; /* reaped elsewhere: its status is gone */
      else if (WIFEXITED(status)) L->exit_codes[i] = WEXITSTATUS(status);
      else if (WIFSIGNALED(status)) L->exit_codes[i] = 128 + WTERMSIG(status), signaled[i] = 1;
      else L->exit_codes[i] = 255;
      if (L->exit_codes[i] != 0) failed[i] = 1, nfail++;
    }
    if (left == 0) break;
    if (iris_detail_launch_signal) { /* the launcher was asked to stop: so are the ranks */
      int sig = iris_detail_launch_signal;
      iris_detail_launch_signal = 0;
      iris_detail_signal_ranks(L, running, sig);
      if (!forwarded) forwarded = sig;
      if (kill_at < 0) kill_at = iris_detail_now_ms() + grace;
    }
    if (kill_at < 0 && iris_detail_now_ms() >= deadline) { /* timeout: SIGTERM first, SIGKILL after the grace period */
      timed_out = 1;
      for (i = 0; i < L->num_ranks; i++) killed[i] = running[i];
      iris_detail_signal_ranks(L, running, SIGTERM);
      kill_at = iris_detail_now_ms() + grace;
    }
    if (kill_at >= 0 && iris_detail_now_ms() >= kill_at) {
      /* A killed rank ends at once, unless it sleeps in the kernel (a GPU driver call that
       * does not return): then it ends only when that call does. So the wait for the killed
       * ranks is bounded too (the grace period again, at least 1 s); a rank still there is
       * reported and left unreaped (exit code -1: a later call looks for it again). */
      const long long give_up = iris_detail_now_ms() + (grace > 1000 ? grace : 1000);
      int pending;
      iris_detail_signal_ranks(L, running, SIGKILL);
      do {
        pending = 0;
        for (i = 0; i < L->num_ranks; i++) {
          int status = 0;
          pid_t w;
          if (!running[i]) continue;
          w = iris_detail_launch_waitpid(L->pids[i], &status, WNOHANG);
          if (w == 0) {
            pending++;
            continue;
          }
          running[i] = 0;
          killed[i] = 1;
          signaled[i] = 1;
          failed[i] = 1, nfail++;
          L->exit_codes[i] = w > 0 && WIFSIGNALED(status) ? 128 + WTERMSIG(status) : w > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 128 + SIGKILL;
        }
        if (pending) iris_detail_sleep_ms(2);
      } while (pending && iris_detail_now_ms() < give_up);
      for (i = 0; i < L->num_ranks; i++)
        if (running[i]) running[i] = 0, killed[i] = 1, stuck[i] = 1, nstuck++, L->exit_codes[i] = -1;
      break;
    }
    if (!progressed) iris_detail_sleep_ms(2);
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (chld_ignored) { /* the caller's other children that ended meanwhile are zombies now (the
                        * default held): reap them, as the ignored SIGCHLD would have */
    sigaction(SIGCHLD, &old_chld, NULL);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
  }
  for (i = 0; i < L->num_ranks; i++) {
    nkill += killed[i];
    if (killed[i] && failed[i]) failed[i] = 0, nfail--; /* reported as killed, not as failed */
  }
  l3[0] = 0;
  if (nstuck) {
    char who[256];
    snprintf(l3, sizeof l3, "; ranks %s did not end within %d ms of SIGKILL (asleep in the kernel: a driver call that does not return?) and are not reaped: "
             "their exit codes stay -1, and a later iris_launch_wait looks for them again", iris_detail_rank_list(stuck, L->num_ranks, who, sizeof who),
             grace > 1000 ? grace : 1000);
  }
  if (forwarded) {
    size_t len = 0;
    l1[0] = 0;
    for (i = 0; i < L->num_ranks && len + 40 < sizeof l1; i++)
      len += lost[i] ? (size_t)snprintf(l1 + len, sizeof l1 - len, "%s rank %d ended, status unknown", len ? ";" : "", i)
             : stuck[i] ? (size_t)snprintf(l1 + len, sizeof l1 - len, "%s rank %d killed, not ended", len ? ";" : "", i)
                        : (size_t)snprintf(l1 + len, sizeof l1 - len, "%s rank %d %s %d", len ? ";" : "", i, signaled[i] || killed[i] ? "killed by signal" : "exited with",
                                           signaled[i] || killed[i] ? L->exit_codes[i] - 128 : L->exit_codes[i]);
    return iris_detail_fail(IRIS_ERROR_RANK_FAILED, "iris_launch_wait: received signal %d and forwarded it to the ranks:%s%s", forwarded, l1, l3);
  }
  if (nkill && timed_out)
    return iris_detail_fail(IRIS_ERROR_TIMEOUT, "iris_launch_wait: ranks %s still ran after %d ms and were killed (SIGTERM, SIGKILL %d ms later)%s%s%s",
                            iris_detail_rank_list(killed, L->num_ranks, l1, sizeof l1), timeout_ms, grace, nfail ? "; ranks failed before that: " : "", nfail ? iris_detail_rank_list(failed, L->num_ranks, l2, sizeof l2) : "",
                            l3);
  if (nfail) {
    size_t len = 0;
    l1[0] = 0;
    for (i = 0; i < L->num_ranks && len + 40 < sizeof l1; i++)
      if (failed[i] && lost[i]) len += (size_t)snprintf(l1 + len, sizeof l1 - len, "%s rank %d ended, status unknown", len ? ";" : "", i);
      else if (failed[i]) len += (size_t)snprintf(l1 + len, sizeof l1 - len, "%s rank %d %s %d", len ? ";" : "", i, signaled[i] ? "killed by signal" : "exited with",
                                                  signaled[i] ? L->exit_codes[i] - 128 : L->exit_codes[i]);
    for (i = 0; i < L->num_ranks && !lost[i]; i++) {
    }
    return iris_detail_fail(IRIS_ERROR_RANK_FAILED, "iris_launch_wait:%s%s", l1,
                            i < L->num_ranks ? " (a status unknown: reaped before iris_launch_wait ran with SIGCHLD ignored, or by a waitpid elsewhere)" : "");
  }
  return IRIS_SUCCESS;
}

#endif /* IRIS_INTERNAL_CORE_LAUNCHER_H */
