"""Dataset rows whose tests travel in ``ground_truth``: the row formats verl users already have.

A row names its format by ``data_source``. verl's own names keep working unchanged, and deepgym has generic
names of its own:

================================================  ===========================================================
data_source                                       ground_truth (a JSON string, or the object itself)
================================================  ===========================================================
``codecontests``, ``apps``, ``codeforces``,       ``{"inputs": [...], "outputs": [...]}``: stdin and expected
``taco``, deepgym's ``stdin_stdout``              stdout strings (a list of lines is joined with ``\\n``)
the same names (verl's) with ``"fn_name"``,       ``{"fn_name", "inputs", "outputs"}``: call-based. An input is
deepgym's ``call_based``                          a string of JSON lines, one per argument (verl's layout), or
                                                  a list of arguments (APPS'); an output is a JSON string
                                                  (verl's) or the value (APPS': a one-element list)
``openai_humaneval``, ``humaneval``,              ``{"test": "def check(candidate): ...", "entry_point",
deepgym's ``assert_humaneval``                    "prompt"?}``; ``prompt`` (the code prompt) gives the tests
                                                  the helpers it defines
``mbpp``, deepgym's ``assert_mbpp``               ``{"test_list": ["assert f(1) == 2", ...],
                                                  "test_setup_code"? (text or lines), "test_imports"?}``
================================================  ===========================================================

:func:`row_task` checks a row and returns the :class:`RowTask` the client judges. A malformed row raises
:class:`~deepgym.errors.ConfigurationError` naming the row's field (``ground_truth.outputs[3]``), never a 0 and
never "no verdict"; :data:`malformed_rows` counts them and logs each (the first ten, then every hundredth).

Options come from verl's ``reward_kwargs``: ``scoring`` (``all_or_nothing``, the default; ``partial``, the
fraction of cases passed; ``continuous``, verl's own: the fraction of the first 10 cases passed, the rest
never run; for call-based rows 1.0 or 0.0, since verl's prime_code runs their per-case pass without
``fn_name``) and the limits ``case_cpu_s``, ``total_cpu_s``, ``memory_mb``, ``output_kb``, ``pids``, ``nofile``,
``tmpfs_mb`` (defaults: :data:`ROW_LIMITS`; ``output_kb`` at least twice the longest expected output, a stdin
text or a call-based value as JSON, plus 64 KiB, ``tmpfs_mb`` at least the longest input plus 64 MiB).
"""

from __future__ import annotations

import ast
import builtins
import json
import logging
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError
from .runner import literal
from .runner.protocol import Limits

if TYPE_CHECKING:
    from .environments import Environment

log = logging.getLogger("deepgym.rows")

RUNTIME = "row_python"
# Each generic format, and the data_source names that choose it ("apps": stdin_stdout, or call_based when the
# row has fn_name).
ALIASES: dict[str, str] = {
    "stdin_stdout": "stdin_stdout", "call_based": "call_based", "assert_humaneval": "humaneval",
    "assert_mbpp": "mbpp",
    "codecontests": "apps", "apps": "apps", "codeforces": "apps", "taco": "apps",
    "openai_humaneval": "humaneval", "humaneval": "humaneval", "openai/openai_humaneval": "humaneval",
    "mbpp": "mbpp", "google-research-datasets/mbpp": "mbpp",
}
SCORINGS = ("all_or_nothing", "partial", "continuous")
# verl's continuous score counts only this many first cases (prime_code and sandbox_fusion alike).
CONTINUOUS_CASES = 10
# Rows have more and slower cases than a built-in environment: CodeContests problems allow seconds per case.
ROW_LIMITS = Limits(case_cpu_s=4.0, total_cpu_s=60.0, memory_mb=1024, pids=64, nofile=256, output_kb=1024,
                    tmpfs_mb=64, cpus=1.0)
LIMIT_KEYS = ("case_cpu_s", "total_cpu_s", "memory_mb", "pids", "nofile", "output_kb", "tmpfs_mb")
# Python's int() refuses more decimal digits than 4,300 (sys.get_int_max_str_digits); shorter literals convert
# at once, longer ones in halves.
INT_DIGITS_AT_ONCE = 4_000


