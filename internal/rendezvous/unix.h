/* internal/rendezvous/unix.h: the Unix-socket rendezvous's side in the file system: the
 * private directory and the safety of its parents, the directory lock, binding rank 0's
 * socket (refusing a live one, replacing a stale one) and unlinking only our own. Part of
 * iris's implementation, included by iris.h under IRIS_IMPLEMENTATION (inside its extern
 * "C" block); not a public header. */
#ifndef IRIS_INTERNAL_RENDEZVOUS_UNIX_H
#define IRIS_INTERNAL_RENDEZVOUS_UNIX_H
#include "../../iris.h"
#include "../core/sys.h"
#include "../core/status.h"
#include "../core/util.h"
#include "wire.h"

/* Every directory above dir (its parent resolved by realpath, up to /) must belong to
 * root or this user, and must not be writable by others (or by a group other than
 * ours) unless sticky, as /tmp is: else someone else could swap dir for their own. */
IRIS_INTERNAL iris_status_t iris_detail_dir_ancestors(const char *dir, int rank) {
  char parent[PATH_MAX], *real, *slash;
  size_t n = strlen(dir);
  struct stat st;
  while (n > 1 && dir[n - 1] == '/') n--;
  while (n > 0 && dir[n - 1] != '/') n--;
  if (n == 0) iris_detail_copy(parent, sizeof parent, ".");
  else if (n >= sizeof parent) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: rendezvous directory path %s is too long", rank, dir);
  else { memcpy(parent, dir, n); parent[n] = 0; }
  real = realpath(parent, NULL);
  if (!real)
    return errno == ENOENT ? iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: the parent of rendezvous directory %s does not exist; set IRIS_RENDEZVOUS_DIR to a directory of your own", rank, dir)
                           : iris_detail_sys_fail(rank, "realpath(parent of the rendezvous directory)", errno);
  for (;;) {
    int bad = 0;
    if (stat(real, &st) != 0) { int e = errno; free(real); return iris_detail_sys_fail(rank, "stat(a parent of the rendezvous directory)", e); }
    if (st.st_uid != 0 && st.st_uid != getuid()) bad = 1;
    else if (!(st.st_mode & S_ISVTX) && ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && st.st_gid != getgid()))) bad = 2;
    if (bad) {
      iris_detail_fail(IRIS_ERROR_PERMISSION,
                       "rank %d: rendezvous directory %s is not safe: %s (owner uid %u, mode %03o) %s; set IRIS_RENDEZVOUS_DIR to a private directory "
                       "whose parents only root or you can write (e.g. $HOME/.iris)",
                       rank, dir, real, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                       bad == 1 ? "belongs to another user" : "is writable by other users and not sticky");
      free(real);
      return IRIS_ERROR_PERMISSION;
    }
    slash = strrchr(real, '/');
    if (!slash || slash == real) {
      if (real[0] == '/' && real[1] != 0) { real[1] = 0; continue; } /* then / itself */
      break;
    }
    *slash = 0;
  }
  free(real);
  return IRIS_SUCCESS;
}

/* dir must be a real directory (not a link) of this user with mode 0700, below safe
 * parents. IRIS_ERROR_TIMEOUT (no detail) when it does not exist yet and !create. */
IRIS_INTERNAL iris_status_t iris_detail_private_dir(const char *dir, int rank, int create) {
  struct stat st;
  iris_status_t s;
  if ((s = iris_detail_dir_ancestors(dir, rank)) != IRIS_SUCCESS) return s;
  if (create && mkdir(dir, 0700) != 0 && errno != EEXIST) return iris_detail_sys_fail(rank, "mkdir(rendezvous directory)", errno);
  if (lstat(dir, &st) != 0) return errno == ENOENT ? IRIS_ERROR_TIMEOUT : iris_detail_sys_fail(rank, "lstat(rendezvous directory)", errno);
  if (S_ISDIR(st.st_mode) && st.st_uid != getuid())
    return iris_detail_fail(IRIS_ERROR_PERMISSION,
                            "rank %d: rendezvous directory %s belongs to uid %u, not to this user (uid %u): another user created it first; set "
                            "IRIS_RENDEZVOUS_DIR to a private directory of your own (e.g. $HOME/.iris)",
                            rank, dir, (unsigned)st.st_uid, (unsigned)getuid());
  if (!S_ISDIR(st.st_mode) || (st.st_mode & 077) != 0)
    return iris_detail_fail(IRIS_ERROR_PERMISSION,
                            "rank %d: rendezvous directory %s is not private to this user (owner uid %u, mode %03o, %s); "
                            "it must be a directory of uid %u with mode 0700 (or set IRIS_RENDEZVOUS_DIR to one)",
                            rank, dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777), S_ISDIR(st.st_mode) ? "a directory" : "not a directory",
                            (unsigned)getuid());
  return IRIS_SUCCESS;
}

/* Holds <dir>/.lock (fcntl write lock) while rank 0 probes, replaces and binds a
 * socket, or unlinks its own: two jobs never interleave those steps. Another holder
 * keeps it for microseconds; one stopped while holding it (or a lock daemon that is down,
 * on NFS) would keep it for ever, so the wait is bounded: -2 once timeout_ms have passed
 * (the caller's error names the lock file), -1 if there is no lock to take (the steps
 * then run without it, as before). */
