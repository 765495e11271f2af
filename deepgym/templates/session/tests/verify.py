"""The hidden verifier of {{name}}: reads the state the agent left (as data; it never runs the agent's files)
and returns the report. Probes that run the agent's code go in session.json."""

import os

EXPECTED = {0: 56}


def verify(workspace, variant, probes):
    path = os.path.join(workspace, "answer.txt")
    try:
        with open(path, "rb") as f:
            answer = f.read(1000).decode("utf-8", "replace").strip()
    except OSError:
        answer = None
    ok = answer == str(EXPECTED[variant])
    return {"score": 1.0 if ok else 0.0, "passed": ok, "details": f"answer.txt holds {answer!r}",
            "cases": [{"id": "answer", "passed": ok, "expected": str(EXPECTED[variant]), "actual": repr(answer)}]}
