"""Judging a patch task: apply the submitted unified diff to the baked repository, run its tests and probes.

The environment's directory holds ``repo/`` (the repository, with its git history), ``hidden/`` (test files,
by path in the repository, restored after the patch), ``spec.json`` with the ``fail_to_pass`` and
``pass_to_pass`` pytest node ids, as in SWE-bench, and ``probes.json`` (see step 5).

Steps, and who does them:

1. The runner parses the diff (:func:`diff.parse`, pure Python, counting hunk lines as git does). Not
   valid Unicode, not a unified diff, a header split from its partner, another diff format, a line count over
   9 digits, a path over 16 levels deep, more than 1000 files -> ``invalid_patch``. Touching test
   infrastructure -> ``test_infra_tampering``: test files and folders, ``conftest.py`` anywhere (new ones
   too), ``sitecustomize.py``, ``usercustomize.py``, ``*.pth``, ``setup.py``, ``setup.cfg``, ``tox.ini``,
   ``pytest.ini``, the ``.git`` folder, symlinks, file-mode changes and paths that leave the repository.
2. The *applier*, a second unprivileged user, copies the repository, tries ``git apply``, then, on a fresh copy,
   ``patch --fuzz``; neither worked -> ``patch_apply_failed``. It then restores the hidden tests over the tree.
   Untrusted input is never parsed by git or patch as root.
3. The runner verifies the result: only the files the diff names changed, hidden tests byte-identical, no
   symlinks, ``[tool.pytest*]`` of pyproject.toml unchanged. Anything else, or a tree that cannot even be
   walked, -> tampering.
4. The submission's user runs pytest on the listed tests. The tree belongs to the applier, so the code under
   test cannot rewrite a test before it is collected. A trusted plugin reports each outcome on a pipe; every
   listed test must be reported, the report's exit status must equal the process's, and a suite that never
   ran or ran fewer tests than listed fails.
5. Repository code runs inside that pytest process and could rewrite pytest itself, so step 4 alone could be
   forged. The probes cannot: a separate worker imports the patched repository and evaluates each hidden probe
   expression, returning plain JSON; the runner compares it with the expected value, which the submission's
   user cannot read. A patch passes only when every listed test *and* every probe passes, so forging pytest
   gains nothing without a real fix. (Patch tasks therefore give no partial credit.)
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable

from .. import channels
from ..channels import Fault, Reply, plain, shown
from ..diff import FilePatch
from ..diff import parse as parse_diff
from .function import equal, run_calls
from ..protocol import Limits
from ..confine.processes import WORKER, Processes, python_main
from ..confine.supervise import Supervised, failure
from ..confine.usage import Budget, Usage
from ..confine.workspace import Workspace

TEST_CONFIG_FILES = {"setup.py", "setup.cfg", "tox.ini", "pytest.ini", "noxfile.py"}
LOADED_BY_TESTS = {"conftest.py", "sitecustomize.py", "usercustomize.py"}
FILE_MODES = {"100644", "100755"}
MAX_TREE_ENTRIES = 20_000


class Rejected(Exception):
    """The tree the diff produced is refused as tampering; the message says why."""


def tampering(files: list[FilePatch], protected: set[str]) -> str | None:
    """Why the diff touches test infrastructure, or None. ``protected`` are the hidden tests' paths."""
    for patch in files:
        if patch.mode_change or any(mode not in FILE_MODES for mode in patch.modes):
            return f"it changes a file mode or adds a symlink or submodule ({', '.join(patch.paths)})"
        for path in patch.paths:
            normal = posixpath.normpath(path)
            parts = normal.split("/")
            name = parts[-1]
            if path.startswith("/") or ".." in parts or normal != path.rstrip("/"):
                return f"path {path!r} leaves the repository or is not normalized"
            if parts[0] == ".git":
                return f"it edits the git metadata ({path})"
            if normal in protected:
                return f"it edits a hidden test ({path})"
            if any(part in ("tests", "test", "testing") for part in parts[:-1]):
                return f"it edits the test folder ({path})"
            if name.startswith("test_") and name.endswith(".py") or name.endswith("_test.py"):
                return f"it edits a test file ({path})"
            if name in LOADED_BY_TESTS or name.endswith(".pth"):
                return f"it adds or edits {name}, which the test run would load ({path})"
            if name in TEST_CONFIG_FILES:
                return f"it edits test configuration ({path})"
    return None


