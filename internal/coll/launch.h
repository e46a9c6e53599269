/* internal/coll/launch.h: the host side of one kernel launch: the collective
 * state, the typed launches, and the dispatch from (kind, type, op, path) to a kernel;
 * the call signature. Under IRIS_IMPLEMENTATION (nvcc, hipcc).
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_INTERNAL_COLL_LAUNCH_H
#define IRIS_INTERNAL_COLL_LAUNCH_H
#include "../../iris_collectives.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "plan.h"
#include "types.h"
#include "protocol.h"
#include "ll.h"
#include "kernels.h"
#include "mn_route.h"

/* The runtime calls of the collectives are the iris_gpu_* wrappers of internal/core/platform.h. */

typedef struct iris_coll_state {
  iris_coll_dev_t dev;
  char *stage_in, *stage_out; /* NULL when IRIS_COLL_STAGING=0 */
  char *mn_scratch;           /* multi-node worlds: IRIS_COLL_MN_SCRATCH_BYTES for the rail steps */
  iris_coll_mn_table_t mn_table; /* multi-node worlds: which calls go whole to NCCL (agreed at setup) */
  size_t stage_bytes;
  int sms;
  int pdl; /* 1: the latency kernels launch with PDL (IRIS_COLL_PDL, default where the GPU has it) */
  int fused_staging; /* 1: buffers off the heap without separate copy passes where a kernel allows (IRIS_COLL_FUSED_STAGING, default) */
  int preload; /* 1: setup loads every kernel of this unit (IRIS_COLL_PRELOAD, default): no first launch waits for the GPU's running kernels */
  unsigned preloaded; /* kernels the setup loaded (0 where the driver could not, or all were loaded) */
  int ctas; /* IRIS_COLL_CTAS: the opts.ctas of every call that gives none (0: the automatic grid) */
  int shared_ctas; /* ranks of one process share the GPU: every call's grid at most this (1 / W of the SMs); 0: no such cap */
} iris_coll_state_t;

static void iris_coll_state_free(void *p) { free(p); } /* its heap blocks go with the heap */

IRIS_DEF size_t iris_dtype_size(iris_dtype_t t) {
  switch (t) {
  case IRIS_FLOAT32: case IRIS_INT32: return 4;
  case IRIS_FLOAT16: case IRIS_BFLOAT16: return 2;
  case IRIS_INT64: return 8;
  case IRIS_UINT8: case IRIS_FLOAT8_E4M3: case IRIS_FLOAT8_E5M2: return 1;
  default: return 0;
  }
}

/* ---- which reduction kernels this unit compiles.
 * The exact kernels: SUM and AVG of fp32, fp16 and bf16 (what applications run and the
 * benchmarks measure) each have their own kernels, with the world sizes 2, 4 and 8
 * specialised (W_STATIC: the loads of all ranks in flight at once). Every other
 * reduction (int32, int64, uint8, the fp8 types; MIN and MAX of every type) runs one
 * kernel per type, kind and algorithm that takes the op as a run-time argument, for any
 * W (W_STATIC = 0). Measured with nvcc 13.0 for sm_90: their machine code shrinks from
 * 955 K to 163 K instructions (all kernels: 1168 K to 376 K), and a unit with
 * IRIS_IMPLEMENTATION compiles in 42 s instead of 118 s (docs/collectives.md).
 * IRIS_COLL_TYPES and IRIS_COLL_OPS (iris_collectives.h) leave out kernels further. */
