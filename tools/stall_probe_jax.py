"""The JAX side of tools/stall_probe.py: iris's all-gather under jit at the sizes that were
slow (bench_jax.py's chain of 20), timed per run, with the handler's capture count and,
with a trace library, the per-CTA timeline of every kernel.

    IRIS_LIB=build_trace/libiris.so PYTHONPATH=python python3 tools/stall_probe_jax.py 4 OUTDIR
    PROBE_CMDBUF=0: without XLA's command buffers
"""
import ast
import ctypes
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
REPS = 20
CMD_BUFFER_FLAGS = "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"


def rank_main(rank, world, port, outdir):
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.distributed.initialize(coordinator_address="127.0.0.1:%d" % port, num_processes=world, process_id=rank)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import iris_gpu.jax as ij
    from iris_gpu import _lib

    REC = np.dtype([("t", "<u8", (4,)), ("kernel", "<u4"), ("call", "<u4"), ("block", "<u4"), ("nblocks", "<u4"), ("smid", "<u4"), ("rank", "<u4"),
                    ("pad", "<u4", (2,))])

    def trace(name):
        lib = _lib.load().lib
        if not hasattr(lib, "iris_trace_read"):
            return
        buf = np.zeros(1 << 18, dtype=REC)
        n = ctypes.c_size_t(0)
        lib.iris_trace_read(ctypes.c_void_p(ctx.handle), buf.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(1 << 18), ctypes.byref(n))
        if name:
            np.save(os.path.join(outdir, "%s.r%d.npy" % (name, rank)), buf[: n.value])

    ctx = ij.Context()

    def chain(op):
        def f(y):
            for _ in range(REPS):
                y = op(y)
            return y

        return jax.jit(f)

    iris_ag = chain(lambda y: ij.all_gather(y, ctx)[: y.shape[0]])
    rows = []
    for per_rank in (1 << 10, 64 << 10, 256 << 10, 1 << 20):
        n = per_rank // 2
        x = jnp.full((n,), 0.5 + rank, jnp.bfloat16)
        iris_ag(x).block_until_ready()
        iris_ag(x).block_until_ready()
        trace(None)
        c0 = ij.captured_calls()
        runs = []
        for _ in range(10):
            t = time.perf_counter()
            iris_ag(x).block_until_ready()
            runs.append((time.perf_counter() - t) * 1e6 / REPS)
        c1 = ij.captured_calls()
        trace("jax_ag_%d" % per_rank)
        rows.append((per_rank, statistics.median(runs), min(runs), max(runs), c1 - c0))
    print("ROWS %d %r" % (rank, rows), flush=True)
    ctx.close()


def main():
    world, outdir = int(sys.argv[1]), sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    flags = CMD_BUFFER_FLAGS if os.environ.get("PROBE_CMDBUF", "1") != "0" else ""
    for r in range(world):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(r), XLA_PYTHON_CLIENT_PREALLOCATE="false", NCCL_NVLS_ENABLE="0",
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + flags).strip())
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank", str(r), str(world), str(port), outdir], env=env, stdout=subprocess.PIPE, text=True))
    per_rank = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            sys.exit("stall_probe_jax: a rank failed (exit %s)" % p.returncode)
        per_rank.append(ast.literal_eval(next(line for line in out.splitlines() if line.startswith("ROWS ")).split(" ", 2)[2]))
    print("jax all-gather chain of %d under jit, command buffers %s: per rank: bytes, median / min / max us per op, handler calls under capture" %
          (REPS, "on" if flags else "off"))
    for i in range(len(per_rank[0])):
        print("  %8d B: " % per_rank[0][i][0] + "  ".join("r%d %.1f/%.1f/%.1f cap %d" % (r, rows[i][1], rows[i][2], rows[i][3], rows[i][4])
                                                     for r, rows in enumerate(per_rank)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) >= 3:
        main()
    else:
        sys.exit(__doc__)
