/* tests/host/multinode.c: multi-node worlds: node grouping, IRIS_HOST_ID, the TCP rendezvous, the NCCL loader, virtual nodes. */
#include "harness.h"

/* ------------------------------------------------ multi-node: grouping, TCP -- */
static iris_status_t group_of(const char *const *ids, int world, int rank, int *node, int *nodes, int *lr, int *ls) {
  char buf[MAXR * 2][IRIS_DETAIL_HOST_ID_BYTES];
  int r;
  memset(buf, 0, sizeof buf);
  for (r = 0; r < world; r++) snprintf(buf[r], sizeof buf[r], "%s", ids[r]);
  return iris_detail_group_nodes(&buf[0][0], sizeof buf[0], world, rank, node, nodes, lr, ls);
}
static void test_node_grouping(void) {
  static const char *const two[] = {"A", "A", "B", "B"}, *const one[] = {"h/x", "h/x", "h/x"}, *const uneven[] = {"A", "A", "A", "B"},
                           *const split[] = {"A", "B", "A", "B"}, *const back[] = {"A", "A", "B", "B", "A", "A"}, *const third[] = {"A", "A", "B", "B", "C"};
  const char *big[MAXR * 2];
  int node = -1, nodes = -1, lr = -1, ls = -1, r, ok = 1;
  iris_status_t st;
  for (r = 0; r < 4 && ok; r++) {
    st = group_of(two, 4, r, &node, &nodes, &lr, &ls);
    ok = st == IRIS_SUCCESS && node == r / 2 && nodes == 2 && lr == r % 2 && ls == 2;
  }
  check(ok, "nodes: 2 hosts x 2 ranks group by block", "rank %d: %s node %d of %d, local %d of %d", r - 1, sname(st), node, nodes, lr, ls);
  st = group_of(one, 3, 2, &node, &nodes, &lr, &ls);
  check(st == IRIS_SUCCESS && node == 0 && nodes == 1 && lr == 2 && ls == 3, "nodes: one host is one node", "%s node %d of %d, local %d of %d", sname(st), node,
        nodes, lr, ls);
  st = group_of(uneven, 4, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_MISMATCH && has(iris_error_detail(), "'B'") && has(iris_error_detail(), "has 1 ranks") && has(iris_error_detail(), "has 3"),
        "nodes: unequal rank counts are refused naming node and counts", "%s: '%s'", sname(st), iris_error_detail());
  st = group_of(third, 5, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_MISMATCH && has(iris_error_detail(), "'C'"), "nodes: a short last node is refused", "%s: '%s'", sname(st), iris_error_detail());
  st = group_of(split, 4, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "not consecutive") && has(iris_error_detail(), "block"),
        "nodes: round-robin placement is refused", "%s: '%s'", sname(st), iris_error_detail());
  st = group_of(back, 6, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "'A'") && names_rank(iris_error_detail(), 4),
        "nodes: a node whose ranks come back later is refused", "%s: '%s'", sname(st), iris_error_detail());
  {
    static const char *const twice[] = {"A", "A", "B", "B", "C", "C", "B", "B", "A", "A"};
    st = group_of(twice, 10, 0, &node, &nodes, &lr, &ls);
    check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "'B'") && has(iris_error_detail(), "rank 2 and rank 6"),
          "nodes: of two nodes that come back, the first in rank order is named", "%s: '%s'", sname(st), iris_error_detail());
  }
  { /* the documented largest world, one rank per node: grouping is O(W log W) (it compared
     * each node with every rank before it: 7.6 s of every rank's iris_init here) */
    const int W = 65536;
    char *ids = (char *)calloc((size_t)W, IRIS_DETAIL_HOST_ID_BYTES);
    long long t0 = now_ms(), ms = -1;
    st = IRIS_ERROR_OUT_OF_MEMORY;
    if (ids) {
      for (r = 0; r < W; r++) snprintf(ids + (size_t)r * IRIS_DETAIL_HOST_ID_BYTES, IRIS_DETAIL_HOST_ID_BYTES, "gpu-node-%05d/0f3c1a2b-9d8e-4c7f-b6a5-1e2d3c4b5a69", r);
      t0 = now_ms();
      st = iris_detail_group_nodes(ids, IRIS_DETAIL_HOST_ID_BYTES, W, W - 1, &node, &nodes, &lr, &ls);
      ms = now_ms() - t0;
      free(ids);
    }
    check(st == IRIS_SUCCESS && nodes == W && ls == 1 && node == W - 1 && lr == 0 && ms < 2000, "nodes: 65536 one-rank nodes group in well under a second",
          "%s nodes %d local size %d, %lld ms", sname(st), nodes, ls, ms);
  }
  for (r = 0; r < IRIS_MAX_RANKS + 1; r++) big[r] = "same";
  st = group_of(big, IRIS_MAX_RANKS + 1, 0, &node, &nodes, &lr, &ls);
  check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "IRIS_MAX_RANKS"), "nodes: a node above IRIS_MAX_RANKS is refused", "%s: '%s'", sname(st),
        iris_error_detail());
}

