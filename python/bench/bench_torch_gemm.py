"""The two tensor-parallel GEMM plans through iris_gpu.torch against torch: the all-gather +
GEMM against torch's fused all-gather-matmul and NCCL all-gather + matmul; the GEMM +
reduce-scatter against torch's fused matmul-reduce-scatter and matmul + NCCL
reduce-scatter; the local matmul alone as the floor. bf16, weights as nn.Linear stores
them (N x K), ms per op (CUDA events, warm-up, median of 5 runs of `iters` calls, max over
ranks).

    PYTHONPATH=python python3 python/bench/bench_torch_gemm.py 1     # world 1: the script works, overheads
    PYTHONPATH=python python3 python/bench/bench_torch_gemm.py 4     # or torchrun --nproc-per-node 4
    BENCH_CSV=build/bench_torch_gemm.csv (default), BENCH_M=4096,16384 (default),
    BENCH_FP8=1 adds e4m3 rows (per-tensor scales, bf16 out) against torch._scaled_mm (+ NCCL)
    and torch's fused scaled ops

Rows:
  ag: matmul-alone     torch.matmul on the gathered A (M x K) (the floor)
      nccl+matmul      dist.all_gather_into_tensor, then the matmul (own GPUs)
      symm-fused       torch.ops.symm_mem.fused_all_gather_matmul (own GPUs)
      iris-<path>      it.ag_gemm with a plan of that path (pipelined, fused)
  rs: matmul-alone     the local matmul M x K/W x N (the floor)
      matmul+nccl      the local matmul, then dist.reduce_scatter_tensor (own GPUs)
      symm-fused       torch.ops.symm_mem.fused_matmul_reduce_scatter (own GPUs)
      iris-<path>      it.gemm_reduce_scatter with a plan of that path (pipelined, unfused,
                       fused; bf16 partials, the default, except fused: fp32)
Ranks sharing a GPU make the script run but the figures are not performance (labelled),
and the NCCL / symmetric-memory rows need a GPU per rank.
"""
import os
import sys

import torch
import torch.distributed as dist

import iris_gpu.torch as it
from bench_torch import init_rank, timed as timed_us  # this directory: the shared timing loop

AG_SHAPES = [(3584, 8192), (1792, 4096), (6656, 16384)]   # (N, K) of the all-gather + GEMM
RS_SHAPES = [(8192, 8192), (8192, 28672), (5120, 13824)]  # (N, K total) of the GEMM + reduce-scatter


