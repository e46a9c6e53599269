/* lib/iris.cu — the one translation unit of libiris.so (ctypes, Python, other languages).
 *
 *   nvcc -O2 -shared -Xcompiler -fPIC -arch=sm_90a -I. lib/iris.cu -lcublasLt -o build/libiris.so
 *
 * Emits every IRIS_API function of the four public headers with C linkage, plus two
 * functions for bindings that cannot read the headers: the library's version and the
 * size of each public struct, so a binding can refuse a library built from other headers.
 * (Temporary copy from the python helper; the build helper owns the final file.) */
#define IRIS_IMPLEMENTATION
#include "iris.h"
#include "iris_device.h"
#include "iris_collectives.h"
#include "iris_gemm.h"
#include <string.h>

extern "C" {
/* IRIS_VERSION of the headers this library was built from (major*10000+minor*100+patch). */
int iris_get_version(void) { return IRIS_VERSION; }

/* sizeof a public struct, by its C name ("iris_config_t", ...); 0 for an unknown name. */
size_t iris_abi_struct_size(const char *type_name) {
  static const struct { const char *name; size_t size; } table[] = {
      {"iris_config_t", sizeof(iris_config_t)},
      {"iris_bootstrap_t", sizeof(iris_bootstrap_t)},
      {"iris_device_ctx_t", sizeof(iris_device_ctx_t)},
      {"iris_rendezvous_params_t", sizeof(iris_rendezvous_params_t)},
      {"iris_launch_t", sizeof(iris_launch_t)},
      {"iris_view2d_t", sizeof(iris_view2d_t)},
      {"iris_coll_opts_t", sizeof(iris_coll_opts_t)},
      {"iris_tile_flags_t", sizeof(iris_tile_flags_t)},
      {"iris_ag_gemm_desc_t", sizeof(iris_ag_gemm_desc_t)},
  };
  if (!type_name) return 0;
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i)
    if (!strcmp(type_name, table[i].name)) return table[i].size;
  return 0;
}
}
