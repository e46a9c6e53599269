// GPU tests: every RMA operation and atomic, each rank to every rank, exact expected
// values from the host; message passing with data and flags over thousands of
// iterations; heap bounds and divergence; barriers with rank skew; all three bring-up
// modes. Needs >= 2 GPUs with peer access (NVIDIA; CUDA runtime calls in the test).
//
//   gpu_test procs N    N processes, one per GPU, through iris_launch_local + rendezvous
//   gpu_test hooks N    N threads in one process, bring-up through bootstrap callbacks
//   gpu_test local N    one process, iris_init_local over N GPUs, one thread per context
// Built with -DIRIS_DEBUG (gpu_test_debug), it also has the failure modes:
//   bad-pointer | bad-rank | other-node | bad-size | wait-timeout | bad-coop | bad-cmp | bad-team-rank   (each must trap with a message)
//   diverge                                   (iris_barrier must report MISMATCH)
// Every check prints one line "PASS: [mode w=N] name" or "FAIL: ...", from rank 0, with
// the verdict of all ranks.
#define IRIS_IMPLEMENTATION
#include "../iris.h"
#include "../iris_device.h"

#include <algorithm>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <time.h>
#include <unistd.h>
#include <vector>

#include "test_util.h"

__global__ void k_count_mismatch_u8(const unsigned char *a, const unsigned char *b, size_t n, unsigned long long *errs) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (a[i] != b[i]) atomicAdd(errs, 1ULL);
}

// ------------------------------------------------------------- translation --
__global__ void k_translate(iris_device_ctx_t ctx, char *p, unsigned long long *out) {
  int r = threadIdx.x;
  if (r < ctx.world_size) out[r] = (unsigned long long)(uintptr_t)iris_translate(ctx, p, r);
}
static bool test_translate(Suite &s) {
  char *p;
  unsigned long long *d, h[IRIS_MAX_RANKS];
  IK(iris_malloc(s.ctx, 4096, (void **)&p));
  CK(cudaMalloc(&d, sizeof h));
  k_translate<<<1, 32>>>(iris_device_context(s.ctx), p + 1000, d);
  CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int r = 0; r < s.world; r++) {
    void *want;
    IK(iris_translate_host(s.ctx, p + 1000, r, &want));
    ok &= h[r] == (unsigned long long)(uintptr_t)want && (char *)want == (char *)iris_heap_base(s.ctx, r) + (p + 1000 - (char *)iris_heap_base(s.ctx, s.rank));
  }
  cudaFree(d);
  IK(iris_free(s.ctx, p));
  return report(s, "translate to every rank (device = host)", ok);
}

// ------------------------------------------------------- scalar store / load --
enum { VIA_STORE, VIA_PUT, VIA_LOAD, VIA_GET, VIA_COPY };
// rank s writes box[s*n + i] on every rank d; value depends on (s, d, i)
template <typename T>
__global__ void k_scalar_push(iris_device_ctx_t ctx, T *box, size_t n, uint64_t seed, int via) {
  for (int k = 0; k < ctx.world_size; k++) {
    int d = (ctx.rank + k) % ctx.world_size;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
      T v = gen<T>(key(seed, ctx.rank, d, i, via));
      if (via == VIA_STORE) iris_store(ctx, box + ctx.rank * n + i, v, d);
      else iris_put(ctx, box + ctx.rank * n + i, &v, d);
    }
  }
}
// rank s reads src[i] of every rank d into out[d*n + i] (plain local memory)
template <typename T>
__global__ void k_scalar_pull(iris_device_ctx_t ctx, const T *src, T *out, size_t n, int via) {
  for (int k = 0; k < ctx.world_size; k++) {
    int d = (ctx.rank + k) % ctx.world_size;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
      if (via == VIA_LOAD) out[d * n + i] = iris_load(ctx, src + i, d);
      else iris_get(ctx, out + d * n + i, src + i, d);
    }
  }
}
// third-party copy: rank s copies src[i] of rank (s+1)%W into box[s*n+i] of rank (s+2)%W
template <typename T>
__global__ void k_scalar_copy(iris_device_ctx_t ctx, const T *src, T *box, size_t n) {
  int from = (ctx.rank + 1) % ctx.world_size, to = (ctx.rank + 2) % ctx.world_size;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    iris_copy(ctx, box + ctx.rank * n + i, src + i, from, to);
}
template <typename T>
__global__ void k_fill(T *p, size_t n, uint64_t seed, int rank, int tagv) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = gen<T>(key(seed, rank, 77, i, tagv));
}

