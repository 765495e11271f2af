"""Graceful shutdown (deepgym.shutdown), with real processes, real signals and real containers: SIGTERM or
SIGINT mid-batch removes every container of the process (prewarmed ones included), the samples in flight end
as no verdict (``cancelled``, never a 0) and those already scored are kept; a SIGKILLed process's containers,
prewarmed ones included, are removed by the next start, a live process's never."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from support import ROOT, ensure_images, fenced, solution, stopped
from deepgym.sandbox.docker import OWNER_LABEL, DockerProvider, owner_label

RIGHT = fenced(solution("coin_change", "reference"))
# Sleeps past its wall-clock limit (4 s per case): in flight for seconds, then solution_timeout if not stopped.
SLOW = fenced("import time\ndef coin_change(coins, amount):\n    time.sleep(60)\n")
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "DEEPGYM_MAX_SANDBOXES": "2"}


def containers_of(pid: int, owner: str | None = None, *, running: bool = False) -> list[str]:
    """The containers whose owner label names process ``pid`` (its exact label when given); ``running``: only
    those running now (a used one on its way out has stopped)."""
    result = subprocess.run(["docker", "ps", *([] if running else ["-a"]), "--format", f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}'],
                            capture_output=True, text=True, check=True)
    return [line.split()[0] for line in result.stdout.splitlines()
            if len(line.split()) == 2 and (line.split()[1] == owner if owner else f"/{pid}/" in line.split()[1])]


def wait_for(condition, timeout_s: float = 60.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def signalled(script: str, *args: str, containers: int, env: dict[str, str] = ENV,
              wait_s: float = 60.0) -> tuple[subprocess.Popen, str, str]:
    """Run ``script`` in a fresh interpreter until it prints ``ready`` and has ``containers`` containers, then
    SIGTERM it: the ended process, and what it printed afterwards (stdout, stderr)."""
    program = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = program.stdout.readline().strip()
        assert first == "ready", program.stderr.read() if program.poll() is not None else first
        wait_for(lambda: len(containers_of(program.pid)) >= containers, timeout_s=wait_s,
                 what=f"{containers} containers of the program")
        program.send_signal(signal.SIGTERM)
        out, errors = program.communicate(timeout=90)
    finally:
        stopped(program)
    return program, out, errors



def test_a_signal_runs_the_registered_closers_then_what_the_program_had():
    """No Docker: the closer runs before the program's own handler, and a default SIGTERM still ends the process
    by the signal; DEEPGYM_SIGNAL_HANDLERS=0 leaves the handlers alone."""
    script = textwrap.dedent("""
        import os, signal, sys
        from deepgym import shutdown
        order = []
        if sys.argv[1] == "host":
            signal.signal(signal.SIGTERM, lambda *a: order.append("host handler"))
        shutdown.register(lambda: order.append("closed"))
        shutdown.install()
        print(signal.getsignal(signal.SIGTERM) is shutdown._handle, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        print(order, shutdown.requested(), flush=True)
    """)
    host = subprocess.run([sys.executable, "-c", script, "host"], capture_output=True, text=True, env=ENV)
    assert host.returncode == 0, host.stderr
    assert host.stdout.splitlines() == ["True", "['closed', 'host handler'] True"]
    default = subprocess.run([sys.executable, "-c", script, "default"], capture_output=True, text=True, env=ENV)
    assert default.returncode == -signal.SIGTERM and default.stdout.splitlines() == ["True"]
    opted_out = subprocess.run([sys.executable, "-c", script, "host"], capture_output=True, text=True,
                               env={**ENV, "DEEPGYM_SIGNAL_HANDLERS": "0"})
    assert opted_out.stdout.splitlines() == ["False", "['host handler'] False"]


@pytest.mark.docker
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_batch_keeps_what_was_scored_cancels_the_rest_and_leaves_no_container(signum, tmp_path):
    ensure_images("coin_change")
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in [RIGHT, RIGHT, SLOW, SLOW, SLOW, RIGHT]))
    batch = subprocess.Popen([sys.executable, "-m", "deepgym.cli", "run-batch", "coin_change", "--responses",
                              str(responses)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        printed = [batch.stdout.readline(), batch.stdout.readline()]  # the two right answers are judged
        assert wait_for(lambda: len(containers_of(batch.pid)) >= 2, what="the slow samples' containers")
        batch.send_signal(signum)
        rest, errors = batch.communicate(timeout=60)
    finally:
        stopped(batch)
    lines = [json.loads(line) for line in printed + rest.splitlines()]
    assert batch.returncode == 128 + signum, errors
    assert [line["score"] for line in lines[:2]] == [1.0, 1.0], "what was scored before the signal is kept"
    assert [line["error_type"] for line in lines[2:4]] == ["cancelled", "cancelled"], "in flight: no verdict"
    assert all(line["has_verdict"] is False for line in lines[2:4])
    assert lines[4]["error_type"] == "cancelled" and lines[5]["error_type"] in ("cancelled", None)
    assert lines[6]["summary"]["samples"] == 6
    assert f"{signal.Signals(signum).name} received" in lines[2]["reason"]
    assert containers_of(batch.pid) == [], "every container of the process is gone, prewarmed ones included"


LIBRARY_BATCH = textwrap.dedent("""
    import sys
    from deepgym import DeepGym
    right, slow = sys.argv[1], sys.argv[2]
    gym = DeepGym(mode="docker")
    gym.run("coin_change", right)             # the pool is prewarmed now
    print("ready", flush=True)
    gym.run_batch("coin_change", [slow] * 4)
    print("not reached: the default SIGTERM ends the process", flush=True)
""")


@pytest.mark.docker
def test_a_default_sigterm_still_ends_the_process_after_its_containers_are_removed():
    ensure_images("coin_change")
    # Running and prewarmed ones: a bound of 3 leaves the pool a slot to make one beside the batch's two (at a
    # bound of 2 the refills wait for the batch, tests/sandbox/test_prewarm.py).
    victim, out, errors = signalled(LIBRARY_BATCH, RIGHT, SLOW, containers=3, env={**ENV, "DEEPGYM_MAX_SANDBOXES": "3"})
    assert victim.returncode == -signal.SIGTERM, errors
    assert "not reached" not in out
    assert containers_of(victim.pid) == []


HOST_HANDLER_BATCH = textwrap.dedent("""
    import json, signal, sys
    from deepgym import DeepGym
    received = []
    signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))  # the program's own
    gym = DeepGym(mode="docker")
    print("ready", flush=True)
    batch = gym.run_batch("coin_change", [sys.argv[1]] * 4)
    print(json.dumps({"received": received, "outcomes": [e.error_type for e in batch]}), flush=True)
