"""The runner's side of a program's case server (:mod:`zygote`): run each stdin/stdout case (a program task's, a
dataset's stdin row's) in a child forked from one interpreter per sample instead of starting a fresh
interpreter per case.

Every rule of a case run by a fresh process still holds, enforced here by the runner: the case's CPU and
wall-clock limits (:meth:`Supervised.wait`, the child's own RLIMIT_CPU), the memory limits, the output cap,
a fresh stdout and stderr pipe per case that only that case's child ever holds, the input as a descriptor the
child can only read (a program task's hidden test file opened for reading; a row's input, which comes with the
request, as a sealed anonymous file: :func:`read_only_input`), and the comparison of the output in the runner.
The zygote is the submission's: it gets no expected output, and its reply (the exit status) is the submission's
data.

The zygote is kept for the next case only when a case ended cleanly (it exited, the zygote replied, and no
other process of the submission is left). After anything else (a limit, a zygote killed or stopped by the
submission, processes left behind) every process of the submission is killed and the next case starts a new
zygote, so a case can only ever hurt itself and the cases after it, never be judged on another's output.
"""

from __future__ import annotations

import fcntl
import math
import os

from .. import wire
from ..confine import fdpass
from ..channels import Fault, head, plain
from ..confine.forked import Forked, hand_off
from ..protocol import Limits
from ..confine.processes import ZYGOTE, Processes, python_main
from ..confine.supervise import Ending, Supervised, failure
from ..confine.usage import Budget

TYPE_CHECKING = False  # typing and subprocess are not imported: a fresh runner pays for each
if TYPE_CHECKING:
    import subprocess
    from typing import IO, Any, Callable


class ZygoteFailed(RuntimeError):
    """The case server did not start: the runner's failure, which becomes no verdict (verifier_error)."""


