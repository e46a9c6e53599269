/* internal/core/platform.h: the host vendor layer, the only place where iris calls the CUDA
 * or HIP runtime (or driver), and where the host side's other vendor differences live: the
 * visible-devices variable, the driver's files, the NCCL / RCCL library. Every other file
 * calls iris_gpu_* and IRIS_GPU_* from here. Its device-side twin is
 * internal/device/platform.h. Part of iris's implementation (included by iris.h under
 * IRIS_IMPLEMENTATION); not a public header. */
#ifndef IRIS_INTERNAL_CORE_PLATFORM_H
#define IRIS_INTERNAL_CORE_PLATFORM_H
#include "../../iris.h"
#include "sys.h"

#if defined(IRIS_USE_HIP)
typedef hipError_t iris_gpu_error_t;
typedef hipIpcMemHandle_t iris_gpu_ipc_handle_t;
#define IRIS_GPU_SUCCESS hipSuccess
#define IRIS_GPU_ERROR_MEMORY hipErrorOutOfMemory
#define IRIS_GPU_NAME "HIP"
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_device_count(int *n) { return hipGetDeviceCount(n); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_get_device(int *d) { return hipGetDevice(d); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_set_device(int d) { return hipSetDevice(d); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_malloc(void **p, size_t n, iris_heap_memory_t kind) {
  if (kind == IRIS_HEAP_MEMORY_COARSE) return hipMalloc(p, n);
#if defined(hipDeviceMallocUncached)
  if (kind == IRIS_HEAP_MEMORY_UNCACHED) return hipExtMallocWithFlags(p, n, hipDeviceMallocUncached);
#else
  if (kind == IRIS_HEAP_MEMORY_UNCACHED) return hipErrorNotSupported;
#endif
  return hipExtMallocWithFlags(p, n, hipDeviceMallocFinegrained);
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_free(void *p) { return hipFree(p); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_memset(void *p, int v, size_t n) { return hipMemset(p, v, n); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_synchronize(void) { return hipDeviceSynchronize(); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_ipc_get(iris_gpu_ipc_handle_t *h, void *p) { return hipIpcGetMemHandle(h, p); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_ipc_open(void **p, iris_gpu_ipc_handle_t h) { return hipIpcOpenMemHandle(p, h, hipIpcMemLazyEnablePeerAccess); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_ipc_close(void *p) { return hipIpcCloseMemHandle(p); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_can_access_peer(int *ok, int d, int peer) { return hipDeviceCanAccessPeer(ok, d, peer); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_enable_peer(int peer) {
  hipError_t e = hipDeviceEnablePeerAccess(peer, 0);
  if (e == hipErrorPeerAccessAlreadyEnabled) { (void)hipGetLastError(); return hipSuccess; }
  return e;
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_pci_bus_id(char *s, int n, int d) { return hipDeviceGetPCIBusId(s, n, d); }
IRIS_INTERNAL inline const char *iris_gpu_error_text(iris_gpu_error_t e) { return hipGetErrorString(e); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_host_alloc_mapped(void **p, size_t n) { return hipHostMalloc(p, n, hipHostMallocMapped | hipHostMallocPortable); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_host_free(void *p) { return hipHostFree(p); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_host_device_ptr(void **d, void *h) { return hipHostGetDevicePointer(d, h, 0); }
typedef hipEvent_t iris_gpu_event_t;
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_event_create(iris_gpu_event_t *e) { return hipEventCreateWithFlags(e, hipEventDisableTiming); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_event_destroy(iris_gpu_event_t e) { return hipEventDestroy(e); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_event_record(iris_gpu_event_t e, iris_stream_t s) { return hipEventRecord(e, s); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_stream_wait(iris_stream_t s, iris_gpu_event_t e) { return hipStreamWaitEvent(s, e, 0); }
/* 0: not capturing; else the capture's id (non-zero) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_capture_id(iris_stream_t s, unsigned long long *id) {
  hipStreamCaptureStatus c = hipStreamCaptureStatusNone;
  unsigned long long i = 0;
  hipError_t e = hipStreamGetCaptureInfo(s, &c, &i);
  *id = (e == hipSuccess && c == hipStreamCaptureStatusActive) ? (i ? i : 1) : 0;
  return e;
}
#else
typedef cudaError_t iris_gpu_error_t;
typedef cudaIpcMemHandle_t iris_gpu_ipc_handle_t;
#define IRIS_GPU_SUCCESS cudaSuccess
#define IRIS_GPU_ERROR_MEMORY cudaErrorMemoryAllocation
#define IRIS_GPU_NAME "CUDA"
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_device_count(int *n) { return cudaGetDeviceCount(n); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_get_device(int *d) { return cudaGetDevice(d); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_set_device(int d) { return cudaSetDevice(d); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_malloc(void **p, size_t n, iris_heap_memory_t kind) {
  (void)kind; /* NVIDIA device memory is coherent over NVLink at system scope */
  return cudaMalloc(p, n);
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_free(void *p) { return cudaFree(p); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_memset(void *p, int v, size_t n) { return cudaMemset(p, v, n); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_synchronize(void) { return cudaDeviceSynchronize(); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_ipc_get(iris_gpu_ipc_handle_t *h, void *p) { return cudaIpcGetMemHandle(h, p); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_ipc_open(void **p, iris_gpu_ipc_handle_t h) { return cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_ipc_close(void *p) { return cudaIpcCloseMemHandle(p); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_can_access_peer(int *ok, int d, int peer) { return cudaDeviceCanAccessPeer(ok, d, peer); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_enable_peer(int peer) {
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) { (void)cudaGetLastError(); return cudaSuccess; }
  return e;
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_pci_bus_id(char *s, int n, int d) { return cudaDeviceGetPCIBusId(s, n, d); }
IRIS_INTERNAL inline const char *iris_gpu_error_text(iris_gpu_error_t e) { return cudaGetErrorString(e); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_host_alloc_mapped(void **p, size_t n) { return cudaHostAlloc(p, n, cudaHostAllocMapped | cudaHostAllocPortable); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_host_free(void *p) { return cudaFreeHost(p); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_host_device_ptr(void **d, void *h) { return cudaHostGetDevicePointer(d, h, 0); }
typedef cudaEvent_t iris_gpu_event_t;
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_event_create(iris_gpu_event_t *e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_event_destroy(iris_gpu_event_t e) { return cudaEventDestroy(e); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_event_record(iris_gpu_event_t e, iris_stream_t s) { return cudaEventRecord(e, s); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_stream_wait(iris_stream_t s, iris_gpu_event_t e) { return cudaStreamWaitEvent(s, e, 0); }
/* 0: not capturing; else the capture's id (non-zero) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_capture_id(iris_stream_t s, unsigned long long *id) {
  enum cudaStreamCaptureStatus c = cudaStreamCaptureStatusNone;
  unsigned long long i = 0;
  cudaError_t e = cudaStreamGetCaptureInfo(s, &c, &i, NULL, NULL, NULL, NULL);
  *id = (e == cudaSuccess && c == cudaStreamCaptureStatusActive) ? (i ? i : 1) : 0;
  return e;
}
#endif

/* Why a runtime error that means "no GPU here" happened, in words the vendor's text
 * lacks: CUDA reports a machine without any driver as error 35, "CUDA driver version is
 * insufficient". "" for every other error. */
IRIS_INTERNAL inline const char *iris_gpu_error_cause(iris_gpu_error_t e) {
#if defined(IRIS_USE_HIP)
  if (e != hipErrorNoDevice && e != hipErrorInsufficientDriver) return "";
  if (access("/dev/kfd", F_OK) != 0) return "; no AMD GPU driver on this host (/dev/kfd is absent): it has no GPU iris can use";
  return e == hipErrorNoDevice ? "; no GPU is visible to this process (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES?)" : "";
#else
  if (e != cudaErrorNoDevice && e != cudaErrorInsufficientDriver) return "";
  if (access("/proc/driver/nvidia/version", F_OK) != 0)
    return "; no NVIDIA driver is loaded on this host (/proc/driver/nvidia is absent): it has no GPU iris can use";
  return e == cudaErrorNoDevice ? "; no GPU is visible to this process (CUDA_VISIBLE_DEVICES?)" : "";
#endif
}

/* --------------------------------------------- copies on a stream, capture, SMs -- */
#if defined(IRIS_USE_HIP)
/* device to device, enqueued on st (memcpy2d: height rows of width bytes, pitches in bytes) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_memcpy_async(void *d, const void *s, size_t n, iris_stream_t st) {
  return hipMemcpyAsync(d, s, n, hipMemcpyDeviceToDevice, st);
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_memcpy2d_async(void *d, size_t dpitch, const void *s, size_t spitch, size_t width, size_t height, iris_stream_t st) {
  return hipMemcpy2DAsync(d, dpitch, s, spitch, width, height, hipMemcpyDeviceToDevice, st);
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_last_error(void) { return hipGetLastError(); }
/* 1 while the stream is capturing (the capture active or invalidated), else 0 */
IRIS_INTERNAL inline int iris_gpu_stream_capturing(iris_stream_t s) {
  hipStreamCaptureStatus c = hipStreamCaptureStatusNone;
  (void)hipStreamIsCapturing(s, &c);
  return c != hipStreamCaptureStatusNone;
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_sm_count(int *n, int dev) { return hipDeviceGetAttribute(n, hipDeviceAttributeMultiprocessorCount, dev); }
/* 1 if device dev runs kernels launched with programmatic dependent launch: never on AMD */
IRIS_INTERNAL inline int iris_gpu_has_pdl(int dev) { (void)dev; return 0; }
#else
/* device to device, enqueued on st (memcpy2d: height rows of width bytes, pitches in bytes) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_memcpy_async(void *d, const void *s, size_t n, iris_stream_t st) {
  return cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, st);
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_memcpy2d_async(void *d, size_t dpitch, const void *s, size_t spitch, size_t width, size_t height, iris_stream_t st) {
  return cudaMemcpy2DAsync(d, dpitch, s, spitch, width, height, cudaMemcpyDeviceToDevice, st);
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_last_error(void) { return cudaGetLastError(); }
/* 1 while the stream is capturing (the capture active or invalidated), else 0 */
IRIS_INTERNAL inline int iris_gpu_stream_capturing(iris_stream_t s) {
  enum cudaStreamCaptureStatus c = cudaStreamCaptureStatusNone;
  (void)cudaStreamIsCapturing(s, &c);
  return c != cudaStreamCaptureStatusNone;
}
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_sm_count(int *n, int dev) { return cudaDeviceGetAttribute(n, cudaDevAttrMultiProcessorCount, dev); }
/* 1 if device dev runs kernels launched with programmatic dependent launch (sm_90 on) */
IRIS_INTERNAL inline int iris_gpu_has_pdl(int dev) {
  int major = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
}
#endif

/* ------------------------------------------- streams, copies, devices, kernels -- */
#if defined(IRIS_USE_HIP)
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_stream_create(iris_stream_t *s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_stream_destroy(iris_stream_t s) { return hipStreamDestroy(s); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_memset2d_async(void *p, size_t pitch, int v, size_t w, size_t h, iris_stream_t s) { return hipMemset2DAsync(p, pitch, v, w, h, s); }
/* synchronous copies between device and host memory */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_copy_to_host(void *dst, const void *src, size_t n) { return hipMemcpy(dst, src, n, hipMemcpyDeviceToHost); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_copy_to_device(void *dst, const void *src, size_t n) { return hipMemcpy(dst, src, n, hipMemcpyHostToDevice); }
/* a copy between any two memories (host pageable included), enqueued on st, and waiting
 * for st alone: with a non-blocking stream (iris_gpu_stream_create) neither waits for the
 * legacy default stream, as the synchronous copies above do */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_copy_on(void *dst, const void *src, size_t n, iris_stream_t st) { return hipMemcpyAsync(dst, src, n, hipMemcpyDefault, st); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_stream_synchronize(iris_stream_t st) { return hipStreamSynchronize(st); }
/* where device d sits on the PCI bus (ranks on one GPU have the same) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_pci_location(int *domain, int *bus, int *device, int d) {
  const hipError_t e0 = hipDeviceGetAttribute(domain, hipDeviceAttributePciDomainID, d), e1 = hipDeviceGetAttribute(bus, hipDeviceAttributePciBusId, d),
                   e2 = hipDeviceGetAttribute(device, hipDeviceAttributePciDeviceId, d);
  return e0 != hipSuccess ? e0 : e1 != hipSuccess ? e1 : e2;
}
/* a kernel's dynamic shared memory limit (its address, as a launch takes it) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_func_max_smem(const void *kernel, int bytes) {
  return hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
/* the device address of a __device__ variable (its host-side symbol) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_symbol_address(void **p, const void *symbol) { return hipGetSymbolAddress(p, symbol); }
/* Load the code of `kernel`'s unit now (see the CUDA side). HIP loads a unit's code object
 * whole at its first use on a device: one query loads it; *loaded: 0 (not counted). */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_load_module_of(const void *kernel, unsigned *loaded) {
  hipFuncAttributes a;
  *loaded = 0;
  return hipFuncGetAttributes(&a, kernel);
}
#else
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_stream_create(iris_stream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_stream_destroy(iris_stream_t s) { return cudaStreamDestroy(s); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_memset2d_async(void *p, size_t pitch, int v, size_t w, size_t h, iris_stream_t s) { return cudaMemset2DAsync(p, pitch, v, w, h, s); }
/* synchronous copies between device and host memory */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_copy_to_host(void *dst, const void *src, size_t n) { return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_copy_to_device(void *dst, const void *src, size_t n) { return cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice); }
/* a copy between any two memories (host pageable included), enqueued on st, and waiting
 * for st alone: with a non-blocking stream (iris_gpu_stream_create) neither waits for the
 * legacy default stream, as the synchronous copies above do */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_copy_on(void *dst, const void *src, size_t n, iris_stream_t st) { return cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, st); }
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_stream_synchronize(iris_stream_t st) { return cudaStreamSynchronize(st); }
/* where device d sits on the PCI bus (ranks on one GPU have the same) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_pci_location(int *domain, int *bus, int *device, int d) {
  const cudaError_t e0 = cudaDeviceGetAttribute(domain, cudaDevAttrPciDomainId, d), e1 = cudaDeviceGetAttribute(bus, cudaDevAttrPciBusId, d),
                    e2 = cudaDeviceGetAttribute(device, cudaDevAttrPciDeviceId, d);
  return e0 != cudaSuccess ? e0 : e1 != cudaSuccess ? e1 : e2;
}
/* a kernel's dynamic shared memory limit (its address, as a launch takes it) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_func_max_smem(const void *kernel, int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
/* the device address of a __device__ variable (its host-side symbol) */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_symbol_address(void **p, const void *symbol) { return cudaGetSymbolAddress(p, symbol); }
/* A driver function by name, with the ABI of the given CUDA version (e.g.
 * cuTensorMapEncodeTiled, 12000), looked up at run time: no link against libcuda. The
 * runtime's error, or cudaErrorNotSupported when this driver lacks it. */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_driver_function(const char *name, int cuda_version, void **fn) {
  enum cudaDriverEntryPointQueryResult q;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, cuda_version, cudaEnableDefault, &q);
  if (e != cudaSuccess) return e;
  if (q != cudaDriverEntryPointSuccess || !*fn) return cudaErrorNotSupported;
  return cudaSuccess;
}
/* Load every kernel of the module that holds `kernel` (its unit) now, not at each
 * kernel's first launch. With lazy loading (CUDA_MODULE_LOADING=LAZY, the default since
 * CUDA 12.2) a kernel's first launch starts only after every kernel already running on
 * the GPU has ended (docs/stalls.md, "First calls"): a collective's first call beside a
 * kernel that waits for it would wait out its bound. *loaded: the functions this call
 * loaded. cudaErrorNotSupported where the driver lacks the calls (before CUDA 12.4). */
IRIS_INTERNAL inline iris_gpu_error_t iris_gpu_load_module_of(const void *kernel, unsigned *loaded) {
  int (*get_module)(void **mod, void *fn);             /* cuFuncGetModule */
  int (*count)(unsigned *n, void *mod);                /* cuModuleGetFunctionCount */
  int (*enumerate)(void **fns, unsigned n, void *mod); /* cuModuleEnumerateFunctions */
  int (*is_loaded)(int *state, void *fn);              /* cuFuncIsLoaded: 1 = CU_FUNCTION_LOADING_STATE_LOADED */
  int (*load)(void *fn);                               /* cuFuncLoad */
  static const char *names[5] = {"cuFuncGetModule", "cuModuleGetFunctionCount", "cuModuleEnumerateFunctions", "cuFuncIsLoaded", "cuFuncLoad"};
  void *fn[5], *mod = NULL, **list;
  cudaFunction_t f;
  unsigned n = 0, i;
  cudaError_t e;
  int k;
  *loaded = 0;
  for (k = 0; k < 5; k++)
    if ((e = iris_gpu_driver_function(names[k], 12040, &fn[k])) != cudaSuccess) return e;
  /* object to function pointers by their bytes (C forbids the cast) */
  memcpy(&get_module, &fn[0], sizeof get_module);
  memcpy(&count, &fn[1], sizeof count);
  memcpy(&enumerate, &fn[2], sizeof enumerate);
  memcpy(&is_loaded, &fn[3], sizeof is_loaded);
  memcpy(&load, &fn[4], sizeof load);
  if ((e = cudaGetFuncBySymbol(&f, kernel)) != cudaSuccess) return (void)cudaGetLastError(), e; /* not left as the caller's last error */
  if (get_module(&mod, (void *)f) != 0 || count(&n, mod) != 0) return cudaErrorInvalidResourceHandle;
  if (!n) return cudaSuccess;
  if (!(list = (void **)malloc(n * sizeof *list))) return cudaErrorMemoryAllocation;
  e = enumerate(list, n, mod) == 0 ? cudaSuccess : cudaErrorInvalidResourceHandle;
  for (i = 0; e == cudaSuccess && i < n; i++) {
    int state = 0;
    if (is_loaded(&state, list[i]) == 0 && state == 1) continue;
    if (load(list[i]) != 0) e = cudaErrorInvalidResourceHandle;
    else ++*loaded;
  }
  free(list);
  return e;
}
#endif

/* ------------------------------------ the driver's files, the visible devices, NCCL -- */
#if defined(IRIS_USE_HIP)
#define IRIS_GPU_VISIBLE_VAR "HIP_VISIBLE_DEVICES"
#define IRIS_GPU_NO_DRIVER_TEXT "no AMD GPU driver on this host (/sys/class/kfd lists no GPU)"
#define IRIS_GPU_NCCL_SONAME "librccl.so" /* the rails' library, loaded at run time */
#else
#define IRIS_GPU_VISIBLE_VAR "CUDA_VISIBLE_DEVICES"
#define IRIS_GPU_NO_DRIVER_TEXT "no NVIDIA driver is loaded on this host (/proc/driver/nvidia/gpus is absent)"
#define IRIS_GPU_NCCL_SONAME "libnccl.so.2" /* the rails' library, loaded at run time */
#endif
/* Visible GPUs, counted without the GPU runtime (safe before fork); -1 if unknown. */
IRIS_INTERNAL inline int iris_gpu_count_without_runtime(void) {
  const char *vars[3] = {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"};
  const char *list = NULL;
  int i, n = 0;
#if defined(IRIS_USE_HIP)
  list = getenv(vars[1]) ? getenv(vars[1]) : getenv(vars[2]);
#else
  list = getenv(vars[0]);
#endif
  if (list) {
    const char *c;
    if (!*list) return 0;
    for (n = 1, c = list; *c; c++) n += *c == ',';
    return n;
  }
#if defined(IRIS_USE_HIP)
  for (i = 0; i < 256; i++) { /* KFD topology: nodes whose gpu_id is non-zero are GPUs */
    char path[96];
    unsigned long id = 0;
    FILE *f;
    snprintf(path, sizeof path, "/sys/class/kfd/kfd/topology/nodes/%d/gpu_id", i);
    if (!(f = fopen(path, "r"))) break;
    if (fscanf(f, "%lu", &id) == 1 && id != 0) n++;
    fclose(f);
  }
  return i == 0 ? -1 : n;
#else
  {
    DIR *d = opendir("/proc/driver/nvidia/gpus"); /* one entry per GPU */
    struct dirent *e;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    (void)i;
    return n > 0 ? n : -1;
  }
#endif
}

#endif /* IRIS_INTERNAL_CORE_PLATFORM_H */
