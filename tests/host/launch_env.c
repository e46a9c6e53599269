/* tests/host/launch_env.c: the launchers' environments (iris_launch_env) and bring-up through them. */
#include "harness.h"

/* ------------------------------------------------ launchers' environments -- */
/* An environment as "NAME=VALUE" strings, NULL-terminated; looked up by iris_launch_env. */
static const char *table_getenv(void *user, const char *name) {
  const char *const *kv = (const char *const *)user;
  size_t n = strlen(name);
  for (; *kv; kv++)
    if (strncmp(*kv, name, n) == 0 && (*kv)[n] == '=') return *kv + n + 1;
  return NULL;
}

typedef struct env_case {
  const char *what;
  const char *env[16];
  iris_status_t want;
  iris_launcher_t launcher;
  int rank, world, local_rank, local_size;
  const char *job;   /* exact job id on success */
  const char *words; /* on failure: '|'-separated words the detail must hold */
} env_case_t;

#define OK_CASE(what, launcher, r, w, lr, ls, job, ...) {what, {__VA_ARGS__, NULL}, IRIS_SUCCESS, launcher, r, w, lr, ls, job, NULL}
#define BAD_CASE(what, st, words, ...) {what, {__VA_ARGS__, NULL}, st, IRIS_LAUNCHER_NONE, 0, 0, 0, 0, NULL, words}

