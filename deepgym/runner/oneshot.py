"""One request in, events out: the whole life of a one-shot runner (``python3 -m deepgym_runner``), and of each
child of warm mode's server (:mod:`serve`). The image is checked, privileges dropped, the request's kind judged
under a heartbeat, and the results scored into the report.

A report is either ``{"outcome": "scored", "score", "passed", "error_type", "details", "cases", "cases_total",
"timings"}`` or ``{"outcome": "no_verdict", "error_type", "reason"}``. The host validates it again
(:func:`deepgym.verdict.classify`); the runner never decides anything the host has not agreed to.

Scoring is an environment setting. ``all_or_nothing`` (the default) gives 1.0 only when every hidden case
passes and stops at the first failure, so wrong answers cost little time; ``partial`` gives the fraction of
cases passed and runs them all. Partial credit is denser but rewards hard-coding the prompt's examples.
"""

from __future__ import annotations

import _thread  # threading's C module: threading.py imports functools and collections, milliseconds per runner
import os
import sys
import time

from .confine.container import Container
from .confine.processes import Processes
from .confine.usage import BrokenTests, HostOverloaded, RunnerStalled
from .confine.workspace import Workspace
from .protocol import DIFF_KINDS, DONE, HEARTBEAT, HEARTBEAT_S, IN_PLAY, REPORT, REQUIRED_FILES, SCORINGS, STARTED, Request, event_line

TYPE_CHECKING = False  # typing is not imported at start-up: its milliseconds are paid per sample
if TYPE_CHECKING:
    from typing import Any, Callable

    from .confine.forked import WorkerConnection
    from .confine.local import Local

    Emit = Callable[[str, dict[str, Any] | None], None]

# Each kind's module, whose ``judge(request, env_dir, processes, workspace, on_in_play, fail_fast)`` returns (case
# results, number of cases, submission CPU seconds). Imported for the kind at hand only: a function task's
# runner never pays for the program, patch and row judges' imports.
JUDGES = {"function": "kinds.function", "program": "kinds.program", "patch": "kinds.patch", "row": "kinds.rows",
          "swe": "kinds.swe"}


def judge_of(kind: str) -> Any:
    """The module that judges ``kind`` (one of JUDGES), imported on first use; by ``__import__``, since
    importlib's own imports (warnings, and functools through threading) cost a fresh runner CPU per sample."""
    return __import__(JUDGES[kind], globals(), fromlist=("judge",), level=1)


def environment_problem(env_dir: str, kind: str, confinement: Container | Local) -> str | None:
    """Why this image cannot judge fairly, or None. Shipped self-check: a misbuilt image (hidden tests the
    submission could read, a runner that is not root) gives no verdict, never a score."""
    if not os.path.isdir(env_dir):
        return f"the hidden tests directory {env_dir} does not exist"
    for required in REQUIRED_FILES.get(kind, ()):
        if not os.path.exists(os.path.join(env_dir, required)):
            return f"the hidden tests directory {env_dir} has no {required} (needed by {kind} tasks)"
    return confinement.image_problem(env_dir)


def judge_request(raw: bytes, env_dir: str, scratch_root: str, confinement: Container | Local,
                  workers: WorkerConnection | None = None) -> int:
    """Judge the request ``raw`` and write its events on stdout. Returns the exit status. ``confinement``:
    :class:`Container`, or the host's local mode (:class:`local.Local`); ``workers``: the connection to a
    worker zygote started before ``raw`` was read (:class:`forked.Workers`), which then forks the workers."""
    try:
        request = Request.from_json(raw)
    except Exception as exc:  # noqa: BLE001 - anything unreadable is the host's problem, reported on stderr
        print(f"deepgym_runner: unreadable request: {exc}", file=sys.stderr)
        return 2

    writing = _thread.allocate_lock()  # the heartbeat thread writes events too: one whole line at a time

    def emit(event: str, payload: dict | None = None) -> None:
        with writing:
            sys.stdout.write(event_line(request.nonce, event, payload))
            sys.stdout.flush()

    heartbeat = Heartbeat(emit)
    try:
        problem = environment_problem(env_dir, request.kind, confinement) or confinement.drop_privileges()
        if problem is None:
            problem = request.problem(confinement.runner_uid(), scratch_root)
        if problem is not None:
            report = no_verdict("verifier_error", problem)
        else:
            emit(STARTED)
            report = run(request, env_dir, confinement, scratch_root, emit, heartbeat, workers)
    except Exception:  # noqa: BLE001 - the runner's own failure is never the submission's
        import traceback

        report = no_verdict("verifier_error", "the runner failed:\n" + traceback.format_exc(limit=8))
    emit(REPORT, {"report": report})
    emit(DONE, heartbeat.facts())
    if workers is not None:
        workers.settle()  # the sample's last worker, killed, reaped by the zygote before this sample ends
    return 0


def no_verdict(error_type: str, reason: str) -> dict[str, Any]:
    return {"outcome": "no_verdict", "error_type": error_type, "reason": reason[:4000]}


