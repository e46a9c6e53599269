/* iris.h — multi-GPU symmetric heap: host API (C99 or C++, CUDA or HIP)
 *
 * What it is
 *   One rank per GPU. Every rank allocates one heap of the same size; at init each
 *   heap is mapped into every other rank (CUDA/HIP IPC between processes, peer access
 *   inside one process), so a pointer into the heap can be translated to any rank's
 *   copy and read, written or atomically updated from inside a kernel
 *   (iris_device.h). Heap bases never move after init, so CUDA/HIP graphs that
 *   capture them stay valid.
 *
 * Quick start (one process per GPU, ranks started by any launcher)
 *     #define IRIS_IMPLEMENTATION          // in exactly one translation unit
 *     #include "iris.h"
 *     iris_t *ctx;
 *     if (iris_init(NULL, &ctx) != IRIS_SUCCESS) { puts(iris_error_detail()); return 1; }
 *     float *x;
 *     iris_malloc(ctx, n * sizeof(float), (void **)&x); // same order on every rank
 *     my_kernel<<<g, b>>>(iris_device_context(ctx), x); // see iris_device.h
 *     iris_barrier(ctx);
 *     iris_finalize(ctx);
 *   Rank and world size come from the launcher's environment (IRIS_RANK /
 *   IRIS_WORLD_SIZE first, then torchrun, Open MPI, MPICH/Intel MPI, Slurm's srun: see
 *   iris_launch_env below and docs/launchers.md); all ranks meet at the rendezvous named
 *   by IRIS_RENDEZVOUS, else by the launcher's job id. iris_launch_local() below starts
 *   N ranks on this host.
 *
 *   Compile:  nvcc  -arch=sm_90 -O2 app.cu -o app
 *             hipcc --offload-arch=gfx90a -O2 app.hip -o app
 *             cc -std=c99 -O2 app.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart
 *
 * Three ways to bring ranks up
 *   1. iris_init(cfg, &ctx)  one process per GPU; the library's own rendezvous
 *      (a Unix socket in a private directory, same-user peers only) exchanges handles.
 *   2. iris_init(cfg, &ctx) with cfg.bootstrap set: your allgather and barrier
 *      callbacks (MPI, torch.distributed, ...) carry the exchange instead.
 *   3. iris_init_local(cfg, n, devices, ctxs)  one process drives n GPUs, one
 *      context per GPU, peer access instead of IPC.
 *   Worlds over several hosts (modes 1 with IRIS_RENDEZVOUS=tcp / MASTER_ADDR, and 2):
 *   the heap is mapped within each node, NCCL/RCCL rails join the nodes
 *   (docs/multinode.md).
 *
 * The symmetric-heap contract
 *   iris_malloc is local bookkeeping: no communication. It returns the same offset on
 *   every rank as long as every rank makes the same sequence of iris_malloc/iris_free
 *   calls with the same sizes. Break that and translated pointers point at the wrong
 *   data. iris_heap_verify() checks it collectively; with IRIS_DEBUG defined in the
 *   implementation unit, every iris_barrier() checks it too. Alignment is at least
 *   IRIS_HEAP_ALIGN (256) bytes. Exhaustion returns IRIS_ERROR_OUT_OF_MEMORY and
 *   leaves the heap as it was.
 *
 * Options (define before including; "global" ones must match in every unit)
 *   IRIS_IMPLEMENTATION  emit the function definitions in this unit.
 *   IRIS_STATIC          make every definition static (implies IRIS_IMPLEMENTATION).
 *   IRIS_USE_CUDA / IRIS_USE_HIP  force a vendor (default: HIP under hipcc, else CUDA).
 *   IRIS_MAX_RANKS       (global) ranks a device context can address; default 16.
 *   IRIS_DEBUG           allocation-divergence checks in every barrier; in device
 *                        code, heap bounds checks and trapping waits (iris_device.h).
 *   A C99 unit that defines IRIS_IMPLEMENTATION needs POSIX declarations: include
 *   iris.h first, or compile with -D_GNU_SOURCE (gnu99 and all C++ modes have them).
 *
 * Environment (read by iris_init and iris_launch_local; docs/launchers.md has the rules)
 *   IRIS_RANK, IRIS_WORLD_SIZE [, IRIS_LOCAL_RANK, IRIS_LOCAL_WORLD_SIZE]  this rank and
 *                        the world; else torchrun's, Open MPI's, MPICH/Intel MPI's or
 *                        srun's variables (iris_launch_env); else a world of 1
 *   IRIS_RENDEZVOUS      rendezvous name; else "job-<the launcher's job id>"
 *   IRIS_RENDEZVOUS_DIR  its directory; else $XDG_RUNTIME_DIR/iris, else /tmp/iris-<uid>
 *   IRIS_JOB_TOKEN       job identity of iris_launch_local's ranks (it sets it)
 *   IRIS_DEVICE          this rank's GPU; else local rank % visible GPUs (GPUs may be shared)
 *   IRIS_HEAP_SIZE       heap bytes per rank: digits, optional K/M/G/T, optional iB/B
 *   IRIS_TIMEOUT_MS, IRIS_BARRIER_TIMEOUT_MS, IRIS_LAUNCH_GRACE_MS  bounds in ms
 *   IRIS_HOST_ID         this rank's node identity (else hostname + boot id); ranks
 *                        with different ids form different nodes (docs/multinode.md)
 *   IRIS_RENDEZVOUS=tcp, MASTER_ADDR, MASTER_PORT  the network rendezvous of multi-node
 *                        jobs; IRIS_NCCL_LIBRARY  the NCCL/RCCL to load for the rails
 *   Malformed values are errors naming the variable and its value, never a default.
 *
 * Errors
 *   Every call returns iris_status_t. iris_status_string() names the status;
 *   iris_error_detail() holds this thread's last failure in words: which call failed,
 *   on which rank, with the vendor's or the OS's error text. The library never calls
 *   exit, abort or printf, and never throws.
 *
 * Threads
 *   An iris_t is used by one host thread at a time. In mode 3, iris_barrier() on a
 *   context blocks until one thread per context has called it.
 */
#ifndef IRIS_H
#define IRIS_H

#if defined(IRIS_STATIC) && !defined(IRIS_IMPLEMENTATION)
#define IRIS_IMPLEMENTATION
#endif
#if defined(IRIS_IMPLEMENTATION) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L /* only effective when iris.h is the unit's first include */
#if !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700 /* realpath, S_ISVTX */
#endif
#endif

#define IRIS_VERSION_MAJOR 0
#define IRIS_VERSION_MINOR 2
#define IRIS_VERSION_PATCH 0
#define IRIS_VERSION (IRIS_VERSION_MAJOR * 10000 + IRIS_VERSION_MINOR * 100 + IRIS_VERSION_PATCH)

/* ===================================================================== platform == */
#if defined(IRIS_USE_HIP) && defined(IRIS_USE_CUDA)
#error "iris: define at most one of IRIS_USE_HIP and IRIS_USE_CUDA"
#endif
#if !defined(IRIS_USE_HIP) && !defined(IRIS_USE_CUDA)
#if defined(__HIP__) || defined(__HIPCC__)
#define IRIS_USE_HIP 1
#else
#define IRIS_USE_CUDA 1
#endif
#endif

/* the vendors' headers are not -pedantic clean in C; keep their warnings theirs */
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
#if defined(IRIS_USE_HIP)
#if !defined(__HIP_PLATFORM_AMD__) && !defined(__HIP_PLATFORM_HCC__) && !defined(__HIP_PLATFORM_NVIDIA__)
#define __HIP_PLATFORM_AMD__ /* a plain C compiler needs HIP's platform named */
#endif
#include <hip/hip_runtime_api.h>
#else
#include <cuda_runtime_api.h>
#endif
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic pop
#endif

#include <stddef.h>

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define IRIS_HOST_DEVICE __host__ __device__
#else
#define IRIS_HOST_DEVICE
#endif

#ifndef IRIS_MAX_RANKS
#define IRIS_MAX_RANKS 16
#endif
#define IRIS_HEAP_ALIGN 256
#define IRIS_DEFAULT_HEAP_SIZE ((size_t)1 << 30)
#define IRIS_DEFAULT_TIMEOUT_MS 60000
#define IRIS_DEFAULT_BARRIER_TIMEOUT_MS 600000

#if defined(IRIS_STATIC)
#define IRIS_API static
#else
#define IRIS_API extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ====================================================================== types == */
typedef enum iris_status {
  IRIS_SUCCESS = 0,
  IRIS_ERROR_INVALID_ARGUMENT, /* a NULL, zero or out-of-range argument */
  IRIS_ERROR_INVALID_RANK,     /* a rank outside [0, world_size) */
  IRIS_ERROR_OUT_OF_MEMORY,    /* the symmetric heap (or host memory) is exhausted */
  IRIS_ERROR_NOT_IN_HEAP,      /* a pointer outside the symmetric heap */
  IRIS_ERROR_MISMATCH,         /* ranks disagree: world size, heap size, version, allocations */
  IRIS_ERROR_TIMEOUT,          /* a rank did not arrive in time */
  IRIS_ERROR_GPU,              /* the CUDA/HIP runtime failed */
  IRIS_ERROR_SYSTEM,           /* an OS call failed (socket, fork, ...) */
  IRIS_ERROR_PERMISSION,       /* a peer of another user, or an unsafe rendezvous directory */
  IRIS_ERROR_DIFFERENT_HOST,   /* ranks on different hosts: IPC does not cross hosts */
  IRIS_ERROR_UNSUPPORTED,      /* the request is valid but this build or platform cannot do it */
  IRIS_ERROR_BOOTSTRAP,        /* a user bootstrap callback returned an error */
  IRIS_ERROR_RANK_FAILED,      /* a rank started by iris_launch_local failed */
  IRIS_ERROR_PEER_FAILED,      /* a peer's process died while this rank waited for it */
  IRIS_ERROR_ABORTED,          /* iris_abort was called on this context */
  IRIS_ERROR_IN_USE,           /* the rendezvous name is held by another live job */
  IRIS_STATUS_COUNT
} iris_status_t;

/* Memory order and scope for device atomics (compile-time parameters there). */
typedef enum iris_order { IRIS_ORDER_RELAXED = 0, IRIS_ORDER_ACQUIRE, IRIS_ORDER_RELEASE, IRIS_ORDER_ACQ_REL } iris_order_t;
typedef enum iris_scope { IRIS_SCOPE_BLOCK = 0, IRIS_SCOPE_DEVICE, IRIS_SCOPE_SYSTEM } iris_scope_t;

/* What memory backs the heap. On AMD, memory that a peer's running kernel polls must
 * be fine-grained (the default there) or uncached; coarse-grained is faster for bulk
 * data that is only handed over between kernels. NVIDIA has one kind. */
typedef enum iris_heap_memory {
  IRIS_HEAP_MEMORY_DEFAULT = 0, /* fine-grained on AMD, device memory on NVIDIA */
  IRIS_HEAP_MEMORY_FINE,
  IRIS_HEAP_MEMORY_UNCACHED,
  IRIS_HEAP_MEMORY_COARSE
} iris_heap_memory_t;

/* Bootstrap hooks (bring-up mode 2). Each returns 0 on success.
 *   allgather: every rank passes `bytes` bytes; recv receives world_size * bytes,
 *              rank r's block at offset r * bytes. Collective.
 *   barrier:   returns once every rank has entered it. Collective. */
typedef struct iris_bootstrap {
  void *user;
  int (*allgather)(void *user, const void *send, void *recv, size_t bytes);
  int (*barrier)(void *user);
} iris_bootstrap_t;

/* Configuration. Start from IRIS_CONFIG_INIT; a zero or negative field means
 * "from the environment, else the default". */
typedef struct iris_config {
  size_t struct_size;        /* sizeof(iris_config_t); set by IRIS_CONFIG_INIT */
  int rank;                  /* -1: the launcher's environment (iris_launch_env) */
  int world_size;            /* -1: the launcher's environment (iris_launch_env) */
  int device;                /* -1: IRIS_DEVICE, else local rank % visible devices */
  size_t heap_size;          /* 0: IRIS_HEAP_SIZE ("512M", "2GiB": see below), else 1 GiB; rounded up to 2 MiB */
  const char *rendezvous;    /* NULL: IRIS_RENDEZVOUS, else "job-<launcher's job id>"; a world > 1
                                without either is IRIS_ERROR_INVALID_ARGUMENT */
  const char *rendezvous_dir;/* NULL: IRIS_RENDEZVOUS_DIR, else $XDG_RUNTIME_DIR/iris, else /tmp/iris-<uid> */
  int timeout_ms;            /* bring-up waits; 0: IRIS_TIMEOUT_MS, else 60 s */
  int barrier_timeout_ms;    /* iris_barrier waits; 0: IRIS_BARRIER_TIMEOUT_MS, else 600 s */
  iris_heap_memory_t heap_memory;
  const iris_bootstrap_t *bootstrap; /* non-NULL: mode 2 */
  void *rail_comm;           /* multi-node worlds: this rank's rail communicator (an ncclComm_t of
                                the node count's size whose rank is this rank's node, the ranks of
                                the same local rank on every node); NULL: iris creates one with
                                the NCCL/RCCL it loads at run time. Stays the caller's. */
} iris_config_t;
#define IRIS_CONFIG_INIT {sizeof(iris_config_t), -1, -1, -1, 0, NULL, NULL, 0, 0, IRIS_HEAP_MEMORY_DEFAULT, NULL, NULL}

typedef struct iris iris_t; /* opaque host context, one per rank */

/* The vendor's stream type, for the collectives' host entry points. */
#if defined(IRIS_USE_HIP)
typedef hipStream_t iris_stream_t;
#else
typedef cudaStream_t iris_stream_t;
#endif

/* Device context: passed by value to kernels. rank and world_size are global; the heap
 * is mapped among one node's ranks only: bases[l] is the heap base of the node's local
 * rank l (global rank node * local_size + l) in this process's address space, and
 * bases[local_rank] is this rank's. In a single-node world local_rank == rank,
 * local_size == world_size, node == 0 and num_nodes == 1. Device RMA reaches only the
 * ranks of this node (IRIS_DEBUG traps naming any other rank). Plain data, same layout
 * in C and C++ (IRIS_MAX_RANKS, the most ranks of one node, must agree across units). */
typedef struct iris_device_ctx {
  int rank;
  int world_size;
  unsigned long long heap_size;
  char *bases[IRIS_MAX_RANKS];
  /* The context's fault words, in pinned host memory mapped into the GPU (NULL: none).
   * fault[0]: the first fatal fault (a wait that ran past IRIS_WAIT_TIMEOUT_NS, or
   * iris_abort); once set, every bounded wait of every kernel of this context gives up
   * at its next check. fault[1]: the last collective mismatch (not fatal). Encoding:
   * IRIS_FAULT_* below; iris_get_async_error decodes them on the host. */
  unsigned long long *fault;
  int local_rank, local_size; /* this rank on its node; ranks per node */
  int node, num_nodes;        /* this rank's node, the number of nodes */
} iris_device_ctx_t;

/* Fault word layout: kind << 56 | peer << 48 | site << 32 | call. kind: IRIS_FAULT_*;
 * peer: the rank waited for (0xff: unknown); site: what waited (high byte: the
 * collective kind + 1, 0 for none; low byte: IRIS_SITE_*); call: the collective call
 * number of the context (or 0). */
enum { IRIS_FAULT_NONE = 0, IRIS_FAULT_TIMEOUT = 1, IRIS_FAULT_ABORT = 2, IRIS_FAULT_MISMATCH = 3 };
enum { IRIS_SITE_USER = 0, IRIS_SITE_HEADER, IRIS_SITE_BARRIER, IRIS_SITE_LL, IRIS_SITE_PROGRESS, IRIS_SITE_GEMM, IRIS_SITE_COUNT };
#define IRIS_FAULT_MAKE(kind, peer, site, call)                                                                    \
  (((unsigned long long)(kind) << 56) | ((unsigned long long)((peer) & 0xff) << 48) | ((unsigned long long)((site) & 0xffff) << 32) | \
   (unsigned long long)(unsigned)(call))

/* ============================================================ bring-up, teardown == */

/* Modes 1 and 2. Collective over all ranks: each rank calls it once. Blocks until every
 * rank has mapped every heap of its node (or the timeout passes, naming the ranks that
 * never came). Refuses peers of another user, another job, another world size, heap
 * size, heap memory kind or library version. Worlds over several nodes (hosts, or
 * IRIS_HOST_ID values): the ranks are grouped by node (equal counts, consecutive
 * ranks), the heaps are mapped within each node and one NCCL/RCCL rail communicator
 * per local rank joins the nodes (docs/multinode.md); the exchange is the TCP
 * rendezvous (MASTER_ADDR/MASTER_PORT) or cfg.bootstrap. cfg may be NULL (all defaults). Rank, world size and
 * local rank come from cfg, else from iris_launch_env (its errors are iris_init's).
 * On success this rank's GPU (iris_device) is the calling thread's current device, so
 * kernels launched next run there. On failure *out is NULL, nothing is left allocated
 * and the current device is as before. In mode 2 the callbacks (and cfg.bootstrap->user) must stay valid until
 * iris_finalize: iris_barrier, iris_heap_verify and iris_finalize call them. */
IRIS_API iris_status_t iris_init(const iris_config_t *cfg, iris_t **out);

/* Mode 3: one process, num_gpus GPUs (devices[i] becomes rank i; devices NULL means
 * 0..num_gpus-1). Enables peer access between every pair; fails with
 * IRIS_ERROR_UNSUPPORTED if a pair cannot reach each other. cfg's rank, world_size,
 * device, rendezvous and bootstrap are ignored. out_ctxs receives num_gpus contexts. */
IRIS_API iris_status_t iris_init_local(const iris_config_t *cfg, int num_gpus, const int *devices, iris_t **out_ctxs);

/* Collective. Waits for this rank's GPU work, meets every rank (so no peer still reads
 * this heap), unmaps peers and frees the heap. Releases everything even when the final
 * barrier fails (the status then reports it). A new iris_init may follow in the same
 * process. Mode 3: not a barrier; it waits for every GPU of the group (so no kernel
 * still uses this heap), so one thread may finalize all contexts in turn.
 * The context itself stays behind as a tombstone (sizeof its struct, about 0.4 KB, never
 * freed) so that a later call with it, a second iris_finalize included, returns
 * IRIS_ERROR_INVALID_ARGUMENT ("finalized") instead of touching freed memory; queries
 * on it return -1 / 0 / NULL.
 * On a context with a fatal fault (a peer that died or hangs, iris_abort) it does not
 * meet the others: it waits for this GPU (whose kernels have stopped waiting), unmaps
 * and frees, and returns IRIS_SUCCESS. */
IRIS_API iris_status_t iris_finalize(iris_t *ctx);

/* ================================================================== queries == */
IRIS_API int iris_rank(const iris_t *ctx);
IRIS_API int iris_world_size(const iris_t *ctx);
IRIS_API int iris_device(const iris_t *ctx);      /* the CUDA/HIP device ordinal of this rank */
/* Nodes (docs/multinode.md). A node's ranks are consecutive global ranks: global rank
 * = node * local_size + local rank. Single-node worlds: local rank = rank, local size
 * = world size, node 0 of 1. -1 (0 for the sizes) on a finalized or NULL context. */
IRIS_API int iris_local_rank(const iris_t *ctx);
IRIS_API int iris_local_size(const iris_t *ctx);
IRIS_API int iris_node(const iris_t *ctx);
IRIS_API int iris_num_nodes(const iris_t *ctx);
/* The rail communicator of a multi-node context (an ncclComm_t: the ranks of this local
 * rank on every node, its rank is iris_node), NULL in a single-node world. For the
 * collectives of iris_collectives.h; usable by the caller between iris calls. */
