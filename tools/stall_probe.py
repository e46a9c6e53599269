"""Where does a slow iris call spend its time? Per-CTA timelines (IRIS_TRACE) of the calls
that were slow through torch, next to the same calls timed per replay.

    make build/libiris_trace.so
    IRIS_LIB=build/libiris_trace.so PYTHONPATH=python python3 tools/stall_probe.py 4 OUTDIR

Each experiment runs on every rank, then each rank writes its trace records as
OUTDIR/<experiment>.r<rank>.npy (tools/trace_calls.py reads them) and rank 0 prints the
per-replay times (us per call, max over ranks). Experiments (PROBE=a,b to pick):
  moe8      MoE combine, 8 tokens, fp8 dispatch, hidden 7168, top-8, 256 experts, every SM,
            10 combines per graph; replays timed one by one, after dist.barrier (as
            bench_torch_moe does) and back to back
  moe8_64   the same with 64 CTAs
  ar2m      torch all-reduce 2 MB bf16 on heap tensors with 132 CTAs (set_algo), graphs
  ag256k    all-gather 256 KB per rank (the latency kernel), eager and graphs
"""
import ctypes
import os
import statistics
import sys

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import iris_gpu.torch as it  # noqa: E402
from iris_gpu import _lib  # noqa: E402

REC = np.dtype([("t", "<u8", (4,)), ("kernel", "<u4"), ("call", "<u4"), ("block", "<u4"), ("nblocks", "<u4"), ("smid", "<u4"), ("rank", "<u4"),
                ("pad", "<u4", (2,))])
CAP = 1 << 18


def trace_read(ctx):
    lib = _lib.load().lib
    if not hasattr(lib, "iris_trace_read"):
        return None
    buf = np.zeros(CAP, dtype=REC)
    n = ctypes.c_size_t(0)
    st = lib.iris_trace_read(ctypes.c_void_p(ctx._handle().value if hasattr(ctx._handle(), "value") else ctx._handle()),
                             buf.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(CAP), ctypes.byref(n))
    if st:
        raise RuntimeError("iris_trace_read: status %d" % st)
    return buf[: n.value]


def worst(x):
    t = torch.tensor([x], dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def replays(g, calls, n, barrier):
    """us per call of n replays of g (events around each), max over ranks per replay."""
    out = []
    torch.cuda.synchronize()
    dist.barrier()
    for _ in range(n):
        if barrier:
            dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        out.append(worst(a.elapsed_time(b) * 1000.0 / calls))
    return out


def capture(fn, calls):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    return g


def summary(name, xs):
    xs = sorted(xs)
    return "%-28s n=%d median %.1f  min %.1f  max %.1f us/call" % (name, len(xs), statistics.median(xs), xs[0], xs[-1])


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count()
    torch.cuda.set_device(dev)
    backend = os.environ.get("PROBE_BACKEND", "nccl")
    dist.init_process_group(backend, device_id=torch.device("cuda", dev) if backend == "nccl" else None)
    outdir = os.environ["PROBE_OUT"]
    ctx = it.Context(heap_size=4 << 30)
    which = os.environ.get("PROBE", "moe8,moe8_64,ar2m,ag256k").split(",")
    lines = []

    def dump(name):
        recs = trace_read(ctx)
        if recs is not None:
            np.save(os.path.join(outdir, "%s.r%d.npy" % (name, rank)), recs)

    trace_read(ctx)  # empty the ring
    H, K, E = 7168, 8, 256
    for name in which:
        if name.startswith("moe8"):
            sms = 64 if name == "moe8_64" else 0
            T = 8
            g0 = torch.Generator(device="cuda").manual_seed(1000 * T + rank)
            x = torch.randn(T, H, device="cuda", generator=g0).to(torch.bfloat16)
            idx = torch.rand(T, E, device="cuda", generator=g0).topk(K, dim=-1).indices.to(torch.int32)
            w = torch.softmax(torch.randn(T, K, device="cuda", generator=g0), dim=-1)
            moe = ctx.moe_plan(T, H, K, E, mode="low_latency", dispatch_dtype=torch.float8_e4m3fn, num_sms=sms)
            rx, scales, _, _ = it.moe_dispatch(x, idx, w, moe)
            y = (rx.float() * scales.repeat_interleave(128, dim=-1)).to(torch.bfloat16)
            it.moe_combine(y, moe)
            torch.cuda.synchronize()
            trace_read(ctx)
            g = capture(lambda: it.moe_combine(y, moe), 10)
            for _ in range(3):
                g.replay()
            torch.cuda.synchronize()
            trace_read(ctx)
            lines.append(summary(name + " graph, barrier", replays(g, 10, 20, True)))
            dump(name + "_barrier")
            lines.append(summary(name + " graph, back2back", replays(g, 10, 20, False)))
            dump(name + "_b2b")
            # eager: 10 calls between events, after a barrier
            ts = []
            for _ in range(10):
                dist.barrier()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(10):
                    it.moe_combine(y, moe)
                b.record()
                b.synchronize()
                ts.append(worst(a.elapsed_time(b) * 100.0))
            lines.append(summary(name + " eager", ts))
            dump(name + "_eager")
            del g
            moe.close()
        elif name == "ar2m":
            n = (2 << 20) // 2
            xa = ctx.empty((n,), torch.bfloat16)
            ya = ctx.empty((n,), torch.bfloat16)
            xa.normal_()
            for ctas in (132, 64):
                ctx.set_algo("auto", ctas=ctas)
                g = capture(lambda: it.all_reduce(xa, ctx, out=ya), 20)
                for _ in range(3):
                    g.replay()
                torch.cuda.synchronize()
                trace_read(ctx)
                lines.append(summary("ar2m ctas=%d graph, barrier" % ctas, replays(g, 20, 20, True)))
                lines.append(summary("ar2m ctas=%d graph, b2b" % ctas, replays(g, 20, 20, False)))
                dump("ar2m_%d" % ctas)
                del g
            ctx.set_algo("auto")
        elif name == "ag256k":
            n = (256 << 10) // 2
            xg = torch.randn(n, device="cuda").to(torch.bfloat16)
            yg = torch.empty(world * n, device="cuda", dtype=torch.bfloat16)
            g = capture(lambda: it.all_gather(xg, ctx, out=yg), 20)
            for _ in range(3):
                g.replay()
            torch.cuda.synchronize()
            trace_read(ctx)
            lines.append(summary("ag256k graph, barrier", replays(g, 20, 20, True)))
            lines.append(summary("ag256k graph, b2b", replays(g, 20, 20, False)))
            dump("ag256k")
            del g
    torch.cuda.synchronize()
    if rank == 0:
        print("stall probe, world %d, %s, backend %s" % (world, torch.cuda.get_device_name(), backend))
        for line in lines:
            print(line, flush=True)
    ctx.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    os.environ["PROBE_OUT"] = sys.argv[2]
    os.makedirs(sys.argv[2], exist_ok=True)
    it.launch(main, int(sys.argv[1]))
