"""The script verifier: a command such as a Harbor task's ``tests/test.sh`` runs against the state the agent
left, and only the reward file it wrote counts (docs/harbor.md, "Judging").

:func:`verify` runs after the session runner (:mod:`verify`) killed every process of the agent and proved the
uid quiet, in this order:

1. **Tampering** (:mod:`tampering`): a file the agent created or changed that the test run would load
   (``conftest.py``, pytest's configuration, ``sitecustomize``/``usercustomize``, ``.pth``, a tool or module of
   the test run's name) is ``test_infra_tampering``, a 0. Nothing of the agent's runs before this check.
2. **The tests** are copied from the image's root-only ``/opt/deepgym/env/<tests>`` into ``/tests``, a tmpfs of
   root's that was empty and unwritable by the agent for the whole episode.
3. **The reward folder** ``/logs/verifier`` is made now, as the verifier's uid, in ``/logs``, a tmpfs only the
   verifier's uid may write: it did not exist while any process of the agent lived, so no file the agent
   planted, anywhere, is ever read as a reward.
4. **The services**: the image's ENTRYPOINT starts again, as the verifier's uid (:mod:`entrypoint`).
5. **The command** runs as the verifier's uid (never root, never a uid the agent had) in the agent's workspace,
   with the task's environment, a fresh HOME of its own and the verifier's wall-clock limit; every process it
   started is killed and proved gone afterwards.
6. **The reward** is read from that folder, as the verifier's uid and without following links: ``reward.json``
   (its ``reward``, or its one value) before ``reward.txt`` (one number), as Harbor reads them.

Attribution: everything up to the command's start is ours (no verdict when it fails, ``verifier_error``),
unless the agent caused it: a full ``/tmp`` (:func:`harness.verifier_folder`), files nested too deep or too many
to check (:mod:`tampering`). A workspace the agent closed to the verifier is a command that ran and failed
(:func:`harness.run`). Once the command runs it reads the
agent's state, so a missing or malformed reward, a crash or a timeout is charged to that state: a 0 with its
reason (``solution_error``, ``solution_timeout``), never no verdict. A broken ``test.sh`` therefore scores its
reference 0, which ``deepgym check`` shows.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from typing import Any

from ..confine.privileges import FileRights
from ..confine.processes import Processes
from . import entrypoint, tampering
from .harness import VERIFIER_OUTPUT_BYTES, release, run, verifier_folder

TESTS_DIR = "/tests"
LOGS_DIR = "/logs"
SOLUTION_DIR = "/solution"
REWARD_DIR = f"{LOGS_DIR}/verifier"
REWARD_FILES = ("reward.json", "reward.txt")
REWARD_BYTES = 64 << 10
# git refuses a repository another uid owns (the agent's) unless told it is safe: the verifier reads the
# agent's repository as data, so every directory is, for its run only.
STAGES = ("", "prepare", "run", "reward")
GIT_SAFE = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}


def verify(request: Any, processes: Processes, config: dict[str, Any], scratch_dirs: list[str]) -> dict[str, Any]:
    """One script verification of ``request`` (a :class:`verify.SessionRequest`) once the agent is quiet;
    ``config`` is session.json's ``script``; ``scratch_dirs`` the agent-writable folders to check. The report.

    A verifier with a network (``config["network"]``) runs in three stages, one call each, so that the host
    attaches the network only around the command: ``prepare`` (steps 1 to 3; ``{"prepared": true}``), ``run``
    (steps 4 and 5; ``{"ran": ...}``) and ``reward`` (step 6, on the ``ran`` the host hands back)."""
    command = [str(word) for word in config["command"]]
    stage = request.stage
    if stage not in STAGES:
        return {"error_type": "verifier_error", "details": f"unknown verification stage {stage!r}"}
    if stage in ("", "prepare"):
        refused = _prepare(request, processes, config, scratch_dirs)
        if refused is not None or stage == "prepare":
            return refused or {"prepared": True}
    ran = request.ran
    if stage in ("", "run"):
        ran, refused = _run(request, processes, config, command)
        if refused is not None:
            return refused
        if stage == "run":
            return {"ran": ran}
    if not isinstance(ran, dict):
        return {"error_type": "verifier_error", "details": "the reward stage was given no run"}
    return _report(ran, command, request.verifier_uid, request.verify_timeout_s)


def _prepare(request: Any, processes: Processes, config: dict[str, Any],
             scratch_dirs: list[str]) -> dict[str, Any] | None:
    """Steps 1 to 3: the tampering check, the tests copied in, the reward folder made; the report that ends the
    verification here, or None."""
    confinement = processes.confinement
    start = os.path.join(request.start_dir, str(request.variant))
    source = os.path.join(request.env_dir, config["tests"])
    env = {str(key): str(value) for key, value in config.get("env", {}).items()}
    found = tampering.find(scratch_dirs, uid=request.agent_uid, workspace=request.workspace, start=start,
                           script=_read_scripts(source), path=env.get("PATH", ""))
    if found:
        return {"score": 0.0, "passed": False, "error_type": "test_infra_tampering",
                "details": "the agent left files the test run would load: " + "; ".join(found[:10])}
    problem = _copy_tests(source, TESTS_DIR)
    if problem is None:
        problem = confinement.make_dir(request.verifier_uid, REWARD_DIR, 0o755)
    if problem is not None:
        return {"error_type": "verifier_error", "details": problem}
    return None


def _run(request: Any, processes: Processes, config: dict[str, Any],
         command: list[str]) -> tuple[dict[str, Any], None] | tuple[None, dict[str, Any]]:
    """Steps 4 and 5: the services and the command as the verifier's uid, whose every process is killed after;
    the run, or the report that ends the verification instead."""
    env = {str(key): str(value) for key, value in config.get("env", {}).items()}
    home, refused = verifier_folder(processes, request.verifier_uid, request.scratch, request.nonce)
    if refused is not None:
        return None, refused
    processes.homes[request.verifier_uid] = home
    ran: dict[str, Any] | None = None
    problem: str | None = None
    try:
        # The services, as the verifier now; one that does not come up leaves test.sh to find out.
        entrypoint.start(processes, config, uid=request.verifier_uid, cwd=request.workspace, home=home)
        ran = run(processes, command, uid=request.verifier_uid, cwd=request.workspace, stdin=b"",
                  timeout_s=request.verify_timeout_s, keep=VERIFIER_OUTPUT_BYTES, env={**GIT_SAFE, **env})
    except OSError as exc:
        problem = f"{' '.join(command)} could not start: {exc}"
    finally:
        problem = release(processes, request.verifier_uid, home) or problem
    if problem is not None or ran is None:
        return None, {"error_type": "verifier_error", "details": problem}
    return ran, None


def _read_scripts(source: str) -> str:
    """The text of the tests' shell scripts, where the names of the tools the test run calls are."""
    texts = []
    for root, _, files in os.walk(source):
        texts += [_read(os.path.join(root, name)) for name in files if name.endswith(".sh")]
    return "\n".join(texts)


