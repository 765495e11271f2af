"""No-verdict accounting: count samples without a verdict and say so when there are too many.

An environment that suddenly fails (a broken image, an engine in trouble) shows up as a burst of samples
without a verdict. Those samples are not trained on, so nothing else would notice: the monitor counts them in
blocks and logs one warning for a block with more than ``limit`` of them, naming the dominant error types.
A rising count is also what a policy that learned to break its sandbox looks like.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

log = logging.getLogger("deepgym")


class NoVerdictMonitor:
    """Counts samples in blocks of ``block`` (100) and warns once for a block in which more than ``limit`` (5)
    had no verdict, as soon as the sample over the limit arrives. Thread-safe."""

    def __init__(self, block: int = 100, limit: int = 5, what: str = "had no verdict"):
        self.block = block
        self.limit = limit
        self.what = what
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.samples = 0
            self.no_verdict = 0
            self.warnings = 0
            self.block_samples = 0
            self.block_no_verdict = 0
            self.by_error_type: Counter[str] = Counter()
            self._block_types: Counter[str] = Counter()
            self.unhealthy: dict[str, str] = {}
            self.canary_failures = 0

    def record(self, no_verdict: bool, error_type: str | None = None) -> None:
        """Count one sample; ``no_verdict`` when it had none (``error_type`` says why)."""
        message = None
        with self._lock:
            self.samples += 1
            self.block_samples += 1
            if no_verdict:
                self.no_verdict += 1
                self.block_no_verdict += 1
                self.by_error_type[error_type or "unknown"] += 1
                self._block_types[error_type or "unknown"] += 1
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
        if message:
            log.warning(message)

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
