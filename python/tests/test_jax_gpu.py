"""GPU tests of iris_gpu.jax (the XLA FFI handlers), one process per rank.

    python3 python/tests/test_jax_gpu.py --world 2      # or 4; prints PASS/FAIL/SKIP lines
    python3 python/tests/test_jax_gpu.py --world 2 --suite heap     # one suite only

Each rank runs in its own process with CUDA_VISIBLE_DEVICES set to one GPU (rank % GPUs, so
ranks may share one), jax.distributed over a local coordinator. Checked under jit against a
numpy float64 reference (every rank builds every rank's input from a seed).
Suite "main": all_reduce (sum/min/max/avg) and all_gather for each dtype, a sharded matmul
followed by the all-gather, the handlers inside an XLA command buffer, and, where each
process has its own GPU, the same results as jax.lax.psum / all_gather over NCCL.
Suite "heap" (its own processes, so that a failure there leaves the main suite's results):
jax.Arrays on the symmetric heap (same offsets on every rank), all_reduce(donate=True)
with the heap array donated to jit (several sizes, from 4 MB up, fp32/bf16, a chain of
calls in place), all_gather(out=) into a donated heap array (poisoned first), the
non-donated fallback (XLA copies; the input stays intact), and, through the handlers'
counters (iris_gpu.jax.heap_calls), whether the zero-copy path ran. Skips without jax or
a GPU.
"""
import argparse
import os
import socket
import subprocess
import sys
import time
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


def _rank_setup(rank, world, port):
    """One rank's process: jax.distributed up, iris_gpu.jax imported; (jax, jnp, np, ij, result)
    where result(name, fn) prints PASS, SKIP (fn returned a reason) or FAIL (it raised)."""
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

    return jax, jnp, np, ij, result


