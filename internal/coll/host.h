/* internal/coll/host.h: the host side of a collective call on one node: the
 * collective state's setup on the heap, iris_collectives_check, and iris_coll_enqueue
 * (argument checks, the choice of path, staging). Under IRIS_IMPLEMENTATION.
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_INTERNAL_COLL_HOST_H
#define IRIS_INTERNAL_COLL_HOST_H
#include "../../iris_collectives.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "../core/util.h"
#include "../core/faults.h"
#include "../rendezvous/wire.h"
#include "plan.h"
#include "options.h"
#include "protocol.h"
#include "kernels.h"
#include "launch.h"

/* What each rank tells the others at the end of iris_collectives_setup: its outcome, its
 * IRIS_COLL_CTAS, (multi-node worlds) the hash of its route table
 * (internal/coll/mn_route.h), its staging areas' size (IRIS_COLL_STAGING: heap blocks,
 * so a size that differs would leave every later allocation at another offset on each
 * rank, and the GEMM plans choose their paths by it), its IRIS_COLL_FUSED_STAGING (which
 * sets how many launches an off-heap call takes) and its GPU's SMs (the grids are sized
 * by the fewest, the same on every rank: a grid is in each call's signature). */
typedef struct iris_coll_setup_msg {
  int32_t status;       /* an iris_status_t */
  int32_t ctas;         /* IRIS_COLL_CTAS (0: unset) */
  uint64_t route;       /* iris_coll_mn_table_hash; 0 on one node */
  uint64_t stage_bytes; /* each staging area's bytes (0: none) */
  int32_t fused_staging; /* IRIS_COLL_FUSED_STAGING: 0 or 1 */
  int32_t sms;          /* this rank's GPU's SMs */
  int32_t check;        /* IRIS_COLL_CHECK: 0 or 1 */
  int32_t reserved;     /* 0 */
} iris_coll_setup_msg_t;

/* The first setting in which a rank's setup message differs from rank 0's, by its
 * variable's name (NULL: none; IRIS_COLL_CTAS 0 is unset), with both values written into theirs / first. Each must
 * be alike on every rank: the grid rule and the launch count are in every signature, the
 * staging areas are heap blocks, and the route table decides which calls go to NCCL. */
static const char *iris_coll_setup_differs(const iris_coll_setup_msg_t *m, const iris_coll_setup_msg_t *m0, char theirs[32], char first[32]) {
  if (m->ctas != m0->ctas) {
    snprintf(theirs, 32, "%d", (int)m->ctas), snprintf(first, 32, "%d", (int)m0->ctas);
    return "IRIS_COLL_CTAS";
  }
  if (m->stage_bytes != m0->stage_bytes) {
    snprintf(theirs, 32, "%llu bytes", (unsigned long long)m->stage_bytes), snprintf(first, 32, "%llu bytes", (unsigned long long)m0->stage_bytes);
    return "IRIS_COLL_STAGING";
  }
  if (m->fused_staging != m0->fused_staging) {
    snprintf(theirs, 32, "%d", (int)m->fused_staging), snprintf(first, 32, "%d", (int)m0->fused_staging);
    return "IRIS_COLL_FUSED_STAGING";
  }
  if (m->check != m0->check) {
    snprintf(theirs, 32, "%d", (int)m->check), snprintf(first, 32, "%d", (int)m0->check);
    return "IRIS_COLL_CHECK";
  }
  if (m->route != m0->route) {
    snprintf(theirs, 32, "(table %08x)", (unsigned)m->route), snprintf(first, 32, "(table %08x)", (unsigned)m0->route);
    return "IRIS_MN_NCCL_WHOLE";
  }
  return NULL;
}
static_assert(sizeof(iris_coll_setup_msg_t) == 40 && offsetof(iris_coll_setup_msg_t, route) == 8 && offsetof(iris_coll_setup_msg_t, stage_bytes) == 16 &&
                  offsetof(iris_coll_setup_msg_t, sms) == 28 && offsetof(iris_coll_setup_msg_t, check) == 32,
              "the setup message's layout");

/* Frees the heap blocks of a state that could not be completed (every rank frees the
 * same ones: the ranks' allocators stay alike). */
static void iris_coll_state_unwind(iris_t *ctx, iris_coll_state_t *s, iris_coll_ctl_t *ctl) {
  iris_free(ctx, s->mn_scratch);
  iris_free(ctx, s->stage_out);
  iris_free(ctx, s->stage_in);
  iris_free(ctx, s->dev.arm);
  iris_free(ctx, s->dev.ll2);
  iris_free(ctx, s->dev.ll);
  iris_free(ctx, s->dev.scratch);
  iris_free(ctx, ctl);
  free(s);
}

/* Whether a set-up context's collectives take buffers off the heap of any size (a staging
 * area exists: IRIS_COLL_STAGING is not 0). The GEMM plans ask before they hand a sum or a
 * gather to the collectives. */
static inline int iris_coll_stages(iris_t *ctx) {
  const iris_coll_state_t *s = ctx ? (const iris_coll_state_t *)iris_detail_get_ext(ctx) : NULL;
  return s && s->stage_bytes > 0;
}

/* For tests of the wrap-around (IRIS_COLL_TEST_WRAP=n): the control words as if 2^32 - n
 * calls had run, so the n-th call from now is numbered 0 again. The call word holds the
 * next call number; the barrier and progress rows hold the epochs that a call 2^28 +
 * 12345 calls before it left (CTA indices that no call has used since: the half-range
 * comparison took such rows for reached, iris_coll_sync_reached does not), so every
 * comparison of the next calls must wait for the peers. The LL lines stay zero (lines no
 * call has written yet, which no epoch may take for its own). */
