/* internal/coll/team.h: the host collectives on a team (the *_team calls of
 * iris_collectives.h). A team's collective state is the world's kind of state laid out in
 * the team's collective area (internal/core/team.h: the pool on the heap), with the team as
 * the device context's world: rank = team rank, bases[r] = member r's heap, fault = the
 * team's fault words. So every kernel runs unchanged, instruction for instruction, on a
 * team; the team has its own call numbers, headers (mismatches stay within the team), call
 * order across streams and fault words, and two teams' calls may run at the same time.
 * Under IRIS_IMPLEMENTATION. Part of iris_collectives.h; not a public header. */
#ifndef IRIS_INTERNAL_COLL_TEAM_H
#define IRIS_INTERNAL_COLL_TEAM_H
#include "../../iris_collectives.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "../core/team.h"
#include "plan.h"
#include "protocol.h"
#include "launch.h"
#include "host.h"
#include "api.h"

/* The collective area (internal/core/team.h sizes it without seeing this layer) holds this
 * layer's state: */
static_assert(sizeof(iris_coll_ctl_t) <= IRIS_DETAIL_TEAM_CTL_BYTES, "a team's control block fits its place in the collective area");
static_assert(IRIS_DETAIL_TEAM_LL == IRIS_COLL_LL_BYTES && IRIS_DETAIL_TEAM_LL2 == IRIS_COLL_LL2_BYTES && IRIS_DETAIL_TEAM_CTAS == IRIS_COLL_MAX_CTAS &&
                  IRIS_DETAIL_TEAM_SCRATCH >= IRIS_COLL_AR_SCRATCH_BYTES,
              "the team collective area's sizes (internal/core/team.h) follow IRIS_COLL_LL_BYTES, _LL2_BYTES, _MAX_CTAS, _AR_SCRATCH_BYTES: define them globally");

/* The team's state, made at its first call (host memory only: capturable) and kept with the
 * team (freed when it is destroyed). */
