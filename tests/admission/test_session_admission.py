"""Sessions and desktops take the host's admission slots (deepgym.admission, deepgym.session): at a bound of 1
no two episodes' actions run at once, in threads or in processes, and a single-turn sample waits while a step
runs; a step that waited for its slot still gets its whole step timeout and episode budget; async episodes
wait without a thread; a shutdown during the wait ends the episode ``cancelled``, never 0.

Real containers of real images. Actions log their start and end from inside the container (``date``: the
host's one clock), so "never at once" is read from what ran, not from deepgym's bookkeeping.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from support import ensure_images, fenced, solution, stopped
from deepgym import DeepGym, NoVerdictError
from deepgym.admission import Admission, AdmissionTimeout
from deepgym.environments import load_environment
from deepgym.environments import ENVIRONMENT_LABEL
from deepgym.sandbox.docker import LABEL
from deepgym.authoring.replay import action_sequences

pytestmark = pytest.mark.docker
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parents[1]
SHELL = "shell_find_largest"
DESKTOP = "todo_list"
STEP_TIMEOUT_S = 4.0
SLEEP_S = 2.5
"""The first action of each episode sleeps this long, well within STEP_TIMEOUT_S, but not if its timeout
counted the wait behind the other episode's sleep."""
MARK = 'echo "@@ $(date +%s.%N)"'


def marked(action: str) -> str:
    """``action`` between two lines that say, from inside the container, when it began and ended."""
    return f"{MARK}\n{action}\n{MARK}"


def shell_env(**limits: float):
    env = load_environment(SHELL)
    return dataclasses.replace(env, session=dataclasses.replace(env.session, **limits))


def timed_episode(gym: DeepGym, variant: int, solution_name: str, ready=lambda: None) -> dict:
    """One episode of SHELL: a long first action, then the actions of ``solutions/<solution_name>.json``, each
    marked; ``ready()`` is called between the start and the first action (a barrier with the other episode).
    Returns the actions' intervals, their outputs, the score and the time the steps waited for slots."""
    env = shell_env(step_timeout_s=STEP_TIMEOUT_S)
    actions = [f"sleep {SLEEP_S}", *action_sequences(env, solution_name)[variant]]
    intervals, texts = [], []
    with gym.session(env, variant) as session:
        session.start()
        ready()
        for action in actions:
            text = session.step(marked(action)).observation.text
            stamps = [float(line.split()[1]) for line in text.splitlines() if line.startswith("@@ ")]
            assert len(stamps) == 2, text
            intervals.append(stamps)
            texts.append(text)
        verdict = session.score()
    return {"intervals": intervals, "texts": texts, "score": verdict.score,
            "waited_s": verdict.timings["admission_wait_s"]}


# One episode in a process of its own at a bound of 1 (argv: variant, solution, my flag file, the other's).
PROCESS_EPISODE = textwrap.dedent('''
    import json, os, sys, time
    sys.path.insert(0, sys.argv[1])
    from deepgym import DeepGym, NoVerdictError
    from test_session_admission import timed_episode
    variant, name, mine, theirs = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    def ready():
        open(mine, "w").close()
        while not os.path.exists(theirs):
            time.sleep(0.02)
    with DeepGym(mode="docker", max_sandboxes=1) as gym:
        print(json.dumps(timed_episode(gym, variant, name, ready)))
''')


def check_episodes(first: dict, second: dict) -> None:
    """Both verdicts right, no action of one during an action of the other, and no action timed out: the one
    that waited for its slot behind the other's sleep still had its whole step timeout."""
    assert (first["score"], second["score"]) == (1.0, 0.0)
    spans = sorted(first["intervals"] + second["intervals"])
    for (_, ended), (began, _) in zip(spans, spans[1:]):
        assert began >= ended, f"two actions ran at once: {spans}"
    assert not any("timed out" in text for text in first["texts"] + second["texts"])
    assert max(first["waited_s"], second["waited_s"]) > SLEEP_S / 2, "one first action waited for the other"


