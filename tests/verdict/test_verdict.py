"""The classification table (deepgym/verdict.py), row by row, and the vocabulary it speaks."""

import json

import pytest

from deepgym.runner.protocol import (DONE, ERROR_TYPES, HEARTBEAT, IN_PLAY, REPORT, STARTED, Limits, Request,
                                    event_line, finite_score)
from deepgym.verdict import NoVerdictError, RunFacts, Verdict, classify

REQUEST = Request(nonce="n0nce", kind="function", submission="", entry_point="f", variant=2)
BUDGET = Limits().runner_budget_s


def stdout(*events: tuple[str, dict | None], nonce: str = "n0nce") -> bytes:
    return "".join(event_line(nonce, name, payload) for name, payload in events).encode()


def scored(score=1.0, passed=True, error_type=None, **extra) -> dict:
    return {"outcome": "scored", "score": score, "passed": passed, "error_type": error_type, "details": "d",
            "cases": [], "cases_total": 3, "timings": {"runner_s": 0.1}, **extra}


FACTS = {"wall_s": 1.0, "runner_cpu_s": 0.1, "submission_cpu_s": 0.0, "oom_kills": 0, "cpu_stall_s": None}


def report(body) -> bytes:
    return stdout((STARTED, None), (IN_PLAY, None), (REPORT, {"report": body}), (DONE, FACTS))


def outcome(**fields):
    return classify(REQUEST, RunFacts(runtime="docker", **fields), "coin_change")


def assert_no_verdict(result, error_type):
    assert isinstance(result, NoVerdictError), result
    assert result.error_type == error_type
    assert result.has_verdict is False and result.score is None
    return result


def assert_scored(result, score, error_type):
    assert isinstance(result, Verdict), result
    assert (result.score, result.error_type) == (score, error_type)
    return result


@pytest.mark.parametrize("error_type", ["daemon_unavailable", "image_missing", "sandbox_start_failure", "sandbox_lost"])
def test_row1_runtime_failures_are_no_verdict_even_after_the_submission_ran(error_type):
    result = outcome(infra_error=error_type, infra_reason="why", stdout=stdout((IN_PLAY, None)))
    assert_no_verdict(result, error_type)
    assert "why" in str(result)


def test_row1_a_runtime_cannot_smuggle_a_scored_type_as_an_infra_failure():
    assert_no_verdict(outcome(infra_error="solution_timeout"), "verifier_error")


def test_row2_malformed_marked_line():
    assert_no_verdict(outcome(stdout=b"@@deepgym n0nce {not json\n" + report(scored())), "verifier_error")


@pytest.mark.parametrize("event", [HEARTBEAT, DONE])
@pytest.mark.parametrize("beat", [{}, {**FACTS, "runner_cpu_s": "0.1"}, {**FACTS, "submission_cpu_s": True},
                                  {key: value for key, value in FACTS.items() if key != "oom_kills"},
                                  {**FACTS, "cpu_stall_s": "high"}],
                         ids=["empty", "string", "bool", "no-oom-kills", "stall-not-a-number"])
def test_row2_heartbeat_or_done_without_its_facts(event, beat):
    assert_no_verdict(outcome(stdout=stdout((event, beat)) + report(scored())), "verifier_error")


def test_row2_unknown_facts_are_null():
    unknown = {**FACTS, "oom_kills": None, "cpu_stall_s": None}
    assert_scored(outcome(stdout=stdout((HEARTBEAT, unknown)) + report(scored())), 1.0, None)


def test_row3_two_reports():
    assert_no_verdict(outcome(stdout=report(scored()) + report(scored())), "verifier_error")


def test_row3_two_done_events():
    assert_no_verdict(outcome(stdout=report(scored()) + stdout((DONE, FACTS))), "verifier_error")


