/* internal/gemm/core_mfma.h — the AMD CDNA (MFMA) core beside internal/gemm/core.h. UNVERIFIED.
 *
 * Status
 *   NEVER RUN ON AMD HARDWARE. It compiles for gfx90a (MI200) and gfx940 (MI300) with
 *   hipcc (ROCm 5.2 clang) without warnings; nobody has executed it. It is compiled only
 *   under hipcc when IRIS_GEMM_MFMA_UNVERIFIED is defined (else this file is empty; it
 *   includes internal/gemm/core.h; iris_gemm.h includes it). Before relying on it, build
 *   and run `make build/gemm_core_test_hip` on an MI200 or MI300 (it checks every
 *   configuration, type and layout against float64).
 *
 * What it is
 *   The interface and rules of internal/gemm/core.h ("Interface", "Rules"), for AMD:
 *     iris_gemm_tile<Cfg, T, B_KN, OutT>(A, lda, B, ldb, C, ldc, bias, M, N, K, m0, n0, smem, wait_k)
 *   with Cfg = iris_gemm_mfma_cfg<BM, BN, BK, WM, WN, STAGES>, T = hip_bfloat16 or __half,
 *   OutT = hip_bfloat16, __half or float, bias nullptr or hip_bfloat16 / __half / float.
 *   Differences from the CUDA cores: smem is LDS (at most 64 KB per workgroup, no
 *   attribute to raise); A is read with plain global loads (the wait_k consumer's acquire,
 *   which invalidates the CU's L1, and the workgroup barrier after it make A visible);
 *   wait_k(k0) comes one slab ahead of the slab being multiplied (prefetch distance 1).
 *   The kernel: blockDim.x == Cfg::threads (1-D, whole waves of 64).
 *
 * Instruction: v_mfma_f32_16x16x16f16 / v_mfma_f32_16x16x16bf16_1k
 *   (__builtin_amdgcn_mfma_f32_16x16x16f16, __builtin_amdgcn_mfma_f32_16x16x16bf16_1k; both
 *   exist on gfx90a and gfx940). One wave (64 lanes) computes D(16x16, f32) += X(16x16) Y,
 *   X = src0 (rows x, k), Y = src1 (k, columns y). Lane l, g = l / 16 (0..3):
 *     src0: 4 elements, X[x = l % 16][k = 4g + v], v = 0..3 (element v in bits 16v..16v+15)
 *     src1: 4 elements, Y[k = 4g + v][y = l % 16]
 *     D:    4 floats,   D[x = 4g + r][y = l % 16], r = 0..3
 *   Sources checked (public code, found by search; none of it run here):
 *     - tile-ai/tilelang tilelang/intrinsics/mfma_layout.py: the 16x16x16 operand maps
 *       (shared_16x16_to_local_64x4_layout_A: lane = i + 16 * (k / 4), element k % 4; _B:
 *       lane = n + 16 * (k / 4)) and the D map (thread_id_shared_access_64x4_to_16x16_
 *       layout_C_m_n: row = 4 * (lane / 16) + element, column = lane % 16);
 *     - two HIP kernels calling __builtin_amdgcn_mfma_f32_16x16x4f32(a, b, c, 0, 0, 0)
 *       (same family, K = 4): A lane = M + 16 * K, B lane = N + 16 * K, D element
 *       c = M % 4 at lane N + 16 * (M / 4), one of them noting "same as bf16/fp16 mfma";
 *     - an MFMA layout script for 32x32x8f16 / 16x16x16f16 (lane = i + M * (k / K_L),
 *       element k % K_L, K_L = 4);
 *     - carlushuang/gcnasm matrix_core (32x32x8f16 demo): in the standard operand order a
 *       lane's D elements lie along a column of C; swapping the A and B operands puts them
 *       along a row, which allows vector stores (what this core does).
 *   Not checked on hardware.
 *   How this core uses it:
 *     - operands swapped: src0 = B^T fragment (x = n), src1 = A^T fragment (y = m), so
 *       D[x][y] = C[m = y][n = x]^T and lane l holds C[row l % 16][cols 4g .. 4g + 3]:
 *       4 consecutive columns of one row, stored with one 8-byte (16-bit C) or 16-byte
 *       (fp32 C) store;
 *     - k permuted inside each 32-wide k step (the same for A and B, so the sum is the
 *       same): lane l reads 8 consecutive k, 8g .. 8g + 7, of its row (m or n) = l % 16 with
 *       one 16-byte LDS read; the first MFMA takes elements 0..3 (k 8g..8g+3) as its
 *       k = 4g..4g+3, the second elements 4..7 (k 8g+4..8g+7).
 *
 * How
 *   LDS holds A as BM rows of BK k and B as BN rows (n) of BK k in both B layouts, rows of
 *   16-byte chunks, chunk c of row r stored at c ^ f(r) with f(r) = (r ^ (r >> 3)) & 7
 *   (BK = 64, 8 chunks per row) or ((r >> 1) ^ (r >> 3)) & 3 (BK = 32, 4 chunks): the 8
 *   lanes of one 128-byte LDS phase of a fragment read (rows r..r+7 at one chunk) hit 8
 *   different 16-byte bank groups, and the transposing B (K x N) stores below spread over
 *   several. Two LDS stages; per BK slab: wait_k + global loads of slab kt+1 into registers
 *   (16-byte loads; zero for rows >= M or N and k >= K; a chunk of B (K x N) that crosses
 *   N loads only its columns < N, element by element), 16-byte LDS fragment reads and
 *   MFMAs of slab kt, register -> LDS stores of slab kt+1, one __syncthreads.
 *   B (K x N) is transposed on its way into LDS: each thread loads B_NCH consecutive k rows
 *   of one 8-column chunk and writes, per column, its B_NCH k values as one 2/4/8/16-byte
 *   store. Epilogue: bias in fp32, rounding to OutT (round to nearest even; NaN kept),
 *   direct 8- or 16-byte stores, masked scalar stores at the right edge.
 */
