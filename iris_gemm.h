/* iris_gemm.h — fused all-gather + GEMM (placeholder)
 *
 * What it will be
 *   A persistent kernel whose fetcher workgroups pull peers' A tiles into a staging
 *   buffer and raise per-tile ready flags while GEMM workgroups consume them, plus a
 *   pipelined copy-engine + vendor-BLAS path, chosen per shape.
 *
 * What it is today
 *   Nothing beyond iris_collectives.h: this header only fixes its place in the layout
 *   and compiles under nvcc and hipcc. Its contents are a later milestone (see README).
 */
#ifndef IRIS_GEMM_H
#define IRIS_GEMM_H
#include "iris_collectives.h"
#endif /* IRIS_GEMM_H */
