/* internal/device/trace_host.h: the host side of the IRIS_TRACE timelines
 * (internal/device/trace.h): iris_trace_read. Part of iris_device.h's implementation
 * (IRIS_IMPLEMENTATION); not a public header. */
#ifndef IRIS_INTERNAL_DEVICE_TRACE_HOST_H
#define IRIS_INTERNAL_DEVICE_TRACE_HOST_H
#include "../../iris.h"
#include "../core/sys.h"
#include "../core/platform.h"
#include "../core/status.h"
#include "trace.h"

/* Host, IRIS_TRACE units with IRIS_IMPLEMENTATION only: copy up to `cap` records of the
 * ring into dst (the newest IRIS_TRACE_CAP at most, in no particular order), *n of them,
 * and empty the ring. Call it when the context's GPU is idle (after a synchronize). */
#if defined(IRIS_TRACE)
extern "C" IRIS_API iris_status_t iris_trace_read(iris_t *ctx, iris_trace_rec_t *dst, size_t cap, size_t *n);
extern "C" IRIS_DEF iris_status_t iris_trace_read(iris_t *ctx, iris_trace_rec_t *dst, size_t cap, size_t *n) {
  unsigned long long next = 0, zero = 0, *pnext = NULL;
  iris_trace_rec_t *ring = NULL;
  iris_gpu_error_t e;
  int old = -1;
  if (!ctx || !n || (cap && !dst)) return iris_detail_fail(IRIS_ERROR_INVALID_ARGUMENT, "iris_trace_read: NULL argument");
  *n = 0;
  (void)iris_gpu_get_device(&old);
  (void)iris_gpu_set_device(iris_device_ordinal(ctx));
  e = iris_gpu_symbol_address((void **)&pnext, (const void *)&iris_trace_next);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_symbol_address((void **)&ring, (const void *)&iris_trace_ring);
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize();
  if (e == IRIS_GPU_SUCCESS) e = iris_gpu_copy_to_host(&next, pnext, sizeof next);
  if (e == IRIS_GPU_SUCCESS) {
    size_t k = next < IRIS_TRACE_CAP ? (size_t)next : (size_t)IRIS_TRACE_CAP;
    if (k > cap) k = cap;
    if (k) e = iris_gpu_copy_to_host(dst, ring, k * sizeof *dst);
    if (e == IRIS_GPU_SUCCESS) e = iris_gpu_copy_to_device(pnext, &zero, sizeof zero);
    if (e == IRIS_GPU_SUCCESS) e = iris_gpu_synchronize(); /* landed before a kernel on a non-blocking stream counts again */
    if (e == IRIS_GPU_SUCCESS) *n = k;
  }
  if (old >= 0) (void)iris_gpu_set_device(old);
  return e == IRIS_GPU_SUCCESS ? IRIS_SUCCESS : iris_detail_gpu_fail(iris_rank(ctx), "iris_trace_read", e);
}
#endif

#endif /* IRIS_INTERNAL_DEVICE_TRACE_HOST_H */
