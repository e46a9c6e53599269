"""iris's device helpers on memory torch allocated: adopt torch's symmetric memory
(symm_mem.empty + rendezvous) and run an iris Triton kernel on it. Every rank stores a
block into the next rank's buffer, signals that rank's flag (release, system scope),
waits for its own flag (acquire) and checks what its predecessor sent.

    make lib
    PYTHONPATH=python torchrun --nproc-per-node 2 examples/python/torch_symm_mem.py
    PYTHONPATH=python python3 examples/python/torch_symm_mem.py 1   # spawns 1 rank itself

torch's symmetric memory wants one GPU per rank (it refuses ranks sharing one). The
same adoption works for any peer pointers: iris_device_context_from_peers in C.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

import iris_gpu.torch as it
import iris_gpu.triton as ig


@triton.jit
def pass_on(buf, flags, bases, n, me, world, epoch, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    nxt = (me + 1) % world
    ig.store(buf + offs, offs.to(tl.float32) + 1000.0 * me + epoch, me, nxt, bases, mask=mask)
    ig.signal(flags + tl.program_id(0), epoch, me, nxt, bases)  # release, system scope
    ig.wait(flags + tl.program_id(0), epoch)  # acquire


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    n, BLOCK = 50000, 1024
    grid = (triton.cdiv(n, BLOCK),)
    # one symmetric buffer: the flags first (int32, one per program), then the data
    raw = symm_mem.empty(4096 + 4 * n, dtype=torch.uint8, device="cuda")
    handle = symm_mem.rendezvous(raw, dist.group.WORLD)
    raw.zero_()
    flags, buf = raw[: 4 * grid[0]].view(torch.int32), raw[4096:].view(torch.float32)
    dc, bases, me, W = it.device_context_from_symm_mem(raw, handle)  # dc: for C/C++ kernels
    handle.barrier()
    prev = (me - 1) % W
    for epoch in range(1, 21):  # flags are epochs: never reset
        pass_on[grid](buf, flags, bases, n, me, W, epoch, BLOCK=BLOCK)
        want = torch.arange(n, dtype=torch.float32, device="cuda") + 1000.0 * prev + epoch
        assert torch.equal(buf, want), (epoch, buf[:4], want[:4])
        handle.barrier()  # my successor has checked before I overwrite its buffer
    torch.cuda.synchronize()
    if me == 0:
        print("torch symmetric memory adopted by iris (%d ranks): 20 rounds correct" % W)
    dist.destroy_process_group()


if __name__ == "__main__":
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else 2)
