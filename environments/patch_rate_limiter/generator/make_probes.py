#!/usr/bin/env python3
"""Writes ../tests/probes.json: the hidden probes of patch_rate_limiter.

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

Every probe builds its own ManualClock (inside ``bucket_run`` and ``limiter_run``), so no probe sees
another's time. Rates are powers of two and every time step a multiple of 1/16 s, so that all the
arithmetic is exact in binary floating point; and no scenario spends from a bucket that has sat full
for part of an interval, where the task leaves the behaviour open.
"""

from __future__ import annotations

SETUP = r'''
from throttle import Decision, KeyedRateLimiter, ManualClock, MonotonicClock, TokenBucket


def error_name(make):
    """The class name of the exception ``make()`` raises, or None."""
    try:
        make()
    except Exception as exc:
        return type(exc).__name__
    return None


def bucket_run(capacity, rate, tokens, steps):
    """Run ``steps`` against a new bucket on its own ManualClock (starting at 0) and list what each
    step returns. Steps: ("advance", seconds), ("acquire", n), ("tokens",), ("wait", n) for
    time_until_available(n), ("sleep", n) to advance the clock by time_until_available(n) (returns the
    time slept), ("drain",) to acquire one token at a time until refused (returns how many)."""
    clock = ManualClock()
    bucket = TokenBucket(capacity, rate, clock=clock, tokens=tokens)
    results = []
    for step in steps:
        kind = step[0]
        if kind == "advance":
            clock.advance(step[1])
            continue
        if kind == "acquire":
            results.append(bucket.try_acquire(*step[1:]))
        elif kind == "tokens":
            results.append(bucket.tokens)
        elif kind == "wait":
            results.append(bucket.time_until_available(*step[1:]))
        elif kind == "sleep":
            wait = bucket.time_until_available(*step[1:])
            clock.advance(wait)
            results.append(wait)
        elif kind == "drain":
            taken = 0
            while bucket.try_acquire():
                taken += 1
            results.append(taken)
        else:
            raise ValueError(step)
    return results


def limiter_run(capacity, rate, steps, max_keys=100):
    """Like bucket_run for a KeyedRateLimiter. Steps: ("advance", seconds), ("hit", key[, cost]) (returns
    [allowed, remaining, retry_after]), ("peek", key), ("has", key), ("len",), ("reset", key)."""
    clock = ManualClock()
    limiter = KeyedRateLimiter(capacity, rate, clock=clock, max_keys=max_keys)
    results = []
    for step in steps:
        kind, args = step[0], step[1:]
        if kind == "advance":
            clock.advance(*args)
        elif kind == "hit":
            decision = limiter.hit(*args)
            results.append([decision.allowed, decision.remaining, decision.retry_after])
        elif kind == "peek":
            results.append(limiter.peek(*args))
        elif kind == "has":
            results.append(args[0] in limiter)
        elif kind == "len":
            results.append(len(limiter))
        elif kind == "reset":
            limiter.reset(*args)
        else:
            raise ValueError(step)
    return results
'''

