"""iris_gpu.jax without a GPU: the FFI calls lower to typed custom calls with the right
attributes and result shapes, argument checks fire before tracing, and libiris_jax.so
loads and registers its handlers. Skips without jax (or without build/libiris_jax.so for
the registration test).

    PYTHONPATH=python python3 python/tests/test_jax_nogpu.py
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import jax
    import jax.numpy as jnp

    import iris_gpu.jax as ij
except ImportError as e:
    jax = None
    WHY = str(e)


class StandIn:
    """What the wrappers read from a Context."""

    world_size = 4
    handle = 0x7F0012345678


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

    def test_refusals(self):
        with self.assertRaisesRegex(TypeError, "complex64"):
            ij.all_reduce(jnp.ones(4, jnp.complex64), StandIn())
        with self.assertRaisesRegex(TypeError, "avg"):
            ij.all_reduce(jnp.ones(4, jnp.int32), StandIn(), "avg")
        with self.assertRaisesRegex(ValueError, "prod"):
            ij.all_reduce(jnp.ones(4), StandIn(), "prod")

    @unittest.skipUnless(os.path.exists(os.environ.get("IRIS_JAX_LIB") or os.path.join(ROOT, "build", "libiris_jax.so")), "SKIP: build/libiris_jax.so not built (make lib-jax)")
    def test_handlers_register(self):
        so = ij._register()
        self.assertTrue(hasattr(so, "IrisAllReduce") and hasattr(so, "IrisAllGather"))


if __name__ == "__main__":
    if jax is None:
        print("SKIP: python jax (no GPU): %s" % WHY)
        sys.exit(0)
    import _report

    _report.main(sys.modules[__name__], "python jax (no GPU):")
