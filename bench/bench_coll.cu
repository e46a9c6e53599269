// bench_coll: iris collectives beside NCCL, in the same processes and the same run (NVIDIA).
//   all_reduce (bf16 sum at every size, fp32 sum at a few), all_gather, reduce_scatter,
//   all_to_all, broadcast (root 0); bf16 elements (BENCH_DTYPE, BENCH_OP below: other
//   types and reductions); sizes 1 KiB .. max_bytes by powers of 2.
//   Variants at each size: nccl (cudaMalloc buffers), nccl_symm (ncclMemAlloc buffers in
//   windows registered NCCL_WIN_COLL_SYMMETRIC), iris_auto, iris_latency (sizes up to
//   256 KiB), iris_bandwidth, iris_2shot_ll (all_reduce up to W x IRIS_COLL_LL2_BYTES,
//   broadcast at 3+ ranks up to (W-1) x that), and with --lib the same iris_auto calls
//   through libiris.so (iris_lib). The iris buffers live on the symmetric heap.
// Size ("bytes"): all_reduce, broadcast: the message; all_gather: the input per rank (the
//   output is ranks x that); reduce_scatter, all_to_all: the input per rank, split in W
//   equal parts. algbw = (all_gather: the output, else: the size) / time; busbw = algbw x
//   NCCL's factor: all_reduce 2(W-1)/W; all_gather, reduce_scatter, all_to_all (W-1)/W;
//   broadcast 1. Both from the graph time.
// Timing, per variant, each phase after an iris_barrier: eager = batches of K back-to-back
//   calls between CUDA events, after 5 warm-up calls; graph = K calls captured into one CUDA
//   graph on a non-default stream, 2 warm-up replays, then R timed replays. K = R = 20 up
//   to 4 MiB, 5 above. Time per op = batch / K; median over batches on each rank; reported:
//   the max over ranks of those medians. "x graph" / "x eager" on iris_auto rows: the
//   best NCCL variant's time over iris_auto's.
// Correctness: inputs are a hash of (seed, rank, index), never zero, with a new seed per
//   variant; the output is poisoned with NaN first. After timing every output element is
//   checked on the GPU against a double-precision reference recomputed from the hash:
//   exact for all_gather, all_to_all, broadcast; for sums within one rounding of the
//   result plus one rounding of each partial sum (bf16 or fp32). A wrong row: exit 1.
//   (fp8: the same bound in fp8 ulps; min, max and uint8: exact, uint8 sums modulo 256.)
// Usage: bench_coll [ranks] [max_bytes] [--quick] [--small]
//   ranks: 0 (default) = one per visible GPU (starts its own ranks; also runs under mpirun)
//   max_bytes: K/M/G suffix, default 1G. --quick or BENCH_QUICK=1: 1K, 64K, 1M, 16M, 256M.
//   BENCH_ONLY=all_reduce,all_gather,...: only these collectives; BENCH_STEP=4: sizes
//   grow by 4x instead of 2x; BENCH_MIN_KB=n: start the sweep at n KiB. On 4xH200 the whole sweep takes over 10 minutes: split it
//   over calls, e.g. BENCH_ONLY=all_reduce,all_gather then the other three.
//   BENCH_VARIANTS=nccl,iris_auto,...: only the variants whose name appears in the list
//   ("nccl_symm" brings "nccl" too). BENCH_NO_FP32=1: no fp32 all_reduce rows.
//   BENCH_CTAS=n: the iris_bandwidth rows with n CTAs per rank instead of the automatic count.
//   BENCH_AUTO_CTAS=n: the iris_auto / iris_lib rows with opts.ctas = n (at most n CTAs on any path).
//   BENCH_DTYPE=bf16|fp32|uint8|fp8e4m3|fp8e5m2: the element type of the sweep (default
//   bf16, plus the fp32 all_reduce rows; another type replaces both). BENCH_OP=sum|min|
//   max|avg: the reduction of all_reduce and reduce_scatter (default sum; NCCL's ncclAvg
//   pre-multiplies each input by 1/W for floating types, iris divides the sum). NCCL rows
//   for fp8 need NCCL 2.24+ (and sm_90); without it they are skipped.
//   BENCH_CSV=path: every row as CSV. BENCH_PNG=path: time and busbw against size per
//   collective (python3 + matplotlib). BENCH_TIMEOUT_S: end the ranks after this long
//   (default 3600). NVLink multicast is off (NCCL_NVLS_ENABLE=0).
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. bench/bench_coll.cu -o build/bench_coll -lnccl
#define IRIS_IMPLEMENTATION
#include "../iris_collectives.h"
#include "bench_util.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <nccl.h>

#include <algorithm>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <string>
#include <type_traits>
#include <vector>