template <typename T>
static bool test_scalar(Suite &s, const char *tname) {
  const size_t n = 3001; // odd on purpose
  const int W = s.world;
  T *box, *src, *out;
  IK(iris_malloc(s.ctx, sizeof(T) * n * W, (void **)&box));
  IK(iris_malloc(s.ctx, sizeof(T) * n, (void **)&src));
  CK(cudaMalloc(&out, sizeof(T) * n * W));
  std::vector<T> h(n * W);
  iris_device_ctx_t dc = iris_device_context(s.ctx);
  char name[128];
  for (int via : {VIA_STORE, VIA_PUT}) {
    poison(box, sizeof(T) * n * W);
    if (!barrier(s)) return false;
    k_scalar_push<T><<<8, 128>>>(dc, box, n, s.seed, via);
    CK(cudaGetLastError());
    if (!barrier(s)) return false;
    CK(cudaMemcpy(h.data(), box, sizeof(T) * n * W, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int src_rank = 0; src_rank < W; src_rank++)
      for (size_t i = 0; i < n; i++) ok &= same(h[src_rank * n + i], gen<T>(key(s.seed, src_rank, s.rank, i, via)));
    snprintf(name, sizeof name, "%s %s to every rank", via == VIA_STORE ? "iris_store" : "iris_put", tname);
    report(s, name, ok);
  }
  k_fill<T><<<8, 128>>>(src, n, s.seed, s.rank, 1);
  for (int via : {VIA_LOAD, VIA_GET}) {
    poison(out, sizeof(T) * n * W);
    if (!barrier(s)) return false;
    k_scalar_pull<T><<<8, 128>>>(dc, src, out, n, via);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h.data(), out, sizeof(T) * n * W, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int d = 0; d < W; d++)
      for (size_t i = 0; i < n; i++) ok &= same(h[d * n + i], gen<T>(key(s.seed, d, 77, i, 1)));
    snprintf(name, sizeof name, "%s %s from every rank", via == VIA_LOAD ? "iris_load" : "iris_get", tname);
    report(s, name, ok);
  }
  { // copy between two other ranks (the same rank pair when W = 2)
    poison(box, sizeof(T) * n * W);
    if (!barrier(s)) return false;
    k_scalar_copy<T><<<8, 128>>>(dc, src, box, n);
    CK(cudaGetLastError());
    if (!barrier(s)) return false;
    CK(cudaMemcpy(h.data(), box, sizeof(T) * n * W, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int c = 0; c < W; c++) { // copier c wrote into rank (c+2)%W from rank (c+1)%W
      if ((c + 2) % W != s.rank) continue;
      for (size_t i = 0; i < n; i++) ok &= same(h[c * n + i], gen<T>(key(s.seed, (c + 1) % W, 77, i, 1)));
    }
    snprintf(name, sizeof name, "iris_copy %s between two other ranks", tname);
    report(s, name, ok);
  }
  cudaFree(out);
  IK(iris_free(s.ctx, src));
  IK(iris_free(s.ctx, box));
  return true;
}

// ---------------------------------------------------------------- 16 bytes --
__host__ __device__ inline uint4 gen4(uint64_t h) {
  uint64_t g = mix(h);
  return make_uint4((unsigned)h, (unsigned)(h >> 32), (unsigned)g, (unsigned)(g >> 32));
}
__global__ void k_v16_push(iris_device_ctx_t ctx, uint4 *box, size_t n, uint64_t seed) {
  for (int k = 0; k < ctx.world_size; k++) {
    int d = (ctx.rank + k) % ctx.world_size;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
      iris_store_v16(ctx, box + ctx.rank * n + i, gen4(key(seed, ctx.rank, d, i, 16)), d);
  }
}
__global__ void k_v16_pull(iris_device_ctx_t ctx, const uint4 *src, uint4 *out, size_t n, uint64_t seed) {
  for (int k = 0; k < ctx.world_size; k++) {
    int d = (ctx.rank + k) % ctx.world_size;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) out[d * n + i] = iris_load_v16(ctx, src + i, d);
  }
}
__global__ void k_v16_fill(uint4 *p, size_t n, uint64_t seed, int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = gen4(key(seed, rank, 99, i, 17));
}
static bool eq4(uint4 a, uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; }
static bool test_v16(Suite &s) {
  const size_t n = 4099;
  const int W = s.world;
  uint4 *box, *src, *out;
  IK(iris_malloc(s.ctx, sizeof(uint4) * n * W, (void **)&box));
  IK(iris_malloc(s.ctx, sizeof(uint4) * n, (void **)&src));
  CK(cudaMalloc(&out, sizeof(uint4) * n * W));
  std::vector<uint4> h(n * W);
  iris_device_ctx_t dc = iris_device_context(s.ctx);
  poison(box, sizeof(uint4) * n * W);
  k_v16_fill<<<8, 128>>>(src, n, s.seed, s.rank);
  if (!barrier(s)) return false;
  k_v16_push<<<8, 128>>>(dc, box, n, s.seed);
  if (!barrier(s)) return false;
  CK(cudaMemcpy(h.data(), box, sizeof(uint4) * n * W, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int r = 0; r < W; r++)
    for (size_t i = 0; i < n; i++) ok &= eq4(h[r * n + i], gen4(key(s.seed, r, s.rank, i, 16)));
  report(s, "iris_store_v16 to every rank", ok);
  poison(out, sizeof(uint4) * n * W);
  k_v16_pull<<<8, 128>>>(dc, src, out, n, s.seed);
  CK(cudaMemcpy(h.data(), out, sizeof(uint4) * n * W, cudaMemcpyDeviceToHost));
  ok = true;
  for (int r = 0; r < W; r++)
    for (size_t i = 0; i < n; i++) ok &= eq4(h[r * n + i], gen4(key(s.seed, r, 99, i, 17)));
  report(s, "iris_load_v16 from every rank", ok);
  if (!barrier(s)) return false;
  cudaFree(out);
  IK(iris_free(s.ctx, src));
  IK(iris_free(s.ctx, box));
  return true;
}

// ------------------------------------------------------------ bulk copies --
// Each case: this rank's bytes go to region[me] on every rank d (put), come back from
// every d (get), and travel between two other ranks (copy). Guard bytes around each
// region must keep their poison: nothing is written out of bounds.
__global__ void k_bytes_fill(unsigned char *p, size_t n, uint64_t seed, int rank, int c) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (unsigned char)key(seed, rank, c, i, 5);
}
enum { BULK_PUT, BULK_GET, BULK_COPY };
__global__ void k_bulk(iris_device_ctx_t ctx, int kind, unsigned char *region, size_t slot, size_t off, const unsigned char *local, unsigned char *out, size_t bytes) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
  for (int k = 0; k < ctx.world_size; k++) {
    int d = (ctx.rank + k) % ctx.world_size;
    if (kind == BULK_PUT) iris_put_bulk(ctx, region + ctx.rank * slot + off, local, bytes, d, tid, nt);
    else if (kind == BULK_GET) iris_get_bulk(ctx, out + d * slot + off, region + off, bytes, d, tid, nt);
  }
  if (kind == BULK_COPY) {
    int from = (ctx.rank + 1) % ctx.world_size, to = (ctx.rank + 2) % ctx.world_size;
    iris_copy_bulk(ctx, region + ctx.rank * slot + off, region + (ctx.world_size * slot) + off, bytes, from, to, tid, nt);
  }
}
#if !defined(IRIS_DEBUG) /* (gpu_test_debug traps on these: its bad-coop mode) */
// Cooperation arguments outside 0 <= tid < nthreads: nothing is copied and nothing written
// (a stride of 0 never ended; a negative nthreads or tid wrote the words before dst).
__global__ void k_bad_coop(unsigned char *buf, const unsigned char *src) {
  iris_copy_bytes(buf + 128, src, 64, 0, -1);
  iris_copy_bytes(buf + 128, src, 64, -1, 256);
  iris_copy_bytes(buf + 128, src, 64, 0, 0);
}
static bool test_bad_coop(Suite &s) {
  unsigned char *buf, *want;
  unsigned long long *errs, e = 1;
  CK(cudaMalloc(&buf, 512));
  CK(cudaMalloc(&want, 256));
  CK(cudaMalloc(&errs, sizeof *errs));
  poison(buf, 512);
  poison(want, 256);
  CK(cudaMemset(buf + 256, 0x3c, 256)); // the source: not the poison
  k_bad_coop<<<1, 1>>>(buf, buf + 256);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemset(errs, 0, sizeof *errs));
  k_count_mismatch_u8<<<1, 256>>>(buf, want, 256, errs);
  CK(cudaMemcpy(&e, errs, sizeof e, cudaMemcpyDeviceToHost));
  cudaFree(buf);
  cudaFree(want);
  cudaFree(errs);
  return report(s, "iris_copy_bytes with nthreads 0 or -1, or tid -1: returns, writes nothing", e == 0);
}
#endif
static bool test_bulk(Suite &s) {
  const size_t sizes[] = {1, 15, 16, 17, 1000, 4093, 65539, (size_t)1 << 20};
  const size_t offs[][2] = {{0, 0}, {4, 4}, {1, 3}, {16, 32}}; // (local offset, remote offset)
  const int W = s.world;
  const size_t slot = ((size_t)1 << 20) + 256;
  unsigned char *region, *local, *out, *expect;
  unsigned long long *errs;
  // region: W slots written by peers + 1 source slot for third-party copies
  IK(iris_malloc(s.ctx, slot * (W + 1), (void **)&region));
  CK(cudaMalloc(&local, slot));
  CK(cudaMalloc(&out, slot * W));
  CK(cudaMalloc(&expect, slot * (W + 1)));
  CK(cudaMalloc(&errs, sizeof *errs));
  iris_device_ctx_t dc = iris_device_context(s.ctx);
  bool ok_put = true, ok_get = true, ok_copy = true;
  int c = 0;
  for (size_t bytes : sizes)
    for (auto &o : offs) {
      c++;
      size_t lo = o[0], ro = o[1];
      unsigned long long e = 0;
      // put: expect[slot r] = poison, with [ro, ro+bytes) = rank r's bytes for case c
      poison(region, slot * (W + 1));
      poison(expect, slot * (W + 1));
      for (int r = 0; r < W; r++) k_bytes_fill<<<64, 256>>>(expect + r * slot + ro, bytes, s.seed, r, c);
      k_bytes_fill<<<64, 256>>>(local + lo, bytes, s.seed, s.rank, c);
      if (!barrier(s)) return false;
      k_bulk<<<4, 256>>>(dc, BULK_PUT, region, slot, ro, local + lo, NULL, bytes);
      CK(cudaGetLastError());
      if (!barrier(s)) return false;
      CK(cudaMemset(errs, 0, sizeof *errs));
      k_count_mismatch_u8<<<256, 256>>>(region, expect, slot * W, errs);
      CK(cudaMemcpy(&e, errs, sizeof e, cudaMemcpyDeviceToHost));
      if (e && ok_put) fprintf(stderr, "rank %d: put %zu bytes at +%zu/+%zu: %llu bad bytes\n", s.rank, bytes, lo, ro, e);
      ok_put &= e == 0;
      // get: every rank's source slot holds its own bytes at ro; we read each into out[d]
      k_bytes_fill<<<64, 256>>>(region + W * slot + ro, bytes, s.seed, s.rank, c + 1000);
      poison(out, slot * W);
      poison(expect, slot * W);
      for (int r = 0; r < W; r++) k_bytes_fill<<<64, 256>>>(expect + r * slot + ro, bytes, s.seed, r, c + 1000);
      if (!barrier(s)) return false;
      k_bulk<<<4, 256>>>(dc, BULK_GET, region + W * slot, slot, ro, NULL, out, bytes);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      CK(cudaMemset(errs, 0, sizeof *errs));
      k_count_mismatch_u8<<<256, 256>>>(out, expect, slot * W, errs);
      CK(cudaMemcpy(&e, errs, sizeof e, cudaMemcpyDeviceToHost));
      if (e && ok_get) fprintf(stderr, "rank %d: get %zu bytes at +%zu: %llu bad bytes\n", s.rank, bytes, ro, e);
      ok_get &= e == 0;
      // copy: copier cc moves rank (cc+1)'s source slot into rank (cc+2)'s slot cc
      poison(region, slot * W);
      poison(expect, slot * W);
      for (int cc = 0; cc < W; cc++)
        if ((cc + 2) % W == s.rank) k_bytes_fill<<<64, 256>>>(expect + cc * slot + ro, bytes, s.seed, (cc + 1) % W, c + 1000);
      if (!barrier(s)) return false;
      k_bulk<<<4, 256>>>(dc, BULK_COPY, region, slot, ro, NULL, NULL, bytes);
      CK(cudaGetLastError());
      if (!barrier(s)) return false;
      CK(cudaMemset(errs, 0, sizeof *errs));
      k_count_mismatch_u8<<<256, 256>>>(region, expect, slot * W, errs);
      CK(cudaMemcpy(&e, errs, sizeof e, cudaMemcpyDeviceToHost));
      if (e && ok_copy) fprintf(stderr, "rank %d: copy %zu bytes at +%zu: %llu bad bytes\n", s.rank, bytes, ro, e);
      ok_copy &= e == 0;
    }
  report(s, "iris_put_bulk 1 B..1 MiB, aligned and misaligned, guards intact", ok_put);
  report(s, "iris_get_bulk 1 B..1 MiB, aligned and misaligned, guards intact", ok_get);
  report(s, "iris_copy_bulk between two other ranks, guards intact", ok_copy);
  cudaFree(local);
  cudaFree(out);
  cudaFree(expect);
  cudaFree(errs);
  IK(iris_free(s.ctx, region));
  return true;
}