static iris_status_t iris_coll_team_state(iris_t *ctx, const iris_detail_team_view_t *v, iris_coll_state_t **out, iris_stream_t stream) {
  iris_coll_state_t *s = (iris_coll_state_t *)*v->state;
  char *ll, *ll2, *scratch;
  if (s) {
    *out = s;
    return IRIS_SUCCESS;
  }
  if (!(s = (iris_coll_state_t *)calloc(1, sizeof *s))) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", iris_rank(ctx));
  ll = v->coll_base + v->ctl_bytes;
  ll2 = ll + IRIS_DETAIL_TEAM_LL_BYTES(v->node_size);
  scratch = ll2 + IRIS_DETAIL_TEAM_LL2_BYTES(v->node_size);
  s->dev.ctx = v->dev;
  {
    iris_coll_ctl_t *ctl = (iris_coll_ctl_t *)(void *)v->coll_base;
    s->dev.calls = &ctl->calls;
    s->dev.hdr = ctl->hdr;
    s->dev.flags = ctl->flags;
    s->dev.progress = ctl->progress;
  }
  s->dev.ll = (uint4 *)(void *)ll;
  /* the one-shot slots, [2 parities][team size][lines], in an area sized for the node's
   * ranks: a team of 2 in a node of 4 or more has room for 2 ranks' payload
   * (iris_coll_ll_payload), as a world of 2 has */
  s->dev.ll_lines = (v->dev.world_size == 2 && 2 * 2 * (iris_coll_ll_payload(2) / 8) * 16 <= IRIS_DETAIL_TEAM_LL_BYTES(v->node_size) ? iris_coll_ll_payload(2)
                                                                                                                                  : IRIS_COLL_LL_BYTES) / 8;
  s->dev.ll2 = (uint4 *)(void *)ll2;
  s->dev.ll2_lines = IRIS_COLL_LL2_BYTES / 8;
  s->dev.scratch = scratch;
  { /* as the world's: IRIS_COLL_CHECK=0 turns the LL paths' header match off */
    const iris_coll_state_t *w = (const iris_coll_state_t *)iris_detail_get_ext(ctx);
    int check = 1;
    if (w) check = w->dev.check;
    else if (iris_detail_env_flag("IRIS_COLL_CHECK", " (0: the latency path does not match call headers; 1: it does, the default)", &check) < 0) {
      free(s);
      return IRIS_ERROR_INVALID_ARGUMENT;
    }
    s->dev.check = check;
    if ((s->pdl = w ? w->pdl : iris_coll_pdl_choice(ctx)) < 0) { /* the latency kernels with PDL, as the world's */
      free(s);
      return IRIS_ERROR_INVALID_ARGUMENT;
    }
    /* how buffers off the heap are staged, where the team has staging areas
     * (iris_team_set_staging), as the world's: members that differ launch different
     * kernels, so their call signatures mismatch */
    s->fused_staging = 1;
    if (w) s->fused_staging = w->fused_staging;
    else if (iris_detail_env_flag("IRIS_COLL_FUSED_STAGING", " (0: buffers off the heap are copied in and out around every bandwidth kernel; 1: the default)",
                                  &s->fused_staging) < 0) {
      free(s);
      return IRIS_ERROR_INVALID_ARGUMENT;
    }
  }
  /* the grid rule the members agreed on at the split (their fewest SMs, their IRIS_COLL_CTAS),
   * the same on every member whether or not the world's state exists there (a grid is in
   * every call's signature: this GPU's SMs or this rank's environment alone would differ
   * between members on unlike GPUs); the world's cap for ranks sharing a GPU (gpu_shared_any
   * is alike on every rank of the node) */
  s->sms = v->sms > 0 ? v->sms : 1;
  s->ctas = v->ctas;
  s->shared_ctas = iris_detail_gpu_shared_any(ctx) ? (s->sms / iris_local_size(ctx) > 0 ? s->sms / iris_local_size(ctx) : 1) : 0;
  if (!iris_detail_get_ext(ctx) && !iris_gpu_stream_capturing(stream)) { /* no world state: load the kernels now, as its setup does (IRIS_COLL_PRELOAD;
                                      lazy loading's first launch waits for every running kernel, a team's own on another stream included: docs/stalls.md,
                                      "First calls"); not under capture (a capture may refuse calls outside it) */
    const int preload = iris_coll_preload_choice();
    int old = -1;
    if (preload < 0) {
      free(s);
      return IRIS_ERROR_INVALID_ARGUMENT;
    }
    if (preload) {
      (void)iris_gpu_get_device(&old);
      if (iris_gpu_set_device(iris_device_ordinal(ctx)) == IRIS_GPU_SUCCESS) (void)iris_gpu_load_module_of((const void *)iris_coll_barrier_kernel, &s->preloaded);
      if (old >= 0) (void)iris_gpu_set_device(old);
    }
  }
  s->stage_bytes = 0; /* no staging until iris_team_set_staging: the bandwidth path takes heap buffers */
  *v->state = s;
  *out = s;
  return IRIS_SUCCESS;
}

/* Every *_team call: the team's checks (live, a member, no fatal fault), then the world's
 * calls for the world team, a copy for a team of one, else the call on the team's state,
 * after the team's previous call whatever its stream. */
static iris_status_t iris_coll_team_run(iris_t *ctx, const iris_team_t *team, int kind, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op,
                                        int root, iris_stream_t stream, const iris_coll_opts_t *opts) {
  iris_detail_team_view_t v;
  iris_coll_state_t *s;
  iris_status_t st, st2;
  if ((st = iris_detail_team_lookup(ctx, team, &v)) != IRIS_SUCCESS) return iris_detail_prefix(st, iris_coll_names[kind]);
  if (v.world) return iris_coll_run(ctx, kind, send, recv, count, t, op, root, stream, opts);
  if (team->size == 1) { /* the world's argument checks, then a copy */
    const size_t es = iris_dtype_size(t);
    iris_gpu_error_t e = IRIS_GPU_SUCCESS;
    if (!es) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: unknown data type %d", iris_coll_names[kind], (int)t);
    if ((kind == IRIS_COLL_AR || kind == IRIS_COLL_RS) && (op < IRIS_SUM || op >= IRIS_REDOP_COUNT))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: unknown reduction %d", iris_coll_names[kind], (int)op);
    if ((st = iris_coll_check_compiled(kind, t, op, 0, iris_coll_names[kind])) != IRIS_SUCCESS) return st;
    if (kind == IRIS_COLL_BC && root != 0) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "%s: root %d outside [0, 1)", iris_coll_names[kind], root);
    if (opts && (st = iris_coll_opts_check(opts, iris_coll_names[kind])) != IRIS_SUCCESS) return st;
    if (count && (!send || !recv)) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL buffer", iris_coll_names[kind]);
    if (count > ((size_t)1 << 40) / es) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: count %zu is too large", iris_coll_names[kind], count);
    if (count && send != recv) e = iris_gpu_memcpy_async(recv, send, count * es, stream);
    return e == IRIS_GPU_SUCCESS ? IRIS_SUCCESS : iris_detail_fail(IRIS_ERROR_GPU, "%s: copy failed: %s", iris_coll_names[kind], iris_gpu_error_text(e));
  }
  if ((st = iris_coll_team_state(ctx, &v, &s, stream)) != IRIS_SUCCESS) return st;
  if ((st = iris_detail_team_order(ctx, team, stream, 0)) != IRIS_SUCCESS) return st;
  st = iris_coll_enqueue_on(ctx, s, kind, send, recv, count, t, op, root, stream, opts, NULL);
  st2 = iris_detail_team_order(ctx, team, stream, 1);
  return st != IRIS_SUCCESS ? st : st2;
}

