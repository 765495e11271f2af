"""Writes ../tests/probes.json, the hidden probes of patch_csv_quoting, from SETUP and PROBES below.

Run it again whenever the repository, the hidden tests or the solutions change:

    python3 generator/make_probes.py

Each entry of PROBES is (id, covers, expr); deepgym.probes explains the rules the probes must meet and
refuses to write the file otherwise. Expected values are computed from solutions/reference.diff, never typed.
"""

from __future__ import annotations

SETUP = r'''
import plaincsv
from plaincsv import EXCEL, QUOTE_ALL, TSV, UNIX, Dialect, ParseError, dumps, format_field, format_row, loads, needs_quotes

SEMICOLON = Dialect(delimiter=";", lineterminator="\n")
PIPE_SINGLE_QUOTE = Dialect(delimiter="|", quotechar="'", lineterminator="\n")
TRICKY_ROW = ['He said "hi"', "a,b", "x;y", "tab\there", "pipe|bar", " padded ", "multi\nline", "", '"', '""',
              "it's", "'quoted'", "cr\rlf\r\n", "5\" disk", "|;\t,"]


def error_name(make):
    """The class name of the exception ``make()`` raises, or None."""
    try:
        make()
    except Exception as exc:
        return type(exc).__name__
    return None


def error_line(text, dialect=EXCEL):
    """The line a ParseError for ``text`` names, or None if ``text`` parses."""
    try:
        loads(text, dialect)
    except ParseError as exc:
        return exc.line
    return None
'''

