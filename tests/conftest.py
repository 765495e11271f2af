"""Shared fixtures. Tests marked ``docker`` talk to a real Docker engine and real images built from this
repository's docker-bake.hcl.

Without an engine those tests are skipped on a developer's machine and FAIL under ``CI=true``: a CI run
that skipped them would prove nothing. At the end of the session no container labelled ``deepgym`` may remain.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def engine_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def leaked_containers() -> list[str]:
    """deepgym containers whose owner is this process or a process that is gone (not another live run's)."""
    from deepgym.sandbox.docker import OWNER_LABEL, owner_alive, owner_label, pid_namespace

    result = subprocess.run(["docker", "ps", "-a", "--filter", "label=deepgym", "--format",
                             f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}'], capture_output=True, text=True)
    host, me = socket.gethostname(), owner_label(os.getpid())
    leaked = []
    for line in result.stdout.splitlines():
        container, _, owner = line.partition(" ")
        if owner == me or not owner_alive(owner, host, pid_namespace()):
            leaked.append(container)
    return leaked


def escaped_processes(uid: int = 10000) -> list[int]:
    """Processes of the submission's uid on this host that are not inside any container's cgroup."""
    escaped = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid and "docker" not in (entry / "cgroup").read_text():
                escaped.append(int(entry.name))
        except OSError:
            continue
    return escaped


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


_built: set[str] = set()


def ensure_images(*names: str) -> None:
    """Build these environments' images if missing or stale, once per session (CI builds them beforehand)."""
    from deepgym.images import build

    todo = [name for name in names if name not in _built]
    if todo:
        build(todo)
        _built.update(todo)


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


@pytest.fixture(scope="session", autouse=True)
def no_leaked_containers(request: pytest.FixtureRequest):
    """After the session, no container labelled deepgym may be left behind."""
    yield
    if not engine_answers():
        return
    leftovers = leaked_containers()
    if leftovers:
        subprocess.run(["docker", "rm", "-f", *leftovers], capture_output=True)
        pytest.fail(f"{len(leftovers)} container(s) labelled deepgym were left behind: {leftovers}")


def fenced(code: str, language: str = "python") -> str:
    """A model-style response wrapping ``code`` in a fenced block."""
    return f"Here is the solution.\n\n```{language}\n{code}\n```\n"


def solution(env: str, name: str) -> str:
    """The text of environments/<env>/solutions/<name>.*"""
    matches = sorted((ROOT / "environments" / env / "solutions").glob(f"{name}.*"))
    assert matches, f"no solution {name} in {env}"
    return matches[0].read_text()
