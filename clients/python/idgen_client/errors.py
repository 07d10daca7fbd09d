"""The errors of the idgen client.

Every error the package raises for the service's sake is an IdgenError.
Answers of the service that are not a success are ProblemError values,
one subclass per problem code of idgen's error table (docs/openapi.yaml),
so that callers catch what they mean: ``except NotFoundError``.

UnavailableError means "nothing to be had right now, try again shortly":
it is the base of the server's 503 (ServiceUnavailableError) and of every
refusal of a local Generator (RefusedError), which issues nothing while it
cannot prove its lease. Bad arguments raise ValueError or TypeError, as in
the rest of Python.
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "IdgenError",
    "UnavailableError",
    "TransportError",
    "BadResponseError",
    "ClosedError",
    "CallTimeoutError",
    "StaleRevisionError",
    "ProblemError",
    "InvalidError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "MethodNotAllowedError",
    "ConflictError",
    "NamespaceExhaustedError",
    "NoWorkerAvailableError",
    "LeaseLostError",
    "LeaseNotHeldError",
    "TooLargeError",
    "InvalidReleaseError",
    "TooManyError",
    "InternalError",
    "ServiceUnavailableError",
    "StorageFullError",
    "LeaseToken",
    "RefusedError",
    "NoLeaseError",
    "LeaseExpiredError",
    "ClockOffsetError",
    "ClockBackwardError",
    "BelowFloorError",
    "AboveCeilingError",
    "GeneratorClosedError",
]


class IdgenError(Exception):
    """The base of every error of this package."""


class UnavailableError(IdgenError):
    """No IDs to be had right now; a later attempt may succeed."""


class TransportError(IdgenError):
    """No answer at all: the connection was refused or dropped, or the
    attempt timed out. The cause is chained (``__cause__``)."""


class BadResponseError(IdgenError):
    """An answer the client cannot use: not JSON, too large, or breaking the
    contract (a grant of another ttl than asked for, say)."""


class ClosedError(IdgenError):
    """The Client was closed."""


class CallTimeoutError(IdgenError, TimeoutError):
    """The call's own timeout passed while it waited (for cached IDs)."""


class StaleRevisionError(IdgenError):
    """An answer for a strict namespace whose revision is not above one
    the client had seen before sending the request: a stale or replayed
    answer (a database gone back in time, a proxy repeating an answer). Its
    IDs may have been handed out before and are not returned."""

    def __init__(self, namespace: str, got: int, previous: int) -> None:
        super().__init__(
            f"idgen client: namespace {namespace!r}: stale answer: revision {got} "
            f"is not above {previous}, seen before"
        )
        self.namespace = namespace
        self.got = got
        self.previous = previous


