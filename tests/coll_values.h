// Exact test values for the collective tests: inputs whose sums are exact in float32
// before one final rounding, so results compare bit for bit with a float64 reference.
//   fp32: multiples of 1/8 below 2^17; fp16, bf16: 8 significant bits, 2^-3 .. 2^3;
//   fp8 e4m3: every finite code (multiples of 2^-9 below 2^9: 16 of them sum exactly);
//   fp8 e5m2: exponents 2^-2 .. 2^15 (the top of the range) and zeros, so that 16 of
//   them sum exactly (multiples of 2^-4 below 2^20); no NaN or infinity anywhere;
//   integers: raw hash bits (sums wrap in the type, as the kernels' do).
// AVG's reference is the exact sum, divided by W in float32 (as the kernels, see
// IRIS_AVG), rounded once to the type. fp8 is decoded and rounded here independently of
// the library (ldexp, and a nearest-even search over the codes with saturation).
// Needs iris_collectives.h and test_util.h first.
#ifndef IRIS_COLL_VALUES_H
#define IRIS_COLL_VALUES_H
#include <algorithm>
#include <math.h>
#include <vector>

// ---- test values: element j of rank r's send buffer for call `call`
__host__ __device__ inline double value_of(int type, uint64_t h) {
  const int64_t m = (int64_t)(h % 255) - 127; // 8 significant bits: exact in bf16 and fp16
  const int e = (int)((h >> 20) % 7) - 3;      // 2^-3 .. 2^3
  switch (type) {
  case IRIS_FLOAT32: return (double)((int64_t)(h % 2000001) - 1000000) * 0.125;
  case IRIS_FLOAT16: case IRIS_BFLOAT16: return ldexp((double)m, e);
  default: return 0;
  }
}
__host__ __device__ inline uint64_t input_hash(uint64_t seed, int r, size_t j, int call) { return key(seed, (uint64_t)r, j, (uint64_t)call, 77); }

// raw element bits (8 bytes) for type at hash h
__host__ __device__ inline unsigned long long encode(int type, uint64_t h) {
  double v = value_of(type, h);
  switch (type) {
  case IRIS_FLOAT32: { float f = (float)v; unsigned u; memcpy(&u, &f, 4); return u; }
  case IRIS_BFLOAT16: { float f = (float)v; unsigned u; memcpy(&u, &f, 4); return u >> 16; } // exact: 8 significant bits
  case IRIS_FLOAT16: return __half_as_ushort(__float2half_rn((float)v));
  case IRIS_INT32: return (unsigned)h;
  case IRIS_UINT8: return h & 0xff;
  case IRIS_FLOAT8_E4M3: return (h & 0x7f) == 0x7f ? (h & 0xff) ^ 1 : h & 0xff; // NaN codes become +-448
  case IRIS_FLOAT8_E5M2: return (h & 0x80) | ((h >> 8) % 32 == 0 ? 0 : (13 + (h >> 16) % 18) << 2 | ((h >> 24) & 3)); // exponent fields 13..30, or zero
  default: return h;
  }
}
__global__ void k_fill(void *buf, int type, size_t n, uint64_t seed, int r, int call) {
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
    unsigned long long b = encode(type, input_hash(seed, r, j, call));
    switch (type) {
    case IRIS_FLOAT32: case IRIS_INT32: ((unsigned *)buf)[j] = (unsigned)b; break;
    case IRIS_FLOAT16: case IRIS_BFLOAT16: ((unsigned short *)buf)[j] = (unsigned short)b; break;
    case IRIS_UINT8: case IRIS_FLOAT8_E4M3: case IRIS_FLOAT8_E5M2: ((unsigned char *)buf)[j] = (unsigned char)b; break;
    default: ((unsigned long long *)buf)[j] = b; break;
    }
  }
}
static void fill(void *buf, int type, size_t n, uint64_t seed, int r, int call) { k_fill<<<256, 256>>>(buf, type, n, seed, r, call); }

