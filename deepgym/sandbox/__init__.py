"""Sandboxes: where untrusted code runs. The interface is in :mod:`deepgym.sandbox.base`; the providers
(``docker``, ``local``, the remote ``daytona``, ``e2b`` and ``modal``, Apple's ``container`` CLI as ``apple``, and
``ray``, which places each sandbox on a node of the user's Ray cluster) are imported lazily by
:func:`make_provider`, so that ``import deepgym`` never loads docker-py, Ray or a provider's SDK."""

from __future__ import annotations

from typing import Any

from .base import (ExecOptions, ExecResult, File, Image, ImageMissing, Mount, NodeLost, Provider, ProviderUnavailable,
                   Sandbox, SandboxError, SandboxLost, SandboxSpec, StartFailure)
from .direct import DIRECT_MODES, make_direct

MODES = (*DIRECT_MODES, "ray")


def make_provider(mode: str, **options: Any) -> Provider:
    """The provider for ``mode``. ``auto`` picks docker when an engine answers, else the one remote provider
    whose credentials are set, else docker anyway, so that every sample says why it cannot run
    (``daemon_unavailable``); it never picks ``local`` or ``ray`` (see :mod:`deepgym.sandbox.auto`). ``ray``
    places each sandbox on a node of the caller's Ray cluster (:mod:`deepgym.sandbox.ray`, docs/ray.md).
    ``options`` go to the provider's constructor (``max_parallel``; docker: ``attach``, ``docker_host``, which
    also makes ``auto`` docker; local: ``allow_local``; daytona, e2b and modal: see
    :class:`~deepgym.sandbox.daytona.DaytonaProvider`, :class:`~deepgym.sandbox.e2b.E2BProvider`,
    :class:`~deepgym.sandbox.modal.ModalProvider`; ray: :class:`~deepgym.sandbox.ray.RayProvider`)."""
    if mode == "ray":
        from .ray import RayProvider

        return RayProvider(**options)
    if mode in DIRECT_MODES:
        return make_direct(mode, **options)
    raise ValueError(f"unknown mode {mode!r}; known modes: {', '.join(MODES)}")


__all__ = ["MODES", "ExecOptions", "ExecResult", "File", "Image", "ImageMissing", "Mount", "NodeLost", "Provider",
           "ProviderUnavailable", "Sandbox", "SandboxError", "SandboxLost", "SandboxSpec", "StartFailure",
           "make_provider"]
