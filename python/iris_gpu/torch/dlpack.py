"""iris_gpu.torch.dlpack: DLPack capsules over device memory that iris owns (heap blocks, plan buffers), kept alive by the tensors that view them."""
from .. import _dlpack
from .._dlpack import _DL_DELETER, _DLDataType, _DLDevice, _DLManagedTensor, _DLTensor, _dl_delete, _dl_keep  # noqa: F401 (shared with the JAX door)


def _device_bytes(torch, ptr, nbytes, device, owner):
    """A uint8 tensor of nbytes at ptr, labelled cuda:device whatever memory it is (a peer
    GPU's, mapped here), through DLPack; owner stays alive as long as the tensor."""
    return torch.utils.dlpack.from_dlpack(_dl_capsule(ptr, nbytes, device, owner))


def _dl_capsule(ptr, nbytes, device, owner, device_type=_dlpack.KDL_CUDA):
    """A "dltensor" capsule of a 1-D uint8 tensor on device_type (2: kDLCUDA; the tests use
    1, kDLCPU); its deleter releases owner, run by the consumer, or by the capsule's
    destructor when it dies unconsumed (from_dlpack refused it)."""
    return _dlpack.capsule(ptr, (nbytes,), "uint8", device_type, device, owner)
