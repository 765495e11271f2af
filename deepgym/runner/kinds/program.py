"""Judging a program task: run the submitted program on every test file and compare its output token-wise.

The hidden tests are ``cases/<id>.in`` and ``cases/<id>.out`` in the environment's directory, run in sorted
order, and an optional ``config.json`` with ``{"float_tolerance": 1e-6}``. Outputs are compared token by
token (:func:`channels.program_output`). A non-zero exit status fails the case even when the output is right.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..channels import Fault, head, plain, program_output, source
from ..protocol import Limits
from ..confine.processes import WORKER, Processes
from ..confine.supervise import Ending, Supervised, failure
from ..confine.usage import Budget
from ..confine.workspace import Workspace


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
                results.append(run_case(processes, budget, script, case_in,
                                        lambda actual, want=expected: program_output(want, actual, tolerance), result))
            if fail_fast and not results[-1]["passed"]:
                break
    finally:
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


def run_case(processes: Processes, budget: Budget, script: Path, case_in: Path,
             compare: Callable[[bytes], Fault | None], result: dict[str, Any]) -> dict[str, Any]:
    """Run the program on the file ``case_in`` as its stdin; ``compare`` judges its output (None: right)."""
    limits = budget.limits
    cpu_limit = min(limits.case_cpu_s, budget.cpu_left())
    argv = [sys.executable, "-I", "-B", "-m", WORKER, "script", str(limits.memory_mb),
            str(limits.nofile), str(math.ceil(cpu_limit) + 1), str(script)]
    output_limit = limits.output_kb * 1024
    meter = processes.watch()
    with open(case_in, "rb") as stdin:
        proc = processes.spawn(argv, stdin=stdin.fileno(), cwd=str(script.parent))
    process = Supervised(processes, proc, keep_stdout=output_limit)
    try:
        outcome = process.wait(meter, for_line=False, cpu_limit_s=cpu_limit, wall_limit_s=limits.case_wall_s,
                               output_limit=output_limit)
    finally:
        process.close()
        processes.kill_all()
    budget.spend(outcome.usage)
    return case_result(outcome, process, limits, compare, result)


def case_result(outcome: Ending, process: Supervised, limits: Limits, compare: Callable[[bytes], Fault | None],
                result: dict[str, Any]) -> dict[str, Any]:
    """A case's result from how its program ended and what it wrote: a failure unless it exited with status 0
    and ``compare`` accepts its output."""
    actual = bytes(process.kept["stdout"])
    result = {**result, "actual": head(actual), "cpu_s": round(outcome.usage.cpu_s, 4)}
    if outcome.kind != "exited":
        error_type, error = failure(outcome, "running the program", limits)
    elif outcome.exit_code != 0:
        stderr = process.text("stderr").strip().splitlines()
        error_type, error = "solution_error", f"the program {outcome.detail}" + (f": {plain(stderr[-1])}" if stderr else "")
    else:
        wrong = compare(actual)
        if wrong is None:
            return {**result, "passed": True, "error_type": None, "error": None}
        error_type, error = wrong.error_type, wrong.message
    return {**result, "passed": False, "error_type": error_type, "error": error}
