"""GPU tests of iris_gpu.jax (the XLA FFI handlers), one process per rank.

    python3 python/tests/test_jax_gpu.py --world 2      # or 4; prints PASS/FAIL/SKIP lines

Each rank runs in its own process with CUDA_VISIBLE_DEVICES set to one GPU (rank % GPUs, so
ranks may share one), jax.distributed over a local coordinator. Checked under jit against a
numpy float64 reference (every rank builds every rank's input from a seed): all_reduce
(sum/min/max/avg) and all_gather for each dtype, a sharded matmul followed by the
all-gather, the handlers inside an XLA command buffer, and, where each process has its own
GPU, the same results as jax.lax.psum / all_gather over NCCL. Skips without jax or a GPU.
"""
import argparse
import os
import socket
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

DTYPES = ["float32", "float16", "bfloat16", "int32", "uint8", "float8_e4m3fn", "float8_e5m2"]
FLOAT = ("float32", "float16", "bfloat16")
CMD_BUFFER_FLAGS = "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"


def make_input(shape, dtype, rank, seed):
    import numpy as np

    rng = np.random.default_rng(seed * 1000 + rank)
    if dtype == "uint8":
        v = rng.integers(0, 60, shape)
    elif dtype.startswith("float8"):
        v = rng.integers(-2, 3, shape)
    elif dtype in FLOAT:
        v = rng.integers(-8, 9, shape) * 0.25
    else:
        v = rng.integers(-1000, 1001, shape)
    import jax.numpy as jnp

    return np.asarray(v, dtype=np.float64).astype(jnp.dtype(dtype))


