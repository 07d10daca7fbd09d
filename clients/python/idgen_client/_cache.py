"""The client's block cache: IDs fetched a block at a time (count=N) and
handed out in process, refilled in the background."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import CallTimeoutError, ClosedError, IdgenError, LeaseToken

if TYPE_CHECKING:
    from .client import Draw

__all__ = ["BlockCache"]


@dataclass
class _Run:
    """Cached IDs of one answer's source, lease and revision; ids[pos:] are
    not handed out yet."""

    src: str
    lease: LeaseToken | None
    rev: int
    ids: list[int]
    pos: int = 0


@dataclass
class _Fill:
    """One refill; ``error`` is set before ``done``."""

    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class BlockCache:
    """The cache of Snowflake IDs (ns None) or of one namespace. One refill
    at a time is in flight, in a thread of its own that close() waits for;
    callers that find too few IDs wait for it, bounded by their deadline."""

    def __init__(
        self,
        fetch: Callable[[str | None, int], Draw],
        closing: threading.Event,
        ns: str | None,
        size: int,
        low_water: float,
    ) -> None:
        self._fetch = fetch
        self._closing = closing
        self.ns = ns
        self.size = size
        self._low = max(1, int(size * low_water))
        self._cond = threading.Condition()
        self._runs: deque[_Run] = deque()
        self._count = 0
        self._fill: _Fill | None = None
        self._threads: set[threading.Thread] = set()

    def take(self, n: int, deadline: float | None) -> Draw:
        """n IDs (n <= size), waiting for a refill when too few are cached.
        Raises the refill's error when it failed and too few IDs are left,
        CallTimeoutError when the deadline passes first, ClosedError after
        close."""
        while True:
            if self._closing.is_set():
                raise ClosedError("idgen client: closed")
            with self._cond:
                if self._count >= n:
                    d = self._take_locked(n)
                    if self._count < self._low and self._fill is None and not self._closing.is_set():
                        self._start_locked()
                    return d
                f = self._fill if self._fill is not None else self._start_locked()
            timeout = None if deadline is None else deadline - time.monotonic()
            if (timeout is not None and timeout <= 0) or not f.done.wait(timeout):
                raise CallTimeoutError("idgen client: the call's timeout passed waiting for cached IDs")
            if f.error is not None:
                with self._cond:
                    enough = self._count >= n  # another refill may have landed meanwhile
                if not enough:
                    raise f.error

    def _take_locked(self, n: int) -> Draw:
        from .client import SOURCE_MIXED, Draw, Range, ranges_of

        ids: list[int] = []
        ranges: list[Range] = []
        leases: list[LeaseToken] = []
        src = ""
        rev = 0
        while len(ids) < n:
            r = self._runs[0]
            m = min(n - len(ids), len(r.ids) - r.pos)
            part = r.ids[r.pos : r.pos + m]
            ids.extend(part)
            if self.ns is not None:
                ranges_of(ranges, part, r.src)
            src = r.src if src in ("", r.src) else SOURCE_MIXED
            if r.lease is not None and (not leases or leases[-1] != r.lease):
                leases.append(r.lease)
            rev = max(rev, r.rev)
            r.pos += m
            if r.pos == len(r.ids):
                self._runs.popleft()
        self._count -= n
        return Draw(namespace=self.ns, ids=ids, ranges=ranges, source=src, leases=leases, revision=rev)

    def _start_locked(self) -> _Fill:
        if self._closing.is_set():
            raise ClosedError("idgen client: closed")
        f = _Fill()
        self._fill = f
        t = threading.Thread(target=self._refill, args=(f,), name=f"idgen-cache-{self.ns or 'snowflake'}", daemon=True)
        self._threads.add(t)
        t.start()
        return f

    def _refill(self, f: _Fill) -> None:
        try:
            d = self._fetch(self.ns, self.size)  # one request: size <= max_count
        except IdgenError as e:
            f.error = ClosedError("idgen client: closed") if isinstance(e, ClosedError) or self._closing.is_set() else e
            d = None
        except BaseException as e:  # a bug: the waiters get it rather than hang
            f.error = e
            d = None
        with self._cond:
            if d is not None:
                self._append_locked(d)
            self._fill = None
            self._threads.discard(threading.current_thread())
        f.done.set()

    def _append_locked(self, d: Draw) -> None:
        lease = d.leases[0] if d.leases else None
        last = self._runs[-1] if self._runs else None
        if last is not None and last.src == d.source and last.rev == d.revision and last.lease == lease:
            del last.ids[: last.pos]
            last.pos = 0
            last.ids.extend(d.ids)
        else:
            self._runs.append(_Run(d.source, lease, d.revision, list(d.ids)))
        self._count += len(d.ids)

    def close(self) -> None:
        """Waits for the refill in flight; the caller has set ``closing``."""
        with self._cond:
            threads = list(self._threads)
        for t in threads:
            t.join()
        with self._cond:
            self._runs.clear()
            self._count = 0

    def after_fork_in_child(self) -> None:
        # The parent hands out what it cached; so must the child not. The
        # refill thread, if any, did not survive the fork.
        self._cond = threading.Condition()
        self._runs = deque()
        self._count = 0
        self._fill = None
        self._threads = set()