// ------------------------------------------------------------------ atomics --
// Each (op, type, order, scope) has its own slots on every rank: slot[s] is hit only by
// rank s's single block (valid for every scope), slot[W] by all ranks (system scope
// only: narrower scopes promise nothing across GPUs).
enum { OP_ADD, OP_SUB, OP_AND, OP_OR, OP_XOR, OP_MIN, OP_MAX, OP_XCHG, OP_CAS, NOPS };
static const char *op_names[NOPS] = {"add", "sub", "and", "or", "xor", "min", "max", "xchg", "cas"};
#define AT 64 /* threads per rank hitting each slot */
#define SLOTS 32

template <typename T>
__host__ __device__ inline T contrib(int op, uint64_t seed, int s, int t, int d) {
  uint64_t h = key(seed, op, s, t, d);
  int bit = (s * AT + t) % (int)(8 * sizeof(T));
  switch (op) {
  case OP_ADD: case OP_SUB: case OP_CAS: return (T)(h % 1000 + 1);
  case OP_AND: return (T) ~((T)1 << bit);
  case OP_OR: return (T)((T)1 << bit);
  case OP_XCHG: return (T)(((uint64_t)(s * AT + t + 1) << 16) ^ (seed & 0xffff));
  default: return (T)h;
  }
}
template <typename T>
__host__ __device__ inline T initial(int op, uint64_t seed, int d, int slot) {
  return (T)key(seed, op + 100, d, slot, 3);
}

template <int OP, typename T, iris_order_t O, iris_scope_t S>
__global__ void k_atomic(iris_device_ctx_t ctx, T *slots, T *olds, uint64_t seed) {
  const int t = threadIdx.x, W = ctx.world_size, s = ctx.rank;
  for (int k = 0; k < W; k++) {
    const int d = (s + k) % W;
    for (int which = 0; which < (S == IRIS_SCOPE_SYSTEM ? 2 : 1); which++) {
      const int slot = which ? W : s;
      T *p = slots + slot;
      T v = contrib<T>(OP, seed, s, t, d), old = 0;
      switch (OP) {
      case OP_ADD: old = iris_atomic_add<O, S>(ctx, p, v, d); break;
      case OP_SUB: old = iris_atomic_sub<O, S>(ctx, p, v, d); break;
      case OP_AND: old = iris_atomic_and<O, S>(ctx, p, v, d); break;
      case OP_OR: old = iris_atomic_or<O, S>(ctx, p, v, d); break;
      case OP_XOR: old = iris_atomic_xor<O, S>(ctx, p, v, d); break;
      case OP_MIN: old = iris_atomic_min<O, S>(ctx, p, v, d); break;
      case OP_MAX: old = iris_atomic_max<O, S>(ctx, p, v, d); break;
      case OP_XCHG: old = iris_atomic_xchg<O, S>(ctx, p, v, d); break;
      case OP_CAS: { // increment by v with a CAS loop
        T cur = iris_atomic_load<IRIS_ORDER_RELAXED, S>(ctx, p, d);
        for (;;) {
          T prev = iris_atomic_cas<O, S>(ctx, p, cur, (T)(cur + v), d);
          if (prev == cur) break;
          cur = prev;
        }
        old = cur;
        break;
      }
      }
      if (OP == OP_XCHG) iris_store(ctx, olds + (which * W + s) * AT + t, old, d); // to the target's log
    }
  }
}

template <typename T>
static T host_apply(int op, T acc, T v) {
  switch (op) {
  case OP_ADD: case OP_CAS: return (T)(acc + v);
  case OP_SUB: return (T)(acc - v);
  case OP_AND: return (T)(acc & v);
  case OP_OR: return (T)(acc | v);
  case OP_XOR: return (T)(acc ^ v);
  case OP_MIN: return v < acc ? v : acc;
  case OP_MAX: return v > acc ? v : acc;
  default: return v;
  }
}

