"""The node's side of an episode over Ray: :class:`EpisodeHost`, the Ray actor that holds one episode's sandbox on
the node Ray placed it on, for the episode's whole life.

The actor asks for one unit of the sandbox resource, like a single-turn sample, and keeps it while it lives, so
a node never holds more episodes and samples at once than it offers units. It makes the sandbox with the node's
own provider, in the image the caller resolved only (:func:`~deepgym.sandbox.ray.node.checked_image`), and runs
every step there. Each command takes a slot of the node's host-wide admission, as a docker-mode episode does.

The actor is owned by the caller, so Ray ends it when the caller dies; Ray ends it without its exit handlers,
and a sandbox would outlive it. So the actor starts the node's reaper for its sandbox
(:mod:`deepgym.sandbox.ray.reaper`), a process of its own that removes the sandbox as soon as the actor is gone.
Failures the node sees come back as :class:`~deepgym.sandbox.ray.node.Failed`, never as exceptions, so their type
and reason cross Ray unchanged.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from ..base import ExecOptions, ExecResult, File, Sandbox, SandboxError, SandboxSpec, StartFailure
from .reaper import start_reaper
from .node import Failed, Started, checked_image, local_provider, node_id

EPISODE_LABEL = "deepgym.episode"
"""The label that names one episode's sandbox on its node, for its reaper."""


@dataclass(frozen=True)
class Absent:
    """The file asked for is not in the sandbox (a FileNotFoundError on the caller's side)."""

    path: str


class EpisodeHost:
    """One episode's sandbox on this node (a Ray actor; :class:`~deepgym.sandbox.ray.session.RaySandbox` is the
    caller's handle)."""

    def __init__(self) -> None:
        self.node = node_id()
        self._box: Sandbox | None = None
        self._reaper: int | None = None

    def open(self, spec: SandboxSpec) -> Started | Failed:
        """Make the episode's sandbox in the caller's image, and start its reaper."""
        try:
            provider, _ = local_provider()
            image = checked_image(provider, spec, self.node)
            episode = os.urandom(8).hex()
            with self._slot():
                self._box = provider.create(replace(spec, image=image.id, image_labels={},
                                                    labels={**spec.labels, EPISODE_LABEL: episode}))
        except SandboxError as exc:
            return self._failed(exc)
        try:
            self._reaper = start_reaper(EPISODE_LABEL, episode)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self.close()
            return self._failed(StartFailure(f"the node could not start the episode's reaper: {exc}"))
        return Started(self.node, image.id)

    def sandbox_id(self) -> str:
        """The sandbox's id on this node's provider (a container id for docker)."""
        return self._held().id

    def exec(self, argv: Sequence[str], options: ExecOptions) -> ExecResult | Failed:
        try:
            with self._slot():
                return self._held().exec(argv, options)
        except SandboxError as exc:
            return self._failed(exc)

    def put(self, path: str, file: File) -> Failed | None:
        try:
            self._held().put(path, file)
        except SandboxError as exc:
            return self._failed(exc)
        return None

    def get(self, path: str) -> File | Absent | Failed:
        try:
            return self._held().get(path)
        except FileNotFoundError:
            return Absent(path)
        except SandboxError as exc:
            return self._failed(exc)

    def close(self) -> None:
        """Remove the sandbox, then stop its reaper, which has nothing left to do."""
        box, self._box = self._box, None
        if box is not None:
            box.close()
        if self._reaper is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._reaper, signal.SIGTERM)

    # ------------------------------------------------------------------------------------------------------

    def _held(self) -> Sandbox:
        if self._box is None:
            raise RuntimeError("the episode's sandbox is not open on this node")
        return self._box

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        _, admission = local_provider()
        with admission.slot() if admission is not None else contextlib.nullcontext():
            yield

    def _failed(self, exc: SandboxError) -> Failed:
        return Failed(self.node, exc.error_type, f"on Ray node {self.node}: {exc.reason}")
