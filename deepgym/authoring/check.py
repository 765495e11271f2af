"""Self-check of environments: prove an image judges correctly before anyone trains on it.

For every environment, against its real image:

- the reference solution scores 1.0 on every one of ``reruns`` runs (a flaky reference is a broken task);
- every known-wrong solution (``solutions/wrong_*``) scores below 1.0;
- an empty answer and a stub answer (a function returning None, a program printing nothing, a patch adding
  a comment) score 0;
- the reference's slowest case uses at most half of the per-case CPU limit, so a correct answer never
  times out; the margin (limit / slowest case) is reported.

A ``session`` environment replays action sequences instead (``solutions/*.json``, one list per variant), every
variant: the reference scores 1.0, every ``wrong_*`` sequence below 1.0, an episode with no action and one
that only looks around (``ls -la``) score 0. A ``desktop`` environment does the same with ``computer``
actions; looking around is two screenshots.

Any run without a verdict fails the check: an image that cannot judge its own reference is broken.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..canary import fenced as as_response
from ..client import DeepGym
from ..environments import Environment, load_environment
from ..outcome import Outcome
from .replay import action_sequences, replay

LOOK_ONLY = ["ls -la"]
# A desktop episode that only looks: two screenshots.
LOOK_ONLY_DESKTOP = [{"action_type": "screenshot"}, {"action_type": "screenshot"}]
EPISODE_KINDS = ("session", "desktop")

MAX_CPU_SHARE = 0.5


@dataclass
class CheckRow:
    """The self-check of one environment."""

    env: Environment
    reference: list[Outcome] = field(default_factory=list)
    wrong: dict[str, Outcome] = field(default_factory=dict)
    empty: Outcome | None = None
    stub: Outcome | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def slowest_case_cpu_s(self) -> float:
        """The reference's slowest case over every rerun; for a patch task, the whole run (apply, tests, probes),
        which case_cpu_s bounds stage by stage."""
        worst = 0.0
        for outcome in self.reference:
            if outcome.has_verdict and self.env.kind not in EPISODE_KINDS:
                if self.env.kind == "patch":
                    worst = max(worst, outcome.timings.get("submission_cpu_s", 0.0))
                else:
                    worst = max([worst, *(case.cpu_s for case in outcome.cases)])
        return worst


def stub_answer(env: Environment) -> str:
    """Code that runs and does nothing useful: it must score 0."""
    if env.kind == "function":
        return f"def {env.entry_point}(*args, **kwargs):\n    return None\n"
    if env.kind == "program":
        return "import sys\nsys.stdin.read()\n"
    repo = env.tests_dir / "repo"
    source = next(p for p in sorted(repo.rglob("*.py")) if "tests" not in p.relative_to(repo).parts
                  and not p.name.startswith("test_") and p.read_text().strip())
    path = source.relative_to(repo).as_posix()
    first = source.read_text().splitlines()[0]
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,1 +1,2 @@\n"
            f"+# TODO: fix the reported issue\n {first}\n")


def _describe(outcome: Outcome | None) -> str:
    if outcome is None:
        return "-"
    if not outcome.has_verdict:
        return f"no verdict ({outcome.error_type})"
    return f"{outcome.score:g}" + (f" ({outcome.error_type})" if outcome.error_type else "")


def check(names: list[str], gym: DeepGym, *, reruns: int = 3) -> list[CheckRow]:
    """Run the self-check of every environment in ``names``, all samples in parallel."""
    rows = [CheckRow(load_environment(name)) for name in names]
    jobs = []
    for row in rows:
        if row.env.kind in EPISODE_KINDS:
            jobs += _session_jobs(row, gym, reruns)
            continue
        solutions = row.env.solutions()
        if "reference" not in solutions:
            row.problems.append("no solutions/reference.* file")
            continue
        wrong = sorted(name for name in solutions if name.startswith("wrong_"))
        if len(wrong) < 2:
            row.problems.append(f"needs at least two solutions/wrong_* files, has {len(wrong)}")
        reference = as_response(row.env, solutions["reference"].read_text())
        jobs += [(row, "reference", _judging(gym, row.env, reference))] * reruns
        jobs += [(row, f"wrong:{name}", _judging(gym, row.env, as_response(row.env, solutions[name].read_text())))
                 for name in wrong]
        jobs += [(row, "empty", _judging(gym, row.env, "")),
                 (row, "stub", _judging(gym, row.env, as_response(row.env, stub_answer(row.env))))]

    with ThreadPoolExecutor(max_workers=gym.max_parallel) as pool:
        outcomes = list(pool.map(lambda job: job[2](), jobs))
    for (row, role, _), outcome in zip(jobs, outcomes):
        if role == "reference":
            row.reference.append(outcome)
        elif role.startswith("wrong:"):
            row.wrong[role[6:]] = outcome
        elif row.env.kind in EPISODE_KINDS:
            # The worst of the variants counts: every one must score 0.
            kept = getattr(row, role)
            if kept is None or not outcome.has_verdict or (kept.has_verdict and outcome.score > kept.score):
                setattr(row, role, outcome)
        else:
            setattr(row, role, outcome)

    for row in rows:
        _judge_row(row)
    return rows


def _judging(gym: DeepGym, env: Environment, response: str):
    return lambda: gym.judge(env, response)


def _session_jobs(row: CheckRow, gym: DeepGym, reruns: int) -> list:
    """Episodes replaying the session environment's sequences, every variant; ``wrong:NAME@V`` per variant."""
    solutions = row.env.solutions()
    if "reference" not in solutions:
        row.problems.append("no solutions/reference.json file")
        return []
    wrong = sorted(name for name in solutions if name.startswith("wrong_"))
    if len(wrong) < 2:
        row.problems.append(f"needs at least two solutions/wrong_*.json files, has {len(wrong)}")
    jobs = []
    for name in ["reference", *wrong]:
        sequences = action_sequences(row.env, name)
        missing = sorted(set(range(row.env.variants)) - set(sequences))
        if missing:
            row.problems.append(f"solutions/{name}.json has no actions for variant(s) {missing}")
        for variant, actions in sorted(sequences.items()):
            episode = _episode(gym, row.env, actions, variant)
            if name == "reference":
                jobs += [(row, "reference", episode)] * reruns
            else:
                jobs.append((row, f"wrong:{name}@{variant}", episode))
    look = LOOK_ONLY_DESKTOP if row.env.kind == "desktop" else LOOK_ONLY
    for variant in range(row.env.variants):
        jobs += [(row, "empty", _episode(gym, row.env, [], variant)),
                 (row, "stub", _episode(gym, row.env, look, variant))]
    return jobs


