"""Dialects: the handful of settings that describe one flavour of delimited text."""

from __future__ import annotations

from dataclasses import dataclass

QUOTE_MINIMAL = "minimal"
QUOTE_ALL = "all"
QUOTING_STYLES = (QUOTE_MINIMAL, QUOTE_ALL)
LINE_TERMINATORS = ("\r\n", "\n")


class DialectError(ValueError):
    """A dialect's settings are invalid or contradict each other."""


@dataclass(frozen=True)
class Dialect:
    """How records are written and read.

    delimiter       separates the fields of a record (one character).
    quotechar       wraps a field that contains special characters; inside a quoted field it is
                    written twice to stand for itself: the quoted field ``"a ""b"" c"`` holds
                    ``a "b" c``.
    lineterminator  ends every record the writer produces; the reader accepts ``\\r\\n``, ``\\n``
                    and ``\\r`` whatever this is.
    quoting         QUOTE_MINIMAL quotes only the fields that need it, QUOTE_ALL quotes every field.
    """

    delimiter: str = ","
    quotechar: str = '"'
    lineterminator: str = "\r\n"
    quoting: str = QUOTE_MINIMAL

    def __post_init__(self) -> None:
        for name in ("delimiter", "quotechar"):
            value = getattr(self, name)
            if not isinstance(value, str) or len(value) != 1:
                raise DialectError(f"{name} must be a single character, got {value!r}")
            if value in "\r\n":
                raise DialectError(f"{name} cannot be a line break")
        if self.delimiter == self.quotechar:
            raise DialectError("delimiter and quotechar must be different characters")
        if self.lineterminator not in LINE_TERMINATORS:
            raise DialectError(f"lineterminator must be one of {LINE_TERMINATORS!r}, got {self.lineterminator!r}")
        if self.quoting not in QUOTING_STYLES:
            raise DialectError(f"quoting must be one of {QUOTING_STYLES!r}, got {self.quoting!r}")


EXCEL = Dialect()
UNIX = Dialect(lineterminator="\n")
TSV = Dialect(delimiter="\t", lineterminator="\n")
