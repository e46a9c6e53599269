/* tests/host/mn_route.c: multi-node worlds: which route a collective takes (the composition or
 * the whole call to NCCL): the default table, IRIS_MN_NCCL_WHOLE's parser (empty, zero,
 * malformed), the decision, the table hash the ranks compare, and when bring-up makes
 * the world communicator. */
#include "harness.h"
#include "internal/coll/mn_route.h"

enum { AR = 0, AG, RS, A2A, BC };
static const char *route_str(iris_coll_mn_route_t r) { return iris_coll_mn_route_name(r); }

static void test_mn_route_defaults(void) {
  iris_coll_mn_table_t t;
  iris_status_t st;
  unsetenv("IRIS_MN_NCCL_WHOLE");
  st = iris_coll_mn_table_from_env(&t, 2);
  check(st == IRIS_SUCCESS && !t.from_env, "mn route: unset, 2 ranks per node: the defaults", "%s '%s' from_env %u", sname(st), iris_error_detail(), t.from_env);
  /* the default ranges at their edges (world 4, 2-byte elements: bytes = 2 count, x 4 for reduce-scatter and all-to-all) */
  check(iris_coll_mn_decide(&t, 1, AR, 512, 2, 4) == IRIS_COLL_MN_HIER && iris_coll_mn_decide(&t, 1, AR, 1023, 2, 4) == IRIS_COLL_MN_HIER &&
            iris_coll_mn_decide(&t, 1, AR, 1024, 2, 4) == IRIS_COLL_MN_NCCL && iris_coll_mn_decide(&t, 1, AR, 128 << 10, 2, 4) == IRIS_COLL_MN_NCCL &&
            iris_coll_mn_decide(&t, 1, AR, (128 << 10) + 1, 2, 4) == IRIS_COLL_MN_HIER && iris_coll_mn_decide(&t, 1, AR, 32 << 20, 2, 4) == IRIS_COLL_MN_HIER,
        "mn route: default all-reduce: NCCL from 2 KB to 256 KB, the composition outside", "1 KB %s, 2 KB %s, 256 KB %s, 256 KB + 2 %s",
        route_str(iris_coll_mn_decide(&t, 1, AR, 512, 2, 4)), route_str(iris_coll_mn_decide(&t, 1, AR, 1024, 2, 4)),
        route_str(iris_coll_mn_decide(&t, 1, AR, 128 << 10, 2, 4)), route_str(iris_coll_mn_decide(&t, 1, AR, (128 << 10) + 1, 2, 4)));
  check(iris_coll_mn_decide(&t, 1, AG, (8 << 20) - 1, 2, 4) == IRIS_COLL_MN_HIER && iris_coll_mn_decide(&t, 1, AG, 8 << 20, 2, 4) == IRIS_COLL_MN_NCCL &&
            iris_coll_mn_decide(&t, 1, AG, (size_t)1 << 40, 2, 4) == IRIS_COLL_MN_NCCL,
        "mn route: default all-gather: NCCL from 16 MB per rank", "16 MB - 2 %s, 16 MB %s", route_str(iris_coll_mn_decide(&t, 1, AG, (8 << 20) - 1, 2, 4)),
        route_str(iris_coll_mn_decide(&t, 1, AG, 8 << 20, 2, 4)));
  check(iris_coll_mn_decide(&t, 1, RS, 1, 1, 4) == IRIS_COLL_MN_NCCL && iris_coll_mn_decide(&t, 1, RS, (size_t)1 << 30, 4, 4) == IRIS_COLL_MN_NCCL &&
            iris_coll_mn_decide(&t, 1, A2A, 1, 1, 4) == IRIS_COLL_MN_HIER && iris_coll_mn_decide(&t, 1, A2A, (size_t)1 << 30, 4, 4) == IRIS_COLL_MN_HIER &&
            iris_coll_mn_decide(&t, 1, BC, 1, 1, 4) == IRIS_COLL_MN_HIER && iris_coll_mn_decide(&t, 1, BC, (size_t)1 << 30, 4, 4) == IRIS_COLL_MN_HIER,
        "mn route: default reduce-scatter NCCL at every size; all-to-all and broadcast the composition", "rs %s, a2a %s, bc %s",
        route_str(iris_coll_mn_decide(&t, 1, RS, 1, 1, 4)), route_str(iris_coll_mn_decide(&t, 1, A2A, 1, 1, 4)), route_str(iris_coll_mn_decide(&t, 1, BC, 1, 1, 4)));
  check(iris_coll_mn_decide(&t, 0, AR, 1024, 2, 4) == IRIS_COLL_MN_HIER && iris_coll_mn_decide(&t, 0, RS, 1, 4, 4) == IRIS_COLL_MN_HIER &&
            iris_coll_mn_decide(&t, 1, -1, 1024, 2, 4) == IRIS_COLL_MN_HIER && iris_coll_mn_decide(&t, 1, 5, 1024, 2, 4) == IRIS_COLL_MN_HIER,
        "mn route: without a world communicator (or for no known collective) every call takes the composition", "%s",
        route_str(iris_coll_mn_decide(&t, 0, AR, 1024, 2, 4)));
  st = iris_coll_mn_table_from_env(&t, 1);
  check(st == IRIS_SUCCESS && iris_coll_mn_decide(&t, 1, AR, 1, 4, 2) == IRIS_COLL_MN_NCCL && iris_coll_mn_decide(&t, 1, A2A, 7, 4, 2) == IRIS_COLL_MN_NCCL &&
            iris_coll_mn_decide(&t, 1, BC, (size_t)1 << 32, 1, 2) == IRIS_COLL_MN_NCCL && iris_coll_mn_decide(&t, 1, AG, 64, 1, 2) == IRIS_COLL_MN_NCCL,
        "mn route: unset, one rank per node: every call to NCCL (the rail is the world)", "%s '%s'", sname(st), iris_error_detail());
  /* the bytes a range speaks of */
  check(iris_coll_mn_bytes(AR, 10, 4, 8) == 40 && iris_coll_mn_bytes(AG, 10, 4, 8) == 40 && iris_coll_mn_bytes(BC, 10, 4, 8) == 40 &&
            iris_coll_mn_bytes(RS, 10, 4, 8) == 320 && iris_coll_mn_bytes(A2A, 10, 4, 8) == 320 && iris_coll_mn_bytes(RS, SIZE_MAX / 2, 8, 16) == UINT64_MAX,
        "mn route: bytes per rank (reduce-scatter and all-to-all: world x count), saturating", "rs %llu", (unsigned long long)iris_coll_mn_bytes(RS, 10, 4, 8));
}

