"""Fuzzing every boundary where submission-controlled data enters the runner (deepgym/runner/channels.py).

Each input must be either accepted, as a value the runner's next steps handle without raising (comparison,
tampering checks, the report's strict JSON), or refused with a fault charged to the submission; never an
uncaught exception, which the runner's entry point would turn into "no verdict". In-process on the host, no
Docker; derandomized, so every run tries the same inputs.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepgym.runner import channels, diff, wire
from deepgym.runner.channels import Fault
from deepgym.runner.kinds.function import equal
from deepgym.runner.kinds.patch import tampering
from deepgym.runner.protocol import is_scored

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=150,
                suppress_health_check=list(HealthCheck))
LIMIT = 1 << 20
CALL_ID = "0123456789abcdef"
LISTED = {"tests/test_quoting.py::test_a", "tests/test_reader.py::test_b"}

# Every code point, lone surrogates and control characters included.
any_text = st.text(st.characters(exclude_categories=()), max_size=40)
huge_ints = st.one_of(st.integers(), st.integers(min_value=-(10 ** 5000), max_value=10 ** 5000),
                      st.sampled_from([10 ** 400, -(10 ** 4299), 2 ** 1024, 2 ** 1024 - 1]))
numbers = st.one_of(huge_ints, st.floats(allow_nan=True, allow_infinity=True))
scalars = st.one_of(st.none(), st.booleans(), numbers, any_text)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(any_text, inner, max_size=4), max_leaves=12)


@st.composite
def nested(draw: st.DrawFn) -> Any:
    """A value nested anywhere from 0 to 3000 levels deep, lists or objects."""
    value = draw(scalars)
    for _ in range(draw(st.sampled_from([0, 1, 2, channels.MAX_DEPTH - 1, channels.MAX_DEPTH, 900, 3000]))):
        value = [value] if draw(st.booleans()) else {"k": value}
    return value


values = st.one_of(json_values, nested())


def _encode(value: Any, ensure_ascii: bool) -> bytes | None:
    """The JSON a hostile worker could write for ``value`` (raw surrogates encoded as such), or None if even
    the worker's json.dumps cannot encode it."""
    try:
        return json.dumps(value, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError):
        return None


@st.composite
def json_lines(draw: st.DrawFn, objects: st.SearchStrategy[Any]) -> bytes:
    """A line as a hostile process writes it: valid JSON of ``objects``, truncated, interleaved with another,
    prefixed or suffixed with garbage, or raw bytes (invalid UTF-8, NUL, overlong nesting, huge numbers)."""
    encoded = [line for line in (_encode(draw(objects), draw(st.booleans())) for _ in range(2)) if line is not None]
    raw = st.binary(max_size=64)
    pieces = st.sampled_from([b"[" * 5000, b"{\"a\":" * 3000, b"9" * 5000, b"1e999", b"-Infinity", b"NaN",
                              b"\xff\xfe", b"\xed\xa0\x80", b"\x00", b"\"\\ud800\"", b"{\"id\": 1e400}"])
    line = draw(st.one_of(
        st.sampled_from(encoded) if encoded else raw,
        st.tuples(st.sampled_from(encoded) if encoded else raw, st.integers(0, 200)).map(lambda t: t[0][:t[1]]),
        st.lists(st.one_of(raw, pieces, st.sampled_from(encoded) if encoded else raw), max_size=4).map(b"".join),
    ))
    if len(encoded) == 2 and draw(st.booleans()):  # two replies interleaved byte by byte
        first, second = encoded
        line = bytes(b for pair in zip(first, second) for b in pair) + first[len(second):] + second[len(first):]
    return line.replace(b"\n", b" ")


def _report_safe(*texts: Any) -> None:
    """What the report shows must be printable strings (newlines and tabs aside) that its strict JSON and
    any UTF-8 consumer accept."""
    for text in texts:
        assert text is None or isinstance(text, str)
    json.dumps(list(texts), allow_nan=False).encode("utf-8")
    for text in texts:
        if text is not None:
            assert text.replace("\n", "").replace("\t", "").isprintable(), repr(text)


def _charged(fault: Fault) -> None:
    assert is_scored(fault.error_type), fault
    _report_safe(fault.message)


replies = st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.just(CALL_ID), scalars, values), "ok": st.one_of(st.booleans(), values),
    "value": values, "error_type": st.one_of(st.sampled_from(["solution_oom", "verifier_error"]), values),
    "error": values, "raises": values, "event": st.one_of(st.sampled_from(["ready", "load_error"]), values)})


