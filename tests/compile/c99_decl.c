/* Compile check: the public part of iris.h as strict C99. */
#include "iris.h"
int iris_c99_decl_check(void) {
  iris_config_t cfg = IRIS_CONFIG_INIT;
  iris_view2d_t v = iris_view2d(0, 10, 10, 10, 4);
  return cfg.rank + (int)iris_view_num_tiles(v, 4, 4);
}