static void test_mn_route_parser(void) {
  static const char *bad[] = {"1", "yes", "ALL", "all_reduce", "all_reduce=", "all_reduce=1K", "all_reduce=-1K", "all_reduce=1K-2X", "all_reduce=2K-1K",
                              "allreduce=1K-", "all_reduce=1K-,all_reduce=2K-", "all_reduce=1K-2K:3K-4K:5K-6K:7K-8K:9K-", "all_reduce=all,",
                              "all_reduce=1K-2K:", ",all_reduce=all", "all_reduce=all,,broadcast=none", "all_reduce=1.5K-", "all_reduce= 1K-",
                              "all_reduce=all;broadcast=none", "all_reduce=none=all", "all_reduce=00000000000000000000000000000000001-"};
  iris_coll_mn_table_t t, d;
  iris_status_t st;
  size_t i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char nm[160];
    iris_coll_mn_table_defaults(&t);
    st = iris_coll_mn_parse(bad[i], &t);
    snprintf(nm, sizeof nm, "mn route: IRIS_MN_NCCL_WHOLE='%s' is refused naming the variable", bad[i]);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_MN_NCCL_WHOLE") && has(iris_error_detail(), "give all, none"), nm, "%s '%s'",
          sname(st), iris_error_detail());
  }
  /* sizes at the edge of size_t: the largest is taken, one more (or a suffix past it)
   * is refused as too large, not as malformed digits */
  {
    static const char *big[] = {"all_reduce=0-18446744073709551616", "all_reduce=16777216T-"};
    iris_coll_mn_table_defaults(&t);
    st = iris_coll_mn_parse("all_reduce=18446744073709551615-", &t);
    check(st == IRIS_SUCCESS && t.n[AR] == 1 && t.lo[AR][0] == UINT64_MAX && iris_coll_mn_decide(&t, 1, AR, SIZE_MAX, 1, 4) == IRIS_COLL_MN_NCCL &&
              iris_coll_mn_decide(&t, 1, AR, SIZE_MAX - 1, 1, 4) == IRIS_COLL_MN_HIER,
          "mn route: IRIS_MN_NCCL_WHOLE takes the largest size", "%s '%s'", sname(st), iris_error_detail());
    for (i = 0; i < sizeof big / sizeof big[0]; i++) {
      char nm[160];
      iris_coll_mn_table_defaults(&t);
      st = iris_coll_mn_parse(big[i], &t);
      snprintf(nm, sizeof nm, "mn route: IRIS_MN_NCCL_WHOLE='%s' is refused as too large", big[i]);
      check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_MN_NCCL_WHOLE") && has(iris_error_detail(), "overflows") &&
                !has(iris_error_detail(), "is not a size"),
            nm, "%s '%s'", sname(st), iris_error_detail());
    }
  }
  /* overlapping or repeated ranges are refused naming both (bounds inclusive); ranges apart are taken */
  {
    static const char *over[] = {"all_reduce=0-2K:1K-3K", "all_reduce=1K-2K:1K-2K", "all_reduce=0-:5M-6M", "all_reduce=0-1K:1K-2K", "broadcast=8M-:1K-2K:4M-8M"};
    for (i = 0; i < sizeof over / sizeof over[0]; i++) {
      char nm[160];
      iris_coll_mn_table_defaults(&t);
      st = iris_coll_mn_parse(over[i], &t);
      snprintf(nm, sizeof nm, "mn route: IRIS_MN_NCCL_WHOLE='%s': overlapping ranges are refused naming them", over[i]);
      check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_MN_NCCL_WHOLE") && has(iris_error_detail(), "overlap"), nm, "%s '%s'", sname(st),
            iris_error_detail());
    }
    iris_coll_mn_table_defaults(&t);
    st = iris_coll_mn_parse("all_reduce=0-2K:1K-3K", &t);
    check(st != IRIS_SUCCESS && has(iris_error_detail(), "all_reduce: the ranges '0-2K' and '1K-3K' overlap"), "mn route: an overlap names the collective and both ranges",
          "%s '%s'", sname(st), iris_error_detail());
    iris_coll_mn_table_defaults(&t);
    st = iris_coll_mn_parse("all_reduce=0-1023:1K-2K:4K-", &t);
    check(st == IRIS_SUCCESS && t.n[AR] == 3, "mn route: ranges that touch but share no size are taken", "%s '%s'", sname(st), iris_error_detail());
  }
  /* empty and zero, through the environment */
  setenv("IRIS_MN_NCCL_WHOLE", "", 1);
  st = iris_coll_mn_table_from_env(&t, 2);
  check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_MN_NCCL_WHOLE") && has(iris_error_detail(), "empty"),
        "mn route: IRIS_MN_NCCL_WHOLE set but empty is an error, not the defaults", "%s '%s'", sname(st), iris_error_detail());
  setenv("IRIS_MN_NCCL_WHOLE", "0", 1);
  st = iris_coll_mn_table_from_env(&t, 1);
  check(st == IRIS_SUCCESS && t.from_env && iris_coll_mn_decide(&t, 1, AR, 1024, 2, 4) == IRIS_COLL_MN_HIER && iris_coll_mn_decide(&t, 1, RS, 1, 4, 4) == IRIS_COLL_MN_HIER,
        "mn route: IRIS_MN_NCCL_WHOLE=0 is none: every call takes the composition (also at one rank per node)", "%s '%s'", sname(st), iris_error_detail());
  setenv("IRIS_MN_NCCL_WHOLE", "none", 1);
  st = iris_coll_mn_table_from_env(&d, 2);
  check(st == IRIS_SUCCESS && !memcmp(&t, &d, sizeof t), "mn route: IRIS_MN_NCCL_WHOLE=none is the same table as 0", "%s '%s'", sname(st), iris_error_detail());
  setenv("IRIS_MN_NCCL_WHOLE", "all", 1);
  st = iris_coll_mn_table_from_env(&t, 2);
  check(st == IRIS_SUCCESS && iris_coll_mn_decide(&t, 1, AR, 1, 1, 4) == IRIS_COLL_MN_NCCL && iris_coll_mn_decide(&t, 1, A2A, (size_t)1 << 40, 8, 16) == IRIS_COLL_MN_NCCL &&
            iris_coll_mn_decide(&t, 1, BC, 0, 1, 4) == IRIS_COLL_MN_NCCL,
        "mn route: IRIS_MN_NCCL_WHOLE=all: every call to NCCL", "%s '%s'", sname(st), iris_error_detail());
  /* a list: named collectives replaced, the others keep their defaults */
  setenv("IRIS_MN_NCCL_WHOLE", "all_reduce=0-256K:64M-,reduce_scatter=none,broadcast=all,all_to_all=1k-2KiB", 1);
  st = iris_coll_mn_table_from_env(&t, 2);
  check(st == IRIS_SUCCESS && t.n[AR] == 2 && t.lo[AR][0] == 0 && t.hi[AR][0] == 256 << 10 && t.lo[AR][1] == 64 << 20 && t.hi[AR][1] == UINT64_MAX &&
            t.n[RS] == 0 && t.n[BC] == 1 && t.n[A2A] == 1 && t.lo[A2A][0] == 1024 && t.hi[A2A][0] == 2048 && t.n[AG] == 1 && t.lo[AG][0] == 16 << 20,
        "mn route: a list replaces the named collectives' ranges and keeps the others' defaults", "%s '%s' n %u %u %u %u %u", sname(st), iris_error_detail(),
        t.n[0], t.n[1], t.n[2], t.n[3], t.n[4]);
  check(iris_coll_mn_decide(&t, 1, AR, 128 << 10, 2, 4) == IRIS_COLL_MN_NCCL && iris_coll_mn_decide(&t, 1, AR, (128 << 10) + 1, 2, 4) == IRIS_COLL_MN_HIER &&
            iris_coll_mn_decide(&t, 1, AR, (32 << 20) - 1, 2, 4) == IRIS_COLL_MN_HIER && iris_coll_mn_decide(&t, 1, AR, 32 << 20, 2, 4) == IRIS_COLL_MN_NCCL &&
            iris_coll_mn_decide(&t, 1, A2A, 64, 4, 4) == IRIS_COLL_MN_NCCL && iris_coll_mn_decide(&t, 1, A2A, 129, 4, 4) == IRIS_COLL_MN_HIER &&
            iris_coll_mn_decide(&t, 1, RS, 1, 4, 4) == IRIS_COLL_MN_HIER,
        "mn route: the listed ranges decide, edges included", "ar 256K %s", route_str(iris_coll_mn_decide(&t, 1, AR, 128 << 10, 2, 4)));
  unsetenv("IRIS_MN_NCCL_WHOLE");
}