def rank_main(rank, world, port, shared):
    jax, jnp, np, ij, result = _rank_setup(rank, world, port)
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

    def reduce_scatter(dt, op, n):
        xs = inputs((world * n, 2), dt)
        s = np.stack([x.astype(np.float64) for x in xs])
        ref = {"sum": s.sum(0), "avg": s.sum(0) / world, "min": s.min(0), "max": s.max(0)}[op][rank * n:(rank + 1) * n]
        y = jax.jit(lambda x: ij.reduce_scatter(x, ctx, op))(jnp.asarray(xs[rank]))
        check(y, ref, dt, approx=(op == "avg"))

    def all_to_all(dt, n):
        xs = inputs((world * n, 3), dt)
        y = jax.jit(lambda x: ij.all_to_all(x, ctx))(jnp.asarray(xs[rank]))
        check(y, np.concatenate([xs[r][rank * n:(rank + 1) * n].astype(np.float64) for r in range(world)]), dt)

    def broadcast(dt, n, root):
        xs = inputs((n,), dt)
        y = jax.jit(lambda x: ij.broadcast(x, ctx, root))(jnp.asarray(xs[rank]))
        check(y, xs[root].astype(np.float64), dt)

    for dt in DTYPES:
        for n in (37, 70001):
            for op in ("sum", "min", "max") + (("avg",) if dt in FLOAT else ()):
                result("jax W=%d all_reduce %s %s n=%d (jit)" % (world, dt, op, n), lambda: all_reduce(dt, op, n))
            result("jax W=%d all_gather %s n=%d (jit)" % (world, dt, n), lambda: all_gather(dt, n))
            for op in ("sum", "max") + (("avg",) if dt in FLOAT else ()):
                result("jax W=%d reduce_scatter %s %s n=%d rows a rank (jit)" % (world, dt, op, n), lambda: reduce_scatter(dt, op, n))
            result("jax W=%d all_to_all %s n=%d rows a rank (jit)" % (world, dt, n), lambda: all_to_all(dt, n))
            root = (n + len(dt)) % world
            result("jax W=%d broadcast %s n=%d from rank %d (jit)" % (world, dt, n, root), lambda: broadcast(dt, n, root))

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
        scat = jax.jit(shard_map(lambda a: jax.lax.psum_scatter(a, "x", scatter_dimension=0, tiled=True), mesh=mesh, in_specs=P("x"), out_specs=P("x")))(glob)
        a2a = jax.jit(shard_map(lambda a: jax.lax.all_to_all(a, "x", 0, 0, tiled=True), mesh=mesh, in_specs=P("x"), out_specs=P("x")))(glob)
        if not np.array_equal(np.asarray(jax.jit(lambda x: ij.reduce_scatter(x, ctx))(local)), np.asarray(scat.addressable_shards[0].data)):
            raise AssertionError("reduce_scatter differs from jax.lax.psum_scatter")
        if not np.array_equal(np.asarray(jax.jit(lambda x: ij.all_to_all(x, ctx))(local)), np.asarray(a2a.addressable_shards[0].data)):
            raise AssertionError("all_to_all differs from jax.lax.all_to_all")

    result("jax W=%d same as jax.lax.psum / all_gather / psum_scatter / all_to_all (NCCL)" % world, against_lax)

    def bad_input():
        for fn, text in ((lambda: ij.all_reduce(jnp.ones(4, jnp.complex64), ctx), "complex64"),
                         (lambda: ij.all_reduce(jnp.ones(4, jnp.int32), ctx, "avg"), "avg"),
                         (lambda: ij.broadcast(jnp.ones(4), ctx, world), "root")) + (
                        ((lambda: ij.reduce_scatter(jnp.ones(world * 2 + 1), ctx), "multiple of world_size"),
                         (lambda: ij.all_to_all(jnp.ones(world * 2 + 1), ctx), "multiple of world_size")) if world > 1 else ()):
            try:
                fn()
            except (TypeError, ValueError) as e:
                if text not in str(e):
                    raise AssertionError("%r does not name %s" % (e, text))
            else:
                raise AssertionError("no error for " + text)

    result("jax W=%d bad input raises" % world, bad_input)

    def handler_refusal():
        """The handler's own checks (past Python's, through jax.ffi.ffi_call) carry iris's
        status name, as docs/jax.md says. Refused alike on every rank, the calls meet in
        the library (each takes part as a refused call): no wait, nothing reported."""
        x = jnp.ones(8, jnp.float32)
        for shape, handle, text in (((9,), ctx.handle, "output has 9 elements, expected 8"), ((8,), 0, "the iris context is 0")):
            call = jax.ffi.ffi_call("iris_all_reduce", jax.ShapeDtypeStruct(shape, jnp.float32))
            try:
                np.asarray(call(x, iris_ctx=np.int64(handle), op=np.int32(0), iris_team=np.int64(0)))
            except Exception as e:  # noqa: BLE001 (XlaRuntimeError's module differs across jaxlib versions)
                if "IRIS_ERROR_INVALID_ARGUMENT" not in str(e) or text not in str(e):
                    raise AssertionError("%r lacks the status name or %r" % (e, text))
            else:
                raise AssertionError("no error for " + text)
        ctx.check()

    result("jax W=%d a handler's refusal carries the status name" % world, handler_refusal)

    def refused_in_step(target):
        """A handler's refusal on rank 0 only (its output one element too long; the other
        ranks' call is good), on the world and on a team of every rank: rank 0's call
        raises IRIS_ERROR_INVALID_ARGUMENT, and since the refusal took part in the library,
        every rank's check() reports IRIS_ERROR_MISMATCH within 15 s (no wait ran to its
        bound); the next call is exact everywhere."""
        n = 4096
        xs = inputs((n,), "float32")
        where = {"iris_ctx": np.int64(ctx.handle), "iris_team": np.int64(target.team_ptr)}
        call = jax.ffi.ffi_call("iris_all_reduce", jax.ShapeDtypeStruct((n + (1 if rank == 0 else 0),), jnp.float32))
        t0 = time.time()
        try:
            np.asarray(call(jnp.asarray(xs[rank]), op=np.int32(0), **where))
        except Exception as e:  # noqa: BLE001 (XlaRuntimeError's module differs across jaxlib versions)
            if rank != 0 or "IRIS_ERROR_INVALID_ARGUMENT" not in str(e):
                raise
        else:
            if rank == 0:
                raise AssertionError("rank 0's refusal passed")
        try:
            target.check()
        except ij.IrisError as e:
            if e.status_name != "IRIS_ERROR_MISMATCH":
                raise
        else:
            raise AssertionError("check() reported no mismatch")
        if time.time() - t0 > 15:
            raise AssertionError("%.1f s: a wait ran to its bound" % (time.time() - t0))
        xs = inputs((n,), "float32")
        check(jax.jit(lambda v: ij.all_reduce(v, target))(jnp.asarray(xs[rank])), sum(x.astype(np.float64) for x in xs), "float32")
        target.check()

    if world > 1:
        result("jax W=%d a handler's refusal on one rank takes part, every rank reports a mismatch (world)" % world, lambda: refused_in_step(ctx))
        every = ctx.team([list(range(world))])
        result("jax W=%d a handler's refusal on one rank takes part, every rank reports a mismatch (team of every rank)" % world, lambda: refused_in_step(every))
        every.close()

    def teams(groups):
        """Every collective over the teams of one split (ctx.team, collective over every
        process), at a latency size and one past the latency paths (XLA's buffers through
        the split's staging areas), exact against a float64 reference over the members;
        then the team closed and its calls refused."""
        t = ctx.team(groups)
        for n in (37, 300001):
            xs = inputs((n,), "float32")  # every process alike (the seed moves on everywhere)
            blocks = inputs(((t.world_size if t else 1) * n,), "float32")
            if t is None:
                continue
            mem, m, me = t.ranks, t.world_size, t.rank
            if ctx.rank not in mem or mem[me] != ctx.rank or len(mem) != m:
                raise AssertionError("team %s: rank %d, size %d" % (mem, me, m))
            x = jnp.asarray(xs[ctx.rank])
            check(jax.jit(lambda v: ij.all_reduce(v, t))(x), sum(xs[r].astype(np.float64) for r in mem), "float32")
            check(jax.jit(lambda v: ij.all_gather(v, t))(x), np.concatenate([xs[r].astype(np.float64) for r in mem]), "float32")
            root = n % m
            check(jax.jit(lambda v: ij.broadcast(v, t, root))(x), xs[mem[root]].astype(np.float64), "float32")
            b = jnp.asarray(blocks[ctx.rank])
            check(jax.jit(lambda v: ij.reduce_scatter(v, t))(b), sum(blocks[r].astype(np.float64) for r in mem)[me * n:(me + 1) * n], "float32")
            check(jax.jit(lambda v: ij.all_to_all(v, t))(b), np.concatenate([blocks[r][me * n:(me + 1) * n].astype(np.float64) for r in mem]), "float32")
        if t is not None:
            t.check()
            kept = jax.jit(lambda v: ij.all_gather(v, t))
            kept(jnp.ones(8, jnp.float32)).block_until_ready()  # compiled with the team's address
            t.close()
            try:
                ij.all_reduce(jnp.ones(4), t)
            except RuntimeError as e:
                if "closed" not in str(e):
                    raise
            else:
                raise AssertionError("a call on a closed team ran")
            try:  # the compiled function runs past the close: its handler refuses (no peer waits)
                np.asarray(kept(jnp.ones(8, jnp.float32)))
            except Exception as e:  # noqa: BLE001 (XlaRuntimeError's module differs across jaxlib versions)
                if "IRIS_ERROR_INVALID_ARGUMENT" not in str(e) or "closed" not in str(e):
                    raise AssertionError("a compiled call on a closed team: %r" % e)
            else:
                raise AssertionError("a compiled call on a closed team ran")
        # the world's calls go on
        xs = inputs((1000,), "float32")
        check(jax.jit(lambda v: ij.all_reduce(v, ctx))(jnp.asarray(xs[rank])), sum(x.astype(np.float64) for x in xs), "float32")

    splits = [[list(range(world))], [[r] for r in reversed(range(world))]]
    if world >= 4:
        splits += [[[0, 1], [2, 3]], [[0, 2], [1, 3]], [[3, 1]]]
    for groups in splits:
        result("jax W=%d teams %s: every collective at 37 and 300001 floats a rank, exact; closed, its calls refused" % (world, groups), lambda: teams(groups))
    ctx.close()
    result("jax W=%d calls after close raise" % world, lambda: after_close(ij, ctx, jnp))


