/* tests/host/env.c: the parsers of the environment: sizes, and the strict reading of every IRIS_* variable. */
#include "harness.h"
#include "internal/coll/options.h"

/* --------------------------------------------------------- size parser -- */
static void test_size_parser(void) {
  static const struct { const char *text; unsigned long long want; } good[] = {
      {"0", 0}, {"1", 1}, {"512", 512}, {"512B", 512}, {"64K", 65536}, {"64k", 65536}, {"64KB", 65536}, {"64KiB", 65536}, {"2M", 2ULL << 20},
      {"2MiB", 2ULL << 20}, {"1G", 1ULL << 30}, {"1gib", 0}, {"3GB", 3ULL << 30}, {"1T", 1ULL << 40}, {"16777215T", 16777215ULL << 40},
      {"18446744073709551615", 18446744073709551615ULL}, {"007", 7}};
  static const char *bad[] = {"", "-1", "+1", " 1", "1 ", "4iB", "1bB", "1b", "1Ki", "1KiBB", "1KK", "1.5G", "G", "0x10", "1e3", "16777216T",
                              "17179869184G", "18446744073709551616", "99999999999999999999999", "1 G"};
  size_t i;
  for (i = 0; i < sizeof good / sizeof good[0]; i++) {
    size_t v = 12345;
    iris_status_t st = iris_detail_parse_size_var("IRIS_HEAP_SIZE", good[i].text, &v);
    char nm[96];
    snprintf(nm, sizeof nm, "size parser accepts '%s'", good[i].text);
    if (!strcmp(good[i].text, "1gib")) { /* "iB" is case-sensitive: lower-case "ib" is refused */
      snprintf(nm, sizeof nm, "size parser refuses '%s'", good[i].text);
      check(st == IRIS_ERROR_INVALID_ARGUMENT, nm, "%s, %zu", sname(st), v);
      continue;
    }
    check(st == IRIS_SUCCESS && v == (size_t)good[i].want, nm, "%s, %zu (want %llu): '%s'", sname(st), v, good[i].want, iris_error_detail());
  }
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t v = 12345;
    iris_status_t st = iris_detail_parse_size_var("IRIS_HEAP_SIZE", bad[i], &v);
    char nm[96], want[64];
    snprintf(nm, sizeof nm, "size parser refuses '%s'", bad[i]);
    snprintf(want, sizeof want, "IRIS_HEAP_SIZE=%s", bad[i]);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && v == 12345 && (bad[i][0] ? has(iris_error_detail(), want) : has(iris_error_detail(), "IRIS_HEAP_SIZE")), nm,
          "%s, value %zu, detail '%s'", sname(st), v, iris_error_detail());
  }
  check(iris_detail_parse_size("64M") == (64u << 20) && iris_detail_parse_size("4iB") == 0 && iris_detail_parse_size(NULL) == 0,
        "size parser compatibility form", "64M %zu, 4iB %zu", iris_detail_parse_size("64M"), iris_detail_parse_size("4iB"));
  {
    /* the config: SIZE_MAX, values that overflow the 2 MiB rounding, bad IRIS_HEAP_SIZE */
    static const char *envs[] = {"-1", "17179869184G", "4iB", "0", "16777216T"};
    iris_config_t c;
    cfg_base(&c, 0, 1);
    c.heap_size = SIZE_MAX;
    expect_init("config heap_size SIZE_MAX", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "overflows");
    c.heap_size = SIZE_MAX - (1u << 20);
    expect_init("config heap_size overflowing the 2 MiB rounding", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "overflows");
    for (i = 0; i < sizeof envs / sizeof envs[0]; i++) {
      char nm[96], want[64];
      cfg_base(&c, 0, 1);
      c.heap_size = 0;
      setenv("IRIS_HEAP_SIZE", envs[i], 1);
      snprintf(nm, sizeof nm, "config IRIS_HEAP_SIZE=%s refused", envs[i]);
      snprintf(want, sizeof want, "IRIS_HEAP_SIZE=%s", envs[i]);
      expect_init(nm, &c, 0, IRIS_ERROR_INVALID_ARGUMENT, want);
    }
    unsetenv("IRIS_HEAP_SIZE");
    setenv("IRIS_TIMEOUT_MS", "10s", 1);
    cfg_base(&c, 0, 1);
    c.timeout_ms = 0;
    expect_init("config IRIS_TIMEOUT_MS=10s refused", &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "IRIS_TIMEOUT_MS=10s");
    unsetenv("IRIS_TIMEOUT_MS");
  }
  {
    /* a rendezvous name outside [A-Za-z0-9._-]{1,64} is an error naming it, never rewritten */
    static const char *bad[] = {"bad/name", "", "a b", "x123456789x123456789x123456789x123456789x123456789x123456789x1234"};
    size_t k;
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      iris_config_t c;
      char nm[160];
      cfg_base(&c, 0, 1);
      c.rendezvous = NULL;
      setenv("IRIS_RENDEZVOUS", bad[k], 1);
      snprintf(nm, sizeof nm, "config IRIS_RENDEZVOUS='%.20s%s' refused, not rewritten", bad[k], strlen(bad[k]) > 20 ? "..." : "");
      expect_init(nm, &c, 0, IRIS_ERROR_INVALID_ARGUMENT, *bad[k] ? "rendezvous name" : "IRIS_RENDEZVOUS is set but empty");
      unsetenv("IRIS_RENDEZVOUS");
      cfg_base(&c, 0, 1);
      c.rendezvous = bad[k];
      snprintf(nm, sizeof nm, "config .rendezvous='%.20s%s' refused, not rewritten", bad[k], strlen(bad[k]) > 20 ? "..." : "");
      expect_init(nm, &c, 0, IRIS_ERROR_INVALID_ARGUMENT, "rendezvous name");
    }
  }
  {
    /* values that say nothing are errors, never the default: set but empty, and 0 for a
     * bound (each variable alone, the others unset) */
    static const struct { const char *var, *val, *want; int field; } cases[] = {
        {"IRIS_HEAP_SIZE", "", "IRIS_HEAP_SIZE is set but empty", 0},
        {"IRIS_TIMEOUT_MS", "", "IRIS_TIMEOUT_MS is set but empty", 1},
        {"IRIS_TIMEOUT_MS", "0", "IRIS_TIMEOUT_MS=0", 1},
        {"IRIS_BARRIER_TIMEOUT_MS", "", "IRIS_BARRIER_TIMEOUT_MS is set but empty", 2},
        {"IRIS_BARRIER_TIMEOUT_MS", "0", "IRIS_BARRIER_TIMEOUT_MS=0", 2},
        {"IRIS_WAIT_TIMEOUT_MS", "", "IRIS_WAIT_TIMEOUT_MS is set but empty", 3},
        {"IRIS_WAIT_TIMEOUT_MS", "0", "IRIS_WAIT_TIMEOUT_MS=0", 3},
        {"IRIS_WAIT_TIMEOUT_MS", "99", "at least 100 ms", 3},
        {"IRIS_WAIT_TIMEOUT_MS", "2s", "IRIS_WAIT_TIMEOUT_MS=2s", 3},
    };
    size_t k;
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      iris_config_t c;
      char nm[128];
      cfg_base(&c, 0, 1);
      if (cases[k].field == 0) c.heap_size = 0;
      if (cases[k].field == 1) c.timeout_ms = 0;
      if (cases[k].field == 2) c.barrier_timeout_ms = 0;
      setenv(cases[k].var, cases[k].val, 1);
      snprintf(nm, sizeof nm, "config %s='%s' refused, not read as the default", cases[k].var, cases[k].val);
      expect_init(nm, &c, 0, IRIS_ERROR_INVALID_ARGUMENT, cases[k].want);
      unsetenv(cases[k].var);
    }
  }
}

