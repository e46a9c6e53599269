"""iris from PyTorch: bring-up over torch.distributed, heap tensors, collectives as
torch.library custom ops (namespace "iris"), and CustomAllreduce for serving engines.

torch is imported on first use, so `import iris_gpu.torch` works without it.

    import torch, torch.distributed as dist
    import iris_gpu.torch as it
    dist.init_process_group("gloo")                 # or nccl; or only torchrun's env
    ctx = it.Context()                              # collective; rank/world/device from dist
    x = ctx.empty((4096,), torch.bfloat16)          # zero-copy view of the symmetric heap
    it.all_reduce_(x, ctx)                          # in place, on torch.cuda.current_stream()
    y = it.all_gather(torch.randn(8, 16, device="cuda"), ctx, dim=1)
    plan = ctx.gemm_reduce_plan("reduce_scatter", M, N, K, b_transposed=True)  # collective
    c = it.gemm_reduce_scatter(a_shard, w_shard, plan)  # this rank's M/W rows of sum_r A_r @ B_r
    plan.close()                                    # collective
    ctx.close()                                     # collective

Every collective is collective: all ranks call it with the same shapes, dtype, op and
root, in the same order. Tensors must be contiguous CUDA tensors on the context's device;
they may live on the heap (fast path) or anywhere (the library stages them through the
heap). See docs/python.md.
"""
import contextlib
import ctypes
import itertools
import os
import threading
import warnings

from . import _host, _lib, _types
from ._lib import IrisError

_torch = None
_register_lock = threading.Lock()
_CONTEXTS = {}  # id -> Context; ops reach their context through this id (an int in the schema)
_ids = itertools.count(1)
_prefix_counts = {}  # (store prefix of a group) -> contexts made over it in this process


def _torch_mod():
    global _torch
    if _torch is None:
        with _register_lock:
            if _torch is None:
                import torch

                _register_ops(torch)
                _torch = torch
    return _torch


def _device_index(torch, device):
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "cuda":
        raise ValueError("iris runs on CUDA devices, not %s" % d)
    return d.index if d.index is not None else torch.cuda.current_device()


def _ctx(ctx_id):
    c = _CONTEXTS.get(int(ctx_id))
    if c is None:
        raise RuntimeError("iris context %d is closed or was never created (create iris_gpu.torch.Context first)" % ctx_id)
    return c


def _ctx_id(ctx):
    if not isinstance(ctx, Context):
        raise TypeError("expected an iris_gpu.torch.Context, got %s" % type(ctx).__name__)
    if ctx.closed:
        raise RuntimeError("iris context %d is closed" % ctx.id)
    return ctx.id


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


class _HeapBlock:
    """One iris_malloc block, kept alive by the tensors viewing it (_device_bytes); freed
    when the last one dies."""

    def __init__(self, ctx, ptr):
        self.ctx, self.ptr = ctx, ptr

    def __del__(self):
        ctx = self.ctx
        if ctx is not None and not ctx.closed:
            ctx._live -= 1
            try:
                ctx._lib.lib.iris_free(ctx._h, ctypes.c_void_p(self.ptr))
            except Exception:  # interpreter shutdown
                pass


