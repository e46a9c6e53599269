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

/* TCP: one try to reach rank 0 at r->where (host and port split at the last ':'),
 * bounded by deadline. IRIS_SUCCESS with *fd; IRIS_ERROR_TIMEOUT (no detail) when
 * worth retrying (refused, unreachable, a name not resolvable yet); another status for
 * a name that does not exist. */
IRIS_INTERNAL iris_status_t iris_detail_tcp_dial(iris_rendezvous_t *r, long long deadline, int *fd_out) {
  struct addrinfo hints, *res = NULL, *ai;
  char host[96], *colon;
  int g, one = 1;
  *fd_out = -1;
  iris_detail_copy(host, sizeof host, r->where);
  colon = strrchr(host, ':');
  if (!colon) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rendezvous '%s': '%s' is not address:port", r->name, r->where);
  *colon = 0;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  g = getaddrinfo(host, colon + 1, &hints, &res);
  if (g == EAI_NONAME)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rendezvous '%s': rank %d cannot resolve MASTER_ADDR=%s: %s", r->name, r->rank, host, gai_strerror(g));
  if (g != 0) return IRIS_ERROR_TIMEOUT;
  for (ai = res; ai; ai = ai->ai_next) {
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
  freeaddrinfo(res);
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