static const char *table_env(void *user, const char *name) {
  const char *const *kv = (const char *const *)user;
  size_t n = strlen(name);
  for (; *kv; kv++)
    if (strncmp(*kv, name, n) == 0 && (*kv)[n] == '=') return *kv + n + 1;
  return NULL;
}
static void test_node_env(void) {
  static const char *id_set[] = {"IRIS_HOST_ID=vnode1", NULL}, *none[] = {NULL}, *long_id[] = {
      "IRIS_HOST_ID=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", NULL};
  static const char *tcp_ok[] = {"MASTER_ADDR=node7", "MASTER_PORT=29500", NULL}, *no_addr[] = {"MASTER_PORT=29500", NULL},
                    *bad_port[] = {"MASTER_ADDR=node7", "MASTER_PORT=70000", NULL}, *junk_port[] = {"MASTER_ADDR=node7", "MASTER_PORT=29x", NULL};
  char id[IRIS_DETAIL_HOST_ID_BYTES], addr[96];
  iris_launch_env_t env;
  int use = -1, port = 0;
  iris_status_t st;
  st = iris_detail_host_id(table_env, (void *)id_set, id, sizeof id);
  check(st == IRIS_SUCCESS && strcmp(id, "vnode1") == 0, "nodes: IRIS_HOST_ID is the host id", "%s '%s'", sname(st), id);
  st = iris_detail_host_id(table_env, (void *)none, id, sizeof id);
  check(st == IRIS_SUCCESS && strchr(id, '/') && id[0] != '/', "nodes: default host id is hostname/boot id", "%s '%s'", sname(st), id);
  st = iris_detail_host_id(table_env, (void *)long_id, id, sizeof id);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_HOST_ID"), "nodes: an overlong IRIS_HOST_ID is an error", "%s: '%s'", sname(st),
        iris_error_detail());
  memset(&env, 0, sizeof env);
  env.launcher_name = "torchrun";
  env.world_size = 4;
  env.local_size = 4;
  st = iris_detail_tcp_choice(table_env, (void *)tcp_ok, NULL, &env, &use, addr, sizeof addr, &port);
  check(st == IRIS_SUCCESS && use == 0, "rendezvous choice: one host stays on the Unix socket", "%s use %d", sname(st), use);
  st = iris_detail_tcp_choice(table_env, (void *)tcp_ok, "tcp", NULL, &use, addr, sizeof addr, &port);
  check(st == IRIS_SUCCESS && use == 1 && port == 29500 && strcmp(addr, "node7") == 0, "rendezvous choice: IRIS_RENDEZVOUS=tcp uses MASTER_ADDR:MASTER_PORT",
        "%s use %d %s:%d", sname(st), use, addr, port);
  env.local_size = 2;
  st = iris_detail_tcp_choice(table_env, (void *)tcp_ok, NULL, &env, &use, addr, sizeof addr, &port);
  check(st == IRIS_SUCCESS && use == 1, "rendezvous choice: a world over hosts uses TCP", "%s use %d", sname(st), use);
  st = iris_detail_tcp_choice(table_env, (void *)no_addr, NULL, &env, &use, addr, sizeof addr, &port);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "MASTER_ADDR") && has(iris_error_detail(), "local size 2 of world size 4"),
        "rendezvous choice: no MASTER_ADDR is an error naming it", "%s: '%s'", sname(st), iris_error_detail());
  st = iris_detail_tcp_choice(table_env, (void *)bad_port, "tcp", NULL, &use, addr, sizeof addr, &port);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "MASTER_PORT=70000"), "rendezvous choice: MASTER_PORT out of range", "%s: '%s'", sname(st),
        iris_error_detail());
  st = iris_detail_tcp_choice(table_env, (void *)junk_port, "tcp", NULL, &use, addr, sizeof addr, &port);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "MASTER_PORT=29x"), "rendezvous choice: a malformed MASTER_PORT", "%s: '%s'", sname(st),
        iris_error_detail());
}

