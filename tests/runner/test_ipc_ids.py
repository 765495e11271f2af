"""warm mode's SysV IPC check (deepgym.runner.cleanup.IpcIds) against this host's kernel, in an IPC namespace of
its own: the ids it predicts are the kernel's over many wraps of the index cycle (no clean sample retires a
container), and any object made between two probes, however many, is seen."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from support import ROOT, unavailable

CHECK = """
import ctypes, json
from deepgym.runner.cleanup import IPC_CREAT, IPC_PRIVATE, IPC_RMID, IpcIds
ids = IpcIds()
first = ids.moved()
clean = [ids.moved() for _ in range(300)]
libc = ctypes.CDLL(None)
seen = {}
for made in (1, 2, 63, 64, 65, 128):
    for _ in range(made):
        libc.shmctl(libc.shmget(IPC_PRIVATE, 1, IPC_CREAT | 0o600), IPC_RMID, None)
    seen[made] = ids.moved()
    ids.moved()  # where they stand now
print(json.dumps({"first": first, "clean": [c for c in clean if c], "seen": seen, "cycles": ids._cycles}))
"""


def test_clean_probes_follow_the_kernel_and_any_object_made_between_them_is_seen():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        unavailable("an IPC namespace of its own needs root and unshare(1)")
    result = subprocess.run(["unshare", "--ipc", sys.executable, "-c", CHECK], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["first"] is None and found["clean"] == [], found  # 300 probes wrap a cycle of 64 four times
    assert all(cycle is not None for cycle in found["cycles"]), found
    assert all(why is not None and "SysV IPC objects were made" in why for why in found["seen"].values()), found
