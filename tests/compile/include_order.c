/* Include-then-implement (stb's rule): the unit includes iris.h first, as a header of its
 * own would, and only then defines IRIS_IMPLEMENTATION and includes it again. The second
 * include must still emit the implementation: this unit is linked into a program (make
 * test: C99 with gcc; never run). A strict C99 unit whose first iris.h include did not
 * define IRIS_IMPLEMENTATION needs -D_GNU_SOURCE (iris.h's rule for C99 units). */
#include "iris.h" /* e.g. through the unit's own header */
#include <stdio.h>

#define IRIS_IMPLEMENTATION
#include "iris.h"

int main(void) {
  iris_t *ctx = 0;
  iris_status_t st = iris_init(0, &ctx);
  if (st == IRIS_SUCCESS) st = iris_finalize(ctx);
  printf("%s\n", iris_status_string(st));
  return (int)st;
}
