"""Zygotes: processes that fork a fresh child per request instead of the runner starting a fresh interpreter.

**The worker zygote** (:func:`start_workers`, the runner's side in :mod:`forked`) is forked from the runner
itself before it reads a request (from warm mode's server before it reads the first), drops the runner's
privileges and stays root: it forks each function worker and each program's case server, which switch to the
request's uid in :func:`_worker_child` before the submission's code is even read, and answers ``{"exit":
status}`` when it ends. It never receives a request, a case or an expected output, only a worker's argv, uid,
working directory, environment and descriptors, and the names of standard-library modules to import before it
forks (a row's prelude, :func:`_preload`: kept for every later worker, so a warm container imports them once).

**A program's case server**, below, is one process per sample, as the submission's user, that forks a fresh
child for each case. Where the runner has a worker zygote, that zygote forks the case server too (``{"main":
"case_server"}``), so a sample pays a fork instead of an interpreter start and the prelude's imports; elsewhere
the runner starts it as a fresh interpreter:

``python3 -m deepgym_runner.confine.zygote MEMORY_MB NOFILE CPU_S PATH CONTROL_FD PRELOAD SWEEP``

Run as the submission's user, with the limits every worker gets (:func:`worker.confine`). At
start it imports the standard-library modules named in ``PRELOAD`` (comma-separated; the imports of the row
prelude) and compiles the program at ``PATH``. Compiling runs none of the program's code, and the zygote never
executes it: only its children do. So nothing the program does can reach the zygote's memory, and every case
starts from the same state, as a fresh interpreter would, at the cost of a fork instead of an interpreter start.

The zygote only ever holds the program. The runner keeps the cases' expected outputs and compares outputs
itself; a case's input reaches the zygote as a file descriptor it passes on unread.

Once the modules are imported (before the program is compiled) it sends ``{"ready": true, "pid": PID}``:
the trusted part of its start tells the runner which process of the submission's user is the server, however
it was started. Then per case the runner sends, on the ``CONTROL_FD`` socket (SOCK_SEQPACKET),
``{"cpu_s": N}`` with three descriptors: the case's stdin, stdout and stderr. The zygote forks; the child puts
them on 0, 1 and 2, lowers its CPU limit to N seconds, and runs the compiled program as ``__main__`` with fresh
globals, exiting as the interpreter would (the exit status of ``sys.exit``, 1 after an uncaught exception, 120
when stdout cannot be flushed), but without tearing down every module (see :func:`_finish`). The zygote waits
for it, kills every other process of its user with ``kill(-1)`` when ``SWEEP`` is 1 (inside the sandbox that
is what the child left behind: daemons cannot outlive their case), and replies
``{"exit": code}``, the child's exit status (negative: killed by that signal).

Children run as the zygote's own user, so the zygote makes itself hard to reach first: it is not dumpable (a
child cannot trace it or read its memory or file descriptors through /proc) and it blocks every signal that can
be blocked. A child can still kill or stop it; the runner then sees no reply, fails the case and starts a new
zygote. Its replies are the submission's data to the runner, like a worker's.
"""

from __future__ import annotations

import _signal  # signal's C module: signal.py builds three enums at import, milliseconds per fresh runner
import atexit
import builtins
import ctypes
import fcntl
import os
import resource
import sys
import types

from .. import wire
from . import fdpass, worker
from .worker import confine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

PR_SET_DUMPABLE = 4
MAX_MESSAGE = 1 << 16
STDIO = 3
# A worker zygote's child's descriptors: stdin, stdout, stderr, then a worker's requests and replies (5) or a
# case server's control socket (4).
WORKER_FDS = (4, 5)
# Descriptors a child closes: far past any its zygote holds (the sandbox's nofile limit is small).
MAX_FD = 1 << 16


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