def rank_heap(rank, world, port, shared):
    """The heap suite: heap arrays and the zero-copy path through donation."""
    jax, jnp, np, ij, result = _rank_setup(rank, world, port)
    ctx = ij.Context()
    seed = [5000]
    W = world

    def inputs(shape, dt):
        seed[0] += 1
        return [make_input(shape, dt, r, seed[0]) for r in range(world)]

    def skew(i):
        time.sleep(0.003 * ((rank + i) % world))  # ranks arrive in a different order each time

    def check(got, ref64, dt, approx=False):
        want = ref64.astype(jnp.dtype(dt)).astype(np.float64)
        g = np.asarray(got).astype(np.float64)
        if g.shape != want.shape:
            raise AssertionError("shape %s, expected %s" % (g.shape, want.shape))
        ok = np.allclose(g, want, rtol=1.6e-2, atol=1e-6) if approx else np.array_equal(g, want)
        if not ok:
            i = int(np.abs(g - want).argmax())
            raise AssertionError("at flat index %d: got %r, expected %r" % (i, g.flat[i], want.flat[i]))

    def same_everywhere(values, what):
        got = [bytes(v) for v in ctx._boot.exchange(repr(values).encode())]
        if any(g != got[0] for g in got):
            raise AssertionError("%s differ between ranks: %s" % (what, [g.decode() for g in got]))

    def delta(kind, before):
        now = ij.heap_calls()[kind]
        return {k: now[k] - before[k] for k in now}

    # donated heap arrays: [aliased by XLA (zero-copy), not aliased] per kind
    aliasing = {"all_reduce": [0, 0], "all_gather": [0, 0]}

    def note(kind, aliased, d):
        """Records whether XLA gave the handler the donated heap block; when it did, the
        handler must have seen both buffers on the heap (or not run: a command-buffer replay)."""
        aliasing[kind][0 if aliased else 1] += 1
        if aliased and (d["off_heap"] or d["input_on_heap"] or d["output_on_heap"]):
            raise AssertionError("the output aliased the heap block, yet the handler saw %s" % d)
        if not aliased and d["zero_copy"]:
            raise AssertionError("the output is XLA's buffer, yet the handler counted a zero-copy call: %s" % d)

    def heap_arrays():
        used0 = ctx.heap_used
        a = ij.heap_zeros((1000, 3), "float32", ctx)
        xs = inputs((5000,), "bfloat16")
        b = ij.to_heap(jnp.asarray(xs[rank]), ctx)
        e = ij.heap_empty((7,), "int32", ctx)
        for arr, shape, dt in ((a, (1000, 3), "float32"), (b, (5000,), "bfloat16"), (e, (7,), "int32")):
            if not ij.is_heap(arr, ctx) or arr.shape != shape or np.dtype(arr.dtype).name != dt:
                raise AssertionError("%s %s: not a heap array of that shape and type (%s %s)" % (shape, dt, arr.shape, arr.dtype))
        if np.asarray(a).any():
            raise AssertionError("heap_zeros is not zero")
        check(b, xs[rank].astype(np.float64), "bfloat16")
        same_everywhere([ctx.heap_offset(v) for v in (a, b, e)], "heap offsets")
        ctx.heap_verify()
        if ij.is_heap(jnp.ones(4), ctx):
            raise AssertionError("an XLA array reported on the heap")
        for v in (e, b, a):
            ij.heap_free(v, ctx)
        try:
            ij.heap_free(a, ctx)
        except ValueError:
            pass
        else:
            raise AssertionError("a second heap_free of one block did not raise")
        if ctx.heap_used != used0:
            raise AssertionError("heap_used %d after freeing, %d before" % (ctx.heap_used, used0))

    result("jax W=%d heap arrays (zeros, to_heap, empty; same offsets on every rank; freed)" % world, heap_arrays)

    donated_ar = {}

    def ar_fn(op):
        if op not in donated_ar:
            donated_ar[op] = jax.jit(lambda v: ij.all_reduce(v, ctx, op, donate=True), donate_argnums=0)
        return donated_ar[op]

    def all_reduce_donated(dt, op, n, i):
        xs = inputs((n,), dt)
        s64 = np.stack([x.astype(np.float64) for x in xs])
        ref = {"sum": s64.sum(0), "avg": s64.sum(0) / world, "max": s64.max(0)}[op]
        x = ij.to_heap(jnp.asarray(xs[rank]), ctx)
        p = x.unsafe_buffer_pointer()
        before = ij.heap_calls()["all_reduce"]
        skew(i)
        y = ar_fn(op)(x)
        check(y, ref, dt, approx=(op == "avg"))
        if not x.is_deleted():
            raise AssertionError("the donated argument is still alive")
        aliased = y.unsafe_buffer_pointer() == p
        note("all_reduce", aliased, delta("all_reduce", before))
        ij.heap_free(y if aliased else x, ctx)

    i = 0
    for dt in ("float32", "bfloat16"):
        for n in (37, 70001, 1 << 20, 3 << 20):  # up to 12 MB (fp32) / 6 MB (bf16)
            for op in ("sum",) + (("avg", "max") if n == 70001 else ()):
                i += 1
                result("jax W=%d all_reduce %s %s n=%d, heap array donated (jit)" % (world, dt, op, n), lambda: all_reduce_donated(dt, op, n, i))

    def chain(dt, n):
        xs = inputs((n,), dt)
        ref = np.stack([x.astype(np.float64) for x in xs]).sum(0)
        x = ij.to_heap(jnp.asarray(xs[rank]), ctx)
        p = x.unsafe_buffer_pointer()
        f = ar_fn("sum")
        for k in range(8):  # in place round after round: every flag and epoch reused
            skew(k)
            before = ij.heap_calls()["all_reduce"]
            x = f(x)
            check(x, ref * float(W) ** k, dt)
            aliased = x.unsafe_buffer_pointer() == p
            note("all_reduce", aliased, delta("all_reduce", before))
        ij.heap_free(x if x.unsafe_buffer_pointer() == p else p, ctx)

    for dt, n in (("float32", 1 << 20), ("bfloat16", 3 << 20)):
        result("jax W=%d all_reduce %s n=%d, 8 donated calls in a chain (x = f(x))" % (world, dt, n), lambda: chain(dt, n))

    def not_donated(dt, n):
        xs = inputs((n,), dt)
        ref = np.stack([x.astype(np.float64) for x in xs]).sum(0)
        x = ij.to_heap(jnp.asarray(xs[rank]), ctx)
        aliasing_only = jax.jit(lambda v: ij.all_reduce(v, ctx, "sum", donate=True))  # aliases declared, x not donated: XLA copies x first
        plain = jax.jit(lambda v: ij.all_reduce(v, ctx))
        for fn, want in ((aliasing_only, "off_heap"), (plain, "input_on_heap")):
            before = ij.heap_calls()["all_reduce"]
            y = fn(x)
            check(y, ref, dt)
            check(x, xs[rank].astype(np.float64), dt)  # untouched
            d = delta("all_reduce", before)
            if x.is_deleted() or ij.is_heap(y, ctx) or any(v for k, v in d.items() if k != want):
                raise AssertionError("%s: input deleted %s, output on the heap %s, calls %s (expected only %s)" % (want, x.is_deleted(), ij.is_heap(y, ctx), d, want))
        ij.heap_free(x, ctx)

    for dt, n in (("float32", 70001), ("bfloat16", 3 << 20)):
        result("jax W=%d all_reduce %s n=%d, heap array not donated (XLA copies it; input intact)" % (world, dt, n), lambda: not_donated(dt, n))

    gather_into = jax.jit(lambda a, o: ij.all_gather(a, ctx, out=o), donate_argnums=1)

    def all_gather_into(dt, rows, i):
        xs = inputs((rows, 3), dt)
        x = ij.to_heap(jnp.asarray(xs[rank]), ctx)
        out = ij.to_heap(jnp.full((world * rows, 3), -7.75, jnp.dtype(dt)), ctx)  # poison: never an input value
        p = out.unsafe_buffer_pointer()
        before = ij.heap_calls()["all_gather"]
        skew(i)
        y = gather_into(x, out)
        check(y, np.concatenate([v.astype(np.float64) for v in xs]), dt)
        aliased = y.unsafe_buffer_pointer() == p
        note("all_gather", aliased, delta("all_gather", before))
        ij.heap_free(y if aliased else out, ctx)
        ij.heap_free(x, ctx)

    i = 0
    for dt in ("float32", "bfloat16"):
        for rows in (37, 70001, 1 << 19):  # up to 6 MB (fp32) per rank
            i += 1
            result("jax W=%d all_gather %s rows=%d into a donated heap array (jit)" % (world, dt, rows), lambda: all_gather_into(dt, rows, i))

    def zero_copy_ran():
        print("# jax W=%d donated heap arrays aliased by XLA (zero-copy) / not: all_reduce %d / %d, all_gather %d / %d; handler calls %s"
              % (world, aliasing["all_reduce"][0], aliasing["all_reduce"][1], aliasing["all_gather"][0], aliasing["all_gather"][1], ij.heap_calls()), flush=True)
        for kind, (yes, no) in aliasing.items():
            if yes and no:
                raise AssertionError("%s: XLA aliased the donated heap array %d time(s) and copied it %d time(s)" % (kind, yes, no))
        if not aliasing["all_reduce"][0] and not aliasing["all_gather"][0]:
            return "results correct, but this jaxlib (%s) copied every donated heap array instead of aliasing it: the staged path ran, not the zero-copy one" % jax.__version__
        if not aliasing["all_reduce"][0] or not aliasing["all_gather"][0]:
            raise AssertionError("XLA aliased donated heap arrays for one call and not the other: %s" % aliasing)
        return None

    result("jax W=%d zero-copy path ran (donated heap arrays aliased, handler saw both buffers on the heap)" % world, zero_copy_ran)
    ctx.close()

    def after_close_heap():
        try:
            ij.heap_zeros((4,), "float32", ctx)
        except RuntimeError as e:
            if "closed" in str(e):
                return None
            raise
        raise AssertionError("no error after close")

    result("jax W=%d heap arrays after close raise" % world, after_close_heap)


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