template <typename T> struct iris_coll_dtype_of;
template <> struct iris_coll_dtype_of<float> { static const int value = IRIS_FLOAT32; };
template <> struct iris_coll_dtype_of<iris_f16_t> { static const int value = IRIS_FLOAT16; };
template <> struct iris_coll_dtype_of<iris_bf16_t> { static const int value = IRIS_BFLOAT16; };
template <> struct iris_coll_dtype_of<int> { static const int value = IRIS_INT32; };
template <> struct iris_coll_dtype_of<long long> { static const int value = IRIS_INT64; };
template <> struct iris_coll_dtype_of<unsigned char> { static const int value = IRIS_UINT8; };
template <> struct iris_coll_dtype_of<iris_fp8_e4m3_t> { static const int value = IRIS_FLOAT8_E4M3; };
template <> struct iris_coll_dtype_of<iris_fp8_e5m2_t> { static const int value = IRIS_FLOAT8_E5M2; };
/* The ops (bit 1 << op) that have exact kernels for T. */
template <typename T> struct iris_coll_exact {
  static const int dt = iris_coll_dtype_of<T>::value;
  static const unsigned ops = dt == (int)IRIS_FLOAT32 || dt == (int)IRIS_FLOAT16 || dt == (int)IRIS_BFLOAT16 ? (1u << IRIS_SUM | 1u << IRIS_AVG) : 0u;
};
/* Whether this unit compiles the kernels of T for OP (an op, or IRIS_COLL_OP_RUNTIME: the
 * kernel that serves T's other ops). */
template <typename T, int OP> struct iris_coll_builds {
  static const unsigned type_on = ((unsigned)(IRIS_COLL_TYPES) >> iris_coll_dtype_of<T>::value) & 1u;
  static const unsigned ops_on = (unsigned)(IRIS_COLL_OPS) & ((1u << IRIS_REDOP_COUNT) - 1u);
  static const bool value =
      type_on && (OP == (int)IRIS_COLL_OP_RUNTIME ? (ops_on & ~iris_coll_exact<T>::ops) != 0 : ((ops_on & iris_coll_exact<T>::ops) >> (OP & 31) & 1u) != 0);
};

/* ---- typed launches */
static int iris_coll_ll_blocks(size_t count, size_t es) {
  const size_t lines = (count * es + 7) / 8;
  int blocks = (int)((lines + IRIS_COLL_LL_THREADS - 1) / IRIS_COLL_LL_THREADS);
  if (blocks > IRIS_COLL_MAX_CTAS) blocks = IRIS_COLL_MAX_CTAS;
  return blocks < 1 ? 1 : blocks;
}
/* The latency kernels launch with PDL (s->pdl): each may start while the kernel before it
 * on the stream ends (iris_detail_pdl_wait comes before it reads anything). */
