/* internal/coll/multinode.h: collectives over several nodes: the node's ranks run
 * the iris kernels, the rails (NCCL/RCCL, loaded at run time) join the nodes. Under
 * IRIS_IMPLEMENTATION.
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_INTERNAL_COLL_MULTINODE_H
#define IRIS_INTERNAL_COLL_MULTINODE_H
#include "../../iris_collectives.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "plan.h"
#include "mn_route.h"
#include "protocol.h"
#include "launch.h"
#include "host.h"

/* ---- multi-node worlds (docs/multinode.md): the node's ranks run the iris kernels
 * (iris_coll_enqueue, internal/coll/host.h, works on the node), the rails (one
 * NCCL/RCCL communicator per local rank across the nodes) join the nodes. L ranks per
 * node, N nodes, global rank g = node * L + local rank. */
/* ncclDataType_t of an iris type (-1: none), ncclRedOp_t of an iris op */
static int iris_coll_nccl_type(iris_dtype_t t) {
  static const int map[IRIS_DTYPE_COUNT] = {7 /* ncclFloat32 */, 6 /* ncclFloat16 */, 9 /* ncclBfloat16 */, 2 /* ncclInt32 */,
                                            4 /* ncclInt64 */,   1 /* ncclUint8 */,   10 /* ncclFloat8e4m3 */, 11 /* ncclFloat8e5m2 */};
  return (unsigned)t < IRIS_DTYPE_COUNT ? map[t] : -1;
}
static int iris_coll_nccl_op(iris_redop_t op) { return op == IRIS_SUM ? 0 : op == IRIS_MAX ? 2 : op == IRIS_MIN ? 3 : 4 /* ncclAvg */; }
/* What the rails cannot do, refused before anything is enqueued. */
static iris_status_t iris_coll_mn_check(iris_t *ctx, const char *name, int kind, iris_dtype_t t, iris_redop_t op, const iris_nccl_api_t *nc) {
  const int me = iris_rank(ctx);
  iris_status_t st;
  if (!nc) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: the context has no rail communicator", me, name);
  if (iris_coll_nccl_type(t) < 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: unknown data type %d", me, name, (int)t);
  if ((t == IRIS_FLOAT8_E4M3 || t == IRIS_FLOAT8_E5M2) && nc->version < 22400 && (kind == IRIS_COLL_AR || kind == IRIS_COLL_RS))
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: fp8 reductions between nodes need NCCL 2.24 or later (loaded: version code %d)", me, name,
                            nc->version);
  if ((kind == IRIS_COLL_AR || kind == IRIS_COLL_RS) && (op < IRIS_SUM || op >= IRIS_REDOP_COUNT))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: unknown reduction %d", me, name, (int)op);
  if ((st = iris_coll_check_compiled(kind, t, op, me, name)) != IRIS_SUCCESS) return st;
  if ((kind == IRIS_COLL_AR || kind == IRIS_COLL_RS) && op == IRIS_AVG && (t == IRIS_INT32 || t == IRIS_INT64 || t == IRIS_UINT8))
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: IRIS_AVG of an integer type across nodes (its truncation does not compose over nodes); use IRIS_SUM "
                            "and divide", me, name);
  return IRIS_SUCCESS;
}
static iris_status_t iris_coll_nccl_fail(iris_t *ctx, const char *name, const char *step, const iris_nccl_api_t *nc, int r) {
  return iris_detail_fail(IRIS_ERROR_SYSTEM, "rank %d (node %d): %s: the %s (NCCL) failed: %s", iris_rank(ctx), iris_node(ctx), name, step, nc->get_error_string(r));
}
/* An NCCL call's result r as a status: IRIS_SUCCESS, or its failure naming the step
 * ("rail all-reduce", "world all-gather", ...). */
static iris_status_t iris_coll_nccl_check(iris_t *ctx, const char *name, const char *step, const iris_nccl_api_t *nc, int r) {
  return r == 0 ? IRIS_SUCCESS : iris_coll_nccl_fail(ctx, name, step, nc, r);
}

