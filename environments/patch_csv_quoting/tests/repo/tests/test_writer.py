import io

from plaincsv import EXCEL, QUOTE_ALL, UNIX, Dialect, dump, dumps, format_field, format_row, loads, needs_quotes


def test_plain_fields_are_not_quoted():
    assert format_row(["a", "b", 3]) == "a,b,3\r\n"


def test_field_with_comma_is_quoted():
    assert format_row(["Smith, Jane", "Oslo"]) == '"Smith, Jane",Oslo\r\n'


def test_embedded_quote_is_doubled():
    assert format_field('say "hi"') == '"say ""hi"""'


def test_line_break_is_quoted():
    assert format_field("a\nb") == '"a\nb"'


def test_surrounding_whitespace_is_quoted():
    assert format_field(" padded ") == '" padded "'
    assert not needs_quotes("inner space")


def test_none_is_empty_field():
    assert format_row([None, "x", None]) == ",x,\r\n"


def test_lone_empty_field_is_quoted():
    assert format_row([""]) == '""\r\n'


def test_quote_all():
    everything = Dialect(quoting=QUOTE_ALL)
    assert format_row(["a", "", 1], everything) == '"a","","1"\r\n'


def test_dumps_uses_lineterminator():
    assert dumps([["a"], ["b"]], UNIX) == "a\nb\n"


def test_dump_to_stream():
    out = io.StringIO()
    dump([["id", "name"], [1, "x"]], out, EXCEL)
    assert out.getvalue() == "id,name\r\n1,x\r\n"


def test_roundtrip_simple_rows():
    rows = [["id", "name", "note"], ["1", "Smith, Jane", "multi\nline"], ["2", "", " x "]]
    assert loads(dumps(rows)) == rows
