/* internal/gemm/core.h — CTA-level tensor-core tile GEMM for NVIDIA Hopper (sm_90)
 *
 * What it is
 *   The compute core of the fused all-gather + GEMM (iris_gemm.h): one CTA computes one
 *   BM x BN tile of C = A * B (+ bias) with fp32 accumulation, from a multistage cp.async
 *   pipeline into XOR-swizzled shared memory. Callable repeatedly by a persistent CTA.
 *   A third, faster core has its own interface (a whole persistent CTA runs a sequence of
 *   tiles): internal/gemm/core_tma.h, TMA loads + warp specialization + wgmma (sm_90a), on
 *   par with cuBLAS; it includes this file (this file includes no specialisation).
 *   Two cores share the per-tile interface below and are picked by the configuration type:
 *     iris_gemm_cfg<...>        mma.sync.m16n8k16 + ldmatrix (any sm_80+ target, sm_90 here)
 *     iris_gemm_wgmma_cfg<...>  wgmma.mma_async from 128B-swizzled shared memory; needs a
 *                               device pass for sm_90a (-arch=sm_90a or
 *                               -gencode arch=compute_90a,code=sm_90a). Compiled for any
 *                               other target it runs the mma.sync core of the same tile
 *                               (iris_gemm_wgmma_cfg::fallback), correct but slower;
 *                               iris_gemm_wgmma_compiled() tells which one a kernel got.
 *   AMD (hipcc): iris_gemm_mfma_cfg<...> (v_mfma_f32_16x16x16 f16/bf16, wave64; gfx90a,
 *   gfx940) in internal/gemm/core_mfma.h, which includes this file and is compiled only
 *   when IRIS_GEMM_MFMA_UNVERIFIED is defined: it compiles but has NEVER BEEN RUN on AMD
 *   hardware. Under hipcc this file alone holds only iris_gemm_no_wait and the
 *   iris_gemm_tile dispatch; plain C/C++ compilers see an empty header.
 *   Include graph (one way): iris_gemm.h -> gemm_core_tma.h, gemm_core_mfma.h -> gemm_core.h.
 *
 * Interface
 *     template <class Cfg, typename T, bool B_KN, typename OutT, class WaitK, typename BiasT>
 *     __device__ void iris_gemm_tile(const T *A, int lda, const T *B, int ldb, OutT *C, int ldc,
 *                                    const BiasT *bias, int M, int N, int K, int m0, int n0,
 *                                    char *smem, WaitK wait_k);   // BiasT deduced
 *   C[m0:m0+BM, n0:n0+BN] = A[m0:m0+BM, 0:K] * B[0:K, n0:n0+BN] (+ bias[n0:n0+BN] per column)
 *     T      __nv_bfloat16 or __half (A and B)
 *     A      row-major M x K, leading dimension lda (elements)
 *     B      B_KN = true : row-major K x N, ldb >= N
 *            B_KN = false: stored N x K row-major ("B transposed", nn.Linear weight), ldb >= K
 *     OutT   __nv_bfloat16, __half or float; C row-major M x N, ldc >= N
 *     bias   nullptr or N values of __nv_bfloat16, __half or float (T, OutT or another:
 *            deduced), added in fp32 before the output rounding
 *     smem   Cfg::smem_bytes of dynamic shared memory (extern __shared__ char smem[]; raise
 *            cudaFuncAttributeMaxDynamicSharedMemorySize when above 48 KB). Any 16-byte
 *            aligned start works (the wgmma core aligns to 1024 itself, within the slack
 *            that its smem_bytes includes).
 *     wait_k wait_k(k0) is called by all threads of the CTA, uniformly (same k0, same
 *            point), for k0 = 0, BK, 2*BK, ... < K in this order, each before the first
 *            load of any element of A[:, k0:k0+BK) for this tile. It may spin and may call
 *            __syncthreads(). A consumer of data written by other CTAs/GPUs must make the
 *            data visible before returning (acquire load of the flag by the spinning
 *            thread, then __syncthreads()): A is read with cp.async.cg (L2, never L1).
 *            B is read without any wait. iris_gemm_no_wait does nothing.
 *            wait_k(k0) comes when the copy of slab k0 is issued, which is STAGES-1 (mma)
 *            or STAGES-2 (wgmma) slabs ahead of the slab being multiplied: a wait that
 *            spins there stalls the tile although earlier slabs are in shared memory.
 *   The kernel: blockDim.x == Cfg::threads (1-D), __launch_bounds__(Cfg::threads, 1).
 *
 * Rules (the host side checks them; the device code assumes them)
 *   - K % 8 == 0 (K == 0 gives C = bias or 0); lda, ldb, ldc multiples of 8 elements;
 *     A, B, C, bias 16-byte aligned. M, N, m0, n0 arbitrary (m0, n0 >= 0): rows >= M and
 *     columns >= N read as zero, are never written and never read from memory. A tile with
 *     m0 >= M or n0 >= N returns at once without touching anything (no wait_k calls).
 *   - Every thread of the CTA calls iris_gemm_tile with the same arguments. The function
 *     begins with __syncthreads() and leaves no copy or MMA in flight, so back-to-back
 *     calls may reuse smem; code that reuses smem for something else after a call must
 *     __syncthreads() first.
 *   - fp32 accumulation in the tensor cores (their internal order and rounding).
 *
 * Configurations (named ones: typedefs at the end, with registers and shared memory)
 *   mma.sync : iris_gemm_cfg<BM, BN, BK, WM, WN, STAGES>  WM x WN warps, warp tile
 *              (BM/WM) x (BN/WN); BK in {32, 64, 128}; BN/WN a power of two >= 32;
 *              (BM/WM) % 16 == 0; smem_bytes = STAGES * (BM + BN) * BK * 2.
 *   wgmma    : iris_gemm_wgmma_cfg<BM, BN, STAGES>  BM/64 warpgroups (BM 64 or 128), each
 *              a 64 x BN slab with wgmma m64nBNk16; BK = 64; BN in {64, 128, 256} (BM = 128:
 *              128 or 256); STAGES >= 3; smem_bytes = STAGES * (BM + BN) * 128 + 1024.
 *
 * How (mma.sync core)
 *   STAGES-deep cp.async.cg ring (16-byte chunks, zero-fill for masked chunks), one
 *   __syncthreads per BK slab; shared tiles keep rows of 16-byte chunks with chunk c of row
 *   r stored at c ^ (r & 7) (64-byte rows: c ^ ((r >> 1) & 3)), so every 8-row ldmatrix
 *   phase hits 8 distinct bank groups; ldmatrix.x4 (A, B N x K) / ldmatrix.x4.trans
 *   (B K x N) fragments double-buffered across the k16 steps; epilogue: a 4 x 4 transpose
 *   inside each lane quad (shfl.xor) gives each lane 8 consecutive columns, stored with
 *   16-byte stores (masked scalar stores on the right edge).
 * How (wgmma core)
 *   Same ring, laid out as the canonical 128B-swizzle layouts of wgmma (A and B N x K:
 *   K-major, 128-byte rows of 64 k; B K x N: MN-major, 64-column blocks of 64 k-rows);
 *   per slab: wait own copies, fence.proxy.async, __syncthreads, issue the next copy,
 *   4 x wgmma (k16) per warpgroup, commit, wait until at most one group is in flight.
 *   Prefetch distance STAGES-2 (one slab's wgmma overlaps the next barrier).
 */
