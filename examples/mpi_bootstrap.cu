/* mpi_bootstrap.cu: bring-up mode 2, where MPI carries iris's bring-up exchange.
 *
 * With cfg.bootstrap set, iris_init (and iris_barrier, iris_finalize) call your
 * allgather and barrier instead of iris's own rendezvous socket: here MPI_Allgather on
 * MPI_BYTE and MPI_Barrier, with rank and world size from MPI. A tiny kernel then shows
 * that the heaps are mapped: each rank writes into its right neighbour's inbox, and
 * after a barrier each rank checks what its left neighbour wrote. MPI only replaces the
 * exchange: the heaps are still mapped with GPU IPC, so all ranks must share one host.
 *
 * Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. -I/usr/lib/x86_64-linux-gnu/openmpi/include examples/mpi_bootstrap.cu
 *          -o build/mpi_bootstrap -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi
 *        (AMD: hipcc -O2 -x hip --offload-arch=gfx90a with the same -I/-L/-l flags)
 * Run:   mpirun --allow-run-as-root -np 2 build/mpi_bootstrap
 * Exits non-zero if a value is wrong; any failed call aborts every rank (MPI_Abort). */
#define IRIS_IMPLEMENTATION
#include "iris.h"
#include "iris_device.h"
#include <limits.h>
#define OMPI_SKIP_MPICXX 1 /* the C API only, without MPI's old C++ bindings */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdio.h>

#if defined(IRIS_USE_HIP) /* the few vendor runtime calls used here */
typedef hipError_t gpuError_t;
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuSetDevice hipSetDevice
#define gpuGetLastError hipGetLastError
#define gpuMemcpy(dst, src, n) hipMemcpy(dst, src, n, hipMemcpyDeviceToHost)
#else
typedef cudaError_t gpuError_t;
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuSetDevice cudaSetDevice
#define gpuGetLastError cudaGetLastError
#define gpuMemcpy(dst, src, n) cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost)
#endif
/* On failure abort every rank: the others may be blocked in an MPI collective. */
#define TRY_IRIS(call) do { iris_status_t s_ = (call); if (s_ != IRIS_SUCCESS) { \
  fprintf(stderr, "%s failed: %s\n  %s\n", #call, iris_status_string(s_), iris_error_detail()); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define TRY_GPU(call) do { gpuError_t e_ = (call); if (e_ != gpuSuccess) { \
  fprintf(stderr, "%s failed: %s\n", #call, gpuGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

/* The bootstrap callbacks: collective over `user` (an MPI communicator); 0 on success.
 * Allgather must place rank r's block at offset r * bytes, as MPI_Allgather does. */
static int mpi_allgather(void *user, const void *send, void *recv, size_t bytes) {
  if (bytes > INT_MAX) return 1;
  return MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, *(MPI_Comm *)user) != MPI_SUCCESS;
}
static int mpi_barrier(void *user) { return MPI_Barrier(*(MPI_Comm *)user) != MPI_SUCCESS; }

enum { INBOX = 256 }; /* ints per inbox */

/* What rank `from` writes into element i of its neighbour's inbox; never 0 or 1. */
__host__ __device__ inline int stamp(int from, int i) { return (from + 1) * 100000 + i * 3 + 7; }

/* One thread per element: write this rank's stamps into the right neighbour's inbox. */
__global__ void write_right(iris_device_ctx_t ctx, int *inbox) {
  int i = threadIdx.x, right = (ctx.rank + 1) % ctx.world_size;
  if (i < INBOX) iris_store(ctx, &inbox[i], stamp(ctx.rank, i), right);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm comm; /* a communicator of iris's own, so its collectives never mix with the program's */
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank, world;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);

  iris_bootstrap_t boot = {&comm, mpi_allgather, mpi_barrier};
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.rank = rank;
  cfg.world_size = world;
  cfg.bootstrap = &boot;            /* copied; boot.user (&comm) is used until iris_finalize */
  cfg.heap_size = (size_t)64 << 20; /* the default is 1 GiB */
  iris_t *ctx;
  TRY_IRIS(iris_init(&cfg, &ctx)); /* device: rank % visible GPUs, unless cfg.device / IRIS_DEVICE says otherwise */

  int *inbox;
  TRY_IRIS(iris_calloc(ctx, INBOX * sizeof(int), (void **)&inbox));
  TRY_IRIS(iris_barrier(ctx)); /* our zeros land before the left neighbour writes */
  write_right<<<1, INBOX>>>(iris_device_context(ctx), inbox);
  TRY_GPU(gpuGetLastError());
  TRY_IRIS(iris_barrier(ctx)); /* every rank's kernel has ended: its writes are visible */

  int got[INBOX], left = (rank + world - 1) % world, bad = 0;
  TRY_GPU(gpuMemcpy(got, inbox, sizeof got));
  for (int i = 0; i < INBOX; i++) bad += got[i] != stamp(left, i);
  printf("rank %d of %d (GPU %d): %d of %d values from rank %d as expected\n", rank, world, iris_device_ordinal(ctx), INBOX - bad, INBOX, left);

  TRY_IRIS(iris_finalize(ctx)); /* collective: uses the MPI barrier one last time */
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return bad != 0;
}