@pytest.mark.parametrize("error_type", ["host_overloaded", "verifier_error"])
def test_row4_runner_reports_no_verdict(error_type):
    body = {"outcome": "no_verdict", "error_type": error_type, "reason": "busy"}
    assert_no_verdict(outcome(stdout=report(body)), error_type)


def test_row4_runner_cannot_turn_a_scored_type_into_no_verdict():
    body = {"outcome": "no_verdict", "error_type": "solution_error", "reason": "escape hatch"}
    assert_no_verdict(outcome(stdout=report(body)), "verifier_error")


@pytest.mark.parametrize("body", [
    "not a dict",
    {"outcome": "maybe"},
    scored(passed="yes"),
    scored(score=1.0, passed=True, error_type="wrong_answer"),
    scored(score=0.5, passed=True),
    scored(score=0.0, passed=False, error_type=None),
    scored(score=0.0, passed=False, error_type="daemon_unavailable"),
    scored(score=0.0, passed=False, error_type="made_up"),
    scored(cases=[{"id": "a", "unknown_field": 1}]),
], ids=["not-dict", "unknown-outcome", "passed-not-bool", "passed-with-error", "passed-below-one",
        "failed-without-reason", "failed-with-infra-type", "unknown-type", "malformed-case"])
def test_row5_inconsistent_reports(body):
    assert_no_verdict(outcome(stdout=report(body)), "verifier_error")


@pytest.mark.parametrize("score", [float("nan"), 1.5, -0.1, "1", None, True, float("inf")])
def test_row6_invalid_scores(score):
    body = scored(score=score, passed=False, error_type="wrong_answer")
    text = json.dumps({"event": "report", "report": body})  # NaN/inf as the runner's json would write them
    result = outcome(stdout=b"@@deepgym n0nce " + text.encode() + b"\n")
    assert_no_verdict(result, "invalid_score")


def test_row7_scored_report():
    body = scored(cases=[{"id": "c1", "passed": True, "input": "[1]", "expected": "1", "actual": "1",
                          "error_type": None, "error": None, "cpu_s": 0.01}])
    result = assert_scored(outcome(stdout=report(body), elapsed_s=0.5, image_id="sha256:x"), 1.0, None)
    assert result.passed and result.variant == 2 and result.environment == "coin_change"
    assert result.cases[0].id == "c1" and result.cases_total == 3
    assert result.timings == {"runner_s": 0.1, "total_s": 0.5} and result.image_id == "sha256:x"


def test_the_admission_wait_is_the_hosts_own_timing():
    # Measured by the host before the sandbox ran: kept apart from total_s, on a scored report and on a zero the
    # host decides (row 9c) alike, and a report cannot set it.
    body = scored(timings={"runner_s": 0.1, "admission_wait_s": 99.0, "total_s": 99.0})
    result = assert_scored(outcome(stdout=report(body), elapsed_s=0.5, admission_wait_s=1.23456), 1.0, None)
    assert result.timings == {"runner_s": 0.1, "total_s": 0.5, "admission_wait_s": 1.235}
    starved = missed_deadline((BUDGET - 1, 0.5, 10.0), (BUDGET + 10, 0.6, 20.5), (BUDGET + 20, 0.7, 30.8),
                              elapsed_s=2.0, admission_wait_s=0.5)
    zero = assert_scored(starved, 0.0, "solution_timeout")
    assert zero.timings == {"total_s": 2.0, "admission_wait_s": 0.5}


def test_row7_a_report_stands_without_done_and_whatever_the_exit():
    # The runner was killed right after its report: the report is whole, the exit status says nothing.
    body = stdout((STARTED, None), (IN_PLAY, None), (REPORT, {"report": scored()}))
    for code in (None, 137, 1):
        assert_scored(outcome(stdout=body, exit_code=code), 1.0, None)


def test_row7_partial_credit_and_tolerance():
    assert_scored(outcome(stdout=report(scored(score=0.25, passed=False, error_type="wrong_answer"))), 0.25,
                  "wrong_answer")
    assert_scored(outcome(stdout=report(scored(score=1 + 1e-12))), 1.0, None)


