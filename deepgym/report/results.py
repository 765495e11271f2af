"""The page of a run's results: where the rewards went.

It reads JSON lines of either source, mixed freely:

- ``deepgym run-batch`` output: one outcome per line (``Verdict.to_dict()`` or ``NoVerdictError.to_dict()``),
  the closing ``{"summary": ...}`` line skipped;
- a log of verl's reward extras: lines with ``score``, ``passed``, ``error`` and ``error_type`` (what
  :mod:`deepgym.integrations.verl` returns and verl copies into its rollout dumps), with the environment from
  ``environment`` or ``data_source`` when the line has one, and the training ``step`` when it has one. verl's
  ``trainer.rollout_data_dir`` (one ``STEP.jsonl`` per step) can be given as it is, a folder.

and shows the outcome mix (overall and per environment), the no-verdict causes over time (the training step,
else the line's position), latency distributions (``timings.total_s``, where the line has it) and the slowest
samples, with the wait for an admission slot beside the latency (``timings.admission_wait_s``: time spent
queueing before the sandbox started, not part of ``total_s``). A line that is neither is counted and named at the
top of the page, never silently dropped.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from .charts import MIX_COLORS, Raw, colors, columns, legend, page, stacked_bar, table

MAX_BUCKETS = 30
SLOWEST = 20


@dataclass(frozen=True)
class Record:
    """One sample, whichever source it came from."""

    line: int
    environment: str
    has_verdict: bool
    passed: bool
    outcome: str  # "passed", the error type of a failed or unjudged sample, or "failed"
    score: float | None
    latency_s: float | None
    wait_s: float | None
    step: int | None
    note: str


def parse(number: int, item: Any) -> Record | None:
    """The record of one decoded line, or None when it is no sample of either source."""
    if not isinstance(item, dict) or "summary" in item:
        return None
    if "has_verdict" in item:
        judged = bool(item["has_verdict"])
        passed = judged and bool(item.get("passed"))
        timings = item.get("timings") if isinstance(item.get("timings"), dict) else {}
        latency, wait = timings.get("total_s"), timings.get("admission_wait_s")
        note = str(item.get("reason") or item.get("details") or "")
    elif "error" in item and "score" in item:
        judged = float(item["error"]) == 0.0
        passed = judged and float(item.get("passed") or 0.0) == 1.0
        latency, wait, note = None, None, str(item.get("error_type") or "")
    else:
        return None
    error_type = item.get("error_type") or ""
    outcome = "passed" if passed else (error_type or "failed")
    environment = item.get("environment") or item.get("data_source") or "unknown"
    step = item.get("step") if isinstance(item.get("step"), int) else None
    score = item.get("score") if judged else None
    return Record(number, str(environment), judged, passed, str(outcome),
                  float(score) if isinstance(score, (int, float)) else None,
                  seconds(latency), seconds(wait), step, note[:300])


def seconds(value: Any) -> float | None:
    """A timing read from a line: a number, else None (JSON's true and false are no time)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def text_lines(path: Path) -> list[str]:
    """The lines of ``path``; of a folder (verl's ``rollout_data_dir``, one ``STEP.jsonl`` per step), those of
    its ``*.jsonl`` files in step order."""
    if not path.is_dir():
        return path.read_text().splitlines()
    files = sorted(path.glob("*.jsonl"), key=lambda file: (not file.stem.isdigit(), int(file.stem) if
                                                           file.stem.isdigit() else 0, file.name))
    return [line for file in files for line in file.read_text().splitlines()]


def load(path: Path) -> tuple[list[Record], list[int]]:
    """The samples in ``path``, and the numbers of the lines that were not samples (nor the summary)."""
    records, skipped = [], []
    for number, line in enumerate(text_lines(path), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            skipped.append(number)
            continue
        record = parse(number, item)
        if record is not None:
            records.append(record)
        elif not (isinstance(item, dict) and "summary" in item):
            skipped.append(number)
    return records, skipped


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def mix(records: list[Record]) -> dict[str, int]:
    return {"passed": sum(r.passed for r in records), "failed": sum(r.has_verdict and not r.passed for r in records),
            "no verdict": sum(not r.has_verdict for r in records)}


def outcomes(records: list[Record]) -> list[str]:
    """Every outcome of the run, in the order pages show them: passed, the failures, the no-verdict causes."""
    return ["passed", *sorted({r.outcome for r in records if r.has_verdict} - {"passed"}),
            *sorted({r.outcome for r in records if not r.has_verdict})]


def outcome_section(records: list[Record], palette: dict[str, str]) -> str:
    by_env: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_env[record.environment].append(record)
    ordered = list(palette)
    rows = []
    for env, group in sorted(by_env.items()):
        counts = Counter(r.outcome for r in group)
        shown = {name: counts[name] for name in ordered if counts[name]}
        unjudged = sum(not r.has_verdict for r in group)
        rows.append([env, len(group), counts["passed"], sum(r.has_verdict and not r.passed for r in group), unjudged,
                     f"{100 * unjudged / len(group):.1f}%", Raw(stacked_bar(shown, palette, width=360, height=14))])
    judged_types = [name for name in ordered[1:] if any(r.outcome == name and r.has_verdict for r in records)]
    unjudged_types = [name for name in ordered if any(r.outcome == name and not r.has_verdict for r in records)]
    counts = Counter(r.outcome for r in records)
    return ("<h2>Outcomes per environment</h2>"
            + table(["environment", "samples", "passed", "failed", "no verdict", "no-verdict rate", "mix"], rows,
                    [False, True, True, True, True, True, False])
            + "<p>Failed (judged, scored below full marks):</p>"
            + legend({name: counts[name] for name in judged_types}, palette)
            + "<p>No verdict (the infrastructure's, never trained on):</p>"
            + (legend({name: counts[name] for name in unjudged_types}, palette) if unjudged_types else
               "<p class=\"muted\">none</p>"))


def causes_section(records: list[Record], palette: dict[str, str]) -> str:
    unjudged = [r for r in records if not r.has_verdict]
    if not unjudged:
        return "<h2>No-verdict causes over time</h2><p class=\"muted\">Every sample had a verdict.</p>"
    by_step = all(r.step is not None for r in records)
    position = {id(r): (r.step if by_step else index) for index, r in enumerate(records)}
    low, high = min(position.values()), max(position.values())
    buckets = min(MAX_BUCKETS, high - low + 1)
    width = (high - low + 1) / buckets
    series: list[Counter[str]] = [Counter() for _ in range(buckets)]
    for record in unjudged:
        series[min(buckets - 1, int((position[id(record)] - low) / width))][record.outcome] += 1
    labels = [f"{int(low + i * width)}" for i in range(buckets)]
    axis = "training step" if by_step else "sample (line order)"
    return (f"<h2>No-verdict causes over time</h2><p class=\"muted\">x: {axis}, {buckets} buckets; y: samples "
            f"without a verdict</p>" + columns([dict(entry) for entry in series], labels, palette)
            + legend(Counter(r.outcome for r in unjudged), palette))


def latency_section(records: list[Record]) -> str:
    timed = [r for r in records if r.latency_s is not None]
    if not timed:
        return ("<h2>Latency</h2><p class=\"muted\">No line carries timings (verl's extras do not): run-batch "
                "output does.</p>")
    by_env: dict[str, list[Record]] = defaultdict(list)
    for record in timed:
        by_env[record.environment].append(record)
    waited = any(r.wait_s is not None for r in timed)
    rows = []
    for env, group in sorted(by_env.items()):
        values = [r.latency_s for r in group]
        row = [env, len(group), *(f"{quantile(values, q):.3f}" for q in (0.5, 0.9, 0.99)), f"{max(values):.3f}"]
        if waited:
            waits = [r.wait_s for r in group if r.wait_s is not None]
            row += [f"{quantile(waits, q):.3f}" if waits else "-" for q in (0.5, 0.99)]
        rows.append(row)
    edges = [0.05 * 2 ** (i / 2) for i in range(16)]  # 0.05 s to about 9 s, then everything longer
    bins: list[Counter[str]] = [Counter() for _ in range(len(edges) + 1)]
    for record in timed:
        bins[sum(record.latency_s >= edge for edge in edges)]["samples"] += 1
    labels = ["<0.05"] + [f"≥{edge:.2g}" for edge in edges]
    wait_columns = ["wait p50 s", "wait p99 s"] if waited else []
    return ("<h2>Latency</h2><p class=\"muted\">seconds from the sandbox's start to the verdict "
            "(timings.total_s)" + ("; wait: the time queued for an admission slot before that start "
                                   "(timings.admission_wait_s)" if waited else "") + "</p>"
            + table(["environment", "samples", "p50 s", "p90 s", "p99 s", "max s", *wait_columns], rows,
                    [False, True, True, True, True, True, *(True for _ in wait_columns)])
            + columns([dict(b) for b in bins], labels, {"samples": "#1971c2"}, height=160))


def slowest_section(records: list[Record]) -> str:
    timed = sorted((r for r in records if r.latency_s is not None), key=lambda r: -r.latency_s)[:SLOWEST]
    if not timed:
        return ""
    rows = [[r.line, r.environment, r.outcome, f"{r.latency_s:.3f}", Raw(f"<code>{escape(r.note[:160])}</code>")]
            for r in timed]
    return "<h2>Slowest samples</h2>" + table(["line", "environment", "outcome", "seconds", "note"], rows,
                                              [True, False, False, True, False])


def render(path: Path) -> str:
    """The whole page for the results in ``path``."""
    records, skipped = load(path)
    if not records:
        raise ValueError(f"{path} holds no samples: expected `deepgym run-batch` output or a log of verl's reward "
                         f"extras (JSON lines)")
    counts = mix(records)
    scores = [r.score for r in records if r.score is not None]
    mean = f"{sum(scores) / len(scores):.3f}" if scores else "none"
    head = (f"<p id=\"totals\"><b>{len(records)}</b> samples from <code>{escape(path.name)}</code>: "
            f"<b>{counts['passed']}</b> passed, <b>{counts['failed']}</b> failed, <b>{counts['no verdict']}</b> "
            f"no verdict; mean score of the judged {mean}.</p>")
    if skipped:
        head += (f"<p class=\"muted\">{len(skipped)} line(s) were not samples and are left out: "
                 f"{', '.join(map(str, skipped[:20]))}{'...' if len(skipped) > 20 else ''}</p>")
    palette = colors(outcomes(records))
    body = (head + stacked_bar(counts, MIX_COLORS, height=30) + legend(counts, MIX_COLORS)
            + outcome_section(records, palette) + causes_section(records, palette) + latency_section(records)
            + slowest_section(records))
    return page(f"deepgym report: {path.name}", body)
