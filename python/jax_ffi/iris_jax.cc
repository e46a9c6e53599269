// iris_jax.cc: XLA FFI handlers for iris's collectives (libiris_jax.so): all-reduce,
// all-gather, reduce-scatter, all-to-all, broadcast.
//
//   make lib-jax   (or:) c++ -std=c++17 -O2 -shared -fPIC -I. -isystem $(python3 -c 'import jax.ffi;
//                  print(jax.ffi.include_dir())') -I$CUDA_HOME/include python/jax_ffi/iris_jax.cc
//                  -Lbuild -liris -Wl,-rpath,'$ORIGIN' -o build/libiris_jax.so
//
// One process per GPU; iris_gpu.jax brings the ranks up (iris_init over jax.distributed's
// key-value store) and passes the iris_t handle as the int64 attribute "iris_ctx" (not
// "ctx": jax's lowering rule has a parameter of that name), and a team's iris_team_t by
// its address as "iris_team" (0: the world; iris_gpu.jax's Team keeps the struct alive). XLA allocates the operands,
// usually not on iris's heap: the library then stages them through its heap, so any
// buffer works. Operands that do lie on the heap (iris_gpu.jax heap arrays, and outputs
// XLA aliased to a donated heap array) take the zero-copy path; the handlers count which
// case each call was (iris_jax_heap_calls). The handlers only enqueue work on XLA's stream
// and allocate nothing, so they are declared command-buffer compatible (XLA may capture
// them in a CUDA graph); the collective state was created at bring-up
// (iris_collectives_setup).
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "iris_collectives.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// How many handler calls ran while their stream was being captured into a CUDA graph (an
// XLA command buffer records the handler once; its replays do not call it again). Lets a
// test prove the handlers ran inside a command buffer whatever XLA's HLO shows.
static std::atomic<long long> iris_jax_captured{0};
extern "C" __attribute__((visibility("default"))) long long iris_jax_captured_calls(void) { return iris_jax_captured.load(); }

// Handler calls by kind (0 all-reduce, 1 all-gather, 2 reduce-scatter, 3 all-to-all,
// 4 broadcast) and by where the buffers lay: bit 0 set when the input is on this rank's
// symmetric heap, bit 1 when the output is (3: both, the zero-copy path). Host-side
// bookkeeping only (iris_heap_offset), no GPU sync. A call recorded into a command buffer
// counts once, when recorded, not at each replay.
static std::atomic<long long> iris_jax_placed[5][4];
extern "C" __attribute__((visibility("default"))) long long iris_jax_heap_calls(int kind, int where) {
  return kind >= 0 && kind < 5 && where >= 0 && where < 4 ? iris_jax_placed[kind][where].load() : -1;
}

// Host helpers of the heap arrays (iris_gpu.jax): each returns a cudaError_t. A device
// copy into a fresh heap block, complete when it returns (the caller waited for src);
// and a device-wide synchronize before a heap block is given back, so no queued kernel
// of XLA still touches it when a later allocation reuses the bytes.
extern "C" __attribute__((visibility("default"))) int iris_jax_copy(void *dst, const void *src, size_t bytes, int device) {
  int old = -1;
  cudaError_t e = cudaGetDevice(&old);
  if (e == cudaSuccess) e = cudaSetDevice(device);
  if (e == cudaSuccess && bytes) e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (old >= 0) cudaSetDevice(old);
  return static_cast<int>(e);
}
extern "C" __attribute__((visibility("default"))) int iris_jax_device_sync(int device) { return iris_jax_copy(nullptr, nullptr, 0, device); }

namespace {

// Records where a call's buffers lay (iris_jax_placed); the library makes the same test
// (a pointer in the heap with its whole extent) when it picks the path.
void iris_jax_note_place(int kind, iris_t *ctx, const ffi::AnyBuffer &x, const ffi::AnyBuffer &y) {
  const size_t heap = iris_heap_size(ctx);
  size_t off;
  const int in = iris_heap_offset(ctx, x.untyped_data(), &off) == IRIS_SUCCESS && x.size_bytes() <= heap - off;
  const int out = iris_heap_offset(ctx, y.untyped_data(), &off) == IRIS_SUCCESS && y.size_bytes() <= heap - off;
  iris_jax_placed[kind][in | out << 1].fetch_add(1);
}

void iris_jax_note_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusActive) iris_jax_captured.fetch_add(1);
}

