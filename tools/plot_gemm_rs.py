#!/usr/bin/env python3
"""Plot bench_gemm_rs's CSV, either of its two modes (told apart by the header).

    python3 tools/plot_gemm_rs.py bench_gemm_rs.csv out.png

ranks mode (`bench_gemm_rs [ranks]`): time per op against M, one panel per
(op, dtype, N, K), one line per variant (the paths, cuBLAS(Lt) + NCCL in sequence, the
local GEMM alone).
local mode (`bench_gemm_rs local`): cuBLAS time / the fused GEMM's time against M, one
panel per (N, K/d), against cuBLAS with bf16 out and with fp32 out, and the 0.95 target.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_ranks(rows, out):
    panels = sorted({(r["op"], r["dtype"], int(r["N"]), int(r["K"])) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for j, (op, dt, n, k) in enumerate(panels):
        ax = axes[0][j]
        sub = [r for r in rows if (r["op"], r["dtype"], int(r["N"]), int(r["K"])) == (op, dt, n, k)]
        for v in sorted({r["variant"] for r in sub}):
            pts = sorted((int(r["M"]), float(r["ms"])) for r in sub if r["variant"] == v)
            style = "--" if "alone" in v or "nccl" in v else "-"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=v)
        ax.set_title("%s %s N=%d K=%d, %s ranks" % (op, dt, n, k, sub[0]["ranks"]), fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("M")
        ax.set_ylabel("ms per op")
        ax.legend(fontsize=7)
    return fig


def plot_local(rows, out):
    panels = sorted({(int(r["N"]), int(r["K_local"])) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6), squeeze=False)
    for j, (n, k) in enumerate(panels):
        ax = axes[0][j]
        sub = sorted((int(r["M"]), float(r["x_vs_bf16"]), float(r["x_vs_fp32"])) for r in rows if (int(r["N"]), int(r["K_local"])) == (n, k))
        ax.plot([p[0] for p in sub], [p[1] for p in sub], "-", marker="o", label="vs cuBLAS bf16 out")
        ax.plot([p[0] for p in sub], [p[2] for p in sub], "-", marker="s", label="vs cuBLAS fp32 out")
        ax.axhline(0.95, color="grey", linestyle="--", linewidth=1, label="target 0.95")
        ax.set_title("N=%d K/W=%d" % (n, k), fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("M")
        ax.set_ylabel("cuBLAS time / fused GEMM time")
        ax.set_ylim(0.5, 1.2)
        ax.legend(fontsize=7)
    return fig


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_gemm_rs.py bench_gemm_rs.csv out.png")
    rows = list(csv.DictReader(open(sys.argv[1])))
    if not rows:
        sys.exit("plot_gemm_rs: %s holds no rows" % sys.argv[1])
    if "x_vs_bf16" in rows[0]:
        fig = plot_local(rows, sys.argv[2])
    elif "variant" in rows[0]:
        fig = plot_ranks(rows, sys.argv[2])
    else:
        sys.exit("plot_gemm_rs: %s is neither of bench_gemm_rs's CSVs (header: %s)" % (sys.argv[1], ",".join(rows[0])))
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print("plot_gemm_rs: wrote " + sys.argv[2])


if __name__ == "__main__":
    main()
