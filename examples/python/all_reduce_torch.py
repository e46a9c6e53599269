"""All-reduce of torch tensors with iris: eager, on the heap, inside a CUDA graph.

    make lib
    PYTHONPATH=python torchrun --nproc-per-node 2 examples/python/all_reduce_torch.py
    PYTHONPATH=python python3 examples/python/all_reduce_torch.py 4   # spawns 4 ranks itself

Ranks may share a GPU (device = LOCAL_RANK % GPUs). Each rank contributes rank + 1, so
every element of the result is W * (W + 1) / 2.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

import iris_gpu.torch as it


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    shared = torch.cuda.device_count() < world
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    dist.init_process_group("gloo" if shared else "nccl")  # iris only uses its Store
    ctx = it.Context()  # collective: maps every rank's heap
    want = world * (world + 1) / 2

    # 1. any CUDA tensor, out of place (the input is staged through the heap)
    x = torch.full((1 << 20,), rank + 1.0, dtype=torch.bfloat16, device="cuda")
    y = it.all_reduce(x, ctx)  # on torch.cuda.current_stream()
    assert bool((y == want).all()), y[:4]

    # 2. a heap tensor, in place (the fast path: no staging copy)
    h = ctx.empty((4096, 1024), torch.float32)
    h.fill_(rank + 1.0)
    it.all_reduce_(h, ctx)
    assert bool((h == want).all())

    # 3. inside a CUDA graph: capture once, replay with new data in the same input tensor
    static = torch.zeros(8192, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        it.all_reduce(static, ctx)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = it.all_reduce(static, ctx)
    for i in range(10):
        static.fill_(rank + 1.0 + i)
        g.replay()
        assert bool((out == want + world * i).all()), (i, out[:4])

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(1000):
        g.replay()
    torch.cuda.synchronize()
    us = (time.perf_counter() - t0) * 1e3
    if rank == 0:
        print("all_reduce of %d ranks: eager, heap and graph results correct; %.2f us per graph replay (32 KB fp32)%s"
              % (world, us, ", ranks share a GPU: not a performance figure" if shared else ""))
    del h, g, out  # drop heap tensors (and graphs using them) before closing
    ctx.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else max(torch.cuda.device_count(), 2))
