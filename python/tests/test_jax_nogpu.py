"""iris_gpu.jax without a GPU: the FFI calls lower to typed custom calls with the right
attributes, result shapes and aliases (donate=, out=), argument checks fire before
tracing, the DLPack producer behind heap arrays imports zero-copy into jax (on the CPU,
over host memory) and its deleter runs when jax drops the memory, and libiris_jax.so
loads and registers its handlers. Skips without jax (or without build/libiris_jax.so for
the registration test).

    PYTHONPATH=python python3 python/tests/test_jax_nogpu.py
"""
import ctypes
import gc
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import jax
    import jax.numpy as jnp

    import numpy as np

    import iris_gpu.jax as ij
    from iris_gpu import _dlpack
except ImportError as e:
    jax = None
    WHY = str(e)


class StandIn:
    """What the wrappers read from a Context."""

    world_size = 4
    handle = 0x7F0012345678
    team_ptr = 0  # the context's world


class StandInTeam:
    """What the wrappers read from a Team: the context's handle, the team's size and the
    address of its iris_team_t."""

    world_size = 2
    handle = 0x7F0012345678
    team_ptr = 0x7F00ABCDEF00


@unittest.skipIf(jax is None, "SKIP: jax is not installed")
class TestLowering(unittest.TestCase):
    def custom_calls(self, f, x):
        return [line for line in jax.jit(f).lower(x).as_text().splitlines() if "custom_call" in line]

    def test_all_reduce(self):
        (line,) = self.custom_calls(lambda x: ij.all_reduce(x, StandIn(), "max"), jnp.ones((8, 3), jnp.bfloat16))
        self.assertIn("@iris_all_reduce", line)
        self.assertIn("iris_ctx = %d : i64" % StandIn.handle, line)
        self.assertIn("op = 2 : i32", line)
        self.assertIn("-> tensor<8x3xbf16>", line)

    def test_all_gather(self):
        (line,) = self.custom_calls(lambda x: ij.all_gather(x, StandIn()), jnp.ones((8, 3), jnp.float32))
        self.assertIn("@iris_all_gather", line)
        self.assertIn("-> tensor<32x3xf32>", line)

    def test_reduce_scatter(self):
        (line,) = self.custom_calls(lambda x: ij.reduce_scatter(x, StandIn(), "min"), jnp.ones((8, 3), jnp.float16))
        self.assertIn("@iris_reduce_scatter", line)
        self.assertIn("op = 1 : i32", line)
        self.assertIn("-> tensor<2x3xf16>", line)  # 8 rows over 4 ranks

    def test_all_to_all(self):
        (line,) = self.custom_calls(lambda x: ij.all_to_all(x, StandIn()), jnp.ones((12, 5), jnp.int32))
        self.assertIn("@iris_all_to_all", line)
        self.assertIn("-> tensor<12x5xi32>", line)

    def test_broadcast(self):
        (line,) = self.custom_calls(lambda x: ij.broadcast(x, StandIn(), 3), jnp.ones((7,), jnp.uint8))
        self.assertIn("@iris_broadcast", line)
        self.assertIn("root = 3 : i32", line)
        self.assertIn("-> tensor<7xui8>", line)

    def test_world_calls_carry_no_team(self):
        (line,) = self.custom_calls(lambda x: ij.all_reduce(x, StandIn()), jnp.ones((8,), jnp.float32))
        self.assertIn("iris_team = 0 : i64", line)

    def test_team_calls(self):
        """A Team stands for the context: its size shapes the results, its iris_team_t's
        address travels as iris_team."""
        x = jnp.ones((8, 3), jnp.float32)
        for f, target, shape in ((lambda v: ij.all_reduce(v, StandInTeam()), "iris_all_reduce", "8x3"),
                                 (lambda v: ij.all_gather(v, StandInTeam()), "iris_all_gather", "16x3"),
                                 (lambda v: ij.reduce_scatter(v, StandInTeam()), "iris_reduce_scatter", "4x3"),
                                 (lambda v: ij.all_to_all(v, StandInTeam()), "iris_all_to_all", "8x3"),
                                 (lambda v: ij.broadcast(v, StandInTeam(), 1), "iris_broadcast", "8x3")):
            with self.subTest(target=target):
                (line,) = self.custom_calls(f, x)
                self.assertIn("@%s(" % target, line)
                self.assertIn("iris_team = %d : i64" % StandInTeam.team_ptr, line)
                self.assertIn("iris_ctx = %d : i64" % StandInTeam.handle, line)
                self.assertIn("-> tensor<%sxf32>" % shape, line)
        with self.assertRaisesRegex(ValueError, "root"):
            ij.broadcast(x, StandInTeam(), 2)  # a team rank: 0 or 1

    def test_team_groups_refused(self):
        """Malformed groups raise ValueError before any library call (on every process alike)."""
        c = object.__new__(ij.Context)
        c.world_size, c.rank = 4, 0
        for groups, text in (([[0, 1], [1, 2]], "disjoint"), ([[0, 4]], "not a rank"), ([[0], []], "empty"), ([[-1, 0]], "not a rank")):
            with self.subTest(groups=groups):
                with self.assertRaisesRegex(ValueError, text):
                    c.team(groups)
        with self.assertRaisesRegex(ValueError, "negative"):
            c.team([[0, 1]], staging_bytes=-1)

    def test_all_reduce_donate(self):
        (line,) = self.custom_calls(lambda x: ij.all_reduce(x, StandIn(), donate=True), jnp.ones((1000,), jnp.float32))
        self.assertIn("@iris_all_reduce", line)
        self.assertIn("output_operand_alias", line)
        self.assertIn("operand_index = 0", line)
        (plain,) = self.custom_calls(lambda x: ij.all_reduce(x, StandIn()), jnp.ones((1000,), jnp.float32))
        self.assertNotIn("output_operand_alias", plain)

    def test_all_reduce_donate_jit_aliases_parameter(self):
        text = jax.jit(lambda x: ij.all_reduce(x, StandIn(), donate=True), donate_argnums=0).lower(jnp.ones((64,), jnp.bfloat16)).as_text()
        self.assertIn("tf.aliasing_output = 0", text)  # the jit output may take the donated parameter's buffer

    def test_all_gather_out(self):
        f = lambda x, o: ij.all_gather(x, StandIn(), out=o)  # noqa: E731
        lines = [line for line in jax.jit(f).lower(jnp.ones((8, 3), jnp.bfloat16), jnp.ones((32, 3), jnp.bfloat16)).as_text().splitlines() if "custom_call" in line]
        (line,) = lines
        self.assertIn("@iris_all_gather_into", line)
        self.assertIn("operand_index = 1", line)
        self.assertIn("-> tensor<32x3xbf16>", line)
        with self.assertRaisesRegex(ValueError, "shape"):
            ij.all_gather(jnp.ones((8, 3)), StandIn(), out=jnp.ones((24, 3)))
        with self.assertRaisesRegex(TypeError, "float16"):
            ij.all_gather(jnp.ones((8, 3)), StandIn(), out=jnp.ones((32, 3), jnp.float16))

    def test_refusals(self):
        with self.assertRaisesRegex(TypeError, "complex64"):
            ij.all_reduce(jnp.ones(4, jnp.complex64), StandIn())
        with self.assertRaisesRegex(TypeError, "avg"):
            ij.all_reduce(jnp.ones(4, jnp.int32), StandIn(), "avg")
        with self.assertRaisesRegex(ValueError, "prod"):
            ij.all_reduce(jnp.ones(4), StandIn(), "prod")
        with self.assertRaisesRegex(TypeError, "donate"):
            ij.all_reduce(jnp.ones(4), StandIn(), donate="yes")
        with self.assertRaisesRegex(ValueError, "multiple of world_size 4"):
            ij.reduce_scatter(jnp.ones((6, 2)), StandIn())
        with self.assertRaisesRegex(ValueError, "0-d"):
            ij.reduce_scatter(jnp.ones(()), StandIn())
        with self.assertRaisesRegex(TypeError, "avg"):
            ij.reduce_scatter(jnp.ones(8, jnp.int32), StandIn(), "avg")
        with self.assertRaisesRegex(ValueError, "multiple of world_size 4"):
            ij.all_to_all(jnp.ones((6,)), StandIn())
        with self.assertRaisesRegex(ValueError, "root"):
            ij.broadcast(jnp.ones(4), StandIn(), 4)
        with self.assertRaisesRegex(TypeError, "complex64"):
            ij.broadcast(jnp.ones(4, jnp.complex64), StandIn())

    @unittest.skipUnless(os.path.exists(os.environ.get("IRIS_JAX_LIB") or os.path.join(ROOT, "build", "libiris_jax.so")), "SKIP: build/libiris_jax.so not built (make lib-jax)")
    def test_handlers_register(self):
        so = ij._register()
        for sym, _ in ij._HANDLERS:
            self.assertTrue(hasattr(so, sym), sym)
        counts = ij.heap_calls()  # the counters are there (and no call has run)
        for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
            self.assertEqual(counts[kind], {"off_heap": 0, "input_on_heap": 0, "output_on_heap": 0, "zero_copy": 0}, kind)