IRIS_API void *iris_rail_comm(const iris_t *ctx);
IRIS_API size_t iris_heap_size(const iris_t *ctx);
IRIS_API size_t iris_heap_used(const iris_t *ctx); /* bytes in live allocations, padding included */
/* Rank r's heap base in this process's address space (NULL for a bad rank, or a rank
 * of another node: heaps are mapped among one node's ranks). */
IRIS_API void *iris_heap_base(const iris_t *ctx, int rank);
/* Plain-data context for kernels (see iris_device.h). Cheap; call once and keep it. */
IRIS_API iris_device_ctx_t iris_device_context(const iris_t *ctx);
/* The same, as the node's own world: rank = local rank, world_size = local size, node 0
 * of 1. For kernels that work within a node and number their peers 0..local size - 1
 * (the tile building blocks, the all-gather + GEMM). Equal to iris_device_context in a
 * single-node world. */
IRIS_API iris_device_ctx_t iris_device_context_node(const iris_t *ctx);
/* A device context over symmetric memory that someone else allocated and mapped: torch's
 * symmetric memory (symm_mem.empty + rendezvous(...).buffer_ptrs), an NCCL window, your
 * own IPC mapping. peers[r] is rank r's buffer as mapped in this process, for r in
 * [0, world_size); every buffer holds `bytes` bytes and is what the ranks agreed to use
 * as their heap (the same layout on every rank). Local: no communication, no allocation;
 * the caller keeps the memory alive and mapped while kernels use the context. Device
 * RMA, signal/wait and the tile building blocks (iris_device.h, iris_collectives.h) then
 * run on it unchanged; the host collectives and iris_malloc need an iris_t and do not.
 * The context has no fault words (fault = NULL): a bounded wait that runs out returns
 * false without recording a fault. Requires 0 <= rank < world_size <= IRIS_MAX_RANKS,
 * bytes > 0, peers non-NULL, every peers[r] non-NULL and peers[rank] this rank's own
 * buffer (the caller's promise; the library cannot tell). On error *out is zeroed and
 * the status says which rule failed. */
IRIS_API iris_status_t iris_device_context_from_peers(int rank, int world_size, size_t bytes, void *const *peers, iris_device_ctx_t *out);

/* ================================================================== the heap == */

/* Local: allocate `bytes` (>= 1) on the symmetric heap, IRIS_HEAP_ALIGN-aligned (offsets
 * are aligned from the heap base, which the vendor allocator aligns to 2 MiB). The
 * content is unspecified (the heap is zeroed once at init; freed memory is reused as
 * it is). Same offsets on every rank under the contract above. */
IRIS_API iris_status_t iris_malloc(iris_t *ctx, size_t bytes, void **ptr);
/* As iris_malloc with a larger power-of-two alignment. */
IRIS_API iris_status_t iris_malloc_aligned(iris_t *ctx, size_t bytes, size_t alignment, void **ptr);
/* As iris_malloc, then zero the block on this rank's GPU (synchronously). Peers see the
 * zeros once a barrier separates them from this call. If the zeroing fails (a GPU
 * error), the block stays allocated and *ptr points at it (content unspecified): the
 * call cannot know whether other ranks failed too, and freeing here alone would move
 * every later offset on this rank only. Handle the error on every rank alike, e.g.
 * iris_free the block everywhere, or give the context up. */
IRIS_API iris_status_t iris_calloc(iris_t *ctx, size_t bytes, void **ptr);
/* Local: return a block from iris_malloc*. IRIS_ERROR_NOT_IN_HEAP for a pointer outside
 * the heap, IRIS_ERROR_INVALID_ARGUMENT for one that is not a live block's start. */
IRIS_API iris_status_t iris_free(iris_t *ctx, void *ptr);
/* Offset of ptr from this rank's heap base; IRIS_ERROR_NOT_IN_HEAP if outside. */
IRIS_API iris_status_t iris_heap_offset(const iris_t *ctx, const void *ptr, size_t *offset);
/* ptr (in this rank's heap) as seen at rank to_rank's copy, in this process's
 * address space; what device code gets from iris_translate. */
IRIS_API iris_status_t iris_translate_host(const iris_t *ctx, const void *ptr, int to_rank, void **out);
/* Collective: check that every rank holds the same live allocations (offset and size).
 * Returns IRIS_ERROR_MISMATCH naming the ranks that diverge from rank 0. In a multi-node
 * world every rank calls it and each node compares its own ranks (local ranks named). */
IRIS_API iris_status_t iris_heap_verify(iris_t *ctx);

/* ============================================================= host collectives == */

/* Collective. Waits for this rank's GPU work (device synchronize), then returns once
 * every rank has entered. Afterwards every rank's GPU writes made before its barrier
 * are visible to every rank. Times out (barrier_timeout_ms) naming missing ranks. */
IRIS_API iris_status_t iris_barrier(iris_t *ctx);
/* Collective, host memory only: recv gets world_size * bytes, rank r's at r * bytes
 * (global ranks, every node). For exchanging small host data (seeds, sizes); every
 * rank passes the same bytes. */
IRIS_API iris_status_t iris_allgather_host(iris_t *ctx, const void *send, void *recv, size_t bytes);

/* ================================================================== errors == */
IRIS_API const char *iris_status_string(iris_status_t status);
/* This thread's last failure in words ("" if none yet). Successful calls leave it as it
 * is: read it right after the call that failed. */
IRIS_API const char *iris_error_detail(void);

/* ==================================================== faults, abort (any thread) == */
/* Non-blocking, thread-safe (a watchdog thread may poll it while another thread uses
 * ctx): the context's fatal fault, if any. IRIS_ERROR_TIMEOUT (a bounded wait on the GPU
 * ran out: names the wait, the rank waited for and the collective call),
 * IRIS_ERROR_PEER_FAILED (the same, and that rank's process is gone),
 * IRIS_ERROR_ABORTED (iris_abort), else a pending collective mismatch
 * (IRIS_ERROR_MISMATCH, reported once and then cleared), else IRIS_SUCCESS. A fatal
 * fault stays: every later call on ctx returns it at once (no launch, no wait) and
 * every wait of a kernel already queued gives up at its next check; the only way on is
 * iris_finalize (which then skips the final barrier) and a new iris_init. */
IRIS_API iris_status_t iris_get_async_error(iris_t *ctx);
/* Any thread, any time: put ctx into the aborted state (a fatal fault, see above):
 * kernels of ctx that wait stop waiting, later calls return IRIS_ERROR_ABORTED at once,
 * and iris_finalize releases everything without meeting the other ranks. For a peer
 * that died or hangs, or to tear the world down from a watchdog. Not collective. */
IRIS_API iris_status_t iris_abort(iris_t *ctx);

/* ================================================================= version == */
/* The IRIS_VERSION (major * 10000 + minor * 100 + patch) that the implementation was
 * compiled with. Any thread, any time, no iris_init needed. A binding that loads a
 * prebuilt library (build/libiris.so) compares it with the IRIS_VERSION of the headers
 * it was built against and refuses a mismatch. */
IRIS_API int iris_get_version(void);
/* sizeof(type_name) in the library, for each public struct that crosses the C ABI
 * ("iris_config_t", "iris_launch_t", "iris_ag_gemm_desc_t", ...; the list is in
 * lib/iris.cu), 0 for any other name. Defined by the shared library only (lib/iris.cu,
 * make lib), not by IRIS_IMPLEMENTATION: a binding compares it with its own layout. */
#if !defined(IRIS_STATIC) /* (no library in a unit that makes everything static) */
IRIS_API size_t iris_abi_struct_size(const char *type_name);
#endif

/* ================================================ the library's own rendezvous == */
/* Bring-up mode 1 uses this; it is public so launchers and tests can use it alone.
 * Rank 0 listens on <dir>/<name>.sock; other ranks connect, retrying until the timeout.
 * The directory (created 0700 by rank 0 if missing) must be a real directory of this
 * user with mode 0700, and every directory above it must belong to root or this user
 * and be writable by nobody else unless sticky (like /tmp); else
 * IRIS_ERROR_PERMISSION, naming IRIS_RENDEZVOUS_DIR as the way out.
 * Jobs: a socket that a live process listens on is never removed: rank 0 finding one
 * returns IRIS_ERROR_IN_USE (naming the name and IRIS_RENDEZVOUS); a stale socket (no
 * listener) is replaced; after bring-up rank 0 unlinks the path only if it is still its
 * own socket. Every hello carries the job token: rank 0 refuses ranks of another job
 * (they keep retrying until their timeout, then report IRIS_ERROR_IN_USE).
 * Peers of another library version, world size or heap size are refused with a message
 * naming them; a process of another user cannot enter the private directory, and a
 * connection from one is dropped and mentioned in rank 0's timeout message. A peer's
 * malformed frame, or an ERROR frame whose status is not an error, is a protocol error
 * (IRIS_ERROR_SYSTEM), never success. */
typedef struct iris_rendezvous iris_rendezvous_t;
typedef struct iris_rendezvous_params {
  const char *name;        /* required; at most 64 characters of [A-Za-z0-9._-] */
  const char *dir;         /* NULL: IRIS_RENDEZVOUS_DIR, else $XDG_RUNTIME_DIR/iris, else /tmp/iris-<uid> */
  int rank, world_size;
  int timeout_ms;          /* every wait inside; > 0 */
  unsigned long long heap_size; /* compared across ranks */
  const char *job;         /* job token (the launcher's job id); NULL = "". Equal on every
                              rank of one job; ranks with another token are refused */
} iris_rendezvous_params_t;
IRIS_API iris_status_t iris_rendezvous_open(const iris_rendezvous_params_t *p, iris_rendezvous_t **out);
/* The same rendezvous over TCP, for worlds that span hosts (torchrun-style): rank 0
 * listens on port `port` of every local address; the others connect to addr:port
 * (a name or a numeric address), retrying until the timeout. p->name only labels
 * messages (p->dir is not used). The hello carries version, world size, heap size and
 * the job token; rank 0 refuses a different version, world size or heap size
 * (IRIS_ERROR_MISMATCH, naming the rank and its host) and a different job
 * (IRIS_ERROR_IN_USE: that rank keeps retrying for ours, then reports it). A port that
 * another process listens on: rank 0 gets IRIS_ERROR_IN_USE naming MASTER_PORT; a
 * port left in TIME_WAIT by an earlier run is reused. Timeouts name the missing ranks
 * (rank 0) or addr:port (the others). No credentials are checked: any process that
 * reaches the port and knows the job token gets in; run it on a trusted network. */
IRIS_API iris_status_t iris_rendezvous_open_tcp(const iris_rendezvous_params_t *p, const char *addr, int port, iris_rendezvous_t **out);
IRIS_API iris_status_t iris_rendezvous_allgather(iris_rendezvous_t *r, const void *send, void *recv, size_t bytes);
IRIS_API iris_status_t iris_rendezvous_barrier(iris_rendezvous_t *r);
IRIS_API void iris_rendezvous_close(iris_rendezvous_t *r);

/* Not for users: the NCCL/RCCL functions iris calls, resolved at run time (dlsym), with
 * nccl.h's ABI (ncclResult_t, ncclDataType_t and ncclRedOp_t are ints; ncclComm_t a
 * pointer). iris_detail_nccl returns the table of a multi-node context, else NULL. */
typedef struct iris_nccl_api {
  const char *(*get_error_string)(int result);
  int (*all_reduce)(const void *send, void *recv, size_t count, int type, int op, void *comm, iris_stream_t stream);
  int (*all_gather)(const void *send, void *recv, size_t count, int type, void *comm, iris_stream_t stream);
  int (*reduce_scatter)(const void *send, void *recv, size_t count, int type, int op, void *comm, iris_stream_t stream);
  int (*broadcast)(const void *send, void *recv, size_t count, int type, int root, void *comm, iris_stream_t stream);
  int (*send)(const void *buf, size_t count, int type, int peer, void *comm, iris_stream_t stream);
  int (*recv)(void *buf, size_t count, int type, int peer, void *comm, iris_stream_t stream);
  int (*group_start)(void);
  int (*group_end)(void);
  int version; /* ncclGetVersion's code (e.g. 22803), 0 if unknown */
} iris_nccl_api_t;
IRIS_API const iris_nccl_api_t *iris_detail_nccl(const iris_t *ctx);
/* Not for users: a per-context slot that iris_collectives.h keeps its state in. */
IRIS_API void iris_detail_set_ext(iris_t *ctx, void *ext, void (*free_fn)(void *));
IRIS_API void *iris_detail_get_ext(const iris_t *ctx);
/* Not for users: the context's fatal fault (IRIS_SUCCESS if none), and the call order of
 * the communication calls across streams (see the implementation). */
IRIS_API iris_status_t iris_detail_check_fault(const iris_t *ctx);
IRIS_API iris_status_t iris_detail_order_begin(iris_t *ctx, iris_stream_t stream);
IRIS_API iris_status_t iris_detail_order_end(iris_t *ctx, iris_stream_t stream);

/* ================================================================= launcher == */
/* Which launcher started this process, read from its environment variables. In
 * precedence order (the first complete set wins; docs/launchers.md has the table):
 *   IRIS_LAUNCHER_IRIS      IRIS_RANK, IRIS_WORLD_SIZE [, IRIS_LOCAL_RANK,
 *                           IRIS_LOCAL_WORLD_SIZE: default rank, world]; job IRIS_JOB_TOKEN
 *   IRIS_LAUNCHER_TORCHRUN  RANK, WORLD_SIZE [, LOCAL_RANK, LOCAL_WORLD_SIZE]; job
 *                           TORCHELASTIC_RUN_ID (+ TORCHELASTIC_RESTART_COUNT, MASTER_PORT)
 *   IRIS_LAUNCHER_OPENMPI   OMPI_COMM_WORLD_RANK, _SIZE [, _LOCAL_RANK, _LOCAL_SIZE];
 *                           job PMIX_NAMESPACE, else OMPI_MCA_ess_base_jobid
 *   IRIS_LAUNCHER_MPICH     PMI_RANK, PMI_SIZE [, MPI_LOCALRANKID, MPI_LOCALNRANKS]
 *                           (MPICH/Hydra, Intel MPI, srun --mpi=pmi2); job PMI_JOBID,
 *                           else I_MPI_HYDRA_UUID
 *   IRIS_LAUNCHER_SLURM     SLURM_PROCID, SLURM_NTASKS [, SLURM_LOCALID], only inside an
 *                           srun step (SLURM_STEP_ID set and not the batch/extern step);
 *                           job SLURM_JOB_ID.SLURM_STEP_ID
 *   IRIS_LAUNCHER_NONE      none of these: rank 0 of a world of 1
 * IRIS_* overrides everything (iris_launch_local's ranks may run inside another
 * launcher). Slurm's set is ignored when torchrun's or an MPI's is present: those
 * launchers run inside Slurm steps and their ranks inherit the step's variables. The
 * torchrun, Open MPI and MPICH sets that are present must agree on the world size. A
 * launcher without a job id of its own falls back to Slurm's job.step when present.
 * Errors (detail names the variables and values; nothing is guessed): a malformed,
 * signed or overflowing number, a world of 0, a set with a rank but no world size (or
 * the reverse) -> IRIS_ERROR_INVALID_ARGUMENT; rank >= world, local rank >= local size
 * -> IRIS_ERROR_INVALID_RANK; a world above IRIS_MAX_RANKS -> IRIS_ERROR_UNSUPPORTED (unless
 * the local size is below the world or IRIS_RENDEZVOUS=tcp: several nodes, up to 65536);
 * two launchers disagreeing -> IRIS_ERROR_MISMATCH. Empty variables count as unset.
 * lookup(user, name) returns a variable's value or NULL; lookup NULL reads getenv. No
 * side effect but the error detail, so it is testable with a table. Local, any thread. */
typedef enum iris_launcher {
  IRIS_LAUNCHER_NONE = 0,
  IRIS_LAUNCHER_IRIS,
  IRIS_LAUNCHER_TORCHRUN,
  IRIS_LAUNCHER_OPENMPI,
  IRIS_LAUNCHER_MPICH,
  IRIS_LAUNCHER_SLURM
} iris_launcher_t;
typedef struct iris_launch_env {
  iris_launcher_t launcher;
  const char *launcher_name; /* "iris", "torchrun", "Open MPI", "MPICH/Intel MPI", "Slurm", "none" */
  int rank, world_size;
  int local_rank;            /* the launcher's, else rank */
  int local_size;            /* the launcher's; 0 if it does not say */
  char job[128];             /* the job id ("" if none); longer ids are hashed to fit */
} iris_launch_env_t;
typedef const char *(*iris_getenv_fn)(void *user, const char *name);
IRIS_API iris_status_t iris_launch_env(iris_getenv_fn lookup, void *user, iris_launch_env_t *out);

/* Start num_ranks copies of this process on this host, fork-style. Call it before any
 * GPU call (CUDA and HIP do not survive fork), from the thread that will call
 * iris_launch_wait (the ranks' parent-death signal follows the forking thread). In each
 * child it returns IRIS_SUCCESS with *my_rank set and IRIS_RANK, IRIS_WORLD_SIZE, a
 * fresh IRIS_RENDEZVOUS and a random IRIS_JOB_TOKEN in the environment, so
 * iris_init(NULL, ...) brings the ranks up. In the parent it returns with
 * *my_rank = -1; the parent then calls iris_launch_wait. Each child is the leader of
 * its own process group and gets SIGTERM when the launcher dies (Linux: parent-death
 * signal, and a check of the parent right after setting it).
 *   num_ranks 0: one rank per visible GPU, counted without touching the GPU runtime
 *   (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES if set, else
 *   the driver's device list); fails if none can be counted. More than IRIS_MAX_RANKS
 *   (or IRIS_LAUNCH_MAX) ranks: IRIS_ERROR_UNSUPPORTED, nothing started.
 *   Already launched: if iris_launch_env finds a launcher, this process is a rank
 *   already: it forks nothing, sets *my_rank from the environment and
 *   launch->num_ranks to 0 (its errors are returned, nothing forked). So one program
 *   runs standalone and under torchrun, srun or mpirun. */
#define IRIS_LAUNCH_MAX 64
typedef struct iris_launch {
  int num_ranks;
  int pids[IRIS_LAUNCH_MAX];
  int exit_codes[IRIS_LAUNCH_MAX]; /* filled by iris_launch_wait; 128+signal if killed */
} iris_launch_t;
IRIS_API iris_status_t iris_launch_local(int num_ranks, iris_launch_t *launch, int *my_rank);
/* Parent only: wait for every rank (timeout_ms <= 0: forever). Ranks still running at
 * the timeout get SIGTERM (to their process group), then SIGKILL after a grace period
 * (IRIS_LAUNCH_GRACE_MS, default 2000 ms). While it waits, SIGINT and SIGTERM sent to
 * this process are forwarded to every running rank (the caller's handlers are restored
 * before it returns); ranks still running a grace period after that are killed.
 * IRIS_ERROR_RANK_FAILED names every rank that exited non-zero or was killed (and the
 * forwarded signal); IRIS_ERROR_TIMEOUT names the ranks that had to be killed. */
IRIS_API iris_status_t iris_launch_wait(iris_launch_t *launch, int timeout_ms);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ============================================================== tile views == */
/* A 2-D row-major view: element (r, c) at ptr + (r * stride + c) * elem_size. Tiles of
 * bm x bn are numbered row-major over the tile grid; edge tiles are partial. Usable
 * on host and device, from C and C++. */
typedef struct iris_view2d {
  void *ptr;
  long long rows, cols;
  long long stride; /* elements between consecutive rows, >= cols */
  int elem_size;    /* bytes per element */
} iris_view2d_t;