@pytest.fixture
def admission_dir(tmp_path, monkeypatch) -> Path:
    """A folder of slots of this test's own, at a bound of 1."""
    monkeypatch.setenv("DEEPGYM_ADMISSION_DIR", str(tmp_path))
    monkeypatch.setenv("DEEPGYM_MAX_SANDBOXES", "1")
    return tmp_path


@pytest.fixture(scope="module", autouse=True)
def images():
    ensure_images(SHELL, "coin_change")


def test_two_episodes_in_two_threads_at_bound_1_never_act_at_once(admission_dir):
    barrier = threading.Barrier(2, timeout=120)
    results: dict[str, dict] = {}

    def run(name: str) -> None:
        results[name] = timed_episode(gym, 0, name, barrier.wait)

    with DeepGym(mode="docker", max_sandboxes=1) as gym:
        threads = [threading.Thread(target=run, args=(name,)) for name in ("reference", "wrong_top_level_only")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    check_episodes(results["reference"], results["wrong_top_level_only"])


def test_two_episodes_in_two_processes_at_bound_1_never_act_at_once(admission_dir):
    flags = [str(admission_dir / "ready-0"), str(admission_dir / "ready-1")]
    programs = [subprocess.Popen([sys.executable, "-c", PROCESS_EPISODE, str(TESTS), "0", name, flags[i],
                                  flags[1 - i]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), str(TESTS)])})
                for i, name in enumerate(("reference", "wrong_top_level_only"))]
    outputs = [program.communicate(timeout=300) for program in programs]
    assert [program.returncode for program in programs] == [0, 0], [errors[-2000:] for _, errors in outputs]
    check_episodes(*(json.loads(out.strip().splitlines()[-1]) for out, _ in outputs))


def test_a_waiting_step_is_charged_neither_its_timeout_nor_the_episodes_budget(admission_dir):
    """The test holds the only slot for 3 s while a step waits; the step then sleeps 3 s of its 5 s timeout in
    an episode of 6 s. Counted from when it asked, the step would have had 3 s and the episode would be over."""
    with DeepGym(mode="docker") as gym, gym.session(shell_env(step_timeout_s=5, episode_s=6)) as session:
        session.start()
        held = Admission(bound=1, directory=admission_dir).acquire(timeout_s=60)
        threading.Timer(3.0, held.release).start()
        step = session.step("sleep 3; echo slept")
        assert step.observation.text == "slept\n" and not step.done
        for action in action_sequences(session.env, "reference")[0]:
            session.step(action)
        verdict = session.score()
    assert verdict.score == 1.0 and verdict.timings["admission_wait_s"] >= 2.0, verdict.timings


def test_a_step_that_gets_no_slot_within_the_episodes_allowance_has_no_verdict(admission_dir):
    """Like a single-turn sample whose account slot never came (StartFailure): nothing of the agent's ran, so
    no verdict, never a 0; the container's lifetime covers the allowance, so it is the wait that ends it."""
    with DeepGym(mode="docker") as gym, gym.session(SHELL) as session:
        session._wait_allowance_s = 1.0
        session.start()
        held = Admission(bound=1, directory=admission_dir).acquire(timeout_s=60)
        try:
            step = session.step("echo ran")
        finally:
            held.release()
        assert step.done and "ran" not in step.observation.text
        with pytest.raises(NoVerdictError) as failure:
            session.score()
    assert failure.value.error_type == "sandbox_start_failure"
    assert "allowance of 1 s" in failure.value.reason and "DEEPGYM_MAX_SANDBOXES" in failure.value.reason


def slot_held(directory: Path) -> bool:
    try:
        Admission(bound=1, directory=directory).acquire(timeout_s=0).release()
    except AdmissionTimeout:
        return True
    return False


