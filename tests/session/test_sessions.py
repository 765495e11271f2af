"""Sessions against real containers of real images: the trust rules (one container per episode, an
unprivileged agent, hidden tests out of its reach, every agent process killed and proved quiet before the
verifier), the budgets, and each row of the failure table that a real sandbox can produce."""

import dataclasses
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from deepgym import DeepGym, NoVerdictError
from deepgym.environments import SessionLimits, load_environment
from deepgym.images import build
from deepgym.authoring.replay import action_sequences
from deepgym.session_limits import DEFAULT_WORKSPACE as WORKSPACE
from support import FILL_PIDS

pytestmark = pytest.mark.docker
SHELL_ENVS = ("shell_repair_script", "shell_organise_files", "shell_find_largest", "shell_fix_config")
FAULTS = str(Path(__file__).resolve().parents[1] / "session_envs")


@pytest.fixture(scope="module", autouse=True)
def images():
    build(list(SHELL_ENVS))


@pytest.fixture
def faults(monkeypatch):
    """The fixture environment whose verifier fails on purpose, one way per variant."""
    monkeypatch.setenv("DEEPGYM_ENVIRONMENTS", FAULTS)
    build(["session_faults"])
    return load_environment("session_faults")




def gone(container: str) -> bool:
    """The container no longer exists (one the engine is still removing gets 60 s: a busy engine is slow)."""
    for _ in range(600):
        if subprocess.run(["docker", "inspect", container], capture_output=True, check=False).returncode != 0:
            return True
        time.sleep(0.1)
    return False


def _wait_until_stopped(container: str) -> None:
    deadline = time.monotonic() + 60
    while subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", container], capture_output=True,
                         text=True).stdout.strip() == "true":
        assert time.monotonic() < deadline, f"{container} outlived its lifetime by a minute"
        time.sleep(0.1)


def with_limits(name: str, **limits) -> object:
    env = load_environment(name)
    return dataclasses.replace(env, session=dataclasses.replace(env.session, **limits))


@pytest.mark.parametrize("name", SHELL_ENVS)
@pytest.mark.parametrize("variant", [0, 1])
def test_the_reference_episode_scores_one_and_its_container_is_removed(gym, name, variant):
    actions = action_sequences(load_environment(name), "reference")[variant]
    with gym.session(name, variant=variant) as session:
        first = session.start()
        box = session._sandbox.id
        assert "Your working directory is /tmp/work" in first.text and first.images == ()
        for action in actions:
            assert not session.step(action).done
        verdict = session.score()
    assert (verdict.score, verdict.passed, verdict.error_type) == (1.0, True, None), verdict.details
    assert verdict.variant == variant and verdict.image_id and verdict.timings["acting_s"] > 0
    assert gone(box)


def test_the_agent_is_unprivileged_and_cannot_read_the_hidden_tests(gym):
    with gym.session("shell_repair_script") as session:
        session.start()
        who = session.step("id -u; id -G; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status; pwd")
        who = who.observation.text
        hidden = session.step("cat /opt/deepgym/env/verify.py; ls /opt/deepgym/env").observation.text
        root = session.step("touch /etc/x; touch /opt/x").observation.text
    assert who.split()[:2] == ["10000", "10000"] and "CapEff:\t0000000000000000" in who
    assert "CapPrm:\t0000000000000000" in who and "NoNewPrivs:\t1" in who and WORKSPACE in who
    assert hidden.count("Permission denied") == 2 and "EXPECTED" not in hidden
    assert root.count("Read-only file system") == 2


# Processes come and go while it counts (the respawning loop below): one gone before it is read is not counted.
PROCESSES_OF_AGENT = ("import os\n"
                      "def alive_agent(p):\n"
                      "    try:\n"
                      "        return (os.stat('/proc/' + p).st_uid == 10000\n"
                      "                and open('/proc/%s/stat' % p).read().split(')')[-1].split()[0] != 'Z')\n"
                      "    except OSError:\n"
                      "        return False\n"
                      "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and alive_agent(p)))\n")


