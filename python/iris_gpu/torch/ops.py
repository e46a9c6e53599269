"""iris_gpu.torch.ops: the collectives and plan runs as torch.library custom ops (namespace "iris"), their fake (meta) kernels, and the Python functions users call."""
import os
import warnings

from .. import _lib, _types
from .context import Context, _ctx, _ctx_id, _torch_mod
from .plans import AgGemm, GemmReduce, Moe, _plan, _scale_args


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
        _types.check_overlap(kind, send, x.numel() * es, recv, out.numel() * es, ctx.rank * count * es)
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
    elif kind == "all_to_all":  # the functional op: its output is x's shape, which must divide as the real call checks
        _types.coll_count(kind, x.numel(), x.numel(), ctx.world_size)


def _register_ops(torch):
    """Define iris::<kind>, iris::<kind>_inplace and iris::<kind>_out for each
    collective, iris::barrier and iris::ag_gemm, with fake implementations."""
    # read before any op is defined: a malformed value then leaves nothing half-registered
    # (torch refuses a second definition of an op, so a later call could not register them)
    ordered = _types.env_switch("IRIS_GPU_COMPILE_ORDERED", True)
    for kind, extra in _KINDS.items():
        def make(kind):
            # a refusal takes part first (_in_step), as in the public functions: the ops
            # may be called directly (torch.ops.iris.*, inductor's code)
            def functional(x, ctx, *extra):
                ctx_o = _ctx(ctx)
                out = torch.empty(_out_shape(kind, tuple(x.shape), ctx_o.world_size), dtype=x.dtype, device=x.device)
                try:
                    _launch(kind, x, out, ctx, extra[0] if extra else None)
                except (ValueError, TypeError) as e:
                    _in_step(e, kind, x, ctx, *extra)
                    raise
                return out

            def functional_fake(x, ctx, *extra):
                _fake_check(kind, x, None, ctx, extra[0] if extra else None)
                return x.new_empty(_out_shape(kind, tuple(x.shape), _ctx(ctx).world_size))

            def inplace(x, ctx, *extra):
                try:
                    _launch(kind, x, None, ctx, extra[0] if extra else None, inplace=True)
                except (ValueError, TypeError) as e:
                    _in_step(e, kind, x, ctx, *extra, inplace=True)
                    raise

            def inplace_fake(x, ctx, *extra):
                _fake_check(kind, x, None, ctx, extra[0] if extra else None, inplace=True)

            def out_(x, out, ctx, *extra):
                try:
                    _launch(kind, x, out, ctx, extra[0] if extra else None)
                except (ValueError, TypeError) as e:
                    _in_step(e, kind, x, ctx, *extra)
                    raise

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

    # A GEMM plan run (ag_gemm, gemm_reduce[_out]) refused here (an argument that does not
    # fit the plan) still takes part first, as a refused C run does: one run the library
    # refuses (NULL buffers, plan.refused_run), which touches no buffer, and the peers' run
    # of that call ends with IRIS_ERROR_MISMATCH naming this rank instead of waiting (the
    # MoE ops take part the same way, Moe._refuse).
    def ag_gemm(a, b, bias, a_scale, b_scale, plan):
        g = _plan(plan, AgGemm)
        try:
            c = torch.empty(g.c_shape, dtype=g.out_dtype, device=a.device)
            g.run(a, b, bias, c, a_scale, b_scale)
        except (ValueError, TypeError) as e:
            _take_part(e, None, g.refused_run)
            raise
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
        g = _plan(plan, GemmReduce)
        try:
            return g.run(a, b, bias, a_scale, b_scale)
        except (ValueError, TypeError) as e:
            _take_part(e, None, g.refused_run)
            raise

    def gemm_reduce_fake(a, b, bias, a_scale, b_scale, plan):
        g = _plan(plan, GemmReduce)
        g.check_args(a, b, bias, a_scale, b_scale, None, contiguous=False)
        return a.new_empty(g.c_shape, dtype=g.out_dtype)

    def gemm_reduce_out(a, b, bias, a_scale, b_scale, out, plan):
        g = _plan(plan, GemmReduce)
        try:
            g.run(a, b, bias, a_scale, b_scale, out)
        except (ValueError, TypeError) as e:
            _take_part(e, None, g.refused_run)
            raise

    def gemm_reduce_out_fake(a, b, bias, a_scale, b_scale, out, plan):
        _plan(plan, GemmReduce).check_args(a, b, bias, a_scale, b_scale, out, contiguous=False)

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
    # all-reduce + residual add + RMSNorm (+ fp8): residual, out (x in place), out_fp8 and
    # the per-token scales are written; a per-tensor scale is only read
    def rmsnorm_out(x, residual, weight, out, out_fp8, scale, eps, quant, algo, ctx):
        try:
            _rmsnorm_launch(x, residual, weight, out, out_fp8, scale, eps, quant, algo, ctx)
        except (ValueError, TypeError) as e:  # takes part first, as all_reduce_rmsnorm does
            _take_part(e, lambda: _rmsnorm_take_part(x, eps, quant, algo, ctx))
            raise

    def rmsnorm_out_fake(x, residual, weight, out, out_fp8, scale, eps, quant, algo, ctx):
        _rmsnorm_check(x, residual, weight, out, out_fp8, scale, quant, _ctx(ctx), fake=True)

    def rmsnorm_inplace(x, residual, weight, out_fp8, scale, eps, quant, algo, ctx):
        try:
            _rmsnorm_launch(x, residual, weight, x, out_fp8, scale, eps, quant, algo, ctx)
        except (ValueError, TypeError) as e:
            _take_part(e, lambda: _rmsnorm_take_part(x, eps, quant, algo, ctx))
            raise

    def rmsnorm_inplace_fake(x, residual, weight, out_fp8, scale, eps, quant, algo, ctx):
        _rmsnorm_check(x, residual, weight, x, out_fp8, scale, quant, _ctx(ctx), fake=True)

    _IMPLS.update(all_reduce_rmsnorm_out=rmsnorm_out, all_reduce_rmsnorm_inplace=rmsnorm_inplace)
    tail = "Tensor(c!)? out_fp8, Tensor(d!)? scale, float eps, int quant, int algo, int ctx) -> ()"
    op = torch.library.custom_op("iris::all_reduce_rmsnorm_out", rmsnorm_out, mutates_args=("residual", "out", "out_fp8", "scale"),
                                 schema="(Tensor x, Tensor(a!) residual, Tensor weight, Tensor(b!) out, " + tail)
    op.register_fake(rmsnorm_out_fake)
    op = torch.library.custom_op("iris::all_reduce_rmsnorm_inplace", rmsnorm_inplace, mutates_args=("x", "residual", "out_fp8", "scale"),
                                 schema="(Tensor(a!) x, Tensor(b!) residual, Tensor weight, " + tail)
    op.register_fake(rmsnorm_inplace_fake)
    _keep_program_order(torch, ordered, [k + suffix for k in _KINDS for suffix in ("", "_inplace", "_out")] +
                        ["barrier", "ag_gemm", "gemm_reduce", "gemm_reduce_out", "moe_dispatch", "moe_combine", "moe_combine_out",
                         "all_reduce_rmsnorm_out", "all_reduce_rmsnorm_inplace"])