template <typename T, int KIND, int OP>
static void iris_coll_launch_ll(const iris_coll_state_t *s, const void *send, void *recv, size_t count, int root, unsigned long long sig, int op, int blocks,
                                iris_stream_t stream) {
  (void)iris_detail_launch(iris_coll_ll_kernel<T, KIND, OP>, (unsigned)blocks, IRIS_COLL_LL_THREADS, stream, s->pdl, s->dev, (const T *)send, (T *)recv, count, root,
                           sig, op);
}
static int iris_coll_arm_blocks(size_t count, size_t es) {
  const size_t vecs = (count * es + 15) / 16;
  int blocks = (int)((vecs + IRIS_COLL_ARM_THREADS - 1) / IRIS_COLL_ARM_THREADS);
  if (blocks > IRIS_COLL_MAX_CTAS) blocks = IRIS_COLL_MAX_CTAS;
  return blocks < 1 ? 1 : blocks;
}
/* The armed one-shot exists for the float types' SUM and AVG only (iris_coll_arm_elem). */
template <typename T, int OP> struct iris_coll_armed {
  static const int dt = iris_coll_dtype_of<T>::value;
  static const bool value = (dt == (int)IRIS_FLOAT32 || dt == (int)IRIS_FLOAT16 || dt == (int)IRIS_BFLOAT16) && (OP == (int)IRIS_SUM || OP == (int)IRIS_AVG);
};
template <typename T, int KIND, int OP, bool ARMED = iris_coll_armed<T, OP>::value> struct iris_coll_arm_launch {
  static void run(const iris_coll_state_t *s, const void *send, void *recv, size_t count, unsigned long long sig, int blocks, iris_stream_t stream) {
    (void)iris_detail_launch(iris_coll_arm_kernel<T, KIND, OP>, (unsigned)blocks, IRIS_COLL_ARM_THREADS, stream, s->pdl, s->dev, (const T *)send, (T *)recv, count,
                             sig);
  }
};
template <typename T, int KIND, int OP> struct iris_coll_arm_launch<T, KIND, OP, false> {
  static void run(const iris_coll_state_t *, const void *, void *, size_t, unsigned long long, int, iris_stream_t) {}
};
template <typename T, int OP>
static void iris_coll_launch_ll2(const iris_coll_state_t *s, const void *send, void *recv, size_t count, unsigned long long sig, int op, iris_stream_t stream) {
  const int W = s->dev.ctx.world_size;
  const size_t per = 8 / sizeof(T), lines = iris_coll_ar_chunk(count, W, per) / per;
  const int blocks = (int)((lines + IRIS_COLL_LL2_THREADS - 1) / IRIS_COLL_LL2_THREADS);
  (void)iris_detail_launch(iris_coll_ll2_kernel<T, OP>, (unsigned)blocks, IRIS_COLL_LL2_THREADS, stream, s->pdl, s->dev, (const T *)send, (T *)recv, count, sig, op);
}
template <typename T>
static void iris_coll_launch_bc_ll2(const iris_coll_state_t *s, const void *send, void *recv, size_t count, int root, unsigned long long sig, iris_stream_t stream) {
  const int W = s->dev.ctx.world_size;
  const size_t pl = ((count * sizeof(T) + 7) / 8 + (size_t)W - 2) / (size_t)(W - 1);
  const int blocks = (int)((pl + IRIS_COLL_LL2_THREADS - 1) / IRIS_COLL_LL2_THREADS);
  (void)iris_detail_launch(iris_coll_bc_ll2_kernel<T>, (unsigned)(blocks > 0 ? blocks : 1), IRIS_COLL_LL2_THREADS, stream, s->pdl, s->dev, (const T *)send, (T *)recv,
                           count, root, sig);
}
/* The bandwidth reduction kernels of one (T, KIND, OP) for this world size: W_STATIC 2,
 * 4 or 8 where specialised, else the generic 0 (the run-time-op kernels: 0 only). */
