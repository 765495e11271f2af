"""The extraction rules (deepgym/extract.py), one case per rule."""

import pytest

from deepgym.extract import END_TOKENS, extract_code

CASES = [
    ("plain python fence", "Sure:\n```python\nx = 1\n```\n", "x = 1"),
    ("no info string", "```\nx = 1\n```", "x = 1"),
    ("versioned info string", "```python3.11\nx = 1\n```", "x = 1"),
    ("tilde fence", "~~~py\nx = 1\n~~~", "x = 1"),
    ("last block wins", "```python\nfirst\n```\ntext\n```python\nsecond\n```", "second"),
    ("tilde block after backtick block", "```\na\n```\n~~~\nb\n~~~", "b"),
    ("longer fence holds a shorter one", "````md\n```py\ninner\n```\n````", "```py\ninner\n```"),
    ("indented up to three spaces", "   ```python\nx = 1\n   ```", "x = 1"),
    ("CRLF line endings", "```python\r\nx = 1\r\ny = 2\r\n```\r\n", "x = 1\ny = 2"),
    ("lone CR line endings", "```python\rx = 1\r```", "x = 1"),
    ("trailing im_end", "```python\nx = 1\n```<|im_end|>", "x = 1"),
    ("several trailing tokens and whitespace", "```python\nx = 1\n```\n<|eot_id|>\n</s> <eos>", "x = 1"),
    ("unclosed block cut by an end token", "```python\nx = 1<|endoftext|>", "x = 1"),
    ("deepseek full-width end token", "```python\nx = 1\n```<｜end▁of▁sentence｜>", "x = 1"),
    ("gemma end of turn", "```python\nx = 1\n```<end_of_turn>", "x = 1"),
    ("end token inside code is kept", "```html\n<s>old</s>\n```", "<s>old</s>"),
    ("think block ignored", "<think>\n```python\nbad\n```\n</think>\n```python\ngood\n```", "good"),
    ("only a closing think tag (template opened it)", "```python\nbad\n```\n</think>\n```python\ngood\n```", "good"),
    ("unclosed block runs to the end", "Answer:\n```python\ndef f():\n    return 1", "def f():\n    return 1"),
    ("empty block", "```python\n```", ""),
]


@pytest.mark.parametrize("response,expected", [(r, e) for _, r, e in CASES], ids=[c[0] for c in CASES])
def test_extracts_the_last_fenced_block(response, expected):
    assert extract_code(response) == expected


@pytest.mark.parametrize("response", [
    "def f():\n    return 1",  # code without a fence is not a submission
    "",
    "<think>```python\nx = 1\n```",  # everything after an unclosed <think> is reasoning
    "inline ```code``` only",
    "text ```python\nx = 1\n```",  # a fence must start its line
])
def test_no_fenced_block_means_no_submission(response):
    assert extract_code(response) is None


def test_every_end_token_has_its_full_width_form():
    ascii_forms = [t for t in END_TOKENS if "|" in t]
    assert ascii_forms
    for token in ascii_forms:
        assert token.replace("|", "\uff5c") in END_TOKENS
        assert extract_code(f"```python\nx\n```{token}") == "x"
