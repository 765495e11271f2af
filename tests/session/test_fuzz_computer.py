"""Fuzzing the ``computer`` action rules (deepgym/runner/episode/computer.py), which the host and the desktop image's
supervisor both apply to what the policy sends. Any object must come back as a short text error or as an
action inside the allowed set; an exception would end the episode as "no verdict" (the image's supervisor
reports it as its own failure), and a key combination outside the set reaches the browser. In-process,
derandomized, no Docker; the last test sends the worst inputs to a live desktop.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import before_reference
from deepgym.runner.episode.computer import (ACTION_TYPES, FIELDS, MAX_KEYS, MAX_SCROLL, MAX_TYPE_CHARS, MAX_WAIT_S,
                                     MODIFIERS, NAMED_KEYS, Action, describe, parse_action)

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=400,
                suppress_health_check=list(HealthCheck))
W, H = 1024, 768
# The combinations that may reach the browser with ctrl held, written out here rather than taken from the
# module: select all, copy, paste, cut, undo, redo, move and delete by word; with shift too, select by word or to
# an end, redo, paste as plain text.
EDIT_KEYS = {"a", "c", "v", "x", "z", "y", "Left", "Right", "Up", "Down", "Home", "End", "BackSpace", "Delete"}
SELECT_KEYS = {"v", "z", "Left", "Right", "Up", "Down", "Home", "End"}
KEYSYMS = set(NAMED_KEYS.values()) | {chr(c) for c in range(0x21, 0x7f)} | {"plus", "space"}
ALLOWED_MODIFIERS = {"Control_L", "Shift_L"}

any_text = st.text(st.characters(exclude_categories=()), max_size=30)
numbers = st.one_of(st.integers(), st.integers(min_value=-(10 ** 5000), max_value=10 ** 5000),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([2 ** 64, -0.0, 1e308, 5.0]))
scalars = st.one_of(st.none(), st.booleans(), numbers, any_text)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(any_text, inner, max_size=3), max_leaves=8)


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


odd_values = st.one_of(json_values, st.sampled_from([_deep(3000), "x" * 100000, 10 ** 5000, float("nan")]))

# Key combination pieces: the modifiers and their aliases in any case, named keys, symbols, the browser's
# shortcut letters and keys that are no keys here, Unicode look-alikes (fullwidth, Cyrillic, the Kelvin sign
# that lower-cases to ASCII k, dotless i), padded with ASCII and Unicode whitespace.
WORDS = [*MODIFIERS, *NAMED_KEYS, "Control_L", "Alt_L", "hyper", "AltGr", "F4", "F12", "Menu", "plus", "Tab",
         "t", "n", "w", "q", "h", "j", "l", "i", "u", "o", "s", "p", "a", "c", "v", "x", "z", "y", "A", "T", "=",
         "-", "0", "Delete", "Escape", "ｃｔｒｌ", "ｔ", "сtrl", "с", "\u212a", "bac\u212aspace", "ctr\u0131", "ı",
         "\u0000", "é", "ß", "", "+", "++"]
SPACES = ["", " ", "\t", "\u00a0", "\u3000", "\u2028", "\n"]
word = st.builds(lambda pad, w, case, end: pad + {0: w, 1: w.upper(), 2: w.lower(), 3: w.title()}[case] + end,
                 st.sampled_from(SPACES), st.sampled_from(WORDS), st.integers(0, 3), st.sampled_from(SPACES))
combos = st.one_of(st.lists(word, min_size=1, max_size=MAX_KEYS + 2).map("+".join), any_text,
                   st.sampled_from(["+", " ", "ctrl++", "ctrl+ +t", "+t", "ctrl+t+a", "t+ctrl+a", "shift+Escape+a",
                                    "ctrl+shift+a", "ctrl+shift+Delete", "ctrl+shift+c", "ctrl+shift+y",
                                    "shift+ctrl+t", "ctrl+ctrl+a", "ctrl+a" * 20000]))

action_types = st.one_of(st.sampled_from(ACTION_TYPES), odd_values, st.sampled_from(["CLICK", " click", "key\x00"]))
coordinates = st.one_of(st.integers(-2, 2), st.integers(W - 2, W + 2), st.sampled_from([0.0, 10.0, 10.5, True]),
                        odd_values)
actions = st.one_of(
    st.fixed_dictionaries({"action_type": action_types}, optional={
        "x": coordinates, "y": coordinates, "to_x": coordinates, "to_y": coordinates,
        "content": st.one_of(combos, any_text, st.sampled_from(["up", "down", "x" * (MAX_TYPE_CHARS + 1)]),
                             odd_values),
        "amount": st.one_of(st.integers(-1, MAX_SCROLL + 1), odd_values)}),
    st.dictionaries(st.one_of(st.sampled_from(["action_type", *FIELDS]), any_text), odd_values, max_size=6),
    odd_values)


def _valid(action: Action) -> None:
    """An accepted action lies inside the action set: its type's fields only, on the screen, in range."""
    kind = action.action_type
    assert kind in ACTION_TYPES
    for name, limit in (("x", W), ("y", H), ("to_x", W), ("to_y", H)):
        value = getattr(action, name)
        assert value is None or (type(value) is int and 0 <= value < limit), action
    if kind in ("click", "double_click", "right_click", "move", "drag"):
        assert action.x is not None and action.y is not None
    if kind == "drag":
        assert action.to_x is not None and action.to_y is not None
    if kind == "type":
        assert 0 < len(action.content) <= MAX_TYPE_CHARS
        assert all(0x20 <= ord(c) <= 0x7e or c in "\n\t" for c in action.content)
    if kind == "scroll":
        assert action.content in ("up", "down") and 1 <= action.amount <= MAX_SCROLL
    if kind == "wait":
        assert action.amount is None or 1 <= action.amount <= MAX_WAIT_S
    if kind == "key":
        _allowed_keys(action.keys)
    else:
        assert action.keys == ()
    assert describe(action)


