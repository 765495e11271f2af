"""The token bucket: bursts of up to ``capacity`` operations, ``rate`` operations per second sustained."""

from __future__ import annotations

from typing import Optional

from .clock import Clock, MonotonicClock


class TokenBucket:
    """A bucket holding up to ``capacity`` tokens that refills at ``rate`` tokens per second.

    Every operation spends one or more tokens; an operation that finds too few tokens is refused.
    Tokens are whole numbers: one is added each time another ``1 / rate`` seconds have passed, so an
    empty bucket left alone for ``t`` seconds holds ``min(capacity, floor(t * rate))`` tokens, no matter
    how often it was looked at in between. A new bucket starts full unless ``tokens`` says otherwise.

    The time comes from ``clock`` (a :class:`~throttle.clock.MonotonicClock` by default). A bucket is
    not thread-safe.
    """

    def __init__(self, capacity: int, rate: float, *, clock: Optional[Clock] = None,
                 tokens: Optional[int] = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
            raise ValueError(f"rate must be a positive number of tokens per second, got {rate!r}")
        if tokens is None:
            tokens = capacity
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= capacity:
            raise ValueError(f"tokens must be an integer between 0 and {capacity}, got {tokens!r}")
        self.capacity = capacity
        self.rate = float(rate)
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._tokens = tokens
        self._last = self._clock.now()  # when tokens were last added

    def __repr__(self) -> str:
        return f"TokenBucket(capacity={self.capacity}, rate={self.rate:g}, tokens={self.tokens})"

    def _check(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        if n > self.capacity:
            raise ValueError(f"{n} tokens can never be available: the capacity is {self.capacity}")

    def _refill(self) -> None:
        """Add the tokens earned since the last refill."""
        now = self._clock.now()
        earned = int((now - self._last) * self.rate)
        if earned > 0:
            self._tokens = min(self.capacity, self._tokens + earned)
            self._last = now

    @property
    def tokens(self) -> int:
        """The number of tokens available now."""
        self._refill()
        return self._tokens

    def try_acquire(self, n: int = 1) -> bool:
        """Spend ``n`` tokens if they are available now. Returns whether they were spent; a refused
        request spends nothing. Raises ValueError if ``n`` is not between 1 and the capacity."""
        self._check(n)
        self._refill()
        if self._tokens > n:
            self._tokens -= n
            return True
        return False

    def time_until_available(self, n: int = 1) -> float:
        """Seconds until ``n`` tokens will be available, or 0.0 if they are available now (so that
        ``try_acquire(n)`` would succeed). Raises ValueError like :meth:`try_acquire`."""
        self._check(n)
        self._refill()
        missing = n - self._tokens
        if missing <= 0:
            return 0.0
        return missing / self.rate