def containers_of(env: str, gym: DeepGym) -> list[str]:
    """``gym``'s own containers of ``env``, by its provider's run id: the owner label names the process, which
    other clients share (the suite's shared client keeps a prewarmed pool of ``env`` in this very process)."""
    return subprocess.run(["docker", "ps", "-aq", "--filter", f"label={ENVIRONMENT_LABEL}={env}",
                           "--filter", f"label={LABEL}={gym.provider.run_id}"],
                          capture_output=True, text=True, check=True).stdout.split()


def test_a_step_and_a_single_turn_sample_share_the_bound(admission_dir, monkeypatch):
    """While a step's action runs (it waits for a file the test makes), a sample offered meanwhile gets no
    container and does not finish; once the action ends, the sample is judged right."""
    monkeypatch.setenv("DEEPGYM_DOCKER_PREWARM", "0")  # no coin_change container before the sample's own
    outcomes: dict[str, object] = {}
    with DeepGym(mode="docker") as gym, gym.session(SHELL) as session:
        session.start()
        box = session._sandbox.id
        stepping = threading.Thread(target=lambda: outcomes.update(
            step=session.step("until [ -e go ]; do sleep 0.05; done; echo went")))
        stepping.start()
        deadline = time.monotonic() + 60
        while not slot_held(admission_dir):
            assert time.monotonic() < deadline, "the step never took its slot"
            time.sleep(0.02)
        sampling = threading.Thread(target=lambda: outcomes.update(
            sample=gym.judge("coin_change", fenced(solution("coin_change", "reference")))))
        sampling.start()
        sampling.join(3.0)  # long enough to judge coin_change several times over on an idle host
        assert sampling.is_alive(), "the sample was judged while the step held the slot"
        assert containers_of("coin_change", gym) == [], "the sample's container was made while the step held the slot"
        subprocess.run(["docker", "exec", "-u", "10000:10000", box, "touch", "/tmp/work/go"], check=True)
        stepping.join(60)
        sampling.join(120)
    assert outcomes["step"].observation.text == "went\n" and outcomes["sample"].score == 1.0


def test_async_episodes_wait_for_their_slots_without_a_thread(admission_dir):
    """Six async episodes at a bound of 1 act in turns; while they wait, no thread is ever inside a blocking
    admission wait, and the session executor adds at most a few threads, not one per waiting step."""
    count = 6
    env = shell_env()
    actions = action_sequences(env, "reference")[0]
    in_wait, threads = [0], [0]

    def blocked_in_admission() -> int:
        waits = ("acquire", "_file_slot_attempts")
        return sum(1 for frame in sys._current_frames().values() if any(
            f.f_code.co_filename.endswith("admission.py") and f.f_code.co_name in waits for f in _stack(frame)))

    async def watch(stop: asyncio.Event, baseline: int) -> None:
        while not stop.is_set():
            in_wait[0] = max(in_wait[0], blocked_in_admission())
            threads[0] = max(threads[0], threading.active_count() - baseline)
            await asyncio.sleep(0.005)

    async def main(gym: DeepGym) -> list[dict]:
        sessions = [gym.asession(env, 0) for _ in range(count)]
        await asyncio.gather(*(session.start() for session in sessions))
        stop = asyncio.Event()
        watcher = asyncio.ensure_future(watch(stop, threading.active_count()))

        async def play(session) -> dict:
            spans = []
            for action in ["sleep 0.3", *actions]:
                text = (await session.step(marked(action))).observation.text
                spans.append([float(line.split()[1]) for line in text.splitlines() if line.startswith("@@ ")])
            verdict = await session.score()
            await session.close()
            return {"spans": spans, "score": verdict.score, "waited_s": verdict.timings["admission_wait_s"]}

        try:
            return await asyncio.gather(*(play(session) for session in sessions))
        finally:
            stop.set()
            await watcher

    with DeepGym(mode="docker") as gym:
        results = asyncio.run(main(gym))
    assert [result["score"] for result in results] == [1.0] * count
    spans = sorted(span for result in results for span in result["spans"])
    assert all(began >= ended for (_, ended), (began, _) in zip(spans, spans[1:])), spans
    assert sum(result["waited_s"] for result in results) > 1.0, "the episodes did wait for each other"
    assert in_wait[0] == 0, "a thread waited for admission"
    assert threads[0] <= 3, f"{threads[0]} threads above the baseline for {count} episodes"


