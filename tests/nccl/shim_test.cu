/* tests/nccl/shim_test.cu — libiris_nccl.so on GPUs, through NCCL's API only.
 *   nccl_shim_test threads W   one thread per rank; ncclCommInitRank inside
 *                              ncclGroupStart/End (as nccl-tests does): bring-up at the group end
 *   nccl_shim_test initall W   one ncclCommInitAll (the shim brings up W contexts in helper
 *                              threads), then one thread per rank
 *   nccl_shim_test initall-seq W  as initall, but the main thread destroys every
 *                              communicator in turn afterwards, as nccl-tests does (each
 *                              teardown must not wait for ranks whose turn comes later)
 *   nccl_shim_test procs W     one process per rank (fork before any GPU call): IPC heaps
 *   nccl_shim_test memalloc W  one thread per rank, the memory door (IRIS_NCCL_MEMALLOC, set
 *                              to 64M unless given): ncclMemAlloc from the iris heap, windows
 *                              every rank registers at the same heap offset run zero-copy,
 *                              windows over blocks allocated in different orders are staged,
 *                              a graph of zero-copy calls, deregistration, ncclMemAlloc
 *                              before any communicator (the real NCCL's), a block that
 *                              outlives its communicator (checks M_* below)
 *   nccl_shim_test bad-root W  one thread per rank, a bad argument on one rank only (checks
 *                              B_* below): a broadcast the table sends to iris with a root
 *                              outside [0, W) on one rank (ncclBroadcast, then ncclBcast with
 *                              -1 on another), and a NULL sendbuff on the root: that rank
 *                              returns ncclInvalidArgument naming the root and the ranks, no
 *                              rank waits (every stream done within 10 s; IRIS_WAIT_TIMEOUT_MS
 *                              20000 unless given, so a wait for a rank that never comes is a
 *                              FAIL, not a hang), the next call is exact, and then
 *                              ncclCommGetAsyncError reports the mismatch (ncclInvalidUsage) on
 *                              every rank; ncclCommAbort ends it
 * W ranks on W distinct GPUs (fewer GPUs: SKIP; NCCL refuses two ranks on one GPU).
 * Every collective the shim serves, over every type and op it maps, counts from 1 to
 * above the table (16 MiB), in and out of place, checked on the GPU against the exact
 * result; where each call went, against nccl/route.h's decision (iris_nccl_stats);
 * what must fall back (prod, fp64, int8 max, all-to-all); a group with send/recv;
 * a CUDA graph replayed with new inputs; NCCL and iris calls interleaved on one stream;
 * ncclCommSplit; teardown.
 * NCCL_SHIM_TEST_EXPECT=nccl (with IRIS_NCCL_DISABLE=1, or run on the real NCCL): every
 * call must go to NCCL, values as above. Built linked against build/nccl/libnccl.so.2
 * (the shim); LD_LIBRARY_PATH=<real NCCL's folder> runs the same binary on NCCL alone.
 * Prints one PASS / FAIL / SKIP line per check (the parent / main thread, after all ranks). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <dlfcn.h>
#include <limits.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "../../nccl/iris_nccl.h"
#include "../../nccl/route.h"

enum { C_INIT, C_AR, C_ROUTE, C_AG, C_RS, C_BC, C_A2A, C_FALLBACK, C_GROUP, C_GRAPH, C_MIXED, C_SPLIT, C_DESTROY, C_COUNT,
       M_INIT = C_COUNT, M_WIN, M_ZC, M_ASYM, M_GRAPH, M_MULTI, M_DEREG, M_NCCLMEM, M_LIFE, M_END,
       B_INIT = M_END, B_ROOT, B_ROOT_NEXT, B_BCAST, B_NULL_SEND, B_ASYNC, B_END };
static const char *const check_names[B_END] = {
    "bring-up: every rank's communicator has an iris context (iris_nccl_stats)",
    "all-reduce: fp32, fp16, bf16, int32, int64, uint8 (sum, min, max; avg of fp32, bf16, int32), fp8 e4m3/e5m2, int8/uint32 sums; 1 to 4M+1 elements; in and out of place",
    "routing: every call went where nccl/route.h's default table sends it (iris_nccl_stats counters)",
    "all-gather: 1, 2, 4 and 8-byte types, 1 to 4M elements per rank, in and out of place",
    "reduce-scatter: fp32, bf16, int32 sums, fp32 max; 1 to 1M+1 elements per rank, in and out of place",
    "broadcast: every root, ncclBroadcast and ncclBcast (in place), 1 to 4M elements",
    "all-to-all: 1000 int32 per peer (iris) and 300000 per peer (above the 1 MiB default: NCCL), values",
    "fallbacks: prod, fp64 sum, int8 max, uint64 min go to NCCL with the right values",
    "a group: all-reduce, all-gather and a send/recv ring between ncclGroupStart/End",
    "a CUDA graph of all-reduce, all-gather and broadcast, replayed 5 times with new inputs",
    "NCCL and iris interleaved on one stream: all-to-all -> all-reduce of its output -> 16 MiB all-reduce",
    "ncclCommSplit: the child gets its own iris context and computes over its members",
    "ncclCommDestroy of child and parent: ncclSuccess, the shim forgets them; ranks that are threads destroy the child in different orders around a call of the parent",
    /* memalloc */
    "memalloc: an iris context; ncclMemAlloc blocks come from its heap (iris_nccl_stats heap_blocks)",
    "memalloc: windows every rank registered over blocks allocated alike are zero-copy (iris_nccl_stats windows_zero_copy)",
    "memalloc: zero-copy all-reduce (fp32, bf16; sum, max), all-gather, reduce-scatter, broadcast (every root), in and out of place, 1 to 1M elements, "
    "outputs poisoned, skewed arrival, two streams: values exact, every call served by iris and counted zero-copy",
    "memalloc: blocks allocated in different orders (other heap offsets): the window is kept but staged; the same calls exact and counted staged",
    "memalloc: a CUDA graph of zero-copy all-reduce, all-gather, reduce-scatter and broadcast, replayed 5 times with new inputs",
    "memalloc: two communicators (ncclCommSplit): ncclMemAlloc lends from the older one's heap; the child's window over that memory is kept but staged; "
    "the child's all-reduce on it exact",
    "memalloc: after ncclCommWindowDeregister the same buffers are staged and still exact",
    "memalloc: ncclMemAlloc before any communicator comes from the real NCCL; its window is the real NCCL's; calls on it staged and exact",
    "memalloc: a block still allocated at ncclCommDestroy keeps its contents; ncclMemFree after the destroy succeeds",
    /* bad-root */
    "bad-root: an iris context; a broadcast of 16 KB (in the table) exact from root 0",
    "bad-root: ncclBroadcast with root W on the last rank, 0 on the others: that rank returns ncclInvalidArgument naming the root and [0, W), "
    "the others ncclSuccess; every rank's stream done within 10 s; every rank sent it to iris (iris_nccl_stats served)",
    "bad-root: the next broadcast (root 1 % W, every rank) is exact on every rank",
    "bad-root: ncclBcast with root -1 on rank 0: the same answers, and the next call exact",
    "bad-root: ncclBroadcast with a NULL sendbuff on the root: the root returns ncclInvalidArgument, no rank waits, the next call exact",
    "bad-root: then ncclCommGetAsyncError reports ncclInvalidUsage (the mismatch) on every rank, the next collective returns it at once, ncclCommAbort succeeds",
};

/* results, shared by every rank (threads or processes): fails and the first reason */
typedef struct shared {
  int id_ready;
  ncclUniqueId id;
  int fails[B_END], ran[B_END];
  char why[B_END][240];
  int skip;
  char skip_why[200];
  int stop; /* bad-root mode: ranks whose bring-up failed (every rank then stops) */
} shared_t;
static shared_t *sh;
static int W;
static int expect_nccl; /* every call must go to NCCL */

static void fail(int c, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(int c, int rank, const char *fmt, ...) {
  char buf[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (__atomic_fetch_add(&sh->fails[c], 1, __ATOMIC_SEQ_CST) == 0) snprintf(sh->why[c], sizeof sh->why[c], "rank %d: %s", rank, buf);
}
#define CK(c, rank, x) do { if (!(x)) fail(c, rank, "%s (line %d)", #x, __LINE__); } while (0)
/* NCCL_SHIM_TEST_TRACE=1: each rank names on stderr the step it starts (the verdicts are
 * printed only when every rank is done, so a step that never ends prints nothing else) */
static pthread_barrier_t mem_barrier; /* memalloc mode: the rank threads */
static const char *last_step[64]; /* memalloc mode (threads): each rank's last step, for the time limit's report */
static int last_line[64];
static void trace_step(int rank, const char *what, int line) {
  static int on = -1;
  if (on < 0) on = getenv("NCCL_SHIM_TEST_TRACE") && !strcmp(getenv("NCCL_SHIM_TEST_TRACE"), "1");
  if (rank >= 0 && rank < 64) __atomic_store_n(&last_line[rank], line, __ATOMIC_RELAXED), __atomic_store_n(&last_step[rank], what, __ATOMIC_RELEASE);
  if (on) fprintf(stderr, "trace: rank %d: line %d: %s\n", rank, line, what);
}
#define TRACE(x, what) trace_step((x)->rank, what, __LINE__)

/* ------------------------------------------------------------ values on the GPU == */
/* small integers, exact in every type: val(i, r) in 0..4 (0..1 for fp8, whose sums over
 * 8 ranks stay exact), shifted by `seed` */
__host__ __device__ static double val(size_t i, int r, int seed, int narrow) {
  return narrow ? (double)((i + (size_t)r + (size_t)seed) % 2) : (double)((i * 7 + (size_t)r * 3 + (size_t)seed) % 5);
}
template <typename T> __device__ T to_t(double v) { return (T)v; }
template <> __device__ __half to_t<__half>(double v) { return __float2half((float)v); }
template <> __device__ __nv_bfloat16 to_t<__nv_bfloat16>(double v) { return __float2bfloat16((float)v); }
template <> __device__ __nv_fp8_e4m3 to_t<__nv_fp8_e4m3>(double v) { return __nv_fp8_e4m3((float)v); }
template <> __device__ __nv_fp8_e5m2 to_t<__nv_fp8_e5m2>(double v) { return __nv_fp8_e5m2((float)v); }
template <typename T> __device__ double from_t(T v) { return (double)v; }
template <> __device__ double from_t<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ double from_t<__nv_bfloat16>(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
template <> __device__ double from_t<__nv_fp8_e4m3>(__nv_fp8_e4m3 v) { return (double)(float)v; }
template <> __device__ double from_t<__nv_fp8_e5m2>(__nv_fp8_e5m2 v) { return (double)(float)v; }

/* buf[i] = val(i + shift, r, seed) for i < n */
template <typename T> __global__ void fill_k(T *buf, size_t n, size_t shift, int r, int seed, int narrow) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) buf[i] = to_t<T>(val(i + shift, r, seed, narrow));
}
/* the expected element: mode 0: op over ranks of val(idx, r) (ranks in [0, W) with step
 * `stride` from `first`); mode 1: val(idx, src) */
struct expect_t {
  int mode, op, first, stride, count, seed, narrow, is_int, src;
  double tol;
};
__device__ static double expected(const expect_t &e, size_t idx) {
  if (e.mode == 1) return val(idx, e.src, e.seed, e.narrow);
  double acc = 0;
  for (int k = 0; k < e.count; k++) {
    double v = val(idx, e.first + k * e.stride, e.seed, e.narrow);
    if (k == 0) acc = v;
    else if (e.op == ncclSum || e.op == ncclAvg) acc += v;
    else if (e.op == ncclProd) acc *= v;
    else if (e.op == ncclMax) acc = v > acc ? v : acc;
    else acc = v < acc ? v : acc;
  }
  if (e.op == ncclAvg) acc = e.is_int ? (double)((long long)acc / e.count) : acc / e.count;
  return acc;
}
/* counts the elements i < n of buf that differ from expected(e, i + shift) */
template <typename T> __global__ void check_k(const T *buf, size_t n, size_t shift, expect_t e, unsigned long long *bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    double want = expected(e, i + shift), got = from_t<T>(buf[i]);
    double d = got - want;
    if (d < 0) d = -d;
    if (!(d <= e.tol * (want < 0 ? -want : want) + (e.tol > 0 ? 1e-6 : 0))) atomicAdd(bad, 1ull); /* a NaN (a poisoned element left) counts */
  }
}

