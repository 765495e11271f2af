"""Persistent terminals against real containers of a real image: state that carries over between actions (the
working directory, variables, background jobs, a REPL), Harbor's Terminus keystrokes, a step that never comes
back, the agent's processes killed and proved gone before grading, and hostile agents that kill their shell or
flood it, which get a verdict (a 0), never a 1.0 and never none."""

import dataclasses
import time

import pytest

from deepgym import NoVerdictError
from deepgym.authoring.replay import action_sequences
from deepgym.environments import load_environment
from deepgym.images import build
from deepgym.sandbox import ExecOptions
from deepgym.session import TerminalSession
from support import FILL_PIDS

pytestmark = pytest.mark.docker
ENV = "shell_organise_files"
SHELL_ENVS = ("shell_repair_script", "shell_organise_files", "shell_find_largest", "shell_fix_config")


@pytest.fixture(scope="module", autouse=True)
def images():
    build(list(SHELL_ENVS))


def persistent(name: str = ENV, **limits) -> object:
    """The environment as a manifest with ``terminal: persistent`` (and ``limits``) would load it."""
    env = load_environment(name)
    return dataclasses.replace(env, session=dataclasses.replace(env.session, terminal="persistent", **limits))


def keystrokes_until(session, keystrokes: str, duration: float, ends: str) -> str:
    """The keystrokes' observation, with more empty waits while it does not end with ``ends`` yet: a
    keystroke's duration is fixed, and a loaded host may answer after it (each wait is a step of the episode)."""
    text = session.step({"keystrokes": keystrokes, "duration": duration}).observation.text
    for _ in range(6):
        if text.rstrip().endswith(ends):
            break
        text += session.step({"keystrokes": "", "duration": 1}).observation.text
    return text


def test_the_manifests_opt_in_makes_a_terminal_whose_state_carries_over(gym):
    with gym.session(persistent()) as session:
        assert isinstance(session, TerminalSession)
        first = session.start()
        assert "Your working directory is /tmp/work" in first.text and first.screen.endswith("~$")
        assert session.step("cd inbox").observation.text.endswith("~/inbox$")
        assert "/tmp/work/inbox\n" in session.step("export MARK=kept; pwd").observation.text
        assert "kept-here" in session.step("echo $MARK-here").observation.text
        assert "[1]" in session.step("sleep 300 &").observation.text
        jobs = session.step("jobs; id -u").observation.text
        assert "Running" in jobs and "sleep 300 &" in jobs and "\n10000\n" in jobs
        verdict = session.score()
    assert verdict.score == 0.0  # nothing was sorted


@pytest.mark.parametrize("name", SHELL_ENVS)
@pytest.mark.parametrize("variant", [0, 1])
def test_every_shell_reference_scores_one_through_the_terminal(gym, name, variant):
    """Written for fresh shells, the references hold in one shell too (a service started from it included),
    and none waits out its step: git prints without a pager."""
    env = persistent(name)
    with gym.session(env, variant=variant) as session:
        session.start()
        for action in action_sequences(env, "reference")[variant]:
            step = session.step(action)
            assert not step.done and "timed out" not in step.observation.text, step.observation.text
        assert session.score().score == 1.0


def test_a_python_repl_lives_across_actions_with_terminus_keystrokes(gym):
    with gym.session(persistent()) as session:
        session.start()
        assert keystrokes_until(session, "python3 -q\n", 1.5, ">>>").endswith(">>>")
        assert session.step("x = 6 * 7").observation.text.endswith(">>>")
        assert "42" in keystrokes_until(session, "print(x)\n", 0.5, ">>>")
        assert keystrokes_until(session, "C-d", 0.5, "~$").rstrip().endswith("~$")


def test_a_step_that_never_returns_times_out_and_c_c_stops_it(gym):
    with gym.session(persistent(step_timeout_s=1)) as session:
        session.start()
        started = time.monotonic()
        step = session.step("echo begun; sleep 600")
        assert time.monotonic() - started < 25 and not step.done
        assert "begun" in step.observation.text and "[timed out after 1 s; it is still running" in step.observation.text
        stopped = keystrokes_until(session, "C-c", 0.3, "~$")
        assert "^C" in stopped and stopped.rstrip().endswith("~$")
        assert "after" in session.step("echo after").observation.text


def test_the_agents_terminal_processes_are_gone_before_grading(gym):
    env = persistent()
    count = ["sh", "-c", "for p in /proc/[0-9]*; do [ \"$(stat -c %u $p 2>/dev/null)\" = 10000 ] && echo $p; done"
                          " | wc -l"]
    with gym.session(env) as session:
        session.start()
        for action in action_sequences(env, "reference")[0]:
            session.step(action)
        session.step("(while :; do date >> /tmp/tick.log; sleep 0.01; done) &")
        session.step({"keystrokes": "python3 -q\n", "duration": 1})  # a REPL in the foreground as it is graded
        box = session._sandbox.box
        assert int(box.exec(count, ExecOptions(timeout_s=20)).stdout) >= 3
        report, in_play, _ = session.actions.session_runner(session, box, "verify", timeout_s=60)
        assert in_play and report["score"] == 1.0, report
        assert int(box.exec(count, ExecOptions(timeout_s=20)).stdout) == 0
        assert session.score().score == 1.0


@pytest.mark.parametrize("attack", ["kill -9 $$", "exit 0", "kill -9 $PPID; echo tried", "exec 0<&-"])
def test_an_agent_that_ends_or_attacks_its_shell_gets_a_zero(gym, attack):
    with gym.session(persistent(step_timeout_s=3)) as session:
        session.start()
        step = session.step(attack)
        if not step.done:
            step = session.step("echo still")
        verdict = session.score()  # a Verdict: NoVerdictError would fail the test
    assert (verdict.score, verdict.passed) == (0.0, False)


def test_a_flooding_agent_gets_a_zero_and_its_observation_stays_bounded(gym):
    with gym.session(persistent(step_timeout_s=3, output_chars=2000)) as session:
        session.start()
        flood = session.step("yes $(head -c 1000 /dev/zero | tr '\\0' x)")
        assert len(flood.observation.text) <= 2000 and "timed out" in flood.observation.text
        session.step("cat /dev/urandom & cat /dev/urandom & cat /dev/urandom &")
        try:
            verdict = session.score()
        except NoVerdictError as exc:  # pragma: no cover - the failure this test exists for
            pytest.fail(f"a flood bought no verdict: {exc}")
    assert (verdict.score, verdict.passed) == (0.0, False)


def test_a_fork_bomb_in_the_terminal_gets_a_zero(gym):
    with gym.session(persistent(step_timeout_s=3)) as session:
        session.start()
        if not session.step(FILL_PIDS).done:
            session.step("echo hello")
        verdict = session.score()  # a Verdict: NoVerdictError would fail the test
    assert verdict.score == 0.0 and verdict.error_type in ("policy_sandbox_failure", "wrong_answer")


def test_a_provider_without_streams_is_refused_with_the_reason(monkeypatch, gym):
    monkeypatch.setattr(type(gym.provider), "streams", False)
    with pytest.raises(ValueError, match="persistent terminal, which needs a provider"):
        gym.session(persistent())