""")


@pytest.mark.docker
def test_a_programs_own_sigterm_handler_runs_after_deepgyms_and_run_batch_returns_the_cancelled_samples():
    ensure_images("coin_change")
    program, out, errors = signalled(HOST_HANDLER_BATCH, SLOW, containers=2)  # the batch's
    assert program.returncode == 0, errors
    report = json.loads(out)
    assert report == {"received": [signal.SIGTERM], "outcomes": ["cancelled"] * 4}, "in flight or not started"
    assert containers_of(program.pid) == []


DESKTOP_HOLDER = textwrap.dedent("""
    import time
    from deepgym import DeepGym
    gym = DeepGym(mode="docker")
    session = gym.session("signup_form", 0)
    session.start()                           # the pool starts a ready desktop behind this episode's
    print("ready", flush=True)
    time.sleep(300)
""")


@pytest.mark.docker
@pytest.mark.desktop
def test_sigterm_removes_the_episodes_desktop_and_the_prewarmed_one():
    """The desktop pool registers with the shutdown registry like every other pool: a SIGTERM removes its ready
    desktop as well as the running episode's, then the default action ends the process."""
    ensure_images("signup_form")
    holder, _, errors = signalled(DESKTOP_HOLDER, containers=2, env={**ENV, "DEEPGYM_DESKTOP_PREWARM": "1"},
                                  wait_s=120)  # the episode's desktop and a prewarmed one
    assert holder.returncode == -signal.SIGTERM, errors
    assert containers_of(holder.pid) == []


HOLDER = textwrap.dedent("""
    import sys, time
    from deepgym import DeepGym
    gym = DeepGym(mode="docker")
    gym.run("coin_change", sys.argv[1])       # leaves a full pool of prewarmed containers
    print(gym.provider.owner, flush=True)
    time.sleep(300)
""")


@pytest.mark.docker
# Exclusive: any other client's start would reap the orphans before the test sees them outlive their owner.
@pytest.mark.exclusive
def test_the_next_start_reaps_a_sigkilled_processs_prewarmed_containers_never_a_live_ones():
    ensure_images("coin_change")
    victim, bystander = (subprocess.Popen([sys.executable, "-c", HOLDER, RIGHT], stdout=subprocess.PIPE,
                                          text=True, env=ENV) for _ in range(2))
    try:
        victim_owner, bystander_owner = victim.stdout.readline().strip(), bystander.stdout.readline().strip()
        assert victim_owner == owner_label(victim.pid)
        # A full pool: prewarm keeps max_parallel (the CPU count, at least 2) ready per kind.
        wait_for(lambda: len(containers_of(victim.pid, victim_owner)) >= 2, what="the victim's prewarmed pool")

        def bystanders_pool() -> list[str]:
            """Its full pool, once its own sample's container (removed in the background) has left the list."""
            alive = containers_of(bystander.pid, bystander_owner, running=True)
            settled = len(alive) >= 2 and set(alive) == set(containers_of(bystander.pid, bystander_owner))
            return alive if settled else []

        theirs = wait_for(bystanders_pool, what="the bystander's prewarmed pool alone")
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        assert len(containers_of(victim.pid, victim_owner)) >= 2, "a killed process cannot clean up"
        DockerProvider().engine.api()  # the next start
        assert containers_of(victim.pid, victim_owner) == []
        assert set(theirs) <= set(containers_of(bystander.pid, bystander_owner)), "a live process keeps its own"
        bystander.send_signal(signal.SIGTERM)
        bystander.wait(timeout=60)
        assert containers_of(bystander.pid, bystander_owner) == []
    finally:
        for process in (victim, bystander):
            stopped(process)
