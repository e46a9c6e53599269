/* internal/core/watch.h: the peer watch. One thread per context (iris_init's, not
 * iris_init_local's) that learns at once when the process of a peer rank on this node has
 * ended, and then cuts every wait of the context that still waits: it lowers the wait
 * bound (the fault words' BOUND word, and the bound of every team the dead rank is a member
 * of) to the least a wait honours, IRIS_DETAIL_WAIT_FLOOR_NS (100 ms). A wait that has run
 * that long gives up as a timeout would, and the host names the dead rank
 * (IRIS_ERROR_PEER_FAILED, internal/core/faults.h). Without it a dead peer costs the full
 * bound (10 minutes by default) before anything is reported.
 *
 * Why the bound and not a fault: work that finished before the death is not failed. A
 * peer that ran its last call and exited is no error for a rank whose kernels never wait
 * for it again; only a wait that lasts 100 ms after the death fails.
 *
 * How: a pidfd per peer (Linux 5.3 and later; readable once the process has ended, reaped
 * or not, and immune to pid reuse), the thread asleep in poll() until one is readable or
 * iris_finalize wakes it. Where pidfd_open is refused (old kernels, seccomp), every 50 ms
 * the /proc state of each peer (gone, or a zombie). Only peers whose pid means something
 * here are watched: same pid namespace (the bring-up record, ctx->pids), another process.
 * Peers on other nodes are not watched (the rails' NCCL has its own errors).
 * IRIS_PEER_WATCH=0 turns it off. Part of iris's implementation, included by iris.h under
 * IRIS_IMPLEMENTATION (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_WATCH_H
#define IRIS_INTERNAL_CORE_WATCH_H
#include "../../iris.h"
#include "sys.h"
#include "util.h"
#include "context.h"
#include "faults.h"
#if defined(__linux__)
#include <sys/syscall.h>
#if !defined(__cplusplus) && !defined(_DEFAULT_SOURCE) && !defined(_GNU_SOURCE)
long syscall(long number, ...); /* unistd.h declares it only beyond strict POSIX (a C99 unit) */
#endif
#endif

#define IRIS_DETAIL_WATCH_POLL_MS 50 /* the /proc fallback's period */

typedef struct iris_detail_watch {
  iris_t *ctx;
  pthread_t thread;
  pid_t owner;                    /* the process that started the thread (a fork's child has none) */
  int wake[2];                    /* a pipe: iris_finalize writes a byte to end the thread */
  int n;                          /* peers watched */
  int rank[IRIS_MAX_RANKS];       /* their ranks on this node */
  int64_t pid[IRIS_MAX_RANKS];    /* their pids */
  int pidfd[IRIS_MAX_RANKS];      /* their pidfds; -1: the /proc fallback */
} iris_detail_watch_t;

/* Test hook: 1 makes iris_detail_watch_start skip pidfd_open (the fallback's path). */
static int iris_detail_watch_no_pidfd;

