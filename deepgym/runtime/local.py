"""The local runtime: the same runner as a host subprocess, for developing environments only.

It has no isolation at all: model-written code runs as you, on your host, with your files and your network.
It therefore needs an explicit opt-in (``allow_local=True`` or ``DEEPGYM_ALLOW_LOCAL=1``) and warns loudly
when it starts. Limits on CPU time and output still apply; memory is limited per process only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings

from ..environments import Environment
from ..errors import LocalModeNotAllowedError
from ..runner.protocol import Request
from ..verdict import Observation
from .base import Runtime

OPT_IN_VARIABLE = "DEEPGYM_ALLOW_LOCAL"


class LocalRuntime(Runtime):
    """Runs ``python -m deepgym.runner --unconfined`` on this host."""

    name = "local"

    def __init__(self, *, allow_local: bool | None = None, max_parallel: int = 0):
        allowed = allow_local if allow_local is not None else os.environ.get(OPT_IN_VARIABLE) == "1"
        if not allowed:
            raise LocalModeNotAllowedError(
                "mode='local' runs model-written code on this host as your user, with no isolation. It is for "
                f"developing environments only. Opt in with DeepGym(mode='local', allow_local=True) or "
                f"{OPT_IN_VARIABLE}=1, or use mode='docker'.")
        warnings.warn("deepgym local mode: submissions run UNCONFINED on this host as your user. Never train "
                      "with it.", RuntimeWarning, stacklevel=3)

    def judge(self, env: Environment, request: Request) -> Observation:
        started = time.monotonic()
        command = [sys.executable, "-I", "-B", "-m", "deepgym.runner", "--unconfined", "--env-dir", str(env.tests_dir)]
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(request.to_json().encode(), timeout=request.limits.host_deadline_s)
            deadline_hit = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            deadline_hit = True
        return Observation(runtime=self.name, exit_code=proc.returncode, deadline_hit=deadline_hit, stdout=stdout,
                           stderr_tail=stderr[-8192:].decode("utf-8", "replace"),
                           elapsed_s=time.monotonic() - started)
