"""All-reduce through iris_gpu.torch against torch.distributed (NCCL) and torch's symmetric
memory, eager and inside CUDA graphs, 1 KB to 256 MB (bf16).

    PYTHONPATH=python python3 python/bench/bench_torch.py 1      # world 1: binding overheads
    PYTHONPATH=python python3 python/bench/bench_torch.py 4      # or torchrun --nproc-per-node 4
    BENCH_CSV=build/bench_torch.csv BENCH_PNG=build/bench_torch.png  (defaults)

Rows (us per all-reduce; median of 5 timed runs of `iters` back-to-back calls, CUDA events):
  iris-ctypes   iris_all_reduce called directly through ctypes (heap tensors, out of place):
                the binding's floor, what the C call costs plus ctypes
  iris-op       it.all_reduce(x, out=y) (the torch custom op), the same heap tensors
  iris-op-any   it.all_reduce on an ordinary tensor, out of place (staged through the heap)
  iris-ctypes-graph  the ctypes call captured 20 times in one CUDA graph, per op (C level)
  iris-graph    it.all_reduce(x, out=y) captured 20 times in one CUDA graph, per op
At world 1 an all-reduce is a copy (out of place), so these rows measure what each binding
adds to the same GPU work: eager (iris-op - iris-ctypes) and in graphs (iris-graph -
iris-ctypes-graph).
  nccl, nccl-graph            torch.distributed.all_reduce (each rank on its own GPU)
  symm-one-shot, symm-two-shot torch.ops.symm_mem (own GPUs; sum only)
Ranks sharing a GPU make the script run but the figures are not performance (labelled).
"""
import ctypes
import os
import statistics
import sys

import torch
import torch.distributed as dist

import iris_gpu.torch as it

SIZES = [1 << k for k in range(10, 29, 2)]  # 1 KB .. 256 MB


def timed(fn, iters):
    """Median us per call of fn over 5 runs of iters calls (after warm-up)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        runs.append(a.elapsed_time(b) * 1000.0 / iters)
    return statistics.median(runs)


def graphed(fn, reps=20):
    """A function replaying a graph of reps calls of fn, and reps."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    return g.replay, reps


def init_rank():
    """This process's rank, world size, whether ranks share a GPU, and its device; sets the
    device and joins torch.distributed (gloo when ranks share a GPU, else NCCL)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ngpu = torch.cuda.device_count()
    shared = ngpu < world
    dev = int(os.environ.get("LOCAL_RANK", rank)) % ngpu
    torch.cuda.set_device(dev)
    dist.init_process_group("gloo" if shared else "nccl", device_id=None if shared else torch.device("cuda", dev))
    return rank, world, shared, dev


def main():
    rank, world, shared, dev = init_rank()
    ctx = it.Context()  # 1 GiB heap unless IRIS_HEAP_SIZE: the 256 MB buffer plus the collective state
    rows = []
    for nbytes in SIZES:
        n = nbytes // 2
        iters = 200 if nbytes <= (1 << 20) else 20
        xh = ctx.empty((n,), torch.bfloat16).fill_(1)
        yh = ctx.empty((n,), torch.bfloat16)
        xd = torch.ones(n, dtype=torch.bfloat16, device="cuda")
        h = ctx._handle()
        L = ctx._lib.lib

        def raw():
            st = L.iris_all_reduce_ex(h, ctypes.c_void_p(xh.data_ptr()), ctypes.c_void_p(yh.data_ptr()), n, 2, 0,
                                      ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), None)
            assert st == 0, ctx._lib.detail()

        res = {"iris-ctypes": timed(raw, iters), "iris-op": timed(lambda: it.all_reduce(xh, ctx, out=yh), iters),
               "iris-op-any": timed(lambda: it.all_reduce(xd, ctx), iters)}
        rep, k = graphed(raw)
        res["iris-ctypes-graph"] = timed(rep, max(iters // k, 2)) / k
        rep, k = graphed(lambda: it.all_reduce(xh, ctx, out=yh))
        res["iris-graph"] = timed(rep, max(iters // k, 2)) / k
        if not shared:
            res["nccl"] = timed(lambda: dist.all_reduce(xd), iters)
            rep, k = graphed(lambda: dist.all_reduce(xd))
            res["nccl-graph"] = timed(rep, max(iters // k, 2)) / k
            try:
                import torch.distributed._symmetric_memory as symm_mem

                gname = dist.group.WORLD.group_name
                if hasattr(symm_mem, "enable_symm_mem_for_group"):
                    symm_mem.enable_symm_mem_for_group(gname)
                buf = symm_mem.empty(n, dtype=torch.bfloat16, device="cuda")
                symm_mem.rendezvous(buf, gname)

                def one_shot():
                    buf.copy_(xd)  # the input must live in the symmetric buffer, as vLLM copies it
                    return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", gname)

                def two_shot():
                    buf.copy_(xd)
                    torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", gname)

                res["symm-one-shot"] = timed(one_shot, iters)
                res["symm-two-shot"] = timed(two_shot, iters)
                del buf
            except Exception as e:  # noqa: BLE001
                if rank == 0 and nbytes == SIZES[0]:
                    print("symmetric memory baseline unavailable: %s" % (str(e).splitlines()[0] if str(e) else type(e).__name__))
        rows.append((nbytes, res))
        xh = yh = xd = rep = None  # free the heap block before the next size
    if rank == 0:
        report(rows, world, shared)
    ctx.close()
    dist.destroy_process_group()


def report(rows, world, shared):
    cols = sorted({c for _, r in rows for c in r}, key=lambda c: ["iris-ctypes", "iris-op", "iris-op-any", "iris-ctypes-graph", "iris-graph", "nccl", "nccl-graph", "symm-one-shot", "symm-two-shot"].index(c))
    label = "world %d%s" % (world, ", ranks SHARE one GPU: not performance figures" if shared else "")
    print("all-reduce bf16, us per op (%s, %s)" % (label, torch.cuda.get_device_name()))
    print("| bytes | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for nbytes, r in rows:
        print("| %d | " % nbytes + " | ".join("%.2f" % r[c] if c in r else "" for c in cols) + " |")
    csv = os.environ.get("BENCH_CSV", "build/bench_torch.csv")
    os.makedirs(os.path.dirname(csv) or ".", exist_ok=True)
    with open(csv, "w") as f:
        f.write("world,shared_gpu,bytes," + ",".join(cols) + "\n")
        for nbytes, r in rows:
            f.write("%d,%d,%d," % (world, int(shared), nbytes) + ",".join("%.3f" % r[c] if c in r else "" for c in cols) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 5))
        for c in cols:
            pts = [(nb, r[c]) for nb, r in rows if c in r]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=c)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes")
        ax.set_ylabel("us per all-reduce")
        ax.set_title("all-reduce bf16 through torch (%s)" % label)
        ax.legend()
        fig.savefig(os.environ.get("BENCH_PNG", "build/bench_torch.png"), dpi=120)
    except ImportError:
        print("matplotlib not installed: no PNG")


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].isdigit():
        sys.exit(__doc__)
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else max(torch.cuda.device_count(), 1))