/* ---- the route of a call (internal/coll/mn_route.h): the table's kinds are ours */
static_assert(IRIS_COLL_AR == 0 && IRIS_COLL_AG == 1 && IRIS_COLL_RS == 2 && IRIS_COLL_A2A == 3 && IRIS_COLL_BC == 4 && IRIS_COLL_KINDS == IRIS_COLL_MN_KINDS,
              "mn_route.h numbers the collectives as protocol.h does");
/* The route of a call on a set-up multi-node context: from the call (kind, count, type),
 * the world size, the table agreed at setup and whether the world communicator exists
 * (agreed at bring-up): equal on every rank. */
static iris_coll_mn_route_t iris_coll_mn_route(iris_t *ctx, int kind, size_t count, iris_dtype_t t) {
  const iris_coll_state_t *s = (const iris_coll_state_t *)iris_detail_get_ext(ctx);
  if (!s || iris_num_nodes(ctx) <= 1) return IRIS_COLL_MN_HIER;
  return iris_coll_mn_decide(&s->mn_table, iris_detail_world_comm(ctx) != NULL, kind, count, iris_dtype_size(t), iris_world_size(ctx));
}

/* The whole call on NCCL's communicator over every rank (NCCL's semantics are iris's:
 * the same in-place layouts, global rank order). Data-moving calls move bytes. An
 * all-to-all is NCCL send/recv in one group per piece of k elements of each block (k:
 * all of it when the W blocks fit IRIS_COLL_MN_SCRATCH_BYTES; the same pieces on every
 * rank, so the sends and receives pair up); in place, each piece is first copied into
 * the heap scratch and sent from there. */
static iris_status_t iris_coll_mn_nccl_whole(iris_t *ctx, int kind, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op, int root,
                                             iris_stream_t stream) {
  const char *name = iris_coll_names[kind];
  const iris_nccl_api_t *nc = iris_detail_nccl(ctx);
  void *world = iris_detail_world_comm(ctx);
  const int nt = iris_coll_nccl_type(t), nop = iris_coll_nccl_op(op), W = iris_world_size(ctx);
  const size_t es = iris_dtype_size(t);
  iris_coll_state_t *s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  if (kind == IRIS_COLL_AR) return iris_coll_nccl_check(ctx, name, "world all-reduce", nc, nc->all_reduce(send, recv, count, nt, nop, world, stream));
  if (kind == IRIS_COLL_AG)
    return iris_coll_nccl_check(ctx, name, "world all-gather", nc, nc->all_gather(send, recv, count * es, 1 /* ncclUint8 */, world, stream));
  if (kind == IRIS_COLL_RS) return iris_coll_nccl_check(ctx, name, "world reduce-scatter", nc, nc->reduce_scatter(send, recv, count, nt, nop, world, stream));
  if (kind == IRIS_COLL_BC)
    return iris_coll_nccl_check(ctx, name, "world broadcast", nc, nc->broadcast(send, recv, count * es, 1 /* ncclUint8 */, root, world, stream));
  {
    const size_t cap = IRIS_COLL_MN_SCRATCH_BYTES / es / (size_t)W, k = count < cap ? count : cap;
    const int in_place = send == recv;
    size_t c0;
    int q;
    iris_status_t st;
    if (k == 0) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: IRIS_COLL_MN_SCRATCH_BYTES is too small for %d ranks", iris_rank(ctx), name, W);
    for (c0 = 0; c0 < count; c0 += k) {
      const size_t m = count - c0 < k ? count - c0 : k, blk = m * es;
      if (in_place) {
        iris_gpu_error_t e = iris_gpu_memcpy2d_async(s->mn_scratch, blk, (const char *)send + c0 * es, count * es, blk, (size_t)W, stream);
        if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", iris_rank(ctx), name, iris_gpu_error_text(e));
      }
      if ((st = iris_coll_nccl_check(ctx, name, "world group start", nc, nc->group_start())) != IRIS_SUCCESS) return st;
      for (q = 0; q < W; q++) {
        const char *from = in_place ? s->mn_scratch + (size_t)q * blk : (const char *)send + ((size_t)q * count + c0) * es;
        int r1 = nc->send(from, blk, 1 /* ncclUint8 */, q, world, stream);
        int r2 = r1 ? 0 : nc->recv((char *)recv + ((size_t)q * count + c0) * es, blk, 1, q, world, stream);
        if (r1 || r2) { nc->group_end(); return iris_coll_nccl_fail(ctx, name, "world send/recv", nc, r1 ? r1 : r2); }
      }
      if ((st = iris_coll_nccl_check(ctx, name, "world group end", nc, nc->group_end())) != IRIS_SUCCESS) return st;
    }
  }
  return IRIS_SUCCESS;
}

