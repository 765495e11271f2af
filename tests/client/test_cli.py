"""The deepgym command: output shapes and exit statuses (0 scored, 2 bad usage, 3 no verdict)."""

import json
import os
import subprocess
import sys

import pytest

from support import ensure_images, fenced, solution
from deepgym.environments import list_environments, load_environment


def deepgym(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deepgym.cli", *args], input=stdin, capture_output=True, text=True,
                          env={**os.environ, **env})


def test_list_prints_name_then_kind():
    lines = deepgym("list").stdout.splitlines()
    assert [line.split() for line in lines] == [[name, load_environment(name).kind] for name in list_environments()]


@pytest.mark.parametrize("args,words", [
    (["run", "coin_chnage", "--response", "-"], "Known environments: "),
    (["run", "coin_change", "--response", "/nonexistent/response.md"], "no such file"),
    (["run", "coin_change", "--response", "-", "--variant", "99"], "out of range"),
])
def test_bad_usage_exits_2_with_a_message(args, words):
    result = deepgym(*args, stdin="not json\n")
    assert result.returncode == 2 and words in result.stderr and result.stdout == ""


@pytest.mark.parametrize("line", ["not json", '{"prompt": "x"}', '{"response": 5}', "[1, 2]", "7", "{"])
def test_run_batch_names_a_malformed_line_before_judging_anything(line):
    result = deepgym("run-batch", "coin_change", "--responses", "-", stdin=f'"fine"\n\n{line}\n')
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("deepgym: --responses line 3 is not a JSON string") and "Traceback" not in result.stderr


def test_cleanup_with_the_engine_down_says_so_and_exits_3(tmp_path):
    result = deepgym("cleanup", DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    assert result.returncode == 3 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.startswith("deepgym: cannot remove deepgym's containers") and "DOCKER_HOST" in result.stderr


@pytest.mark.docker
def test_run_exits_0_when_scored_and_3_without_a_verdict():
    ensure_images("coin_change")
    right = deepgym("run", "coin_change", "--response", "-", "--compact", stdin=fenced(solution("coin_change", "reference")))
    verdict = json.loads(right.stdout)
    assert right.returncode == 0 and verdict["score"] == 1.0 and verdict["has_verdict"] is True
    assert {"score", "passed", "error_type", "has_verdict", "cases", "timings"} <= set(verdict)
    wrong = deepgym("run", "coin_change", "--response", "-", stdin="no code here")
    assert wrong.returncode == 0 and json.loads(wrong.stdout)["error_type"] == "no_code_block"
    missing = deepgym("run", "coin_change", "--response", "-", stdin=fenced("x = 1"), DEEPGYM_TAG="never-built")
    report = json.loads(missing.stdout)
    assert missing.returncode == 3
    assert (report["has_verdict"], report["score"], report["error_type"]) == (False, None, "image_missing")


@pytest.mark.docker
def test_run_batch_prints_each_result_and_a_summary():
    ensure_images("coin_change")
    lines = "\n".join(json.dumps(r) for r in [fenced(solution("coin_change", "reference")), {"response": "prose"}])
    result = deepgym("run-batch", "coin_change", "--responses", "-", stdin=lines)
    *entries, summary = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.returncode == 0 and [e["score"] for e in entries] == [1.0, 0.0]
    assert summary == {"summary": {"samples": 2, "scored": 2, "no_verdict": 0, "mean_score": 0.5,
                                   "by_outcome": {"passed": 1, "no_code_block": 1}}}
