"""The extraction rules (deepgym/extract.py) on responses shaped like real chat models' outputs, scored by the real
coin_change (function) and patch_csv_quoting (patch) images: right answers that the earlier rules scored 0 now
score 1.0, and reasoning that never closed scores 0 with nothing run.

The shapes: Qwen2.5-Coder (prose, a python block, an explanation, an "Example usage" block), DeepSeek-R1
(``<think>`` with drafts, then the answer), Qwen3 under a template that put ``<think>`` in the prompt (the
response starts mid-reasoning and has only ``</think>``), Llama 3 (numbered steps with fenced blocks indented
under the list items).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker
ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"


def solution(env: str, name: str) -> str:
    """environments/<env>/solutions/<name>.*, read here rather than imported from conftest, whose module name
    tests/verl/conftest.py takes when both directories are given to one pytest run."""
    [path] = (ENVIRONMENTS / env / "solutions").glob(f"{name}.*")
    return path.read_text()


RIGHT = solution("coin_change", "reference").strip()
GREEDY = solution("coin_change", "wrong_greedy").strip()
R1_END = "<｜end▁of▁sentence｜>"


def indent(text: str, prefix: str) -> str:
    return textwrap.indent(text, prefix, lambda line: True)


QWEN_CODER_WITH_USAGE = f"""To find the fewest coins, I'll use bottom-up dynamic programming: `best[t]` is the fewest
coins that make the total `t`, built from smaller totals.

```python
{RIGHT}
```

**Explanation:**
- `best[0] = 0`, and every other total starts at `amount + 1`, which means "impossible so far".
- For each total, try every coin that fits and keep the best count.
- If the amount is still unreachable at the end, return `-1`.

Example usage:

```python
print(coin_change([1, 2, 5], 11))  # Output: 3
print(coin_change([2], 3))         # Output: -1
```<|im_end|>"""

LLAMA_NUMBERED_STEPS = f"""Here's a step-by-step solution to the coin change problem:

1. **Understand the problem**: we need the minimum number of coins that sum to `amount`.
2. **Choose an approach**: dynamic programming over the totals.
   - **Write the function**: the table holds the fewest coins for each total.
     ```python
{indent(RIGHT, "     ")}
     ```
3. **Example usage**:
   ```python
   print(coin_change([1, 2, 5], 11))  # Output: 3
   ```

The time complexity is O(amount * len(coins)).<|eot_id|>"""

LLAMA_ONE_BLOCK = f"""Sure! Here's how to solve it:

1. Use a table where `best[t]` is the fewest coins for the total `t`:
   ```python
{indent(RIGHT, "   ")}
   ```
2. Return `-1` when the amount cannot be made.<|eot_id|>"""

R1_DRAFTS = f"""<think>
Okay, so I need to find the fewest coins. A greedy approach first:

```python
{GREEDY}
```

But wait, greedy fails for coins [1, 3, 4] and amount 6: it takes 4+1+1 (3 coins) while 3+3 is 2. So dynamic
programming it is.
</think>

The greedy choice is not optimal in general, so this uses dynamic programming:

```python
{RIGHT}
```

It runs in O(amount × len(coins)) time.{R1_END}"""

# The answer's code mentions the closing tag itself; its block is kept (the earlier rules cut at that </think>).
R1_CODE_MENTIONS_THE_TAG = R1_DRAFTS.replace(
    f"```python\n{RIGHT}\n```\n\nIt runs",
    f"```python\n# Reasoning models end their thinking with '</think>'; nothing here depends on it.\n{RIGHT}\n```"
    "\n\nIt runs")

R1_CUT_OFF = f"""<think>
Okay, let me think about this. Dynamic programming over the totals should work:

```python
{RIGHT}
```

Let me double-check the edge case amount = 0: best[0] is 0, so it returns 0. And for coins [2], amount 3, the
table never"""

QWEN3_MID_REASONING = f"""Okay, the user wants the fewest coins. Let me try a quick draft:

```python
{GREEDY}
```

Hmm, that's greedy, and it's wrong for [1, 3, 4] with 6. I'll switch to a DP table.
</think>

Here is a dynamic-programming solution:

```python
{RIGHT}
```<|im_end|>"""

QWEN3_CUT_OFF = f"""Okay, the user wants the fewest coins. A DP table over the totals:

```python
{RIGHT}
```

