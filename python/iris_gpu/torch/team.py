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

from .. import _lib
from .._lib import IrisError
from .context import _CONTEXTS, _ids, _torch_mod

_KIND_FN = {"all_reduce": "iris_all_reduce_team", "all_gather": "iris_all_gather_team", "reduce_scatter": "iris_reduce_scatter_team",
            "all_to_all": "iris_all_to_all_team", "broadcast": "iris_broadcast_team"}
_MISMATCH = _lib.STATUS_NAMES.index("IRIS_ERROR_MISMATCH")


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

    def __init__(self, ctx, t, staging, split=0):
        self.ctx = ctx
        self._t = t
        self._tref = ctypes.byref(t)
        self._closed = False
        self._stage = staging if staging is not None and staging.nbytes else None
        self.rank, self.world_size = int(t.rank), int(t.size)
        self.device = ctx.device
        self._check_shapes = None  # None: the context's setting
        self._split, self._boot = split, None  # the split's number in the context (its store keys); the members' exchange, made at first use
        self.ctx_ranks = t.members()
        world = _world_ranks(ctx)
        self.ranks = [world[r] for r in self.ctx_ranks]
        self.has_collectives = t.coll >= 0 or t.size == 1 or t.slot == 0
        L = ctx._lib.lib
        self._fns = {k: getattr(L, n) for k, n in _KIND_FN.items()}
        h = ctx._handle()
        if self._stage is not None and self.has_collectives and self.world_size > 1:
            # the library stages this team's calls with buffers off the heap through the
            # split's areas (a meeting of the members, who compare them; a team without
            # collective state has none)
            ctx._lib.require_function("iris_team_set_staging")
            self._call("iris_team_set_staging", L.iris_team_set_staging(h, self._tref, self._stage.ptr_in, self._stage.ptr_out, self._stage.nbytes))
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

    @property
    def check_shapes(self):
        """As Context.check_shapes, among the team's members (their exchange goes through the
        context's store, under keys of this split and team): the context's setting unless
        set here."""
        return self.ctx.check_shapes if self._check_shapes is None else self._check_shapes

    @check_shapes.setter
    def check_shapes(self, on):
        self._check_shapes = bool(on)

    def _same_everywhere(self, what):
        """check_shapes: exchange a description of the call among the members and refuse one
        that differs (ValueError on every member, before anything is launched)."""
        if not self.check_shapes or _torch_mod().cuda.is_current_stream_capturing():
            return
        if self._boot is None:
            import torch.distributed as dist

            from .._host import StoreBootstrap

            cb = self.ctx._boot
            prefix = "team/%d/%s/" % (self._split, "-".join(str(r) for r in self.ctx_ranks))
            self._boot = StoreBootstrap(dist.PrefixStore(prefix, cb.store), self.rank, self.world_size, cb.timeout.total_seconds())
        got = self._boot.exchange(repr(what).encode())
        mine = got[self.rank]
        bad = [r for r, g in enumerate(got) if g != mine]
        if bad:
            err = ValueError("iris collective mismatch in team %s: team rank %d calls %s but team rank(s) %s call %s"
                             % (self.ranks, self.rank, mine.decode(), bad, got[bad[0]].decode()))
            err._iris_every_rank = True  # every member raises it (the public ops take no part again)
            raise err

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
    def _run(self, kind, send, recv, count, dtype, extra=None):
        """Enqueue one collective over the team on torch.cuda.current_stream(): one library
        call, which takes buffers off the heap through the split's staging areas
        (iris_team_set_staging, set at the split), in chunks, as the world's calls take
        them through the world's; a mismatched call writes no output. A team made with
        staging_bytes=0 has none: such buffers beyond the latency path are refused there
        (IRIS_ERROR_NOT_IN_HEAP, after the refusal took part in the library)."""
        torch = _torch_mod()
        if self.check_shapes:
            self._same_everywhere((kind, count, dtype, extra))
        h = self._handle()  # a count of 0 too: the library takes part
        stream = torch._C._cuda_getCurrentRawStream(self.device)
        fn = self._fns[kind]
        args = (h, self._tref, send, recv, count, dtype) + ((extra,) if extra is not None else ()) + (stream, self.ctx._optp)
        if torch._C._cuda_getDevice() != self.device:
            with torch.cuda.device(self.device):
                st = fn(*args)
        else:
            st = fn(*args)
        if st != 0:
            detail = self.ctx._lib.detail()
            if st == _lib.ERROR_NOT_IN_HEAP and self._stage is None:
                detail += " (this team has no staging areas: made with staging_bytes=0; pass heap tensors)"
            raise IrisError(st, detail, "%s (rank %d, team rank %d of %s)" % (_KIND_FN[kind], self.ctx.rank, self.rank, self.ranks))

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


def _non_member(group):
    """Whether group is what dist.new_group gives a rank outside it
    (GroupMember.NON_GROUP_MEMBER): a group this rank is not in, its members unknown here."""
    if isinstance(group, (list, tuple, range)):
        return False
    try:
        import torch.distributed as dist
    except Exception:
        return False
    return group is dist.GroupMember.NON_GROUP_MEMBER  # an int (-100) in torch, compared as group_ranks does


def split_groups(groups):
    """Context.team's argument as a list of member tuples: one group (a ProcessGroup or a
    ranks list) or a list of them (a list of ranks lists, as vLLM's group_ranks). A
    GroupMember.NON_GROUP_MEMBER stands for a group this rank is not in: left out (a rank in
    none of the groups opts out of the split; its members' own lists are checked there)."""
    if isinstance(groups, (list, tuple)) and groups and all(isinstance(g, (list, tuple, range)) for g in groups):
        return [group_ranks(g) for g in groups]
    if isinstance(groups, (list, tuple)) and groups and not all(isinstance(g, int) for g in groups):
        return [group_ranks(g) for g in groups if not _non_member(g)]  # a list of process groups
    return [] if _non_member(groups) else [group_ranks(groups)]


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