static iris_gpu_error_t iris_coll_start_near_wrap(iris_coll_ctl_t *ctl, int n) {
  const unsigned call = 0u - (unsigned)n, epoch = (call - (1u << 28) - 12345u) * IRIS_COLL_SYNCS_PER_CALL;
  const size_t words = (size_t)IRIS_COLL_MAX_CTAS * IRIS_MAX_RANKS;
  unsigned long long *rows = (unsigned long long *)malloc(2 * words * sizeof *rows), next = (unsigned long long)call << 32;
  iris_gpu_error_t e;
  size_t i;
  if (!rows) return IRIS_GPU_ERROR_MEMORY;
  for (i = 0; i < words; i++) {
    rows[i] = epoch;                                   /* flags: the epoch each CTA reached, long ago */
    rows[words + i] = (unsigned long long)epoch << 32; /* progress: (epoch << 32) | steps */
  }
  e = iris_gpu_copy_to_device(ctl->flags, rows, 2 * words * sizeof *rows);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_copy_to_device(&ctl->calls, &next, sizeof next);
  free(rows);
  return e;
}

/* Whether the latency kernels of ctx launch with PDL: 1 or 0, -1 for a malformed
 * IRIS_COLL_PDL (the detail says so). Where the GPU has it, unless another rank of this
 * process shares the GPU: a rank's next kernel then holds SMs while it waits for its
 * previous one, which may wait for a peer's kernel that finds no SM left. 4 ranks as
 * threads on one H200, all-reduce 128 KB: with PDL the first 128 KB call of every run (14
 * of 14) waited until its bound; without it every run got past it (12 runs).
 * IRIS_COLL_PDL=1 asks for it anyway. */
static int iris_coll_pdl_choice(iris_t *ctx) {
  int pdl = IRIS_GPU_HAS_PDL && !iris_detail_gpu_shared(ctx);
  if (iris_detail_env_flag("IRIS_COLL_PDL",
                           " (0: the latency kernels launch without programmatic dependent launch; 1: with it where the GPU has it, the default unless "
                           "another rank of this process shares the GPU)",
                           &pdl) < 0)
    return -1;
  return pdl && iris_gpu_has_pdl(iris_device_ordinal(ctx)) ? 1 : 0; /* before sm_90: no PDL */
}

/* IRIS_COLL_PRELOAD: 1 (the default) when the setup is to load every kernel of this unit,
 * 0 when not, -1 for a malformed value (the detail says so). */
static int iris_coll_preload_choice(void) {
  int preload = 1;
  if (iris_detail_env_flag("IRIS_COLL_PRELOAD",
                           " (0: each kernel is loaded at its first launch, under lazy loading after every kernel running on the GPU has ended; 1: the setup loads "
                           "them all, the default)",
                           &preload) < 0)
    return -1;
  return preload;
}

/* iris_collectives_setup: note this rank's first bad setting (the detail just recorded; err holds sizeof iris_detail_errbuf bytes). */
static void iris_coll_setup_bad(iris_status_t *st, char *err, iris_status_t why) {
  if (*st != IRIS_SUCCESS) return;
  *st = why;
  iris_detail_copy(err, sizeof iris_detail_errbuf, iris_detail_errbuf);
}

