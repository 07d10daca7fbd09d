"""The package's one retry delay: capped exponential backoff with jitter."""

from __future__ import annotations

import random

__all__ = ["Backoff"]


class Backoff:
    """The n-th call of next() returns a delay between half and all of
    min(cap, base * 2^(n-1)) seconds, chosen at random, so that clients that
    failed together do not retry together."""

    def __init__(self, base: float, cap: float) -> None:
        self._base = max(base, 0.001)
        self._cap = max(cap, self._base)
        self._n = 0

    def next(self) -> float:
        d = min(self._cap, self._base * (1 << min(self._n, 30)))
        self._n += 1
        return random.uniform(d / 2, d)

    def reset(self) -> None:
        self._n = 0
