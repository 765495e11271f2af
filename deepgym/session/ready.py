"""Desktops made ready ahead of need, per client (``DEEPGYM_DESKTOP_PREWARM`` per kind, default 1): started up
to ``ready`` (the display answers, the app's page is loaded and waits on the recorder, which listens), so an
episode's start takes one instead of waiting for a browser. Each is handed out once and removed after its
episode: never reused. The client owns its pool and closes it before its provider
(:meth:`deepgym.DeepGym.close`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque

from ..errors import ConfigurationError
from ..sandbox import Provider, SandboxError, SandboxSpec
from ..shutdown import register
from .desktop import READY_S, Desktop, launch

PREWARM_VARIABLE = "DEEPGYM_DESKTOP_PREWARM"
MAX_IDLE_S = 600.0


def prewarm_size() -> int:
    """How many ready desktops to keep per kind (0: each episode starts its own)."""
    text = os.environ.get(PREWARM_VARIABLE, "1")
    try:
        size = int(text)
    except ValueError:
        raise ConfigurationError(f"{PREWARM_VARIABLE}={text!r} is not a whole number; set it to how many desktop "
                                 f"containers to keep ready per environment, or 0 to start each on demand") from None
    return max(0, size)


class ReadyDesktops:
    """Ready desktop containers per kind (image id, spec, screen), each handed out once. A background thread
    refills after every take; what is left is removed at :meth:`close`: when the client closes, on SIGTERM or
    SIGINT (:mod:`deepgym.shutdown`), at exit, or by the next start's reaper if this process is killed."""

    def __init__(self, provider: Provider, size: int):
        self.provider = provider
        self.size = size
        self.ready: dict[str, deque[Desktop]] = {}
        self.lock = threading.Lock()
        self.closed = False
        self.filling: set[str] = set()
        self.fillers: list[threading.Thread] = []
        register(self.close)  # on SIGTERM/SIGINT, and at the latest when the interpreter exits

    def take(self, spec: SandboxSpec, screen: tuple[int, int]) -> Desktop | None:
        key = repr((spec, screen))
        found = None
        with self.lock:
            queue = self.ready.setdefault(key, deque())
            while queue and found is None:
                desktop = queue.popleft()
                if desktop.alive() and time.monotonic() - desktop.made < MAX_IDLE_S:
                    found = desktop
                else:
                    threading.Thread(target=desktop.close, daemon=True).start()
        self._refill(key, spec, screen)
        return found

    def _refill(self, key: str, spec: SandboxSpec, screen: tuple[int, int]) -> None:
        with self.lock:
            if self.closed or key in self.filling or len(self.ready[key]) >= self.size:
                return
            self.filling.add(key)

        def fill() -> None:
            try:
                while True:
                    with self.lock:
                        if self.closed or len(self.ready[key]) >= self.size:
                            return
                    desktop = launch(self.provider, spec, screen)
                    with self.lock:
                        if self.closed:
                            break
                        self.ready[key].append(desktop)
                        desktop = None
                if desktop is not None:
                    desktop.close()
            except SandboxError:
                return
            finally:
                with self.lock:
                    self.filling.discard(key)

        filler = threading.Thread(target=fill, daemon=True, name="deepgym-desktop-prewarm")
        with self.lock:
            self.fillers = [thread for thread in self.fillers if thread.is_alive()] + [filler]
        filler.start()

    def close(self) -> None:
        """Remove the ready containers, after waiting for the ones being made (so none is left behind by a
        launch that finishes after its provider closed)."""
        with self.lock:
            self.closed = True
            fillers = list(self.fillers)
        for thread in fillers:
            thread.join(READY_S + 10)
        with self.lock:
            left = [desktop for queue in self.ready.values() for desktop in queue]
            self.ready.clear()
        for desktop in left:
            desktop.close()