#ifndef IRIS_INTERNAL_GEMM_CORE_H
#define IRIS_INTERNAL_GEMM_CORE_H
#if defined(__CUDACC__) && !defined(__HIP_PLATFORM_AMD__) && !defined(__HIPCC__)
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#define IRIS_GEMM_CORE_CUDA 1      /* the CUDA body is compiled (nvcc) */
#define IRIS_GEMM_CORE_AVAILABLE 1 /* a tile core is compiled (here: CUDA; gemm_core_mfma.h: AMD) */
#elif defined(__HIPCC__) || defined(__HIP__)
#include <hip/hip_runtime.h>
#endif

#if defined(IRIS_GEMM_CORE_CUDA) || defined(__HIPCC__) || defined(__HIP__)
/* A wait_k that does not wait (plain GEMM). */
struct iris_gemm_no_wait {
  __device__ __forceinline__ void operator()(int) const {}
  __device__ __forceinline__ void operator()(int, int) const {} /* the TMA core's wait_a(m0, k0) */
};

/* One CTA: C[m0:m0+BM, n0:n0+BN] = A[m0:, 0:K] * B (+ bias), by the core that Cfg names
   (mma.sync, wgmma or, on AMD, MFMA). See the header comment. BiasT (deduced):
   __nv_bfloat16 / hip_bfloat16, __half or float; a literal nullptr takes the overload below. */
template <class Cfg, typename T, bool B_KN, typename OutT, class WaitK, typename BiasT>
__device__ __forceinline__ void iris_gemm_tile(const T *A, int lda, const T *B, int ldb, OutT *C, int ldc, const BiasT *bias, int M, int N, int K, int m0,
                                               int n0, char *smem, WaitK wait_k) {
  Cfg::template run<T, B_KN, OutT, WaitK, BiasT>(A, lda, B, ldb, C, ldc, bias, M, N, K, m0, n0, smem, wait_k);
}
template <class Cfg, typename T, bool B_KN, typename OutT, class WaitK>
__device__ __forceinline__ void iris_gemm_tile(const T *A, int lda, const T *B, int ldb, OutT *C, int ldc, decltype(nullptr), int M, int N, int K, int m0,
                                               int n0, char *smem, WaitK wait_k) {
  Cfg::template run<T, B_KN, OutT, WaitK, T>(A, lda, B, ldb, C, ldc, (const T *)nullptr, M, N, K, m0, n0, smem, wait_k);
}
#endif

#if defined(IRIS_GEMM_CORE_CUDA)

/* wgmma (sm_90a) in this device pass? (no device pass = host code: irrelevant) */
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define IRIS_GC_WGMMA 1
#else
#define IRIS_GC_WGMMA 0
#endif

/* ---- PTX primitives (the only inline assembly of this file) ---- */
__device__ __forceinline__ uint32_t iris_gc_smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
/* 16-byte async copy global -> shared; bytes < 16 reads only `bytes` (0: none) and zero-fills the rest */
__device__ __forceinline__ void iris_gc_cp_async16(uint32_t dst, const void *src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void iris_gc_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void iris_gc_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void iris_gc_ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void iris_gc_ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
/* d += a * b, m16n8k16, A row-major fragment (4 regs), B column fragment (2 regs), f32 accumulators */
template <bool F16> __device__ __forceinline__ void iris_gc_mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if (F16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#if IRIS_GC_WGMMA
/* generic-proxy shared-memory writes (cp.async) -> later reads by wgmma (async proxy) */
__device__ __forceinline__ void iris_gc_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void iris_gc_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void iris_gc_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void iris_gc_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* keeps the compiler from moving accesses of an accumulator across wgmma issue/wait */
__device__ __forceinline__ void iris_gc_fence_reg(float &r) { asm volatile("" : "+f"(r)::"memory"); }
/* d(64 x N, f32) += A(64 x 16, smem desc da, K-major) * B(16 x N, smem desc db; TB: 0 K-major, 1 N-major) */
template <bool F16, int TB>
__device__ __forceinline__ void iris_gc_wgmma_n64(float (&d)[32], uint64_t da, uint64_t db) {
  if (F16)
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, %35;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(1), "n"(TB));
  else
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, %35;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(1), "n"(TB));
}
template <bool F16, int TB>
__device__ __forceinline__ void iris_gc_wgmma_n128(float (&d)[64], uint64_t da, uint64_t db) {
  if (F16)
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, %67;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(1), "n"(TB));
  else
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, %67;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(1), "n"(TB));
}
template <bool F16, int TB>
__device__ __forceinline__ void iris_gc_wgmma_n256(float (&d)[128], uint64_t da, uint64_t db) {
  if (F16)
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, "
      "%65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "
      "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, "
      "%106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "
      "%124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
        "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
        "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),
        "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
        "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(1), "n"(TB));
  else
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, "
      "%65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "
      "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, "
      "%106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "
      "%124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
        "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
        "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),
        "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
        "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(1), "n"(TB));
}
#endif /* IRIS_GC_WGMMA */
/* ---- end of PTX primitives ---- */

