"""Judging a program task: run the submitted program on every test file and compare its output token-wise.

The hidden tests are ``cases/<id>.in`` and ``cases/<id>.out`` in the environment's directory, run in sorted
order, and an optional ``config.json`` with ``{"float_tolerance": 1e-6}``. Outputs are compared token by
token (:func:`channels.program_output`). A non-zero exit status fails the case even when the output is right.

Each case runs in a child forked from the sample's case server (:mod:`case_server`), as a dataset's stdin rows
do: one interpreter start per sample instead of one per case, with every limit and check of a fresh process.
"""

from __future__ import annotations

import os

from .. import wire
from ..channels import Fault, head, program_output, source
from ..protocol import Limits
from ..confine.processes import Processes
from ..confine.usage import Budget
from ..confine.workspace import Workspace
from .case_server import CaseServer

TYPE_CHECKING = False  # typing, json, pathlib, tempfile and shutil are not imported: a fresh runner pays for each
if TYPE_CHECKING:
    from typing import Any, Callable


def judge(request, env_dir: str, processes: Processes, workspace: Workspace, on_in_play: Callable[[], None],
          fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    """Run every test file. Returns (case results, number of cases, submission CPU seconds)."""
    limits: Limits = request.limits
    config_path = os.path.join(env_dir, "config.json")
    tolerance = None
    if os.path.exists(config_path):
        with open(config_path, "rb") as f:
            tolerance = wire.loads(f.read()).get("float_tolerance")
    cases_dir = os.path.join(env_dir, "cases")
    # In file-name order ("a-b.in" before "a.in"; their stems would sort the other way).
    names = [name[:-3] for name in sorted(os.listdir(cases_dir)) if name.endswith(".in")] \
        if os.path.isdir(cases_dir) else []
    script = stage(request.submission, workspace, limits)
    if isinstance(script, Fault):
        first = {"id": names[0] if names else "", "passed": False, "input": None, "expected": None,
                 "actual": None, "error_type": script.error_type, "error": script.message, "cpu_s": 0.0}
        return [first], len(names), 0.0
    results: list[dict[str, Any]] = []
    budget = Budget(limits)
    server = CaseServer(processes, limits, script, ())
    on_in_play()
    try:
        for name in names:
            with open(os.path.join(cases_dir, name + ".out"), "rb") as f:
                expected = f.read()
            given = os.path.join(cases_dir, name + ".in")
            with open(given, "rb") as f:
                result = {"id": name, "input": head(f.read(1 << 10)), "expected": head(expected), "actual": None}
            exhausted = budget.used_up()
            if exhausted is not None:
                results.append({**result, "passed": False, "error_type": "solution_timeout", "error": exhausted,
                                "cpu_s": 0.0})
            else:
                # The hidden file itself, open for reading only, is the case's stdin: the submission's user can
                # neither open it again (nor its folder) nor write to it, so the runner need not copy it.
                results.append(server.run(budget, os.open(given, os.O_RDONLY | os.O_CLOEXEC),
                                          lambda actual, want=expected: program_output(want, actual, tolerance), result))
            if fail_fast and not results[-1]["passed"]:
                break
    finally:
        server.close()
        unstage(script)
    return results, len(names), budget.usage.cpu_s


def stage(submission: str, workspace: Workspace, limits: Limits) -> str | Fault:
    """The program as a file the submission's user can read but not change, in a folder of its own in the
    runner's workspace (:func:`unstage` removes both), or the fault that it cannot be one."""
    code = source(submission, "solution_error", limits.tmpfs_mb << 20)
    if isinstance(code, Fault):
        return code
    code_dir = os.path.join(workspace.runner, "program-" + os.urandom(8).hex())
    os.mkdir(code_dir, 0o700)  # a new name in the runner's own folder: nobody else can have made it first
    os.chmod(code_dir, 0o755)
    script = os.path.join(code_dir, "solution.py")
    with open(script, "xb") as f:
        f.write(code)
    os.chmod(script, 0o644)
    return script


def unstage(script: str) -> None:
    """Remove a staged program and its folder. Only the runner writes there (the folder is its, 0755), so the
    program is all it holds; a failure to remove is left to the workspace's clean-up."""
    try:
        os.unlink(script)
        os.rmdir(os.path.dirname(script))
    except OSError:
        pass