static inline IRIS_HOST_DEVICE iris_view2d_t iris_view2d(void *ptr, long long rows, long long cols, long long stride, int elem_size) {
  iris_view2d_t v;
  v.ptr = ptr;
  v.rows = rows;
  v.cols = cols;
  v.stride = stride;
  v.elem_size = elem_size;
  return v;
}
static inline IRIS_HOST_DEVICE long long iris_cdiv(long long a, long long b) { return (a + b - 1) / b; }
static inline IRIS_HOST_DEVICE long long iris_view_tiles_m(iris_view2d_t v, int bm) { return iris_cdiv(v.rows, bm); }
static inline IRIS_HOST_DEVICE long long iris_view_tiles_n(iris_view2d_t v, int bn) { return iris_cdiv(v.cols, bn); }
static inline IRIS_HOST_DEVICE long long iris_view_num_tiles(iris_view2d_t v, int bm, int bn) {
  return iris_view_tiles_m(v, bm) * iris_view_tiles_n(v, bn);
}
/* Tile id -> (tile row, tile column), row-major over the tile grid. */
static inline IRIS_HOST_DEVICE void iris_view_tile_coords(iris_view2d_t v, int bn, long long tile, long long *tm, long long *tn) {
  long long nt = iris_view_tiles_n(v, bn);
  *tm = tile / nt;
  *tn = tile % nt;
}
/* Rows and columns actually present in tile (tm, tn): bm/bn except at the edges. */
static inline IRIS_HOST_DEVICE int iris_view_tile_rows(iris_view2d_t v, int bm, long long tm) {
  long long left = v.rows - tm * bm;
  return (int)(left < bm ? (left > 0 ? left : 0) : bm);
}
static inline IRIS_HOST_DEVICE int iris_view_tile_cols(iris_view2d_t v, int bn, long long tn) {
  long long left = v.cols - tn * bn;
  return (int)(left < bn ? (left > 0 ? left : 0) : bn);
}
static inline IRIS_HOST_DEVICE void *iris_view_elem(iris_view2d_t v, long long r, long long c) {
  return (char *)v.ptr + (r * v.stride + c) * (long long)v.elem_size;
}
/* Sub-view of tile (tm, tn): its origin and its (possibly partial) extent. */
static inline IRIS_HOST_DEVICE iris_view2d_t iris_view_tile(iris_view2d_t v, int bm, int bn, long long tm, long long tn) {
  return iris_view2d(iris_view_elem(v, tm * bm, tn * bn), iris_view_tile_rows(v, bm, tm), iris_view_tile_cols(v, bn, tn), v.stride,
                     v.elem_size);
}

/* ========================================================================= */
/*                              IMPLEMENTATION                               */
/* ========================================================================= */
#if defined(IRIS_IMPLEMENTATION) && !defined(IRIS_IMPLEMENTATION_DONE)
#define IRIS_IMPLEMENTATION_DONE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#if defined(IRIS_STATIC)
#define IRIS_DEF static
#else
#define IRIS_DEF
#endif
#define IRIS_INTERNAL static

#if defined(__cplusplus)
#define IRIS_DETAIL_TLS thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define IRIS_DETAIL_TLS _Thread_local
#else
#define IRIS_DETAIL_TLS __thread
#endif

#ifndef SO_PEERCRED
#define SO_PEERCRED 17 /* Linux */
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* the vendor layer: every runtime call iris makes */
#include "internal/platform.h"

/* ----------------------------------------------------------------------- errors -- */
static IRIS_DETAIL_TLS char iris_detail_errbuf[1024];

IRIS_INTERNAL iris_status_t iris_detail_fail(iris_status_t st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(iris_detail_errbuf, sizeof iris_detail_errbuf, fmt, ap);
  va_end(ap);
  return st;
}
IRIS_INTERNAL iris_status_t iris_detail_gpu_fail(int rank, const char *call, iris_gpu_error_t e) {
  return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s failed: %s (" IRIS_GPU_NAME " error %d)", rank, call, iris_gpu_error_text(e), (int)e);
}
/* st, with the current detail prefixed by `call: ` (the detail is copied first: it is
 * also the destination). */
IRIS_INTERNAL iris_status_t iris_detail_prefix(iris_status_t st, const char *call) {
  char keep[sizeof iris_detail_errbuf];
  memcpy(keep, iris_detail_errbuf, sizeof keep);
  keep[sizeof keep - 1] = 0;
  return iris_detail_fail(st, "%s: %s", call, keep);
}
/* strncpy that always terminates and never warns */
IRIS_INTERNAL void iris_detail_copy(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = 0;
}
IRIS_INTERNAL iris_status_t iris_detail_sys_fail(int rank, const char *call, int err) {
  return iris_detail_fail(IRIS_ERROR_SYSTEM, "rank %d: %s failed: %s", rank, call, strerror(err));
}
#define IRIS_DETAIL_GPU_CALL(rank, call)                                   \
  do {                                                                     \
    iris_gpu_error_t iris_e_ = (call);                                     \
    if (iris_e_ != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(rank, #call, iris_e_); \
  } while (0)

IRIS_DEF const char *iris_status_string(iris_status_t s) {
  switch (s) {
  case IRIS_SUCCESS: return "IRIS_SUCCESS: no error";
  case IRIS_ERROR_INVALID_ARGUMENT: return "IRIS_ERROR_INVALID_ARGUMENT: an argument is NULL, zero or out of range";
  case IRIS_ERROR_INVALID_RANK: return "IRIS_ERROR_INVALID_RANK: a rank outside [0, world_size)";
  case IRIS_ERROR_OUT_OF_MEMORY: return "IRIS_ERROR_OUT_OF_MEMORY: the symmetric heap (or host memory) is exhausted";
  case IRIS_ERROR_NOT_IN_HEAP: return "IRIS_ERROR_NOT_IN_HEAP: the pointer is outside the symmetric heap";
  case IRIS_ERROR_MISMATCH: return "IRIS_ERROR_MISMATCH: ranks disagree (world size, heap size, version or allocations)";
  case IRIS_ERROR_TIMEOUT: return "IRIS_ERROR_TIMEOUT: a rank did not arrive in time";
  case IRIS_ERROR_GPU: return "IRIS_ERROR_GPU: the CUDA/HIP runtime reported an error";
  case IRIS_ERROR_SYSTEM: return "IRIS_ERROR_SYSTEM: an operating-system call failed";
  case IRIS_ERROR_PERMISSION: return "IRIS_ERROR_PERMISSION: a peer of another user, or an unsafe rendezvous directory";
  case IRIS_ERROR_DIFFERENT_HOST: return "IRIS_ERROR_DIFFERENT_HOST: ranks run on different hosts; GPU IPC does not cross hosts";
  case IRIS_ERROR_UNSUPPORTED: return "IRIS_ERROR_UNSUPPORTED: not supported by this build or platform";
  case IRIS_ERROR_BOOTSTRAP: return "IRIS_ERROR_BOOTSTRAP: a bootstrap callback returned an error";
  case IRIS_ERROR_RANK_FAILED: return "IRIS_ERROR_RANK_FAILED: a launched rank exited with an error";
  case IRIS_ERROR_PEER_FAILED: return "IRIS_ERROR_PEER_FAILED: a peer's process died while this rank waited for it";
  case IRIS_ERROR_ABORTED: return "IRIS_ERROR_ABORTED: the context was aborted (iris_abort or an earlier fatal fault)";
  case IRIS_ERROR_IN_USE: return "IRIS_ERROR_IN_USE: the rendezvous name is held by another live job";
  default: return "IRIS_ERROR_?: unknown status";
  }
}
IRIS_DEF const char *iris_error_detail(void) { return iris_detail_errbuf; }
IRIS_DEF int iris_get_version(void) { return IRIS_VERSION; }

/* ------------------------------------------------------------------ small helpers -- */
IRIS_INTERNAL long long iris_detail_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
IRIS_INTERNAL void iris_detail_sleep_ms(int ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}
IRIS_INTERNAL uint64_t iris_detail_fnv(uint64_t h, uint64_t v) {
  int i;
  for (i = 0; i < 8; i++) { h ^= (v >> (8 * i)) & 0xff; h *= 1099511628211ULL; }
  return h;
}
/* Strict non-negative decimal int: digits only (no sign, no space), at most INT_MAX.
 * 0: unset or empty; 1: *out set; -1: malformed (detail names var=value). */
IRIS_INTERNAL int iris_detail_parse_uint(const char *var, const char *s, int *out) {
  long long v = 0;
  const char *c;
  if (!s || !*s) return 0;
  for (c = s; *c; c++) {
    if (*c < '0' || *c > '9') {
      iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%.40s is not a non-negative decimal integer", var, s);
      return -1;
    }
    v = v * 10 + (*c - '0');
    if (v > INT_MAX) {
      iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%.40s is out of range (at most %d)", var, s, INT_MAX);
      return -1;
    }
  }
  *out = (int)v;
  return 1;
}
IRIS_INTERNAL int iris_detail_env_int(const char *name, int *out) { return iris_detail_parse_uint(name, getenv(name), out); }

/* The one size parser for the environment and the config: digits, then an optional
 * K/M/G/T (any case, binary: 2^10 ...), then an optional "iB" or "B" after a suffix,
 * or "B" alone ("512", "512B", "64K", "2GiB", "1TB"). No sign, no space, no fraction;
 * overflow of size_t is an error. IRIS_SUCCESS with *out set (0 allowed: callers
 * decide), IRIS_ERROR_INVALID_ARGUMENT naming var and the text otherwise. */
IRIS_INTERNAL iris_status_t iris_detail_parse_size_var(const char *var, const char *s, size_t *out) {
  size_t v = 0;
  int shift = 0;
  const char *c = s;
  if (!s || !*s) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s is empty; give a size such as 512M or 2GiB", var);
  if (*c < '0' || *c > '9') goto bad;
  for (; *c >= '0' && *c <= '9'; c++) {
    if (v > (SIZE_MAX - (size_t)(*c - '0')) / 10) goto big;
    v = v * 10 + (size_t)(*c - '0');
  }
  switch (*c) {
  case 'K': case 'k': shift = 10; break;
  case 'M': case 'm': shift = 20; break;
  case 'G': case 'g': shift = 30; break;
  case 'T': case 't': shift = 40; break;
  default: break;
  }
  if (shift) {
    c++;
    if (c[0] == 'i' && c[1] == 'B') c += 2;
    else if (c[0] == 'B') c++;
  } else if (c[0] == 'B') {
    c++;
  }
  if (*c) goto bad;
  if (shift && v > (SIZE_MAX >> shift)) goto big;
  *out = v << shift;
  return IRIS_SUCCESS;
bad:
  return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%.40s is not a size: digits, then optionally K, M, G or T, then optionally iB or B (e.g. 512M, 2GiB)", var, s);
big:
  return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%.40s overflows a size (at most %llu bytes)", var, s, (unsigned long long)SIZE_MAX);
}
/* Compatibility form (iris_collectives.h): bytes, or 0 when unset or malformed. */
static inline size_t iris_detail_parse_size(const char *s) {
  char keep[sizeof iris_detail_errbuf];
  size_t v = 0;
  iris_detail_copy(keep, sizeof keep, iris_detail_errbuf);
  if (!s || iris_detail_parse_size_var("size", s, &v) != IRIS_SUCCESS) v = 0;
  iris_detail_copy(iris_detail_errbuf, sizeof iris_detail_errbuf, keep);
  return v;
}

/* n random bytes: the kernel's (/dev/urandom), else a hash of clocks, pid and
 * addresses (good enough to tell processes apart; not a secret). */
IRIS_INTERNAL void iris_detail_random(void *buf, size_t n) {
  unsigned char *b = (unsigned char *)buf;
  size_t got = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    while (got < n) {
      ssize_t k = read(fd, b + got, n - got);
      if (k <= 0) { if (k < 0 && errno == EINTR) continue; break; }
      got += (size_t)k;
    }
    close(fd);
  }
  if (got < n) {
    static unsigned long counter;
    struct timespec a, m;
    uint64_t h = 14695981039346656037ULL;
    clock_gettime(CLOCK_REALTIME, &a);
    clock_gettime(CLOCK_MONOTONIC, &m);
    h = iris_detail_fnv(h, (uint64_t)a.tv_sec * 1000000000ULL + (uint64_t)a.tv_nsec);
    h = iris_detail_fnv(h, (uint64_t)m.tv_sec * 1000000000ULL + (uint64_t)m.tv_nsec);
    h = iris_detail_fnv(h, (uint64_t)getpid());
    h = iris_detail_fnv(h, (uint64_t)(uintptr_t)&a);
    for (; got < n; got++) {
      h = iris_detail_fnv(h, ++counter);
      b[got] = (unsigned char)(h >> 29);
    }
  }
}
/* This process's identity: 16 random bytes made once per process (again in a forked
 * child, which has another pid), so "same process" survives PID namespaces where two
 * processes share a pid. */
#define IRIS_DETAIL_TOKEN_BYTES 16
IRIS_INTERNAL void iris_detail_process_token(unsigned char out[IRIS_DETAIL_TOKEN_BYTES]) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static unsigned char token[IRIS_DETAIL_TOKEN_BYTES];
  static pid_t owner = 0;
  pthread_mutex_lock(&mu);
  if (owner != getpid()) {
    iris_detail_random(token, sizeof token);
    owner = getpid();
  }
  memcpy(out, token, sizeof token);
  pthread_mutex_unlock(&mu);
}
/* "0,2,3" from a flag array; returns buf */
IRIS_INTERNAL const char *iris_detail_rank_list(const unsigned char *flag, int n, char *buf, size_t cap) {
  size_t len = 0;
  int i, first = 1;
  buf[0] = 0;
  for (i = 0; i < n && len + 16 < cap; i++) {
    if (!flag[i]) continue;
    len += (size_t)snprintf(buf + len, cap - len, first ? "%d" : ",%d", i);
    first = 0;
  }
  return buf;
}

/* --------------------------------------------------------------------- rendezvous --
 * A star over Unix stream sockets: rank 0 listens, every other rank connects. Frames
 * are a fixed header plus payload. An allgather is: each rank sends GATHER to rank 0,
 * rank 0 answers every rank with TABLE; a barrier is an allgather of nothing. Rank 0
 * tells every connected rank why it gives up (ERROR), so every rank's error names the
 * missing or offending ranks. */
#define IRIS_DETAIL_MAGIC 0x53495249u /* "IRIS" */
enum { IRIS_DETAIL_HELLO = 1, IRIS_DETAIL_WELCOME, IRIS_DETAIL_GATHER, IRIS_DETAIL_TABLE, IRIS_DETAIL_ERROR };

typedef struct iris_detail_frame {
  uint32_t magic, type;
  int32_t rank, status;
  uint64_t seq, len;
} iris_detail_frame_t;

#define IRIS_DETAIL_JOB_BYTES 128
typedef struct iris_detail_hello {
  uint32_t version, world;
  uint64_t heap_size;
  char job[IRIS_DETAIL_JOB_BYTES]; /* the job token, terminated */
} iris_detail_hello_t;

struct iris_rendezvous {
  int rank, world, timeout_ms;
  int tcp;       /* 1: TCP (iris_rendezvous_open_tcp); 0: a Unix socket */
  char where[96]; /* TCP: "addr:port", for messages */
  int *fds;      /* rank 0: fds[r] for r >= 1; others: fds[0] is the link to rank 0 */
  uint64_t seq;  /* collective operations so far */
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
 * ETIMEDOUT, EPIPE (peer closed) or errno. */
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
    k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k < 0) { if (errno == EINTR || errno == EAGAIN) continue; return errno == ECONNRESET ? EPIPE : errno; }
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
 * socket, or unlinks its own: two jobs never interleave those steps. -1 if no lock. */
IRIS_INTERNAL int iris_detail_dir_lock(const char *dir) {
  char path[PATH_MAX];
  struct flock fl;
  int fd;
  snprintf(path, sizeof path, "%s/.lock", dir);
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -1;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  while (fcntl(fd, F_SETLKW, &fl) != 0)
    if (errno != EINTR) { close(fd); return -1; }
  return fd;
}
IRIS_INTERNAL void iris_detail_dir_unlock(int fd) {
  if (fd >= 0) close(fd); /* closing releases the lock */
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

IRIS_INTERNAL iris_status_t iris_detail_rdv_accept_all(iris_rendezvous_t *r, int lfd, uint64_t heap_size) {
  long long deadline = iris_detail_now_ms() + r->timeout_ms;
  int have = 1, refused = 0, foreign = 0;
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
    if (left <= 0) {
      int i;
      for (i = 0; i < r->world; i++) present[i] = (unsigned char)!present[i];
      iris_detail_fail(IRIS_ERROR_TIMEOUT, "rendezvous '%s': timed out after %d ms; ranks %s never arrived (%d of %d present; %s)%s%s",
                       r->name, r->timeout_ms, iris_detail_rank_list(present, r->world, list, sizeof list), have, r->world,
                       r->tcp ? "they must reach rank 0 at MASTER_ADDR:MASTER_PORT" : "all ranks must run on this host",
                       refused ? "; a connection from another user was refused" : "",
                       foreign ? (r->tcp ? "; ranks of another job were refused (give each job its own MASTER_PORT)"
                                 : "; ranks of another job with this rendezvous name were refused (give each job its own IRIS_RENDEZVOUS)") : "");
      free(present);
      return iris_detail_rdv_abort(r, IRIS_ERROR_TIMEOUT);
    }
    pf.fd = lfd;
    pf.events = POLLIN;
    pf.revents = 0;
    if (poll(&pf, 1, (int)(left > 1000000 ? 1000000 : left)) <= 0) continue;
    cfd = accept(lfd, NULL, NULL);
    if (cfd < 0) continue;
    if (!r->tcp && (iris_detail_peer_uid(cfd, &uid) != 0 || uid != (unsigned)getuid())) { /* not ours: refuse it, remember it */
      close(cfd);
      refused++;
      continue;
    }
    e = iris_detail_recv_header(cfd, &f, iris_detail_now_ms() + (left < 5000 ? left : 5000));
    if (!e && f.type == IRIS_DETAIL_HELLO && f.len != sizeof h) /* another build of iris (its hello has another size): tell it */
      iris_detail_refuse(cfd, IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d sent a hello of %llu bytes but rank 0 expects %u: the ranks run different builds of iris",
                         r->name, (int)f.rank, (unsigned long long)f.len, (unsigned)sizeof h);
    if (e || f.type != IRIS_DETAIL_HELLO || f.len != sizeof h || iris_detail_io(cfd, &h, sizeof h, deadline, 0)) { close(cfd); continue; }
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
      bad = iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d runs iris version %u but rank 0 runs %u", r->name, f.rank, h.version, IRIS_VERSION);
    else if ((int)h.world != r->world)
      bad = iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d was started with world size %u but rank 0 with %d", r->name, f.rank, h.world, r->world);
    else if (h.heap_size != heap_size)
      bad = iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': rank %d asks for a heap of %llu bytes but rank 0 for %llu", r->name, f.rank,
                             (unsigned long long)h.heap_size, (unsigned long long)heap_size);
    else if (f.rank <= 0 || f.rank >= r->world)
      bad = iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rendezvous '%s': a process claims rank %d, outside [1, %d)", r->name, f.rank, r->world);
    else if (present[f.rank])
      bad = iris_detail_fail(IRIS_ERROR_MISMATCH, "rendezvous '%s': two processes claim rank %d", r->name, f.rank);
    if (bad != IRIS_SUCCESS) {
      const char *msg = iris_detail_errbuf;
      iris_detail_send_frame(cfd, IRIS_DETAIL_ERROR, 0, (int)bad, 0, msg, strlen(msg) + 1, iris_detail_now_ms() + 500);
      close(cfd);
      free(present);
      return iris_detail_rdv_abort(r, bad);
    }
    r->fds[f.rank] = cfd;
    present[f.rank] = 1;
    have++;
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

IRIS_INTERNAL iris_status_t iris_detail_rdv_connect(iris_rendezvous_t *r, const char *dir, uint64_t heap_size) {
  long long deadline = iris_detail_now_ms() + r->timeout_ms;
  struct sockaddr_un addr;
  iris_detail_hello_t h;
  iris_detail_frame_t f;
  int fd = -1, e;
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
      ds = iris_detail_tcp_dial(r, deadline, &fd);
      if (ds == IRIS_SUCCESS) break;
      if (ds != IRIS_ERROR_TIMEOUT) return ds;
    } else if (ds != IRIS_SUCCESS && ds != IRIS_ERROR_TIMEOUT) return ds;
    if (ds == IRIS_SUCCESS) {
      fd = socket(AF_UNIX, SOCK_STREAM, 0);
      if (fd < 0) return iris_detail_sys_fail(r->rank, "socket", errno);
      if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) break;
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
  free(r->fds);
  free(r);
}