/* A port nobody listens on now (bound to 0, read back, closed). */
static int free_port(void) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0) port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}
typedef struct tcp_arg {
  int port, world[MAXR], timeout_ms, gathers;
  const char *job[MAXR];
} tcp_arg_t;
/* Exit code: the status of open (or of the first failing allgather). */
static int child_tcp(int rank, void *argp) {
  const tcp_arg_t *a = (const tcp_arg_t *)argp;
  child_res_t *res = &g_res[rank];
  iris_rendezvous_params_t p;
  iris_rendezvous_t *r = (iris_rendezvous_t *)&p;
  iris_status_t st;
  long long t0;
  int i;
  set_params(&p, "tcp-test", NULL, rank, a->world[rank], a->timeout_ms, 1ULL << 30);
  p.job = a->job[rank];
  t0 = now_ms();
  st = iris_rendezvous_open_tcp(&p, "127.0.0.1", a->port, &r);
  res->open_ms = now_ms() - t0;
  res->out_null = r == NULL;
  snprintf(res->detail, sizeof res->detail, "%s", iris_error_detail());
  if (st != IRIS_SUCCESS) return r ? 100 : (int)st;
  for (i = 0; i < a->gathers; i++)
    if (gather_and_verify(r, rank, a->world[rank], i, 1 + (size_t)(i * 7) % 60)) { iris_rendezvous_close(r); return 99; }
  iris_rendezvous_close(r);
  return 0;
}
static void tcp_init(tcp_arg_t *a, int world, int timeout_ms, int gathers) {
  int i;
  memset(a, 0, sizeof *a);
  a->port = free_port();
  a->timeout_ms = timeout_ms;
  a->gathers = gathers;
  for (i = 0; i < MAXR; i++) {
    a->world[i] = world;
    a->job[i] = "job-1";
  }
}
static void test_tcp_rendezvous(void) {
  tcp_arg_t a;
  int ranks[MAXR], codes[MAXR], hung, i, lfd, one = 1;
  long long ms;
  struct sockaddr_in sa;
  for (i = 0; i < MAXR; i++) ranks[i] = i;
  /* 4 ranks, 30 allgathers; then again on the same port at once (left in TIME_WAIT) */
  tcp_init(&a, 4, 5000, 30);
  ms = run_children(4, ranks, child_tcp, &a, 15000, codes, &hung);
  expect_children_ok("tcp rendezvous 4 ranks 30 allgathers", 4, ranks, codes, hung, ms);
  ms = run_children(4, ranks, child_tcp, &a, 15000, codes, &hung);
  expect_children_ok("tcp rendezvous reuses a port its last job just left (stale port)", 4, ranks, codes, hung, ms);
  /* a missing peer: rank 0 names it, within the timeout */
  tcp_init(&a, 3, 800, 1);
  ms = run_children(2, ranks, child_tcp, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && codes[1] == IRIS_ERROR_TIMEOUT && names_rank(g_res[0].detail, 2) && !names_rank(g_res[0].detail, 1) &&
            has(g_res[0].detail, "MASTER_ADDR") && g_res[0].out_null && g_res[1].out_null && ms < 4000,
        "tcp rendezvous missing rank times out naming it", "hung %d after %lld ms; rank 0 %s '%s'; rank 1 %s '%s'", hung, ms, sname((iris_status_t)codes[0]),
        g_res[0].detail, sname((iris_status_t)codes[1]), g_res[1].detail);
  /* no rank 0 at all: rank 1 names the address */
  ms = run_children(1, ranks + 1, child_tcp, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && has(g_res[1].detail, "127.0.0.1:") && has(g_res[1].detail, "MASTER_ADDR") && ms >= 700 && ms < 4000,
        "tcp rendezvous with no rank 0 times out naming MASTER_ADDR:MASTER_PORT", "%lld ms, %s '%s'", ms, sname((iris_status_t)codes[0]), g_res[1].detail);
  /* a wrong world size */
  tcp_init(&a, 2, 5000, 1);
  a.world[1] = 3;
  ms = run_children(2, ranks, child_tcp, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_MISMATCH && codes[1] == IRIS_ERROR_MISMATCH && has(g_res[0].detail, "world size") && has(g_res[1].detail, "world size") &&
            ms < 4000,
        "tcp rendezvous refuses a wrong world size", "hung %d after %lld ms; rank 0 %s '%s'; rank 1 %s '%s'", hung, ms, sname((iris_status_t)codes[0]),
        g_res[0].detail, sname((iris_status_t)codes[1]), g_res[1].detail);
  check(has(g_res[0].detail, "127.0.0.1") && has(g_res[1].detail, "127.0.0.1"), "tcp rendezvous: a refused rank's message names its host (iris.h)",
        "rank 0 '%s'; rank 1 '%s'", g_res[0].detail, g_res[1].detail);
  /* a rank of another job: refused, rank 0 keeps waiting for its own */
  tcp_init(&a, 2, 1200, 1);
  a.job[1] = "job-2";
  ms = run_children(2, ranks, child_tcp, &a, 10000, codes, &hung);
  check(!hung && codes[0] == IRIS_ERROR_TIMEOUT && codes[1] == IRIS_ERROR_IN_USE && has(g_res[0].detail, "another job") && has(g_res[1].detail, "another job"),
        "tcp rendezvous refuses a rank of another job", "hung %d after %lld ms; rank 0 %s '%s'; rank 1 %s '%s'", hung, ms, sname((iris_status_t)codes[0]),
        g_res[0].detail, sname((iris_status_t)codes[1]), g_res[1].detail);
  /* the port is taken by a live listener: rank 0 says so at once */
  tcp_init(&a, 2, 3000, 1);
  lfd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons((unsigned short)a.port);
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 4) != 0) {
    check(0, "tcp rendezvous refuses a port in use", "could not occupy port %d: %s", a.port, strerror(errno));
  } else {
    ms = run_children(1, ranks, child_tcp, &a, 10000, codes, &hung);
    check(!hung && codes[0] == IRIS_ERROR_IN_USE && has(g_res[0].detail, "MASTER_PORT") && ms < 1000, "tcp rendezvous refuses a port in use",
          "%lld ms, %s '%s'", ms, sname((iris_status_t)codes[0]), g_res[0].detail);
  }
  if (lfd >= 0) close(lfd);
  {
    iris_rendezvous_params_t p;
    iris_rendezvous_t *r = (iris_rendezvous_t *)&p;
    iris_status_t st;
    set_params(&p, "tcp-test", NULL, 1, 2, 500, 1ULL << 30);
    st = iris_rendezvous_open_tcp(&p, "no-such-host.invalid", 29500, &r);
    check((st == IRIS_ERROR_INVALID_ARGUMENT || st == IRIS_ERROR_TIMEOUT) && r == NULL && has(iris_error_detail(), "no-such-host.invalid"),
          "tcp rendezvous names an unresolvable MASTER_ADDR", "%s: '%s'", sname(st), iris_error_detail());
    st = iris_rendezvous_open_tcp(&p, "127.0.0.1", 0, &r);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && r == NULL && has(iris_error_detail(), "MASTER_PORT"), "tcp rendezvous refuses port 0", "%s: '%s'", sname(st),
          iris_error_detail());
  }
}

