"""Strict mode at the engine's limit: docker containers created, attached and started ahead of need, each one
used for exactly one sample.

A fresh container per sample costs the engine a create, an attach, a start (most of a small sample's time),
a wait and a remove. :class:`Prewarm` keeps a few containers per kind (:func:`key`: the image id, every limit
and label of the spec, the command, its user, folder and environment) started and attached, their main
process (the runner) blocked on reading its stdin. A sample takes one, sends its request, reads the report,
and leaves; the container is removed, and a replacement made, by background workers, off the sample's path
and outside its admission slot. The sample's deadline starts when it asks, never when its container was made.

Nothing about the container is shared: it was made from the resolved image id with the sample's own spec,
and nothing ran in it but the runner waiting for its request (the runner starts its budgets and facts only
once it has read the request). A container found dead or closed while it waited is thrown away unused;
one that waited longer than :data:`MAX_IDLE_S` too. The pool is emptied when its provider closes, on
SIGTERM or SIGINT (:mod:`deepgym.shutdown`), and at the latest when the interpreter exits; if deepgym is
killed, its prewarmed runners read end-of-file on their stdin and exit, and the next start-up's reaper removes
them (their owner label names this process).

**Admission.** A waiting container holds no admission slot (:mod:`deepgym.admission`), and neither does its
refill; the sample that takes one runs in it under the sample's own slot, like a container started for it.
Admission bounds the sandboxes that compete for the host's CPUs, because that competition is what makes a
sample's limits unfair (a busy loop that escapes its timeout, ``host_overloaded``). A waiting runner competes
for none: it is blocked reading its stdin, none of its clocks runs, and it holds only some 20 MiB of memory
(at most ``size`` times :data:`MAX_KINDS` containers per provider). Charging it a slot would let idle
containers keep samples waiting (one pool of ``max_parallel`` per kind holds every slot of a host whose bound
is its CPU count), and handing that slot to the sample that takes it would make one process's pool decide
when other processes' samples run. Making a container is the engine's work (create, attach, start), not a
sandbox's: at most :data:`REFILLERS` per provider do it at once, and a sample whose CPU it took is judged by
the runner's fair-timeout rule like one slowed by any other load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .. import shutdown
from .base import ExecOptions, ExecResult, SandboxError, SandboxSpec

if TYPE_CHECKING:
    from .docker import DockerProvider

log = logging.getLogger("deepgym")
PREWARM_VARIABLE = "DEEPGYM_DOCKER_PREWARM"
# Background workers that make and remove containers: two keep a pool of a few full at the engine's pace.
REFILLERS = 2
# A prewarmed container older than this is removed instead of used (a long-idle kind holds memory for nothing).
MAX_IDLE_S = 600.0
# At most this many pool sizes are kept ready across all kinds: a client judging many environments keeps the
# ones it used last (each waiting container holds some 20 MiB).
MAX_KINDS = 4


def prewarm_size(prewarm: int | None, max_parallel: int) -> int:
    """How many containers to keep ready per kind: ``prewarm``, else ``DEEPGYM_DOCKER_PREWARM``, else
    ``max_parallel`` (one for each sample that may run at once); 0 turns prewarming off."""
    if prewarm is None:
        text = os.environ.get(PREWARM_VARIABLE)
        if text is None:
            return max_parallel
        try:
            prewarm = int(text)
        except ValueError:
            from ..errors import ConfigurationError

            raise ConfigurationError(f"{PREWARM_VARIABLE}={text!r} is not a whole number; set it to how many "
                                     f"containers to keep started per environment, or 0 to start each on "
                                     f"demand") from None
    if prewarm < 0:
        raise ValueError(f"prewarm must be 0 or more, got {prewarm}")
    return prewarm


@dataclasses.dataclass
class Attached:
    """A started container whose main process waits on its attached stdin."""

    container: str
    stream: Any
    sock: socket.socket
    made: float

    def usable(self) -> bool:
        """Whether it still waits for its request: a runner writes nothing before it has one, so a stream with
        anything to read has ended (the container died or was removed) and must not be used."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable and time.monotonic() - self.made < MAX_IDLE_S

    def close_stream(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            self.stream.close()


def key(spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> Hashable:
    """What makes two samples' containers interchangeable: everything they are created with."""
    made_with = tuple((f.name, getattr(spec, f.name)) for f in dataclasses.fields(spec))
    return (tuple((name, tuple(sorted(value.items())) if isinstance(value, dict) else value)
                  for name, value in made_with),
            tuple(argv), options.user, options.cwd, tuple(sorted(options.env.items())))


class Prewarm:
    """The prewarmed containers of one :class:`~deepgym.sandbox.docker.DockerProvider`, ``size`` per kind."""

    def __init__(self, provider: DockerProvider, size: int):
        self.provider = provider
        self.size = size
        self._ready: dict[Hashable, deque[Attached]] = {}
        self._making: dict[Hashable, int] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._workers = ThreadPoolExecutor(max_workers=REFILLERS, thread_name_prefix="deepgym-prewarm")
        shutdown.register(self.close)  # on SIGTERM/SIGINT, and at the latest when the interpreter exits

    def run(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions, started: float) -> ExecResult:
        """One sample in a prewarmed container (or, when none is ready, one started now), by the deadline
        ``started + options.timeout_s``."""
        kind = key(spec, argv, options)
        box = self._take(kind)
        self._top_up(kind, spec, argv, options)
        if box is None:
            box = self.provider.start_attached(spec, argv, options)
        try:
            return self.provider.finish_attached(box, options, started)
        finally:
            self._discard(box)

    def close(self) -> None:
        """Remove every prewarmed container and wait for the workers (removals queued by samples included)."""
        with self._lock:
            self._closed = True
            boxes = [box for ready in self._ready.values() for box in ready]
            self._ready.clear()
        for box in boxes:
            self._discard(box)
        self._workers.shutdown(wait=True)

    def _take(self, kind: Hashable) -> Attached | None:
        while True:
            with self._lock:
                ready = self._ready.pop(kind, None)
                box = ready.popleft() if ready else None
                if ready is not None:
                    self._ready[kind] = ready  # last in the order: the kind used most recently
            if box is None or box.usable():
                return box
            self._discard(box)

    def _evict(self) -> list[Attached]:
        """The ready containers beyond MAX_KINDS pool sizes, of the kinds used longest ago (under the lock)."""
        evicted = []
        while sum(len(ready) for ready in self._ready.values()) > MAX_KINDS * self.size:
            oldest = next(iter(self._ready))
            evicted.extend(self._ready.pop(oldest))
        return evicted

    def _top_up(self, kind: Hashable, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> None:
        with self._lock:
            if self._closed:
                return
            missing = self.size - len(self._ready.get(kind, ())) - self._making.get(kind, 0)
            self._making[kind] = self._making.get(kind, 0) + max(0, missing)
        for _ in range(missing):
            self._workers.submit(self._make, kind, spec, argv, options)

    def _make(self, kind: Hashable, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> None:
        box = None
        try:
            if not self._closed:
                box = self.provider.start_attached(spec, argv, options)
        except SandboxError as exc:  # the next sample starts its own, and meets the failure itself
            log.debug("prewarming a container failed: %s", exc)
        finally:
            evicted = []
            with self._lock:
                self._making[kind] -= 1
                if box is not None and not self._closed:
                    self._ready.setdefault(kind, deque()).append(box)
                    box = None
                    evicted = self._evict()
        for unused in evicted + ([box] if box is not None else []):  # too many kinds, or closed meanwhile
            self._discard(unused)

    def _discard(self, box: Attached) -> None:
        """Close the container's stream and remove it in the background (right away once closing)."""
        box.close_stream()
        try:
            self._workers.submit(self.provider._remove, box.container)
        except RuntimeError:  # the workers are shut down: remove it here
            self.provider._remove(box.container)
