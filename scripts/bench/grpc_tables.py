#!/usr/bin/env python3
"""The tables of scripts/bench/grpc.sh from its results.jsonl.

Usage: grpc_tables.py RESULTS CONNS STREAM_CONNS BATCH > tables.md

Medians of the rounds with [min–max]; the gRPC/HTTP ratio is taken within
each round. Standard library only.
"""
import json, statistics, sys

path, conns, sconns, batch = sys.argv[1:]
runs = [json.loads(line) for line in open(path)]
by = {k: sorted((r for r in runs if r["label"] == k), key=lambda r: r["round"]) for k in ("http", "grpc", "grpc-go", "connect", "stream")}

def spread(vals, f="{:,.0f}"):
    return f"{f.format(statistics.median(vals))} [{f.format(min(vals))}–{f.format(max(vals))}]"

def cpu_per_req(rs):
    v = [r["server"]["cpu_s"] / r["requests"] * 1e6 for r in rs if r.get("server") and r["requests"]]
    return f"{statistics.median(v):.0f}" if v else "–"

def client_cpu_per_req(rs):
    v = [r["client_cpu_s"] / r["requests"] * 1e6 for r in rs if r["requests"]]
    return f"{statistics.median(v):.0f}" if v else "–"

def other_load(rs):
    # Cores used by anything but the server and the load tool, on average
    # over a run: the most of any run.
    v = [(r["machine_busy_s"] - r["client_cpu_s"] - r["server"]["cpu_s"]) / r["duration_s"]
         for r in rs if r.get("machine_busy_s") and r.get("server")]
    return f"{max(v):.2f}" if v else "–"

h, g, gg, c, s = by["http"], by["grpc"], by["grpc-go"], by["connect"], by["stream"]

def ratio(rs):
    return spread([b["requests_per_s"] / a["requests_per_s"] * 100 for a, b in zip(h, rs)], "{:.0f}%")

def cpu_ratio(rs):
    # Server CPU per call against GET /ids's, within each round.
    v = [(b["server"]["cpu_s"] / b["requests"]) / (a["server"]["cpu_s"] / a["requests"])
         for a, b in zip(h, rs) if a.get("server") and b.get("server") and a["requests"] and b["requests"]]
    return spread(v, "{:.2f}×") if v else "–"

print(f"Medians of {len(h)} rounds, [min–max] of the rounds; the ratio is taken within each round.")
print()
print(f"Unary, one ID per call, {conns} connections each, one call in flight on each:")
print()
print("| | req/s | / HTTP | p99 ms | server CPU µs/req | server CPU / HTTP's | load tool CPU µs/req | errors | duplicates | other load (cores) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
rows = [("HTTP `GET /ids?count=1`", h, "", ""), ("gRPC `NextIds` count=1 (h2c, connect-go's client)", g, ratio(g), cpu_ratio(g))]
if gg:  # results from before the grpc-go client have none
    rows.append(("gRPC `NextIds` count=1 (h2c, grpc-go's client)", gg, ratio(gg), cpu_ratio(gg)))
if c:  # results from before the Connect rows have none
    rows.append(("Connect `NextIds` count=1 (HTTP/1.1)", c, ratio(c), cpu_ratio(c)))
for name, rs, rat, crat in rows:
    print(f"| {name} | {spread([r['requests_per_s'] for r in rs])} | {rat} | {spread([r['latency_ms']['p99'] for r in rs], '{:.2f}')} "
          f"| {cpu_per_req(rs)} | {crat} | {client_cpu_per_req(rs)} | {sum(r['errors'] for r in rs)} | {sum(r['duplicates'] for r in rs)} | {other_load(rs)} |")
print()
print(f"Streaming, {sconns} stream(s) of `StreamIds`, batch_size {batch}:")
print()
print("| | IDs/s | % of the cap (4,096,000/s) | messages/s | p99 between messages ms | server CPU s/s | load tool CPU s/s | errors | duplicates | other load (cores) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
cpu = [r["server"]["cpu_s"] / r["duration_s"] for r in s if r.get("server")]
print(f"| gRPC `StreamIds` | {spread([r['ids_per_s'] for r in s])} | {spread([r['ids_per_s'] / 40960 for r in s], '{:.1f}%')} "
      f"| {spread([r['requests_per_s'] for r in s])} | {spread([r['latency_ms']['p99'] for r in s], '{:.2f}')} "
      f"| {statistics.median(cpu):.2f} | {statistics.median([r['client_cpu_s'] / r['duration_s'] for r in s]):.2f} "
      f"| {sum(r['errors'] for r in s)} | {sum(r['duplicates'] for r in s)} | {other_load(s)} |" if s else "| gRPC `StreamIds` | – |")
