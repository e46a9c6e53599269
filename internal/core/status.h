/* internal/core/status.h: errors: this thread's detail buffer, the helpers that fill it
 * (iris_detail_fail and its GPU and OS forms), iris_status_string,
 * iris_error_detail and iris_get_version. Part of iris's implementation, included by
 * iris.h under IRIS_IMPLEMENTATION (inside its extern "C" block); not a public header. */
#ifndef IRIS_INTERNAL_CORE_STATUS_H
#define IRIS_INTERNAL_CORE_STATUS_H
#include "../../iris.h"
#include "sys.h"
#include "platform.h"

static IRIS_DETAIL_TLS char iris_detail_errbuf[1024];

IRIS_INTERNAL iris_status_t iris_detail_fail(iris_status_t st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(iris_detail_errbuf, sizeof iris_detail_errbuf, fmt, ap);
  va_end(ap);
  return st;
}
IRIS_INTERNAL iris_status_t iris_detail_gpu_fail(int rank, const char *call, iris_gpu_error_t e) {
  return iris_detail_fail(IRIS_ERROR_GPU, "rank %d: %s failed: %s (" IRIS_GPU_NAME " error %d)%s", rank, call, iris_gpu_error_text(e), (int)e,
                          iris_gpu_error_cause(e));
}
/* st, with the current detail prefixed by `call: ` (the detail is copied first: it is
 * also the destination). */
IRIS_INTERNAL iris_status_t iris_detail_prefix(iris_status_t st, const char *call) {
  char keep[sizeof iris_detail_errbuf];
  memcpy(keep, iris_detail_errbuf, sizeof keep);
  keep[sizeof keep - 1] = 0;
  return iris_detail_fail(st, "%s: %s", call, keep);
}
/* strncpy that always terminates and never warns */
IRIS_INTERNAL void iris_detail_copy(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = 0;
}
IRIS_INTERNAL iris_status_t iris_detail_sys_fail(int rank, const char *call, int err) {
  return iris_detail_fail(IRIS_ERROR_SYSTEM, "rank %d: %s failed: %s", rank, call, strerror(err));
}

IRIS_DEF const char *iris_status_string(iris_status_t s) {
  switch (s) {
  case IRIS_SUCCESS: return "IRIS_SUCCESS: no error";
  case IRIS_ERROR_INVALID_ARGUMENT: return "IRIS_ERROR_INVALID_ARGUMENT: an argument is NULL, zero or out of range";
  case IRIS_ERROR_INVALID_RANK: return "IRIS_ERROR_INVALID_RANK: a rank outside [0, world_size)";
  case IRIS_ERROR_OUT_OF_MEMORY: return "IRIS_ERROR_OUT_OF_MEMORY: the symmetric heap (or host memory) is exhausted";
  case IRIS_ERROR_NOT_IN_HEAP: return "IRIS_ERROR_NOT_IN_HEAP: the pointer is outside the symmetric heap";
  case IRIS_ERROR_MISMATCH: return "IRIS_ERROR_MISMATCH: ranks disagree (world size, heap size, version or allocations)";
  case IRIS_ERROR_TIMEOUT: return "IRIS_ERROR_TIMEOUT: a rank did not arrive in time";
  case IRIS_ERROR_GPU: return "IRIS_ERROR_GPU: no usable GPU, or the CUDA/HIP runtime reported an error";
  case IRIS_ERROR_SYSTEM: return "IRIS_ERROR_SYSTEM: an operating-system call failed";
  case IRIS_ERROR_PERMISSION: return "IRIS_ERROR_PERMISSION: a peer of another user, or an unsafe rendezvous directory";
  case IRIS_ERROR_DIFFERENT_HOST: return "IRIS_ERROR_DIFFERENT_HOST: ranks run on different hosts; GPU IPC does not cross hosts";
  case IRIS_ERROR_UNSUPPORTED: return "IRIS_ERROR_UNSUPPORTED: not supported by this build or platform";
  case IRIS_ERROR_BOOTSTRAP: return "IRIS_ERROR_BOOTSTRAP: a bootstrap callback returned an error";
  case IRIS_ERROR_RANK_FAILED: return "IRIS_ERROR_RANK_FAILED: a launched rank exited with an error";
  case IRIS_ERROR_PEER_FAILED: return "IRIS_ERROR_PEER_FAILED: a peer's process died while this rank waited for it";
  case IRIS_ERROR_ABORTED: return "IRIS_ERROR_ABORTED: the context was aborted (iris_abort or an earlier fatal fault)";
  case IRIS_ERROR_IN_USE: return "IRIS_ERROR_IN_USE: the rendezvous name is held by another live job";
  default: return "IRIS_ERROR_?: unknown status";
  }
}
IRIS_DEF const char *iris_error_detail(void) { return iris_detail_errbuf; }
IRIS_DEF int iris_get_version(void) { return IRIS_VERSION; }

#endif /* IRIS_INTERNAL_CORE_STATUS_H */
