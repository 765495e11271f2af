"""The verdict contract: what a judged sample is, what "no verdict" is, and the one rule between them.

Three outcomes exist. A *scored* sample has a :class:`Verdict` with a score in [0, 1]; a score of 0 may carry
an ``error_type`` saying what the submission did wrong (``solution_timeout`` among them). *No verdict* is a
:class:`NoVerdictError`: the infrastructure failed and the sample must not be trained on, never as a 0.

Every runtime reports what it saw as :class:`RunFacts`; :func:`classify` alone turns that into an
outcome, from the runner's own facts (its events on the nonce channel: ``in_play``, heartbeats with its CPU,
the submission's CPU and the OOM kills it counted, the report and a final ``done``) and from three things
any provider can tell: whether it failed, whether the host's deadline fired, and the runner's exit status if
it knows it (None when it does not: killed, lost, removed). No provider's conventions (Docker's OOMKilled,
exit 137/143) enter it. The rows of its table, in order:

====  ===========================================================  =============================
row   observation                                                  outcome
====  ===========================================================  =============================
1     the runtime failed (daemon, image, start, sandbox vanished)   no verdict, the runtime's type
2     a runner line with our nonce is not valid JSON, or a          no verdict, verifier_error
      heartbeat or ``done`` without its facts
3     more than one report, or more than one ``done``              no verdict, verifier_error
4     report says no verdict with a known no-verdict type          no verdict, that type
5     report is not a well-formed scored report                    no verdict, verifier_error
6     report's score is not a finite number in [0, 1]              no verdict, invalid_score
7     well-formed scored report                                    scored, as reported
8     no report, but ``done``: the runner ended on its own          no verdict, verifier_error
9a    no report, host deadline hit, submission in play, no         no verdict, sandbox_lost
      heartbeat after the runner's budget (it fell silent)
9b    ... the runner's own CPU grew by 1/3 of a CPU or more         no verdict, verifier_timeout
      over its last heartbeats (it hung on its own)
9c    ... the runner's did not, the submission's did (the           scored 0, solution_timeout
      submission starved its own runner)
9d    ... neither grew by 1/3 of a CPU (the host starved the        no verdict, host_overloaded
      sandbox)
10    no report, host deadline hit before the submission ran       no verdict, verifier_timeout
11    no report, exit status unknown, the runner's heartbeats      scored 0, solution_oom
      counted an OOM kill in its sandbox after ``in_play``
12    no report, an OOM kill counted, no submission in play        no verdict, verifier_error
13    no report, no ``done``, exit status unknown                  no verdict, sandbox_lost
14    no report, exit status known                                 no verdict, verifier_error
====  ===========================================================  =============================

The runner enforces every limit itself and keeps its own schedule inside its budget
(:attr:`Limits.runner_budget_s`), well before the host's deadline, so a missed deadline means the runner
was kept from reporting. Row 9 asks by what, from its heartbeats (every second, from a thread of its own),
which carry its own CPU time and the submission's. Between the last heartbeat within the budget and the last
one after it, a runner that got a third of a CPU was not starved and hung on its own (hidden tests that
loop, a bug of ours): no verdict. Otherwise a submission that got a third of a CPU starved its own runner (a
fork bomb of busy processes, say), scored 0; a sandbox where neither did was starved by the host, and a
runner with no heartbeat after its budget cannot be measured at all: both no verdict. Nothing is ever
scored on a guess. A host too busy to judge fairly while the runner still runs is detected by the runner
itself (``host_overloaded``, row 4).

Row 11 is the whole sandbox running out of memory: the runner keeps the submission's processes first in
line for the OOM killer and reports their deaths itself, so it dies without a report only when the kernel
killed it too, and its heartbeats already counted an OOM kill with the submission in play (the counts come
from the runner's cgroup, and only while nothing but the runner and the request's uids live in it). An OOM
kill that took the runner before any heartbeat counted one reads as a lost sandbox (row 13): no verdict,
never a guessed 0. Rows 13-14 cannot be the submission's doing: it runs as another user and cannot signal
the runner, so a runner gone without a report is ours, and without ``done`` or an exit status it is a
sandbox that vanished.

The error-type vocabulary lives in :data:`deepgym.runner.protocol.ERROR_TYPES`, shared with the runner.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .outcome import BatchResult, CaseResult, NoVerdictError, Outcome, Verdict
from .runner.protocol import (DONE, ERROR_TYPES, HEARTBEAT, HEARTBEAT_FIELDS, IN_PLAY, OPTIONAL_FACTS, REPORT,
                              Limits, Request, finite_score, is_scored, parse_events)

__all__ = ["ERROR_TYPES", "BatchResult", "CaseResult", "EpisodeFacts", "NoVerdictError", "Outcome", "RunFacts",
           "Verdict", "classify", "classify_episode", "is_scored", "zero"]


@dataclass(frozen=True)
class RunFacts:
    """What a runtime saw while running the runner for one request. Runtimes fill it; only
    :func:`classify` interprets it.

    ``exit_code`` is the runner's own exit status, or None when the runtime does not know one: the runner or
    its sandbox was killed (by a signal, the OOM killer, the host's deadline), removed or lost. The judging
    path translates its provider's conventions (128 + signal) into None (:func:`deepgym.judging.observe`).
    ``node`` is the machine the provider placed the sample on, when it chose one (Ray)."""

    runtime: str
    infra_error: str | None = None
    infra_reason: str = ""
    exit_code: int | None = None
    deadline_hit: bool = False
    stdout: bytes = b""
    stderr_tail: str = ""
    elapsed_s: float = 0.0
    image_id: str | None = None
    image_status: str | None = None
    node: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    """The host's half of the verdict's provenance (:func:`deepgym.judging.provenance`)."""
    admission_wait_s: float | None = None
    """How long the sample waited for its admission slot before any of its clocks started (None: judged
    without admission)."""


def _host_timings(observation: RunFacts) -> dict[str, float]:
    """The timings the host measured itself: they overwrite a report's keys of the same names, since the runner
    cannot know them. ``total_s`` is the sandbox's whole run; ``admission_wait_s`` the queueing before it."""
    timings = {"total_s": round(observation.elapsed_s, 4)}
    if observation.admission_wait_s is not None:
        timings["admission_wait_s"] = round(observation.admission_wait_s, 3)
    return timings


def provenance(request: Request, observation: RunFacts) -> dict[str, Any]:
    """A verdict's whole provenance: the host's half and what the request adds (variant, limits, the
    submission's sha256 and, for a dataset row, its tests')."""
    tests = None if request.tests is None else _sha256(json.dumps(request.tests, sort_keys=True))
    return {**observation.provenance, "variant": request.variant, "limits": request.limits.to_dict(),
            "submission_sha256": _sha256(request.submission), "tests_sha256": tests}


def _sha256(text: str) -> str:
    """The sha256 of ``text``'s code points as UTF-8, lone surrogates included (a response may carry them, and
    its hash must still say exactly which response it was)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def classify(request: Request, observation: RunFacts, environment: str) -> Verdict | NoVerdictError:
    """The one rule from an observation to an outcome (see the module's table). Pure: no I/O."""
    obs = observation

    def no_verdict(error_type: str, reason: str) -> NoVerdictError:
        return NoVerdictError(error_type, reason, environment=environment, runtime=obs.runtime,
                              variant=request.variant)

    def zero_of(error_type: str, details: str) -> Verdict:
        return zero(error_type, details, environment=environment, runtime=obs.runtime, variant=request.variant,
                    timings=_host_timings(obs), image_id=obs.image_id,
                    image_status=obs.image_status, node=obs.node, provenance=provenance(request, obs))

    if obs.infra_error is not None:  # row 1
        if obs.infra_error not in ERROR_TYPES or is_scored(obs.infra_error):
            return no_verdict("verifier_error", f"runtime reported unknown failure {obs.infra_error!r}: "
                                                f"{obs.infra_reason}")
        return no_verdict(obs.infra_error, obs.infra_reason)

    events = parse_events(obs.stdout, request.nonce)
    if any(event.get("event") == "malformed" for event in events):  # row 2
        return no_verdict("verifier_error", "the runner wrote a line that is not valid JSON")
    facts = [event for event in events if event.get("event") in (HEARTBEAT, DONE)]
    if not all(_has_facts(event) for event in facts):  # row 2
        return no_verdict("verifier_error", f"the runner wrote a {HEARTBEAT} or {DONE} event without its facts")
    heartbeats = [event for event in facts if event["event"] == HEARTBEAT]
    reports = [event.get("report") for event in events if event.get("event") == REPORT]
    done = len(facts) - len(heartbeats)
    if len(reports) > 1 or done > 1:  # row 3
        return no_verdict("verifier_error", f"the runner wrote {len(reports)} reports and {done} done events")
    if reports:
        return _from_report(reports[0], request, obs, environment, no_verdict)

    suffix = f"{_exit(obs)}{_stderr(obs)}"
    if done:  # row 8
        return no_verdict("verifier_error", "the runner ended on its own without a report" + suffix)
    in_play = next((index for index, event in enumerate(events) if event.get("event") == IN_PLAY), None)
    if obs.deadline_hit:
        if in_play is not None:  # row 9
            error_type, why = _missed_deadline(request.limits, heartbeats)
            return zero_of(error_type, why) if is_scored(error_type) else no_verdict(error_type, why)
        return no_verdict("verifier_timeout", "the runner did not report before the host's deadline, "
                                              "and no submission code had run")  # row 10
    before, after = _oom_kills(events, in_play)
    if after > before and obs.exit_code is None:  # row 11
        return zero_of("solution_oom", f"the sandbox ran out of memory while the submission ran: the runner counted "
                                    f"{after - before} OOM kill(s) and then ended without a report")
    if before:  # row 12
        return no_verdict("verifier_error", f"the runner counted {before} OOM kill(s) before any submission code ran "
                                            f"and ended without a report" + suffix)
    if obs.exit_code is None:  # row 13
        return no_verdict("sandbox_lost", "the runner's sandbox vanished: its events stop without a report or a "
                                          "final done, and the runtime knows no exit status" + _stderr(obs))
    return no_verdict("verifier_error", "the runner ended without a report" + suffix)  # row 14


def _has_facts(event: dict[str, Any]) -> bool:
    """Whether a heartbeat or done event carries every fact: numbers, and numbers or null for the optional."""
    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    return all(number(event.get(name)) for name in HEARTBEAT_FIELDS) and \
        all(name in event and (event[name] is None or number(event[name])) for name in OPTIONAL_FACTS)


def _oom_kills(events: list[dict[str, Any]], in_play: int | None) -> tuple[int, int]:
    """(OOM kills the runner counted before ``in_play``, the most it counted at all) from its heartbeats;
    counts are cumulative, null where the runner could not count."""
    before = after = 0
    for index, event in enumerate(events):
        count = event.get("oom_kills") if event.get("event") == HEARTBEAT else None
        if count is None:
            continue
        if in_play is None or index < in_play:
            before = max(before, count)
        after = max(after, count)
    return before, after


def _exit(obs: RunFacts) -> str:
    return "" if obs.exit_code is None else f" (exit status {obs.exit_code})"


def _missed_deadline(limits: Limits, heartbeats: list[dict[str, Any]]) -> tuple[str, str]:
    """(error_type, why) for a runner that missed the host's deadline with the submission in play (rows
    9a-9d), from the heartbeats between the last one within the runner's budget and the last one after it:
    the stretch in which the runner should already have reported."""
    budget = limits.runner_budget_s
    late = [beat for beat in heartbeats if beat["wall_s"] > budget]
    if not late:  # row 9a
        heard = f"its last heartbeat came {heartbeats[-1]['wall_s']:.1f}s in" if heartbeats else "it sent no heartbeat"
        return "sandbox_lost", (f"the runner missed the host's deadline and fell silent ({heard}, its budget is "
                                f"{budget:g}s): nothing tells whose fault it was")
    first = [beat for beat in heartbeats if beat["wall_s"] <= budget][-1:] or late[:1]
    start, end = first[0], late[-1]
    span = end["wall_s"] - start["wall_s"]
    runner = (end["runner_cpu_s"] - start["runner_cpu_s"]) / span if span > 0 else 0.0
    submission = (end["submission_cpu_s"] - start["submission_cpu_s"]) / span if span > 0 else 0.0
    shares = (f"from {start['wall_s']:.1f}s to {end['wall_s']:.1f}s the runner got {runner:.0%} of a CPU and the "
              f"submission {submission:.0%}")
    if runner >= 1 / Limits.WALL_FACTOR:  # row 9b
        return "verifier_timeout", f"the runner hung on its own past the host's deadline: {shares}"
    if submission >= 1 / Limits.WALL_FACTOR:  # row 9c
        return "solution_timeout", f"the submission kept its runner from reporting before the host's deadline: {shares}"
    return "host_overloaded", f"the runner missed the host's deadline while the host starved the sandbox: {shares}"  # row 9d


def _stderr(obs: RunFacts) -> str:
    tail = obs.stderr_tail.strip()
    return f"; runner stderr: {tail[-1000:]}" if tail else ""


def _from_report(report: Any, request: Request, obs: RunFacts, environment: str, no_verdict) -> Verdict | NoVerdictError:
    if not isinstance(report, dict):
        return no_verdict("verifier_error", "the runner's report is not a JSON object")  # row 5
    error_type = report.get("error_type")
    if report.get("outcome") == "no_verdict":
        if error_type in ERROR_TYPES and not is_scored(error_type):  # row 4
            return no_verdict(error_type, str(report.get("reason", "")))
        return no_verdict("verifier_error", f"the runner reported no verdict with unknown type {error_type!r}")
    if report.get("outcome") != "scored":  # row 5
        return no_verdict("verifier_error", f"the runner's report has unknown outcome {report.get('outcome')!r}")
    score = finite_score(report.get("score"))
    if score is None:  # row 6
        return no_verdict("invalid_score", f"the runner reported score {report.get('score')!r}")
    passed = report.get("passed")
    problem = _inconsistency(score, passed, error_type)
    try:
        cases = tuple(CaseResult(**case) for case in report.get("cases", []))
        cases_total = int(report.get("cases_total", len(cases)))
        timings = {str(k): float(v) for k, v in dict(report.get("timings", {})).items()}
    except (TypeError, ValueError) as exc:
        problem = problem or f"malformed cases or timings: {exc}"
    if problem is not None:  # row 5
        return no_verdict("verifier_error", f"the runner's report is inconsistent: {problem}")
    timings.update(_host_timings(obs))
    return Verdict(score=score, passed=passed, error_type=error_type, details=str(report.get("details", "")),  # row 7
                   environment=environment, runtime=obs.runtime, variant=request.variant, cases=cases,
                   cases_total=cases_total, timings=timings, image_id=obs.image_id, image_status=obs.image_status,
                   node=obs.node, provenance=provenance(request, obs))


def _inconsistency(score: float, passed: Any, error_type: Any) -> str | None:
    """What makes a scored report's fields disagree, or None: the checks every scored outcome passes."""
    if not isinstance(passed, bool):
        return f"passed is {passed!r}, not a boolean"
    if error_type is not None and (error_type not in ERROR_TYPES or not is_scored(error_type)):
        return f"error_type {error_type!r} is not a scored error type"
    if passed and (score != 1.0 or error_type is not None):
        return f"passed with score {score} and error_type {error_type!r}"
    if not passed and error_type is None:
        return "not passed, but no error_type says why"
    return None


def zero(error_type: str, details: str, *, environment: str, runtime: str, variant: int = 0,
         timings: dict[str, float] | None = None, image_id: str | None = None,
         image_status: str | None = None, node: str | None = None,
         provenance: dict[str, Any] | None = None) -> Verdict:
    """A scored 0 that a rule decided without a report: a response with nothing to run, an agent that never
    acted, a sandbox the agent broke. ``error_type`` must be a scored type, as every report's is."""
    if error_type not in ERROR_TYPES or not is_scored(error_type):
        raise ValueError(f"{error_type!r} is not a scored error type")
    return Verdict(score=0.0, passed=False, error_type=error_type, details=details, environment=environment,
                   runtime=runtime, variant=variant, timings=dict(timings or {}), image_id=image_id,
                   image_status=image_status, node=node, provenance=dict(provenance or {}))


@dataclass(frozen=True)
class EpisodeFacts:
    """What an episode's final verification left (a shell's session runner, a desktop's supervisor): its report
    in the episode runners' format (``score``, ``passed``, ``error_type``, ``details``, ``cases``; no ``score``
    for no verdict), or None when none came, and why. Episodes fill it; only :func:`classify_episode`
    interprets it."""

    environment: str
    runtime: str
    variant: int
    report: Any
    deadline_hit: bool = False
    """The host's deadline fired before a report came."""
    in_play: bool = False
    """The verifier had started reading the agent's state (the runner said ``in_play``)."""
    said: str = ""
    """What the episode's side said instead of a report (a desktop supervisor's error)."""
    timings: dict[str, float] = field(default_factory=dict)
    image_id: str | None = None
    image_status: str | None = None
    node: str | None = None
    """The machine the episode's sandbox lived on, when the provider chose one (Ray's node id)."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """The episode's provenance: :func:`deepgym.judging.provenance` and its variant (its actions are the
    agent's, not one submission, so no submission hash)."""


def classify_episode(facts: EpisodeFacts) -> Outcome:
    """The one rule from an episode's final verification to its outcome, with :func:`classify`'s checks of a
    report (a finite score in [0, 1], a boolean ``passed``, a scored ``error_type`` that agrees with both).

    No report: before the verifier read anything, a missed deadline is ``verifier_timeout``; after it, the
    sandbox went with the agent's state in it (``sandbox_lost``); a runner that ended without one failed
    (``verifier_error``). A report without a score is no verdict of its own type."""
    where = {"environment": facts.environment, "runtime": facts.runtime, "variant": facts.variant}

    def no_verdict(error_type: str, reason: str) -> NoVerdictError:
        return NoVerdictError(error_type, reason, **where)

    report = facts.report
    if report is None:
        error_type = ("sandbox_lost" if facts.in_play else "verifier_timeout") if facts.deadline_hit else \
            "verifier_error"
        return no_verdict(error_type, "the final verification gave no report" + (f": {facts.said}" if facts.said else ""))
    if not isinstance(report, dict):
        return no_verdict("verifier_error", "the final verification's report is not a JSON object")
    error_type = report.get("error_type")
    if "score" not in report:
        if error_type is None or (error_type in ERROR_TYPES and not is_scored(error_type)):
            return no_verdict(error_type or "verifier_error", str(report.get("details", "")))
        return no_verdict("verifier_error", f"the final verification reported no score with type {error_type!r}")
    score = finite_score(report["score"])
    if score is None:
        return no_verdict("invalid_score", f"the final verification reported score {report['score']!r}")
    problem = _inconsistency(score, report.get("passed"), error_type)
    if problem is not None:
        return no_verdict("verifier_error", f"the final verification's report is inconsistent: {problem}")
    cases = tuple(CaseResult(id=str(c.get("id")), passed=bool(c.get("passed")), expected=c.get("expected"),
                             actual=c.get("actual")) for c in report.get("cases", []) if isinstance(c, dict))
    return Verdict(score=score, passed=report["passed"], error_type=error_type, details=str(report.get("details", "")),
                   cases=cases, cases_total=len(cases), timings=dict(facts.timings), image_id=facts.image_id,
                   image_status=facts.image_status, node=facts.node, provenance=dict(facts.provenance), **where)