def test_every_agent_process_is_killed_and_proved_quiet_before_the_verifier(gym):
    """A daemon holding an open file, a double-forked one and one that respawns itself all stop for good
    before the verifier reads, and a second verification starts from a fresh verifier folder again."""
    env = load_environment("shell_organise_files")
    with gym.session(env) as session:
        session.start()
        for action in action_sequences(env, "reference")[0]:
            session.step(action)
        session.step("setsid nohup bash -c 'exec 3>>tick.log; while :; do echo t >&3; sleep 0.01; done'"
                     " >/dev/null 2>&1 &"
                     " (setsid sleep 1000 >/dev/null 2>&1 &) ;"
                     " setsid nohup bash -c 'while :; do (sleep 100 &) ; sleep 0.05; done' >/dev/null 2>&1 & sleep 0.3")
        count = ["python3", "-c", PROCESSES_OF_AGENT]
        from deepgym.sandbox import ExecOptions

        deadline = time.monotonic() + 60  # all of them running (the respawner's first sleep 100 too)
        while int(session._sandbox.exec(count, ExecOptions(timeout_s=20)).stdout) < 4:
            assert time.monotonic() < deadline, "the agent's daemons never all ran"
            time.sleep(0.1)
        for _ in range(2):
            report, in_play, _ = session.actions.session_runner(session, session._sandbox, "verify", timeout_s=60)
            assert in_play and report["score"] == 1.0, report
            assert int(session._sandbox.exec(count, ExecOptions(timeout_s=20)).stdout) == 0
            size = ["python3", "-c", "import os, time; a = os.stat('/tmp/work/tick.log').st_size; time.sleep(0.5); "
                                     "print(a, os.stat('/tmp/work/tick.log').st_size)"]
            before, after = session._sandbox.exec(size, ExecOptions(timeout_s=20)).stdout.split()
            assert int(before) > 0 and before == after
            leftovers = session._sandbox.exec(["sh", "-c", "ls -d /tmp/deepgym-verifier-* 2>/dev/null | wc -l"],
                                              ExecOptions(timeout_s=20)).stdout
            assert leftovers.strip() == b"0"
        assert session.score().score == 1.0


def test_a_timed_out_action_returns_its_partial_output_and_the_episode_goes_on(gym):
    env = with_limits("shell_organise_files", step_timeout_s=1)
    with gym.session(env) as session:
        session.start()
        started = time.monotonic()
        step = session.step("echo before; setsid sleep 1000 & sleep 30")
        took = time.monotonic() - started
        assert step.observation.text == "before\n[timed out after 1 s]" and not step.done
        assert took < 25  # the step ended at its 1 s timeout, not after the 30 s sleep
        sleeping = session.step("for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done | grep -c '^sleep$'")
        assert sleeping.observation.text.startswith("0")
        assert session.step("echo after").observation.text == "after\n"


def test_the_step_budget_and_the_episode_budget_end_the_episode(gym):
    with gym.session(with_limits("shell_organise_files", max_steps=2)) as session:
        session.start()
        assert not session.step("true").done
        assert session.step("true").done
        with pytest.raises(RuntimeError, match="the episode is over"):
            session.step("true")
        assert session.score().score == 0.0
    with gym.session(with_limits("shell_organise_files", episode_s=1.5, step_timeout_s=10)) as session:
        session.start()
        step = session.step("sleep 5")
        assert step.done and re.search(r"\[timed out after (0\.\d|1(\.\d)?) s\]$", step.observation.text)


def test_an_invalid_action_comes_back_as_text_and_the_episode_goes_on(gym):
    with gym.session("shell_organise_files") as session:
        session.start()
        for action, says in ((123, "a shell command (a string), not int"), ("  ", "the action is empty"),
                             ("echo \0", "NUL character")):
            step = session.step(action)
            assert step.observation.text.startswith("invalid action:") and says in step.observation.text
            assert not step.done
        assert session.step("echo ok").observation.text == "ok\n"


