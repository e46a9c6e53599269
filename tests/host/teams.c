/* tests/host/teams.c: the arithmetic of teams (internal/core/team.h): MPI_Comm_split's
 * order (key, then parent rank), opting out, slot agreement over the members' bitmaps,
 * the node rule of multi-node worlds, the strided and 2-D forms as the colors and keys
 * they pass, the stride/table description and rank translation (iris.h). */
#include "harness.h"

static rng_t g_team_rng;
static unsigned rnd(void) { return (unsigned)(rng_next(&g_team_rng) >> 17); }

/* A reference split: the members of me's color, ordered by (key, parent rank), computed
 * by a plain selection here. Returns the size; world[] the members' world ranks. */
static int ref_split(const int *color, const int *key, const int *pw, int n, int me, int *world) {
  int used[64] = {0}, size = 0, i;
  if (color[me] < 0) return 0;
  for (;;) {
    int best = -1;
    for (i = 0; i < n; i++)
      if (!used[i] && color[i] == color[me] && (best < 0 || key[i] < key[best] || (key[i] == key[best] && i < best))) best = i;
    if (best < 0) break;
    used[best] = 1;
    world[size++] = pw[best];
  }
  return size;
}

/* Every parent rank plans the split; compares with the reference and checks agreement. */
static int plan_all(const char *name, const int *color, const int *key, const int *pw, int n, const unsigned long long *free_slots, const unsigned *free_coll,
                    int want_slot, int want_coll) {
  iris_detail_team_rec_t recs[16];
  int me, i;
  memset(recs, 0, sizeof recs); /* sms, ctas: unknown, unset */
  for (i = 0; i < n; i++) {
    recs[i].color = color[i];
    recs[i].key = key[i];
    recs[i].free_slots = free_slots ? free_slots[i] : ~0ULL;
    recs[i].free_coll = free_coll ? free_coll[i] : 3u;
  }
  for (me = 0; me < n; me++) {
    iris_detail_team_plan_t p;
    int world[16], size = ref_split(color, key, pw, n, me, world);
    iris_status_t st = iris_detail_team_plan(recs, pw, n, me, 16, 1, &p);
    if (st != IRIS_SUCCESS) return check(0, name, "parent rank %d: status %s (%s)", me, iris_status_string(st), iris_error_detail());
    if (p.slot != want_slot || p.coll != want_coll) return check(0, name, "parent rank %d: slot %d coll %d, want %d %d", me, p.slot, p.coll, want_slot, want_coll);
    if (p.size != size) return check(0, name, "parent rank %d: size %d, want %d", me, p.size, size);
    if (size == 0 && p.rank != -1) return check(0, name, "parent rank %d opted out but has team rank %d", me, p.rank);
    for (i = 0; i < size; i++) {
      if (p.world[i] != world[i]) return check(0, name, "parent rank %d: member %d is world rank %d, want %d", me, i, p.world[i], world[i]);
      if (world[i] == pw[me] && p.rank != i) return check(0, name, "parent rank %d: team rank %d, want %d", me, p.rank, i);
    }
  }
  return name[0] == '~' ? 1 : check(1, name, NULL); /* "~...": a quiet pass (the random trials count as one check) */
}

