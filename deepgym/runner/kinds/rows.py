"""Judging a dataset row: tests that travel in the request (``Request.tests``) instead of the image.

The host (:mod:`deepgym.rows`) turns a row's ``ground_truth`` into one of three formats, and the tests stay
on the trusted side in each: the runner holds every expected value, and the submission's process only ever
sees one case's input at a time.

- ``stdin``: ``{"cases": [{"input": str, "output": str}, ...]}``. The program reads the input on stdin; its
  output is compared in the runner by :func:`apps_output_matches`, the rule verl's ``prime_code`` applies.
- ``call``: ``{"fn_name", "cases": [{"args": [...], "expected": ...}, ...]}`` (the row's JSON values in
  :mod:`literal`'s encoding, so an integer of any length crosses). The runner calls
  the function (a method of ``class Solution`` when the code has one) with the arguments as data
  (:mod:`literal`) and compares the plain result in the runner by :func:`apps_result_matches`.
- ``assert``: ``{"setup": code, "names": [...], "cases": [code, ...]}``. A trusted process of its own
  (:mod:`row_tests`, another user than the submission's) runs the dataset's test code; each call of a name
  in ``names`` is forwarded through the runner to the submission as data, and each ``assert`` compares plain
  values in that trusted process.

``stdin`` and ``call`` run the submission after :data:`PRELUDE`, the imports verl's ``prime_code`` puts
before every solution, so code written for those rows (using ``defaultdict`` without importing it) runs.
"""

from __future__ import annotations

import math
import os

from .. import wire
from ..channels import Fault, Reply, head, plain, shown
from ..confine.processes import Processes
from ..confine.supervise import Ending, failure
from ..confine.usage import BrokenTests, Budget, Usage
from ..confine.workspace import Workspace
from ..literal import INVALID, decode, encode
from ..protocol import Limits
from . import program
from .case_server import CaseServer, read_only_input
from .function import Worker, reply_of, run_calls

TYPE_CHECKING = False  # typing, json, secrets and shutil are not imported: a fresh runner pays for each
if TYPE_CHECKING:
    from typing import Any, Callable

# verl 0.9.1 prime_code/testing_util.py, run_test: the header before every stdin and call-based solution.
PRELUDE_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
                   "statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")
PRELUDE = "".join(f"from {m} import *\n" for m in PRELUDE_MODULES) + "".join(
    f"import {m}\n" for m in PRELUDE_MODULES[:-2]) + "sys.setrecursionlimit(6*10**5)\n"


class RowTestsBroken(BrokenTests):
    """The row's own test code failed before the submission was involved: no verdict (verifier_error)."""


# ---------------------------------------------------------------------------------------------------- comparisons

def _allclose(got: list[float], want: list[float]) -> bool:
    """numpy.allclose with its defaults (rtol 1e-5, atol 1e-8, NaN equal to nothing, infinities to themselves)."""
    for a, b in zip(got, want):
        if math.isfinite(a) and math.isfinite(b):
            if not abs(a - b) <= 1e-8 + 1e-5 * abs(b):
                return False
        elif a != b:
            return False
    return True


def apps_output_matches(actual: str, expected: str) -> bool:
    """Whether a program's output passes against the expected output, exactly as verl 0.9.1's
    ``prime_code`` (``testing_util.run_test``, standard input) decides it. Any of:

    1. the output's lines (``str.splitlines``) joined by ``\\n``, stripped, equal the expected text stripped;
    2. the same with every line stripped first;
    3. the output's lines, or its non-empty lines, equal the expected text's non-empty lines (split at ``\\n``)
       each stripped;
    4. the non-empty output lines and those expected lines are as many, not all pairs are digit strings, each
       line is one number (``float()``), and they are close (relative 1e-5, absolute 1e-8).
    """
    lines = actual.splitlines()
    want = expected.strip()
    if "\n".join(lines).strip() == want or "\n".join(line.strip() for line in lines).strip() == want:
        return True
    want_lines = [line.strip() for line in expected.split("\n") if line]
    nonempty = [line for line in lines if line]
    if lines == want_lines or nonempty == want_lines:
        return True
    if len(nonempty) != len(want_lines) or all(a.isdigit() and b.isdigit() for a, b in zip(nonempty, want_lines)):
        return False
    try:
        got, wanted = [float(x) for x in nonempty], [float(x) for x in want_lines]
    except ValueError:
        return False
    return _allclose(got, wanted)


