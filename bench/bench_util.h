// Shared by the benchmarks: a failed CUDA or iris call prints where and why, and ends
// the program (benchmarks are programs, not library code).
#ifndef IRIS_BENCH_UTIL_H
#define IRIS_BENCH_UTIL_H
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                                     \
  do {                                                                                                            \
    cudaError_t e_ = (x);                                                                                         \
    if (e_ != cudaSuccess) { fprintf(stderr, "bench: %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } \
  } while (0)
#define IK(x)                                                                                                     \
  do {                                                                                                            \
    if ((x) != IRIS_SUCCESS) { fprintf(stderr, "bench: %s:%d %s: %s\n", __FILE__, __LINE__, #x, iris_error_detail()); exit(1); } \
  } while (0)
#endif
