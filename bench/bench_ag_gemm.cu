// bench_ag_gemm: all-gather + GEMM (iris_gemm.h) against NCCL all-gather + cuBLAS and
// cuBLAS alone, in the same processes, one per GPU, bf16 in and out, A sharded by rows.
//   bench_ag_gemm [ranks]       0 or none: every GPU
// For M in {128, 1024, 2048, 4096, 8192, 16384} and (N, K) in {(3584, 8192), (1792, 4096),
// (6656, 16384)}: time per op of
//   gemm_alone   cuBLAS on the gathered A, no communication (the lower bound)
//   gemm_w_chunks  the same as W GEMMs of M/W rows (the pipelined path's GEMMs, no copies)
//   nccl+cublas  ncclAllGather, then the same cuBLAS GEMM (the unfused baseline)
//   iris paths   pipelined, unfused, fused kernel, kernel-unfused (iris_gemm_path_t)
// CUDA events around each op, warm-up, BENCH_REPS repetitions (default 20), median per
// rank, max over ranks. Prints TFLOPS per GPU, speedup over nccl+cublas, and the fraction
// of the communication hidden, (unfused - t) / (unfused - gemm_alone).
// Env: BENCH_CSV=path (rows as CSV), BENCH_M=8192,16384 (only these M), BENCH_SHAPES=0,1
// (indices of the (N, K) list), BENCH_PATHS=pipelined,fused (only these iris paths),
// BENCH_LAYOUT=cols (A sharded by columns; the NCCL baseline then gathers rows, which
// is the same traffic), BENCH_TRACE=file.json (build with -DIRIS_GEMM_TRACE: one traced
// fused run of the first shape, written per rank as file.json.<rank>), BENCH_FETCH=8,16,32
// (the fused kernel with each of these fetcher CTA counts), BENCH_PIPE=0x0,1x0,2x2
// (pipelined variants SxC: S GEMM streams, C chunks per peer, 0 = default; the first is
// the "pipelined" row, the others "pipe/sScC"; default 0x0,1x0), BENCH_DTYPES=bf16 or fp8
// (default both). fp8: e4m3 A and B (B N x K), per-tensor scales, bf16 out, on the
// cuBLASLt paths (pipelined, unfused); baselines cuBLASLt's fp8 GEMM alone and NCCL's
// all-gather of the e4m3 bytes + that GEMM.
#define IRIS_IMPLEMENTATION
#include "../iris_gemm.h"
#include "bench_gemm_util.h"

