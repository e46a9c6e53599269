"""iris from JAX: all-reduce and all-gather as XLA FFI calls (usable inside jit, declared
command-buffer compatible), one process per GPU.

    import jax
    jax.distributed.initialize(...)           # one process per GPU
    import iris_gpu.jax as ij
    ctx = ij.Context()                        # collective: iris_init over jax's key-value store
    f = jax.jit(lambda x: ij.all_gather(x @ w, ctx))
    ...
    ctx.close()                               # collective

Needs build/libiris_jax.so (make lib-jax; or $IRIS_JAX_LIB) beside build/libiris.so.
jax is imported when this module is; the rest of iris_gpu does not need it.
"""
import ctypes
import datetime
import os

import jax
import numpy as np

from . import _host, _lib, _types

_targets = None
_count = [0]


def _register():
    """Load libiris_jax.so and register its handlers as FFI targets (once)."""
    global _targets
    if _targets is None:
        lib = _lib.load()
        path = os.environ.get("IRIS_JAX_LIB") or os.path.join(os.path.dirname(os.path.abspath(lib.path)), "libiris_jax.so")
        if not os.path.exists(path):
            raise _lib.IrisLibraryError("%s not found: build it with `make lib-jax` (or set IRIS_JAX_LIB)" % path)
        so = ctypes.CDLL(path)
        for sym, name in (("IrisAllReduce", "iris_all_reduce"), ("IrisAllGather", "iris_all_gather")):
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(so, sym)), platform="CUDA")
        _targets = so
    return _targets


def captured_calls():
    """How many iris handler calls ran while XLA was capturing a command buffer (CUDA graph)."""
    so = _register()
    f = so.iris_jax_captured_calls
    f.restype = ctypes.c_longlong
    return int(f())


class _KVStore:
    """jax.distributed's key-value store with the interface StoreBootstrap uses."""

    def __init__(self, client, prefix):
        self.client, self.prefix, self.got = client, prefix, {}

    def set(self, key, value):
        self.client.key_value_set_bytes(self.prefix + key, value)

    def wait(self, keys, timeout):
        ms = int(timeout / datetime.timedelta(milliseconds=1))
        for k in keys:
            if k not in self.got:
                self.got[k] = self.client.blocking_key_value_get_bytes(self.prefix + k, ms)

    def get(self, key):
        return self.got.pop(key)

    def delete_key(self, key):
        self.client.key_value_delete(self.prefix + key)


class _LocalStore(dict):
    """World size 1: no peers to meet."""

    def set(self, key, value):
        self[key] = value

    def wait(self, keys, timeout):
        pass

    def get(self, key):
        return self.pop(key)

    def delete_key(self, key):
        self.pop(key, None)


class Context:
    """iris context of this process (one GPU: jax.local_devices() must hold exactly one).
    Collective: every process creates its contexts in the same order. heap_size 0:
    IRIS_HEAP_SIZE, else 1 GiB; timeout_ms: bring-up waits (0: 60 s)."""

    def __init__(self, heap_size=0, timeout_ms=0):
        self._lib = _lib.load()
        _register()
        devs = jax.local_devices()
        if len(devs) != 1 or devs[0].platform != "gpu":
            raise RuntimeError("iris_gpu.jax: one process per GPU is needed; this process sees %s (set CUDA_VISIBLE_DEVICES)" % devs)
        self.rank, self.world_size = jax.process_index(), jax.process_count()
        self.device = devs[0].local_hardware_id
        if self.world_size > 1:
            from jax._src import distributed

            client = distributed.global_state.client
            if client is None:
                raise RuntimeError("iris_gpu.jax: call jax.distributed.initialize() first")
            store = _KVStore(client, "iris_gpu/jax/%d/" % _count[0])
        else:
            store = _LocalStore()
        _count[0] += 1
        self._boot = _host.StoreBootstrap(store, self.rank, self.world_size, (timeout_ms or 60000) / 1000.0)
        self._h = _host.bring_up(self._lib, self.rank, self.world_size, self.device, heap_size, timeout_ms, self._boot)

    @property
    def handle(self):
        """The iris_t pointer as an int (what the FFI calls take); RuntimeError once closed."""
        if self._h is None:
            raise RuntimeError("iris_gpu.jax: the context is closed")
        return self._h.value

    def close(self):
        """Collective: finalize. Jitted functions that captured this context must not run after."""
        if self._h is not None:
            h, self._h = self._h, None
            self._lib.check(self._lib.lib.iris_finalize(h), "iris_finalize (rank %d)" % self.rank)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _dtype(x):
    return _types.iris_dtype(np.dtype(x.dtype).name, "iris_gpu.jax")


def all_reduce(x, ctx, op="sum"):
    """op over ranks of x (sum, min, max, avg) on every rank; inside or outside jit."""
    _dtype(x)
    code = _types.iris_redop(op, np.dtype(x.dtype).name, "iris_gpu.jax.all_reduce")
    call = jax.ffi.ffi_call("iris_all_reduce", jax.ShapeDtypeStruct(x.shape, x.dtype))
    return call(x, iris_ctx=np.int64(ctx.handle), op=np.int32(code))


def all_gather(x, ctx):
    """Every rank's x concatenated along axis 0 (a 0-d x gives a vector of world_size)."""
    _dtype(x)
    shape = _types.gather_shape(x.shape, ctx.world_size, 0) if x.ndim else (ctx.world_size,)
    call = jax.ffi.ffi_call("iris_all_gather", jax.ShapeDtypeStruct(shape, x.dtype))
    return call(x, iris_ctx=np.int64(ctx.handle))
