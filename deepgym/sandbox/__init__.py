"""Sandboxes: where untrusted code runs. The interface is in :mod:`deepgym.sandbox.base`; the providers
(``docker``, ``local``, and later the remote ones) are imported lazily by :func:`make_provider`, so that
``import deepgym`` never loads docker-py."""

from __future__ import annotations

from typing import Any

from .base import (ExecOptions, ExecResult, File, Image, ImageMissing, Provider, ProviderUnavailable, Sandbox,
                   SandboxError, SandboxLost, SandboxSpec, StartFailure)

MODES = ("auto", "docker", "local")


def make_provider(mode: str, **options: Any) -> Provider:
    """The provider for ``mode``. ``auto`` is docker: it is the only isolating provider on one host, and when
    no engine answers every sample says so (``daemon_unavailable``) instead of silently running unconfined.
    ``options`` go to the provider's constructor (``max_parallel``; docker: ``attach``, ``docker_host``;
    local: ``allow_local``)."""
    if mode in ("auto", "docker"):
        from .docker import DockerProvider

        return DockerProvider(**options)
    if mode == "local":
        from .local import LocalProvider

        return LocalProvider(**options)
    raise ValueError(f"unknown mode {mode!r}; known modes: {', '.join(MODES)}")


__all__ = ["MODES", "ExecOptions", "ExecResult", "File", "Image", "ImageMissing", "Provider", "ProviderUnavailable",
           "Sandbox", "SandboxError", "SandboxLost", "SandboxSpec", "StartFailure", "make_provider"]
