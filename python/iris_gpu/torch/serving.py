"""iris_gpu.torch.serving: CustomAllreduce: the drop-in for serving engines' custom all-reduce."""
import contextlib
import os
import warnings

from .. import _types
from .context import Context, _device_index, _torch_mod
from .ops import _QUANT, _in_step, _invoke, all_reduce_rmsnorm


# ------------------------------------------------------------------ the own context's sizes
_MIB = 1 << 20
_STAGING_DEFAULT = 64 * _MIB  # IRIS_COLL_STAGING_BYTES (internal/coll/plan.h)
_STAGING_MIN = 2048  # IRIS_COLL_STAGING_MIN: 16 x 8 x IRIS_MAX_RANKS
def _parse_size(text):
    """Bytes of a size as the library reads it ("512M", "2GiB", "1048576"), or None."""
    try:
        return _types.parse_bytes(text)
    except ValueError:
        return None


def _own_heap_size(world_size, heap_size):
    """The heap the slot's own context is brought up with: heap_size where given, else
    IRIS_HEAP_SIZE's (0: the library reads it), else CustomAllreduce.heap_bytes for the
    staging areas the library will make (IRIS_COLL_STAGING, else its default)."""
    if heap_size or "IRIS_HEAP_SIZE" in os.environ:
        return heap_size
    user = os.environ.get("IRIS_COLL_STAGING")
    staging = _STAGING_DEFAULT
    if user is not None:  # the user's; a malformed one fails the library's setup, whatever the heap
        staging = _parse_size(user)
        staging = _STAGING_DEFAULT if staging is None else max(staging, _STAGING_MIN) if staging else 0
    return CustomAllreduce.heap_bytes(world_size, staging)


