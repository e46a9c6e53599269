/* internal/core/nodes.h: multi-node worlds (docs/multinode.md): ranks grouped into nodes by a
 * host identity, the choice of the TCP rendezvous, NCCL/RCCL loaded at run time, and the
 * rail communicators that join the nodes. The heap is mapped among one node's ranks. Part
 * of iris's implementation, included by iris.h under IRIS_IMPLEMENTATION (inside its
 * extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_NODES_H
#define IRIS_INTERNAL_CORE_NODES_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"
#include "status.h"
#include "util.h"
#include "../rendezvous/wire.h"
#include "context.h"
#include "exchange.h"

#define IRIS_DETAIL_HOST_ID_BYTES 128

/* This rank's node identity: IRIS_HOST_ID (at most 120 characters) if set, else
 * "<hostname>/<boot id>" (the boot id tells apart machines that share a name, and is
 * the same in every container of one machine). lookup NULL reads getenv. */
IRIS_INTERNAL iris_status_t iris_detail_host_id(iris_getenv_fn lookup, void *user, char *out, size_t cap) {
  const char *v = NULL;
  iris_detail_record_t rec;
  const int got = iris_detail_env_in(lookup, user, "IRIS_HOST_ID", &v);
  if (got < 0) return IRIS_ERROR_INVALID_ARGUMENT; /* set but empty: never the default */
  if (got > 0) {
    if (strlen(v) > 120 || strlen(v) >= cap) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_HOST_ID=%.40s... is longer than 120 characters", v);
    iris_detail_copy(out, cap, v);
    return IRIS_SUCCESS;
  }
  memset(&rec, 0, sizeof rec);
  iris_detail_host_identity(&rec);
  snprintf(out, cap, "%.63s/%.47s", rec.host, rec.boot_id);
  return IRIS_SUCCESS;
}

/* What each rank sends when the ranks are grouped (iris_init). On one host's Unix socket
 * IRIS_HOST_ID alone decides whether there is more than one node, so the ranks exchange
 * whether they set it, and must agree. */
typedef struct iris_detail_node_msg {
  char id[IRIS_DETAIL_HOST_ID_BYTES]; /* the host id, terminated; "" where none was made */
  int32_t host_id_set;                /* IRIS_HOST_ID is set on this rank */
  int32_t failed;                     /* this rank has no valid id (it reports its own error) */
} iris_detail_node_msg_t;
IRIS_DETAIL_STATIC_ASSERT(offsetof(iris_detail_node_msg_t, host_id_set) == IRIS_DETAIL_HOST_ID_BYTES && sizeof(iris_detail_node_msg_t) == IRIS_DETAIL_HOST_ID_BYTES + 8,
                          node_message_layout);
/* From every rank's message: whether the ranks are grouped by their ids (*group), where
 * `spans` (TCP, a bootstrap: the world may span hosts) always groups them, and one host's
 * Unix socket only where IRIS_HOST_ID is set, on every rank alike: set on some ranks
 * only is IRIS_ERROR_MISMATCH naming IRIS_HOST_ID and both sets of ranks (the same answer
 * on every rank). Pure: host-tested. */
IRIS_INTERNAL iris_status_t iris_detail_host_id_agree(const iris_detail_node_msg_t *all, int world, int spans, int *group) {
  unsigned char *set;
  char on[200], off[200];
  int r, n = 0;
  for (r = 0; r < world; r++) n += all[r].host_id_set != 0;
  *group = spans || n > 0;
  if (spans || n == 0 || n == world) return IRIS_SUCCESS;
  if (!(set = (unsigned char *)malloc((size_t)world)))
    return iris_detail_fail(IRIS_ERROR_MISMATCH, "IRIS_HOST_ID is set on %d of %d ranks (rank 0: %s): set it on every rank or on none", n, world,
                            all[0].host_id_set ? "set" : "not set");
  for (r = 0; r < world; r++) set[r] = all[r].host_id_set != 0;
  iris_detail_rank_list(set, world, on, sizeof on);
  for (r = 0; r < world; r++) set[r] = !set[r];
  iris_detail_rank_list(set, world, off, sizeof off);
  free(set);
  return iris_detail_fail(IRIS_ERROR_MISMATCH,
                          "IRIS_HOST_ID is set on ranks %s but not on ranks %s: on one host it alone splits the ranks into nodes, so set it on every rank "
                          "(virtual nodes) or on none (one node)",
                          on, off);
}

