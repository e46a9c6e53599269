/* tests/nccl/route_test.cc — the decisions of libiris_nccl.so (nccl/route.h) on the CPU:
 * sizes and the table variable, NCCL type/op -> iris, the per-call route, the bring-up
 * verdict from every rank's record, the heap and staging sizes, result codes.
 * Prints PASS / FAIL per check. */
#include <limits.h>
#include <stdio.h>
#include "../../nccl/route.h"

static int failed;
static void check(int ok, const char *name) {
  printf("%s: %s\n", ok ? "PASS" : "FAIL", name);
  if (!ok) failed = 1;
}

static iris_nccl_record_t good(int r) {
  iris_nccl_record_t x;
  iris_nccl_table_t t = iris_nccl_default_table();
  memset(&x, 0, sizeof x);
  x.magic = IRIS_NCCL_RECORD_MAGIC;
  x.version = IRIS_NCCL_RECORD_VERSION;
  x.want = 1;
  x.cc_major = 9;
  x.sms = 132;
  x.heap_bytes = iris_nccl_default_heap(4, 4 * IRIS_NCCL_MIB);
  memcpy(x.max_bytes, t.max_bytes, sizeof x.max_bytes);
  snprintf(x.staging, sizeof x.staging, "4194304");
  snprintf(x.host, sizeof x.host, "node-a/boot-1");
  snprintf(x.bus, sizeof x.bus, "00000000:%02X:00.0", 0x18 + r);
  return x;
}

