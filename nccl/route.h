/* nccl/route.h — the decisions of libiris_nccl.so, as plain functions without GPU calls:
 * the routing table and its environment variables, NCCL type/op -> iris type/op, which
 * calls go to iris, the bring-up record every rank sends and the verdict drawn from all of
 * them. Included by nccl/shim.cc and by tests/nccl/route_test.cc (CPU unit tests).
 *
 * The rule every decision here keeps (it is what keeps ranks out of deadlock): a rank
 * may send a call to iris only if every other rank sends the same call to iris. So a
 * per-call decision depends only on values that NCCL already requires equal on every
 * rank and that a well-formed call has valid everywhere: the collective, count, type, op,
 * the communicator (its world size and its routing table, agreed at bring-up) — never on
 * buffer addresses (heap or not, NULL or not), streams, timing, nor on a value one rank
 * may get wrong alone: a broadcast's root (a root outside [0, world) on one rank routes as
 * a valid one; iris refuses it there and takes part, so the others' call reports a
 * mismatch instead of waiting; nccl/shim.cc, iris_nccl_collective). The per-comm
 * verdict (iris context or not) is drawn from every rank's record, gathered over the real
 * communicator, by the same function on every rank, so it is the same everywhere. */
#ifndef IRIS_NCCL_ROUTE_H
#define IRIS_NCCL_ROUTE_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../iris_collectives.h"

/* the collectives iris may serve, in the order of the table */
enum { IRIS_NCCL_AR = 0, IRIS_NCCL_AG, IRIS_NCCL_RS, IRIS_NCCL_BC, IRIS_NCCL_A2A, IRIS_NCCL_KINDS };
static const char *const iris_nccl_kind_names[IRIS_NCCL_KINDS] = {"allreduce", "allgather", "reducescatter", "broadcast", "alltoall"};
/* what the table's byte count measures, per collective */
static const char *const iris_nccl_kind_measure[IRIS_NCCL_KINDS] = {"buffer", "output", "input", "buffer", "send buffer"};

/* The routing table: a call goes to iris when its bytes (as measured above) are at most
 * max_bytes[kind]; 0 sends every call of that kind to NCCL. Defaults: where iris beat
 * NCCL with buffers off the heap (staged) in make bench-guard on 4 H100s; all-to-all to
 * 1 MiB, where nccl-tests through the shim on 2 H200s ran 1.7-2.7x NCCL (0.97x at 2 MiB).
 * At 2 ranks (iris_nccl_table_for_world) broadcast and all-to-all to 4 MiB: nccl-tests
 * through the shim on 2 H200s, three runs, 2 / 4 MiB: broadcast 17.5 / 23.0 us against
 * 19.7 / 25.7, all-to-all 11.3 / 19.2 against 15.9 / 21.2 (the one-shot to 1 MB per peer
 * off the heap); the largest limit, and so the staging area, stays 4 MiB. */
typedef struct iris_nccl_table {
  unsigned long long max_bytes[IRIS_NCCL_KINDS];
  unsigned set; /* bit k: max_bytes[k] came from IRIS_NCCL_MAX_BYTES (no default by world size) */
} iris_nccl_table_t;
#define IRIS_NCCL_MIB (1ull << 20)
static inline iris_nccl_table_t iris_nccl_default_table(void) {
  iris_nccl_table_t t;
  t.max_bytes[IRIS_NCCL_AR] = 4 * IRIS_NCCL_MIB;
  t.max_bytes[IRIS_NCCL_AG] = 4 * IRIS_NCCL_MIB;
  t.max_bytes[IRIS_NCCL_RS] = 4 * IRIS_NCCL_MIB;
  t.max_bytes[IRIS_NCCL_BC] = 1 * IRIS_NCCL_MIB;
  t.max_bytes[IRIS_NCCL_A2A] = 1 * IRIS_NCCL_MIB;
  t.set = 0;
  return t;
}
/* The table a communicator of `world` ranks proposes at its bring-up: t, with the
 * defaults of that world size where IRIS_NCCL_MAX_BYTES named no size. */
static inline iris_nccl_table_t iris_nccl_table_for_world(const iris_nccl_table_t *t, int world) {
  iris_nccl_table_t w = *t;
  if (world == 2) {
    if (!(t->set & (1u << IRIS_NCCL_BC))) w.max_bytes[IRIS_NCCL_BC] = 4 * IRIS_NCCL_MIB;
    if (!(t->set & (1u << IRIS_NCCL_A2A))) w.max_bytes[IRIS_NCCL_A2A] = 4 * IRIS_NCCL_MIB;
  }
  return w;
}

