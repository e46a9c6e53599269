// The AMD GEMM kernels that tools/asm_report.py inspects for gfx90a and gfx940: the MFMA
// core of internal/gemm/core_mfma.h, which is UNVERIFIED (compiled, never run on hardware), so
// it is compiled here with IRIS_GEMM_MFMA_UNVERIFIED. Never run.
//   - the fused all-gather + GEMM kernel as iris_ag_gemm_create instantiates it on AMD for
//     bf16 A, B (K x N) and C (iris_ag_gemm_cfg = iris_gemm_cfg_mfma_large);
//   - one CTA of the MFMA core alone (iris_gemm_tile, no wait, bias) for both named MFMA
//     configurations and both B layouts.
#define IRIS_GEMM_MFMA_UNVERIFIED 1
#include "../iris_gemm.h"

template __global__ void iris_ag_gemm_kernel<iris_gemm_cfg_mfma_large, hip_bfloat16, true, hip_bfloat16>(iris_ag_gemm_dev_t, const hip_bfloat16 *,
                                                                                                        const hip_bfloat16 *, hip_bfloat16 *, int);

template <class Cfg, bool KN>
__global__ void __launch_bounds__(Cfg::threads)
    iris_gemm_tile_kernel(const hip_bfloat16 *A, const hip_bfloat16 *B, const hip_bfloat16 *bias, hip_bfloat16 *C, int M, int N, int K) {
  extern __shared__ char smem[];
  iris_gemm_tile<Cfg, hip_bfloat16, KN, hip_bfloat16>(A, K, B, KN ? N : K, C, N, bias, M, N, K, blockIdx.y * Cfg::BM, blockIdx.x * Cfg::BN, smem,
                                                      iris_gemm_no_wait());
}
#define IRIS_ASM_TILE(Cfg, KN)                                                                                                        \
  template __global__ void iris_gemm_tile_kernel<Cfg, KN>(const hip_bfloat16 *, const hip_bfloat16 *, const hip_bfloat16 *, hip_bfloat16 *, int, \
                                                          int, int);
IRIS_ASM_TILE(iris_gemm_cfg_mfma_large, true)
IRIS_ASM_TILE(iris_gemm_cfg_mfma_large, false)
IRIS_ASM_TILE(iris_gemm_cfg_mfma_small, true)
IRIS_ASM_TILE(iris_gemm_cfg_mfma_small, false)