def fork_per_request(control: fdpass.Socket, counts: tuple[int, ...], child: Callable[[dict, list[int]], None],
                     sweep: bool, prepare: Callable[[dict], None] | None = None) -> None:
    """The loop of both zygotes: per message on ``control`` (a JSON object with one of ``counts`` descriptors), run
    ``prepare(message)`` when given, fork a child that runs ``child(message, descriptors)`` and never returns,
    wait for it, with ``sweep`` kill every other process of this user, and reply ``{"exit": status}``. Returns
    when the socket closes or a message is malformed."""
    while True:
        try:
            message, fds, _flags, _address = fdpass.recv_fds(control, MAX_MESSAGE, max(counts))
        except OSError:
            return None
        try:
            request = wire.loads(message) if message and len(fds) in counts else None
        except ValueError:
            request = None
        if not isinstance(request, dict):
            for fd in fds:
                os.close(fd)
            return None
        if prepare is not None:
            prepare(request)
        pid = os.fork()
        if pid == 0:
            control.close()
            child(request, fds)
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        if sweep:
            try:
                os.kill(-1, _signal.SIGKILL)  # every process of this user but the zygote itself
            except ProcessLookupError:
                pass
        try:
            control.send(wire.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
        except OSError:
            return None


def _on_stdio(fds: list[int]) -> None:
    """Put ``fds`` on descriptors 0, 1, 2... (by way of copies numbered past them, so that no target overwrites
    a source still to come) and close every other descriptor."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, len(fds)) for fd in fds]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(fds), MAX_FD)


def _case_child(path: str, code: types.CodeType | None, error: BaseException | None,
                libc: ctypes.CDLL) -> Callable[[dict, list[int]], None]:
    def child(request: dict, fds: list[int]) -> None:
        status = 1
        try:
            _on_stdio(fds)
            cpu_s = min(int(request["cpu_s"]), resource.getrlimit(resource.RLIMIT_CPU)[1])
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
            try:
                _set_dumpable(libc, True)  # as any process is: /proc/self stays its own
            except OSError:
                pass  # still hidden, which only the child itself can notice
            _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
            status = _run_case(path, code, error)
        finally:
            _finish(status)

    return child


def serve(control: fdpass.Socket, libc: ctypes.CDLL, path: str, code: types.CodeType | None,
          error: BaseException | None, sweep: bool) -> None:
    """Fork one child per case until the runner closes the socket (a child never returns)."""
    fork_per_request(control, (STDIO,), _case_child(path, code, error, libc), sweep)


# ------------------------------------------------------------------------------------------------ the worker zygote

def _mains() -> dict[str, tuple[Callable[[list[str]], int], str]]:
    """What a child of the worker zygote may run, by the name the runner's request gives (``main``), with the
    file its ``sys.argv[0]`` names: any other name fails the child."""
    return {"worker": (worker.main, worker.__file__), "case_server": (main, __file__)}


def _worker_child(request: dict, fds: list[int]) -> None:
    """In a child of the worker zygote: become the process a fresh ``python3 -m deepgym_runner.confine.worker``
    (or ``...confine.zygote``, for ``{"main": "case_server"}``) would be, then run it. ``fds`` are its stdin,
    stdout, stderr and then the descriptors its argv names (3 and 4: a worker's requests and replies; 3: a case
    server's control socket)."""
    status = 125
    try:
        _on_stdio(fds)
        os.setsid()
        uid = request["uid"]
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # the kernel clears every capability and makes the process non-dumpable
        _set_dumpable(ctypes.CDLL(None, use_errno=True), True)  # as after an exec: /proc/self is its own again
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        run, path = _mains()[request["main"]]
        sys.argv = [path, *request["argv"]]
        status = run(request["argv"])
    except SystemExit as exc:
        status = _exit_status(exc)
    except BaseException:  # noqa: BLE001 - reported as an interpreter reports an uncaught exception
        sys.excepthook(*sys.exc_info())
        status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(status & 0xFF if isinstance(status, int) else 1)


def _preload(request: dict) -> None:
    """Import the standard-library modules a worker's request names (a row's prelude) into the worker zygote,
    which then keeps them for every later worker: they are the runner's choice, not the submission's, and
    run before anything of a sample's. One that does not import is left to the worker, whose prelude imports
    it again (and fails there as it would in a fresh interpreter)."""
    for name in request.get("preload") or ():
        if isinstance(name, str) and name not in sys.modules:
            try:
                __import__(name)  # not importlib.import_module: importlib's imports cost a fresh runner CPU
            except Exception:  # noqa: BLE001 - an optimisation only: the worker's own import decides
                pass


def serve_workers(master: fdpass.Socket) -> None:
    """The worker zygote's life: per connection that arrives on ``master`` (one per sample), fork a worker per
    request on it until it closes; end when ``master`` closes. Connections are served one after another: a
    container judges one sample at a time (a one-shot runner judges one request; warm mode's pool gives a
    container to one sample until it comes back, and its server waits for each sample's child), so no
    sample's worker waits behind another sample's, as the runner's ``stalled`` outcome assumes."""
    while True:
        try:
            message, fds, _flags, _address = fdpass.recv_fds(master, MAX_MESSAGE, 1)
        except OSError:
            return
        if message != b"connect" or len(fds) != 1:
            return
        connection = fdpass.from_fd(fds[0])
        fork_per_request(connection, WORKER_FDS, _worker_child, sweep=False, prepare=_preload)
        connection.close()


def start_workers() -> tuple[int, fdpass.Socket]:
    """Fork the worker zygote from this process (the runner, before it has read any request; warm mode's
    server, before it has read the first) and return its pid and the master socket to it.

    The zygote keeps nothing of its parent's but the imports: it puts /dev/null on its stdin and stdout (the
    request stream and the runner's events), holds no other descriptor but the master socket, drops the
    runner's privileges as the runner does, and is not dumpable. It stays root, so no submission's uid can
    signal it, trace it or open its descriptors; the children it forks switch to the request's uid before
    anything of the submission's runs."""
    master, theirs = fdpass.socketpair()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the zygote
        status = 1
        try:
            master.close()
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            keep = theirs.fileno()
            os.closerange(3, keep)
            os.closerange(keep + 1, MAX_FD)
            from .privileges import drop_privileges

            if drop_privileges() is None:
                _set_dumpable(ctypes.CDLL(None, use_errno=True), False)
                serve_workers(theirs)
                status = 0
        finally:
            os._exit(status)
    theirs.close()
    return pid, master


def main(argv: list[str]) -> int:
    memory_mb, nofile, cpu_s, path, control_fd, preload, sweep = argv
    confine(int(memory_mb), int(nofile), int(cpu_s))
    libc = ctypes.CDLL(None, use_errno=True)
    _set_dumpable(libc, False)
    _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
    for name in filter(None, preload.split(",")):
        __import__(name)
    control = fdpass.from_fd(int(control_fd))
    control.send(wire.dumps({"ready": True, "pid": os.getpid()}).encode())  # from here on, it is the program's
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
