/* internal/device/platform.h: the device vendor layer, beside the host one
 * (internal/core/platform.h). The only file of the device code that asks which vendor or
 * compiler it is built for (the GEMM cores, vendor-specific by nature, aside); every other
 * file calls what it defines, by iris_ names:
 *   the vendor's runtime and fp16 headers; IRIS_DEVICE_INLINE; IRIS_WARP_SIZE;
 *   the atomic primitives under iris_device.h's public atomics, for each memory order and
 *     scope (iris_detail_add ... iris_detail_fence): inline PTX with explicit semantics
 *     and scope on NVIDIA, __hip_atomic_* and __builtin_amdgcn_fence on AMD. Order and
 *     scope are template parameters: PTX needs a fixed instruction string, and HIP turns
 *     a run-time value into a branch ladder. They work on canonical types (unsigned,
 *     unsigned long long, int, long long, float, double); the public templates in
 *     iris_device.h map any 4/8-byte type onto them;
 *   16-byte accesses whose 8-byte halves are each single-copy atomic (the LL lines and
 *     the call headers of the collectives); a warp shuffle; the fp8 (e4m3) conversion
 *     instruction; the clock, the SM id, a short sleep, the trap;
 *   feature macros for the code whose choices differ by vendor:
 *     IRIS_DEVICE_POLL_CONFIRM  1: a wait polls relaxed and confirms with one acquire (AMD,
 *                               where an acquire invalidates caches); 0: it polls with
 *                               acquire loads (NVIDIA, where that is cheap)
 *     IRIS_DEVICE_TMA           1: the TMA / wgmma GEMM core can be compiled (NVIDIA)
 *     IRIS_DEVICE_BLASLT        1: the vendor BLAS of the GEMM plans' library paths
 *                               (cuBLASLt) exists (NVIDIA; AMD: no hipBLASLt path yet)
 *     IRIS_DEVICE_FP8_CVT       1 in a device pass with the e4m3 conversion instruction
 *                               (NVIDIA sm_89+): iris_detail_e4m3x4 is defined
 *     IRIS_DEVICE_HIP_BOUNDS(n) a kernel's block-size bound for hipcc only
 *
 * Part of iris_device.h (included by it, first); not a public header. */
#ifndef IRIS_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris.h"
#endif
#ifndef IRIS_INTERNAL_DEVICE_PLATFORM_H
#define IRIS_INTERNAL_DEVICE_PLATFORM_H

#if !(defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__))
#error "iris_device.h holds device code: compile with nvcc or hipcc"
#endif
#if defined(IRIS_USE_HIP)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#else
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#endif

#define IRIS_DEVICE_INLINE __device__ __forceinline__

/* Threads per warp (wavefront), on the device only: 64 on AMD CDNA, 32 on NVIDIA. */
#if defined(IRIS_USE_HIP)
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define IRIS_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define IRIS_WARP_SIZE 64
#endif
#else
#define IRIS_WARP_SIZE 32
#endif

/* IRIS_DEVICE_HIP_BOUNDS(n): a kernel launched with n threads or fewer, said to hipcc
 * only (it assumes 1024 and caps VGPRs at 128 without it; nvcc allocates the same
 * without it, and with it chose a different allocation for the LL kernel). */
#if defined(IRIS_USE_HIP)
#define IRIS_DEVICE_POLL_CONFIRM 1
#define IRIS_DEVICE_TMA 0
#define IRIS_DEVICE_BLASLT 0
#define IRIS_DEVICE_HIP_BOUNDS(n) __launch_bounds__(n)
#else
#define IRIS_DEVICE_POLL_CONFIRM 0
#define IRIS_DEVICE_TMA 1
#define IRIS_DEVICE_BLASLT 1
#define IRIS_DEVICE_HIP_BOUNDS(n)
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(IRIS_USE_HIP)
#define IRIS_DEVICE_FP8_CVT 1
#else
#define IRIS_DEVICE_FP8_CVT 0
#endif