static void test_team_plans(void) {
  int pw[16], color[16], key[16], i, trial;
  for (i = 0; i < 16; i++) pw[i] = i;
  { /* the splits at W = 4 */
    int c1[4] = {0, 0, 1, 1}, k1[4] = {0, 0, 0, 0};
    int c2[4] = {0, 1, 0, 1};
    int c3[4] = {0, 0, 0, 1};
    int c4[4] = {1, 0, 1, 0}, k4[4] = {0, 1, 1, 0}; /* {3,1}{0,2} by key: 3 before 1 */
    int c5[4] = {0, IRIS_TEAM_NONE, 0, 0}, k5[4] = {5, 0, 2, 9};
    plan_all("team plan {0,1}{2,3}", c1, k1, pw, 4, NULL, NULL, 0, 0);
    plan_all("team plan {0,2}{1,3}", c2, k1, pw, 4, NULL, NULL, 0, 0);
    plan_all("team plan {0,1,2}{3}", c3, k1, pw, 4, NULL, NULL, 0, 0);
    plan_all("team plan {3,1}{0,2} by key", c4, k4, pw, 4, NULL, NULL, 0, 0);
    plan_all("team plan, a rank opts out, keys reorder", c5, k5, pw, 4, NULL, NULL, 0, 0);
    {
      iris_detail_team_rec_t r[4];
      iris_detail_team_plan_t p;
      memset(r, 0, sizeof r);
      for (i = 0; i < 4; i++) r[i].color = c4[i], r[i].key = k4[i], r[i].free_slots = ~0ULL, r[i].free_coll = 0;
      iris_detail_team_plan(r, pw, 4, 1, 16, 1, &p);
      check(p.size == 2 && p.world[0] == 3 && p.world[1] == 1 && p.rank == 1 && p.coll == -1, "team plan {3,1}: world rank 1 is team rank 1, no collective state",
            "size %d members %d %d rank %d coll %d", p.size, p.world[0], p.world[1], p.rank, p.coll);
    }
  }
  { /* slots: the lowest free on every member, whatever each holds */
    int c[4] = {0, 0, 1, 1}, k[4] = {0, 0, 0, 0};
    unsigned long long fs[4] = {~0ULL & ~1ULL, ~0ULL & ~3ULL, ~0ULL & ~0x9ULL, ~0ULL & ~1ULL};
    unsigned fc[4] = {2u, 3u, 3u, 2u};
    plan_all("team plan: slot and collective state free on every member", c, k, pw, 4, fs, fc, 2, 1);
  }
  { /* no slot free anywhere in common: every member fails alike */
    iris_detail_team_rec_t r[2];
    iris_detail_team_plan_t p;
    iris_status_t a, b;
    memset(r, 0, sizeof r);
    r[0].color = r[1].color = 0;
    r[0].key = r[1].key = 0;
    r[0].free_slots = 0x5555555555555555ULL;
    r[1].free_slots = 0xaaaaaaaaaaaaaaaaULL;
    r[0].free_coll = r[1].free_coll = 1;
    a = iris_detail_team_plan(r, pw, 2, 0, 16, 1, &p);
    b = iris_detail_team_plan(r, pw, 2, 1, 16, 1, &p);
    check(a == IRIS_ERROR_OUT_OF_MEMORY && b == a, "team plan: no common slot fails on every member", "%s / %s", iris_status_string(a), iris_status_string(b));
  }
  { /* everyone opts out: nothing formed, no slot needed */
    iris_detail_team_rec_t r[3];
    iris_detail_team_plan_t p;
    memset(r, 0, sizeof r);
    for (i = 0; i < 3; i++) r[i].color = IRIS_TEAM_NONE, r[i].key = 0, r[i].free_slots = 0, r[i].free_coll = 0;
    const iris_status_t st = iris_detail_team_plan(r, pw, 3, 1, 16, 1, &p); /* before the check's arguments read p */
    check(st == IRIS_SUCCESS && p.slot == -1 && p.size == 0 && p.rank == -1, "team plan: all opt out", "slot %d size %d", p.slot, p.size);
  }
  { /* multi-node: a color across nodes is refused on every member; within a node it is not */
    iris_detail_team_rec_t r[4];
    iris_detail_team_plan_t p;
    int ok = 1;
    memset(r, 0, sizeof r);
    for (i = 0; i < 4; i++) r[i].color = i % 2, r[i].key = 0, r[i].free_slots = ~0ULL, r[i].free_coll = 1; /* nodes of 2: {0,2} spans */
    for (i = 0; i < 4; i++) ok &= iris_detail_team_plan(r, pw, 4, i, 2, 2, &p) == IRIS_ERROR_UNSUPPORTED;
    for (i = 0; i < 4; i++) r[i].color = i / 2;
    for (i = 0; i < 4; i++) ok &= iris_detail_team_plan(r, pw, 4, i, 2, 2, &p) == IRIS_SUCCESS && p.size == 2;
    check(ok, "team plan: teams stay within a node in multi-node worlds", "");
  }
  /* random partitions of a permuted parent, random keys with ties */
  g_team_rng.s = g_seed ^ 0x7465616dULL;
  for (trial = 0; trial < 200; trial++) {
    int n = 1 + (int)(rnd() % 16);
    char name[64];
    for (i = 0; i < n; i++) pw[i] = i;
    for (i = n - 1; i > 0; i--) {
      int j = (int)(rnd() % (unsigned)(i + 1)), t = pw[i];
      pw[i] = pw[j];
      pw[j] = t;
    }
    for (i = 0; i < n; i++) {
      color[i] = (int)(rnd() % 4) - 1; /* -1: opt out */
      key[i] = (int)(rnd() % 3) - 1;
    }
    snprintf(name, sizeof name, "~team plan random trial %d", trial);
    {
      int any = 0;
      for (i = 0; i < n; i++) any |= color[i] >= 0;
      if (!plan_all(name, color, key, pw, n, NULL, NULL, any ? 0 : -1, any ? 0 : -1)) break;
    }
  }
  if (trial == 200) check(1, "team plan: 200 random partitions of permuted parents, keys with ties", NULL);
}

