"""The Snowflake bit layout of an idgen cluster."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Layout", "Parts", "DEFAULT_EPOCH_MS", "MAX_ID"]

DEFAULT_EPOCH_MS = 1767225600000  # 2026-01-01T00:00:00Z
MAX_ID = (1 << 63) - 1


@dataclass(frozen=True)
class Parts:
    """The parts of a Snowflake ID."""

    id: int
    timestamp_ms: int  # Unix milliseconds
    datacenter: int
    worker: int
    sequence: int

    @property
    def time(self) -> _dt.datetime:
        """The timestamp as an aware datetime in UTC."""
        return _dt.datetime.fromtimestamp(self.timestamp_ms / 1000, tz=_dt.timezone.utc)


@dataclass(frozen=True)
class Layout:
    """A Snowflake layout: from the most significant bit down, a 0 sign
    bit, time_bits of milliseconds since epoch_ms, datacenter_bits,
    worker_bits and sequence_bits; the widths add up to at most 63 (53 on a
    cluster of the js53 preset, whose IDs JavaScript holds). Read it from
    the cluster (GET /v1/leases/layout, which a Generator does): never
    assume the default."""

    time_bits: int = 41
    datacenter_bits: int = 5
    worker_bits: int = 5
    sequence_bits: int = 12
    epoch_ms: int = DEFAULT_EPOCH_MS

    def __post_init__(self) -> None:
        widths = (self.time_bits, self.datacenter_bits, self.worker_bits, self.sequence_bits)
        if any(type(w) is not int or w < 0 or w > 63 for w in widths):
            raise ValueError(f"layout widths {widths}: each must be an int in 0..63")
        if self.time_bits < 1:
            raise ValueError("layout: time bits must be at least 1")
        if sum(widths) > 63:
            raise ValueError(f"layout widths {widths} sum to {sum(widths)}, want at most 63")
        if type(self.epoch_ms) is not int or self.epoch_ms < 0:
            raise ValueError(f"layout epoch_ms {self.epoch_ms!r}: want a non-negative int")

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Layout:
        """The layout of a JSON object as the lease API writes it
        (time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms).
        Raises ValueError for anything else."""
        names = ("time_bits", "datacenter_bits", "worker_bits", "sequence_bits", "epoch_ms")
        vals = [doc.get(n) for n in names]
        if not all(type(v) is int for v in vals):
            raise ValueError(f"layout: want the integers {', '.join(names)}")
        t, d, w, s, e = (v for v in vals if isinstance(v, int))
        return cls(t, d, w, s, e)

    @property
    def max_datacenter(self) -> int:
        return (1 << self.datacenter_bits) - 1

    @property
    def max_worker(self) -> int:
        return (1 << self.worker_bits) - 1

    @property
    def max_sequence(self) -> int:
        return (1 << self.sequence_bits) - 1

    @property
    def max_timestamp_ms(self) -> int:
        """The last Unix millisecond the layout can hold."""
        return self.epoch_ms + (1 << self.time_bits) - 1

    def compose(self, timestamp_ms: int, datacenter: int, worker: int, sequence: int) -> int:
        """The ID of a timestamp (Unix ms), datacenter, worker and sequence.
        Raises ValueError for a part out of range."""
        t = timestamp_ms - self.epoch_ms
        if not 0 <= t < (1 << self.time_bits):
            raise ValueError(f"timestamp {timestamp_ms} outside the layout's time range")
        if not 0 <= datacenter <= self.max_datacenter:
            raise ValueError(f"datacenter {datacenter} outside 0..{self.max_datacenter}")
        if not 0 <= worker <= self.max_worker:
            raise ValueError(f"worker {worker} outside 0..{self.max_worker}")
        if not 0 <= sequence <= self.max_sequence:
            raise ValueError(f"sequence {sequence} outside 0..{self.max_sequence}")
        return (
            t << (self.datacenter_bits + self.worker_bits + self.sequence_bits)
            | datacenter << (self.worker_bits + self.sequence_bits)
            | worker << self.sequence_bits
            | sequence
        )

    def decompose(self, id: int) -> Parts:
        """The parts of a Snowflake ID. Raises ValueError for an int
        outside 0..2^63-1."""
        if type(id) is not int or not 0 <= id <= MAX_ID:
            raise ValueError(f"ID {id!r}: want an int in 0..2^63-1")
        seq = id & self.max_sequence
        worker = (id >> self.sequence_bits) & self.max_worker
        dc = (id >> (self.sequence_bits + self.worker_bits)) & self.max_datacenter
        t = id >> (self.sequence_bits + self.worker_bits + self.datacenter_bits)
        return Parts(id=id, timestamp_ms=t + self.epoch_ms, datacenter=dc, worker=worker, sequence=seq)
