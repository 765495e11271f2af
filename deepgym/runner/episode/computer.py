"""The ``computer`` action set of desktop environments: the one place its fields, ranges and key names are
checked, by the host before an action is sent and by the desktop image's supervisor again before it reaches
the action daemon (standard library only: the base image carries this module as ``deepgym_runner.episode.computer``).

An action is a JSON object with ``action_type`` and the fields that type takes:

=================  ===============================================================================
action_type        fields
=================  ===============================================================================
``screenshot``     none: the screen as it is now
``click``          ``x``, ``y`` (left button); also ``double_click``, ``right_click``
``move``           ``x``, ``y``: move the pointer, press nothing
``drag``           ``x``, ``y`` to ``to_x``, ``to_y`` with the left button held
``type``           ``content``: printable ASCII, newlines and tabs, at most :data:`MAX_TYPE_CHARS`
``key``            ``content``: one key or a combination joined by ``+`` (``ctrl+a``, ``Return``,
                   ``shift+Tab``); combinations that are the browser's own shortcuts are refused
``scroll``         ``amount`` wheel clicks (1 to :data:`MAX_SCROLL`), ``content`` ``up`` or ``down``
                   (default ``down``), optionally at ``x``, ``y``
``wait``           ``amount`` seconds (1 to :data:`MAX_WAIT_S`, default 1), then the screen
``done``           none: the agent says it has finished; the episode ends
=================  ===============================================================================

:func:`parse_action` returns a :class:`Action` or the reason it is not one, as text for the agent: a bad
action never ends the episode.
"""

from __future__ import annotations

from dataclasses import dataclass

ACTION_TYPES = ("screenshot", "click", "double_click", "right_click", "move", "drag", "type", "key", "scroll",
                "wait", "done")
FIELDS = ("x", "y", "to_x", "to_y", "content", "amount")
POINTED = ("click", "double_click", "right_click", "move", "drag")
MAX_TYPE_CHARS = 500
MAX_SCROLL = 60
MAX_WAIT_S = 10
MAX_KEYS = 5
MODIFIERS = {"ctrl": "Control_L", "control": "Control_L", "shift": "Shift_L", "alt": "Alt_L", "meta": "Meta_L",
             "super": "Super_L", "cmd": "Super_L", "win": "Super_L"}
# Named keys (lower case, with their common aliases) -> X keysym names. Single printable ASCII characters are
# keys too (their keysym is their code point).
NAMED_KEYS = {
    "return": "Return", "enter": "Return", "tab": "Tab", "escape": "Escape", "esc": "Escape", "space": "space",
    "backspace": "BackSpace", "delete": "Delete", "del": "Delete", "insert": "Insert", "home": "Home",
    "end": "End", "pageup": "Prior", "page_up": "Prior", "pagedown": "Next", "page_down": "Next",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right", "arrowup": "Up", "arrowdown": "Down",
    "arrowleft": "Left", "arrowright": "Right",
}
# The browser's own shortcuts (a new tab or window, history, downloads, the address bar, back, reload, the
# task manager, tab search, clearing the browsing data) would take the agent out of the app, and kiosk mode does
# not disable them all: so a combination with ctrl may only edit text (select all, copy, cut, paste, undo, redo,
# move by word), with ctrl and shift only select by word or to an end, redo or paste as plain text, alt, meta
# and super take no part, and shift+Escape (the task manager) is refused. Function keys are not keys here.
CTRL_ALLOWED = {"a", "c", "v", "x", "z", "y", "Left", "Right", "Up", "Down", "Home", "End", "BackSpace", "Delete"}
CTRL_SHIFT_ALLOWED = {"v", "z", "Left", "Right", "Up", "Down", "Home", "End"}
BLOCKED_MODIFIERS = {"Alt_L", "Meta_L", "Super_L"}
# How much of a bad value an error message quotes.
QUOTED_CHARS = 60


@dataclass(frozen=True)
class Action:
    """A checked action. ``keys`` are X keysym names (a ``key`` action's combination, modifiers first)."""

    action_type: str
    x: int | None = None
    y: int | None = None
    to_x: int | None = None
    to_y: int | None = None
    content: str | None = None
    amount: int | None = None
    keys: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"action_type": self.action_type, "x": self.x, "y": self.y, "to_x": self.to_x, "to_y": self.to_y,
                "content": self.content, "amount": self.amount, "keys": list(self.keys)}