static const env_case_t k_env_cases[] = {
    {"nothing set: one rank", {NULL}, IRIS_SUCCESS, IRIS_LAUNCHER_NONE, 0, 1, 0, 1, "", NULL},
    OK_CASE("empty values count as unset", IRIS_LAUNCHER_NONE, 0, 1, 0, 1, "", "RANK=", "WORLD_SIZE="),
    BAD_CASE("empty IRIS_RANK: an error, as every IRIS_* variable", IRIS_ERROR_INVALID_ARGUMENT, "IRIS_RANK is set but empty", "IRIS_RANK=", "IRIS_WORLD_SIZE=2"),
    BAD_CASE("empty IRIS_WORLD_SIZE alone", IRIS_ERROR_INVALID_ARGUMENT, "IRIS_WORLD_SIZE is set but empty", "IRIS_WORLD_SIZE=", "RANK=1", "WORLD_SIZE=2"),
    BAD_CASE("empty IRIS_LOCAL_WORLD_SIZE", IRIS_ERROR_INVALID_ARGUMENT, "IRIS_LOCAL_WORLD_SIZE is set but empty", "IRIS_RANK=0", "IRIS_WORLD_SIZE=2",
             "IRIS_LOCAL_WORLD_SIZE="),
    BAD_CASE("empty IRIS_JOB_TOKEN: an error, never the empty token", IRIS_ERROR_INVALID_ARGUMENT, "IRIS_JOB_TOKEN is set but empty", "IRIS_RANK=1",
             "IRIS_WORLD_SIZE=3", "IRIS_JOB_TOKEN="),
    BAD_CASE("empty IRIS_JOB_TOKEN beside torchrun", IRIS_ERROR_INVALID_ARGUMENT, "IRIS_JOB_TOKEN is set but empty", "RANK=1", "WORLD_SIZE=2",
             "IRIS_JOB_TOKEN="),
    OK_CASE("iris_launch_local's ranks", IRIS_LAUNCHER_IRIS, 1, 3, 1, 3, "c0ffee", "IRIS_RANK=1", "IRIS_WORLD_SIZE=3", "IRIS_JOB_TOKEN=c0ffee"),
    OK_CASE("IRIS_* override torchrun", IRIS_LAUNCHER_IRIS, 0, 2, 0, 2, "", "IRIS_RANK=0", "IRIS_WORLD_SIZE=2", "RANK=5", "WORLD_SIZE=8"),
    OK_CASE("IRIS_* with local rank", IRIS_LAUNCHER_IRIS, 3, 4, 1, 2, "", "IRIS_RANK=3", "IRIS_WORLD_SIZE=4", "IRIS_LOCAL_RANK=1", "IRIS_LOCAL_WORLD_SIZE=2"),
    OK_CASE("torchrun", IRIS_LAUNCHER_TORCHRUN, 1, 2, 1, 2, "torch.xyz.r0.p29500", "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
            "TORCHELASTIC_RUN_ID=xyz", "TORCHELASTIC_RESTART_COUNT=0", "MASTER_PORT=29500", "MASTER_ADDR=localhost"),
    OK_CASE("torchrun without run id: master address and port", IRIS_LAUNCHER_TORCHRUN, 0, 2, 0, 0, "torch.node7.p1234", "RANK=0", "WORLD_SIZE=2",
            "MASTER_ADDR=node7", "MASTER_PORT=1234"),
    OK_CASE("torchrun inside an srun step: Slurm's set is ignored", IRIS_LAUNCHER_TORCHRUN, 3, 4, 3, 4, "torch.none.r2", "RANK=3", "WORLD_SIZE=4",
            "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=4", "TORCHELASTIC_RUN_ID=none", "TORCHELASTIC_RESTART_COUNT=2", "SLURM_PROCID=0", "SLURM_NTASKS=1",
            "SLURM_STEP_ID=0", "SLURM_JOB_ID=77"),
    OK_CASE("torchrun without a job id inside Slurm: Slurm's job.step", IRIS_LAUNCHER_TORCHRUN, 0, 2, 0, 0, "slurm.77.3", "RANK=0", "WORLD_SIZE=2",
            "SLURM_JOB_ID=77", "SLURM_STEP_ID=3"),
    OK_CASE("torchrun without any job id", IRIS_LAUNCHER_TORCHRUN, 1, 2, 1, 0, "", "RANK=1", "WORLD_SIZE=2"),
    OK_CASE("srun step", IRIS_LAUNCHER_SLURM, 2, 4, 2, 0, "slurm.123.0", "SLURM_PROCID=2", "SLURM_NTASKS=4", "SLURM_LOCALID=2", "SLURM_STEP_ID=0",
            "SLURM_JOB_ID=123"),
    OK_CASE("srun step (SLURM_STEPID spelling)", IRIS_LAUNCHER_SLURM, 1, 2, 0, 0, "slurm.9.5", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
            "SLURM_STEPID=5", "SLURM_JOBID=9", "SLURM_JOB_ID=9"),
    OK_CASE("sbatch script outside srun: not a step", IRIS_LAUNCHER_NONE, 0, 1, 0, 1, "", "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=123"),
    OK_CASE("Slurm's batch step id is not a step", IRIS_LAUNCHER_NONE, 0, 1, 0, 1, "", "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=123",
            "SLURM_STEP_ID=4294967291"),
    OK_CASE("MPICH/Hydra with PMI_JOBID", IRIS_LAUNCHER_MPICH, 3, 4, 3, 4, "j9", "PMI_RANK=3", "PMI_SIZE=4", "MPI_LOCALRANKID=3", "MPI_LOCALNRANKS=4",
            "PMI_JOBID=j9"),
    OK_CASE("Intel MPI", IRIS_LAUNCHER_MPICH, 0, 2, 0, 2, "uu-1", "PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=2",
            "I_MPI_HYDRA_UUID=uu-1"),
    OK_CASE("MPICH/Hydra without a job id", IRIS_LAUNCHER_MPICH, 1, 2, 1, 0, "", "PMI_RANK=1", "PMI_SIZE=2"),
    OK_CASE("Open MPI", IRIS_LAUNCHER_OPENMPI, 1, 2, 1, 2, "prterun-h-1@1", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
            "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=prterun-h-1@1"),
    OK_CASE("Open MPI (ess job id)", IRIS_LAUNCHER_OPENMPI, 0, 3, 0, 0, "4242", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=3",
            "OMPI_MCA_ess_base_jobid=4242"),
    OK_CASE("mpirun inside a Slurm allocation: Slurm's set is ignored", IRIS_LAUNCHER_OPENMPI, 1, 4, 1, 0, "ns1", "OMPI_COMM_WORLD_RANK=1",
            "OMPI_COMM_WORLD_SIZE=4", "PMIX_NAMESPACE=ns1", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=2", "SLURM_JOB_ID=5"),
    OK_CASE("Open MPI and PMI agreeing: Open MPI first", IRIS_LAUNCHER_OPENMPI, 1, 2, 1, 0, "", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
            "PMI_RANK=1", "PMI_SIZE=2"),
    OK_CASE("world of IRIS_MAX_RANKS", IRIS_LAUNCHER_TORCHRUN, 15, 16, 15, 0, "", "RANK=15", "WORLD_SIZE=16"),
    BAD_CASE("RANK=abc", IRIS_ERROR_INVALID_ARGUMENT, "RANK=abc", "RANK=abc", "WORLD_SIZE=2"),
    BAD_CASE("WORLD_SIZE=0", IRIS_ERROR_INVALID_ARGUMENT, "WORLD_SIZE=0", "RANK=0", "WORLD_SIZE=0"),
    BAD_CASE("WORLD_SIZE=99999999999", IRIS_ERROR_INVALID_ARGUMENT, "WORLD_SIZE=99999999999|out of range", "RANK=0", "WORLD_SIZE=99999999999"),
    BAD_CASE("RANK=-1", IRIS_ERROR_INVALID_ARGUMENT, "RANK=-1", "RANK=-1", "WORLD_SIZE=2"),
    BAD_CASE("RANK=+1", IRIS_ERROR_INVALID_ARGUMENT, "RANK=+1", "RANK=+1", "WORLD_SIZE=2"),
    BAD_CASE("RANK with a space", IRIS_ERROR_INVALID_ARGUMENT, "RANK= 1", "RANK= 1", "WORLD_SIZE=2"),
    BAD_CASE("WORLD_SIZE=2.0", IRIS_ERROR_INVALID_ARGUMENT, "WORLD_SIZE=2.0", "RANK=1", "WORLD_SIZE=2.0"),
    BAD_CASE("world above IRIS_MAX_RANKS", IRIS_ERROR_UNSUPPORTED, "WORLD_SIZE=17|IRIS_MAX_RANKS", "RANK=0", "WORLD_SIZE=17"),
    BAD_CASE("rank equals world", IRIS_ERROR_INVALID_RANK, "RANK=2|WORLD_SIZE=2", "RANK=2", "WORLD_SIZE=2"),
    BAD_CASE("rank without world", IRIS_ERROR_INVALID_ARGUMENT, "RANK=1|WORLD_SIZE", "RANK=1"),
    BAD_CASE("world without rank", IRIS_ERROR_INVALID_ARGUMENT, "WORLD_SIZE=2|RANK", "WORLD_SIZE=2"),
    BAD_CASE("IRIS_RANK without IRIS_WORLD_SIZE", IRIS_ERROR_INVALID_ARGUMENT, "IRIS_RANK=5|IRIS_WORLD_SIZE", "IRIS_RANK=5"),
    BAD_CASE("local rank equals local size", IRIS_ERROR_INVALID_RANK, "LOCAL_RANK=2|LOCAL_WORLD_SIZE=2", "RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=2",
             "LOCAL_WORLD_SIZE=2"),
    BAD_CASE("local size above world", IRIS_ERROR_INVALID_ARGUMENT, "LOCAL_WORLD_SIZE=4|WORLD_SIZE=2", "RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=4"),
    BAD_CASE("local size zero", IRIS_ERROR_INVALID_ARGUMENT, "LOCAL_WORLD_SIZE=0", "RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=0"),
    BAD_CASE("local rank at world size, no local size", IRIS_ERROR_INVALID_RANK, "LOCAL_RANK=2|WORLD_SIZE=2", "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=2"),
    BAD_CASE("LOCAL_RANK=x", IRIS_ERROR_INVALID_ARGUMENT, "LOCAL_RANK=x", "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=x"),
    BAD_CASE("torchrun and Open MPI disagree", IRIS_ERROR_MISMATCH, "WORLD_SIZE=2|OMPI_COMM_WORLD_SIZE=4", "RANK=0", "WORLD_SIZE=2",
             "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4"),
    BAD_CASE("Open MPI and PMI disagree", IRIS_ERROR_MISMATCH, "OMPI_COMM_WORLD_SIZE=2|PMI_SIZE=3", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
             "PMI_RANK=0", "PMI_SIZE=3"),
    BAD_CASE("a malformed lower set is still an error", IRIS_ERROR_INVALID_ARGUMENT, "PMI_RANK=abc", "RANK=0", "WORLD_SIZE=2", "PMI_RANK=abc", "PMI_SIZE=2"),
    BAD_CASE("SLURM_PROCID=abc in a step", IRIS_ERROR_INVALID_ARGUMENT, "SLURM_PROCID=abc", "SLURM_PROCID=abc", "SLURM_NTASKS=2", "SLURM_STEP_ID=0"),
    BAD_CASE("SLURM_NTASKS=0 in a step", IRIS_ERROR_INVALID_ARGUMENT, "SLURM_NTASKS=0", "SLURM_PROCID=0", "SLURM_NTASKS=0", "SLURM_STEP_ID=0"),
    BAD_CASE("PMI_SIZE=0", IRIS_ERROR_INVALID_ARGUMENT, "PMI_SIZE=0", "PMI_RANK=0", "PMI_SIZE=0"),
    BAD_CASE("PMI rank beyond size", IRIS_ERROR_INVALID_RANK, "PMI_RANK=4|PMI_SIZE=4", "PMI_RANK=4", "PMI_SIZE=4"),
    BAD_CASE("OMPI_COMM_WORLD_RANK=x", IRIS_ERROR_INVALID_ARGUMENT, "OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_SIZE=2"),
    BAD_CASE("MPI_LOCALRANKID=-1", IRIS_ERROR_INVALID_ARGUMENT, "MPI_LOCALRANKID=-1", "PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALRANKID=-1"),
};

/* Does the '|'-separated list of words all occur in s? */
static int has_all(const char *s, const char *words) {
  char buf[256], *save = NULL, *w;
  snprintf(buf, sizeof buf, "%s", words);
  for (w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save))
    if (!has(s, w)) return 0;
  return 1;
}