class Context:
    """One rank's iris context, brought up over torch.distributed (collective).

    group: a torch.distributed process group (None: the default group). If torch.distributed
      is not initialized, torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
      LOCAL_RANK) is used through torch.distributed.rendezvous("env://").
    device: CUDA device (int, "cuda:k", torch.device); None: LOCAL_RANK % device_count().
    heap_size: bytes of this rank's symmetric heap (0: IRIS_HEAP_SIZE, else 1 GiB).
    store: a torch.distributed Store for the exchange (None: the default group's).
    timeout_ms: bring-up waits (0: IRIS_TIMEOUT_MS, else 60 s).
    check_shapes: before each eager collective, exchange (kind, count, dtype, op, root) over
      the store and raise if ranks differ (slow: for debugging; never during graph capture).
      None: the environment variable IRIS_GPU_CHECK_SHAPES=1.

    The rendezvous keys live under iris_gpu/<group ranks>/<n>/ in the store, n counting the
    contexts made over the same group in this process, so every rank must create its
    contexts in the same order."""

    def __init__(self, group=None, device=None, heap_size=0, store=None, timeout_ms=0, check_shapes=None):
        torch = _torch_mod()
        import torch.distributed as dist

        self.closed = True
        self._lib = _lib.load()
        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(group), dist.get_world_size(group)
            if rank < 0:
                raise ValueError("iris Context: this process is not a member of the group")
            ranks = dist.get_process_group_ranks(group) if group is not None else list(range(world))
            if store is None:
                store = dist.distributed_c10d._get_default_store()
        elif group is not None:
            raise RuntimeError("iris Context: a group was given but torch.distributed is not initialized")
        elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            store_env, rank, world = next(dist.rendezvous("env://"))
            store = store if store is not None else store_env
            ranks = list(range(world))
        else:
            raise RuntimeError("iris Context: torch.distributed is not initialized and RANK/WORLD_SIZE are not set (run under torchrun or call init_process_group first)")
        if device is None:
            if torch.cuda.device_count() < 1:
                raise RuntimeError("iris Context: no CUDA device is visible")
            device = int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count()
        self.device = _device_index(torch, device)
        self.rank, self.world_size = rank, world
        key = "iris_gpu/" + "-".join(str(r) for r in ranks)
        n = _prefix_counts.get(key, 0)
        _prefix_counts[key] = n + 1
        self._boot = _host.StoreBootstrap(dist.PrefixStore("%s/%d/" % (key, n), store), rank, world, (timeout_ms or 60000) / 1000.0)
        with torch.cuda.device(self.device):
            self._h = _host.bring_up(self._lib, rank, world, self.device, heap_size, timeout_ms, self._boot)
        self.closed = False
        self._live = 0
        self.id = next(_ids)
        _CONTEXTS[self.id] = self
        if check_shapes is None:
            check_shapes = os.environ.get("IRIS_GPU_CHECK_SHAPES", "0") not in ("", "0")
        self.check_shapes = bool(check_shapes)
        self._opts, self._opts_c, self._optp = {}, None, None
        L = self._lib.lib
        self._coll_fns = {"all_reduce": L.iris_all_reduce_ex, "all_gather": L.iris_all_gather_ex, "reduce_scatter": L.iris_reduce_scatter_ex,
                          "all_to_all": L.iris_all_to_all_ex, "broadcast": L.iris_broadcast_ex}

    # -------------------------------------------------------------- basics
    def _call(self, call, status):
        if status != 0:
            raise IrisError(status, self._lib.detail(), "%s (rank %d)" % (call, self.rank))

    def _handle(self):
        if self.closed:
            raise RuntimeError("iris context is closed")
        return self._h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Collective: finalize (waits for this rank's GPU work, meets every rank, frees the
        heap). Drop every heap tensor first: one still alive afterwards points at freed
        memory (a warning says how many were alive). Idempotent."""
        if self.closed:
            return
        if self._live:
            warnings.warn("iris Context.close(): %d heap tensor(s) still alive; they must not be used any more" % self._live)
        _CONTEXTS.pop(self.id, None)
        self.closed = True
        torch = _torch_mod()
        with torch.cuda.device(self.device):
            st = self._lib.lib.iris_finalize(self._h)
        self._h = None
        self._call("iris_finalize", st)

    @property
    def heap_size(self):
        return self._lib.lib.iris_heap_size(self._handle())

    @property
    def heap_used(self):
        return self._lib.lib.iris_heap_used(self._handle())

    def heap_bases(self):
        """Every rank's heap base in this process, as ints (rank r at index r)."""
        h = self._handle()
        return [self._lib.lib.iris_heap_base(h, r) or 0 for r in range(self.world_size)]

    def heap_bases_tensor(self):
        """The heap bases as an int64 tensor on this device (what Triton kernels take)."""
        torch = _torch_mod()
        return torch.tensor(self.heap_bases(), dtype=torch.int64, device="cuda:%d" % self.device)

    def device_context(self):
        """iris_device_ctx_t (ctypes) for kernels of your own (C, CuPy, ...)."""
        return self._lib.lib.iris_device_context(self._handle())

    def barrier_host(self):
        """Collective: iris_barrier (device synchronize, then every rank meets)."""
        self._call("iris_barrier", self._lib.lib.iris_barrier(self._handle()))

    def heap_verify(self):
        """Collective: IrisError (IRIS_ERROR_MISMATCH) if ranks hold different allocations."""
        self._call("iris_heap_verify", self._lib.lib.iris_heap_verify(self._handle()))

    def check(self):
        """iris_collectives_check (synchronous): IrisError if a wait of this context's
        kernels ran out (IRIS_ERROR_TIMEOUT / IRIS_ERROR_PEER_FAILED, fatal), it was
        aborted, or ranks called different collectives since the last check."""
        self._call("iris_collectives_check", self._lib.lib.iris_collectives_check(self._handle()))

    def async_error(self):
        """iris_get_async_error: non-blocking, safe from a watchdog thread. Raises IrisError
        for a fatal fault (a peer that died or hangs, abort) or a pending mismatch."""
        self._call("iris_get_async_error", self._lib.lib.iris_get_async_error(self._handle()))

    def abort(self):
        """iris_abort (any thread): kernels of this context stop waiting, later calls raise
        IRIS_ERROR_ABORTED at once, close() then frees everything without meeting the
        other ranks."""
        self._call("iris_abort", self._lib.lib.iris_abort(self._handle()))

    def set_algo(self, algo="auto", ctas=0):
        """Algorithm of the following collectives (auto, latency, bandwidth, two_shot_ll)."""
        self._opts = {} if algo == "auto" and not ctas else {"algo": _types.iris_algo(algo), "ctas": int(ctas)}
        self._opts_c = _lib.CollOptsT.init(**self._opts) if self._opts else None
        self._optp = ctypes.byref(self._opts_c) if self._opts_c is not None else None

    # -------------------------------------------------------------- heap tensors
    def empty(self, shape, dtype=None):
        """A tensor on the symmetric heap: same offset on every rank when every rank makes
        the same sequence of allocations (and drops them in the same order). Content
        unspecified. Freed back to the heap when the last view of it dies."""
        torch = _torch_mod()
        dtype = torch.float32 if dtype is None else dtype
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        nbytes = _types.heap_bytes(shape, dtype)
        h = self._handle()
        ptr = ctypes.c_void_p()
        st = self._lib.lib.iris_malloc(h, nbytes, ctypes.byref(ptr))
        if st != 0:
            detail = self._lib.detail()
            raise IrisError(st, "%s (asked for %d bytes of shape %s %s; heap %d bytes, %d in use)" % (detail, nbytes, shape, _types.dtype_name(dtype), self.heap_size, self.heap_used), "Context.empty (rank %d)" % self.rank)
        block = _HeapBlock(self, ptr.value)
        self._live += 1
        raw = _device_bytes(torch, ptr.value, nbytes, self.device, block)
        n = 1
        for s in shape:
            n *= s
        return raw[: n * _types.ITEMSIZE[_types.dtype_name(dtype)]].view(dtype).view(shape)

    def zeros(self, shape, dtype=None):
        """empty() then zero_() on the current stream."""
        return self.empty(shape, dtype).zero_()

    def heap_offset(self, t):
        """Offset of a heap tensor's data from this rank's heap base (IrisError if not on the heap)."""
        off = ctypes.c_size_t()
        self._call("iris_heap_offset", self._lib.lib.iris_heap_offset(self._handle(), ctypes.c_void_p(t.data_ptr()), ctypes.byref(off)))
        return off.value

    def peer_view(self, t, rank):
        """Rank `rank`'s copy of heap tensor t, as a tensor of this process (zero-copy,
        through the peer mapping; reads and writes go over NVLink/PCIe). Valid until close().
        Order accesses with barrier()/barrier_host(): nothing orders them with the peer's work."""
        if not 0 <= rank < self.world_size:
            raise ValueError("peer_view: rank %d is not in [0, %d)" % (rank, self.world_size))
        if not t.is_contiguous():
            raise ValueError("peer_view: the tensor is not contiguous")
        out = ctypes.c_void_p()
        self._call("iris_translate_host", self._lib.lib.iris_translate_host(self._handle(), ctypes.c_void_p(t.data_ptr()), rank, ctypes.byref(out)))
        nbytes = max(t.numel() * t.element_size(), 1)
        raw = _device_bytes(_torch_mod(), out.value, nbytes, self.device, self)
        return raw[: t.numel() * t.element_size()].view(t.dtype).view(t.shape)

    def is_heap(self, t):
        base = self._lib.lib.iris_heap_base(self._handle(), self.rank) or 0
        return base <= t.data_ptr() < base + self.heap_size

    # -------------------------------------------------------------- collectives (raw)
    def _same_everywhere(self, what):
        """check_shapes: exchange a description of the call and refuse one that differs."""
        if not self.check_shapes or _torch_mod().cuda.is_current_stream_capturing():
            return
        got = self._boot.exchange(repr(what).encode())
        mine = got[self.rank]
        bad = [r for r, g in enumerate(got) if g != mine]
        if bad:
            raise ValueError("iris collective mismatch: rank %d calls %s but rank(s) %s call %s" % (self.rank, mine.decode(), bad, got[bad[0]].decode()))

    def _run(self, kind, send_ptr, recv_ptr, count, dtype, extra=None):
        """Enqueue one collective on torch.cuda.current_stream(); extra: op or root.
        Kept lean: it is most of what an eager call costs on the host."""
        torch = _torch_mod()
        if self.check_shapes:
            self._same_everywhere((kind, count, dtype, extra))
        if count == 0:
            return
        fn = self._coll_fns[kind]
        h = self._handle()
        stream = torch._C._cuda_getCurrentRawStream(self.device)
        args = (h, send_ptr, recv_ptr, count, dtype) + ((extra,) if extra is not None else ()) + (stream, self._optp)
        if torch._C._cuda_getDevice() != self.device:
            with torch.cuda.device(self.device):
                st = fn(*args)
        else:
            st = fn(*args)
        if st:
            self._call("iris_" + kind, st)

    def _barrier_device(self):
        torch = _torch_mod()
        stream = ctypes.c_void_p(torch.cuda.current_stream(self.device).cuda_stream)
        self._call("iris_barrier_device", self._lib.lib.iris_barrier_device(self._handle(), stream))

    def ag_gemm_plan(self, M, N, K, dtype=None, out_dtype=None, layout="rows", b_transposed=False, bias=False, path="auto", stage_a=True):
        """Collective, outside graph capture: a plan for C = all_gather(A) @ B (+ bias);
        see AgGemm."""
        return AgGemm(self, M, N, K, dtype, out_dtype, layout, b_transposed, bias, path, stage_a)

    def gemm_reduce_plan(self, op, M, N, K, dtype=None, out_dtype=None, b_transposed=False, bias=False, path="auto", exact=False):
        """Collective, outside graph capture: a plan for C = sum over ranks of A_r @ B_r
        (+ bias), op "reduce_scatter" (this rank gets its M/W rows) or "all_reduce" (all M
        rows); see GemmReduce."""
        return GemmReduce(self, op, M, N, K, dtype, out_dtype, b_transposed, bias, path, exact)

    def moe_plan(self, max_tokens, hidden, top_k, num_experts, mode="low_latency", dispatch_dtype=None, num_sms=0, max_recv_rows=0):
        """Collective, outside graph capture: expert-parallel dispatch / combine buffers for
        up to max_tokens tokens per rank; see Moe."""
        return Moe(self, max_tokens, hidden, top_k, num_experts, mode, dispatch_dtype, num_sms, max_recv_rows)


# ------------------------------------------------------------------ all-gather + GEMM
_PLANS = {}


def _scale_args(what, fp8, dtype, a_scale, b_scale):
    """The fp8 scale rules of the GEMM plans: an fp8 plan needs both (1-element float32
    tensors), another plan none (ValueError). Returns the (tensor, name, shape, dtype) rows
    the caller checks with its other arguments."""
    if fp8 and (a_scale is None or b_scale is None):
        raise ValueError("%s: an fp8 plan needs a_scale and b_scale (1-element float32 CUDA tensors)" % what)
    if not fp8 and (a_scale is not None or b_scale is not None):
        raise ValueError("%s: a_scale and b_scale apply to fp8 inputs only; this plan's dtype is %s" % (what, _types.dtype_name(dtype)))
    return [(a_scale, "a_scale", (1,), "float32"), (b_scale, "b_scale", (1,), "float32")] if fp8 else []


