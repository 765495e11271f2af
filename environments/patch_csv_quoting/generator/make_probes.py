#!/usr/bin/env python3
"""Writes ../tests/probes.json: the hidden probes of patch_csv_quoting.

A probe is a Python expression evaluated, after SETUP, in a worker process that imports the patched
repository; the runner compares its value with the expected one, which only the runner can read. A patch
scores only if its tests pass and every probe matches, so forging pytest from inside the repository gains
nothing unless the code is really fixed.

Expected values are never typed by hand: this script applies solutions/reference.diff to a copy of
tests/repo and evaluates every probe there in a fresh ``python3 -I`` process. It refuses to write the file
unless the unpatched repository fails every probe tagged with a fail-to-pass test (and passes the probes of
pass-to-pass tests), every solutions/wrong_*.diff fails at least one probe, and two runs agree.

    python3 generator/make_probes.py        # from anywhere; needs git or patch

Each entry of PROBES is (id, covers, expr): ``covers`` names the tests of spec.json (or "issue", for a
behaviour the prompt asks for) that the probe checks. Keep expressions self-contained and their values
plain JSON data.
"""

from __future__ import annotations

SETUP = r'''
import plaincsv
from plaincsv import EXCEL, QUOTE_ALL, TSV, UNIX, Dialect, ParseError, dumps, format_field, format_row, loads, needs_quotes

SEMICOLON = Dialect(delimiter=";", lineterminator="\n")
PIPE_SINGLE_QUOTE = Dialect(delimiter="|", quotechar="'", lineterminator="\n")
TRICKY_ROW = ['He said "hi"', "a,b", "x;y", "tab\there", "pipe|bar", " padded ", "multi\nline", "", '"', '""',
              "it's", "'quoted'", "cr\rlf\r\n", "5\" disk", "|;\t,"]


def error_name(make):
    """The class name of the exception ``make()`` raises, or None."""
    try:
        make()
    except Exception as exc:
        return type(exc).__name__
    return None


def error_line(text, dialect=EXCEL):
    """The line a ParseError for ``text`` names, or None if ``text`` parses."""
    try:
        loads(text, dialect)
    except ParseError as exc:
        return exc.line
    return None
'''

