"""The runtime interface: run the runner for one request and report what happened.

A runtime only observes. It reports infrastructure failures it is sure of (``infra_error``: the engine is
unreachable, the image is missing, the sandbox did not start or vanished) and otherwise hands over the
runner's stdout, its exit status, whether the sandbox was OOM-killed and whether the host's deadline fired.
:func:`deepgym.verdict.classify` decides the rest, the same way for every runtime.

A remote provider (Daytona, E2B, Modal) fits the same method: create a sandbox from the pushed image,
upload the request, execute ``python3 -m deepgym_runner --request FILE`` with the host deadline, read its
stdout, delete the sandbox. Long-lived multi-turn sessions get their own interface on top of a runtime's
sandbox; they do not change how a sample is judged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ..environments import Environment
    from ..runner.protocol import Request
    from ..verdict import Observation


class Runtime(ABC):
    """Runs the runner for one request. Thread-safe: ``run_batch`` calls :meth:`judge` from many threads."""

    name: ClassVar[str]

    @abstractmethod
    def judge(self, env: Environment, request: Request) -> Observation:
        """Run the runner for ``request`` in a fresh sandbox of ``env`` and report what was observed. Never
        raises for a failure of the sandbox or the infrastructure: that goes into the observation."""

    def close(self) -> None:
        """Release everything this runtime created (containers, connections). Idempotent."""