/* "4096", "64K", "4M", "1G", "2MiB", "512KB": bytes (K/M/G/T are powers of 1024). Returns
 * 0 on success, -1 on anything else (empty, sign, junk, overflow). */
static inline int iris_nccl_parse_size(const char *s, unsigned long long *out) {
  unsigned long long v = 0, mul = 1;
  const char *p = s;
  if (!s || !*s) return -1;
  while (*p >= '0' && *p <= '9') {
    if (v > (~0ull - 9) / 10) return -1;
    v = v * 10 + (unsigned long long)(*p++ - '0');
  }
  if (p == s) return -1;
  switch (*p) {
    case 'k': case 'K': mul = 1ull << 10; p++; break;
    case 'm': case 'M': mul = 1ull << 20; p++; break;
    case 'g': case 'G': mul = 1ull << 30; p++; break;
    case 't': case 'T': mul = 1ull << 40; p++; break;
    default: break;
  }
  if (mul > 1 && (*p == 'i' || *p == 'I')) p++;
  if (*p == 'b' || *p == 'B') p++;
  if (*p) return -1;
  if (v && mul > ~0ull / v) return -1;
  *out = v * mul;
  return 0;
}

/* A switch or level of the shim's environment (IRIS_NCCL_DISABLE, _GROUPS: 0 or 1;
 * IRIS_NCCL_DEBUG: 0 to 2): NULL (unset) leaves *out as it is; a decimal 0 .. max sets
 * it; anything else (empty, a sign, a space, a word such as "off", a larger number)
 * returns -1 and leaves *out: set but empty is an error, as for every IRIS_* variable. */
static inline int iris_nccl_parse_level(const char *s, int max, int *out) {
  int v = 0;
  const char *p = s;
  if (!s) return 0;
  while (*p >= '0' && *p <= '9') {
    v = v * 10 + (*p++ - '0');
    if (v > max) return -1;
  }
  if (p == s || *p) return -1;
  *out = v;
  return 0;
}

/* IRIS_NCCL_MAX_BYTES: one size for every collective ("8M"), or a comma list of
 * name=size ("allreduce=8M,broadcast=0,alltoall=64K"; names as iris_nccl_kind_names,
 * unnamed kinds keep their default). NULL: the defaults. Returns 0, or -1 with why filled
 * in (empty included; the table is then the defaults). */
static inline int iris_nccl_parse_table(const char *env, iris_nccl_table_t *t, char *why, size_t why_len) {
  char buf[512], *item, *save = NULL;
  unsigned long long v;
  int k;
  *t = iris_nccl_default_table();
  if (!env) return 0;
  if (!*env) {
    snprintf(why, why_len, "IRIS_NCCL_MAX_BYTES is set but empty; unset it for the defaults, or give a size (e.g. 4M) or a list (allreduce=4M,broadcast=1M)");
    return -1;
  }
  if (!strchr(env, '=')) {
    if (iris_nccl_parse_size(env, &v) != 0) {
      snprintf(why, why_len, "IRIS_NCCL_MAX_BYTES='%s' is not a size (e.g. 4M) nor a list (allreduce=4M,broadcast=1M)", env);
      return -1;
    }
    for (k = 0; k < IRIS_NCCL_KINDS; k++) t->max_bytes[k] = v;
    t->set = (1u << IRIS_NCCL_KINDS) - 1;
    return 0;
  }
  if (strlen(env) >= sizeof buf) {
    snprintf(why, why_len, "IRIS_NCCL_MAX_BYTES is longer than %zu characters", sizeof buf - 1);
    *t = iris_nccl_default_table();
    return -1;
  }
  strcpy(buf, env);
  for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    int found = -1;
    if (eq) {
      *eq = 0;
      for (k = 0; k < IRIS_NCCL_KINDS; k++)
        if (!strcmp(item, iris_nccl_kind_names[k])) found = k;
    }
    if (!eq || found < 0 || iris_nccl_parse_size(eq + 1, &v) != 0) {
      snprintf(why, why_len, "IRIS_NCCL_MAX_BYTES='%s': '%s%s%s' is not name=size with name one of allreduce, allgather, reducescatter, broadcast, alltoall", env,
               item, eq ? "=" : "", eq ? eq + 1 : "");
      *t = iris_nccl_default_table();
      return -1;
    }
    t->max_bytes[found] = v;
    t->set |= 1u << found;
  }
  return 0;
}

