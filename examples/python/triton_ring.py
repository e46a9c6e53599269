"""A producer/consumer Triton kernel over the iris heap: every rank stores its block into the
next rank's heap, signals that rank's flag (release, system scope), waits for its own flag
(acquire) and consumes what its predecessor sent: out = 2 * received + 1.

    make lib
    PYTHONPATH=python torchrun --nproc-per-node 2 examples/python/triton_ring.py
    PYTHONPATH=python python3 examples/python/triton_ring.py 3    # spawns 3 ranks itself

Flags are epochs (one int32 per program on the heap): launch e signals and waits for e, so
nothing is reset between launches. A GPU-side barrier between launches keeps a rank from
overwriting a block its successor has not consumed yet.
"""
import os
import sys

import torch
import torch.distributed as dist
import triton
import triton.language as tl

import iris_gpu.torch as it
import iris_gpu.triton as ig


@triton.jit
def ring_kernel(src, inbox, out, flags, heap_bases, n, me, world, epoch, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    nxt = (me + 1) % world
    ig.store(inbox + offs, tl.load(src + offs, mask=mask), me, nxt, heap_bases, mask=mask)  # produce
    ig.signal(flags + pid, epoch, me, nxt, heap_bases)  # release my stores to nxt
    ig.wait(flags + pid, epoch)  # acquire what my predecessor stored here
    got = tl.load(inbox + offs, mask=mask)  # consume
    tl.store(out + offs, got * 2 + 1, mask=mask)


class Ring:
    """The heap buffers and launch of the ring (collective to create: heap allocations)."""

    BLOCK = 1024

    def __init__(self, ctx, n):
        self.ctx, self.n = ctx, n
        self.grid = (triton.cdiv(n, self.BLOCK),)
        self.inbox = ctx.empty((n,), torch.float32)
        self.flags = ctx.zeros((self.grid[0],), torch.int32)
        self.bases = ctx.heap_bases_tensor()
        self.epoch = 0
        it.barrier(ctx)  # every rank's flags are zero before anyone signals

    def __call__(self, src):
        """out = 2 * (the predecessor's src) + 1, on the current stream."""
        out = torch.empty_like(src)
        self.epoch += 1
        ring_kernel[self.grid](src, self.inbox, out, self.flags, self.bases, self.n, self.ctx.rank, self.ctx.world_size, self.epoch, BLOCK=self.BLOCK)
        it.barrier(self.ctx)  # the successor consumed my block before my next launch overwrites it
        return out


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    dist.init_process_group("gloo")
    ctx = it.Context()
    ring = Ring(ctx, 100000)
    for i in range(20):
        src = torch.arange(ring.n, dtype=torch.float32, device="cuda") + 1000 * rank + i
        out = ring(src)
        prev = (rank - 1) % world
        want = (torch.arange(ring.n, dtype=torch.float32, device="cuda") + 1000 * prev + i) * 2 + 1
        assert torch.equal(out, want), (i, out[:4], want[:4])
    torch.cuda.synchronize()
    if rank == 0:
        print("triton ring of %d ranks: 20 launches, every block consumed correctly" % world)
    del ring
    ctx.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else 2)
