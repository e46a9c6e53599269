"""iris from JAX: all-reduce, all-gather, reduce-scatter, all-to-all and broadcast as XLA
FFI calls (usable inside jit, declared command-buffer compatible), one process per GPU; and
jax.Arrays on iris's symmetric heap, which the calls move zero-copy.

    import jax
    jax.distributed.initialize(...)           # one process per GPU
    import iris_gpu.jax as ij
    ctx = ij.Context()                        # collective: iris_init over jax's key-value store
    f = jax.jit(lambda x: ij.all_gather(x @ w, ctx))
    x = ij.to_heap(grads, ctx)                # every rank, same order: a copy onto the heap
    g = jax.jit(lambda v: ij.all_reduce(v, ctx, donate=True), donate_argnums=0)
    x = g(x)                                  # in place on the heap block where XLA aliases it
    ij.heap_free(x, ctx)                      # every rank, same order (or at close)
    tp = ctx.team([[0, 1], [2, 3]])           # every process: this one's team (or None)
    y = jax.jit(lambda v: ij.all_reduce(v, tp))(x)   # over the team's members only
    ...
    ctx.close()                               # collective

Needs build/libiris_jax.so (make lib-jax; or $IRIS_JAX_LIB) beside build/libiris.so.
jax is imported when this module is; the rest of iris_gpu does not need it.
See docs/jax.md ("Zero-copy: arrays on the heap").
"""
import ctypes
import datetime
import os
import threading
import warnings
import weakref

import jax
import numpy as np

from . import _dlpack, _host, _lib, _types
from ._lib import IrisError

_targets = None
_count = [0]


# handler symbol in libiris_jax.so -> FFI target name
_HANDLERS = (("IrisAllReduce", "iris_all_reduce"), ("IrisAllGather", "iris_all_gather"), ("IrisAllGatherInto", "iris_all_gather_into"),
             ("IrisReduceScatter", "iris_reduce_scatter"), ("IrisAllToAll", "iris_all_to_all"), ("IrisBroadcast", "iris_broadcast"))


def _register():
    """Load libiris_jax.so and register its handlers as FFI targets (once)."""
    global _targets
    if _targets is None:
        lib = _lib.load()
        path = os.environ.get("IRIS_JAX_LIB")
        if path == "":  # set but empty: an error, as every IRIS_* variable
            raise _lib.IrisLibraryError("IRIS_JAX_LIB is set but empty: give it the path of libiris_jax.so, or unset it to use the one beside libiris.so")
        if not path:  # beside libiris.so; one found on the loader path ("libiris.so", no directory): by the same search
            path = os.path.join(os.path.dirname(os.path.abspath(lib.path)), "libiris_jax.so") if os.path.dirname(lib.path) else "libiris_jax.so"
        if os.path.dirname(path) and not os.path.exists(path):
            raise _lib.IrisLibraryError("%s not found: build it with `make lib-jax` (or set IRIS_JAX_LIB)" % path)
        try:
            so = ctypes.CDLL(path)
        except OSError as e:
            raise _lib.IrisLibraryError("%s: %s: build it with `make lib-jax` (or set IRIS_JAX_LIB)" % (path, e))
        for sym, name in _HANDLERS:
            if not hasattr(so, sym):
                raise _lib.IrisLibraryError("%s has no %s: rebuild it (make lib-jax)" % (path, sym))
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(so, sym)), platform="CUDA")
        so.iris_jax_heap_calls.restype, so.iris_jax_heap_calls.argtypes = ctypes.c_longlong, [ctypes.c_int, ctypes.c_int]
        so.iris_jax_copy.restype, so.iris_jax_copy.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        so.iris_jax_device_sync.restype, so.iris_jax_device_sync.argtypes = ctypes.c_int, [ctypes.c_int]
        _targets = so
    return _targets


def captured_calls():
    """How many iris handler calls ran while XLA was capturing a command buffer (CUDA graph)."""
    so = _register()
    f = so.iris_jax_captured_calls
    f.restype = ctypes.c_longlong
    return int(f())


_PLACES = ("off_heap", "input_on_heap", "output_on_heap", "zero_copy")