class MalformedRows:
    """Rows refused as malformed, per process: counted by data_source and logged (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.by_source: dict[str, int] = {}

    def record(self, data_source: str, message: str) -> None:
        with self._lock:
            self.count += 1
            self.by_source[data_source] = self.by_source.get(data_source, 0) + 1
            count = self.count
        if count <= 10 or count % 100 == 0:
            log.error("malformed row #%d (data_source %r), not judged: %s", count, data_source, message)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"malformed": self.count, "by_data_source": dict(self.by_source)}


malformed_rows = MalformedRows()


@dataclass(frozen=True, eq=False)
class RowTask:
    """One row's tests, ready to judge: ``environment`` is the runtime image's (its limits, scoring and entry
    point are the row's), ``tests`` what the runner receives (see deepgym/runner/kinds/rows.py)."""

    data_source: str
    format: str
    environment: Environment
    tests: dict[str, Any]

    @property
    def cases(self) -> int:
        return len(self.tests["cases"])


def is_row_source(data_source: Any) -> bool:
    """Whether ``data_source`` names a row format (so the row's ground_truth holds its tests)."""
    return isinstance(data_source, str) and data_source in ALIASES


def _bad(field: str, problem: str, fix: str) -> ConfigurationError:
    return ConfigurationError(f"{field}: {problem}. Fix: {fix}")


def _plain(value: Any) -> Any:
    """Parquet readers hand lists back as numpy arrays: make them lists again."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    return value


def _text(value: Any, field: str) -> str:
    value = _plain(value)
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value)
    if not isinstance(value, str):
        raise _bad(field, f"is a {type(value).__name__}, not a string", "give the text (or a list of lines)")
    return value


def _whole(digits: str) -> int:
    """A JSON integer literal of any length. The row is the user's own data, so its integers are not capped
    as Python caps untrusted text; converting in halves keeps a long one subquadratic."""
    if len(digits) <= INT_DIGITS_AT_ONCE:
        return int(digits)
    if digits.startswith("-"):
        return -_whole(digits[1:])
    low = digits[len(digits) // 2:]
    return _whole(digits[:len(digits) // 2]) * 10 ** len(low) + _whole(low)


def _json(text: str, field: str) -> Any:
    try:
        return json.loads(text, parse_int=_whole)
    except (ValueError, RecursionError) as exc:
        raise _bad(field, f"is not valid JSON ({exc})", "write it as json.dumps of the value") from None


def _key(key: Any, field: str) -> str:
    """A dict key as JSON text spells it (the row's object form means what its JSON text would)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    raise _bad(field, f"has a key of type {type(key).__name__}", "use string keys, as JSON has")


def _json_value(value: Any, field: str, depth: int = 0) -> Any:
    """``value`` as its JSON text would read back (tuples and parquet's arrays as lists, keys as strings), so a
    row given as an object is judged as the same row given as text. Refused: what JSON has no form for, and
    what nests deeper than the runner passes values (literal.MAX_DEPTH)."""
    value = _plain(value)
    if depth > literal.MAX_DEPTH:
        raise _bad(field, f"nests more than {literal.MAX_DEPTH} levels deep", "give a value of fewer levels")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(item, field, depth + 1) for item in value]
    if isinstance(value, Mapping):
        return {_key(key, field): _json_value(item, field, depth + 1) for key, item in value.items()}
    raise _bad(field, f"holds a {type(value).__name__}, which JSON has no form for",
               "give plain JSON values (numbers, strings, booleans, null, lists, objects)")


def _code(text: Any, field: str) -> str:
    if not isinstance(text, str):
        raise _bad(field, f"is a {type(text).__name__}, not Python code", "give the code as a string")
    try:
        compile(text, field, "exec")
    except (SyntaxError, ValueError) as exc:
        raise _bad(field, f"is not valid Python ({exc})", "fix the dataset's test code") from None
    return text


def row_options(reward_kwargs: Mapping[str, Any], defaults: Limits = ROW_LIMITS) -> tuple[str, Limits]:
    """The scoring and limits that ``reward_kwargs`` choose over ``defaults``. Raises ConfigurationError."""
    from .environments import LIMIT_RANGES

    scoring = reward_kwargs.get("scoring", "all_or_nothing")
    if scoring not in SCORINGS:
        raise _bad("reward_kwargs.scoring", f"{scoring!r} is not a known scoring", f"use one of {', '.join(SCORINGS)}")
    values: dict[str, Any] = {}
    for key in LIMIT_KEYS:
        if key not in reward_kwargs:
            continue
        value, (low, high) = reward_kwargs[key], LIMIT_RANGES[key]
        whole = isinstance(getattr(Limits, key), int)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and value != int(value)) \
                or not low <= value <= high:
            raise _bad(f"reward_kwargs.{key}", f"{value!r} is not {'an integer' if whole else 'a number'} from "
                       f"{low:g} to {high:g}", "give a value in that range")
        values[key] = int(value) if whole else float(value)
    limits = defaults.replace(**values)
    if limits.total_cpu_s < limits.case_cpu_s:
        raise _bad("reward_kwargs.total_cpu_s", f"{limits.total_cpu_s:g} is below case_cpu_s ({limits.case_cpu_s:g})",
                   "make the total CPU limit at least the per-case limit")
    return scoring, limits


