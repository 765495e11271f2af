"""A bucket must hand out exactly its capacity in a burst and refill at exactly its rate, however often
it is looked at. Times and rates are chosen so that every product is exact in binary floating point."""

from throttle import KeyedRateLimiter, ManualClock, TokenBucket


def make(capacity, rate, tokens=None):
    clock = ManualClock()
    return TokenBucket(capacity, rate, clock=clock, tokens=tokens), clock


def drain(bucket):
    taken = 0
    while bucket.try_acquire():
        taken += 1
    return taken


def test_burst_uses_the_whole_capacity():
    bucket, _ = make(capacity=5, rate=1.0)
    assert [bucket.try_acquire() for _ in range(6)] == [True] * 5 + [False]
    assert bucket.tokens == 0


def test_capacity_one_bucket_allows_one_request():
    bucket, clock = make(capacity=1, rate=1.0)
    assert bucket.try_acquire()
    assert not bucket.try_acquire()
    clock.advance(1.0)
    assert bucket.try_acquire()


def test_acquire_every_token_at_once():
    bucket, _ = make(capacity=3, rate=1.0)
    assert bucket.try_acquire(3)
    assert bucket.tokens == 0


def test_time_until_available_agrees_with_try_acquire():
    bucket, _ = make(capacity=4, rate=1.0, tokens=2)
    assert bucket.time_until_available(2) == 0.0
    assert bucket.try_acquire(2)
    assert bucket.time_until_available(1) == 1.0


def test_frequent_polling_keeps_the_configured_rate():
    bucket, clock = make(capacity=100, rate=8.0, tokens=0)
    taken = 0
    for _ in range(16):  # 16 polls, 3/16 s apart: 3 seconds in all
        clock.advance(0.1875)
        taken += drain(bucket)
    assert taken == 24


def test_refill_does_not_depend_on_how_often_the_bucket_is_read():
    watched, clock = make(capacity=100, rate=3.0, tokens=0)
    untouched = TokenBucket(100, 3.0, clock=clock, tokens=0)
    for _ in range(8):
        clock.advance(0.25)
        watched.tokens
    assert watched.tokens == untouched.tokens == 6


def test_long_run_average_rate():
    bucket, clock = make(capacity=10, rate=4.0, tokens=0)
    taken = 0
    for _ in range(100):  # 12.5 seconds, half a token per poll
        clock.advance(0.125)
        taken += drain(bucket)
    assert taken == 50


def test_time_until_available_counts_partial_progress():
    bucket, clock = make(capacity=1, rate=2.0, tokens=0)
    clock.advance(0.25)
    assert bucket.time_until_available() == 0.25
    clock.advance(0.125)
    assert bucket.time_until_available() == 0.125
    clock.advance(0.125)
    assert bucket.time_until_available() == 0.0
    assert bucket.try_acquire()


def test_waiting_exactly_the_advertised_time_succeeds():
    bucket, clock = make(capacity=2, rate=4.0)
    assert drain(bucket) == 2
    for _ in range(10):
        clock.advance(0.125)
        assert not bucket.try_acquire()
        clock.advance(bucket.time_until_available())
        assert bucket.try_acquire()


def test_keyed_limiter_allows_capacity_requests():
    limiter = KeyedRateLimiter(3, 4.0, clock=ManualClock())
    decisions = [limiter.hit("client") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0]


def test_denied_request_gets_a_positive_retry_after():
    clock = ManualClock()
    limiter = KeyedRateLimiter(2, 4.0, clock=clock)
    limiter.hit("k")
    limiter.hit("k")
    denied = limiter.hit("k")
    assert not denied.allowed and denied.retry_after == 0.25
    clock.advance(0.125)
    assert limiter.hit("k").retry_after == 0.125
    clock.advance(0.125)
    assert limiter.hit("k").allowed


def test_refused_cost_is_not_spent():
    limiter = KeyedRateLimiter(5, 1.0, clock=ManualClock())
    assert limiter.hit("k", cost=5).allowed
    refused = limiter.hit("k", cost=2)
    assert not refused.allowed and refused.remaining == 0 and refused.retry_after == 2.0
