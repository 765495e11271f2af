"""Judging a patch task: apply the submitted unified diff to the baked repository and run its tests.

The environment's directory holds ``repo/`` (the repository, with its git history), ``hidden/`` (test files,
by path in the repository, restored after the patch) and ``spec.json`` with the ``fail_to_pass`` and
``pass_to_pass`` pytest node ids, as in SWE-bench.

Steps, and who does them:

1. The runner parses the diff (pure Python). Not a unified diff -> ``invalid_patch``. Touching test
   infrastructure -> ``test_infra_tampering``: test files and folders, ``conftest.py`` anywhere (new ones too),
   ``sitecustomize.py``, ``usercustomize.py``, ``*.pth``, ``setup.py``, ``setup.cfg``, ``tox.ini``,
   ``pytest.ini``, the ``.git`` folder, symlinks, file-mode changes and paths that leave the repository.
2. The *applier*, a second unprivileged user, copies the repository, tries ``git apply``, then, on a fresh copy,
   ``patch --fuzz``; neither worked -> ``patch_apply_failed``. It then restores the hidden tests over the tree.
   Untrusted input is never parsed by git or patch as root.
3. The runner verifies the result: hidden tests byte-identical, no symlinks, no new conftest/sitecustomize/
   usercustomize/.pth file, ``[tool.pytest*]`` of pyproject.toml unchanged. Anything else -> tampering.
4. The submission's user runs pytest on the listed tests. The tree belongs to the applier, so the code under
   test cannot rewrite a test before it is collected. A trusted plugin reports each outcome on a pipe.
5. The runner grades: every listed test must be reported, the plugin's exit status must equal the process's,
   and a suite that never ran or ran fewer tests than listed scores 0. Repository code runs inside the pytest
   process, so this channel is not proof against code written to forge deepgym's plugin lines *and* its
   exit status; these cross-checks catch every other way out (``os._exit``, crashes, ``conftest`` hooks).
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import re
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .protocol import Limits
from .sandbox import APPLIER_UID, Sandbox, Supervised, failure

_HUNK = re.compile(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@")
_GIT_HEADER = re.compile(r"^diff --git (\S+) (\S+)$")
_EXTENDED = ("index ", "similarity index ", "dissimilarity index ", "rename from ", "rename to ", "copy from ",
             "copy to ", "old mode ", "new mode ", "new file mode ", "deleted file mode ")
TEST_CONFIG_FILES = {"setup.py", "setup.cfg", "tox.ini", "pytest.ini", "noxfile.py"}
LOADED_BY_TESTS = {"conftest.py", "sitecustomize.py", "usercustomize.py"}
FILE_MODES = {"100644", "100755"}


class Rejected(Exception):
    """The diff is refused before anything runs; ``error_type`` says why."""

    def __init__(self, error_type: str, message: str):
        super().__init__(message)
        self.error_type = error_type


@dataclass
class FilePatch:
    paths: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    mode_change: bool = False
    binary: bool = False
    hunks: int = 0


def _strip_prefix(raw: str) -> str | None:
    """A diff path as it lands in the repository with -p1, or None for /dev/null."""
    raw = raw.split("\t")[0].strip()
    if raw == "/dev/null":
        return None
    if raw.startswith('"'):
        raise Rejected("test_infra_tampering", f"quoted path {raw} (unusual characters) is not accepted")
    parts = raw.split("/", 1)
    if len(parts) != 2 or not parts[1]:
        raise Rejected("invalid_patch", f"path {raw!r} has no a/ or b/ prefix to strip (-p1)")
    return parts[1]


def parse_diff(text: str) -> list[FilePatch]:
    """The files a unified diff touches. Raises Rejected(invalid_patch) when it is not a usable diff."""
    files: list[FilePatch] = []
    current: FilePatch | None = None
    in_hunk = False
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _GIT_HEADER.match(line)
        if header:
            current = FilePatch()
            files.append(current)
            in_hunk = False
            current.paths += [p for p in (_strip_prefix(header[1]), _strip_prefix(header[2])) if p]
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if current is None or current.hunks or in_hunk:
                current = FilePatch()
                files.append(current)
            current.paths += [p for p in (_strip_prefix(line[4:]), _strip_prefix(lines[i + 1][4:])) if p]
            in_hunk = False
            i += 1
        elif line.startswith("@@"):
            if current is None or not _HUNK.match(line):
                raise Rejected("invalid_patch", f"line {i + 1} is not a valid hunk header or has no file header: {line[:80]!r}")
            current.hunks += 1
            in_hunk = True
        elif in_hunk and (line == "" or line[0] in " +-\\"):
            pass
        elif current is not None and line.startswith(_EXTENDED):
            in_hunk = False
            if line.startswith(("old mode ", "new mode ")):
                current.mode_change = True
            if line.startswith(("new file mode ", "deleted file mode ", "old mode ", "new mode ")):
                current.modes.append(line.split()[-1])
            if line.startswith(("rename ", "copy ")):
                current.paths.append(line.split(" ", 2)[2])
        elif current is not None and (line.startswith("GIT binary patch") or line.startswith("Binary files ")):
            current.binary = True
        else:
            in_hunk = False
        i += 1
    if not files:
        raise Rejected("invalid_patch", "the response contains no unified diff (no ---/+++ or diff --git header)")
    for patch in files:
        if patch.binary:
            raise Rejected("invalid_patch", f"binary patches are not accepted ({', '.join(patch.paths)})")
        if not patch.paths:
            raise Rejected("invalid_patch", "a file header names no file")
        if not patch.hunks and not patch.modes:
            raise Rejected("invalid_patch", f"the diff for {patch.paths[0]} has no hunks")
    return files


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


def _pytest_config(repo: Path) -> Any:
    """pyproject.toml's pytest tables; the whole file where tomllib is missing (Python 3.10, local mode)."""
    pyproject = repo / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        import tomllib
    except ImportError:
        return pyproject.read_bytes()
    try:
        tool = tomllib.loads(pyproject.read_text()).get("tool", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return "unparseable"
    return {key: value for key, value in tool.items() if key.startswith("pytest")}


def _loaded_by_tests(repo: Path) -> set[str]:
    return {str(p.relative_to(repo)) for p in repo.rglob("*")
            if p.name in LOADED_BY_TESTS or p.suffix == ".pth"}


def verify_tree(original: Path, hidden: Path, applied: Path) -> str | None:
    """Why the applied tree is not the original one plus source changes, or None."""
    for path in hidden.rglob("*"):
        if path.is_file() and (applied / path.relative_to(hidden)).read_bytes() != path.read_bytes():
            return f"hidden test {path.relative_to(hidden)} differs after the patch"
    for root, dirs, names in os.walk(applied):
        for name in dirs + names:
            if os.path.islink(os.path.join(root, name)):
                return f"{os.path.relpath(os.path.join(root, name), applied)} is a symlink"
    if _loaded_by_tests(applied) != _loaded_by_tests(original) | _loaded_by_tests(hidden):
        return "the patch adds a file the test run would load (conftest.py, sitecustomize.py, *.pth)"
    if _pytest_config(applied) != _pytest_config(original):
        return "the patch changes pytest's configuration in pyproject.toml"
    return None


def _stage(env_dir: str, scratch_root: str, diff: str) -> Path:
    """A root-owned copy of repo/ and hidden/ that the applier can read, plus the diff."""
    stage = Path(tempfile.mkdtemp(prefix="stage-", dir=scratch_root))
    for name in ("repo", "hidden"):
        source = Path(env_dir, name)
        if source.is_dir():
            shutil.copytree(source, stage / name, symlinks=True)
        else:
            (stage / name).mkdir()
    (stage / "patch.diff").write_text(diff if diff.endswith("\n") else diff + "\n")
    for root, dirs, names in os.walk(stage):
        os.chmod(root, 0o755)
        for name in names:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o644 | (stat.S_IMODE(os.stat(path).st_mode) & 0o111))
    return stage


