"""What a persistent terminal's action is (:mod:`deepgym.session.terminal`), checked before it reaches the sandbox.

Two shapes, so that agents written for either harness work unchanged:

- a string: a command, typed and run with Enter; the action waits until the shell is back at its prompt (or
  the step's timeout);
- Harbor's Terminus shape, ``{"keystrokes": "...", "duration": seconds}``: raw keys, then a wait of
  ``duration`` (default :data:`DEFAULT_DURATION_S`). As with ``tmux send-keys``, keystrokes that are one
  key's name as a whole (``C-c``, ``Enter``, ``Escape``, ``Up``, ``M-b``, ``F5``) are that key; anything else
  is typed as it is, ``\\n`` included.

A malformed action comes back to the agent as text, like any invalid action (:func:`parse_action`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .rules import MAX_ACTION_CHARS, invalid_action

DEFAULT_DURATION_S = 1.0
MAX_DURATION_S = 600.0
NAMED = {
    "Enter": "\r", "Escape": "\x1b", "Tab": "\t", "BTab": "\x1b[Z", "BSpace": "\x7f", "Space": " ",
    "Up": "\x1b[A", "Down": "\x1b[B", "Right": "\x1b[C", "Left": "\x1b[D", "Home": "\x1b[H", "End": "\x1b[F",
    "PageUp": "\x1b[5~", "PPage": "\x1b[5~", "PageDown": "\x1b[6~", "NPage": "\x1b[6~",
    "DC": "\x1b[3~", "Delete": "\x1b[3~", "IC": "\x1b[2~", "Insert": "\x1b[2~",
    **{f"F{n}": code for n, code in zip(range(1, 13), ("\x1bOP", "\x1bOQ", "\x1bOR", "\x1bOS", "\x1b[15~",
                                                           "\x1b[17~", "\x1b[18~", "\x1b[19~", "\x1b[20~",
                                                           "\x1b[21~", "\x1b[23~", "\x1b[24~"))},
}


@dataclass(frozen=True)
class Keys:
    """Raw keys to type, then a wait of ``duration_s``."""

    data: str
    duration_s: float


def key(name: str) -> str | None:
    """The characters a terminal sends for the tmux key ``name`` (``C-c``, ``M-x``, ``Enter``), or None when
    ``name`` is not one."""
    if name in NAMED:
        return NAMED[name]
    if name.startswith("M-") and len(name) > 2:
        rest = key(name[2:]) if len(name) > 3 else name[2:]
        return None if rest is None else "\x1b" + rest
    if name.startswith(("C-", "^")) and len(name) == (3 if name[0] == "C" else 2):
        char = name[-1]
        if char.isalpha() or char in "@[\\]^_":
            return chr(ord(char.upper()) & 0x1F)
        if char == "?":
            return "\x7f"
    return None


def parse_action(action: Any) -> str | Keys:
    """``action`` as the terminal runs it: a command (str) or :class:`Keys`. Raises ValueError with what to fix,
    for the agent to read."""
    if isinstance(action, str):
        problem = invalid_action(action)
        if problem is not None:
            raise ValueError(problem)
        return action
    if not isinstance(action, dict):
        raise ValueError(f"an action is a command (a string) or {{\"keystrokes\": ..., \"duration\": seconds}}, "
                         f"not {type(action).__name__}")
    unknown = sorted(set(action) - {"keystrokes", "duration"})
    if unknown or "keystrokes" not in action:
        raise ValueError(f"a keystrokes action has the keys keystrokes and duration only; it had {sorted(action)}")
    keystrokes, duration = action["keystrokes"], action.get("duration", DEFAULT_DURATION_S)
    if not isinstance(keystrokes, str) or "\0" in keystrokes or len(keystrokes) > MAX_ACTION_CHARS:
        raise ValueError(f"keystrokes must be a string without NUL of at most {MAX_ACTION_CHARS} characters")
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not math.isfinite(duration) \
            or not 0 <= duration <= MAX_DURATION_S:
        raise ValueError(f"duration must be a number of seconds from 0 to {MAX_DURATION_S:g}, not {duration!r}")
    named = key(keystrokes)
    return Keys(keystrokes if named is None else named, float(duration))
