"""The serving slot's own context (CustomAllreduce without ctx=): its heap, the all-reduce
up to max_size and the fused add + RMSNorm past it, bf16, in CUDA graphs.

    PYTHONPATH=python python3 python/bench/bench_torch_slot.py 2
    IRIS_COLL_STAGING=64M IRIS_HEAP_SIZE=1G ... (the same with other sizes, to compare)

BENCH_SIZES: the all-reduce sizes in bytes (default 1048576,4194304,8384512); BENCH_FUSED=0
leaves out the fused rows. Rows: us per op, median / p99 over 30 replays of a graph (10 all-reduces or 5 fused ops),
the slowest rank's time per replay.
"""
import os
import sys

import torch
import torch.distributed as dist

import iris_gpu.torch as it

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_torch import init_rank  # noqa: E402
from bench_torch_fused import over_ranks, per_replay  # noqa: E402

# all-reduce sizes in bytes (BENCH_SIZES, a list); the fused rows when BENCH_FUSED is not 0
SIZES = [int(v) for v in os.environ.get("BENCH_SIZES", "1048576,4194304,8384512").split(",")]
FUSED = os.environ.get("BENCH_FUSED", "1") != "0"


def main():
    rank, world, _shared, dev = init_rank()
    group = dist.new_group(list(range(world)), backend="gloo")
    ca = it.CustomAllreduce(group, dev, max_size=8 << 20)
    say = print if rank == 0 else (lambda *a, **k: None)
    say("heap %d MiB per rank (IRIS_HEAP_SIZE=%s, IRIS_COLL_STAGING=%s)" % (ca.ctx.heap_size >> 20, os.environ.get("IRIS_HEAP_SIZE"), os.environ.get("IRIS_COLL_STAGING")), flush=True)
    for nb in SIZES:
        x = torch.randn(nb // 2, dtype=torch.bfloat16, device="cuda")
        m, p = over_ranks(per_replay(lambda: ca.custom_all_reduce(x), 10, 30), world)
        say("all-reduce %d KB: %.1f / %.1f us" % (nb >> 10, m, p), flush=True)
    w = torch.randn(8192, dtype=torch.bfloat16, device="cuda")
    for tokens in (512, 1024, 2048) if FUSED else ():
        x = torch.randn(tokens, 8192, dtype=torch.bfloat16, device="cuda")
        r = torch.randn_like(x)
        m, p = over_ranks(per_replay(lambda: ca.fused_add_rms_norm(x, r, w, 1e-6), 5, 30), world)
        say("fused add + RMSNorm %d x 8192 (%d MiB): %.1f / %.1f us" % (tokens, tokens * 8192 * 2 >> 20, m, p), flush=True)
    ca.close()


if __name__ == "__main__":
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else max(torch.cuda.device_count(), 1))
