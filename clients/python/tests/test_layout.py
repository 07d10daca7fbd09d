"""The layout, the error table and Retry-After: no server needed."""

from __future__ import annotations

import email.utils
import unittest

from idgen_client import (
    InvalidReleaseError,
    Layout,
    LeaseLostError,
    NoWorkerAvailableError,
    ProblemError,
    ServiceUnavailableError,
    StorageFullError,
    UnavailableError,
)
from idgen_client.errors import parse_retry_after, problem_error


class LayoutTest(unittest.TestCase):
    def test_compose_docs_example(self) -> None:
        # docs/leases.md, "The bit layout".
        got = Layout().compose(1790000031234, 0, 7, 5)
        self.assertEqual(got, 95522888022519813, f"got {got} want 95522888022519813")

    def test_round_trip(self) -> None:
        cases = [
            (Layout(), 1790000031234, 3, 7, 4095),
            (Layout(), Layout().epoch_ms, 0, 0, 0),
            (Layout(39, 2, 10, 12, 1600000000000), 1800000000000, 3, 1023, 17),
            (Layout(44, 0, 8, 11), 1790000000000, 0, 255, 2047),
        ]
        for lay, ts, dc, w, seq in cases:
            with self.subTest(layout=lay):
                id_ = lay.compose(ts, dc, w, seq)
                p = lay.decompose(id_)
                got = (p.timestamp_ms, p.datacenter, p.worker, p.sequence)
                self.assertEqual(got, (ts, dc, w, seq), f"got {got} want {(ts, dc, w, seq)}")
                self.assertLess(id_, 1 << 63)
                self.assertEqual(p.time.timestamp() * 1000, ts)

    def test_compose_refuses_out_of_range(self) -> None:
        lay = Layout()
        bad = [
            (lay.epoch_ms - 1, 0, 0, 0),
            (lay.max_timestamp_ms + 1, 0, 0, 0),
            (lay.epoch_ms, 32, 0, 0),
            (lay.epoch_ms, 0, 32, 0),
            (lay.epoch_ms, 0, 0, 4096),
            (lay.epoch_ms, 0, -1, 0),
        ]
        for args in bad:
            with self.subTest(args=args), self.assertRaises(ValueError):
                lay.compose(*args)

    def test_invalid_layouts(self) -> None:
        for widths in [(0, 5, 5, 53), (64, 0, 0, -1), (41, 5, 5, 13)]:
            with self.subTest(widths=widths), self.assertRaises(ValueError):
                Layout(*widths)
        with self.assertRaises(ValueError):
            Layout.from_json({"time_bits": 41, "datacenter_bits": 5, "worker_bits": 5, "sequence_bits": "12", "epoch_ms": 1})

    def test_narrow_layout(self) -> None:
        # The js53 preset: 41/0/5/7, every ID at most 2^53 - 1.
        js53 = Layout(41, 0, 5, 7)
        last = js53.compose(js53.max_timestamp_ms, 0, 31, 127)
        self.assertEqual(last, (1 << 53) - 1, f"got {last} want 2^53 - 1")

    def test_answer_forms(self) -> None:
        # A node's --id-format writes IDs in the form the answer names;
        # the vectors are those of clients/testvectors/forms.json.
        import json
        import pathlib

        from idgen_client.client import BadResponseError, _parse_id

        path = pathlib.Path(__file__).resolve().parents[2] / "testvectors" / "forms.json"
        vectors = json.loads(path.read_text())["ids"]
        self.assertTrue(vectors)
        for v in vectors:
            for form in ("decimal", "base32", "base62", "hex"):
                with self.subTest(form=form, id=v["id"]):
                    got = _parse_id(v[form], "test", form)
                    self.assertEqual(got, int(v["id"]), f"got {got} want {v['id']}")
        for text, form in (("8000000000000000", "hex"), ("00G", "hex"), ("12", "base64"), ("1A", None)):
            with self.subTest(text=text, form=form), self.assertRaises(BadResponseError):
                _parse_id(text, "test", form)

    def test_decompose_refuses_non_ids(self) -> None:
        for v in (-1, 1 << 63):
            with self.subTest(v=v), self.assertRaises(ValueError):
                Layout().decompose(v)


class ErrorTableTest(unittest.TestCase):
    def test_problem_codes_map_to_classes(self) -> None:
        cases: list[tuple[int, bytes, type[ProblemError], str]] = [
            (409, b'{"code":"lease_lost","title":"Lease lost","detail":"d"}', LeaseLostError, "lease_lost"),
            (409, b'{"code":"no_worker_available"}', NoWorkerAvailableError, "no_worker_available"),
            (422, b"", InvalidReleaseError, "invalid_release"),
            (503, b'{"code":"unavailable"}', ServiceUnavailableError, "unavailable"),
            (502, b"<html>bad gateway</html>", ServiceUnavailableError, "unavailable"),
            (507, b'{"code":"storage_full"}', StorageFullError, "storage_full"),
            (507, b"", StorageFullError, "storage_full"),
            (418, b"{}", ProblemError, ""),
        ]
        for status, body, cls, code in cases:
            with self.subTest(status=status, body=body):
                e = problem_error(status, {"x-request-id": "r1"}, body, 0)
                self.assertIs(type(e), cls, f"got {type(e).__name__} want {cls.__name__}")
                self.assertEqual(e.code, code)
                self.assertEqual(e.status, status)
                self.assertEqual(e.request_id, "r1")
        self.assertIsInstance(problem_error(503, {}, b"", 0), UnavailableError)
        self.assertTrue(problem_error(429, {}, b"", 0).temporary)
        self.assertFalse(problem_error(409, {}, b"", 0).temporary)
        self.assertTrue(problem_error(409, {}, b'{"code":"no_worker_available"}', 0).temporary)
        self.assertTrue(problem_error(507, {}, b'{"code":"storage_full"}', 0).temporary)
        self.assertTrue(problem_error(502, {}, b"<html>bad gateway</html>", 0).temporary)
        self.assertFalse(problem_error(409, {}, b'{"code":"lease_lost"}', 0).temporary)

    def test_retry_after(self) -> None:
        now = 1_800_000_000.0
        date = email.utils.formatdate(now + 7, usegmt=True)
        cases: list[tuple[str | None, float | None]] = [
            (None, None),
            ("", None),
            ("1", 1.0),
            (" 3 ", 3.0),
            ("0", None),
            ("-2", None),
            ("1.5", None),
            ("soon", None),
            (date, 7.0),
            (email.utils.formatdate(now - 7, usegmt=True), None),
            ("999999999", 24 * 3600.0),
        ]
        for value, want in cases:
            with self.subTest(value=value):
                got = parse_retry_after(value, now)
                self.assertEqual(got, want, f"got {got} want {want}")
        e = problem_error(429, {"retry-after": "2"}, b'{"code":"too_many"}', now)
        self.assertEqual(e.retry_after, 2.0)


if __name__ == "__main__":
    unittest.main()
