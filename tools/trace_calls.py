#!/usr/bin/env python3
"""Per-call table of an IRIS_TRACE timeline (internal/device/trace.h), every rank at once.

    python3 tools/trace_calls.py DIR/name     # reads DIR/name.r0.npy, DIR/name.r1.npy, ...

For each call (kernel, call number) and rank: when the kernel's first CTA started, how far
apart its CTAs started (spread: a CTA that could not find a free SM starts late), the two
phase marks and the end, and the gap since the same rank's previous traced kernel ended
(idle GPU: the host launched late, or another kernel ran). The GPUs' clocks are aligned on
the calls' ends (a collective ends on every rank within a flag crossing of the last
arrival): offset of rank r = median over calls of end_r - end_0. Prints a summary, then
the slowest calls with the rank whose start was last and why.
"""
import glob
import sys

import numpy as np

KIND = {1: "LL", 2: "LL2", 3: "BW", 4: "moe-dispatch", 5: "moe-combine", 6: "barrier", 7: "armed", 8: "rmsnorm"}


def load(prefix):
    files = sorted(glob.glob(prefix + ".r*.npy"), key=lambda f: int(f.rsplit(".r", 1)[1].split(".")[0]))
    return [np.load(f) for f in files]


def per_call(recs):
    """{(kernel, call): (start, last_start, mark1, mark2, end, nctas, late_sm)} for one rank."""
    out = {}
    if not len(recs):
        return out
    keys = recs["kernel"].astype(np.int64) << 32 | recs["call"].astype(np.int64)
    order = np.argsort(keys, kind="stable")
    keys, recs = keys[order], recs[order]
    bounds = np.flatnonzero(np.diff(keys)) + 1
    for chunk in np.split(np.arange(len(recs)), bounds):
        r = recs[chunk]
        t = r["t"].astype(np.int64)
        late = int(np.argmax(t[:, 0]))
        out[(int(r["kernel"][0]), int(r["call"][0]))] = (t[:, 0].min(), t[:, 0].max(), t[:, 1].max(), t[:, 2].max(), t[:, 3].max(), len(r),
                                                        int(r["smid"][late]), int(r["nblocks"][0]))
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    prefix = sys.argv[1]
    ranks = [per_call(r) for r in load(prefix)]
    if not ranks or not ranks[0]:
        sys.exit("trace_calls: no records under %s.r*.npy" % prefix)
    common = sorted(set.intersection(*[set(r) for r in ranks]), key=lambda k: ranks[0][k][0])
    W = len(ranks)
    off = [0] * W
    for q in range(1, W):
        off[q] = int(np.median([ranks[q][k][4] - ranks[0][k][4] for k in common]))
    rows = []
    prev_end = [None] * W
    for k in common:
        starts = [ranks[q][k][0] - off[q] for q in range(W)]
        t0 = min(starts)
        per = []
        for q in range(W):
            s, ls, m1, m2, e, n, sm, nb = ranks[q][k]
            gap = (s - prev_end[q]) / 1e3 if prev_end[q] is not None else float("nan")
            prev_end[q] = e
            per.append(dict(start=(s - off[q] - t0) / 1e3, spread=(ls - s) / 1e3, p1=(m1 - s) / 1e3, p2=(m2 - m1) / 1e3, p3=(e - m2) / 1e3, dur=(e - s) / 1e3,
                            gap=gap, ctas=n, nb=nb, late_sm=sm))
        whole = max((ranks[q][k][4] - off[q]) for q in range(W)) - t0
        rows.append((k, whole / 1e3, per))
    print("%s: %d ranks, %d calls traced on every rank; clock offsets vs rank 0 (us): %s" % (prefix, W, len(rows), ", ".join("%.1f" % (o / 1e3) for o in off)))
    by_kind = {}
    for k, whole, per in rows:
        by_kind.setdefault(k[0], []).append((whole, per))
    for kind, lst in by_kind.items():
        w = np.array([x[0] for x in lst])
        spread = np.array([max(p["spread"] for p in x[1]) for x in lst])
        lag = np.array([max(p["start"] for p in x[1]) for x in lst])
        slow = w > 3 * np.median(w)
        print("  %-12s calls %d (%d CTAs): per call (first start to last end over ranks) median %.1f  p99 %.1f  max %.1f us; "
              "slow (>3x median) %d; CTA start spread median %.2f max %.1f us; last rank's start lag median %.1f max %.1f us"
              % (KIND.get(kind, kind), len(lst), lst[0][1][0]["nb"], np.median(w), np.percentile(w, 99), w.max(), slow.sum(), np.median(spread),
                 spread.max(), np.median(lag), lag.max()))
        if slow.any():
            s_spread, s_lag = spread[slow], lag[slow]
            print("    slow calls: CTA start spread median %.1f us (%d of %d above 10 us); last rank's start lag median %.1f us (%d above 10 us)"
                  % (np.median(s_spread), (s_spread > 10).sum(), slow.sum(), np.median(s_lag), (s_lag > 10).sum()))
    rows.sort(key=lambda x: -x[1])
    print("  slowest calls (us; per rank: start lag after the first rank | CTA start spread | phases | gap since its previous kernel):")
    for k, whole, per in rows[: int(sys.argv[2]) if len(sys.argv) > 2 else 8]:
        print("   %s call %d: %.1f us" % (KIND.get(k[0], k[0]), k[1], whole))
        for q, p in enumerate(per):
            print("     r%d start +%.1f | spread %.1f (last CTA on SM %d) | %.1f / %.1f / %.1f | gap %.1f" % (q, p["start"], p["spread"], p["late_sm"], p["p1"],
                                                                                                    p["p2"], p["p3"], p["gap"]))


if __name__ == "__main__":
    main()
