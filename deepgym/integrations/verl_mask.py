"""verl's single-turn agent loop, scored by deepgym, which keeps a sample without a verdict out of training.

A reward function cannot tell verl "this sample has no score". An agent loop can: it scores its own sample
(verl then skips its reward step, because ``reward_score`` is already set) and decides what happens to a
sample without a verdict:

- v1 trainer (``trainer.use_v1: true``, verl's default): the loop raises, so verl drops the sample and marks
  its prompt group as failed; the group's statistics come from the other samples.
- legacy trainer (``trainer.use_v1: false``, or no ``trainer.use_v1`` key): the loop sets the sample's
  ``response_mask`` to zeros and its reward extra info to ``error: 1.0``. The sample then adds no gradient and
  no tokens to the loss, though its reward of 0 still enters its group's mean and standard deviation.

Every sample with a verdict is scored and trained on, including the ones the model got wrong in any way
(wrong answer, no code block, a timeout, and a patch that is malformed, does not apply or touches the tests).

Use it with the YAML shipped next to this module::

    actor_rollout_ref.rollout.agent.agent_loop_config_path=$(deepgym verl agent-loop-config)
    actor_rollout_ref.rollout.agent.default_agent_loop=deepgym_single_turn

This module imports verl; :mod:`deepgym.integrations.verl` does not.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
from verl.trainer.ppo.reward import get_custom_reward_fn

from ..extract import check_reasoning
from ..verdict import NoVerdictError
from . import verl as dgverl
from .verl import AGENT_LOOP_NAME, VerlNoVerdictError, kept_out

__all__ = ["DeepGymSingleTurnAgentLoop", "kept_out", "kept_out_count"]

log = logging.getLogger("deepgym.verl")

_V1_ADVICE = (f"{AGENT_LOOP_NAME} raised it because verl's v1 trainer (trainer.use_v1=true) drops a sample "
              "whose agent loop raises: the sample is kept out of training and its prompt group's statistics "
              "come from the other samples")

_reward_fns: dict[str, Callable[..., Any]] = {}
_reward_fns_lock = threading.Lock()


def kept_out_count() -> int:
    """How many samples this process has kept out of training so far (see ``kept_out.snapshot()``)."""
    return kept_out.snapshot()["no_verdict"]


def _reward_function(config: Any, mode: str, reasoning: str | None) -> Callable[..., Any]:
    """``reward.custom_reward_function`` loaded the way verl loads it (once per process and setting), or
    deepgym's compute_score with ``mode``; either is called with ``reasoning`` when the loop sets it. deepgym's
    own compute_score is called as its async twin (:func:`~deepgym.integrations.verl.acompute_score`)."""
    reward = config.get("reward") or {}
    custom = reward.get("custom_reward_function") or {}
    if not custom.get("path"):
        return functools.partial(dgverl.acompute_score, mode=mode, reasoning=reasoning or "auto")
    key = repr(OmegaConf.to_container(custom, resolve=True) if OmegaConf.is_config(custom) else custom)
    with _reward_fns_lock:
        fn = _reward_fns.get(key)
        if fn is None:
            fn = _reward_fns[key] = _async_twin(get_custom_reward_fn(config))
    # verl merges reward_kwargs over the call's keywords, so a reasoning in reward_kwargs still wins.
    return fn if reasoning is None else functools.partial(fn, reasoning=reasoning)


def _async_twin(fn: Callable[..., Any]) -> Callable[..., Any]:
    """deepgym's compute_score as verl wraps it (``partial(call, compute_score, reward_kwargs)``) becomes
    acompute_score with the same reward_kwargs, merged over the call's keywords as verl merges them; any other
    function is left as it is."""
    if not (isinstance(fn, functools.partial) and len(fn.args) == 2 and fn.args[0] is dgverl.compute_score):
        return fn
    reward_kwargs = dict(fn.args[1])

    async def acompute_score(**call: Any) -> Any:
        return await dgverl.acompute_score(**{**call, **reward_kwargs})

    return acompute_score


def _uses_v1(config: Any) -> bool:
    trainer = config.get("trainer") or {}
    return bool(trainer.get("use_v1", False))


@register(AGENT_LOOP_NAME)
class DeepGymSingleTurnAgentLoop(SingleTurnAgentLoop):
    """verl's ``SingleTurnAgentLoop`` that sets ``reward_score`` itself and keeps unjudged samples out.

    Args:
        mode: the deepgym mode used when no ``reward.custom_reward_function`` is configured
            (``auto``, ``docker`` or ``local``).
        reasoning: ``open`` when the chat template puts ``<think>`` in the prompt (DeepSeek-R1, Qwen3), so a
            response without ``</think>`` has no answer; ``auto`` otherwise (see :mod:`deepgym.extract`).
            When set, it is passed to the reward function too (a custom one must accept it); a
            ``reasoning`` in ``reward_kwargs`` takes precedence. ``None`` (the default) leaves it to the
            reward function, whose own default is ``auto``.
    """

    def __init__(self, *args: Any, mode: str = "auto", reasoning: str | None = None, **kwargs: Any):
        dgverl.check_mode(mode)
        if reasoning is not None:
            check_reasoning(reasoning)
        super().__init__(*args, **kwargs)
        self.mode = mode
        self.reasoning = reasoning
        self.reward_fn = _reward_function(self.config, mode, reasoning)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        output = await super().run(sampling_params, **kwargs)
        await self.score(output, kwargs)
        return output

    async def score(self, output: AgentLoopOutput, row: dict[str, Any]) -> None:
        """Score ``output`` for its dataset ``row``; on no verdict, raise (v1) or mask (legacy)."""
        solution_str = await self.loop.run_in_executor(
            None, lambda: self.tokenizer.decode(output.response_ids, skip_special_tokens=True))
        reward_model = row.get("reward_model")
        ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
        call = {"data_source": row.get("data_source"), "solution_str": solution_str, "ground_truth": ground_truth,
                "extra_info": dict(row.get("extra_info") or {})}
        try:
            result = await self._call_reward(call)
        except NoVerdictError as exc:
            self._keep_out(output, exc)
            return
        info = dgverl.reward_info(result)
        kept_out.record(False)
        output.reward_score = info["score"]
        output.extra_fields["reward_extra_info"] = info

    async def _call_reward(self, call: dict[str, Any]) -> Any:
        fn = self.reward_fn
        if inspect.iscoroutinefunction(fn):
            return await fn(**call)
        return await self.loop.run_in_executor(None, lambda: fn(**call))

    def _keep_out(self, output: AgentLoopOutput, exc: NoVerdictError) -> None:
        keep_out(output, exc, config=self.config, advice=_V1_ADVICE, what="sample")


def keep_out(output: AgentLoopOutput, exc: NoVerdictError, *, config: Any, advice: str, what: str) -> None:
    """Keep a sample without a verdict out of training: raise under verl's v1 trainer (it drops the sample),
    mask it under the legacy one (a zero response mask, reward extra info ``error: 1.0``). Counted either way."""
    kept_out.record(True, exc.error_type)
    if _uses_v1(config):
        raise VerlNoVerdictError.wrap(exc, advice=advice) from exc
    output.response_mask = [0] * len(output.response_mask)
    output.reward_score = 0.0
    output.extra_fields["reward_extra_info"] = {"score": 0.0, "passed": 0.0, "error": 1.0,
                                                "error_type": exc.error_type, "provenance": ""}
    log.warning("deepgym: no verdict (%s), so this %s's response mask is zeroed and it is not trained on: %s",
                exc.error_type, what, exc.reason)
