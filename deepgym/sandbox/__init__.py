"""Sandboxes: where untrusted code runs. The interface is in :mod:`deepgym.sandbox.base`; the providers
(``docker``, ``local``, the remote ``daytona``, ``e2b`` and ``modal``, Apple's ``container`` CLI as ``apple``) are imported lazily by :func:`make_provider`, so that
``import deepgym`` never loads docker-py or a provider's SDK."""

from __future__ import annotations

from typing import Any

from .base import (ExecOptions, ExecResult, File, Image, ImageMissing, Mount, Provider, ProviderUnavailable, Sandbox,
                   SandboxError, SandboxLost, SandboxSpec, StartFailure)

MODES = ("auto", "docker", "local", "daytona", "e2b", "modal", "apple")


def make_provider(mode: str, **options: Any) -> Provider:
    """The provider for ``mode``. ``auto`` picks docker when an engine answers, else the one remote provider
    whose credentials are set, else docker anyway, so that every sample says why it cannot run
    (``daemon_unavailable``); it never picks ``local`` (see :mod:`deepgym.sandbox.auto`). ``options`` go to the
    provider's constructor (``max_parallel``; docker: ``attach``, ``docker_host``, which also makes ``auto``
    docker; local: ``allow_local``; daytona, e2b and modal: see :class:`~deepgym.sandbox.daytona.DaytonaProvider`,
    :class:`~deepgym.sandbox.e2b.E2BProvider`, :class:`~deepgym.sandbox.modal.ModalProvider`)."""
    if mode == "auto":
        from .auto import choose_mode

        mode = "docker" if options.get("docker_host") else choose_mode()
    if mode == "docker":
        from .docker import DockerProvider

        return DockerProvider(**options)
    if mode == "local":
        from .local import LocalProvider

        return LocalProvider(**options)
    if mode == "daytona":
        from .daytona import DaytonaProvider

        return DaytonaProvider(**options)
    if mode == "e2b":
        from .e2b import E2BProvider

        return E2BProvider(**options)
    if mode == "modal":
        from .modal import ModalProvider

        return ModalProvider(**options)
    if mode == "apple":
        from .apple import AppleProvider

        return AppleProvider(**options)
    raise ValueError(f"unknown mode {mode!r}; known modes: {', '.join(MODES)}")


__all__ = ["MODES", "ExecOptions", "ExecResult", "File", "Image", "ImageMissing", "Mount", "Provider",
           "ProviderUnavailable", "Sandbox", "SandboxError", "SandboxLost", "SandboxSpec", "StartFailure",
           "make_provider"]