/* Bytes of one element of an NCCL type; 0 for a value outside ncclDataType_t. */
static inline size_t iris_nccl_type_size(ncclDataType_t dt) {
  switch (dt) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}
static inline const char *iris_nccl_type_name(ncclDataType_t dt) {
  static const char *const n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "fp16", "fp32", "fp64", "bf16", "fp8e4m3", "fp8e5m2"};
  return (int)dt >= 0 && (int)dt < (int)(sizeof n / sizeof n[0]) ? n[dt] : "type?";
}
static inline const char *iris_nccl_op_name(ncclRedOp_t op) {
  static const char *const n[] = {"sum", "prod", "max", "min", "avg"};
  return (int)op >= 0 && (int)op < 5 ? n[op] : "premulsum";
}

/* The iris type and op of an NCCL reduction, if iris computes exactly what NCCL defines
 * (the same bits for sums of integers; floating types as iris_collectives.h documents:
 * in rank order, accumulated in fp32 for the narrow types, AVG divides the sum). The
 * integer types iris lacks still add alike as bits: int8 sums as uint8, uint32 as int32,
 * uint64 as int64 (wrapping addition is the same operation); their MIN, MAX and AVG are
 * not. Returns 1 with *t, *o set, or 0 (NCCL serves it): ncclProd, ncclFloat64, a
 * PreMulSum op, a value outside the enums. */
static inline int iris_nccl_map_reduce(ncclDataType_t dt, ncclRedOp_t op, iris_dtype_t *t, iris_redop_t *o) {
  int sum_only = 0;
  switch (op) {
    case ncclSum: *o = IRIS_SUM; break;
    case ncclMin: *o = IRIS_MIN; break;
    case ncclMax: *o = IRIS_MAX; break;
    case ncclAvg: *o = IRIS_AVG; break;
    default: return 0;
  }
  switch (dt) {
    case ncclInt8: *t = IRIS_UINT8; sum_only = 1; break;
    case ncclUint8: *t = IRIS_UINT8; break;
    case ncclInt32: *t = IRIS_INT32; break;
    case ncclUint32: *t = IRIS_INT32; sum_only = 1; break;
    case ncclInt64: *t = IRIS_INT64; break;
    case ncclUint64: *t = IRIS_INT64; sum_only = 1; break;
    case ncclFloat16: *t = IRIS_FLOAT16; break;
    case ncclFloat32: *t = IRIS_FLOAT32; break;
    case ncclBfloat16: *t = IRIS_BFLOAT16; break;
    case ncclFloat8e4m3: *t = IRIS_FLOAT8_E4M3; break;
    case ncclFloat8e5m2: *t = IRIS_FLOAT8_E5M2; break;
    default: return 0;
  }
  return !sum_only || *o == IRIS_SUM;
}

/* The data-moving collectives move bytes: any NCCL type, as the iris type of its size. */
static inline int iris_nccl_map_move(ncclDataType_t dt, iris_dtype_t *t) {
  switch (iris_nccl_type_size(dt)) {
    case 1: *t = IRIS_UINT8; return 1;
    case 2: *t = IRIS_FLOAT16; return 1;
    case 4: *t = IRIS_INT32; return 1;
    case 8: *t = IRIS_INT64; return 1;
    default: return 0;
  }
}

/* Why a call goes where it goes (the debug lines and the counters name these). */
enum {
  IRIS_NCCL_ROUTE_IRIS = 0, /* served by iris */
  IRIS_NCCL_ROUTE_NO_IRIS,  /* the communicator has no iris context (its reason: iris_nccl_stats) */
  IRIS_NCCL_ROUTE_TYPE_OP,  /* a type or op iris does not compute as NCCL does */
  IRIS_NCCL_ROUTE_SIZE,     /* above the table's bytes for this collective */
  IRIS_NCCL_ROUTE_EMPTY,    /* count 0: nothing to move, NCCL returns at once */
  IRIS_NCCL_ROUTE_GROUP,    /* inside ncclGroupStart/End with IRIS_NCCL_GROUPS=0 */
  IRIS_NCCL_ROUTES
};
static const char *const iris_nccl_route_names[IRIS_NCCL_ROUTES] = {"iris", "NCCL (the communicator has no iris context)", "NCCL (type or op)",
                                                                   "NCCL (above the table's size)", "NCCL (count 0)",
                                                                   "NCCL (inside a group, IRIS_NCCL_GROUPS=0)"};

