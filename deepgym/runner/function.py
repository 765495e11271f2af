"""Judging a function task: call the submission's entry point on every hidden case and compare in the runner.

The hidden tests are a module ``cases.py`` in the environment's directory (root-only inside the image):

- ``cases(variant: int) -> list[dict]``: each case is ``{"id": str, "args": [...], "expected": ...}`` with
  JSON values only. Seeded random cases are generated here and checked against a brute-force oracle.
- optional ``check(args, expected, actual) -> bool`` for tasks with several right answers; it runs in the
  runner and only ever sees plain data.
- optional ``FLOAT_TOLERANCE`` (relative and absolute) for the default comparison.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import selectors
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from .protocol import Limits
from .sandbox import Meter, OutputCapture, Sandbox, Usage

POLL_S = 0.02
MAX_RESPONSE_BYTES = 16 << 20
SUMMARY_CHARS = 200


def summarize(value: Any) -> str:
    """A short, safe rendering of a plain value for case reports."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 3] + "..."


def equal(expected: Any, actual: Any, tolerance: float | None) -> bool:
    """Structural equality of JSON values. Booleans only equal booleans; numbers compare by value, with
    ``tolerance`` (relative and absolute) for floats when given."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if tolerance is not None and (isinstance(expected, float) or isinstance(actual, float)):
            return math.isclose(expected, actual, rel_tol=tolerance, abs_tol=tolerance)
        return expected == actual
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(equal(e, a, tolerance) for e, a in zip(expected, actual))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(equal(expected[k], actual[k], tolerance) for k in expected)
    return type(expected) is type(actual) and expected == actual


@dataclass
class Outcome:
    """How one exchange with the worker ended."""

    kind: str  # "reply", "died", "cpu", "wall", "starved", "output"
    reply: dict[str, Any] | None = None
    usage: Usage | None = None
    detail: str = ""


class Worker:
    """One untrusted worker process and the pipes to it."""

    def __init__(self, sandbox: Sandbox, limits: Limits, scratch_root: str):
        req_r, self._req_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        argv = [sys.executable, "-I", "-B", "-m", f"{__package__}.worker", str(req_r), str(resp_w),
                scratch_root, str(limits.memory_mb), str(limits.nofile), str(math.ceil(limits.total_cpu_s) + 1)]
        try:
            self.proc = sandbox.spawn(argv, pass_fds=(req_r, resp_w))
        finally:
            os.close(req_r)
            os.close(resp_w)
        self.selector = selectors.DefaultSelector()
        self.output = OutputCapture(self.proc, self.selector)
        os.set_blocking(self._resp_r, False)
        self.selector.register(self._resp_r, selectors.EVENT_READ, ("response", None))
        self._buffer = bytearray()
        self._sandbox = sandbox

    def send(self, message: dict[str, Any]) -> None:
        """Write one request line. A worker that already died shows up when waiting for the reply."""
        try:
            os.write(self._req_w, json.dumps(message).encode() + b"\n")
        except BrokenPipeError:
            pass

    def wait_reply(self, cpu_limit_s: float, wall_limit_s: float, output_limit: int) -> Outcome:
        """Wait for one reply line while enforcing the CPU, wall-clock and output limits."""
        meter = Meter(self._sandbox)
        while True:
            for key, _ in self.selector.select(POLL_S):
                role, name = key.data
                if role == "output":
                    self.output.read(key.fileobj, name)
                    continue
                try:
                    chunk = os.read(self._resp_r, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    self.selector.unregister(self._resp_r)
                    return Outcome("died", usage=meter.tick(), detail=self._exit_detail())
                self._buffer.extend(chunk)
                if b"\n" in self._buffer:
                    line, _, rest = bytes(self._buffer).partition(b"\n")
                    self._buffer = bytearray(rest)
                    return Outcome("reply", reply=_decode(line), usage=meter.tick())
                if len(self._buffer) > MAX_RESPONSE_BYTES:
                    return Outcome("output", usage=meter.tick(), detail="return value larger than 16 MiB")
            usage = meter.tick()
            if self.output.total > output_limit:
                return Outcome("output", usage=usage, detail=f"wrote {self.output.total} bytes of output")
            if usage.oom_kills:
                return Outcome("died", usage=usage, detail="killed by the out-of-memory killer")
            if usage.cpu_s > cpu_limit_s:
                return Outcome("cpu", usage=usage)
            if usage.wall_s > wall_limit_s:
                return Outcome("starved" if usage.starved() else "wall", usage=usage)

    def _exit_detail(self) -> str:
        try:
            code = self.proc.wait(timeout=1.0)
        except Exception:  # noqa: BLE001 - still running: it closed its pipe on purpose
            return "closed its reply pipe"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exited with status {code}"

    def close(self) -> None:
        self.selector.close()
        for fd in (self._req_w, self._resp_r):
            try:
                os.close(fd)
            except OSError:
                pass


def _decode(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def load_cases_module(env_dir: str) -> ModuleType:
    """Import the hidden ``cases.py`` (trusted code) from the environment directory."""
    import importlib.util

    path = os.path.join(env_dir, "cases.py")
    spec = importlib.util.spec_from_file_location("deepgym_hidden_cases", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class HostOverloaded(Exception):
    """A wall-clock limit fired while the host starved the submission of CPU: nobody can be judged."""


def judge(request, env_dir: str, sandbox: Sandbox, scratch_root: str, on_in_play: Callable[[], None],
          fail_fast: bool) -> tuple[list[dict[str, Any]], int, float]:
    """Run every hidden case. Returns (case results, number of cases, submission CPU seconds).

    Raises HostOverloaded when the verdict would reflect the host's load rather than the submission."""
    hidden = load_cases_module(env_dir)
    cases = hidden.cases(request.variant)
    check: Callable[[Any, Any, Any], bool] | None = getattr(hidden, "check", None)
    tolerance = getattr(hidden, "FLOAT_TOLERANCE", None)
    limits: Limits = request.limits
    output_limit = limits.output_kb * 1024
    results: list[dict[str, Any]] = []
    cpu_total = 0.0
    worker: Worker | None = None
    in_play = False

    def fail(case: dict, error_type: str, error: str, usage: Usage | None = None) -> dict[str, Any]:
        return {"id": case["id"], "passed": False, "input": summarize(case["args"]),
                "expected": summarize(case["expected"]), "actual": None, "error_type": error_type,
                "error": error, "cpu_s": round(usage.cpu_s, 4) if usage else 0.0}

    try:
        for index, case in enumerate(cases):
            budget = limits.total_cpu_s - cpu_total
            if budget <= 0:
                results.append(fail(case, "solution_timeout", "not run: the total CPU limit was used up"))
                if fail_fast:
                    break
                continue
            cpu_limit = min(limits.case_cpu_s, budget)
            if worker is None:
                worker = Worker(sandbox, limits, scratch_root)
                if not in_play:
                    on_in_play()
                    in_play = True
                worker.send({"code": request.submission, "entry_point": request.entry_point})
                loaded = worker.wait_reply(cpu_limit, limits.case_wall_s, output_limit)
                cpu_total += loaded.usage.cpu_s if loaded.usage else 0.0
                failure = _failure(loaded, "loading the submission", limits)
                if failure is None and loaded.reply.get("event") != "ready":
                    failure = (loaded.reply.get("error_type", "solution_error"), str(loaded.reply.get("error")))
                if failure is not None:
                    # Loading is deterministic: every remaining case would fail the same way.
                    remaining = [case] if fail_fast else cases[index:]
                    results.extend(fail(c, *failure, loaded.usage) for c in remaining)
                    break
            call_id = secrets.token_hex(8)
            worker.send({"id": call_id, "args": case["args"]})
            outcome = worker.wait_reply(cpu_limit, limits.case_wall_s, output_limit)
            cpu_total += outcome.usage.cpu_s if outcome.usage else 0.0
            failure = _failure(outcome, "running the case", limits)
            if failure is None and outcome.reply.get("id") != call_id:
                failure = ("solution_error", "the worker's reply did not answer this call")
            if failure is not None:
                results.append(fail(case, *failure, outcome.usage))
                worker.close()
                sandbox.kill_all()
                worker = None
            else:
                results.append(_compare(case, outcome, check, tolerance))
            if fail_fast and not results[-1]["passed"]:
                break
    finally:
        if worker is not None:
            worker.close()
    return results, len(cases), cpu_total