def launch(suite, world, ngpu, shared):
    """Runs one suite's ranks, one process each; [(exit status, stdout, stderr)] by rank."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(world):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(r % ngpu), XLA_PYTHON_CLIENT_PREALLOCATE="false",
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + CMD_BUFFER_FLAGS).strip())
        cmd = [sys.executable, os.path.abspath(__file__), "--world", str(world), "--rank", str(r), "--port", str(port), "--shared", str(shared), "--suite", suite]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            o, e = p.communicate()
            e += "\n(timed out)"
        outs.append((p.returncode, o, e))
    return outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--rank", type=int, default=-1)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--shared", type=int, default=0)
    ap.add_argument("--suite", choices=("all", "main", "heap"), default="all")
    a = ap.parse_args()
    if a.rank >= 0:
        (rank_heap if a.suite == "heap" else rank_main)(a.rank, a.world, a.port, bool(a.shared))
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
    shared = int(ngpu < a.world)
    outs = []
    for suite in (("main", "heap") if a.suite == "all" else (a.suite,)):
        outs += [(suite,) + out for out in launch(suite, a.world, ngpu, shared)]
    merged, order = {}, []
    for r, (suite, rc, o, e) in enumerate(outs):
        r %= a.world
        seen = {}  # a name that repeats in one rank's output (two cases alike up to ": ") stays two lines
        for line in o.splitlines():
            if line.startswith("# ") and r == 0:  # rank 0's notes (what ran where), passed on
                print(line)
                continue
            kind, _, rest = line.partition(": ")
            if kind not in ("PASS", "FAIL", "SKIP"):
                continue
            name = rest.split(": ")[0]
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = "%s (#%d)" % (name, seen[name])
                rest = name + rest[len(rest.split(": ")[0]):]
            if name not in merged:
                order.append(name)
                merged[name] = (kind, rest)
            elif kind == "FAIL" and merged[name][0] != "FAIL":
                merged[name] = (kind, "rank %d: %s" % (r, rest))
        if rc != 0:
            sys.stderr.write(e[-3000:])
            print("FAIL: jax W=%d: rank %d of the %s suite exited with %s" % (a.world, r, suite, rc))
    for name in order:
        kind, rest = merged[name]
        print("%s: %s" % (kind, rest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
