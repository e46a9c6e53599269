/* internal/rendezvous/wire.h: the rendezvous's wire format and socket I/O: the frame and
 * hello layouts, the rendezvous handle, bounded send and receive, a peer's credentials,
 * and the ERROR frames with which rank 0 refuses a rank or gives up.
 *
 * The rendezvous is a star over stream sockets (Unix, or TCP across hosts): rank 0
 * listens, every other rank connects. Frames are a fixed header plus payload. An allgather
 * is: each rank sends GATHER to rank 0, rank 0 answers every rank with TABLE; a barrier is
 * an allgather of nothing. Rank 0 tells every connected rank why it gives up (ERROR), so
 * every rank's error names the missing or offending ranks.
 *
 * Part of iris's implementation, included by iris.h under IRIS_IMPLEMENTATION (inside its
 * extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_RENDEZVOUS_WIRE_H
#define IRIS_INTERNAL_RENDEZVOUS_WIRE_H
#include "../../iris.h"
#include "../core/sys.h"
#include "../core/status.h"
#include "../core/util.h"

#define IRIS_DETAIL_MAGIC 0x53495249u /* "IRIS" */
/* What a frame carries (iris_detail_frame_t.type). */
enum iris_detail_frame_type { IRIS_DETAIL_HELLO = 1, IRIS_DETAIL_WELCOME, IRIS_DETAIL_GATHER, IRIS_DETAIL_TABLE, IRIS_DETAIL_ERROR };

/* Every message starts with this header, sent as its bytes (host byte order: the ranks of
 * one job run one build of iris on one architecture; a rank of another build is told so
 * by the size of its hello). len payload bytes follow: the hello (HELLO), this rank's
 * block (GATHER), every rank's blocks (TABLE), a terminated message (ERROR, whose status
 * is the iris_status_t the receiver returns). */
typedef struct iris_detail_frame {
  uint32_t magic, type; /* IRIS_DETAIL_MAGIC, an iris_detail_frame_type */
  int32_t rank, status; /* the sender's rank; ERROR: an iris error status, else 0 */
  uint64_t seq, len;    /* the collective's number (0 at bring-up), the payload's bytes */
} iris_detail_frame_t;
IRIS_DETAIL_STATIC_ASSERT(sizeof(iris_detail_frame_t) == 32 && offsetof(iris_detail_frame_t, type) == 4 && offsetof(iris_detail_frame_t, rank) == 8 &&
                              offsetof(iris_detail_frame_t, status) == 12 && offsetof(iris_detail_frame_t, seq) == 16 &&
                              offsetof(iris_detail_frame_t, len) == 24,
                          rendezvous_frame_layout);

/* A rank's HELLO payload: what rank 0 compares before it lets the rank in. */
#define IRIS_DETAIL_JOB_BYTES 128
typedef struct iris_detail_hello {
  uint32_t version, world;
  uint64_t heap_size;
  char job[IRIS_DETAIL_JOB_BYTES]; /* the job token, terminated */
} iris_detail_hello_t;
IRIS_DETAIL_STATIC_ASSERT(sizeof(iris_detail_hello_t) == 16 + IRIS_DETAIL_JOB_BYTES && offsetof(iris_detail_hello_t, world) == 4 &&
                              offsetof(iris_detail_hello_t, heap_size) == 8 && offsetof(iris_detail_hello_t, job) == 16,
                          rendezvous_hello_layout);

struct iris_rendezvous {
  int rank, world, timeout_ms;
  int tcp;       /* 1: TCP (iris_rendezvous_open_tcp); 0: a Unix socket */
  char where[96]; /* TCP: "addr:port", for messages */
  struct addrinfo *addrs; /* TCP, ranks above 0: rank 0's addresses, once resolved */
  long long resolved_ms;  /* TCP: when the last resolution ended (iris_detail_now_ms; 0: none yet) */
  int *fds;      /* rank 0: fds[r] for r >= 1; others: fds[0] is the link to rank 0 */
  uint64_t seq;  /* collective operations so far */
  int broken;    /* an iris_status_t: a collective failed leaving the ranks' streams out of step (why: the detail then) */
  char why[200];
  char name[72];
  char job[IRIS_DETAIL_JOB_BYTES];
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* A job id as a token of at most IRIS_DETAIL_JOB_BYTES - 1 characters: as it is when it
 * fits, else its first 90 characters and two 64-bit hashes of the whole. */
IRIS_INTERNAL void iris_detail_job_token(const char *job, char *out, size_t cap) {
  uint64_t h1 = 14695981039346656037ULL, h2 = 1469598103934665603ULL;
  const char *c;
  if (!job) job = "";
  if (strlen(job) < cap) { iris_detail_copy(out, cap, job); return; }
  for (c = job; *c; c++) h1 = iris_detail_fnv(h1, (unsigned char)*c), h2 = iris_detail_fnv(h2 ^ 0x9e37, (unsigned char)*c);
  snprintf(out, cap, "%.90s~%016llx%016llx", job, (unsigned long long)h1, (unsigned long long)h2);
}

struct iris_detail_ucred { int pid; unsigned uid, gid; };

IRIS_INTERNAL int iris_detail_peer_uid(int fd, unsigned *uid) {
#if defined(__linux__)
  struct iris_detail_ucred c;
  socklen_t len = sizeof c;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) return -1;
  *uid = c.uid;
  return 0;
#else
  (void)fd;
  *uid = (unsigned)getuid(); /* the private directory is the only guard here */
  return 0;
#endif
}

