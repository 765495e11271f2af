"""Containers started ahead of need, each handed out once: one pool for strict mode's prewarmed runners and
for desktops.

A fresh container costs the engine a create, an attach and a start (most of a small sample's time; a
desktop's display and browser take seconds more). :class:`ReadyPool` keeps ``size`` ready per kind (a
hashable key that also says how to make one: :class:`~deepgym.sandbox.docker.engine.Launch` for strict
mode). A taker gets one, or None when none is ready (and starts its own); every take tops its kind up again
in the background, off the taker's path. A ready one that is no longer ``usable`` (it died, said something
while it waited, or waited too long) is discarded instead of handed out; a used one is discarded through
the pool too (:meth:`ReadyPool.discard`), so its removal is off the taker's path as well. :meth:`close` waits
for the launches under way and discards everything left, so no container outlives its pool.

**Strict mode** (:class:`~deepgym.sandbox.docker.provider.DockerProvider`). Nothing about a prewarmed
container is shared: it was made from the resolved image id with the sample's own spec, and nothing ran in
it but the runner waiting for its request (the runner starts its budgets and facts only once it has read
the request), so the sample's deadline starts when it asks, never when its container was made. The pool is
emptied when its provider closes, on SIGTERM or SIGINT (:mod:`deepgym.shutdown`), and at the latest when the
interpreter exits; if deepgym is killed, its prewarmed runners read end-of-file on their stdin and exit, and
the next start-up's reaper removes them (their owner label names this process).

**Admission.** Making a ready container is work on the host (the engine's create, attach and start; a
desktop's display and browser), so each refill holds a slot of the owner's admission (:mod:`deepgym.admission`,
given as ``admission``) while it makes its container, and waits for one like a sample: a saturated host makes
no ready containers beside the samples it runs, and never carries more working sandboxes than its bound. A
container that waits holds no slot. Slots bound running work, not living containers (as for an episode idle
between turns): a waiting runner is blocked reading its stdin, none of its clocks runs, and it holds only some
20 MiB of memory (at most ``size`` times :data:`MAX_KINDS` containers per provider). Charging it a slot would
let idle containers keep samples from running, at worst all of them (one pool of ``max_parallel`` per kind
holds every slot of a host whose bound is its CPU count). The sample that takes one runs in it under the
sample's own slot, like a container started for it. Removals have workers of their own, so that a used
container is removed while refills wait for their slots.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from ..admission import Admission, AdmissionCancelled
from ..shutdown import register as on_shutdown
from .base import SandboxError

log = logging.getLogger("deepgym")
PREWARM_VARIABLE = "DEEPGYM_DOCKER_PREWARM"
# Background workers that make containers, and as many that remove them: two keep a pool of a few full at the
# engine's pace.
REFILLERS = 2
# Strict mode keeps at most this many pool sizes ready across all kinds: a client judging many environments
# keeps the ones it used last (each waiting container holds some 20 MiB).
MAX_KINDS = 4

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def prewarm_size(prewarm: int | None, max_parallel: int) -> int:
    """How many containers strict mode keeps ready per kind: ``prewarm``, else ``DEEPGYM_DOCKER_PREWARM``, else
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


