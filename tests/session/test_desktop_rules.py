"""The computer action set's checks and the desktop manifest keys, without Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepgym.runner.episode.computer import computer_schema
from deepgym.session.desktop import task_text
from deepgym.environments import load_environment, parse_manifest
from deepgym.errors import ManifestError
from deepgym.runner.episode.computer import ACTION_TYPES, Action, describe, parse_action

W, H = 1024, 768


@pytest.mark.parametrize("raw,words", [
    ("click", "JSON object"),
    ({}, "action_type None is not known"),
    ({"action_type": "tap"}, "not known"),
    ({"action_type": "click", "x": 10}, "click needs y"),
    ({"action_type": "click", "x": 1024, "y": 0}, "x 1024 is out of range"),
    ({"action_type": "click", "x": -1, "y": 0}, "out of range"),
    ({"action_type": "click", "x": 1.5, "y": 0}, "whole number"),
    ({"action_type": "click", "x": True, "y": 0}, "whole number"),
    ({"action_type": "click", "x": "10", "y": 0}, "whole number"),
    ({"action_type": "screenshot", "x": 1}, "takes no x"),
    ({"action_type": "click", "x": 1, "y": 1, "button": 2}, "unknown field"),
    ({"action_type": "type"}, "type needs content"),
    ({"action_type": "type", "content": ""}, "needs some content"),
    ({"action_type": "type", "content": "é"}, "printable ASCII"),
    ({"action_type": "type", "content": "x" * 501}, "at most 500"),
    ({"action_type": "key", "content": "ctrl+"}, "not a key combination"),
    ({"action_type": "key", "content": "hyper+q"}, "unknown key"),
    ({"action_type": "key", "content": "a+b+c+d+e+f"}, "at most 5"),
    ({"action_type": "key", "content": "F12"}, "unknown key 'F12'"),
    ({"action_type": "key", "content": "ctrl+t"}, "browser shortcut"),
    ({"action_type": "key", "content": "ctrl+shift+i"}, "browser shortcut"),
    ({"action_type": "key", "content": "ctrl+l"}, "browser shortcut"),
    ({"action_type": "key", "content": "ctrl+Tab"}, "browser shortcut"),
    ({"action_type": "key", "content": "alt+Left"}, "browser shortcut"),
    ({"action_type": "key", "content": "super+a"}, "browser shortcut"),
    ({"action_type": "key", "content": "shift+Escape"}, "browser shortcut"),
    ({"action_type": "scroll", "amount": 61}, "amount 61 is out of range"),
    ({"action_type": "scroll", "amount": 0}, "out of range"),
    ({"action_type": "scroll", "amount": 3, "content": "sideways"}, "'up' or 'down'"),
    ({"action_type": "scroll", "amount": 3, "x": 5}, "both x and y"),
    ({"action_type": "drag", "x": 1, "y": 1, "to_x": 5}, "needs to_y"),
    ({"action_type": "wait", "amount": 11}, "out of range"),
])
def test_bad_actions_come_back_as_text(raw, words):
    problem = parse_action(raw, W, H)
    assert isinstance(problem, str) and words in problem, problem


def test_good_actions_parse():
    assert parse_action({"action_type": "key", "content": "ctrl+shift+Z"}, W, H).keys == ("Control_L", "Shift_L", "Z")
    assert parse_action({"action_type": "key", "content": "ctrl+BackSpace"}, W, H).keys == ("Control_L", "BackSpace")
    assert parse_action({"action_type": "key", "content": "shift+Tab"}, W, H).keys == ("Shift_L", "Tab")
    assert parse_action({"action_type": "key", "content": "Enter"}, W, H).keys == ("Return",)
    assert parse_action({"action_type": "key", "content": "+"}, W, H).keys == ("plus",)
    assert parse_action({"action_type": "key", "content": "shift"}, W, H).keys == ("Shift_L",)
    scroll = parse_action({"action_type": "scroll", "amount": 60, "x": 1023, "y": 767}, W, H)
    assert scroll == Action("scroll", x=1023, y=767, amount=60, content="down")
    assert parse_action({"action_type": "click", "x": 0, "y": 0, "content": None}, W, H) == Action("click", 0, 0)
    assert describe(parse_action({"action_type": "type", "content": "a\nb"}, W, H)) == "typed 3 character(s)"
    assert [parse_action({"action_type": kind, **fields}, W, H).action_type for kind, fields in (
        ("screenshot", {}), ("done", {}), ("wait", {}), ("move", {"x": 1, "y": 2}),
        ("drag", {"x": 1, "y": 2, "to_x": 3, "to_y": 4}))] == ["screenshot", "done", "wait", "move", "drag"]


def test_the_tool_schema_lists_every_action_type():
    schema = computer_schema()["function"]
    assert schema["name"] == "computer"
    assert schema["parameters"]["properties"]["action_type"]["enum"] == list(ACTION_TYPES)


@pytest.mark.parametrize("name", ["signup_form", "todo_list"])
def test_desktop_manifests_and_prompts(name):
    env = load_environment(name)
    assert env.kind == "desktop" and env.screen == (1024, 768) and env.variants == 8
    prompts = {task_text(env, variant) for variant in range(env.variants)}
    assert len(prompts) == 8 and all("{" not in text and "Begin with a screenshot" in text for text in prompts)


def test_a_bad_screen_is_refused(tmp_path: Path):
    folder = tmp_path / "desk"
    (folder / "tests").mkdir(parents=True)
    (folder / "app").mkdir()
    for name in ("Dockerfile", "prompt.md", "tests/verify.py", "app/index.html", "app/variants.json"):
        (folder / name).write_text("x")
    manifest = folder / "manifest.yaml"
    manifest.write_text("id: desk\nkind: desktop\nprompt: prompt.md\nscreen: {width: 100}\n")
    with pytest.raises(ManifestError, match="screen.width"):
        parse_manifest(manifest)
    manifest.write_text("id: desk\nkind: desktop\nprompt: prompt.md\nscreen: {width: 1280, height: 800}\n")
    assert parse_manifest(manifest).screen == (1280, 800)
    manifest.write_text("id: desk\nkind: function\nentry_point: f\nprompt: prompt.md\nscreen: {width: 1280}\n")
    with pytest.raises(ManifestError, match="tasks have no screen"):
        parse_manifest(manifest)
