"""The node's reaper of one episode's sandbox: a process of its own, started by the episode's actor
(:mod:`deepgym.sandbox.ray.host`, through :func:`start_reaper`), that waits for the actor's process to end and then
removes the sandboxes carrying the episode's label with the node's provider.

Ray ends an actor whose owner died (the caller) without running its exit handlers, so the actor cannot remove
its sandbox itself then. Ray also ends a worker's child processes with the worker, so the reaper is no child of
the actor's: :func:`start_reaper` runs a shell that starts the reaper in a session of its own, says its pid and
exits at once. A clean close stops the reaper (SIGTERM), and it removes nothing. A whole node that dies takes
the reaper along, and the sandbox's own lifetime ends that sandbox.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ..docker.owners import process_start_time

POLL_S = 0.5
MODULE = "deepgym.sandbox.ray.reaper"
DETACH = 'setsid "$@" </dev/null >/dev/null 2>&1 & echo $!'
"""The shell that starts the reaper in a session of its own and exits at once, saying the reaper's pid."""


def start_reaper(label: str, value: str) -> int:
    """Start the reaper of the sandboxes labelled ``label=value`` for this process; returns the reaper's pid."""
    first = subprocess.run(["sh", "-c", DETACH, "sh", sys.executable, "-m", MODULE, str(os.getpid()), label, value],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True, timeout=60)
    return int(first.stdout.strip())


def main(argv: list[str]) -> int:
    pid, label, value = int(argv[0]), argv[1], argv[2]
    born = process_start_time(pid)
    while born is not None and process_start_time(pid) == born:
        time.sleep(POLL_S)
    from ..direct import make_direct
    from .node import NODE_MODE_VARIABLE

    provider = make_direct(os.environ.get(NODE_MODE_VARIABLE, "docker"), max_parallel=1)
    try:
        provider.sweep({label: value})
    finally:
        provider.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