/* Rank 0: under the directory lock, make sure no live process listens at r->path
 * (connect succeeds or its backlog is full: IRIS_ERROR_IN_USE), remove a stale socket
 * (connection refused), bind and listen, and remember the socket file's identity so
 * that only it is unlinked later. */
IRIS_INTERNAL iris_status_t iris_detail_rdv_bind(iris_rendezvous_t *r, const char *dir, int *lfd_out, struct stat *mine) {
  struct sockaddr_un addr;
  iris_status_t st = IRIS_SUCCESS;
  int lock = iris_detail_dir_lock(dir), probe, lfd = -1, e;
  *lfd_out = -1;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, r->path, strlen(r->path) + 1);
  probe = socket(AF_UNIX, SOCK_STREAM, 0);
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
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
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
  int lock = iris_detail_dir_lock(dir);
  if (lstat(r->path, &now) == 0 && now.st_dev == mine->st_dev && now.st_ino == mine->st_ino) unlink(r->path);
  iris_detail_dir_unlock(lock);
}

/* The rendezvous directory: given, else IRIS_RENDEZVOUS_DIR, else $XDG_RUNTIME_DIR/iris
 * (a per-user directory that no one else can pre-create), else /tmp/iris-<uid>. */
IRIS_INTERNAL int iris_detail_rdv_dir(const char *given, char *dir, size_t cap) {
  const char *env = getenv("IRIS_RENDEZVOUS_DIR"), *xdg = getenv("XDG_RUNTIME_DIR");
  int n;
  if (given) n = snprintf(dir, cap, "%s", given);
  else if (env && *env) n = snprintf(dir, cap, "%s", env);
  else if (xdg && xdg[0] == '/') n = snprintf(dir, cap, "%s/iris", xdg);
  else n = snprintf(dir, cap, "/tmp/iris-%u", (unsigned)getuid());
  return n >= 0 && (size_t)n < cap;
}

/* Both rendezvous: addr NULL: the Unix socket; else TCP to addr:port. */
IRIS_INTERNAL iris_status_t iris_detail_rdv_open(const iris_rendezvous_params_t *p, const char *addr, int port, iris_rendezvous_t **out) {
  iris_rendezvous_t *r;
  char dir[160];
  const char *c;
  iris_status_t st;
  int i;
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
  if (!iris_detail_rdv_dir(p->dir, dir, sizeof dir))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_rendezvous_open: the rendezvous directory path is too long (IRIS_RENDEZVOUS_DIR)");
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

IRIS_INTERNAL iris_status_t iris_detail_rdv_allgather(iris_rendezvous_t *r, const void *send, void *recv, size_t bytes, int timeout_ms) {
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

/* ------------------------------------------------- in-process group (mode 3) --
 * One thread per context meets at a condition variable; the buffer carries the
 * allgather. Generations make it reusable without resets. */
typedef struct iris_detail_group {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int world, refs, arrived;
  int devices[IRIS_MAX_RANKS];
  unsigned long generation;
  unsigned char *present;
  char *buf;
  size_t bytes;
} iris_detail_group_t;

IRIS_INTERNAL iris_status_t iris_detail_group_wait(iris_detail_group_t *g, int rank, int timeout_ms) {
  unsigned long gen;
  struct timespec ts;
  char list[512];
  int i;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* the condition variable runs on CLOCK_MONOTONIC */
  ts.tv_sec += timeout_ms / 1000;
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
  gen = g->generation;
  g->present[rank] = 1;
  if (++g->arrived == g->world) {
    g->arrived = 0;
    memset(g->present, 0, (size_t)g->world);
    g->generation++;
    pthread_cond_broadcast(&g->cv);
    return IRIS_SUCCESS;
  }
  while (g->generation == gen) {
    if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) == ETIMEDOUT && g->generation == gen) {
      {
        unsigned char miss[IRIS_MAX_RANKS];
        for (i = 0; i < g->world; i++) miss[i] = (unsigned char)!g->present[i];
        iris_detail_rank_list(miss, g->world, list, sizeof list);
      }
      g->present[rank] = 0;
      g->arrived--;
      return iris_detail_fail(IRIS_ERROR_TIMEOUT, "rank %d: in-process barrier timed out after %d ms; ranks %s never arrived (one host thread per context must call it)",
                              rank, timeout_ms, list);
    }
  }
  return IRIS_SUCCESS;
}
IRIS_INTERNAL iris_status_t iris_detail_group_allgather(iris_detail_group_t *g, int rank, const void *send, void *recv, size_t bytes, int timeout_ms) {
  iris_status_t st;
  pthread_mutex_lock(&g->mu);
  if (bytes) {
    if (g->arrived == 0) {
      char *nb = (char *)realloc(g->buf, bytes * (size_t)g->world);
      if (!nb) { pthread_mutex_unlock(&g->mu); return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", rank); }
      g->buf = nb;
      g->bytes = bytes;
    } else if (g->bytes != bytes) {
      pthread_mutex_unlock(&g->mu);
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: allgather of %zu bytes while another rank passes %zu", rank, bytes, g->bytes);
    }
    memcpy(g->buf + (size_t)rank * bytes, send, bytes);
  }
  st = iris_detail_group_wait(g, rank, timeout_ms);
  if (st == IRIS_SUCCESS && bytes) {
    memcpy(recv, g->buf, bytes * (size_t)g->world);
    st = iris_detail_group_wait(g, rank, timeout_ms); /* nobody refills buf before all have read it */
  }
  pthread_mutex_unlock(&g->mu);
  return st;
}
/* A group of `world` contexts whose barrier times out on CLOCK_MONOTONIC (wall-clock
 * steps do not shorten or stretch it). NULL when out of memory. */
IRIS_INTERNAL iris_detail_group_t *iris_detail_group_create(int world) {
  iris_detail_group_t *g = (iris_detail_group_t *)calloc(1, sizeof *g);
  pthread_condattr_t attr;
  if (!g || !(g->present = (unsigned char *)calloc((size_t)world, 1))) { free(g); return NULL; }
  pthread_mutex_init(&g->mu, NULL);
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g->cv, &attr);
  pthread_condattr_destroy(&attr);
  g->world = world;
  g->refs = world;
  return g;
}
IRIS_INTERNAL void iris_detail_group_release(iris_detail_group_t *g) {
  int last;
  pthread_mutex_lock(&g->mu);
  last = --g->refs == 0;
  pthread_mutex_unlock(&g->mu);
  if (!last) return;
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g->present);
  free(g->buf);
  free(g);
}

/* ---------------------------------------------------------------- the context -- */
enum { IRIS_DETAIL_MODE_RENDEZVOUS = 1, IRIS_DETAIL_MODE_HOOKS, IRIS_DETAIL_MODE_LOCAL };

typedef struct iris_detail_block {
  size_t off, size;
  size_t req; /* bytes asked for (live blocks) */
  int used;
} iris_detail_block_t;

#define IRIS_DETAIL_CTX_LIVE 0x4c495249u /* "IRIL" */
#define IRIS_DETAIL_CTX_DEAD 0x44495249u /* "IRID": finalized, a tombstone */
struct iris {
  uint32_t magic;
  int rank, world, device, mode;
  size_t heap_size;
  iris_heap_memory_t heap_memory;
  char *bases[IRIS_MAX_RANKS];
  unsigned char ipc_opened[IRIS_MAX_RANKS];
  int timeout_ms, barrier_timeout_ms;
  /* communication */
  iris_rendezvous_t *rdv;
  iris_bootstrap_t hooks;
  iris_detail_group_t *group;
  /* per-context state of iris_collectives.h (NULL until used); freed by ext_free */
  void *ext;
  void (*ext_free)(void *);
  /* allocator: blocks sorted by offset, covering the heap */
  iris_detail_block_t *blocks;
  int nblocks, capblocks;
  size_t used;
  /* faults: 2 words of pinned host memory mapped into the GPU (iris_device_ctx_t.fault) */
  unsigned long long *fault_host, *fault_dev;
  int64_t pids[IRIS_MAX_RANKS]; /* the ranks' process ids (0: unknown or another pid namespace) */
  /* call order across streams (iris_detail_order_*): the last eager call's event and
   * stream, and the last captured call's event, stream and capture id */
  iris_gpu_event_t order_eager, order_cap;
  int order_have_eager, order_events;
  iris_stream_t order_eager_stream, order_cap_stream;
  unsigned long long order_cap_id;
  /* nodes (docs/multinode.md): rank and world above are this node's (the heap, the
   * records, every in-node call); these are the world's. nodes <= 1: one node */
  int grank, gworld, node, nodes;
  void *rail;          /* multi-node: the rail communicator (ncclComm_t) */
  int rail_owned;      /* 1: iris created it (and destroys it) */
  const iris_nccl_api_t *nccl;
};

/* IRIS_SUCCESS for a live context; else IRIS_ERROR_INVALID_ARGUMENT naming the call. */
IRIS_INTERNAL iris_status_t iris_detail_live(const iris_t *ctx, const char *call) {
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL context", call);
  if (ctx->magic == IRIS_DETAIL_CTX_DEAD) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: the context was finalized (rank %d)", call, ctx->rank);
  if (ctx->magic != IRIS_DETAIL_CTX_LIVE) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: not an iris context", call);
  return IRIS_SUCCESS;
}
#define IRIS_DETAIL_LIVE(ctx, call)                                    \
  do {                                                                 \
    if (!IRIS_DETAIL_IS_LIVE(ctx)) {                                   \
      iris_detail_live(ctx, call); /* the detail */                    \
      return IRIS_ERROR_INVALID_ARGUMENT;                              \
    }                                                                  \
  } while (0)
#define IRIS_DETAIL_IS_LIVE(ctx) ((ctx) && (ctx)->magic == IRIS_DETAIL_CTX_LIVE)

/* The exchange over every rank of the world (global ranks). */
IRIS_INTERNAL iris_status_t iris_detail_comm_allgather_world(iris_t *ctx, const void *send, void *recv, size_t bytes, int timeout_ms) {
  switch (ctx->mode) {
  case IRIS_DETAIL_MODE_RENDEZVOUS: return iris_detail_rdv_allgather(ctx->rdv, send, recv, bytes, timeout_ms);
  case IRIS_DETAIL_MODE_HOOKS:
    if (ctx->hooks.allgather(ctx->hooks.user, send, recv, bytes) != 0)
      return iris_detail_fail(IRIS_ERROR_BOOTSTRAP, "rank %d: the bootstrap allgather callback returned an error", ctx->rank);
    return IRIS_SUCCESS;
  default: return iris_detail_group_allgather(ctx->group, ctx->rank, send, recv, bytes, timeout_ms);
  }
}
/* The exchange among this node's ranks (ctx->rank, ctx->world): in a multi-node world,
 * the world's exchange (every rank takes part) of which this node's slice is kept. */