PROBES = [
    # --- a burst takes exactly the capacity; a request is granted whenever n tokens are there
    ("burst_uses_the_whole_capacity", ["test_burst_uses_the_whole_capacity"],
     r'''bucket_run(5, 1.0, None, [("acquire",)] * 6 + [("tokens",), ("wait", 1)])'''),
    ("capacity_one_bucket", ["test_capacity_one_bucket_allows_one_request"],
     r'''bucket_run(1, 1.0, None, [("acquire",), ("acquire",), ("wait", 1), ("advance", 1.0), ("acquire",), ("acquire",)])'''),
    ("acquire_every_token_at_once", ["test_acquire_every_token_at_once"],
     r'''[bucket_run(3, 1.0, None, [("acquire", 3), ("tokens",)]), bucket_run(4, 2.0, 2, [("acquire", 2), ("tokens",), ("advance", 1.0), ("acquire", 2), ("acquire", 1)])]'''),
    ("wait_agrees_with_acquire", ["test_time_until_available_agrees_with_try_acquire"],
     r'''bucket_run(4, 1.0, 2, [("wait", 2), ("acquire", 2), ("wait", 1), ("acquire",), ("advance", 1.0), ("wait", 1), ("acquire",), ("wait", 1)])'''),
    # --- the refill rate does not depend on how often the bucket is looked at
    ("frequent_polling_keeps_the_rate", ["test_frequent_polling_keeps_the_configured_rate"],
     r'''bucket_run(100, 8.0, 0, [("advance", 0.1875), ("drain",)] * 16)'''),
    ("refill_independent_of_reads", ["test_refill_does_not_depend_on_how_often_the_bucket_is_read"],
     r'''[bucket_run(100, 4.0, 0, [("advance", 0.1875), ("tokens",)] * 12), bucket_run(100, 4.0, 0, [("advance", 2.25), ("tokens",)]), bucket_run(100, 4.0, 0, [("advance", 0.0625), ("wait", 1), ("acquire",)] * 12 + [("tokens",)])]'''),
    ("long_run_average_rate", ["test_long_run_average_rate"],
     r'''(lambda counts: [sum(counts), counts[:8]])(bucket_run(10, 4.0, 0, [("advance", 0.125), ("drain",)] * 100))'''),
    ("no_token_before_its_interval", ["test_frequent_polling_keeps_the_configured_rate", "issue"],
     r'''bucket_run(100, 2.0, 0, [("advance", 0.375), ("acquire",), ("advance", 0.0625), ("acquire",), ("advance", 0.0625), ("acquire",), ("advance", 0.4375), ("acquire",), ("advance", 0.0625), ("acquire",), ("tokens",)])'''),
    # --- time_until_available counts the part of the next token already earned
    ("wait_counts_partial_progress", ["test_time_until_available_counts_partial_progress"],
     r'''bucket_run(1, 2.0, 0, [("advance", 0.25), ("wait", 1), ("advance", 0.125), ("wait", 1), ("advance", 0.125), ("wait", 1), ("acquire",)])'''),
    ("wait_for_several_tokens", ["test_time_until_available_counts_partial_progress",
                                 "test_time_until_available_agrees_with_try_acquire"],
     r'''bucket_run(8, 2.0, 0, [("advance", 0.75), ("wait", 1), ("wait", 2), ("wait", 3), ("tokens",), ("advance", 0.5), ("wait", 3), ("acquire", 2), ("wait", 2)])'''),
    ("waiting_the_advertised_time_succeeds", ["test_waiting_exactly_the_advertised_time_succeeds"],
     r'''bucket_run(2, 4.0, None, [("drain",)] + [("advance", 0.125), ("acquire",), ("sleep", 1), ("acquire",)] * 10 + [("advance", 0.0625), ("sleep", 2), ("acquire", 2)])'''),
    # --- the keyed limiter's decisions
    ("keyed_limiter_allows_capacity_requests", ["test_keyed_limiter_allows_capacity_requests"],
     r'''limiter_run(3, 4.0, [("hit", "client")] * 4 + [("hit", "other")])'''),
    ("denied_request_retry_after", ["test_denied_request_gets_a_positive_retry_after"],
     r'''limiter_run(2, 4.0, [("hit", "k"), ("hit", "k"), ("hit", "k"), ("advance", 0.125), ("hit", "k"), ("advance", 0.125), ("hit", "k"), ("hit", "k")])'''),
    ("refused_cost_is_not_spent", ["test_refused_cost_is_not_spent"],
     r'''limiter_run(5, 1.0, [("hit", "k", 5), ("hit", "k", 2), ("advance", 0.5), ("hit", "k", 2), ("advance", 1.5), ("hit", "k", 2), ("peek", "k")])'''),
    # --- pass-to-pass: what works today keeps working
    ("starting_tokens_and_whole_interval_refill", ["test_starts_full", "test_starts_with_given_tokens",
                                                   "test_refill_after_whole_intervals", "test_tokens_are_whole_numbers",
                                                   "test_no_token_before_a_whole_interval"],
     r'''[bucket_run(4, 1.0, None, [("tokens",)]), bucket_run(4, 1.0, 1, [("tokens",)]), bucket_run(5, 2.0, 0, [("advance", 0.5), ("tokens",), ("advance", 1.0), ("tokens",)]), bucket_run(5, 1.0, 0, [("advance", 0.75), ("tokens",), ("acquire",)]), [type(t).__name__ for t in bucket_run(5, 1.0, 0, [("advance", 1.5), ("tokens",)])]]'''),
    ("refill_capped_and_refusals_spend_nothing", ["test_refill_capped_at_capacity", "test_refused_request_spends_nothing",
                                                  "test_empty_bucket_refuses", "test_acquire_spends_tokens"],
     r'''[bucket_run(3, 16.0, 0, [("advance", 60), ("tokens",)]), bucket_run(5, 1.0, 1, [("acquire", 3), ("tokens",)]), bucket_run(2, 1.0, 0, [("acquire",)]), bucket_run(10, 1.0, None, [("acquire", 4), ("tokens",)])]'''),
    ("time_until_available_simple_cases", ["test_time_until_available_when_empty", "test_time_until_available_with_plenty",
                                           "test_bucket_recovers_after_waiting"],
     r'''[bucket_run(4, 2.0, 0, [("wait", 1), ("wait", 3)]), bucket_run(5, 1.0, None, [("wait", 2)]), bucket_run(4, 0.5, 0, [("wait", 1), ("wait", 4)])]'''),
    ("bad_arguments_raise", ["test_rejects_bad_capacity", "test_rejects_bad_rate", "test_rejects_bad_initial_tokens",
                             "test_rejects_bad_n", "test_request_above_capacity_can_never_succeed",
                             "test_cost_above_capacity_raises", "test_rejects_bad_parameters"],
     r'''[error_name(lambda: TokenBucket(c, 1.0)) for c in [0, -1, 1.5, True]] + [error_name(lambda: TokenBucket(3, r)) for r in [0, -2.0, "5"]] + [error_name(lambda: TokenBucket(3, 1.0, tokens=t)) for t in [4, -1]] + [error_name(lambda: TokenBucket(5, 1.0, clock=ManualClock()).try_acquire(n)) for n in [0, -1, 2.0, 6]] + [error_name(lambda: TokenBucket(3, 1.0, clock=ManualClock()).time_until_available(4)), error_name(lambda: KeyedRateLimiter(3, 1.0, clock=ManualClock()).hit("a", cost=4)), error_name(lambda: KeyedRateLimiter(0, 1.0)), error_name(lambda: KeyedRateLimiter(3, 0)), error_name(lambda: KeyedRateLimiter(3, 1.0, max_keys=0))]'''),
    ("repr_and_clocks", ["test_repr", "test_manual_clock_starts_where_told", "test_manual_clock_advance_and_set",
                         "test_manual_clock_never_goes_backwards", "test_default_clock", "test_monotonic_clock"],
     r'''[repr(TokenBucket(3, 0.5, clock=ManualClock())), ManualClock().now(), ManualClock(start=12.5).now(), (lambda c: [c.advance(1.5), c.advance(0.25), c.now(), c.set(10), c.now()])(ManualClock()), error_name(lambda: ManualClock(5).advance(-1)), error_name(lambda: ManualClock(5).set(4)), TokenBucket(2, 1000.0).try_acquire(), (lambda c: c.now() <= c.now())(MonotonicClock())]'''),
    ("keyed_limiter_bookkeeping", ["test_first_hit_allowed", "test_keys_are_independent", "test_peek_does_not_spend",
                                   "test_reset_forgets_key", "test_full_buckets_evicted_first",
                                   "test_least_recently_used_evicted_when_none_full"],
     r'''[limiter_run(3, 1.0, [("hit", "a"), ("peek", "a"), ("peek", "a"), ("hit", "b"), ("peek", "new"), ("has", "new"), ("len",), ("reset", "a"), ("has", "a"), ("len",), ("hit", "a"), ("has", "a"), ("len",)]), limiter_run(2, 1.0, [("hit", "a"), ("hit", "b"), ("advance", 5), ("hit", "a"), ("hit", "c"), ("has", "a"), ("has", "b"), ("has", "c"), ("len",)], max_keys=2), limiter_run(2, 0.001, [("hit", "a"), ("hit", "b"), ("hit", "a"), ("hit", "c"), ("has", "a"), ("has", "b"), ("has", "c"), ("len",)], max_keys=2)[4:]]'''),
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