/* one rank's GPU state */
typedef struct rank_ctx {
  int rank;
  ncclComm_t comm;
  cudaStream_t s, s2; /* s2: memalloc mode's second stream */
  char *a, *b, *c; /* three buffers of MAXB bytes */
  unsigned long long *bad;
  iris_nccl_stats_fn stats;
  int keep;           /* initall-seq: leave the communicators to the main thread's teardown */
  int threads;        /* the ranks are threads of one process */
  ncclComm_t child;   /* then: the split's child, destroyed by the main thread */
} rank_ctx_t;
#define MAXB ((size_t)64 << 20)

template <typename T> static void fill(rank_ctx_t *x, void *buf, size_t n, size_t shift, int r, int seed, int narrow) {
  fill_k<T><<<256, 256, 0, x->s>>>((T *)buf, n, shift, r, seed, narrow);
}
template <typename T> static unsigned long long count_bad(rank_ctx_t *x, const void *buf, size_t n, size_t shift, expect_t e) {
  unsigned long long bad = 0;
  cudaMemsetAsync(x->bad, 0, sizeof *x->bad, x->s);
  check_k<T><<<256, 256, 0, x->s>>>((const T *)buf, n, shift, e, x->bad);
  cudaMemcpyAsync(&bad, x->bad, sizeof bad, cudaMemcpyDeviceToHost, x->s);
  if (cudaStreamSynchronize(x->s) != cudaSuccess) return ~0ull;
  return bad;
}
static expect_t reduce_expect(int op, int seed, int narrow, int is_int, double tol) {
  expect_t e = {0, op, 0, 1, W, seed, narrow, is_int, 0, tol};
  return e;
}
static expect_t copy_expect(int src, int seed, int narrow) {
  expect_t e = {1, 0, 0, 1, W, seed, narrow, 0, src, 0};
  return e;
}

/* the route the shim must have taken, as counters: before/after */
static void stats_of(rank_ctx_t *x, ncclComm_t comm, iris_nccl_stats_t *s) {
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  if (x->stats) x->stats(comm, s);
}
static void check_route(rank_ctx_t *x, int kind, size_t count, ncclDataType_t dt, ncclRedOp_t op, const iris_nccl_stats_t *before, int line) {
  iris_nccl_stats_t after;
  iris_nccl_table_t t = iris_nccl_default_table();
  iris_dtype_t it;
  iris_redop_t io;
  unsigned long long bytes;
  int want_iris, got_iris;
  if (!x->stats) return;
  stats_of(x, x->comm, &after);
  if (after.iris) memcpy(t.max_bytes, after.max_bytes, sizeof t.max_bytes); /* the agreed table (IRIS_NCCL_MAX_BYTES may change it) */
  want_iris = !expect_nccl && after.iris && iris_nccl_route(kind, &t, W, count, dt, op, &it, &io, &bytes) == IRIS_NCCL_ROUTE_IRIS;
  got_iris = after.served[kind] == before->served[kind] + 1;
  if (want_iris != got_iris || (!got_iris && !expect_nccl && after.forwarded[kind] != before->forwarded[kind] + 1))
    fail(C_ROUTE, x->rank, "line %d: %s of %zu %s %s: expected %s, got served %llu->%llu forwarded %llu->%llu", line, iris_nccl_kind_names[kind], count,
         iris_nccl_type_name(dt), iris_nccl_op_name(op), want_iris ? "iris" : "NCCL", before->served[kind], after.served[kind], before->forwarded[kind],
         after.forwarded[kind]);
}

static const size_t counts[] = {1, 3, 1000, 65543, 262144, 1048576, 1048577, 4194304};

template <typename T> static void test_allreduce(rank_ctx_t *x, ncclDataType_t dt, ncclRedOp_t op, int narrow, int is_int, double tol, int c) {
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    const size_t n = counts[ci];
    if (n * sizeof(T) > MAXB) continue;
    for (int inplace = 0; inplace < 2; inplace++) {
      iris_nccl_stats_t before;
      const int seed = (int)ci + 3 * inplace + op;
      void *send = inplace ? x->b : x->a;
      unsigned long long bad;
      ncclResult_t r;
      fill<T>(x, send, n, 0, x->rank, seed, narrow);
      stats_of(x, x->comm, &before);
      r = ncclAllReduce(send, x->b, n, dt, op, x->comm, x->s);
      if (r != ncclSuccess) {
        fail(c, x->rank, "ncclAllReduce(%zu %s %s) returned %s: %s", n, iris_nccl_type_name(dt), iris_nccl_op_name(op), ncclGetErrorString(r), ncclGetLastError(x->comm));
        return;
      }
      check_route(x, IRIS_NCCL_AR, n, dt, op, &before, __LINE__);
      bad = count_bad<T>(x, x->b, n, 0, reduce_expect(op, seed, narrow, is_int, tol));
      if (bad) fail(c, x->rank, "all-reduce %zu %s %s %s: %llu elements wrong", n, iris_nccl_type_name(dt), iris_nccl_op_name(op), inplace ? "in place" : "", bad);
    }
  }
}

template <typename T> static void test_allgather(rank_ctx_t *x, ncclDataType_t dt) {
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    const size_t n = counts[ci];
    if (n * sizeof(T) * W > MAXB) continue;
    for (int inplace = 0; inplace < 2; inplace++) {
      iris_nccl_stats_t before;
      const int seed = (int)ci + inplace;
      char *send = inplace ? x->b + (size_t)x->rank * n * sizeof(T) : x->a;
      unsigned long long bad = 0;
      ncclResult_t r;
      /* rank r contributes val(i, r) at its slot: recv[p*n + i] = val(i, p) */
      fill<T>(x, send, n, 0, x->rank, seed, 0);
      stats_of(x, x->comm, &before);
      if ((r = ncclAllGather(send, x->b, n, dt, x->comm, x->s)) != ncclSuccess) {
        fail(C_AG, x->rank, "ncclAllGather(%zu %s) returned %s: %s", n, iris_nccl_type_name(dt), ncclGetErrorString(r), ncclGetLastError(x->comm));
        return;
      }
      check_route(x, IRIS_NCCL_AG, n, dt, ncclSum, &before, __LINE__);
      for (int p = 0; p < W; p++) bad += count_bad<T>(x, x->b + (size_t)p * n * sizeof(T), n, 0, copy_expect(p, seed, 0));
      if (bad) fail(C_AG, x->rank, "all-gather %zu %s %s: %llu elements wrong", n, iris_nccl_type_name(dt), inplace ? "in place" : "", bad);
    }
  }
}

template <typename T> static void test_reducescatter(rank_ctx_t *x, ncclDataType_t dt, ncclRedOp_t op, double tol) {
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    const size_t n = counts[ci];
    if (n * sizeof(T) * W > MAXB || n > 1048577) continue;
    for (int inplace = 0; inplace < 2; inplace++) {
      iris_nccl_stats_t before;
      const int seed = (int)ci + 2 * inplace;
      char *recv = inplace ? x->a + (size_t)x->rank * n * sizeof(T) : x->b;
      unsigned long long bad;
      ncclResult_t r;
      /* send_r[j] = val(j, r) over W*n: recv[i] = op over r of val(rank*n + i, r) */
      fill<T>(x, x->a, n * W, 0, x->rank, seed, 0);
      stats_of(x, x->comm, &before);
      if ((r = ncclReduceScatter(x->a, recv, n, dt, op, x->comm, x->s)) != ncclSuccess) {
        fail(C_RS, x->rank, "ncclReduceScatter(%zu %s) returned %s: %s", n, iris_nccl_type_name(dt), ncclGetErrorString(r), ncclGetLastError(x->comm));
        return;
      }
      check_route(x, IRIS_NCCL_RS, n, dt, op, &before, __LINE__);
      bad = count_bad<T>(x, recv, n, (size_t)x->rank * n, reduce_expect(op, seed, 0, 0, tol));
      if (bad) fail(C_RS, x->rank, "reduce-scatter %zu %s %s %s: %llu elements wrong", n, iris_nccl_type_name(dt), iris_nccl_op_name(op), inplace ? "in place" : "", bad);
    }
  }
}

static void test_broadcast(rank_ctx_t *x) {
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    const size_t n = counts[ci];
    for (int root = 0; root < W; root++)
      for (int inplace = 0; inplace < 2; inplace++) {
        iris_nccl_stats_t before;
        const int seed = (int)ci + root;
        unsigned long long bad;
        ncclResult_t r;
        fill<float>(x, inplace ? x->b : x->a, n, 0, x->rank, seed, 0); /* only the root's counts */
        stats_of(x, x->comm, &before);
        r = inplace ? ncclBcast(x->b, n, ncclFloat32, root, x->comm, x->s) : ncclBroadcast(x->a, x->b, n, ncclFloat32, root, x->comm, x->s);
        if (r != ncclSuccess) {
          fail(C_BC, x->rank, "broadcast(%zu, root %d) returned %s: %s", n, root, ncclGetErrorString(r), ncclGetLastError(x->comm));
          return;
        }
        check_route(x, IRIS_NCCL_BC, n, ncclFloat32, ncclSum, &before, __LINE__);
        bad = count_bad<float>(x, x->b, n, 0, copy_expect(root, seed, 0));
        if (bad) fail(C_BC, x->rank, "broadcast %zu fp32 root %d %s: %llu elements wrong", n, root, inplace ? "(ncclBcast)" : "", bad);
      }
  }
}

