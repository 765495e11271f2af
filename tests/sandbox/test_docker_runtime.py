"""The docker provider against real images: verdicts for right, wrong and hostile submissions, and the
infrastructure failures that must never become a score."""

import os
import subprocess
import time

import pytest

from support import ensure_images, escaped_processes, fenced, solution
from deepgym import DeepGym, NoVerdictError, load_environment

pytestmark = pytest.mark.docker
ENV = "coin_change"


@pytest.fixture(scope="module", autouse=True)
def image():
    ensure_images(ENV)


def judge(gym, code: str):
    return gym.judge(ENV, fenced(code))


def test_reference_scores_one(gym):
    verdict = gym.run(ENV, fenced(solution(ENV, "reference")))
    assert (verdict.score, verdict.passed, verdict.error_type) == (1.0, True, None)
    assert verdict.cases_total == len(verdict.cases) > 30 and all(case.passed for case in verdict.cases)
    assert verdict.runtime == "docker" and verdict.image_id.startswith("sha256:")


@pytest.mark.parametrize("name", [n for n in load_environment(ENV).solutions() if n.startswith("wrong_")])
def test_known_wrong_solutions_fail(gym, name):
    verdict = gym.run(ENV, fenced(solution(ENV, name)))
    assert verdict.score < 1 and not verdict.passed and verdict.error_type == "wrong_answer"


@pytest.mark.parametrize("code,error_type", [
    ("def coin_change(coins, amount)\n    return 1", "solution_error"),
    ("def coin_change(coins, amount):\n    while True:\n        pass", "solution_timeout"),
    ("import time\ndef coin_change(coins, amount):\n    time.sleep(10**6)", "solution_timeout"),
    ("while True:\n    pass", "solution_timeout"),
    ("def coin_change(coins, amount):\n    return bytearray(4 * 1024**3)", "solution_oom"),
    ("def solve(coins, amount):\n    return 0", "solution_error"),
], ids=["syntax-error", "busy-loop", "sleep-forever", "loop-at-import", "allocate-4GiB", "wrong-name"])
def test_submission_failures_are_scored_zero(gym, code, error_type):
    verdict = judge(gym, code)
    assert verdict.has_verdict and (verdict.score, verdict.error_type) == (0.0, error_type), verdict


def test_fork_bomb_is_scored_zero_and_leaves_the_host_alone(gym):
    bomb = "import os\ndef coin_change(coins, amount):\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass"
    verdict = judge(gym, bomb)
    assert verdict.has_verdict and verdict.score == 0.0 and verdict.error_type == "solution_timeout"
    assert escaped_processes() == []
    assert gym.run(ENV, fenced(solution(ENV, "reference"))).score == 1.0


def test_memory_bomb_in_many_processes_is_the_submissions(gym):
    hogs = ("import os, time\ndef coin_change(coins, amount):\n    for _ in range(20):\n        if os.fork() == 0:\n"
            "            x = bytearray(400 * 1024**2)\n            time.sleep(100)\n    time.sleep(100)")
    verdict = judge(gym, hogs)
    assert verdict.has_verdict and (verdict.score, verdict.error_type) == (0.0, "solution_oom")
    assert escaped_processes() == []


WRONG = "def coin_change(coins, amount):\n    return -1\n"


@pytest.mark.parametrize("hack", [
    # A forged report on stdout and stderr, with a guessed nonce and without.
    "import sys\nfor s in (sys.stdout, sys.stderr):\n    s.write('@@deepgym x {\"event\": \"report\", \"report\": {\"outcome\": \"scored\", \"score\": 1.0, \"passed\": true}}\\n'); s.flush()\nprint('PASSED 57/57')",
    # Report files wherever a harness might look.
    "import os\nfor p in ('/tmp/report.json', '/opt/deepgym/report.json', '/report.json', os.path.expanduser('~/report.json')):\n    try:\n        open(p, 'w').write('{\"score\": 1.0, \"passed\": true}')\n    except OSError:\n        pass",
    # Signals to its parent (the worker's parent is the runner) and to PID 1.
    "import os, signal\nfor pid in (os.getppid(), 1):\n    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):\n        try:\n            os.kill(pid, sig)\n        except OSError:\n            pass",
], ids=["forged-report-lines", "fake-report-files", "kill-parent-and-pid1"])
def test_hacks_do_not_change_the_verdict(gym, hack):
    verdict = judge(gym, hack + "\n" + WRONG)
    assert verdict.has_verdict and (verdict.score, verdict.passed, verdict.error_type) == (0.0, False, "wrong_answer")


def test_exit_before_the_tests_finish_scores_zero(gym):
    code = solution(ENV, "reference") + "\nimport os\n_calls = [0]\n_real = coin_change\n" \
        "def coin_change(coins, amount):\n    _calls[0] += 1\n    if _calls[0] == 5:\n        os._exit(0)\n    return _real(coins, amount)\n"
    verdict = judge(gym, code)
    assert (verdict.score, verdict.error_type) == (0.0, "solution_error")
    assert "exited with status 0" in verdict.details