def heap_calls():
    """How many handler calls ran with their buffers where: {"all_reduce": {"zero_copy": n,
    "input_on_heap": n, "output_on_heap": n, "off_heap": n}, "all_gather": {...},
    "reduce_scatter", "all_to_all", "broadcast": {...}}.
    zero_copy: input and output both on this rank's heap (the library's zero-copy path);
    off_heap: neither (the staged path). Counted on the host when the handler runs: a call
    recorded into a command buffer counts once, not at each replay. For tests and
    debugging."""
    so = _register()
    kinds = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
    return {kind: {place: int(so.iris_jax_heap_calls(k, w)) for w, place in enumerate(_PLACES)} for k, kind in enumerate(kinds)}


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


class _HeapBlock:
    """One iris_malloc block behind heap arrays. views: jax-side views of it still alive
    (DLPack capsules whose deleter has not run; PjRt runs it, maybe on another thread)."""

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes, self.views = ptr, nbytes, 0
        self._lock = threading.Lock()

    def acquire(self):
        with self._lock:
            self.views += 1

    def release(self):
        with self._lock:
            self.views -= 1


class Context:
    """iris context of this process (one GPU: jax.local_devices() must hold exactly one).
    Collective: every process creates its contexts in the same order. heap_size 0:
    IRIS_HEAP_SIZE, else 1 GiB; timeout_ms: bring-up waits (0: 60 s)."""

    def __init__(self, heap_size=0, timeout_ms=0):
        self._h = None
        self._teams, self._stagings = [], []  # this rank's teams; the splits' staging areas (every rank's, freed at close)
        self._blocks = {}  # block address -> _HeapBlock, until heap_free or close
        self._made = {}  # id(array made by heap_*) -> (weakref to it, block address): heap_free of a donated array
        self._lib = _lib.load()
        self._so = _register()
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
        """Collective: finalize (frees the heap, and so every heap array's block). Jitted
        functions that captured this context must not run after, nor may heap arrays still
        alive be used (a warning says how many were)."""
        if self._h is not None:
            alive = sum(1 for b in self._blocks.values() if b.views > 0)
            if alive:
                warnings.warn("iris_gpu.jax Context.close(): %d heap block(s) still viewed by live jax.Arrays; they must not be used any more" % alive)
            self._blocks, self._made = {}, {}
            for t in self._teams:  # finalize releases every team; a closed Team's calls refuse
                t._closed = True
            self._teams, self._stagings = [], []
            h, self._h = self._h, None
            self._lib.check(self._lib.lib.iris_finalize(h), "iris_finalize (rank %d)" % self.rank)

    # -------------------------------------------------------------- teams
    @property
    def team_ptr(self):
        """0: the context's calls run over every process (a Team's is its iris_team_t)."""
        return 0

    def team(self, groups, staging_bytes=None):
        """Collective over every process of the context, members or not: one split
        (iris_team_split) making a team of each group, so later collectives may take the
        team in place of the context (ij.all_reduce(x, team)). groups: one group or a list
        of disjoint ones, each a list of ranks (process indices; team rank = the rank's
        place in its sorted group); every process passes the same groups. Returns this
        process's Team, or None when it is in no group. staging_bytes: the two heap areas
        through which the split's teams stage XLA's buffers (off the heap) on their
        bandwidth paths, taken on every process until close() (None: $IRIS_TEAM_STAGING,
        else 16 MiB each; 0: none, and such calls beyond the latency paths fail with
        IRIS_ERROR_NOT_IN_HEAP). Raises ValueError for malformed groups (on every process
        alike, before any meeting) and IrisError when the split fails."""
        if groups and all(isinstance(r, (int, np.integer)) for r in groups):
            groups = [groups]
        color, key, _ = _types.team_split_args([sorted(int(r) for r in g) for g in groups], range(self.world_size), self.rank)
        if staging_bytes is None:
            staging_bytes = _types.parse_bytes(os.environ.get("IRIS_TEAM_STAGING", 16 << 20), "IRIS_TEAM_STAGING")
        staging_bytes = int(staging_bytes)
        if staging_bytes < 0:
            raise ValueError("iris_gpu.jax Context.team: staging_bytes %d is negative" % staging_bytes)
        L, h = self._lib, self._handle()
        L.require_struct("iris_team_t")
        L.require_function("iris_team_set_staging")
        out, staging = _host.team_split(self, color, key, staging_bytes)
        if out.size == 0:
            return None
        t = Team(self, out)
        if staging.nbytes and out.size > 1 and out.coll >= 0:  # a meeting of the members, who compare the areas
            L.check(L.lib.iris_team_set_staging(h, ctypes.byref(t._t), ctypes.c_void_p(staging.ptr_in), ctypes.c_void_p(staging.ptr_out), staging.nbytes),
                    "iris_team_set_staging (rank %d)" % self.rank)
        self._teams.append(t)
        return t

    # -------------------------------------------------------------- heap arrays
    @property
    def heap_size(self):
        return self._lib.lib.iris_heap_size(self._handle())

    @property
    def heap_used(self):
        """Bytes in live heap blocks (the collective state's and teams' included)."""
        return self._lib.lib.iris_heap_used(self._handle())

    def check(self):
        """iris_collectives_check (waits for this GPU): IrisError if a wait of the
        context's kernels ran out (IRIS_ERROR_TIMEOUT / IRIS_ERROR_PEER_FAILED, fatal), it
        was aborted, or the processes made different calls since the last check
        (IRIS_ERROR_MISMATCH: that call wrote nothing; then cleared). A handler only
        enqueues, so a mismatch or a peer's refusal shows here, not in the jitted call."""
        self._lib.check(self._lib.lib.iris_collectives_check(self._handle()), "iris_collectives_check (rank %d)" % self.rank)

    def async_error(self):
        """iris_get_async_error: as check(), without waiting for the GPU; any thread."""
        self._lib.check(self._lib.lib.iris_get_async_error(self._handle()), "iris_get_async_error (rank %d)" % self.rank)

    def abort(self):
        """iris_abort (any thread): the context's kernels stop waiting, later calls fail
        with IRIS_ERROR_ABORTED; close() then frees without meeting the other processes."""
        self._lib.check(self._lib.lib.iris_abort(self._handle()), "iris_abort (rank %d)" % self.rank)

    def _handle(self):
        if self._h is None:
            raise RuntimeError("iris_gpu.jax: the context is closed")
        return self._h

    def _cuda(self, err, what):
        if err:
            raise RuntimeError("iris_gpu.jax: %s failed on rank %d: CUDA error %d" % (what, self.rank, err))

    def _alloc(self, shape, dtype, zero, what):
        name = _dtype_name(dtype)
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
        nbytes = _types.heap_bytes(shape, name)  # TypeError for a type iris does not move
        ptr = ctypes.c_void_p()
        L = self._lib.lib
        st = (L.iris_calloc if zero else L.iris_malloc)(self._handle(), nbytes, ctypes.byref(ptr))
        if st != 0:
            detail = self._lib.detail()
            if ptr.value:  # iris_calloc's memset failed: the block stays allocated, give it back
                self._lib.lib.iris_free(self._handle(), ptr)
            raise IrisError(st, "%s (asked for %d bytes of shape %s %s; heap %d bytes, %d in use)" % (detail, nbytes, shape, name, self.heap_size, self.heap_used),
                            "%s (rank %d)" % (what, self.rank))
        block = _HeapBlock(ptr.value, nbytes)
        self._blocks[block.ptr] = block
        return block, shape, name

    def _view(self, block, shape, name):
        """A jax.Array over the whole block (zero-copy, through DLPack)."""
        producer = _dlpack.Producer(block.ptr, shape, name, _dlpack.KDL_CUDA, self.device, on_release=block.release, on_acquire=block.acquire)
        try:
            arr = jax.dlpack.from_dlpack(producer, copy=False)
        except TypeError:  # a jax without copy=
            arr = jax.dlpack.from_dlpack(producer)
        if arr.unsafe_buffer_pointer() != block.ptr:
            raise RuntimeError("iris_gpu.jax: this jax copied the heap block on import (dtype %s): no heap array" % name)
        self._remember(arr, block)
        return arr

    def _remember(self, arr, block):
        """Note that arr views block: heap_free(arr) finds the block by arr's identity (also
        once arr is donated), and refuses it once the block was freed (its address may be
        a later block's by then)."""
        key = id(arr)
        self._made[key] = (weakref.ref(arr, lambda _r, k=key, made=self._made: made.pop(k, None)), block)

    def _view_or_free(self, block, shape, name):
        """_view of a new block; when it fails the block goes back to the heap (the caller
        never learns its address, so nothing else could free it; every rank fails alike)."""
        try:
            return self._view(block, shape, name)
        except BaseException:
            self._free_block(block)
            raise

    def heap_empty(self, shape, dtype):
        """A jax.Array on this rank's symmetric heap, content unspecified. Same offset on
        every rank when every rank makes the same heap_*/to_heap/heap_free calls in the same
        order (no communication; heap_verify() checks). The block is the context's until
        heap_free() or close(), whatever becomes of the array."""
        block, shape, name = self._alloc(shape, dtype, False, "heap_empty")
        return self._view_or_free(block, shape, name)

    def heap_zeros(self, shape, dtype):
        """heap_empty, zeroed (iris_calloc: synchronously, before the array exists)."""
        block, shape, name = self._alloc(shape, dtype, True, "heap_zeros")
        return self._view_or_free(block, shape, name)

    def to_heap(self, x):
        """A heap array holding x's values (one device copy, complete on return; x: a
        jax.Array on this GPU, or anything jnp.asarray takes). Same rules as heap_empty."""
        import jax.numpy as jnp

        if not isinstance(x, jax.Array):
            x = jnp.asarray(x)
        dev = jax.local_devices()[0]
        if x.devices() != {dev}:
            x = jax.device_put(x, dev)
        block, shape, name = self._alloc(x.shape, x.dtype, False, "to_heap")
        try:
            x.block_until_ready()
            self._cuda(self._so.iris_jax_copy(block.ptr, x.unsafe_buffer_pointer(), x.size * x.dtype.itemsize, self.device), "to_heap: the copy")
        except Exception:
            self._free_block(block)
            raise
        return self._view_or_free(block, shape, name)

    def _block_of(self, x, what):
        made = self._made.get(id(x)) if isinstance(x, jax.Array) else None
        if made is not None and made[0]() is x:  # made by heap_*/to_heap, or freed by heap_free: its own block
            if self._blocks.get(made[1].ptr) is not made[1]:
                raise ValueError("%s: the array's heap block was freed already" % what)
            return made[1]
        if isinstance(x, int):
            p = x
        elif isinstance(x, jax.Array) and x.is_deleted():  # donated: found by the array it was made as
            raise ValueError("%s: the array was deleted or donated and was not made by heap_empty/heap_zeros/to_heap of this context: pass the array "
                             "that now holds the block" % what)
        elif isinstance(x, jax.Array):
            p = x.unsafe_buffer_pointer()
        else:
            raise TypeError("%s: expected a jax.Array (or a block address), got %s" % (what, type(x).__name__))
        for b in self._blocks.values():
            if b.ptr <= p < b.ptr + b.nbytes:
                return b
        raise ValueError("%s: %#x is not in a live heap block of this context (an array off the heap, or one freed already)" % (what, p))

    def _free_block(self, block):
        self._blocks.pop(block.ptr, None)
        self._lib.check(self._lib.lib.iris_free(self._handle(), ctypes.c_void_p(block.ptr)), "iris_free (rank %d)" % self.rank)

    def heap_free(self, x):
        """Give x's heap block back (x: a heap array, one XLA aliased to it, a heap array
        donated since, or the block's address). Every rank frees the same blocks in the same
        order, as it allocated them. Waits for the GPU first (cudaDeviceSynchronize), so no
        queued kernel still touches the bytes when a later allocation reuses them; jax.Arrays
        still viewing the block must not be used after."""
        block = self._block_of(x, "heap_free")
        self._cuda(self._so.iris_jax_device_sync(self.device), "heap_free: the device synchronize")
        self._free_block(block)
        if isinstance(x, jax.Array):  # a second heap_free(x) raises, even once the address is reused
            self._remember(x, block)

    def heap_offset(self, x):
        """Offset of a jax.Array's data from this rank's heap base (IrisError if not on the heap)."""
        off = ctypes.c_size_t()
        self._lib.check(self._lib.lib.iris_heap_offset(self._handle(), ctypes.c_void_p(x.unsafe_buffer_pointer()), ctypes.byref(off)), "iris_heap_offset (rank %d)" % self.rank)
        return off.value

    def is_heap(self, x):
        """Whether a jax.Array's data lies on this rank's heap."""
        off = ctypes.c_size_t()
        return self._lib.lib.iris_heap_offset(self._handle(), ctypes.c_void_p(x.unsafe_buffer_pointer()), ctypes.byref(off)) == 0

    def heap_verify(self):
        """Collective: IrisError (IRIS_ERROR_MISMATCH) when ranks hold different heap blocks."""
        self._lib.check(self._lib.lib.iris_heap_verify(self._handle()), "iris_heap_verify (rank %d)" % self.rank)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Every team's iris_team_t, kept for the process's life (a few hundred bytes each): a