def timed(fn, iters=10):
    """Median ms per call over 5 runs of iters calls (bench_torch.timed), max over ranks."""
    t = torch.tensor([timed_us(fn, iters) / 1000.0], dtype=torch.float64, device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def symm_group():
    """The group name for torch's symmetric-memory ops, or None where they cannot run."""
    try:
        import torch.distributed._symmetric_memory as symm_mem

        gname = dist.group.WORLD.group_name
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(gname)
        return gname
    except Exception:  # noqa: BLE001
        return None


def try_row(res, name, fn):
    try:
        res[name] = timed(fn)
    except Exception as e:  # noqa: BLE001  (a baseline this torch or layout does not offer)
        res[name] = "n/a: " + (str(e).splitlines()[0][:60] if str(e) else type(e).__name__)


def main():
    rank, world, shared, dev = init_rank()
    ctx = it.Context(heap_size=3 << 30)  # the largest A shard and GEMM + reduce-scatter workspace (M x N fp32)
    gname = None if shared else symm_group()
    Ms = [int(m) for m in os.environ.get("BENCH_M", "4096,16384").split(",")]
    bf = torch.bfloat16
    rows = []
    for N, K in AG_SHAPES:
        for M in Ms:
            a_r = torch.randn(M // world, K, dtype=bf, device="cuda")
            a_full = torch.randn(M, K, dtype=bf, device="cuda")
            w = torch.randn(N, K, dtype=bf, device="cuda")  # nn.Linear(K, N).weight
            res = {"matmul-alone": timed(lambda: torch.matmul(a_full, w.t()))}
            if not shared:
                def nccl_matmul():
                    dist.all_gather_into_tensor(a_full, a_r)
                    return torch.matmul(a_full, w.t())

                try_row(res, "nccl+matmul", nccl_matmul)
                if gname:
                    try_row(res, "symm-fused", lambda: torch.ops.symm_mem.fused_all_gather_matmul(a_r, [w.t()], 0, gname))
            a_h = ctx.empty((M // world, K), bf).copy_(a_r)  # the shard on the heap: no staging copy (stage_a=False)
            for path in ("pipelined", "fused"):
                plan = ctx.ag_gemm_plan(M, N, K, bf, bf, layout="rows", b_transposed=True, path=path, stage_a=False)
                try_row(res, "iris-" + path, lambda: it.ag_gemm(a_h, w, plan))
                plan.close()
            a_h = None
            rows.append(("ag", M, N, K, res))
    for N, K in RS_SHAPES:
        for M in Ms:
            kl = K // world
            a_r = torch.randn(M, kl, dtype=bf, device="cuda")
            w_r = torch.randn(N, kl, dtype=bf, device="cuda")  # this rank's columns of nn.Linear(K, N).weight
            out = torch.empty(M // world, N, dtype=bf, device="cuda")
            res = {"matmul-alone": timed(lambda: torch.matmul(a_r, w_r.t()))}
            if not shared:
                try_row(res, "matmul+nccl", lambda: dist.reduce_scatter_tensor(out, torch.matmul(a_r, w_r.t())))
                if gname:
                    try_row(res, "symm-fused", lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a_r, w_r.t(), "sum", 0, gname))
            for path in ("pipelined", "unfused", "fused"):
                plan = ctx.gemm_reduce_plan("reduce_scatter", M, N, K, bf, bf, b_transposed=True, path=path)
                try_row(res, "iris-" + path, lambda: it.gemm_reduce_scatter(a_r, w_r, plan, out=out))
                plan.close()
            rows.append(("rs", M, N, K, res))
    if os.environ.get("BENCH_FP8") == "1" and not shared:
        rows += fp8_rows(ctx, gname, world, Ms)
    if rank == 0:
        report(rows, world, shared)
    ctx.close()
    dist.destroy_process_group()


def fp8_rows(ctx, gname, world, Ms):
    """e4m3 inputs with per-tensor scales, bf16 out: torch._scaled_mm alone, + NCCL, torch's
    fused scaled ops, iris's plans (fp8 GEMM + reduce-scatter; all-gather + GEMM)."""
    f8, bf = torch.float8_e4m3fn, torch.bfloat16
    sa = torch.full((), 0.5, dtype=torch.float32, device="cuda")
    sb = torch.full((), 0.25, dtype=torch.float32, device="cuda")
    rows = []
    for N, K in AG_SHAPES:
        for M in Ms:
            a_r = torch.randn(M // world, K, device="cuda").to(f8)
            a_full = torch.randn(M, K, device="cuda").to(f8)
            w = torch.randn(N, K, device="cuda").to(f8)
            res = {"matmul-alone": timed(lambda: torch._scaled_mm(a_full, w.t(), scale_a=sa, scale_b=sb, out_dtype=bf))}

            def nccl_matmul():
                dist.all_gather_into_tensor(a_full.view(torch.uint8), a_r.view(torch.uint8))
                return torch._scaled_mm(a_full, w.t(), scale_a=sa, scale_b=sb, out_dtype=bf)

            try_row(res, "nccl+matmul", nccl_matmul)
            if gname:
                try_row(res, "symm-fused", lambda: torch.ops.symm_mem.fused_all_gather_scaled_matmul(
                    a_r, [w.t()], sa, [sb], 0, gname, [None], [None], [bf], [False]))
            a_h = ctx.empty((M // world, K), f8).copy_(a_r)
            plan = ctx.ag_gemm_plan(M, N, K, f8, bf, layout="rows", b_transposed=True, stage_a=False)
            try_row(res, "iris-auto", lambda: it.ag_gemm(a_h, w, plan, a_scale=sa.view(1), b_scale=sb.view(1)))
            plan.close()
            a_h = None
            rows.append(("ag-fp8", M, N, K, res))
    for N, K in RS_SHAPES:
        for M in Ms:
            kl = K // world
            a_r = torch.randn(M, kl, device="cuda").to(f8)
            w_r = torch.randn(N, kl, device="cuda").to(f8)
            out = torch.empty(M // world, N, dtype=bf, device="cuda")
            res = {"matmul-alone": timed(lambda: torch._scaled_mm(a_r, w_r.t(), scale_a=sa, scale_b=sb, out_dtype=bf))}
            try_row(res, "matmul+nccl", lambda: dist.reduce_scatter_tensor(out, torch._scaled_mm(a_r, w_r.t(), scale_a=sa, scale_b=sb, out_dtype=bf)))
            if gname:
                try_row(res, "symm-fused", lambda: torch.ops.symm_mem.fused_scaled_matmul_reduce_scatter(
                    a_r, w_r.t(), sa, sb, "sum", 0, 0, gname, [M, N], out_dtype=bf))
            plan = ctx.gemm_reduce_plan("reduce_scatter", M, N, K, f8, bf, b_transposed=True)
            try_row(res, "iris-auto", lambda: it.gemm_reduce_scatter(a_r, w_r, plan, a_scale=sa.view(1), b_scale=sb.view(1), out=out))
            plan.close()
            rows.append(("rs-fp8", M, N, K, res))
    return rows


def report(rows, world, shared):
    label = "world %d%s, %s" % (world, ", ranks SHARE one GPU: not performance figures" if shared else "", torch.cuda.get_device_name())
    print("tensor-parallel GEMMs, bf16, ms per op (%s)" % label)
    print("| op | M | N | K | variant | ms | x matmul-alone |")
    print("|---|---|---|---|---|---|---|")
    csv = os.environ.get("BENCH_CSV", "build/bench_torch_gemm.csv")
    os.makedirs(os.path.dirname(csv) or ".", exist_ok=True)
    with open(csv, "w") as f:
        f.write("world,shared_gpu,op,M,N,K,variant,ms,x_alone\n")
        for op, M, N, K, res in rows:
            alone = res["matmul-alone"]
            for name, ms in res.items():
                if isinstance(ms, str):
                    print("| %s | %d | %d | %d | %s | %s | |" % (op, M, N, K, name, ms))
                    continue
                print("| %s | %d | %d | %d | %s | %.3f | %.2f |" % (op, M, N, K, name, ms, ms / alone))
                f.write("%d,%d,%s,%d,%d,%d,%s,%.4f,%.3f\n" % (world, int(shared), op, M, N, K, name, ms, ms / alone))


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].isdigit():
        sys.exit(__doc__)
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else max(torch.cuda.device_count(), 1))