static void test_launch_env_table(void) {
  size_t i;
  for (i = 0; i < sizeof k_env_cases / sizeof k_env_cases[0]; i++) {
    const env_case_t *c = &k_env_cases[i];
    iris_launch_env_t e;
    iris_status_t st;
    char nm[160];
    memset(&e, 0x5a, sizeof e);
    st = iris_launch_env(table_getenv, (void *)c->env, &e);
    snprintf(nm, sizeof nm, "launch env: %s", c->what);
    if (c->want == IRIS_SUCCESS)
      check(st == IRIS_SUCCESS && e.launcher == c->launcher && e.rank == c->rank && e.world_size == c->world && e.local_rank == c->local_rank &&
                e.local_size == c->local_size && !strcmp(e.job, c->job) && e.launcher_name && e.launcher_name[0],
            nm, "status %s '%s'; launcher %d (want %d), rank %d/%d (want %d/%d), local %d/%d (want %d/%d), job '%s' (want '%s')", sname(st),
            st ? iris_error_detail() : "", (int)e.launcher, (int)c->launcher, e.rank, e.world_size, c->rank, c->world, e.local_rank, e.local_size,
            c->local_rank, c->local_size, st ? "" : e.job, c->job);
    else
      check(st == c->want && has_all(iris_error_detail(), c->words), nm, "status %s (want %s), detail '%s' (want it to name %s)", sname(st), sname(c->want),
            iris_error_detail(), c->words);
  }
  {
    /* a job id too long for the token is cut and hashed; two that differ only at the end stay different */
    static char a[300], b[300];
    const char *ea[] = {"PMI_RANK=0", "PMI_SIZE=2", a, NULL}, *eb[] = {"PMI_RANK=0", "PMI_SIZE=2", b, NULL};
    iris_launch_env_t x, y;
    memset(a, 'j', sizeof a - 1);
    memcpy(a, "PMI_JOBID=", 10);
    a[sizeof a - 1] = 0;
    memcpy(b, a, sizeof b);
    b[sizeof b - 2] = 'k';
    check(iris_launch_env(table_getenv, (void *)ea, &x) == IRIS_SUCCESS && iris_launch_env(table_getenv, (void *)eb, &y) == IRIS_SUCCESS &&
              strlen(x.job) < sizeof x.job && strcmp(x.job, y.job) != 0,
          "launch env: long job ids are hashed, not cut alike", "'%s' vs '%s'", x.job, y.job);
  }
  check(iris_launch_env(NULL, NULL, NULL) == IRIS_ERROR_INVALID_ARGUMENT, "launch env: NULL out", "%s", iris_error_detail());
}

