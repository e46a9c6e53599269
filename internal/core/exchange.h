/* internal/core/exchange.h: the exchange record: what each rank tells every other at bring-up
 * (its identity, heap, GPU and IPC handle), the host identity in it, and the checks of
 * every rank's record against rank 0's. Part of iris's implementation, included by iris.h
 * under IRIS_IMPLEMENTATION (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_EXCHANGE_H
#define IRIS_INTERNAL_CORE_EXCHANGE_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"
#include "status.h"
#include "util.h"
#include "../rendezvous/wire.h"

/* One rank's record, sent as its bytes in the bring-up allgather (the ranks of a node run
 * one build on one host: the rendezvous checked the hello's size and version). The
 * records of a node's ranks arrive in rank order; rank and world are node-local (the
 * world's in a single-node world). */
typedef struct iris_detail_record {
  uint32_t magic, version; /* IRIS_DETAIL_MAGIC, IRIS_VERSION */
  int32_t rank, world;
  uint64_t heap_size;
  int32_t heap_memory, device;
  int64_t pid;
  uint64_t pidns; /* inode of /proc/self/ns/pid: pids compare only within one namespace */
  uint32_t uid;
  int32_t status; /* non-zero: this rank failed to set up; err says why */
  unsigned char proc_token[IRIS_DETAIL_TOKEN_BYTES]; /* iris_detail_process_token() */
  uint64_t base;  /* the heap's address in the sender's process (peer access in one process) */
  char host[64];
  char boot_id[48];
  char pci[32];
  unsigned char ipc[64]; /* the heap's IPC handle (iris_gpu_ipc_handle_t) */
  char err[256];
} iris_detail_record_t;
IRIS_DETAIL_STATIC_ASSERT(offsetof(iris_detail_record_t, rank) == 8 && offsetof(iris_detail_record_t, heap_size) == 16 &&
                              offsetof(iris_detail_record_t, heap_memory) == 24 && offsetof(iris_detail_record_t, pid) == 32 &&
                              offsetof(iris_detail_record_t, pidns) == 40 && offsetof(iris_detail_record_t, uid) == 48 &&
                              offsetof(iris_detail_record_t, status) == 52 && offsetof(iris_detail_record_t, proc_token) == 56,
                          exchange_record_head_offsets);
IRIS_DETAIL_STATIC_ASSERT(IRIS_DETAIL_TOKEN_BYTES == 16 && offsetof(iris_detail_record_t, base) == 72 && offsetof(iris_detail_record_t, host) == 80 &&
                              offsetof(iris_detail_record_t, boot_id) == 144 && offsetof(iris_detail_record_t, pci) == 192 &&
                              offsetof(iris_detail_record_t, ipc) == 224 && offsetof(iris_detail_record_t, err) == 288 &&
                              sizeof(iris_detail_record_t) == 544,
                          exchange_record_tail_offsets);
IRIS_DETAIL_STATIC_ASSERT(sizeof(iris_gpu_ipc_handle_t) <= sizeof(((iris_detail_record_t *)0)->ipc), exchange_record_holds_ipc_handle);

IRIS_INTERNAL void iris_detail_host_identity(iris_detail_record_t *rec) {
  FILE *f;
  gethostname(rec->host, sizeof rec->host - 1);
  f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(rec->boot_id, (int)sizeof rec->boot_id, f)) rec->boot_id[0] = 0;
    fclose(f);
  }
  rec->boot_id[strcspn(rec->boot_id, "\n")] = 0;
  {
    struct stat ns;
    rec->pidns = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
  }
}

/* Is the peer of record b this very process? Only when its process token is ours (a pid
 * alone repeats across PID namespaces: two containers' ranks are often both pid 1). */
IRIS_INTERNAL int iris_detail_same_process(const iris_detail_record_t *b) {
  unsigned char mine[IRIS_DETAIL_TOKEN_BYTES];
  iris_detail_process_token(mine);
  return b->pid == (int64_t)getpid() && memcmp(b->proc_token, mine, sizeof mine) == 0;
}
/* A peer's fixed-size string field, terminated whatever the peer sent. */
#define IRIS_DETAIL_TERMINATE(field) ((field)[sizeof(field) - 1] = 0)
IRIS_INTERNAL void iris_detail_terminate_record(iris_detail_record_t *rec) {
  IRIS_DETAIL_TERMINATE(rec->host);
  IRIS_DETAIL_TERMINATE(rec->boot_id);
  IRIS_DETAIL_TERMINATE(rec->pci);
  IRIS_DETAIL_TERMINATE(rec->err);
}

/* Checks every record of a node against its first's (terminating their strings first).
 * first: the world rank of slot 0 (node * local size in a multi-node world), so that
 * messages name world ranks, not slots. Exposed (as iris_detail_) for the host tests. */
IRIS_INTERNAL iris_status_t iris_detail_check_node_records(iris_detail_record_t *rec, int world, int first) {
  int r;
  for (r = 0; r < world; r++) iris_detail_terminate_record(&rec[r]);
  for (r = 0; r < world; r++)
    if (rec[r].status != 0) return iris_detail_fail(iris_detail_peer_status(rec[r].status), "rank %d failed during bring-up: %s", first + r, rec[r].err);
  for (r = 0; r < world; r++) {
    const iris_detail_record_t *a = &rec[0], *b = &rec[r];
    if (b->magic != IRIS_DETAIL_MAGIC || b->rank != r)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: slot %d of the exchange holds rank %d (the allgather must order blocks by rank)", r, b->rank);
    if (b->version != a->version)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: rank %d runs iris version %u but rank %d runs %u", first + r, b->version, first, a->version);
    if (b->world != world || a->world != world)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: rank %d was started with world size %d but rank %d with %d", first + r, b->world, first, a->world);
    if (b->heap_size != a->heap_size)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: rank %d asks for a heap of %llu bytes but rank %d for %llu", first + r, (unsigned long long)b->heap_size, first,
                              (unsigned long long)a->heap_size);
    if (b->heap_memory != a->heap_memory)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: rank %d uses heap memory kind %d but rank %d kind %d", first + r, b->heap_memory, first, a->heap_memory);
    if (b->uid != a->uid)
      return iris_detail_fail(IRIS_ERROR_PERMISSION, "bring-up: rank %d runs as uid %u but rank %d as uid %u; all ranks must be one user", first + r, b->uid, first, a->uid);
    if (strcmp(b->host, a->host) != 0)
      return iris_detail_fail(IRIS_ERROR_DIFFERENT_HOST,
                              "bring-up: rank %d runs on host '%s' but rank %d on '%s'; GPU IPC does not cross hosts: the ranks of one node (one "
                              "IRIS_HOST_ID) must share a host",
                              first + r, b->host, first, a->host);
    if (strcmp(b->boot_id, a->boot_id) != 0)
      return iris_detail_fail(IRIS_ERROR_DIFFERENT_HOST,
                              "bring-up: rank %d runs on host '%s' (boot id %s) but rank %d on '%s' (boot id %s): different machines with one name; GPU IPC does "
                              "not cross hosts: the ranks of one node (one IRIS_HOST_ID) must share a host",
                              first + r, b->host, b->boot_id, first, a->host, a->boot_id);
  }
  return IRIS_SUCCESS;
}

#endif /* IRIS_INTERNAL_CORE_EXCHANGE_H */