# compiled function holds its address, and may run after the Team is closed or dropped;
# the handler then reads a destroyed team (size 0: refused), never freed memory.
_team_structs = []


class Team:
    """A team of a Context (Context.team): this process's group of one split. Stands
    wherever the collectives take a Context (ij.all_reduce(x, team)): world_size is the
    team's size, rank this process's team rank (broadcast's root is a team rank), and each
    call is collective over the team's members only. The calls carry the team as the
    address of its iris_team_t (the int64 attribute iris_team), which this object keeps:
    keep it (and its context) open while jitted functions that use it run. ranks: the
    members' process indices, in team order."""

    def __init__(self, ctx, t):
        self.ctx = ctx
        self._t = t  # the handlers read it through its address (team_ptr)
        _team_structs.append(t)
        self._closed = False
        self.rank, self.world_size = int(t.rank), int(t.size)
        self.ranks = t.members()

    def __repr__(self):
        return "<iris_gpu.jax Team rank %d of %d, members %s%s>" % (self.rank, self.world_size, self.ranks, ", closed" if self._closed else "")

    @property
    def handle(self):
        """The context's iris_t pointer (RuntimeError once the team or context is closed)."""
        if self._closed:
            raise RuntimeError("iris_gpu.jax: the team is closed")
        return self.ctx.handle

    @property
    def team_ptr(self):
        """The address of this team's iris_team_t (what the FFI calls take as iris_team)."""
        if self._closed:
            raise RuntimeError("iris_gpu.jax: the team is closed")
        return ctypes.addressof(self._t)

    @property
    def closed(self):
        return self._closed

    def check(self):
        """iris_team_check: IrisError for a mismatch among the members since the last
        check (then cleared), or a fatal fault of the context."""
        L = self.ctx._lib
        L.check(L.lib.iris_team_check(self.ctx._handle(), ctypes.byref(self._t)), "iris_team_check (rank %d)" % self.ctx.rank)

    def close(self):
        """Collective over the team's members (iris_team_destroy): its calls are refused
        after it. The split's staging areas stay until the context closes."""
        if self._closed:
            return
        L = self.ctx._lib
        self._closed = True
        if self in self.ctx._teams:
            self.ctx._teams.remove(self)
        L.check(L.lib.iris_team_destroy(self.ctx._handle(), ctypes.byref(self._t)), "iris_team_destroy (rank %d)" % self.ctx.rank)