static void test_nccl_loader(void) {
  const iris_detail_nccl_lib_t *lib = NULL;
  iris_status_t st;
  void *h;
  setenv("IRIS_NCCL_LIBRARY", "/nonexistent/libnccl-test.so.2", 1);
  st = iris_detail_nccl_load(&lib);
  check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "/nonexistent/libnccl-test.so.2") && has(iris_error_detail(), "IRIS_NCCL_LIBRARY"),
        "nccl loader: a missing library is refused naming it", "%s: '%s'", sname(st), iris_error_detail());
  unsetenv("IRIS_NCCL_LIBRARY");
  { /* a library that is not NCCL is refused and not left loaded: a system library that
     * nothing here loads (the first present of a few) */
    static const char *const libs[] = {"libBrokenLocale.so.1", "libanl.so.1", "libz.so.1"};
    const char *lib_name = NULL;
    size_t i;
    for (i = 0; i < sizeof libs / sizeof libs[0] && !lib_name; i++) {
      if ((h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD)) != NULL) { dlclose(h); continue; } /* loaded already: proves nothing */
      if ((h = dlopen(libs[i], RTLD_NOW)) != NULL) {
        dlclose(h);
        lib_name = libs[i];
      }
    }
    if (!lib_name) printf("SKIP: nccl loader: a library without NCCL is not left loaded: none of the test libraries here\n");
    else {
      setenv("IRIS_NCCL_LIBRARY", lib_name, 1);
      st = iris_detail_nccl_load(&lib);
      h = dlopen(lib_name, RTLD_NOW | RTLD_NOLOAD);
      check(st == IRIS_ERROR_UNSUPPORTED && has(iris_error_detail(), "has no nccl") && h == NULL, "nccl loader: a library without NCCL is refused and not left loaded",
            "%s '%s'; %s %s", sname(st), iris_error_detail(), lib_name, h ? "still loaded" : "unloaded");
      if (h) dlclose(h);
      unsetenv("IRIS_NCCL_LIBRARY");
    }
  }
  h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libnccl.so.2", RTLD_NOW);
  if (!h) {
    printf("SKIP: nccl loader: resolves every function: no libnccl.so.2 here\n");
    return;
  }
  st = iris_detail_nccl_load(&lib);
  check(st == IRIS_SUCCESS && lib && lib->api.all_reduce && lib->api.all_gather && lib->api.reduce_scatter && lib->api.broadcast && lib->comm_init_rank &&
            lib->get_unique_id && lib->api.version >= 20700,
        "nccl loader: resolves every function from libnccl.so.2 (no link dependency)", "%s: '%s', version %d", sname(st), iris_error_detail(),
        lib ? lib->api.version : -1);
}