IRIS_INTERNAL iris_status_t iris_detail_comm_allgather(iris_t *ctx, const void *send, void *recv, size_t bytes, int timeout_ms) {
  char *all;
  iris_status_t st;
  if (ctx->nodes <= 1 || !bytes) return iris_detail_comm_allgather_world(ctx, send, recv, bytes, timeout_ms);
  if (!(all = (char *)malloc((size_t)ctx->gworld * bytes))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", ctx->grank);
  st = iris_detail_comm_allgather_world(ctx, send, all, bytes, timeout_ms);
  if (st == IRIS_SUCCESS) memcpy(recv, all + (size_t)ctx->node * (size_t)ctx->world * bytes, (size_t)ctx->world * bytes);
  free(all);
  return st;
}
IRIS_INTERNAL iris_status_t iris_detail_comm_barrier(iris_t *ctx, int timeout_ms) {
  if (ctx->mode == IRIS_DETAIL_MODE_HOOKS) {
    if (ctx->hooks.barrier(ctx->hooks.user) != 0)
      return iris_detail_fail(IRIS_ERROR_BOOTSTRAP, "rank %d: the bootstrap barrier callback returned an error", ctx->rank);
    return IRIS_SUCCESS;
  }
  return iris_detail_comm_allgather(ctx, NULL, NULL, 0, timeout_ms);
}

/* ------------------------------------------------------------------- faults -- */
static const char *const iris_detail_site_names[IRIS_SITE_COUNT] = {"a wait in a user kernel (iris_wait_until)", "the call header", "a barrier",
                                                                    "an LL data line", "a progress flag", "a GEMM tile flag"};
static const char *const iris_detail_coll_names[] = {"", "iris_all_reduce", "iris_all_gather", "iris_reduce_scatter", "iris_all_to_all", "iris_broadcast",
                                                     "iris_barrier_device", "an all-gather + GEMM plan"};
IRIS_INTERNAL unsigned long long iris_detail_fault_read(const iris_t *ctx, int which) {
  return ctx->fault_host ? __atomic_load_n(ctx->fault_host + which, __ATOMIC_ACQUIRE) : 0;
}
/* Names a fault word in the thread's detail; returns its status. */
IRIS_INTERNAL iris_status_t iris_detail_fault_status(const iris_t *ctx, unsigned long long f) {
  const unsigned kind = (unsigned)(f >> 56), peer = (unsigned)(f >> 48) & 0xff, site = (unsigned)(f >> 32) & 0xffff, call = (unsigned)f;
  const unsigned coll = site >> 8, what = site & 0xff;
  const char *cname = coll < sizeof iris_detail_coll_names / sizeof iris_detail_coll_names[0] ? iris_detail_coll_names[coll] : "?";
  const char *wname = what < IRIS_SITE_COUNT ? iris_detail_site_names[what] : "?";
  char who[48];
  if (kind == IRIS_FAULT_ABORT) return iris_detail_fail(IRIS_ERROR_ABORTED, "rank %d: the context was aborted (iris_abort)", ctx->rank);
  if (peer < (unsigned)ctx->world) snprintf(who, sizeof who, "rank %u", peer);
  else snprintf(who, sizeof who, "a peer");
  if (kind == IRIS_FAULT_MISMATCH)
    return iris_detail_fail(IRIS_ERROR_MISMATCH,
                            "rank %d: collective call #%u: %s called a different collective (kind, count, type, op, root or buffers) at the same point; "
                            "no rank moved data for that call",
                            ctx->rank, call, who);
  if (peer < (unsigned)ctx->world && ctx->pids[peer] > 0 && kill((pid_t)ctx->pids[peer], 0) != 0 && errno == ESRCH)
    return iris_detail_fail(IRIS_ERROR_PEER_FAILED, "rank %d: rank %u (pid %lld) has died; %s%s%s waited for it in vain (call #%u); the context is unusable: iris_finalize it",
                            ctx->rank, peer, (long long)ctx->pids[peer], wname, *cname ? " of " : "", cname, call);
  return iris_detail_fail(IRIS_ERROR_TIMEOUT,
                          "rank %d: %s%s%s (call #%u) waited for %s longer than the wait bound (IRIS_WAIT_TIMEOUT_NS); the context is unusable: iris_finalize it",
                          ctx->rank, wname, *cname ? " of " : "", cname, call, who);
}
/* The fatal fault of ctx, if any (for every entry point that launches or waits). */
IRIS_DEF iris_status_t iris_detail_check_fault(const iris_t *ctx) {
  unsigned long long f;
  if (ctx && !IRIS_DETAIL_IS_LIVE(ctx)) return iris_detail_live(ctx, "a call on this context");
  f = ctx ? iris_detail_fault_read(ctx, 0) : 0;
  return f ? iris_detail_fault_status(ctx, f) : IRIS_SUCCESS;
}
IRIS_DEF iris_status_t iris_get_async_error(iris_t *ctx) {
  unsigned long long f;
  IRIS_DETAIL_LIVE(ctx, "iris_get_async_error");
  if ((f = iris_detail_fault_read(ctx, 0)) != 0) return iris_detail_fault_status(ctx, f);
  if (ctx->fault_host && (f = __atomic_exchange_n(ctx->fault_host + 1, 0ULL, __ATOMIC_ACQ_REL)) != 0) return iris_detail_fault_status(ctx, f);
  return IRIS_SUCCESS;
}
IRIS_DEF iris_status_t iris_abort(iris_t *ctx) {
  unsigned long long zero = 0;
  IRIS_DETAIL_LIVE(ctx, "iris_abort");
  if (ctx->fault_host)
    __atomic_compare_exchange_n(ctx->fault_host, &zero, IRIS_FAULT_MAKE(IRIS_FAULT_ABORT, 0xff, 0, 0), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  return IRIS_SUCCESS;
}

/* ------------------------------------------------------ call order across streams --
 * Every call of a context that launches communication kernels (collectives, the device
 * barrier, GEMM + communication plans) brackets its launches with these, so that the
 * context's calls run one after another in the order the host issued them, whatever
 * streams they are issued on: a call on another stream than the previous one first waits
 * for the previous one (an event). Eager calls and calls captured into one graph (also
 * across the streams of that capture) are ordered; the first call of a capture cannot
 * depend on eager work (CUDA forbids crossing the capture boundary), so a graph must not
 * run concurrently with other calls of the same context (launch it on a stream that is
 * ordered with them). */
IRIS_DEF iris_status_t iris_detail_order_begin(iris_t *ctx, iris_stream_t stream) {
  unsigned long long cap = 0;
  iris_gpu_error_t e;
  if ((e = iris_gpu_capture_id(stream, &cap)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->rank, "querying the stream's capture state", e);
  if (!cap) {
    if (ctx->order_have_eager && ctx->order_eager_stream != stream && (e = iris_gpu_stream_wait(stream, ctx->order_eager)) != IRIS_GPU_SUCCESS)
      return iris_detail_gpu_fail(ctx->rank, "ordering after the previous call (stream wait)", e);
  } else if (ctx->order_cap_id == cap && ctx->order_cap_stream != stream && (e = iris_gpu_stream_wait(stream, ctx->order_cap)) != IRIS_GPU_SUCCESS) {
    return iris_detail_gpu_fail(ctx->rank, "ordering after the previous captured call (stream wait)", e);
  }
  return IRIS_SUCCESS;
}
IRIS_DEF iris_status_t iris_detail_order_end(iris_t *ctx, iris_stream_t stream) {
  unsigned long long cap = 0;
  iris_gpu_error_t e;
  if ((e = iris_gpu_capture_id(stream, &cap)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->rank, "querying the stream's capture state", e);
  if (!cap) {
    if ((e = iris_gpu_event_record(ctx->order_eager, stream)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->rank, "recording the call's event", e);
    ctx->order_have_eager = 1;
    ctx->order_eager_stream = stream;
  } else {
    if ((e = iris_gpu_event_record(ctx->order_cap, stream)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->rank, "recording the captured call's event", e);
    ctx->order_cap_id = cap;
    ctx->order_cap_stream = stream;
  }
  return IRIS_SUCCESS;
}

/* ------------------------------------------------------------------- allocator -- */
IRIS_INTERNAL int iris_detail_blocks_insert(iris_t *ctx, int at, size_t off, size_t size, int used) {
  if (ctx->nblocks == ctx->capblocks) {
    int cap = ctx->capblocks ? 2 * ctx->capblocks : 64;
    iris_detail_block_t *nb = (iris_detail_block_t *)realloc(ctx->blocks, sizeof *nb * (size_t)cap);
    if (!nb) return -1;
    ctx->blocks = nb;
    ctx->capblocks = cap;
  }
  memmove(ctx->blocks + at + 1, ctx->blocks + at, sizeof *ctx->blocks * (size_t)(ctx->nblocks - at));
  ctx->blocks[at].off = off;
  ctx->blocks[at].size = size;
  ctx->blocks[at].used = used;
  ctx->nblocks++;
  return 0;
}
IRIS_INTERNAL void iris_detail_blocks_erase(iris_t *ctx, int at) {
  memmove(ctx->blocks + at, ctx->blocks + at + 1, sizeof *ctx->blocks * (size_t)(ctx->nblocks - at - 1));
  ctx->nblocks--;
}
IRIS_INTERNAL iris_status_t iris_detail_heap_reset(iris_t *ctx) {
  ctx->nblocks = 0;
  ctx->used = 0;
  if (iris_detail_blocks_insert(ctx, 0, 0, ctx->heap_size, 0)) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_malloc_aligned(iris_t *ctx, size_t bytes, size_t alignment, void **ptr) {
  size_t size, largest = 0;
  int i;
  if (!ptr) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_malloc: NULL result pointer");
  *ptr = NULL;
  IRIS_DETAIL_LIVE(ctx, "iris_malloc");
  if (alignment & (alignment - 1)) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_malloc: alignment %zu is not a power of two", alignment);
  if (alignment < IRIS_HEAP_ALIGN) alignment = IRIS_HEAP_ALIGN;
  if (bytes == 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_malloc of 0 bytes", ctx->rank);
  for (i = 0; i < ctx->nblocks; i++)
    if (!ctx->blocks[i].used && ctx->blocks[i].size > largest) largest = ctx->blocks[i].size;
  if (bytes > ctx->heap_size) goto oom;
  size = (bytes + IRIS_HEAP_ALIGN - 1) & ~(size_t)(IRIS_HEAP_ALIGN - 1);
  for (i = 0; i < ctx->nblocks; i++) {
    iris_detail_block_t b = ctx->blocks[i];
    size_t start, pad;
    if (b.used) continue;
    start = (b.off + alignment - 1) & ~(alignment - 1);
    pad = start - b.off;
    if (pad > b.size || b.size - pad < size) continue;
    /* need up to two more block entries: reserve them first so failure changes nothing */
    if (ctx->nblocks + 2 > ctx->capblocks) {
      int cap = ctx->capblocks * 2 + 2;
      iris_detail_block_t *nb = (iris_detail_block_t *)realloc(ctx->blocks, sizeof *nb * (size_t)cap);
      if (!nb) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", ctx->rank);
      ctx->blocks = nb;
      ctx->capblocks = cap;
    }
    if (b.size - pad > size) iris_detail_blocks_insert(ctx, i + 1, start + size, b.size - pad - size, 0);
    if (pad) {
      ctx->blocks[i].size = pad;
      iris_detail_blocks_insert(ctx, i + 1, start, size, 1);
      i++;
    } else {
      ctx->blocks[i].size = size;
      ctx->blocks[i].used = 1;
    }
    ctx->blocks[i].req = bytes;
    ctx->used += size;
    *ptr = ctx->bases[ctx->rank] + start;
    return IRIS_SUCCESS;
  }
oom:
  return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: symmetric heap exhausted: %zu bytes requested, %zu of %zu in use, largest free block %zu",
                          ctx->rank, bytes, ctx->used, ctx->heap_size, largest);
}
IRIS_DEF iris_status_t iris_malloc(iris_t *ctx, size_t bytes, void **ptr) { return iris_malloc_aligned(ctx, bytes, IRIS_HEAP_ALIGN, ptr); }

IRIS_DEF iris_status_t iris_calloc(iris_t *ctx, size_t bytes, void **ptr) {
  iris_status_t st = iris_malloc(ctx, bytes, ptr);
  int old = -1;
  iris_gpu_error_t e = IRIS_GPU_SUCCESS;
  if (st != IRIS_SUCCESS) return st;
  iris_gpu_get_device(&old);
  if ((e = iris_gpu_set_device(ctx->device)) == IRIS_GPU_SUCCESS && (e = iris_gpu_memset(*ptr, 0, bytes)) == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
  if (old >= 0) iris_gpu_set_device(old);
  if (e != IRIS_GPU_SUCCESS) /* the block stays allocated (and *ptr set): offsets stay equal on every rank */
    return iris_detail_gpu_fail(ctx->rank, "iris_calloc: memset (the block stays allocated; free it on every rank)", e);
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_heap_offset(const iris_t *ctx, const void *ptr, size_t *offset) {
  const char *p = (const char *)ptr;
  if (!offset) {
    iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_heap_offset: NULL argument");
    return IRIS_ERROR_INVALID_ARGUMENT;
  }
  IRIS_DETAIL_LIVE(ctx, "iris_heap_offset");
  if (p < ctx->bases[ctx->rank] || p >= ctx->bases[ctx->rank] + ctx->heap_size) {
    iris_detail_fail(IRIS_ERROR_NOT_IN_HEAP, "rank %d: pointer %p is outside the symmetric heap [%p, %p)", ctx->rank, ptr, (void *)ctx->bases[ctx->rank],
                     (void *)(ctx->bases[ctx->rank] + ctx->heap_size));
    return IRIS_ERROR_NOT_IN_HEAP; /* a constant: callers' "set on success" reasoning sees it */
  }
  *offset = (size_t)(p - ctx->bases[ctx->rank]);
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_free(iris_t *ctx, void *ptr) {
  size_t off;
  int i;
  iris_status_t st;
  IRIS_DETAIL_LIVE(ctx, "iris_free");
  if (!ptr) return IRIS_SUCCESS;
  if ((st = iris_heap_offset(ctx, ptr, &off)) != IRIS_SUCCESS) return st;
  for (i = 0; i < ctx->nblocks; i++)
    if (ctx->blocks[i].off == off && ctx->blocks[i].used) break;
  if (i == ctx->nblocks) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: iris_free(%p): not the start of a live heap block", ctx->rank, ptr);
  ctx->blocks[i].used = 0;
  ctx->used -= ctx->blocks[i].size;
  if (i + 1 < ctx->nblocks && !ctx->blocks[i + 1].used) {
    ctx->blocks[i].size += ctx->blocks[i + 1].size;
    iris_detail_blocks_erase(ctx, i + 1);
  }
  if (i > 0 && !ctx->blocks[i - 1].used) {
    ctx->blocks[i - 1].size += ctx->blocks[i].size;
    iris_detail_blocks_erase(ctx, i);
  }
  return IRIS_SUCCESS;
}

/* The live blocks (offset, bytes asked for), hashed: equal on every rank exactly when
 * the same allocations are live at the same offsets. */
IRIS_INTERNAL void iris_detail_layout(const iris_t *ctx, uint64_t out[2]) {
  uint64_t h = 14695981039346656037ULL, n = 0;
  int i;
  for (i = 0; i < ctx->nblocks; i++) {
    if (!ctx->blocks[i].used) continue;
    h = iris_detail_fnv(iris_detail_fnv(h, ctx->blocks[i].off), ctx->blocks[i].req);
    n++;
  }
  out[0] = n;
  out[1] = h;
}

IRIS_DEF iris_status_t iris_heap_verify(iris_t *ctx) {
  uint64_t mine[2], *all;
  unsigned char bad[IRIS_MAX_RANKS];
  char list[512];
  int r, nbad = 0;
  iris_status_t st;
  IRIS_DETAIL_LIVE(ctx, "iris_heap_verify");
  all = (uint64_t *)malloc(sizeof mine * (size_t)ctx->world);
  if (!all) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  iris_detail_layout(ctx, mine);
  st = iris_detail_comm_allgather(ctx, mine, all, sizeof mine, ctx->barrier_timeout_ms);
  if (st == IRIS_SUCCESS) {
    for (r = 0; r < ctx->world; r++) {
      bad[r] = (unsigned char)(all[2 * r] != all[0] || all[2 * r + 1] != all[1]);
      nbad += bad[r];
    }
    if (nbad)
      st = iris_detail_fail(IRIS_ERROR_MISMATCH,
                            "rank %d: symmetric-heap allocations diverge: ranks %s hold different live blocks than rank 0 (%llu blocks there); "
                            "every rank must make the same iris_malloc/iris_free calls with the same sizes, in the same order",
                            ctx->rank, iris_detail_rank_list(bad, ctx->world, list, sizeof list), (unsigned long long)all[0]);
  }
  free(all);
  return st;
}

/* --------------------------------------------------------------- exchange record --
 * What each rank tells every other at bring-up. */
typedef struct iris_detail_record {
  uint32_t magic, version;
  int32_t rank, world;
  uint64_t heap_size;
  int32_t heap_memory, device;
  int64_t pid;
  uint64_t pidns; /* inode of /proc/self/ns/pid: pids compare only within one namespace */
  uint32_t uid;
  int32_t status; /* non-zero: this rank failed to set up; err says why */
  unsigned char proc_token[IRIS_DETAIL_TOKEN_BYTES]; /* iris_detail_process_token() */
  uint64_t base;
  char host[64];
  char boot_id[48];
  char pci[32];
  unsigned char ipc[64];
  char err[256];
} iris_detail_record_t;

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

/* Checks every record against rank 0's (terminating their strings first). Exposed (as
 * iris_detail_) for the host tests. */
IRIS_INTERNAL iris_status_t iris_detail_check_records(iris_detail_record_t *rec, int world) {
  int r;
  for (r = 0; r < world; r++) iris_detail_terminate_record(&rec[r]);
  for (r = 0; r < world; r++)
    if (rec[r].status != 0) return iris_detail_fail(iris_detail_peer_status(rec[r].status), "rank %d failed during bring-up: %s", r, rec[r].err);
  for (r = 0; r < world; r++) {
    const iris_detail_record_t *a = &rec[0], *b = &rec[r];
    if (b->magic != IRIS_DETAIL_MAGIC || b->rank != r)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: slot %d of the exchange holds rank %d (the allgather must order blocks by rank)", r, b->rank);
    if (b->version != a->version)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: rank %d runs iris version %u but rank 0 runs %u", r, b->version, a->version);
    if (b->world != world || a->world != world)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: rank %d was started with world size %d but rank 0 with %d", r, b->world, a->world);
    if (b->heap_size != a->heap_size)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: rank %d asks for a heap of %llu bytes but rank 0 for %llu", r, (unsigned long long)b->heap_size,
                              (unsigned long long)a->heap_size);
    if (b->heap_memory != a->heap_memory)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "bring-up: rank %d uses heap memory kind %d but rank 0 kind %d", r, b->heap_memory, a->heap_memory);
    if (b->uid != a->uid)
      return iris_detail_fail(IRIS_ERROR_PERMISSION, "bring-up: rank %d runs as uid %u but rank 0 as uid %u; all ranks must be one user", r, b->uid, a->uid);
    if (strcmp(b->host, a->host) != 0)
      return iris_detail_fail(IRIS_ERROR_DIFFERENT_HOST,
                              "bring-up: rank %d runs on host '%s' but rank 0 on '%s'; GPU IPC does not cross hosts: the ranks of one node (one "
                              "IRIS_HOST_ID) must share a host",
                              r, b->host, a->host);
    if (strcmp(b->boot_id, a->boot_id) != 0)
      return iris_detail_fail(IRIS_ERROR_DIFFERENT_HOST,
                              "bring-up: rank %d runs on host '%s' (boot id %s) but rank 0 on '%s' (boot id %s): different machines with one name; GPU IPC does "
                              "not cross hosts: the ranks of one node (one IRIS_HOST_ID) must share a host",
                              r, b->host, b->boot_id, a->host, a->boot_id);
  }
  return IRIS_SUCCESS;
}

/* ------------------------------------------------------------------- nodes --
 * Multi-node worlds (docs/multinode.md): ranks are grouped by a host identity; the
 * heap is mapped among one node's ranks; NCCL/RCCL rails join the nodes. */
#define IRIS_DETAIL_HOST_ID_BYTES 128

/* This rank's node identity: IRIS_HOST_ID (at most 120 characters) if set, else
 * "<hostname>/<boot id>" (the boot id tells apart machines that share a name, and is
 * the same in every container of one machine). lookup NULL reads getenv. */
IRIS_INTERNAL iris_status_t iris_detail_host_id(iris_getenv_fn lookup, void *user, char *out, size_t cap) {
  const char *v = lookup ? lookup(user, "IRIS_HOST_ID") : getenv("IRIS_HOST_ID");
  iris_detail_record_t rec;
  if (v && *v) {
    if (strlen(v) > 120 || strlen(v) >= cap) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_HOST_ID=%.40s... is longer than 120 characters", v);
    iris_detail_copy(out, cap, v);
    return IRIS_SUCCESS;
  }
  memset(&rec, 0, sizeof rec);
  iris_detail_host_identity(&rec);
  snprintf(out, cap, "%.63s/%.47s", rec.host, rec.boot_id);
  return IRIS_SUCCESS;
}

/* Groups `world` ranks by their ids (ids + r * stride, terminated strings): the ranks of
 * one id must be consecutive (block placement) and every id must hold as many ranks.
 * Sets rank `rank`'s node, the node count, its local rank and the local size. Errors
 * name the ids, ranks and counts: IRIS_ERROR_UNSUPPORTED (ranks of a node not
 * consecutive; a node of more than IRIS_MAX_RANKS ranks), IRIS_ERROR_MISMATCH (unequal
 * counts). Pure: host-tested. */
IRIS_INTERNAL iris_status_t iris_detail_group_nodes(const char *ids, size_t stride, int world, int rank, int *node, int *nodes, int *local_rank,
                                                    int *local_size) {
#define IRIS_DETAIL_ID(r) (ids + (size_t)(r) * stride)
  int r, q, run = 1, L = 0;
  for (r = 1; r <= world; r++) {
    if (r < world && strcmp(IRIS_DETAIL_ID(r), IRIS_DETAIL_ID(r - 1)) == 0) { run++; continue; }
    if (r < world) /* a new id starts at r: it must not have appeared before */
      for (q = 0; q < r - 1; q++)
        if (strcmp(IRIS_DETAIL_ID(q), IRIS_DETAIL_ID(r)) == 0)
          return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                                  "the ranks of node '%s' are not consecutive (rank %d and rank %d are on it, rank %d between them on '%s'): iris needs block "
                                  "placement, a node's ranks numbered one after another (srun --distribution=block, mpirun --map-by slot, torchrun)",
                                  IRIS_DETAIL_ID(r), q, r, r - 1, IRIS_DETAIL_ID(r - 1));
    if (!L) L = run;
    else if (run != L)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "node '%s' (ranks %d to %d) has %d ranks but node '%s' (rank 0's) has %d: every node must run the same number of ranks",
                              IRIS_DETAIL_ID(r - 1), r - run, r - 1, run, IRIS_DETAIL_ID(0), L);
    run = 1;
  }
  if (L > IRIS_MAX_RANKS)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "node '%s' has %d ranks, more than IRIS_MAX_RANKS (%d); rebuild every unit with a larger -DIRIS_MAX_RANKS",
                            IRIS_DETAIL_ID(0), L, IRIS_MAX_RANKS);
  *local_size = L;
  *nodes = world / L;
  *node = rank / L;
  *local_rank = rank % L;
  return IRIS_SUCCESS;
#undef IRIS_DETAIL_ID
}

/* Which exchange a world without a bootstrap uses: the TCP rendezvous (*use = 1, addr
 * and *port from MASTER_ADDR and MASTER_PORT) when `given` (the rendezvous name) is
 * "tcp" or the launcher says the world spans hosts (its local size below the world
 * size); else the Unix socket (*use = 0). Errors name the missing or malformed
 * variable. Pure on lookup (NULL: getenv): host-tested. */
IRIS_INTERNAL iris_status_t iris_detail_tcp_choice(iris_getenv_fn lookup, void *user, const char *given, const iris_launch_env_t *env, int *use, char *addr,
                                                   size_t cap, int *port) {
  const char *a = lookup ? lookup(user, "MASTER_ADDR") : getenv("MASTER_ADDR");
  const char *pt = lookup ? lookup(user, "MASTER_PORT") : getenv("MASTER_PORT");
  char why[160];
  *use = 0;
  if (given && strcmp(given, "tcp") == 0) snprintf(why, sizeof why, "IRIS_RENDEZVOUS=tcp");
  else if (env && env->local_size > 0 && env->local_size < env->world_size)
    snprintf(why, sizeof why, "%s spreads the world over hosts (local size %d of world size %d)", env->launcher_name, env->local_size, env->world_size);
  else return IRIS_SUCCESS;
  if (!a || !*a || !pt || !*pt)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: the network rendezvous needs MASTER_ADDR (rank 0's host) and MASTER_PORT (a free port there); %s is not set"
                            " (or pass iris_config_t.bootstrap)", why, (!a || !*a) ? "MASTER_ADDR" : "MASTER_PORT");
  if (iris_detail_parse_uint("MASTER_PORT", pt, port) < 0) return IRIS_ERROR_INVALID_ARGUMENT;
  if (*port < 1 || *port > 65535) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "MASTER_PORT=%s is not a port in [1, 65535]", pt);
  if (strlen(a) >= cap || strlen(a) > 80) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "MASTER_ADDR=%.40s... is longer than 80 characters", a);
  iris_detail_copy(addr, cap, a);
  *use = 1;
  return IRIS_SUCCESS;
}

/* NCCL/RCCL, loaded once per process: IRIS_NCCL_LIBRARY, else a copy already in the
 * process (linked or loaded by the application), else libnccl.so.2 (librccl.so on
 * AMD). Never unloaded. IRIS_SUCCESS with *api, or IRIS_ERROR_UNSUPPORTED naming the
 * library or the missing function. */
typedef struct { char internal[128]; } iris_detail_nccl_id_t; /* ncclUniqueId */
typedef struct iris_detail_nccl_lib {
  iris_nccl_api_t api;
  int (*get_unique_id)(iris_detail_nccl_id_t *id);
  int (*comm_init_rank)(void **comm, int nranks, iris_detail_nccl_id_t id, int rank);
  int (*comm_destroy)(void *comm);
  int (*comm_count)(const void *comm, int *count);
  int (*comm_user_rank)(const void *comm, int *rank);
} iris_detail_nccl_lib_t;
#if defined(IRIS_USE_HIP)
#define IRIS_DETAIL_NCCL_SONAME "librccl.so"
#else
#define IRIS_DETAIL_NCCL_SONAME "libnccl.so.2"
#endif
IRIS_INTERNAL iris_status_t iris_detail_nccl_load(const iris_detail_nccl_lib_t **out) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static iris_detail_nccl_lib_t lib;
  static int loaded;
  static const char *const names[] = {"ncclGetErrorString", "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv",
                                      "ncclGroupStart", "ncclGroupEnd", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy", "ncclCommCount",
                                      "ncclCommUserRank"};
  void *fn[sizeof names / sizeof names[0]];
  const char *env = getenv("IRIS_NCCL_LIBRARY"), *which = env && *env ? env : IRIS_DETAIL_NCCL_SONAME;
  void *h = NULL;
  size_t i;
  iris_status_t st = IRIS_SUCCESS;
  pthread_mutex_lock(&mu);
  if (loaded) { *out = &lib; pthread_mutex_unlock(&mu); return IRIS_SUCCESS; }
  if (!(env && *env)) {
    void *self = dlopen(NULL, RTLD_LAZY);
    if (self && dlsym(self, "ncclAllReduce")) h = self, which = "this process";
  }
  if (!h && !(h = dlopen(which, RTLD_NOW | RTLD_GLOBAL))) {
    const char *why = dlerror();
    st = iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                          "a multi-node world needs NCCL/RCCL between the nodes, and %s could not be loaded (%s); install it, put it on LD_LIBRARY_PATH or name "
                          "it in IRIS_NCCL_LIBRARY",
                          which, why ? why : "?");
  }
  for (i = 0; st == IRIS_SUCCESS && i < sizeof names / sizeof names[0]; i++) {
    *(void **)&fn[i] = dlsym(h, names[i]);
    if (!fn[i]) st = iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "%s has no %s (NCCL 2.7 or later is needed)", which, names[i]);
  }
  if (st == IRIS_SUCCESS) {
    int (*get_version)(int *) = NULL;
    *(void **)&get_version = dlsym(h, "ncclGetVersion");
    memcpy(&lib.api.get_error_string, &fn[0], sizeof fn[0]);
    memcpy(&lib.api.all_reduce, &fn[1], sizeof fn[0]);
    memcpy(&lib.api.all_gather, &fn[2], sizeof fn[0]);
    memcpy(&lib.api.reduce_scatter, &fn[3], sizeof fn[0]);
    memcpy(&lib.api.broadcast, &fn[4], sizeof fn[0]);
    memcpy(&lib.api.send, &fn[5], sizeof fn[0]);
    memcpy(&lib.api.recv, &fn[6], sizeof fn[0]);
    memcpy(&lib.api.group_start, &fn[7], sizeof fn[0]);
    memcpy(&lib.api.group_end, &fn[8], sizeof fn[0]);
    memcpy(&lib.get_unique_id, &fn[9], sizeof fn[0]);
    memcpy(&lib.comm_init_rank, &fn[10], sizeof fn[0]);
    memcpy(&lib.comm_destroy, &fn[11], sizeof fn[0]);
    memcpy(&lib.comm_count, &fn[12], sizeof fn[0]);
    memcpy(&lib.comm_user_rank, &fn[13], sizeof fn[0]);
    if (!get_version || get_version(&lib.api.version) != 0) lib.api.version = 0;
    loaded = 1;
    *out = &lib;
  }
  pthread_mutex_unlock(&mu);
  return st;
}

