// The collective kernels that tools/asm_report.py inspects: instantiations of the
// latency (LL) kernel, the reduce kernel (two-shot all-reduce, reduce-scatter), the store
// two-shot all-reduce (iris_coll_ar_store_kernel, from IRIS_COLL_AR_STORE_MIN) and the
// copy kernel (all-gather, all-to-all; broadcast at 2 ranks), the staged copy (buffers off
// the heap), and the kernels that are no
// templates and come with the header: the relay broadcast (iris_coll_relay_kernel, 3 or
// more ranks) and the barrier. Compiled, never run. The GEMM kernels (CUDA only) are in
// tools/asm_gemm_kernels.cu.
#include "../iris_collectives.h"

template __global__ void iris_coll_ll_kernel<iris_bf16_t, IRIS_COLL_AR, IRIS_SUM>(iris_coll_dev_t, const iris_bf16_t *, iris_bf16_t *, size_t, int, unsigned long long, int);
template __global__ void iris_coll_ll_kernel<float, IRIS_COLL_AR, IRIS_SUM>(iris_coll_dev_t, const float *, float *, size_t, int, unsigned long long, int);
template __global__ void iris_coll_ll_kernel<iris_bf16_t, IRIS_COLL_AG, IRIS_SUM>(iris_coll_dev_t, const iris_bf16_t *, iris_bf16_t *, size_t, int, unsigned long long, int);
template __global__ void iris_coll_ll2_kernel<iris_bf16_t, IRIS_SUM>(iris_coll_dev_t, const iris_bf16_t *, iris_bf16_t *, size_t, unsigned long long, int);
template __global__ void iris_coll_reduce_kernel<iris_bf16_t, IRIS_COLL_AR, IRIS_SUM, 4>(iris_coll_dev_t, const iris_bf16_t *, iris_bf16_t *, size_t,
                                                                                          unsigned long long, int, int, int);
template __global__ void iris_coll_reduce_kernel<float, IRIS_COLL_AR, IRIS_SUM, 4>(iris_coll_dev_t, const float *, float *, size_t, unsigned long long, int, int, int);
template __global__ void iris_coll_reduce_kernel<iris_bf16_t, IRIS_COLL_RS, IRIS_SUM, 8>(iris_coll_dev_t, const iris_bf16_t *, iris_bf16_t *, size_t,
                                                                                          unsigned long long, int, int, int);
template __global__ void iris_coll_ar_store_kernel<iris_bf16_t, IRIS_SUM, 4>(iris_coll_dev_t, const iris_bf16_t *, iris_bf16_t *, iris_bf16_t *, size_t,
                                                                                  size_t, unsigned long long, int, int, int);
template __global__ void iris_coll_ar_store_kernel<float, IRIS_SUM, 0>(iris_coll_dev_t, const float *, float *, float *, size_t, size_t, unsigned long long, int, int,
                                                                        int);
template __global__ void iris_coll_staged_kernel<IRIS_COLL_AG>(iris_coll_dev_t, const char *, size_t, char *, size_t, char *, size_t, size_t, int, unsigned long long);
template __global__ void iris_coll_copy_kernel<IRIS_COLL_AG>(iris_coll_dev_t, const char *, char *, size_t, int, unsigned long long);
template __global__ void iris_coll_copy_kernel<IRIS_COLL_A2A>(iris_coll_dev_t, const char *, char *, size_t, int, unsigned long long);
