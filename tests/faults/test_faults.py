"""Fault injection, for real: the engine stopped mid-batch and back, an image removed mid-run, a container and
the runner killed from outside, the whole sandbox OOM-killed by the submission. Every outcome lands on the
right side, and no failure of ours ever becomes a 0."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support import ensure_images, solution
from deepgym import DeepGym
from deepgym.images import build

from .conftest import fenced, wait_for_container, wait_for_submission

pytestmark = pytest.mark.docker
REFERENCE = solution("coin_change", "reference")
WRONG = "def coin_change(coins, amount):\n    return -1\n"
# Right and wrong answers that take a few seconds each, so the engine can be stopped while some are running.
SLOW_RIGHT = REFERENCE + "\nimport time\n_fast = coin_change\ndef coin_change(coins, amount):\n    time.sleep(0.05)\n    return _fast(coins, amount)\n"
SLOW_WRONG = "import time\ndef coin_change(coins, amount):\n    time.sleep(2)\n    return -1\n"


@pytest.mark.exclusive  # the engine stops for everyone
def test_engine_stopped_mid_batch_then_back(engine):
    ensure_images("coin_change")
    samples = [(SLOW_RIGHT, 1.0) if i % 2 == 0 else (SLOW_WRONG, 0.0) for i in range(8)]
    with DeepGym(mode="docker", max_parallel=2) as gym:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(gym.judge, "coin_change", fenced(code)) for code, _ in samples]
            while sum(f.done() for f in futures) < 2:
                time.sleep(0.05)
            engine.stop()
            outcomes = [f.result() for f in futures]
        judged = [(o, expected) for o, (_, expected) in zip(outcomes, samples) if o.has_verdict]
        unjudged = [o for o in outcomes if not o.has_verdict]
        assert judged and unjudged, [o.to_dict() for o in outcomes]
        assert all(o.score == expected for o, expected in judged), "a judged sample changed its verdict"
        assert {o.error_type for o in unjudged} <= {"daemon_unavailable", "sandbox_lost"}
        assert gym.monitor.snapshot()["no_verdict"] == len(unjudged)

        engine.start()  # the same process and client carry on
        batch = gym.run_batch("coin_change", [fenced(REFERENCE), fenced(WRONG)])
        assert [o.score for o in batch] == [1.0, 0.0] and batch.no_verdict == 0


@pytest.mark.exclusive  # coin_change's image is gone for everyone until it is rebuilt
def test_image_removed_mid_run_then_rebuilt():
    ensure_images("coin_change")
    with DeepGym(mode="docker") as gym:
        first = gym.run("coin_change", fenced(REFERENCE))
        assert first.score == 1.0
        # By id: containers come from the id resolved first, so untagging alone would change nothing.
        subprocess.run(["docker", "rmi", "-f", first.image_id], check=True, capture_output=True)
        try:
            outcome = gym.judge("coin_change", fenced(REFERENCE))
            assert not outcome.has_verdict and outcome.error_type == "image_missing"
            assert "deepgym images build" in outcome.reason
        finally:
            build(["coin_change"])
        assert gym.run("coin_change", fenced(REFERENCE)).score == 1.0


def judge_while(gym: DeepGym, env: str, code: str, action) -> object:
    """Judge in a thread; run ``action(container_id)`` once the sample's container is up."""
    result: dict[str, object] = {}
    thread = threading.Thread(target=lambda: result.setdefault("outcome", gym.judge(env, fenced(code))))
    thread.start()
    action(wait_for_container(gym.provider.run_id))
    thread.join(timeout=120)
    return result["outcome"]


def test_container_killed_before_the_submission_ran_is_no_verdict(fault_envs):
    with DeepGym(mode="docker") as gym:
        def kill(container: str) -> None:
            wait_until_asleep(runner_host_pid(container))  # loading the hidden tests, which sleep 4 s
            subprocess.run(["docker", "kill", container], check=True, capture_output=True)

        outcome = judge_while(gym, "fault_slow_start", "def f(x):\n    return x", kill)
    assert not outcome.has_verdict and outcome.error_type == "sandbox_lost", outcome.to_dict()


def runner_host_pid(container: str, timeout: float = 60.0) -> int:
    """The host pid of the runner: the child of the container's init (waited for, while it starts)."""
    init = int(subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", container], capture_output=True,
                              text=True, check=True).stdout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == init:
                    return int(entry.name)
            except (OSError, ValueError):
                continue
        time.sleep(0.05)
    raise AssertionError("the runner process was not found")


def wait_until_asleep(pid: int, timeout: float = 60.0) -> None:
    """Wait until ``pid`` sleeps in ``time.sleep`` (the kernel's wait channel says nanosleep)."""
    deadline = time.monotonic() + timeout
    while "nanosleep" not in Path(f"/proc/{pid}/wchan").read_text():
        assert time.monotonic() < deadline, f"process {pid} never went to sleep"
        time.sleep(0.02)


def test_runner_killed_while_the_submission_runs_is_no_verdict():
    ensure_images("coin_change")
    with DeepGym(mode="docker") as gym:
        def kill(container: str) -> None:
            wait_for_submission(container)  # it sleeps 2 s in its first case
            os.kill(runner_host_pid(container), signal.SIGKILL)

        outcome = judge_while(gym, "coin_change", SLOW_WRONG, kill)
    assert not outcome.has_verdict and outcome.error_type == "sandbox_lost", outcome.to_dict()


def test_memory_pinned_in_tmpfs_by_the_submission_is_scored_oom(fault_envs, gym):
    # 400 MB into /dev/shm, past the sandbox's 192 MB: the kernel OOM-kills the writer (submission processes are
    # always its first victims) and the runner, which survives, reports it: the submission's fault, scored 0.
    code = ("def f(x):\n    with open('/dev/shm/fill', 'wb') as out:\n        for _ in range(400):\n"
            "            out.write(b'x' * 1024 * 1024)\n    return x")
    verdict = gym.run("fault_oom", fenced(code))
    assert (verdict.score, verdict.error_type) == (0.0, "solution_oom"), verdict.details