class Heartbeat:
    """Emits a heartbeat event every HEARTBEAT_S from its own thread while the runner judges.

    The main thread may hang (hidden tests that loop, a bug of ours) or be starved (by the submission or by
    the host); this thread still reports whose CPU time grows, so that after a missed host deadline the host
    can tell those apart instead of guessing. ``emit`` must be safe to call from two threads. Made when the
    runner starts; it beats from :meth:`watch` on, and :meth:`facts` also gives the ``done`` event's payload."""

    def __init__(self, emit: Emit, interval_s: float = HEARTBEAT_S):
        self._processes: Processes | None = None
        self._emit = emit
        self._interval_s = interval_s
        self._started = time.monotonic()
        # Held while the runner judges: the thread beats until it can take it. ``_ended`` is held by the thread
        # while it runs, so that taking it joins the thread.
        self._stop = _thread.allocate_lock()
        self._ended = _thread.allocate_lock()

    def facts(self) -> dict[str, Any]:
        """The runner's facts now (see :mod:`protocol`): a heartbeat's payload, and the ``done`` event's."""
        submission = {"submission_cpu_s": 0.0, "oom_kills": None, "cpu_stall_s": None} if self._processes is None \
            else self._processes.facts()
        return {"wall_s": round(time.monotonic() - self._started, 3), "runner_cpu_s": round(time.process_time(), 3),
                **submission}

    def watch(self, processes: Processes) -> Heartbeat:
        """Measure ``processes``; use as a context manager that beats while it is open."""
        self._processes = processes
        return self

    def __enter__(self) -> Heartbeat:
        self._stop.acquire()
        self._ended.acquire()
        _thread.start_new_thread(self._beat, ())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.release()
        if self._ended.acquire(timeout=5.0):
            self._ended.release()

    def _beat(self) -> None:
        try:
            while True:
                self._emit(HEARTBEAT, self.facts())
                if self._stop.acquire(timeout=self._interval_s):
                    self._stop.release()
                    return
        finally:
            self._ended.release()


def run(request: Request, env_dir: str, confinement: Container | Local, scratch_root: str, emit: Emit,
        heartbeat: Heartbeat, workers: WorkerConnection | None = None) -> dict[str, Any]:
    """Judge one submission and return the report, with ``heartbeat`` beating while it judges. The
    submission runs as ``request.uid`` in its own scratch folder under ``scratch_root``; its function workers
    are forked by the worker zygote behind ``workers`` when given."""
    if request.kind not in JUDGES:
        return no_verdict("verifier_error", f"this runner cannot judge kind {request.kind!r}; known: {sorted(JUDGES)}")
    if request.scoring not in SCORINGS:
        return no_verdict("verifier_error", f"unknown scoring {request.scoring!r}; known: {list(SCORINGS)}")
    processes = Processes(confinement, request.uid, request.applier, workers,
                          applier_runs=request.applier in request.uids)
    processes.kill_all()  # the uids are this sample's: nothing left of an earlier one may watch it
    workspace = Workspace.create(processes, request.scratch, scratch_root, applier=request.kind in DIFF_KINDS)
    if isinstance(workspace, str):
        return no_verdict("verifier_error", f"the request's scratch directory: {workspace}")
    started = time.monotonic()
    with heartbeat.watch(processes):  # until the processes are cleared: a kill that hangs is the runner's too
        try:
            kind = judge_of(request.kind)
            cases, total, cpu_s = kind.judge(request, env_dir, processes, workspace, lambda: emit(IN_PLAY, None),
                                             fail_fast=request.scoring == "all_or_nothing")
        except HostOverloaded as exc:
            return no_verdict("host_overloaded", str(exc))
        except RunnerStalled as exc:
            return no_verdict("verifier_timeout", str(exc))
        except BrokenTests as exc:
            return no_verdict("verifier_error", str(exc))
        finally:
            processes.kill_all()
            workspace.remove(processes)
    if total == 0:
        return no_verdict("verifier_error", "the hidden tests define no cases")
    timings = {"runner_s": round(time.monotonic() - started, 4), "submission_cpu_s": round(cpu_s, 4)}
    return score(cases, total, request.scoring, timings)


def score(cases: list[dict[str, Any]], total: int, scoring: str, timings: dict[str, float]) -> dict[str, Any]:
    """The scored report for case results (``cases`` may stop short of ``total`` after a failure)."""
    passed = sum(1 for case in cases if case["passed"])
    all_passed = passed == total
    first_failure = next((case for case in cases if not case["passed"]), None)
    details = f"{passed}/{total} cases passed"
    if first_failure is not None:
        why = first_failure["error"] or (f"expected {first_failure['expected']}, got {first_failure['actual']}")
        details += f"; first failure: case {first_failure['id']} ({first_failure['error_type']}): {why}"
    return {
        "outcome": "scored",
        "score": 1.0 if all_passed else (passed / total if scoring == "partial" else 0.0),
        "passed": all_passed,
        "error_type": None if first_failure is None else first_failure["error_type"],
        "details": details,
        "cases": cases,
        "cases_total": total,
        "timings": timings,
    }