IRIS_DEF iris_status_t iris_collectives_setup(iris_t *ctx) {
  iris_coll_state_t *s;
  int wrap = 0, wrap_got;
  iris_status_t st;
  size_t ll_bytes, ll2_bytes, arm_bytes;
  iris_coll_ctl_t *ctl = NULL;
  const char *env = NULL;
  int W, r, failed_rank = -1;
  iris_coll_setup_msg_t mine, *all;
  /* this rank's first bad setting (a malformed variable, a bad route table): it goes on
   * with the defaults to the ranks' exchange, so every rank fails at once (a rank that
   * returned before it would leave the others waiting out the rendezvous bound) */
  iris_status_t local_st = IRIS_SUCCESS;
  char local_err[sizeof iris_detail_errbuf] = "";
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_collectives_setup: NULL context");
  if ((st = iris_detail_check_fault(ctx)) != IRIS_SUCCESS) return st;
  if (iris_detail_get_ext(ctx)) return IRIS_SUCCESS;
  W = iris_local_size(ctx); /* the kernels work within the node; rails join the nodes */
  s = (iris_coll_state_t *)calloc(1, sizeof *s);
  all = (iris_coll_setup_msg_t *)calloc((size_t)iris_world_size(ctx), sizeof *all);
  memset(&mine, 0, sizeof mine);
  if (!s || !all) { free(s); free(all); return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "out of host memory"); }
  s->dev.ctx = iris_device_context_node(ctx);
  s->dev.ll_lines = iris_coll_ll_payload(W) / 8;
  s->dev.ll2_lines = IRIS_COLL_LL2_BYTES / 8;
  s->stage_bytes = IRIS_COLL_STAGING_BYTES;
  if (iris_detail_env("IRIS_COLL_STAGING", &env) < 0) { /* set but empty: an error, never the default */
    iris_coll_setup_bad(&local_st, local_err, IRIS_ERROR_INVALID_ARGUMENT);
  } else if (env && !strcmp(env, "0")) {
    s->stage_bytes = 0;
  } else if (env && (st = iris_detail_parse_size_var("IRIS_COLL_STAGING", env, &s->stage_bytes)) != IRIS_SUCCESS) {
    iris_coll_setup_bad(&local_st, local_err, st);
    s->stage_bytes = IRIS_COLL_STAGING_BYTES;
  }
  s->stage_bytes = iris_coll_staging_bytes(s->stage_bytes); /* at least IRIS_COLL_STAGING_MIN: a chunked step must fit */
  s->dev.check = 1;
  if (iris_detail_env_flag("IRIS_COLL_CHECK", " (0: the latency path does not match call headers; 1: it does, the default)", &s->dev.check) < 0)
    iris_coll_setup_bad(&local_st, local_err, IRIS_ERROR_INVALID_ARGUMENT);
  s->fused_staging = 1;
  if (iris_detail_env_flag("IRIS_COLL_FUSED_STAGING",
                           " (0: buffers off the heap are copied in and out around every bandwidth kernel; 1: the kernels read the send where it lies and copy "
                           "the recv out as the data arrive, the default)",
                           &s->fused_staging) < 0)
    iris_coll_setup_bad(&local_st, local_err, IRIS_ERROR_INVALID_ARGUMENT);
  if ((s->preload = iris_coll_preload_choice()) < 0) {
    iris_coll_setup_bad(&local_st, local_err, IRIS_ERROR_INVALID_ARGUMENT);
    s->preload = 1;
  }
  if ((s->pdl = iris_coll_pdl_choice(ctx)) < 0) {
    iris_coll_setup_bad(&local_st, local_err, IRIS_ERROR_INVALID_ARGUMENT);
    s->pdl = 0;
  }
  if (iris_coll_ctas_from_env(&s->ctas) < 0) iris_coll_setup_bad(&local_st, local_err, IRIS_ERROR_INVALID_ARGUMENT);
  mine.ctas = s->ctas;
  mine.stage_bytes = (uint64_t)s->stage_bytes;
  /* IRIS_COLL_TEST_WRAP=n (tests): the call numbers start n calls before they wrap */
  if ((wrap_got = iris_detail_env_int("IRIS_COLL_TEST_WRAP", &wrap)) < 0) {
    iris_coll_setup_bad(&local_st, local_err, IRIS_ERROR_INVALID_ARGUMENT);
    wrap_got = 0;
  }
  if (iris_num_nodes(ctx) > 1) { /* which calls go whole to NCCL: a bad value fails every rank alike (below), as a table that differs between ranks does */
    if ((st = iris_coll_mn_table_from_env(&s->mn_table, W)) != IRIS_SUCCESS) iris_coll_setup_bad(&local_st, local_err, st);
    mine.route = iris_coll_mn_table_hash(&s->mn_table);
  }
  {
    int sms = 0; /* on a failed query: 1, as the planning arithmetic assumes at least one SM */
    (void)iris_gpu_sm_count(&sms, iris_device_ordinal(ctx));
    s->sms = sms > 0 ? sms : 1;
  }
  mine.fused_staging = s->fused_staging;
  mine.check = s->dev.check;
  mine.sms = s->sms;
  /* the control block (iris_coll_ctl_t) and the LL slots are zeroed and the armed slots
   * armed, then the ranks meet, so no peer signals into them before that */
  ll_bytes = 2 * (size_t)W * s->dev.ll_lines * sizeof(uint4);
  ll2_bytes = 4 * (size_t)W * s->dev.ll2_lines * sizeof(uint4);
  s->dev.arm_vecs = IRIS_COLL_ARM_BYTES / 16;
  arm_bytes = 2 * (size_t)W * s->dev.arm_vecs * sizeof(uint4);
  /* 1. the blocks: every rank's allocator is in the same state, so this succeeds or fails
   *    alike everywhere; on failure every rank frees what it took */
  if ((st = iris_malloc(ctx, sizeof *ctl, (void **)&ctl)) != IRIS_SUCCESS || (st = iris_malloc(ctx, IRIS_COLL_AR_SCRATCH_BYTES, (void **)&s->dev.scratch)) != IRIS_SUCCESS ||
      (st = iris_malloc(ctx, ll_bytes, (void **)&s->dev.ll)) != IRIS_SUCCESS || (st = iris_malloc(ctx, ll2_bytes, (void **)&s->dev.ll2)) != IRIS_SUCCESS ||
      (st = iris_malloc(ctx, arm_bytes, (void **)&s->dev.arm)) != IRIS_SUCCESS ||
      (s->stage_bytes && ((st = iris_malloc(ctx, s->stage_bytes, (void **)&s->stage_in)) != IRIS_SUCCESS ||
                          (st = iris_malloc(ctx, s->stage_bytes, (void **)&s->stage_out)) != IRIS_SUCCESS)) ||
      (iris_num_nodes(ctx) > 1 && (st = iris_malloc(ctx, IRIS_COLL_MN_SCRATCH_BYTES, (void **)&s->mn_scratch)) != IRIS_SUCCESS)) {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    iris_coll_state_unwind(ctx, s, ctl);
    free(all);
    return iris_detail_fail(st, "iris_collectives_setup: %s", why);
  }
  s->dev.calls = &ctl->calls;
  s->dev.hdr = ctl->hdr;
  s->dev.flags = ctl->flags;
  s->dev.progress = ctl->progress;
  s->dev.arm_dirty = &ctl->arm_dirty;
  /* 2. zero the control words and LL lines (a local GPU failure is possible here) */
  {
    int old = -1;
    iris_gpu_error_t e;
    iris_gpu_get_device(&old);
    e = iris_gpu_set_device(iris_device_ordinal(ctx));
    if (e == IRIS_GPU_SUCCESS) e = iris_gpu_memset(ctl, 0, sizeof *ctl);
    if (e == IRIS_GPU_SUCCESS) e = iris_gpu_memset(s->dev.ll, 0, ll_bytes);
    if (e == IRIS_GPU_SUCCESS) e = iris_gpu_memset(s->dev.ll2, 0, ll2_bytes);
    if (e == IRIS_GPU_SUCCESS) e = iris_gpu_memset(s->dev.arm, 0xff, arm_bytes); /* armed: every element waits */
    if (e == IRIS_GPU_SUCCESS && wrap_got > 0) e = iris_coll_start_near_wrap(ctl, wrap);
    if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
    /* every kernel of this unit loaded now, not at its first launch: under lazy loading a
     * first launch waits for every kernel running on the GPU, so a rank's first call of a
     * kind beside its own waiting kernel (two streams, two teams) would wait out its bound.
     * Best effort: a driver without the calls (before CUDA 12.4) loads them as before. */
    if (e == IRIS_GPU_SUCCESS && s->preload) (void)iris_gpu_load_module_of((const void *)iris_coll_barrier_kernel, &s->preloaded);
    if (old >= 0) iris_gpu_set_device(old);
    mine.status = e == IRIS_GPU_SUCCESS ? (int32_t)local_st
                                        : (int32_t)iris_detail_fail(IRIS_ERROR_GPU, "rank %d: iris_collectives_setup: zeroing the state failed: %s", iris_rank(ctx),
                                                                    iris_gpu_error_text(e));
  }
  /* 3. the ranks agree on the outcome (and meet: every rank's state is zero before any
   *    peer signals into it); if any failed, all unwind alike */
  if ((st = iris_allgather_host(ctx, &mine, all, sizeof mine)) != IRIS_SUCCESS) {
    char why[sizeof iris_detail_errbuf];
    iris_detail_copy(why, sizeof why, iris_detail_errbuf);
    iris_coll_state_unwind(ctx, s, ctl);
    free(all);
    return iris_detail_fail(st, "iris_collectives_setup: the ranks could not agree on the setup (%s); the heap of this rank may now differ from the others': "
                                "finalize the context", why);
  }
  for (r = 0; r < iris_world_size(ctx); r++) /* every rank of every node */
    if (all[r].status != IRIS_SUCCESS && failed_rank < 0) failed_rank = r;
  if (failed_rank >= 0) {
    st = iris_detail_peer_status(all[failed_rank].status);
    iris_coll_state_unwind(ctx, s, ctl);
    free(all);
    if (local_st != IRIS_SUCCESS) return iris_detail_fail(local_st, "iris_collectives_setup: %s; every rank released its part", local_err);
    return iris_detail_fail(st, "iris_collectives_setup: rank %d could not set up its collective state; every rank released its part", failed_rank);
  }
  for (r = 1; r < iris_world_size(ctx); r++) { /* the settings every rank must share, against rank 0's */
    char theirs[32], first[32];
    const char *var = iris_coll_setup_differs(&all[r], &all[0], theirs, first);
    if (var) {
      iris_coll_state_unwind(ctx, s, ctl);
      free(all);
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "iris_collectives_setup: rank %d runs with %s %s, rank 0 with %s; set it alike on every rank (or on none); every "
                                                   "rank released its part", r, var, theirs, first);
    }
  }
  for (r = 0; r < iris_world_size(ctx); r++) /* the grids by the fewest SMs of any rank: the same grid, so the same signature, on every rank */
    if (all[r].sms > 0 && all[r].sms < s->sms) s->sms = all[r].sms;
  /* ranks of this process sharing the GPU: each call's grid within 1 / W of its SMs, so
   * that every rank's kernel is resident at once (every CTA waits for its peers'; a CTA
   * per SM at least is resident). Uncapped, 4 ranks as threads on one H200 waited out
   * their bound in the first 16 MB all-reduce or 256 KB all-gather */
  s->shared_ctas = iris_detail_gpu_shared_any(ctx) ? (s->sms / W > 0 ? s->sms / W : 1) : 0;
  free(all);
  iris_detail_set_ext(ctx, s, iris_coll_state_free);
  return IRIS_SUCCESS;
}

