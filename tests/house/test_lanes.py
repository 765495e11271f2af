"""scripts/lanes.py reads each lane's JUnit report: its counts, and the failures it names at the end of the run
(CI shows only a log's tail, so a failed test must be named there, not only in its lane's own output)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lanes.py"
REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.a" name="test_ok" time="1.5"/>
<testcase classname="tests.a" name="test_bad" time="0.2"><failure message="AssertionError: 1 != 2&#10;more">trace</failure></testcase>
<testcase classname="tests.b" name="test_setup" time="0.1"><error message="fixture 'x' failed">trace</error></testcase>
<testcase classname="tests.b" name="test_gone" time="0"><skipped type="pytest.skip" message="no"/></testcase>
<testcase classname="tests.b" name="test_known" time="0"><skipped type="pytest.xfail" message="known"/></testcase>
</testsuite></testsuites>
"""


def load_lanes():
    """scripts/lanes.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("lanes", SCRIPT)
    lanes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lanes)
    return lanes


def test_a_lanes_report_gives_its_counts_times_and_named_failures(tmp_path):
    lanes = load_lanes()
    report = tmp_path / "lane.xml"
    report.write_text(REPORT)
    totals, times, failures = lanes.counts(report)
    assert totals == {"passed": 1, "failed": 2, "skipped": 1, "xfailed": 1}
    assert max(times) == (1.5, "tests.a::test_ok")
    assert failures == ["tests.a::test_bad (failure): AssertionError: 1 != 2",
                        "tests.b::test_setup (error): fixture 'x' failed"]
    assert lanes.counts(tmp_path / "missing.xml") == ({"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0}, [], [])


def test_every_combination_of_markers_falls_in_exactly_one_lane():
    """The lanes partition the suite: a test runs once, whatever markers it carries."""
    import itertools
    import tomllib

    from _pytest.mark.expression import Expression

    lanes = load_lanes()
    declared = tomllib.loads((SCRIPT.parents[1] / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    markers = [line.split(":")[0] for line in declared["markers"]]
    assert "exclusive" in markers and set(lanes.PARALLEL) <= set(lanes.LANES)
    expressions = {name: Expression.compile(expression) for name, expression in lanes.LANES.items()}
    for chosen in itertools.chain.from_iterable(itertools.combinations(markers, n) for n in range(len(markers) + 1)):
        matched = [name for name, expression in expressions.items() if expression.evaluate(lambda m: m in chosen)]
        assert len(matched) == 1, (chosen, matched)