#define NK(x)                                                                                                     \
  do {                                                                                                            \
    ncclResult_t e_ = (x);                                                                                        \
    if (e_ != ncclSuccess) { fprintf(stderr, "bench: %s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(e_)); exit(1); } \
  } while (0)

enum { C_AR, C_AG, C_RS, C_A2A, C_BC, C_N };
static const char *coll_name[C_N] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"};
enum { V_NCCL, V_NCCL_SYMM, V_AUTO, V_LIB, V_LATENCY, V_BANDWIDTH, V_LL2, V_OLD, V_ARMED, V_ARMED_NOPDL, V_NOCHECK, V_N };
static const char *var_name[V_N] = {"nccl", "nccl_symm", "iris_auto", "iris_lib", "iris_latency", "iris_bandwidth", "iris_2shot_ll",
                                    "iris_old", "iris_armed", "iris_armed_nopdl", "iris_nocheck"};
// --small (BENCH_SMALL=1): the latency path's parts, 1..SMALL_MAX bytes, beside iris_auto:
//   iris_old          iris_auto on a context with IRIS_COLL_PDL=0 (the latency path before PDL)
//   iris_armed        the armed one-shot (IRIS_ALGO_ONE_SHOT_ARMED; reductions of float types)
//   iris_armed_nopdl  the same on the context with IRIS_COLL_PDL=0
//   iris_nocheck      iris_auto on a context with IRIS_COLL_CHECK=0 (no header matching)
// The two extra contexts share this program's ranks (bootstrap over its context); the
// buffers are the iris_auto ones (the latency path takes any device memory).
static const size_t SMALL_MAX = 64 << 10;
static bool small_mode;
static iris_t *ctx_nopdl, *ctx_nocheck;
static const size_t KiB = 1024, MiB = KiB << 10, GiB = MiB << 10;
static const size_t LATENCY_MAX = IRIS_COLL_LL_BYTES; // iris_latency runs up to this size

static int rank, W;
static int env_int(const char *name, int dflt) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : dflt;
}
static iris_t *ctx;
static ncclComm_t comm;
static int force_ctas; // --company: iris_auto with this many CTAs (0: automatic)
static cudaStream_t stream;
static cudaEvent_t ev[40];
static unsigned long long *d_bad;
struct Bufs { void *in, *out; };
static Bufs buf[4]; // 0: cudaMalloc (nccl), 1: ncclMemAlloc + windows (nccl_symm), 2: iris heap, 3: libiris.so's heap
// BENCH_OFF_HEAP=1: the iris variants take NCCL's cudaMalloc buffers (off the heap: the
// staging paths, as the JAX and NCCL-API doors run), the same for every variant.
static int off_heap = -1;
static int buf_of(int v) {
  if (off_heap < 0) off_heap = getenv("BENCH_OFF_HEAP") && !strcmp(getenv("BENCH_OFF_HEAP"), "1");
  return v == V_NCCL ? 0 : v == V_NCCL_SYMM ? 1 : off_heap ? 0 : v == V_LIB ? 3 : 2;
}
static bool small_variant(int v) { return v >= V_OLD; }

// ------------------------------------------------------------------ libiris.so, the second door
// The same calls through the shared library, in the same process: dlopen'ed with its own
// symbols (RTLD_DEEPBIND; this program's iris is not exported), its context brought up in
// mode 2 (bootstrap callbacks, as the Python bindings do) over this program's context.
// Both share the CUDA runtime (this program is linked with -cudart shared).
struct LibApi {
  void *h;
  iris_status_t (*init)(const iris_config_t *, iris_t **);
  iris_status_t (*setup)(iris_t *);
  iris_status_t (*malloc_)(iris_t *, size_t, void **);
  iris_status_t (*free_)(iris_t *, void *);
  iris_status_t (*finalize)(iris_t *);
  const char *(*detail)(void);
  int (*version)(void);
  size_t (*abi_size)(const char *);
  iris_status_t (*ar)(iris_t *, const void *, void *, size_t, iris_dtype_t, iris_redop_t, iris_stream_t, const iris_coll_opts_t *);
  iris_status_t (*ag)(iris_t *, const void *, void *, size_t, iris_dtype_t, iris_stream_t, const iris_coll_opts_t *);
  iris_status_t (*rs)(iris_t *, const void *, void *, size_t, iris_dtype_t, iris_redop_t, iris_stream_t, const iris_coll_opts_t *);
  iris_status_t (*a2a)(iris_t *, const void *, void *, size_t, iris_dtype_t, iris_stream_t, const iris_coll_opts_t *);
  iris_status_t (*bc)(iris_t *, const void *, void *, size_t, iris_dtype_t, int, iris_stream_t, const iris_coll_opts_t *);
};
static LibApi lib;
static iris_t *lib_ctx;
template <typename F> static bool lib_sym(F &f, const char *name) {
  f = (F)dlsym(lib.h, name);
  if (!f) fprintf(stderr, "bench: the library has no symbol %s\n", name);
  return f != NULL;
}
// Returns false (with a note) if the library cannot be used; exits on a failure after that.
static bool lib_open(const char *path) {
  lib.h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!lib.h) { fprintf(stderr, "bench: cannot load %s: %s\n", path, dlerror()); return false; }
  bool ok = lib_sym(lib.init, "iris_init") && lib_sym(lib.setup, "iris_collectives_setup") && lib_sym(lib.malloc_, "iris_malloc") &&
            lib_sym(lib.free_, "iris_free") && lib_sym(lib.finalize, "iris_finalize") && lib_sym(lib.detail, "iris_error_detail") &&
            lib_sym(lib.version, "iris_get_version") && lib_sym(lib.abi_size, "iris_abi_struct_size") && lib_sym(lib.ar, "iris_all_reduce_ex") &&
            lib_sym(lib.ag, "iris_all_gather_ex") && lib_sym(lib.rs, "iris_reduce_scatter_ex") && lib_sym(lib.a2a, "iris_all_to_all_ex") &&
            lib_sym(lib.bc, "iris_broadcast_ex");
  if (ok && (lib.version() != IRIS_VERSION || lib.abi_size("iris_config_t") != sizeof(iris_config_t) || lib.abi_size("iris_coll_opts_t") != sizeof(iris_coll_opts_t))) {
    fprintf(stderr, "bench: %s was built from other headers (version %d, here %d)\n", path, lib.version(), IRIS_VERSION);
    ok = false;
  }
  return ok;
}
static int lib_allgather(void *, const void *send, void *recv, size_t bytes) { return iris_allgather_host(ctx, send, recv, bytes) != IRIS_SUCCESS; }
static int lib_barrier(void *) { return iris_barrier(ctx) != IRIS_SUCCESS; }
static const iris_bootstrap_t lib_boot = {NULL, lib_allgather, lib_barrier};
#define LK(x)                                                                                                     \
  do {                                                                                                            \
    if ((x) != IRIS_SUCCESS) { fprintf(stderr, "bench: %s:%d %s: %s\n", __FILE__, __LINE__, #x, lib.detail()); exit(1); } \
  } while (0)

// ------------------------------------------------------------------ data and checks
// Value i of rank r's input under a seed: +-[1/16, 1), never zero.
__host__ __device__ inline float gen(unsigned long long seed, int r, size_t i) {
  unsigned long long x = seed * 0x9E3779B97F4A7C15ull + ((unsigned long long)r << 40) + i;
  x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27; x *= 0x94D049BB133111EBull; x ^= x >> 31;
  float m = 0.0625f + 0.9375f * (float)(x >> 40) * (1.0f / 16777216.0f);
  return (x & 1) ? -m : m;
}
template <typename T> __device__ inline T to_t(float v);
template <> __device__ inline float to_t<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 to_t<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ inline unsigned char to_t<unsigned char>(float v) { return (unsigned char)(int)(v * 127.f + 128.f); } // 1 .. 254
template <> __device__ inline iris_fp8_e4m3_t to_t<iris_fp8_e4m3_t>(float v) { iris_fp8_e4m3_t x; x.bits = iris_float_to_fp8_e4m3(v); return x; }
template <> __device__ inline iris_fp8_e5m2_t to_t<iris_fp8_e5m2_t>(float v) { iris_fp8_e5m2_t x; x.bits = iris_float_to_fp8_e5m2(v); return x; }
__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float to_f(unsigned char v) { return v; }
__device__ inline float to_f(iris_fp8_e4m3_t v) { return iris_fp8_e4m3_to_float(v.bits); }
__device__ inline float to_f(iris_fp8_e5m2_t v) { return iris_fp8_e5m2_to_float(v.bits); }
template <typename T> __device__ inline double val(unsigned long long seed, int r, size_t i) { return to_f(to_t<T>(gen(seed, r, i))); }

// The element types of the sweep (BENCH_DTYPE), with NCCL's names where NCCL has them.
enum { D_BF16, D_FP32, D_UINT8, D_E4M3, D_E5M2, D_N };
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
#define BENCH_NCCL_FP8 1
#else
#define BENCH_NCCL_FP8 0
#endif
static const struct { const char *name; iris_dtype_t iris; ncclDataType_t nccl; int nccl_ok; size_t size; double ulp; } dts[D_N] = {
    {"bf16", IRIS_BFLOAT16, ncclBfloat16, 1, 2, 1.0 / (1 << 7)},
    {"fp32", IRIS_FLOAT32, ncclFloat32, 1, 4, 1.0 / (1 << 23)},
    {"uint8", IRIS_UINT8, ncclUint8, 1, 1, 0},
#if BENCH_NCCL_FP8
    {"fp8e4m3", IRIS_FLOAT8_E4M3, ncclFloat8e4m3, 1, 1, 1.0 / 8},
    {"fp8e5m2", IRIS_FLOAT8_E5M2, ncclFloat8e5m2, 1, 1, 1.0 / 4},
#else
    {"fp8e4m3", IRIS_FLOAT8_E4M3, ncclUint8, 0, 1, 1.0 / 8},
    {"fp8e5m2", IRIS_FLOAT8_E5M2, ncclUint8, 0, 1, 1.0 / 4},
#endif
};
static const char *redop_name[IRIS_REDOP_COUNT] = {"sum", "min", "max", "avg"};
static const ncclRedOp_t nccl_op[IRIS_REDOP_COUNT] = {ncclSum, ncclMin, ncclMax, ncclAvg};
static int redop = IRIS_SUM; // BENCH_OP

template <typename T>
__global__ void k_fill(T *p, size_t n, unsigned long long seed, int r) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = to_t<T>(gen(seed, r, i));
}
// Counts the output elements that differ from the reference (NaN never passes).
// op: the reduction (sum and avg within the tolerance, min and max exact; uint8 always
// exact: the sum modulo 256, avg that divided by w).
template <typename T>
__global__ void k_check(const T *out, size_t n, int coll, int op, unsigned long long seed, int w, int me, size_t count, double rtol, double atol,
                        unsigned long long *bad) {
  const bool integer = std::is_same<T, unsigned char>::value; // uint8
  unsigned long long nbad = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    double ref = 0;
    bool exact = true;
    if (coll == C_AR || coll == C_RS) {
      const size_t j = coll == C_AR ? i : me * count + i;
      for (int r = 0; r < w; r++) {
        const double v = val<T>(seed, r, j);
        ref = r == 0 ? v : op == IRIS_MIN ? fmin(ref, v) : op == IRIS_MAX ? fmax(ref, v) : ref + v;
      }
      if (integer && (op == IRIS_SUM || op == IRIS_AVG)) ref = fmod(ref, 256.0);
      if (op == IRIS_AVG) ref = integer ? floor(ref / w) : ref / w;
      exact = integer || op == IRIS_MIN || op == IRIS_MAX;
    }
    else if (coll == C_AG) ref = val<T>(seed, (int)(i / count), i % count);
    else if (coll == C_A2A) ref = val<T>(seed, (int)(i / count), me * count + i % count);
    else ref = val<T>(seed, 0, i);
    double got = to_f(out[i]);
    bool ok = exact ? got == ref : fabs(got - ref) <= rtol * fabs(ref) + atol;
    nbad += !ok;
  }
  if (nbad) atomicAdd(bad, nbad);
}

// ------------------------------------------------------------------ one collective call
struct Op {
  int coll, dt; // dt: index into dts
  size_t count, in_elems, out_elems, elt; // count: the count argument of the call
  double bytes, algbytes, busf;
};
static bool make_op(int coll, int dt, size_t size, Op *op) {
  const size_t e = dts[dt].size, w = W;
  op->coll = coll, op->dt = dt, op->elt = e;
  if (coll == C_AR || coll == C_BC) op->count = size / e, op->in_elems = op->out_elems = op->count;
  else if (coll == C_AG) op->count = size / e, op->in_elems = op->count, op->out_elems = w * op->count;
  else if (coll == C_RS) op->count = size / (w * e), op->in_elems = w * op->count, op->out_elems = op->count;
  else op->count = size / (w * e), op->in_elems = op->out_elems = w * op->count;
  op->bytes = (double)(op->in_elems * e);
  op->algbytes = (double)((coll == C_AG ? op->out_elems : op->in_elems) * e);
  op->busf = coll == C_AR ? 2.0 * (W - 1) / W : coll == C_BC ? 1.0 : (double)(W - 1) / W;
  return op->count > 0;
}
// Enqueues one call of variant v on s. NCCL failures exit; iris returns its status.
static iris_status_t enqueue(const Op &op, int v, cudaStream_t s) {
  const Bufs &b = buf[buf_of(v)];
  if (v == V_NCCL || v == V_NCCL_SYMM) {
    ncclDataType_t t = dts[op.dt].nccl;
    switch (op.coll) {
    case C_AR: NK(ncclAllReduce(b.in, b.out, op.count, t, nccl_op[redop], comm, s)); break;
    case C_AG: NK(ncclAllGather(b.in, b.out, op.count, t, comm, s)); break;
    case C_RS: NK(ncclReduceScatter(b.in, b.out, op.count, t, nccl_op[redop], comm, s)); break;
    case C_A2A:
      NK(ncclGroupStart());
      for (int p = 0; p < W; p++) {
        NK(ncclSend((const char *)b.in + p * op.count * op.elt, op.count, t, p, comm, s));
        NK(ncclRecv((char *)b.out + p * op.count * op.elt, op.count, t, p, comm, s));
      }
      NK(ncclGroupEnd());
      break;
    default: NK(ncclBroadcast(b.in, b.out, op.count, t, 0, comm, s)); break;
    }
    return IRIS_SUCCESS;
  }
  iris_coll_opts_t o = IRIS_COLL_OPTS_INIT;
  o.algo = v == V_AUTO || v == V_LIB || v == V_OLD || v == V_NOCHECK ? IRIS_ALGO_AUTO : v == V_LATENCY ? IRIS_ALGO_LATENCY : v == V_LL2 ? IRIS_ALGO_TWO_SHOT_LL
           : v == V_ARMED || v == V_ARMED_NOPDL                          ? IRIS_ALGO_ONE_SHOT_ARMED
                                                                         : IRIS_ALGO_BANDWIDTH;
  iris_t *const c = v == V_OLD || v == V_ARMED_NOPDL ? ctx_nopdl : v == V_NOCHECK ? ctx_nocheck : ctx;
  if (v == V_BANDWIDTH && getenv("BENCH_CTAS")) o.ctas = atoi(getenv("BENCH_CTAS")); // iris_bandwidth with this many CTAs
  if ((v == V_AUTO || v == V_LIB) && force_ctas) o.ctas = force_ctas;
  iris_dtype_t t = dts[op.dt].iris;
  if (v == V_LIB) {
    switch (op.coll) {
    case C_AR: return lib.ar(lib_ctx, b.in, b.out, op.count, t, (iris_redop_t)redop, s, &o);
    case C_AG: return lib.ag(lib_ctx, b.in, b.out, op.count, t, s, &o);
    case C_RS: return lib.rs(lib_ctx, b.in, b.out, op.count, t, (iris_redop_t)redop, s, &o);
    case C_A2A: return lib.a2a(lib_ctx, b.in, b.out, op.count, t, s, &o);
    default: return lib.bc(lib_ctx, b.in, b.out, op.count, t, 0, s, &o);
    }
  }
  switch (op.coll) {
  case C_AR: return iris_all_reduce_ex(c, b.in, b.out, op.count, t, (iris_redop_t)redop, s, &o);
  case C_AG: return iris_all_gather_ex(c, b.in, b.out, op.count, t, s, &o);
  case C_RS: return iris_reduce_scatter_ex(c, b.in, b.out, op.count, t, (iris_redop_t)redop, s, &o);
  case C_A2A: return iris_all_to_all_ex(c, b.in, b.out, op.count, t, s, &o);
  default: return iris_broadcast_ex(c, b.in, b.out, op.count, t, 0, s, &o);
  }
}
static void must(iris_status_t st) {
  if (st != IRIS_SUCCESS) { fprintf(stderr, "bench: rank %d: iris collective: %s: %s %s\n", rank, iris_status_string(st), iris_error_detail(), lib.h ? lib.detail() : ""); exit(1); }
}
// 1 on every rank if v is non-zero on every rank.
static int all_ranks(int v) {
  std::vector<int> all(W);
  IK(iris_allgather_host(ctx, &v, all.data(), sizeof v));
  for (int r = 0; r < W; r++) if (!all[r]) return 0;
  return 1;
}

// ------------------------------------------------------------------ measurement
// R batches between events on the stream, one sync at the end; median ms per op.
template <typename F>
static double time_ms(int R, int per, F batch) {
  for (int j = 0; j < R; j++) {
    CK(cudaEventRecord(ev[2 * j], stream));
    batch();
    CK(cudaEventRecord(ev[2 * j + 1], stream));
  }
  CK(cudaStreamSynchronize(stream));
  std::vector<double> t(R);
  for (int j = 0; j < R; j++) {
    float ms;
    CK(cudaEventElapsedTime(&ms, ev[2 * j], ev[2 * j + 1]));
    t[j] = ms / per;
  }
  std::sort(t.begin(), t.end());
  return t[R / 2];
}

struct Res { double graph_us, eager_us; unsigned long long bad; iris_status_t skipped; };
static unsigned long long seed_ctr = 1000;

static bool guard_mode; // --guard: graphs only, shorter batches (the eager column reads 0)
// BENCH_PHASES=1: rank 0 prints where each measurement's wall time goes (host ms)
static double wall_ms() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec * 1e-6; }
static Res measure(const Op &op, int v) {
  Res res = {0, 0, 0, IRIS_SUCCESS};
  static const bool phases = getenv("BENCH_PHASES") && atoi(getenv("BENCH_PHASES"));
  double ph[8];
  int np = 0;
  ph[np++] = wall_ms();
  const int K = op.bytes <= 4 * MiB ? (guard_mode ? 10 : 20) : 5, R = K;
  const unsigned long long seed = ++seed_ctr; // same sequence on every rank
  const Bufs &b = buf[buf_of(v)];
  switch (op.dt) {
  case D_FP32: k_fill<float><<<1024, 256, 0, stream>>>((float *)b.in, op.in_elems, seed, rank); break;
  case D_UINT8: k_fill<unsigned char><<<1024, 256, 0, stream>>>((unsigned char *)b.in, op.in_elems, seed, rank); break;
  case D_E4M3: k_fill<iris_fp8_e4m3_t><<<1024, 256, 0, stream>>>((iris_fp8_e4m3_t *)b.in, op.in_elems, seed, rank); break;
  case D_E5M2: k_fill<iris_fp8_e5m2_t><<<1024, 256, 0, stream>>>((iris_fp8_e5m2_t *)b.in, op.in_elems, seed, rank); break;
  default: k_fill<__nv_bfloat16><<<1024, 256, 0, stream>>>((__nv_bfloat16 *)b.in, op.in_elems, seed, rank); break;
  }
  CK(cudaGetLastError());
  CK(cudaMemsetAsync(b.out, 0xff, op.out_elems * op.elt, stream)); // NaN in bf16, fp32 and fp8 (uint8: 255, caught wherever the result differs)
  CK(cudaStreamSynchronize(stream));
  IK(iris_barrier(ctx));
  ph[np++] = wall_ms();

  // first call: a forced iris algorithm may refuse a size (then alike on every rank)
  iris_status_t st = enqueue(op, v, stream);
  std::vector<int> sts(W);
  int st_i = (int)st;
  IK(iris_allgather_host(ctx, &st_i, sts.data(), sizeof st_i));
  for (int r = 0; r < W; r++) {
    if (sts[r] == IRIS_SUCCESS) continue;
    bool skip = (v == V_LATENCY || v == V_BANDWIDTH || v == V_LL2 || v == V_ARMED || v == V_ARMED_NOPDL) &&
                (sts[r] == IRIS_ERROR_UNSUPPORTED || sts[r] == IRIS_ERROR_INVALID_ARGUMENT);
    for (int q = 0; q < W; q++) skip = skip && sts[q] == sts[r];
    if (!skip) {
      fprintf(stderr, "bench: rank %d: %s %s %.0f bytes failed on rank %d: %s%s%s\n", rank, coll_name[op.coll], var_name[v], op.bytes, r,
              iris_status_string((iris_status_t)sts[r]), r == rank ? ": " : "", r == rank ? iris_error_detail() : "");
      exit(1);
    }
    CK(cudaStreamSynchronize(stream));
    res.skipped = (iris_status_t)sts[r];
    return res;
  }
  ph[np++] = wall_ms();
  for (int i = 0; i < 4; i++) must(enqueue(op, v, stream));
  CK(cudaStreamSynchronize(stream));
  IK(iris_barrier(ctx));
  ph[np++] = wall_ms();
  double eager_ms = guard_mode ? 0 : time_ms(R, K, [&] { for (int k = 0; k < K; k++) must(enqueue(op, v, stream)); });

  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < K; k++) must(enqueue(op, v, stream));
  CK(cudaStreamEndCapture(stream, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphUpload(ge, stream));
  CK(cudaStreamSynchronize(stream));
  IK(iris_barrier(ctx));
  ph[np++] = wall_ms();
  for (int i = 0; i < 2; i++) CK(cudaGraphLaunch(ge, stream));
  double graph_ms = time_ms(R, K, [&] { CK(cudaGraphLaunch(ge, stream)); });
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  ph[np++] = wall_ms();

  // tolerance for sums: one rounding of the result, one per partial sum (|partial| <= k)
  const double ulp = dts[op.dt].ulp;
  const double rtol = ulp, atol = ulp / 2 * W * W;
  unsigned long long bad;
  CK(cudaMemsetAsync(d_bad, 0, sizeof bad, stream));
#define BENCH_CHECK(T) k_check<T><<<1024, 256, 0, stream>>>((const T *)b.out, op.out_elems, op.coll, redop, seed, W, rank, op.count, rtol, atol, d_bad)
  switch (op.dt) {
  case D_FP32: BENCH_CHECK(float); break;
  case D_UINT8: BENCH_CHECK(unsigned char); break;
  case D_E4M3: BENCH_CHECK(iris_fp8_e4m3_t); break;
  case D_E5M2: BENCH_CHECK(iris_fp8_e5m2_t); break;
  default: BENCH_CHECK(__nv_bfloat16); break;
  }
#undef BENCH_CHECK
  CK(cudaGetLastError());
  CK(cudaMemcpyAsync(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost, stream));
  CK(cudaStreamSynchronize(stream));
  if (bad) fprintf(stderr, "bench: rank %d: %s %s %.0f bytes: %llu of %zu output elements wrong\n", rank, coll_name[op.coll], var_name[v], op.bytes, bad, op.out_elems);

  struct { double g, e; unsigned long long bad; } mine = {graph_ms, eager_ms, bad};
  std::vector<decltype(mine)> all(W);
  IK(iris_allgather_host(ctx, &mine, all.data(), sizeof mine));
  ph[np++] = wall_ms();
  if (phases && rank == 0)
    fprintf(stderr, "phases %s %s %.0f B: fill %.1f first %.1f warm %.1f capture %.1f timed %.1f check %.1f ms\n", coll_name[op.coll], var_name[v], op.bytes,
            ph[1] - ph[0], ph[2] - ph[1], ph[3] - ph[2], ph[4] - ph[3], ph[5] - ph[4], ph[6] - ph[5]);
  for (int r = 0; r < W; r++) {
    res.graph_us = std::max(res.graph_us, all[r].g * 1e3);
    res.eager_us = std::max(res.eager_us, all[r].e * 1e3);
    res.bad += all[r].bad;
  }
  return res;
}

