"""Rows for verl (the API and `deepgym verl rows`) read back by verl's RLHFDataset, the packaged agent-loop
config, and the DAPO reward module and config (composed with verl's ppo_trainer defaults by hydra)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.verl

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl_fakes import without_provenance  # noqa: E402
from verl_fakes import LineTokenizer, fenced, solution  # noqa: E402

from deepgym.cli import main  # noqa: E402
from deepgym.environments import list_environments, load_environment  # noqa: E402
from deepgym.integrations.dapo import generate_dapo_reward_module, generate_dapo_verl_config  # noqa: E402
from deepgym.integrations.verl import agent_loop_config_path, verl_rows  # noqa: E402


def test_rows_carry_verls_fields_and_name_their_environment():
    rows = verl_rows(["coin_change"], repeat=2, variant=[0, 3], agent_name="deepgym_single_turn")
    assert [(r["extra_info"]["index"], r["extra_info"]["variant"]) for r in rows] == [(0, 0), (1, 3), (2, 0), (3, 3)]
    row = rows[1]
    assert row["data_source"] == "coin_change" and row["ability"] == "coding"
    assert row["prompt"] == [{"role": "user", "content": load_environment("coin_change").prompt}]
    assert row["reward_model"] == {"style": "rule", "ground_truth": ""}
    assert row["extra_info"] == {"split": "train", "index": 1, "environment": "coin_change", "variant": 3}
    assert row["agent_name"] == "deepgym_single_turn"
    assert "agent_name" not in verl_rows("coin_change")[0]


def test_cli_rows_are_read_back_by_verls_dataset(tmp_path, capsys):
    names = ["coin_change"] + (["two_sum"] if "two_sum" in list_environments() else [])
    out = tmp_path / "data" / "train.parquet"
    assert main(["verl", "rows", *names, "--repeat", "3", "-o", str(out)]) == 0
    dataset = RLHFDataset(str(out), LineTokenizer(),
                          OmegaConf.create({"max_prompt_length": 512, "cache_dir": str(tmp_path / "cache")}))
    assert len(dataset) == 3 * len(names)
    items = [dataset[i] for i in range(len(dataset))]
    assert [item["data_source"] for item in items] == names * 3
    assert [item["index"] for item in items] == list(range(3 * len(names)))
    for item in items:
        env = load_environment(item["data_source"])
        assert item["raw_prompt"] == [{"role": "user", "content": env.prompt}]
        assert item["extra_info"]["environment"] == env.id and item["extra_info"]["variant"] == 0
        assert item["reward_model"]["ground_truth"] == ""

    assert main(["verl", "rows", "no_such_environment", "-o", str(out)]) == 2
    assert "unknown environment" in capsys.readouterr().err


def test_agent_loop_config_path_is_printed_and_lists_the_loop(capsys):
    assert main(["verl", "agent-loop-config"]) == 0
    path = capsys.readouterr().out.strip()
    assert path == agent_loop_config_path() and Path(path).is_absolute()
    entries = OmegaConf.to_container(OmegaConf.load(path))
    assert {"name": "deepgym_single_turn", "_target_": "deepgym.integrations.verl_mask.DeepGymSingleTurnAgentLoop",
            "mode": "auto", "reasoning": None} in entries


def test_generated_dapo_config_composes_with_verls_ppo_trainer_defaults(tmp_path):
    text = generate_dapo_verl_config(train_files="data/train.parquet", reward_module_path="/abs/reward_module.py",
                                     mode="docker", model_path="Qwen/Qwen2.5-0.5B-Instruct")
    (tmp_path / "dapo_deepgym.yaml").write_text(text)
    with initialize_config_dir(config_dir=str(tmp_path), version_base=None):
        config = compose(config_name="dapo_deepgym")
    OmegaConf.resolve(config)
    # Scored by deepgym's loop, from the file that ships in the package.
    agent = config.actor_rollout_ref.rollout.agent
    assert agent.default_agent_loop == "deepgym_single_turn"
    assert agent.agent_loop_config_path == agent_loop_config_path()
    assert OmegaConf.to_container(config.reward.custom_reward_function) == {
        "path": "/abs/reward_module.py", "name": "compute_score", "reward_kwargs": {"mode": "docker"}}
    # verl's own config classes accept the DAPO pieces.
    algorithm = omega_conf_to_dataclass(config.algorithm)
    assert algorithm.adv_estimator == "grpo" and not algorithm.use_kl_in_reward
    assert algorithm.filter_groups.enable and algorithm.filter_groups.metric == "score"
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.loss_agg_mode) == (0.2, 0.28, "token-mean")
    assert not actor.use_kl_loss
    rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    assert rollout.n == 16 and rollout.agent.default_agent_loop == "deepgym_single_turn"
    # Everything else keeps verl's defaults.
    assert config.trainer.use_v1 is True and config.data.train_files == "data/train.parquet"
    assert config.trainer.n_gpus_per_node == 8 and config.reward.reward_manager.name == "naive"
    assert "overlong" in text  # says why DAPO's overlong shaping does not apply to loop-scored samples

    with pytest.raises(ValueError, match="filter_metric"):
        generate_dapo_verl_config(train_files="x.parquet", filter_metric="error")


@pytest.mark.docker
def test_generated_dapo_reward_module_is_loaded_by_verl(tmp_path, coin_change_image):
    module = tmp_path / "reward_module.py"
    module.write_text(generate_dapo_reward_module("coin_change"))
    config = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": str(module), "name": "compute_score", "reward_kwargs": {"mode": "docker"}}}})
    compute_score = get_custom_reward_fn(config)
    result = compute_score(data_source="anything", solution_str=fenced(solution("coin_change", "reference")),
                           ground_truth="", extra_info={})
    assert without_provenance(result) == {"score": 1.0, "passed": 1.0, "error": 0.0, "error_type": ""}
    with pytest.raises(LookupError, match="unknown environment"):
        generate_dapo_reward_module("no_such_environment")
