#!/usr/bin/env python3
"""Writes ../tests/probes.json: the hidden probes of patch_config_merge.

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

SETUP imports only what the unpatched repository has: ``layercfg.deep_merge`` is looked up inside each
probe, so that each probe fails on its own. No probe reads a file: layers come from ``defaults`` and
``environ``. Dicts compare without regard to key order, as the runner compares them.
"""

from __future__ import annotations

SETUP = r'''
import copy
import types

import layercfg
from layercfg import Config, ConfigError, MissingKeyError, env_layer, load

BASE = {
    "service": "billing",
    "db": {"host": "db.internal", "port": 5432, "options": {"sslmode": "require", "tags": ["primary"]}},
    "features": ["invoices", "refunds"],
    "workers": 4,
}
OVERRIDE = {
    "db": {"port": 6432, "options": {"connect_timeout": 5, "tags": ["eu"]}},
    "features": ["refunds", "exports"],
    "debug": True,
}


def error_name(make):
    """The class name of the exception ``make()`` raises, or None."""
    try:
        make()
    except Exception as exc:
        return type(exc).__name__
    return None


def merge_all(base, override):
    """deep_merge with each list strategy, on copies of the arguments."""
    return [layercfg.deep_merge(copy.deepcopy(base), copy.deepcopy(override), lists=lists)
            for lists in ("replace", "append", "unique")]


def inputs_after_merging():
    """BASE and OVERRIDE (copies) after merging them with every strategy: they must not change."""
    base, override = copy.deepcopy(BASE), copy.deepcopy(OVERRIDE)
    for lists in ("replace", "append", "unique"):
        layercfg.deep_merge(base, override, lists=lists)
    return [base, override]


def inputs_after_changing_results():
    """Merge, then change every mutable value of each result at every depth; return the arguments,
    which must not have changed."""
    base, override = copy.deepcopy(BASE), copy.deepcopy(OVERRIDE)
    base["only_base"] = {"nested": [1, {"deep": []}], "map": {"k": "v"}}
    override["only_override"] = {"nested": [2, {"deep": []}]}
    base["shared"] = [{"x": 1}]
    override["shared"] = [{"x": 2}]

    def scribble(value):
        if isinstance(value, dict):
            for key in list(value):
                scribble(value[key])
                value[key] = "changed" if not isinstance(value[key], (dict, list)) else value[key]
            value["added"] = "changed"
        elif isinstance(value, list):
            for item in value:
                scribble(item)
            value.append("changed")

    for lists in ("replace", "append", "unique"):
        scribble(layercfg.deep_merge(base, override, lists=lists))
    return [base, override]


def types_of(value):
    """The type names of ``value`` and of every dict and list inside it."""
    if isinstance(value, dict) or type(value).__name__ in ("Config", "mappingproxy"):
        return [type(value).__name__, {key: types_of(item) for key, item in value.items()}]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [types_of(item) for item in value]]
    return type(value).__name__


def config_copies():
    """A Config copies its data on the way in and out: changing the source or an as_dict() result
    changes nothing."""
    source = {"db": {"host": "h", "tags": ["t"]}}
    config = Config(source)
    source["db"]["host"] = "changed"
    source["db"]["tags"].append("changed")
    out = config.as_dict()
    out["db"]["tags"].append("changed")
    config.get("db.tags").append("changed")
    return config.as_dict()


def config_after_changing_its_source():
    """A Config built by from_layers keeps its values when the layers change afterwards."""
    layer = {"db": {"host": "a", "tags": ["x"]}}
    config = Config.from_layers(layer)
    layer["db"]["host"] = "changed"
    layer["db"]["tags"].append("changed")
    return config.as_dict()
'''

