"""Fixtures of the provider tests: ``case``, one remote provider and its stand-in (a test double of the
provider's API, tests/providers/standins), parametrized over every remote provider, so that each row of the
exit-state contract that every provider shares is one test for all of them (tests/providers/test_exit_states.py).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import environment, image_ref, unavailable  # noqa: E402

from deepgym.sandbox import Provider, SandboxSpec  # noqa: E402

REMOTE_MODES = ("daytona", "e2b", "modal")
SDK = {"daytona": ("daytona",), "e2b": ("e2b", "uvicorn"), "modal": ("modal",)}


@dataclass
class Case:
    """One remote provider against its stand-in: how to make the provider, what DeepGym(mode) reads from the
    environment (set for as long as the case runs), and how the stand-in's faults are spelled for it."""

    mode: str
    standin: object
    make: Callable[..., Provider]
    base_ref: str
    """The reference of the base image that ``provider.image`` resolves."""
    server_errors: tuple
    """The 5xx of the provider's API (HTTP statuses, or Modal's gRPC statuses)."""
    rate_limit: object
    lasting: int = 1
    """How many times a fault must repeat to outlast the SDK's own retries."""
    env: dict[str, str] = field(default_factory=dict)

    def provider(self, **options) -> Provider:
        return self.make(**options)

    def spec(self, provider: Provider, **fields) -> SandboxSpec:
        return SandboxSpec(image=provider.image(image_ref(provider, self.base_ref)).id, **fields)


def _needs(mode: str) -> None:
    missing = [module for module in SDK[mode] if importlib.util.find_spec(module) is None]
    if missing:
        unavailable(f"not run: {', '.join(missing)} not installed (pip install 'deepgym[{mode}]')")


def _daytona(scratch: Path) -> Iterator[Case]:
    from standins import publish
    from standins.daytona import DaytonaStandIn

    from deepgym.registration import register
    from deepgym.sandbox.daytona import DaytonaProvider

    standin = DaytonaStandIn().start()
    try:
        standin.manifest = publish(standin, ["base", "coin_change"], scratch / "pushed.json")
        settings = {"api_key": standin.api_key, "api_url": standin.api_url, "target": "us"}
        register("daytona", ["base", "coin_change"], standin.manifest, provider=DaytonaProvider(**settings))
        yield Case("daytona", standin, lambda **options: DaytonaProvider(**{**settings, **options}),
                   "base", server_errors=(500, 502, 503), rate_limit=429,
                   env={"DAYTONA_API_KEY": standin.api_key, "DAYTONA_API_URL": standin.api_url,
                        "DAYTONA_TARGET": "us"})
    finally:
        standin.stop()


def _e2b(scratch: Path) -> Iterator[Case]:
    from standins import publish
    from standins.e2b import E2BStandIn

    from deepgym.registration import register
    from deepgym.sandbox.e2b import E2BProvider

    standin = E2BStandIn().start()
    try:
        standin.manifest = publish(standin, ["base", "coin_change"], scratch / "pushed.json")
        settings = {"api_key": standin.api_key, "api_url": standin.url, "sandbox_url": standin.url}
        register("e2b", ["base", "coin_change"], standin.manifest, provider=E2BProvider(**settings))
        # The SDK retries a 429, 502, 503 or 504 three times: a fault that lasts is four of them.
        yield Case("e2b", standin, lambda **options: E2BProvider(**{**settings, **options}), "base",
                   server_errors=(500, 503), rate_limit=429, lasting=4,
                   env={"E2B_API_KEY": standin.api_key, "E2B_API_URL": standin.url, "E2B_SANDBOX_URL": standin.url})
    finally:
        standin.stop()


def _modal(scratch: Path) -> Iterator[Case]:
    from grpclib.const import Status
    from standins import publish
    from standins.modal import ModalStandIn

    from deepgym.registration import register
    from deepgym.sandbox.modal import ModalProvider

    standin = ModalStandIn().start()
    try:
        standin.manifest = publish(standin, ["base", "coin_change"], scratch / "pushed.json")
        settings = {"token_id": standin.token_id, "token_secret": standin.token_secret}
        with environment(MODAL_SERVER_URL=standin.url):  # Modal's client reads its API address from there
            register("modal", ["base", "coin_change"], standin.manifest, provider=ModalProvider(**settings))
        # The client retries UNAVAILABLE and INTERNAL with back-off: a fault that lasts outnumbers the retries.
        yield Case("modal", standin, lambda **options: ModalProvider(**{**settings, **options}), "base",
                   server_errors=(Status.INTERNAL, Status.UNAVAILABLE), rate_limit=Status.RESOURCE_EXHAUSTED,
                   lasting=11, env={"MODAL_SERVER_URL": standin.url, "MODAL_TOKEN_ID": standin.token_id,
                                    "MODAL_TOKEN_SECRET": standin.token_secret})
    finally:
        standin.stop()


CASES = {"daytona": _daytona, "e2b": _e2b, "modal": _modal}



@pytest.fixture(scope="module", params=REMOTE_MODES)
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    """A remote provider's stand-in, started once per test module, with the provider's settings in the
    environment (restored afterwards)."""
    _needs(request.param)
    cases = CASES[request.param](tmp_path_factory.mktemp(request.param))
    made = next(cases)
    try:
        with environment(**made.env):
            yield made
    finally:
        cases.close()


@pytest.fixture(autouse=True)
def _no_faults_left(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "case" in request.fixturenames:
        request.getfixturevalue("case").standin.faults.clear()