def test_other_nonces_and_unmarked_lines_are_ignored():
    forged = stdout((REPORT, {"report": scored()}), nonce="forged") + b"PASSED\n{\"score\": 1}\n"
    real = report(scored(score=0.0, passed=False, error_type="wrong_answer"))
    assert_scored(outcome(stdout=forged + real), 0.0, "wrong_answer")
    assert_no_verdict(outcome(stdout=forged, exit_code=0), "verifier_error")
    assert_no_verdict(outcome(stdout=forged + stdout((DONE, FACTS), nonce="forged")), "sandbox_lost")


def test_row8_done_without_a_report_is_ours():
    for code in (None, 0):
        assert_no_verdict(outcome(stdout=stdout((STARTED, None), (IN_PLAY, None), (DONE, FACTS)), exit_code=code),
                          "verifier_error")


def beats(*samples: tuple[float, ...]) -> list[tuple[str, dict]]:
    """Heartbeat events from (wall_s, runner_cpu_s, submission_cpu_s[, oom_kills])."""
    return [(HEARTBEAT, {**FACTS, "wall_s": wall, "runner_cpu_s": runner, "submission_cpu_s": submission,
                         "oom_kills": rest[0] if rest else 0})
            for wall, runner, submission, *rest in samples]


def missed_deadline(*samples: tuple[float, float, float], **facts):
    events = stdout((STARTED, None), *beats((0.0, 0.05, 0.0)), (IN_PLAY, None), *beats(*samples))
    return outcome(stdout=events, exit_code=None, deadline_hit=True, **facts)


@pytest.mark.parametrize("samples", [(), ((1.0, 0.1, 0.2), (BUDGET - 5, 0.3, 3.0))], ids=["none", "stopped-early"])
def test_row9a_runner_fell_silent_before_its_budget_ran_out(samples):
    # Without heartbeats past its budget nothing tells who kept the runner from reporting: never a score.
    assert_no_verdict(missed_deadline(*samples), "sandbox_lost")


def test_row9a_no_heartbeat_at_all_is_never_scored():
    assert_no_verdict(outcome(stdout=stdout((IN_PLAY, None)), deadline_hit=True), "sandbox_lost")


def test_row9b_runner_hung_on_its_own():
    # Its own CPU grew by a whole CPU past its budget while the submission's stood still: our bug.
    result = assert_no_verdict(missed_deadline((BUDGET - 1, 0.5, 0.4), (BUDGET + 20, 21.5, 0.4)), "verifier_timeout")
    assert "runner got 100% of a CPU and the submission 0%" in result.reason
    # Even with the submission busy as well: a runner that got a third of a CPU was not starved by it.
    assert_no_verdict(missed_deadline((BUDGET - 1, 0.5, 0.4), (BUDGET + 20, 8.0, 10.0)), "verifier_timeout")


def test_row9c_submission_starved_its_own_runner():
    result = missed_deadline((BUDGET - 1, 0.5, 10.0), (BUDGET + 10, 0.6, 20.5), (BUDGET + 20, 0.7, 30.8))
    assert_scored(result, 0.0, "solution_timeout")
    assert "the submission 99%" in result.details


def test_row9d_host_deadline_missed_while_the_host_starved_the_sandbox():
    # Heartbeats kept coming but neither the runner nor the submission got a third of a CPU.
    assert_no_verdict(missed_deadline((BUDGET - 1, 0.5, 1.0), (BUDGET + 20, 1.0, 3.0)), "host_overloaded")


def test_row9_a_missed_deadline_is_decided_by_heartbeats_not_oom_kills():
    result = missed_deadline((BUDGET - 1, 0.5, 0.4, 1), (BUDGET + 20, 21.5, 0.4, 1))
    assert_no_verdict(result, "verifier_timeout")


