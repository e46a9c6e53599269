"""iris_gpu.torch with torch but without a GPU: the custom ops' registration, schemas, fake
implementations, functionalization and torch.compile tracing, errors through the
dispatcher, the DLPack path. The C collectives are replaced by a stand-in context (CPU
tensors; world 1 copies send to recv, larger worlds only record), so nothing here checks
communication (test_torch_gpu.py does). Skips (SKIP line, exit 0) without torch.

    PYTHONPATH=python python3 python/tests/test_torch_nogpu.py
"""
import ctypes
import os
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

try:
    import torch
except ImportError:
    torch = None

if torch is not None:
    import iris_gpu.torch as it
    from iris_gpu import _lib, _types

    class StandIn(it.Context):
        """A Context that needs no library: _run records the C call; at world 1 it also
        performs it (every collective of one rank copies send to recv)."""

        def __init__(self, world=1, cid=-100, rank=0, gloo=False):
            """gloo: rank of a world of processes in a gloo group (the GEMM stand-in sums
            through it); otherwise world > 1 only records."""
            self.closed, self.id, self.world_size, self.rank, self.device = False, cid, world, rank, 0
            self.check_shapes, self.calls, self.gloo, self._pending_frees = False, [], gloo, []
            it._CONTEXTS[cid] = self

        def _run(self, kind, send, recv, count, dtype, extra=None):
            self.calls.append((kind, count, dtype, extra))
            if self.world_size == 1 and send != recv:
                ctypes.memmove(recv, send, count * _types.ITEMSIZE[[k for k, v in _types.DTYPES.items() if v == dtype][0]])

        def _barrier_device(self):
            self.calls.append(("barrier",))

        def gemm_reduce_plan(self, *args, **kw):
            return StandInGemmReduce(self, *args, **kw)

        def close(self):
            self.closed = True
            it._CONTEXTS.pop(self.id, None)

    class StandInGemmReduce(it.GemmReduce):
        """A GemmReduce without the library: create and destroy do nothing, and run records
        the call; at world 1 it also computes C = A @ B (x scales) (+ bias) on the CPU (one
        rank: reduce-scatter and all-reduce are the whole product)."""

        def _create(self, d):
            """The description as a dict; refuses what create refuses with IRIS_ERROR_UNSUPPORTED
            whatever the build (the paths not in this version, fp8 with B not transposed)."""
            self.desc = {n: getattr(d, n) for n, _ in d._fields_}
            self.calls = []
            if d.path in (_types.GEMM_PATHS["fused"], _types.GEMM_PATHS["kernel_unfused"]) or (self.fp8 and not d.b_transposed):
                raise it.IrisError(_lib.ERROR_UNSUPPORTED, "rank 0: iris_gemm_rs_create: (stand-in) not supported", "iris_gemm_rs_create")
            return ctypes.c_void_p(1)

        def _destroy(self, g):
            self.calls.append("destroy")

        @property
        def path(self):
            W = self.ctx.world_size  # auto: the library's rule (iris_gemm_rs_choose_path: pipelined from 256 rows a rank, at 2+ ranks)
            p = self.desc["path"] or (_types.GEMM_PATHS["pipelined"] if W > 1 and self.desc["M"] // W >= 256 else _types.GEMM_PATHS["unfused"])
            return {v: k for k, v in _types.GEMM_PATHS.items()}[p]

        def _enqueue(self, a, b, bias, a_scale, b_scale, out):
            self.calls.append((a.data_ptr(), b.data_ptr(), bias is not None, a_scale is not None, out.data_ptr()))
            self.ctx.calls.append(("gemm_" + self.op,))
            if self.ctx.world_size > 1 and not self.ctx.gloo:
                return
            c = a.double() @ (b.t() if self.b_transposed else b).double()
            if self.fp8:
                c = c * a_scale.double() * b_scale.double()
            if self.ctx.world_size > 1:  # ranks are processes: the sum through torch.distributed
                import torch.distributed as dist

                dist.all_reduce(c)
                if self.op == "reduce_scatter":
                    n = c.shape[0] // self.ctx.world_size
                    c = c[self.ctx.rank * n:(self.ctx.rank + 1) * n]
            out.copy_(c + bias.double() if bias is not None else c)

    _check = _types.check_tensor

    def cpu_check(t, what, device_index, dtype=None, contiguous=True):
        """check_tensor that takes CPU tensors as the stand-in's device."""

        class D:
            type, index = "cuda", device_index

        class T:
            pass

        u = T()
        u.device, u.dtype, u.is_contiguous, u.shape, u.stride = D(), t.dtype, t.is_contiguous, t.shape, t.stride
        return _check(u, what, device_index, dtype, contiguous)


class _NoDevice:
    """A stand-in for torch.cuda.device(d): a context manager that selects nothing."""

    def __init__(self, d):
        pass

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass


class StandInCase(unittest.TestCase):
    """Stand-in contexts of world 1 (c1) and 2 (c2), CPU tensors taken as the device's."""

    ids = (-101, -102)

    def setUp(self):
        it._torch_mod()  # registers torch.ops.iris.* (a test may call an op first)
        self.patch = mock.patch.object(_types, "check_tensor", cpu_check)
        self.patch.start()
        self.c1 = StandIn(1, self.ids[0])
        self.c2 = StandIn(2, self.ids[1])

    def tearDown(self):
        self.patch.stop()
        self.c1.close()
        self.c2.close()

    def check_compiled(self, f, args, want, ctx):
        """torch.compile(f, fullgraph=True) with aot_eager and inductor (SKIP line where
        inductor has no C++ compiler): the results equal want, and the iris calls on ctx
        are the eager run's, in the same order."""
        order = [c[0] for c in ctx.calls]
        for backend in ("aot_eager", "inductor"):
            torch._dynamo.reset()
            try:
                cf = torch.compile(f, fullgraph=True, backend=backend)
                cf(*args)  # compiles
                ctx.calls.clear()
                got = cf(*args)
            except Exception as e:  # noqa: BLE001
                if backend == "inductor" and "compiler" in str(e).lower():
                    print("SKIP: python torch: inductor needs a C++ compiler: %s" % str(e).splitlines()[0])
                    continue
                raise
            for a, b in zip(got, want):
                self.assertTrue(torch.equal(a, b), backend)
            self.assertEqual([c[0] for c in ctx.calls], order, backend)


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestOps(StandInCase):

    def test_ops_registered(self):
        for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
            for suffix in ("", "_inplace", "_out"):
                self.assertTrue(hasattr(torch.ops.iris, kind + suffix), kind + suffix)
        self.assertIn("Tensor(a!) x", str(torch.ops.iris.all_reduce_inplace.default._schema))
        self.assertIn("Tensor? bias", str(torch.ops.iris.ag_gemm.default._schema))
        self.assertIn("Tensor? a_scale", str(torch.ops.iris.ag_gemm.default._schema))

    def test_eager_world1(self):
        x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        y = it.all_reduce(x, self.c1)
        self.assertTrue(torch.equal(x, y))
        self.assertNotEqual(x.data_ptr(), y.data_ptr())
        out = torch.full_like(x, -1)
        it.all_reduce(x, self.c1, "max", out=out)
        self.assertTrue(torch.equal(out, x))
        self.assertEqual(self.c1.calls[-1], ("all_reduce", 12, 0, 2))
        self.assertTrue(torch.equal(it.all_gather(x, self.c1, dim=1), x))
        self.assertTrue(torch.equal(it.reduce_scatter(x, self.c1, "avg", dim=1), x))
        self.assertTrue(torch.equal(it.broadcast(x, self.c1, 0), x))
        z = x.clone()
        it.all_to_all_(z, self.c1)
        it.barrier(self.c1)
        self.assertEqual(self.c1.calls[-1], ("barrier",))

    def test_shapes_world2(self):
        x = torch.zeros(3, 4, dtype=torch.bfloat16)
        self.assertEqual(tuple(it.all_gather(x, self.c2).shape), (6, 4))
        self.assertEqual(tuple(it.all_gather(x, self.c2, dim=1).shape), (3, 8))
        self.assertEqual(tuple(it.reduce_scatter(x, self.c2, dim=1).shape), (3, 2))
        self.assertEqual(tuple(it.reduce_scatter(torch.zeros(4, 3), self.c2).shape), (2, 3))
        self.assertEqual(self.c2.calls[-1], ("reduce_scatter", 6, 0, 0))
        with self.assertRaisesRegex(ValueError, "not a multiple of world_size 2"):
            it.reduce_scatter(torch.zeros(3, 3), self.c2)

    def test_group_goes_to_the_team(self):
        """group= (a ranks list here; a ProcessGroup alike) runs the collective on the
        context's team with those members: its id, its world size (shapes) and team rank
        (in-place blocks); eager and through the dispatcher."""
        c4 = StandIn(4, -103, rank=2)
        team = StandIn(2, -104, rank=1)  # the team {1, 2} of c4, this rank its member 1
        try:
            c4._ranks, c4._team_of = [0, 1, 2, 3], {(1, 2): team}
            x = torch.zeros(6)
            it.all_reduce(x, c4, group=[2, 1])
            self.assertEqual(it.all_gather(x, c4, group=[1, 2]).shape, (12,))
            self.assertEqual(it.reduce_scatter(x, c4, group=[1, 2]).shape, (3,))
            it.all_gather_(x, c4, group=[1, 2])
            it.barrier(c4, group=[1, 2])
            self.assertEqual([k[:2] for k in team.calls], [("all_reduce", 6), ("all_gather", 6), ("reduce_scatter", 3), ("all_gather", 3), ("barrier",)])
            self.assertEqual(c4.calls, [])
            it.all_reduce(x, c4, group=[0, 1, 2, 3])  # the whole context: the context itself
            self.assertEqual(c4.calls[-1][:2], ("all_reduce", 6))
            with self.assertRaisesRegex(ValueError, "not a member"):
                it.all_reduce(x, c4, group=[0, 1])
            with self.assertRaisesRegex(RuntimeError, "no team for the group"):
                it.all_reduce(x, c4, group=[0, 2])
            torch.ops.iris.all_reduce(x, team.id, "sum")  # the dispatcher takes the team's id
            self.assertEqual(team.calls[-1][:2], ("all_reduce", 6))
        finally:
            c4.close()
            team.close()

    def test_errors_cross_the_dispatcher(self):
        x = torch.zeros(8)
        with self.assertRaisesRegex(ValueError, "must be equal"):
            it.all_reduce(x, self.c1, out=torch.zeros(9))
        with self.assertRaisesRegex(TypeError, "avg"):
            it.all_reduce(torch.zeros(8, dtype=torch.int32), self.c1, "avg")
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            it.all_reduce(torch.zeros(8, 2)[:, 0], self.c1)
        with self.assertRaisesRegex(ValueError, "root"):
            it.broadcast(x, self.c1, 1)
        self.c1.closed = True
        with self.assertRaisesRegex(RuntimeError, "closed"):
            it.all_reduce(x, self.c1)
        self.c1.closed = False
        with self.assertRaisesRegex(RuntimeError, "closed or was never created"):
            torch.ops.iris.all_reduce(x, 123456, "sum")

    def test_compile_fullgraph(self):
        ctx = self.c1

        def f(x):
            y = it.all_reduce(x * 2, ctx)
            g = it.all_gather(y, ctx, dim=1)
            w = it.reduce_scatter(g, ctx, "max")
            it.all_reduce_(w, ctx, "min")
            it.barrier(ctx)
            return y + 1, g, w

        x = torch.randn(4, 6)
        ctx.calls.clear()
        want = f(x)
        self.check_compiled(f, (x,), want, ctx)  # every collective and the barrier ran, in program order

    def test_opcheck(self):
        x = torch.randn(8)
        for op, args in ((torch.ops.iris.all_reduce.default, (x, self.c1.id, "sum")),
                         (torch.ops.iris.all_gather.default, (x, self.c1.id)),
                         (torch.ops.iris.all_reduce_inplace.default, (x.clone(), self.c1.id, "sum")),
                         (torch.ops.iris.all_reduce_out.default, (x, torch.empty(8), self.c1.id, "sum"))):
            torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestGemmReduce(StandInCase):
    """iris::gemm_reduce[_out] and GemmReduce over stand-in plans (no library): world 1
    computes on the CPU, world 2 checks shapes and what would go to the C call."""

    ids = (-111, -112)

    @staticmethod
    def data(M, N, kl, dtype=torch.bfloat16 if torch else None, bt=False, seed=0):
        g = torch.Generator().manual_seed(seed)
        a = (torch.randint(-8, 9, (M, kl), generator=g) / 8).to(dtype)
        b = (torch.randint(-8, 9, (N, kl) if bt else (kl, N), generator=g) / 8).to(dtype)
        return a, b

    def test_ops_registered(self):
        self.assertIn("Tensor? a_scale, Tensor? b_scale, int plan) -> Tensor", str(torch.ops.iris.gemm_reduce.default._schema))
        self.assertIn("Tensor(a!) out, int plan) -> ()", str(torch.ops.iris.gemm_reduce_out.default._schema))

    def test_plan_description(self):
        p = self.c2.gemm_reduce_plan("all_reduce", 8, 16, 32, torch.float16, torch.float32, b_transposed=True, bias=True, path="unfused")
        self.assertEqual(p.desc, {"struct_size": 64, "op": 1, "M": 8, "N": 16, "K": 32, "a_type": 1, "c_type": 0, "b_transposed": 1, "has_bias": 1, "path": 3, "exact": 0})
        self.assertEqual((p.a_shape, p.b_shape, p.c_shape, p.path), ((8, 16), (16, 16), (8, 16), "unfused"))
        rs = self.c2.gemm_reduce_plan("reduce_scatter", 8, 16, 32)
        self.assertEqual((rs.c_shape, rs.dtype, rs.out_dtype, rs.path, rs.desc["op"], rs.desc["has_bias"]), ((4, 16), torch.bfloat16, torch.bfloat16, "unfused", 0, 0))  # auto: 4 rows a rank, below 256
        f8 = self.c2.gemm_reduce_plan("reduce_scatter", 8, 16, 64, torch.float8_e4m3fn, b_transposed=True)
        self.assertEqual((f8.out_dtype, f8.desc["a_type"], f8.fp8), (torch.bfloat16, 6, True))
        for q in (p, rs, f8):
            q.close()
            q.close()  # idempotent
            self.assertEqual(q.calls, ["destroy"])
            self.assertNotIn(q.id, it._PLANS)
        with self.assertRaisesRegex(it.IrisError, "IRIS_ERROR_UNSUPPORTED"):
            self.c2.gemm_reduce_plan("reduce_scatter", 8, 16, 32, path="fused")
        with self.assertRaisesRegex(TypeError, "float8_e5m2"):
            self.c2.gemm_reduce_plan("reduce_scatter", 8, 16, 32, torch.float8_e5m2)
        with self.assertRaisesRegex(TypeError, "out_dtype must be one of bfloat16, float16, float32, got int32"):
            self.c2.gemm_reduce_plan("reduce_scatter", 8, 16, 32, out_dtype=torch.int32)
        with self.assertRaisesRegex(ValueError, "M \\(7\\) must be a multiple of world_size 2"):
            self.c2.gemm_reduce_plan("all_reduce", 7, 16, 32)
        with self.assertRaisesRegex(ValueError, "path 'fast'"):
            self.c2.gemm_reduce_plan("all_reduce", 8, 16, 32, path="fast")

    def test_eager_world1(self):
        for op, fn in (("reduce_scatter", it.gemm_reduce_scatter), ("all_reduce", it.gemm_all_reduce)):
            for dt in (torch.bfloat16, torch.float16):
                for odt in (torch.bfloat16, torch.float16, torch.float32):
                    for bt in (False, True):
                        for bias in (False, True):
                            plan = self.c1.gemm_reduce_plan(op, 6, 16, 24, dt, odt, bt, bias)
                            a, b = self.data(6, 16, 24, dt, bt)
                            bv = (torch.arange(16) / 8 - 1).to(odt) if bias else None
                            want = (a.double() @ (b.t() if bt else b).double() + (bv.double() if bias else 0)).to(odt)
                            got = fn(a, b, plan, bv)
                            self.assertTrue(torch.equal(got, want))
                            out = torch.full(plan.c_shape, 7.0, dtype=odt)
                            v = out._version
                            self.assertIs(fn(a, b, plan, bv, out=out), out)
                            self.assertTrue(torch.equal(out, want))
                            self.assertGreater(out._version, v)  # as the dispatcher would bump it
                            plan.close()

    def test_fp8_world1(self):
        plan = self.c1.gemm_reduce_plan("all_reduce", 4, 8, 32, torch.float8_e4m3fn, torch.float32, b_transposed=True)
        a, b = self.data(4, 8, 32, torch.float8_e4m3fn, True)
        sa, sb = torch.tensor([0.5]), torch.tensor([4.0])
        got = it.gemm_all_reduce(a, b, plan, a_scale=sa, b_scale=sb)
        self.assertTrue(torch.equal(got, (a.double() @ b.double().t() * 2).float()))
        with self.assertRaisesRegex(ValueError, "needs a_scale and b_scale"):
            it.gemm_all_reduce(a, b, plan, a_scale=sa)
        with self.assertRaisesRegex(ValueError, "needs a_scale and b_scale"):
            torch.ops.iris.gemm_reduce(a, b, None, None, sb, plan.id)
        with self.assertRaisesRegex(TypeError, "a_scale has dtype float16"):
            it.gemm_all_reduce(a, b, plan, a_scale=sa.half(), b_scale=sb)
        with self.assertRaisesRegex(it.IrisError, "IRIS_ERROR_UNSUPPORTED"):
            self.c1.gemm_reduce_plan("all_reduce", 4, 8, 32, torch.float8_e4m3fn)  # B not transposed
        plan.close()

    def test_shapes_world2(self):
        rs = self.c2.gemm_reduce_plan("reduce_scatter", 8, 16, 32, out_dtype=torch.float32)
        ar = self.c2.gemm_reduce_plan("all_reduce", 8, 16, 32)
        a, b = self.data(8, 16, 16)
        c = it.gemm_reduce_scatter(a, b, rs)
        self.assertEqual((tuple(c.shape), c.dtype), ((4, 16), torch.float32))
        self.assertEqual(rs.calls, [(a.data_ptr(), b.data_ptr(), False, False, c.data_ptr())])
        self.assertEqual(tuple(it.gemm_reduce(a, b, ar).shape), (8, 16))
        with self.assertRaisesRegex(ValueError, "b has shape \\(16, 8\\), the plan needs \\(16, 16\\)"):
            it.gemm_all_reduce(a, b[:, :8].contiguous(), ar)
        rs.close()
        ar.close()

    def test_errors(self):
        plan = self.c1.gemm_reduce_plan("reduce_scatter", 4, 8, 16, bias=True)
        a, b = self.data(4, 8, 16)
        bias = torch.zeros(8, dtype=torch.bfloat16)
        ops = torch.ops.iris
        for exc, text, fn in (
            (ValueError, "a is not contiguous", lambda: it.gemm_reduce_scatter(a.t().contiguous().t(), b, plan, bias)),
            (ValueError, "bias is not contiguous", lambda: it.gemm_reduce_scatter(a, b, plan, torch.zeros(8, 2, dtype=torch.bfloat16)[:, 0])),
            (ValueError, "out is not contiguous", lambda: it.gemm_reduce_scatter(a, b, plan, bias, out=torch.empty(8, 4, dtype=torch.bfloat16).t())),
            (ValueError, "made for op 'reduce_scatter'", lambda: it.gemm_all_reduce(a, b, plan, bias)),
            (RuntimeError, "expected an open GemmReduce plan", lambda: it.gemm_reduce(a, b, object())),
            # through the dispatcher
            (ValueError, "bias is None", lambda: ops.gemm_reduce(a, b, None, None, None, plan.id)),
            (ValueError, "apply to fp8 inputs only", lambda: ops.gemm_reduce(a, b, bias, torch.ones(1), torch.ones(1), plan.id)),
            (TypeError, "b has dtype float16", lambda: ops.gemm_reduce(a, b.half(), bias, None, None, plan.id)),
            (ValueError, "a has shape \\(3, 16\\)", lambda: ops.gemm_reduce(a[:3], b, bias, None, None, plan.id)),
            (TypeError, "out has dtype float32", lambda: ops.gemm_reduce_out(a, b, bias, None, None, torch.empty(4, 8), plan.id)),
            (RuntimeError, "closed or was never created", lambda: ops.gemm_reduce(a, b, bias, None, None, 987654)),
        ):
            with self.assertRaisesRegex(exc, text):
                fn()
        self.assertEqual(plan.calls, [])  # nothing reached the C call
        plan.close()
        with self.assertRaisesRegex(RuntimeError, "expected an open GemmReduce plan"):
            it.gemm_reduce_scatter(a, b, plan, bias)
        with self.assertRaisesRegex(RuntimeError, "closed or was never created"):
            ops.gemm_reduce(a, b, bias, None, None, plan.id)
        with self.assertRaisesRegex(RuntimeError, "is closed"):
            plan.run(a, b, bias, None, None)

    def test_other_layouts_through_the_op(self):
        """A compiled graph may hand the op a non-contiguous layout: the op copies (the public
        functions refuse)."""
        plan = self.c1.gemm_reduce_plan("all_reduce", 4, 8, 16, out_dtype=torch.float32)
        a, b = self.data(4, 8, 16)
        want = it.gemm_all_reduce(a, b, plan)
        got = torch.ops.iris.gemm_reduce(a.t().contiguous().t(), b, None, None, None, plan.id)
        out = torch.zeros(8, 4).t()
        torch.ops.iris.gemm_reduce_out(a, b, None, None, None, out, plan.id)
        self.assertTrue(torch.equal(got, want) and torch.equal(out, want))
        plan.close()

    def test_fake_tensors(self):
        from torch._subclasses.fake_tensor import FakeTensorMode

        plan = self.c2.gemm_reduce_plan("reduce_scatter", 8, 16, 32, out_dtype=torch.float32, b_transposed=True)
        with FakeTensorMode():
            a, b = torch.empty(8, 16, dtype=torch.bfloat16), torch.empty(16, 16, dtype=torch.bfloat16)
            c = torch.ops.iris.gemm_reduce(a, b, None, None, None, plan.id)
            self.assertEqual((tuple(c.shape), c.dtype), ((4, 16), torch.float32))
            with self.assertRaisesRegex(ValueError, "a has shape \\(9, 16\\)"):
                torch.ops.iris.gemm_reduce(torch.empty(9, 16, dtype=torch.bfloat16), b, None, None, None, plan.id)
            with self.assertRaisesRegex(ValueError, "out has shape \\(8, 16\\)"):
                torch.ops.iris.gemm_reduce_out(a, b, None, None, None, torch.empty(8, 16), plan.id)
        self.assertEqual(plan.calls, [])  # the fake implementation never runs the plan
        plan.close()

    def test_compile_fullgraph(self):
        ctx = self.c1
        rs = ctx.gemm_reduce_plan("reduce_scatter", 4, 16, 24, b_transposed=True, bias=True)
        ar = ctx.gemm_reduce_plan("all_reduce", 4, 16, 24, out_dtype=torch.float32, b_transposed=True)

        def f(a, b, bias, out):
            c = it.gemm_reduce_scatter(a * 2, b, rs, bias)
            it.gemm_all_reduce(a, b, ar, out=out)
            it.barrier(ctx)
            return c.float() + 1, out

        a, b = self.data(4, 16, 24, bt=True)
        bias = (torch.arange(16) / 8).to(torch.bfloat16)
        want = f(a, b, bias, torch.zeros(4, 16))
        self.assertEqual([c[0] for c in ctx.calls], ["gemm_reduce_scatter", "gemm_all_reduce", "barrier"])
        self.check_compiled(f, (a, b, bias, torch.zeros(4, 16)), want, ctx)
        rs.close()
        ar.close()

    def test_opcheck(self):
        plan = self.c1.gemm_reduce_plan("all_reduce", 4, 8, 16, torch.float16, torch.float32, bias=True)
        a, b = self.data(4, 8, 16, torch.float16)
        bias = torch.ones(8)
        torch.library.opcheck(torch.ops.iris.gemm_reduce.default, (a, b, bias, None, None, plan.id), test_utils=("test_schema", "test_faketensor"))
        torch.library.opcheck(torch.ops.iris.gemm_reduce_out.default, (a, b, bias, None, None, torch.empty(4, 8), plan.id), test_utils=("test_schema", "test_faketensor"))
        plan.close()


def standin_moe(ctx, max_tokens=4, hidden=16, top_k=2, num_experts=4):
    """A low-latency bf16 Moe plan without the library: its receive buffers are CPU tensors
    and _stream_call records (call, arguments) instead of enqueueing; topk_idx's int32
    values are read back at the call (the tensor handed to the library is alive then)."""

    class StandInMoe(it.Moe):
        def _stream_call(self, call, fn, *args):
            rec = (call,) + args
            if call == "iris_moe_dispatch" and args[1] > 0:
                rec += (list((ctypes.c_int32 * (args[1] * self.top_k)).from_address(args[2])),)
            self.calls.append(rec)

    class Lib:
        iris_moe_dispatch = iris_moe_combine = None

    if not hasattr(ctx, "_lib"):
        ctx._lib = mock.Mock(lib=Lib())
    m = object.__new__(StandInMoe)
    W = ctx.world_size
    m.ctx, m._g, m.calls, m.id = ctx, ctypes.c_void_p(1), [], min(list(it._PLANS) + [0]) - 1
    it._PLANS[m.id] = m  # the ops find it by id (the test's tearDown drops it)
    m.mode, m.max_tokens, m.hidden, m.top_k, m.num_experts = "low_latency", max_tokens, hidden, top_k, num_experts
    m.dispatch_dtype, m.fp8, m.num_local_experts = torch.bfloat16, False, num_experts // W
    m.recv_x = torch.zeros(m.num_local_experts, W * max_tokens, hidden, dtype=torch.bfloat16)
    m.recv_scales, m._scales_arg = None, torch.empty(1)
    m.recv_src = torch.zeros(m.num_local_experts, W * max_tokens, dtype=torch.int32)
    m.recv_count = torch.zeros(m.num_local_experts, dtype=torch.int32)
    m.recv_offsets = torch.zeros(m.num_local_experts + 1, dtype=torch.int32)
    m.num_tokens = 0
    return m


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestMoe(StandInCase):
    """The MoE plan's host side: a call refused in Python still takes part in the library
    (the ranks pair calls by count: a rank that skipped one would leave its peers waiting),
    and what the library is handed (aligned pointers, int32 indices that stay out of range)."""

    def tearDown(self):
        for k in [k for k, v in it._PLANS.items() if type(v).__name__ == "StandInMoe"]:
            it._PLANS.pop(k)
        super().tearDown()

    def inputs(self, m, n=3):
        x = torch.randn(n, m.hidden).to(torch.bfloat16)
        idx = torch.tensor([[t % m.num_experts, (t + 1) % m.num_experts] for t in range(n)], dtype=torch.int32)
        return x, idx, torch.rand(n, m.top_k)

    def test_refused_dispatch_takes_part(self):
        m = standin_moe(self.c2)
        x, idx, w = self.inputs(m)
        it.moe_dispatch(x, idx, w, m)
        self.assertEqual(m.num_tokens, 3)
        bad = [
            (ValueError, "x has shape", (torch.zeros(m.max_tokens + 1, m.hidden, dtype=torch.bfloat16), idx, w)),  # more tokens than the plan holds
            (TypeError, "x has dtype", (x.float(), idx, w)),
            (TypeError, "topk_idx has dtype", (x, w, w)),
            (ValueError, "topk_weights has shape", (x, idx, w[:2])),
        ]
        for exc, text, args in bad:
            for call in (lambda: it.moe_dispatch(*args, m), lambda: m.dispatch(*args)):
                m.calls.clear()
                m.num_tokens = 3
                with self.assertRaisesRegex(exc, text + ".*took part"):
                    call()
                self.assertEqual(m.calls, [("iris_moe_dispatch", None, 0, None, None)], text)
                self.assertEqual(m.num_tokens, 0, text)  # the next combine writes no rows

    def test_dispatch_bumps_the_receive_buffers_versions(self):
        """moe_dispatch overwrites the plan's five receive buffers: their version counters
        go up, directly as through the dispatcher (IRIS_GPU_DISPATCH=1), so autograd sees a
        saved recv_x overwritten by the next dispatch."""
        from iris_gpu.torch import ops

        m = standin_moe(self.c2)
        x, idx, w = self.inputs(m)
        recv = (m.recv_x, m._scales_arg, m.recv_src, m.recv_count, m.recv_offsets)
        for direct in (True, False):
            with mock.patch.object(ops, "_DIRECT", direct):
                before = [t._version for t in recv]
                it.moe_dispatch(x, idx, w, m)
                self.assertEqual([t._version - v for t, v in zip(recv, before)], [1] * 5, direct)

    def test_refused_combine_takes_part(self):
        m = standin_moe(self.c2)
        x, idx, w = self.inputs(m)
        it.moe_dispatch(x, idx, w, m)
        y = torch.zeros_like(m.recv_x)
        m.calls.clear()
        with self.assertRaisesRegex(ValueError, "y has shape.*took part"):  # no usable y: NaN rows go out, nothing written
            it.moe_combine(y[:, :1], m)
        self.assertEqual(m.calls, [("iris_moe_combine", None, None)])
        for out in (torch.empty(2, m.hidden, dtype=torch.bfloat16), torch.empty(m.hidden, 3, dtype=torch.bfloat16).t()):  # wrong rows; not contiguous
            m.calls.clear()
            with self.assertRaisesRegex(ValueError, "out .*took part"):  # y's rows still go out, nothing written here
                it.moe_combine(y, m, out=out)
            self.assertEqual(m.calls, [("iris_moe_combine", y.data_ptr(), None)])
        m.calls.clear()
        out = it.moe_combine(y, m)
        self.assertEqual(tuple(out.shape), (3, m.hidden))
        self.assertEqual(m.calls, [("iris_moe_combine", y.data_ptr(), out.data_ptr())])

    def test_int64_indices_past_int32_stay_out_of_range(self):
        m = standin_moe(self.c1)
        x, idx, w = self.inputs(m)
        big = idx.to(torch.int64)
        big[0, 0], big[1, 1], big[2, 0] = 2 ** 32 + 1, -(2 ** 32), 2 ** 31  # would wrap onto experts 1, 0 and -2^31
        m.dispatch(x, big, w)
        got = m.calls[-1][-1]
        for t, k in ((0, 0), (1, 1), (2, 0)):
            g = got[t * m.top_k + k]
            self.assertTrue(g < -1 or g >= m.num_experts, (t, k, g))  # the kernel skips it and check() names it
        self.assertEqual(got[1], idx[0, 1].item())
        self.assertEqual(got[3 * m.top_k - 1], idx[2, 1].item())

    def test_unaligned_views_are_copied(self):
        m = standin_moe(self.c1)
        _, idx, w = self.inputs(m)
        buf = torch.randn(3 * m.hidden + 1).to(torch.bfloat16)
        x = buf[1:].view(3, m.hidden)  # contiguous, 2 bytes past an aligned start
        self.assertNotEqual(x.data_ptr() % 16, 0)
        m.dispatch(x, idx, w)
        call = m.calls[-1]
        self.assertEqual(call[1] % 16, 0)
        ybuf = torch.zeros(m.recv_x.numel() + 1, dtype=torch.bfloat16)
        y = ybuf[1:].view(m.recv_x.shape)
        obuf = torch.zeros(3 * m.hidden + 1, dtype=torch.bfloat16)
        out = obuf[1:].view(3, m.hidden)
        m.calls.clear()
        self.assertIs(m.combine(y, out), out)
        self.assertEqual(len(m.calls), 1)
        self.assertEqual([p % 16 for p in m.calls[0][1:]], [0, 0])


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestCollectiveRefusedInStep(StandInCase):
    """A collective refused in Python on this rank (world 2: the peer is in the call) still
    takes part when x itself is usable: the same C call of x into scratch buffers, then the
    error, saying so. A refusal of x itself (op, root, a count that does not divide) takes
    part with one call the library refuses (NULL buffers)."""

    ids = (-141, -142)

    def test_refused_collectives_take_part(self):
        c2, x = self.c2, torch.ones(8)
        cases = [
            (ValueError, lambda: it.all_reduce(x, c2, out=torch.zeros(9)), [("all_reduce", 8, 0, 0)]),
            (TypeError, lambda: it.all_reduce(x, c2, out=torch.zeros(8, dtype=torch.float16)), [("all_reduce", 8, 0, 0)]),
            (ValueError, lambda: it.all_reduce(torch.ones(8, 2)[:, 0], c2), [("all_reduce", 8, 0, 0)]),
            (ValueError, lambda: it.all_gather(torch.ones(2, 4), c2, dim=1, out=torch.zeros(16)), [("all_gather", 8, 0, None)]),
            (ValueError, lambda: it.reduce_scatter(torch.ones(4, 4), c2, out=torch.zeros(3)), [("reduce_scatter", 8, 0, 0)]),
            (ValueError, lambda: it.all_to_all(x, c2, out=torch.zeros(6)), [("all_to_all", 4, 0, None)]),
            (ValueError, lambda: it.broadcast(x, c2, 1, out=torch.zeros(3)), [("broadcast", 8, 0, 1)]),
            (ValueError, lambda: it.all_gather_(torch.ones(8, 2)[:, 0], c2), [("all_gather", 4, 0, None)]),
            (ValueError, lambda: it.all_gather(torch.ones(4, 2).t(), c2, dim=1), [("all_gather", 8, 0, None)]),  # not contiguous, along dim 1
            (ValueError, lambda: it.reduce_scatter(torch.ones(4, 4).t(), c2, dim=1), [("reduce_scatter", 8, 0, 0)]),
            # x itself refused (op, root, a count that does not divide): one call the library
            # refuses (NULL buffers, 1 float32) takes part
            (ValueError, lambda: it.all_reduce(x, c2, "prod"), [("all_reduce", 1, 0, 0)]),
            (ValueError, lambda: it.broadcast(x, c2, 5), [("broadcast", 1, 0, 0)]),
            (ValueError, lambda: it.all_gather_(torch.ones(3), c2), [("all_gather", 1, 0, None)]),
            (ValueError, lambda: it.all_to_all(torch.ones(3), c2), [("all_to_all", 1, 0, None)]),
            # a shape refused along its dim: the same count of elements takes part
            (ValueError, lambda: it.reduce_scatter(torch.ones(3, 4), c2), [("reduce_scatter", 6, 0, 0)]),
            (ValueError, lambda: it.all_gather(torch.ones(2, 4), c2, dim=2), [("all_gather", 8, 0, None)]),  # out of range (it wrapped onto dim 0)
            (ValueError, lambda: it.reduce_scatter(torch.ones(4, 4), c2, dim=-3), [("reduce_scatter", 8, 0, 0)]),
            # an input without elements: the peers' call of none takes part in the library,
            # so this one does too, as a refusal
            (ValueError, lambda: it.all_reduce(torch.ones(0), c2, "prod"), [("all_reduce", 1, 0, 0)]),
        ]
        for i, (exc, fn, calls) in enumerate(cases):
            c2.calls.clear()
            with self.assertRaises(exc) as cm:
                fn()
            self.assertEqual(c2.calls, calls, i)
            self.assertEqual("took part" in str(cm.exception), bool(calls), (i, str(cm.exception)))
        y = torch.arange(8.0).reshape(4, 2)[:, 0]  # in place, refused (not contiguous): x is left as it was
        with self.assertRaisesRegex(ValueError, "took part"):
            it.all_reduce_(y, c2)
        self.assertTrue(torch.equal(y, torch.arange(0.0, 8.0, 2.0)))

    def test_refused_rmsnorm_takes_part(self):
        from iris_gpu.torch import ops

        calls = []

        def launch(x, residual, weight, out, out_fp8, scale, eps, quant, algo, cid):  # the real launch's Python checks, then a record
            ops._rmsnorm_check(x, residual, weight, out, out_fp8, scale, quant, it._CONTEXTS[cid], fake=True)
            calls.append((tuple(x.shape), quant, algo, tuple(scale.shape) if scale is not None else None))

        x, w = torch.ones(3, 16, dtype=torch.bfloat16), torch.ones(16, dtype=torch.bfloat16)
        with mock.patch.object(ops, "_rmsnorm_launch", launch):
            with self.assertRaisesRegex(ValueError, "took part"):
                it.all_reduce_rmsnorm(x, torch.zeros(3, 15, dtype=torch.bfloat16), w, self.c2)
            self.assertEqual(calls, [((3, 16), 0, 0, None)])
            with self.assertRaisesRegex(ValueError, "took part"):
                it.all_reduce_rmsnorm(x, torch.zeros(3, 16, dtype=torch.bfloat16), w, self.c2, quant="fp8_per_tensor")  # no scale
            self.assertEqual(calls[1:], [((3, 16), 1, 0, (1,))])
            del calls[:]
            with self.assertRaises(TypeError):  # x itself refused: no call
                it.all_reduce_rmsnorm(x.float(), torch.zeros(3, 16), w.float(), self.c2)
            self.assertEqual(calls, [])
            it.all_reduce_rmsnorm(x, torch.zeros(3, 16, dtype=torch.bfloat16), w, self.c2)  # a good call: one launch
            self.assertEqual(calls, [((3, 16), 0, 0, None)])
            for out, exc, text in ((x.view(torch.float16), TypeError, "out is torch.float16"), (x[:1], ValueError, "out has shape")):
                del calls[:]  # at x's address but not x: refused (it was taken as in place), taking part
                with self.assertRaisesRegex(exc, text + ".*took part"):
                    it.all_reduce_rmsnorm(x, torch.zeros(3, 16, dtype=torch.bfloat16), w, self.c2, out=out)
                self.assertEqual(calls, [((3, 16), 0, 0, None)])

    def test_fake_all_to_all_refuses_what_the_real_one_does(self):
        from torch._subclasses.fake_tensor import FakeTensorMode

        with self.assertRaisesRegex(ValueError, "not a multiple of world_size 2"):
            it.all_to_all(torch.ones(3), self.c2)
        with FakeTensorMode():
            with self.assertRaisesRegex(ValueError, "not a multiple of world_size 2"):
                torch.ops.iris.all_to_all(torch.empty(3), self.c2.id)
            self.assertEqual(tuple(torch.ops.iris.all_to_all(torch.empty(4), self.c2.id).shape), (4,))

    def slot(self):
        import torch.distributed as dist

        self.c2._ranks = [0, 1]
        with mock.patch.object(dist, "get_rank", lambda g=None: 1), mock.patch.object(dist, "get_world_size", lambda g=None: 2):
            return it.CustomAllreduce([0, 1], 0, ctx=self.c2)

    def test_serving_slot_all_reduce(self):
        ca = self.slot()
        x = torch.ones(8)
        self.assertTrue(torch.equal(ca.all_reduce(x, out=torch.zeros(8)), torch.zeros(8)))  # world 2 stand-in: recorded only
        self.assertEqual(self.c2.calls, [("all_reduce", 8, 0, 0)])
        self.c2.calls.clear()
        with self.assertRaisesRegex(ValueError, "took part"):  # vLLM's out= of the wrong size: the call still takes part
            ca.all_reduce(x, out=torch.zeros(4))
        self.assertEqual(self.c2.calls, [("all_reduce", 8, 0, 0)])
        ca.close()
        with self.assertRaisesRegex(RuntimeError, "closed or disabled"):
            ca.all_reduce(x)

    def test_serving_slot_fused_arguments(self):
        ca = self.slot()
        x, w = torch.ones(2, 16, dtype=torch.bfloat16), torch.ones(16, dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "quant 'fp8'"):  # refused whatever the gate and capture() say
            ca.fused_add_rms_norm(x, torch.zeros_like(x), w, 1e-6, quant="fp8")
        with ca.capture():
            with self.assertRaisesRegex(ValueError, "quant 'fp8'"):
                ca.fused_add_rms_norm(x, torch.zeros_like(x), w, 1e-6, quant="fp8")
        with mock.patch.object(ca, "should_fused_add_rms_norm", lambda *a: True):  # as on the GPU
            self.assertIsNone(ca.fused_add_rms_norm(x, None, w, 1e-6))  # no residual: the engine runs its own
        ca.close()

    def test_ops_called_directly_take_part(self):
        """torch.ops.iris.<kind>_out called directly (as user code or inductor's code calls it)
        with an out that does not fit takes part as the public functions do: one C call of x
        into scratch, the error saying so once. x itself refused: no call. A call that passes:
        one call. A trace (fake implementations): no call."""
        from torch._subclasses.fake_tensor import FakeTensorMode

        c2, x, ops = self.c2, torch.ones(8), torch.ops.iris
        cases = [
            (ValueError, lambda: ops.all_reduce_out(x, torch.zeros(9), c2.id, "sum"), ("all_reduce", 8, 0, 0)),
            (TypeError, lambda: ops.all_reduce_out(x, torch.zeros(8, dtype=torch.float16), c2.id, "sum"), ("all_reduce", 8, 0, 0)),
            (ValueError, lambda: ops.all_gather_out(x, torch.zeros(8), c2.id), ("all_gather", 8, 0, None)),
            (ValueError, lambda: ops.reduce_scatter_out(x, torch.zeros(3), c2.id, "max"), ("reduce_scatter", 4, 0, 2)),
            (ValueError, lambda: ops.all_to_all_out(x, torch.zeros(6), c2.id), ("all_to_all", 4, 0, None)),
            (ValueError, lambda: ops.broadcast_out(x, torch.zeros(3), c2.id, 1), ("broadcast", 8, 0, 1)),
            (ValueError, lambda: it._IMPLS["all_reduce_out"](x, torch.zeros(9), c2.id, "sum"), ("all_reduce", 8, 0, 0)),
        ]
        for i, (exc, fn, call) in enumerate(cases):
            c2.calls.clear()
            with self.assertRaises(exc) as cm:
                fn()
            self.assertEqual(c2.calls, [call], i)
            self.assertEqual(str(cm.exception).count("took part"), 1, (i, str(cm.exception)))
        # x itself refused: one call the library refuses (NULL buffers, 1 float32) takes part, once
        for fn, call in ((lambda: ops.all_reduce_out(x, torch.zeros(8), c2.id, "prod"), ("all_reduce", 1, 0, 0)), (lambda: ops.broadcast(x, c2.id, 5), ("broadcast", 1, 0, 0)),
                         (lambda: ops.all_gather_inplace(torch.ones(3), c2.id), ("all_gather", 1, 0, None)), (lambda: ops.all_to_all(torch.ones(3), c2.id), ("all_to_all", 1, 0, None))):
            c2.calls.clear()
            with self.assertRaises(ValueError) as cm:
                fn()
            self.assertEqual(c2.calls, [call])
            self.assertEqual(str(cm.exception).count("took part"), 1, str(cm.exception))
        c2.calls.clear()
        ops.all_reduce_out(x, torch.zeros(8), c2.id, "sum")
        ops.all_reduce_inplace(x.clone(), c2.id, "sum")
        self.assertEqual(ops.all_reduce(x, c2.id, "sum").shape, (8,))
        self.assertEqual(c2.calls, [("all_reduce", 8, 0, 0)] * 3)
        c2.calls.clear()
        with FakeTensorMode():
            with self.assertRaises(ValueError) as cm:
                ops.all_reduce_out(torch.empty(8), torch.empty(9), c2.id, "sum")
        self.assertEqual(c2.calls, [])
        self.assertNotIn("took part", str(cm.exception))

    def test_public_functions_take_part_once(self):
        """The public functions reach the ops' implementations (directly, or through the
        dispatcher with IRIS_GPU_DISPATCH=1), which take part first: the except clauses of
        the functions do not take part again (one C call, the note once), and a take-part
        that failed (here: check_shapes' exchange found the peers in another call) is not
        tried again. A refusal every rank made alike takes no part."""
        from iris_gpu.torch import ops

        c2, x = self.c2, torch.ones(8)
        ca = self.slot()
        calls = [
            (lambda: it.all_reduce(x, c2, out=torch.zeros(9)), ("all_reduce", 8, 0, 0)),
            (lambda: it.all_gather(x, c2, out=torch.zeros(8)), ("all_gather", 8, 0, None)),
            (lambda: it.reduce_scatter(x, c2, out=torch.zeros(3)), ("reduce_scatter", 4, 0, 0)),
            (lambda: it.broadcast(x, c2, 1, out=torch.zeros(3)), ("broadcast", 8, 0, 1)),
            (lambda: ca.all_reduce(x, out=torch.zeros(4)), ("all_reduce", 8, 0, 0)),
            (lambda: torch.ops.iris.all_reduce_out(x, torch.zeros(9), c2.id, "sum"), ("all_reduce", 8, 0, 0)),
        ]
        run = c2._run

        def mismatch(kind, send, recv, count, dtype, extra=None):  # check_shapes: the peers made another call
            c2.calls.append((kind, count, dtype, extra))
            err = ValueError("iris collective mismatch")
            err._iris_every_rank = True
            raise err

        for direct in (True, False):
            with mock.patch.object(ops, "_DIRECT", direct):
                for i, (fn, call) in enumerate(calls):
                    c2.calls.clear()
                    with self.assertRaises(ValueError) as cm:
                        fn()
                    self.assertEqual(c2.calls, [call], (direct, i))
                    self.assertEqual(str(cm.exception).count("took part"), 1, (direct, i, str(cm.exception)))
                    c2._run = mismatch
                    try:
                        c2.calls.clear()
                        with self.assertRaises(ValueError) as cm:
                            fn()
                        self.assertEqual(c2.calls, [call], (direct, i))  # one try, not one per except clause
                        self.assertNotIn("took part", str(cm.exception))
                        c2.calls.clear()
                        with self.assertRaisesRegex(ValueError, "^iris collective mismatch$"):  # every rank refused: no part taken
                            it.all_reduce(x, c2)
                        self.assertEqual(c2.calls, [("all_reduce", 8, 0, 0)])
                    finally:
                        c2._run = run
        ca.close()

    def test_rmsnorm_ops_called_directly_take_part(self):
        """iris::all_reduce_rmsnorm_out / _inplace called directly with a residual that does
        not fit take part as all_reduce_rmsnorm does (one launch of x with scratch buffers,
        the note once); all_reduce_rmsnorm itself still launches once."""
        from iris_gpu.torch import ops

        calls = []

        def launch(x, residual, weight, out, out_fp8, scale, eps, quant, algo, cid):  # the real launch's Python checks, then a record
            ops._rmsnorm_check(x, residual, weight, out, out_fp8, scale, quant, it._CONTEXTS[cid], fake=True)
            calls.append((tuple(x.shape), quant, algo))

        x, w, bad = torch.ones(3, 16, dtype=torch.bfloat16), torch.ones(16, dtype=torch.bfloat16), torch.zeros(3, 15, dtype=torch.bfloat16)
        cid, r = self.c2.id, torch.ops.iris
        with mock.patch.object(ops, "_rmsnorm_launch", launch):
            for direct in (True, False):
                for fn in (lambda: r.all_reduce_rmsnorm_out(x, bad, w, torch.empty_like(x), None, None, 1e-6, 0, 2, cid),
                           lambda: r.all_reduce_rmsnorm_inplace(x.clone(), bad, w, None, None, 1e-6, 0, 2, cid),
                           lambda: it.all_reduce_rmsnorm(x, bad, w, self.c2, algo="separate"),
                           lambda: it.all_reduce_rmsnorm(x.clone(), bad, w, self.c2, out=x, algo="separate")):
                    del calls[:]
                    with mock.patch.object(ops, "_DIRECT", direct), self.assertRaises(ValueError) as cm:
                        fn()
                    self.assertEqual(calls, [((3, 16), 0, 2)])
                    self.assertEqual(str(cm.exception).count("took part"), 1, str(cm.exception))
            del calls[:]
            r.all_reduce_rmsnorm_out(x, torch.zeros_like(x), w, torch.empty_like(x), None, None, 1e-6, 0, 2, cid)
            self.assertEqual(calls, [((3, 16), 0, 2)])

    def test_moe_ops_called_directly_take_part_once(self):
        """iris::moe_dispatch / moe_combine called directly take part (the plan's dispatch and
        combine do), once, and mark the error so that no except clause takes part again."""
        from iris_gpu.torch import ops

        m = standin_moe(self.c2)
        try:
            x = torch.randn(3, m.hidden).to(torch.bfloat16)
            idx, w = torch.tensor([[0, 1], [1, 2], [2, 3]], dtype=torch.int32), torch.rand(3, m.top_k)
            recv = (m.recv_x, m._scales_arg, m.recv_src, m.recv_count, m.recv_offsets)
            with self.assertRaises(ValueError) as cm:
                torch.ops.iris.moe_dispatch(x[:, :8], idx, w, *recv, m.id)
            self.assertEqual(m.calls, [("iris_moe_dispatch", None, 0, None, None)])
            self.assertEqual(str(cm.exception).count("took part"), 1)
            ops._take_part(cm.exception, lambda: m.calls.append("again"))
            self.assertEqual(len(m.calls), 1)
            m.calls.clear()
            with self.assertRaises(ValueError) as cm:
                torch.ops.iris.moe_combine_out(torch.zeros_like(m.recv_x), torch.empty(2, m.hidden, dtype=torch.bfloat16), m.id)
            self.assertEqual([c[0] for c in m.calls], ["iris_moe_combine"])
            self.assertEqual(str(cm.exception).count("took part"), 1)
        finally:
            it._PLANS.pop(m.id, None)


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestPlanRefusedInStep(unittest.TestCase):
    """A plan constructor that refuses an argument on this rank still calls the C create
    (which meets the peers before judging: they fail alike instead of waiting out their
    bound), with the description poisoned, then raises the argument's error."""

    def setUp(self):
        self.ctx = StandIn(2, -131)
        self.created = []
        created = self.created

        class Lib:
            def __init__(self):
                for name, field in (("iris_moe_create", "mode"), ("iris_ag_gemm_create", "layout"), ("iris_gemm_rs_create", "op")):
                    setattr(self, name, (lambda n, f: lambda h, d, g: created.append((n, getattr(d._obj, f))) or 5)(name, field))

        self.ctx._lib = mock.Mock(lib=Lib())
        self.ctx._lib.detail = lambda: "detail"
        self.ctx._handle = lambda: None

        self.patch = mock.patch.object(torch.cuda, "device", _NoDevice)
        self.patch.start()

    def tearDown(self):
        self.patch.stop()
        self.ctx.close()

    def test_moe(self):
        with self.assertRaisesRegex(ValueError, "mode 'bogus'"):
            it.Moe(self.ctx, 4, 16, 2, 4, mode="bogus")
        with self.assertRaisesRegex(TypeError, "dispatch_dtype"):
            it.Moe(self.ctx, 4, 16, 2, 4, dispatch_dtype=torch.float32)
        with self.assertRaises(ValueError):
            it.Moe(self.ctx, "four", 16, 2, 4)
        self.assertEqual(self.created, [("iris_moe_create", -1)] * 3)

    def test_ag_gemm(self):
        with self.assertRaisesRegex(TypeError, "dtype"):
            it.AgGemm(self.ctx, 256, 128, 64, torch.float32, None, "rows", False, False, "auto", False)
        with self.assertRaisesRegex(ValueError, "path"):
            it.AgGemm(self.ctx, 256, 128, 64, torch.bfloat16, None, "rows", False, False, "fastest", False)
        self.assertEqual(self.created, [("iris_ag_gemm_create", -1)] * 2)

    def test_gemm_reduce(self):
        with self.assertRaisesRegex(TypeError, "dtype"):
            it.GemmReduce(self.ctx, "reduce_scatter", 256, 128, 64, dtype=torch.float32)
        with self.assertRaisesRegex(ValueError, "path"):
            it.GemmReduce(self.ctx, "all_reduce", 256, 128, 64, path="fastest")
        self.assertEqual(self.created, [("iris_gemm_rs_create", -1)] * 2)


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestBringUpPieces(unittest.TestCase):
    def test_store_bootstrap_three_ranks_on_a_torch_store(self):
        """StoreBootstrap over a real torch Store (PrefixStore of a HashStore), 3 ranks as threads."""
        import threading

        import torch.distributed as dist
        from iris_gpu import _host

        base = dist.HashStore()
        world, out, errs = 3, {}, []

        def rank(r):
            try:
                b = _host.StoreBootstrap(dist.PrefixStore("iris_gpu/0-1-2/0/", base), r, world, 20.0)
                send = ctypes.create_string_buffer(bytes([r]) * 8, 8)
                recv = ctypes.create_string_buffer(8 * world)
                for _ in range(5):
                    assert b._allgather(None, ctypes.addressof(send), ctypes.addressof(recv), 8) == 0, b.error
                    assert b._barrier(None) == 0, b.error
                out[r] = recv.raw
            except Exception as e:  # noqa: BLE001
                errs.append(e)

        ts = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        self.assertFalse(errs, errs)
        for r in range(world):
            self.assertEqual(out[r], b"".join(bytes([q]) * 8 for q in range(world)))
        self.assertLess(base.num_keys(), 2 * world + 1)  # old steps' keys were deleted

    def test_store_timeout_is_reported(self):
        import datetime

        import torch.distributed as dist
        from iris_gpu import _host

        b = _host.StoreBootstrap(dist.HashStore(), 0, 2, 0.2)  # rank 1 never comes
        self.assertEqual(b._barrier(None), 1)
        self.assertIsNotNone(b.error)
        self.assertIsInstance(b.timeout, datetime.timedelta)

    def test_custom_allreduce_world1_and_context_without_gpu(self):
        import torch.distributed as dist

        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            ca = it.CustomAllreduce(dist.group.WORLD, "cuda:0")
            self.assertTrue(ca.disabled)
            self.assertEqual((ca.world_size, ca.rank, ca.max_size, ca.device), (1, 0, 8 << 20, torch.device("cuda", 0)))
            self.assertFalse(ca.should_custom_ar(torch.zeros(64)))
            self.assertIsNone(ca.custom_all_reduce(torch.zeros(64)))
            # what vLLM reads: _IS_CAPTURING False outside capture(), True inside, False after
            self.assertIs(ca._IS_CAPTURING, False)
            self.assertIn(4, ca._SUPPORTED_WORLD_SIZES)
            with ca.capture():
                self.assertIs(ca._IS_CAPTURING, True)
            self.assertIs(ca._IS_CAPTURING, False)
            with self.assertRaises(RuntimeError):
                with ca.capture():
                    raise RuntimeError("capture failed")
            self.assertIs(ca._IS_CAPTURING, False)  # reset on the way out of an error too
            ca.close()
            if not torch.cuda.is_available():
                with self.assertRaisesRegex(RuntimeError, "no CUDA device"):
                    it.Context()
        finally:
            dist.destroy_process_group()


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestGpuTestLogic(unittest.TestCase):
    """test_torch_gpu.py's collective cases at world 1 on the CPU (stand-in context, gloo):
    its inputs, references, modes and torch.distributed comparisons, without a GPU."""

    def gpu_test_lines(self, ctx, body):
        """body(R, tg) on a world-1 test_torch_gpu.Runner R over the stand-in ctx (CPU
        tensors, gloo, torch.cuda.synchronize a no-op); returns the result lines printed."""
        import importlib.util

        import torch.distributed as dist

        if importlib.util.find_spec("numpy") is None:
            self.skipTest("SKIP: numpy is not installed (all_gather_object needs it)")
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            return gpu_test_run(ctx, body)
        finally:
            dist.destroy_process_group()

    def test_collective_cases_world1(self):
        class Ctx(StandIn):
            def empty(self, shape, dtype=None):
                return torch.empty(shape, dtype=dtype or torch.float32)

        lines = self.gpu_test_lines(Ctx(1, -103), lambda R, tg: tg.collective_cases(R, sizes=(37,)))
        self.assertGreater(len(lines), 250)
        self.assertEqual([l for l in lines if not l.startswith("PASS: ")], [])

    def test_gemm_reduce_cases_world1(self):
        """test_torch_gpu.py's GEMM + reduce cases at world 1 on the CPU (stand-in plans that
        compute with torch): its inputs, float64 references, fp8 slack, poisoning, the
        bitwise comparison across ranks, refusals and the compile test."""

        def body(R, tg):
            self.assertTrue(tg.gemm_reduce_available(R))
            tg.gemm_reduce_cases(R, rows_sweep=(1, 129))
            R.result("refusals", R.check_gemm_reduce_refusals)
            R.result("compile", R.check_gemm_reduce_compile)

        lines = self.gpu_test_lines(StandIn(1, -104), body)
        # available, the fused path's SKIP (the stand-in refuses it), 96 shapes, 2 ops x (2 paths + auto) x 2 row counts,
        # exact=True 2 ops x 2 paths, fp8 8, refusals, compile
        self.assertEqual(len(lines), 1 + 1 + 96 + 2 * (2 * 2 + 2) + 2 * 2 + 8 + 2, lines[:3])
        self.assertEqual([l for l in lines if not l.startswith("PASS: ") and "the fused path's cases" not in l], [])
        self.assertEqual([p for p in it._PLANS.values() if isinstance(p, it.GemmReduce)], [])  # every plan closed

    def test_gemm_reduce_cases_processes(self):
        """The same at world 2 and 3: one process per rank over gloo, the stand-in plans summing
        the partials through torch.distributed; checks the test's per-rank inputs, row
        slices and the comparison across ranks."""
        import importlib.util
        import tempfile

        import torch.multiprocessing as mp

        if importlib.util.find_spec("numpy") is None:
            self.skipTest("SKIP: numpy is not installed (all_gather_object needs it)")
        for world in (2, 3):
            with tempfile.TemporaryDirectory() as d:
                mp.spawn(gemm_rank, args=(world, d), nprocs=world)
                with open(os.path.join(d, "lines")) as f:
                    lines = f.read().splitlines()
            self.assertEqual(len(lines), 1 + 1 + 96 + 2 * (2 * 2 + 2) + 2 * 2 + 8, (world, lines[:3]))
            self.assertEqual([l for l in lines if not l.startswith("PASS: ") and "the fused path's cases" not in l], [], world)
            self.assertTrue(all(l.startswith(("PASS: torch W=%d: " % world, "SKIP: torch W=%d: gemm_reduce: the fused path's cases" % world)) for l in lines))


def gpu_test_run(ctx, body):
    """body(R, tg) on a test_torch_gpu.Runner R of ctx's rank and world over the current
    process group (CPU tensors, torch.cuda.synchronize a no-op); the lines it printed."""
    import contextlib
    import io

    sys.path.insert(0, HERE)
    import test_torch_gpu as tg

    out = io.StringIO()
    with mock.patch.object(_types, "check_tensor", cpu_check), mock.patch.object(torch.cuda, "synchronize", lambda *a: None):
        R = tg.Runner.__new__(tg.Runner)
        R.rank, R.world, R.ctx, R.it, R.shared, R.no_ref, R.seed, R.times = ctx.rank, ctx.world_size, ctx, it, True, set(), 0, []
        R.dev = torch.device("cpu")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            body(R, tg)
        ctx.close()
    return out.getvalue().splitlines()


def gemm_rank(rank, world, d):
    """One rank of test_gemm_reduce_cases_processes (torch.multiprocessing.spawn)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "store"), rank=rank, world_size=world)
    try:
        def body(R, tg):
            if tg.gemm_reduce_available(R):
                tg.gemm_reduce_cases(R, rows_sweep=(1, 129))

        lines = gpu_test_run(StandIn(world, -200 - rank, rank, gloo=True), body)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        with open(os.path.join(d, "lines"), "w") as f:
            f.write("\n".join(lines) + "\n")


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestDLPack(unittest.TestCase):
    def test_cpu_capsule_round_trip(self):
        buf = (ctypes.c_uint8 * 64)(*range(64))

        class Owner:
            pass

        owner = Owner()
        before = len(it._dl_keep)
        cap = it._dl_capsule(ctypes.addressof(buf), 64, 0, owner, device_type=1)  # kDLCPU
        t = torch.from_dlpack(cap)
        self.assertEqual((t.dtype, t.numel(), t[5].item()), (torch.uint8, 64, 5))
        t[0] = 200  # zero-copy
        self.assertEqual(buf[0], 200)
        self.assertEqual(len(it._dl_keep), before + 1)
        del t
        self.assertEqual(len(it._dl_keep), before)  # the deleter released the owner


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestLifeCycle(unittest.TestCase):
    """Context.close with plans left open, the barriers' device, the serving slot on a
    team without collective state: the real methods over a fake library."""

    def bare_context(self, lib_calls, device=1):
        """A Context object (no bring-up) whose library records its calls."""
        ctx = object.__new__(it.Context)
        ctx.closed, ctx.id, ctx.rank, ctx.world_size, ctx.device = False, -300, 0, 2, device
        ctx._teams, ctx._team_of, ctx._stagings, ctx._live, ctx._h, ctx._pending_frees = [], {}, [], 0, 7, []

        class L:
            pass

        L.lib = L()
        L.lib.iris_finalize = lambda h: lib_calls.append(("finalize", h)) or 0
        L.detail = lambda: "detail"
        ctx._lib = L
        it._CONTEXTS[ctx.id] = ctx
        return ctx

    def device_patches(self, current):
        """torch.cuda.device / current_stream / the current device, without a GPU: current[0]
        is the device made current."""
        class Dev:
            def __init__(self, d):
                self.d = d

            def __enter__(self):
                self.prev, current[0] = current[0], self.d

            def __exit__(self, *exc):
                current[0] = self.prev

        class Stream:
            cuda_stream = 0

        return [mock.patch.object(torch.cuda, "device", Dev), mock.patch.object(torch.cuda, "current_stream", lambda d=None: Stream()),
                mock.patch.object(torch._C, "_cuda_getDevice", lambda: current[0])]

    def test_close_closes_open_plans_newest_first(self):
        from iris_gpu.torch.plans import _PLANS

        calls, current = [], [0]
        ctx = self.bare_context(calls)
        other = object()

        class Plan:
            def __init__(self, pid, owner):
                self.id, self.ctx = pid, owner
                _PLANS[pid] = self

            def close(self):
                calls.append(("close", self.id))
                _PLANS.pop(self.id, None)

        Plan(-1003, ctx), Plan(-1001, ctx), Plan(-1002, other)
        patches = self.device_patches(current)
        for p in patches:
            p.start()
        try:
            with self.assertWarnsRegex(UserWarning, "closing 2 plan"):
                ctx.close()
        finally:
            for p in patches:
                p.stop()
            _PLANS.pop(-1002, None)
        self.assertEqual(calls, [("close", -1001), ("close", -1003), ("finalize", 7)])  # newest (highest id) first, then finalize
        self.assertTrue(ctx.closed)
        self.assertNotIn(-1001, _PLANS)

    def test_barriers_run_on_the_contexts_device(self):
        calls, current = [], [0]
        ctx = self.bare_context(calls, device=1)
        ctx._lib.lib.iris_barrier_device = lambda h, stream: calls.append(("barrier", current[0])) or 0
        patches = self.device_patches(current)
        for p in patches:
            p.start()
        try:
            ctx._barrier_device()
        finally:
            for p in patches:
                p.stop()
            it._CONTEXTS.pop(ctx.id, None)
        self.assertEqual(calls, [("barrier", 1)])  # launched with cuda:1 current, though cuda:0 was
        self.assertEqual(current[0], 0)

    def test_slot_on_a_team_without_collectives_stays_disabled(self):
        import torch.distributed as dist

        class Team:
            closed, has_collectives, ranks = False, False, [2, 3]

        class Ctx:
            device, closed = 0, False

            def team_for(self, group):
                return Team()

        with mock.patch.object(dist, "get_rank", lambda g=None: 0), mock.patch.object(dist, "get_world_size", lambda g=None: 2):
            with self.assertWarnsRegex(UserWarning, "no collective state"):
                ca = it.CustomAllreduce("group", 0, ctx=Ctx())
        self.assertTrue(ca.disabled)
        self.assertFalse(ca.should_custom_ar(torch.empty(8)))


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestSlotOwnContextSizes(unittest.TestCase):
    """CustomAllreduce(ctx=None) brings up a Context of its own: the heap it asks for and
    IRIS_COLL_STAGING while the bring-up runs, through the real Context with the library's
    bring-up (_host.bring_up) faked, over a gloo world of one taken for W ranks."""

    MIB = 1 << 20
    VARS = ("IRIS_HEAP_SIZE", "IRIS_COLL_STAGING")

    def setUp(self):
        import torch.distributed as dist
        from iris_gpu import _host

        self.saved = {k: os.environ.pop(k) for k in self.VARS if k in os.environ}
        self.seen, self.refuse, self.world = [], False, 2
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        lib = mock.Mock()
        lib.lib.iris_finalize.return_value = 0

        def bring_up(lib_, rank, world, device, heap_size, timeout_ms, boot):
            self.seen.append((heap_size, os.environ.get("IRIS_COLL_STAGING")))
            if self.refuse:
                raise it.IrisError(_lib.ERROR_OUT_OF_MEMORY, "(stand-in) no room", "iris_collectives_setup (rank 0)")
            return 7

        self.patches = [mock.patch.object(_host, "bring_up", bring_up), mock.patch.object(_lib, "load", lambda path=None: lib),
                        mock.patch.object(dist, "get_world_size", lambda g=None: self.world), mock.patch.object(torch.cuda, "device", _NoDevice)]
        for p in self.patches:
            p.start()

    def tearDown(self):
        import torch.distributed as dist

        for p in self.patches:
            p.stop()
        dist.destroy_process_group()
        for k in self.VARS:
            os.environ.pop(k, None)
        os.environ.update(self.saved)

    def slot(self, **kw):
        import torch.distributed as dist

        ca = it.CustomAllreduce(dist.group.WORLD, 0, **kw)
        self.assertFalse(ca.disabled)
        ca.close()
        return ca

    def test_formula(self):
        M, C = self.MIB, it.CustomAllreduce
        self.assertEqual([C.heap_bytes(w) // M for w in (2, 3, 4, 6, 8, 16)], [208, 208, 214, 222, 228, 280])  # as documented
        self.assertEqual(C.heap_bytes(4, staging=0), 86 * M)  # IRIS_COLL_STAGING=0: no staging areas; 46 + 32 + 8 MiB
        for w in range(2, 17):  # a whole number of 2 MiB pages, and room for what the setup takes on one node or on several
            h = C.heap_bytes(w)
            self.assertEqual(h % (2 * M), 0)
            self.assertGreaterEqual(h, int(6.5 * M * w) + (1 << 17) + 32 * M + 128 * M)
            self.assertGreaterEqual(h, int(6.5 * M * (w // 2)) + (1 << 17) + 64 * M + 128 * M)

    def test_default_heap_and_environment_untouched(self):
        for world, max_size in ((2, 8 * self.MIB), (4, 8 * self.MIB), (8, 1 << 20), (2, 1000)):
            self.world = world
            self.seen.clear()
            self.slot(max_size=max_size)  # max_size does not change the heap: the staging areas stay the library's
            self.assertEqual(self.seen, [(it.CustomAllreduce.heap_bytes(world), None)])
            self.assertNotIn("IRIS_COLL_STAGING", os.environ)
        self.assertEqual(self.seen, [(208 * self.MIB, None)])  # 2 ranks: 39 + 32 + 2 x 64 + 8 MiB

    def test_failed_bring_up(self):
        self.refuse = True
        with self.assertRaisesRegex(it.IrisError, "no room"):
            self.slot()
        self.assertEqual(self.seen, [(208 * self.MIB, None)])
        self.assertNotIn("IRIS_COLL_STAGING", os.environ)
        os.environ["IRIS_COLL_STAGING"] = "4M"
        with self.assertRaisesRegex(it.IrisError, "no room"):
            self.slot()
        self.assertEqual(os.environ["IRIS_COLL_STAGING"], "4M")  # the user's, untouched

    def test_user_settings_win(self):
        import torch.distributed as dist

        M = self.MIB
        self.slot(heap_size=300 * M)  # an explicit heap
        os.environ["IRIS_HEAP_SIZE"] = "512M"
        self.slot()  # 0: the library reads IRIS_HEAP_SIZE
        del os.environ["IRIS_HEAP_SIZE"]
        os.environ["IRIS_COLL_STAGING"] = "16MiB"
        self.slot()  # the heap counts the user's staging areas
        self.assertEqual(os.environ["IRIS_COLL_STAGING"], "16MiB")
        os.environ["IRIS_COLL_STAGING"] = "0"
        self.slot(max_size=1 << 20)
        os.environ["IRIS_COLL_STAGING"] = "2GB?"  # malformed: the library's setup says so; the heap counts 64 MiB
        self.slot()
        # 2 ranks: 39 MiB of slots (multi-node bound) + 32 + two staging areas + 8, to 2 MiB
        self.assertEqual(self.seen, [(300 * M, None), (0, None), (112 * M, "16MiB"), (80 * M, "0"), (208 * M, "2GB?")])

        class Ctx:  # a context given: no bring-up, the environment as it was
            device, closed = 0, False

            def team_for(self, group):
                return self

        os.environ["IRIS_COLL_STAGING"] = "4M"
        with mock.patch.object(dist, "get_rank", lambda g=None: 0):
            ca = it.CustomAllreduce("group", 0, ctx=Ctx())
        self.assertFalse(ca.disabled)
        self.assertEqual((len(self.seen), os.environ["IRIS_COLL_STAGING"]), (5, "4M"))


class TestEnvironmentSwitches(unittest.TestCase):
    """The torch module's 0 / 1 variables: a malformed one is a ValueError naming it (at
    import: IRIS_GPU_DISPATCH; when the ops are registered: IRIS_GPU_COMPILE_ORDERED),
    never read as the default."""

    def run_import(self, name, value):
        import subprocess

        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
        env[name] = value
        return subprocess.run([sys.executable, "-c", "from iris_gpu.torch.context import _torch_mod; _torch_mod()"], env=env, capture_output=True, text=True, timeout=300)

    def test_malformed_switch_refused(self):
        for name in ("IRIS_GPU_DISPATCH", "IRIS_GPU_COMPILE_ORDERED"):
            for bad in ("off", ""):
                r = self.run_import(name, bad)
                self.assertNotEqual(r.returncode, 0, (name, bad))
                self.assertIn("ValueError", r.stderr)
                self.assertIn(name, r.stderr)
            self.assertEqual(self.run_import(name, "1").returncode, 0, name)

    def test_compile_ordered_fixed_then_registers(self):
        """A malformed IRIS_GPU_COMPILE_ORDERED defines no op: the next call, the variable
        fixed, registers them (torch refuses an op defined twice)."""
        import subprocess

        code = ("import os\nfrom iris_gpu.torch.context import _torch_mod\ntry:\n    _torch_mod()\nexcept ValueError:\n    pass\n"
                "os.environ['IRIS_GPU_COMPILE_ORDERED'] = '1'\n_torch_mod()\nimport torch\nprint(hasattr(torch.ops.iris, 'all_reduce'))")
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."), IRIS_GPU_COMPILE_ORDERED="off")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("True", r.stdout)


if __name__ == "__main__":
    if torch is None:
        print("SKIP: python torch (no GPU): torch is not installed")
        sys.exit(0)
    import _report

    _report.main(sys.modules[__name__], "python torch (no GPU):")
