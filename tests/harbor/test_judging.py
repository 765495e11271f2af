"""Imported Harbor tasks judged on real containers of images built offline from tests/harbor/tasks: every
reference (solution/solve.sh replayed through the persistent terminal) scores 1.0 by the task's own test.sh,
an agent that does nothing useful scores 0, and the hostile suite (issue 26, item 5) never buys a 1.0 or an
episode without a verdict: forged reward files, a planted conftest.py, sitecustomize.py, .pth file, a shadow of
a tool test.sh calls and of a module its pytest imports, a background writer into /logs, a killed shell, a
flood and a fork bomb."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from deepgym import NoVerdictError
from deepgym.authoring.replay import action_sequences
from deepgym.cli import main
from deepgym.environments import load_environment
from deepgym.session import TerminalSession
from support import FILL_PIDS, harbor_environments

pytestmark = pytest.mark.docker
JUDGED = {"hello-world": "hello_world", "csv-report": "csv_report", "kv-service": "kv_service",
          "vault-repl": "vault_repl", "fix-git": "fix_git", "word-count": "word_count"}


@pytest.fixture(scope="module", autouse=True)
def imported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    with harbor_environments(tmp_path_factory.mktemp("harbor") / "envs", *JUDGED) as names:
        assert names == list(JUDGED.values())
        yield names


def episode(gym, name: str, actions: list) -> object:
    """Run ``actions`` in an episode of ``name``; its verdict (a NoVerdictError fails the test)."""
    with gym.session(name) as session:
        assert isinstance(session, TerminalSession)  # an imported task's default
        first = session.start()
        assert first.screen is not None
        for action in actions:
            if session.step(action).done:
                break
        try:
            return session.score()
        except NoVerdictError as exc:  # pragma: no cover - the failure this suite exists for
            pytest.fail(f"{name}: {actions!r} bought no verdict: {exc}")


def test_deepgym_check_passes_an_imported_task_from_the_readmes_command(capsys):
    """The reference scores 1.0 three times; the two known-wrong sequences and an empty episode score below."""
    assert main(["check", "hello_world"]) == 0
    assert "1/1 environments pass" in capsys.readouterr().out


@pytest.mark.parametrize("terminal", ["fresh", "persistent"])
def test_the_tasks_env_reaches_every_action_and_a_fresh_shell_judges_too(gym, terminal):
    env = load_environment("hello_world")
    chosen = dataclasses.replace(env, session=dataclasses.replace(env.session, terminal=terminal))
    with gym.session(chosen) as session:
        assert isinstance(session, TerminalSession) == (terminal == "persistent")
        session.start()
        assert "Hello, world!" in session.step('echo "$GREETING"; pwd').observation.text  # [environment].env
        for action in action_sequences(env, "reference")[0]:
            session.step(action)
        assert session.score().score == 1.0


@pytest.mark.parametrize("name", [name for name in JUDGED.values() if name != "hello_world"])
def test_the_reference_scores_one_and_an_idle_agent_zero(gym, name):
    """csv_report's test.sh drives a pytest suite; kv_service's service, started by the image's ENTRYPOINT, keeps
    what the agent stored through it for test.sh; vault_repl's reference needs a terminal (script); fix_git's
    verifier reads the agent's git repository as another uid."""
    reference = episode(gym, name, action_sequences(load_environment(name), "reference")[0])
    assert (reference.score, reference.passed, reference.error_type) == (1.0, True, None), reference.details
    assert reference.cases[0].id == "/tests/test.sh"
    idle = episode(gym, name, ["ls -la"])
    assert (idle.score, idle.passed, idle.error_type) == (0.0, False, "wrong_answer"), idle.details


def test_the_agent_works_in_the_tasks_folder_and_cannot_reach_the_verifiers(gym):
    with gym.session("csv_report") as session:
        assert "Your working directory is /app" in session.start().text
        seen = session.step("pwd; ls; id -u; ls -ld /logs /tests /solution; ls /tests | wc -l; "
                            "touch /tests/x /logs/x; mkdir /logs/verifier; cat /opt/deepgym/env/harbor/test.sh")
        text = seen.observation.text
        assert "/app\n" in text and "sales.csv" in text and "\n10000\n" in text
        assert text.count("Permission denied") >= 4 and "reward" not in text  # test.sh is not readable
        verdict = session.score()
    assert verdict.score == 0.0 and verdict.error_type == "wrong_answer"


