// iris_jax.cc: XLA FFI handlers for iris's all-reduce and all-gather (libiris_jax.so).
//
//   make lib-jax   (or:) c++ -std=c++17 -O2 -shared -fPIC -I. -isystem $(python3 -c 'import jax.ffi;
//                  print(jax.ffi.include_dir())') -I$CUDA_HOME/include python/jax_ffi/iris_jax.cc
//                  -Lbuild -liris -Wl,-rpath,'$ORIGIN' -o build/libiris_jax.so
//
// One process per GPU; iris_gpu.jax brings the ranks up (iris_init over jax.distributed's
// key-value store) and passes the iris_t handle as the int64 attribute "iris_ctx" (not
// "ctx": jax's lowering rule has a parameter of that name). XLA allocates the operands,
// not iris: the library stages them through its heap (copies on the stream), so any
// buffer works. Both handlers only enqueue work on XLA's stream and allocate nothing,
// so they are declared command-buffer compatible (XLA may capture them in a CUDA graph);
// the collective state was created at bring-up (iris_collectives_setup).
#include <atomic>
#include <cstdint>
#include <string>

#include "iris_collectives.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// How many handler calls ran while their stream was being captured into a CUDA graph (an
// XLA command buffer records the handler once; its replays do not call it again). Lets a
// test prove the handlers ran inside a command buffer whatever XLA's HLO shows.
static std::atomic<long long> iris_jax_captured{0};
extern "C" __attribute__((visibility("default"))) long long iris_jax_captured_calls(void) { return iris_jax_captured.load(); }

namespace {

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

// The checks both handlers share; on success *ctx and *type are set.
ffi::Error iris_jax_check(const char *call, int64_t handle, const ffi::AnyBuffer &x, const ffi::AnyBuffer &y, size_t ratio, iris_t **ctx,
                          iris_dtype_t *type) {
  *ctx = reinterpret_cast<iris_t *>(static_cast<intptr_t>(handle));
  if (!*ctx) return ffi::Error::InvalidArgument(std::string(call) + ": the iris context is 0 (closed, or never created)");
  if (!iris_jax_dtype(x.element_type(), type)) return ffi::Error::InvalidArgument(std::string(call) + ": element type not supported by iris");
  if (y.element_type() != x.element_type()) return ffi::Error::InvalidArgument(std::string(call) + ": output type differs from the input's");
  if (y.element_count() != ratio * x.element_count())
    return ffi::Error::InvalidArgument(std::string(call) + ": output has " + std::to_string(y.element_count()) + " elements, expected " +
                                       std::to_string(ratio * x.element_count()));
  return ffi::Error::Success();
}

ffi::Error iris_jax_status(const char *call, iris_status_t st) {
  if (st == IRIS_SUCCESS) return ffi::Error::Success();
  return ffi::Error::Internal(std::string(call) + ": " + iris_status_string(st) + ": " + iris_error_detail());
}

ffi::Error AllReduceImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t ctx, int32_t op) {
  iris_t *c;
  iris_dtype_t t;
  ffi::Error e = iris_jax_check("iris_all_reduce", ctx, x, *y, 1, &c, &t);
  if (e.failure() || x.element_count() == 0) return e;
  iris_jax_note_capture(stream);
  return iris_jax_status("iris_all_reduce", iris_all_reduce(c, x.untyped_data(), y->untyped_data(), x.element_count(), t,
                                                            static_cast<iris_redop_t>(op), stream));
}

ffi::Error AllGatherImpl(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t ctx) {
  iris_t *c;
  iris_dtype_t t;
  const int64_t world = ctx ? iris_world_size(reinterpret_cast<iris_t *>(static_cast<intptr_t>(ctx))) : 0;
  ffi::Error e = iris_jax_check("iris_all_gather", ctx, x, *y, static_cast<size_t>(world), &c, &t);
  if (e.failure() || x.element_count() == 0) return e;
  iris_jax_note_capture(stream);
  return iris_jax_status("iris_all_gather", iris_all_gather(c, x.untyped_data(), y->untyped_data(), x.element_count(), t, stream));
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(IrisAllReduce, AllReduceImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("iris_ctx")
                                  .Attr<int32_t>("op"),
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(IrisAllGather, AllGatherImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<int64_t>("iris_ctx"),
                              {ffi::Traits::kCmdBufferCompatible});
