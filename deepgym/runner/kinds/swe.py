"""Judging a SWE-bench-format instance on its own image: the repository is already in the image, the instance's
tests travel in the request (``Request.tests``, built by :mod:`deepgym.swe` on the host).

``tests`` holds ``repo_dir`` (the repository in the image, ``/testbed`` by convention), ``base_commit``,
``test_patch`` (the instance's new and changed tests, a unified diff), ``fail_to_pass`` and ``pass_to_pass``
(test ids) and ``test_cmd`` (None: pytest through the patch kind's trusted plugin).

Steps:

1. The runner, as root, copies the repository at ``base_commit`` (its work tree, without ``.git``) into a
   stage and applies the trusted ``test_patch`` to a copy of only the files it names: those files, as the
   test patch leaves them, are the instance's protected tests.
2. The submission's diff is judged exactly as a patch task's (:mod:`.patch`): parsed, refused as
   ``test_infra_tampering`` when it touches tests, their configuration or a protected file, applied by the
   applier user, the protected tests restored over it, and the resulting tree verified.
3. The listed tests run as the submission's user. Without ``test_cmd``, pytest runs the ids through the
   trusted plugin, which reports each id exactly as pytest names it (parametrised ids with spaces and
   brackets included). With ``test_cmd`` (a shell command run in the repository), its output is read with
   :func:`pytest_log`, pytest's ``-rA`` summary lines, as SWE-bench's own harness reads logs; repository code
   runs in that process and could print such lines, so prefer the default where the image has pytest.

Every listed test is one case, ``input`` naming its group; the score is 1.0 when all pass (``partial``: the
fraction).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..channels import Fault, plain
from ..confine.processes import Processes
from ..confine.supervise import Supervised
from ..confine.usage import BrokenTests, Budget
from ..confine.workspace import Workspace
from ..diff import parse as parse_diff
from ..protocol import Limits
from .patch import RunFailed, apply_and_verify, checked_diff, make_readable, run_listed_tests, run_test_process

# A real repository's work tree has tens of thousands of entries; the patch kind's cap is for small repos.
MAX_TREE_ENTRIES = 400_000
# pytest's short test summary (-rA): "PASSED id", "FAILED id - message", "ERROR id - message", ...
OUTCOMES = {"PASSED": "passed", "XPASS": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped",
            "XFAIL": "xfailed"}
GIT_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/nonexistent",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LANG": "C.UTF-8"}


class InstanceBroken(BrokenTests):
    """The instance itself cannot be judged (no repository, an unknown base commit, a test patch that does
    not apply): no verdict (verifier_error), never the submission's fault."""