def aligned(n, dtype, seed):
    """A host array of n elements at a 64-byte aligned address (XLA's CPU client views only
    aligned memory), filled with fresh values."""
    dt = jnp.dtype(dtype)
    raw = np.zeros(n * dt.itemsize + 128, np.uint8)
    off = -raw.ctypes.data % 64
    a = raw[off:off + n * dt.itemsize].view(dt)
    a[:] = np.random.default_rng(seed).integers(-50, 50, n).astype(dt)
    return a


@unittest.skipIf(jax is None, "SKIP: jax is not installed")
class TestDLPackProducer(unittest.TestCase):
    """The producer heap arrays are made with, over host memory (kDLCPU) on jax's CPU client:
    the same capsule as on the GPU but for the device type."""

    def view(self, a, shape, released):
        p = _dlpack.Producer(a.ctypes.data, shape, np.dtype(a.dtype).name, _dlpack.KDL_CPU, 0, owner=a, on_release=lambda: released.append(1))
        return jax.dlpack.from_dlpack(p)

    def test_zero_copy_every_type(self):
        for seed, dt in enumerate(["float32", "float16", "bfloat16", "int32", "uint8", "float8_e4m3fn", "float8_e5m2"]):
            with self.subTest(dtype=dt):
                a = aligned(24, dt, seed)
                released = []
                x = self.view(a, (4, 6), released)
                self.assertEqual(x.unsafe_buffer_pointer(), a.ctypes.data)  # a view, not a copy
                self.assertEqual((np.dtype(x.dtype).name, x.shape), (dt, (4, 6)))
                self.assertTrue(np.array_equal(np.asarray(x).astype(np.float64), a.reshape(4, 6).astype(np.float64)))
                self.assertEqual(released, [])
                del x
                gc.collect()
                self.assertEqual(released, [1])  # the deleter ran once jax dropped the memory

    def test_view_sees_the_memory(self):
        a = aligned(1000, "float32", 7)
        x = self.view(a, (1000,), [])
        a[3] = 1234.5  # the same bytes: what the library writes through the heap shows in the array
        self.assertEqual(float(x[3]), 1234.5)

    def test_deleter_runs_when_the_import_fails(self):
        # a capsule jax refuses (no consumer took it): its deleter still runs once, so what
        # it keeps (the struct, owner) is dropped and on_release called
        a = aligned(8, "float32", 3)
        released, kept = [], len(_dlpack._dl_keep)
        p = _dlpack.Producer(a.ctypes.data, (2**62 + 1,), "float32", _dlpack.KDL_CPU, 0, owner=a, on_release=lambda: released.append(1))
        with self.assertRaises(Exception):
            jax.dlpack.from_dlpack(p)
        gc.collect()
        self.assertEqual(released, [1])
        self.assertEqual(len(_dlpack._dl_keep), kept)
        _dlpack.capsule(a.ctypes.data, (8,), "float32", _dlpack.KDL_CPU, 0, on_release=lambda: released.append(2))  # never consumed
        gc.collect()
        self.assertEqual(released, [1, 2])
        self.assertEqual(len(_dlpack._dl_keep), kept)

    def test_refusals(self):
        with self.assertRaisesRegex(TypeError, "complex64"):
            _dlpack.capsule(0, (4,), "complex64", _dlpack.KDL_CPU, 0)
        with self.assertRaises(BufferError):
            _dlpack.Producer(0, (4,), "float32", _dlpack.KDL_CPU, 0).__dlpack__(copy=True)
        with self.assertRaisesRegex(TypeError, "complex64"):
            ij.Context._alloc(object.__new__(ij.Context), (4,), jnp.complex64, False, "heap_empty")


