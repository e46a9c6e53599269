/* internal/rendezvous/rendezvous.h: the library's own rendezvous (iris_rendezvous_*): rank 0
 * accepting and checking every rank's hello, a rank connecting to rank 0 (and retrying
 * past other jobs), open, close, allgather and barrier. The wire format is in
 * internal/rendezvous/wire.h. Part of iris's implementation, included by iris.h under
 * IRIS_IMPLEMENTATION (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_RENDEZVOUS_RENDEZVOUS_H
#define IRIS_INTERNAL_RENDEZVOUS_RENDEZVOUS_H
#include "../../iris.h"
#include "../core/sys.h"
#include "../core/status.h"
#include "../core/util.h"
#include "wire.h"
#include "unix.h"
#include "tcp.h"

/* 1 if the peer of a connected socket has gone (its end closed: EOF, or a hang-up or error
 * reported). Rank 0 asks it of a rank's earlier connection when a second one claims that
 * rank: a rank restarted during bring-up (by a supervisor, or a launcher's restart)
 * leaves its first connection closed. Nothing is sent to a rank before the welcome, so
 * any byte waiting there is unexpected: the connection then counts as live. */
IRIS_INTERNAL int iris_detail_conn_gone(int fd) {
  struct pollfd p;
  char c;
  p.fd = fd;
  p.events = POLLIN;
  p.revents = 0;
  if (poll(&p, 1, 0) <= 0) return 0;
  if (p.revents & (POLLERR | POLLNVAL)) return 1;
  if (p.revents & POLLIN) return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  return (p.revents & POLLHUP) != 0;
}

