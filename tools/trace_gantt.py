#!/usr/bin/env python3
"""Gantt chart of an iris_ag_gemm trace (iris_ag_gemm_trace_write's Chrome trace JSON).

    python3 tools/trace_gantt.py trace.json.0 [trace.json.1 ...] out.png

One row per CTA (fetchers at the bottom), one bar per event: fetch (blue), wait (red),
tile (green). With the TMA core a GEMM CTA's row also holds its producer's flag waits
(upper half) and, with side fetch, its idle warps' fetches (lower third). Several files (one per rank) become one panel each. The same JSON opens in
chrome://tracing or ui.perfetto.dev.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"fetch": "#1f77b4", "wait": "#d62728", "tile": "#2ca02c"}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    files, out = sys.argv[1:-1], sys.argv[-1]
    fig, axes = plt.subplots(len(files), 1, figsize=(12, 3.2 * len(files)), squeeze=False)
    for ax, path in zip(axes[:, 0], files):
        with open(path) as f:
            doc = json.load(f)
        info = doc.get("otherData", {})
        bars = {}
        for e in doc["traceEvents"]:
            bars.setdefault(e["name"], []).append((e["tid"], e["ts"], e["dur"]))
        slots = max(1, info.get("fetchers", 0) + info.get("gemm_ctas", 0))
        # rows (tid) come in three layers per CTA slot: the slot's fetches or tiles, the TMA
        # producer's flag waits, the side fetches of its idle warps; draw them on the CTA's
        # line: full height, upper half, lower third
        layer_h = [(0.9, 0.0), (0.45, 0.22), (0.3, -0.3)]
        for name, evs in bars.items():
            for tid, ts, dur in evs:
                h, dy = layer_h[min(tid // slots, 2)]
                ax.barh(tid % slots + dy, max(dur, 0.05), left=ts, height=h, color=COLORS.get(name, "gray"), linewidth=0)
        for name, col in COLORS.items():
            ax.barh(-10, 0, color=col, label=name)
        ax.set_ylim(-1, info.get("fetchers", 0) + info.get("gemm_ctas", 0) + 1)
        ax.axhline(info.get("fetchers", 0) - 0.5, color="black", linewidth=0.5)
        ax.set_xlabel("µs since the first event")
        ax.set_ylabel("CTA (fetchers below the line)")
        ax.set_title("rank %s, path %s: %s fetcher and %s GEMM CTAs" % (info.get("rank"), info.get("path"), info.get("fetchers"), info.get("gemm_ctas")))
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("trace_gantt: wrote " + out)


if __name__ == "__main__":
    main()
