"""expense_sheet's verifier: the one submitted report against the variant's amounts.

Guards (any failing scores 0): exactly one submission, nothing the recorder refused. Progress: each row whose
amount, read as a number, equals the expected one to the cent."""


def _cents(text):
    try:
        value = float(str(text).strip().replace(",", "."))
    except ValueError:
        return None
    return round(value * 100) if value == value and abs(value) < 1e9 else None


def verify(log, params):
    submits = [entry["event"] for entry in log["events"] if entry["event"].get("type") == "submit"]
    given = submits[0].get("amounts") if len(submits) == 1 and isinstance(submits[0].get("amounts"), dict) else {}
    refused = {why: count for why, count in log["refused"].items() if count}
    guards = [{"id": "guard:submitted_once", "passed": len(submits) == 1, "expected": 1, "actual": len(submits)},
              {"id": "guard:nothing_refused", "passed": not refused, "expected": {}, "actual": refused}]
    progress = [{"id": f"amount:{name}", "passed": _cents(given.get(name)) == _cents(value), "expected": value,
                 "actual": given.get(name)} for name, value in params["amounts"].items()]
    cases = progress + guards
    score = sum(c["passed"] for c in progress) / len(progress) if all(g["passed"] for g in guards) else 0.0
    failed = [c["id"] for c in cases if not c["passed"]]
    return {"score": score, "passed": score == 1.0, "cases": cases,
            "details": "every check passed" if not failed else f"failed: {', '.join(failed)}"}
