"""The modal provider through the unmodified ``modal`` client against the stand-in (a test double of Modal's
gRPC API, tests/providers/standins/modal.py, whose sandboxes are containers of our images): the rows of the
exit-state table in docs/providers.md that are Modal's own (the rows every provider shares are
test_exit_states.py), what each sandbox asks of Modal, Modal's real exception classes at the adapter's
boundary, registration, and verl's ``reward_kwargs: {mode: modal}``."""

from __future__ import annotations

import sys
import time

import pytest
from standins import require
from support import fenced, solution, verl_reward

require("modal", "modal")
import modal  # noqa: E402
from modal_proto import api_pb2  # noqa: E402

from deepgym.environments import load_environment  # noqa: E402
from deepgym.errors import ConfigurationError  # noqa: E402
from deepgym.judging import Images  # noqa: E402
from deepgym.pushed import read_manifest  # noqa: E402
from deepgym.registration import Registered, register, registered_name  # noqa: E402
from deepgym.sandbox import (ExecOptions, ImageMissing, ProviderUnavailable, SandboxLost, SandboxSpec,  # noqa: E402
                             StartFailure)
from deepgym.sandbox.modal import IMAGES, LABEL, OWNER_LABEL, ModalProvider, translate_errors  # noqa: E402

LOOPING = "def coin_change(coins, amount):\n    while True:\n        pass\n"
MODAL = [pytest.param("modal", marks=pytest.mark.docker)]


@pytest.fixture
def provider(case):
    made = case.provider()
    yield made
    made.close()


