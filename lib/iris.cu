/* lib/iris.cu — the shared library: every IRIS_API function of the six public headers in
 * one translation unit (make lib: build/libiris.so; make lib-hip: build/libiris_hip.so).
 *
 * For bindings (Python, JAX, other languages) and build systems that want a library
 * instead of IRIS_IMPLEMENTATION in a unit of their own. A program links either this
 * library or one IRIS_IMPLEMENTATION unit, not both. The kernels inside are those the
 * host API launches (collectives, all-gather + GEMM, GEMM + reduce-scatter / all-reduce, MoE
 * dispatch / combine) for the targets the library was
 * compiled for (NVIDIA: sm_90a code and compute_90 PTX, which newer GPUs JIT).
 *
 * Besides the headers' API it defines iris_abi_struct_size (declared in iris.h): a
 * binding calls it, with iris_get_version, to refuse a library whose structs differ
 * from the ones it was built against. */
#define IRIS_IMPLEMENTATION
#include "../iris.h"
#include "../iris_device.h"
#include "../iris_collectives.h"
#include "../iris_gemm.h"
#include "../iris_gemm_reduce.h"
#include "../iris_moe.h"
#include <string.h>

/* sizeof of each public struct that crosses the C ABI, by its typedef name */
#define IRIS_ABI_STRUCT(t) {#t, sizeof(t)}
static const struct {
  const char *name;
  size_t size;
} iris_detail_abi_structs[] = {
    IRIS_ABI_STRUCT(iris_config_t),      IRIS_ABI_STRUCT(iris_bootstrap_t),        IRIS_ABI_STRUCT(iris_device_ctx_t), IRIS_ABI_STRUCT(iris_team_t),
    IRIS_ABI_STRUCT(iris_launch_t),      IRIS_ABI_STRUCT(iris_rendezvous_params_t), IRIS_ABI_STRUCT(iris_coll_opts_t),
    IRIS_ABI_STRUCT(iris_launch_env_t),
    IRIS_ABI_STRUCT(iris_tile_flags_t),  IRIS_ABI_STRUCT(iris_view2d_t),           IRIS_ABI_STRUCT(iris_ag_gemm_desc_t),
    IRIS_ABI_STRUCT(iris_gemm_ready_t),  IRIS_ABI_STRUCT(iris_gemm_rs_desc_t),     IRIS_ABI_STRUCT(iris_moe_desc_t),
    IRIS_ABI_STRUCT(iris_moe_recv_t),    IRIS_ABI_STRUCT(iris_rmsnorm_opts_t),
};
#undef IRIS_ABI_STRUCT

IRIS_DEF size_t iris_abi_struct_size(const char *type_name) {
  if (!type_name) return 0;
  for (size_t i = 0; i < sizeof iris_detail_abi_structs / sizeof iris_detail_abi_structs[0]; i++)
    if (strcmp(type_name, iris_detail_abi_structs[i].name) == 0) return iris_detail_abi_structs[i].size;
  return 0;
}
