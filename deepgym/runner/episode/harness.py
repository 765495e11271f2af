"""The one verifier harness of every episode, shell (:mod:`verify`) and desktop (the desktop image's supervisor)
alike: prove an agent's uids quiet, run a command as a uid under a wall-clock limit, run an environment's
``verify.py`` in a fresh folder of the verifier's uid, and attribute its run as a report.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable

from ..confine.processes import Processes
from ..confine.supervise import Supervised
from ..protocol import DONE, REPORT, event_line, finite_score

# Two scans this far apart must both show no live process of the agent's uid.
QUIET_RECHECK_S = 0.05
VERIFIER_OUTPUT_BYTES = 1 << 20
STDIN_BYTES = 60 << 10
READING = "deepgym-verifier: reading"


def harness(positional: tuple[str, ...]) -> str:
    """The verifier's harness, shell and desktop alike: import verify.py from its own folder, say when it starts
    reading, call ``verify`` with request.json's ``positional`` entries in order and the others by name, print
    one report. Verifiers see ``request`` as it was written (a verifier may read ``__main__.request``). It
    enters its folder itself: a process changes directory before it changes uid, and root may not enter the
    verifier's folder (mode 0700, no CAP_DAC_OVERRIDE)."""
    return ("import json, os, sys\n"
            "os.chdir(sys.argv[1])\n"
            "sys.path.insert(0, '.')\n"
            "with open('request.json') as f:\n"
            "    request = json.load(f)\n"
            "import verify\n"
            f"print({READING!r}, flush=True)\n"
            f"extra = {{name: value for name, value in request.items() if name not in {positional!r}}}\n"
            f"report = verify.verify({''.join(f'request[{name!r}], ' for name in positional)}**extra)\n"
            "print(json.dumps(report), flush=True)\n")


def quiesce(processes: Processes) -> str | None:
    """Kill every process of the uids of ``processes`` and prove it; returns why it could not, or None."""
    for _ in range(3):
        processes.kill_all()
        if not processes.alive():
            time.sleep(QUIET_RECHECK_S)
            if not processes.alive():
                return None
    return f"processes of uids {sorted(processes.uids)} were still alive after three kill sweeps: {processes.alive()}"


