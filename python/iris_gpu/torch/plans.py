"""iris_gpu.torch.plans: the GEMM + communication and MoE plans (AgGemm, GemmReduce, Moe) and their registry."""
import ctypes

from .. import _lib, _types
from .dlpack import _device_bytes
from .context import _ctx_id, _ids, _torch_mod


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


def _refuse_in_step(ctx, create, desc, field, err):
    """A plan's argument refused here, on this rank (err), while the peers may be in the
    same create: the C create meets them first (it gathers every rank's description before
    any rank judges its own), so it is still called, with `field` of desc set to -1 (a
    value every create refuses): every rank fails alike (IRIS_ERROR_MISMATCH where only
    this rank is wrong) and none waits out its bound. Then err is raised."""
    torch = _torch_mod()
    setattr(desc, field, -1)
    g = ctypes.c_void_p()
    with torch.cuda.device(ctx.device):
        create(ctx._handle(), ctypes.byref(desc), ctypes.byref(g))
    raise err


def _refused_run(plan, fn, nbuf):
    """One run of plan that the library refuses (nbuf NULL buffers) on the current stream:
    the C run still takes part in the call there (iris_gemm.h, iris_gemm_reduce.h: "A run
    refused on one rank"), touching no buffer, so the peers' run of that call ends with
    IRIS_ERROR_MISMATCH naming this rank instead of waiting out its bound. For an argument
    refused in Python on this rank (ops._take_part). Its refusal is the expected outcome;
    True once made."""
    torch, ctx = _torch_mod(), plan.ctx
    if plan._g is None:
        return False
    _ctx_id(ctx)  # RuntimeError once the context is closed
    stream = torch.cuda.current_stream(ctx.device).cuda_stream
    with torch.cuda.device(ctx.device):
        fn(plan._g, *((None,) * nbuf), stream)
    return True


