"""verl's tool agent loop on deepgym sessions: one container per rollout, scored by the final verifier.

verl's stock ``ToolAgentLoop`` creates and releases a tool instance around every call, shows any exception of
a tool to the model as text (and trains on it), and has no timeout anywhere. Here:

- :class:`DeepGymAgentLoop` (registered as ``deepgym_agent``, a subclass of verl 0.9.1's ``ToolAgentLoop``)
  owns one :class:`Episode` per rollout, keyed by an episode id of its own: not verl's request id, which is
  ``det-0`` for every rollout under ``full_determinism`` in v1, and not ``extra_fields``, which verl
  serialises. The id rides on ``AgentData`` as an attribute. After the rollout it runs the final verifier and
  sets ``reward_score``; the container is removed on every outcome, an exception in the loop included.
- :class:`DeepGymSessionTool` (tool config ``{type: native, environment: ..., mode: docker}``) is one shell
  tool. Its first call starts the episode and returns the starting observation, followed by the output of the
  command it carried. The environment and variant come per row from
  ``extra_info.tools_kwargs.<tool name>.create_kwargs`` (``{"environment": ..., "variant": ...}``), over the
  tool config's defaults. Output is cut by deepgym (head, marker, tail) to ``multi_turn.max_tool_response_length``
  so verl never cuts it again; images go back as images.
- An infrastructure fault is never raised into verl's ``_call_tool`` (which would show it to the model and
  train on it): the episode records it, the tool answers a neutral text, the loop stops the rollout and then
  raises from ``run()`` (v1: verl drops the sample) or masks it with ``error: 1.0`` (legacy), like
  ``deepgym_single_turn``. Each kept-out sample is counted by the same 5-in-100 monitor.

Budgets are the environment's (``session:`` in its manifest): a step timeout, a step budget and an episode
wall-clock budget, all enforced by deepgym. ``mode: local`` runs the model's commands on this host, unconfined:
it is refused unless the tool config says ``allow_unsafe_local: true`` (for developing environments only).

This module imports verl; :mod:`deepgym.integrations.verl` does not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import logging
import secrets
import threading
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import AgentState, ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from ..aio import AsyncSession
from ..outcome import NoVerdictError, Outcome
from ..rows import RowTask
from ..swe import swe_task
from ..session import Observation
from ..session.rules import cut_output
from ..verdict import zero
from . import verl as dgverl
from .verl import SESSION_AGENT_NAME, SESSION_TOOL_NAME, kept_out
from .verl_mask import keep_out

__all__ = ["SESSION_AGENT_NAME", "DeepGymAgentLoop", "DeepGymSessionTool", "Episode", "episode_count"]

EPISODE_ATTRIBUTE = "deepgym_episode"
STOPPED = "The environment stopped; this episode is over."
log = logging.getLogger("deepgym.verl")

_V1_ADVICE = (f"{SESSION_AGENT_NAME} raised it because verl's v1 trainer (trainer.use_v1=true) drops a sample "
              "whose agent loop raises: the episode is kept out of training and its prompt group's statistics "
              "come from the other samples")

_episodes: dict[str, Episode] = {}
_episodes_lock = threading.Lock()


def episode_count() -> int:
    """Episodes alive in this process (each holds at most one container); 0 between rollouts."""
    with _episodes_lock:
        return len(_episodes)


class Episode:
    """One rollout's session. Created by the loop without a container; the tool's first call starts it.

    It drives the session through deepgym's async API (:class:`deepgym.aio.AsyncSession`: each call waits for
    its host admission slot as a coroutine, then runs in the client's bounded session executor); a lock keeps
    two calls of one rollout in order."""

    def __init__(self, mode: str, max_output_chars: int | None, allow_local: bool = False):
        self.id = secrets.token_hex(16)
        self.mode = mode
        self.allow_local = allow_local
        self.max_output_chars = max_output_chars
        self.session: AsyncSession | None = None
        self.kind: str | None = None
        """The environment's kind once the episode started: a ``desktop`` one's action is the whole call."""
        self.failure: NoVerdictError | None = None
        self.outcome: Outcome | None = None
        self.lock = asyncio.Lock()

    @property
    def over(self) -> bool:
        return self.failure is not None or (self.session is not None and self.session.done)

    async def start(self, environment: str | RowTask, variant: int) -> Observation:
        """Start the episode of a named environment, or of an SWE-style instance's task."""
        task = environment if isinstance(environment, RowTask) else None
        env = task.environment if task is not None else dgverl.get_environment(environment)
        if self.max_output_chars and env.session is not None:
            limits = dataclasses.replace(env.session, output_chars=min(env.session.output_chars, self.max_output_chars))
            env = dataclasses.replace(env, session=limits)
        client = dgverl.get_client(self.mode, allow_local=True if self.mode == "local" and self.allow_local else None)
        # over a DesktopSession for a desktop env, an SweSession for an instance
        self.session = client.asession(env if task is None else dataclasses.replace(task, environment=env), variant)
        self.kind = env.kind
        return await self.session.start()

    async def finish(self) -> Outcome:
        """The episode's outcome: the final verifier's, or the fault that ended it; never raises."""
        if self.outcome is None:
            if self.failure is not None:
                self.outcome = self.failure
            elif self.session is None:
                self.outcome = zero("no_action", "the model never called the environment's tool", environment="",
                                    runtime=self.mode)
            else:
                try:
                    self.outcome = await self.session.score()
                except NoVerdictError as failure:
                    self.outcome = failure
        return self.outcome

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


