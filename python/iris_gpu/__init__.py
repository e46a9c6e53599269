"""iris_gpu: Python bindings of iris (libiris.so through ctypes; nothing compiled at import).

    import iris_gpu                 # needs neither torch nor a GPU
    iris_gpu.library()              # loads and checks build/libiris.so (or $IRIS_LIB)
    import iris_gpu.torch as it     # torch custom ops, heap tensors, CustomAllreduce
    import iris_gpu.triton          # device helpers for Triton kernels
    iris_gpu.team_split(ctx, color, key)  # a team of a context (torch: also ctx.team(groups))

See docs/python.md.
"""
from ._version import __version__
from ._lib import EXPECTED_VERSION, IrisError, IrisLibraryError, status_name
from ._lib import load as library



def team_split(ctx, color, key, staging_bytes=None):
    """MPI_Comm_split of a context's world into teams (iris_team_split): collective over every
    rank of ctx (an iris_gpu.torch.Context); color -1 (IRIS_TEAM_NONE) opts out. Returns this
    rank's team, or None. See docs/teams.md."""
    return ctx.team_split(color, key, staging_bytes)


__all__ = ["__version__", "EXPECTED_VERSION", "IrisError", "IrisLibraryError", "library", "status_name", "team_split"]
