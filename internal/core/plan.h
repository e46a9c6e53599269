/* internal/core/plan.h: one lifecycle for every plan of the GEMM and MoE headers
 * (iris_ag_gemm_t, iris_gemm_rs_t, iris_moe_t), written once as functions that each plan
 * calls in this order:
 *   create  iris_detail_plan_args       a NULL context refused at once (no one to meet)
 *           iris_detail_plan_meet       a multi-node context refused alike on every rank,
 *                                       before any exchange; the description's fields
 *                                       gathered from every rank and compared, before any
 *                                       rank judges its own (a rank with a bad description
 *                                       must not leave the others waiting); a NULL
 *                                       description or out takes part too, refused on
 *                                       every rank (then *out = NULL where out is given)
 *           (the plan's own rules, the same verdict on every rank)
 *           iris_detail_plan_device     the context's GPU current, the caller's given back
 *           (the plan's own exchanges, before any step that may fail on one rank only)
 *           iris_detail_plan_alloc      the plan's host struct; a rank without one skips
 *                                       the local steps but reaches every later exchange
 *           (heap blocks: the same sequence on every rank; then this rank's local setup,
 *           which holds no exchange: a rank that failed before it would skip it)
 *           iris_detail_plan_agree      a plan on every rank or on none (and the kernels
 *                                       cut alike where a rank counts its peers' signals)
 *           iris_detail_plan_finish     on failure the plan's destroy undoes this rank's
 *                                       part (its heap blocks too: the verdict is the same
 *                                       everywhere), else the plan is handed out
 *   run     iris_detail_plan_run_begin  a fatal fault of the context refuses the run at
 *                                       once; then the run is ordered after the context's
 *                                       previous communication call, whatever its stream
 *           (the plan's launches; iris_detail_plan_launched checks each kernel launch)
 *           iris_detail_plan_run_end    the order's end; the first failure is returned
 *   destroy the plan's own: local resources, then its heap blocks in reverse order.
 * Host code of the implementation (IRIS_IMPLEMENTATION), C with a C++ template at the end;
 * not a public header. */
#ifndef IRIS_INTERNAL_CORE_PLAN_H
#define IRIS_INTERNAL_CORE_PLAN_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"
#include "status.h"

/* What a plan's create is called in its errors. */
typedef struct iris_detail_plan_kind {
  const char *create; /* the create function: "iris_ag_gemm_create" */
  const char *what;   /* what runs within one node: "the all-gather + GEMM" */
  const char *noun;   /* what a description describes: "problem", "layer" */
  const char *fields; /* the description's fields in words, for a mismatch */
} iris_detail_plan_kind_t;

/* The create's context: a NULL one is refused at once (there is no one to meet). A NULL
 * description or out is not refused here but by iris_detail_plan_meet, on every rank: a
 * rank that returned at once would leave its peers waiting in the meet for the exchange's
 * bound (IRIS_BARRIER_TIMEOUT_MS), and then pair their next exchange with its next one. */
static inline iris_status_t iris_detail_plan_args(const iris_detail_plan_kind_t *k, const iris_t *ctx, const void *desc, const void *out) {
  if (ctx) return IRIS_SUCCESS;
  return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL argument (ctx %p, desc %p, out %p)", k->create, (const void *)ctx, desc, out);
}

/* Collective: gathers nf values from every rank; *differs = the first rank whose values
 * differ from this rank's (-1: none). A failed exchange returns its status. */
