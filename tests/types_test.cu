// Host checks (no GPU) of the element-type arithmetic in iris_collectives.h: the fp8
// conversions against CUDA's own (cuda_fp8.h, whose host path emulates the hardware's
// cvt.rn.satfinite), hand-worked rounding cases, and the AVG rule for integers.
// nvcc-built because the reference is CUDA's header; runs on any machine.
//   types_test         prints PASS/FAIL lines (make test's host section counts them)
//   types_test --all   the encoding check on every one of the 2^32 floats (a minute)
// The compile-time switch of the collectives, as a program that keeps only fp32 and bf16
// sums sets it (here it changes nothing else: this unit compiles no kernel of the
// library); test_switch checks which reductions it leaves in.
#define IRIS_COLL_TYPES (1 << IRIS_FLOAT32 | 1 << IRIS_BFLOAT16)
#define IRIS_COLL_OPS (1 << IRIS_SUM)
#include "../iris_collectives.h"
#include "test_util.h"
#include "coll_values.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int failed;
static unsigned stride = 257; // floats between two checked ones in the sweep (1 with --all)
static void report(const char *name, bool ok, const char *why = "") {
  if (ok) printf("PASS: %s\n", name);
  else printf("FAIL: %s: %s\n", name, why);
  failed += !ok;
}
static unsigned bits(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static float from_bits(unsigned u) { float f; memcpy(&f, &u, 4); return f; }

struct Fmt {
  const char *name;
  __nv_fp8_interpretation_t cuda;
  float (*to_float)(unsigned char);
  unsigned char (*from_float)(float);
};
static const Fmt fmts[2] = {{"e4m3", __NV_E4M3, iris_fp8_e4m3_to_float, iris_float_to_fp8_e4m3},
                            {"e5m2", __NV_E5M2, iris_fp8_e5m2_to_float, iris_float_to_fp8_e5m2}};

static float cuda_decode(const Fmt &f, unsigned char c) { return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, f.cuda))); }
static unsigned char cuda_encode(const Fmt &f, float x) { return (unsigned char)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, f.cuda); }

// every one of the 256 codes decodes to CUDA's value (NaN codes to a NaN, of the code's
// sign), and every finite code survives a round trip, -0 included (infinity saturates)
static void test_decode(const Fmt &f) {
  char why[200] = "";
  bool ok = true;
  for (int c = 0; c < 256 && ok; c++) {
    const float got = f.to_float((unsigned char)c), want = cuda_decode(f, (unsigned char)c);
    if (isnan(want) ? !(isnan(got) && (bits(got) >> 31) == (unsigned)(c >> 7)) : bits(got) != bits(want)) {
      snprintf(why, sizeof why, "code 0x%02x decodes to %a (0x%08x), CUDA gives %a", c, got, bits(got), want);
      ok = false;
    } else if (!isnan(want) && !isinf(want) && f.from_float(got) != c) {
      snprintf(why, sizeof why, "code 0x%02x: %a encodes back to 0x%02x", c, got, f.from_float(got));
      ok = false;
    }
  }
  char name[120];
  snprintf(name, sizeof name, "fp8 %s: all 256 codes decode as CUDA's __nv_cvt_fp8_to_halfraw; every finite code round-trips", f.name);
  report(name, ok, why);
}

// encoding matches CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE) bit for bit on: every
// float whose bits are a multiple of 257 (16.7 M values of every exponent and sign; every
// float with --all); every
// midpoint between neighbouring fp8 values and the floats one ulp either side (the ties);
// the specials (zeros, infinities, NaNs with several payloads, float subnormals, the
// saturation thresholds)
static void test_encode(const Fmt &f) {
  char why[200] = "";
  unsigned long long n = 0;
  bool ok = true;
  auto check = [&](float x) {
    n++;
    const unsigned char got = f.from_float(x), want = cuda_encode(f, x);
    if (got != want && ok) {
      snprintf(why, sizeof why, "%a (0x%08x) encodes to 0x%02x, CUDA gives 0x%02x", x, bits(x), got, want);
      ok = false;
    }
  };
  for (unsigned long long u = 0; u <= 0xffffffffull; u += stride) check(from_bits((unsigned)u));
  for (int c = 0; c < 255; c++) { // neighbours c, c + 1 among the positive codes (the largest finite code saturates)
    const float a = f.to_float((unsigned char)c), b = f.to_float((unsigned char)(c + 1));
    if (isnan(a) || isnan(b) || isinf(b) || (c & 0x80)) continue;
    const float mid = (float)(((double)a + (double)b) / 2); // exact: fp8 values have few bits
    for (int s = 0; s < 2; s++) {
      const float m = s ? -mid : mid;
      check(m);
      check(nextafterf(m, 0.f));
      check(nextafterf(m, s ? -INFINITY : INFINITY));
    }
  }
  const float specials[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, from_bits(0x7f800001), from_bits(0x7fa00000), from_bits(0x7fe00000), from_bits(0xffbfffff),
                            from_bits(1), from_bits(0x807fffff), 448.f, 464.f, 464.0001f, 480.f, 511.f, 512.f, 57344.f, 61440.f, 61439.f, 1e30f, -1e30f,
                            FLT_MAX, -FLT_MAX, FLT_MIN, 1.f / 1024, 1.f / 131072, 3.f / 131072};
  for (float x : specials) check(x);
  char name[160];
  snprintf(name, sizeof name, "fp8 %s: encoding matches CUDA's __nv_cvt_float_to_fp8 (SATFINITE) on %llu floats (sweep, every tie and its neighbours, specials)",
           f.name, n);
  report(name, ok, why);
}