/* A pidfd for pid, or -1 (no pidfd_open here, or refused; errno says why). */
IRIS_INTERNAL int iris_detail_pidfd_open(int64_t pid) {
#if defined(__linux__)
#if !defined(SYS_pidfd_open)
#define SYS_pidfd_open 434 /* the same number on every Linux architecture */
#endif
  if (iris_detail_watch_no_pidfd) return -1;
  return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

/* 1 if process pid has ended (gone, or a zombie not yet reaped), else 0. A pid that exists
 * but is not ours to signal (EPERM) is alive. */
IRIS_INTERNAL int iris_detail_pid_gone(int64_t pid) {
  char path[64], buf[512];
  FILE *f;
  size_t got;
  const char *p;
  if (pid <= 0) return 0;
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 1;
  snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
  if (!(f = fopen(path, "r"))) return errno == ENOENT;
  got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[got] = 0;
  /* "pid (comm) S ...": the state follows the last ')' (comm may hold any character) */
  if (!(p = strrchr(buf, ')')) || p[1] != ' ') return 0;
  return p[2] == 'Z' || p[2] == 'X';
}

/* The watch has seen local rank r's process end: lower the bounds (above). Under the fault
 * lock, as iris_abort: not once iris_finalize has begun freeing. */
IRIS_INTERNAL void iris_detail_watch_tell(iris_t *ctx, int r) {
  int zero = 0;
  pthread_mutex_lock(&iris_detail_fault_lock);
  if (IRIS_DETAIL_IS_LIVE(ctx) && !ctx->closing && ctx->fault_host &&
      __atomic_compare_exchange_n(&ctx->gone, &zero, r + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(ctx->fault_host + IRIS_FAULT_WORD_BOUND, IRIS_DETAIL_BOUND_GONE, __ATOMIC_RELEASE);
    if (ctx->teams_op) ctx->teams_op(ctx, IRIS_DETAIL_TEAMS_GONE);
  }
  pthread_mutex_unlock(&iris_detail_fault_lock);
}

/* One look at every peer; the index of one that has ended, else -1. fds: poll's, the
 * peers with a pidfd first (in order). */
IRIS_INTERNAL int iris_detail_watch_scan(const iris_detail_watch_t *w, const struct pollfd *fds) {
  int i, k = 0;
  for (i = 0; i < w->n; i++) {
    if (w->pidfd[i] >= 0) {
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) return i;
      k++;
    } else if (iris_detail_pid_gone(w->pid[i])) {
      return i;
    }
  }
  return -1;
}

IRIS_INTERNAL void *iris_detail_watch_thread(void *arg) {
  iris_detail_watch_t *w = (iris_detail_watch_t *)arg;
  struct pollfd fds[IRIS_MAX_RANKS + 1];
  int i, nf = 0, fallback = 0, dead = -1;
  for (i = 0; i < w->n; i++) {
    if (w->pidfd[i] >= 0) {
      fds[nf].fd = w->pidfd[i];
      fds[nf].events = POLLIN;
      nf++;
    } else {
      fallback = 1;
    }
  }
  fds[nf].fd = w->wake[0];
  fds[nf].events = POLLIN;
  for (;;) {
    int r;
    for (i = 0; i <= nf; i++) fds[i].revents = 0;
    r = poll(fds, (nfds_t)nf + 1, fallback ? IRIS_DETAIL_WATCH_POLL_MS : -1);
    if (r < 0 && errno != EINTR) { /* cannot happen with valid fds; never spin on it */
      iris_detail_sleep_ms(IRIS_DETAIL_WATCH_POLL_MS);
      continue;
    }
    if (fds[nf].revents) break; /* iris_finalize */
    if ((dead = iris_detail_watch_scan(w, fds)) >= 0) break;
  }
  if (dead >= 0) iris_detail_watch_tell(w->ctx, w->rank[dead]);
  return NULL;
}

/* Closes what w holds (its pidfds; the pipe when made) and frees it; no thread. */
IRIS_INTERNAL void iris_detail_watch_free(iris_detail_watch_t *w, int piped) {
  int i;
  for (i = 0; i < w->n; i++)
    if (w->pidfd[i] >= 0) close(w->pidfd[i]);
  if (piped) {
    close(w->wake[0]);
    close(w->wake[1]);
  }
  free(w);
}

/* Ends the watch of ctx, if any: wakes the thread and joins it, then frees it. Not under
 * the fault lock (the thread may be taking it). */
IRIS_INTERNAL void iris_detail_watch_stop(iris_t *ctx) {
  iris_detail_watch_t *w = ctx->watch;
  if (!w) return;
  ctx->watch = NULL;
  if (w->owner == getpid()) { /* a fork's child has the struct but not the thread */
    const char b = 1;
    ssize_t n;
    do n = write(w->wake[1], &b, 1);
    while (n < 0 && errno == EINTR);
    pthread_join(w->thread, NULL);
  }
  iris_detail_watch_free(w, 1);
}

/* Starts the watch of ctx over the peers of this node in other processes of this pid
 * namespace (ctx->pids). IRIS_PEER_WATCH (checked by iris_detail_resolve_config) 0: none.
 * A watch that cannot start (no thread, no pipe) is no error: the context works, and a
 * dead peer costs the wait bound, as without the watch. */
IRIS_INTERNAL void iris_detail_watch_start(iris_t *ctx) {
  iris_detail_watch_t *w;
  int r, on = 1;
  const pid_t me = getpid();
  if (ctx->watch || iris_detail_env_flag("IRIS_PEER_WATCH", NULL, &on) < 0 || !on) return;
  if (!(w = (iris_detail_watch_t *)calloc(1, sizeof *w))) return;
  w->ctx = ctx;
  w->owner = me;
  for (r = 0; r < ctx->local_size && r < IRIS_MAX_RANKS; r++) {
    if (r == ctx->local_rank || ctx->pids[r] <= 0 || ctx->pids[r] == (int64_t)me) continue;
    w->rank[w->n] = r;
    w->pid[w->n] = ctx->pids[r];
    w->pidfd[w->n] = iris_detail_pidfd_open(ctx->pids[r]);
    if (w->pidfd[w->n] >= 0) fcntl(w->pidfd[w->n], F_SETFD, FD_CLOEXEC);
    w->n++;
  }
  if (w->n == 0 || pipe(w->wake) != 0) {
    iris_detail_watch_free(w, 0);
    return;
  }
  fcntl(w->wake[0], F_SETFD, FD_CLOEXEC);
  fcntl(w->wake[1], F_SETFD, FD_CLOEXEC);
  {
    /* the thread blocks every signal: a process-directed signal never lands in it */
    sigset_t all, old;
    int made;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    made = pthread_create(&w->thread, NULL, iris_detail_watch_thread, w) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!made) {
      iris_detail_watch_free(w, 1);
      return;
    }
  }
  ctx->watch = w;
}

#endif /* IRIS_INTERNAL_CORE_WATCH_H */
