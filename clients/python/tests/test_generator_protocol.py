"""The Generator against a scripted lease API on loopback: what a holder
sends and does where the real server cannot be made to answer so (a
heartbeat's 503, a grant of another ttl, Retry-After on an acquire), with
the monotonic clock in the test's hands."""

from __future__ import annotations

import json
import threading
import time
import unittest
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from idgen_client import BadResponseError, Generator, LeaseExpiredError, RefusedError

from .idgen_server import wait_for

Answer = tuple[int, dict[str, object], dict[str, str]]
LAYOUT: dict[str, object] = {"time_bits": 41, "datacenter_bits": 5, "worker_bits": 5, "sequence_bits": 12, "epoch_ms": 1767225600000}
TTL_MS = 3000
SECRET = "s" * 43


class Clock:
    """The wall clock of the system moved by wall_shift_ms, and the
    monotonic clock moved by mono_shift; frozen, the monotonic clock moves
    only when the test moves it (the lease thread's schedule runs on it)."""

    def __init__(self) -> None:
        self.wall_shift_ms = 0
        self.mono_shift = 0.0
        self.frozen: float | None = None

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.wall_shift_ms

    def monotonic(self) -> float:
        return (self.frozen if self.frozen is not None else time.monotonic()) + self.mono_shift

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class FakeLeaseAPI:
    """A lease API that grants worker 3 and records what it was sent;
    ``acquire`` and ``heartbeat`` decide each answer: (status, body,
    headers), or None to drop the connection."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, str, dict[str, object]]] = []
        self.version = 0
        self.acquire: Callable[[dict[str, object]], Answer | None] = self.grant
        self.heartbeat: Callable[[dict[str, object]], Answer | None] = self.extend
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def answer(self, got: Answer | None) -> None:
                if got is None:
                    self.close_connection = True
                    return
                status, body, headers = got
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if status < 400 else "application/problem+json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                not_found: Answer = (404, {"code": "not_found"}, {})
                self.answer((200, LAYOUT, {}) if self.path == "/v1/leases/layout" else not_found)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append((time.monotonic(), self.path, body))
                if self.path == "/v1/leases":
                    self.answer(api.acquire(body))
                elif self.path.endswith("/heartbeat"):
                    self.answer(api.heartbeat(body))
                elif self.path.endswith("/release"):
                    self.answer((200, {"ceiling_ms": 1}, {}))
                else:
                    self.answer((404, {"code": "not_found"}, {}))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def grant(self, body: dict[str, object]) -> Answer:
        self.version += 1
        now = time.time_ns() // 1_000_000
        ceiling = min(int(str(body["ceiling_ms"])), now + TTL_MS + 5000)
        return 201, {
            "datacenter": 0, "worker": 3, "fencing_version": self.version, "holder": f"api:t/{body['holder']}",
            "lease_secret": SECRET, "floor_ms": 1, "ceiling_ms": ceiling, "previous_holder": None,
            "ttl_ms": body["ttl_ms"], "heartbeat_ms": 1000, "margin_ms": 300, "max_clock_offset_ms": 5000,
            "max_backward_wait_ms": 10, "expires_at_ms": now + TTL_MS, "db_time_ms": now, "layout": LAYOUT,
        }, {}

    def extend(self, body: dict[str, object]) -> Answer:
        now = time.time_ns() // 1_000_000
        return 200, {
            "fencing_version": body["fencing_version"], "ceiling_ms": min(int(str(body["ceiling_ms"])), now + TTL_MS + 5000),
            "ttl_ms": body["ttl_ms"], "expires_at_ms": now + TTL_MS, "db_time_ms": now,
        }, {}

    def sent(self, kind: str) -> list[tuple[float, dict[str, object]]]:
        return [(t, b) for t, p, b in list(self.requests) if p.endswith(kind)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class ProtocolTest(unittest.TestCase):
    def setUp(self) -> None:
        self.api = FakeLeaseAPI()
        self.addCleanup(self.api.close)
        self.clock = Clock()

    def gen(self, **kw: object) -> Generator:
        g = Generator(self.api.url, token="t", ttl=TTL_MS / 1000, clock=self.clock, start_timeout=30.0, **kw)  # type: ignore[arg-type]
        self.addCleanup(g.close)
        return g

    def step(self, g: Generator, seconds: float, kind: str) -> None:
        """Moves the monotonic clock on and waits for the lease thread to
        send the request now due."""
        n = len(self.api.sent(kind))
        self.clock.mono_shift += seconds
        g._wake.set()
        wait_for(f"a {kind} request", lambda: len(self.api.sent(kind)) > n, 30)

    def test_a_failed_heartbeat_leaves_issuing_until_the_deadline(self) -> None:
        self.clock.frozen = time.monotonic()
        g = self.gen()
        g.next_id()
        unavailable: Answer = (503, {"code": "unavailable"}, {"Retry-After": "1"})
        self.api.heartbeat = lambda body: unavailable
        self.step(g, 1.0, "/heartbeat")  # due after the heartbeat interval: answered 503
        wait_for("the failure counted", lambda: g.status().heartbeat_failures >= 1, 30)
        g.next_id()  # 1 s of the 2.7 s before the deadline has passed: still issuing
        self.clock.mono_shift += 1.8  # 2.8 s: past the deadline (ttl 3 s - margin 0.3 s)
        with self.assertRaises(LeaseExpiredError):
            g.next_id()
        self.api.heartbeat = self.api.extend
        self.step(g, 0.0, "/heartbeat")  # the retry is due by now (its backoff is at most 1 s)
        wait_for("issuing again after a successful heartbeat", lambda: _issues(g), 30)

    def test_the_ceiling_proposal_is_bounded_by_database_time(self) -> None:
        g = self.gen()
        self.clock.wall_shift_ms = 60_000  # the wall clock jumps a minute ahead between heartbeats
        before = time.time_ns() // 1_000_000
        self.step(g, 1.0, "/heartbeat")
        proposal = int(str(self.api.sent("/heartbeat")[-1][1]["ceiling_ms"]))
        # The expected database time (moved on by the 1 s step of the
        # monotonic clock) + ttl + the allowed offset (5 s), not the clock +
        # ttl (63 s ahead); 5 s of slack for a slow machine.
        bound = before + 1000 + TTL_MS + 5000
        self.assertLess(proposal, bound + 5000, f"proposal {proposal} runs {proposal - before} ms ahead, want about {bound - before}")
        self.assertLess(proposal, self.clock.wall_ms())
        wait_for("the offset measured", lambda: (g.status().clock_offset_ms or 0) < -50_000, 30)
        with self.assertRaises(RefusedError):
            g.next_id()

    def test_an_acquire_waits_for_retry_after(self) -> None:
        answers: list[Answer] = [(409, {"code": "no_worker_available"}, {"Retry-After": "1"})]
        self.api.acquire = lambda body: answers.pop() if answers else self.api.grant(body)
        self.gen()
        (t1, b1), (t2, b2) = self.api.sent("/v1/leases")[:2]
        self.assertGreaterEqual(t2 - t1, 0.9, f"the second acquire came {t2 - t1:.3f} s after a Retry-After of 1 s")
        self.assertEqual(b1["holder"], b2["holder"])

    def test_an_acquire_whose_answer_was_lost_is_sent_again(self) -> None:
        dropped: list[Answer | None] = [None]
        self.api.acquire = lambda body: dropped.pop() if dropped else self.api.grant(body)
        g = self.gen(holder="host/1/ab")
        sent = self.api.sent("/v1/leases")
        self.assertEqual([b["holder"] for _, b in sent], ["host/1/ab", "host/1/ab"])
        g.next_id()

    def test_a_grant_of_another_ttl_is_refused(self) -> None:
        def other_ttl(body: dict[str, object]) -> Answer:
            status, grant, h = self.api.grant(body)
            grant["ttl_ms"] = 60_000
            return status, grant, h

        self.api.acquire = other_ttl
        with self.assertRaises(BadResponseError):
            self.gen()

    def test_release_says_exactly_one_of_the_two(self) -> None:
        g = self.gen()
        g.close()
        g2 = self.gen()
        id_ = g2.next_id()
        g2.close()
        bodies = [b for _, b in self.api.sent("/release")]
        self.assertEqual(len(bodies), 2)
        self.assertEqual((bodies[0].get("none_issued"), "last_timestamp_ms" in bodies[0]), (True, False))
        self.assertEqual((bodies[1].get("last_timestamp_ms"), "none_issued" in bodies[1]), (g2.layout.decompose(id_).timestamp_ms, False))
        self.assertTrue(all(b["lease_secret"] == SECRET for b in bodies))


def _issues(g: Generator) -> bool:
    try:
        g.next_id()
        return True
    except RefusedError:
        return False


if __name__ == "__main__":
    unittest.main()
