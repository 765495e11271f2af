"""The untrusted side of a function task. Runs as the submission's user, never as the runner.

Before any submission code runs it lowers its own limits (soft = hard, so the submission cannot raise them),
volunteers to be the first victim of an out-of-memory kill, and moves into a fresh scratch directory. Then it
loads the submission as module ``solution`` and answers calls: the runner sends arguments as JSON, the worker
replies with the return value as JSON. Only plain data crosses, so a returned object with a rigged ``__eq__``
is either encoded as the plain value it really holds or refused; the runner does every comparison.

Everything in this process is under the submission's control once its code has run, including this module's
functions. That is fine: all it can do is choose which plain values to send back.

Usage: python3 -m deepgym_runner.worker REQUESTS_FD RESPONSES_FD SCRATCH_ROOT MEMORY_MB NOFILE CPU_S
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import types


def _confine(memory_mb: int, nofile: int, cpu_s: int) -> None:
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    sys.setrecursionlimit(10_000)


def describe(exc: BaseException) -> str:
    """``Type: message`` for an exception whose ``__str__`` may itself be hostile."""
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - the submission defines this __str__
        message = "<unprintable>"
    return f"{type(exc).__name__}: {message}"[:2000]


def error_type(exc: BaseException) -> str:
    return "solution_oom" if isinstance(exc, MemoryError) else "solution_error"


def _send(out, message: dict) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def main(argv: list[str]) -> None:
    requests_fd, responses_fd = int(argv[0]), int(argv[1])
    scratch_root, memory_mb, nofile, cpu_s = argv[2], int(argv[3]), int(argv[4]), int(argv[5])
    _confine(memory_mb, nofile, cpu_s)
    scratch = tempfile.mkdtemp(prefix="solution-", dir=scratch_root)
    os.chdir(scratch)
    os.environ["HOME"] = scratch
    requests = os.fdopen(requests_fd, "rb")
    responses = os.fdopen(responses_fd, "wb")

    hello = json.loads(requests.readline())
    module = types.ModuleType("solution")
    module.__file__ = os.path.join(scratch, "solution.py")
    sys.modules["solution"] = module
    try:
        exec(compile(hello["code"], "solution.py", "exec"), module.__dict__)
        entry = module.__dict__.get(hello["entry_point"])
        if not callable(entry):
            raise NameError(f"the submission does not define a function named {hello['entry_point']!r}")
    except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are the submission's too
        _send(responses, {"event": "load_error", "error_type": error_type(exc), "error": describe(exc)})
        return
    _send(responses, {"event": "ready"})

    for line in requests:
        call = json.loads(line)
        try:
            value = entry(*call["args"])
            encoded = json.dumps({"id": call["id"], "ok": True, "value": value})
        except BaseException as exc:  # noqa: BLE001
            encoded = json.dumps({"id": call["id"], "ok": False, "error_type": error_type(exc),
                                  "error": describe(exc)})
        responses.write(encoded.encode() + b"\n")
        responses.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
