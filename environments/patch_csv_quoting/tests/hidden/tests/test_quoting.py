"""Quoted fields that contain the delimiter or the quote character itself, read and written with the
default and with custom dialects."""

import plaincsv
from plaincsv import EXCEL, TSV, UNIX, Dialect, ParseError, dumps, format_field, format_row, loads

SEMICOLON = Dialect(delimiter=";", lineterminator="\n")
PIPE_SINGLE_QUOTE = Dialect(delimiter="|", quotechar="'", lineterminator="\n")

TRICKY_ROW = ['He said "hi"', "a,b", "x;y", "tab\there", "pipe|bar", " padded ", "multi\nline", "", '"', '""',
              "it's", "'quoted'"]


def test_doubled_quote_is_a_literal_quote():
    assert loads('"He said ""hi""",x\r\n') == [['He said "hi"', "x"]]


def test_field_holding_only_a_quote():
    assert loads('"""",a,""""""\n') == [['"', "a", '""']]


def test_doubled_quote_next_to_delimiter_inside_field():
    assert loads('"a"",""b",c\n') == [['a","b', "c"]]


def test_doubled_quote_with_custom_quotechar():
    assert loads("'it''s'|b\n", PIPE_SINGLE_QUOTE) == [["it's", "b"]]


def test_text_after_closing_quote_still_raises():
    try:
        loads('"a""b"c\n')
    except ParseError:
        pass
    else:
        raise AssertionError("a character after the closing quote must raise ParseError")


def test_custom_delimiter_is_quoted():
    assert format_row(["a;b", "c"], SEMICOLON) == '"a;b";c\n'


def test_tab_is_quoted_for_tsv():
    assert format_field("a\tb", TSV) == '"a\tb"'
    assert plaincsv.needs_quotes("a\tb", TSV)


def test_minimal_quoting_ignores_comma_for_other_delimiters():
    assert format_row(["a,b", "c"], SEMICOLON) == "a,b;c\n"
    assert not plaincsv.needs_quotes("1,5", TSV)


def test_comma_still_quoted_for_excel():
    assert format_row(["a,b", "c"], EXCEL) == '"a,b",c\r\n'


def test_roundtrip_excel():
    rows = [TRICKY_ROW, ["plain", "row"]]
    assert loads(dumps(rows, EXCEL), EXCEL) == rows


def test_roundtrip_unix():
    rows = [["x"], TRICKY_ROW]
    assert loads(dumps(rows, UNIX), UNIX) == rows


def test_roundtrip_semicolon():
    rows = [TRICKY_ROW, ["1;2", "3"]]
    assert loads(dumps(rows, SEMICOLON), SEMICOLON) == rows


def test_roundtrip_tsv():
    rows = [TRICKY_ROW, ["\t", "\t\t"]]
    assert loads(dumps(rows, TSV), TSV) == rows


def test_roundtrip_custom_quotechar():
    rows = [TRICKY_ROW, ["'", "''"]]
    assert loads(dumps(rows, PIPE_SINGLE_QUOTE), PIPE_SINGLE_QUOTE) == rows