def _episode(gym: DeepGym, env: Environment, actions: list[str], variant: int):
    return lambda: replay(gym, env, actions, variant=variant)


def _judge_row(row: CheckRow) -> None:
    for index, outcome in enumerate(row.reference):
        if not outcome.has_verdict or outcome.score != 1.0:
            detail = outcome.reason if not outcome.has_verdict else outcome.details
            row.problems.append(f"reference run {index + 1} scored {_describe(outcome)}: {detail[:300]}")
    for name, outcome in row.wrong.items():
        if not outcome.has_verdict:
            row.problems.append(f"{name} got {_describe(outcome)}: {outcome.reason[:300]}")
        elif outcome.score >= 1.0:
            row.problems.append(f"{name} scored 1.0: the hidden tests do not catch it")
    for role in ("empty", "stub"):
        outcome = getattr(row, role)
        if outcome is not None and (not outcome.has_verdict or outcome.score != 0.0):
            row.problems.append(f"the {role} answer scored {_describe(outcome)}")
    limit = row.env.limits.case_cpu_s
    if row.reference and row.slowest_case_cpu_s > MAX_CPU_SHARE * limit:
        row.problems.append(f"the reference's slowest case used {row.slowest_case_cpu_s:.3f}s of CPU, more than "
                            f"{MAX_CPU_SHARE:.0%} of its {limit:g}s limit: raise case_cpu_s or speed it up")


def table(rows: list[CheckRow]) -> str:
    """The check as a plain-text table, one environment per line."""
    headers = ["environment", "kind", "reference", "wrong", "empty", "stub", "slowest/limit", "margin", "result"]
    lines = []
    for row in rows:
        limit = row.env.limits.case_cpu_s
        slowest = row.slowest_case_cpu_s
        wrong_scores = [o.score if o.has_verdict else None for o in row.wrong.values()]
        lines.append([
            row.env.id, row.env.kind,
            " ".join(_describe(o).split(" ")[0] for o in row.reference) or "-",
            f"{sum(1 for s in wrong_scores if s is not None and s < 1)}/{len(wrong_scores)} fail",
            _describe(row.empty).split(" ")[0], _describe(row.stub).split(" ")[0],
            "-" if row.env.kind in EPISODE_KINDS else f"{slowest:.3f}s/{limit:g}s",
            f"{limit / slowest:.0f}x" if slowest else "-",
            "ok" if row.ok else "FAIL",
        ])
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *lines)]
    render = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip()
              for line in [headers, *lines]]
    for row in rows:
        render += [f"{row.env.id}: {problem}" for problem in row.problems]
    return "\n".join(render)