/* The call, between the caller's iris_detail_order_begin and _end: handed to NCCL whole,
 * or the composition. */
static iris_status_t iris_coll_mn_enqueue(iris_t *ctx, int kind, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op, int root,
                                          iris_stream_t stream, const iris_coll_opts_t *opts) {
  const char *name = iris_coll_names[kind];
  const iris_nccl_api_t *nc = iris_detail_nccl(ctx);
  void *rail = iris_rail_comm(ctx);
  const int L = iris_local_size(ctx), N = iris_num_nodes(ctx), l = iris_local_rank(ctx), n = iris_node(ctx);
  const int nt = iris_coll_nccl_type(t), nop = iris_coll_nccl_op(op);
  const size_t es = iris_dtype_size(t), W = (size_t)N * (size_t)L;
  iris_coll_state_t *s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  iris_status_t st;
  if (iris_coll_mn_route(ctx, kind, count, t) == IRIS_COLL_MN_NCCL) return iris_coll_mn_nccl_whole(ctx, kind, send, recv, count, t, op, root, stream);
  if (kind == IRIS_COLL_AR) {
    /* the caller's algorithm is an all-reduce's: it goes to the in-node all-reduce only;
     * the reduce-scatter, all-gather and broadcast steps choose theirs by size (a forced
     * one-shot armed, or two-shot LL at 2 ranks, would be refused there after the earlier
     * steps had written recv); the grid and flags apply to every step */
    iris_coll_opts_t step = IRIS_COLL_OPTS_INIT;
    if (opts) {
      step.ctas = opts->ctas;
      step.flags = iris_coll_opts_flags(opts);
    }
    if (L == 1) { /* one rank per node: the rail is the world */
      if ((st = iris_coll_nccl_check(ctx, name, "rail all-reduce", nc, nc->all_reduce(send, recv, count, nt, nop, rail, stream))) != IRIS_SUCCESS) return st;
    } else if (count % (size_t)L == 0 && count * es > IRIS_COLL_MN_ONESHOT_MAX) {
      /* in-node reduce-scatter into this rank's part of recv, the rail all-reduces that
       * part, in-node all-gather in place: each element is reduced by one rail */
      const size_t c = count / (size_t)L;
      char *part = (char *)recv + (size_t)l * c * es;
      if ((st = iris_coll_enqueue(ctx, IRIS_COLL_RS | IRIS_COLL_OWN_RECV, send, part, c, t, op, 0, stream, &step)) != IRIS_SUCCESS) return st; /* part: offset l c */
      if ((st = iris_coll_nccl_check(ctx, name, "rail all-reduce", nc, nc->all_reduce(part, part, c, nt, nop, rail, stream))) != IRIS_SUCCESS) return st;
      if ((st = iris_coll_enqueue(ctx, IRIS_COLL_AG, part, recv, c, t, op, 0, stream, &step)) != IRIS_SUCCESS) return st;
    } else {
      /* small (or not divisible by L): in-node all-reduce, rail 0 all-reduces across the
       * nodes, in-node broadcast from local rank 0 */
      if ((st = iris_coll_enqueue(ctx, IRIS_COLL_AR, send, recv, count, t, op, 0, stream, opts)) != IRIS_SUCCESS) return st;
      if (l == 0 && (st = iris_coll_nccl_check(ctx, name, "rail all-reduce", nc, nc->all_reduce(recv, recv, count, nt, nop, rail, stream))) != IRIS_SUCCESS) return st;
      if ((st = iris_coll_enqueue(ctx, IRIS_COLL_BC, recv, recv, count, t, op, 0, stream, &step)) != IRIS_SUCCESS) return st;
    }
  } else if (kind == IRIS_COLL_AG) {
    /* in-node all-gather into this node's slot of recv (global order), then every rail
     * all-gathers the node slots in place */
    char *slot = (char *)recv + (size_t)n * (size_t)L * count * es;
    if ((st = iris_coll_enqueue(ctx, IRIS_COLL_AG, send, slot, count, t, op, 0, stream, opts)) != IRIS_SUCCESS) return st;
    if ((st = iris_coll_nccl_check(ctx, name, "rail all-gather", nc, nc->all_gather(slot, recv, (size_t)L * count * es, 1 /* ncclUint8: data moves as bytes */, rail, stream))) != IRIS_SUCCESS) return st;
  } else if (kind == IRIS_COLL_RS) {
    /* per piece of k elements of each rank's count: the W blocks are copied contiguous
     * (unless k == count), the rail reduce-scatters the node blocks (L * k each), the
     * node reduce-scatters its block: rank g gets block g reduced over the world */
    const size_t cap = IRIS_COLL_MN_SCRATCH_BYTES / es / (W + (size_t)L);
    size_t k = count < cap ? count : cap, c0;
    iris_coll_part_t piece = {count, 0, 0};
    if (L == 1) {
      if ((st = iris_coll_nccl_check(ctx, name, "rail reduce-scatter", nc, nc->reduce_scatter(send, recv, count, nt, nop, rail, stream))) != IRIS_SUCCESS) return st;
      return IRIS_SUCCESS;
    }
    if (k == 0) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: IRIS_COLL_MN_SCRATCH_BYTES is too small for %zu ranks", iris_rank(ctx), name, W);
    piece.n = (count + k - 1) / k; /* more than one piece: each node launch's signature says so (plan.h) */
    for (c0 = 0; c0 < count; c0 += k, piece.k++) {
      const size_t m = count - c0 < k ? count - c0 : k;
      const char *in = (const char *)send;
      char *mid = s->mn_scratch + W * k * es;
      if (m != count) {
        iris_gpu_error_t e = iris_gpu_memcpy2d_async(s->mn_scratch, m * es, (const char *)send + c0 * es, count * es, m * es, W, stream);
        if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", iris_rank(ctx), name, iris_gpu_error_text(e));
        in = s->mn_scratch;
      }
      if ((st = iris_coll_nccl_check(ctx, name, "rail reduce-scatter", nc, nc->reduce_scatter(in, mid, (size_t)L * m, nt, nop, rail, stream))) != IRIS_SUCCESS) return st;
      /* recv: in place it is send + g count, at an offset that differs by rank */
      if ((st = iris_coll_enqueue_part(ctx, &piece, IRIS_COLL_RS | IRIS_COLL_OWN_RECV, mid, (char *)recv + c0 * es, m, t, op, 0, stream, opts)) != IRIS_SUCCESS) return st;
    }
  } else if (kind == IRIS_COLL_A2A) {
    /* per piece of k elements of each block: s1[l'][n'] = send[n' L + l'] (copies), in-node
     * all-to-all of N k per peer into s2[l][n'], s3[n'][l] = s2[l][n'] (copies), rail
     * send/recv of L k per node into s2[n'][l] = the blocks of ranks n' L + l, copied to
     * recv (received in place when one piece holds the whole block) */
    const size_t cap = IRIS_COLL_MN_SCRATCH_BYTES / es / (3 * W);
    const size_t k = count < cap ? count : cap;
    size_t c0;
    int q;
    iris_coll_part_t piece = {count, 0, 0};
    if (k == 0) return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: IRIS_COLL_MN_SCRATCH_BYTES is too small for %zu ranks", iris_rank(ctx), name, W);
    piece.n = (count + k - 1) / k; /* more than one piece: each node launch's signature says so (plan.h) */
    for (c0 = 0; c0 < count; c0 += k, piece.k++) {
      const size_t m = count - c0 < k ? count - c0 : k, blk = m * es;
      char *s1 = s->mn_scratch, *s2 = s1 + W * blk, *s3 = s2 + W * blk;
      iris_gpu_error_t e = IRIS_GPU_SUCCESS;
      for (q = 0; q < L && e == IRIS_GPU_SUCCESS; q++)
        e = iris_gpu_memcpy2d_async(s1 + (size_t)q * N * blk, blk, (const char *)send + ((size_t)q * count + c0) * es, (size_t)L * count * es, blk, (size_t)N, stream);
      if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", iris_rank(ctx), name, iris_gpu_error_text(e));
      if ((st = iris_coll_enqueue_part(ctx, &piece, IRIS_COLL_A2A, s1, s2, (size_t)N * m, t, op, 0, stream, opts)) != IRIS_SUCCESS) return st;
      for (q = 0; q < N && e == IRIS_GPU_SUCCESS; q++)
        e = iris_gpu_memcpy2d_async(s3 + (size_t)q * L * blk, blk, s2 + (size_t)q * blk, (size_t)N * blk, blk, (size_t)L, stream);
      if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", iris_rank(ctx), name, iris_gpu_error_text(e));
      if ((st = iris_coll_nccl_check(ctx, name, "rail group start", nc, nc->group_start())) != IRIS_SUCCESS) return st;
      for (q = 0; q < N; q++) {
        char *into = m == count ? (char *)recv + (size_t)q * L * count * es : s2 + (size_t)q * L * blk;
        int r1 = nc->send(s3 + (size_t)q * L * blk, (size_t)L * blk, 1 /* ncclUint8 */, q, rail, stream);
        int r2 = r1 ? 0 : nc->recv(into, (size_t)L * blk, 1, q, rail, stream);
        if (r1 || r2) { nc->group_end(); return iris_coll_nccl_fail(ctx, name, "rail send/recv", nc, r1 ? r1 : r2); }
      }
      if ((st = iris_coll_nccl_check(ctx, name, "rail group end", nc, nc->group_end())) != IRIS_SUCCESS) return st;
      for (q = 0; m != count && q < N && e == IRIS_GPU_SUCCESS; q++)
        e = iris_gpu_memcpy2d_async((char *)recv + ((size_t)q * L * count + c0) * es, count * es, s2 + (size_t)q * L * blk, blk, blk, (size_t)L, stream);
      if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", iris_rank(ctx), name, iris_gpu_error_text(e));
    }
  } else { /* broadcast: the root's rail carries it to every node, each node broadcasts it */
    const int rn = root / L, rl = root % L;
    if (l == rl && (st = iris_coll_nccl_check(ctx, name, "rail broadcast", nc, nc->broadcast(send, recv, count * es, 1 /* ncclUint8 */, rn, rail, stream))) != IRIS_SUCCESS) return st;
    if (L > 1 && (st = iris_coll_enqueue(ctx, IRIS_COLL_BC, recv, recv, count, t, op, rl, stream, opts)) != IRIS_SUCCESS) return st;
  }
  return IRIS_SUCCESS;
}