def _pytest_config(pyproject: bytes | None) -> Any:
    """pyproject.toml's pytest tables; the whole file where tomllib is missing (Python 3.10, local mode)."""
    if pyproject is None:
        return None
    try:
        import tomllib
    except ImportError:
        return pyproject
    try:
        tool = tomllib.loads(pyproject.decode()).get("tool", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return "unparseable"
    return {key: value for key, value in tool.items() if key.startswith("pytest")}


def _tree(root: Path, max_entries: int = MAX_TREE_ENTRIES) -> dict[str, bytes | str]:
    """Every entry under ``root``: file contents, or "dir" / "symlink", walked without recursion."""
    entries: dict[str, bytes | str] = {}
    stack = [root]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as listing:
            for entry in listing:
                if len(entries) >= max_entries:
                    raise Rejected(f"the patched tree has more than {max_entries} entries")
                relative = os.path.relpath(entry.path, root)
                if entry.is_symlink():
                    entries[relative] = "symlink"
                elif entry.is_dir():
                    entries[relative] = "dir"
                    stack.append(Path(entry.path))
                else:
                    entries[relative] = Path(entry.path).read_bytes()
    return entries


def verify_tree(original: Path, hidden: Path, applied: Path, named: set[str],
                max_entries: int = MAX_TREE_ENTRIES) -> str | None:
    """Why the applied tree is not the original one, with the hidden tests restored, plus changes to the
    files the diff names; or None."""
    restored = _tree(hidden)
    expected = {**_tree(original, max_entries), **restored}
    actual = _tree(applied, max_entries)
    for path in sorted(set(expected) | set(actual)):
        if expected.get(path) == actual.get(path):
            continue
        if actual.get(path) == "symlink":
            return f"{path} is a symlink"
        if path in restored:
            return f"hidden test {path} differs after the patch"
        if "dir" in (actual.get(path), expected.get(path)) and any(n.startswith(path + "/") for n in named):
            continue  # a folder that a named file was added to or removed from
        if path not in named:
            return f"{path} changed, but the diff does not name it"
    if _pytest_config(_bytes(actual.get("pyproject.toml"))) != _pytest_config(_bytes(expected.get("pyproject.toml"))):
        return "the patch changes pytest's configuration in pyproject.toml"
    return None


def _bytes(value: bytes | str | None) -> bytes | None:
    return value if isinstance(value, bytes) else None


def _stage(env_dir: str, scratch_root: str, diff: bytes) -> Path:
    """A root-owned copy of repo/ and hidden/ that the applier can read, plus the diff's bytes."""
    stage = Path(tempfile.mkdtemp(prefix="stage-", dir=scratch_root))
    for name in ("repo", "hidden"):
        source = Path(env_dir, name)
        if source.is_dir():
            shutil.copytree(source, stage / name, symlinks=True)
        else:
            (stage / name).mkdir()
    (stage / "patch.diff").write_bytes(diff)
    make_readable(stage)
    return stage


def make_readable(stage: Path) -> None:
    """Make the root-owned ``stage`` readable (not writable) by the applier."""
    for root, _dirs, names in os.walk(stage):
        os.chmod(root, 0o755)
        for name in names:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o644 | (stat.S_IMODE(os.stat(path).st_mode) & 0o111))


def checked_diff(submission: str, limits: Limits, protected: set[str]) -> tuple[bytes, list[FilePatch]]:
    """Step 1: the submission's diff, parsed (its bytes and files), refused when it touches test
    infrastructure or the ``protected`` paths. Raises RunFailed."""
    diff = parse_diff(submission, limits.tmpfs_mb << 20)
    if isinstance(diff, Fault):
        raise RunFailed(diff.error_type, diff.message)
    reason = tampering(diff.files, protected)
    if reason is not None:
        raise RunFailed("test_infra_tampering", f"the patch touches test infrastructure: {reason}")
    return diff.data, diff.files


class RunFailed(Exception):
    """The whole run failed at some stage; every listed test and probe fails with this error type."""

    def __init__(self, error_type: str, error: str):
        super().__init__(error)
        self.error_type = error_type


