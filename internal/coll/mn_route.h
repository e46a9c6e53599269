/* internal/coll/mn_route.h: which way a collective of a multi-node world goes: the
 * hierarchical composition (internal/coll/multinode.h: iris kernels in the node, NCCL
 * rails between the nodes) or the whole call handed to NCCL's communicator over every
 * rank. A table of byte ranges per collective (defaults below, IRIS_MN_NCCL_WHOLE over
 * them), its parser, and the decision. Host, C and C++; pure functions of their
 * arguments apart from the one environment read (tests/host/mn_route.c). Under
 * IRIS_IMPLEMENTATION. Part of iris_collectives.h; not a public header. */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_MN_ROUTE_H
#define IRIS_INTERNAL_COLL_MN_ROUTE_H
#include "../core/sys.h"
#include "../core/status.h"
#include "../core/util.h"

/* The collectives, in the order of IRIS_COLL_AR .. IRIS_COLL_BC (multinode.h checks it),
 * and the byte ranges one of them may list in IRIS_MN_NCCL_WHOLE. */
#define IRIS_COLL_MN_KINDS 5
#define IRIS_COLL_MN_RANGES 4
static const char *const iris_coll_mn_kind_names[IRIS_COLL_MN_KINDS] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"};

/* The two routes of a call. */
typedef enum iris_coll_mn_route {
  IRIS_COLL_MN_HIER = 0, /* the composition: node (iris), rails (NCCL), node (iris) */
  IRIS_COLL_MN_NCCL = 1  /* the whole call to NCCL's communicator over every rank */
} iris_coll_mn_route_t;
static inline const char *iris_coll_mn_route_name(iris_coll_mn_route_t r) { return r == IRIS_COLL_MN_NCCL ? "nccl" : "hier"; }

/* Defaults: a call goes whole to NCCL when the bytes each rank sends (all-reduce,
 * all-gather, broadcast: count x type size; reduce-scatter, all-to-all: world x count x
 * type size) lie in [MIN, MAX] (MIN > MAX: never). Figures: bench_multinode 2 2 64M, 2
 * virtual nodes x 2 H100s, NCCL sockets on loopback: the sizes where the composition was
 * slower than NCCL alone over the same ranks. Every rank must use the same values. */
#ifndef IRIS_COLL_MN_NCCL_AR_MIN
#define IRIS_COLL_MN_NCCL_AR_MIN ((size_t)2 << 10) /* 4 to 256 KB lost (566 vs 99 us at 64 KB); 1 KB did not */
#endif
#ifndef IRIS_COLL_MN_NCCL_AR_MAX
#define IRIS_COLL_MN_NCCL_AR_MAX ((size_t)256 << 10) /* above it the reduce-scatter composition (IRIS_COLL_MN_ONESHOT_MAX) */
#endif
#ifndef IRIS_COLL_MN_NCCL_AG_MIN
#define IRIS_COLL_MN_NCCL_AG_MIN ((size_t)16 << 20) /* 16 to 64 MB: 0.73-0.81x */
#endif
#ifndef IRIS_COLL_MN_NCCL_AG_MAX
#define IRIS_COLL_MN_NCCL_AG_MAX SIZE_MAX
#endif
#ifndef IRIS_COLL_MN_NCCL_RS_MIN
#define IRIS_COLL_MN_NCCL_RS_MIN ((size_t)0) /* 16 to 64 MB 0.61-0.64x, and 0.63-0.94x at several smaller sizes */
#endif
#ifndef IRIS_COLL_MN_NCCL_RS_MAX
#define IRIS_COLL_MN_NCCL_RS_MAX SIZE_MAX
#endif
#ifndef IRIS_COLL_MN_NCCL_A2A_MIN
#define IRIS_COLL_MN_NCCL_A2A_MIN SIZE_MAX /* not measured yet: the composition */
#endif
#ifndef IRIS_COLL_MN_NCCL_A2A_MAX
#define IRIS_COLL_MN_NCCL_A2A_MAX ((size_t)0)
#endif
#ifndef IRIS_COLL_MN_NCCL_BC_MIN
#define IRIS_COLL_MN_NCCL_BC_MIN SIZE_MAX /* not measured yet: the composition */
#endif
#ifndef IRIS_COLL_MN_NCCL_BC_MAX
#define IRIS_COLL_MN_NCCL_BC_MAX ((size_t)0)
#endif