// The fp8 pass (BENCH_DTYPES): the cuBLASLt paths against cuBLASLt's fp8 GEMM alone and
// NCCL's all-gather of the e4m3 bytes followed by it; bf16 out, scales 0.75 and 0.5.
static void bench_fp8(const long long (&Ms)[6], const long long (&NKs)[3][2], int reps, bool cols, const std::vector<std::string> &only_m,
                      const std::vector<std::string> &only_shape, FILE *csv) {
  const size_t maxA = (size_t)16384 * 16384, maxB = (size_t)16384 * 6656;
  unsigned char *a8_shard, *a8_full, *b8;
  float *scales, hs[8] = {0.75f, 0, 0, 0, 0.5f}; // A's at [0], B's at [4]: 16-byte aligned
  __nv_bfloat16 *c;
  IK(iris_malloc(ctx, maxA / W, (void **)&a8_shard));
  CK(cudaMalloc(&a8_full, maxA));
  CK(cudaMalloc(&b8, maxB));
  CK(cudaMalloc(&c, (size_t)16384 * 6656 * 2)); // the largest M x N
  CK(cudaMalloc(&scales, sizeof hs));
  CK(cudaMemcpy(scales, hs, sizeof hs, cudaMemcpyHostToDevice));
  k_fill_fp8<<<1024, 256, 0, stream>>>(a8_shard, maxA / W, 29u + (unsigned)rank_);
  k_fill_fp8<<<1024, 256, 0, stream>>>(a8_full, maxA, 31u);
  k_fill_fp8<<<1024, 256, 0, stream>>>(b8, maxB, 37u);
  lt8.ws_bytes = (size_t)32 << 20;
  BK(cublasLtCreate(&lt8.lt));
  CK(cudaMalloc(&lt8.ws, lt8.ws_bytes));
  CK(cudaStreamSynchronize(stream));
  if (rank_ == 0) printf("# fp8 e4m3 in (B N x K, per-tensor scales), bf16 out\n");
  for (int si = 0; si < 3; si++) {
    if (!wanted(only_shape, std::to_string(si))) continue;
    for (long long M : Ms) {
      if (!wanted(only_m, std::to_string(M))) continue;
      const long long N = NKs[si][0], K = NKs[si][1];
      auto row = [&](const char *name, double ms, double unf, double alone) {
        const double tf = 2.0 * M * N * K / (ms * 1e-3) / 1e12, x = unf / ms, hidden = unf > alone ? (unf - ms) / (unf - alone) : 0;
        if (rank_ == 0) {
          printf("%6lld %6lld %6lld fp8/%-11s %9.3f %8.1f %8.2f %7.2f\n", M, N, K, name, ms, tf, x, hidden);
          if (csv) fprintf(csv, "%d,%s,fp8,%lld,%lld,%lld,%s,%.4f,%.1f,%.3f,%.3f\n", W, cols ? "cols" : "rows", M, N, K, name, ms, tf, x, hidden);
        }
      };
      const double alone = time_op([&] { fp8_gemm(a8_full, b8, scales, scales + 4, c, M, N, K); }, reps);
      const double unf = time_op(
          [&] {
            NK(ncclAllGather(a8_shard, a8_full, (size_t)(M / W * K), ncclUint8, comm, stream));
            fp8_gemm(a8_full, b8, scales, scales + 4, c, M, N, K);
          },
          reps);
      row("gemm_alone", alone, unf, alone);
      row("nccl+cublaslt", unf, unf, alone);
      for (iris_gemm_path_t p : {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED}) {
        iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
        d.layout = cols ? IRIS_GEMM_A_COLS : IRIS_GEMM_A_ROWS;
        d.M = M; d.N = N; d.K = K; d.path = p; d.a_type = IRIS_FLOAT8_E4M3; d.b_transposed = 1;
        iris_ag_gemm_t *g;
        if (iris_ag_gemm_create(ctx, &d, &g) != IRIS_SUCCESS) {
          if (rank_ == 0) printf("%6lld %6lld %6lld fp8/%-11s skipped: %s\n", M, N, K, iris_gemm_path_name(p), iris_error_detail());
          continue;
        }
        const double t = time_op([&] { IK(iris_ag_gemm_run_scaled(g, a8_shard, b8, scales, scales + 4, NULL, c, stream)); }, reps);
        row(iris_gemm_path_name(p), t, unf, alone);
        IK(iris_ag_gemm_destroy(g));
      }
    }
  }
  cudaFree(a8_full); cudaFree(b8); cudaFree(c); cudaFree(scales); cudaFree(lt8.ws);
  cublasLtDestroy(lt8.lt);
  IK(iris_free(ctx, a8_shard));
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n = argc > 1 ? atoi(argv[1]) : 0;
  iris_launch_t L;
  IK(iris_launch_local(n, &L, &rank_));
  if (rank_ < 0) return iris_launch_wait(&L, 3600 * 1000) == IRIS_SUCCESS ? 0 : 1;
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)3 << 30;
  IK(iris_init(&cfg, &ctx));
  W = iris_world_size(ctx);
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ncclUniqueId id, ids[IRIS_MAX_RANKS];
  if (rank_ == 0) NK(ncclGetUniqueId(&id));
  IK(iris_allgather_host(ctx, &id, ids, sizeof id));
  NK(ncclCommInitRank(&comm, W, ids[0], rank_));
  BK(cublasCreate(&blas));
  BK(cublasSetStream(blas, stream));
  const int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 20;
  const bool cols = getenv("BENCH_LAYOUT") && !strcmp(getenv("BENCH_LAYOUT"), "cols");
  const std::vector<std::string> only_m = split(getenv("BENCH_M")), only_shape = split(getenv("BENCH_SHAPES")), only_path = split(getenv("BENCH_PATHS"));
  const std::vector<std::string> fetch = split(getenv("BENCH_FETCH")); // fused kernel: fetcher CTA counts to try
  // pipelined variants "SxC": S GEMM streams, C chunks per peer (0 = the plan's default);
  // the first is reported as "pipelined", the others as "pipe/sScC"
  std::vector<std::string> pipe = split(getenv("BENCH_PIPE"));
  if (pipe.empty()) pipe = {"0x0", "1x0"};
  const char *csv_path = getenv("BENCH_CSV"), *trace = getenv("BENCH_TRACE");
  const std::vector<std::string> only_dtype = split(getenv("BENCH_DTYPES"));
  FILE *csv = rank_ == 0 && csv_path && *csv_path ? fopen(csv_path, "w") : NULL;
  if (csv) fprintf(csv, "ranks,layout,dtype,M,N,K,variant,ms,tflops_per_gpu,speedup_vs_nccl_cublas,hidden\n");
  const long long Ms[] = {128, 1024, 2048, 4096, 8192, 16384};
  const long long NKs[][2] = {{3584, 8192}, {1792, 4096}, {6656, 16384}};
  const iris_gemm_path_t paths[] = {IRIS_GEMM_PATH_PIPELINED, IRIS_GEMM_PATH_UNFUSED, IRIS_GEMM_PATH_FUSED, IRIS_GEMM_PATH_KERNEL_UNFUSED};
  // buffers for the largest shape
  const size_t maxA = (size_t)16384 * 16384, maxC = (size_t)16384 * 6656, maxB = (size_t)16384 * 6656;
  __nv_bfloat16 *a_shard, *a_full, *b, *c;
  IK(iris_malloc(ctx, maxA / W * 2, (void **)&a_shard));
  CK(cudaMalloc(&a_full, maxA * 2));
  CK(cudaMalloc(&b, maxB * 2));
  CK(cudaMalloc(&c, maxC * 2));
  k_fill<<<1024, 256, 0, stream>>>(a_shard, maxA / W, 17u + (unsigned)rank_);
  k_fill<<<1024, 256, 0, stream>>>(a_full, maxA, 99u);
  k_fill<<<1024, 256, 0, stream>>>(b, maxB, 5u);
  CK(cudaStreamSynchronize(stream));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, iris_device_ordinal(ctx)));
  if (rank_ == 0)
    printf("# bench_ag_gemm: %d ranks, %s, bf16, A sharded by %s; ms per op, max over ranks of per-rank medians of %d; TFLOPS per GPU = 2MNK / t (every rank computes all of C)\n", W, prop.name,
           cols ? "columns" : "rows", reps);
  if (rank_ == 0) printf("%6s %6s %6s %-15s %9s %8s %8s %7s\n", "M", "N", "K", "variant", "ms", "TFLOPS", "x_unfus", "hidden");
