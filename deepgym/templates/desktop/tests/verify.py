"""signup_form's verifier: the recorder's log against the variant's parameters.

Guards (any failing scores 0): exactly one submission, and nothing the recorder refused. Progress: each
field of the one submission that matches counts equally."""


def verify(log, params):
    submits = [entry["event"] for entry in log["events"] if entry["event"].get("type") == "submit"]
    refused = {why: count for why, count in log["refused"].items() if count}
    cases = [{"id": "guard:submitted_once", "passed": len(submits) == 1, "expected": 1, "actual": len(submits)},
             {"id": "guard:nothing_refused", "passed": not refused, "expected": {}, "actual": refused}]
    form = submits[-1].get("form", {}) if len(submits) == 1 and isinstance(submits[-1].get("form"), dict) else {}
    wanted = {"name": params["name"], "email": params["email"], "password": params["password"],
              "plan": params["plan"], "newsletter": params["newsletter"], "terms": True}
    progress = [{"id": f"field:{key}", "passed": form.get(key) == value, "expected": value,
                 "actual": form.get(key)} for key, value in wanted.items()]
    cases += progress
    guards_hold = all(case["passed"] for case in cases[:2])
    score = sum(case["passed"] for case in progress) / len(progress) if guards_hold else 0.0
    failed = [case["id"] for case in cases if not case["passed"]]
    return {"score": score, "passed": score == 1.0, "cases": cases,
            "details": "every check passed" if not failed else f"failed: {', '.join(failed)}"}
