"""Python values as plain data: the encoding that carries arguments and results between a submission's process
and the trusted side of a row's tests.

JSON alone would turn a tuple into a list, a set into an error, ``{1: "a"}`` into ``{"1": "a"}`` and ``inf``
into an error, so a test comparing ``candidate(x) == (1, 2)`` could not be judged. Every value becomes a JSON
value instead: ``None``, booleans, integers, strings and lists as themselves, and the rest tagged in a
one-key object: ``{"f": "inf"}`` (a float, by ``repr``: ``nan``, ``-0.0`` and every bit kept), ``{"t": [...]}``
a tuple, ``{"s": [...]}`` a set, ``{"F": [...]}`` a frozenset, ``{"d": [[key, value], ...]}`` a dict (keys of
any hashable type, order kept), ``{"b": "<base64>"}`` bytes, ``{"c": [real, imag]}`` a complex number, and
``{"i": "-1f..."}`` an integer of more than :data:`JSON_INT_BITS` bits, in hexadecimal.

Why hexadecimal: Python refuses to write or read an integer of more than 4,300 decimal digits (the conversion
is quadratic), so ``math.factorial(3000)`` could not cross as a JSON number at all; hexadecimal converts in
linear time and has no such limit.

Only these types cross. :func:`decode` builds nothing but plain builtins from whatever it is given, so an
object with a rigged ``__eq__`` in the submission's process arrives as its plain value or not at all;
:func:`decode` never raises (garbage is :data:`INVALID`), since its input comes from the submission.
"""

from __future__ import annotations

import binascii

TYPE_CHECKING = False  # typing and base64 (with re) are not imported: a row's trusted tests start fresh per sample
if TYPE_CHECKING:
    from typing import Any

# Deeper values are refused on both sides: the decoder recurses, and no test's value nests this deep.
MAX_DEPTH = 30
# Integers up to this many bits cross as JSON numbers (at most 4,215 decimal digits, under Python's 4,300);
# longer ones as hexadecimal text.
JSON_INT_BITS = 14_000
HEX_DIGITS = "0123456789abcdef"


class Unencodable(TypeError):
    """A value of a type that cannot cross as data (a generator, an object of the submission's own class)."""


class _Invalid:
    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as a JSON value. Exact types only (a subclass of ``int`` is not an ``int`` here): raises
    :class:`Unencodable` for anything else or anything nested deeper than :data:`MAX_DEPTH`."""
    if depth > MAX_DEPTH:
        raise Unencodable(f"the value nests more than {MAX_DEPTH} levels deep")
    kind = type(value)
    if kind is int and value.bit_length() > JSON_INT_BITS:
        return {"i": format(value, "x")}
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return {"f": repr(value)}
    if kind is list:
        return [encode(item, depth + 1) for item in value]
    if kind is tuple:
        return {"t": [encode(item, depth + 1) for item in value]}
    if kind is set or kind is frozenset:
        return {"s" if kind is set else "F": [encode(item, depth + 1) for item in value]}
    if kind is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is bytes:
        return {"b": binascii.b2a_base64(value, newline=False).decode()}  # base64.b64encode
    if kind is complex:
        return {"c": [encode(value.real), encode(value.imag)]}
    raise Unencodable(f"a value of type {kind.__name__} cannot be passed as data")


def _float(text: Any) -> Any:
    if not isinstance(text, str) or len(text) > 40:
        return INVALID
    try:
        return float(text)
    except ValueError:
        return INVALID


def _int(text: Any) -> Any:
    """Hexadecimal digits, with a leading ``-`` for a negative number, as the integer; nothing else
    (``int(text, 16)`` alone would also take ``0x``, ``_``, ``+`` and spaces)."""
    if not isinstance(text, str):
        return INVALID
    digits = text[1:] if text.startswith("-") else text
    if not digits or digits.lstrip(HEX_DIGITS):
        return INVALID
    return int(text, 16)


def _bytes(text: Any) -> Any:
    """``base64.b64decode(text, validate=True)`` for a str (which is binascii's strict base64 on its ASCII)."""
    if not isinstance(text, str) or not text.isascii():
        return INVALID
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error:
        return INVALID


def decode(data: Any, depth: int = 0) -> Any:
    """The value :func:`encode` made ``data`` from, built from plain builtins only; :data:`INVALID` when
    ``data`` is not such an encoding (never raises)."""
    if depth > MAX_DEPTH:
        return INVALID
    if data is None or type(data) in (bool, int, str):
        return data
    if type(data) is list:
        items = [decode(item, depth + 1) for item in data]
        return INVALID if any(item is INVALID for item in items) else items
    if type(data) is not dict or len(data) != 1:
        return INVALID
    ((tag, body),) = data.items()
    if tag == "f":
        return _float(body)
    if tag == "i":
        return _int(body)
    if tag == "b":
        return _bytes(body)
    if type(body) is not list:
        return INVALID
    if tag == "c":
        parts = [decode(part, depth + 1) for part in body]
        if len(parts) != 2 or any(type(part) is not float for part in parts):
            return INVALID
        return complex(*parts)
    if tag == "d":
        pairs = [(decode(pair[0], depth + 1), decode(pair[1], depth + 1)) if type(pair) is list and len(pair) == 2
                 else (INVALID, INVALID) for pair in body]
        if any(k is INVALID or v is INVALID for k, v in pairs):
            return INVALID
        try:
            return dict(pairs)
        except TypeError:  # an unhashable key
            return INVALID
    items = [decode(item, depth + 1) for item in body]
    if any(item is INVALID for item in items):
        return INVALID
    try:
        return {"t": tuple, "s": set, "F": frozenset}[tag](items) if tag in ("t", "s", "F") else INVALID
    except TypeError:  # an unhashable member
        return INVALID