def _plan_check(plan, fn):
    """The plan's check function fn (iris_ag_gemm_check, iris_gemm_rs_check), raising."""
    if plan._g is None:
        raise RuntimeError("iris plan %d is closed" % plan.id)
    _ctx_id(plan.ctx)  # RuntimeError once the context is closed
    plan.ctx._lib.require_function(fn)
    plan.ctx._call(fn, getattr(plan.ctx._lib.lib, fn)(plan._g))


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
        d = _lib.AgGemmDescT.init()
        try:  # refused here: the create still meets the peers (_refuse_in_step)
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
            d.layout, d.M, d.N, d.K = _types.GEMM_LAYOUTS[layout], M, N, K
            d.a_type, d.c_type = _types.iris_dtype(self.dtype), _types.iris_dtype(self.out_dtype)
            d.b_transposed, d.has_bias, d.path, d.stage_a = int(bool(b_transposed)), int(bool(bias)), _types.GEMM_PATHS[path], int(bool(stage_a))
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            _refuse_in_step(ctx, ctx._lib.lib.iris_ag_gemm_create, d, "layout", e)
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
        if self._g is None:
            raise RuntimeError("iris ag_gemm plan %d is closed" % self.id)
        _ctx_id(ctx)  # RuntimeError once the context is closed
        stream = ctypes.c_void_p(torch.cuda.current_stream(ctx.device).cuda_stream)
        p = lambda t: ctypes.c_void_p(t.data_ptr() if t is not None else None)  # noqa: E731
        if self.fp8:
            ctx._lib.require_function("iris_ag_gemm_run_scaled")
            call, args = "iris_ag_gemm_run_scaled", (p(a), p(b), p(a_scale), p(b_scale), p(bias), p(c), stream)
            fn = ctx._lib.lib.iris_ag_gemm_run_scaled
        else:
            call, args, fn = "iris_ag_gemm_run", (p(a), p(b), p(bias), p(c), stream), ctx._lib.lib.iris_ag_gemm_run
        if torch._C._cuda_getDevice() != ctx.device:  # its launches, events and cuBLASLt calls on the plan's device whatever device is current
            with torch.cuda.device(ctx.device):
                st = fn(self._g, *args)
        else:
            st = fn(self._g, *args)
        ctx._call(call, st)

    def refused_run(self):
        """_refused_run with this plan's run (run_scaled for fp8: A, B, scales, bias, C)."""
        L = self.ctx._lib.lib
        return _refused_run(self, L.iris_ag_gemm_run_scaled, 6) if self.fp8 else _refused_run(self, L.iris_ag_gemm_run, 4)

    def check(self):
        """iris_ag_gemm_check, after the stream has completed the runs: IrisError for a wait
        of the fused or kernel-unfused path that ran past its bound (IRIS_ERROR_TIMEOUT) or a
        peer's run of a call that was refused (IRIS_ERROR_MISMATCH naming the call and the
        peer: C of that call is wrong here) since the last check, then cleared. The other
        paths report through the context (Context.check)."""
        _plan_check(self, "iris_ag_gemm_check")

    def close(self):
        """Collective: free the plan. Idempotent."""
        if self._g is not None and not self.ctx.closed:
            _PLANS.pop(self.id, None)
            g, self._g = self._g, None
            torch = _torch_mod()
            with torch.cuda.device(self.ctx.device):
                st = self.ctx._lib.lib.iris_ag_gemm_destroy(g)
            self.ctx._call("iris_ag_gemm_destroy", st)


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
        self.ctx, self.op, self._g, self.fp8 = ctx, op, None, False
        d = _lib.GemmRsDescT.init()
        try:  # refused here: the create still meets the peers (_refuse_in_step)
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
            d.op, d.M, d.N, d.K = _types.GEMM_REDUCE_OPS[op], M, N, K
            d.a_type, d.c_type = _types.iris_dtype(self.dtype), _types.iris_dtype(self.out_dtype)
            d.b_transposed, d.has_bias, d.path = int(self.b_transposed), int(self.has_bias), _types.GEMM_PATHS[path]
            self.exact = bool(exact)
            d.exact = int(self.exact)
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            d.op = -1  # as _refuse_in_step: the create meets the peers, every rank fails alike
            try:
                self._create(d)
            except _lib.IrisError:
                pass
            raise e

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

    def check_args(self, a, b, bias, a_scale, b_scale, out=None, contiguous=True):
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
        self.check_args(a, b, bias, a_scale, b_scale, out, contiguous=False)
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

    def refused_run(self):
        """_refused_run with this plan's run (run_scaled for fp8: A, B, scales, bias, C)."""
        L = self.ctx._lib.lib
        return _refused_run(self, L.iris_gemm_rs_run_scaled, 6) if self.fp8 else _refused_run(self, L.iris_gemm_rs_run, 4)

    def check(self):
        """iris_gemm_rs_check, after the stream has completed the runs: IrisError for a wait
        of the fused path that ran past its bound (IRIS_ERROR_TIMEOUT) or a peer's run of a
        call that was refused (IRIS_ERROR_MISMATCH naming the call and the peer) since the
        last check, then cleared. The other paths report through the context
        (Context.check)."""
        _plan_check(self, "iris_gemm_rs_check")

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
    torch.cuda.current_stream(); both are capturable; a call refused here (an argument that
    does not fit) still takes part, as the C calls do, then raises. The received rows stay
    valid until this rank's combine. close() on every rank (the recv_* tensors view the plan's heap
    blocks: do not use them after it)."""

    def __init__(self, ctx, max_tokens, hidden, top_k, num_experts, mode="low_latency", dispatch_dtype=None, num_sms=0, max_recv_rows=0):
        torch = _torch_mod()
        self.ctx, self._g = ctx, None
        L = ctx._lib
        L.require_struct("iris_moe_desc_t")
        L.require_function("iris_moe_create")
        d = _lib.MoeDescT.init()
        try:  # refused here: the create still meets the peers (_refuse_in_step)
            if mode not in MOE_MODES:
                raise ValueError("moe: mode %r is not one of %s" % (mode, ", ".join(MOE_MODES)))
            self.dispatch_dtype = torch.bfloat16 if dispatch_dtype is None else dispatch_dtype
            dn = _types.dtype_name(self.dispatch_dtype)
            if dn not in ("bfloat16", "float8_e4m3fn"):
                raise TypeError("moe: dispatch_dtype must be bfloat16 or float8_e4m3fn, got %s" % dn)
            self.mode, self.max_tokens, self.hidden, self.top_k, self.num_experts = mode, int(max_tokens), int(hidden), int(top_k), int(num_experts)
            self.fp8 = dn == "float8_e4m3fn"
            d.mode, d.max_tokens, d.hidden, d.top_k, d.num_experts = MOE_MODES[mode], self.max_tokens, self.hidden, self.top_k, self.num_experts
            d.dispatch_type, d.num_sms, d.max_recv_rows = _types.iris_dtype(self.dispatch_dtype), int(num_sms), int(max_recv_rows)
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            _refuse_in_step(ctx, L.lib.iris_moe_create, d, "mode", e)
        g = ctypes.c_void_p()
        with torch.cuda.device(ctx.device):
            ctx._call("iris_moe_create", L.lib.iris_moe_create(ctx._handle(), ctypes.byref(d), ctypes.byref(g)))
        try:
            self._views(torch, L, g, mode)
        except BaseException:
            with torch.cuda.device(ctx.device):  # collective: every rank fails alike here (the same plan, the same library)
                L.lib.iris_moe_destroy(g)
            raise
        self._g = g
        self.id = next(_ids)
        _PLANS[self.id] = self

    def _views(self, torch, L, g, mode):
        """The plan's receive buffers as tensors (recv_x, recv_scales, recv_src, recv_count,
        recv_offsets)."""
        ctx = self.ctx
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

    def check_dispatch(self, x, topk_idx, topk_weights, take_part=False):
        """Raise (ValueError / TypeError) naming the first argument that does not fit.
        take_part (a real call, not a trace): the refused dispatch still takes part first,
        with no tokens of this rank's (_refuse)."""
        try:
            self._check_dispatch(x, topk_idx, topk_weights)
        except Exception as e:
            if not take_part:
                raise
            self._refuse(e, True)

    def _check_dispatch(self, x, topk_idx, topk_weights):
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

    def check_combine(self, y, out=None, take_part=False, contiguous=False):
        """Raise (ValueError / TypeError) naming the first argument that does not fit (out:
        also when it is not contiguous, with contiguous=True). take_part (a real call): the
        refused combine still takes part first (_refuse): y's rows go out when y fits (NaN
        rows when it does not, as the C refusal), nothing is written here."""
        what = "moe_combine"
        try:
            self._check_y(y)
        except Exception as e:
            if not take_part:
                raise
            self._refuse(e, False, None)
        if out is None:
            return
        try:
            _types.check_tensor(out, what + ": out", self.ctx.device, "bfloat16", contiguous)
            if tuple(out.shape) != (self.num_tokens, self.hidden):
                raise ValueError("%s: out has shape %s, the last dispatch needs (%d, %d)" % (what, tuple(out.shape), self.num_tokens, self.hidden))
        except Exception as e:
            if not take_part:
                raise
            self._refuse(e, False, y)

    def _check_y(self, y):
        what, dev = "moe_combine", self.ctx.device
        _types.check_tensor(y, what + ": y", dev, "bfloat16", False)
        if tuple(y.shape) != tuple(self.recv_x.shape):
            raise ValueError("%s: y has shape %s, the plan needs recv_x's %s" % (what, tuple(y.shape), tuple(self.recv_x.shape)))

    def _refuse(self, err, dispatch, y=None):
        """A call refused here still takes part in the library, then err is raised (its
        type, the message saying so): the ranks pair MoE calls by count, so a rank that
        skipped one would leave its peers waiting for it, then pair its later calls with
        their earlier ones (iris_moe.h). A dispatch sends no tokens (the next combine
        writes none); a combine sends y's rows (y None: NaN rows, which every rank's check()
        then names this rank for) and writes nothing here. The library's own verdict on
        that call (a fault, no dispatch before a combine) is not raised: err is."""
        lib = self.ctx._lib.lib
        try:
            if dispatch:
                self.num_tokens = 0
                self._stream_call("iris_moe_dispatch", lib.iris_moe_dispatch, None, 0, None, None)
            else:
                ptr = None
                if y is not None:
                    y = self._aligned(y)
                    ptr = y.data_ptr()
                self._stream_call("iris_moe_combine", lib.iris_moe_combine, ptr, None)
        except Exception:
            pass
        note = " (the call took part with nothing of this rank's, so every rank's calls stay paired)"
        try:
            e2 = type(err)(str(err) + note)
        except Exception:
            raise err
        e2._iris_took_part = True  # as ops._take_part marks it: nothing takes part again for it
        raise e2 from None

    @staticmethod
    def _aligned(t):
        """t contiguous and 16-byte aligned (the library's rule for x, y and out): t itself
        or a copy (a view at an odd offset of a larger buffer would be refused)."""
        if t.is_contiguous() and t.data_ptr() % 16 == 0:
            return t
        return t.clone(memory_format=_torch_mod().contiguous_format)

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
        recv_offsets): the plan's buffers, final when the stream reaches this point. An
        argument that does not fit raises, after the call took part with no tokens."""
        torch = _torch_mod()
        self.check_dispatch(x, topk_idx, topk_weights, take_part=True)
        x = self._aligned(x)
        idx = topk_idx
        if _types.dtype_name(idx.dtype) == "int64":  # torch.topk's indices: one small copy; a value past int32 stays out of range (no wrap onto a real expert)
            idx = idx.clamp(-2, self.num_experts)
        idx = idx.to(torch.int32).contiguous()
        w = topk_weights.contiguous()
        n = int(x.shape[0])
        self.num_tokens = 0  # a refusal by the library takes part with no tokens
        self._stream_call("iris_moe_dispatch", self.ctx._lib.lib.iris_moe_dispatch, x.data_ptr(), n, idx.data_ptr(), w.data_ptr())
        self.num_tokens = n
        return self.recv_x, self.recv_scales, self.recv_count, self.recv_offsets

    def combine(self, y, out=None):
        """Enqueue the combine of y (recv_x's layout, bf16) into out (None: a new n x hidden
        bf16 tensor, n of the last dispatch); returns out. An argument that does not fit
        raises, after the call took part (check_combine)."""
        self.check_combine(y, out, take_part=True)
        y = self._aligned(y)
        if out is None:
            out = y.new_empty((self.num_tokens, self.hidden))
        elif not out.is_contiguous() or out.data_ptr() % 16:
            out.copy_(self.combine(y))
            return out
        self._stream_call("iris_moe_combine", self.ctx._lib.lib.iris_moe_combine, y.data_ptr(), out.data_ptr())
        return out

    def check(self):
        """Raise IrisError for a peer that gave up waiting in this plan (IRIS_ERROR_TIMEOUT,
        at every check from then on), what the kernels recorded since the last check (an expert
        index out of range, a repeated expert, high-throughput rows beyond max_recv_rows, a
        peer's refused combine, whose NaN rows reached this rank's tokens, a combine after a
        dispatch of another token count) or the context's fault. Synchronises nothing: call it after the
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