def _where(ctx):
    """The attributes naming where a call runs: the context, and the team (0: the world)."""
    return {"iris_ctx": np.int64(ctx.handle), "iris_team": np.int64(ctx.team_ptr)}


def _dtype_name(dtype):
    import jax.numpy as jnp

    return np.dtype(jnp.dtype(dtype)).name


def _dtype(x):
    return _types.iris_dtype(np.dtype(x.dtype).name, "iris_gpu.jax")


def all_reduce(x, ctx, op="sum", donate=False):
    """op over ranks of x (sum, min, max, avg) on every rank; inside or outside jit.
    donate=True: the result aliases x (input_output_aliases {0: 0}): x's value is consumed.
    When x is a jit parameter that the caller donates too (donate_argnums) and x is a heap
    array, XLA hands the handler x's own buffer as the output: in place on the heap,
    zero-copy. Not donated to jit, XLA copies x first (correct, one copy more)."""
    _dtype(x)
    code = _types.iris_redop(op, np.dtype(x.dtype).name, "iris_gpu.jax.all_reduce")
    if not isinstance(donate, bool):
        raise TypeError("iris_gpu.jax.all_reduce: donate must be True or False, not %r" % (donate,))
    call = jax.ffi.ffi_call("iris_all_reduce", jax.ShapeDtypeStruct(x.shape, x.dtype), input_output_aliases={0: 0} if donate else None)
    return call(x, op=np.int32(code), **_where(ctx))


