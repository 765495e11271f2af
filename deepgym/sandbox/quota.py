"""A provider account's limits as this process sees them: how many sandboxes may be alive at once and how fast
they may be created. Every remote adapter holds one :class:`AccountLimits`; a create waits for a slot and for
its turn, so a burst of samples queues here instead of being refused by the provider as a 429 (which would be
a no-verdict sample).

The bound is per process. A bound shared by every deepgym process of a host (and of a Ray cluster) belongs to
deepgym's admission control and is not built here.
"""

from __future__ import annotations

import threading
import time

from .base import StartFailure


class AccountLimits:
    """At most ``max_sandboxes`` alive at once, at most ``creates_per_s`` creations per second (None: no
    limit). :meth:`acquire` before a create, :meth:`release` once the sandbox is deleted (or never made)."""

    def __init__(self, provider: str, *, max_sandboxes: int, creates_per_s: float | None, wait_s: float = 600.0):
        if max_sandboxes < 1:
            raise ValueError(f"{provider}: max_sandboxes must be at least 1, not {max_sandboxes}")
        if creates_per_s is not None and creates_per_s <= 0:
            raise ValueError(f"{provider}: creates_per_s must be positive or None, not {creates_per_s}")
        self.provider = provider
        self.max_sandboxes = max_sandboxes
        self.creates_per_s = creates_per_s
        self.wait_s = wait_s
        self._slots = threading.BoundedSemaphore(max_sandboxes)
        self._lock = threading.Lock()
        self._next_create = 0.0

    def acquire(self) -> None:
        """Wait for a free slot and for the next creation turn. Raises StartFailure after ``wait_s``."""
        if not self._slots.acquire(timeout=self.wait_s):
            raise StartFailure(f"no {self.provider} sandbox slot came free in {self.wait_s:g}s (at most "
                               f"{self.max_sandboxes} alive at once); raise max_sandboxes if the account allows it")
        if self.creates_per_s is None:
            return
        with self._lock:
            now = time.monotonic()
            turn = max(now, self._next_create)
            self._next_create = turn + 1.0 / self.creates_per_s
        time.sleep(max(0.0, turn - now))

    def release(self) -> None:
        self._slots.release()
