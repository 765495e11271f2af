"""Per-key rate limiting (per client address, API key, user, ...): one token bucket per key."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable, Optional

from .bucket import TokenBucket
from .clock import Clock, MonotonicClock


@dataclass(frozen=True)
class Decision:
    """The outcome of :meth:`KeyedRateLimiter.hit`.

    allowed      whether the request may proceed (its tokens were spent)
    remaining    tokens left for the key after this request
    retry_after  seconds until a request of the same cost would be allowed; 0.0 if allowed
    """

    allowed: bool
    remaining: int
    retry_after: float


class KeyedRateLimiter:
    """A token bucket per key, all with the same ``capacity`` and ``rate``, created on first use.

    At most ``max_keys`` buckets are kept. To make room, buckets that have refilled completely are
    dropped first (a full bucket is the same as a new one, so forgetting it changes nothing), then the
    least recently used.
    """

    def __init__(self, capacity: int, rate: float, *, clock: Optional[Clock] = None, max_keys: int = 10_000) -> None:
        if max_keys < 1:
            raise ValueError(f"max_keys must be at least 1, got {max_keys!r}")
        TokenBucket(capacity, rate)  # validate the parameters once, up front
        self.capacity = capacity
        self.rate = rate
        self.max_keys = max_keys
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._buckets: OrderedDict[Hashable, TokenBucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._buckets

    def hit(self, key: Hashable, cost: int = 1) -> Decision:
        """Try to spend ``cost`` tokens from ``key``'s bucket."""
        bucket = self._bucket(key)
        if bucket.try_acquire(cost):
            return Decision(True, bucket.tokens, 0.0)
        return Decision(False, bucket.tokens, bucket.time_until_available(cost))

    def peek(self, key: Hashable) -> int:
        """Tokens available to ``key`` now, without spending any (a new key has a full bucket)."""
        bucket = self._buckets.get(key)
        return self.capacity if bucket is None else bucket.tokens

    def reset(self, key: Hashable) -> None:
        """Forget ``key``: its next request starts with a full bucket."""
        self._buckets.pop(key, None)

    def _bucket(self, key: Hashable) -> TokenBucket:
        bucket = self._buckets.get(key)
        if bucket is not None:
            self._buckets.move_to_end(key)
            return bucket
        if len(self._buckets) >= self.max_keys:
            self._make_room()
        bucket = self._buckets[key] = TokenBucket(self.capacity, self.rate, clock=self._clock)
        return bucket

    def _make_room(self) -> None:
        for key in [key for key, bucket in self._buckets.items() if bucket.tokens >= self.capacity]:
            del self._buckets[key]
        while len(self._buckets) >= self.max_keys:
            self._buckets.popitem(last=False)
