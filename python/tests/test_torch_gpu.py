"""GPU tests of iris_gpu.torch, run as N processes (ranks may share one GPU).

    python3 python/tests/test_torch_gpu.py --world 2     # or 3, 4; prints PASS/FAIL/SKIP lines
    python3 python/tests/test_torch_gpu.py --world 2 --only gemm_reduce   # only the GEMM + reduce tests
    python3 python/tests/test_torch_gpu.py --world 4 --only teams         # only the torch subgroup (team) tests
    torchrun --nproc-per-node 2 python/tests/test_torch_gpu.py   # the same under torchrun

Every rank uses device local_rank % device_count. The torch.distributed reference runs
over gloo when ranks share a GPU and over NCCL when each has its own. Each rank builds every
rank's input from a seed, so the float64 reference needs no communication; inputs are small
integers (times 1/4 for float types) so that every sum is exact in every type, and results
must equal the reference exactly (avg: within one rounding of the type).
Skips cleanly (a SKIP line, exit 0) without torch or without a GPU.
"""
import argparse
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

try:
    import torch
    import torch.distributed as dist
except ImportError:
    torch = None

DTYPES = ["float32", "float16", "bfloat16", "int32", "int64", "uint8", "float8_e4m3fn", "float8_e5m2"]
FLOAT = ("float32", "float16", "bfloat16")
FP8 = ("float8_e4m3fn", "float8_e5m2")