/* A run of equal ids (a node's ranks): its id and first rank, sorted by id, then rank. */
typedef struct iris_detail_id_run {
  const char *id;
  int rank;
} iris_detail_id_run_t;
IRIS_INTERNAL int iris_detail_id_run_cmp(const void *x, const void *y) {
  const iris_detail_id_run_t *a = (const iris_detail_id_run_t *)x, *b = (const iris_detail_id_run_t *)y;
  const int c = strcmp(a->id, b->id);
  return c ? c : (a->rank > b->rank) - (a->rank < b->rank);
}
/* Groups `world` ranks by their ids (ids + r * stride, terminated strings): the ranks of
 * one id must be consecutive (block placement) and every id must hold as many ranks.
 * Sets rank `rank`'s node, the node count, its local rank and the local size. Errors
 * name the ids, ranks and counts: IRIS_ERROR_UNSUPPORTED (ranks of a node not
 * consecutive; a node of more than IRIS_MAX_RANKS ranks), IRIS_ERROR_MISMATCH (unequal
 * counts); the first in rank order. The runs are sorted to find an id that comes back
 * (O(W log W): every rank does this at iris_init, and W reaches 65536); without memory
 * for that, every run is compared with the ranks before it (the same answer, O(W^2)).
 * Pure: host-tested. */
IRIS_INTERNAL iris_status_t iris_detail_group_nodes(const char *ids, size_t stride, int world, int rank, int *node, int *nodes, int *local_rank,
                                                    int *local_size) {
#define IRIS_DETAIL_ID(r) (ids + (size_t)(r) * stride)
  int r, q, run = 1, L = 0, back = -1, first = -1, n = 0, sorted = 0;
  iris_detail_id_run_t *runs = world > 0 ? (iris_detail_id_run_t *)malloc((size_t)(unsigned)world * sizeof *runs) : NULL;
  if (runs) { /* back: the first run whose id an earlier run had, first: that earlier run's first rank */
    for (r = 0; r < world; r++)
      if (r == 0 || strcmp(IRIS_DETAIL_ID(r), IRIS_DETAIL_ID(r - 1)) != 0) {
        runs[n].id = IRIS_DETAIL_ID(r);
        runs[n++].rank = r;
      }
    qsort(runs, (size_t)n, sizeof *runs, iris_detail_id_run_cmp);
    for (q = 1; q < n; q++) /* of one id, the second run is the earliest to come back; runs[q - 1] is then its id's first */
      if (strcmp(runs[q].id, runs[q - 1].id) == 0 && (back < 0 || runs[q].rank < back)) {
        back = runs[q].rank;
        first = runs[q - 1].rank;
      }
    free(runs);
    sorted = 1;
  }
  for (r = 1; r <= world; r++) {
    if (r < world && strcmp(IRIS_DETAIL_ID(r), IRIS_DETAIL_ID(r - 1)) == 0) { run++; continue; }
    if (r < world) /* a new id starts at r: it must not have appeared before */
      for (q = sorted ? (r == back ? first : r) : 0; q < r - 1; q++)
        if (strcmp(IRIS_DETAIL_ID(q), IRIS_DETAIL_ID(r)) == 0)
          return iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                                  "the ranks of node '%s' are not consecutive (rank %d and rank %d are on it, rank %d between them on '%s'): iris needs block "
                                  "placement, a node's ranks numbered one after another (srun --distribution=block, mpirun --map-by slot, torchrun)",
                                  IRIS_DETAIL_ID(r), q, r, r - 1, IRIS_DETAIL_ID(r - 1));
    if (!L) L = run;
    else if (run != L)
      return iris_detail_fail(IRIS_ERROR_MISMATCH, "node '%s' (ranks %d to %d) has %d ranks but node '%s' (rank 0's) has %d: every node must run the same number of ranks",
                              IRIS_DETAIL_ID(r - 1), r - run, r - 1, run, IRIS_DETAIL_ID(0), L);
    run = 1;
  }
  if (L > IRIS_MAX_RANKS)
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "node '%s' has %d ranks, more than IRIS_MAX_RANKS (%d); rebuild every unit with a larger -DIRIS_MAX_RANKS",
                            IRIS_DETAIL_ID(0), L, IRIS_MAX_RANKS);
  *local_size = L;
  *nodes = world / L;
  *node = rank / L;
  *local_rank = rank % L;
  return IRIS_SUCCESS;
