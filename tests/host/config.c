/* tests/host/config.c: the bring-up records, iris_config_t, status strings. */
#include "harness.h"

/* ------------------------------------------------------ exchange records -- */
static void make_recs(iris_detail_record_t *rec, int world) {
  int r;
  memset(rec, 0, sizeof *rec * (size_t)world);
  for (r = 0; r < world; r++) {
    rec[r].magic = IRIS_DETAIL_MAGIC;
    rec[r].version = IRIS_VERSION;
    rec[r].rank = r;
    rec[r].world = world;
    rec[r].heap_size = 1ULL << 30;
    rec[r].heap_memory = IRIS_HEAP_MEMORY_FINE;
    rec[r].device = r;
    rec[r].pid = 4000 + r;
    rec[r].uid = 1000;
    rec[r].base = 0x7f0000000000ULL + ((uint64_t)r << 32);
    snprintf(rec[r].host, sizeof rec[r].host, "%s", "node-a");
    snprintf(rec[r].boot_id, sizeof rec[r].boot_id, "%s", "0b5c2a7e-1111-2222-3333-444455556666");
    snprintf(rec[r].pci, sizeof rec[r].pci, "0000:%02x:00.0", 0x10 + r);
  }
}

static void expect_recs(const char *check_name, iris_detail_record_t *rec, int world, iris_status_t want, int rank_named, const char *word) {
  iris_status_t st = iris_detail_check_node_records(rec, world, 0);
  const char *d = iris_error_detail();
  int ok = st == want;
  if (want != IRIS_SUCCESS) {
    ok &= d[0] != 0;
    if (rank_named >= 0) ok &= names_rank(d, rank_named);
    if (word) ok &= has(d, word);
  }
  check(ok, check_name, "status %s (want %s), detail '%s' (want rank %d%s%s%s)", sname(st), sname(want), d, rank_named, word ? " and '" : "", word ? word : "",
        word ? "'" : "");
}

/* A multi-node world's records are a node's slice: messages name world ranks (node 1 of
 * 4-rank nodes: slots 0-3 are ranks 4-7), never the slots. */
static void test_node_records(void) {
  iris_detail_record_t rec[4];
  iris_status_t st;
  const char *d;
  make_recs(rec, 4);
  rec[1].status = (int32_t)IRIS_ERROR_GPU;
  snprintf(rec[1].err, sizeof rec[1].err, "%s", "no GPU");
  st = iris_detail_check_node_records(rec, 4, 4);
  d = iris_error_detail();
  check(st == IRIS_ERROR_GPU && names_rank(d, 5) && !names_rank(d, 1), "records of node 1: a failed rank is named by its world rank", "%s '%s'", sname(st), d);
  make_recs(rec, 4);
  snprintf(rec[2].host, sizeof rec[2].host, "%s", "node-b");
  st = iris_detail_check_node_records(rec, 4, 4);
  d = iris_error_detail();
  check(st == IRIS_ERROR_DIFFERENT_HOST && names_rank(d, 6) && names_rank(d, 4) && !names_rank(d, 2) && !names_rank(d, 0),
        "records of node 1: another host names world ranks 6 and 4", "%s '%s'", sname(st), d);
}

