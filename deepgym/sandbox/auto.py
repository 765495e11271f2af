"""``mode="auto"``: which provider judges when the user did not say.

Docker when an engine answers (the images are local, nothing is billed); else the one remote provider whose
credentials are in the environment; else docker anyway, so that every sample says why it cannot run
(``daemon_unavailable``, naming the engine). Never ``local``: auto is never unisolated. With credentials for
several providers and no engine the choice would be a guess, so auto refuses it and asks for a mode.
"""

from __future__ import annotations

import os

from ..errors import ConfigurationError

# Each remote mode and the environment variable that says its account is configured.
CREDENTIALS = {"daytona": "DAYTONA_API_KEY", "e2b": "E2B_API_KEY", "modal": "MODAL_TOKEN_ID"}


def engine_answers() -> bool:
    """Whether the Docker engine DOCKER_HOST (or the default socket) names answers a ping."""
    import docker
    import docker.errors
    import requests.exceptions

    try:
        client = docker.APIClient(**docker.utils.kwargs_from_env(), version="1.41", timeout=5)
    except docker.errors.DockerException:
        return False
    try:
        return bool(client.ping())
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
        return False
    finally:
        client.close()


def choose_mode() -> str:
    """The mode ``auto`` stands for on this host now."""
    if engine_answers():
        return "docker"
    configured = [mode for mode, variable in CREDENTIALS.items() if os.environ.get(variable)]
    if len(configured) > 1:
        raise ConfigurationError(f"mode 'auto' found no Docker engine and credentials for several providers "
                                 f"({', '.join(configured)}); choose one: mode={configured[0]!r}")
    return configured[0] if configured else "docker"
