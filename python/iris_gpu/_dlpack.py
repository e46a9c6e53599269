"""DLPack over ctypes: capsules describing device memory iris owns (heap blocks), and a
producer object with __dlpack__ / __dlpack_device__ for consumers that take one
(jax.dlpack.from_dlpack). Pure Python: no torch, no jax, no GPU.

The capsule is the unversioned "dltensor" kind every consumer reads. Its deleter runs when
the consumer drops the memory (for JAX: when PjRt frees the last buffer viewing it, maybe
on another thread); it releases what the capsule keeps alive and calls on_release, never
anything that frees device memory (heap blocks are given back elsewhere, at points every
rank reaches alike).
"""
import ctypes
import threading

KDL_CPU, KDL_CUDA = 1, 2  # DLDeviceType

# DLDataType (code, bits) of each type iris moves; the fp8 codes are DLPack 1.1's
DL_TYPES = {
    "float32": (2, 32),
    "float16": (2, 16),
    "bfloat16": (4, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "uint8": (1, 8),
    "float8_e4m3fn": (10, 8),
    "float8_e5m2": (12, 8),
}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DL_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DL_DELETER)]
_dl_keep = {}  # address of a DLManagedTensor -> (struct, shape array, owner, on_release)
_keep_lock = threading.Lock()


@_DL_DELETER
def _dl_delete(p):
    with _keep_lock:
        kept = _dl_keep.pop(ctypes.addressof(p.contents), None)
    if kept is not None and kept[3] is not None:
        try:
            kept[3]()
        except Exception:  # never let an exception cross into C (interpreter shutdown)
            pass


_NAME = b"dltensor"  # the capsule's name; kept alive here (a capsule keeps a pointer to it)
# prototypes of our own: ctypes.pythonapi's function objects are shared, and code that sets
# their argtypes (to py_object, say) would break the destructor's calls with a raw pointer
_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(cap):
    """DLPack's rule: a capsule still named "dltensor" when it dies was never consumed, so
    the producer runs the deleter (a consumer renames it "used_dltensor" and owns it)."""
    if _is_valid(cap, _NAME):
        m = _get_pointer(cap, _NAME)
        if m:
            _dl_delete(ctypes.cast(m, ctypes.POINTER(_DLManagedTensor)))


def capsule(ptr, shape, dtype, device_type, device_id, owner=None, on_release=None):
    """A "dltensor" capsule of a C-contiguous array of `shape` and `dtype` (a name of
    DL_TYPES) at ptr on (device_type, device_id); its deleter drops owner and calls
    on_release(). KeyError-free: TypeError for a type DLPack cannot carry here."""
    if dtype not in DL_TYPES:
        raise TypeError("DLPack: no type code for %s (supported: %s)" % (dtype, ", ".join(DL_TYPES)))
    code, bits = DL_TYPES[dtype]
    dims = (ctypes.c_int64 * max(len(shape), 1))(*[int(s) for s in shape])
    m = _DLManagedTensor()
    m.dl_tensor = _DLTensor(ptr, _DLDevice(device_type, device_id), len(shape), _DLDataType(code, bits, 1), dims, None, 0)
    m.deleter = _dl_delete
    with _keep_lock:
        _dl_keep[ctypes.addressof(m)] = (m, dims, owner, on_release)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(m), _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


class Producer:
    """What from_dlpack consumes: one capsule of the memory at ptr (each __dlpack__ call
    makes one and calls on_acquire; its deleter calls on_release once, whether a consumer
    took it or it died unconsumed). The memory must be ready: no stream ordering is
    offered (the stream argument is accepted and not used)."""

    def __init__(self, ptr, shape, dtype, device_type, device_id, owner=None, on_release=None, on_acquire=None):
        self.ptr, self.shape, self.dtype = int(ptr), tuple(int(s) for s in shape), dtype
        self.device_type, self.device_id = int(device_type), int(device_id)
        self.owner, self.on_release, self.on_acquire = owner, on_release, on_acquire

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("iris DLPack producer: copy=True is not offered (the point is sharing the memory)")
        cap = capsule(self.ptr, self.shape, self.dtype, self.device_type, self.device_id, self.owner, self.on_release)
        if self.on_acquire is not None:  # one on_acquire per capsule, one on_release when its deleter runs
            self.on_acquire()
        return cap
