import io

import pytest

from plaincsv import TSV, Dialect, ParseError, load, loads


def test_simple_rows():
    assert loads("a,b,c\r\n1,2,3\r\n") == [["a", "b", "c"], ["1", "2", "3"]]


def test_last_record_without_terminator():
    assert loads("a,b\n1,2") == [["a", "b"], ["1", "2"]]


def test_empty_fields():
    assert loads(",a,,\n") == [["", "a", "", ""]]


def test_quoted_field_with_delimiter():
    assert loads('name,city\r\n"Smith, Jane",Oslo\r\n') == [["name", "city"], ["Smith, Jane", "Oslo"]]


def test_quoted_field_with_line_break():
    assert loads('id,note\n7,"first line\nsecond line"\n') == [["id", "note"], ["7", "first line\nsecond line"]]


def test_mixed_line_endings():
    assert loads("a\r\nb\nc\rd") == [["a"], ["b"], ["c"], ["d"]]


def test_blank_lines_skipped():
    assert loads("a,b\n\n\r\nc,d\n") == [["a", "b"], ["c", "d"]]


def test_empty_quoted_field():
    assert loads('"",x,""\n') == [["", "x", ""]]


def test_lone_empty_quoted_field_is_a_record():
    assert loads('""\n') == [[""]]


def test_quote_inside_unquoted_field_is_kept():
    assert loads('5" disk,x\n') == [['5" disk', "x"]]


def test_unterminated_quote_raises():
    with pytest.raises(ParseError) as info:
        loads('a,b\n"never closed,c\n')
    assert info.value.line == 2


def test_text_after_closing_quote_raises():
    with pytest.raises(ParseError):
        loads('"ab"c,d\n')


def test_custom_delimiter():
    semicolon = Dialect(delimiter=";")
    assert loads('a;"b;c";d\n', semicolon) == [["a", "b;c", "d"]]


def test_tab_separated():
    assert loads("a\tb, c\n", TSV) == [["a", "b, c"]]


def test_load_from_stream():
    assert load(io.StringIO("x,y\n1,2\n")) == [["x", "y"], ["1", "2"]]
