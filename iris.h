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
 *                        jobs; IRIS_NCCL_LIBRARY  the NCCL/RCCL to load for the rails;
 *                        IRIS_MN_NCCL_WHOLE=none  no NCCL communicator over every rank
 *                        (the collectives then never hand a call to NCCL whole)
 *   Malformed values are errors naming the variable and its value, never a default.
 *
 * Errors
 *   Every call returns iris_status_t. iris_status_string() names the status;
 *   iris_error_detail() holds this thread's last failure in words: which call failed,
 *   on which rank, with the vendor's or the OS's error text. The library never calls
 *   exit, abort or printf, and never throws (device code built with IRIS_DEBUG: its
 *   checks print and trap, as iris_device.h says).
 *
 * Threads
 *   An iris_t is used by one host thread at a time. In mode 3, iris_barrier() on a
 *   context blocks until one thread per context has called it.
 *
 * Files
 *   This header is the contract. Its implementation lies in internal/core/ and
 *   internal/rendezvous/, one file per topic (heap, bring-up, launcher, rendezvous, ...),
 *   included at the end of this file, after its include guard, under IRIS_IMPLEMENTATION:
 *   a unit may include iris.h (through a header of its own) before it defines
 *   IRIS_IMPLEMENTATION and includes it again. Vendoring: copy the root headers and the
 *   folder internal/.
 */
/* Outside the include guard, as the implementation block at the end: a unit may include
 * iris.h (e.g. through a header of its own) before it defines IRIS_IMPLEMENTATION. */
#if defined(IRIS_STATIC) && !defined(IRIS_IMPLEMENTATION)
#define IRIS_IMPLEMENTATION
#endif
#ifndef IRIS_H
#define IRIS_H

#if defined(IRIS_IMPLEMENTATION) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L /* only effective when iris.h is the unit's first include */
#if !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700 /* realpath, S_ISVTX */
#endif
#endif
#if defined(IRIS_STATIC)
#define IRIS_DETAIL_STATIC_DECLARED /* the declarations below are static: see the implementation block */
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
typedef hipStream_t iris_stream_t; /* the vendor's stream type, for the host entry points */
#else
#include <cuda_runtime_api.h>
typedef cudaStream_t iris_stream_t; /* the vendor's stream type, for the host entry points */
#endif
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic pop
#endif

#include <stddef.h>

/* IRIS_DETAIL_GPU_COMPILER: defined under nvcc and hipcc, where the headers' device code
 * compiles; the headers test it instead of the compilers' own macros. */
#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define IRIS_DETAIL_GPU_COMPILER 1
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
  IRIS_ERROR_GPU,              /* no usable GPU, or the CUDA/HIP runtime failed */
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
 * "from the environment, else the default". rank and world_size go together: both
 * given, or both from the environment (one alone: IRIS_ERROR_INVALID_ARGUMENT). */
typedef struct iris_config {
  size_t struct_size;        /* sizeof(iris_config_t); set by IRIS_CONFIG_INIT */
  int rank;                  /* -1: the launcher's environment (iris_launch_env) */
  int world_size;            /* -1: the launcher's environment (iris_launch_env) */
  int device;                /* -1: IRIS_DEVICE, else local rank % visible devices */
  size_t heap_size;          /* 0: IRIS_HEAP_SIZE ("512M", "2GiB": see below), else 1 GiB; rounded up to 2 MiB */
  const char *rendezvous;    /* NULL: IRIS_RENDEZVOUS, else "job-<launcher's job id>"; a world > 1
                                without either is IRIS_ERROR_INVALID_ARGUMENT */
  const char *rendezvous_dir;/* NULL: IRIS_RENDEZVOUS_DIR, else $XDG_RUNTIME_DIR/iris, else /tmp/iris-<uid>; "": an error */
  int timeout_ms;            /* bring-up waits; 0: IRIS_TIMEOUT_MS, else 60 s */
  int barrier_timeout_ms;    /* iris_barrier waits; 0: IRIS_BARRIER_TIMEOUT_MS, else 600 s */
  iris_heap_memory_t heap_memory;
  const iris_bootstrap_t *bootstrap; /* non-NULL: mode 2 */
  void *rail_comm;           /* multi-node worlds: this rank's rail communicator (an ncclComm_t of
                                the node count's size whose rank is this rank's node, the ranks of
                                the same local rank on every node); NULL: iris creates one with
                                the NCCL/RCCL it loads at run time. Stays the caller's. With
                                more than one rank per node iris also makes its own NCCL
                                communicator over every rank (docs/multinode.md). */
} iris_config_t;
#define IRIS_CONFIG_INIT {sizeof(iris_config_t), -1, -1, -1, 0, NULL, NULL, 0, 0, IRIS_HEAP_MEMORY_DEFAULT, NULL, NULL}

