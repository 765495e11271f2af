"""The session failure table (deepgym.session.failure_result), row by row, and the pure helpers: no Docker."""

import pytest

from deepgym.sandbox import ImageMissing, ProviderUnavailable, SandboxLost, StartFailure
from deepgym.session.rules import cut_output, failure_result, invalid_action
from deepgym.verdict import NoVerdictError, Verdict

WHERE = {"environment": "shell_repair_script", "variant": 1}


def outcome(result):
    return ("scored", result.score, result.error_type) if isinstance(result, Verdict) else ("none", result.error_type)


@pytest.mark.parametrize("phase", ["start", "action", "verify"])
def test_row_1_engine_provider_network_or_auth_failures_are_ours(phase):
    result = failure_result(ProviderUnavailable("the Docker engine stopped answering"), phase=phase, **WHERE)
    assert outcome(result) == ("none", "daemon_unavailable") and result.variant == 1


@pytest.mark.parametrize("error", [ImageMissing("not built"), StartFailure("refused"), SandboxLost("gone at once")])
def test_row_2_a_sandbox_that_fails_to_start_is_ours(error):
    assert outcome(failure_result(error, phase="start", **WHERE)) == ("none", error.error_type)


@pytest.mark.parametrize("phase", ["action", "verify"])
def test_row_2_a_start_failure_after_the_start_is_ours_too(phase):
    """An admission slot that never came for a step or the verification: nothing of the agent's ran."""
    result = failure_result(StartFailure("no slot came free"), phase=phase, acting_s=1, elapsed_s=5, **WHERE)
    assert outcome(result) == ("none", "sandbox_start_failure")


def test_row_3_an_expiry_is_ours_only_when_the_agent_did_not_take_most_of_the_time():
    lost = SandboxLost("the container stopped under a running command")
    idle = failure_result(lost, phase="action", acting_s=10, elapsed_s=100, lifetime_s=90, **WHERE)
    busy = failure_result(lost, phase="action", acting_s=60, elapsed_s=100, lifetime_s=90, **WHERE)
    assert outcome(idle) == ("none", "sandbox_lost") and "lifetime" in idle.reason
    assert outcome(busy) == ("scored", 0.0, "policy_sandbox_failure")


@pytest.mark.parametrize("phase", ["action", "verify"])
def test_row_4_a_sandbox_broken_under_the_agent_scores_zero(phase):
    result = failure_result(SandboxLost("the action could not start"), phase=phase, acting_s=1, elapsed_s=5,
                            lifetime_s=600, **WHERE)
    assert outcome(result) == ("scored", 0.0, "policy_sandbox_failure") and not result.passed
    assert phase in result.details


def test_row_5_a_failure_of_deepgyms_own_code_is_ours():
    result = failure_result(KeyError("report"), phase="verify", **WHERE)
    assert isinstance(result, NoVerdictError) and result.error_type == "verifier_error" and "KeyError" in result.reason


def test_invalid_actions_are_named():
    assert invalid_action("ls -la") is None
    assert "not list" in invalid_action(["ls"])
    assert "empty" in invalid_action("\n")
    assert "NUL" in invalid_action("a\0b")
    assert "limit" in invalid_action("x" * 70000)


def test_cut_output_keeps_head_and_tail_within_the_limit():
    assert cut_output("short", 100) == "short"
    text = "".join(f"{i}\n" for i in range(5000))
    cut = cut_output(text, 200)
    assert len(cut) <= 200 and cut.startswith("0\n1\n") and cut.endswith("4999\n") and "characters cut" in cut
