"""The in-sandbox side of an SWE-style episode: the agent's copy of the instance's repository, and its grading.

``python3 -I -B -m deepgym_runner.episode.swe setup|verify``, as root (the container's three capabilities), one
JSON request on stdin: ``nonce``, ``agent_uid``, ``workspace``, ``tests`` (the instance, as
:mod:`deepgym_runner.kinds.swe` takes it), ``scoring`` and ``limits``. Events on stdout, as the session runner
writes them (``in_play``, one ``report``, ``done``).

``setup`` copies the repository, its git history included, into the agent's workspace as the agent's uid and
puts its work tree at ``base_commit``: the agent works there through the persistent terminal.

``verify``:

1. **Quiescence**: every process of the agent is killed and proved gone (:func:`harness.quiesce`).
2. ``in_play``, then **the final diff**: ``git add -A`` and ``git diff --cached base_commit`` in the workspace,
   run as the agent's uid (the repository's git metadata is the agent's, so its git never runs as root), with
   hooks and fsmonitor off; then quiescence again. What comes out is the agent's submission, whatever it says:
   it is judged against the image's pristine repository, never against the workspace.
3. **Judging**: the diff is judged exactly as a single-turn response's (:func:`deepgym_runner.oneshot.run`,
   kind ``swe``), as fresh uids of its own, and its report becomes the episode's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

from ..confine.container import Container
from ..confine.processes import Processes
from ..oneshot import Heartbeat, run as judge_request
from ..protocol import IN_PLAY, MIN_UID, Limits, Request
from .harness import quiesce, run, serve_command

ENV_DIR = "/opt/deepgym/env"
SCRATCH_ROOT = "/tmp"
# The judge's own uids (submission, applier): never the agent's, so nothing the agent left can touch its run.
JUDGE_UID = 10010
DIFF_TIMEOUT_S = 120.0
DIFF_BYTES = 64 << 20
GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "safe.directory=*",
       "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false"]


def _problem(request: dict[str, Any]) -> str | None:
    uid, workspace = request.get("agent_uid"), request.get("workspace")
    if isinstance(uid, bool) or not isinstance(uid, int) or uid < MIN_UID or uid in (JUDGE_UID, JUDGE_UID + 1):
        return f"the agent's uid {uid!r} is not an unprivileged uid apart from the judge's"
    if not isinstance(workspace, str) or os.path.dirname(workspace) != SCRATCH_ROOT \
            or os.path.normpath(workspace) != workspace:
        return f"the workspace {workspace!r} is not a folder directly under {SCRATCH_ROOT}"
    if not isinstance(request.get("tests"), dict):
        return "the request carries no instance"
    return None


def setup(request: dict[str, Any], confinement: Container) -> dict[str, Any]:
    """The agent's workspace: the repository at ``base_commit``, owned by the agent."""
    tests = request["tests"]
    repo_dir, base = tests.get("repo_dir", "/testbed"), tests.get("base_commit")
    if not os.path.isdir(repo_dir):
        return {"ok": False, "error_type": "verifier_error", "details": f"the instance image has no {repo_dir}"}
    workspace = request["workspace"]
    problem = confinement.make_dir(request["agent_uid"], workspace, 0o755)

    def copy() -> int:
        os.umask(0o022)
        shutil.copytree(repo_dir, workspace, symlinks=True, dirs_exist_ok=True)
        if base:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": workspace, "GIT_CONFIG_NOSYSTEM": "1"}
            done = subprocess.run([*GIT, "checkout", "-q", "--force", base], cwd=workspace, env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True)
            return done.returncode
        return 0

    if problem is None and confinement.as_user(request["agent_uid"], copy, timeout_s=600) != 0:
        problem = f"the repository {repo_dir} could not be copied into {workspace} at {base}"
    if problem is not None:
        return {"ok": False, "error_type": "verifier_error", "details": problem}
    return {"ok": True}


def final_diff(processes: Processes, request: dict[str, Any]) -> tuple[str | None, str]:
    """The agent's changes against ``base_commit``, as the agent's git writes them: (the diff, "") or (None,
    what its git said). A repository the agent broke is the agent's doing: the caller scores it 0."""
    base = request["tests"].get("base_commit") or "HEAD"
    script = (f'{" ".join(GIT)} add -A >/dev/null 2>&1; exec {" ".join(GIT)} diff --cached --no-color '
              f'--no-ext-diff --no-renames --no-textconv {base} --')
    workspace = request["workspace"]
    # The repository is the workspace's own: no search upwards, and no core.worktree the agent set elsewhere.
    where = {"GIT_DIR": os.path.join(workspace, ".git"), "GIT_WORK_TREE": workspace}
    ran = run(processes, ["/bin/sh", "-c", script], uid=request["agent_uid"], cwd=workspace, stdin=b"",
              timeout_s=DIFF_TIMEOUT_S, keep=DIFF_BYTES, env=where)
    if ran["timed_out"] or ran["exit_code"] != 0:
        return None, ran["stderr"][-500:] or f"exit status {ran['exit_code']}"
    return ran["stdout"], ""


def verify(request: dict[str, Any], confinement: Container, emit) -> dict[str, Any]:
    """Quiesce, take the final diff, judge it (see the module's docstring); returns the report."""
    processes = Processes(confinement, uid=request["agent_uid"], applier_uid=request["agent_uid"] + 1)
    processes.homes = {request["agent_uid"]: request["workspace"]}
    problem = quiesce(processes)
    if problem is not None:
        return {"error_type": "verifier_error", "details": problem}
    emit(IN_PLAY)
    diff, said = final_diff(processes, request)
    problem = quiesce(processes)
    if problem is not None:
        return {"error_type": "verifier_error", "details": problem}
    if diff is None:
        return {"score": 0.0, "passed": False, "error_type": "invalid_patch",
                "details": f"the workspace's git could not diff it against base_commit: {said}"}
    judged = Request(nonce=request["nonce"], kind="swe", submission=diff, scoring=request.get("scoring",
                     "all_or_nothing"), limits=Limits.from_dict(request.get("limits", {})), tests=request["tests"],
                     uid=JUDGE_UID)
    problem = judged.problem(confinement.runner_uid(), SCRATCH_ROOT)
    if problem is not None:
        return {"error_type": "verifier_error", "details": problem}
    report = judge_request(judged, ENV_DIR, confinement, SCRATCH_ROOT, emit, Heartbeat(lambda *event: None))
    if report.get("outcome") != "scored":
        return {"error_type": report.get("error_type", "verifier_error"), "details": report.get("reason", "")}
    return {key: report[key] for key in ("score", "passed", "error_type", "details", "cases")}


def _act(request: dict[str, Any], command: str, emit) -> dict[str, Any]:
    confinement = Container()
    problem = _problem(request) or confinement.drop_privileges()
    if problem is not None:
        return {"error_type": "verifier_error", "details": problem}
    return setup(request, confinement) if command == "setup" else verify(request, confinement, emit)


def _parse(raw: bytes) -> dict[str, Any]:
    request = json.loads(raw)
    if not isinstance(request, dict) or not isinstance(request.get("nonce"), str):
        raise ValueError("the request is not an object with a nonce")
    return request


def main(argv: list[str] | None = None) -> int:
    return serve_command("deepgym_runner.episode.swe", sys.argv[1:] if argv is None else argv, _parse,
                         lambda request: request["nonce"], _act)


if __name__ == "__main__":
    sys.exit(main())
