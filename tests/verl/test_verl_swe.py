"""SWE-bench instances as verl rows: `deepgym datasets swe FILE -o train.parquet` writes them, and verl's own
reward loading (get_custom_reward_fn with the pkg:// path, a reward manager) judges them on their images."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "swe"))

import pyarrow.parquet as pq  # noqa: E402
from instances import instance_rows  # noqa: E402
from support import ROOT, ensure_images  # noqa: E402
from test_verl_reward import call_as_verl, data_proto, reward_config  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager  # noqa: E402
from verl_fakes import LineTokenizer, without_provenance  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.docker]


def write_rows(tmp_path: Path, rows: list[dict], suffix: str = ".jsonl") -> Path:
    source = tmp_path / f"instances{suffix}"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return source


def datasets_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deepgym.cli", "datasets", *args], capture_output=True, text=True,
                          cwd=ROOT)


def test_datasets_swe_rows_are_judged_by_verls_reward(tmp_path, tmp_path_factory):
    ensure_images("row_python")
    instances = instance_rows(tmp_path_factory.mktemp("swe-instances"))
    source = write_rows(tmp_path, list(instances.values()))
    written = datasets_cli("swe", str(source), "-o", str(tmp_path / "train.parquet"))
    assert written.returncode == 0, written.stderr
    rows = pq.read_table(tmp_path / "train.parquet").to_pylist()
    assert [row["data_source"] for row in rows] == ["swe"] * 3
    assert [row["extra_info"]["source_id"] for row in rows] == [r["instance_id"] for r in instances.values()]
    assert "```diff" in rows[0]["prompt"][0]["content"]

    fn = get_custom_reward_fn(reward_config("docker"))
    for row, instance in zip(rows, instances.values()):
        gold = f"```diff\n{instance['patch']}```"
        assert without_provenance(call_as_verl(fn, gold, row)) == {"score": 1.0, "passed": 1.0, "error": 0.0,
                                                                   "error_type": ""}
    assert call_as_verl(fn, "No idea.", rows[0])["error_type"] == "invalid_patch"

    tokenizer = LineTokenizer()

    async def score(row: dict, response: str) -> dict:
        manager = load_reward_manager(reward_config("docker"), tokenizer)  # made in the loop that awaits it
        return await manager.run_single(data_proto(tokenizer, row, response))

    assert asyncio.run(score(rows[1], f"```diff\n{instances['slug']['patch']}```"))["reward_score"] == 1.0


def test_a_malformed_instance_names_its_record_and_field(tmp_path):
    row = {"instance_id": "x", "base_commit": "a" * 40, "test_patch": "", "FAIL_TO_PASS": "[]",
           "PASS_TO_PASS": "[]", "problem_statement": "p", "image_name": "img:1"}
    failed = datasets_cli("swe", str(write_rows(tmp_path, [row])), "-o", str(tmp_path / "out.parquet"))
    assert failed.returncode != 0 and "record 0: FAIL_TO_PASS: is empty" in failed.stderr


def test_episode_rows_are_played_by_deepgyms_agent_loop(tmp_path, tmp_path_factory):
    """`--episodes` rows, read back by verl's RLHFDataset, played by deepgym_agent with a scripted model that fixes
    the bug through the shell tool: the final diff earns 1.0; a model that changes nothing earns 0."""
    from omegaconf import OmegaConf
    from test_verl_session_loop import Server, call, run_episode, session_config
    from verl.utils.dataset.rl_dataset import RLHFDataset

    ensure_images("row_python")
    instance = instance_rows(tmp_path_factory.mktemp("swe-instances"))["calc"]
    written = datasets_cli("swe", str(write_rows(tmp_path, [instance])), "--episodes", "-o", str(tmp_path / "ep.parquet"))
    assert written.returncode == 0, written.stderr
    config = OmegaConf.create({"max_prompt_length": 1024, "cache_dir": str(tmp_path / "cache")})
    row = dict(RLHFDataset(str(tmp_path / "ep.parquet"), LineTokenizer(), config)[0])
    assert row["agent_name"] == "deepgym_agent"

    fixing = Server(call("grep -n 'a - b' calc/ops.py"), call("sed -i 's/a - b/a + b/' calc/ops.py"), "Fixed.")
    output = run_episode(session_config(use_v1=True), row, fixing)
    assert output.reward_score == 1.0, output.extra_fields
    idle = Server(call("git status --short"), "Nothing to change.")
    output = run_episode(session_config(use_v1=True), row, idle)
    assert output.reward_score == 0.0
    assert output.extra_fields["reward_extra_info"]["error_type"] == "invalid_patch"
