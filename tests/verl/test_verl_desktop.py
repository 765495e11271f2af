"""A desktop episode through verl 0.9.1's own ToolAgentLoop (deepgym_agent, built by hydra from the packaged
YAML with the packaged computer tool): the scripted model's tool calls go through verl's ``_call_tool``, the
screenshots come back as PIL images through verl's vision path (its Qwen2-VL continuous-token builder with a
Qwen2-VL processor built offline: transformers' image processor with its defaults and a tiny byte-level
tokenizer made here), and the reward is the recorder-backed verifier's.

Not covered: a real model's weights and vLLM's own image handling (``limit_mm_per_prompt``, its processor
cache); verl's ``_compute_multi_modal_inputs`` after the rollout (the agent loop worker's, not the loop's)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.verl, pytest.mark.docker, pytest.mark.desktop]

from verl.tools.tool_registry import initialize_tools_from_config  # noqa: E402
from verl_fakes import LineTokenizer, loop_config  # noqa: E402

from deepgym.environments import load_environment  # noqa: E402
from deepgym.integrations import verl as dgverl  # noqa: E402
from deepgym.integrations.verl_tool import DeepGymSessionTool, episode_count  # noqa: E402
from deepgym.authoring.replay import action_sequences  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
            "<|video_pad|>", "<tool_call>", "</tool_call>"]
TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools>"
    "<|im_end|>\n{% endif %}"
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n"
    "{%- if message.content is string %}{{ message.content }}{% else %}{% for part in message.content %}"
    "{% if part.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% elif part.type == 'text' %}"
    "{{ part.text }}{% endif %}{% endfor %}{% endif %}"
    "{%- if message.tool_calls %}{% for call in message.tool_calls %}\n<tool_call>\n{\"name\": \""
    "{{ call.function.name }}\", \"arguments\": {{ call.function.arguments | tojson }}}\n</tool_call>"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_processor():
    """A Qwen2-VL processor with no download: transformers' image processor with its defaults (patch 14,
    merge 2) and a byte-level tokenizer without merges, plus Qwen's special tokens. Images only: the video
    processor needs torchvision, which the CPU venv does not carry."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, ProcessorMixin, Qwen2VLProcessor
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    class ImageOnlyQwen2VLProcessor(Qwen2VLProcessor):
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            self.image_token, self.video_token = "<|image_pad|>", "<|video_pad|>"
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    vocab = {char: index for index, char in enumerate(pre_tokenizers.ByteLevel.alphabet())}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=SPECIALS, chat_template=TEMPLATE)
    return ImageOnlyQwen2VLProcessor(image_processor=Qwen2VLImageProcessorPil(), tokenizer=tokenizer,
                                     chat_template=TEMPLATE)


class Server:
    """verl's LLM server client, answering each ``generate`` with the next scripted turn."""

    def __init__(self, tokenizer, *responses: str):
        self.tokenizer = tokenizer
        self.responses = list(responses)
        self.requests: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append({"prompt_ids": list(prompt_ids), "images": list(kwargs.get("image_data") or [])})
        text = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def call(action: dict) -> str:
    return f"<tool_call>{json.dumps({'name': 'computer', 'arguments': action})}</tool_call>"


def desktop_row(tmp_path: Path, name: str, variant: int) -> dict:
    import pandas as pd
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    path = tmp_path / f"{name}.parquet"
    pd.DataFrame(dgverl.verl_rows([name], variant=[variant])).to_parquet(path)
    config = OmegaConf.create({"max_prompt_length": 4096, "cache_dir": str(tmp_path / "cache")})
    return dict(RLHFDataset(str(path), LineTokenizer(), config)[0])


def run(row: dict, server: Server, processor):
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.merge(loop_config(use_v1=True), {"actor_rollout_ref": {"rollout": {
        "prompt_length": 4096, "response_length": 16384, "full_determinism": True, "multi_turn": {
            "max_parallel_calls": 1, "max_tool_response_length": 4000, "format": "hermes",
            "max_user_turns": None, "max_assistant_turns": None, "tool_response_truncate_side": "middle",
            "tool_config_path": dgverl.computer_tool_config_path()}}}})
    tools = initialize_tools_from_config(dgverl.computer_tool_config_path())
    for entry in OmegaConf.load(dgverl.agent_loop_config_path()):
        _agent_loop_registry[entry.name] = entry

    async def main():
        loop = hydra.utils.instantiate(
            config=_agent_loop_registry["deepgym_agent"], trainer_config=DictConfigWrap(config=config),
            server_manager=server, tokenizer=processor.tokenizer, processor=processor, hf_model_type="qwen2_vl",
            dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), tools=ToolListWrap(tools))
        return await loop.run({"temperature": 1.0}, **row)

    return asyncio.run(main())


@pytest.fixture(scope="module", autouse=True)
def images():
    from deepgym.images import build

    build(["signup_form"])


def test_the_computer_tool_is_deepgyms_session_tool_with_the_computer_schema():
    tools = initialize_tools_from_config(dgverl.computer_tool_config_path())
    assert len(tools) == 1 and isinstance(tools[0], DeepGymSessionTool) and tools[0].name == "computer"
    assert tools[0].tool_schema.function.parameters.required == ["action_type"]


def test_one_screenshot_costs_about_a_thousand_tokens():
    from PIL import Image

    processor = tiny_processor()
    grid = processor.image_processor(images=[Image.new("RGB", (1024, 768))], return_tensors="pt")["image_grid_thw"]
    merge = processor.image_processor.merge_size
    assert grid.tolist() == [[1, 54, 74]] and int(grid.prod()) // merge ** 2 == 999


def test_a_desktop_rollout_sees_screens_as_images_and_earns_the_recorders_reward(tmp_path):
    row = desktop_row(tmp_path, "signup_form", 3)
    assert row["agent_name"] == "deepgym_agent" and "Edsger Dijkstra" in row["raw_prompt"][0]["content"]
    assert row["extra_info"]["tools_kwargs"] == {"computer": {"create_kwargs": {"environment": "signup_form",
                                                                                  "variant": 3}}}
    reference = action_sequences(load_environment("signup_form"), "reference")[3]
    actions = [{"action_type": "screenshot"}, {"action_type": "tap"}, *reference]
    processor = tiny_processor()
    server = Server(processor.tokenizer, *map(call, actions), "Signed up.")
    output = run(row, server, processor)
    assert output.reward_score == 1.0, output.extra_fields["reward_extra_info"]
    assert output.extra_fields["reward_extra_info"]["error"] == 0.0
    images = output.multi_modal_data["images"] if output.multi_modal_data else []
    # One screen per call (the invalid one shows none), each a 1024x768 PIL image, all resent to the server.
    assert len(images) == len(actions) - 1 and {image.size for image in images} == {(1024, 768)}
    # Every generate call gets all the screens so far; `done` ends the episode, so its screen is the sample's
    # but no model turn follows it.
    assert [len(request["images"]) for request in server.requests] == [0, 1, 1, *range(2, len(images))]
    pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert server.requests[-1]["prompt_ids"].count(pad) == 999 * (len(images) - 1)
    shown = processor.tokenizer.decode(server.requests[2]["prompt_ids"])
    assert "invalid action: action_type 'tap' is not known" in shown and "settled after" in shown
    assert episode_count() == 0
