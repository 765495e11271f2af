"""Writes ../tests/probes.json, the hidden probes of this environment, from SETUP and PROBES below.

Run it again whenever the repository, the hidden tests or the solutions change:

    python3 generator/make_probes.py

Each entry of PROBES is (id, covers, expr); deepgym.probes explains the rules the probes must meet and
refuses to write the file otherwise. Expected values are computed from solutions/reference.diff, never typed.
"""

from __future__ import annotations

SETUP = r'''
import textkit
from textkit import slugify
'''

PROBES = [
    ("punctuation_collapses_to_one_dash", ["test_punctuation_collapses_to_one_dash"],
     r'''[slugify("Hello, World!"), slugify("C'est la vie!"), slugify("x.y,z;w")]'''),
    ("no_dash_at_the_ends", ["test_no_dash_at_the_ends"],
     r'''[slugify("  spaced out  "), slugify("-leading"), slugify("trailing?"), slugify("(both)")]'''),
    ("repeated_separators", ["test_repeated_separators"],
     r'''[slugify("a -- b"), slugify("a\t\n b"), slugify("one...two,, three")]'''),
    ("only_separators_give_an_empty_slug", ["test_no_dash_at_the_ends", "test_repeated_separators"],
     r'''[slugify(""), slugify("   "), slugify("?!-")]'''),
    ("already_a_slug_is_unchanged", ["test_no_dash_at_the_ends", "test_repeated_separators"],
     r'''[slugify("--already--a--slug--"), slugify("Mixed CASE Words  ")]'''),
    ("single_word", ["test_single_word"],
     r'''[slugify("Hello"), slugify("hello"), slugify("HELLO")]'''),
    ("two_words", ["test_two_words"],
     r'''[slugify("hello world"), slugify("Hello World")]'''),
    ("digits_are_kept", ["test_digits_are_kept"],
     r'''[slugify("Release 2"), slugify("2024 plan"), slugify("v1")]'''),
    ("digits_between_words", ["test_digits_are_kept", "test_two_words"],
     r'''[slugify("2 fast 2 furious"), slugify("abc123 def"), slugify("route 66")]'''),
    ("many_words", ["test_punctuation_collapses_to_one_dash", "test_repeated_separators", "test_no_dash_at_the_ends"],
     r'''slugify(" The quick (brown) fox -- jumps over: the lazy dog! ")'''),
]


if __name__ == "__main__":
    import sys
    from pathlib import Path

    from deepgym.probes import write_probes

    sys.exit(write_probes(Path(__file__).resolve().parent.parent, SETUP, PROBES))