struct AtomicCombo {
  int op, order, scope;
};
template <int OP, typename T, iris_order_t O, iris_scope_t S>
static void launch_atomic(iris_device_ctx_t dc, T *slots, T *olds, uint64_t seed, int combo) {
  k_atomic<OP, T, O, S><<<1, AT>>>(dc, slots + combo * SLOTS, olds + combo * 2 * IRIS_MAX_RANKS * AT, seed);
}
#define IRIS_T_SCOPES(OP, T, O, base)                                                      \
  launch_atomic<OP, T, O, IRIS_SCOPE_BLOCK>(dc, slots, olds, seed, (base) + 0);            \
  launch_atomic<OP, T, O, IRIS_SCOPE_DEVICE>(dc, slots, olds, seed, (base) + 1);           \
  launch_atomic<OP, T, O, IRIS_SCOPE_SYSTEM>(dc, slots, olds, seed, (base) + 2);
template <int OP, typename T>
static void launch_op(iris_device_ctx_t dc, T *slots, T *olds, uint64_t seed) {
  IRIS_T_SCOPES(OP, T, IRIS_ORDER_RELAXED, OP * 12 + 0)
  IRIS_T_SCOPES(OP, T, IRIS_ORDER_ACQUIRE, OP * 12 + 3)
  IRIS_T_SCOPES(OP, T, IRIS_ORDER_RELEASE, OP * 12 + 6)
  IRIS_T_SCOPES(OP, T, IRIS_ORDER_ACQ_REL, OP * 12 + 9)
}

template <typename T>
static bool test_atomics(Suite &s, const char *tname) {
  const int W = s.world, ncombo = NOPS * 12;
  T *slots, *olds;
  IK(iris_malloc(s.ctx, sizeof(T) * SLOTS * ncombo, (void **)&slots));
  IK(iris_malloc(s.ctx, sizeof(T) * 2 * IRIS_MAX_RANKS * AT * ncombo, (void **)&olds));
  std::vector<T> h(SLOTS * ncombo), ho((size_t)2 * IRIS_MAX_RANKS * AT * ncombo);
  for (int c = 0; c < ncombo; c++)
    for (int k = 0; k < SLOTS; k++) h[c * SLOTS + k] = initial<T>(c / 12, s.seed + c, s.rank, k);
  CK(cudaMemcpy(slots, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice));
  poison(olds, sizeof(T) * ho.size());
  if (!barrier(s)) return false;
  iris_device_ctx_t dc = iris_device_context(s.ctx);
  uint64_t seed = s.seed;
  // the combo's seed is s.seed + combo for initial values; contributions use s.seed
  launch_op<OP_ADD, T>(dc, slots, olds, seed);
  launch_op<OP_SUB, T>(dc, slots, olds, seed);
  launch_op<OP_AND, T>(dc, slots, olds, seed);
  launch_op<OP_OR, T>(dc, slots, olds, seed);
  launch_op<OP_XOR, T>(dc, slots, olds, seed);
  launch_op<OP_MIN, T>(dc, slots, olds, seed);
  launch_op<OP_MAX, T>(dc, slots, olds, seed);
  launch_op<OP_XCHG, T>(dc, slots, olds, seed);
  launch_op<OP_CAS, T>(dc, slots, olds, seed);
  CK(cudaGetLastError());
  if (!barrier(s)) return false;
  CK(cudaMemcpy(h.data(), slots, sizeof(T) * h.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ho.data(), olds, sizeof(T) * ho.size(), cudaMemcpyDeviceToHost));
  for (int op = 0; op < NOPS; op++) {
    bool ok = true;
    for (int c = op * 12; c < op * 12 + 12; c++) {
      int scope = c % 3;
      for (int slot = 0; slot < (scope == 2 ? W + 1 : W); slot++) {
        T init = initial<T>(op, s.seed + c, s.rank, slot), got = h[c * SLOTS + slot];
        int s0 = slot == W ? 0 : slot, s1 = slot == W ? W : slot + 1; // contributing ranks
        if (op == OP_XCHG) { // final value + every returned old = initial + every value
          std::vector<T> a, b;
          a.push_back(got);
          b.push_back(init);
          for (int r = s0; r < s1; r++)
            for (int t = 0; t < AT; t++) {
              a.push_back(ho[(size_t)c * 2 * IRIS_MAX_RANKS * AT + ((slot == W ? 1 : 0) * W + r) * AT + t]);
              b.push_back(contrib<T>(op, s.seed, r, t, s.rank));
            }
          std::sort(a.begin(), a.end());
          std::sort(b.begin(), b.end());
          ok &= a == b;
        } else {
          T want = init;
          for (int r = s0; r < s1; r++)
            for (int t = 0; t < AT; t++) want = host_apply<T>(op, want, contrib<T>(op, s.seed, r, t, s.rank));
          if (!same(got, want) && ok)
            fprintf(stderr, "rank %d: atomic %s %s order %d scope %d slot %d: got %llu want %llu\n", s.rank, op_names[op], tname, (c % 12) / 3, scope, slot,
                    (unsigned long long)got, (unsigned long long)want);
          ok &= same(got, want);
        }
      }
    }
    char name[128];
    snprintf(name, sizeof name, "atomic %s %s, 4 orders x 3 scopes, every rank to every rank", op_names[op], tname);
    report(s, name, ok);
  }
  IK(iris_free(s.ctx, olds));
  IK(iris_free(s.ctx, slots));
  return true;
}