/* ---- helpers ---- */
template <typename T> struct iris_gc_elem; /* input element types: bf16, fp16 (others: incomplete type) */
template <> struct iris_gc_elem<__nv_bfloat16> { enum { f16 = 0 }; };
template <> struct iris_gc_elem<__half> { enum { f16 = 1 }; };

/* bias elements: bf16, fp16 or fp32, whatever T and OutT are */
__device__ __forceinline__ float iris_gc_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float iris_gc_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float iris_gc_to_float(float x) { return x; }

/* output element types: a pair of adjacent columns, 8 columns as four pairs */
template <typename OutT> struct iris_gc_out;
template <> struct iris_gc_out<__nv_bfloat16> {
  typedef uint32_t pair;
  static __device__ __forceinline__ pair pack(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return (uint32_t)__bfloat16_as_ushort(h.x) | ((uint32_t)__bfloat16_as_ushort(h.y) << 16);
  }
  static __device__ __forceinline__ void store8(__nv_bfloat16 *p, const pair (&w)[4]) {
    *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  static __device__ __forceinline__ void store1(__nv_bfloat16 *p, const pair (&w)[4], int e) {
    *p = __ushort_as_bfloat16((unsigned short)(w[e >> 1] >> (16 * (e & 1))));
  }
};
template <> struct iris_gc_out<__half> {
  typedef uint32_t pair;
  static __device__ __forceinline__ pair pack(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return (uint32_t)__half_as_ushort(h.x) | ((uint32_t)__half_as_ushort(h.y) << 16);
  }
  static __device__ __forceinline__ void store8(__half *p, const pair (&w)[4]) {
    *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  static __device__ __forceinline__ void store1(__half *p, const pair (&w)[4], int e) {
    *p = __ushort_as_half((unsigned short)(w[e >> 1] >> (16 * (e & 1))));
  }
};
template <> struct iris_gc_out<float> {
  typedef float2 pair;
  static __device__ __forceinline__ pair pack(float a, float b) { return make_float2(a, b); }
  static __device__ __forceinline__ void store8(float *p, const pair (&w)[4]) {
    reinterpret_cast<float4 *>(p)[0] = make_float4(w[0].x, w[0].y, w[1].x, w[1].y);
    reinterpret_cast<float4 *>(p)[1] = make_float4(w[2].x, w[2].y, w[3].x, w[3].y);
  }
  static __device__ __forceinline__ void store1(float *p, const pair (&w)[4], int e) { *p = (e & 1) ? w[e >> 1].y : w[e >> 1].x; }
};
__device__ __forceinline__ uint32_t iris_gc_shfl_xor(uint32_t v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
__device__ __forceinline__ float2 iris_gc_shfl_xor(float2 v, int m) {
  return make_float2(__shfl_xor_sync(0xffffffffu, v.x, m), __shfl_xor_sync(0xffffffffu, v.y, m));
}
/* Lane t of a quad holds v[j] = element (row t, column j) of a 4 x 4 matrix; afterwards it
   holds v[j] = element (row j, column t). Two exchanges (xor 1, xor 2), no dynamic indexing. */
template <typename P> __device__ __forceinline__ void iris_gc_quad_transpose(P (&v)[4], int t) {
  const bool o1 = (t & 1) != 0, o2 = (t & 2) != 0;
  P a = o1 ? v[0] : v[1], b = o1 ? v[2] : v[3];
  a = iris_gc_shfl_xor(a, 1);
  b = iris_gc_shfl_xor(b, 1);
  if (o1) { v[0] = a; v[2] = b; } else { v[1] = a; v[3] = b; }
  P c = o2 ? v[0] : v[2], d = o2 ? v[1] : v[3];
  c = iris_gc_shfl_xor(c, 2);
  d = iris_gc_shfl_xor(d, 2);
  if (o2) { v[0] = c; v[1] = d; } else { v[2] = c; v[3] = d; }
}

/* 16-byte chunk index of chunk c of row r, in a tile of CPR chunks per row (CPR = 4 or a
   multiple of 8): the XOR spreads any 8 consecutive rows at one chunk over 8 bank groups. */
template <int CPR> __device__ __forceinline__ int iris_gc_swz(int r, int c) {
  return CPR >= 8 ? r * CPR + (c ^ (r & 7)) : r * CPR + (c ^ ((r >> 1) & 3));
}

/* Epilogue shared by both cores. acc[mt][j][e] holds row row0 + 16*mt + lane/4 + 8*(e/2),
   column col0 + 8*j + 2*(lane%4) + e%2 (the m16n8 accumulator layout, which is also the
   wgmma m64nN layout of one warp). Adds bias in fp32, rounds to OutT, transposes each
   group of 4 n8 tiles inside the lane quad so lane t owns 8 consecutive columns of tile
   4q+t, stores them with one 16-byte store (float: two), masked scalars at the right edge.
   Where row r goes: rows(r), a pointer to element (r, 0) of the destination (called for
   rows < M only, each time a row is stored); iris_gc_rows: C + r * ldc (the default
   overload below). The TMA core's users may pass another (iris_gemm_tma_tiles with an
   output policy, internal/gemm/core_tma.h). */
template <typename OutT> struct iris_gc_rows {
  OutT *C;
  int ldc;
  __device__ __forceinline__ OutT *operator()(int row) const { return C + (size_t)row * ldc; }
};
/* Rows::hoist (optional, default false): true where rows(row) costs more than a multiply
   (a division, a table): it is then called once per row before the column loop. */
template <class R> __host__ __device__ constexpr auto iris_gc_rows_hoist(int) -> decltype(R::hoist, bool()) { return R::hoist; }
template <class R> __host__ __device__ constexpr bool iris_gc_rows_hoist(long) { return false; }
/* Rows::direct (optional, default false): store each lane's two adjacent values (one pair,
   8 bytes for fp32) where the MMA left them, without the quad transpose: a quad then
   covers 8 adjacent columns of a row (one 32-byte sector for fp32), no shuffles, twice as
   many (half as wide) stores. Row pointers must be aligned to a pair. */
template <class R> __host__ __device__ constexpr auto iris_gc_rows_direct(int) -> decltype(R::direct, bool()) { return R::direct; }
template <class R> __host__ __device__ constexpr bool iris_gc_rows_direct(long) { return false; }
/* rp[mt][h] = rows(r) for a lane's rows r = r0 + 16 mt + 8 h (r0: row0 + lane / 4) where
   `on` and r < M, else nullptr */
template <int MT, typename OutT, class Rows>
__device__ __forceinline__ void iris_gc_row_ptrs(OutT *(&rp)[MT][2], const Rows &rows, bool on, int M, int r0) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = r0 + 16 * mt + 8 * h;
      rp[mt][h] = on && row < M ? rows(row) : nullptr;
    }
}
template <int MT, int NT, typename OutT, typename BiasT, class Rows>
__device__ __forceinline__ void iris_gc_epilogue_direct(const float (&acc)[MT][NT][4], const Rows &rows, const BiasT *__restrict__ bias, int M, int N, int row0,
                                                        int col0, int lane) {
  typedef iris_gc_out<OutT> O;
  typedef typename O::pair P;
  const int g = lane >> 2, t = lane & 3;
  OutT *rp[MT][2];
  iris_gc_row_ptrs<MT>(rp, rows, true, M, row0 + g);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int c = col0 + 8 * j + 2 * t;
    const float b0 = (bias != nullptr && c < N) ? iris_gc_to_float(bias[c]) : 0.f, b1 = (bias != nullptr && c + 1 < N) ? iris_gc_to_float(bias[c + 1]) : 0.f;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (!rp[mt][h] || c >= N) continue;
        const P v = O::pack(acc[mt][j][2 * h] + b0, acc[mt][j][2 * h + 1] + b1);
        if (c + 2 <= N) {
          *reinterpret_cast<P *>(rp[mt][h] + c) = v;
        } else {
          const P w[4] = {v, v, v, v};
          O::store1(rp[mt][h] + c, w, 0);
        }
      }
  }
}
template <int MT, int NT, typename OutT, typename BiasT, class Rows>
__device__ __forceinline__ void iris_gc_epilogue_rows(const float (&acc)[MT][NT][4], const Rows &rows, const BiasT *__restrict__ bias, int M, int N, int row0,
                                                      int col0, int lane) {
  static_assert(NT % 4 == 0, "iris_gc_epilogue: NT must be a multiple of 4");
  typedef iris_gc_out<OutT> O;
  typedef typename O::pair P;
  if (iris_gc_rows_direct<Rows>(0)) {
    iris_gc_epilogue_direct<MT, NT, OutT>(acc, rows, bias, M, N, row0, col0, lane);
    return;
  }
  const int g = lane >> 2, t = lane & 3;
  constexpr bool hoist = iris_gc_rows_hoist<Rows>(0);
  OutT *rp[MT][2];
  iris_gc_row_ptrs<MT>(rp, rows, hoist, M, row0 + g);
#pragma unroll
  for (int q = 0; q < NT / 4; ++q) {
    float bv[4][2];
#pragma unroll
    for (int jj = 0; jj < 4; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = col0 + 8 * (4 * q + jj) + 2 * t + e;
        bv[jj][e] = (bias != nullptr && c < N) ? iris_gc_to_float(bias[c]) : 0.f;
      }
    const int col = col0 + 8 * (4 * q + t); /* after the transpose */
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 16 * mt + g + 8 * h;
        P v[4];
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) v[jj] = O::pack(acc[mt][4 * q + jj][2 * h] + bv[jj][0], acc[mt][4 * q + jj][2 * h + 1] + bv[jj][1]);
        iris_gc_quad_transpose(v, t); /* all lanes take part, whatever their row */
        if (row < M) {
          OutT *p = (hoist ? rp[mt][h] : rows(row)) + col;
          if (col + 8 <= N) {
            O::store8(p, v);
          } else {
#pragma unroll
            for (int e = 0; e < 8; ++e)
              if (col + e < N) O::store1(p + e, v, e);
          }
        }
      }
  }
}

