"""Train a tiny model with TRL's GRPO on deepgym's coin_change for a few steps, on the CPU and offline.

    pip install 'deepgym[trl]'          # after a CPU build of torch: pip install torch==2.13.0
    deepgym images build coin_change    # the verifier image, once
    python examples/trl_grpo_tiny.py --steps 3

The model is a two-layer Llama with random weights and the tokenizer a character-level one built here, so
nothing is downloaded. Such a model writes no code block, so every completion is scored 0 (``no_code_block``):
the example shows the pipeline, not learning. Swap in a real model with ``--model NAME`` (from the hub or a
local folder) and the same script trains it.
"""

from __future__ import annotations

import argparse
import string
import sys
import tempfile
from typing import Any

# A fence needs ``` or ~~~: leaving both characters out means a random model can never open a code block, so
# whatever a test appends to a completion is its only block.
CHARACTERS = sorted(set(string.printable) - set("`~\x0b\x0c\r"))
SPECIAL = ["<pad>", "<eos>", "<unk>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = ("{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<eos>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


# With tools: Qwen3's tokens and chat template (shipped in TRL), which renders tool schemas and tool calls, and
# whose replies TRL knows how to parse; every printable character, since tool calls carry shell commands.
TOOL_SPECIAL = ["<|endoftext|>", "<|im_end|>", "<unk>", "<|im_start|>", "<tool_call>", "</tool_call>",
                "<tool_response>", "</tool_response>", "<think>", "</think>"]


def tiny_tokenizer(tools: bool = False) -> Any:
    """A character-level tokenizer with a chat template (one that renders tool calls, with ``tools``), built
    without any download."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = TOOL_SPECIAL if tools else SPECIAL
    characters = sorted(set(string.printable) - set("\x0b\x0c\r")) if tools else CHARACTERS
    vocab = {token: i for i, token in enumerate(special + characters)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token=special[0], eos_token=special[1],
                                        unk_token="<unk>", additional_special_tokens=special[3:],
                                        padding_side="left")
    if tools:
        from trl.chat_template_utils import qwen3_chat_template

        tokenizer.chat_template = qwen3_chat_template
    else:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_model(tokenizer: Any, seed: int = 0, positions: int = 1024) -> Any:
    """A two-layer Llama with random weights sized for ``tokenizer``, for sequences of up to ``positions`` tokens."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=positions,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, tie_word_embeddings=True)
    return LlamaForCausalLM(config)


def grpo_config(output_dir: str, steps: int, **overrides: Any) -> Any:
    """DAPO settings from deepgym, sized for a CPU: two prompts of four samples per step, short completions."""
    from trl import GRPOConfig

    from deepgym.integrations.trl import generate_trl_dapo_config

    settings = generate_trl_dapo_config(num_generations=4)
    settings.update(output_dir=output_dir, max_steps=steps, per_device_train_batch_size=8, max_completion_length=16,
                    learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
                    seed=0, disable_tqdm=True)
    settings.update(overrides)
    return GRPOConfig(**settings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--model", help="a model to train instead of the tiny random one")
    parser.add_argument("--mode", default="docker", help="deepgym's mode: docker (default) or local")
    args = parser.parse_args(argv)

    from datasets import Dataset

    from deepgym.integrations.trl import DeepGymGRPOTrainer, kept_out, make_trl_reward_fn, trl_rows

    if args.model:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(args.model)
    else:
        tokenizer = tiny_tokenizer()
        model = tiny_model(tokenizer)
    dataset = Dataset.from_list(trl_rows("coin_change", repeat=2 * args.steps))
    with tempfile.TemporaryDirectory() as output_dir:
        trainer = DeepGymGRPOTrainer(model=model, processing_class=tokenizer, args=grpo_config(output_dir, args.steps),
                                     train_dataset=dataset, reward_funcs=[make_trl_reward_fn(mode=args.mode)])
        trainer.train()
    for entry in trainer.state.log_history:
        print({key: entry[key] for key in sorted(entry) if key.startswith(("reward", "loss", "deepgym", "step"))})
    print("kept out of the loss:", kept_out.snapshot())
    return 0


if __name__ == "__main__":
    sys.exit(main())