# ------------------------------------------------------------------ serving engines
class CustomAllreduce:
    """A drop-in for vLLM's CustomAllreduce (and SGLang's): an engine builds it per
    tensor-parallel group and asks it per tensor.

        ca = CustomAllreduce(group, device, max_size=8 << 20)   # collective over group
        if ca.should_custom_ar(x): y = ca.custom_all_reduce(x)  # new tensor, x unchanged
        with ca.capture(): ... capture CUDA graphs ...
        ca.close()

    group: a process group (gloo as vLLM gives, or any); device: int, "cuda:k" or
    torch.device. World size 1 gives disabled = True.
    ctx: None (the default): the slot brings up a Context of its own over group (its own
    heap and rendezvous, collective over the group), sized for the collectives: heap_size 0
    (the default) with IRIS_HEAP_SIZE unset gives heap_bytes(world size) per rank (208 MiB
    at 2 ranks, 214 at 4, 228 at 8, against the library's default 1 GiB). A heap_size given,
    IRIS_HEAP_SIZE or IRIS_COLL_STAGING win. Or an iris Context of a larger world
    (every rank's one context): the slot runs on ctx's team with group's members, made
    beforehand on every rank of ctx (ctx.team(group_ranks) or it.new_group(ranks, ctx): a
    split is collective over the whole context, which an engine's per-group construction
    is not); construction is then local, and close() leaves ctx open. A team without
    collective state (past IRIS_TEAMS_COLL splits with collectives) leaves the slot
    disabled (a warning says so), so the engine keeps its own all-reduce. On a team that
    is not the whole context the fused add + RMSNorm declines (it runs over whole contexts
    only): should_fused_add_rms_norm says False and the engine runs its own.
    symm_mem_enabled (vLLM's keyword) and further keywords are accepted and ignored: the
    library stages any input and takes any size up to max_size (larger fused add + RMSNorm
    inputs go through the staging areas in pieces of whole rows).
    The input is copied into the heap
    by the library (its staging area), so graph replays work with any input address and
    nothing needs registering; capture() only marks warm-up calls (inside capture() but not
    capturing), which return torch.empty_like(inp) without communicating, as vLLM does."""

    _SUPPORTED = ("float32", "float16", "bfloat16")
    # vLLM's class attribute (its kernels take these world sizes); iris takes any world of
    # 2 to IRIS_MAX_RANKS ranks, so the list only says what engines may look for.
    _SUPPORTED_WORLD_SIZES = list(range(2, 17))

    @staticmethod
    def heap_bytes(world_size, staging=_STAGING_DEFAULT):
        """Heap bytes per rank the slot's own context asks for when neither heap_size nor
        IRIS_HEAP_SIZE gives one (1 GiB, the library's default, otherwise): what
        iris_collectives_setup allocates and 8 MiB to spare, rounded up to 2 MiB. The terms
        are the NCCL-API library's default heap (nccl/route.h, iris_nccl_default_heap;
        docs/nccl_shim.md), with a bound for groups over several nodes, which that library
        never serves:
          LL and armed slots (6.5 MiB per rank of a node, 8.5 at 2 ranks) and the control
            words: 7 MiB per rank of the group (9 at 2 ranks); over several nodes (at most world_size // 2 ranks a node) a
            node's slots plus 32 MiB of multi-node scratch, where that is more;
          32 MiB of all-reduce scratch;
          two staging areas of `staging` bytes (IRIS_COLL_STAGING, else 64 MiB);
          8 MiB to spare.
        The staging areas stay at the library's size, not max_size: inputs past them are
        staged in pieces, and the fused add + RMSNorm takes any number of tokens (2 H200s:
        sized to 8 MiB, a 16 MiB fused call took 110.5 us against 99.1, 32 MiB 222.8
        against 184.1). Every rank of the group computes the same value (its size;
        IRIS_COLL_STAGING must be alike anyway), as the bring-up requires."""
        W = int(world_size)
        slots = max((9 if W == 2 else 7) * _MIB * W, 7 * _MIB * (W // 2) + 32 * _MIB)
        b = slots + 32 * _MIB + 2 * int(staging) + 8 * _MIB
        return -(-b // (2 * _MIB)) * (2 * _MIB)

    def __init__(self, group, device, max_size=8 * 1024 * 1024, heap_size=0, ctx=None, symm_mem_enabled=False, **_engine_kwargs):
        del symm_mem_enabled, _engine_kwargs  # vLLM's; see above
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
        self._target = None  # the Context or Team the sums run on
        self._owns_ctx = ctx is None
        if self.world_size == 1:
            return
        if ctx is None:
            heap = _own_heap_size(self.world_size, heap_size)
            self.ctx = self._target = Context(group=group, device=self.device.index, heap_size=heap)
        else:
            if ctx.device != self.device.index:
                raise ValueError("CustomAllreduce: the context runs on cuda:%d, not on %s" % (ctx.device, self.device))
            self._target = ctx.team_for(group)  # RuntimeError naming how to make it when there is none
            self.ctx = ctx
            if not getattr(self._target, "has_collectives", True):
                warnings.warn("iris CustomAllreduce: the team %s has no collective state (IRIS_TEAMS_COLL splits with collectives were made before it); "
                              "the slot stays disabled and the engine's own all-reduce runs" % (list(getattr(self._target, "ranks", ())),))
                return
        self.disabled = False

    def should_custom_ar(self, inp):
        """True when custom_all_reduce takes inp: not disabled, a contiguous float32/
        float16/bfloat16 CUDA tensor on this device, bytes a multiple of 16 and below
        max_size."""
        if self.disabled or self._target is None or self._target.closed:
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
        return _invoke("all_reduce", inp, self._target.id, "sum")

    def all_reduce(self, inp, *, out=None, registered=False):
        """vLLM's lower-level entry: the sum over ranks of inp into out (a new tensor when
        None), whatever capture() says; no gate (the caller checked should_custom_ar).
        `registered` is accepted and ignored: every input works, registered or not."""
        del registered
        target = self._target
        if target is None or target.closed:
            raise RuntimeError("iris CustomAllreduce.all_reduce: the slot is closed or disabled (world size %d); should_custom_ar says so" % self.world_size)
        cid = target.id
        try:
            if out is None:
                return _invoke("all_reduce", inp, cid, "sum")
            _invoke("all_reduce_out", inp, out, cid, "sum")
        except (ValueError, TypeError) as e:
            _in_step(e, "all_reduce", inp, cid, "sum")
            raise
        return out

    # ---- all-reduce + residual add + RMSNorm (+ fp8), vLLM's fused_add_rms_norm signature
    _FUSED_SUPPORTED = ("float16", "bfloat16")

    def should_fused_add_rms_norm(self, inp, residual=None, weight=None):
        """True when fused_add_rms_norm takes inp: not disabled, a contiguous bfloat16/float16
        CUDA tensor on this device whose last dimension (hidden) is at most 32768, and
        residual and weight (when given) alike. Any number of tokens: past the fused
        kernel's size the library runs the all-reduce and the norm separately, with the same
        result."""
        if self.disabled or self.ctx is None or self.ctx.closed or self._target is not self.ctx:
            return False  # on a team: the fused op runs over whole contexts only
        if _types.dtype_name(inp.dtype) not in self._FUSED_SUPPORTED or not inp.is_cuda or inp.device != self.device or not inp.is_contiguous():
            return False
        if inp.dim() < 1 or not 1 <= inp.shape[-1] <= 32768 or inp.numel() == 0:
            return False
        for t, shape in ((residual, inp.shape), (weight, inp.shape[-1:])):
            if t is not None and (t.dtype != inp.dtype or tuple(t.shape) != tuple(shape) or t.device != self.device or not t.is_contiguous()):
                return False
        return True

    def fused_add_rms_norm(self, inp, residual, weight, epsilon, quant=None, scale=None):
        """The all-reduce fused into vLLM's fused_add_rms_norm(input, residual, weight,
        epsilon): residual += all_reduce(inp) (the sum over ranks, as custom_all_reduce);
        inp = rmsnorm(residual) * weight, both in place; returns (inp, residual), or None
        when should_fused_add_rms_norm says no (the engine then runs its own all-reduce and
        norm). quant "fp8_per_token" (dynamic: scales written) or "fp8_per_tensor" (scale:
        a 1-element float32 tensor, read) also writes fp8 e4m3 codes of the output and
        returns (out_fp8, residual, scale). Inside capture() but not capturing (warm-up):
        nothing is communicated and the inputs are returned as they are. residual or weight
        None: None (the engine runs its own); an unknown quant raises ValueError, in warm-up
        too."""
        if quant not in _QUANT:  # refused alike in warm-up and capture (not only once the graph is captured)
            raise ValueError("CustomAllreduce.fused_add_rms_norm: quant %r is not one of None, 'fp8_per_tensor', 'fp8_per_token'" % (quant,))
        if quant == "none":
            quant = None
        if residual is None or weight is None or not self.should_fused_add_rms_norm(inp, residual, weight):
            return None  # vLLM's signature needs both (without a residual the engine runs its own all-reduce and norm)
        torch = _torch_mod()
        if self._capturing and not torch.cuda.is_current_stream_capturing():
            if quant == "fp8_per_tensor" and scale is None:
                raise ValueError("CustomAllreduce.fused_add_rms_norm: fp8_per_tensor needs scale (a 1-element float32 tensor)")
            if quant:
                tokens = inp.numel() // inp.shape[-1]
                sc = scale if quant == "fp8_per_tensor" else torch.empty((tokens,), dtype=torch.float32, device=inp.device)
                return torch.empty(inp.shape, dtype=torch.float8_e4m3fn, device=inp.device), residual, sc
            return inp, residual
        r = all_reduce_rmsnorm(inp, residual, weight, self.ctx, eps=epsilon, out=inp, quant=quant, scale=scale)
        if quant:
            return r[1], residual, r[2]
        return inp, residual

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
        """Collective over the group when the slot owns its context (finalize); with ctx=
        local (the team stays ctx's). Idempotent."""
        self.disabled = True
        self._target = None
        if self.ctx is not None:
            ctx, self.ctx = self.ctx, None
            if self._owns_ctx:
                ctx.close()

    def __del__(self):
        """Local only: the slot stops taking tensors. A context the slot owns stays open until
        close() (collective) or the process ends: its finalize meets every rank, and the
        garbage collector drops the slot on one rank at a time (or at interpreter exit,
        after peers have gone), where a finalize would wait out its bound."""
        self.disabled = True
        self._target = None