/* Synchronous: waits for this rank's GPU, then reports the context's faults (see
 * iris_get_async_error in iris.h): a fatal one, else a pending mismatch (then cleared). */
IRIS_DEF iris_status_t iris_collectives_check(iris_t *ctx) {
  int old = -1;
  iris_gpu_error_t e;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_collectives_check: NULL context");
  if (iris_rank(ctx) < 0) /* finalized, or not a context: its device ordinal is -1 */
    return iris_detail_prefix(iris_detail_check_fault(ctx), "iris_collectives_check");
  iris_gpu_get_device(&old);
  e = iris_gpu_set_device(iris_device_ordinal(ctx));
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
  if (old >= 0) iris_gpu_set_device(old);
  if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: iris_collectives_check: device synchronize failed: %s", iris_rank(ctx), iris_gpu_error_text(e));
  return iris_get_async_error(ctx);
}

/* iris_coll_opts_t as the caller built it: the current struct, or the one before `flags`
 * (its callers get flags 0). */
#define IRIS_COLL_OPTS_V1_SIZE (offsetof(iris_coll_opts_t, ctas) + sizeof(int))
static iris_status_t iris_coll_opts_size_check(const iris_coll_opts_t *o, const char *name) {
  if (o->struct_size == sizeof(iris_coll_opts_t) || o->struct_size == IRIS_COLL_OPTS_V1_SIZE) return IRIS_SUCCESS;
  return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: iris_coll_opts_t.struct_size is wrong (%zu): start from IRIS_COLL_OPTS_INIT", name, o->struct_size);
}
static unsigned iris_coll_opts_flags(const iris_coll_opts_t *o) { return o && o->struct_size >= offsetof(iris_coll_opts_t, flags) + sizeof(unsigned) ? o->flags : 0u; }

static int iris_coll_in_heap(iris_t *ctx, const void *p, size_t bytes) {
  size_t off;
  return iris_heap_offset(ctx, p, &off) == IRIS_SUCCESS && bytes <= iris_heap_size(ctx) - off;
}


/* Whether a one-shot call takes the armed slots (iris_coll_arm_kernel): an all-reduce or
 * reduce-scatter of fp32, fp16 or bf16 with SUM or AVG (types with a NaN sentinel, ops
 * with kernels of their own) whose payload per peer fits them. */
static int iris_coll_arm_fits(int kind, iris_dtype_t t, iris_redop_t op, size_t bytes) {
  return (kind == IRIS_COLL_AR || kind == IRIS_COLL_RS) && (t == IRIS_FLOAT32 || t == IRIS_FLOAT16 || t == IRIS_BFLOAT16) && (op == IRIS_SUM || op == IRIS_AVG) &&
         bytes <= IRIS_COLL_ARM_BYTES;
}

static const char *const iris_coll_names[IRIS_COLL_KINDS] = {"iris_all_reduce", "iris_all_gather", "iris_reduce_scatter", "iris_all_to_all", "iris_broadcast"};