def _stack(frame):
    while frame is not None:
        yield frame
        frame = frame.f_back


# Two episodes, one sync in a thread and one async, whose first steps wait for the slot the test holds; the
# process shuts down meanwhile. Prints each episode's step text, its outcome's error type, and what score() gave.
CANCELLED = textwrap.dedent('''
    import asyncio, json, sys, threading
    from deepgym import DeepGym, NoVerdictError, shutdown
    def ended(session):
        try:
            verdict = session.session.score() if hasattr(session, "session") else session.score()
            return ["verdict", verdict.score, verdict.error_type]
        except NoVerdictError as failure:
            return ["no verdict", None, failure.error_type]
    with DeepGym(mode="docker", max_sandboxes=1) as gym:
        sync, aio = gym.session(sys.argv[1]), gym.asession(sys.argv[1])
        sync.start()
        async def main():
            await aio.start()
            print("started", flush=True)
            sys.stdin.readline()
            out = {}
            thread = threading.Thread(target=lambda: out.update(sync=sync.step("echo ran").observation.text))
            thread.start()
            stepping = asyncio.ensure_future(aio.step("echo ran"))
            await asyncio.sleep(1.0)
            await asyncio.to_thread(shutdown.shutdown, "the test shut it down")
            out["aio"] = (await stepping).observation.text
            thread.join()
            return out
        texts = asyncio.run(main())
        print(json.dumps({"sync": [texts["sync"], ended(sync)], "aio": [texts["aio"], ended(aio)]}))
''')


def test_a_shutdown_while_a_step_waits_for_its_slot_ends_the_episode_cancelled(admission_dir):
    program = subprocess.Popen([sys.executable, "-c", CANCELLED, SHELL], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert program.stdout.readline().strip() == "started", program.stderr.read()
        held = Admission(bound=1, directory=admission_dir).acquire(timeout_s=60)
        try:
            program.stdin.write("go\n")
            program.stdin.flush()
            out, errors = program.communicate(timeout=120)
        finally:
            held.release()
    finally:
        stopped(program)
    assert program.returncode == 0, errors[-2000:]
    result = json.loads(out.strip().splitlines()[-1])
    for text, (kind, score, error_type) in result.values():
        assert "ran" not in text and "shutting down" in text
        assert (kind, score, error_type) == ("no verdict", None, "cancelled")


@pytest.mark.desktop
def test_a_desktop_episode_waits_for_its_slot_uncharged_and_scores_right(admission_dir, monkeypatch):
    """The test holds the only slot while a desktop episode starts and steps: both wait, the episode's budget
    and its steps' timeouts do not count the waits, and the reference still scores 1."""
    monkeypatch.setenv("DEEPGYM_DESKTOP_PREWARM", "0")
    ensure_images(DESKTOP)
    env = load_environment(DESKTOP)
    actions = action_sequences(env, "reference")[0]
    with DeepGym(mode="docker") as gym, gym.session(env, 0) as session:
        held = Admission(bound=1, directory=admission_dir).acquire(timeout_s=60)
        starting = threading.Thread(target=session.start)
        starting.start()
        starting.join(2.0)
        assert starting.is_alive() and not containers_of(DESKTOP, gym), "the desktop started without a slot"
        held.release()
        starting.join(120)
        held = Admission(bound=1, directory=admission_dir).acquire(timeout_s=60)
        threading.Timer(2.0, held.release).start()
        steps = [session.step(action) for action in actions]
        verdict = session.score()
    assert all(step.observation.images for step in steps[:-1])
    assert verdict.score == 1.0 and verdict.timings["admission_wait_s"] >= 1.0, verdict.timings
