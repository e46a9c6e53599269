/* internal/coll/options.h: the collectives' process-wide settings that are not a flag:
 * IRIS_COLL_CTAS, its parser. Host, C and C++; pure apart from the one environment read
 * (tests/host/env.c). Under IRIS_IMPLEMENTATION. Part of iris_collectives.h; not a
 * public header. */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_OPTIONS_H
#define IRIS_INTERNAL_COLL_OPTIONS_H
#include "../core/status.h"
#include "../core/util.h"

/* IRIS_COLL_CTAS=n, read at setup and alike on every rank: every call that gives no
 * opts.ctas runs as if it gave n (the bandwidth kernels take n CTAs, the one-shot at most
 * n, IRIS_ALGO_AUTO chooses under the cap), so that a program reached through a framework
 * or the NCCL-API library leaves SMs to the compute beside it (as NCCL_MAX_CTAS does for
 * NCCL; docs/collectives.md, "Beside compute"). 0 or unset: the automatic grid. Returns 0
 * unset (*ctas untouched), 1 set (*ctas in [0, IRIS_COLL_MAX_CTAS]), -1 set but empty,
 * malformed or out of range (*ctas untouched; the detail names the variable). */
IRIS_INTERNAL int iris_coll_ctas_from_env(int *ctas) {
  int v = 0;
  const int got = iris_detail_env_int("IRIS_COLL_CTAS", &v);
  if (got <= 0) return got;
  if (v > IRIS_COLL_MAX_CTAS) {
    iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "IRIS_COLL_CTAS=%d: at most %d CTAs per rank (0: the automatic grid)", v, IRIS_COLL_MAX_CTAS);
    return -1;
  }
  *ctas = v;
  return 1;
}

#endif /* IRIS_INTERNAL_COLL_OPTIONS_H */
