/* internal/gemm/host.h: the host side that the all-gather + GEMM (iris_gemm.h) and the
 * GEMM + reduce-scatter / all-reduce (iris_gemm_reduce.h) share: iris_gemm_path_name; GPU
 * errors; the description agreement; the fp8 scale rules; the cuBLASLt GEMM (handle, one
 * prepared GEMM per row count, fp8 scales, run); the wgmma/TMA probe; reading and
 * clearing an error record. Part of their implementation (IRIS_IMPLEMENTATION), included
 * by both; not a public header. */
#ifndef IRIS_INTERNAL_GEMM_HOST_H
#define IRIS_INTERNAL_GEMM_HOST_H
#include "../../iris_collectives.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "../coll/host.h"
#include "types.h"
#include "common.h"

#if IRIS_DEVICE_BLASLT && !defined(IRIS_GEMM_NO_BLAS) && defined(__has_include)
#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
#define IRIS_GEMM_HAVE_BLAS 1
#endif
#endif

/* CTA slots a plan's kernels may have: one epoch counter word each in its flag block. */
#define IRIS_GEMM_MAX_SLOTS 1024

#if defined(IRIS_GEMM_HAVE_TMA)
/* the element types the kernels are instantiated with */
typedef __nv_bfloat16 iris_gemm_elem_bf16_t;
typedef __half iris_gemm_elem_f16_t;
#elif defined(IRIS_GEMM_HAVE_CORE)
typedef hip_bfloat16 iris_gemm_elem_bf16_t;
typedef __half iris_gemm_elem_f16_t;
#endif

static const char *const iris_gemm_path_names[IRIS_GEMM_PATH_COUNT] = {"auto", "pipelined", "fused", "unfused", "kernel-unfused"};
IRIS_DEF const char *iris_gemm_path_name(iris_gemm_path_t p) { return (unsigned)p < IRIS_GEMM_PATH_COUNT ? iris_gemm_path_names[p] : "invalid"; }

/* A failed runtime call of plan `who` ("iris_ag_gemm", "iris_gemm_rs"): IRIS_ERROR_GPU
 * with the vendor's error text. */
static inline iris_status_t iris_gemm_gpu_fail(iris_t *ctx, const char *who, const char *what, iris_gpu_error_t e) {
  return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: %s failed: %s", iris_rank(ctx), who, what, iris_gpu_error_text(e));
}
/* A runtime call's result e as a status: IRIS_SUCCESS, or its failure (iris_gemm_gpu_fail). */
static inline iris_status_t iris_gemm_gpu_check(iris_t *ctx, const char *who, iris_gpu_error_t e, const char *what) {
  return e == IRIS_GPU_SUCCESS ? IRIS_SUCCESS : iris_gemm_gpu_fail(ctx, who, what, e);
}

/* A run that failed after enqueuing part of a call its peers pair with (a device barrier,
 * a kernel that signals them) leaves this rank's sequence of barriers and epochs out of
 * step with theirs: a later run would pair with the wrong call of a peer, and a barrier
 * count could even let a peer read a stale partial without a timeout. The plan marks
 * itself broken then, and every later run is refused here (every rank: destroy it). */
static inline iris_status_t iris_gemm_refuse_broken(int broken, const char *who, int me) {
  if (!broken) return IRIS_SUCCESS;
  return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT,
                          "rank %d: %s: an earlier run of this plan failed after enqueuing part of its call, so its barriers and epochs no longer match the "
                          "peers': destroy the plan on every rank and create it again",
                          me, who);
}

/* ---- Refused runs. A run refused on this rank before it launches anything of its call
 * (its arguments: a NULL or misaligned buffer, a bias against the plan, an A shard off the
 * heap, C over an input, fp8 scales the plan cannot take) would leave the peers' run of that
 * call waiting for this rank until their wait bound, and every later call out of step. So
 * it still takes part: the plan's take_part (iris_ag_gemm_take_part, iris_gemm_rs_take_part)
 * launches, in place of the call, what the peers' call pairs with, none of it touching a
 * buffer of the user's. The normal run pays nothing for it: the peers' kernels see it
 * through what they check anyway (a barrier's header, a wait's abort word). What the
 * refusal's detail says after the rule, where it took part: */