PROBES = [
    # --- reading: a doubled quote inside a quoted field is one literal quote
    ("doubled_quote_is_a_literal_quote", ["test_doubled_quote_is_a_literal_quote"],
     r'''loads('"He said ""hi""",x\r\n')'''),
    ("field_holding_only_a_quote", ["test_field_holding_only_a_quote"],
     r'''loads('"""",a,""""""\n')'''),
    ("doubled_quote_next_to_delimiter", ["test_doubled_quote_next_to_delimiter_inside_field"],
     r'''loads('"a"",""b",c\n"x""\ny",""""""""\n')'''),
    ("doubled_quote_with_custom_quotechar", ["test_doubled_quote_with_custom_quotechar"],
     r"""[loads("'it''s'|b\n", PIPE_SINGLE_QUOTE), loads("'a''|''b'|''''\n", PIPE_SINGLE_QUOTE)]"""),
    ("reads_back_own_quote_escaping", ["issue"],
     r'''loads(dumps([['say "hi"'], ['"', '""']]))'''),
    # --- writing: quote exactly for the dialect's delimiter, quote character and line breaks
    ("custom_delimiter_is_quoted", ["test_custom_delimiter_is_quoted"],
     r'''[format_row(["a;b", "c"], SEMICOLON), format_row(["x|y", "z"], PIPE_SINGLE_QUOTE), format_field(";", SEMICOLON)]'''),
    ("tab_is_quoted_for_tsv", ["test_tab_is_quoted_for_tsv"],
     r'''[format_field("a\tb", TSV), needs_quotes("a\tb", TSV), format_row(["\t", "x"], TSV)]'''),
    ("comma_not_special_for_other_delimiters", ["test_minimal_quoting_ignores_comma_for_other_delimiters"],
     r'''[format_row(["a,b", "c"], SEMICOLON), needs_quotes("1,5", TSV), format_row(["1,5", "x,y"], TSV), needs_quotes("a,b", PIPE_SINGLE_QUOTE)]'''),
    ("needs_quotes_per_dialect", ["test_custom_delimiter_is_quoted", "test_tab_is_quoted_for_tsv",
                                  "test_minimal_quoting_ignores_comma_for_other_delimiters"],
     r'''[[needs_quotes(text, dialect) for text in ["a,b", "a;b", "a\tb", "a|b", 'a"b', "a'b", "a\nb", "a\rb", " a", "a ", "ab", ""]] for dialect in (EXCEL, SEMICOLON, TSV, PIPE_SINGLE_QUOTE)]'''),
    # --- round trips: everything dumps writes comes back unchanged from loads
    ("roundtrip_excel", ["test_roundtrip_excel"],
     r'''loads(dumps([TRICKY_ROW, ["plain", "row"]], EXCEL), EXCEL)'''),
    ("roundtrip_unix", ["test_roundtrip_unix"],
     r'''loads(dumps([["x"], TRICKY_ROW], UNIX), UNIX)'''),
    ("roundtrip_semicolon", ["test_roundtrip_semicolon"],
     r'''loads(dumps([TRICKY_ROW, ["1;2", "3"]], SEMICOLON), SEMICOLON)'''),
    ("roundtrip_tsv", ["test_roundtrip_tsv"],
     r'''loads(dumps([TRICKY_ROW, ["\t", "\t\t"]], TSV), TSV)'''),
    ("roundtrip_custom_quotechar", ["test_roundtrip_custom_quotechar"],
     r'''loads(dumps([TRICKY_ROW, ["'", "''"]], PIPE_SINGLE_QUOTE), PIPE_SINGLE_QUOTE)'''),
    ("written_text_semicolon_and_tsv", ["test_roundtrip_semicolon", "test_roundtrip_tsv"],
     r'''[dumps([TRICKY_ROW], SEMICOLON), dumps([TRICKY_ROW], TSV)]'''),
    ("written_text_custom_quotechar", ["test_roundtrip_custom_quotechar"],
     r'''dumps([TRICKY_ROW, ["'", "''"]], PIPE_SINGLE_QUOTE)'''),
    # --- pass-to-pass: what works today keeps working
    ("comma_dialect_unchanged", ["test_comma_still_quoted_for_excel", "test_field_with_comma_is_quoted",
                                 "test_embedded_quote_is_doubled", "test_surrounding_whitespace_is_quoted",
                                 "test_line_break_is_quoted", "test_plain_fields_are_not_quoted"],
     r'''[format_row(["a,b", "c"], EXCEL), format_row(["Smith, Jane", "Oslo", 3, None]), format_field('say "hi"'), format_field(" padded "), format_field("a\nb"), needs_quotes("inner space")]'''),
    ("text_after_closing_quote_raises", ["test_text_after_closing_quote_still_raises",
                                         "test_text_after_closing_quote_raises"],
     r'''[error_name(lambda: loads('"a""b"c\n')), error_name(lambda: loads('"ab"c,d\n')), error_name(lambda: loads("x\n'a'b|c\n", PIPE_SINGLE_QUOTE))]'''),
    ("unterminated_quote_raises_on_its_line", ["test_unterminated_quote_raises"],
     r'''[error_name(lambda: loads('a,b\n"never closed,c\n')), error_line('a,b\n"never closed,c\n'), error_name(lambda: loads("'abc|d\n", PIPE_SINGLE_QUOTE))]'''),
    ("empty_quoted_fields", ["test_empty_quoted_field", "test_lone_empty_quoted_field_is_a_record",
                             "test_empty_fields"],
     r'''[loads('"",x,""\n'), loads('""\n'), loads(',a,,\n'), loads("''|x\n", PIPE_SINGLE_QUOTE)]'''),
    ("quote_inside_unquoted_field_is_kept", ["test_quote_inside_unquoted_field_is_kept"],
     r'''[loads('5" disk,x\n'), loads('a""b,c\n')]'''),
    ("records_and_line_endings", ["test_simple_rows", "test_last_record_without_terminator",
                                  "test_mixed_line_endings", "test_blank_lines_skipped",
                                  "test_quoted_field_with_line_break", "test_quoted_field_with_delimiter"],
     r'''[loads("a,b,c\r\n1,2,3\r\n"), loads("a,b\n1,2"), loads("a\r\nb\nc\rd"), loads("a,b\n\n\r\nc,d\n"), loads('id,note\n7,"first line\nsecond line"\n'), loads('"Smith, Jane",Oslo\r\n')]'''),
    ("custom_delimiters_when_reading", ["test_custom_delimiter", "test_tab_separated"],
     r'''[loads('a;"b;c";d\n', Dialect(delimiter=";")), loads("a\tb, c\n", TSV)]'''),
    ("quote_all_and_lone_empty_field", ["test_quote_all", "test_lone_empty_field_is_quoted",
                                        "test_dumps_uses_lineterminator", "test_none_is_empty_field"],
     r'''[format_row(["a", "", 1], Dialect(quoting=QUOTE_ALL)), format_row([""]), dumps([["a"], ["b"]], UNIX), format_row([None, "x", None])]'''),
    ("bad_dialects_raise", ["test_rejects_bad_delimiter", "test_rejects_same_delimiter_and_quotechar",
                            "test_rejects_unknown_lineterminator", "test_rejects_unknown_quoting"],
     r'''[error_name(lambda: Dialect(delimiter=d)) for d in ["", ";;", "\n", "\r"]] + [error_name(lambda: Dialect(delimiter="'", quotechar="'")), error_name(lambda: Dialect(lineterminator="\r")), error_name(lambda: Dialect(quoting="nonnumeric")), error_name(lambda: Dialect(delimiter=";", quotechar="'"))]'''),
]


if __name__ == "__main__":
    import sys
    from pathlib import Path

    from deepgym.probes import write_probes

    sys.exit(write_probes(Path(__file__).resolve().parent.parent, SETUP, PROBES))