# ---------------------------------------------------------------- data and reference
def make_input(shape, dtype_name, rank, seed):
    """rank's input (CPU): exact small values, the same on every process that asks."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    if dtype_name == "uint8":
        v = torch.randint(0, 60, shape, generator=g)
    elif dtype_name in FP8:
        v = torch.randint(-2, 3, shape, generator=g)
    elif dtype_name in FLOAT:
        v = torch.randint(-8, 9, shape, generator=g) * 0.25
    else:
        v = torch.randint(-1000, 1001, shape, generator=g)
    return v.to(torch.float64).to(getattr(torch, dtype_name))


def reduce_ref(xs, op):
    """float64 reduction over ranks of the list xs."""
    s = torch.stack([x.to(torch.float64) for x in xs])
    if op == "sum":
        return s.sum(0)
    if op == "avg":
        return s.sum(0) / len(xs)
    return s.min(0).values if op == "min" else s.max(0).values


def same(got, ref64, dtype_name, approx=False):
    """got (any device, dtype) against a float64 reference rounded to the dtype."""
    want = ref64.to(getattr(torch, dtype_name)).to(torch.float64)
    g = got.detach().cpu().to(torch.float64)
    if g.shape != want.shape:
        return "shape %s, expected %s" % (tuple(g.shape), tuple(want.shape))
    if approx:
        ok = torch.allclose(g, want, rtol={"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}.get(dtype_name, 0.26 if dtype_name == "float8_e5m2" else 0.13), atol=1e-6)
    else:
        ok = torch.equal(g, want)
    if ok:
        return None
    bad = (g - want).abs().flatten().argmax().item()
    return "max error at flat index %d: got %r, expected %r" % (bad, g.flatten()[bad].item(), want.flatten()[bad].item())


def verify(got, ref64, dtype_name, approx=False):
    """Wait for the GPU, then raise unless got equals the reference (see same)."""
    torch.cuda.synchronize()
    e = same(got, ref64, dtype_name, approx)
    if e:
        raise AssertionError(e)


def poisoned(shape, dtype, dev, ctx=None):
    """An output buffer (on the heap when ctx is given) filled with the byte 0x7b."""
    t = ctx.empty(shape, dtype) if ctx is not None else torch.empty(shape, dtype=dtype, device=dev)
    t.view(-1).view(torch.uint8).fill_(0x7B)
    return t


class Runner:
    def __init__(self, rank, world, ctx, it, shared_gpu):
        self.rank, self.world, self.ctx, self.it = rank, world, ctx, it
        self.dev = torch.device("cuda", ctx.device)
        self.shared = shared_gpu
        self.no_ref = set()  # (collective, dtype) the torch.distributed backend could not run
        self.seed = 0
        self.times = []  # (seconds, name) of every result, for the slowest-tests summary

    def report_times(self, top=8):
        """Rank 0: the total and the slowest tests on stderr (not result lines)."""
        if self.rank == 0 and self.times:
            total = sum(t for t, _ in self.times)
            slow = sorted(self.times, reverse=True)[:top]
            sys.stderr.write("torch W=%d: %d tests in %.1f s; slowest: %s\n" % (self.world, len(self.times), total, "; ".join("%.1f s %s" % (t, n[:60]) for t, n in slow)))

    def result(self, name, fn):
        """Run fn on every rank; print rank 0's line: FAIL if any rank failed."""
        err = None
        t0 = time.time()
        try:
            r = fn()
            err = ("SKIP", r) if isinstance(r, str) and r else None
        except Exception as e:  # noqa: BLE001
            err = ("FAIL", "%s: %s" % (type(e).__name__, e))
            traceback.print_exc()
        allr = [None] * self.world
        dist.all_gather_object(allr, err)
        fails = ["rank %d: %s" % (r, e[1]) for r, e in enumerate(allr) if e and e[0] == "FAIL"]
        self.times.append((time.time() - t0, name))
        if self.rank == 0 and self.times[-1][0] > 5:
            sys.stderr.write("torch W=%d: %.1f s: %s\n" % (self.world, self.times[-1][0], name))
        if self.rank == 0:
            W = "torch W=%d: " % self.world
            if fails:
                print("FAIL: %s%s: %s" % (W, name, "; ".join(fails)[:600]), flush=True)
            elif allr[0]:
                print("SKIP: %s%s: %s" % (W, name, allr[0][1]), flush=True)
            else:
                print("PASS: %s%s" % (W, name), flush=True)

    def inputs(self, shape, dt):
        self.seed += 1
        xs = [make_input(shape, dt, r, self.seed) for r in range(self.world)]
        return xs, xs[self.rank].to(self.dev)

    def dist_ref(self, fn, what):
        """torch.distributed's result (gloo on CPU when ranks share a GPU), or None when the
        backend lacks the dtype/op (the float64 reference still checks the result; the gap is
        reported in one SKIP line at the end)."""
        try:
            return fn("cpu" if self.shared else self.dev)
        except Exception:  # noqa: BLE001
            self.no_ref.add(what)
            return None

    def same_as_dist(self, y, run, what):
        """Compare y with torch.distributed's run(device) where the backend can run it."""
        t = self.dist_ref(run, what)
        if t is not None and not torch.equal(t.cpu().to(torch.float64), y.cpu().to(torch.float64)):
            raise AssertionError("differs from torch.distributed")

    def report_no_ref(self):
        if self.no_ref:
            return "torch.distributed (%s) could not run: %s" % ("gloo" if self.shared else "nccl", ", ".join(sorted(" ".join(w) for w in self.no_ref)))
        return None

    # ------------------------------------------------------------ collectives
    def check_all_reduce(self, dt, op, mode, n):
        it, ctx = self.it, self.ctx
        xs, x = self.inputs((n,), dt)
        ref = reduce_ref(xs, op)
        x0 = x.clone()
        if mode == "functional":
            y = it.all_reduce(x, ctx, op)
        elif mode == "out":
            y = poisoned((n,), x.dtype, self.dev)
            it.all_reduce(x, ctx, op, out=y)
        elif mode == "inplace":
            y = it.all_reduce_(x, ctx, op)
        else:  # inplace on the heap
            y = poisoned(x.shape, x.dtype, self.dev, ctx)
            y.copy_(x)
            it.all_reduce_(y, ctx, op)
        torch.cuda.synchronize()
        if mode in ("functional", "out") and not torch.equal(x.view(torch.uint8), x0.view(torch.uint8)):
            raise AssertionError("the out-of-place all_reduce modified its input")
        e = same(y, ref, dt, approx=(op == "avg"))
        if e:
            raise AssertionError(e)
        if dt not in FP8 and op != "avg":
            rop = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op]

            def run(d):
                t = x0.to(d)
                dist.all_reduce(t, rop)
                return t

            self.same_as_dist(y, run, ("all_reduce", dt, op))

    def check_all_gather(self, dt, mode, n):
        it, ctx, W = self.it, self.ctx, self.world
        xs, x = self.inputs((n, 3), dt)
        if mode == "dim1":
            y = it.all_gather(x, ctx, dim=1)
            ref = torch.cat([a.to(torch.float64) for a in xs], 1)
        else:
            ref = torch.cat([a.to(torch.float64) for a in xs], 0)
            if mode == "functional":
                y = it.all_gather(x, ctx)
            elif mode == "out":
                y = poisoned((W * n, 3), x.dtype, self.dev)
                it.all_gather(x, ctx, out=y)
            else:
                y = poisoned((W * n, 3), x.dtype, self.dev, ctx)
                y[self.rank * n:(self.rank + 1) * n].copy_(x)
                it.all_gather_(y, ctx)
        verify(y, ref, dt)
        if mode == "functional" and dt not in FP8:
            def run(d):
                parts = [torch.empty_like(x, device=d) for _ in range(W)]
                dist.all_gather(parts, x.to(d))
                return torch.cat(parts, 0)

            self.same_as_dist(y, run, ("all_gather", dt))

    def check_reduce_scatter(self, dt, op, mode, n):
        it, ctx, W, r = self.it, self.ctx, self.world, self.rank
        if mode == "dim1":
            xs, x = self.inputs((3, W * n), dt)
            y = it.reduce_scatter(x, ctx, op, dim=1)
            ref = reduce_ref(xs, op)[:, r * n:(r + 1) * n]
        else:
            xs, x = self.inputs((W * n,), dt)
            ref = reduce_ref(xs, op)[r * n:(r + 1) * n]
            if mode == "functional":
                y = it.reduce_scatter(x, ctx, op)
            elif mode == "out":
                y = poisoned((n,), x.dtype, self.dev)
                it.reduce_scatter(x, ctx, op, out=y)
            else:
                b = poisoned(x.shape, x.dtype, self.dev, ctx)
                b.copy_(x)
                it.reduce_scatter_(b, ctx, op)
                y = b[r * n:(r + 1) * n]
        verify(y, ref, dt, approx=(op == "avg"))
        if mode == "functional" and dt not in FP8 and op != "avg":
            rop = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op]

            def run(d):
                t = torch.empty(n, dtype=x.dtype, device=d)
                dist.reduce_scatter_tensor(t, x.to(d), rop)
                return t

            self.same_as_dist(y, run, ("reduce_scatter", dt, op))

    def check_all_to_all(self, dt, mode, n):
        it, ctx, W, r = self.it, self.ctx, self.world, self.rank
        xs, x = self.inputs((W * n,), dt)
        ref = torch.cat([a[r * n:(r + 1) * n].to(torch.float64) for a in xs])
        if mode == "functional":
            y = it.all_to_all(x, ctx)
        elif mode == "out":
            y = poisoned(x.shape, x.dtype, self.dev)
            it.all_to_all(x, ctx, out=y)
        else:
            y = poisoned(x.shape, x.dtype, self.dev, ctx)
            y.copy_(x)
            it.all_to_all_(y, ctx)
        verify(y, ref, dt)
        if mode == "functional" and dt not in FP8:
            def run(d):
                t = torch.empty(x.shape, dtype=x.dtype, device=d)
                dist.all_to_all_single(t, x.to(d))
                return t

            self.same_as_dist(y, run, ("all_to_all", dt))

    def check_broadcast(self, dt, mode, n):
        it, ctx, W = self.it, self.ctx, self.world
        root = W - 1
        xs, x = self.inputs((n,), dt)
        if mode == "functional":
            y = it.broadcast(x, ctx, root)
        elif mode == "out":
            y = poisoned(x.shape, x.dtype, self.dev)
            it.broadcast(x, ctx, root, out=y)
        else:
            y = poisoned(x.shape, x.dtype, self.dev, ctx)
            y.copy_(x)
            it.broadcast_(y, ctx, root)
        verify(y, xs[root].to(torch.float64), dt)
        if mode == "functional" and dt not in FP8:
            def run(d):
                t = x.to(d).clone()
                dist.broadcast(t, root)
                return t

            self.same_as_dist(y, run, ("broadcast", dt))

    def check_barrier(self):
        """Each rank writes its heap tensor, barrier(), every rank reads every peer's copy."""
        it, ctx, W = self.it, self.ctx, self.world
        t = ctx.empty((4096,), torch.int32)
        views = [ctx.peer_view(t, r) for r in range(W)]
        for i in range(50):
            t.fill_(1000 * i + self.rank)
            it.barrier(ctx)
            got = [v.clone() for v in views]
            it.barrier(ctx)  # nobody overwrites before every rank has read
            torch.cuda.synchronize()
            for r, g in enumerate(got):
                if not bool((g == 1000 * i + r).all()):
                    raise AssertionError("iteration %d: rank %d's copy read %d" % (i, r, g[0].item()))

    # ------------------------------------------------------------ graphs, compile
    def check_graph(self, replays=1000):
        """all_reduce + all_gather + reduce_scatter + barrier captured once, replayed with
        fresh inputs; every replay checked."""
        it, ctx, W, r = self.it, self.ctx, self.world, self.rank
        n = 4099
        x = torch.zeros(W * n, dtype=torch.float32, device=self.dev)
        base = [make_input((W * n,), "float32", q, 777) for q in range(W)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):  # warm-up outside the graph
                a = it.all_reduce(x, ctx)
                g = it.all_gather(x[:n], ctx)
                rs = it.reduce_scatter(x, ctx)
                it.barrier(ctx)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            a = it.all_reduce(x, ctx)
            g = it.all_gather(x[:n], ctx)
            rs = it.reduce_scatter(x, ctx)
            it.barrier(ctx)
        ref_sum = reduce_ref(base, "sum")
        mine = base[r].to(self.dev)
        for i in range(replays):
            x.copy_(mine + i)
            graph.replay()
            torch.cuda.synchronize()
            e = same(a, ref_sum + W * i, "float32") or same(rs, (ref_sum + W * i)[r * n:(r + 1) * n], "float32")
            e = e or same(g, torch.cat([b[:n].to(torch.float64) + i for b in base]), "float32")
            if e:
                raise AssertionError("replay %d: %s" % (i, e))
            if i == 0:
                used = torch.cuda.memory_allocated(self.dev)
        grown = torch.cuda.memory_allocated(self.dev) - used
        if grown:
            raise AssertionError("memory grew by %d bytes over %d replays" % (grown, replays))

    def check_compile(self):
        it, ctx, W = self.it, self.ctx, self.world

        def f(x):
            y = it.all_reduce(x * 2, ctx, "sum")
            z = it.all_gather(y[:8], ctx, dim=0)
            w = it.reduce_scatter(y, ctx, "max")
            it.all_reduce_(w, ctx, "min")
            return y + 1, z, w

        cf = torch.compile(f, fullgraph=True)
        xs, x = self.inputs((W * 64,), "float32")
        got = cf(x)
        want = f(x)
        torch.cuda.synchronize()
        for a, b in zip(got, want):
            if not torch.equal(a, b):
                raise AssertionError("compiled result differs from eager")
        y = reduce_ref([a * 2 for a in xs], "sum")
        e = same(got[0], y + 1, "float32")
        if e:
            raise AssertionError(e)

    # ------------------------------------------------------------ serving engine slot
    def check_custom_allreduce(self, group):
        it, W = self.it, self.world
        ca = it.CustomAllreduce(group, self.dev, max_size=1 << 20)
        assert not ca.disabled and ca.world_size == W and ca.rank == self.rank and ca.max_size == 1 << 20
        assert ca.fully_connected and ca.device == self.dev and ca.group is group
        x = torch.ones(256, dtype=torch.bfloat16, device=self.dev)
        rejects = {
            "int32": torch.ones(256, dtype=torch.int32, device=self.dev),
            "cpu": torch.ones(256, dtype=torch.bfloat16),
            "non-contiguous": torch.ones(256, 2, dtype=torch.bfloat16, device=self.dev)[:, 0],
            "bytes % 16": torch.ones(7, dtype=torch.bfloat16, device=self.dev),
            "== max_size": torch.ones(1 << 19, dtype=torch.bfloat16, device=self.dev),
        }
        for why, t in rejects.items():
            if ca.should_custom_ar(t) or ca.custom_all_reduce(t) is not None:
                raise AssertionError("took a tensor it must refuse (%s)" % why)
        if not ca.should_custom_ar(x):
            raise AssertionError("refused a 512-byte bf16 tensor")
        xs, inp = self.inputs((1024,), "bfloat16")
        inp0 = inp.clone()
        out = ca.custom_all_reduce(inp)
        torch.cuda.synchronize()
        e = same(out, reduce_ref(xs, "sum"), "bfloat16")
        if e or not torch.equal(inp, inp0):
            raise AssertionError(e or "the input was modified")
        # vLLM's lower-level all_reduce(inp, out=..., registered=...): the same sum
        out2 = torch.full_like(inp, float("nan"))
        if ca.all_reduce(inp, out=out2, registered=True) is not out2:
            raise AssertionError("all_reduce(out=) did not return out")
        torch.cuda.synchronize()
        e = same(out2, reduce_ref(xs, "sum"), "bfloat16") or same(ca.all_reduce(inp), reduce_ref(xs, "sum"), "bfloat16")
        if e:
            raise AssertionError("all_reduce: " + e)
        # graphs: capture on a side stream, warm-up inside capture() without communication
        static = torch.zeros(1024, dtype=torch.bfloat16, device=self.dev)
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        if ca._IS_CAPTURING:
            raise AssertionError("_IS_CAPTURING is True outside capture()")
        with ca.capture():
            if not ca._IS_CAPTURING:
                raise AssertionError("_IS_CAPTURING is False inside capture()")
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                if self.rank == 0:  # a warm-up that communicated would hang the others
                    w = ca.custom_all_reduce(static)
                    assert w is not None and w.shape == static.shape
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(graph, stream=side):
                res = ca.custom_all_reduce(static)
        for i in range(20):
            xs, v = self.inputs((1024,), "bfloat16")
            static.copy_(v)
            graph.replay()
            torch.cuda.synchronize()
            e = same(res, reduce_ref(xs, "sum"), "bfloat16")
            if e:
                raise AssertionError("replay %d: %s" % (i, e))
        del graph, res
        # the all-reduce fused into vLLM's fused_add_rms_norm(input, residual, weight, epsilon)
        for dt, quant in (("bfloat16", None), ("float16", "fp8_per_token")):
            xs, inp, res, w = self.rms_data(5, 4096, dt)
            r_ref, out_ref = self.rms_ref(xs, res, w, 1e-6, dt)
            residual, weight = res.to(self.dev), w.to(self.dev)
            if not ca.should_fused_add_rms_norm(inp, residual, weight) or ca.should_fused_add_rms_norm(inp.float()):
                raise AssertionError("should_fused_add_rms_norm: wrong gate")
            got = ca.fused_add_rms_norm(inp, residual, weight, 1e-6, quant=quant)
            torch.cuda.synchronize()
            if quant:
                q8, r_back, scale = got
                qr, sc = self.fp8_ref(inp, quant, scale)
                if not torch.equal(q8.cpu().view(torch.uint8), qr) or not torch.equal(scale.cpu(), sc):
                    raise AssertionError("fused_add_rms_norm fp8: codes or scales")
            elif got[0] is not inp or got[1] is not residual:
                raise AssertionError("fused_add_rms_norm did not return (input, residual)")
            e = None if torch.equal(residual.cpu(), r_ref) else "residual"
            e = e or self.rms_out_error(inp, out_ref, dt)
            if e:
                raise AssertionError("fused_add_rms_norm %s: %s" % (dt, e))
        ca.close()
        if not ca.disabled or ca.should_custom_ar(x) or ca.custom_all_reduce(x) is not None:
            raise AssertionError("still takes tensors after close()")

    def check_custom_allreduce_sizing(self, group):
        """The slot's own context at the default max_size (8 MiB): its heap is
        CustomAllreduce.heap_bytes(W) (where neither IRIS_HEAP_SIZE nor IRIS_COLL_STAGING is
        set here); the largest all-reduce the gate takes (max_size - 16 bytes) is exact; a
        fused add + RMSNorm of 1100 x 4100 bf16 (9 MB, past max_size: the separate path) is
        exact too."""
        it, W = self.it, self.world
        user_env = "IRIS_HEAP_SIZE" in os.environ or "IRIS_COLL_STAGING" in os.environ
        ca = it.CustomAllreduce(group, self.dev)
        try:
            if not user_env:
                want = it.CustomAllreduce.heap_bytes(W)
                if ca.ctx.heap_size != want:
                    raise AssertionError("heap %d bytes, expected %d (heap_bytes(%d))" % (ca.ctx.heap_size, want, W))
            n = (ca.max_size - 16) // 2
            xs, inp = self.inputs((n,), "bfloat16")
            if not ca.should_custom_ar(inp):
                raise AssertionError("refused %d bytes of bf16 (max_size %d)" % (2 * n, ca.max_size))
            out = ca.custom_all_reduce(inp)
            torch.cuda.synchronize()
            e = same(out, reduce_ref(xs, "sum"), "bfloat16")
            if e:
                raise AssertionError("all-reduce of max_size - 16 bytes: %s" % e)
            xs, x, res, w = self.rms_data(1100, 4100, "bfloat16")
            r_ref, out_ref = self.rms_ref(xs, res, w, 1e-6, "bfloat16")
            residual, weight = res.to(self.dev), w.to(self.dev)
            if ca.fused_add_rms_norm(x, residual, weight, 1e-6) is None:
                raise AssertionError("fused_add_rms_norm declined 1100 x 4100 bf16")
            torch.cuda.synchronize()
            e = None if torch.equal(residual.cpu(), r_ref) else "residual differs from the exact reference"
            e = e or self.rms_out_error(x, out_ref, "bfloat16")
            if e:
                raise AssertionError("fused_add_rms_norm 1100 x 4100: %s" % e)
        finally:
            ca.close()
        return "IRIS_HEAP_SIZE or IRIS_COLL_STAGING is set: the heap was not checked" if user_env else None

    # ------------------------------------------------------------ all-reduce + RMSNorm
    def rms_data(self, tokens, hidden, dt):
        """Every rank's x (exact small values), and a residual and weight that are the same on
        every rank (seeded alike), as tensor parallelism has them."""
        xs, x = self.inputs((tokens, hidden), dt)
        g = torch.Generator().manual_seed(self.seed * 7 + 3)
        T = getattr(torch, dt)
        res = (torch.randint(-8, 9, (tokens, hidden), generator=g) * 0.25).to(T)
        w = (torch.randint(1, 17, (hidden,), generator=g) * 0.125).to(T)
        return xs, x, res, w

    @staticmethod
    def rms_ref(xs, res, w, eps, dt):
        """float64 reference: the residual (exact: the sums and the add are exact before the
        one rounding each) and the normalised output (float64, to compare within a rounding)."""
        T = getattr(torch, dt)
        s = reduce_ref(xs, "sum").to(T).to(torch.float64)
        r = (s + res.to(torch.float64)).to(T)
        r64 = r.to(torch.float64)
        out = r64 * torch.rsqrt(r64.pow(2).mean(-1, keepdim=True) + eps) * w.to(torch.float64)
        return r, out

    @staticmethod
    def rms_out_error(got, ref64, dt):
        tol = 1.0 / 128 if dt == "bfloat16" else 1.0 / 1024  # one rounding of the type, relative
        g = got.detach().cpu().to(torch.float64)
        bad = (g - ref64).abs() > tol * ref64.abs() + 1e-6
        if bool(bad.any()):
            i = bad.flatten().nonzero()[0].item()
            return "out at flat index %d: %r, float64 reference %r" % (i, g.flatten()[i].item(), ref64.flatten()[i].item())
        return None

    @staticmethod
    def fp8_ref(out, quant, scale):
        """The codes the library must write for out (bits), and the per-token scales."""
        f = out.detach().cpu().float()
        if quant == "fp8_per_token":
            sc = torch.clamp(f.abs().amax(-1) / 448.0, min=1.0 / (448 * 512)).to(torch.float32)
        else:
            sc = scale.detach().cpu().float().reshape(1)
        inv = (1.0 / sc).to(torch.float32)
        q = (f * (inv.unsqueeze(-1) if quant == "fp8_per_token" else inv)).to(torch.float8_e4m3fn)
        return q.view(torch.uint8), sc

    def check_all_reduce_rmsnorm(self, dt, tokens, hidden, quant, inplace, algo):
        it, ctx = self.it, self.ctx
        eps = 1e-5
        xs, x, res, w = self.rms_data(tokens, hidden, dt)
        r_ref, out_ref = self.rms_ref(xs, res, w, eps, dt)
        residual, weight = res.to(self.dev), w.to(self.dev)
        scale = torch.full((1,), 0.0625, dtype=torch.float32, device=self.dev) if quant == "fp8_per_tensor" else None
        out = x if inplace else poisoned(x.shape, x.dtype, self.dev)
        got = it.all_reduce_rmsnorm(x, residual, weight, ctx, eps=eps, out=out, quant=quant, scale=scale, algo=algo)
        if quant:
            out, q8, scale = got
        else:
            out = got
        torch.cuda.synchronize()
        if inplace and out.data_ptr() != x.data_ptr():
            raise AssertionError("out=x did not write in place")
        if not torch.equal(residual.cpu(), r_ref):
            raise AssertionError("residual differs from the exact reference")
        e = self.rms_out_error(out, out_ref, dt) or self.differs_across_ranks(out) or self.differs_across_ranks(residual)
        if not e and quant:
            qr, sc = self.fp8_ref(out, quant, scale)
            if not torch.equal(q8.cpu().view(torch.uint8), qr):
                e = "fp8 codes differ from quantising out"
            elif quant == "fp8_per_token" and not torch.equal(scale.cpu(), sc):
                e = "per-token scales differ"
            e = e or self.differs_across_ranks(q8)
        if e:
            raise AssertionError(e)

    def check_all_reduce_rmsnorm_graph(self, replays=50):
        """Captured once (fused fp8 per token, then separate), replayed with fresh x; the
        residual evolves in place and every replay is checked."""
        it, ctx = self.it, self.ctx
        eps, tokens, hidden, dt = 1e-6, 8, 4100, "bfloat16"
        _, x, res, w = self.rms_data(tokens, hidden, dt)
        residual, weight = res.to(self.dev), w.to(self.dev)
        y2 = torch.empty_like(x)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up (and the collective state) outside the graph
            it.all_reduce_rmsnorm(x, residual, weight, ctx, eps=eps)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y, q8, sc = it.all_reduce_rmsnorm(x, residual, weight, ctx, eps=eps, quant="fp8_per_token", algo="fused")
            it.all_reduce_rmsnorm(x, residual, weight, ctx, eps=eps, out=y2, algo="separate")
        for i in range(replays):
            xs, v = self.inputs((tokens, hidden), dt)
            x.copy_(v)
            before = residual.cpu()
            graph.replay()
            torch.cuda.synchronize()
            r1, o1 = self.rms_ref(xs, before, w, eps, dt)
            r2, o2 = self.rms_ref(xs, r1, w, eps, dt)
            e = None if torch.equal(residual.cpu(), r2) else "residual"
            e = e or self.rms_out_error(y, o1, dt) or self.rms_out_error(y2, o2, dt)
            if not e:
                qr, scr = self.fp8_ref(y, "fp8_per_token", sc)
                e = None if torch.equal(q8.cpu().view(torch.uint8), qr) and torch.equal(sc.cpu(), scr) else "fp8 codes or scales"
            if e:
                raise AssertionError("replay %d: %s" % (i, e))

    # ------------------------------------------------------------ teams (torch subgroups)
    def team_inputs(self, shape, dt, members):
        """Every world rank's input (the same seed on every rank) and this rank's on the GPU;
        the float64 reference takes the members' only."""
        xs, x = self.inputs(shape, dt)
        return [xs[r] for r in members], x

    def check_team_make(self, grouping, holder):
        """ctx.team(grouping) on every rank, members or not; this rank's Team: members,
        team rank = group rank, found again by team_for (a ProcessGroup or a ranks list)."""
        ctx, r = self.ctx, self.rank
        cur, _ = dist.new_subgroups_by_enumeration(grouping, backend="gloo")
        mine = sorted([g for g in grouping if r in g][0])
        tm = ctx.team(grouping)
        holder.update(team=tm, group=cur, mine=mine)
        if tm is None or tm.ranks != mine or tm.rank != mine.index(r) or tm.world_size != len(mine) or tm.closed:
            raise AssertionError("team %r, expected members %s with team rank %d" % (tm, mine, mine.index(r)))
        if dist.get_process_group_ranks(cur) != mine:
            raise AssertionError("torch's group has ranks %s, the team %s" % (dist.get_process_group_ranks(cur), mine))
        want = ctx if mine == list(range(self.world)) else tm
        if ctx.team_for(cur) is not want or ctx.team_for(list(reversed(mine))) is not want:
            raise AssertionError("team_for does not give this rank's team back")

    def check_team_all_reduce(self, h, dt, n, mode):
        """all_reduce over the group (group=) against the float64 sum of its members' inputs;
        the first member arrives late. mode: functional (off the heap: beyond the latency
        path through the split's staging areas), inplace, heap (a heap tensor, in place)."""
        it, ctx, pg, mine = self.it, self.ctx, h["group"], h["mine"]
        xs, x = self.team_inputs((n,), dt, mine)
        ref = reduce_ref(xs, "sum")
        x0 = x.clone()
        if self.rank == mine[0]:
            time.sleep(0.02)
        if mode == "functional":
            y = it.all_reduce(x, ctx, "sum", group=pg)
        elif mode == "out":
            y = poisoned((n,), x.dtype, self.dev)
            it.all_reduce(x, ctx, "sum", out=y, group=pg)
        elif mode == "inplace":
            y = it.all_reduce_(x, ctx, "sum", group=pg)
        else:
            y = poisoned((n,), x.dtype, self.dev, ctx)
            y.copy_(x)
            it.all_reduce_(y, h["team"])  # the Team where a Context goes
        torch.cuda.synchronize()
        if mode in ("functional", "out") and not torch.equal(x.view(torch.uint8), x0.view(torch.uint8)):
            raise AssertionError("the out-of-place all_reduce modified its input")
        verify(y, ref, dt)

    def check_team_collectives(self, h, dt, m):
        """all_gather, reduce_scatter, all_to_all, broadcast (root: the last team rank) and
        barrier over the group, in team order, against float64 references; poisoned outputs."""
        it, ctx, pg, mine = self.it, self.ctx, h["group"], h["mine"]
        S, tr = len(mine), mine.index(self.rank)
        xs, x = self.team_inputs((m,), dt, mine)
        y = poisoned((S * m,), x.dtype, self.dev)
        it.all_gather(x, ctx, out=y, group=pg)
        verify(y, torch.cat([a.to(torch.float64) for a in xs]), dt)
        xs, x = self.team_inputs((S * m,), dt, mine)
        verify(it.reduce_scatter(x, ctx, group=pg), reduce_ref(xs, "sum")[tr * m:(tr + 1) * m], dt)
        xs, x = self.team_inputs((S * m,), dt, mine)
        verify(it.all_to_all(x, ctx, group=pg), torch.cat([a[tr * m:(tr + 1) * m].to(torch.float64) for a in xs]), dt)
        xs, x = self.team_inputs((m,), dt, mine)
        y = poisoned((m,), x.dtype, self.dev)
        it.broadcast(x, ctx, root=S - 1, out=y, group=pg)
        verify(y, xs[S - 1].to(torch.float64), dt)
        it.barrier(ctx, group=pg)
        torch.cuda.synchronize()

    def check_team_graph(self, h, n, replays=30):
        """all_reduce over the group captured into a CUDA graph on a side stream, replayed
        with fresh inputs, every replay checked."""
        it, ctx, pg, mine = self.it, self.ctx, h["group"], h["mine"]
        x = torch.zeros(n, dtype=torch.float32, device=self.dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            it.all_reduce(x, ctx, group=pg)  # warm-up outside the graph
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            y = it.all_reduce(x, ctx, group=pg)
        for i in range(replays):
            xs, v = self.team_inputs((n,), "float32", mine)
            x.copy_(v)
            graph.replay()
            torch.cuda.synchronize()
            e = same(y, reduce_ref(xs, "sum"), "float32")
            if e:
                raise AssertionError("replay %d: %s" % (i, e))

    def check_team_serving(self, h, own_context):
        """CustomAllreduce on the TP subgroup: on ctx's team (ctx=, local construction) or on
        a context of its own over the subgroup; sums small and beyond the latency path, and
        graph replays, against float64."""
        it, ctx, pg, mine = self.it, self.ctx, h["group"], h["mine"]
        if own_context:
            ca = it.CustomAllreduce(pg, self.dev, max_size=8 << 20, heap_size=256 << 20)
        else:
            ca = it.CustomAllreduce(pg, self.dev, max_size=8 << 20, ctx=ctx)
        if ca.world_size != len(mine) or ca.rank != mine.index(self.rank):
            raise AssertionError("world_size %d rank %d, expected %d, %d" % (ca.world_size, ca.rank, len(mine), mine.index(self.rank)))
        if len(mine) == 1:
            ok = ca.disabled and ca.custom_all_reduce(torch.ones(64, device=self.dev)) is None
            ca.close()
            return None if ok else "a group of one is not disabled"
        for n in (1024, 3 << 19):  # 2 KB, 3 MB of bf16
            xs, inp = self.team_inputs((n,), "bfloat16", mine)
            inp0 = inp.clone()
            out = ca.custom_all_reduce(inp)
            torch.cuda.synchronize()
            if out is None:
                raise AssertionError("refused %d bf16 elements" % n)
            e = same(out, reduce_ref(xs, "sum"), "bfloat16")
            if e or not torch.equal(inp, inp0):
                raise AssertionError("n=%d: %s" % (n, e or "the input was modified"))
        static = torch.zeros(4096, dtype=torch.bfloat16, device=self.dev)
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        with ca.capture():
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                w = ca.custom_all_reduce(static)  # warm-up: no communication
                assert w is not None and w.shape == static.shape
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(graph, stream=side):
                res = ca.custom_all_reduce(static)
        for i in range(20):
            xs, v = self.team_inputs((4096,), "bfloat16", mine)
            static.copy_(v)
            graph.replay()
            torch.cuda.synchronize()
            e = same(res, reduce_ref(xs, "sum"), "bfloat16")
            if e:
                raise AssertionError("replay %d: %s" % (i, e))
        del graph, res
        ca.close()
        if not own_context and ctx.closed:
            raise AssertionError("closing the slot closed the shared context")
        return None

    def check_team_errors(self, h):
        """Refusals name the rule: a group without a team, a rank outside the group, group=
        beside a Team, a bad root (a team rank)."""
        it, ctx, pg, mine = self.it, self.ctx, h["group"], h["mine"]
        x = torch.ones(64, device=self.dev)
        others = [r for r in range(self.world) if r != self.rank]
        if others:
            expect_raise(ValueError, "not a member", lambda: it.all_reduce(x, ctx, group=others))
        outside = [r for r in range(self.world) if r not in mine]
        bigger = tuple(sorted(set(mine) | set(outside[:1])))
        if outside and len(bigger) < self.world and bigger not in ctx._team_of:
            expect_raise(RuntimeError, "no team for the group", lambda: it.all_reduce(x, ctx, group=list(bigger)))
        expect_raise(TypeError, "group=", lambda: it.all_reduce(x, h["team"], group=pg))
        expect_raise(ValueError, "root", lambda: it.broadcast(x, ctx, root=len(mine), group=pg))

    def check_team_no_state(self, grouping):
        """A third split finds the pool of collective states (IRIS_TEAMS_COLL, default 2)
        taken: its team exists, and a collective raises IrisError IRIS_ERROR_UNSUPPORTED with
        the library's detail (a team of one still copies). Then closed (collective over its
        members)."""
        it, ctx = self.it, self.ctx
        tm = ctx.team(grouping)
        try:
            x = torch.ones(64, device=self.dev)
            if tm.has_collectives:
                y = it.all_reduce(x, tm)
                torch.cuda.synchronize()
                if not torch.equal(y, x * tm.world_size):
                    raise AssertionError("wrong sum")
                return "this team got a collective state (IRIS_TEAMS_COLL above 2?)" if tm.world_size > 1 else None
            try:
                it.all_reduce(x, tm)
            except it.IrisError as e:
                if e.status_name != "IRIS_ERROR_UNSUPPORTED" or not e.detail:
                    raise AssertionError("IrisError %s with detail %r" % (e.status_name, e.detail))
                return None
            raise AssertionError("a team without a collective state ran a collective")
        finally:
            tm.close()

    def check_team_new_group(self, grouping):
        """After the grouping's teams are closed: it.new_group per group, one at a time, on
        every rank (members and the others, as torch's new_group); each group's all_reduce
        on its team; the teams closed."""
        it, ctx = self.it, self.ctx
        made = []
        for g in grouping:
            made.append((g, it.new_group(g, ctx, backend="gloo")))
        for g, pg in made:
            if self.rank not in g:
                continue
            xs, x = self.team_inputs((70001,), "float32", g)
            verify(it.all_reduce(x, ctx, group=pg), reduce_ref(xs, "sum"), "float32")
            t = ctx.team_for(pg)
            if t is not ctx:
                t.close()

    def check_team_staged_chunks(self, dt):
        """A team of every rank (a split: not the context itself) with 64 KiB staging areas:
        every collective with tensors off the heap staged by the library in many chunks (16 K
        fp32 per area), against float64 references, outputs poisoned; the all_reduce in
        place too and on a side stream; 3 rounds. Closed after."""
        it, ctx, W, me = self.it, self.ctx, self.world, self.rank
        tm = ctx.team([list(range(W))], staging_bytes=64 << 10)
        try:
            everyone = list(range(W))
            for rnd in range(3):
                n, m = 100003 + rnd, 20001 + rnd
                xs, x = self.team_inputs((n,), dt, everyone)
                verify(it.all_reduce(x, tm), reduce_ref(xs, "sum"), dt)
                xs, x = self.team_inputs((n,), dt, everyone)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    it.all_reduce_(x, tm, "max")
                torch.cuda.current_stream().wait_stream(side)
                verify(x, reduce_ref(xs, "max"), dt)
                xs, x = self.team_inputs((m,), dt, everyone)
                y = poisoned((W * m,), x.dtype, self.dev)
                it.all_gather(x, tm, out=y)
                verify(y, torch.cat([a.to(torch.float64) for a in xs]), dt)
                xs, x = self.team_inputs((W * m,), dt, everyone)
                verify(it.reduce_scatter(x, tm), reduce_ref(xs, "sum")[me * m:(me + 1) * m], dt)
                xs, x = self.team_inputs((W * m,), dt, everyone)
                verify(it.all_to_all(x, tm), torch.cat([a[me * m:(me + 1) * m].to(torch.float64) for a in xs]), dt)
                xs, x = self.team_inputs((n,), dt, everyone)
                y = poisoned((n,), x.dtype, self.dev)
                it.broadcast(x, tm, root=(rnd + 1) % W, out=y)
                verify(y, xs[(rnd + 1) % W].to(torch.float64), dt)
            tm.check()
        finally:
            tm.close()

    def fresh_context(self):
        """A context of its own (every rank, in this order) with short bounds: a kernel's wait
        runs out after 20 s, a store exchange after 60 s, so a case that would hang fails
        within a minute; a fault there leaves the suite's context alone."""
        keys = ("IRIS_WAIT_TIMEOUT_MS", "IRIS_BARRIER_TIMEOUT_MS")
        saved = {k: os.environ.get(k) for k in keys}
        os.environ.update(IRIS_WAIT_TIMEOUT_MS="20000", IRIS_BARRIER_TIMEOUT_MS="60000")
        try:
            return self.it.Context()  # the default heap: a smaller one has no team collective states
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def check_refused_input_in_step(self):
        """An all_reduce whose input is unusable on the last rank only (on the CPU, then
        complex64), on the world and on a team of every rank, on a context of its own: the
        last rank raises, saying the call took part (a call the library refuses); every
        rank's check() reports IRIS_ERROR_MISMATCH within seconds, no output was written,
        and the next call is exact everywhere."""
        it, dev, W, me = self.it, self.dev, self.world, self.rank
        c = self.fresh_context()
        try:
            tm = c.team([list(range(W))])
            n, step = 4096, 0
            for target in (c, tm):
                for bad in (lambda: torch.ones(n), lambda: torch.ones(n, dtype=torch.complex64, device=dev)):
                    step += 1
                    y = poisoned((n,), torch.float32, dev)
                    torch.cuda.synchronize()
                    t0 = time.time()
                    if me == W - 1:
                        try:
                            it.all_reduce(bad(), target, out=y)
                        except (ValueError, TypeError) as e:
                            if "took part" not in str(e):
                                raise AssertionError("step %d: the refusal did not take part: %s" % (step, e))
                        else:
                            raise AssertionError("step %d: a bad input was taken" % step)
                    else:
                        it.all_reduce(torch.ones(n, device=dev), target, out=y)
                    self.settle_in_step(target, y, t0, True, "step %d" % step)
            tm.close()
        finally:
            c.close()

    def settle_in_step(self, target, y, t0, mismatch, what):
        """After a call some rank made differently (mismatch) or every rank alike: check()
        reports IRIS_ERROR_MISMATCH, or nothing; within 15 s of t0 (no wait ran to its
        bound); y (poisoned, 0x7b) untouched; then an all_reduce into y exact everywhere."""
        it, dev, W, me = self.it, self.dev, self.world, self.rank
        torch.cuda.synchronize()
        try:
            target.check()
        except it.IrisError as e:
            if not mismatch or e.status_name != "IRIS_ERROR_MISMATCH":
                raise AssertionError("%s: check() raised %s: %s" % (what, e.status_name, e))
        else:
            if mismatch:
                raise AssertionError("%s: check() reported no mismatch" % what)
        if time.time() - t0 > 15:
            raise AssertionError("%s: %.1f s: a wait ran to its bound" % (what, time.time() - t0))
        if not bool((y.view(torch.uint8) == 0x7B).all()):
            raise AssertionError("%s: a call against another wrote its output" % what)
        x = torch.full((y.numel(),), float(me + 1), device=dev)
        it.all_reduce(x, target, out=y)
        torch.cuda.synchronize()
        target.check()
        if not bool((y == float(W * (W + 1) // 2)).all()):
            raise AssertionError("%s: the call after it gave %s" % (what, y[:4].tolist()))

    def check_empty_in_step(self):
        """A collective of no elements, on the world and on a team of every rank: on every
        rank it succeeds, nothing is reported and the next call is exact; on the last rank
        only (the others all_reduce 4096 floats), every rank's check() reports
        IRIS_ERROR_MISMATCH within seconds (the empty call took part in the library), no
        output was written, and the next call is exact everywhere."""
        it, dev, W, me = self.it, self.dev, self.world, self.rank
        c = self.fresh_context()
        try:
            tm = c.team([list(range(W))])
            n = 4096
            for target in (c, tm):
                for one in (False, True):
                    y = poisoned((n,), torch.float32, dev)
                    torch.cuda.synchronize()
                    t0 = time.time()
                    if me == W - 1 or not one:
                        e = it.all_reduce(torch.ones(0, device=dev), target)
                        if e.numel() != 0:
                            raise AssertionError("an empty all_reduce gave %d elements" % e.numel())
                    else:
                        it.all_reduce(torch.ones(n, device=dev), target, out=y)
                    self.settle_in_step(target, y, t0, one, "empty on %s" % ("one rank" if one else "every rank"))
            tm.close()
        finally:
            c.close()

    def check_team_staged_mismatch(self, what):
        """A staged team all-reduce (off the heap, 1 MiB staging areas: chunks of 256 K
        floats) whose members differ: what "count" (1 M floats on team rank 0, 600 K on the
        others: the first chunk alike in size), "op" (sum on team rank 0, max on the others).
        Every member's check() reports IRIS_ERROR_MISMATCH within seconds (the first chunk
        mismatches, fatally for the team), and no member's output was written (poisoned
        before). On a context of its own with a short wait bound, closed after."""
        it, dev = self.it, self.dev
        c = self.fresh_context()
        try:
            tm = c.team([list(range(self.world))], staging_bytes=1 << 20)
            n = 1000000 if what == "count" and tm.rank == 0 else 600000
            op = "max" if what == "op" and tm.rank != 0 else "sum"
            x = make_input((n,), "float32", self.rank, 4242).to(dev)
            y = poisoned((n,), torch.float32, dev)
            torch.cuda.synchronize()
            t0 = time.time()
            try:
                it.all_reduce(x, tm, op, out=y)
            except it.IrisError:  # a later chunk may already find the fault on the host
                pass
            torch.cuda.synchronize()
            try:
                tm.check()
            except it.IrisError as e:
                if e.status_name != "IRIS_ERROR_MISMATCH":
                    raise AssertionError("check() raised %s, not IRIS_ERROR_MISMATCH: %s" % (e.status_name, e))
            else:
                raise AssertionError("check() reported no mismatch")
            if time.time() - t0 > 15:
                raise AssertionError("%.1f s: a wait ran to its bound" % (time.time() - t0))
            if not bool((y.view(torch.uint8) == 0x7B).all()):
                raise AssertionError("a mismatched staged call wrote its output")
            del x, y
        finally:
            c.close()

    def check_team_check_shapes(self):
        """A team of every rank with check_shapes=True: an all_reduce of one more element on
        the last member raises ValueError on every member (their exchange), nothing
        launched; the next matching call is exact. The team's setting follows the context's
        until set. Closed after."""
        it, ctx, W, me = self.it, self.ctx, self.world, self.rank
        tm = ctx.team([list(range(W))])
        try:
            if tm.check_shapes != ctx.check_shapes:
                raise AssertionError("the team's check_shapes does not follow the context's")
            tm.check_shapes = True
            n = 5000 + (1 if me == W - 1 else 0)
            t0 = time.time()
            expect_raise(ValueError, "mismatch in team", lambda: it.all_reduce(torch.ones(n, device=self.dev), tm))
            if time.time() - t0 > 20:
                raise AssertionError("%.1f s for the exchange" % (time.time() - t0))
            xs, x = self.team_inputs((5000,), "float32", list(range(W)))
            verify(it.all_reduce(x, tm), reduce_ref(xs, "sum"), "float32")
            tm.check()
        finally:
            tm.close()

    def check_team_non_member(self):
        """dist.new_group(ranks 0 .. W-2) gives the last rank GroupMember.NON_GROUP_MEMBER;
        ctx.team(that) on every rank: the last opts out (None), the members get their team
        (an exact all_reduce over it); then groups refused on the last rank only (overlapping):
        it raises ValueError, the others' split still ends within seconds (the last took
        part opting out). The teams closed after."""
        it, ctx, W, me = self.it, self.ctx, self.world, self.rank
        members = list(range(W - 1))
        pg = dist.new_group(members, backend="gloo")
        tm = ctx.team(pg)
        if (me == W - 1) != (tm is None):
            raise AssertionError("rank %d: ctx.team(new_group's group) gave %r" % (me, tm))
        if tm is not None:
            xs, x = self.team_inputs((70001,), "float32", members)
            verify(it.all_reduce(x, tm), reduce_ref(xs, "sum"), "float32")
            tm.close()
        t0 = time.time()
        if me == W - 1:
            expect_raise(ValueError, "disjoint", lambda: ctx.team([[0, 1], [1]]))
            t2 = None
        else:
            t2 = ctx.team([members])
        if time.time() - t0 > 20:
            raise AssertionError("%.1f s: the split waited for the refusing rank" % (time.time() - t0))
        if t2 is not None:
            if t2.ranks != members:
                raise AssertionError("the team without the refusing rank has members %s" % t2.ranks)
            t2.close()

    # ------------------------------------------------------------ bad input
    def check_bad_input(self):
        it, ctx = self.it, self.ctx
        x = torch.ones(64, device=self.dev)
        cases = [
            (ValueError, "on cpu", lambda: it.all_reduce(torch.ones(64), ctx)),
            (ValueError, "not contiguous", lambda: it.all_reduce(torch.ones(64, 2, device=self.dev)[:, 0], ctx)),
            (TypeError, "not supported", lambda: it.all_reduce(torch.ones(64, dtype=torch.complex64, device=self.dev), ctx)),
            (TypeError, "avg", lambda: it.all_reduce(torch.ones(64, dtype=torch.int32, device=self.dev), ctx, "avg")),
            (ValueError, "prod", lambda: it.all_reduce(x, ctx, "prod")),
            (ValueError, "must be equal", lambda: it.all_reduce(x, ctx, out=torch.empty(65, device=self.dev))),
            (TypeError, "dtype", lambda: it.all_reduce(x, ctx, out=torch.empty(64, dtype=torch.float16, device=self.dev))),
            (ValueError, "world_size", lambda: it.all_gather(x, ctx, out=torch.empty(65, device=self.dev))),
            (ValueError, "multiple of world_size", lambda: it.reduce_scatter(torch.ones(self.world * 4 + 1, device=self.dev), ctx)),
            (ValueError, "root", lambda: it.broadcast(x, ctx, root=self.world)),
            (it.IrisError, "IRIS_ERROR_OUT_OF_MEMORY", lambda: ctx.empty((ctx.heap_size,), torch.float32)),
        ]
        if torch.cuda.device_count() > 1:
            other = (self.dev.index + 1) % torch.cuda.device_count()
            cases.append((ValueError, "cuda:%d" % other, lambda: it.all_reduce(torch.ones(64, device="cuda:%d" % other), ctx)))
        for exc, text, fn in cases:
            try:
                fn()
            except exc as e:
                if text not in str(e):
                    raise AssertionError("%s raised %r, which does not say %r" % (text, e, text))
            else:
                raise AssertionError("no %s for %s" % (exc.__name__, text))
        # shapes that differ across ranks: with check_shapes, an exception on every rank, no hang
        ctx.check_shapes = True
        try:
            it.all_reduce(torch.ones(64 + self.rank, device=self.dev), ctx)
        except ValueError as e:
            if "mismatch" not in str(e):
                raise
        else:
            raise AssertionError("ranks with different shapes were not refused")
        finally:
            ctx.check_shapes = False
        torch.cuda.synchronize()

    def check_coll_one_rank_refusal(self):
        """A collective (and all_reduce_rmsnorm) refused in Python on the last rank only (an
        out of the wrong size, a residual of the wrong shape) still takes part there with
        its input: the other ranks' results are exact, the next calls on every rank pair
        as before, and no wait ran out."""
        it, ctx, dev, W, me = self.it, self.ctx, self.dev, self.world, self.rank
        last = W - 1
        for call in range(3):
            x = torch.full((1000,), float(me + 1 + call), device=dev)
            want = float(sum(r + 1 + call for r in range(W)))
            if call == 0 and me == last:
                expect_raise(ValueError, "took part", lambda: it.all_reduce(x, ctx, out=torch.empty(999, device=dev)))
                continue
            y = it.all_reduce(x, ctx)
            torch.cuda.synchronize()
            if not bool((y == want).all()):
                raise AssertionError("call %d: all_reduce gave %s, not %g" % (call, y[:4].tolist(), want))
        xs, inp, res, w = self.rms_data(4, 256, "bfloat16")
        r_ref, out_ref = self.rms_ref(xs, res, w, 1e-6, "bfloat16")
        residual, weight = res.to(dev), w.to(dev)
        if me == last:
            expect_raise(ValueError, "took part", lambda: it.all_reduce_rmsnorm(inp, residual[:, :128], weight, ctx))
        else:
            out = it.all_reduce_rmsnorm(inp, residual, weight, ctx)
            torch.cuda.synchronize()
            e = (None if torch.equal(residual.cpu(), r_ref) else "residual") or self.rms_out_error(out, out_ref, "bfloat16")
            if e:
                raise AssertionError("all_reduce_rmsnorm beside a refusal: %s" % e)
        torch.cuda.synchronize()
        ctx.check()  # nothing ran out, no mismatch: the refused calls paired with the peers'
        ctx.async_error()

    def check_op_one_rank_refusal(self):
        """torch.ops.iris.all_reduce_out called directly (as compiled code calls it) with an
        out of the wrong size on rank 0 only still takes part there with its input, once:
        the other ranks' sums are exact, the next calls on every rank pair as before, no
        wait ran out and every rank is done within a minute."""
        ctx, dev, W, me = self.ctx, self.dev, self.world, self.rank
        t0 = time.time()
        for call in range(3):
            x = torch.full((1000,), float(me + 1 + call), device=dev)
            want = float(sum(r + 1 + call for r in range(W)))
            if call == 0 and me == 0:
                try:
                    torch.ops.iris.all_reduce_out(x, torch.empty(999, device=dev), ctx.id, "sum")
                except ValueError as e:
                    if str(e).count("took part") != 1:
                        raise AssertionError("the refusal should say once that it took part: %s" % e)
                else:
                    raise AssertionError("no ValueError for an out of 999 elements")
                continue
            out = torch.empty(1000, device=dev)
            torch.ops.iris.all_reduce_out(x, out, ctx.id, "sum")
            torch.cuda.synchronize()
            if not bool((out == want).all()):
                raise AssertionError("call %d: all_reduce_out gave %s, not %g" % (call, out[:4].tolist(), want))
        torch.cuda.synchronize()
        ctx.check()  # nothing ran out, no mismatch: the refused call paired with the peers'
        ctx.async_error()
        if time.time() - t0 > 60:
            raise AssertionError("%.0f s: a rank waited for a call" % (time.time() - t0))

    def check_triton(self):
        """The example's producer/consumer ring kernel (iris_gpu.triton), 20 launches."""
        import importlib.util

        if importlib.util.find_spec("triton") is None:
            return "triton is not installed"
        sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))
        from triton_ring import Ring

        ring = Ring(self.ctx, 70001)
        prev = (self.rank - 1) % self.world
        for i in range(20):
            src = torch.arange(ring.n, dtype=torch.float32, device=self.dev) + 1000 * self.rank + i
            out = ring(src)
            want = (torch.arange(ring.n, dtype=torch.float64) + 1000 * prev + i) * 2 + 1
            e = same(out, want, "float32")
            if e:
                raise AssertionError("launch %d: %s" % (i, e))

    def check_ag_gemm(self):
        it, ctx, W, r = self.it, self.ctx, self.world, self.rank
        M, N, K = 64 * W, 256, 512
        try:
            plan = ctx.ag_gemm_plan(M, N, K, torch.bfloat16, torch.float32, layout="rows", b_transposed=True)
        except it.IrisError as e:
            if e.status == 11:
                return "ag_gemm unsupported by this build: %s" % e.detail
            raise
        g = torch.Generator().manual_seed(5)
        b = (torch.randint(-4, 5, (N, K), generator=g) * 0.25).to(torch.bfloat16)
        shards = [(torch.randint(-4, 5, (M // W, K), generator=torch.Generator().manual_seed(10 + q)) * 0.25).to(torch.bfloat16) for q in range(W)]
        c = it.ag_gemm(shards[r].to(self.dev), b.to(self.dev), plan)
        torch.cuda.synchronize()
        ref = torch.cat(shards).double() @ b.double().t()
        e = same(c, ref, "float32")
        plan.close()
        if e:
            raise AssertionError("%s (path %s)" % (e, plan.path if plan._g else "?"))

    def check_ag_gemm_fp8(self):
        """fp8 e4m3 all-gather + GEMM (pipelined and unfused), one A scale for the gathered A
        and one B scale (powers of two, the same on every rank), bf16 out with bias, against
        float64 within the fp8 accumulation slack; 5 calls with fresh A and scales."""
        it, ctx, W, r = self.it, self.ctx, self.world, self.rank
        M, N, K = 48 * W, 264, 512
        for path in ("pipelined", "unfused"):
            plan = ctx.ag_gemm_plan(M, N, K, torch.float8_e4m3fn, torch.bfloat16, layout="rows", b_transposed=True, bias=True, path=path)
            for call in range(5):
                g = torch.Generator().manual_seed(1000 + 17 * call)
                ex = lambda *shape: torch.randint(-8, 9, shape, generator=g).to(torch.float64) / 8  # noqa: E731
                A, B, bias = ex(M, K), ex(N, K), torch.randint(-32, 33, (N,), generator=g).to(torch.float64) / 8
                sa, sb = (2.0 ** torch.randint(-2, 3, (2,), generator=g).to(torch.float64)).tolist()
                ref = sa * sb * (A @ B.t()) + bias
                slack = abs(sa * sb) * (A.abs() @ B.abs().t()) * 2.0 ** -12
                f8 = lambda t: t.to(torch.float32).to(torch.float8_e4m3fn).to(self.dev)  # noqa: E731
                scale = lambda v: torch.tensor([v], dtype=torch.float32, device=self.dev)  # noqa: E731
                rows = M // W
                c = it.ag_gemm(f8(A[r * rows:(r + 1) * rows].contiguous()), f8(B), plan, bias=bias.to(torch.bfloat16).to(self.dev),
                               a_scale=scale(sa), b_scale=scale(sb))
                torch.cuda.synchronize()
                e = self.gemm_error(c, ref, "bfloat16", slack)
                if e:
                    plan.close()
                    raise AssertionError("%s, call %d: %s" % (path, call, e))
            if plan.path != path:
                raise AssertionError("plan path %s, asked for %s" % (plan.path, path))
            try:
                it.ag_gemm(f8(A[:rows].contiguous()), f8(B), plan, bias=bias.to(torch.bfloat16).to(self.dev))
                raise AssertionError("an fp8 plan without scales was not refused")
            except ValueError:
                pass
            plan.close()

    # ------------------------------------------------------------ GEMM + reduce-scatter / all-reduce
    def gemm_data(self, op, rows, N, kl, dt, out_dt, bt, bias, exact=False):
        """Every rank's inputs from the next seed (the same on every process), this rank's on
        the device, and the float64 reference of this rank's output. Values are multiples of
        1/8 in [-1, 1] (exact in bf16, fp16 and e4m3; fp8 scales are powers of two), so every
        product and sum is exact in fp32. With fp32 partials (exact=True, an fp32 out_dt, or
        mixed 16-bit types) the only rounding is the final one: results must equal the
        reference rounded to out_dt. With partials in out_dt (the default) each rank's
        partial P_r is rounded once more: slack u * sum_r |P_r| (u = 2^-8 bf16, 2^-11 fp16).
        Returns (a, b, bias, a_scale, b_scale,
        ref, slack): slack, fp8 only, is 2^-12 of the sum of |terms| (Hopper's fp8 MMA
        accumulates blocks of K in less than fp32; docs/gemm_reduce.md)."""
        W, r = self.world, self.rank
        self.seed += 1
        g = torch.Generator().manual_seed(self.seed * 7919)
        ex = lambda *shape: torch.randint(-8, 9, shape, generator=g).to(torch.float64) / 8  # noqa: E731
        A = [ex(rows * W, kl) for _ in range(W)]
        B = [ex(kl, N) for _ in range(W)]  # as K/W x N; stored transposed for bt
        fp8 = dt == "float8_e4m3fn"
        sc = [(2.0 ** torch.randint(-2, 3, (2,), generator=g).to(torch.float64)).tolist() if fp8 else (1.0, 1.0) for _ in range(W)]
        c = sum(sa * sb * (a @ b) for a, b, (sa, sb) in zip(A, B, sc))
        slack = sum(abs(sa * sb) * (a.abs() @ b.abs()) for a, b, (sa, sb) in zip(A, B, sc)) * 2.0 ** -12 if fp8 else None
        if not exact and out_dt != "float32" and (dt == out_dt or fp8):  # partials rounded to out_dt on the wire
            wire = sum((sa * sb * (a @ b)).abs() for a, b, (sa, sb) in zip(A, B, sc)) * {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}[out_dt]
            slack = wire if slack is None else slack + wire
        bias_t = None
        if bias:
            bv = torch.randint(-32, 33, (N,), generator=g).to(torch.float64) / 8
            c = c + bv
            bias_t = bv.to(getattr(torch, out_dt)).to(self.dev)
        if op == "reduce_scatter":
            c = c[r * rows:(r + 1) * rows]
            slack = slack[r * rows:(r + 1) * rows] if slack is not None else None
        to = lambda t: t.to(torch.float32).to(getattr(torch, dt)).to(self.dev)  # noqa: E731
        a_t, b_t = to(A[r]), to(B[r].t().contiguous() if bt else B[r])
        scales = [torch.tensor([v], dtype=torch.float32, device=self.dev) for v in sc[r]] if fp8 else [None, None]
        return a_t, b_t, bias_t, scales[0], scales[1], c, slack

    def gemm_error(self, got, ref, out_dt, slack=None):
        """None, or what differs between got and the reference (exact, or within slack plus
        one rounding of out_dt for fp8)."""
        if slack is None:
            return same(got, ref, out_dt)
        g = got.detach().cpu().to(torch.float64)
        if g.shape != ref.shape:
            return "shape %s, expected %s" % (tuple(g.shape), tuple(ref.shape))
        eps = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[out_dt]
        err = (g - ref).abs() - (slack + ref.abs() * eps)
        if bool((err <= 0).all()):
            return None
        i = err.flatten().argmax().item()
        return "at flat index %d: got %r, expected %r (slack %r)" % (i, g.flatten()[i].item(), ref.flatten()[i].item(), slack.flatten()[i].item())

    def differs_across_ranks(self, t):
        """None if t has the same bytes on every rank (collective), else which ranks differ."""
        mine = t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        allb = [None] * self.world
        dist.all_gather_object(allb, mine)
        bad = [q for q, x in enumerate(allb) if x != allb[0]]
        return "ranks %s differ from rank 0 bitwise" % bad if bad else None

    def gemm_plan(self, op, rows, N, kl, dt, out_dt, bt, bias, path, exact=False):
        W = self.world
        return self.ctx.gemm_reduce_plan(op, rows * W, N, kl * W, dtype=getattr(torch, dt), out_dtype=getattr(torch, out_dt), b_transposed=bt, bias=bias, path=path,
                                         exact=exact)

    def check_gemm_reduce(self, op, dt, out_dt, bt, bias, path, rows, N, kl, calls=2, plan=None, exact=False):
        """One plan (collective create; path "auto" must pick pipelined for W > 1 from 256 rows
        per rank, unfused below), `calls`
        runs with fresh inputs into a poisoned out= buffer, then one functional run; each
        against the float64 reference; all_reduce: the same bits on every rank. Every rank
        makes every call whatever it finds (errors are raised at the end), so a wrong result
        on one rank cannot leave the others waiting."""
        it = self.it
        own = plan is None
        plan = plan or self.gemm_plan(op, rows, N, kl, dt, out_dt, bt, bias, path, exact)
        errs = []
        try:
            want = {"auto": "pipelined" if self.world > 1 and rows >= 256 else "unfused"}.get(path, path)
            if plan.path != want:
                errs.append("the plan runs path %s, not %s" % (plan.path, want))
            fn = it.gemm_reduce_scatter if op == "reduce_scatter" else it.gemm_all_reduce
            for i in range(calls + 1):
                a, b, bias_t, sa, sb, ref, slack = self.gemm_data(op, rows, N, kl, dt, out_dt, bt, bias, exact or path == "fused")
                if i < calls:
                    out = poisoned(plan.c_shape, plan.out_dtype, self.dev)
                    got = fn(a, b, plan, bias=bias_t, a_scale=sa, b_scale=sb, out=out)
                    if got is not out:
                        errs.append("out= did not return out")
                else:
                    got = fn(a, b, plan, bias_t, sa, sb)
                torch.cuda.synchronize()
                e = self.gemm_error(got, ref, out_dt, slack)
                if op == "all_reduce":
                    e = e or self.differs_across_ranks(got)
                if e:
                    errs.append("call %d (%s): %s" % (i, "out=" if i < calls else "functional", e))
        finally:
            if own:
                plan.close()
        if errs:
            raise AssertionError("; ".join(errs[:3]))

    def fused_unsupported(self):
        """None where the library makes fused plans here, else why not (its detail)."""
        try:
            self.gemm_plan("reduce_scatter", 8, 16, 16, "bfloat16", "bfloat16", True, False, "fused").close()
            return None
        except self.it.IrisError as e:
            if e.status_name != "IRIS_ERROR_UNSUPPORTED":
                raise
            return e.detail

    def check_gemm_reduce_refusals(self):
        """What this library version does not have (the kernel-unfused path; fp8 on the
        fused path): a clean IrisError (UNSUPPORTED) on every rank, and the context works
        afterwards."""
        it = self.it
        for path, dt in (("kernel_unfused", "bfloat16"), ("fused", "float8_e4m3fn")):
            try:
                self.gemm_plan("reduce_scatter", 8, 16, 16, dt, "bfloat16", True, False, path).close()
            except it.IrisError as e:
                if e.status_name != "IRIS_ERROR_UNSUPPORTED" or "iris_gemm_rs_create" not in str(e):
                    raise AssertionError("path %s, %s: %r" % (path, dt, e))
                continue
            return "path %s with %s was accepted by this library: test it like the others" % (path, dt)
        self.check_gemm_reduce("all_reduce", "bfloat16", "bfloat16", True, False, "unfused", 8, 16, 16, calls=1)

    def fp8_plan(self, op, out_dt, path, rows=16, N=24, kl=32):
        """An fp8 plan, or the reason the library refused it (IRIS_ERROR_UNSUPPORTED, raised
        cleanly: anything else fails)."""
        try:
            return self.gemm_plan(op, rows, N, kl, "float8_e4m3fn", out_dt, True, True, path), None
        except self.it.IrisError as e:
            if e.status_name != "IRIS_ERROR_UNSUPPORTED":
                raise
            return None, e.detail

    def check_gemm_reduce_fp8(self, op, out_dt, path):
        plan, why = self.fp8_plan(op, out_dt, path)
        if plan is None:
            return "fp8 refused cleanly by this library (IRIS_ERROR_UNSUPPORTED: %s)" % why
        try:
            self.check_gemm_reduce(op, "float8_e4m3fn", out_dt, True, True, path, 16, 24, 32, plan=plan)
            # an fp8 plan without scales, or B not transposed: Python / library refusals
            a, b, bias_t, sa, sb, _, _ = self.gemm_data(op, 16, 24, 32, "float8_e4m3fn", out_dt, True, True)
            expect_raise(ValueError, "needs a_scale and b_scale", lambda: self.it.gemm_reduce(a, b, plan, bias_t, sa))
        finally:
            plan.close()
        try:
            self.gemm_plan(op, 16, 24, 32, "float8_e4m3fn", out_dt, False, False, path).close()
        except self.it.IrisError as e:
            if e.status_name != "IRIS_ERROR_UNSUPPORTED":
                raise
        else:
            raise AssertionError("an fp8 plan with B not transposed was accepted")

    def check_gemm_reduce_graph(self, replays=120):
        """A reduce-scatter plan (pipelined, bias, B transposed, functional output) and an
        all-reduce plan (unfused, fp32 out=) captured in one graph; replayed with fresh inputs
        copied in and the outputs poisoned before every replay; every replay checked."""
        it = self.it
        cfg = [("reduce_scatter", "bfloat16", "bfloat16", True, True, "pipelined", 24, 40, 32),
               ("all_reduce", "float16", "float32", False, False, "unfused", 17, 24, 16)]
        plans = [self.gemm_plan(op, rows, N, kl, dt, odt, bt, bias, path) for op, dt, odt, bt, bias, path, rows, N, kl in cfg]
        errs = []
        try:
            static = [list(self.gemm_data(op, rows, N, kl, dt, odt, bt, bias)[:3]) for op, dt, odt, bt, bias, path, rows, N, kl in cfg]
            out2 = poisoned(plans[1].c_shape, plans[1].out_dtype, self.dev)

            def step():
                c1 = it.gemm_reduce_scatter(static[0][0], static[0][1], plans[0], bias=static[0][2])
                it.gemm_all_reduce(static[1][0], static[1][1], plans[1], out=out2)
                return c1

            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    step()
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                c1 = step()
            for i in range(replays):
                refs, slacks = [], []
                for k, (op, dt, odt, bt, bias, path, rows, N, kl) in enumerate(cfg):
                    a, b, bias_t, _, _, ref, slack = self.gemm_data(op, rows, N, kl, dt, odt, bt, bias)
                    for dst, src in zip(static[k], (a, b, bias_t)):
                        if src is not None:
                            dst.copy_(src)
                    refs.append(ref)
                    slacks.append(slack)
                for t in (c1, out2):
                    t.view(-1).view(torch.uint8).fill_(0x7B)
                graph.replay()
                torch.cuda.synchronize()
                e = self.gemm_error(c1, refs[0], "bfloat16", slacks[0]) or same(out2, refs[1], "float32")

                e = e or (self.differs_across_ranks(out2) if i % 10 == 0 else None)
                if e and len(errs) < 3:
                    errs.append("replay %d: %s" % (i, e))
                if i == 0:
                    used = torch.cuda.memory_allocated(self.dev)
            grown = torch.cuda.memory_allocated(self.dev) - used
            if grown:
                errs.append("memory grew by %d bytes over %d replays" % (grown, replays))
            del graph
        finally:
            for p in plans:
                p.close()
        if errs:
            raise AssertionError("; ".join(errs))

    def check_gemm_reduce_compile(self):
        """torch.compile(fullgraph=True) of a function with both ops (functional and out=)
        and torch ops around them: the same as eager and as the reference."""
        it = self.it
        rows, N, kl = 8, 32, 16
        rs = self.gemm_plan("reduce_scatter", rows, N, kl, "bfloat16", "bfloat16", True, True, "auto", exact=True)  # one rounding: want_rs below
        ar = self.gemm_plan("all_reduce", rows, N, kl, "bfloat16", "float32", True, False, "auto")
        try:
            def f(a, b, bias, out):
                c = it.gemm_reduce_scatter(a * 2, b, rs, bias)
                it.gemm_all_reduce(a, b, ar, out=out)
                return c.float() + 1, out

            a, b, _, _, _, ref, _ = self.gemm_data("all_reduce", rows, N, kl, "bfloat16", "float32", True, False)
            bias = (torch.arange(N, dtype=torch.float64) / 8 - 2).to(torch.bfloat16).to(self.dev)
            cf = torch.compile(f, fullgraph=True)
            cf(a, b, bias, poisoned(ar.c_shape, torch.float32, self.dev))  # compiles
            got = cf(a, b, bias, poisoned(ar.c_shape, torch.float32, self.dev))
            want = f(a, b, bias, poisoned(ar.c_shape, torch.float32, self.dev))
            torch.cuda.synchronize()
        finally:
            rs.close()
            ar.close()
        for x, y in zip(got, want):
            if not torch.equal(x, y):
                raise AssertionError("compiled result differs from eager")
        r = self.rank
        want_rs = (2 * ref[r * rows:(r + 1) * rows] + bias.cpu().to(torch.float64)).to(torch.bfloat16).to(torch.float64) + 1
        e = same(got[1], ref, "float32") or same(got[0], want_rs, "float32")
        if e:
            raise AssertionError(e)

    # ------------------------------------------------------------ MoE dispatch / combine
    def moe_routing(self, T, E, top_k, hidden, skew=None):
        """Every rank's tokens, routing and weights from the next seed (the same on every
        process): token counts 0..T per rank (rank 1 gets none), distinct experts per token
        (skew "expert": all to expert 0 first; "rank": all to rank 0's experts), values
        multiples of 1/64 in [-1, 1] (exact in bf16)."""
        W = self.world
        self.seed += 1
        g = torch.Generator().manual_seed(self.seed * 7907)
        out = []
        for q in range(W):
            n = 0 if q == 1 % W and W > 1 else int(torch.randint(1, T + 1, (1,), generator=g))
            x = torch.randint(-64, 65, (n, hidden), generator=g).to(torch.float32) / 64
            pool = E if skew != "rank" else E // W

            def draw():
                if skew == "expert":  # expert 0 first, then distinct others
                    return torch.cat([torch.zeros(1, dtype=torch.int64), 1 + torch.randperm(pool - 1, generator=g)[:top_k - 1]])
                return torch.randperm(pool, generator=g)[:top_k]

            idx = torch.stack([draw() for _ in range(n)]) if n else torch.empty(0, top_k, dtype=torch.int64)
            if skew is None and top_k > 1 and n:
                idx[::5, top_k - 1] = -1  # no expert in that slot
            w = torch.rand(n, top_k, generator=g) + 0.25
            out.append((x, idx, w))
        return out

    def check_moe(self, mode, dt, top_k, hidden, skew=None, calls=2):
        """dispatch -> y = recv * (global expert + 1) -> combine against float64, every call
        with a fresh routing: the counts, every received row (by its source id: value and
        expert), and each token's weighted sum. fp8: within e4m3's rounding of the blocks."""
        it, W, r = self.it, self.world, self.rank
        T, E = 24, 4 * W
        L = E // W
        fp8 = dt == "float8_e4m3fn"
        moe = self.ctx.moe_plan(T, hidden, top_k, E, mode=mode, dispatch_dtype=getattr(torch, dt))
        errs = []
        try:
            for call in range(calls):
                data = self.moe_routing(T, E, top_k, hidden, skew)
                x, idx, w = data[r]
                rx, sc, cnt, off = it.moe_dispatch(x.to(torch.bfloat16).to(self.dev), idx.to(self.dev), w.to(self.dev), moe)
                torch.cuda.synchronize()
                moe.check()
                want = [sum(int((data[q][1] == r * L + l).sum()) for q in range(W)) for l in range(L)]
                got_cnt = cnt.cpu().tolist()
                if got_cnt != want:
                    errs.append("call %d: counts %s, expected %s" % (call, got_cnt, want))
                    continue
                offs = off.cpu().tolist()
                rxf = (rx.float() * sc.repeat_interleave(128, dim=-1)) if fp8 else rx.float()
                rxf, src = rxf.cpu(), moe.recv_src.cpu()
                seen = set()
                for l in range(L):
                    for i in range(want[l]):
                        row, s = (rxf[l, i], int(src[l, i])) if mode == "low_latency" else (rxf[offs[l] + i], int(src[offs[l] + i]))
                        q, slot = (s >> 24) & 0xFF, s & 0xFFFFFF
                        t, k = divmod(slot, top_k)
                        if q >= W or t >= data[q][0].shape[0] or int(data[q][1][t, k]) != r * L + l or (q, t, k) in seen:
                            errs.append("call %d: expert %d row %d: source %s is not a token routed there (or twice)" % (call, l, i, (q, t, k)))
                            break
                        seen.add((q, t, k))
                        ref = data[q][0][t]
                        tol = ref.abs().max() / 8 if fp8 else 0.0
                        if (row - ref).abs().max() > tol:
                            errs.append("call %d: expert %d row %d (rank %d token %d): wrong values" % (call, l, i, q, t))
                            break
                # the experts: y = received row * (global expert id + 1), in recv_x's layout
                ge = torch.arange(r * L, (r + 1) * L, device=self.dev, dtype=torch.float32) + 1
                if mode == "low_latency":
                    y = (rx.float() * (sc.repeat_interleave(128, dim=-1) if fp8 else 1) * ge[:, None, None]).to(torch.bfloat16)
                else:
                    rows = torch.arange(rx.shape[0], device=self.dev)
                    fac = ge[(torch.searchsorted(off.to(torch.int64), rows, right=True) - 1).clamp(0, L - 1)]
                    y = (rx.float() * (sc.repeat_interleave(128, dim=-1) if fp8 else 1) * fac[:, None]).to(torch.bfloat16)
                out = poisoned((x.shape[0], hidden), torch.bfloat16, self.dev)
                got = it.moe_combine(y, moe, out=out)
                torch.cuda.synchronize()
                ref = (w.double()[:, :, None] * x.double()[:, None, :] * (idx.double()[:, :, None] + 1)).sum(dim=1)
                mag = (w.double()[:, :, None] * x.double().abs()[:, None, :] * (idx.double()[:, :, None] + 1)).sum(dim=1)
                # bf16: y's rounding and the final one (2^-8 each); fp8: e4m3's (2^-4) on top
                tol = mag * (2.0 ** -4 + 2.0 ** -7 if fp8 else 2.0 ** -7) + (1e-3 if fp8 else 1e-6)
                bad = (got.double().cpu() - ref).abs() > tol
                if bool(bad.any()):
                    i = int(bad.flatten().nonzero()[0])
                    errs.append("call %d: out flat %d = %r, expected %r" % (call, i, got.double().cpu().flatten()[i].item(), ref.flatten()[i].item()))
        finally:
            moe.close()
        if errs:
            raise AssertionError("; ".join(errs[:3]))

    def check_moe_graph(self, replays=20):
        """dispatch + experts + combine captured once, replayed with new tokens and new
        routings copied in (the counts never leave the device)."""
        it, W, r = self.it, self.world, self.rank
        T, E, K, H = 16, 4 * W, 4, 256
        L = E // W
        moe = self.ctx.moe_plan(T, H, K, E)
        try:
            x = torch.zeros(T, H, dtype=torch.bfloat16, device=self.dev)
            idx = torch.arange(K, dtype=torch.int32, device=self.dev).repeat(T, 1)  # distinct experts (a repeat is reported)
            w = torch.zeros(T, K, device=self.dev)
            ge = torch.arange(r * L, (r + 1) * L, device=self.dev, dtype=torch.float32) + 1

            def step():
                rx, _, _, _ = it.moe_dispatch(x, idx, w, moe)
                return it.moe_combine((rx.float() * ge[:, None, None]).to(torch.bfloat16), moe)

            step()
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = step()
            for i in range(replays):
                g = torch.Generator().manual_seed(self.seed * 13 + i)  # the same on every rank
                xs = [torch.randint(-64, 65, (T, H), generator=g).float() / 64 for _ in range(W)]
                ids = [torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)]) for _ in range(W)]
                ws = [torch.rand(T, K, generator=g) for _ in range(W)]
                x.copy_(xs[r])
                idx.copy_(ids[r])
                w.copy_(ws[r])
                out.view(-1).view(torch.uint8).fill_(0x7B)
                graph.replay()
                torch.cuda.synchronize()
                ref = (ws[r].double()[:, :, None] * xs[r].double()[:, None, :] * (ids[r].double()[:, :, None] + 1)).sum(dim=1)
                mag = (ws[r].double()[:, :, None] * xs[r].double().abs()[:, None, :] * (ids[r].double()[:, :, None] + 1)).sum(dim=1)
                if bool(((out.double().cpu() - ref).abs() > mag * 2.0 ** -7 + 1e-6).any()):
                    raise AssertionError("replay %d: combine differs from the float64 reference" % i)
            moe.check()
        finally:
            moe.close()

    def check_moe_compile(self):
        """torch.compile(fullgraph=True) of router + dispatch + experts + combine: the same
        bits as eager (the ops' fake implementations give the shapes; the receive buffers are
        mutated arguments, so the expert reads stay after the dispatch)."""
        it, W, r = self.it, self.world, self.rank
        T, E, K, H = 16, 4 * W, 2, 256
        L = E // W
        moe = self.ctx.moe_plan(T, H, K, E)
        try:
            ge = torch.arange(r * L, (r + 1) * L, device=self.dev, dtype=torch.float32) + 1
            router = torch.randn(H, E, generator=torch.Generator().manual_seed(5)).to(self.dev)

            def layer(x):
                w, idx = torch.softmax(x.float() @ router, dim=-1).topk(K, dim=-1)
                rx, _, _, _ = it.moe_dispatch(x, idx, w, moe)
                y = (rx.float() * ge[:, None, None]).to(torch.bfloat16)
                return it.moe_combine(y, moe) * 2

            g = torch.Generator().manual_seed(self.seed * 17 + r)
            x = (torch.randint(-64, 65, (T - r, H), generator=g).float() / 64).to(torch.bfloat16).to(self.dev)
            want = layer(x)
            cl = torch.compile(layer, fullgraph=True)
            cl(x)
            got = cl(x)
            torch.cuda.synchronize()
            moe.check()
            if not torch.equal(got, want):
                raise AssertionError("compiled MoE layer differs from eager (max %g)" % (got.float() - want.float()).abs().max().item())
        finally:
            moe.close()

    def check_moe_bad_input(self):
        it, dev = self.it, self.dev
        moe = self.ctx.moe_plan(8, 128, 2, 2 * self.world)
        try:
            x = torch.zeros(4, 128, dtype=torch.bfloat16, device=dev)
            idx = torch.zeros(4, 2, dtype=torch.int32, device=dev)
            w = torch.ones(4, 2, device=dev)
            expect_raise(ValueError, "x has shape", lambda: it.moe_dispatch(torch.zeros(9, 128, dtype=torch.bfloat16, device=dev), idx, w, moe))
            expect_raise(TypeError, "x has dtype float32", lambda: it.moe_dispatch(x.float(), idx, w, moe))
            expect_raise(TypeError, "topk_idx has dtype float32", lambda: it.moe_dispatch(x, w, w, moe))
            expect_raise(ValueError, "topk_weights has shape", lambda: it.moe_dispatch(x, idx, w[:3], moe))
            expect_raise(TypeError, "dispatch_dtype must be", lambda: self.ctx.moe_plan(8, 128, 2, 2 * self.world, dispatch_dtype=torch.float16))
            expect_raise(ValueError, "mode", lambda: self.ctx.moe_plan(8, 128, 2, 2 * self.world, mode="fast"))
            # an expert index out of range: skipped on the device, reported by check
            bad = idx.clone()
            bad[0, 0] = 10 ** 6
            it.moe_dispatch(x, bad, w, moe)
            it.moe_combine(torch.zeros_like(moe.recv_x), moe)
            torch.cuda.synchronize()
            expect_raise(it.IrisError, "", moe.check)
            moe.check()  # cleared
        finally:
            moe.close()
        expect_raise(RuntimeError, "expected an open Moe plan", lambda: it.moe_dispatch(x, idx, w, moe))

    def check_moe_one_rank_refusal(self):
        """A call refused in Python on the last rank only still takes part there: its
        dispatch (too many tokens) sends none and the others' tokens come back exact; its
        combine (y of the wrong shape) sends NaN rows, which every rank's check() names;
        then a call on every rank is exact and no wait ran out."""
        it, dev, W, me = self.it, self.dev, self.world, self.rank
        last, T, H, E = self.world - 1, 8, 128, 2 * self.world
        moe = self.ctx.moe_plan(T, H, 2, E)
        try:
            for call in range(3):
                n = 5
                x = (torch.arange(n * H, device=dev).view(n, H) % 61 - 30).to(torch.bfloat16)
                idx = torch.stack([torch.arange(n, device=dev) % E, (torch.arange(n, device=dev) + 1 + me) % E], 1).to(torch.int32)
                idx[:, 1] = torch.where(idx[:, 1] == idx[:, 0], -1, idx[:, 1])
                w = torch.full((n, 2), 0.5, device=dev)
                if call == 0 and me == last:
                    expect_raise(ValueError, "took part", lambda: it.moe_dispatch(torch.zeros(T + 1, H, dtype=torch.bfloat16, device=dev), idx, w, moe))
                else:
                    it.moe_dispatch(x, idx, w, moe)
                y = moe.recv_x.clone()  # the identity expert
                if call == 1 and me == last:
                    expect_raise(ValueError, "took part", lambda: it.moe_combine(y[:1], moe))
                    continue
                out = it.moe_combine(y, moe)
                torch.cuda.synchronize()
                want = (x.float() * (w * (idx >= 0)).sum(1, keepdim=True)).to(torch.bfloat16)
                if call == 0 and me == last:
                    if out.shape[0] != 0:
                        raise AssertionError("a refused dispatch's combine returned %d rows" % out.shape[0])
                elif call == 1:  # the tokens with an expert on the last rank are NaN, the others exact
                    on_last = ((idx >= 0) & (idx // (E // W) == last)).any(1)
                    if not bool(out[on_last].isnan().all()) or not torch.equal(out[~on_last], want[~on_last]):
                        raise AssertionError("call 1: tokens served by rank %d must be NaN, the others exact" % last)
                elif not torch.equal(out, want):
                    raise AssertionError("call %d: out differs (max %g)" % (call, (out.float() - want.float()).abs().max().item()))
            torch.cuda.synchronize()
            expect_raise(it.IrisError, "rank %d's combine" % last, moe.check)  # the NaN rows of call 1 named on every rank
            self.ctx.async_error()  # no wait ran out
        finally:
            moe.close()

    def check_gemm_one_rank_refusal(self, kind, path):
        """A GEMM plan run refused in Python on the last rank only (A of another dtype)
        takes part there (one run the library refuses): that rank raises TypeError saying
        so, every rank's call ends within 15 s (no wait ran to its bound), and the others
        hear IRIS_ERROR_MISMATCH from the plan's check() (the fused paths) or the context's
        (the others); then a run on every rank is exact."""
        it, ctx, W, me, dev = self.it, self.ctx, self.world, self.rank, self.dev
        last = W - 1
        try:
            if kind == "ag_gemm":
                M, N, K = 64 * W, 256, 512
                plan = ctx.ag_gemm_plan(M, N, K, torch.bfloat16, torch.float32, layout="rows", b_transposed=True, path=path)
            else:
                plan = self.gemm_plan("reduce_scatter", 64, 128, 64, "bfloat16", "bfloat16", True, False, path)
        except it.IrisError as e:
            if e.status_name == "IRIS_ERROR_UNSUPPORTED":
                return "%s on the %s path: unsupported by this build (%s)" % (kind, path, e.detail)
            raise
        try:
            for call in range(2):
                if kind == "ag_gemm":
                    g = torch.Generator().manual_seed(40 + call)
                    b = (torch.randint(-4, 5, (N, K), generator=g) * 0.25).to(torch.bfloat16).to(dev)
                    shards = [(torch.randint(-4, 5, (M // W, K), generator=g) * 0.25).to(torch.bfloat16) for q in range(W)]
                    a, ref = shards[me].to(dev), torch.cat(shards).double() @ b.double().cpu().t()
                    run = lambda x: it.ag_gemm(x, b, plan)  # noqa: E731
                    out_dt = "float32"
                else:
                    a, b, _, _, _, ref, slack = self.gemm_data("reduce_scatter", 64, 128, 64, "bfloat16", "bfloat16", True, False)
                    run = lambda x: it.gemm_reduce_scatter(x, b, plan)  # noqa: E731
                    out_dt = "bfloat16"
                torch.cuda.synchronize()
                dist.barrier()
                t0 = time.time()
                if call == 0 and me == last:
                    expect_raise(TypeError, "took part", lambda: run(a.half()))
                else:
                    c = run(a)
                torch.cuda.synchronize()
                if time.time() - t0 > 15:
                    raise AssertionError("call %d: %.1f s: a wait ran to its bound (the refusal took no part?)" % (call, time.time() - t0))
                heard = []
                for target in (plan, ctx):
                    try:
                        target.check()
                    except it.IrisError as e:
                        heard.append(e)
                if call == 0 and me != last:
                    if not any(e.status_name == "IRIS_ERROR_MISMATCH" for e in heard):
                        raise AssertionError("the peers' run of the refused call reported %s, not a mismatch" % ([str(e) for e in heard] or "nothing"))
                elif call == 1 and heard:
                    raise AssertionError("the run after it reported %s" % [str(e) for e in heard])
                if call == 1:
                    e = same(c, ref, out_dt) if kind == "ag_gemm" else self.gemm_error(c, ref, out_dt, slack)
                    if e:
                        raise AssertionError("the run after it: %s (path %s)" % (e, plan.path))
        finally:
            plan.close()

    def check_gemm_reduce_bad_input(self):
        """Each refusal is the same on every rank (nothing is enqueued), then the plan still
        computes the right result; a closed plan is refused."""
        it, ctx, W, dev = self.it, self.ctx, self.world, self.dev
        rows, N, kl = 8, 16, 24
        M = rows * W
        plan = self.gemm_plan("reduce_scatter", rows, N, kl, "bfloat16", "bfloat16", True, True, "auto")
        bf = torch.bfloat16
        try:
            a, b, bias, _, _, ref, slack = self.gemm_data("reduce_scatter", rows, N, kl, "bfloat16", "bfloat16", True, True)
            rs = it.gemm_reduce_scatter
            odd = torch.empty(M * kl + 8, dtype=bf, device=dev)[8:].view(M, kl)  # 16 bytes past a 256-byte boundary
            odd.copy_(a)
            cases = [
                (ValueError, "a is on cpu", lambda: rs(a.cpu(), b, plan, bias)),
                (ValueError, "a is not contiguous", lambda: rs(torch.empty(kl, M, dtype=bf, device=dev).t(), b, plan, bias)),
                (TypeError, "a has dtype float16 but bfloat16", lambda: rs(a.half(), b, plan, bias)),
                (ValueError, "a has shape (%d, %d), the plan needs (%d, %d)" % (M - 1, kl, M, kl), lambda: rs(a[:M - 1], b, plan, bias)),
                (ValueError, "b_transposed=True", lambda: rs(a, b.t().contiguous(), plan, bias)),
                (ValueError, "bias is None", lambda: rs(a, b, plan)),
                (ValueError, "bias has shape (8,)", lambda: rs(a, b, plan, bias[:8])),
                (TypeError, "bias has dtype float32", lambda: rs(a, b, plan, bias.float())),
                (ValueError, "apply to fp8 inputs only", lambda: rs(a, b, plan, bias, a_scale=torch.ones(1, device=dev))),
                (ValueError, "out has shape", lambda: rs(a, b, plan, bias, out=torch.empty(M, N, dtype=bf, device=dev))),
                (TypeError, "out has dtype float32", lambda: rs(a, b, plan, bias, out=torch.empty(rows, N, device=dev))),
                (ValueError, "made for op 'reduce_scatter'", lambda: it.gemm_all_reduce(a, b, plan, bias)),
                (it.IrisError, "256-byte aligned", lambda: rs(odd, b, plan, bias)),
                (TypeError, "dtype must be one of", lambda: ctx.gemm_reduce_plan("reduce_scatter", M, N, kl * W, dtype=torch.float32)),
                (TypeError, "float8_e5m2", lambda: ctx.gemm_reduce_plan("reduce_scatter", M, N, kl * W, dtype=torch.float8_e5m2)),
                (TypeError, "out_dtype must be", lambda: ctx.gemm_reduce_plan("reduce_scatter", M, N, kl * W, out_dtype=torch.int32)),
                (ValueError, "multiple of world_size", lambda: ctx.gemm_reduce_plan("reduce_scatter", M + 1, N, kl * W)),
                (ValueError, "N (12) must be a multiple of 8", lambda: ctx.gemm_reduce_plan("all_reduce", M, 12, kl * W)),
                (ValueError, "path 'fastest'", lambda: ctx.gemm_reduce_plan("all_reduce", M, N, kl * W, path="fastest")),
                (ValueError, "op 'sum'", lambda: ctx.gemm_reduce_plan("sum", M, N, kl * W)),
            ]
            if torch.cuda.device_count() > 1:
                other = "cuda:%d" % ((dev.index + 1) % torch.cuda.device_count())
                cases.append((ValueError, "b is on " + other, lambda: rs(a, b.to(other), plan, bias)))
            for exc, text, fn in cases:
                expect_raise(exc, text, fn)
            c = poisoned(plan.c_shape, bf, dev)
            rs(a, b, plan, bias, out=c)
            e = self.gemm_error(c, ref, "bfloat16", slack)
            if e:
                raise AssertionError(e)
        finally:
            plan.close()
        expect_raise(RuntimeError, "expected an open GemmReduce plan", lambda: it.gemm_reduce_scatter(a, b, plan, bias))
        expect_raise(RuntimeError, "closed or was never created", lambda: torch.ops.iris.gemm_reduce(a, b, bias, None, None, plan.id))


def expect_raise(exc, text, fn):
    """fn() must raise exc with text in its message."""
    try:
        fn()
    except exc as e:
        if text not in str(e):
            raise AssertionError("%s raised %r, which does not say %r" % (exc.__name__, e, text))
    else:
        raise AssertionError("no %s for %s" % (exc.__name__, text))


GEMM_SHAPES = [(1, 8, 8), (7, 40, 24), (64, 136, 40), (129, 24, 72), (33, 64, 16)]  # (rows per rank, N, K/W)


def gemm_reduce_cases(R, paths=("pipelined", "unfused", "fused"), rows_sweep=(1, 2, 3, 5, 8, 16, 31, 64, 100, 127, 128, 129)):
    """GEMM + reduce-scatter / all-reduce: op x dtype x out dtype x B layout x bias x path
    (shapes in turn from GEMM_SHAPES), rows per rank 1..129, AUTO, refused paths, fp8
    (or its clean refusal), graphs, torch.compile, bad input. One result line each. The
    fused path needs the library's sm_90a TMA core and a Hopper GPU: where create refuses
    it (IRIS_ERROR_UNSUPPORTED), its cases are one SKIP line."""
    if "fused" in paths and R.fused_unsupported():
        R.result("gemm_reduce: the fused path's cases", R.fused_unsupported)
        paths = tuple(p for p in paths if p != "fused")
    i = 0
    for op in ("reduce_scatter", "all_reduce"):
        for dt in ("bfloat16", "float16"):
            for out_dt in ("bfloat16", "float16", "float32"):
                for bt in (False, True):
                    for bias in (False, True):
                        for path in paths:
                            rows, N, kl = GEMM_SHAPES[i % len(GEMM_SHAPES)]
                            i += 1
                            R.result("gemm_%s %s->%s B%s%s %s rows/rank=%d N=%d K/W=%d" % (op, dt, out_dt, "^T" if bt else "", " +bias" if bias else "", path, rows, N, kl),
                                     lambda: R.check_gemm_reduce(op, dt, out_dt, bt, bias, path, rows, N, kl))
        for path in paths + ("auto",):
            for rows in rows_sweep if path != "auto" else (5, 256):
                R.result("gemm_%s bfloat16 B^T +bias %s rows/rank=%d N=24 K/W=16" % (op, path, rows),
                         lambda: R.check_gemm_reduce(op, "bfloat16", "bfloat16", True, True, path, rows, 24, 16, calls=1))
        for path in ("pipelined", "unfused"):
            # fp32 partials: the reference rounded once, bit for bit (K/W = 64 makes partials
            # of ~13 significant bits: rounded to bf16 on the wire they would differ)
            R.result("gemm_%s bfloat16 exact=True (fp32 partials, one rounding) %s" % (op, path),
                     lambda: R.check_gemm_reduce(op, "bfloat16", "bfloat16", True, True, path, 5, 24, 64, exact=True))
        for out_dt in ("bfloat16", "float32"):
            for path in ("pipelined", "unfused"):  # fp8 runs on the cuBLASLt paths

                R.result("gemm_%s fp8 e4m3 (scales) -> %s %s" % (op, out_dt, path), lambda: R.check_gemm_reduce_fp8(op, out_dt, path))


def team_groupings(W):
    """The splits the team cases use: pairs ({0,1},{2,3} at 4 ranks; {0,1},{2} at 3) and
    strided ({0,2},{1,3}; {0,2},{1}; {0},{1} at 2)."""
    pairs = [list(range(i, min(i + 2, W))) for i in range(0, W, 2)]
    strided = [list(range(s, W, 2)) for s in range(min(2, W))]
    return [("pairs", pairs), ("strided", strided)]


def team_cases(R):
    """torch subgroups as iris teams: for each grouping, one split (ctx.team) on every rank,
    then over each rank's group at once (both teams run together): all_reduce (sizes on the
    latency path, the two-shot, and beyond, off the heap through the staging areas in
    chunks; in place; a heap tensor), every other collective, a CUDA graph, the serving
    slot on the team and on a context of its own, refusals; then a split with no collective
    state left, the teams closed, and it.new_group one group at a time."""
    lib = R.ctx._lib
    if not lib.has("iris_team_split") or "iris_team_t" in lib.unchecked:
        R.result("teams: the cases", lambda: "this libiris.so has no teams (built before them): rebuild with make lib")
        return
    made = []
    n_check = [0]

    def result(label, fn):
        # Inputs come from R.seed, which each draw advances. Every rank runs these checks in
        # the same order, but a member of a team of one returns early (it draws nothing), so
        # at 3 ranks the last rank's seed would fall behind its partner's in the next
        # grouping: each check starts from a seed of its own, the same on every rank.
        n_check[0] += 1
        R.seed = 1000000 + 1000 * n_check[0]
        R.result(label, fn)

    for name, grouping in team_groupings(R.world):
        h = {}
        result("teams %s %s: ctx.team, one split on every rank; team rank = group rank; team_for" % (name, grouping), lambda: R.check_team_make(grouping, h))
        every = [None] * R.world
        dist.all_gather_object(every, "team" in h and h["team"] is not None)
        if not all(every):
            continue
        made.append(h)
        for dt, n, mode in (("float32", 37, "functional"), ("bfloat16", 70001, "functional"), ("bfloat16", 3000003, "functional"),
                            ("float32", 5000001, "out"), ("float32", 70001, "inplace"), ("bfloat16", 1000003, "inplace"), ("float32", 1000003, "heap")):
            result("teams %s: all_reduce(group=) %s n=%d %s vs float64" % (name, dt, n, mode), lambda: R.check_team_all_reduce(h, dt, n, mode))
        for dt, m in (("float32", 1001), ("bfloat16", 1 << 20)):
            result("teams %s: all_gather, reduce_scatter, all_to_all, broadcast, barrier (group=) %s %d per rank" % (name, dt, m),
                     lambda: R.check_team_collectives(h, dt, m))
        for n in (4099, 600001):
            result("teams %s: all_reduce(group=) in a CUDA graph, 30 replays, n=%d" % (name, n), lambda: R.check_team_graph(h, n))
        result("teams %s: CustomAllreduce(group, ctx=ctx) on the team: 2 KB, 3 MB, 20 graph replays" % name, lambda: R.check_team_serving(h, False))
        result("teams %s: CustomAllreduce(group) on a context of its own over the subgroup" % name, lambda: R.check_team_serving(h, True))
        result("teams %s: refusals (no team, not a member, group= with a Team, root)" % name, lambda: R.check_team_errors(h))
    if len(made) == 2:
        result("teams: a third split without a collective state: IrisError IRIS_ERROR_UNSUPPORTED with its detail", lambda: R.check_team_no_state(team_groupings(R.world)[0][1]))

    def close_all():
        for h in made:
            h["team"].close()
        for h in made:
            if not h["team"].closed:
                raise AssertionError("a team is still open after close()")

    result("teams: Team.close (collective over each team's members)", close_all)
    result("teams: it.new_group one group at a time on every rank, all_reduce(group=) on each", lambda: R.check_team_new_group(team_groupings(R.world)[0][1]))
    if R.world > 1:
        for dt in ("float32", "bfloat16"):
            result("teams: every collective off the heap staged by the library in many chunks (64 KiB areas), 3 rounds, %s vs float64" % dt,
                   lambda: R.check_team_staged_chunks(dt))
        result("teams: check_shapes on a team: a count that differs on one member raises ValueError on every member; the next call exact",
               R.check_team_check_shapes)
        result("teams: ctx.team(group) on a rank outside it (GroupMember.NON_GROUP_MEMBER) opts out; groups refused on one rank still split",
               R.check_team_non_member)
        result("a refusal of the input itself on the last rank only (CPU, complex64), world and team: it takes part; IRIS_ERROR_MISMATCH at once, nothing written, next call exact",
               R.check_refused_input_in_step)
        result("a collective of no elements, world and team: on every rank nothing reported; on the last rank only IRIS_ERROR_MISMATCH at once, nothing written; "
               "next call exact", R.check_empty_in_step)
        for what in ("count", "op"):
            result("teams: a staged all_reduce whose %s differs on team rank 0: IRIS_ERROR_MISMATCH on every member at once, no output written" % what,
                   lambda: R.check_team_staged_mismatch(what))


def collective_cases(R, sizes=(37, 70001)):
    """Every collective x dtype x op x in-place/out-of-place mode, one result line each."""
    W = R.world
    for dt in DTYPES:
        for n in sizes:
            for op in ("sum", "min", "max", "avg"):
                if op == "avg" and dt not in FLOAT + FP8:
                    continue
                for mode in ("functional", "out", "inplace", "inplace_heap"):
                    R.result("all_reduce %s %s %s n=%d" % (dt, op, mode, n), lambda: R.check_all_reduce(dt, op, mode, n))
            for mode in ("functional", "out", "inplace", "dim1"):
                R.result("all_gather %s %s n=%d" % (dt, mode, n), lambda: R.check_all_gather(dt, mode, n))
            for op in ("sum", "max") + (("avg",) if dt in FLOAT else ()):
                for mode in ("functional", "out", "inplace", "dim1"):
                    R.result("reduce_scatter %s %s %s n=%d" % (dt, op, mode, n), lambda: R.check_reduce_scatter(dt, op, mode, n))
            for mode in ("functional", "out", "inplace"):
                R.result("all_to_all %s %s n=%d" % (dt, mode, n), lambda: R.check_all_to_all(dt, mode, n))
                R.result("broadcast %s %s n=%d" % (dt, mode, n * W), lambda: R.check_broadcast(dt, mode, n * W))
    R.result("torch.distributed reference ran for every dtype and op compared", R.report_no_ref)


def worker():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ngpu = torch.cuda.device_count()
    shared = ngpu < world
    dev = rank % ngpu
    torch.cuda.set_device(dev)
    # the ranks share this host's cores: with torch's default (every core in every process)
    # the 4-rank run took over 8 minutes on a 64-core host, 35 s with this
    torch.set_num_threads(max(1, min(8, (os.cpu_count() or 1) // world)))
    dist.init_process_group("gloo" if shared else "nccl", rank=rank, world_size=world, device_id=None if shared else torch.device("cuda", dev))
    import iris_gpu.torch as it

    R = None
    only = os.environ.get("IRIS_PY_TEST_ONLY", "") or "all"
    everything = only == "all"
    rms = only in ("all", "rmsnorm")
    try:
        ctx = it.Context()
        R = Runner(rank, world, ctx, it, shared)
        if everything:
            collective_cases(R)
            R.result("barrier orders heap writes and peer reads (50 rounds)", R.check_barrier)
            R.result("torch.cuda.graph: 1000 replays with fresh data", R.check_graph)
            R.result("torch.compile(fullgraph=True)", R.check_compile)
            R.result("bad input raises, never crashes", R.check_bad_input)
            R.result("a collective and all_reduce_rmsnorm refused in Python on the last rank only take part; the peers' results exact, no wait ran out", R.check_coll_one_rank_refusal)
            R.result("torch.ops.iris.all_reduce_out called directly, refused on rank 0 only: it takes part once; the peers' sums exact, no wait ran out", R.check_op_one_rank_refusal)
        if rms:
            k = 0
            for dt in ("bfloat16", "float16"):
                for tokens, hidden, algo in ((1, 4096, "auto"), (7, 1000, "auto"), (32, 8192, "fused"), (3, 4100, "separate"), (64, 8192, "two_shot"),
                                             (13, 4100, "two_shot"), (128, 8192, "auto"), (600, 1024, "auto"), (5, 4100, "bandwidth"),
                                             (300, 8192, "bandwidth")):
                    quant = (None, "fp8_per_tensor", "fp8_per_token")[k % 3]
                    inplace = k % 2 == 1
                    k += 1
                    R.result("all_reduce_rmsnorm %s %d x %d %s%s (%s): residual exact, out within a rounding of float64, fp8 as quantising out, the same bits on every rank"
                             % (dt, tokens, hidden, quant or "no fp8", ", out=x" if inplace else "", algo),
                             lambda: R.check_all_reduce_rmsnorm(dt, tokens, hidden, quant, inplace, algo))
            R.result("all_reduce_rmsnorm: torch.cuda.graph (fused fp8 per token + separate), 50 replays with fresh x, residual in place", R.check_all_reduce_rmsnorm_graph)
        if everything:
            R.result("all-gather + GEMM (rows, B transposed, fp32 out)", R.check_ag_gemm)
            R.result("all-gather + GEMM, fp8 e4m3 with per-tensor scales, bias (pipelined, unfused)", R.check_ag_gemm_fp8)
            for path in ("pipelined", "unfused", "fused"):
                R.result("all-gather + GEMM (%s): a run refused in Python on the last rank only takes part; the peers hear a mismatch, then exact" % path,
                         lambda: R.check_gemm_one_rank_refusal("ag_gemm", path))
        if only not in ("rmsnorm", "teams") and gemm_reduce_available(R):
            gemm_reduce_cases(R)
            R.result("gemm_reduce: the kernel_unfused path, and fp8 on the fused path, refused cleanly (IRIS_ERROR_UNSUPPORTED)", R.check_gemm_reduce_refusals)
            R.result("gemm_reduce: torch.cuda.graph, 120 replays with fresh inputs, poisoned outputs", R.check_gemm_reduce_graph)
            R.result("gemm_reduce: torch.compile(fullgraph=True)", R.check_gemm_reduce_compile)
            R.result("gemm_reduce: bad input raises, never hangs", R.check_gemm_reduce_bad_input)
            for path in ("pipelined", "unfused", "fused"):
                R.result("gemm_reduce (%s): a run refused in Python on the last rank only takes part; the peers hear a mismatch, then exact" % path,
                         lambda: R.check_gemm_one_rank_refusal("gemm_reduce", path))
        if only not in ("rmsnorm", "teams") and moe_available(R):
            for mode in ("low_latency", "high_throughput"):
                for dt in ("bfloat16", "float8_e4m3fn"):
                    for top_k, hidden, skew in ((1, 256, None), (2, 2048, None), (8, 1024, "expert"), (4, 512, "rank")):
                        if top_k > 4 * world:
                            continue
                        R.result("moe %s %s top-%d hidden %d%s: dispatch (counts, every row), combine vs float64" % (mode, dt, top_k, hidden, ", skew " + skew if skew else ""),
                                 lambda: R.check_moe(mode, dt, top_k, hidden, skew))
            R.result("moe: dispatch + experts + combine in a CUDA graph, 20 replays with new routings", R.check_moe_graph)
            R.result("moe: torch.compile(fullgraph=True) of router + dispatch + experts + combine, the same bits as eager", R.check_moe_compile)
            R.result("moe: bad input raises; an expert index out of range is reported by check", R.check_moe_bad_input)
            R.result("moe: a dispatch, then a combine, refused in Python on the last rank only: they take part, the peers never hang", R.check_moe_one_rank_refusal)
        if everything:
            R.result("triton producer/consumer ring (examples/python/triton_ring.py, iris_gpu.triton)", R.check_triton)
        if rms:
            group = dist.new_group(list(range(world)), backend="gloo")
            R.result("CustomAllreduce contract (custom_all_reduce, capture, fused_add_rms_norm)", lambda: R.check_custom_allreduce(group))
            R.result("CustomAllreduce sizes its own heap for the world (heap_bytes); max_size - 16 bytes and a fused add + RMSNorm past max_size exact",
                     lambda: R.check_custom_allreduce_sizing(group))
        if only in ("all", "teams"):
            team_cases(R)
        R.result("heap_verify: every rank holds the same allocations after the tests", ctx.heap_verify)
        R.result("heap tensors are freed when they die", lambda: check_no_leak(ctx))
        ctx.close()
        R.result("calls after close raise", lambda: check_after_close(it, ctx, dev))
        R.report_times()
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        print("FAIL: torch W=%d: rank %d: %s: %s" % (world, rank, type(e).__name__, e), flush=True)
        raise
    finally:
        dist.destroy_process_group()


def moe_available(R):
    """Whether this library has the MoE layer (iris_moe.h): one result line (SKIP when not)."""
    if R.ctx._lib.has("iris_moe_create"):
        return True
    R.result("moe: the cases", lambda: "this libiris.so has no iris_moe_create (built before iris_moe.h): rebuild with make lib")
    return False


def gemm_reduce_available(R):
    """One result line: PASS when a plan can be created, SKIP when this library cannot run
    the GEMM + reduce (an older build, or no cuBLASLt: IRIS_ERROR_UNSUPPORTED), FAIL
    otherwise. True when every rank made its plan (the ranks agree, so they all run the
    cases or all skip them)."""
    from iris_gpu import IrisLibraryError

    made = []

    def probe():
        try:
            R.gemm_plan("reduce_scatter", 8, 16, 16, "bfloat16", "bfloat16", False, False, "auto").close()
        except IrisLibraryError as e:
            return "this library has no GEMM + reduce: %s" % e
        except R.it.IrisError as e:
            if e.status_name != "IRIS_ERROR_UNSUPPORTED":
                raise
            return "this library cannot run it: %s" % e.detail
        made.append(True)
        return None

    R.result("gemm_reduce: a plan can be created (bf16, path auto)", probe)
    every = [None] * R.world
    dist.all_gather_object(every, bool(made))
    return all(every)


def check_no_leak(ctx):
    ctx._handle()  # frees the blocks dropped since the last call (_HeapBlock)
    if ctx._live != 0:
        raise AssertionError("%d heap blocks still alive after every test dropped its tensors" % ctx._live)


def check_after_close(it, ctx, dev):
    for fn in (lambda: it.all_reduce(torch.ones(4, device=dev), ctx), lambda: ctx.empty((4,))):
        try:
            fn()
        except RuntimeError as e:
            if "closed" not in str(e):
                raise AssertionError("after close: %r does not say closed" % e)
        else:
            raise AssertionError("a call after close did not raise")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--only", choices=("all", "gemm_reduce", "rmsnorm", "teams"), default=os.environ.get("IRIS_PY_TEST_ONLY") or "all",
                    help="gemm_reduce: only the GEMM + reduce-scatter / all-reduce tests; rmsnorm: only all_reduce_rmsnorm and CustomAllreduce; teams: only the torch subgroup / team tests (each with the heap "
                         "checks); under torchrun set IRIS_PY_TEST_ONLY")
    a = ap.parse_args()
    os.environ["IRIS_PY_TEST_ONLY"] = a.only  # the spawned ranks read it
    if "RANK" in os.environ:  # under torchrun: its world size
        a.world = int(os.environ["WORLD_SIZE"])
    if torch is None:
        print("SKIP: torch W=%d: torch is not installed" % a.world)
        return 0
    if not torch.cuda.is_available():
        print("SKIP: torch W=%d: no CUDA GPU" % a.world)
        return 0
    try:
        import iris_gpu

        iris_gpu.library()
    except ImportError as e:
        print("SKIP: torch W=%d: %s" % (a.world, e))
        return 0
    import iris_gpu.torch as it

    t0 = time.time()
    try:
        it.launch(worker, a.world)
    except Exception as e:  # noqa: BLE001
        print("FAIL: torch W=%d: a rank died: %s" % (a.world, str(e).splitlines()[-1] if str(e) else e))
        return 1
    sys.stderr.write("torch W=%d: %.1f s\n" % (a.world, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