def run(processes: Processes, argv: list[str], *, uid: int, cwd: str, stdin: bytes, timeout_s: float,
        keep: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``argv`` as ``uid`` with ``stdin``, a wall-clock limit and at most ``keep`` bytes of stdout kept;
    ``env`` adds to the clean environment (:meth:`Processes.spawn`). A ``cwd`` that ``uid`` cannot enter is a
    run that failed with status 126, never an exception.

    ``stdin`` (a probe's input, the environment's and small) fits in a pipe's buffer, so it is written and
    closed before the process starts: it reads it to its end and never blocks the runner."""
    if len(stdin) > STDIN_BYTES:
        raise ValueError(f"stdin of {len(stdin)} bytes is more than a pipe holds ({STDIN_BYTES})")
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, stdin)
        os.close(write_end)
        proc = processes.spawn(argv, cwd=cwd, stdin=read_end, uid=uid, env=env)
    except OSError as exc:
        if exc.filename != cwd:
            raise
        # Every caller's cwd is the agent's workspace (or /): the agent owns it and may take every right from
        # it (chmod 000), so a process that cannot enter it ran and failed, as a shell's `cd` would.
        return {"exit_code": 126, "timed_out": False, "stdout": "", "stderr": f"cannot enter {cwd}: {exc.strerror}"}
    finally:
        os.close(read_end)
    supervised = Supervised(processes, proc, keep_stdout=keep)
    try:
        ending = supervised.wait(processes.watch(), for_line=False, cpu_limit_s=timeout_s, wall_limit_s=timeout_s,
                                 output_limit=1 << 62)
        return {"exit_code": ending.exit_code, "timed_out": ending.kind in ("cpu", "wall", "starved", "stalled"),
                "stdout": supervised.text("stdout"), "stderr": supervised.text("stderr")[-2000:]}
    finally:
        supervised.close()
        processes.confinement.end_session(proc.pid)


def run_verifier(processes: Processes, folder: str, verifier: bytes, request: dict[str, Any],
                 positional: tuple[str, ...], *, uid: int, timeout_s: float) -> dict[str, Any] | None:
    """Write ``verifier`` (verify.py) and ``request`` into ``folder`` (made already, ``uid``'s, mode 0700) as
    ``uid``, and run it there as ``uid`` under :func:`harness`: its run (see :func:`run`), or None when the files
    could not be written. The caller kills ``uid`` and removes the folder afterwards. The request may hold the
    agent's output and be large: it goes in a file, not through a pipe."""
    given = json.dumps(request).encode()

    def write() -> int:
        return _write(os.path.join(folder, "verify.py"), verifier) or _write(os.path.join(folder, "request.json"), given)

    if processes.confinement.as_user(uid, write) != 0:
        return None
    processes.homes[uid] = folder
    return run(processes, [sys.executable, "-I", "-B", "-c", harness(positional), folder], uid=uid, cwd="/", stdin=b"",
               timeout_s=timeout_s, keep=VERIFIER_OUTPUT_BYTES)


def verifier_report(ran: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """The verifier's run (:func:`run_verifier`, ``timeout_s`` its limit) as a report, attributed by whether it had
    started reading the agent's state."""
    lines = ran["stdout"].splitlines()
    reading = READING in lines
    if ran["timed_out"]:
        if not reading:
            return {"error_type": "verifier_timeout",
                    "details": f"the verifier did not start within {timeout_s:g}s"}
        return {"score": 0.0, "passed": False, "error_type": "solution_timeout",
                "details": f"the verifier ran past {timeout_s:g}s reading the agent's state"}
    if not reading:
        return {"error_type": "verifier_error",
                "details": f"the verifier failed before it read anything: {ran['stderr'][-1500:]}"}
    try:
        report = json.loads(lines[-1])
        score = finite_score(report.get("score"))
    except (ValueError, IndexError, AttributeError):
        report, score = None, None
    if ran["exit_code"] != 0 or not isinstance(report, dict):
        return {"score": 0.0, "passed": False, "error_type": "solution_error",
                "details": f"the verifier failed on the agent's state: {ran['stderr'][-1500:]}"}
    if score is None:
        return {"error_type": "invalid_score", "details": f"the verifier's score {report.get('score')!r} is not "
                                                          f"a finite number in [0, 1]"}
    passed = bool(report.get("passed", score == 1.0))
    error_type = None if passed else report.get("error_type", "wrong_answer")
    return {"score": score, "passed": passed, "error_type": error_type,
            "details": str(report.get("details", "")), "cases": list(report.get("cases", []))}


def verifier_folder(processes: Processes, uid: int, scratch: str, nonce: str) -> tuple[str, dict[str, Any] | None]:
    """A fresh folder of ``uid``'s (mode 0700) in ``scratch``, nothing of the agent's in it: its path, and the
    report when it could not be made (:func:`no_room`). :func:`release` it afterwards."""
    folder = os.path.join(scratch, f"deepgym-verifier-{nonce[:16]}")
    problem = processes.confinement.make_dir(uid, folder, 0o700)
    return folder, None if problem is None else no_room(problem, scratch)


def release(processes: Processes, uid: int, folder: str) -> str | None:
    """Kill every process of the verification and prove it, then remove ``uid``'s ``folder``: why the kill could
    not be proved, or None."""
    problem = quiesce(processes)
    processes.confinement.remove_dir(uid, folder)
    return problem


def no_room(problem: str, scratch: str) -> dict[str, Any]:
    """A folder of the verifier's could not be made in ``scratch``: the agent's doing when it filled that file
    system (blocks or inodes), ours otherwise."""
    space = os.statvfs(scratch)
    if space.f_bavail * space.f_frsize < 1 << 20 or space.f_favail < 16:
        return {"score": 0.0, "passed": False, "error_type": "policy_sandbox_failure",
                "details": f"the agent filled {scratch}, so the verifier had no room to run"}
    return {"error_type": "verifier_error", "details": problem}


def _write(path: str, data: bytes) -> int:
    with open(path, "wb") as f:
        f.write(data)
    return 0


def serve_command(module: str, argv: list[str], parse: Callable[[bytes], Any], nonce: Callable[[Any], str],
                  act: Callable[[Any, str, Callable[..., None]], dict[str, Any]]) -> int:
    """The main of an in-sandbox episode side (``setup|verify``, one JSON request on stdin): ``parse`` reads the
    request (ValueError, TypeError, KeyError: unreadable, exit 2), ``act(request, command, emit)`` gives the
    report, and the events (``in_play`` from ``act``, one ``report``, ``done``) go to stdout under the request's
    ``nonce``. A failure of ours is ``verifier_error``, never the agent's."""
    if argv not in (["setup"], ["verify"]):
        print(f"usage: python3 -m {module} setup|verify < request.json", file=sys.stderr)
        return 2
    try:
        request = parse(sys.stdin.buffer.read())
        said = nonce(request)
    except (ValueError, TypeError, KeyError) as exc:
        print(f"{module}: unreadable request: {exc}", file=sys.stderr)
        return 2

    def emit(event: str, payload: dict | None = None) -> None:
        sys.stdout.write(event_line(said, event, payload))
        sys.stdout.flush()

    try:
        report = act(request, argv[0], emit)
    except Exception:  # noqa: BLE001 - a failure of ours is never the agent's
        import traceback

        report = {"error_type": "verifier_error", "details": f"{module} failed:\n" + traceback.format_exc(limit=8)}
    emit(REPORT, {"report": report})
    emit(DONE, {"wall_s": 0.0, "runner_cpu_s": round(time.process_time(), 3), "submission_cpu_s": 0.0})
    return 0