IRIS_INTERNAL int iris_detail_dir_lock(const char *dir, int timeout_ms) {
  char path[PATH_MAX];
  struct flock fl;
  const long long deadline = iris_detail_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
  int fd;
  snprintf(path, sizeof path, "%s/.lock", dir);
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -1;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  while (fcntl(fd, F_SETLK, &fl) != 0) {
    if (errno != EINTR && errno != EACCES && errno != EAGAIN) { close(fd); return -1; }
    if (iris_detail_now_ms() >= deadline) { close(fd); return -2; }
    iris_detail_sleep_ms(1);
  }
  return fd;
}
IRIS_INTERNAL void iris_detail_dir_unlock(int fd) {
  if (fd >= 0) close(fd); /* closing releases the lock */
}

/* Rank 0: under the directory lock, make sure no live process listens at r->path
 * (connect succeeds or its backlog is full: IRIS_ERROR_IN_USE), remove a stale socket
 * (connection refused), bind and listen, and remember the socket file's identity so
 * that only it is unlinked later. */
IRIS_INTERNAL iris_status_t iris_detail_rdv_bind(iris_rendezvous_t *r, const char *dir, int *lfd_out, struct stat *mine) {
  struct sockaddr_un addr;
  iris_status_t st = IRIS_SUCCESS;
  int lock = iris_detail_dir_lock(dir, r->timeout_ms), probe, lfd = -1, e;
  *lfd_out = -1;
  if (lock == -2)
    return iris_detail_fail(IRIS_ERROR_TIMEOUT, "rendezvous '%s': rank 0 waited %d ms for the lock %s/.lock, which another process holds (stopped while it "
                            "binds its socket?, or the directory's file locks hang: set IRIS_RENDEZVOUS_DIR to a local directory)", r->name, r->timeout_ms, dir);
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, r->path, strlen(r->path) + 1);
  probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) { iris_detail_dir_unlock(lock); return iris_detail_sys_fail(0, "socket", errno); }
  fcntl(probe, F_SETFL, O_NONBLOCK);
  e = connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0 ? 0 : errno;
  close(probe);
  if (e == 0 || e == EAGAIN || e == EINPROGRESS) {
    st = iris_detail_fail(IRIS_ERROR_IN_USE,
                          "rendezvous '%s': a live process already listens at %s (another job, or an earlier run that is still up); set IRIS_RENDEZVOUS "
                          "to a name of this job's own",
                          r->name, r->path);
  } else if (e == ECONNREFUSED) {
    unlink(r->path); /* stale: its listener is gone */
  } else if (e != ENOENT) {
    st = iris_detail_sys_fail(0, "probing the rendezvous socket", e);
  }
  if (st == IRIS_SUCCESS) {
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) st = iris_detail_sys_fail(0, "socket", errno);
    else if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, r->world + 8) != 0 || lstat(r->path, mine) != 0) {
      e = errno;
      st = e == EADDRINUSE ? iris_detail_fail(IRIS_ERROR_IN_USE, "rendezvous '%s': %s is in use; set IRIS_RENDEZVOUS to a name of this job's own", r->name, r->path)
                           : iris_detail_sys_fail(0, "bind/listen on the rendezvous socket", e);
      close(lfd);
      lfd = -1;
    }
  }
  iris_detail_dir_unlock(lock);
  *lfd_out = lfd;
  return st;
}
/* Unlink r->path only while it is still the socket file we bound (same device and
 * inode): a newer job's socket at the same name stays. */
IRIS_INTERNAL void iris_detail_rdv_unlink_own(const iris_rendezvous_t *r, const char *dir, const struct stat *mine) {
  struct stat now;
  int lock = iris_detail_dir_lock(dir, r->timeout_ms); /* -2 (not had in time): unlink unlocked, as where there is no lock */
  if (lstat(r->path, &now) == 0 && now.st_dev == mine->st_dev && now.st_ino == mine->st_ino) unlink(r->path);
  iris_detail_dir_unlock(lock);
}

/* The rendezvous directory: given, else IRIS_RENDEZVOUS_DIR, else $XDG_RUNTIME_DIR/iris
 * (a per-user directory that no one else can pre-create), else /tmp/iris-<uid>. 1: *dir
 * set; 0: too long; -1: given empty, or IRIS_RENDEZVOUS_DIR set but empty (the detail
 * says so; an empty directory put the socket at "/<name>.sock"). */
IRIS_INTERNAL int iris_detail_rdv_dir(const char *given, char *dir, size_t cap) {
  const char *env = NULL, *xdg = getenv("XDG_RUNTIME_DIR");
  int n;
  if (given && !*given) {
    iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "the rendezvous directory given (iris_config_t.rendezvous_dir, iris_rendezvous_params_t.dir) is empty: "
                     "give a directory, or NULL for the default");
    return -1;
  }
  if (!given && iris_detail_env("IRIS_RENDEZVOUS_DIR", &env) < 0) return -1;
  if (given) n = snprintf(dir, cap, "%s", given);
  else if (env) n = snprintf(dir, cap, "%s", env);
  else if (xdg && xdg[0] == '/') n = snprintf(dir, cap, "%s/iris", xdg);
  else n = snprintf(dir, cap, "/tmp/iris-%u", (unsigned)getuid());
  return n >= 0 && (size_t)n < cap;
}

#endif /* IRIS_INTERNAL_RENDEZVOUS_UNIX_H */