int main(void) {
  unsigned long long v = 0, bytes = 0;
  iris_nccl_table_t t;
  char why[256] = "";
  iris_dtype_t dt;
  iris_redop_t op;
  int ok, k;

  /* the switches (IRIS_NCCL_DISABLE, _GROUPS, _DEBUG): unset keeps the default; set but empty is malformed */
  {
    int x = 7, y = 7, z = 1, w = 1;
    check(iris_nccl_parse_level(NULL, 1, &x) == 0 && x == 7 && iris_nccl_parse_level("", 1, &y) != 0 && y == 7,
          "switch: unset keeps the default, set but empty is malformed (and leaves the value)");
    check(iris_nccl_parse_level("0", 1, &z) == 0 && z == 0 && iris_nccl_parse_level("1", 1, &x) == 0 && x == 1 && iris_nccl_parse_level("2", 2, &y) == 0 &&
              y == 2,
          "switch: 0, 1 (and 2 where the level goes to 2) are taken");
    ok = 1;
    for (const char *bad : {"off", "no", "true", "2", "-1", "+1", " 1", "1 ", "01x", "1.0", "99999999999"}) ok = ok && iris_nccl_parse_level(bad, 1, &w) != 0;
    check(ok && w == 1, "switch: a word, a sign, a space, a number past the maximum are malformed (and leave the value)");
  }

  /* which new communicators are blocking (only those get an iris context at creation) */
  {
    const int U = NCCL_CONFIG_UNDEF_INT;
    check(iris_nccl_is_blocking(U, -1, NULL, -1) == 1 && iris_nccl_is_blocking(U, -1, "", -1) == 1 && iris_nccl_is_blocking(U, -1, "0", -1) == 0 &&
              iris_nccl_is_blocking(U, -1, "1", -1) == 1,
          "blocking: by default, NCCL_COMM_BLOCKING when set (set but empty: the default)");
    check(iris_nccl_is_blocking(0, -1, "1", -1) == 0 && iris_nccl_is_blocking(1, -1, "0", -1) == 1 && iris_nccl_is_blocking(U, 0, "1", -1) == 0 &&
              iris_nccl_is_blocking(U, 1, "0", -1) == 1,
          "blocking: the config's field first, then what a split without a config inherits, then the variable");
    check(iris_nccl_is_blocking(1, -1, NULL, 0) == 0 && iris_nccl_is_blocking(U, 1, NULL, 0) == 0 && iris_nccl_is_blocking(1, -1, NULL, 1) == 1 &&
              iris_nccl_is_blocking(0, -1, NULL, 1) == 0 && iris_nccl_is_blocking(U, 1, NULL, 1) == 1,
          "blocking: a split from a non-blocking parent is not, whatever its own config says (NCCL runs the split under the parent's); "
          "from a blocking parent, the child's own");
  }

  /* ncclCommGetAsyncError: NCCL's error first; iris's, once seen, stays (as NCCL's) */
  {
    int l1 = 9, l2 = 9, l3 = 9, l4 = 9, l5 = 9, l6 = 9;
    const ncclResult_t a = iris_nccl_async_answer(ncclSuccess, 0, IRIS_SUCCESS, &l1), b = iris_nccl_async_answer(ncclSuccess, 0, IRIS_ERROR_MISMATCH, &l2),
                       c = iris_nccl_async_answer(ncclSuccess, (int)ncclInvalidUsage, IRIS_SUCCESS, &l3),
                       d = iris_nccl_async_answer(ncclSystemError, (int)ncclInvalidUsage, IRIS_ERROR_TIMEOUT, &l4),
                       e = iris_nccl_async_answer(ncclSuccess, 0, IRIS_ERROR_ABORTED, &l5), f = iris_nccl_async_answer(ncclSuccess, 0, IRIS_ERROR_TIMEOUT, &l6);
    check(a == ncclSuccess && l1 == 0 && b == ncclInvalidUsage && l2 == 1 && c == ncclInvalidUsage && l3 == 0 && d == ncclSystemError && l4 == 0 &&
              e == ncclSuccess && l5 == 0 && f == ncclRemoteError && l6 == 1,
          "async error: none; iris's mismatch latched; a latched one stays with iris clear again; NCCL's own first; an abort is none; a timeout latched");
  }

  /* sizes */
  check(iris_nccl_parse_size("4096", &v) == 0 && v == 4096, "size: 4096");
  check(iris_nccl_parse_size("64K", &v) == 0 && v == 65536, "size: 64K");
  check(iris_nccl_parse_size("4M", &v) == 0 && v == 4ull << 20, "size: 4M");
  check(iris_nccl_parse_size("2MiB", &v) == 0 && v == 2ull << 20, "size: 2MiB");
  check(iris_nccl_parse_size("512KB", &v) == 0 && v == 512ull << 10, "size: 512KB");
  check(iris_nccl_parse_size("1G", &v) == 0 && v == 1ull << 30, "size: 1G");
  check(iris_nccl_parse_size("0", &v) == 0 && v == 0, "size: 0");
  check(iris_nccl_parse_size("", &v) != 0 && iris_nccl_parse_size("-1", &v) != 0 && iris_nccl_parse_size("4X", &v) != 0 &&
            iris_nccl_parse_size("M", &v) != 0 && iris_nccl_parse_size("99999999999999999999", &v) != 0 && iris_nccl_parse_size("20000000000T", &v) != 0,
        "size: empty, signed, junk, no digits, overflow refused");

  /* the table variable */
  check(iris_nccl_parse_table(NULL, &t, why, sizeof why) == 0 && t.max_bytes[IRIS_NCCL_AR] == 4ull << 20 && t.max_bytes[IRIS_NCCL_AG] == 4ull << 20 &&
            t.max_bytes[IRIS_NCCL_RS] == 4ull << 20 && t.max_bytes[IRIS_NCCL_BC] == 1ull << 20 && t.max_bytes[IRIS_NCCL_A2A] == 1ull << 20,
        "table: defaults (all-reduce, all-gather, reduce-scatter 4 MiB; broadcast 1 MiB; all-to-all 1 MiB)");
  ok = iris_nccl_parse_table("8M", &t, why, sizeof why) == 0;
  for (k = 0; k < IRIS_NCCL_KINDS; k++) ok = ok && t.max_bytes[k] == 8ull << 20;
  check(ok, "table: one size for every collective");
  check(iris_nccl_parse_table("allreduce=16M,broadcast=0,alltoall=64K", &t, why, sizeof why) == 0 && t.max_bytes[IRIS_NCCL_AR] == 16ull << 20 &&
            t.max_bytes[IRIS_NCCL_BC] == 0 && t.max_bytes[IRIS_NCCL_A2A] == 64ull << 10 && t.max_bytes[IRIS_NCCL_AG] == 4ull << 20,
        "table: a list sets the named collectives, the others keep their defaults");
  why[0] = 0;
  check(iris_nccl_parse_table("allreduce=16M,bogus=1M", &t, why, sizeof why) != 0 && strstr(why, "bogus") && t.max_bytes[IRIS_NCCL_AR] == 4ull << 20,
        "table: an unknown name is refused, named in why, and the defaults stay");
  check(iris_nccl_parse_table("allreduce", &t, why, sizeof why) != 0 && iris_nccl_parse_table("lots", &t, why, sizeof why) != 0,
        "table: a name without a size, a word without '=': refused");
  why[0] = 0;
  check(iris_nccl_parse_table("", &t, why, sizeof why) != 0 && strstr(why, "IRIS_NCCL_MAX_BYTES is set but empty") && t.max_bytes[IRIS_NCCL_AR] == 4ull << 20,
        "table: set but empty is refused, named in why, and the defaults stay");
  {
    iris_nccl_table_t w;
    iris_nccl_parse_table(NULL, &t, why, sizeof why);
    w = iris_nccl_table_for_world(&t, 2);
    ok = w.max_bytes[IRIS_NCCL_BC] == 4ull << 20 && w.max_bytes[IRIS_NCCL_A2A] == 4ull << 20 && w.max_bytes[IRIS_NCCL_AR] == 4ull << 20;
    w = iris_nccl_table_for_world(&t, 4);
    ok = ok && w.max_bytes[IRIS_NCCL_BC] == 1ull << 20 && w.max_bytes[IRIS_NCCL_A2A] == 1ull << 20;
    check(ok, "table by world: at 2 ranks broadcast and all-to-all to 4 MiB by default, at 4 the defaults");
    iris_nccl_parse_table("broadcast=512K", &t, why, sizeof why);
    w = iris_nccl_table_for_world(&t, 2);
    ok = w.max_bytes[IRIS_NCCL_BC] == 512ull << 10 && w.max_bytes[IRIS_NCCL_A2A] == 4ull << 20;
    iris_nccl_parse_table("256K", &t, why, sizeof why);
    w = iris_nccl_table_for_world(&t, 2);
    ok = ok && w.max_bytes[IRIS_NCCL_BC] == 256ull << 10 && w.max_bytes[IRIS_NCCL_A2A] == 256ull << 10;
    check(ok, "table by world: a size IRIS_NCCL_MAX_BYTES names is kept at 2 ranks (one named, or all)");
  }

  /* NCCL type/op -> iris */
  check(iris_nccl_map_reduce(ncclFloat32, ncclSum, &dt, &op) && dt == IRIS_FLOAT32 && op == IRIS_SUM, "map: fp32 sum");
  check(iris_nccl_map_reduce(ncclBfloat16, ncclAvg, &dt, &op) && dt == IRIS_BFLOAT16 && op == IRIS_AVG, "map: bf16 avg -> IRIS_AVG");
  check(iris_nccl_map_reduce(ncclFloat16, ncclMin, &dt, &op) && dt == IRIS_FLOAT16 && op == IRIS_MIN, "map: fp16 min");
  check(iris_nccl_map_reduce(ncclFloat8e4m3, ncclMax, &dt, &op) && dt == IRIS_FLOAT8_E4M3 && op == IRIS_MAX, "map: fp8 e4m3 max");
  check(iris_nccl_map_reduce(ncclFloat8e5m2, ncclSum, &dt, &op) && dt == IRIS_FLOAT8_E5M2, "map: fp8 e5m2 sum");
  check(iris_nccl_map_reduce(ncclInt32, ncclAvg, &dt, &op) && dt == IRIS_INT32 && op == IRIS_AVG, "map: int32 avg (NCCL's integer avg)");
  check(iris_nccl_map_reduce(ncclInt64, ncclMin, &dt, &op) && dt == IRIS_INT64, "map: int64 min");
  check(iris_nccl_map_reduce(ncclUint8, ncclMax, &dt, &op) && dt == IRIS_UINT8, "map: uint8 max");
  check(iris_nccl_map_reduce(ncclInt8, ncclSum, &dt, &op) && dt == IRIS_UINT8, "map: int8 sum as uint8 (the same bits)");
  check(iris_nccl_map_reduce(ncclUint32, ncclSum, &dt, &op) && dt == IRIS_INT32, "map: uint32 sum as int32");
  check(iris_nccl_map_reduce(ncclUint64, ncclSum, &dt, &op) && dt == IRIS_INT64, "map: uint64 sum as int64");
  check(!iris_nccl_map_reduce(ncclInt8, ncclMax, &dt, &op) && !iris_nccl_map_reduce(ncclUint32, ncclMin, &dt, &op) &&
            !iris_nccl_map_reduce(ncclUint64, ncclAvg, &dt, &op),
        "map: int8 / uint32 / uint64 min, max, avg go to NCCL (signedness changes them)");
  check(!iris_nccl_map_reduce(ncclFloat32, ncclProd, &dt, &op), "map: ncclProd goes to NCCL");
  check(!iris_nccl_map_reduce(ncclFloat64, ncclSum, &dt, &op), "map: fp64 reductions go to NCCL");
  check(!iris_nccl_map_reduce(ncclFloat32, (ncclRedOp_t)ncclNumOps, &dt, &op), "map: a PreMulSum op (>= ncclNumOps) goes to NCCL");
  check(!iris_nccl_map_reduce((ncclDataType_t)ncclNumTypes, ncclSum, &dt, &op), "map: a type outside the enum goes to NCCL");
  check(iris_nccl_map_move(ncclFloat64, &dt) && dt == IRIS_INT64 && iris_nccl_map_move(ncclInt8, &dt) && dt == IRIS_UINT8 &&
            iris_nccl_map_move(ncclBfloat16, &dt) && dt == IRIS_FLOAT16 && iris_nccl_map_move(ncclUint32, &dt) && dt == IRIS_INT32,
        "map: moves take any type, by its size");

  /* the per-call route (4 ranks, default table) */
  t = iris_nccl_default_table();
  check(iris_nccl_route(IRIS_NCCL_AR, &t, 4, 1 << 20, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_IRIS && bytes == 4ull << 20,
        "route: all-reduce of 4 MiB -> iris");
  check(iris_nccl_route(IRIS_NCCL_AR, &t, 4, (1 << 20) + 1, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_SIZE,
        "route: all-reduce of 4 MiB + 4 B -> NCCL (size)");
  check(iris_nccl_route(IRIS_NCCL_AR, &t, 4, 256, ncclFloat64, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_TYPE_OP, "route: fp64 all-reduce -> NCCL");
  check(iris_nccl_route(IRIS_NCCL_AG, &t, 4, 1 << 18, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_IRIS && bytes == 4ull << 20,
        "route: all-gather measures its output (4 ranks x 1 MiB = 4 MiB -> iris)");
  check(iris_nccl_route(IRIS_NCCL_AG, &t, 8, 1 << 18, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_SIZE,
        "route: the same all-gather at 8 ranks (8 MiB) -> NCCL");
  check(iris_nccl_route(IRIS_NCCL_AG, &t, 4, 1000, ncclFloat64, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_IRIS && dt == IRIS_INT64,
        "route: fp64 all-gather -> iris (bytes)");
  check(iris_nccl_route(IRIS_NCCL_RS, &t, 4, 1 << 18, ncclBfloat16, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_IRIS && bytes == 2ull << 20,
        "route: reduce-scatter measures its input");
  check(iris_nccl_route(IRIS_NCCL_RS, &t, 4, 1024, ncclFloat32, ncclProd, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_TYPE_OP, "route: reduce-scatter prod -> NCCL");
  check(iris_nccl_route(IRIS_NCCL_BC, &t, 4, 1 << 18, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_IRIS, "route: broadcast of 1 MiB -> iris");
  check(iris_nccl_route(IRIS_NCCL_BC, &t, 4, (1 << 18) + 1, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_SIZE,
        "route: broadcast above 1 MiB -> NCCL");
  /* a broadcast whose root is outside [0, world) on one rank only (rank 2 passes 4, or
   * -1, the others 1): every rank routes it as its peers do, by kind, count, type and the
   * table (the root takes no part); only rank 2 finds its root bad, which the shim then
   * refuses through iris (ncclInvalidArgument; iris takes part, so the peers' call reports
   * a mismatch instead of waiting). The old route sent rank 2's call alone to NCCL. */
  {
    const size_t counts[4] = {16, 1 << 18, (1 << 18) + 1, 0};
    const int want[4] = {IRIS_NCCL_ROUTE_IRIS, IRIS_NCCL_ROUTE_IRIS, IRIS_NCCL_ROUTE_SIZE, IRIS_NCCL_ROUTE_EMPTY};
    const int bad_roots[2] = {4, -1};
    int b, c, r;
    ok = 1;
    for (b = 0; b < 2; b++)
      for (c = 0; c < 4; c++) {
        const int roots[4] = {1, 1, bad_roots[b], 1};
        int first = -1;
        for (r = 0; r < 4; r++) {
          char w[96] = "";
          const int route = iris_nccl_route(IRIS_NCCL_BC, &t, 4, counts[c], ncclFloat32, ncclSum, &dt, &op, &bytes);
          const int bad = iris_nccl_bad_root(IRIS_NCCL_BC, roots[r], 4, w, sizeof w);
          if (r == 0) first = route;
          ok = ok && route == first && route == want[c] && bad == (r == 2) && (!bad || (strstr(w, b ? "root -1" : "root 4") && strstr(w, "[0, 4)")));
        }
      }
    check(ok, "route: a broadcast with a root outside [0, world) on one rank routes as on the others (iris in the table, NCCL above it or at count 0); only that rank's root is bad, named with the world");
    ok = 1;
    for (r = 0; r < 4; r++) ok = ok && !iris_nccl_bad_root(IRIS_NCCL_BC, r, 4, why, sizeof why);
    for (int bad : {4, 5, -1, INT_MIN, INT_MAX}) ok = ok && iris_nccl_bad_root(IRIS_NCCL_BC, bad, 4, why, sizeof why);
    for (k = 0; k < IRIS_NCCL_KINDS; k++) ok = ok && (k == IRIS_NCCL_BC || !iris_nccl_bad_root(k, 0, 4, why, sizeof why));
    check(ok, "bad root: 0 to world-1 are roots; world, -1, INT_MIN, INT_MAX are not; the kinds without a root have none bad");
  }
  check(iris_nccl_route(IRIS_NCCL_AR, &t, 4, 0, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_EMPTY, "route: count 0 -> NCCL");
  check(iris_nccl_route(IRIS_NCCL_A2A, &t, 4, 1 << 16, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_IRIS && bytes == 1ull << 20,
        "route: all-to-all of 1 MiB -> iris, measured by its send buffer");
  check(iris_nccl_route(IRIS_NCCL_A2A, &t, 4, (1 << 16) + 1, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_SIZE,
        "route: all-to-all above 1 MiB -> NCCL");
  iris_nccl_parse_table("alltoall=0", &t, why, sizeof why);
  check(iris_nccl_route(IRIS_NCCL_A2A, &t, 4, 16, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_SIZE, "route: alltoall=0 sends it to NCCL");
  check(iris_nccl_route(IRIS_NCCL_AR, &t, 4, ~(size_t)0 / 2, ncclFloat32, ncclSum, &dt, &op, &bytes) == IRIS_NCCL_ROUTE_SIZE,
        "route: an absurd count cannot overflow into a small byte count");
  iris_nccl_parse_table("0", &t, why, sizeof why);
  ok = 1;
  for (k = 0; k < IRIS_NCCL_KINDS; k++) ok = ok && iris_nccl_route(k, &t, 4, 1, ncclUint8, ncclSum, &dt, &op, &bytes) != IRIS_NCCL_ROUTE_IRIS;
  check(ok, "route: IRIS_NCCL_MAX_BYTES=0 sends everything to NCCL");

  /* this host's identity in the bring-up record: IRIS_HOST_ID by iris's rule (set but
   * empty is an error naming it, never the default; the shim then leaves every
   * communicator to NCCL with that reason) */
  {
    char id[160] = "", w[160] = "";
    const char *saved = getenv("IRIS_HOST_ID");
    char keep[256] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    unsetenv("IRIS_HOST_ID");
    check(iris_nccl_host_identity(id, sizeof id, w, sizeof w) == 0 && strchr(id, '/') && strncmp(id, "id:", 3) != 0,
          "host id: IRIS_HOST_ID unset -> hostname/boot id");
    setenv("IRIS_HOST_ID", "vnode1", 1);
    check(iris_nccl_host_identity(id, sizeof id, w, sizeof w) == 0 && !strcmp(id, "id:vnode1"), "host id: IRIS_HOST_ID=vnode1 -> id:vnode1");
    setenv("IRIS_HOST_ID", "", 1);
    w[0] = 0;
    check(iris_nccl_host_identity(id, sizeof id, w, sizeof w) == -1 && strstr(w, "IRIS_HOST_ID is set but empty"),
          "host id: IRIS_HOST_ID set but empty -> an error naming it (not read as unset)");
    {
      const char *v = NULL;
      w[0] = 0;
      check(iris_nccl_env_strict("IRIS_HOST_ID", &v, w, sizeof w) == -1 && v == NULL && strstr(w, "IRIS_HOST_ID") &&
                (unsetenv("IRIS_NCCL_ROUTE_TEST_X"), iris_nccl_env_strict("IRIS_NCCL_ROUTE_TEST_X", &v, w, sizeof w) == 0) &&
                (setenv("IRIS_NCCL_ROUTE_TEST_X", "a", 1), iris_nccl_env_strict("IRIS_NCCL_ROUTE_TEST_X", &v, w, sizeof w) == 1) && v && !strcmp(v, "a"),
            "env: the strict reader (iris's rule): set but empty -1 naming it, unset 0, set 1 with the value");
      unsetenv("IRIS_NCCL_ROUTE_TEST_X");
    }
    if (saved) setenv("IRIS_HOST_ID", keep, 1);
    else unsetenv("IRIS_HOST_ID");
  }

  /* the bring-up verdict */
  {
    iris_nccl_record_t r[4];
    for (k = 0; k < 4; k++) r[k] = good(k);
    check(iris_nccl_decide(r, 4, why, sizeof why) == 1, "verdict: 4 ranks, one host, 4 GPUs, same settings -> iris");
    check(iris_nccl_decide(r, 1, why, sizeof why) == 0, "verdict: one rank -> NCCL");
    r[2].want = 0;
    snprintf(r[2].why, sizeof r[2].why, "the shim's table of 4096 communicators is full");
    check(iris_nccl_decide(r, 4, why, sizeof why) == 0 && strstr(why, "rank 2") && strstr(why, "full"), "verdict: a rank that cannot -> NCCL, naming it and why");
    r[2] = good(2);
    snprintf(r[3].host, sizeof r[3].host, "node-b/boot-7");
    check(iris_nccl_decide(r, 4, why, sizeof why) == 0 && strstr(why, "different hosts"), "verdict: two hosts -> NCCL");
    r[3] = good(3);
    snprintf(r[1].bus, sizeof r[1].bus, "%s", r[0].bus);
    check(iris_nccl_decide(r, 4, why, sizeof why) == 0 && strstr(why, "share the GPU"), "verdict: two ranks on one GPU -> NCCL");
    r[1] = good(1);
    r[0].cc_major = 8;
    check(iris_nccl_decide(r, 4, why, sizeof why) == 0 && strstr(why, "compute capability"), "verdict: a pre-Hopper GPU -> NCCL");
    r[0] = good(0);
    r[2].sms = 114;
    check(iris_nccl_decide(r, 4, why, sizeof why) == 0 && strstr(why, "SMs"), "verdict: GPUs of different SM counts -> NCCL");
    r[2] = good(2);
    r[3].max_bytes[IRIS_NCCL_AR] = 1;
    check(iris_nccl_decide(r, 4, why, sizeof why) == 0 && strstr(why, "differ"), "verdict: ranks with other IRIS_NCCL_MAX_BYTES -> NCCL");
    r[3] = good(3);
    r[1].heap_bytes += 2 << 20;
    check(iris_nccl_decide(r, 4, why, sizeof why) == 0, "verdict: ranks with another heap size -> NCCL");
    r[1] = good(1);
    snprintf(r[1].staging, sizeof r[1].staging, "64M");
    check(iris_nccl_decide(r, 4, why, sizeof why) == 0, "verdict: ranks with another staging size -> NCCL");
    r[1] = good(1);
    r[1].version = 99;
    check(iris_nccl_decide(r, 4, why, sizeof why) == 0 && strstr(why, "version"), "verdict: another shim version -> NCCL");
    r[1] = good(1);
    check(iris_nccl_decide(r, IRIS_MAX_RANKS + 1, why, sizeof why) == 0, "verdict: more ranks than IRIS_MAX_RANKS -> NCCL (before reading records)");
  }

  /* the CTA cap of iris's calls: ncclConfig_t.maxCTAs, else NCCL_MAX_CTAS; the smallest any rank was given */
  {
    iris_nccl_record_t r[4];
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    for (k = 0; k < 4; k++) r[k] = good(k);
    check(iris_nccl_agreed_ctas(r, 4) == 0, "ctas: no rank given a cap -> 0 (iris's own grid)");
    r[2].max_ctas = 16;
    check(iris_nccl_agreed_ctas(r, 4) == 16, "ctas: one rank given 16 -> 16 on every rank");
    r[0].max_ctas = 32;
    r[3].max_ctas = 8;
    check(iris_nccl_agreed_ctas(r, 4) == 8, "ctas: 32, 16 and 8 -> the smallest, 8");
    for (k = 0; k < 4; k++) r[k].max_ctas = 100000;
    check(iris_nccl_agreed_ctas(r, 4) == IRIS_COLL_MAX_CTAS, "ctas: above IRIS_COLL_MAX_CTAS -> IRIS_COLL_MAX_CTAS");
    check(iris_nccl_decide(r, 4, why, sizeof why) == 1, "verdict: ranks with different caps still agree (the cap is agreed, not compared)");
    unsetenv("NCCL_MAX_CTAS");
    check(iris_nccl_config_ctas(NULL) == 0, "ctas: no configuration, NCCL_MAX_CTAS unset -> 0");
    check(iris_nccl_config_ctas(&cfg) == 0, "ctas: maxCTAs undefined, NCCL_MAX_CTAS unset -> 0");
    setenv("NCCL_MAX_CTAS", "24", 1);
    check(iris_nccl_config_ctas(NULL) == 24 && iris_nccl_config_ctas(&cfg) == 24, "ctas: NCCL_MAX_CTAS=24 where the configuration leaves it undefined -> 24");
    cfg.maxCTAs = 12;
    check(iris_nccl_config_ctas(&cfg) == 12, "ctas: maxCTAs = 12 over NCCL_MAX_CTAS=24 -> 12");
    cfg.size = offsetof(ncclConfig_t, maxCTAs);
    check(iris_nccl_config_ctas(&cfg) == 24, "ctas: a configuration older than maxCTAs -> NCCL_MAX_CTAS");
    cfg = NCCL_CONFIG_INITIALIZER;
    cfg.maxCTAs = 0;
    check(iris_nccl_config_ctas(&cfg) == 0, "ctas: maxCTAs = 0 -> 0 (no cap: NCCL refuses it; iris does not guess)");
    const char *bad[] = {"x", "-4", "16k", "0"};
    for (k = 0; k < 4; k++) {
      char nm[96];
      setenv("NCCL_MAX_CTAS", bad[k], 1);
      snprintf(nm, sizeof nm, "ctas: NCCL_MAX_CTAS='%s' -> 0 (not a positive integer)", bad[k]);
      check(iris_nccl_config_ctas(NULL) == 0, nm);
    }
    unsetenv("NCCL_MAX_CTAS");
  }

  /* sizes the shim asks iris for */
  check(iris_nccl_default_heap(4, 4 * IRIS_NCCL_MIB) == 76 * IRIS_NCCL_MIB, "heap: 4 ranks, 4 MiB staging -> 76 MiB (28 LL and armed slots + 32 scratch + 8 staging + 8)");
  check(iris_nccl_default_heap(3, 3 * IRIS_NCCL_MIB) % (2 * IRIS_NCCL_MIB) == 0, "heap: rounded up to 2 MiB");
  check(iris_nccl_default_heap(2, 4 * IRIS_NCCL_MIB) == 66 * IRIS_NCCL_MIB, "heap: 2 ranks, 4 MiB staging -> 66 MiB (18 LL and armed slots: 2 ranks' one-shot slots hold 1 MiB per peer)");
  t = iris_nccl_default_table();
  check(iris_nccl_staging_bytes(&t) == 4 * IRIS_NCCL_MIB, "staging: the table's largest message (4 MiB)");
  iris_nccl_parse_table("1K", &t, why, sizeof why);
  check(iris_nccl_staging_bytes(&t) == 2 * IRIS_NCCL_MIB, "staging: at least 2 MiB");
  iris_nccl_parse_table("1G", &t, why, sizeof why);
  check(iris_nccl_staging_bytes(&t) == 64 * IRIS_NCCL_MIB, "staging: at most 64 MiB (larger calls are staged in chunks)");

  /* windows: the verdict from every rank's record */
  {
    iris_nccl_win_record_t w[4];
    int serve = -1;
    for (k = 0; k < 4; k++) {
      memset(&w[k], 0, sizeof w[k]);
      w[k].magic = IRIS_NCCL_WIN_MAGIC;
      w[k].shim = w[k].in_heap = 1;
      w[k].offset = 7 << 20;
      w[k].bytes = 3 << 20;
    }
    check(iris_nccl_win_decide(w, 4, &serve) == 1 && serve == 1, "window: every rank's buffer at the same heap offset, same size -> zero-copy, kept by the shim");
    w[2].offset += 4096;
    check(iris_nccl_win_decide(w, 4, &serve) == 0 && serve == 1, "window: one rank's buffer at another offset (allocated in another order) -> staged, kept by the shim");
    w[2].offset -= 4096;
    w[3].bytes += 4096;
    check(iris_nccl_win_decide(w, 4, &serve) == 0 && serve == 1, "window: one rank's size differs -> staged");
    w[3].bytes -= 4096;
    w[1].in_heap = 0;
    check(iris_nccl_win_decide(w, 4, &serve) == 0 && serve == 1, "window: one rank's buffer is the shim's but in another communicator's heap -> staged, kept by the shim");
    w[1].shim = 0;
    check(iris_nccl_win_decide(w, 4, &serve) == 0 && serve == 1, "window: one rank's buffer came from the real NCCL, the others' from the heap -> kept by the shim on every rank (none forwards)");
    for (k = 0; k < 4; k++) w[k].shim = w[k].in_heap = 0;
    check(iris_nccl_win_decide(w, 4, &serve) == 0 && serve == 0, "window: no rank's buffer is the shim's -> forwarded to NCCL on every rank");
    for (k = 0; k < 4; k++) w[k].in_heap = 1;
    w[0].bytes = w[1].bytes = w[2].bytes = w[3].bytes = 0;
    check(iris_nccl_win_decide(w, 4, &serve) == 0, "window: zero bytes -> never zero-copy");
  }
  /* windows: which calls run zero-copy (bytes per buffer as NCCL sizes them) */
  {
    static char heap[1 << 16];
    iris_nccl_window_t a, b;
    size_t sb, rb;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.base = heap;
    a.bytes = 4096;
    a.zero_copy = 1;
    b.base = heap + 8192;
    b.bytes = 16384;
    b.zero_copy = 1;
    a.next = &b;
    iris_nccl_extents(IRIS_NCCL_AG, 100, 4, 4, &sb, &rb);
    check(sb == 400 && rb == 1600, "extents: all-gather reads count, writes world * count elements");
    iris_nccl_extents(IRIS_NCCL_RS, 100, 4, 4, &sb, &rb);
    check(sb == 1600 && rb == 400, "extents: reduce-scatter reads world * count, writes count elements");
    iris_nccl_extents(IRIS_NCCL_A2A, 100, 2, 4, &sb, &rb);
    check(sb == 800 && rb == 800, "extents: all-to-all world * count both ways");
    check(iris_nccl_zero_copy(&a, IRIS_NCCL_AR, heap, heap + 8192, 1024, 4, 4), "zero-copy: all-reduce, send and recv in two windows");
    check(iris_nccl_zero_copy(&a, IRIS_NCCL_AR, heap, heap, 1024, 4, 4), "zero-copy: all-reduce in place, the whole window");
    check(!iris_nccl_zero_copy(&a, IRIS_NCCL_AR, heap, heap, 1025, 4, 4), "zero-copy: one element past the window's end -> staged");
    check(!iris_nccl_zero_copy(&a, IRIS_NCCL_AR, heap + 4096, heap + 8192, 1, 4, 4), "zero-copy: send between the windows -> staged");
    check(!iris_nccl_zero_copy(&a, IRIS_NCCL_AR, heap + 8192 + 16384, heap + 8192, 1, 4, 4), "zero-copy: send just past the second window -> staged");
    check(iris_nccl_zero_copy(&a, IRIS_NCCL_AG, heap + 8192 + 1024 * 4, heap + 8192, 1024, 4, 4), "zero-copy: all-gather in place (send = recv + rank * count)");
    check(!iris_nccl_zero_copy(&a, IRIS_NCCL_AG, heap, heap, 1024, 4, 4), "zero-copy: all-gather whose recv (world * count) overflows the window -> staged");
    check(iris_nccl_zero_copy(&a, IRIS_NCCL_BC, NULL, heap + 8192, 4096, 4, 4), "zero-copy: broadcast needs recv in a window only (the root copies send into it)");
    check(!iris_nccl_zero_copy(&a, IRIS_NCCL_BC, heap, heap + 100, 1000, 4, 4), "zero-copy: broadcast whose recv leaves the window -> staged");
    check(!iris_nccl_zero_copy(NULL, IRIS_NCCL_AR, heap, heap, 1, 4, 4), "zero-copy: no windows -> staged");
    b.zero_copy = 0;
    check(!iris_nccl_zero_copy(&a, IRIS_NCCL_AR, heap, heap + 8192, 1024, 4, 4), "zero-copy: a window whose ranks' offsets differ -> staged");
  }

  /* result codes */
  check(iris_nccl_result(IRIS_SUCCESS) == ncclSuccess && iris_nccl_result(IRIS_ERROR_INVALID_ARGUMENT) == ncclInvalidArgument &&
            iris_nccl_result(IRIS_ERROR_GPU) == ncclUnhandledCudaError && iris_nccl_result(IRIS_ERROR_TIMEOUT) == ncclRemoteError &&
            iris_nccl_result(IRIS_ERROR_PEER_FAILED) == ncclRemoteError && iris_nccl_result(IRIS_ERROR_MISMATCH) == ncclInvalidUsage &&
            iris_nccl_result(IRIS_ERROR_OUT_OF_MEMORY) == ncclSystemError && iris_nccl_result(IRIS_ERROR_ABORTED) == ncclInvalidUsage,
        "results: iris statuses map to NCCL's codes");
  check(iris_nccl_result(IRIS_ERROR_INVALID_RANK) == ncclInvalidArgument,
        "results: IRIS_ERROR_INVALID_RANK (a root outside [0, world), refused by iris) -> ncclInvalidArgument, NCCL's answer for a bad root");
  ok = 1;
  for (k = 0; k < IRIS_STATUS_COUNT; k++) ok = ok && (int)iris_nccl_result((iris_status_t)k) < (int)ncclNumResults && (k == 0) == (iris_nccl_result((iris_status_t)k) == ncclSuccess);
  check(ok, "results: every iris status maps to an NCCL error code, only success to ncclSuccess");
  return failed;
}