// host: an fp8 code's value (finite codes only), from its fields (tabled once; a function
// static is initialised once even when the checks run on several threads)
struct Fp8Table {
  double v[2][256];
  Fp8Table() {
    for (int f = 0; f < 2; f++)
      for (unsigned k = 0; k < 256; k++) {
        const int mb = f ? 2 : 3, b = f ? 15 : 7, e = (int)((k & 0x7f) >> mb), m = (int)(k & ((1u << mb) - 1));
        const double x = e ? ldexp(1.0 + m / (double)(1 << mb), e - b) : ldexp((double)m, 1 - b - mb);
        v[f][k] = k & 0x80 ? -x : x;
      }
  }
};
static double fp8_value(unsigned c, int mbits, int bias) {
  static const Fp8Table tab;
  return tab.v[mbits == 2 && bias == 15][c & 0xff];
}
// host: v rounded to the nearest fp8 code, ties to the even code, saturated to the
// largest finite code (infinities too), the sign kept (also on a zero)
static unsigned long long fp8_nearest(double v, int mbits, int bias, unsigned maxcode) {
  const unsigned sign = signbit(v) ? 0x80 : 0;
  const double a = fabs(v);
  unsigned lo = 0, hi = maxcode; // positive codes grow with their value
  if (a >= fp8_value(maxcode, mbits, bias)) return sign | maxcode;
  while (hi - lo > 1) { // value(lo) <= a < value(hi)
    const unsigned mid = (lo + hi) / 2;
    (fp8_value(mid, mbits, bias) <= a ? lo : hi) = mid;
  }
  const double dl = a - fp8_value(lo, mbits, bias), dh = fp8_value(hi, mbits, bias) - a;
  return sign | (dl < dh ? lo : dh < dl ? hi : (lo & 1) ? hi : lo);
}

// host: the expected bits of op over the given raw elements, reduced exactly then
// rounded once (the kernels accumulate exactly in float32 for these inputs)
static double to_double(int type, unsigned long long b) {
  switch (type) {
  case IRIS_FLOAT32: { unsigned u = (unsigned)b; float f; memcpy(&f, &u, 4); return f; }
  case IRIS_BFLOAT16: { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
  case IRIS_FLOAT16: return __half2float(__ushort_as_half((unsigned short)b));
  case IRIS_FLOAT8_E4M3: return fp8_value((unsigned)b & 0xff, 3, 7);
  case IRIS_FLOAT8_E5M2: return fp8_value((unsigned)b & 0xff, 2, 15);
  default: return 0;
  }
}
static unsigned long long from_double(int type, double v) {
  switch (type) {
  case IRIS_FLOAT32: { float f = (float)v; unsigned u; memcpy(&u, &f, 4); return u; }
  case IRIS_BFLOAT16: { float f = (float)v; unsigned u; memcpy(&u, &f, 4); return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; }
  case IRIS_FLOAT8_E4M3: return fp8_nearest(v, 3, 7, 0x7e);
  case IRIS_FLOAT8_E5M2: return fp8_nearest(v, 2, 15, 0x7b);
  default: return __half_as_ushort(__float2half_rn((float)v));
  }
}
static unsigned long long reduce_bits(int type, int op, const unsigned long long *b, int n) {
  const bool sum = op == IRIS_SUM || op == IRIS_AVG;
  if (type == IRIS_INT32 || type == IRIS_INT64 || type == IRIS_UINT8) { // sums wrap in the type; AVG: then / n, toward zero (NCCL's rule)
    auto val = [&](unsigned long long x) { return type == IRIS_INT32 ? (long long)(int)(unsigned)x : type == IRIS_UINT8 ? (long long)(x & 0xff) : (long long)x; };
    long long acc = val(b[0]);
    for (int k = 1; k < n; k++) {
      long long v = val(b[k]);
      acc = sum ? (long long)((unsigned long long)acc + (unsigned long long)v) : op == IRIS_MIN ? std::min(acc, v) : std::max(acc, v);
    }
    acc = val((unsigned long long)acc); // wrapped to the type
    if (op == IRIS_AVG) acc /= n;
    return type == IRIS_INT32 ? (unsigned long long)(unsigned)(int)acc : type == IRIS_UINT8 ? (unsigned long long)acc & 0xff : (unsigned long long)acc;
  }
  double acc = to_double(type, b[0]);
  for (int k = 1; k < n; k++) {
    double v = to_double(type, b[k]);
    acc = sum ? acc + v : op == IRIS_MIN ? (v < acc || acc != acc ? v : acc) : (v > acc || acc != acc ? v : acc); // a NaN gives way; of +0 / -0 the first stays
  }
  if (op == IRIS_AVG) acc = (double)((float)acc / (float)n); // the sum is exact in float32 (see the top)
  return from_double(type, acc);
}
static unsigned long long get_bits(const std::vector<unsigned char> &h, int type, size_t i) {
  size_t es = iris_dtype_size((iris_dtype_t)type);
  unsigned long long b = 0;
  memcpy(&b, h.data() + i * es, es);
  return b;
}

#endif
