"""Hidden verifier of shell_repair_script: the probes ran the agent's textstats on hidden inputs; compare."""

import json

# Expected values of the hidden inputs in session.json, computed with the reference.
EXPECTED = {"median": [5, 1.5, 4.0, 4.0, 2.0, 5.5, 3.0], "top_words": [["apple", "banana"], ["alpha", "beta", "gamma"], ["three", "one", "two"], ["x", "y"], ["dog", "cat"]]}


def verify(workspace, variant, probes):
    cases, passed = [], 0
    for name, wanted in EXPECTED.items():
        probe = probes.get(name, {})
        try:
            got = json.loads(probe.get("stdout", "").strip().splitlines()[-1])
        except (ValueError, IndexError):
            got = None
        for index, value in enumerate(wanted):
            actual = got[index] if isinstance(got, list) and index < len(got) else None
            ok = actual == value or (isinstance(actual, (int, float)) and isinstance(value, (int, float))
                                     and not isinstance(actual, bool) and abs(actual - value) < 1e-9)
            passed += ok
            cases.append({"id": f"{name}-{index}", "passed": ok, "expected": repr(value), "actual": repr(actual)[:200]})
    total = len(cases)
    failed = [case["id"] for case in cases if not case["passed"]]
    return {"score": 1.0 if not failed else 0.0, "passed": not failed,
            "details": f"{passed}/{total} hidden cases passed" + (f"; first failure: {failed[0]}" if failed else ""),
            "cases": cases}