template <int MT, int NT, typename OutT, typename BiasT>
__device__ __forceinline__ void iris_gc_epilogue(const float (&acc)[MT][NT][4], OutT *__restrict__ C, int ldc, const BiasT *__restrict__ bias,
                                                 int M, int N, int row0, int col0, int lane) {
  const iris_gc_rows<OutT> rows = {C, ldc};
  iris_gc_epilogue_rows<MT, NT, OutT>(acc, rows, bias, M, N, row0, col0, lane);
}

/* ---- mma.sync core ---- */
template <class Cfg, typename T, bool B_KN, typename OutT, class WaitK, typename BiasT>
__device__ __forceinline__ void iris_gc_mma_tile(const T *__restrict__ A, int lda, const T *__restrict__ B, int ldb, OutT *__restrict__ C, int ldc,
                                                 const BiasT *__restrict__ bias, int M, int N, int K, int m0, int n0, char *smem, WaitK &wait_k) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, S = Cfg::STAGES, NTHR = Cfg::threads, WN = Cfg::WN;
  constexpr int WTM = BM / Cfg::WM, WTN = BN / WN, MT = WTM / 16, NT = WTN / 8, KK = BK / 16;
  constexpr int A_CPR = BK / 8, A_RSTEP = NTHR / A_CPR, A_NCH = BM * A_CPR / NTHR;
  constexpr int B_CPR = B_KN ? BN / 8 : BK / 8, B_RSTEP = NTHR / B_CPR, B_NCH = BK * BN / 8 / NTHR;
  constexpr int A_BYTES = BM * BK * 2, STAGE = Cfg::stage_bytes;
  constexpr bool F16 = iris_gc_elem<T>::f16 != 0;

  if (m0 >= M || n0 >= N) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp / WN, wn = warp % WN;
  const uint32_t sbase = iris_gc_smem_u32(smem);

  /* global -> shared: chunk i of this thread is row (x_r + i*X_RSTEP), 16-byte chunk x_c of
     the row (consecutive threads take consecutive chunks of a row: coalesced) */
  const int a_r = tid / A_CPR, a_c = tid % A_CPR, b_r = tid / B_CPR, b_c = tid % B_CPR;
  uint32_t a_rows = 0, b_rows = 0;
