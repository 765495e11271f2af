"""Judging a program task: run the submitted program on every test file and compare its output token-wise.

The hidden tests are ``cases/<id>.in`` and ``cases/<id>.out`` in the environment's directory, run in sorted
order, and an optional ``config.json`` with ``{"float_tolerance": 1e-6}``. Outputs are compared token by
token (:func:`channels.program_output`). A non-zero exit status fails the case even when the output is right.

Each case runs in a child forked from the sample's case server (:mod:`case_server`), as a dataset's stdin rows
do: one interpreter start per sample instead of one per case, with every limit and check of a fresh process.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..channels import Fault, head, program_output, source
from ..protocol import Limits
from ..confine.processes import Processes
from ..confine.usage import Budget
from ..confine.workspace import Workspace
from .case_server import CaseServer


def judge(request, env_dir: str, processes: Processes, workspace: Workspace, on_in_play: Callable[[], None],
          fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    """Run every test file. Returns (case results, number of cases, submission CPU seconds)."""
    limits: Limits = request.limits
    config_path = Path(env_dir, "config.json")
    tolerance = json.loads(config_path.read_text()).get("float_tolerance") if config_path.exists() else None
    inputs = sorted(Path(env_dir, "cases").glob("*.in"))
    script = stage(request.submission, workspace, limits)
    if isinstance(script, Fault):
        first = {"id": inputs[0].stem if inputs else "", "passed": False, "input": None, "expected": None,
                 "actual": None, "error_type": script.error_type, "error": script.message, "cpu_s": 0.0}
        return [first], len(inputs), 0.0
    results: list[dict[str, Any]] = []
    budget = Budget(limits)
    server = CaseServer(processes, limits, script, ())
    on_in_play()
    try:
        for case_in in inputs:
            expected = case_in.with_suffix(".out").read_bytes()
            with open(case_in, "rb") as f:
                input_head = head(f.read(1 << 10))
            result = {"id": case_in.stem, "input": input_head, "expected": head(expected), "actual": None}
            exhausted = budget.used_up()
            if exhausted is not None:
                results.append({**result, "passed": False, "error_type": "solution_timeout", "error": exhausted,
                                "cpu_s": 0.0})
            else:
                with open(case_in, "rb") as f:
                    data = f.read()
                results.append(server.run(budget, data,
                                          lambda actual, want=expected: program_output(want, actual, tolerance), result))
            if fail_fast and not results[-1]["passed"]:
                break
    finally:
        server.close()
        shutil.rmtree(script.parent, ignore_errors=True)
    return results, len(inputs), budget.usage.cpu_s


def stage(submission: str, workspace: Workspace, limits: Limits) -> Path | Fault:
    """The program as a file the submission's user can read but not change (in a folder of the runner's
    workspace; remove its parent afterwards), or the fault that it cannot be one."""
    code = source(submission, "solution_error", limits.tmpfs_mb << 20)
    if isinstance(code, Fault):
        return code
    code_dir = tempfile.mkdtemp(prefix="program-", dir=workspace.runner)
    os.chmod(code_dir, 0o755)
    script = Path(code_dir, "solution.py")
    script.write_bytes(code)
    script.chmod(0o644)
    return script