class FakeHeap:
    """What Context's heap arrays call in libiris.so and libiris_jax.so, over host memory:
    iris_malloc's first fit (a freed block's address is the next allocation's), iris_free,
    and an iris_calloc whose memset can be made to fail (the C contract: the block stays
    allocated and *ptr set). Records every free."""

    ALIGN = 256

    def __init__(self, nbytes=1 << 20):
        self.raw = np.zeros(nbytes + self.ALIGN, np.uint8)
        self.base = self.raw.ctypes.data + (-self.raw.ctypes.data % self.ALIGN)
        self.size, self.used, self.freed, self.calloc_fails = nbytes, {}, [], False
        self.lib = self  # Library.lib

    def _first_fit(self, n):
        n = -(-n // self.ALIGN) * self.ALIGN
        off = 0
        for o, sz in sorted(self.used.items()):
            if o - off >= n:
                break
            off = o + sz
        self.used[off] = n
        return self.base + off

    def iris_malloc(self, h, n, pref):
        pref._obj.value = self._first_fit(n)
        return 0

    def iris_calloc(self, h, n, pref):
        self.iris_malloc(h, n, pref)
        return 7 if self.calloc_fails else 0  # IRIS_ERROR_GPU, the block allocated

    def iris_free(self, h, p):
        self.freed.append(p.value)
        del self.used[p.value - self.base]
        return 0

    def iris_heap_size(self, h):
        return self.size

    def iris_heap_used(self, h):
        return sum(self.used.values())

    def detail(self):
        return "fake"

    def check(self, st, call):
        if st:
            raise ij.IrisError(st, "fake", call)

    @staticmethod
    def iris_jax_device_sync(dev):
        return 0


@unittest.skipIf(jax is None, "SKIP: jax is not installed")
class TestHeapBookkeeping(unittest.TestCase):
    """Context's heap arrays over a fake heap in host memory (jax's CPU client): which block
    heap_free gives back, and what an allocation that failed leaves behind."""

    def setUp(self):
        self.heap = FakeHeap()
        ctx = object.__new__(ij.Context)
        ctx._h, ctx._blocks, ctx._made, ctx.rank, ctx.device = ctypes.c_void_p(1), {}, {}, 0, 0
        ctx._lib, ctx._so = self.heap, self.heap
        self.ctx = ctx
        self.kdl = _dlpack.KDL_CUDA
        _dlpack.KDL_CUDA = _dlpack.KDL_CPU  # heap arrays over host memory

    def tearDown(self):
        _dlpack.KDL_CUDA = self.kdl

    def test_second_free_after_reuse_raises(self):
        x = self.ctx.heap_zeros((64,), "float32")
        self.ctx.heap_free(x)
        z = self.ctx.heap_zeros((64,), "float32")  # first fit: x's old address
        self.assertEqual(z.unsafe_buffer_pointer(), x.unsafe_buffer_pointer())
        with self.assertRaisesRegex(ValueError, "freed"):
            self.ctx.heap_free(x)  # x's block is gone: z's must not be freed in its place
        self.assertEqual(len(self.heap.freed), 1)
        self.ctx.heap_free(z)

    def test_second_free_of_donated_after_reuse_raises(self):
        x = self.ctx.heap_zeros((64,), "float32")
        x.delete()  # as donation leaves it: found by identity
        self.ctx.heap_free(x)
        z = self.ctx.heap_zeros((64,), "float32")
        with self.assertRaisesRegex(ValueError, "freed"):
            self.ctx.heap_free(x)
        self.assertEqual(len(self.heap.freed), 1)
        self.ctx.heap_free(z)

    def test_views_counted_once_per_capsule(self):
        x = self.ctx.heap_zeros((64,), "float32")
        (block,) = self.ctx._blocks.values()
        self.assertEqual(block.views, 1)
        del x
        gc.collect()
        self.assertEqual(block.views, 0)

    def test_failed_calloc_gives_the_block_back(self):
        self.heap.calloc_fails = True
        with self.assertRaises(ij.IrisError):
            self.ctx.heap_zeros((64,), "float32")
        self.assertEqual(self.heap.used, {})  # iris_calloc left it allocated: freed again


@unittest.skipIf(jax is None, "SKIP: jax is not installed")
class TestFaultCalls(unittest.TestCase):
    """Context.check / async_error / abort: each calls its library function with the
    context's handle and raises IrisError with the status and detail; closed, RuntimeError."""

    class Lib:
        def __init__(self, status):
            self.calls = []

            def fn(name):
                return lambda h: (self.calls.append((name, h)), status)[1]

            self.lib = type("L", (), {n: staticmethod(fn(n)) for n in ("iris_collectives_check", "iris_get_async_error", "iris_abort")})()

        def detail(self):
            return "rank 1 called all_gather where rank 0 called all_reduce (fake)"

        def check(self, status, call):
            ij._lib.Library.check(self, status, call)

    def context(self, status):
        ctx = object.__new__(ij.Context)
        ctx._h, ctx.rank, ctx._lib = 0x1234, 2, self.Lib(status)
        return ctx

    def test_each_calls_its_function(self):
        for method, fn in (("check", "iris_collectives_check"), ("async_error", "iris_get_async_error"), ("abort", "iris_abort")):
            with self.subTest(method=method):
                ctx = self.context(0)
                getattr(ctx, method)()
                self.assertEqual(ctx._lib.calls, [(fn, 0x1234)])
                ctx = self.context(ij._lib.STATUS_NAMES.index("IRIS_ERROR_MISMATCH"))
                with self.assertRaises(ij.IrisError) as cm:
                    getattr(ctx, method)()
                self.assertEqual(cm.exception.status_name, "IRIS_ERROR_MISMATCH")
                self.assertIn("(fake)", str(cm.exception))
                self.assertIn("rank 2", str(cm.exception))
                ctx._h = None
                with self.assertRaisesRegex(RuntimeError, "closed"):
                    getattr(ctx, method)()


if __name__ == "__main__":
    if jax is None:
        print("SKIP: python jax (no GPU): %s" % WHY)
        sys.exit(0)
    import _report

    _report.main(sys.modules[__name__], "python jax (no GPU):")
