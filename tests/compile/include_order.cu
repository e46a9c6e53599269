// Include-then-implement (stb's rule) for every root header under nvcc / hipcc: the unit
// includes the headers first, as headers of its own would, and only then defines
// IRIS_IMPLEMENTATION and includes them again. The second includes must still emit every
// root's implementation: this unit is linked into a program (make test; never run). Only
// fp32 SUM collectives and no GEMM core are compiled, to keep the build short: the test is
// about which code the headers emit, not about the kernels.
#include "../../iris_moe.h" // e.g. through the unit's own headers
#include "../../iris_gemm.h"
#include "../../iris_gemm_reduce.h"
#include "../../iris_device.h"
#include <stdio.h>

#define IRIS_IMPLEMENTATION
#include "../../iris_gemm.h"
#include "../../iris_gemm_reduce.h"
#include "../../iris_moe.h"

int main() {
  iris_t *ctx = 0;
  iris_status_t st = iris_init(0, &ctx);
  if (st == IRIS_SUCCESS) {
    iris_ag_gemm_desc_t ad = IRIS_AG_GEMM_DESC_INIT;
    iris_gemm_rs_desc_t rd = IRIS_GEMM_RS_DESC_INIT;
    iris_moe_desc_t md = IRIS_MOE_DESC_INIT;
    iris_ag_gemm_t *ag = 0;
    iris_gemm_rs_t *rs = 0;
    iris_moe_t *moe = 0;
    (void)iris_all_reduce(ctx, 0, 0, 0, IRIS_FLOAT32, IRIS_SUM, 0);
    if (iris_ag_gemm_create(ctx, &ad, &ag) == IRIS_SUCCESS) iris_ag_gemm_destroy(ag);
    if (iris_gemm_rs_create(ctx, &rd, &rs) == IRIS_SUCCESS) iris_gemm_rs_destroy(rs);
    if (iris_moe_create(ctx, &md, &moe) == IRIS_SUCCESS) iris_moe_destroy(moe);
    st = iris_finalize(ctx);
  }
  printf("%s\n", iris_status_string(st));
  return (int)st;
}
