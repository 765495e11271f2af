"""No-verdict accounting: count samples without a verdict and say so when there are too many.

An environment that suddenly fails (a broken image, an engine in trouble) shows up as a burst of samples
without a verdict. Those samples are not trained on, so nothing else would notice: the monitor counts them in
blocks and logs one warning for a block with more than ``limit`` of them, naming the dominant error types.
A rising count is also what a policy that learned to break its sandbox looks like.

Each cause is also logged once per block, the first time it appears there, with its reason and environment, so
an engine restart, a full disk or a vanished image leaves one clear line per cause and block rather than one per
sample, or nothing until the limit is passed.

**Clocks.** Every deadline of deepgym's runs on the monotonic clock, which no clock step moves. The monitor
still notes when the wall clock jumps (an NTP step, a VM resumed, someone's ``date -s``) against it, by more
than :data:`CLOCK_STEP_S`, and logs it once: log timestamps around it are out of order, not the verdicts. Its
clocks are attributes (``wall``, ``monotonic``), the injection point the chaos tests use.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

log = logging.getLogger("deepgym")
# A gap between the wall clock's and the monotonic clock's progress beyond this is a step of the wall clock.
CLOCK_STEP_S = 2.0


class NoVerdictMonitor:
    """Counts samples in blocks of ``block`` (100) and warns once for a block in which more than ``limit`` (5)
    had no verdict, as soon as the sample over the limit arrives. Thread-safe."""

    def __init__(self, block: int = 100, limit: int = 5, what: str = "had no verdict"):
        self.block = block
        self.limit = limit
        self.what = what
        self.wall: Callable[[], float] = time.time
        self.monotonic: Callable[[], float] = time.monotonic
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.samples = 0
            self.no_verdict = 0
            self.warnings = 0
            self.block_samples = 0
            self.block_no_verdict = 0
            self.clock_steps = 0
            self.by_error_type: Counter[str] = Counter()
            self._block_types: Counter[str] = Counter()
            self._clocks: tuple[float, float] | None = None
            self.unhealthy: dict[str, str] = {}
            self.canary_failures = 0

    def record(self, no_verdict: bool, error_type: str | None = None, *, reason: str | None = None,
               environment: str | None = None) -> None:
        """Count one sample; ``no_verdict`` when it had none (``error_type`` says why, ``reason`` in words)."""
        message = None
        first = None
        with self._lock:
            step = self._clock_step()
            self.samples += 1
            self.block_samples += 1
            if no_verdict:
                self.no_verdict += 1
                self.block_no_verdict += 1
                self.by_error_type[error_type or "unknown"] += 1
                self._block_types[error_type or "unknown"] += 1
                if self._block_types[error_type or "unknown"] == 1:
                    first = (f"deepgym: no verdict ({error_type or 'unknown'})"
                             f"{f' for {environment}' if environment else ''}: {reason or 'no reason given'}")
                if self.block_no_verdict == self.limit + 1:
                    self.warnings += 1
                    kinds = ", ".join(f"{kind} x{n}" for kind, n in self._block_types.most_common())
                    message = (f"deepgym: {self.block_no_verdict} of the last {self.block_samples} samples {self.what} "
                               f"(mostly {kinds}); more than {self.limit} in a block of {self.block}. Check the engine "
                               "and the images; a policy that learns to trigger failures also escapes their penalty.")
            if self.block_samples == self.block:
                self.block_samples = 0
                self.block_no_verdict = 0
                self._block_types.clear()
        for line in (step, first, message):
            if line:
                log.warning(line)

    def _clock_step(self) -> str | None:
        """A line saying the wall clock stepped since the last sample, or None (called with the lock held)."""
        now = (self.wall(), self.monotonic())
        last, self._clocks = self._clocks, now
        if last is None:
            return None
        gap = (now[0] - last[0]) - (now[1] - last[1])
        if abs(gap) <= CLOCK_STEP_S:
            return None
        self.clock_steps += 1
        return (f"deepgym: the wall clock stepped {'back' if gap < 0 else 'forward'} by {abs(gap):.0f} s; deepgym's "
                "deadlines run on the monotonic clock, so no sample's time limits moved (only log timestamps did)")

    def canary(self, image: str, failure: str | None) -> None:
        """Note which canary of the image named ``image`` failed and how (:mod:`deepgym.canary`), or, with None,
        that its canaries passed. Unhealthy images are listed in :meth:`snapshot` until then."""
        with self._lock:
            if failure is None:
                self.unhealthy.pop(image, None)
            else:
                self.canary_failures += 1
                self.unhealthy[image] = failure

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {"samples": self.samples, "no_verdict": self.no_verdict, "warnings": self.warnings,
                    "block_samples": self.block_samples, "block_no_verdict": self.block_no_verdict,
                    "by_error_type": dict(self.by_error_type), "canary_failures": self.canary_failures,
                    "unhealthy_images": dict(self.unhealthy)}
