"""The HTTP client of idgen: Snowflake IDs, IDs of a segment namespace,
and the decomposition of an ID, with retries and an optional block cache."""

from __future__ import annotations

import os
import threading
import time
import urllib.parse
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from ._backoff import Backoff
from ._cache import BlockCache
from ._http import Transport
from .errors import (
    BadResponseError,
    CallTimeoutError,
    ClosedError,
    LeaseToken,
    ProblemError,
    StaleRevisionError,
    TransportError,
)
from .layout import MAX_ID, Parts

__all__ = [
    "Client",
    "CacheOptions",
    "Draw",
    "Range",
    "SOURCE_SNOWFLAKE",
    "SOURCE_SEGMENT",
    "SOURCE_MIXED",
]

SOURCE_SNOWFLAKE = "snowflake"  # Snowflake IDs: ids(), or a namespace's fallback
SOURCE_SEGMENT = "segment"  # a namespace's counter
SOURCE_MIXED = "mixed"  # a cached draw holding IDs of both; each Range says which

_NAMESPACE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_NAMESPACE_MORE = frozenset("_.-")


@dataclass(frozen=True)
class Range:
    """A run of consecutive IDs, first to last inclusive."""

    first: int
    last: int
    source: str


@dataclass(frozen=True)
class Draw:
    """IDs with what the service said of them.

    ``ranges`` are the contiguous runs the IDs form (namespaces only);
    ``leases`` the fencing tokens of the worker leases that made Snowflake
    IDs, one per run of IDs from one lease; ``revision`` the highest
    revision of a strict namespace's answers (checked never to go back), 0
    otherwise."""

    namespace: str | None
    ids: list[int]
    ranges: list[Range] = field(default_factory=list)
    source: str = SOURCE_SNOWFLAKE
    leases: list[LeaseToken] = field(default_factory=list)
    revision: int = 0


@dataclass(frozen=True)
class CacheOptions:
    """The local block cache, off by default. A cache fetches ``block`` IDs
    per request and hands them out in process; once fewer than
    low_water * block are left it fetches the next block in the background.

    ``snowflake`` is the block size of ids(), draw() and next_id() (0: not
    cached); ``namespaces`` maps a namespace to its block size (namespaces
    not listed are not cached). A call asking for more IDs than a block
    goes to the server directly.

    Cached Snowflake IDs are as unique as any, but older by the time they
    are handed out, so IDs of two cached clients are not ordered by when
    they were handed out; cached namespace IDs increase per client, not
    across clients. IDs still cached at close() are dropped (a gap). A
    child process forked from the client's starts with an empty cache: IDs
    cached by both would be handed out twice."""

    snowflake: int = 0
    namespaces: Mapping[str, int] = field(default_factory=dict)
    low_water: float = 0.25


