"""Reading delimited text into rows of strings."""

from __future__ import annotations

from typing import Iterator, TextIO

from .dialect import EXCEL, Dialect


class ParseError(ValueError):
    """The text is not well-formed for the dialect. ``line`` is 1-based."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def iter_rows(text: str, dialect: Dialect = EXCEL) -> Iterator[list[str]]:
    """Yield the records of ``text`` one at a time, each as a list of field strings.

    A field may be wrapped in ``dialect.quotechar``. Inside a quoted field the delimiter and line
    breaks are ordinary characters, and a doubled quote character stands for one literal quote.
    A quote character in the middle of an unquoted field is kept as it is. Records end at ``\\r\\n``,
    ``\\n`` or ``\\r``; blank lines are skipped.

    Raises ParseError for a quoted field that is never closed, or whose closing quote is followed by
    anything but a delimiter or the end of the record.
    """
    delimiter, quote = dialect.delimiter, dialect.quotechar
    row: list[str] = []
    field: list[str] = []
    quoted = False  # the current field started with a quote character
    in_quotes = False  # between the current field's opening and closing quote
    line = opened_on = 1
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if in_quotes:
            if ch == quote:
                in_quotes = False
            else:
                if ch == "\n" or (ch == "\r" and not text.startswith("\n", i + 1)):
                    line += 1
                field.append(ch)
        elif ch == delimiter:
            row.append("".join(field))
            field, quoted = [], False
        elif ch == "\r" or ch == "\n":
            if ch == "\r" and text.startswith("\n", i + 1):
                i += 1
            if row or field or quoted:
                row.append("".join(field))
                yield row
            row, field, quoted = [], [], False
            line += 1
        elif ch == quote and not field and not quoted:
            quoted = in_quotes = True
            opened_on = line
        elif quoted:
            raise ParseError(f"unexpected {ch!r} after the closing quote of a field", line)
        else:
            field.append(ch)
        i += 1
    if in_quotes:
        raise ParseError("quoted field is never closed", opened_on)
    if row or field or quoted:
        row.append("".join(field))
        yield row


def loads(text: str, dialect: Dialect = EXCEL) -> list[list[str]]:
    """All records of ``text`` as a list of rows."""
    return list(iter_rows(text, dialect))


def load(stream: TextIO, dialect: Dialect = EXCEL) -> list[list[str]]:
    """All records read from a text stream. Open files with ``newline=""`` so that line breaks
    inside quoted fields reach the parser unchanged."""
    return loads(stream.read(), dialect)