/* Collective over the world: one rail communicator per local rank across the nodes
 * (its rank: this rank's node), or the caller's (user_comm, checked: size = nodes,
 * rank = node). The node-0 member of each rail makes the ncclUniqueId; the world's
 * exchange carries it. Every rank reports its outcome before and after NCCL's init,
 * so all fail alike (no partial context) and NCCL's init starts only once every rank
 * is ready for it. NCCL's own connection waits are bounded by NCCL, not timeout_ms. */
typedef struct iris_detail_rail_msg {
  int32_t status;
  char err[220];
  iris_detail_nccl_id_t id;
} iris_detail_rail_msg_t;
IRIS_INTERNAL iris_status_t iris_detail_rail_agree(iris_t *ctx, iris_detail_rail_msg_t *me, iris_detail_rail_msg_t *all) {
  iris_status_t st;
  int r;
  if ((st = iris_detail_comm_allgather_world(ctx, me, all, sizeof *me, ctx->timeout_ms)) != IRIS_SUCCESS) return st;
  for (r = 0; r < ctx->gworld; r++) {
    all[r].err[sizeof all[r].err - 1] = 0;
    if (all[r].status != 0)
      return iris_detail_fail(iris_detail_peer_status(all[r].status), "rank %d (node %d) could not set up its rail communicator: %s", r, r / ctx->world,
                              all[r].err);
  }
  return IRIS_SUCCESS;
}
IRIS_INTERNAL iris_status_t iris_detail_rails_setup(iris_t *ctx, void *user_comm) {
  const iris_detail_nccl_lib_t *lib = NULL;
  iris_detail_rail_msg_t me, *all = (iris_detail_rail_msg_t *)calloc((size_t)ctx->gworld, sizeof me);
  iris_status_t st, local;
  int res = 0;
  if (!all) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", ctx->grank);
  memset(&me, 0, sizeof me);
  local = iris_detail_nccl_load(&lib);
  if (local == IRIS_SUCCESS && user_comm) {
    int n = -1, k = -1;
    if (lib->comm_count(user_comm, &n) != 0 || lib->comm_user_rank(user_comm, &k) != 0 || n != ctx->nodes || k != ctx->node)
      local = iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: iris_config_t.rail_comm has %d ranks and rank %d in it, but a rail has one rank per node: %d ranks, rank %d (the node)",
                               ctx->grank, n, k, ctx->nodes, ctx->node);
  } else if (local == IRIS_SUCCESS && ctx->node == 0 && (res = lib->get_unique_id(&me.id)) != 0) {
    local = iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: ncclGetUniqueId failed: %s", ctx->grank, lib->api.get_error_string(res));
  }
  if (local != IRIS_SUCCESS) {
    me.status = (int32_t)local;
    iris_detail_copy(me.err, sizeof me.err, iris_detail_errbuf);
  }
  if ((st = iris_detail_rail_agree(ctx, &me, all)) == IRIS_SUCCESS) {
    ctx->nccl = &lib->api;
    if (user_comm) {
      ctx->rail = user_comm;
    } else {
      void *comm = NULL;
      /* rail l's id comes from its node-0 member, global rank l */
      if ((res = lib->comm_init_rank(&comm, ctx->nodes, all[ctx->rank].id, ctx->node)) != 0) {
        me.status = (int32_t)IRIS_ERROR_UNSUPPORTED;
        snprintf(me.err, sizeof me.err, "ncclCommInitRank (rail %d, %d nodes) failed: %s", ctx->rank, ctx->nodes, lib->api.get_error_string(res));
        comm = NULL;
      }
      ctx->rail = comm;
      ctx->rail_owned = comm != NULL;
      st = iris_detail_rail_agree(ctx, &me, all); /* iris_detail_release destroys ours on failure */
    }
  }
  free(all);
  return st;
}
IRIS_DEF const iris_nccl_api_t *iris_detail_nccl(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) && ctx->nodes > 1 ? ctx->nccl : NULL; }

/* ---------------------------------------------------------------- bring-up -- */
IRIS_INTERNAL void iris_detail_release_gpu(iris_t *ctx) {
  int r, old = -1;
  iris_gpu_get_device(&old);
  iris_gpu_set_device(ctx->device);
  for (r = 0; r < ctx->world; r++)
    if (ctx->ipc_opened[r]) { iris_gpu_ipc_close(ctx->bases[r]); ctx->ipc_opened[r] = 0; }
  if (ctx->bases[ctx->rank]) iris_gpu_free(ctx->bases[ctx->rank]);
  ctx->bases[ctx->rank] = NULL;
  if (ctx->fault_host) iris_gpu_host_free(ctx->fault_host);
  ctx->fault_host = ctx->fault_dev = NULL;
  if (ctx->order_events) {
    iris_gpu_event_destroy(ctx->order_eager);
    iris_gpu_event_destroy(ctx->order_cap);
    ctx->order_events = 0;
  }
  if (old >= 0) iris_gpu_set_device(old);
}
/* Frees everything ctx holds; the struct itself stays (iris_finalize keeps it as a
 * tombstone, iris_detail_destroy frees it). */
IRIS_INTERNAL void iris_detail_release(iris_t *ctx) {
  if (ctx->ext && ctx->ext_free) ctx->ext_free(ctx->ext);
  ctx->ext = NULL;
  if (ctx->mode != 0) iris_detail_release_gpu(ctx); /* mode 0: a host-only test context */
  if (ctx->rail && ctx->rail_owned && ctx->nccl) ((const iris_detail_nccl_lib_t *)(const void *)ctx->nccl)->comm_destroy(ctx->rail);
  ctx->rail = NULL;
  ctx->nccl = NULL;
  if (ctx->rdv) iris_rendezvous_close(ctx->rdv);
  if (ctx->group) iris_detail_group_release(ctx->group);
  free(ctx->blocks);
  ctx->rdv = NULL;
  ctx->group = NULL;
  ctx->blocks = NULL;
  ctx->nblocks = ctx->capblocks = 0;
  memset(ctx->bases, 0, sizeof ctx->bases);
}
IRIS_INTERNAL void iris_detail_destroy(iris_t *ctx) {
  if (!ctx) return;
  iris_detail_release(ctx);
  free(ctx);
}

IRIS_INTERNAL iris_status_t iris_detail_resolve_config(const iris_config_t *cfg, iris_config_t *c) {
  iris_config_t def = IRIS_CONFIG_INIT;
  *c = def;
  if (cfg) {
    if (cfg->struct_size != sizeof(iris_config_t))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_config_t.struct_size is %zu, this iris expects %zu: start from IRIS_CONFIG_INIT",
                              cfg->struct_size, sizeof(iris_config_t));
    *c = *cfg;
  }
  if (c->heap_size == 0) {
    const char *env = getenv("IRIS_HEAP_SIZE");
    iris_status_t st;
    if (env && *env) {
      if ((st = iris_detail_parse_size_var("IRIS_HEAP_SIZE", env, &c->heap_size)) != IRIS_SUCCESS) return st;
      if (c->heap_size == 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_HEAP_SIZE=%s: the heap needs at least 1 byte", env);
    } else {
      c->heap_size = IRIS_DEFAULT_HEAP_SIZE;
    }
  }
  if (c->heap_size > SIZE_MAX - (((size_t)2 << 20) - 1))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "heap size %zu bytes (iris_config_t.heap_size or IRIS_HEAP_SIZE) overflows when rounded up to 2 MiB",
                            c->heap_size);
  c->heap_size = (c->heap_size + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1); /* whole 2 MiB pages */
  if (c->timeout_ms <= 0) {
    int got = iris_detail_env_int("IRIS_TIMEOUT_MS", &c->timeout_ms);
    if (got < 0) return IRIS_ERROR_INVALID_ARGUMENT;
    if (got == 0 || c->timeout_ms <= 0) c->timeout_ms = IRIS_DEFAULT_TIMEOUT_MS;
  }
  if (c->barrier_timeout_ms <= 0) {
    int got = iris_detail_env_int("IRIS_BARRIER_TIMEOUT_MS", &c->barrier_timeout_ms);
    if (got < 0) return IRIS_ERROR_INVALID_ARGUMENT;
    if (got == 0 || c->barrier_timeout_ms <= 0) c->barrier_timeout_ms = IRIS_DEFAULT_BARRIER_TIMEOUT_MS;
  }
  if (c->heap_memory < IRIS_HEAP_MEMORY_DEFAULT || c->heap_memory > IRIS_HEAP_MEMORY_COARSE)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_config_t.heap_memory %d is not an iris_heap_memory_t", (int)c->heap_memory);
  if (c->heap_memory == IRIS_HEAP_MEMORY_DEFAULT) c->heap_memory = IRIS_HEAP_MEMORY_FINE;
  return IRIS_SUCCESS;
}

/* Allocate and zero this rank's heap on ctx->device; fill the exchange record. */
IRIS_INTERNAL iris_status_t iris_detail_setup_gpu(iris_t *ctx, iris_detail_record_t *rec) {
  void *heap = NULL;
  iris_gpu_ipc_handle_t h;
  IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_set_device(ctx->device));
  IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_malloc(&heap, ctx->heap_size, ctx->heap_memory));
  ctx->bases[ctx->rank] = (char *)heap;
  IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_memset(heap, 0, ctx->heap_size));
  IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_synchronize());
  {
    void *h = NULL, *d = NULL;
    IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_host_alloc_mapped(&h, 2 * sizeof(unsigned long long)));
    ctx->fault_host = (unsigned long long *)h;
    ctx->fault_host[0] = ctx->fault_host[1] = 0;
    IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_host_device_ptr(&d, h));
    ctx->fault_dev = (unsigned long long *)d;
  }
  IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_event_create(&ctx->order_eager));
  if (iris_gpu_event_create(&ctx->order_cap) != IRIS_GPU_SUCCESS) {
    iris_gpu_event_destroy(ctx->order_eager);
    return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: creating an event failed", ctx->rank);
  }
  ctx->order_events = 1;
  if (ctx->mode != IRIS_DETAIL_MODE_LOCAL) {
    IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_ipc_get(&h, heap));
    memcpy(rec->ipc, &h, sizeof h < sizeof rec->ipc ? sizeof h : sizeof rec->ipc);
  }
  rec->base = (uint64_t)(uintptr_t)heap;
  iris_gpu_pci_bus_id(rec->pci, (int)sizeof rec->pci, ctx->device);
  return IRIS_SUCCESS;
}

/* Map every peer's heap: same process -> peer access; other process -> IPC. */
IRIS_INTERNAL iris_status_t iris_detail_map_peers(iris_t *ctx, const iris_detail_record_t *rec) {
  int r;
  for (r = 0; r < ctx->world; r++) {
    if (r == ctx->rank) continue;
    if (iris_detail_same_process(&rec[r])) {
      if (rec[r].device != ctx->device) {
        int ok = 0;
        IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_can_access_peer(&ok, ctx->device, rec[r].device));
        if (!ok)
          return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: GPU %d cannot access GPU %d (rank %d) directly; iris needs peer-to-peer access", ctx->rank,
                                  ctx->device, rec[r].device, r);
        IRIS_DETAIL_GPU_CALL(ctx->rank, iris_gpu_enable_peer(rec[r].device));
      }
      ctx->bases[r] = (char *)(uintptr_t)rec[r].base;
    } else {
      iris_gpu_ipc_handle_t h;
      void *p = NULL;
      iris_gpu_error_t e;
      memcpy(&h, rec[r].ipc, sizeof h < sizeof rec[r].ipc ? sizeof h : sizeof rec[r].ipc);
      e = iris_gpu_ipc_open(&p, h);
      if (e != IRIS_GPU_SUCCESS)
        return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: mapping rank %d's heap (GPU %s) failed: %s (" IRIS_GPU_NAME " error %d); the GPUs must be on one host and able to reach each other peer-to-peer",
                                ctx->rank, r, rec[r].pci, iris_gpu_error_text(e), (int)e);
      ctx->bases[r] = (char *)p;
      ctx->ipc_opened[r] = 1;
    }
  }
  return IRIS_SUCCESS;
}

/* ------------------------------------------------------ launchers' environments -- */
typedef struct iris_detail_launcher_vars {
  iris_launcher_t id;
  const char *name, *rank, *world, *local_rank, *local_size;
} iris_detail_launcher_vars_t;
/* precedence order; Slurm last (see iris_launch_env) */
static const iris_detail_launcher_vars_t iris_detail_launchers[] = {
    {IRIS_LAUNCHER_IRIS, "iris", "IRIS_RANK", "IRIS_WORLD_SIZE", "IRIS_LOCAL_RANK", "IRIS_LOCAL_WORLD_SIZE"},
    {IRIS_LAUNCHER_TORCHRUN, "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {IRIS_LAUNCHER_OPENMPI, "Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {IRIS_LAUNCHER_MPICH, "MPICH/Intel MPI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {IRIS_LAUNCHER_SLURM, "Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL}};
#define IRIS_DETAIL_NLAUNCHERS ((int)(sizeof iris_detail_launchers / sizeof iris_detail_launchers[0]))

IRIS_INTERNAL const char *iris_detail_getenv(void *user, const char *name) {
  (void)user;
  return getenv(name);
}
/* A variable through lookup; NULL when unset or empty. */
IRIS_INTERNAL const char *iris_detail_var(iris_getenv_fn get, void *user, const char *name) {
  const char *v = name ? get(user, name) : NULL;
  return v && *v ? v : NULL;
}

/* One launcher's set: *present 0 when absent, 1 when complete and consistent (e
 * filled); an error status (detail set) when malformed or inconsistent. */
IRIS_INTERNAL iris_status_t iris_detail_launcher_set(const iris_detail_launcher_vars_t *L, iris_getenv_fn get, void *user, iris_launch_env_t *e, int *present) {
  const char *rs = iris_detail_var(get, user, L->rank), *ws = iris_detail_var(get, user, L->world);
  int lr = -1, ls = 0, got;
  *present = 0;
  if (L->id == IRIS_LAUNCHER_SLURM) {
    /* only an srun step describes ranks; a batch script's (or salloc shell's) variables
     * describe the allocation. Steps 0xfffffff0 and up are Slurm's batch/extern/
     * interactive steps. */
    const char *step = iris_detail_var(get, user, "SLURM_STEP_ID");
    int sid = 0;
    if (!step) step = iris_detail_var(get, user, "SLURM_STEPID");
    if (!step || strlen(step) > 9 || iris_detail_parse_uint("SLURM_STEP_ID", step, &sid) != 1) return IRIS_SUCCESS;
  }
  if (!rs && !ws) return IRIS_SUCCESS;
  if (!rs || !ws) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%.40s is set but %s is not: %s's variables are incomplete (set both, or neither)", rs ? L->rank : L->world, rs ? rs : ws, rs ? L->world : L->rank, L->name);
  memset(e, 0, sizeof *e);
  e->launcher = L->id;
  e->launcher_name = L->name;
  if (iris_detail_parse_uint(L->rank, rs, &e->rank) < 0 || iris_detail_parse_uint(L->world, ws, &e->world_size) < 0) return IRIS_ERROR_INVALID_ARGUMENT;
  if ((got = iris_detail_parse_uint(L->local_rank, iris_detail_var(get, user, L->local_rank), &lr)) < 0) return IRIS_ERROR_INVALID_ARGUMENT;
  if (got == 0) lr = -1;
  if (L->local_size && iris_detail_parse_uint(L->local_size, iris_detail_var(get, user, L->local_size), &ls) < 0) return IRIS_ERROR_INVALID_ARGUMENT;
  if (e->world_size < 1) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%s: a world needs at least 1 rank (%s)", L->world, ws, L->name);
  if (e->world_size > IRIS_MAX_RANKS) { /* allowed over several nodes (the node size is checked at iris_init) */
    const char *rdv = iris_detail_var(get, user, "IRIS_RENDEZVOUS");
    if (e->world_size > 65536 || !((ls > 0 && ls < e->world_size) || (rdv && strcmp(rdv, "tcp") == 0)))
      return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "%s=%s exceeds IRIS_MAX_RANKS (%d) on one node; rebuild every unit with a larger -DIRIS_MAX_RANKS (or, over "
                              "several nodes, set IRIS_RENDEZVOUS=tcp: docs/multinode.md)", L->world, ws, IRIS_MAX_RANKS);
  }
  if (e->rank >= e->world_size) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "%s=%s is not below %s=%s (%s)", L->rank, rs, L->world, ws, L->name);
  if (ls > e->world_size) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%d exceeds %s=%d (%s)", L->local_size, ls, L->world, e->world_size, L->name);
  if (lr >= 0 && ls > 0 && lr >= ls) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "%s=%d is not below %s=%d (%s)", L->local_rank, lr, L->local_size, ls, L->name);
  e->local_rank = lr >= 0 ? lr : e->rank;
  e->local_size = ls;
  if (L->id == IRIS_LAUNCHER_IRIS && ls == 0 && lr < 0) e->local_size = e->world_size; /* iris_launch_local: one host */
  *present = 1;
  return IRIS_SUCCESS;
}