/* A reduction whose kernels this unit leaves out (IRIS_COLL_TYPES, IRIS_COLL_OPS, see
 * iris_collectives.h): refused with IRIS_ERROR_UNSUPPORTED, on every rank alike (the same
 * program), before anything is launched. t and op are valid. */
static iris_status_t iris_coll_check_compiled(int kind, iris_dtype_t t, iris_redop_t op, int me, const char *name) {
  static const char *const types[IRIS_DTYPE_COUNT] = {"IRIS_FLOAT32", "IRIS_FLOAT16", "IRIS_BFLOAT16", "IRIS_INT32",
                                                      "IRIS_INT64",   "IRIS_UINT8",   "IRIS_FLOAT8_E4M3", "IRIS_FLOAT8_E5M2"};
  static const char *const ops[IRIS_REDOP_COUNT] = {"IRIS_SUM", "IRIS_MIN", "IRIS_MAX", "IRIS_AVG"};
  if ((kind != IRIS_COLL_AR && kind != IRIS_COLL_RS) || iris_coll_compiled_in(t, op)) return IRIS_SUCCESS;
  return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: %s of %s is not compiled in: the unit that defines IRIS_IMPLEMENTATION leaves it out (IRIS_COLL_TYPES 0x%x, "
                          "IRIS_COLL_OPS 0x%x)", me, name, ops[op], types[t], (unsigned)(IRIS_COLL_TYPES), (unsigned)(IRIS_COLL_OPS));
}

/* The options' fields (any call, a team of one included): size, algorithm, ctas, flags. */
static iris_status_t iris_coll_opts_check(const iris_coll_opts_t *opts, const char *name) {
  iris_status_t st;
  unsigned flags;
  if ((st = iris_coll_opts_size_check(opts, name)) != IRIS_SUCCESS) return st;
  if ((unsigned)opts->algo > (unsigned)IRIS_ALGO_ONE_SHOT_ARMED) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: unknown algorithm %d", name, (int)opts->algo);
  if (opts->ctas < 0 || opts->ctas > IRIS_COLL_MAX_CTAS)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: ctas %d outside [0, %d]", name, opts->ctas, IRIS_COLL_MAX_CTAS);
  flags = iris_coll_opts_flags(opts);
  if (flags & ~IRIS_COLL_STAGE) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: unknown flags 0x%x in iris_coll_opts_t", name, flags & ~IRIS_COLL_STAGE);
  return IRIS_SUCCESS;
}

/* One call on one node, on the world's state (team_s NULL), or on a team's (team_s: its
 * state, whose device context is the team as a world of its own; internal/coll/team.h).
 * outer: this call's place in a user call that an outer loop splits (NULL: none;
 * iris_coll_launch_strided). */
