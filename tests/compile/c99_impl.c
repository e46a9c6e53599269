/* Compile check: iris.h with its implementation, as strict C99 and as C++. */
#define IRIS_IMPLEMENTATION
#include "iris.h"
int iris_c99_impl_check(void) {
  iris_t *ctx = 0;
  iris_status_t st = iris_init(0, &ctx);
  if (st == IRIS_SUCCESS) st = iris_finalize(ctx);
  return (int)st;
}
