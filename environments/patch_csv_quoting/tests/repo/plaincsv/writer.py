"""Writing rows of values as delimited text."""

from __future__ import annotations

from typing import Any, Iterable, TextIO

from .dialect import EXCEL, QUOTE_ALL, Dialect

# Characters that force a field to be quoted, besides the dialect's quote character.
_SPECIAL_CHARS = ",\r\n"


def needs_quotes(text: str, dialect: Dialect = EXCEL) -> bool:
    """Whether ``text`` must be quoted to be read back as one field.

    Under QUOTE_MINIMAL a field is quoted only if it contains the delimiter, the quote character or a
    line break, or starts or ends with whitespace (which some readers trim). QUOTE_ALL quotes
    everything.
    """
    if dialect.quoting == QUOTE_ALL:
        return True
    if dialect.quotechar in text or any(ch in text for ch in _SPECIAL_CHARS):
        return True
    return text != text.strip()


def format_field(value: Any, dialect: Dialect = EXCEL) -> str:
    """One value as it appears in a record: ``None`` is the empty field, other values use ``str()``."""
    text = "" if value is None else str(value)
    if not needs_quotes(text, dialect):
        return text
    quote = dialect.quotechar
    return quote + text.replace(quote, quote + quote) + quote


def format_row(values: Iterable[Any], dialect: Dialect = EXCEL) -> str:
    """One record, including its line terminator."""
    fields = [format_field(value, dialect) for value in values]
    if fields == [""]:
        # A lone empty field would be a blank line, which readers skip.
        fields = [dialect.quotechar * 2]
    return dialect.delimiter.join(fields) + dialect.lineterminator


def dumps(rows: Iterable[Iterable[Any]], dialect: Dialect = EXCEL) -> str:
    """Every row as delimited text."""
    return "".join(format_row(row, dialect) for row in rows)


def dump(rows: Iterable[Iterable[Any]], stream: TextIO, dialect: Dialect = EXCEL) -> None:
    """Write every row to a text stream (open files with ``newline=""``)."""
    for row in rows:
        stream.write(format_row(row, dialect))