/* The per-call decision (see the rule at the top): only kind, count, type, op, the world
 * size and the agreed table. A broadcast's root takes no part: NCCL requires it equal on
 * every rank, but one rank may pass one outside [0, world) alone, and its route must still
 * be its peers' (iris_nccl_bad_root says what the shim does with it). Sets *t and *o when
 * it returns IRIS_NCCL_ROUTE_IRIS, and *bytes (as the table measures it) always. */
static inline int iris_nccl_route(int kind, const iris_nccl_table_t *table, int world, size_t count, ncclDataType_t dt, ncclRedOp_t op, iris_dtype_t *t,
                                  iris_redop_t *o, unsigned long long *bytes) {
  const size_t es = iris_nccl_type_size(dt);
  const int per_rank = kind == IRIS_NCCL_AG || kind == IRIS_NCCL_RS || kind == IRIS_NCCL_A2A;
  unsigned long long limit = table->max_bytes[kind];
  *bytes = 0;
  *o = IRIS_SUM;
  if (es == 0) return IRIS_NCCL_ROUTE_TYPE_OP;
  if (kind == IRIS_NCCL_AR || kind == IRIS_NCCL_RS) {
    if (!iris_nccl_map_reduce(dt, op, t, o)) return IRIS_NCCL_ROUTE_TYPE_OP;
  } else if (!iris_nccl_map_move(dt, t)) {
    return IRIS_NCCL_ROUTE_TYPE_OP;
  }
  if (count == 0) return IRIS_NCCL_ROUTE_EMPTY;
  if (count > (~0ull >> 8) / es / (unsigned long long)(per_rank ? world : 1)) { /* never near a real buffer */
    *bytes = ~0ull;
    return IRIS_NCCL_ROUTE_SIZE;
  }
  *bytes = (unsigned long long)count * es * (unsigned long long)(per_rank ? world : 1);
  return *bytes <= limit ? IRIS_NCCL_ROUTE_IRIS : IRIS_NCCL_ROUTE_SIZE;
}

/* 1 if a call of this kind names a root outside [0, world) (a broadcast's; the other
 * kinds have none), with why naming the root and the world (ncclGetLastError's text); 0
 * otherwise. Routed to iris, such a call goes to iris all the same, which refuses it
 * (IRIS_ERROR_INVALID_RANK -> ncclInvalidArgument, NCCL's answer for a bad root) and takes
 * part, so the peers whose root is valid see a mismatch at once instead of waiting for a
 * rank that never comes; routed to NCCL, it is forwarded and the real NCCL reports it. */
static inline int iris_nccl_bad_root(int kind, int root, int world, char *why, size_t n) {
  if (kind != IRIS_NCCL_BC || (root >= 0 && root < world)) return 0;
  snprintf(why, n, "root %d is outside [0, %d) (the communicator's %d ranks)", root, world, world);
  return 1;
}

/* ----------------------------------------------------------------- bring-up record == */
/* What each rank sends, over the real communicator, before an iris context is brought
 * up beside it. Fixed size, plain bytes. */
#define IRIS_NCCL_RECORD_MAGIC 0x49524e43u /* "IRNC" */
#define IRIS_NCCL_RECORD_VERSION 3u
typedef struct iris_nccl_record {
  uint32_t magic, version;
  int32_t want;                /* 1: this rank can bring iris up; 0: why says why not */
  int32_t cc_major;            /* the GPU's compute capability */
  int32_t sms;                 /* its SM count: iris's grids (part of each call's signature) follow it */
  int32_t max_ctas;            /* the CTA cap this rank was given (ncclConfig_t.maxCTAs, else NCCL_MAX_CTAS), 0: none */
  uint64_t heap_bytes;         /* the iris heap this rank would ask for */
  uint64_t proc;               /* this process (its pid and a random word): ranks with the same one share a process */
  uint64_t nonce;              /* a random word of this bring-up: rank 0's names the communicator in every process */
  uint64_t max_bytes[IRIS_NCCL_KINDS]; /* its routing table */
  char staging[32];            /* IRIS_COLL_STAGING as iris will read it */
  char host[160];              /* IRIS_HOST_ID, else hostname + boot id (as iris groups nodes) */
  char bus[32];                /* the GPU's PCI bus id */
  char why[160];
} iris_nccl_record_t;

