"""A local Snowflake generator: IDs made in this process under a worker-ID
lease held through idgen's lease API, as docs/leases.md states the
protocol (acquire, heartbeat, the fence, release)."""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
import weakref
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from ._backoff import Backoff
from ._http import Transport
from .errors import (
    AboveCeilingError,
    BadResponseError,
    BelowFloorError,
    ClockBackwardError,
    ClockOffsetError,
    GeneratorClosedError,
    IdgenError,
    LeaseExpiredError,
    LeaseLostError,
    LeaseToken,
    NoLeaseError,
    ProblemError,
    RefusedError,
)
from .layout import Layout

__all__ = ["Generator", "GeneratorStatus", "Clock", "SystemClock", "MAX_HOLDER_LEN"]

# The longest holder name the lease API takes, in bytes: it stores
# "api:<token name>/<holder>" in at most 255 bytes, token names having at
# most 64.
MAX_HOLDER_LEN = 186

# Bounds the server never exceeds by default; options above them are
# refused so that a typo (milliseconds for seconds) fails at once.
_MAX_CLOCK_OFFSET = 60.0
_MAX_BACKWARD_WAIT = 1.0

# How long a batch may go without issuing an ID while it waits out a clock
# (a small backward step, a floor just ahead, a used-up millisecond),
# beyond max_backward_wait, before it gives up.
_STALL_SLACK = 1.0


class Clock(Protocol):
    """Where a Generator's time comes from. IDs carry the wall clock;
    every deadline runs on the monotonic clock."""

    def wall_ms(self) -> int:
        """Unix time in milliseconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (time.monotonic)."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The system's clocks."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass(frozen=True)
class GeneratorStatus:
    """A snapshot of a Generator's lease and counters."""

    holder: str  # as sent; the server stores "api:<token name>/<holder>"
    held: bool
    lease: LeaseToken | None
    floor_ms: int | None
    ceiling_ms: int | None
    valid_for: float  # seconds until the local deadline; <= 0 when passed or no lease
    clock_offset_ms: float | None  # the database's time minus this clock, last measured
    last_timestamp_ms: int | None  # of the last ID issued under the lease held
    last_error: str | None
    ready: bool
    claims: int
    lost: int
    heartbeat_failures: int
    releases: int


class _Lease:
    """The lease held, as docs/leases.md's "What a holder keeps" lists it.
    Guarded by Generator._lock; the secret never leaves memory."""

    __slots__ = (
        "dc",
        "worker",
        "version",
        "secret",
        "floor_ms",
        "ceiling_ms",
        "heartbeat",
        "margin",
        "max_clock_offset_ms",
        "max_backward_wait_ms",
        "deadline",
        "offset_ms",
        "last_ts",
        "last_seq",
    )

    def __init__(
        self,
        dc: int,
        worker: int,
        version: int,
        secret: str,
        floor_ms: int,
        ceiling_ms: int,
        heartbeat: float,
        margin: float,
        max_clock_offset_ms: int,
        max_backward_wait_ms: int,
        deadline: float,
        offset_ms: float,
    ) -> None:
        self.dc = dc
        self.worker = worker
        self.version = version
        self.secret = secret
        self.floor_ms = floor_ms
        self.ceiling_ms = ceiling_ms
        self.heartbeat = heartbeat
        self.margin = margin
        self.max_clock_offset_ms = max_clock_offset_ms
        self.max_backward_wait_ms = max_backward_wait_ms
        self.deadline = deadline
        self.offset_ms = offset_ms
        self.last_ts: int | None = None
        self.last_seq = -1

    def token(self) -> LeaseToken:
        return LeaseToken(self.dc, self.worker, self.version)

    def __repr__(self) -> str:  # no secret
        return f"_Lease({self.dc}/{self.worker} v{self.version}, fence {self.floor_ms}..{self.ceiling_ms})"