static iris_status_t iris_coll_mn_run(iris_t *ctx, int kind, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op, int root,
                                      iris_stream_t stream, const iris_coll_opts_t *opts) {
  const char *name = iris_coll_names[kind];
  const int me = iris_rank(ctx), W = iris_world_size(ctx);
  iris_status_t st, st2;
  if ((st = iris_coll_mn_check(ctx, name, kind, t, op, iris_detail_nccl(ctx))) != IRIS_SUCCESS) return st;
  if (kind == IRIS_COLL_BC && (root < 0 || root >= W)) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rank %d: %s: root %d outside [0, %d)", me, name, root, W);
  if (opts && (st = iris_coll_opts_check(opts, name)) != IRIS_SUCCESS) return st; /* every field, whichever route the call takes */
  if (count == 0) return IRIS_SUCCESS;
  if (!send || !recv) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: NULL buffer", me, name);
  if (!iris_detail_get_ext(ctx)) {
    if (iris_gpu_stream_capturing(stream))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: the first collective call (or iris_collectives_setup) must come before graph capture", me, name);
    if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st;
  }
  if ((st = iris_detail_order_begin(ctx, stream)) != IRIS_SUCCESS) return st;
  st = iris_coll_mn_enqueue(ctx, kind, send, recv, count, t, op, root, stream, opts);
  st2 = iris_detail_order_end(ctx, stream);
  return st != IRIS_SUCCESS ? st : st2;
}

#endif /* IRIS_INTERNAL_COLL_MULTINODE_H */
