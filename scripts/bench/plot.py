#!/usr/bin/env python3
"""Plots the results of scripts/bench/run.sh and prints them as tables.

Usage: plot.py RESULTS.jsonl OUT.png > tables.md

RESULTS.jsonl holds one idgen-loadtest --json object per line, labelled
snowflake, segment, bare-echo (count=1), snowflake-1000 and segment-1000
(count=1000), and rss-* for the memory run. When a point was measured more
than once (run.sh REPEAT>1), the plot shows the median and the tables the
median with the range [min–max]. The figure has four panels: IDs/s and p99
latency against connections, for count=1 (with the bare echo baseline) and
for count=1000. Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

CAP = 4_096_000  # IDs/s of the default layout: 4,096 per millisecond

STYLE = {
    "snowflake": dict(color="tab:blue", marker="o", label="Snowflake"),
    "segment": dict(color="tab:orange", marker="s", label="segment namespace"),
    "bare-echo": dict(color="tab:gray", marker="^", linestyle="--", label="bare echo v4 (constant body)"),
    "snowflake-1000": dict(color="tab:blue", marker="o", label="Snowflake"),
    "segment-1000": dict(color="tab:orange", marker="s", label="segment namespace"),
}


def load(path):
    """Returns {label: {conns: [result, ...]}} and the memory runs."""
    runs = defaultdict(lambda: defaultdict(list))
    rss = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r["label"].startswith("rss-"):
                rss.append(r)
            else:
                runs[r["label"]][r["conns"]].append(r)
    return runs, rss


def metric(r, key):
    if key == "p99":
        return r["latency_ms"]["p99"]
    if key == "others":
        # Cores used on average by everything but the server and the load
        # tool while the run was measured: how quiet the machine was.
        busy = r.get("machine_busy_s")
        if busy is None:
            return None
        server = (r.get("server") or {}).get("cpu_s", 0.0)
        return max(0.0, busy - server - r["client_cpu_s"]) / r["duration_s"]
    if key == "server_us":
        # The server's CPU time per request, in microseconds.
        server = r.get("server")
        if not server or not r["requests"]:
            return None
        return 1e6 * server["cpu_s"] / r["requests"]
    return r[key]


def values(runs, label, c, key):
    v = (metric(r, key) for r in runs.get(label, {}).get(c, []))
    return [x for x in v if x is not None]


def med(runs, label, c, key):
    v = values(runs, label, c, key)
    return statistics.median(v) if v else None


def human(v, _pos=None):
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def plot(runs, out):
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    rows = [
        ("GET /ids?count=1", ["snowflake", "segment", "bare-echo"], "requests/s (= IDs/s)"),
        ("GET /ids?count=1000", ["snowflake-1000", "segment-1000"], "IDs/s"),
    ]
    for row, (title, labels, ylabel) in enumerate(rows):
        tput, lat = axes[row]
        for label in labels:
            if label not in runs:
                continue
            conns = sorted(runs[label])
            key = "requests_per_s" if label == "bare-echo" else "ids_per_s"
            tput.plot(conns, [med(runs, label, c, key) for c in conns], **STYLE[label])
            lat.plot(conns, [med(runs, label, c, "p99") for c in conns], **STYLE[label])
        if row == 1:
            tput.axhline(CAP, color="tab:red", linestyle=":", label="Snowflake layout cap, 4,096,000 IDs/s")
        tput.set_title(f"{title}: throughput")
        tput.set_ylabel(ylabel)
        tput.yaxis.set_major_formatter(FuncFormatter(human))
        tput.set_ylim(bottom=0)
        lat.set_title(f"{title}: p99 latency")
        lat.set_ylabel("p99 latency (ms)")
        lat.set_yscale("log")
        lat.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        lat.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        lat.yaxis.set_minor_formatter(NullFormatter())
        for ax in (tput, lat):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
            ax.set_xlabel("connections (one request in flight each)")
            ax.grid(True, which="major", alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    fig.suptitle("idgen serve on SQLite and the load tool sharing 2 cores (medians)", fontsize=12)
    fig.savefig(out, dpi=110)


def tables(runs, rss):
    def cell(label, c, key, fmt):
        v = values(runs, label, c, key)
        if not v:
            return "–"
        s = fmt(statistics.median(v))
        if len(v) > 1:
            s += f" [{fmt(min(v))}–{fmt(max(v))}]"
        return s

    def rate(v):
        return f"{v:,.0f}"

    def lat(v):
        return f"{v:.2f}"

    def us(v):
        return f"{v:.0f}"

    def others(labels, c):
        v = [x for l in labels for x in values(runs, l, c, "others")]
        return f"{max(v):.2f}" if v else "–"

    def errors(labels, c):
        return sum(sum(values(runs, l, c, "errors")) for l in labels)

    def ratio(a, b, c):
        # Within each round (the two loads ran back to back), then the
        # median and range over the rounds: steadier than a ratio of
        # medians when the machine's speed drifts between rounds.
        x, y = values(runs, a, c, "requests_per_s"), values(runs, b, c, "requests_per_s")
        r = [100 * p / q for p, q in zip(x, y) if q]
        if not r:
            return "–"
        s = f"{statistics.median(r):.0f}%"
        if len(r) > 1:
            s += f" [{min(r):.0f}–{max(r):.0f}%]"
        return s

    conns = sorted({c for v in runs.values() for c in v})
    rounds = max((len(x) for v in runs.values() for x in v.values()), default=0)
    if rounds > 1:
        print(f"Medians of {rounds} rounds, [min–max] of the rounds; ratios are taken within each round.\n")
    print(
        "server CPU µs/req: the server's CPU time (/proc/PID/stat) per request, median of the rounds. "
        "other load: the most cores that anything but the server and the load tool used, on average, "
        "during one of the runs of the row (machine busy time from /proc/stat less both processes' CPU time; "
        "see docs/benchmarks.md on how far to trust it).\n"
    )
    print("GET /ids?count=1: requests/s (one ID each), p99 latency in ms\n")
    print("| conns | Snowflake req/s | bare echo req/s | Snowflake / bare | segment req/s | segment / Snowflake | p99 Snowflake | p99 bare | p99 segment | server CPU µs/req Snowflake, bare, segment | errors | other load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    one = ("snowflake", "bare-echo", "segment")
    for c in conns:
        print(
            f"| {c} | {cell('snowflake', c, 'requests_per_s', rate)} | {cell('bare-echo', c, 'requests_per_s', rate)}"
            f" | {ratio('snowflake', 'bare-echo', c)} | {cell('segment', c, 'requests_per_s', rate)}"
            f" | {ratio('segment', 'snowflake', c)} | {cell('snowflake', c, 'p99', lat)} | {cell('bare-echo', c, 'p99', lat)}"
            f" | {cell('segment', c, 'p99', lat)}"
            f" | {', '.join(cell(l, c, 'server_us', us).split(' [')[0] for l in one)}"
            f" | {errors(one, c)} | {others(one, c)} |"
        )
    print("\nGET /ids?count=1000: IDs/s, p99 latency in ms\n")
    print("| conns | Snowflake IDs/s | % of cap | p99 Snowflake | segment IDs/s | p99 segment | server CPU µs/req Snowflake, segment | errors | other load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in conns:
        sf = med(runs, "snowflake-1000", c, "ids_per_s")
        cap = f"{100 * sf / CAP:.1f}%" if sf else "–"
        print(
            f"| {c} | {cell('snowflake-1000', c, 'ids_per_s', rate)} | {cap} | {cell('snowflake-1000', c, 'p99', lat)}"
            f" | {cell('segment-1000', c, 'ids_per_s', rate)} | {cell('segment-1000', c, 'p99', lat)}"
            f" | {', '.join(cell(l, c, 'server_us', us).split(' [')[0] for l in ('snowflake-1000', 'segment-1000'))}"
            f" | {errors(('snowflake-1000', 'segment-1000'), c)} | {others(('snowflake-1000', 'segment-1000'), c)} |"
        )
    for r in rss:
        s = r.get("server") or {}
        print(
            f"\nMemory: after {r['duration_s']:.0f} s of {r['path']} over {r['conns']} connections "
            f"({r['requests_per_s']:,.0f} req/s, p99 {r['latency_ms']['p99']:.2f} ms, {r['errors']} errors, "
            f"{r['duplicates']} duplicates among {r.get('distinct_ids', 0):,} IDs): "
            f"VmRSS {s.get('rss_kb', 0) / 1024:.1f} MiB, peak (VmHWM) {s.get('rss_hwm_kb', 0) / 1024:.1f} MiB, "
            f"server CPU {s.get('cpu_s', 0):.1f} s, load tool CPU {r['client_cpu_s']:.1f} s."
        )


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    runs, rss = load(sys.argv[1])
    plot(runs, sys.argv[2])
    tables(runs, rss)


if __name__ == "__main__":
    main()
