"""Fixtures for fault injection: test-only environments, the engine itself, and load on the host.

These tests stop the Docker daemon, remove images, kill containers and saturate the CPUs for real, so they
run last in a session (see ``pytest_collection_modifyitems``) and always put things back. Those that stop the
engine, remove a shared image or load every CPU are marked ``exclusive``: they run alone (scripts/lanes.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deepgym.images import build, image_name
from support import IN_CI, ROOT, engine_answers

PIDFILE = Path("/var/run/dockerd-deepgym.pid")  # written by scripts/install-docker-engine.sh
DOCKERFILE = "FROM base\nCOPY tests/ /opt/deepgym/env/\nRUN chmod -R go-rwx /opt/deepgym/env\n"

ENVIRONMENTS = {
    # Its hidden tests take seconds to load: a kill during that time lands before any submission code runs.
    "fault_slow_start": ({"case_cpu_s": 1, "total_cpu_s": 5},
                         "import time\n\ndef cases(variant):\n    time.sleep(4)\n"
                         "    return [{'id': 'one', 'args': [1], 'expected': 1}]\n"),
    # Real CPU work: the reference needs about a third of its one-second CPU limit per case.
    "fault_heavy": ({"case_cpu_s": 1, "total_cpu_s": 10},
                    "def cases(variant):\n"
                    "    return [{'id': f'n{i}', 'args': [n], 'expected': (n - 1) * n * (2 * n - 1) // 6}\n"
                    "            for i, n in enumerate([12_000_000, 12_500_000, 13_000_000])]\n"),
    # Short limits, for starving a sample without waiting long.
    "fault_quick": ({"case_cpu_s": 0.5, "total_cpu_s": 2},
                    "def cases(variant):\n    return [{'id': 'one', 'args': [3], 'expected': 3}]\n"),
    # A small memory limit and large tmpfs: files the submission writes there stay charged to the container.
    "fault_oom": ({"case_cpu_s": 2, "total_cpu_s": 5, "memory_mb": 64, "tmpfs_mb": 512},
                  "def cases(variant):\n    return [{'id': 'one', 'args': [1], 'expected': 1}]\n"),
}
HEAVY_REFERENCE = "def f(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n"


def pytest_collection_modifyitems(config, items):
    """Disruptive tests last, so that a failure to restore the engine cannot take other tests down."""
    items.sort(key=lambda item: "tests/faults/" in str(item.fspath))


@pytest.fixture(autouse=True)
def one_container_per_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """No prewarmed containers: a fault here targets the one container of the sample under test, found as the
    run's only container (wait_for_container), and an image removed by id must have no container left on it.
    tests/sandbox/test_prewarm.py injects the faults of the prewarmed path (a container killed while it waits)."""
    monkeypatch.setenv("DEEPGYM_DOCKER_PREWARM", "0")


@pytest.fixture(scope="module")
def fault_envs(tmp_path_factory):
    """The test-only environments, on DEEPGYM_ENVIRONMENTS and built; their images are removed afterwards."""
    root = tmp_path_factory.mktemp("fault-envs")
    for name, (limits, cases) in ENVIRONMENTS.items():
        folder = root / name
        (folder / "tests").mkdir(parents=True)
        limit_lines = "".join(f"  {key}: {value}\n" for key, value in limits.items())
        (folder / "manifest.yaml").write_text(f"id: {name}\nkind: function\nentry_point: f\nprompt: prompt.md\n"
                                             f"limits:\n{limit_lines}")
        (folder / "prompt.md").write_text("Write f.\n")
        (folder / "Dockerfile").write_text(DOCKERFILE)
        (folder / "tests" / "cases.py").write_text(cases)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPGYM_ENVIRONMENTS", str(root))
        build(list(ENVIRONMENTS))
        yield root
    subprocess.run(["docker", "rmi", "-f", *map(image_name, ENVIRONMENTS)], capture_output=True)


class Engine:
    """Stops and starts the dockerd that scripts/install-docker-engine.sh started."""

    def stop(self) -> None:
        os.kill(int(PIDFILE.read_text()), signal.SIGTERM)
        deadline = time.monotonic() + 60
        while engine_answers() or PIDFILE.exists():
            assert time.monotonic() < deadline, "dockerd did not stop within 60 s"
            time.sleep(0.2)

    def start(self) -> None:
        """Start it again the way the project always does (the script waits until it answers)."""
        if not engine_answers():
            subprocess.run(["bash", str(ROOT / "scripts" / "install-docker-engine.sh")], check=True,
                           capture_output=True)


@pytest.fixture
def engine():
    if not PIDFILE.exists():
        reason = f"dockerd was not started by scripts/install-docker-engine.sh (no {PIDFILE}), so it cannot be restarted"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    control = Engine()
    try:
        yield control
    finally:
        control.start()


class HostLoad:
    """Busy processes competing with the samples for the CPUs.

    ``processes`` starts them on the host, outside any container: they take their fair share, like any other
    job. ``containers`` starts them in containers with a large CPU weight (``--cpu-shares``), like a
    neighbour job that the kernel favours: those can starve a sample almost completely."""

    BUSY = "while True:\n    pass"

    def __init__(self):
        self.procs: list[subprocess.Popen] = []
        self.containers: list[str] = []

    def processes(self, count: int) -> None:
        self.procs += [subprocess.Popen([sys.executable, "-c", self.BUSY]) for _ in range(count)]
        wait_for_cpu_pressure()

    def heavy_containers(self, count: int, cpu_shares: int) -> None:
        for _ in range(count):
            started = subprocess.run(["docker", "run", "-d", "--rm", "--network", "none", "--label", "deepgym-test-load",
                                      "--cpu-shares", str(cpu_shares), "--entrypoint", "python3", image_name("base"),
                                      "-c", self.BUSY], capture_output=True, text=True, check=True)
            self.containers.append(started.stdout.strip())
        wait_for_cpu_pressure()

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs.clear()
        if self.containers:
            subprocess.run(["docker", "rm", "-f", *self.containers], capture_output=True)
            self.containers.clear()


@pytest.fixture
def host_load():
    load = HostLoad()
    try:
        yield load
    finally:
        load.stop()


def wait_for_container(run_id: str, timeout: float = 30.0) -> str:
    """The id of the first running container of this client's run (its only one: prewarming is off here)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = subprocess.run(["docker", "ps", "-q", "--filter", f"label=deepgym={run_id}"],
                               capture_output=True, text=True).stdout.split()
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("no container of this run appeared")