IRIS_DEF iris_status_t iris_all_reduce_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op,
                                            iris_stream_t stream, const iris_coll_opts_t *opts) {
  return iris_coll_team_run(ctx, team, IRIS_COLL_AR, send, recv, count, type, op, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_all_gather_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                            const iris_coll_opts_t *opts) {
  return iris_coll_team_run(ctx, team, IRIS_COLL_AG, send, recv, count, type, IRIS_SUM, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_reduce_scatter_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, iris_redop_t op,
                                                iris_stream_t stream, const iris_coll_opts_t *opts) {
  return iris_coll_team_run(ctx, team, IRIS_COLL_RS, send, recv, count, type, op, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_all_to_all_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, iris_stream_t stream,
                                            const iris_coll_opts_t *opts) {
  return iris_coll_team_run(ctx, team, IRIS_COLL_A2A, send, recv, count, type, IRIS_SUM, 0, stream, opts);
}
IRIS_DEF iris_status_t iris_broadcast_team(iris_t *ctx, const iris_team_t *team, const void *send, void *recv, size_t count, iris_dtype_t type, int root,
                                           iris_stream_t stream, const iris_coll_opts_t *opts) {
  return iris_coll_team_run(ctx, team, IRIS_COLL_BC, send, recv, count, type, IRIS_SUM, root, stream, opts);
}
/* The team's staging areas (iris_collectives.h). Each member judges its own arguments, then
 * the members meet whatever the judgement (a refusal on one member must not leave the
 * others waiting in the meeting) and compare: every member sets the same areas or none. */
IRIS_DEF iris_status_t iris_team_set_staging(iris_t *ctx, const iris_team_t *team, void *area_in, void *area_out, size_t bytes) {
  static const char name[] = "iris_team_set_staging";
  iris_detail_team_view_t v;
  iris_coll_state_t *s = NULL;
  uint32_t mine[IRIS_DETAIL_TEAM_XW], all[IRIS_MAX_RANKS * IRIS_DETAIL_TEAM_XW];
  size_t off_in = 0, off_out = 0;
  iris_status_t st, judged = IRIS_SUCCESS;
  char why[sizeof iris_detail_errbuf];
  int me, p, k;
  if ((st = iris_detail_team_lookup(ctx, team, &v)) != IRIS_SUCCESS) return iris_detail_prefix(st, name); /* alike on every member */
  if (v.world || team->size == 1) return IRIS_SUCCESS; /* the world stages through its own areas (IRIS_COLL_STAGING); a team of one copies */
  me = iris_rank(ctx);
  if (area_in || area_out || bytes) {
    if (bytes < IRIS_COLL_STAGING_MIN || bytes > ((size_t)1 << 40))
      judged = iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: %zu bytes per area: at least %zu (a chunk of every member's block must fit)", me, name, bytes,
                                (size_t)IRIS_COLL_STAGING_MIN);
    else if (!area_in || !area_out || area_in == area_out || ((uintptr_t)area_in | (uintptr_t)area_out) % 16 || !iris_coll_in_heap(ctx, area_in, bytes) ||
             !iris_coll_in_heap(ctx, area_out, bytes) || ((char *)area_in < (char *)area_out + bytes && (char *)area_out < (char *)area_in + bytes))
      judged = iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: the two areas must be distinct, 16-byte aligned heap blocks of %zu bytes each (or NULL, NULL, 0: none)",
                                me, name, bytes);
    else if (iris_heap_offset(ctx, area_in, &off_in) != IRIS_SUCCESS || iris_heap_offset(ctx, area_out, &off_out) != IRIS_SUCCESS)
      judged = iris_detail_fail(IRIS_ERROR_NOT_IN_HEAP, "rank %d: %s: an area is not in the heap", me, name);
  }
  if (judged == IRIS_SUCCESS) judged = iris_coll_team_state(ctx, &v, &s, NULL);
  iris_detail_copy(why, sizeof why, iris_detail_errbuf);
  memset(mine, 0, sizeof mine);
  mine[0] = (uint32_t)off_in, mine[1] = (uint32_t)((uint64_t)off_in >> 32);
  mine[2] = (uint32_t)off_out, mine[3] = (uint32_t)((uint64_t)off_out >> 32);
  mine[4] = (uint32_t)bytes, mine[5] = (uint32_t)((uint64_t)bytes >> 32);
  mine[6] = (uint32_t)judged;
  st = iris_detail_team_allgather(ctx, team, IRIS_DETAIL_TEAM_OP_STAGING, mine, all);
  if (judged != IRIS_SUCCESS) { /* this member's refusal, its own words (the meeting's outcome aside) */
    iris_detail_copy(iris_detail_errbuf, sizeof iris_detail_errbuf, why);
    return judged;
  }
  if (st != IRIS_SUCCESS) return iris_detail_prefix(st, name);
  for (p = 0; p < team->size; p++) {
    const uint32_t *theirs = all + (size_t)p * IRIS_DETAIL_TEAM_XW;
    if (theirs[6] != 0)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: world rank %d (team rank %d) refused its areas (%s): no member's staging changed", me, name,
                              iris_team_world_rank(team, p), p, iris_status_string((iris_status_t)theirs[6]));
  }
  for (p = 0; p < team->size; p++) {
    const uint32_t *theirs = all + (size_t)p * IRIS_DETAIL_TEAM_XW;
    for (k = 0; k < 6 && theirs[k] == mine[k]; k++) {
    }
    if (k < 6)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: %s: world rank %d (team rank %d) passes areas at heap offsets %llu and %llu of %llu bytes, this rank at %llu and "
                              "%llu of %llu: every member passes the same (allocate them in the same order on every rank of the context); no member's staging changed",
                              me, name, iris_team_world_rank(team, p), p, (unsigned long long)theirs[0] | (unsigned long long)theirs[1] << 32,
                              (unsigned long long)theirs[2] | (unsigned long long)theirs[3] << 32, (unsigned long long)theirs[4] | (unsigned long long)theirs[5] << 32,
                              (unsigned long long)off_in, (unsigned long long)off_out, (unsigned long long)bytes);
  }
  s->stage_in = (char *)area_in;
  s->stage_out = (char *)area_out;
  s->stage_bytes = area_in ? bytes : 0;
  return IRIS_SUCCESS;
}

IRIS_DEF iris_status_t iris_barrier_device_team(iris_t *ctx, const iris_team_t *team, iris_stream_t stream) {
  iris_detail_team_view_t v;
  iris_coll_state_t *s;
  iris_status_t st, st2;
  iris_gpu_error_t e;
  if ((st = iris_detail_team_lookup(ctx, team, &v)) != IRIS_SUCCESS) return iris_detail_prefix(st, "iris_barrier_device_team");
  if (v.world) return iris_barrier_device(ctx, stream);
  if (team->size == 1) return IRIS_SUCCESS;
  if ((st = iris_coll_team_state(ctx, &v, &s, stream)) != IRIS_SUCCESS) return st;
  if ((st = iris_detail_team_order(ctx, team, stream, 0)) != IRIS_SUCCESS) return st;
  iris_coll_barrier_kernel<<<1, 64, 0, stream>>>(s->dev, IRIS_COLL_SIG_BARRIER);
  e = iris_gpu_last_error();
  st2 = iris_detail_team_order(ctx, team, stream, 1);
  if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "iris_barrier_device_team: launch failed: %s", iris_gpu_error_text(e));
  return st2;
}

#endif /* IRIS_INTERNAL_COLL_TEAM_H */