/* Sets NAME=VALUE pairs in the real environment; env_clear unsets them again. */
static void env_set(const char *const *kv) {
  for (; *kv; kv++) {
    char name[64];
    const char *eq = strchr(*kv, '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq - *kv), *kv);
    setenv(name, eq + 1, 1);
  }
}
static void env_clear(const char *const *kv) {
  for (; *kv; kv++) {
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(strchr(*kv, '=') - *kv), *kv);
    unsetenv(name);
  }
}

/* iris_init and iris_launch_local read the same environment, before any GPU call. */
static void test_launch_env_init(void) {
  static const char *no_job[] = {"RANK=1", "WORLD_SIZE=2", NULL}, *bad[] = {"RANK=abc", "WORLD_SIZE=2", NULL},
                    *hosts[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "IRIS_RENDEZVOUS=x", NULL},
                    *over[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=99999999999", NULL};
  iris_t *ctx = (iris_t *)&g_seed;
  iris_launch_t L;
  iris_status_t st;
  int my = -2;
  pid_t w;
  env_set(no_job);
  st = iris_init(NULL, &ctx);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && ctx == NULL && has(iris_error_detail(), "IRIS_RENDEZVOUS") && has(iris_error_detail(), "torchrun"),
        "init: a launcher's world of 2 without job id asks for IRIS_RENDEZVOUS", "%s: '%s'", sname(st), iris_error_detail());
  st = iris_launch_local(4, &L, &my);
  errno = 0;
  w = waitpid(-1, NULL, WNOHANG);
  check(st == IRIS_SUCCESS && my == 1 && L.num_ranks == 0 && w == -1 && errno == ECHILD, "launcher steps aside under torchrun", "%s, my_rank %d, %d ranks",
        sname(st), my, L.num_ranks);
  env_clear(no_job);
  env_set(bad);
  ctx = (iris_t *)&g_seed;
  st = iris_init(NULL, &ctx);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && ctx == NULL && has(iris_error_detail(), "RANK=abc"), "init: RANK=abc is an error", "%s: '%s'", sname(st),
        iris_error_detail());
  my = -2;
  st = iris_launch_local(2, &L, &my);
  errno = 0;
  w = waitpid(-1, NULL, WNOHANG);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && w == -1 && errno == ECHILD && has(iris_error_detail(), "RANK=abc"), "launcher: RANK=abc forks nothing",
        "%s: '%s'", sname(st), iris_error_detail());
  env_clear(bad);
  env_set(hosts);
  ctx = (iris_t *)&g_seed;
  st = iris_init(NULL, &ctx);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && ctx == NULL && has(iris_error_detail(), "MASTER_ADDR") && has(iris_error_detail(), "local size 1 of world size 2"),
        "init: a world over two hosts without MASTER_ADDR asks for it", "%s: '%s'", sname(st), iris_error_detail());
  env_clear(hosts);
  env_set(over);
  ctx = (iris_t *)&g_seed;
  st = iris_init(NULL, &ctx);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "OMPI_COMM_WORLD_SIZE=99999999999"), "init: an overflowing world size is an error",
        "%s: '%s'", sname(st), iris_error_detail());
  env_clear(over);
}