static inline iris_status_t iris_detail_meet_same(iris_t *ctx, const long long *mine, int nf, int *differs) {
  const int W = iris_world_size(ctx);
  const size_t bytes = (size_t)nf * sizeof *mine;
  long long *all;
  iris_status_t st;
  int q;
  *differs = -1;
  if (!(all = (long long *)calloc((size_t)W * (size_t)nf, sizeof *all))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory");
  st = iris_allgather_host(ctx, mine, all, bytes);
  for (q = 0; st == IRIS_SUCCESS && q < W && *differs < 0; ++q)
    if (memcmp(all + (size_t)q * (size_t)nf, mine, bytes)) *differs = q;
  free(all);
  return st;
}

/* The most description fields a plan's meet compares (iris_ag_gemm_create: 16). */
#define IRIS_DETAIL_PLAN_MAX_FIELDS 16

/* Collective: refuses a context that spans several nodes (the plans run within one node),
 * alike on every rank before any exchange; then gathers the description's nf fields
 * (fields, not bytes: the descriptions have padding) from every rank and
 * compares them: IRIS_ERROR_MISMATCH names the first rank that describes another problem.
 * A rank whose desc or out is NULL (mine is then not read) takes part with a row marked
 * absent: it returns IRIS_ERROR_INVALID_ARGUMENT, and every other rank
 * IRIS_ERROR_MISMATCH naming it. The rows lie on the stack (one node: at most
 * IRIS_MAX_RANKS ranks): no allocation that could fail on one rank before the exchange. */
static inline iris_status_t iris_detail_plan_meet(const iris_detail_plan_kind_t *k, iris_t *ctx, const void *desc, const void *out, const long long *mine, int nf) {
  const int me = iris_rank(ctx), W = iris_world_size(ctx), given = desc && out, row = 1 + nf;
  long long all[IRIS_MAX_RANKS * (1 + IRIS_DETAIL_PLAN_MAX_FIELDS)], m[1 + IRIS_DETAIL_PLAN_MAX_FIELDS];
  iris_status_t st;
  int q, i, differs = -1;
  if (iris_num_nodes(ctx) > 1)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                            "rank %d: %s: %s runs within one node, and this context spans %d nodes; create it on a node-local context (docs/multinode.md)", me,
                            k->create, k->what, iris_num_nodes(ctx));
  if (W < 1 || W > IRIS_MAX_RANKS || nf < 0 || nf > IRIS_DETAIL_PLAN_MAX_FIELDS) /* the same on every rank */
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: %d ranks, %d fields (at most %d and %d)", me, k->create, W, nf, IRIS_MAX_RANKS,
                            IRIS_DETAIL_PLAN_MAX_FIELDS);
  m[0] = given; /* first: a row marked absent differs from every description */
  for (i = 0; i < nf; ++i) m[1 + i] = given ? mine[i] : 0;
  st = iris_allgather_host(ctx, m, all, (size_t)row * sizeof *all);
  for (q = 0; st == IRIS_SUCCESS && q < W && differs < 0; ++q)
    if (memcmp(all + (size_t)q * (size_t)row, m, (size_t)row * sizeof *all)) differs = q;
  if (st == IRIS_SUCCESS && !given)
    st = iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: NULL argument (desc %p, out %p); the call took part, so every rank refuses it", me, k->create, desc, out);
  else if (st == IRIS_SUCCESS && differs >= 0 && !all[(size_t)differs * (size_t)row])
    st = iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: %s: rank %d passed a NULL description or out (see its error)", me, k->create, differs);
  else if (st == IRIS_SUCCESS && differs >= 0)
    st = iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: %s: rank %d describes a different %s (%s)", me, k->create, differs, k->noun, k->fields);
  return st;
}

#if defined(IRIS_TEST_HOOKS)
/* Tests only: the rank whose plan allocations fail (-1: none), set while no create runs. */
static int iris_detail_test_plan_alloc_fails = -1;
#endif
/* The plan's host struct, zeroed: NULL when host memory is short (with IRIS_TEST_HOOKS,
 * also on rank iris_detail_test_plan_alloc_fails); then *st becomes
 * IRIS_ERROR_OUT_OF_MEMORY unless it holds a failure already. The create goes on without a
 * plan to every later exchange (iris_detail_plan_agree carries the failure), so the peers
 * refuse it at once instead of waiting out the exchange's bound. */
static inline void *iris_detail_plan_alloc(const iris_detail_plan_kind_t *k, iris_t *ctx, size_t bytes, iris_status_t *st) {
  void *p = NULL;
#if defined(IRIS_TEST_HOOKS)
  if (iris_detail_test_plan_alloc_fails != iris_rank(ctx))
#endif
    p = calloc(1, bytes);
  if (!p && *st == IRIS_SUCCESS)
    *st = iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: %s: out of host memory for the plan (%zu bytes); the create took part, so every rank refuses it", iris_rank(ctx),
                           k->create, bytes);
  return p;
}

/* The context's GPU made current for a create; returns the caller's (-1: none), which
 * iris_detail_plan_device_back makes current again. */
static inline int iris_detail_plan_device(iris_t *ctx) {
  int old = -1;
  (void)iris_gpu_get_device(&old);
  (void)iris_gpu_set_device(iris_device_ordinal(ctx));
  return old;
}
static inline void iris_detail_plan_device_back(int old) {
  if (old >= 0) (void)iris_gpu_set_device(old);
}

