/* tests/nccl/version_test.c — libiris_nccl.so without a GPU: the calls that need none.
 *   version_test real <path of the real libnccl.so.2>     the shim forwards to it
 *   version_test missing <the IRIS_NCCL_LIB it was given> no real NCCL: ncclSystemError
 * Built twice by tests/nccl/cpu_checks.sh: linked against the shim (build/nccl/libnccl.so.2)
 * and against the real NCCL (then run with LD_PRELOAD, as torch is). Prints PASS / FAIL. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../nccl/iris_nccl.h"

static int failed;
static void check(int ok, const char *name, const char *why) {
  if (ok) printf("PASS: %s\n", name);
  else {
    printf("FAIL: %s: %s\n", name, why);
    failed = 1;
  }
}

int main(int argc, char **argv) {
  char why[512];
  int v = 0, pv = 0, n = -1;
  ncclResult_t r;
  const char *label = argc > 3 ? argv[3] : "";
  char name[256];
  iris_nccl_stats_fn stats = (iris_nccl_stats_fn)dlsym(RTLD_DEFAULT, "iris_nccl_stats");
  const char *(*real_lib)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "iris_nccl_real_library");
  if (argc < 3) {
    fprintf(stderr, "usage: version_test real|missing <path> [label]\n");
    return 2;
  }
  snprintf(name, sizeof name, "%sthe shim's symbols are the program's (iris_nccl_stats found by dlsym)", label);
  check(stats && real_lib, name, "dlsym(RTLD_DEFAULT, \"iris_nccl_stats\") is NULL: the program runs on the real NCCL alone");
  if (!stats || !real_lib) return 1;
  if (!strcmp(argv[1], "real")) {
    void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    ncclResult_t (*real_version)(int *) = h ? (ncclResult_t(*)(int *))dlsym(h, "ncclGetVersion") : NULL;
    const char *(*real_string)(ncclResult_t) = h ? (const char *(*)(ncclResult_t))dlsym(h, "ncclGetErrorString") : NULL;
    int rv = -1;
    if (!real_version || real_version(&rv) != ncclSuccess) {
      printf("FAIL: %scannot call ncclGetVersion of %s directly\n", label, argv[2]);
      return 1;
    }
    r = ncclGetVersion(&v);
    snprintf(why, sizeof why, "ncclGetVersion returned %d with %d; %s says %d", (int)r, v, argv[2], rv);
    snprintf(name, sizeof name, "%sncclGetVersion through the shim reports the real library's version (%d)", label, rv);
    check(r == ncclSuccess && v == rv, name, why);
    r = pncclGetVersion(&pv);
    snprintf(name, sizeof name, "%spncclGetVersion (the profiling alias) gives the same", label);
    check(r == ncclSuccess && pv == rv, name, "pncclGetVersion differs");
    snprintf(name, sizeof name, "%sncclGetErrorString forwards (ncclInvalidArgument's text is the real one)", label);
    check(real_string && !strcmp(ncclGetErrorString(ncclInvalidArgument), real_string(ncclInvalidArgument)), name, ncclGetErrorString(ncclInvalidArgument));
    snprintf(why, sizeof why, "iris_nccl_real_library() = %s", real_lib() ? real_lib() : "NULL");
    snprintf(name, sizeof name, "%siris_nccl_real_library names the library the shim opened", label);
    if (getenv("IRIS_NCCL_TEST_EXPECT_LIB")) /* the path the search must have found */
      check(real_lib() != NULL && !strcmp(real_lib(), getenv("IRIS_NCCL_TEST_EXPECT_LIB")), name, why);
    else
      check(real_lib() != NULL, name, why);
    r = ncclCommCount(NULL, &n);
    snprintf(why, sizeof why, "ncclCommCount(NULL) returned %d (%s)", (int)r, ncclGetErrorString(r));
    snprintf(name, sizeof name, "%sa generated forwarder reaches the real argument checks (ncclCommCount(NULL) -> ncclInvalidArgument)", label);
    check(r == ncclInvalidArgument, name, why);
  } else {
    const char *e;
    r = ncclGetVersion(&v);
    e = ncclGetLastError(NULL);
    snprintf(why, sizeof why, "ncclGetVersion returned %d, ncclGetLastError: %s", (int)r, e ? e : "NULL");
    snprintf(name, sizeof name, "%sno real NCCL (IRIS_NCCL_LIB=%s): ncclGetVersion returns ncclSystemError", label, argv[2]);
    check(r == ncclSystemError, name, why);
    snprintf(name, sizeof name, "%sncclGetLastError names the problem and the path", label);
    check(e && strstr(e, argv[2]) && strstr(e, "IRIS_NCCL_LIB"), name, why);
    r = ncclAllReduce(NULL, NULL, 1, ncclFloat32, ncclSum, NULL, NULL);
    snprintf(name, sizeof name, "%sno real NCCL: ncclAllReduce returns ncclSystemError", label);
    check(r == ncclSystemError, name, ncclGetErrorString(r));
#ifdef NCCL_SHRINK_ABORT
    { /* served by the shim (NCCL_SHRINK_ABORT stops iris's kernels on the parent), then forwarded */
      ncclComm_t child = NULL;
      r = ncclCommShrink(NULL, NULL, 0, &child, NULL, NCCL_SHRINK_ABORT);
      e = ncclGetLastError(NULL);
      snprintf(why, sizeof why, "ncclCommShrink returned %d, ncclGetLastError: %s", (int)r, e ? e : "NULL");
      snprintf(name, sizeof name, "%sno real NCCL: ncclCommShrink (served by the shim, NCCL_SHRINK_ABORT) returns ncclSystemError naming it", label);
      check(r == ncclSystemError && e && strstr(e, "ncclCommShrink"), name, why);
    }
#endif
    snprintf(name, sizeof name, "%sno real NCCL: ncclGetErrorString still answers", label);
    check(!strcmp(ncclGetErrorString(ncclSuccess), "no error"), name, ncclGetErrorString(ncclSuccess));
    snprintf(name, sizeof name, "%sno real NCCL: iris_nccl_real_library() is NULL", label);
    check(real_lib() == NULL, name, "it returned a path");
  }
  {
    iris_nccl_stats_t s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    r = stats(NULL, &s);
    snprintf(name, sizeof name, "%siris_nccl_stats of a communicator it never saw: success, no iris, a reason", label);
    check(r == ncclSuccess && s.iris == 0 && s.why[0], name, s.why);
    s.struct_size = 3;
    snprintf(name, sizeof name, "%siris_nccl_stats refuses a wrong struct_size", label);
    check(stats(NULL, &s) == ncclInvalidArgument, name, "accepted");
  }
  return failed;
}
