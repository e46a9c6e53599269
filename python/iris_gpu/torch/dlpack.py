"""iris_gpu.torch.dlpack: DLPack capsules over device memory that iris owns (heap blocks, plan buffers), kept alive by the tensors that view them."""
import ctypes

from .._dlpack import _DL_DELETER, _DLDataType, _DLDevice, _DLManagedTensor, _DLTensor  # noqa: F401 (the structs, shared with the JAX door)

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
