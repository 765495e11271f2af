"""plaincsv: read and write delimited text with nothing but the standard library."""

from .dialect import EXCEL, QUOTE_ALL, QUOTE_MINIMAL, TSV, UNIX, Dialect, DialectError
from .reader import ParseError, iter_rows, load, loads
from .writer import dump, dumps, format_field, format_row, needs_quotes

__all__ = [
    "Dialect", "DialectError", "EXCEL", "UNIX", "TSV", "QUOTE_MINIMAL", "QUOTE_ALL",
    "ParseError", "iter_rows", "load", "loads",
    "dump", "dumps", "format_field", "format_row", "needs_quotes",
]

__version__ = "0.3.1"
