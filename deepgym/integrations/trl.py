"""deepgym as TRL's GRPO reward, and a ``GRPOTrainer`` that keeps samples without a verdict out of the loss.

TRL calls a reward function as ``f(prompts=..., completions=..., completion_ids=..., **dataset_columns)`` and
lets it return ``None`` for a sample it cannot score. :func:`make_trl_reward_fn` returns ``None`` exactly when
deepgym has no verdict (the engine is down, the image is missing, the verifier broke), never a 0.

TRL 1.16 leaves a sample out of its group's statistics only when *every* reward function returned ``None``;
with a second reward function (a format or length reward, DAPO's overlong punishment) the sample is trained on
with deepgym's part summed as 0 (``nansum``). Even when it is left out, its completion mask stays one, so its
tokens still count in the loss's normaliser and still carry the KL and entropy terms.
:class:`DeepGymGRPOTrainer` (built from :class:`DeepGymGRPOMixin` on first use) closes both gaps: a sample a
deepgym reward function returned ``None`` for is left out of its group's mean and standard deviation, its
completion mask goes to zero, and a group with fewer than two scored samples is masked whole. docs/trl.md
cites the TRL lines this changes. It does the same for a rollout whose deepgym environment
(:mod:`deepgym.integrations.trl_env`, TRL's ``environment_factory``) returned ``None`` from ``get_reward``, and
its ``train`` removes every such environment's container however it ends.

Nothing is imported from TRL or torch until :class:`DeepGymGRPOTrainer` is first used, so the reward
functions and :func:`generate_trl_dapo_config` work without them.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..accounting import NoVerdictMonitor
from ..errors import ConfigurationError
from ..row_sources import SOURCES, dataset_task, is_dataset_source
from ..rows import RowTask
from .verl import check_mode, get_client, get_environment, verl_rows

if TYPE_CHECKING:
    import torch

    from ..client import DeepGym, Outcome
    from ..environments import Environment

__all__ = ["DEEPGYM_REWARD_ATTR", "DeepGymGRPOMixin", "DeepGymGRPOTrainer",  # noqa: F822 - made by __getattr__
           "generate_trl_dapo_config", "kept_out", "make_trl_async_reward_fn", "make_trl_reward_fn", "trl_rows"]

log = logging.getLogger("deepgym.trl")

# Set on every reward function made here: the trainer reads a None from such a function as "no verdict".
DEEPGYM_REWARD_ATTR = "deepgym_reward"

# Samples the trainer kept out of the loss, per process (the client counts every no-verdict itself too).
kept_out = NoVerdictMonitor(what="had no verdict and were kept out of the loss")


# --------------------------------------------------------------------------------------------------------
# Rows


def trl_rows(names: str | Iterable[str], *, repeat: int = 1, variant: int | Sequence[int] = 0,
             conversational: bool = True) -> list[dict[str, Any]]:
    """Dataset rows for TRL: ``prompt`` (one user message, or the bare task text when ``conversational`` is
    False), ``environment`` and ``variant``. One dataset can mix environments; the reward function reads the
    environment per row. The same rows as :func:`~deepgym.integrations.verl.verl_rows`, flattened."""
    rows = []
    for row in verl_rows(names, repeat=repeat, variant=variant):
        info = row["extra_info"]
        prompt = row["prompt"] if conversational else row["prompt"][0]["content"]
        rows.append({"prompt": prompt, "environment": info["environment"], "variant": info["variant"]})
    return rows


# --------------------------------------------------------------------------------------------------------
# Reward functions


def _completion_text(completion: Any) -> str:
    """The text to judge: a plain completion as is; for a conversational one, the last assistant message
    (tool calls and tool results before it are not the answer)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion)):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            content = message.get("content") or ""
            if isinstance(content, str):
                return content
            return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    raise TypeError("a conversational completion needs an assistant message; got "
                    f"{[m.get('role') for m in completion if isinstance(m, Mapping)]}")


