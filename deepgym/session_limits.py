"""A session's budgets and how its shell actions run: the manifest's ``session:`` mapping, validated.

Every value is checked against a range, so a typo such as ``step_timeout_s: 3000`` is refused rather than
trusted; ``terminal`` picks the action channel of a shell episode (``fresh``: a new ``bash -c`` per action,
:mod:`deepgym.session.shell`; ``persistent``: one interactive shell for the episode,
:mod:`deepgym.session.terminal`); ``workspace`` where the agent works and ``verifier`` how it is judged.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .errors import ManifestError

TERMINALS = ("fresh", "persistent")
VERIFIERS = ("python", "script")
DEFAULT_WORKSPACE = "/tmp/work"
# Where a workspace of its own may not be: in deepgym's folders, the script verifier's or the kernel's, or
# over a whole system folder.
RESERVED = ("/opt/deepgym", "/tests", "/logs", "/solution", "/proc", "/sys", "/dev")
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/var", "/opt", "/boot", "/run")


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
    workspace: str = DEFAULT_WORKSPACE
    """The agent's working directory: a folder directly under ``/tmp`` (the sandbox's ``noexec`` scratch), or
    an absolute path of its own (``/app``) that the sandbox mounts as a writable tmpfs owned by the agent, where
    programs may run. Shell environments only."""
    verifier: str = "python"
    """How the final verification judges: ``python`` (``tests/verify.py`` reads the agent's files as data) or
    ``script`` (a command such as a Harbor task's ``tests/test.sh`` runs against the state the agent left, as
    the verifier's uid, once every process of the agent is killed: :mod:`deepgym.runner.episode.script`)."""


CHOICES = {"terminal": TERMINALS, "verifier": VERIFIERS}
SESSION_RANGES: dict[str, tuple[float, float]] = {
    "max_steps": (1, 1000), "step_timeout_s": (0.5, 3600), "episode_s": (1, 86400), "verify_timeout_s": (1, 3600),
    "output_chars": (256, 1 << 20)}


def session_limits(path: Path, raw: Any) -> SessionLimits:
    """The manifest's ``session:`` mapping (``raw``, None when absent) of the manifest at ``path``, validated:
    each budget a number within :data:`SESSION_RANGES`, ``terminal`` and ``verifier`` one of their
    :data:`CHOICES`, ``workspace`` by :func:`workspace_problem`. Raises
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
        if key in CHOICES:
            if value not in CHOICES[key]:
                raise ManifestError(str(path), f"session.{key}", f"{value!r} is not a {key}",
                                    f"use one of {', '.join(CHOICES[key])}")
            values[key] = value
            continue
        if key == "workspace":
            values[key] = _workspace(path, value)
            continue
        low, high = SESSION_RANGES[key]
        integral = known[key].type == "int"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (integral and not isinstance(value, int)) \
                or not low <= value <= high:
            raise ManifestError(str(path), f"session.{key}", f"{value!r} is not {'an integer' if integral else 'a number'} in range",
                        f"give a value between {low:g} and {high:g}")
        values[key] = value
    return SessionLimits(**values)



def workspace_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a ``session.workspace`` (an absolute, normalised folder directly under /tmp, or
    outside deepgym's and the system's folders), or None."""
    if not isinstance(value, str) or not value.startswith("/") or posixpath.normpath(value) != value or value == "/":
        return f"{value!r} is not an absolute, normalised folder"
    if value == "/tmp" or (value.startswith("/tmp/") and posixpath.dirname(value) != "/tmp"):
        return f"{value!r} is /tmp or nested in it"
    if value in SYSTEM or any(value == reserved or value.startswith(reserved + "/") for reserved in RESERVED):
        return f"{value!r} is in a folder deepgym or the system needs"
    return None


def _workspace(path: Path, value: Any) -> str:
    problem = workspace_problem(value)
    if problem is not None:
        raise ManifestError(str(path), "session.workspace", problem,
                            "give an absolute folder such as /app, or one directly under /tmp")
    return value