@FUZZ
@given(line=st.one_of(json_lines(replies), json_lines(values)), loading=st.booleans(),
       expected=st.one_of(json_values, nested()), tolerance=st.sampled_from([None, 1e-6]))
def test_worker_replies(line: bytes, loading: bool, expected: Any, tolerance: float | None) -> None:
    """Function calls and patch probes: a reply is a Reply the judges can compare and show, or a fault."""
    reply = channels.worker_reply(line, None if loading else CALL_ID, LIMIT)
    if isinstance(reply, Fault):
        _charged(reply)
        return
    assert reply["error_type"] in ("", "solution_error", "solution_oom")
    actual = reply["value"] if reply["ok"] else {"raises": reply["raises"]}
    assert isinstance(equal(expected, actual, tolerance), bool)
    _report_safe(channels.shown(actual), channels.shown(expected), reply["error"], reply["raises"])


def test_an_overlong_reply_is_output() -> None:
    fault = channels.worker_reply(b"[" + b"0," * LIMIT + b"0]", CALL_ID, LIMIT)
    assert isinstance(fault, Fault) and fault.error_type == "output_limit_exceeded"


def test_the_deepest_reply_accepted_still_compares() -> None:
    value: Any = 0
    for _ in range(channels.MAX_DEPTH - 2):  # with [value] and the reply's object: MAX_DEPTH levels
        value = [value]
    reply = channels.worker_reply(json.dumps({"id": CALL_ID, "ok": True, "value": [value]}).encode(), CALL_ID, LIMIT)
    assert not isinstance(reply, Fault) and equal([value], reply["value"], 1e-6)
    too_deep = channels.worker_reply(json.dumps({"id": CALL_ID, "ok": True, "value": [[value]]}).encode(), CALL_ID,
                                     LIMIT)
    assert isinstance(too_deep, Fault) and too_deep.error_type == "solution_error"


events = st.one_of(
    st.fixed_dictionaries({"event": st.just("collected"), "count": st.one_of(huge_ints, values)}),
    st.fixed_dictionaries({"event": st.just("finished"), "exitstatus": st.one_of(huge_ints, st.booleans(), values)}),
    st.fixed_dictionaries({"event": st.just("test"), "nodeid": st.one_of(st.sampled_from(sorted(LISTED)), values),
                           "when": st.one_of(st.sampled_from(["setup", "call", "teardown"]), values),
                           "outcome": st.one_of(st.sampled_from(["passed", "failed"]), values)}),
    values)


@FUZZ
@given(lines=st.lists(json_lines(events), max_size=12), separator=st.sampled_from([b"\n", b"\r\n", b"\r"]),
       repeat=st.sampled_from([1, 1, 20]))
def test_pytest_results_channel(lines: list[bytes], separator: bytes, repeat: int) -> None:
    """Whatever the repository's code writes to the results fd: a TestRun the judge can grade, or a fault."""
    run = channels.test_results(separator.join(lines * repeat), LISTED)
    if isinstance(run, Fault):
        _charged(run)
        return
    assert set(run.reports) <= LISTED and (run.exitstatus is None or type(run.exitstatus) is int)
    for reports in run.reports.values():
        assert len(reports) <= channels.MAX_REPORTS_PER_TEST
        _report_safe(*(text for report in reports for text in report))


def test_a_plugin_run_is_accepted() -> None:
    lines = [{"event": "collected", "count": 2}, {"event": "test", "nodeid": "tests/test_reader.py::test_b",
                                                  "when": "call", "outcome": "passed"}, {"event": "finished", "exitstatus": 0}]
    run = channels.test_results(b"".join(json.dumps(line).encode() + b"\n" for line in lines), LISTED)
    assert not isinstance(run, Fault)
    assert run.collected and run.exitstatus == 0 and run.reports == {"tests/test_reader.py::test_b": [("call", "passed")]}


paths = st.one_of(st.sampled_from(["a/plaincsv/x.py", "b/plaincsv/x.py", "/dev/null", "a/tests/test_x.py", "noprefix",
                                   '"a/q\\164.py"', "a/" + "d/" * 40 + "x", "a/../../etc/passwd", "a/conftest.py",
                                   "a/x.py\tstamp", "a/\x00", "a/\udc80.py"]), any_text.map(lambda t: "a/" + t))
