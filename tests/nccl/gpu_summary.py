#!/usr/bin/env python3
"""tests/nccl/gpu_summary.py OUT — the comparison tables of tests/nccl/gpu_shim.sh.

Reads OUT/nt_{real,shim}_<test>_<W>.log (nccl-tests output) and OUT/{torch,jax}_{nccl,shim}_<W>.log
(TIME lines of tests/nccl/torch_check.py and jax_check.py) and prints, per test and world size, one row
per message size: the real NCCL's and the shim's time (us) and bus bandwidth (GB/s,
out of place) and their ratio (shim / real busbw; > 1: the shim is faster), with the
routes the shim reported (its IRIS_NCCL_DEBUG lines). Writes OUT/summary.csv too.
"""
import glob
import os
import re
import sys

# a result row: size count type redop root | time algbw busbw #wrong (out of place) | the same in place
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)")


def parse_nt(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path, errors="replace"):
        m = ROW.match(line)
        if m:
            try:
                float(m.group(6)), float(m.group(8)), float(m.group(10)), float(m.group(12))
            except ValueError:
                continue
            size = int(m.group(1))
            rows[size] = dict(time=float(m.group(6)), busbw=float(m.group(8)), wrong=m.group(9), time_ip=float(m.group(10)), busbw_ip=float(m.group(12)),
                              wrong_ip=m.group(13))
    return rows


def served(path):
    """the shim's closing counts (IRIS_NCCL_DEBUG=1): 'allreduce 120/3 ...' summed over comms"""
    tot = {}
    if not os.path.exists(path):
        return ""
    for line in open(path, errors="replace"):
        if "calls served by iris / forwarded to NCCL:" in line:
            for kind, s, f in re.findall(r"(\w+) (\d+)/(\d+)", line.split("NCCL:", 1)[1]):
                a, b = tot.get(kind, (0, 0))
                tot[kind] = (a + int(s), b + int(f))
    return ", ".join("%s %d iris / %d NCCL" % (k, s, f) for k, (s, f) in tot.items() if s or f)


def human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d%s" % (n // div, unit)
    return str(n)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/nccl_gpu"
    csv = ["source,test,world,bytes,real_us,shim_us,real_busbw,shim_busbw,ratio"]
    tests = sorted({re.sub(r"^nt_(real|shim)_", "", os.path.basename(p))[:-4] for p in glob.glob(os.path.join(out, "nt_*_*.log"))})
    for t in tests:
        real = parse_nt(os.path.join(out, "nt_real_%s.log" % t))
        shim = parse_nt(os.path.join(out, "nt_shim_%s.log" % t))
        if not real and not shim:
            continue
        print("\n## nccl-tests %s (busbw GB/s out of place; ratio = shim / real)" % t)
        routes = served(os.path.join(out, "nt_shim_%s.log" % t))
        if routes:
            print("shim routes: %s" % routes)
        print("%8s %10s %10s %9s %9s %6s" % ("bytes", "real us", "shim us", "real bw", "shim bw", "ratio"))
        for size in sorted(set(real) | set(shim)):
            r, s = real.get(size), shim.get(size)
            ratio = (s["busbw"] / r["busbw"]) if r and s and r["busbw"] > 0 else (r["time"] / s["time"] if r and s and s["time"] > 0 else 0)
            print("%8s %10s %10s %9s %9s %6s" % (human(size), "%.2f" % r["time"] if r else "-", "%.2f" % s["time"] if s else "-",
                                                "%.2f" % r["busbw"] if r else "-", "%.2f" % s["busbw"] if s else "-", "%.2f" % ratio if ratio else "-"))
            csv.append("nccl-tests,%s,,%d,%s,%s,%s,%s,%.3f" % (t, size, r["time"] if r else "", s["time"] if s else "", r["busbw"] if r else "",
                                                              s["busbw"] if s else "", ratio))
    for path in sorted(glob.glob(os.path.join(out, "torch_nccl_*.log")) + glob.glob(os.path.join(out, "jax_nccl_*.log"))):
        w = path.rsplit("_", 1)[1][:-4]
        fw = os.path.basename(path).split("_")[0]
        times = {}
        for label in ("nccl", "shim"):
            p = os.path.join(out, "%s_%s_%s.log" % (fw, label, w))
            if os.path.exists(p):
                for line in open(p, errors="replace"):
                    if line.startswith("TIME: "):
                        _, lab, world, op, mode, size, us = line.split()
                        times[(op, mode, int(size), lab)] = float(us)
        keys = sorted({(op, mode, size) for (op, mode, size, _) in times})
        if not keys:
            continue
        print("\n## %s, %s ranks, bf16 (us per call%s; x = NCCL / shim, > 1: the shim is faster)" % (fw, w, ", slowest rank" if fw == "torch" else ", wall time"))
        print("%-15s %-6s %8s %10s %10s %6s" % ("op", "mode", "bytes", "NCCL us", "shim us", "x"))
        for op, mode, size in keys:
            a, b = times.get((op, mode, size, "nccl")), times.get((op, mode, size, "shim"))
            x = a / b if a and b else 0
            print("%-15s %-6s %8s %10s %10s %6s" % (op, mode, human(size), "%.2f" % a if a else "-", "%.2f" % b if b else "-", "%.2f" % x if x else "-"))
            csv.append("%s,%s %s,%s,%d,%s,%s,,,%.3f" % (fw, op, mode, w, size, a or "", b or "", x))
    with open(os.path.join(out, "summary.csv"), "w") as f:
        f.write("\n".join(csv) + "\n")


if __name__ == "__main__":
    main()