class AgGemm:
    """C (M x N) = all_gather(A shards) @ B (+ bias), one plan per shape (iris_gemm.h).
    layout "rows": each rank holds (M/W) x K rows of A; "cols": M x (K/W) columns.
    B is K x N (or N x K with b_transposed, torch.nn.Linear's weight), same on every rank.
    dtype bf16 or fp16 (A and B), or float8_e4m3fn with per-tensor scales (1-element
    float32 tensors a_scale, b_scale: C = (a_scale A)(b_scale B); a_scale is the scale of
    the whole gathered A, the same value on every rank; needs b_transposed and K % 16, runs
    on the cuBLASLt paths), out_dtype bf16/fp16/fp32 (default: dtype; bf16 for fp8).
    stage_a: A shards may live anywhere (the plan copies them into its heap buffer); False:
    they must be on the heap at the same offset on every rank. Run it with
    iris_gpu.torch.ag_gemm(a, b, plan, bias, a_scale, b_scale)."""

    def __init__(self, ctx, M, N, K, dtype, out_dtype, layout, b_transposed, bias, path, stage_a):
        torch = _torch_mod()
        ctx._lib.require_struct("iris_ag_gemm_desc_t")
        self.ctx = ctx
        self.dtype = torch.bfloat16 if dtype is None else dtype
        if _types.dtype_name(self.dtype) not in _types.GEMM_RS_IN:
            raise TypeError("ag_gemm: dtype must be one of %s, got %s" % (", ".join(_types.GEMM_RS_IN), _types.dtype_name(self.dtype)))
        self.fp8 = _types.dtype_name(self.dtype) == "float8_e4m3fn"
        self.out_dtype = (torch.bfloat16 if self.fp8 else self.dtype) if out_dtype is None else out_dtype
        if _types.dtype_name(self.out_dtype) not in ("bfloat16", "float16", "float32"):
            raise TypeError("ag_gemm: out_dtype must be bfloat16, float16 or float32, got %s" % _types.dtype_name(self.out_dtype))
        self.a_shape, self.b_shape, self.c_shape = _types.ag_gemm_shapes(layout, M, N, K, ctx.world_size, b_transposed)
        if path not in _types.GEMM_PATHS:
            raise ValueError("ag_gemm: path %r is not one of %s" % (path, ", ".join(_types.GEMM_PATHS)))
        d = _lib.AgGemmDescT.init()
        d.layout, d.M, d.N, d.K = _types.GEMM_LAYOUTS[layout], M, N, K
        d.a_type, d.c_type = _types.iris_dtype(self.dtype), _types.iris_dtype(self.out_dtype)
        d.b_transposed, d.has_bias, d.path, d.stage_a = int(bool(b_transposed)), int(bool(bias)), _types.GEMM_PATHS[path], int(bool(stage_a))
        self.has_bias = bool(bias)
        g = ctypes.c_void_p()
        with torch.cuda.device(ctx.device):
            ctx._call("iris_ag_gemm_create", ctx._lib.lib.iris_ag_gemm_create(ctx._handle(), ctypes.byref(d), ctypes.byref(g)))
        self._g = g
        self.id = next(_ids)
        _PLANS[self.id] = self

    @property
    def path(self):
        L = self.ctx._lib.lib
        return L.iris_gemm_path_name(L.iris_ag_gemm_path(self._g)).decode()

    def run(self, a, b, bias, c, a_scale=None, b_scale=None):
        ctx = self.ctx
        torch = _torch_mod()
        args = [(a, "a_shard", self.a_shape, self.dtype), (b, "b", self.b_shape, self.dtype), (c, "out", self.c_shape, self.out_dtype)]
        for t, name, shape, dt in args + _scale_args("ag_gemm", self.fp8, self.dtype, a_scale, b_scale):
            _types.check_tensor(t, "ag_gemm: " + name, ctx.device, dt)
            if tuple(t.shape) != shape and not (name.endswith("scale") and t.numel() == 1):
                raise ValueError("ag_gemm: %s has shape %s, the plan needs %s" % (name, tuple(t.shape), shape))
        if self.has_bias != (bias is not None):
            raise ValueError("ag_gemm: the plan was made with bias=%s but bias is %s" % (self.has_bias, "given" if bias is not None else "None"))
        if bias is not None:
            _types.check_tensor(bias, "ag_gemm: bias", ctx.device, self.out_dtype)
            if tuple(bias.shape) != (self.c_shape[1],):
                raise ValueError("ag_gemm: bias has shape %s, the plan needs (%d,)" % (tuple(bias.shape), self.c_shape[1]))
        stream = ctypes.c_void_p(torch.cuda.current_stream(ctx.device).cuda_stream)
        p = lambda t: ctypes.c_void_p(t.data_ptr() if t is not None else None)
        if self.fp8:
            ctx._lib.require_function("iris_ag_gemm_run_scaled")
            ctx._call("iris_ag_gemm_run_scaled", ctx._lib.lib.iris_ag_gemm_run_scaled(self._g, p(a), p(b), p(a_scale), p(b_scale), p(bias), p(c), stream))
        else:
            ctx._call("iris_ag_gemm_run", ctx._lib.lib.iris_ag_gemm_run(self._g, p(a), p(b), p(bias), p(c), stream))

    def close(self):
        """Collective: free the plan."""
        if self._g is not None and not self.ctx.closed:
            _PLANS.pop(self.id, None)
            g, self._g = self._g, None
            self.ctx._call("iris_ag_gemm_destroy", self.ctx._lib.lib.iris_ag_gemm_destroy(g))


def _plan(plan_id, cls):
    """The open plan of class cls with this id (RuntimeError otherwise)."""
    g = _PLANS.get(int(plan_id))
    if not isinstance(g, cls):
        raise RuntimeError("iris %s plan %d is closed or was never created" % (cls.__name__, plan_id))
    return g