// float / double add: values are multiples of 0.5 so every sum is exact
template <typename F, iris_order_t O, iris_scope_t S>
__global__ void k_fadd(iris_device_ctx_t ctx, F *slots, uint64_t seed) {
  const int W = ctx.world_size, s = ctx.rank, t = threadIdx.x;
  for (int k = 0; k < W; k++) {
    int d = (s + k) % W;
    F v = (F)(key(seed, 7, s, t, d) % 64 + 1) * (F)0.5;
    iris_atomic_add<O, S>(ctx, slots + s, v, d);
    if (S == IRIS_SCOPE_SYSTEM) iris_atomic_add<O, S>(ctx, slots + W, v, d);
  }
}
template <typename F>
static bool test_fadd(Suite &s, const char *tname) {
  const int W = s.world;
  F *slots;
  IK(iris_malloc(s.ctx, sizeof(F) * SLOTS * 12, (void **)&slots));
  std::vector<F> h(SLOTS * 12);
  for (size_t i = 0; i < h.size(); i++) h[i] = (F)(key(s.seed, 8, s.rank, i, 0) % 100000) * (F)0.5;
  std::vector<F> init = h;
  CK(cudaMemcpy(slots, h.data(), sizeof(F) * h.size(), cudaMemcpyHostToDevice));
  if (!barrier(s)) return false;
  iris_device_ctx_t dc = iris_device_context(s.ctx);
#define FADD(O, i)                                                                              \
  k_fadd<F, O, IRIS_SCOPE_BLOCK><<<1, AT>>>(dc, slots + (i * 3 + 0) * SLOTS, s.seed);           \
  k_fadd<F, O, IRIS_SCOPE_DEVICE><<<1, AT>>>(dc, slots + (i * 3 + 1) * SLOTS, s.seed);          \
  k_fadd<F, O, IRIS_SCOPE_SYSTEM><<<1, AT>>>(dc, slots + (i * 3 + 2) * SLOTS, s.seed);
  FADD(IRIS_ORDER_RELAXED, 0) FADD(IRIS_ORDER_ACQUIRE, 1) FADD(IRIS_ORDER_RELEASE, 2) FADD(IRIS_ORDER_ACQ_REL, 3)
#undef FADD
  CK(cudaGetLastError());
  if (!barrier(s)) return false;
  CK(cudaMemcpy(h.data(), slots, sizeof(F) * h.size(), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int c = 0; c < 12; c++)
    for (int slot = 0; slot < (c % 3 == 2 ? W + 1 : W); slot++) {
      double want = (double)init[c * SLOTS + slot];
      for (int r = (slot == W ? 0 : slot); r < (slot == W ? W : slot + 1); r++)
        for (int t = 0; t < AT; t++) want += (double)(key(s.seed, 7, r, t, s.rank) % 64 + 1) * 0.5;
      ok &= (double)h[c * SLOTS + slot] == want;
    }
  char name[96];
  snprintf(name, sizeof name, "atomic add %s, 4 orders x 3 scopes, exact sums", tname);
  report(s, name, ok);
  IK(iris_free(s.ctx, slots));
  return true;
}

// atomic load / store, every order they accept and every scope
template <iris_order_t O, iris_scope_t S>
__global__ void k_st(iris_device_ctx_t ctx, unsigned long long *slots, uint64_t seed) {
  int d = threadIdx.x;
  if (d < ctx.world_size) iris_atomic_store<O, S>(ctx, slots + ctx.rank, key(seed, 11, ctx.rank, d, 0), d);
}
template <iris_order_t O, iris_scope_t S>
__global__ void k_ld(iris_device_ctx_t ctx, unsigned long long *slots, unsigned long long *out) {
  int d = threadIdx.x;
  if (d < ctx.world_size) out[d] = iris_atomic_load<O, S>(ctx, slots + d, d); // rank d's slot d, written by d itself
}
static bool test_ldst(Suite &s) {
  const int W = s.world;
  unsigned long long *slots, *out, h[IRIS_MAX_RANKS];
  IK(iris_malloc(s.ctx, sizeof(unsigned long long) * SLOTS * 6, (void **)&slots));
  CK(cudaMalloc(&out, sizeof h));
  iris_device_ctx_t dc = iris_device_context(s.ctx);
  bool ok = true;
  int c = 0;
#define LDST(OST, OLD, S)                                                                                                   \
  do {                                                                                                                      \
    unsigned long long *sl = slots + c * SLOTS;                                                                             \
    poison(sl, sizeof(unsigned long long) * SLOTS);                                                                         \
    if (!barrier(s)) return false;                                                                                          \
    k_st<OST, S><<<1, 32>>>(dc, sl, s.seed + c);                                                                  \
    if (!barrier(s)) return false;                                                                                          \
    CK(cudaMemcpy(h, sl, sizeof(unsigned long long) * W, cudaMemcpyDeviceToHost));                                          \
    for (int r = 0; r < W; r++) ok &= h[r] == key(s.seed + c, 11, r, s.rank, 0);                                             \
    poison(out, sizeof h);                                                                                                  \
    k_ld<OLD, S><<<1, 32>>>(dc, sl, out);                                                                  \
    CK(cudaMemcpy(h, out, sizeof(unsigned long long) * W, cudaMemcpyDeviceToHost));                                        \
    for (int d = 0; d < W; d++) ok &= h[d] == key(s.seed + c, 11, d, d, 0);                                                  \
    c++;                                                                                                                    \
  } while (0)
  LDST(IRIS_ORDER_RELAXED, IRIS_ORDER_RELAXED, IRIS_SCOPE_BLOCK);
  LDST(IRIS_ORDER_RELEASE, IRIS_ORDER_ACQUIRE, IRIS_SCOPE_BLOCK);
  LDST(IRIS_ORDER_RELAXED, IRIS_ORDER_RELAXED, IRIS_SCOPE_DEVICE);
  LDST(IRIS_ORDER_RELEASE, IRIS_ORDER_ACQUIRE, IRIS_SCOPE_DEVICE);
  LDST(IRIS_ORDER_RELAXED, IRIS_ORDER_RELAXED, IRIS_SCOPE_SYSTEM);
  LDST(IRIS_ORDER_RELEASE, IRIS_ORDER_ACQUIRE, IRIS_SCOPE_SYSTEM);
#undef LDST
  report(s, "atomic load/store, relaxed and acquire/release, 3 scopes, every rank", ok);
  cudaFree(out);
  IK(iris_free(s.ctx, slots));
  return true;
}

// ---------------------------------------------------------- message passing --
// Block 0 sends `iters` messages to the next rank, block 1 receives from the previous
// one; "full" and "ack" are epochs that are never reset (base + i).
__global__ void k_msgpass(iris_device_ctx_t ctx, unsigned *full, unsigned *ack, uint4 *buf, size_t vecs, int iters, unsigned base, uint64_t seed,
                          unsigned long long *errs, unsigned *timeouts) {
  const int W = ctx.world_size, next = (ctx.rank + 1) % W, prev = (ctx.rank + W - 1) % W;
  const int tid = threadIdx.x, nt = blockDim.x;
  unsigned long long bad = 0;
  for (int i = 1; i <= iters; i++) {
    const unsigned e = base + (unsigned)i;
    if (blockIdx.x == 0) {
      if (!iris_wait_block(ctx, ack, IRIS_CMP_EPOCH, e - 1, "msgpass ack")) { if (tid == 0) atomicAdd(timeouts, 1u); return; }
      for (size_t j = tid; j < vecs; j += nt) iris_store_v16(ctx, buf + j, gen4(key(seed, ctx.rank, e, j, 42)), next);
      iris_signal_block(ctx, full, e, next);
    } else {
      if (!iris_wait_block(ctx, full, IRIS_CMP_EPOCH, e, "msgpass full")) { if (tid == 0) atomicAdd(timeouts, 1u); return; }
      for (size_t j = tid; j < vecs; j += nt) {
        uint4 want = gen4(key(seed, prev, e, j, 42)), got = buf[j];
        bad += !(got.x == want.x && got.y == want.y && got.z == want.z && got.w == want.w);
      }
      iris_signal_block(ctx, ack, e, prev);
    }
  }
  if (bad) atomicAdd(errs, bad);
}
static bool test_msgpass(Suite &s) {
  unsigned *flags;
  uint4 *buf;
  unsigned long long *errs;
  unsigned *timeouts;
  const size_t vecs = 1024 + 7; // ~16 KiB, odd
  const int iters = 3000;
  IK(iris_calloc(s.ctx, 2 * sizeof(unsigned) * 64, (void **)&flags)); // full, ack on separate lines
  IK(iris_malloc(s.ctx, vecs * sizeof(uint4), (void **)&buf));
  CK(cudaMalloc(&errs, sizeof *errs));
  CK(cudaMalloc(&timeouts, sizeof *timeouts));
  iris_device_ctx_t dc = iris_device_context(s.ctx);
  bool ok = true;
  unsigned base = 0;
  for (int round = 0; round < 3; round++) { // flags reused across launches: epochs continue
    CK(cudaMemset(errs, 0, sizeof *errs));
    CK(cudaMemset(timeouts, 0, sizeof *timeouts));
    if (!barrier(s)) return false;
    if (s.rank == round % s.world) usleep(100000); // skew: one rank starts late
    k_msgpass<<<2, 256>>>(dc, flags, flags + 64, buf, vecs, iters, base, s.seed + round, errs, timeouts);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    unsigned long long e;
    unsigned to;
    CK(cudaMemcpy(&e, errs, sizeof e, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&to, timeouts, sizeof to, cudaMemcpyDeviceToHost));
    if (e || to) fprintf(stderr, "rank %d: message passing round %d: %llu bad words, %u timed-out waits\n", s.rank, round, e, to);
    ok &= e == 0 && to == 0;
    base += iters;
  }
  report(s, "message passing: 3 x 3000 messages of 16 KiB, release/acquire flags, epochs, skew", ok);
  if (!barrier(s)) return false;
  cudaFree(errs);
  cudaFree(timeouts);
  IK(iris_free(s.ctx, buf));
  IK(iris_free(s.ctx, flags));
  return true;
}

// --------------------------------------------- adopted memory (from_peers) --
// Symmetric memory that "someone else" mapped (here: a heap block, seen from its own
// base, so the adopted bases differ from the heap's): the device API runs on a context
// built by iris_device_context_from_peers, message passing included.
static bool test_from_peers(Suite &s) {
  const size_t vecs = 1024 + 7, bytes = 4096 + vecs * sizeof(uint4);
  const int iters = 2000;
  char *region;
  void *peers[IRIS_MAX_RANKS];
  unsigned long long *errs, *d, h[IRIS_MAX_RANKS];
  unsigned *timeouts;
  iris_device_ctx_t dc, bad;
  IK(iris_calloc(s.ctx, bytes, (void **)&region));
  for (int r = 0; r < s.world; r++) IK(iris_translate_host(s.ctx, region, r, &peers[r]));
  IK(iris_device_context_from_peers(s.rank, s.world, bytes, peers, &dc));
  bool ok = dc.rank == s.rank && dc.world_size == s.world && dc.heap_size == bytes && dc.bases[s.rank] == region && !dc.fault;
  // the rules: rank, world, bytes, NULL peers (each a clear status, *out zeroed)
  ok &= iris_device_context_from_peers(s.world, s.world, bytes, peers, &bad) == IRIS_ERROR_INVALID_RANK && !bad.bases[0];
  ok &= iris_device_context_from_peers(0, IRIS_MAX_RANKS + 1, bytes, peers, &bad) == IRIS_ERROR_INVALID_ARGUMENT;
  ok &= iris_device_context_from_peers(s.rank, s.world, 0, peers, &bad) == IRIS_ERROR_INVALID_ARGUMENT;
  void *saved = peers[s.rank];
  peers[s.rank] = NULL;
  ok &= iris_device_context_from_peers(s.rank, s.world, bytes, peers, &bad) == IRIS_ERROR_INVALID_ARGUMENT && strstr(iris_error_detail(), "own") != NULL;
  peers[s.rank] = saved;
  CK(cudaMalloc(&d, sizeof h));
  k_translate<<<1, 32>>>(dc, region + 100, d);
  CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  for (int r = 0; r < s.world; r++) ok &= h[r] == (unsigned long long)(uintptr_t)((char *)peers[r] + 100);
  CK(cudaMalloc(&errs, sizeof *errs));
  CK(cudaMalloc(&timeouts, sizeof *timeouts));
  CK(cudaMemset(errs, 0, sizeof *errs));
  CK(cudaMemset(timeouts, 0, sizeof *timeouts));
  if (!barrier(s)) return false;
  unsigned *flags = (unsigned *)region;
  k_msgpass<<<2, 256>>>(dc, flags, flags + 64, (uint4 *)(region + 4096), vecs, iters, 0, s.seed + 99, errs, timeouts);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  unsigned long long e;
  unsigned to;
  CK(cudaMemcpy(&e, errs, sizeof e, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&to, timeouts, sizeof to, cudaMemcpyDeviceToHost));
  if (e || to) fprintf(stderr, "rank %d: adopted memory: %llu bad words, %u timed-out waits\n", s.rank, e, to);
  ok &= e == 0 && to == 0;
  report(s, "iris_device_context_from_peers: rules, translation, 2000 messages on adopted memory", ok);
  if (!barrier(s)) return false;
  cudaFree(d);
  cudaFree(errs);
  cudaFree(timeouts);
  IK(iris_free(s.ctx, region));
  return true;
}

// ----------------------------------------------------------------- barrier --
__global__ void k_stamp(iris_device_ctx_t ctx, unsigned long long *slots, unsigned long long v) {
  int d = threadIdx.x;
  if (d < ctx.world_size) iris_store(ctx, slots + ctx.rank, v + (unsigned long long)ctx.rank, d);
}
static bool test_barrier(Suite &s) {
  unsigned long long *slots, h[IRIS_MAX_RANKS];
  IK(iris_malloc(s.ctx, sizeof h, (void **)&slots));
  iris_device_ctx_t dc = iris_device_context(s.ctx);
  bool ok = true;
  for (int it = 0; it < 40; it++) {
    unsigned long long v = key(s.seed, 13, it, 0, 0) & ~0xffULL;
    if (s.rank == it % s.world) usleep(3000); // skew
    k_stamp<<<1, 32>>>(dc, slots, v);
    if (!barrier(s)) return false;
    CK(cudaMemcpy(h, slots, sizeof(unsigned long long) * s.world, cudaMemcpyDeviceToHost));
    for (int r = 0; r < s.world; r++) ok &= h[r] == v + (unsigned long long)r;
    if (!barrier(s)) return false; // nobody stamps the next round before all have read
  }
  report(s, "iris_barrier: peers' stores visible after it, 40 rounds with skew", ok);
  IK(iris_free(s.ctx, slots));
  return true;
}

// -------------------------------------------------------------------- heap --
static bool test_heap(Suite &s) {
  size_t used0 = iris_heap_used(s.ctx), off;
  void *p = NULL, *q = NULL, *outside = NULL;
  bool ok = true;
  // exhaustion leaves the heap as it was and usable
  ok &= iris_malloc(s.ctx, iris_heap_size(s.ctx) - used0 + IRIS_HEAP_ALIGN, &p) == IRIS_ERROR_OUT_OF_MEMORY && p == NULL;
  ok &= iris_heap_used(s.ctx) == used0;
  std::vector<void *> blocks;
  for (;;) {
    void *b;
    if (iris_malloc(s.ctx, (size_t)64 << 20, &b) != IRIS_SUCCESS) break;
    blocks.push_back(b);
  }
  ok &= !blocks.empty() && strstr(iris_error_detail(), "exhausted") != NULL;
  for (void *b : blocks) ok &= iris_free(s.ctx, b) == IRIS_SUCCESS;
  ok &= iris_heap_used(s.ctx) == used0;
  ok &= iris_malloc(s.ctx, (size_t)64 << 20, &q) == IRIS_SUCCESS && iris_free(s.ctx, q) == IRIS_SUCCESS;
  report(s, "heap exhaustion returns OUT_OF_MEMORY and leaves the heap usable", ok);
  // pointers outside the heap
  ok = true;
  if (cudaMalloc(&outside, 256) != cudaSuccess) return false;
  ok &= iris_heap_offset(s.ctx, outside, &off) == IRIS_ERROR_NOT_IN_HEAP;
  ok &= iris_translate_host(s.ctx, outside, 0, &q) == IRIS_ERROR_NOT_IN_HEAP;
  ok &= iris_free(s.ctx, outside) == IRIS_ERROR_NOT_IN_HEAP;
  ok &= iris_translate_host(s.ctx, iris_heap_base(s.ctx, s.rank), s.world, &q) == IRIS_ERROR_INVALID_RANK;
  ok &= iris_heap_base(s.ctx, -1) == NULL && iris_heap_base(s.ctx, s.world) == NULL;
  cudaFree(outside);
  report(s, "pointers outside the heap and bad ranks are refused", ok);
  // divergence is detected collectively, and clears once the ranks agree again
  ok = iris_heap_verify(s.ctx) == IRIS_SUCCESS;
  void *extra = NULL;
  if (s.rank == s.world - 1) ok &= iris_malloc(s.ctx, 1000, &extra) == IRIS_SUCCESS;
  iris_status_t st = iris_heap_verify(s.ctx);
  char want[32];
  snprintf(want, sizeof want, "ranks %d", s.world - 1);
  ok &= st == IRIS_ERROR_MISMATCH && strstr(iris_error_detail(), want) != NULL;
  if (extra) ok &= iris_free(s.ctx, extra) == IRIS_SUCCESS;
  ok &= iris_heap_verify(s.ctx) == IRIS_SUCCESS;
  report(s, "iris_heap_verify detects diverging allocations, names the rank", ok);
  return true;
}

// ---------------------------------------------------------------- the suite --
static bool run_suite(Suite &s) {
  // one seed for all ranks, fresh every run
  uint64_t mine = mix((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20) ^ (uint64_t)s.rank), all[IRIS_MAX_RANKS];
  IK(iris_allgather_host(s.ctx, &mine, all, sizeof mine));
  s.seed = all[0];
  if (s.rank == 0) printf("# [%s] seed %llu\n", s.tag.c_str(), (unsigned long long)s.seed);
  report(s, "bring-up: world size and rank agree", iris_world_size(s.ctx) == s.world && iris_rank(s.ctx) == s.rank);
  { // ranks as threads share a GPU when there are more ranks than GPUs (device = rank % GPUs); processes never share a context
    int ndev = 1;
    cudaGetDeviceCount(&ndev);
    const bool threads = s.tag.rfind("procs", 0) != 0;
    const int nd = ndev > 0 ? ndev : 1;
    int mates = 0; // the ranks of this process on this rank's GPU (device = rank % GPUs), itself included
    for (int r = 0; r < s.world; r++) mates += r % nd == s.rank % nd;
    const int want = threads && mates > 1 ? 1 : 0;
    report(s, "bring-up: a rank knows whether another rank of its process shares its GPU", iris_detail_gpu_shared(s.ctx) == want);
  }
  return test_translate(s) && test_scalar<int>(s, "int32") && test_scalar<long long>(s, "int64") && test_scalar<float>(s, "float") &&
         test_scalar<double>(s, "double") && test_v16(s) && test_bulk(s) &&
#if !defined(IRIS_DEBUG)
         test_bad_coop(s) &&
#endif
         test_atomics<int>(s, "int32") && test_atomics<unsigned>(s, "uint32") &&
         test_atomics<long long>(s, "int64") && test_atomics<unsigned long long>(s, "uint64") && test_fadd<float>(s, "float") &&
         test_fadd<double>(s, "double") && test_ldst(s) && test_msgpass(s) && test_from_peers(s) && test_barrier(s) && test_heap(s);
}

static int finish(Suite &s, bool ran) {
  if (!ran) report(s, "suite ran to the end (see stderr)", false);
  return s.failed ? 1 : 0;
}

// ------------------------------------------------------------------- modes --
static int mode_procs(int n) {
  iris_launch_t L;
  int rank;
  if (iris_launch_local(n, &L, &rank) != IRIS_SUCCESS) { printf("FAIL: [procs w=%d] launch: %s\n", n, iris_error_detail()); return 1; }
  if (rank < 0) {
    iris_status_t st = iris_launch_wait(&L, 600000);
    printf("%s: [procs w=%d] every rank exits cleanly%s%s\n", st == IRIS_SUCCESS ? "PASS" : "FAIL", n, st == IRIS_SUCCESS ? "" : ": ",
           st == IRIS_SUCCESS ? "" : iris_error_detail());
    return st == IRIS_SUCCESS ? 0 : 1;
  }
  if (rank == n - 1) usleep(300000); // arrive late at bring-up
  Suite s = {};
  s.rank = rank;
  s.world = n;
  s.tag = "procs w=" + std::to_string(n);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = (size_t)1 << 30;
  if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS) {
    fprintf(stderr, "rank %d: iris_init: %s\n", rank, iris_error_detail());
    if (rank == 0) printf("FAIL: [%s] bring-up: %s\n", s.tag.c_str(), iris_error_detail());
    return 1;
  }
  bool ran = run_suite(s);
  int rc = finish(s, ran);
  iris_status_t st = iris_finalize(s.ctx);
  if (st != IRIS_SUCCESS) { fprintf(stderr, "rank %d: iris_finalize: %s\n", rank, iris_error_detail()); rc = 1; }
  // teardown, then init again in the same process
  iris_t *again = NULL;
  cfg.heap_size = (size_t)64 << 20;
  bool ok = iris_init(&cfg, &again) == IRIS_SUCCESS;
  if (ok) {
    Suite s2 = {};
    s2.ctx = again;
    s2.rank = rank;
    s2.world = n;
    s2.tag = s.tag;
    ok = test_scalar<int>(s2, "int32 (after re-init)") && s2.failed == 0;
    ok &= iris_finalize(again) == IRIS_SUCCESS;
  } else {
    fprintf(stderr, "rank %d: re-init: %s\n", rank, iris_error_detail());
  }
  if (rank == 0) printf("%s: [%s] finalize then init again in the same process\n", ok && st == IRIS_SUCCESS ? "PASS" : "FAIL", s.tag.c_str());
  return rc || !ok;
}