static void test_records(void) {
  iris_detail_record_t rec[4];
  make_recs(rec, 4);
  expect_recs("records all equal", rec, 4, IRIS_SUCCESS, -1, NULL);
  make_recs(rec, 1);
  expect_recs("records world 1", rec, 1, IRIS_SUCCESS, -1, NULL);
  make_recs(rec, 4);
  snprintf(rec[2].host, sizeof rec[2].host, "%s", "node-b");
  expect_recs("records other host", rec, 4, IRIS_ERROR_DIFFERENT_HOST, 2, "hosts");
  make_recs(rec, 4);
  rec[2].boot_id[0] = 'f';
  expect_recs("records other boot id", rec, 4, IRIS_ERROR_DIFFERENT_HOST, 2, "boot id");
  make_recs(rec, 4);
  rec[2].uid = 1001;
  expect_recs("records other uid", rec, 4, IRIS_ERROR_PERMISSION, 2, "uid");
  make_recs(rec, 4);
  rec[2].world = 8;
  expect_recs("records other world size", rec, 4, IRIS_ERROR_MISMATCH, 2, "world size");
  make_recs(rec, 4);
  rec[0].world = 3;
  expect_recs("records rank 0 other world size", rec, 4, IRIS_ERROR_MISMATCH, -1, "world size");
  make_recs(rec, 4);
  rec[2].heap_size = 1ULL << 31;
  expect_recs("records other heap size", rec, 4, IRIS_ERROR_MISMATCH, 2, "heap");
  make_recs(rec, 4);
  rec[2].heap_memory = IRIS_HEAP_MEMORY_COARSE;
  expect_recs("records other heap memory", rec, 4, IRIS_ERROR_MISMATCH, 2, "heap memory");
  make_recs(rec, 4);
  rec[2].version = IRIS_VERSION + 1;
  expect_recs("records other version", rec, 4, IRIS_ERROR_MISMATCH, 2, "version");
  make_recs(rec, 4);
  rec[2].status = IRIS_ERROR_GPU;
  snprintf(rec[2].err, sizeof rec[2].err, "%s", "rank 2: cudaMalloc failed: out of memory (zq-7781)");
  expect_recs("records failed rank status", rec, 4, IRIS_ERROR_GPU, 2, "out of memory (zq-7781)");
  make_recs(rec, 4);
  rec[2].status = 99;
  snprintf(rec[2].err, sizeof rec[2].err, "%s", "a status from nowhere");
  expect_recs("records unknown failure status is a system error", rec, 4, IRIS_ERROR_SYSTEM, 2, "from nowhere");
  make_recs(rec, 4);
  rec[1].rank = 2;
  rec[2].rank = 1;
  expect_recs("records slots out of order", rec, 4, IRIS_ERROR_MISMATCH, 2, "slot 1");
  make_recs(rec, 4);
  rec[3].magic = 0;
  expect_recs("records bad magic", rec, 4, IRIS_ERROR_MISMATCH, 3, "slot 3");
}

/* -------------------------------------------------------------- config -- */
static void expect_init(const char *check_name, const iris_config_t *cfg, int null_out, iris_status_t want, const char *word) {
  iris_t *ctx = (iris_t *)&g_seed; /* sentinel */
  iris_status_t st = iris_init(cfg, null_out ? NULL : &ctx);
  const char *d = iris_error_detail();
  int ok = st == want && (null_out || ctx == NULL) && d[0] != 0 && (!word || has(d, word));
  if (st == IRIS_SUCCESS && !null_out && ctx && ctx != (iris_t *)&g_seed) iris_finalize(ctx);
  check(ok, check_name, "status %s (want %s), out %s, detail '%s'%s%s", sname(st), sname(want), null_out ? "n/a" : ctx == NULL ? "NULL" : "not NULL", d,
        word ? " (want it to mention " : "", word ? word : "");
}

static void cfg_base(iris_config_t *c, int rank, int world) {
  iris_config_t def = IRIS_CONFIG_INIT;
  *c = def;
  c->rank = rank;
  c->world_size = world;
  c->heap_size = (size_t)2 << 20;
  c->timeout_ms = 1500;
  c->barrier_timeout_ms = 1500;
  c->rendezvous_dir = g_dir;
}

static int bad_cb_allgather(void *u, const void *s, void *r, size_t n) {
  (void)u, (void)s, (void)r, (void)n;
  return 1;
}

