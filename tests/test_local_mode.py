"""Local mode's runner (unconfined: every process is the caller's uid) still stops what it started.

Local mode has no isolation (README), but its timeouts must hold: a submission that sleeps past its limit is
killed with its children when the limit comes, not left for the host's deadline."""

from __future__ import annotations

import time

import pytest

from deepgym import DeepGym, load_environment

SLEEPER = """```python
import os, time
def coin_change(coins, amount):
    if os.fork() == 0:  # a child in the same session, which the runner must kill too
        time.sleep(600)
        os._exit(0)
    time.sleep(600)
```"""


@pytest.fixture
def gym():
    with pytest.warns(RuntimeWarning, match="UNCONFINED"), DeepGym(mode="local", allow_local=True) as made:
        yield made


def test_a_sleeping_submission_is_killed_at_its_limit_with_its_children(gym):
    env = load_environment("coin_change")
    started = time.monotonic()
    outcome = gym.judge(env, SLEEPER)
    took = time.monotonic() - started
    assert (outcome.has_verdict, outcome.error_type) == (True, "solution_timeout"), outcome.to_dict()
    assert took < env.limits.case_wall_s * env.limits.STARVED_GRACE + 60, f"took {took:.1f} s: the runner waited"