class CaseServer:
    """A sample's zygote for the program at ``script`` (the staged file), started on first use. Close it.

    Where the runner has a worker zygote it forks the case server (:meth:`Processes.fork_worker`), with the
    prelude's modules imported once for every later sample; elsewhere the case server is a fresh interpreter."""

    def __init__(self, processes: Processes, limits: Limits, script: str, preload: tuple[str, ...]):
        self.processes, self.limits, self.script, self.preload = processes, limits, script, preload
        self._zygote: subprocess.Popen[bytes] | Forked | None = None
        self._pid: int | None = None
        self._control: fdpass.Socket | None = None

    def _start(self) -> None:
        control, theirs = fdpass.socketpair()
        limits, processes, folder = self.limits, self.processes, os.path.dirname(self.script)
        argv = [str(limits.memory_mb), str(limits.nofile), str(math.ceil(limits.total_cpu_s) + 1), self.script,
                "3", ",".join(self.preload), "1" if processes.confinement.switches_uid else "0"]
        try:
            if processes.workers is not None:
                self._zygote = processes.fork_worker(argv, (theirs.fileno(),), folder, self.preload,
                                                     main="case_server")
            else:
                argv[4] = str(theirs.fileno())
                self._zygote = processes.spawn([*python_main(ZYGOTE), *argv],
                                               pass_fds=(theirs.fileno(),), cwd=folder)
        except BaseException:
            control.close()
            raise
        finally:
            theirs.close()
        self._control = control
        # Nothing of the submission's runs before "ready" (every process of its user was killed before this
        # start), so a zygote that never gets there is the runner's failure: no verdict, never a 0.
        control.settimeout(limits.case_wall_s)
        try:
            ready = control.recv(4096)
        except OSError as exc:
            ready = repr(exc).encode()
        finally:
            control.settimeout(None)
        try:
            hello = wire.loads(ready)
        except ValueError:
            hello = None
        if not (isinstance(hello, dict) and hello.get("ready") is True and type(hello.get("pid")) is int):
            stderr = written_so_far(self._zygote.stderr)
            self.close()
            raise ZygoteFailed(f"the case server did not start ({ready[:200]!r}): {stderr}")
        self._pid = hello["pid"]

    def run(self, budget: Budget, stdin: int, compare: Callable[[bytes], Fault | None],
            result: dict[str, Any]) -> dict[str, Any]:
        """Run the program with ``stdin`` as its stdin: a descriptor open for reading only, of a file the
        submission's user cannot open itself, which this takes over and closes. ``compare`` judges its output
        (None: right)."""
        limits = budget.limits
        cpu_limit = min(limits.case_cpu_s, budget.cpu_left())
        output_limit = limits.output_kb * 1024
        meter = self.processes.watch()  # before the zygote starts: the first case pays for its start
        try:
            if self._zygote is None:
                self._start()
        except BaseException:
            os.close(stdin)
            raise
        assert self._zygote is not None and self._control is not None
        # The submission may have killed the zygote: the case then ends as a program that closed its channel.
        child = hand_off(self._control, wire.dumps({"cpu_s": math.ceil(cpu_limit) + 1}).encode(), stdin,
                         zygote_may_be_gone=True)
        process = Supervised(self.processes, child, keep_stdout=output_limit, exit_fd=self._control.fileno())
        try:
            outcome = process.wait(meter, for_line=False, cpu_limit_s=cpu_limit, wall_limit_s=limits.case_wall_s,
                                   output_limit=output_limit)
        finally:
            process.close()
            child.close()
        if not self._clean(outcome):
            self.close()
        budget.spend(outcome.usage)
        return case_result(outcome, process, limits, compare, result)

    def _clean(self, outcome: Ending) -> bool:
        """Whether the zygote may serve the next case: the child exited, the zygote said so, and nothing else
        of the submission's is alive."""
        return outcome.kind == "exited" and outcome.exit_code is not None and self._zygote is not None \
            and self._zygote.poll() is None and self.processes.alive() == [self._pid]

    def close(self) -> None:
        """Stop the zygote and everything of the submission's (the next case, if any, starts a new one)."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if isinstance(self._zygote, Forked):  # a spawned server's pipes are the Processes' to close (kill_all)
            self._zygote.close()
        self._zygote = self._pid = None
        self.processes.kill_all()


def written_so_far(stream: IO[bytes] | None) -> str:
    """The end of what a case server that failed to start wrote on ``stream``, read without waiting for its end
    (a forked server's end is not known to ``poll``): one that died wrote its traceback before its control
    socket closed, and one that hangs has nothing more to say before it is killed."""
    if stream is None:
        return ""
    os.set_blocking(stream.fileno(), False)
    try:
        written = os.read(stream.fileno(), 65536)
    except OSError:
        written = b""
    return written.decode("utf-8", "replace")[-2000:]


def read_only_input(data: bytes) -> int:
    """A descriptor, open for reading only, of an anonymous file holding ``data``: sealed against every change,
    and owned by the runner with mode 0444, so the case's process can neither write, truncate nor grow it, nor
    reopen it for writing through ``/proc/self/fd``. A failure here is the runner's: it propagates (no verdict)."""
    memfd = os.memfd_create("case-input", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(memfd, view):]
        os.fchmod(memfd, 0o444)
        fcntl.fcntl(memfd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
        return os.open(f"/proc/self/fd/{memfd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(memfd)


def case_result(outcome: Ending, process: Supervised, limits: Limits, compare: Callable[[bytes], Fault | None],
                result: dict[str, Any]) -> dict[str, Any]:
    """A case's result from how its program ended and what it wrote: a failure unless it exited with status 0
    and ``compare`` accepts its output."""
    actual = bytes(process.kept["stdout"])
    result = {**result, "actual": head(actual), "cpu_s": round(outcome.usage.cpu_s, 4)}
    if outcome.kind != "exited":
        error_type, error = failure(outcome, "running the program", limits)
    elif outcome.exit_code != 0:
        stderr = process.text("stderr").strip().splitlines()
        error_type, error = "solution_error", f"the program {outcome.detail}" + (f": {plain(stderr[-1])}" if stderr else "")
    else:
        wrong = compare(actual)
        if wrong is None:
            return {**result, "passed": True, "error_type": None, "error": None}
        error_type, error = wrong.error_type, wrong.message
    return {**result, "passed": False, "error_type": error_type, "error": error}
