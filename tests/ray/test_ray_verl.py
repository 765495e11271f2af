"""verl through ``mode: ray`` on the two-node cluster (tests/ray_cluster.py), with verl's own classes built as
verl's AgentLoopWorker builds them (tests/verl/verl_fakes.py): the single-turn loop scoring with deepgym's
compute_score under ``reward_kwargs: {mode: ray}``, and the ``deepgym_agent`` loop whose session tool says
``mode: ray``, each episode on one node of the cluster, for a caller whose DOCKER_HOST points nowhere."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from support import ROOT

from ray_cluster import SHELL_ENV

pytestmark = [pytest.mark.ray, pytest.mark.docker, pytest.mark.verl, pytest.mark.timeout(900)]
pytest.importorskip("verl.trainer", reason="verl is not installed (source scripts/dev-env.sh --verl)")
sys.path.insert(0, str(ROOT / "tests" / "verl"))

from verl_fakes import (LineTokenizer, ScriptedServer, fenced, instantiate_loop, loop_config, run_loop,  # noqa: E402
                        solution, without_provenance)

from deepgym.authoring.replay import action_sequences  # noqa: E402
from deepgym.environments import load_environment  # noqa: E402
from deepgym.integrations import verl as dgverl  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_clients():
    """verl's clients are cached per mode: each test starts and ends without one."""
    dgverl.reset_clients()
    yield
    dgverl.reset_clients()


def rows(tmp_path: Path, name: str, max_prompt_length: int) -> dict:
    """The first row of ``name`` as verl's RLHFDataset hands it to an agent loop (written by verl_rows)."""
    import pandas as pd
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    path = tmp_path / f"{name}.parquet"
    pd.DataFrame(dgverl.verl_rows([name])).to_parquet(path)
    config = OmegaConf.create({"max_prompt_length": max_prompt_length, "cache_dir": str(tmp_path / "cache")})
    return dict(RLHFDataset(str(path), LineTokenizer(), config)[0])


def test_the_single_turn_loop_scores_through_ray(caller, tmp_path):
    row = rows(tmp_path, "coin_change", 512)
    config = loop_config(use_v1=True, reward_path="pkg://deepgym.integrations.verl", reward_kwargs={"mode": "ray"})
    right, wrong = run_loop(config, row, fenced(solution("coin_change", "reference")),
                            fenced(solution("coin_change", "wrong_greedy")))
    assert right.reward_score == 1.0 and wrong.reward_score == 0.0
    assert wrong.extra_fields["reward_extra_info"]["error_type"] == "wrong_answer"


def call(command: str) -> str:
    """A model turn that calls the shell tool, in the hermes format."""
    return f"Let me look.\n<tool_call>{json.dumps({'name': 'shell', 'arguments': {'command': command}})}</tool_call>"


def test_the_deepgym_agent_loop_runs_its_episode_through_ray(caller, tmp_path):
    from omegaconf import OmegaConf
    from verl.tools.tool_registry import initialize_tools_from_config

    from deepgym.integrations.verl_tool import episode_count

    tool_config = tmp_path / "tool.yaml"
    tool_config.write_text(Path(dgverl.session_tool_config_path()).read_text().replace("mode: docker", "mode: ray"))
    multi_turn = {"max_user_turns": None, "max_assistant_turns": None, "max_parallel_calls": 1,
                  "max_tool_response_length": 4000, "tool_response_truncate_side": "middle", "format": "hermes",
                  "tool_config_path": str(tool_config)}
    config = OmegaConf.merge(loop_config(use_v1=True), {"actor_rollout_ref": {"rollout": {
        "response_length": 2048, "full_determinism": True, "multi_turn": multi_turn}}})
    row = rows(tmp_path, SHELL_ENV, 1024)
    actions = action_sequences(load_environment(SHELL_ENV), "reference")[0]
    server = ScriptedServer(LineTokenizer(), *map(call, actions), "The configuration is fixed.")

    async def main():
        tools = initialize_tools_from_config(str(tool_config))
        loop = instantiate_loop(config, server, "deepgym_agent", tools=tools)
        assert loop.episode.mode == "ray"
        return await loop.run({"temperature": 1.0}, **row)

    output = asyncio.run(main())
    assert output.reward_score == 1.0, output.extra_fields
    assert without_provenance(output.extra_fields["reward_extra_info"]) == {"score": 1.0, "passed": 1.0, "error": 0.0,
                                                                           "error_type": ""}
    assert episode_count() == 0
