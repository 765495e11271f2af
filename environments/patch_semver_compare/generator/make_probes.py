#!/usr/bin/env python3
"""Writes ../tests/probes.json: the hidden probes of patch_semver_compare.

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
import semverlite
from semverlite import InvalidRange, InvalidVersion, Range, Version, compare, max_satisfying, parse, satisfies, sort_versions

# The example chain from section 11 of the specification, lowest first.
SPEC_ORDER = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
              "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]


def error_name(make):
    """The class name of the exception ``make()`` raises, or None."""
    try:
        make()
    except Exception as exc:
        return type(exc).__name__
    return None


def operators(a, b):
    """``a < b``, ``a <= b``, ``a > b``, ``a >= b``, ``a == b``, ``a != b`` for two version strings."""
    x, y = parse(a), parse(b)
    return [x < y, x <= y, x > y, x >= y, x == y, x != y]
'''

PROBES = [
    # --- precedence (SemVer 2.0.0, section 11)
    ("prerelease_lower_than_release", ["test_prerelease_lower_than_release"],
     r'''[operators("1.0.0-alpha", "1.0.0"), operators("1.0.0", "1.0.0-rc.1"), operators("2.0.0-0", "2.0.0"), operators("1.0.0+build", "1.0.0-rc.1+build")]'''),
    ("prerelease_of_next_version_is_higher", ["test_prerelease_of_next_version_is_higher"],
     r'''[operators("1.0.0", "1.0.1-alpha"), operators("1.0.1-alpha", "1.0.1"), operators("1.9.9", "2.0.0-0"), operators("0.1.0-rc.1", "0.0.9")]'''),
    ("numeric_identifier_lower_than_alphanumeric", ["test_numeric_identifier_lower_than_alphanumeric"],
     r'''[compare(a, b) for a, b in [("1.0.0-alpha.1", "1.0.0-alpha.beta"), ("1.0.0-1", "1.0.0-alpha"), ("1.0.0-rc.99", "1.0.0-rc.a"), ("1.0.0-alpha.beta", "1.0.0-alpha.1"), ("1.0.0-999999", "1.0.0-0a"), ("1.0.0-x.1.y", "1.0.0-x.z")]]'''),
    ("spec_example_chain_pairwise", ["test_spec_example_chain", "test_compare_prerelease"],
     r'''[[compare(a, b) for b in SPEC_ORDER] for a in SPEC_ORDER]'''),
    ("spec_example_chain_operators", ["test_spec_example_chain"],
     r'''[operators(a, b) for a, b in zip(SPEC_ORDER, SPEC_ORDER[1:])]'''),
    ("sorting_shuffled_versions", ["test_sorting_shuffled_versions"],
     r'''[sort_versions(["1.0.0-rc.1", "1.0.1", "1.0.0-alpha.beta", "0.9.0", "1.0.0", "1.0.0-beta.11", "1.0.0-alpha", "1.0.1-0", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-alpha.1"]), sort_versions(["1.0.0-alpha.1", "1.0.0-beta", "1.0.0", "1.0.0-alpha.beta"], reverse=True)]'''),
    ("sorted_version_objects", ["test_sorting_shuffled_versions", "test_max_and_min_with_prereleases"],
     r'''[[str(v) for v in sorted(parse(t) for t in ["1.0.1", "1.0.0-rc.1+b.2", "1.0.1-0", "1.0.0", "0.9.0", "1.0.0-rc.1.0"])], str(max(parse(t) for t in ["1.0.0-rc.1", "1.0.0", "1.0.0-beta.11", "1.0.0-beta.2"])), str(min(parse(t) for t in ["1.0.0-rc.1", "1.0.0", "1.0.0-beta.11", "1.0.0-beta.2"]))]'''),
    ("compare_prerelease", ["test_compare_prerelease"],
     r'''[compare("1.0.0-rc.1", "1.0.0"), compare("1.0.0", "1.0.0-rc.1"), compare(parse("1.0.0-alpha.1"), "1.0.0-alpha.beta"), compare("1.0.0-alpha.beta", Version(1, 0, 0, ("alpha", 1))), compare("1.0.0-rc.1+a", "1.0.0-rc.1+b")]'''),
    # --- ranges, whose upper bounds are pre-releases of the next version
    ("caret_excludes_next_major", ["test_caret_excludes_next_major"],
     r'''[satisfies(v, r) for v, r in [("2.0.0", "^1.2.3"), ("0.3.0", "^0.2.3"), ("0.0.4", "^0.0.3"), ("1.99.0", "^1.2.3"), ("2.0.0", "^1.2"), ("1.0.0", "^0.9.0")]]'''),
    ("tilde_and_x_ranges_exclude_upper_bound", ["test_tilde_and_x_ranges_exclude_upper_bound"],
     r'''[satisfies(v, r) for v, r in [("1.3.0", "~1.2.3"), ("2.0.0", "1.x"), ("1.3.0", "1.2.x"), ("1.2.99", "1.2.x"), ("1.5.0", "~1.4"), ("1.4.7", "~1.4"), ("3.0.0", "2")]] + [Version(1, 5, 0) in Range("~1.4")]'''),
    ("upper_bound_excludes_its_prereleases", ["test_upper_bound_excludes_its_prereleases"],
     r'''[satisfies(v, r, include_prerelease=True) for v, r in [("2.0.0-rc.1", "^1.2.3"), ("1.3.0-alpha", "~1.2.3"), ("1.9.9-rc.1", "^1.2.3"), ("2.0.0-0", "1.x"), ("0.3.0-beta", "^0.2.3"), ("1.2.3-rc.1", "^1.2.3")]]'''),
    ("prerelease_below_release_bound", ["test_prerelease_below_release_bound"],
     r'''[satisfies("1.3.0-alpha", ">=1.2.0 <1.3.0", include_prerelease=True), satisfies("1.2.0-rc.1", ">=1.2.0", include_prerelease=True), satisfies("1.2.0-rc.1", ">1.1.9 <1.2.0", include_prerelease=True), satisfies("1.2.0", "<=1.2.0-rc.1", include_prerelease=True)]'''),
    ("max_satisfying_with_boundary_versions", ["test_max_satisfying_with_boundary_versions"],
     r'''[max_satisfying(["1.2.0", "1.9.3", "1.10.0", "2.0.0"], "~1.9"), max_satisfying(["1.4.0", "2.0.0", "2.0.0-rc.1"], "^1.0.0", include_prerelease=True), max_satisfying(["0.2.9", "0.3.0", "0.3.0-rc.1"], "^0.2.0", include_prerelease=True), max_satisfying(["1.2.3", "1.3.0"], "1.2.x")]'''),
    ("max_satisfying_prefers_release_over_its_prerelease", ["test_max_satisfying_prefers_release_over_its_prerelease"],
     r'''[max_satisfying(["1.0.0-rc.1", "1.0.0", "0.9.0"], ">=0.9.0", include_prerelease=True), max_satisfying(["1.0.0", "1.0.0-rc.1"], ">=1.0.0-beta.1", include_prerelease=True), max_satisfying(["1.0.0-beta.11", "1.0.0-beta.2", "1.0.0-beta"], ">=1.0.0-beta"), max_satisfying(["1.0.0-alpha.1", "1.0.0-alpha.beta"], ">=1.0.0-alpha")]'''),
    # --- pass-to-pass: what works today keeps working
    ("numeric_identifiers_compare_numerically", ["test_numeric_identifiers_still_compare_numerically",
                                                 "test_numeric_identifiers_compare_numerically"],
     r'''[compare(a, b) for a, b in [("1.0.0-beta.2", "1.0.0-beta.11"), ("1.0.0-9", "1.0.0-10"), ("1.0.0-alpha.2", "1.0.0-alpha.10"), ("1.0.0-rc.11", "1.0.0-rc.9")]]'''),
    ("alphanumeric_identifiers_compare_lexically", ["test_alphanumeric_identifiers_compare_lexically",
                                                    "test_shorter_prerelease_is_lower"],
     r'''[compare(a, b) for a, b in [("1.0.0-alpha", "1.0.0-beta"), ("1.0.0-beta", "1.0.0-rc"), ("1.0.0-Beta", "1.0.0-alpha"), ("1.0.0-alpha", "1.0.0-alpha.1"), ("1.0.0-alpha.beta", "1.0.0-alpha.beta.1"), ("1.0.0-a-b", "1.0.0-a")]]'''),
    ("equality_and_hash_ignore_build", ["test_prerelease_equality_and_hash", "test_build_metadata_ignored_in_precedence",
                                        "test_not_equal_to_strings"],
     r'''[parse("1.0.0-alpha.1") == parse("1.0.0-alpha.1+build.5"), hash(parse("1.0.0-alpha.1")) == hash(parse("1.0.0-alpha.1+build.5")), parse("1.0.0-alpha.1") != parse("1.0.0-alpha.01a"), len({parse("1.0.0"), parse("1.0.0+x"), parse("1.0.0-0")}), parse("1.0.0+a") == parse("1.0.0+b"), hash(parse("1.0.0+a")) == hash(parse("1.0.0")), parse("1.0.0") != "1.0.0"]'''),
    ("release_ordering", ["test_release_ordering", "test_compare_releases", "test_sort_versions_releases"],
     r'''[sort_versions(["1.10.0", "1.2.0", "0.9.1", "1.9.0", "2.0.0", "1.10.1", "1.99.99"]), sort_versions(["1.0.0", "2.0.0"], reverse=True), compare("1.2.3", "1.2.4"), compare("1.2.3", Version(1, 2, 3)), compare("2.0.0", "1.9.9")]'''),
    ("parse_and_format", ["test_parse_components", "test_parse_plain_release", "test_str_roundtrip", "test_repr",
                          "test_alphanumeric_identifier_may_start_with_zero"],
     r'''[(lambda v: [v.major, v.minor, v.patch, list(v.prerelease), list(v.build), v.is_prerelease, repr(v)])(Version.parse("1.22.333-rc.1.x-y+build.007")), [str(parse(t)) for t in ["0.0.0", " 0.9.12 ", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0-x.7.z.92", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85", "1.0.0-0a"]], list(parse("1.0.0-0a").prerelease)]'''),
    ("invalid_versions_raise", ["test_parse_rejects_invalid", "test_rejects_negative_component"],
     r'''[error_name(lambda: Version.parse(t)) for t in ["1.0", "1.0.0.0", "01.0.0", "1.00.0", "1.0.0-", "1.0.0-01", "1.0.0-a..b", "1.0.0+", "1.0.0+a_b", "v1.0.0", ""]] + [error_name(lambda: Version(1, -1, 0))]'''),
    ("bump_and_finalize", ["test_bump", "test_bump_finishes_prerelease", "test_finalize_drops_prerelease_and_build"],
     r'''[str(f(parse(t))) for t in ["1.2.3", "2.0.0-rc.1", "1.3.0-beta", "1.2.4-alpha.3+b9"] for f in (Version.bump_major, Version.bump_minor, Version.bump_patch, Version.finalize)]'''),
    ("releases_in_ranges", ["test_comparator_set", "test_caret", "test_caret_zero_major", "test_tilde", "test_x_ranges",
                            "test_exact", "test_or", "test_not_equal", "test_operator_with_space", "test_contains_operator"],
     r'''[satisfies(v, r) for v, r in [("1.5.0", ">=1.2.0 <2.0.0"), ("2.0.1", ">=1.2.0 <2.0.0"), ("1.9.0", "^1.2.3"), ("1.2.2", "^1.2.3"), ("0.2.9", "^0.2.3"), ("0.3.1", "^0.2.3"), ("0.0.5", "^0.0.3"), ("1.2.9", "~1.2.3"), ("1.4.0", "~1.2.3"), ("2.1.0", "1.x"), ("42.0.0", "*"), ("1.2.3", "=1.2.3"), ("3.2.0", "^1.0 || >=3.1.0"), ("2.5.0", "^1.0 || >=3.1.0"), ("1.2.3", ">=1.2.0 !=1.2.3"), ("1.2.3", ">= 1.2.3")]] + ["1.4.0" in Range("~1.4"), str(Range("^1.2.3 || 1.x"))]'''),
    ("prereleases_in_ranges", ["test_prerelease_excluded_by_default", "test_prerelease_allowed_by_matching_comparator",
                               "test_include_prerelease"],
     r'''[satisfies("1.5.0-beta.1", ">=1.2.0"), satisfies("1.2.4-alpha", ">=1.2.3-beta.1 <1.3.0"), satisfies("1.2.3-beta.2", ">=1.2.3-beta.1 <1.3.0"), satisfies("1.2.3-alpha.9", ">=1.2.3-beta.1 <1.3.0"), satisfies("1.5.0-beta.1", ">=1.2.0", include_prerelease=True)]'''),
    ("invalid_ranges_and_max_satisfying", ["test_invalid_ranges", "test_max_satisfying_releases", "test_max_satisfying_none",
                                           "test_max_satisfying_skips_invalid_strings"],
     r'''[error_name(lambda: Range(t)) for t in [">=", "^", "1.2.3.4", ">=1.2", "~>1.0", "abc"]] + [max_satisfying(["1.2.0", "1.9.3", "1.10.0", "3.0.0"], "^1.0.0"), max_satisfying(["0.1.0", "0.2.0"], ">=1.0.0"), max_satisfying(["1.0", "latest", "1.0.1"], "*")]'''),
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