IRIS_INTERNAL iris_status_t iris_detail_rdv_accept_all(iris_rendezvous_t *r, int lfd, uint64_t heap_size) {
  long long deadline = iris_detail_now_ms() + r->timeout_ms;
  int have = 1, refused = 0, foreign = 0, accept_err = 0; /* accept_err: the last errno of a failed accept (out of descriptors, say) */
  unsigned char *present = (unsigned char *)calloc((size_t)r->world, 1);
  char list[512];
  if (!present) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank 0: out of host memory");
  present[0] = 1;
  while (have < r->world) {
    struct pollfd pf;
    long long left = deadline - iris_detail_now_ms();
    iris_detail_frame_t f;
    iris_detail_hello_t h;
    unsigned uid = 0;
    int cfd, e;
    iris_status_t bad = IRIS_SUCCESS;
    struct sockaddr_storage sa;
    socklen_t sl;
    char host[64], from[80]; /* a numeric address (INET6_ADDRSTRLEN is 46) */
    if (left <= 0) {
      int i;
      for (i = 0; i < r->world; i++) present[i] = (unsigned char)!present[i];
      iris_detail_fail(IRIS_ERROR_TIMEOUT, "rendezvous '%s': timed out after %d ms; ranks %s never arrived (%d of %d present; %s)%s%s%s%s",
                       r->name, r->timeout_ms, iris_detail_rank_list(present, r->world, list, sizeof list), have, r->world,
                       r->tcp ? "they must reach rank 0 at MASTER_ADDR:MASTER_PORT" : "all ranks must run on this host",
                       refused ? "; a connection from another user was refused" : "",
                       foreign ? (r->tcp ? "; ranks of another job were refused (give each job its own MASTER_PORT)"
                                 : "; ranks of another job with this rendezvous name were refused (give each job its own IRIS_RENDEZVOUS)") : "",
                       accept_err ? "; rank 0 could not accept their connections: " : "", accept_err ? strerror(accept_err) : "");
      free(present);
      return iris_detail_rdv_abort(r, IRIS_ERROR_TIMEOUT);
    }
    pf.fd = lfd;
    pf.events = POLLIN;
    pf.revents = 0;
    if (poll(&pf, 1, (int)(left > 1000000 ? 1000000 : left)) <= 0) continue;
    sl = sizeof sa;
    cfd = accept(lfd, (struct sockaddr *)&sa, &sl);
    if (cfd < 0) { /* out of descriptors (EMFILE, ENFILE), say: remembered for the timeout's message, and no busy loop */
      if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED) {
        accept_err = errno;
        iris_detail_sleep_ms(1);
      }
      continue;
    }
    from[0] = 0; /* TCP: " (host <address>)", so that a refused rank's message names its host */
    if (r->tcp && getnameinfo((struct sockaddr *)&sa, sl, host, sizeof host, NULL, 0, NI_NUMERICHOST) == 0) snprintf(from, sizeof from, " (host %s)", host);
    fcntl(cfd, F_SETFD, FD_CLOEXEC); /* as every socket of the rendezvous: a program this rank runs must not hold it */
    if (!r->tcp && (iris_detail_peer_uid(cfd, &uid) != 0 || uid != (unsigned)getuid())) { /* not ours: refuse it, remember it */
      close(cfd);
      refused++;
      continue;
    }
    const long long hello_by = iris_detail_now_ms() + (left < 5000 ? left : 5000); /* a connection that stalls holds the others back 5 s at most */
    e = iris_detail_recv_header(cfd, &f, hello_by);
    if (!e && f.type == IRIS_DETAIL_HELLO && f.len != sizeof h) /* another build of iris (its hello has another size): tell it */
      iris_detail_refuse(cfd, IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d%s sent a hello of %llu bytes but rank 0 expects %u: the ranks run different builds of iris",
                         r->name, (int)f.rank, from, (unsigned long long)f.len, (unsigned)sizeof h);
    if (e || f.type != IRIS_DETAIL_HELLO || f.len != sizeof h || iris_detail_io(cfd, &h, sizeof h, hello_by, 0)) { close(cfd); continue; }
    h.job[sizeof h.job - 1] = 0;
    if (strcmp(h.job, r->job) != 0) { /* another job that chose this name: refuse it, keep waiting for ours */
      iris_detail_refuse(cfd, IRIS_ERROR_IN_USE,
                         "rendezvous '%s': the rank 0 listening there belongs to another job (job '%.60s'; this process's job is '%.60s'); give each job "
                         "its own %s",
                         r->name, r->job, h.job, r->tcp ? "MASTER_PORT" : "IRIS_RENDEZVOUS");
      close(cfd);
      foreign++;
      continue;
    }
    if (h.version != IRIS_VERSION)
      bad = iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d%s runs iris version %u but rank 0 runs %u", r->name, f.rank, from, h.version, IRIS_VERSION);
    else if ((int)h.world != r->world)
      bad = iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d%s was started with world size %u but rank 0 with %d", r->name, f.rank, from, h.world, r->world);
    else if (h.heap_size != heap_size)
      bad = iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d%s asks for a heap of %llu bytes but rank 0 for %llu", r->name, f.rank, from,
                             (unsigned long long)h.heap_size, (unsigned long long)heap_size);
    else if (f.rank <= 0 || f.rank >= r->world)
      bad = iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rendezvous '%s': a process%s claims rank %d, outside [1, %d)", r->name, from, f.rank, r->world);
    else if (present[f.rank] && !iris_detail_conn_gone(r->fds[f.rank]))
      bad = iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': two live processes claim rank %d (the second%s)", r->name, f.rank, from);
    if (bad != IRIS_SUCCESS) {
      const char *msg = iris_detail_errbuf;
      iris_detail_send_frame(cfd, IRIS_DETAIL_ERROR, 0, (int)bad, 0, msg, strlen(msg) + 1, iris_detail_now_ms() + 500);
      close(cfd);
      free(present);
      return iris_detail_rdv_abort(r, bad);
    }
    if (present[f.rank]) /* a restarted rank: its first process has gone, its new one takes the place */
      close(r->fds[f.rank]);
    else
      present[f.rank] = 1, have++;
    r->fds[f.rank] = cfd;
  }
  free(present);
  {
    int i;
    for (i = 1; i < r->world; i++)
      if (iris_detail_send_frame(r->fds[i], IRIS_DETAIL_WELCOME, 0, 0, 0, NULL, 0, deadline + 1000))
        return iris_detail_rdv_abort(r, iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous '%s': rank %d vanished during bring-up", r->name, i));
  }
  return IRIS_SUCCESS;
}