/* A child rank's iris_init with a 5 s bound and a 4 MiB heap (its environment set by the
 * caller): its status returned, its detail and whether *out stayed NULL in g_res[rank]. */
static int child_init_record(int rank) {
  iris_t *ctx = NULL;
  iris_status_t st;
  setenv("IRIS_TIMEOUT_MS", "5000", 1);
  setenv("IRIS_HEAP_SIZE", "4M", 1);
  st = iris_init(NULL, &ctx);
  snprintf(g_res[rank].detail, sizeof g_res[rank].detail, "%s", iris_error_detail());
  g_res[rank].out_null = ctx == NULL;
  if (st == IRIS_SUCCESS) iris_finalize(ctx);
  return (int)st;
}
/* iris_init over virtual nodes (IRIS_HOST_ID) and the TCP rendezvous, without a GPU:
 * the ranks meet and are grouped before any GPU call, so an uneven layout is refused on
 * every rank (naming the node and counts), and an even one gets past the grouping (to
 * the GPU error here, or further on a machine with a GPU), never a timeout. */
typedef struct vinit_arg { const char *ids[4]; int port; } vinit_arg_t;
static int child_vinit(int rank, void *argp) {
  const vinit_arg_t *a = (const vinit_arg_t *)argp;
  char port[16], r[8];
  snprintf(port, sizeof port, "%d", a->port);
  snprintf(r, sizeof r, "%d", rank);
  setenv("IRIS_RANK", r, 1);
  setenv("IRIS_WORLD_SIZE", "4", 1);
  setenv("IRIS_RENDEZVOUS", "tcp", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", port, 1);
  setenv("IRIS_HOST_ID", a->ids[rank], 1);
  return child_init_record(rank);
}
static void test_init_virtual_nodes(void) {
  vinit_arg_t a = {{"vA", "vA", "vA", "vB"}, 0};
  int ranks[4] = {0, 1, 2, 3}, codes[4], hung, i, ok = 1;
  long long ms;
  a.port = free_port();
  ms = run_children(4, ranks, child_vinit, &a, 20000, codes, &hung);
  for (i = 0; i < 4; i++) ok = ok && codes[i] == IRIS_ERROR_MISMATCH && has(g_res[i].detail, "'vB'") && has(g_res[i].detail, "has 1 ranks") && g_res[i].out_null;
  check(!hung && ok && ms < 5000, "init: virtual nodes of 3 and 1 ranks are refused on every rank", "hung %d after %lld ms; rank 0 %s '%s'; rank 3 %s '%s'", hung, ms,
        sname((iris_status_t)codes[0]), g_res[0].detail, sname((iris_status_t)codes[3]), g_res[3].detail);
  a.ids[2] = "vB";
  a.port = free_port();
  ms = run_children(4, ranks, child_vinit, &a, 30000, codes, &hung);
  for (i = 0, ok = 1; i < 4; i++) ok = ok && codes[i] != IRIS_ERROR_TIMEOUT && codes[i] != IRIS_ERROR_MISMATCH && codes[i] != IRIS_ERROR_INVALID_ARGUMENT;
  check(!hung && ok, "init: 2 virtual nodes x 2 ranks meet over TCP and group (then the GPU step)", "hung %d after %lld ms; rank 0 %s '%s'; rank 3 %s '%s'", hung,
        ms, sname((iris_status_t)codes[0]), g_res[0].detail, sname((iris_status_t)codes[3]), g_res[3].detail);
}

/* IRIS_HOST_ID on some ranks only, on one host's Unix socket (where it alone decides
 * whether the ranks are grouped): the ranks exchange whether they set it and all fail
 * alike, IRIS_ERROR_MISMATCH naming IRIS_HOST_ID and the ranks on each side (before:
 * the ranks took different exchanges, "rank 1 is out of step with rank 0"). */
static void test_host_id_agree(void) {
  iris_detail_node_msg_t m[4];
  int group = -1, r;
  iris_status_t st;
  memset(m, 0, sizeof m);
  st = iris_detail_host_id_agree(m, 4, 0, &group);
  check(st == IRIS_SUCCESS && group == 0, "host id agreement: set nowhere on one host: one node", "%s group %d", sname(st), group);
  st = iris_detail_host_id_agree(m, 4, 1, &group);
  check(st == IRIS_SUCCESS && group == 1, "host id agreement: TCP or a bootstrap always groups", "%s group %d", sname(st), group);
  for (r = 0; r < 4; r++) m[r].host_id_set = 1;
  st = iris_detail_host_id_agree(m, 4, 0, &group);
  check(st == IRIS_SUCCESS && group == 1, "host id agreement: set everywhere on one host: grouped", "%s group %d", sname(st), group);
  m[1].host_id_set = m[3].host_id_set = 0;
  st = iris_detail_host_id_agree(m, 4, 0, &group);
  check(st == IRIS_ERROR_MISMATCH && has(iris_error_detail(), "IRIS_HOST_ID is set on ranks 0,2 but not on ranks 1,3"),
        "host id agreement: set on some ranks only is a mismatch naming both sides", "%s: '%s'", sname(st), iris_error_detail());
  st = iris_detail_host_id_agree(m, 4, 1, &group);
  check(st == IRIS_SUCCESS && group == 1, "host id agreement: over TCP ranks may mix IRIS_HOST_ID and the default", "%s group %d", sname(st), group);
}
typedef struct hostid_arg { const char *ids[3]; char name[64]; } hostid_arg_t;
static int child_hostid(int rank, void *argp) {
  const hostid_arg_t *a = (const hostid_arg_t *)argp;
  char r[8];
  snprintf(r, sizeof r, "%d", rank);
  setenv("IRIS_RANK", r, 1);
  setenv("IRIS_WORLD_SIZE", "3", 1);
  setenv("IRIS_RENDEZVOUS", a->name, 1);
  setenv("IRIS_RENDEZVOUS_DIR", g_dir, 1);
  if (a->ids[rank]) setenv("IRIS_HOST_ID", a->ids[rank], 1);
  else unsetenv("IRIS_HOST_ID");
  return child_init_record(rank);
}
static void test_init_host_id_some_ranks(void) {
  hostid_arg_t a = {{"vA", NULL, "vB"}, ""};
  int ranks[3] = {0, 1, 2}, codes[3], hung, i, ok = 1;
  long long ms;
  unique_name(a.name, sizeof a.name, "hostid");
  ms = run_children(3, ranks, child_hostid, &a, 20000, codes, &hung);
  for (i = 0; i < 3; i++)
    ok = ok && codes[i] == IRIS_ERROR_MISMATCH && has(g_res[i].detail, "IRIS_HOST_ID is set on ranks 0,2 but not on ranks 1") && g_res[i].out_null;
  check(!hung && ok && ms < 4000, "init: IRIS_HOST_ID on some ranks only fails every rank naming it and the ranks",
        "hung %d after %lld ms; rank 0 %s '%s'; rank 1 %s '%s'", hung, ms, sname((iris_status_t)codes[0]), g_res[0].detail, sname((iris_status_t)codes[1]),
        g_res[1].detail);
  /* set on every rank, one id: one node, grouped over the Unix socket (then the GPU step) */
  a.ids[1] = a.ids[2] = "vA";
  unique_name(a.name, sizeof a.name, "hostid");
  ms = run_children(3, ranks, child_hostid, &a, 20000, codes, &hung);
  for (i = 0, ok = 1; i < 3; i++) ok = ok && codes[i] != IRIS_ERROR_TIMEOUT && codes[i] != IRIS_ERROR_MISMATCH && codes[i] != IRIS_ERROR_INVALID_ARGUMENT;
  check(!hung && ok, "init: IRIS_HOST_ID alike on every rank of one host groups them (then the GPU step)", "hung %d after %lld ms; rank 0 %s '%s'", hung, ms,
        sname((iris_status_t)codes[0]), g_res[0].detail);
  /* set nowhere: one node, as before (then the GPU step) */
  a.ids[0] = a.ids[1] = a.ids[2] = NULL;
  unique_name(a.name, sizeof a.name, "hostid");
  ms = run_children(3, ranks, child_hostid, &a, 20000, codes, &hung);
  for (i = 0, ok = 1; i < 3; i++) ok = ok && codes[i] != IRIS_ERROR_TIMEOUT && codes[i] != IRIS_ERROR_MISMATCH && codes[i] != IRIS_ERROR_INVALID_ARGUMENT;
  check(!hung && ok, "init: no IRIS_HOST_ID on one host: one node (then the GPU step)", "hung %d after %lld ms; rank 0 %s '%s'", hung, ms,
        sname((iris_status_t)codes[0]), g_res[0].detail);
}

/* A world above IRIS_MAX_RANKS whose bring-up fails before the ranks are grouped into
 * nodes (here: every rank on one node id, a node too large): each rank's context still
 * counts the whole world as its node, and its teardown must not index the per-node
 * arrays with world ranks (they would run over the context's other fields, its
 * rendezvous among them, which would then never be closed). Ranks as threads of one
 * forked process; its open descriptors are counted before and after. */
#define BIGNODE_WORLD (2 * IRIS_MAX_RANKS)
typedef struct bignode_rank { int rank; const char *name; iris_status_t st; int out_null; char detail[200]; } bignode_rank_t;
static void *bignode_thread(void *p) {
  bignode_rank_t *a = (bignode_rank_t *)p;
  iris_config_t c = IRIS_CONFIG_INIT;
  iris_t *ctx = (iris_t *)&g_seed;
  c.rank = a->rank;
  c.world_size = BIGNODE_WORLD;
  c.heap_size = (size_t)2 << 20;
  c.timeout_ms = 8000;
  c.rendezvous = a->name;
  c.rendezvous_dir = g_dir;
  a->st = iris_init(&c, &ctx);
  a->out_null = ctx == NULL;
  snprintf(a->detail, sizeof a->detail, "%.199s", iris_error_detail());
  if (a->st == IRIS_SUCCESS) iris_finalize(ctx);
  return NULL;
}
static int count_open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0;
  if (!d) return -1;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}
