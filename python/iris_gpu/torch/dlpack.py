"""iris_gpu.torch.dlpack: DLPack capsules over device memory that iris owns (heap blocks, plan buffers), kept alive by the tensors that view them."""
import ctypes



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
_dl_keep = {}  # address of a DLManagedTensor -> what must live as long as the tensor


@_DL_DELETER
def _dl_delete(p):
    _dl_keep.pop(ctypes.addressof(p.contents), None)


def _device_bytes(torch, ptr, nbytes, device, owner):
    """A uint8 tensor of nbytes at ptr, labelled cuda:device whatever memory it is (a peer
    GPU's, mapped here), through DLPack; owner stays alive as long as the tensor."""
    return torch.utils.dlpack.from_dlpack(_dl_capsule(ptr, nbytes, device, owner))


def _dl_capsule(ptr, nbytes, device, owner, device_type=2):
    """A "dltensor" capsule of a 1-D uint8 tensor on device_type (2: kDLCUDA; the tests use
    1, kDLCPU); its deleter releases owner."""
    shape = (ctypes.c_int64 * 1)(nbytes)
    m = _DLManagedTensor()
    m.dl_tensor = _DLTensor(ptr, _DLDevice(device_type, device), 1, _DLDataType(1, 8, 1), shape, None, 0)  # kDLUInt
    m.deleter = _dl_delete
    _dl_keep[ctypes.addressof(m)] = (m, shape, owner)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(m), b"dltensor", None)