// ------------------------------------------------------------------ the tail
// Per-call times: N calls of one variant back to back on the stream, each between its own
// pair of events (event i before call i; the next call's event closes it), one sync at the
// end; eager (the API call itself) or graph (a graph of one call, launched N times).
// Statistics per rank (p50, p99, p99.9, max), then the max over ranks of each.
struct Tail { double p50, p99, p999, mx; bool ok; };
static std::vector<cudaEvent_t> tev;
static double pct(std::vector<double> &v, double q) { // v sorted
  size_t i = (size_t)ceil(q * v.size()) - 1;
  return v[std::min(i, v.size() - 1)];
}
static void fill_input(const Op &op, int v, cudaStream_t s) {
  const Bufs &b = buf[buf_of(v)];
  const unsigned long long seed = ++seed_ctr;
  if (op.dt == D_FP32) k_fill<float><<<1024, 256, 0, s>>>((float *)b.in, op.in_elems, seed, rank);
  else k_fill<__nv_bfloat16><<<1024, 256, 0, s>>>((__nv_bfloat16 *)b.in, op.in_elems, seed, rank);
  CK(cudaGetLastError());
}
template <typename F>
static std::vector<double> per_call_us(int N, cudaStream_t s, F call) {
  if ((int)tev.size() < N + 1) {
    const size_t had = tev.size();
    tev.resize(N + 1);
    for (size_t i = had; i < tev.size(); i++) CK(cudaEventCreate(&tev[i]));
  }
  for (int i = 0; i < N; i++) {
    CK(cudaEventRecord(tev[i], s));
    call();
  }
  CK(cudaEventRecord(tev[N], s));
  CK(cudaStreamSynchronize(s));
  std::vector<double> t(N);
  for (int i = 0; i < N; i++) {
    float ms;
    CK(cudaEventElapsedTime(&ms, tev[i], tev[i + 1]));
    t[i] = ms * 1e3;
  }
  return t;
}
static Tail tail_stats(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  double mine[4] = {pct(t, 0.5), pct(t, 0.99), pct(t, 0.999), t.back()};
  std::vector<double> all(4 * W);
  IK(iris_allgather_host(ctx, mine, all.data(), sizeof mine));
  Tail r = {0, 0, 0, 0, true};
  for (int q = 0; q < W; q++) {
    r.p50 = std::max(r.p50, all[4 * q]), r.p99 = std::max(r.p99, all[4 * q + 1]);
    r.p999 = std::max(r.p999, all[4 * q + 2]), r.mx = std::max(r.mx, all[4 * q + 3]);
  }
  return r;
}
// One call of variant v captured into a graph on s, instantiated and uploaded (the graph
// itself is dropped: the executable keeps what it needs).
static cudaGraphExec_t capture_one(const Op &op, int v, cudaStream_t s) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  must(enqueue(op, v, s));
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphDestroy(g));
  CK(cudaGraphUpload(ge, s));
  return ge;
}
// N calls of variant v (graph: single-call graphs) on the stream; ok = false if iris refused
// the call (alike on every rank: the same arguments).
static Tail tail_run(const Op &op, int v, bool graph, int N, cudaStream_t s) {
  fill_input(op, v, s);
  CK(cudaStreamSynchronize(s));
  IK(iris_barrier(ctx));
  iris_status_t st = enqueue(op, v, s);
  if (!all_ranks(st == IRIS_SUCCESS)) { CK(cudaStreamSynchronize(s)); Tail r = {0, 0, 0, 0, false}; return r; }
  for (int i = 0; i < 3; i++) must(enqueue(op, v, s));
  std::vector<double> t;
  if (graph) {
    cudaGraphExec_t ge = capture_one(op, v, s);
    for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    IK(iris_barrier(ctx));
    t = per_call_us(N, s, [&] { CK(cudaGraphLaunch(ge, s)); });
    CK(cudaGraphExecDestroy(ge));
  } else {
    CK(cudaStreamSynchronize(s));
    IK(iris_barrier(ctx));
    t = per_call_us(N, s, [&] { must(enqueue(op, v, s)); });
  }
  return tail_stats(t);
}