#ifndef IRIS_INTERNAL_GEMM_CORE_MFMA_H
#define IRIS_INTERNAL_GEMM_CORE_MFMA_H
#if (defined(__HIPCC__) || defined(__HIP__)) && defined(IRIS_GEMM_MFMA_UNVERIFIED)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>
#include <stdint.h>
#include "core.h"
#define IRIS_GEMM_CORE_AVAILABLE 1 /* the MFMA body is compiled (hipcc, IRIS_GEMM_MFMA_UNVERIFIED) */
#define IRIS_GEMM_CORE_MFMA 1

#if defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE != 64
#error "internal/gemm/core_mfma.h: the MFMA core needs wave64 (CDNA: gfx90a, gfx940)"
#endif

/* ---- vector types and the MFMA (the only target builtins of this file) ---- */
typedef short iris_gm_s4 __attribute__((ext_vector_type(4)));      /* 4 x 16-bit: one MFMA operand */
typedef short iris_gm_s8 __attribute__((ext_vector_type(8)));      /* 8 x 16-bit: a 16-byte chunk */
typedef _Float16 iris_gm_h4 __attribute__((ext_vector_type(4)));   /* fp16 view of an operand */
typedef float iris_gm_f4 __attribute__((ext_vector_type(4)));      /* D of one 16x16 MFMA, per lane */
typedef unsigned short iris_gm_u16x2 __attribute__((ext_vector_type(2)));
typedef unsigned short iris_gm_u16x4 __attribute__((ext_vector_type(4)));
typedef unsigned short iris_gm_u16x8 __attribute__((ext_vector_type(8)));