def _int_keys(value: Any) -> Any:
    """prime_code's undoing of JSON's string keys: the dict with every key made an int, or the value as it
    was when one key is not an integer's spelling."""
    try:
        return {int(k): v for k, v in value.items()}
    except (TypeError, ValueError):
        return value


def prime_call_case(args: list[Any], expected: Any) -> tuple[list[Any], Any]:
    """A call-based case as prime_code prepares it: a dict first argument (or expected value) gets integer keys,
    a dict expected value inside a list, and the argument list shrinks to that dict alone."""
    if args and isinstance(args[0], dict):
        converted = _int_keys(args[0])
        if converted is not args[0]:
            args = [converted]
    if isinstance(expected, dict):
        converted = _int_keys(expected)
        if converted is not expected:
            expected = [converted]
    if isinstance(expected, list) and expected and isinstance(expected[0], dict):
        converted = _int_keys(expected[0])
        if converted is not expected[0]:
            expected = [converted]
    return args, expected


def apps_result_matches(actual: Any, expected: Any) -> bool:
    """Whether a function's plain result passes, as prime_code decides it: a tuple counts as a list; the result
    equals the expected value, or its only element when that is a non-empty list, or (a list of tuples) as
    lists equals that element."""
    if isinstance(actual, tuple):
        actual = list(actual)
    if actual == expected:
        return True
    if isinstance(expected, list) and expected:
        if actual == expected[0]:
            return True
        if isinstance(actual, list) and actual and isinstance(actual[0], tuple):
            try:
                return [list(x) for x in actual] == expected[0]
            except TypeError:  # an element that is not a sequence: prime_code's list(x) raises too
                return False
    return False


# ---------------------------------------------------------------------------------------------------- judges

