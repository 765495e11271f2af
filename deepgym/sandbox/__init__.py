"""Sandboxes: where untrusted code runs. The interface is in :mod:`deepgym.sandbox.base`; the providers
(``docker``, ``local``, and later the remote ones) are imported lazily by :func:`make_provider`."""

from __future__ import annotations

from .base import (ExecOptions, ExecResult, File, Image, ImageMissing, Provider, ProviderUnavailable, Sandbox,
                   SandboxError, SandboxLost, SandboxSpec, StartFailure)

__all__ = ["ExecOptions", "ExecResult", "File", "Image", "ImageMissing", "Provider", "ProviderUnavailable",
           "Sandbox", "SandboxError", "SandboxLost", "SandboxSpec", "StartFailure"]