/* How many of the communicator's ranks live in the process `proc` of rank `me`'s host (the
 * records of every rank): several when a process drives several GPUs (threads,
 * ncclCommInitAll); their teardowns must then meet in helper threads. */
static inline int iris_nccl_ranks_here(const iris_nccl_record_t *r, int world, int me) {
  int i, n = 0;
  for (i = 0; i < world; i++) n += r[i].proc == r[me].proc && !strcmp(r[i].host, r[me].host);
  return n;
}

/* An IRIS_* variable of iris's own, read by iris's rule (docs/options.md): 0 unset; 1 set
 * and not empty (*value); -1 set but empty, with why naming it (never the default). This
 * is internal/core/util.h's iris_detail_env, replicated: route.h is compiled without
 * iris's implementation (nccl/shim.cc links it from nccl/iris_impl.cu, where
 * iris_detail_env is a static function; tests/nccl/route_test.cc compiles route.h alone).
 * The shim's own IRIS_NCCL_* variables follow the same rule (iris_nccl_parse_level,
 * iris_nccl_parse_table, iris_nccl_read_options in shim.cc). */
static inline int iris_nccl_env_strict(const char *name, const char **value, char *why, size_t n) {
  const char *s = getenv(name);
  if (!s) return 0;
  if (!*s) {
    snprintf(why, n, "%s is set but empty; unset it for the default, or give a value", name);
    return -1;
  }
  *value = s;
  return 1;
}

/* This host's identity as iris groups ranks into nodes: IRIS_HOST_ID when set, else
 * "<hostname>/<boot id>". Returns 0, or -1 when IRIS_HOST_ID is set but empty (why names
 * it; iris_init refuses it too, so the shim refuses it before the bring-up: its record
 * would otherwise take the empty value for unset). */
static inline int iris_nccl_host_identity(char *out, size_t n, char *why, size_t why_n) {
  const char *id = NULL;
  char host[64] = "", boot[64] = "";
  FILE *f;
  const int got = iris_nccl_env_strict("IRIS_HOST_ID", &id, why, why_n);
  if (got < 0) return -1;
  if (got > 0) {
    snprintf(out, n, "id:%s", id);
    return 0;
  }
  gethostname(host, sizeof host - 1);
  if ((f = fopen("/proc/sys/kernel/random/boot_id", "r")) != NULL) {
    if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
    fclose(f);
    boot[strcspn(boot, "\n")] = 0;
  }
  snprintf(out, n, "%s/%s", host, boot);
  return 0;
}

/* The verdict, the same on every rank because every rank runs it on the same records:
 * 1 if iris can serve this communicator, else 0 with the first reason in why. */
static inline int iris_nccl_decide(const iris_nccl_record_t *r, int world, char *why, size_t n) {
  int i, j;
  if (world < 2) return snprintf(why, n, "a communicator of one rank"), 0;
  if (world > IRIS_MAX_RANKS) return snprintf(why, n, "%d ranks: iris maps at most %d (IRIS_MAX_RANKS)", world, IRIS_MAX_RANKS), 0;
  for (i = 0; i < world; i++)
    if (r[i].magic != IRIS_NCCL_RECORD_MAGIC || r[i].version != IRIS_NCCL_RECORD_VERSION)
      return snprintf(why, n, "rank %d runs another version of the shim (or none)", i), 0;
  for (i = 0; i < world; i++)
    if (!r[i].want) return snprintf(why, n, "rank %d: %.*s", i, (int)sizeof r[i].why, r[i].why), 0;
  for (i = 1; i < world; i++)
    if (strncmp(r[i].host, r[0].host, sizeof r[0].host) != 0)
      return snprintf(why, n, "ranks 0 and %d are on different hosts (%.60s, %.60s): the iris heap is mapped within one node", i, r[0].host, r[i].host), 0;
  for (i = 0; i < world; i++)
    for (j = i + 1; j < world; j++)
      if (!strncmp(r[i].bus, r[j].bus, sizeof r[i].bus))
        return snprintf(why, n, "ranks %d and %d share the GPU %.32s: the shim serves one GPU per rank", i, j, r[i].bus), 0;
  for (i = 0; i < world; i++)
    if (r[i].cc_major < 9) return snprintf(why, n, "rank %d's GPU has compute capability %d.x: the shim's iris kernels are built for sm_90 and newer", i, r[i].cc_major), 0;
  for (i = 1; i < world; i++)
    if (r[i].sms != r[0].sms)
      return snprintf(why, n, "ranks 0 and %d have GPUs of %d and %d SMs: iris's calls would launch different grids", i, r[0].sms, r[i].sms), 0;
  for (i = 1; i < world; i++) {
    if (r[i].heap_bytes != r[0].heap_bytes || strncmp(r[i].staging, r[0].staging, sizeof r[0].staging) != 0 ||
        memcmp(r[i].max_bytes, r[0].max_bytes, sizeof r[0].max_bytes) != 0)
      return snprintf(why, n, "ranks 0 and %d differ in IRIS_NCCL_HEAP, IRIS_NCCL_MAX_BYTES or IRIS_COLL_STAGING: set them alike on every rank", i), 0;
  }
  return 1;
}

