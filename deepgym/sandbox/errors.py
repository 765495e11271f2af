"""The sandbox interface's typed errors: every provider translates its client's failures into these, in one
place, and each names the no-verdict type of :data:`deepgym.runner.protocol.ERROR_TYPES` it becomes. They are
re-exported by :mod:`deepgym.sandbox.base` and :mod:`deepgym.sandbox`."""

from __future__ import annotations

from typing import ClassVar

from ..errors import DeepGymError


class SandboxError(DeepGymError):
    """An infrastructure failure of a sandbox or its provider. ``error_type`` is a no-verdict type:
    ``daemon_unavailable``, ``image_missing``, ``sandbox_start_failure`` or ``sandbox_lost``."""

    error_type: ClassVar[str] = "sandbox_lost"

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"{self.error_type}: {reason}")


class ProviderUnavailable(SandboxError):
    """The engine or the provider's API cannot be reached, or refused our credentials."""

    error_type = "daemon_unavailable"


class ImageMissing(SandboxError):
    """The provider has no such image."""

    error_type = "image_missing"


class StartFailure(SandboxError):
    """The sandbox could not be created or started."""

    error_type = "sandbox_start_failure"


class SandboxLost(SandboxError):
    """The sandbox was removed, killed or lost its connection after it started."""

    error_type = "sandbox_lost"


class NodeLost(SandboxLost):
    """The machine that held the sandbox was lost with it (a Ray node or its worker died, or stopped answering):
    a failure of the infrastructure whatever the sandbox's code did, since nothing in a sandbox can reach its
    machine. Never scored, not even in an episode's action phase."""
