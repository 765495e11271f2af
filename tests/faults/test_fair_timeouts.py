"""Fair timeouts on a busy host: the submission is limited by its own CPU time, so host load does not make a
correct answer time out; a busy loop and a sleep still do; a host so busy that nobody can be judged gives
no verdict (host_overloaded) instead of a 0."""

import os

import pytest

from .conftest import HEAVY_REFERENCE, fenced

# They load every CPU of the host on purpose: alone (lanes.py), so that no other test runs under that load.
pytestmark = [pytest.mark.docker, pytest.mark.exclusive]
CPUS = os.cpu_count() or 1
BUSY = "def f(n):\n    while True:\n        pass"
SLEEP = "import time\ndef f(n):\n    time.sleep(10**6)"


def test_correct_cpu_heavy_solution_passes_on_a_saturated_host(fault_envs, gym, host_load):
    host_load.processes(2 * CPUS)
    verdict = gym.run("fault_heavy", fenced(HEAVY_REFERENCE))
    assert (verdict.score, verdict.error_type) == (1.0, None), verdict.details
    assert max(case.cpu_s for case in verdict.cases) > 0.15, "the reference is meant to need real CPU time"


@pytest.mark.parametrize("code", [BUSY, SLEEP], ids=["busy-loop", "sleep"])
def test_genuine_timeouts_stay_timeouts_under_the_same_load(fault_envs, gym, host_load, code):
    host_load.processes(2 * CPUS)
    verdict = gym.run("fault_heavy", fenced(code))
    assert (verdict.score, verdict.error_type) == (0.0, "solution_timeout"), verdict.details


def test_a_host_that_starves_the_sample_gives_no_verdict_never_a_zero(fault_envs, gym, host_load):
    # Neighbour containers with 16 times the CPU weight leave the sample a sliver of CPU (about 3%): a busy loop
    # cannot be told from a starved answer, so it is not scored. A right answer of one quick case may still
    # finish within its sliver and is then fairly 1.0; starved, it is no verdict. Neither is ever a 0.
    # The sliver must still let the runner speak: at 256 times the weight (0.2%) its own threads sometimes send
    # nothing between its budget and the host's deadline, and a silent runner is sandbox_lost (verdict.py, row
    # 9a: nothing tells whose fault that was), which is no verdict too but not the rule this test proves.
    host_load.heavy_containers(2 * CPUS, cpu_shares=16 * 1024)
    right, busy = gym.run_batch("fault_quick", [fenced("def f(n):\n    return n"), fenced(BUSY)])
    assert busy.error_type == "host_overloaded" and not busy.has_verdict, busy.to_dict()
    assert (right.error_type == "host_overloaded" and not right.has_verdict) or right.score == 1.0, right.to_dict()
