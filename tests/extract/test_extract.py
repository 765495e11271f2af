"""The extraction rules (deepgym/extract.py), case by case; tests/extract/test_extraction_images.py scores realistic
responses for them on real images."""

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import deepgym.extract
from deepgym.extract import END_TOKENS, extract_code, extract_patch

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
    ("fence under a list item is de-indented", "1. Code:\n   ```python\n   def f():\n       return 1\n   ```",
     "def f():\n    return 1"),
    ("fence two list levels deep", "- a\n  - b\n      ```python\n      x = 1\n      ```\n", "x = 1"),
    ("de-indent removes at most the fence's indentation", "  ```\nx\n    y\n  ```", "x\n  y"),
    ("closer less indented than the opener", "1. step\n    ```python\n    x = 1\n```", "x = 1"),
    ("a fence line indented deeper than the closer may be is content", "```md\n      ```\n```", "      ```"),
    ("</think> inside code keeps its block",
     "<think>plan</think>\n```python\ndef f(s):\n    return s.split('</think>')[-1]\n```",
     "def f(s):\n    return s.split('</think>')[-1]"),
    ("</think> ends reasoning mid-line", "<think>so the answer is ready.</think>```python\ngood\n```", "good"),
    ("the last </think> outside blocks wins", "<think>a</think> <think>b</think>\n```python\ngood\n```", "good"),
    ("a </think> line ends reasoning whose draft fence was left open",
     "<think>\nDraft:\n```python\nbad\n</think>\n\n```python\ngood\n```", "good"),
    ("without <think>, a </think> line in code is code", "```python\ns = \"\"\"\n</think>\n\"\"\"\n```",
     's = """\n</think>\n"""'),
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
    "<think>\nFirst draft:\n```python\ndef f():\n    return 0\n```\nBut wait",  # cut off mid-reasoning
    "<think>a</think>\n```python\nx = 1\n```\n<think>\nmore",  # reasoning reopened, never closed
])
def test_no_fenced_block_means_no_submission(response):
    assert extract_code(response) is None


def test_open_reasoning_means_only_what_follows_a_closing_think_is_the_answer():
    drafted = "Let me try:\n```python\ndraft\n```\n"
    assert extract_code(drafted) == "draft"  # auto: no tag at all, so the whole response is the answer
    assert extract_code(drafted, reasoning="open") is None
    assert extract_code(drafted + "</think>\n\n```python\ngood\n```", reasoning="open") == "good"
    assert extract_code("```python\nx = '</think>'\n```", reasoning="open") is None  # inside code: no close
    with pytest.raises(ValueError, match="'closed'.*auto, open"):
        extract_code("```python\nx\n```", reasoning="closed")


DEFINING = "```python\ndef solve(n):\n    return n\n```\n"


@pytest.mark.parametrize("response,expected", [
    (DEFINING + "Example usage:\n```python\nprint(solve(3))\n```", "def solve(n):\n    return n"),
    ("```python\ndef solve(n):\n    return 0\n```\n" + DEFINING + "```python\nsolve(1)\n```",
     "def solve(n):\n    return n"),  # the last defining block
    ("```python\nasync def solve():\n    pass\n```\n```\nsolve()\n```", "async def solve():\n    pass"),
    ("```python\nsolve = Solution().solve\n```\n```\nsolve == 1\n```", "solve = Solution().solve"),
    ("```python\nsolve: int = 1\n```\n```\nx\n```", "solve: int = 1"),
    # a method or a nested def is not the entry point, nor a comparison; none defines it, so the last block
    ("```python\nclass A:\n    def solve(self):\n        pass\n```\n```python\nsolve == 2\n```", "solve == 2"),
    ("```python\ndef solve_all():\n    pass\n```\n```\nlast\n```", "last"),
])
def test_function_tasks_prefer_the_block_that_defines_the_entry_point(response, expected):
    assert extract_code(response, entry_point="solve") == expected


README_HUNK = ("--- a/README.md\n+++ b/README.md\n@@ -1,5 +1,6 @@\n # demo\n \n ```python\n-old()\n+new()\n+more()\n"
               " ```")