#if defined(IRIS_USE_HIP)
/* ======================================================================== AMD == */
/* Order and scope as integral constants (clang wants literal-like constants here). */
template <iris_order_t O, iris_scope_t S>
struct iris_detail_hip {
  static constexpr int order = O == IRIS_ORDER_RELAXED ? __ATOMIC_RELAXED
                               : O == IRIS_ORDER_ACQUIRE ? __ATOMIC_ACQUIRE
                               : O == IRIS_ORDER_RELEASE ? __ATOMIC_RELEASE
                                                         : __ATOMIC_ACQ_REL;
  /* a failed CAS only loads */
  static constexpr int fail_order = (O == IRIS_ORDER_ACQUIRE || O == IRIS_ORDER_ACQ_REL) ? __ATOMIC_ACQUIRE : __ATOMIC_RELAXED;
  static constexpr int scope = S == IRIS_SCOPE_BLOCK ? __HIP_MEMORY_SCOPE_WORKGROUP : S == IRIS_SCOPE_DEVICE ? __HIP_MEMORY_SCOPE_AGENT : __HIP_MEMORY_SCOPE_SYSTEM;
};
#define IRIS_DETAIL_HIP_RMW(NAME, BUILTIN)                                                                   \
  template <iris_order_t O, iris_scope_t S, typename T>                                                    \
  IRIS_DEVICE_INLINE T iris_detail_##NAME(T *p, T v) {                                                     \
    return BUILTIN(p, v, iris_detail_hip<O, S>::order, iris_detail_hip<O, S>::scope);                          \
  }
IRIS_DETAIL_HIP_RMW(add, __hip_atomic_fetch_add)
IRIS_DETAIL_HIP_RMW(and, __hip_atomic_fetch_and)
IRIS_DETAIL_HIP_RMW(or, __hip_atomic_fetch_or)
IRIS_DETAIL_HIP_RMW(xor, __hip_atomic_fetch_xor)
IRIS_DETAIL_HIP_RMW(min, __hip_atomic_fetch_min)
IRIS_DETAIL_HIP_RMW(max, __hip_atomic_fetch_max)
IRIS_DETAIL_HIP_RMW(xchg, __hip_atomic_exchange)
#undef IRIS_DETAIL_HIP_RMW
template <iris_order_t O, iris_scope_t S, typename T>
IRIS_DEVICE_INLINE T iris_detail_cas(T *p, T expected, T desired) {
  __hip_atomic_compare_exchange_strong(p, &expected, desired, iris_detail_hip<O, S>::order, iris_detail_hip<O, S>::fail_order, iris_detail_hip<O, S>::scope);
  return expected; /* the old value, whether or not the exchange happened */
}
template <iris_order_t O, iris_scope_t S, typename T>
IRIS_DEVICE_INLINE T iris_detail_load(const T *p) {
  return __hip_atomic_load(p, iris_detail_hip<O, S>::order, iris_detail_hip<O, S>::scope);
}
template <iris_order_t O, iris_scope_t S, typename T>
IRIS_DEVICE_INLINE void iris_detail_store(T *p, T v) {
  __hip_atomic_store(p, v, iris_detail_hip<O, S>::order, iris_detail_hip<O, S>::scope);
}
#define IRIS_DETAIL_HIP_FENCE(SCOPE)                                                   \
  do {                                                                                 \
    if (O == IRIS_ORDER_ACQUIRE) __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, SCOPE);      \
    else if (O == IRIS_ORDER_RELEASE) __builtin_amdgcn_fence(__ATOMIC_RELEASE, SCOPE); \
    else __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, SCOPE);                              \
  } while (0)
template <iris_order_t O, iris_scope_t S>
IRIS_DEVICE_INLINE void iris_detail_fence() {
  if (O == IRIS_ORDER_RELAXED) return;
  if (S == IRIS_SCOPE_BLOCK) IRIS_DETAIL_HIP_FENCE("workgroup");
  else if (S == IRIS_SCOPE_DEVICE) IRIS_DETAIL_HIP_FENCE("agent");
  else IRIS_DETAIL_HIP_FENCE("");
}
#undef IRIS_DETAIL_HIP_FENCE
/* ---- the clock, the SM id, a pause, the trap */
IRIS_DEVICE_INLINE unsigned long long iris_detail_time_ns(void) {
  return __builtin_amdgcn_s_memrealtime() * 10ULL; /* 100 MHz constant clock on CDNA */
}

