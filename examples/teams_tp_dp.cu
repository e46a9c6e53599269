// Teams: tensor parallelism x data parallelism on one heap (docs/teams.md).
//
// The world (4 ranks: TP 2 x DP 2; any even world works) is split as a grid: the TP team
// is a row (consecutive ranks), the DP team a column. A fused kernel sums its partial
// activations inside the TP team from the device (each rank pushes its part into every TP
// peer, a block-level team barrier, then each adds what arrived); then the host sums the
// gradients over the DP team with a team all-reduce, on its own stream.
//
//   make build/teams_tp_dp && ./build/teams_tp_dp [ranks]   (default: one per GPU)
#define IRIS_IMPLEMENTATION
#define IRIS_COLL_TYPES (1u << IRIS_FLOAT32)
#define IRIS_COLL_OPS (1u << IRIS_SUM)
#include "../iris_collectives.h"
#include <stdio.h>
#include <stdlib.h>

#define N 4096 // activations per rank

// One block. parts: [TP size][N] on the heap; member p of the TP team writes its partial
// sums into row p of every member's copy. out: the sum over the TP team.
__global__ void tp_sum(iris_device_ctx_t ctx, iris_team_t tp, float *parts, const float *mine, float *out, int *ok) {
  for (int p = 0; p < tp.size; p++) // push my partials into row tp.rank of every member
    iris_team_put_bulk(ctx, tp, parts + (size_t)tp.rank * N, mine, N * sizeof(float), p, threadIdx.x, blockDim.x);
  // every member's rows have arrived (release/acquire at system scope, the whole block)
  if (!iris_team_barrier(iris_coop_block(), ctx, tp, 0)) {
    if (threadIdx.x == 0) *ok = 0; // a member never came: the wait bound ran out
    return;
  }
  for (int i = threadIdx.x; i < N; i += blockDim.x) {
    float s = 0;
    for (int p = 0; p < tp.size; p++) s += parts[(size_t)p * N + i]; // member order: the same sum on every member
    out[i] = s;
  }
  // the rows may be overwritten by the next call only after every member has read them
  iris_team_barrier(iris_coop_block(), ctx, tp, 1);
}

static int run(void) {
  iris_t *ctx;
  iris_team_t w, tp, dp;
  if (iris_init(NULL, &ctx) != IRIS_SUCCESS) { printf("init: %s\n", iris_error_detail()); return 1; }
  const int me = iris_rank(ctx), world = iris_world_size(ctx);
  float *parts, *mine, *out, *grad;
  int *ok, h_ok = 1;
  if (iris_team_get(ctx, IRIS_TEAM_WORLD, &w) != IRIS_SUCCESS || iris_team_split_2d(ctx, &w, 2, &tp, &dp) != IRIS_SUCCESS) {
    printf("rank %d: teams: %s\n", me, iris_error_detail());
    return 1;
  }
  if (iris_malloc(ctx, 2 * N * sizeof(float), (void **)&parts) != IRIS_SUCCESS || // same order on every rank
      iris_malloc(ctx, N * sizeof(float), (void **)&grad) != IRIS_SUCCESS) {
    printf("rank %d: iris_malloc: %s\n", me, iris_error_detail());
    return 1;
  }
  float h[N];
  for (int i = 0; i < N; i++) h[i] = (float)(me + 1); // rank r's partials: r + 1
  cudaStream_t s_tp, s_dp;
  if (cudaMalloc(&mine, N * sizeof(float)) != cudaSuccess || cudaMalloc(&out, N * sizeof(float)) != cudaSuccess || cudaMalloc(&ok, sizeof(int)) != cudaSuccess ||
      cudaMemcpy(ok, &h_ok, sizeof h_ok, cudaMemcpyHostToDevice) != cudaSuccess || cudaMemcpy(mine, h, N * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(grad, h, N * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess || cudaStreamCreateWithFlags(&s_tp, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s_dp, cudaStreamNonBlocking) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) { // the copies above ran on the legacy stream, which s_tp and s_dp do not wait for
    printf("rank %d: CUDA setup: %s\n", me, cudaGetErrorString(cudaGetLastError()));
    return 1;
  }

  // the TP sum from the device, the DP all-reduce from the host: two streams at once
  tp_sum<<<1, 256, 0, s_tp>>>(iris_device_context(ctx), tp, parts, mine, out, ok);
  const cudaError_t launched = cudaGetLastError();
  iris_status_t st = iris_all_reduce_team(ctx, &dp, grad, grad, N, IRIS_FLOAT32, IRIS_SUM, s_dp, NULL);
  const cudaError_t ran = cudaDeviceSynchronize();
  if (st == IRIS_SUCCESS) st = iris_team_check(ctx, &dp);

  float tp_want = 0, dp_want = 0, got_tp = 0, got_dp = 0;
  for (int p = 0; p < tp.size; p++) tp_want += (float)(iris_team_world_rank(&tp, p) + 1);
  for (int p = 0; p < dp.size; p++) dp_want += (float)(iris_team_world_rank(&dp, p) + 1);
  const int copied = cudaMemcpy(&got_tp, out + N - 1, sizeof got_tp, cudaMemcpyDeviceToHost) == cudaSuccess &&
                     cudaMemcpy(&got_dp, grad + N - 1, sizeof got_dp, cudaMemcpyDeviceToHost) == cudaSuccess &&
                     cudaMemcpy(&h_ok, ok, sizeof h_ok, cudaMemcpyDeviceToHost) == cudaSuccess;
  const int good = launched == cudaSuccess && ran == cudaSuccess && copied && st == IRIS_SUCCESS && h_ok && got_tp == tp_want && got_dp == dp_want;
  printf("rank %d of %d: TP team %d/%d sum %.0f (want %.0f), DP team %d/%d sum %.0f (want %.0f): %s\n", me, world, tp.rank, tp.size, got_tp, tp_want, dp.rank,
         dp.size, got_dp, dp_want,
         good ? "ok" : st != IRIS_SUCCESS ? iris_error_detail() : !h_ok ? "a TP team barrier timed out" : launched != cudaSuccess || ran != cudaSuccess || !copied ? "a CUDA call failed" : "wrong sum");
  // collective teardown: a failure here is reported too
  if ((st = iris_team_destroy(ctx, &tp)) != IRIS_SUCCESS || (st = iris_team_destroy(ctx, &dp)) != IRIS_SUCCESS || (st = iris_finalize(ctx)) != IRIS_SUCCESS) {
    printf("rank %d: teardown: %s\n", me, iris_error_detail());
    return 1;
  }
  return good ? 0 : 1;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 0, rank; // 0: one rank per visible GPU
  iris_launch_t L;
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("launch: %s\n", iris_error_detail()); return 1; }
  if (rank >= 0) return run();
  return iris_launch_wait(&L, 120000) == IRIS_SUCCESS ? 0 : 1;
}
