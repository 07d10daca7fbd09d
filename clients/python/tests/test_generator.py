"""Generator against the real idgen: docs/leases.md end to end."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
import unittest

from idgen_client import (
    BelowFloorError,
    ClockBackwardError,
    ClockOffsetError,
    ForbiddenError,
    Generator,
    GeneratorClosedError,
    InvalidError,
    Layout,
    LeaseExpiredError,
    NoLeaseError,
    NotFoundError,
    NoWorkerAvailableError,
    RefusedError,
    UnauthorizedError,
)

from .idgen_server import Node, wait_for

TTL = 3.0  # the lease API's shortest by default; heartbeats every second


class ShiftedClock:
    """The system's clocks, each moved by an offset a test sets."""

    def __init__(self) -> None:
        self.wall_shift_ms = 0
        self.mono_shift = 0.0

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.wall_shift_ms

    def monotonic(self) -> float:
        return time.monotonic() + self.mono_shift

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def issue_until(g: Generator, what: str, timeout: float = 30.0) -> int:
    """The first ID g issues, trying (bounded) while it refuses."""
    got: list[int] = []

    def ok() -> bool:
        try:
            got.append(g.next_id())
            return True
        except RefusedError:
            return False

    wait_for(what, ok, timeout)
    return got[0]


class GeneratorTest(unittest.TestCase):
    node: Node
    tmp: tempfile.TemporaryDirectory[str]
    lay = Layout()

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="idgen-py-gen-")
        cls.node = Node(
            cls.tmp.name,
            tokens={"gen": "leases", "app": "ids"},
            args=[
                "--worker-ids", "0-1",
                "--lease-api-worker-ids", "2-31",
                "--lease-api-acquire-rate", "100",
                "--lease-api-acquire-burst", "100",
                "--lease-api-max-leases", "30",
            ],
        )

    @classmethod
    def tearDownClass(cls) -> None:
        cls.node.stop()
        cls.tmp.cleanup()

    def gen(self, workers: tuple[int, int], **kw: object) -> Generator:
        kw.setdefault("ttl", TTL)
        g = Generator(self.node.url, token=self.node.secret["gen"], workers=workers, **kw)  # type: ignore[arg-type]
        self.addCleanup(g.close)
        return g

    def ts(self, id_: int) -> int:
        return self.lay.decompose(id_).timestamp_ms

    def test_ids_within_the_fence_and_release_with_the_last_timestamp(self) -> None:
        g = self.gen((2, 3))
        st = g.status()
        self.assertTrue(st.held and st.lease is not None, st)
        assert st.lease is not None and st.floor_ms is not None and st.ceiling_ms is not None
        self.assertIn(st.lease.worker, (2, 3))
        ids = g.next_ids(20000)
        self.assertEqual(ids, sorted(set(ids)), "want 20000 distinct increasing IDs")
        more: list[int] = []
        lock = threading.Lock()

        def draw() -> None:
            for _ in range(3000):
                i = g.next_id()
                with lock:
                    more.append(i)

        threads = [threading.Thread(target=draw) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(len(set(ids + more)), 32000, "duplicates among IDs issued from 4 threads")
        ceiling = g.status().ceiling_ms
        assert ceiling is not None
        for i in ids + more:
            p = self.lay.decompose(i)
            self.assertEqual((p.datacenter, p.worker), (0, st.lease.worker))
            self.assertTrue(st.floor_ms <= p.timestamp_ms <= ceiling, f"timestamp {p.timestamp_ms} outside {st.floor_ms}..{ceiling}")
        last = max(self.ts(i) for i in ids + more)
        g.close()
        row = self.node.lease_row(0, st.lease.worker)
        self.assertIsNone(row["holder"], row)
        self.assertEqual(row["ceiling_ms"], last, f"released ceiling {row['ceiling_ms']}, want the last timestamp {last}")
        with self.assertRaises(GeneratorClosedError):
            g.next_id()
        self.assertEqual(g.status().releases, 1)

    def test_release_none_issued(self) -> None:
        g = self.gen((4, 4))
        st = g.status()
        assert st.floor_ms is not None
        g.close()
        row = self.node.lease_row(0, 4)
        self.assertIsNone(row["holder"], row)
        self.assertEqual(row["ceiling_ms"], st.floor_ms - 1, f"got {row['ceiling_ms']} want floor - 1 = {st.floor_ms - 1}")

    def test_deadline_on_the_monotonic_clock(self) -> None:
        clock = ShiftedClock()
        g = self.gen((5, 5), clock=clock)
        before = g.next_id()
        version = g.status().lease
        # A pause past the lease, as the monotonic clock sees it; the wall
        # clock (and the database) saw nothing.
        clock.mono_shift += TTL
        with self.assertRaises(LeaseExpiredError):
            g.next_id()
        with self.assertRaises(LeaseExpiredError):
            g.ready()
        # The next heartbeat, due on the monotonic clock, renews the lease
        # (still alive in the database): issuing resumes under it.
        after = issue_until(g, "issuing after a heartbeat")
        self.assertGreater(after, before)
        self.assertEqual(g.status().lease, version)

    def test_clock_off_the_database_refuses(self) -> None:
        clock = ShiftedClock()
        clock.wall_shift_ms = 10_000  # 10 s ahead; the server allows 5 s
        g = self.gen((6, 6), clock=clock)
        with self.assertRaises(ClockOffsetError):
            g.next_id()
        off = g.status().clock_offset_ms
        assert off is not None
        self.assertLess(off, -9000, f"offset {off} ms, want about -10000")
        clock.wall_shift_ms = 0
        issue_until(g, "issuing once a heartbeat measures the clock back in line")

    def test_clock_steps_back(self) -> None:
        clock = ShiftedClock()
        g = self.gen((7, 7), clock=clock)
        ids = g.next_ids(100)
        clock.wall_shift_ms = -5  # within max_backward_wait (10 ms): waited out
        ids += g.next_ids(100)
        clock.wall_shift_ms = -2000  # beyond it: refused
        with self.assertRaises(ClockBackwardError) as cm:
            g.next_ids(10)
        self.assertEqual(cm.exception.ids, [])
        with self.assertRaises(ClockBackwardError):
            g.ready()
        clock.wall_shift_ms = 0
        ids += g.next_ids(100)
        self.assertEqual(ids, sorted(set(ids)), "IDs must keep increasing across the steps back")

    def test_eviction_stops_the_lease_and_a_new_one_starts_above_it(self) -> None:
        g = self.gen((8, 8))
        old = g.status().lease
        assert old is not None
        before, _ = g.next_ids_fenced(50)
        status, doc = self.node.admin("POST", f"/admin/leases/0/8/evict", {"fencing_version": old.fencing_version, "reason": "test"})
        self.assertEqual(status, 200, doc)
        seen: dict[int, list[int]] = {}
        stop = time.monotonic() + 30
        while time.monotonic() < stop:
            try:
                ids, tok = g.next_ids_fenced(10)
            except RefusedError as e:
                if e.lease is not None and e.ids:
                    seen.setdefault(e.lease.fencing_version, []).extend(e.ids)
                time.sleep(0.01)
                continue
            seen.setdefault(tok.fencing_version, []).extend(ids)
            if tok.fencing_version != old.fencing_version:
                break
        self.assertEqual(len(seen), 2, f"want IDs of the old and a new lease, got versions {sorted(seen)}")
        new_version = max(seen)
        self.assertGreater(new_version, old.fencing_version)
        old_ids = before + seen.get(old.fencing_version, [])
        top_old = max(self.ts(i) for i in old_ids)
        low_new = min(self.ts(i) for i in seen[new_version])
        self.assertGreater(low_new, top_old, "the new lease's IDs must start above the evicted one's")
        self.assertGreaterEqual(g.status().lost, 1)
        lost = self.node.lease_events(kind="lost", worker=8)
        self.assertTrue(any(e["fencing_version"] == old.fencing_version for e in lost), lost)

    def test_keeps_issuing_until_the_deadline_while_the_node_is_stopped(self) -> None:
        g = self.gen((9, 9))
        g.next_id()
        self.node.signal(signal.SIGSTOP)
        try:
            # No heartbeat can land: the generator issues until its local
            # deadline, then refuses.
            wait_for("a refusal at the deadline", lambda: _refused_with(g, LeaseExpiredError), 30)
            refused_at = time.monotonic()
            self.assertLessEqual(g.status().valid_for, 0.0)
        finally:
            self.node.signal(signal.SIGCONT)
        self.assertGreater(refused_at, 0)
        issue_until(g, "issuing once the node is back")

    def test_a_full_pool_then_a_free_worker(self) -> None:
        first = self.gen((21, 21))
        with self.assertRaises(NoLeaseError) as cm:
            self.gen((21, 21), start_timeout=2.0)
        self.assertIsInstance(cm.exception.__cause__, NoWorkerAvailableError)
        second = self.gen((21, 21), wait=False)
        with self.assertRaises(NoLeaseError):
            second.next_id()
        last = max(self.ts(i) for i in first.next_ids(100))
        first.close()
        got = issue_until(second, "the second generator on the released worker ID")
        self.assertGreater(self.ts(got), last)

    def test_an_empty_grant_waits_for_its_floor(self) -> None:
        # A lease of worker 20 with a long ttl, evicted: its ceiling, a few
        # seconds ahead of the clock, stays.
        status, doc, _ = self.node.request(
            "POST", "/v1/leases", {"holder": "blocker", "workers": {"min": 20, "max": 20}, "ttl_ms": 8000},
            token=self.node.secret["gen"],
        )
        self.assertEqual(status, 201, doc)
        assert isinstance(doc, dict)
        status, ev = self.node.admin("POST", "/admin/leases/0/20/evict", {})
        self.assertEqual(status, 200, ev)
        prev_ceiling = doc["ceiling_ms"]
        assert isinstance(prev_ceiling, int)
        # By default a floor more than 5 s ahead is not taken.
        with self.assertRaises(NoLeaseError):
            self.gen((20, 20), start_timeout=1.5)
        g = self.gen((20, 20), max_floor_ahead=None)
        st = g.status()
        self.assertEqual(st.floor_ms, prev_ceiling + 1)
        with self.assertRaises((BelowFloorError, RefusedError)):
            g.next_id()
        got = issue_until(g, "the first ID once the clock passes the floor")
        self.assertGreater(self.ts(got), prev_ceiling)

    def test_refusals_at_start(self) -> None:
        cases: list[tuple[dict[str, object], type[Exception]]] = [
            ({"token": self.node.secret["app"]}, ForbiddenError),
            ({"token": "unknown-token"}, UnauthorizedError),
            ({"workers": (0, 1)}, InvalidError),  # the nodes' worker IDs
            ({"ttl": 1.0}, InvalidError),  # below the server's 3 s
        ]
        for kw, exc in cases:
            with self.subTest(kw=kw), self.assertRaises(exc):
                args: dict[str, object] = {"token": self.node.secret["gen"], "workers": (2, 31), "ttl": TTL, "start_timeout": 10.0}
                args.update(kw)
                Generator(self.node.url, **args)  # type: ignore[arg-type]
        bad: list[dict[str, object]] = [
            {"holder": "with space"},
            {"holder": "x" * 187},
            {"ttl": 0.5},
            {"ttl": 3.0005},
            {"heartbeat": 2.0},
            {"margin": 1.5},
            {"workers": (3, 2)},
            {"token": ""},
        ]
        for kw in bad:
            with self.subTest(kw=kw), self.assertRaises(ValueError):
                args = {"token": self.node.secret["gen"], "ttl": TTL}
                args.update(kw)
                Generator(self.node.url, **args)  # type: ignore[arg-type]

    def test_lease_api_off(self) -> None:
        with tempfile.TemporaryDirectory(prefix="idgen-py-off-") as d:
            node = Node(d, "off", tokens={"gen": "leases"})  # no lease API pool
            try:
                with self.assertRaises(NotFoundError):
                    Generator(node.url, token=node.secret["gen"], ttl=TTL, start_timeout=10.0)
            finally:
                node.stop()

    def test_a_forked_child_neither_issues_nor_releases(self) -> None:
        g = self.gen((22, 22))
        g.next_id()
        lease = g.status().lease
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                try:
                    g.next_id()
                    os.write(w, b"issued\n")
                except GeneratorClosedError:
                    os.write(w, b"refused\n")
                g.close()  # must leave the parent's lease alone
            except BaseException as e:
                os.write(w, f"error {e!r}\n".encode())
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            said = f.read().strip()
        _, status = os.waitpid(pid, 0)
        self.assertEqual((said, status), ("refused", 0))
        row = self.node.lease_row(0, 22)
        assert lease is not None
        self.assertEqual((row["holder"] is not None, row["fencing_version"]), (True, lease.fencing_version), row)
        g.next_ids(10)
        self.assertEqual(g.status().lease, lease)


def _refused_with(g: Generator, exc: type[Exception]) -> bool:
    try:
        g.next_id()
        return False
    except exc:
        return True
    except RefusedError:
        return False


if __name__ == "__main__":
    unittest.main()