/* d += X * Y for one 16x16x16 block (layouts in the header comment); F16: fp16, else bf16 */
template <bool F16> __device__ __forceinline__ iris_gm_f4 iris_gm_mfma(iris_gm_s4 x, iris_gm_s4 y, iris_gm_f4 d);
template <> __device__ __forceinline__ iris_gm_f4 iris_gm_mfma<true>(iris_gm_s4 x, iris_gm_s4 y, iris_gm_f4 d) {
  return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(iris_gm_h4, x), __builtin_bit_cast(iris_gm_h4, y), d, 0, 0, 0);
}
template <> __device__ __forceinline__ iris_gm_f4 iris_gm_mfma<false>(iris_gm_s4 x, iris_gm_s4 y, iris_gm_f4 d) {
  return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(x, y, d, 0, 0, 0);
}

/* ---- element types ---- */
template <typename T> struct iris_gm_elem; /* input element types: bf16, fp16 (others: incomplete type) */
template <> struct iris_gm_elem<hip_bfloat16> { enum { f16 = 0 }; };
template <> struct iris_gm_elem<__half> { enum { f16 = 1 }; };

/* bias elements: bf16, fp16 or fp32, whatever T and OutT are */
__device__ __forceinline__ float iris_gm_to_float(hip_bfloat16 x) { return __uint_as_float((unsigned)x.data << 16); }
__device__ __forceinline__ float iris_gm_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float iris_gm_to_float(float x) { return x; }