#if defined(IRIS_GEMM_TRACE)
  bool traced = false;
#endif
  for (int si = 0; si < 3 && wanted(only_dtype, "bf16"); si++) {
    if (!wanted(only_shape, std::to_string(si))) continue;
    for (long long M : Ms) {
      if (!wanted(only_m, std::to_string(M))) continue;
      const long long N = NKs[si][0], K = NKs[si][1];
      const double gpu_flops = 2.0 * M * N * K; // every rank computes all of C
      auto row = [&](const char *name, double ms, double unf, double alone) {
        const double tf = gpu_flops / (ms * 1e-3) / 1e12;
        const double x = unf > 0 ? unf / ms : 0, hidden = unf > alone && unf > 0 ? (unf - ms) / (unf - alone) : 0;
        if (rank_ == 0) {
          printf("%6lld %6lld %6lld %-15s %9.3f %8.1f %8.2f %7.2f\n", M, N, K, name, ms, tf, x, hidden);
          if (csv) fprintf(csv, "%d,%s,bf16,%lld,%lld,%lld,%s,%.4f,%.1f,%.3f,%.3f\n", W, cols ? "cols" : "rows", M, N, K, name, ms, tf, x, hidden);
        }
      };
      const double alone = time_op([&] { gemm(a_full, b, c, M, N, K); }, reps);
      const double unf = time_op(
          [&] {
            NK(ncclAllGather(a_shard, a_full, (size_t)(M / W * K), ncclBfloat16, comm, stream));
            gemm(a_full, b, c, M, N, K);
          },
          reps);
      // the pipelined path's GEMMs alone: W GEMMs of M/W rows (what chunking costs)
      const double chunks = time_op(
          [&] {
            for (int q = 0; q < W; q++) gemm(a_full + (size_t)q * (M / W) * K, b, c + (size_t)q * (M / W) * N, M / W, N, K);
          },
          reps);
      row("gemm_alone", alone, unf, alone);
      row("gemm_w_chunks", chunks, unf, alone);
      row("nccl+cublas", unf, unf, alone);
      for (iris_gemm_path_t p : paths) {
        if (!wanted(only_path, iris_gemm_path_name(p))) continue;
        const bool kernel = p == IRIS_GEMM_PATH_FUSED || p == IRIS_GEMM_PATH_KERNEL_UNFUSED, piped = p == IRIS_GEMM_PATH_PIPELINED;
        const size_t variants = kernel && !fetch.empty() ? fetch.size() : piped ? pipe.size() : 1;
        for (size_t fi = 0; fi < variants; fi++) {
          iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
          d.layout = cols ? IRIS_GEMM_A_COLS : IRIS_GEMM_A_ROWS;
          d.M = M; d.N = N; d.K = K; d.path = p;
          std::string name = iris_gemm_path_name(p);
          if (kernel && !fetch.empty() && p == IRIS_GEMM_PATH_FUSED) { d.fetch_ctas = atoi(fetch[fi].c_str()); name += "/F" + fetch[fi]; }
          if (piped) {
            d.gemm_streams = atoi(pipe[fi].c_str());
            d.chunks = strchr(pipe[fi].c_str(), 'x') ? atoi(strchr(pipe[fi].c_str(), 'x') + 1) : 0;
            if (fi) name = "pipe/s" + std::to_string(d.gemm_streams) + "c" + std::to_string(d.chunks);
          }
          iris_ag_gemm_t *g;
          if (iris_ag_gemm_create(ctx, &d, &g) != IRIS_SUCCESS) {
            if (rank_ == 0) printf("%6lld %6lld %6lld %-15s skipped: %s\n", M, N, K, name.c_str(), iris_error_detail());
            continue;
          }
          static bool engine_shown = false;
          if (kernel && !engine_shown && rank_ == 0) {
            printf("# the fused kernel's GEMM engine: %s (IRIS_GEMM_TMA=0 selects the cp.async core)\n", iris_ag_gemm_engine(g));
            engine_shown = true;
          }
          const double t = time_op([&] { IK(iris_ag_gemm_run(g, a_shard, b, NULL, c, stream)); }, reps);
          row(name.c_str(), t, unf, alone);
          IK(iris_ag_gemm_destroy(g));
          if (p != IRIS_GEMM_PATH_FUSED && !piped) break;
        }
      }
#if defined(IRIS_GEMM_TRACE)
      if (trace && !traced) {
        traced = true;
        iris_ag_gemm_desc_t d = IRIS_AG_GEMM_DESC_INIT;
        d.layout = cols ? IRIS_GEMM_A_COLS : IRIS_GEMM_A_ROWS;
        d.M = M; d.N = N; d.K = K; d.path = IRIS_GEMM_PATH_FUSED; d.trace = 1;
        iris_ag_gemm_t *g;
        IK(iris_ag_gemm_create(ctx, &d, &g));
        for (int i = 0; i < 3; i++) IK(iris_ag_gemm_run(g, a_shard, b, NULL, c, stream));
        CK(cudaStreamSynchronize(stream));
        std::string path = std::string(trace) + "." + std::to_string(rank_);
        IK(iris_ag_gemm_trace_write(g, path.c_str()));
        if (rank_ == 0) printf("# trace of the fused kernel (M=%lld N=%lld K=%lld) written to %s.<rank>\n", M, N, K, trace);
        IK(iris_ag_gemm_destroy(g));
      }
#else
      (void)trace;
#endif
    }
  }
  if (wanted(only_dtype, "fp8")) bench_fp8(Ms, NKs, reps, cols, only_m, only_shape, csv);
  if (csv) fclose(csv);
  cudaFree(a_full); cudaFree(b); cudaFree(c);
  ncclCommDestroy(comm);
  cublasDestroy(blas);
  IK(iris_finalize(ctx));
  return 0;
}