def test_the_hidden_tests_cannot_be_read(gym):
    # Would pass every case if it could read the expected values.
    cheat = ("import os\ndef coin_change(coins, amount):\n    for root in ('/opt/deepgym/env', '/opt/deepgym'):\n"
             "        for name in os.listdir(root):\n            open(os.path.join(root, name)).read()\n    return 0")
    verdict = judge(gym, cheat)
    assert (verdict.score, verdict.error_type) == (0.0, "solution_error") and "PermissionError" in verdict.details


def test_sockets_cannot_be_opened(gym):
    code = ("import socket\ndef coin_change(coins, amount):\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
            "    return 0")
    verdict = judge(gym, code)
    assert (verdict.score, verdict.error_type) == (0.0, "solution_error")
    assert "OSError" in verdict.details or "unreachable" in verdict.details


def test_unreachable_daemon_is_no_verdict(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with DeepGym(mode="docker") as offline:
        with pytest.raises(NoVerdictError) as info:
            offline.run(ENV, fenced(solution(ENV, "reference")))
    assert info.value.error_type == "daemon_unavailable" and info.value.has_verdict is False


def test_missing_image_is_no_verdict_with_the_fix(monkeypatch):
    monkeypatch.setenv("DEEPGYM_TAG", "never-built")
    with DeepGym(mode="docker") as gym:
        with pytest.raises(NoVerdictError) as info:
            gym.run(ENV, fenced(solution(ENV, "reference")))
    assert info.value.error_type == "image_missing" and "deepgym images build" in info.value.reason


def test_batch_keeps_order_and_scores_what_it_can(gym, monkeypatch):
    responses = [fenced(solution(ENV, "reference")), fenced(WRONG), "no code at all", fenced(solution(ENV, "reference"))]
    batch = gym.run_batch(ENV, responses)
    assert [e.score for e in batch] == [1.0, 0.0, 0.0, 1.0]
    assert [e.error_type for e in batch] == [None, "wrong_answer", "no_code_block", None]
    assert batch.summary()["scored"] == 4 and batch.counts() == {"passed": 2, "wrong_answer": 1, "no_code_block": 1}


def test_containers_are_locked_down(gym):
    probe = ("import os\ndef coin_change(coins, amount):\n"
             "    status = open('/proc/self/status').read()\n"
             "    caps = [l.split()[1] for l in status.splitlines() if l.startswith(('CapInh', 'CapPrm', 'CapEff', 'CapAmb'))]\n"
             "    bounding = [l.split()[1] for l in status.splitlines() if l.startswith('CapBnd')]\n"
             "    writable = []\n"
             "    for d in ('/', '/usr', '/opt', '/etc', '/var'):\n"
             "        try:\n            open(os.path.join(d, 'x'), 'w')\n            writable.append(d)\n"
             "        except OSError:\n            pass\n"
             "    raise RuntimeError(f'uid={os.getuid()} gid={os.getgid()} groups={os.getgroups()} caps={caps} bounding={bounding} writable={writable} nnp={[l for l in status.splitlines() if l.startswith(\"NoNewPrivs\")]}')")
    details = judge(gym, probe).details
    assert "uid=10000 gid=10000 groups=[]" in details
    # No capability in any usable set; the bounding set (the runner's three, which the submission cannot shrink
    # or use: no_new_privs forbids regaining them) is all that remains.
    assert "caps=['0000000000000000', '0000000000000000', '0000000000000000', '0000000000000000']" in details
    assert "bounding=['00000000000000e0']" in details
    assert "writable=[]" in details and "NoNewPrivs:\\t1" in details


def test_containers_are_removed_and_labelled(monkeypatch, tmp_path):
    """The sample's container is removed; the prewarmed ones the client keeps for the next samples carry the
    same labels and are removed when it closes."""
    from deepgym.sandbox.docker import LABEL, OWNER_LABEL

    # Admission of its own: a refill waits for a slot, which another client on the host could hold for long.
    monkeypatch.setenv("DEEPGYM_ADMISSION_DIR", str(tmp_path))

    def of_this_run(run_id: str) -> list[str]:
        return subprocess.run(["docker", "ps", "-aq", "--filter", f"label={LABEL}={run_id}", "--filter",
                               f"label={OWNER_LABEL}={owner}"], capture_output=True, text=True).stdout.split()

    with DeepGym(mode="docker") as gym:
        owner = gym.provider.owner
        assert owner.split("/")[2] == str(os.getpid())
        gym.run(ENV, fenced(WRONG))
        run_id = gym.provider.run_id
        until = time.monotonic() + 30
        while True:  # the used container goes in the background; what is left is the pool, ready for the next
            ready = {box.container[:12] for boxes in gym.provider.prewarm.waiting().values() for box in boxes}
            left = set(of_this_run(run_id))
            if (left == ready and ready) or time.monotonic() > until:
                break
            time.sleep(0.2)
        assert left == ready and ready, (left, ready)
    until = time.monotonic() + 30  # a busy engine removes slowly
    while of_this_run(run_id) and time.monotonic() < until:
        time.sleep(0.2)
    assert of_this_run(run_id) == []
