#!/usr/bin/env python3
"""torch.distributed through whatever libnccl.so.2 the process got: the real one, or
libiris_nccl.so preloaded (tests/nccl/gpu_shim.sh runs it both ways).

    python3 tests/nccl/torch_check.py W [--time]

W processes (one GPU each, torch.multiprocessing.spawn). Checks, exact values on every
rank: dist.all_reduce (fp32, bf16; sum, max, avg), all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single, 1 KB to 64 MB, eager and captured in a CUDA
graph replayed with new inputs. Prints PASS / FAIL lines (rank 0, after gathering every
rank's failures), an INFO line saying whether the shim is loaded, and with --time
"TIME: <op> <mode> <bytes> <us per call>" lines (all-reduce bf16, eager and graph;
all-gather / reduce-scatter in graphs) for the comparison gpu_shim.sh prints.
"""
import ctypes
import faulthandler
import os
import socket
import sys
import time
import traceback

STACKS_S = 40  # a rank still in its teardown this long after its checks prints its stacks
EXIT_S = 90  # then the ranks are stopped (printed as EXIT: stuck), the checks judged all the same
SIZES = [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def shim_loaded():
    try:
        ctypes.CDLL(None).iris_nccl_stats
        return True
    except AttributeError:
        return False


def pattern(torch, n, rank, seed, dtype, device):
    i = torch.arange(n, device=device, dtype=torch.int64)
    return ((i * 7 + rank * 3 + seed) % 5).to(dtype)


def run(rank, world, port, timing, results):
    import torch
    import torch.distributed as dist

    fails = []
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    # torch 2.5-2.7.0 made eager-init communicators non-blocking, which the shim leaves to NCCL
    os.environ.setdefault("TORCH_NCCL_USE_COMM_NONBLOCKING", "0")
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)

    def want_reduce(n, seed, dtype, op, shift=0):
        acc = None
        for r in range(world):
            v = pattern(torch, n + shift, r, seed, torch.float64, dev)[shift:]
            acc = v if acc is None else (acc + v if op in ("sum", "avg") else torch.maximum(acc, v))
        if op == "avg":
            acc = acc / world
        return acc.to(dtype)

    def close(got, want, dtype, op):
        if op == "avg":
            tol = 1e-2 if dtype == torch.bfloat16 else 1e-6
            return torch.allclose(got.double(), want.double(), rtol=tol, atol=1e-6)
        return torch.equal(got, want)

    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}

    def check(name, fn):
        try:
            ok = fn()
            if not ok:
                fails.append("%s: wrong values" % name)
        except Exception as e:  # a failing call is a failed check, not a crash
            fails.append("%s: %s" % (name, "".join(traceback.format_exception_only(type(e), e)).strip()))

    for dtype in (torch.float32, torch.bfloat16):
        es = torch.tensor([], dtype=dtype).element_size()
        for size in SIZES:
            n = size // es
            for op in ("sum", "max", "avg"):
                if op == "avg" and dtype == torch.bfloat16 and size > (1 << 20):
                    continue

                def ar(n=n, op=op, dtype=dtype, size=size):
                    x = pattern(torch, n, rank, size % 97, dtype, dev)
                    dist.all_reduce(x, op=ops[op])
                    return close(x, want_reduce(n, size % 97, dtype, op), dtype, op)

                check("all_reduce %s %s %d B eager" % (str(dtype)[6:], op, size), ar)

            def ag(n=n, dtype=dtype, size=size):
                x = pattern(torch, n // world + 1, rank, 1, dtype, dev)
                out = torch.empty(world * x.numel(), dtype=dtype, device=dev)
                dist.all_gather_into_tensor(out, x)
                want = torch.cat([pattern(torch, x.numel(), r, 1, dtype, dev) for r in range(world)])
                return torch.equal(out, want)

            def rs(n=n, dtype=dtype, size=size):
                m = n // world + 1
                x = pattern(torch, m * world, rank, 2, dtype, dev)
                out = torch.empty(m, dtype=dtype, device=dev)
                dist.reduce_scatter_tensor(out, x)
                return torch.equal(out, want_reduce(m * world, 2, dtype, "sum")[rank * m:(rank + 1) * m])

            def a2a(n=n, dtype=dtype, size=size):
                m = n // world + 1
                x = pattern(torch, m * world, rank, 3, dtype, dev)
                out = torch.empty_like(x)
                dist.all_to_all_single(out, x)
                want = torch.cat([pattern(torch, m * world, r, 3, dtype, dev)[rank * m:(rank + 1) * m] for r in range(world)])
                return torch.equal(out, want)

            check("all_gather_into_tensor %s %d B eager" % (str(dtype)[6:], size), ag)
            check("reduce_scatter_tensor %s %d B eager" % (str(dtype)[6:], size), rs)
            check("all_to_all_single %s %d B eager" % (str(dtype)[6:], size), a2a)

    # a CUDA graph: all-reduce, all-gather, reduce-scatter, all-to-all; replayed with new inputs
    def graph_check():
        n = 64 << 10
        m = n // world
        x = torch.zeros(n, device=dev)
        ag_in = torch.zeros(m, device=dev)
        ag_out = torch.zeros(n, device=dev)
        rs_in = torch.zeros(n, device=dev)
        rs_out = torch.zeros(m, device=dev)
        a_in = torch.zeros(n, device=dev)
        a_out = torch.zeros(n, device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm up outside the capture
            dist.all_reduce(x)
            dist.all_gather_into_tensor(ag_out, ag_in)
            dist.reduce_scatter_tensor(rs_out, rs_in)
            dist.all_to_all_single(a_out, a_in)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            dist.all_reduce(x)
            dist.all_gather_into_tensor(ag_out, ag_in)
            dist.reduce_scatter_tensor(rs_out, rs_in)
            dist.all_to_all_single(a_out, a_in)
        ok = True
        for rep in range(5):
            x.copy_(pattern(torch, n, rank, 10 + rep, torch.float32, dev))
            ag_in.copy_(pattern(torch, m, rank, 20 + rep, torch.float32, dev))
            rs_in.copy_(pattern(torch, n, rank, 30 + rep, torch.float32, dev))
            a_in.copy_(pattern(torch, n, rank, 40 + rep, torch.float32, dev))
            g.replay()
            torch.cuda.synchronize()
            ok = ok and torch.equal(x, want_reduce(n, 10 + rep, torch.float32, "sum"))
            ok = ok and torch.equal(ag_out, torch.cat([pattern(torch, m, r, 20 + rep, torch.float32, dev) for r in range(world)]))
            ok = ok and torch.equal(rs_out, want_reduce(n, 30 + rep, torch.float32, "sum")[rank * m:(rank + 1) * m])
            want = torch.cat([pattern(torch, n, r, 40 + rep, torch.float32, dev)[rank * m:(rank + 1) * m] for r in range(world)])
            ok = ok and torch.equal(a_out, want)
        return ok

    check("all_reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single in a CUDA graph, 5 replays", graph_check)

    times = []
    if timing:
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            for size in SIZES:
                n = size // 2
                if op == "all_reduce":
                    x = torch.ones(n, dtype=torch.bfloat16, device=dev)
                    call = lambda x=x: dist.all_reduce(x)
                elif op == "all_gather":
                    out = torch.empty(n, dtype=torch.bfloat16, device=dev)
                    inp = torch.ones(n // world, dtype=torch.bfloat16, device=dev)
                    call = lambda out=out, inp=inp: dist.all_gather_into_tensor(out, inp)
                else:
                    inp = torch.ones(n, dtype=torch.bfloat16, device=dev)
                    out = torch.empty(n // world, dtype=torch.bfloat16, device=dev)
                    call = lambda out=out, inp=inp: dist.reduce_scatter_tensor(out, inp)
                modes = ("eager", "graph") if op == "all_reduce" else ("graph",)
                for mode in modes:
                    try:
                        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        if mode == "eager":
                            for _ in range(10):
                                call()
                            torch.cuda.synchronize()
                            dist.barrier()
                            start.record()
                            for _ in range(50):
                                call()
                            end.record()
                            torch.cuda.synchronize()
                            us = start.elapsed_time(end) * 1000 / 50
                        else:
                            s = torch.cuda.Stream()
                            s.wait_stream(torch.cuda.current_stream())
                            with torch.cuda.stream(s):
                                for _ in range(3):
                                    call()
                            torch.cuda.current_stream().wait_stream(s)
                            g = torch.cuda.CUDAGraph()
                            with torch.cuda.graph(g):
                                for _ in range(20):
                                    call()
                            g.replay()
                            torch.cuda.synchronize()
                            dist.barrier()
                            start.record()
                            for _ in range(10):
                                g.replay()
                            end.record()
                            torch.cuda.synchronize()
                            us = start.elapsed_time(end) * 1000 / 200
                            # a graph of NCCL kernels left alive kept destroy_process_group
                            # from returning (2 H200s, torch 2.11, NCCL 2.28: both ranks
                            # stopped in it, with the real NCCL as with the shim)
                            del g
                            torch.cuda.synchronize()
                        t = torch.tensor([us], device=dev)
                        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's
                        times.append((op, mode, size, t.item()))
                    except Exception as e:
                        fails.append("timing %s %s %d B: %s" % (op, mode, size, e))

    sys.stderr.write("torch_check: rank %d: checks done\n" % rank)
    sys.stderr.flush()
    # where a rank stops from here on (the teardown did not end on 2 H200s with the real
    # NCCL as with the shim): every thread's Python stack after STACKS_S seconds
    faulthandler.dump_traceback_later(STACKS_S, exit=False, file=sys.stderr)
    gathered = [None] * world
    dist.all_gather_object(gathered, fails)
    if rank == 0:
        results.put((gathered, times))
    dist.barrier()
    sys.stderr.write("torch_check: rank %d: barrier passed\n" % rank)
    sys.stderr.flush()
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()
    sys.stderr.write("torch_check: rank %d: process group destroyed\n" % rank)
    sys.stderr.flush()
    os._exit(0)  # leave at once: nothing of the interpreter's teardown is under test


def main():
    import torch
    import torch.multiprocessing as mp

    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    timing = "--time" in sys.argv
    if torch.cuda.device_count() < world:
        print("SKIP: torch through NCCL at %d ranks: %d GPU(s)" % (world, torch.cuda.device_count()))
        return 0
    loaded = shim_loaded()
    label = "shim" if loaded else "nccl"
    print("INFO: torch %s, NCCL %s, libiris_nccl.so %s" % (torch.__version__, ".".join(map(str, torch.cuda.nccl.version())),
                                                          "preloaded" if loaded else "not loaded (real NCCL)"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    # read rank 0's results while the ranks run: a result larger than the pipe's buffer
    # (--time's table is) blocks rank 0's put until it is read, so a join first never ends
    procs = mp.spawn(run, args=(world, port, timing, results), nprocs=world, join=False)
    got = None
    got_at = None
    stuck = False
    while True:
        if got is None and not results.empty():
            got = results.get()
            got_at = time.time()
        if procs.join(timeout=1):
            break
        if got_at is not None and time.time() - got_at > EXIT_S:
            stuck = True
            for p in procs.processes:
                if p.is_alive():
                    p.kill()
            break
    if got is None and not results.empty():
        got = results.get()
    if got is None:
        print("FAIL: torch %s %d ranks: rank 0 sent no results" % (label, world))
        return 1
    gathered, times = got
    failed = 0
    for r, fl in enumerate(gathered):
        for f in fl[:5]:
            print("FAIL: torch %s %d ranks, rank %d: %s" % (label, world, r, f))
        failed += len(fl)
    if not failed:
        print("PASS: torch %s %d ranks: all_reduce (fp32, bf16; sum, max, avg), all_gather_into_tensor, reduce_scatter_tensor, "
              "all_to_all_single, 1 KB-64 MB eager, and a CUDA graph of the four replayed with new inputs" % (label, world))
    for op, mode, size, us in times:
        print("TIME: %s %d %s %s %d %.2f" % (label, world, op, mode, size, us))
    # the teardown, apart from the checks: gpu_shim.sh fails the shim's run only where the
    # real NCCL's ended and the shim's did not
    print("EXIT: %s %d %s" % (label, world, "stuck (ranks stopped %d s after their results; their stacks: stderr)" % EXIT_S if stuck else "clean"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
