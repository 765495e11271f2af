"""A session's budgets and how its shell actions run: the manifest's ``session:`` mapping, validated.

Every value is checked against a range, so a typo such as ``step_timeout_s: 3000`` is refused rather than
trusted; ``terminal`` picks the action channel of a shell episode (``fresh``: a new ``bash -c`` per action,
:mod:`deepgym.session.shell`; ``persistent``: one interactive shell for the episode,
:mod:`deepgym.session.terminal`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .errors import ManifestError

TERMINALS = ("fresh", "persistent")


@dataclass(frozen=True)
class SessionLimits:
    """The budgets of one session episode, all enforced by deepgym (verl's agent loop has no timeout)."""

    max_steps: int = 30
    """Actions per episode; the episode is done after the last one."""
    step_timeout_s: float = 30.0
    """Wall-clock limit of one action: past it, every process of the agent is killed (a persistent terminal's
    command is left running instead), the partial output comes back with ``[timed out after N s]``, and the
    episode goes on."""
    episode_s: float = 600.0
    """Wall-clock budget of the whole episode from its first observation, the model's own time between actions
    included (it bounds the container's life); an action never runs past what is left of it."""
    verify_timeout_s: float = 60.0
    """Wall-clock limit of the final verifier."""
    output_chars: int = 8000
    """Longest observation text: longer output keeps its head and tail around a marker."""
    terminal: str = "fresh"
    """How shell actions run: ``fresh`` (a new ``bash -c`` each) or ``persistent`` (one interactive shell for the
    episode, :mod:`deepgym.session.terminal`). Shell environments only."""


SESSION_RANGES: dict[str, tuple[float, float]] = {
    "max_steps": (1, 1000), "step_timeout_s": (0.5, 3600), "episode_s": (1, 86400), "verify_timeout_s": (1, 3600),
    "output_chars": (256, 1 << 20)}


def session_limits(path: Path, raw: Any) -> SessionLimits:
    """The manifest's ``session:`` mapping (``raw``, None when absent) of the manifest at ``path``, validated:
    each budget a number within :data:`SESSION_RANGES`, ``terminal`` one of :data:`TERMINALS`. Raises
    ManifestError naming the key and the fix."""
    if raw is None:
        return SessionLimits()
    if not isinstance(raw, dict):
        raise ManifestError(str(path), "session", f"must be a mapping, got {type(raw).__name__}", "write `key: value` lines")
    known = {f.name: f for f in fields(SessionLimits)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            raise ManifestError(str(path), f"session.{key}", "unknown setting", f"use one of {', '.join(known)}")
        if key == "terminal":
            if value not in TERMINALS:
                raise ManifestError(str(path), "session.terminal", f"{value!r} is not a terminal",
                            f"use one of {', '.join(TERMINALS)}")
            values[key] = value
            continue
        low, high = SESSION_RANGES[key]
        integral = known[key].type == "int"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (integral and not isinstance(value, int)) \
                or not low <= value <= high:
            raise ManifestError(str(path), f"session.{key}", f"{value!r} is not {'an integer' if integral else 'a number'} in range",
                        f"give a value between {low:g} and {high:g}")
        values[key] = value
    return SessionLimits(**values)

