"""Host-wide admission control (deepgym.admission): one bound on running sandboxes, shared by every process and
thread, that survives crashes; waiting for it is never charged to a sample.

The first tests need no Docker: real processes and threads take real file locks. The last one offers 20 times
the bound to the real engine from several processes through verl's ``compute_score``, as verl's reward workers
do: every busy loop must still be ``solution_timeout``, every right answer 1.0, and none ``host_overloaded``.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from deepgym import admission as admission_module
from deepgym.admission import (BOUND_VARIABLE, HOST, Admission, AdmissionCancelled, AdmissionTimeout, bound_variable,
                               engine_key)

ROOT = Path(__file__).resolve().parents[2]

# Each process: THREADS threads take a slot ROUNDS times each and log "enter"/"leave" with CLOCK_MONOTONIC (one
# clock for the whole host) just inside the held stretch, so the logged stretches lie within the held ones.
HOLDER = textwrap.dedent('''
    import os, sys, threading, time
    from deepgym.admission import Admission
    directory, bound, threads, rounds, hold_s, log = sys.argv[1:7]
    admission = Admission(bound=int(bound), directory=directory)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    def work():
        for _ in range(int(rounds)):
            with admission.slot():
                os.write(out, f"{time.monotonic():.6f} enter\\n".encode())
                time.sleep(float(hold_s))
                os.write(out, f"{time.monotonic():.6f} leave\\n".encode())
    pool = [threading.Thread(target=work) for _ in range(int(threads))]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
''')
# Takes every slot, says so, and waits to be killed.
HOG = textwrap.dedent('''
    import sys, time
    from deepgym.admission import Admission
    admission = Admission(bound=int(sys.argv[2]), directory=sys.argv[1])
    slots = [admission.acquire() for _ in range(int(sys.argv[2]))]
    print("held", flush=True)
    time.sleep(600)
''')
# Waits for a slot (at the head of the queue, since it is the only waiter), says so first.
WAITER = textwrap.dedent('''
    import sys
    from deepgym.admission import Admission
    print("waiting", flush=True)
    Admission(bound=int(sys.argv[2]), directory=sys.argv[1]).acquire()
    print("admitted", flush=True)
''')


def python(script: str, *args: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE, text=True, env=env)


def most_at_once(log: Path) -> tuple[int, int]:
    """(the most stretches that overlapped, how many stretches there were) in a HOLDER log."""
    events = sorted((float(at), kind == "enter") for at, kind in (line.split() for line in log.read_text().splitlines()))
    now = peak = entered = 0
    for _, enter in events:
        now += 1 if enter else -1
        entered += enter
        peak = max(peak, now)
    return peak, entered


def test_the_bound_holds_across_processes_and_threads(tmp_path):
    log = tmp_path / "log"
    holders = [python(HOLDER, tmp_path / "slots", 3, 5, 4, 0.02, log) for _ in range(4)]
    for holder in holders:
        holder.communicate(timeout=120)
        assert holder.returncode == 0
    peak, stretches = most_at_once(log)
    assert stretches == 4 * 5 * 4
    assert peak == 3, f"at most 3 sandboxes may run at once, and 20 threads kept them all busy: saw {peak}"


def test_a_slot_held_by_a_killed_process_is_free_at_once(tmp_path):
    hog = python(HOG, tmp_path, 2)
    try:
        assert hog.stdout.readline() == "held\n"
        admission = Admission(bound=2, directory=tmp_path)
        with pytest.raises(AdmissionTimeout):
            admission.acquire(timeout_s=0.2)
    finally:
        hog.kill()
        hog.wait()
        hog.stdout.close()
    admission.acquire(timeout_s=0).release()  # the kernel dropped the dead holder's locks: free on the first try


def test_a_waiter_killed_at_the_head_of_the_queue_holds_nobody_up(tmp_path):
    hog = python(HOG, tmp_path, 1)
    waiter = None
    try:
        assert hog.stdout.readline() == "held\n"
        waiter = python(WAITER, tmp_path, 1)
        assert waiter.stdout.readline() == "waiting\n"
        _wait_until(lambda: _locked(tmp_path, "queue"), "the waiter never took the queue's head")
        waiter.send_signal(signal.SIGKILL)
        waiter.wait()
    finally:
        hog.kill()
        hog.wait()
        for process in (hog, waiter):
            if process is not None:
                process.stdout.close()
    assert not _locked(tmp_path, "queue"), "a dead waiter kept the queue's head"
    Admission(bound=1, directory=tmp_path).acquire(timeout_s=0).release()


def test_waits_time_out_or_are_cancelled_and_slots_come_back(tmp_path):
    admission = Admission(bound=1, directory=tmp_path)
    other = Admission(bound=1, directory=tmp_path)  # another client: only the files are shared
    with admission.slot() as first:
        assert (first.key, first.index) == (HOST, 0)
        with pytest.raises(AdmissionTimeout, match="all 1 were held.*DEEPGYM_MAX_SANDBOXES"):
            other.acquire(timeout_s=0.1)
        asked = []
        with pytest.raises(AdmissionCancelled):  # raised at the first poll that finds it cancelled, no later
            other.acquire(cancelled=lambda: asked.append(None) or len(asked) >= 3)
        assert len(asked) == 3
    first.release()  # idempotent
    with other.slot(timeout_s=1) as again:
        assert again.index == 0


def test_a_freed_slot_goes_to_a_waiter_within_milliseconds(tmp_path, monkeypatch):
    """The waiter at the head of the queue tries every HEAD_POLL_S (2 ms) and takes a freed slot at its next
    try: counted in the pauses it sleeps, not timed, so a loaded host cannot fail it."""
    admission = Admission(bound=1, directory=tmp_path)
    held = Admission(bound=1, directory=tmp_path).acquire()
    pauses: list[float] = []
    sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda pause: (pauses.append(pause), sleep(pause))[1])
    waiter = threading.Thread(target=lambda: admission.acquire().release())
    waiter.start()
    _wait_until(lambda: len(pauses) >= 5, "the waiter never polled")
    before = len(pauses)
    held.release()
    waiter.join(timeout=60)
    assert not waiter.is_alive() and len(pauses) - before <= 1, "the waiter slept past a free slot"
    assert set(pauses) == {admission_module.HEAD_POLL_S}, pauses  # it took the queue's head at its first try


def _locked(directory: Path, name: str) -> bool:
    """Whether some process holds the host key's admission lock file ``name`` under ``directory``."""
    try:
        fd = os.open(Admission(bound=1, directory=directory).folder / name, os.O_RDONLY)
    except FileNotFoundError:  # nobody has made it yet
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _wait_until(condition: Callable[[], bool], failure: str, within_s: float = 60) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, failure
        threading.Event().wait(0.01)  # not time.sleep, which a test may be counting


