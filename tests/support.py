"""Helpers the tests import by name (``from support import ...``). They live here, not in conftest.py: a
test folder with its own conftest (tests/verl) would make ``from conftest import`` find the wrong one."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The one rule for "this is CI": tests that need a piece of the machine fail instead of skipping without it.
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


_built: set[str] = set()


def ensure_images(*names: str) -> None:
    """Build these environments' images if missing or stale, once per session (CI builds them beforehand)."""
    from deepgym.images import build

    todo = [name for name in names if name not in _built]
    if todo:
        build(todo)
        _built.update(todo)


def fenced(code: str, language: str = "python") -> str:
    """A model-style response wrapping ``code`` in a fenced block."""
    return f"Here is the solution.\n\n```{language}\n{code}\n```\n"


def solution(env: str, name: str) -> str:
    """The text of environments/<env>/solutions/<name>.*"""
    matches = sorted((ROOT / "environments" / env / "solutions").glob(f"{name}.*"))
    assert matches, f"no solution {name} in {env}"
    return matches[0].read_text()


@contextlib.contextmanager
def environment(**variables: str) -> Iterator[None]:
    """``variables`` set in os.environ for the block, and restored afterwards (for fixtures wider than a test,
    where monkeypatch cannot reach)."""
    saved = {key: os.environ.get(key) for key in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def episode(gym, env, variant: int = 0, *, replaying: str | None = None, then: Iterable[str] = ()) -> Iterator:
    """A started session of ``env`` (a name or an Environment) after the actions of its
    ``solutions/<replaying>.json`` for ``variant`` (none when None) and then ``then``; the test's own steps and
    its score follow inside the block, and the container is removed when it ends."""
    from deepgym.environments import load_environment
    from deepgym.session import action_sequences

    env = load_environment(env)
    with gym.session(env, variant) as session:
        session.start()
        for action in [*(action_sequences(env, replaying)[variant] if replaying else ()), *then]:
            session.step(action)
        yield session


def verl_reward(env: str, **reward_kwargs) -> Callable[[str], dict]:
    """deepgym's compute_score as verl's own loader makes it from ``reward_kwargs``, scoring a response to the
    first row of ``env``."""
    import pytest

    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from deepgym.integrations.verl import verl_rows

    fn = get_custom_reward_fn(OmegaConf.create({"reward": {"custom_reward_function": {
        "path": "pkg://deepgym.integrations.verl", "name": "compute_score", "reward_kwargs": reward_kwargs}}}))
    row = verl_rows([env])[0]
    return lambda response: fn(data_source=row["data_source"], solution_str=response,
                               ground_truth=row["reward_model"]["ground_truth"], extra_info=dict(row["extra_info"]))