// bootstrap hooks over threads of one process
struct ThreadGroup {
  pthread_barrier_t bar;
  std::vector<char> buf;
  int n;
};
static ThreadGroup group;
static int hook_barrier(void *) {
  pthread_barrier_wait(&group.bar);
  return 0;
}
struct HookUser {
  int rank;
};
static int hook_allgather(void *u, const void *send, void *recv, size_t bytes) {
  int r = ((HookUser *)u)->rank;
  pthread_barrier_wait(&group.bar);
  if (r == 0) group.buf.assign(bytes * group.n, 0);
  pthread_barrier_wait(&group.bar);
  memcpy(group.buf.data() + r * bytes, send, bytes);
  pthread_barrier_wait(&group.bar);
  memcpy(recv, group.buf.data(), bytes * group.n);
  pthread_barrier_wait(&group.bar);
  return 0;
}
struct ThreadArg {
  int rank, n, rc;
  iris_t *ctx; // mode local: given; mode hooks: created by the thread
  const char *mode;
};
static void *thread_main(void *p) {
  ThreadArg *a = (ThreadArg *)p;
  Suite s = {};
  s.rank = a->rank;
  s.world = a->n;
  s.tag = std::string(a->mode) + " w=" + std::to_string(a->n);
  if (!a->ctx) { // hooks
    HookUser u = {a->rank};
    iris_bootstrap_t boot = {&u, hook_allgather, hook_barrier};
    iris_config_t cfg = IRIS_CONFIG_INIT;
    cfg.rank = a->rank;
    cfg.world_size = a->n;
    int ndev = 1;
    cudaGetDeviceCount(&ndev);
    cfg.device = a->rank % (ndev > 0 ? ndev : 1); // ranks may share a GPU
    cfg.heap_size = (size_t)1 << 30;
    cfg.bootstrap = &boot;
    if (iris_init(&cfg, &s.ctx) != IRIS_SUCCESS) {
      printf("FAIL: [%s] bring-up on rank %d: %s\n", s.tag.c_str(), a->rank, iris_error_detail());
      a->rc = 1;
      return NULL;
    }
    if (a->rank == 0) printf("PASS: [%s] bring-up through bootstrap callbacks\n", s.tag.c_str());
    a->rc = finish(s, run_suite(s));
    if (iris_finalize(s.ctx) != IRIS_SUCCESS) a->rc = 1;
  } else {
    s.ctx = a->ctx;
    cudaSetDevice(iris_device_ordinal(s.ctx));
    a->rc = finish(s, run_suite(s));
  }
  return NULL;
}
static int mode_threads(const char *mode, int n) {
  std::vector<ThreadArg> args(n);
  std::vector<pthread_t> th(n);
  std::vector<iris_t *> ctxs(n, (iris_t *)NULL);
  if (!strcmp(mode, "local")) {
    iris_config_t cfg = IRIS_CONFIG_INIT;
    int ndev = 1;
    cudaGetDeviceCount(&ndev);
    if (ndev < 1) ndev = 1;
    std::vector<int> devs(n);
    for (int i = 0; i < n; i++) devs[i] = i % ndev; // ranks may share a GPU
    cfg.heap_size = (size_t)1 << 30;
    if (iris_init_local(&cfg, n, devs.data(), ctxs.data()) != IRIS_SUCCESS) {
      printf("FAIL: [local w=%d] iris_init_local: %s\n", n, iris_error_detail());
      return 1;
    }
    printf("PASS: [local w=%d] iris_init_local over %d ranks on %d GPUs\n", n, n, n < ndev ? n : ndev);
  } else {
    group.n = n;
    pthread_barrier_init(&group.bar, NULL, n);
  }
  for (int i = 0; i < n; i++) {
    args[i] = {i, n, 0, ctxs[i], mode};
    pthread_create(&th[i], NULL, thread_main, &args[i]);
  }
  int rc = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    rc |= args[i].rc;
  }
  if (!strcmp(mode, "local")) {
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= iris_finalize(ctxs[i]) == IRIS_SUCCESS; // one thread finalizes all
    printf("%s: [local w=%d] finalize every context from one thread\n", ok ? "PASS" : "FAIL", n);
    rc |= !ok;
  }
  return rc;
}

