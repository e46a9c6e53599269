"""iris_gpu: Python bindings of iris (libiris.so through ctypes; nothing compiled at import).

    import iris_gpu                 # needs neither torch nor a GPU
    iris_gpu.library()              # loads and checks build/libiris.so (or $IRIS_LIB)
    import iris_gpu.torch as it     # torch custom ops, heap tensors, CustomAllreduce
    import iris_gpu.triton          # device helpers for Triton kernels

See docs/python.md.
"""
from ._version import __version__
from ._lib import EXPECTED_VERSION, IrisError, IrisLibraryError, status_name
from ._lib import load as library

__all__ = ["__version__", "EXPECTED_VERSION", "IrisError", "IrisLibraryError", "library", "status_name"]