class ReadyPool(Generic[K, T]):
    """``size`` ready things per key, each handed out once. ``launch(key)`` makes one (a failure, there or in
    the admission slot, is logged and leaves the next taker to start its own and meet the failure itself);
    ``usable(thing)`` says whether a ready one may still be handed out (its checks of age included);
    ``discard(thing)`` removes one.
    ``max_kinds``: keep at most that many ``size``s ready across keys, dropping the keys taken longest ago.
    ``admission``: whose slot each launch holds (None: launches wait for nothing); its owner may set it later."""

    def __init__(self, size: int, launch: Callable[[K], T], usable: Callable[[T], bool],
                 discard: Callable[[T], None], *, max_kinds: int | None = None, workers: int = REFILLERS,
                 name: str = "deepgym-ready", admission: Admission | None = None):
        self.size = size
        self._launch, self._usable, self._discard = launch, usable, discard
        self.max_kinds = max_kinds
        self._ready: dict[K, deque[T]] = {}
        self._making: dict[K, int] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.admission = admission
        self._makers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{name}-make")
        self._removers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{name}-remove")
        on_shutdown(self.close)  # on SIGTERM/SIGINT, and at the latest when the interpreter exits

    def take(self, key: K) -> T | None:
        """A ready thing of ``key``, or None when none is ready; ``key``'s pool is topped up either way."""
        found = self._pop(key)
        self._top_up(key)
        return found

    @property
    def closed(self) -> bool:
        return self._closed

    def waiting(self) -> dict[K, list[T]]:
        """What waits to be taken, per key (a snapshot)."""
        with self._lock:
            return {key: list(ready) for key, ready in self._ready.items()}

    def discard(self, thing: T) -> None:
        """Remove ``thing`` (one taken from this pool, or started by its taker) in the background; right away
        once the pool is closed."""
        try:
            self._removers.submit(self._discard, thing)
        except RuntimeError:  # the workers are shut down: remove it here
            self._discard(thing)

    def close(self) -> None:
        """Discard every ready thing and wait for the workers: launches under way (whose things are then
        discarded; one still waiting for its slot stops waiting) and removals queued by takers included."""
        with self._lock:
            self._closed = True
            left = [thing for ready in self._ready.values() for thing in ready]
            self._ready.clear()
        for thing in left:
            self.discard(thing)
        self._makers.shutdown(wait=True)  # before the removers: a launch that lands now is discarded through them
        self._removers.shutdown(wait=True)

    def _pop(self, key: K) -> T | None:
        while True:
            with self._lock:
                ready = self._ready.pop(key, None)
                thing = ready.popleft() if ready else None
                if ready is not None:
                    self._ready[key] = ready  # last in the order: the key taken most recently
            if thing is None or self._usable(thing):
                return thing
            self.discard(thing)

    def _evict(self) -> list[T]:
        """The ready things beyond ``max_kinds`` pool sizes, of the keys taken longest ago (under the lock)."""
        evicted: list[T] = []
        while self.max_kinds is not None and sum(map(len, self._ready.values())) > self.max_kinds * self.size:
            evicted.extend(self._ready.pop(next(iter(self._ready))))
        return evicted

    def _top_up(self, key: K) -> None:
        with self._lock:
            if self._closed:
                return
            missing = self.size - len(self._ready.get(key, ())) - self._making.get(key, 0)
            self._making[key] = self._making.get(key, 0) + max(0, missing)
        for _ in range(missing):
            self._makers.submit(self._make, key)

    def _slot(self) -> contextlib.AbstractContextManager[object]:
        """The admission slot a launch holds (waiting ends when the pool closes), or none without admission."""
        if self.admission is None:
            return contextlib.nullcontext()
        return self.admission.slot(cancelled=lambda: self._closed)

    def _make(self, key: K) -> None:
        thing = None
        try:
            with self._slot():
                if not self._closed:
                    thing = self._launch(key)
        except SandboxError as exc:  # the next taker starts its own, and meets the failure itself
            log.debug("starting a ready container failed: %s", exc)
        except AdmissionCancelled:  # closed while it waited for its slot
            pass
        except Exception as exc:  # noqa: BLE001 - this worker's Future is never read: say it here
            log.warning("starting a ready container failed: %r (the next sample starts its own)", exc)
        finally:
            evicted = []
            with self._lock:
                self._making[key] -= 1
                if thing is not None and not self._closed:
                    self._ready.setdefault(key, deque()).append(thing)
                    thing = None
                    evicted = self._evict()
        for unused in evicted + ([thing] if thing is not None else []):  # too many kinds, or closed meanwhile
            self.discard(unused)
