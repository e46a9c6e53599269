// bench_gemm_rs: GEMM + reduce-scatter and GEMM + all-reduce (iris_gemm_reduce.h) against
// cuBLAS followed by NCCL (or iris) reduce-scatter / all-reduce, and the local GEMM alone,
// in the same processes, one per GPU, K sharded over the ranks; bf16 in and out, and fp8
// (e4m3 A and B with per-tensor scales, B stored N x K/W, bf16 out).
//   bench_gemm_rs [ranks]       0 or none: every GPU
// For M in {128, 1024, 4096, 8192, 16384} and (N, K_total) in {(8192, 8192), (8192, 28672),
// (5120, 13824)} (each rank: A_r M x K/W, B_r K/W x N), time per op of
//   gemm_alone      cuBLAS on the local shard, M x N x K/W, no communication (the floor);
//                   fp8: cuBLASLt's fp8 GEMM (TN, scales, bf16 out)
//   cublas+nccl_rs  that GEMM, then ncclReduceScatter of C (the sequence users run today)
//   cublas+iris_rs  that GEMM, then iris_reduce_scatter
//   rs/<path>       iris_gemm_rs_run, REDUCE_SCATTER, each path (pipelined, unfused, fused),
//                   partials in the output type (bf16: the default); rs/pipelined-exact:
//                   exact = 1 (fp32 partials); the fused path's partials are fp32 always
//   cublas+nccl_ar, cublas+iris_ar, ar/<path>: the same for all-reduce
// CUDA events around each op, 3 warm-up calls, BENCH_REPS repetitions (default 20), median
// per rank, max over ranks. Prints ms, the ratio to the local GEMM alone, and the fraction
// of the communication hidden, (sequence - t) / (sequence - gemm_alone), where the
// sequence is cuBLAS + NCCL of the same op.
// Env: BENCH_CSV=path (rows as CSV), BENCH_M=4096,8192 (only these M), BENCH_SHAPES=0,2
// (indices of the (N, K) list), BENCH_OPS=rs or ar, BENCH_DTYPES=bf16 or fp8 (default both),
// BENCH_PATHS=pipelined,unfused,fused (default all).

// fp8: the sequence is cuBLASLt fp8 (bf16 out) + NCCL bf16; the plans run
// iris_gemm_rs_run_scaled into bf16.
// The fused path (sm_90a build) runs in the ranks mode beside the others (rs/fused, ar/fused).
//   bench_gemm_rs local        ONE GPU, one rank: the fused path's local GEMM with its push
//                              epilogue (world 1: every tile pushed into this rank's own heap
//                              slot, flags signalled) against cuBLAS alone on the same GEMM.
// Local mode, per shape M x N x K/d (M, (N, K) as above; d in BENCH_KDIV, default 1,8: the
// local GEMM of a d-rank run), bf16 in, B K/d x N, time per op (device events, 3 warm-up
// calls, median of BENCH_REPS):
//   cublas_bf16     cublasGemmEx, bf16 out (what a user runs before NCCL)
//   cublas_fp32     cublasGemmEx, fp32 out (the same bytes out as the fused GEMM's partial)
//   tma_bf16        the cooperative TMA core (128 x 256 tiles) in the fused GEMM's tile
//                   order (one CTA per SM, owner-order raster), plain bf16 C into an
//                   ordinary buffer, no flags: the core against cuBLAS
//   tma_fp32        the same with fp32 C (the fused GEMM's output bytes, no flags, no
//                   per-row owner map): tma_fp32 - tma_bf16 is the cost of fp32 tiles
//   pp_bf16, pp_fp32  the same with the ping-pong core (128 x 128 tiles, one warpgroup
//                   stores while the other multiplies: iris_gemm_cfg_tma_pingpong)
//   fused_coop      the fused GEMM kernel on the cooperative core (flags released by warp 1
//                   of the producer warpgroup, fp32 pairs stored as the MMA left them:
//                   variant 3, the cooperative core's default)
//   fused_ppO       the fused GEMM kernel on the ping-pong core, flags released by warp 1,
//                   direct fp32 pairs (variant 7)
//   fused_ppT       the same with 16-byte stores after the quad transpose (variant 5)
//   fused_ppC       the fused GEMM kernel on the ping-pong core with the signals released by
//                   the consumer warpgroups themselves (variant 4)
//   pp_map, pp_relaxed  (timing only, never read) the ping-pong core with the fused
//                   kernel's output map (rows into their owners' slots) and no flags, or
//                   flags stored plain (no release) by the consumers after a warpgroup
//                   barrier: pp_fp32 -> pp_map -> pp_relaxed -> fused_ppC price the map,
//                   the barrier and the system-scope release
//   fused_run       iris_gemm_rs_run of the world-1 plan: barrier, the fused GEMM kernel
//                   (the default variant), the reduce kernel (waits for the flags, bf16 out)
// and the speed ratios cublas / fused GEMM of the plan's variant (the core it chose:
// default_variant in the CSV; target: >= 0.95 against both).
#define IRIS_IMPLEMENTATION
#include "../iris_gemm_reduce.h"
#include "bench_gemm_util.h"