IRIS_INTERNAL iris_status_t iris_detail_rdv_connect(iris_rendezvous_t *r, const char *dir, uint64_t heap_size) {
  long long deadline = iris_detail_now_ms() + r->timeout_ms;
  struct sockaddr_un addr;
  iris_detail_hello_t h;
  iris_detail_frame_t f;
  int fd = -1, e, full = 0, final = 0; /* full: the last connect found rank 0's backlog full; final: the TCP dial's error is the outcome */
  unsigned uid = 0;
  char in_use[sizeof iris_detail_errbuf]; /* why the last try failed, when it is worth retrying */
  iris_status_t in_use_st = IRIS_SUCCESS;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, r->path, strlen(r->path) + 1);
  in_use[0] = 0;
retry:
  for (;;) {
    iris_status_t ds = r->tcp ? IRIS_ERROR_TIMEOUT : iris_detail_private_dir(dir, r->rank, 0);
    if (r->tcp) {
      ds = iris_detail_tcp_dial(r, deadline, &fd, &final);
      if (ds == IRIS_SUCCESS) break;
      if (final) return ds;
    } else if (ds != IRIS_SUCCESS && ds != IRIS_ERROR_TIMEOUT) return ds;
    if (ds == IRIS_SUCCESS) {
      /* non-blocking: a blocking connect to a listener whose backlog is full (a rank 0
       * that is stopped or hung, not accepting) waits with no bound; EAGAIN is retried */
      fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) return iris_detail_sys_fail(r->rank, "socket", errno);
      if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) { fcntl(fd, F_SETFL, 0); full = 0; break; }
      full = errno == EAGAIN;
      close(fd);
      fd = -1;
    }
    if (iris_detail_now_ms() >= deadline) {
      if (in_use[0]) return iris_detail_fail(in_use_st, "rank %d: %s (retried for the whole %d ms timeout)", r->rank, in_use, r->timeout_ms);
      if (r->tcp)
        return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                                "rendezvous '%s': rank %d timed out after %d ms waiting for rank 0 to listen at %s (MASTER_ADDR:MASTER_PORT; is rank 0 running, "
                                "and is the address reachable from this host?)",
                                r->name, r->rank, r->timeout_ms, r->where);
      if (full)
        return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                                "rendezvous '%s': rank %d timed out after %d ms: a process listens at %s but does not accept connections (its backlog is "
                                "full: a stopped or hung rank 0, or another job's)",
                                r->name, r->rank, r->timeout_ms, r->path);
      return iris_detail_fail(IRIS_ERROR_TIMEOUT, "rendezvous '%s': rank %d timed out after %d ms waiting for rank 0 to listen at %s (is rank 0 running on this host?)",
                              r->name, r->rank, r->timeout_ms, r->path);
    }
    iris_detail_sleep_ms(in_use[0] ? 20 : 5);
  }
  if (!r->tcp && (iris_detail_peer_uid(fd, &uid) != 0 || uid != (unsigned)getuid())) {
    close(fd);
    return iris_detail_fail(IRIS_ERROR_PERMISSION, "rendezvous '%s': the process listening at %s belongs to uid %u, not to this user (uid %u)", r->name,
                            r->path, uid, (unsigned)getuid());
  }
  memset(&h, 0, sizeof h);
  h.version = IRIS_VERSION;
  h.world = (uint32_t)r->world;
  h.heap_size = heap_size;
  iris_detail_copy(h.job, sizeof h.job, r->job);
  if ((e = iris_detail_send_frame(fd, IRIS_DETAIL_HELLO, r->rank, 0, 0, &h, sizeof h, deadline)) != 0) {
    close(fd);
    if (e == EPIPE && iris_detail_now_ms() < deadline) goto retry; /* a probe's close, or a rank 0 that just left */
    if (in_use[0] && iris_detail_now_ms() >= deadline)
      return iris_detail_fail(in_use_st, "rank %d: %s (retried for the whole %d ms timeout)", r->rank, in_use, r->timeout_ms);
    return iris_detail_sys_fail(r->rank, "sending hello to rank 0", e);
  }
  /* rank 0 answers once all ranks are present, or tells us why not; allow it a
   * moment past our own deadline so its (more precise) message arrives first */
  e = iris_detail_recv_header(fd, &f, deadline + 2000);
  if (e && in_use[0] && (e == ETIMEDOUT || iris_detail_now_ms() >= deadline)) { /* the last try ran out: say why we kept trying */
    close(fd);
    return iris_detail_fail(in_use_st, "rank %d: %s (retried for the whole %d ms timeout)", r->rank, in_use, r->timeout_ms);
  }
  if (e == ETIMEDOUT) {
    close(fd);
    return iris_detail_fail(IRIS_ERROR_TIMEOUT, "rendezvous '%s': rank %d timed out after %d ms waiting for the other ranks", r->name, r->rank, r->timeout_ms);
  }
  if (e == EPIPE && iris_detail_now_ms() < deadline) {
    /* closed unanswered: we reached the socket of a rank 0 (of another job) that had
     * just finished its bring-up; ours may still come */
    if (in_use_st != IRIS_ERROR_IN_USE) {
      snprintf(in_use, sizeof in_use, "rendezvous '%s': rank 0's connection closed during bring-up; did it exit or fail?", r->name);
      in_use_st = IRIS_ERROR_SYSTEM;
    }
    close(fd);
    goto retry;
  }
  if (e) {
    close(fd);
    return iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous '%s': rank %d lost rank 0 during bring-up (%s)", r->name, r->rank, strerror(e));
  }
  if (f.type == IRIS_DETAIL_ERROR && f.status == (int32_t)IRIS_ERROR_IN_USE && iris_detail_now_ms() < deadline) {
    iris_detail_copy(in_use, sizeof in_use, iris_detail_errbuf); /* another job's rank 0: wait for ours */
    in_use_st = IRIS_ERROR_IN_USE;
    close(fd);
    goto retry;
  }
  r->fds[0] = fd;
  if (f.type == IRIS_DETAIL_ERROR) return (iris_status_t)f.status;
  if (f.type != IRIS_DETAIL_WELCOME) return iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous '%s': protocol error at bring-up", r->name);
  return IRIS_SUCCESS;
}

