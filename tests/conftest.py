"""Shared fixtures. Tests marked ``docker`` talk to a real Docker engine and real images built from this
repository's docker-bake.hcl.

Without an engine those tests are skipped on a developer's machine and FAIL under ``CI=true``: a CI run
that skipped them would prove nothing. At the end of the session no container labelled ``deepgym`` may remain.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import IN_CI, ROOT, copy_images, describe, engine_answers, ensure_images, leaked_containers, \
    unavailable

pytest_plugins = ["ray_cluster"]  # the shared two-node Ray cluster of the tests marked ray

# Canaries (deepgym.canary) judge extra samples at each image's first use in a process: tests that count the
# containers, commands or processes a sample makes would count those too. They are off for the suite, and
# tests/canary turns them on with policies of its own. DEEPGYM_CANARIES=1 runs the whole suite with them.
os.environ.setdefault("DEEPGYM_CANARIES", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("docker") for item in items) or engine_answers():
        return
    if IN_CI:
        raise pytest.UsageError("CI=true but no Docker engine answers `docker info`: the docker tests must run in "
                                "CI. Start the engine (scripts/install-docker-engine.sh) and run again.")
    skip = pytest.mark.skip(reason="no Docker engine answers `docker info` (these tests fail instead under CI=true)")
    for item in items:
        if item.get_closest_marker("docker"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def built_images() -> None:
    """Every environment image."""
    from deepgym.environments import list_environments

    ensure_images(*list_environments())


@pytest.fixture(scope="session")
def gym():
    """A docker-mode client shared by the session. Tests build the images they use with ensure_images."""
    from deepgym import DeepGym

    with DeepGym(mode="docker") as client:
        yield client


@pytest.fixture(autouse=True)
def environ_kept():
    """The process's own ``os.environ`` after every test. datasets' ``Dataset.map`` with ``num_proc`` (as verl's
    RLHFDataset calls it) rebinds ``os.environ`` to a deep copy it took earlier, so a monkeypatch undone after
    it restores an object no longer in use: the test's variables (a DOCKER_HOST pointing nowhere) would outlive
    it, and the session's leak check would ask no engine at all. (Torn down after monkeypatch: autouse first.)"""
    environ = os.environ
    yield
    if os.environ is not environ:
        stray = os.environ
        os.environ = environ
        for key in stray.keys() - environ.keys():
            os.unsetenv(key)
        for key, value in environ.items():
            if stray.get(key) != value:
                os.putenv(key, value)


@pytest.fixture(autouse=True)
def fresh_shared_clients():
    """Each test ends with none of compute_score's process-wide clients (deepgym.integrations.verl), so an
    environment variable set for one test (a dead DOCKER_HOST) cannot reach a client another test reuses, and
    their ready containers do not outlive the test that made them (the leak check below would count them)."""
    yield
    shared = sys.modules.get("deepgym.integrations.verl")
    if shared is not None:
        shared.reset_clients()


EARLIER_LEFTOVERS: list[str] = []
"""What no_leaked_containers found at the session's start, for the summary."""


def pytest_terminal_summary(terminalreporter) -> None:
    for found in EARLIER_LEFTOVERS:
        terminalreporter.write_line(f"deepgym containers left by an earlier run, not counted as this session's: "
                                    f"{found}", yellow=True)


@pytest.fixture(scope="session", autouse=True)
def no_leaked_containers():
    """After the session, no container labelled deepgym that the session made may be left behind. One that was
    there before it (another run's, whose owner died) is not this session's leak: it is named, not failed."""
    before = set(leaked_containers()) if engine_answers() else set()
    if before:
        EARLIER_LEFTOVERS.append(describe(before))
    yield
    if not engine_answers():
        return
    leftovers = [container for container in leaked_containers() if container not in before]
    if leftovers:
        described = describe(leftovers)
        subprocess.run(["docker", "rm", "-f", *leftovers], capture_output=True)
        pytest.fail(f"{len(leftovers)} container(s) labelled deepgym were left behind: {described}")


