"""MoE dispatch and combine through iris_gpu.torch against what torch users write:
all_to_all_single over NCCL (counts exchanged first, then the rows), and torch's
symmetric-memory all_to_all_vdev (NVSHMEM) where this torch has it. One process per GPU.

    PYTHONPATH=python python3 python/bench/bench_torch_moe.py 4    # or torchrun --nproc-per-node 4
    BENCH_CSV=build/bench_torch_moe.csv (default), BENCH_TOKENS=1,8,32,128,256,4096 (default),
    BENCH_MOE_SMS=n (iris's CTAs; default 0: the plan's own: every SM in low latency, 20 in
    high throughput)

Shape: hidden 7168, top-8, 256 experts (DeepSeek-V3), uniform random routing (8 distinct
experts per token), the same on every call. Up to 256 tokens per rank: iris's low-latency
mode; 4096: high-throughput (20 SMs by default). Dispatch fp8 (e4m3, per-128-channel scales
made in the kernel) and bf16; combine bf16.

Rows (us per call, max over ranks):
  iris-graph        it.moe_dispatch / it.moe_combine, 10 calls captured in one CUDA graph
                    (4 at 4096 tokens), replay time / calls, median of 20 replays back to
                    back (as bench_moe.cu)
  iris-eager        the same ops called eagerly (CUDA events around 10 calls, median of 5)
  a2a-nccl          what a torch user writes: sort the (token, expert) rows by destination
                    rank, index_select, bincount, all_to_all_single of the counts, .tolist()
                    (a host sync), all_to_all_single of the rows; fp8: the rows quantised per
                    128 channels first (scales travel in the same bytes). Combine: the rows go
                    back with all_to_all_single, then index_add_ of weight * row. Eager.
  vdev-nvshmem      dispatch with torch.ops.symm_mem.all_to_all_vdev (splits on the device, no
                    host sync), combine the same way back; bf16 rows only. "n/a" where torch
                    has no NVSHMEM.
Bandwidth as DeepEP defines it: this rank's (token, expert) selections x bytes per row
(fp8: hidden + hidden/128*4 + 16; bf16: 2*hidden) / time. Every row is checked once: the
combine of the dispatched tokens (experts = identity) against the same through all_to_all_single.
"""
import os
import statistics
import sys
import warnings

import torch
import torch.distributed as dist

import iris_gpu.torch as it
from bench_torch import init_rank, timed as timed_events  # this directory: the shared timing loop (median us per call)

os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "12G")  # the vdev baseline's buffers at 4096 tokens
H, TOPK, E = 7168, 8, 256


def timed_graph(fn, calls):
    """Median us per call: fn captured `calls` times in one CUDA graph; 3 warm-up replays,
    one barrier, then 20 replays back to back, each between its own events, one sync at the
    end (as bench_moe.cu times them: a barrier or a sync before every replay charges the
    ranks' restart skew to the replay)."""
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
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(21)]
    for i in range(20):
        ev[i].record()
        g.replay()
    ev[20].record()
    ev[20].synchronize()
    return statistics.median(ev[i].elapsed_time(ev[i + 1]) * 1000.0 / calls for i in range(20))


