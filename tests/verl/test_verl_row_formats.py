"""deepgym scores verl's stdin/stdout and call-based rows as verl's own reward scores them.

verl 0.9.1's ``default_compute_score`` (data_source ``codecontests``/``apps``/``codeforces``/``taco``, no
SandboxFusion URL) runs ``prime_code`` with ``continuous=True``; deepgym with ``scoring: continuous`` must give
the same score on the same rows, for right, wrong, crashing and looping code, and its default
(all-or-nothing) must be 1.0 exactly when verl's is. The output comparison itself is checked against
prime_code's ``run_test`` on hand-picked and generated pairs (in a subprocess: run_test disables ``os``
functions in the process that calls it).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from deepgym.integrations.verl import compute_score
from deepgym.runner.kinds.rows import apps_output_matches, apps_result_matches, prime_call_case

pytestmark = [pytest.mark.verl]

PRIME = r'''
import json, sys
from verl.utils.reward_score.prime_code import testing_util
from verl.utils.reward_score.prime_code.testing_util import run_test
testing_util.reliability_guard()
testing_util.reliability_guard = lambda *args, **kwargs: None  # once is enough: a second call fails
results = []
for item in json.loads(sys.stdin.read()):
    if item["kind"] == "stdin":
        code = "import sys\nsys.stdout.write(%r)\n" % item["actual"]
        res, _ = run_test({"inputs": [""], "outputs": [item["expected"]]}, test=code, timeout=5)
    else:
        code = "def f(x):\n    return %s\n" % item["actual"]
        res, _ = run_test({"fn_name": "f", "inputs": ["0"], "outputs": [item["expected"]]}, test=code, timeout=5)
    results.append(res == [True])
sys.__stdout__.write(json.dumps(results))
'''


def prime_verdicts(items: list[dict]) -> list[bool]:
    done = subprocess.run([sys.executable, "-c", PRIME], input=json.dumps(items), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


HAND_PICKED = [
    ("3\n", "3"), ("3", "3\n"), ("  3  \n", "3"), ("1 2\n", "1  2"), ("1\n2\n", "1\n\n2\n"), ("1\r\n2\r\n", "1\n2"),
    ("1\n\n2", "1\n2"), ("a \nb", "a\nb "), ("3.0000001\n", "3"), ("3.01\n", "3"), ("1e5\n", "100000"),
    ("100000\n", "1e5"), ("inf\n", "inf"), ("nan\n", "nan"), ("1_0\n", "10"), ("10\n", "010"), ("1 2\n", "1\n2"),
    ("YES\n", "yes"), ("", ""), ("\n", ""), ("x\x0by\n", "x\ny"), ("²\n", "2"), ("-0\n", "0"), ("0.5 \n0.25\n", "0.5\n0.25"),
    ("1\n2\n3\n", "1\n2"), (" \n", " "), ("\t1\t\n", "1"), ("1.0 2.0\n", "1 2"),
]


def _random_pairs(count: int) -> list[tuple[str, str]]:
    rng = random.Random(20260)
    pieces = ["0", "1", "2", "10", "1.5", "1.50001", "-3", "1e3", "x", "YES", " ", "  ", "\n", "\n\n", "\t", "\r\n"]
    pairs = []
    for _ in range(count):
        expected = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        actual = expected
        for _ in range(rng.randint(0, 2)):  # a few edits, so that many pairs are close to passing
            position = rng.randint(0, len(actual))
            actual = actual[:position] + rng.choice(pieces) + actual[position + rng.randint(0, 2):]
        pairs.append((actual, expected))
    return pairs


def test_stdout_comparison_is_prime_codes():
    pairs = HAND_PICKED + _random_pairs(300)
    theirs = prime_verdicts([{"kind": "stdin", "actual": a, "expected": e} for a, e in pairs])
    ours = [apps_output_matches(a, e) for a, e in pairs]
    differ = [(pair, t) for pair, t, o in zip(pairs, theirs, ours) if t != o]
    assert not differ
    assert 0 < sum(ours) < len(ours)


CALL_CASES = [
    ("3", "3"), ("(3,)", "3"), ("[3]", "3"), ("3", "[3]"), ("(1, 2)", "[1, 2]"), ("[(1, 2)]", "[[1, 2]]"),
    ("[(1, 2)]", "[[[1, 2]]]"), ("{1: 'a'}", '{"1": "a"}'), ("{'1': 'a'}", '{"1": "a"}'), ("{1: 'a'}", '[{"1": "a"}]'),
    ("{'x': 1}", '{"x": 1}'), ("True", "1"), ("1.0", "1"), ("None", "null"), ("[]", "[]"), ("'a'", '["a"]'),
    ("[1, 2]", "[[1, 2]]"), ("[[1, 2]]", "[1, 2]"),
]


def test_call_result_comparison_is_prime_codes():
    theirs = prime_verdicts([{"kind": "call", "actual": a, "expected": e} for a, e in CALL_CASES])
    ours = []
    for actual, expected in CALL_CASES:
        args, want = prime_call_case([0], json.loads(expected))
        ours.append(apps_result_matches(eval(actual), want))  # noqa: S307 - our own literals
    assert list(zip(CALL_CASES, ours)) == list(zip(CALL_CASES, theirs))


STDIN_ROW = {"inputs": ["2\n3 4\n", "1\n10\n", "3\n1 1 1\n", "2\n-5 5\n"], "outputs": ["7\n", "10\n", "3\n", "0\n"]}
CALL_ROW = {"fn_name": "count", "inputs": ["[1, 2, 2]\n2", "[]\n5", "[3, 3, 3]\n3", "[1]\n1"],
            "outputs": ["2", "0", "3", "1"]}
ONE_CASE = {"inputs": ["4\n"], "outputs": ["16\n"]}
SOLUTIONS = {
    "stdin": (STDIN_ROW, {
        "right": "n = int(input())\nprint(sum(map(int, input().split())))\n",
        "wrong": "n = int(input())\nprint(max(map(int, input().split())))\n",
        "half right": "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) if n != 1 and min(xs) > 0 else -1)\n",
        "crashing": "n = int(input())\nprint(1 // (n - 1))\n",
    }),
    "call": (CALL_ROW, {
        "right": "def count(xs, x):\n    return xs.count(x)\n",
        "class Solution": "class Solution:\n    def count(self, xs, x):\n        return len([y for y in xs if y == x])\n",
        "wrong": "def count(xs, x):\n    return len(xs)\n",
        "crashing": "def count(xs, x):\n    return xs.count(x) // (len(xs) - 1)\n",
    }),
    "looping": (ONE_CASE, {"looping": "while True:\n    pass\n"}),
}


@pytest.mark.docker
@pytest.mark.parametrize("row,name", [(row, name) for row, (_, codes) in SOLUTIONS.items() for name in codes])
def test_rows_score_as_verls_own_reward(row, name):
    from verl.utils.reward_score import default_compute_score

    from deepgym.images import build

    build(["row_python"])
    truth, codes = SOLUTIONS[row]
    ground_truth = json.dumps(truth)
    response = f"My solution:\n\n```python\n{codes[name]}```\n"
    theirs = float(default_compute_score("codecontests" if row != "call" else "apps", response, ground_truth))
    ours = compute_score("codecontests" if row != "call" else "apps", response, ground_truth, {}, mode="docker",
                         scoring="continuous", case_cpu_s=2.0)
    strict = compute_score("taco", response, ground_truth, {}, mode="docker", case_cpu_s=2.0)
    assert ours["score"] == pytest.approx(theirs)
    assert strict["score"] == (1.0 if theirs == 1.0 else 0.0)
    if name == "looping":
        assert ours["error_type"] == "solution_timeout"


@pytest.mark.docker
def test_a_codecontests_config_trains_unchanged_after_three_config_lines(tmp_path):
    """Rows as a CodeContests user has them, read back by verl's RLHFDataset and scored by verl's naive reward
    manager: with the three config lines of docs/verl.md, deepgym gives the scores verl's default reward gave."""
    import asyncio

    import numpy as np
    import pandas as pd
    import torch
    from omegaconf import OmegaConf
    from tensordict import TensorDict
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl_fakes import EOS_ID, LineTokenizer

    from deepgym.images import build

    build(["row_python"])
    rows = [{"data_source": "codecontests", "prompt": [{"role": "user", "content": "Sum the numbers."}],
             "ability": "code", "reward_model": {"style": "rule", "ground_truth": json.dumps(STDIN_ROW)},
             "extra_info": {"split": "train", "index": 0}}]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    tokenizer = LineTokenizer()
    row = dict(RLHFDataset(str(tmp_path / "train.parquet"), tokenizer, OmegaConf.create(
        {"max_prompt_length": 512, "cache_dir": str(tmp_path / "cache")}))[0])
    manager = {"reward_manager": {"source": "register", "name": "naive", "module": {"path": None, "name": "unused"}}}
    verls = OmegaConf.create({"reward": {**manager, "custom_reward_function": {"path": None, "name": "compute_score"}}})
    ours = OmegaConf.create({"reward": {**manager, "custom_reward_function": {
        "path": "pkg://deepgym.integrations.verl", "name": "compute_score", "reward_kwargs": {"scoring": "continuous"}}}})

    def score(config, response: str) -> float:
        prompt = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True)
        ids = tokenizer.encode(response) + [EOS_ID]
        batch = TensorDict({"prompts": torch.tensor([prompt]), "responses": torch.tensor([ids]),
                            "attention_mask": torch.tensor([[1] * (len(prompt) + len(ids))])}, batch_size=1)
        non_tensor = {key: np.array([row[key]], dtype=object) for key in ("data_source", "reward_model", "extra_info")}
        non_tensor["__num_turns__"] = np.array([2])

        async def run_single():  # the manager takes the running loop when it is made
            return await load_reward_manager(config, tokenizer).run_single(
                DataProto(batch=batch, non_tensor_batch=non_tensor))

        return float(asyncio.run(run_single())["reward_score"])

    for name in ("right", "wrong", "half right"):
        response = f"```python\n{SOLUTIONS['stdin'][1][name]}```"
        assert score(ours, response) == pytest.approx(score(verls, response)), name
