"""settings_tabs' verifier: the one saved set of settings against the variant's changes.

Guards (any failing scores 0): exactly one save, every setting the task did not name still at its default,
nothing the recorder refused. Progress: each named change, equally."""


def verify(log, params):
    saves = [entry["event"] for entry in log["events"] if entry["event"].get("type") == "save"]
    saved = saves[0].get("settings") if len(saves) == 1 and isinstance(saves[0].get("settings"), dict) else {}
    refused = {why: count for why, count in log["refused"].items() if count}
    changes, defaults = params["changes"], params["defaults"]
    untouched = {key: saved.get(key) for key in defaults if key not in changes}
    guards = [
        {"id": "guard:saved_once", "passed": len(saves) == 1, "expected": 1, "actual": len(saves)},
        {"id": "guard:others_untouched", "passed": not saved or all(saved.get(k) == defaults[k] for k in untouched),
         "expected": {k: defaults[k] for k in untouched}, "actual": untouched},
        {"id": "guard:nothing_refused", "passed": not refused, "expected": {}, "actual": refused},
    ]
    progress = [{"id": f"setting:{key}", "passed": saved.get(key) == value, "expected": value,
                 "actual": saved.get(key)} for key, value in changes.items()]
    cases = progress + guards
    score = sum(c["passed"] for c in progress) / len(progress) if all(g["passed"] for g in guards) else 0.0
    failed = [c["id"] for c in cases if not c["passed"]]
    return {"score": score, "passed": score == 1.0, "cases": cases,
            "details": "every check passed" if not failed else f"failed: {', '.join(failed)}"}
