/* internal/gemm/types.h: the public type both GEMM headers share, the path a plan runs.
 * Part of the contract of iris_gemm.h and iris_gemm_reduce.h (each includes it, either may
 * come first); plain C, no implementation. The paths themselves are described in the two
 * headers' doc blocks. */
#ifndef IRIS_INTERNAL_GEMM_TYPES_H
#define IRIS_INTERNAL_GEMM_TYPES_H
#include "../../iris.h"

/* How a plan runs (iris_ag_gemm_desc_t::path, iris_gemm_rs_desc_t::path). */
typedef enum iris_gemm_path {
  IRIS_GEMM_PATH_AUTO = 0,       /* the plan picks (iris_ag_gemm_choose_path, iris_gemm_rs_choose_path) */
  IRIS_GEMM_PATH_PIPELINED,      /* copy engines beside chunked cuBLASLt GEMMs */
  IRIS_GEMM_PATH_FUSED,          /* one persistent kernel that computes and communicates */
  IRIS_GEMM_PATH_UNFUSED,        /* communicate, then one cuBLASLt GEMM (or the reverse): a baseline */
  IRIS_GEMM_PATH_KERNEL_UNFUSED, /* all-gather + GEMM only: the fused kernel's roles one after the other */
  IRIS_GEMM_PATH_COUNT
} iris_gemm_path_t;

#ifdef __cplusplus
extern "C" {
#endif
/* The path's name ("auto", "pipelined", "fused", "unfused", "kernel-unfused"; "invalid"
 * for anything else). */
IRIS_API const char *iris_gemm_path_name(iris_gemm_path_t path);
#ifdef __cplusplus
}
#endif

#endif /* IRIS_INTERNAL_GEMM_TYPES_H */