PROBES = [
    # --- deep_merge
    ("nested_mappings_are_merged", ["test_nested_mappings_are_merged", "test_lists_replaced_by_default"],
     r'''layercfg.deep_merge(BASE, OVERRIDE)'''),
    ("override_wins_for_values", ["test_override_wins_for_values", "test_key_only_in_one_side_is_kept"],
     r'''[layercfg.deep_merge({"a": 1, "b": "x", "c": {"d": 1}}, {"a": 2, "b": None, "e": [1]}), layercfg.deep_merge({"a": {"b": 1}}, {}), layercfg.deep_merge({}, {"a": {"b": 1}}), layercfg.deep_merge({}, {})]'''),
    ("type_conflicts_take_the_override", ["test_type_conflicts_take_the_override"],
     r'''[layercfg.deep_merge({"db": {"host": "x"}}, {"db": "sqlite:///app.db"}), layercfg.deep_merge({"db": "sqlite:///app.db"}, {"db": {"host": "x"}}), layercfg.deep_merge({"x": [1]}, {"x": {"a": 1}}, lists="append"), layercfg.deep_merge({"x": (1, 2)}, {"x": [3]}, lists="append"), layercfg.deep_merge({"x": [1]}, {"x": (2,)}, lists="unique"), layercfg.deep_merge({"x": {"a": [1]}}, {"x": None}, lists="append")]'''),
    ("lists_by_strategy", ["test_lists_replaced_by_default", "test_lists_append",
                           "test_lists_unique_keeps_first_occurrences_in_order"],
     r'''merge_all(BASE, OVERRIDE)'''),
    ("lists_unique_keeps_first_occurrences", ["test_lists_unique_keeps_first_occurrences_in_order"],
     r'''[layercfg.deep_merge({"x": [3, 1, 3]}, {"x": [2, 1, 4, 2]}, lists="unique"), layercfg.deep_merge({"x": [1, True, 1.0, "1"]}, {"x": [0, False, "0"]}, lists="unique"), layercfg.deep_merge({"a": {"b": ["p", "q"]}}, {"a": {"b": ["q", "r", "p"]}}, lists="unique")]'''),
    ("lists_unique_with_unhashable_items", ["test_lists_unique_with_unhashable_items"],
     r'''[layercfg.deep_merge({"servers": [{"host": "a"}, {"host": "b"}]}, {"servers": [{"host": "b"}, {"host": "c"}, ["x"]]}, lists="unique"), layercfg.deep_merge({"x": [[1], [2], [1]]}, {"x": [[2], {"k": [1]}, {"k": [1]}]}, lists="unique")]'''),
    ("nested_lists_follow_the_strategy", ["test_lists_append", "test_nested_mappings_are_merged"],
     r'''[layercfg.deep_merge({"a": {"b": {"c": [1, 2]}}}, {"a": {"b": {"c": [2, 3], "d": 1}}}, lists=lists) for lists in ("replace", "append", "unique")]'''),
    ("inputs_are_not_modified", ["test_inputs_are_not_modified"],
     r'''inputs_after_merging()'''),
    ("result_shares_nothing_with_the_inputs", ["test_result_shares_nothing_with_the_inputs"],
     r'''inputs_after_changing_results()'''),
    ("unknown_list_strategy_raises", ["test_unknown_list_strategy_raises"],
     r'''[error_name(lambda: layercfg.deep_merge(*args, lists=lists)) for args, lists in [(({}, {}), "prepend"), (({"x": [1]}, {"x": [2]}), "merge"), (({"a": 1}, {"b": 2}), "prepend")]] + [layercfg.deep_merge({}, {})]'''),
    ("any_mapping_is_accepted_and_the_result_is_plain", ["test_any_mapping_is_accepted_and_the_result_is_plain"],
     r'''(lambda merged: [merged, types_of(merged)])(layercfg.deep_merge(Config({"db": {"host": "a", "port": 1}, "tags": ["t"]}), types.MappingProxyType({"db": types.MappingProxyType({"port": 2, "extra": types.MappingProxyType({"k": "v"})}), "tags": ["u"]}), lists="append"))'''),
    # --- Config.from_layers, Config.merge and load
    ("from_layers_merges_nested_sections", ["test_from_layers_merges_nested_sections"],
     r'''[Config.from_layers({"db": {"host": "a", "port": 1}}, {"db": {"port": 2}}, {"db": {"user": "u"}}).as_dict(), Config.from_layers({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"d": 3}}}, {"a": {"e": 4}}).as_dict(), type(Config.from_layers({"x": {"y": 1}})).__name__]'''),
    ("from_layers_list_option", ["test_from_layers_list_option"],
     r'''[Config.from_layers({"plugins": ["auth"]}, {"plugins": ["audit", "auth"]}, {"plugins": ["cache"]}, lists=lists).get("plugins") for lists in ("replace", "append", "unique")]'''),
    ("config_merge_method", ["test_config_merge_method"],
     r'''(lambda config: (lambda merged: [type(merged).__name__, merged.as_dict(), config.as_dict(), config.merge(Config({"db": {"host": "b"}})).get("db.host"), config.merge({"tags": ["x", "z"]}, lists="unique").get("tags"), config.merge({"db": {"host": "c"}}).as_dict()])(config.merge({"db": {"port": 2}, "tags": ["y"]}, lists="append")))(Config({"db": {"host": "a", "port": 1}, "tags": ["x"]}))'''),
    ("environment_overrides_one_key_of_a_section", ["test_environment_overrides_one_key_of_a_section"],
     r'''load(defaults={"service": "billing", "debug": False, "db": {"host": "db.internal", "port": 5432, "options": {"sslmode": "require"}}}, environ={"APP__DB__PORT": "6432", "APP__DB__OPTIONS__TIMEOUT": "5", "OTHER__DB__PORT": "1"}).as_dict()'''),
    ("list_option_reaches_load", ["test_files_merge_and_list_option_reaches_load"],
     r'''[load(defaults={"features": ["invoices", "refunds"], "db": {"options": {"sslmode": "require"}}}, environ={"APP__FEATURES": '["refunds", "exports"]', "APP__DB__OPTIONS__CONNECT_TIMEOUT": "5"}, lists=lists).as_dict() for lists in ("replace", "append", "unique")] + [load(defaults={"a": {"b": [1]}}, prefix=None, lists="append").as_dict()]'''),
    # --- pass-to-pass: what works today keeps working
    ("from_layers_basics", ["test_from_layers_empty", "test_from_layers_later_layer_wins", "test_from_layers_later_none_wins",
                            "test_from_layers_keeps_keys_of_every_layer", "test_from_layers_does_not_modify_layers"],
     r'''[Config.from_layers().as_dict(), len(Config.from_layers()), Config.from_layers({"a": 1, "b": 2}, {"b": 3, "c": 4}, {"c": None}).as_dict(), Config.from_layers({"a": 1}).as_dict(), config_after_changing_its_source()]'''),
    ("config_reading", ["test_get_dotted_path", "test_require", "test_section", "test_mapping_interface",
                        "test_equality_with_dicts", "test_config_is_a_copy", "test_as_dict_is_a_deep_copy"],
     r'''(lambda c: [c.get("db.port"), c.get("db.nope", "dflt"), c.get("db").as_dict(), c["db"]["host"], c.get("tags"), sorted(c), len(c), c == {"db": {"host": "h", "port": 1}, "tags": ["t"]}, c.require("db.host"), error_name(lambda: c.require("db.user")), c.section("db").as_dict(), c.section("nope").as_dict(), error_name(lambda: c.section("tags")), issubclass(MissingKeyError, KeyError), config_copies()])(Config({"db": {"host": "h", "port": 1}, "tags": ["t"]}))'''),
    ("environment_layer", ["test_env_layer_nesting_and_values", "test_env_layer_prefix_and_case", "test_env_layer_conflicts",
                           "test_load_without_environment"],
     r'''[env_layer({"APP__DB__PORT": "6432", "APP__NAME": "svc", "app__Debug": "true", "APP__LIST": "[1, 2]", "APP__TEXT": "not json", "OTHER__X": "1"}), env_layer({"MY__A": "null"}, prefix="my"), error_name(lambda: env_layer({"APP__DB": "1", "APP__DB__PORT": "2"})), error_name(lambda: env_layer({"APP__A____B": "1"})), load(defaults={"a": 1}, environ={"APP__A": "2"}, prefix=None).as_dict()]'''),
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
