"""deepgym as verl's reward: dataset rows, the reward function verl loads, and helpers for custom loops.

Nothing here imports verl, so the rows can be written on a machine without it. The agent loop that keeps a
sample without a verdict out of training lives in :mod:`deepgym.integrations.verl_mask`.

verl loads the reward function from the package::

    reward:
      custom_reward_function:
        path: pkg://deepgym.integrations.verl
        name: compute_score
        reward_kwargs: {mode: docker}       # and reasoning: open when the chat template opens <think>

(``name: acompute_score`` is the same function as a coroutine, which verl awaits instead of giving each
sample a thread.)

Every call returns the same five keys, all of which verl copies into its reward extra info:

``score``       the verdict's score in [0, 1]
``passed``      1.0 when every hidden case passed, else 0.0
``error``       0.0: the sample was judged. Only the agent loop ever reports 1.0, for a sample it kept out of
                training because it had no verdict (``compute_score`` raises instead)
``error_type``  why a judged sample lost points (``wrong_answer``, ``no_code_block``, ``solution_timeout``...),
                "" when it passed; for a kept-out sample, the no-verdict type (``image_missing``...). It is a
                string, so verl's metrics skip it, but it is in the rollout and validation dumps
``provenance``  the verdict's provenance as a JSON string (what ``deepgym replay`` needs with the response),
                "" for a sample deepgym did not judge

A sample without a verdict raises :class:`VerlNoVerdictError` (a :class:`~deepgym.verdict.NoVerdictError`),
never a 0: verl has no way for a reward function to mark a sample unscored.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..accounting import NoVerdictMonitor
from ..extract import check_reasoning
from ..row_sources import dataset_task, is_dataset_source
from ..rows import RowTask
from ..sandbox import MODES
from ..verdict import NoVerdictError

if TYPE_CHECKING:
    from ..client import DeepGym
    from ..environments import Environment

__all__ = ["REWARD_KEYS", "VerlNoVerdictError", "acompute_score", "agent_loop_config_path",
           "check_mode", "compute_score", "get_client", "get_environment", "kept_out", "make_verl_compute_score",
           "make_verl_reward_fn", "reset_clients", "reward_info", "verl_rows"]

log = logging.getLogger("deepgym.verl")

REWARD_KEYS = ("score", "passed", "error", "error_type", "provenance")
AGENT_LOOP_NAME = "deepgym_single_turn"
# The multi-turn loop for session environments (deepgym.integrations.verl_tool) and its tool's default name.
SESSION_AGENT_NAME = "deepgym_agent"
SESSION_TOOL_NAME = "shell"
# The session tool's name for desktop environments: the ``computer`` action set (deepgym.runner.episode.computer).
COMPUTER_TOOL_NAME = "computer"


def agent_loop_config_path() -> str:
    """Absolute path of the agent-loop YAML shipped in the package, for
    ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` (verl does not resolve ``pkg://`` there)."""
    return str(Path(__file__).resolve().with_name("agent_loops.yaml"))


def session_tool_config_path() -> str:
    """Absolute path of the session tool's YAML shipped in the package, for
    ``actor_rollout_ref.rollout.multi_turn.tool_config_path``."""
    return str(Path(__file__).resolve().with_name("session_tool.yaml"))


def computer_tool_config_path() -> str:
    """Absolute path of the packaged tool YAML for desktop environments (the ``computer`` action set)."""
    return str(Path(__file__).resolve().with_name("computer_tool.yaml"))


_REWARD_ADVICE = (
    "verl gives a reward function no way to mark a sample unscored, so deepgym raises instead of returning a 0. "
    "Under verl's v1 trainer (trainer.use_v1=true, the default) the raise drops only this sample: verl marks "
    "its prompt group as failed and computes the group's statistics from the other samples. Under the legacy "
    "trainer (trainer.use_v1=false) the raise stops the training step. To keep such samples out of training "
    "without stopping, let deepgym's agent loop score them: set "
    "actor_rollout_ref.rollout.agent.agent_loop_config_path to the file `deepgym verl agent-loop-config` "
    f"prints, and actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_LOOP_NAME}; under the legacy "
    "trainer it then zeroes the sample's response mask and logs error 1.0.")


class VerlNoVerdictError(NoVerdictError):
    """A :class:`~deepgym.verdict.NoVerdictError` whose message also says what verl does with it.

    ``reason`` stays the infrastructure's reason; ``advice`` is the verl part."""

    def __init__(self, error_type: str, reason: str, *, environment: str | None = None,
                 runtime: str | None = None, variant: int = 0, advice: str = _REWARD_ADVICE):
        super().__init__(error_type, reason, environment=environment, runtime=runtime, variant=variant)
        self.advice = advice
        self.args = (f"{self.args[0]}. {advice}",)

    def __str__(self) -> str:
        return self.args[0]

    @classmethod
    def wrap(cls, error: NoVerdictError, advice: str = _REWARD_ADVICE) -> VerlNoVerdictError:
        """The same failure as ``error`` with verl's advice in the message."""
        return cls(error.error_type, error.reason, environment=error.environment, runtime=error.runtime,
                   variant=error.variant, advice=advice)


# --------------------------------------------------------------------------------------------------------
# Per-process reuse: one client per mode, one Environment per name. verl calls the reward function from a
# thread pool in each reward worker (a Ray actor, i.e. its own process), so both caches take a lock. A forked
# child starts with fresh caches rather than sharing its parent's engine connections.

_lock = threading.Lock()
_owner_pid = os.getpid()
_clients: dict[tuple[str, bool | str | None], DeepGym] = {}
_environments: dict[str, Environment] = {}


def check_mode(mode: str) -> str:
    """``mode`` if deepgym can run it; else a ValueError naming the modes that exist."""
    if mode in MODES:
        return mode
    raise ValueError(f"unknown mode {mode!r}. Available modes: {', '.join(MODES)}.")


def _fresh_after_fork() -> None:
    global _owner_pid
    if os.getpid() != _owner_pid:
        _clients.clear()
        _environments.clear()
        _owner_pid = os.getpid()


def get_client(mode: str = "auto", *, allow_local: bool | None = None, docker_host: str | None = None) -> DeepGym:
    """This process's client for ``mode`` (and, for docker, the engine ``docker_host`` names), created on first
    use and shared by every thread."""
    check_mode(mode)
    key = (mode, allow_local if mode == "local" else docker_host)
    with _lock:
        _fresh_after_fork()
        client = _clients.get(key)
        if client is None:
            from ..client import DeepGym

            client = _clients[key] = DeepGym(mode=mode, allow_local=allow_local, docker_host=docker_host)
        return client


def get_environment(name: str | Environment) -> Environment:
    """The environment ``name``, loaded once per process."""
    from ..environments import Environment, load_environment

    if isinstance(name, Environment):
        return name
    with _lock:
        _fresh_after_fork()
        env = _environments.get(name)
    if env is None:
        env = load_environment(name)
        with _lock:
            env = _environments.setdefault(name, env)
    return env


def reset_clients() -> None:
    """Close and forget this process's clients and environments; the next call makes new ones. Use it after
    changing what selects the engine (``DOCKER_HOST``, say) in a running process."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
        _environments.clear()
    for client in clients:
        try:
            client.close()
        except Exception:  # noqa: BLE001 - closing is best effort; the provider's reaper removes leftovers
            log.debug("closing a deepgym client failed", exc_info=True)


# Samples the agent loop kept out of training, per process (the client counts every no-verdict itself).
kept_out = NoVerdictMonitor(what="had no verdict and were kept out of training")


# --------------------------------------------------------------------------------------------------------
# Rows


def verl_rows(names: str | Iterable[str], *, repeat: int = 1, variant: int | Sequence[int] = 0,
              split: str = "train", ability: str = "coding", agent_name: str | None = None) -> list[dict[str, Any]]:
    """verl dataset rows, one per environment (and variant), repeated ``repeat`` times.

    Each row names its own environment (``extra_info.environment``), so one dataset can mix environments,
    and repeating an environment trains on it more often. Fields: ``data_source`` (the environment),
    ``prompt`` (one user message), ``ability``, ``reward_model`` (``style: rule``; the ground truth stays
    in the image, so it is empty), ``extra_info`` (``split``, ``index``, ``environment``, ``variant``) and,
    when ``agent_name`` is given, ``agent_name`` (e.g. ``deepgym_single_turn``) to pick the agent loop per row.
    A ``session`` environment's row is a multi-turn episode: its ``agent_name`` is always ``deepgym_agent``
    (``agent_name`` applies to the single-turn rows), and ``extra_info.tools_kwargs.shell.create_kwargs`` names
    its environment and variant for the session tool. In a file mixing both, give the single-turn rows
    ``agent_name`` too, so that every row names its loop.
    """
    names = [names] if isinstance(names, str) else list(names)
    variants = [variant] if isinstance(variant, numbers.Integral) else list(variant)
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    if not names:
        raise ValueError("verl_rows needs at least one environment name")
    envs = [get_environment(name) for name in names]
    rows: list[dict[str, Any]] = []
    for _ in range(repeat):
        for env in envs:
            for var in variants:
                row: dict[str, Any] = {
                    "data_source": env.id,
                    "prompt": [{"role": "user", "content": env.prompt}],
                    "ability": ability,
                    "reward_model": {"style": "rule", "ground_truth": ""},
                    "extra_info": {"split": split, "index": len(rows), "environment": env.id, "variant": int(var)},
                }
                if env.kind in ("session", "desktop"):  # a multi-turn episode: the tool starts it with these settings
                    tool = COMPUTER_TOOL_NAME if env.kind == "desktop" else SESSION_TOOL_NAME
                    row["agent_name"] = SESSION_AGENT_NAME
                    row["extra_info"]["tools_kwargs"] = {
                        tool: {"create_kwargs": {"environment": env.id, "variant": int(var)}}}
                if env.kind == "desktop":  # the variant's parameters are in its prompt
                    from ..session.desktop import task_text

                    row["prompt"] = [{"role": "user", "content": task_text(env, int(var))}]
                elif agent_name is not None:
                    row["agent_name"] = agent_name
                rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------------------
# Reward functions


def _environment_and_variant(data_source: Any, extra_info: Any) -> tuple[str, int]:
    info = extra_info if isinstance(extra_info, Mapping) else {}
    name = info.get("environment") or data_source
    if not name:
        raise ValueError("compute_score needs the environment: a data_source or extra_info['environment']")
    variant = info.get("variant")
    if variant is None or (isinstance(variant, float) and math.isnan(variant)):  # a missing value from parquet
        variant = 0
    return str(name), int(variant)


def reward_info(result: Any) -> dict[str, Any]:
    """A reward function's result (a dict with ``score``, or a number) as deepgym's five keys."""
    if isinstance(result, Mapping):
        score = float(result["score"])
        passed = result.get("passed")
        error_type = result.get("error_type")
    else:
        score, passed, error_type = float(result), None, None
    passed = float(bool(passed)) if passed is not None else float(score >= 1.0)
    return {"score": score, "passed": passed, "error": 0.0, "error_type": str(error_type or ""), "provenance": ""}


def _judge(env: str | Environment | RowTask, solution_str: str, variant: int, client: DeepGym,
           reasoning: str, isolation: str | None = None) -> dict[str, Any]:
    task = env if isinstance(env, RowTask) else get_environment(env)
    return _reward(client.judge(task, str(solution_str), variant=variant, reasoning=reasoning, isolation=isolation))


def _reward(outcome: Any) -> dict[str, Any]:
    """A reward function's five keys for an outcome; raises VerlNoVerdictError when it has no verdict."""
    if not outcome.has_verdict:
        raise VerlNoVerdictError.wrap(outcome)
    return {"score": float(outcome.score), "passed": 1.0 if outcome.passed else 0.0, "error": 0.0,
            "error_type": outcome.error_type or "", "provenance": json.dumps(outcome.provenance, sort_keys=True)}


def _target(data_source: Any, ground_truth: Any, extra_info: Any, kwargs: Mapping[str, Any]
            ) -> tuple[str | RowTask, int]:
    """What a row is judged in, and its variant: the row's own tests for a row format, else its environment."""
    if not (isinstance(extra_info, Mapping) and extra_info.get("environment")) and is_dataset_source(data_source):
        return dataset_task(data_source, ground_truth, kwargs), 0
    return _environment_and_variant(data_source, extra_info)


def compute_score(data_source: Any, solution_str: str, ground_truth: Any = None, extra_info: Any = None,
                  mode: str = "auto", allow_local: bool | None = None, reasoning: str = "auto",
                  docker_host: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """verl's reward function: judge ``solution_str`` in the row's environment, or against the row's own tests.

    A row whose ``data_source`` names a row format (``codecontests``, ``apps``, ``codeforces``, ``taco``,
    ``openai_humaneval``, ``mbpp``, deepgym's ``stdin_stdout``...; see :mod:`deepgym.rows`) is judged against
    the tests in its ``ground_truth``, with ``scoring`` and limits from ``reward_kwargs``. Any other row names
    an environment: ``extra_info['environment']`` (else ``data_source``), variant ``extra_info['variant']``
    (else 0), and ``ground_truth`` is ignored (the hidden tests live in the environment's image). The
    submission is extracted by :mod:`deepgym.extract`'s rules (the last fenced block of the answer after the
    reasoning). ``mode`` (and, for ``local``, ``allow_local``; for ``docker`` or ``auto``, ``docker_host``: the
    engine as DOCKER_HOST spells it, ``tcp://`` or ``ssh://``) and ``reasoning`` (``auto``, or ``open`` when
    the chat template puts ``<think>`` in the prompt, as DeepSeek-R1's and Qwen3's do) come from
    ``reward_kwargs``, and so does ``isolation`` (``process`` for warm containers, docs/warm.md; default the
    environment's); other keyword arguments verl passes (``reward_router_address``...) are ignored.

    Returns ``{score, passed, error, error_type}`` (see the module's docstring). Raises
    :class:`VerlNoVerdictError` when there is no verdict, :class:`~deepgym.errors.ConfigurationError` for a
    malformed ``ground_truth`` (naming the field; counted in :data:`deepgym.rows.malformed_rows`), and
    ValueError for an unknown mode or reasoning.
    """
    target, variant = _target(data_source, ground_truth, extra_info, kwargs)
    client = get_client(mode, allow_local=allow_local, docker_host=docker_host)
    return _judge(target, solution_str, variant, client, reasoning, kwargs.get("isolation"))


async def acompute_score(data_source: Any, solution_str: str, ground_truth: Any = None, extra_info: Any = None,
                         mode: str = "auto", allow_local: bool | None = None, reasoning: str = "auto",
                         docker_host: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """:func:`compute_score` as a coroutine, with the same arguments and results. verl awaits an async reward
    function on its reward worker's event loop instead of calling it in a thread
    (``reward.custom_reward_function.name: acompute_score``), so a sample waiting for its admission slot holds
    no thread of verl's (:mod:`deepgym.aio`); deepgym's agent loops use it too."""
    target, variant = _target(data_source, ground_truth, extra_info, kwargs)
    client = get_client(mode, allow_local=allow_local, docker_host=docker_host)
    task = target if isinstance(target, RowTask) else get_environment(target)
    return _reward(await client.ajudge(task, str(solution_str), variant=variant, reasoning=reasoning,
                                           isolation=kwargs.get("isolation")))


def make_verl_compute_score(env: str | Environment, *, mode: str = "auto", dg: DeepGym | None = None,
                            variant: int | None = None, reasoning: str = "auto") -> Callable[..., dict[str, Any]]:
    """A verl reward function bound to one environment, for a reward module of your own::

        compute_score = make_verl_compute_score("coin_change")

    It ignores the row's environment, takes the variant from ``variant`` or else the row, and otherwise
    behaves like :func:`compute_score` (a ``mode`` or ``reasoning`` in ``reward_kwargs`` overrides the one
    given here; ``dg`` uses your own client instead of the shared one)."""
    environment = get_environment(env)
    check_mode(mode)
    check_reasoning(reasoning)

    def bound_compute_score(data_source: Any = None, solution_str: str = "", ground_truth: Any = None,
                            extra_info: Any = None, **kwargs: Any) -> dict[str, Any]:
        chosen = variant
        if chosen is None:
            chosen = _environment_and_variant(environment.id, extra_info)[1]
        client = dg or get_client(kwargs.get("mode", mode), allow_local=kwargs.get("allow_local"),
                                  docker_host=kwargs.get("docker_host"))
        return _judge(environment, solution_str, chosen, client, kwargs.get("reasoning", reasoning),
                      kwargs.get("isolation"))

    bound_compute_score.__name__ = "compute_score"
    bound_compute_score.__qualname__ = f"make_verl_compute_score({environment.id!r})"
    return bound_compute_score


def make_verl_reward_fn(env: str | Environment, *, mode: str = "auto", dg: DeepGym | None = None,
                        variant: int = 0, max_parallel: int | None = None,
                        reasoning: str = "auto") -> Callable[[Any], list[float | None]]:
    """A batch scorer for a custom training loop: ``reward_fn(batch) -> list[float | None]``.

    ``batch`` is a list of decoded responses, or a mapping holding one under ``responses`` or
    ``completions``. Each entry gets its score, or ``None`` when it has no verdict: leave those samples out
    of the update rather than treating them as 0. Token ids are refused: decode them first. ``reasoning``
    is as for :func:`compute_score`."""
    environment = get_environment(env)
    check_mode(mode)
    check_reasoning(reasoning)

    def reward_fn(batch: Any) -> list[float | None]:
        if isinstance(batch, Mapping):
            key = next((k for k in ("responses", "completions") if k in batch), None)
            if key is None:
                raise KeyError("the batch needs decoded responses under 'responses' or 'completions'")
            batch = batch[key]
        responses = list(batch)
        for response in responses:
            if not isinstance(response, str):
                raise TypeError(f"make_verl_reward_fn scores decoded text, got {type(response).__name__}; "
                                "decode the response ids with your tokenizer first")
        client = dg or get_client(mode)
        outcomes = client.run_batch(environment, responses, variant=variant, max_parallel=max_parallel,
                                    reasoning=reasoning)
        return [float(o.score) if o.has_verdict else None for o in outcomes]

    return reward_fn
