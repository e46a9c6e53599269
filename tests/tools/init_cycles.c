/* iris_init / iris_finalize, three times over, for a leak checker: make test runs it
 * under valgrind (--errors-for-leak-kinds=definite). With a GPU each cycle brings up a
 * world of one and finalizes it (the finalized context stays reachable: no leak); without
 * one each iris_init fails, and a failed init must lose nothing either. Prints one line
 * per cycle; exit status 0 unless a call that should work fails. */
#define IRIS_IMPLEMENTATION
#include "iris.h"
#include <stdio.h>

int main(void) {
  int i;
  for (i = 0; i < 3; i++) {
    iris_config_t c = IRIS_CONFIG_INIT;
    iris_t *ctx = NULL;
    iris_status_t st;
    c.rank = 0;
    c.world_size = 1;
    c.heap_size = (size_t)4 << 20;
    st = iris_init(&c, &ctx);
    if (st != IRIS_SUCCESS) {
      printf("cycle %d: iris_init failed as it may without a GPU: %s\n", i, iris_status_string(st));
      if (ctx != NULL) return 1;
      continue;
    }
    st = iris_finalize(ctx);
    printf("cycle %d: init and finalize: %s\n", i, iris_status_string(st));
    if (st != IRIS_SUCCESS) return 1;
    if (iris_finalize(ctx) == IRIS_SUCCESS) return 1; /* the tombstone says "finalized" */
  }
  return 0;
}