def worst(us):
    t = torch.tensor([us], dtype=torch.float64, device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def quantise_rows(x):
    """bf16 rows -> bytes of (e4m3 rows, float32 scale per 128 channels), as a uint8 tensor."""
    n = x.shape[0]
    xb = x.float().view(n, H // 128, 128)
    scale = (xb.abs().amax(dim=-1).clamp(min=1e-8) / 448.0)
    q = (xb / scale[..., None]).to(torch.float8_e4m3fn).view(n, H).view(torch.uint8)
    return torch.cat([q, scale.view(torch.uint8).view(n, H // 128 * 4)], dim=1)


def dequantise_rows(b):
    n = b.shape[0]
    q = b[:, :H].contiguous().view(torch.float8_e4m3fn).float().view(n, H // 128, 128)
    scale = b[:, H:].contiguous().view(torch.float32).view(n, H // 128)
    return (q * scale[..., None]).view(n, H).to(torch.bfloat16)


class A2aBaseline:
    """Dispatch / combine with all_to_all_single (NCCL), as torch users write it."""

    def __init__(self, world, idx, w, fp8):
        self.world, self.fp8 = world, fp8
        self.idx, self.w = idx, w

    def dispatch(self, x):
        n = x.shape[0]
        dest = (self.idx // (E // self.world)).view(-1)           # rank of each (token, k)
        order = torch.argsort(dest, stable=True)
        self.token = order // TOPK                                 # source token of each sent row
        self.wrow = self.w.view(-1)[order]
        send = x.index_select(0, self.token)
        if self.fp8:
            send = quantise_rows(send)
        counts = torch.bincount(dest, minlength=self.world)
        rcounts = torch.empty_like(counts)
        dist.all_to_all_single(rcounts, counts)
        self.send_splits, self.recv_splits = counts.tolist(), rcounts.tolist()  # the host sync
        recv = send.new_empty((sum(self.recv_splits), send.shape[1]))
        dist.all_to_all_single(recv, send, self.recv_splits, self.send_splits)
        self.n = n
        return recv

    def combine(self, y):
        back = y.new_empty((sum(self.send_splits), H))
        dist.all_to_all_single(back, y, self.send_splits, self.recv_splits)
        out = torch.zeros(self.n, H, dtype=torch.float32, device=y.device)
        out.index_add_(0, self.token, back.float() * self.wrow[:, None])
        return out.to(torch.bfloat16)


class VdevBaseline:
    """Dispatch / combine with torch.ops.symm_mem.all_to_all_vdev (NVSHMEM), bf16 rows."""

    def __init__(self, world, idx, w, max_tokens, gname):
        import torch.distributed._symmetric_memory as symm_mem

        self.world, self.gname, self.idx, self.w = world, gname, idx, w
        rows = max_tokens * TOPK
        dev = torch.device("cuda", torch.cuda.current_device())  # an explicit index: NVSHMEM's team manager compares devices exactly
        with torch.cuda.device(dev):
            self.inp = symm_mem.empty((rows, H), dtype=torch.bfloat16, device=dev)
            self.out = symm_mem.empty((rows * world, H), dtype=torch.bfloat16, device=dev)
            self.back = symm_mem.empty((rows, H), dtype=torch.bfloat16, device=dev)
            self.yin = symm_mem.empty((rows * world, H), dtype=torch.bfloat16, device=dev)
            self.in_splits = symm_mem.empty(world, dtype=torch.int64, device=dev)
            self.out_so = symm_mem.empty((2, world), dtype=torch.int64, device=dev)
            self.b_splits = symm_mem.empty(world, dtype=torch.int64, device=dev)
            self.b_so = symm_mem.empty((2, world), dtype=torch.int64, device=dev)
            for t in (self.inp, self.out, self.back, self.yin, self.in_splits, self.out_so, self.b_splits, self.b_so):
                symm_mem.rendezvous(t, group=gname)
        dist.barrier()

    def dispatch(self, x):
        n = x.shape[0]
        dest = (self.idx // (E // self.world)).view(-1)
        order = torch.argsort(dest, stable=True)
        self.token = order // TOPK
        self.wrow = self.w.view(-1)[order]
        self.rows = n * TOPK
        torch.index_select(x, 0, self.token, out=self.inp[:self.rows])
        self.in_splits.copy_(torch.bincount(dest, minlength=self.world))
        torch.ops.symm_mem.all_to_all_vdev(self.inp, self.out, self.in_splits, self.out_so, self.gname)
        self.n = n
        return self.out

    def combine(self, y):
        self.yin.copy_(y)
        self.b_splits.copy_(self.out_so[0])
        torch.ops.symm_mem.all_to_all_vdev(self.yin, self.back, self.b_splits, self.b_so, self.gname)
        out = torch.zeros(self.n, H, dtype=torch.float32, device=y.device)
        out.index_add_(0, self.token, self.back[:self.rows].float() * self.wrow[:, None])
        return out.to(torch.bfloat16)


def bytes_per_row(fp8):
    return H + H // 128 * 4 + 16 if fp8 else 2 * H


def main():
    rank, world, shared, dev = init_rank()
    ctx = it.Context(heap_size=8 << 30)
    gname, vdev_why = None, "ranks share a GPU"
    if not shared:
        try:
            import torch.distributed._symmetric_memory as symm_mem

            if hasattr(symm_mem, "set_backend"):
                symm_mem.set_backend("NVSHMEM")
            gname = dist.group.WORLD.group_name
            if hasattr(symm_mem, "enable_symm_mem_for_group"):
                with warnings.catch_warnings():  # deprecated, and a no-op, in newer torch
                    warnings.simplefilter("ignore")
                    symm_mem.enable_symm_mem_for_group(gname)
        except Exception as e:  # noqa: BLE001
            gname, vdev_why = None, str(e).splitlines()[0][:60] if str(e) else type(e).__name__
    tokens = [int(t) for t in os.environ.get("BENCH_TOKENS", "1,8,32,128,256,4096").split(",")]
    sms = int(os.environ.get("BENCH_MOE_SMS", "0"))  # CTAs of iris's kernels (0: the plan's default)
    rows, bad = [], 0
    for T in tokens:
        mode = "low_latency" if T <= 256 else "high_throughput"
        g = torch.Generator(device="cuda").manual_seed(1000 * T + rank)
        x = torch.randn(T, H, device="cuda", generator=g).to(torch.bfloat16)
        idx = torch.rand(T, E, device="cuda", generator=g).topk(TOPK, dim=-1).indices.to(torch.int32)
        w = torch.softmax(torch.randn(T, TOPK, device="cuda", generator=g), dim=-1)
        for fp8 in (True, False):
            dt = torch.float8_e4m3fn if fp8 else torch.bfloat16
            res = {}
            moe = ctx.moe_plan(T, H, TOPK, E, mode=mode, dispatch_dtype=dt, num_sms=sms)
            rx, scales, _, _ = it.moe_dispatch(x, idx, w, moe)
            y = (rx.float() * scales.repeat_interleave(128, dim=-1)).to(torch.bfloat16) if fp8 else rx.clone()
            mine = it.moe_combine(y, moe)                       # identity experts
            torch.cuda.synchronize()
            moe.check()
            calls = 4 if T > 256 else 10
            res["iris-graph dispatch"] = worst(timed_graph(lambda: it.moe_dispatch(x, idx, w, moe), calls))
            res["iris-graph combine"] = worst(timed_graph(lambda: it.moe_combine(y, moe), calls))
            res["iris-eager dispatch"] = worst(timed_events(lambda: it.moe_dispatch(x, idx, w, moe), 10))
            res["iris-eager combine"] = worst(timed_events(lambda: it.moe_combine(y, moe), 10))
            torch.cuda.synchronize()
            moe.close()
            if not shared:
                base = A2aBaseline(world, idx.long(), w, fp8)
                recv = base.dispatch(x)
                yb = dequantise_rows(recv) if fp8 else recv
                ref = base.combine(yb)
                err = ((mine.float() - ref.float()).abs().max() / ref.float().abs().max().clamp(min=1e-6)).item()
                tol = 0.02 if not fp8 else 0.08
                if not err <= tol:
                    bad += 1
                    print("FAIL: rank %d, %d tokens, %s: iris's combine(dispatch) differs from all_to_all_single's by %.3g of the largest value"
                          % (rank, T, "fp8" if fp8 else "bf16", err), flush=True)
                res["a2a-nccl dispatch"] = worst(timed_events(lambda: base.dispatch(x), 10))
                res["a2a-nccl combine"] = worst(timed_events(lambda: base.combine(yb), 10))
            rows.append((T, mode, "fp8" if fp8 else "bf16", res))
    if rank == 0:
        report(rows, world, shared)
    # torch's all_to_all_vdev last, its rows printed as they come (a baseline that fails
    # on one rank only could leave the others waiting: the table above is out by then)
    for T in tokens if not shared else []:
        g = torch.Generator(device="cuda").manual_seed(1000 * T + rank)
        x = torch.randn(T, H, device="cuda", generator=g).to(torch.bfloat16)
        idx = torch.rand(T, E, device="cuda", generator=g).topk(TOPK, dim=-1).indices.long()
        w = torch.softmax(torch.randn(T, TOPK, device="cuda", generator=g), dim=-1)
        res = {}
        if gname is None:
            res["vdev-nvshmem dispatch"] = res["vdev-nvshmem combine"] = "n/a: " + vdev_why
        else:
            try:
                base = A2aBaseline(world, idx, w, False)
                ref = base.combine(base.dispatch(x))
                vb = VdevBaseline(world, idx, w, T, gname)
                vb.dispatch(x)
                yv = vb.out.clone()
                vref = vb.combine(yv)
                torch.cuda.synchronize()
                verr = ((vref.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
                if not verr <= 0.02:
                    raise RuntimeError("vdev result differs by %.3g" % verr)
                res["vdev-nvshmem dispatch"] = worst(timed_events(lambda: vb.dispatch(x), 10))
                res["vdev-nvshmem combine"] = worst(timed_events(lambda: vb.combine(yv), 10))
            except Exception as e:  # noqa: BLE001
                why = "n/a: " + (str(e).splitlines()[0][:70] if str(e) else type(e).__name__)
                res["vdev-nvshmem dispatch"] = res["vdev-nvshmem combine"] = why
                gname, vdev_why = None, why[5:]
        if rank == 0:
            report([(T, "torch symm-mem", "bf16", res)], world, shared, csv_mode="a")
    ctx.close()
    dist.destroy_process_group()
    if bad:
        sys.exit(1)


def report(rows, world, shared, csv_mode="w"):
    label = "world %d%s, %s" % (world, ", ranks SHARE one GPU: not performance figures" if shared else "", torch.cuda.get_device_name())
    if csv_mode == "w":
        print("MoE dispatch / combine, hidden %d, top-%d, %d experts, us per call, max over ranks (%s)" % (H, TOPK, E, label))
        print("| tokens | mode | dispatch | variant | us | GB/s |")
        print("|---|---|---|---|---|---|")
    csv = os.environ.get("BENCH_CSV", "build/bench_torch_moe.csv")
    os.makedirs(os.path.dirname(csv) or ".", exist_ok=True)
    with open(csv, csv_mode) as f:
        if csv_mode == "w":
            f.write("world,shared_gpu,tokens,mode,dispatch_type,variant,us,gbps\n")
        for T, mode, dt, res in rows:
            for name, us in res.items():
                if isinstance(us, str):
                    print("| %d | %s | %s | %s | %s | |" % (T, mode, dt, name, us))
                    continue
                per = bytes_per_row(dt == "fp8") if name.endswith("dispatch") else 2 * H
                gbps = T * TOPK * per / (us * 1e-6) / 1e9
                print("| %d | %s | %s | %s | %.2f | %.1f |" % (T, mode, dt, name, us, gbps), flush=True)
                f.write("%d,%d,%d,%s,%s,%s,%.3f,%.2f\n" % (world, int(shared), T, mode, dt, name, us, gbps))


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].isdigit():
        sys.exit(__doc__)
    it.launch(main, int(sys.argv[1]) if len(sys.argv) > 1 else max(torch.cuda.device_count(), 2))