// ------------------------------------------------------------------ in company of a GEMM
// A cuBLAS GEMM (BENCH_GEMM_N^3, bf16 in and out, fp32 accumulation; 8192 by default)
// runs G times on a second stream of the same process while the collective runs N
// single-call graphs on the first (the same N on every rank). Every library compared at a
// size does the same work: N is sized once, from NCCL's time alone, so that NCCL's calls
// cover the GEMMs' time, and a faster library's calls end sooner (as a fixed amount of
// communication beside a model's compute does). BENCH_COMPANY_SAME_CALLS=0 sizes N per
// variant instead (each library's calls cover the GEMMs: a faster one does more calls).
// Reported: the collective's per-call p50 / p99 under the load, and the GEMM's time under
// it over its time alone.
static cublasHandle_t blas;
static cudaStream_t side;
static void *ga, *gb, *gc;
static int gemm_n;
static double gemm_alone_ms;
static void gemm(cudaStream_t s) {
  const float one = 1.0f, zero = 0.0f;
  if (cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, gemm_n, gemm_n, gemm_n, &one, ga, CUDA_R_16BF, gemm_n, gb, CUDA_R_16BF, gemm_n, &zero, gc, CUDA_R_16BF, gemm_n,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bench: rank %d: cublasGemmEx failed\n", rank);
    exit(1);
  }
}
static double gemm_ms(int G, cudaStream_t s) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < G; i++) gemm(s);
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms / G;
}
static void company_setup() {
  gemm_n = env_int("BENCH_GEMM_N", 8192);
  const size_t n2 = (size_t)gemm_n * gemm_n;
  CK(cudaMalloc(&ga, n2 * 2));
  CK(cudaMalloc(&gb, n2 * 2));
  CK(cudaMalloc(&gc, n2 * 2));
  k_fill<__nv_bfloat16><<<1024, 256>>>((__nv_bfloat16 *)ga, n2, 77, rank);
  k_fill<__nv_bfloat16><<<1024, 256>>>((__nv_bfloat16 *)gb, n2, 78, rank);
  CK(cudaDeviceSynchronize());
  CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, side) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bench: rank %d: cuBLAS unavailable\n", rank);
    exit(1);
  }
  gemm_ms(3, side); // warm-up
  gemm_alone_ms = gemm_ms(10, side);
}
struct Company { Tail coll; double slow; int calls; bool ok; };
// calls > 0: that many calls (another variant's N); 0: sized from this variant's time alone
static Company company_run(const Op &op, int v, int G, int calls) {
  Company c = {{0, 0, 0, 0, false}, 0, 0, false};
  // the collective alone first (its p50 sizes N), then N calls beside G GEMMs
  const Tail alone = tail_run(op, v, true, 50, stream);
  if (!alone.ok) return c;
  int N = calls > 0 ? calls : (int)std::min(4000.0, std::max(50.0, G * gemm_alone_ms * 1e3 / std::max(alone.p50, 1.0)));
  std::vector<int> ns(W);
  IK(iris_allgather_host(ctx, &N, ns.data(), sizeof N));
  N = ns[0];
  cudaGraphExec_t ge = capture_one(op, v, stream);
  CK(cudaStreamSynchronize(stream));
  IK(iris_barrier(ctx));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, side));
  for (int i = 0; i < G; i++) gemm(side);
  CK(cudaEventRecord(b, side));
  std::vector<double> t = per_call_us(N, stream, [&] { CK(cudaGraphLaunch(ge, stream)); });
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaGraphExecDestroy(ge));
  c.coll = tail_stats(t);
  double slow = ms / G / gemm_alone_ms;
  std::vector<double> all(W);
  IK(iris_allgather_host(ctx, &slow, all.data(), sizeof slow));
  c.slow = *std::max_element(all.begin(), all.end());
  c.calls = N;
  c.ok = true;
  return c;
}

