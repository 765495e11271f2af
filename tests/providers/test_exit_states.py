"""The rows of the exit-state contract that every remote provider shares, each one test run against every
provider's stand-in through its unmodified SDK (the ``case`` fixture, tests/providers/conftest.py):
coin_change right, wrong and looping through ``DeepGym(mode=...)``, an exit status as data, our deadline
versus the provider's own, a sandbox killed mid-exec, 5xx on create and on exec, rate limits, missing
credentials, an unreachable API, the sweep, and the single-turn hostile cases. What is particular to one
provider is in its own module (test_daytona.py, test_e2b.py, test_modal.py); the table is docs/providers.md."""

from __future__ import annotations

import time

import pytest
from standins import hostile_attacks
from support import fenced, solution

from deepgym import DeepGym, NoVerdictError
from deepgym.sandbox import ExecOptions, ProviderUnavailable, SandboxLost, StartFailure

pytestmark = pytest.mark.docker
LOOPING = "def coin_change(coins, amount):\n    while True:\n        pass\n"
CREDENTIALS = {"daytona": "DAYTONA_API_KEY", "e2b": "E2B_API_KEY", "modal": "MODAL_TOKEN_ID"}
UNREACHABLE = {"daytona": {"api_url": "http://127.0.0.1:9/api"},
               "e2b": {"api_url": "http://127.0.0.1:9", "sandbox_url": "http://127.0.0.1:9"}}


@pytest.fixture
def provider(case):
    made = case.provider()
    yield made
    made.close()


@pytest.fixture
def gym(case):
    with DeepGym(mode=case.mode) as made:
        yield made


def test_coin_change_right_wrong_and_looping(case, gym):
    right = gym.run("coin_change", fenced(solution("coin_change", "reference")))
    wrong = gym.run("coin_change", fenced(solution("coin_change", "wrong_greedy")))
    looping = gym.run("coin_change", fenced(LOOPING))
    assert (right.score, right.passed, right.runtime) == (1.0, True, case.mode)
    assert (wrong.score, wrong.error_type) == (0.0, "wrong_answer")
    assert (looping.score, looping.error_type) == (0.0, "solution_timeout")
    assert case.standin.live_containers() == 0, "a judged sample left its sandbox behind"


def test_row_exit_status_is_data(case, provider):
    result = provider.run(case.spec(provider), ["python3", "-c", "import sys\nprint('out')\n"
                                                "print('err', file=sys.stderr)\nsys.exit(3)"], ExecOptions(timeout_s=30))
    assert (result.exit_code, result.stdout, result.stderr_tail, result.timed_out) == (3, b"out\n", "err\n", False)


def test_row_our_deadline_keeps_the_output(case, provider):
    result = provider.run(case.spec(provider), ["python3", "-c", "import time\nprint('beat', flush=True)\n"
                                                "time.sleep(60)"], ExecOptions(timeout_s=6))  # up to print
    assert (result.timed_out, result.exit_code, result.stdout) == (True, None, b"beat\n")


def test_row_the_providers_own_deadline_is_sandbox_lost(case, provider, monkeypatch):
    import deepgym.sandbox.remote as remote

    monkeypatch.setattr(remote, "PROVIDER_GRACE_S", -1.5)  # the provider's deadline now fires before ours
    with provider.create(case.spec(provider)) as box:
        started = time.monotonic()
        with pytest.raises(SandboxLost, match="own deadline"):
            box.exec(["python3", "-c", "import time\ntime.sleep(60)"], ExecOptions(timeout_s=3))
        assert time.monotonic() - started < 30  # its 1.5 s deadline ended it, not the 60 s command


def test_row_sandbox_killed_mid_exec_is_sandbox_lost(case, provider):
    case.standin.faults.kill_during_exec_s = 1.0
    with provider.create(case.spec(provider)) as box:
        with pytest.raises(SandboxLost):
            box.exec(["python3", "-c", "import time\ntime.sleep(30)"], ExecOptions(timeout_s=20))


def test_row_5xx_on_create_is_start_failure(case, provider):
    spec = case.spec(provider)
    for status in case.server_errors:
        case.standin.faults.fail("create", *[status] * case.lasting)
        with pytest.raises(StartFailure):
            provider.create(spec)
        case.standin.faults.clear()


def test_row_5xx_on_exec_is_sandbox_lost(case, provider):
    for status in case.server_errors:
        with provider.create(case.spec(provider)) as box:
            case.standin.faults.fail("exec", *[status] * case.lasting)
            with pytest.raises(SandboxLost):
                box.exec(["true"], ExecOptions(timeout_s=10))
            case.standin.faults.clear()


def test_row_rate_limit_is_provider_unavailable(case, provider):
    spec = case.spec(provider)
    case.standin.faults.fail("create", *[case.rate_limit] * case.lasting)
    with pytest.raises(ProviderUnavailable, match="rate|quota"):
        provider.create(spec)


def test_row_no_credentials_is_every_samples_reason(case, monkeypatch):
    monkeypatch.delenv(CREDENTIALS[case.mode])
    with DeepGym(mode=case.mode) as keyless:
        with pytest.raises(NoVerdictError) as caught:
            keyless.run("coin_change", fenced(solution("coin_change", "reference")))
    assert caught.value.error_type == "daemon_unavailable" and CREDENTIALS[case.mode] in caught.value.reason


def test_row_unreachable_api_is_provider_unavailable(case, monkeypatch):
    if case.mode == "modal":
        monkeypatch.setenv("MODAL_SERVER_URL", "http://127.0.0.1:9")
    provider = case.provider(**UNREACHABLE.get(case.mode, {}))
    try:
        with pytest.raises(ProviderUnavailable, match="cannot be reached"):
            provider.create(case.spec(provider))
        started = time.monotonic()
        with pytest.raises(ProviderUnavailable, match="cannot be reached"):
            provider.create(case.spec(provider))
        if case.mode == "modal":  # its client retries for 63 s; the adapter remembers the failure for a while
            assert time.monotonic() - started < 30, "the next sample waited out Modal's retries again"
    finally:
        provider.close()


def test_the_sweep_removes_sandboxes_by_label(case, provider):
    boxes = [provider.create(case.spec(provider, labels={"deepgym.sweep-test": "yes"})) for _ in range(2)]
    other = provider.create(case.spec(provider))
    try:
        assert provider.sweep({"deepgym.sweep-test": "yes"}) == 2
        assert all(case.standin.gone(box.id) for box in boxes) and not case.standin.gone(other.id)
    finally:
        other.close()


@pytest.mark.parametrize("attack", hostile_attacks(), ids=lambda attack: attack.id)
def test_hostile_single_turn_cases_get_their_verdict(gym, attack):
    outcome = gym.judge(attack.env, attack.response)
    assert outcome.has_verdict and not outcome.passed and outcome.error_type in attack.expected, outcome.to_dict()
