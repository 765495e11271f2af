import pytest

from throttle import Decision, KeyedRateLimiter, ManualClock


def make(capacity=3, rate=1.0, max_keys=100):
    clock = ManualClock()
    return KeyedRateLimiter(capacity, rate, clock=clock, max_keys=max_keys), clock


def test_rejects_bad_parameters():
    with pytest.raises(ValueError):
        KeyedRateLimiter(0, 1.0)
    with pytest.raises(ValueError):
        KeyedRateLimiter(3, 0)
    with pytest.raises(ValueError):
        KeyedRateLimiter(3, 1.0, max_keys=0)


def test_first_hit_allowed():
    limiter, _ = make(capacity=3)
    decision = limiter.hit("203.0.113.7")
    assert isinstance(decision, Decision)
    assert decision.allowed and decision.retry_after == 0.0


def test_keys_are_independent():
    limiter, _ = make(capacity=3)
    while limiter.hit("a").allowed:
        pass
    assert not limiter.hit("a").allowed
    assert limiter.hit("b").allowed


def test_peek_does_not_spend():
    limiter, _ = make(capacity=3)
    assert limiter.peek("new") == 3
    limiter.hit("a", cost=2)
    assert limiter.peek("a") == limiter.peek("a")
    assert "new" not in limiter


def test_reset_forgets_key():
    limiter, _ = make(capacity=3)
    while limiter.hit("a").allowed:
        pass
    limiter.reset("a")
    assert "a" not in limiter
    assert limiter.hit("a").allowed


def test_full_buckets_evicted_first():
    limiter, clock = make(capacity=2, rate=1.0, max_keys=2)
    limiter.hit("a")
    limiter.hit("b")
    clock.advance(5)  # both buckets are full again
    limiter.hit("a")  # "a" is not full any more
    limiter.hit("c")
    assert "a" in limiter and "c" in limiter and "b" not in limiter
    assert len(limiter) == 2


def test_least_recently_used_evicted_when_none_full():
    limiter, _ = make(capacity=2, rate=0.001, max_keys=2)
    limiter.hit("a")
    limiter.hit("b")
    limiter.hit("a")
    limiter.hit("c")
    assert "a" in limiter and "c" in limiter and "b" not in limiter


def test_cost_above_capacity_raises():
    limiter, _ = make(capacity=3)
    with pytest.raises(ValueError):
        limiter.hit("a", cost=4)