// ------------------------------------------------------------------ report
static FILE *csv;
static void row(const Op &op, int v, const Res &r, double xg, double xe) {
  char dt[24];
  if ((op.coll == C_AR || op.coll == C_RS) && redop != IRIS_SUM) snprintf(dt, sizeof dt, "%s/%s", dts[op.dt].name, redop_name[redop]);
  else snprintf(dt, sizeof dt, "%s", dts[op.dt].name);
  if (r.skipped != IRIS_SUCCESS) {
    printf("%-15s %-11s %12.0f %-15s skipped: %s\n", coll_name[op.coll], dt, op.bytes, var_name[v], iris_status_string(r.skipped));
    return;
  }
  double alg = op.algbytes / (r.graph_us * 1e-6) / 1e9, bus = alg * op.busf;
  char sg[16] = "", se[16] = "";
  if (xg > 0) snprintf(sg, sizeof sg, "%.2f", xg), snprintf(se, sizeof se, "%.2f", xe);
  printf("%-15s %-11s %12.0f %-15s %10.2f %10.2f %10.1f %10.1f %7s %7s %s\n", coll_name[op.coll], dt, op.bytes, var_name[v], r.graph_us, r.eager_us,
         alg, bus, sg, se, r.bad ? "BAD" : "ok");
  if (csv) {
    fprintf(csv, "%s,%s,%d,%.0f,%s,%.3f,%.3f,%.3f,%.3f,%s,%s,%s\n", coll_name[op.coll], dt, W, op.bytes, var_name[v], r.graph_us, r.eager_us, alg, bus,
            sg, se, r.bad ? "bad" : "ok");
    fflush(csv);
  }
}

static const char *plot_py = R"PY(
import sys, csv
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except Exception as e:
    print("bench_coll: note: no plot, matplotlib unavailable (%s)" % e)
    sys.exit(0)
rows = list(csv.DictReader(open(sys.argv[1])))
keys = []
for r in rows:
    k = r["collective"] + " " + r["dtype"]
    if k not in keys:
        keys.append(k)
if not keys:
    sys.exit(0)
fig, ax = plt.subplots(len(keys), 2, figsize=(13, 3.4 * len(keys)), squeeze=False)
for i, k in enumerate(keys):
    series = {}
    for r in rows:
        if r["collective"] + " " + r["dtype"] == k:
            series.setdefault(r["variant"], []).append((float(r["bytes"]), float(r["graph_us"]), float(r["busbw_GBps"])))
    for v, pts in series.items():
        pts.sort()
        style = "--" if v.startswith("nccl") else "-"
        ax[i][0].loglog([p[0] for p in pts], [p[1] for p in pts], style, marker="o", ms=3, label=v)
        ax[i][1].semilogx([p[0] for p in pts], [p[2] for p in pts], style, marker="o", ms=3, label=v)
    ax[i][0].set_title(k + ": time per op in a graph (us)")
    ax[i][1].set_title(k + ": busbw (GB/s)")
    for a in ax[i]:
        a.grid(True, which="both", alpha=0.3)
        a.set_xlabel("bytes")
    ax[i][0].legend(fontsize=7)
fig.suptitle("iris vs NCCL, %s ranks" % rows[0]["ranks"])
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print("bench_coll: plot written to " + sys.argv[2])
)PY";

static void plot(const char *csv_path, const char *png) {
  char py[] = "/tmp/bench_coll_plot_XXXXXX";
  int fd = mkstemp(py);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) { printf("bench_coll: note: no plot (cannot write a temporary file)\n"); return; }
  fputs(plot_py, f);
  fclose(f);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "python3 '%s' '%s' '%s'", py, csv_path, png);
  int st = system(cmd);
  if (st != 0) printf("bench_coll: note: no plot (python3 exited with status %d)\n", st);
  unlink(py);
}

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  size_t m = *end == 'K' || *end == 'k' ? KiB : *end == 'M' || *end == 'm' ? MiB : *end == 'G' || *end == 'g' ? GiB : 1;
  return (size_t)(v * m);
}

// ------------------------------------------------------------------ the speed guard
// --guard: every collective at a few sizes, iris through the header (iris_auto) and through
// libiris.so (iris_lib) against the best of NCCL and NCCL symmetric, in graphs (with
// BENCH_OFF_HEAP=1 every door takes cudaMalloc buffers and NCCL symmetric, whose windows
// are its own allocation, is left out: iris against NCCL on the same buffers). A row fails
// when either door is slower than GUARD_MIN x the best NCCL (iris time > best NCCL time /
// GUARD_MIN), or the two doors differ by more than GUARD_DOORS (a fraction of the header
// door's time). Prints one table and returns the number of failed rows.
/* 0.9: fails on a fall of 10% against NCCL anywhere; the rows that sit below 1.0 today
 * are in BENCHMARKS.md (broadcast 4 MB, 0.91x on 4xH100). */
#ifndef GUARD_MIN
#define GUARD_MIN 0.9
#endif
#ifndef GUARD_DOORS
#define GUARD_DOORS 0.10
#endif
static double guard_need() { return getenv("BENCH_GUARD_MIN") ? atof(getenv("BENCH_GUARD_MIN")) : GUARD_MIN; }
static double guard_doors() { return getenv("BENCH_GUARD_DOORS") ? atof(getenv("BENCH_GUARD_DOORS")) : GUARD_DOORS; }
/* The tail: a row also fails when a door's p99 (per call, single-call graphs) is above
 * GUARD_TAIL x its own p50 while the best NCCL variant's p99 stays within that of its p50
 * (where NCCL's tail is as long, the machine's noise is, not iris). */
#ifndef GUARD_TAIL
#define GUARD_TAIL 1.5
#endif
static double guard_tailx() { return getenv("BENCH_GUARD_TAILX") ? atof(getenv("BENCH_GUARD_TAILX")) : GUARD_TAIL; }
template <typename V>
static int guard_report(const V *v, int n, int w) {
  const double need = guard_need(), doors = guard_doors(), tailx = guard_tailx();
  int fails = 0;
  printf("\n# speed guard, %d ranks, bf16, graphs, us (max over ranks of medians); %s; pass: x >= %.2f through both doors, the doors within %.0f%%,"
         " and each door's p99 <= %.1f x its p50 unless the best NCCL's is not either (p50/p99: per call, single-call graphs)\n",
         w, buf_of(V_AUTO) == 0 ? "buffers off the heap (cudaMalloc, BENCH_OFF_HEAP=1): x = NCCL on the same buffers / iris" : "x = best NCCL / iris", need,
         doors * 100, tailx);
  printf("%-15s %10s %10s %10s %7s %10s %7s %9s %15s %15s %15s %s\n", "collective", "bytes", "best_nccl", "iris", "x", "iris_lib", "x_lib", "lib/hdr",
         "nccl p50/p99", "iris p50/p99", "lib p50/p99", "verdict");
  for (int i = 0; i < n; i++) {
    const double x = v[i].nccl_us / v[i].iris_us, xl = v[i].nccl_us / v[i].lib_us, d = v[i].lib_us / v[i].iris_us;
    const bool nccl_long = v[i].nccl_t.ok && v[i].nccl_t.p99 > tailx * v[i].nccl_t.p50;
    std::string why;
    if (x < need) why += " iris";
    if (xl < need) why += " lib";
    if (fabs(d - 1) > doors) why += " doors";
    if (v[i].iris_t.ok && v[i].iris_t.p99 > tailx * v[i].iris_t.p50 && !nccl_long) why += " iris-tail";
    if (v[i].lib_t.ok && v[i].lib_t.p99 > tailx * v[i].lib_t.p50 && !nccl_long) why += " lib-tail";
    fails += !why.empty();
    char nt[32], it_[32], lt[32];
    snprintf(nt, sizeof nt, "%.1f/%.1f", v[i].nccl_t.p50, v[i].nccl_t.p99);
    snprintf(it_, sizeof it_, "%.1f/%.1f", v[i].iris_t.p50, v[i].iris_t.p99);
    snprintf(lt, sizeof lt, "%.1f/%.1f", v[i].lib_t.p50, v[i].lib_t.p99);
    printf("%-15s %10.0f %10.2f %10.2f %7.2f %10.2f %7.2f %9.3f %15s %15s %15s %s\n", coll_name[v[i].coll], v[i].bytes, v[i].nccl_us, v[i].iris_us, x, v[i].lib_us,
           xl, d, nt, it_, lt, why.empty() ? "pass" : ("FAIL:" + why).c_str());
  }
  printf("# speed guard: %d of %d rows pass%s\n", n - fails, n, fails ? "; FAILED" : "");
  return fails;
}

