"""iris_gpu.torch.team: teams of a Context (iris_team_t), the form a torch.distributed
subgroup takes in iris: the same members on the context's one heap, no second heap or
rendezvous. docs/teams.md, section "torch".

    ctx = it.Context()                                   # every rank
    ctx.team([[0, 1], [2, 3]])                           # every rank of ctx: one split, a team per group
    tp = dist.new_group([0, 1]) ...                      # (the torch groups, made as usual)
    it.all_reduce(x, ctx, group=tp)                      # the team with tp's members
    it.all_reduce(x, ctx.team_for(tp))                   # the same: a Team stands where a Context does
    ca = it.CustomAllreduce(tp_cpu_group, dev, ctx=ctx)  # the serving slot on the TP team

A split is collective over every rank of the context, members or not (as torch's
new_group is collective over every rank): ranks outside every group opt out
(IRIS_TEAM_NONE) and still make the call. Team rank = group rank (the position in
dist.get_process_group_ranks(group); rank lists are sorted first, as new_group does).
"""
import ctypes

from .. import _lib, _types
from .._lib import IrisError
from .context import _CONTEXTS, _ids, _torch_mod
from .dlpack import _device_bytes

_KIND_FN = {"all_reduce": "iris_all_reduce_team", "all_gather": "iris_all_gather_team", "reduce_scatter": "iris_reduce_scatter_team",
            "all_to_all": "iris_all_to_all_team", "broadcast": "iris_broadcast_team"}
_MISMATCH = _lib.STATUS_NAMES.index("IRIS_ERROR_MISMATCH")
_CODE_SIZE = {code: _types.ITEMSIZE[name] for name, code in _types.DTYPES.items()}


class _Staging:
    """Two heap areas (in, out) of `nbytes` each that a split's teams stage buffers off the
    heap through (the library stages only the world's). Every rank of the context allocates
    them at the split, in the same order, so they lie at the same heap offset everywhere;
    they stay until the context closes (a team's close meets only its members, and the heap
    must stay alike on every rank). One split's teams are disjoint: one pair serves them all."""

    def __init__(self, ctx, nbytes):
        self.nbytes = int(nbytes)
        self.ptr_in = self.ptr_out = None
        self.t_in = self.t_out = None
        if not self.nbytes:
            return
        torch = _torch_mod()
        L, h = ctx._lib.lib, ctx._handle()
        ptrs = []
        for _ in range(2):
            p = ctypes.c_void_p()
            st = L.iris_malloc(h, self.nbytes, ctypes.byref(p))
            if st != 0:
                detail = ctx._lib.detail()
                for q in ptrs:
                    L.iris_free(h, ctypes.c_void_p(q))
                raise IrisError(st, "%s (a team split's staging areas: 2 x %d bytes; pass staging_bytes=0 or set IRIS_TEAM_STAGING to take fewer)" % (detail, self.nbytes),
                                "Context.team_split (rank %d)" % ctx.rank)
            ptrs.append(p.value)
        self.ptr_in, self.ptr_out = ptrs
        self.t_in = _device_bytes(torch, self.ptr_in, self.nbytes, ctx.device, ctx)
        self.t_out = _device_bytes(torch, self.ptr_out, self.nbytes, ctx.device, ctx)

    def free(self, ctx):
        """Every rank, in the same order (the context's close does it): back to the heap."""
        self.t_in = self.t_out = None
        bad = 0
        if self.ptr_in is not None and ctx._h is not None:
            for p in (self.ptr_in, self.ptr_out):
                st = ctx._lib.lib.iris_free(ctx._h, ctypes.c_void_p(p))
                bad = bad or st
        self.ptr_in = self.ptr_out = None
        return bad  # 0, or the first refusal's status (the caller raises it)