/* The table: for collective k, the bytes in [lo[k][i], hi[k][i]] for i < n[k] go to NCCL
 * whole. Unused entries are zero, so equal tables are equal bytes (hashed at setup: the
 * ranks compare their tables, a call must take one route on every rank). */
typedef struct iris_coll_mn_table {
  uint64_t lo[IRIS_COLL_MN_KINDS][IRIS_COLL_MN_RANGES];
  uint64_t hi[IRIS_COLL_MN_KINDS][IRIS_COLL_MN_RANGES];
  uint32_t n[IRIS_COLL_MN_KINDS];
  uint32_t from_env; /* 1: IRIS_MN_NCCL_WHOLE set it (else the defaults) */
} iris_coll_mn_table_t;

/* Every collective at every size to NCCL (all = 1), or to the composition (all = 0). */
static inline void iris_coll_mn_table_all(iris_coll_mn_table_t *t, int all) {
  int k;
  memset(t, 0, sizeof *t);
  for (k = 0; all && k < IRIS_COLL_MN_KINDS; k++) {
    t->hi[k][0] = UINT64_MAX;
    t->n[k] = 1;
  }
}
/* The defaults above. */
static inline void iris_coll_mn_table_defaults(iris_coll_mn_table_t *t) {
  const uint64_t lo[IRIS_COLL_MN_KINDS] = {IRIS_COLL_MN_NCCL_AR_MIN, IRIS_COLL_MN_NCCL_AG_MIN, IRIS_COLL_MN_NCCL_RS_MIN, IRIS_COLL_MN_NCCL_A2A_MIN,
                                           IRIS_COLL_MN_NCCL_BC_MIN};
  const uint64_t hi[IRIS_COLL_MN_KINDS] = {IRIS_COLL_MN_NCCL_AR_MAX, IRIS_COLL_MN_NCCL_AG_MAX, IRIS_COLL_MN_NCCL_RS_MAX, IRIS_COLL_MN_NCCL_A2A_MAX,
                                           IRIS_COLL_MN_NCCL_BC_MAX};
  int k;
  memset(t, 0, sizeof *t);
  for (k = 0; k < IRIS_COLL_MN_KINDS; k++)
    if (lo[k] <= hi[k]) {
      t->lo[k][0] = lo[k];
      t->hi[k][0] = hi[k] == (uint64_t)SIZE_MAX ? UINT64_MAX : hi[k];
      t->n[k] = 1;
    }
}

/* The bytes of a call the table speaks of (saturating). */
static inline uint64_t iris_coll_mn_bytes(int kind, size_t count, size_t es, int world) {
  const uint64_t per = kind == 2 /* reduce-scatter */ || kind == 3 /* all-to-all */ ? (uint64_t)(world > 0 ? world : 1) : 1u;
  if (es && count > UINT64_MAX / es / per) return UINT64_MAX;
  return (uint64_t)count * es * per;
}
/* The route of a call: NCCL when the table lists its bytes and a world communicator
 * exists (have_world), else the composition. Its arguments must be equal on every rank
 * (the table is agreed at setup, the world communicator at bring-up, the rest is the
 * call's), never an address, a time or a rank's own state: ranks that took different
 * routes would wait on each other for ever. */
static inline iris_coll_mn_route_t iris_coll_mn_decide(const iris_coll_mn_table_t *t, int have_world, int kind, size_t count, size_t es, int world) {
  uint32_t i;
  uint64_t b;
  if (!have_world || kind < 0 || kind >= IRIS_COLL_MN_KINDS) return IRIS_COLL_MN_HIER;
  b = iris_coll_mn_bytes(kind, count, es, world);
  for (i = 0; i < t->n[kind] && i < IRIS_COLL_MN_RANGES; i++)
    if (b >= t->lo[kind][i] && b <= t->hi[kind][i]) return IRIS_COLL_MN_NCCL;
  return IRIS_COLL_MN_HIER;
}
/* A hash of the table (FNV-1a over its words), compared across ranks at setup. */
static inline uint64_t iris_coll_mn_table_hash(const iris_coll_mn_table_t *t) {
  uint64_t h = 14695981039346656037ULL;
  int k, i;
  for (k = 0; k < IRIS_COLL_MN_KINDS; k++) {
    h = iris_detail_fnv(h, t->n[k]);
    for (i = 0; i < IRIS_COLL_MN_RANGES; i++) h = iris_detail_fnv(iris_detail_fnv(h, t->lo[k][i]), t->hi[k][i]);
  }
  return h;
}

