// tools/lt_fp8_probe.cu — which cuBLASLt fp8 (e4m3) GEMM configurations this GPU and
// library accept: the layout iris_gemm.h uses (C^T = B^T A^T, Lt's A = our B stored N x K,
// op T; Lt's B = our A stored rows x K, op N) with each output type, scales on or off,
// bias type and fast accumulation. Prints the heuristic's and cublasLtMatmul's status for
// each; checks the fp32 result of the accepted ones against a host reference.
//   nvcc -O2 -arch=sm_90 tools/lt_fp8_probe.cu -o build/lt_fp8_probe -lcublasLt
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

static const char *dt_name(cudaDataType_t t) {
  return t == CUDA_R_32F ? "fp32" : t == CUDA_R_16BF ? "bf16" : t == CUDA_R_16F ? "fp16" : t == CUDA_R_8F_E4M3 ? "e4m3" : "?";
}

int main(int argc, char **argv) {
  // lt_fp8_probe [N R K scale_offset_floats min_alignment]
  const int N = argc > 1 ? atoi(argv[1]) : 256, R = argc > 2 ? atoi(argv[2]) : 128, K = argc > 3 ? atoi(argv[3]) : 128;
  const int soff = argc > 4 ? atoi(argv[4]) : 0;
  uint32_t align = argc > 5 ? (uint32_t)atoi(argv[5]) : 0;
  printf("N %d rows %d K %d, scales at +%d floats, min alignment %u\n", N, R, K, soff, align);
  std::vector<__nv_fp8_e4m3> ha(R * K), hb(N * K);
  std::vector<float> fa(R * K), fb(N * K);
  srand(7);
  for (int i = 0; i < R * K; ++i) { ha[i] = __nv_fp8_e4m3((rand() % 15 - 7) * 0.25f); fa[i] = (float)ha[i]; }
  for (int i = 0; i < N * K; ++i) { hb[i] = __nv_fp8_e4m3((rand() % 15 - 7) * 0.25f); fb[i] = (float)hb[i]; }
  void *da, *db, *dc, *ws, *dbias;
  float *sa, *sb;
  const float two = 2.0f, half = 0.5f;
  cudaMalloc(&da, R * K); cudaMalloc(&db, N * K); cudaMalloc(&dc, (size_t)N * R * 4); cudaMalloc(&ws, 32 << 20); cudaMalloc(&dbias, N * 4);
  cudaMemset(dbias, 0, N * 4);
  cudaMalloc(&sa, 64); cudaMalloc(&sb, 64);
  sa += soff; sb += soff;
  cudaMemcpy(da, ha.data(), R * K, cudaMemcpyHostToDevice);
  cudaMemcpy(db, hb.data(), N * K, cudaMemcpyHostToDevice);
  cudaMemcpy(sa, &two, 4, cudaMemcpyHostToDevice);
  cudaMemcpy(sb, &half, 4, cudaMemcpyHostToDevice);
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  printf("cublasLt version %zu, cudart %zu\n", cublasLtGetVersion(), cublasLtGetCudartVersion());
  const cudaDataType_t outs[3] = {CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F};
  for (int oi = 0; oi < 1; ++oi)
    for (int scales = 0; scales < 2; ++scales)
      for (int fast = 0; fast < 2; ++fast)
        for (int bias = 0; bias < 2; ++bias) {
          const cudaDataType_t ot = outs[oi];
          cublasLtMatmulDesc_t op;
          cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
          cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
          cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
          cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
          if (scales) {
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb);
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa);
          }
          if (fast) { int8_t f = 1; cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &f, sizeof f); }
          if (bias) {
            cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
            cudaDataType_t bt = ot == CUDA_R_32F ? CUDA_R_16BF : ot;
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias);
          }
          cublasLtMatrixLayout_t la, lb, lc;
          cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K);
          cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, R, K);
          cublasLtMatrixLayoutCreate(&lc, ot, N, R, N);
          cublasLtMatmulPreference_t pref;
          cublasLtMatmulPreferenceCreate(&pref);
          size_t wsb = 32 << 20;
          cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
          if (align) {
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align);
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align);
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align);
          }
          cublasLtMatmulHeuristicResult_t res;
          int found = 0;
          cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &found);
          cublasStatus_t ms = CUBLAS_STATUS_NOT_SUPPORTED;
          const float one = 1.0f, zero = 0.0f;
          double maxerr = -1;
          if (hs == CUBLAS_STATUS_SUCCESS && found > 0) {
            cudaMemset(dc, 0xff, (size_t)N * R * 4);
            ms = cublasLtMatmul(lt, op, &one, db, la, da, lb, &zero, dc, lc, dc, lc, &res.algo, ws, wsb, 0);
            cudaError_t e = cudaDeviceSynchronize();
            if (ms == CUBLAS_STATUS_SUCCESS && e == cudaSuccess && ot == CUDA_R_32F) {
              std::vector<float> hc((size_t)N * R);
              cudaMemcpy(hc.data(), dc, hc.size() * 4, cudaMemcpyDeviceToHost);
              maxerr = 0;
              for (int r = 0; r < R; ++r)
                for (int n = 0; n < N; ++n) {
                  double s = 0;
                  for (int k = 0; k < K; ++k) s += (double)fa[r * K + k] * fb[n * K + k];
                  if (scales) s *= 1.0;  // 2 * 0.5
                  const double d = fabs(s - hc[(size_t)r * N + n]);
                  if (!(d <= maxerr)) maxerr = d;  // NaN stays
                }
            }
            if (e != cudaSuccess) printf("  cuda error %s\n", cudaGetErrorString(e));
          }
          printf("out %s scales %d fast %d bias %d: heuristic %d (found %d) matmul %d  max|err| %g\n", dt_name(ot), scales, fast, bias, (int)hs, found, (int)ms, maxerr);
          cublasLtMatmulPreferenceDestroy(pref);
          cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(lc);
          cublasLtMatmulDescDestroy(op);
        }
  return 0;
}
