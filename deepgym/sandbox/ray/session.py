"""The caller's side of an episode over Ray: :class:`RaySandbox`, a sandbox whose every call goes to the actor that
holds it on one node (:class:`~deepgym.sandbox.ray.host.EpisodeHost`).

The episode lives on the node Ray placed its actor on, for its whole life: every step is a call to that actor,
and nothing moves. The actor is the caller's, so it ends with the caller's process, and the node's reaper removes
its sandbox then (:mod:`deepgym.sandbox.ray.reaper`). :meth:`RaySandbox.close` removes the sandbox and ends the
actor on every other path. A node or actor lost while the episode lives is ``sandbox_lost``
(:mod:`deepgym.sandbox.ray.errors`), never a 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Protocol

from ..base import ExecOptions, ExecResult, File, Sandbox, SandboxLost, SandboxSpec
from .errors import answered
from .host import Absent, EpisodeHost
from .node import Failed, Started

FILE_TIMEOUT_S = 120.0
"""How long a file's copy to or from the node may take."""
CALLS_AT_ONCE = 16
"""How many calls the actor serves at once: a sandbox takes concurrent execs, and a close must not wait behind a
running command (it cuts it short, as every provider's close does)."""
CLOSE_TIMEOUT_S = 60.0
"""How long the actor may take to remove the sandbox before it is ended anyway (its reaper removes it then)."""


class Placer(Protocol):
    """What an episode needs of :class:`~deepgym.sandbox.ray.provider.RayProvider`: the resource its actor asks
    for, and the wait for a call's answer that translates Ray's failures."""

    resource: str

    def answer(self, ray: Any, ref: Any, started: Started | None, timeout_s: float = 0.0) -> Any: ...

    async def aanswer(self, ray: Any, ref: Any, started: Started | None, timeout_s: float = 0.0) -> Any: ...


def open_episode(provider: Placer, ray: Any, spec: SandboxSpec) -> RaySandbox:
    """An actor holding a new sandbox of ``spec``, placed by Ray on a node that gives it one unit of the resource.
    Raises the SandboxError the node or Ray gave; no actor is left behind then."""
    actor = ray.remote(EpisodeHost).options(num_cpus=0, resources={provider.resource: 1}, max_restarts=0,
                                            max_task_retries=0, max_concurrency=CALLS_AT_ONCE,
                                            scheduling_strategy="SPREAD").remote()
    try:
        box = RaySandbox(provider, ray, actor, _unwrapped(provider.answer(ray, actor.open.remote(spec), None)))
        box.id = box.call(actor.sandbox_id, timeout_s=0.0)
    except BaseException:
        with contextlib.suppress(Exception):  # noqa: BLE001 - an actor that is gone already needs no ending
            ray.kill(actor, no_restart=True)
        raise
    return box


class RaySandbox(Sandbox):
    """One episode's sandbox on ``started.node``, every call forwarded to ``actor``."""

    def __init__(self, provider: Placer, ray: Any, actor: Any, started: Started):
        self.id = ""
        self.node = started.node
        self.image_id = started.image_id
        self._provider = provider
        self._ray = ray
        self._actor: Any = actor
        self._started = started

    def call(self, method: Any, *args: Any, timeout_s: float) -> Any:
        """The actor's answer to ``method(*args)``, by ``timeout_s`` and the answer margin; a Failed answer is
        raised as the error it names."""
        return _unwrapped(self._provider.answer(self._ray, method.remote(*args), self._started, timeout_s))

    async def acall(self, method: Any, *args: Any, timeout_s: float) -> Any:
        """:meth:`call` awaited on the actor's ref, holding no thread."""
        return _unwrapped(await self._provider.aanswer(self._ray, method.remote(*args), self._started, timeout_s))

    def exec(self, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        return self.call(self._held().exec, list(argv), options, timeout_s=options.timeout_s)

    async def aexec(self, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        """:meth:`exec` awaited on the actor's ref: a step waiting for its node holds no thread."""
        return await self.acall(self._held().exec, list(argv), options, timeout_s=options.timeout_s)

    def put(self, path: str, file: File) -> None:
        self.call(self._held().put, path, file, timeout_s=FILE_TIMEOUT_S)

    def get(self, path: str) -> File:
        got = self.call(self._held().get, path, timeout_s=FILE_TIMEOUT_S)
        if isinstance(got, Absent):
            raise FileNotFoundError(path)
        return got

    def close(self) -> None:
        """Have the actor remove the sandbox, then end the actor. Never raises."""
        actor, self._actor = self._actor, None
        if actor is None:
            return
        with contextlib.suppress(Exception):  # noqa: BLE001 - a lost actor's sandbox is its reaper's
            self._ray.get(actor.close.remote(), timeout=CLOSE_TIMEOUT_S)
        with contextlib.suppress(Exception):  # noqa: BLE001 - an actor that is gone already needs no ending
            self._ray.kill(actor, no_restart=True)

    def _held(self) -> Any:
        if self._actor is None:
            raise SandboxLost(f"the episode's sandbox on Ray node {self.node} was closed")
        return self._actor


def _unwrapped(reply: Any) -> Any:
    """The actor's answer; a Failed answer is raised as the error it names."""
    if isinstance(reply, Failed):
        raise answered(reply)
    return reply
