"""A lease holder for the multi-process test: a process that makes
Snowflake IDs with idgen_client.Generator and writes every batch it got,
every refusal and every change of its lease to its output, one line each
(the format of the Go client's helper, client/internal/holder):

    started <unix ns>
    lease <unix ns> <datacenter> <worker> <fencing version> <floor ms> <ceiling ms>
    ids <send unix ns> <recv unix ns> <datacenter> <worker> <fencing version> <id> <id> ...
    refused <unix ns> <reason>
    closed <unix ns> <ok | lease_lost | error text>

A batch comes from one lease (the generator issues a batch under one
lock), so every ids line names the lease its IDs were made under; the IDs
a refused batch issued before its refusal are written too. It runs until
SIGTERM or SIGINT, then closes the generator (releasing the lease with the
last timestamp used) and exits 0; "closed lease_lost" says the lease was
gone by then (expired, evicted or taken over), so nothing was released.
The generator's log goes to stderr. The token comes from the environment
(IDGEN_HOLDER_TOKEN), so that no process listing shows it.

    python3 -m tests.holder_process --url URL --holder NAME --out FILE [--workers A-B] ...
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time

from idgen_client import Generator, LeaseToken, RefusedError


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--holder", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", default="")
    ap.add_argument("--ttl", type=float, default=3.0)
    ap.add_argument("--heartbeat", type=float, default=None)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--interval", type=float, default=0.005)
    ap.add_argument("--start-timeout", type=float, default=60.0)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")

    # One write per line, unbuffered: a process killed with SIGKILL loses
    # no line it wrote, and a line cut short is the last one.
    fd = os.open(a.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def emit(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    workers = None
    if a.workers:
        lo, _, hi = a.workers.partition("-")
        workers = (int(lo), int(hi))
    g = Generator(
        a.url,
        token=os.environ["IDGEN_HOLDER_TOKEN"],
        workers=workers,
        ttl=a.ttl,
        heartbeat=a.heartbeat,
        holder=a.holder,
        start_timeout=a.start_timeout,
    )
    emit(f"started {time.time_ns()}")
    last: LeaseToken | None = None
    while not stop:
        st = g.status()
        if st.lease is not None and st.lease != last:
            l = st.lease
            emit(f"lease {time.time_ns()} {l.datacenter} {l.worker} {l.fencing_version} {st.floor_ms} {st.ceiling_ms}")
            last = st.lease
        send = time.time_ns()
        err: RefusedError | None = None
        try:
            ids, tok = g.next_ids_fenced(a.batch)
        except RefusedError as e:
            err, ids, tok = e, e.ids, e.lease  # type: ignore[assignment]
        recv = time.time_ns()
        if ids and tok is not None:
            emit(f"ids {send} {recv} {tok.datacenter} {tok.worker} {tok.fencing_version} " + " ".join(map(str, ids)))
        if err is not None:
            emit(f"refused {time.time_ns()} {err.reason}")
            time.sleep(0.02)
            continue
        time.sleep(a.interval)
    try:
        before = g.status()
        if before.lease is not None and before.lease != last:  # changed since the last batch
            l = before.lease
            emit(f"lease {time.time_ns()} {l.datacenter} {l.worker} {l.fencing_version} {before.floor_ms} {before.ceiling_ms}")
        g.close(timeout=10.0)
        released = g.status().releases > before.releases
        emit(f"closed {time.time_ns()} " + ("lease_lost" if before.held and not released else "ok"))
    except Exception as e:  # reported to the test, which decides
        emit(f"closed {time.time_ns()} " + str(e).replace("\n", " "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
