"""todo_list's verifier: the last state the app recorded, against the variant's parameters.

Progress (a fraction): the item to tick is done, the item to delete is gone, the new item is there. Guards
(any failing scores 0): every other starting item is still there, unticked and unchanged; the new item
exists at most once and nothing else was added; nothing the recorder refused."""


def verify(log, params):
    events = [entry["event"] for entry in log["events"]]
    states = [event.get("items") for event in events if event.get("type") == "state"]
    final = states[-1] if states and isinstance(states[-1], list) else []
    items = [item for item in final if isinstance(item, dict)]
    texts = [item.get("text") for item in items]
    by_text = {item.get("text"): item for item in items}
    refused = {why: count for why, count in log["refused"].items() if count}
    others = [text for text in params["items"] if text not in (params["done_item"], params["delete_item"])]
    untouched = [text for text in others if text in by_text and not by_text[text].get("done")]
    added = [text for text in texts if text not in params["items"]]
    progress = [
        {"id": "progress:ticked", "passed": bool(by_text.get(params["done_item"], {}).get("done")),
         "expected": True, "actual": by_text.get(params["done_item"], {}).get("done")},
        {"id": "progress:deleted", "passed": params["delete_item"] not in by_text, "expected": "absent",
         "actual": "absent" if params["delete_item"] not in by_text else "present"},
        {"id": "progress:added", "passed": params["new_item"] in texts, "expected": params["new_item"],
         "actual": added},
    ]
    guards = [
        {"id": "guard:others_untouched", "passed": len(untouched) == len(others), "expected": others,
         "actual": untouched},
        {"id": "guard:no_duplicate_or_extra", "passed": added in ([], [params["new_item"]]),
         "expected": [params["new_item"]], "actual": added},
        {"id": "guard:nothing_refused", "passed": not refused, "expected": {}, "actual": refused},
    ]
    cases = progress + guards
    score = sum(c["passed"] for c in progress) / len(progress) if all(g["passed"] for g in guards) else 0.0
    failed = [c["id"] for c in cases if not c["passed"]]
    return {"score": score, "passed": score == 1.0, "cases": cases,
            "details": "every check passed" if not failed else f"failed: {', '.join(failed)}"}
