"""A function worker gets every case's request at once (deepgym/runner/kinds/function.py, run_calls): each case is
still judged on its own, and the one that loops, sleeps or crashes is the one that fails, with the error type
a round trip per case gave it, while the cases around it pass."""

from __future__ import annotations

import os

import pytest

from support import ensure_images, solution
from deepgym import load_environment
from deepgym.judging import Images, observe
from deepgym.runner.protocol import Request
from deepgym.sandbox.docker import DockerProvider
from deepgym.verdict import classify

pytestmark = pytest.mark.docker
ENV = "coin_change"
# Right on every case but three: a busy loop on fixed-0, a sleep on fixed-3, a crash on fixed-4.
MIXED = solution(ENV, "reference") + '''
import os as _os, time as _time
_reference = coin_change

def coin_change(coins, amount):
    if coins == [1, 2, 5] and amount == 11:
        while True:
            pass
    if coins == [1] and amount == 1:
        _time.sleep(60)
    if coins == [1] and amount == 2:
        _os._exit(3)
    return _reference(coins, amount)
'''


@pytest.fixture(scope="module")
def provider():
    ensure_images(ENV)
    docker = DockerProvider(max_parallel=1)
    yield docker
    docker.close()


def test_the_case_that_loops_sleeps_or_crashes_fails_alone(provider):
    env = load_environment(ENV)
    request = Request(nonce=os.urandom(16).hex(), kind=env.kind, submission=MIXED, entry_point=env.entry_point,
                      scoring="partial", limits=env.limits)
    verdict = classify(request, observe(provider, env, request, Images()), env.id)
    assert verdict.has_verdict, verdict.to_dict()
    failed = {case.id: (case.error_type, case.error) for case in verdict.cases if not case.passed}
    assert set(failed) == {"fixed-0", "fixed-3", "fixed-4"}, failed
    assert failed["fixed-0"][0] == "solution_timeout" and "CPU" in failed["fixed-0"][1]
    assert failed["fixed-3"][0] == "solution_timeout" and "wall-clock" in failed["fixed-3"][1]
    assert failed["fixed-4"][0] == "solution_error" and "status 3" in failed["fixed-4"][1]
    assert verdict.cases_total == len(verdict.cases) and verdict.score == pytest.approx((len(verdict.cases) - 3)
                                                                                        / len(verdict.cases))
    # The CPU limit held for the looping case, and every case's CPU adds up to no more than the total limit.
    cpu = {case.id: case.cpu_s for case in verdict.cases}
    assert cpu["fixed-0"] >= env.limits.case_cpu_s
    assert sum(cpu.values()) <= env.limits.total_cpu_s
