// tools/copy_out_probe.cu — the staging area's copy out on one GPU: cudaMemcpyAsync /
// cudaMemcpy2DAsync against iris_coll_copy_out_kernel (the kernel that copies only where
// every peer matched the launch; internal/coll/kernels.h), 64 KB to 8 MB, one row and 4
// rows (an all-gather's recv blocks), per copy in a graph of 20 and eagerly. Its headers
// are set up as a matched call of 4 ranks, so the kernel copies. Median of 15 batches
// after warm-up; every copy checked. docs/tuning.md, "The staging area's copy out".
//   nvcc -O2 -std=c++17 -arch=sm_90 -I. tools/copy_out_probe.cu -o build/copy_out_probe && build/copy_out_probe
#define IRIS_IMPLEMENTATION // the collectives' internal launches (internal/coll/launch.h)
#include "iris_collectives.h"
#include <algorithm>
#include <stdio.h>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

enum { W = 4, BATCH = 20, REPS = 15 };

struct Probe {
  iris_coll_state_t s;
  char *src, *dst;
  cudaStream_t st;
};

// a plain copy kernel, no check (the floor of a kernel node): one 16-byte vector per
// thread, same grid as the copy-out kernel
__global__ void plain_copy(uint4 *dst, const uint4 *src, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

// one copy of `rows` rows of `width` bytes (dst pitch width * 2 when rows > 1) the given way
static void copy(const Probe &p, int way, size_t width, int rows) { // way 0 memcpy, 1 the copy-out kernel, 2 a plain kernel
  const size_t dp = rows > 1 ? width * 2 : width;
  if (way == 0) {
    if (rows > 1) cudaMemcpy2DAsync(p.dst, dp, p.src, width, width, rows, cudaMemcpyDeviceToDevice, p.st);
    else cudaMemcpyAsync(p.dst, p.src, width, cudaMemcpyDeviceToDevice, p.st);
  } else if (way == 2) {
    const unsigned n = (unsigned)(width * rows / 16);
    plain_copy<<<(n + 511) / 512, 512, 0, p.st>>>((uint4 *)p.dst, (const uint4 *)p.src, n);
  } else {
    iris_coll_launch_copy_out(&p.s, p.dst, dp, p.src, width, width, rows, 0x1234567ULL, p.st);
  }
}

static int time_us(Probe &p, int way, size_t width, int rows, bool graph, double *us) {
  cudaEvent_t e0, e1;
  cudaGraphExec_t exec = NULL;
  std::vector<double> t;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  if (graph) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(p.st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < BATCH; i++) copy(p, way, width, rows);
    CK(cudaStreamEndCapture(p.st, &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
    CK(cudaGraphDestroy(g));
  }
  for (int r = -3; r < REPS; r++) {
    CK(cudaEventRecord(e0, p.st));
    if (graph) CK(cudaGraphLaunch(exec, p.st));
    else
      for (int i = 0; i < BATCH; i++) copy(p, way, width, rows);
    CK(cudaEventRecord(e1, p.st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 0) t.push_back(ms * 1000.0 / BATCH);
  }
  std::sort(t.begin(), t.end());
  *us = t[t.size() / 2];
  if (exec) CK(cudaGraphExecDestroy(exec));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return 0;
}

int main() {
  Probe p = {};
  const size_t max = (size_t)8 << 20;
  iris_coll_ctl_t *ctl;
  int dev = 0;
  CK(cudaSetDevice(0));
  CK(cudaDeviceGetAttribute(&p.s.sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaMalloc(&p.src, 2 * max));
  CK(cudaMalloc(&p.dst, 2 * max));
  CK(cudaMalloc(&ctl, sizeof *ctl));
  CK(cudaStreamCreate(&p.st));
  // a matched call c = 6 of 4 ranks: the call word names c + 1, every peer's header (sig, c)
  {
    std::vector<unsigned long long> h(sizeof *ctl / 8, 0);
    iris_coll_ctl_t *hc = (iris_coll_ctl_t *)h.data();
    const unsigned c = 6;
    hc->calls = (unsigned long long)(c + 1) << 32;
    for (int q = 0; q < W; q++) hc->hdr[c & 1].from[q] = IRIS_COLL_HDR_WORD(iris_coll_sig_fold(0x1234567ULL), c);
    CK(cudaMemcpy(ctl, h.data(), sizeof *ctl, cudaMemcpyHostToDevice));
  }
  p.s.dev.ctx.world_size = W;
  p.s.dev.ctx.rank = 0;
  p.s.dev.calls = &ctl->calls;
  p.s.dev.hdr = ctl->hdr;
  // a check of both ways: every byte lands (one row and 4 rows of 1 MB + 3 bytes)
  {
    std::vector<unsigned char> a(2 * max), b(2 * max);
    for (size_t i = 0; i < a.size(); i++) a[i] = (unsigned char)(i * 131 + 7);
    CK(cudaMemcpy(p.src, a.data(), a.size(), cudaMemcpyHostToDevice));
    for (int way = 0; way < 2; way++)
      for (int rows : {1, 4}) {
        const size_t w = ((size_t)1 << 20) + 3, dp = rows > 1 ? w * 2 : w;
        CK(cudaMemset(p.dst, 0x5a, 2 * max));
        copy(p, way, w, rows);
        CK(cudaStreamSynchronize(p.st));
        CK(cudaMemcpy(b.data(), p.dst, b.size(), cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (int r = 0; r < rows; r++)
          for (size_t i = 0; i < dp; i++) bad += b[r * dp + i] != (i < w ? a[r * w + i] : 0x5a);
        if (bad) { printf("FAIL: %s, %d row(s): %zu bytes wrong\n", way ? "copy-out kernel" : "memcpy", rows, bad); return 1; }
      }
  }
  printf("# one GPU, per copy (us), median of %d batches of %d; dst pitch 2x width for 4 rows\n", REPS, BATCH);
  printf("%10s %4s | %10s %10s %10s | %10s %10s\n", "bytes", "rows", "memcpy g", "kernel g", "plain g", "memcpy e", "kernel e");
  for (size_t bytes = (size_t)64 << 10; bytes <= max; bytes *= 2)
    for (int rows : {1, 4}) {
      double t[5];
      const int way[5] = {0, 1, 2, 0, 1};
      for (int k = 0; k < 5; k++)
        if ((rows == 1 || way[k] != 2) && time_us(p, way[k], bytes / rows, rows, k < 3, &t[k])) return 1;
      if (rows > 1) t[2] = 0; // the plain kernel copies one row
      printf("%10zu %4d | %10.2f %10.2f %10.2f | %10.2f %10.2f\n", bytes, rows, t[0], t[1], t[2], t[3], t[4]);
    }
  return 0;
}