class Team:
    """A team of a Context: this rank's group of one split. Stands wherever the collective
    functions take a Context (it.all_reduce(x, team), it.barrier(team), CustomAllreduce):
    world_size is the team's size, rank this rank's team rank, and every collective is
    collective over the team's members only. Made by Context.team / Context.team_split
    (collective over every rank of the context), never directly.

    ranks: the members' global ranks (torch.distributed's), in team order; ctx_ranks: the
    same as ranks of the context. has_collectives: False when the split found no
    collective state free (IRIS_TEAMS_COLL, default 2): its collectives then raise
    IrisError IRIS_ERROR_UNSUPPORTED (the device API still works: device_team)."""

    _iris_target = True  # ops accept it where they accept a Context

    def __init__(self, ctx, t, staging):
        self.ctx = ctx
        self._t = t
        self._tref = ctypes.byref(t)
        self._closed = False
        self._stage = staging if staging is not None and staging.nbytes else None
        self._stage_calls = set()  # (kind, count, dtype, in heap, in place) the library refused off the heap
        self._stage_last = None  # (stream, event after the last staged call): eager order across streams
        self.rank, self.world_size = int(t.rank), int(t.size)
        self.device = ctx.device
        self.check_shapes = False
        self.ctx_ranks = t.members()
        world = _world_ranks(ctx)
        self.ranks = [world[r] for r in self.ctx_ranks]
        self.has_collectives = t.coll >= 0 or t.size == 1 or t.slot == 0
        L = ctx._lib.lib
        self._fns = {k: getattr(L, n) for k, n in _KIND_FN.items()}
        h = ctx._handle()
        self._heap_lo = L.iris_heap_base(h, ctx.rank) or 0
        self._heap_hi = self._heap_lo + L.iris_heap_size(h)
        self.id = next(_ids)
        _CONTEXTS[self.id] = self

    def __repr__(self):
        return "<iris Team rank %d of %d, members %s%s>" % (self.rank, self.world_size, self.ranks, ", closed" if self.closed else "")

    @property
    def size(self):
        return self.world_size

    @property
    def closed(self):
        return self._closed or self.ctx.closed

    def _handle(self):
        if self.closed:
            raise RuntimeError("iris team %s is closed" % (self.ranks,))
        return self.ctx._handle()

    def _call(self, call, status):
        if status != 0:
            raise IrisError(status, self.ctx._lib.detail(), "%s (rank %d, team rank %d of %s)" % (call, self.ctx.rank, self.rank, self.ranks))

    def device_team(self):
        """The iris_team_t (ctypes) to pass to kernels of your own by value, with the
        context's device_context(). Valid until close()."""
        self._handle()
        return self._t

    # -------------------------------------------------------------- collectives (raw)
    def _in_heap(self, ptr, nbytes):
        return self._heap_lo <= ptr and ptr + nbytes <= self._heap_hi

    def _enqueue(self, kind, h, send, recv, count, dtype, extra, stream):
        fn = self._fns[kind]
        if extra is None:
            return fn(h, self._tref, send, recv, count, dtype, stream, self.ctx._optp)
        return fn(h, self._tref, send, recv, count, dtype, extra, stream, self.ctx._optp)

    def _run(self, kind, send, recv, count, dtype, extra=None):
        """Enqueue one collective over the team on torch.cuda.current_stream(). Buffers off
        the heap that the library refuses on the team's bandwidth path (it stages only the
        world's) go through the split's staging areas, in chunks; the chunks depend only on
        the call's arguments, so every member makes the same calls. The first such call of
        a kind is refused on every member alike and takes part in the library (the members
        meet in it), so the retry through staging stays in step on every member."""
        torch = _torch_mod()
        if count == 0:
            return
        h = self._handle()
        stream = torch._C._cuda_getCurrentRawStream(self.device)
        if torch._C._cuda_getDevice() != self.device:
            with torch.cuda.device(self.device):
                self._run_on(kind, h, send, recv, count, dtype, extra, stream)
        else:
            self._run_on(kind, h, send, recv, count, dtype, extra, stream)

    def _run_on(self, kind, h, send, recv, count, dtype, extra, stream):
        es = _CODE_SIZE.get(dtype, 1)
        W = self.world_size
        in_b = count * es * (W if kind in ("reduce_scatter", "all_to_all") else 1)
        out_b = count * es * (W if kind in ("all_gather", "all_to_all") else 1)
        key = (kind, count, dtype, self._in_heap(send, in_b) and self._in_heap(recv, out_b), send == recv)
        if key not in self._stage_calls:
            st = self._enqueue(kind, h, send, recv, count, dtype, extra, stream)
            if st == 0:
                return
            if st != _lib.ERROR_NOT_IN_HEAP or self._stage is None:
                detail = self.ctx._lib.detail()
                if st == _lib.ERROR_NOT_IN_HEAP:
                    detail += " (this team has no staging areas: made with staging_bytes=0; pass heap tensors)"
                raise IrisError(st, detail, "%s (rank %d, team rank %d of %s)" % (_KIND_FN[kind], self.ctx.rank, self.rank, self.ranks))
            self._stage_calls.add(key)
        self._staged(kind, h, send, recv, count, dtype, extra, stream, es)

    def _staged(self, kind, h, send, recv, count, dtype, extra, stream, es):
        torch = _torch_mod()
        W, S = self.world_size, self._stage
        plan = _types.staging_plan(kind, count, es, W, S.nbytes)
        # the staging areas are the split's: a staged call on another stream than the last
        # waits for it (eager; inside one capture keep a team's staged calls on one stream)
        capturing = torch.cuda.is_current_stream_capturing()
        if not capturing and self._stage_last is not None and self._stage_last[0] != stream:
            torch.cuda.current_stream(self.device).wait_event(self._stage_last[1])
        chunked_in, chunked_out = plan[0][2][0] > 1, plan[0][3][0] > 1
        src = _device_bytes(torch, send, count * es * (W if chunked_in else 1), self.device, None)
        dst = _device_bytes(torch, recv, count * es * (W if chunked_out else 1), self.device, None)
        for c0, n, cin, cout in plan:
            _copy_rows(S.t_in, 0, src, cin[1], cin[0], cin[2], cin[3], to_area=True)
            st = self._enqueue(kind, h, S.ptr_in, S.ptr_out, n, dtype, extra, stream)
            if st != 0:
                self._call("%s (staged, elements %d..%d of %d)" % (_KIND_FN[kind], c0, c0 + n, count), st)
            _copy_rows(S.t_out, 0, dst, cout[1], cout[0], cout[2], cout[3], to_area=False)
        if not capturing:
            ev = self._stage_last[1] if self._stage_last is not None else torch.cuda.Event()
            ev.record(torch.cuda.current_stream(self.device))
            self._stage_last = (stream, ev)

    def _barrier_device(self):
        torch = _torch_mod()
        stream = ctypes.c_void_p(torch.cuda.current_stream(self.device).cuda_stream)
        with torch.cuda.device(self.device):  # the kernel launches into this device's stream whatever device is current
            st = self.ctx._lib.lib.iris_barrier_device_team(self._handle(), self._tref, stream)
        self._call("iris_barrier_device_team", st)

    # -------------------------------------------------------------- checks, close
    def check(self):
        """iris_team_check (synchronous): IrisError for a fatal fault of the team's
        collectives (naming the world rank waited for) or a mismatch among its members
        (then cleared; other teams and the world are left alone)."""
        self._call("iris_team_check", self.ctx._lib.lib.iris_team_check(self._handle(), self._tref))

    def close(self):
        """Collective over the team's members: iris_team_destroy (waits for this rank's GPU,
        meets the members, frees the team's slot and collective state). The split's
        staging areas stay until the context closes. Idempotent; a no-op once the context
        is closed. Members in different team calls (IRIS_ERROR_MISMATCH): the team stays
        open, to be closed again in step."""
        if self._closed:
            return
        ctx = self.ctx
        st = 0
        if not ctx.closed:
            torch = _torch_mod()
            with torch.cuda.device(self.device):
                st = ctx._lib.lib.iris_team_destroy(ctx._handle(), self._tref)
            if st == _MISMATCH:  # every member met, in different calls: the team is still alive
                raise IrisError(st, ctx._lib.detail(), "iris_team_destroy (rank %d, team %s)" % (ctx.rank, self.ranks))
        self._closed = True
        _CONTEXTS.pop(self.id, None)
        ctx._forget_team(self)
        if st != 0:
            raise IrisError(st, ctx._lib.detail(), "iris_team_destroy (rank %d, team %s)" % (ctx.rank, self.ranks))


