/* internal/rendezvous/tcp.h: the TCP rendezvous's sockets: a rank's bounded dial to rank
 * 0, and rank 0's listening socket (MASTER_ADDR, MASTER_PORT). Part of iris's
 * implementation, included by iris.h under IRIS_IMPLEMENTATION (inside its extern "C"
 * block); not a public header. */
#ifndef IRIS_INTERNAL_RENDEZVOUS_TCP_H
#define IRIS_INTERNAL_RENDEZVOUS_TCP_H
#include "../../iris.h"
#include "../core/sys.h"
#include "../core/status.h"
#include "../core/util.h"
#include "wire.h"

/* MASTER_ADDR's name resolution, bounded by the rendezvous's deadline: getaddrinfo has no
 * timeout of its own (a resolver that does not answer takes 5 s per try and server), so
 * a name runs it in a detached thread that the caller waits on until the deadline. The
 * request (its inputs and its outcome) belongs to both and is freed by the last to let
 * go: a caller that gave up leaves nothing the thread still uses. A numeric address is
 * converted at once, without a thread. iris_detail_gai is getaddrinfo; tests put a slow
 * resolver there. */
typedef int (*iris_detail_gai_fn)(const char *host, const char *port, const struct addrinfo *hints, struct addrinfo **res);
static iris_detail_gai_fn iris_detail_gai = getaddrinfo;
typedef struct iris_detail_resolve {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs, done, err; /* err: getaddrinfo's return */
  struct addrinfo *res;
  char host[96], port[16];
} iris_detail_resolve_t;
IRIS_INTERNAL void iris_detail_resolve_release(iris_detail_resolve_t *q) {
  int last;
  pthread_mutex_lock(&q->mu);
  last = --q->refs == 0;
  pthread_mutex_unlock(&q->mu);
  if (!last) return;
  if (q->res) freeaddrinfo(q->res);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q);
}
IRIS_INTERNAL void *iris_detail_resolve_thread(void *p) {
  iris_detail_resolve_t *q = (iris_detail_resolve_t *)p;
  struct addrinfo hints, *res = NULL;
  int g;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  g = iris_detail_gai(q->host, q->port, &hints, &res);
  pthread_mutex_lock(&q->mu);
  q->err = g;
  q->res = g == 0 ? res : NULL;
  q->done = 1;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
  iris_detail_resolve_release(q);
  return NULL;
}
/* host and port (digits) to addresses, waiting for a name at most until deadline (a
 * CLOCK_MONOTONIC time in ms, as iris_detail_now_ms). 0 with *res (freeaddrinfo is the
 * caller's), or getaddrinfo's error (EAI_*); *late 1 (and EAI_AGAIN) when the deadline
 * came first. */
