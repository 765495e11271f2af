"""Graceful shutdown: on SIGTERM or SIGINT, stop every sample in flight and remove every container of this
process, then let the signal do what it would have done without deepgym.

**What is closed.** One registry holds the things to close on shutdown: each docker provider (its sample and
session containers) and each pool of containers kept ahead of need (:mod:`deepgym.sandbox.ready`, warm
pools, :mod:`deepgym.session.ready`'s). Whatever makes containers that outlive a call registers its close here, once::

    unregister = deepgym.shutdown.register(pool.close)     # a bound method is held weakly

:func:`shutdown` closes them all, newest first, and the same happens when the interpreter exits normally.
From then on this process judges nothing more: a sample that has not started, is waiting for its admission
slot or is running gets no verdict, error type ``cancelled`` (never a 0: its submission did nothing wrong).
Shutdown is final for the process; it is meant to be followed by its exit.

**Signals.** :func:`install` (called when a :class:`~deepgym.DeepGym` is made) handles SIGTERM and SIGINT
only where that is appropriate: in the main thread (Python allows no other), for a signal the program does
not ignore, and unless ``DEEPGYM_SIGNAL_HANDLERS=0``. The handler it installs calls :func:`shutdown`, then
chains to the handler that was there before, so the program's own handling still happens, after deepgym's:
Python's SIGINT handler raises KeyboardInterrupt, a program's own handler is called, and the default action
of SIGTERM (the process ends by the signal) is taken by sending the signal again with its default action. A
second signal while shutting down goes straight to the previous handler. A program that installs its own
handler later replaces deepgym's; it should then call :func:`shutdown` itself.

A process killed by SIGKILL cannot clean up: the next deepgym to contact the engine removes the containers
of processes that are gone, never those of a live one (:meth:`deepgym.sandbox.docker.Engine.api`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

log = logging.getLogger("deepgym")
SIGNALS_VARIABLE = "DEEPGYM_SIGNAL_HANDLERS"
HANDLED = (signal.SIGTERM, signal.SIGINT)
# How long a signal handler waits for the closing to finish before it chains on anyway (a lock held by the
# interrupted main thread could block it); leftovers are then removed by the next start's reaper.
CLOSE_TIMEOUT_S = 60.0

_lock = threading.Lock()
_closers: dict[int, Callable[[], Callable[[], None] | None]] = {}
_next_id = 0
_requested = threading.Event()
_reason = ""
_previous: dict[int, Any] = {}


def register(closer: Callable[[], None]) -> Callable[[], None]:
    """Close ``closer`` on shutdown and at exit; returns a function that unregisters it. A bound method is held
    weakly (its object may be garbage collected meanwhile, and is then simply not closed)."""
    global _next_id
    if hasattr(closer, "__self__") and hasattr(closer, "__func__"):
        ref: Callable[[], Callable[[], None] | None] = weakref.WeakMethod(closer)  # type: ignore[arg-type]
    else:
        ref = lambda: closer  # noqa: E731 - a plain function is held strongly
    with _lock:
        for gone in [key for key, held in _closers.items() if held() is None]:  # collected meanwhile
            del _closers[gone]
        key = _next_id
        _next_id += 1
        _closers[key] = ref

    def unregister() -> None:
        with _lock:
            _closers.pop(key, None)

    return unregister


def requested() -> bool:
    """Whether this process is shutting down (a sample must not start, and one in flight gets no verdict)."""
    return _requested.is_set()


def reason() -> str:
    """Why the process is shutting down ("" when it is not)."""
    return _reason


def close_all() -> None:
    """Close every registered thing, newest first; a failure is logged and the others are still closed."""
    with _lock:
        closers = [ref() for _, ref in sorted(_closers.items(), reverse=True)]
    for closer in closers:
        if closer is None:
            continue
        try:
            closer()
        except Exception:  # noqa: BLE001 - closing is best effort; the reaper removes what is left
            log.warning("deepgym: closing %r on shutdown failed", closer, exc_info=True)


def shutdown(why: str = "deepgym.shutdown.shutdown() was called") -> bool:
    """Stop judging in this process and remove its containers. Returns False when it was shutting down already
    (then it only waits for nothing: the first call does the work)."""
    global _reason
    with _lock:
        if _requested.is_set():
            return False
        _reason = why
        _requested.set()
    log.warning("deepgym: shutting down (%s): samples in flight get no verdict (cancelled), and every container "
                "of this process is removed", why)
    close_all()
    return True


def install() -> None:
    """Handle SIGTERM and SIGINT as the module's docstring says, where appropriate; idempotent."""
    if os.environ.get(SIGNALS_VARIABLE, "1") == "0" or threading.current_thread() is not threading.main_thread():
        return
    for signum in HANDLED:
        current = signal.getsignal(signum)
        if current is _handle or current in (signal.SIG_IGN, None):  # ours already, ignored, or not Python's
            continue
        with contextlib.suppress(ValueError, OSError):  # no signals here (an embedded interpreter)
            signal.signal(signum, _handle)
            _previous[signum] = current


def _handle(signum: int, frame: FrameType | None) -> None:
    if not requested():
        # Close in a thread of its own: a lock the interrupted main thread holds must not block it forever.
        closing = threading.Thread(target=shutdown, args=(f"{signal.Signals(signum).name} received",),
                                   name="deepgym-shutdown", daemon=True)
        closing.start()
        closing.join(CLOSE_TIMEOUT_S)
    _chain(signum, frame)


def _chain(signum: int, frame: FrameType | None) -> None:
    """What the signal would have done without deepgym."""
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


atexit.register(close_all)