static void test_team_members(void) {
  iris_team_t t;
  int w1[4] = {1, 3, 5, 7}, w2[3] = {3, 1, 2}, w3[1] = {6}, i, ok = 1;
  memset(&t, 0, sizeof t);
  iris_detail_team_members(&t, w1, 4);
  ok &= t.stride == 2 && t.start == 1 && t.size == 4;
  for (i = 0; i < 4; i++) ok &= iris_team_world_rank(&t, i) == w1[i] && iris_team_rank_of(&t, w1[i]) == i;
  ok &= iris_team_rank_of(&t, 0) == -1 && iris_team_rank_of(&t, 9) == -1 && iris_team_rank_of(&t, 2) == -1;
  check(ok, "team members: stride form", "start %d stride %d", t.start, t.stride);
  ok = 1;
  iris_detail_team_members(&t, w2, 3);
  ok &= t.stride == 0 && t.size == 3;
  for (i = 0; i < 3; i++) ok &= iris_team_world_rank(&t, i) == w2[i] && iris_team_rank_of(&t, w2[i]) == i;
  ok &= iris_team_rank_of(&t, 0) == -1;
  check(ok, "team members: table form (not a progression)", "stride %d", t.stride);
  ok = 1;
  iris_detail_team_members(&t, w3, 1);
  ok &= t.stride == 1 && t.start == 6 && iris_team_world_rank(&t, 0) == 6 && iris_team_rank_of(&t, 6) == 0;
  check(ok, "team members: a team of one", "start %d stride %d", t.start, t.stride);
  { /* translate between the TP and DP teams of a 2 x 2 grid */
    iris_team_t tp, dp;
    int a[2] = {2, 3}, b[2] = {1, 3};
    memset(&tp, 0, sizeof tp);
    memset(&dp, 0, sizeof dp);
    iris_detail_team_members(&tp, a, 2);
    iris_detail_team_members(&dp, b, 2);
    check(iris_team_translate_rank(&tp, 1, &dp) == 1 && iris_team_translate_rank(&tp, 0, &dp) == -1 && iris_team_translate_rank(&dp, 1, &tp) == 1 &&
              iris_team_translate_rank(&tp, 2, &dp) == -1 && iris_team_translate_rank(&tp, -1, &dp) == -1,
          "team translate rank (NVSHMEM's translate_pe)", "");
  }
  { /* the strided and 2-D splits are colors and keys: a 2 x 3 grid's rows and columns */
    int xc[6], xk[6], yc[6], yk[6], pw[6], xr = 3;
    for (i = 0; i < 6; i++) xc[i] = i / xr, xk[i] = i % xr, yc[i] = i % xr, yk[i] = i / xr, pw[i] = i;
    plan_all("team plan: 2-D rows (x)", xc, xk, pw, 6, NULL, NULL, 0, 0);
    plan_all("team plan: 2-D columns (y)", yc, yk, pw, 6, NULL, NULL, 0, 0);
  }
}