/* The job id of launcher id, into e->job ("" when it has none). */
IRIS_INTERNAL void iris_detail_launcher_job(iris_launcher_t id, iris_getenv_fn get, void *user, iris_launch_env_t *e) {
  char buf[512];
  const char *a = NULL, *b = NULL, *port = iris_detail_var(get, user, "MASTER_PORT");
  buf[0] = 0;
  switch (id) {
  case IRIS_LAUNCHER_IRIS: a = iris_detail_var(get, user, "IRIS_JOB_TOKEN"); break;
  case IRIS_LAUNCHER_TORCHRUN:
    /* the run id ("none" unless --rdzv-id or --standalone), the restart attempt, and
     * the store's port, which two live jobs on one master host cannot share */
    a = iris_detail_var(get, user, "TORCHELASTIC_RUN_ID");
    b = iris_detail_var(get, user, "TORCHELASTIC_RESTART_COUNT");
    if (a || port)
      snprintf(buf, sizeof buf, "torch.%s%s%s%s%s", a ? a : iris_detail_var(get, user, "MASTER_ADDR") ? iris_detail_var(get, user, "MASTER_ADDR") : "",
               b ? ".r" : "", b ? b : "", port ? ".p" : "", port ? port : "");
    a = NULL;
    break;
  case IRIS_LAUNCHER_OPENMPI:
    a = iris_detail_var(get, user, "PMIX_NAMESPACE");
    if (!a) a = iris_detail_var(get, user, "OMPI_MCA_ess_base_jobid");
    break;
  case IRIS_LAUNCHER_MPICH:
    a = iris_detail_var(get, user, "PMI_JOBID");
    if (!a) a = iris_detail_var(get, user, "I_MPI_HYDRA_UUID");
    break;
  default: break;
  }
  if (a) snprintf(buf, sizeof buf, "%s", a);
  if (!buf[0] && id != IRIS_LAUNCHER_IRIS && id != IRIS_LAUNCHER_NONE) {
    /* Slurm's job and step, for its own ranks and for launchers started inside a step */
    a = iris_detail_var(get, user, "SLURM_JOB_ID");
    b = iris_detail_var(get, user, "SLURM_STEP_ID");
    if (!b) b = iris_detail_var(get, user, "SLURM_STEPID");
    if (a && b) snprintf(buf, sizeof buf, "slurm.%s.%s", a, b);
  }
  iris_detail_job_token(buf, e->job, sizeof e->job);
}

IRIS_DEF iris_status_t iris_launch_env(iris_getenv_fn lookup, void *user, iris_launch_env_t *out) {
  iris_launch_env_t e, first;
  const iris_detail_launcher_vars_t *chosen = NULL;
  int i, got;
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_env: out is NULL");
  if (!lookup) lookup = iris_detail_getenv;
  memset(out, 0, sizeof *out);
  memset(&first, 0, sizeof first);
  for (i = 0; i < IRIS_DETAIL_NLAUNCHERS; i++) {
    const iris_detail_launcher_vars_t *L = &iris_detail_launchers[i];
    if (L->id == IRIS_LAUNCHER_SLURM && chosen) break; /* torchrun or an MPI inside a Slurm step */
    iris_status_t st = iris_detail_launcher_set(L, lookup, user, &e, &got);
    if (st != IRIS_SUCCESS) return st;
    if (!got) continue;
    if (!chosen) {
      chosen = L;
      first = e;
      if (L->id == IRIS_LAUNCHER_IRIS) break; /* explicit: overrides every launcher */
    } else if (e.world_size != first.world_size) {
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "%s says %s=%d but %s says %s=%d: two launchers disagree on the world size; unset the stale variables",
                              chosen->name, chosen->world, first.world_size, L->name, L->world, e.world_size);
    }
  }
  if (!chosen) {
    out->launcher = IRIS_LAUNCHER_NONE;
    out->launcher_name = "none";
    out->world_size = 1;
    out->local_size = 1;
    return IRIS_SUCCESS;
  }
  *out = first;
  iris_detail_launcher_job(first.launcher, lookup, user, out);
  return IRIS_SUCCESS;
}

/* The rendezvous name: the given one; else "job-<job id>" (so two jobs on one host do
 * not meet); "" when neither exists. Characters outside [A-Za-z0-9._-] become '_'; a
 * job id too long for a name is cut and followed by its hash. */
IRIS_INTERNAL void iris_detail_default_rendezvous(const char *given, const char *job, char *name, size_t cap) {
  char *c;
  if (given && *given) snprintf(name, cap, "%s", given);
  else if (job && *job && strlen(job) <= 60) snprintf(name, cap, "job-%.60s", job);
  else if (job && *job) {
    uint64_t h = 14695981039346656037ULL;
    for (c = (char *)job; *c; c++) h = iris_detail_fnv(h, (unsigned char)*c);
    snprintf(name, cap, "job-%.43s-%016llx", job, (unsigned long long)h);
  } else name[0] = 0;
  for (c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-')) *c = '_';
}

IRIS_DEF iris_status_t iris_init(const iris_config_t *cfg, iris_t **out) {
  iris_config_t c;
  iris_t *ctx;
  iris_detail_record_t *recs = NULL, *me;
  iris_status_t st, local;
  iris_launch_env_t env;
  int ndev = 0, old = -1, local_rank = 0, tcp = 0, port = 0;
  char name[72], addr[96];
  const char *source = "iris_config_t"; /* where rank and world came from */
  const char *given;
  iris_gpu_error_t e;
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init: out is NULL");
  *out = NULL;
  if ((st = iris_detail_resolve_config(cfg, &c)) != IRIS_SUCCESS) return st;
  /* rank, world and local rank: cfg's, else the launcher's environment. When cfg gives
   * both, the environment only lends its job id (and its errors do not count). */
  st = iris_launch_env(NULL, NULL, &env);
  if (st != IRIS_SUCCESS) {
    if (c.rank < 0 || c.world_size <= 0) return iris_detail_prefix(st, "iris_init");
    memset(&env, 0, sizeof env);
  }
  if (c.rank < 0 && c.world_size <= 0) {
    c.rank = env.world_size > 0 ? env.rank : 0;
    c.world_size = env.world_size > 0 ? env.world_size : 1;
    local_rank = env.local_rank;
    source = env.launcher_name;
  } else if (c.rank < 0 || c.world_size <= 0) {
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init: cfg gives %s but not %s; set both iris_config_t.rank and .world_size, or neither",
                            c.rank < 0 ? "world_size" : "rank", c.rank < 0 ? "rank" : "world_size");
  } else { /* cfg's rank; the launcher's local rank when it describes the same rank */
    local_rank = env.launcher != IRIS_LAUNCHER_NONE && env.rank == c.rank && env.world_size == c.world_size ? env.local_rank : c.rank;
  }
  given = c.rendezvous ? c.rendezvous : getenv("IRIS_RENDEZVOUS");
  if (!c.bootstrap && (st = iris_detail_tcp_choice(NULL, NULL, given, c.rank >= 0 && env.launcher != IRIS_LAUNCHER_NONE ? &env : NULL, &tcp, addr, sizeof addr,
                                                   &port)) != IRIS_SUCCESS)
    return iris_detail_prefix(st, "iris_init");
  /* worlds that may span nodes (TCP, a bootstrap, IRIS_HOST_ID) check the node size
   * once the ranks are grouped; a world on one host's Unix socket is one node */
  if (c.world_size > IRIS_MAX_RANKS && !tcp && !c.bootstrap && !(getenv("IRIS_HOST_ID") && *getenv("IRIS_HOST_ID")))
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_init: world size %d exceeds IRIS_MAX_RANKS (%d); rebuild every unit with a larger -DIRIS_MAX_RANKS",
                            c.world_size, IRIS_MAX_RANKS);
  if (c.world_size > 65536) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_init: world size %d exceeds 65536", c.world_size);
  if (c.rank < 0 || c.rank >= c.world_size)
    return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "iris_init: rank %d outside [0, %d) (set IRIS_RANK)", c.rank, c.world_size);
  if (c.bootstrap && (!c.bootstrap->allgather || !c.bootstrap->barrier))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init: the bootstrap needs both an allgather and a barrier callback");
  iris_detail_default_rendezvous(given, env.job, name, sizeof name);
  if (tcp && !name[0]) iris_detail_copy(name, sizeof name, "tcp");
  if (!c.bootstrap && !name[0] && c.world_size > 1)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT,
                            "iris_init: rank %d of %d (from %s) has no rendezvous name: the launcher gives no job id; set IRIS_RENDEZVOUS (or "
                            "iris_config_t.rendezvous) to a name shared by this job's ranks and unique on this host",
                            c.rank, c.world_size, source);
  if (!name[0]) iris_detail_copy(name, sizeof name, "single");

  ctx = (iris_t *)calloc(1, sizeof *ctx);
  recs = (iris_detail_record_t *)calloc((size_t)c.world_size + 1, sizeof *recs);
  if (!ctx || !recs) { free(ctx); free(recs); return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "iris_init: out of host memory"); }
  ctx->magic = IRIS_DETAIL_CTX_LIVE;
  ctx->rank = c.rank;
  ctx->world = c.world_size;
  ctx->heap_size = c.heap_size;
  ctx->heap_memory = c.heap_memory;
  ctx->timeout_ms = c.timeout_ms;
  ctx->barrier_timeout_ms = c.barrier_timeout_ms;
  ctx->device = -1;
  ctx->grank = c.rank;
  ctx->gworld = c.world_size;
  ctx->nodes = 1;

  /* 1. meet the other ranks (this also refuses mismatched world or heap sizes) */
  if (c.bootstrap) {
    ctx->mode = IRIS_DETAIL_MODE_HOOKS;
    ctx->hooks = *c.bootstrap;
  } else {
    iris_rendezvous_params_t p;
    ctx->mode = IRIS_DETAIL_MODE_RENDEZVOUS;
    memset(&p, 0, sizeof p);
    p.job = env.job;
    p.name = name;
    p.dir = c.rendezvous_dir;
    p.rank = c.rank;
    p.world_size = c.world_size;
    p.timeout_ms = c.timeout_ms;
    p.heap_size = c.heap_size;
    if ((st = tcp ? iris_rendezvous_open_tcp(&p, addr, port, &ctx->rdv) : iris_rendezvous_open(&p, &ctx->rdv)) != IRIS_SUCCESS) goto fail;
  }

  /* 1b. worlds that may span nodes: group the ranks by host identity; from here on
   *     ctx->rank and ctx->world are this node's (docs/multinode.md) */
  if (c.world_size > 1 && (tcp || c.bootstrap || (getenv("IRIS_HOST_ID") && *getenv("IRIS_HOST_ID")))) {
    char mine[IRIS_DETAIL_HOST_ID_BYTES], *ids = (char *)malloc((size_t)c.world_size * sizeof mine);
    int32_t bad;
    memset(mine, 0, sizeof mine);
    local = iris_detail_host_id(NULL, NULL, mine, sizeof mine);
    if (local != IRIS_SUCCESS) { /* every rank must still take part: send an empty id, fail after */
      bad = 1;
      mine[0] = 0;
    } else bad = 0;
    if (!ids) st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "iris_init: out of host memory");
    else if ((st = iris_detail_comm_allgather_world(ctx, mine, ids, sizeof mine, c.timeout_ms)) == IRIS_SUCCESS) {
      int r;
      for (r = 0; r < c.world_size; r++) {
        ids[(size_t)r * sizeof mine + sizeof mine - 1] = 0;
        if (!ids[(size_t)r * sizeof mine] && st == IRIS_SUCCESS)
          st = bad && r == c.rank ? iris_detail_prefix(local, "iris_init")
                                  : iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init: rank %d has no valid host identity (see its IRIS_HOST_ID)", r);
      }
      if (st == IRIS_SUCCESS && (st = iris_detail_group_nodes(ids, sizeof mine, c.world_size, c.rank, &ctx->node, &ctx->nodes, &ctx->rank, &ctx->world)) !=
                                    IRIS_SUCCESS)
        st = iris_detail_prefix(st, "iris_init");
    }
    free(ids);
    if (st != IRIS_SUCCESS) goto fail;
  } /* the GPU stays the launcher's local rank % GPUs (virtual nodes of one machine spread over its GPUs) */

  /* 2. set up our GPU; a failure here is reported to every rank through the record */
  iris_gpu_get_device(&old);
  me = &recs[c.world_size];
  me->magic = IRIS_DETAIL_MAGIC;
  me->version = IRIS_VERSION;
  me->rank = ctx->rank;
  me->world = ctx->world;
  me->heap_size = c.heap_size;
  me->heap_memory = (int32_t)c.heap_memory;
  me->pid = (int64_t)getpid();
  me->uid = (uint32_t)getuid();
  iris_detail_process_token(me->proc_token);
  iris_detail_host_identity(me);
  e = iris_gpu_device_count(&ndev);
  if (e != IRIS_GPU_SUCCESS || ndev <= 0) {
    local = e != IRIS_GPU_SUCCESS ? iris_detail_gpu_fail(c.rank, "counting GPUs (" IRIS_GPU_NAME " GetDeviceCount)", e)
                                  : iris_detail_fail(IRIS_ERROR_GPU, "rank %d: no GPU is visible to this process", c.rank);
  } else {
    int got = c.device < 0 ? iris_detail_env_int("IRIS_DEVICE", &c.device) : 1;
    if (got == 0) c.device = local_rank % ndev; /* ranks beyond the GPU count share GPUs */
    ctx->device = c.device;
    me->device = c.device;
    if (got < 0)
      local = iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_init");
    else if (c.device < 0 || c.device >= ndev)
      local = iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: device %d does not exist (%d visible)", c.rank, c.device, ndev);
    else
      local = iris_detail_setup_gpu(ctx, me);
  }
  if (local != IRIS_SUCCESS) {
    me->status = (int32_t)local;
    iris_detail_copy(me->err, sizeof me->err, iris_detail_errbuf);
  }

  /* 3. exchange records, check them, map the peers, and meet once more so nobody
   *    returns before every rank can reach every heap */
  if ((st = iris_detail_comm_allgather(ctx, me, recs, sizeof *me, c.timeout_ms)) != IRIS_SUCCESS) goto fail;
  if (local != IRIS_SUCCESS) { st = iris_detail_fail(local, "%s", me->err); goto fail; }
  if ((st = iris_detail_check_records(recs, ctx->world)) != IRIS_SUCCESS) goto fail;
  {
    int r;
    for (r = 0; r < ctx->world; r++) ctx->pids[r] = recs[r].pidns && recs[r].pidns == me->pidns ? recs[r].pid : 0;
  }
  {
    /* a mapping failure on one rank must fail all ranks: exchange the outcome */
    int32_t ok = (int32_t)iris_detail_map_peers(ctx, recs), *all = (int32_t *)recs; /* recs is no longer needed */
    char why[256];
    int r;
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    if ((st = iris_detail_comm_allgather(ctx, &ok, all, sizeof ok, c.timeout_ms)) != IRIS_SUCCESS) goto fail;
    if (ok != IRIS_SUCCESS) { st = iris_detail_fail((iris_status_t)ok, "%s", why); goto fail; }
    for (r = 0; r < ctx->world; r++)
      if (all[r] != IRIS_SUCCESS) { st = iris_detail_fail(iris_detail_peer_status(all[r]), "rank %d could not map its peers' heaps (see that rank's error)", r); goto fail; }
  }
  if ((st = iris_detail_heap_reset(ctx)) != IRIS_SUCCESS) goto fail;
  free(recs);
  recs = NULL;
  iris_gpu_set_device(ctx->device); /* this rank's GPU stays current for the caller */
  if (ctx->nodes > 1 && (st = iris_detail_rails_setup(ctx, c.rail_comm)) != IRIS_SUCCESS) goto fail;
  *out = ctx;
  return IRIS_SUCCESS;
fail:
  free(recs);
  iris_detail_destroy(ctx);
  if (old >= 0) iris_gpu_set_device(old);
  return st;
}

