// A project that uses iris through its build integration (tests/packaging/consumers.sh):
// iris.h + iris_collectives.h without IRIS_IMPLEMENTATION, the host API from libiris.so.
// Run without a GPU it checks what a binding checks: the library's version and struct
// sizes are the headers'.
#include "iris.h"
#include "iris_collectives.h"
#include <stdio.h>

__global__ void consumer_signal(iris_device_ctx_t ctx, unsigned *flag, int to) { iris_signal_block(ctx, flag, 1u, to); }

int main(int argc, char **argv) {
  if (argc > 1) { // never taken in the check: links a collective and a kernel launch
    iris_t *ctx = NULL;
    if (iris_init(NULL, &ctx) != IRIS_SUCCESS) return 1;
    consumer_signal<<<1, 32>>>(iris_device_context(ctx), NULL, 0);
    return iris_barrier_device(ctx, 0) == IRIS_SUCCESS && iris_finalize(ctx) == IRIS_SUCCESS ? 0 : 1;
  }
  int bad = iris_get_version() != IRIS_VERSION;
  bad |= iris_abi_struct_size("iris_config_t") != sizeof(iris_config_t);
  bad |= iris_abi_struct_size("iris_coll_opts_t") != sizeof(iris_coll_opts_t);
  bad |= iris_abi_struct_size("iris_launch_env_t") != sizeof(iris_launch_env_t); // iris_launch_env's out crosses the C ABI too
  bad |= iris_abi_struct_size("no_such_struct") != 0;
  printf("%s: libiris version %d, headers %d\n", bad ? "FAIL" : "ok", iris_get_version(), IRIS_VERSION);
  return bad;
}