#if defined(IRIS_GEMM_HAVE_CORE)
// tma_bf16 / tma_fp32: the fused GEMM's core and tile sequence, plain C (row-major, ldc N)
template <class Cfg, typename OutT>
__global__ void __launch_bounds__(Cfg::threads, 1) k_tma_plain(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, OutT *C,
                                                               const iris_gemm_rs_fused_dev_t d) {
  extern __shared__ __align__(128) char smem[];
  const iris_gemm_sched sc = iris_gemm_make_sched<Cfg>((int)blockIdx.x, (int)gridDim.x, d.tiles_m, (d.N + Cfg::BN - 1) / Cfg::BN, d.rot, d.raster);
  iris_gemm_tma_tiles<Cfg, iris_gemm_elem_bf16_t, true, OutT>(&ta, &tb, C, d.N, (const float *)nullptr, d.M, d.N, d.K, sc, iris_gemm_no_wait(), smem);
}
template <class Cfg, typename OutT>
static void tma_plain(const iris_gemm_rs_t *g, const void *a, const void *b, OutT *c, int setup) {
  if (setup) { CK(cudaFuncSetAttribute(k_tma_plain<Cfg, OutT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Cfg::smem_bytes)); return; }
  CUtensorMap ta, tb;
  CK(iris_gemm_tma_map(&ta, a, 0, g->fd.M, g->fd.K, g->fd.K, Cfg::BM));
  CK(iris_gemm_tma_map_b<Cfg>(&tb, b, 0, true, g->fd.K, g->fd.N, g->fd.N));
  k_tma_plain<Cfg, OutT><<<g->sms, Cfg::threads, Cfg::smem_bytes, stream>>>(ta, tb, c, g->fd);
  CK(cudaGetLastError());
}
typedef iris_gemm_cfg_tma_large CoopCfg;
typedef iris_gemm_cfg_tma_pingpong PpCfg;
// pp_map / pp_relaxed: the fused kernel's output map with no flags (RELAXED 0) or flags
// stored plain by thread 0 of the warpgroup after its barrier (RELAXED 1); timing only
template <int RELAXED>
struct BenchOut : iris_gemm_rs_push_out<128, false> {
  __device__ __forceinline__ void done(int r0, int n0, int cw) const {
    if (!RELAXED) return;
    if (cw == 0) asm volatile("bar.sync 2, 128;\n" ::: "memory");
    else asm volatile("bar.sync 3, 128;\n" ::: "memory");
    if ((threadIdx.x & 127) == 0 && r0 < d->M) {
      volatile unsigned *f = d->flags + ((size_t)d->ctx.rank * d->halves + r0 / 64) * d->tiles_n + n0 / IRIS_GEMM_RS_FLAG_BN;
      *f = epoch;
    }
  }
};
template <int RELAXED>
__global__ void __launch_bounds__(PpCfg::threads, 1) k_pp_policy(const __grid_constant__ iris_gemm_rs_fused_dev_t d, const __grid_constant__ CUtensorMap ta,
                                                                 const __grid_constant__ CUtensorMap tb) {
  extern __shared__ __align__(128) char smem[];
  const iris_gemm_sched sc = iris_gemm_make_sched<PpCfg>((int)blockIdx.x, (int)gridDim.x, d.tiles_m, (d.N + PpCfg::BN - 1) / PpCfg::BN, d.rot, d.raster);
  BenchOut<RELAXED> out;
  out.d = &d;
  out.off = (size_t)((const char *)(d.part + (size_t)d.ctx.rank * d.ml * d.N) - d.ctx.bases[d.ctx.local_rank]);
  out.epoch = d.counters[blockIdx.x] + 1;
  iris_gemm_tma_tiles_out<PpCfg, iris_gemm_elem_bf16_t, true, float>(&ta, &tb, out, (const float *)nullptr, d.M, d.N, d.K, sc, iris_gemm_no_wait(), smem,
                                                                     iris_gemm_no_side());
}
template <int RELAXED>
static void pp_policy(const iris_gemm_rs_t *g, const void *a, const void *b, int setup) {
  if (setup) { CK(cudaFuncSetAttribute(k_pp_policy<RELAXED>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)PpCfg::smem_bytes)); return; }
  CUtensorMap ta, tb;
  CK(iris_gemm_tma_map(&ta, a, 0, g->fd.M, g->fd.K, g->fd.K, PpCfg::BM));
  CK(iris_gemm_tma_map_b<PpCfg>(&tb, b, 0, true, g->fd.K, g->fd.N, g->fd.N));
  k_pp_policy<RELAXED><<<g->sms, PpCfg::threads, PpCfg::smem_bytes, stream>>>(g->fd, ta, tb);
  CK(cudaGetLastError());
}
// fused_*: the fused GEMM kernel of variant SIG (bit 0: flags released by the producer's
// warp 1, else by the consumers; bit 1: direct fp32 stores; bit 2: ping-pong core),
// whatever the IRIS_GEMM_RS_* macros make the library's default
static const char *variant_name(int v) {
  return v == 3 ? "fused_coop" : v == 5 ? "fused_ppT" : v == 7 ? "fused_ppO" : v & 4 ? "fused_pp_other" : "fused_coop_other";
}
template <int SIG>
static void fused_sig(iris_gemm_rs_t *g, const void *a, const void *b, int setup) {
  const int e = iris_gemm_rs_launch_fused<iris_gemm_elem_bf16_t, true, SIG>(g, a, b, stream, setup);
  CK((cudaError_t)e);
}
#endif