def _read(path: str) -> str:
    with open(path, "rb") as f:
        return f.read(1 << 20).decode("utf-8", "replace")


def _copy_tests(source: str, target: str) -> str | None:
    """The tests into ``target``, root's, empty and unwritable by the agent all episode; why not, or None."""
    info = os.lstat(target) if os.path.lexists(target) else None
    if info is None or info.st_uid != 0 or not os.path.isdir(target) or os.path.islink(target) or os.listdir(target):
        return f"{target} is not the sandbox's empty folder of root's; the sandbox lacks the script verifier's mounts"
    os.umask(0o022)
    try:
        shutil.copytree(source, target, dirs_exist_ok=True)
    except (OSError, shutil.Error) as exc:
        return f"the tests could not be copied from {source} to {target}: {exc}"
    os.chmod(target, 0o755)  # copytree gave it the source's root-only mode
    for root, dirs, files in os.walk(target):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            path = os.path.join(root, name)
            os.chmod(path, 0o755 if os.stat(path).st_mode & 0o100 else 0o644)
    return None


def _report(ran: dict[str, Any], command: list[str], uid: int, timeout_s: float) -> dict[str, Any]:
    """The command's run and the reward it wrote, as a report (see the module's docstring)."""
    said = (ran["stdout"][-800:] + ran["stderr"][-800:]).strip()
    if ran["timed_out"]:
        return _zero("solution_timeout", f"{' '.join(command)} ran past its {timeout_s:g} s on the agent's state; "
                                         f"its output ends: {said[-600:]!r}")
    reward, problem = read_reward(REWARD_DIR, uid)
    if problem is not None:
        return _zero("solution_error", f"{problem} ({' '.join(command)} exited with status {ran['exit_code']}; its "
                                       f"output ends: {said[-600:]!r})")
    passed = reward == 1.0
    case = {"id": command[-1], "passed": passed, "expected": "reward 1", "actual": f"reward {reward:g}"}
    return {"score": reward, "passed": passed, "error_type": None if passed else "wrong_answer",
            "details": f"{' '.join(command)} wrote reward {reward:g}", "cases": [case]}


def read_reward(folder: str, uid: int) -> tuple[float, None] | tuple[None, str]:
    """The reward in ``folder`` (reward.json first, then reward.txt), read with ``uid``'s file rights and no
    link followed: a number in [0, 1], or why there is none."""
    for name in REWARD_FILES:
        path = os.path.join(folder, name)
        try:
            with FileRights(uid):
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                try:
                    data = os.read(fd, REWARD_BYTES + 1)
                finally:
                    os.close(fd)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return None, f"{path} could not be read: {exc.strerror}"
        value = _parse(name, data)
        if value is None:
            return None, f"{path} holds no reward in [0, 1]: {data[:200]!r}"
        return value, None
    return None, f"no reward file was written ({' or '.join(REWARD_FILES)} in {folder})"


def _parse(name: str, data: bytes) -> float | None:
    try:
        if name.endswith(".json"):
            found = json.loads(data)
            if isinstance(found, dict):
                found = found.get("reward", next(iter(found.values())) if len(found) == 1 else None)
        else:
            found = float(data.decode().strip())
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(found, bool) or not isinstance(found, (int, float)) or not math.isfinite(found):
        return None
    return float(found) if 0.0 <= found <= 1.0 else None


def _zero(error_type: str, details: str) -> dict[str, Any]:
    return {"score": 0.0, "passed": False, "error_type": error_type, "details": details}