# ------------------------------------------------------------------ GEMM + reduce-scatter / all-reduce
class GemmReduce:
    """The row-parallel half of tensor parallelism (iris_gemm_reduce.h), one plan per shape.
    Rank r holds A_r (M x K/W) and B_r (K/W x N, or N x K/W with b_transposed: a shard of
    torch.nn.Linear's weight); C = sum over r of A_r @ B_r (+ bias, added once).
      op "reduce_scatter": this rank gets rows [r*M/W, (r+1)*M/W) of C, (M/W) x N;
      op "all_reduce": every rank gets all of C, M x N, bitwise the same on every rank.
    dtype (A and B): bfloat16, float16, or float8_e4m3fn with per-tensor scales (1-element
    float32 tensors a_scale, b_scale per rank: C = sum_r (a_scale_r A_r)(b_scale_r B_r); the
    library may refuse fp8 with IRIS_ERROR_UNSUPPORTED). out_dtype (C and bias): bfloat16,
    float16 or float32 (default: dtype; bfloat16 for fp8). fp32 accumulation; exact=False
    (default): each rank's partial is rounded to out_dtype, the partials are summed in fp32
    in rank order and rounded again (torch's and NCCL's numerics, half the bytes of fp32);
    exact=True: fp32 partials, one rounding. path: "auto", "pipelined", "unfused", "fused"
    (bf16/fp16 on Hopper with the library's sm_90a TMA core; else IRIS_ERROR_UNSUPPORTED).
    Create on every rank with the same arguments (Context.gemm_reduce_plan), run with
    gemm_reduce_scatter / gemm_all_reduce (or gemm_reduce) the same number of times on
    every rank, close() on every rank. Attributes: op, dtype, out_dtype, a_shape, b_shape,
    c_shape, has_bias, fp8, path (the one the library chose)."""

    def __init__(self, ctx, op, M, N, K, dtype=None, out_dtype=None, b_transposed=False, bias=False, path="auto", exact=False):
        torch = _torch_mod()
        self.ctx, self.op, self._g = ctx, op, None
        self.dtype = torch.bfloat16 if dtype is None else dtype
        dn = _types.dtype_name(self.dtype)
        if dn not in _types.GEMM_RS_IN:
            raise TypeError("gemm_reduce: dtype must be one of %s, got %s" % (", ".join(_types.GEMM_RS_IN), dn))
        self.fp8 = dn == "float8_e4m3fn"
        self.out_dtype = (torch.bfloat16 if self.fp8 else self.dtype) if out_dtype is None else out_dtype
        on = _types.dtype_name(self.out_dtype)
        if on not in _types.GEMM_RS_OUT:
            raise TypeError("gemm_reduce: out_dtype must be one of %s, got %s" % (", ".join(_types.GEMM_RS_OUT), on))
        self.a_shape, self.b_shape, self.c_shape = _types.gemm_rs_shapes(op, M, N, K, ctx.world_size, b_transposed, dn)
        if path not in _types.GEMM_PATHS:
            raise ValueError("gemm_reduce: path %r is not one of %s" % (path, ", ".join(_types.GEMM_PATHS)))
        self.b_transposed, self.has_bias = bool(b_transposed), bool(bias)
        d = _lib.GemmRsDescT.init()
        d.op, d.M, d.N, d.K = _types.GEMM_REDUCE_OPS[op], M, N, K
        d.a_type, d.c_type = _types.iris_dtype(self.dtype), _types.iris_dtype(self.out_dtype)
        d.b_transposed, d.has_bias, d.path = int(self.b_transposed), int(self.has_bias), _types.GEMM_PATHS[path]
        self.exact = bool(exact)
        d.exact = int(self.exact)

        self._g = self._create(d)
        self.id = next(_ids)
        _PLANS[self.id] = self

    def _create(self, d):
        """iris_gemm_rs_create (collective) of description d; returns the plan handle."""
        torch, ctx = _torch_mod(), self.ctx
        ctx._lib.require_struct("iris_gemm_rs_desc_t")
        ctx._lib.require_function("iris_gemm_rs_create")
        g = ctypes.c_void_p()
        with torch.cuda.device(ctx.device):
            ctx._call("iris_gemm_rs_create", ctx._lib.lib.iris_gemm_rs_create(ctx._handle(), ctypes.byref(d), ctypes.byref(g)))
        return g

    def _destroy(self, g):
        torch = _torch_mod()
        with torch.cuda.device(self.ctx.device):
            st = self.ctx._lib.lib.iris_gemm_rs_destroy(g)
        self.ctx._call("iris_gemm_rs_destroy", st)

    @property
    def path(self):
        L = self.ctx._lib.lib
        return L.iris_gemm_path_name(L.iris_gemm_rs_path(self._g)).decode()

    def check(self, a, b, bias, a_scale, b_scale, out=None, contiguous=True):
        """Raise (ValueError / TypeError) naming the first argument that does not fit the
        plan: device, dtype, shape, contiguity (unless contiguous=False), a bias the plan
        does (not) take, scales missing for fp8 or given for bf16/fp16. Needs no data (the
        fake implementation calls it on fake tensors)."""
        what, dev = "gemm_" + self.op, self.ctx.device
        args = [(a, "a", self.a_shape, self.dtype), (b, "b", self.b_shape, self.dtype)]
        if out is not None:
            args.append((out, "out", self.c_shape, self.out_dtype))
        if self.has_bias != (bias is not None):
            raise ValueError("%s: the plan was made with bias=%s but bias is %s" % (what, self.has_bias, "given" if bias is not None else "None"))
        if bias is not None:
            args.append((bias, "bias", (self.c_shape[1],), self.out_dtype))
        args += _scale_args(what, self.fp8, self.dtype, a_scale, b_scale)
        for t, name, shape, dt in args:
            _types.check_tensor(t, "%s: %s" % (what, name), dev, dt, contiguous)
            got = tuple(t.shape)
            if got != shape and not (name.endswith("scale") and t.numel() == 1):
                hint = " (the plan has b_transposed=%s)" % self.b_transposed if name == "b" else ""
                raise ValueError("%s: %s has shape %s, the plan needs %s%s" % (what, name, got, shape, hint))

    def run(self, a, b, bias, a_scale, b_scale, out=None):
        """Check, then enqueue on torch.cuda.current_stream(): out (None: a new tensor from
        torch's allocator) = this rank's result; returns out. Allocates nothing else (a
        layout other than contiguous, which only a compiled graph hands over, goes through
        a contiguous copy)."""
        if self._g is None:
            raise RuntimeError("iris gemm_reduce plan %d is closed" % self.id)
        _ctx_id(self.ctx)  # RuntimeError once the context is closed
        self.check(a, b, bias, a_scale, b_scale, out, contiguous=False)
        if out is None:
            out = a.new_empty(self.c_shape, dtype=self.out_dtype)
        elif not out.is_contiguous():
            out.copy_(self.run(a, b, bias, a_scale, b_scale))
            return out
        a, b, bias, a_scale, b_scale = (t.contiguous() if t is not None else None for t in (a, b, bias, a_scale, b_scale))
        self._enqueue(a, b, bias, a_scale, b_scale, out)
        return out

    def _enqueue(self, a, b, bias, a_scale, b_scale, out):
        """The C call (iris_gemm_rs_run, or _run_scaled for fp8) on the current stream."""
        torch = _torch_mod()
        ctx, L = self.ctx, self.ctx._lib.lib
        p = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        stream = torch.cuda.current_stream(ctx.device).cuda_stream
        if self.fp8:
            call, fn, args = "iris_gemm_rs_run_scaled", L.iris_gemm_rs_run_scaled, (p(a), p(b), p(a_scale), p(b_scale), p(bias), p(out), stream)
        else:
            call, fn, args = "iris_gemm_rs_run", L.iris_gemm_rs_run, (p(a), p(b), p(bias), p(out), stream)
        if torch._C._cuda_getDevice() != ctx.device:
            with torch.cuda.device(ctx.device):
                st = fn(self._g, *args)
        else:
            st = fn(self._g, *args)
        if st:
            ctx._call(call, st)

    def close(self):
        """Collective: free the plan (waits for the device). Idempotent."""
        if self._g is not None and not self.ctx.closed:
            _PLANS.pop(self.id, None)
            g, self._g = self._g, None
            self._destroy(g)


# ------------------------------------------------------------------ MoE dispatch / combine
MOE_MODES = {"low_latency": 0, "high_throughput": 1}


