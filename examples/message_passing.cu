/* message_passing.cu: producer/consumer messages around a ring of GPUs.
 *
 * Rank r sends NUM_MSGS messages of 64 KiB to rank r+1 and receives as many from r-1,
 * all in one kernel. The producer writes message i into the receiver's inbox
 * (iris_put_bulk) and publishes it with a release flag full = i there; the consumer
 * acquires full >= i, checks the payload and hands the slot back with a release flag
 * ack = i on the producer, which waits for it before it reuses the slot. Both flags are
 * epochs: they only count up, and the second launch below simply goes on counting.
 *
 * Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. examples/message_passing.cu -o build/message_passing
 *        hipcc -O2 -x hip --offload-arch=gfx90a -I. examples/message_passing.cu -o build/message_passing
 * Run:   build/message_passing [ranks]  starts one rank per visible GPU, or [ranks] ranks;
 *        under mpirun or a launcher that sets IRIS_RANK, each process is one rank.
 * Exits non-zero on a wrong word, a timed-out wait or a failed rank. */
#define IRIS_IMPLEMENTATION
#include "iris.h"
#include "iris_device.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(IRIS_USE_HIP) /* the few vendor runtime calls used here */
typedef hipError_t gpuError_t;
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuMemcpy(dst, src, n) hipMemcpy(dst, src, n, hipMemcpyDeviceToHost)
#else
typedef cudaError_t gpuError_t;
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuMemcpy(dst, src, n) cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost)
#endif
#define TRY_IRIS(call) do { iris_status_t s_ = (call); if (s_ != IRIS_SUCCESS) { \
  fprintf(stderr, "%s failed: %s\n  %s\n", #call, iris_status_string(s_), iris_error_detail()); return 1; } } while (0)
#define TRY_GPU(call) do { gpuError_t e_ = (call); if (e_ != gpuSuccess) { \
  fprintf(stderr, "%s failed: %s\n", #call, gpuGetErrorString(e_)); return 1; } } while (0)

enum { MSG_BYTES = 65536, MSG_VECS = MSG_BYTES / 16, SLOTS = 2, THREADS = 256, NUM_MSGS = 1000 };

struct channel {   /* heap pointers, so the same offsets on every rank */
  uint4 *inbox;    /* (SLOTS, MSG_VECS); the left neighbour writes message i into slot i % SLOTS */
  unsigned *full;  /* the left neighbour sets it to i once message i is in the inbox */
  unsigned *ack;   /* the right neighbour sets it to i once it has read message i */
  uint4 *stage;    /* (MSG_VECS); the sender builds each message here */
};
struct result { unsigned received, errors, stuck; }; /* stuck: the message at which a wait timed out */

/* 16 bytes of message i from rank `from`; every word differs by sender, message and place. */
__device__ uint4 payload(int from, unsigned i, unsigned v) {
  unsigned h = (unsigned)(from + 1) * 0x9E3779B1u ^ i * 0x85EBCA77u ^ v * 0xC2B2AE3Du;
  return make_uint4(h, h ^ 0x11111111u, h ^ 0x22222222u, h ^ 0x44444444u);
}

/* Whole block (tid = 0..nthreads-1): send messages first..last into rank `to`'s inbox. */
__device__ void send_messages(const iris_device_ctx_t &ctx, channel l, result *res, unsigned first, unsigned last, int to, int tid, int nthreads) {
  for (unsigned i = first; i <= last; i++) {
    for (int v = tid; v < MSG_VECS; v += nthreads) l.stage[v] = payload(ctx.rank, i, v);
    /* The slot last held message i - SLOTS: wait (acquire) until the receiver has acked
     * it, or we would overwrite data it may still be reading. */
    if (i > SLOTS && !iris_wait_block(ctx, l.ack, IRIS_CMP_EPOCH, i - SLOTS, "sender: ack")) { if (tid == 0) res->stuck = i; return; }
    __syncthreads(); /* the whole stage is written before any thread copies from it */
    iris_put_bulk(ctx, l.inbox + (i % SLOTS) * MSG_VECS, l.stage, MSG_BYTES, to, tid, nthreads);
    /* Publish. A release covers only the releasing thread's own writes, so the block
     * first meets at __syncthreads; then thread 0 release-stores full = i. System scope:
     * the reader is another GPU, which block or device scope would not order for. */
    iris_signal_block(ctx, l.full, i, to);
  }
}

/* Whole block: receive messages first..last from rank `from`, count wrong words. */
__device__ void receive_messages(const iris_device_ctx_t &ctx, channel l, result *res, unsigned first, unsigned last, int from, int tid, int nthreads) {
  unsigned errors = 0;
  for (unsigned i = first; i <= last; i++) {
    /* Thread 0 acquires full >= i, then the block meets; now every thread may read.
     * Epoch compare: the sender may already be further on, and it is wrap-safe. */
    if (!iris_wait_block(ctx, l.full, IRIS_CMP_EPOCH, i, "receiver: full")) { if (tid == 0) res->stuck = i; break; }
    const uint4 *msg = l.inbox + (i % SLOTS) * MSG_VECS;
    for (int v = tid; v < MSG_VECS; v += nthreads) {
      uint4 got = msg[v], want = payload(from, i, v);
      errors += (got.x != want.x) + (got.y != want.y) + (got.z != want.z) + (got.w != want.w);
    }
    /* Hand the slot back: a release, not a relaxed store, so that every thread's reads
     * of the slot are done before the sender can see the ack and overwrite it. */
    iris_signal_block(ctx, l.ack, i, from);
    if (tid == 0) res->received++;
  }
  if (errors) atomicAdd(&res->errors, errors);
}

/* Block 0 sends right, block 1 receives from the left. The ranks' blocks wait on each
 * other, so both blocks must be resident at once: 2 blocks always are on an idle GPU;
 * a larger persistent grid must fit in one wave. */
__global__ void ring(iris_device_ctx_t ctx, channel l, result *res, unsigned first, unsigned last) {
  int right = (ctx.rank + 1) % ctx.world_size, left = (ctx.rank + ctx.world_size - 1) % ctx.world_size;
  if (blockIdx.x == 0) send_messages(ctx, l, res, first, last, right, threadIdx.x, blockDim.x);
  else receive_messages(ctx, l, res, first, last, left, threadIdx.x, blockDim.x);
}

static double now_s(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

int main(int argc, char **argv) {
  /* One rank per visible GPU (or argv[1] ranks), unless a launcher such as mpirun
   * already started us: then iris_launch_local forks nothing and returns our rank. */
  iris_launch_t launch;
  int me;
  TRY_IRIS(iris_launch_local(argc > 1 ? atoi(argv[1]) : 0, &launch, &me));
  if (me < 0) { TRY_IRIS(iris_launch_wait(&launch, 600000)); return 0; } /* names every failed rank */
  iris_t *ctx;
  TRY_IRIS(iris_init(NULL, &ctx));
  int rank = iris_rank(ctx), world = iris_world_size(ctx);
  channel l;
  result *res, r[2]; /* run 0 warms up, run 1 is timed */
  TRY_IRIS(iris_calloc(ctx, SLOTS * MSG_BYTES, (void **)&l.inbox)); /* same sizes, same order, every rank */
  TRY_IRIS(iris_calloc(ctx, sizeof(unsigned), (void **)&l.full));
  TRY_IRIS(iris_calloc(ctx, sizeof(unsigned), (void **)&l.ack));
  TRY_IRIS(iris_malloc(ctx, MSG_BYTES, (void **)&l.stage));
  TRY_IRIS(iris_calloc(ctx, sizeof r, (void **)&res));
  double secs = 0;
  for (int run = 0; run < 2; run++) {
    /* The first barrier also shows the peers our zeroed flags before anyone signals. */
    TRY_IRIS(iris_barrier(ctx));
    double t0 = now_s();
    /* Run 1 goes on counting from run 0 (messages 1001..2000): flags are never reset.
     * A reset to 0 is a second writer that can land after the peer's next signal and
     * erase it (a hang); a counter that only its one writer moves up needs no care. */
    ring<<<2, THREADS>>>(iris_device_context(ctx), l, res + run, run * NUM_MSGS + 1, (run + 1) * NUM_MSGS);
    TRY_GPU(gpuGetLastError());
    TRY_IRIS(iris_barrier(ctx)); /* waits for this GPU (reports a fault), then every rank */
    secs = now_s() - t0;
  }
  TRY_GPU(gpuMemcpy(r, res, sizeof r));
  unsigned errors = r[0].errors + r[1].errors, stuck = r[0].stuck ? r[0].stuck : r[1].stuck;
  printf("rank %d: %u messages of %d bytes from rank %d, %u errors, %.2f GB/s\n", rank, r[1].received, MSG_BYTES, (rank + world - 1) % world, errors,
         r[1].received * (double)MSG_BYTES / secs * 1e-9);
  if (stuck) printf("rank %d: a wait timed out at message %u (build with -DIRIS_DEBUG to see which)\n", rank, stuck);
  TRY_IRIS(iris_finalize(ctx));
  return errors || stuck || r[0].received + r[1].received != 2 * NUM_MSGS;
}