// XLA element type -> iris_dtype_t (5, 6, 7: IRIS_UINT8, IRIS_FLOAT8_E4M3, IRIS_FLOAT8_E5M2).
bool iris_jax_dtype(ffi::DataType t, iris_dtype_t *out) {
  switch (t) {
    case ffi::DataType::F32: *out = IRIS_FLOAT32; return true;
    case ffi::DataType::F16: *out = IRIS_FLOAT16; return true;
    case ffi::DataType::BF16: *out = IRIS_BFLOAT16; return true;
    case ffi::DataType::S32: *out = IRIS_INT32; return true;
    case ffi::DataType::S64: *out = IRIS_INT64; return true;
    case ffi::DataType::U8: *out = static_cast<iris_dtype_t>(5); return true;
    case ffi::DataType::F8E4M3FN: *out = static_cast<iris_dtype_t>(6); return true;
    case ffi::DataType::F8E5M2: *out = static_cast<iris_dtype_t>(7); return true;
    default: return false;
  }
}

// A handler's own refusal, worded as iris_jax_status words a library's (call: status name: detail).
ffi::Error iris_jax_refuse(const char *call, const std::string &detail) {
  return ffi::Error::InvalidArgument(std::string(call) + ": IRIS_ERROR_INVALID_ARGUMENT: " + detail);
}

// The checks every handler shares; on success *ctx and *type are set. The output holds
// the input's elements times mul, divided by div (which must divide them).
ffi::Error iris_jax_check(const char *call, int64_t handle, const ffi::AnyBuffer &x, const ffi::AnyBuffer &y, size_t mul, iris_t **ctx, iris_dtype_t *type,
                          size_t div = 1) {
  *ctx = reinterpret_cast<iris_t *>(static_cast<intptr_t>(handle));
  if (!*ctx) return iris_jax_refuse(call, "the iris context is 0 (closed, or never created)");
  if (!iris_jax_dtype(x.element_type(), type)) return iris_jax_refuse(call, "element type not supported by iris");
  if (y.element_type() != x.element_type()) return iris_jax_refuse(call, "output type differs from the input's");
  if (div == 0 || x.element_count() % div)
    return iris_jax_refuse(call, "input has " + std::to_string(x.element_count()) + " elements, not a multiple of the world size " + std::to_string(div));
  if (y.element_count() != mul * (x.element_count() / div))
    return iris_jax_refuse(call, "output has " + std::to_string(y.element_count()) + " elements, expected " + std::to_string(mul * (x.element_count() / div)));
  return ffi::Error::Success();
}

// The world size of a live context, for the handlers whose sizes depend on it; 0 with
// *err set for a finalized one (a jitted function kept past close(): its world size reads 0).
size_t iris_jax_world(const char *call, int64_t ctx, ffi::Error *err) {
  const int64_t world = ctx ? iris_world_size(reinterpret_cast<iris_t *>(static_cast<intptr_t>(ctx))) : 1;
  if (world <= 0) {
    *err = ffi::Error::Internal(std::string(call) + ": IRIS_ERROR_INVALID_ARGUMENT: the iris context was closed (finalized); create a new Context and trace again");
    return 0;
  }
  return static_cast<size_t>(world);
}

ffi::Error iris_jax_status(const char *call, iris_status_t st) {
  if (st == IRIS_SUCCESS) return ffi::Error::Success();
  return ffi::Error::Internal(std::string(call) + ": " + iris_status_string(st) + ": " + iris_error_detail());
}

// The team a call runs over (the int64 attribute "iris_team": the address of an iris_team_t
// that iris_gpu.jax's Team keeps; 0: the context's world) and its size.
const iris_team_t *iris_jax_team(int64_t team) { return reinterpret_cast<const iris_team_t *>(static_cast<intptr_t>(team)); }
size_t iris_jax_ranks(const char *call, int64_t ctx, int64_t team, ffi::Error *err) {
  const iris_team_t *tm = iris_jax_team(team);
  if (tm) {
    if (tm->size < 1) *err = ffi::Error::Internal(std::string(call) + ": IRIS_ERROR_INVALID_ARGUMENT: the team was closed (destroyed); split a new one and trace again");
    return tm->size < 1 ? 0 : static_cast<size_t>(tm->size);
  }
  return iris_jax_world(call, ctx, err);
}

// The handlers' kinds, as iris_jax_placed counts them.
enum { IRIS_JAX_AR = 0, IRIS_JAX_AG, IRIS_JAX_RS, IRIS_JAX_A2A, IRIS_JAX_BC };

