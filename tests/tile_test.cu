// Tile-level building blocks (iris_tile_* in iris_collectives.h) called from inside a
// kernel: all-reduce, all-gather (both dims), reduce-scatter, all-to-all and sync, on
// shapes with partial edge tiles, a persistent grid smaller than the tile count, fresh
// data for every one of many iterations (the tile epochs are reused), bit-exact against
// a float64 host reference; fp32, bf16, fp8 (e4m3, e5m2) and uint8 elements, AVG as
// well as SUM.
//   tile_test N        N processes (iris_launch_local), one per GPU
#define IRIS_IMPLEMENTATION
#include "../iris_collectives.h"
#include "test_util.h"
#include "coll_values.h"

#include <stdlib.h>
#include <unistd.h>
#include <vector>

enum { T_AR, T_AG0, T_AG1, T_RS, T_A2A };
static const char *op_names[] = {"all_reduce", "all_gather dim 0", "all_gather dim 1", "reduce_scatter", "all_to_all"};

// A tile outside the flags' [0, num_tiles): every operation returns false in every thread
// and touches nothing (it read and wrote the words past the flags, here and on every peer);
// so does an all-gather along dim 2 (it synced and put every rank's tile in one place).
__global__ void k_bad_tile(iris_device_ctx_t ctx, iris_tile_flags_t f, iris_view2d_t src, iris_view2d_t dst, unsigned *trues) {
  const int bad[2] = {f.num_tiles, -1};
  for (int k = 0; k < 2; k++) {
    const int t = bad[k];
    unsigned got = iris_tile_sync(ctx, f, t) + iris_tile_all_reduce<float, IRIS_SUM>(ctx, f, t, src, dst, 16, 16) +
                   iris_tile_all_gather<float>(ctx, f, t, src, dst, 0, 16, 16) + iris_tile_reduce_scatter<float, IRIS_SUM>(ctx, f, t, src, dst, 16, 16) +
                   iris_tile_all_to_all<float>(ctx, f, t, src, dst, 8, 16, 16);
    if (got) atomicAdd(trues, got);
  }
  if (iris_tile_all_gather<float>(ctx, f, 0, src, dst, 2, 16, 16)) atomicAdd(trues, 1u); // dim neither 0 nor 1
}
// A block of fewer threads than ranks (thread r signals and waits for rank r): false, nothing touched.
__global__ void k_small_block(iris_device_ctx_t ctx, iris_tile_flags_t f, unsigned *trues) {
  if (iris_tile_sync(ctx, f, 0)) atomicAdd(trues, 1u);
}
template <typename T, int OP>
__global__ void k_tiles(iris_device_ctx_t ctx, iris_tile_flags_t f, int op, iris_view2d_t src, iris_view2d_t dst, long long npr, int bm, int bn, int ntiles,
                        unsigned *fails) {
  bool ok = true;
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) { // persistent: fewer blocks than tiles
    switch (op) {
    case T_AR: ok &= iris_tile_all_reduce<T, OP>(ctx, f, t, src, dst, bm, bn); break;
    case T_AG0: ok &= iris_tile_all_gather<T>(ctx, f, t, src, dst, 0, bm, bn); break;
    case T_AG1: ok &= iris_tile_all_gather<T>(ctx, f, t, src, dst, 1, bm, bn); break;
    case T_RS: ok &= iris_tile_reduce_scatter<T, OP>(ctx, f, t, src, dst, bm, bn); break;
    default: ok &= iris_tile_all_to_all<T>(ctx, f, t, src, dst, npr, bm, bn); break;
    }
  }
  if (!ok && threadIdx.x == 0) atomicAdd(fails, 1u);
}

