/* iris_collectives.h — collectives over the symmetric heap (placeholder)
 *
 * What it will be
 *   Graph-capturable all-reduce (one-shot and two-shot), all-gather, reduce-scatter,
 *   all-to-all, broadcast and a device-side barrier, as host entry points callable
 *   from C and as tile-level building blocks for user kernels.
 *
 * What it is today
 *   Nothing beyond iris_device.h: this header only fixes its place in the layout and
 *   compiles under nvcc and hipcc. Its contents are the next milestone (see README).
 */
#ifndef IRIS_COLLECTIVES_H
#define IRIS_COLLECTIVES_H
#include "iris.h"
#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#include "iris_device.h"
#endif
#endif /* IRIS_COLLECTIVES_H */