/* The CTAs per call of iris's kernels on this communicator (iris_coll_opts_t.ctas), the
 * same on every rank (the grid is part of each call's signature): the smallest cap any
 * rank was given (a rank's maxCTAs or NCCL_MAX_CTAS, which NCCL honours for its own
 * kernels: SMs left to the compute beside them), at most IRIS_COLL_MAX_CTAS; 0 when
 * no rank was given one (iris's own choice, IRIS_COLL_CTAS included). */
static inline int iris_nccl_agreed_ctas(const iris_nccl_record_t *r, int world) {
  int i, m = 0;
  for (i = 0; i < world; i++)
    if (r[i].max_ctas > 0 && (m == 0 || r[i].max_ctas < m)) m = r[i].max_ctas;
  return m > IRIS_COLL_MAX_CTAS ? IRIS_COLL_MAX_CTAS : m;
}
/* A rank's cap from its configuration (NULL, or a struct older than maxCTAs: none) or
 * NCCL_MAX_CTAS (what NCCL reads when the configuration leaves it undefined); 0: none,
 * and 0 for a value NCCL itself would refuse (not a positive integer). */
static inline int iris_nccl_config_ctas(const ncclConfig_t *config) {
  const char *v;
  char *end = NULL;
  long n;
  if (config && config->size >= offsetof(ncclConfig_t, maxCTAs) + sizeof(int) && config->maxCTAs != NCCL_CONFIG_UNDEF_INT)
    return config->maxCTAs > 0 ? config->maxCTAs : 0;
  if ((v = getenv("NCCL_MAX_CTAS")) == NULL || !*v) return 0;
  n = strtol(v, &end, 10);
  return end && *end == 0 && n > 0 && n < (1L << 30) ? (int)n : 0;
}

/* The heap the shim asks for when IRIS_NCCL_HEAP is not set: what iris_collectives_setup
 * allocates (6.5 MiB per rank of LL and armed slots, rounded to 7, and 2 MiB more per
 * rank at 2 ranks, whose one-shot slots hold twice the payload; 32 MiB of all-reduce
 * scratch; two staging areas) and 8 MiB to spare, rounded up to 2 MiB. */
static inline unsigned long long iris_nccl_default_heap(int world, unsigned long long staging) {
  unsigned long long b = (world == 2 ? 9ull : 7ull) * IRIS_NCCL_MIB * (unsigned long long)world + 32ull * IRIS_NCCL_MIB + 2ull * staging + 8ull * IRIS_NCCL_MIB;
  return (b + 2 * IRIS_NCCL_MIB - 1) & ~(2 * IRIS_NCCL_MIB - 1);
}
/* The staging area (each of two) the shim has iris create when IRIS_COLL_STAGING is not
 * set: the largest message the table sends to iris, rounded up to 1 MiB, between 2 and
 * 64 MiB (iris's own default is 64 MiB; calls above the area are staged in chunks). */
static inline unsigned long long iris_nccl_staging_bytes(const iris_nccl_table_t *t) {
  unsigned long long m = 0;
  int k;
  for (k = 0; k < IRIS_NCCL_KINDS; k++)
    if (t->max_bytes[k] > m) m = t->max_bytes[k];
  m = (m + IRIS_NCCL_MIB - 1) & ~(IRIS_NCCL_MIB - 1);
  if (m < 2 * IRIS_NCCL_MIB) m = 2 * IRIS_NCCL_MIB;
  if (m > 64 * IRIS_NCCL_MIB) m = 64 * IRIS_NCCL_MIB;
  return m;
}

