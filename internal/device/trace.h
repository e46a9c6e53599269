/* internal/device/trace.h: a per-CTA timeline of the library's kernels, for finding out
 * where a slow call spent its time (IRIS_TRACE, off by default: without it every macro
 * here is empty and nothing is compiled in).
 *
 * With -DIRIS_TRACE in the unit that defines IRIS_IMPLEMENTATION (or lib/iris.cu), thread
 * 0 of every CTA of the collectives' and the MoE kernels keeps one record: which kernel,
 * its call number, the CTA, the SM it ran on, and four %globaltimer readings (entry, two
 * phase marks, exit; what the marks mean per kernel: IRIS_TRACE_K_* below). The records
 * go to a ring of IRIS_TRACE_CAP entries in device memory; iris_trace_read copies them
 * out. tools/trace_calls.py turns the records of every rank into a per-call table: when
 * each rank's kernel started, how far apart its CTAs started, which phase took the time.
 *
 * The host side (iris_trace_read) is internal/device/trace_host.h.
 *
 * Part of iris_device.h (device code); not a public header. */
#ifndef IRIS_INTERNAL_DEVICE_TRACE_H
#define IRIS_INTERNAL_DEVICE_TRACE_H
#include "../../iris.h"
#include "platform.h"

/* What the two marks t[1], t[2] of a record are, per kernel. */
enum {
  IRIS_TRACE_K_LL = 1,      /* one-shot LL: t1 pushed, t2 = t1 (the rest is the collect, with its waits) */
  IRIS_TRACE_K_LL2 = 2,     /* two-shot LL: t1 pushed, t2 reduced and pushed again */
  IRIS_TRACE_K_BW = 3,      /* bandwidth kernels: t1 every header seen (start barrier), t2 = t1 */
  IRIS_TRACE_K_MOE_DISP = 4,/* MoE dispatch: t1 routing known, t2 rows stored */
  IRIS_TRACE_K_MOE_COMB = 5,/* MoE combine: t1 rows stored, t2 every rank's rows here */
  IRIS_TRACE_K_BARRIER = 6, /* iris_barrier_device */
  IRIS_TRACE_K_ARM = 7,     /* armed one-shot: t1 pushed, t2 = t1 (the rest is the collect) */
  IRIS_TRACE_K_RMS = 8      /* fused all-reduce + RMSNorm (LL): t0 after the PDL wait, t1 the CTA's sums done (block barrier),
                               t2 the row's CTAs combined, t3 out written */
};
typedef struct iris_trace_rec {
  unsigned long long t[4]; /* %globaltimer, ns: entry, mark 1, mark 2, exit */
  unsigned kernel;         /* IRIS_TRACE_K_* */
  unsigned call;           /* the collective's call number, or the MoE epoch */
  unsigned block, nblocks; /* blockIdx.x, gridDim.x */
  unsigned smid;           /* the SM the CTA ran on */
  unsigned rank;           /* the context's rank */
  unsigned pad[2];
} iris_trace_rec_t;
#ifdef __cplusplus
static_assert(sizeof(iris_trace_rec_t) == 64, "iris_trace_rec_t: 64 bytes");
#endif

#if defined(IRIS_TRACE)
#ifndef IRIS_TRACE_CAP
#define IRIS_TRACE_CAP (1u << 18) /* records in the ring (16 MB) */
#endif
__device__ iris_trace_rec_t iris_trace_ring[IRIS_TRACE_CAP];
__device__ unsigned long long iris_trace_next;

/* Thread 0 of a CTA: start a record. */
#define IRIS_TRACE_BEGIN(kind)                                         \
  iris_trace_rec_t iris_tr_;                                           \
  if (threadIdx.x == 0) {                                              \
    iris_tr_.t[0] = iris_detail_time_ns();                             \
    iris_tr_.t[1] = iris_tr_.t[2] = iris_tr_.t[3] = 0;                 \
    iris_tr_.kernel = (kind);                                          \
    iris_tr_.block = blockIdx.x;                                       \
    iris_tr_.nblocks = gridDim.x;                                      \
    iris_tr_.smid = iris_detail_smid();                                 \
  }
#define IRIS_TRACE_MARK(i)                                   \
  do {                                                       \
    if (threadIdx.x == 0) iris_tr_.t[i] = iris_detail_time_ns(); \
  } while (0)
/* Thread 0: close the record (call number, rank) and store it in the ring. */
#define IRIS_TRACE_END(callno, rk)                                                          \
  do {                                                                                      \
    if (threadIdx.x == 0) {                                                                 \
      iris_tr_.t[3] = iris_detail_time_ns();                                                \
      if (!iris_tr_.t[1]) iris_tr_.t[1] = iris_tr_.t[3];                                    \
      if (!iris_tr_.t[2]) iris_tr_.t[2] = iris_tr_.t[1];                                    \
      iris_tr_.call = (unsigned)(callno);                                                   \
      iris_tr_.rank = (unsigned)(rk);                                                       \
      iris_tr_.pad[0] = iris_tr_.pad[1] = 0;                                                \
      const unsigned long long slot_ = atomicAdd(&iris_trace_next, 1ULL) % IRIS_TRACE_CAP; \
      iris_trace_ring[slot_] = iris_tr_;                                                    \
    }                                                                                       \
  } while (0)
#else
#define IRIS_TRACE_BEGIN(kind)
#define IRIS_TRACE_MARK(i) \
  do {                     \
  } while (0)
#define IRIS_TRACE_END(callno, rk) \
  do {                             \
  } while (0)
#endif

#endif /* IRIS_INTERNAL_DEVICE_TRACE_H */
