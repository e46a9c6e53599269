/* Compile check: the public part of iris.h as strict C99, and the declarations of
 * iris_gemm.h, iris_gemm_reduce.h and iris_moe.h (which include iris_collectives.h): C callers. */
#include "iris.h"
#include "iris_gemm.h"
#include "iris_gemm_reduce.h"
#include "iris_moe.h"
int iris_c99_decl_check(void) {
  iris_config_t cfg = IRIS_CONFIG_INIT;
  iris_view2d_t v = iris_view2d(0, 10, 10, 10, 4);
  iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
  iris_moe_desc_t m = IRIS_MOE_DESC_INIT;
  return cfg.rank + (int)iris_view_num_tiles(v, 4, 4) + (int)d.op + m.top_k + (int)iris_moe_workspace_bytes(&m, 2);
}
