"""What a submission can write, exactly as docs/security.md says: its scratch space under /tmp,
/dev/shm, and POSIX message queues in /dev/mqueue (all in memory, size-limited, gone with the container)."""

from __future__ import annotations

import json

import pytest

from support import ensure_images, fenced

pytestmark = pytest.mark.docker

# Walks every folder but /proc and /sys, tries to create a file in each, and reports where it could.
PROBE = '''
import json, os
def coin_change(coins, amount):
    writable = []
    for root, folders, _ in os.walk("/"):
        if root in ("/proc", "/sys"):
            folders[:] = []
            continue
        try:
            with open(os.path.join(root, ".deepgym-write-probe"), "w"):
                pass
            writable.append(root)
        except OSError:
            pass
    raise RuntimeError("WRITABLE=" + json.dumps(sorted(writable)))
'''


def test_a_submission_writes_only_to_tmp_dev_shm_and_dev_mqueue(gym):
    ensure_images("coin_change")
    verdict = gym.run("coin_change", fenced(PROBE))
    writable = json.loads(verdict.details.split("WRITABLE=", 1)[1].split("]", 1)[0] + "]")
    outside_tmp = [path for path in writable if path != "/tmp" and not path.startswith("/tmp/")]
    assert outside_tmp == ["/dev/mqueue", "/dev/shm"]
    assert "/tmp" in writable