def judge(request, env_dir: str, sandbox: Sandbox, scratch_root: str, on_in_play: Callable[[], None],
          fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    """Apply and test. Returns (one result per listed test, number listed, submission CPU seconds)."""
    limits: Limits = request.limits
    spec = json.loads(Path(env_dir, "spec.json").read_text())
    listed = [("fail_to_pass", node) for node in spec["fail_to_pass"]] + \
             [("pass_to_pass", node) for node in spec["pass_to_pass"]]

    def all_fail(error_type: str, error: str, cpu_s: float = 0.0) -> tuple[list[dict[str, Any]], int, float]:
        first = listed[0]
        result = {"id": first[1], "passed": False, "input": first[0], "expected": "passed", "actual": None,
                  "error_type": error_type, "error": error[:2000], "cpu_s": round(cpu_s, 4)}
        rest = [] if fail_fast else [{**result, "id": node, "input": group} for group, node in listed[1:]]
        return [result, *rest], len(listed), cpu_s

    hidden_root = Path(env_dir, "hidden")
    protected = {str(p.relative_to(hidden_root)) for p in hidden_root.rglob("*") if p.is_file()}
    try:
        reason = tampering(parse_diff(request.submission), protected)
    except Rejected as exc:
        return all_fail(exc.error_type, str(exc))
    if reason is not None:
        return all_fail("test_infra_tampering", f"the patch touches test infrastructure: {reason}")

    stage = _stage(env_dir, scratch_root, request.submission)
    work = Path(scratch_root, f"work-{os.urandom(6).hex()}")
    on_in_play()
    try:
        meter = sandbox.watch()
        apply = _spawn(sandbox, limits, "apply", [str(stage), str(work)], uid=APPLIER_UID)
        applied = apply.wait(meter, for_line=False, cpu_limit_s=limits.case_cpu_s, wall_limit_s=limits.case_wall_s,
                             output_limit=limits.output_kb * 1024)
        apply.close()
        sandbox.kill_all()
        cpu = applied.usage.cpu_s
        if applied.kind != "exited":
            return all_fail(*failure(applied, "applying the patch", limits), cpu)
        if applied.exit_code != 0:
            return all_fail("patch_apply_failed", "neither git apply nor patch --fuzz could apply the diff: "
                            + apply.text("stderr").strip(), cpu)
        problem = verify_tree(stage / "repo", stage / "hidden", work / "repo")
        if problem is not None:
            return all_fail("test_infra_tampering", problem, cpu)
        return _run_tests(sandbox, limits, work / "repo", listed, cpu, fail_fast, all_fail)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _spawn(sandbox: Sandbox, limits: Limits, mode: str, args: list[str], *, uid: int | None = None,
           channel: tuple[int, int] | None = None, cwd: str = "/") -> Supervised:
    argv = [sys.executable, "-I", "-B", "-m", f"{__package__}.worker", mode, str(limits.memory_mb),
            str(limits.nofile), str(math.ceil(limits.case_cpu_s) + 1), *args]
    pass_fds = (channel[1],) if channel else ()
    try:
        proc = sandbox.spawn(argv, pass_fds=pass_fds, cwd=cwd, uid=uid)
    finally:
        if channel:
            os.close(channel[1])
    return Supervised(sandbox, proc, channel_fd=channel[0] if channel else None)


def _run_tests(sandbox: Sandbox, limits: Limits, repo: Path, listed: list[tuple[str, str]], cpu: float,
               fail_fast: bool, all_fail) -> tuple[list[dict[str, Any]], int, float]:
    channel = os.pipe()
    meter = sandbox.watch()
    run = _spawn(sandbox, limits, "pytest", [str(repo), str(channel[1]), *(node for _, node in listed)],
                 channel=channel, cwd=str(repo))
    try:
        outcome = run.wait(meter, for_line=False, cpu_limit_s=limits.case_cpu_s, wall_limit_s=limits.case_wall_s,
                           output_limit=limits.output_kb * 1024)
    finally:
        run.close()
        sandbox.kill_all()
    cpu += outcome.usage.cpu_s
    if outcome.kind != "exited":
        return all_fail(*failure(outcome, "running the tests", limits), cpu)
    events = []
    for line in bytes(run.channel).splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            return all_fail("solution_error", "the test run wrote garbage on the results channel", cpu)
        if isinstance(event, dict):
            events.append(event)
    finished = [e for e in events if e.get("event") == "finished"]
    if not any(e.get("event") == "collected" for e in events) or not finished:
        return all_fail("solution_error", f"the test suite never ran to the end (pytest {outcome.detail}); "
                        f"output: {run.text('stdout')[-500:]}", cpu)
    if finished[-1].get("exitstatus") != outcome.exit_code:
        return all_fail("solution_error", f"pytest's exit status ({outcome.exit_code}) disagrees with its report "
                        f"({finished[-1].get('exitstatus')})", cpu)
    reports: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event.get("event") == "test":
            reports.setdefault(str(event.get("nodeid")), []).append(event)
    results = []
    for group, node in listed:
        node_reports = reports.get(node, [])
        passed = any(r.get("when") == "call" and r.get("outcome") == "passed" for r in node_reports) and \
            not any(r.get("outcome") != "passed" for r in node_reports)
        actual = "not run" if not node_reports else ", ".join(f"{r.get('when')} {r.get('outcome')}" for r in node_reports)
        results.append({"id": node, "passed": passed, "input": group, "expected": "passed", "actual": actual,
                        "error_type": None if passed else "tests_failed",
                        "error": None if node_reports else "the test was not run", "cpu_s": 0.0})
    all_passed = all(r["passed"] for r in results)
    if all_passed != (outcome.exit_code == 0):
        return all_fail("solution_error", f"pytest exited with status {outcome.exit_code} but reported "
                        f"{'every' if all_passed else 'not every'} listed test as passed", cpu)
    if fail_fast and not all_passed:
        first = next(i for i, r in enumerate(results) if not r["passed"])
        results = results[: first + 1]
    return results, len(listed), cpu