def test_keys_have_their_own_slots_and_bounds(tmp_path, monkeypatch):
    with Admission(bound=1, directory=tmp_path).slot(), Admission("e2b-acme", bound=1, directory=tmp_path).slot():
        pass  # a second key is not held up by the first
    monkeypatch.setenv(BOUND_VARIABLE, "7")
    monkeypatch.setenv("DEEPGYM_MAX_SANDBOXES_E2B_ACME", "3")
    assert Admission(directory=tmp_path).bound == 7
    assert Admission("e2b-acme", directory=tmp_path).bound == 3
    assert Admission(bound=2, directory=tmp_path).bound == 2
    assert bound_variable("docker-10.0.0.5-2376") == "DEEPGYM_MAX_SANDBOXES_DOCKER_10_0_0_5_2376"
    monkeypatch.delenv(BOUND_VARIABLE)
    assert Admission(directory=tmp_path).bound == os.cpu_count()
    assert [engine_key(h) for h in (None, "unix:///var/run/docker.sock", "tcp://10.0.0.5:2376")] == \
        [HOST, HOST, "docker-10.0.0.5-2376"]


@pytest.mark.parametrize("key,bound,why", [
    ("host", 0, "must be a whole number of at least 1, got 0"),
    ("host", True, "must be a whole number of at least 1, got True"),
    ("Host/x", 2, "must be 1 to 64 of a-z"),
], ids=["zero", "bool", "bad-key"])
def test_bad_bounds_and_keys_are_refused_by_name(tmp_path, key, bound, why):
    with pytest.raises(ValueError, match=why):
        Admission(key, bound, directory=tmp_path)


def test_a_bad_bound_variable_says_which_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv(BOUND_VARIABLE, "lots")
    with pytest.raises(ValueError, match="DEEPGYM_MAX_SANDBOXES='lots' is not a whole number"):
        Admission(directory=tmp_path)


