"""Fuzzing the persistent terminal's reading of the agent's output (deepgym/runner/episode/screen.py): every byte
the agent prints reaches it inside the trusted terminal, where an exception would end the episode as "no
verdict". Whatever arrives, in whatever pieces, the screen stays its size and the plain text is made; the
terminal's json reply encodes both. In-process, no Docker; derandomized."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepgym.runner.episode.screen import Screen, plain

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=300,
                suppress_health_check=list(HealthCheck))
# Escape sequences' pieces, so the fuzzer builds many near-valid ones, and every code point besides.
PIECES = st.sampled_from(["\x1b", "[", "]", "?", ";", "1049", "h", "l", "H", "J", "K", "r", "M", "L", "@", "P",
                          "S", "T", "7", "8", "c", "\x07", "\\", "\x9b", "\r", "\n", "\b", "\t", "999999", "0",
                          "2", "5", "(", "B", "P", "X", "a", "é", "\u200b", "\U0001f600"])
TEXT = st.lists(st.one_of(PIECES, st.text(st.characters(exclude_categories=()), max_size=6)), max_size=80).map(
    "".join)


@FUZZ
@given(chunks=st.lists(TEXT, max_size=6), rows=st.integers(1, 6), cols=st.integers(1, 12))
def test_any_output_in_any_pieces_leaves_a_screen_of_its_size(chunks, rows, cols):
    screen = Screen(rows, cols)
    for chunk in chunks:
        screen.feed(chunk)
        shown = screen.text().split("\n")
        assert len(shown) <= rows and all(len(line) <= cols for line in shown)
        assert 0 <= screen.x < cols and 0 <= screen.y < rows
    json.dumps({"screen": screen.text(), "output": plain("".join(chunks))})


def test_a_parameter_of_thousands_of_digits_is_only_a_large_number():
    screen = Screen(3, 5)
    screen.feed("\x1b[" + "9" * 5000 + ";" + "7" * 5000 + "Hx\x1b[" + "9" * 5000 + "r")
    assert screen.text() == "\n\n    x"


@FUZZ
@given(text=TEXT)
def test_plain_text_never_keeps_an_escape_or_a_control_character(text):
    made = plain(text)
    assert "\x1b" not in made and "\r" not in made and all(c in "\n" or c >= " " for c in made if ord(c) < 32)
