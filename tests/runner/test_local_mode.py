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


def test_a_child_its_parent_left_behind_is_still_metered():
    """Unconfined, ticks reread only the processes the last full scan of /proc found (deepgym/runner/confine/local.py,
    FULL_SCAN_S): a busy child whose parent has exited, so that nothing we spawned leads to it, is found by the
    next full scan and its CPU counted, so the CPU limit still reaches it."""
    import sys

    from deepgym.runner.confine.local import Local
    from deepgym.runner.confine.processes import Processes

    sandbox = Processes(Local())
    parent = sandbox.spawn([sys.executable, "-c", "import os\nif os.fork() == 0:\n    while True:\n        pass\n"])
    parent.wait()
    meter = sandbox.watch()
    deadline = time.monotonic() + 120
    try:
        while (usage := meter.tick()).cpu_s < 0.5 and time.monotonic() < deadline:
            time.sleep(0.02)
        left = sandbox.members()
    finally:
        sandbox.kill_all()
    assert usage.cpu_s >= 0.5, "the orphan's CPU was never counted"
    assert left and not sandbox.alive(), "the orphan was found, and killed with the session"


@pytest.mark.filterwarnings("ignore:deepgym local mode")
def test_stdin_longer_than_a_slice_is_delivered_whole(monkeypatch):
    """The command's input arrives whole even when writing it outlasts the first slice of the wait (the runner's
    request is bigger than a pipe); communicate() alone sent it only on its first call."""
    import os

    from deepgym.sandbox import local
    from deepgym.sandbox.base import ExecOptions, SandboxSpec

    monkeypatch.setattr(local, "POLL_S", 0.001)
    data = os.urandom(3 << 20)
    provider = local.LocalProvider(allow_local=True)
    echo = ["python3", "-I", "-S", "-c", "import sys, time\ntime.sleep(0.05)\nsys.stdout.buffer.write(sys.stdin.buffer.read())"]
    result = provider.run(SandboxSpec(image="host"), echo, ExecOptions(timeout_s=20, stdin=data))
    assert (result.exit_code, result.timed_out, result.stdout == data) == (0, False, True)