class Moe:
    """Expert-parallel token dispatch and combine (iris_moe.h): one buffer per MoE layer
    shape, made collectively outside capture (Context.moe_plan). num_experts experts in all,
    L = num_experts / W per rank (expert g on rank g // L as local expert g % L).
      dispatch(x, topk_idx, topk_weights): every rank's tokens (x: n x hidden bf16, n <=
        max_tokens, may differ per rank and call) go to the ranks of their top-k experts,
        once per (token, expert); this rank receives them grouped by local expert into the
        plan's buffers (recv_x, recv_scales, recv_src, recv_count, recv_offsets).
      combine(y): y (recv_x's rows, bf16: the experts' outputs) goes back; each token gets
        sum_k weight_k * y_k (fp32, one rounding to bf16), n x hidden.
    mode "low_latency" (decode; graph-capturable, fixed buffers): recv_x is (L, W*max_tokens,
    hidden), expert l's rows [0, recv_count[l]); "high_throughput" (prefill): recv_x is
    (rows, hidden), expert l's rows [recv_offsets[l], recv_offsets[l+1]) for a grouped GEMM.
    dispatch_dtype bfloat16, or float8_e4m3fn (per-128-channel scales computed in the
    kernel: recv_x * recv_scales repeated over 128 channels ~ the token). The counts stay on
    the device. Every rank calls dispatch and combine in the same order, on
    torch.cuda.current_stream(); both are capturable. The received rows stay valid until
    this rank's combine. close() on every rank (the recv_* tensors view the plan's heap
    blocks: do not use them after it)."""

    def __init__(self, ctx, max_tokens, hidden, top_k, num_experts, mode="low_latency", dispatch_dtype=None, num_sms=0, max_recv_rows=0):
        torch = _torch_mod()
        self.ctx, self._g = ctx, None
        if mode not in MOE_MODES:
            raise ValueError("moe: mode %r is not one of %s" % (mode, ", ".join(MOE_MODES)))
        self.dispatch_dtype = torch.bfloat16 if dispatch_dtype is None else dispatch_dtype
        dn = _types.dtype_name(self.dispatch_dtype)
        if dn not in ("bfloat16", "float8_e4m3fn"):
            raise TypeError("moe: dispatch_dtype must be bfloat16 or float8_e4m3fn, got %s" % dn)
        self.mode, self.max_tokens, self.hidden, self.top_k, self.num_experts = mode, int(max_tokens), int(hidden), int(top_k), int(num_experts)
        self.fp8 = dn == "float8_e4m3fn"
        d = _lib.MoeDescT.init()
        d.mode, d.max_tokens, d.hidden, d.top_k, d.num_experts = MOE_MODES[mode], self.max_tokens, self.hidden, self.top_k, self.num_experts
        d.dispatch_type, d.num_sms, d.max_recv_rows = _types.iris_dtype(self.dispatch_dtype), int(num_sms), int(max_recv_rows)
        L = ctx._lib
        L.require_struct("iris_moe_desc_t")
        L.require_function("iris_moe_create")
        g = ctypes.c_void_p()
        with torch.cuda.device(ctx.device):
            ctx._call("iris_moe_create", L.lib.iris_moe_create(ctx._handle(), ctypes.byref(d), ctypes.byref(g)))
        self._g = g
        self.id = next(_ids)
        _PLANS[self.id] = self
        r = _lib.MoeRecvT()
        ctx._call("iris_moe_get_recv", L.lib.iris_moe_get_recv(g, ctypes.byref(r)))
        self.num_local_experts = nl = r.num_local_experts
        rows_shape = (nl, r.expert_stride) if mode == "low_latency" else (r.rows,)

        def view(ptr, shape, dtype):
            n = 1
            for s in shape:
                n *= s
            return _device_bytes(torch, ptr, max(n, 1) * _types.ITEMSIZE[_types.dtype_name(dtype)], ctx.device, self).view(dtype)[:n].view(shape)

        self.recv_x = view(r.x, rows_shape + (self.hidden,), self.dispatch_dtype)
        self.recv_scales = view(r.scales, rows_shape + (self.hidden // 128,), torch.float32) if self.fp8 else None
        self.recv_src = view(r.src, rows_shape, torch.int32)
        self.recv_count = view(r.count, (nl,), torch.int32)
        self.recv_offsets = view(r.offsets, (nl + 1,), torch.int32)
        self._scales_arg = self.recv_scales if self.fp8 else torch.empty(1, dtype=torch.float32, device=ctx.device)
        self.num_tokens = 0  # of the last dispatch (the combine's output rows)

    def check_dispatch(self, x, topk_idx, topk_weights):
        """Raise (ValueError / TypeError) naming the first argument that does not fit."""
        what, dev = "moe_dispatch", self.ctx.device
        _types.check_tensor(x, what + ": x", dev, "bfloat16", False)
        if x.dim() != 2 or x.shape[1] != self.hidden or x.shape[0] > self.max_tokens:
            raise ValueError("%s: x has shape %s, the plan needs (n <= %d, %d)" % (what, tuple(x.shape), self.max_tokens, self.hidden))
        n = x.shape[0]
        if _types.dtype_name(topk_idx.dtype) not in ("int32", "int64"):
            raise TypeError("%s: topk_idx has dtype %s, int32 or int64 is expected" % (what, _types.dtype_name(topk_idx.dtype)))
        _types.check_tensor(topk_weights, what + ": topk_weights", dev, "float32", False)
        for t, name in ((topk_idx, "topk_idx"), (topk_weights, "topk_weights")):
            if t.device != x.device:
                raise ValueError("%s: %s is on %s but this iris context runs on cuda:%d" % (what, name, t.device, dev))
            if tuple(t.shape) != (n, self.top_k):
                raise ValueError("%s: %s has shape %s, the plan needs (%d, %d)" % (what, name, tuple(t.shape), n, self.top_k))

    def check_combine(self, y, out=None):
        what, dev = "moe_combine", self.ctx.device
        _types.check_tensor(y, what + ": y", dev, "bfloat16", False)
        if tuple(y.shape) != tuple(self.recv_x.shape):
            raise ValueError("%s: y has shape %s, the plan needs recv_x's %s" % (what, tuple(y.shape), tuple(self.recv_x.shape)))
        if out is not None:
            _types.check_tensor(out, what + ": out", dev, "bfloat16", False)
            if tuple(out.shape) != (self.num_tokens, self.hidden):
                raise ValueError("%s: out has shape %s, the last dispatch needs (%d, %d)" % (what, tuple(out.shape), self.num_tokens, self.hidden))

    def _stream_call(self, call, fn, *args):
        torch = _torch_mod()
        ctx = self.ctx
        if self._g is None:
            raise RuntimeError("iris moe plan %d is closed" % self.id)
        _ctx_id(ctx)
        stream = torch.cuda.current_stream(ctx.device).cuda_stream
        with torch.cuda.device(ctx.device):
            st = fn(self._g, *args, stream)
        if st:
            ctx._call(call, st)

    def dispatch(self, x, topk_idx, topk_weights):
        """Enqueue the dispatch; returns (recv_x, recv_scales (None for bf16), recv_count,
        recv_offsets): the plan's buffers, final when the stream reaches this point."""
        torch = _torch_mod()
        self.check_dispatch(x, topk_idx, topk_weights)
        x = x.contiguous()
        idx = topk_idx.to(torch.int32).contiguous()  # torch.topk's int64 indices: one small copy
        w = topk_weights.contiguous()
        n = int(x.shape[0])
        self._stream_call("iris_moe_dispatch", self.ctx._lib.lib.iris_moe_dispatch, x.data_ptr(), n, idx.data_ptr(), w.data_ptr())
        self.num_tokens = n
        return self.recv_x, self.recv_scales, self.recv_count, self.recv_offsets

    def combine(self, y, out=None):
        """Enqueue the combine of y (recv_x's layout, bf16) into out (None: a new n x hidden
        bf16 tensor, n of the last dispatch); returns out."""
        self.check_combine(y, out)
        if out is None:
            out = y.new_empty((self.num_tokens, self.hidden))
        elif not out.is_contiguous():
            out.copy_(self.combine(y))
            return out
        self._stream_call("iris_moe_combine", self.ctx._lib.lib.iris_moe_combine, y.contiguous().data_ptr(), out.data_ptr())
        return out

    def check(self):
        """Raise IrisError for a routing error the kernels recorded since the last check (an
        expert index out of range, a repeated expert, high-throughput rows beyond
        max_recv_rows) or the context's fault. Synchronises nothing: call it after the
        stream has completed the calls."""
        self.ctx._call("iris_moe_check", self.ctx._lib.lib.iris_moe_check(self._g))

    def close(self):
        """Collective: free the plan (waits for the device). Idempotent."""
        if self._g is not None and not self.ctx.closed:
            _PLANS.pop(self.id, None)
            g, self._g = self._g, None
            torch = _torch_mod()
            with torch.cuda.device(self.ctx.device):
                st = self.ctx._lib.lib.iris_moe_destroy(g)
            self.ctx._call("iris_moe_destroy", st)



# ------------------------------------------------------------------ custom ops
# extra argument of each collective: its schema text and how the impl checks it
_KINDS = {
    "all_reduce": ", str op",
    "all_gather": "",
    "reduce_scatter": ", str op",
    "all_to_all": "",
    "broadcast": ", int root",
}


def _out_shape(kind, shape, world):
    """Output shape of the out-of-place op (all_gather and reduce_scatter along dim 0)."""
    if kind == "all_gather":
        return _types.gather_shape(shape, world, 0) if len(shape) else (world,)
    if kind == "reduce_scatter":
        return _types.scatter_shape(shape, world, 0)
    return tuple(shape)


def _extra(kind, dtype, world, extra):
    if kind in ("all_reduce", "reduce_scatter"):
        return _types.iris_redop(extra, dtype, kind)
    if kind == "broadcast":
        return _types.check_root(extra, world)
    return None


def _launch(kind, x, out, ctx_id, extra, inplace=False):
    """Check the tensors and enqueue the collective. inplace: x is the only buffer, in
    NCCL's in-place layout (all_gather: this rank's block at rank * count of x;
    reduce_scatter: the result lands there). The public functions refuse non-contiguous
    tensors; here a compiled graph may still hand over another layout of the same values
    (inductor does for ordered-effect ops), so such a tensor goes through a contiguous copy."""
    ctx = _ctx(ctx_id)
    W = ctx.world_size
    dt = _types.check_tensor(x, "%s: input" % kind, ctx.device, contiguous=False)
    if inplace and not x.is_contiguous():
        tmp = x.contiguous()
        _launch(kind, tmp, None, ctx_id, extra, True)
        x.copy_(tmp)
        return
    if not inplace:
        _types.check_tensor(out, "%s: output" % kind, ctx.device, x.dtype, contiguous=False)
        if not out.is_contiguous():
            tmp = out.contiguous()
            _launch(kind, x, tmp, ctx_id, extra)
            out.copy_(tmp)
            return
    if not x.is_contiguous():
        x = x.contiguous()
    e = _extra(kind, x.dtype, W, extra)
    es = x.element_size()
    if inplace:
        n = x.numel()
        if kind in ("all_gather", "reduce_scatter"):
            if n % W:
                raise ValueError("%s_: %d elements is not a multiple of world_size %d" % (kind, n, W))
            count = n // W
            block = x.data_ptr() + ctx.rank * count * es
            send, recv = (block, x.data_ptr()) if kind == "all_gather" else (x.data_ptr(), block)
        else:
            count = _types.coll_count(kind, n, n, W)
            send = recv = x.data_ptr()
    else:
        count = _types.coll_count(kind, x.numel(), out.numel(), W)
        send, recv = x.data_ptr(), out.data_ptr()
    ctx._run(kind, send, recv, count, dt, e)


def _fake_check(kind, x, out, ctx_id, extra, inplace=False):
    """The checks that need no data (for fake tensors under torch.compile)."""
    ctx = _ctx(ctx_id)
    _types.iris_dtype(x.dtype, "%s: input" % kind)
    _extra(kind, x.dtype, ctx.world_size, extra)
    if inplace:
        if kind in ("all_gather", "reduce_scatter") and x.numel() % ctx.world_size:
            raise ValueError("%s_: %d elements is not a multiple of world_size %d" % (kind, x.numel(), ctx.world_size))
        return
    if out is not None:
        if out.dtype != x.dtype:
            raise TypeError("%s: output has dtype %s but input has %s" % (kind, out.dtype, x.dtype))
        _types.coll_count(kind, x.numel(), out.numel(), ctx.world_size)


def _register_ops(torch):
    """Define iris::<kind>, iris::<kind>_inplace and iris::<kind>_out for each
    collective, iris::barrier and iris::ag_gemm, with fake implementations."""
    for kind, extra in _KINDS.items():
        def make(kind):
            def functional(x, ctx, *extra):
                ctx_o = _ctx(ctx)
                out = torch.empty(_out_shape(kind, tuple(x.shape), ctx_o.world_size), dtype=x.dtype, device=x.device)
                _launch(kind, x, out, ctx, extra[0] if extra else None)
                return out

            def functional_fake(x, ctx, *extra):
                _fake_check(kind, x, None, ctx, extra[0] if extra else None)
                return x.new_empty(_out_shape(kind, tuple(x.shape), _ctx(ctx).world_size))

            def inplace(x, ctx, *extra):
                _launch(kind, x, None, ctx, extra[0] if extra else None, inplace=True)

            def inplace_fake(x, ctx, *extra):
                _fake_check(kind, x, None, ctx, extra[0] if extra else None, inplace=True)

            def out_(x, out, ctx, *extra):
                _launch(kind, x, out, ctx, extra[0] if extra else None)

            def out_fake(x, out, ctx, *extra):
                _fake_check(kind, x, out, ctx, extra[0] if extra else None)

            return functional, functional_fake, inplace, inplace_fake, out_, out_fake

        f, ff, i, i_f, o, of = make(kind)
        _IMPLS.update({kind: f, kind + "_inplace": i, kind + "_out": o})
        op = torch.library.custom_op("iris::" + kind, f, mutates_args=(), schema="(Tensor x, int ctx%s) -> Tensor" % extra)
        op.register_fake(ff)
        op_i = torch.library.custom_op("iris::%s_inplace" % kind, i, mutates_args=("x",), schema="(Tensor(a!) x, int ctx%s) -> ()" % extra)
        op_i.register_fake(i_f)
        op_o = torch.library.custom_op("iris::%s_out" % kind, o, mutates_args=("out",), schema="(Tensor x, Tensor(a!) out, int ctx%s) -> ()" % extra)
        op_o.register_fake(of)

    def barrier(ctx):
        _ctx(ctx)._barrier_device()

    def barrier_fake(ctx):
        _ctx(ctx)

    _IMPLS["barrier"] = barrier
    b = torch.library.custom_op("iris::barrier", barrier, mutates_args=(), schema="(int ctx) -> ()")
    b.register_fake(barrier_fake)

    def ag_gemm(a, b, bias, a_scale, b_scale, plan):
        g = _plan(plan, AgGemm)
        c = torch.empty(g.c_shape, dtype=g.out_dtype, device=a.device)
        g.run(a, b, bias, c, a_scale, b_scale)
        return c

    def ag_gemm_fake(a, b, bias, a_scale, b_scale, plan):
        g = _plan(plan, AgGemm)
        _scale_args("ag_gemm", g.fp8, g.dtype, a_scale, b_scale)
        return a.new_empty(g.c_shape, dtype=g.out_dtype)

    _IMPLS["ag_gemm"] = ag_gemm
    op = torch.library.custom_op("iris::ag_gemm", ag_gemm, mutates_args=(), schema="(Tensor a, Tensor b, Tensor? bias, Tensor? a_scale, Tensor? b_scale, int plan) -> Tensor")
    op.register_fake(ag_gemm_fake)

    # GEMM + reduce-scatter / all-reduce: the plan says which (and the shapes, types, bias)
    def gemm_reduce(a, b, bias, a_scale, b_scale, plan):
        return _plan(plan, GemmReduce).run(a, b, bias, a_scale, b_scale)

    def gemm_reduce_fake(a, b, bias, a_scale, b_scale, plan):
        g = _plan(plan, GemmReduce)
        g.check(a, b, bias, a_scale, b_scale, None, contiguous=False)
        return a.new_empty(g.c_shape, dtype=g.out_dtype)

    def gemm_reduce_out(a, b, bias, a_scale, b_scale, out, plan):
        _plan(plan, GemmReduce).run(a, b, bias, a_scale, b_scale, out)

    def gemm_reduce_out_fake(a, b, bias, a_scale, b_scale, out, plan):
        _plan(plan, GemmReduce).check(a, b, bias, a_scale, b_scale, out, contiguous=False)

    _IMPLS.update(gemm_reduce=gemm_reduce, gemm_reduce_out=gemm_reduce_out)
    args = "Tensor a, Tensor b, Tensor? bias, Tensor? a_scale, Tensor? b_scale"
    op = torch.library.custom_op("iris::gemm_reduce", gemm_reduce, mutates_args=(), schema="(%s, int plan) -> Tensor" % args)
    op.register_fake(gemm_reduce_fake)
    op = torch.library.custom_op("iris::gemm_reduce_out", gemm_reduce_out, mutates_args=("out",), schema="(%s, Tensor(a!) out, int plan) -> ()" % args)
    op.register_fake(gemm_reduce_out_fake)
    # MoE: dispatch writes the plan's receive buffers (passed in, so a compiled graph knows);
    # combine returns the tokens' rows (n: the dispatch's token count)
    def moe_dispatch(x, topk_idx, topk_weights, recv_x, recv_scales, recv_src, recv_count, recv_offsets, plan):
        _plan(plan, Moe).dispatch(x, topk_idx, topk_weights)

    def moe_dispatch_fake(x, topk_idx, topk_weights, recv_x, recv_scales, recv_src, recv_count, recv_offsets, plan):
        _plan(plan, Moe).check_dispatch(x, topk_idx, topk_weights)

    def moe_combine(y, num_tokens, plan):
        m = _plan(plan, Moe)
        out = y.new_empty((num_tokens, m.hidden))
        return m.combine(y, out)

    def moe_combine_fake(y, num_tokens, plan):
        m = _plan(plan, Moe)
        m.check_combine(y)
        return y.new_empty((num_tokens, m.hidden))

    def moe_combine_out(y, out, plan):
        _plan(plan, Moe).combine(y, out)

    def moe_combine_out_fake(y, out, plan):
        m = _plan(plan, Moe)
        m.check_combine(y)
        if out.dim() != 2 or out.shape[1] != m.hidden:
            raise ValueError("moe_combine: out has shape %s, the plan needs (n, %d)" % (tuple(out.shape), m.hidden))

    _IMPLS.update(moe_dispatch=moe_dispatch, moe_combine=moe_combine, moe_combine_out=moe_combine_out)
    recv = ("recv_x", "recv_scales", "recv_src", "recv_count", "recv_offsets")
    op = torch.library.custom_op("iris::moe_dispatch", moe_dispatch, mutates_args=recv,
                                 schema="(Tensor x, Tensor topk_idx, Tensor topk_weights, Tensor(a!) recv_x, Tensor(b!) recv_scales, Tensor(c!) recv_src, "
                                        "Tensor(d!) recv_count, Tensor(e!) recv_offsets, int plan) -> ()")
    op.register_fake(moe_dispatch_fake)
    op = torch.library.custom_op("iris::moe_combine", moe_combine, mutates_args=(), schema="(Tensor y, int num_tokens, int plan) -> Tensor")
    op.register_fake(moe_combine_fake)
    op = torch.library.custom_op("iris::moe_combine_out", moe_combine_out, mutates_args=("out",), schema="(Tensor y, Tensor(a!) out, int plan) -> ()")
    op.register_fake(moe_combine_out_fake)
    _keep_program_order(torch, [k + suffix for k in _KINDS for suffix in ("", "_inplace", "_out")] +
                        ["barrier", "ag_gemm", "gemm_reduce", "gemm_reduce_out", "moe_dispatch", "moe_combine", "moe_combine_out"])


def _keep_program_order(torch, names):
    """Mark every iris op as an ordered side effect, so torch.compile keeps them in program
    order (a barrier stays between the collectives around it; every rank runs the same
    sequence). Without the (private) effects API a warning says the order is not pinned;
    IRIS_GPU_COMPILE_ORDERED=0 leaves the ops unordered (for a torch that cannot compile
    ordered mutable ops)."""
    if os.environ.get("IRIS_GPU_COMPILE_ORDERED", "1") == "0":
        return
    try:
        from torch._higher_order_ops.effects import _EffectType, _register_effectful_op
    except ImportError as e:
        warnings.warn("iris_gpu: torch %s has no effectful-op registry (%s): torch.compile may reorder iris ops that do not depend on each other" % (torch.__version__, e))
        return
    for name in names:
        _register_effectful_op(getattr(torch.ops.iris, name).default, _EffectType.ORDERED)


# ------------------------------------------------------------------ public functions
_IMPLS = {}  # op name -> its Python implementation (filled by _register_ops)


def _plain_eager(torch, args):
    """True outside tracing: no torch.compile, no dispatch mode (fake, functional, proxy)
    and only plain tensors, so the public functions may run an op's implementation
    directly (a dispatcher round trip through torch.library.custom_op costs about 25 us)."""
    if torch.compiler.is_compiling() or torch.utils._python_dispatch._get_current_dispatch_mode() is not None:
        return False
    return all(type(a) is torch.Tensor for a in args if isinstance(a, torch.Tensor))


def _invoke(name, *args):
    """torch.ops.iris.<name>(*args); in plain eager mode (and CUDA graph capture) its
    implementation directly, with the same checks and the version counter of the mutated
    tensor bumped as the dispatcher would. IRIS_GPU_DISPATCH=1 always takes the dispatcher."""
    torch = _torch_mod()
    if _DIRECT and _plain_eager(torch, args):
        r = _IMPLS[name](*args)
        mutated = args[0] if name.endswith("_inplace") else args[_OUT_ARG.get(name, 1)] if name.endswith("_out") else None
        if mutated is not None:
            torch.autograd.graph.increment_version(mutated)
        return r
    return getattr(torch.ops.iris, name)(*args)


_DIRECT = os.environ.get("IRIS_GPU_DISPATCH", "0") in ("", "0")
_OUT_ARG = {"gemm_reduce_out": 5}  # where an _out op's mutated tensor is, when not args[1]


def _contiguous(kind, x, out=None):
    """The public functions refuse non-contiguous tensors (ValueError naming them)."""
    _types.check_contiguous(x, kind + ": input")
    if out is not None:
        _types.check_contiguous(out, kind + ": output")


def all_reduce(x, ctx, op="sum", out=None):
    """Out of place: a new tensor (or out) = op over ranks of x. op: sum, min, max, avg."""
    _contiguous("all_reduce", x, out)
    if out is None:
        return _invoke("all_reduce", x, _ctx_id(ctx), op)
    _invoke("all_reduce_out", x, out, _ctx_id(ctx), op)
    return out


def all_reduce_(x, ctx, op="sum"):
    """In place: x = op over ranks of x. Returns x."""
    _contiguous("all_reduce", x)
    _invoke("all_reduce_inplace", x, _ctx_id(ctx), op)
    return x


def _along(x, dim):
    """x with dim moved to the front, contiguous (a copy unless dim is 0 already)."""
    d = dim % x.dim()
    return x if d == 0 else x.movedim(d, 0).contiguous()


def all_gather(x, ctx, dim=0, out=None):
    """Every rank's x, concatenated along dim (out: a tensor of that shape, dim 0 only, or
    any tensor of world_size * x.numel() elements: rank r's x at r * x.numel()). Along a
    dim other than 0 the input is moved to the front first and the result back (copies)."""
    _contiguous("all_gather", x, out)
    cid = _ctx_id(ctx)
    if out is not None:
        if dim != 0:
            raise ValueError("all_gather: out= needs dim=0 (gather along another dim into a new tensor)")
        _invoke("all_gather_out", x, out, cid)
        return out
    if x.dim() == 0 or dim % x.dim() == 0:
        return _invoke("all_gather", x, cid)
    d = dim % x.dim()
    g = _invoke("all_gather", _along(x, d), cid)  # (W * x.shape[d], ...rest)
    return g.movedim(0, d).contiguous()  # gather_shape(x.shape, W, dim), contiguous like torch.cat


def all_gather_(buf, ctx):
    """In place: buf holds world_size blocks; this rank's block (rank * n/W) is sent and
    every block is filled."""
    _contiguous("all_gather", buf)
    _invoke("all_gather_inplace", buf, _ctx_id(ctx))
    return buf


def reduce_scatter(x, ctx, op="sum", dim=0, out=None):
    """This rank's slice (rank-th of world_size along dim) of op over ranks of x."""
    _contiguous("reduce_scatter", x, out)
    cid = _ctx_id(ctx)
    if out is not None:
        if dim != 0:
            raise ValueError("reduce_scatter: out= needs dim=0")
        _invoke("reduce_scatter_out", x, out, cid, op)
        return out
    if x.dim() == 0:
        raise ValueError("reduce_scatter: a 0-d tensor cannot be scattered")
    d = dim % x.dim()
    _types.scatter_shape(tuple(x.shape), _ctx(cid).world_size, d)
    r = _invoke("reduce_scatter", _along(x, d), cid, op)
    return r if d == 0 else r.movedim(0, d).contiguous()


def reduce_scatter_(buf, ctx, op="sum"):
    """In place: buf holds world_size blocks; the reduced block of this rank lands at rank * n/W."""
    _contiguous("reduce_scatter", buf)
    _invoke("reduce_scatter_inplace", buf, _ctx_id(ctx), op)
    return buf


def all_to_all(x, ctx, out=None):
    """Block r (of world_size equal blocks of x, flattened) goes to rank r; the result's
    block r came from rank r."""
    _contiguous("all_to_all", x, out)
    if out is None:
        return _invoke("all_to_all", x, _ctx_id(ctx))
    _invoke("all_to_all_out", x, out, _ctx_id(ctx))
    return out


def all_to_all_(x, ctx):
    _contiguous("all_to_all", x)
    _invoke("all_to_all_inplace", x, _ctx_id(ctx))
    return x


def broadcast(x, ctx, root=0, out=None):
    """root's x on every rank (x is read on the root only)."""
    _contiguous("broadcast", x, out)
    if out is None:
        return _invoke("broadcast", x, _ctx_id(ctx), root)
    _invoke("broadcast_out", x, out, _ctx_id(ctx), root)
    return out


def broadcast_(x, ctx, root=0):
    _contiguous("broadcast", x)
    _invoke("broadcast_inplace", x, _ctx_id(ctx), root)
    return x


def barrier(ctx):
    """A GPU-side barrier on the current stream (capturable): work enqueued after it on any
    rank sees the writes every rank enqueued before it."""
    _invoke("barrier", _ctx_id(ctx))


def ag_gemm(a, b, plan, bias=None, a_scale=None, b_scale=None):
    """C = all_gather(A shards) @ B (+ bias) with a plan from Context.ag_gemm_plan; fp8
    plans take a_scale and b_scale (1-element float32 tensors, a_scale the same on every
    rank): C = (a_scale A)(b_scale B) (+ bias)."""
    if not isinstance(plan, AgGemm) or plan._g is None:
        raise RuntimeError("ag_gemm: expected an open AgGemm plan")
    return _invoke("ag_gemm", a, b, bias, a_scale, b_scale, plan.id)


def gemm_reduce(a, b, plan, bias=None, a_scale=None, b_scale=None, out=None):
    """C = sum over ranks of A_r @ B_r (+ bias) with a GemmReduce plan (Context.gemm_reduce_plan):
    this rank's M/W rows of C (plan op "reduce_scatter") or all of it ("all_reduce"), in a
    new tensor or in out (which it returns). a: this rank's A_r (M x K/W), b: its B_r
    (K/W x N, or N x K/W for a plan with b_transposed), bias: N values of the output type
    when the plan has bias; a_scale, b_scale: fp8 plans only, 1-element float32 tensors.
    Every rank calls it, in the same order; on torch.cuda.current_stream(); capturable."""
    if not isinstance(plan, GemmReduce) or plan._g is None:
        raise RuntimeError("gemm_reduce: expected an open GemmReduce plan")
    for t, name in ((a, "a"), (b, "b"), (bias, "bias"), (out, "out")):
        if t is not None:
            _types.check_contiguous(t, "gemm_%s: %s" % (plan.op, name))
    if out is None:
        return _invoke("gemm_reduce", a, b, bias, a_scale, b_scale, plan.id)
    _invoke("gemm_reduce_out", a, b, bias, a_scale, b_scale, out, plan.id)
    return out


def _gemm_reduce_as(op, a, b, plan, bias, a_scale, b_scale, out):
    if isinstance(plan, GemmReduce) and plan.op != op:
        raise ValueError("gemm_%s: the plan was made for op %r" % (op, plan.op))
    return gemm_reduce(a, b, plan, bias, a_scale, b_scale, out)


def gemm_reduce_scatter(a, b, plan, bias=None, a_scale=None, b_scale=None, out=None):
    """gemm_reduce with a plan made for op "reduce_scatter": this rank's rows
    [rank*M/W, (rank+1)*M/W) of sum_r A_r @ B_r (+ bias), (M/W) x N."""
    return _gemm_reduce_as("reduce_scatter", a, b, plan, bias, a_scale, b_scale, out)


def gemm_all_reduce(a, b, plan, bias=None, a_scale=None, b_scale=None, out=None):
    """gemm_reduce with a plan made for op "all_reduce": all M x N of sum_r A_r @ B_r
    (+ bias), bitwise the same on every rank."""
    return _gemm_reduce_as("all_reduce", a, b, plan, bias, a_scale, b_scale, out)


def moe_dispatch(x, topk_idx, topk_weights, plan):
    """Expert-parallel dispatch with a Moe plan (Context.moe_plan): x (n x hidden bf16, n <=
    max_tokens), topk_idx (n x top_k, int32 or int64 as torch.topk gives; -1: none),
    topk_weights (n x top_k float32). Returns the plan's (recv_x, recv_scales or None,
    recv_count, recv_offsets), written when the stream gets there. Every rank calls it,
    in the same order; on torch.cuda.current_stream(); capturable."""
    if not isinstance(plan, Moe) or plan._g is None:
        raise RuntimeError("moe_dispatch: expected an open Moe plan")
    plan.check_dispatch(x, topk_idx, topk_weights)
    _invoke("moe_dispatch", x, topk_idx, topk_weights, plan.recv_x, plan._scales_arg, plan.recv_src, plan.recv_count, plan.recv_offsets, plan.id)
    plan.num_tokens = x.shape[0]
    return plan.recv_x, plan.recv_scales, plan.recv_count, plan.recv_offsets


def moe_combine(y, plan, out=None):
    """Expert-parallel combine with a Moe plan: y (recv_x's shape, bf16: the experts'
    outputs) back to the tokens' ranks; returns a new n x hidden bf16 tensor (or out) with
    row t = sum_k topk_weights[t, k] * y of expert k (fp32, one rounding), n of the last
    dispatch. Every rank calls it after its dispatch; capturable."""
    if not isinstance(plan, Moe) or plan._g is None:
        raise RuntimeError("moe_combine: expected an open Moe plan")
    if out is None:
        return _invoke("moe_combine", y, plan.num_tokens, plan.id)
    _types.check_contiguous(out, "moe_combine: out")
    _invoke("moe_combine_out", y, out, plan.id)
    return out


# ------------------------------------------------------------------ launching ranks
def device_context_from_symm_mem(t, handle):
    """Adopt torch's symmetric memory: t from torch.distributed._symmetric_memory.empty(...),
    handle = symm_mem.rendezvous(t, group). Returns (iris_device_ctx_t for C kernels, an
    int64 tensor of the peers' buffer bases for the Triton helpers, this rank, the world
    size). The context's heap is the symmetric buffer from its base through the end of t,
    so iris_gpu.triton's translate/load/store/atomic_add/signal/wait and iris_device.h work
    on t unchanged. No iris Context is needed (and the host collectives need one). Keep t
    and handle alive while kernels use the result."""
    torch = _torch_mod()
    ptrs = [int(p) for p in handle.buffer_ptrs]
    rank, world = int(handle.rank), int(handle.world_size)
    end = t.data_ptr() + t.numel() * t.element_size() - ptrs[rank]
    if t.data_ptr() < ptrs[rank] or end <= 0:
        raise ValueError("the tensor does not lie in this rank's symmetric buffer (handle.buffer_ptrs[%d])" % rank)
    dc = _lib.load().device_context_from_peers(rank, world, end, ptrs)
    return dc, torch.tensor(ptrs, dtype=torch.int64, device=t.device), rank, world


def _spawned(rank, fn, world, port):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    fn()


def launch(fn, nprocs):
    """Run fn() on every rank: in this process when a launcher (torchrun) set RANK, else in
    nprocs processes started here (torch.multiprocessing.spawn) with torchrun's environment
    (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT on a free local port)."""
    if "RANK" in os.environ:
        return fn()
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.spawn(_spawned, args=(fn, nprocs, port), nprocs=nprocs)


# ------------------------------------------------------------------ serving engines
class CustomAllreduce:
    """A drop-in for vLLM's CustomAllreduce (and SGLang's): an engine builds it per
    tensor-parallel group and asks it per tensor.

        ca = CustomAllreduce(group, device, max_size=8 << 20)   # collective over group
        if ca.should_custom_ar(x): y = ca.custom_all_reduce(x)  # new tensor, x unchanged
        with ca.capture(): ... capture CUDA graphs ...
        ca.close()

    group: a process group (gloo as vLLM gives, or any); device: int, "cuda:k" or
    torch.device. World size 1 gives disabled = True. The input is copied into the heap
    by the library (its staging area), so graph replays work with any input address and
    nothing needs registering; capture() only marks warm-up calls (inside capture() but not
    capturing), which return torch.empty_like(inp) without communicating, as vLLM does."""

    _SUPPORTED = ("float32", "float16", "bfloat16")
    # vLLM's class attribute (its kernels take these world sizes); iris takes any world of
    # 2 to IRIS_MAX_RANKS ranks, so the list only says what engines may look for.
    _SUPPORTED_WORLD_SIZES = list(range(2, 17))

    def __init__(self, group, device, max_size=8 * 1024 * 1024, heap_size=0):
        torch = _torch_mod()
        import torch.distributed as dist

        self.group = group
        self.max_size = int(max_size)
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.device = torch.device("cuda", _device_index(torch, device))
        self.fully_connected = True  # every rank maps every heap (iris_init fails otherwise)
        self.disabled = True
        self._capturing = False
        self.ctx = None
        if self.world_size == 1:
            return
        self.ctx = Context(group=group, device=self.device.index, heap_size=heap_size)
        self.disabled = False

    def should_custom_ar(self, inp):
        """True when custom_all_reduce takes inp: not disabled, a contiguous float32/
        float16/bfloat16 CUDA tensor on this device, bytes a multiple of 16 and below
        max_size."""
        if self.disabled or self.ctx is None or self.ctx.closed:
            return False
        if _types.dtype_name(inp.dtype) not in self._SUPPORTED or not inp.is_cuda or inp.device != self.device:
            return False
        nbytes = inp.numel() * inp.element_size()
        return inp.is_contiguous() and nbytes % 16 == 0 and 0 < nbytes < self.max_size

    def custom_all_reduce(self, inp):
        """Sum over ranks of inp as a new tensor, or None when should_custom_ar says no.
        Inside capture() but not capturing (warm-up): torch.empty_like(inp), no communication."""
        if not self.should_custom_ar(inp):
            return None
        torch = _torch_mod()
        if self._capturing and not torch.cuda.is_current_stream_capturing():
            return torch.empty_like(inp)
        return _invoke("all_reduce", inp, self.ctx.id, "sum")

    def all_reduce(self, inp, *, out=None, registered=False):
        """vLLM's lower-level entry: the sum over ranks of inp into out (a new tensor when
        None), whatever capture() says; no gate (the caller checked should_custom_ar).
        `registered` is accepted and ignored: every input works, registered or not."""
        del registered
        if out is None:
            return _invoke("all_reduce", inp, self.ctx.id, "sum")
        _invoke("all_reduce_out", inp, out, self.ctx.id, "sum")
        return out

    @property
    def _IS_CAPTURING(self):  # noqa: N802 (vLLM's name): True inside capture()
        return self._capturing

    @_IS_CAPTURING.setter
    def _IS_CAPTURING(self, value):  # noqa: N802
        self._capturing = bool(value)

    @contextlib.contextmanager
    def capture(self):
        """Graph capture session: nothing to register (the heap never moves)."""
        try:
            self._capturing = True
            yield
        finally:
            self._capturing = False

    def register_graph_buffers(self):
        """vLLM's hook after capture: nothing to do here."""

    def close(self):
        """Collective over the group: finalize the context. Idempotent."""
        self.disabled = True
        if self.ctx is not None:
            ctx, self.ctx = self.ctx, None
            ctx.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
