"""TRL's GRPOTrainer really trains a tiny model on the CPU for two steps on coin_change prompts, scored by
deepgym in real containers, and a sample without a verdict adds nothing to the loss or the gradient.

The model is random, so the reward function is wrapped to append a known answer to each completion by its
index in the batch: per step two groups of four,

    group 0: right, wrong, NO VERDICT, right    -> three scored samples: trained on, statistics from those three
    group 1: wrong, NO VERDICT x3               -> one scored sample: no baseline, masked whole

The no-verdict samples are real ones: their rows name an environment whose image was never built, so the engine
answers image_missing. The step is then recomputed by hand with the masked samples removed from the batch.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
from typing import Any

import pytest
from support import ROOT  # tests/trl/conftest.py puts examples/ on sys.path

pytestmark = [pytest.mark.trl, pytest.mark.docker]

STEPS = 2
GROUP = 4
# Per batch index: the answer appended to the completion, and whether its row is pointed at the unbuilt image.
PLAN = [("reference", False), ("wrong_greedy", False), ("reference", True), ("reference", False),
        ("wrong_greedy", False), ("reference", True), ("reference", True), ("reference", True)]
EXPECTED_REWARDS = [1.0, 0.0, None, 1.0, 0.0, None, None, None]
SCORED = [0, 1, 3]  # the only rows the loss may see
MASKED = [2, 4, 5, 6, 7]


def answer(name: str) -> str:
    code = next((ROOT / "environments" / "coin_change" / "solutions").glob(f"{name}.*")).read_text()
    return f"\n\nHere is the solution.\n\n```python\n{code}\n```\n"


def scripted(reward_fn, unbuilt: str, seen: list[list[float | None]]):
    """``reward_fn`` judging each completion with the plan's answer appended (the last fenced block is judged),
    and the planned rows pointed at the unbuilt environment. TRL sees the wrapper under reward_fn's name."""

    @functools.wraps(reward_fn)
    def wrapper(completions: list[Any], **kwargs: Any) -> list[float | None]:
        assert len(completions) == len(PLAN)
        planned = [[{"role": "assistant", "content": c[-1]["content"] + answer(name)}]
                   for c, (name, _) in zip(completions, PLAN)]
        environments = [unbuilt if broken else env for env, (_, broken) in zip(kwargs["environment"], PLAN)]
        rewards = reward_fn(planned, **{**kwargs, "environment": environments})
        seen.append(rewards)
        return rewards

    return wrapper


def rows(batch: dict[str, Any], keep: list[int]) -> dict[str, Any]:
    """The batch with only the rows ``keep``, as if the others had never been generated."""
    import torch

    index = torch.tensor(keep)
    out = {key: value[index] if isinstance(value, torch.Tensor) and value.ndim else value
           for key, value in batch.items()}
    out["num_items_in_batch"] = out["completion_mask"].sum()
    return out


def gradient(trainer, batch: dict[str, Any]) -> tuple[float, Any]:
    import torch

    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, batch)
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
    trainer.model.zero_grad()
    return loss.item(), grads


def same(a, b) -> bool:
    """Equal up to float32 rounding: a batch of 3 rows sums in another order than a batch of 8."""
    return (a - b).abs().max().item() <= 1e-4 * a.abs().max().item()


def test_two_grpo_steps_keep_no_verdict_samples_out_of_the_loss(coin_change_image, unbuilt_environment, tmp_path,
                                                                  caplog):
    import torch
    from datasets import Dataset
    from trl_grpo_tiny import grpo_config, tiny_model, tiny_tokenizer

    from deepgym.integrations.trl import DeepGymGRPOTrainer, kept_out, make_trl_reward_fn, trl_rows

    batches: list[dict[str, Any]] = []

    class RecordingTrainer(DeepGymGRPOTrainer):
        """Keeps each generation batch as the loss will see it (before TRL shuffles it)."""

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            batches.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in output.items()})
            return output

    seen: list[list[float | None]] = []
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer)
    initial = copy.deepcopy(model.state_dict())
    # mask_truncated_completions off: the random model's completions all run to the length limit, and the test
    # is about the samples without a verdict, not about truncation.
    args = grpo_config(str(tmp_path), STEPS, mask_truncated_completions=False)
    assert args.loss_type == "dapo" and args.epsilon_high == 0.28 and args.num_generations == GROUP
    reward_fn = make_trl_reward_fn(mode="docker")
    trainer = RecordingTrainer(model=model, processing_class=tokenizer, args=args,
                               train_dataset=Dataset.from_list(trl_rows("coin_change", repeat=2 * STEPS)),
                               reward_funcs=[scripted(reward_fn, unbuilt_environment, seen)])
    kept_out.reset()
    with caplog.at_level(logging.WARNING, logger="deepgym"):
        trainer.train()

    # Both steps ran, on real verdicts and real no-verdicts.
    assert trainer.state.global_step == STEPS and len(batches) == STEPS
    assert seen == [EXPECTED_REWARDS] * STEPS
    assert kept_out.snapshot()["by_error_type"] == {"image_missing": 4 * STEPS}
    warning = next(r.getMessage() for r in caplog.records if "kept out of the loss" in r.getMessage())
    assert "image_missing x6" in warning and "6 of the last 14 samples" in warning
    history = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["deepgym/kept_out"] for entry in history] == [4 / 8] * STEPS
    assert [entry["deepgym/masked"] for entry in history] == [5 / 8] * STEPS
    assert [entry["deepgym/error"] for entry in history] == [4 / 8] * STEPS
    assert [entry["deepgym/score"] for entry in history] == [0.5] * STEPS  # right, wrong, right, wrong

    for batch in batches:
        mask, advantages = batch["completion_mask"], batch["advantages"]
        # The masked rows: no tokens, no advantage, and none of their tokens in the normaliser.
        assert batch["deepgym_masked"].tolist() == [i in MASKED for i in range(8)]
        assert mask[MASKED].sum() == 0 and advantages[MASKED].abs().sum() == 0
        assert mask[SCORED].sum(dim=1).min() > 0
        assert batch["num_items_in_batch"] == mask.sum()
        # Group 0's baseline comes from its three scored samples only (TRL's Bessel-corrected std).
        scores = torch.tensor([1.0, 0.0, 1.0])
        expected = (scores - scores.mean()) / (scores.std() + 1e-4)
        assert torch.allclose(advantages[SCORED], expected, atol=1e-5)

    # Step 1 recomputed at the weights it started from: the loss TRL logged, and the same loss and gradient with
    # the masked samples removed by hand.
    trainer.model.load_state_dict(initial)
    trainer.model.train()
    full_loss, full_grad = gradient(trainer, batches[0])
    assert math.isclose(full_loss, history[0]["loss"], rel_tol=1e-3, abs_tol=1e-6)
    removed_loss, removed_grad = gradient(trainer, rows(batches[0], SCORED))
    assert full_grad.abs().sum() > 0
    assert math.isclose(full_loss, removed_loss, rel_tol=1e-5, abs_tol=1e-7)
    assert same(full_grad, removed_grad)

    # What stock TRL does with the same batch: the no-verdict sample keeps its mask (advantage 0, tokens counted
    # in the normaliser), which changes the gradient of every scored sample.
    stock = dict(batches[0])
    stock["completion_mask"] = batches[0]["completion_mask"].clone()
    stock["completion_mask"][2] = batches[0]["completion_mask"][0]
    stock["num_items_in_batch"] = stock["completion_mask"].sum()
    _, stock_grad = gradient(trainer, stock)
    assert not same(stock_grad, full_grad)