#undef IRIS_DETAIL_ID
}

/* Which exchange a world without a bootstrap uses: the TCP rendezvous (*use = 1, addr
 * and *port from MASTER_ADDR and MASTER_PORT) when `given` (the rendezvous name) is
 * "tcp" or the launcher says the world spans hosts (its local size below the world
 * size); else the Unix socket (*use = 0). Errors name the missing or malformed
 * variable. Pure on lookup (NULL: getenv): host-tested. */
IRIS_INTERNAL iris_status_t iris_detail_tcp_choice(iris_getenv_fn lookup, void *user, const char *given, const iris_launch_env_t *env, int *use, char *addr,
                                                   size_t cap, int *port) {
  const char *a = lookup ? lookup(user, "MASTER_ADDR") : getenv("MASTER_ADDR");
  const char *pt = lookup ? lookup(user, "MASTER_PORT") : getenv("MASTER_PORT");
  char why[160];
  *use = 0;
  if (given && strcmp(given, "tcp") == 0) snprintf(why, sizeof why, "IRIS_RENDEZVOUS=tcp");
  else if (env && env->local_size > 0 && env->local_size < env->world_size)
    snprintf(why, sizeof why, "%s spreads the world over hosts (local size %d of world size %d)", env->launcher_name, env->local_size, env->world_size);
  else return IRIS_SUCCESS;
  if (!a || !*a || !pt || !*pt)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "%s: the network rendezvous needs MASTER_ADDR (rank 0's host) and MASTER_PORT (a free port there); %s is not set"
                            " (or pass iris_config_t.bootstrap)", why, (!a || !*a) ? "MASTER_ADDR" : "MASTER_PORT");
  if (iris_detail_parse_uint("MASTER_PORT", pt, port) < 0) return IRIS_ERROR_INVALID_ARGUMENT;
  if (*port < 1 || *port > 65535) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "MASTER_PORT=%s is not a port in [1, 65535]", pt);
  if (strlen(a) >= cap || strlen(a) > 80) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "MASTER_ADDR=%.40s... is longer than 80 characters", a);
  iris_detail_copy(addr, cap, a);
  *use = 1;
  return IRIS_SUCCESS;
}

/* NCCL/RCCL, loaded once per process: IRIS_NCCL_LIBRARY, else a copy already in the
 * process (linked or loaded by the application), else libnccl.so.2 (librccl.so on
 * AMD). Never unloaded once it is taken; a library that lacks a function is closed
 * again. IRIS_SUCCESS with *api, or IRIS_ERROR_UNSUPPORTED naming the library or the
 * missing function. */
