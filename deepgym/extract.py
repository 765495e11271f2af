"""From a raw model response to the submission: the one place for the extraction rules.

1. End-of-turn tokens at the end of the response are dropped (``<|im_end|>``, ``<|endoftext|>``, ``<|eot_id|>``,
   ``</s>``, ``<eos>``, ``<end_of_turn>`` and DeepSeek's full-width forms such as ``<｜end▁of▁sentence｜>``),
   repeatedly, with the whitespace around them. Tokens inside the text are left alone: ``</s>`` is also HTML.
2. CRLF and CR line endings become LF.
3. Reasoning is ignored: everything up to the last ``</think>`` is dropped (this also covers chat templates
   that put the opening ``<think>`` in the prompt). An unclosed ``<think>`` hides everything after it.
4. The submission is the content of the **last** fenced code block: a fence is three or more backticks or
   tildes, indented by at most three spaces, with any info string (``python``, ``python3.11``, none); it is
   closed by a line of at least as many of the same character. A last block that is never closed (a
   response cut off at its length limit) runs to the end of the response; if it is empty, it is no block
   (a stray closing fence).
5. A response without any fenced block has no submission. It is scored 0 with error type
   ``no_code_block`` and nothing is run: a policy learns the answer format instead of having prose executed.
6. Patch tasks take the last fenced block the same way; without one, a bare diff counts from its first
   ``diff --git`` or ``--- `` line to the end. No diff at all is scored 0 as ``invalid_patch``.
"""

from __future__ import annotations

import re

_BASE_END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "<|eom_id|>", "</s>", "<eos>",
                    "<end_of_turn>", "<|end▁of▁sentence|>", "<|end_of_sentence|>", "<|EOT|>")
# DeepSeek writes its special tokens with full-width bars (U+FF5C): accept both forms of every token.
END_TOKENS = tuple(sorted({t for base in _BASE_END_TOKENS for t in (base, base.replace("|", "\uff5c"))},
                          key=len, reverse=True))
_TRAILING_TOKENS = re.compile(r"(?:\s|" + "|".join(re.escape(t) for t in END_TOKENS) + r")+\Z")
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def strip_end_tokens(text: str) -> str:
    """The response without end-of-turn tokens (and whitespace) at its end."""
    return _TRAILING_TOKENS.sub("", text)


def drop_reasoning(text: str) -> str:
    """The response without its ``<think>`` section (see rule 3)."""
    close = text.rfind("</think>")
    if close != -1:
        return text[close + len("</think>"):]
    opening = text.find("<think>")
    return text if opening == -1 else text[:opening]


def fenced_blocks(text: str) -> list[str]:
    """Contents of every fenced code block, in order."""
    blocks: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        fence = match["fence"]
        closing = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            body.append(lines[i])
            i += 1
        closed = i < len(lines)
        if closed or any(line.strip() for line in body):
            blocks.append("\n".join(body))
        i += 1
    return blocks


def extract_code(response: str) -> str | None:
    """The submission in ``response`` (the last fenced block), or None when it has no fenced block."""
    text = strip_end_tokens(response).replace("\r\n", "\n").replace("\r", "\n")
    blocks = fenced_blocks(drop_reasoning(text))
    return blocks[-1] if blocks else None


def extract_patch(response: str) -> str | None:
    """The diff in ``response``: the last fenced block, else a bare diff (rule 6), else None."""
    text = drop_reasoning(strip_end_tokens(response).replace("\r\n", "\n").replace("\r", "\n"))
    blocks = fenced_blocks(text)
    if blocks:
        return blocks[-1]
    match = re.search(r"^(diff --git |--- )", text, re.M)
    return text[match.start():] if match else None