IRIS_DEF void iris_rendezvous_close(iris_rendezvous_t *r) {
  int i;
  if (!r) return;
  for (i = 0; i < r->world; i++)
    if (r->fds[i] >= 0) close(r->fds[i]);
  if (r->addrs) freeaddrinfo(r->addrs);
  free(r->fds);
  free(r);
}

/* Both rendezvous: addr NULL: the Unix socket; else TCP to addr:port. */
IRIS_INTERNAL iris_status_t iris_detail_rdv_open(const iris_rendezvous_params_t *p, const char *addr, int port, iris_rendezvous_t **out) {
  iris_rendezvous_t *r;
  char dir[160];
  const char *c;
  iris_status_t st;
  int i, got;
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open: out is NULL");
  *out = NULL;
  if (addr && (!*addr || strlen(addr) > 80 || port < 1 || port > 65535))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open_tcp: MASTER_ADDR '%.90s' must be 1 to 80 characters and MASTER_PORT %d in [1, 65535]",
                            addr, port);
  if (!p || !p->name || !*p->name || strlen(p->name) > 64)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open: the name must be 1 to 64 characters");
  for (c = p->name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open: name '%s' may hold only letters, digits, '.', '_' and '-'", p->name);
  if (p->world_size < 1) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open: world size %d < 1", p->world_size);
  if (p->rank < 0 || p->rank >= p->world_size)
    return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "iris_rendezvous_open: rank %d outside [0, %d)", p->rank, p->world_size);
  if (p->timeout_ms <= 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open: timeout_ms must be > 0");
  if ((got = iris_detail_rdv_dir(p->dir, dir, sizeof dir)) < 0) return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open");
  if (!got) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open: the rendezvous directory path is too long (IRIS_RENDEZVOUS_DIR)");
  r = (iris_rendezvous_t *)calloc(1, sizeof *r);
  if (!r || !(r->fds = (int *)malloc(sizeof(int) * (size_t)p->world_size))) {
    free(r);
    return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "iris_rendezvous_open: out of host memory");
  }
  for (i = 0; i < p->world_size; i++) r->fds[i] = -1;
  r->rank = p->rank;
  r->world = p->world_size;
  r->timeout_ms = p->timeout_ms;
  snprintf(r->name, sizeof r->name, "%s", p->name);
  iris_detail_job_token(p->job, r->job, sizeof r->job);
  if (addr) {
    r->tcp = 1;
    snprintf(r->where, sizeof r->where, "%s:%d", addr, port);
    if (r->world == 1) { *out = r; return IRIS_SUCCESS; }
    if (r->rank == 0) {
      int lfd;
      if ((st = iris_detail_tcp_listen(r, &lfd)) == IRIS_SUCCESS) {
        st = iris_detail_rdv_accept_all(r, lfd, p->heap_size);
        close(lfd);
      }
    } else {
      st = iris_detail_rdv_connect(r, dir, p->heap_size);
    }
    if (st != IRIS_SUCCESS) { iris_rendezvous_close(r); return st; }
    *out = r;
    return IRIS_SUCCESS;
  }
  if (strlen(dir) + strlen(p->name) + 7 > sizeof r->path) {
    iris_rendezvous_close(r);
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open: socket path %s/%s.sock is too long", dir, p->name);
  }
  iris_detail_copy(r->path, sizeof r->path, dir);
  strcat(r->path, "/");
  strcat(r->path, p->name);
  strcat(r->path, ".sock");
  if (r->world == 1) { *out = r; return IRIS_SUCCESS; }
  if (r->rank == 0) {
    struct stat mine;
    int lfd;
    if ((st = iris_detail_private_dir(dir, 0, 1)) != IRIS_SUCCESS || (st = iris_detail_rdv_bind(r, dir, &lfd, &mine)) != IRIS_SUCCESS) {
      iris_rendezvous_close(r);
      return st;
    }
    st = iris_detail_rdv_accept_all(r, lfd, p->heap_size);
    close(lfd);
    iris_detail_rdv_unlink_own(r, dir, &mine);
  } else {
    st = iris_detail_rdv_connect(r, dir, p->heap_size);
  }
  if (st != IRIS_SUCCESS) { iris_rendezvous_close(r); return st; }
  *out = r;
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_rendezvous_open(const iris_rendezvous_params_t *p, iris_rendezvous_t **out) { return iris_detail_rdv_open(p, NULL, 0, out); }
IRIS_DEF iris_status_t iris_rendezvous_open_tcp(const iris_rendezvous_params_t *p, const char *addr, int port, iris_rendezvous_t **out) {
  if (!addr) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open_tcp: addr (MASTER_ADDR) is NULL");
  return iris_detail_rdv_open(p, addr, port, out);
}