def _keep_program_order(torch, ordered, names):
    """Mark every iris op as an ordered side effect, so torch.compile keeps them in program
    order (a barrier stays between the collectives around it; every rank runs the same
    sequence). Without the (private) effects API a warning says the order is not pinned;
    ordered False (IRIS_GPU_COMPILE_ORDERED=0) leaves the ops unordered (for a torch that
    cannot compile ordered mutable ops)."""
    if not ordered:
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
    implementation directly, with the same checks and the version counters of the mutated
    tensors bumped as the dispatcher would. IRIS_GPU_DISPATCH=1 always takes the dispatcher."""
    torch = _torch_mod()
    if _DIRECT and _plain_eager(torch, args):
        r = _IMPLS[name](*args)
        mutated = args[0] if name.endswith("_inplace") else args[_OUT_ARG.get(name, 1)] if name.endswith("_out") else None
        if mutated is not None:
            torch.autograd.graph.increment_version(mutated)
        for i in _MUTATED.get(name, ()):
            torch.autograd.graph.increment_version(args[i])
        return r
    return getattr(torch.ops.iris, name)(*args)


_DIRECT = not _types.env_switch("IRIS_GPU_DISPATCH", False)
_OUT_ARG = {"gemm_reduce_out": 5, "all_reduce_rmsnorm_out": 3}  # where an _out op's mutated tensor is, when not args[1]
_MUTATED = {"moe_dispatch": (3, 4, 5, 6, 7)}  # the mutated tensors of the other ops (dispatch: its receive buffers, as mutates_args says)


def _take_part(err, launch, refused=None):
    """Called with an argument error (ValueError / TypeError) a collective raised in Python
    before its library call (in a registered op's implementation or a public function): on
    this rank only, the peers would wait for that call until their bound runs out
    (IRIS_WAIT_TIMEOUT_MS, 10 minutes by default, then a fatal fault), and a rank that caught
    the error and went on would pair its later calls with their earlier ones (the call
    headers match by call number and signature). So a real call (plain eager, not
    capturing) still takes part: launch() makes the same collective of x (a contiguous copy)
    into scratch buffers, when x itself is usable. Where the peers made the same call they
    get this rank's x, as they would have; where they did not, the library sees the mismatch
    on every rank and moves nothing (every rank's check() reports it). Where x itself is
    unusable (its type, device, a count that does not divide: launch() raises before the
    library), refused() takes part instead with a call the library refuses (NULL buffers:
    its one refused-call launch, which a real call of the peers mismatches at once; with
    check_shapes its exchange differs from the peers' and every rank raises). Then the
    error is raised, saying so. A refusal every rank made alike (check_shapes' exchange)
    returns, and the caller re-raises it as it is. Once per error: the public functions
    reach the ops' implementations (which call this first) and call it again for what comes
    out, so an error this has seen is marked (_iris_took_part) and returns at once (a launch
    that failed may have met the peers already: it is not tried twice). Used from except
    clauses only: the calls that pass cost nothing for it."""
    if getattr(err, "_iris_every_rank", False) or getattr(err, "_iris_took_part", False):
        return
    torch = _torch_mod()
    try:
        if torch.compiler.is_compiling() or torch.utils._python_dispatch._get_current_dispatch_mode() is not None:
            return
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            return  # nothing runs at capture: no peer waits
        err._iris_took_part = True  # seen: not tried again, whatever launch() does
    except Exception:
        return
    how = None
    try:
        if launch is None:  # no stand-in call: the refused one only
            raise TypeError("no stand-in")
        launch()
        how = "input"
    except Exception as e:  # x itself is unusable (or the library had the call, or the context is gone)
        if refused is not None and not isinstance(e, _lib.IrisError) and not getattr(e, "_iris_every_rank", False):
            try:
                how = "refused" if refused() else None
            except Exception:  # check_shapes' exchange found the peers in a real call (every rank raises), or the context is gone
                how = None
    if how is None:
        return
    note = (" (the call took part with this rank's input into scratch buffers, so every rank's calls stay paired)" if how == "input" else
            " (the call took part as a call the library refuses, so every rank's calls stay paired: the peers' call reports a mismatch)")
    try:
        e2 = type(err)(str(err) + note)
    except Exception:
        return
    e2._iris_took_part = True
    raise e2 from None


def _in_step(err, kind, x, cid, extra=None, inplace=False):
    """_take_part for a collective of x on context id cid (see there)."""

    def launch():
        torch = _torch_mod()
        if not isinstance(x, torch.Tensor) or type(x) is not torch.Tensor:
            raise TypeError("not a plain tensor")
        W = _ctx(cid).world_size
        xc = x.contiguous()
        if inplace:
            _launch(kind, xc.clone(), None, cid, extra, inplace=True)
            return
        n = xc.numel()
        if kind == "all_gather":
            m = n * W
        elif kind == "reduce_scatter":
            if n % W:
                raise ValueError("no count")
            m = n // W
        else:
            m = n
        _launch(kind, xc, torch.empty((m,), dtype=x.dtype, device=x.device), cid, extra)

    def refused():
        """One call the library refuses (NULL buffers, 1 float32): it takes part (an input
        without elements too: the peers' call of none takes part in the library as well)."""
        try:
            _ctx(cid)._run(kind, None, None, 1, 0, 0 if kind in ("all_reduce", "reduce_scatter", "broadcast") else None)
        except _lib.IrisError:
            pass  # refused, as it must be, after its refused-call launch
        return True

    _take_part(err, launch, refused)


def _contiguous(kind, x, out=None):
    """The public functions refuse non-contiguous tensors (ValueError naming them)."""
    _types.check_contiguous(x, kind + ": input")
    if out is not None:
        _types.check_contiguous(out, kind + ": output")


def _target_id(ctx, group):
    """The op's context id: ctx's (a Context or a Team), or with group= (a ProcessGroup or
    a ranks list) the id of ctx's team with the group's members (Context.team_for)."""
    if group is None:
        return _ctx_id(ctx)
    if not isinstance(ctx, Context):
        raise TypeError("group= needs an iris_gpu.torch.Context, got %s (a Team already names its group)" % type(ctx).__name__)
    return _ctx_id(ctx.team_for(group))


def _plain(kind, x, out, cid, *extra):
    """A public collective on the flat buffers: out=None: a new tensor; else into out. A
    refusal takes part first (_in_step)."""
    try:
        _contiguous(kind, x, out)
        if out is None:
            return _invoke(kind, x, cid, *extra)
        _invoke(kind + "_out", x, out, cid, *extra)
        return out
    except (ValueError, TypeError) as e:
        _in_step(e, kind, x, cid, *extra)
        raise


def _plain_inplace(kind, x, cid, *extra):
    """The in-place form of _plain: x is the buffer; returns x."""
    try:
        _contiguous(kind, x)
        _invoke(kind + "_inplace", x, cid, *extra)
        return x
    except (ValueError, TypeError) as e:
        _in_step(e, kind, x, cid, *extra, inplace=True)
        raise


def all_reduce(x, ctx, op="sum", out=None, group=None):
    """Out of place: a new tensor (or out) = op over ranks of x. op: sum, min, max, avg.
    group: a torch.distributed group (or ranks list) of ctx's ranks: over its members only,
    through its team (Context.team); every function here takes group= the same way."""
    return _plain("all_reduce", x, out, _target_id(ctx, group), op)


def all_reduce_(x, ctx, op="sum", group=None):
    """In place: x = op over ranks of x. Returns x."""
    return _plain_inplace("all_reduce", x, _target_id(ctx, group), op)


def _along(x, dim):
    """x with dim moved to the front, contiguous (a copy unless dim is 0 already)."""
    d = dim % x.dim()
    return x if d == 0 else x.movedim(d, 0).contiguous()


def all_gather(x, ctx, dim=0, out=None, group=None):
    """Every rank's x, concatenated along dim (out: a tensor of that shape, dim 0 only, or
    any tensor of world_size * x.numel() elements: rank r's x at r * x.numel()). Along a
    dim other than 0 the input is moved to the front first and the result back (copies)."""
    cid = _target_id(ctx, group)
    try:  # a dim out of range is refused, as torch.cat does; the call still takes part (_in_step)
        if x.dim():
            d = _types._dim(dim, x.dim(), "all_gather")
        elif dim in (0, -1):
            d = 0
        else:
            raise ValueError("all_gather: dim %d is out of range for a 0-d tensor (0 or -1)" % dim)
    except (ValueError, TypeError) as e:
        _in_step(e, "all_gather", x, cid)
        raise
    if out is not None or d == 0:
        try:
            _contiguous("all_gather", x, out)
            if out is None:
                return _invoke("all_gather", x, cid)
            if dim != 0:
                raise ValueError("all_gather: out= needs dim=0 (gather along another dim into a new tensor)")
            _invoke("all_gather_out", x, out, cid)
        except (ValueError, TypeError) as e:
            _in_step(e, "all_gather", x, cid)
            raise
        return out
    try:  # a refusal takes part, as along dim 0: the peers' call is the same count of elements
        _contiguous("all_gather", x)
        g = _invoke("all_gather", _along(x, d), cid)  # (W * x.shape[d], ...rest)
    except (ValueError, TypeError) as e:
        _in_step(e, "all_gather", x, cid)
        raise
    return g.movedim(0, d).contiguous()  # gather_shape(x.shape, W, dim), contiguous like torch.cat


def all_gather_(buf, ctx, group=None):
    """In place: buf holds world_size blocks; this rank's block (rank * n/W) is sent and
    every block is filled."""
    return _plain_inplace("all_gather", buf, _target_id(ctx, group))


def reduce_scatter(x, ctx, op="sum", dim=0, out=None, group=None):
    """This rank's slice (rank-th of world_size along dim) of op over ranks of x."""
    cid = _target_id(ctx, group)
    if out is not None:
        try:
            _contiguous("reduce_scatter", x, out)
            if dim != 0:
                raise ValueError("reduce_scatter: out= needs dim=0")
            _invoke("reduce_scatter_out", x, out, cid, op)
        except (ValueError, TypeError) as e:
            _in_step(e, "reduce_scatter", x, cid, op)
            raise
        return out
    try:  # a refusal takes part (a dim out of range, a shape that does not divide too), along any dim: the peers' call is the same count of elements
        if x.dim() == 0:
            raise ValueError("reduce_scatter: a 0-d tensor cannot be scattered")
        d = _types._dim(dim, x.dim(), "reduce_scatter")
        _types.scatter_shape(tuple(x.shape), _ctx(cid).world_size, d)
        _contiguous("reduce_scatter", x)
        if d == 0:
            return _invoke("reduce_scatter", x, cid, op)
        r = _invoke("reduce_scatter", _along(x, d), cid, op)
    except (ValueError, TypeError) as e:
        _in_step(e, "reduce_scatter", x, cid, op)
        raise
    return r.movedim(0, d).contiguous()


def reduce_scatter_(buf, ctx, op="sum", group=None):
    """In place: buf holds world_size blocks; the reduced block of this rank lands at rank * n/W."""
    return _plain_inplace("reduce_scatter", buf, _target_id(ctx, group), op)


def all_to_all(x, ctx, out=None, group=None):
    """Block r (of world_size equal blocks of x, flattened) goes to rank r; the result's
    block r came from rank r."""
    return _plain("all_to_all", x, out, _target_id(ctx, group))


def all_to_all_(x, ctx, group=None):
    return _plain_inplace("all_to_all", x, _target_id(ctx, group))


def broadcast(x, ctx, root=0, out=None, group=None):
    """root's x on every rank (x is read on the root only). With group=, root is a group
    rank (as torch's group_src)."""
    return _plain("broadcast", x, out, _target_id(ctx, group), root)


def broadcast_(x, ctx, root=0, group=None):
    return _plain_inplace("broadcast", x, _target_id(ctx, group), root)


def barrier(ctx, group=None):
    """A GPU-side barrier on the current stream (capturable): work enqueued after it on any
    rank (of the group, with group=) sees the writes every such rank enqueued before it."""
    _invoke("barrier", _target_id(ctx, group))


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
    try:
        for t, name in ((a, "a"), (b, "b"), (bias, "bias"), (out, "out")):
            if t is not None:
                _types.check_contiguous(t, "gemm_%s: %s" % (plan.op, name))
    except (ValueError, TypeError) as e:  # a real run refused here still takes part, as in the op
        _take_part(e, None, plan.refused_run)
        raise
    if out is None:
        return _invoke("gemm_reduce", a, b, bias, a_scale, b_scale, plan.id)
    _invoke("gemm_reduce_out", a, b, bias, a_scale, b_scale, out, plan.id)
    return out


def _gemm_reduce_as(op, a, b, plan, bias, a_scale, b_scale, out):
    if isinstance(plan, GemmReduce) and plan.op != op:
        e = ValueError("gemm_%s: the plan was made for op %r" % (op, plan.op))
        _take_part(e, None, plan.refused_run)  # the plan's run, refused: it takes part
        raise e
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
    # a real call refused here still takes part (peers wait for every rank's call); a trace only raises
    plan.check_dispatch(x, topk_idx, topk_weights, take_part=_plain_eager(_torch_mod(), (x, topk_idx, topk_weights)))
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
    if _plain_eager(_torch_mod(), (y, out)):  # a real call refused here still takes part (peers wait for every rank's call)
        plan.check_combine(y, out, take_part=True, contiguous=True)
    elif out is not None:  # a trace: the fake implementation checks the rest
        _types.check_contiguous(out, "moe_combine: out")
    if out is None:
        return _invoke("moe_combine", y, plan.num_tokens, plan.id)
    _invoke("moe_combine_out", y, out, plan.id)
    return out


# ------------------------------------------------------------------ all-reduce + RMSNorm
_QUANT = {None: 0, "none": 0, "fp8_per_tensor": 1, "fp8_per_token": 2}
_RMS_ALGO = {"auto": 0, "fused": 1, "separate": 2, "two_shot": 3, "bandwidth": 4}


def _rmsnorm_check(x, residual, weight, out, out_fp8, scale, quant, ctx, fake=False):
    """Shapes, dtypes and devices (ValueError / TypeError); returns (tokens, hidden)."""
    torch = _torch_mod()
    what = "all_reduce_rmsnorm"
    if x.dtype not in (torch.bfloat16, torch.float16):
        raise TypeError("%s: x is %s; bfloat16 or float16 only" % (what, x.dtype))
    if x.dim() < 1:
        raise ValueError("%s: x needs a last dimension (hidden)" % what)
    hidden = x.shape[-1]
    tokens = x.numel() // hidden if hidden else 0
    for t, name, shape in ((residual, "residual", x.shape), (out, "out", x.shape), (weight, "weight", (hidden,))):
        if tuple(t.shape) != tuple(shape):
            raise ValueError("%s: %s has shape %s, expected %s" % (what, name, tuple(t.shape), tuple(shape)))
        if t.dtype != x.dtype:
            raise TypeError("%s: %s is %s, x is %s" % (what, name, t.dtype, x.dtype))
    if quant:
        if out_fp8 is None or scale is None:
            raise ValueError("%s: quant %r needs out_fp8 and scale" % (what, quant))
        if out_fp8.dtype != torch.float8_e4m3fn or tuple(out_fp8.shape) != tuple(x.shape):
            raise ValueError("%s: out_fp8 must be float8_e4m3fn of x's shape" % what)
        want = tokens if quant == 2 else 1
        if scale.dtype != torch.float32 or scale.numel() != want:
            raise ValueError("%s: scale must be a float32 tensor of %d element(s)" % (what, want))
    if not fake:
        if x.numel() and residual.data_ptr() in (x.data_ptr(), out.data_ptr()):
            raise ValueError("%s: residual must be neither x nor out" % what)
        dev = ctx.device
        for t, name in ((x, "x"), (residual, "residual"), (weight, "weight"), (out, "out"), (out_fp8, "out_fp8"), (scale, "scale")):
            if t is not None and (not t.is_cuda or t.device.index != dev):
                raise ValueError("%s: %s is not on cuda:%d" % (what, name, dev))
            if t is not None and not t.is_contiguous():
                raise ValueError("%s: %s is not contiguous" % (what, name))
    return tokens, hidden


def _rmsnorm_ctx(ctx):
    """The all-reduce + RMSNorm runs over a whole Context (the library has no team form)."""
    if not isinstance(ctx, Context):
        raise TypeError("all_reduce_rmsnorm runs over an iris_gpu.torch.Context, not a %s (there is no team form: use it.all_reduce on the team, then the norm)" % type(ctx).__name__)
    return ctx


def _rmsnorm_launch(x, residual, weight, out, out_fp8, scale, eps, quant, algo, ctx_id):
    import ctypes

    torch = _torch_mod()
    ctx = _rmsnorm_ctx(_ctx(ctx_id))
    tokens, hidden = _rmsnorm_check(x, residual, weight, out, out_fp8, scale, quant, ctx)
    lib = ctx._lib
    lib.require_function("iris_all_reduce_rmsnorm_ex")
    lib.require_struct("iris_rmsnorm_opts_t")
    if ctx.check_shapes:
        ctx._same_everywhere(("all_reduce_rmsnorm", tokens, hidden, str(x.dtype), quant, float(eps)))
    opts = _lib.RmsnormOptsT.init(int(quant), out_fp8.data_ptr() if quant else None, scale.data_ptr() if quant else None, int(algo))
    dt = _types.iris_dtype(x.dtype)
    stream = torch._C._cuda_getCurrentRawStream(ctx.device)
    args = (ctx._handle(), x.data_ptr(), residual.data_ptr(), weight.data_ptr(), out.data_ptr(), tokens, hidden, float(eps), dt, stream, ctypes.byref(opts))
    if torch._C._cuda_getDevice() != ctx.device:
        with torch.cuda.device(ctx.device):
            st = lib.lib.iris_all_reduce_rmsnorm_ex(*args)
    else:
        st = lib.lib.iris_all_reduce_rmsnorm_ex(*args)
    if st:
        ctx._call("iris_all_reduce_rmsnorm", st)


def all_reduce_rmsnorm(x, residual, weight, ctx, eps=1e-6, out=None, quant=None, out_fp8=None, scale=None, algo="auto"):
    """residual += all_reduce(x) (sum over ranks, the all-reduce's bits); out =
    rmsnorm(residual) * weight, in one call (for up to 512 tokens of up to 2 MB, one
    kernel). x, residual, out: (..., hidden) bfloat16 or float16 (contiguous, on the
    context's device; x anywhere, not only on the heap); weight: (hidden,); residual is
    updated in place; out: a new tensor when None, or x itself (in place, as vLLM's
    fused_add_rms_norm). quant: None, "fp8_per_tensor" (scale: a 1-element float32 tensor,
    read: out_fp8 = e4m3(out / scale)) or "fp8_per_token" (scale: (tokens,) float32,
    written: max(amax / 448, 1 / (448 * 512)) per row); out_fp8 (float8_e4m3fn, x's shape) and scale are made
    when None. Returns out, or (out, out_fp8, scale) with quant. Collective: every rank
    calls it with the same shapes, dtype and quant, in the same order; on
    torch.cuda.current_stream(); capturable. algo: "auto", "fused" (one-shot), "two_shot",
    "bandwidth" or "separate" (tests, benchmarks). The arithmetic: docs/serving.md."""
    if getattr(type(ctx), "_iris_target", False):
        _rmsnorm_ctx(ctx)  # a Team: TypeError
    torch = _torch_mod()
    if quant not in _QUANT:
        raise ValueError("all_reduce_rmsnorm: quant %r is not one of None, 'fp8_per_tensor', 'fp8_per_token'" % (quant,))
    if algo not in _RMS_ALGO:
        raise ValueError("all_reduce_rmsnorm: algo %r is not one of %s" % (algo, ", ".join(_RMS_ALGO)))
    q = _QUANT[quant]
    cid = _ctx_id(ctx)
    try:
        return _all_reduce_rmsnorm(torch, x, residual, weight, cid, eps, out, q, out_fp8, scale, algo)
    except (ValueError, TypeError) as e:
        _take_part(e, lambda: _rmsnorm_take_part(x, eps, q, _RMS_ALGO[algo], cid))
        raise


def _rmsnorm_take_part(x, eps, q, algo, cid):
    """all_reduce_rmsnorm refused here (_take_part): the same call of x (a contiguous copy)
    with scratch residual, weight, out (and fp8 outputs), when x itself is usable."""
    torch = _torch_mod()
    ctx = _ctx(cid)
    if type(x) is not torch.Tensor or x.dtype not in (torch.bfloat16, torch.float16) or x.dim() < 1 or not 1 <= x.shape[-1] <= 32768:
        raise TypeError("x is unusable")
    _types.check_tensor(x, "all_reduce_rmsnorm: x", ctx.device, contiguous=False)
    xc = x.contiguous()
    hidden = x.shape[-1]
    tokens = xc.numel() // hidden
    res, out = torch.zeros_like(xc), torch.empty_like(xc)
    weight = torch.ones((hidden,), dtype=x.dtype, device=x.device)
    out_fp8 = scale = None
    if q:
        out_fp8 = torch.empty(xc.shape, dtype=torch.float8_e4m3fn, device=x.device)
        scale = torch.ones((1,) if q == 1 else (tokens,), dtype=torch.float32, device=x.device)
    _rmsnorm_launch(xc, res, weight, out, out_fp8, scale, eps, q, algo, cid)


def _all_reduce_rmsnorm(torch, x, residual, weight, cid, eps, out, q, out_fp8, scale, algo):
    _contiguous("all_reduce_rmsnorm", x, out)
    if q:
        hidden = x.shape[-1] if x.dim() else 1
        tokens = x.numel() // hidden if hidden else 0
        if out_fp8 is None:
            out_fp8 = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
        if scale is None:
            if q == 1:
                raise ValueError("all_reduce_rmsnorm: fp8_per_tensor needs scale (a 1-element float32 tensor)")
            scale = torch.empty((tokens,), dtype=torch.float32, device=x.device)
    # in place when out is x (or a view of all of it); another tensor at x's address (a part of
    # x, x as another dtype) goes out of place, whose checks refuse its shape or dtype
    if out is not None and out.numel() and out.data_ptr() == x.data_ptr() and tuple(out.shape) == tuple(x.shape) and out.dtype == x.dtype:
        _invoke("all_reduce_rmsnorm_inplace", x, residual, weight, out_fp8 if q else None, scale if q else None, float(eps), q, _RMS_ALGO[algo], cid)
        out = x
    else:
        if out is None:
            out = torch.empty_like(x)
        _invoke("all_reduce_rmsnorm_out", x, residual, weight, out, out_fp8 if q else None, scale if q else None, float(eps), q, _RMS_ALGO[algo], cid)
    if _DIRECT and _plain_eager(torch, (x, residual, weight, out)):  # _invoke bumped out's (or x's) version; the dispatcher would bump these too
        for t in (residual, out_fp8 if q else None, scale if q == 2 else None):
            if t is not None:
                torch.autograd.graph.increment_version(t)
    return (out, out_fp8, scale) if q else out


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
