/* internal/coll/fp8.h: the fp8 (OCP E4M3, E5M2) conversions behind
 * iris_fp8_e4m3_to_float and its neighbours. Host and device, C and C++.
 * Part of iris_collectives.h; not a public header. */
#ifndef IRIS_COLLECTIVES_H /* compiled alone: the contract first (it includes this file in its place) */
#include "../../iris_collectives.h"
#endif
#ifndef IRIS_INTERNAL_COLL_FP8_H
#define IRIS_INTERNAL_COLL_FP8_H

static inline IRIS_HOST_DEVICE unsigned iris_detail_f32_bits(float f) {
  union { float f; unsigned u; } x;
  x.f = f;
  return x.u;
}
static inline IRIS_HOST_DEVICE float iris_detail_bits_f32(unsigned u) {
  union { float f; unsigned u; } x;
  x.u = u;
  return x.f;
}
/* A finite fp8 code of `mbits` mantissa bits and exponent bias `bias` as a float. */
static inline IRIS_HOST_DEVICE float iris_detail_fp8_decode(unsigned c, int mbits, int bias) {
  const unsigned sign = (c & 0x80u) << 24, e = (c & 0x7fu) >> mbits, m = c & ((1u << mbits) - 1u);
  if (e == 0) /* zero or subnormal: m x 2^(1 - bias - mbits), an exact product */
    return iris_detail_bits_f32(sign | iris_detail_f32_bits((float)m * iris_detail_bits_f32((unsigned)(127 + 1 - bias - mbits) << 23)));
  return iris_detail_bits_f32(sign | ((e + (unsigned)(127 - bias)) << 23) | (m << (23 - mbits)));
}
/* A float rounded to nearest even into the fp8 format of `mbits` mantissa bits and bias
 * `bias`, saturated to `maxcode` (the largest finite code); NaN gives 0x7F. */
static inline IRIS_HOST_DEVICE unsigned char iris_detail_fp8_encode(float f, int mbits, int bias, unsigned maxcode) {
  const unsigned u = iris_detail_f32_bits(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  unsigned mant, r, rem, half, code;
  int e, shift;
  if (a > 0x7f800000u) return 0x7f;
  if (a < 0x00800000u) return (unsigned char)sign; /* zero, float subnormals: far below half the smallest fp8 value */
  e = (int)(a >> 23) - 127 + bias;                 /* the fp8 exponent field if the result is normal */
  shift = 23 - mbits + (e < 1 ? 1 - e : 0);        /* float mantissa bits dropped (more below the normal range) */
  if (shift > 24) return (unsigned char)sign;      /* below half the smallest subnormal */
  mant = (a & 0x7fffffu) | 0x800000u;
  r = mant >> shift;
  rem = mant & ((1u << shift) - 1u);
  half = 1u << (shift - 1);
  r += (rem > half || (rem == half && (r & 1u))) ? 1u : 0u;
  /* a carry out of the mantissa (r == 2^(mbits+1), or 2^mbits for a subnormal) moves to
   * the next exponent by itself */
  code = ((unsigned)(e < 1 ? 0 : e - 1) << mbits) + r;
  return (unsigned char)(sign | (code > maxcode ? maxcode : code));
}
static inline IRIS_HOST_DEVICE float iris_fp8_e4m3_to_float(unsigned char c) {
  if ((c & 0x7fu) == 0x7fu) return iris_detail_bits_f32(((unsigned)(c & 0x80u) << 24) | 0x7fc00000u);
  return iris_detail_fp8_decode(c, 3, 7);
}
static inline IRIS_HOST_DEVICE float iris_fp8_e5m2_to_float(unsigned char c) {
  if ((c & 0x7cu) == 0x7cu) return iris_detail_bits_f32(((unsigned)(c & 0x80u) << 24) | ((c & 3u) ? 0x7fc00000u : 0x7f800000u));
  return iris_detail_fp8_decode(c, 2, 15);
}
static inline IRIS_HOST_DEVICE unsigned char iris_float_to_fp8_e4m3(float f) { return iris_detail_fp8_encode(f, 3, 7, 0x7eu); }
static inline IRIS_HOST_DEVICE unsigned char iris_float_to_fp8_e5m2(float f) { return iris_detail_fp8_encode(f, 2, 15, 0x7bu); }

#endif /* IRIS_INTERNAL_COLL_FP8_H */