def rank_main(rank, world, port, shared):
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.distributed.initialize(coordinator_address="127.0.0.1:%d" % port, num_processes=world, process_id=rank)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import iris_gpu.jax as ij

    def result(name, fn):
        try:
            r = fn()
            print(("SKIP: %s: %s" % (name, r)) if r else "PASS: " + name, flush=True)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            print("FAIL: %s: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0] if str(e) else ""), flush=True)

    ctx = ij.Context()
    seed = [0]

    def inputs(shape, dt):
        seed[0] += 1
        return [make_input(shape, dt, r, seed[0]) for r in range(world)]

    def check(got, ref64, dt, approx=False):
        want = ref64.astype(jnp.dtype(dt)).astype(np.float64)
        g = np.asarray(got).astype(np.float64)
        if g.shape != want.shape:
            raise AssertionError("shape %s, expected %s" % (g.shape, want.shape))
        ok = np.allclose(g, want, rtol=0.26 if dt.startswith("float8") else 1.6e-2, atol=1e-6) if approx else np.array_equal(g, want)
        if not ok:
            i = int(np.abs(g - want).argmax())
            raise AssertionError("at flat index %d: got %r, expected %r" % (i, g.flat[i], want.flat[i]))

    def all_reduce(dt, op, n):
        xs = inputs((n,), dt)
        s = np.stack([x.astype(np.float64) for x in xs])
        ref = {"sum": s.sum(0), "avg": s.sum(0) / world, "min": s.min(0), "max": s.max(0)}[op]
        y = jax.jit(lambda x: ij.all_reduce(x, ctx, op))(jnp.asarray(xs[rank]))
        check(y, ref, dt, approx=(op == "avg"))

    def all_gather(dt, n):
        xs = inputs((n, 3), dt)
        y = jax.jit(lambda x: ij.all_gather(x, ctx))(jnp.asarray(xs[rank]))
        check(y, np.concatenate([x.astype(np.float64) for x in xs]), dt)

    for dt in DTYPES:
        for n in (37, 70001):
            for op in ("sum", "min", "max") + (("avg",) if dt in FLOAT else ()):
                result("jax W=%d all_reduce %s %s n=%d (jit)" % (world, dt, op, n), lambda: all_reduce(dt, op, n))
            result("jax W=%d all_gather %s n=%d (jit)" % (world, dt, n), lambda: all_gather(dt, n))

    M, N, K = 128 * world, 256, 512
    w = make_input((K, N), "bfloat16", 0, 999)
    shards = [make_input((M // world, K), "bfloat16", r, 998) for r in range(world)]
    matmul_gather = jax.jit(lambda a, b: ij.all_gather(jnp.dot(a, b, preferred_element_type=jnp.float32), ctx))

    def sharded_matmul():
        y = matmul_gather(jnp.asarray(shards[rank]), jnp.asarray(w))
        check(y, np.concatenate([s.astype(np.float64) for s in shards]) @ w.astype(np.float64), "float32")

    result("jax W=%d sharded matmul then all_gather (jit)" % world, sharded_matmul)

    def command_buffer():
        if CMD_BUFFER_FLAGS not in os.environ.get("XLA_FLAGS", ""):
            return "XLA_FLAGS without the command-buffer flags"
        f = jax.jit(lambda x: ij.all_reduce(x * 2, ctx) + 1)
        xs = inputs((4096,), "float32")
        x = jnp.asarray(xs[rank])
        before = ij.captured_calls()
        for i in range(5):  # the first runs record the command buffer, the others replay it
            xs = inputs((4096,), "float32")  # fresh data on every run
            y = f(jnp.asarray(xs[rank]))
            check(y, sum(v.astype(np.float64) * 2 for v in xs) + 1, "float32")
        captured = ij.captured_calls() - before
        in_hlo = custom_call_in_command_buffer(f.lower(x).compile().as_text(), "iris_all_reduce")
        if captured == 0 and not in_hlo:
            return "results correct, but XLA ran the handler outside any command buffer (no call during stream capture, none in the compiled HLO)"
        print("# jax W=%d command buffer: %d handler call(s) during capture, in the HLO: %s" % (world, captured, in_hlo))
        return None

    result("jax W=%d all_reduce inside an XLA command buffer" % world, command_buffer)

    def against_lax():
        if shared:
            return "ranks share a GPU: no NCCL reference"
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

        try:
            from jax import shard_map
        except ImportError:
            from jax.experimental.shard_map import shard_map
        mesh = Mesh(np.array(jax.devices()), ("x",))
        xs = inputs((1024,), "float32")
        local = jnp.asarray(xs[rank])
        glob = jax.make_array_from_single_device_arrays((world * 1024,), NamedSharding(mesh, P("x")), [jax.device_put(local, jax.local_devices()[0])])
        psum = jax.jit(shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x")))(glob)
        gath = jax.jit(shard_map(lambda a: jax.lax.all_gather(a, "x", tiled=True), mesh=mesh, in_specs=P("x"), out_specs=P("x")))(glob)
        mine_psum = np.asarray(psum.addressable_shards[0].data)
        mine_gath = np.asarray(gath.addressable_shards[0].data)
        if not np.array_equal(np.asarray(jax.jit(lambda x: ij.all_reduce(x, ctx))(local)), mine_psum):
            raise AssertionError("all_reduce differs from jax.lax.psum")
        if not np.array_equal(np.asarray(jax.jit(lambda x: ij.all_gather(x, ctx))(local)), mine_gath):
            raise AssertionError("all_gather differs from jax.lax.all_gather")

    result("jax W=%d same as jax.lax.psum / all_gather (NCCL)" % world, against_lax)

    def bad_input():
        for fn, text in ((lambda: ij.all_reduce(jnp.ones(4, jnp.complex64), ctx), "complex64"),
                         (lambda: ij.all_reduce(jnp.ones(4, jnp.int32), ctx, "avg"), "avg")):
            try:
                fn()
            except (TypeError, ValueError) as e:
                if text not in str(e):
                    raise AssertionError("%r does not name %s" % (e, text))
            else:
                raise AssertionError("no error for " + text)

    result("jax W=%d bad input raises" % world, bad_input)
    ctx.close()
    result("jax W=%d calls after close raise" % world, lambda: after_close(ij, ctx, jnp))


def custom_call_in_command_buffer(hlo, target):
    """True when a computation whose name says command_buffer calls the custom call target."""
    comp, body = "", []
    for line in hlo.splitlines() + [""]:
        if line and not line[0].isspace() and line.rstrip().endswith("{"):
            comp, body = line, []
        elif line.startswith("}") or not line:
            if "command_buffer" in comp and any('custom_call_target="%s"' % target in b for b in body):
                return True
            comp, body = "", []
        else:
            body.append(line)
    return False


def after_close(ij, ctx, jnp):
    try:
        ij.all_reduce(jnp.ones(4), ctx)
    except RuntimeError as e:
        if "closed" in str(e):
            return None
        raise
    raise AssertionError("no error after close")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--rank", type=int, default=-1)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--shared", type=int, default=0)
    a = ap.parse_args()
    if a.rank >= 0:
        rank_main(a.rank, a.world, a.port, bool(a.shared))
        return 0
    import importlib.util

    if importlib.util.find_spec("jax") is None:
        print("SKIP: jax W=%d: jax is not installed" % a.world)
        return 0
    ngpu = 0
    try:
        ngpu = len(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip().splitlines())
    except OSError:
        pass
    if ngpu == 0:
        print("SKIP: jax W=%d: no GPU" % a.world)
        return 0
    lib_jax = os.environ.get("IRIS_JAX_LIB") or os.path.join(ROOT, "build", "libiris_jax.so")
    if not os.path.exists(lib_jax):
        print("SKIP: jax W=%d: %s not built (make lib-jax)" % (a.world, lib_jax))
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shared = int(ngpu < a.world)
    procs = []
    for r in range(a.world):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(r % ngpu), XLA_PYTHON_CLIENT_PREALLOCATE="false",
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + CMD_BUFFER_FLAGS).strip())
        cmd = [sys.executable, os.path.abspath(__file__), "--world", str(a.world), "--rank", str(r), "--port", str(port), "--shared", str(shared)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for r, p in enumerate(procs):
        try:
            o, e = p.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            o, e = p.communicate()
            e += "\n(timed out)"
        outs.append((p.returncode, o, e))
    merged, order = {}, []
    for r, (rc, o, e) in enumerate(outs):
        for line in o.splitlines():
            kind, _, rest = line.partition(": ")
            if kind not in ("PASS", "FAIL", "SKIP"):
                continue
            name = rest.split(": ")[0]
            if name not in merged:
                order.append(name)
                merged[name] = (kind, rest)
            elif kind == "FAIL" and merged[name][0] != "FAIL":
                merged[name] = (kind, "rank %d: %s" % (r, rest))
        if rc != 0:
            sys.stderr.write(e[-3000:])
            print("FAIL: jax W=%d: rank %d exited with %s" % (a.world, r, rc))
    for name in order:
        kind, rest = merged[name]
        print("%s: %s" % (kind, rest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