def judge(request, env_dir: str, processes: Processes, workspace: Workspace, on_in_play: Callable[[], None],
          fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    """Run the row's cases. Returns (case results, number of cases, submission CPU seconds)."""
    tests = request.tests
    judges = {"stdin": _stdin, "call": _call, "assert": _assert}
    return judges[tests["format"]](request, tests, processes, workspace, on_in_play, fail_fast)


def _stdin(request, tests: dict, processes: Processes, workspace: Workspace, on_in_play: Callable[[], None],
           fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    cases = tests["cases"]
    script = program.stage(PRELUDE + request.submission, workspace, request.limits)
    if isinstance(script, Fault):
        return [{"id": "0", "passed": False, "input": None, "expected": None, "actual": None,
                 "error_type": script.error_type, "error": script.message, "cpu_s": 0.0}], len(cases), 0.0
    budget = Budget(request.limits)
    results: list[dict[str, Any]] = []
    server = CaseServer(processes, request.limits, script, PRELUDE_MODULES)
    on_in_play()
    try:
        for index, case in enumerate(cases):
            result = {"id": str(index), "input": head(case["input"][:1024].encode()),
                      "expected": head(case["output"][:1024].encode()), "actual": None}
            exhausted = budget.used_up()
            if exhausted is not None:
                results.append({**result, "passed": False, "error_type": "solution_timeout", "error": exhausted,
                                "cpu_s": 0.0})
            else:
                results.append(server.run(budget, read_only_input(case["input"].encode()),
                                          lambda actual, want=case["output"]: _compare_output(actual, want), result))
            if fail_fast and not results[-1]["passed"]:
                break
    finally:
        server.close()
        program.unstage(script)
    return results, len(cases), budget.usage.cpu_s


def _compare_output(actual: bytes, expected: str) -> Fault | None:
    return None if apps_output_matches(actual.decode("utf-8", "replace"), expected) else Fault("wrong_answer", None)


def _call(request, tests: dict, processes: Processes, workspace: Workspace, on_in_play: Callable[[], None],
          fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    prepared = []
    for index, case in enumerate(tests["cases"]):
        args, expected = decode(case["args"]), decode(case["expected"])
        if type(args) is not list or expected is INVALID:
            raise RowTestsBroken(f"case {index} of the row's tests is not literal data")
        prepared.append((str(index), *prime_call_case(args, expected)))

    def fail(case: tuple, error_type: str, error: str, usage: Usage | None) -> dict[str, Any]:
        return {"id": case[0], "passed": False, "input": shown(case[1]), "expected": shown(case[2]), "actual": None,
                "error_type": error_type, "error": error, "cpu_s": round(usage.cpu_s, 4) if usage else 0.0}

    def judge_reply(case: tuple, reply: Reply, usage: Usage) -> dict[str, Any]:
        if not reply["ok"]:
            return fail(case, reply["error_type"], reply["error"], usage)
        actual = decode(reply["value"])
        if actual is INVALID:
            return fail(case, "solution_error", "the function's result is not plain data", usage)
        passed = apps_result_matches(actual, case[2])
        return {"id": case[0], "passed": passed, "input": shown(case[1]), "expected": shown(case[2]),
                "actual": shown(reply["value"]), "error_type": None if passed else "wrong_answer", "error": None,
                "cpu_s": round(usage.cpu_s, 4)}

    budget = Budget(request.limits)
    hello = {"code": request.submission, "names": [tests["fn_name"]], "literal": True, "prelude": PRELUDE,
             "solution_class": True}
    results = run_calls(processes, request.limits, budget, ("function", workspace.scratch, "/"), hello, prepared,
                        lambda case: {"args": encode(case[1])}, judge_reply, fail, on_in_play, fail_fast,
                        PRELUDE_MODULES)
    return results, len(prepared), budget.usage.cpu_s


def _assert(request, tests: dict, processes: Processes, workspace: Workspace, on_in_play: Callable[[], None],
            fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    limits: Limits = request.limits
    budget = Budget(limits)
    cases: list[str] = tests["cases"]
    results: list[dict[str, Any]] = []
    hello = {"code": request.submission, "names": tests["names"], "literal": True}
    session = _AssertSession(processes, limits, budget, workspace, hello, on_in_play)
    try:
        while len(results) < len(cases) and not (fail_fast and results and not results[-1]["passed"]):
            more = session.run(tests, len(results), fail_fast)
            if not more:
                raise RowTestsBroken(f"the row's tests ended after {len(results)} of {len(cases)} cases")
            results.extend(more)
    finally:
        session.close()
    return results, len(cases), budget.usage.cpu_s


class _AssertSession:
    """The trusted test process and the submission's worker for one row, with the calls relayed between them."""

    def __init__(self, processes: Processes, limits: Limits, budget: Budget, workspace: Workspace, hello: dict,
                 on_in_play: Callable[[], None]):
        self.processes, self.limits, self.budget, self.workspace = processes, limits, budget, workspace
        self.hello = hello
        self.on_in_play = on_in_play
        self.in_play = False
        self.worker: Worker | None = None
        self.load_fault: Fault | None = None

    def _result(self, index: int, passed: bool, error_type: str | None, error: str | None) -> dict[str, Any]:
        return {"id": str(index), "passed": passed, "input": None, "expected": None, "actual": None,
                "error_type": error_type, "error": error, "cpu_s": 0.0}

    def _wait(self, tester: Worker, message: dict | None) -> Ending:
        outcome = tester.call(message, self.limits, max(0.0, min(self.limits.case_cpu_s, self.budget.cpu_left())))
        self.budget.spend(outcome.usage)
        return outcome

    def _forward(self, call: dict) -> Reply | Fault:
        """One call of the tests, made on the submission's worker (started, and loaded, on the first call). A
        submission that cannot load fails every later call the same way without being loaded again."""
        if self.load_fault is not None:
            return self.load_fault
        cpu_limit = max(0.0, min(self.limits.case_cpu_s, self.budget.cpu_left()))
        if self.worker is None:
            if not self.in_play:
                self.on_in_play()
                self.in_play = True
            self.worker = Worker(self.processes, self.limits, "function", self.workspace.scratch)
            loaded = self.worker.call(self.hello, self.limits, cpu_limit)
            self.budget.spend(loaded.usage)
            ready = reply_of(loaded, "loading the submission", None, self.limits)
            if isinstance(ready, Fault):
                self.load_fault = ready
                return ready
        call_id = os.urandom(8).hex()
        outcome = self.worker.call({"id": call_id, "name": call.get("name"), "args": call.get("args"),
                                    "kwargs": call.get("kwargs")}, self.limits, cpu_limit)
        self.budget.spend(outcome.usage)
        return reply_of(outcome, "running a call of the tests", call_id, self.limits)

    def run(self, tests: dict, start: int, fail_fast: bool) -> list[dict[str, Any]]:
        """Cases from ``start`` on, until one fails (with ``fail_fast``), the worker fails (the case in progress
        fails and both processes go), or the tests are done."""
        results: list[dict[str, Any]] = []
        index = start
        tester = Worker(self.processes, self.limits, "tests", "-", module="row_tests", uid=self.processes.applier_uid)
        try:
            message: dict | None = {"setup": tests["setup"], "names": tests["names"], "cases": tests["cases"], "start": start}
            while True:
                exhausted = self.budget.used_up()
                if exhausted is not None:
                    return results + [self._result(index, False, "solution_timeout", exhausted)]
                outcome = self._wait(tester, message)
                event = _tester_event(outcome, self.limits)
                if isinstance(event, Fault):
                    if not self.in_play:
                        raise RowTestsBroken(f"the row's test code failed before it called the submission: "
                                             f"{event.message}")
                    return results + [self._result(index, False, event.error_type, event.message)]
                kind = event.get("event")
                if kind == "setup_error":
                    raise RowTestsBroken(f"the row's test code does not run: {plain(event.get('error'))}")
                if kind == "done":
                    return results
                if kind == "case" and event.get("index") == index and isinstance(event.get("passed"), bool):
                    passed = event["passed"]
                    results.append(self._result(index, passed, None if passed else "wrong_answer",
                                                None if passed else plain(event.get("error"))))
                    index += 1
                    if fail_fast and not passed:
                        return results
                    message = None
                    continue
                if kind != "call":
                    raise RowTestsBroken(f"the row's test process sent {shown(event)}")
                reply = self._forward(event)
                if isinstance(reply, Fault):
                    self._drop_worker()
                    return results + [self._result(index, False, reply.error_type, reply.message)]
                message = {"reply": {"ok": reply["ok"], "value": reply["value"], "raises": reply["raises"],
                                     "error": reply["error"]}}
        finally:
            tester.close()
            self.processes.kill_all()

    def _drop_worker(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None
        self.processes.kill_all()

    def close(self) -> None:
        self._drop_worker()


def _tester_event(outcome: Ending, limits: Limits) -> dict | Fault:
    """The trusted test process's next message, or why there is none (a Fault charged to the submission once
    its values are in play: they are what the tests ran on)."""
    if outcome.kind != "line":
        error_type, message = failure(outcome, "running the row's tests on the submission's results", limits)
        return Fault(error_type, message.replace("the submission process", "the tests"))
    try:
        event = wire.loads(outcome.line)
    except ValueError:
        return Fault("solution_error", "the tests' process wrote an unreadable line")
    return event if isinstance(event, dict) else Fault("solution_error", "the tests' process wrote no object")
