"""Run the test suite in lanes by marker, one pytest run each, and sum them up.

    python scripts/lanes.py                 # every lane, in order
    python scripts/lanes.py docker desktop  # the lanes named

A lane is a marker expression (pyproject.toml's markers). The docker lane runs in two processes (pytest-xdist, a
test file per process at a time, so that a file's fixtures are made once): most of its time is waiting on containers
and deadlines, which two processes overlap. A docker test shares the engine with other clients: it finds its
containers by its own run id or owner, names its test images its own way, and counts admission slots in a folder of
its own. A test that needs the engine and the CPUs to itself (it stops the engine, removes a shared image, loads
every CPU, or leaves orphans that any other client's start would reap) is marked ``exclusive`` and runs alone, in
the last lane. Each lane runs even when an earlier one failed, so one broken lane does not hide the state of the
others; every test has pyproject.toml's per-test timeout, so a hang fails that test with a stack instead of stalling
the run. At the end: each lane's counts and time, the 20 slowest tests of the whole run, every failed test with the
first line of its failure (so that a log's tail names them), and one closing line of counts. The exit status is 0
only when every lane passed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

LANES = {
    "unit": "not docker and not verl and not trl and not desktop and not ray and not exclusive",
    "docker": "docker and not verl and not trl and not desktop and not ray and not exclusive",
    "integrations": "(verl or trl) and not desktop and not ray and not exclusive",
    "desktop": "desktop and not ray and not exclusive",
    "ray": "ray and not exclusive",
    "exclusive": "exclusive",
}
# pytest arguments of a lane beyond its markers.
PARALLEL = {"docker": ["--numprocesses=2", "--dist=loadfile"]}
SLOWEST = 20


def counts(report: Path) -> tuple[dict[str, int], list[tuple[float, str]], list[str]]:
    """The lane's outcome counts, each test's time, and each failure (the test and its message's first line),
    from its JUnit XML report."""
    totals = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0}
    times, failures = [], []
    if not report.is_file():
        return totals, times, failures
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        times.append((float(case.get("time", 0)), test))
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            totals["failed"] += 1
            for child in case:
                if child.tag in ("failure", "error"):
                    message = (child.get("message") or child.text or "").strip().splitlines() or [""]
                    failures.append(f"{test} ({child.tag}): {message[0][:300]}")
        elif "skipped" in kinds:
            skipped = next(child for child in case if child.tag == "skipped")
            totals["xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"] += 1
        else:
            totals["passed"] += 1
    return totals, times, failures


def main(names: list[str]) -> int:
    unknown = [name for name in names if name not in LANES]
    if unknown:
        print(f"lanes: unknown lane(s) {unknown}; the lanes are {list(LANES)}", file=sys.stderr)
        return 2
    summary, every_time, every_failure, failed = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="deepgym-lanes-") as folder:
        for name in names or list(LANES):
            report = Path(folder) / f"{name}.xml"
            print(f"\n===== lane {name}: -m '{LANES[name]}' =====", flush=True)
            started = time.monotonic()
            code = subprocess.call([sys.executable, "-m", "pytest", "-m", LANES[name], *PARALLEL.get(name, []),
                                    f"--junitxml={report}", "--durations=10"])
            totals, times, failures = counts(report)
            every_time += times
            every_failure += failures
            summary.append((name, code, time.monotonic() - started, totals))
            if code != 0:  # 5, no test collected, fails too: every lane must run tests
                failed.append(name)
    print("\n===== lanes =====")
    for name, code, took, totals in summary:
        print(f"{name:13} exit {code}  {took / 60:5.1f} min  " + ", ".join(f"{n} {k}" for k, n in totals.items()))
    print(f"\n===== {SLOWEST} slowest tests =====")
    for seconds, test in sorted(every_time, reverse=True)[:SLOWEST]:
        print(f"{seconds:8.1f} s  {test}")
    total = {key: sum(totals[key] for *_, totals in summary) for key in ("passed", "failed", "skipped")}
    if every_failure:
        print("\n===== failed tests =====")
        print("\n".join(every_failure))
    if failed:
        print(f"\nlanes failed: {', '.join(failed)}")
    print(f"\n{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