def _copy_rows(area, area_off, user, user_off, rows, user_pitch, row_bytes, to_area):
    """rows rows of row_bytes between a staging area (packed from area_off) and a user
    buffer (row r at user_off + r * user_pitch), both 1-D uint8 tensors; on the current
    stream. to_area: user -> area, else area -> user."""
    a = area.as_strided((rows, row_bytes), (row_bytes, 1), area.storage_offset() + area_off)
    u = user.as_strided((rows, row_bytes), (user_pitch, 1), user.storage_offset() + user_off)
    if to_area:
        a.copy_(u)
    else:
        u.copy_(a)


def _world_ranks(ctx):
    """The context's world as global ranks (context rank i at index i)."""
    r = getattr(ctx, "_ranks", None)
    return list(r) if r is not None else list(range(ctx.world_size))


def group_ranks(group):
    """A group's members in group-rank order: a ProcessGroup (dist.get_process_group_ranks),
    or a sequence of global ranks (sorted, as dist.new_group sorts them)."""
    if isinstance(group, (list, tuple, range)):
        return tuple(sorted(int(r) for r in group))
    import torch.distributed as dist

    if group is dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("this rank is not a member of the group (dist.new_group gave it GroupMember.NON_GROUP_MEMBER): "
                         "pass the ranks list given to new_group instead, which every rank knows")
    return tuple(dist.get_process_group_ranks(group))


