#!/usr/bin/env python3
"""Plot bench_ag_gemm's CSV: time and TFLOPS per GPU against M, one panel per (N, K).

    python3 tools/plot_ag_gemm.py bench_ag_gemm.csv out.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    shapes = sorted({(int(r["N"]), int(r["K"])) for r in rows})
    fig, axes = plt.subplots(2, len(shapes), figsize=(5 * len(shapes), 7), squeeze=False)
    for j, (n, k) in enumerate(shapes):
        sub = [r for r in rows if int(r["N"]) == n and int(r["K"]) == k]
        for v in sorted({r["variant"] for r in sub}):
            pts = sorted((int(r["M"]), float(r["ms"]), float(r["tflops_per_gpu"])) for r in sub if r["variant"] == v)
            style = "--" if v in ("gemm_alone", "nccl+cublas") else "-"
            axes[0][j].plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=v)
            axes[1][j].plot([p[0] for p in pts], [p[2] for p in pts], style, marker="o", label=v)
        axes[0][j].set_title("N=%d K=%d, %s ranks" % (n, k, sub[0]["ranks"]))
        for a, lab in ((axes[0][j], "ms per op"), (axes[1][j], "TFLOPS per GPU")):
            a.set_xscale("log", base=2)
            a.set_xlabel("M")
            a.set_ylabel(lab)
        axes[0][j].set_yscale("log")
        axes[0][j].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print("plot_ag_gemm: wrote " + sys.argv[2])


if __name__ == "__main__":
    main()
