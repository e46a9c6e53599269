// bench_rma: remote-memory microbenchmarks between rank 0 and rank 1 (NVIDIA).
//   remote store / load bandwidth of iris_put_bulk / iris_get_bulk by CTA count,
//   beside the copy engine (cudaMemcpyAsync to the peer's mapped heap) in the same run;
//   flag round trip (iris_signal + iris_wait_until, and the relaxed pair for contrast);
//   remote atomic throughput (iris_atomic_add, relaxed, system scope).
// Timing: CUDA events (in-kernel %globaltimer for the ping-pong), 3 warm-ups, median of
// 15 repetitions. Prints a table; with BENCH_CSV=path also writes CSV rows.
//   bench_rma [ranks]     (default 2; starts its own ranks with iris_launch_local)
#define IRIS_IMPLEMENTATION
#include "../iris.h"
#include "../iris_device.h"
#include "bench_util.h"

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>


static FILE *csv;
static void row(const char *what, const char *variant, double x, double value, const char *unit) {
  printf("%-34s %-34s %12.0f %10.2f %s\n", what, variant, x, value, unit);
  if (csv) fprintf(csv, "%s,%s,%.0f,%.4f,%s\n", what, variant, x, value, unit);
}

__global__ void k_put(iris_device_ctx_t ctx, char *heap_dst, const char *src, size_t bytes, int peer) {
  iris_put_bulk(ctx, heap_dst, src, bytes, peer, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}
__global__ void k_get(iris_device_ctx_t ctx, char *dst, const char *heap_src, size_t bytes, int peer) {
  iris_get_bulk(ctx, dst, heap_src, bytes, peer, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}
__global__ void k_local_copy(char *dst, const char *src, size_t bytes) {
  iris_copy_bytes(dst, src, bytes, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}
__global__ void k_fill(unsigned *p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (unsigned)(i * 2654435761u) ^ 0x5bd1e995u;
}

// ping-pong: rank 0 and rank 1 each run one thread; flags count up (epochs).
// Variants: 0 the library's iris_signal + iris_wait_until; 1 its relaxed pair; the rest
// are hand-written protocols measured for comparison.
__device__ __forceinline__ void st_volatile(unsigned *p, unsigned v) { *(volatile unsigned *)p = v; }
__device__ __forceinline__ unsigned ld_volatile(const unsigned *p) { return *(const volatile unsigned *)p; }
__device__ __forceinline__ void fence_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
template <int V>
__device__ __forceinline__ void pp_signal(const iris_device_ctx_t &ctx, unsigned *flag, unsigned e, int peer) {
  if (V == 0) iris_signal(ctx, flag, e, peer);
  else if (V == 1) iris_signal_relaxed(ctx, flag, e, peer);
  else if (V == 2) iris_atomic_store<IRIS_ORDER_RELEASE>(iris_translate(ctx, flag, peer), e);
  else if (V == 3) { fence_sys(); iris_atomic_store<IRIS_ORDER_RELAXED>(iris_translate(ctx, flag, peer), e); }
  else st_volatile(iris_translate(ctx, flag, peer), e);
}
template <int V>
__device__ __forceinline__ void pp_wait(const iris_device_ctx_t &ctx, unsigned *flag, unsigned e) {
  if (V == 0) iris_wait_until(ctx, flag, IRIS_CMP_EPOCH, e);
  else if (V == 1) iris_wait_until_relaxed(ctx, flag, IRIS_CMP_EPOCH, e);
  else if (V == 2) { while (!iris_epoch_reached(iris_atomic_load<IRIS_ORDER_ACQUIRE>(flag), e)) {} }
  else if (V == 3) { while (!iris_epoch_reached(iris_atomic_load<IRIS_ORDER_RELAXED>(flag), e)) {} fence_sys(); }
  else { while (!iris_epoch_reached(ld_volatile(flag), e)) {} }
}
template <int V>
__global__ void k_pingpong(iris_device_ctx_t ctx, unsigned *flag, int iters, unsigned base, unsigned long long *ns) {
  const int peer = ctx.rank ^ 1;
  unsigned long long t0 = 0;
  for (int i = 1; i <= iters; i++) {
    unsigned e = base + (unsigned)i;
    if (i == 11) t0 = iris_detail_time_ns(); // the first 10 are warm-up
    if (ctx.rank == 0) { pp_signal<V>(ctx, flag, e, peer); pp_wait<V>(ctx, flag, e); }
    else { pp_wait<V>(ctx, flag, e); pp_signal<V>(ctx, flag, e, peer); }
  }
  if (ctx.rank == 0) *ns = iris_detail_time_ns() - t0;
}

// atomics: each thread adds to its own word; `stride` words apart (1: a warp's words
// share one 128-byte line and travel together; 32: one line per thread), or all to one
// word (stride 0: contended)
__global__ void k_atomics(iris_device_ctx_t ctx, unsigned *words, int peer, int per_thread, int stride) {
  unsigned *p = words + (size_t)stride * (blockIdx.x * blockDim.x + threadIdx.x);
  for (int i = 0; i < per_thread; i++) iris_atomic_add<IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM>(ctx, p, 1u, peer);
}

struct Timer {
  cudaEvent_t a, b;
  Timer() { cudaEventCreate(&a); cudaEventCreate(&b); }
  template <typename F>
  double median_ms(F f, int reps = 15, int warm = 3) {
    std::vector<float> t;
    for (int i = 0; i < warm + reps; i++) {
      cudaEventRecord(a);
      f();
      cudaEventRecord(b);
      CK(cudaEventSynchronize(b));
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      if (i >= warm) t.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2, rank;
  iris_launch_t L;
  setvbuf(stdout, NULL, _IOLBF, 0);
  IK(iris_launch_local(n, &L, &rank));
  if (rank < 0) {
    iris_status_t st = iris_launch_wait(&L, 900000);
    if (st != IRIS_SUCCESS) printf("bench_rma: %s\n", iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  iris_t *ctx;
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)3 << 30;
  IK(iris_init(&cfg, &ctx));
  iris_device_ctx_t dc = iris_device_context(ctx);
  const size_t big = (size_t)1 << 30;
  char *heap_buf, *local;
  unsigned *flag, *words;
  IK(iris_malloc(ctx, big, (void **)&heap_buf));
  IK(iris_calloc(ctx, 4096, (void **)&flag));
  IK(iris_calloc(ctx, (size_t)64 << 20, (void **)&words));
  CK(cudaMalloc(&local, big));
  k_fill<<<1024, 256>>>((unsigned *)local, big / 4);
  k_fill<<<1024, 256>>>((unsigned *)heap_buf, big / 4);
  IK(iris_barrier(ctx));
  if (rank == 0) {
    const char *path = getenv("BENCH_CSV");
    csv = path ? fopen(path, "w") : NULL;
    if (csv) fprintf(csv, "what,variant,x,value,unit\n");
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# bench_rma: %d ranks, %s, %d SMs; rank 0 -> rank 1\n", n, prop.name, prop.multiProcessorCount);
    printf("%-34s %-34s %12s %10s %s\n", "what", "variant", "x", "value", "unit");
    Timer T;
    void *peer_buf;
    IK(iris_translate_host(ctx, heap_buf, 1, &peer_buf));
    const int sms = prop.multiProcessorCount;
    for (size_t bytes : {(size_t)256 << 20, big}) {
      double gb = bytes / 1e9;
      char v[64];
      double ms = T.median_ms([&] { CK(cudaMemcpyAsync(peer_buf, local, bytes, cudaMemcpyDeviceToDevice)); });
      row("store bandwidth to 1 peer", "copy engine (cudaMemcpyAsync)", bytes, gb / (ms * 1e-3), "GB/s");
      for (int ctas : {8, 16, 32, sms / 2, sms, 2 * sms}) {
        snprintf(v, sizeof v, "iris_put_bulk %d CTAs x 512", ctas);
        ms = T.median_ms([&] { k_put<<<ctas, 512>>>(dc, heap_buf, local, bytes, 1); });
        row("store bandwidth to 1 peer", v, bytes, gb / (ms * 1e-3), "GB/s");
      }
      ms = T.median_ms([&] { CK(cudaMemcpyAsync(local, peer_buf, bytes, cudaMemcpyDeviceToDevice)); });
      row("load bandwidth from 1 peer", "copy engine (cudaMemcpyAsync)", bytes, gb / (ms * 1e-3), "GB/s");
      for (int ctas : {16, 32, sms / 2, sms, 2 * sms}) {
        snprintf(v, sizeof v, "iris_get_bulk %d CTAs x 512", ctas);
        ms = T.median_ms([&] { k_get<<<ctas, 512>>>(dc, local, heap_buf, bytes, 1); });
        row("load bandwidth from 1 peer", v, bytes, gb / (ms * 1e-3), "GB/s");
      }
      ms = T.median_ms([&] { k_local_copy<<<2 * sms, 512>>>(local, heap_buf, bytes); });
      row("local HBM copy (reference)", "iris_copy_bytes 2xSMs x 512", bytes, gb / (ms * 1e-3), "GB/s copied");
    }
    // atomics on the peer, and on local memory for reference
    const char *pattern[3] = {"one word per thread, coalesced lines", "one 128-B line per thread", "all threads, one word"};
    for (int k = 0; k < 3; k++) {
      const int stride = k == 0 ? 1 : k == 1 ? 32 : 0, blocks = sms, threads = 256, per = stride ? 256 : 64;
      double ops = (double)blocks * threads * per;
      double ms = T.median_ms([&] { k_atomics<<<blocks, threads>>>(dc, words, 1, per, stride); }, 7, 2);
      row("remote atomic_add u32 relaxed sys", pattern[k], ops, ops / (ms * 1e-3) / 1e6, "Mops/s");
      ms = T.median_ms([&] { k_atomics<<<blocks, threads>>>(dc, words, 0, per, stride); }, 7, 2);
      row("local atomic_add u32 relaxed sys", pattern[k], ops, ops / (ms * 1e-3) / 1e6, "Mops/s");
    }
  }
  IK(iris_barrier(ctx));
  // ping-pong between ranks 0 and 1 (others idle)
  unsigned long long *ns;
  CK(cudaMalloc(&ns, sizeof *ns));
  const int iters = 20000;
  unsigned base = 0;
  const char *names[5] = {"iris_signal + iris_wait_until", "iris_signal_relaxed + _relaxed wait", "st.release + ld.acquire poll",
                          "fence+st.relaxed / poll+fence", "volatile store + volatile poll"};
  for (int variant = 0; variant < 5; variant++)
    for (int rep = 0; rep < 3; rep++) {
      IK(iris_barrier(ctx));
      if (rank <= 1) {
        switch (variant) {
        case 0: k_pingpong<0><<<1, 1>>>(dc, flag, iters, base, ns); break;
        case 1: k_pingpong<1><<<1, 1>>>(dc, flag, iters, base, ns); break;
        case 2: k_pingpong<2><<<1, 1>>>(dc, flag, iters, base, ns); break;
        case 3: k_pingpong<3><<<1, 1>>>(dc, flag, iters, base, ns); break;
        default: k_pingpong<4><<<1, 1>>>(dc, flag, iters, base, ns); break;
        }
        CK(cudaDeviceSynchronize());
      }
      base += iters;
      if (rank == 0 && rep == 2) {
        unsigned long long t;
        CK(cudaMemcpy(&t, ns, sizeof t, cudaMemcpyDeviceToHost));
        row("flag round trip rank 0 <-> 1", names[variant], iters - 10, t / 1e3 / (iters - 10), "us");
      }
    }
  if (csv) fclose(csv);
  IK(iris_finalize(ctx));
  return 0;
}