def created(standin, before: int):
    return next(request for name, request in standin.requests[before:] if name == "SandboxCreateV2")


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_each_sandbox_maps_limits_network_lifetime_and_labels_to_modals_terms(case, provider):
    before = len(case.standin.requests)
    spec = case.spec(provider, memory_mb=700, cpus=1.5, lifetime_s=150.2, labels={"deepgym.environment": "x"})
    with provider.create(spec):
        pass
    request = created(case.standin, before)
    definition = request.definition
    tags = {tag.tag_name: tag.tag_value for tag in request.tags}
    assert definition.network_access.network_access_type == api_pb2.NetworkAccess.NetworkAccessType.BLOCKED
    assert (definition.resources.memory_mb, definition.resources.milli_cpu) == (700, 1500)
    assert (definition.timeout_secs, list(definition.entrypoint_args)) == (151, ["sleep", "151"])
    assert tags == {"deepgym.environment": "x", LABEL: provider.run_id, OWNER_LABEL: provider.owner}
    app = next(request for name, request in case.standin.requests if name == "AppGetOrCreate")
    assert app.app_name == "deepgym"


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_row_bad_token_is_provider_unavailable(case):
    provider = case.provider(token_secret="wrong")
    try:
        with pytest.raises(ProviderUnavailable, match="MODAL_TOKEN_ID"):
            provider.create(SandboxSpec(image=case.base_ref))
    finally:
        provider.close()


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_row_an_unregistered_environment_is_image_missing_naming_register(case, provider):
    with pytest.raises(ImageMissing, match="images register modal two_sum"):
        Images().resolve(provider, load_environment("two_sum"))


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_row_an_image_modal_cannot_pull_is_image_missing(case, provider):
    with pytest.raises(ImageMissing, match="cannot build"):
        provider.register_image("deepgym-two-sum-0", "registry.standin.invalid/deepgym-two_sum@sha256:" + "0" * 64,
                                None)


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_registration_is_idempotent_and_named_by_the_content_hash(case):
    assert register("modal", ["coin_change"], case.standin.manifest, provider=case.provider()) == \
        [("coin_change", registered_name("coin_change"), Registered(created=False))]
    built = [request for name, request in case.standin.requests if name == "ImageGetOrCreate"]
    pinned = read_manifest(case.standin.manifest)["coin_change"].ref
    assert [list(request.image.dockerfile_commands) for request in built].count([f"FROM {pinned}"]) == 1, \
        "built once, from the digest-pinned reference"


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_the_registered_image_has_no_entry_point_so_the_sandboxs_command_runs_as_it_is(case, provider):
    """Modal appends a sandbox's command to the image's ENTRYPOINT: the registered image is a layer on the
    pushed one that clears it (what ``Image.entrypoint([])`` sends), and a sandbox's main process is ``sleep``."""
    layers = [request.image for name, request in case.standin.requests if name == "ImageGetOrCreate"
              and list(request.image.dockerfile_commands) == ["FROM base", "ENTRYPOINT []"]]
    assert layers and all([base.docker_tag for base in layer.base_images] == ["base"] for layer in layers)
    with provider.create(case.spec(provider, lifetime_s=60)) as box:
        container = case.standin.container(box.id)
        assert [container.attrs["Path"], *container.attrs["Args"]][-2:] == ["sleep", "60"]
        assert box.exec(["python3", "-c", "print(6 * 7)"], ExecOptions(timeout_s=30)).stdout == b"42\n"


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_an_image_an_older_deepgym_registered_is_never_used_and_registering_replaces_it(case, capsys):
    """An older deepgym recorded the pushed image as it is (the runner its ENTRYPOINT), its id alone. On Modal
    (and the stand-in) such an image's sandbox runs ``deepgym_runner sleep N``, which exits at once; so samples
    refuse the record, naming the fix, and ``images register`` builds the image again in its place."""
    from deepgym.cli import main

    env, name = "coin_change", registered_name("coin_change")
    old = case.provider()
    try:
        client, app = old.client()
        image = modal.Image.from_registry(read_manifest(case.standin.manifest)[env].ref).build(app)
        modal.Dict.from_name(IMAGES, client=client)[name] = image.object_id
        box = modal.Sandbox.create("sleep", "60", app=app, image=image, client=client, timeout=60)
        entry = case.standin.sandboxes[box.object_id]
        deadline = time.monotonic() + 30
        while case.standin.running(entry) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not case.standin.running(entry), "the runner, given 'sleep 60' as arguments, exited"
        box.terminate()
        with pytest.raises(ImageMissing, match=f"older deepgym.*images register modal {env}"):
            Images().resolve(old, load_environment(env))
    finally:
        old.close()
    for _ in range(2):
        assert main(["images", "register", "modal", env, "--manifest", str(case.standin.manifest)]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith(f"{env}: {name} registered again (the one found was registered by an older deepgym")
    assert second == f"{env}: {name} already registered"
    from deepgym import DeepGym

    with DeepGym(mode="modal") as gym:
        right = gym.judge(env, fenced(solution(env, "reference")))
        wrong = gym.judge(env, fenced(solution(env, "wrong_greedy")))
    assert (right.score, right.runtime, wrong.score) == (1.0, "modal", 0.0), right


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_the_commands_register_and_clean_up(case, capsys):
    from deepgym.cli import main

    assert main(["images", "register", "modal", "coin_change", "--manifest", str(case.standin.manifest)]) == 0
    assert f"coin_change: {registered_name('coin_change')} already registered" in capsys.readouterr().out
    leaked = ModalProvider()
    leaked.create(case.spec(leaked))  # a crashed trainer's sandbox, never closed
    assert main(["cleanup", "--provider", "modal"]) == 0
    assert "removed 1 deepgym modal sandbox(s)" in capsys.readouterr().out
    assert case.standin.live_containers() == 0


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_row_sandbox_terminated_from_outside_is_sandbox_lost(case, provider):
    with provider.create(case.spec(provider)) as box:
        modal.Sandbox.from_id(box.id, client=provider.client()[0]).terminate()
        with pytest.raises(SandboxLost):
            box.exec(["true"], ExecOptions(timeout_s=10))


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_row_a_slow_create_is_waited_for_and_the_sandbox_works(case, provider):
    case.standin.faults.create_delay_s = 2.0
    result = provider.run(case.spec(provider), ["python3", "-c", "print('late')"], ExecOptions(timeout_s=30))
    assert (result.exit_code, result.stdout) == (0, b"late\n")


def _errors():
    e = modal.exception
    return [
        (e.AuthError("no"), "start", ProviderUnavailable, "MODAL_TOKEN_ID"),
        (e.PermissionDeniedError("no"), "run", ProviderUnavailable, "credentials"),
        (e.ResourceExhaustedError("quota"), "start", ProviderUnavailable, "quota"),
        (e.ConnectionError("refused"), "start", ProviderUnavailable, "cannot be reached"),
        (e.ClientClosed("closed"), "run", ProviderUnavailable, "cannot be reached"),
        (e.SandboxTerminatedError("gone"), "run", SandboxLost, "gone"),
        (e.SandboxTimeoutError("lifetime"), "run", SandboxLost, "lifetime"),
        (e.ImageBuildError("pull failed", "im-x"), "image", ImageMissing, "cannot build"),
        (e.NotFoundError("sb"), "run", SandboxLost, "gone"),
        (e.NotFoundError("im"), "start", ImageMissing, "no such image"),
        (e.ServiceError("unavailable"), "start", StartFailure, "ServiceError"),
        (e.InternalError("internal"), "run", SandboxLost, "InternalError"),
        (e.ExecTimeoutError("deadline"), "run", SandboxLost, "ExecTimeoutError"),
        (e.InvalidError("bad"), "start", StartFailure, "InvalidError"),
        (ConnectionRefusedError(111, "refused"), "start", ProviderUnavailable, "cannot be reached"),
    ]


@pytest.mark.parametrize("error, phase, expected, says", _errors(), ids=lambda value: type(value).__name__
                         if isinstance(value, BaseException) else None)
def test_modals_real_exception_classes_become_typed_sandbox_errors(error, phase, expected, says):
    with pytest.raises(expected, match=says):
        with translate_errors(modal, phase):
            raise error


def test_without_the_client_the_mode_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "modal", None)
    with pytest.raises(ConfigurationError, match=r"deepgym\[modal\]"):
        ModalProvider()


