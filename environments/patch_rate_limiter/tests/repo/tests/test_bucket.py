import pytest

from throttle import ManualClock, TokenBucket


def make(capacity=5, rate=1.0, tokens=None):
    clock = ManualClock()
    return TokenBucket(capacity, rate, clock=clock, tokens=tokens), clock


@pytest.mark.parametrize("capacity", [0, -1, 1.5, True], ids=["zero", "negative", "float", "bool"])
def test_rejects_bad_capacity(capacity):
    with pytest.raises(ValueError):
        TokenBucket(capacity, 1.0)


@pytest.mark.parametrize("rate", [0, -2.0, "5"], ids=["zero", "negative", "string"])
def test_rejects_bad_rate(rate):
    with pytest.raises(ValueError):
        TokenBucket(3, rate)


def test_rejects_bad_initial_tokens():
    with pytest.raises(ValueError):
        TokenBucket(3, 1.0, tokens=4)
    with pytest.raises(ValueError):
        TokenBucket(3, 1.0, tokens=-1)


def test_starts_full():
    bucket, _ = make(capacity=4)
    assert bucket.tokens == 4


def test_starts_with_given_tokens():
    bucket, _ = make(capacity=4, tokens=1)
    assert bucket.tokens == 1


def test_refill_after_whole_intervals():
    bucket, clock = make(capacity=5, rate=2.0, tokens=0)
    clock.advance(0.5)
    assert bucket.tokens == 1
    clock.advance(1.0)
    assert bucket.tokens == 3


def test_no_token_before_a_whole_interval():
    bucket, clock = make(capacity=5, rate=1.0, tokens=0)
    clock.advance(0.75)
    assert bucket.tokens == 0
    assert not bucket.try_acquire()


def test_tokens_are_whole_numbers():
    bucket, clock = make(capacity=5, rate=1.0, tokens=0)
    clock.advance(1.5)
    assert bucket.tokens == 1
    assert isinstance(bucket.tokens, int)


def test_refill_capped_at_capacity():
    bucket, clock = make(capacity=3, rate=10.0, tokens=0)
    clock.advance(60)
    assert bucket.tokens == 3


def test_refused_request_spends_nothing():
    bucket, _ = make(capacity=5, tokens=1)
    assert not bucket.try_acquire(3)
    assert bucket.tokens == 1


def test_empty_bucket_refuses():
    bucket, _ = make(capacity=2, tokens=0)
    assert not bucket.try_acquire()


def test_acquire_spends_tokens():
    bucket, _ = make(capacity=10)
    assert bucket.try_acquire(4)
    assert bucket.tokens == 6


def test_bucket_recovers_after_waiting():
    bucket, clock = make(capacity=2, rate=1.0)
    while bucket.try_acquire():
        pass
    assert not bucket.try_acquire()
    clock.advance(1.0)
    assert bucket.try_acquire()


@pytest.mark.parametrize("n", [0, -1, 2.0], ids=["zero", "negative", "float"])
def test_rejects_bad_n(n):
    bucket, _ = make()
    with pytest.raises(ValueError):
        bucket.try_acquire(n)


def test_request_above_capacity_can_never_succeed():
    bucket, _ = make(capacity=3)
    with pytest.raises(ValueError):
        bucket.try_acquire(4)
    with pytest.raises(ValueError):
        bucket.time_until_available(4)


def test_time_until_available_when_empty():
    bucket, _ = make(capacity=4, rate=2.0, tokens=0)
    assert bucket.time_until_available() == 0.5
    assert bucket.time_until_available(3) == 1.5


def test_time_until_available_with_plenty():
    bucket, _ = make(capacity=5)
    assert bucket.time_until_available(2) == 0.0


def test_default_clock():
    bucket = TokenBucket(2, 1000.0)
    assert bucket.try_acquire()


def test_repr():
    bucket, _ = make(capacity=3, rate=0.5)
    assert repr(bucket) == "TokenBucket(capacity=3, rate=0.5, tokens=3)"