/* Every IRIS_* variable goes through iris_detail_env (internal/core/util.h): unset is the
 * default; set but empty, or a value the variable cannot take, is an error naming it. Here
 * the helpers themselves, and the variables of the GEMM and collectives headers (read at
 * plan creation / setup, on the GPU side) through the same calls those headers make. */
static void test_env_strict(void) {
  static const char *const cores[3] = {"0", "1", "auto"};
  const char *v = NULL;
  int i, got, n;
  /* the one reader */
  unsetenv("IRIS_TEST_ENV");
  check(iris_detail_env("IRIS_TEST_ENV", &v) == 0, "env: unset is the default (0)", "");
  setenv("IRIS_TEST_ENV", "", 1);
  got = iris_detail_env("IRIS_TEST_ENV", &v);
  check(got == -1 && has(iris_error_detail(), "IRIS_TEST_ENV is set but empty"), "env: set but empty is an error naming the variable", "got %d, '%s'", got,
        iris_error_detail());
  setenv("IRIS_TEST_ENV", "x", 1);
  got = iris_detail_env("IRIS_TEST_ENV", &v);
  check(got == 1 && v && !strcmp(v, "x"), "env: a value is handed out", "got %d", got);
  /* integers: empty, malformed, signed, too large */
  {
    static const struct { const char *val; int want, value; } ints[] = {{"", -1, 0}, {"12", 1, 12}, {"0", 1, 0}, {"-1", -1, 0}, {"1e3", -1, 0}, {" 1", -1, 0},
                                                                        {"99999999999", -1, 0}};
    for (i = 0; i < (int)(sizeof ints / sizeof ints[0]); i++) {
      char nm[96];
      n = -7;
      setenv("IRIS_TEST_ENV", ints[i].val, 1);
      got = iris_detail_env_int("IRIS_TEST_ENV", &n);
      snprintf(nm, sizeof nm, "env int: IRIS_TEST_ENV='%s' gives %s", ints[i].val, ints[i].want > 0 ? "its value" : "an error naming it");
      check(got == ints[i].want && (got < 0 ? has(iris_error_detail(), "IRIS_TEST_ENV") : n == ints[i].value), nm, "got %d, value %d, '%s'", got, n,
            iris_error_detail());
    }
  }
  unsetenv("IRIS_TEST_ENV");
  /* IRIS_GEMM_TMA (iris_gemm.h): 0 or 1; "off", "no" or empty must not silently leave TMA on */
  {
    static const struct { const char *val; int want, on; } tma[] = {{NULL, 0, 1}, {"0", 1, 0}, {"1", 1, 1}, {"", -1, 1}, {"off", -1, 1}, {"no", -1, 1}, {"00", -1, 1}};
    for (i = 0; i < (int)(sizeof tma / sizeof tma[0]); i++) {
      char nm[96];
      int on = 1;
      if (tma[i].val) setenv("IRIS_GEMM_TMA", tma[i].val, 1);
      else unsetenv("IRIS_GEMM_TMA");
      got = iris_detail_env_flag("IRIS_GEMM_TMA", " (0: the fused kernel runs the cp.async core; 1: TMA, the default)", &on);
      snprintf(nm, sizeof nm, "env: IRIS_GEMM_TMA%s%s%s %s", tma[i].val ? "='" : " unset", tma[i].val ? tma[i].val : "", tma[i].val ? "'" : "",
               tma[i].want < 0 ? "is an error naming it (and its choices)" : tma[i].on ? "leaves TMA on" : "turns TMA off");
      check(got == tma[i].want && on == tma[i].on &&
                (got >= 0 || has(iris_error_detail(), tma[i].val[0] ? "IRIS_GEMM_TMA='" : "IRIS_GEMM_TMA is set but empty")) &&
                (got >= 0 || !tma[i].val[0] || has(iris_error_detail(), "0 or 1")),
            nm,
            "got %d, on %d, '%s'", got, on, iris_error_detail());
    }
    unsetenv("IRIS_GEMM_TMA");
  }
  /* IRIS_GEMM_RS_PINGPONG (iris_gemm_reduce.h): 0, 1 or auto; empty is an error, not the default */
  {
    static const struct { const char *val; int want, which; } pp[] = {{"0", 1, 0}, {"1", 1, 1}, {"auto", 1, 2}, {"", -1, -1}, {"2", -1, -1}, {"AUTO", -1, -1}};
    for (i = 0; i < (int)(sizeof pp / sizeof pp[0]); i++) {
      char nm[96];
      int which = -1;
      setenv("IRIS_GEMM_RS_PINGPONG", pp[i].val, 1);
      got = iris_detail_env_choice("IRIS_GEMM_RS_PINGPONG", cores, 3, NULL, &which);
      snprintf(nm, sizeof nm, "env: IRIS_GEMM_RS_PINGPONG='%s' %s", pp[i].val, pp[i].want < 0 ? "is an error (naming 0, 1 or auto)" : "is taken");
      check(got == pp[i].want && which == pp[i].which && (got >= 0 || has(iris_error_detail(), pp[i].val[0] ? "0, 1 or auto" : "is set but empty")), nm, "got %d, which %d, '%s'", got, which,
            iris_error_detail());
    }
    unsetenv("IRIS_GEMM_RS_PINGPONG");
  }
  /* IRIS_COLL_CHECK (iris_collectives.h): 0 or 1 */
  {
    int on = 1;
    setenv("IRIS_COLL_CHECK", "", 1);
    got = iris_detail_env_flag("IRIS_COLL_CHECK", NULL, &on);
    check(got == -1 && on == 1 && has(iris_error_detail(), "IRIS_COLL_CHECK"), "env: IRIS_COLL_CHECK='' is an error, the check stays on", "got %d", got);
    setenv("IRIS_COLL_CHECK", "yes", 1);
    got = iris_detail_env_flag("IRIS_COLL_CHECK", NULL, &on);
    check(got == -1 && has(iris_error_detail(), "IRIS_COLL_CHECK='yes'"), "env: IRIS_COLL_CHECK='yes' is an error naming its value", "got %d, '%s'", got,
          iris_error_detail());
    unsetenv("IRIS_COLL_CHECK");
  }
  /* IRIS_COLL_FUSED_STAGING (iris_collectives.h, read at setup as IRIS_COLL_CHECK is): 0 or 1 */
  {
    static const struct { const char *val; int got, on; } fs[] = {{"", -1, 1}, {"0", 0, 0}, {"1", 0, 1}, {"on", -1, 1}, {"2", -1, 1}};
    char nm[128];
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
      int on = 1;
      setenv("IRIS_COLL_FUSED_STAGING", fs[i].val, 1);
      got = iris_detail_env_flag("IRIS_COLL_FUSED_STAGING", NULL, &on);
      snprintf(nm, sizeof nm, "env: IRIS_COLL_FUSED_STAGING='%s' %s", fs[i].val, fs[i].got < 0 ? "is an error naming it, the default stays" : "is taken");
      check((got < 0) == (fs[i].got < 0) && on == fs[i].on && (got >= 0 || has(iris_error_detail(), "IRIS_COLL_FUSED_STAGING")), nm, "got %d, on %d, '%s'", got, on,
            iris_error_detail());
    }
    unsetenv("IRIS_COLL_FUSED_STAGING");
  }
  /* IRIS_COLL_CTAS (read at setup, agreed by the ranks): 0..IRIS_COLL_MAX_CTAS CTAs, nothing else */
  {
    static const struct { const char *val; int got, n; } ct[] = {{"", -1, 7}, {"16", 1, 16}, {"0", 1, 0}, {"1", 1, 1}, {"256", 1, 256}, {"257", -1, 7},
                                                                 {"-1", -1, 7}, {"16k", -1, 7}, {" 16", -1, 7}, {"99999999999", -1, 7}};
    char nm[128];
    for (size_t i = 0; i < sizeof ct / sizeof ct[0]; i++) {
      int n = 7; /* untouched unless taken */
      setenv("IRIS_COLL_CTAS", ct[i].val, 1);
      got = iris_coll_ctas_from_env(&n);
      snprintf(nm, sizeof nm, "env: IRIS_COLL_CTAS='%s' %s", ct[i].val, ct[i].got < 0 ? "is an error naming it, nothing taken" : "is taken");
      check(got == ct[i].got && n == ct[i].n && (got >= 0 || has(iris_error_detail(), "IRIS_COLL_CTAS")), nm, "got %d, n %d, '%s'", got, n, iris_error_detail());
      { /* a split reads it for the team's grid rule (internal/core/team.h) as the collectives do, and leaves the detail alone */
        iris_t *hc = iris_detail_host_only_ctx(1 << 20, (void *)(uintptr_t)0x100000);
        int sms = -5, ctas = -5;
        iris_detail_fail(IRIS_ERROR_TIMEOUT, "an earlier failure");
        if (hc) iris_detail_team_grid_mine(hc, &sms, &ctas);
        snprintf(nm, sizeof nm, "env: IRIS_COLL_CTAS='%s' read by a split: %s, the error detail untouched", ct[i].val, ct[i].got < 0 ? "malformed" : "taken");
        check(hc && sms >= 0 && ctas == (ct[i].got < 0 ? IRIS_DETAIL_TEAM_CTAS_MALFORMED : ct[i].n) && !strcmp(iris_error_detail(), "an earlier failure"), nm,
              "sms %d ctas %d, detail '%s'", sms, ctas, iris_error_detail());
        iris_detail_host_only_free(hc);
      }
    }
    unsetenv("IRIS_COLL_CTAS");
    {
      int n = 7;
      got = iris_coll_ctas_from_env(&n);
      check(got == 0 && n == 7, "env: IRIS_COLL_CTAS unset: nothing taken (the automatic grid)", "got %d, n %d", got, n);
    }
  }
  /* IRIS_COLL_TEST_WRAP (read at setup as the others): a count of calls, nothing else */
  {
    static const struct { const char *val; int got, n; } tw[] = {{"", -1, 0}, {"8", 1, 8}, {"0", 1, 0}, {"-3", -1, 0}, {"8x", -1, 0}, {"99999999999", -1, 0}};
    char nm[128];
    for (size_t i = 0; i < sizeof tw / sizeof tw[0]; i++) {
      int n = 0;
      setenv("IRIS_COLL_TEST_WRAP", tw[i].val, 1);
      got = iris_detail_env_int("IRIS_COLL_TEST_WRAP", &n);
      snprintf(nm, sizeof nm, "env: IRIS_COLL_TEST_WRAP='%s' %s", tw[i].val, tw[i].got < 0 ? "is an error naming it" : "is taken");
      check(got == tw[i].got && (got < 0 || n == tw[i].n) && (got >= 0 || has(iris_error_detail(), "IRIS_COLL_TEST_WRAP")), nm, "got %d, n %d, '%s'", got, n,
            iris_error_detail());
    }
    unsetenv("IRIS_COLL_TEST_WRAP");
  }
  /* IRIS_RENDEZVOUS, IRIS_HOST_ID, IRIS_MN_NCCL_WHOLE through the one strict reader, also
   * where an environment is a table (iris_launch_env's lookup): set but empty is an error
   * naming it, never unset */
  {
    static const char *big_empty[] = {"IRIS_RANK=0", "IRIS_WORLD_SIZE=100000", "IRIS_RENDEZVOUS=", NULL},
                      *big_tcp[] = {"IRIS_RANK=0", "IRIS_WORLD_SIZE=1024", "IRIS_RENDEZVOUS=tcp", NULL}, *id_empty[] = {"IRIS_HOST_ID=", NULL};
    iris_launch_env_t le;
    char id[IRIS_DETAIL_HOST_ID_BYTES];
    const char *v = NULL;
    iris_status_t st = iris_launch_env(table_getenv, (void *)big_empty, &le);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_RENDEZVOUS is set but empty"),
          "env: IRIS_RENDEZVOUS='' read by iris_launch_env (a world above IRIS_MAX_RANKS) is an error naming it", "%s '%s'", sname(st), iris_error_detail());
    st = iris_launch_env(table_getenv, (void *)big_tcp, &le);
    check(st == IRIS_SUCCESS && le.world_size == 1024, "env: IRIS_RENDEZVOUS=tcp lets iris_launch_env take a world above IRIS_MAX_RANKS", "%s '%s'", sname(st),
          iris_error_detail());
    st = iris_detail_host_id(table_getenv, (void *)id_empty, id, sizeof id);
    check(st == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_HOST_ID is set but empty"), "env: IRIS_HOST_ID='' through a lookup is an error naming it",
          "%s '%s'", sname(st), iris_error_detail());
    check(iris_detail_env_in(table_getenv, (void *)id_empty, "IRIS_HOST_ID", &v) == -1 && iris_detail_env_in(table_getenv, (void *)id_empty, "IRIS_X", &v) == 0 &&
              iris_detail_env_in(table_getenv, (void *)big_tcp, "IRIS_RENDEZVOUS", &v) == 1 && !strcmp(v, "tcp"),
          "env: the strict reader through a lookup: empty -1, unset 0, set 1", "'%s'", iris_error_detail());
  }
  /* IRIS_NCCL_LIBRARY and IRIS_RENDEZVOUS_DIR: empty is an error, not the default library or directory */
  {
    const iris_detail_nccl_lib_t *lib = NULL;
    char dir[160];
    setenv("IRIS_NCCL_LIBRARY", "", 1);
    got = (int)iris_detail_nccl_load(&lib);
    check(got == IRIS_ERROR_INVALID_ARGUMENT && has(iris_error_detail(), "IRIS_NCCL_LIBRARY is set but empty"), "env: IRIS_NCCL_LIBRARY='' is an error",
          "status %d, '%s'", got, iris_error_detail());
    unsetenv("IRIS_NCCL_LIBRARY");
    setenv("IRIS_RENDEZVOUS_DIR", "", 1);
    got = iris_detail_rdv_dir(NULL, dir, sizeof dir);
    check(got == -1 && has(iris_error_detail(), "IRIS_RENDEZVOUS_DIR is set but empty"), "env: IRIS_RENDEZVOUS_DIR='' is an error", "got %d, '%s'", got,
          iris_error_detail());
    unsetenv("IRIS_RENDEZVOUS_DIR");
  }
}
