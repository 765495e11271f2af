"""A Harbor image's ENTRYPOINT, which starts the task's services, run around a deepgym episode.

Harbor starts a task's container with its ENTRYPOINT and ``sleep infinity`` as its command, as root, and the
services it starts live through the agent's turn and the verifier's. deepgym's container starts with its own
init and the agent's processes are killed before anything is judged, so the entrypoint runs twice, never as
root: once as the agent's uid when the workspace is ready (the agent sees the services, and they are its
processes, killed with the rest before grading), and once more as the verifier's uid just before ``test.sh``
(killed with the verifier's processes after it). What a service keeps in files the agent could write (its
workspace) carries over from the first run to the second; what it keeps in memory does not.

Each run is detached (its own session, stdio on /dev/null, so nothing holds the runner's stream open) and
followed by the task's health check when it has one (``[environment.healthcheck]``: a shell command that
exits 0 once the services are up), tried until it passes or its budget is spent.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

from ..confine.processes import CLEAN_ENV, Processes
from .harness import run

HARBOR_COMMAND = ["sleep", "infinity"]
HEALTH_OUTPUT_BYTES = 4096


def start(processes: Processes, config: dict[str, Any], *, uid: int, cwd: str, home: str) -> str | None:
    """Start ``config``'s entrypoint (session.json's ``script``) as ``uid`` in ``cwd`` and wait for its health
    check; why it did not come up healthy within ``config['health_s']``, or None (also when there is none)."""
    argv = config.get("entrypoint")
    if not argv:
        return None
    env = {**CLEAN_ENV, **{str(k): str(v) for k, v in config.get("env", {}).items()}, "HOME": home, "TMPDIR": home}
    try:
        subprocess.Popen([*argv, *HARBOR_COMMAND], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, cwd=cwd, env=env, start_new_session=True, close_fds=True,
                         **processes.confinement.spawn_options(uid))
    except OSError as exc:
        return f"the image's entrypoint {argv} could not start: {exc}"
    check = config.get("healthcheck")
    if not check:
        return None
    return _healthy(processes, check, float(config.get("health_s", 30.0)), uid=uid, cwd=cwd, env=env)


def _healthy(processes: Processes, check: dict[str, Any], budget_s: float, *, uid: int, cwd: str,
             env: dict[str, str]) -> str | None:
    deadline = time.monotonic() + budget_s
    interval = float(check.get("interval_sec", 5.0))
    said = ""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return f"the health check `{check['command']}` did not pass within {budget_s:g} s: {said[-300:]!r}"
        ran = run(processes, ["/bin/sh", "-c", str(check["command"])], uid=uid, cwd=cwd, stdin=b"",
                  timeout_s=min(float(check.get("timeout_sec", 30.0)), left), keep=HEALTH_OUTPUT_BYTES, env=env)
        if ran["exit_code"] == 0 and not ran["timed_out"]:
            return None
        said = ran["stdout"] + ran["stderr"]
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))
