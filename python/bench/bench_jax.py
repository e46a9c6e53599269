"""iris through JAX (the XLA FFI handlers) against XLA's own all-reduce (psum),
all-gather, reduce-scatter (psum_scatter) and all-to-all under jit, bf16, 1 KB to 256 MB,
one process per rank.

    make lib lib-jax
    PYTHONPATH=python python3 python/bench/bench_jax.py 4       # ranks = processes
    BENCH_CSV=build/bench_jax.csv                                 (default)
    BENCH_JAX_TAIL=2000: also the tail: that many jitted single calls per size (iris and
        XLA, all-reduce and all-gather), each timed on the wall clock to its
        block_until_ready; p50 / p99 / max per rank, the max over ranks of each

Each jitted function chains REPS collectives (y = op(y)), so XLA runs them back to back
(inside one command buffer where XLA makes one); the figure is the median over
BENCH_JAX_RUNS (15) timed runs (after warm-up) of the wall time of one call, divided by
REPS, max over ranks. The reduce-scatter chains tile each result back to the input's
size (jnp.tile, on both sides alike), the all-to-all chains keep it.
The heap columns run the same chains on arrays on iris's symmetric heap, donated to jit:
iris-allreduce-heap chains all_reduce(y, donate=True) on a heap array (in place on the
heap block when XLA aliases it), iris-allgather-heap gathers REPS times from a heap array
into a donated heap output (all_gather(x, out=o)); each timed call takes the previous
call's output. "heap aliased" under the table says at how many sizes XLA handed the
handlers the heap blocks (the zero-copy path); where it did not, those columns ran the
staged path with one copy more.
With fewer GPUs than ranks the ranks share a GPU (XLA's NCCL then needs one NCCL_HOSTID
per rank, which this script sets): the figures only show that the script works, they
are labelled and are not performance. At world 1 XLA's collectives are no-ops and
iris's are copies: the rows show what a call through the FFI handler costs.
"""
import ast
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SIZES = [1 << k for k in range(10, 29, 2)]  # 1 KB .. 256 MB
REPS = 20
# timed runs per cell: the rows are bound by XLA's host work per run (one chain of 20 took
# 380-660 us to dispatch on 2 H200s, more than its GPU time), which moved a 5-run median
# by 30-50% between runs
RUNS = int(os.environ.get("BENCH_JAX_RUNS", "15"))
CMD_BUFFER_FLAGS = "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"


def timed(fn, x):
    fn(x).block_until_ready()  # compile, record
    fn(x).block_until_ready()
    runs = []
    for _ in range(RUNS):
        t = time.perf_counter()
        fn(x).block_until_ready()
        runs.append((time.perf_counter() - t) * 1e6 / REPS)
    return statistics.median(runs)


def timed_donated(fn, args, i):
    """timed for a function whose argument i is donated: each call takes the previous
    call's output there. Returns (us per op, the last output)."""
    args = list(args)
    for _ in range(2):
        args[i] = fn(*args)
    args[i].block_until_ready()
    runs = []
    for _ in range(RUNS):
        t = time.perf_counter()
        args[i] = fn(*args)
        args[i].block_until_ready()
        runs.append((time.perf_counter() - t) * 1e6 / REPS)
    return statistics.median(runs), args[i]