IRIS_INTERNAL int iris_detail_resolve(const char *host, const char *port, long long deadline, struct addrinfo **res, int *late) {
  struct addrinfo hints;
  iris_detail_resolve_t *q;
  pthread_condattr_t ca;
  pthread_attr_t ta;
  pthread_t t;
  struct timespec until;
  int g, started;
  *res = NULL;
  *late = 0;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV; /* an address: no resolver asked */
  if ((g = getaddrinfo(host, port, &hints, res)) != EAI_NONAME) return g;
  *res = NULL;
  if (!(q = (iris_detail_resolve_t *)calloc(1, sizeof *q))) return EAI_MEMORY;
  iris_detail_copy(q->host, sizeof q->host, host);
  iris_detail_copy(q->port, sizeof q->port, port);
  q->refs = 2;
  pthread_mutex_init(&q->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&q->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_attr_init(&ta);
  pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
  started = pthread_create(&t, &ta, iris_detail_resolve_thread, q) == 0;
  pthread_attr_destroy(&ta);
  if (!started) { /* no thread to be had: resolve here (unbounded, as before) */
    q->refs = 1;
    iris_detail_resolve_release(q);
    hints.ai_flags = AI_NUMERICSERV;
    return iris_detail_gai(host, port, &hints, res);
  }
  until.tv_sec = (time_t)(deadline / 1000);
  until.tv_nsec = (long)(deadline % 1000) * 1000000L;
  pthread_mutex_lock(&q->mu);
  while (!q->done && pthread_cond_timedwait(&q->cv, &q->mu, &until) == 0) { /* 0: woken, maybe spuriously; else ETIMEDOUT */
  }
  *late = !q->done;
  g = q->done ? q->err : EAI_AGAIN;
  if (q->done) { /* the addresses become ours */
    *res = q->res;
    q->res = NULL;
  }
  pthread_mutex_unlock(&q->mu);
  iris_detail_resolve_release(q);
  return g;
}

/* TCP: one try to reach rank 0 at r->where (host and port split at the last ':'),
 * bounded by deadline. The name is resolved once and its addresses kept in r (freed by
 * iris_rendezvous_close); a resolution that failed for now (EAI_AGAIN, say) is tried
 * again at most once a second, and none outlasts the deadline. IRIS_SUCCESS with *fd;
 * IRIS_ERROR_TIMEOUT (no detail, *final 0) when worth retrying (refused, unreachable, a
 * name not resolvable yet); another status, or a resolution that outlasted the deadline
 * (IRIS_ERROR_TIMEOUT naming MASTER_ADDR), with *final 1: the rendezvous's outcome. */
IRIS_INTERNAL iris_status_t iris_detail_tcp_dial(iris_rendezvous_t *r, long long deadline, int *fd_out, int *final) {
  struct addrinfo *res = NULL, *ai;
  char host[96], *colon;
  int g, late, one = 1;
  long long now = iris_detail_now_ms();
  *fd_out = -1;
  *final = 1;
  iris_detail_copy(host, sizeof host, r->where);
  colon = strrchr(host, ':');
  if (!colon) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rendezvous '%s': '%s' is not address:port", r->name, r->where);
  *colon = 0;
  if (!r->addrs) {
    if (r->resolved_ms && now - r->resolved_ms < 1000) { *final = 0; return IRIS_ERROR_TIMEOUT; } /* the last try failed under a second ago */
    g = iris_detail_resolve(host, colon + 1, deadline, &res, &late);
    r->resolved_ms = iris_detail_now_ms();
    if (late)
      return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                              "rendezvous '%s': rank %d timed out after %d ms: resolving MASTER_ADDR=%s took too long (check this host's resolver, or give "
                              "MASTER_ADDR as a numeric address)",
                              r->name, r->rank, r->timeout_ms, host);
    if (g == EAI_NONAME)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rendezvous '%s': rank %d cannot resolve MASTER_ADDR=%s: %s", r->name, r->rank, host, gai_strerror(g));
    if (g == 0) r->addrs = res;
  }
  *final = 0;
  if (!r->addrs) return IRIS_ERROR_TIMEOUT; /* not resolvable yet */
  for (ai = r->addrs; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol), e;
    struct pollfd pf;
    long long left = deadline - iris_detail_now_ms();
    socklen_t len = sizeof e;
    if (fd < 0) continue;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    e = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    if (e == EINPROGRESS) {
      pf.fd = fd;
      pf.events = POLLOUT;
      pf.revents = 0;
      e = poll(&pf, 1, (int)(left <= 0 ? 0 : left > 1000 ? 1000 : left)) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 ? e : ETIMEDOUT;
    }
    if (e == 0) {
      fcntl(fd, F_SETFL, 0);
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      *fd_out = fd;
      break;
    }
    close(fd);
  }
  return *fd_out >= 0 ? IRIS_SUCCESS : IRIS_ERROR_TIMEOUT;
}

/* TCP rank 0: listen on every address at r->where's port. A port that a live process
 * listens on: IRIS_ERROR_IN_USE naming MASTER_PORT (SO_REUSEADDR lets a port left in
 * TIME_WAIT by an earlier run be bound again, never one with a listener). */
IRIS_INTERNAL iris_status_t iris_detail_tcp_listen(iris_rendezvous_t *r, int *lfd_out) {
  struct sockaddr_in6 a6;
  struct sockaddr_in a4;
  const char *colon = strrchr(r->where, ':');
  int port = colon ? atoi(colon + 1) : 0, one = 1, zero = 0, e;
  int lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  *lfd_out = -1;
  if (lfd >= 0) { /* dual stack where there is IPv6, else IPv4 */
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_any;
    a6.sin6_port = htons((unsigned short)port);
    setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&a6, sizeof a6) != 0) {
      e = errno;
      close(lfd);
      lfd = -1;
      if (e == EADDRINUSE) goto in_use;
    }
  }
  if (lfd < 0) {
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) return iris_detail_sys_fail(0, "socket (TCP rendezvous)", errno);
    memset(&a4, 0, sizeof a4);
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons((unsigned short)port);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&a4, sizeof a4) != 0) {
      e = errno;
      close(lfd);
      if (e == EADDRINUSE) goto in_use;
      return iris_detail_sys_fail(0, "bind (TCP rendezvous, MASTER_PORT)", e);
    }
  }
  if (listen(lfd, r->world + 8) != 0) {
    e = errno;
    close(lfd);
    if (e == EADDRINUSE) goto in_use;
    return iris_detail_sys_fail(0, "listen (TCP rendezvous, MASTER_PORT)", e);
  }
  *lfd_out = lfd;
  return IRIS_SUCCESS;
in_use:
  return iris_detail_fail(IRIS_ERROR_IN_USE,
                          "rendezvous '%s': rank 0 cannot listen on port %d (MASTER_PORT): another process listens there (another job, or an earlier run "
                          "that is still up); give this job a free MASTER_PORT",
                          r->name, port);
}

#endif /* IRIS_INTERNAL_RENDEZVOUS_TCP_H */
