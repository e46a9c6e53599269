#!/usr/bin/env python3
"""JAX psum through whatever libnccl.so.2 XLA got: the real one, or libiris_nccl.so
preloaded (tests/nccl/gpu_shim.sh runs it both ways).

    python3 tests/nccl/jax_check.py W

One process, W local GPUs: lax.psum in shard_map under jit (XLA's all-reduce) over fp32
and bf16, 1 KB to 64 MB per device, values checked exactly on every device; then "TIME:
<label> W psum jit <bytes> <us per call>" lines (wall time per call, 50 calls after
warm-up).
"""
import ctypes
import sys
import time


def main():
    import jax
    import jax.numpy as jnp
    import numpy as np

    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    devs = [d for d in jax.devices() if d.platform == "gpu"][:world]
    try:
        ctypes.CDLL(None).iris_nccl_stats
        label = "shim"
    except AttributeError:
        label = "nccl"
    if len(devs) < world:
        print("SKIP: jax psum at %d devices: %d GPU(s)" % (world, len(devs)))
        return 0
    print("INFO: jax %s, libiris_nccl.so %s" % (jax.__version__, "preloaded" if label == "shim" else "not loaded (real NCCL)"))
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    try:
        from jax import shard_map
    except ImportError:  # jax before 0.7
        from jax.experimental.shard_map import shard_map
    mesh = Mesh(np.array(devs), ("i",))
    sharding = NamedSharding(mesh, P("i"))
    psum = jax.jit(shard_map(lambda a: jax.lax.psum(a, "i"), mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    fails = []
    times = []
    for dtype in (jnp.float32, jnp.bfloat16):
        es = jnp.dtype(dtype).itemsize
        for size in [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]:
            n = size // es
            i = np.arange(n, dtype=np.int64)
            x = np.stack([((i * 7 + r * 3 + size % 97) % 5).astype(np.float32) for r in range(world)])
            want = x.sum(axis=0)
            xd = jax.device_put(jnp.asarray(x.reshape(-1), dtype=dtype), sharding)  # device r holds x[r]
            try:
                out = np.asarray(psum(xd).astype(jnp.float32)).reshape(world, n)  # device r's sum in row r
                if not all(np.array_equal(out[r], want) for r in range(world)):
                    fails.append("psum %s %d B: wrong values" % (jnp.dtype(dtype).name, size))
                if dtype == jnp.bfloat16:
                    for _ in range(5):
                        psum(xd).block_until_ready()
                    t0 = time.perf_counter()
                    for _ in range(50):
                        y = psum(xd)
                    y.block_until_ready()
                    times.append((size, (time.perf_counter() - t0) * 1e6 / 50))
            except Exception as e:
                fails.append("psum %s %d B: %s" % (jnp.dtype(dtype).name, size, e))
    for f in fails[:10]:
        print("FAIL: jax %s %d devices: %s" % (label, world, f))
    if not fails:
        print("PASS: jax %s %d devices: psum in shard_map under jit, fp32 and bf16, 1 KB-64 MB, every device exact" % (label, world))
    for size, us in times:
        print("TIME: %s %d psum jit %d %.2f" % (label, world, size, us))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