counts = st.one_of(st.integers(0, 5).map(str), st.sampled_from(["9" * 5000, "999999999", "1234567890", "٣", "-1", ""]))
diff_lines = st.one_of(
    st.builds(lambda a, b: f"diff --git {a} {b}", paths, paths),
    st.builds(lambda a: f"--- {a}", paths), st.builds(lambda b: f"+++ {b}", paths),
    st.builds(lambda a, b, c, d: f"@@ -{a},{b} +{c},{d} @@", counts, counts, counts, counts),
    st.builds(lambda a, c: f"@@ -{a} +{c} @@ tail", counts, counts),
    st.sampled_from(["new file mode 100644", "new file mode 120000", "old mode 100644", "new mode", "deleted file mode ",
                     "rename from ", "rename to x", "copy from", "similarity index 100%", "index 0000000..1111111",
                     "GIT binary patch", "Binary files a and b differ", "\\ No newline at end of file", "Index: x",
                     "*** x", "==== x", "", " ", "+", "-", "\r", "\x00", "\udfff"]),
    any_text.map(lambda t: " " + t), any_text.map(lambda t: "+" + t), any_text.map(lambda t: "-" + t), any_text)


@FUZZ
@given(lines=st.lists(diff_lines, max_size=30), repeat=st.sampled_from([1, 1, 500]))
def test_diff_text(lines: list[str], repeat: int) -> None:
    """The diff's headers, counts, paths and encoding: a Diff the tampering check takes, or a fault."""
    parsed = diff.parse("\n".join(lines * repeat), 64 << 20)
    if isinstance(parsed, Fault):
        _charged(parsed)
        assert parsed.error_type in ("invalid_patch", "test_infra_tampering")
        return
    assert isinstance(parsed.data, bytes) and parsed.data.endswith(b"\n")
    reason = tampering(parsed.files, {"tests/test_quoting.py"})
    _report_safe(reason)


def test_a_lone_surrogate_in_a_diff_is_invalid() -> None:
    fault = diff.parse("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+\udc80\n", 64 << 20)
    assert isinstance(fault, Fault) and fault.error_type == "invalid_patch"


def test_a_diff_of_too_many_files_is_invalid() -> None:
    many = "".join(f"diff --git a/f{i} b/f{i}\nnew file mode 100644\n" for i in range(diff.MAX_DIFF_FILES + 1))
    assert isinstance(diff.parse(many, 64 << 20), Fault)
    assert not isinstance(diff.parse(many.split(f"diff --git a/f{diff.MAX_DIFF_FILES} ")[0], 64 << 20), Fault)


@FUZZ
@given(text=st.one_of(any_text, st.lists(any_text, max_size=50).map("".join)))
def test_program_source(text: str) -> None:
    """A program's source: the bytes to run, or solution_error when it has no UTF-8 form."""
    code = channels.source(text, "solution_error", 4 << 10)
    if isinstance(code, Fault):
        _charged(code)
        assert any(0xD800 <= ord(c) <= 0xDFFF for c in text) or len(text.encode("utf-8", "surrogatepass")) > 1 << 10
    else:
        assert code.decode("utf-8") == text


tokens = st.one_of(st.binary(max_size=12), st.sampled_from([b"1_0", b"nan", b"inf", b"-Infinity", b"1e999", b"9" * 5000,
                                                            b"0x10", b".5", b"5.", b"-0", b"1e-400", b"\xff", b"\x00"]),
                   st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).encode()),
                   huge_ints.map(lambda n: str(n).encode() if abs(n) < 10 ** 4000 else b"1" * 4300))
outputs = st.lists(tokens, max_size=8).map(b" ".join)


@FUZZ
@given(expected=outputs, actual=st.one_of(outputs, st.binary(max_size=200)), tolerance=st.sampled_from([None, 1e-6]))
def test_program_output(expected: bytes, actual: bytes, tolerance: float | None) -> None:
    """A program's output: right (None) or a wrong answer; shown as bounded text either way."""
    verdict = channels.program_output(expected, actual, tolerance)
    assert verdict is None or (verdict.error_type == "wrong_answer" and verdict.message is None)
    if expected.split() == actual.split():
        assert verdict is None
    _report_safe(channels.head(actual), channels.head(expected))


def test_program_numbers_are_plain_decimals() -> None:
    assert channels.program_output(b"10 0.5", b"10.0000001 5e-1", 1e-6) is None
    assert channels.program_output(b"10", b"1_0", 1e-6) is not None
    assert channels.program_output(b"nan", b"nan", 1e-6) is None  # identical tokens
    assert channels.program_output(b"1e999", b"1e999 ", 1e-6) is None
    assert channels.program_output(b"1e308", b"1e999", 1e-6) is not None


