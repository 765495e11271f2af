"""Runtimes: where the runner runs. Each one is a :class:`Runtime` reporting an
:class:`~deepgym.verdict.Observation`; none of them decides a verdict."""

from __future__ import annotations

from .base import Runtime

MODES = ("auto", "docker", "local")


def make_runtime(mode: str, **options) -> Runtime:
    """The runtime for ``mode``. ``auto`` is docker: it is the only isolating runtime on one host, and when
    no engine answers every sample says so (``daemon_unavailable``) instead of silently running unconfined."""
    if mode in ("auto", "docker"):
        from .docker import DockerRuntime

        return DockerRuntime(**options)
    if mode == "local":
        from .local import LocalRuntime

        return LocalRuntime(**options)
    raise ValueError(f"unknown mode {mode!r}; known modes: {', '.join(MODES)}")


__all__ = ["MODES", "Runtime", "make_runtime"]
