#!/usr/bin/env python3
"""Writes forms.json, the test vectors of idgen's ID forms and of compose.

The Go tests (snowflake, client) and the TypeScript client's tests read
forms.json. It is computed here, apart from either implementation, with
Python's integers: run `python3 generate.py > forms.json` after changing it.
"""
import json
import random
from datetime import datetime, timedelta, timezone

B32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
HEX = "0123456789abcdef"


def digits(v, alphabet):
    out = ""
    while v:
        v, d = divmod(v, len(alphabet))
        out = alphabet[d] + out
    return out


def width(bits, alphabet):
    return len(digits((1 << bits) - 1, alphabet))


def encode(v, bits, alphabet):
    return digits(v, alphabet).rjust(width(bits, alphabet), "0")


EPOCH_MS = 1767225600000  # 2026-01-01T00:00:00Z
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
LAYOUTS = {  # preset name: time, datacenter, worker, sequence bits
    "classic": (41, 5, 5, 12),
    "js53": (41, 0, 5, 7),
    "js53-workers": (40, 0, 6, 7),
    "workers4096": (41, 0, 12, 10),
}

rng = random.Random(20261127)
ids = []
for bits in (63, 53, 41):
    values = {0, 1, 31, 32, 61, 62, (1 << bits) - 1, (1 << bits) - 2, 1 << (bits - 1)}
    if bits > 53:
        values |= {(1 << 53) - 1, 1 << 53}
    while len(values) < 24:
        values.add(rng.randrange(1 << bits))
    for v in sorted(values):
        ids.append({
            "width": bits,
            "id": str(v),
            "decimal": str(v),
            "base32": encode(v, bits, B32),
            "base62": encode(v, bits, B62),
            "hex": encode(v, bits, HEX),
        })

# Strings every reader must refuse, with the format they are read as ("" is
# any form) and the width.
invalid = []
for bits in (63, 53):
    w32, w62, w16 = width(bits, B32), width(bits, B62), width(bits, HEX)
    top = (1 << bits)
    invalid += [
        {"width": bits, "format": "", "text": ""},
        {"width": bits, "format": "decimal", "text": str(top)},
        {"width": bits, "format": "decimal", "text": "-1"},
        {"width": bits, "format": "decimal", "text": "+1"},
        {"width": bits, "format": "decimal", "text": "12a"},
        {"width": bits, "format": "base32", "text": "0" * (w32 - 1)},
        {"width": bits, "format": "base32", "text": "0" * (w32 + 1)},
        {"width": bits, "format": "base32", "text": "U" + "0" * (w32 - 1)},
        {"width": bits, "format": "base32", "text": digits(top, B32)},  # 2^width: one too many
        {"width": bits, "format": "base62", "text": "Z" * (w62 - 1)},
        {"width": bits, "format": "base62", "text": "z" * w62},
        {"width": bits, "format": "base62", "text": "-" * w62},
        {"width": bits, "format": "hex", "text": "f" * w16},
        {"width": bits, "format": "hex", "text": "g" + "0" * (w16 - 1)},
        {"width": bits, "format": "", "text": "!" * w32},
        {"width": bits, "format": "", "text": "z" * w62},
    ]

compose = []
times = ["2026-01-01T00:00:00.000Z", "2026-11-27T12:34:56.789Z", "2040-02-29T23:59:59.999Z"]
for name, (t, d, w, s) in LAYOUTS.items():
    shift = d + w + s
    end_ms = EPOCH_MS + (1 << t)
    last_time = datetime.fromtimestamp((end_ms - 1) / 1000, tz=timezone.utc)
    for ts in times + [last_time.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % ((end_ms - 1) % 1000)]:
        dt = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
        ms = (dt - EPOCH) // timedelta(milliseconds=1)
        first = ms << shift
        last = first | ((1 << shift) - 1)
        compose.append({"layout": name, "time": ts, "first": str(first), "last": str(last)})
    for ts in ["2025-12-31T23:59:59.999Z", datetime.fromtimestamp(end_ms // 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (end_ms % 1000)]:
        compose.append({"layout": name, "time": ts, "error": "out_of_range"})

layouts = {name: {"time": t, "datacenter": d, "worker": w, "sequence": s, "epoch_ms": EPOCH_MS}
           for name, (t, d, w, s) in LAYOUTS.items()}
print(json.dumps({"layouts": layouts, "ids": ids, "invalid": invalid, "compose": compose}, indent=1))