def wait_for_submission(container: str, uid: int = 10000, timeout: float = 60.0) -> None:
    """Wait until a process of the submission's ``uid`` runs in ``container``: the submission is in play."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # docker top refuses a format without the pid column ("Couldn't find PID field in ps output").
        listed = subprocess.run(["docker", "top", container, "-eo", "uid,pid"], capture_output=True,
                                text=True).stdout.splitlines()[1:]
        if str(uid) in [line.split()[0] for line in listed if line.split()]:
            return
        time.sleep(0.05)
    raise AssertionError(f"no process of uid {uid} appeared in {container}")


def cpu_stall_us() -> int:
    """The host's total time some task waited for a CPU (/proc/pressure/cpu ``some ... total=``, microseconds)."""
    line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    return int(line.rsplit("total=", 1)[1])


def wait_for_cpu_pressure(stalled_us: int = 300_000, timeout: float = 60.0) -> None:
    """Wait until the load has made tasks wait ``stalled_us`` for a CPU in all: the kernel's pressure figures,
    which the runner reads, show it."""
    start, deadline = cpu_stall_us(), time.monotonic() + timeout
    while cpu_stall_us() - start < stalled_us:
        assert time.monotonic() < deadline, "the load never made anything wait for a CPU"
        time.sleep(0.05)


def fenced(code: str) -> str:
    return f"```python\n{textwrap.dedent(code)}\n```"