/* Send or receive exactly n bytes before deadline (ms, monotonic). 0 on success,
 * ETIMEDOUT, EPIPE (peer closed) or errno. Each send/recv is non-blocking
 * (MSG_DONTWAIT): the sockets are blocking, and a blocking send of more than the socket
 * buffer would wait, past the deadline, for as long as the peer does not read. */
IRIS_INTERNAL int iris_detail_io(int fd, void *buf, size_t n, long long deadline, int sending) {
  char *p = (char *)buf;
  while (n > 0) {
    struct pollfd pf;
    long long left = deadline - iris_detail_now_ms();
    ssize_t k;
    int pr;
    if (left <= 0) return ETIMEDOUT;
    pf.fd = fd;
    pf.events = (short)(sending ? POLLOUT : POLLIN);
    pf.revents = 0;
    pr = poll(&pf, 1, (int)(left > 1000000 ? 1000000 : left));
    if (pr < 0) { if (errno == EINTR) continue; return errno; }
    if (pr == 0) continue;
    k = sending ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
    if (k < 0) { if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue; return errno == ECONNRESET ? EPIPE : errno; }
    if (k == 0) return EPIPE;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}
IRIS_INTERNAL int iris_detail_send_frame(int fd, uint32_t type, int rank, int status, uint64_t seq, const void *data, size_t len, long long deadline) {
  iris_detail_frame_t f;
  int e;
  f.magic = IRIS_DETAIL_MAGIC;
  f.type = type;
  f.rank = rank;
  f.status = status;
  f.seq = seq;
  f.len = len;
  e = iris_detail_io(fd, &f, sizeof f, deadline, 1);
  if (!e && len) e = iris_detail_io(fd, (void *)data, len, deadline, 1);
  return e;
}
/* A failure status a peer reported: itself when it is an iris error, else (0, negative,
 * unknown) IRIS_ERROR_SYSTEM: a peer's word never turns a failure into success. */
IRIS_INTERNAL iris_status_t iris_detail_peer_status(int32_t s) {
  return s > (int32_t)IRIS_SUCCESS && s < (int32_t)IRIS_STATUS_COUNT ? (iris_status_t)s : IRIS_ERROR_SYSTEM;
}
/* Reads a frame header; for ERROR frames reads the message into the thread's detail. */
IRIS_INTERNAL int iris_detail_recv_header(int fd, iris_detail_frame_t *f, long long deadline) {
  int e = iris_detail_io(fd, f, sizeof *f, deadline, 0);
  if (e) return e;
  if (f->magic != IRIS_DETAIL_MAGIC) return EPROTO;
  if (f->type == IRIS_DETAIL_ERROR) {
    /* a peer's word is not trusted: an ERROR frame must carry an error status */
    char msg[sizeof iris_detail_errbuf - 160];
    size_t n = f->len < sizeof msg - 1 ? (size_t)f->len : sizeof msg - 1;
    memset(msg, 0, sizeof msg);
    if (iris_detail_io(fd, msg, n, deadline, 0) != 0) msg[0] = 0;
    if (f->status <= (int32_t)IRIS_SUCCESS || f->status >= (int32_t)IRIS_STATUS_COUNT) {
      iris_detail_fail(IRIS_ERROR_SYSTEM, "rendezvous protocol error: rank %d sent an ERROR frame with status %d, which is not an iris error (message: '%.300s')",
                       (int)f->rank, (int)f->status, msg);
      f->status = (int32_t)IRIS_ERROR_SYSTEM;
    } else {
      iris_detail_fail((iris_status_t)f->status, "%s", msg);
    }
  }
  return 0;
}

/* Rank 0 gives up: tell every connected rank why, then return the same status. */
IRIS_INTERNAL iris_status_t iris_detail_rdv_abort(iris_rendezvous_t *r, iris_status_t st) {
  int i;
  long long deadline = iris_detail_now_ms() + 500;
  const char *msg = iris_detail_errbuf;
  for (i = 1; i < r->world; i++)
    if (r->fds[i] >= 0) iris_detail_send_frame(r->fds[i], IRIS_DETAIL_ERROR, 0, (int)st, r->seq, msg, strlen(msg) + 1, deadline);
  return st;
}

/* Rank 0 turns one connection away: an ERROR frame with st and the message; this
 * thread's detail stays as it was (rank 0 goes on waiting). */
IRIS_INTERNAL void iris_detail_refuse(int fd, iris_status_t st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  iris_detail_send_frame(fd, IRIS_DETAIL_ERROR, 0, (int)st, 0, msg, strlen(msg) + 1, iris_detail_now_ms() + 500);
}

#endif /* IRIS_INTERNAL_RENDEZVOUS_WIRE_H */
