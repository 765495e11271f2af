"""TRL's GRPOTrainer runs deepgym episodes through ``environment_factory`` on real containers: a catalogue shell
environment (shell_find_largest, the ``bash`` tool) and an imported Harbor task (hello-world, the persistent
terminal's ``run`` and ``terminal`` tools) in one dataset, routed by TRL's dict of factories.

The model is random and could never write a tool call, so the policy is scripted: the test replaces only the
sampling of token ids (``_generate_single_turn``) with the turns of a plan, by rollout. Everything else is TRL's
own: the prompts rendered with each environment's tool schemas, the parsing of the tool calls, the tool loop,
``reset`` before each rollout, ``get_reward`` after it, the advantages and the training step. Per step, two groups
of four:

    shell_find_largest: right (two bash calls), idle, NO VERDICT, right
    hello_world:        right (run: cd /, then a path relative to it), idle, NO VERDICT, right (terminal keys)

A no-verdict rollout is a real one: its instance of the factory names a copy of the environment whose image was
never built, so the engine answers image_missing, and ``get_reward`` returns None.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support import harbor_environments

pytestmark = [pytest.mark.trl, pytest.mark.docker]

SHELL, HARBOR = "shell_find_largest", "hello_world"
GROUP = 4
LARGEST = "find data -type f -printf '%s %p\\n' | sort -n | tail -1 | cut -d' ' -f2 > answer.txt && cat answer.txt"
GREET = "echo 'Hello, world!' > hello.txt"
# Per rollout: its tool calls, one per turn (then a last turn without one). Index 2 of each group has no verdict.
PLANS: list[list[tuple[str, dict[str, Any]]]] = [
    [("bash", {"command": "ls -la data"}), ("bash", {"command": LARGEST})],
    [("bash", {"command": "ls -la"})],
    [("bash", {"command": LARGEST})],
    [("bash", {"command": LARGEST})],
    [("run", {"command": "cd /"}), ("run", {"command": "echo 'Hello, world!' > app/hello.txt"})],  # cd lasted
    [("run", {"command": "ls -la"})],
    [("run", {"command": f"cd /app && {GREET}"})],
    [("terminal", {"keystrokes": f"cd /app && {GREET}\n", "duration": 0.5})],
]
EXPECTED = [1.0, 0.0, None, 1.0, 1.0, 0.0, None, 1.0]
BROKEN = 2  # the instance of each environment's factory whose image is missing

def turn(rollout: int, calls_made: int) -> str:
    """The plan's next assistant turn: its next tool call, or a last message once they are all made."""
    plan = PLANS[rollout]
    if calls_made == len(plan):
        return "done<|im_end|>"
    name, arguments = plan[calls_made]
    call = json.dumps({"name": name, "arguments": arguments})
    return f"rollout {rollout}\n<tool_call>\n{call}\n</tool_call><|im_end|>"


def factories(unbuilt: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """TRL's dict of factories, from make_trl_env_factories, where the BROKEN-th instance of each environment (it
    serves that rollout of the environment's group every step: TRL hands its pool out in order) names the copy
    whose image was never built."""
    from deepgym.integrations.trl_env import make_trl_env_factories, make_trl_env_factory

    made = make_trl_env_factories([SHELL, HARBOR], mode="docker")

    def counted(name: str) -> Callable[[], Any]:
        calls = iter(range(1 << 20))

        def factory() -> Any:
            broken = next(calls) == BROKEN
            return (make_trl_env_factory(unbuilt[name], mode="docker") if broken else made[name])()

        return factory

    return {name: counted(name) for name in made}


def my_containers() -> list[str]:
    """deepgym containers of this process (not another run's on the same engine)."""
    from deepgym.sandbox.docker import OWNER_LABEL, owner_label

    result = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={OWNER_LABEL}={owner_label(os.getpid())}"],
                            capture_output=True, text=True, check=True)
    return result.stdout.split()


@pytest.fixture(scope="module")
def environments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """shell_find_largest's image and hello-world imported and built; per environment, a copy never built."""
    from deepgym.environments import load_environment
    from deepgym.images import build

    build([SHELL])
    with harbor_environments(tmp_path_factory.mktemp("harbor") / "envs", "hello-world") as names:
        assert names == [HARBOR]
        yield {name: dataclasses.replace(load_environment(name), id=f"{name}_unbuilt") for name in (SHELL, HARBOR)}