// A handler's own refusal (a type, a size) on a live context still takes part in the
// library, as a refused C call does: the same collective with NULL buffers, which the
// library refuses after its one refused-call launch (collectives.md, "Bad input and
// mismatches"). Refused on this rank only, the peers' call is a mismatch (nothing written;
// ctx.check() raises IRIS_ERROR_MISMATCH on every rank) instead of a wait to
// IRIS_WAIT_TIMEOUT_MS, and every rank's later calls stay paired; refused on every rank
// alike, the ranks meet in it. Returns the handler's own error e either way.
ffi::Error iris_jax_take_part(ffi::Error e, int kind, int64_t ctx, int64_t team, cudaStream_t stream) {
  iris_t *c = reinterpret_cast<iris_t *>(static_cast<intptr_t>(ctx));
  const iris_team_t *tm = iris_jax_team(team);
  const iris_dtype_t f = IRIS_FLOAT32;
  if (!c || (tm && tm->size < 1)) return e;  // no context, a closed team: nothing to take part in
  switch (kind) {
    case IRIS_JAX_AR: (void)(tm ? iris_all_reduce_team(c, tm, NULL, NULL, 1, f, IRIS_SUM, stream, NULL) : iris_all_reduce(c, NULL, NULL, 1, f, IRIS_SUM, stream)); break;
    case IRIS_JAX_AG: (void)(tm ? iris_all_gather_team(c, tm, NULL, NULL, 1, f, stream, NULL) : iris_all_gather(c, NULL, NULL, 1, f, stream)); break;
    case IRIS_JAX_RS: (void)(tm ? iris_reduce_scatter_team(c, tm, NULL, NULL, 1, f, IRIS_SUM, stream, NULL) : iris_reduce_scatter(c, NULL, NULL, 1, f, IRIS_SUM, stream)); break;
    case IRIS_JAX_A2A: (void)(tm ? iris_all_to_all_team(c, tm, NULL, NULL, 1, f, stream, NULL) : iris_all_to_all(c, NULL, NULL, 1, f, stream)); break;
    default: (void)(tm ? iris_broadcast_team(c, tm, NULL, NULL, 1, f, 0, stream, NULL) : iris_broadcast(c, NULL, NULL, 1, f, 0, stream)); break;
  }
  return e;
}

// A call of no elements goes to the library too: it moves nothing and takes part (one
// device barrier), so a rank that alone passes none makes its peers' call a mismatch
// instead of a wait to their bound.
ffi::Error AllReduceImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t ctx, int32_t op, int64_t team) {
  iris_t *c;
  iris_dtype_t t;
  ffi::Error e = ffi::Error::Success();
  if (!iris_jax_ranks("iris_all_reduce", ctx, team, &e)) return e;
  e = iris_jax_check("iris_all_reduce", ctx, x, *y, 1, &c, &t);
  if (e.failure()) return iris_jax_take_part(std::move(e), IRIS_JAX_AR, ctx, team, stream);
  iris_jax_note_capture(stream);
  if (x.element_count()) iris_jax_note_place(IRIS_JAX_AR, c, x, *y);
  const iris_redop_t o = static_cast<iris_redop_t>(op);
  return iris_jax_status("iris_all_reduce", team ? iris_all_reduce_team(c, iris_jax_team(team), x.untyped_data(), y->untyped_data(), x.element_count(), t, o, stream, NULL)
                                                 : iris_all_reduce(c, x.untyped_data(), y->untyped_data(), x.element_count(), t, o, stream));
}

ffi::Error AllGatherImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t ctx, int64_t team) {
  iris_t *c;
  iris_dtype_t t;
  ffi::Error e = ffi::Error::Success();
  const size_t ranks = iris_jax_ranks("iris_all_gather", ctx, team, &e);
  if (!ranks) return e;
  e = iris_jax_check("iris_all_gather", ctx, x, *y, ranks, &c, &t);
  if (e.failure()) return iris_jax_take_part(std::move(e), IRIS_JAX_AG, ctx, team, stream);
  iris_jax_note_capture(stream);
  if (x.element_count()) iris_jax_note_place(IRIS_JAX_AG, c, x, *y);
  return iris_jax_status("iris_all_gather", team ? iris_all_gather_team(c, iris_jax_team(team), x.untyped_data(), y->untyped_data(), x.element_count(), t, stream, NULL)
                                                 : iris_all_gather(c, x.untyped_data(), y->untyped_data(), x.element_count(), t, stream));
}