def _column(kwargs: Mapping[str, Any], key: str, n: int) -> list[Any]:
    values = kwargs.get(key)
    return list(values) if values is not None else [None] * n


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _truths(kwargs: Mapping[str, Any], n: int) -> list[Any]:
    """Each row's ``ground_truth``: its own column, else verl's ``reward_model.ground_truth``."""
    truths = _column(kwargs, "ground_truth", n)
    models = _column(kwargs, "reward_model", n)
    return [truth if not _missing(truth) else model.get("ground_truth") if isinstance(model, Mapping) else None
            for truth, model in zip(truths, models)]


class Scorer:
    """Judges a batch of TRL completions and turns the outcomes into TRL rewards and metrics."""

    def __init__(self, env: str | Environment | None, mode: str, dg: DeepGym | None, variant: int | None,
                 env_column: str, max_parallel: int | None, allow_local: bool | None):
        self.environment = get_environment(env) if env is not None else None
        self.mode = check_mode(mode)
        self.dg = dg
        self.variant = variant
        self.env_column = env_column
        self.max_parallel = max_parallel
        self.allow_local = allow_local
        self.name = f"deepgym_{self.environment.id}" if self.environment else "deepgym"

    def targets(self, n: int, kwargs: Mapping[str, Any]) -> tuple[list[str | Environment | RowTask], list[int]]:
        """Per sample: the environment (fixed, else the row's ``env_column``, else verl's ``extra_info`` /
        ``data_source``) and the variant (fixed, else the row's ``variant``, else ``extra_info``, else 0), or the
        row's own tests when its ``data_source`` names a row format (:mod:`deepgym.rows`)."""
        infos = [info if isinstance(info, Mapping) else {} for info in _column(kwargs, "extra_info", n)]
        columns = _column(kwargs, self.env_column, n)
        sources = _column(kwargs, "data_source", n)
        variants = _column(kwargs, "variant", n)
        truths = _truths(kwargs, n)
        envs: list[str | Environment | RowTask] = []
        chosen: list[int] = []
        for i in range(n):
            if not (self.environment or columns[i] or infos[i].get("environment")) and is_dataset_source(sources[i]):
                envs.append(dataset_task(sources[i], truths[i]))
                chosen.append(0)
                continue
            if not _missing(truths[i]) and truths[i] != "":
                raise ConfigurationError(f"ground_truth: the row carries tests, but it is judged in environment "
                                         f"{str(self.environment.id if self.environment else columns[i] or sources[i])!r}"
                                         f", whose hidden tests are in its image. Fix: leave ground_truth empty, or "
                                         f"name a row format as data_source (one of {', '.join(SOURCES)})")
            env = self.environment or columns[i] or infos[i].get("environment") or sources[i]
            if not env:
                raise ValueError(f"{self.name} needs the environment: pass env= or give the dataset an "
                                 f"{self.env_column!r} column (trl_rows writes one)")
            envs.append(env)
            variant = self.variant
            if variant is None:
                variant = next((int(v) for v in (variants[i], infos[i].get("variant")) if not _missing(v)), 0)
            chosen.append(variant)
        return envs, chosen

    def judge(self, completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Outcome]:
        texts = [_completion_text(c) for c in completions]
        envs, variants = self.targets(len(texts), kwargs)
        client = self.dg or get_client(self.mode, allow_local=self.allow_local)
        workers = max(1, min(self.max_parallel or client.max_parallel, len(texts)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deepgym-trl") as pool:
            return list(pool.map(lambda job: client.judge(job[0], job[1], variant=job[2]),
                                 zip(envs, texts, variants)))

    def rewards(self, outcomes: list[Outcome], kwargs: Mapping[str, Any]) -> list[float | None]:
        """Scores, ``None`` for no verdict; ``score``, ``passed`` and ``error`` (the fraction without a
        verdict) go to TRL's ``log_metric``, the error types to its completions table through ``log_extra``."""
        scored = [o for o in outcomes if o.has_verdict]
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        if log_metric is not None:
            if scored:
                log_metric(f"{self.name}/score", sum(o.score for o in scored) / len(scored))
                log_metric(f"{self.name}/passed", sum(1.0 for o in scored if o.passed) / len(scored))
            log_metric(f"{self.name}/error", (len(outcomes) - len(scored)) / max(1, len(outcomes)))
        if log_extra is not None:
            log_extra(f"{self.name}_error_type", [o.error_type or "" for o in outcomes])
        return [float(o.score) if o.has_verdict else None for o in outcomes]


def _named(fn: Callable[..., Any], scorer: Scorer) -> Callable[..., Any]:
    fn.__name__ = scorer.name  # TRL names the reward's metrics after it: rewards/deepgym_coin_change/mean
    fn.__qualname__ = scorer.name
    setattr(fn, DEEPGYM_REWARD_ATTR, True)
    return fn


def make_trl_reward_fn(env: str | Environment | None = None, *, mode: str = "auto", dg: DeepGym | None = None,
                       variant: int | None = None, env_column: str = "environment", max_parallel: int | None = None,
                       allow_local: bool | None = None) -> Callable[..., list[float | None]]:
    """A TRL reward function, ``reward_fn(completions, **dataset_columns) -> list[float | None]``.

    Each completion, plain text or a conversation (its last assistant message), is judged in ``env``, or, when
    ``env`` is None, in the environment its row names: the ``env_column`` column (``environment``, as
    :func:`trl_rows` writes), else verl's ``extra_info.environment`` or ``data_source``. The variant is
    ``variant``, else the row's. The result is the verdict's score, or ``None`` when there is no verdict: give
    the function to :class:`DeepGymGRPOTrainer` so that such a sample is kept out of the loss. Under TRL it also
    logs ``<name>/score``, ``<name>/passed`` and ``<name>/error`` (``name`` is the function's name,
    ``deepgym_<env>`` or ``deepgym``). A row whose ``data_source`` names a row format (``codecontests``,
    ``openai_humaneval``, ...; :mod:`deepgym.rows`) is judged against the tests in its ``ground_truth`` (or
    ``reward_model.ground_truth``); one that names an environment and still carries tests is refused
    (ConfigurationError), since it would be judged against other tests than its own.

    ``mode`` is any deepgym mode: ``auto`` (docker), ``docker``, a remote provider, ``ray`` (your Ray cluster's
    nodes judge, docs/ray.md) or ``local`` (``allow_local`` opts in); ``dg`` uses your own client.
    """
    scorer = Scorer(env, mode, dg, variant, env_column, max_parallel, allow_local)

    def reward_fn(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return scorer.rewards(scorer.judge(completions, kwargs), kwargs)

    return _named(reward_fn, scorer)


def make_trl_async_reward_fn(env: str | Environment | None = None, *, mode: str = "auto", dg: DeepGym | None = None,
                             variant: int | None = None, env_column: str = "environment",
                             max_parallel: int | None = None,
                             allow_local: bool | None = None) -> Callable[..., Any]:
    """:func:`make_trl_reward_fn` as a coroutine function, for TRL's async reward path: ``GRPOTrainer`` gathers
    its async reward functions on its event loop, so this one's containers run while the other async rewards
    wait. Judging happens in a worker thread, keeping the loop free; TRL's metrics are logged on the loop."""
    scorer = Scorer(env, mode, dg, variant, env_column, max_parallel, allow_local)

    async def reward_fn(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        outcomes = await asyncio.to_thread(scorer.judge, completions, kwargs)
        return scorer.rewards(outcomes, kwargs)

    return _named(reward_fn, scorer)


# --------------------------------------------------------------------------------------------------------
# DAPO


def generate_trl_dapo_config(*, epsilon: float = 0.2, epsilon_high: float = 0.28,
                             mask_truncated_completions: bool = True, num_generations: int = 16,
                             **overrides: Any) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments for DAPO: ``GRPOConfig(output_dir=..., **generate_trl_dapo_config())``.

    Sets ``loss_type="dapo"`` (token-level loss normalised by the active tokens of the whole batch),
    clip-higher (``epsilon_high`` above ``epsilon``), ``mask_truncated_completions`` (a cut-off completion adds
    no loss), no KL term (``beta=0``) and per-group reward scaling. ``overrides`` go through unchanged.

    TRL 1.16 has no dynamic sampling (it cannot generate more groups to refill a batch). Its stand-in is
    ``DeepGymGRPOTrainer(..., filter_groups=True)``, which masks every group whose scored samples all got the
    same reward, so it adds no tokens to the normaliser; the batch is smaller rather than refilled. DAPO's
    overlong punishment is TRL's ``trl.rewards.get_soft_overlong_punishment``, a second reward function.
    """
    if epsilon_high < epsilon:
        raise ValueError(f"clip-higher needs epsilon_high >= epsilon, got {epsilon_high} < {epsilon}")
    config = {"loss_type": "dapo", "epsilon": float(epsilon), "epsilon_high": float(epsilon_high),
              "mask_truncated_completions": bool(mask_truncated_completions), "beta": 0.0,
              "scale_rewards": "group", "num_generations": int(num_generations)}
    config.update(overrides)
    return config


# --------------------------------------------------------------------------------------------------------
# The trainer


class DeepGymGRPOMixin:
    """Put before ``GRPOTrainer`` (or your subclass of it) to keep samples without a verdict out of the loss.

    A sample is *kept out* when a deepgym reward function (one made by this module) returned ``None`` for it,
    when the deepgym environment that ran it (:mod:`deepgym.integrations.trl_env`) did, or when every reward
    function did. Then:

    - its rewards are set to NaN before TRL computes advantages, so its group's mean and standard deviation
      come from the samples with a verdict (TRL's nan-aware statistics) and its own advantage is 0;
    - its completion mask goes to zero and ``num_items_in_batch`` is recounted, so it adds no gradient (policy,
      KL or entropy term) and no tokens to the normaliser;
    - a group with fewer than two scored samples is masked whole: it has no baseline, so it has nothing to
      teach. With ``filter_groups=True`` (DAPO's dynamic sampling, as far as TRL allows) so is a group whose
      scored samples all got the same reward.

    Each kept-out sample is counted by :data:`kept_out`, which logs a warning when more than 5 of a block of 100
    had no verdict; the trainer's metrics gain ``deepgym/kept_out`` and ``deepgym/masked`` (fractions of the
    batch). The masked rows are in the batch as ``deepgym_masked`` (a bool per row).
    """

    def __init__(self, *args: Any, filter_groups: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.deepgym_filter_groups = filter_groups
        self._deepgym_masked: torch.Tensor | None = None
        # TRL adds one reward column per environment class with ``get_reward``, named after the class, None for
        # the rollouts of other classes (grpo_trainer.py:706-731): a deepgym environment's column.
        classes = {type(pool[0]) for pool in self._deepgym_pools()}
        ours = {cls.__name__ for cls in classes if getattr(cls, DEEPGYM_REWARD_ATTR, False)}
        names = getattr(self, "reward_func_names", [])
        self._deepgym_env_columns = [i for i, name in enumerate(names) if name in ours]

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """TRL's ``train``; then, however it ended, every deepgym environment's container is removed (a rollout
        whose reward was never read, because generation or another reward raised, still holds one)."""
        try:
            return super().train(*args, **kwargs)
        finally:
            for pool in self._deepgym_pools():
                for env in pool:
                    if getattr(type(env), DEEPGYM_REWARD_ATTR, False):
                        env._close()

    def _deepgym_pools(self) -> list[list[Any]]:
        """TRL's environment instances, one list per environment name (none without ``environment_factory``)."""
        return [pool for pool in (getattr(self, "_environment_pool", None) or {}).values() if pool]

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        import torch

        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        nan = torch.isnan(rewards_per_func)
        ours = [i for i, fn in enumerate(self.reward_funcs) if getattr(fn, DEEPGYM_REWARD_ATTR, False)]
        no_verdict = nan.all(dim=1)
        if ours:
            no_verdict |= nan[:, ours].any(dim=1)
        if self._deepgym_env_columns:  # a rollout a deepgym environment ran is None in its own column only
            ran = torch.tensor([int(getattr(type(env), DEEPGYM_REWARD_ATTR, False)) for env in self.environments],
                               device=nan.device)  # gathered as integers: not every backend gathers bools
            no_verdict |= self.accelerator.gather(ran).bool() & nan[:, self._deepgym_env_columns].all(dim=1)
        rewards_per_func = rewards_per_func.clone()
        rewards_per_func[no_verdict] = torch.nan  # TRL's "unscorable" row: out of the group statistics

        group = self.num_generations if self.model.training else self.num_generations_eval
        scored = (~no_verdict).view(-1, group)
        masked = scored.sum(dim=1) < 2
        if self.deepgym_filter_groups:
            weights = self.reward_weights.to(rewards_per_func.device)
            total = (rewards_per_func * weights).nansum(dim=1).view(-1, group)
            low = torch.where(scored, total, torch.inf).amin(dim=1)
            high = torch.where(scored, total, -torch.inf).amax(dim=1)
            masked |= low == high
        self._deepgym_masked = masked.repeat_interleave(group) | no_verdict
        start = self.accelerator.process_index * len(prompts)
        local = no_verdict[start:start + len(prompts)].tolist()
        error_types = self._deepgym_error_types(len(local))
        for none, error_type in zip(local, error_types):
            kept_out.record(none, error_type if none else None)
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["deepgym/kept_out"].append(no_verdict.float().mean().item())
        self._metrics[mode]["deepgym/masked"].append(self._deepgym_masked.float().mean().item())
        return rewards_per_func

    def _deepgym_error_types(self, n: int) -> list[str]:
        """This process's no-verdict types, from the column a deepgym reward function logged through TRL's
        ``log_extra`` for this batch (not flushed yet), else from the outcomes of this batch's deepgym
        environments; ``unknown`` for a sample no deepgym function or environment judged."""
        for column, values in getattr(self, "_pending_extra_logs", {}).items():
            if column.startswith("deepgym") and column.endswith("_error_type") and len(values) == n:
                return [str(value or "unknown") for value in values]
        environments = getattr(self, "environments", None) or []
        if len(environments) == n:
            return [getattr(getattr(env, "outcome", None), "error_type", None) or "unknown" for env in environments]
        return ["unknown"] * n

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        local = output["completion_mask"].size(0)
        start = self.accelerator.process_index * local
        masked = self._deepgym_masked[start:start + local].to(output["completion_mask"].device)
        self._deepgym_masked = None
        keep = (~masked).unsqueeze(1).to(output["completion_mask"].dtype)
        output["completion_mask"] = output["completion_mask"] * keep
        output["advantages"] = output["advantages"] * keep.squeeze(1).to(output["advantages"].dtype)
        loss_mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            loss_mask = loss_mask * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        output["deepgym_masked"] = masked
        if masked.any():
            log.info("deepgym: %d of %d samples masked out of the loss (no verdict, or a group with fewer than "
                     "two scored samples)", int(masked.sum()), local)
        return output


_TRAINER: type | None = None


def __getattr__(name: str) -> Any:
    """``DeepGymGRPOTrainer`` is built on first use, so importing this module does not import TRL or torch."""
    global _TRAINER
    if name != "DeepGymGRPOTrainer":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _TRAINER is None:
        from trl import GRPOTrainer

        _TRAINER = type("DeepGymGRPOTrainer", (DeepGymGRPOMixin, GRPOTrainer), {
            "__module__": __name__,
            "__doc__": "TRL's ``GRPOTrainer`` with :class:`DeepGymGRPOMixin`: samples without a verdict are kept "
                       "out of the loss and of their group's statistics. Extra argument: ``filter_groups``."})
    return _TRAINER
