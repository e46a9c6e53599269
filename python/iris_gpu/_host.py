"""Bring-up over a key-value store (iris's mode 2), shared by the torch and JAX modules.
Pure Python over ctypes: no torch, no jax."""
import ctypes
import datetime
import os

from . import _lib
from ._lib import IrisError


class StoreBootstrap:
    """iris_bootstrap_t over a key-value store: a torch.distributed Store, or anything with
    set(key, bytes), wait(keys, timedelta), get(key) -> bytes and delete_key(key).
    allgather: every rank sets <seq>/<rank>, then gets every rank's key (waiting at most
    `timeout`); once it has read all of them every rank has finished
    <seq - 1>, so it deletes its own key of <seq - 1>. barrier: a 1-byte allgather."""

    def __init__(self, store, rank, world, timeout_s=60.0):
        self.store, self.rank, self.world = store, rank, world
        self.timeout = datetime.timedelta(seconds=timeout_s)  # each exchange's wait
        self.seq = 0
        self.error = None  # the last exception a callback caught (for the error message)
        self._ag = _lib.ALLGATHER_FN(self._allgather)
        self._bar = _lib.BARRIER_FN(self._barrier)
        self.struct = _lib.BootstrapT(None, ctypes.cast(self._ag, ctypes.c_void_p), ctypes.cast(self._bar, ctypes.c_void_p))

    def exchange(self, data):
        self.seq += 1
        self.store.set("%d/%d" % (self.seq, self.rank), data)
        keys = ["%d/%d" % (self.seq, r) for r in range(self.world)]
        self.store.wait(keys, self.timeout)  # raises naming the timeout; the callback reports it
        out = [self.store.get(k) for k in keys]
        if self.seq > 1:
            try:
                self.store.delete_key("%d/%d" % (self.seq - 1, self.rank))
            except Exception:  # stores without delete_key keep the (small) keys
                pass
        return out

    def _allgather(self, user, send, recv, nbytes):
        try:
            parts = self.exchange(ctypes.string_at(send, nbytes) if nbytes else b"")
            for r, p in enumerate(parts):
                if len(p) != nbytes:
                    raise RuntimeError("rank %d sent %d bytes, rank %d expected %d" % (r, len(p), self.rank, nbytes))
                if nbytes:
                    ctypes.memmove(recv + r * nbytes, p, nbytes)
            return 0
        except BaseException as e:  # never let an exception cross into C
            self.error = e
            return 1

    def _barrier(self, user):
        try:
            self.exchange(b"b")
            return 0
        except BaseException as e:
            self.error = e
            return 1


def bring_up(lib, rank, world, device, heap_size, timeout_ms, boot):
    """iris_init in mode 2 over boot (a StoreBootstrap), then iris_collectives_setup, so
    graphs can be captured right away. Returns the iris_t handle (c_void_p). After it the
    store waits use IRIS_BARRIER_TIMEOUT_MS (default 600 s): host barriers and finalize."""
    cfg = _lib.ConfigT.init()
    cfg.rank, cfg.world_size, cfg.device = rank, world, device
    cfg.heap_size, cfg.timeout_ms = int(heap_size), int(timeout_ms)
    cfg.bootstrap = ctypes.pointer(boot.struct)
    boot.cfg = cfg  # iris keeps cfg.bootstrap until finalize
    h = ctypes.c_void_p()
    st = lib.lib.iris_init(ctypes.byref(cfg), ctypes.byref(h))
    if st != 0:
        detail = lib.detail()
        if boot.error is not None:
            detail += " (store: %r)" % (boot.error,)
        raise IrisError(st, detail, "iris_init (rank %d of %d, device %d)" % (rank, world, device))
    st = lib.lib.iris_collectives_setup(h)
    if st != 0:
        detail = lib.detail()
        lib.lib.iris_finalize(h)
        raise IrisError(st, detail, "iris_collectives_setup (rank %d)" % rank)
    # iris_init has refused a malformed value (digits only, docs/options.md): no second, looser parse
    boot.timeout = datetime.timedelta(milliseconds=int(os.environ.get("IRIS_BARRIER_TIMEOUT_MS", 600000)))
    return h


STAGING_MIN = 2048  # IRIS_COLL_STAGING_MIN (internal/coll/plan.h): the least a staging area may hold


class TeamStaging:
    """Two heap areas (in, out) of `nbytes` each (at least STAGING_MIN; 0: none) through
    which the library stages a split's team calls with buffers off the heap, as it stages
    the world's through its own (iris_team_set_staging: chunks whose signatures name their
    place in the call, the copy into the output only where every member matched). Every
    rank of the context allocates them at the split, in the same order, so they lie at the
    same heap offset everywhere; they stay until the context closes (a team's close meets
    only its members, and the heap must stay alike on every rank). One split's teams are
    disjoint: one pair serves them all. ctx: the torch or JAX Context (_lib, _handle(),
    _h, rank)."""

    def __init__(self, ctx, nbytes):
        self.nbytes = int(nbytes)
        if 0 < self.nbytes < STAGING_MIN:
            self.nbytes = STAGING_MIN
        self.ptr_in = self.ptr_out = None
        if not self.nbytes:
            return
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
                                "a team split (rank %d)" % ctx.rank)
            ptrs.append(p.value)
        self.ptr_in, self.ptr_out = ptrs

    def free(self, ctx):
        """Every rank, in the same order (the context's close does it): back to the heap."""
        bad = 0
        if self.ptr_in is not None and ctx._h is not None:
            for p in (self.ptr_in, self.ptr_out):
                st = ctx._lib.lib.iris_free(ctx._h, ctypes.c_void_p(p))
                bad = bad or st
        self.ptr_in = self.ptr_out = None
        return bad  # 0, or the first refusal's status (the caller raises it)


def team_split(ctx, color, key, staging_bytes, before_split=None):
    """Collective over every rank of ctx (the torch or JAX Context: _lib, _handle(), rank,
    _stagings): the split's staging areas (TeamStaging, on every rank before the split, so
    the heap stays alike), then iris_team_split of the world by (color, key); before_split()
    runs between the two. Areas that were taken stay in ctx._stagings; a failed split
    gives them back and raises IrisError. Returns (the split's iris_team_t, its staging):
    size 0 where this rank opted out."""
    L, h = ctx._lib, ctx._handle()
    world, out = _lib.TeamT(), _lib.TeamT()
    L.check(L.lib.iris_team_get(h, _lib.TEAM_WORLD, ctypes.byref(world)), "iris_team_get (rank %d)" % ctx.rank)
    staging = TeamStaging(ctx, staging_bytes)
    if before_split is not None:
        before_split()
    st = L.lib.iris_team_split(h, ctypes.byref(world), int(color), int(key), ctypes.byref(out))
    if st != 0:
        detail = L.detail()
        staging.free(ctx)
        raise IrisError(st, detail, "iris_team_split (rank %d, color %d, key %d)" % (ctx.rank, color, key))
    if staging.nbytes:
        ctx._stagings.append(staging)
    return out, staging
