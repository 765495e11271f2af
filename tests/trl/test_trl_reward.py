"""deepgym's TRL reward functions, called the way GRPOTrainer calls them, against real containers; the
trainer's rules on a batch of rewards; the DAPO config; the example script; and a cheap import."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from types import SimpleNamespace

import pytest
from support import ROOT

RIGHT = "Sure.\n\n```python\n" + (ROOT / "environments/coin_change/solutions/reference.py").read_text() + "\n```\n"
WRONG = "```python\n" + (ROOT / "environments/coin_change/solutions/wrong_greedy.py").read_text() + "\n```"
PROSE = "I would use dynamic programming over the amounts."


class Log:
    """TRL's log_metric and log_extra, recorded."""

    def __init__(self):
        self.metrics: dict[str, list[float]] = {}
        self.extra: dict[str, list] = {}

    def kwargs(self) -> dict:
        return {"log_metric": lambda name, value: self.metrics.setdefault(name, []).append(value),
                "log_extra": lambda column, values: self.extra.setdefault(column, []).extend(values)}


def test_importing_the_module_loads_neither_trl_nor_torch():
    code = ("import sys, deepgym.integrations.trl as t, deepgym.integrations.trl_env as e; t.make_trl_reward_fn; "
            "t.generate_trl_dapo_config; e.DeepGymShellEnv; e.make_trl_env_factories; print(' '.join(m for m in ('trl', 'torch', 'transformers', 'docker') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == []


def test_ground_truth_tests_on_an_environments_row_are_refused():
    from deepgym.errors import ConfigurationError
    from deepgym.integrations.trl import make_trl_reward_fn

    reward_fn = make_trl_reward_fn("coin_change", mode="docker")
    with pytest.raises(ConfigurationError, match="ground_truth"):
        reward_fn([RIGHT], ground_truth=["assert coin_change([1], 2) == 2"])
    with pytest.raises(ConfigurationError, match="ground_truth"):
        reward_fn([RIGHT], reward_model=[{"style": "rule", "ground_truth": "x"}])


@pytest.mark.docker
def test_rows_with_their_own_tests():
    import json

    from deepgym.images import build
    from deepgym.integrations.trl import make_trl_reward_fn

    build(["row_python"])
    reward_fn = make_trl_reward_fn(mode="docker")
    truth = json.dumps({"inputs": ["2 3\n"], "outputs": ["5\n"]})
    adding = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    rewards = reward_fn([adding, "```python\nprint(6)\n```"], data_source=["codecontests", "codecontests"],
                        reward_model=[{"style": "rule", "ground_truth": truth}] * 2)
    assert rewards == [1.0, 0.0]


@pytest.mark.docker
def test_fixed_environment_plain_completions_and_metrics(coin_change_image):
    from deepgym.integrations.trl import DEEPGYM_REWARD_ATTR, make_trl_reward_fn

    reward_fn = make_trl_reward_fn("coin_change", mode="docker")
    assert reward_fn.__name__ == "deepgym_coin_change" and getattr(reward_fn, DEEPGYM_REWARD_ATTR)
    log = Log()
    # TRL passes every dataset column; a fixed environment ignores the row's.
    rewards = reward_fn(prompts=["p"] * 3, completions=[RIGHT, WRONG, PROSE], completion_ids=[[1]] * 3,
                        environment=["two_sum"] * 3, trainer_state=None, **log.kwargs())
    assert rewards == [1.0, 0.0, 0.0], log.extra
    assert log.metrics == {"deepgym_coin_change/score": [1 / 3], "deepgym_coin_change/passed": [1 / 3],
                           "deepgym_coin_change/error": [0.0]}
    assert log.extra == {"deepgym_coin_change_error_type": ["", "wrong_answer", "no_code_block"]}


@pytest.mark.docker
def test_environment_per_row_conversational_and_no_verdict(coin_change_image, unbuilt_environment):
    from deepgym.integrations.trl import make_trl_reward_fn
    from deepgym.integrations.verl import verl_rows

    reward_fn = make_trl_reward_fn(mode="docker")
    assert reward_fn.__name__ == "deepgym"
    conversation = [[{"role": "assistant", "content": RIGHT}]] * 2
    log = Log()
    rewards = reward_fn(conversation, environment=["coin_change", unbuilt_environment], variant=[3, 0],
                        **log.kwargs())
    assert rewards == [1.0, None]
    assert log.metrics["deepgym/error"] == [0.5] and log.extra["deepgym_error_type"] == ["", "image_missing"]
    # verl's rows work as they are: the environment from extra_info, content given as parts.
    row = verl_rows("coin_change", variant=2)[0]
    parts = [[{"role": "assistant", "content": [{"type": "text", "text": WRONG}]}]]
    assert reward_fn(parts, extra_info=[row["extra_info"]], data_source=[row["data_source"]]) == [0.0]


@pytest.mark.trl
@pytest.mark.docker
def test_async_variant_for_trls_async_reward_path(coin_change_image, unbuilt_environment):
    from trl.trainer.utils import is_async_callable

    from deepgym.integrations.trl import make_trl_async_reward_fn

    reward_fn = make_trl_async_reward_fn("coin_change", mode="docker")
    assert is_async_callable(reward_fn) and reward_fn.__name__ == "deepgym_coin_change"
    assert asyncio.run(reward_fn([RIGHT, WRONG])) == [1.0, 0.0]
    per_row = make_trl_async_reward_fn(mode="docker")
    assert asyncio.run(per_row([RIGHT], environment=[unbuilt_environment])) == [None]


@pytest.mark.trl
def test_dapo_config_is_a_grpo_config():
    from trl import GRPOConfig

    from deepgym.integrations.trl import generate_trl_dapo_config

    settings = generate_trl_dapo_config(num_generations=8, learning_rate=1e-6)
    assert settings["loss_type"] == "dapo" and settings["epsilon_high"] == 0.28 and settings["epsilon"] == 0.2
    assert settings["mask_truncated_completions"] is True and settings["beta"] == 0.0
    config = GRPOConfig(output_dir="unused", use_cpu=True, report_to="none", per_device_train_batch_size=8,
                        **settings)
    assert (config.loss_type, config.epsilon_high, config.num_generations, config.learning_rate) == \
        ("dapo", 0.28, 8, 1e-6)
    with pytest.raises(ValueError, match="clip-higher"):
        generate_trl_dapo_config(epsilon=0.3, epsilon_high=0.2)


class _StockRewards:
    """Stands in for GRPOTrainer's _calculate_rewards (one row per sample, one column per reward function)."""

    def __init__(self, rewards, reward_funcs, group: int, filter_groups: bool = False):
        import torch

        self.rewards = torch.tensor(rewards, dtype=torch.float32)
        self.reward_funcs = reward_funcs
        self.reward_weights = torch.ones(len(reward_funcs))
        self.num_generations = group
        self.model = SimpleNamespace(training=True)
        self.accelerator = SimpleNamespace(process_index=0)
        self._metrics = {"train": {"deepgym/kept_out": [], "deepgym/masked": []}}
        self._pending_extra_logs = {}

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        return self.rewards.clone()


@pytest.mark.trl
@pytest.mark.parametrize("filter_groups", [False, True])
def test_the_trainer_keeps_out_a_deepgym_none_even_when_another_reward_scored_it(filter_groups):
    from deepgym.integrations.trl import DeepGymGRPOMixin, kept_out, make_trl_reward_fn

    class Trainer(DeepGymGRPOMixin, _StockRewards):
        pass

    nan = float("nan")
    deepgym_fn, length_fn = make_trl_reward_fn("coin_change"), lambda completions, **kw: [0.1] * len(completions)
    # Columns: deepgym, a length reward that scores everything. Groups of three.
    rewards = [[1.0, 0.1], [nan, 0.1], [0.0, 0.1],     # a deepgym None is kept out, not trained on as 0 + 0.1
               [nan, 0.1], [nan, 0.1], [1.0, 0.1],     # one scored sample: no baseline, masked whole
               [1.0, 0.1], [1.0, 0.1], [nan, nan]]     # every scored sample equal: masked only with filter_groups
    trainer = Trainer(rewards, [deepgym_fn, length_fn], group=3, filter_groups=filter_groups)
    kept_out.reset()
    out = trainer._calculate_rewards(None, [None] * 9, None, None)
    assert [bool(row.isnan().all()) for row in out] == [False, True, False, True, True, False, False, False, True]
    masked = trainer._deepgym_masked.tolist()
    assert masked == [False, True, False, True, True, True] + [filter_groups, filter_groups, True]
    assert kept_out.snapshot()["by_error_type"] == {"unknown": 4}
    assert trainer._metrics["train"]["deepgym/kept_out"] == [pytest.approx(4 / 9)]


@pytest.mark.trl
@pytest.mark.docker
def test_the_example_script_trains_the_tiny_model(coin_change_image, tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "trl_grpo_tiny.py"), "--steps", "1"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'step': 1" in result.stdout and "kept out of the loss:" in result.stdout