template <typename T, int KIND, int OP> struct iris_coll_bw_kernels {
  static void reduce(const iris_coll_state_t *s, const T *send, T *recv, size_t count, unsigned long long sig, int vec, int push, int op, int blocks,
                     iris_stream_t stream) {
    switch (s->dev.ctx.world_size) {
    case 2: iris_coll_reduce_kernel<T, KIND, OP, 2><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, count, sig, vec, push, op); break;
    case 4: iris_coll_reduce_kernel<T, KIND, OP, 4><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, count, sig, vec, push, op); break;
    case 8: iris_coll_reduce_kernel<T, KIND, OP, 8><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, count, sig, vec, push, op); break;
    default: iris_coll_reduce_kernel<T, KIND, OP, 0><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, count, sig, vec, push, op); break;
    }
  }
  static void store(const iris_coll_state_t *s, const T *send, T *recv, T *stage, size_t count, size_t slice, unsigned long long sig, int vec, int op, int rs, int blocks,
                    iris_stream_t stream) {
    switch (s->dev.ctx.world_size) {
    case 2: iris_coll_ar_store_kernel<T, OP, 2><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, stage, count, slice, sig, vec, op, rs); break;
    case 4: iris_coll_ar_store_kernel<T, OP, 4><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, stage, count, slice, sig, vec, op, rs); break;
    case 8: iris_coll_ar_store_kernel<T, OP, 8><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, stage, count, slice, sig, vec, op, rs); break;
    default: iris_coll_ar_store_kernel<T, OP, 0><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, stage, count, slice, sig, vec, op, rs); break;
    }
  }
};
template <typename T, int KIND> struct iris_coll_bw_kernels<T, KIND, IRIS_COLL_OP_RUNTIME> {
  static void reduce(const iris_coll_state_t *s, const T *send, T *recv, size_t count, unsigned long long sig, int vec, int push, int op, int blocks,
                     iris_stream_t stream) {
    iris_coll_reduce_kernel<T, KIND, IRIS_COLL_OP_RUNTIME, 0><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, count, sig, vec, push, op);
  }
  static void store(const iris_coll_state_t *s, const T *send, T *recv, T *stage, size_t count, size_t slice, unsigned long long sig, int vec, int op, int rs, int blocks,
                    iris_stream_t stream) {
    iris_coll_ar_store_kernel<T, IRIS_COLL_OP_RUNTIME, 0><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, send, recv, stage, count, slice, sig, vec, op, rs);
  }
};
template <typename T, int KIND, int OP>
static void iris_coll_launch_reduce(const iris_coll_state_t *s, iris_coll_path_t path, const void *send, void *recv, size_t count, unsigned long long sig, int vec,
                                    int op, int blocks, iris_stream_t stream) {
  /* all-reduce: the second phase pushes below IRIS_COLL_AR_PUSH_MAX bytes, pulls above;
   * from IRIS_COLL_AR_STORE_MIN both phases store (the store two-shot, whose slot size
   * for this grid every rank computes the same from the same call) */
  const int push = IRIS_COLL_PUSH && KIND == IRIS_COLL_AR && count * sizeof(T) < IRIS_COLL_AR_PUSH_MAX;
  if ((KIND == IRIS_COLL_AR && (path == IRIS_COLL_PATH_STAGED || (IRIS_COLL_PUSH && count * sizeof(T) >= IRIS_COLL_AR_STORE_MIN))) ||
      (KIND == IRIS_COLL_RS && path == IRIS_COLL_PATH_STAGED)) { /* the store two-shot; the store reduce-scatter (buffers anywhere) */
    const int rs = KIND == IRIS_COLL_RS, W = s->dev.ctx.world_size;
    const size_t slice = iris_coll_ar_slice(sizeof(T), W, blocks, rs ? count * (size_t)W : count);
    T *stage = !rs && path == IRIS_COLL_PATH_STAGED ? (T *)s->stage_out : NULL; /* recv off the heap: the peers store into our staging area */
    iris_coll_bw_kernels<T, IRIS_COLL_AR, OP>::store(s, (const T *)send, (T *)recv, stage, count, slice, sig, vec, op, rs, blocks, stream);
    return;
  }
  iris_coll_bw_kernels<T, KIND, OP>::reduce(s, (const T *)send, (T *)recv, count, sig, vec, push, op, blocks, stream);
}
/* The relay broadcast (W >= 3): the chunk size for this grid, and no more CTAs than
 * chunks per part (a CTA without a chunk would only add barrier traffic). Every rank
 * computes the same from the same call. */
static void iris_coll_launch_relay(const iris_coll_state_t *s, const void *send, void *recv, size_t bytes, int root, unsigned long long sig, int blocks,
                                   iris_stream_t stream) {
  const iris_coll_relay_t r = iris_coll_relay_plan(bytes, s->dev.ctx.world_size, blocks, 0);
  blocks = iris_coll_relay_ctas(&r, blocks);
  iris_coll_relay_kernel<<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, r.chunk, root, sig);
}
/* The chain broadcast (W >= 3): no more CTAs than chunks. */
static void iris_coll_launch_chain(const iris_coll_state_t *s, const void *send, void *recv, size_t bytes, int root, unsigned long long sig, int blocks,
                                   iris_stream_t stream) {
  const size_t chunk = iris_coll_chain_chunk(bytes, blocks), chunks = iris_coll_chain_chunks(bytes, chunk);
  if ((size_t)blocks > chunks) blocks = (int)chunks;
  iris_coll_chain_kernel<<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, chunk, root, sig);
}
/* Reductions (all-reduce, reduce-scatter) of T with OP (see iris_coll_builds): the
 * kernel of the path; nothing where this unit compiles none (iris_coll_enqueue refused
 * such a call before anything was launched). */