def split_groups(groups):
    """Context.team's argument as a list of member tuples: one group (a ProcessGroup or a
    ranks list) or a list of them (a list of ranks lists, as vLLM's group_ranks)."""
    if isinstance(groups, (list, tuple)) and groups and all(isinstance(g, (list, tuple, range)) for g in groups):
        return [group_ranks(g) for g in groups]
    if isinstance(groups, (list, tuple)) and groups and not all(isinstance(g, int) for g in groups):
        return [group_ranks(g) for g in groups]  # a list of process groups
    return [group_ranks(groups)]


def team_split(ctx, color, key, staging_bytes=None):
    """Context.team_split: MPI_Comm_split of ctx's world, collective over every rank of ctx;
    this rank's Team, or None for a rank that passed IRIS_TEAM_NONE (-1)."""
    return ctx.team_split(color, key, staging_bytes)


def new_group(ranks, ctx, **kwargs):
    """dist.new_group(ranks, **kwargs), then ctx.team(ranks): every rank calls it, as it
    calls new_group, members or not. Returns the group (GroupMember.NON_GROUP_MEMBER on the
    others, as new_group does); the collectives then take group=."""
    import torch.distributed as dist

    g = dist.new_group(ranks, **kwargs)
    ctx.team([list(ranks)])
    return g


def new_subgroups_by_enumeration(ranks_per_subgroup_list, ctx, **kwargs):
    """dist.new_subgroups_by_enumeration(...), then one split with a team per subgroup
    (ctx.team): every rank calls it. Returns what torch's returns (this rank's subgroup,
    every subgroup)."""
    import torch.distributed as dist

    cur, subs = dist.new_subgroups_by_enumeration(ranks_per_subgroup_list, **kwargs)
    ctx.team([list(r) for r in ranks_per_subgroup_list])
    return cur, subs