/* fp32 -> bf16 bits, round to nearest even, NaN stays NaN */
__device__ __forceinline__ unsigned short iris_gm_bf16_bits(float v) {
  const unsigned u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/* fp32 -> fp16 bits, round to nearest even (the conversion instruction's default mode) */
__device__ __forceinline__ unsigned short iris_gm_f16_bits(float v) { return __builtin_bit_cast(unsigned short, (_Float16)v); }

/* Output element types: 4 consecutive columns (one 8- or 16-byte store) or one. */
template <typename OutT> struct iris_gm_out;
template <> struct iris_gm_out<hip_bfloat16> {
  static __device__ __forceinline__ void store4(hip_bfloat16 *p, const float (&v)[4]) {
    iris_gm_u16x4 w = {iris_gm_bf16_bits(v[0]), iris_gm_bf16_bits(v[1]), iris_gm_bf16_bits(v[2]), iris_gm_bf16_bits(v[3])};
    *reinterpret_cast<iris_gm_u16x4 *>(p) = w;
  }
  static __device__ __forceinline__ void store1(hip_bfloat16 *p, float v) { *reinterpret_cast<unsigned short *>(p) = iris_gm_bf16_bits(v); }
};
template <> struct iris_gm_out<__half> {
  static __device__ __forceinline__ void store4(__half *p, const float (&v)[4]) {
    iris_gm_u16x4 w = {iris_gm_f16_bits(v[0]), iris_gm_f16_bits(v[1]), iris_gm_f16_bits(v[2]), iris_gm_f16_bits(v[3])};
    *reinterpret_cast<iris_gm_u16x4 *>(p) = w;
  }
  static __device__ __forceinline__ void store1(__half *p, float v) { *reinterpret_cast<unsigned short *>(p) = iris_gm_f16_bits(v); }
};
template <> struct iris_gm_out<float> {
  static __device__ __forceinline__ void store4(float *p, const float (&v)[4]) {
    iris_gm_f4 w = {v[0], v[1], v[2], v[3]};
    *reinterpret_cast<iris_gm_f4 *>(p) = w;
  }
  static __device__ __forceinline__ void store1(float *p, float v) { *p = v; }
};

/* Index of the 16-byte LDS chunk that holds chunk c of row r, in a tile of CPR (4 or 8)
   chunks per row (see "How" in the header comment). */
template <int CPR> __device__ __forceinline__ int iris_gm_swz(int r, int c) {
  return CPR == 8 ? r * 8 + (c ^ ((r ^ (r >> 3)) & 7)) : r * 4 + (c ^ (((r >> 1) ^ (r >> 3)) & 3));
}

/* One column's KV consecutive k values (element e of each of the KV chunks x[0..KV-1])
   stored as one 2-, 4-, 8- or 16-byte LDS store at p. */
template <int KV> struct iris_gm_kstore;
template <> struct iris_gm_kstore<1> {
  static __device__ __forceinline__ void run(char *p, const iris_gm_s8 (&x)[1], int e) { *reinterpret_cast<short *>(p) = x[0][e]; }
};
template <> struct iris_gm_kstore<2> {
  static __device__ __forceinline__ void run(char *p, const iris_gm_s8 (&x)[2], int e) {
    iris_gm_u16x2 w = {(unsigned short)x[0][e], (unsigned short)x[1][e]};
    *reinterpret_cast<iris_gm_u16x2 *>(p) = w;
  }
};
template <> struct iris_gm_kstore<4> {
  static __device__ __forceinline__ void run(char *p, const iris_gm_s8 (&x)[4], int e) {
    iris_gm_u16x4 w = {(unsigned short)x[0][e], (unsigned short)x[1][e], (unsigned short)x[2][e], (unsigned short)x[3][e]};
    *reinterpret_cast<iris_gm_u16x4 *>(p) = w;
  }
};
template <> struct iris_gm_kstore<8> {
  static __device__ __forceinline__ void run(char *p, const iris_gm_s8 (&x)[8], int e) {
    iris_gm_u16x8 w = {(unsigned short)x[0][e], (unsigned short)x[1][e], (unsigned short)x[2][e], (unsigned short)x[3][e],
                       (unsigned short)x[4][e], (unsigned short)x[5][e], (unsigned short)x[6][e], (unsigned short)x[7][e]};
    *reinterpret_cast<iris_gm_u16x8 *>(p) = w;
  }
};

/* The first `n` (0..8) 16-bit elements at p, zero after them (a B chunk crossing N). */
__device__ __forceinline__ iris_gm_s8 iris_gm_load_part(const short *p, int n) {
  iris_gm_s8 v = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (e < n) v[e] = p[e];
  return v;
}

/* Epilogue. acc[i][j] of lane l = 16*g + y holds C[row0 + 16*i + y][col0 + 16*j + 4*g + r],
   r = 0..3 (the swapped-operand D layout). Adds bias in fp32, rounds to OutT, stores rows < M
   and columns < N only. */
template <int MT, int NT, typename OutT, typename BiasT>
__device__ __forceinline__ void iris_gm_epilogue(const iris_gm_f4 (&acc)[MT][NT], OutT *__restrict__ C, int ldc, const BiasT *__restrict__ bias, int M,
                                                 int N, int row0, int col0, int lane) {
  typedef iris_gm_out<OutT> O;
  const int y = lane & 15, g = lane >> 4;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int col = col0 + 16 * j + 4 * g;
    float bv[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) bv[r] = (bias != nullptr && col + r < N) ? iris_gm_to_float(bias[col + r]) : 0.f;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int row = row0 + 16 * i + y;
      float v[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) v[r] = acc[i][j][r] + bv[r];
      if (row < M && col < N) {
        OutT *p = C + (size_t)row * ldc + col;
        if (col + 4 <= N) {
          O::store4(p, v);
        } else {
#pragma unroll
          for (int r = 0; r < 4; ++r)
            if (col + r < N) O::store1(p + r, v[r]);
        }
      }
    }
  }
}