class _Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("no")


@FUZZ
@given(value=st.one_of(values, st.just(10 ** 5000), st.builds(_Hostile), st.sets(st.integers(), max_size=3)),
       limit=st.sampled_from([0, 3, 10, 200, 2000]))
def test_values_shown_in_the_report(value: Any, limit: int) -> None:
    """Anything the report shows: a valid string of at most ``limit`` characters."""
    for text in (channels.shown(value, limit), channels.plain(value, limit)):
        assert len(text) <= limit
        _report_safe(text)


layout = st.text(st.sampled_from("a 1\n\t"), max_size=20)  # printable but for newlines and tabs
one_control = st.builds(lambda before, char, after: before + char + after, layout,
                        st.sampled_from(["", "\r", "\x1b", "\x00", "\x85", "\u2028", "\u202e", "\udc80"]), layout)


@FUZZ
@given(text=st.one_of(one_control, st.text(max_size=60)), limit=st.sampled_from([0, 3, 10, 200]))
def test_text_shown_in_the_report_is_every_character_made_visible(text: str, limit: int) -> None:
    """The shortcut for text that needs no escape (printable but for newlines and tabs) shows what spelling out
    each character would."""
    spelled = "".join(map(channels._visible, text[:limit + 1]))
    assert channels.plain(text, limit) == (spelled if len(spelled) <= limit else
                                           spelled[:limit - 3] + "..." if limit >= 3 else spelled[:limit])


def test_control_characters_are_shown_not_obeyed() -> None:
    assert channels.plain("a\x1b[2J\x00\u202e\udc80\nb\tc") == "a\\x1b[2J\\x00\\u202e\\udc80\nb\tc"
    assert channels.head(b"\xff\x1b[31m ok") == "\ufffd\\x1b[31m ok"
    assert channels.head(b"1 2\r\n3\t4\n") == "1 2\\r\n3\t4\n"


def _outcome(call: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """What ``call`` gives: ("value", its result, NaN-safe) or (its exception's type and message)."""
    try:
        return "value", repr(call(*args, **kwargs))
    except RecursionError:
        return "RecursionError", None
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


texts = st.one_of(any_text, st.binary(max_size=64))


@FUZZ
@given(line=st.one_of(json_lines(values), json_lines(replies)), decoded=st.booleans(),
       space=st.sampled_from(["", " ", "\t\n\r ", "\u00a0", "\ufeff"]))
def test_wire_reads_json_as_json_does(line: bytes, decoded: bool, space: str) -> None:
    """The runner's JSON reader (deepgym/runner/wire.py, json's own C scanner) against json.loads: the same
    value, or the same error, for every line a hostile worker may write, as bytes and as text."""
    data: str | bytes = space.encode("utf-8") + line + space.encode("utf-8")
    if decoded:
        data = data.decode("utf-8", "surrogateescape")
    assert _outcome(wire.loads, data) == _outcome(json.loads, data)


@FUZZ
@given(data=st.one_of(texts, st.sampled_from([b"\xef\xbb\xbf1", "\ufeff1", "1".encode("utf-16"),
                                              "[1]".encode("utf-32"), b"\x001", b"1\x00", b"", " ", "1 2"])))
def test_wire_reads_any_input_as_json_does(data: str | bytes) -> None:
    assert _outcome(wire.loads, data) == _outcome(json.loads, data)


@FUZZ
@given(value=st.one_of(values, st.builds(_Hostile), st.sets(st.integers(), max_size=3),
                       st.dictionaries(st.one_of(st.integers(), st.floats(), st.booleans(), st.none()), scalars,
                                       max_size=3),
                       st.tuples(scalars, scalars)),
       allow_nan=st.booleans())
def test_wire_writes_json_as_json_does(value: Any, allow_nan: bool) -> None:
    """The runner's JSON writer against json.dumps: the same text, or the same error."""
    assert _outcome(wire.dumps, value, allow_nan=allow_nan) == _outcome(json.dumps, value, allow_nan=allow_nan)


def test_wire_refuses_a_circular_value_and_then_encodes_the_next() -> None:
    circular: list[Any] = []
    circular.append(circular)
    assert _outcome(wire.dumps, circular) == ("ValueError", "Circular reference detected")
    shared = [1]
    assert wire.dumps([shared, shared, {"a": shared}]) == json.dumps([shared, shared, {"a": shared}])
