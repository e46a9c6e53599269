"""iris_gpu.triton without a GPU: the helpers and the example kernel compile for sm_90 and the
PTX has the ordering the C device API has (a CTA barrier, then a release at system scope;
acquire loads at system scope; remote atomics at system scope); under Triton's interpreter
the pointer translation moves stores, atomics and signals to the peer's heap. Skips
without triton/torch.

    PYTHONPATH=python python3 python/tests/test_triton_codegen.py
"""
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))

try:
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # the example kernel's module imports torch
        raise ImportError("No module named 'torch'")
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    import iris_gpu.triton as ig
except ImportError as e:
    triton = None
    WHY = str(e)

if triton is not None:

    @triton.jit
    def rma_kernel(x, y, counters, bases, me, peer, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        v = ig.load(x + offs, me, peer, bases)
        ig.store(y + offs, v + 1, me, peer, bases)
        ig.atomic_add(counters + offs, 1, me, peer, bases, sem=ig.ACQ_REL)
        ig.atomic_add(counters + offs, 1, me, peer, bases)

    @triton.jit
    def wait_kernel(flags, epoch, out):
        tl.store(out, ig.wait(flags, epoch, 1 << 20))


def ptx_of(fn, sig, constexprs):
    src = ASTSource(fn=fn, signature=sig, constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]


@unittest.skipIf(triton is None, "SKIP: %s" % ("" if triton else WHY))
class TestCodegen(unittest.TestCase):
    def test_ring_kernel_ordering(self):
        from triton_ring import ring_kernel

        sig = {"src": "*fp32", "inbox": "*fp32", "out": "*fp32", "flags": "*i32", "heap_bases": "*i64", "n": "i32", "me": "i32", "world": "i32",
               "epoch": "i32", "BLOCK": "constexpr"}
        ptx = ptx_of(ring_kernel, sig, {"BLOCK": 1024})
        release = [m.start() for m in re.finditer(r"atom\.global\.sys\.release\.exch", ptx)]
        self.assertTrue(release, "no release exchange at system scope (signal)")
        bars = [m.start() for m in re.finditer(r"bar\.sync", ptx)]
        self.assertTrue(any(b < release[0] for b in bars), "no CTA barrier before the release (signal)")
        self.assertRegex(ptx, r"(ld|atom)\.global\.sys\.acquire", "no acquire at system scope (wait)")

    def test_rma_helpers(self):
        sig = {"x": "*fp32", "y": "*fp32", "counters": "*i32", "bases": "*i64", "me": "i32", "peer": "i32", "BLOCK": "constexpr"}
        ptx = ptx_of(rma_kernel, sig, {"BLOCK": 128})
        self.assertRegex(ptx, r"atom\.global\.sys\.acq_rel\.add", "atomic_add(sem=acq_rel) is not acq_rel at system scope")
        self.assertRegex(ptx, r"atom\.global\.sys\.(relaxed\.)?add|red\.global\.sys\.(relaxed\.)?add", "relaxed atomic_add is not at system scope")

    def test_wait_wrap_safe_for_int64_epoch(self):
        """An epoch of 2**31 or more reaches the kernel as int64 (Triton types Python ints by
        size); the wait must still compare in int32 (flag - value, wrap-safe), not sign-extend
        the flag and compare in int64, which never holds once the int32 flag has wrapped."""
        for t in ("i32", "i64"):
            ptx = ptx_of(wait_kernel, {"flags": "*i32", "epoch": t, "out": "*i32"}, {})
            self.assertRegex(ptx, r"ld\.global\.sys\.acquire\.b32|atom\.global\.sys\.acquire", "epoch %s: no acquire at system scope" % t)
            self.assertNotRegex(ptx, r"setp\.\w+\.s64", "epoch %s: the wait compares in int64, not wrap-safe in int32" % t)


INTERPRETED = r"""
import sys
import torch, triton, triton.language as tl
import iris_gpu.triton as ig

@triton.jit
def put_and_signal(x, flags, bases, me, peer, epoch, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    ig.store(x + offs, tl.load(x + offs) * 10, me, peer, bases)
    ig.atomic_add(x + offs, 1, me, peer, bases, sem=ig.ACQ_REL)
    ig.signal(flags, epoch, me, peer, bases)
    ig.wait(flags, 0)  # this rank's flag is already >= 0: returns at once

heaps = [torch.zeros(32, dtype=torch.int32) for _ in range(2)]  # two ranks' heaps, one layout
for r in range(2):
    heaps[r][:8] = torch.arange(8, dtype=torch.int32) + 100 * r
bases = torch.tensor([h.data_ptr() for h in heaps], dtype=torch.int64)
put_and_signal[(1,)](heaps[0][:8], heaps[0][16:17], bases, 0, 1, 7, BLOCK=8)
print(heaps[1][:8].tolist(), heaps[1][16].item(), heaps[0][:8].tolist(), heaps[0][16].item())
"""


@unittest.skipIf(triton is None, "SKIP: %s" % ("" if triton else WHY))
class TestInterpreter(unittest.TestCase):
    def test_translate_store_atomic_signal(self):
        """Under TRITON_INTERPRET=1 (CPU), two heaps in one process stand for two ranks:
        rank 0's stores, atomics and signal land in rank 1's heap at the same offsets."""
        import subprocess

        env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..")] + sys.path))
        r = subprocess.run([sys.executable, "-c", INTERPRETED], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(r.stdout.strip().splitlines()[-1], "[1, 11, 21, 31, 41, 51, 61, 71] 7 [0, 1, 2, 3, 4, 5, 6, 7] 0")


if __name__ == "__main__":
    if triton is None:
        print("SKIP: python triton codegen: %s" % WHY)
        sys.exit(0)
    import _report

    _report.main(sys.modules[__name__], "python triton codegen (sm_90, no GPU):")