IRIS_DEF iris_status_t iris_init_local(const iris_config_t *cfg, int num_gpus, const int *devices, iris_t **out_ctxs) {
  iris_config_t c;
  iris_detail_group_t *g;
  iris_detail_record_t rec;
  iris_status_t st;
  int i, j, ndev = 0, old = -1;
  iris_gpu_error_t e;
  if (!out_ctxs) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init_local: out_ctxs is NULL");
  if (num_gpus < 1 || num_gpus > IRIS_MAX_RANKS)
    return iris_detail_fail(num_gpus < 1 ? IRIS_ERROR_INVALID_ARGUMENT : IRIS_ERROR_UNSUPPORTED, "iris_init_local: %d GPUs requested; 1 to IRIS_MAX_RANKS (%d) supported",
                            num_gpus, IRIS_MAX_RANKS);
  for (i = 0; i < num_gpus; i++) out_ctxs[i] = NULL;
  if ((st = iris_detail_resolve_config(cfg, &c)) != IRIS_SUCCESS) return st;
  if ((e = iris_gpu_device_count(&ndev)) != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(0, "counting GPUs (" IRIS_GPU_NAME " GetDeviceCount)", e);
  for (i = 0; i < num_gpus; i++) {
    int d = devices ? devices[i] : i;
    if (d < 0 || d >= ndev) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_init_local: device %d for rank %d does not exist (%d visible)", d, i, ndev);
  }
  if (!(g = iris_detail_group_create(num_gpus))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  for (i = 0; i < num_gpus; i++) g->devices[i] = devices ? devices[i] : i;
  iris_gpu_get_device(&old);
  st = IRIS_SUCCESS;
  for (i = 0; i < num_gpus; i++) {
    iris_t *ctx = (iris_t *)calloc(1, sizeof *ctx);
    if (!ctx) { st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory"); break; }
    ctx->rank = i;
    ctx->world = num_gpus;
    ctx->device = devices ? devices[i] : i;
    ctx->mode = IRIS_DETAIL_MODE_LOCAL;
    ctx->magic = IRIS_DETAIL_CTX_LIVE;
    ctx->heap_size = c.heap_size;
    ctx->heap_memory = c.heap_memory;
    ctx->timeout_ms = c.timeout_ms;
    ctx->barrier_timeout_ms = c.barrier_timeout_ms;
    ctx->group = g;
    out_ctxs[i] = ctx;
    memset(&rec, 0, sizeof rec);
    if ((st = iris_detail_setup_gpu(ctx, &rec)) != IRIS_SUCCESS) break;
    if ((st = iris_detail_heap_reset(ctx)) != IRIS_SUCCESS) break;
  }
  for (i = 0; st == IRIS_SUCCESS && i < num_gpus; i++) {
    iris_t *a = out_ctxs[i];
    for (j = 0; j < num_gpus; j++) {
      iris_t *b = out_ctxs[j];
      a->bases[j] = b->bases[j];
      if (j == i || a->device == b->device) continue;
      {
        int ok = 0;
        if ((e = iris_gpu_can_access_peer(&ok, a->device, b->device)) != IRIS_GPU_SUCCESS) { st = iris_detail_gpu_fail(i, "DeviceCanAccessPeer", e); break; }
        if (!ok) {
          st = iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_init_local: GPU %d cannot access GPU %d directly; iris needs peer-to-peer access", a->device, b->device);
          break;
        }
        if ((e = iris_gpu_set_device(a->device)) != IRIS_GPU_SUCCESS || (e = iris_gpu_enable_peer(b->device)) != IRIS_GPU_SUCCESS) {
          st = iris_detail_gpu_fail(i, "DeviceEnablePeerAccess", e);
          break;
        }
      }
    }
  }
  if (st != IRIS_SUCCESS) {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    for (i = 0; i < num_gpus; i++) {
      if (out_ctxs[i]) {
        for (j = 0; j < num_gpus; j++)
          if (j != i) out_ctxs[i]->bases[j] = NULL; /* only free our own */
        iris_detail_destroy(out_ctxs[i]);
      } else {
        iris_detail_group_release(g);
      }
      out_ctxs[i] = NULL;
    }
    iris_detail_fail(st, "%s", why);
  }
  if (old >= 0) iris_gpu_set_device(old);
  return st;
}

IRIS_DEF iris_status_t iris_barrier(iris_t *ctx) {
  iris_status_t st;
  iris_gpu_error_t e;
  int old = -1;
  IRIS_DETAIL_LIVE(ctx, "iris_barrier");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  iris_gpu_get_device(&old);
  e = iris_gpu_set_device(ctx->device);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
  if (old >= 0) iris_gpu_set_device(old);
  if (e != IRIS_GPU_SUCCESS) return iris_detail_gpu_fail(ctx->rank, "iris_barrier: device synchronize", e);
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st; /* a kernel of ours gave up waiting */
  st = iris_detail_comm_barrier(ctx, ctx->barrier_timeout_ms);
#if defined(IRIS_DEBUG)
  if (st == IRIS_SUCCESS) st = iris_heap_verify(ctx);
#endif
  if (st == IRIS_SUCCESS && ctx->fault_host && iris_detail_fault_read(ctx, 1)) st = iris_get_async_error(ctx); /* a pending mismatch */
  return st;
}

IRIS_DEF iris_status_t iris_allgather_host(iris_t *ctx, const void *send, void *recv, size_t bytes) {
  IRIS_DETAIL_LIVE(ctx, "iris_allgather_host");
  if (bytes && (!send || !recv)) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_allgather_host: NULL argument");
  if (ctx->mode == IRIS_DETAIL_MODE_RENDEZVOUS || ctx->mode == IRIS_DETAIL_MODE_LOCAL || bytes)
    return iris_detail_comm_allgather_world(ctx, send, recv, bytes, ctx->barrier_timeout_ms);
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_finalize(iris_t *ctx) {
  iris_status_t st = IRIS_SUCCESS;
  int old = -1;
  IRIS_DETAIL_LIVE(ctx, "iris_finalize");
  if (ctx->mode == 0) {
    /* a host-only test context: no GPU, no peers */
  } else if (ctx->mode == IRIS_DETAIL_MODE_LOCAL) {
    /* one thread may finalize all contexts in turn, so no cross-thread barrier here;
     * instead wait for every GPU of the group, so no peer kernel still uses this heap */
    int r;
    iris_gpu_get_device(&old);
    for (r = 0; r < ctx->group->world; r++)
      if (iris_gpu_set_device(ctx->group->devices[r]) == IRIS_GPU_SUCCESS) iris_gpu_synchronize();
    if (old >= 0) iris_gpu_set_device(old);
  } else if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) {
    /* a peer died or hangs (or iris_abort): do not meet the others; our kernels have
     * given up their waits, so the device synchronises, and then everything is freed */
    int old2 = -1;
    iris_gpu_get_device(&old2);
    if (iris_gpu_set_device(ctx->device) == IRIS_GPU_SUCCESS) iris_gpu_synchronize();
    if (old2 >= 0) iris_gpu_set_device(old2);
    st = IRIS_SUCCESS; /* the fault was reported by the calls before; this teardown worked */
  } else {
    st = iris_barrier(ctx);
  }
  if (ctx->mode == IRIS_DETAIL_MODE_LOCAL) {
    int r;
    for (r = 0; r < ctx->world; r++)
      if (r != ctx->rank) ctx->bases[r] = NULL;
  }
  {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    iris_detail_release(ctx);
    ctx->magic = IRIS_DETAIL_CTX_DEAD; /* the tombstone: later calls see "finalized" */
    if (st != IRIS_SUCCESS) iris_detail_fail(st, "%s", why);
  }
  return st;
}

/* ------------------------------------------------------------------- queries -- */
IRIS_DEF int iris_rank(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? (ctx->nodes > 1 ? ctx->grank : ctx->rank) : -1; }
IRIS_DEF int iris_world_size(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? (ctx->nodes > 1 ? ctx->gworld : ctx->world) : 0; }
IRIS_DEF int iris_local_rank(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->rank : -1; }
IRIS_DEF int iris_local_size(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->world : 0; }
IRIS_DEF int iris_node(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? (ctx->nodes > 1 ? ctx->node : 0) : -1; }
IRIS_DEF int iris_num_nodes(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? (ctx->nodes > 1 ? ctx->nodes : 1) : 0; }
IRIS_DEF void *iris_rail_comm(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) && ctx->nodes > 1 ? ctx->rail : NULL; }
/* A global rank's index on this node (-1: another node's rank or out of range). */
IRIS_INTERNAL int iris_detail_local_index(const iris_t *ctx, int rank) {
  int first = ctx->nodes > 1 ? ctx->node * ctx->world : 0;
  return rank >= first && rank < first + ctx->world ? rank - first : -1;
}
IRIS_DEF int iris_device(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->device : -1; }
IRIS_DEF size_t iris_heap_size(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->heap_size : 0; }
IRIS_DEF size_t iris_heap_used(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->used : 0; }
IRIS_DEF void *iris_heap_base(const iris_t *ctx, int rank) {
  int l = IRIS_DETAIL_IS_LIVE(ctx) ? iris_detail_local_index(ctx, rank) : -1;
  return l >= 0 ? ctx->bases[l] : NULL;
}
IRIS_DEF iris_device_ctx_t iris_device_context(const iris_t *ctx) {
  iris_device_ctx_t d;
  int r;
  memset(&d, 0, sizeof d);
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return d;
  d.rank = iris_rank(ctx);
  d.world_size = iris_world_size(ctx);
  d.heap_size = ctx->heap_size;
  for (r = 0; r < ctx->world; r++) d.bases[r] = ctx->bases[r];
  d.fault = ctx->fault_dev;
  d.local_rank = ctx->rank;
  d.local_size = ctx->world;
  d.node = iris_node(ctx);
  d.num_nodes = iris_num_nodes(ctx);
  return d;
}
IRIS_DEF iris_device_ctx_t iris_device_context_node(const iris_t *ctx) {
  iris_device_ctx_t d = iris_device_context(ctx);
  d.rank = d.local_rank;
  d.world_size = d.local_size;
  d.node = 0;
  d.num_nodes = d.world_size > 0 ? 1 : 0;
  return d;
}
IRIS_DEF iris_status_t iris_device_context_from_peers(int rank, int world_size, size_t bytes, void *const *peers, iris_device_ctx_t *out) {
  int r;
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: NULL out");
  memset(out, 0, sizeof *out);
  if (world_size < 1 || world_size > IRIS_MAX_RANKS)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: world size %d outside [1, %d] (IRIS_MAX_RANKS)", world_size,
                            IRIS_MAX_RANKS);
  if (rank < 0 || rank >= world_size)
    return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "iris_device_context_from_peers: rank %d outside [0, %d)", rank, world_size);
  if (bytes == 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: rank %d: bytes is 0", rank);
  if (!peers) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: rank %d: NULL peers", rank);
  for (r = 0; r < world_size; r++)
    if (!peers[r])
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_device_context_from_peers: rank %d: peers[%d] is NULL%s", rank, r,
                              r == rank ? " (this rank's own buffer)" : "");
  out->rank = out->local_rank = rank;
  out->world_size = out->local_size = world_size;
  out->heap_size = bytes;
  for (r = 0; r < world_size; r++) out->bases[r] = (char *)peers[r];
  out->node = 0;
  out->num_nodes = 1;
  return IRIS_SUCCESS;
}
IRIS_DEF iris_status_t iris_translate_host(const iris_t *ctx, const void *ptr, int to_rank, void **out) {
  size_t off;
  iris_status_t st;
  if (!out) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_translate_host: NULL argument");
  IRIS_DETAIL_LIVE(ctx, "iris_translate_host");
  if (to_rank < 0 || to_rank >= iris_world_size(ctx))
    return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rank %d: iris_translate_host to rank %d outside [0, %d)", iris_rank(ctx), to_rank, iris_world_size(ctx));
  if (iris_detail_local_index(ctx, to_rank) < 0)
    return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rank %d: iris_translate_host to rank %d, on node %d: heaps are mapped within a node (this is node %d)",
                            iris_rank(ctx), to_rank, to_rank / ctx->world, iris_node(ctx));
  if ((st = iris_heap_offset(ctx, ptr, &off)) != IRIS_SUCCESS) return st;
  *out = ctx->bases[iris_detail_local_index(ctx, to_rank)] + off;
  return IRIS_SUCCESS;
}

/* Per-context slot for the other iris headers (not for users). */
IRIS_DEF void iris_detail_set_ext(iris_t *ctx, void *ext, void (*free_fn)(void *)) {
  if (!IRIS_DETAIL_IS_LIVE(ctx)) return;
  ctx->ext = ext;
  ctx->ext_free = free_fn;
}
IRIS_DEF void *iris_detail_get_ext(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) ? ctx->ext : NULL; }

/* ------------------------------------------------------------ for host tests --
 * A context with bookkeeping only: no GPU, no peers. fake_base is never dereferenced
 * by the allocator. Used by tests/host_test.c to test the allocator on machines
 * without GPUs; not part of the public API. */
static inline iris_t *iris_detail_host_only_ctx(size_t heap_size, void *fake_base) {
  iris_t *ctx = (iris_t *)calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->magic = IRIS_DETAIL_CTX_LIVE;
  ctx->world = 1;
  ctx->heap_size = heap_size;
  ctx->bases[0] = (char *)fake_base;
  ctx->device = -1;
  if (iris_detail_heap_reset(ctx) != IRIS_SUCCESS) { free(ctx); return NULL; }
  return ctx;
}
static inline void iris_detail_host_only_free(iris_t *ctx) {
  if (!ctx) return;
  free(ctx->blocks);
  free(ctx);
}

/* ------------------------------------------------------------------ launcher -- */
/* Visible GPUs, counted without the GPU runtime (safe before fork); -1 if unknown. */
IRIS_INTERNAL int iris_detail_count_gpus(void) {
  const char *vars[3] = {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"};
  const char *list = NULL;
  int i, n = 0;
#if defined(IRIS_USE_HIP)
  list = getenv(vars[1]) ? getenv(vars[1]) : getenv(vars[2]);
#else
  list = getenv(vars[0]);
#endif
  if (list) {
    const char *c;
    if (!*list) return 0;
    for (n = 1, c = list; *c; c++) n += *c == ',';
    return n;
  }
#if defined(IRIS_USE_HIP)
  for (i = 0; i < 256; i++) { /* KFD topology: nodes whose gpu_id is non-zero are GPUs */
    char path[96];
    unsigned long id = 0;
    FILE *f;
    snprintf(path, sizeof path, "/sys/class/kfd/kfd/topology/nodes/%d/gpu_id", i);
    if (!(f = fopen(path, "r"))) break;
    if (fscanf(f, "%lu", &id) == 1 && id != 0) n++;
    fclose(f);
  }
  return i == 0 ? -1 : n;
#else
  {
    DIR *d = opendir("/proc/driver/nvidia/gpus"); /* one entry per GPU */
    struct dirent *e;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    (void)i;
    return n > 0 ? n : -1;
  }
#endif
}

/* The most ranks iris_launch_local starts: both its pid table and a device context
 * must hold them. */
#define IRIS_DETAIL_LAUNCH_LIMIT (IRIS_MAX_RANKS < IRIS_LAUNCH_MAX ? IRIS_MAX_RANKS : IRIS_LAUNCH_MAX)

IRIS_DEF iris_status_t iris_launch_local(int num_ranks, iris_launch_t *L, int *my_rank) {
  static int launches = 0;
  unsigned char nonce[16];
  char name[72], token[40], buf[32];
  iris_launch_env_t env;
  iris_status_t st;
  pid_t parent = getpid();
  int i;
  if (!L || !my_rank) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_local: NULL argument");
  memset(L, 0, sizeof *L);
  if ((st = iris_launch_env(NULL, NULL, &env)) != IRIS_SUCCESS) return iris_detail_prefix(st, "iris_launch_local");
  if (env.launcher != IRIS_LAUNCHER_NONE) { /* started by a launcher already: this process is a rank */
    *my_rank = env.rank;
    return IRIS_SUCCESS;
  }
  if (num_ranks == 0) {
    num_ranks = iris_detail_count_gpus();
    if (num_ranks < 1)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_local: could not count this host's GPUs (found %d); pass the number of ranks", num_ranks);
  }
  if (num_ranks < 1) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_local: %d ranks requested", num_ranks);
  if (num_ranks > IRIS_DETAIL_LAUNCH_LIMIT)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "iris_launch_local: %d ranks requested; at most %d (IRIS_MAX_RANKS %d, IRIS_LAUNCH_MAX %d)", num_ranks,
                            IRIS_DETAIL_LAUNCH_LIMIT, IRIS_MAX_RANKS, IRIS_LAUNCH_MAX);
  L->num_ranks = num_ranks;
  iris_detail_random(nonce, sizeof nonce); /* this launch's job token */
  for (i = 0; i < 16; i++) snprintf(token + 2 * i, 3, "%02x", nonce[i]);
  snprintf(name, sizeof name, "launch-%ld-%d-%.8s", (long)parent, launches++, token);
  fflush(NULL); /* buffered output would otherwise be written once per child */
  for (i = 0; i < num_ranks; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      int e = errno, j;
      for (j = 0; j < i; j++) kill(L->pids[j], SIGKILL);
      for (j = 0; j < i; j++) waitpid(L->pids[j], NULL, 0);
      memset(L, 0, sizeof *L);
      return iris_detail_sys_fail(-1, "iris_launch_local: fork", e);
    }
    if (pid == 0) {
      setpgid(0, 0); /* a process group of its own: the launcher signals the rank and what it starts */
#if defined(__linux__)
      prctl(PR_SET_PDEATHSIG, SIGTERM); /* die with the launcher ... */
#endif
      if (getppid() != parent) raise(SIGTERM); /* ... even if it died before the line above */
      snprintf(buf, sizeof buf, "%d", i);
      setenv("IRIS_RANK", buf, 1);
      snprintf(buf, sizeof buf, "%d", num_ranks);
      setenv("IRIS_WORLD_SIZE", buf, 1);
      setenv("IRIS_RENDEZVOUS", name, 1);
      setenv("IRIS_JOB_TOKEN", token, 1);
      unsetenv("IRIS_LOCAL_RANK");
      unsetenv("IRIS_LOCAL_WORLD_SIZE");
      memset(L, 0, sizeof *L);
      *my_rank = i;
      return IRIS_SUCCESS;
    }
    setpgid(pid, pid); /* also here: whichever runs first */
    L->pids[i] = (int)pid;
  }
  *my_rank = -1;
  return IRIS_SUCCESS;
}

/* SIGINT/SIGTERM that arrive while iris_launch_wait runs (forwarded to the ranks). */
static volatile sig_atomic_t iris_detail_launch_signal = 0;
IRIS_INTERNAL void iris_detail_launch_on_signal(int sig) { iris_detail_launch_signal = sig; }

/* Signal every running rank's process group (the rank itself if it has none). */
IRIS_INTERNAL void iris_detail_signal_ranks(const iris_launch_t *L, const unsigned char *running, int sig) {
  int i;
  for (i = 0; i < L->num_ranks; i++)
    if (running[i] && kill(-(pid_t)L->pids[i], sig) != 0) kill((pid_t)L->pids[i], sig);
}

IRIS_DEF iris_status_t iris_launch_wait(iris_launch_t *L, int timeout_ms) {
  long long deadline = iris_detail_now_ms() + (timeout_ms > 0 ? timeout_ms : 1LL << 40), kill_at = -1;
  unsigned char running[IRIS_LAUNCH_MAX], failed[IRIS_LAUNCH_MAX], killed[IRIS_LAUNCH_MAX], signaled[IRIS_LAUNCH_MAX];
  int left, i, nfail = 0, nkill = 0, grace = 2000, forwarded = 0, timed_out = 0;
  char l1[512], l2[512];
  struct sigaction sa, old_int, old_term;
  if (!L || L->num_ranks < 1 || L->num_ranks > IRIS_LAUNCH_MAX) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_wait: not a launch");
  if (iris_detail_env_int("IRIS_LAUNCH_GRACE_MS", &grace) < 0) return iris_detail_prefix(IRIS_ERROR_INVALID_ARGUMENT, "iris_launch_wait");
  left = L->num_ranks;
  for (i = 0; i < L->num_ranks; i++) running[i] = 1, failed[i] = 0, killed[i] = 0, signaled[i] = 0;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = iris_detail_launch_on_signal;
  sigemptyset(&sa.sa_mask);
  iris_detail_launch_signal = 0;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  while (left > 0) {
    int progressed = 0;
    for (i = 0; i < L->num_ranks; i++) {
      int status = 0;
      pid_t w;
      if (!running[i]) continue;
      w = waitpid(L->pids[i], &status, WNOHANG);
      if (w == 0) continue;
      running[i] = 0;
      left--;
      progressed = 1;
      if (w < 0) L->exit_codes[i] = 255;
      else if (WIFEXITED(status)) L->exit_codes[i] = WEXITSTATUS(status);
      else if (WIFSIGNALED(status)) L->exit_codes[i] = 128 + WTERMSIG(status), signaled[i] = 1;
      else L->exit_codes[i] = 255;
      if (L->exit_codes[i] != 0) failed[i] = 1, nfail++;
    }
    if (left == 0) break;
    if (iris_detail_launch_signal) { /* the launcher was asked to stop: so are the ranks */
      int sig = iris_detail_launch_signal;
      iris_detail_launch_signal = 0;
      iris_detail_signal_ranks(L, running, sig);
      if (!forwarded) forwarded = sig;
      if (kill_at < 0) kill_at = iris_detail_now_ms() + grace;
    }
    if (kill_at < 0 && iris_detail_now_ms() >= deadline) { /* timeout: SIGTERM first, SIGKILL after the grace period */
      timed_out = 1;
      for (i = 0; i < L->num_ranks; i++) killed[i] = running[i];
      iris_detail_signal_ranks(L, running, SIGTERM);
      kill_at = iris_detail_now_ms() + grace;
    }
    if (kill_at >= 0 && iris_detail_now_ms() >= kill_at) {
      iris_detail_signal_ranks(L, running, SIGKILL);
      for (i = 0; i < L->num_ranks; i++)
        if (running[i]) {
          int status = 0;
          waitpid(L->pids[i], &status, 0);
          running[i] = 0;
          killed[i] = 1;
          L->exit_codes[i] = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 128 + SIGKILL;
          signaled[i] = 1;
          failed[i] = 1, nfail++;
        }
      break;
    }
    if (!progressed) iris_detail_sleep_ms(2);
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  for (i = 0; i < L->num_ranks; i++) {
    nkill += killed[i];
    if (killed[i] && failed[i]) failed[i] = 0, nfail--; /* reported as killed, not as failed */
  }
  if (forwarded) {
    size_t len = 0;
    l1[0] = 0;
    for (i = 0; i < L->num_ranks && len + 40 < sizeof l1; i++)
      len += (size_t)snprintf(l1 + len, sizeof l1 - len, "%s rank %d %s %d", len ? ";" : "", i, signaled[i] || killed[i] ? "killed by signal" : "exited with",
                              signaled[i] || killed[i] ? L->exit_codes[i] - 128 : L->exit_codes[i]);
    return iris_detail_fail(IRIS_ERROR_RANK_FAILED, "iris_launch_wait: received signal %d and forwarded it to the ranks:%s", forwarded, l1);
  }
  if (nkill && timed_out)
    return iris_detail_fail(IRIS_ERROR_TIMEOUT, "iris_launch_wait: ranks %s still ran after %d ms and were killed (SIGTERM, SIGKILL %d ms later)%s%s",
                            iris_detail_rank_list(killed, L->num_ranks, l1, sizeof l1), timeout_ms, grace, nfail ? "; ranks failed before that: " : "", nfail ? iris_detail_rank_list(failed, L->num_ranks, l2, sizeof l2) : "");
  if (nfail) {
    size_t len = 0;
    l1[0] = 0;
    for (i = 0; i < L->num_ranks && len + 40 < sizeof l1; i++)
      if (failed[i]) len += (size_t)snprintf(l1 + len, sizeof l1 - len, "%s rank %d %s %d", len ? ";" : "", i, signaled[i] ? "killed by signal" : "exited with",
                                             signaled[i] ? L->exit_codes[i] - 128 : L->exit_codes[i]);
    return iris_detail_fail(IRIS_ERROR_RANK_FAILED, "iris_launch_wait:%s", l1);
  }
  return IRIS_SUCCESS;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* IRIS_IMPLEMENTATION */

#endif /* IRIS_H */