template <typename T, int KIND, int OP, bool BUILT = iris_coll_builds<T, OP>::value != 0> struct iris_coll_reduce_op {
  static void launch(const iris_coll_state_t *s, iris_coll_path_t path, int op, const void *send, void *recv, size_t count, unsigned long long sig, int vec,
                     int blocks, iris_stream_t stream) {
    if (path == IRIS_COLL_PATH_LL2) iris_coll_launch_ll2<T, OP>(s, send, recv, count, sig, op, stream);
    else if (path == IRIS_COLL_PATH_ARM) iris_coll_arm_launch<T, KIND, OP>::run(s, send, recv, count, sig, blocks, stream);
    else if (path == IRIS_COLL_PATH_LL) iris_coll_launch_ll<T, KIND, OP>(s, send, recv, count, 0, sig, op, blocks, stream);
    else iris_coll_launch_reduce<T, KIND, OP>(s, path, send, recv, count, sig, vec, op, blocks, stream);
  }
};
template <typename T, int KIND, int OP> struct iris_coll_reduce_op<T, KIND, OP, false> {
  static void launch(const iris_coll_state_t *, iris_coll_path_t, int, const void *, void *, size_t, unsigned long long, int, int, iris_stream_t) {}
};
template <typename T, int KIND>
static void iris_coll_dispatch_reduce(const iris_coll_state_t *s, iris_coll_path_t path, iris_redop_t op, const void *send, void *recv, size_t count,
                                      unsigned long long sig, int vec, int blocks, iris_stream_t stream) {
  const bool exact = (iris_coll_exact<T>::ops >> op & 1u) != 0; /* op has kernels of its own for T */
  if (exact && op == IRIS_SUM) iris_coll_reduce_op<T, KIND, IRIS_SUM>::launch(s, path, op, send, recv, count, sig, vec, blocks, stream);
  else if (exact && op == IRIS_AVG) iris_coll_reduce_op<T, KIND, IRIS_AVG>::launch(s, path, op, send, recv, count, sig, vec, blocks, stream);
  else iris_coll_reduce_op<T, KIND, IRIS_COLL_OP_RUNTIME>::launch(s, path, op, send, recv, count, sig, vec, blocks, stream);
}
template <int KIND>
static void iris_coll_dispatch_type(const iris_coll_state_t *s, iris_coll_path_t path, iris_dtype_t t, iris_redop_t op, const void *send, void *recv, size_t count,
                                    unsigned long long sig, int vec, int blocks, iris_stream_t stream) {
  switch (t) {
  case IRIS_FLOAT32: iris_coll_dispatch_reduce<float, KIND>(s, path, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_FLOAT16: iris_coll_dispatch_reduce<iris_f16_t, KIND>(s, path, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_BFLOAT16: iris_coll_dispatch_reduce<iris_bf16_t, KIND>(s, path, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_INT32: iris_coll_dispatch_reduce<int, KIND>(s, path, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_INT64: iris_coll_dispatch_reduce<long long, KIND>(s, path, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_UINT8: iris_coll_dispatch_reduce<unsigned char, KIND>(s, path, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_FLOAT8_E4M3: iris_coll_dispatch_reduce<iris_fp8_e4m3_t, KIND>(s, path, op, send, recv, count, sig, vec, blocks, stream); break;
  default: iris_coll_dispatch_reduce<iris_fp8_e5m2_t, KIND>(s, path, op, send, recv, count, sig, vec, blocks, stream); break;
  }
}
/* Data movement (all-gather, all-to-all, broadcast): bytes are bytes, so one
 * instantiation per element size (E: an unsigned type of that size) serves every type. */
/* The staged copy (iris_coll_staged_kernel): no more CTAs than chunks. */
template <int KIND>
static void iris_coll_launch_staged(const iris_coll_state_t *s, const void *send, size_t sstride, void *recv, size_t rstride, size_t bytes, int root,
                                    unsigned long long sig, int blocks, iris_stream_t stream) {
  const size_t chunk = iris_coll_staged_chunk(bytes, blocks), chunks = (bytes + chunk - 1) / chunk;
  if ((size_t)blocks > chunks) blocks = (int)chunks;
  iris_coll_staged_kernel<KIND><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, (const char *)send, sstride, (char *)recv, rstride, s->stage_out, bytes, chunk, root, sig);
}
template <typename E, int KIND>
static void iris_coll_dispatch_move(const iris_coll_state_t *s, iris_coll_path_t path, const void *send, void *recv, size_t count, int root, unsigned long long sig,
                                    int blocks, iris_stream_t stream) {
  const size_t bytes = count * sizeof(E);
  if (KIND == IRIS_COLL_BC && path == IRIS_COLL_PATH_LL2) iris_coll_launch_bc_ll2<E>(s, send, recv, count, root, sig, stream);
  else if (path != IRIS_COLL_PATH_BW) iris_coll_launch_ll<E, KIND, IRIS_SUM>(s, send, recv, count, root, sig, IRIS_SUM, blocks, stream);
  else if (KIND == IRIS_COLL_AG) iris_coll_copy_kernel<IRIS_COLL_AG><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, root, sig);
  else if (KIND == IRIS_COLL_A2A) iris_coll_copy_kernel<IRIS_COLL_A2A><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, root, sig);
  else if (s->dev.ctx.world_size >= 3 && bytes >= IRIS_COLL_CHAIN_MIN_BYTES) iris_coll_launch_chain(s, send, recv, bytes, root, sig, blocks, stream);
  else if (s->dev.ctx.world_size >= 3 && bytes >= IRIS_COLL_RELAY_MIN_BYTES) iris_coll_launch_relay(s, send, recv, bytes, root, sig, blocks, stream);
  else iris_coll_copy_kernel<IRIS_COLL_BC><<<blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev, (const char *)send, (char *)recv, bytes, root, sig);
}
template <int KIND>
static void iris_coll_dispatch_size(const iris_coll_state_t *s, iris_coll_path_t path, size_t es, const void *send, void *recv, size_t count, int root, unsigned long long sig,
                                    int blocks, iris_stream_t stream) {
  switch (es) {
  case 1: iris_coll_dispatch_move<unsigned char, KIND>(s, path, send, recv, count, root, sig, blocks, stream); break;
  case 2: iris_coll_dispatch_move<unsigned short, KIND>(s, path, send, recv, count, root, sig, blocks, stream); break;
  case 4: iris_coll_dispatch_move<unsigned, KIND>(s, path, send, recv, count, root, sig, blocks, stream); break;
  default: iris_coll_dispatch_move<unsigned long long, KIND>(s, path, send, recv, count, root, sig, blocks, stream); break;
  }
}

/* A buffer as it enters a call's signature: its heap offset + 2, or 0 off the heap. */
static unsigned long long iris_coll_sig_offset(const iris_device_ctx_t *c, const void *p) {
  const char *base = c->bases[c->rank], *q = (const char *)p;
  return q >= base && q < base + c->heap_size ? (unsigned long long)(q - base) + 2 : 0;
}

/* One launch on buffers that suit the chosen algorithm. The call's signature (announced
 * in every kernel's call header and compared by every rank) hashes the kind, count, type,
 * op, root, the buffers' heap offsets, the algorithm and the grid; type and op enter as
 * type * 16 + op, distinct for each pair. */
static_assert(IRIS_REDOP_COUNT <= 16, "the call signature packs type * 16 + op");
/* stride: bytes from one rank's block to the next in the send (all-to-all) and recv
 * (all-gather, all-to-all) of a staged launch that is a slice of a larger call (0:
 * count * the type's size, the blocks back to back). Other paths take 0.
 * part: where this launch lies in the user's call, which the host splits into part->n
 * launches (iris_coll_enqueue_on's staging loops); outer: the same for a call that an
 * outer loop split further (iris_all_reduce_rmsnorm, the multi-node compositions). NULL,
 * or n <= 1: one launch, whose signature keeps exactly its inputs (iris_coll_sig_part). */
typedef struct iris_coll_part {
  size_t total; /* the user call's count */
  size_t k, n;  /* this launch's index, of n */
} iris_coll_part_t;
static unsigned long long iris_coll_launch_strided(const iris_coll_state_t *s, int kind_flags, iris_coll_path_t path, iris_dtype_t t, iris_redop_t op, const void *send,
                                                   void *recv, size_t count, size_t stride, int root, int ctas, iris_stream_t stream, const iris_coll_part_t *part,
                                                   const iris_coll_part_t *outer) {
  const int W = s->dev.ctx.world_size, kind = kind_flags & ~IRIS_COLL_KIND_FLAGS;
  const size_t es = iris_dtype_size(t), bytes = count * es;
  const size_t step = stride ? stride : bytes;
  unsigned long long sig = 1469598103934665603ULL;
  int vec, blocks;
  sig = (sig ^ (unsigned long long)kind) * 1099511628211ULL;
  sig = (sig ^ (unsigned long long)count) * 1099511628211ULL;
  sig = (sig ^ (unsigned long long)(t * 16 + op)) * 1099511628211ULL;
  sig = (sig ^ (unsigned long long)(root + 1)) * 1099511628211ULL;
  { /* heap buffers must sit at the same heap offsets on every rank; buffers off the heap
     * (the LL paths take any device memory: peers never touch them) enter as "off heap",
     * since their addresses differ from rank to rank; with IRIS_COLL_OFF_HEAP (staged
     * calls) every buffer does, in place or not: peers never touch them */
    const int off = (kind_flags & IRIS_COLL_OFF_HEAP) != 0;
    const int ag_in_place = kind == IRIS_COLL_AG && (const char *)send == (const char *)recv + (size_t)s->dev.ctx.rank * step;
    const int rs_in_place = kind == IRIS_COLL_RS && ((kind_flags & IRIS_COLL_OWN_RECV) || (const char *)recv == (const char *)send + (size_t)s->dev.ctx.rank * step);
    sig = (sig ^ (off || (kind_flags & IRIS_COLL_SEND_LOCAL) ? 0ULL : ag_in_place ? 1ULL : iris_coll_sig_offset(&s->dev.ctx, send))) * 1099511628211ULL;
    sig = (sig ^ (off ? 0ULL : rs_in_place ? 1ULL : iris_coll_sig_offset(&s->dev.ctx, recv))) * 1099511628211ULL;
  }
  /* 16-byte path: every pointer and every per-rank block start is 16-byte aligned */
  vec = ((((uintptr_t)send | (uintptr_t)recv) & 15) == 0) && (kind == IRIS_COLL_AR || (bytes & 15) == 0);
  if (path == IRIS_COLL_PATH_LL || path == IRIS_COLL_PATH_ARM) { /* the one-shot: a thread per line (vector), or fewer CTAs when the caller asks (opts.ctas) */
    blocks = path == IRIS_COLL_PATH_ARM ? iris_coll_arm_blocks(count, es) : iris_coll_ll_blocks(count, es);
    if (ctas > 0 && ctas < blocks) blocks = ctas;
  } else if (path == IRIS_COLL_PATH_STAGED && (kind == IRIS_COLL_AR || kind == IRIS_COLL_RS)) { /* the store two-shot's grid at any size */
    blocks = iris_coll_auto_ctas(1, bytes > IRIS_COLL_AR_STORE_MIN ? bytes : IRIS_COLL_AR_STORE_MIN, W, s->sms, ctas);
  } else if (path == IRIS_COLL_PATH_BW) {
    blocks = iris_coll_bw_ctas(kind, bytes, W, s->sms, ctas);
  } else { /* the staged copy kernels */
    blocks = iris_coll_auto_ctas(kind == IRIS_COLL_AR, bytes, W, s->sms, ctas);
  }
  /* the algorithm and grid too: ranks that would launch different kernels must not agree */
  sig = (sig ^ (unsigned long long)((int)path * 1024 + blocks)) * 1099511628211ULL;
  { /* a launch of a split call: the whole call in its signature, and the split bit (plan.h) */
    const int outer_split = outer && outer->n > 1;
    if (outer_split) sig = iris_coll_sig_part(sig, outer->total, outer->k, outer->n);
    sig = part ? iris_coll_sig_part(sig, part->total, part->k, part->n) : iris_coll_sig_mark(sig, 0);
    if (outer_split) sig = iris_coll_sig_mark(sig, 1);
  }
  if (path == IRIS_COLL_PATH_STAGED && (kind == IRIS_COLL_AG || kind == IRIS_COLL_A2A || kind == IRIS_COLL_BC)) { /* the staged copy */
    if (kind == IRIS_COLL_AG) iris_coll_launch_staged<IRIS_COLL_AG>(s, send, step, recv, step, bytes, root, sig, blocks, stream);
    else if (kind == IRIS_COLL_A2A) iris_coll_launch_staged<IRIS_COLL_A2A>(s, send, step, recv, step, bytes, root, sig, blocks, stream);
    else iris_coll_launch_staged<IRIS_COLL_BC>(s, send, step, recv, step, bytes, root, sig, blocks, stream);
    return sig;
  }
  switch (kind) {
  case IRIS_COLL_AR: iris_coll_dispatch_type<IRIS_COLL_AR>(s, path, t, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_COLL_RS: iris_coll_dispatch_type<IRIS_COLL_RS>(s, path, t, op, send, recv, count, sig, vec, blocks, stream); break;
  case IRIS_COLL_AG: iris_coll_dispatch_size<IRIS_COLL_AG>(s, path, es, send, recv, count, root, sig, blocks, stream); break;
  case IRIS_COLL_A2A: iris_coll_dispatch_size<IRIS_COLL_A2A>(s, path, es, send, recv, count, root, sig, blocks, stream); break;
  default: iris_coll_dispatch_size<IRIS_COLL_BC>(s, path, es, send, recv, count, root, sig, blocks, stream); break;
  }
  return sig;
}

static void iris_coll_launch(const iris_coll_state_t *s, int kind_flags, iris_coll_path_t path, iris_dtype_t t, iris_redop_t op, const void *send, void *recv, size_t count,
                             int root, int ctas, iris_stream_t stream, const iris_coll_part_t *outer) {
  (void)iris_coll_launch_strided(s, kind_flags, path, t, op, send, recv, count, 0, root, ctas, stream, NULL, outer);
}

/* The staging area's copy out after the launch of signature sig (iris_coll_copy_out_kernel):
 * `rows` rows of `width` bytes; a 16-byte vector per thread, up to IRIS_COLL_COPY_OUT_WAVES
 * CTAs per SM. */
static void iris_coll_launch_copy_out(const iris_coll_state_t *s, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, int rows,
                                      unsigned long long sig, iris_stream_t stream) {
  const size_t vecs = (width * (size_t)rows + 15) / 16, per = IRIS_COLL_BW_THREADS, cap = (size_t)(s->sms > 0 ? s->sms : 1) * IRIS_COLL_COPY_OUT_WAVES;
  const int vec = ((((uintptr_t)dst | (uintptr_t)src | dpitch | spitch | width) & 15) == 0) && vecs < ((size_t)1 << 31);
  size_t blocks = (vecs + per - 1) / per;
  if (blocks < 1) blocks = 1;
  if (blocks > cap) blocks = cap;
  if (vec)
    iris_coll_copy_out_kernel<true><<<(unsigned)blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev.calls, s->dev.hdr, s->dev.ctx.world_size, s->dev.ctx.rank, (char *)dst,
                                                                                         dpitch, (const char *)src, spitch, width, rows, sig);
  else
    iris_coll_copy_out_kernel<false><<<(unsigned)blocks, IRIS_COLL_BW_THREADS, 0, stream>>>(s->dev.calls, s->dev.hdr, s->dev.ctx.world_size, s->dev.ctx.rank, (char *)dst,
                                                                                          dpitch, (const char *)src, spitch, width, rows, sig);
}

#endif /* IRIS_INTERNAL_COLL_LAUNCH_H */