def scripted_trainer(base: type | None = None, **kwargs: Any) -> Any:
    """``base`` (DeepGymGRPOTrainer or a subclass) sampling the plan's turns instead of the random model's tokens (``_generate_single_turn``
    is the one method replaced). The first call has every rollout's prompt, in order; later ones carry each
    rollout's number in its earlier turns."""
    from trl_grpo_tiny import tiny_model, tiny_tokenizer

    from deepgym.integrations.trl import DeepGymGRPOTrainer

    class ScriptedTrainer(base or DeepGymGRPOTrainer):
        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            texts = self.processing_class.batch_decode(prompt_ids)
            first = not any("<tool_response>" in text for text in texts)
            out = []
            for index, text in enumerate(texts):
                rollout = index if first else int(re.findall(r"rollout (\d+)\n<tool_call>", text)[0])
                out.append(self.processing_class.encode(turn(rollout, text.count("<tool_response>")),
                                                        add_special_tokens=False))
            return out, None

    tokenizer = tiny_tokenizer(tools=True)
    return ScriptedTrainer(model=tiny_model(tokenizer, positions=8192), processing_class=tokenizer, **kwargs)


def grpo_args(output_dir: Path, batch: int) -> Any:
    from trl_grpo_tiny import grpo_config

    return grpo_config(str(output_dir), 1, per_device_train_batch_size=batch, max_completion_length=2048,
                       mask_truncated_completions=False, max_tool_calling_iterations=4, shuffle_dataset=False)


@pytest.fixture(autouse=True)
def quiet_trl(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL 1.16 warns that environment_factory is experimental (a warning is an error in this suite)."""
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def test_grpo_runs_shell_and_harbor_episodes_and_keeps_no_verdict_rollouts_out(environments, tmp_path):
    import torch
    from datasets import Dataset

    from deepgym.integrations.trl import DeepGymGRPOTrainer, kept_out, trl_rows
    from deepgym.integrations.trl_env import OVER, STOPPED, DeepGymShellEnv, DeepGymTerminalEnv

    seen: list[tuple[list[float | None], list[Any]]] = []
    batches: list[dict[str, Any]] = []

    class Recording(DeepGymGRPOTrainer):
        """Keeps each rollout's reward as TRL is about to read it, its messages, and the batch the loss sees."""

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            seen.append(([env.reward for env in self.environments], completions))
            assert my_containers() == []  # every episode was scored once read, and its container removed
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            batches.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in output.items()})
            return output

    trainer = scripted_trainer(Recording, args=grpo_args(tmp_path, 2 * GROUP), environment_factory=factories(environments),
                               train_dataset=Dataset.from_list(trl_rows([SHELL, HARBOR])))
    assert trainer.reward_func_names == ["DeepGymShellEnv", "DeepGymTerminalEnv"]
    assert [tool.__name__ for tool in trainer._env_tools[SHELL]] == ["bash"]
    assert sorted(tool.__name__ for tool in trainer._env_tools[HARBOR]) == ["run", "terminal"]
    kept_out.reset()
    trainer.train()

    assert trainer.state.global_step == 1 and len(seen) == 1
    rewards, completions = seen[0]
    assert rewards == EXPECTED
    assert [type(env) for env in trainer.environments] == [DeepGymShellEnv] * GROUP + [DeepGymTerminalEnv] * GROUP
    assert [env.outcome.error_type for env in trainer.environments] == [
        None, "wrong_answer", "image_missing", None, None, "wrong_answer", "image_missing", None]
    tool_says = [[m["content"] for m in messages if m["role"] == "tool"] for messages in completions]
    assert [len(said) for said in tool_says] == [len(plan) for plan in PLANS]  # every planned call ran
    assert tool_says[0][1] == tool_says[3][0] == "data/archive/2023/q4/report-final.csv\n"
    assert tool_says[2] == tool_says[6] == [STOPPED]
    assert tool_says[4][0].startswith("cd /") and tool_says[4][1].startswith("echo 'Hello, world!' > app/hello.txt")
    assert trainer.environments[0].bash("ls") == OVER  # the episode was scored: nothing more runs
    assert kept_out.snapshot()["by_error_type"] == {"image_missing": 2}

    # The no-verdict rollouts are out of the loss; each group's baseline comes from its three scored rollouts.
    batch = batches[0]
    masked = [i for i, reward in enumerate(EXPECTED) if reward is None]
    assert batch["deepgym_masked"].tolist() == [reward is None for reward in EXPECTED]
    mask, advantages = batch["completion_mask"], batch["advantages"]
    assert mask[masked].sum() == 0 and advantages[masked].abs().sum() == 0
    assert batch["num_items_in_batch"] == (mask * batch["tool_mask"]).sum()
    scores = torch.tensor([1.0, 0.0, 1.0])
    expected = (scores - scores.mean()) / (scores.std() + 1e-4)
    for group in (0, 1):
        assert torch.allclose(advantages[[group * GROUP + i for i in (0, 1, 3)]], expected, atol=1e-5)
    history = next(entry for entry in trainer.state.log_history if "loss" in entry)
    assert history["deepgym/kept_out"] == 2 / 8 and history["tools/call_frequency"] > 1
    assert history["rewards/DeepGymShellEnv/mean"] == pytest.approx(2 / 3)
    assert my_containers() == []


