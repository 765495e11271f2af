"""Warm mode's containers that go away: a retired container is never the reason a sample has no verdict.

A warm container can die or refuse while no sample is in it (its server found it unfit, the engine or a
loaded host killed it). The sample handed such a container got nothing back and nothing of it ran, so the pool
judges it again in another container (:meth:`WarmPool.run <deepgym.sandbox.docker.warm.WarmPool.run>`)."""

from __future__ import annotations

import subprocess
import time

import pytest

import support
from support import fenced, solution

pytestmark = pytest.mark.docker

ENV = "coin_change"


def test_a_container_gone_before_its_sample_began_costs_the_sample_nothing(monkeypatch):
    """The idle container is killed, and the pool's check of it is made to miss that (as when the death races
    the take): the sample still gets its verdict, from another container."""
    from deepgym.sandbox.docker.engine import Attached

    right = fenced(solution(ENV, "reference"))
    with support.warm_gym(ENV) as gym:
        first = gym.judge(ENV, right, isolation="process")
        pool = gym.provider._warm
        (idle,) = [warm for ready in pool._idle.values() for warm in ready]
        subprocess.run(["docker", "kill", idle.box.container], check=True, capture_output=True)
        until = time.monotonic() + 60
        while subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", idle.box.container],
                             capture_output=True, text=True).stdout.strip() == "true":
            assert time.monotonic() < until, "docker kill did not stop the warm container"
            time.sleep(0.05)
        monkeypatch.setattr(Attached, "usable", lambda self: True)
        second = gym.judge(ENV, right, isolation="process")
        (now,) = [warm for ready in pool._idle.values() for warm in ready]
    assert first.passed, first
    assert second.has_verdict and second.passed, f"{second.error_type}: {second.reason[:2000]}"
    assert now.box.container != idle.box.container
