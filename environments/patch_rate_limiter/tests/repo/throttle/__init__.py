"""throttle: token-bucket rate limiting with an injectable clock."""

from .bucket import TokenBucket
from .clock import Clock, ManualClock, MonotonicClock
from .keyed import Decision, KeyedRateLimiter

__all__ = ["TokenBucket", "Clock", "ManualClock", "MonotonicClock", "Decision", "KeyedRateLimiter"]

__version__ = "0.6.2"