def local_refusal(where: str) -> str:
    return (f"{where} is 'local', which runs the model's shell commands on this host as your user, with no "
            f"isolation and nothing stopped before the verifier reads. Set `allow_unsafe_local: true` in the "
            f"DeepGymSessionTool's tool config to allow it (for developing environments only, never for "
            f"training), or use mode docker")


def _png_images(observation: Observation) -> list[Any]:
    from PIL import Image

    return [Image.open(io.BytesIO(data)).convert("RGB") for data in observation.images]


class DeepGymSessionTool(BaseTool):
    """A shell tool over the rollout's deepgym session. Cheap to build: verl builds tools once per worker
    and again in the driver's dataset, and no container starts until a rollout's first call.

    Config keys: ``type: native`` (verl's), ``environment`` and ``variant`` (defaults for rows that name
    none), ``mode`` (any deepgym mode; default ``auto``) and ``allow_unsafe_local`` (``mode: local`` only)."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        self.environment = config.get("environment")
        self.variant = int(config.get("variant", 0))
        self.mode = dgverl.check_mode(config.get("mode", "auto"))
        self.allow_local = config.get("allow_unsafe_local") is True
        if self.mode == "local" and not self.allow_local:
            raise ValueError(local_refusal("the tool config's mode"))
        super().__init__(config, tool_schema)

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        if self.environment and dgverl.get_environment(self.environment).kind == "desktop":
            from ..runner.episode.computer import computer_schema

            return OpenAIFunctionToolSchema.model_validate(computer_schema())
        return OpenAIFunctionToolSchema.model_validate({
            "type": "function",
            "function": {
                "name": SESSION_TOOL_NAME,
                "description": "Run one bash command in the task's working directory and see its output.",
                "parameters": {"type": "object", "properties": {
                    "command": {"type": "string", "description": "the bash command to run"}},
                    "required": ["command"]},
            }})

    def _row_settings(self, agent_data: Any) -> tuple[str | RowTask, int]:
        """The row's environment and variant, or its SWE-style instance (``create_kwargs.swe_instance``)."""
        kwargs = ((getattr(agent_data, "tools_kwargs", None) or {}).get(self.name) or {}).get("create_kwargs") or {}
        if kwargs.get("swe_instance") is not None:
            return swe_task(kwargs["swe_instance"]), 0
        environment = kwargs.get("environment", self.environment)
        if not environment:
            raise ValueError(f"no environment for tool {self.name!r}: set extra_info.tools_kwargs.{self.name}."
                             f"create_kwargs.environment in the row, or `environment` in the tool config")
        return str(environment), int(kwargs.get("variant", self.variant))

    @rollout_trace_op
    async def execute(self, instance_id: str, parameters: dict[str, Any],
                      **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        agent_data = kwargs.get("agent_data")
        episode = _episodes.get(getattr(agent_data, EPISODE_ATTRIBUTE, None) or "")
        if episode is None:
            return ToolResponse(text=f"{self.name} works only inside the {SESSION_AGENT_NAME} agent loop"), 0.0, {}
        async with episode.lock:
            try:
                text, images = await self._act(episode, agent_data, parameters)
            except Exception as exc:  # noqa: BLE001 - never into verl's _call_tool: the model would see it
                log.exception("deepgym: the session tool failed")
                episode.failure = NoVerdictError("verifier_error", f"deepgym's session tool failed: {exc!r}",
                                                 runtime=episode.mode)
                text, images = STOPPED, []
        response = ToolResponse(text=text, image=images) if images else ToolResponse(text=text)
        return response, 0.0, {}

    async def _act(self, episode: Episode, agent_data: Any, parameters: dict[str, Any]) -> tuple[str, list[Any]]:
        """Start the episode on the first call, then run the command."""
        if episode.over:
            return STOPPED, []
        command = parameters.get("command")
        shown: list[str] = []
        images: list[Any] = []
        if episode.session is None:
            environment, variant = self._row_settings(agent_data)
            try:
                first = await episode.start(environment, variant)
            except NoVerdictError as failure:
                episode.failure = failure
                return STOPPED, []
            shown.append(first.text)
            images += _png_images(first)
        # A desktop episode's action is the whole call (action_type, x, y, ...); a shell episode's, its command.
        step = await episode.session.step(parameters if episode.kind == "desktop" else command)
        outcome = episode.session.outcome
        if outcome is not None and not outcome.has_verdict:
            episode.failure = outcome
            return STOPPED, []
        shown.append(step.observation.text)
        images = _png_images(step.observation) or images  # the latest screen only
        text = "\n\n".join(shown)
        return (cut_output(text, episode.max_output_chars) if episode.max_output_chars else text), images


@register(SESSION_AGENT_NAME)
class DeepGymAgentLoop(ToolAgentLoop):
    """verl's ``ToolAgentLoop`` with one deepgym session per rollout, scored by the final verifier.

    Args:
        mode: the deepgym mode of the episodes (any; ``local`` needs the tool's ``allow_unsafe_local``); a tool's own ``mode`` wins for its
            calls only when the loop has none.
    """

    def __init__(self, *args: Any, mode: str = "auto", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.mode = dgverl.check_mode(mode)
        tools = [tool for tool in self.tools.values() if isinstance(tool, DeepGymSessionTool)]
        if not tools:
            raise ValueError(f"{SESSION_AGENT_NAME} needs a DeepGymSessionTool in multi_turn.tool_config_path "
                             f"(`deepgym verl session-tool-config` prints the packaged one)")
        mode = tools[0].mode if mode == "auto" else mode
        if mode == "local" and not tools[0].allow_local:
            raise ValueError(local_refusal(f"{SESSION_AGENT_NAME}'s mode"))
        self.episode = Episode(mode, self.max_tool_response_length, allow_local=tools[0].allow_local)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        episode = self.episode
        with _episodes_lock:
            _episodes[episode.id] = episode
        try:
            output = await super().run(sampling_params, **kwargs)
            outcome = await episode.finish()
        finally:
            with _episodes_lock:
                _episodes.pop(episode.id, None)
            await episode.close()
        if isinstance(outcome, NoVerdictError):
            keep_out(output, outcome, config=self.config, advice=_V1_ADVICE, what="episode")
        else:
            kept_out.record(False)
            output.reward_score = outcome.score
            output.extra_fields["reward_extra_info"] = dgverl.reward_info(outcome.to_dict())
        return output

    async def _handle_pending_state(self, agent_data: Any, sampling_params: dict[str, Any]) -> AgentState:
        setattr(agent_data, EPISODE_ATTRIBUTE, self.episode.id)
        return await super()._handle_pending_state(agent_data, sampling_params)

    async def _handle_processing_tools_state(self, agent_data: Any) -> AgentState:
        state = await super()._handle_processing_tools_state(agent_data)
        return AgentState.TERMINATED if self.episode.over else state
