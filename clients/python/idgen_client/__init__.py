"""The Python client of idgen, the unique 64-bit ID service.

- Client: Snowflake IDs (ids, draw), IDs of a segment namespace
  (namespace_ids, draw_namespace) and the decomposition of an ID (parse)
  over idgen's HTTP API, with a token, retries that honour Retry-After and
  an optional block cache. IDs are Python ints.
- Generator: Snowflake IDs made in this process under a worker-ID lease of
  the cluster, held through the lease API as docs/leases.md states it.
- Layout: the bit layout, to compose and decompose IDs locally.

The package uses the standard library only.
"""

import logging as _logging

from .client import SOURCE_MIXED, SOURCE_SEGMENT, SOURCE_SNOWFLAKE, CacheOptions, Client, Draw, Range
from .errors import (
    AboveCeilingError,
    BadResponseError,
    BelowFloorError,
    CallTimeoutError,
    ClockBackwardError,
    ClockOffsetError,
    ClosedError,
    ConflictError,
    ForbiddenError,
    GeneratorClosedError,
    IdgenError,
    InternalError,
    InvalidError,
    InvalidReleaseError,
    LeaseExpiredError,
    LeaseLostError,
    LeaseNotHeldError,
    LeaseToken,
    MethodNotAllowedError,
    NamespaceExhaustedError,
    NoLeaseError,
    NotFoundError,
    NoWorkerAvailableError,
    ProblemError,
    RefusedError,
    ServiceUnavailableError,
    StorageFullError,
    StaleRevisionError,
    TooLargeError,
    TooManyError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
)
from .generator import MAX_HOLDER_LEN, Clock, Generator, GeneratorStatus, SystemClock
from .layout import DEFAULT_EPOCH_MS, MAX_ID, Layout, Parts

__version__ = "0.1.0"

# A library logs to its logger and lets the application decide where that
# goes: the Generator's lease events are under "idgen_client.generator".
_logging.getLogger("idgen_client").addHandler(_logging.NullHandler())

__all__ = [
    "AboveCeilingError",
    "BadResponseError",
    "BelowFloorError",
    "CacheOptions",
    "CallTimeoutError",
    "Client",
    "Clock",
    "ClockBackwardError",
    "ClockOffsetError",
    "ClosedError",
    "ConflictError",
    "DEFAULT_EPOCH_MS",
    "Draw",
    "ForbiddenError",
    "Generator",
    "GeneratorClosedError",
    "GeneratorStatus",
    "IdgenError",
    "InternalError",
    "InvalidError",
    "InvalidReleaseError",
    "Layout",
    "LeaseExpiredError",
    "LeaseLostError",
    "LeaseNotHeldError",
    "LeaseToken",
    "MAX_HOLDER_LEN",
    "MAX_ID",
    "MethodNotAllowedError",
    "NamespaceExhaustedError",
    "NoLeaseError",
    "NotFoundError",
    "NoWorkerAvailableError",
    "Parts",
    "ProblemError",
    "Range",
    "RefusedError",
    "SOURCE_MIXED",
    "SOURCE_SEGMENT",
    "SOURCE_SNOWFLAKE",
    "ServiceUnavailableError",
    "StorageFullError",
    "StaleRevisionError",
    "SystemClock",
    "TooLargeError",
    "TooManyError",
    "TransportError",
    "UnauthorizedError",
    "UnavailableError",
]