def all_gather(x, ctx, out=None):
    """Every rank's x concatenated along axis 0 (a 0-d x gives a vector of world_size).
    out: an array of the result's shape and type whose buffer the result takes
    (input_output_aliases {1: 0}; its values are not read). When out is a heap array that
    the caller donates to jit, the result is written on the heap: with x on the heap too,
    zero-copy. Without out the result is XLA's buffer, which the library fills through its
    staging area (one local copy, fused into the kernel)."""
    _dtype(x)
    shape = _types.gather_shape(x.shape, ctx.world_size, 0) if x.ndim else (ctx.world_size,)
    if out is None:
        call = jax.ffi.ffi_call("iris_all_gather", jax.ShapeDtypeStruct(shape, x.dtype))
        return call(x, **_where(ctx))
    if np.dtype(out.dtype) != np.dtype(x.dtype):
        raise TypeError("iris_gpu.jax.all_gather: out is %s, x is %s" % (np.dtype(out.dtype).name, np.dtype(x.dtype).name))
    if tuple(out.shape) != tuple(shape):
        raise ValueError("iris_gpu.jax.all_gather: out has shape %s, the result has %s" % (tuple(out.shape), tuple(shape)))
    call = jax.ffi.ffi_call("iris_all_gather_into", jax.ShapeDtypeStruct(shape, x.dtype), input_output_aliases={1: 0})
    return call(x, out, **_where(ctx))