def _failure(outcome: Outcome, doing: str, limits: Limits) -> tuple[str, str] | None:
    """(error_type, message) when an exchange did not produce a usable reply."""
    if outcome.kind == "reply" and outcome.reply is not None:
        return None
    if outcome.kind == "reply":
        return "solution_error", f"the worker's reply while {doing} was not a JSON object"
    if outcome.kind == "starved":
        raise HostOverloaded(f"the wall-clock limit of {limits.case_wall_s:g}s fired while {doing}, but the "
                             f"submission, runnable most of the time, got only {outcome.usage.cpu_s:.2f}s of CPU")
    if outcome.kind == "cpu":
        return "solution_timeout", f"used more than {limits.case_cpu_s:g}s of CPU while {doing}"
    if outcome.kind == "wall":
        return "solution_timeout", f"did not finish within {limits.case_wall_s:g}s of wall-clock time while {doing}"
    if outcome.kind == "output":
        return "output_limit_exceeded", f"{outcome.detail} while {doing} (limit {limits.output_kb} KiB)"
    if "out-of-memory" in outcome.detail:
        return "solution_oom", f"the submission was {outcome.detail} while {doing}"
    return "solution_error", f"the submission process {outcome.detail} while {doing}"


def _compare(case: dict, outcome: Outcome, check, tolerance) -> dict[str, Any]:
    reply = outcome.reply
    result = {"id": case["id"], "input": summarize(case["args"]), "expected": summarize(case["expected"]),
              "cpu_s": round(outcome.usage.cpu_s, 4)}
    if not reply.get("ok"):
        return {**result, "passed": False, "actual": None, "error_type": reply.get("error_type", "solution_error"),
                "error": str(reply.get("error"))[:2000]}
    actual = reply.get("value")
    error = None
    try:
        if check is not None:
            passed = bool(check(case["args"], case["expected"], actual))
        else:
            passed = equal(case["expected"], actual, tolerance)
    except Exception as exc:  # noqa: BLE001 - a value the checker cannot handle is a wrong value
        passed, error = False, f"the checker rejected the value: {type(exc).__name__}"
    return {**result, "passed": passed, "actual": summarize(actual),
            "error_type": None if passed else "wrong_answer", "error": error}
