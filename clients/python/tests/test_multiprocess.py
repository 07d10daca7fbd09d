"""The multi-process test: two idgen nodes on one SQLite database and ten
holder processes (tests/holder_process.py, this package's Generator) on
ten worker IDs (two for the nodes, eight for the lease API), with one
holder killed, one paused past its ttl, one evicted, and a uniqueness
oracle over every ID made, the holders' and the nodes' GET /ids. The model
is the Go client's TestMultiProcess (client/internal/holder).

Which process takes a worker ID over is not fixed: the spare, or on a
loaded machine a process whose heartbeats stalled past the 3 s ttl and
whose worker ID the spare took first. The checks hold whoever it is. Every
wait is a bound on a hang (30 s or more), not a timing.

Set IDGEN_MULTIPROCESS_LOGS to a directory to keep the processes' logs and
outputs there.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from dataclasses import dataclass, field
from pathlib import Path

from idgen_client import Client, IdgenError, Layout, LeaseToken, ServiceUnavailableError, TransportError

from .idgen_server import Node, sha256_hex, wait_for

TTL = 3.0
HEARTBEAT = 1.0
TOKEN_NAME = "gens"
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # clients/python
LAYOUT = Layout()
EVENT_CEILING = re.compile(r"previous ceiling (\d+)")


@dataclass
class LeaseLine:
    at: int  # unix ns
    dc: int
    worker: int
    version: int
    floor: int
    ceiling: int


@dataclass
class Batch:
    send: int  # unix ns
    recv: int
    dc: int
    worker: int
    version: int
    ids: list[int]


@dataclass
class Output:
    started: bool = False
    leases: list[LeaseLine] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    refusals: list[tuple[int, str]] = field(default_factory=list)
    closed: str = ""

    def last_lease(self) -> LeaseLine | None:
        return self.leases[-1] if self.leases else None


class Holder:
    """A holder process and its output, parsed as it grows."""

    def __init__(self, directory: str, name: str, url: str, token: str) -> None:
        self.name = name
        self.out_path = os.path.join(directory, f"{name}.out")
        self.log_path = os.path.join(directory, f"{name}.log")
        self._log = open(self.log_path, "ab")
        env = dict(os.environ, IDGEN_HOLDER_TOKEN=token, PYTHONPATH=str(PACKAGE_DIR))
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "tests.holder_process",
                "--url", url, "--holder", name, "--out", self.out_path,
                "--workers", "2-9", "--ttl", str(TTL), "--heartbeat", str(HEARTBEAT),
                "--batch", "50", "--interval", "0.01",
            ],
            cwd=PACKAGE_DIR, env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )
        self._out = Output()
        self._offset = 0

    def read(self) -> Output:
        """The output so far; a last line cut short (by a kill) is left for later."""
        try:
            with open(self.out_path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return self._out
        end = data.rfind(b"\n") + 1
        self._offset += end
        o = self._out
        for raw in data[:end].decode().splitlines():
            f = raw.split()
            kind = f[0]
            if kind == "started":
                o.started = True
            elif kind == "lease":
                o.leases.append(LeaseLine(*map(int, f[1:7])))
            elif kind == "ids":
                n = list(map(int, f[1:]))
                o.batches.append(Batch(n[0], n[1], n[2], n[3], n[4], n[5:]))
            elif kind == "refused":
                o.refusals.append((int(f[1]), f[2]))
            elif kind == "closed":
                o.closed = " ".join(f[2:])
            else:
                raise AssertionError(f"{self.name}: unknown line {raw!r}")
        return o

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def tail(self, n: int = 20) -> str:
        return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-n:])

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                return -9
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


class IDLoad:
    """Draws Snowflake IDs from a node through the Client until stopped
    (at most 10 minutes or 100000 requests)."""

    def __init__(self, node: Node, token: str) -> None:
        self.node = node
        self.draws: list[tuple[list[int], list[LeaseToken]]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._client = Client(node.url, token=token, max_attempts=1, attempt_timeout=5.0)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        end = time.monotonic() + 600
        for _ in range(100_000):
            if self._stop.is_set() or time.monotonic() > end:
                return
            try:
                d = self._client.draw(100)
                self.draws.append((d.ids, d.leases))
            except (ServiceUnavailableError, TransportError):
                pass  # a node that cannot prove its lease says 503: nothing issued
            except IdgenError as e:
                if len(self.errors) < 5:
                    self.errors.append(f"{self.node.name}: {e}")
            self._stop.wait(0.02)

    def stop(self) -> list[tuple[list[int], list[LeaseToken]]]:
        self._stop.set()
        self._thread.join(30)
        self._client.close()
        return self.draws


def max_ts(o: Output, worker: int, version: int) -> int:
    """The highest timestamp a holder issued under a lease, 0 if none."""
    m = 0
    for b in o.batches:
        if b.worker == worker and b.version == version:
            m = max([m] + [LAYOUT.decompose(i).timestamp_ms for i in b.ids])
    return m


class MultiProcessTest(unittest.TestCase):
    def test_kill_pause_evict_with_a_uniqueness_oracle(self) -> None:
        began = time.monotonic()
        keep = os.environ.get("IDGEN_MULTIPROCESS_LOGS")
        if keep:
            d = keep
            os.makedirs(d, exist_ok=True)
        else:
            tmp = tempfile.TemporaryDirectory(prefix="idgen-py-multi-")
            self.addCleanup(tmp.cleanup)
            d = tmp.name
        secret = secrets.token_urlsafe(24)
        tokens = os.path.join(d, "tokens")
        Path(tokens).write_text(f"{TOKEN_NAME} ids,leases {sha256_hex(secret)}\n")
        admin = secrets.token_urlsafe(24)
        dsn = f"sqlite:{os.path.join(d, 'idgen.db')}"
        node_args = [
            "--worker-ids", "0-1", "--lease-api-worker-ids", "2-9",
            "--lease-ttl", "3s", "--heartbeat", "1s",
        ]
        nodes: list[Node] = []
        for name in ("node-a", "node-b"):  # one after the other: the first migrates
            n = Node(d, name, dsn=dsn, tokens_file=tokens, secrets_of={TOKEN_NAME: secret}, admin_token=admin, args=node_args)
            self.addCleanup(n.kill)
            nodes.append(n)
        admin_node = nodes[0]
        loads = [IDLoad(n, secret) for n in nodes]
        self.addCleanup(lambda: [ld.stop() for ld in loads])

        gens: dict[str, Holder] = {}

        def start(name: str, node: Node) -> Holder:
            h = Holder(d, name, node.url, secret)
            self.addCleanup(h.close)
            gens[name] = h
            return h

        def leased(h: Holder) -> LeaseLine:
            def ok() -> bool:
                if h.exited():
                    raise AssertionError(f"{h.name} exited:\n{h.tail()}")
                return h.read().last_lease() is not None

            wait_for(f"{h.name} holding a lease", ok, 60, every=0.1)
            lease = h.read().last_lease()
            assert lease is not None
            return lease

        def event_ceiling(ev: dict[str, object]) -> int:
            m = EVENT_CEILING.search(str(ev["detail"]))
            if m is None:
                raise AssertionError(f"event detail {ev['detail']!r} names no previous ceiling")
            return int(m.group(1))

        def taken_over(holder: str, worker: int, version: int) -> tuple[dict[str, object], int]:
            """The claim that took worker over from holder at version,
            whoever made it, and the previous ceiling it names."""
            frm = f"taken over from api:{TOKEN_NAME}/{holder} at version {version},"
            found: list[dict[str, object]] = []

            def seen() -> bool:
                found[:] = [
                    ev for ev in admin_node.lease_events(kind="takeover", worker=worker)
                    if ev["fencing_version"] == version + 1 and frm in str(ev["detail"])
                ]
                return bool(found)

            wait_for(f"the takeover of worker {worker} from {holder} v{version}", seen, 60, every=0.2)
            return found[0], event_ceiling(found[0])

        def check_floor(takeover: dict[str, object], prev_ceiling: int) -> None:
            """When a holder of ours made the takeover, its floor is the
            previous ceiling + 1 (a node reports it in its log only)."""
            name = str(takeover["holder"]).removeprefix(f"api:{TOKEN_NAME}/")
            holder = gens.get(name)
            if holder is None:
                return
            h: Holder = holder
            got: list[LeaseLine] = []

            def reported() -> bool:
                got[:] = [l for l in h.read().leases if l.worker == takeover["worker"] and l.version == takeover["fencing_version"]]
                return bool(got)

            wait_for(f"{name} reporting its lease", reported, 60, every=0.1)
            self.assertEqual(got[0].floor, prev_ceiling + 1,
                             f"{name} took worker {takeover['worker']} over with floor {got[0].floor}, want {prev_ceiling} + 1")

        for i in range(8):
            start(f"gen-{i}", nodes[i % 2])
        for i in range(8):
            leased(gens[f"gen-{i}"])
        time.sleep(2)
        kills = pauses = evictions = 0

        # SIGKILL gen-2: its worker ID is taken over once the lease
        # expires, starting above its last committed ceiling.
        dead = gens["gen-2"]
        dead_lease = dead.read().last_lease()
        assert dead_lease is not None
        dead.kill9()
        kills += 1
        leased(start("gen-8", nodes[0]))
        take, dead_ceiling = taken_over("gen-2", dead_lease.worker, dead_lease.version)
        dead_max = max_ts(dead.read(), dead_lease.worker, dead_lease.version)
        self.assertLessEqual(dead_max, dead_ceiling,
                             f"kill: gen-2 issued up to {dead_max} on worker {dead_lease.worker}, above the ceiling {dead_ceiling} its successor started above")
        check_floor(take, dead_ceiling)

        # SIGSTOP gen-5 past its lease; its worker ID is taken over;
        # SIGCONT: it issues nothing under its old lease, refuses, and
        # issues again only under a new lease once gen-0 releases one.
        paused = gens["gen-5"]
        paused_lease = paused.read().last_lease()
        assert paused_lease is not None
        paused.signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        leased(start("gen-9", nodes[1]))
        ptake, paused_ceiling = taken_over("gen-5", paused_lease.worker, paused_lease.version)
        check_floor(ptake, paused_ceiling)
        time.sleep(max(0.0, stopped_at + 2 * TTL - time.monotonic()))
        paused.signal(signal.SIGCONT)
        pauses += 1
        resumed_at = time.time_ns()
        time.sleep(2)  # the pool is full: gen-5 refuses
        freed = gens["gen-0"]
        code = freed.stop()
        self.assertEqual(code, 0, f"gen-0 exited {code} after SIGTERM:\n{freed.tail()}")
        new_lease: list[LeaseLine] = []
        old_key = (paused_lease.worker, paused_lease.version)

        def on_new_lease() -> bool:
            lease = paused.read().last_lease()
            if lease is not None and (lease.worker, lease.version) != old_key:
                new_lease[:] = [lease]
            return bool(new_lease)

        wait_for("gen-5 on a new lease", on_new_lease, 60, every=0.1)
        nl = new_lease[0]
        wait_for("gen-5 issuing under its new lease",
                 lambda: any(b.worker == nl.worker and b.version == nl.version and b.send >= resumed_at for b in paused.read().batches),
                 60, every=0.1)
        po = paused.read()
        stale = [b for b in po.batches if (b.worker, b.version) == (paused_lease.worker, paused_lease.version) and b.send >= resumed_at]
        first_new = min(b.send for b in po.batches if (b.worker, b.version) == (nl.worker, nl.version) and b.send >= resumed_at)
        refused = [r for r in po.refusals if resumed_at <= r[0] < first_new]
        self.assertEqual(len(stale), 0, f"pause: gen-5 made {len(stale)} batches under its old lease after SIGCONT")
        self.assertGreater(len(refused), 0, "pause: gen-5 refused nothing between SIGCONT and its new lease")
        paused_max = max_ts(po, paused_lease.worker, paused_lease.version)
        self.assertLessEqual(paused_max, paused_ceiling,
                             f"pause: worker {paused_lease.worker} taken over above ceiling {paused_ceiling}, not above gen-5's {paused_max}")

        # Evict gen-6 through the admin API, fenced on the version it holds
        # now (under load it may have moved since its first).
        evicted = gens["gen-6"]
        ev_lease: list[LeaseLine] = []

        def evict() -> bool:
            lease = evicted.read().last_lease()
            assert lease is not None
            status, doc = admin_node.admin("POST", f"/admin/leases/0/{lease.worker}/evict", {"fencing_version": lease.version, "reason": "test"})
            if status == 200:
                ev_lease[:] = [lease]
                return True
            if status == 409:  # the lease moved on before the eviction: read it again
                return False
            raise AssertionError(f"evict: status {status}: {doc}")

        wait_for("the eviction of gen-6's lease", evict, 60, every=0.2)
        evicted_at = time.time_ns()
        evictions += 1
        el = ev_lease[0]
        def moved_on() -> bool:
            lease = evicted.read().last_lease()
            return lease is not None and (lease.worker, lease.version) != (el.worker, el.version)

        wait_for("gen-6 on a new lease", moved_on, 60, every=0.1)
        wait_for("the lost event of gen-6",
                 lambda: any(e["holder"] == f"api:{TOKEN_NAME}/gen-6" and e["fencing_version"] == el.version
                             for e in admin_node.lease_events(kind="lost", worker=el.worker)),
                 60, every=0.2)
        last_send = max([b.send for b in evicted.read().batches if (b.worker, b.version) == (el.worker, el.version)] + [0])
        # Its local deadline lies less than a ttl after its last successful
        # heartbeat, sent before the eviction: nothing is issued under the
        # evicted lease later, however late the next heartbeat is answered.
        self.assertLess(last_send - evicted_at, TTL * 1e9,
                        f"evict: gen-6 issued under the evicted lease {(last_send - evicted_at) / 1e9:.3f} s after the eviction")

        time.sleep(1)
        # Graceful stop: every holder still running releases its lease with
        # the last timestamp it used.
        for name, h in gens.items():
            if not h.exited():
                code = h.stop()
                self.assertEqual(code, 0, f"{name} exited {code} after SIGTERM:\n{h.tail()}")
        status, doc = admin_node.admin("GET", "/admin/leases")
        self.assertEqual(status, 200, doc)
        assert isinstance(doc, dict)
        rows = {r["worker"]: r for r in doc["leases"] if r["datacenter"] == 0}
        outputs = {name: h.read() for name, h in gens.items()}
        for name, o in outputs.items():
            if name == "gen-2":
                continue  # killed
            lease = o.last_lease()
            assert lease is not None
            self.assertIn(o.closed, ("ok", "lease_lost"), f"{name}: closed {o.closed!r}")
            row = rows.get(lease.worker, {})
            if row.get("fencing_version") != lease.version:
                continue  # leased again since (gen-0's worker ID)
            want = max_ts(o, lease.worker, lease.version) or lease.floor - 1
            if o.closed == "lease_lost":
                # Its heartbeats stalled past the ttl (a loaded machine): the
                # lease expired before the stop and nothing was released, but
                # the ceiling still covers every timestamp it used.
                self.assertGreaterEqual(row["ceiling_ms"], want, f"{name}: ceiling {row['ceiling_ms']} below its last timestamp {want}")
                continue
            self.assertEqual((row["holder"], row["ceiling_ms"]), (None, want),
                             f"{name}: worker {lease.worker} after its release; want free at its last timestamp {want}")

        node_draws = [dr for ld in loads for dr in ld.stop()]
        for ld in loads:
            self.assertEqual(ld.errors, [], "errors of the nodes' load")
        for n in nodes:
            code = n.stop()
            self.assertEqual(code, 0, f"{n.name} exited {code}:\n{n.tail()}")

        # The oracle: every ID unique; the IDs of successive leases of one
        # worker ID in increasing timestamps.
        all_ids: list[int] = []
        spans: dict[tuple[int, int], list[int]] = {}

        def note(worker: int, version: int, ids: list[int]) -> None:
            ts = [LAYOUT.decompose(i).timestamp_ms for i in ids]
            s = spans.setdefault((worker, version), [min(ts), max(ts)])
            s[0], s[1] = min(s[0], *ts), max(s[1], *ts)

        gen_ids = 0
        for name, o in outputs.items():
            for b in o.batches:
                for i in b.ids:
                    p = LAYOUT.decompose(i)
                    self.assertEqual((p.datacenter, p.worker), (b.dc, b.worker), f"{name}: ID {i} in a batch of worker {b.worker}")
                all_ids.extend(b.ids)
                gen_ids += len(b.ids)
                note(b.worker, b.version, b.ids)
        node_ids = 0
        for ids, leases in node_draws:
            all_ids.extend(ids)
            node_ids += len(ids)
            if len(leases) == 1:
                note(leases[0].worker, leases[0].fencing_version, ids)
        dups = len(all_ids) - len(set(all_ids))
        self.assertEqual(dups, 0, f"{dups} duplicate IDs among {len(all_ids)}")
        keys = sorted(spans)
        for prev, cur in zip(keys, keys[1:]):
            if prev[0] == cur[0]:
                self.assertGreater(spans[cur][0], spans[prev][1],
                                   f"worker {cur[0]}: version {cur[1]} issued from {spans[cur][0]}, not above version {prev[1]}'s {spans[prev][1]}")
        self.assertGreater(gen_ids, 0)
        self.assertGreater(node_ids, 0)
        sys.stderr.write(
            f"\nmulti-process: {len(all_ids)} IDs checked ({gen_ids} from 10 holder processes, {node_ids} from 2 nodes), "
            f"{dups} duplicates, {len(keys)} lease tenures in increasing order; {kills} killed, {pauses} paused past the ttl, "
            f"{evictions} evicted; took {time.monotonic() - began:.0f} s\n"
        )


if __name__ == "__main__":
    unittest.main()