/* ----------------------------------------------------------------- memory windows == */
/* ncclMemAlloc may hand out blocks of an iris heap; a call runs zero-copy (iris's
 * bandwidth kernels read and write the user's buffers in the peers' heaps) only on
 * buffers in a window every rank registered with its buffer at the same heap offset, so
 * that the peers' copies are where iris looks for them. ncclCommWindowRegister is
 * collective in NCCL (2.27+): every rank sends this record over the real communicator
 * and all draw the same verdict (iris_nccl_win_decide). ncclCommRegister is local in
 * NCCL (no communication; torch calls it per allocator segment, on each rank on its own
 * schedule), so a buffer it registers cannot be verified and stays staged. */
#define IRIS_NCCL_WIN_MAGIC 0x49524e57u /* "IRNW" */
typedef struct iris_nccl_win_record {
  uint32_t magic;   /* IRIS_NCCL_WIN_MAGIC */
  int32_t shim;     /* 1: the buffer is memory the shim gave out (an iris heap, cudaMalloc'ed),
                       which the real NCCL's symmetric registration cannot take */
  int32_t in_heap;  /* 1: the whole buffer lies in this communicator's iris heap */
  int32_t pad;
  uint64_t offset;  /* its offset in that heap (in_heap) */
  uint64_t bytes;   /* its size */
} iris_nccl_win_record_t;
static_assert(sizeof(iris_nccl_win_record_t) == 32, "the window record is sent as 32 bytes");

/* The verdict from every rank's record, the same on every rank. *serve: 1 if the shim
 * keeps the window itself on every rank (some rank's buffer is the shim's memory: the
 * real NCCL would refuse that rank's part of its collective registration, and the
 * others would wait for it), 0 if every rank forwards it to the real NCCL. Returns 1
 * (zero-copy) if every rank's buffer lies in the heap at the same offset with the same
 * size, else 0 (calls on it are staged). */
static inline int iris_nccl_win_decide(const iris_nccl_win_record_t *r, int world, int *serve) {
  int i, zc = world >= 1;
  *serve = 0;
  for (i = 0; i < world; i++) {
    if (r[i].magic != IRIS_NCCL_WIN_MAGIC) { /* cannot happen (one shim); serve, never zero-copy */
      *serve = 1;
      return 0;
    }
    if (r[i].shim || r[i].in_heap) *serve = 1;
    if (!r[i].in_heap || r[i].offset != r[0].offset || r[i].bytes != r[0].bytes || r[i].bytes == 0) zc = 0;
  }
  return zc;
}

/* A window the shim keeps (the handle it returns is this record's address). */
typedef struct iris_nccl_window {
  const char *base;               /* the buffer this rank registered */
  size_t bytes;
  int zero_copy;                  /* every rank's buffer at the same heap offset (the verdict) */
  void *owner;                    /* the communicator's record */
  struct iris_nccl_window *next;  /* the communicator's list */
} iris_nccl_window_t;

/* The bytes a call reads from send and writes to recv, as NCCL sizes them. */
static inline void iris_nccl_extents(int kind, size_t count, size_t es, int world, size_t *send_bytes, size_t *recv_bytes) {
  const size_t one = count * es, all = one * (size_t)world;
  *send_bytes = kind == IRIS_NCCL_RS || kind == IRIS_NCCL_A2A ? all : one;
  *recv_bytes = kind == IRIS_NCCL_AG || kind == IRIS_NCCL_A2A ? all : one;
}
/* 1 if [p, p + bytes) lies in one zero-copy window of the list. */
static inline int iris_nccl_in_window(const iris_nccl_window_t *w, const void *p, size_t bytes) {
  const char *q = (const char *)p;
  for (; w; w = w->next)
    if (w->zero_copy && q >= w->base && (size_t)(q - w->base) <= w->bytes && bytes <= w->bytes - (size_t)(q - w->base)) return 1;
  return 0;
}
/* Whether a call iris serves runs zero-copy on this rank: its buffers lie in zero-copy
 * windows of the communicator (broadcast: recv only; the shim first copies the root's
 * send into its recv, so every rank passes recv as both). Otherwise the shim passes
 * IRIS_COLL_STAGE. Ranks may disagree only if they pass windowed buffers on some ranks
 * and others elsewhere, or at different offsets in the window, which NCCL leaves
 * undefined for registered buffers; iris's call signature (it hashes the heap offsets)
 * then differs, so no rank writes a user buffer and the call reports a mismatch. */
