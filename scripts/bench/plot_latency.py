#!/usr/bin/env python3
"""Plots the latency curve of scripts/bench/latency.sh.

Usage: plot_latency.py RESULTS.jsonl OUT.png

RESULTS.jsonl holds one idgen-loadtest --json object per line: "max" (the
closed loop that found the maximum rate) and "open-NN" (open loops at NN%
of it). The plot shows p50, p99 and p99.9 of the open loops' latency,
measured from the intended send times, against the load in percent of the
maximum, with the 1 ms budget; several rounds give one point each. Needs
matplotlib (Debian: python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

QUANTILES = [("p50", "p50", "tab:green"), ("p99", "p99", "tab:blue"), ("p99.9", "p99.9", "tab:purple")]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    points = []
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r["label"].startswith("open-"):
                points.append((int(r["label"][5:]), r))
    if not points:
        sys.exit("plot_latency.py: no open-loop runs in " + sys.argv[1])
    points.sort(key=lambda p: p[0])
    fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
    for key, label, color in QUANTILES:
        ax.plot([p for p, _ in points], [r["latency_ms"][key] for _, r in points], marker="o", color=color, label=label)
    ax.axhline(1.0, color="tab:red", linestyle=":", label="budget: p99 under 1 ms")
    ax.set_xlabel("load, % of the maximum rate (open loop, GET /ids?count=1)")
    ax.set_ylabel("latency from the intended send time (ms)")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(sorted({p for p, _ in points}))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("idgen serve on SQLite and the load tool sharing the machine")
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