def _git(repo: str, *args: str, stdout: Any = subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", repo, *args], stdout=stdout,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=GIT_ENV)


def _copy_at_commit(repo_dir: str, base_commit: str | None, target: Path) -> None:
    """The repository's work tree at ``base_commit`` into ``target``, without ``.git``: the tree as it is when
    HEAD is that commit (the SWE-bench image convention), else the commit's files from git."""
    if not os.path.isdir(repo_dir):
        raise InstanceBroken(f"the instance image has no repository at {repo_dir}; name it with repo_dir")
    head = _git(repo_dir, "rev-parse", "HEAD") if base_commit else None
    if head is None or (head.returncode == 0 and head.stdout.decode().strip().startswith(base_commit or "")):
        shutil.copytree(repo_dir, target, symlinks=True, ignore=lambda folder, names: [".git"] if folder == repo_dir else [])
        return
    target.mkdir()
    archive = subprocess.Popen(["git", "-c", "safe.directory=*", "-C", repo_dir, "archive", "--format=tar",
                                base_commit], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=GIT_ENV)
    untar = subprocess.run(["tar", "-x", "-C", str(target)], stdin=archive.stdout, capture_output=True)
    error = archive.stderr.read().decode(errors="replace")
    if archive.wait() != 0 or untar.returncode != 0:
        raise InstanceBroken(f"cannot check out base_commit {base_commit} of {repo_dir}: {error.strip()[-300:]}")


def _protected_tests(stage: Path, test_patch: str) -> set[str]:
    """Apply the instance's test patch to copies of the files it names; they become ``stage``/hidden."""
    hidden = stage / "hidden"
    hidden.mkdir()
    if not test_patch.strip():
        return set()
    diff = parse_diff(test_patch, 1 << 30)
    if isinstance(diff, Fault):
        raise InstanceBroken(f"the instance's test_patch is not a usable diff: {diff.message}")
    paths = {path for patch in diff.files for path in patch.paths}
    scratch = Path(tempfile.mkdtemp(dir=stage))
    for path in paths:
        source = stage / "repo" / path
        if source.is_file():
            (scratch / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, scratch / path)
    (stage / "test.diff").write_bytes(diff.data)
    applied = subprocess.run(["git", "apply", "--whitespace=nowarn", "-p1", str(stage / "test.diff")], cwd=scratch,
                             capture_output=True, env=GIT_ENV)
    if applied.returncode != 0:
        raise InstanceBroken(f"the instance's test_patch does not apply at base_commit: "
                             f"{applied.stderr.decode(errors='replace').strip()[-300:]}")
    protected = set()
    for path in paths:
        if (scratch / path).is_file():
            (hidden / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(scratch / path), hidden / path)
            protected.add(path)
    shutil.rmtree(scratch)
    (stage / "test.diff").unlink()
    return protected


def pytest_log(output: str, listed: set[str]) -> dict[str, str]:
    """Each listed id's outcome from pytest's ``-rA`` short summary in ``output``. Exact ids: a line is the
    outcome word, a space, then the id, optionally followed by `` - `` and a message."""
    outcomes: dict[str, str] = {}
    for line in output.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word not in OUTCOMES or not rest:
            continue
        for candidate in (rest, rest.split(" - ", 1)[0]):
            if candidate in listed:
                outcomes.setdefault(candidate, OUTCOMES[word])
                break
    return outcomes


def _run_test_cmd(processes: Processes, limits: Limits, repo: Path, test_cmd: str,
                  listed: list[tuple[str, str]], budget: Budget) -> list[dict[str, Any]]:
    """The instance's own test command as the submission's user, graded from its output's summary lines."""
    meter = processes.watch()
    proc = processes.spawn(["/bin/sh", "-c", test_cmd], pass_fds=(), cwd=str(repo), uid=None)
    run = Supervised(processes, proc)
    run_test_process(processes, limits, run, meter, budget)
    found = pytest_log(run.text("stdout") + "\n" + run.text("stderr"), {node for _, node in listed})
    return [{"id": node, "passed": found.get(node) == "passed", "input": group, "expected": "passed",
             "actual": found.get(node, "not run"),
             "error_type": None if found.get(node) == "passed" else "tests_failed",
             "error": None if node in found else "the test was not run", "cpu_s": 0.0} for group, node in listed]


def judge(request, env_dir: str, processes: Processes, workspace: Workspace, on_in_play: Callable[[], None],
          fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    """Stage, apply, test. Returns (one result per listed test, how many, submission CPU s)."""
    limits: Limits = request.limits
    tests = request.tests or {}
    listed = [("fail_to_pass", node) for node in tests.get("fail_to_pass", [])] + \
             [("pass_to_pass", node) for node in tests.get("pass_to_pass", [])]
    budget = Budget(limits)
    stage = Path(tempfile.mkdtemp(prefix="stage-", dir=workspace.runner))
    try:
        _copy_at_commit(tests.get("repo_dir", "/testbed"), tests.get("base_commit"), stage / "repo")
        protected = _protected_tests(stage, tests.get("test_patch", ""))
        try:
            data, files = checked_diff(request.submission, limits, protected)
            (stage / "patch.diff").write_bytes(data)
            make_readable(stage)
            assert workspace.applier is not None, "swe tasks get the applier's folder"
            work = Path(workspace.applier)
            on_in_play()
            apply_and_verify(processes, limits, stage, work, files, budget, MAX_TREE_ENTRIES)
            shutil.rmtree(stage, ignore_errors=True)
            if tests.get("test_cmd"):
                results = _run_test_cmd(processes, limits, work / "repo", tests["test_cmd"], listed, budget)
            else:
                results = run_listed_tests(processes, limits, work / "repo", listed, budget)
        except RunFailed as failed:
            results = [{"id": node, "passed": False, "input": group, "expected": "passed", "actual": None,
                        "error_type": failed.error_type, "error": plain(str(failed)), "cpu_s": 0.0}
                       for group, node in listed]
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return results, len(listed), budget.usage.cpu_s
