// tools/peer_ceiling.cu — how fast one GPU can move bytes to another over their link, one
// direction: the copy engine (cudaMemcpyPeerAsync), SM stores into the peer (push) and SM
// loads from it (pull), at 64 MB and 256 MB, several grid sizes. The ceiling a 2-rank
// broadcast (one stream over one link direction) can reach; docs/tuning.md, "Broadcast at
// 2 ranks". Needs 2 GPUs with peer access. Best and mean of 10 timed copies after 20 warm-up.
//   nvcc -O2 -arch=sm_90 tools/peer_ceiling.cu -o build/peer_ceiling && build/peer_ceiling
#include <cuda_runtime.h>
#include <stdio.h>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

// 16-byte loads, four in flight per thread, as iris_copy_bytes moves bulk data
__global__ void copy16(uint4 *dst, const uint4 *src, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t s = (size_t)gridDim.x * blockDim.x;
  for (; i + 3 * s < n; i += 4 * s) {
    const uint4 a = src[i], b = src[i + s], c = src[i + 2 * s], d = src[i + 3 * s];
    dst[i] = a, dst[i + s] = b, dst[i + 2 * s] = c, dst[i + 3 * s] = d;
  }
  for (; i < n; i += s) dst[i] = src[i];
}

enum { CE, PUSH, PULL };
static const char *const way_name[] = {"copy engine", "SM push", "SM pull"};

// one copy of `bytes` from GPU 0's b0 into GPU 1's b1 the given way, timed on the issuing GPU
static int time_copy(int way, int ctas, void *b0, void *b1, size_t bytes, float *ms) {
  const int dev = way == PULL ? 1 : 0; // the pull runs on the receiving GPU
  cudaStream_t s;
  cudaEvent_t e0, e1;
  CK(cudaSetDevice(dev));
  CK(cudaStreamCreate(&s));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0, s));
  if (way == CE) CK(cudaMemcpyPeerAsync(b1, 1, b0, 0, bytes, s));
  else copy16<<<ctas, 512, 0, s>>>((uint4 *)b1, (const uint4 *)b0, bytes / 16);
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  CK(cudaEventElapsedTime(ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaStreamDestroy(s));
  return 0;
}

int main() {
  const size_t sizes[] = {64ull << 20, 256ull << 20};
  const struct { int way, ctas; } runs[] = {{CE, 0}, {PUSH, 32}, {PUSH, 64}, {PUSH, 132}, {PUSH, 264}, {PULL, 64}, {PULL, 132}, {PULL, 264}};
  int n = 0, ok01 = 0, ok10 = 0;
  void *b0 = NULL, *b1 = NULL;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) {
    printf("SKIP: peer_ceiling needs 2 GPUs (%d visible)\n", n);
    return 0;
  }
  CK(cudaDeviceCanAccessPeer(&ok01, 0, 1));
  CK(cudaDeviceCanAccessPeer(&ok10, 1, 0));
  if (!ok01 || !ok10) {
    printf("SKIP: GPUs 0 and 1 have no peer access\n");
    return 0;
  }
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  CK(cudaMalloc(&b0, sizes[1]));
  CK(cudaMemset(b0, 0x5a, sizes[1]));
  CK(cudaSetDevice(1));
  CK(cudaDeviceEnablePeerAccess(0, 0));
  CK(cudaMalloc(&b1, sizes[1]));
  printf("# GPU 0 -> GPU 1, one direction; best / mean of 10 after 20 warm-up; GB/s = 1e9 bytes per second of the best\n");
  for (size_t bytes : sizes)
    for (const auto &r : runs) {
      float best = 1e30f, sum = 0.f, ms = 0.f;
      for (int i = 0; i < 30; i++) {
        if (time_copy(r.way, r.ctas, b0, b1, bytes, &ms)) return 1;
        if (i < 20) continue;
        best = ms < best ? ms : best;
        sum += ms;
      }
      printf("%4zu MB  %-11s  CTAs %3d  best %8.1f us (%4.0f GB/s)  mean %8.1f us\n", bytes >> 20, way_name[r.way], r.ctas, best * 1e3, bytes / (best * 1e-3) / 1e9,
             sum / 10 * 1e3);
    }
  return 0;
}