/* The splits' own argument checks, through the API (they come before any context or
 * meeting, so no GPU is needed): a parent this rank is not a member of (an opted-out
 * rank's team: size 0, rank -1; a handle of garbage) is refused with
 * IRIS_ERROR_INVALID_ARGUMENT and both outputs hold no team; split_2d once divided by the
 * parent's size here (SIGFPE). */
static void team_poison(iris_team_t *t) {
  memset(t, 0x5a, sizeof *t);
}
static int team_none(const iris_team_t *t) { return t->size == 0 && t->rank == -1 && t->slot == -1 && t->coll == -1; }
static void test_team_split_args(void) {
  iris_team_t none, garbage, four, x, y, o;
  iris_status_t a, b, c;
  memset(&none, 0, sizeof none);
  none.rank = none.slot = none.coll = -1;
  memset(&garbage, 0, sizeof garbage);
  garbage.size = -3;
  garbage.rank = 1;
  memset(&four, 0, sizeof four);
  four.size = 4;
  four.rank = 1;
  four.stride = 1;
  four.slot = 0;
  team_poison(&x), team_poison(&y);
  a = iris_team_split_2d(NULL, &none, 2, &x, &y);
  check(a == IRIS_ERROR_INVALID_ARGUMENT && team_none(&x) && team_none(&y), "team split_2d of an opted-out rank's team (size 0): invalid argument, no team made",
        "%s; x size %d rank %d, y size %d rank %d", sname(a), x.size, x.rank, y.size, y.rank);
  team_poison(&x), team_poison(&y);
  a = iris_team_split_2d(NULL, &garbage, 1, &x, NULL);
  b = iris_team_split_2d(NULL, &four, 0, &x, &y);
  check(a == IRIS_ERROR_INVALID_ARGUMENT && b == IRIS_ERROR_INVALID_ARGUMENT && team_none(&x) && team_none(&y),
        "team split_2d: a parent of negative size, xrange 0: invalid argument, outputs hold no team", "%s / %s", sname(a), sname(b));
  team_poison(&x), team_poison(&y);
  a = iris_team_split_2d(NULL, &four, 9, &x, &y); /* xrange past the size is clamped; then the NULL context is refused */
  check(a == IRIS_ERROR_INVALID_ARGUMENT && team_none(&x) && team_none(&y) && strstr(iris_error_detail(), "NULL context"),
        "team split_2d on a NULL context: refused as such, outputs hold no team", "%s: %s", sname(a), iris_error_detail());
  team_poison(&o);
  a = iris_team_split_strided(NULL, &none, 0, 1, 1, &o);
  b = iris_team_split_strided(NULL, &four, 1, 2, 2, &o); /* parent ranks 1, 3: fits */
  c = iris_team_split_strided(NULL, &four, 1, 2, 3, &o); /* 1, 3, 5: past the parent */
  check(a == IRIS_ERROR_INVALID_ARGUMENT && b == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "do not fit") && c == IRIS_ERROR_INVALID_ARGUMENT && team_none(&o),
        "team split_strided: size-0 parent, a range past the parent: invalid argument, *out holds no team", "%s / %s / %s: %s", sname(a), sname(b), sname(c),
        iris_error_detail());
  team_poison(&o);
  a = iris_team_split_strided(NULL, &four, 0, 1, 0, &o);
  b = iris_team_split_strided(NULL, &four, -1, 1, 1, &o);
  c = iris_team_split_strided(NULL, &four, 0, 0, 1, &o);
  check(a == IRIS_ERROR_INVALID_ARGUMENT && b == a && c == a && team_none(&o), "team split_strided: size 0, start -1, stride 0 refused, *out holds no team", "%s / %s / %s",
        sname(a), sname(b), sname(c));
}