#define IRIS_GEMM_TOOK_PART                                                                                                 \
  " (the run took part with nothing of this rank's: the peers' run of this call fails at once naming this rank, nothing of " \
  "this rank's was read or written, and every rank's calls stay paired)"

/* The device barriers of a refused run's part (the call's order region open): n of them on
 * stream, the first with the signature of a refused collective where `refused`
 * (IRIS_COLL_SIG_REFUSED: a peer's device barrier or collective launch there sees a mismatch
 * naming this rank, IRIS_ERROR_MISMATCH through the context, iris_get_async_error and
 * iris_collectives_check; fatal where the peer's launch is one of a collective split into
 * several, as for a refused collective; where every rank refused, they meet in it), the
 * others plain (IRIS_COLL_SIG_BARRIER: the ranks meet there as the peers' call expects).
 * The plans run within one node, on the world's collective state (set up by their create).
 * Returns whether it launched (nothing at world size 1: nobody waits). */
static inline int iris_gemm_part_barriers(iris_t *ctx, int refused, int n, iris_stream_t stream) {
  iris_coll_state_t *s = (iris_coll_state_t *)iris_detail_get_ext(ctx);
  int i;
  if (!s || iris_local_size(ctx) < 2 || n < 1) return 0;
  for (i = 0; i < n; ++i) iris_coll_barrier_kernel<<<1, 64, 0, stream>>>(s->dev, i == 0 && refused ? IRIS_COLL_SIG_REFUSED : IRIS_COLL_SIG_BARRIER);
  return iris_gpu_last_error() == IRIS_GPU_SUCCESS;
}

/* Whether the byte ranges [p, p + pn) and [q, q + qn) overlap (a NULL or empty one: no). */
static inline int iris_gemm_overlap(const void *p, size_t pn, const void *q, size_t qn) {
  const uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
  return p && q && pn && qn && a < b + qn && b < a + pn;
}

/* The scale rules of run_scaled (both ops): an fp8 plan takes both scales, 4-byte aligned;
 * any other plan takes none. */
static inline iris_status_t iris_gemm_check_scales(iris_dtype_t a_type, const float *a_scale, const float *b_scale, const char *fn, int me) {
  const int fp8 = a_type == IRIS_FLOAT8_E4M3;
  if (fp8 && (!a_scale || !b_scale))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: fp8 inputs need both per-tensor scales (a_scale %p, b_scale %p)", me, fn, (const void *)a_scale,
                            (const void *)b_scale);
  if (!fp8 && (a_scale || b_scale))
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: scales apply to fp8 inputs only (this plan's a_type is %d, not IRIS_FLOAT8_E4M3): pass NULL", me, fn,
                            (int)a_type);
  if (((uintptr_t)a_scale | (uintptr_t)b_scale) % 4)
    return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: the scales must be 4-byte aligned floats: a_scale %p, b_scale %p", me, fn, (const void *)a_scale,
                            (const void *)b_scale);
  return IRIS_SUCCESS;
}

#if defined(IRIS_GEMM_HAVE_BLAS)
/* ---- cuBLASLt: C rows = A rows * B (+ bias), row-major, as the column-major
 * C^T = B^T A^T. Lt's "A" is our B, Lt's "B" is our A, bias runs along Lt's rows = N. */
#define IRIS_GEMM_BLAS_SHAPES 6

/* One prepared cuBLASLt GEMM for a given number of rows of A and C. */
typedef struct iris_gemm_blas_shape {
  long long rows;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
} iris_gemm_blas_shape_t;

/* A plan's cuBLASLt GEMM: C (rows x N, row stride N) = A (rows x K, row stride lda) * B
 * (K x N, or N x K when b_transposed) (+ bias), prepared once per row count. The caller
 * fills the description, then iris_gemm_blas_init; iris_gemm_blas_destroy frees it (a
 * zeroed struct is fine to destroy). */