// rounding worked by hand (independent of CUDA): ties to even, subnormal ties, carries
// into the next binade, saturation, NaN, signed zero
static void test_by_hand() {
  struct Case { int fmt; float x; unsigned char want; } cases[] = {
      {0, 1.0f, 0x38},          {0, 1.0625f, 0x38},       {0, 1.1875f, 0x3a},    // ties: 1.0|1.125 -> 1.0 (even), 1.125|1.25 -> 1.25
      {0, 1.9375f, 0x40},       {0, 15.5f, 0x58},         {0, 0.015625f, 0x08},  // tie 1.875|2.0 carries to 2.0; 15.5 = tie 15|16 -> 16; 2^-6: the smallest normal
      {0, 0.001953125f, 0x01},  {0, 0.0009765625f, 0x00}, {0, 0.0029296875f, 0x02}, // 2^-9 smallest subnormal; 2^-10 (tie with 0) -> 0; 3*2^-10 (tie 1|2) -> 2
      {0, 0.0146484375f, 0x08}, {0, 448.f, 0x7e},         {0, 464.f, 0x7e},      // 15*2^-10 (tie 7|8 subnormal -> smallest normal); max; tie above max
      {0, 1000.f, 0x7e},        {0, -1e9f, 0xfe},         {0, INFINITY, 0x7e},   // saturation, infinity included
      {0, -0.f, 0x80},          {0, -1e-30f, 0x80},       {0, NAN, 0x7f},
      {1, 1.0f, 0x3c},          {1, 1.125f, 0x3c},        {1, 1.375f, 0x3e},     // e5m2 ties: 1.0|1.25 -> 1.0; 1.25|1.5 -> 1.5
      {1, 1.875f, 0x40},        {1, 57344.f, 0x7b},       {1, 61440.f, 0x7b},    // tie 1.75|2.0 carries; max; the tie above max saturates
      {1, INFINITY, 0x7b},      {1, -INFINITY, 0xfb},     {1, 1.52587890625e-05f, 0x01}, // SATFINITE: infinity -> max; 2^-16 smallest subnormal
      {1, 7.62939453125e-06f, 0x00}, {1, -0.f, 0x80},     {1, 6.103515625e-05f, 0x04}, // 2^-17 tie with 0 -> 0; 2^-14 smallest normal
  };
  char why[160] = "";
  bool ok = true;
  for (const Case &c : cases) {
    const unsigned char got = fmts[c.fmt].from_float(c.x);
    if (got != c.want && ok) {
      snprintf(why, sizeof why, "%s(%a) = 0x%02x, want 0x%02x", fmts[c.fmt].name, c.x, got, c.want);
      ok = false;
    }
  }
  report("fp8 rounding worked by hand: ties to even, subnormal ties, carries, saturation (infinity included), NaN, -0", ok, why);
  ok = isinf(iris_fp8_e5m2_to_float(0x7c)) && iris_fp8_e5m2_to_float(0xfc) < 0 && isinf(iris_fp8_e5m2_to_float(0xfc)) && isnan(iris_fp8_e5m2_to_float(0x7d)) &&
       isnan(iris_fp8_e4m3_to_float(0x7f)) && isnan(iris_fp8_e4m3_to_float(0xff)) && iris_fp8_e4m3_to_float(0x7e) == 448.f &&
       iris_fp8_e5m2_to_float(0x7b) == 57344.f && iris_fp8_e4m3_to_float(0x01) == 0.001953125f && iris_fp8_e5m2_to_float(0x01) == 1.52587890625e-05f;
  report("fp8 special codes: e5m2 infinities and NaNs, e4m3 NaNs (S.1111.111), largest and smallest values", ok, "a special code decodes wrongly");
}