def test_a_training_run_that_fails_mid_rollout_leaves_no_container(environments, tmp_path):
    """The rewards are never read (another reward function raises): train() still removes every container."""
    from datasets import Dataset

    from deepgym.integrations.trl import trl_rows
    from deepgym.integrations.trl_env import make_trl_env_factory

    alive: list[list[str]] = []

    def broken_reward(completions: list[Any], **kwargs: Any) -> list[float]:
        alive.append(my_containers())
        raise RuntimeError("a reward function failed")

    trainer = scripted_trainer(args=grpo_args(tmp_path, GROUP), train_dataset=Dataset.from_list(trl_rows(SHELL)),
                               reward_funcs=[broken_reward], environment_factory=make_trl_env_factory(SHELL))
    with pytest.raises(RuntimeError, match="a reward function failed"):
        trainer.train()
    assert len(alive) == 1 and len(alive[0]) == GROUP  # the episodes were alive, unscored, when it failed
    assert all(env.outcome is None for env in trainer.environments)
    assert my_containers() == []


def test_an_episode_is_scored_once_and_its_container_removed_on_every_path(environments):
    import gc

    from deepgym.errors import ConfigurationError
    from deepgym.integrations.trl import trl_rows
    from deepgym.integrations.trl_env import OVER, DeepGymShellEnv, make_trl_env_factory

    row = trl_rows(SHELL)[0]
    env = make_trl_env_factory(SHELL, mode="docker")()
    assert env.reward is None and env.bash("ls").startswith("[no episode")  # nothing started yet
    env.reset(**row)
    first = my_containers()
    env.reset(**row)  # a pooled instance's next rollout: the last episode's container goes
    assert len(first) == 1 and len(my_containers()) == 1 and my_containers() != first
    env.bash(LARGEST)
    assert env.reward == 1.0 and my_containers() == []
    verdict = env.outcome
    assert env.get_reward() == 1.0 and env.outcome is verdict and env.bash("ls") == OVER
    env.reset(**row)
    del env  # dropped without its reward
    gc.collect()
    assert my_containers() == []

    # Without an environment, each row names it; the tools must fit its session, or reset refuses before any start.
    env = make_trl_env_factory(terminal=True, mode="docker")()
    env.reset(**trl_rows(HARBOR)[0])
    env.run("ls")
    assert env.reward == 0.0
    with pytest.raises(ConfigurationError, match="Fix: use DeepGymTerminalEnv"):
        DeepGymShellEnv(mode="docker").reset(**trl_rows(HARBOR)[0])
    with pytest.raises(ConfigurationError, match="terminal=True or False"):
        make_trl_env_factory()
    with pytest.raises(ConfigurationError, match="leave terminal unset"):
        make_trl_env_factory(HARBOR, terminal=False)
    assert my_containers() == []
