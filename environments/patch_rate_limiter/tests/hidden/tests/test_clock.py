import pytest

from throttle import ManualClock, MonotonicClock


def test_manual_clock_starts_where_told():
    assert ManualClock().now() == 0.0
    assert ManualClock(start=12.5).now() == 12.5


def test_manual_clock_advance_and_set():
    clock = ManualClock()
    clock.advance(1.5)
    clock.advance(0.25)
    assert clock.now() == 1.75
    clock.set(10)
    assert clock.now() == 10.0


def test_manual_clock_never_goes_backwards():
    clock = ManualClock(5)
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(4)


def test_monotonic_clock():
    clock = MonotonicClock()
    first = clock.now()
    assert clock.now() >= first
