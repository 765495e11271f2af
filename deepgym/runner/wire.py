"""JSON as the runner speaks it: ``dumps`` and ``loads``, exactly ``json.dumps`` and ``json.loads`` with their
default settings, without importing ``json``.

``json``'s import pulls in ``re`` and ``enum`` and compiles six patterns, a few milliseconds of CPU that every
fresh runner (one per strict-mode sample) would pay before judging anything. Both functions here drive the
C scanner and encoder that ``json`` itself uses (``_json``), with the settings ``json``'s defaults give them,
so every value, string, error and limit (nesting, integer digits) is theirs. The rare inputs ``json`` treats
specially (bytes in another encoding than UTF-8, a byte order mark) and any interpreter without ``_json`` go
to ``json`` itself; so do errors, which are ``json.JSONDecodeError`` as ``json.loads`` raises them.
tests/runner/test_runner_channels.py checks both against ``json`` on generated values and texts.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

WHITESPACE = " \t\n\r"  # JSON's whitespace, as json.decoder's WHITESPACE pattern
# What json.detect_encoding may read as something other than UTF-8: a byte order mark, or a NUL in the first
# two bytes (UTF-16 and UTF-32 without one). Such bytes are json's to decode.
_BYTE_ORDER_MARKS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")

try:
    from _json import encode_basestring_ascii as _escape
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover - an interpreter without json's C accelerator
    _make_scanner = None


class _Decoding:
    """The settings ``json.JSONDecoder()`` hands the C scanner: strict strings, plain dicts, ``float`` and
    ``int`` for numbers, and NaN, Infinity and -Infinity accepted."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


def _json() -> Any:
    import json

    return json


def _unserializable(value: Any) -> Any:
    """What ``json.JSONEncoder.default`` does with a value JSON has no form for."""
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


if _make_scanner is None:  # pragma: no cover - see the import above
    def dumps(value: Any, *, allow_nan: bool = True) -> str:
        return _json().dumps(value, allow_nan=allow_nan)

    def loads(data: str | bytes | bytearray) -> Any:
        return _json().loads(data)
else:
    _scan = _make_scanner(_Decoding)

    def dumps(value: Any, *, allow_nan: bool = True) -> str:
        """``json.dumps(value, allow_nan=allow_nan)``: ASCII, ", " and ": " separators, circular references
        refused. A fresh encoder per call, as json makes: its record of the containers being encoded must
        not outlive a call that failed half way."""
        if isinstance(value, str):
            return _escape(value)
        encode = _make_encoder({}, _unserializable, _escape, None, ": ", ", ", False, False, allow_nan)
        return "".join(encode(value, 0))

    def loads(data: str | bytes | bytearray) -> Any:
        """``json.loads(data)``: one JSON document, surrounded by nothing but whitespace."""
        if isinstance(data, (bytes, bytearray)):
            if data.startswith(_BYTE_ORDER_MARKS) or 0 in data[:2]:
                return _json().loads(data)
            data = data.decode("utf-8", "surrogatepass")
        elif not isinstance(data, str) or data.startswith("\ufeff"):
            return _json().loads(data)
        start = len(data) - len(data.lstrip(WHITESPACE))
        try:
            value, end = _scan(data, start)
        except StopIteration as stop:
            raise _json().JSONDecodeError("Expecting value", data, stop.value) from None
        extra = data[end:].lstrip(WHITESPACE)
        if extra:
            raise _json().JSONDecodeError("Extra data", data, len(data) - len(extra))
        return value