def test_a_fenced_diff_ends_where_its_hunks_end():
    diff = f"```diff\n{README_HUNK}\n```\nThat is all."
    assert extract_patch(diff) == README_HUNK
    no_newline = "@@ -1 +1 @@\n-```\n\\ No newline at end of file\n+```\n\\ No newline at end of file"
    assert extract_patch(f"```diff\n{no_newline}\n```") == no_newline
    # Under a list item, with the editor's trailing whitespace stripped: the blank context line is empty.
    indented = "\n".join(f"   {line}".rstrip() for line in README_HUNK.split("\n"))
    assert extract_patch(f"1. The fix:\n   ```diff\n{indented}\n   ```") == README_HUNK.replace("\n \n", "\n\n")


@pytest.mark.parametrize("counts", ["@@ -1,40 +1,50 @@", "@@ -1,2 +1,3 @@"])
def test_a_diff_with_wrong_counts_still_ends_at_its_closing_fence(counts):
    diff = README_HUNK.replace("@@ -1,5 +1,6 @@", counts)
    response = f"```diff\n{diff}\n```\nRun the tests:\n```bash\npytest\n```"
    # Too large: the bare closing fence cannot be hunk content, so it ends the hunk and the block. Too small:
    # the hunk ends early and its " ```" context line closes the block (git would reject those counts anyway).
    expected = diff if counts == "@@ -1,40 +1,50 @@" else diff.rsplit("\n ```", 1)[0]
    assert extract_patch(response) == expected


def test_patch_tasks_prefer_the_block_that_holds_a_diff():
    diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b"
    assert extract_patch(f"```diff\n{diff}\n```\nThen:\n```bash\npytest -q\n```") == diff
    assert extract_patch("```bash\npytest -q\n```") == "pytest -q"  # no diff anywhere: the last block
    assert extract_patch(f"Bare:\n{diff}\n") == diff
    assert extract_patch(f"<think>\n{diff}\n") is None  # a diff inside unclosed reasoning is no answer


def test_the_docs_list_the_module_docstrings_rules():
    def rules(text: str) -> list[str]:
        return [" ".join(rule.split()) for rule in re.findall(r"^\d+\. .*?(?=^\d+\. |\Z)", text, re.M | re.S)]

    docs = (Path(__file__).resolve().parents[2] / "docs" / "verdicts.md").read_text()
    section = docs.split("<!-- extraction rules -->", 2)[1]
    documented = rules(deepgym.extract.__doc__.split("\n\n", 1)[1])
    assert len(documented) == 8 and rules(section) == [rule.replace("``", "`") for rule in documented]


def test_every_end_token_has_its_full_width_form():
    ascii_forms = [t for t in END_TOKENS if "|" in t]
    assert ascii_forms
    for token in ascii_forms:
        assert token.replace("|", "\uff5c") in END_TOKENS
        assert extract_code(f"```python\nx\n```{token}") == "x"


# Extraction runs on the host, on text the policy wrote: nothing in it may make extraction raise (the sample
# would crash deepgym's side instead of being judged). Pieces that steer the scanner are mixed with noise.
_PIECES = ["```", "````", "~~~", "```python", "```diff", "    ```", "\t```", "<think>", "</think>", "@@ -1,2 +1,3 @@",
           "@@ -1," + "9" * 5000 + " +1 @@", "@@ -0,0 +1 @@", "--- a/x.py", "+++ b/x.py", "diff --git a/x b/x", "+",
           "-", " ", "\\ No newline", "def solve(", "solve = 1", "<|im_end|>", "\r", "\r\n", "\x00", "\ud800",
           "\udfff", "\u2028", "\x1b[0m"]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=20)), max_size=60).map("\n".join))
def test_extraction_never_raises_on_any_text(response):
    for reasoning in ("auto", "open"):
        for result in (extract_code(response, entry_point="solve", reasoning=reasoning),
                       extract_patch(response, reasoning=reasoning)):
            assert result is None or isinstance(result, str)