def _quoted(value) -> str:
    """``value``'s repr for an error message, at most :data:`QUOTED_CHARS` characters, never raising (a huge
    int, a deeply nested list)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<a {type(value).__name__}>"
    return text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS - 3] + "..."


def _keysym(part: str) -> str | None:
    """The keysym name of one key (not a modifier), or None. ASCII only: a look-alike (a fullwidth letter, the
    Kelvin sign that lower-cases to ``k``) is no key."""
    if not part.isascii():
        return None
    if part.lower() in NAMED_KEYS:
        return NAMED_KEYS[part.lower()]
    return part if len(part) == 1 and 0x21 <= ord(part) <= 0x7e else None


def _modifier(part: str) -> str | None:
    return MODIFIERS.get(part.lower()) if part.isascii() else None


def key_sequence(combo: str) -> tuple[str, ...] | str:
    """The keysym names of ``combo`` (``ctrl+shift+z``: modifiers, each once, then one key; or one modifier
    alone), or why it is not a key combination or not allowed."""
    if combo in ("+", " "):
        return ("plus",) if combo == "+" else ("space",)
    shape = (f"{_quoted(combo)} is not a key combination: write modifiers ({', '.join(MODIFIERS)}) first, then one "
             f"key, joined by '+', such as 'ctrl+a' (at most {MAX_KEYS} in all)")
    parts = [part.strip() for part in combo.split("+", MAX_KEYS)]
    if len(parts) > MAX_KEYS or not all(parts):
        return shape
    *held, last = parts
    names: list[str] = []
    for part in held:
        modifier = _modifier(part)
        if modifier is None:
            return shape if _keysym(part) is not None else _unknown(part)
        if modifier in names:
            return f"{_quoted(combo)} names a modifier twice"
        names.append(modifier)
    key = _keysym(last) or (None if held else _modifier(last))
    if key is None:
        return shape if _modifier(last) is not None else _unknown(last)
    return _allowed(combo, (*names, key))


def _unknown(part: str) -> str:
    return (f"unknown key {_quoted(part)}; use a letter, digit or symbol, a modifier (ctrl, shift) or "
            f"one of {', '.join(sorted(set(NAMED_KEYS.values())))}")


def _allowed(combo: str, names: tuple[str, ...]) -> tuple[str, ...] | str:
    """``names`` if the combination only edits text in the app, else why it is refused (see CTRL_ALLOWED)."""
    refused = f"{_quoted(combo)} is not allowed: it is a browser shortcut, not an edit in the app"
    *modifiers, key = names
    if BLOCKED_MODIFIERS & set(names):
        return refused
    if "Control_L" in modifiers:
        allowed = CTRL_SHIFT_ALLOWED if "Shift_L" in modifiers else CTRL_ALLOWED
        if key not in allowed and key.lower() not in allowed:
            return refused
    if "Shift_L" in modifiers and key == "Escape":
        return refused
    return names


def _integer(value, name: str, low: int, high: int) -> int | str:
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())  # no NaN, no infinity
    if isinstance(value, bool) or not whole:
        return f"{name} must be a whole number, got {_quoted(value)}"
    if not low <= value <= high:
        given = int(value) if abs(value) < 10 ** 12 else "of that size"
        return f"{name} {given} is out of range: give {low} to {high}"
    return int(value)


def parse_action(raw, width: int, height: int) -> Action | str:
    """``raw`` (the tool call's arguments) as an :class:`Action` on a ``width`` x ``height`` screen, or the
    reason it is not a valid action."""
    if not isinstance(raw, dict):
        return f"an action is a JSON object with action_type, not {type(raw).__name__}"
    unknown = sorted(_quoted(name) for name in set(raw) - {"action_type", *FIELDS})
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        return f"unknown field(s) {shown}; the fields are action_type, {', '.join(FIELDS)}"
    kind = raw.get("action_type")
    if not isinstance(kind, str) or kind not in ACTION_TYPES:
        return f"action_type {_quoted(kind)} is not known; use one of {', '.join(ACTION_TYPES)}"
    given = {name: raw[name] for name in FIELDS if raw.get(name) is not None}
    values: dict = {"action_type": kind}
    wanted = {"screenshot": (), "done": (), "click": ("x", "y"), "double_click": ("x", "y"),
              "right_click": ("x", "y"), "move": ("x", "y"), "drag": ("x", "y", "to_x", "to_y"),
              "type": ("content",), "key": ("content",), "scroll": ("amount",), "wait": ()}[kind]
    optional = {"scroll": ("x", "y", "content"), "wait": ("amount",)}.get(kind, ())
    missing = [name for name in wanted if name not in given]
    if missing:
        return f"{kind} needs {', '.join(missing)}"
    extra = sorted(set(given) - set(wanted) - set(optional))
    if extra:
        return f"{kind} takes no {', '.join(extra)}"
    for name, limit in (("x", width - 1), ("y", height - 1), ("to_x", width - 1), ("to_y", height - 1)):
        if name in given:
            value = _integer(given[name], name, 0, limit)
            if isinstance(value, str):
                return f"{value} (the screen is {width}x{height})"
            values[name] = value
    if kind == "scroll" and ("x" in given) != ("y" in given):
        return "scroll takes both x and y, or neither"
    if "amount" in given:
        high = MAX_SCROLL if kind == "scroll" else MAX_WAIT_S
        value = _integer(given["amount"], "amount", 1, high)
        if isinstance(value, str):
            return value
        values["amount"] = value
    if "content" in given:
        content = given["content"]
        if not isinstance(content, str):
            return f"content must be a string, got {type(content).__name__}"
        if kind == "type":
            if not content:
                return "type needs some content"
            if len(content) > MAX_TYPE_CHARS:
                return f"content is {len(content)} characters; type at most {MAX_TYPE_CHARS} at a time"
            bad = next((c for c in content if not (0x20 <= ord(c) <= 0x7e or c in "\n\t")), None)
            if bad is not None:
                return f"type supports printable ASCII, newlines and tabs; {_quoted(bad)} is not one"
        elif kind == "key":
            keys = key_sequence(content)
            if isinstance(keys, str):
                return keys
            values["keys"] = keys
        elif content not in ("up", "down"):
            return f"scroll content is 'up' or 'down', not {_quoted(content)}"
        values["content"] = content
    if kind == "scroll":
        values.setdefault("content", "down")
    return Action(**values)


def describe(action: Action) -> str:
    """What the action did, in a few words, for the agent's observation."""
    kind = action.action_type
    if kind in ("click", "double_click", "right_click", "move"):
        return f"{kind.replace('_', ' ')} at ({action.x}, {action.y})"
    if kind == "drag":
        return f"dragged from ({action.x}, {action.y}) to ({action.to_x}, {action.to_y})"
    if kind == "type":
        return f"typed {len(action.content)} character(s)"
    if kind == "key":
        return f"pressed {action.content}"
    if kind == "scroll":
        where = f" at ({action.x}, {action.y})" if action.x is not None else ""
        return f"scrolled {action.content} {action.amount}{where}"
    if kind == "wait":
        return f"waited {action.amount or 1} s"
    return {"screenshot": "took a screenshot", "done": "finished"}[kind]


def computer_schema() -> dict:
    """The ``computer`` tool's OpenAI function schema (what verl shows the model): the action set and its schema
    in one place."""
    coordinate = {"type": "integer", "description": "pixels from the screen's left (x) or top (y) edge"}
    return {"type": "function", "function": {
        "name": "computer",
        "description": "Act on the computer's screen with the mouse or keyboard, then see the screen. Begin with "
                       "a screenshot. action_type: " + ", ".join(ACTION_TYPES) + ".",
        "parameters": {"type": "object", "required": ["action_type"], "properties": {
            "action_type": {"type": "string", "enum": list(ACTION_TYPES)},
            "x": coordinate, "y": coordinate,
            "to_x": {**coordinate, "description": "where a drag ends (x)"},
            "to_y": {**coordinate, "description": "where a drag ends (y)"},
            "content": {"type": "string", "description": "the text to type; the key or combination to press "
                                                         "(ctrl+a, Return); a scroll's direction (up or down)"},
            "amount": {"type": "integer", "description": f"scroll clicks (1 to {MAX_SCROLL}) or seconds to wait"},
        }}}}
