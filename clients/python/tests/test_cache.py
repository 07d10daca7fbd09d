"""The client's block cache against the real idgen."""

from __future__ import annotations

import os
import tempfile
import threading
import unittest

from idgen_client import CacheOptions, ClosedError, Client, NotFoundError

from .idgen_server import Node


class CacheTest(unittest.TestCase):
    node: Node
    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="idgen-py-cache-")
        cls.node = Node(cls.tmp.name, tokens={"app": "ids"})
        for ns in ("orders", "forked"):
            status, doc = cls.node.admin("POST", "/admin/namespaces", {"name": ns, "step": 50})
            assert status == 201, (status, doc)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.node.stop()
        cls.tmp.cleanup()

    def cached(self, cache: CacheOptions) -> tuple[Client, list[str]]:
        """A cached client and the paths of the requests it sends."""
        c = Client(self.node.url, token=self.node.secret["app"], cache=cache)
        self.addCleanup(c.close)
        paths: list[str] = []
        real = c._nodes[0].call

        def counting(*a: object, **kw: object) -> dict[str, object]:
            paths.append(str(a[1]))
            return real(*a, **kw)  # type: ignore[arg-type]

        c._nodes[0].call = counting  # type: ignore[assignment]
        return c, paths

    def test_snowflake_blocks(self) -> None:
        c, paths = self.cached(CacheOptions(snowflake=100))
        ids = [c.next_id() for _ in range(450)]
        self.assertEqual(len(set(ids)), 450)
        # 450 IDs in blocks of 100: at least 5 requests, and not one per ID.
        self.assertTrue(5 <= len(paths) <= 6, f"got {len(paths)} requests for 450 IDs in blocks of 100: {paths}")
        self.assertTrue(all("count=100" in p for p in paths), paths)
        big = c.ids(101)  # above a block: straight to the server
        self.assertEqual(len(set(big) | set(ids)), 551)
        self.assertIn("count=101", paths[-1])

    def test_namespace_blocks_from_threads(self) -> None:
        c, paths = self.cached(CacheOptions(namespaces={"orders": 40}, low_water=0.5))
        got: list[int] = []
        lock = threading.Lock()

        def draw() -> None:
            for _ in range(50):
                ids = c.namespace_ids("orders", 3)
                self.assertEqual(ids, list(range(ids[0], ids[0] + 3)), "a cached take of one run is consecutive")
                with lock:
                    got.extend(ids)

        threads = [threading.Thread(target=draw) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(len(got), 600)
        self.assertEqual(len(set(got)), 600, "duplicate IDs out of the cache")
        self.assertLess(len(paths), 600 / 3, "the cache sent a request per take")

    def test_refill_error_reaches_the_caller(self) -> None:
        c, _ = self.cached(CacheOptions(namespaces={"nope": 10}))
        with self.assertRaises(NotFoundError):
            c.namespace_ids("nope", 1)

    def test_closed_cache(self) -> None:
        c, _ = self.cached(CacheOptions(snowflake=10))
        c.next_id()
        c.close()
        with self.assertRaises(ClosedError):
            c.next_id()

    def test_a_forked_child_does_not_hand_out_the_parents_cached_ids(self) -> None:
        c, _ = self.cached(CacheOptions(namespaces={"forked": 50}, low_water=0.01))
        first = c.namespace_ids("forked", 1)  # the cache holds the rest of a block
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: draw, report, exit without running the parent's cleanups
            code = 0
            try:
                ids = c.namespace_ids("forked", 5, timeout=30)
                os.write(w, (" ".join(map(str, ids)) + "\n").encode())
            except BaseException as e:  # report, never fall into the parent's test runner
                os.write(w, f"error {e!r}\n".encode())
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            line = f.read().strip()
        _, status = os.waitpid(pid, 0)
        self.assertEqual(status, 0, line)
        child = [int(x) for x in line.split()]
        parent = c.namespace_ids("forked", 5)
        overlap = set(child) & set(parent + first)
        self.assertFalse(overlap, f"parent {first + parent} and child {child} share IDs")


if __name__ == "__main__":
    unittest.main()