def reduce_scatter(x, ctx, op="sum"):
    """This rank's block of op over ranks of x, along axis 0: x.shape[0] must be a multiple
    of world_size; the result has x.shape[0] / world_size rows (rank r gets rows
    [r * n, (r + 1) * n) of the reduction), as jax.lax.psum_scatter(..., tiled=True)."""
    _dtype(x)
    code = _types.iris_redop(op, np.dtype(x.dtype).name, "iris_gpu.jax.reduce_scatter")
    if x.ndim == 0:
        raise ValueError("iris_gpu.jax.reduce_scatter: a 0-d array cannot be scattered")
    shape = _types.scatter_shape(x.shape, ctx.world_size, 0)
    call = jax.ffi.ffi_call("iris_reduce_scatter", jax.ShapeDtypeStruct(shape, x.dtype))
    return call(x, op=np.int32(code), **_where(ctx))


def all_to_all(x, ctx):
    """x's axis 0 in world_size blocks: block r goes to rank r, and block r of the result
    came from rank r (the same shape as x), as jax.lax.all_to_all(..., 0, 0, tiled=True)."""
    _dtype(x)
    if x.ndim == 0 or x.shape[0] % ctx.world_size:
        raise ValueError("iris_gpu.jax.all_to_all: axis 0 of shape %s is not a multiple of world_size %d" % (tuple(x.shape), ctx.world_size))
    call = jax.ffi.ffi_call("iris_all_to_all", jax.ShapeDtypeStruct(x.shape, x.dtype))
    return call(x, **_where(ctx))


def broadcast(x, ctx, root=0):
    """The root's x on every rank (every rank passes an x of the same shape and type; it is
    read on the root only)."""
    _dtype(x)
    _types.check_root(root, ctx.world_size)
    call = jax.ffi.ffi_call("iris_broadcast", jax.ShapeDtypeStruct(x.shape, x.dtype))
    return call(x, root=np.int32(root), **_where(ctx))


# the heap arrays, as functions of the context (the names the collectives use)
def heap_empty(shape, dtype, ctx):
    """Context.heap_empty: a jax.Array on the symmetric heap, content unspecified."""
    return ctx.heap_empty(shape, dtype)


def heap_zeros(shape, dtype, ctx):
    """Context.heap_zeros: a zeroed jax.Array on the symmetric heap."""
    return ctx.heap_zeros(shape, dtype)


def to_heap(x, ctx):
    """Context.to_heap: a heap array holding x's values (one copy)."""
    return ctx.to_heap(x)


def heap_free(x, ctx):
    """Context.heap_free: give x's block back (every rank, same order)."""
    ctx.heap_free(x)


def is_heap(x, ctx):
    """Context.is_heap: whether x's data lies on this rank's heap."""
    return ctx.is_heap(x)
