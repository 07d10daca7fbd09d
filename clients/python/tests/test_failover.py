"""Client over several nodes: it moves on past a node that refuses
connections and one that answers 503, at once, and keeps to the node that
answered."""

from __future__ import annotations

import http.server
import socket
import tempfile
import threading
import unittest

from idgen_client import Client, NotFoundError

from .idgen_server import Node


def dead_url() -> str:
    """A loopback port nobody listens on any more: a node killed."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


class Draining(http.server.ThreadingHTTPServer):
    """Answers every request 503 with a long Retry-After, as a node that
    cannot prove its lease; counts them."""

    def __init__(self) -> None:
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                body = b'{"status":503,"code":"unavailable","title":"Service unavailable"}'
                self.send_response(503)
                self.send_header("Content-Type", "application/problem+json")
                self.send_header("Retry-After", "30")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class FailoverTest(unittest.TestCase):
    node: Node
    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="idgen-py-failover-")
        cls.node = Node(cls.tmp.name, tokens={"app": "ids"})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.node.stop()
        cls.tmp.cleanup()

    def setUp(self) -> None:
        self.draining = Draining()
        t = threading.Thread(target=self.draining.serve_forever, daemon=True)
        t.start()

        def stop() -> None:
            self.draining.shutdown()
            self.draining.server_close()
            t.join()

        self.addCleanup(stop)

    def test_moves_on_at_once_and_stays(self) -> None:
        # max_retry_after 1: had the client retried the 503 node instead of
        # moving on, its Retry-After of 30 s would end the call at once.
        c = Client([dead_url(), self.draining.url, self.node.url], token=self.node.secret["app"], max_retry_after=1)
        self.addCleanup(c.close)
        ids = c.ids(3)
        self.assertEqual(len(ids), 3)
        self.assertEqual(c.base_url, self.node.url)
        self.assertEqual(self.draining.requests, 1)
        c.next_id()
        self.assertEqual(self.draining.requests, 1, "the next call went to the node that answered")

    def test_refusal_is_not_moved_on(self) -> None:
        c = Client([self.node.url, self.draining.url], token=self.node.secret["app"])
        self.addCleanup(c.close)
        with self.assertRaises(NotFoundError):
            c.namespace_ids("nope", 1)
        self.assertEqual(c.base_url, self.node.url)
        self.assertEqual(self.draining.requests, 0)

    def test_urls_checked(self) -> None:
        for bad in ([], ["http://a:1", "http://a:1"], ["ftp://a:1"]):
            with self.assertRaises(ValueError, msg=repr(bad)):
                Client(bad)


if __name__ == "__main__":
    unittest.main()