static void test_config(void) {
  iris_config_t c;
  iris_bootstrap_t hooks;
  char name[80];
  int ndev = -1;
  cudaError_t e;
  unique_name(name, sizeof name, "init");

  cfg_base(&c, 0, 1);
  c.struct_size = sizeof c - 8;
  expect_init("config wrong struct size", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "struct_size");
  cfg_base(&c, 0, 1);
  c.struct_size = 0;
  expect_init("config zero struct size", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "struct_size");
  cfg_base(&c, 5, 2);
  expect_init("config rank above world", &c, 0, IRIS_ERROR_INVALID_RANK, NULL);
  cfg_base(&c, 2, 2);
  expect_init("config rank equals world", &c, 0, IRIS_ERROR_INVALID_RANK, NULL);
  cfg_base(&c, 0, 1000);
  expect_init("config world above max ranks", &c, 0, IRIS_ERROR_UNSUPPORTED, "IRIS_MAX_RANKS");
  cfg_base(&c, 0, IRIS_MAX_RANKS + 1);
  expect_init("config world max ranks plus 1", &c, 0, IRIS_ERROR_UNSUPPORTED, NULL);
  expect_init("config null null", NULL, 1, IRIS_ERROR_INVALID_ARGUMENT, NULL);
  cfg_base(&c, 0, 1);
  expect_init("config null out", &c, 1, IRIS_ERROR_INVALID_ARGUMENT, NULL);
  cfg_base(&c, 0, 1);
  c.heap_memory = (iris_heap_memory_t)99;
  expect_init("config bad heap memory", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "heap_memory");
  cfg_base(&c, 0, 1);
  hooks.user = NULL;
  hooks.allgather = bad_cb_allgather;
  hooks.barrier = NULL;
  c.bootstrap = &hooks;
  expect_init("config bootstrap without barrier", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "barrier");
  /* IRIS_HOST_ID set but empty is an error on every exchange, the Unix socket's too (not
   * read as unset there) */
  cfg_base(&c, 0, 1);
  c.rendezvous = name;
  setenv("IRIS_HOST_ID", "", 1);
  expect_init("config IRIS_HOST_ID='' refused, not read as unset", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "IRIS_HOST_ID is set but empty");
  unsetenv("IRIS_HOST_ID");
  { /* cfg's own world (rank 0 of 2) inside a torchrun job spread over hosts (4 of 8 per
     * host): the launcher's layout must not choose TCP for it (it asked for MASTER_ADDR) */
    iris_t *ctx = (iris_t *)&g_seed;
    iris_status_t st;
    const char *vars[][2] = {{"RANK", "1"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}};
    int i;
    cfg_base(&c, 0, 2);
    c.rendezvous = name;
    c.timeout_ms = 300;
    for (i = 0; i < 4; i++) setenv(vars[i][0], vars[i][1], 1);
    st = iris_init(&c, &ctx);
    check(st != IRIS_SUCCESS && !has(iris_error_detail(), "MASTER_ADDR") && !has(iris_error_detail(), "spreads the world"),
          "config: a cfg world inside a launcher's multi-host job takes the Unix socket, not the launcher's TCP choice", "status %s: '%s'", sname(st), iris_error_detail());
    if (st == IRIS_SUCCESS) iris_finalize(ctx);
    for (i = 0; i < 4; i++) unsetenv(vars[i][0]);
  }

  /* real bring-up of one rank: no GPU here means a clean IRIS_ERROR_GPU */
  e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev <= 0) {
    int i;
    for (i = 0; i < 2; i++) {
      iris_t *ctx = (iris_t *)&g_seed;
      iris_status_t st;
      const char *d;
      char nm[64];
      cfg_base(&c, 0, 1);
      c.rendezvous = name;
      st = iris_init(&c, &ctx);
      d = iris_error_detail();
      snprintf(nm, sizeof nm, "config no gpu init fails%s", i ? " again" : "");
      check(st == IRIS_ERROR_GPU && ctx == NULL && d[0] && (e != cudaSuccess ? has(d, "GetDeviceCount") : has(d, "no GPU")), nm,
            "cudaGetDeviceCount gave %d (%d devices); iris_init: %s, out %s, detail '%s'", (int)e, ndev, sname(st), ctx == NULL ? "NULL" : "not NULL", d);
      if (i == 0 && access("/proc/driver/nvidia/version", F_OK) != 0) /* a machine without any driver says so, not "driver too old" */
        check(has(d, "no NVIDIA driver is loaded on this host"), "config no gpu: the detail names the missing driver", "detail '%s'", d);
      if (st == IRIS_SUCCESS && ctx && ctx != (iris_t *)&g_seed) iris_finalize(ctx);
    }
  } else {
    int i;
    for (i = 0; i < 2; i++) {
      iris_t *ctx = NULL;
      iris_status_t st, fs = IRIS_ERROR_INVALID_ARGUMENT;
      char nm[64];
      cfg_base(&c, 0, 1);
      c.rendezvous = name;
      st = iris_init(&c, &ctx);
      snprintf(nm, sizeof nm, "config gpu init and finalize%s", i ? " again" : "");
      if (st == IRIS_SUCCESS) {
        int ok = iris_rank(ctx) == 0 && iris_world_size(ctx) == 1 && iris_heap_size(ctx) >= c.heap_size;
        fs = iris_finalize(ctx);
        check(ok && fs == IRIS_SUCCESS, nm, "queries ok %d, finalize %s: '%s'", ok, sname(fs), iris_error_detail());
      } else {
        check(0, nm, "iris_init: %s: '%s'", sname(st), iris_error_detail());
      }
    }
  }
}