#pragma unroll
  for (int i = 0; i < A_NCH; ++i) a_rows |= (m0 + a_r + i * A_RSTEP < M ? 1u : 0u) << i;
  const T *a_src = A + (size_t)(m0 + a_r < M ? m0 + a_r : 0) * lda + a_c * 8; /* rows grow with i */
  const size_t a_step = (size_t)A_RSTEP * lda, b_step = (size_t)B_RSTEP * ldb;
  const T *b_src;
  int b_bytes = 16;
  if (B_KN) { /* rows k, chunk = 8 columns n; a chunk that crosses N reads only its part */
    const int left = N - (n0 + b_c * 8);
    b_bytes = left >= 8 ? 16 : (left > 0 ? 2 * left : 0);
    b_src = B + (size_t)b_r * ldb + (b_bytes ? n0 + b_c * 8 : 0);
  } else { /* rows n, chunk = 8 k */
#pragma unroll
    for (int i = 0; i < B_NCH; ++i) b_rows |= (n0 + b_r + i * B_RSTEP < N ? 1u : 0u) << i;
    b_src = B + (size_t)(n0 + b_r < N ? n0 + b_r : 0) * ldb + b_c * 8;
  }

  /* shared offsets of chunk 0; chunk i is X_DSTEP bytes further when X_RSTEP % 8 == 0
     (same swizzle phase), else computed per chunk */
  const uint32_t a_dst = 16 * iris_gc_swz<A_CPR>(a_r, a_c), b_dst = 16 * iris_gc_swz<B_CPR>(b_r, b_c);
  auto a_off = [&](int i) -> uint32_t {
    return A_RSTEP % 8 == 0 ? a_dst + i * (A_RSTEP * A_CPR * 16) : 16 * iris_gc_swz<A_CPR>(a_r + i * A_RSTEP, a_c);
  };
  auto b_off = [&](int i) -> uint32_t {
    return B_RSTEP % 8 == 0 ? b_dst + i * (B_RSTEP * B_CPR * 16) : 16 * iris_gc_swz<B_CPR>(b_r + i * B_RSTEP, b_c);
  };
  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * BK;
    const uint32_t sa = sbase + stage * STAGE, sb = sa + A_BYTES;
    const bool ak = k0 + a_c * 8 < K;
    const T *pa = a_src + k0;
#pragma unroll
    for (int i = 0; i < A_NCH; ++i, pa += a_step) {
      const bool ok = ak && ((a_rows >> i) & 1u);
      iris_gc_cp_async16(sa + a_off(i), ok ? pa : A, ok ? 16 : 0);
    }
    if (B_KN) {
      const T *pb = b_src + (size_t)k0 * ldb;
#pragma unroll
      for (int i = 0; i < B_NCH; ++i, pb += b_step) {
        const bool ok = k0 + b_r + i * B_RSTEP < K && b_bytes > 0;
        iris_gc_cp_async16(sb + b_off(i), ok ? pb : B, ok ? b_bytes : 0);
      }
    } else {
      const bool bk = k0 + b_c * 8 < K;
      const T *pb = b_src + k0;
#pragma unroll
      for (int i = 0; i < B_NCH; ++i, pb += b_step) {
        const bool ok = bk && ((b_rows >> i) & 1u);
        iris_gc_cp_async16(sb + b_off(i), ok ? pb : B, ok ? 16 : 0);
      }
    }
  };
  /* Fragments of k16 step kk. A: ldmatrix.x4, lanes 0-15 give rows 0-15 at k 0-7, lanes
     16-31 rows 0-15 at k 8-15 -> a0..a3 of m16n8k16. B: one x4 per pair of n8 tiles:
       K x N (rows k, .trans): lanes 0-7 k 0-7 / 8-15 k 8-15 of tile 2p, 16-31 the same for 2p+1
       N x K (rows n):         lanes 0-7 n 0-7 k 0-7, 8-15 n 0-7 k 8-15, 16-31 the same for n 8-15
     Addresses: the offset of (mt = 0 or p = 0, kk = 0) per lane, then kk (A, B N x K) or p
     (B K x N) flips chunk bits above the lane's own (XOR, 32 bytes per step) and mt / kk
     (B K x N) / p (B N x K) add whole 16-row blocks (the swizzle phase repeats every 8 rows). */
  const uint32_t fa = 16 * iris_gc_swz<A_CPR>(wm * WTM + (lane & 15), lane >> 4);
  const uint32_t fb = B_KN ? 16 * iris_gc_swz<B_CPR>(lane & 15, wn * NT + (lane >> 4))
                           : 16 * iris_gc_swz<B_CPR>(wn * WTN + (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  auto load_frags = [&](int stage, int kk, uint32_t (&af)[MT][4], uint32_t (&bf)[NT][2]) {
    const uint32_t sa = sbase + stage * STAGE, sb = sa + A_BYTES;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) iris_gc_ldsm_x4(af[mt], sa + ((fa ^ (kk << 5)) + mt * (16 * A_CPR * 16)));
#pragma unroll
    for (int p = 0; p < NT / 2; ++p) {
      uint32_t r[4];
      if (B_KN)
        iris_gc_ldsm_x4_t(r, sb + ((fb ^ (p << 5)) + kk * (16 * B_CPR * 16)));
      else
        iris_gc_ldsm_x4(r, sb + ((fb ^ (kk << 5)) + p * (16 * B_CPR * 16)));
      bf[2 * p][0] = r[0];
      bf[2 * p][1] = r[1];
      bf[2 * p + 1][0] = r[2];
      bf[2 * p + 1][1] = r[3];
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.f;
  uint32_t af[2][MT][4], bf[2][NT][2];
  const int KT = (K + BK - 1) / BK;

  __syncthreads(); /* the previous user of smem (an earlier tile) is done */
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < KT) {
      wait_k(s * BK);
      load_stage(s, s);
    }
    iris_gc_cp_async_commit(); /* empty groups keep the count uniform */
  }
  iris_gc_cp_async_wait<S - 2>();
  __syncthreads();
  int rs = 0, ws = S - 1; /* stage read, stage written next */
  if (KT > 0) load_frags(0, 0, af[0], bf[0]);
  for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
    for (int kk = 0; kk < KK; ++kk) {
      if (kk == KK - 1) { /* stage kt+1 complete and visible; every warp is done with kt-1 */
        iris_gc_cp_async_wait<S - 2>();
        __syncthreads();
        rs = rs + 1 == S ? 0 : rs + 1;
      }
      if (kk < KK - 1 || kt + 1 < KT) load_frags(rs, (kk + 1) % KK, af[(kk + 1) & 1], bf[(kk + 1) & 1]);
      if (kk == 0) { /* refill the stage read in kt-1 with slab kt+S-1 */
        const int kn = kt + S - 1;
        if (kn < KT) {
          wait_k(kn * BK);
          load_stage(ws, kn);
        }
        iris_gc_cp_async_commit();
        ws = ws + 1 == S ? 0 : ws + 1;
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int jj = 0; jj < NT; ++jj) {
          const int j = (mt & 1) ? NT - 1 - jj : jj; /* serpentine: B fragment reuse */
          iris_gc_mma16816<F16>(acc[mt][j], af[kk & 1][mt], bf[kk & 1][j]);
        }
    }
  }
  iris_gc_cp_async_wait<0>(); /* only empty groups can be left */
  iris_gc_epilogue<MT, NT>(acc, C, ldc, bias, M, N, m0 + wm * WTM, n0 + wn * WTN, lane);
}