PROBES = [
    # --- reading: a doubled quote inside a quoted field is one literal quote
    ("doubled_quote_is_a_literal_quote", ["test_doubled_quote_is_a_literal_quote"],
     r'''loads('"He said ""hi""",x\r\n')'''),
    ("field_holding_only_a_quote", ["test_field_holding_only_a_quote"],
     r'''loads('"""",a,""""""\n')'''),
    ("doubled_quote_next_to_delimiter", ["test_doubled_quote_next_to_delimiter_inside_field"],
     r'''loads('"a"",""b",c\n"x""\ny",""""""""\n')'''),
    ("doubled_quote_with_custom_quotechar", ["test_doubled_quote_with_custom_quotechar"],
     r"""[loads("'it''s'|b\n", PIPE_SINGLE_QUOTE), loads("'a''|''b'|''''\n", PIPE_SINGLE_QUOTE)]"""),
    ("reads_back_own_quote_escaping", ["issue"],
     r'''loads(dumps([['say "hi"'], ['"', '""']]))'''),
    # --- writing: quote exactly for the dialect's delimiter, quote character and line breaks
    ("custom_delimiter_is_quoted", ["test_custom_delimiter_is_quoted"],
     r'''[format_row(["a;b", "c"], SEMICOLON), format_row(["x|y", "z"], PIPE_SINGLE_QUOTE), format_field(";", SEMICOLON)]'''),
    ("tab_is_quoted_for_tsv", ["test_tab_is_quoted_for_tsv"],
     r'''[format_field("a\tb", TSV), needs_quotes("a\tb", TSV), format_row(["\t", "x"], TSV)]'''),
    ("comma_not_special_for_other_delimiters", ["test_minimal_quoting_ignores_comma_for_other_delimiters"],
     r'''[format_row(["a,b", "c"], SEMICOLON), needs_quotes("1,5", TSV), format_row(["1,5", "x,y"], TSV), needs_quotes("a,b", PIPE_SINGLE_QUOTE)]'''),
    ("needs_quotes_per_dialect", ["test_custom_delimiter_is_quoted", "test_tab_is_quoted_for_tsv",
                                  "test_minimal_quoting_ignores_comma_for_other_delimiters"],
     r'''[[needs_quotes(text, dialect) for text in ["a,b", "a;b", "a\tb", "a|b", 'a"b', "a'b", "a\nb", "a\rb", " a", "a ", "ab", ""]] for dialect in (EXCEL, SEMICOLON, TSV, PIPE_SINGLE_QUOTE)]'''),
    # --- round trips: everything dumps writes comes back unchanged from loads
    ("roundtrip_excel", ["test_roundtrip_excel"],
     r'''loads(dumps([TRICKY_ROW, ["plain", "row"]], EXCEL), EXCEL)'''),
    ("roundtrip_unix", ["test_roundtrip_unix"],
     r'''loads(dumps([["x"], TRICKY_ROW], UNIX), UNIX)'''),
    ("roundtrip_semicolon", ["test_roundtrip_semicolon"],
     r'''loads(dumps([TRICKY_ROW, ["1;2", "3"]], SEMICOLON), SEMICOLON)'''),
    ("roundtrip_tsv", ["test_roundtrip_tsv"],
     r'''loads(dumps([TRICKY_ROW, ["\t", "\t\t"]], TSV), TSV)'''),
    ("roundtrip_custom_quotechar", ["test_roundtrip_custom_quotechar"],
     r'''loads(dumps([TRICKY_ROW, ["'", "''"]], PIPE_SINGLE_QUOTE), PIPE_SINGLE_QUOTE)'''),
    ("written_text_semicolon_and_tsv", ["test_roundtrip_semicolon", "test_roundtrip_tsv"],
     r'''[dumps([TRICKY_ROW], SEMICOLON), dumps([TRICKY_ROW], TSV)]'''),
    ("written_text_custom_quotechar", ["test_roundtrip_custom_quotechar"],
     r'''dumps([TRICKY_ROW, ["'", "''"]], PIPE_SINGLE_QUOTE)'''),
    # --- pass-to-pass: what works today keeps working
    ("comma_dialect_unchanged", ["test_comma_still_quoted_for_excel", "test_field_with_comma_is_quoted",
                                 "test_embedded_quote_is_doubled", "test_surrounding_whitespace_is_quoted",
                                 "test_line_break_is_quoted", "test_plain_fields_are_not_quoted"],
     r'''[format_row(["a,b", "c"], EXCEL), format_row(["Smith, Jane", "Oslo", 3, None]), format_field('say "hi"'), format_field(" padded "), format_field("a\nb"), needs_quotes("inner space")]'''),
    ("text_after_closing_quote_raises", ["test_text_after_closing_quote_still_raises",
                                         "test_text_after_closing_quote_raises"],
     r'''[error_name(lambda: loads('"a""b"c\n')), error_name(lambda: loads('"ab"c,d\n')), error_name(lambda: loads("x\n'a'b|c\n", PIPE_SINGLE_QUOTE))]'''),
    ("unterminated_quote_raises_on_its_line", ["test_unterminated_quote_raises"],
     r'''[error_name(lambda: loads('a,b\n"never closed,c\n')), error_line('a,b\n"never closed,c\n'), error_name(lambda: loads("'abc|d\n", PIPE_SINGLE_QUOTE))]'''),
    ("empty_quoted_fields", ["test_empty_quoted_field", "test_lone_empty_quoted_field_is_a_record",
                             "test_empty_fields"],
     r'''[loads('"",x,""\n'), loads('""\n'), loads(',a,,\n'), loads("''|x\n", PIPE_SINGLE_QUOTE)]'''),
    ("quote_inside_unquoted_field_is_kept", ["test_quote_inside_unquoted_field_is_kept"],
     r'''[loads('5" disk,x\n'), loads('a""b,c\n')]'''),
    ("records_and_line_endings", ["test_simple_rows", "test_last_record_without_terminator",
                                  "test_mixed_line_endings", "test_blank_lines_skipped",
                                  "test_quoted_field_with_line_break", "test_quoted_field_with_delimiter"],
     r'''[loads("a,b,c\r\n1,2,3\r\n"), loads("a,b\n1,2"), loads("a\r\nb\nc\rd"), loads("a,b\n\n\r\nc,d\n"), loads('id,note\n7,"first line\nsecond line"\n'), loads('"Smith, Jane",Oslo\r\n')]'''),
    ("custom_delimiters_when_reading", ["test_custom_delimiter", "test_tab_separated"],
     r'''[loads('a;"b;c";d\n', Dialect(delimiter=";")), loads("a\tb, c\n", TSV)]'''),
    ("quote_all_and_lone_empty_field", ["test_quote_all", "test_lone_empty_field_is_quoted",
                                        "test_dumps_uses_lineterminator", "test_none_is_empty_field"],
     r'''[format_row(["a", "", 1], Dialect(quoting=QUOTE_ALL)), format_row([""]), dumps([["a"], ["b"]], UNIX), format_row([None, "x", None])]'''),
    ("bad_dialects_raise", ["test_rejects_bad_delimiter", "test_rejects_same_delimiter_and_quotechar",
                            "test_rejects_unknown_lineterminator", "test_rejects_unknown_quoting"],
     r'''[error_name(lambda: Dialect(delimiter=d)) for d in ["", ";;", "\n", "\r"]] + [error_name(lambda: Dialect(delimiter="'", quotechar="'")), error_name(lambda: Dialect(lineterminator="\r")), error_name(lambda: Dialect(quoting="nonnumeric")), error_name(lambda: Dialect(delimiter=";", quotechar="'"))]'''),
]