#if defined(IRIS_DEBUG)
// ------------------------------------------------------------ debug failures --
__global__ void k_bad_pointer(iris_device_ctx_t ctx, int *outside) { iris_store(ctx, outside, 1, 0); }
__global__ void k_bad_rank(iris_device_ctx_t ctx, int *inside) { iris_store(ctx, inside, 1, ctx.world_size + 3); }
__global__ void k_other_node(iris_device_ctx_t ctx, int *inside) { iris_store(ctx, inside, 1, 0); } // rank 0 is on node 0, ctx on node 1
// a negative size cast to size_t: the check must refuse it, not wrap a + bytes past the end
__global__ void k_bad_size(iris_device_ctx_t ctx, int *inside, const int *src) { iris_put_bulk(ctx, inside, src, (size_t)0 - 16, 0, 0, 1); }
__global__ void k_never(iris_device_ctx_t ctx, unsigned *flag) { iris_wait_until(ctx, flag, IRIS_CMP_EQ, 12345u, "test-never-set"); }
// a bulk put whose cooperation has no threads (nthreads 0): a stride of 0 never ended
__global__ void k_bad_coop(iris_device_ctx_t ctx, int *inside, const int *src) { iris_put_bulk(ctx, inside, src, 16, 0, 0, 0); }
// a team store to team rank 3 of a team of 1 listed by members (world[3] is 0, a valid
// world rank: it went to rank 0 without a word)
__global__ void k_bad_team_rank(iris_device_ctx_t ctx, iris_team_t team, int *inside) { iris_team_store(ctx, team, inside, 1, 3); }
// a wait whose comparison is not an iris_cmp_t (it compared as IRIS_CMP_EPOCH, silently)
__global__ void k_bad_cmp(iris_device_ctx_t ctx, unsigned *flag) { iris_wait_until(ctx, flag, (iris_cmp_t)42, 0u, "test-bad-cmp"); }
static int mode_debug(const char *what) {
  if (!strcmp(what, "diverge")) {
    iris_launch_t L;
    int rank;
    if (iris_launch_local(2, &L, &rank) != IRIS_SUCCESS) return 2;
    if (rank < 0) return iris_launch_wait(&L, 120000) == IRIS_SUCCESS ? 0 : 1;
    iris_t *ctx;
    iris_config_t cfg = IRIS_CONFIG_INIT;
    cfg.heap_size = (size_t)64 << 20;
    if (iris_init(&cfg, &ctx) != IRIS_SUCCESS) return 2;
    void *p;
    iris_malloc(ctx, 4096, &p);
    if (rank == 1) iris_malloc(ctx, 8192, &p);
    iris_status_t st = iris_barrier(ctx); // IRIS_DEBUG: compares the heaps
    printf("rank %d: iris_barrier -> %s | %s\n", rank, iris_status_string(st), iris_error_detail());
    iris_finalize(ctx);
    return st == IRIS_ERROR_MISMATCH ? 0 : 1;
  }
  iris_t *ctx;
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.rank = 0;
  cfg.world_size = 1;
  cfg.heap_size = (size_t)64 << 20;
  if (iris_init(&cfg, &ctx) != IRIS_SUCCESS) { printf("init: %s\n", iris_error_detail()); return 2; }
  iris_device_ctx_t dc = iris_device_context(ctx);
  int *outside;
  unsigned *flag;
  cudaMalloc(&outside, 64);
  iris_calloc(ctx, 64, (void **)&flag);
  if (!strcmp(what, "bad-pointer")) k_bad_pointer<<<1, 1>>>(dc, outside);
  else if (!strcmp(what, "bad-rank")) k_bad_rank<<<1, 1>>>(dc, (int *)flag);
  else if (!strcmp(what, "other-node")) { // the context of rank 1 = node 1 of a 2 x 1 world (its heap is bases[0])
    dc.rank = 1, dc.world_size = 2, dc.local_rank = 0, dc.local_size = 1, dc.node = 1, dc.num_nodes = 2;
    k_other_node<<<1, 1>>>(dc, (int *)flag);
  }
  else if (!strcmp(what, "bad-size")) k_bad_size<<<1, 1>>>(dc, (int *)flag, outside);
  else if (!strcmp(what, "wait-timeout")) k_never<<<1, 1>>>(dc, flag);
  else if (!strcmp(what, "bad-coop")) k_bad_coop<<<1, 1>>>(dc, (int *)flag, outside);
  else if (!strcmp(what, "bad-cmp")) k_bad_cmp<<<1, 1>>>(dc, flag);
  else if (!strcmp(what, "bad-team-rank")) {
    iris_team_t t;
    memset(&t, 0, sizeof t);
    t.size = 1, t.rank = 0, t.stride = 0, t.slot = -1, t.coll = -1; // member 0 is world rank 0 (world[] form)
    k_bad_team_rank<<<1, 1>>>(dc, t, (int *)flag);
  }
  else { printf("unknown debug mode %s\n", what); return 2; }
  cudaError_t e = cudaDeviceSynchronize();
  fflush(stdout);
  printf("kernel ended: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess ? 3 : 0; // 3: trapped, as expected
}
#endif

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *mode = argc > 1 ? argv[1] : "procs";
  int n = argc > 2 ? atoi(argv[2]) : 2;
#if defined(IRIS_DEBUG)
  if (strcmp(mode, "procs") && strcmp(mode, "hooks") && strcmp(mode, "local")) return mode_debug(mode);
#endif
  if (n < 1 || n > IRIS_MAX_RANKS) { printf("usage: gpu_test procs|hooks|local N\n"); return 2; }
  if (!strcmp(mode, "procs")) return mode_procs(n);
  if (!strcmp(mode, "hooks") || !strcmp(mode, "local")) return mode_threads(mode, n);
  printf("usage: gpu_test procs|hooks|local N\n");
  return 2;
}
