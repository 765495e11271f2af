"""The e2b provider through the unmodified E2B SDK against the stand-in (a test double of E2B's API,
tests/providers/standins/e2b.py, whose sandboxes are containers of our images): the rows of the exit-state
table in docs/providers.md that are E2B's own (the rows every provider shares are test_exit_states.py), and
what each sandbox asks of E2B."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from standins import publish, require  # noqa: E402

require("e2b", "e2b")
require("uvicorn", "verl")  # the E2B stand-in serves its ASGI app with uvicorn (the verl extra has it)
from standins.e2b import E2BStandIn  # noqa: E402
from support import image_ref  # noqa: E402

from deepgym import DeepGym  # noqa: E402
from deepgym.registration import Registered, register, registered_name  # noqa: E402
from deepgym.sandbox import ExecOptions, ImageMissing, ProviderUnavailable, SandboxLost, SandboxSpec, StartFailure  # noqa: E402,E501
from deepgym.sandbox.e2b import LABEL, E2BProvider  # noqa: E402

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    server = E2BStandIn().start()
    server.manifest = publish(server, ["base", "coin_change"], tmp_path_factory.mktemp("e2b") / "pushed.json")
    register("e2b", ["base", "coin_change"], server.manifest, provider=E2BProvider(**settings(server)))
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def no_faults_left(standin):
    yield
    standin.faults.clear()


def settings(server) -> dict:
    return {"api_key": server.api_key, "api_url": server.url, "sandbox_url": server.url}


@pytest.fixture
def provider(standin):
    made = E2BProvider(**settings(standin))
    yield made
    made.close()


def spec(provider, **fields) -> SandboxSpec:
    return SandboxSpec(image=provider.image(image_ref(provider, "base")).id, **fields)


def test_each_sandbox_maps_network_lifetime_and_labels_to_e2bs_terms(provider, standin):
    before = len(standin.requests)
    with provider.create(spec(provider, lifetime_s=150, labels={"deepgym.environment": "coin_change"})):
        pass
    body = next(body for method, path, body in standin.requests[before:] if (method, path) == ("POST", "/v2/sandboxes"))
    assert body["templateID"] == registered_name("base")
    assert (body["allow_internet_access"], body["timeout"]) == (False, 150)
    assert body["metadata"]["deepgym.environment"] == "coin_change" and body["metadata"][LABEL] == provider.run_id


# ------------------------------------------------------------------ the exit-state table, one test per row
def test_row_a_non_zero_exit_is_data_not_an_error(provider):
    with provider.create(spec(provider)) as box:
        assert box.remote.shell("echo report; exit 3", 30) == "report\n"  # CommandExitException, read as data
        result = box.exec(["python3", "-c", "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)"],
                          ExecOptions(timeout_s=30))
    assert (result.exit_code, result.stdout, result.stderr_tail, result.timed_out) == (3, b"out\n", "err\n", False)


def test_row_sandbox_killed_is_sandbox_lost(provider, standin):
    with provider.create(spec(provider)) as box:
        E2BProvider(**settings(standin)).sdk.Sandbox.kill(box.id, **settings(standin))
        with pytest.raises(SandboxLost):
            box.exec(["true"], ExecOptions(timeout_s=10))


def test_row_bad_key_is_provider_unavailable(standin):
    provider = E2BProvider(**{**settings(standin), "api_key": "e2b_" + "1" * 40})
    with pytest.raises(ProviderUnavailable, match="E2B_API_KEY"):
        provider.create(spec(provider))


def test_row_unknown_template_is_image_missing(provider):
    with pytest.raises(ImageMissing, match="no template"):
        provider.create(SandboxSpec(image=provider.image(image_ref(provider, "two_sum")).id))


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


def test_standin_responses_validate_against_the_sdks_models(provider, standin):
    import e2b.api.client.models as models

    with provider.create(spec(provider)) as box:
        models.ListedSandbox.from_dict(standin._listed(standin.sandboxes[box.id]))
        models.SandboxDetail.from_dict(standin._listed(standin.sandboxes[box.id]))




def test_registration_builds_the_template_from_the_pushed_image_once(standin):
    from deepgym.pushed import read_manifest

    assert register("e2b", ["coin_change"], standin.manifest, provider=E2BProvider(**settings(standin))) == \
        [("coin_change", registered_name("coin_change"), Registered(created=False))]
    builds = [(path, body) for method, path, body in standin.requests if method == "POST" and "/builds/" in path]
    pinned = read_manifest(standin.manifest)["coin_change"].ref
    assert [body["fromImage"] for _, body in builds].count(pinned) == 1, "built once, from the digest-pinned ref"
    request = next(body for method, path, body in standin.requests
                   if (method, path) == ("POST", "/v3/templates") and body["name"] == registered_name("coin_change"))
    assert (request["cpuCount"], request["memoryMB"]) == (1, 1024)


def test_a_template_e2b_cannot_build_is_image_missing(standin):
    from deepgym.registration import resources_for

    provider = E2BProvider(**settings(standin))
    with pytest.raises(ImageMissing, match="cannot build"):
        provider.register_image("deepgym-two-sum-0", "registry.standin.invalid/deepgym-two_sum@sha256:" + "0" * 64,
                                resources_for("base"))


def test_a_template_whose_build_failed_is_built_again_by_the_next_registration(tmp_path, monkeypatch, capsys):
    """E2B binds a template's name when its build is requested, whatever the outcome: after a build that
    failed, samples are image_missing, and once the image can be pulled ``images register`` builds the template
    again (not "already registered"), and samples judge."""
    import e2b
    from support import fenced, solution

    from deepgym.cli import main

    server = E2BStandIn().start()
    try:
        manifest = publish(server, ["coin_change"], tmp_path / "pushed.json")
        ref, image = server.registry.popitem()  # the pushed image cannot be pulled (yet)
        for key, value in (("E2B_API_KEY", server.api_key), ("E2B_API_URL", server.url),
                           ("E2B_SANDBOX_URL", server.url)):
            monkeypatch.setenv(key, value)
        name = registered_name("coin_change")
        with pytest.raises(ImageMissing, match="cannot build"):
            register("e2b", ["coin_change"], manifest)
        assert e2b.Template.exists(name, **E2BProvider(**settings(server)).options()), "the name is bound"
        with DeepGym(mode="e2b") as gym:
            failed = gym.judge("coin_change", fenced(solution("coin_change", "reference")))
        assert (failed.error_type, failed.score) == ("image_missing", None), failed

        server.registry[ref] = image  # fixed: the image can be pulled now
        for _ in range(2):
            assert main(["images", "register", "e2b", "coin_change", "--manifest", str(manifest)]) == 0
        again, then = capsys.readouterr().out.splitlines()
        assert again == f"coin_change: {name} registered again (the one found had no successful build (its " \
                        "builds: error))"
        assert then == f"coin_change: {name} already registered"
        with DeepGym(mode="e2b") as gym:
            right = gym.judge("coin_change", fenced(solution("coin_change", "reference")))
            wrong = gym.judge("coin_change", fenced(solution("coin_change", "wrong_greedy")))
        assert (right.score, right.runtime, wrong.score) == (1.0, "e2b", 0.0), right
    finally:
        server.stop()


def test_a_session_with_a_service_runs_on_e2b(standin, monkeypatch):
    """Sessions go through the Provider interface only: shell_fix_config's reference episode (a supervised
    service that must survive into grading) scores 1 in an E2B sandbox, its known-wrong one 0."""
    from deepgym.environments import load_environment
    from deepgym.authoring.replay import action_sequences, replay

    manifest = publish(standin, ["base", "shell_fix_config"], Path(standin.manifest).with_name("session.json"))
    register("e2b", ["shell_fix_config"], manifest, provider=E2BProvider(**settings(standin)))
    for key, value in (("E2B_API_KEY", standin.api_key), ("E2B_API_URL", standin.url),
                       ("E2B_SANDBOX_URL", standin.url)):
        monkeypatch.setenv(key, value)
    env = load_environment("shell_fix_config")
    with DeepGym(mode="e2b") as e2b:
        right = replay(e2b, env, action_sequences(env, "reference")[0])
        wrong = replay(e2b, env, action_sequences(env, "wrong_half_fixed")[1], variant=1)
    assert (right.score, right.runtime) == (1.0, "e2b"), right
    assert (wrong.score, wrong.error_type) == (0.0, "service_failed"), wrong