def _allowed_keys(keys: tuple[str, ...]) -> None:
    """Modifiers (ctrl, shift, each once) first, then one key; with ctrl, only an edit of text."""
    assert keys, keys
    *held, key = keys
    assert len(keys) <= MAX_KEYS and len(set(held)) == len(held), keys
    assert set(held) <= ALLOWED_MODIFIERS and key in KEYSYMS | (ALLOWED_MODIFIERS if not held else set()), keys
    if "Control_L" in held:
        allowed = SELECT_KEYS if "Shift_L" in held else EDIT_KEYS
        assert key in allowed or (len(key) == 1 and key.lower() in allowed), keys
    assert not ("Shift_L" in held and key == "Escape"), keys


def _text_error(problem: str) -> None:
    """A bad action's reason: short, and safe for the UTF-8 observation and the JSON the host writes."""
    assert 0 < len(problem) <= 600, len(problem)
    problem.encode("utf-8")
    json.dumps(problem, allow_nan=False)


@FUZZ
@given(raw=actions)
def test_any_object_is_a_valid_action_or_a_text_error(raw: Any) -> None:
    parsed = parse_action(raw, W, H)
    if isinstance(parsed, str):
        _text_error(parsed)
        return
    _valid(parsed)
    # The host sends the raw action on and the image's supervisor parses it again: they must agree.
    again = parse_action(json.loads(json.dumps(raw, allow_nan=False)), W, H)
    assert again == parsed


@FUZZ
@given(combo=combos)
def test_every_key_combination_is_refused_or_inside_the_set(combo: str) -> None:
    parsed = parse_action({"action_type": "key", "content": combo}, W, H)
    if isinstance(parsed, str):
        _text_error(parsed)
        return
    _valid(parsed)
    # ASCII case and the padding of the words never change what is pressed.
    for spelled in (combo.upper(), combo.lower(), "+".join(f" {part.strip()} " for part in combo.split("+"))):
        if spelled.strip() and combo not in ("+", " "):
            other = parse_action({"action_type": "key", "content": spelled}, W, H)
            if not isinstance(other, str):
                _valid(other)
                assert [k.lower() for k in other.keys] == [k.lower() for k in parsed.keys], (combo, spelled)


