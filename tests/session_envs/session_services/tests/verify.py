"""Fixture verifier: 1.0 when the workspace is still while it reads (nothing the agent or its service left
writes any more) and the service's health body was "ok"; the details say what it saw."""

import os
import time


def _sizes(workspace):
    sizes = {}
    for name in sorted(os.listdir(workspace)):
        try:
            sizes[name] = os.lstat(os.path.join(workspace, name)).st_size
        except OSError:
            sizes[name] = None
    return sizes


def verify(workspace, variant, probes, services):
    before = _sizes(workspace)
    time.sleep(0.3)
    after = _sizes(workspace)
    still = before == after
    ok = still and services["app"]["body"].strip() == "ok"
    return {"score": 1.0 if ok else 0.0, "passed": ok,
            "details": f"still={still} body={services['app']['body'][:40]!r} files={sorted(after)}"}
