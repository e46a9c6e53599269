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
    from iris_gpu import _types

    class StandIn(it.Context):
        """A Context that needs no library: _run records the C call; at world 1 it also
        performs it (every collective of one rank copies send to recv)."""

        def __init__(self, world=1, cid=-100):
            self.closed, self.id, self.world_size, self.rank, self.device = False, cid, world, 0, 0
            self.check_shapes, self.calls = False, []
            it._CONTEXTS[cid] = self

        def _run(self, kind, send, recv, count, dtype, extra=None):
            self.calls.append((kind, count, dtype, extra))
            if self.world_size == 1 and send != recv:
                ctypes.memmove(recv, send, count * _types.ITEMSIZE[[k for k, v in _types.DTYPES.items() if v == dtype][0]])

        def _barrier_device(self):
            self.calls.append(("barrier",))

        def close(self):
            self.closed = True
            it._CONTEXTS.pop(self.id, None)

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


@unittest.skipIf(torch is None, "SKIP: torch is not installed")
class TestOps(unittest.TestCase):
    def setUp(self):
        self.patch = mock.patch.object(_types, "check_tensor", cpu_check)
        self.patch.start()
        self.c1 = StandIn(1, -101)
        self.c2 = StandIn(2, -102)

    def tearDown(self):
        self.patch.stop()
        self.c1.close()
        self.c2.close()

    def test_ops_registered(self):
        for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
            for suffix in ("", "_inplace", "_out"):
                self.assertTrue(hasattr(torch.ops.iris, kind + suffix), kind + suffix)
        self.assertIn("Tensor(a!) x", str(torch.ops.iris.all_reduce_inplace.default._schema))
        self.assertIn("Tensor? bias", str(torch.ops.iris.ag_gemm.default._schema))

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
        want = f(x)
        eager_calls = [c[0] for c in ctx.calls]
        for backend in ("aot_eager", "inductor"):
            torch._dynamo.reset()
            try:
                cf = torch.compile(f, fullgraph=True, backend=backend)
                cf(x)  # compiles
                ctx.calls.clear()
                got = cf(x)
            except Exception as e:  # noqa: BLE001
                if backend == "inductor" and "compiler" in str(e).lower():
                    print("SKIP: python torch: inductor needs a C++ compiler: %s" % str(e).splitlines()[0])
                    continue
                raise
            for a, b in zip(got, want):
                self.assertTrue(torch.equal(a, b), backend)
            # every collective and the barrier ran, in program order
            self.assertEqual([c[0] for c in ctx.calls], eager_calls, backend)

    def test_opcheck(self):
        x = torch.randn(8)
        for op, args in ((torch.ops.iris.all_reduce.default, (x, self.c1.id, "sum")),
                         (torch.ops.iris.all_gather.default, (x, self.c1.id)),
                         (torch.ops.iris.all_reduce_inplace.default, (x.clone(), self.c1.id, "sum")),
                         (torch.ops.iris.all_reduce_out.default, (x, torch.empty(8), self.c1.id, "sum"))):
            torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


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
            with ca.capture():
                pass
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

    def test_collective_cases_world1(self):
        import contextlib
        import importlib.util
        import io

        import torch.distributed as dist

        if importlib.util.find_spec("numpy") is None:
            self.skipTest("SKIP: numpy is not installed (all_gather_object needs it)")
        sys.path.insert(0, HERE)
        import test_torch_gpu as tg

        class Ctx(StandIn):
            def empty(self, shape, dtype=None):
                return torch.empty(shape, dtype=dtype or torch.float32)

        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        out = io.StringIO()
        try:
            with mock.patch.object(_types, "check_tensor", cpu_check), mock.patch.object(torch.cuda, "synchronize", lambda *a: None):
                R = tg.Runner.__new__(tg.Runner)
                R.rank, R.world, R.ctx, R.it, R.shared, R.no_ref, R.seed = 0, 1, Ctx(1, -103), it, True, set(), 0
                R.dev = torch.device("cpu")
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                    tg.collective_cases(R, sizes=(37,))
                R.ctx.close()
        finally:
            dist.destroy_process_group()
        lines = out.getvalue().splitlines()
        self.assertGreater(len(lines), 250)
        self.assertEqual([l for l in lines if not l.startswith("PASS: ")], [])


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


if __name__ == "__main__":
    if torch is None:
        print("SKIP: python torch (no GPU): torch is not installed")
        sys.exit(0)
    import _report

    _report.main(sys.modules[__name__], "python torch (no GPU):")
