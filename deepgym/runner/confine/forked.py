"""The runner's handles on the children its zygotes fork (:mod:`zygote`): a program's cases, and a function
task's workers.

The worker zygote (:class:`Workers`) is forked from the runner before it reads a request (from warm mode's
server before the first), so it holds nothing of any sample's; it forks each worker, which switches to the
request's uid and runs :mod:`worker` as a fresh ``python3 -m deepgym_runner.confine.worker`` would, minus the
interpreter's start and imports. The worker's limits, its uid, its session, the kill sweep and the quiescence
checks are the runner's, exactly as for a spawned worker (:class:`processes.Processes`).
"""

from __future__ import annotations

import os

from .. import wire
from . import fdpass

# Seconds a kill keeps sweeping before it gives up on processes that will not die (zombies nobody reaps), and
# that a zygote gets to report the end of a child that was killed.
KILL_WAIT_S = 2.0


class Forked:
    """A zygote's child (a program's case, a worker) as :class:`Supervised` sees a process: its output pipes,
    and ``wait``, which reads the zygote's reply (the child's exit status)."""

    def __init__(self, stdout_fd: int, stderr_fd: int, control: fdpass.Socket):
        self.stdout = os.fdopen(stdout_fd, "rb", buffering=0)
        self.stderr = os.fdopen(stderr_fd, "rb", buffering=0)
        self._control = control
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int | None:
        """The child's exit status, or None when the zygote gives none within ``timeout`` (it died, or wrote
        something else). Unlike ``Popen.wait`` it does not raise, so that a function task's runner never
        imports subprocess."""
        if self.returncode is not None:
            return self.returncode
        self._control.settimeout(timeout)
        try:
            reply = wire.loads(self._control.recv(4096))
        except (OSError, ValueError):
            reply = None
        finally:
            self._control.settimeout(None)
        code = reply.get("exit") if isinstance(reply, dict) else None
        if type(code) is not int or not -64 <= code <= 255:
            return None
        self.returncode = code
        return code

    def poll(self) -> int | None:
        return None  # the end is signalled on the control socket (Supervised's exit_fd)

    def close(self) -> None:
        self.stdout.close()
        self.stderr.close()


class Workers:
    """The runner's handle on its worker zygote (:func:`zygote.start_workers`): a pristine process that forks
    each function task's worker instead of the runner exec'ing a fresh interpreter for it. ``pid`` is runner
    side (:class:`processes.Processes` never charges its CPU to a submission, nor counts it as someone else's)."""

    def __init__(self) -> None:
        from .zygote import start_workers

        self.pid, self._master = start_workers()

    def connect(self) -> WorkerConnection:
        """A connection for one sample: the zygote serves it until it closes (the sample's runner exits)."""
        ours, theirs = fdpass.socketpair()
        try:
            fdpass.send_fds(self._master, [b"connect"], [theirs.fileno()])
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return WorkerConnection(self.pid, ours)

    def alive(self) -> bool:
        """Whether the zygote still runs (it is this process's child)."""
        try:
            return os.waitpid(self.pid, os.WNOHANG) == (0, 0)
        except ChildProcessError:
            return False


class WorkerConnection:
    """One sample's connection to the worker zygote: :meth:`fork` starts a worker, one at a time."""

    def __init__(self, pid: int, control: fdpass.Socket):
        self.pid = pid
        self.control = control
        self._last: Forked | None = None

    def fork(self, argv: list[str], *, uid: int, cwd: str, env: dict[str, str],
             fds: tuple[int, ...], preload: tuple[str, ...] = (), main: str = "worker") -> Forked:
        """A worker as uid ``uid`` running ``worker.main(argv)`` (``main`` "case_server": a program's case server,
        ``zygote.main(argv)``) in ``cwd`` with environment ``env``; ``fds`` (the requests and replies pipes'
        ends: 3 and 4; a case server's control socket: 3) become its descriptors from 3. ``preload`` names
        standard-library modules the zygote imports before it forks (once for every later sample, in warm mode).
        Its end is signalled on :attr:`control`. Raises OSError when the zygote does not serve (it died, or its
        last worker's end is not reported): the runner's failure, never the submission's, since its last worker
        was killed."""
        if self._last is not None:
            if self._last.wait(timeout=KILL_WAIT_S) is None:
                raise OSError("the worker zygote did not report the end of the last worker")
            self._last = None
        message = wire.dumps({"argv": argv, "uid": uid, "cwd": cwd, "env": env, "preload": list(preload),
                              "main": main}).encode()
        self._last = hand_off(self.control, message, os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), fds)
        return self._last

    def settle(self) -> None:
        """Once the last worker was killed: wait (at most KILL_WAIT_S) for the zygote to report its end, which it
        sends after reaping it, so that nothing of the sample's uid is left in the process table, not even an
        exit status nobody collected yet. A report that does not come is :meth:`fork`'s to raise."""
        if self._last is not None and self._last.wait(timeout=KILL_WAIT_S) is not None:
            self._last = None


def hand_off(control: fdpass.Socket, message: bytes, stdin: int, extra_fds: tuple[int, ...] = (), *,
             zygote_may_be_gone: bool = False) -> Forked:
    """Ask the zygote on ``control`` for a child: send ``message`` with ``stdin`` (which this takes over and
    closes), the write ends of a fresh stdout and stderr pipe, and ``extra_fds``; return the :class:`Forked`
    holding the read ends. Only the child ever holds the write ends: ours are closed once sent. A send that
    fails raises OSError, unless ``zygote_may_be_gone`` (a case server the submission may have killed): the
    child then ends as a process that closed its channel, which :class:`Supervised` sees on ``control``."""
    ours: list[int] = []  # the read ends of stdout and stderr
    theirs = [stdin]  # what the child gets, closed here once sent
    try:
        for _ in range(2):
            read_end, write_end = os.pipe()
            ours.append(read_end)
            theirs.append(write_end)
        try:
            fdpass.send_fds(control, [message], [*theirs, *extra_fds])
        except OSError:
            if not zygote_may_be_gone:
                raise
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    return Forked(ours[0], ours[1], control)