def _io_cases(truth: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
    inputs, outputs = _plain(truth.get("inputs")), _plain(truth.get("outputs"))
    for name, value in (("inputs", inputs), ("outputs", outputs)):
        if not isinstance(value, list) or not value:
            raise _bad(f"ground_truth.{name}", "is missing or not a non-empty list",
                       'give {"inputs": [...], "outputs": [...]} with one entry per test case')
    if len(inputs) != len(outputs):
        raise _bad("ground_truth.outputs", f"has {len(outputs)} entries for {len(inputs)} inputs",
                   "give one expected output per input")
    return inputs, outputs


def _stdin_tests(truth: Mapping[str, Any]) -> dict[str, Any]:
    inputs, outputs = _io_cases(truth)
    cases = [{"input": _text(i, f"ground_truth.inputs[{n}]"), "output": _text(o, f"ground_truth.outputs[{n}]")}
             for n, (i, o) in enumerate(zip(inputs, outputs))]
    return {"format": "stdin", "cases": cases}


def _call_tests(truth: Mapping[str, Any]) -> dict[str, Any]:
    fn_name = truth.get("fn_name")
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise _bad("ground_truth.fn_name", f"{fn_name!r} is not a Python function name",
                   "name the function the cases call")
    inputs, outputs = _io_cases(truth)
    cases = []
    for n, (raw_in, raw_out) in enumerate(zip(inputs, outputs)):
        raw_in, raw_out = _plain(raw_in), _plain(raw_out)
        if isinstance(raw_in, str):  # verl's layout: one JSON value per line, one line per argument
            args = [_json(line, f"ground_truth.inputs[{n}] line {k + 1}") for k, line in enumerate(raw_in.split("\n"))]
        elif isinstance(raw_in, list):
            args = raw_in
        else:
            raise _bad(f"ground_truth.inputs[{n}]", f"is a {type(raw_in).__name__}",
                       "give the arguments as a list, or as JSON lines (one per argument)")
        expected = _json(raw_out, f"ground_truth.outputs[{n}]") if isinstance(raw_out, str) else raw_out
        # As data the runner can pass on (deepgym/runner/literal.py: integers of any length).
        cases.append({"args": literal.encode(_json_value(args, f"ground_truth.inputs[{n}]")),
                      "expected": literal.encode(_json_value(expected, f"ground_truth.outputs[{n}]"))})
    return {"format": "call", "fn_name": fn_name, "cases": cases}


def _humaneval_tests(truth: Mapping[str, Any]) -> dict[str, Any]:
    entry = truth.get("entry_point")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise _bad("ground_truth.entry_point", f"{entry!r} is not a Python function name",
                   "name the function check(candidate) is given")
    test = _code(truth.get("test"), "ground_truth.test")
    if "def check(" not in test:
        raise _bad("ground_truth.test", "defines no check(candidate)", "give HumanEval's test code")
    prompt = _code(truth.get("prompt", ""), "ground_truth.prompt")
    return {"format": "assert", "setup": prompt + "\n" + test, "names": [entry], "cases": [f"check({entry})"],
            "entry_point": entry}


def _called_names(lines: list[str], setup: str) -> list[str]:
    """The functions MBPP's assert lines call that neither Python nor the setup code defines: the submission's."""
    defined = set(dir(builtins))
    for node in ast.walk(ast.parse(setup)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    names: list[str] = []
    for line in lines:
        for node in ast.walk(ast.parse(line)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in defined \
                    and node.func.id not in names:
                names.append(node.func.id)
    return names


def _mbpp_tests(truth: Mapping[str, Any]) -> dict[str, Any]:
    lines = _plain(truth.get("test_list"))
    if not isinstance(lines, list) or not lines:
        raise _bad("ground_truth.test_list", "is missing or not a non-empty list", "give MBPP's assert lines")
    lines = [_code(line, f"ground_truth.test_list[{n}]") for n, line in enumerate(lines)]
    imports = _plain(truth.get("test_imports")) or []
    if not isinstance(imports, list):
        raise _bad("ground_truth.test_imports", "is not a list", "give the import lines as a list")
    for n, line in enumerate(imports):
        if not isinstance(line, str):
            raise _bad(f"ground_truth.test_imports[{n}]", f"is a {type(line).__name__}, not a line of code",
                       "give each import line as a string")
    setup_code = truth.get("test_setup_code")
    setup_code = "" if setup_code is None else _text(setup_code, "ground_truth.test_setup_code")
    setup = _code("\n".join([*imports, setup_code]), "ground_truth.test_setup_code")
    names = _called_names(lines, setup)
    if not names:
        raise _bad("ground_truth.test_list", "calls no function of the submission", "give assert lines that call it")
    return {"format": "assert", "setup": setup, "names": names, "cases": lines, "entry_point": names[0]}


_BUILDERS = {"stdin_stdout": _stdin_tests, "call_based": _call_tests, "humaneval": _humaneval_tests,
             "mbpp": _mbpp_tests}


def _ground_truth(raw: Any) -> Mapping[str, Any]:
    raw = _plain(raw)
    if isinstance(raw, (str, bytes)):
        raw = _json(raw if isinstance(raw, str) else raw.decode("utf-8", "replace"), "ground_truth")
    if not isinstance(raw, Mapping):
        raise _bad("ground_truth", f"is a {type(raw).__name__}, not an object", "give the row's tests as a JSON object")
    return raw


def _largest_output(tests: dict[str, Any]) -> int:
    """The longest expected output in bytes as it comes back: a stdin case's text, or a call-based case's
    value as JSON in the worker's reply line (the reply is output too, under the same cap). 0 for assert rows,
    whose values are in their code."""
    if tests["format"] == "stdin":
        return max(len(case["output"].encode()) for case in tests["cases"])
    if tests["format"] == "call":
        return max(len(json.dumps(case["expected"])) for case in tests["cases"])
    return 0


def _largest_input(tests: dict[str, Any]) -> int:
    """The longest stdin case's input in bytes (it sits in the sandbox's /tmp); 0 for other formats."""
    return max(len(case["input"].encode()) for case in tests["cases"]) if tests["format"] == "stdin" else 0


def _build(data_source: str, ground_truth: Any, scoring: str, limits: Limits) -> RowTask:
    from .bundle import bundle_root
    from .environments import LIMIT_RANGES, Environment

    truth = _ground_truth(ground_truth)
    family = ALIASES[data_source]
    if family == "apps":
        family = "call_based" if truth.get("fn_name") is not None else "stdin_stdout"
    tests = _BUILDERS[family](truth)
    if scoring == "continuous" and family == "call_based":
        # prime_code's per-case pass drops fn_name and runs each case as a program, which prints nothing: a
        # call-based row scores 1.0 when every case passes and 0.0 otherwise.
        scoring = "all_or_nothing"
    elif scoring == "continuous":
        tests["cases"] = tests["cases"][:CONTINUOUS_CASES]
    # A case's input sits in the sandbox's /tmp while it runs, and its output must fit under the output cap.
    needed_kb = math.ceil(2 * _largest_output(tests) / 1024) + 64
    if needed_kb > limits.output_kb:
        limits = limits.replace(output_kb=min(needed_kb, int(LIMIT_RANGES["output_kb"][1])))
    needed_mb = math.ceil(_largest_input(tests) / (1 << 20)) + 64
    if needed_mb > limits.tmpfs_mb:
        limits = limits.replace(tmpfs_mb=min(needed_mb, int(LIMIT_RANGES["tmpfs_mb"][1])))
    environment = Environment(id=RUNTIME, kind="row", prompt="", path=bundle_root() / "images" / RUNTIME,
                              entry_point=tests.get("fn_name") or tests.get("entry_point"),
                              scoring="all_or_nothing" if scoring == "all_or_nothing" else "partial", limits=limits)
    return RowTask(data_source=data_source, format=family, environment=environment, tests=tests)


@lru_cache(maxsize=64)
def _cached(data_source: str, ground_truth: str, scoring: str, limits: Limits) -> RowTask:
    return _build(data_source, ground_truth, scoring, limits)


def row_task(data_source: str, ground_truth: Any, reward_kwargs: Mapping[str, Any] | None = None) -> RowTask:
    """The row's tests, checked. A row's samples share one parse (GRPO judges each prompt many times): rows
    whose ground_truth is a string are cached. Raises ConfigurationError naming the malformed field."""
    if not is_row_source(data_source):
        raise ConfigurationError(f"data_source: {data_source!r} names no row format. Fix: use one of "
                                 f"{', '.join(sorted(ALIASES))}")
    try:
        scoring, limits = row_options(reward_kwargs or {})
        if isinstance(ground_truth, str):
            return _cached(data_source, ground_truth, scoring, limits)
        return _build(data_source, ground_truth, scoring, limits)
    except ConfigurationError as exc:
        malformed_rows.record(data_source, str(exc))
        raise