class Generator:
    """Snowflake IDs made in this process, with no request per ID, under a
    worker-ID lease of an idgen cluster held through its lease API
    (docs/leases.md). Safe for concurrent use by threads.

    The constructor reads the cluster's layout, starts the lease thread and,
    with ``wait`` (the default), waits up to ``start_timeout`` seconds for
    the first lease. It raises the server's ProblemError when it refuses for
    good (InvalidError, UnauthorizedError, ForbiddenError, NotFoundError:
    the lease API is off or has no worker IDs), BadResponseError, and
    NoLeaseError when no lease came in time (the pool is full, the service
    unreachable; the last failure is chained). Bad arguments raise
    ValueError.

    The lease thread acquires a worker ID (``workers``, an inclusive
    ``(min, max)`` within the server's --lease-api-worker-ids; None: all of
    them), heartbeats it, acquires afresh when it is lost, and on close()
    releases it with the timestamp of the last ID issued. An ID is issued
    only with a timestamp inside the lease's fence (from the previous
    holder's ceiling + 1 to the ceiling the database committed) and only
    before the local deadline: the time on time.monotonic() read before the
    last successful acquire or heartbeat was sent, plus ``ttl``, minus the
    margin. A process paused past its lease therefore issues nothing when it
    wakes, and two holders of one worker ID never issue the same ID.

    ``ttl`` is the lease's time to live in seconds (whole milliseconds,
    within the server's bounds, 3 s to 5 min by default). ``heartbeat`` (at
    most ttl/2), ``margin`` (less than ttl/2), ``max_clock_offset`` and
    ``max_backward_wait`` default to what the acquire answer says
    (heartbeat_ms, margin_ms, max_clock_offset_ms, max_backward_wait_ms).
    ``max_floor_ahead`` skips worker IDs whose floor lies further ahead of
    this clock, in seconds (None: take any). ``holder`` names this process,
    unique per process (default host/pid/random). A refusal raises a
    RefusedError (an UnavailableError): try again shortly.

    A Generator does not survive fork(): in the child every call raises
    GeneratorClosedError and close() leaves the parent's lease alone. Make
    a Generator in each process."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        datacenter: int = 0,
        workers: tuple[int, int] | None = None,
        ttl: float = 30.0,
        heartbeat: float | None = None,
        margin: float | None = None,
        holder: str | None = None,
        max_clock_offset: float | None = None,
        max_backward_wait: float | None = None,
        max_floor_ahead: float | None = 5.0,
        request_timeout: float = 10.0,
        wait: bool = True,
        start_timeout: float = 60.0,
        clock: Clock | None = None,
        logger: logging.Logger | None = None,
        user_agent: str = "idgen-python-client",
    ) -> None:
        if not isinstance(token, str) or not token:
            raise ValueError("token is required: a token with the leases scope")
        ttl_ms = round(ttl * 1000)
        if ttl_ms < 1000 or abs(ttl * 1000 - ttl_ms) > 1e-6:
            raise ValueError(f"ttl {ttl}: want at least 1 s, in whole milliseconds")
        if heartbeat is not None and not 0 < heartbeat <= ttl / 2:
            raise ValueError(f"heartbeat {heartbeat}: want more than 0 and at most ttl/2 ({ttl / 2})")
        if margin is not None and not 0 <= margin < ttl / 2:
            raise ValueError(f"margin {margin}: want at least 0 and less than ttl/2 ({ttl / 2})")
        if max_clock_offset is not None and not 0 <= max_clock_offset <= _MAX_CLOCK_OFFSET:
            raise ValueError(f"max_clock_offset {max_clock_offset}: want 0 to {_MAX_CLOCK_OFFSET} s")
        if max_backward_wait is not None and not 0 <= max_backward_wait <= _MAX_BACKWARD_WAIT:
            raise ValueError(f"max_backward_wait {max_backward_wait}: want 0 to {_MAX_BACKWARD_WAIT} s")
        if max_floor_ahead is not None and max_floor_ahead < 0:
            raise ValueError(f"max_floor_ahead {max_floor_ahead}: want at least 0 (or None)")
        if request_timeout <= 0 or start_timeout <= 0:
            raise ValueError("request_timeout and start_timeout must be > 0")
        if type(datacenter) is not int or datacenter < 0:
            raise ValueError(f"datacenter {datacenter!r}: want an int >= 0")
        if workers is not None:
            lo, hi = workers
            if type(lo) is not int or type(hi) is not int or not 0 <= lo <= hi:
                raise ValueError(f"workers {workers!r}: want (min, max) with 0 <= min <= max")
        if holder is None:
            holder = _default_holder()
        _check_holder(holder)

        self._holder = holder
        self._dc = datacenter
        self._workers = workers
        self._ttl = ttl_ms / 1000
        self._ttl_ms = ttl_ms
        self._opt_heartbeat = heartbeat
        self._opt_margin = margin
        self._opt_max_offset = max_clock_offset
        self._opt_backward = max_backward_wait
        self._max_floor_ahead_ms = None if max_floor_ahead is None else round(max_floor_ahead * 1000)
        self._request_timeout = request_timeout
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._log = logger if logger is not None else logging.getLogger("idgen_client.generator")

        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._lease: _Lease | None = None
        self._closed = False
        self._forked = False
        self._last_error: str | None = None
        self._claim_error: IdgenError | None = None  # the last claim's failure; None after a success
        self._claims = self._lost = self._hb_failures = self._releases = 0
        # The database's time and the monotonic time it was read at: the
        # last reading of any lease, for the ceiling proposal.
        self._db_ref: tuple[float, float, int] | None = None  # (db ms, mono s, max offset ms)

        # The lease thread's schedule; only it touches these.
        hb_hint = heartbeat if heartbeat is not None else self._ttl / 3
        self._claim_bo = Backoff(0.1, min(5.0, hb_hint))
        self._hb_bo: Backoff | None = None
        self._next_claim = 0.0
        self._next_hb = 0.0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._close_timeout = 10.0
        self._release_error: IdgenError | None = None

        self._t = Transport(base_url, token, user_agent)
        try:
            doc = self._t.call("GET", "/v1/leases/layout", want=200, timeout=request_timeout)
            try:
                self._layout = Layout.from_json(doc)
            except ValueError as e:
                raise BadResponseError(f"idgen generator: GET /v1/leases/layout: {e}") from None
            if datacenter > self._layout.max_datacenter:
                raise ValueError(f"datacenter {datacenter} outside the layout's 0..{self._layout.max_datacenter}")
            if workers is not None and workers[1] > self._layout.max_worker:
                raise ValueError(f"workers {workers} outside the layout's 0..{self._layout.max_worker}")
        except BaseException:
            self._t.close()
            raise
        _generators.add(self)
        self._thread = threading.Thread(target=self._run, name=f"idgen-lease-{holder}", daemon=True)
        self._thread.start()
        if wait:
            try:
                self._wait_first_lease(start_timeout)
            except BaseException:
                try:
                    self.close()
                except IdgenError:
                    pass  # the first error is the one to tell
                raise

    # --- the public surface --------------------------------------------------

    @property
    def layout(self) -> Layout:
        """The cluster's Snowflake layout, which the IDs follow."""
        return self._layout

    @property
    def holder(self) -> str:
        """The holder name sent; the server stores "api:<token name>/<holder>"."""
        return self._holder

    def __repr__(self) -> str:
        return f"Generator({self._t.base_url!r}, holder={self._holder!r})"

    def __enter__(self) -> Generator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def next_id(self) -> int:
        """A Snowflake ID, or a RefusedError saying why none can be issued
        now (NoLeaseError, LeaseExpiredError, ClockOffsetError,
        ClockBackwardError, BelowFloorError, AboveCeilingError,
        GeneratorClosedError)."""
        return self._next(1)[0][0]

    def next_ids(self, n: int) -> list[int]:
        """n Snowflake IDs, increasing, all of one lease. On a refusal the
        RefusedError carries the IDs issued before it (``ids``)."""
        return self._next(n)[0]

    def next_ids_fenced(self, n: int) -> tuple[list[int], LeaseToken]:
        """next_ids(), with the fencing token of the lease that made them."""
        return self._next(n)

    def ready(self) -> None:
        """Returns when an ID can be issued now; raises the RefusedError
        next_id would raise otherwise."""
        if self._forked:
            raise GeneratorClosedError("a Generator does not survive fork: make one in this process")
        with self._lock:
            if self._closed:
                raise GeneratorClosedError("closed")
            ls = self._lease
            if ls is None:
                raise NoLeaseError(self._no_lease_reason())
            self._check_locked(ls)
            now = self._clock.wall_ms()
            if ls.last_ts is not None and ls.last_ts - now > ls.max_backward_wait_ms:
                raise ClockBackwardError(f"the clock is {ls.last_ts - now} ms behind the last ID issued")
            if ls.floor_ms - now > ls.max_backward_wait_ms:
                raise BelowFloorError(f"the clock is {ls.floor_ms - now} ms below the lease's floor")
            if max(now, ls.floor_ms) > ls.ceiling_ms:
                raise AboveCeilingError("the lease's ceiling is reached; waiting for a heartbeat to raise it")

    def status(self) -> GeneratorStatus:
        """A snapshot of the lease and the counters."""
        try:
            self.ready()
            ready = True
        except RefusedError:
            ready = False
        with self._lock:
            ls = self._lease
            return GeneratorStatus(
                holder=self._holder,
                held=ls is not None,
                lease=ls.token() if ls else None,
                floor_ms=ls.floor_ms if ls else None,
                ceiling_ms=ls.ceiling_ms if ls else None,
                valid_for=(ls.deadline - self._clock.monotonic()) if ls else 0.0,
                clock_offset_ms=ls.offset_ms if ls else None,
                last_timestamp_ms=ls.last_ts if ls else None,
                last_error=self._last_error,
                ready=ready,
                claims=self._claims,
                lost=self._lost,
                heartbeat_failures=self._hb_failures,
                releases=self._releases,
            )

    def close(self, timeout: float = 10.0) -> None:
        """Stops issuing at once, stops the lease thread and waits for it
        (an acquire or heartbeat in flight ends within its own timeout), and
        releases the lease with the timestamp of the last ID issued (or
        none_issued), so that the next holder can start right after it;
        ``timeout`` bounds the release. A lease found lost already has
        nothing to give back: that is no error. A release that fails
        otherwise raises its error; the lease then expires after its ttl,
        with its ceiling untouched. Calling close again does nothing."""
        if self._forked:
            return  # the lease is the parent's: never release it from here
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._close_timeout = timeout
            self._cv.notify_all()
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self._t.close()
        if self._release_error is not None:
            raise self._release_error

    # --- issuing -------------------------------------------------------------

    def _next(self, n: int) -> tuple[list[int], LeaseToken]:
        if type(n) is not int or n < 1:
            raise ValueError(f"count {n!r}: want an int of at least 1")
        out: list[int] = []
        first: _Lease | None = None
        stalled_since = self._clock.monotonic()
        issued = 0
        while True:
            if self._forked:
                raise GeneratorClosedError("a Generator does not survive fork: make one in this process")
            with self._lock:
                ls = self._lease
                tok = first.token() if first is not None else None
                if self._closed:
                    raise GeneratorClosedError("closed", out, tok)
                if ls is None or (first is not None and ls is not first):
                    # Lost (and maybe replaced) while this batch waited: its
                    # IDs so far are of the old lease, all issued in time.
                    raise NoLeaseError(self._no_lease_reason(), out, tok)
                first = ls
                try:
                    wait = self._issue_locked(ls, n, out)
                except RefusedError as e:
                    e.ids, e.lease = out, ls.token()
                    raise
                if wait is None:
                    return out, ls.token()
                limit = ls.max_backward_wait_ms / 1000 + _STALL_SLACK
            # Wait out the clock without the lock, then retry from the top.
            now = self._clock.monotonic()
            if len(out) > issued:
                issued, stalled_since = len(out), now
            elif now - stalled_since > limit:
                raise ClockBackwardError("the clock does not advance", out, ls.token())
            self._clock.sleep(wait)

    def _check_locked(self, ls: _Lease) -> None:
        if self._clock.monotonic() >= ls.deadline:
            raise LeaseExpiredError("the lease's local deadline passed without a successful heartbeat")
        if abs(ls.offset_ms) > ls.max_clock_offset_ms:
            raise ClockOffsetError(
                f"the clock is {ls.offset_ms:.0f} ms off the database's time, beyond {ls.max_clock_offset_ms} ms"
            )

    def _issue_locked(self, ls: _Lease, n: int, out: list[int]) -> float | None:
        """Appends IDs of ls to out until it holds n; docs/leases.md,
        "Issuing IDs". Returns None when done, or the seconds to wait (the
        lock released) before trying again: a small backward step of the
        clock, a floor just ahead, a used-up millisecond. Raises the
        refusals."""
        clock = self._clock
        lay = self._layout
        shift = lay.datacenter_bits + lay.worker_bits + lay.sequence_bits
        base = ls.dc << (lay.worker_bits + lay.sequence_bits) | ls.worker << lay.sequence_bits
        max_seq = lay.max_sequence
        epoch = lay.epoch_ms
        max_ts = lay.max_timestamp_ms
        while len(out) < n:
            self._check_locked(ls)
            now = clock.wall_ms()
            last = ls.last_ts
            if last is not None and now < last:  # the clock stepped back
                if last - now > ls.max_backward_wait_ms:
                    raise ClockBackwardError(f"the clock moved {last - now} ms backwards")
                return (last - now) / 1000
            if now < ls.floor_ms:  # a new lease above our clock
                if ls.floor_ms - now > ls.max_backward_wait_ms:
                    raise BelowFloorError(f"the clock is {ls.floor_ms - now} ms below the lease's floor")
                return (ls.floor_ms - now) / 1000
            if now == last:
                seq = ls.last_seq + 1
                if seq > max_seq:  # this millisecond is used up
                    return 0.0002
            else:
                seq = 0
            if now > ls.ceiling_ms:
                raise AboveCeilingError(f"timestamp {now} above the committed ceiling {ls.ceiling_ms}")
            if now > max_ts:
                raise AboveCeilingError(f"timestamp {now} past the layout's last millisecond {max_ts}")
            if clock.monotonic() >= ls.deadline:
                raise LeaseExpiredError("the lease's local deadline passed without a successful heartbeat")
            ls.last_ts, ls.last_seq = now, seq
            out.append((now - epoch) << shift | base | seq)
        return None

    def _no_lease_reason(self) -> str:
        if self._claim_error is not None:
            return f"no worker lease held; the last acquire failed: {self._claim_error}"
        return "no worker lease held"

    # --- the lease thread ----------------------------------------------------

    def _wait_first_lease(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        with self._cv:
            while self._lease is None:
                err = self._claim_error
                if err is not None and _permanent(err):
                    raise err
                left = end - time.monotonic()
                if left <= 0 or self._closed:
                    raise NoLeaseError(f"no lease within {timeout} s") from err
                self._cv.wait(left)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    wait = self._step()
                except Exception:  # a bug: keep the lease thread alive, say so loudly
                    self._log.exception("idgen generator: the lease thread failed; going on")
                    wait = 1.0
                if wait > 0:
                    self._wake.wait(wait)
                self._wake.clear()
        finally:
            self._release_at_exit()

    def _step(self) -> float:
        """Does what is due now; returns the seconds until the next step."""
        clock = self._clock
        now = clock.monotonic()
        with self._lock:
            ls = self._lease
        if ls is None:
            if now < self._next_claim:
                return self._next_claim - now
            try:
                ls = self._acquire()
            except IdgenError as e:
                wait = self._claim_bo.next()
                if isinstance(e, ProblemError) and e.retry_after is not None:
                    wait = max(wait, e.retry_after)
                with self._cv:
                    self._claim_error = e
                    self._last_error = str(e)
                    self._cv.notify_all()
                level = logging.DEBUG if isinstance(e, ProblemError) and e.code == "no_worker_available" else logging.WARNING
                self._log.log(level, "idgen generator: acquire failed; retrying in %.2f s: %s", wait, e)
                self._next_claim = clock.monotonic() + wait
                return wait
            self._claim_bo.reset()
            self._hb_bo = None
            # An empty grant (its floor above its ceiling): heartbeat at once,
            # to raise the ceiling above the floor.
            self._next_hb = clock.monotonic() + (0.0 if ls.floor_ms > ls.ceiling_ms else ls.heartbeat)
            return max(self._next_hb - clock.monotonic(), 0.0)
        if now >= self._next_hb:
            try:
                self._heartbeat(ls)
            except LeaseLostError:
                self._next_claim = 0.0
                return 0.0  # acquire afresh at once
            except IdgenError as e:
                if self._hb_bo is None:
                    self._hb_bo = Backoff(ls.heartbeat / 10, ls.heartbeat)
                wait = self._hb_bo.next()
                with self._lock:
                    self._hb_failures += 1
                    self._last_error = str(e)
                    left = ls.deadline - clock.monotonic()
                level = logging.ERROR if isinstance(e, ProblemError) and e.status in (400, 401, 403, 404) else logging.WARNING
                self._log.log(level, "idgen generator: heartbeat failed (valid for %.2f s more): %s", left, e)
                self._next_hb = clock.monotonic() + wait
            else:
                self._hb_bo = None
                self._next_hb = clock.monotonic() + ls.heartbeat
        return max(self._next_hb - clock.monotonic(), 0.0)

    def _propose_ceiling(self, mono: float, wall_ms: int) -> int:
        """The ceiling to ask for: this clock + ttl, but never more than the
        database's expected time + ttl + the allowed offset."""
        c = wall_ms + self._ttl_ms
        ref = self._db_ref
        if ref is not None:
            db_ms, mono_ref, max_off = ref
            expected = db_ms + (mono - mono_ref) * 1000
            c = min(c, int(expected) + self._ttl_ms + max_off)
        return c

    def _acquire(self) -> _Lease:
        clock = self._clock
        mono_sent = clock.monotonic()
        wall_sent = clock.wall_ms()
        body: dict[str, object] = {
            "holder": self._holder,
            "datacenter": self._dc,
            "ttl_ms": self._ttl_ms,
            "ceiling_ms": self._propose_ceiling(mono_sent, wall_sent),
        }
        if self._workers is not None:
            body["workers"] = {"min": self._workers[0], "max": self._workers[1]}
        if self._max_floor_ahead_ms is not None:
            body["max_prev_ceiling_ms"] = wall_sent + self._max_floor_ahead_ms
        margin = self._opt_margin if self._opt_margin is not None else self._ttl / 10
        g = self._t.call(
            "POST", "/v1/leases", want=201, body=body, timeout=min(self._request_timeout, self._ttl - margin)
        )
        mono_recv = clock.monotonic()
        wall_recv = clock.wall_ms()
        ls, db_ms = self._lease_of_grant(g)
        rtt = mono_recv - mono_sent
        ls.deadline = mono_sent + self._ttl - ls.margin  # time read BEFORE sending
        ls.offset_ms = db_ms - (wall_recv - rtt * 1000 / 2)
        with self._cv:
            self._db_ref = (float(db_ms), mono_sent + rtt / 2, ls.max_clock_offset_ms)
            self._lease = ls
            self._claims += 1
            self._claim_error = None
            self._last_error = None
            self._cv.notify_all()
        self._log.info(
            "idgen generator: lease acquired: worker %d/%d v%d, floor %d, ceiling %d",
            ls.dc, ls.worker, ls.version, ls.floor_ms, ls.ceiling_ms,
        )
        if abs(ls.offset_ms) > ls.max_clock_offset_ms:
            self._log.error(
                "idgen generator: clock %.0f ms off the database's time, beyond %d ms: refusing to issue",
                ls.offset_ms, ls.max_clock_offset_ms,
            )
        return ls

    def _lease_of_grant(self, g: dict[str, object]) -> tuple[_Lease, int]:
        """The lease of an acquire answer, checked against what was asked;
        BadResponseError for anything else (the lease granted then expires
        unused, and the next acquire with this holder takes it again at a
        new version)."""

        def num(name: str, lo: int) -> int:
            v = g.get(name)
            if type(v) is not int or v < lo:
                raise BadResponseError(f"idgen generator: POST /v1/leases: {name} {v!r}: want an int >= {lo}")
            return v

        dc, worker, version = num("datacenter", 0), num("worker", 0), num("fencing_version", 1)
        floor_ms, ceiling_ms, ttl_ms = num("floor_ms", 1), num("ceiling_ms", 0), num("ttl_ms", 1)
        hb_ms, margin_ms = num("heartbeat_ms", 1), num("margin_ms", 0)
        off_ms, back_ms, db_ms = num("max_clock_offset_ms", 0), num("max_backward_wait_ms", 0), num("db_time_ms", 1)
        secret = g.get("lease_secret")
        lo, hi = self._workers if self._workers is not None else (0, self._layout.max_worker)
        problem = ""
        if not isinstance(secret, str) or not secret:
            problem = "no lease_secret"
        elif ttl_ms != self._ttl_ms:
            problem = f"asked for a ttl of {self._ttl_ms} ms, granted {ttl_ms}"
        elif dc != self._dc or not lo <= worker <= hi:
            problem = f"asked for a worker ID of {self._dc}/{lo}-{hi}, granted {dc}/{worker}"
        elif ceiling_ms < floor_ms - 1:
            problem = f"ceiling {ceiling_ms} below floor {floor_ms} - 1"
        elif isinstance(g.get("layout"), dict) and _layout_or_none(g["layout"]) != self._layout:
            problem = "the grant's layout differs from the cluster's"
        if problem:
            raise BadResponseError(f"idgen generator: POST /v1/leases: {problem}")
        assert isinstance(secret, str)
        hb = self._opt_heartbeat if self._opt_heartbeat is not None else hb_ms / 1000
        margin = self._opt_margin if self._opt_margin is not None else margin_ms / 1000
        if not 0 < hb <= self._ttl / 2 or not 0 <= margin < self._ttl / 2:
            raise BadResponseError(
                f"idgen generator: POST /v1/leases: heartbeat {hb} s and margin {margin} s break the rules for a ttl of {self._ttl} s"
            )
        max_off = off_ms if self._opt_max_offset is None else round(self._opt_max_offset * 1000)
        back = back_ms if self._opt_backward is None else round(self._opt_backward * 1000)
        ls = _Lease(dc, worker, version, secret, floor_ms, ceiling_ms, hb, margin, max_off, back, 0.0, 0.0)
        return ls, db_ms

    def _heartbeat(self, ls: _Lease) -> None:
        """docs/leases.md, "Heartbeat". Raises LeaseLostError after dropping
        the lease, and any other failure as it came (the deadline stands)."""
        clock = self._clock
        mono_sent = clock.monotonic()
        proposal = self._propose_ceiling(mono_sent, clock.wall_ms())
        with self._lock:
            deadline = ls.deadline
        path = f"/v1/leases/{ls.dc}/{ls.worker}/heartbeat"
        body = {
            "holder": self._holder,
            "fencing_version": ls.version,
            "lease_secret": ls.secret,
            "ttl_ms": self._ttl_ms,
            "ceiling_ms": proposal,
        }
        # Bounded, so that a request that hangs does not stop the schedule.
        timeout = max(deadline - mono_sent, ls.heartbeat)
        try:
            doc = self._t.call("POST", path, want=200, body=body, timeout=timeout)
        except LeaseLostError as e:
            with self._cv:
                if self._lease is ls:
                    self._lease = None
                    self._lost += 1
                    last = ls.last_ts
                    self._last_error = str(e)
                    self._cv.notify_all()
                else:
                    last = None
            self._log.error(
                "idgen generator: lease lost (worker %d/%d v%d, last timestamp %s): stopped issuing, acquiring afresh",
                ls.dc, ls.worker, ls.version, last,
            )
            raise
        mono_recv = clock.monotonic()
        wall_recv = clock.wall_ms()
        version, ceiling, ttl_ms, db_ms = (doc.get(k) for k in ("fencing_version", "ceiling_ms", "ttl_ms", "db_time_ms"))
        if (
            version != ls.version
            or ttl_ms != self._ttl_ms
            or type(ceiling) is not int
            or type(db_ms) is not int
            or db_ms <= 0
        ):
            raise BadResponseError(
                f"idgen generator: POST {path}: version {version!r} (sent {ls.version}), "
                f"ttl {ttl_ms!r} ms (sent {self._ttl_ms}), ceiling {ceiling!r}, db time {db_ms!r}"
            )
        rtt = mono_recv - mono_sent
        offset = db_ms - (wall_recv - rtt * 1000 / 2)
        with self._lock:
            self._db_ref = (float(db_ms), mono_sent + rtt / 2, ls.max_clock_offset_ms)
            if self._lease is not ls:
                return
            was_bad = abs(ls.offset_ms) > ls.max_clock_offset_ms
            ls.ceiling_ms = ceiling  # only now, after the database committed it
            ls.deadline = mono_sent + self._ttl - ls.margin  # from the send: a late answer is still good
            ls.offset_ms = offset
            self._last_error = None
        bad = abs(offset) > ls.max_clock_offset_ms
        if bad and not was_bad:
            self._log.error("idgen generator: clock %.0f ms off the database's time: refusing to issue", offset)
        elif was_bad and not bad:
            self._log.info("idgen generator: clock offset back within the limit (%.0f ms)", offset)

    def _release_at_exit(self) -> None:
        """docs/leases.md, "Release": the lease thread's last act."""
        with self._lock:
            ls, self._lease = self._lease, None
            timeout = self._close_timeout
        if ls is None:
            return
        path = f"/v1/leases/{ls.dc}/{ls.worker}/release"
        body: dict[str, object] = {"holder": self._holder, "fencing_version": ls.version, "lease_secret": ls.secret}
        if ls.last_ts is None:
            body["none_issued"] = True
        else:
            body["last_timestamp_ms"] = ls.last_ts
        try:
            self._t.call("POST", path, want=200, body=body, timeout=timeout)
        except LeaseLostError as e:
            self._log.warning("idgen generator: lease gone before its release (expired, evicted or taken over): %s", e)
            return
        except IdgenError as e:
            self._log.warning("idgen generator: release failed; the lease expires after its ttl: %s", e)
            self._release_error = e
            return
        with self._lock:
            self._releases += 1
        self._log.info("idgen generator: lease released: worker %d/%d v%d, last timestamp %s", ls.dc, ls.worker, ls.version, ls.last_ts)

    def _after_fork_in_child(self) -> None:
        self._forked = True
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)


def _permanent(err: IdgenError) -> bool:
    """Whether a failed acquire fails again however often it is retried."""
    if isinstance(err, ProblemError):
        return err.status in (400, 401, 403, 404)
    return isinstance(err, BadResponseError)


def _layout_or_none(doc: object) -> Layout | None:
    if not isinstance(doc, dict):
        return None
    try:
        return Layout.from_json(doc)
    except ValueError:
        return None


def _check_holder(holder: str) -> None:
    if not isinstance(holder, str) or not 1 <= len(holder) <= MAX_HOLDER_LEN:
        raise ValueError(f"holder: want 1 to {MAX_HOLDER_LEN} characters")
    if not all("\x21" <= c <= "\x7e" for c in holder):
        raise ValueError("holder must be printable ASCII without spaces")


def _default_holder() -> str:
    host = "".join(c if "\x21" <= c <= "\x7e" and c != "/" else "-" for c in (socket.gethostname() or "unknown"))
    return f"{host[:120]}/{os.getpid()}/{secrets.token_hex(4)}"


_generators: weakref.WeakSet[Generator] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for g in list(_generators):
        g._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
