"""``mode="auto"``: docker when an engine answers, else the one provider whose credentials are set, else docker
anyway so that every sample says why it cannot run; never local."""

from __future__ import annotations

import pytest

from deepgym import DeepGym, NoVerdictError
from deepgym.sandbox.auto import choose_mode


def no_engine(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


@pytest.mark.docker
def test_auto_is_docker_when_an_engine_answers(monkeypatch):
    monkeypatch.setenv("DAYTONA_API_KEY", "set-but-docker-wins")
    assert choose_mode() == "docker"


def test_auto_is_the_provider_whose_credentials_are_set_without_an_engine(monkeypatch, tmp_path):
    pytest.importorskip("daytona")
    no_engine(monkeypatch, tmp_path)
    monkeypatch.setenv("DAYTONA_API_KEY", "k")
    assert choose_mode() == "daytona"
    with DeepGym(mode="auto") as gym:
        assert gym.backend == "daytona"


def test_auto_without_engine_or_credentials_says_why_on_every_sample(monkeypatch, tmp_path):
    no_engine(monkeypatch, tmp_path)
    monkeypatch.delenv("DAYTONA_API_KEY", raising=False)
    monkeypatch.setenv("DEEPGYM_ALLOW_LOCAL", "1")  # even allowed, auto never runs unisolated
    with DeepGym(mode="auto") as gym:
        assert gym.backend == "docker"
        with pytest.raises(NoVerdictError) as caught:
            gym.run("coin_change", "```python\ndef coin_change(coins, amount):\n    return 0\n```")
    assert caught.value.error_type == "daemon_unavailable"