class Client:
    """A client of one idgen service (a node, or a load balancer in front
    of several), safe for concurrent use by threads.

    Every call is retried on an answer whose code idgen's error table marks
    retry-later (429, 503, 507), on a proxy's 502, 503 or 504 and on network errors, up to
    ``max_attempts`` attempts, after an exponential backoff with jitter
    (``backoff_base`` doubling up to ``backoff_max`` seconds) but never
    sooner than the server's Retry-After; a Retry-After above
    ``max_retry_after`` seconds, or one that would pass the call's
    ``timeout``, ends the call with the server's error at once. Each
    attempt is bounded by ``attempt_timeout`` seconds. Retrying a draw is
    safe: IDs the server handed out but whose answer was lost are a gap,
    never handed out again.

    ``token`` is a caller token of the server's tokens file (the ``ids``
    scope), sent as a bearer token. Counts above ``max_count`` (the
    server's --max-count) are split over several requests.

    ``base_url`` may be a list of several nodes' URLs, for callers with no
    load balancer in front of them: every call goes to one node, the first
    at the start, and moves on to the next (round) when an attempt gets no
    answer or a 503 (a node that cannot prove its lease, or that drains
    before it stops), at once, without a backoff, until every node was
    tried once in the call; then the retries above apply.

    Close it (or use it as a context manager) to stop cache refills."""

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        token: str | None = None,
        max_attempts: int = 4,
        backoff_base: float = 0.05,
        backoff_max: float = 2.0,
        max_retry_after: float = 30.0,
        attempt_timeout: float = 5.0,
        max_count: int = 10000,
        cache: CacheOptions | None = None,
        user_agent: str = "idgen-python-client",
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts {max_attempts}: want at least 1")
        if backoff_base < 0 or backoff_max < 0 or max_retry_after < 0 or attempt_timeout <= 0:
            raise ValueError("backoff_base, backoff_max and max_retry_after must be >= 0, attempt_timeout > 0")
        if max_count < 1:
            raise ValueError(f"max_count {max_count}: want at least 1")
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls or len(set(urls)) != len(urls):
            raise ValueError("base_url: want one URL, or a list of distinct URLs")
        self._nodes = [Transport(u, token, user_agent) for u in urls]
        self._node_lock = threading.Lock()
        self._node = 0  # the index of the node calls go to now
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._max_retry_after = max_retry_after
        self._attempt_timeout = attempt_timeout
        self._max_count = max_count
        self._rev_lock = threading.Lock()
        self._revisions: dict[str, int] = {}
        self._closing = threading.Event()
        self._snow_cache: BlockCache | None = None
        self._ns_caches: dict[str, BlockCache] = {}
        if cache is not None:
            self._setup_cache(cache)
        _clients.add(self)

    def _setup_cache(self, c: CacheOptions) -> None:
        if not 0 <= c.low_water < 1:
            raise ValueError(f"cache low_water {c.low_water}: want 0 <= low_water < 1")
        low = c.low_water or 0.25
        if not 0 <= c.snowflake <= self._max_count:
            raise ValueError(f"cache block {c.snowflake} for Snowflake IDs: want 0..max_count ({self._max_count})")
        if c.snowflake:
            self._snow_cache = BlockCache(self._fetch_for_cache, self._closing, None, c.snowflake, low)
        for ns, size in c.namespaces.items():
            _check_namespace(ns)
            if not 0 <= size <= self._max_count:
                raise ValueError(f"cache block {size} for namespace {ns!r}: want 0..max_count ({self._max_count})")
            if size:
                self._ns_caches[ns] = BlockCache(self._fetch_for_cache, self._closing, ns, size, low)

    def __repr__(self) -> str:
        urls = [t.base_url for t in self._nodes]
        return f"Client({urls[0] if len(urls) == 1 else urls!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stops cache refills and waits for them (each is bounded by
        attempt_timeout), and closes idle connections. IDs still cached are
        dropped. Every call after close() raises ClosedError."""
        self._closing.set()
        caches = list(self._ns_caches.values())
        if self._snow_cache is not None:
            caches.append(self._snow_cache)
        for c in caches:
            c.close()
        for t in self._nodes:
            t.close()

    @property
    def base_url(self) -> str:
        """The base URL calls go to now: with several nodes, the one the
        client moved on to last."""
        with self._node_lock:
            return self._nodes[self._node].base_url

    def _moved_on(self, i: int) -> None:
        """Moves on from node i to the next, unless another call did."""
        with self._node_lock:
            if self._node == i:
                self._node = (i + 1) % len(self._nodes)

    # --- Snowflake IDs -----------------------------------------------------

    def next_id(self, *, timeout: float | None = None) -> int:
        """One Snowflake ID. See ids()."""
        return self.ids(1, timeout=timeout)[0]

    def ids(self, count: int = 1, *, timeout: float | None = None) -> list[int]:
        """``count`` Snowflake IDs, in increasing order (unless they come
        from the cache across a refill). ``timeout`` bounds the whole call,
        retries included, in seconds. Raises ProblemError subclasses
        (ServiceUnavailableError once the retries are spent), TransportError,
        ClosedError, CallTimeoutError (waiting for the cache), ValueError for
        count < 1."""
        return self.draw(count, timeout=timeout).ids

    def draw(self, count: int = 1, *, timeout: float | None = None) -> Draw:
        """ids(), with the fencing tokens of the leases that made them."""
        _check_count(count)
        deadline = _deadline(timeout)
        if self._snow_cache is not None and count <= self._snow_cache.size:
            return self._snow_cache.take(count, deadline)
        return self._draw_direct(None, count, deadline)

    # --- namespaces --------------------------------------------------------

    def namespace_ids(self, namespace: str, count: int = 1, *, timeout: float | None = None) -> list[int]:
        """``count`` IDs of a namespace's counter, increasing. Raises
        NotFoundError for a namespace the server does not know,
        NamespaceExhaustedError, StaleRevisionError (a strict namespace's
        answer whose revision went back), ValueError for a malformed name;
        otherwise as ids()."""
        return self.draw_namespace(namespace, count, timeout=timeout).ids

    def draw_namespace(self, namespace: str, count: int = 1, *, timeout: float | None = None) -> Draw:
        """namespace_ids(), with the ranges, the source (``segment``, or
        ``snowflake`` when the namespace's fallback served) and, for a
        strict namespace, the revision."""
        _check_namespace(namespace)
        _check_count(count)
        deadline = _deadline(timeout)
        cache = self._ns_caches.get(namespace)
        if cache is not None and count <= cache.size:
            return cache.take(count, deadline)
        return self._draw_direct(namespace, count, deadline)

    # --- decomposition -----------------------------------------------------

    def parse(self, id: int, *, timeout: float | None = None) -> Parts:
        """The parts of a Snowflake ID by the cluster's layout, as the
        server decomposes it (GET /ids/{id}). Raises ValueError for an int
        outside 0..2^63-1; otherwise as ids()."""
        if type(id) is not int or not 0 <= id <= MAX_ID:
            raise ValueError(f"ID {id!r}: want an int in 0..2^63-1")
        doc = self._get(f"/ids/{id}", _deadline(timeout))
        try:
            got = _parse_id(doc.get("id"))
            ts = doc["timestamp_ms"]
            dc, worker, seq = doc["datacenter"], doc["worker"], doc["sequence"]
            if not (type(ts) is int and type(dc) is int and type(worker) is int and type(seq) is int):
                raise ValueError("a part is not an integer")
        except (KeyError, ValueError) as e:
            raise BadResponseError(f"idgen client: GET /ids/{id}: malformed decomposition: {e}") from None
        if got != id:
            raise BadResponseError(f"idgen client: GET /ids/{id}: answer is about ID {got}")
        return Parts(id=got, timestamp_ms=ts, datacenter=dc, worker=worker, sequence=seq)

    # --- requests ------------------------------------------------------------

    def _draw_direct(self, ns: str | None, n: int, deadline: float | None) -> Draw:
        parts = []
        left = n
        while left > 0:
            k = min(left, self._max_count)
            parts.append(self._fetch(ns, k, deadline))
            left -= k
        return merge_draws(ns, parts)

    def _fetch_for_cache(self, ns: str | None, n: int) -> Draw:
        return self._fetch(ns, n, None)

    def _fetch(self, ns: str | None, n: int, deadline: float | None) -> Draw:
        """One GET /ids (with its retries) for exactly n IDs."""
        q = {"count": str(n)}
        if ns is not None:
            q["namespace"] = ns
        path = "/ids?" + urllib.parse.urlencode(q)
        # The revision known before the request is sent: the fetch that
        # serves it happens later, so its revision must be above this one.
        seen = self._revision_seen(ns)
        doc = self._get(path, deadline)
        raw_ids = doc.get("ids")
        if not isinstance(raw_ids, list):
            raise BadResponseError(f"idgen client: GET {path}: no ids")
        form = doc.get("format")
        ids = [_parse_id(s, path, form) for s in raw_ids]
        if len(ids) != n:
            raise BadResponseError(f"idgen client: GET {path}: asked for {n} IDs, got {len(ids)}")
        rev = doc.get("revision", 0)
        if rev is None:
            rev = 0
        if type(rev) is not int or rev < 0:
            raise BadResponseError(f"idgen client: GET {path}: bad revision {rev!r}")
        assert isinstance(rev, int)
        if ns is not None and rev > 0:
            self._observe_revision(ns, seen, rev)
        src = doc.get("source") or (SOURCE_SEGMENT if ns is not None else SOURCE_SNOWFLAKE)
        if src not in (SOURCE_SEGMENT, SOURCE_SNOWFLAKE):
            raise BadResponseError(f"idgen client: GET {path}: unknown source {src!r}")
        assert isinstance(src, str)
        leases: list[LeaseToken] = []
        lease = doc.get("lease")
        if isinstance(lease, dict) and src == SOURCE_SNOWFLAKE:
            dc, w, v = lease.get("datacenter"), lease.get("worker"), lease.get("fencing_version")
            if isinstance(dc, int) and isinstance(w, int) and isinstance(v, int):
                leases.append(LeaseToken(dc, w, v))
        ranges: list[Range] = []
        if ns is not None:
            raw_ranges = doc.get("ranges")
            if isinstance(raw_ranges, list) and raw_ranges:
                for r in raw_ranges:
                    if not isinstance(r, dict):
                        raise BadResponseError(f"idgen client: GET {path}: malformed range")
                    ranges.append(Range(_parse_id(r.get("first"), path, form), _parse_id(r.get("last"), path, form), src))
            else:
                ranges = ranges_of([], ids, src)
        return Draw(namespace=ns, ids=ids, ranges=ranges, source=src, leases=leases, revision=rev)

    def _get(self, path: str, deadline: float | None) -> dict[str, object]:
        """GET path, retried as the options say; the JSON object of a 200."""
        bo: Backoff | None = None
        attempt = 0
        moves = 0  # the times this call moved on to another node
        while True:
            attempt += 1
            if self._closing.is_set():
                raise ClosedError("idgen client: closed")
            timeout = self._attempt_timeout
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CallTimeoutError(f"idgen client: GET {path}: the call's timeout passed")
                timeout = min(timeout, left)
            with self._node_lock:
                node = self._node
            try:
                return self._nodes[node].call("GET", path, want=200, timeout=timeout)
            except (TransportError, ProblemError) as e:
                if attempt > 1:
                    e.add_note(f"after {attempt} attempts")
                fails_over = isinstance(e, TransportError) or e.status == 503
                if fails_over:
                    self._moved_on(node)
                if isinstance(e, ProblemError) and not e.temporary:
                    raise
                if attempt >= self._max_attempts:
                    raise
                if fails_over and moves < len(self._nodes) - 1:
                    moves += 1  # another node, not tried in this call: at once
                    continue
                if bo is None:
                    bo = Backoff(min(self._backoff_base, self._backoff_max), self._backoff_max)
                wait = bo.next()
                ra = e.retry_after if isinstance(e, ProblemError) else None
                if ra is not None:
                    if ra > self._max_retry_after:
                        raise  # asked to wait longer than we are willing to
                    wait = max(wait, ra)
                if deadline is not None and time.monotonic() + wait > deadline:
                    raise  # the retry could not happen before the call's timeout
                if self._closing.wait(wait):
                    raise ClosedError("idgen client: closed") from e

    def _revision_seen(self, ns: str | None) -> int:
        if ns is None:
            return 0
        with self._rev_lock:
            return self._revisions.get(ns, 0)

    def _observe_revision(self, ns: str, seen: int, got: int) -> None:
        # Answers to concurrent requests may arrive out of order, so the
        # check is against what was known at the send, not at the arrival.
        if got <= seen:
            raise StaleRevisionError(ns, got, seen)
        with self._rev_lock:
            if got > self._revisions.get(ns, 0):
                self._revisions[ns] = got

    def _after_fork_in_child(self) -> None:
        self._rev_lock = threading.Lock()
        for c in self._ns_caches.values():
            c.after_fork_in_child()
        if self._snow_cache is not None:
            self._snow_cache.after_fork_in_child()


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if timeout <= 0:
        raise ValueError(f"timeout {timeout}: want > 0 (or None)")
    return time.monotonic() + timeout


def _check_count(count: int) -> None:
    if type(count) is not int or count < 1:
        raise ValueError(f"count {count!r}: want an int of at least 1")


def _check_namespace(ns: str) -> None:
    """The server's rule, ^[a-z0-9][a-z0-9_.-]{0,63}$, so that a typo fails
    without a request."""
    ok = isinstance(ns, str) and 1 <= len(ns) <= 64 and ns[0] in _NAMESPACE_CHARS
    if ok and not all(c in _NAMESPACE_CHARS or c in _NAMESPACE_MORE for c in ns):
        ok = False
    if not ok:
        raise ValueError(f"namespace {ns!r}: want ^[a-z0-9][a-z0-9_.-]{{0,63}}$")


# The alphabets of the fixed-width forms a node's --id-format may write.
_ALPHABETS = {
    "base32": "0123456789ABCDEFGHJKMNPQRSTVWXYZ",
    "base62": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "hex": "0123456789abcdef",
}


def _parse_id(s: object, where: str = "", form: object = None) -> int:
    """An ID as idgen's JSON writes it: a decimal string, 0..2^63-1, or
    the fixed-width form the answer's "format" names (a node's
    --id-format may name one)."""
    digits = _ALPHABETS.get(form) if isinstance(form, str) else None
    if digits is not None and isinstance(s, str) and 1 <= len(s) <= 16:
        v = 0
        for c in s:
            d = digits.find(c)
            if d < 0:
                break
            v = v * len(digits) + d
        else:
            if v <= MAX_ID:
                return v
    elif form in (None, "decimal") and isinstance(s, str) and 1 <= len(s) <= 19 and s.isascii() and s.isdigit():
        v = int(s)
        if v <= MAX_ID:
            return v
    raise BadResponseError(f"idgen client: {where}: malformed ID {s!r}".replace(": :", ":"))


def ranges_of(rs: list[Range], ids: list[int], src: str) -> list[Range]:
    """Appends the contiguous runs of ids to rs and returns it."""
    for i in ids:
        if rs and rs[-1].source == src and rs[-1].last + 1 == i:
            rs[-1] = Range(rs[-1].first, i, src)
        else:
            rs.append(Range(i, i, src))
    return rs


def merge_draws(ns: str | None, parts: list[Draw]) -> Draw:
    """One Draw of several, in order: ranges that continue merge, and so do
    equal lease tokens in a row."""
    ids: list[int] = []
    ranges: list[Range] = []
    leases: list[LeaseToken] = []
    src = ""
    rev = 0
    for p in parts:
        ids.extend(p.ids)
        for r in p.ranges:
            if ranges and ranges[-1].source == r.source and ranges[-1].last + 1 == r.first:
                ranges[-1] = Range(ranges[-1].first, r.last, r.source)
            else:
                ranges.append(r)
        for lt in p.leases:
            if not leases or leases[-1] != lt:
                leases.append(lt)
        src = p.source if src in ("", p.source) else SOURCE_MIXED
        rev = max(rev, p.revision)
    return Draw(namespace=ns, ids=ids, ranges=ranges, source=src or SOURCE_SNOWFLAKE, leases=leases, revision=rev)


_clients: weakref.WeakSet[Client] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for c in list(_clients):
        c._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