typedef struct { char internal[128]; } iris_detail_nccl_id_t; /* ncclUniqueId */
typedef struct iris_detail_nccl_lib {
  iris_nccl_api_t api;
  int (*get_unique_id)(iris_detail_nccl_id_t *id);
  int (*comm_init_rank)(void **comm, int nranks, iris_detail_nccl_id_t id, int rank);
  int (*comm_destroy)(void *comm);
  int (*comm_count)(const void *comm, int *count);
  int (*comm_user_rank)(const void *comm, int *rank);
} iris_detail_nccl_lib_t;
IRIS_INTERNAL iris_status_t iris_detail_nccl_load(const iris_detail_nccl_lib_t **out) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static iris_detail_nccl_lib_t lib;
  static int loaded;
  static const char *const names[] = {"ncclGetErrorString", "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv",
                                      "ncclGroupStart", "ncclGroupEnd", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy", "ncclCommCount",
                                      "ncclCommUserRank"};
  void *fn[sizeof names / sizeof names[0]];
  const char *env = NULL, *which = IRIS_GPU_NCCL_SONAME;
  void *h = NULL;
  size_t i;
  iris_status_t st = IRIS_SUCCESS;
  if (iris_detail_env("IRIS_NCCL_LIBRARY", &env) < 0) return IRIS_ERROR_INVALID_ARGUMENT; /* set but empty: an error, not the default */
  pthread_mutex_lock(&mu);
  if (loaded) { *out = &lib; pthread_mutex_unlock(&mu); return IRIS_SUCCESS; }
  if (env) which = env;
  else {
    void *self = dlopen(NULL, RTLD_LAZY);
    if (self && dlsym(self, "ncclAllReduce")) h = self, which = "this process";
    else if (self) dlclose(self); /* no NCCL in the process: this handle is not kept */
  }
  if (!h && !(h = dlopen(which, RTLD_NOW | RTLD_GLOBAL))) {
    const char *why = dlerror();
    st = iris_detail_fail(IRIS_ERROR_UNSUPPORTED,
                          "a multi-node world needs NCCL/RCCL between the nodes, and %s could not be loaded (%s); install it, put it on LD_LIBRARY_PATH or name "
                          "it in IRIS_NCCL_LIBRARY",
                          which, why ? why : "?");
  }
  for (i = 0; st == IRIS_SUCCESS && i < sizeof names / sizeof names[0]; i++) {
    *(void **)&fn[i] = dlsym(h, names[i]);
    if (!fn[i]) st = iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "%s has no %s (NCCL 2.7 or later is needed)", which, names[i]);
  }
  if (st != IRIS_SUCCESS && h) dlclose(h); /* a library without NCCL's functions is not left loaded (each failed call loaded it once more) */
  if (st == IRIS_SUCCESS) {
    int (*get_version)(int *) = NULL;
    *(void **)&get_version = dlsym(h, "ncclGetVersion");
    memcpy(&lib.api.get_error_string, &fn[0], sizeof fn[0]);
    memcpy(&lib.api.all_reduce, &fn[1], sizeof fn[0]);
    memcpy(&lib.api.all_gather, &fn[2], sizeof fn[0]);
    memcpy(&lib.api.reduce_scatter, &fn[3], sizeof fn[0]);
    memcpy(&lib.api.broadcast, &fn[4], sizeof fn[0]);
    memcpy(&lib.api.send, &fn[5], sizeof fn[0]);
    memcpy(&lib.api.recv, &fn[6], sizeof fn[0]);
    memcpy(&lib.api.group_start, &fn[7], sizeof fn[0]);
    memcpy(&lib.api.group_end, &fn[8], sizeof fn[0]);
    memcpy(&lib.get_unique_id, &fn[9], sizeof fn[0]);
    memcpy(&lib.comm_init_rank, &fn[10], sizeof fn[0]);
    memcpy(&lib.comm_destroy, &fn[11], sizeof fn[0]);
    memcpy(&lib.comm_count, &fn[12], sizeof fn[0]);
    memcpy(&lib.comm_user_rank, &fn[13], sizeof fn[0]);
    if (!get_version || get_version(&lib.api.version) != 0) lib.api.version = 0;
    loaded = 1;
    *out = &lib;
  }
  pthread_mutex_unlock(&mu);
  return st;
}

/* The host NCCL puts this rank on, hashed: NCCL_HOSTID if set, else the hostname and the
 * boot id (NCCL's own rule; a hostname truncated here can only make more ranks look
 * alike). NCCL refuses two ranks of one host on one GPU ("Duplicate GPU"), so a
 * communicator over every rank is made only where no two ranks share both. */