static void test_alltoall(rank_ctx_t *x) {
  /* 1000 per peer: iris under the default table; 300000 per peer (1.2 MB per peer): NCCL */
  const size_t ns[2] = {1000, 300000};
  for (int k = 0; k < 2; k++) {
    const size_t n = ns[k];
    iris_nccl_stats_t before;
    unsigned long long bad = 0;
    /* send_r[p*n + i] = val(p*n + i, r): recv[p*n + i] = val(rank*n + i, p) */
    fill<int32_t>(x, x->a, n * W, 0, x->rank, 7 + k, 0);
    stats_of(x, x->comm, &before);
    if (ncclAlltoAll(x->a, x->b, n, ncclInt32, x->comm, x->s) != ncclSuccess) {
      fail(C_A2A, x->rank, "ncclAlltoAll of %zu per peer failed: %s", n, ncclGetLastError(x->comm));
      return;
    }
    check_route(x, IRIS_NCCL_A2A, n, ncclInt32, ncclSum, &before, __LINE__);
    for (int p = 0; p < W; p++) bad += count_bad<int32_t>(x, x->b + (size_t)p * n * 4, n, (size_t)x->rank * n, copy_expect(p, 7 + k, 0));
    if (bad) fail(C_A2A, x->rank, "all-to-all of %zu per peer: %llu elements wrong", n, bad);
  }
}

static void test_group(rank_ctx_t *x) {
  const size_t n = 4096;
  unsigned long long bad = 0;
  const int next = (x->rank + 1) % W, prev = (x->rank + W - 1) % W;
  fill<float>(x, x->a, n, 0, x->rank, 11, 0);               /* all-reduce input (in place in a) */
  fill<float>(x, x->b + (size_t)x->rank * n * 4, n, 0, x->rank, 12, 0); /* all-gather, in place in b */
  fill<float>(x, x->c, n, 0, x->rank, 13, 0);               /* the ring's send */
  ncclGroupStart();
  ncclAllReduce(x->a, x->a, n, ncclFloat32, ncclSum, x->comm, x->s);
  ncclAllGather(x->b + (size_t)x->rank * n * 4, x->b, n, ncclFloat32, x->comm, x->s);
  ncclSend(x->c, n, ncclFloat32, next, x->comm, x->s);
  ncclRecv(x->c + n * 4, n, ncclFloat32, prev, x->comm, x->s);
  if (ncclGroupEnd() != ncclSuccess) {
    fail(C_GROUP, x->rank, "ncclGroupEnd failed: %s", ncclGetLastError(x->comm));
    return;
  }
  bad += count_bad<float>(x, x->a, n, 0, reduce_expect(ncclSum, 11, 0, 0, 0));
  for (int p = 0; p < W; p++) bad += count_bad<float>(x, x->b + (size_t)p * n * 4, n, 0, copy_expect(p, 12, 0));
  bad += count_bad<float>(x, x->c + n * 4, n, 0, copy_expect(prev, 13, 0));
  if (bad) fail(C_GROUP, x->rank, "%llu elements wrong", bad);
}