/* split_2d's grid (iris_detail_team_2d, what iris_team_split_2d passes to the split) planned
 * by every parent rank: a short last row (5 ranks, xrange 2), xrange past the size (one
 * row), xrange 1 (rows of one, one column); the x team is the row (consecutive parent
 * ranks), the y team the column (parent ranks xrange apart), in parent order. */
static void test_team_2d_grid(void) {
  static const int cases[][2] = {{5, 2}, {5, 9}, {5, 1}, {6, 3}, {1, 4}, {7, 3}};
  unsigned k;
  int ok = 1;
  char why[160] = "";
  for (k = 0; k < sizeof cases / sizeof cases[0] && ok; k++) {
    const int n = cases[k][0], xr = cases[k][1], row = xr > n ? n : xr;
    iris_detail_team_rec_t xs[16], ys[16];
    int pw[16], me, i;
    memset(xs, 0, sizeof xs);
    memset(ys, 0, sizeof ys);
    for (i = 0; i < n; i++) {
      pw[i] = 15 - i; /* a permuted parent: world ranks differ from parent ranks */
      iris_detail_team_2d(i, n, xr, &xs[i].color, &xs[i].key, &ys[i].color, &ys[i].key);
      xs[i].free_slots = ys[i].free_slots = ~0ULL;
      xs[i].free_coll = ys[i].free_coll = 1;
    }
    for (me = 0; me < n && ok; me++) {
      iris_detail_team_plan_t px, py;
      int want = 0;
      if (iris_detail_team_plan(xs, pw, n, me, 16, 1, &px) != IRIS_SUCCESS || iris_detail_team_plan(ys, pw, n, me, 16, 1, &py) != IRIS_SUCCESS) {
        snprintf(why, sizeof why, "n %d xrange %d parent rank %d: plan failed", n, xr, me);
        ok = 0;
        break;
      }
      for (i = me / row * row; i < n && i < me / row * row + row; i++, want++)
        if (px.world[want] != pw[i]) ok = 0;
      if (!ok || px.size != want || px.rank != me % row) {
        snprintf(why, sizeof why, "n %d xrange %d parent rank %d: x team size %d rank %d, want size %d rank %d", n, xr, me, px.size, px.rank, want, me % row);
        ok = 0;
        break;
      }
      want = 0;
      for (i = me % row; i < n; i += row, want++)
        if (py.world[want] != pw[i]) ok = 0;
      if (!ok || py.size != want || py.rank != me / row) {
        snprintf(why, sizeof why, "n %d xrange %d parent rank %d: y team size %d rank %d, want size %d rank %d", n, xr, me, py.size, py.rank, want, me / row);
        ok = 0;
      }
    }
  }
  check(ok, "team split_2d grid: short last row, xrange past the size, xrange 1: rows and columns as NVSHMEM's", "%s", why);
}

/* The grid rule a split agrees on (iris_detail_team_plan: what every member of a new team
 * sizes its collectives' grids by): the fewest SMs among the team's own members (not the
 * parent's), at least 1; IRIS_COLL_CTAS alike, else DIFFER naming the first member (in
 * parent order) whose value is not member 0's, or MALFORMED naming the first that could
 * not be read; every member of the team computes the same rule. */