def rank_main(rank, world, port):
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.distributed.initialize(coordinator_address="127.0.0.1:%d" % port, num_processes=world, process_id=rank)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import iris_gpu.jax as ij
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    try:
        from jax import shard_map
    except ImportError:
        from jax.experimental.shard_map import shard_map
    ctx = ij.Context(heap_size=2 << 30)  # room for the heap columns' arrays at 256 MB
    mesh = Mesh(np.array(jax.devices()), ("x",))

    def chain(op):
        def f(y):
            for _ in range(REPS):
                y = op(y)
            return y

        return jax.jit(f)

    iris_ar = chain(lambda y: ij.all_reduce(y, ctx))
    iris_ag = chain(lambda y: ij.all_gather(y, ctx)[: y.shape[0]])  # keep the shape: gather, keep my block's size
    xla_ar = jax.jit(shard_map(lambda a: chain(lambda y: jax.lax.psum(y, "x"))(a), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    xla_ag = jax.jit(shard_map(lambda a: chain(lambda y: jax.lax.all_gather(y, "x", tiled=True)[: y.shape[0]])(a), mesh=mesh, in_specs=P("x"),
                               out_specs=P("x")))
    iris_rs = chain(lambda y: jnp.tile(ij.reduce_scatter(y, ctx), world))
    iris_a2a = chain(lambda y: ij.all_to_all(y, ctx))
    xla_rs = jax.jit(shard_map(lambda a: chain(lambda y: jnp.tile(jax.lax.psum_scatter(y, "x", scatter_dimension=0, tiled=True), world))(a), mesh=mesh,
                               in_specs=P("x"), out_specs=P("x")))
    xla_a2a = jax.jit(shard_map(lambda a: chain(lambda y: jax.lax.all_to_all(y, "x", 0, 0, tiled=True))(a), mesh=mesh, in_specs=P("x"), out_specs=P("x")))

    def ar_heap_chain(y):
        for _ in range(REPS):
            y = ij.all_reduce(y, ctx, donate=True)  # zeros: the sums stay finite
        return y

    def ag_heap_chain(a, o):
        for _ in range(REPS):
            o = ij.all_gather(a, ctx, out=o)
        return o

    iris_ar_heap = jax.jit(ar_heap_chain, donate_argnums=0)
    iris_ag_heap = jax.jit(ag_heap_chain, donate_argnums=1)
    rows = []
    for nbytes in SIZES:
        n = nbytes // 2
        local = jnp.full((n,), 0.5, jnp.bfloat16)
        glob = jax.make_array_from_single_device_arrays((world * n,), NamedSharding(mesh, P("x")), [jax.device_put(local, jax.local_devices()[0])])
        row = {"iris-allreduce": timed(iris_ar, local), "xla-psum": timed(xla_ar, glob)}
        ag_local = local[: max(n // world, 1)]
        ag_glob = jax.make_array_from_single_device_arrays((world * ag_local.shape[0],), NamedSharding(mesh, P("x")),
                                                           [jax.device_put(ag_local, jax.local_devices()[0])])
        row["iris-allgather"] = timed(iris_ag, ag_local)
        row["xla-allgather"] = timed(xla_ag, ag_glob)
        blocks = local[: max(n // world, 1) * world]  # a whole block per rank
        blocks_glob = jax.make_array_from_single_device_arrays((world * blocks.shape[0],), NamedSharding(mesh, P("x")),
                                                               [jax.device_put(blocks, jax.local_devices()[0])])
        row["iris-reducescatter"] = timed(iris_rs, blocks)
        row["xla-psumscatter"] = timed(xla_rs, blocks_glob)
        row["iris-alltoall"] = timed(iris_a2a, blocks)
        row["xla-alltoall"] = timed(xla_a2a, blocks_glob)
        h = ij.heap_zeros((n,), jnp.bfloat16, ctx)
        p = h.unsafe_buffer_pointer()
        row["iris-allreduce-heap"], h = timed_donated(iris_ar_heap, (h,), 0)
        aliased = h.unsafe_buffer_pointer() == p
        ij.heap_free(h if aliased else p, ctx)
        ag_x = ij.to_heap(ag_local, ctx)
        o = ij.heap_zeros((world * ag_local.shape[0],), jnp.bfloat16, ctx)
        p = o.unsafe_buffer_pointer()
        row["iris-allgather-heap"], o = timed_donated(iris_ag_heap, (ag_x, o), 1)
        aliased_ag = o.unsafe_buffer_pointer() == p
        ij.heap_free(o if aliased_ag else p, ctx)
        ij.heap_free(ag_x, ctx)
        row["heap-aliased"] = float(aliased and aliased_ag)
        rows.append((nbytes, row))
    print("ROWS %d %r" % (rank, rows), flush=True)
    tail_n = int(os.environ.get("BENCH_JAX_TAIL", "0"))
    if tail_n:
        one_ar = jax.jit(lambda y: ij.all_reduce(y, ctx))
        one_ag = jax.jit(lambda y: ij.all_gather(y, ctx))
        x_ar = jax.jit(shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
        x_ag = jax.jit(shard_map(lambda a: jax.lax.all_gather(a, "x", tiled=True), mesh=mesh, in_specs=P("x"), out_specs=P(None)))
        tail = []
        for nbytes in [1 << 14, 1 << 20, 1 << 22, 1 << 26]:
            n = nbytes // 2
            local = jnp.full((n,), 0.5, jnp.bfloat16)
            glob = jax.make_array_from_single_device_arrays((world * n,), NamedSharding(mesh, P("x")), [jax.device_put(local, jax.local_devices()[0])])
            for name, fn, arg in (("iris-allreduce", one_ar, local), ("xla-psum", x_ar, glob), ("iris-allgather", one_ag, local), ("xla-allgather", x_ag, glob)):
                try:
                    for _ in range(10):
                        fn(arg).block_until_ready()
                except Exception as e:  # noqa: BLE001 (a baseline this jax cannot build: named, not fatal)
                    print("bench_jax: rank %d: tail %s %d B: %s" % (rank, name, nbytes, str(e).splitlines()[0][:200]), file=sys.stderr, flush=True)
                    tail.append((nbytes, name, -1.0, -1.0, -1.0))
                    continue
                ts = []
                for _ in range(tail_n if nbytes < (1 << 26) else max(200, tail_n // 10)):
                    t = time.perf_counter()
                    fn(arg).block_until_ready()
                    ts.append((time.perf_counter() - t) * 1e6)
                ts.sort()
                tail.append((nbytes, name, ts[len(ts) // 2], ts[min(len(ts) - 1, int(0.99 * len(ts)))], ts[-1]))
        print("TAIL %d %r" % (rank, tail), flush=True)
    ctx.close()


def main():
    world = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 1
    if len(sys.argv) > 1 and not sys.argv[1].isdigit():
        sys.exit(__doc__)
    ngpu = len(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip().splitlines())
    shared = ngpu < world
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(world):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(r % ngpu), XLA_PYTHON_CLIENT_PREALLOCATE="false", NCCL_NVLS_ENABLE="0",
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + CMD_BUFFER_FLAGS).strip())
        if shared:
            env["NCCL_HOSTID"] = "iris-bench-rank-%d" % r
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank", str(r), str(world), str(port)], env=env, stdout=subprocess.PIPE, text=True))
    per_rank, tails = [], []
    for p in procs:
        out, _ = p.communicate(timeout=900)
        if p.returncode != 0:
            sys.exit("bench_jax: a rank failed (exit %s)" % p.returncode)
        per_rank.append(ast.literal_eval(next(line for line in out.splitlines() if line.startswith("ROWS ")).split(" ", 2)[2]))
        tails.append([ast.literal_eval(line.split(" ", 2)[2]) for line in out.splitlines() if line.startswith("TAIL ")])
    cols = ["iris-allreduce", "iris-allreduce-heap", "xla-psum", "iris-allgather", "iris-allgather-heap", "xla-allgather", "iris-reducescatter", "xla-psumscatter",
            "iris-alltoall", "xla-alltoall"]
    label = "world %d%s" % (world, ", ranks SHARE one GPU: not performance figures" if shared else "")
    print("bf16 collectives under jit, us per op, max over ranks (%s)" % label)
    print("| bytes | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    csv = os.environ.get("BENCH_CSV", os.path.join(ROOT, "build", "bench_jax.csv"))
    os.makedirs(os.path.dirname(csv), exist_ok=True)
    with open(csv, "w") as f:
        f.write("world,shared_gpu,bytes," + ",".join(cols) + ",heap_aliased\n")
        for i, (nbytes, _) in enumerate(per_rank[0]):
            worst = {c: max(rows[i][1][c] for rows in per_rank) for c in cols}
            print("| %d | " % nbytes + " | ".join("%.2f" % worst[c] for c in cols) + " |")
            f.write("%d,%d,%d," % (world, int(shared), nbytes) + ",".join("%.3f" % worst[c] for c in cols) + ",%d\n" % min(rows[i][1]["heap-aliased"] for rows in per_rank))
    aliased = sum(1 for i in range(len(per_rank[0])) if min(rows[i][1]["heap-aliased"] for rows in per_rank))
    print("heap aliased (XLA handed the handlers the donated heap blocks: zero-copy) at %d of %d sizes" % (aliased, len(per_rank[0])))
    if tails and tails[0]:
        print("\ntail under jit: one call per jitted function, wall clock to block_until_ready, us (max over ranks of each statistic)")
        print("| bytes | variant | p50 | p99 | max |")
        print("|---|---|---|---|---|")
        for i, (nbytes, name, _, _, _) in enumerate(tails[0][0]):
            st = [max(t[0][i][k] for t in tails) for k in (2, 3, 4)]
            print("| %d | %s | %.1f | %.1f | %.1f |" % (nbytes, name, *st))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
