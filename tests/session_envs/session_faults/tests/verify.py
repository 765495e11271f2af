"""A verifier that fails on purpose, one way per variant (tests/session/test_sessions.py):

0 works: 1.0 when done.txt says yes; 1 loops forever after reading; 2 raises after reading; 3 returns a score
out of range; 4 fails on import, before reading; 5 hangs on import, before reading."""

import __main__
import os
import time

VARIANT = __main__.request["variant"]
if VARIANT == 4:
    raise ImportError("a broken verifier")
if VARIANT == 5:
    time.sleep(3600)


def verify(workspace, variant, probes):
    path = os.path.join(workspace, "done.txt")
    done = os.path.isfile(path) and open(path).read().strip() == "yes"
    if variant == 1:
        while True:
            pass
    if variant == 2:
        raise ValueError("the verifier tripped over the agent's state")
    if variant == 3:
        return {"score": 2.0}
    return {"score": 1.0 if done else 0.0, "passed": done, "details": "done.txt says yes" if done else "not done"}
