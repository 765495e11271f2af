"""The apple provider against a fake ``container`` CLI (tests/providers/standins/fakebin/container, a test
double that accepts only the real CLI's flags and delegates to docker): coin_change right, wrong and looping
through ``DeepGym(mode="apple")``, the flags it sends, the network it takes down, and the services being off.
Apple's CLI runs only on macOS; what the fake does not prove is in docs/providers.md."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from standins import hostile_attacks  # noqa: E402
from standins.apple import AppleFake  # noqa: E402

from deepgym import DeepGym, NoVerdictError  # noqa: E402
from deepgym.images import build  # noqa: E402

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "environments" / "coin_change" / "solutions" / "reference.py").read_text()
WRONG = (ROOT / "environments" / "coin_change" / "solutions" / "wrong_greedy.py").read_text()
LOOPING = "def coin_change(coins, amount):\n    while True:\n        pass\n"
DOCKER_ONLY = ["--cap-drop", "--pids-limit", "--security-opt", "--ulimit", "--memory-swap", "--init"]


def fenced(code: str) -> str:
    return f"Here it is.\n```python\n{code}\n```\n"


@pytest.fixture
def fake(tmp_path, monkeypatch):
    build(["coin_change"])
    made = AppleFake(tmp_path / "calls.jsonl")
    for name, value in made.variables().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DEEPGYM_APPLE_CONTAINER", made.cli)
    yield made
    made.stop()


def test_coin_change_right_wrong_and_looping(fake):
    with DeepGym(mode="apple") as gym:
        right = gym.run("coin_change", fenced(REFERENCE))
        wrong = gym.run("coin_change", fenced(WRONG))
        looping = gym.run("coin_change", fenced(LOOPING))
    assert (right.score, right.passed, right.runtime, right.image_status) == (1.0, True, "apple", "current")
    assert (wrong.score, wrong.error_type) == (0.0, "wrong_answer")
    assert (looping.score, looping.error_type) == (0.0, "solution_timeout")
    runs = [call for call in fake.calls() if call[0] == "run"]
    assert len(runs) == 3 and not any(flag in call for call in runs for flag in DOCKER_ONLY)
    assert fake.containers() == [], "a judged sample left its container"


@pytest.mark.parametrize("flag", DOCKER_ONLY[:4])
def test_the_fake_refuses_docker_only_flags_as_apples_cli_does(fake, flag):
    result = subprocess.run([fake.cli, "run", flag, "x", "image"], capture_output=True, text=True)
    assert result.returncode == 64 and f"Unknown option '{flag}'" in result.stderr


def test_services_not_running_is_every_samples_reason(fake, monkeypatch):
    monkeypatch.setenv("FAKE_CONTAINER_SYSTEM", "stopped")
    with DeepGym(mode="apple") as gym:
        with pytest.raises(NoVerdictError) as caught:
            gym.run("coin_change", fenced(REFERENCE))
    assert caught.value.error_type == "daemon_unavailable" and "system start" in caught.value.reason


def test_no_cli_is_every_samples_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("DEEPGYM_APPLE_CONTAINER", str(tmp_path / "container"))
    with DeepGym(mode="apple") as gym:
        with pytest.raises(NoVerdictError) as caught:
            gym.run("coin_change", fenced(REFERENCE))
    assert caught.value.error_type == "daemon_unavailable" and "macOS" in caught.value.reason


@pytest.mark.parametrize("attack", hostile_attacks(), ids=lambda attack: attack.id)
def test_hostile_single_turn_cases_get_their_verdict(fake, attack):
    with DeepGym(mode="apple") as gym:
        outcome = gym.judge(attack.env, attack.response)
    assert outcome.has_verdict and not outcome.passed and outcome.error_type in attack.expected, outcome.to_dict()


def test_stopping_a_fake_removes_its_own_containers_and_network_never_another_runs(fake, tmp_path):
    from deepgym.images import image_name

    other = AppleFake(tmp_path / "other.jsonl")
    try:
        for each in (fake, other):
            command = [each.cli, "run", "-d", "--name", f"apple-fake-{each.run}", image_name("base"), "sleep", "300"]
            started = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **each.variables()},
                                     timeout=60)
            assert started.returncode == 0, started.stderr
        fake.stop()
        assert fake.containers() == [] and len(other.containers()) == 1
        networks = subprocess.run(["docker", "network", "ls", "--format", "{{.Name}}"], capture_output=True,
                                  text=True, check=True).stdout.split()
        assert other.network in networks and fake.network not in networks
    finally:
        other.stop()
    assert other.containers() == []