typedef struct iris iris_t; /* opaque host context, one per rank */


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
   * at its next check. fault[1]: the last collective mismatch (not fatal). The encoding
   * is internal (internal/core/layout.h); iris_get_async_error decodes them on the host. */
  unsigned long long *fault;
  int local_rank, local_size; /* this rank on its node; ranks per node */
  int node, num_nodes;        /* this rank's node, the number of nodes */
} iris_device_ctx_t;

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
 * iris_finalize: iris_barrier, iris_heap_verify and iris_finalize call them. The context
 * keeps one thread until iris_finalize, the peer watch: when the process of a peer rank on
 * this node ends, it cuts every wait of the context to 100 ms, so the waiting call reports
 * IRIS_ERROR_PEER_FAILED instead of waiting out the bound (IRIS_PEER_WATCH=0: none;
 * docs/errors.md). */
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
IRIS_API int iris_device_ordinal(const iris_t *ctx); /* the CUDA/HIP device ordinal of this rank */
IRIS_API int iris_device(const iris_t *ctx);         /* the same; the name before 0.3, kept for callers */
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
/* As iris_malloc with a larger power-of-two alignment (0: IRIS_HEAP_ALIGN). It aligns the
 * block's offset from the heap base, the same on every rank; the pointer is aligned alike
 * up to 2 MiB (the heap base's alignment), not beyond it. */
IRIS_API iris_status_t iris_malloc_aligned(iris_t *ctx, size_t bytes, size_t alignment, void **ptr);
/* As iris_malloc, then zero the block on this rank's GPU (synchronously). Peers see the
 * zeros once a barrier separates them from this call. If the zeroing fails (a GPU
 * error), the block stays allocated and *ptr points at it (content unspecified): the
 * call cannot know whether other ranks failed too, and freeing here alone would move
 * every later offset on this rank only. Handle the error on every rank alike, e.g.
 * iris_free the block everywhere, or give the context up. */
IRIS_API iris_status_t iris_calloc(iris_t *ctx, size_t bytes, void **ptr);
/* Local: return a block from iris_malloc*. IRIS_ERROR_NOT_IN_HEAP for a pointer outside
 * the heap, IRIS_ERROR_INVALID_ARGUMENT for one that is not a live block's start. After a
 * fatal fault the iris_malloc* calls return it and allocate nothing; iris_free still
 * returns blocks (bookkeeping only), so cleanup code runs before iris_finalize. */
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