def judge(request, env_dir: str, processes: Processes, workspace: Workspace, on_in_play: Callable[[], None],
          fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    """Apply, test and probe. Returns (one result per listed test and probe, how many, submission CPU s)."""
    limits: Limits = request.limits
    spec = json.loads(Path(env_dir, "spec.json").read_text())
    listed = [("fail_to_pass", node) for node in spec["fail_to_pass"]] + \
             [("pass_to_pass", node) for node in spec["pass_to_pass"]]
    probes = json.loads(Path(env_dir, "probes.json").read_text())
    everything = [(group, node) for group, node in listed] + [("probe", f"probe:{p['id']}") for p in probes["probes"]]
    budget = Budget(limits)
    try:
        results = _apply_test_and_probe(request, env_dir, processes, workspace, on_in_play, fail_fast, listed,
                                        probes, budget)
    except RunFailed as failed:
        first = {"id": everything[0][1], "passed": False, "input": everything[0][0], "expected": "passed",
                 "actual": None, "error_type": failed.error_type, "error": plain(str(failed)),
                 "cpu_s": round(budget.usage.cpu_s, 4)}
        results = [first] if fail_fast else [first] + [{**first, "id": node, "input": group}
                                                       for group, node in everything[1:]]
    return results, len(everything), budget.usage.cpu_s


def _apply_test_and_probe(request, env_dir: str, processes: Processes, workspace: Workspace,
                          on_in_play: Callable[[], None], fail_fast: bool, listed: list[tuple[str, str]],
                          probes: dict[str, Any], budget: Budget) -> list[dict[str, Any]]:
    limits: Limits = request.limits
    hidden_root = Path(env_dir, "hidden")
    protected = {str(p.relative_to(hidden_root)) for p in hidden_root.rglob("*") if p.is_file()}
    data, files = checked_diff(request.submission, limits, protected)
    stage = _stage(env_dir, workspace.runner, data)
    assert workspace.applier is not None, "patch tasks get the applier's folder"
    work = Path(workspace.applier)
    on_in_play()
    try:
        apply_and_verify(processes, limits, stage, work, files, budget)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    results = run_listed_tests(processes, limits, work / "repo", listed, budget)
    if not fail_fast or all(r["passed"] for r in results):
        results += _run_probes(processes, limits, work / "repo", probes, budget, fail_fast)
    if fail_fast and not all(r["passed"] for r in results):
        results = results[: next(i for i, r in enumerate(results) if not r["passed"]) + 1]
    return results



def apply_and_verify(processes: Processes, limits: Limits, stage: Path, work: Path, files: list[FilePatch],
                     budget: Budget, max_entries: int = MAX_TREE_ENTRIES) -> None:
    """Step 2 and 3: the applier applies ``stage``/patch.diff to a copy of ``stage``/repo in ``work``/repo and
    restores ``stage``/hidden over it; the runner then verifies the tree. Raises RunFailed."""
    meter = processes.watch()
    apply = spawn_worker(processes, limits, "apply", [str(stage), str(work)], uid=processes.applier_uid)
    applied = apply.wait(meter, for_line=False, cpu_limit_s=limits.case_cpu_s, wall_limit_s=limits.case_wall_s,
                         output_limit=limits.output_kb * 1024)
    apply.close()
    processes.kill_all()
    budget.spend(applied.usage)
    if applied.kind != "exited":
        raise RunFailed(*failure(applied, "applying the patch", limits))
    if applied.exit_code != 0:
        raise RunFailed("patch_apply_failed", "neither git apply nor patch --fuzz could apply the diff: "
                        + apply.text("stderr").strip())
    try:
        problem = verify_tree(stage / "repo", stage / "hidden", work / "repo",
                              {posixpath.normpath(path) for patch in files for path in patch.paths}, max_entries)
    except Rejected as exc:
        problem = str(exc)
    except (OSError, RecursionError, ValueError) as exc:
        # The tree is what the submission's diff made of the repository.
        problem = f"the patched tree cannot be verified ({type(exc).__name__}: {exc})"
    if problem is not None:
        raise RunFailed("test_infra_tampering", problem)

def spawn_worker(processes: Processes, limits: Limits, mode: str, args: list[str], *, uid: int | None = None,
           channel: tuple[int, int] | None = None, cwd: str = "/") -> Supervised:
    argv = [*python_main(WORKER), mode, str(limits.memory_mb), str(limits.nofile),
            str(math.ceil(limits.case_cpu_s) + 1), *args]
    pass_fds = (channel[1],) if channel else ()
    try:
        proc = processes.spawn(argv, pass_fds=pass_fds, cwd=cwd, uid=uid)
    finally:
        if channel:
            os.close(channel[1])
    return Supervised(processes, proc, channel_fd=channel[0] if channel else None)


def run_test_process(processes: Processes, limits: Limits, run: Supervised, meter: Any, budget: Budget) -> Any:
    """Wait for the test process ``run`` (watched by ``meter``) under the case limits, then clear its processes.
    Returns its outcome; raises RunFailed when it did not exit by itself."""
    try:
        outcome = run.wait(meter, for_line=False, cpu_limit_s=limits.case_cpu_s, wall_limit_s=limits.case_wall_s,
                           output_limit=limits.output_kb * 1024)
    finally:
        run.close()
        processes.kill_all()
    budget.spend(outcome.usage)
    if outcome.kind != "exited":
        raise RunFailed(*failure(outcome, "running the tests", limits))
    return outcome


def run_listed_tests(processes: Processes, limits: Limits, repo: Path, listed: list[tuple[str, str]],
                     budget: Budget) -> list[dict[str, Any]]:
    """pytest on the listed node ids as the submission's user, graded from the trusted plugin's report."""
    channel = os.pipe()
    meter = processes.watch()
    run = spawn_worker(processes, limits, "pytest", [str(repo), str(channel[1]), *(node for _, node in listed)],
                       channel=channel, cwd=str(repo))
    outcome = run_test_process(processes, limits, run, meter, budget)
    report = channels.test_results(bytes(run.channel), {node for _, node in listed})
    if isinstance(report, Fault):
        raise RunFailed(report.error_type, report.message)
    if not report.collected or report.exitstatus is None:
        raise RunFailed("solution_error", f"the test suite never ran to the end (pytest {outcome.detail}); "
                         f"output: {run.text('stdout')[-500:]}")
    if report.exitstatus != outcome.exit_code:
        raise RunFailed("solution_error", f"pytest's exit status ({outcome.exit_code}) disagrees with its report "
                         f"({report.exitstatus})")
    results = []
    for group, node in listed:
        node_reports = report.reports.get(node, [])
        passed = ("call", "passed") in node_reports and all(state == "passed" for _, state in node_reports)
        actual = "not run" if not node_reports else ", ".join(f"{when} {state}" for when, state in node_reports)
        results.append({"id": node, "passed": passed, "input": group, "expected": "passed", "actual": actual,
                        "error_type": None if passed else "tests_failed",
                        "error": None if node_reports else "the test was not run", "cpu_s": 0.0})
    all_passed = all(r["passed"] for r in results)
    if all_passed != (outcome.exit_code == 0):
        raise RunFailed("solution_error", f"pytest exited with status {outcome.exit_code} but reported "
                         f"{'every' if all_passed else 'not every'} listed test as passed")
    return results


def _run_probes(processes: Processes, limits: Limits, repo: Path, probes: dict[str, Any], budget: Budget,
                fail_fast: bool) -> list[dict[str, Any]]:
    """The hidden probes, evaluated by a worker that imports the patched repository; compared here."""

    def result(probe: dict, passed: bool, actual: Any, error_type: str | None, error: str | None,
               usage: Usage | None) -> dict[str, Any]:
        return {"id": f"probe:{probe['id']}", "passed": passed, "input": shown(probe["expr"]),
                "expected": shown(probe["expected"]), "actual": None if actual is None else shown(actual),
                "error_type": error_type, "error": error, "cpu_s": round(usage.cpu_s, 4) if usage else 0.0}

    def judge_reply(probe: dict, reply: Reply, usage: Usage) -> dict[str, Any]:
        actual = reply["value"] if reply["ok"] else {"raises": reply["raises"]}
        passed = equal(probe["expected"], actual, None)
        error = None if passed or reply["ok"] else reply["error"][:500]
        return result(probe, passed, actual, None if passed else "tests_failed", error, usage)

    def fail(probe: dict, error_type: str, error: str, usage: Usage | None) -> dict[str, Any]:
        return result(probe, False, None, error_type, error, usage)

    return run_calls(processes, limits, budget, ("probe", str(repo), str(repo)), {"setup": probes["setup"]},
                     probes["probes"], lambda probe: {"expr": probe["expr"]}, judge_reply, fail, lambda: None,
                     fail_fast)