typedef struct iris_gemm_blas {
  /* description */
  iris_t *ctx;
  const char *who;       /* the plan, in messages: "iris_ag_gemm", "iris_gemm_rs" */
  int me;
  long long N, K;
  iris_dtype_t ab_type;  /* A and B */
  iris_dtype_t c_type;   /* C and bias */
  int b_transposed, has_bias;
  int streams;           /* GEMM streams that may run at once (1 or 2): one workspace each */
  /* state */
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  void *ws[2];           /* one workspace per GEMM stream */
  size_t ws_bytes;
  float *scales;         /* fp8: 16-byte aligned copies of scales that are not ([0]: A, [4]: B) */
  int nshapes;
  iris_gemm_blas_shape_t shapes[IRIS_GEMM_BLAS_SHAPES];
} iris_gemm_blas_t;

static inline cudaDataType_t iris_gemm_cuda_type(iris_dtype_t t) {
  return t == IRIS_BFLOAT16 ? CUDA_R_16BF : t == IRIS_FLOAT16 ? CUDA_R_16F : t == IRIS_FLOAT8_E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_32F;
}

/* fp8: point the GEMM at per-tensor scales (device pointers to one float; A's and B's in
 * our terms: Lt's "A" is our B). cuBLASLt refuses, at matmul time with
 * CUBLAS_STATUS_NOT_SUPPORTED, a scale pointer that is not 16-byte aligned (measured on an
 * H100 with cuBLASLt 13.1: a 4-byte offset fails), so such a scale is first copied on
 * `stream` into the plan's aligned copies (a graph replay still reads the current value). */
static inline iris_status_t iris_gemm_blas_set_scales(iris_gemm_blas_t *g, const float *a_scale, const float *b_scale, iris_stream_t stream) {
  const float *src[2] = {a_scale, b_scale};
  const void *use[2];
  iris_status_t st;
  int i;
  for (i = 0; i < 2; ++i) {
    use[i] = src[i];
    if ((uintptr_t)src[i] % 16 == 0) continue;
    if ((st = iris_gemm_gpu_check(g->ctx, g->who, iris_gpu_memcpy_async(g->scales + 4 * i, src[i], sizeof(float), stream), "copying an fp8 scale to 16-byte alignment")) != IRIS_SUCCESS) return st;
    use[i] = g->scales + 4 * i;
  }
  if (cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &use[1], sizeof use[1]) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &use[0], sizeof use[0]) != CUBLAS_STATUS_SUCCESS)
    return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: cuBLASLt refused the fp8 scale pointers", g->me);
  return IRIS_SUCCESS;
}