/* ==================================================================== teams == */
/* A team: a subset of the world's ranks, numbered 0..size-1, on the one symmetric heap
 * (docs/teams.md). Made by splitting a parent team on the host (MPI_Comm_split's
 * semantics, or NVSHMEM's strided and 2-D forms); used by kernels (iris_device.h: peers
 * addressed by team rank, team barriers) and by the host collectives
 * (iris_collectives.h: the *_team calls). A team costs no new heap and no rendezvous:
 * the context keeps a table of IRIS_TEAM_MAX team slots on the heap (barrier and
 * exchange words, about 6 KB a slot), created by the first team call, and a pool of
 * IRIS_TEAMS_COLL collective states for teams' host collectives.
 *
 * iris_team_t is plain data, passed by value to kernels, valid in the process that
 * made it until iris_team_destroy. Members are world ranks: member i is
 * start + i * stride when stride > 0, else world[i]. A rank that opted out of a split
 * (IRIS_TEAM_NONE) gets a team of size 0 and rank -1: it may pass it around, but not
 * use it. Device RMA needs a team's members on one node (in a multi-node world only
 * the node team and teams inside a node are addressable; the world and rail teams
 * describe membership for the host: their sync is NULL, so a team barrier on them
 * returns false touching nothing, while their host calls, splits and collectives work). */
#define IRIS_TEAM_NONE (-1)   /* the color of a rank that opts out of a split */
#ifndef IRIS_TEAM_MAX
#define IRIS_TEAM_MAX 16      /* (global) live teams per context, the predefined ones included */
#endif
#define IRIS_TEAM_BARRIERS 32 /* barrier indices per team (iris_device.h: iris_team_barrier) */
typedef enum iris_team_which { IRIS_TEAM_WORLD = 0, IRIS_TEAM_NODE, IRIS_TEAM_RAIL } iris_team_which_t;
typedef struct iris_team {
  int size;                   /* members; 0 for a rank that opted out */
  int rank;                   /* this rank's index in the team, -1 if not a member */
  int start, stride;          /* stride form (stride > 0): member i is world rank start + i * stride */
  int world[IRIS_MAX_RANKS];  /* member i's world rank, i < size (all teams of at most IRIS_MAX_RANKS) */
  int slot;                   /* the team's slot in the context's table; -1: none */
  int coll;                   /* its collective state in the pool; -1: none (no host collectives) */
  unsigned long long *sync;   /* this rank's copy of the slot's barrier words (heap); NULL: none */
  unsigned long long *fault;  /* the fault words of the team's collectives (internal/core/team.h) */
  unsigned long long serial;  /* which split made it (a context-wide count): stale handles are refused */
} iris_team_t;

/* The predefined teams. IRIS_TEAM_WORLD: every rank, team rank = world rank.
 * IRIS_TEAM_NODE: this rank's node (its NVLink domain), team rank = local rank.
 * IRIS_TEAM_RAIL: the ranks of this local rank on every node, team rank = node (a team of
 * one in a single-node world). Collective over the world on the context's first team call
 * (it creates the team table on the heap, every rank the same; IRIS_TEAMS_COLL must be
 * alike on every rank: IRIS_ERROR_MISMATCH otherwise), local after. Its words are zeroed
 * before the ranks meet, so a kernel may use the world (or node) team as soon as the call
 * returns, with no host barrier, while slower ranks are still returning from it (a
 * multi-node world's world team has no barrier words: see above). */
