/* internal/coll/types.h: element arithmetic of the reductions: the accumulation
 * type of each element type, the conversions into and out of it, one reduction step and
 * the final value (AVG's division). Device code (nvcc, hipcc).
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_TYPES_H
#define IRIS_INTERNAL_COLL_TYPES_H
#include "../device/platform.h"
#include "fp8.h"

template <typename T> struct iris_coll_acc { typedef T type; };
template <> struct iris_coll_acc<iris_f16_t> { typedef float type; };
template <> struct iris_coll_acc<iris_bf16_t> { typedef float type; };
template <> struct iris_coll_acc<iris_fp8_e4m3_t> { typedef float type; };
template <> struct iris_coll_acc<iris_fp8_e5m2_t> { typedef float type; };
template <typename T> IRIS_DEVICE_INLINE typename iris_coll_acc<T>::type iris_coll_up(T v) { return v; }
template <> IRIS_DEVICE_INLINE float iris_coll_up<iris_f16_t>(iris_f16_t v) { return __half2float(__ushort_as_half(v.bits)); }
template <> IRIS_DEVICE_INLINE float iris_coll_up<iris_bf16_t>(iris_bf16_t v) { return __uint_as_float((unsigned)v.bits << 16); }
template <> IRIS_DEVICE_INLINE float iris_coll_up<iris_fp8_e4m3_t>(iris_fp8_e4m3_t v) { return iris_fp8_e4m3_to_float(v.bits); }
template <> IRIS_DEVICE_INLINE float iris_coll_up<iris_fp8_e5m2_t>(iris_fp8_e5m2_t v) { return iris_fp8_e5m2_to_float(v.bits); }
template <typename T> IRIS_DEVICE_INLINE T iris_coll_down(typename iris_coll_acc<T>::type v) { return v; }
template <> IRIS_DEVICE_INLINE iris_f16_t iris_coll_down<iris_f16_t>(float v) { iris_f16_t r; r.bits = __half_as_ushort(__float2half_rn(v)); return r; }
template <> IRIS_DEVICE_INLINE iris_bf16_t iris_coll_down<iris_bf16_t>(float v) {
  unsigned u = __float_as_uint(v);
  iris_bf16_t r;
  if ((u & 0x7fffffffu) > 0x7f800000u) r.bits = (unsigned short)((u >> 16) | 0x40); /* NaN stays NaN */
  else r.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);          /* round to nearest even */
  return r;
}
template <> IRIS_DEVICE_INLINE iris_fp8_e4m3_t iris_coll_down<iris_fp8_e4m3_t>(float v) { iris_fp8_e4m3_t r; r.bits = iris_float_to_fp8_e4m3(v); return r; }
template <> IRIS_DEVICE_INLINE iris_fp8_e5m2_t iris_coll_down<iris_fp8_e5m2_t>(float v) { iris_fp8_e5m2_t r; r.bits = iris_float_to_fp8_e5m2(v); return r; }
/* a + b; signed integers wrap (computed unsigned: no undefined overflow), unsigned char
 * wraps modulo 256 on the way back */
template <typename A> IRIS_DEVICE_INLINE A iris_coll_add(A a, A b) { return (A)(a + b); }
template <> IRIS_DEVICE_INLINE int iris_coll_add<int>(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
template <> IRIS_DEVICE_INLINE long long iris_coll_add<long long>(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
/* MIN and MAX, a the ranks before b: a floating NaN gives way to the other value (as
 * NCCL's fminf / fmaxf), and of two equal values (+0 and -0) a stays, so the bits are the
 * same on every vendor; integers compare (a != a is false). */
template <typename A> IRIS_DEVICE_INLINE A iris_coll_min(A a, A b) { return b < a || a != a ? b : a; }
template <typename A> IRIS_DEVICE_INLINE A iris_coll_max(A a, A b) { return b > a || a != a ? b : a; }
/* One step of the reduction (AVG sums; its division comes once, in iris_coll_result). */
template <int OP, typename A> IRIS_DEVICE_INLINE A iris_coll_combine(A a, A b) {
  return OP == IRIS_SUM || OP == IRIS_AVG ? iris_coll_add(a, b) : OP == IRIS_MIN ? iris_coll_min(a, b) : iris_coll_max(a, b);
}
/* The reduced value in the element type: AVG divides the sum by the world size W first
 * (fp32 division for the float types, rounded once to T by iris_coll_down; integer
 * division, truncating toward zero, for the integer types: NCCL's ncclAvg rule, see
 * IRIS_AVG in iris_collectives.h). */
template <typename T, int OP> IRIS_DEVICE_INLINE T iris_coll_result(typename iris_coll_acc<T>::type acc, int W) {
  typedef typename iris_coll_acc<T>::type A;
  return iris_coll_down<T>(OP == IRIS_AVG ? (A)(acc / (A)W) : acc);
}

/* The reduction kernels take the op as a template argument OP (their own kernel per op:
 * the exact set, see iris_coll_exact in internal/coll/launch.h) or, with OP ==
 * IRIS_COLL_OP_RUNTIME, as the kernel argument `op`, uniform over the grid (one kernel
 * for every op of a type). The two below are iris_coll_combine and iris_coll_result for
 * both; with a fixed OP they ignore `op` and compile to exactly those. */
enum { IRIS_COLL_OP_RUNTIME = IRIS_REDOP_COUNT };
template <int OP, typename A> IRIS_DEVICE_INLINE A iris_coll_combine_op(A a, A b, int op) {
  if (OP != IRIS_COLL_OP_RUNTIME) return iris_coll_combine<OP>(a, b);
  return op == IRIS_MIN ? iris_coll_min(a, b) : op == IRIS_MAX ? iris_coll_max(a, b) : iris_coll_add(a, b);
}
template <typename T, int OP> IRIS_DEVICE_INLINE T iris_coll_result_op(typename iris_coll_acc<T>::type acc, int W, int op) {
  typedef typename iris_coll_acc<T>::type A;
  if (OP != IRIS_COLL_OP_RUNTIME) return iris_coll_result<T, OP>(acc, W);
  return iris_coll_down<T>(op == IRIS_AVG ? (A)(acc / (A)W) : acc);
}

#endif /* IRIS_INTERNAL_COLL_TYPES_H */