static inline iris_status_t iris_gemm_blas_init(iris_gemm_blas_t *g) {
  const cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale_type = CUDA_R_32F;
  const cublasOperation_t ta = g->b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  iris_status_t st;
  if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: cublasLtCreate failed", g->me);
  if (cublasLtMatmulDescCreate(&g->op, ct, scale_type) != CUBLAS_STATUS_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: cublasLtMatmulDescCreate failed", g->me);
  cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (g->has_bias) {
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
  }
  g->ws_bytes = (size_t)32 << 20;
  if ((st = iris_gemm_gpu_check(g->ctx, g->who, iris_gpu_malloc(&g->ws[0], g->ws_bytes, IRIS_HEAP_MEMORY_COARSE), "cudaMalloc of the cuBLASLt workspace")) != IRIS_SUCCESS) return st;
  if ((g->streams > 1) && (st = iris_gemm_gpu_check(g->ctx, g->who, iris_gpu_malloc(&g->ws[1], g->ws_bytes, IRIS_HEAP_MEMORY_COARSE), "cudaMalloc of the second cuBLASLt workspace")) != IRIS_SUCCESS) return st;
  if (g->ab_type == IRIS_FLOAT8_E4M3) { /* the heuristic must see a scaled GEMM: point at the plan's copies until run */
    if ((st = iris_gemm_gpu_check(g->ctx, g->who, iris_gpu_malloc((void **)&g->scales, 8 * sizeof(float), IRIS_HEAP_MEMORY_COARSE), "cudaMalloc of the fp8 scale copies")) != IRIS_SUCCESS) return st;
    return iris_gemm_blas_set_scales(g, g->scales, g->scales + 4, NULL);
  }
  return IRIS_SUCCESS;
}

/* Prepare (once) the GEMM of `rows` rows of A with leading dimension lda. */
static inline iris_status_t iris_gemm_blas_shape(iris_gemm_blas_t *g, long long rows, long long lda, iris_gemm_blas_shape_t **out) {
  const cudaDataType_t ab = iris_gemm_cuda_type(g->ab_type), ct = iris_gemm_cuda_type(g->c_type);
  const long long es = (long long)iris_dtype_size(g->ab_type), cs = (long long)iris_dtype_size(g->c_type);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0, i;
  uint32_t align = 256;
  iris_gemm_blas_shape_t *s;
  for (i = 0; i < g->nshapes; ++i)
    if (g->shapes[i].rows == rows) { *out = &g->shapes[i]; return IRIS_SUCCESS; }
  if (g->nshapes == IRIS_GEMM_BLAS_SHAPES) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "rank %d: %s: too many chunk shapes", g->me, g->who);
  s = &g->shapes[g->nshapes];
  s->rows = rows;
  if (g->b_transposed) cublasLtMatrixLayoutCreate(&s->a, ab, (uint64_t)g->K, (uint64_t)g->N, g->K);
  else cublasLtMatrixLayoutCreate(&s->a, ab, (uint64_t)g->N, (uint64_t)g->K, g->N);
  cublasLtMatrixLayoutCreate(&s->b, ab, (uint64_t)g->K, (uint64_t)rows, lda);
  cublasLtMatrixLayoutCreate(&s->c, ct, (uint64_t)g->N, (uint64_t)rows, g->N);
  /* chunk starts are row offsets: the alignment the algorithm may assume is what
   * every chunk start keeps (bases are 256-byte aligned, run checks it) */
  while (align > 16 && ((g->N * cs) % align || (lda * es) % align)) align >>= 1;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes, sizeof g->ws_bytes);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align);
  if (cublasLtMatmulAlgoGetHeuristic(g->lt, g->op, s->a, s->b, s->c, s->c, pref, 1, &res, &found) != CUBLAS_STATUS_SUCCESS || found < 1) {
    cublasLtMatmulPreferenceDestroy(pref);
    return iris_detail_fail(IRIS_ERROR_UNSUPPORTED, "rank %d: %s: cuBLASLt has no algorithm for %lld x %lld x %lld", g->me, g->who, rows, g->N, g->K);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  s->algo = res.algo;
  g->nshapes++;
  *out = s;
  return IRIS_SUCCESS;
}

/* Enqueue C[row0 : row0 + rows] = A(rows, lda) * B (+ bias) on `stream`, with workspace
 * `ws` (0, or 1 for a second GEMM stream: GEMMs that may run at once use different ones). */
static inline iris_status_t iris_gemm_blas_run(iris_gemm_blas_t *g, const char *a, long long lda, long long rows, long long row0, const void *b, const void *bias,
                                               void *c, iris_stream_t stream, int ws) {
  iris_gemm_blas_shape_t *s;
  iris_status_t st;
  const float one = 1.0f, zero = 0.0f;
  char *cr = (char *)c + (size_t)row0 * g->N * iris_dtype_size(g->c_type);
  if ((st = iris_gemm_blas_shape(g, rows, lda, &s)) != IRIS_SUCCESS) return st;
  if (g->has_bias) cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  const cublasStatus_t bs = cublasLtMatmul(g->lt, g->op, &one, b, s->a, a, s->b, &zero, cr, s->c, cr, s->c, &s->algo, g->ws[ws], g->ws_bytes, stream);
  if (bs != CUBLAS_STATUS_SUCCESS) return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s: cublasLtMatmul failed (%lld rows; cuBLAS status %d)", g->me, g->who, rows, (int)bs);
  return IRIS_SUCCESS;
}