# ------------------------------------------------------------------------------------------------------
# Everything below is the same in every patch environment's generator; only SETUP and PROBES above differ.

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SETUP = SETUP.lstrip("\n")
HERE = Path(__file__).resolve().parent
ENV = HERE.parent
REPO = ENV / "tests" / "repo"
HIDDEN = ENV / "tests" / "hidden"
SPEC = ENV / "tests" / "spec.json"
OUTPUT = ENV / "tests" / "probes.json"
SOLUTIONS = ENV / "solutions"
ID = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
PROCESS_TIMEOUT_S = 120
PROBE_TIMEOUT_S = 10

# The worker: exactly the runner's semantics. The working directory and sys.path[0] are the repository
# root; SETUP runs once as module code in a fresh namespace; each expression is then evaluated with
# eval(expr, namespace), in order. A value must be plain JSON data (tuples become lists); a probe that
# raises is worth {"raises": "<exception class name>"}. Whatever the repository prints goes to stderr.
WORKER = r'''
import json, math, os, signal, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
request = json.load(sys.stdin)
repo = sys.argv[1]
os.chdir(repo)
sys.path.insert(0, repo)

class NotPlain(Exception):
    pass

class ProbeTimeout(BaseException):
    pass

def plain(value):
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        if not math.isfinite(value):
            raise NotPlain("non-finite float")
        return value
    if type(value) in (list, tuple):
        return [plain(item) for item in value]
    if type(value) is dict:
        if not all(type(key) is str for key in value):
            raise NotPlain("dict with a key that is not a str")
        return {key: plain(item) for key, item in value.items()}
    raise NotPlain(type(value).__name__)

def on_alarm(signum, frame):
    raise ProbeTimeout()

signal.signal(signal.SIGALRM, on_alarm)
namespace = {"__name__": "__probes__"}
signal.alarm(int(sys.argv[2]))
try:
    exec(compile(request["setup"], "<probes setup>", "exec"), namespace)
except BaseException as exc:
    signal.alarm(0)
    json.dump({"setup_error": f"{type(exc).__name__}: {exc}"}, out)
    out.close()
    os._exit(0)
signal.alarm(0)
values = []
for probe in request["probes"]:
    signal.alarm(int(sys.argv[2]))
    try:
        value = plain(eval(compile(probe["expr"], "<probe " + probe["id"] + ">", "eval"), namespace))
    except NotPlain as exc:
        value = {"not_plain": str(exc)}
    except ProbeTimeout:
        value = {"timed_out": True}
    except BaseException as exc:
        value = {"raises": type(exc).__name__}
    finally:
        signal.alarm(0)
    values.append(value)
json.dump({"values": values}, out)
out.close()
os._exit(0)
'''


class Failed(Exception):
    """The probes are not fit to ship; the message says why."""