static iris_status_t iris_coll_enqueue_args(iris_t *ctx, iris_coll_state_t *team_s, int kind_flags, const void *send, void *recv, size_t count, iris_dtype_t t,
                                            iris_redop_t op, int root, iris_stream_t stream, const iris_coll_opts_t *opts, const iris_coll_part_t *outer) {
  const int kind = kind_flags & ~IRIS_COLL_KIND_FLAGS; /* the flags only reach the signature (iris_coll_launch) */
  const char *name = iris_coll_names[kind];
  iris_coll_state_t *s;
  iris_status_t st;
  iris_gpu_error_t e;
  size_t es = iris_dtype_size(t), in_elems, out_elems;
  int W, me, ctas = 0, chunked_in, chunked_out;
  unsigned flags = 0;
  iris_coll_path_t path;
  iris_algo_t algo = IRIS_ALGO_AUTO;
  if (!ctx) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: NULL context", name);
  W = team_s ? team_s->dev.ctx.world_size : iris_local_size(ctx); /* the node's ranks (a multi-node call composes these with the rails) */
  me = team_s ? team_s->dev.ctx.rank : iris_local_rank(ctx);
  if (!es) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: unknown data type %d", me, name, (int)t);
  if ((kind == IRIS_COLL_AR || kind == IRIS_COLL_RS) && (op < IRIS_SUM || op >= IRIS_REDOP_COUNT))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: unknown reduction %d", me, name, (int)op);
  if ((st = iris_coll_check_compiled(kind, t, op, me, name)) != IRIS_SUCCESS) return st;
  if (kind == IRIS_COLL_BC && (root < 0 || root >= W)) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "rank %d: %s: root %d outside [0, %d)", me, name, root, W);
  if (opts) {
    if ((st = iris_coll_opts_check(opts, name)) != IRIS_SUCCESS) return st;
    algo = opts->algo;
    ctas = opts->ctas;
    flags = iris_coll_opts_flags(opts);
    /* staged: the buffers' heap offsets (if any) may differ between ranks, so they must
     * not enter the signature (the bandwidth path below runs on the staging areas) */
    if (flags & IRIS_COLL_STAGE) kind_flags |= IRIS_COLL_OFF_HEAP;
  }
  if (count == 0) return IRIS_SUCCESS;
  if (!send || !recv) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: NULL buffer", me, name);
  if (count > ((size_t)1 << 40) / es) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: count %zu is too large", me, name, count);
  if (!(s = team_s ? team_s : (iris_coll_state_t *)iris_detail_get_ext(ctx))) {
    if (iris_gpu_stream_capturing(stream))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: the first collective call (or iris_collectives_setup) must come before graph capture", me, name);
    if ((st = iris_collectives_setup(ctx)) != IRIS_SUCCESS) return st;
    s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  }
  if (ctas == 0) ctas = s->ctas; /* IRIS_COLL_CTAS: the process's cap where the call gives none */
  if (s->shared_ctas > 0 && (ctas == 0 || ctas > s->shared_ctas)) ctas = s->shared_ctas; /* ranks of this process share the GPU */
  if (W == 1) { /* a world of one copies, whatever algorithm the options name (each is valid at 2 ranks and more) */
    e = send != recv ? iris_gpu_memcpy_async(recv, send, count * es, stream) : IRIS_GPU_SUCCESS;
    return e == IRIS_GPU_SUCCESS ? IRIS_SUCCESS : iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: copy failed: %s", me, name, iris_gpu_error_text(e));
  }
  chunked_in = kind == IRIS_COLL_RS || kind == IRIS_COLL_A2A;
  chunked_out = kind == IRIS_COLL_AG || kind == IRIS_COLL_A2A;
  in_elems = chunked_in ? (size_t)W * count : count;
  out_elems = chunked_out ? (size_t)W * count : count;
  /* a call at 2 ranks whose bandwidth path would stage a buffer (the all-reduce: one off
   * the heap; the reduce-scatter: send; the others: recv, or an all-to-all in place): the
   * one-shot runs to its slots' limit. The placement is in the bandwidth path's signature
   * already, so ranks that place buffers differently do not agree either way */
  const int send_off = (flags & IRIS_COLL_STAGE) || (kind_flags & IRIS_COLL_SEND_LOCAL) || !iris_coll_in_heap(ctx, send, in_elems * es);
  const int recv_off = (flags & IRIS_COLL_STAGE) || !iris_coll_in_heap(ctx, recv, out_elems * es);
  const int off_heap_w2 = W == 2 && (kind == IRIS_COLL_AR   ? send_off || recv_off
                                     : kind == IRIS_COLL_RS ? send_off
                                                            : recv_off || (kind == IRIS_COLL_A2A && send == recv));
  /* an all-to-all at 2 ranks on the heap takes the bandwidth kernel sooner (its grid of
   * 16 CTAs leaves the SMs to compute beside it); the same rule of placement as above */
  const int a2a_heap_w2 = kind == IRIS_COLL_A2A && W == 2 && send != recv && !send_off && !recv_off;
  const size_t ll_cap = s->dev.ll_lines * 8; /* the one-shot slots' payload per peer (a team's may hold less than a world's of the same size) */
  path = algo == IRIS_ALGO_LATENCY || algo == IRIS_ALGO_ONE_SHOT_LL || algo == IRIS_ALGO_ONE_SHOT_ARMED ||
                 (algo == IRIS_ALGO_AUTO &&
                  count * es <= (off_heap_w2            ? IRIS_COLL_LL_MAX_STAGED_W2
                                 : kind == IRIS_COLL_AR ? (W == 2 ? IRIS_COLL_LL_MAX_AR_W2 : IRIS_COLL_LL_MAX_AR)
                                 : kind == IRIS_COLL_BC ? (W == 2 ? IRIS_COLL_LL_MAX_BC_W2 : IRIS_COLL_LL_MAX_BC)
                                 : kind == IRIS_COLL_AG ? IRIS_COLL_LL_MAX_AG
                                 : a2a_heap_w2          ? IRIS_COLL_LL_MAX_A2A_HEAP_W2
                                                        : IRIS_COLL_LL_MAX_OTHER))
             ? IRIS_COLL_PATH_LL
             : IRIS_COLL_PATH_BW;
  if (path == IRIS_COLL_PATH_LL && count * es > ll_cap) {
    if (algo == IRIS_ALGO_LATENCY || algo == IRIS_ALGO_ONE_SHOT_LL || algo == IRIS_ALGO_ONE_SHOT_ARMED)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_ALGO_LATENCY takes at most %zu bytes per rank at %d ranks, not %zu", me, name, ll_cap, W,
                              count * es);
    path = IRIS_COLL_PATH_BW;
  }
  /* a capped grid: the one-shot only while its threads move few lines each */
  if (algo == IRIS_ALGO_AUTO && path == IRIS_COLL_PATH_LL && !iris_coll_ll_within_cap(count * es, ctas))
    path = IRIS_COLL_PATH_BW;
  /* the one-shot on armed slots, asked for (on 2 H200s the LL lines with PDL measured
   * faster at every size: docs/tuning.md, "The armed one-shot") */
  if (algo == IRIS_ALGO_ONE_SHOT_ARMED) {
    if (!s->dev.arm || !iris_coll_arm_fits(kind, t, op, count * es))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT,
                              "rank %d: %s: IRIS_ALGO_ONE_SHOT_ARMED takes all-reduces and reduce-scatters of fp32, fp16 or bf16 with SUM or AVG of at most %zu "
                              "bytes per peer, on the world's state", me, name, IRIS_COLL_ARM_BYTES);
    path = IRIS_COLL_PATH_ARM;
  }
  if (kind == IRIS_COLL_AR && W > 1) { /* the two-shot LL: does the chunk fit its slots? */
    const size_t chunk_bytes = iris_coll_ar_chunk(count, W, 8 / es) * es;
    if (algo == IRIS_ALGO_TWO_SHOT_LL && chunk_bytes > IRIS_COLL_LL2_BYTES)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_ALGO_TWO_SHOT_LL takes at most %zu bytes per rank's chunk (the message / %d), not %zu", me,
                              name, IRIS_COLL_LL2_BYTES, W, chunk_bytes);
    if (algo == IRIS_ALGO_TWO_SHOT_LL || (algo == IRIS_ALGO_AUTO && path == IRIS_COLL_PATH_BW && count * es <= IRIS_COLL_LL2_MAX_AR && chunk_bytes <= IRIS_COLL_LL2_BYTES &&
                                          (ctas <= 0 || chunk_bytes / 8 <= (size_t)ctas * IRIS_COLL_LL2_THREADS))) /* its grid is not capped: under a cap only where it fits */
      path = IRIS_COLL_PATH_LL2;
  } else if (kind == IRIS_COLL_BC && W >= 3) { /* the two-hop LL broadcast: does a part fit its slots? */
    const size_t part_bytes = ((count * es + 7) / 8 + (size_t)W - 2) / (size_t)(W - 1) * 8;
    if (algo == IRIS_ALGO_TWO_SHOT_LL && part_bytes > IRIS_COLL_LL2_BYTES)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_ALGO_TWO_SHOT_LL takes at most %zu bytes per part (the message / %d), not %zu", me, name,
                              IRIS_COLL_LL2_BYTES, W - 1, part_bytes);
    if (algo == IRIS_ALGO_TWO_SHOT_LL || (algo == IRIS_ALGO_AUTO && path == IRIS_COLL_PATH_BW && count * es <= IRIS_COLL_LL2_MAX_BC && part_bytes <= IRIS_COLL_LL2_BYTES &&
                                          (ctas <= 0 || part_bytes / 8 <= (size_t)ctas * IRIS_COLL_LL2_THREADS)))
      path = IRIS_COLL_PATH_LL2;
  } else if (algo == IRIS_ALGO_TWO_SHOT_LL) {
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: IRIS_ALGO_TWO_SHOT_LL is an all-reduce algorithm, and a broadcast one at 3 or more ranks", me,
                            name);
  }
  if (path != IRIS_COLL_PATH_BW) {
    /* peers never touch the user's buffers: any device memory works */
    iris_coll_launch(s, kind_flags, path, t, op, send, recv, count, root, ctas, stream, outer);
    e = iris_gpu_last_error();
    if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed: %s", me, name, iris_gpu_error_text(e));
    return IRIS_SUCCESS;
  }
  {
    /* bandwidth path: peers read our buffers, so they must be on the heap; otherwise
     * (and for an in-place all-to-all, whose input peers read while we overwrite it)
     * go through the staging area, one chunk of `step` elements per launch (each launch's
     * signature names its place in the call: part) */
    const int heap_in = !(flags & IRIS_COLL_STAGE) && !(kind_flags & IRIS_COLL_SEND_LOCAL) && iris_coll_in_heap(ctx, send, in_elems * es) &&
                        !(kind == IRIS_COLL_A2A && send == recv);
    const int heap_out = !(flags & IRIS_COLL_STAGE) && iris_coll_in_heap(ctx, recv, out_elems * es);
    size_t step = count, c0;
    iris_coll_part_t part;
    if (heap_in && heap_out) {
      iris_coll_launch(s, kind_flags, IRIS_COLL_PATH_BW, t, op, send, recv, count, root, ctas, stream, outer);
      e = iris_gpu_last_error();
      if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed: %s", me, name, iris_gpu_error_text(e));
      return IRIS_SUCCESS;
    }
    const int staged = iris_coll_takes_staged(kind, W, count * es, in_elems * es, heap_out, s->fused_staging);
    if (!s->stage_bytes && !(staged && kind == IRIS_COLL_RS)) /* the store reduce-scatter needs none */
      return iris_detail_fail(IRIS_ERROR_NOT_IN_HEAP, "rank %d: %s: buffers off the symmetric heap need the staging area (IRIS_COLL_STAGING is 0)", me, name);
    if (staged) {
      /* the staged kernels: send read where it lies, the peers store into our staging
       * area, each CTA copies into recv as the chunks arrive (IRIS_COLL_PATH_STAGED); the
       * store reduce-scatter touches no peer's user buffer: one launch, any size */
      const size_t stride = chunked_in || chunked_out ? count * es : 0;
      step = kind == IRIS_COLL_RS ? count : iris_coll_staging_step(s->stage_bytes, es, W, chunked_out);
      part.total = count;
      part.n = (count + step - 1) / step;
      for (c0 = 0; c0 < count; c0 += step) {
        const size_t n = count - c0 < step ? count - c0 : step;
        part.k = c0 / step;
        (void)iris_coll_launch_strided(s, kind_flags, IRIS_COLL_PATH_STAGED, t, op, (const char *)send + c0 * es, (char *)recv + c0 * es, n, stride, root, ctas, stream, &part,
                                 outer);
        e = iris_gpu_last_error();
        if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: launch failed: %s", me, name, iris_gpu_error_text(e));
      }
      return IRIS_SUCCESS;
    }
    step = iris_coll_staging_step(s->stage_bytes, es, W, chunked_in || chunked_out);
    part.total = count;
    part.n = (count + step - 1) / step;
    for (c0 = 0; c0 < count; c0 += step) {
      const size_t n = count - c0 < step ? count - c0 : step;
      /* kernels that read send only where it lies (no peer loads it) take it off the heap
       * as it is; a reduce-scatter writes only its own recv, which may be anywhere. With
       * IRIS_COLL_PUSH 0 the copy kernels load the peers' send (iris_get_bulk of the
       * translated send), so it must be on the heap: staged as before */
      const int send_local = s->fused_staging && IRIS_COLL_PUSH &&
                             (kind == IRIS_COLL_AG || kind == IRIS_COLL_BC || (kind == IRIS_COLL_AR && n * es >= IRIS_COLL_AR_STORE_MIN) ||
                              (kind == IRIS_COLL_A2A && n == count && send != recv));
      const int recv_local = s->fused_staging && kind == IRIS_COLL_RS;
      const char *in = heap_in || send_local ? (const char *)send + c0 * es : s->stage_in;
      char *out = heap_out || recv_local ? (char *)recv + c0 * es : s->stage_out;
      unsigned long long sig = 0;
      e = IRIS_GPU_SUCCESS;
      if (heap_in && chunked_in && !send_local) in = NULL; /* a chunked input on the heap is still strided: stage it */
      if (heap_out && chunked_out) out = NULL;
      if (!in) in = s->stage_in;
      if (!out) out = s->stage_out;
      if (in == s->stage_in) {
        if (chunked_in) e = iris_gpu_memcpy2d_async(s->stage_in, n * es, (const char *)send + c0 * es, count * es, n * es, (size_t)W, stream);
        else e = iris_gpu_memcpy_async(s->stage_in, (const char *)send + c0 * es, n * es, stream);
      }
      if (e == IRIS_GPU_SUCCESS) {
        part.k = c0 / step;
        sig = iris_coll_launch_strided(s, kind_flags, IRIS_COLL_PATH_BW, t, op, in, out, n, 0, root, ctas, stream, &part, outer);
        e = iris_gpu_last_error();
      }
      if (e == IRIS_GPU_SUCCESS && out == s->stage_out) {
        /* a kernel, not a memcpy: it copies only if every peer matched the launch, so a
         * mismatched call leaves recv as it was (iris_coll_copy_out_kernel) */
        if (chunked_out) iris_coll_launch_copy_out(s, (char *)recv + c0 * es, count * es, s->stage_out, n * es, n * es, W, sig, stream);
        else iris_coll_launch_copy_out(s, (char *)recv + c0 * es, 0, s->stage_out, 0, n * es, 1, sig, stream);
        e = iris_gpu_last_error();
      }
      if (e != IRIS_GPU_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: staging failed: %s", me, name, iris_gpu_error_text(e));
    }
    return IRIS_SUCCESS;
  }
}

