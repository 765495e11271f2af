"""Helpers the tests import by name (``from support import ...``). They live here, not in conftest.py: a
test folder with its own conftest (tests/verl) would make ``from conftest import`` find the wrong one."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The one rule for "this is CI": tests that need a piece of the machine fail instead of skipping without it.
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Skip the test for want of a piece of the machine; under CI=true fail instead, since CI provides every
    piece and a skip there would hide a test that never ran."""
    import pytest

    if IN_CI:
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


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


def describe(containers: Iterable[str]) -> str:
    """Each container's id, image, status, creation time and the labels it was made with (deepgym's run, owner
    and test labels): enough to find what made it."""
    shown = subprocess.run(["docker", "inspect", *containers], capture_output=True, text=True)
    try:
        found = json.loads(shown.stdout or "[]")
    except json.JSONDecodeError:
        found = []
    lines = []
    for container in found:
        labels = {key: value for key, value in (container["Config"].get("Labels") or {}).items()
                  if key == "deepgym" or key.startswith(("deepgym.owner", "deepgym.test", "deepgym.run"))}
        lines.append(f"{container['Id'][:12]} {container['Config']['Image']} {container['State']['Status']} "
                     f"created {container['Created']} {labels}")
    return "; ".join(lines) if lines else ", ".join(containers)


def escaped_processes(uid: int = 10000) -> list[int]:
    """Processes of the submission's uid that this test run left on the host: in this host's own pid namespace,
    outside every container's cgroup, and not started by another test run.

    A container's processes die with its pid namespace, so one that outlived its sample must have reached the
    host's. The scope keeps out what other test runs on the host legitimately run as the uid at the same
    moment: their containers' processes (a docker cgroup), their local-mode submissions (each the init of a
    pid namespace of its own, ``deepgym/sandbox/local.py``) and their own processes of the uid on the host
    (the conformance suite's bystander), which descend from that run's pytest."""
    ours, me = os.readlink("/proc/self/ns/pid"), os.getpid()
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    candidates = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            pid = int(entry.name)
            parents[pid] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            commands[pid] = (entry / "cmdline").read_bytes()
            if (entry.stat().st_uid == uid and os.readlink(entry / "ns" / "pid") == ours
                    and "docker" not in (entry / "cgroup").read_text()):
                candidates.append(pid)
        except (OSError, ValueError):
            continue

    def another_runs(pid: int) -> bool:
        seen = set()
        while pid > 1 and pid not in seen and pid != me:  # one of ours, even where pytest-xdist runs us
            seen.add(pid)
            if b"pytest" in commands.get(pid, b""):
                return True
            pid = parents.get(pid, 0)
        return False

    return [pid for pid in candidates if not another_runs(pid)]


_built: set[str] = set()


def ensure_images(*names: str) -> None:
    """Build these environments' images if missing or stale, once per session (CI builds them beforehand)."""
    from deepgym.images import build

    todo = [name for name in names if name not in _built]
    if todo:
        build(todo)
        _built.update(todo)


def run_in_image(image: str, argv: list[str], *docker_args: str, stdin: bytes = b"",
                 timeout_s: float = 180) -> subprocess.CompletedProcess[bytes]:
    """``argv`` in a fresh container of ``image`` (its entrypoint, with ``docker_args``), fed ``stdin``; the
    container is removed even when the run times out."""
    name = f"deepgym-test-{os.urandom(4).hex()}"
    try:
        return subprocess.run(["docker", "run", "--rm", "-i", "--name", name, *docker_args, "--entrypoint", argv[0],
                               image, *argv[1:]], input=stdin, capture_output=True, timeout=timeout_s)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def copy_images(host: str, *images: str) -> None:
    """Copy ``images`` from the first engine to the engine at ``host`` (docker save | docker load)."""
    saved = subprocess.Popen(["docker", "save", *images], stdout=subprocess.PIPE)
    loaded = subprocess.run(["docker", "--host", host, "load", "-q"], stdin=saved.stdout, capture_output=True,
                            text=True)
    saved.stdout.close()
    assert saved.wait() == 0 and loaded.returncode == 0, f"cannot copy {images}: {loaded.stderr}"


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
    from deepgym.authoring.replay import action_sequences

    env = load_environment(env)
    with gym.session(env, variant) as session:
        session.start()
        for action in [*(action_sequences(env, replaying)[variant] if replaying else ()), *then]:
            session.step(action)
        yield session