// local mode (see the top): one rank, one GPU, no NCCL
static int bench_local(int reps) {
#if defined(IRIS_GEMM_HAVE_CORE)
  const std::vector<std::string> only_m = split(getenv("BENCH_M")), only_shape = split(getenv("BENCH_SHAPES"));
  std::vector<std::string> kdiv = split(getenv("BENCH_KDIV"));
  if (kdiv.empty()) kdiv = {"1", "8"};
  const char *csv_path = getenv("BENCH_CSV");
  FILE *csv = csv_path && *csv_path ? fopen(csv_path, "w") : NULL;
  if (csv)
    fprintf(csv, "M,N,K_local,cublas_bf16_ms,cublas_fp32_ms,tma_bf16_ms,tma_fp32_ms,pp_bf16_ms,pp_fp32_ms,fused_coop_ms,fused_ppO_ms,fused_ppT_ms,fused_run_ms,"
                 "default_variant,x_vs_bf16,x_vs_fp32,fused_ppC_ms,pp_map_ms,pp_relaxed_ms\n");
  const long long Ms[] = {1024, 4096, 8192, 16384};
  const long long NKs[][2] = {{8192, 8192}, {8192, 28672}, {5120, 13824}};
  const size_t maxA = (size_t)16384 * 28672, maxB = (size_t)28672 * 8192, maxC = (size_t)16384 * 8192;
  __nv_bfloat16 *a, *b, *c16, *out;
  float *c32;
  CK(cudaMalloc(&a, maxA * 2));
  CK(cudaMalloc(&b, maxB * 2));
  CK(cudaMalloc(&c16, maxC * 2));
  CK(cudaMalloc(&c32, maxC * 4));
  CK(cudaMalloc(&out, maxC * 2));
  k_fill<<<1024, 256, 0, stream>>>(a, maxA, 17u);
  k_fill<<<1024, 256, 0, stream>>>(b, maxB, 5u);
  CK(cudaStreamSynchronize(stream));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, iris_device_ordinal(ctx)));
  printf("# bench_gemm_rs local: %s, one rank; bf16 in, B K x N; ms per op, median of %d; x_vs_*: cuBLAS time / fused GEMM time of the default variant "
         "(%s, >= 0.95 wanted); columns: see the top of bench/bench_gemm_rs.cu\n",
         prop.name, reps, "the plan's: fused_coop or, where it picks the ping-pong core, fused_ppT");
  printf("%6s %6s %6s %12s %12s %9s %9s %9s %9s %11s %10s %10s %10s %9s %9s\n", "M", "N", "K_loc", "cublas_bf16", "cublas_fp32", "tma_bf16", "tma_fp32", "pp_bf16",
         "pp_fp32", "fused_coop", "fused_ppO", "fused_ppT", "fused_run", "x_vs_bf16", "x_vs_fp32");
  for (const std::string &ds : kdiv)
    for (int si = 0; si < 3; si++) {
      if (!wanted(only_shape, std::to_string(si))) continue;
      for (long long M : Ms) {
        if (!wanted(only_m, std::to_string(M))) continue;
        const long long N = NKs[si][0], K = NKs[si][1] / atoll(ds.c_str());
        const float one = 1.f, zero = 0.f;
        const double t16 = time_op([&] { gemm(a, b, c16, M, N, K); }, reps);
        const double t32 = time_op(
            [&] {
              BK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, b, CUDA_R_16BF, (int)N, a, CUDA_R_16BF, (int)K, &zero, c32, CUDA_R_32F,
                              (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            },
            reps);
        iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
        d.M = M; d.N = N; d.K = K; d.path = IRIS_GEMM_PATH_FUSED;
        iris_gemm_rs_t *g;
        if (iris_gemm_rs_create(ctx, &d, &g) != IRIS_SUCCESS) {
          printf("%6lld %6lld %6lld fused: skipped: %s\n", M, N, K, iris_error_detail());
          continue;
        }
        tma_plain<CoopCfg, __nv_bfloat16>(g, a, b, c16, 1);
        tma_plain<CoopCfg, float>(g, a, b, c32, 1);
        tma_plain<PpCfg, __nv_bfloat16>(g, a, b, c16, 1);
        tma_plain<PpCfg, float>(g, a, b, c32, 1);
        fused_sig<3>(g, a, b, 1);
        fused_sig<5>(g, a, b, 1);
        fused_sig<7>(g, a, b, 1);
        fused_sig<4>(g, a, b, 1);
        pp_policy<0>(g, a, b, 1);
        pp_policy<1>(g, a, b, 1);
        const double tp16 = time_op([&] { tma_plain<CoopCfg, __nv_bfloat16>(g, a, b, c16, 0); }, reps);
        const double tp32 = time_op([&] { tma_plain<CoopCfg, float>(g, a, b, c32, 0); }, reps);
        const double tq16 = time_op([&] { tma_plain<PpCfg, __nv_bfloat16>(g, a, b, c16, 0); }, reps);
        const double tq32 = time_op([&] { tma_plain<PpCfg, float>(g, a, b, c32, 0); }, reps);
        const double tco = time_op([&] { fused_sig<3>(g, a, b, 0); }, reps);
        const double tpt = time_op([&] { fused_sig<5>(g, a, b, 0); }, reps);
        const double tpo = time_op([&] { fused_sig<7>(g, a, b, 0); }, reps);
        const double tpc = time_op([&] { fused_sig<4>(g, a, b, 0); }, reps);
        const double tmap = time_op([&] { pp_policy<0>(g, a, b, 0); }, reps);
        const double trel = time_op([&] { pp_policy<1>(g, a, b, 0); }, reps);
        const double tr = time_op([&] { IK(iris_gemm_rs_run(g, a, b, NULL, out, stream)); }, reps);
        // the plan's own choice (its variant on the core iris_gemm_rs_choose_pingpong picked)
        const int dv = g->pingpong ? IRIS_GEMM_RS_PP_VARIANT : IRIS_GEMM_RS_FUSED_VARIANT;
        const double tg = dv == 3 ? tco : dv == 5 ? tpt : dv == 7 ? tpo : time_op([&] { CK((cudaError_t)iris_gemm_rs_launch_fused_any(g, a, b, stream, 0)); }, reps);
        IK(iris_gemm_rs_check(g));
        IK(iris_gemm_rs_destroy(g));
        printf("%6lld %6lld %6lld %12.3f %12.3f %9.3f %9.3f %9.3f %9.3f %11.3f %10.3f %10.3f %10.3f %9.3f %9.3f\n", M, N, K, t16, t32, tp16, tp32, tq16, tq32, tco,
               tpo, tpt, tr, t16 / tg, t32 / tg);
        printf("%6s %6s %6s   fused_ppC %.3f  pp_map %.3f  pp_relaxed %.3f\n", "", "", "", tpc, tmap, trel);
        if (csv)
          fprintf(csv, "%lld,%lld,%lld,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%s,%.3f,%.3f,%.4f,%.4f,%.4f\n", M, N, K, t16, t32, tp16, tp32, tq16, tq32, tco,
                  tpo, tpt, tr, variant_name(dv), t16 / tg, t32 / tg, tpc, tmap, trel);
      }
    }
  if (csv) fclose(csv);
  cudaFree(a); cudaFree(b); cudaFree(c16); cudaFree(c32); cudaFree(out);
  return 0;
#else
  (void)reps;
  printf("SKIP: bench_gemm_rs local: built without the GEMM core (the fused path needs it)\n");
  return 0;
#endif
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const bool local = argc > 1 && !strcmp(argv[1], "local");
  int n = local ? 1 : argc > 1 ? atoi(argv[1]) : 0;
  iris_launch_t L;
  IK(iris_launch_local(n, &L, &rank_));
  if (rank_ < 0) return iris_launch_wait(&L, 3600 * 1000) == IRIS_SUCCESS ? 0 : 1;
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)3 << 30; // largest plan: 16384 x 8192 fp32 partials + bf16 copy (805 MB), plus C and the collective's output
  IK(iris_init(&cfg, &ctx));
  W = iris_world_size(ctx);
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (local) {
    BK(cublasCreate(&blas));
    BK(cublasSetStream(blas, stream));
    const int rc = bench_local(getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 20);
    cublasDestroy(blas);
    IK(iris_finalize(ctx));
    return rc;
  }
  ncclUniqueId id, ids[IRIS_MAX_RANKS];
  if (rank_ == 0) NK(ncclGetUniqueId(&id));
  IK(iris_allgather_host(ctx, &id, ids, sizeof id));
  NK(ncclCommInitRank(&comm, W, ids[0], rank_));
  BK(cublasCreate(&blas));
  BK(cublasSetStream(blas, stream));
  const int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 20;
  const std::vector<std::string> only_m = split(getenv("BENCH_M")), only_shape = split(getenv("BENCH_SHAPES")), only_op = split(getenv("BENCH_OPS"));
  const std::vector<std::string> only_dtype = split(getenv("BENCH_DTYPES"));
  const char *csv_path = getenv("BENCH_CSV");
  FILE *csv = rank_ == 0 && csv_path && *csv_path ? fopen(csv_path, "w") : NULL;
  if (csv) fprintf(csv, "ranks,dtype,op,M,N,K,variant,ms,x_gemm_alone,hidden\n");
  const long long Ms[] = {128, 1024, 4096, 8192, 16384};
  const long long NKs[][2] = {{8192, 8192}, {8192, 28672}, {5120, 13824}};
  // the plans: each path with partials in the output type (the default), the pipelined one
  // also exact (fp32 partials); the fused path moves fp32 partials either way
  const struct { iris_gemm_path_t path; int exact; } variants[] = {
      {IRIS_GEMM_PATH_PIPELINED, 0}, {IRIS_GEMM_PATH_PIPELINED, 1}, {IRIS_GEMM_PATH_UNFUSED, 0}, {IRIS_GEMM_PATH_FUSED, 0}};
  const int nvariants = (int)(sizeof variants / sizeof variants[0]);
  const std::vector<std::string> only_path = split(getenv("BENCH_PATHS"));
  // buffers for the largest shape: A_r 16384 x 28672/W, B_r 28672/W x 8192, C 16384 x 8192
  const size_t maxA = (size_t)16384 * (28672 / W), maxB = (size_t)(28672 / W) * 8192, maxC = (size_t)16384 * 8192;
  __nv_bfloat16 *a, *b, *c, *out;
  CK(cudaMalloc(&a, maxA * 2));
  CK(cudaMalloc(&b, maxB * 2));
  IK(iris_malloc(ctx, maxC * 2, (void **)&c));   // the GEMM's C, the collectives' input
  IK(iris_malloc(ctx, maxC * 2, (void **)&out)); // the collectives' and the plans' output
  k_fill<<<1024, 256, 0, stream>>>(a, maxA, 17u + (unsigned)rank_);
  k_fill<<<1024, 256, 0, stream>>>(b, maxB, 5u + (unsigned)rank_);
  // fp8: e4m3 copies of the same sizes (half the bytes), B N x K/W; per-tensor scales
  unsigned char *a8, *b8;
  // (A's at scales[0], B's at scales[4]: cuBLASLt needs 16-byte aligned scale pointers)
  float *scales, hs[8] = {0.75f + 0.01f * rank_, 0, 0, 0, 0.5f};
  CK(cudaMalloc(&a8, maxA));
  CK(cudaMalloc(&b8, maxB));
  CK(cudaMalloc(&scales, sizeof hs));
  CK(cudaMemcpy(scales, hs, sizeof hs, cudaMemcpyHostToDevice));
  k_fill_fp8<<<1024, 256, 0, stream>>>(a8, maxA, 23u + (unsigned)rank_);
  k_fill_fp8<<<1024, 256, 0, stream>>>(b8, maxB, 11u + (unsigned)rank_);
  lt8.ws_bytes = (size_t)32 << 20;
  BK(cublasLtCreate(&lt8.lt));
  CK(cudaMalloc(&lt8.ws, lt8.ws_bytes));
  CK(cudaStreamSynchronize(stream));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, iris_device_ordinal(ctx)));
  if (rank_ == 0)
    printf("# bench_gemm_rs: %d ranks, %s, bf16 and fp8 (e4m3 in, bf16 out), K sharded over the ranks; ms per op, max over ranks of per-rank medians of %d\n", W,
           prop.name, reps);
  if (rank_ == 0) printf("%-4s %6s %6s %6s %-3s %-16s %9s %8s %7s\n", "type", "M", "N", "K", "op", "variant", "ms", "x_alone", "hidden");
  for (int fp8 = 0; fp8 < 2; fp8++) {
    const char *dtn = fp8 ? "fp8" : "bf16";
    if (!wanted(only_dtype, dtn)) continue;
    // the local GEMM (bf16: cuBLAS, B K/W x N; fp8: cuBLASLt, B N x K/W, scales, bf16 out)
    auto local_gemm = [&](long long M, long long N, long long kl) {
      if (fp8) fp8_gemm(a8, b8, scales, scales + 4, c, M, N, kl);
      else gemm(a, b, c, M, N, kl);
    };
    for (int si = 0; si < 3; si++) {
      if (!wanted(only_shape, std::to_string(si))) continue;
      for (long long M : Ms) {
        if (!wanted(only_m, std::to_string(M))) continue;
        const long long N = NKs[si][0], K = NKs[si][1], kl = K / W;
        const double alone = time_op([&] { local_gemm(M, N, kl); }, reps);
        for (int opi = 0; opi < 2; opi++) {
          const bool ar = opi == 1;
          const char *opn = ar ? "ar" : "rs";
          if (!wanted(only_op, opn)) continue;
          const size_t cnt = ar ? (size_t)(M * N) : (size_t)(M / W * N);
          auto row = [&](const std::string &name, double ms, double seq) {
            const double hidden = seq > alone ? (seq - ms) / (seq - alone) : 0;
            if (rank_ == 0) {
              printf("%-4s %6lld %6lld %6lld %-3s %-16s %9.3f %8.2f %7.2f\n", dtn, M, N, K, opn, name.c_str(), ms, ms / alone, hidden);
              if (csv) fprintf(csv, "%d,%s,%s,%lld,%lld,%lld,%s,%.4f,%.3f,%.3f\n", W, dtn, opn, M, N, K, name.c_str(), ms, ms / alone, hidden);
            }
          };
          const double seq = time_op(
              [&] {
                local_gemm(M, N, kl);
                if (ar) NK(ncclAllReduce(c, out, cnt, ncclBfloat16, ncclSum, comm, stream));
                else NK(ncclReduceScatter(c, out, cnt, ncclBfloat16, ncclSum, comm, stream));
              },
              reps);
          const double iseq = time_op(
              [&] {
                local_gemm(M, N, kl);
                if (ar) IK(iris_all_reduce(ctx, c, out, cnt, IRIS_BFLOAT16, IRIS_SUM, stream));
                else IK(iris_reduce_scatter(ctx, c, out, cnt, IRIS_BFLOAT16, IRIS_SUM, stream));
              },
              reps);
          row("gemm_alone", alone, seq);
          row(ar ? "cublas+nccl_ar" : "cublas+nccl_rs", seq, seq);
          row(ar ? "cublas+iris_ar" : "cublas+iris_rs", iseq, seq);
          for (int vi = 0; vi < nvariants; vi++) {
            const iris_gemm_path_t p = variants[vi].path;
            iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
            d.op = ar ? IRIS_GEMM_ALL_REDUCE : IRIS_GEMM_REDUCE_SCATTER;
            d.M = M; d.N = N; d.K = K; d.path = p; d.exact = variants[vi].exact;
            if (fp8) { d.a_type = IRIS_FLOAT8_E4M3; d.b_transposed = 1; }
            if (!wanted(only_path, iris_gemm_path_name(p))) continue;
            const std::string name = std::string(opn) + "/" + iris_gemm_path_name(p) + (d.exact && p != IRIS_GEMM_PATH_FUSED ? "-exact" : "");
            iris_gemm_rs_t *g;
            if (iris_gemm_rs_create(ctx, &d, &g) != IRIS_SUCCESS) {
              if (rank_ == 0) printf("%-4s %6lld %6lld %6lld %-3s %-16s skipped: %s\n", dtn, M, N, K, opn, name.c_str(), iris_error_detail());
              continue;
            }
            const double t = time_op(
                [&] {
                  if (fp8) IK(iris_gemm_rs_run_scaled(g, a8, b8, scales, scales + 4, NULL, out, stream));
                  else IK(iris_gemm_rs_run(g, a, b, NULL, out, stream));
                },
                reps);
            row(name, t, seq);
            IK(iris_gemm_rs_destroy(g));
          }
          if (rank_ == 0) {
            iris_gemm_rs_desc_t d = IRIS_GEMM_RS_DESC_INIT;
            d.M = M; d.N = N; d.K = K;
            printf("# AUTO picks %s here\n", iris_gemm_path_name(iris_gemm_rs_choose_path(&d, W)));
          }
        }
      }
    }
  }
  if (csv) fclose(csv);
  cudaFree(a); cudaFree(b); cudaFree(a8); cudaFree(b8); cudaFree(scales); cudaFree(lt8.ws);
  cublasLtDestroy(lt8.lt);
  ncclCommDestroy(comm);
  cublasDestroy(blas);
  IK(iris_finalize(ctx));
  return 0;
}
