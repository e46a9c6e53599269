/* iris_nccl.h — what libiris_nccl.so adds to NCCL's API (docs/nccl_shim.md).
 *
 * libiris_nccl.so is libnccl.so.2 to every program: it exports every function of the
 * nccl.h it was built against (and the pnccl* aliases), serves all-reduce, all-gather,
 * reduce-scatter and broadcast with iris where iris is faster, and forwards everything
 * else to the real NCCL, which it opens with dlopen. A program that wants to know what the
 * shim did declares these (or includes this header) and looks them up with dlsym, so it
 * still runs on the real NCCL alone:
 *     iris_nccl_stats_fn f = (iris_nccl_stats_fn)dlsym(RTLD_DEFAULT, "iris_nccl_stats");
 */
#ifndef IRIS_NCCL_H
#define IRIS_NCCL_H
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* collectives, in the order of the counters below */
#define IRIS_NCCL_STATS_KINDS 5 /* allreduce, allgather, reducescatter, broadcast, alltoall */

typedef struct iris_nccl_stats {
  size_t struct_size;      /* set to sizeof(iris_nccl_stats_t) before the call */
  int iris;                /* 1: an iris context serves this communicator now */
  int rank, world;         /* as NCCL numbers them (0 and 0 until the bring-up ran) */
  unsigned long long served[IRIS_NCCL_STATS_KINDS];    /* calls sent to iris (one iris refused for its arguments, such as a root out of range, included: it still took part) */
  unsigned long long forwarded[IRIS_NCCL_STATS_KINDS]; /* calls of the same kinds sent to NCCL */
  unsigned long long max_bytes[IRIS_NCCL_STATS_KINDS]; /* the agreed routing table */
  char why[192];           /* why there is no iris context ("" when there is one) */
  /* memory (ncclMemAlloc and windows; absent when struct_size is that of the struct
   * without them, offsetof(iris_nccl_stats_t, zero_copy), which is still accepted) */
  unsigned long long zero_copy[IRIS_NCCL_STATS_KINDS]; /* of served: calls on buffers in zero-copy windows (the rest were staged) */
  int windows;             /* windows the shim keeps for this communicator (over its ncclMemAlloc memory) */
  int windows_zero_copy;   /* of those: every rank's buffer at the same heap offset */
  unsigned long long heap_blocks; /* ncclMemAlloc blocks of this communicator's iris heap not freed yet */
  /* absent when struct_size is offsetof(iris_nccl_stats_t, ctas) (still accepted) */
  int ctas;                /* the CTAs per call of iris's kernels: the smallest ncclConfig_t.maxCTAs / NCCL_MAX_CTAS of the ranks; 0: iris's own grid */
} iris_nccl_stats_t;

/* The shim's view of a communicator. ncclInvalidArgument for a NULL pointer or a
 * struct_size other than this header's (or an earlier one: without the memory counters,
 * or without ctas). A communicator the shim never saw (created by a
 * call it forwards whole, such as ncclCommShrink, or with IRIS_NCCL_DISABLE=1) gives
 * iris 0, zero counters and a why saying so. Any thread. */
ncclResult_t iris_nccl_stats(ncclComm_t comm, iris_nccl_stats_t *out);
typedef ncclResult_t (*iris_nccl_stats_fn)(ncclComm_t, iris_nccl_stats_t *);

/* The path of the real NCCL the shim opened (loading it now if needed), or NULL when it
 * found none (ncclGetLastError(NULL) then says where it looked). */
const char *iris_nccl_real_library(void);

#ifdef __cplusplus
}
#endif
#endif /* IRIS_NCCL_H */