def test_an_episode_without_actions_scores_zero(gym):
    with gym.session("shell_repair_script") as session:
        session.start()
        box = session._sandbox.id
        verdict = session.score()
    assert (verdict.score, verdict.error_type) == (0.0, "no_action") and gone(box)


def test_long_output_keeps_its_head_and_tail(gym):
    with gym.session(with_limits("shell_organise_files", output_chars=300)) as session:
        session.start()
        text = session.step("seq 1 100000").observation.text
    assert len(text) <= 300 and text.startswith("1\n2\n3\n") and text.rstrip().endswith("100000")
    assert "characters cut" in text


# The failure table, row by row, where a real sandbox produces the failure.


def test_row_1_an_engine_that_cannot_be_reached_gives_no_verdict(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with DeepGym(mode="docker") as unreachable, unreachable.session("shell_organise_files") as session:
        with pytest.raises(NoVerdictError) as failure:
            session.start()
    assert failure.value.error_type == "daemon_unavailable"


def test_row_1_an_engine_lost_mid_episode_gives_no_verdict(gym):
    import docker

    with gym.session("shell_organise_files") as session:
        session.start()
        box = session._sandbox.id
        session.step("ls")
        real = gym.provider.engine._api
        gym.provider.engine._api = docker.APIClient(base_url="unix:///nonexistent/docker.sock", version="1.41")
        try:
            step = session.step("ls")
        finally:
            gym.provider.engine._api = real
        assert step.done
        with pytest.raises(NoVerdictError) as failure:
            session.score()
    assert failure.value.error_type == "daemon_unavailable"
    subprocess.run(["docker", "rm", "-f", box], capture_output=True)  # the engine could not be told to remove it


def test_row_2_a_sandbox_that_cannot_start_gives_no_verdict(gym):
    unbuilt = dataclasses.replace(load_environment("shell_organise_files"), id="shell_never_built")
    with gym.session(unbuilt) as session, pytest.raises(NoVerdictError) as failure:
        session.start()
    assert failure.value.error_type == "image_missing"


def test_row_3_a_lifetime_that_ran_out_while_the_agent_was_idle_gives_no_verdict(gym):
    with gym.session("shell_organise_files") as session:
        session._lifetime_s = 3.0
        session.start()
        session.step("true")
        _wait_until_stopped(session._sandbox.id)  # its 3 s lifetime ran out while the agent was idle
        assert session.step("true").done
        with pytest.raises(NoVerdictError) as failure:
            session.score()
    assert failure.value.error_type == "sandbox_lost" and "lifetime" in failure.value.reason


def test_row_4_a_lifetime_that_the_agents_own_action_used_up_scores_zero(gym):
    with gym.session("shell_organise_files") as session:
        session._lifetime_s = 3.0
        session.start()
        assert session.step("sleep 10").done
        verdict = session.score()
    assert (verdict.score, verdict.error_type) == (0.0, "policy_sandbox_failure")


def test_row_4_a_sandbox_that_dies_under_the_agents_action_scores_zero(gym):
    """The container dies while an action runs, as when the policy brings it down: the engine cannot tell
    who did it, and the rule never lets a policy choose no verdict."""
    import threading

    with gym.session("shell_organise_files") as session:
        session.start()
        box = session._sandbox.id

        def kill_once_it_runs() -> None:  # the kill must land while the action runs, however loaded the host
            started = ["docker", "exec", box, "test", "-e", "/tmp/work/acting"]
            deadline = time.monotonic() + 60
            while subprocess.run(started, capture_output=True).returncode != 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            subprocess.run(["docker", "kill", box], capture_output=True, check=False)

        killer = threading.Thread(target=kill_once_it_runs)
        killer.start()
        step = session.step("touch /tmp/work/acting; sleep 30")
        killer.join()
        assert step.done and "the sandbox failed" in step.observation.text
        verdict = session.score()
    assert (verdict.score, verdict.error_type) == (0.0, "policy_sandbox_failure") and gone(box)


def test_a_policy_that_takes_every_pid_never_gets_no_verdict(gym):
    with gym.session(with_limits("shell_organise_files", step_timeout_s=3)) as session:
        session.start()
        if not session.step(FILL_PIDS).done:
            session.step("echo hello")
        verdict = session.score()  # a Verdict: NoVerdictError would fail the test
    assert verdict.score == 0.0 and verdict.error_type in ("policy_sandbox_failure", "wrong_answer")


def test_code_that_floods_the_probes_output_gets_a_verdict(gym):
    """The probes run the agent's code and keep up to 64 KiB of what it prints: a module that prints a flood
    on import is scored (its answers are wrong), never an unjudgeable episode."""
    with gym.session("shell_repair_script") as session:
        session.start()
        session.step("printf 'import sys\\nsys.stdout.write(\"x\" * 10**6)\\n' | cat - textstats.py > t.py"
                     " && mv t.py textstats.py && head -2 textstats.py")
        verdict = session.score()
    assert (verdict.score, verdict.error_type) == (0.0, "wrong_answer")


@pytest.mark.parametrize("name", SHELL_ENVS)
@pytest.mark.parametrize("attack", ['chmod 000 "$PWD"', 'chmod -R 000 "$PWD"/*',
                                    'd=$PWD; for i in $(seq 1500); do mkdir x && cd x || break; done; cd "$d"'],
                         ids=["workspace_closed", "files_closed", "deep_folders"])
def test_a_workspace_the_agent_closed_or_nested_deep_still_gets_a_verdict(gym, name, attack):
    """The probes and the verifier run in the agent's workspace, which the agent owns: after the reference, an
    agent that takes every right from it, or nests folders deeper than a recursive walk goes, is scored (a
    probe that cannot enter it fails as a shell's `cd` would), never left without a verdict."""
    with gym.session(name) as session:
        session.start()
        for action in [*action_sequences(load_environment(name), "reference")[0], attack]:
            session.step(action)
        verdict = session.score()  # a Verdict: NoVerdictError would fail the test
    assert verdict.has_verdict and 0.0 <= verdict.score <= 1.0, verdict.details
    if "chmod" in attack:
        assert verdict.score < 1.0, verdict.details  # nothing of the agent's work can be read


def test_a_policy_that_fills_the_scratch_space_gets_a_verdict(gym, faults):
    with gym.session(faults, variant=0) as session:
        session.start()
        session.step("echo yes > done.txt; head -c 200M /dev/zero > fill; touch a b c")
        verdict = session.score()
    assert verdict.has_verdict and verdict.score in (0.0, 1.0)


@pytest.mark.parametrize("variant, outcome", [
    (0, (1.0, None)),                        # the verifier works: the agent's state passes
    (1, (0.0, "solution_timeout")),          # it ran past its limit after reading the agent's state
    (2, (0.0, "solution_error")),            # it failed on the agent's state
    (3, "invalid_score"),                    # its score is out of range: ours
    (4, "verifier_error"),                   # it could not run
    (5, "verifier_timeout"),                 # it timed out before reading anything
])
def test_verifier_rows(gym, faults, variant, outcome):
    with gym.session(faults, variant=variant) as session:
        session.start()
        session.step("echo yes > done.txt")
        box = session._sandbox.id
        if isinstance(outcome, str):
            with pytest.raises(NoVerdictError) as failure:
                session.score()
            assert failure.value.error_type == outcome
        else:
            verdict = session.score()
            assert (verdict.score, verdict.error_type) == outcome, verdict.details
    assert gone(box)


def test_sessions_refuse_single_turn_environments_and_bad_variants(gym):
    with pytest.raises(ValueError, match="not a session one"):
        gym.session("coin_change")
    with pytest.raises(ValueError, match="variant 5 is out of range"):
        gym.session("shell_organise_files", variant=5)
    assert isinstance(load_environment("shell_organise_files").session, SessionLimits)
    assert os.environ.get("DEEPGYM_ENVIRONMENTS") != FAULTS