// reduce_scatter: x holds one block per rank, y one (this rank's block of the reduction).
ffi::Error ReduceScatterImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t ctx, int32_t op, int64_t team) {
  iris_t *c;
  iris_dtype_t t;
  ffi::Error e = ffi::Error::Success();
  const size_t ranks = iris_jax_ranks("iris_reduce_scatter", ctx, team, &e);
  if (!ranks) return e;
  e = iris_jax_check("iris_reduce_scatter", ctx, x, *y, 1, &c, &t, ranks);
  if (e.failure()) return iris_jax_take_part(std::move(e), IRIS_JAX_RS, ctx, team, stream);
  iris_jax_note_capture(stream);
  if (x.element_count()) iris_jax_note_place(IRIS_JAX_RS, c, x, *y);
  const iris_redop_t o = static_cast<iris_redop_t>(op);
  return iris_jax_status("iris_reduce_scatter", team ? iris_reduce_scatter_team(c, iris_jax_team(team), x.untyped_data(), y->untyped_data(), y->element_count(), t, o, stream, NULL)
                                                     : iris_reduce_scatter(c, x.untyped_data(), y->untyped_data(), y->element_count(), t, o, stream));
}

// all_to_all: x and y hold one block per rank; block r of x goes to rank r, block r of y came from it.
ffi::Error AllToAllImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t ctx, int64_t team) {
  iris_t *c;
  iris_dtype_t t;
  ffi::Error e = ffi::Error::Success();
  const size_t ranks = iris_jax_ranks("iris_all_to_all", ctx, team, &e);
  if (!ranks) return e;
  e = iris_jax_check("iris_all_to_all", ctx, x, *y, ranks, &c, &t, ranks);
  if (e.failure()) return iris_jax_take_part(std::move(e), IRIS_JAX_A2A, ctx, team, stream);
  iris_jax_note_capture(stream);
  if (x.element_count()) iris_jax_note_place(IRIS_JAX_A2A, c, x, *y);
  const size_t n = x.element_count() / ranks;
  return iris_jax_status("iris_all_to_all", team ? iris_all_to_all_team(c, iris_jax_team(team), x.untyped_data(), y->untyped_data(), n, t, stream, NULL)
                                                 : iris_all_to_all(c, x.untyped_data(), y->untyped_data(), n, t, stream));
}

// broadcast: y = root's x on every rank (x is read on the root only; root a team rank on a team).
ffi::Error BroadcastImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t ctx, int32_t root, int64_t team) {
  iris_t *c;
  iris_dtype_t t;
  ffi::Error e = ffi::Error::Success();
  if (!iris_jax_ranks("iris_broadcast", ctx, team, &e)) return e;
  e = iris_jax_check("iris_broadcast", ctx, x, *y, 1, &c, &t);
  if (e.failure()) return iris_jax_take_part(std::move(e), IRIS_JAX_BC, ctx, team, stream);
  iris_jax_note_capture(stream);
  if (x.element_count()) iris_jax_note_place(IRIS_JAX_BC, c, x, *y);
  return iris_jax_status("iris_broadcast", team ? iris_broadcast_team(c, iris_jax_team(team), x.untyped_data(), y->untyped_data(), x.element_count(), t, root, stream, NULL)
                                                : iris_broadcast(c, x.untyped_data(), y->untyped_data(), x.element_count(), t, root, stream));
}

// all_gather(x, out=...): out is an operand XLA aliases to the result (input_output_aliases
// {1: 0}), so when the caller donates a heap array as out the result is written there. The
// handler reads nothing of out: the result buffer is out's (or XLA's copy of it).
ffi::Error AllGatherIntoImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer out, ffi::Result<ffi::AnyBuffer> y, int64_t ctx, int64_t team) {
  ffi::Error e = ffi::Error::Success();
  if (!iris_jax_ranks("iris_all_gather_into", ctx, team, &e)) return e;
  if (out.element_type() != y->element_type() || out.element_count() != y->element_count())
    return iris_jax_take_part(iris_jax_refuse("iris_all_gather_into", "the out operand differs from the result in type or size"), IRIS_JAX_AG, ctx, team, stream);
  return AllGatherImpl(stream, x, y, ctx, team);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(IrisAllReduce, AllReduceImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("iris_ctx")
                                  .Attr<int32_t>("op")
                                  .Attr<int64_t>("iris_team"),
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(IrisAllGather, AllGatherImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("iris_ctx")
                                  .Attr<int64_t>("iris_team"),
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(IrisAllGatherInto, AllGatherIntoImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("iris_ctx")
                                  .Attr<int64_t>("iris_team"),
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(IrisReduceScatter, ReduceScatterImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("iris_ctx")
                                  .Attr<int32_t>("op")
                                  .Attr<int64_t>("iris_team"),
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(IrisAllToAll, AllToAllImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("iris_ctx")
                                  .Attr<int64_t>("iris_team"),
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(IrisBroadcast, BroadcastImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("iris_ctx")
                                  .Attr<int32_t>("root")
                                  .Attr<int64_t>("iris_team"),
                              {ffi::Traits::kCmdBufferCompatible});