// one operation, `iters` times with new data, checked every time (OP: the reduction of
// all_reduce and reduce_scatter)
template <typename T, int OP = IRIS_SUM>
static bool run_op(Suite &s, int type, int op, iris_tile_flags_t f, char *heap_a, char *heap_b, char *plain, int iters) {
  const int W = s.world, me = s.rank, bm = 32, bn = 64, es = (int)sizeof(T);
  const long long M = 257, N = 190, npr = 70; // odd: partial edge tiles
  // views per operation: src rows x cols, dst rows x cols
  long long sr = M, sc = op == T_A2A ? W * npr : N, dr = op == T_AG0 ? W * M : M, dc = op == T_AG1 ? W * N : (op == T_A2A ? W * npr : N);
  const bool src_heap = op != T_AG0 && op != T_AG1, dst_heap = op == T_AG0 || op == T_AG1;
  char *sp = src_heap ? heap_a : plain, *dp = dst_heap ? heap_b : plain + ((size_t)64 << 20);
  iris_view2d_t src = iris_view2d(sp, sr, sc, sc + 3, es), dst = iris_view2d(dp, dr, dc, dc + 5, es); // padded strides
  iris_view2d_t grid = op == T_A2A ? iris_view2d(sp, M, npr, sc + 3, es) : src;
  const int ntiles = (int)iris_view_num_tiles(grid, bm, bn);
  unsigned *fails;
  CK(cudaMalloc(&fails, sizeof *fails));
  bool ok = ntiles <= f.num_tiles;
  std::vector<unsigned char> h((size_t)dr * (dc + 5) * es);
  for (int it = 0; it < iters && ok; it++) {
    const int call = 1000 * op + it;
    fill(sp, type, (size_t)sr * (sc + 3), s.seed, me, call); // element j of the padded buffer
    CK(cudaMemset(dp, 0xff, (size_t)dr * (dc + 5) * es));
    CK(cudaMemset(fails, 0, sizeof *fails));
    CK(cudaDeviceSynchronize());
    if (me == it % W && it % 5 == 0) usleep(10000); // skew
    if (!barrier(s)) return false; // the poisoned dst of every rank before anyone pushes
    k_tiles<T, OP><<<7, 256>>>(iris_device_context(s.ctx), f, op, src, dst, npr, bm, bn, ntiles, fails);
    CK(cudaGetLastError());
    if (!barrier(s)) return false;
    unsigned nf = 0;
    CK(cudaMemcpy(&nf, fails, sizeof nf, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h.data(), dp, h.size(), cudaMemcpyDeviceToHost));
    if (nf) { fprintf(stderr, "rank %d: %s: %u blocks reported a timed-out wait\n", me, op_names[op], nf); ok = false; }
    for (long long r = 0; r < dr && ok; r++)
      for (long long c = 0; c < dc && ok; c++) {
        unsigned long long got = get_bits(h, type, (size_t)(r * (dc + 5) + c)), want, b[IRIS_MAX_RANKS];
        bool written = true;
        switch (op) {
        case T_AR:
          for (int q = 0; q < W; q++) b[q] = encode(type, input_hash(s.seed, q, (size_t)(r * (sc + 3) + c), call));
          want = reduce_bits(type, OP, b, W);
          break;
        case T_RS: {
          long long tm = r / bm, tn = c / bn;
          written = (tm * iris_view_tiles_n(src, bn) + tn) % W == me;
          for (int q = 0; q < W; q++) b[q] = encode(type, input_hash(s.seed, q, (size_t)(r * (sc + 3) + c), call));
          want = reduce_bits(type, OP, b, W);
          break;
        }
        case T_AG0: want = encode(type, input_hash(s.seed, (int)(r / M), (size_t)((r % M) * (sc + 3) + c), call)); break;
        case T_AG1: want = encode(type, input_hash(s.seed, (int)(c / N), (size_t)(r * (sc + 3) + c % N), call)); break;
        default: want = encode(type, input_hash(s.seed, (int)(c / npr), (size_t)(r * (sc + 3) + me * npr + c % npr), call)); break;
        }
        size_t mask = es == 8 ? ~0ULL : ((1ULL << (8 * es)) - 1);
        if (!written) want = mask; // untouched: still poison
        if ((got & mask) != (want & mask)) {
          fprintf(stderr, "rank %d: tile %s iteration %d: (%lld, %lld) is %llx, want %llx\n", me, op_names[op], it, r, c, got & mask, want & mask);
          ok = false;
        }
      }
  }
  cudaFree(fails);
  return ok;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n = argc > 1 ? atoi(argv[1]) : 2, rank;
  iris_launch_t L;
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("FAIL: [tile w=%d] launch: %s\n", n, iris_error_detail()); return 1; }
  if (rank < 0) {
    iris_status_t st = iris_launch_wait(&L, 600000);
    printf("%s: [tile w=%d] every rank exits cleanly%s%s\n", st == IRIS_SUCCESS ? "PASS" : "FAIL", n, st == IRIS_SUCCESS ? "" : ": ",
           st == IRIS_SUCCESS ? "" : iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  Suite s = {};
  s.rank = rank;
  s.world = n;
  s.tag = "tile w=" + std::to_string(n);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)512 << 20;
  char *a, *b, *plain;
  iris_tile_flags_t f;
  if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS || iris_malloc(s.ctx, (size_t)64 << 20, (void **)&a) != IRIS_SUCCESS ||
      iris_malloc(s.ctx, (size_t)64 << 20, (void **)&b) != IRIS_SUCCESS || iris_tile_flags_create(s.ctx, 1024, &f) != IRIS_SUCCESS ||
      cudaMalloc(&plain, (size_t)128 << 20) != cudaSuccess) {
    fprintf(stderr, "rank %d: setup: %s\n", rank, iris_error_detail());
    if (rank == 0) printf("FAIL: [%s] setup: %s\n", s.tag.c_str(), iris_error_detail());
    return 1;
  }
  uint64_t mine = mix((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)), all[IRIS_MAX_RANKS];
  iris_allgather_host(s.ctx, &mine, all, sizeof mine);
  s.seed = all[0];
  if (rank == 0) printf("# [%s] seed %llu\n", s.tag.c_str(), (unsigned long long)s.seed);
  for (int op = T_AR; op <= T_A2A; op++) {
    char name[128];
    bool ok = run_op<float>(s, IRIS_FLOAT32, op, f, a, b, plain, 20);
    snprintf(name, sizeof name, "iris_tile_%s fp32: 257x190 (edge tiles), 7 blocks for all tiles, 20 iterations, exact", op_names[op]);
    report(s, name, ok);
    ok = run_op<iris_bf16_t>(s, IRIS_BFLOAT16, op, f, a, b, plain, 10);
    snprintf(name, sizeof name, "iris_tile_%s bf16: same, exact", op_names[op]);
    report(s, name, ok);
    // the 1-byte types (fp8 and uint8 reductions in fp32 / wrapping, AVG), and fp32 AVG
    const bool red = op == T_AR || op == T_RS;
    ok = run_op<iris_fp8_e4m3_t, IRIS_AVG>(s, IRIS_FLOAT8_E4M3, op, f, a, b, plain, 5) && run_op<iris_fp8_e5m2_t, IRIS_SUM>(s, IRIS_FLOAT8_E5M2, op, f, a, b, plain, 5) &&
         run_op<unsigned char, IRIS_AVG>(s, IRIS_UINT8, op, f, a, b, plain, 5) && (!red || run_op<float, IRIS_AVG>(s, IRIS_FLOAT32, op, f, a, b, plain, 5));
    snprintf(name, sizeof name, "iris_tile_%s fp8 e4m3%s, fp8 e5m2%s, uint8%s%s: same, exact", op_names[op], red ? " avg" : "", red ? " sum" : "", red ? " avg" : "",
             red ? ", fp32 avg" : "");
    report(s, name, ok);
  }
  {
    // tiles outside the flags: false, nothing touched (the flags' block and the heap around it stay as they were)
    const size_t fbytes = (size_t)f.num_tiles * (IRIS_MAX_RANKS * sizeof(unsigned long long) + sizeof(unsigned));
    std::vector<unsigned char> before(4096 + fbytes + 4096), after(4096 + fbytes + 4096); // the flags' block and 4 KiB of heap either side
    const char *from = (const char *)f.flags - 4096;
    unsigned *trues = NULL, h = 1;
    bool ok = cudaMalloc(&trues, sizeof *trues) == cudaSuccess && cudaMemset(trues, 0, sizeof *trues) == cudaSuccess && iris_barrier(s.ctx) == IRIS_SUCCESS &&
              cudaMemcpy(before.data(), from, before.size(), cudaMemcpyDeviceToHost) == cudaSuccess;
    iris_view2d_t v = iris_view2d(a, 64, 64, 64, 4), w = iris_view2d(plain, 64 * s.world, 64, 64, 4);
    if (ok) k_bad_tile<<<1, 128>>>(iris_device_context(s.ctx), f, v, w, trues);
    ok = ok && cudaDeviceSynchronize() == cudaSuccess && iris_barrier(s.ctx) == IRIS_SUCCESS &&
         cudaMemcpy(&h, trues, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess && cudaMemcpy(after.data(), from, after.size(), cudaMemcpyDeviceToHost) == cudaSuccess;
    ok = ok && h == 0 && before == after;
    cudaFree(trues);
    report(s, "iris_tile_* with a tile outside [0, num_tiles) (num_tiles, -1), all_gather along dim 2: false in every thread, the flags and 4 KiB of heap either side untouched on every rank", ok);
  }
  {
    // bad counts: the same verdict on every rank, nothing allocated (the heaps stay alike)
    const size_t used = iris_heap_used(s.ctx);
    iris_tile_flags_t g;
    bool ok = iris_tile_flags_create(s.ctx, 0, &g) == IRIS_ERROR_INVALID_ARGUMENT && !g.flags;
    if (s.world > 1) { // one rank differs
      ok = ok && iris_tile_flags_create(s.ctx, s.rank == s.world - 1 ? 17 : 16, &g) == IRIS_ERROR_MISMATCH && !g.flags && strstr(iris_error_detail(), "num_tiles");
      ok = ok && iris_tile_flags_create(s.ctx, s.rank == 0 ? 0 : 8, &g) == IRIS_ERROR_MISMATCH && !g.flags;
    }
    ok = ok && iris_heap_used(s.ctx) == used;
    report(s, "iris_tile_flags_create: 0 tiles (INVALID_ARGUMENT), a count that differs on one rank or 0 on one rank only (IRIS_ERROR_MISMATCH): every rank alike, heap unchanged", ok);
  }
  if (s.world > 1) { // last: before, the sync passed without the last rank (and left tile 0's epochs apart)
    const size_t fbytes = (size_t)f.num_tiles * (IRIS_MAX_RANKS * sizeof(unsigned long long) + sizeof(unsigned));
    std::vector<unsigned char> before(fbytes), after(fbytes);
    unsigned *trues = NULL, h = 1;
    bool ok = cudaMalloc(&trues, sizeof *trues) == cudaSuccess && cudaMemset(trues, 0, sizeof *trues) == cudaSuccess && iris_barrier(s.ctx) == IRIS_SUCCESS &&
              cudaMemcpy(before.data(), f.flags, fbytes, cudaMemcpyDeviceToHost) == cudaSuccess;
    if (ok) k_small_block<<<1, s.world - 1>>>(iris_device_context(s.ctx), f, trues);
    ok = ok && cudaDeviceSynchronize() == cudaSuccess && iris_barrier(s.ctx) == IRIS_SUCCESS && cudaMemcpy(&h, trues, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess &&
         cudaMemcpy(after.data(), f.flags, fbytes, cudaMemcpyDeviceToHost) == cudaSuccess;
    ok = ok && h == 0 && before == after;
    cudaFree(trues);
    report(s, "iris_tile_sync in a block of world - 1 threads: false, the flags untouched on every rank", ok);
  }
  cudaFree(plain);
  int rc = s.failed ? 1 : 0;
  if (iris_tile_flags_destroy(s.ctx, &f) != IRIS_SUCCESS || iris_finalize(s.ctx) != IRIS_SUCCESS) rc = 1;
  return rc;
}
