"""Strict mode's prewarmed containers (deepgym.sandbox.ready) on the real engine: each is used for exactly one
sample, a sample's deadline starts when it asks, a container that died while it waited is never used, and
closing leaves nothing behind; a refill that fails unexpectedly is logged. The conformance and hostile suites
run through the same path (docker's attached fast path prewarms by default)."""

from __future__ import annotations

import contextlib
import subprocess
import time

import pytest

from deepgym.errors import ConfigurationError
from deepgym.sandbox import ExecOptions, SandboxSpec
from deepgym.sandbox.ready import PREWARM_VARIABLE, prewarm_size

ENV = "coin_change"
# Echoes its stdin back after a pause, as the runner answers its request.
ECHO = ["sh", "-c", "cat; sleep 0.3"]


@pytest.fixture(scope="module")
def spec() -> SandboxSpec:
    from deepgym.images import build, image_name
    from deepgym.sandbox.docker import DockerProvider

    build([ENV])
    with contextlib.closing(DockerProvider(prewarm=0)) as provider:
        image = provider.image(image_name(ENV))
    return SandboxSpec(image=image.id, labels={"deepgym.test": "prewarm"})


def containers(run_id: str, timeout_s: float = 30.0) -> list[str]:
    """The containers of ``run_id`` once none is left or ``timeout_s`` passed (a busy engine removes slowly)."""
    until = time.monotonic() + timeout_s
    while True:
        found = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=deepgym={run_id}"], capture_output=True,
                               text=True, check=True).stdout.split()
        if not found or time.monotonic() > until:
            return found
        time.sleep(0.2)


def ready_count(provider) -> int:
    return sum(map(len, provider.prewarm.waiting().values()))


def wait_ready(provider, count: int, timeout_s: float = 60.0) -> None:
    until = time.monotonic() + timeout_s
    while ready_count(provider) < count:
        assert time.monotonic() < until, "the pool was not refilled"
        time.sleep(0.05)


def wait_made(provider, timeout_s: float = 60.0) -> None:
    """Until no prewarmed container is being made: every refill asked for has landed (or failed)."""
    until = time.monotonic() + timeout_s
    while any(provider.prewarm._making.values()):
        assert time.monotonic() < until, "a refill never landed"
        time.sleep(0.05)


def wait_stopped(container: str, timeout_s: float = 60.0) -> None:
    until = time.monotonic() + timeout_s
    while subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", container], capture_output=True,
                         text=True).stdout.strip() == "true":
        assert time.monotonic() < until, f"{container} still runs after docker kill"
        time.sleep(0.05)


@pytest.mark.docker
def test_each_sample_gets_a_container_of_its_own_made_before_it_asked(spec):
    from deepgym.sandbox.docker import DockerProvider

    provider = DockerProvider(prewarm=2)
    used: list[str] = []
    finish = provider.engine.finish_attached

    def spy(box, options, started):
        used.append((box.container, started - box.made))
        return finish(box, options, started)

    provider.engine.finish_attached = spy
    try:
        first = provider.run(spec, ECHO, ExecOptions(stdin=b"one", timeout_s=30))  # cold: nothing was ready
        wait_ready(provider, 2)
        later = [provider.run(spec, ECHO, ExecOptions(stdin=b"x%d" % i, timeout_s=30)) for i in range(4)]
    finally:
        provider.close()
    assert (first.exit_code, first.stdout) == (0, b"one")
    assert [(r.exit_code, r.stdout) for r in later] == [(0, b"x%d" % i) for i in range(4)]
    ids = [container for container, _ in used]
    assert len(set(ids)) == len(ids) == 5, "a container served more than one sample"
    assert used[1][1] > 0, "the second sample's container was made before the sample asked for it"
    assert containers(provider.run_id) == [], "closing left containers behind"


@pytest.mark.docker
def test_the_deadline_starts_when_the_sample_asks_not_when_its_container_was_made(spec):
    from deepgym.sandbox.docker import DockerProvider

    with contextlib.closing(DockerProvider(prewarm=1)) as provider:
        provider.run(spec, ECHO, ExecOptions(stdin=b"warm-up", timeout_s=30))
        wait_ready(provider, 1)
        time.sleep(5.0)  # the ready container waits longer than the next sample's whole deadline
        result = provider.run(spec, ECHO, ExecOptions(stdin=b"late", timeout_s=2.5))
    assert (result.timed_out, result.exit_code, result.stdout) == (False, 0, b"late")


@pytest.mark.docker
def test_a_prewarmed_container_that_died_while_it_waited_is_never_used(spec):
    from deepgym.sandbox.docker import DockerProvider

    with contextlib.closing(DockerProvider(prewarm=1)) as provider:
        provider.run(spec, ECHO, ExecOptions(stdin=b"warm-up", timeout_s=30))
        wait_ready(provider, 1)
        (ready,) = [box for boxes in provider.prewarm.waiting().values() for box in boxes]
        subprocess.run(["docker", "kill", ready.container], capture_output=True, check=True)
        wait_stopped(ready.container)
        result = provider.run(spec, ECHO, ExecOptions(stdin=b"fresh", timeout_s=30))
    assert (result.exit_code, result.stdout) == (0, b"fresh")


