"""The daytona provider through the unmodified Daytona SDK against the stand-in (a test double of Daytona's API,
tests/providers/standins/daytona.py, whose sandboxes are containers of our images): the rows of the exit-state
table in docs/providers.md that are Daytona's own (the rows every provider shares are test_exit_states.py), what
each sandbox asks of Daytona (limits, network, lifetime, labels), registration, and verl's reward_kwargs."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from standins import publish, require  # noqa: E402
from support import image_ref, verl_reward  # noqa: E402

require("daytona", "daytona")
from standins.daytona import DaytonaStandIn  # noqa: E402

from deepgym import DeepGym  # noqa: E402
from deepgym.environments import load_environment  # noqa: E402
from deepgym.errors import ConfigurationError  # noqa: E402
from deepgym.judging import Images  # noqa: E402
from deepgym.registration import Registered, register, registered_name  # noqa: E402
from deepgym.sandbox import ExecOptions, ImageMissing, ProviderUnavailable, SandboxLost, StartFailure  # noqa: E402
from deepgym.sandbox.daytona import LABEL, DaytonaProvider  # noqa: E402

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
ENVS = ["base", "coin_change"]
REFERENCE = (ROOT / "environments" / "coin_change" / "solutions" / "reference.py").read_text()
WRONG = (ROOT / "environments" / "coin_change" / "solutions" / "wrong_greedy.py").read_text()


def fenced(code: str) -> str:
    return f"Here it is.\n```python\n{code}\n```\n"


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    server = DaytonaStandIn().start()
    manifest = publish(server, ENVS, tmp_path_factory.mktemp("daytona") / "pushed.json")
    server.manifest = manifest
    register("daytona", ENVS, manifest, provider=DaytonaProvider(**settings(server)))
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def no_faults_left(standin):
    yield
    standin.faults.clear()


def settings(server) -> dict:
    return {"api_key": server.api_key, "api_url": server.api_url, "target": "us"}


@pytest.fixture
def provider(standin):
    made = DaytonaProvider(**settings(standin))
    yield made
    made.close()


@pytest.fixture
def gym(standin, monkeypatch):
    monkeypatch.setenv("DAYTONA_API_KEY", standin.api_key)
    monkeypatch.setenv("DAYTONA_API_URL", standin.api_url)
    monkeypatch.setenv("DAYTONA_TARGET", "us")
    with DeepGym(mode="daytona") as made:
        yield made


def wait_for_a_sandbox_of(standin, run_id: str, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not any(box["labels"].get(LABEL) == run_id and box["state"] == "started"
                  for box in list(standin.sandboxes.values())):
        assert time.monotonic() < deadline, "the stand-in never finished the create"
        time.sleep(0.1)


def spec(provider, **fields):
    from deepgym.sandbox import SandboxSpec

    return SandboxSpec(image=provider.image(image_ref(provider, "base")).id, **fields)


# ------------------------------------------------------------------ coin_change through the real SDK
def test_a_batch_judges_in_parallel_through_the_sdk(gym):
    batch = gym.run_batch("coin_change", [fenced(REFERENCE), fenced(WRONG)] * 3)
    assert [entry.passed for entry in batch] == [True, False] * 3


def test_the_deprecated_daytona_sdk_package_alone_works(standin, monkeypatch):
    pytest.importorskip("daytona_sdk")
    for name in [name for name in sys.modules if name == "daytona" or name.startswith("daytona.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "daytona", None)  # import daytona now raises ImportError
    provider = DaytonaProvider(**settings(standin))
    try:
        assert provider.sdk.__name__ == "daytona_sdk"
        result = provider.run(spec(provider), ["python3", "-c", "print('via daytona_sdk')"], ExecOptions(timeout_s=30))
        assert (result.exit_code, result.stdout) == (0, b"via daytona_sdk\n")
    finally:
        provider.close()


def test_without_the_sdk_the_mode_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "daytona", None)
    monkeypatch.setitem(sys.modules, "daytona_sdk", None)
    with pytest.raises(ConfigurationError, match=r"deepgym\[daytona\]"):
        DaytonaProvider()


# ------------------------------------------------------------------ what a sandbox asks of Daytona
def test_each_sandbox_maps_network_lifetime_and_labels_to_daytonas_terms(provider, standin):
    from deepgym.sandbox import SandboxSpec

    before = len(standin.requests)
    with provider.create(SandboxSpec(image=provider.image(image_ref(provider, "base")).id, lifetime_s=150,
                                     labels={"deepgym.environment": "coin_change"})):
        pass
    body = next(body for method, path, body in standin.requests[before:] if (method, path) == ("POST", "/api/sandbox"))
    assert body["snapshot"] == registered_name("base")
    assert body["networkBlockAll"] is True
    assert (body["autoStopInterval"], body["ttlMinutes"], body["autoDeleteInterval"]) == (3, 3, 0)
    assert body["labels"]["deepgym.environment"] == "coin_change" and body["labels"][LABEL] == provider.run_id
    assert body["labels"]["deepgym.owner"] == provider.owner


def test_registration_is_idempotent_and_named_by_the_content_hash(standin):
    created = register("daytona", ["coin_change"], standin.manifest, provider=DaytonaProvider(**settings(standin)))
    assert created == [("coin_change", registered_name("coin_change"), Registered(created=False))]
    snapshot = standin.snapshots[registered_name("coin_change")]
    assert snapshot["imageName"].split("@")[1].startswith("sha256:") and snapshot["entrypoint"] == ["sleep", "infinity"]


def test_the_commands_register_and_clean_up(standin, monkeypatch, capsys):
    from deepgym.cli import main
    from deepgym.sandbox import SandboxSpec

    for variable, value in (("DAYTONA_API_KEY", standin.api_key), ("DAYTONA_API_URL", standin.api_url),
                            ("DAYTONA_TARGET", "us")):
        monkeypatch.setenv(variable, value)
    assert main(["images", "register", "daytona", "coin_change", "--manifest", str(standin.manifest)]) == 0
    assert f"coin_change: {registered_name('coin_change')} already registered" in capsys.readouterr().out
    leaked = DaytonaProvider()
    leaked.create(SandboxSpec(image=registered_name("base")))  # a crashed trainer's sandbox, never closed
    assert main(["cleanup", "--provider", "daytona"]) == 0
    assert "removed 1 deepgym daytona sandbox(s)" in capsys.readouterr().out
    assert standin.live_containers() == 0


def test_a_snapshot_whose_pull_failed_is_made_again_by_the_next_registration(tmp_path, monkeypatch, capsys):
    """A snapshot whose pull failed keeps its name in state ``error``: samples say so, and once the image can be
    pulled, ``images register`` deletes it and makes it again (not "already registered"), and samples judge."""
    from deepgym.cli import main

    server = DaytonaStandIn().start()
    try:
        manifest = publish(server, ["coin_change"], tmp_path / "pushed.json")
        ref, image = server.registry.popitem()  # the pushed image cannot be pulled (yet)
        for variable, value in (("DAYTONA_API_KEY", server.api_key), ("DAYTONA_API_URL", server.api_url),
                                ("DAYTONA_TARGET", "us")):
            monkeypatch.setenv(variable, value)
        name = registered_name("coin_change")
        with pytest.raises(StartFailure, match=f"Failed to create snapshot {name}.*cannot pull"):
            register("daytona", ["coin_change"], manifest)
        assert server.snapshots[name]["state"] == "error"
        with DeepGym(mode="daytona") as gym:
            failed = gym.judge("coin_change", fenced(REFERENCE))
        assert (failed.error_type, failed.score) == ("image_missing", None), failed
        assert "state error (cannot pull" in str(failed) and "images register daytona coin_change" in str(failed)

        server.registry[ref] = image  # fixed: the image can be pulled now
        for _ in range(2):
            assert main(["images", "register", "daytona", "coin_change", "--manifest", str(manifest)]) == 0
        again, then = capsys.readouterr().out.splitlines()
        assert again == f"coin_change: {name} registered again (the one found was in state error: cannot pull {ref})"
        assert then == f"coin_change: {name} already registered"
        assert sum(1 for method, path, _ in server.requests
                   if method == "DELETE" and path.startswith("/api/snapshots/")) == 1, "the failed one was deleted"
        assert server.snapshots[name]["state"] == "active"
        with DeepGym(mode="daytona") as gym:
            right, wrong = gym.judge("coin_change", fenced(REFERENCE)), gym.judge("coin_change", fenced(WRONG))
        assert (right.score, right.runtime, wrong.score) == (1.0, "daytona", 0.0), right
    finally:
        server.stop()


def test_registration_needs_a_pushed_image(standin, tmp_path):
    with pytest.raises(ConfigurationError, match="push it first"):
        register("daytona", ["two_sum"], standin.manifest, provider=DaytonaProvider(**settings(standin)))


def test_at_most_max_sandboxes_are_alive_at_once(standin, tmp_path, monkeypatch):
    # The account's slots in a folder of the test's own, so no other holder of the stand-ins' account on this
    # host (another test's sandbox still being deleted, another run) takes the one slot.
    monkeypatch.setenv("DEEPGYM_ADMISSION_DIR", str(tmp_path))
    provider = DaytonaProvider(**settings(standin), max_sandboxes=1)
    provider.limits.wait_s = 1.0
    try:
        with provider.create(spec(provider)):
            with pytest.raises(StartFailure, match="max_sandboxes"):
                provider.create(spec(provider))
        with provider.create(spec(provider)):  # the slot came back
            pass
    finally:
        provider.close()


# ------------------------------------------------------------------ the exit-state table, one test per row
def test_row_sandbox_deleted_is_sandbox_lost(provider, standin):
    with provider.create(spec(provider)) as box:
        standin.delete_from_outside(box.id)
        with pytest.raises(SandboxLost, match="gone"):
            box.exec(["true"], ExecOptions(timeout_s=10))


@pytest.mark.parametrize("status", [401, 403])
def test_row_auth_and_quota_refusals_are_provider_unavailable(standin, status):
    provider = DaytonaProvider(**{**settings(standin), "api_key": "wrong"}) if status == 401 else \
        DaytonaProvider(**settings(standin))
    try:
        if status == 403:
            image = spec(provider).image
            standin.faults.fail("create", 403)
        else:
            image = registered_name("base")
        from deepgym.sandbox import SandboxSpec

        with pytest.raises(ProviderUnavailable, match="refused the credentials"):
            provider.create(SandboxSpec(image=image))
    finally:
        provider.close()


def test_row_unregistered_environment_is_image_missing(provider):
    with pytest.raises(ImageMissing, match="images register daytona two_sum"):
        Images().resolve(provider, load_environment("two_sum"))


def test_row_slow_create_past_the_timeout_is_start_failure_and_leaks_nothing(standin):
    provider = DaytonaProvider(**settings(standin), create_timeout_s=1)
    standin.faults.create_delay_s = 3.0
    try:
        with pytest.raises(StartFailure, match="in time"):
            provider.create(spec(provider))
    finally:
        provider.close()
    standin.faults.create_delay_s = 0.0
    wait_for_a_sandbox_of(standin, provider.run_id)  # the stand-in finishes the create the client gave up on
    assert provider.sweep({LABEL: provider.run_id}) == 1, "the half-made sandbox is found by its label"
    assert standin.live_containers() == 0


# ------------------------------------------------------------------ the stand-in speaks the SDK's models
def test_standin_responses_validate_against_the_sdks_models(provider, standin):
    models = importlib.import_module("daytona_api_client.models")
    with provider.create(spec(provider)) as box:
        models.Sandbox.from_dict(standin._dto(standin.sandboxes[box.id]))
        models.ListSandboxesResponse.from_dict({"items": [standin._dto(standin.sandboxes[box.id])],
                                                "nextCursor": None})
    models.SnapshotDto.from_dict(standin.snapshots[registered_name("base")])


# ------------------------------------------------------------------ the spec's snippet: verl's reward_kwargs {mode: daytona}
@pytest.mark.verl
def test_verls_reward_kwargs_mode_daytona(standin, monkeypatch):
    monkeypatch.setenv("DAYTONA_API_KEY", standin.api_key)
    monkeypatch.setenv("DAYTONA_API_URL", standin.api_url)
    monkeypatch.setenv("DAYTONA_TARGET", "us")
    score = verl_reward("coin_change", mode="daytona")

    def creates() -> int:
        return sum(1 for method, path, _ in standin.requests if (method, path) == ("POST", "/api/sandbox"))

    before = creates()
    right, wrong = score(fenced(REFERENCE)), score(fenced(WRONG))
    assert (right["score"], wrong["score"]) == (1.0, 0.0)
    assert creates() == before + 2, "both were judged through Daytona"


def test_arun_keeps_the_accounts_own_bound(gym):
    """A remote account has no host admission key: arun goes straight to a thread, where the adapter waits for
    the account's slot (it neither waits for a host slot nor fails for want of one)."""
    import asyncio

    async def main():
        return await asyncio.gather(gym.arun("coin_change", fenced(REFERENCE)), gym.arun("coin_change", fenced(WRONG)))

    assert gym.admission is None
    assert [verdict.passed for verdict in asyncio.run(main())] == [True, False]
