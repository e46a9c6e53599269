"""The tail of each call through torch: iris's ops against torch.distributed (NCCL), every
call timed by its own CUDA events, eager and in CUDA graphs, alone and beside a GEMM.

    PYTHONPATH=python python3 python/bench/bench_torch_tail.py 4      # or torchrun --nproc-per-node 4
    BENCH_CALLS=2000 (per size and mode), BENCH_SIZES=16K,256K,1M,4M,64M (bytes, bf16),
    BENCH_OPS=all_reduce,all_gather, BENCH_GEMM_N=8192, BENCH_CSV=build/bench_torch_tail.csv

Rows (us per call; each statistic is the max over ranks of that rank's statistic):
  iris-op       it.all_reduce(x, out=y) / it.all_gather(x, out=y) on heap tensors
  iris-op-any   the same ops on ordinary torch tensors (staged through the heap)
  nccl          dist.all_reduce / dist.all_gather_into_tensor (plain tensors)
  mode eager: the calls one after another (the host issues each); graph: a CUDA graph of
  one call, replayed. alone: nothing else on the GPU; company: torch.matmul of
  BENCH_GEMM_N^3 bf16 repeated on a second stream of the same process for the whole run
  (the row also gives the matmul's time beside the calls over its time alone).
"""
import os
import statistics
import sys

import torch
import torch.distributed as dist

import iris_gpu.torch as it
from bench_torch import graphed, init_rank


def parse_size(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * m[s[-1].upper()]) if s[-1].upper() in m else int(s)


def per_call(fn, n):
    """us of each of n calls of fn, each between its own pair of events."""
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1000.0 for a, b in ev]


def stats(ts):
    """(p50, p99, max) of this rank, then the max over ranks of each."""
    ts = sorted(ts)
    pick = lambda q: ts[min(len(ts) - 1, int(q * len(ts) + 0.999999) - 1)]
    t = torch.tensor([pick(0.5), pick(0.99), ts[-1]], dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return tuple(t.tolist())


class Gemm:
    """torch.matmul of n^3 bf16 on a side stream, started before and stopped after a run."""

    def __init__(self, n):
        self.a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
        self.b = torch.randn(n, n, device="cuda").to(torch.bfloat16)
        self.s = torch.cuda.Stream()
        self.time(5)  # cuBLAS's first calls (handle, workspace, heuristics) are not the GEMM's time
        self.alone = self.time(20)

    def time(self, k):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.s):
            a.record()
            for _ in range(k):
                torch.matmul(self.a, self.b)
            b.record()
        b.synchronize()
        return a.elapsed_time(b) / k

    def start(self, k):
        self.k = k
        self.ea, self.eb = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.s):
            self.ea.record()
            for _ in range(k):
                torch.matmul(self.a, self.b)
            self.eb.record()

    def stop(self):
        self.eb.synchronize()
        t = torch.tensor([self.ea.elapsed_time(self.eb) / self.k / self.alone], dtype=torch.float64, device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()


def main():
    rank, world, shared, dev = init_rank()
    ctx = it.Context(heap_size=2 << 30)
    n_calls = int(os.environ.get("BENCH_CALLS", "2000"))
    sizes = [parse_size(s) for s in os.environ.get("BENCH_SIZES", "16K,256K,1M,4M,64M").split(",")]
    ops = os.environ.get("BENCH_OPS", "all_reduce,all_gather").split(",")
    gemm = Gemm(int(os.environ.get("BENCH_GEMM_N", "8192")))
    rows = []
    for op in ops:
        for nbytes in sizes:
            n = nbytes // 2
            xh, xp = ctx.empty((n,), torch.bfloat16), torch.empty(n, dtype=torch.bfloat16, device="cuda")
            out_n = n * world if op == "all_gather" else n
            yh, yp = ctx.empty((out_n,), torch.bfloat16), torch.empty(out_n, dtype=torch.bfloat16, device="cuda")
            xh.normal_()
            xp.copy_(xh)
            if op == "all_reduce":
                variants = {"iris-op": lambda: it.all_reduce(xh, ctx, out=yh), "iris-op-any": lambda: it.all_reduce(xp, ctx, out=yp),
                            "nccl": lambda: dist.all_reduce(yp)}
            else:
                variants = {"iris-op": lambda: it.all_gather(xh, ctx, out=yh), "iris-op-any": lambda: it.all_gather(xp, ctx, out=yp),
                            "nccl": lambda: dist.all_gather_into_tensor(yp, xp)}
            calls = n_calls if nbytes < (64 << 20) else max(200, n_calls // 10)
            for mode in ("graph", "eager"):
                for name, fn in variants.items():
                    f = graphed(fn, 1)[0] if mode == "graph" else fn
                    for _ in range(5):
                        f()
                    torch.cuda.synchronize()
                    dist.barrier()
                    alone = stats(per_call(f, calls))
                    # company: enough matmuls to outlast the calls (from their p50 alone)
                    k = max(3, min(200, int(calls * alone[0] * 1e-3 / gemm.alone) + 2))
                    torch.cuda.synchronize()
                    dist.barrier()
                    gemm.start(k)
                    comp = stats(per_call(f, calls))
                    slow = gemm.stop()
                    rows.append((op, nbytes, name, mode, alone, comp, slow))
                    if rank == 0:
                        print("%-10s %10d %-12s %-5s alone p50 %8.2f p99 %8.2f max %9.2f | company p50 %8.2f p99 %8.2f max %9.2f, matmul x %.3f"
                              % (op, nbytes, name, mode, *alone, *comp, slow), flush=True)
    if rank == 0:
        csv = os.environ.get("BENCH_CSV", "build/bench_torch_tail.csv")
        os.makedirs(os.path.dirname(csv) or ".", exist_ok=True)
        with open(csv, "w") as f:
            f.write("op,bytes,variant,mode,p50,p99,max,company_p50,company_p99,company_max,matmul_x\n")
            for op, nbytes, name, mode, a, c, slow in rows:
                f.write("%s,%d,%s,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.4f\n" % (op, nbytes, name, mode, *a, *c, slow))
        print("world %d%s, %s; matmul %d^3 bf16 alone %.3f ms; %d calls per row (%d from 64 MB)" % (
            world, " (ranks SHARE a GPU: not performance)" if shared else "", torch.cuda.get_device_name(), gemm.a.shape[0], gemm.alone, n_calls,
            max(200, n_calls // 10)))
    ctx.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].isdigit():
        sys.exit(__doc__)
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else max(torch.cuda.device_count(), 2))