class ProblemError(IdgenError):
    """An error answer of the service: the members of its
    application/problem+json body, the HTTP status, the Retry-After it
    advised (seconds, or None) and its X-Request-ID (give it to the
    operator: the node logs it with every line about the request)."""

    code_name: ClassVar[str] = ""

    def __init__(
        self,
        status: int,
        code: str,
        title: str = "",
        detail: str = "",
        type: str = "",
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        text = f"idgen: {status}"
        if code:
            text += f" {code}"
        if detail or title:
            text += f": {detail or title}"
        super().__init__(text)
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.type = type
        self.retry_after = retry_after
        self.request_id = request_id

    @property
    def temporary(self) -> bool:
        """Whether a later attempt may succeed: the code is one idgen's
        error table marks retry-later, or the answer is a proxy's 502, 503
        or 504."""
        return self.code in _RETRY_LATER or self.status in (502, 503, 504)


class InvalidError(ProblemError):
    """400 ``invalid``: the request is malformed."""

    code_name = "invalid"


class UnauthorizedError(ProblemError):
    """401 ``unauthorized``: no, malformed or unknown token."""

    code_name = "unauthorized"


class ForbiddenError(ProblemError):
    """403 ``forbidden``: the token lacks the route's scope."""

    code_name = "forbidden"


class NotFoundError(ProblemError):
    """404 ``not_found``: an unknown namespace, or a route that is off (the
    lease API without tokens, or without worker IDs of its own)."""

    code_name = "not_found"


class MethodNotAllowedError(ProblemError):
    """405 ``method_not_allowed``."""

    code_name = "method_not_allowed"


class ConflictError(ProblemError):
    """409 ``conflict`` (the admin API)."""

    code_name = "conflict"


class NamespaceExhaustedError(ProblemError):
    """409 ``namespace_exhausted``: fewer IDs are left up to the namespace's
    limit than were asked for. Retrying does not help."""

    code_name = "namespace_exhausted"


class NoWorkerAvailableError(ProblemError):
    """409 ``no_worker_available``: every worker ID of the pool is held."""

    code_name = "no_worker_available"


class LeaseLostError(ProblemError):
    """409 ``lease_lost``: not this holder's lease at this version with this
    secret, or expired."""

    code_name = "lease_lost"


class LeaseNotHeldError(ProblemError):
    """409 ``lease_not_held`` (the admin API's eviction)."""

    code_name = "lease_not_held"


class TooLargeError(ProblemError):
    """413 ``too_large``."""

    code_name = "too_large"


class InvalidReleaseError(ProblemError):
    """422 ``invalid_release``: a release's last timestamp outside the
    lease's floor and ceiling; nothing changed."""

    code_name = "invalid_release"


class TooManyError(ProblemError):
    """429 ``too_many``: a rate limit or the lease API's lease cap."""

    code_name = "too_many"


class StorageFullError(ProblemError):
    """507 ``storage_full``: the database is out of space and refuses every
    write (etcd's NOSPACE alarm); no node can serve until an operator frees
    space. Retried as the server's table says (retry-later), never sooner
    than its Retry-After, and not at all when that is above the client's
    max_retry_after."""

    code_name = "storage_full"


class InternalError(ProblemError):
    """500 ``internal``: a bug of the server."""

    code_name = "internal"


class ServiceUnavailableError(ProblemError, UnavailableError):
    """503 ``unavailable`` (and a proxy's 502 or 504): the node cannot
    prove its lease, or its database is unreachable."""

    code_name = "unavailable"


_CODE_CLASSES: dict[str, type[ProblemError]] = {
    cls.code_name: cls
    for cls in (
        InvalidError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        MethodNotAllowedError,
        ConflictError,
        NamespaceExhaustedError,
        NoWorkerAvailableError,
        LeaseLostError,
        LeaseNotHeldError,
        TooLargeError,
        InvalidReleaseError,
        TooManyError,
        StorageFullError,
        InternalError,
        ServiceUnavailableError,
    )
}

# The codes idgen's error table marks retry-later: a refusal of one of
# them may pass if asked again later. The Go client's TestPythonCodes
# checks this set against the server's table.
_RETRY_LATER = frozenset({"no_worker_available", "too_many", "unavailable", "storage_full"})

# The code of an answer that carried no problem body (a proxy's page).
_STATUS_CODES: dict[int, str] = {
    400: "invalid",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid_release",
    429: "too_many",
    500: "internal",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
    507: "storage_full",
}

# The longest Retry-After honoured as given; longer ones are cut to it.
_MAX_RETRY_AFTER = 24 * 3600.0


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Reads a Retry-After header, delay-seconds or an HTTP date, as seconds
    from now (Unix time ``now``). None for an absent, malformed or past one."""
    if value is None:
        return None
    v = value.strip()
    if not v:
        return None
    if v.isascii() and v.isdigit():
        secs = int(v)
        return min(float(secs), _MAX_RETRY_AFTER) if secs > 0 else None
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    d = when.timestamp() - now
    return min(d, _MAX_RETRY_AFTER) if d > 0 else None


def problem_error(status: int, headers: Mapping[str, str], body: bytes, now: float) -> ProblemError:
    """The ProblemError of a non-success answer. ``headers`` has lower-case
    names. A body that is no problem document leaves the status and a code
    derived from it."""
    code = title = detail = typ = ""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict):
        code = _str(doc.get("code"))
        title = _str(doc.get("title"))
        detail = _str(doc.get("detail"))
        typ = _str(doc.get("type"))
    if not code:
        code = _STATUS_CODES.get(status, "")
    cls = _CODE_CLASSES.get(code)
    if cls is None:
        cls = ServiceUnavailableError if status in (502, 503, 504) else ProblemError
    return cls(
        status,
        code,
        title=title,
        detail=detail,
        type=typ,
        retry_after=parse_retry_after(headers.get("retry-after"), now),
        request_id=headers.get("x-request-id"),
    )


def _str(v: object) -> str:
    return v if isinstance(v, str) else ""


@dataclass(frozen=True)
class LeaseToken:
    """The fencing token of Snowflake IDs: the worker lease that made them.
    Every claim of a worker ID increments its fencing version, so for one
    datacenter and worker a greater version is a later holder."""

    datacenter: int
    worker: int
    fencing_version: int


class RefusedError(UnavailableError):
    """A Generator issued nothing (more): it cannot prove its lease now. A
    refusal is temporary; the subclass says why. ``ids`` holds the IDs a
    batch issued before the refusal (they are valid and unique: use them or
    drop them), and ``lease`` the lease they were made under."""

    reason: ClassVar[str] = "other"

    def __init__(self, message: str, ids: list[int] | None = None, lease: LeaseToken | None = None) -> None:
        super().__init__(f"idgen generator: {message}")
        self.ids: list[int] = ids if ids is not None else []
        self.lease = lease


class NoLeaseError(RefusedError):
    """No lease held: not acquired yet, lost, or the pool is full."""

    reason = "no_lease"


class LeaseExpiredError(RefusedError):
    """The local deadline passed without a successful heartbeat."""

    reason = "expired"


class ClockOffsetError(RefusedError):
    """The wall clock is further from the database's time than allowed."""

    reason = "clock"


class ClockBackwardError(RefusedError):
    """The wall clock stepped back further than it may be waited out."""

    reason = "backward"


class BelowFloorError(RefusedError):
    """The wall clock lies below the lease's floor (the previous holder's
    ceiling + 1) by more than may be waited out."""

    reason = "below_floor"


class AboveCeilingError(RefusedError):
    """The next timestamp would pass the ceiling the database committed: a
    heartbeat must raise it first."""

    reason = "above_ceiling"


class GeneratorClosedError(RefusedError):
    """The Generator was closed (or this is a child process forked from the
    one that made it: a Generator does not survive fork)."""

    reason = "closed"
