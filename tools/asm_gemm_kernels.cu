// The GEMM kernels that tools/asm_report.py inspects (CUDA only: under hipcc iris_gemm.h
// has no GEMM kernels and internal/gemm/core.h is empty). Compiled for sm_90a, as the
// Makefile's GEMM_NVCCFLAGS do, so the wgmma core is the one compiled. Never run.
//   - the fused all-gather + GEMM kernel as iris_ag_gemm_create instantiates it for
//     bf16 A, B (K x N) and C;
//   - one CTA of the GEMM core alone (iris_gemm_tile, no wait, bf16 bias as in the fused
//     kernel) for the wgmma and the mma.sync configuration of the large tile.
// iris_ag_gemm_cfg is a typedef of the host part (IRIS_IMPLEMENTATION); the script reads
// it from iris_gemm.h and passes it as IRIS_ASM_AG_GEMM_CFG.
#include "../iris_gemm.h"
#include <type_traits>

#ifndef IRIS_ASM_AG_GEMM_CFG
#define IRIS_ASM_AG_GEMM_CFG iris_gemm_cfg_wgmma_large
#endif

template __global__ void iris_ag_gemm_kernel<IRIS_ASM_AG_GEMM_CFG, __nv_bfloat16, true, __nv_bfloat16>(iris_ag_gemm_dev_t, const __nv_bfloat16 *,
                                                                                                      const __nv_bfloat16 *, __nv_bfloat16 *, int);

template <class Cfg>
__global__ void __launch_bounds__(Cfg::threads, 1)
    iris_gemm_tile_kernel(const __nv_bfloat16 *A, const __nv_bfloat16 *B, const __nv_bfloat16 *bias, __nv_bfloat16 *C, int M, int N, int K) {
  extern __shared__ __align__(128) char smem[];
  iris_gemm_tile<Cfg, __nv_bfloat16, true, __nv_bfloat16>(A, K, B, N, C, N, bias, M, N, K, blockIdx.y * Cfg::BM, blockIdx.x * Cfg::BN, smem,
                                                          iris_gemm_no_wait());
}
template __global__ void iris_gemm_tile_kernel<iris_gemm_cfg_wgmma_large>(const __nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                                                                          __nv_bfloat16 *, int, int, int);
template __global__ void iris_gemm_tile_kernel<iris_gemm_cfg_large>(const __nv_bfloat16 *, const __nv_bfloat16 *, const __nv_bfloat16 *, __nv_bfloat16 *,
                                                                    int, int, int);

// The fused kernel on the TMA core (what iris_ag_gemm_create picks on sm_90a), and the TMA
// core alone over a persistent tile sequence.
template __global__ void iris_ag_gemm_tma_kernel<iris_gemm_cfg_tma_large, __nv_bfloat16, true, __nv_bfloat16>(
    iris_ag_gemm_dev_t, const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap, const __nv_bfloat16 *, __nv_bfloat16 *, int);
struct iris_asm_sched {
  int tiles_m, ntiles;
  __device__ bool operator()(int i, int &m0, int &n0) const {
    const int t = (int)blockIdx.x + i * (int)gridDim.x;
    if (t >= ntiles) return false;
    m0 = t % tiles_m * 128;
    n0 = t / tiles_m * 256;
    return true;
  }
};
template <class Cfg>
__global__ void __launch_bounds__(Cfg::threads, 1)
    iris_gemm_tma_tiles_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const __nv_bfloat16 *bias, __nv_bfloat16 *C,
                               int M, int N, int K, iris_asm_sched s) {
  extern __shared__ __align__(128) char smem[];
  iris_gemm_tma_tiles<Cfg, __nv_bfloat16, true, __nv_bfloat16>(&ta, &tb, C, N, bias, M, N, K, s, iris_gemm_no_wait(), smem);
}
template __global__ void iris_gemm_tma_tiles_kernel<iris_gemm_cfg_tma_large>(const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap,
                                                                             const __nv_bfloat16 *, __nv_bfloat16 *, int, int, int, iris_asm_sched);

// The dynamic shared memory each kernel is launched with (Cfg::smem_bytes; ptxas only
// reports static shared memory): one global per configuration, read from the PTX.
template <class Cfg> __device__ int iris_asm_dynamic_smem = Cfg::smem_bytes;
template __device__ int iris_asm_dynamic_smem<iris_gemm_cfg_wgmma_large>;
template __device__ int iris_asm_dynamic_smem<iris_gemm_cfg_large>;
template __device__ int iris_asm_dynamic_smem<iris_gemm_cfg_tma_large>;
static_assert(std::is_same<IRIS_ASM_AG_GEMM_CFG, iris_gemm_cfg_wgmma_large>::value || std::is_same<IRIS_ASM_AG_GEMM_CFG, iris_gemm_cfg_large>::value,
              "iris_ag_gemm_cfg changed: instantiate iris_asm_dynamic_smem (and iris_gemm_tile_kernel) for it");
