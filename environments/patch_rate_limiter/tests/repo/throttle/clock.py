"""Clocks: where buckets read the time. Injected, so that tests and simulations control time."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Anything with a ``now()`` returning seconds on a scale that never goes backwards."""

    def now(self) -> float: ...


class MonotonicClock:
    """The real clock, :func:`time.monotonic`."""

    def now(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {seconds!r})")
        self._now += seconds

    def set(self, now: float) -> None:
        """Move the clock forward to ``now``."""
        if now < self._now:
            raise ValueError(f"a clock cannot go backwards (from {self._now!r} to {now!r})")
        self._now = float(now)