/* ---- the MFMA core ---- */
template <class Cfg, typename T, bool B_KN, typename OutT, class WaitK, typename BiasT>
__device__ __forceinline__ void iris_gm_tile(const T *__restrict__ A, int lda, const T *__restrict__ B, int ldb, OutT *__restrict__ C, int ldc,
                                             const BiasT *__restrict__ bias, int M, int N, int K, int m0, int n0, char *smem, WaitK &wait_k) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, NTHR = Cfg::threads, WN = Cfg::WN;
  constexpr int WTM = BM / Cfg::WM, WTN = BN / WN, MT = WTM / 16, NT = WTN / 16, KK = BK / 32;
  constexpr int CPR = BK / 8;                                   /* 16-byte chunks per LDS row */
  constexpr int A_RSTEP = NTHR / CPR, A_NCH = BM * CPR / NTHR;  /* A: rows apart, chunks per thread */
  constexpr int B_NCH = BN * CPR / NTHR;                        /* B: chunks per thread */
  constexpr int B_CPR = BN / 8;                                 /* B (K x N): 8-column chunks per k row */
  constexpr int B_RSTEP = B_KN ? 1 : NTHR / CPR;                /* B (N x K): rows apart */
  constexpr int A_BYTES = BM * BK * 2, STAGE = Cfg::stage_bytes;
  constexpr bool F16 = iris_gm_elem<T>::f16 != 0;

  if (m0 >= M || n0 >= N) return;
  const int tid = threadIdx.x, lane = tid & 63, wave = tid >> 6, wm = wave / WN, wn = wave % WN;

  /* global -> registers. A and B (N x K): chunk i of this thread is row x_r + i*RSTEP, 16-byte
     chunk x_c of the row (consecutive threads: consecutive chunks of a row). B (K x N):
     chunk v is k row b_r*B_NCH + v of the 8-column chunk b_c. */
  const int a_r = tid / CPR, a_c = tid % CPR;
  const int b_r = B_KN ? tid / B_CPR : tid / CPR, b_c = B_KN ? tid % B_CPR : tid % CPR;
  uint32_t a_rows = 0, b_rows = 0;
