"""Judging a function task: call the submission's entry point on every hidden case and compare in the runner.

The hidden tests are a module ``cases.py`` in the environment's directory (root-only inside the image):

- ``cases(variant: int) -> list[dict]``: each case is ``{"id": str, "args": [...], "expected": ...}`` with
  JSON values only. Seeded random cases are generated here and checked against a brute-force oracle, once
  per variant when the image is built (:mod:`hidden_cases`), not per sample.
- optional ``check(args, expected, actual) -> bool`` for tasks with several right answers; it runs in the
  runner and only ever sees plain data.
- optional ``FLOAT_TOLERANCE`` (relative and absolute) for the default comparison.

The loop that drives a worker (:func:`run_calls`) also judges a patch task's probes.
"""

from __future__ import annotations

import math
import os
import sys

from .. import wire
from . import hidden_cases
from ..channels import Fault, Reply, shown, worker_reply
from ..protocol import Limits
from ..confine.processes import WORKER, Meter, Processes, python_main
from ..confine.supervise import Ending, Supervised, failure
from ..confine.usage import Budget, Usage
from ..confine.workspace import Workspace

TYPE_CHECKING = False  # typing is not imported at start-up: its milliseconds are paid per sample
if TYPE_CHECKING:
    from typing import Any, Callable


def _finite(number: int | float) -> bool:
    """Whether ``number`` converts to a finite float (an int past 1.8e308 would overflow math.isclose)."""
    return abs(number) <= sys.float_info.max