def test_row10_host_deadline_before_the_submission_ran():
    assert_no_verdict(outcome(stdout=stdout((STARTED, None)), deadline_hit=True), "verifier_timeout")


def oom_events(before: int, after: int) -> bytes:
    return stdout((STARTED, None), *beats((0.5, 0.1, 0.0, before)), (IN_PLAY, None), *beats((1.5, 0.2, 0.5, after)))


def test_row11_the_sandbox_ran_out_of_memory_with_the_submission_in_play():
    result = assert_scored(outcome(stdout=oom_events(0, 1)), 0.0, "solution_oom")
    assert "1 OOM kill" in result.details


def test_row11_needs_a_kill_after_in_play_and_an_unknown_exit():
    # A kill counted before in_play is not the submission's; a runner that exited on its own is ours.
    assert_no_verdict(outcome(stdout=oom_events(1, 1)), "verifier_error")
    assert_no_verdict(outcome(stdout=oom_events(0, 1), exit_code=1), "verifier_error")
    # Counts the runner could not take are no evidence.
    unknown = stdout((IN_PLAY, None), (HEARTBEAT, {**FACTS, "oom_kills": None}))
    assert_no_verdict(outcome(stdout=unknown), "sandbox_lost")


def test_row12_an_oom_kill_before_the_submission_ran_is_ours():
    events = stdout((STARTED, None), *beats((0.5, 0.1, 0.0, 2)))
    result = assert_no_verdict(outcome(stdout=events), "verifier_error")
    assert "before any submission code ran" in result.reason


@pytest.mark.parametrize("in_play", [False, True])
def test_row13_a_sandbox_that_vanished(in_play):
    events = [(STARTED, None)] + ([(IN_PLAY, None)] if in_play else []) + beats((0.5, 0.1, 0.0))
    assert_no_verdict(outcome(stdout=stdout(*events), exit_code=None), "sandbox_lost")


@pytest.mark.parametrize("code", [0, 1, 2, 137, 143, -9])
def test_row14_runner_ended_without_a_report(code):
    # Exit statuses carry no convention: 137 is a status like any other, and a runner that has one is ours.
    result = assert_no_verdict(outcome(stdout=stdout((IN_PLAY, None)), exit_code=code, stderr_tail="Traceback"),
                               "verifier_error")
    assert "Traceback" in result.reason and f"exit status {code}" in result.reason


def test_vocabulary_has_both_sides_and_the_named_types():
    scored_types = {name for name, (is_scored, _) in ERROR_TYPES.items() if is_scored}
    no_verdict_types = set(ERROR_TYPES) - scored_types
    assert {"no_code_block", "solution_error", "solution_timeout", "solution_oom", "output_limit_exceeded"} <= scored_types
    assert {"sandbox_start_failure", "image_missing", "daemon_unavailable", "verifier_error", "verifier_timeout",
            "invalid_score"} <= no_verdict_types


def test_no_verdict_error_refuses_scored_types():
    with pytest.raises(ValueError):
        NoVerdictError("solution_timeout", "would be an escape hatch")


@pytest.mark.parametrize("value,expected", [(0, 0.0), (1, 1.0), (0.5, 0.5), (1 + 1e-10, 1.0), (-1e-10, 0.0),
                                            (1.01, None), (float("nan"), None), (False, None), ("0.5", None)])
def test_finite_score(value, expected):
    assert finite_score(value) == expected


def test_no_verdict_error_survives_pickling():
    """Reward workers are separate processes (Ray actors): the error must cross intact."""
    import pickle

    error = NoVerdictError("image_missing", "gone", environment="coin_change", runtime="docker", variant=3)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is NoVerdictError and str(copy) == str(error)
    assert (copy.error_type, copy.reason, copy.environment, copy.runtime, copy.variant) == \
        ("image_missing", "gone", "coin_change", "docker", 3)

