"""A program's case server (a "zygote"): one interpreter per sample that forks a fresh child for each case.

``python3 -m deepgym_runner.zygote MEMORY_MB NOFILE CPU_S PATH CONTROL_FD PRELOAD SWEEP``

Started by the runner as the submission's user, with the limits every worker gets (:func:`worker.confine`). At
start it imports the standard-library modules named in ``PRELOAD`` (comma-separated; the imports of the row
prelude) and compiles the program at ``PATH``. Compiling runs none of the program's code, and the zygote never
executes it: only its children do. So nothing the program does can reach the zygote's memory, and every case
starts from the same state, as a fresh interpreter would, at the cost of a fork instead of an interpreter start.

The zygote only ever holds the program. The runner keeps the cases' expected outputs and compares outputs
itself; a case's input reaches the zygote as a file descriptor it passes on unread.

Once the modules are imported (before the program is compiled) it sends ``{"ready": true}``. Then per case
the runner sends, on the ``CONTROL_FD`` socket (SOCK_SEQPACKET), ``{"cpu_s": N}`` with three
descriptors: the case's stdin, stdout and stderr. The zygote forks; the child puts them on 0, 1 and 2, lowers
its CPU limit to N seconds, and runs the compiled program as ``__main__`` with fresh globals, exiting as the
interpreter would (the exit status of ``sys.exit``, 1 after an uncaught exception, 120 when stdout cannot be
flushed), but without tearing down every module (see :func:`_finish`). The zygote waits for it, kills every other process of its user with ``kill(-1)`` when ``SWEEP`` is
1 (inside the sandbox that is what the child left behind: daemons cannot outlive their case), and replies
``{"exit": code}``, the child's exit status (negative: killed by that signal).

Children run as the zygote's own user, so the zygote makes itself hard to reach first: it is not dumpable (a
child cannot trace it or read its memory or file descriptors through /proc) and it blocks every signal that can
be blocked. A child can still kill or stop it; the runner then sees no reply, fails the case and starts a new
zygote. Its replies are the submission's data to the runner, like a worker's.
"""

from __future__ import annotations

import array  # noqa: F401 - socket.recv_fds needs it: imported before any case runs
import atexit
import builtins
import ctypes
import importlib
import json
import os
import resource
import signal
import socket
import sys
import types

from .worker import confine

PR_SET_DUMPABLE = 4
MAX_MESSAGE = 4096
STDIO = 3


def _set_dumpable(libc: ctypes.CDLL, dumpable: bool) -> None:
    """Raises OSError when the kernel refuses: a zygote that cannot hide itself must not serve."""
    if libc.prctl(PR_SET_DUMPABLE, int(dumpable), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def _exit_status(exc: SystemExit) -> int:
    """The status a fresh interpreter exits with on ``exc``: its code, 0 for None, 1 (after printing it) for
    anything else."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write(f"{code}\n")
    except BaseException:  # noqa: BLE001 - the submission may have broken stderr
        pass
    return 1


def _finish(status: int) -> None:
    """End the child as an interpreter ends after its program, without the teardown of every module and object
    (it costs more CPU than a typical case): wait for the program's threads, run its ``atexit`` callbacks, then
    flush stdout and stderr (status 120 when that fails, as Python exits)."""
    threading = sys.modules.get("threading")
    try:
        if threading is not None:
            threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - the interpreter reports these and exits all the same
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            status = 120
    os._exit(status & 0xFF if isinstance(status, int) else 1)


def _run_case(path: str, code: types.CodeType | None, error: BaseException | None) -> int:
    """In the child, once its descriptors and limits are set: the program as ``__main__``, as ``runpy.run_path``
    runs it. Returns the exit status, for :func:`_finish`."""
    sys.argv = [path]
    sys.setrecursionlimit(10_000)
    if error is not None:  # the program does not compile: it fails as it would at every start
        sys.excepthook(type(error), error, None)
        return 1
    module = types.ModuleType("__main__")
    module.__dict__.update({"__file__": path, "__cached__": None, "__loader__": None, "__package__": None,
                            "__spec__": None, "__builtins__": builtins})
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        return _exit_status(exc)
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports an uncaught exception
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def serve(control: socket.socket, libc: ctypes.CDLL, path: str, code: types.CodeType | None,
          error: BaseException | None, sweep: bool) -> None:
    """Fork one child per request until the runner closes the socket (a child never returns)."""
    while True:
        try:
            message, fds, _flags, _address = socket.recv_fds(control, MAX_MESSAGE, STDIO)
        except OSError:
            return None
        if not message:
            return None
        try:
            cpu_s = int(json.loads(message)["cpu_s"])
        except (ValueError, KeyError, TypeError):
            return None
        if len(fds) != STDIO:
            return None
        pid = os.fork()
        if pid == 0:
            control.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            for fd in fds:
                if fd >= STDIO:
                    os.close(fd)
            cpu_s = min(cpu_s, resource.getrlimit(resource.RLIMIT_CPU)[1])
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
            try:
                _set_dumpable(libc, True)  # as any process is: /proc/self stays its own
            except OSError:
                pass  # still hidden, which only the child itself can notice
            signal.pthread_sigmask(signal.SIG_SETMASK, ())
            _finish(_run_case(path, code, error))
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        if sweep:
            try:
                os.kill(-1, signal.SIGKILL)  # every process of this user but the zygote itself
            except ProcessLookupError:
                pass
        try:
            control.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
        except OSError:
            return None


def main(argv: list[str]) -> int:
    memory_mb, nofile, cpu_s, path, control_fd, preload, sweep = argv
    confine(int(memory_mb), int(nofile), int(cpu_s))
    libc = ctypes.CDLL(None, use_errno=True)
    _set_dumpable(libc, False)
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    for name in filter(None, preload.split(",")):
        importlib.import_module(name)
    control = socket.socket(fileno=int(control_fd))
    control.send(b'{"ready": true}')  # the trusted part of the start is done: from here on, it is the program's
    code, error = None, None
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
    except BaseException as exc:  # noqa: BLE001 - SyntaxError, MemoryError: each case reports it
        error = exc
    serve(control, libc, path, code, error, sweep == "1")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