def equal(expected: Any, actual: Any, tolerance: float | None) -> bool:
    """Structural equality of JSON values. Booleans only equal booleans; numbers compare by value, with
    ``tolerance`` (relative and absolute) for floats when given and both are finite (Python compares the
    rest exactly). Recurses as deep as the shallower value; replies are at most MAX_DEPTH deep."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if tolerance is not None and (isinstance(expected, float) or isinstance(actual, float)) and \
                _finite(expected) and _finite(actual):
            return math.isclose(expected, actual, rel_tol=tolerance, abs_tol=tolerance)
        return expected == actual
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(equal(e, a, tolerance) for e, a in zip(expected, actual))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(equal(expected[k], actual[k], tolerance) for k in expected)
    return type(expected) is type(actual) and expected == actual


class Worker:
    """One worker process (worker.py in ``function`` or ``probe`` mode; ``module`` row_tests for a row's trusted
    tests, as ``uid``) and the pipes to it. A function worker of processes with a worker zygote is forked by it
    (:meth:`Processes.fork_worker`), after the zygote imported the standard-library modules ``preload`` (those
    the submission's prelude imports); every other one is a fresh interpreter."""

    def __init__(self, processes: Processes, limits: Limits, mode: str, path: str, cwd: str = "/", *,
                 module: str = "worker", uid: int | None = None, preload: tuple[str, ...] = ()):
        req_r, req_w = os.pipe()
        reply_r, reply_w = os.pipe()
        forked = processes.workers is not None and module == "worker" and mode == "function" and uid is None
        args = [mode, str(limits.memory_mb), str(limits.nofile), str(math.ceil(limits.total_cpu_s) + 1), path]
        try:
            if forked:
                proc = processes.fork_worker([*args, "3", "4"], (req_r, reply_w), cwd, preload)
            else:
                started = WORKER if module == "worker" else f"{__package__}.{module}"  # row_tests: a kind's own
                proc = processes.spawn([*python_main(started), *args, str(req_r), str(reply_w)],
                                       pass_fds=(req_r, reply_w), cwd=cwd, uid=uid)
        except BaseException:
            os.close(reply_r)
            os.close(req_w)
            raise
        finally:
            os.close(req_r)
            os.close(reply_w)
        self._forked = proc if forked else None
        self.process = Supervised(processes, proc, channel_fd=reply_r, requests_fd=req_w,
                                  exit_fd=processes.workers.control.fileno() if forked else None)

    def call(self, message: dict[str, Any] | None, limits: Limits, cpu_limit_s: float) -> Ending:
        """Send one request line (none when ``message`` is None) and wait for the next line under the case's
        limits."""
        meter = self.process.processes.watch()
        send = b"" if message is None else wire.dumps(message).encode() + b"\n"
        return self.reply(meter, limits, cpu_limit_s, send)

    def reply(self, meter: Meter, limits: Limits, cpu_limit_s: float, send: bytes = b"") -> Ending:
        """Send ``send`` (request lines), then wait for the next line under one case's limits, measured by
        ``meter``."""
        return self.process.wait(meter, for_line=True, cpu_limit_s=cpu_limit_s, wall_limit_s=limits.case_wall_s,
                                 output_limit=limits.output_kb * 1024, send=send)

    def close(self) -> None:
        self.process.close()
        if self._forked is not None:  # a spawned worker's pipes are the Processes' to close (kill_all)
            self._forked.close()


def reply_of(outcome: Ending, doing: str, call_id: str | None, limits: Limits) -> Reply | Fault:
    """The reply to loading (``call_id`` None) or to a call, or the fault that there is none.

    A failure reported while the OOM killer struck in the sandbox is ``solution_oom`` whatever the reply says:
    the submission's own processes ran it out of memory, and its reply may arrive before the runner's next tick
    would have seen the kill (a worker that waits for its OOM-killed child answers at once)."""
    if outcome.kind != "line":
        return Fault(*failure(outcome, doing, limits))
    answer = worker_reply(outcome.line, call_id, limits.output_kb * 1024)
    if outcome.usage.oom_kills and (isinstance(answer, Fault) or not answer["ok"]):
        return Fault("solution_oom", f"the submission was killed by the out-of-memory killer while {doing}")
    return answer


def run_calls(processes: Processes, limits: Limits, budget: Budget, worker_args: tuple[str, str, str],
              hello: dict[str, Any], cases: list[dict[str, Any]], request_of: Callable[[dict], dict],
              judge_reply: Callable[[dict, Reply, Usage], dict], fail: Callable[[dict, str, str, Usage | None], dict],
              on_in_play: Callable[[], None], fail_fast: bool, preload: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Drive a worker through ``cases``: load it with ``hello``, send ``request_of(case)`` for each case and
    judge each reply in the runner. A worker that dies or runs out of time fails its case and is replaced;
    one that cannot load fails every remaining case the same way. ``worker_args`` is (mode, path, cwd);
    ``preload``, the modules a forked worker's zygote imports first (:class:`Worker`).
    Replies pass :func:`channels.worker_reply`, so ``judge_reply`` gets plain, bounded data only.

    A loaded worker gets every remaining case's request at once and answers them in order (one round trip
    per worker, not per case). Each case is the window from the previous reply to its own, measured by the
    runner alone (:meth:`Meter.successor`: contiguous windows, so the budget gets every CPU second): a case
    that hangs, crashes or overruns its CPU, wall-clock or output limit is the one whose reply is missing.
    The worker sees the later cases' arguments early, so the per-case CPU limit bounds the CPU between two
    replies; the total limit bounds them all."""
    results: list[dict[str, Any]] = []
    worker: Worker | None = None
    meter: Meter | None = None  # the window of the next reply
    call_ids: dict[int, str] = {}  # case index -> call id, for the cases sent to the current worker
    in_play = False
    try:
        for index, case in enumerate(cases):
            exhausted = budget.used_up()
            if exhausted is not None:
                results.append(fail(case, "solution_timeout", exhausted, None))
                if fail_fast:
                    break
                continue
            cpu_limit = min(limits.case_cpu_s, budget.cpu_left())
            send = b""
            if worker is None:
                if not in_play:
                    on_in_play()
                    in_play = True
                worker = Worker(processes, limits, *worker_args, preload=preload)
                loaded = worker.call(hello, limits, cpu_limit)
                budget.spend(loaded.usage)
                ready = reply_of(loaded, "loading the submission", None, limits)
                if isinstance(ready, Fault):
                    # Loading is deterministic: every remaining case would fail the same way.
                    remaining = [case] if fail_fast else cases[index:]
                    results.extend(fail(c, ready.error_type, ready.message, loaded.usage) for c in remaining)
                    break
                cpu_limit = min(limits.case_cpu_s, budget.cpu_left())
                # os.urandom: as secrets.token_hex, without importing hmac and hashlib
                call_ids = {later: os.urandom(8).hex() for later in range(index, len(cases))}
                send = b"".join(wire.dumps({"id": call_ids[later], **request_of(cases[later])}).encode() + b"\n"
                                for later in call_ids)
                meter = processes.watch()
            assert meter is not None
            outcome = worker.reply(meter, limits, cpu_limit, send)
            meter = meter.successor()
            budget.spend(outcome.usage)
            reply = reply_of(outcome, "running the case", call_ids[index], limits)
            if isinstance(reply, Fault):
                results.append(fail(case, reply.error_type, reply.message, outcome.usage))
                worker.close()
                processes.kill_all()
                worker = None
            else:
                results.append(judge_reply(case, reply, outcome.usage))
            if fail_fast and not results[-1]["passed"]:
                break
    finally:
        if worker is not None:
            worker.close()
    return results


def judge(request, env_dir: str, processes: Processes, workspace: Workspace, on_in_play: Callable[[], None],
          fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    """Run every hidden case. Returns (case results, number of cases, submission CPU seconds)."""
    cases, check, tolerance = hidden_cases.load(env_dir, request.variant)

    def fail(case: dict, error_type: str, error: str, usage: Usage | None) -> dict[str, Any]:
        return {"id": case["id"], "passed": False, "input": shown(case["args"]),
                "expected": shown(case["expected"]), "actual": None, "error_type": error_type,
                "error": error, "cpu_s": round(usage.cpu_s, 4) if usage else 0.0}

    def judge_reply(case: dict, reply: Reply, usage: Usage) -> dict[str, Any]:
        result = {"id": case["id"], "input": shown(case["args"]), "expected": shown(case["expected"]),
                  "cpu_s": round(usage.cpu_s, 4)}
        if not reply["ok"]:
            return {**result, "passed": False, "actual": None, "error_type": reply["error_type"],
                    "error": reply["error"]}
        actual = reply["value"]
        error = None
        try:
            passed = bool(check(case["args"], case["expected"], actual)) if check else equal(case["expected"], actual,
                                                                                              tolerance)
        except Exception as exc:  # noqa: BLE001 - a value the checker cannot handle is a wrong value
            passed, error = False, f"the checker rejected the value: {type(exc).__name__}"
        return {**result, "passed": passed, "actual": shown(actual),
                "error_type": None if passed else "wrong_answer", "error": error}

    budget = Budget(request.limits)
    results = run_calls(processes, request.limits, budget, ("function", workspace.scratch, "/"),
                        {"code": request.submission, "entry_point": request.entry_point}, cases,
                        lambda case: {"args": case["args"]}, judge_reply, fail, on_in_play, fail_fast)
    return results, len(cases), budget.usage.cpu_s
