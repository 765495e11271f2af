"""Helpers for the verl tests: a tokenizer and an LLM server that stand in for the model (the only fakes; verl's
own classes and deepgym's real containers do the rest), a verl config for an agent loop, and model responses.

The fake tokenizer gives each distinct line of text one token id, so ``decode(encode(text)) == text`` and a
response keeps its line structure, which is all deepgym's extraction needs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

EOS_ID = 2
EOS = "<|im_end|>"
ROLE_IDS = {"system": 3, "user": 4, "assistant": 5, "tool": 6}
FIRST_TEXT_ID = 1000


class LineTokenizer:
    """A chat tokenizer whose vocabulary is whole lines of text, learnt as it goes."""

    pad_token_id = 0
    eos_token_id = EOS_ID
    eos_token = EOS
    padding_side = "left"

    def __init__(self) -> None:
        self._text: dict[int, str] = {}
        self._ids: dict[str, int] = {}

    def encode(self, text: str, add_special_tokens: bool = False, **kwargs: Any) -> list[int]:
        ids = []
        for piece in text.splitlines(keepends=True):
            if piece not in self._ids:
                self._ids[piece] = FIRST_TEXT_ID + len(self._ids)
                self._text[self._ids[piece]] = piece
            ids.append(self._ids[piece])
        return ids

    def decode(self, ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str:
        out = []
        for token in [int(t) for t in ids]:
            if token in self._text:
                out.append(self._text[token])
            elif token == EOS_ID and not skip_special_tokens:
                out.append(EOS)
        return "".join(out)

    def pad(self, encoded: dict[str, list[int]], *, padding: str = "max_length", max_length: int,
            return_tensors: str = "pt", return_attention_mask: bool = True) -> dict[str, Any]:
        """Pad one sequence to ``max_length`` on ``padding_side``, as a HF tokenizer does for verl's worker."""
        import torch

        ids = list(encoded["input_ids"])
        fill = [self.pad_token_id] * (max_length - len(ids))
        mask = [1] * len(ids)
        out = {"input_ids": torch.tensor(fill + ids if self.padding_side == "left" else ids + fill)}
        if return_attention_mask:
            out["attention_mask"] = torch.tensor([0] * len(fill) + mask if self.padding_side == "left"
                                                 else mask + [0] * len(fill))
        return out

    def apply_chat_template(self, messages: list[dict], *, tools: Any = None, add_generation_prompt: bool = False,
                            tokenize: bool = True, **kwargs: Any) -> Any:
        ids: list[int] = []
        for message in messages:
            content = message.get("content") or ""
            ids += [ROLE_IDS[message["role"]], *self.encode(str(content)), EOS_ID]
        if add_generation_prompt:
            ids.append(ROLE_IDS["assistant"])
        return ids if tokenize else self.decode(ids)


class ScriptedServer:
    """verl's LLM server client, answering each ``generate`` with the next scripted response (then EOS)."""

    def __init__(self, tokenizer: LineTokenizer, *responses: str):
        self.tokenizer = tokenizer
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any):
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append({"request_id": request_id, "prompt_ids": list(prompt_ids)})
        text = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        ids = self.tokenizer.encode(text) + [EOS_ID]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def loop_config(*, use_v1: bool | None, reward_path: str | None = None, reward_kwargs: dict | None = None):
    """The part of verl's trainer config an agent loop reads."""
    from omegaconf import OmegaConf

    custom: dict[str, Any] = {"path": reward_path, "name": "compute_score"}
    if reward_kwargs is not None:
        custom["reward_kwargs"] = reward_kwargs
    config: dict[str, Any] = {
        "actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": 256,
                                          "multi_turn": {"tool_config_path": None}},
                              "model": {"path": "fake-model"}},
        "data": {"apply_chat_template_kwargs": {}},
        "reward": {"custom_reward_function": custom},
    }
    if use_v1 is not None:
        config["trainer"] = {"use_v1": use_v1}
    return OmegaConf.create(config)


def instantiate_loop(config, server: ScriptedServer, name: str = "deepgym_single_turn", tools: list | None = None):
    """Build an agent loop exactly as verl's AgentLoopWorker does: its YAML entries go into verl's registry,
    then ``hydra.utils.instantiate`` with the worker's arguments. Call it inside a running event loop."""
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from deepgym.integrations.verl import agent_loop_config_path

    for entry in OmegaConf.load(agent_loop_config_path()):
        _agent_loop_registry[entry.name] = entry
    return hydra.utils.instantiate(
        config=_agent_loop_registry[name], trainer_config=DictConfigWrap(config=config), server_manager=server,
        tokenizer=server.tokenizer, processor=None, hf_model_type=None, dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data), tools=ToolListWrap(tools or []))


def copy_loop_entry(name: str, **fields: Any) -> str:
    """Register a copy of the packaged ``deepgym_single_turn`` entry under ``name`` with ``fields`` changed, as
    a user's own agent-loop YAML would hold it; returns ``name`` for :func:`instantiate_loop`."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    from deepgym.integrations.verl import agent_loop_config_path

    [entry] = [e for e in OmegaConf.load(agent_loop_config_path()) if e.name == "deepgym_single_turn"]
    _agent_loop_registry[name] = OmegaConf.merge(entry, {"name": name, **fields})
    return name


def run_loop(config, row: dict[str, Any], *responses: str, tokenizer: LineTokenizer | None = None,
             name: str = "deepgym_single_turn"):
    """Run the loop ``name`` once per response on ``row`` (a dataset item); returns the outputs, or the exception."""
    server = ScriptedServer(tokenizer or LineTokenizer(), *responses)

    async def main():
        outputs = []
        for _ in responses:
            loop = instantiate_loop(config, server, name)
            outputs.append(await loop.run({"temperature": 1.0}, **row))
        return outputs

    return asyncio.run(main())



ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"


def fenced(code: str, language: str = "python") -> str:
    """A model-style response wrapping ``code`` in a fenced block."""
    return f"Here is the solution.\n\n```{language}\n{code}\n```\n"


def solution(env: str, name: str) -> str:
    """The text of environments/<env>/solutions/<name>.*"""
    matches = sorted((ENVIRONMENTS / env / "solutions").glob(f"{name}.*"))
    assert matches, f"no solution {name} in {env}"
    return matches[0].read_text()


def without_provenance(reward_info: dict) -> dict:
    """deepgym's reward extra info without its ``provenance`` string, which names this host's image
    (tests/canary/test_replay.py checks what provenance holds)."""
    return {key: value for key, value in reward_info.items() if key != "provenance"}