/* ---- wgmma core ---- */
#if IRIS_GC_WGMMA
/* shared-memory matrix descriptor, 128-byte swizzle, base offset 0 (1024-aligned atoms) */
__device__ __forceinline__ uint64_t iris_gc_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}
template <int N, bool F16, int TB> struct iris_gc_wgmma_op;
template <bool F16, int TB> struct iris_gc_wgmma_op<64, F16, TB> {
  static __device__ __forceinline__ void run(float (&d)[32], uint64_t a, uint64_t b) { iris_gc_wgmma_n64<F16, TB>(d, a, b); }
};
template <bool F16, int TB> struct iris_gc_wgmma_op<128, F16, TB> {
  static __device__ __forceinline__ void run(float (&d)[64], uint64_t a, uint64_t b) { iris_gc_wgmma_n128<F16, TB>(d, a, b); }
};
template <bool F16, int TB> struct iris_gc_wgmma_op<256, F16, TB> {
  static __device__ __forceinline__ void run(float (&d)[128], uint64_t a, uint64_t b) { iris_gc_wgmma_n256<F16, TB>(d, a, b); }
};

/* One 64-k slab of a 64 x BN accumulator (wgmma core, TMA core): 4 x wgmma k16 from the
   stage's A rows at sa and B at sb (layouts below), committed as one group. Does not wait. */
template <int BN, bool F16, bool B_KN>
__device__ __forceinline__ void iris_gc_wgmma_slab(float (&d)[BN / 2], uint32_t sa, uint32_t sb) {
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) iris_gc_fence_reg(d[i]);
  iris_gc_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    iris_gc_wgmma_op<BN, F16, B_KN ? 1 : 0>::run(d, iris_gc_desc(sa + 32 * kk, 16, 1024),
                                                 B_KN ? iris_gc_desc(sb + 2048 * kk, 8192, 1024) : iris_gc_desc(sb + 32 * kk, 16, 1024));
  iris_gc_wgmma_commit();
}

/* The same for a 128 x BN accumulator held as two 64-row halves (ping-pong TMA core): A
   rows 0..63 at sa into d0, rows 64..127 (8192 bytes further) into d1, one group. */
template <int BN, bool F16, bool B_KN>
__device__ __forceinline__ void iris_gc_wgmma_slab2(float (&d0)[BN / 2], float (&d1)[BN / 2], uint32_t sa, uint32_t sb) {
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) { iris_gc_fence_reg(d0[i]); iris_gc_fence_reg(d1[i]); }
  iris_gc_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t db = B_KN ? iris_gc_desc(sb + 2048 * kk, 8192, 1024) : iris_gc_desc(sb + 32 * kk, 16, 1024);
    iris_gc_wgmma_op<BN, F16, B_KN ? 1 : 0>::run(d0, iris_gc_desc(sa + 32 * kk, 16, 1024), db);
    iris_gc_wgmma_op<BN, F16, B_KN ? 1 : 0>::run(d1, iris_gc_desc(sa + 8192 + 32 * kk, 16, 1024), db);
  }
  iris_gc_wgmma_commit();
}

/* Shared layout of a stage (1024-aligned): A tile BM x 64 then B tile, 128-byte rows.
     A, B N x K (K-major): row r (m or n) at r*128, k-chunk c (8 k) at ((c ^ (r & 7)) * 16)
       = Swizzle<3,4,3> of the canonical K-major layout; descriptor SBO = 1024 (8 rows),
       LBO unused (1); the k16 step kk starts 32*kk bytes further (the swizzle is applied by
       the hardware to the final address, as for TMA-written tiles).
     B K x N (N-major): block nb of 64 columns at nb*8192, k-row r at r*128, n-chunk c
       (8 columns) at ((c ^ (r & 7)) * 16); descriptor LBO = 8192 (next 64 columns),
       SBO = 1024 (next 8 k-rows), the k16 step kk starts 2048*kk bytes further. */
