"""Authoring a patch task's probes: expected values from the reference fix, and proof that they catch bugs.

A probe is a Python expression evaluated, after the environment's setup code, by a worker that imports the
patched repository; the runner compares its value with the expected one, which only the runner can read. A
patch scores only if its tests pass *and* every probe matches, so forging pytest from inside the repository
gains nothing unless the code is really fixed (see deepgym/runner/kinds/patch.py).

Each patch environment keeps its probes in ``generator/make_probes.py`` as ``SETUP`` (module code) and
``PROBES``, a list of ``(id, covers, expr)``: ``covers`` names the tests of spec.json (or ``"issue"``, for a
behaviour the prompt asks for) that the probe checks. The script calls :func:`write_probes`, which evaluates
the probes with the runner's own probe worker and applier, so expected values are computed exactly as they are
later judged, and writes ``tests/probes.json`` only when:

- every fail-to-pass test is covered by a probe, ids are lowercase words joined by underscores, 10-30 probes;
- on the reference fix no probe raises unless its id ends in ``_raises``, two runs agree, and each probe gives
  the same value when evaluated alone (probes must not depend on each other);
- on the unfixed repository every probe of a fail-to-pass behaviour differs and every probe covering only
  pass-to-pass tests agrees (a probe must not ask for more than the tests do);
- every ``solutions/wrong_*.diff`` differs on at least one probe.

Values must be plain JSON data: return ``str(obj)`` or a list of fields rather than an object. Probes are
hidden; do not mention them in prompt.md.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .runner.confine.local import Local
from .runner.confine.processes import Processes
from .runner.confine.usage import Budget
from .runner.confine.worker import apply_patch
from .runner.kinds.function import equal, run_calls
from .runner.protocol import Limits

Probe = tuple[str, list[str], str]
_ID = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
_LIMITS = Limits(case_cpu_s=10, total_cpu_s=600, memory_mb=2048, output_kb=4096)


class ProbesRejected(Exception):
    """The probes are not fit to ship; the message says why."""


def evaluate(repo: Path, setup: str, probes: list[tuple[str, str]]) -> list[Any]:
    """Each (id, expr) probe's value in ``repo``, as the runner's probe worker computes it: the value, or
    ``{"raises": name}``; ``{"failed": error_type}`` when the worker could not answer (setup failed, time ran out)."""
    values: list[Any] = []

    def judge_reply(probe: dict, reply: dict[str, Any], usage) -> dict[str, Any]:
        values.append(reply.get("value") if reply.get("ok") else {"raises": reply.get("raises")})
        return {"passed": True}

    def fail(probe: dict, error_type: str, error: str, usage) -> dict[str, Any]:
        values.append({"failed": error_type, "error": error})
        return {"passed": True}

    sandbox = Processes(Local())
    try:
        run_calls(sandbox, _LIMITS, Budget(_LIMITS), ("probe", str(repo), str(repo)), {"setup": setup},
                  [{"id": probe_id, "expr": expr} for probe_id, expr in probes], lambda p: {"expr": p["expr"]},
                  judge_reply, fail, lambda: None, fail_fast=False)
    finally:
        sandbox.kill_all()
    return values


def _prepare(env: Path, scratch: Path, label: str, diff: Path | None) -> Path:
    """The repository with ``diff`` applied and the hidden tests restored, built by the runner's applier."""
    stage = scratch / f"stage-{label}"
    shutil.copytree(env / "tests" / "repo", stage / "repo", ignore=shutil.ignore_patterns(".git"))
    shutil.copytree(env / "tests" / "hidden", stage / "hidden")
    (stage / "patch.diff").write_text(diff.read_text() if diff else "")
    work = scratch / f"work-{label}"
    if diff is None:
        shutil.copytree(stage / "repo", work / "repo")
        shutil.copytree(stage / "hidden", work / "repo", dirs_exist_ok=True)
    elif apply_patch(str(stage), str(work)) != 0:
        raise ProbesRejected(f"{diff.name} does not apply to tests/repo")
    return work / "repo"


def _spec_groups(env: Path) -> dict[str, str]:
    """Test function name -> "f2p" or "p2p", from spec.json (parameters stripped)."""
    spec = json.loads((env / "tests" / "spec.json").read_text())
    groups: dict[str, str] = {}
    for group, key in (("f2p", "fail_to_pass"), ("p2p", "pass_to_pass")):
        for node in spec[key]:
            name = node.split("::")[-1].split("[")[0]
            if groups.setdefault(name, group) != group:
                raise ProbesRejected(f"test {name} is both fail-to-pass and pass-to-pass in spec.json")
    return groups


