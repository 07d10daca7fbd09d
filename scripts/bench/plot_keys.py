#!/usr/bin/env python3
"""Plots the results of bench/keybench (keys.csv) as three bar charts.

Usage: plot_keys.py KEYS.csv OUT.png

One panel each for rows inserted per second, the size of the primary key's
index and the WAL written, for idgen's Snowflake IDs (bigint), UUIDv7 and
UUIDv4 (uuid). Needs matplotlib (Debian: python3-matplotlib).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"snowflake": "idgen Snowflake\n(bigint)", "uuidv7": "UUIDv7\n(uuid)", "uuidv4": "UUIDv4\n(uuid)"}
COLORS = {"snowflake": "tab:blue", "uuidv7": "tab:orange", "uuidv4": "tab:red"}
MIB = 1 << 20


def main(src, out):
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{src}: no rows")
    kinds = [r["kind"] for r in rows]
    n = int(rows[0]["rows"])
    panels = [
        ("rows inserted per second", [float(r["rows_per_s"]) / 1000 for r in rows], "thousand rows/s", "{:.0f}k"),
        ("primary key index size", [int(r["index_bytes"]) / MIB for r in rows], "MiB", "{:.0f} MiB"),
        ("WAL written", [int(r["wal_bytes"]) / MIB for r in rows], "MiB", "{:.0f} MiB"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
    for ax, (title, values, unit, fmt) in zip(axes, panels):
        bars = ax.bar([LABELS.get(k, k) for k in kinds], values, color=[COLORS.get(k, "tab:gray") for k in kinds])
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.set_ylim(0, max(values) * 1.18)
        for b, v in zip(bars, values):
            ax.annotate(fmt.format(v), (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom",
                        xytext=(0, 3), textcoords="offset points")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"PostgreSQL: {n / 1e6:g} million rows per key, same writers (bench/keybench)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