IRIS_DEVICE_INLINE unsigned iris_detail_smid(void) { return 0; /* not read on AMD */ }
/* a short pause between polls (frees issue slots, yields when ranks share a GPU) */
IRIS_DEVICE_INLINE void iris_detail_pause(void) { __builtin_amdgcn_s_sleep(2); }
IRIS_DEVICE_INLINE void iris_detail_trap(void) { __builtin_trap(); }

/* ---- 16-byte accesses: each 8-byte half one single-copy-atomic access (system scope) */
/* Store the line {x, y, z, w}. */
IRIS_DEVICE_INLINE void iris_detail_st16_volatile(uint4 *p, unsigned x, unsigned y, unsigned z, unsigned w) {
  unsigned long long lo = (unsigned long long)x | ((unsigned long long)y << 32), hi = (unsigned long long)z | ((unsigned long long)w << 32);
  __hip_atomic_store((unsigned long long *)p, lo, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  __hip_atomic_store((unsigned long long *)p + 1, hi, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
/* One read of a 16-byte line. */
IRIS_DEVICE_INLINE uint4 iris_detail_ld16_volatile(const uint4 *p) {
  unsigned long long lo = __hip_atomic_load((const unsigned long long *)p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  unsigned long long hi = __hip_atomic_load((const unsigned long long *)p + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  return make_uint4((unsigned)lo, (unsigned)(lo >> 32), (unsigned)hi, (unsigned)(hi >> 32));
}
/* Two adjacent 8-byte words (p 16-byte aligned), each read single-copy atomically. */
IRIS_DEVICE_INLINE void iris_detail_ld2_volatile(const unsigned long long *p, unsigned long long &a, unsigned long long &b) {
  a = __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  b = __hip_atomic_load(p + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
/* ---- lane exchange: v of lane (this lane ^ m), every lane of the warp taking part */
IRIS_DEVICE_INLINE float iris_detail_shfl_xor(float v, int m) { return __shfl_xor(v, m); }
/* ---- a whole warp: meet (memory ordered among its lanes), and "true in every lane" */
IRIS_DEVICE_INLINE void iris_detail_warp_sync(void) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
IRIS_DEVICE_INLINE bool iris_detail_warp_all(bool p) { return __all(p ? 1 : 0) != 0; }

#else
/* ===================================================================== NVIDIA == */

/* Expands M(".sem", ".scope", ...) for the (O, S) pair; the branches are
 * compile-time constants, so exactly one asm statement survives. */
#define IRIS_DETAIL_SEM_SCOPE(O, S, M, ...)                                                                                          \
  do {                                                                                                                             \
    if ((S) == IRIS_SCOPE_BLOCK) {                                                                                                   \
      if ((O) == IRIS_ORDER_RELAXED) M(".relaxed", ".cta", __VA_ARGS__) else if ((O) == IRIS_ORDER_ACQUIRE) M(".acquire", ".cta", __VA_ARGS__) \
      else if ((O) == IRIS_ORDER_RELEASE) M(".release", ".cta", __VA_ARGS__) else M(".acq_rel", ".cta", __VA_ARGS__)                    \
    } else if ((S) == IRIS_SCOPE_DEVICE) {                                                                                           \
      if ((O) == IRIS_ORDER_RELAXED) M(".relaxed", ".gpu", __VA_ARGS__) else if ((O) == IRIS_ORDER_ACQUIRE) M(".acquire", ".gpu", __VA_ARGS__) \
      else if ((O) == IRIS_ORDER_RELEASE) M(".release", ".gpu", __VA_ARGS__) else M(".acq_rel", ".gpu", __VA_ARGS__)                    \
    } else {                                                                                                                       \
      if ((O) == IRIS_ORDER_RELAXED) M(".relaxed", ".sys", __VA_ARGS__) else if ((O) == IRIS_ORDER_ACQUIRE) M(".acquire", ".sys", __VA_ARGS__) \
      else if ((O) == IRIS_ORDER_RELEASE) M(".release", ".sys", __VA_ARGS__) else M(".acq_rel", ".sys", __VA_ARGS__)                    \
    }                                                                                                                              \
  } while (0)

#define IRIS_DETAIL_ATOM_ASM(SEM, SCOPE, OP, C)                                                                        \
  { asm volatile("atom" SEM SCOPE ".global." OP " %0, [%1], %2;" : "=" C(r) : "l"(p), C(v) : "memory"); }
#define IRIS_DETAIL_PTX_RMW(NAME, CT, OP, C)                                      \
  template <iris_order_t O, iris_scope_t S>                                       \
  IRIS_DEVICE_INLINE CT iris_detail_##NAME(CT *p, CT v) {                         \
    CT r;                                                                         \
    IRIS_DETAIL_SEM_SCOPE(O, S, IRIS_DETAIL_ATOM_ASM, OP, C);                     \
    return r;                                                                     \
  }
IRIS_DETAIL_PTX_RMW(add, unsigned, "add.u32", "r")
IRIS_DETAIL_PTX_RMW(add, unsigned long long, "add.u64", "l")
IRIS_DETAIL_PTX_RMW(add, float, "add.f32", "f")
IRIS_DETAIL_PTX_RMW(add, double, "add.f64", "d")
IRIS_DETAIL_PTX_RMW(and, unsigned, "and.b32", "r")
IRIS_DETAIL_PTX_RMW(and, unsigned long long, "and.b64", "l")
IRIS_DETAIL_PTX_RMW(or, unsigned, "or.b32", "r")
IRIS_DETAIL_PTX_RMW(or, unsigned long long, "or.b64", "l")
IRIS_DETAIL_PTX_RMW(xor, unsigned, "xor.b32", "r")
IRIS_DETAIL_PTX_RMW(xor, unsigned long long, "xor.b64", "l")
IRIS_DETAIL_PTX_RMW(min, unsigned, "min.u32", "r")
IRIS_DETAIL_PTX_RMW(min, unsigned long long, "min.u64", "l")
IRIS_DETAIL_PTX_RMW(min, int, "min.s32", "r")
IRIS_DETAIL_PTX_RMW(min, long long, "min.s64", "l")
IRIS_DETAIL_PTX_RMW(max, unsigned, "max.u32", "r")
IRIS_DETAIL_PTX_RMW(max, unsigned long long, "max.u64", "l")
IRIS_DETAIL_PTX_RMW(max, int, "max.s32", "r")
IRIS_DETAIL_PTX_RMW(max, long long, "max.s64", "l")
IRIS_DETAIL_PTX_RMW(xchg, unsigned, "exch.b32", "r")
IRIS_DETAIL_PTX_RMW(xchg, unsigned long long, "exch.b64", "l")
#undef IRIS_DETAIL_PTX_RMW
#undef IRIS_DETAIL_ATOM_ASM

#define IRIS_DETAIL_CAS_ASM(SEM, SCOPE, OP, C)                                                                                      \
  { asm volatile("atom" SEM SCOPE ".global." OP " %0, [%1], %2, %3;" : "=" C(r) : "l"(p), C(expected), C(desired) : "memory"); }
template <iris_order_t O, iris_scope_t S>
IRIS_DEVICE_INLINE unsigned iris_detail_cas(unsigned *p, unsigned expected, unsigned desired) {
  unsigned r;
  IRIS_DETAIL_SEM_SCOPE(O, S, IRIS_DETAIL_CAS_ASM, "cas.b32", "r");
  return r;
}
template <iris_order_t O, iris_scope_t S>
IRIS_DEVICE_INLINE unsigned long long iris_detail_cas(unsigned long long *p, unsigned long long expected, unsigned long long desired) {
  unsigned long long r;
  IRIS_DETAIL_SEM_SCOPE(O, S, IRIS_DETAIL_CAS_ASM, "cas.b64", "l");
  return r;
}
#undef IRIS_DETAIL_CAS_ASM

/* ld.relaxed / ld.acquire and st.relaxed / st.release; other orders are rejected by
 * the public templates. */
#define IRIS_DETAIL_LD_ASM(SEM, SCOPE, OP, C) \
  { asm volatile("ld" SEM SCOPE ".global." OP " %0, [%1];" : "=" C(r) : "l"(p) : "memory"); }
#define IRIS_DETAIL_ST_ASM(SEM, SCOPE, OP, C) \
  { asm volatile("st" SEM SCOPE ".global." OP " [%0], %1;" ::"l"(p), C(v) : "memory"); }
#define IRIS_DETAIL_PTX_LDST(CT, OP, C)                                                                                     \
  template <iris_order_t O, iris_scope_t S>                                                                                 \
  IRIS_DEVICE_INLINE CT iris_detail_load(const CT *p) {                                                                     \
    CT r;                                                                                                                   \
    IRIS_DETAIL_SEM_SCOPE(O == IRIS_ORDER_RELAXED ? IRIS_ORDER_RELAXED : IRIS_ORDER_ACQUIRE, S, IRIS_DETAIL_LD_ASM, OP, C); \
    return r;                                                                                                               \
  }                                                                                                                         \
  template <iris_order_t O, iris_scope_t S>                                                                                 \
  IRIS_DEVICE_INLINE void iris_detail_store(CT *p, CT v) {                                                                  \
    IRIS_DETAIL_SEM_SCOPE(O == IRIS_ORDER_RELAXED ? IRIS_ORDER_RELAXED : IRIS_ORDER_RELEASE, S, IRIS_DETAIL_ST_ASM, OP, C); \
  }
IRIS_DETAIL_PTX_LDST(unsigned, "u32", "r")
IRIS_DETAIL_PTX_LDST(unsigned long long, "u64", "l")
IRIS_DETAIL_PTX_LDST(float, "f32", "f")
IRIS_DETAIL_PTX_LDST(double, "f64", "d")
#undef IRIS_DETAIL_PTX_LDST
#undef IRIS_DETAIL_LD_ASM
#undef IRIS_DETAIL_ST_ASM

#define IRIS_DETAIL_FENCE_ASM(SEM, SCOPE, UNUSED) \
  { asm volatile("fence.acq_rel" SCOPE ";" ::: "memory"); }
template <iris_order_t O, iris_scope_t S>
IRIS_DEVICE_INLINE void iris_detail_fence() {
  /* no early return before the macro's do-while: nvcc warns "loop is not reachable" (#128) */
  if (O != IRIS_ORDER_RELAXED) IRIS_DETAIL_SEM_SCOPE(IRIS_ORDER_ACQ_REL, S, IRIS_DETAIL_FENCE_ASM, 0);
}
#undef IRIS_DETAIL_FENCE_ASM

/* ---- the clock, the SM id, a pause, the trap */
IRIS_DEVICE_INLINE unsigned long long iris_detail_time_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
IRIS_DEVICE_INLINE unsigned iris_detail_smid(void) {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
/* a short pause between polls (frees issue slots, yields when ranks share a GPU) */
IRIS_DEVICE_INLINE void iris_detail_pause(void) { __nanosleep(256); }
IRIS_DEVICE_INLINE void iris_detail_trap(void) { __trap(); }

/* ---- 16-byte accesses: one v4 access, each 8-byte half single-copy atomic. The PTX
 * memory model promises a vector access only per element (4 bytes here); the hardware's
 * 16-byte access is one (NCCL's LL lines rely on it alike). As .v2.u64 the decode
 * all-reduce measured 0.05-0.06 us slower at 1-64 KB (2 H200s, four alternating runs,
 * BENCHMARKS.md 2026-11-30), so v4.u32 stays. */
/* Store the line {x, y, z, w}. */
IRIS_DEVICE_INLINE void iris_detail_st16_volatile(uint4 *p, unsigned x, unsigned y, unsigned z, unsigned w) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
/* One read of a 16-byte line. */
IRIS_DEVICE_INLINE uint4 iris_detail_ld16_volatile(const uint4 *p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}
/* Two adjacent 8-byte words (p 16-byte aligned), each read single-copy atomically: one
 * 16-byte load. */
IRIS_DEVICE_INLINE void iris_detail_ld2_volatile(const unsigned long long *p, unsigned long long &a, unsigned long long &b) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}
/* ---- lane exchange: v of lane (this lane ^ m), every lane of the warp taking part */
IRIS_DEVICE_INLINE float iris_detail_shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
/* ---- a whole warp: meet (memory ordered among its lanes), and "true in every lane" */
IRIS_DEVICE_INLINE void iris_detail_warp_sync(void) { __syncwarp(); }
IRIS_DEVICE_INLINE bool iris_detail_warp_all(bool p) { return __all_sync(0xffffffffu, p ? 1 : 0) != 0; }
#endif /* vendor */

/* ---- programmatic dependent launch (PDL; NVIDIA sm_90 and later, elsewhere nothing).
 * A kernel launched with iris_detail_launch(..., pdl = 1, ...) may start while the kernel
 * before it on the stream is still running: it must call iris_detail_pdl_wait before it
 * touches memory that kernel may write (the wait returns once that kernel has finished
 * and its writes are visible). iris_detail_pdl_trigger lets the next such kernel start
 * early. One exception, argued where it is made: the collectives' call word, which a
 * kernel is done with before its trigger (iris_coll_call_enter). Measured: docs/tuning.md,
 * "PDL". */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(IRIS_USE_HIP)
IRIS_DEVICE_INLINE void iris_detail_pdl_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
IRIS_DEVICE_INLINE void iris_detail_pdl_trigger(void) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
#else
IRIS_DEVICE_INLINE void iris_detail_pdl_wait(void) {}
IRIS_DEVICE_INLINE void iris_detail_pdl_trigger(void) {}
#endif
/* Host: launch kernel k on grid x block threads on stream s, with the PDL attribute when
 * pdl is 1 (CUDA 12 and later; HIP: a plain launch, pdl ignored). Returns the launch's
 * error, as iris_gpu_last_error would. */
#if defined(IRIS_USE_HIP)
#define IRIS_GPU_HAS_PDL 0
template <typename... K, typename... A>
static inline hipError_t iris_detail_launch(void (*k)(K...), unsigned grid, unsigned block, hipStream_t s, int pdl, A... args) {
  (void)pdl;
  k<<<grid, block, 0, s>>>(args...);
  return hipGetLastError();
}
#else
#define IRIS_GPU_HAS_PDL (CUDART_VERSION >= 12000)
template <typename... K, typename... A>
static inline cudaError_t iris_detail_launch(void (*k)(K...), unsigned grid, unsigned block, cudaStream_t s, int pdl, A... args) {
#if CUDART_VERSION >= 12000
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1] = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.stream = s;
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, k, args...);
#else
  (void)pdl;
  k<<<grid, block, 0, s>>>(args...);
  return cudaGetLastError();
#endif
}
#endif

#if IRIS_DEVICE_FP8_CVT
/* Four floats to four e4m3 codes (byte i = value i), rounded to nearest even, saturated
 * at +-448, two per instruction (cvt.rn.satfinite.e4m3x2.f32: the first operand lands in
 * the upper byte). */
IRIS_DEVICE_INLINE unsigned iris_detail_e4m3x4(float a, float b, float c, float d) {
  unsigned out;
  asm("{\n\t.reg .b16 lo, hi;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
      "mov.b32 %0, {lo, hi};\n\t}"
      : "=r"(out)
      : "f"(a), "f"(b), "f"(c), "f"(d));
  return out;
}
#endif

#endif /* IRIS_INTERNAL_DEVICE_PLATFORM_H */
