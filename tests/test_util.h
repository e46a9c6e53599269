// Shared by the GPU test programs: status macros, deterministic random values that
// host and device compute alike, and the collective PASS/FAIL report.
#ifndef IRIS_TEST_UTIL_H
#define IRIS_TEST_UTIL_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <string>

#define CK(x)                                                                                           \
  do {                                                                                                  \
    cudaError_t e_ = (x);                                                                               \
    if (e_ != cudaSuccess) {                                                                            \
      fprintf(stderr, "gpu_test: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      return false;                                                                                     \
    }                                                                                                   \
  } while (0)
#define IK(x)                                                                                           \
  do {                                                                                                  \
    iris_status_t s_ = (x);                                                                             \
    if (s_ != IRIS_SUCCESS) {                                                                           \
      fprintf(stderr, "gpu_test: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, iris_error_detail());         \
      return false;                                                                                     \
    }                                                                                                   \
  } while (0)

__host__ __device__ inline uint64_t mix(uint64_t x) { // splitmix64
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
__host__ __device__ inline uint64_t key(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return mix(seed ^ mix(a * 0x100000001B3ULL ^ mix(b * 0x9E37ULL ^ mix(c * 31 + d))));
}
template <typename T> __host__ __device__ inline T gen(uint64_t h);
template <> __host__ __device__ inline int gen<int>(uint64_t h) { return (int)h; }
template <> __host__ __device__ inline unsigned gen<unsigned>(uint64_t h) { return (unsigned)h; }
template <> __host__ __device__ inline long long gen<long long>(uint64_t h) { return (long long)h; }
template <> __host__ __device__ inline unsigned long long gen<unsigned long long>(uint64_t h) { return h; }
template <> __host__ __device__ inline float gen<float>(uint64_t h) { return (float)((int64_t)(h % 2000001) - 1000000) * 0.125f; }
template <> __host__ __device__ inline double gen<double>(uint64_t h) { return (double)((int64_t)(h % 2000000001) - 1000000000) * 0.0625; }
template <typename T> inline bool same(T a, T b) { return memcmp(&a, &b, sizeof a) == 0; }

struct Suite {
  iris_t *ctx;
  int rank, world;
  std::string tag;
  uint64_t seed;
  int passed, failed;
  cudaStream_t stream;
};
static pthread_mutex_t print_mu = PTHREAD_MUTEX_INITIALIZER;

// Collective: every rank passes its verdict; rank 0 prints the combined one.
static bool report(Suite &s, const char *name, bool ok) {
  int mine = ok ? 1 : 0, all[IRIS_MAX_RANKS];
  iris_status_t st = iris_allgather_host(s.ctx, &mine, all, sizeof mine);
  bool every = st == IRIS_SUCCESS;
  std::string bad;
  for (int r = 0; every && r < s.world; r++)
    if (!all[r]) bad += (bad.empty() ? "" : ",") + std::to_string(r);
  if (st != IRIS_SUCCESS) bad = std::string("allgather failed: ") + iris_error_detail();
  bool pass = every && bad.empty();
  if (s.rank == 0) {
    pthread_mutex_lock(&print_mu);
    if (pass) printf("PASS: [%s] %s\n", s.tag.c_str(), name);
    else printf("FAIL: [%s] %s: failed on ranks %s\n", s.tag.c_str(), name, bad.c_str());
    fflush(stdout);
    pthread_mutex_unlock(&print_mu);
  }
  (pass ? s.passed : s.failed)++;
  return pass;
}
static bool barrier(Suite &s) { IK(iris_barrier(s.ctx)); return true; }
static void poison(void *p, size_t bytes) { cudaMemset(p, 0xA5, bytes); cudaDeviceSynchronize(); }

#endif