@contextlib.contextmanager
def before_reference(gym, env: str, variant: int, room: int) -> Iterator[tuple]:
    """A started episode of ``env`` whose step budget has ``room`` steps for the test's own actions ahead of
    the reference's, as ``(session, first observation, finish)``; ``finish()`` replays the reference (all but
    its final ``done``) and returns the score, which is 1.0 only if the test's actions changed nothing."""
    import dataclasses

    from deepgym.environments import load_environment
    from deepgym.authoring.replay import action_sequences

    env = load_environment(env)
    reference = action_sequences(env, "reference")[variant]
    env = dataclasses.replace(env, session=dataclasses.replace(env.session, max_steps=room + len(reference)))
    with gym.session(env, variant) as session:
        first = session.start()

        def finish():
            for action in reference[:-1]:
                session.step(action)
            return session.score()

        yield session, first, finish


@contextlib.contextmanager
def warm_gym(env: str, size: int = 1, max_parallel: int = 2, **pool) -> Iterator:
    """A docker client whose warm pool holds ``size`` containers of ``env``'s image (WarmPool's other options
    in ``pool``), so consecutive samples with ``isolation="process"`` share one."""
    from deepgym import DeepGym
    from deepgym.sandbox.docker.warm import WarmPool

    ensure_images(env)
    with DeepGym("docker", max_parallel=max_parallel) as client:
        client.provider._warm = WarmPool(client.provider.engine, max_parallel, size=size, **pool)
        yield client


# A coin_change submission whose first call runs the body (with ``report``, a dict, in scope) and raises with
# the report, so that the verdict's details carry it (:func:`reported` reads it back).
PROBE_TEMPLATE = '''
import ctypes, gc, json, os, platform, resource, signal, socket, subprocess, sys, time
def coin_change(coins, amount):
    report = {{"host": socket.gethostname(), "uid": os.getuid(), "pid": os.getpid(), "cwd": os.getcwd()}}
{body}
    raise RuntimeError("REPORT=" + json.dumps(report, sort_keys=True) + "=END")
'''


def probing(*parts: str) -> str:
    """The probe submission (:data:`PROBE_TEMPLATE`) running ``parts``, each dedented, one after another."""
    import textwrap

    body = "".join(textwrap.dedent(part) for part in parts)
    return fenced(PROBE_TEMPLATE.format(body=textwrap.indent(body, "    ")))


def reported(verdict) -> dict:
    """The report a probing submission raised with (``RuntimeError("REPORT=" + json + "=END")``), from its
    verdict's details."""
    assert verdict.has_verdict and verdict.error_type == "solution_error", verdict
    assert "REPORT=" in verdict.details, verdict.cases[0].error
    return json.loads(verdict.details.split("REPORT=", 1)[1].split("=END", 1)[0])


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


def stopped(program) -> None:
    """Kill ``program`` (a subprocess.Popen) if it still runs, reap it and close its pipes: a test that failed
    half-way must leave no open file for a later test's garbage collection to report as that test's."""
    program.kill()
    program.wait()
    for pipe in (program.stdin, program.stdout, program.stderr):
        if pipe is not None:
            pipe.close()


def image_ref(provider, name: str) -> str:
    """What ``provider.image`` is given for the image of ``name`` (an environment, or ``base``), as judging gives
    it: a registering provider's content-hash name, else the image's local name."""
    from deepgym.images import image_name
    from deepgym.registration import registered_name

    return registered_name(name) if provider.registers_images else image_name(name)


FILL_PIDS = ("python3 -c 'import os, time\n"
             "while True:\n"
             "    try:\n"
             "        os.fork()\n"
             "    except OSError:\n"
             "        time.sleep(0.005)\n"
             "' >/dev/null 2>&1 & sleep 1; echo filled")
"""Processes that take every pid the sandbox has and retake any that frees up (python's fork fails at once
where bash's would retry)."""


HARBOR_TASKS = ROOT / "tests" / "harbor" / "tasks"


@contextlib.contextmanager
def harbor_environments(into: Path, *tasks: str, terminal: str = "persistent") -> Iterator[list[str]]:
    """The Harbor test tasks (tests/harbor/tasks/<task>) imported into ``into`` (with the action channel
    ``terminal``), put on DEEPGYM_ENVIRONMENTS and built offline on deepgym's base image, for the block: their
    environment names."""
    import pytest

    from deepgym.harbor.importer import import_tasks
    from deepgym.images import build, content_hash

    names = [imported.name for imported in import_tasks([HARBOR_TASKS / task for task in tasks], into,
                                                         base_map={"debian:bookworm-slim": "base"},
                                                         terminal=terminal)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPGYM_ENVIRONMENTS", str(into))
        content_hash.cache_clear()
        try:
            build(names)
            yield names
        finally:
            content_hash.cache_clear()


class HangingRegistry:
    """A registry that accepts connections and never answers a byte. Closing it refuses every later connection
    (the engine keeps retrying a pull a client gave up on) and closes every one it accepted."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.held.append(connection)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(), which close() alone does not
        self.thread.join(timeout=10)
        self.server.close()
        for connection in self.held:
            connection.close()
