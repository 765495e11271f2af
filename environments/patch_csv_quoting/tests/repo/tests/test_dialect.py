import pytest

from plaincsv import EXCEL, QUOTE_MINIMAL, TSV, Dialect, DialectError


def test_excel_defaults():
    assert (EXCEL.delimiter, EXCEL.quotechar, EXCEL.lineterminator, EXCEL.quoting) == (",", '"', "\r\n", QUOTE_MINIMAL)


def test_tsv():
    assert TSV.delimiter == "\t" and TSV.lineterminator == "\n"


@pytest.mark.parametrize("delimiter", ["", ";;", "\n"], ids=["empty", "two_characters", "line_break"])
def test_rejects_bad_delimiter(delimiter):
    with pytest.raises(DialectError):
        Dialect(delimiter=delimiter)


def test_rejects_same_delimiter_and_quotechar():
    with pytest.raises(DialectError):
        Dialect(delimiter="'", quotechar="'")


def test_rejects_unknown_lineterminator():
    with pytest.raises(DialectError):
        Dialect(lineterminator="\r")


def test_rejects_unknown_quoting():
    with pytest.raises(DialectError):
        Dialect(quoting="nonnumeric")


def test_dialects_are_immutable():
    with pytest.raises(AttributeError):
        EXCEL.delimiter = ";"