/* After a call refused with st on this rank (no launch made), or a call of count 0
 * (st IRIS_SUCCESS): the one launch it takes part with (see iris_coll_enqueue_on), of
 * signature sig, where the state (team_s, else the world's) exists, on one node (a team is
 * always within one), at 2 ranks or more, and the context has no fatal fault; nothing
 * otherwise. A world call made before the state exists sets it up first (outside
 * capture): the peers' first call does, and its exchange must pair with this rank's. The
 * refusal's error text is kept. */
static void iris_coll_refused_take_part(iris_t *ctx, iris_coll_state_t *team_s, iris_status_t st, unsigned long long sig, iris_stream_t stream) {
  iris_coll_state_t *s;
  char why[sizeof iris_detail_errbuf];
  /* a team call's IRIS_ERROR_NOT_IN_HEAP (a team without staging areas,
   * iris_team_set_staging) takes part too: refused on some members only, the others'
   * call mismatches at once instead of waiting out its bound; refused on every member
   * alike, they meet in it, and their later calls pair up as before */
  if (st != IRIS_SUCCESS && st != IRIS_ERROR_INVALID_ARGUMENT && st != IRIS_ERROR_INVALID_RANK && st != IRIS_ERROR_NOT_IN_HEAP) return;
  if (!IRIS_DETAIL_IS_LIVE(ctx) || (!team_s && iris_num_nodes(ctx) != 1)) return;
  iris_detail_copy(why, sizeof why, iris_detail_errbuf);
  if (iris_detail_check_fault(ctx) == IRIS_SUCCESS) {
    s = team_s ? team_s : (iris_coll_state_t *)iris_detail_get_ext(ctx);
    if (!s && !team_s && iris_local_size(ctx) > 1 && !iris_gpu_stream_capturing(stream) && iris_collectives_setup(ctx) == IRIS_SUCCESS)
      s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
    if (s && s->dev.ctx.world_size > 1) {
      iris_coll_barrier_kernel<<<1, 64, 0, stream>>>(s->dev, sig);
      (void)iris_gpu_last_error(); /* the refusal is the call's status either way; a count of 0 reports nothing */
    }
  }
  iris_detail_copy(iris_detail_errbuf, sizeof iris_detail_errbuf, why);
}