/* Free what init made (after the GPU is done with it). */
static inline void iris_gemm_blas_destroy(iris_gemm_blas_t *g) {
  int j;
  for (j = 0; j < g->nshapes; ++j) {
    cublasLtMatrixLayoutDestroy(g->shapes[j].a);
    cublasLtMatrixLayoutDestroy(g->shapes[j].b);
    cublasLtMatrixLayoutDestroy(g->shapes[j].c);
  }
  if (g->op) cublasLtMatmulDescDestroy(g->op);
  if (g->lt) cublasLtDestroy(g->lt);
  if (g->ws[0]) iris_gpu_free(g->ws[0]);
  if (g->ws[1]) iris_gpu_free(g->ws[1]);
  if (g->scales) iris_gpu_free(g->scales);
}
#endif /* IRIS_GEMM_HAVE_BLAS */

#if defined(IRIS_GEMM_HAVE_TMA)
static __global__ void iris_gemm_tma_probe(int *out) { *out = iris_gemm_tma_compiled(); }
/* 1 when the kernels were compiled with an sm_90a device pass that runs on this GPU
 * (wgmma and TMA), from a one-thread kernel of the same unit (synchronous, at create). */
static inline int iris_gemm_probe_wgmma(void) {
  int *d = NULL, h = 0;
  if (iris_gpu_malloc((void **)&d, sizeof(int), IRIS_HEAP_MEMORY_COARSE) != IRIS_GPU_SUCCESS) {
    iris_gpu_last_error();
    return 0;
  }
  iris_gemm_tma_probe<<<1, 1>>>(d);
  if (iris_gpu_last_error() != IRIS_GPU_SUCCESS || iris_gpu_copy_to_host(&h, d, sizeof(int)) != IRIS_GPU_SUCCESS) {
    iris_gpu_last_error();
    h = 0;
  }
  iris_gpu_free(d);
  return h;
}
#endif

#if defined(IRIS_GEMM_HAVE_CORE)
/* Synchronous: copy a plan's error record (device) into *e and, when a call failed, clear
 * its `what` word (the next failure is recorded afresh) and its abort words: a failed
 * call's epoch left there would come round again 2^32 calls later and make every wait of
 * that call return at once, unrecorded. A peer still in the failed call may tell this
 * rank about it after the clear (its CTAs end later): a record of the call *taken
 * reported last is such a late word and is dropped (e->what = 0); *taken: the plan's. The
 * runtime's status. */
static inline iris_gpu_error_t iris_gemm_err_take(iris_gemm_err_t *err, iris_gemm_err_t *e, unsigned *taken) {
  const unsigned zero[2] = {0u, 0u};
  iris_gpu_error_t rc = iris_gpu_copy_to_host(e, err, sizeof *e);
  const int failed = rc == IRIS_GPU_SUCCESS && (e->what || e->abort_epoch || e->peer_abort_epoch);
  if (failed) rc = iris_gpu_copy_to_device(&err->what, zero, sizeof zero[0]);
  if (failed && rc == IRIS_GPU_SUCCESS) rc = iris_gpu_copy_to_device(&err->abort_epoch, zero, sizeof zero); /* abort_epoch, peer_abort_epoch: adjacent */
  if (failed && rc == IRIS_GPU_SUCCESS) rc = iris_gpu_synchronize(); /* the clears land before a later run (any stream) can record a failure */
  if (rc == IRIS_GPU_SUCCESS && e->what) {
    if (*taken && e->epoch == *taken) e->what = 0; /* reported already */
    else *taken = e->epoch;
  }
  return rc;
}
static_assert(offsetof(iris_gemm_err_t, peer_abort_epoch) == offsetof(iris_gemm_err_t, abort_epoch) + sizeof(unsigned), "iris_gemm_err_take clears both abort words in one copy");
#endif
#endif /* IRIS_INTERNAL_GEMM_HOST_H */