def test_a_lock_that_is_not_a_regular_file_is_refused(tmp_path):
    (tmp_path / HOST).mkdir()
    os.mkfifo(tmp_path / HOST / "slot-0")  # opening a FIFO to read would block
    with pytest.raises(OSError, match="slot-0 is not a regular file"):
        Admission(bound=1, directory=tmp_path).acquire(timeout_s=1)


# --------------------------------------------------------------------------------------------------------
# At 20 times the bound, against the real engine.

BOUND = 2
PROCESSES, THREADS = 4, 10  # 40 samples offered at once: 20 times the bound
BUSY = "```python\ndef coin_change(coins, amount):\n    while True:\n        pass\n```"
SCORER = textwrap.dedent('''
    import json, sys
    from concurrent.futures import ThreadPoolExecutor
    from deepgym.integrations.verl import compute_score
    responses = json.loads(sys.stdin.read())
    def score(response):
        try:
            return compute_score("coin_change", response, extra_info={"variant": 0}, mode="docker")
        except Exception as exc:
            return {"error_type": getattr(exc, "error_type", type(exc).__name__), "score": None}
    with ThreadPoolExecutor(max_workers=len(responses)) as pool:
        print(json.dumps(list(pool.map(score, responses))))
''')


@pytest.mark.docker
def test_twenty_times_the_bound_keeps_every_verdict_fair(tmp_path):
    from deepgym import load_environment
    from deepgym.authoring.check import as_response
    from deepgym.images import build

    build(["coin_change"])
    env = load_environment("coin_change")
    right = as_response(env, env.solutions()["reference"].read_text())
    variables = {**os.environ, "PYTHONPATH": str(ROOT), "DEEPGYM_ADMISSION_DIR": str(tmp_path),
                 BOUND_VARIABLE: str(BOUND)}
    responses = [[BUSY if i % 2 else right for i in range(THREADS)] for _ in range(PROCESSES)]
    scorers = [subprocess.Popen([sys.executable, "-c", SCORER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env=variables) for _ in range(PROCESSES)]
    outputs = [scorer.communicate(json.dumps(batch), timeout=600)[0] for scorer, batch in zip(scorers, responses, strict=True)]
    outcomes = [(response == BUSY, result) for batch, output in zip(responses, outputs, strict=True)
                for response, result in zip(batch, json.loads(output), strict=True)]
    busy = [result for is_busy, result in outcomes if is_busy]
    right_ones = [result for is_busy, result in outcomes if not is_busy]
    assert len(busy) == len(right_ones) == PROCESSES * THREADS // 2
    assert not [r for _, r in outcomes if r["error_type"] == "host_overloaded"], outcomes
    assert all((r["score"], r["error_type"]) == (0.0, "solution_timeout") for r in busy), busy
    assert all((r["score"], r["passed"]) == (1.0, 1.0) for r in right_ones), right_ones


@pytest.mark.docker
def test_waiting_for_a_slot_is_not_charged_to_the_sample(tmp_path):
    """With one slot, a right answer queued behind a busy loop waits seconds, yet its own clocks (the verdict's
    total_s: the sandbox's whole run) start only once it is admitted."""
    from concurrent.futures import ThreadPoolExecutor

    from deepgym import DeepGym, load_environment
    from deepgym.authoring.check import as_response
    from deepgym.images import build

    build(["coin_change"])
    env = load_environment("coin_change")
    right = as_response(env, env.solutions()["reference"].read_text())
    with DeepGym(mode="docker", max_sandboxes=1) as gym, ThreadPoolExecutor(max_workers=2) as pool:
        gym.admission = Admission(bound=1, directory=tmp_path)
        busy = pool.submit(gym.judge, env, BUSY)
        _wait_until(lambda: _locked(tmp_path, "slot-0"), "the busy loop never took the slot", within_s=120)
        started = time.monotonic()
        verdict = pool.submit(gym.judge, env, right).result()
        waited = time.monotonic() - started
        assert busy.result().error_type == "solution_timeout"
    assert verdict.score == 1.0, verdict.to_dict()
    assert waited > verdict.timings["total_s"] + 0.3, (waited, verdict.timings)
    # The wait is the verdict's own timing, apart from total_s; the busy loop took the free slot at once.
    assert waited >= verdict.timings["admission_wait_s"] > 0.3, (waited, verdict.timings)
    assert busy.result().timings["admission_wait_s"] < verdict.timings["admission_wait_s"], busy.result().timings