IRIS_API iris_status_t iris_team_get(iris_t *ctx, iris_team_which_t which, iris_team_t *out);
/* Collective over parent's members (every member calls it, in the same order as its other
 * team calls): MPI_Comm_split. The members with one color form one team, ordered by key,
 * then by parent rank; color IRIS_TEAM_NONE (or any negative color) opts out (*out: size 0,
 * rank -1). All new teams share one table slot (their members are disjoint) and, while
 * the pool has one, one collective state. The parent's members exchange their (color,
 * key) over the heap (the world's over the rendezvous); nothing is allocated. With them
 * go each member's SM count and IRIS_COLL_CTAS: a team's collectives size their grids by
 * its members' fewest SMs, the same on every member (GPUs unlike, or the world's
 * collectives not set up), and refuse on every member alike when the members' IRIS_COLL_CTAS
 * differ (IRIS_ERROR_MISMATCH) or one cannot be read (IRIS_ERROR_INVALID_ARGUMENT). A member
 * that joins a team waits for its GPU (the team's words are zeroed synchronously: a
 * kernel still running on another stream delays the split); the meetings' copies run on a
 * non-blocking stream of the table's own, so a rank that opts out (and a meeting over the
 * heap) waits for no work of its GPU, not for the legacy default stream. Errors, on
 * every member alike: IRIS_ERROR_OUT_OF_MEMORY (no slot free on every member: destroy a
 * team), IRIS_ERROR_UNSUPPORTED (a team spanning nodes in a multi-node world),
 * IRIS_ERROR_INVALID_ARGUMENT (parent not a live team of which this rank is a member).
 * A meeting over a parent other than the world that fails (a member late or gone:
 * IRIS_ERROR_TIMEOUT) leaves the parent broken: its members may disagree on how far it
 * got, so every later split or destroy of it returns IRIS_ERROR_TIMEOUT at once ("an
 * earlier meeting on this team failed"); destroy it (the handle is released, its slot
 * stays taken until iris_finalize) and split again from a parent that works. When the
 * split's second meeting (after the take) fails on some members only, the others may
 * already hold the new team: the members where it failed return the error with *out
 * holding no team, and keep its slot (and collective state) taken until iris_finalize,
 * as a failed destroy does, so that no later split gives them to another team while the
 * others use them; a member that holds the team then has peers that gave up on it (its
 * calls on it wait out their bounds; its destroy too, then releases the handle): split
 * again from a parent that works. */
IRIS_API iris_status_t iris_team_split(iris_t *ctx, const iris_team_t *parent, int color, int key, iris_team_t *out);
/* Collective over parent: NVSHMEM's split_strided: the members parent ranks start,
 * start + stride, ..., size of them (team rank i = parent rank start + i * stride); other
 * parent ranks get a team of size 0. Every member passes the same start, stride, size.
 * On failure *out holds no team (size 0, rank -1); a parent this rank is not a member of
 * (an opted-out rank's team) or a range past it: IRIS_ERROR_INVALID_ARGUMENT. */
IRIS_API iris_status_t iris_team_split_strided(iris_t *ctx, const iris_team_t *parent, int start, int stride, int size, iris_team_t *out);
/* Collective over parent: NVSHMEM's split_2d: parent ranks as a grid of rows of xrange
 * (the last row may be short); *xteam: this rank's row (consecutive parent ranks), *yteam:
 * its column (parent ranks xrange apart). For TP x DP with TP = xrange: xteam is the TP
 * group, yteam the DP group. Either pointer may be NULL (that split is skipped); xrange
 * past the parent's size is one row. On failure neither team is left made (both hold
 * size 0, rank -1); a parent this rank is not a member of (an opted-out rank's team, size
 * 0) or xrange < 1: IRIS_ERROR_INVALID_ARGUMENT. */
IRIS_API iris_status_t iris_team_split_2d(iris_t *ctx, const iris_team_t *parent, int xrange, iris_team_t *xteam, iris_team_t *yteam);
/* Collective over the team's members: waits for this rank's GPU, meets the members, frees
 * the team's slot and collective state; *team is zeroed (size 0, rank -1). A team of size
 * 0 and the predefined teams: nothing to do. Members in different team calls (one
 * splits the team, the others destroy it): IRIS_ERROR_MISMATCH on every member and the
 * team left as it was, alive (destroy it again, in step). When the meeting fails (a
 * member late or gone: IRIS_ERROR_TIMEOUT) the slot stays taken, so a late member cannot
 * disturb the slot's next team, and *team is zeroed; so is it for a team broken by an
 * earlier failed meeting (IRIS_ERROR_TIMEOUT at once, see iris_team_split). On a
 * context with a fatal fault it returns that fault at once, without waiting or meeting,
 * and releases this rank's part (*team zeroed); the predefined teams and a team of size
 * 0 then return the fault too. */
