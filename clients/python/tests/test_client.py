"""Client against the real idgen: IDs, namespaces, parse, tokens, retries."""

from __future__ import annotations

import socket
import tempfile
import time
import unittest

from idgen_client import (
    ClosedError,
    Client,
    ForbiddenError,
    Layout,
    NotFoundError,
    TooManyError,
    TransportError,
    UnauthorizedError,
)

from .idgen_server import Node


class ClientTest(unittest.TestCase):
    node: Node
    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="idgen-py-client-")
        cls.node = Node(cls.tmp.name, tokens={"app": "ids", "leaser": "leases"})
        status, doc = cls.node.admin("POST", "/admin/namespaces", {"name": "invoices", "mode": "strict"})
        assert status == 201, (status, doc)
        status, doc = cls.node.admin("POST", "/admin/namespaces", {"name": "orders", "start": "1000", "step": 10})
        assert status == 201, (status, doc)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.node.stop()
        cls.tmp.cleanup()

    def client(self, **kw: object) -> Client:
        c = Client(self.node.url, token=self.node.secret["app"], **kw)  # type: ignore[arg-type]
        self.addCleanup(c.close)
        return c

    def test_snowflake_ids_are_ints(self) -> None:
        c = self.client()
        ids = c.ids(500)
        self.assertEqual(len(ids), 500)
        self.assertTrue(all(type(i) is int for i in ids))
        self.assertEqual(ids, sorted(set(ids)), "want 500 distinct increasing IDs")
        # Above 2^53: exact as Python ints, where a JSON number would not be.
        self.assertTrue(all((1 << 53) < i < (1 << 63) for i in ids), ids[:3])
        one = c.next_id()
        self.assertGreater(one, ids[-1])

    def test_draw_carries_the_lease_token(self) -> None:
        d = self.client().draw(3)
        self.assertEqual(len(d.leases), 1, d)
        tok = d.leases[0]
        parts = Layout().decompose(d.ids[0])
        self.assertEqual((tok.datacenter, tok.worker), (parts.datacenter, parts.worker))
        self.assertGreaterEqual(tok.fencing_version, 1)

    def test_counts_above_max_count_are_split(self) -> None:
        c = self.client(max_count=100)
        calls = []
        real = c._nodes[0].call

        def counting(*a: object, **kw: object) -> dict[str, object]:
            calls.append(a[1])
            return real(*a, **kw)  # type: ignore[arg-type]

        c._nodes[0].call = counting  # type: ignore[assignment]
        ids = c.ids(250)
        self.assertEqual(len(set(ids)), 250)
        self.assertEqual(len(calls), 3, f"got {len(calls)} requests, want 3 (100 + 100 + 50): {calls}")

    def test_parse_agrees_with_the_layout(self) -> None:
        c = self.client()
        id_ = c.next_id()
        p = c.parse(id_)
        want = Layout().decompose(id_)
        self.assertEqual(p, want, f"got {p} want {want}")
        with self.assertRaises(ValueError):
            c.parse(-1)

    def test_strict_namespace(self) -> None:
        c = self.client()
        a = c.draw_namespace("invoices", 3)
        b = c.draw_namespace("invoices", 2)
        self.assertEqual(b.ids[0], a.ids[-1] + 1, f"strict: got {a.ids} then {b.ids}, want gap-free")
        self.assertGreater(b.revision, a.revision)
        self.assertEqual([(r.first, r.last) for r in a.ranges], [(a.ids[0], a.ids[-1])])
        self.assertEqual(a.source, "segment")

    def test_buffered_namespace(self) -> None:
        ids = self.client().namespace_ids("orders", 25)
        self.assertEqual(ids, list(range(ids[0], ids[0] + 25)), "one node's buffered IDs are consecutive")
        self.assertGreaterEqual(ids[0], 1000)

    def test_unknown_and_malformed_namespaces(self) -> None:
        c = self.client()
        with self.assertRaises(NotFoundError) as cm:
            c.namespace_ids("no-such-namespace")
        self.assertEqual(cm.exception.status, 404)
        self.assertTrue(cm.exception.request_id)
        for bad in ("", "Orders", "-x", "a" * 65, "a b"):
            with self.subTest(ns=bad), self.assertRaises(ValueError):
                c.namespace_ids(bad)
        for bad_count in (0, -1):
            with self.subTest(count=bad_count), self.assertRaises(ValueError):
                c.ids(bad_count)

    def test_tokens(self) -> None:
        with Client(self.node.url) as anon, self.assertRaises(UnauthorizedError):
            anon.ids(1)
        wrong = "not-the-secret-" + self.node.secret["app"]
        with Client(self.node.url, token=wrong) as c, self.assertRaises(UnauthorizedError) as cm:
            c.ids(1)
        self.assertNotIn(wrong, str(cm.exception))
        with Client(self.node.url, token=self.node.secret["leaser"]) as c, self.assertRaises(ForbiddenError):
            c.ids(1)
        for bad in ("with space", "tab\t", "é"):
            with self.subTest(token=bad), self.assertRaises(ValueError) as ve:
                Client(self.node.url, token=bad)
            self.assertNotIn(bad, str(ve.exception))
        with self.assertRaises(ValueError):
            Client("http://user:pw@127.0.0.1:1")
        self.assertNotIn(self.node.secret["app"], repr(self.client()))

    def test_closed(self) -> None:
        c = Client(self.node.url, token=self.node.secret["app"])
        c.close()
        with self.assertRaises(ClosedError):
            c.ids(1)

    def test_no_answer_is_a_transport_error(self) -> None:
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with Client(f"http://127.0.0.1:{port}", max_attempts=3, backoff_base=0.01) as c:
            with self.assertRaises(TransportError) as cm:
                c.ids(1)
        self.assertIn("after 3 attempts", "".join(getattr(cm.exception, "__notes__", [])))


class RetryAfterTest(unittest.TestCase):
    """A node that lets a caller draw 10 IDs a second, 10 at once (the
    limit is charged per ID), answers the second of two quick draws of 10
    with 429 and Retry-After: 1."""

    node: Node
    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="idgen-py-retry-")
        cls.node = Node(cls.tmp.name, tokens={"app": "ids"}, args=["--rate-limit", "10", "--rate-burst", "10", "--max-count", "10"])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.node.stop()
        cls.tmp.cleanup()

    def test_retry_waits_for_retry_after(self) -> None:
        with Client(self.node.url, token=self.node.secret["app"], backoff_base=0.001, backoff_max=0.01) as c:
            c.ids(10)
            start = time.monotonic()
            c.ids(10)  # 429 first: retried no sooner than Retry-After says
            waited = time.monotonic() - start
        # Retry-After is whole seconds, rounded up: a retry sooner than
        # about a second would have been refused again (and the backoff
        # alone is at most 10 ms). A lower bound: a loaded machine only
        # makes it longer.
        self.assertGreaterEqual(waited, 0.5, f"the retry came after {waited:.3f} s, before Retry-After")

    def test_retry_after_beyond_the_limit_fails_at_once(self) -> None:
        with Client(self.node.url, token=self.node.secret["app"], max_retry_after=0.5) as c:
            try:
                c.ids(10)
            except TooManyError:
                pass  # the bucket may be empty from the other test
            with self.assertRaises(TooManyError) as cm:
                c.ids(10)
        self.assertGreaterEqual(cm.exception.retry_after or 0, 1.0)
        self.assertEqual(cm.exception.status, 429)


if __name__ == "__main__":
    unittest.main()