/* A collective that failed out of step (ranks in different collectives, or a message
 * left half read) leaves bytes in the sockets that the next collective would read as its
 * own: every later one is refused, naming the first failure, instead of failing as a
 * protocol error. */
static iris_status_t iris_detail_rdv_allgather_once(iris_rendezvous_t *r, const void *send, void *recv, size_t bytes, int timeout_ms);
IRIS_INTERNAL iris_status_t iris_detail_rdv_allgather(iris_rendezvous_t *r, const void *send, void *recv, size_t bytes, int timeout_ms) {
  iris_status_t st;
  if (r->broken)
    return iris_detail_fail((iris_status_t)r->broken, "rendezvous '%s': rank %d: an earlier host collective failed out of step (%s); this rendezvous cannot pair the ranks' "
                            "messages any more: finalize the context", r->name, r->rank, r->why);
  st = iris_detail_rdv_allgather_once(r, send, recv, bytes, timeout_ms);
  if (st == IRIS_ERROR_MISMATCH || st == IRIS_ERROR_SYSTEM) {
    r->broken = (int)st;
    iris_detail_copy(r->why, sizeof r->why, iris_detail_errbuf);
  }
  return st;
}
static iris_status_t iris_detail_rdv_allgather_once(iris_rendezvous_t *r, const void *send, void *recv, size_t bytes, int timeout_ms) {
  long long deadline = iris_detail_now_ms() + (timeout_ms > 0 ? timeout_ms : 1LL << 40);
  uint64_t seq = ++r->seq;
  int e;
  iris_detail_frame_t f;
  if (bytes) memcpy((char *)recv + (size_t)r->rank * bytes, send, bytes);
  if (r->world == 1) return IRIS_SUCCESS;
  if (r->rank != 0) {
    if ((e = iris_detail_send_frame(r->fds[0], IRIS_DETAIL_GATHER, r->rank, 0, seq, send, bytes, deadline)) != 0) {
      /* rank 0 may have given up already (another rank left) and said why before it
       * closed: that reason is still in our socket, and is the one to report */
      if (e != ETIMEDOUT && iris_detail_recv_header(r->fds[0], &f, iris_detail_now_ms() + 500) == 0 && f.type == IRIS_DETAIL_ERROR) return (iris_status_t)f.status;
      return e == ETIMEDOUT ? iris_detail_fail(IRIS_ERROR_TIMEOUT, "rendezvous '%s': rank %d timed out sending to rank 0", r->name, r->rank)
                            : iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous '%s': rank %d lost rank 0 (%s); did it exit or fail?", r->name, r->rank, strerror(e));
    }
    e = iris_detail_recv_header(r->fds[0], &f, deadline + 2000);
    if (e == ETIMEDOUT)
      return iris_detail_fail(IRIS_ERROR_TIMEOUT, "rendezvous '%s': rank %d timed out after %d ms waiting for rank 0 (collective #%llu)", r->name, r->rank,
                              timeout_ms, (unsigned long long)seq);
    if (e) return iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous '%s': rank %d lost rank 0 (%s); did it exit or fail?", r->name, r->rank, strerror(e));
    if (f.type == IRIS_DETAIL_ERROR) return (iris_status_t)f.status;
    if (f.type != IRIS_DETAIL_TABLE || f.seq != seq || f.len != bytes * (size_t)r->world)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d and rank 0 are out of step (collective #%llu vs #%llu, %llu vs %llu bytes)", r->name,
                              r->rank, (unsigned long long)seq, (unsigned long long)f.seq, (unsigned long long)(bytes * (size_t)r->world),
                              (unsigned long long)f.len);
    if (bytes && (e = iris_detail_io(r->fds[0], recv, bytes * (size_t)r->world, deadline + 2000, 0)) != 0)
      return iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous '%s': rank %d lost rank 0 mid-message (%s)", r->name, r->rank, strerror(e));
    return IRIS_SUCCESS;
  }
  {
    /* rank 0: collect from every rank as each becomes readable, so a timeout names
     * exactly the ranks that never sent */
    unsigned char *pending = (unsigned char *)calloc((size_t)r->world, 1);
    struct pollfd *pf = (struct pollfd *)calloc((size_t)r->world, sizeof *pf);
    int left = r->world - 1, i;
    char list[512];
    iris_status_t st = IRIS_SUCCESS;
    if (!pending || !pf) { free(pending); free(pf); return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank 0: out of host memory"); }
    for (i = 1; i < r->world; i++) pending[i] = 1;
    while (left > 0 && st == IRIS_SUCCESS) {
      int n = 0, pr;
      long long remain = deadline - iris_detail_now_ms();
      if (remain <= 0) {
        st = iris_detail_fail(IRIS_ERROR_TIMEOUT, "rendezvous '%s': collective #%llu timed out after %d ms; ranks %s never arrived", r->name,
                              (unsigned long long)seq, timeout_ms, iris_detail_rank_list(pending, r->world, list, sizeof list));
        break;
      }
      for (i = 1; i < r->world; i++)
        if (pending[i]) { pf[n].fd = r->fds[i]; pf[n].events = POLLIN; pf[n].revents = 0; n++; }
      pr = poll(pf, (nfds_t)n, (int)(remain > 1000000 ? 1000000 : remain));
      if (pr <= 0) continue;
      for (i = 1; i < r->world && st == IRIS_SUCCESS; i++) {
        int j, ready = 0;
        if (!pending[i]) continue;
        for (j = 0; j < n; j++)
          if (pf[j].fd == r->fds[i] && pf[j].revents) ready = 1;
        if (!ready) continue;
        e = iris_detail_recv_header(r->fds[i], &f, deadline);
        if (e) {
          st = iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous '%s': rank %d left (%s); did it exit or fail?", r->name, i, e == EPIPE ? "connection closed" : strerror(e));
        } else if (f.type == IRIS_DETAIL_ERROR) {
          /* the rank failed and said why (its message is the detail now): that, not "out of step" */
          char why[sizeof iris_detail_errbuf - 128];
          iris_detail_copy(why, sizeof why, iris_detail_errbuf);
          st = iris_detail_fail((iris_status_t)f.status, "rendezvous '%s': rank %d failed instead of joining collective #%llu: %s", r->name, i,
                                (unsigned long long)seq, why);
        } else if (f.type != IRIS_DETAIL_GATHER || f.seq != seq || f.len != bytes) {
          st = iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d is out of step with rank 0 (collective #%llu of %llu bytes vs #%llu of %llu bytes)",
                                r->name, i, (unsigned long long)f.seq, (unsigned long long)f.len, (unsigned long long)seq, (unsigned long long)bytes);
        } else if (bytes && (e = iris_detail_io(r->fds[i], (char *)recv + (size_t)i * bytes, bytes, deadline, 0)) != 0) {
          st = iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous '%s': rank %d left mid-message (%s)", r->name, i, strerror(e));
        } else {
          pending[i] = 0;
          left--;
        }
      }
    }
    free(pending);
    free(pf);
    if (st != IRIS_SUCCESS) return iris_detail_rdv_abort(r, st);
    for (i = 1; i < r->world; i++)
      if ((e = iris_detail_send_frame(r->fds[i], IRIS_DETAIL_TABLE, 0, 0, seq, recv, bytes * (size_t)r->world, deadline + 1000)) != 0)
        return iris_detail_rdv_abort(r, iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous '%s': rank %d left (%s)", r->name, i, strerror(e)));
    return IRIS_SUCCESS;
  }
}
IRIS_DEF iris_status_t iris_rendezvous_allgather(iris_rendezvous_t *r, const void *send, void *recv, size_t bytes) {
  if (!r || (bytes && (!send || !recv))) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_allgather: NULL argument");
  return iris_detail_rdv_allgather(r, send, recv, bytes, r->timeout_ms);
}
IRIS_DEF iris_status_t iris_rendezvous_barrier(iris_rendezvous_t *r) {
  if (!r) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_barrier: NULL rendezvous");
  return iris_detail_rdv_allgather(r, NULL, NULL, 0, r->timeout_ms);
}

#endif /* IRIS_INTERNAL_RENDEZVOUS_RENDEZVOUS_H */