#pragma unroll
  for (int i = 0; i < A_NCH; ++i) a_rows |= (m0 + a_r + i * A_RSTEP < M ? 1u : 0u) << i;
  const T *a_src = A + (size_t)(m0 + a_r < M ? m0 + a_r : 0) * lda + a_c * 8;
  const T *b_src;
  int b_cols = 8; /* B (K x N): columns of this thread's chunk below N */
  if (B_KN) {
    const int left = N - (n0 + b_c * 8);
    b_cols = left >= 8 ? 8 : (left > 0 ? left : 0);
    b_src = B + (size_t)(b_r * B_NCH) * ldb + (b_cols ? n0 + b_c * 8 : 0);
  } else {
#pragma unroll
    for (int i = 0; i < B_NCH; ++i) b_rows |= (n0 + b_r + i * B_RSTEP < N ? 1u : 0u) << i;
    b_src = B + (size_t)(n0 + b_r < N ? n0 + b_r : 0) * ldb + b_c * 8;
  }
  iris_gm_s8 ra[A_NCH], rb[B_NCH];
  const iris_gm_s8 zero = {0, 0, 0, 0, 0, 0, 0, 0};

  auto load_global = [&](int kt) {
    const int k0 = kt * BK;
    const bool ak = k0 + a_c * 8 < K;
#pragma unroll
    for (int i = 0; i < A_NCH; ++i)
      ra[i] = (ak && ((a_rows >> i) & 1u)) ? *reinterpret_cast<const iris_gm_s8 *>(a_src + (size_t)i * A_RSTEP * lda + k0) : zero;
    if (B_KN) {
#pragma unroll
      for (int v = 0; v < B_NCH; ++v) {
        const bool ok = k0 + b_r * B_NCH + v < K;
        const T *p = b_src + (size_t)(k0 + v) * ldb;
        rb[v] = !ok ? zero : b_cols == 8 ? *reinterpret_cast<const iris_gm_s8 *>(p) : iris_gm_load_part(reinterpret_cast<const short *>(p), b_cols);
      }
    } else {
      const bool bk = k0 + b_c * 8 < K;
#pragma unroll
      for (int i = 0; i < B_NCH; ++i)
        rb[i] = (bk && ((b_rows >> i) & 1u)) ? *reinterpret_cast<const iris_gm_s8 *>(b_src + (size_t)i * B_RSTEP * ldb + k0) : zero;
    }
  };
  auto store_lds = [&](int stage) {
    char *sa = smem + stage * STAGE, *sb = sa + A_BYTES;
#pragma unroll
    for (int i = 0; i < A_NCH; ++i) *reinterpret_cast<iris_gm_s8 *>(sa + 16 * iris_gm_swz<CPR>(a_r + i * A_RSTEP, a_c)) = ra[i];
    if (B_KN) {
      /* column n = 8*b_c + e, k = b_r*B_NCH .. + B_NCH - 1 (within the slab): chunk k / 8 of row n */
      const int k = b_r * B_NCH;
#pragma unroll
      for (int e = 0; e < 8; ++e) iris_gm_kstore<B_NCH>::run(sb + 16 * iris_gm_swz<CPR>(8 * b_c + e, k >> 3) + 2 * (k & 7), rb, e);
    } else {
#pragma unroll
      for (int i = 0; i < B_NCH; ++i) *reinterpret_cast<iris_gm_s8 *>(sb + 16 * iris_gm_swz<CPR>(b_r + i * B_RSTEP, b_c)) = rb[i];
    }
  };
  /* LDS -> MFMA. Lane l (y = l % 16, g = l / 16) reads 16 bytes: k 32*kk + 8g .. + 7 of A row
     wm*WTM + 16i + y and of B row (n) wn*WTN + 16j + y; two MFMAs per (i, j), halves .lo, .hi. */
  const int fy = lane & 15, fg = lane >> 4;
  auto compute = [&](int stage, iris_gm_f4(&acc)[MT][NT]) {
    const char *sa = smem + stage * STAGE, *sb = sa + A_BYTES;
#pragma unroll
    for (int kk = 0; kk < KK; ++kk) {
      iris_gm_s8 af[MT], bf[NT];
#pragma unroll
      for (int i = 0; i < MT; ++i) af[i] = *reinterpret_cast<const iris_gm_s8 *>(sa + 16 * iris_gm_swz<CPR>(wm * WTM + 16 * i + fy, 4 * kk + fg));
#pragma unroll
      for (int j = 0; j < NT; ++j) bf[j] = *reinterpret_cast<const iris_gm_s8 *>(sb + 16 * iris_gm_swz<CPR>(wn * WTN + 16 * j + fy, 4 * kk + fg));
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          acc[i][j] = iris_gm_mfma<F16>(bf[j].lo, af[i].lo, acc[i][j]); /* src0 = B (x = n), src1 = A (y = m) */
          acc[i][j] = iris_gm_mfma<F16>(bf[j].hi, af[i].hi, acc[i][j]);
        }
    }
  };

  iris_gm_f4 acc[MT][NT];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[i][j] = iris_gm_f4{0.f, 0.f, 0.f, 0.f};
  const int KT = (K + BK - 1) / BK;

  __syncthreads(); /* the previous user of smem (an earlier tile) is done */
  if (KT > 0) {
    wait_k(0);
    load_global(0);
    store_lds(0);
  }
  __syncthreads();
  for (int kt = 0; kt < KT; ++kt) {
    const bool more = kt + 1 < KT; /* the same in every thread: wait_k stays uniform */
    if (more) {
      wait_k((kt + 1) * BK);
      load_global(kt + 1); /* in flight during the MFMAs of slab kt */
    }
    compute(kt & 1, acc);
    if (more) store_lds((kt + 1) & 1); /* every wave finished reading that stage (slab kt-1) before the last barrier */
    __syncthreads();                   /* slab kt+1 visible; every wave is done with stage kt & 1 */
  }
  iris_gm_epilogue<MT, NT>(acc, C, ldc, bias, M, N, m0 + wm * WTM, n0 + wn * WTN, lane);
}

