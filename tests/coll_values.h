// Exact test values for the collective tests: inputs whose sums are exact in float32
// before one final rounding, so results compare bit for bit with a float64 reference.
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
  default: return h;
  }
}
__global__ void k_fill(void *buf, int type, size_t n, uint64_t seed, int r, int call) {
  for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
    unsigned long long b = encode(type, input_hash(seed, r, j, call));
    switch (type) {
    case IRIS_FLOAT32: case IRIS_INT32: ((unsigned *)buf)[j] = (unsigned)b; break;
    case IRIS_FLOAT16: case IRIS_BFLOAT16: ((unsigned short *)buf)[j] = (unsigned short)b; break;
    default: ((unsigned long long *)buf)[j] = b; break;
    }
  }
}
static void fill(void *buf, int type, size_t n, uint64_t seed, int r, int call) { k_fill<<<256, 256>>>(buf, type, n, seed, r, call); }

// host: the expected bits of op over the given raw elements, reduced exactly then
// rounded once (the kernels accumulate exactly in float32 for these inputs)
static double to_double(int type, unsigned long long b) {
  switch (type) {
  case IRIS_FLOAT32: { unsigned u = (unsigned)b; float f; memcpy(&f, &u, 4); return f; }
  case IRIS_BFLOAT16: { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
  case IRIS_FLOAT16: return __half2float(__ushort_as_half((unsigned short)b));
  default: return 0;
  }
}
static unsigned long long from_double(int type, double v) {
  switch (type) {
  case IRIS_FLOAT32: { float f = (float)v; unsigned u; memcpy(&u, &f, 4); return u; }
  case IRIS_BFLOAT16: { float f = (float)v; unsigned u; memcpy(&u, &f, 4); return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; }
  default: return __half_as_ushort(__float2half_rn((float)v));
  }
}
static unsigned long long reduce_bits(int type, int op, const unsigned long long *b, int n) {
  if (type == IRIS_INT32 || type == IRIS_INT64) {
    long long acc = type == IRIS_INT32 ? (long long)(int)(unsigned)b[0] : (long long)b[0];
    for (int k = 1; k < n; k++) {
      long long v = type == IRIS_INT32 ? (long long)(int)(unsigned)b[k] : (long long)b[k];
      acc = op == IRIS_SUM ? (long long)((unsigned long long)acc + (unsigned long long)v) : op == IRIS_MIN ? std::min(acc, v) : std::max(acc, v);
    }
    return type == IRIS_INT32 ? (unsigned long long)(unsigned)(int)acc : (unsigned long long)acc;
  }
  double acc = to_double(type, b[0]);
  for (int k = 1; k < n; k++) {
    double v = to_double(type, b[k]);
    acc = op == IRIS_SUM ? acc + v : op == IRIS_MIN ? std::min(acc, v) : std::max(acc, v);
  }
  return from_double(type, acc);
}
static unsigned long long get_bits(const std::vector<unsigned char> &h, int type, size_t i) {
  size_t es = iris_dtype_size((iris_dtype_t)type);
  unsigned long long b = 0;
  memcpy(&b, h.data() + i * es, es);
  return b;
}

#endif