def _check_definitions(setup: str, probes: list[Probe], tests: dict[str, str]) -> None:
    ids = [probe_id for probe_id, _, _ in probes]
    if not 10 <= len(ids) <= 30:
        raise ProbesRejected(f"{len(ids)} probes; keep between 10 and 30")
    for probe_id, covers, expr in probes:
        if not _ID.fullmatch(probe_id) or ids.count(probe_id) > 1:
            raise ProbesRejected(f"probe id {probe_id!r} is not lowercase words joined by underscores, or not unique")
        if not covers or any(name != "issue" and name not in tests for name in covers):
            raise ProbesRejected(f"probe {probe_id} must cover tests that spec.json lists (or 'issue'): {covers}")
        try:
            compile(expr, f"<probe {probe_id}>", "eval")
        except SyntaxError as exc:
            raise ProbesRejected(f"probe {probe_id} is not a Python expression: {exc}") from None
    try:
        compile(setup, "<probes setup>", "exec")
    except SyntaxError as exc:
        raise ProbesRejected(f"SETUP is not valid Python: {exc}") from None
    covered = {name for _, covers, _ in probes for name in covers}
    missing = sorted(name for name, group in tests.items() if group == "f2p" and name not in covered)
    if missing:
        raise ProbesRejected(f"fail-to-pass tests that no probe covers: {', '.join(missing)}")


def _differing(values: list[Any], expected: list[Any], ids: list[str]) -> list[str]:
    return [probe_id for probe_id, got, want in zip(ids, values, expected) if not equal(want, got, None)]


def compute(env: Path, setup: str, probes: list[Probe]) -> tuple[dict[str, Any], list[tuple[str, list[str]]]]:
    """The content of tests/probes.json, and which probes each known-wrong solution fails. Raises
    ProbesRejected unless every rule in the module's docstring holds."""
    tests = _spec_groups(env)
    _check_definitions(setup, probes, tests)
    pairs = [(probe_id, expr) for probe_id, _, expr in probes]
    ids = [probe_id for probe_id, _ in pairs]
    reference = env / "solutions" / "reference.diff"
    report: list[tuple[str, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="deepgym-probes-") as tmp:
        scratch = Path(tmp)
        expected = evaluate(_prepare(env, scratch, "reference", reference), setup, pairs)
        bad = [(probe_id, value) for probe_id, value in zip(ids, expected)
               if isinstance(value, dict) and ("failed" in value or "raises" in value)
               and not ("raises" in value and probe_id.endswith("_raises"))]
        if bad:
            raise ProbesRejected(f"on the reference fix these probes fail or raise (name a probe that should raise "
                                 f"..._raises; return plain JSON data): {bad}")
        again = evaluate(_prepare(env, scratch, "reference-again", reference), setup, pairs)
        if json.dumps(again) != json.dumps(expected):
            raise ProbesRejected(f"two runs on the reference fix disagree: {_differing(again, expected, ids)}")
        for pair, want in zip(pairs, expected):
            alone = evaluate(_prepare(env, scratch, f"alone-{pair[0]}", reference), setup, [pair])
            if not equal(want, alone[0], None):
                raise ProbesRejected(f"probe {pair[0]} gives another value when evaluated alone: {alone[0]} != {want}")
        unfixed = evaluate(_prepare(env, scratch, "unfixed", None), setup, pairs)
        differ = set(_differing(unfixed, expected, ids))
        for probe_id, covers, _ in probes:
            fixes = any(name == "issue" or tests[name] == "f2p" for name in covers)
            if fixes and probe_id not in differ:
                raise ProbesRejected(f"probe {probe_id} covers a fail-to-pass behaviour, but the unfixed repository "
                                     "already gives the expected value")
            if not fixes and probe_id in differ:
                raise ProbesRejected(f"probe {probe_id} covers only pass-to-pass tests, but the unfixed repository "
                                     "gives another value: it asks for more than the tests do")
        report.append(("unfixed repository", [probe_id for probe_id in ids if probe_id in differ]))
        for diff in sorted((env / "solutions").glob("wrong_*.diff")):
            failed = _differing(evaluate(_prepare(env, scratch, diff.stem, diff), setup, pairs), expected, ids)
            if not failed:
                raise ProbesRejected(f"{diff.name} passes every probe: add a probe that tells it apart")
            report.append((diff.name, failed))
    content = {"setup": setup, "probes": [{"id": probe_id, "expr": expr, "expected": value}
                                          for (probe_id, expr), value in zip(pairs, expected)]}
    return content, report


def write_probes(env: Path, setup: str, probes: list[Probe]) -> int:
    """Compute and write ``env``/tests/probes.json; print what each known-wrong fix fails. Returns an exit status."""
    output = env / "tests" / "probes.json"
    try:
        content, report = compute(env, setup.lstrip("\n"), probes)
    except ProbesRejected as exc:
        print(f"make_probes: {env.name}: {exc}\nmake_probes: {output} was left as it was", file=sys.stderr)
        return 1
    output.write_text(json.dumps(content, indent=2) + "\n")
    print(f"{env.name}: wrote {len(probes)} probes to tests/probes.json")
    for label, failed in report:
        print(f"  {label}: {len(failed)} of {len(probes)} probes differ: {', '.join(failed)}")
    return 0
