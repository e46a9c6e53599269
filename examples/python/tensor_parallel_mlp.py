"""A tensor-parallel MLP block with sequence parallelism, on iris's two GEMM plans:
column-parallel up projection (all-gather + GEMM), then row-parallel down projection
(GEMM + reduce-scatter). Each rank keeps S/W rows of the activations, 1/W of each weight.

    make lib
    PYTHONPATH=python torchrun --nproc-per-node 2 examples/python/tensor_parallel_mlp.py
    PYTHONPATH=python python3 examples/python/tensor_parallel_mlp.py 4   # spawns 4 ranks itself

Ranks may share a GPU (device = LOCAL_RANK % GPUs). The result is checked against the same
block computed whole on every rank in float64.
"""
import os
import sys

import torch
import torch.distributed as dist

import iris_gpu.torch as it


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    dist.init_process_group("gloo" if torch.cuda.device_count() < world else "nccl")  # iris only uses its Store
    ctx = it.Context()
    S, H, F = 512 * world, 1024, 1024 * world  # tokens, hidden, FFN width (F/W, K/W multiples of 8)
    bf = torch.bfloat16

    # the whole problem, the same on every rank (a shared seed); each rank keeps its shards
    g = torch.Generator().manual_seed(0)
    x = torch.randn(S, H, generator=g) / 4
    w_up = torch.randn(F, H, generator=g) / H ** 0.5    # nn.Linear(H, F).weight
    w_down = torch.randn(H, F, generator=g) / F ** 0.5  # nn.Linear(F, H).weight
    rows, cols = slice(rank * S // world, (rank + 1) * S // world), slice(rank * F // world, (rank + 1) * F // world)
    x_r = x[rows].to(bf).cuda()                        # S/W x H: this rank's tokens
    up_r = w_up[cols].contiguous().to(bf).cuda()       # F/W x H: output features of the up projection
    down_r = w_down[:, cols].contiguous().to(bf).cuda()  # H x F/W: input features of the down projection

    # plans: collective, made once (outside any CUDA graph capture)
    up = ctx.ag_gemm_plan(S, F // world, H, bf, bf, layout="rows", b_transposed=True)
    down = ctx.gemm_reduce_plan("reduce_scatter", S, H, F, bf, bf, b_transposed=True)

    def block(x_r):
        h_r = it.ag_gemm(x_r, up_r, up)                    # S x F/W = all_gather(x) @ up_r^T
        h_r = torch.nn.functional.gelu(h_r)
        return it.gemm_reduce_scatter(h_r, down_r, down)   # S/W x H = rows of sum_r h_r @ down_r^T

    y_r = block(x_r)
    torch.cuda.synchronize()

    ref = torch.nn.functional.gelu(x.to(bf).double() @ w_up.to(bf).double().t()) @ w_down.to(bf).double().t()
    err = (y_r.double().cpu() - ref[rows]).abs().max().item()
    scale = ref[rows].abs().max().item()
    assert err <= 0.02 * scale, (err, scale)
    if rank == 0:
        print("tensor-parallel MLP on %d ranks (%s / %s): max error %.3g of max %.3g: correct" % (world, up.path, down.path, err, scale))
    up.close()
    down.close()
    ctx.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else max(torch.cuda.device_count(), 2))