Wait, let me check whether the order of the loops matters here. If I iterate over coins first"""


@pytest.fixture(scope="module")
def coin_change_image() -> None:
    from deepgym.images import build

    build(["coin_change"])


@pytest.mark.parametrize("response,reasoning,score,error_type", [
    pytest.param(QWEN_CODER_WITH_USAGE, "auto", 1.0, None, id="qwen-coder-trailing-example-usage"),
    pytest.param(LLAMA_ONE_BLOCK, "auto", 1.0, None, id="llama-block-indented-under-a-list-item"),
    pytest.param(LLAMA_NUMBERED_STEPS, "auto", 1.0, None, id="llama-nested-list-then-example-usage"),
    pytest.param(R1_DRAFTS, "auto", 1.0, None, id="r1-drafts-inside-think"),
    pytest.param(R1_CODE_MENTIONS_THE_TAG, "auto", 1.0, None, id="r1-answer-code-contains-close-tag"),
    pytest.param(R1_CUT_OFF, "auto", 0.0, "no_code_block", id="r1-cut-off-inside-think"),
    pytest.param(QWEN3_MID_REASONING, "auto", 1.0, None, id="qwen3-template-opened-think-auto"),
    pytest.param(QWEN3_MID_REASONING, "open", 1.0, None, id="qwen3-template-opened-think-open"),
    pytest.param(QWEN3_CUT_OFF, "open", 0.0, "no_code_block", id="qwen3-cut-off-open"),
])
def test_function_responses(gym, coin_change_image, response, reasoning, score, error_type):
    verdict = gym.run("coin_change", response, reasoning=reasoning)
    assert (verdict.score, verdict.error_type) == (score, error_type), verdict.details


# A right fix that also documents it in the README: the first hunk's context ends with the README's closing
# fence line, the second adds a fenced example (a new section).
README_HUNKS = r'''diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -15,6 +15,9 @@ text = plaincsv.dumps([["id", "note"], [1, "needs, quoting"]])
 semicolon = plaincsv.Dialect(delimiter=";", lineterminator="\n")
 plaincsv.dumps([["a", "b"]], semicolon)
 # 'a;b\n'
+
+quoted = plaincsv.loads('"say ""hi""",x\r\n')
+# [['say "hi"', 'x']]
 ```
 
 ## Dialects
@@ -22,6 +25,16 @@ plaincsv.dumps([["a", "b"]], semicolon)
 A `Dialect` holds the delimiter, the quote character, the line terminator the writer uses and the
 quoting style (`QUOTE_MINIMAL` or `QUOTE_ALL`). `EXCEL` (the default), `UNIX` and `TSV` are predefined.
 
+## Quoting
+
+A field is quoted when it holds the dialect's delimiter, its quote character or a line break; a quote
+character inside a quoted field is doubled:
+
+```python
+plaincsv.dumps([["a;b", 'say "hi"']], semicolon)
+# '"a;b";"say ""hi"""\n'
+```
+
 ## Development
 
     python -m pytest
'''
FIX_AND_README = README_HUNKS + solution("patch_csv_quoting", "reference")

QWEN_CODER_PATCH = f"""The reader ends a quoted field at the first quote character, so a doubled quote (`""`) is never
read as a literal quote, and the writer only quotes fields containing a comma rather than the dialect's delimiter.
Here is the fix, with the README updated to show quoting:

```diff
{FIX_AND_README.rstrip()}
```

The reader now turns `""` inside quotes into one `"`, and `needs_quotes` checks `dialect.delimiter`.<|im_end|>"""

LLAMA_PATCH = f"""To fix the quoting bugs, follow these steps:

1. **Apply the patch** (it also documents quoting in the README):
   ```diff
{indent(FIX_AND_README.rstrip(), "   ")}
   ```
2. **Run the tests** to confirm the fix:
   ```bash
   python -m pytest
   ```<|eot_id|>"""

R1_PATCH_CUT_OFF = f"""<think>
The reader needs to handle doubled quotes. Something like:

```diff
{FIX_AND_README.rstrip()}
```

But I should also check the writer for the TSV dialect, since"""


@pytest.fixture(scope="module")
def patch_image() -> None:
    from deepgym.images import build

    build(["patch_csv_quoting"])


@pytest.mark.parametrize("response,score,error_type", [
    pytest.param(QWEN_CODER_PATCH, 1.0, None, id="qwen-coder-fix-that-edits-a-readme-fence"),
    pytest.param(LLAMA_PATCH, 1.0, None, id="llama-indented-diff-then-a-bash-block"),
    pytest.param(f"<think>\nThe quote handling is wrong.\n</think>\n\n```diff\n{FIX_AND_README}```\n{R1_END}", 1.0,
                 None, id="r1-answer-after-think"),
    pytest.param(R1_PATCH_CUT_OFF, 0.0, "invalid_patch", id="r1-cut-off-inside-think"),
])
def test_patch_responses(gym, patch_image, response, score, error_type):
    verdict = gym.run("patch_csv_quoting", response)
    assert (verdict.score, verdict.error_type) == (score, error_type), verdict.details