/* ---------------------------------------------------------- status strings -- */
#define STATUS_ENTRY(x) {x, #x}
static const struct {
  iris_status_t s;
  const char *name;
} k_status[] = {STATUS_ENTRY(IRIS_SUCCESS),          STATUS_ENTRY(IRIS_ERROR_INVALID_ARGUMENT), STATUS_ENTRY(IRIS_ERROR_INVALID_RANK),
                STATUS_ENTRY(IRIS_ERROR_OUT_OF_MEMORY), STATUS_ENTRY(IRIS_ERROR_NOT_IN_HEAP),   STATUS_ENTRY(IRIS_ERROR_MISMATCH),
                STATUS_ENTRY(IRIS_ERROR_TIMEOUT),       STATUS_ENTRY(IRIS_ERROR_GPU),           STATUS_ENTRY(IRIS_ERROR_SYSTEM),
                STATUS_ENTRY(IRIS_ERROR_PERMISSION),    STATUS_ENTRY(IRIS_ERROR_DIFFERENT_HOST), STATUS_ENTRY(IRIS_ERROR_UNSUPPORTED),
                STATUS_ENTRY(IRIS_ERROR_BOOTSTRAP),     STATUS_ENTRY(IRIS_ERROR_RANK_FAILED),   STATUS_ENTRY(IRIS_ERROR_PEER_FAILED), STATUS_ENTRY(IRIS_ERROR_ABORTED), STATUS_ENTRY(IRIS_ERROR_IN_USE)};

static void test_status_strings(void) {
  const int n = (int)(sizeof k_status / sizeof k_status[0]);
  int i, j, distinct = 1, di = -1, dj = -1;
  check(n == IRIS_STATUS_COUNT, "status table covers every status", "the test knows %d statuses, IRIS_STATUS_COUNT is %d", n, (int)IRIS_STATUS_COUNT);
  for (i = 0; i < n; i++) {
    const char *s = iris_status_string(k_status[i].s);
    size_t len = strlen(k_status[i].name);
    char nm[80];
    int k;
    snprintf(nm, sizeof nm, "status string %s", k_status[i].name + 5); /* drop "IRIS_" */
    for (k = 0; nm[k]; k++)
      if (nm[k] >= 'A' && nm[k] <= 'Z') nm[k] = (char)(nm[k] - 'A' + 'a');
    check((int)k_status[i].s == i && s && s[0] && strncmp(s, k_status[i].name, len) == 0 && (s[len] == 0 || s[len] == ':'), nm, "value %d gives '%s'",
          (int)k_status[i].s, s ? s : "(NULL)");
  }
  for (i = 0; i < IRIS_STATUS_COUNT; i++)
    for (j = i + 1; j < IRIS_STATUS_COUNT; j++)
      if (strcmp(iris_status_string((iris_status_t)i), iris_status_string((iris_status_t)j)) == 0 && distinct) distinct = 0, di = i, dj = j;
  check(distinct, "status strings distinct", "statuses %d and %d share '%s'", di, dj, distinct ? "" : iris_status_string((iris_status_t)di));
  {
    const char *a = iris_status_string((iris_status_t)IRIS_STATUS_COUNT), *b = iris_status_string((iris_status_t)-1),
               *c = iris_status_string((iris_status_t)1000);
    int ok = a && b && c && a[0] && b[0] && c[0];
    for (i = 0; ok && i < IRIS_STATUS_COUNT; i++) ok = strcmp(a, iris_status_string((iris_status_t)i)) != 0;
    check(ok, "status string out of range", "COUNT: '%s', -1: '%s', 1000: '%s'", a ? a : "(NULL)", b ? b : "(NULL)", c ? c : "(NULL)");
  }
}