/* A call: its argument checks, then its launches. A call refused for its arguments (a
 * NULL buffer, a root, type, op, option or size out of range, a buffer off the heap with
 * no staging area: refused before any launch) still takes part where the collective state
 * exists, on one node: one device-barrier launch with a signature no call has
 * (IRIS_COLL_SIG_REFUSED). Refused on some ranks only, the others' call mismatches it
 * (IRIS_ERROR_MISMATCH on every rank, nothing written; fatal where their call is split
 * into launches) instead of waiting out its bound, and every rank's call numbers stay in
 * step; refused on every rank, the ranks meet in it. A call of count 0 moves nothing and
 * takes part the same way, with a signature of its own (IRIS_COLL_SIG_EMPTY): ranks that
 * all pass 0 meet in it (one device barrier, about the cost of the smallest call), and a
 * rank that alone passes 0 makes its peers' call a mismatch instead of a wait to the bound
 * (NCCL's ranks there wait for good). */
static iris_status_t iris_coll_enqueue_on(iris_t *ctx, iris_coll_state_t *team_s, int kind_flags, const void *send, void *recv, size_t count, iris_dtype_t t,
                                          iris_redop_t op, int root, iris_stream_t stream, const iris_coll_opts_t *opts, const iris_coll_part_t *outer) {
  const iris_status_t st = iris_coll_enqueue_args(ctx, team_s, kind_flags, send, recv, count, t, op, root, stream, opts, outer);
  if (!outer && (st != IRIS_SUCCESS || count == 0))
    iris_coll_refused_take_part(ctx, team_s, st, st == IRIS_SUCCESS ? IRIS_COLL_SIG_EMPTY : IRIS_COLL_SIG_REFUSED, stream);
  return st;
}

static iris_status_t iris_coll_enqueue(iris_t *ctx, int kind_flags, const void *send, void *recv, size_t count, iris_dtype_t t, iris_redop_t op, int root,
                                       iris_stream_t stream, const iris_coll_opts_t *opts) {
  return iris_coll_enqueue_on(ctx, NULL, kind_flags, send, recv, count, t, op, root, stream, opts, NULL);
}
/* Piece outer->k of outer->n of a user call that the caller's loop splits. */
static iris_status_t iris_coll_enqueue_part(iris_t *ctx, const iris_coll_part_t *outer, int kind_flags, const void *send, void *recv, size_t count, iris_dtype_t t,
                                            iris_redop_t op, int root, iris_stream_t stream, const iris_coll_opts_t *opts) {
  return iris_coll_enqueue_on(ctx, NULL, kind_flags, send, recv, count, t, op, root, stream, opts, outer);
}

#endif /* IRIS_INTERNAL_COLL_HOST_H */
