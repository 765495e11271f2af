"""The boundaries where data the submission controls enters the runner, one parse step per channel.

The submission controls the diff text (its headers, counts, paths and encoding: :mod:`diff`), everything its processes
write (a worker's replies to function calls and to patch probes, the pytest results channel, a program's
output) and therefore the values the report shows. A malformed input on any of them that raised inside the
runner would become "no verdict", an escape a policy could learn. So each channel has one function here that
returns a value the rest of the runner can use without further checks, or a :class:`Fault` charged to the
submission. None of them raises on any input (tests/runner/test_runner_channels.py fuzzes every one); only the
runner's own bugs, past these functions, may become ``verifier_error``.

| channel | boundary | refused as |
|---|---|---|
| the diff text | :func:`diff.parse` | ``invalid_patch`` (``test_infra_tampering`` for quoted paths) |
| a program's source (and a diff's bytes) | :func:`source` | ``solution_error`` (``invalid_patch``) |
| a worker's reply | :func:`worker_reply` | ``solution_error``, ``solution_oom``, ``output_limit_exceeded`` |
| the pytest results channel | :func:`test_results` | ``solution_error`` |
| a program's output | :func:`program_output` | ``wrong_answer`` |
| values shown in the report | :func:`shown`, :func:`plain`, :func:`head` | never: a bounded, printable string |
"""

from __future__ import annotations

import math

from . import wire
from .protocol import Record

TYPE_CHECKING = False  # typing and dataclasses are not imported at start-up: their milliseconds are paid per sample
if TYPE_CHECKING:
    import re
    from typing import Any, TypedDict

SUMMARY_CHARS = 200
ERROR_CHARS = 2000
# Deeper values are refused: the runner's comparisons recurse, and no task's answer nests this deep.
MAX_DEPTH = 64
# A line on the pytest results channel is a few hundred bytes; a longer one is not the plugin's.
MAX_RESULT_LINE = 64 << 10
# setup, call and teardown: a test reported more often than this is not reported by the plugin.
MAX_REPORTS_PER_TEST = 8
# The only error types a worker may claim: it is the submission's process, so anything else is a lie.
WORKER_ERROR_TYPES = ("solution_error", "solution_oom")


def _compiled(pattern: str | bytes) -> re.Pattern:
    """``pattern`` compiled, on first use (re caches it): re and the enums it imports cost a fresh runner
    milliseconds of CPU, and a function task's runner parses no diff and no program output."""
    import re

    return re.compile(pattern)


class Fault(Record):
    """Submission-controlled data refused at its boundary: the case fails with ``error_type`` (always one of
    the submission's own) and ``message`` (None when the details line should compare expected and actual)."""

    error_type: str
    message: str | None


# ---------------------------------------------------------------------------------------------------- the report

def _visible(char: str) -> str:
    """A character as a reader sees it: control and format characters (ANSI escapes, NUL, bidi overrides,
    U+2028) and lone surrogates spelled as Python escapes, so a log or terminal shows them instead of obeying."""
    return char if char.isprintable() or char in "\n\t" else repr(char)[1:-1]


# Newlines and tabs, which :func:`_visible` keeps: text whose other characters are printable needs no escape.
_LAYOUT = {ord("\n"): None, ord("\t"): None}


def _bounded(raw: str, limit: int) -> str:
    """``raw`` with every character visible (see :func:`_visible`), cut to ``limit`` characters."""
    cut = raw[: limit + 1]
    clean = cut if cut.translate(_LAYOUT).isprintable() else "".join(map(_visible, cut))
    if len(clean) <= limit:
        return clean
    return clean[: limit - 3] + "..." if limit >= 3 else clean[:limit]


def shown(value: Any, limit: int = SUMMARY_CHARS) -> str:
    """A value as the report shows it: its JSON, at most ``limit`` characters, never raising."""
    try:
        raw = wire.dumps(value)
    except (TypeError, ValueError, RecursionError):
        raw = f"<unprintable {type(value).__name__}>"
    return _bounded(raw, limit)


def plain(value: Any, limit: int = ERROR_CHARS) -> str:
    """A message as the report shows it: a string as it is, anything else as :func:`shown` renders it."""
    return _bounded(value, limit) if isinstance(value, str) else shown(value, limit)


def head(data: bytes, limit: int = SUMMARY_CHARS) -> str:
    """The start of a byte stream (a program's input or output) as text for the report."""
    return _bounded(data[:limit].decode("utf-8", "replace"), limit) + ("..." if len(data) > limit else "")


# ---------------------------------------------------------------------------------------------------- source text