// Parent of launched ranks: waits for them; once one fails, gives the others 20 s to
// notice, then ends them (a rank stuck in a collective with a dead peer never returns).
static int wait_ranks(const iris_launch_t *L, int timeout_s) {
  std::vector<int> alive(L->num_ranks, 1);
  int left = L->num_ranks, failed = 0;
  const time_t t0 = time(NULL);
  time_t t_fail = 0;
  while (left > 0) {
    for (int i = 0; i < L->num_ranks; i++) {
      int status = 0;
      pid_t w = alive[i] ? waitpid(L->pids[i], &status, WNOHANG) : 0;
      if (w == 0) continue;
      alive[i] = 0, left--;
      if (w < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (!failed++) t_fail = time(NULL);
        fprintf(stderr, "bench_coll: rank %d failed (%s %d)\n", i, w > 0 && WIFSIGNALED(status) ? "signal" : "exit status",
                w > 0 && WIFSIGNALED(status) ? WTERMSIG(status) : w > 0 ? WEXITSTATUS(status) : -1);
      }
    }
    if (left > 0 && ((failed && time(NULL) - t_fail > 20) || time(NULL) - t0 > timeout_s)) {
      for (int i = 0; i < L->num_ranks; i++)
        if (alive[i]) kill(L->pids[i], SIGKILL), waitpid(L->pids[i], NULL, 0), fprintf(stderr, "bench_coll: rank %d ended (still running)\n", i);
      return 1;
    }
    usleep(20000);
  }
  return failed ? 1 : 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); // a run cut at its time limit keeps every row it printed
  int nranks = 0, pos = 0;
  size_t max_bytes = GiB;
  bool quick = env_int("BENCH_QUICK", 0) != 0, guard = false, tail_mode = false, company_mode = false;
  small_mode = env_int("BENCH_SMALL", 0) != 0;
  const char *lib_path = getenv("BENCH_LIB");
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = true;
    else if (!strcmp(argv[i], "--guard")) guard = guard_mode = true;
    else if (!strcmp(argv[i], "--tail")) tail_mode = true;
    else if (!strcmp(argv[i], "--small")) small_mode = true;
    else if (!strcmp(argv[i], "--company")) company_mode = true;
    else if (!strncmp(argv[i], "--lib=", 6)) lib_path = argv[i] + 6;
    else if (pos == 0 && argv[i][0] != '-') nranks = atoi(argv[i]), pos++;
    else if (pos == 1 && argv[i][0] != '-') max_bytes = parse_size(argv[i]), pos++;
    else { fprintf(stderr, "usage: bench_coll [ranks] [max_bytes] [--quick] [--guard] [--tail] [--company] [--small] [--lib=path/libiris.so]\n"); return 2; }
  }
  if (!company_mode) force_ctas = env_int("BENCH_AUTO_CTAS", 0); // --company sets its own per row
  int main_dt = D_BF16; // BENCH_DTYPE, BENCH_OP
  {
    const char *d = getenv("BENCH_DTYPE"), *o = getenv("BENCH_OP");
    if (d && *d) {
      for (main_dt = 0; main_dt < D_N && strcmp(d, dts[main_dt].name); main_dt++) {}
      if (main_dt == D_N) { fprintf(stderr, "bench_coll: BENCH_DTYPE=%s: not one of bf16, fp32, uint8, fp8e4m3, fp8e5m2\n", d); return 2; }
    }
    if (o && *o) {
      for (redop = 0; redop < IRIS_REDOP_COUNT && strcmp(o, redop_name[redop]); redop++) {}
      if (redop == IRIS_REDOP_COUNT) { fprintf(stderr, "bench_coll: BENCH_OP=%s: not one of sum, min, max, avg\n", o); return 2; }
    }
  }
  const size_t heap_cap = 40 * GiB, margin = 512 * MiB; // margin: the collective state
  if (max_bytes < KiB || 3 * max_bytes + 256 * MiB > heap_cap) { fprintf(stderr, "bench_coll: max_bytes from 1K to 13G\n"); return 2; }
  setvbuf(stdout, NULL, _IOLBF, 0);
  iris_launch_t L;
  IK(iris_launch_local(nranks, &L, &rank));
  if (rank < 0) return wait_ranks(&L, env_int("BENCH_TIMEOUT_S", 3600));
  setenv("NCCL_NVLS_ENABLE", "0", 1); // never NVLink multicast

  // heap: inputs up to max_bytes, outputs up to W x max_bytes (all_gather), the state
  size_t wenv = (size_t)std::max(1, env_int("IRIS_WORLD_SIZE", env_int("OMPI_COMM_WORLD_SIZE", 1)));
  size_t heap = std::max(max_bytes + wenv * max_bytes + margin, 3 * max_bytes + 256 * MiB);
  iris_config_t cfg = IRIS_CONFIG_INIT;
  cfg.heap_size = std::min(heap, heap_cap);
  IK(iris_init(&cfg, &ctx));
  rank = iris_rank(ctx), W = iris_world_size(ctx);
  IK(iris_collectives_setup(ctx));
  const size_t in_max = max_bytes;
  size_t out_max = std::min((size_t)W * max_bytes, cfg.heap_size - margin - in_max);
  out_max = std::max(out_max, max_bytes) & ~(size_t)4095; // all_gather sizes above out_max/W: skipped
  IK(iris_malloc(ctx, in_max, &buf[2].in));
  IK(iris_malloc(ctx, out_max, &buf[2].out));
  if (lib_path && *lib_path) { // the second door: the same calls through libiris.so (every rank alike)
    if (!all_ranks(lib_open(lib_path))) {
      if (guard) { fprintf(stderr, "bench_coll --guard: rank %d: %s cannot be used\n", rank, lib_path); return 1; }
      if (rank == 0) printf("# note: %s cannot be used; iris_lib skipped\n", lib_path);
      lib.h = NULL;
    } else {
      iris_config_t lc = IRIS_CONFIG_INIT;
      lc.rank = rank, lc.world_size = W, lc.device = iris_device_ordinal(ctx), lc.heap_size = cfg.heap_size, lc.bootstrap = &lib_boot;
      LK(lib.init(&lc, &lib_ctx));
      LK(lib.setup(lib_ctx));
      LK(lib.malloc_(lib_ctx, in_max, &buf[3].in));
      LK(lib.malloc_(lib_ctx, out_max, &buf[3].out));
    }
  } else if (guard) {
    fprintf(stderr, "bench_coll --guard needs the library: --lib=build/libiris.so or BENCH_LIB\n");
    return 2;
  }
  if (small_mode) { // the contexts of iris_old / iris_armed_nopdl and iris_nocheck, over this one
    for (int k = 0; k < 2; k++) {
      iris_config_t sc = IRIS_CONFIG_INIT;
      sc.rank = rank, sc.world_size = W, sc.device = iris_device_ordinal(ctx), sc.heap_size = 256 * MiB, sc.bootstrap = &lib_boot;
      iris_t **c = k ? &ctx_nocheck : &ctx_nopdl;
      setenv(k ? "IRIS_COLL_CHECK" : "IRIS_COLL_PDL", "0", 1); // read at the setup
      IK(iris_init(&sc, c));
      IK(iris_collectives_setup(*c));
      unsetenv(k ? "IRIS_COLL_CHECK" : "IRIS_COLL_PDL");
    }
  }
  CK(cudaMalloc(&buf[0].in, in_max));
  CK(cudaMalloc(&buf[0].out, out_max));
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < 40; i++) CK(cudaEventCreate(&ev[i]));
  CK(cudaMalloc(&d_bad, sizeof *d_bad));

  // NCCL: rank 0's unique id through iris's host allgather
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) NK(ncclGetUniqueId(&id));
  std::vector<ncclUniqueId> ids(W);
  IK(iris_allgather_host(ctx, &id, ids.data(), sizeof id));
  NK(ncclCommInitRank(&comm, W, ids[0], rank));
  int symm = 0;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  ncclWindow_t win[2] = {NULL, NULL};
  symm = ncclMemAlloc(&buf[1].in, in_max) == ncclSuccess;
  symm = ncclMemAlloc(&buf[1].out, out_max) == ncclSuccess && symm;
  if ((symm = all_ranks(symm))) {
    symm = ncclCommWindowRegister(comm, buf[1].in, in_max, &win[0], NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess;
    symm = ncclCommWindowRegister(comm, buf[1].out, out_max, &win[1], NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess && symm;
    symm = all_ranks(symm);
  }
  if (!symm && rank == 0) printf("# note: NCCL symmetric windows unavailable; nccl_symm skipped\n");
#endif

  std::vector<size_t> sizes, fp32_sizes;
  for (size_t s : {KiB, 64 * KiB, MiB, 16 * MiB, 256 * MiB}) if (s <= max_bytes) fp32_sizes.push_back(s);
  const size_t step = (size_t)std::max(2, env_int("BENCH_STEP", 2)); // BENCH_STEP=4: every other size
  if (guard) { // a few sizes per decade, every collective, bf16 only
    for (size_t s : {KiB, 16 * KiB, 64 * KiB, 256 * KiB, MiB, 4 * MiB, 256 * MiB}) if (s <= max_bytes) sizes.push_back(s);
    fp32_sizes.clear();
  } else if (quick) sizes = fp32_sizes;
  else for (size_t s = KiB; s <= max_bytes; s *= step) if (s >= (size_t)env_int("BENCH_MIN_KB", 1) * KiB) sizes.push_back(s);
  // BENCH_ONLY=all_reduce,broadcast: run only these collectives (a full sweep of all of
  // them takes longer than one 10-minute device call on 4 GPUs)
  const char *variants = getenv("BENCH_VARIANTS"); // e.g. nccl,iris_bandwidth: only these variants
  if (variants && !*variants) variants = NULL;
  bool only[C_N];
  {
    const char *o = getenv("BENCH_ONLY");
    for (int c = 0; c < C_N; c++) only[c] = !o || !*o || strstr(o, coll_name[c]) != NULL;
  }

  char tmp_csv[] = "/tmp/bench_coll_XXXXXX";
  const char *csv_path = getenv("BENCH_CSV"), *png = getenv("BENCH_PNG");
  if (rank == 0) {
    if (csv_path && *csv_path) csv = fopen(csv_path, "w");
    else if (png && *png) { int fd = mkstemp(tmp_csv); csv = fd >= 0 ? fdopen(fd, "w") : NULL; csv_path = tmp_csv; }
    if (csv && !tail_mode && !company_mode) fprintf(csv, "collective,dtype,ranks,bytes,variant,graph_us,eager_us,algbw_GBps,busbw_GBps,speedup_graph,speedup_eager,correct\n");
    else if (csv_path && *csv_path) printf("# note: cannot write %s\n", csv_path);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, iris_device_ordinal(ctx)));
    int nv = 0;
    NK(ncclGetVersion(&nv));
    printf("# bench_coll: %d ranks, %s; NCCL %d (NVLS off)%s; iris heap %.1f GiB; sizes 1 KiB..%.0f KiB%s\n", W, prop.name, nv,
           symm ? ", symmetric windows" : "", cfg.heap_size / (double)GiB, max_bytes / (double)KiB, quick ? " (quick)" : "");
    printf("# us per op: graph = in a CUDA graph, eager = back-to-back calls; max over ranks of per-rank medians; "
           "GB/s from the graph time; x = best NCCL / iris_auto\n");
    printf("%-15s %-11s %12s %-15s %10s %10s %10s %10s %7s %7s %s\n", "collective", "dtype", "bytes", "variant", "graph_us", "eager_us", "algbw", "busbw",
           "x graph", "x eager", "check");
  }

  if (tail_mode || company_mode) { // --tail / --company: their own sweeps, then the end
    const time_t t0 = time(NULL);
    std::vector<size_t> tsizes;
    const char *ts = getenv(tail_mode ? "BENCH_TAIL_SIZES" : "BENCH_COMPANY_SIZES");
    if (ts && *ts) {
      for (const char *p = ts; *p;) { tsizes.push_back(parse_size(p)); p = strchr(p, ','); if (!p) break; p++; }
    } else if (tail_mode) tsizes = {KiB, 16 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB};
    else tsizes = {64 * KiB, MiB, 16 * MiB, 256 * MiB};
    const int few = env_int("BENCH_COMPANY_CTAS", 16), G = env_int("BENCH_COMPANY_GEMMS", 20);
    const bool same_calls = env_int("BENCH_COMPANY_SAME_CALLS", 1) != 0;
    ncclComm_t comm_all = comm, comm_few = NULL;
    if (company_mode) {
      company_setup();
      ncclUniqueId id2;
      memset(&id2, 0, sizeof id2);
      if (rank == 0) NK(ncclGetUniqueId(&id2));
      std::vector<ncclUniqueId> ids2(W);
      IK(iris_allgather_host(ctx, &id2, ids2.data(), sizeof id2));
      ncclConfig_t nc = NCCL_CONFIG_INITIALIZER;
      nc.maxCTAs = few;
      NK(ncclCommInitRankConfig(&comm_few, W, ids2[0], rank, &nc));
      if (rank == 0)
        printf("# company: %dx a %d^3 bf16 cuBLAS GEMM (%.3f ms alone on rank 0) on a second stream while the collective runs single-call graphs; "
               "collective us per call (max over ranks); GEMM x = its time beside the collective / alone (max over ranks); few = %d CTAs "
               "(iris: opts.ctas, bandwidth kernels; NCCL: maxCTAs)\n", G, gemm_n, gemm_alone_ms, few);
    } else if (rank == 0) {
      printf("# tail: per call, N calls back to back, each between its own CUDA events (graph: single-call graphs); us, each statistic the max over ranks; "
             "N = BENCH_TAIL_CALLS (2000; %d from 64 MiB on)\n", env_int("BENCH_TAIL_CALLS_BIG", 500));
      printf("%-15s %10s %-10s %-6s %9s %9s %9s %9s %8s %8s %s\n", "collective", "bytes", "variant", "mode", "p50", "p99", "p99.9", "max", "p99/p50", "max/p50",
             "targets (iris: p99<=1.5 p50, p99<=nccl p99, max<=3 p50)");
    }
    if (rank == 0 && csv) fprintf(csv, tail_mode ? "collective,bytes,variant,mode,p50,p99,p999,max\n" : "collective,bytes,variant,p50,p99,gemm_x\n");
    for (int c = 0; c < C_N; c++) {
      if (!only[c]) continue;
      for (size_t size : tsizes) {
        Op op;
        if (size > max_bytes || !make_op(c, main_dt, size, &op) || op.out_elems * op.elt > out_max) continue;
        if (tail_mode) {
          const int N = size >= 64 * MiB ? env_int("BENCH_TAIL_CALLS_BIG", 500) : env_int("BENCH_TAIL_CALLS", 2000);
          for (int mode = 1; mode >= 0; mode--) {
            double nccl_p99 = 1e30;
            for (int v : {V_NCCL, V_NCCL_SYMM, V_AUTO, V_LIB}) {
              if ((v == V_NCCL_SYMM && !symm) || (v == V_LIB && !lib.h)) continue;
              if (variants && !strstr(variants, var_name[v])) continue;
              if (v == V_NCCL_SYMM && c == C_BC && op.bytes >= 2.0 * MiB) continue; // hangs in NCCL 2.28 (see the guard)
              const Tail t = tail_run(op, v, mode == 1, N, stream);
              if (!t.ok) continue;
              if (v <= V_NCCL_SYMM) nccl_p99 = std::min(nccl_p99, t.p99);
              if (rank != 0) continue;
              std::string verdict;
              if (v >= V_AUTO) {
                verdict += t.p99 <= 1.5 * t.p50 ? "p99 ok" : "p99 LONG";
                verdict += t.p99 <= nccl_p99 ? ", <=nccl" : ", >nccl";
                verdict += t.mx <= 3 * t.p50 ? ", max ok" : ", max LONG";
              }
              printf("%-15s %10.0f %-10s %-6s %9.2f %9.2f %9.2f %9.2f %8.2f %8.2f %s\n", coll_name[c], op.bytes, var_name[v], mode ? "graph" : "eager", t.p50, t.p99,
                     t.p999, t.mx, t.p99 / t.p50, t.mx / t.p50, verdict.c_str());
              if (csv) fprintf(csv, "%s,%.0f,%s,%s,%.3f,%.3f,%.3f,%.3f\n", coll_name[c], op.bytes, var_name[v], mode ? "graph" : "eager", t.p50, t.p99, t.p999, t.mx);
            }
          }
        } else {
          int calls = 0; // NCCL's N, then the same work for the others (BENCH_COMPANY_SAME_CALLS=0: each its own)
          for (int k = 0; k < 4; k++) { // nccl, iris_auto, nccl few CTAs, iris few CTAs
            const int v = k % 2 ? V_AUTO : V_NCCL;
            comm = k >= 2 ? comm_few : comm_all;
            force_ctas = k == 3 ? few : 0;
            const Company cm = company_run(op, v, G, same_calls ? calls : 0);
            if (k == 0 && cm.ok) calls = cm.calls;
            comm = comm_all;
            force_ctas = 0;
            if (!cm.ok || rank != 0) continue;
            char name[32];
            snprintf(name, sizeof name, "%s%s", var_name[v], k >= 2 ? "/few" : "");
            printf("%-15s %10.0f %-16s company: %5d calls, p50 %9.2f p99 %9.2f us; GEMM x %.3f\n", coll_name[c], op.bytes, name, cm.calls, cm.coll.p50, cm.coll.p99, cm.slow);
            if (csv) fprintf(csv, "%s,%.0f,%s,%.3f,%.3f,%.4f\n", coll_name[c], op.bytes, name, cm.coll.p50, cm.coll.p99, cm.slow);
          }
        }
      }
    }
    if (comm_few) NK(ncclCommDestroy(comm_few));
    if (rank == 0) printf("# bench_coll: %.0f s\n", difftime(time(NULL), t0));
    guard = false;
    for (int c = 0; c < C_N; c++) only[c] = false; // nothing more to measure
  }
  int bad_rows = 0;
  const time_t t_start = time(NULL);
  struct Verdict { int coll; double bytes, nccl_us, iris_us, lib_us; Tail nccl_t, iris_t, lib_t; };
  std::vector<Verdict> verdicts;
  for (int c = 0; c < C_N; c++)
    for (int pass = 0; pass <= (c == C_AR && main_dt == D_BF16 && !env_int("BENCH_NO_FP32", 0)) && only[c]; pass++) // pass 1: the fp32 all_reduce rows
      for (size_t size : pass ? fp32_sizes : sizes) {
        const int dt = pass ? D_FP32 : main_dt;
        Op op;
        if (!make_op(c, dt, size, &op)) continue;
        if (op.out_elems * op.elt > out_max) {
          if (rank == 0) printf("%-15s %-11s %12zu (output %zu bytes does not fit the heap; skipped)\n", coll_name[c], dts[dt].name, size, op.out_elems * op.elt);
          continue;
        }
        double best_g = 1e30, best_e = 1e30, auto_g = 0;
        Tail best_t = {0, 0, 0, 0, false}, auto_t = best_t; // --guard: per-call tails (single-call graphs)
        for (int v = 0; v < V_N; v++) {
          if ((v == V_NCCL_SYMM && !symm) || (v == V_LATENCY && op.bytes > LATENCY_MAX)) continue;
          if ((v == V_LIB && !lib.h) || (guard && v > V_LIB)) continue;
          // buffers off the heap: the guard holds iris to NCCL on the same cudaMalloc buffers
          // (a caller who can allocate NCCL's windows can allocate on iris's heap as well)
          if (guard && v == V_NCCL_SYMM && buf_of(V_AUTO) == 0) continue;
          if (small_variant(v) && (!small_mode || op.bytes > SMALL_MAX)) continue;
          if (v <= V_NCCL_SYMM && !dts[dt].nccl_ok) continue; // fp8 before NCCL 2.24
          if (v == V_LL2 && !(c == C_AR && op.bytes <= (double)IRIS_COLL_LL2_BYTES * W) && !(c == C_BC && W >= 3 && op.bytes <= (double)IRIS_COLL_LL2_BYTES * (W - 1)))
            continue;
          if (variants && !strstr(variants, var_name[v])) continue;
          // NCCL 2.28's symmetric-window broadcast did not return at 4 MB on 2 and on 4
          // H100s (the guard hung there until killed); the guard keeps plain NCCL there
          if (guard && v == V_NCCL_SYMM && c == C_BC && op.bytes >= 2.0 * MiB && !env_int("BENCH_GUARD_BC_SYMM", 0)) {
            if (rank == 0) printf("%-15s %-11s %12.0f %-15s skipped: NCCL symmetric broadcast hangs from 2 MB (BENCH_GUARD_BC_SYMM=1 runs it)\n", coll_name[c],
                                  dts[dt].name, op.bytes, var_name[v]);
            continue;
          }
          Res r = measure(op, v);
          // the guard measures a door that fails its row once more and keeps the better time:
          // a stalled host thread during the timed batches inflated one row 90x on 2 H100s
          // (every phase of that row slow, the rows around it normal); a regression persists
          if (guard && (v == V_AUTO || v == V_LIB) && r.skipped == IRIS_SUCCESS && best_g < 1e30 &&
              (best_g / r.graph_us < guard_need() || (v == V_LIB && fabs(r.graph_us / auto_g - 1) > guard_doors()))) {
            const Res again = measure(op, v);
            if (rank == 0) printf("# %s %s %.0f B: %.2f us fails the guard's row; measured again: %.2f us\n", coll_name[c], var_name[v], op.bytes, r.graph_us, again.graph_us);
            r.bad += again.bad;
            if (again.skipped == IRIS_SUCCESS) r.graph_us = std::min(r.graph_us, again.graph_us);
          }
          Tail tl = {0, 0, 0, 0, false};
          const int tail_n = op.bytes >= 64.0 * MiB ? 200 : env_int("BENCH_GUARD_TAIL", 500);
          if (guard && r.skipped == IRIS_SUCCESS) tl = tail_run(op, v, true, tail_n, stream);
          // and a door whose tail fails once more, keeping the shorter: on 2 H200s one
          // broadcast row's p99 came out 1.66x its p50 in one pass and 1.14x in the next
          // (the same kernel on the heap and off it); a tail of the design persists
          if (guard && (v == V_AUTO || v == V_LIB) && tl.ok && tl.p99 > guard_tailx() * tl.p50 && !(best_t.ok && best_t.p99 > guard_tailx() * best_t.p50)) {
            const Tail again = tail_run(op, v, true, tail_n, stream);
            if (rank == 0) printf("# %s %s %.0f B: p99 %.2f us is %.2fx its p50; measured again: p50 %.2f, p99 %.2f\n", coll_name[c], var_name[v], op.bytes, tl.p99,
                                  tl.p99 / tl.p50, again.p50, again.p99);
            if (again.ok && again.p99 / again.p50 < tl.p99 / tl.p50) tl = again;
          }
          if (r.skipped == IRIS_SUCCESS && v <= V_NCCL_SYMM && r.graph_us < best_g) best_t = tl;
          if (r.skipped == IRIS_SUCCESS && v <= V_NCCL_SYMM) best_g = std::min(best_g, r.graph_us), best_e = std::min(best_e, r.eager_us);
          if (v == V_AUTO) auto_t = tl;
          bad_rows += r.bad != 0;
          const bool x = (v == V_AUTO || v == V_LIB) && best_g < 1e30; // against NCCL, where it ran
          if (rank == 0) row(op, v, r, x ? best_g / r.graph_us : 0, x && r.eager_us > 0 ? best_e / r.eager_us : 0);
          if (v == V_AUTO) auto_g = r.graph_us;
          if (v == V_LIB && rank == 0) verdicts.push_back({c, op.bytes, best_g, auto_g, r.graph_us, best_t, auto_t, tl});
        }
      }

  int guard_fail = 0;
  if (guard && rank == 0) guard_fail = guard_report(verdicts.data(), (int)verdicts.size(), W);
  if (guard && env_int("BENCH_GUARD_COMPANY", 1)) { // one row per collective beside a GEMM (printed, not judged)
    company_setup();
    const size_t cs = std::min(max_bytes, (size_t)MiB);
    if (rank == 0)
      printf("# company (1 MiB or max_bytes, single-call graphs, beside %dx a %d^3 bf16 GEMM on another stream; the same calls for both, sized from NCCL's time alone): us per call p50 / p99, GEMM time x alone\n", 20, gemm_n);
    for (int c = 0; c < C_N; c++) {
      Op op;
      if (!only[c] || !make_op(c, main_dt, cs, &op) || op.out_elems * op.elt > out_max) continue;
      const Company n = company_run(op, V_NCCL, 20, 0);
      const Company i = company_run(op, V_AUTO, 20, n.ok && env_int("BENCH_COMPANY_SAME_CALLS", 1) ? n.calls : 0);
      if (rank == 0 && n.ok && i.ok)
        printf("%-15s %10.0f company: nccl %.2f / %.2f us, GEMM x %.3f; iris %.2f / %.2f us, GEMM x %.3f (%d / %d calls)\n", coll_name[c], op.bytes, n.coll.p50, n.coll.p99,
               n.slow, i.coll.p50, i.coll.p99, i.slow, n.calls, i.calls);
    }
  }
  if (rank == 0) printf("# bench_coll: %.0f s\n", difftime(time(NULL), t_start));
  CK(cudaStreamSynchronize(stream));
  IK(iris_barrier(ctx));
  if (lib.h) {
    LK(lib.free_(lib_ctx, buf[3].in));
    LK(lib.free_(lib_ctx, buf[3].out));
    LK(lib.finalize(lib_ctx));
  }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  for (int i = 0; i < 2; i++) if (win[i]) NK(ncclCommWindowDeregister(comm, win[i]));
  if (buf[1].in) NK(ncclMemFree(buf[1].in));
  if (buf[1].out) NK(ncclMemFree(buf[1].out));
#endif
  NK(ncclCommDestroy(comm));
  CK(cudaFree(buf[0].in));
  CK(cudaFree(buf[0].out));
  CK(cudaFree(d_bad));
  for (int i = 0; i < 40; i++) CK(cudaEventDestroy(ev[i]));
  CK(cudaStreamDestroy(stream));
  IK(iris_free(ctx, buf[2].in));
  IK(iris_free(ctx, buf[2].out));
  if (ctx_nopdl) IK(iris_finalize(ctx_nopdl));
  if (ctx_nocheck) IK(iris_finalize(ctx_nocheck));
  if (rank == 0) {
    if (csv) fclose(csv);
    if (png && *png && csv) plot(csv_path, png);
    if (csv_path == tmp_csv) unlink(tmp_csv);
    if (bad_rows) printf("bench_coll: %d rows with wrong results (BAD)\n", bad_rows);
  }
  IK(iris_finalize(ctx));
  return bad_rows || guard_fail ? 1 : 0;
}
