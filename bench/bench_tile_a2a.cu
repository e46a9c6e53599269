// bench_tile_a2a: the tile-level all-to-all (iris_tile_all_to_all) called from inside a
// persistent kernel, swept over (M, N_per_rank) from 128 x 64 to 16384 x 256, bf16:
// each rank owns N_per_rank columns of an (M, W*N_per_rank) matrix. Reports time (CUDA
// events around the kernel, 3 warm-ups, median of 20, max over ranks) and GB/s as bytes
// per rank / time; with BENCH_CSV writes CSV, with BENCH_PNG a scatter plot of GB/s
// against bytes per rank (python3 + matplotlib on the GPU host).
//   bench_tile_a2a [ranks]
#define IRIS_IMPLEMENTATION
#include "../iris_collectives.h"
#include "bench_util.h"

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string>
#include <vector>


enum { BM = 32 };

__global__ void k_a2a(iris_device_ctx_t ctx, iris_tile_flags_t f, iris_view2d_t src, iris_view2d_t dst, long long npr, int bn, int ntiles) {
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) iris_tile_all_to_all<iris_bf16_t>(ctx, f, t, src, dst, npr, BM, bn);
}
__global__ void k_fill(unsigned short *p, size_t n, int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (unsigned short)(0x3f80 + ((i * 31 + rank) & 0x7f));
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 0, rank;
  iris_launch_t L;
  setvbuf(stdout, NULL, _IOLBF, 0);
  IK(iris_launch_local(n, &L, &rank));
  if (rank < 0) return iris_launch_wait(&L, 900000) == IRIS_SUCCESS ? 0 : 1;
  iris_t *ctx;
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)1 << 30;
  IK(iris_init(&cfg, &ctx));
  const int W = iris_world_size(ctx);
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, iris_device_ordinal(ctx)));
  const size_t max_bytes = (size_t)16384 * 256 * W * 2;
  unsigned short *src, *dst;
  iris_tile_flags_t f;
  IK(iris_malloc(ctx, max_bytes, (void **)&src));
  CK(cudaMalloc(&dst, max_bytes));
  IK(iris_tile_flags_create(ctx, 16384 / BM, &f));
  k_fill<<<256, 256>>>(src, max_bytes / 2, rank);
  IK(iris_barrier(ctx));
  FILE *csv = NULL;
  const char *csv_path = getenv("BENCH_CSV"), *png = getenv("BENCH_PNG");
  if (rank == 0) {
    if (csv_path) csv = fopen(csv_path, "w");
    if (csv) fprintf(csv, "M,N_per_rank,ranks,bytes_per_rank,us,GBps\n");
    printf("# bench_tile_a2a: %d ranks, bf16, tiles %d x N_per_rank, %d CTAs x 256 threads\n", W, BM, sms);
    printf("%8s %12s %14s %10s %10s\n", "M", "N_per_rank", "bytes/rank", "us", "GB/s");
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (long long M = 128; M <= 16384; M *= 2)
    for (long long npr : {64LL, 128LL, 256LL}) {
      const long long cols = W * npr;
      iris_view2d_t sv = iris_view2d(src, M, cols, cols, 2), dv = iris_view2d(dst, M, cols, cols, 2);
      const int ntiles = (int)iris_view_num_tiles(iris_view2d(src, M, npr, cols, 2), BM, (int)npr);
      const int grid = std::min(ntiles, sms);
      std::vector<float> t;
      for (int i = 0; i < 23; i++) {
        IK(iris_barrier(ctx)); // ranks start together
        CK(cudaEventRecord(a));
        k_a2a<<<grid, 256>>>(iris_device_context(ctx), f, sv, dv, npr, (int)npr, ntiles);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (i >= 3) t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      float med = t[t.size() / 2], all[IRIS_MAX_RANKS];
      IK(iris_allgather_host(ctx, &med, all, sizeof med));
      float worst = *std::max_element(all, all + W);
      const double bytes = (double)M * cols * 2; // each rank's whole (M, W*npr) input
      if (rank == 0) {
        printf("%8lld %12lld %14.0f %10.2f %10.1f\n", M, npr, bytes, worst * 1e3, bytes / (worst * 1e-3) / 1e9);
        if (csv) fprintf(csv, "%lld,%lld,%d,%.0f,%.3f,%.2f\n", M, npr, W, bytes, worst * 1e3, bytes / (worst * 1e-3) / 1e9);
      }
    }
  if (rank == 0 && csv) {
    fclose(csv);
    if (png) {
      std::string cmd = std::string("python3 - <<'EOF'\nimport csv, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n") +
                        "rows = list(csv.DictReader(open('" + csv_path + "')))\nfig, ax = plt.subplots(figsize=(7, 4.5))\n" +
                        "for n in sorted(set(r['N_per_rank'] for r in rows), key=int):\n" +
                        "    s = [r for r in rows if r['N_per_rank'] == n]\n" +
                        "    ax.scatter([float(r['bytes_per_rank']) for r in s], [float(r['GBps']) for r in s], label='N_per_rank ' + n)\n" +
                        "ax.set_xscale('log'); ax.set_xlabel('bytes per rank'); ax.set_ylabel('GB/s (bytes per rank / time)')\n" +
                        "ax.set_title('iris_tile_all_to_all, bf16, ' + rows[0]['ranks'] + ' ranks'); ax.legend(); ax.grid(True, alpha=0.3)\n" +
                        "fig.savefig('" + png + "', dpi=120, bbox_inches='tight')\nEOF\n";
      if (system(cmd.c_str()) != 0) printf("# note: no plot (python3 or matplotlib failed)\n");
    }
  } else if (csv) {
    fclose(csv);
  }
  IK(iris_tile_flags_destroy(ctx, &f));
  CK(cudaFree(dst));
  IK(iris_finalize(ctx));
  return 0;
}