static inline int iris_nccl_zero_copy(const iris_nccl_window_t *w, int kind, const void *send, const void *recv, size_t count, size_t es, int world) {
  size_t sb, rb;
  if (!w || count == 0) return 0;
  iris_nccl_extents(kind, count, es, world, &sb, &rb);
  if (!iris_nccl_in_window(w, recv, rb)) return 0;
  return kind == IRIS_NCCL_BC || iris_nccl_in_window(w, send, sb);
}

/* Whether a new communicator is blocking as the shim sees it (only blocking ones get an
 * iris context brought up at creation: the bring-up is a blocking exchange over it). Its
 * own: config_blocking (NCCL_CONFIG_UNDEF_INT: unset), else `inherit` (a split without a
 * config inherits the parent's; -1: nothing to inherit), else NCCL_COMM_BLOCKING (`env`,
 * NULL or "": unset), else blocking. A split (`parent` 1 or 0; -1: no parent, or one the
 * shim does not know) runs under its parent's blocking: under a non-blocking parent,
 * ncclCommSplit may return before the child is ready (ncclInProgress), and an exchange on
 * it then is not NCCL's semantics, so such a child counts as non-blocking whatever its own
 * config says. Every rank of a split has the same parent, so every rank decides alike. */
static inline int iris_nccl_is_blocking(int config_blocking, int inherit, const char *env, int parent) {
  int own;
  if (config_blocking != NCCL_CONFIG_UNDEF_INT) own = config_blocking != 0;
  else if (inherit >= 0) own = inherit != 0;
  else if (env && *env) own = atoi(env) != 0;
  else own = 1;
  return own && parent != 0;
}

/* iris_status_t -> ncclResult_t, as NCCL reports the same kind of failure. */
static inline ncclResult_t iris_nccl_result(iris_status_t st) {
  switch (st) {
    case IRIS_SUCCESS: return ncclSuccess;
    case IRIS_ERROR_INVALID_ARGUMENT: case IRIS_ERROR_INVALID_RANK: case IRIS_ERROR_NOT_IN_HEAP: return ncclInvalidArgument;
    case IRIS_ERROR_MISMATCH: case IRIS_ERROR_UNSUPPORTED: case IRIS_ERROR_DIFFERENT_HOST: case IRIS_ERROR_ABORTED: return ncclInvalidUsage;
    case IRIS_ERROR_GPU: return ncclUnhandledCudaError;
    case IRIS_ERROR_TIMEOUT: case IRIS_ERROR_PEER_FAILED: case IRIS_ERROR_RANK_FAILED: return ncclRemoteError;
    case IRIS_ERROR_OUT_OF_MEMORY: case IRIS_ERROR_SYSTEM: case IRIS_ERROR_PERMISSION: case IRIS_ERROR_BOOTSTRAP: case IRIS_ERROR_IN_USE: return ncclSystemError;
    default: return ncclInternalError;
  }
}

/* ncclCommGetAsyncError's answer for a communicator with an iris context: NCCL's own
 * (any but ncclSuccess) first; else the error iris reported before (`latched`, 0: none):
 * as NCCL's async error, it stays until the communicator is aborted or destroyed; else
 * iris's status now (a wait that ran out, a dead peer, a mismatch), which *latch asks the
 * caller to keep from then on. iris's ABORTED and INVALID_ARGUMENT (a context being torn
 * down by ncclCommAbort or a teardown) are none of the program's errors. */
static inline ncclResult_t iris_nccl_async_answer(ncclResult_t nccl, int latched, iris_status_t now, int *latch) {
  *latch = 0;
  if (nccl != ncclSuccess) return nccl;
  if (latched) return (ncclResult_t)latched;
  if (now == IRIS_SUCCESS || now == IRIS_ERROR_ABORTED || now == IRIS_ERROR_INVALID_ARGUMENT) return ncclSuccess;
  *latch = 1;
  return iris_nccl_result(now);
}

#endif /* IRIS_NCCL_ROUTE_H */
