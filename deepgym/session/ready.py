"""Desktops made ready ahead of need, per client (``DEEPGYM_DESKTOP_PREWARM`` per kind, default 1): started up
to ``ready`` (the display answers, the app's page is loaded and waits on the recorder, which listens), so an
episode's start takes one instead of waiting for a browser. They wait in the one ready-container pool
(:class:`~deepgym.sandbox.ready.ReadyPool`, which strict mode's prewarmed runners use too): each is handed out
once and removed after its episode, never reused. The client owns its pool and closes it before its provider
(:meth:`deepgym.DeepGym.close`); SIGTERM, SIGINT and the interpreter's exit close it too.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..admission import Admission
from ..errors import ConfigurationError
from ..sandbox import Provider, SandboxSpec
from ..sandbox.ready import ReadyPool
from .desktop import Desktop, launch

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


@dataclass(frozen=True, eq=False)
class DesktopKind:
    """What a ready desktop is made for: its container's spec and its screen. Equal by value (a spec holds a
    mapping of labels, so the dataclass's own hash cannot serve)."""

    spec: SandboxSpec
    screen: tuple[int, int]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DesktopKind) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


def ready_desktops(provider: Provider, size: int,
                   admission: Admission | None = None) -> ReadyPool[DesktopKind, Desktop]:
    """``size`` ready desktops per kind on ``provider``, refilled after every take, each started under a slot of
    ``admission`` (a browser's start is work on the host like an episode's)."""
    return ReadyPool(size, lambda kind: launch(provider, kind.spec, kind.screen), _usable, Desktop.close,
                     name="deepgym-desktop-prewarm", admission=admission)


def _usable(desktop: Desktop) -> bool:
    """Whether a waiting desktop may still be handed out: its supervisor said nothing since ``ready`` (it did
    not die), and it has not waited too long."""
    return desktop.alive() and time.monotonic() - desktop.made < MAX_IDLE_S
