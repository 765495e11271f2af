"""A persistent terminal's pieces without Docker: its actions (a command, or Harbor's Terminus keystrokes), the
manifest's ``session.terminal``, and the screen and plain text made of a terminal's output."""

from __future__ import annotations

import pytest

from deepgym.environments import parse_manifest
from deepgym.errors import ManifestError
from deepgym.runner.episode.screen import Screen, plain
from deepgym.session.keys import DEFAULT_DURATION_S, Keys, key, parse_action


@pytest.mark.parametrize("raw,data,duration", [
    ({"keystrokes": "ls -la\n", "duration": 0.1}, "ls -la\n", 0.1),
    ({"keystrokes": "C-c"}, "\x03", DEFAULT_DURATION_S),
    ({"keystrokes": "C-d", "duration": 0}, "\x04", 0.0),
    ({"keystrokes": "Enter", "duration": 2}, "\r", 2.0),
    ({"keystrokes": "Escape", "duration": 1}, "\x1b", 1.0),
    ({"keystrokes": "Up", "duration": 1}, "\x1b[A", 1.0),
    ({"keystrokes": "M-b", "duration": 1}, "\x1bb", 1.0),
    ({"keystrokes": "M-Enter", "duration": 1}, "\x1b\r", 1.0),
    ({"keystrokes": "F5", "duration": 1}, "\x1b[15~", 1.0),
    ({"keystrokes": "", "duration": 3}, "", 3.0),
    ({"keystrokes": "C-c Enter", "duration": 1}, "C-c Enter", 1.0),  # not one key's name: typed as it is
])
def test_keystrokes_are_terminus_shaped_and_a_whole_key_name_is_that_key(raw, data, duration):
    assert parse_action(raw) == Keys(data, duration)


def test_a_string_is_a_command():
    assert parse_action("cd /tmp && ls") == "cd /tmp && ls"


@pytest.mark.parametrize("raw,words", [
    ("", "empty"),
    ("a\0b", "NUL"),
    ("x" * (64 << 10 + 1), "limit"),
    (["ls"], "not list"),
    ({"keys": "ls"}, "keys keystrokes and duration only"),
    ({"keystrokes": "ls", "duration": 1, "block": True}, "only"),
    ({"keystrokes": 3, "duration": 1}, "must be a string"),
    ({"keystrokes": "a\0", "duration": 1}, "without NUL"),
    ({"keystrokes": "ls", "duration": -1}, "duration"),
    ({"keystrokes": "ls", "duration": float("nan")}, "duration"),
    ({"keystrokes": "ls", "duration": True}, "duration"),
    ({"keystrokes": "ls", "duration": "1"}, "duration"),
    ({"keystrokes": "ls", "duration": 601}, "duration"),
])
def test_a_malformed_action_says_what_to_fix(raw, words):
    with pytest.raises(ValueError, match=words):
        parse_action(raw)


@pytest.mark.parametrize("name,sent", [("C-a", "\x01"), ("C-z", "\x1a"), ("C-[", "\x1b"), ("^C", "\x03"),
                                       ("C-?", "\x7f"), ("BSpace", "\x7f"), ("Tab", "\t"), ("NPage", "\x1b[6~")])
def test_tmux_key_names(name, sent):
    assert key(name) == sent


@pytest.mark.parametrize("name", ["C-", "C-cc", "C-1", "M-", "hello", "enter", "C-Space"])
def test_what_is_not_a_key_name(name):
    assert key(name) is None


def _manifest(tmp_path, kind: str, session: str):
    folder = tmp_path / "term_env"
    (folder / "tests").mkdir(parents=True, exist_ok=True)
    for name in ("verify.py", "session.json"):
        (folder / "tests" / name).write_text("{}")
    (folder / "start" / "0").mkdir(parents=True, exist_ok=True)
    (folder / "app").mkdir(exist_ok=True)
    (folder / "app" / "index.html").write_text("")
    (folder / "app" / "variants.json").write_text("{}")
    (folder / "Dockerfile").write_text("FROM base\n")
    (folder / "prompt.md").write_text("do it")
    (folder / "manifest.yaml").write_text(f"id: term_env\nkind: {kind}\nprompt: prompt.md\nsession: {session}\n")
    return folder / "manifest.yaml"


def test_the_manifest_opts_in_to_a_persistent_terminal(tmp_path):
    env = parse_manifest(_manifest(tmp_path, "session", "{terminal: persistent, max_steps: 4}"))
    assert env.session.terminal == "persistent" and env.session.max_steps == 4
    assert parse_manifest(_manifest(tmp_path, "session", "{max_steps: 4}")).session.terminal == "fresh"


@pytest.mark.parametrize("kind,session,words", [
    ("session", "{terminal: tmux}", "session.terminal: 'tmux' is not a terminal. Fix: use one of fresh, persistent"),
    ("session", "{terminal: true}", "session.terminal: True is not a terminal"),
    ("desktop", "{terminal: persistent}", "session.terminal: a desktop has no shell"),
])
def test_a_wrong_terminal_is_refused_with_the_key_and_the_fix(tmp_path, kind, session, words):
    with pytest.raises(ManifestError, match=words.replace(".", r"\.").replace("(", r"\(")):
        parse_manifest(_manifest(tmp_path, kind, session))


def test_the_screen_follows_cursor_moves_erases_and_scrolling():
    screen = Screen(4, 10)
    screen.feed("one\r\ntwo\r\nthree\r\nfour\r\nfive")
    assert screen.text() == "two\nthree\nfour\nfive"
    screen.feed("\x1b[2;1H\x1b[2KTHREE\x1b[1;4H!\x1b[4;1H\x1b[K")
    assert screen.text() == "two!\nTHREE\nfour"
    screen.feed("\x1b[H\x1b[2J0123456789abc")  # wraps at the last column
    assert screen.text() == "0123456789\nabc"


def test_a_full_screen_program_gets_the_alternate_screen_and_gives_the_main_one_back():
    screen = Screen(3, 20)
    screen.feed("$ less file\r\n")
    screen.feed("\x1b[?1049h\x1b[H\x1b[2Jpage one\r\n\x1b[7m:\x1b[m")
    assert screen.alternate and screen.text() == "page one\n:"
    screen.feed("\x1b[?1049l\r$ ")
    assert not screen.alternate and screen.text() == "$ less file\n$"


def test_a_sequence_split_between_two_reads_is_applied_whole():
    screen = Screen(2, 10)
    screen.feed("ab\x1b[")
    screen.feed("1;5Hc\x1b]0;tit")
    screen.feed("le\x07d")
    assert screen.text() == "ab  cd"


def test_plain_text_drops_control_sequences_and_keeps_a_progress_bars_last_state():
    assert plain("\x1b[1;31mred\x1b[0m\r\n 10%\r 55%\r100%\r\ndone\x1b]0;title\x07\tx") == "red\n100%\ndone    x"
    assert plain("abc\b\bX") == "aXc"