#define IRIS_COLL_MN_WHOLE_HELP                                                                                                                         \
  "give all, none (or 0), or a comma list of COLLECTIVE=RANGES (all_reduce, all_gather, reduce_scatter, all_to_all, broadcast; RANGES: all, none, or " \
  "up to 4 byte ranges LO-HI joined by ':', HI left out for no bound, e.g. all_reduce=0-256K:64M-,reduce_scatter=all)"
/* One size of a range: iris_detail_parse_size_var's syntax; errors name the whole value. */
static inline iris_status_t iris_coll_mn_parse_size(const char *v, const char *s, size_t n, uint64_t *out) {
  char buf[32];
  size_t x = 0;
  if (n == 0 || n >= sizeof buf) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': '%.*s' is not a size; %s", v, (int)(n < 31 ? n : 31), s, IRIS_COLL_MN_WHOLE_HELP);
  memcpy(buf, s, n);
  buf[n] = 0;
  if (iris_detail_parse_size_var("IRIS_MN_NCCL_WHOLE", buf, &x) != IRIS_SUCCESS) /* its detail tells a size too large from one malformed */
    return strstr(iris_detail_errbuf, "overflows")
               ? iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': '%s' overflows a size (at most %llu bytes); %s", v, buf,
                                  (unsigned long long)SIZE_MAX, IRIS_COLL_MN_WHOLE_HELP)
               : iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': '%s' is not a size (digits, then optionally K, M, G or T); %s", v,
                                  buf, IRIS_COLL_MN_WHOLE_HELP);
  *out = (uint64_t)x;
  return IRIS_SUCCESS;
}
/* Parses IRIS_MN_NCCL_WHOLE's value v into *t, which holds the defaults on entry: "all",
 * "none" or "0" set every collective; otherwise each COLLECTIVE=RANGES item replaces
 * that collective's ranges (the others keep theirs), each collective at most once, its
 * ranges apart (two that share a size are refused, naming both). Sets
 * t->from_env. IRIS_ERROR_INVALID_ARGUMENT naming the value and what is wrong (*t then
 * undefined). */
