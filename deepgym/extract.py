"""From a raw model response to the submission: the one place for the extraction rules.

1. End-of-turn tokens at the end of the response are dropped (``<|im_end|>``, ``<|endoftext|>``, ``<|eot_id|>``,
   ``</s>``, ``<eos>``, ``<end_of_turn>`` and DeepSeek's full-width forms such as ``<｜end▁of▁sentence｜>``),
   repeatedly, with the whitespace around them. Tokens inside the text are left alone: ``</s>`` is also HTML.
2. CRLF and CR line endings become LF.
3. A fence is three or more backticks or tildes at the start of a line, after any indentation (a block under
   a list item, at any depth), with any info string (``python``, ``python3.11``, none). It is closed by a
   line of at least as many of the same character, indented by at most three characters more than the
   opening fence. As in CommonMark, the content loses up to as many leading whitespace characters as the
   opening fence is indented. A block that is never closed (a response cut off at its length limit) runs to
   the end of the response; if it is empty, it is no block (a stray closing fence).
4. A fenced diff ends where its hunks end. Inside a block, a hunk header ``@@ -a,b +c,d @@`` starts a hunk
   of ``b`` old and ``d`` new lines (a missing count is 1), counted as git counts them: a context line (``' '``
   or empty) is one of each, ``-`` one old, ``+`` one new, ``\\`` (no newline at end of file) none. A line
   inside a hunk never closes the block, so a README hunk with a fence line in it stays in the diff. Wrong
   counts cannot swallow the rest of the response: a line that cannot be hunk content (a bare closing fence
   is one) ends the hunk early, and closes the block if it is a closing fence.
5. Reasoning is not the answer. The reasoning ends at the last ``</think>`` outside every fenced block
   (code that contains the string ``</think>`` keeps its block), and only what follows it is looked at. A
   ``<think>`` outside fenced blocks and after that point opened reasoning that never closed (a response cut
   off mid-thought): the response has no answer, and no draft inside the reasoning runs. When this leaves no
   answer, a later line that is just ``</think>`` still ends the reasoning (a draft fence left open in the
   reasoning hides the ``</think>`` after it). The ``reasoning`` setting says where reasoning starts:
   ``auto`` (the default) as just described; ``open`` when the chat template put the opening ``<think>`` in
   the prompt (DeepSeek-R1, Qwen3), so the response itself starts inside the reasoning: everything before
   the last ``</think>`` is reasoning, and a response without one has no answer.
6. The submission is the content of the **last** fenced block of the answer. Function tasks prefer the last
   block that defines the entry point at its top level (``def name(``, ``async def name(``, or an assignment
   ``name = ...``) over a later usage or example block; with none, the last block.
7. An answer without any fenced block, or a response without an answer (rule 5), has no submission. It is
   scored 0 with error type ``no_code_block`` and nothing is run: a policy learns the answer format instead
   of having prose or its reasoning executed.
8. Patch tasks prefer the last fenced block that holds a diff (a ``diff --git`` line or a hunk header) over
   a later one (``pytest`` commands, say); with none, the last block; without any block, a bare diff counts
   from its first ``diff --git`` or ``--- `` line to the end. No diff at all (or no answer, rule 5) is
   scored 0 as ``invalid_patch``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .runner.diff import HUNK_HEADER
from .runner.protocol import DIFF_KINDS

if TYPE_CHECKING:
    from .environments import Environment

_BASE_END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "<|eom_id|>", "</s>", "<eos>",
                    "<end_of_turn>", "<|end▁of▁sentence|>", "<|end_of_sentence|>", "<|EOT|>")
# DeepSeek writes its special tokens with full-width bars (U+FF5C): accept both forms of every token.
END_TOKENS = tuple(sorted({t for base in _BASE_END_TOKENS for t in (base, base.replace("|", "\uff5c"))},
                          key=len, reverse=True))
REASONING = ("auto", "open")
_TRAILING_TOKENS = re.compile(r"(?:\s|" + "|".join(re.escape(t) for t in END_TOKENS) + r")+\Z")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_DIFF = re.compile(r"^(?:diff --git |@@ -\d)", re.M)
_OPEN_TAG, _CLOSE_TAG = "<think>", "</think>"


@dataclass(frozen=True)
class _Block:
    """A fenced block: its opening and closing fence lines (``end`` is the line count when never closed)
    and its de-indented content."""

    start: int
    end: int
    content: str


def check_reasoning(reasoning: str) -> str:
    """``reasoning`` if it is a setting of rule 5; else a ValueError naming the valid ones."""
    if reasoning not in REASONING:
        raise ValueError(f"unknown reasoning setting {reasoning!r}; valid settings: {', '.join(REASONING)} "
                         "(open: the prompt opened <think>, so the response starts inside the reasoning)")
    return reasoning


def strip_end_tokens(text: str) -> str:
    """The response without end-of-turn tokens (and whitespace) at its end."""
    return _TRAILING_TOKENS.sub("", text)


def _normalise(response: str) -> str:
    return strip_end_tokens(response).replace("\r\n", "\n").replace("\r", "\n")


def _dedent(line: str, indent: int) -> str:
    """``line`` without up to ``indent`` leading whitespace characters (CommonMark's rule for fences)."""
    return line[min(indent, len(line) - len(line.lstrip(" \t"))):]


def _scan(lines: list[str]) -> list[_Block]:
    """Every fenced block of ``lines``, in order (rules 3 and 4)."""
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        indent, fence = len(match["indent"]), match["fence"]
        closing = re.compile(rf"^[ \t]{{0,{indent + 3}}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        start, body = i, []
        old = new = 0  # lines still due in the current hunk
        i += 1
        while i < len(lines):
            line = _dedent(lines[i], indent)
            if old > 0 or new > 0:
                kind = line[:1]
                if kind in ("", " ", "-", "+", "\\"):
                    old -= kind in ("", " ", "-")
                    new -= kind in ("", " ", "+")
                    body.append(line)
                    i += 1
                    continue
                old = new = 0  # not hunk content: the counts were wrong, and the hunk ends here
            if closing.match(lines[i]):
                break
            hunk = HUNK_HEADER.match(line)
            if hunk is not None:
                old = int(hunk["old"]) if hunk["old"] is not None else 1
                new = int(hunk["new"]) if hunk["new"] is not None else 1
            body.append(line)
            i += 1
        if i < len(lines) or any(line.strip() for line in body):
            blocks.append(_Block(start, i, "\n".join(body)))
        i += 1
    return blocks


def fenced_blocks(text: str) -> list[str]:
    """Contents of every fenced code block of ``text``, in order."""
    return [block.content for block in _scan(text.split("\n"))]


def _outside_blocks(lines: list[str]) -> list[int]:
    """Numbers of the lines that are neither a fence nor inside a fenced block."""
    inside = {n for block in _scan(lines) for n in range(block.start, block.end + 1)}
    return [n for n in range(len(lines)) if n not in inside]


def _after(lines: list[str], number: int) -> str:
    """The text after the last ``</think>`` on line ``number``."""
    line = lines[number]
    return "\n".join([line[line.rfind(_CLOSE_TAG) + len(_CLOSE_TAG):], *lines[number + 1:]])


def _opens_reasoning(text: str) -> bool:
    lines = text.split("\n")
    return any(_OPEN_TAG in lines[n] for n in _outside_blocks(lines))


def drop_reasoning(text: str, reasoning: str = "auto") -> str | None:
    """The answer: the part of ``text`` after its reasoning, or None when the reasoning never closed (rule 5)."""
    check_reasoning(reasoning)
    lines = text.split("\n")
    closes = [n for n in _outside_blocks(lines) if _CLOSE_TAG in lines[n]]
    last = closes[-1] if closes else -1
    candidates = [_after(lines, last) if closes else None if reasoning == "open" else text]
    # A draft fence left open in the reasoning swallows the </think> after it; a line of its own still ends it.
    alone = [n for n, line in enumerate(lines) if n > last and line.strip() == _CLOSE_TAG]
    if alone:
        candidates.append(_after(lines, alone[-1]))
    return next((c for c in candidates if c is not None and not _opens_reasoning(c)), None)


def defines(code: str, name: str) -> bool:
    """Whether ``code`` defines ``name`` at its top level: ``def``, ``async def`` or an assignment (rule 6)."""
    name = re.escape(name)
    return re.search(rf"^(?:async[ \t]+)?def[ \t]+{name}[ \t]*\(|^{name}[ \t]*(?::[^=\n]*)?=(?!=)", code,
                     re.M) is not None


def extract_code(response: str, *, entry_point: str | None = None, reasoning: str = "auto") -> str | None:
    """The submission in ``response``, or None when its answer has no fenced block (rules 1 to 7).

    ``entry_point`` is a function task's function: the last block that defines it wins over later ones."""
    text = drop_reasoning(_normalise(response), reasoning)
    blocks = fenced_blocks(text) if text is not None else []
    if entry_point is not None:
        blocks = [block for block in blocks if defines(block, entry_point)] or blocks
    return blocks[-1] if blocks else None


def extract_patch(response: str, *, reasoning: str = "auto") -> str | None:
    """The diff in ``response`` (rule 8), or None."""
    text = drop_reasoning(_normalise(response), reasoning)
    if text is None:
        return None
    blocks = fenced_blocks(text)
    if blocks:
        return ([block for block in blocks if _DIFF.search(block)] or blocks)[-1]
    match = re.search(r"^(diff --git |--- )", text, re.M)
    return text[match.start():] if match else None


def submission(env: Environment, response: str, reasoning: str = "auto") -> str | None:
    """What judging ``response`` in ``env`` runs, by the rules above: the diff of a patch task, else the code;
    None when there is nothing to run. The sync and the async path both ask it, once per sample."""
    if env.kind in DIFF_KINDS:
        return extract_patch(response, reasoning=reasoning)
    return extract_code(response, entry_point=env.entry_point, reasoning=reasoning)