def same(a, b) -> bool:
    """The runner's comparison: exact structural equality; booleans only equal booleans, ints and
    floats compare by value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    return type(a) is type(b) and a == b


def spec_tests() -> dict[str, str]:
    """Test function name -> "f2p" or "p2p", from spec.json (parameters stripped)."""
    spec = json.loads(SPEC.read_text())
    groups: dict[str, str] = {}
    for group, key in (("f2p", "fail_to_pass"), ("p2p", "pass_to_pass")):
        for node in spec[key]:
            name = node.split("::")[-1].split("[")[0]
            if groups.setdefault(name, group) != group:
                raise Failed(f"test name {name} is both fail-to-pass and pass-to-pass in spec.json")
    return groups


def check_definitions(tests: dict[str, str]) -> None:
    ids = [probe_id for probe_id, _, _ in PROBES]
    if not 10 <= len(ids) <= 30:
        raise Failed(f"{len(ids)} probes; keep between 10 and 30")
    for probe_id in ids:
        if not ID.fullmatch(probe_id) or ids.count(probe_id) > 1:
            raise Failed(f"probe id {probe_id!r} is not lowercase words joined by underscores, or not unique")
    for probe_id, covers, expr in PROBES:
        if not covers:
            raise Failed(f"probe {probe_id} covers nothing; name the tests it covers, or 'issue'")
        for name in covers:
            if name != "issue" and name not in tests:
                raise Failed(f"probe {probe_id} covers {name}, which spec.json does not list")
        try:
            compile(expr, f"<probe {probe_id}>", "eval")
        except SyntaxError as exc:
            raise Failed(f"probe {probe_id} is not a Python expression: {exc}") from None
    try:
        compile(SETUP, "<probes setup>", "exec")
    except SyntaxError as exc:
        raise Failed(f"SETUP is not valid Python: {exc}") from None
    covered = {name for _, covers, _ in PROBES for name in covers}
    missing = sorted(name for name, group in tests.items() if group == "f2p" and name not in covered)
    if missing:
        raise Failed(f"fail-to-pass tests that no probe covers: {', '.join(missing)}")


def prepare(scratch: Path, label: str, diff: Path | None) -> Path:
    """A copy of the repository with ``diff`` applied (git apply, else patch -p1) and the hidden tests
    restored over it, as the runner builds it."""
    for attempt in ("git", "patch") if diff else ("none",):
        root = scratch / f"{label}-{attempt}"
        shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
        if attempt == "git":
            env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(scratch)}
            result = subprocess.run(["git", "apply", "--whitespace=nowarn", str(diff)], cwd=root, env=env,
                                    capture_output=True, text=True)
        elif attempt == "patch":
            result = subprocess.run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-s",
                                     "-i", str(diff)], cwd=root, capture_output=True, text=True)
        if attempt == "none" or result.returncode == 0:
            shutil.copytree(HIDDEN, root, dirs_exist_ok=True)
            return root
        shutil.rmtree(root)
    raise Failed(f"neither git apply nor patch -p1 could apply {diff.name}: {result.stderr.strip()}")


def evaluate(repo: Path, probes: list[tuple[str, str]]) -> list:
    """The values of ``probes`` ((id, expr) pairs) in one fresh worker process, or a dict
    {"setup_error": ...} if SETUP raised."""
    request = json.dumps({"setup": SETUP, "probes": [{"id": i, "expr": e} for i, e in probes]})
    try:
        done = subprocess.run([sys.executable, "-I", "-B", "-c", WORKER, str(repo), str(PROBE_TIMEOUT_S)],
                              input=request, capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S,
                              cwd=repo)
    except subprocess.TimeoutExpired:
        return {"setup_error": f"the worker ran for more than {PROCESS_TIMEOUT_S} s"}
    try:
        reply = json.loads(done.stdout)
    except ValueError:
        return {"setup_error": f"the worker died (exit {done.returncode}): {done.stderr.strip()[-2000:]}"}
    return reply["values"] if "values" in reply else reply


def differing(values, expected: list) -> list[str]:
    """The ids of the probes whose values differ from the expected ones (all of them if SETUP failed)."""
    if isinstance(values, dict):
        return [probe_id for probe_id, _, _ in PROBES]
    return [probe_id for (probe_id, _, _), got, want in zip(PROBES, values, expected) if not same(got, want)]


def main() -> int:
    started = time.monotonic()
    try:
        tests = spec_tests()
        check_definitions(tests)
        pairs = [(probe_id, expr) for probe_id, _, expr in PROBES]
        report = []
        with tempfile.TemporaryDirectory(prefix="make-probes-") as tmp:
            scratch = Path(tmp)
            reference = SOLUTIONS / "reference.diff"
            expected = evaluate(prepare(scratch, "reference", reference), pairs)
            if isinstance(expected, dict):
                raise Failed(f"SETUP fails on the reference solution: {expected['setup_error']}")
            bad = [(probe_id, value) for (probe_id, _), value in zip(pairs, expected)
                   if isinstance(value, dict) and set(value) & {"raises", "not_plain", "timed_out"}
                   and not (set(value) == {"raises"} and probe_id.endswith("_raises"))]
            if bad:
                raise Failed("on the reference solution these probes raise, time out or give values that are "
                             f"not plain JSON data (name a probe that should raise ..._raises): {bad}")
            # (c) determinism: a second copy, a second process (another hash seed), the same values.
            again = evaluate(prepare(scratch, "reference-again", reference), pairs)
            if json.dumps(again, sort_keys=False) != json.dumps(expected, sort_keys=False):
                raise Failed("two runs on the reference solution give different values: "
                             f"{differing(again, expected)}")
            # Self-contained: each probe alone, in its own process, gives the same value.
            alone_repo = prepare(scratch, "reference-alone", reference)
            for pair, want in zip(pairs, expected):
                alone = evaluate(alone_repo, [pair])
                if isinstance(alone, dict) or not same(alone[0], want):
                    raise Failed(f"probe {pair[0]} gives another value when evaluated alone: {alone} != {want}")
            # (a) the unpatched repository fails every probe of a fail-to-pass behaviour, and only those.
            unpatched = evaluate(prepare(scratch, "unpatched", None), pairs)
            if isinstance(unpatched, dict):
                raise Failed(f"SETUP fails on the unpatched repository, so the probes tell nothing apart: "
                             f"{unpatched['setup_error']}")
            differ = set(differing(unpatched, expected))
            for (probe_id, covers, _), got, want in zip(PROBES, unpatched, expected):
                fixes = any(name == "issue" or tests[name] == "f2p" for name in covers)
                if fixes and probe_id not in differ:
                    raise Failed(f"probe {probe_id} covers a fail-to-pass behaviour but the unpatched "
                                 "repository already gives the expected value")
                if not fixes and probe_id in differ:
                    raise Failed(f"probe {probe_id} covers only pass-to-pass tests but the unpatched repository "
                                 f"gives another value (it asks for more than the tests do): {json.dumps(got)[:1000]} "
                                 f"instead of {json.dumps(want)[:1000]}")
            report.append(("unpatched repository", [probe_id for probe_id, _ in pairs if probe_id in differ]))
            # (b) every known-wrong fix fails at least one probe.
            wrong = sorted(SOLUTIONS.glob("wrong_*.diff"))
            for diff in wrong:
                values = evaluate(prepare(scratch, diff.stem, diff), pairs)
                if isinstance(values, dict):
                    print(f"note: SETUP fails with {diff.name}: {values['setup_error']}", file=sys.stderr)
                ids = differing(values, expected)
                if not ids:
                    raise Failed(f"{diff.name} passes every probe: add a probe that tells it apart")
                report.append((diff.name, ids))
        probes = [{"id": probe_id, "expr": expr, "expected": value} for (probe_id, expr), value in zip(pairs, expected)]
        text = json.dumps({"setup": SETUP, "probes": probes}, indent=2) + "\n"
        OUTPUT.write_text(text)
    except Failed as exc:
        print(f"make_probes: FAILED for {ENV.name}: {exc}", file=sys.stderr)
        print(f"make_probes: {OUTPUT} was left as it was", file=sys.stderr)
        return 1
    print(f"{ENV.name}: wrote {len(PROBES)} probes to {OUTPUT.relative_to(ENV)} "
          f"({time.monotonic() - started:.1f} s)")
    for label, ids in report:
        print(f"  {label}: {len(ids)} of {len(PROBES)} probes differ: {', '.join(ids)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