@dataclass(frozen=True)
class SecondEngine:
    """A second Docker engine on this machine (scripts/second-engine.sh), standing in for a remote host."""

    host: str  # tcp://127.0.0.1:PORT
    folder: Path

    def docker(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """The docker CLI, pointed at this engine."""
        return subprocess.run(["docker", "--host", self.host, *argv], capture_output=True, text=True)

    def load(self, *images: str) -> None:
        """Copy ``images`` from the first engine (docker save | docker load)."""
        copy_images(self.host, *images)


# The engine this session starts on, read before any test or fixture points DOCKER_HOST elsewhere.
FIRST_ENGINE = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


@pytest.fixture(scope="session")
def docker_compose_command() -> str:
    """pytest-docker's compose command, on the engine this session started with: its ``up``, ``port`` and
    ``down`` must reach it even while a wider fixture points DOCKER_HOST elsewhere (the Ray caller's points
    nowhere for a whole module)."""
    return f"docker --host {shlex.quote(FIRST_ENGINE)} compose"


@pytest.fixture(scope="session")
def docker_compose_file() -> str:
    """pytest-docker's compose file (its ``docker_services`` fixture): tests/registry's registries, whose image
    is built first."""
    ensure_images("registry")
    return str(ROOT / "tests" / "registry" / "docker-compose.yml")


@pytest.fixture(scope="session")
def second_engine():
    """A second engine with its own data root, socket, containerd and bridge; stopped and wiped after
    the session, when no deepgym container may be left on it either."""
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        unavailable("a second Docker engine needs root and dockerd (scripts/install-docker-engine.sh)")
    script = ROOT / "scripts" / "second-engine.sh"
    folder = Path(tempfile.mkdtemp(prefix="dg-engine2-"))
    try:
        started = subprocess.run(["bash", str(script), "start", str(folder)], capture_output=True, text=True,
                                 timeout=120)
        assert started.returncode == 0, f"the second engine did not start: {started.stderr}"
        engine = SecondEngine(started.stdout.strip(), folder)
        yield engine
        leftovers = engine.docker("ps", "-aq", "--filter", "label=deepgym").stdout.split()
        assert not leftovers, f"{len(leftovers)} deepgym container(s) were left on the second engine"
    finally:
        subprocess.run(["bash", str(script), "stop", str(folder)], capture_output=True, timeout=120)


@dataclass(frozen=True)
class SshEngine:
    """The second engine reached over ssh:// (scripts/start-sshd.sh): an sshd on 127.0.0.1 whose sessions' docker
    CLI talks to the second engine, and a home folder whose ~/.ssh holds the only key it accepts and its host
    key in known_hosts, as a user's would. Point HOME at ``home`` for paramiko to use them."""

    url: str  # ssh://root@127.0.0.1:PORT
    folder: Path
    home: Path

    def home_with(self, *files: str) -> Path:
        """Another home folder whose ~/.ssh holds only ``files`` of the server's folder (id_ed25519,
        known_hosts), for the tests of a missing host key or key."""
        home = Path(tempfile.mkdtemp(prefix="dg-ssh-home-", dir=self.folder.parent))
        (home / ".ssh").mkdir(mode=0o700)
        for name in files:
            shutil.copy(self.folder / name, home / ".ssh" / name)
        return home


@pytest.fixture(scope="session")
def ssh_engine(second_engine):
    """The second engine behind an sshd of its own, started once per session and stopped after it."""
    if importlib.util.find_spec("paramiko") is None:
        unavailable("ssh:// needs paramiko (pip install 'deepgym[ssh]')")
    script = ROOT / "scripts" / "start-sshd.sh"
    parent = Path(tempfile.mkdtemp(prefix="dg-sshd-"))
    folder = parent / "sshd"
    try:
        behind = f"unix://{second_engine.folder}/docker.sock"
        started = subprocess.run(["bash", str(script), "start", str(folder), behind], capture_output=True, text=True,
                                 timeout=300)
        assert started.returncode == 0, f"sshd did not start: {started.stderr}"
        engine = SshEngine(started.stdout.strip(), folder, Path())
        yield SshEngine(engine.url, folder, engine.home_with("id_ed25519", "known_hosts"))
    finally:
        subprocess.run(["bash", str(script), "stop", str(folder)], capture_output=True, timeout=60)
        shutil.rmtree(parent, ignore_errors=True)