static int grid_all(const char *name, const int *color, const int *key, const int *sms, const int *ctas, int n, int me_color, iris_detail_team_grid_t want) {
  iris_detail_team_rec_t r[8];
  int pw[8], i;
  memset(r, 0, sizeof r);
  for (i = 0; i < n; i++) {
    r[i].color = color[i], r[i].key = key[i], r[i].free_slots = ~0ULL, r[i].free_coll = 1;
    r[i].sms = (int)(uint32_t)sms[i]; /* as the exchange carries them: 32-bit words */
    r[i].ctas = (int)(uint32_t)ctas[i];
    pw[i] = 10 + i;
  }
  for (i = 0; i < n; i++) {
    iris_detail_team_plan_t p;
    const iris_status_t st = iris_detail_team_plan(r, pw, n, i, 16, 1, &p);
    const iris_detail_team_grid_t *g = &p.grid;
    if (color[i] != me_color) continue;
    if (st != IRIS_SUCCESS || g->sms != want.sms || g->ctas != want.ctas || g->bad_rank != want.bad_rank ||
        (want.ctas == IRIS_DETAIL_TEAM_CTAS_DIFFER && (g->first != want.first || g->theirs != want.theirs)))
      return check(0, name, "parent rank %d: %s: sms %d ctas %d bad rank %d first %d theirs %d; want %d %d %d %d %d", i, sname(st), g->sms, g->ctas, g->bad_rank,
                   g->first, g->theirs, want.sms, want.ctas, want.bad_rank, want.first, want.theirs);
  }
  return check(1, name, NULL);
}
static void test_team_grid_rule(void) {
  const int c2[4] = {0, 0, 1, 1}, c1[4] = {0, 0, 0, 0}, k0[4] = {0, 0, 0, 0}, krev[4] = {3, 2, 1, 0};
  const int sms[4] = {132, 114, 78, 132}, none[4] = {0, 0, 0, 0}, unset[4] = {0, 0, 0, 0}, c16[4] = {16, 16, 16, 16};
  const int last8[4] = {16, 16, 16, 8}, team8[4] = {8, 8, 16, 16}, bad2[4] = {16, 8, IRIS_DETAIL_TEAM_CTAS_MALFORMED, 16};
  iris_detail_team_grid_t w;
  memset(&w, 0, sizeof w);
  w.bad_rank = -1;
  w.sms = 114;
  grid_all("team grid rule: the fewest SMs of the team's own members (114 of {132, 114}, not the other team's 78)", c2, k0, sms, unset, 4, 0, w);
  w.sms = 78;
  grid_all("team grid rule: the other team of the split takes its own fewest (78)", c2, k0, sms, unset, 4, 1, w);
  w.sms = 1;
  grid_all("team grid rule: no SM count known on any member: 1, as the world's rule", c1, k0, none, unset, 4, 0, w);
  w.sms = 78, w.ctas = 16;
  grid_all("team grid rule: IRIS_COLL_CTAS alike (16) is the team's", c1, k0, sms, c16, 4, 0, w);
  w.sms = 114, w.ctas = 8;
  grid_all("team grid rule: IRIS_COLL_CTAS that differs only between the split's teams is each team's own", c2, k0, sms, team8, 4, 0, w);
  w.sms = 78, w.ctas = IRIS_DETAIL_TEAM_CTAS_DIFFER, w.bad_rank = 13, w.first = 16, w.theirs = 8;
  grid_all("team grid rule: IRIS_COLL_CTAS 8 on the last member, 16 on the others: DIFFER on every member, naming it", c1, k0, sms, last8, 4, 0, w);
  w.bad_rank = 10, w.first = 8, w.theirs = 16; /* keys reversed: member 0 is parent rank 3 (8); parent rank 0 is the first unlike it */
  grid_all("team grid rule: member 0 by key is the reference (keys reversed)", c1, krev, sms, last8, 4, 0, w);
  w.ctas = IRIS_DETAIL_TEAM_CTAS_MALFORMED, w.bad_rank = 12;
  grid_all("team grid rule: a malformed IRIS_COLL_CTAS is named before a difference (MALFORMED, its world rank)", c1, k0, sms, bad2, 4, 0, w);
}

