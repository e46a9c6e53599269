"""iris_gpu.torch.context: bring-up over torch.distributed, heap tensors (Context), and the registry that ops reach contexts through."""
import ctypes
import itertools
import os
import threading
import warnings

from .. import _host, _lib, _types
from .._lib import IrisError
from .dlpack import _device_bytes


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

                from .ops import _register_ops  # here: ops imports this module

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
    if not getattr(type(ctx), "_iris_target", False):
        raise TypeError("expected an iris_gpu.torch.Context (or a Team of one), got %s" % type(ctx).__name__)
    if ctx.closed:
        raise RuntimeError("iris %s %d is closed" % ("context" if isinstance(ctx, Context) else "team", ctx.id))
    return ctx.id


class _HeapBlock:
    """One iris_malloc block, kept alive by the tensors viewing it (_device_bytes); freed
    when the last one dies.

    The free is queued, not made here: the garbage collector runs __del__ in whatever
    thread it happens to be in, possibly while another thread is inside iris_malloc or a
    collective on the same context (an iris_t is used by one host thread at a time). The
    queue is emptied, in drop order, by the next call that takes the context's handle
    (Context._handle: every allocation, collective and query), so the blocks come back
    before anything else uses the heap, as if freed at once. async_error and abort, which
    any thread may call, leave the queue alone (Context._any_thread_handle)."""

    def __init__(self, ctx, ptr):
        self.ctx, self.ptr = ctx, ptr

    def __del__(self):
        ctx = self.ctx
        if ctx is not None and not ctx.closed:
            ctx._pending_frees.append(self.ptr)  # list.append: atomic under the GIL


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

    _iris_target = True  # ops accept it (and a Team of it)

    def __init__(self, group=None, device=None, heap_size=0, store=None, timeout_ms=0, check_shapes=None):
        torch = _torch_mod()
        import torch.distributed as dist

        self.closed = True
        if check_shapes is None:  # read before anything is brought up: a malformed value leaves nothing behind
            check_shapes = _types.env_switch("IRIS_GPU_CHECK_SHAPES", False)
        self._teams, self._team_of, self._stagings, self._pending_frees = [], {}, [], []
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
        self._ranks = [int(r) for r in ranks]  # context rank i is global rank _ranks[i]
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
        if self._pending_frees:
            self._free_dropped()
        return self._h

    def _any_thread_handle(self):
        """The handle for the calls any thread may make (async_error, abort): the free
        queue is left to the thread using the context (the heap's block table has no lock)."""
        if self.closed:
            raise RuntimeError("iris context is closed")
        return self._h

    def _free_dropped(self):
        """Return the blocks whose last tensor died (_HeapBlock.__del__) to the heap, in the
        order they were dropped. Every block is handed back; then the first refusal raises
        IrisError (a block the library would not take leaves this rank's heap layout unlike
        its peers')."""
        pend = self._pending_frees
        bad = None
        while pend:
            p = pend.pop(0)
            self._live -= 1
            st = self._lib.lib.iris_free(self._h, ctypes.c_void_p(p))
            if st != 0 and bad is None:
                bad = (st, self._lib.detail())
        if bad is not None:
            raise IrisError(bad[0], bad[1], "iris_free of a dropped heap tensor's block (rank %d)" % self.rank)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Collective: finalize (waits for this rank's GPU work, meets every rank, frees the
        heap). Plans of this context still open (ag_gemm_plan, gemm_reduce_plan, moe_plan)
        are closed first, newest first (collective: every rank made them in the same order;
        a warning says how many). Drop every heap tensor first: one still alive afterwards
        points at freed memory (a warning says how many were alive). Idempotent."""
        if self.closed:
            return
        from .plans import _PLANS  # here: plans imports this module

        open_plans = sorted((p for p in list(_PLANS.values()) if p.ctx is self), key=lambda p: p.id, reverse=True)
        if open_plans:
            warnings.warn("iris Context.close(): closing %d plan(s) left open (%s)" % (len(open_plans), ", ".join(type(p).__name__ for p in open_plans)))
        first_error = None
        for p in open_plans:
            try:
                p.close()
            except Exception as e:  # the other plans and the context are still freed; the first error is raised after
                _PLANS.pop(p.id, None)
                first_error = first_error or e
        for t in list(getattr(self, "_teams", ())):  # finalize frees their slots with the heap
            t._closed = True
            _CONTEXTS.pop(t.id, None)
        self._teams, self._team_of = [], {}
        for s in getattr(self, "_stagings", ()):
            st = s.free(self)
            if st and first_error is None:
                first_error = IrisError(st, self._lib.detail(), "iris_free of a team's staging buffer (rank %d)" % self.rank)
        self._stagings = []
        alive = self._live - len(self._pending_frees)  # queued frees: dropped already (finalize frees the heap)
        if alive:
            warnings.warn("iris Context.close(): %d heap tensor(s) still alive; they must not be used any more" % alive)
        _CONTEXTS.pop(self.id, None)
        self.closed = True
        torch = _torch_mod()
        with torch.cuda.device(self.device):
            st = self._lib.lib.iris_finalize(self._h)
        self._h = None
        self._call("iris_finalize", st)
        if first_error is not None:
            raise first_error

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
        self._call("iris_get_async_error", self._lib.lib.iris_get_async_error(self._any_thread_handle()))

    def abort(self):
        """iris_abort (any thread): kernels of this context stop waiting, later calls raise
        IRIS_ERROR_ABORTED at once, close() then frees everything without meeting the
        other ranks."""
        self._call("iris_abort", self._lib.lib.iris_abort(self._any_thread_handle()))

    def set_algo(self, algo="auto", ctas=0):
        """Algorithm of the following collectives (auto, latency, bandwidth, two_shot_ll, one_shot_ll)."""
        self._opts = {} if algo == "auto" and not ctas else {"algo": _types.iris_algo(algo), "ctas": int(ctas)}
        self._opts_c = _lib.CollOptsT.init(**self._opts) if self._opts else None
        self._optp = ctypes.byref(self._opts_c) if self._opts_c is not None else None

    # -------------------------------------------------------------- teams
    def team_split(self, color, key, staging_bytes=None):
        """Collective over every rank of the context (each calls it, in the same order as its
        other team calls): MPI_Comm_split of the context's world (iris_team_split). Ranks
        of one color form a team, ordered by key, then by context rank; color
        IRIS_TEAM_NONE (-1) opts out. Returns this rank's Team, or None when it opted out.
        staging_bytes: the two heap areas the split's teams stage buffers off the heap
        through, taken on every rank until close() (None: $IRIS_TEAM_STAGING, else 16 MiB;
        0: none, and such buffers beyond the latency path raise IRIS_ERROR_NOT_IN_HEAP).
        Raises IrisError (status and the library's detail) when the split fails: on every
        rank alike (no table slot free: IRIS_ERROR_OUT_OF_MEMORY; a team across nodes:
        IRIS_ERROR_UNSUPPORTED)."""
        from .team import Team  # here: team imports this module

        torch = _torch_mod()
        L = self._lib
        L.require_struct("iris_team_t")
        L.require_function("iris_team_split")
        L.require_function("iris_all_reduce_team")
        if staging_bytes is None:
            staging_bytes = _types.parse_bytes(os.environ.get("IRIS_TEAM_STAGING", 16 << 20), "IRIS_TEAM_STAGING")

        def count_split():  # alike on every rank: names a team's store keys
            self._splits = getattr(self, "_splits", 0) + 1

        with torch.cuda.device(self.device):
            out, staging = _host.team_split(self, color, key, staging_bytes, count_split)
        if out.size == 0:
            return None
        t = Team(self, out, staging, self._splits)
        self._teams.append(t)
        return t

    def team(self, groups, staging_bytes=None):
        """Collective over every rank of the context, members or not (as dist.new_group is
        over every rank): one split making a team of each group, so later collectives may
        take group= (it.all_reduce(x, ctx, group=g)) or the Team itself. groups: one group
        or a list of disjoint ones, each a ProcessGroup or a list of global ranks (any rank;
        sorted, as new_group sorts); e.g. vLLM's group_ranks. What dist.new_group gave a
        rank outside the group (GroupMember.NON_GROUP_MEMBER) stands for a group it is not
        in: a rank in none of the groups opts out. Team rank = group rank. Every rank passes
        the same groups. Returns this rank's Team (None when it is in none of the groups);
        team_for(group) finds it later. Each call is a new split (a table slot and a
        collective state, IRIS_TEAMS_COLL of them): make each grouping once, at
        group-creation time. Groups refused on this rank (ValueError, TypeError): it still
        makes the split, opting out, so the others' split ends, then raises."""
        from .team import split_groups

        world = [int(r) for r in getattr(self, "_ranks", range(self.world_size))]
        try:
            gl = split_groups(groups)
            color, key, mine = _types.team_split_args(gl, world, world[self.rank])
        except (ValueError, TypeError):
            # groups refused on this rank only would leave the others in the split until its
            # bound: the split is collective over every rank, so take part opting out, then raise
            try:
                self.team_split(_types.TEAM_NONE, 0, staging_bytes)
            except Exception:
                pass
            raise
        t = self.team_split(color, key, staging_bytes)
        if t is not None:
            self._team_of[mine] = t
        return t

    def team_for(self, group):
        """The Team with group's members (made by team() on every rank), or this context
        when group has exactly the context's ranks. group: a ProcessGroup or a ranks list.
        RuntimeError when no team was made for it; ValueError when this rank is not in it."""
        from .team import group_ranks

        members = group_ranks(group)
        world = tuple(int(r) for r in getattr(self, "_ranks", range(self.world_size)))
        if members == world:
            return self
        t = getattr(self, "_team_of", {}).get(members)
        if t is not None and not t.closed:
            return t
        if world[self.rank] not in members:
            raise ValueError("iris: rank %d is not a member of the group %s" % (world[self.rank], list(members)))
        raise RuntimeError("iris: no team for the group %s in this context: make it once on every rank of the context, members or not, "
                           "with ctx.team(ranks_lists) or it.new_group(ranks, ctx) (a split is collective over the whole context)" % (list(members),))

    def _forget_team(self, t):
        if t in self._teams:
            self._teams.remove(t)
        for k in [k for k, v in self._team_of.items() if v is t]:
            del self._team_of[k]

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
            err = ValueError("iris collective mismatch: rank %d calls %s but rank(s) %s call %s" % (self.rank, mine.decode(), bad, got[bad[0]].decode()))
            err._iris_every_rank = True  # every rank raises it (the public ops take no part again)
            raise err

    def _run(self, kind, send_ptr, recv_ptr, count, dtype, extra=None):
        """Enqueue one collective on torch.cuda.current_stream(); extra: op or root.
        Kept lean: it is most of what an eager call costs on the host."""
        torch = _torch_mod()
        if self.check_shapes:
            self._same_everywhere((kind, count, dtype, extra))
        fn = self._coll_fns[kind]  # a count of 0 too: the library takes part (one device barrier)
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
        with torch.cuda.device(self.device):  # the kernel launches into this device's stream whatever device is current
            st = self._lib.lib.iris_barrier_device(self._handle(), stream)
        self._call("iris_barrier_device", st)

    def ag_gemm_plan(self, M, N, K, dtype=None, out_dtype=None, layout="rows", b_transposed=False, bias=False, path="auto", stage_a=True):
        """Collective, outside graph capture: a plan for C = all_gather(A) @ B (+ bias);
        see AgGemm."""
        from .plans import AgGemm  # here: plans imports this module

        return AgGemm(self, M, N, K, dtype, out_dtype, layout, b_transposed, bias, path, stage_a)

    def gemm_reduce_plan(self, op, M, N, K, dtype=None, out_dtype=None, b_transposed=False, bias=False, path="auto", exact=False):
        """Collective, outside graph capture: a plan for C = sum over ranks of A_r @ B_r
        (+ bias), op "reduce_scatter" (this rank gets its M/W rows) or "all_reduce" (all M
        rows); see GemmReduce."""
        from .plans import GemmReduce  # here: plans imports this module

        return GemmReduce(self, op, M, N, K, dtype, out_dtype, b_transposed, bias, path, exact)

    def moe_plan(self, max_tokens, hidden, top_k, num_experts, mode="low_latency", dispatch_dtype=None, num_sms=0, max_recv_rows=0):
        """Collective, outside graph capture: expert-parallel dispatch / combine buffers for
        up to max_tokens tokens per rank; see Moe."""
        from .plans import Moe  # here: plans imports this module

        return Moe(self, max_tokens, hidden, top_k, num_experts, mode, dispatch_dtype, num_sms, max_recv_rows)
