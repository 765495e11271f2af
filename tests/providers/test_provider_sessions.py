"""Sessions go through the Provider interface only: shell_fix_config's reference episode (a supervised service
that must survive into grading) scores 1 on each provider below and its known-wrong one 0, and the episode's
commands reach the provider (Daytona's stand-in, Apple's fake ``container`` CLI)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import environment, unavailable  # noqa: E402

from deepgym import DeepGym  # noqa: E402

pytestmark = pytest.mark.docker
ENV = "shell_fix_config"


def _daytona(scratch: Path) -> Iterator[Callable[[], bool]]:
    if importlib.util.find_spec("daytona") is None:
        unavailable("daytona is not installed (pip install 'deepgym[daytona]')")
    from standins import publish
    from standins.daytona import DaytonaStandIn

    from deepgym.registration import register
    from deepgym.sandbox.daytona import DaytonaProvider

    standin = DaytonaStandIn().start()
    try:
        settings = {"api_key": standin.api_key, "api_url": standin.api_url, "target": "us"}
        register("daytona", [ENV], publish(standin, ["base", ENV], scratch / "pushed.json"),
                 provider=DaytonaProvider(**settings))
        with environment(DAYTONA_API_KEY=standin.api_key, DAYTONA_API_URL=standin.api_url, DAYTONA_TARGET="us"):
            yield lambda: any(path.endswith("/process/execute") for _, path, _ in standin.requests)
    finally:
        standin.stop()


def _apple(scratch: Path) -> Iterator[Callable[[], bool]]:
    from standins.apple import AppleFake

    from deepgym.images import build

    build([ENV])
    fake = AppleFake(scratch / "calls.jsonl")
    try:
        with environment(**fake.variables(), DEEPGYM_APPLE_CONTAINER=fake.cli):
            yield lambda: any(call[0] == "exec" for call in fake.calls())
    finally:
        fake.stop()


@pytest.fixture(params=["daytona", "apple"])
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Callable[[], bool]]]:
    """The provider's mode, set up for DeepGym(mode=...), and whether an episode's command has reached it."""
    for reached in {"daytona": _daytona, "apple": _apple}[request.param](tmp_path):
        yield request.param, reached


def test_a_session_with_a_service_runs_on_the_provider(provider):
    from deepgym.environments import load_environment
    from deepgym.authoring.replay import action_sequences, replay

    mode, reached = provider
    env = load_environment(ENV)
    with DeepGym(mode=mode) as gym:
        right = replay(gym, env, action_sequences(env, "reference")[1], variant=1)
        wrong = replay(gym, env, action_sequences(env, "wrong_own_background_server")[1], variant=1)
    assert (right.score, right.runtime) == (1.0, mode), right
    assert (wrong.score, wrong.error_type) == (0.0, "service_failed"), wrong
    assert reached(), f"the episode's commands did not go through {mode}"