static int child_bignode(int rank, void *name) {
  static bignode_rank_t a[BIGNODE_WORLD];
  pthread_t t[BIGNODE_WORLD];
  int i, before, after, started = 0;
  setenv("IRIS_HOST_ID", "one-node", 1);
  before = count_open_fds();
  for (i = 0; i < BIGNODE_WORLD; i++) {
    a[i].rank = i;
    a[i].name = (const char *)name;
    if (pthread_create(&t[i], NULL, bignode_thread, &a[i]) != 0) break;
    started++;
  }
  for (i = 0; i < started; i++) pthread_join(t[i], NULL);
  after = count_open_fds();
  if (started != BIGNODE_WORLD) return child_fail(rank, "only %d threads started", started);
  for (i = 0; i < BIGNODE_WORLD; i++)
    if (a[i].st != IRIS_ERROR_UNSUPPORTED || !a[i].out_null || !has(a[i].detail, "IRIS_MAX_RANKS"))
      return child_fail(rank, "rank %d: %s (want IRIS_ERROR_UNSUPPORTED naming IRIS_MAX_RANKS), out %s: '%s'", i, sname(a[i].st), a[i].out_null ? "NULL" : "set",
                        a[i].detail);
  if (after != before) return child_fail(rank, "%d descriptors open before the failed bring-ups, %d after (leaked: %d)", before, after, after - before);
  return 0;
}
static void test_init_big_node_cleanup(void) {
  char name[80];
  int ranks[1] = {0}, codes[1], hung;
  long long ms;
  unique_name(name, sizeof name, "bignode");
  ms = run_children(1, ranks, child_bignode, name, 20000, codes, &hung);
  expect_children_ok("init: a world above IRIS_MAX_RANKS refused at grouping leaves nothing open", 1, ranks, codes, hung, ms);
}
