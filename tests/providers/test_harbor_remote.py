"""Imported Harbor tasks on the remote providers (issue 26, item 4): tests/harbor/tasks/hello-world, imported with
a fresh shell per action (a remote provider keeps no stream open for the persistent terminal), through each
stand-in that runs sessions (Daytona's, E2B's and Modal's with their real SDKs, Apple's fake ``container`` CLI),
each backed by real containers of the image built from this repo. None of them mounts anything: the episode makes
its folders on the sandbox's writable root and proves them (deepgym/session/mounts.py). The reference scores 1.0,
an idle agent 0, a forged reward file 0, and the agent can write neither ``/logs`` nor ``/tests`` (nor become
root through a setuid binary of the image: no_new_privs, as docker's no-new-privileges)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import environment, harbor_environments  # noqa: E402

from deepgym import DeepGym  # noqa: E402
from deepgym.authoring.replay import action_sequences, replay  # noqa: E402
from deepgym.environments import load_environment  # noqa: E402

pytestmark = pytest.mark.docker
# What the agent tries once its forged reward failed: every folder's owner and mode, then writes it must not make.
PROBE = ("stat -c '%n %u:%g %a' /app /solution /logs /tests; touch /tests/x; mkdir /logs/verifier; "
         "echo 1 > /logs/reward.txt; echo \"tests=$(ls -A /tests | wc -l) logs=$(ls -A /logs | wc -l)\"; "
         "grep NoNewPrivs /proc/self/status")
FOLDERS = ("/app 10000:10000 755", "/solution 10000:10000 755", "/logs 10002:10002 755", "/tests 0:0 755")


@pytest.fixture(scope="module")
def hello(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with harbor_environments(tmp_path_factory.mktemp("harbor") / "envs", "hello-world", terminal="fresh") as names:
        yield names[0]


def judged(mode: str, name: str) -> None:
    """The reference, an idle agent, and a forger that then probes the folders, on ``mode``."""
    env = load_environment(name)
    with DeepGym(mode=mode) as gym:
        reference = replay(gym, env, action_sequences(env, "reference")[0])
        idle = replay(gym, env, ["ls -la"])
        with gym.session(name) as session:
            session.start()
            forged = session.step(action_sequences(env, "wrong_forged_reward")[0][0]).observation.text
            probed = session.step(PROBE).observation.text
            verdict = session.score()
    assert (reference.score, reference.passed, reference.runtime) == (1.0, True, mode), reference.details
    assert (idle.score, idle.error_type) == (0.0, "wrong_answer"), idle.details
    assert (verdict.score, verdict.error_type) == (0.0, "wrong_answer"), verdict.details
    assert "Permission denied" in forged and "done" in forged, forged
    assert all(folder in probed for folder in FOLDERS), probed
    assert probed.count("Permission denied") >= 3, probed  # /tests/x, /logs/verifier, /logs/reward.txt
    assert "tests=0 logs=0" in probed, probed  # nothing the agent tried got in
    assert "NoNewPrivs:\t1" in probed, probed  # no setuid binary of the image makes the agent root


def test_an_imported_task_runs_on_each_remote_provider(case, hello):
    from standins import publish

    from deepgym.registration import register

    manifest = publish(case.standin, ["base", hello], Path(case.standin.manifest).with_name("harbor.json"))
    registrar = case.provider()
    try:
        register(case.mode, [hello], manifest, provider=registrar)
    finally:
        registrar.close()
    judged(case.mode, hello)


def test_an_imported_task_runs_on_apple(hello, tmp_path):
    from standins.apple import AppleFake

    fake = AppleFake(tmp_path / "calls.jsonl")
    try:
        with environment(**fake.variables(), DEEPGYM_APPLE_CONTAINER=fake.cli):
            judged("apple", hello)
        assert any(call[0] == "exec" for call in fake.calls()), "the episode did not go through the fake CLI"
    finally:
        fake.stop()