IRIS_API iris_status_t iris_team_destroy(iris_t *ctx, iris_team_t *team);
/* Synchronous (waits for this rank's GPU): the faults of the team's collectives, as
 * iris_get_async_error reports the world's: a fatal one (naming the world rank waited
 * for; it is then the context's too), else a pending mismatch of this team (then
 * cleared; other teams' and the world's are left alone). */
IRIS_API iris_status_t iris_team_check(iris_t *ctx, const iris_team_t *team);
/* src_team's rank src_rank as a rank of dst_team (NVSHMEM's team_translate_pe); -1 if that
 * rank is not in dst_team or src_rank is out of range. Host and device: see
 * iris_team_world_rank below. */

/* ================================================================== errors == */
IRIS_API const char *iris_status_string(iris_status_t status);
/* This thread's last failure in words ("" if none yet). Successful calls leave it as it
 * is: read it right after the call that failed. */
IRIS_API const char *iris_error_detail(void);

/* ==================================================== faults, abort (any thread) == */
/* Non-blocking, thread-safe (a watchdog thread may poll it while another thread uses
 * ctx): the context's fatal fault, if any. IRIS_ERROR_TIMEOUT (a bounded wait on the GPU
 * ran out: names the wait, the rank waited for and the collective call),
 * IRIS_ERROR_PEER_FAILED (the same, and that rank's process is gone; a peer of this node
 * whose process ends is seen at once by iris_init's peer watch, and a wait then gives up
 * after 100 ms),
 * IRIS_ERROR_ABORTED (iris_abort), IRIS_ERROR_MISMATCH for a mismatched collective call
 * that the host had split into several launches (the ranks' call numbers are out of
 * step; iris_collectives.h), else a pending collective mismatch
 * (IRIS_ERROR_MISMATCH, reported once and then cleared), else IRIS_SUCCESS. A fatal
 * fault stays: every later call on ctx returns it at once (no launch, no wait; the
 * queries and iris_free still answer) and every wait of a kernel already queued gives
 * up at its next check (a team collective's kernel, which reads its team's fault words:
 * once the host has looked, i.e. after any call on ctx or iris_get_async_error, which
 * copies the fault to every live team, so poll it from a watchdog while the host blocks
 * in a stream synchronize); the only way on is
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
 * Rank 0 listens on <dir>/<name>.sock; other ranks connect, retrying until the timeout
 * (also while a listener there accepts nothing: a stopped or hung rank 0's full backlog).
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
  const char *dir;         /* NULL: IRIS_RENDEZVOUS_DIR, else $XDG_RUNTIME_DIR/iris, else /tmp/iris-<uid>; "": an error */
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
 * two launchers disagreeing -> IRIS_ERROR_MISMATCH. Other launchers' empty variables
 * count as unset; an empty IRIS_RANK, IRIS_WORLD_SIZE, IRIS_LOCAL_RANK or
 * IRIS_LOCAL_WORLD_SIZE is an error (IRIS_ERROR_INVALID_ARGUMENT), as every IRIS_* one.
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
  int exit_codes[IRIS_LAUNCH_MAX]; /* filled by iris_launch_wait; 128+signal if killed; -1: not waited for yet, or its status was lost */
} iris_launch_t;
IRIS_API iris_status_t iris_launch_local(int num_ranks, iris_launch_t *launch, int *my_rank);
/* Parent only: wait for every rank (timeout_ms <= 0: forever). Ranks still running at
 * the timeout get SIGTERM (to their process group), then SIGKILL after a grace period
 * (IRIS_LAUNCH_GRACE_MS, default 2000 ms). While it waits, SIGINT and SIGTERM sent to
 * this process are forwarded to every running rank (the caller's handlers are restored
 * before it returns); ranks still running a grace period after that are killed. A
 * killed rank that has not ended the grace period again later (at least 1 s; a process
 * asleep in the kernel, e.g. in a GPU driver call that does not return, ends only when
 * that call does) is named and left unreaped, exit code -1: the call returns, and a
 * later call looks for that rank again. IRIS_ERROR_RANK_FAILED names every rank that
 * exited non-zero or was killed (and the forwarded signal); IRIS_ERROR_TIMEOUT names the
 * ranks that had to be killed. SIGCHLD ignored by the caller is set to the default while
 * it waits (restored after, and the caller's other children that ended meanwhile reaped,
 * as the kernel would have), so that the ranks' statuses can be read; a rank reaped before (SIGCHLD ignored then, or a
 * waitpid elsewhere) counts as failed with exit code -1, "status unknown". A second call
 * on a launch already waited for: IRIS_ERROR_INVALID_ARGUMENT, exit_codes kept; where a
 * status was lost, it looks for those ranks only (the others are neither waited for nor
 * signalled again). A malformed IRIS_LAUNCH_GRACE_MS: iris_launch_local refuses it before
 * forking. */