IRIS_INTERNAL uint64_t iris_detail_nccl_host(void) {
  iris_detail_record_t rec;
  const char *id = getenv("NCCL_HOSTID"), *c;
  char s[256];
  uint64_t h = 14695981039346656037ULL;
  if (id) snprintf(s, sizeof s, "%s", id);
  else {
    memset(&rec, 0, sizeof rec);
    iris_detail_host_identity(&rec);
    snprintf(s, sizeof s, "%s%s", rec.host, rec.boot_id);
  }
  for (c = s; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
  return h;
}
/* Whether IRIS_MN_NCCL_WHOLE's value v hands no call to NCCL whole, whatever the
 * compile-time defaults: "none", "0", or a list that names every collective (those of
 * internal/coll/mn_route.h, iris_coll_mn_kind_names), each once and each "=none". Anything
 * else, malformed included, is 0: the collectives parse it (and refuse it at setup). */
static const char *const iris_detail_whole_kinds[5] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"};
IRIS_INTERNAL int iris_detail_whole_is_none(const char *v) {
  const char *const *kinds = iris_detail_whole_kinds;
  unsigned named = 0;
  int k;
  if (!strcmp(v, "none") || !strcmp(v, "0")) return 1;
  for (;;) { /* one COLLECTIVE=none item */
    const char *end = strchr(v, ',');
    const size_t n = end ? (size_t)(end - v) : strlen(v);
    for (k = 0; k < 5; k++) {
      const size_t kl = strlen(kinds[k]);
      if (n == kl + 5 && !strncmp(v, kinds[k], kl) && !strncmp(v + kl, "=none", 5)) break;
    }
    if (k == 5 || (named & (1u << k))) return 0;
    named |= 1u << k;
    if (!end) break;
    v = end + 1;
  }
  return named == 31u;
}
/* Whether this rank asks for the world communicator (*wanted): IRIS_MN_NCCL_WHOLE unset,
 * or a value that may hand some call to NCCL whole. Set but empty: IRIS_ERROR_INVALID_ARGUMENT
 * naming it (*wanted 1). */
IRIS_INTERNAL iris_status_t iris_detail_world_wanted(int32_t *wanted) {
  const char *v = NULL;
  const int got = iris_detail_env("IRIS_MN_NCCL_WHOLE", &v);
  *wanted = !(got > 0 && iris_detail_whole_is_none(v));
  return got < 0 ? IRIS_ERROR_INVALID_ARGUMENT : IRIS_SUCCESS;
}

/* Collective over the world: one rail communicator per local rank across the nodes
 * (its rank: this rank's node), or the caller's (user_comm, checked: size = nodes,
 * rank = node); and, with more than one rank per node, a world communicator over every
 * rank (rank = global rank) for the calls the collectives hand to NCCL whole, also
 * beside a caller's rail (with one rank per node the rail is the world). The node-0
 * member of each rail makes its ncclUniqueId, rank 0 the world's; the world's exchange
 * carries them. The world communicator is left out (world_comm NULL, every call then
 * takes the composition) when any rank sets IRIS_MN_NCCL_WHOLE=none, or two ranks share
 * a GPU on one host as NCCL sees hosts (NCCL would refuse them). Every rank reports its
 * outcome before and after each NCCL init, so all fail alike (no partial context) and
 * NCCL's init starts only once every rank is ready for it. NCCL's own connection waits
 * are bounded by NCCL, not timeout_ms. */
typedef struct iris_detail_rail_msg {
  int32_t status; /* non-zero: this rank failed (an iris_status_t); err says why */
  char err[220];
  iris_detail_nccl_id_t id;       /* the node-0 member's rail ncclUniqueId (the others: zeros) */
  iris_detail_nccl_id_t world_id; /* rank 0's world ncclUniqueId (in the round before the world's init) */
  uint64_t nccl_host;             /* iris_detail_nccl_host() */
  int32_t world_wanted;           /* iris_detail_world_wanted */
  char pci[32];                   /* this rank's GPU, its PCI bus id */
} iris_detail_rail_msg_t;
IRIS_DETAIL_STATIC_ASSERT(sizeof(iris_detail_nccl_id_t) == 128 && offsetof(iris_detail_rail_msg_t, err) == 4 &&
                              offsetof(iris_detail_rail_msg_t, id) == 224 && offsetof(iris_detail_rail_msg_t, world_id) == 352 &&
                              offsetof(iris_detail_rail_msg_t, nccl_host) == 480 && offsetof(iris_detail_rail_msg_t, world_wanted) == 488 &&
                              offsetof(iris_detail_rail_msg_t, pci) == 492 && sizeof(iris_detail_rail_msg_t) == 528,
                          rail_message_layout);
IRIS_INTERNAL iris_status_t iris_detail_rail_agree(iris_t *ctx, iris_detail_rail_msg_t *me, iris_detail_rail_msg_t *all, const char *what) {
  iris_status_t st;
  int r;
  if ((st = iris_detail_comm_allgather_world(ctx, me, all, sizeof *me, ctx->timeout_ms)) != IRIS_SUCCESS) return st;
  for (r = 0; r < ctx->gworld; r++) {
    all[r].err[sizeof all[r].err - 1] = 0;
    all[r].pci[sizeof all[r].pci - 1] = 0;
    if (all[r].status != 0)
      return iris_detail_fail(iris_detail_peer_status(all[r].status), "rank %d (node %d) could not set up its %s: %s", r, r / ctx->local_size, what, all[r].err);
  }
  return IRIS_SUCCESS;
}
/* From every rank's first message: whether the world communicator is made (the same
 * answer on every rank): every rank wants it and no two share (NCCL host, GPU), found by
 * sorting those pairs. Pure: host-tested. */
typedef struct iris_detail_gpu_key {
  uint64_t host;
  char pci[32];
} iris_detail_gpu_key_t;
IRIS_INTERNAL int iris_detail_gpu_key_cmp(const void *x, const void *y) {
  const iris_detail_gpu_key_t *a = (const iris_detail_gpu_key_t *)x, *b = (const iris_detail_gpu_key_t *)y;
  return a->host != b->host ? (a->host < b->host ? -1 : 1) : strcmp(a->pci, b->pci);
}
IRIS_INTERNAL int iris_detail_world_comm_possible(const iris_detail_rail_msg_t *all, int world) {
  iris_detail_gpu_key_t *k;
  int r, ok = 1;
  if (world < 1) return 0;
  for (r = 0; r < world; r++)
    if (!all[r].world_wanted) return 0;
  if (!(k = (iris_detail_gpu_key_t *)calloc((size_t)(unsigned)world, sizeof *k))) { /* no memory: compare every pair (the same answer, slower) */
    int b;
    for (r = 0; r < world && ok; r++)
      for (b = r + 1; b < world && ok; b++) ok = !(all[r].nccl_host == all[b].nccl_host && !strncmp(all[r].pci, all[b].pci, sizeof all[r].pci));
    return ok;
  }
  for (r = 0; r < world; r++) {
    k[r].host = all[r].nccl_host;
    memcpy(k[r].pci, all[r].pci, sizeof k[r].pci);
    k[r].pci[sizeof k[r].pci - 1] = 0;
  }
  qsort(k, (size_t)world, sizeof *k, iris_detail_gpu_key_cmp);
  for (r = 1; r < world && ok; r++) ok = iris_detail_gpu_key_cmp(&k[r - 1], &k[r]) != 0;
  free(k);
  return ok;
}
IRIS_INTERNAL iris_status_t iris_detail_rails_setup(iris_t *ctx, void *user_comm) {
  const iris_detail_nccl_lib_t *lib = NULL;
  iris_detail_rail_msg_t me, *all = (iris_detail_rail_msg_t *)calloc((size_t)ctx->gworld, sizeof me);
  iris_status_t st, local;
  int res = 0, world = 0;
  if (!all) return iris_detail_fail(IRIS_ERROR_OUT_OF_MEMORY, "rank %d: out of host memory", ctx->grank);
  memset(&me, 0, sizeof me);
  me.nccl_host = iris_detail_nccl_host();
  if (iris_gpu_pci_bus_id(me.pci, (int)sizeof me.pci - 1, ctx->device) != IRIS_GPU_SUCCESS) snprintf(me.pci, sizeof me.pci, "rank %d", ctx->grank); /* unknown: unique */
  if ((local = iris_detail_world_wanted(&me.world_wanted)) == IRIS_SUCCESS) local = iris_detail_nccl_load(&lib);
  if (local == IRIS_SUCCESS && user_comm) {
    int n = -1, k = -1;
    if (lib->comm_count(user_comm, &n) != 0 || lib->comm_user_rank(user_comm, &k) != 0 || n != ctx->nodes || k != ctx->node)
      local = iris_detail_fail(IRIS_ERROR_MISMATCH, "rank %d: iris_config_t.rail_comm has %d ranks and rank %d in it, but a rail has one rank per node: %d ranks, rank %d (the node)",
                               ctx->grank, n, k, ctx->nodes, ctx->node);
  } else if (local == IRIS_SUCCESS && ctx->node == 0 && (res = lib->get_unique_id(&me.id)) != 0) {
    local = iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: ncclGetUniqueId failed: %s", ctx->grank, lib->api.get_error_string(res));
  }
  if (local != IRIS_SUCCESS) {
    me.status = (int32_t)local;
    iris_detail_copy(me.err, sizeof me.err, iris_detail_errbuf);
  }
  if ((st = iris_detail_rail_agree(ctx, &me, all, "rail communicator")) == IRIS_SUCCESS) {
    ctx->nccl = &lib->api;
    world = ctx->local_size > 1 && iris_detail_world_comm_possible(all, ctx->gworld);
    if (user_comm) {
      ctx->rail = user_comm;
    } else {
      void *comm = NULL;
      /* rail l's id comes from its node-0 member, global rank l */
      if ((res = lib->comm_init_rank(&comm, ctx->nodes, all[ctx->local_rank].id, ctx->node)) != 0) {
        me.status = (int32_t)IRIS_ERROR_UNSUPPORTED;
        snprintf(me.err, sizeof me.err, "ncclCommInitRank (rail %d, %d nodes) failed: %s", ctx->local_rank, ctx->nodes, lib->api.get_error_string(res));
        comm = NULL;
      }
      ctx->rail = comm;
      ctx->rail_owned = comm != NULL;
      st = iris_detail_rail_agree(ctx, &me, all, "rail communicator"); /* iris_detail_release destroys ours on failure */
    }
  }
  if (st == IRIS_SUCCESS && ctx->local_size == 1) ctx->world_comm = ctx->rail; /* one rank per node: the rail is the world */
  if (st == IRIS_SUCCESS && world) {
    /* rank 0 makes the world's id once every rail is up; the others learn it here */
    if (ctx->grank == 0 && (res = lib->get_unique_id(&me.world_id)) != 0) {
      me.status = (int32_t)IRIS_ERROR_UNSUPPORTED;
      snprintf(me.err, sizeof me.err, "ncclGetUniqueId (world communicator) failed: %s", lib->api.get_error_string(res));
    }
    if ((st = iris_detail_rail_agree(ctx, &me, all, "world communicator")) == IRIS_SUCCESS) {
      void *comm = NULL;
      if ((res = lib->comm_init_rank(&comm, ctx->gworld, all[0].world_id, ctx->grank)) != 0) {
        me.status = (int32_t)IRIS_ERROR_UNSUPPORTED;
        snprintf(me.err, sizeof me.err, "ncclCommInitRank (world communicator, %d ranks; IRIS_MN_NCCL_WHOLE=none leaves it out) failed: %s", ctx->gworld,
                 lib->api.get_error_string(res));
        comm = NULL;
      }
      ctx->world_comm = comm;
      ctx->world_owned = comm != NULL;
      st = iris_detail_rail_agree(ctx, &me, all, "world communicator"); /* iris_detail_release destroys ours on failure */
    }
  }
  free(all);
  return st;
}
IRIS_DEF const iris_nccl_api_t *iris_detail_nccl(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) && ctx->nodes > 1 ? ctx->nccl : NULL; }
IRIS_DEF void *iris_detail_world_comm(const iris_t *ctx) { return IRIS_DETAIL_IS_LIVE(ctx) && ctx->nodes > 1 ? ctx->world_comm : NULL; }

#endif /* IRIS_INTERNAL_CORE_NODES_H */