/* The predefined teams as the table's setup binds them (iris_detail_teams_bind_predefined)
 * on a host-only context: in a multi-node world the world team is host-only (sync NULL:
 * the device barrier refuses it instead of signalling through no mapping to other nodes'
 * ranks) and still a valid handle on the host; the node team has its slot's words; a world
 * handle carrying slot 0's words there (as bound before) is not live. One node: the world
 * team has slot 0's words. */
static void test_team_predefined(void) {
  static char heap[1 << 16];
  static iris_detail_team_area_t area[IRIS_TEAM_MAX];
  static unsigned long long fwords[IRIS_TEAM_MAX * IRIS_FAULT_WORDS];
  int nodes;
  for (nodes = 2; nodes >= 1; nodes--) {
    iris_t *ctx = iris_detail_host_only_ctx(sizeof heap, heap);
    iris_detail_teams_t *T = (iris_detail_teams_t *)calloc(1, sizeof *T);
    iris_team_t world, node, rail, stale;
    iris_status_t a, b, c, d;
    char nm[160];
    if (!ctx || !T) { check(0, "team predefined: host-only context", "out of memory"); free(T); iris_detail_host_only_free(ctx); return; }
    memset(fwords, 0, sizeof fwords);
    T->area = (char *)area;
    T->fault_host = T->fault_dev = fwords;
    if (nodes > 1) ctx->nodes = 2, ctx->node = 1, ctx->local_size = 2, ctx->local_rank = 1, ctx->grank = 3, ctx->gworld = 4;
    else ctx->local_size = 4, ctx->local_rank = 3;
    iris_detail_teams_bind_predefined(ctx, T);
    ctx->teams = T;
    a = iris_team_get(ctx, IRIS_TEAM_WORLD, &world);
    b = iris_team_get(ctx, IRIS_TEAM_NODE, &node);
    c = iris_team_get(ctx, IRIS_TEAM_RAIL, &rail);
    d = iris_detail_team_valid(ctx, &world, "test") == IRIS_SUCCESS && iris_detail_team_valid(ctx, &node, "test") == IRIS_SUCCESS ? IRIS_SUCCESS : IRIS_ERROR_INVALID_ARGUMENT;
    if (nodes > 1) {
      stale = world;
      stale.sync = (unsigned long long *)(void *)&area[0];
      snprintf(nm, sizeof nm, "team predefined, 2 nodes of 2: the world team is host-only (sync NULL) and valid on the host; the node team has slot 1's words");
      check(a == IRIS_SUCCESS && b == IRIS_SUCCESS && c == IRIS_SUCCESS && d == IRIS_SUCCESS && world.size == 4 && world.rank == 3 && world.slot == 0 && !world.sync &&
                node.size == 2 && node.rank == 1 && iris_team_world_rank(&node, 0) == 2 && node.slot == 1 && node.sync == (unsigned long long *)(void *)&area[1] &&
                rail.size == 2 && rail.rank == 1 && rail.slot == -1 && !rail.sync && iris_detail_team_valid(ctx, &stale, "test") == IRIS_ERROR_INVALID_ARGUMENT &&
                iris_team_destroy(ctx, &world) == IRIS_SUCCESS && world.size == 4,
            nm, "%s %s %s %s; world size %d rank %d slot %d sync %p; node size %d slot %d sync %p", sname(a), sname(b), sname(c), sname(d), world.size, world.rank,
            world.slot, (void *)world.sync, node.size, node.slot, (void *)node.sync);
    } else {
      check(a == IRIS_SUCCESS && b == IRIS_SUCCESS && d == IRIS_SUCCESS && world.size == 4 && world.rank == 3 && world.sync == (unsigned long long *)(void *)&area[0] &&
                node.slot == 0 && node.sync == world.sync,
            "team predefined, one node: the world (= node) team has slot 0's words", "%s %s %s; size %d rank %d sync %p", sname(a), sname(b), sname(d), world.size,
            world.rank, (void *)world.sync);
    }
    ctx->teams = NULL;
    free(T);
    iris_detail_host_only_free(ctx);
  }
}