template <class Cfg, typename T, bool B_KN, typename OutT, class WaitK, typename BiasT>
__device__ __forceinline__ void iris_gc_wgmma_tile(const T *__restrict__ A, int lda, const T *__restrict__ B, int ldb, OutT *__restrict__ C, int ldc,
                                                   const BiasT *__restrict__ bias, int M, int N, int K, int m0, int n0, char *smem, WaitK &wait_k) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, S = Cfg::STAGES, NTHR = Cfg::threads;
  constexpr int A_RSTEP = NTHR / 8, A_NCH = BM * 8 / NTHR;
  constexpr int B_CPR = B_KN ? BN / 8 : 8, B_RSTEP = NTHR / B_CPR, B_NCH = 64 * BN / 8 / NTHR;
  constexpr int A_BYTES = BM * 128, STAGE = Cfg::stage_bytes;
  constexpr bool F16 = iris_gc_elem<T>::f16 != 0;

  if (m0 >= M || n0 >= N) return;
  const int tid = threadIdx.x, wg = tid >> 7, wq = (tid >> 5) & 3, lane = tid & 31;
  const uint32_t sbase = (iris_gc_smem_u32(smem) + 1023u) & ~1023u;

  const int a_r = tid >> 3, a_c = tid & 7, b_r = tid / B_CPR, b_c = tid % B_CPR;
  uint32_t a_rows = 0, b_rows = 0;
#pragma unroll
  for (int i = 0; i < A_NCH; ++i) a_rows |= (m0 + a_r + i * A_RSTEP < M ? 1u : 0u) << i;
  const T *a_src = A + (size_t)(m0 + a_r < M ? m0 + a_r : 0) * lda + a_c * 8;
  const size_t a_step = (size_t)A_RSTEP * lda, b_step = (size_t)B_RSTEP * ldb;
  const T *b_src;
  int b_bytes = 16;
  if (B_KN) {
    const int left = N - (n0 + b_c * 8);
    b_bytes = left >= 8 ? 16 : (left > 0 ? 2 * left : 0);
    b_src = B + (size_t)b_r * ldb + (b_bytes ? n0 + b_c * 8 : 0);
  } else {
#pragma unroll
    for (int i = 0; i < B_NCH; ++i) b_rows |= (n0 + b_r + i * B_RSTEP < N ? 1u : 0u) << i;
    b_src = B + (size_t)(n0 + b_r < N ? n0 + b_r : 0) * ldb + b_c * 8;
  }

  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * 64;
    const uint32_t sa = sbase + stage * STAGE, sb = sa + A_BYTES;
    const bool ak = k0 + a_c * 8 < K;
#pragma unroll
    for (int i = 0; i < A_NCH; ++i) {
      const int r = a_r + i * A_RSTEP;
      const bool ok = ak && ((a_rows >> i) & 1u);
      iris_gc_cp_async16(sa + r * 128 + ((a_c ^ (r & 7)) << 4), ok ? a_src + i * a_step + k0 : A, ok ? 16 : 0);
    }
    if (B_KN) {
#pragma unroll
      for (int i = 0; i < B_NCH; ++i) {
        const int r = b_r + i * B_RSTEP;
        const bool ok = k0 + r < K && b_bytes > 0;
        iris_gc_cp_async16(sb + (b_c >> 3) * 8192 + r * 128 + (((b_c & 7) ^ (r & 7)) << 4), ok ? b_src + (size_t)k0 * ldb + i * b_step : B,
                           ok ? b_bytes : 0);
      }
    } else {
      const bool bk = k0 + b_c * 8 < K;
#pragma unroll
      for (int i = 0; i < B_NCH; ++i) {
        const int r = b_r + i * B_RSTEP;
        const bool ok = bk && ((b_rows >> i) & 1u);
        iris_gc_cp_async16(sb + r * 128 + ((b_c ^ (r & 7)) << 4), ok ? b_src + i * b_step + k0 : B, ok ? 16 : 0);
      }
    }
  };

  float acc[1][BN / 8][4];
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[0][j][e] = 0.f;
  float(&d)[BN / 2] = reinterpret_cast<float(&)[BN / 2]>(acc);
  const int KT = (K + 63) / 64;

  __syncthreads(); /* the previous user of smem (an earlier tile) is done */
#pragma unroll
  for (int s = 0; s < S - 2; ++s) {
    if (s < KT) {
      wait_k(s * 64);
      load_stage(s, s);
    }
    iris_gc_cp_async_commit();
  }
  int rs = 0, ws = S - 2;
  for (int kt = 0; kt < KT; ++kt) {
    iris_gc_cp_async_wait<S - 3>(); /* this thread's copies of slab kt are done */
    iris_gc_fence_proxy_async();    /* ... and visible to the async proxy (wgmma) */
    __syncthreads();                /* everyone's; and every warpgroup is done with slab kt-2 */
    {
      const int kn = kt + S - 2; /* refill the stage of slab kt-2 */
      if (kn < KT) {
        wait_k(kn * 64);
        load_stage(ws, kn);
      }
      iris_gc_cp_async_commit();
      ws = ws + 1 == S ? 0 : ws + 1;
    }
    const uint32_t sa = sbase + rs * STAGE + wg * 64 * 128, sb = sbase + rs * STAGE + A_BYTES;
    rs = rs + 1 == S ? 0 : rs + 1;
    iris_gc_wgmma_slab<BN, F16, B_KN>(d, sa, sb);
    iris_gc_wgmma_wait<1>(); /* slab kt-1 done: its stage may be refilled after the next barrier */
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) iris_gc_fence_reg(d[i]);
  }
  iris_gc_wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) iris_gc_fence_reg(d[i]);
  iris_gc_cp_async_wait<0>();
  iris_gc_epilogue<1, BN / 8>(acc, C, ldc, bias, M, N, m0 + 64 * wg + 16 * wq, n0, lane);
}
#endif /* IRIS_GC_WGMMA */