// uint8 SUM wraps modulo 256 and AVG divides the wrapped sum (NCCL's FuncSumPostDiv);
// fp8 sums of up to 4 e4m3 values are exact in fp32, so one final rounding is all
static void test_arith() {
  bool ok = true;
  unsigned char s = 0;
  const unsigned char in[4] = {200, 100, 7, 255};
  for (unsigned char v : in) s = (unsigned char)(s + v);
  ok &= s == (200 + 100 + 7 + 255) % 256 && (unsigned char)(s / 4) == 12;
  ok &= -7 / 2 == -3 && (int)(-2147483647 - 1) / 3 == -715827882; // C's / truncates toward zero, as NCCL's signed AVG
  unsigned long long inexact = 0;
  for (int a = 0; a < 256; a++)
    for (int b = 0; b < 256; b++) { // four values from all over the range, every sign
      const float x = iris_fp8_e4m3_to_float((unsigned char)a), y = iris_fp8_e4m3_to_float((unsigned char)b);
      const float z = iris_fp8_e4m3_to_float((unsigned char)(a * 7 + b)), w = iris_fp8_e4m3_to_float((unsigned char)(255 - b));
      if (isnan(x) || isnan(y) || isnan(z) || isnan(w)) continue;
      inexact += (double)(x + y + z + w) != (double)x + (double)y + (double)z + (double)w;
    }
  ok &= inexact == 0;
  report("uint8 SUM wraps modulo 256, integer AVG truncates toward zero, fp32 sums of four e4m3 values are exact", ok, "an arithmetic identity failed");
}

// The GPU tests' host reference (coll_values.h: float64, its own fp8 decoding and
// nearest-even search) against the kernels' arithmetic spelled with the library's
// conversions (fp32 accumulation in rank order, AVG as an fp32 division, one rounding),
// on the very inputs the GPU tests draw, for every fp8 and uint8 op at 2 to 16 ranks:
// the reference the GPU tests trust agrees with the library's documented semantics.
static void test_reference() {
  char why[200] = "";
  bool ok = true;
  long checked = 0;
  for (int type : {IRIS_UINT8, IRIS_FLOAT8_E4M3, IRIS_FLOAT8_E5M2})
    for (int op = 0; op < IRIS_REDOP_COUNT; op++)
      for (int W : {2, 3, 4, 7, 16})
        for (int j = 0; j < 20000 && ok; j++, checked++) {
          unsigned long long b[16];
          for (int r = 0; r < W; r++) b[r] = encode(type, input_hash(12345, r, (size_t)j, op));
          const unsigned long long want = reduce_bits(type, op, b, W);
          unsigned long long got;
          if (type == IRIS_UINT8) {
            unsigned char acc = (unsigned char)b[0];
            for (int r = 1; r < W; r++) {
              const unsigned char x = (unsigned char)b[r];
              acc = op == IRIS_MIN ? std::min(acc, x) : op == IRIS_MAX ? std::max(acc, x) : (unsigned char)(acc + x);
            }
            got = op == IRIS_AVG ? (unsigned char)(acc / W) : acc;
          } else {
            float (*dec)(unsigned char) = type == IRIS_FLOAT8_E4M3 ? iris_fp8_e4m3_to_float : iris_fp8_e5m2_to_float;
            float acc = dec((unsigned char)b[0]);
            for (int r = 1; r < W; r++) {
              const float x = dec((unsigned char)b[r]);
              acc = op == IRIS_MIN ? (x < acc ? x : acc) : op == IRIS_MAX ? (x > acc ? x : acc) : acc + x;
            }
            if (op == IRIS_AVG) acc /= (float)W;
            got = type == IRIS_FLOAT8_E4M3 ? iris_float_to_fp8_e4m3(acc) : iris_float_to_fp8_e5m2(acc);
          }
          if (got != want) {
            snprintf(why, sizeof why, "type %d op %d W %d case %d: the library's arithmetic gives 0x%02llx, the reference 0x%02llx", type, op, W, j, got, want);
            ok = false;
          }
        }
  char name[200];
  snprintf(name, sizeof name, "GPU tests' float64 reference (coll_values.h) = fp32 accumulation + one library rounding: uint8/e4m3/e5m2, sum/min/max/avg, 2-16 ranks, %ld cases",
           checked);
  report(name, ok, why);
}

// IRIS_COLL_TYPES / IRIS_COLL_OPS (set above): exactly the fp32 and bf16 sums are compiled
// in; every other reduction is what iris_all_reduce refuses with IRIS_ERROR_UNSUPPORTED
static void test_switch() {
  char why[160] = "";
  bool ok = true;
  for (int t = 0; t < IRIS_DTYPE_COUNT; t++)
    for (int op = 0; op < IRIS_REDOP_COUNT; op++) {
      const bool want = (t == IRIS_FLOAT32 || t == IRIS_BFLOAT16) && op == IRIS_SUM, got = iris_coll_compiled_in((iris_dtype_t)t, (iris_redop_t)op) != 0;
      if (got != want && ok) {
        snprintf(why, sizeof why, "type %d op %d: compiled in %d, want %d", t, op, (int)got, (int)want);
        ok = false;
      }
    }
  report("IRIS_COLL_TYPES / IRIS_COLL_OPS: with fp32 | bf16 and SUM, exactly those two sums are compiled in", ok, why);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && !strcmp(argv[1], "--all")) stride = 1;
  for (const Fmt &f : fmts) {
    test_decode(f);
    test_encode(f);
  }
  test_by_hand();
  test_arith();
  test_reference();
  test_switch();
  return failed ? 1 : 0;
}