@pytest.mark.verl
@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_verls_reward_kwargs_mode_modal(case):
    score = verl_reward("coin_change", mode="modal")
    before = sum(1 for name, _ in case.standin.requests if name == "SandboxCreateV2")
    right = score(fenced(solution("coin_change", "reference")))
    wrong = score(fenced(solution("coin_change", "wrong_greedy")))
    looping = score(fenced(LOOPING))
    assert (right["score"], wrong["score"], looping["score"]) == (1.0, 0.0, 0.0)
    assert looping["error_type"] == "solution_timeout"
    assert sum(1 for name, _ in case.standin.requests if name == "SandboxCreateV2") == before + 3, \
        "all three were judged through Modal"


@pytest.mark.parametrize("case", MODAL, indirect=True)
def test_a_session_with_a_service_runs_on_modal(case):
    """Sessions go through the Provider interface only: shell_fix_config's reference episode (a supervised
    service that must survive into grading) scores 1 in a Modal sandbox, its known-wrong one 0."""
    from pathlib import Path

    from standins import publish

    from deepgym import DeepGym
    from deepgym.environments import load_environment
    from deepgym.authoring.replay import action_sequences, replay

    manifest = publish(case.standin, ["base", "shell_fix_config"],
                       Path(case.standin.manifest).with_name("session.json"))
    registrar = case.provider()
    try:
        register("modal", ["shell_fix_config"], manifest, provider=registrar)
    finally:
        registrar.close()
    env = load_environment("shell_fix_config")
    before = sum(1 for name, _ in case.standin.requests if name == "SandboxCreateV2")
    with DeepGym(mode="modal") as gym:
        right = replay(gym, env, action_sequences(env, "reference")[1], variant=1)
        wrong = replay(gym, env, action_sequences(env, "wrong_own_background_server")[1], variant=1)
    assert (right.score, right.runtime) == (1.0, "modal"), right
    assert (wrong.score, wrong.error_type) == (0.0, "service_failed"), wrong
    assert sum(1 for name, _ in case.standin.requests if name == "SandboxCreateV2") > before, "it ran on Modal"
