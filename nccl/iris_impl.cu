/* nccl/iris_impl.cu — iris's implementation (host API and collectives) inside
 * libiris_nccl.so. Its symbols stay inside the library (nccl/exports.map exports only
 * NCCL's names and iris_nccl_*), so a program may also load libiris.so or define
 * IRIS_IMPLEMENTATION itself without a clash. */
#define IRIS_IMPLEMENTATION
#include "../iris_collectives.h"