@pytest.mark.docker
def test_a_client_of_many_environments_keeps_only_the_last_few_ready(spec):
    from deepgym.sandbox.docker import DockerProvider

    provider = DockerProvider(prewarm=1)
    provider.prewarm.max_kinds = 2
    try:
        for cwd in ("/", "/tmp", "/usr", "/etc"):  # four kinds: the same command in four working directories
            provider.run(spec, ECHO, ExecOptions(stdin=b"k", cwd=cwd, timeout_s=30))
            wait_made(provider)  # its refill lands (evicting the oldest kind) before the next kind is used
        waiting = provider.prewarm.waiting()
        kinds = [kind.options.cwd for kind, boxes in waiting.items() if boxes]
        assert kinds == ["/usr", "/etc"] and sum(len(boxes) for boxes in waiting.values()) == 2, kinds
    finally:
        provider.close()
    assert containers(provider.run_id) == []


@pytest.mark.docker
def test_a_refill_waits_for_an_admission_slot_and_a_waiting_container_holds_none(spec, tmp_path):
    """A saturated host makes no ready container beside the samples it runs: the refill waits for a slot of the
    client's admission, makes its container under it, and gives it back once the container waits."""
    from deepgym.admission import Admission
    from deepgym.sandbox.docker import DockerProvider

    admission = Admission("host", 1, directory=tmp_path)
    elsewhere = Admission("host", 1, directory=tmp_path)  # another process's sample, as far as the files go
    provider = DockerProvider(prewarm=1)
    provider.admit_ahead(admission)
    try:
        held = elsewhere.acquire(timeout_s=5)
        first = provider.run(spec, ECHO, ExecOptions(stdin=b"one", timeout_s=30))  # cold; its refill must wait
        time.sleep(2.0)
        assert ready_count(provider) == 0 and sum(provider.prewarm._making.values()) == 1, \
            "a refill made a container while every slot was held"
        assert containers(provider.run_id) == [], "a container was made while every slot was held"
        held.release()
        wait_ready(provider, 1)
        elsewhere.acquire(timeout_s=5).release()  # the container that waits holds no slot
        second = provider.run(spec, ECHO, ExecOptions(stdin=b"two", timeout_s=30))  # takes it; refill free to go
        wait_ready(provider, 1)
        held = elsewhere.acquire(timeout_s=5)
        provider.run(spec, ECHO, ExecOptions(stdin=b"three", timeout_s=30))  # its refill waits again
        started = time.monotonic()
    finally:
        provider.close()  # a refill waiting for its slot stops waiting
    closed_in = time.monotonic() - started
    held.release()
    assert (first.stdout, second.stdout) == (b"one", b"two")
    assert closed_in < 10, f"closing waited {closed_in:.1f} s for a refill that had no slot"
    assert containers(provider.run_id) == [], "closing left containers behind"
    elsewhere.acquire(timeout_s=0.5).release()  # the refill that stopped waiting took no slot along


@pytest.mark.docker
def test_a_client_makes_its_ready_containers_under_its_own_admission(monkeypatch, tmp_path):
    from deepgym import DeepGym

    monkeypatch.setenv("DEEPGYM_ADMISSION_DIR", str(tmp_path))
    with DeepGym(mode="docker", max_sandboxes=3) as gym:
        assert gym.provider.prewarm.admission is gym.admission and gym.admission.bound == 3


@pytest.mark.docker
def test_a_verdict_through_a_prewarmed_container_is_the_verdict():
    from deepgym import DeepGym, load_environment
    from deepgym.authoring.check import as_response

    env = load_environment(ENV)
    solutions = env.solutions()
    wrong = next(name for name in sorted(solutions) if name.startswith("wrong_"))
    with DeepGym(mode="docker", max_parallel=2) as gym:
        assert gym.provider.prewarm is not None and gym.provider.prewarm.size == 2
        outcomes = [gym.judge(env, as_response(env, solutions[name].read_text()))
                    for name in ("reference", wrong, "reference", wrong)]
    assert [(o.score, o.error_type) for o in outcomes] == [(1.0, None), (0.0, "wrong_answer")] * 2


@pytest.mark.parametrize("given,variable,size", [(None, None, 3), (None, "0", 0), (1, "5", 1), (None, "4", 4)])
def test_the_pool_size_comes_from_the_argument_the_variable_or_the_parallelism(monkeypatch, given, variable, size):
    if variable is not None:
        monkeypatch.setenv(PREWARM_VARIABLE, variable)
    assert prewarm_size(given, 3) == size


def test_a_bad_pool_size_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(PREWARM_VARIABLE, "many")
    with pytest.raises(ConfigurationError, match="DEEPGYM_DOCKER_PREWARM='many' is not a whole number"):
        prewarm_size(None, 2)


def test_a_refill_that_fails_unexpectedly_is_logged_and_leaves_the_taker_to_start_its_own(tmp_path, caplog):
    """An admission folder the refill cannot lock (an OSError, not a SandboxError) ends the refill in a
    worker whose result nobody reads: it is logged, nothing is made, and the pool's count is restored."""
    from deepgym.admission import Admission
    from deepgym.sandbox.ready import ReadyPool

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    launched, discarded = [], []
    pool = ReadyPool(1, launched.append, lambda thing: True, discarded.append,
                     admission=Admission("refill-error", 2, directory=blocker))
    try:
        with caplog.at_level("WARNING", logger="deepgym"):
            assert pool.take("kind") is None
            until = time.monotonic() + 30
            while pool._making.get("kind"):
                assert time.monotonic() < until, "the failed refill never finished"
                time.sleep(0.01)
        assert launched == [] and pool.waiting() == {}
        assert any("starting a ready container failed" in record.getMessage() for record in caplog.records), \
            caplog.text
    finally:
        pool.close()
    assert discarded == []