/* Collective: the verdict of a plan's create, the same on every rank (a plan exists on
 * every rank or on none). st: this rank's verdict. cut: n ints (n <= 8; NULL, 0: none) that
 * every rank's kernels must have alike, because a rank waits for as many signals as it
 * counts with its own numbers (names: the ints in words, comma-separated; hint: the fix).
 * Returns this rank's failure st; else IRIS_ERROR_MISMATCH naming the first rank that
 * failed (its own error says why) or whose cut differs; IRIS_ERROR_TIMEOUT when the
 * exchange itself failed. */
static inline iris_status_t iris_detail_plan_agree(iris_t *ctx, iris_status_t st, const char *fn, const int *cut, int n, const char *names, const char *hint) {
  const int W = iris_world_size(ctx), me = iris_rank(ctx), row = 1 + n;
  int mine[9], q, i, all[IRIS_MAX_RANKS * 9]; /* on the stack: no allocation that could fail on one rank before the exchange */
  if (W < 1 || W > IRIS_MAX_RANKS || n < 0 || n > 8) /* the same on every rank */
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: %d ranks, %d ints to agree (at most %d and 8)", me, fn, W, n, IRIS_MAX_RANKS);
  mine[0] = st == IRIS_SUCCESS;
  for (i = 0; i < n; ++i) mine[1 + i] = cut[i];
  if (iris_allgather_host(ctx, mine, all, (size_t)row * sizeof *mine) != IRIS_SUCCESS) st = st == IRIS_SUCCESS ? IRIS_ERROR_TIMEOUT : st;
  else
    for (q = 0; q < W && st == IRIS_SUCCESS; ++q) {
      const int *o = all + (size_t)q * (size_t)row;
      if (!o[0]) st = iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: %s: rank %d could not create its plan (see its error)", me, fn, q);
      else if (n && memcmp(o + 1, mine + 1, (size_t)n * sizeof *o)) {
        char theirs[128] = "", here[128] = "";
        for (i = 0; i < n; ++i) {
          snprintf(theirs + strlen(theirs), sizeof theirs - strlen(theirs), "%s%d", i ? ", " : "", o[1 + i]);
          snprintf(here + strlen(here), sizeof here - strlen(here), "%s%d", i ? ", " : "", mine[1 + i]);
        }
        st = iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: %s: rank %d cuts the kernel differently (%s: %s; here %s): %s", me, fn, q, names, theirs, here, hint);
      }
    }
  return st;
}

/* The run's prologue: the context's fatal fault refuses it at once (no launch, no wait);
 * then it is ordered after the context's previous communication call, whatever its
 * stream (iris_detail_order_begin). */
static inline iris_status_t iris_detail_plan_run_begin(iris_t *ctx, iris_stream_t stream) {
  const iris_status_t st = iris_detail_check_fault(ctx);
  return st != IRIS_SUCCESS ? st : iris_detail_order_begin(ctx, stream);
}
/* The run's epilogue: the order's end (always, after a begin that succeeded); the run's
 * own failure st first. */
static inline iris_status_t iris_detail_plan_run_end(iris_t *ctx, iris_stream_t stream, iris_status_t st) {
  const iris_status_t st2 = iris_detail_order_end(ctx, stream);
  return st != IRIS_SUCCESS ? st : st2;
}
/* After a kernel launch: its error (iris_gpu_last_error, read either way) as
 * IRIS_ERROR_GPU naming `what`, unless st is a failure already. */
static inline iris_status_t iris_detail_plan_launched(int rank, iris_status_t st, const char *what) {
  const iris_gpu_error_t e = iris_gpu_last_error();
  return e != IRIS_GPU_SUCCESS && st == IRIS_SUCCESS ? iris_detail_gpu_fail(rank, what, e) : st;
}

#ifdef __cplusplus
extern "C++" {
/* The create's end: on failure destroy(p) undoes this rank's part and the verdict is
 * returned; else *out = p. */
template <typename P>
static inline iris_status_t iris_detail_plan_finish(iris_status_t st, P *p, P **out, iris_status_t (*destroy)(P *)) {
  if (st != IRIS_SUCCESS) {
    destroy(p);
    return st;
  }
  *out = p;
  return IRIS_SUCCESS;
}
}
#endif

#endif /* IRIS_INTERNAL_CORE_PLAN_H */