IRIS_API iris_status_t iris_launch_wait(iris_launch_t *launch, int timeout_ms);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ============================================================ team ranks == */
/* Member `team_rank`'s world rank (no check: 0 <= team_rank < team.size). Host and device. */
static inline IRIS_HOST_DEVICE int iris_team_world_rank(const iris_team_t *team, int team_rank) {
  return team->stride > 0 ? team->start + team_rank * team->stride : team->world[team_rank < IRIS_MAX_RANKS ? team_rank : 0];
}
/* A world rank's rank in the team, -1 if not a member. */
static inline IRIS_HOST_DEVICE int iris_team_rank_of(const iris_team_t *team, int world_rank) {
  int i;
  if (team->stride > 0) {
    int d = world_rank - team->start;
    return d >= 0 && d % team->stride == 0 && d / team->stride < team->size ? d / team->stride : -1;
  }
  for (i = 0; i < team->size && i < IRIS_MAX_RANKS; i++)
    if (team->world[i] == world_rank) return i;
  return -1;
}
static inline IRIS_HOST_DEVICE int iris_team_translate_rank(const iris_team_t *src_team, int src_rank, const iris_team_t *dst_team) {
  if (src_rank < 0 || src_rank >= src_team->size) return -1;
  return iris_team_rank_of(dst_team, iris_team_world_rank(src_team, src_rank));
}

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
/* ceil(a / b); 0 for b <= 0 (no tiles of a size below 1, rather than a division by 0) */
static inline IRIS_HOST_DEVICE long long iris_cdiv(long long a, long long b) { return b > 0 ? (a + b - 1) / b : 0; }
static inline IRIS_HOST_DEVICE long long iris_view_tiles_m(iris_view2d_t v, int bm) { return iris_cdiv(v.rows, bm); }
static inline IRIS_HOST_DEVICE long long iris_view_tiles_n(iris_view2d_t v, int bn) { return iris_cdiv(v.cols, bn); }
static inline IRIS_HOST_DEVICE long long iris_view_num_tiles(iris_view2d_t v, int bm, int bn) {
  return iris_view_tiles_m(v, bm) * iris_view_tiles_n(v, bn);
}
/* Tile id -> (tile row, tile column), row-major over the tile grid. A grid without columns
 * (bn < 1, or no columns) has no tiles: (0, 0), an empty tile. */
static inline IRIS_HOST_DEVICE void iris_view_tile_coords(iris_view2d_t v, int bn, long long tile, long long *tm, long long *tn) {
  long long nt = iris_view_tiles_n(v, bn);
  *tm = nt > 0 ? tile / nt : 0;
  *tn = nt > 0 ? tile % nt : 0;
}
/* Rows and columns actually present in tile (tm, tn): bm/bn except at the edges; 0 for a
 * tile size below 1 (a negative one came back as the tile's extent). */