/* Two forked ranks with a launcher's variables meet through iris_init(NULL, ...) at the
 * rendezvous named after the job: they get past the rendezvous (IRIS_SUCCESS with a GPU,
 * else the GPU error of a machine without one), never a timeout or a world of 1. */
typedef struct bringup_arg {
  const char *env[2][8]; /* per rank */
} bringup_arg_t;

static int child_bringup(int rank, void *argp) {
  const bringup_arg_t *a = (const bringup_arg_t *)argp;
  iris_t *ctx = NULL;
  iris_status_t st;
  setenv("IRIS_RENDEZVOUS_DIR", g_dir, 1);
  setenv("IRIS_TIMEOUT_MS", "4000", 1);
  setenv("IRIS_HEAP_SIZE", "2MiB", 1);
  env_set(a->env[rank]);
  st = iris_init(NULL, &ctx);
  g_res[rank].open_st = (int)st;
  snprintf(g_res[rank].detail, sizeof g_res[rank].detail, "%s", iris_error_detail());
  if (st == IRIS_SUCCESS) {
    snprintf(g_res[rank].text, sizeof g_res[rank].text, "%d/%d", iris_rank(ctx), iris_world_size(ctx));
    st = iris_finalize(ctx);
  }
  return (int)st;
}

static void test_launch_env_bringup(void) {
  static const bringup_arg_t cases[] = {
      {{{"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=ht", "MASTER_PORT=1", NULL},
        {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=ht", "MASTER_PORT=1", NULL}}},
      {{{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", "SLURM_JOB_ID=4242", NULL},
        {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1", "SLURM_STEP_ID=0", "SLURM_JOB_ID=4242", NULL}}},
      {{{"PMI_RANK=0", "PMI_SIZE=2", "PMI_JOBID=ht:1", NULL}, {"PMI_RANK=1", "PMI_SIZE=2", "PMI_JOBID=ht:1", NULL}}},
      {{{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "PMIX_NAMESPACE=ht@1", NULL},
        {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "PMIX_NAMESPACE=ht@1", NULL}}}};
  static const char *names[] = {"torchrun", "srun", "mpiexec (Hydra)", "mpirun (Open MPI)"};
  int i, ranks[2] = {0, 1}, codes[2], hung;
  for (i = 0; i < 4; i++) {
    char nm[96];
    int ok;
    run_children(2, ranks, child_bringup, (void *)&cases[i], 15000, codes, &hung);
    ok = !hung && codes[0] == codes[1] && (codes[0] == IRIS_SUCCESS || codes[0] == IRIS_ERROR_GPU);
    if (ok && codes[0] == IRIS_SUCCESS) ok = !strcmp(g_res[0].text, "0/2") && !strcmp(g_res[1].text, "1/2");
    if (ok && codes[0] == IRIS_ERROR_GPU) ok = names_rank(g_res[1].detail, 1) && !names_rank(g_res[1].detail, 0); /* not a world of 1 */
    snprintf(nm, sizeof nm, "bring-up under %s's variables meets at the job's rendezvous", names[i]);
    check(ok, nm, "hung %d; rank 0: %s '%s' (%s); rank 1: %s '%s' (%s)", hung, sname((iris_status_t)codes[0]), g_res[0].detail, g_res[0].text,
          sname((iris_status_t)codes[1]), g_res[1].detail, g_res[1].text);
  }
}
