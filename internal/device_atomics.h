/* internal/device_atomics.h: the atomic primitives under iris_device.h's public atomics,
 * for each memory order and scope: inline PTX with explicit semantics and scope on NVIDIA,
 * __hip_atomic_* and __builtin_amdgcn_fence on AMD; and the device clock
 * (iris_detail_time_ns). Order and scope are template parameters: PTX needs a fixed
 * instruction string, and HIP turns a run-time value into a branch ladder.
 *
 * iris_detail_* work on canonical types: unsigned, unsigned long long, int, long long,
 * float, double. The public templates in iris_device.h map any 4/8-byte type onto them.
 *
 * Part of iris_device.h (device code, included by it); not a public header. */
#ifndef IRIS_INTERNAL_DEVICE_ATOMICS_H
#define IRIS_INTERNAL_DEVICE_ATOMICS_H

#if defined(IRIS_USE_HIP)

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
IRIS_DEVICE_INLINE unsigned long long iris_detail_time_ns(void) {
  return __builtin_amdgcn_s_memrealtime() * 10ULL; /* 100 MHz constant clock on CDNA */
}

#else /* CUDA: PTX with explicit semantics and scope */

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
  if (O == IRIS_ORDER_RELAXED) return;
  IRIS_DETAIL_SEM_SCOPE(IRIS_ORDER_ACQ_REL, S, IRIS_DETAIL_FENCE_ASM, 0);
}
#undef IRIS_DETAIL_FENCE_ASM

IRIS_DEVICE_INLINE unsigned long long iris_detail_time_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif /* vendor */

#endif /* IRIS_INTERNAL_DEVICE_ATOMICS_H */