static void test_graph(rank_ctx_t *x) {
  const size_t n = 1024, nb = 16384;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  if (cudaStreamBeginCapture(x->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    fail(C_GRAPH, x->rank, "cudaStreamBeginCapture failed");
    return;
  }
  ncclAllReduce(x->a, x->a, n, ncclFloat32, ncclSum, x->comm, x->s);
  ncclAllGather(x->b + (size_t)x->rank * n * 4, x->b, n, ncclFloat32, x->comm, x->s);
  ncclBroadcast(x->c, x->c + nb * 4, nb, ncclFloat32, W - 1, x->comm, x->s);
  if (cudaStreamEndCapture(x->s, &g) != cudaSuccess || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
    fail(C_GRAPH, x->rank, "capture or instantiation failed: %s", ncclGetLastError(x->comm));
    return;
  }
  for (int rep = 0; rep < 5; rep++) {
    unsigned long long bad = 0;
    fill<float>(x, x->a, n, 0, x->rank, 20 + rep, 0);
    fill<float>(x, x->b + (size_t)x->rank * n * 4, n, 0, x->rank, 30 + rep, 0);
    fill<float>(x, x->c, nb, 0, x->rank, 40 + rep, 0);
    if (cudaGraphLaunch(ge, x->s) != cudaSuccess) {
      fail(C_GRAPH, x->rank, "cudaGraphLaunch failed");
      break;
    }
    bad += count_bad<float>(x, x->a, n, 0, reduce_expect(ncclSum, 20 + rep, 0, 0, 0));
    for (int p = 0; p < W; p++) bad += count_bad<float>(x, x->b + (size_t)p * n * 4, n, 0, copy_expect(p, 30 + rep, 0));
    bad += count_bad<float>(x, x->c + nb * 4, nb, 0, copy_expect(W - 1, 40 + rep, 0));
    if (bad) {
      fail(C_GRAPH, x->rank, "replay %d: %llu elements wrong", rep, bad);
      break;
    }
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
}

/* after the all-to-all, b[p*n + i] = val(rank*n + i, p); the all-reduce of b sums that over
 * the ranks: sum over q of val(q*n + i, p): expected as an all-reduce over the index q*n+i */
__global__ void mixed_check_k(const float *b, size_t n, int W_, unsigned long long *bad) {
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n * W_; j += (size_t)gridDim.x * blockDim.x) {
    size_t p = j / n, i = j % n;
    double want = 0;
    for (int q = 0; q < W_; q++) want += val((size_t)q * n + i, (int)p, 9, 0);
    if (b[j] != (float)want) atomicAdd(bad, 1ull);
  }
}
static void test_mixed(rank_ctx_t *x) {
  const size_t n = 262144, big = (size_t)4 << 20; /* all-to-all: 1 MiB per peer, above the table's 1 MiB send */
  unsigned long long bad = 0;
  fill<float>(x, x->a, n * W, 0, x->rank, 9, 0);
  fill<float>(x, x->c, big, 0, x->rank, 14, 0);
  if (ncclAlltoAll(x->a, x->b, n, ncclFloat32, x->comm, x->s) != ncclSuccess ||       /* NCCL */
      ncclAllReduce(x->b, x->b, n * W, ncclFloat32, ncclSum, x->comm, x->s) != ncclSuccess || /* iris */
      ncclAllReduce(x->c, x->c, big, ncclFloat32, ncclSum, x->comm, x->s) != ncclSuccess) { /* 16 MiB: NCCL */
    fail(C_MIXED, x->rank, "a call failed: %s", ncclGetLastError(x->comm));
    return;
  }
  cudaMemsetAsync(x->bad, 0, sizeof *x->bad, x->s);
  mixed_check_k<<<256, 256, 0, x->s>>>((const float *)x->b, n, W, x->bad);
  cudaMemcpyAsync(&bad, x->bad, sizeof bad, cudaMemcpyDeviceToHost, x->s);
  cudaStreamSynchronize(x->s);
  bad += count_bad<float>(x, x->c, big, 0, reduce_expect(ncclSum, 14, 0, 0, 0));
  if (bad) fail(C_MIXED, x->rank, "%llu elements wrong", bad);
}

static void test_split(rank_ctx_t *x, ncclComm_t *child) {
  const int color = W >= 4 ? x->rank % 2 : 0, members = W >= 4 ? (W + 1 - color) / 2 : W;
  const size_t n = 65536;
  iris_nccl_stats_t s;
  expect_t e = reduce_expect(ncclSum, 17, 0, 0, 0);
  unsigned long long bad;
  ncclResult_t r = ncclCommSplit(x->comm, color, x->rank, child, NULL);
  if (r != ncclSuccess || !*child) {
    fail(C_SPLIT, x->rank, "ncclCommSplit returned %s", ncclGetErrorString(r));
    return;
  }
  stats_of(x, *child, &s);
  if (x->stats && !expect_nccl && (!s.iris || s.world != members)) fail(C_SPLIT, x->rank, "child: iris %d, world %d (want %d): %s", s.iris, s.world, members, s.why);
  fill<float>(x, x->a, n, 0, x->rank, 17, 0);
  if (ncclAllReduce(x->a, x->b, n, ncclFloat32, ncclSum, *child, x->s) != ncclSuccess) {
    fail(C_SPLIT, x->rank, "all-reduce on the child failed: %s", ncclGetLastError(*child));
    return;
  }
  e.first = W >= 4 ? color : 0;
  e.stride = W >= 4 ? 2 : 1;
  e.count = members;
  bad = count_bad<float>(x, x->b, n, 0, e);
  if (bad) fail(C_SPLIT, x->rank, "child all-reduce: %llu elements wrong", bad);
}

static void rank_body(rank_ctx_t *x) {
  iris_nccl_stats_t s;
  ncclComm_t child = NULL;
  int c;
  for (c = 0; c < C_COUNT; c++) __atomic_fetch_add(&sh->ran[c], 1, __ATOMIC_SEQ_CST);
  x->stats = (iris_nccl_stats_fn)dlsym(RTLD_DEFAULT, "iris_nccl_stats");
  cudaStreamCreateWithFlags(&x->s, cudaStreamNonBlocking);
  if (cudaMalloc(&x->a, MAXB) != cudaSuccess || cudaMalloc(&x->b, MAXB) != cudaSuccess || cudaMalloc(&x->c, MAXB) != cudaSuccess ||
      cudaMalloc(&x->bad, sizeof *x->bad) != cudaSuccess) {
    fail(C_INIT, x->rank, "cudaMalloc failed");
    return;
  }
  stats_of(x, x->comm, &s);
  if (x->stats && !expect_nccl && !s.iris) fail(C_INIT, x->rank, "no iris context: %s", s.why);
  if (x->stats && expect_nccl && s.iris) fail(C_INIT, x->rank, "an iris context although every call must go to NCCL");
  { /* NCCL_SHIM_TEST_EXPECT_CTAS=n: the CTA cap the ranks agreed on (NCCL_MAX_CTAS, set per rank by NCCL_SHIM_TEST_MAX_CTAS in procs mode) */
    const char *want = getenv("NCCL_SHIM_TEST_EXPECT_CTAS");
    if (x->stats && !expect_nccl && s.iris && want && s.ctas != atoi(want))
      fail(C_INIT, x->rank, "the agreed CTA cap is %d, not %s (iris_nccl_stats ctas)", s.ctas, want);
  }
  if (!x->stats && !expect_nccl) fail(C_INIT, x->rank, "the program runs on the real NCCL (no iris_nccl_stats); set NCCL_SHIM_TEST_EXPECT=nccl");

  test_allreduce<float>(x, ncclFloat32, ncclSum, 0, 0, 0, C_AR);
  test_allreduce<float>(x, ncclFloat32, ncclMax, 0, 0, 0, C_AR);
  test_allreduce<float>(x, ncclFloat32, ncclMin, 0, 0, 0, C_AR);
  test_allreduce<float>(x, ncclFloat32, ncclAvg, 0, 0, 1e-6, C_AR);
  test_allreduce<__nv_bfloat16>(x, ncclBfloat16, ncclSum, 0, 0, 0, C_AR);
  test_allreduce<__nv_bfloat16>(x, ncclBfloat16, ncclAvg, 0, 0, 1e-2, C_AR);
  test_allreduce<__nv_bfloat16>(x, ncclBfloat16, ncclMax, 0, 0, 0, C_AR);
  test_allreduce<__half>(x, ncclFloat16, ncclSum, 0, 0, 0, C_AR);
  test_allreduce<__half>(x, ncclFloat16, ncclMin, 0, 0, 0, C_AR);
  test_allreduce<int32_t>(x, ncclInt32, ncclSum, 0, 1, 0, C_AR);
  test_allreduce<int32_t>(x, ncclInt32, ncclAvg, 0, 1, 0, C_AR);
  test_allreduce<int32_t>(x, ncclInt32, ncclMax, 0, 1, 0, C_AR);
  test_allreduce<int64_t>(x, ncclInt64, ncclSum, 0, 1, 0, C_AR);
  test_allreduce<int64_t>(x, ncclInt64, ncclMin, 0, 1, 0, C_AR);
  test_allreduce<uint8_t>(x, ncclUint8, ncclSum, 0, 1, 0, C_AR);
  test_allreduce<uint8_t>(x, ncclUint8, ncclMax, 0, 1, 0, C_AR);
  test_allreduce<__nv_fp8_e4m3>(x, ncclFloat8e4m3, ncclSum, 1, 0, 0, C_AR);
  test_allreduce<__nv_fp8_e5m2>(x, ncclFloat8e5m2, ncclMax, 1, 0, 0, C_AR);
  test_allreduce<int8_t>(x, ncclInt8, ncclSum, 0, 1, 0, C_AR);
  test_allreduce<uint32_t>(x, ncclUint32, ncclSum, 0, 1, 0, C_AR);
  test_allreduce<float>(x, ncclFloat32, ncclProd, 0, 0, 0, C_FALLBACK);
  test_allreduce<double>(x, ncclFloat64, ncclSum, 0, 0, 0, C_FALLBACK);
  test_allreduce<int8_t>(x, ncclInt8, ncclMax, 0, 1, 0, C_FALLBACK);
  test_allreduce<uint64_t>(x, ncclUint64, ncclMin, 0, 1, 0, C_FALLBACK);
  test_allgather<uint8_t>(x, ncclUint8);
  test_allgather<__half>(x, ncclFloat16);
  test_allgather<float>(x, ncclFloat32);
  test_allgather<double>(x, ncclFloat64);
  test_reducescatter<float>(x, ncclFloat32, ncclSum, 0);
  test_reducescatter<float>(x, ncclFloat32, ncclMax, 0);
  test_reducescatter<__nv_bfloat16>(x, ncclBfloat16, ncclSum, 0);
  test_reducescatter<int32_t>(x, ncclInt32, ncclSum, 0);
  test_broadcast(x);
  test_alltoall(x);
  test_group(x);
  test_graph(x);
  test_mixed(x);
  test_split(x, &child);
  if (x->keep) { /* the main thread destroys every communicator, one after another */
    x->child = child;
  } else {
    /* ranks of one process: rank 0 destroys the child first and goes on to a call of the
     * parent, the others make that call first and destroy the child after it; NCCL takes
     * both orders (its last destroy among a process's ranks frees them all), so must the
     * shim (a first teardown that freed every rank's context deadlocked here: rank 1's GPU
     * was busy in the parent's call, waiting for rank 0) */
    const int first = !x->threads || x->rank == 0;
    if (first && child && ncclCommDestroy(child) != ncclSuccess) fail(C_DESTROY, x->rank, "ncclCommDestroy(child) failed");
    if (x->threads) {
      const size_t n = 262144;
      fill<float>(x, x->a, n, 0, x->rank, 23, 0);
      if (ncclAllReduce(x->a, x->b, n, ncclFloat32, ncclSum, x->comm, x->s) != ncclSuccess)
        fail(C_DESTROY, x->rank, "the parent's all-reduce between the child's destroys failed: %s", ncclGetLastError(x->comm));
      else if (unsigned long long bad = count_bad<float>(x, x->b, n, 0, reduce_expect(ncclSum, 23, 0, 0, 0)))
        fail(C_DESTROY, x->rank, "the parent's all-reduce between the child's destroys: %llu elements wrong", bad);
    }
    if (!first && child && ncclCommDestroy(child) != ncclSuccess) fail(C_DESTROY, x->rank, "ncclCommDestroy(child) failed");
    if (ncclCommDestroy(x->comm) != ncclSuccess) fail(C_DESTROY, x->rank, "ncclCommDestroy failed");
    stats_of(x, x->comm, &s);
    if (x->stats && (s.iris || s.served[0])) fail(C_DESTROY, x->rank, "the shim still knows the destroyed communicator");
  }
  cudaFree(x->a);
  cudaFree(x->b);
  cudaFree(x->c);
  cudaFree(x->bad);
  cudaStreamDestroy(x->s);
}

/* ------------------------------------------------------------------- launchers == */
typedef struct thread_arg {
  int rank, mode;
  ncclComm_t comm, child; /* mode 2: what the main thread destroys */
} thread_arg_t;
static void *thread_main(void *p) {
  thread_arg_t *a = (thread_arg_t *)p;
  rank_ctx_t x;
  memset(&x, 0, sizeof x);
  x.rank = a->rank;
  cudaSetDevice(a->rank);
  if (a->mode == 0) { /* as nccl-tests: InitRank inside a group; the bring-up runs at the group end */
    ncclResult_t r1 = ncclGroupStart(), r2 = ncclCommInitRank(&a->comm, W, sh->id, a->rank), r3 = ncclGroupEnd();
    if (r1 != ncclSuccess || r2 != ncclSuccess || r3 != ncclSuccess) {
      fail(C_INIT, a->rank, "ncclCommInitRank in a group failed: %s", ncclGetLastError(NULL));
      return NULL;
    }
  }
  x.comm = a->comm;
  x.keep = a->mode == 2;
  x.threads = 1;
  rank_body(&x);
  a->child = x.child;
  return NULL;
}
/* ------------------------------------------------------------------ memalloc mode == */
#define MEM_BLOCK ((size_t)8 << 20)
#ifndef NCCL_WIN_COLL_SYMMETRIC
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#endif

/* what the shim must have done with one call on these buffers: served by iris where the
 * agreed table sends it, zero-copy (want_zc) or staged */
static void check_mem_route(rank_ctx_t *x, int c, int kind, size_t count, ncclDataType_t dt, ncclRedOp_t op, const iris_nccl_stats_t *before, int want_zc,
                            int line) {
  iris_nccl_stats_t after;
  iris_nccl_table_t t;
  iris_dtype_t it;
  iris_redop_t io;
  unsigned long long bytes, served, zc;
  int want_iris;
  stats_of(x, x->comm, &after);
  memcpy(t.max_bytes, after.max_bytes, sizeof t.max_bytes);
  want_iris = after.iris && iris_nccl_route(kind, &t, W, count, dt, op, &it, &io, &bytes) == IRIS_NCCL_ROUTE_IRIS;
  served = after.served[kind] - before->served[kind];
  zc = after.zero_copy[kind] - before->zero_copy[kind];
  if (served != (unsigned long long)want_iris || zc != (unsigned long long)(want_iris && want_zc))
    fail(c, x->rank, "line %d: %s of %zu %s: expected %s, got served +%llu, zero-copy +%llu", line, iris_nccl_kind_names[kind], count, iris_nccl_type_name(dt),
         want_iris ? (want_zc ? "iris, zero-copy" : "iris, staged") : "NCCL", served, zc);
}
/* ranks arrive at different times; every other call on the second stream */
static void skew(rank_ctx_t *x, int it) {
  if ((it + x->rank) % 3 == 0) usleep(300 + 200 * x->rank);
}
#define MEM_CALL(c, call)                                                                                 \
  do {                                                                                                    \
    ncclResult_t r_ = (call);                                                                             \
    if (r_ != ncclSuccess) {                                                                              \
      fail(c, x->rank, "line %d: %s returned %s: %s", __LINE__, #call, ncclGetErrorString(r_), ncclGetLastError(x->comm)); \
      return;                                                                                             \
    }                                                                                                     \
  } while (0)

static const size_t mem_counts[] = {1, 3, 1000, 65543, 262144, 1048576};

/* all-reduce, out of place a -> b (b poisoned) and in place in b; buffers of cap bytes.
 * quick: bit 0 fewer counts, bit 1 out of place only */
template <typename T>
static void mem_allreduce(rank_ctx_t *x, int c, char *a, char *b, size_t cap, int want_zc, ncclDataType_t dt, ncclRedOp_t op, int quick) {
  int it = 0;
  for (size_t ci = 0; ci < sizeof mem_counts / sizeof mem_counts[0]; ci += (quick & 1) ? 2 : 1) {
    const size_t n = mem_counts[ci];
    if (n * sizeof(T) > cap) continue;
    for (int inplace = 0; inplace < ((quick & 2) ? 1 : 2); inplace++, it++) {
      const int seed = 50 + (int)ci + 7 * inplace + op;
      cudaStream_t keep = x->s;
      iris_nccl_stats_t before;
      unsigned long long bad;
      char *send = inplace ? b : a;
      if (it & 1) x->s = x->s2;
      if (!inplace) cudaMemsetAsync(b, 0xff, n * sizeof(T), x->s);
      fill<T>(x, send, n, 0, x->rank, seed, 0);
      cudaStreamSynchronize(x->s);
      skew(x, it);
      stats_of(x, x->comm, &before);
      TRACE(x, "mem all-reduce");
      ncclResult_t r = ncclAllReduce(send, b, n, dt, op, x->comm, x->s);
      if (r != ncclSuccess) {
        x->s = keep;
        fail(c, x->rank, "ncclAllReduce(%zu %s) returned %s: %s", n, iris_nccl_type_name(dt), ncclGetErrorString(r), ncclGetLastError(x->comm));
        return;
      }
      check_mem_route(x, c, IRIS_NCCL_AR, n, dt, op, &before, want_zc, __LINE__);
      bad = count_bad<T>(x, b, n, 0, reduce_expect(op, seed, 0, 0, 0));
      x->s = keep;
      if (bad) fail(c, x->rank, "all-reduce %zu %s %s%s: %llu elements wrong", n, iris_nccl_type_name(dt), iris_nccl_op_name(op), inplace ? " in place" : "", bad);
    }
  }
}
/* all-gather of fp32, out of place a -> b and in place in b */
static void mem_allgather(rank_ctx_t *x, int c, char *a, char *b, size_t cap, int want_zc, int quick) {
  int it = 0;
  for (size_t ci = 0; ci < sizeof mem_counts / sizeof mem_counts[0]; ci += quick ? 2 : 1) {
    const size_t n = mem_counts[ci];
    if (n * 4 * W > cap) continue;
    for (int inplace = 0; inplace < 2; inplace++, it++) {
      const int seed = 60 + (int)ci + inplace;
      cudaStream_t keep = x->s;
      iris_nccl_stats_t before;
      unsigned long long bad = 0;
      char *send = inplace ? b + (size_t)x->rank * n * 4 : a;
      if (it & 1) x->s = x->s2;
      cudaMemsetAsync(b, 0xff, n * 4 * W, x->s);
      fill<float>(x, send, n, 0, x->rank, seed, 0);
      cudaStreamSynchronize(x->s);
      skew(x, it);
      stats_of(x, x->comm, &before);
      TRACE(x, "mem all-gather");
      ncclResult_t r = ncclAllGather(send, b, n, ncclFloat32, x->comm, x->s);
      if (r != ncclSuccess) {
        x->s = keep;
        fail(c, x->rank, "ncclAllGather(%zu) returned %s: %s", n, ncclGetErrorString(r), ncclGetLastError(x->comm));
        return;
      }
      check_mem_route(x, c, IRIS_NCCL_AG, n, ncclFloat32, ncclSum, &before, want_zc, __LINE__);
      for (int p = 0; p < W; p++) bad += count_bad<float>(x, b + (size_t)p * n * 4, n, 0, copy_expect(p, seed, 0));
      x->s = keep;
      if (bad) fail(c, x->rank, "all-gather %zu fp32%s: %llu elements wrong", n, inplace ? " in place" : "", bad);
    }
  }
}
/* reduce-scatter of fp32 sums, out of place a -> b and in place (recv = a + rank * n) */
static void mem_reducescatter(rank_ctx_t *x, int c, char *a, char *b, size_t cap, int want_zc, int quick) {
  int it = 0;
  for (size_t ci = 0; ci < sizeof mem_counts / sizeof mem_counts[0]; ci += quick ? 2 : 1) {
    const size_t n = mem_counts[ci];
    if (n * 4 * W > cap) continue;
    for (int inplace = 0; inplace < 2; inplace++, it++) {
      const int seed = 70 + (int)ci + 2 * inplace;
      cudaStream_t keep = x->s;
      iris_nccl_stats_t before;
      unsigned long long bad;
      char *recv = inplace ? a + (size_t)x->rank * n * 4 : b;
      if (it & 1) x->s = x->s2;
      fill<float>(x, a, n * W, 0, x->rank, seed, 0);
      if (!inplace) cudaMemsetAsync(b, 0xff, n * 4, x->s);
      cudaStreamSynchronize(x->s);
      skew(x, it);
      stats_of(x, x->comm, &before);
      TRACE(x, "mem reduce-scatter");
      ncclResult_t r = ncclReduceScatter(a, recv, n, ncclFloat32, ncclSum, x->comm, x->s);
      if (r != ncclSuccess) {
        x->s = keep;
        fail(c, x->rank, "ncclReduceScatter(%zu) returned %s: %s", n, ncclGetErrorString(r), ncclGetLastError(x->comm));
        return;
      }
      check_mem_route(x, c, IRIS_NCCL_RS, n, ncclFloat32, ncclSum, &before, want_zc, __LINE__);
      bad = count_bad<float>(x, recv, n, (size_t)x->rank * n, reduce_expect(ncclSum, seed, 0, 0, 0));
      x->s = keep;
      if (bad) fail(c, x->rank, "reduce-scatter %zu fp32%s: %llu elements wrong", n, inplace ? " in place" : "", bad);
    }
  }
}
/* broadcast of fp32 from every root: ncclBroadcast a -> b (b poisoned) and ncclBcast in b */
static void mem_broadcast(rank_ctx_t *x, int c, char *a, char *b, size_t cap, int want_zc, int quick) {
  int it = 0;
  for (size_t ci = 0; ci < sizeof mem_counts / sizeof mem_counts[0]; ci += quick ? 3 : 2) {
    const size_t n = mem_counts[ci];
    if (n * 4 > cap) continue;
    for (int root = 0; root < W; root++)
      for (int inplace = 0; inplace < 2; inplace++, it++) {
        const int seed = 80 + (int)ci + root;
        cudaStream_t keep = x->s;
        iris_nccl_stats_t before;
        unsigned long long bad;
        if (it & 1) x->s = x->s2;
        cudaMemsetAsync(b, 0xff, n * 4, x->s);
        fill<float>(x, inplace ? b : a, n, 0, x->rank, seed, 0); /* only the root's counts */
        cudaStreamSynchronize(x->s);
        skew(x, it);
        stats_of(x, x->comm, &before);
        TRACE(x, "mem broadcast");
        ncclResult_t r = inplace ? ncclBcast(b, n, ncclFloat32, root, x->comm, x->s) : ncclBroadcast(a, b, n, ncclFloat32, root, x->comm, x->s);
        if (r != ncclSuccess) {
          x->s = keep;
          fail(c, x->rank, "broadcast(%zu, root %d) returned %s: %s", n, root, ncclGetErrorString(r), ncclGetLastError(x->comm));
          return;
        }
        check_mem_route(x, c, IRIS_NCCL_BC, n, ncclFloat32, ncclSum, &before, want_zc, __LINE__);
        bad = count_bad<float>(x, b, n, 0, copy_expect(root, seed, 0));
        x->s = keep;
        if (bad) fail(c, x->rank, "broadcast %zu fp32 root %d%s: %llu elements wrong", n, root, inplace ? " (ncclBcast)" : "", bad);
      }
  }
}
static void mem_suite(rank_ctx_t *x, int c, char *a, char *b, size_t cap, int want_zc, int quick) {
  mem_allreduce<float>(x, c, a, b, cap, want_zc, ncclFloat32, ncclSum, quick);
  if (!quick) mem_allreduce<__nv_bfloat16>(x, c, a, b, cap, want_zc, ncclBfloat16, ncclMax, quick);
  mem_allgather(x, c, a, b, cap, want_zc, quick);
  mem_reducescatter(x, c, a, b, cap, want_zc, quick);
  mem_broadcast(x, c, a, b, cap, want_zc, quick);
}

/* a graph of zero-copy calls on the windows over a and b (8 MiB each) */
static void mem_graph(rank_ctx_t *x, char *a, char *b) {
  const size_t n_ar = 262144, n_ag = 65536, n_rs = 32768, n_bc = 65536;
  char *ar = a, *ag = b, *rs_send = a + ((size_t)2 << 20), *rs_recv = b + ((size_t)4 << 20), *bc = a + ((size_t)6 << 20);
  iris_nccl_stats_t before, after;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  int k;
  stats_of(x, x->comm, &before);
  TRACE(x, "graph capture");
  if (cudaStreamBeginCapture(x->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    fail(M_GRAPH, x->rank, "cudaStreamBeginCapture failed");
    return;
  }
  ncclAllReduce(ar, ar, n_ar, ncclFloat32, ncclSum, x->comm, x->s);
  ncclAllGather(ag + (size_t)x->rank * n_ag * 4, ag, n_ag, ncclFloat32, x->comm, x->s);
  ncclReduceScatter(rs_send, rs_recv, n_rs, ncclFloat32, ncclSum, x->comm, x->s);
  ncclBcast(bc, n_bc, ncclFloat32, W - 1, x->comm, x->s);
  if (cudaStreamEndCapture(x->s, &g) != cudaSuccess || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
    fail(M_GRAPH, x->rank, "capture or instantiation failed: %s", ncclGetLastError(x->comm));
    return;
  }
  stats_of(x, x->comm, &after);
  for (k = 0; k < 4; k++)
    if (after.served[k] - before.served[k] != 1 || after.zero_copy[k] - before.zero_copy[k] != 1)
      fail(M_GRAPH, x->rank, "captured %s: served +%llu, zero-copy +%llu (want 1, 1)", iris_nccl_kind_names[k], after.served[k] - before.served[k],
           after.zero_copy[k] - before.zero_copy[k]);
  for (int rep = 0; rep < 5; rep++) {
    unsigned long long bad = 0;
    cudaMemsetAsync(ag, 0xff, n_ag * 4 * W, x->s);
    cudaMemsetAsync(rs_recv, 0xff, n_rs * 4, x->s);
    if (x->rank != W - 1) cudaMemsetAsync(bc, 0xff, n_bc * 4, x->s);
    fill<float>(x, ar, n_ar, 0, x->rank, 90 + rep, 0);
    fill<float>(x, ag + (size_t)x->rank * n_ag * 4, n_ag, 0, x->rank, 100 + rep, 0);
    fill<float>(x, rs_send, n_rs * W, 0, x->rank, 110 + rep, 0);
    if (x->rank == W - 1) fill<float>(x, bc, n_bc, 0, x->rank, 120 + rep, 0);
    cudaStreamSynchronize(x->s);
    skew(x, rep);
    TRACE(x, "graph replay");
    if (cudaGraphLaunch(ge, x->s) != cudaSuccess) {
      fail(M_GRAPH, x->rank, "cudaGraphLaunch failed");
      break;
    }
    bad += count_bad<float>(x, ar, n_ar, 0, reduce_expect(ncclSum, 90 + rep, 0, 0, 0));
    for (int p = 0; p < W; p++) bad += count_bad<float>(x, ag + (size_t)p * n_ag * 4, n_ag, 0, copy_expect(p, 100 + rep, 0));
    bad += count_bad<float>(x, rs_recv, n_rs, (size_t)x->rank * n_rs, reduce_expect(ncclSum, 110 + rep, 0, 0, 0));
    bad += count_bad<float>(x, bc, n_bc, 0, copy_expect(W - 1, 120 + rep, 0));
    if (bad) {
      fail(M_GRAPH, x->rank, "replay %d: %llu elements wrong", rep, bad);
      break;
    }
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
}

static void mem_body(rank_ctx_t *x, ncclComm_t *comm_out) {
  iris_nccl_stats_t s;
  char *a = NULL, *b = NULL, *p = NULL, *e = NULL, *k = NULL, *q = NULL;
  ncclWindow_t wa = NULL, wb = NULL, we = NULL, wq = NULL;
  ncclResult_t r;
  int c;
  for (c = M_INIT; c < M_END; c++) __atomic_fetch_add(&sh->ran[c], 1, __ATOMIC_SEQ_CST);
  x->stats = (iris_nccl_stats_fn)dlsym(RTLD_DEFAULT, "iris_nccl_stats");
  if (!x->stats) {
    fail(M_INIT, x->rank, "the program runs on the real NCCL (no iris_nccl_stats)");
    return;
  }
  cudaStreamCreateWithFlags(&x->s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&x->s2, cudaStreamNonBlocking);
  cudaMalloc(&x->bad, sizeof *x->bad);
  TRACE(x, "ncclMemAlloc before any communicator");
  /* before any communicator: the real NCCL's memory */
  if ((r = ncclMemAlloc((void **)&q, (size_t)1 << 20)) != ncclSuccess) fail(M_NCCLMEM, x->rank, "ncclMemAlloc before the communicator: %s", ncclGetErrorString(r));
  {
    TRACE(x, "ncclCommInitRank in a group");
    ncclResult_t r1 = ncclGroupStart(), r2 = ncclCommInitRank(&x->comm, W, sh->id, x->rank), r3 = ncclGroupEnd();
    if (r1 != ncclSuccess || r2 != ncclSuccess || r3 != ncclSuccess) {
      fail(M_INIT, x->rank, "ncclCommInitRank in a group failed: %s", ncclGetLastError(NULL));
      return;
    }
  }
  *comm_out = x->comm;
  stats_of(x, x->comm, &s);
  if (!s.iris) fail(M_INIT, x->rank, "no iris context: %s", s.why);
  if (s.heap_blocks != 0) fail(M_NCCLMEM, x->rank, "the heap lends %llu blocks before any ncclMemAlloc after the bring-up", s.heap_blocks);

  TRACE(x, "ncclMemAlloc and windows");
  /* symmetric: the same blocks in the same order on every rank */
  if (ncclMemAlloc((void **)&a, MEM_BLOCK) != ncclSuccess || ncclMemAlloc((void **)&b, MEM_BLOCK) != ncclSuccess) {
    fail(M_INIT, x->rank, "ncclMemAlloc failed: %s", ncclGetLastError(x->comm));
    return;
  }
  stats_of(x, x->comm, &s);
  if (s.heap_blocks != 2) fail(M_INIT, x->rank, "the heap lends %llu blocks after two ncclMemAlloc (want 2: is IRIS_NCCL_MEMALLOC set?)", s.heap_blocks);
  MEM_CALL(M_WIN, ncclCommWindowRegister(x->comm, a, MEM_BLOCK, &wa, NCCL_WIN_COLL_SYMMETRIC));
  MEM_CALL(M_WIN, ncclCommWindowRegister(x->comm, b, MEM_BLOCK, &wb, NCCL_WIN_COLL_SYMMETRIC));
  stats_of(x, x->comm, &s);
  if (s.windows != 2 || s.windows_zero_copy != 2) fail(M_WIN, x->rank, "windows %d, zero-copy %d (want 2, 2)", s.windows, s.windows_zero_copy);
  mem_suite(x, M_ZC, a, b, MEM_BLOCK, 1, 0);
  mem_graph(x, a, b);

  TRACE(x, "asymmetric blocks");
  /* asymmetric: even ranks allocate a small block first, odd ranks after: the big one
   * lies at another heap offset on half the ranks */
  if (x->rank % 2 == 0) {
    if (ncclMemAlloc((void **)&p, (size_t)64 << 10) != ncclSuccess || ncclMemAlloc((void **)&e, MEM_BLOCK) != ncclSuccess) fail(M_ASYM, x->rank, "ncclMemAlloc failed");
  } else {
    if (ncclMemAlloc((void **)&e, MEM_BLOCK) != ncclSuccess || ncclMemAlloc((void **)&p, (size_t)64 << 10) != ncclSuccess) fail(M_ASYM, x->rank, "ncclMemAlloc failed");
  }
  if (e && p) {
    MEM_CALL(M_ASYM, ncclCommWindowRegister(x->comm, e, MEM_BLOCK, &we, NCCL_WIN_COLL_SYMMETRIC));
    stats_of(x, x->comm, &s);
    if (s.windows != 3 || s.windows_zero_copy != 2 || s.heap_blocks != 4)
      fail(M_ASYM, x->rank, "windows %d, zero-copy %d, heap blocks %llu (want 3, 2, 4)", s.windows, s.windows_zero_copy, s.heap_blocks);
    mem_suite(x, M_ASYM, e, e + MEM_BLOCK / 2, MEM_BLOCK / 2, 0, 0);
    mem_allreduce<float>(x, M_ASYM, p, p, (size_t)64 << 10, 0, ncclFloat32, ncclSum, 1); /* heap memory with no window: staged */
    mem_allreduce<float>(x, M_ASYM, x->c, a, MEM_BLOCK, 0, ncclFloat32, ncclSum, 3);     /* send off the heap, recv windowed: staged */
    MEM_CALL(M_ASYM, ncclCommWindowDeregister(x->comm, we));
    if (ncclMemFree(e) != ncclSuccess || ncclMemFree(p) != ncclSuccess) fail(M_ASYM, x->rank, "ncclMemFree failed");
  }

  /* two communicators: the parent's heap lends; a window of the child over it is staged */
  {
    ncclComm_t child = NULL;
    iris_nccl_stats_t cs0, cs1, ps;
    char *m = NULL;
    ncclWindow_t wm = NULL;
    const size_t n = 65536;
    unsigned long long bad;
    TRACE(x, "ncclCommSplit");
    if (ncclCommSplit(x->comm, 0, x->rank, &child, NULL) != ncclSuccess || !child) {
      fail(M_MULTI, x->rank, "ncclCommSplit failed: %s", ncclGetLastError(x->comm));
    } else {
      stats_of(x, x->comm, &ps);
      if (ncclMemAlloc((void **)&m, (size_t)1 << 20) != ncclSuccess) fail(M_MULTI, x->rank, "ncclMemAlloc failed");
      stats_of(x, x->comm, &s);
      stats_of(x, child, &cs0);
      if (!cs0.iris) fail(M_MULTI, x->rank, "the child has no iris context: %s", cs0.why);
      if (s.heap_blocks != ps.heap_blocks + 1 || cs0.heap_blocks != 0)
        fail(M_MULTI, x->rank, "the block came from the child's heap (parent %llu -> %llu, child %llu)", ps.heap_blocks, s.heap_blocks, cs0.heap_blocks);
      if (m && ncclCommWindowRegister(child, m, (size_t)1 << 20, &wm, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess)
        fail(M_MULTI, x->rank, "ncclCommWindowRegister on the child failed: %s", ncclGetLastError(child));
      stats_of(x, child, &cs0);
      if (cs0.windows != 1 || cs0.windows_zero_copy != 0) fail(M_MULTI, x->rank, "child: windows %d, zero-copy %d (want 1, 0)", cs0.windows, cs0.windows_zero_copy);
      if (m) {
        fill<float>(x, m, n, 0, x->rank, 140, 0);
        if (ncclAllReduce(m, m, n, ncclFloat32, ncclSum, child, x->s) != ncclSuccess) fail(M_MULTI, x->rank, "all-reduce on the child failed: %s", ncclGetLastError(child));
        stats_of(x, child, &cs1);
        if (cs1.served[IRIS_NCCL_AR] != cs0.served[IRIS_NCCL_AR] + 1 || cs1.zero_copy[IRIS_NCCL_AR] != cs0.zero_copy[IRIS_NCCL_AR])
          fail(M_MULTI, x->rank, "child all-reduce: served +%llu, zero-copy +%llu (want 1, 0)", cs1.served[IRIS_NCCL_AR] - cs0.served[IRIS_NCCL_AR],
               cs1.zero_copy[IRIS_NCCL_AR] - cs0.zero_copy[IRIS_NCCL_AR]);
        bad = count_bad<float>(x, m, n, 0, reduce_expect(ncclSum, 140, 0, 0, 0));
        if (bad) fail(M_MULTI, x->rank, "child all-reduce: %llu elements wrong", bad);
      }
      TRACE(x, "child teardown");
      if (wm && ncclCommWindowDeregister(child, wm) != ncclSuccess) fail(M_MULTI, x->rank, "ncclCommWindowDeregister on the child failed");
      TRACE(x, "child: ncclCommDestroy");
      if (ncclCommDestroy(child) != ncclSuccess) fail(M_MULTI, x->rank, "ncclCommDestroy(child) failed");
      TRACE(x, "child: ncclMemFree");
      if (m && ncclMemFree(m) != ncclSuccess) fail(M_MULTI, x->rank, "ncclMemFree failed");
    }
    /* NCCL's last ncclCommDestroy among ranks that share a process frees every one of
     * those ranks' resources (commReclaim: cudaFree on each of their GPUs, which waits for
     * the GPU). A rank that went on to a call of the parent would keep its GPU busy
     * waiting for the destroying rank: a deadlock with NCCL alone, seen here on 2 H200s
     * (each time the rank whose destroy came last stopped in it). So the ranks meet
     * first, as a threaded NCCL program must. */
    TRACE(x, "after the child's teardown: every rank");
    pthread_barrier_wait(&mem_barrier);
  }

  TRACE(x, "deregistered");
  /* deregistered: the same buffers, staged */
  MEM_CALL(M_DEREG, ncclCommWindowDeregister(x->comm, wa));
  MEM_CALL(M_DEREG, ncclCommWindowDeregister(x->comm, wb));
  stats_of(x, x->comm, &s);
  if (s.windows != 0) fail(M_DEREG, x->rank, "%d windows left after deregistering all", s.windows);
  mem_suite(x, M_DEREG, a, b, MEM_BLOCK, 0, 1);

  TRACE(x, "the real NCCL's memory");
  /* the real NCCL's memory: its window is the real NCCL's, calls on it staged */
  if (q) {
    MEM_CALL(M_NCCLMEM, ncclCommWindowRegister(x->comm, q, (size_t)1 << 20, &wq, NCCL_WIN_COLL_SYMMETRIC));
    stats_of(x, x->comm, &s);
    if (s.windows != 0) fail(M_NCCLMEM, x->rank, "the shim keeps a window over the real NCCL's memory");
    mem_allreduce<float>(x, M_NCCLMEM, q, q, (size_t)1 << 20, 0, ncclFloat32, ncclSum, 1);
    MEM_CALL(M_NCCLMEM, ncclCommWindowDeregister(x->comm, wq));
    if (ncclMemFree(q) != ncclSuccess) fail(M_NCCLMEM, x->rank, "ncclMemFree of the real NCCL's block failed");
  }

  /* a block that outlives its communicator */
  if (ncclMemAlloc((void **)&k, (size_t)1 << 20) != ncclSuccess) fail(M_LIFE, x->rank, "ncclMemAlloc failed");
  if (ncclMemFree(a) != ncclSuccess || ncclMemFree(b) != ncclSuccess) fail(M_LIFE, x->rank, "ncclMemFree failed");
  stats_of(x, x->comm, &s);
  if (s.heap_blocks != 1) fail(M_LIFE, x->rank, "heap blocks %llu (want 1)", s.heap_blocks);
  if (k) {
    fill<float>(x, k, 262144, 0, x->rank, 130, 0);
    cudaStreamSynchronize(x->s);
  }
  TRACE(x, "ncclCommDestroy with a block allocated");
  if (ncclCommDestroy(x->comm) != ncclSuccess) fail(M_LIFE, x->rank, "ncclCommDestroy failed");
  *comm_out = NULL;
  if (k) {
    unsigned long long bad = count_bad<float>(x, k, 262144, 0, copy_expect(x->rank, 130, 0));
    if (bad) fail(M_LIFE, x->rank, "%llu elements of the block changed after ncclCommDestroy", bad);
    if (ncclMemFree(k) != ncclSuccess) fail(M_LIFE, x->rank, "ncclMemFree after ncclCommDestroy failed");
  }
  TRACE(x, "done");
  cudaFree(x->bad);
  cudaStreamDestroy(x->s);
  cudaStreamDestroy(x->s2);
}
/* A mode's time limit (NCCL_SHIM_TEST_LIMIT_S, 120 s) ran out: a rank that never ends its
 * steps is a FAIL naming every rank's last step, not a silent timeout (what: more of the
 * line's head, or "") */
static void timeout_report(const char *mode, const char *what) {
  char msg[1024];
  int n = snprintf(msg, sizeof msg, "FAIL: %s %d: not done within the time limit%s; each rank's last step:", mode, W, what);
  for (int r = 0; r < W && r < 64 && n < (int)sizeof msg - 80; r++) {
    const char *w = __atomic_load_n(&last_step[r], __ATOMIC_ACQUIRE);
    n += snprintf(msg + n, sizeof msg - n, " rank %d: %s (line %d);", r, w ? w : "none", __atomic_load_n(&last_line[r], __ATOMIC_RELAXED));
  }
  if (n < (int)sizeof msg - 1) msg[n++] = '\n';
  if (write(1, msg, (size_t)n) < 0) {}
  _exit(1);
}
static void mem_timeout(int) { timeout_report("memalloc", ""); }
static void *mem_thread_main(void *p) {
  thread_arg_t *a = (thread_arg_t *)p;
  rank_ctx_t x;
  memset(&x, 0, sizeof x);
  x.rank = a->rank;
  cudaSetDevice(a->rank);
  cudaMalloc(&x.c, MEM_BLOCK); /* a buffer off the heap */
  mem_body(&x, &a->comm);
  cudaFree(x.c);
  return NULL;
}

/* ------------------------------------------------------------------ bad-root mode == */
static pthread_barrier_t bad_barrier; /* bad-root mode: the rank threads meet between steps */
static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
/* One broadcast of n floats that one rank gets wrong (`bad_rank` passes `bad_root`, or a
 * NULL sendbuff where bad_root is INT_MIN and it is the root): that rank must return
 * ncclInvalidArgument (naming want_text where given), the others ncclSuccess; every
 * rank's stream must be done within 10 s and the call counted as sent to iris on every
 * rank; then the next broadcast (every rank alike) must be exact. */
static void bad_call(rank_ctx_t *x, int c, int c_next, int bcast, int bad_rank, int bad_root, const char *want_text, int seed) {
  const size_t n = 4096; /* 16 KB: the default table sends it to iris */
  const int good_root = 0, mine_bad = x->rank == bad_rank, null_send = bad_root == INT_MIN;
  const int root = mine_bad && !null_send ? bad_root : good_root;
  iris_nccl_stats_t before, after;
  ncclResult_t r;
  cudaError_t ce;
  double t0, dt;
  char text[512] = "";
  __atomic_fetch_add(&sh->ran[c], 1, __ATOMIC_SEQ_CST);
  if (c_next != c) __atomic_fetch_add(&sh->ran[c_next], 1, __ATOMIC_SEQ_CST);
  fill<float>(x, x->a, n, 0, x->rank, seed, 0);
  cudaStreamSynchronize(x->s);
  stats_of(x, x->comm, &before);
  pthread_barrier_wait(&bad_barrier);
  TRACE(x, "the call with a bad argument on one rank");
  t0 = now_s();
  if (bcast) r = ncclBcast(x->a, n, ncclFloat32, root, x->comm, x->s);
  else r = ncclBroadcast(mine_bad && null_send ? NULL : x->a, x->b, n, ncclFloat32, root, x->comm, x->s);
  if (r != ncclSuccess) snprintf(text, sizeof text, "%s", ncclGetLastError(x->comm));
  TRACE(x, "its stream");
  ce = cudaStreamSynchronize(x->s);
  dt = now_s() - t0;
  stats_of(x, x->comm, &after);
  if (mine_bad && r != ncclInvalidArgument) fail(c, x->rank, "the rank with the bad argument got %s, not ncclInvalidArgument", ncclGetErrorString(r));
  if (mine_bad && want_text && !strstr(text, want_text)) fail(c, x->rank, "ncclGetLastError does not name '%s': %.150s", want_text, text);
  if (!mine_bad && r != ncclSuccess) fail(c, x->rank, "a rank whose arguments are good got %s: %.150s", ncclGetErrorString(r), text);
  if (ce != cudaSuccess) fail(c, x->rank, "cudaStreamSynchronize after the call: %s", cudaGetErrorString(ce));
  if (dt > 10.0) fail(c, x->rank, "the call and its stream took %.1f s (a wait for a rank that never came?)", dt);
  if (after.served[IRIS_NCCL_BC] != before.served[IRIS_NCCL_BC] + 1 || after.forwarded[IRIS_NCCL_BC] != before.forwarded[IRIS_NCCL_BC])
    fail(c, x->rank, "routed elsewhere than iris: served %llu->%llu, forwarded %llu->%llu", before.served[IRIS_NCCL_BC], after.served[IRIS_NCCL_BC],
         before.forwarded[IRIS_NCCL_BC], after.forwarded[IRIS_NCCL_BC]);
  pthread_barrier_wait(&bad_barrier);
  { /* the next call, every rank alike: exact */
    const int next_root = 1 % W;
    unsigned long long bad;
    TRACE(x, "the next call");
    fill<float>(x, x->a, n, 0, x->rank, seed + 1, 0);
    cudaMemsetAsync(x->b, 0xff, n * sizeof(float), x->s); /* NaN: an element left unwritten counts */
    if ((r = ncclBroadcast(x->a, x->b, n, ncclFloat32, next_root, x->comm, x->s)) != ncclSuccess) {
      fail(c_next, x->rank, "the next broadcast returned %s: %.150s", ncclGetErrorString(r), ncclGetLastError(x->comm));
      return;
    }
    bad = count_bad<float>(x, x->b, n, 0, copy_expect(next_root, seed + 1, 0));
    if (bad) fail(c_next, x->rank, "the next broadcast: %llu elements wrong", bad);
  }
  pthread_barrier_wait(&bad_barrier);
}
static void bad_timeout(int) { timeout_report("bad-root", " (a rank waits for a peer)"); }
static void *bad_thread_main(void *p) {
  thread_arg_t *a = (thread_arg_t *)p;
  rank_ctx_t x;
  iris_nccl_stats_t s;
  ncclResult_t r, async = ncclSuccess;
  char want[64];
  int ok = 1;
  memset(&x, 0, sizeof x);
  x.rank = a->rank;
  __atomic_fetch_add(&sh->ran[B_INIT], 1, __ATOMIC_SEQ_CST); /* each later check counts the ranks that reach it */
  cudaSetDevice(a->rank);
  x.stats = (iris_nccl_stats_fn)dlsym(RTLD_DEFAULT, "iris_nccl_stats");
  cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking);
  if (cudaMalloc(&x.a, 1 << 20) != cudaSuccess || cudaMalloc(&x.b, 1 << 20) != cudaSuccess || cudaMalloc(&x.bad, sizeof *x.bad) != cudaSuccess) {
    fail(B_INIT, x.rank, "cudaMalloc failed");
    ok = 0;
  }
  TRACE(&x, "ncclCommInitRank");
  if ((r = ncclCommInitRank(&x.comm, W, sh->id, x.rank)) != ncclSuccess) {
    fail(B_INIT, x.rank, "ncclCommInitRank: %s", ncclGetErrorString(r));
    ok = 0;
  }
  if (ok) {
    stats_of(&x, x.comm, &s);
    if (!x.stats || !s.iris) {
      fail(B_INIT, x.rank, "no iris context: %s", x.stats ? s.why : "the program runs on the real NCCL (no iris_nccl_stats)");
      ok = 0;
    }
  }
  /* every rank goes on (or none: each failure above is this rank's; the others would wait
   * in the calls below), so the ranks agree on whether to continue */
  __atomic_fetch_add(&sh->stop, ok ? 0 : 1, __ATOMIC_SEQ_CST);
  pthread_barrier_wait(&bad_barrier);
  if (__atomic_load_n(&sh->stop, __ATOMIC_SEQ_CST)) return NULL;
  { /* a good broadcast first: the path works */
    unsigned long long bad;
    fill<float>(&x, x.a, 4096, 0, x.rank, 50, 0);
    if ((r = ncclBroadcast(x.a, x.b, 4096, ncclFloat32, 0, x.comm, x.s)) != ncclSuccess)
      fail(B_INIT, x.rank, "the first broadcast returned %s: %.150s", ncclGetErrorString(r), ncclGetLastError(x.comm));
    else if ((bad = count_bad<float>(&x, x.b, 4096, 0, copy_expect(0, 50, 0))) != 0)
      fail(B_INIT, x.rank, "the first broadcast: %llu elements wrong", bad);
  }
  pthread_barrier_wait(&bad_barrier);
  snprintf(want, sizeof want, "root %d is outside [0, %d)", W, W);
  bad_call(&x, B_ROOT, B_ROOT_NEXT, 0, W - 1, W, want, 60);
  bad_call(&x, B_BCAST, B_BCAST, 1, 0, -1, "root -1 is outside", 70);
  bad_call(&x, B_NULL_SEND, B_NULL_SEND, 0, 0, INT_MIN, "NULL", 80);
  /* the mismatches are reported now, on every rank; from then on the communicator is in
   * error, as after NCCL's own async error */
  TRACE(&x, "ncclCommGetAsyncError");
  __atomic_fetch_add(&sh->ran[B_ASYNC], 1, __ATOMIC_SEQ_CST);
  if ((r = ncclCommGetAsyncError(x.comm, &async)) != ncclSuccess || async != ncclInvalidUsage)
    fail(B_ASYNC, x.rank, "ncclCommGetAsyncError returned %s, async %s (want ncclInvalidUsage: the mismatch)", ncclGetErrorString(r), ncclGetErrorString(async));
  {
    double t0 = now_s();
    r = ncclAllReduce(x.a, x.b, 1024, ncclFloat32, ncclSum, x.comm, x.s);
    if (r != ncclInvalidUsage || now_s() - t0 > 1.0)
      fail(B_ASYNC, x.rank, "a collective after the reported error returned %s in %.2f s (want ncclInvalidUsage at once)", ncclGetErrorString(r), now_s() - t0);
  }
  cudaStreamSynchronize(x.s);
  pthread_barrier_wait(&bad_barrier);
  TRACE(&x, "ncclCommAbort");
  if ((r = ncclCommAbort(x.comm)) != ncclSuccess) fail(B_ASYNC, x.rank, "ncclCommAbort returned %s", ncclGetErrorString(r));
  TRACE(&x, "done");
  cudaFree(x.a);
  cudaFree(x.b);
  cudaFree(x.bad);
  cudaStreamDestroy(x.s);
  return NULL;
}

static void proc_main(int rank) {
  rank_ctx_t x;
  ncclResult_t r;
  memset(&x, 0, sizeof x);
  x.rank = rank;
  if (rank == 0) {
    if (ncclGetUniqueId(&sh->id) != ncclSuccess) {
      fail(C_INIT, rank, "ncclGetUniqueId failed");
      sh->id_ready = -1;
      return;
    }
    __atomic_store_n(&sh->id_ready, 1, __ATOMIC_RELEASE);
  }
  while (__atomic_load_n(&sh->id_ready, __ATOMIC_ACQUIRE) == 0) usleep(1000);
  if (sh->id_ready < 0) return;
  cudaSetDevice(rank);
  if ((r = ncclCommInitRank(&x.comm, W, sh->id, rank)) != ncclSuccess) {
    fail(C_INIT, rank, "ncclCommInitRank: %s", ncclGetErrorString(r));
    return;
  }
  rank_body(&x);
}

static void seq_timeout(int) { /* the in-turn teardown hung: what nccl-tests' main thread met */
  static const char msg[] = "FAIL: initall-seq: the main thread's teardown of the communicators in turn did not end within 120 s\n";
  if (write(1, msg, sizeof msg - 1) < 0) {}
  _exit(1);
}
static int visible_gpus(void) { /* without touching CUDA (procs fork later) */
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  int n = 0;
  if (v) {
    if (!*v) return 0;
    for (n = 1; *v; v++) n += *v == ',';
    return n;
  }
  FILE *f = popen("nvidia-smi -L 2>/dev/null | grep -c '^GPU'", "r");
  if (f) {
    if (fscanf(f, "%d", &n) != 1) n = 0;
    pclose(f);
  }
  return n;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "threads";
  const char *e = getenv("NCCL_SHIM_TEST_EXPECT");
  int ngpu, c, last, failed = 0, bad_exit = 0;
  W = argc > 2 ? atoi(argv[2]) : 2;
  expect_nccl = e && !strcmp(e, "nccl");
  sh = (shared_t *)mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 2;
  memset(sh, 0, sizeof *sh);
  ngpu = visible_gpus();
  if (W < 2 || ngpu < W) {
    printf("SKIP: nccl shim test %s %d: %d GPU(s) visible; the shim serves one GPU per rank (NCCL refuses two ranks on one)\n", mode, W, ngpu);
    return 0;
  }
  if (!strcmp(mode, "memalloc")) {
    pthread_t t[64];
    thread_arg_t a[64];
    setenv("IRIS_NCCL_MEMALLOC", "64M", 0); /* before the shim reads its settings (the first communicator) */
    signal(SIGALRM, mem_timeout);
    alarm(getenv("NCCL_SHIM_TEST_LIMIT_S") ? (unsigned)atoi(getenv("NCCL_SHIM_TEST_LIMIT_S")) : 120);
    memset(a, 0, sizeof a);
    pthread_barrier_init(&mem_barrier, NULL, (unsigned)W);
    if (ncclGetUniqueId(&sh->id) != ncclSuccess) {
      printf("FAIL: ncclGetUniqueId\n");
      return 1;
    }
    for (int i = 0; i < W; i++) {
      a[i].rank = i;
      pthread_create(&t[i], NULL, mem_thread_main, &a[i]);
    }
    for (int i = 0; i < W; i++) pthread_join(t[i], NULL);
    alarm(0);
  } else if (!strcmp(mode, "bad-root")) {
    pthread_t t[64];
    thread_arg_t a[64];
    if (expect_nccl) {
      printf("SKIP: bad-root %d: the real NCCL's ranks with a good root wait for the one with a bad root (there is nothing of the shim to check)\n", W);
      return 0;
    }
    setenv("IRIS_WAIT_TIMEOUT_MS", "20000", 0); /* before the bring-up: a wait for a rank that never comes fails in 20 s */
    signal(SIGALRM, bad_timeout);
    alarm(getenv("NCCL_SHIM_TEST_LIMIT_S") ? (unsigned)atoi(getenv("NCCL_SHIM_TEST_LIMIT_S")) : 120);
    memset(a, 0, sizeof a);
    pthread_barrier_init(&bad_barrier, NULL, (unsigned)W);
    if (ncclGetUniqueId(&sh->id) != ncclSuccess) {
      printf("FAIL: ncclGetUniqueId\n");
      return 1;
    }
    for (int i = 0; i < W; i++) {
      a[i].rank = i;
      pthread_create(&t[i], NULL, bad_thread_main, &a[i]);
    }
    for (int i = 0; i < W; i++) pthread_join(t[i], NULL);
    alarm(0);
  } else if (!strcmp(mode, "procs")) {
    pid_t pids[64];
    for (int r = 0; r < W; r++)
      if ((pids[r] = fork()) == 0) {
        /* NCCL_SHIM_TEST_MAX_CTAS="16" or "16,16": NCCL_MAX_CTAS of rank 0, 1, ... (the last one
         * for the ranks after it). NCCL 2.28 itself fails with different values on the ranks. */
        const char *caps = getenv("NCCL_SHIM_TEST_MAX_CTAS");
        if (caps && *caps) {
          char item[16] = "";
          const char *p = caps;
          for (int i = 0; i <= r && *p; i++) {
            size_t n = strcspn(p, ",");
            snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item - 1 ? n : sizeof item - 1), p);
            p += n + (p[n] == ',');
          }
          setenv("NCCL_MAX_CTAS", item, 1);
        }
        proc_main(r);
        fflush(stdout);
        _exit(0);
      }
    for (int r = 0; r < W; r++) {
      int st = 0;
      waitpid(pids[r], &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("FAIL: nccl shim test procs %d: rank %d ended with status %d\n", W, r, st);
        bad_exit = 1;
      }
    }
  } else {
    pthread_t t[64];
    thread_arg_t a[64];
    const int seq = !strcmp(mode, "initall-seq"), initall = seq || !strcmp(mode, "initall");
    memset(a, 0, sizeof a);
    if (initall) {
      ncclComm_t comms[64];
      ncclResult_t r = ncclCommInitAll(comms, W, NULL);
      if (r != ncclSuccess) {
        printf("FAIL: ncclCommInitAll(%d): %s\n", W, ncclGetErrorString(r));
        return 1;
      }
      for (int i = 0; i < W; i++) a[i].comm = comms[i];
    } else if (ncclGetUniqueId(&sh->id) != ncclSuccess) {
      printf("FAIL: ncclGetUniqueId\n");
      return 1;
    }
    for (int i = 0; i < W; i++) {
      a[i].rank = i;
      a[i].mode = seq ? 2 : initall;
      pthread_create(&t[i], NULL, thread_main, &a[i]);
    }
    for (int i = 0; i < W; i++) pthread_join(t[i], NULL);
    if (seq) { /* one thread, one communicator after another (children first), under a watchdog */
      iris_nccl_stats_fn stats = (iris_nccl_stats_fn)dlsym(RTLD_DEFAULT, "iris_nccl_stats");
      signal(SIGALRM, seq_timeout);
      alarm(120);
      for (int i = 0; i < W; i++)
        if (a[i].child && ncclCommDestroy(a[i].child) != ncclSuccess) fail(C_DESTROY, i, "ncclCommDestroy(child) failed (main thread)");
      for (int i = 0; i < W; i++) {
        iris_nccl_stats_t st;
        if (ncclCommDestroy(a[i].comm) != ncclSuccess) fail(C_DESTROY, i, "ncclCommDestroy failed (main thread)");
        memset(&st, 0, sizeof st);
        if (stats) stats(a[i].comm, &st);
        if (stats && (st.iris || st.served[0])) fail(C_DESTROY, i, "the shim still knows the destroyed communicator");
      }
      alarm(0);
    }
  }
  {
    const int mem = !strcmp(mode, "memalloc"), bad = !strcmp(mode, "bad-root");
    c = mem ? M_INIT : bad ? B_INIT : 0;
    last = mem ? M_END : bad ? B_END : C_COUNT;
  }
  for (; c < last; c++) {
    if (sh->fails[c]) {
      printf("FAIL: %s %d: %s: %d failure(s), first: %s\n", mode, W, check_names[c], sh->fails[c], sh->why[c]);
      failed = 1;
    } else if (sh->ran[c] < W) {
      printf("FAIL: %s %d: %s: only %d of %d ranks got there\n", mode, W, check_names[c], sh->ran[c], W);
      failed = 1;
    } else {
      printf("PASS: %s %d%s: %s\n", mode, W, expect_nccl ? " (every call to NCCL)" : "", check_names[c]);
    }
  }
  return failed || bad_exit;
}