static inline IRIS_HOST_DEVICE int iris_view_tile_rows(iris_view2d_t v, int bm, long long tm) {
  long long left = v.rows - tm * bm;
  return bm < 1 ? 0 : (int)(left < bm ? (left > 0 ? left : 0) : bm);
}
static inline IRIS_HOST_DEVICE int iris_view_tile_cols(iris_view2d_t v, int bn, long long tn) {
  long long left = v.cols - tn * bn;
  return bn < 1 ? 0 : (int)(left < bn ? (left > 0 ? left : 0) : bn);
}
static inline IRIS_HOST_DEVICE void *iris_view_elem(iris_view2d_t v, long long r, long long c) {
  return (char *)v.ptr + (r * v.stride + c) * (long long)v.elem_size;
}
/* Sub-view of tile (tm, tn): its origin and its (possibly partial) extent. */
static inline IRIS_HOST_DEVICE iris_view2d_t iris_view_tile(iris_view2d_t v, int bm, int bn, long long tm, long long tn) {
  return iris_view2d(iris_view_elem(v, tm * bm, tn * bn), iris_view_tile_rows(v, bm, tm), iris_view_tile_cols(v, bn, tn), v.stride,
                     v.elem_size);
}

/* ====================================================================== internals == */
/* Not for users. Shared with the other iris headers and lib/iris.cu: the fault word's
 * encoding and the layout checks, and the internal API they call. */
#include "internal/core/layout.h"          /* the fault word, layout checks */
#include "internal/core/detail_api.h"      /* what the other iris headers call */

#endif /* IRIS_H */

/* The implementation, in the one unit that defines IRIS_IMPLEMENTATION (or IRIS_STATIC),
 * after the include guard (stb's rule): the unit may have included iris.h before it
 * defined IRIS_IMPLEMENTATION. One file per topic, in dependency order. */
#if defined(IRIS_IMPLEMENTATION) && !defined(IRIS_IMPLEMENTATION_DONE)
#define IRIS_IMPLEMENTATION_DONE
#if defined(IRIS_STATIC) && !defined(IRIS_DETAIL_STATIC_DECLARED)
#error "iris: IRIS_STATIC must be defined before the unit's first #include of iris.h (its declarations are static too)"
#endif
#include "internal/core/sys.h"             /* system headers, IRIS_DEF, IRIS_INTERNAL */
#if !defined(IRIS_DETAIL_NO_POSIX) /* (else sys.h's #error says why) */
#ifdef __cplusplus
extern "C" {
#endif
#include "internal/core/platform.h"        /* the vendor layer: every runtime call */
#include "internal/core/status.h"          /* errors, the detail buffer, status strings */
#include "internal/core/util.h"            /* clocks, hashing, parsers, random bytes */
#include "internal/rendezvous/wire.h" /* rendezvous frames and socket I/O */
#include "internal/rendezvous/unix.h" /* the private directory, the socket file */
#include "internal/rendezvous/tcp.h"  /* dial and listen over TCP */
#include "internal/rendezvous/rendezvous.h"      /* iris_rendezvous_* */
#include "internal/rendezvous/group.h"           /* the in-process group (mode 3) */
#include "internal/core/context.h"         /* struct iris, the exchanges */
#include "internal/core/faults.h"          /* the fault words on the host, iris_abort */
#include "internal/core/stream_order.h"    /* call order across streams */
#include "internal/core/heap.h"            /* the allocator, iris_heap_verify */
#include "internal/core/exchange.h"        /* the bring-up record and its checks */
#include "internal/core/nodes.h"           /* nodes, NCCL loaded at run time, rails */
#include "internal/core/watch.h"           /* the peer watch: a dead peer ends every wait */
#include "internal/core/setup.h"           /* a rank's heap, mappings, release */
#include "internal/core/launch_env.h"      /* iris_launch_env */
#include "internal/core/init.h"            /* iris_init*, iris_barrier, iris_finalize */
#include "internal/core/queries.h"         /* iris_rank ... iris_translate_host */
#include "internal/core/launcher.h"        /* iris_launch_local, iris_launch_wait */
#include "internal/core/team.h"            /* teams: the table, splits, team exchanges */
#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* POSIX */
#endif /* IRIS_IMPLEMENTATION */