/* ---- configurations ---- */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_> struct iris_gemm_cfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_;
  static constexpr int threads = WM * WN * 32;
  static constexpr int stage_bytes = (BM + BN) * BK * 2;
  static constexpr int smem_bytes = STAGES * stage_bytes;
  static constexpr bool wgmma = false;
  static_assert(BK == 32 || BK == 64 || BK == 128, "iris_gemm_cfg: BK must be 32, 64 or 128");
  static_assert(BM % WM == 0 && (BM / WM) % 16 == 0, "iris_gemm_cfg: warp tile rows (BM/WM) must be a multiple of 16");
  static_assert(BN % WN == 0 && (BN / WN) % 32 == 0, "iris_gemm_cfg: warp tile columns (BN/WN) must be a multiple of 32");
  static_assert(BN == 32 || BN % 64 == 0, "iris_gemm_cfg: BN must be 32 or a multiple of 64");
  static_assert(((BN / WN) & (BN / WN - 1)) == 0, "iris_gemm_cfg: warp tile columns (BN/WN) must be a power of two");
  static_assert(threads <= 1024 && threads % (BN / 8) == 0, "iris_gemm_cfg: thread count");
  static_assert((BM * BK / 8) % threads == 0 && (BK * BN / 8) % threads == 0, "iris_gemm_cfg: whole 16-byte chunks per thread");
  static_assert(BM * BK / 8 / threads <= 32 && BK * BN / 8 / threads <= 32, "iris_gemm_cfg: at most 32 chunks per thread and stage");
  static_assert(STAGES >= 2 && smem_bytes <= 227 * 1024, "iris_gemm_cfg: STAGES >= 2, at most 227 KB of shared memory");
  template <typename T, bool B_KN, typename OutT, class WaitK, typename BiasT>
  static __device__ __forceinline__ void run(const T *A, int lda, const T *B, int ldb, OutT *C, int ldc, const BiasT *bias, int M, int N, int K, int m0,
                                             int n0, char *smem, WaitK &wait_k) {
    iris_gc_mma_tile<iris_gemm_cfg, T, B_KN, OutT, WaitK, BiasT>(A, lda, B, ldb, C, ldc, bias, M, N, K, m0, n0, smem, wait_k);
  }
};

template <int BM_, int BN_, int STAGES_> struct iris_gemm_wgmma_cfg {
  static constexpr int BM = BM_, BN = BN_, BK = 64, STAGES = STAGES_;
  static constexpr int threads = BM / 64 * 128;
  static constexpr int stage_bytes = (BM + BN) * 128;
  static constexpr int smem_bytes = STAGES * stage_bytes + 1024; /* + alignment slack */
  static constexpr bool wgmma = true;
  /* the core that runs where wgmma was not compiled (same tile, threads, smem) */
  typedef iris_gemm_cfg<BM, BN, 64, 2, BM / 32, STAGES> fallback;
  static_assert(BM == 64 || BM == 128, "iris_gemm_wgmma_cfg: BM must be 64 or 128 (1 or 2 warpgroups)");
  static_assert(BN == 64 || BN == 128 || BN == 256, "iris_gemm_wgmma_cfg: BN must be 64, 128 or 256");
  static_assert(BN * 2 / BM >= 1 && (BN / (BM / 32)) % 32 == 0, "iris_gemm_wgmma_cfg: BM = 128 needs BN >= 128");
  static_assert(STAGES >= 3 && smem_bytes <= 227 * 1024, "iris_gemm_wgmma_cfg: STAGES >= 3, at most 227 KB of shared memory");
  static_assert(fallback::threads == threads && fallback::smem_bytes <= smem_bytes, "iris_gemm_wgmma_cfg: fallback");
  template <typename T, bool B_KN, typename OutT, class WaitK, typename BiasT>
  static __device__ __forceinline__ void run(const T *A, int lda, const T *B, int ldb, OutT *C, int ldc, const BiasT *bias, int M, int N, int K, int m0,
                                             int n0, char *smem, WaitK &wait_k) {
#if IRIS_GC_WGMMA
    iris_gc_wgmma_tile<iris_gemm_wgmma_cfg, T, B_KN, OutT, WaitK, BiasT>(A, lda, B, ldb, C, ldc, bias, M, N, K, m0, n0, smem, wait_k);
#else
    iris_gc_mma_tile<fallback, T, B_KN, OutT, WaitK, BiasT>(A, lda, B, ldb, C, ldc, bias, M, N, K, m0, n0, smem, wait_k);
#endif
  }
};

/* 1 where this device pass has the wgmma core (sm_90a), 0 where iris_gemm_wgmma_cfg falls back */
__device__ __forceinline__ int iris_gemm_wgmma_compiled() { return IRIS_GC_WGMMA; }

/* Named configurations. Registers: ptxas (nvcc 13.0, sm_90a), over T, OutT and both B
   layouts, no spills; they vary with the caller's own code around the call. */
/* big GEMMs, any target: 256 threads (2 x 4 warps of 64 x 64), 192 KB, 240-254 regs, 1 CTA/SM */
typedef iris_gemm_cfg<128, 256, 64, 2, 4, 4> iris_gemm_cfg_large;
/* 128 threads (2 x 2 warps of 64 x 64), 64 KB, 226-250 regs, 2 CTAs/SM */
typedef iris_gemm_cfg<128, 128, 32, 2, 2, 4> iris_gemm_cfg_medium;
/* small M or N: 128 threads (2 x 2 warps of 32 x 64), 96 KB, 154-206 regs, 2 CTAs/SM */
typedef iris_gemm_cfg<64, 128, 64, 2, 2, 4> iris_gemm_cfg_small;
/* big GEMMs, sm_90a: 256 threads (2 warpgroups x m64n256), 193 KB, 162-191 regs, 1 CTA/SM */
typedef iris_gemm_wgmma_cfg<128, 256, 4> iris_gemm_cfg_wgmma_large;
/* small M or N, sm_90a: 128 threads (1 warpgroup x m64n128), 97 KB, 112-168 regs, 2 CTAs/SM */
typedef iris_gemm_wgmma_cfg<64, 128, 4> iris_gemm_cfg_wgmma_small;

#endif /* IRIS_GEMM_CORE_CUDA */
#endif /* IRIS_INTERNAL_GEMM_CORE_H */