static inline iris_status_t iris_coll_mn_parse(const char *v, iris_coll_mn_table_t *t) {
  const char *p = v;
  uint32_t named = 0;
  if (!v || !*v) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE is set but empty; unset it for the defaults, or %s", IRIS_COLL_MN_WHOLE_HELP);
  if (!strcmp(v, "all") || !strcmp(v, "none") || !strcmp(v, "0")) {
    iris_coll_mn_table_all(t, !strcmp(v, "all"));
    t->from_env = 1;
    return IRIS_SUCCESS;
  }
  for (;;) { /* one COLLECTIVE=RANGES item */
    const char *eq = strchr(p, '='), *end = strchr(p, ',');
    size_t klen;
    int k = -1, j;
    if (!end) end = p + strlen(p);
    if (!eq || eq > end)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': '%.*s' has no '='; %s", v, (int)(end - p < 40 ? end - p : 40), p,
                              IRIS_COLL_MN_WHOLE_HELP);
    klen = (size_t)(eq - p);
    for (j = 0; j < IRIS_COLL_MN_KINDS; j++)
      if (strlen(iris_coll_mn_kind_names[j]) == klen && !strncmp(p, iris_coll_mn_kind_names[j], klen)) k = j;
    if (k < 0)
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': '%.*s' is not a collective; %s", v, (int)(klen < 40 ? klen : 40), p,
                              IRIS_COLL_MN_WHOLE_HELP);
    if (named & (1u << k))
      return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': %s is named twice; %s", v, iris_coll_mn_kind_names[k], IRIS_COLL_MN_WHOLE_HELP);
    named |= 1u << k;
    for (j = 0; j < IRIS_COLL_MN_RANGES; j++) t->lo[k][j] = t->hi[k][j] = 0;
    t->n[k] = 0;
    p = eq + 1;
    if ((size_t)(end - p) == 3 && !strncmp(p, "all", 3)) {
      t->hi[k][0] = UINT64_MAX;
      t->n[k] = 1;
    } else if (!((size_t)(end - p) == 4 && !strncmp(p, "none", 4))) {
      const char *text[IRIS_COLL_MN_RANGES]; /* each range's text, for a message naming two that overlap */
      int len[IRIS_COLL_MN_RANGES];
      for (;;) { /* one LO-HI range */
        const char *colon = (const char *)memchr(p, ':', (size_t)(end - p)), *stop = colon ? colon : end;
        const char *dash = (const char *)memchr(p, '-', (size_t)(stop - p));
        uint64_t lo = 0, hi = UINT64_MAX;
        iris_status_t st;
        if (!dash)
          return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': %s: '%.*s' is not a range LO-HI; %s", v, iris_coll_mn_kind_names[k],
                                  (int)(stop - p < 40 ? stop - p : 40), p, IRIS_COLL_MN_WHOLE_HELP);
        if (t->n[k] == IRIS_COLL_MN_RANGES)
          return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': %s has more than %d ranges; %s", v, iris_coll_mn_kind_names[k],
                                  IRIS_COLL_MN_RANGES, IRIS_COLL_MN_WHOLE_HELP);
        if ((st = iris_coll_mn_parse_size(v, p, (size_t)(dash - p), &lo)) != IRIS_SUCCESS) return st;
        if (dash + 1 < stop && (st = iris_coll_mn_parse_size(v, dash + 1, (size_t)(stop - dash - 1), &hi)) != IRIS_SUCCESS) return st;
        if (lo > hi)
          return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': %s: the range '%.*s' ends before it starts; %s", v,
                                  iris_coll_mn_kind_names[k], (int)(stop - p < 40 ? stop - p : 40), p, IRIS_COLL_MN_WHOLE_HELP);
        for (j = 0; j < (int)t->n[k]; j++) /* a size listed twice: refused, as a collective named twice (options.md: no value read two ways) */
          if (lo <= t->hi[k][j] && t->lo[k][j] <= hi)
            return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE='%.160s': %s: the ranges '%.*s' and '%.*s' overlap (bounds are inclusive); %s", v,
                                    iris_coll_mn_kind_names[k], len[j] < 40 ? len[j] : 40, text[j], (int)(stop - p < 40 ? stop - p : 40), p, IRIS_COLL_MN_WHOLE_HELP);
        text[t->n[k]] = p;
        len[t->n[k]] = (int)(stop - p);
        t->lo[k][t->n[k]] = lo;
        t->hi[k][t->n[k]] = hi;
        t->n[k]++;
        if (!colon) break;
        p = colon + 1;
      }
    }
    if (!*end) break;
    p = end + 1;
  }
  t->from_env = 1;
  return IRIS_SUCCESS;
}
/* The table of a context with local_size ranks per node: IRIS_MN_NCCL_WHOLE over the
 * defaults; unset with one rank per node, every call to NCCL (the composition would
 * be the same rail call, or that call plus copies). IRIS_SUCCESS or the parser's error. */
static inline iris_status_t iris_coll_mn_table_from_env(iris_coll_mn_table_t *t, int local_size) {
  const char *v = NULL;
  const int got = iris_detail_env("IRIS_MN_NCCL_WHOLE", &v);
  if (got < 0) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_MN_NCCL_WHOLE is set but empty; unset it for the defaults, or %s", IRIS_COLL_MN_WHOLE_HELP);
  iris_coll_mn_table_defaults(t);
  if (got > 0) return iris_coll_mn_parse(v, t);
  if (local_size == 1) iris_coll_mn_table_all(t, 1);
  return IRIS_SUCCESS;
}

#endif /* IRIS_INTERNAL_COLL_MN_ROUTE_H */