/* iris_detail_world_wanted's answer for the environment as it is (-1: an error). */
static int world_wanted_now(void) {
  int32_t w = -1;
  return iris_detail_world_wanted(&w) == IRIS_SUCCESS ? (int)w : -1;
}
static void test_mn_route_agreement(void) {
  iris_coll_mn_table_t a, b;
  iris_detail_rail_msg_t m[4];
  int r;
  /* the hash the ranks compare at setup */
  iris_coll_mn_table_defaults(&a);
  iris_coll_mn_table_defaults(&b);
  check(iris_coll_mn_table_hash(&a) == iris_coll_mn_table_hash(&b), "mn route: equal tables hash alike", "%llx", (unsigned long long)iris_coll_mn_table_hash(&a));
  check(iris_coll_mn_parse("all_reduce=2K-", &b) == IRIS_SUCCESS && iris_coll_mn_table_hash(&a) != iris_coll_mn_table_hash(&b),
        "mn route: one bound apart hashes apart", "'%s'", iris_error_detail());
  iris_coll_mn_table_all(&b, 1);
  check(iris_coll_mn_table_hash(&a) != iris_coll_mn_table_hash(&b), "mn route: all and the defaults hash apart", "");
  /* bring-up: the world communicator is made unless a rank asks for none or NCCL would
   * see two ranks of one host on one GPU */
  memset(m, 0, sizeof m);
  for (r = 0; r < 4; r++) {
    m[r].world_wanted = 1;
    m[r].nccl_host = 100 + (uint64_t)(r / 2);
    snprintf(m[r].pci, sizeof m[r].pci, "0000:%02x:00.0", r % 2);
  }
  check(iris_detail_world_comm_possible(m, 4), "mn route: world communicator: 2 hosts, the GPUs of each distinct (virtual nodes on 2 GPUs)", "");
  m[1].nccl_host = 100;
  snprintf(m[1].pci, sizeof m[1].pci, "0000:00:00.0");
  check(!iris_detail_world_comm_possible(m, 4), "mn route: world communicator left out: two ranks of one host on one GPU", "");
  m[1].nccl_host = 102;
  check(iris_detail_world_comm_possible(m, 4), "mn route: world communicator: one GPU under two NCCL hosts (NCCL_HOSTID) is allowed", "");
  m[3].world_wanted = 0;
  check(!iris_detail_world_comm_possible(m, 4), "mn route: world communicator left out when any rank sets IRIS_MN_NCCL_WHOLE=none", "");
  unsetenv("IRIS_MN_NCCL_WHOLE");
  r = world_wanted_now();
  setenv("IRIS_MN_NCCL_WHOLE", "none", 1);
  r = r * 10 + world_wanted_now();
  setenv("IRIS_MN_NCCL_WHOLE", "0", 1);
  r = r * 10 + world_wanted_now();
  setenv("IRIS_MN_NCCL_WHOLE", "all_reduce=none", 1);
  r = r * 10 + world_wanted_now();
  unsetenv("IRIS_MN_NCCL_WHOLE");
  check(r == 1001, "mn route: a rank asks for the world communicator unless IRIS_MN_NCCL_WHOLE is none or 0", "unset/none/0/list: %04d", r);
  { /* set but empty at iris_init: an error naming it (through the strict reader), not "wanted" */
    int32_t w = -1;
    iris_status_t st;
    setenv("IRIS_MN_NCCL_WHOLE", "", 1);
    st = iris_detail_world_wanted(&w);
    unsetenv("IRIS_MN_NCCL_WHOLE");
    check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_MN_NCCL_WHOLE is set but empty"),
          "mn route: IRIS_MN_NCCL_WHOLE='' at bring-up is an error naming it", "%s wanted %d: '%s'", sname(st), (int)w, iris_error_detail());
  }
  /* a list that names every collective none hands nothing to NCCL: no world communicator
   * (it was made, and never used); a list that leaves one out, or names one twice, still asks */
  {
    static const char *const wanted[] = {"all_reduce=none,all_gather=none,reduce_scatter=none,all_to_all=none",
                                         "all_reduce=none,all_gather=none,reduce_scatter=none,all_to_all=none,broadcast=all",
                                         "all_reduce=none,all_gather=none,reduce_scatter=none,all_to_all=none,all_to_all=none",
                                         "all_reduce=none,all_gather=none,reduce_scatter=none,all_to_all=none,broadcast=none,",
                                         "all_reduce=none,all_gather=none,reduce_scatter=none,all_to_all=none,broadcast=nonex"};
    size_t i;
    int bad = -1;
    setenv("IRIS_MN_NCCL_WHOLE", "broadcast=none,all_to_all=none,reduce_scatter=none,all_gather=none,all_reduce=none", 1);
    r = world_wanted_now();
    iris_coll_mn_table_defaults(&a);
    check(r == 0 && iris_coll_mn_table_from_env(&a, 2) == IRIS_SUCCESS && a.n[AR] + a.n[AG] + a.n[RS] + a.n[A2A] + a.n[BC] == 0,
          "mn route: every collective named none: no world communicator is asked for", "wanted %d", r);
    for (i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
      setenv("IRIS_MN_NCCL_WHOLE", wanted[i], 1);
      if (!world_wanted_now() && bad < 0) bad = (int)i;
    }
    unsetenv("IRIS_MN_NCCL_WHOLE");
    check(bad < 0, "mn route: a list that leaves a collective to NCCL (or is malformed) still asks for the world communicator", "'%s' did not",
          bad < 0 ? "" : wanted[bad]);
    for (i = 0, bad = -1; i < IRIS_COLL_MN_KINDS; i++) /* nodes.h's list of the collectives is mn_route.h's */
      if (strcmp(iris_detail_whole_kinds[i], iris_coll_mn_kind_names[i]) != 0) bad = (int)i;
    check(bad < 0 && IRIS_COLL_MN_KINDS == sizeof iris_detail_whole_kinds / sizeof iris_detail_whole_kinds[0], "mn route: the world communicator's check knows every collective", "kind %d", bad);
  }
}