@settings(derandomize=True, database=None, deadline=None, max_examples=300)
@given(modifiers=st.permutations(["ctrl", "shift", "alt", "meta", "super"]).map(lambda m: m[:3]),
       key=st.sampled_from(["t", "a", "Delete", "Escape", "Left", "z", "c"]), cut=st.integers(1, 3))
def test_modifiers_in_any_order_give_the_same_answer(modifiers: list[str], key: str, cut: int) -> None:
    """A combination's verdict does not depend on the order of its modifiers."""
    held = modifiers[:cut]
    answers = {isinstance(parse_action({"action_type": "key", "content": "+".join([*order, key])}, W, H), str)
               for order in (held, held[::-1])}
    assert len(answers) == 1, (held, key)


def test_the_shortcuts_fuzzing_found_are_refused() -> None:
    """What reached the browser before: a shortcut key followed by an allowed one (``ctrl+t+a`` pressed ctrl,
    t, a), a task-manager key before another, and ctrl+shift with keys whose ctrl alone edits text (tab search,
    clear browsing data, the inspector), and numbers with no whole value (an exception: no verdict)."""
    for combo in ("ctrl+t+a", "t+ctrl+a", "shift+Escape+a", "ctrl+shift+a", "ctrl+shift+Delete", "ctrl+shift+c",
                  "ctrl+shift+x", "ctrl+shift+y", "ctrl+shift+BackSpace", "a+b", "ctrl+ctrl+t", "ｃｔｒｌ+a"):
        problem = parse_action({"action_type": "key", "content": combo}, W, H)
        assert isinstance(problem, str) and ("not allowed" in problem or "not a key combination" in problem
                                             or "twice" in problem or "unknown key" in problem), (combo, problem)
    for value in (float("inf"), float("-inf"), float("nan"), 10 ** 5000):
        problem = parse_action({"action_type": "click", "x": value, "y": 0}, W, H)
        assert isinstance(problem, str) and "x" in problem, problem
    assert parse_action({"action_type": "key", "content": "ctrl+shift+Left"}, W, H).keys == (
        "Control_L", "Shift_L", "Left")
    assert parse_action({"action_type": "key", "content": " Shift + CTRL + z "}, W, H).keys == (
        "Shift_L", "Control_L", "z")


WORST = [{"action_type": "key", "content": combo} for combo in
         ("ctrl+t+a", "t+ctrl+a", "shift+Escape+a", "ctrl+shift+a", "ctrl+shift+Delete", "ctrl+shift+c",
          "ｃｔｒｌ+t", "ctrl+ctrl+n")] + [{"action_type": "click", "x": float("inf"), "y": 5},
                                        {"action_type": "scroll", "amount": float("nan")},
                                        {"action_type": [[[]]], "x": 10 ** 5000}]


@pytest.mark.docker
@pytest.mark.desktop
def test_the_worst_actions_are_text_on_a_live_desktop_and_the_episode_still_scores(gym):
    """The host refuses each of the worst inputs as text; the image's supervisor, sent them directly (as a
    host without the check would), answers each as a problem rather than failing; the episode goes on and
    the reference still scores 1.0, so none of them reached the browser."""
    from deepgym.images import build

    build(["signup_form"])
    with before_reference(gym, "signup_form", 0, len(WORST)) as (session, first, finish):
        for action in WORST:
            step = session.step(action)
            assert step.observation.text.startswith("invalid action:") and not step.done, (action, step)
        channel = session._sandbox.channel
        for action in WORST[:-1]:  # the last has no JSON form (an int of 5001 digits): no host can send it
            channel.send({"op": "act", "action": action})
            reply = channel.receive(30)
            assert reply is not None and isinstance(reply.get("problem"), str) and "error" not in reply, reply
        screen = session.step({"action_type": "screenshot"}).observation.images[0]
        verdict = finish()
    assert verdict.score == 1.0, verdict.details
    assert len(screen) < 2 * len(first.images[0])  # the same plain page, nothing opened over it
