"""A provider account's limits as one process keeps them: slots and the creation rate."""

from __future__ import annotations

import threading
import time

import pytest

from deepgym.sandbox import StartFailure
from deepgym.sandbox.quota import AccountLimits


def test_creations_are_spaced_by_the_rate():
    limits = AccountLimits("test", max_sandboxes=8, creates_per_s=20.0)
    started = time.monotonic()
    for _ in range(5):
        limits.acquire()
    assert time.monotonic() - started >= 4 / 20.0 * 0.9


def test_a_slot_waits_for_a_release_then_gives_up():
    limits = AccountLimits("test", max_sandboxes=1, creates_per_s=None, wait_s=0.3)
    limits.acquire()
    threading.Timer(0.1, limits.release).start()
    limits.acquire()  # the release came in time
    with pytest.raises(StartFailure, match="max_sandboxes"):
        limits.acquire()


@pytest.mark.parametrize("fields", [{"max_sandboxes": 0, "creates_per_s": None},
                                    {"max_sandboxes": 1, "creates_per_s": 0.0}])
def test_nonsense_limits_are_refused(fields):
    with pytest.raises(ValueError):
        AccountLimits("test", **fields)
