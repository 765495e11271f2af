"""Names of environment images registered with a remote provider (a Daytona snapshot, an E2B template, a Modal
image), and ``deepgym images register``.

A registered image is named by the environment's content hash, ``deepgym-<env>-<hash>``, so registering is
idempotent (a usable image under that name holds the same files) and a stale one cannot be picked up: after the
environment's files change, the current name simply does not exist yet and every sample says how to register
it. A name can exist and still be unusable: a Daytona snapshot whose pull failed keeps its name in state
``error``, an E2B template's name is bound when its build is requested whatever the build's outcome, and a
Modal image registered by an older deepgym keeps the runner as its entry point. Each provider checks for that
and makes such an image again (:class:`Registered` says so), so that running ``images register`` again after
fixing the cause repairs it. Registration reads the digest-pinned references of ``deepgym images push``'s
manifest, never a tag.
"""

from __future__ import annotations

import math
from pathlib import Path

from .errors import ConfigurationError
from .images import BASE, content_hash
from .pushed import DEFAULT_MANIFEST, read_manifest
from .sandbox.base import Registered, Resources

REGISTERING_PROVIDERS = ("daytona", "e2b", "modal")
def registered_name(env_id: str) -> str:
    """The provider-side name of ``env_id``'s image: its content hash makes it unique and idempotent."""
    return f"deepgym-{env_id.replace('_', '-')}-{content_hash(env_id)}"


def resources_for(env_id: str) -> Resources:
    """Whole CPUs and GiB covering the environment's limits plus the runner's margin."""
    from .environments import RUNNER_MEMORY_MB

    if env_id == BASE:
        return Resources(cpus=1, memory_gib=1)
    from .environments import load_environment

    limits = load_environment(env_id).limits
    return Resources(cpus=max(1, math.ceil(limits.cpus)),
                     memory_gib=max(1, math.ceil((limits.memory_mb + RUNNER_MEMORY_MB) / 1024)))


def register(provider_name: str, env_ids: list[str], manifest: str | Path = DEFAULT_MANIFEST, *,
             provider=None) -> list[tuple[str, str, Registered]]:
    """Register each environment's pushed image with ``provider_name``. Returns (environment, registered name,
    what registering it did) per environment."""
    if provider_name not in REGISTERING_PROVIDERS:
        raise ConfigurationError(f"`images register` knows {', '.join(REGISTERING_PROVIDERS)}, not {provider_name!r}")
    pushed = read_manifest(manifest)
    missing = [env for env in env_ids if env not in pushed]
    if missing:
        raise ConfigurationError(f"{manifest} has no pushed image for {', '.join(missing)}; push it first with "
                                 f"`deepgym images push --registry R {' '.join(missing)}`")
    if provider is None:
        from .sandbox import make_provider

        provider = make_provider(provider_name)
    try:
        return [(env, registered_name(env), provider.register_image(registered_name(env), pushed[env].ref,
                                                                    resources_for(env)))
                for env in env_ids]
    finally:
        provider.close()
