"""The e2b provider through the unmodified E2B SDK against the stand-in (a test double of E2B's API,
tests/providers/standins/e2b.py, whose sandboxes are containers of our images). One test per row of the
exit-state table in docs/providers.md, coin_change right, wrong and looping through ``DeepGym(mode="e2b")``,
what each sandbox asks of E2B, and the sweep."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from standins import hostile_attacks, require  # noqa: E402

require("e2b", "e2b")
require("uvicorn", "verl")  # the E2B stand-in serves its ASGI app with uvicorn (the verl extra has it)
from standins.e2b import E2BStandIn, template_images  # noqa: E402

from deepgym import DeepGym, NoVerdictError  # noqa: E402
from deepgym.images import image_name  # noqa: E402
from deepgym.registration import registered_name  # noqa: E402
from deepgym.sandbox import ExecOptions, ImageMissing, ProviderUnavailable, SandboxLost, SandboxSpec, StartFailure  # noqa: E402,E501
from deepgym.sandbox.e2b import LABEL, E2BProvider  # noqa: E402

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "environments" / "coin_change" / "solutions" / "reference.py").read_text()
WRONG = (ROOT / "environments" / "coin_change" / "solutions" / "wrong_greedy.py").read_text()
LOOPING = "def coin_change(coins, amount):\n    while True:\n        pass\n"
# The SDK retries a 429, 502, 503 or 504 three times: a fault that lasts is four of them.
LASTING = 4


def fenced(code: str) -> str:
    return f"Here it is.\n```python\n{code}\n```\n"


@pytest.fixture(scope="module")
def standin():
    server = E2BStandIn().start()
    template_images(server, ["base", "coin_change"])
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def no_faults_left(standin):
    yield
    standin.faults.statuses.clear()
    standin.faults.create_delay_s = 0.0
    standin.faults.kill_during_exec_s = None


def settings(server) -> dict:
    return {"api_key": server.api_key, "api_url": server.url, "sandbox_url": server.url}


@pytest.fixture
def provider(standin):
    made = E2BProvider(**settings(standin))
    yield made
    made.close()


@pytest.fixture
def gym(standin, monkeypatch):
    monkeypatch.setenv("E2B_API_KEY", standin.api_key)
    monkeypatch.setenv("E2B_API_URL", standin.url)
    monkeypatch.setenv("E2B_SANDBOX_URL", standin.url)
    with DeepGym(mode="e2b") as made:
        yield made


def spec(provider, **fields) -> SandboxSpec:
    return SandboxSpec(image=provider.image(image_name("base")).id, **fields)


def test_coin_change_right_wrong_and_looping(gym, standin):
    right = gym.run("coin_change", fenced(REFERENCE))
    wrong = gym.run("coin_change", fenced(WRONG))
    looping = gym.run("coin_change", fenced(LOOPING))
    assert (right.score, right.passed, right.runtime) == (1.0, True, "e2b")
    assert (wrong.score, wrong.error_type) == (0.0, "wrong_answer")
    assert (looping.score, looping.error_type) == (0.0, "solution_timeout")
    assert right.image_id == registered_name("coin_change")
    assert standin.live_containers() == 0, "a judged sample left its sandbox behind"


def test_each_sandbox_maps_network_lifetime_and_labels_to_e2bs_terms(provider, standin):
    before = len(standin.requests)
    with provider.create(spec(provider, lifetime_s=150, labels={"deepgym.environment": "coin_change"})):
        pass
    body = next(body for method, path, body in standin.requests[before:] if (method, path) == ("POST", "/v2/sandboxes"))
    assert body["templateID"] == registered_name("base")
    assert (body["allow_internet_access"], body["timeout"]) == (False, 150)
    assert body["metadata"]["deepgym.environment"] == "coin_change" and body["metadata"][LABEL] == provider.run_id


def test_the_sweep_removes_sandboxes_by_metadata(provider, standin):
    boxes = [provider.create(spec(provider, labels={"deepgym.sweep-test": "yes"})) for _ in range(2)]
    other = provider.create(spec(provider))
    try:
        assert provider.sweep({"deepgym.sweep-test": "yes"}) == 2
        assert all(standin.gone(box.id) for box in boxes) and not standin.gone(other.id)
    finally:
        other.close()


# ------------------------------------------------------------------ the exit-state table, one test per row
def test_row_a_non_zero_exit_is_data_not_an_error(provider):
    with provider.create(spec(provider)) as box:
        assert box.remote.shell("echo report; exit 3", 30) == "report\n"  # CommandExitException, read as data
        result = box.exec(["python3", "-c", "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)"],
                          ExecOptions(timeout_s=30))
    assert (result.exit_code, result.stdout, result.stderr_tail, result.timed_out) == (3, b"out\n", "err\n", False)


def test_row_our_deadline_keeps_the_output(provider):
    result = provider.run(spec(provider), ["python3", "-c", "import time\nprint('beat', flush=True)\ntime.sleep(60)"],
                          ExecOptions(timeout_s=2))
    assert (result.timed_out, result.exit_code, result.stdout) == (True, None, b"beat\n")


def test_row_e2bs_own_deadline_is_sandbox_lost(provider, monkeypatch):
    import deepgym.sandbox.remote as remote

    monkeypatch.setattr(remote, "PROVIDER_GRACE_S", -1.5)  # E2B's deadline now fires before ours
    with provider.create(spec(provider)) as box:
        started = time.monotonic()
        with pytest.raises(SandboxLost, match="own deadline"):
            box.exec(["python3", "-c", "import time\ntime.sleep(60)"], ExecOptions(timeout_s=3))
        assert time.monotonic() - started < 10


def test_row_sandbox_killed_mid_exec_is_sandbox_lost(provider, standin):
    standin.faults.kill_during_exec_s = 1.0
    with provider.create(spec(provider)) as box:
        with pytest.raises(SandboxLost):
            box.exec(["python3", "-c", "import time\ntime.sleep(30)"], ExecOptions(timeout_s=20))


def test_row_sandbox_killed_is_sandbox_lost(provider, standin):
    with provider.create(spec(provider)) as box:
        E2BProvider(**settings(standin)).sdk.Sandbox.kill(box.id, **settings(standin))
        with pytest.raises(SandboxLost):
            box.exec(["true"], ExecOptions(timeout_s=10))


@pytest.mark.parametrize("status", [500, 503])
def test_row_5xx_on_create_is_start_failure(provider, standin, status):
    standin.faults.fail("create", *[status] * LASTING)
    with pytest.raises(StartFailure):
        provider.create(spec(provider))


@pytest.mark.parametrize("status", [500, 503])
def test_row_5xx_on_exec_is_sandbox_lost(provider, standin, status):
    with provider.create(spec(provider)) as box:
        standin.faults.fail("exec", status)
        with pytest.raises(SandboxLost):
            box.exec(["true"], ExecOptions(timeout_s=10))


def test_row_rate_limit_is_provider_unavailable(provider, standin):
    standin.faults.fail("create", *[429] * LASTING)
    with pytest.raises(ProviderUnavailable, match="rate-limited"):
        provider.create(spec(provider))


def test_row_bad_key_is_provider_unavailable(standin):
    provider = E2BProvider(**{**settings(standin), "api_key": "e2b_" + "1" * 40})
    with pytest.raises(ProviderUnavailable, match="E2B_API_KEY"):
        provider.create(spec(provider))


def test_row_no_key_is_every_samples_reason(gym, monkeypatch):
    monkeypatch.delenv("E2B_API_KEY")
    with DeepGym(mode="e2b") as keyless:
        with pytest.raises(NoVerdictError) as caught:
            keyless.run("coin_change", fenced(REFERENCE))
    assert caught.value.error_type == "daemon_unavailable" and "E2B_API_KEY" in caught.value.reason


def test_row_unknown_template_is_image_missing(provider):
    with pytest.raises(ImageMissing, match="no template"):
        provider.create(SandboxSpec(image=provider.image(image_name("two_sum")).id))


def test_row_slow_create_past_the_request_timeout_is_start_failure_and_leaks_nothing(standin):
    provider = E2BProvider(**settings(standin), request_timeout_s=1.0)
    standin.faults.create_delay_s = 3.0
    with pytest.raises(StartFailure, match="in time"):
        provider.create(spec(provider))
    standin.faults.create_delay_s = 0.0
    deadline = time.monotonic() + 30  # the stand-in finishes the create the client gave up on
    while not any(box["metadata"].get(LABEL) == provider.run_id for box in list(standin.sandboxes.values())):
        assert time.monotonic() < deadline, "the stand-in never finished the create"
        time.sleep(0.1)
    assert provider.sweep({LABEL: provider.run_id}) == 1, "the half-made sandbox is found by its metadata"
    assert standin.live_containers() == 0


def test_row_unreachable_api_is_provider_unavailable(standin):
    provider = E2BProvider(api_key=standin.api_key, api_url="http://127.0.0.1:9", sandbox_url="http://127.0.0.1:9")
    with pytest.raises(ProviderUnavailable, match="cannot be reached"):
        provider.create(spec(provider))


def test_standin_responses_validate_against_the_sdks_models(provider, standin):
    import e2b.api.client.models as models

    with provider.create(spec(provider)) as box:
        models.ListedSandbox.from_dict(standin._listed(standin.sandboxes[box.id]))
        models.SandboxDetail.from_dict(standin._listed(standin.sandboxes[box.id]))


@pytest.mark.parametrize("attack", hostile_attacks(), ids=lambda attack: attack.id)
def test_hostile_single_turn_cases_get_their_verdict(gym, attack):
    outcome = gym.judge(attack.env, attack.response)
    assert outcome.has_verdict and not outcome.passed and outcome.error_type in attack.expected, outcome.to_dict()


def test_a_session_with_a_service_runs_on_e2b(gym, standin):
    """Sessions go through the Provider interface only: shell_fix_config's reference episode (a supervised
    service that must survive into grading) scores 1 in an E2B sandbox, its known-wrong one 0."""
    from deepgym.environments import load_environment
    from deepgym.session import action_sequences, replay

    template_images(standin, ["shell_fix_config"])
    env = load_environment("shell_fix_config")
    right = replay(gym, env, action_sequences(env, "reference")[0])
    wrong = replay(gym, env, action_sequences(env, "wrong_half_fixed")[1], variant=1)
    assert (right.score, right.runtime) == (1.0, "e2b"), right
    assert (wrong.score, wrong.error_type) == (0.0, "service_failed"), wrong
