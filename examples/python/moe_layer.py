"""An expert-parallel mixture-of-experts layer on iris's dispatch and combine: a router
picks each token's top-k experts, dispatch sends the tokens to the ranks holding those
experts, each rank runs its local experts (one matmul each, batched), combine brings the
outputs back weighted by the router. Decode shape, in a CUDA graph replayed with new
tokens and new routings; bf16 and fp8 (e4m3, per-128-channel scales) dispatch.

    make lib
    PYTHONPATH=python torchrun --nproc-per-node 2 examples/python/moe_layer.py
    PYTHONPATH=python python3 examples/python/moe_layer.py 4   # spawns 4 ranks itself

Ranks may share a GPU (device = LOCAL_RANK % GPUs). Every rank checks its tokens against
the whole layer computed in float64 on the CPU.
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
    T, H, E, K = 64, 1024, 8 * world, 4  # tokens per rank (at most), hidden, experts, top-k
    L = E // world                        # experts per rank: expert e lives on rank e // L
    bf, dev = torch.bfloat16, torch.device("cuda", torch.cuda.current_device())

    # the whole layer's weights, the same on every rank (a shared seed); each rank keeps its L experts
    g = torch.Generator().manual_seed(0)
    router = torch.randn(H, E, generator=g) / H ** 0.5
    experts = (torch.randn(E, H, H, generator=g) / H ** 0.5).to(bf)
    router_d, mine = router.to(dev), experts[rank * L:(rank + 1) * L].to(dev)

    for dtype in (torch.bfloat16, torch.float8_e4m3fn):
        moe = ctx.moe_plan(T, H, K, E, dispatch_dtype=dtype)  # collective, outside capture
        x = torch.empty(T, H, dtype=bf, device=dev)             # the graph's input: refilled per replay

        def layer():
            w, idx = torch.softmax(x.float() @ router_d, dim=-1).topk(K, dim=-1)
            rx, scales, count, _ = it.moe_dispatch(x, idx, w, moe)
            if scales is not None:  # fp8: dequantise per 128 channels
                rx = (rx.float() * scales.repeat_interleave(128, dim=-1)).to(bf)
            y = torch.bmm(rx, mine)  # every local expert on all its slots (rows past count are not read)
            return it.moe_combine(y, moe)

        graph = torch.cuda.CUDAGraph()
        x.copy_(torch.randn(T, H, device=dev, dtype=bf))
        layer()  # warm-up outside capture (cuBLAS workspaces)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            out = layer()
        worst = 0.0
        for step in range(5):
            xs = [torch.randn(T, H, generator=torch.Generator().manual_seed(100 * step + r)).to(bf) for r in range(world)]
            x.copy_(xs[rank])
            graph.replay()
            torch.cuda.synchronize()
            moe.check()
            # float64 reference of this rank's tokens (the routing as the GPU computed it)
            xd = xs[rank].double()
            w, idx = (t.cpu() for t in torch.softmax(xs[rank].float().to(dev) @ router_d, dim=-1).topk(K, dim=-1))
            ref = torch.zeros(T, H, dtype=torch.float64)
            for e in range(E):
                sel = idx == e                 # T x K: where tokens chose expert e
                rows = sel.any(dim=1)
                if rows.any():
                    ref[rows] += (w.double() * sel).sum(dim=1)[rows, None] * (xd[rows] @ experts[e].double())
            err = ((out.double().cpu() - ref).abs().max() / ref.abs().max()).item()
            worst = max(worst, err)
        tol = 0.08 if dtype == torch.float8_e4m3fn else 0.02  # fp8: the tokens carry e4m3's 2^-4 relative rounding
        assert worst <= tol, (str(dtype), worst)
        if rank == 0:
            print("MoE layer on %d ranks, %d experts, top-%d, %s dispatch, 5 graph replays: max error %.3g of the largest output: correct"
                  % (world, E, K, str(dtype).replace("torch.", ""), worst))
        moe.close()
    ctx.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else max(torch.cuda.device_count(), 2))