def test_forged_reward_files_are_never_read(gym):
    forged = ("for d in /logs/verifier /app /tmp /solution; do mkdir -p $d; echo 1 > $d/reward.txt; "
              "echo '{\"reward\": 1}' > $d/reward.json; done; ln -s /app/reward.txt /tmp/r; echo forged")
    verdict = episode(gym, "hello_world", [forged])
    assert (verdict.score, verdict.error_type) == (0.0, "wrong_answer"), verdict.details


PASS_ALL = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")


PLANTS = {
    "/app/conftest.py": f"cat > /app/conftest.py <<'EOF'\n{PASS_ALL}EOF",
    "/app/pytest.ini": "printf '[pytest]\\naddopts = -p no:python\\n' > /app/pytest.ini",
    "/app/sitecustomize.py": "printf 'import os\\nos.makedirs(\"/logs/verifier\", exist_ok=True)\\n' "
                             "> /app/sitecustomize.py",
    "/tmp/site/evil.pth": "mkdir -p /tmp/site && echo 'import os' > /tmp/site/evil.pth",
    "/app/python3": "printf '#!/bin/sh\\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\\n' "
                    "> /app/python3 && chmod +x /app/python3",
    "/app/pytest.py": "echo 'def main(*a, **k): return 0' > /app/pytest.py",
}


def test_every_file_the_test_run_would_load_is_named_as_tampering(gym):
    """One episode plants them all beside a report written wrong on purpose: only a planted file could make
    test.sh pass. The verdict names each (tests/harbor/test_script_rules.py checks them one by one)."""
    verdict = episode(gym, "csv_report", ["echo '{\"North\": 1}' > /app/report.json", *PLANTS.values()])
    assert (verdict.score, verdict.error_type) == (0.0, "test_infra_tampering"), verdict.details
    for path in PLANTS:
        assert f"{path}: " in verdict.details, path


def test_tampering_scores_zero_even_beside_the_real_solution(gym):
    reference = action_sequences(load_environment("csv_report"), "reference")[0]
    verdict = episode(gym, "csv_report", [*reference, f"cat > /app/conftest.py <<'EOF'\n{PASS_ALL}EOF"])
    assert (verdict.score, verdict.error_type) == (0.0, "test_infra_tampering")
    assert "/app/conftest.py" in verdict.details


def test_a_background_writer_into_logs_is_killed_before_the_verifier_runs(gym):
    writer = ("setsid nohup sh -c 'while :; do mkdir -p /logs/verifier 2>/dev/null; "
              "echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.01; done' >/dev/null 2>&1 & echo started")
    verdict = episode(gym, "hello_world", [writer, "sleep 1"])
    assert (verdict.score, verdict.error_type) == (0.0, "wrong_answer"), verdict.details


@pytest.mark.parametrize("attack", [["kill -9 $$"], ["yes $(head -c 1000 /dev/zero | tr '\\0' x) &", "sleep 2"],
                                    [FILL_PIDS, "echo hello"]], ids=["killed_shell", "flood", "fork_bomb"])
def test_a_broken_terminal_gets_a_zero(gym, attack):
    verdict = episode(gym, "hello_world", attack)
    assert verdict.score == 0.0 and verdict.error_type in ("wrong_answer", "policy_sandbox_failure"), verdict.details


@pytest.mark.parametrize("attack", [
    'chmod 000 "$PWD"',
    'd=$PWD; for i in $(seq 1500); do mkdir x && cd x || break; done; cd "$d"',
    "touch $'\\xff.pth'; mkdir $'\\xff'; touch $'\\xff/conftest.py'",
    "mkfifo conftest.py; ln -s loop loop",
], ids=["workspace_unreadable", "deep_folders", "undecodable_names", "fifo_and_loop"])
def test_what_the_agent_leaves_cannot_stop_the_verifier_before_its_run(gym, attack):
    """Everything before test.sh starts is the verifier's own work (the tampering check, the tests copied in,
    the run's start in the workspace), and its failure would be no verdict: nothing the agent leaves may make
    it fail. Each of these still gets a verdict, and never a 1.0 it did not earn."""
    reference = action_sequences(load_environment("hello_world"), "reference")[0]
    verdict = episode(gym, "hello_world", [*reference, attack])
    assert verdict.has_verdict and verdict.score in (0.0, 1.0), verdict.details
    if verdict.score == 1.0:
        assert attack.startswith("d=$PWD"), verdict.details  # only the deep folders leave test.sh its file