def source(text: str, error_type: str, scratch_bytes: int) -> bytes | Fault:
    """The submission as the UTF-8 bytes to write to the scratch space (``scratch_bytes`` large). A lone
    surrogate (the host's JSON may carry ``\\udXXX`` escapes) has no UTF-8 form, as it has none in a Python
    file or a diff; a submission over a quarter of the scratch space would fill it before the run: both
    ``error_type``."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return Fault(error_type, f"the submission is not valid Unicode text (a lone surrogate at character "
                                 f"{exc.start})")
    if len(data) > scratch_bytes // 4:
        return Fault(error_type, f"the submission is {len(data)} bytes, more than a quarter of the "
                                 f"{scratch_bytes >> 20} MiB scratch space")
    return data


# ---------------------------------------------------------------------------------------------------- JSON lines

def _json_line(line: bytes) -> Any | Fault:
    """One line as strict UTF-8 JSON (NaN and Infinity allowed, as the worker's wire.dumps writes them),
    nesting at most MAX_DEPTH levels; a Fault(solution_error) otherwise."""
    try:
        value = wire.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError; so is an int of 4300+ digits
        return Fault("solution_error", "not a line of UTF-8 JSON within the parser's limits")
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (list, dict)):
                if depth >= MAX_DEPTH:
                    return Fault("solution_error", f"a JSON value nested more than {MAX_DEPTH} levels deep")
                stack.append((child, depth + 1))
    return value


if TYPE_CHECKING:
    class Reply(TypedDict):
        """A worker's answer to one call: ``value`` when ``ok``, else why it raised (plain, bounded strings)."""

        ok: bool
        value: Any
        error_type: str
        error: str
        raises: str
else:
    Reply = dict  # the TypedDict above, without importing typing at start-up


def worker_error_type(value: Any) -> str:
    return value if value in WORKER_ERROR_TYPES else "solution_error"


def worker_reply(line: bytes, call_id: str | None, limit: int) -> Reply | Fault:
    """A worker's reply line: to loading (``call_id`` None: ready, else the load error as a Fault) or to the
    call ``call_id``. ``limit`` is the output limit in bytes: a reply is output too."""
    if len(line) > limit:
        return Fault("output_limit_exceeded", f"the worker's reply was {len(line)} bytes (limit {limit})")
    reply = _json_line(line)
    if isinstance(reply, Fault):
        return Fault("solution_error", f"the worker's reply was {reply.message}")
    if not isinstance(reply, dict):
        return Fault("solution_error", "the worker's reply was not a JSON object")
    if call_id is None:
        if reply.get("event") == "ready":
            return Reply(ok=True, value=None, error_type="", error="", raises="")
        return Fault(worker_error_type(reply.get("error_type")), plain(reply.get("error")))
    if reply.get("id") != call_id:
        return Fault("solution_error", "the worker's reply did not answer this call")
    if reply.get("ok") is True:
        return Reply(ok=True, value=reply.get("value"), error_type="", error="", raises="")
    return Reply(ok=False, value=None, error_type=worker_error_type(reply.get("error_type")),
                 error=plain(reply.get("error")), raises=plain(reply.get("raises"), SUMMARY_CHARS))


# ---------------------------------------------------------------------------------------------------- pytest

class TestRun:
    """What the trusted plugin reported, as far as the results channel says: whether collection finished,
    the session's exit status (None if it never finished) and each listed test's (when, outcome) reports."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.collected = False
        self.exitstatus: int | None = None
        self.reports: dict[str, list[tuple[str, str]]] = {}


def test_results(data: bytes, listed: set[str]) -> TestRun | Fault:
    """The pytest results channel: every line must be one of the plugin's events. The submission's code runs
    in that process and can write anything to the channel's fd, so any other line is its doing."""
    run = TestRun()
    for number, line in enumerate(data.splitlines(), 1):
        event = _json_line(line) if len(line) <= MAX_RESULT_LINE else Fault("solution_error", "an overlong line")
        kind = event.get("event") if isinstance(event, dict) else None
        if kind == "collected" and _is_int(event.get("count")):
            run.collected = True
        elif kind == "finished" and _is_int(event.get("exitstatus")):
            run.exitstatus = event["exitstatus"]
        elif kind == "test" and all(isinstance(event.get(key), str) for key in ("nodeid", "when", "outcome")):
            if event["nodeid"] in listed:
                reports = run.reports.setdefault(event["nodeid"], [])
                if len(reports) >= MAX_REPORTS_PER_TEST:
                    return Fault("solution_error", f"the results channel reported {plain(event['nodeid'], 200)} "
                                                   f"more than {MAX_REPORTS_PER_TEST} times")
                reports.append((plain(event["when"], 40), plain(event["outcome"], 40)))
        else:
            why = event.message if isinstance(event, Fault) else "not one of the plugin's events"
            return Fault("solution_error", f"the test run wrote garbage on the results channel (line {number}: "
                                           f"{why})")
    return run


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------------- programs

_NUMBER = rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"


def _number(token: bytes) -> float | None:
    """A token as a finite number, or None. Only plain decimal notation: float() would also take ``1_0``,
    ``nan`` and ``infinity``."""
    if not _compiled(_NUMBER).fullmatch(token):
        return None
    value = float(token)
    return value if math.isfinite(value) else None


def program_output(expected: bytes, actual: bytes, tolerance: float | None) -> Fault | None:
    """A program's output against the expected one, token by token (whitespace-separated); with a tolerance,
    two tokens that both are numbers may differ by that much, absolutely or relatively. None: it is right."""
    want, got = expected.split(), actual.split()
    if len(want) != len(got):
        return Fault("wrong_answer", None)
    for a, b in zip(want, got):
        if a == b:
            continue
        x, y = (_number(a), _number(b)) if tolerance is not None else (None, None)
        if x is None or y is None or not math.isclose(x, y, rel_tol=tolerance, abs_tol=tolerance):
            return Fault("wrong_answer", None)
    return None
