/* internal/core/launch_env.h: launchers' environments (iris_launch_env): which launcher started
 * this process, its rank, world size, local rank and job id; and the default rendezvous
 * name. Part of iris's implementation, included by iris.h under IRIS_IMPLEMENTATION
 * (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_LAUNCH_ENV_H
#define IRIS_INTERNAL_CORE_LAUNCH_ENV_H
#include "../../iris.h"
#include "sys.h"
#include "status.h"
#include "util.h"
#include "../rendezvous/wire.h"

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
  if (L->id == IRIS_LAUNCHER_IRIS) { /* iris's own set and IRIS_JOB_TOKEN: set but empty is an error, as every IRIS_* variable (other launchers' empty ones count as unset) */
    const char *const names[5] = {L->rank, L->world, L->local_rank, L->local_size, "IRIS_JOB_TOKEN"};
    int k;
    for (k = 0; k < 5; k++) {
      const char *v = get(user, names[k]);
      if (v && !*v) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s is set but empty: give it a value, or unset it", names[k]);
    }
  }
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
  if (L->local_size && (got = iris_detail_parse_uint(L->local_size, iris_detail_var(get, user, L->local_size), &ls)) < 0) return IRIS_ERROR_INVALID_ARGUMENT;
  if (L->local_size && got > 0 && ls < 1)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%s: a node needs at least 1 rank (%s)", L->local_size, iris_detail_var(get, user, L->local_size), L->name);
  if (e->world_size < 1) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%s: a world needs at least 1 rank (%s)", L->world, ws, L->name);
  if (e->world_size > IRIS_MAX_RANKS) { /* allowed over several nodes (the node size is checked at iris_init) */
    const char *rdv = NULL;
    if (iris_detail_env_in(get, user, "IRIS_RENDEZVOUS", &rdv) < 0) return IRIS_ERROR_INVALID_ARGUMENT; /* set but empty: an error, as every IRIS_* variable */
    if (e->world_size > 65536 || !((ls > 0 && ls < e->world_size) || (rdv && strcmp(rdv, "tcp") == 0)))
      return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "%s=%s exceeds IRIS_MAX_RANKS (%d) on one node; rebuild every unit with a larger -DIRIS_MAX_RANKS (or, over "
                              "several nodes, set IRIS_RENDEZVOUS=tcp: docs/multinode.md)", L->world, ws, IRIS_MAX_RANKS);
  }
  if (e->rank >= e->world_size) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "%s=%s is not below %s=%s (%s)", L->rank, rs, L->world, ws, L->name);
  if (ls > e->world_size) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s=%d exceeds %s=%d (%s)", L->local_size, ls, L->world, e->world_size, L->name);
  if (lr >= 0 && ls > 0 && lr >= ls) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "%s=%d is not below %s=%d (%s)", L->local_rank, lr, L->local_size, ls, L->name);
  if (lr >= e->world_size) return iris_detail_fail(IRIS_ERROR_INVALID_RANK, "%s=%d is not below %s=%s (%s)", L->local_rank, lr, L->world, ws, L->name);
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

/* The rendezvous name: the given one (IRIS_RENDEZVOUS or iris_config_t.rendezvous),
 * which must be 1 to 64 of [A-Za-z0-9._-]: anything else is an error naming it, never
 * rewritten; else "job-<job id>" (so two jobs on one host do not meet), the id's other
 * characters made '_' and a job id too long for a name cut and followed by its hash; ""
 * when neither exists. */
IRIS_INTERNAL iris_status_t iris_detail_default_rendezvous(const char *given, const char *job, char *name, size_t cap) {
  char *c;
  if (given) {
    const char *g;
    size_t n = strlen(given);
    for (g = given; *g; g++)
      if (!((*g >= 'a' && *g <= 'z') || (*g >= 'A' && *g <= 'Z') || (*g >= '0' && *g <= '9') || *g == '.' || *g == '_' || *g == '-')) break;
    if (n == 0 || n > 64 || *g || n + 1 > cap) {
      name[0] = 0;
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT,
                              "rendezvous name '%.80s' (IRIS_RENDEZVOUS or iris_config_t.rendezvous) is not 1 to 64 of letters, digits, '.', '_', '-'%s",
                              given, n == 0 ? ": it is empty" : n > 64 ? ": it is too long" : "");
    }
    snprintf(name, cap, "%s", given);
    return IRIS_SUCCESS;
  }
  if (job && *job && strlen(job) <= 60) snprintf(name, cap, "job-%.60s", job);
  else if (job && *job) {
    uint64_t h = 14695981039346656037ULL;
    for (c = (char *)job; *c; c++) h = iris_detail_fnv(h, (unsigned char)*c);
    snprintf(name, cap, "job-%.43s-%016llx", job, (unsigned long long)h);
  } else name[0] = 0;
  for (c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-')) *c = '_';
  return IRIS_SUCCESS;
}

#endif /* IRIS_INTERNAL_CORE_LAUNCH_ENV_H */