/* ---- configuration ---- */
/* WM x WN waves of 64 lanes, wave tile (BM/WM) x (BN/WN) in 16 x 16 MFMA blocks; BK 32 or 64;
   STAGES = 2 (LDS double buffer; the next slab waits in registers); smem_bytes = 2 * (BM + BN) * BK * 2. */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_> struct iris_gemm_mfma_cfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_;
  static constexpr int threads = WM * WN * 64;
  static constexpr int stage_bytes = (BM + BN) * BK * 2;
  static constexpr int smem_bytes = STAGES * stage_bytes;
  static constexpr bool wgmma = false;
  static constexpr bool mfma = true;
  static_assert(BK == 32 || BK == 64, "iris_gemm_mfma_cfg: BK must be 32 or 64");
  static_assert(BM % WM == 0 && (BM / WM) % 16 == 0, "iris_gemm_mfma_cfg: wave tile rows (BM/WM) must be a multiple of 16");
  static_assert(BN % WN == 0 && (BN / WN) % 16 == 0, "iris_gemm_mfma_cfg: wave tile columns (BN/WN) must be a multiple of 16");
  static_assert(threads <= 1024, "iris_gemm_mfma_cfg: at most 1024 threads (16 waves)");
  static_assert((BM * BK / 8) % threads == 0 && (BN * BK / 8) % threads == 0, "iris_gemm_mfma_cfg: whole 16-byte chunks per thread");
  static_assert(BM * BK / 8 / threads <= 32 && BN * BK / 8 / threads <= 32, "iris_gemm_mfma_cfg: at most 32 chunks per thread and stage");
  static_assert(BN % 8 == 0 && threads % (BN / 8) == 0, "iris_gemm_mfma_cfg: B (K x N) loads need threads to be a multiple of BN/8");
  static_assert(BN * BK / 8 / threads == 1 || BN * BK / 8 / threads == 2 || BN * BK / 8 / threads == 4 || BN * BK / 8 / threads == 8,
                "iris_gemm_mfma_cfg: B chunks per thread (BN*BK/8/threads) must be 1, 2, 4 or 8 (the K x N transpose)");
  static_assert(STAGES == 2, "iris_gemm_mfma_cfg: STAGES must be 2 (LDS double buffer, register prefetch)");
  static_assert(smem_bytes <= 65536, "iris_gemm_mfma_cfg: at most 64 KB of LDS");
  template <typename T, bool B_KN, typename OutT, class WaitK, typename BiasT>
  static __device__ __forceinline__ void run(const T *A, int lda, const T *B, int ldb, OutT *C, int ldc, const BiasT *bias, int M, int N, int K, int m0,
                                             int n0, char *smem, WaitK &wait_k) {
    iris_gm_tile<iris_gemm_mfma_cfg, T, B_KN, OutT, WaitK, BiasT>(A, lda, B, ldb, C, ldc, bias, M, N, K, m0, n0, smem, wait_k);
  }
};

/* 0: there is no wgmma core on AMD (kept so code written for internal/gemm/core.h compiles) */
__device__ __forceinline__ int iris_gemm_wgmma_compiled() { return 0; }

/* Named configurations (UNVERIFIED: never run). */
/* big GEMMs: 256 threads (2 x 2 waves of 64 x 64), 32 KB LDS */
typedef iris_gemm_mfma_cfg<128, 128, 32, 2, 2, 2> iris_gemm_cfg_mfma_large;
/* small M: 256 threads (2 x 2 waves of 32 x 64), BK 64, 48 KB LDS */
typedef iris_gemm_mfma_cfg<64, 128, 64, 2, 2, 2> iris_gemm_cfg_mfma_small;

#endif /* HIP and IRIS_GEMM_MFMA_UNVERIFIED */
#endif /* IRIS_INTERNAL_GEMM_CORE_MFMA_H */
