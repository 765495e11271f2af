"""Waiting on one untrusted process: its output drained, its requests written, its limits enforced, and how the
wait ended (:class:`Ending`), told as the submission's failure by :func:`failure`.
"""

from __future__ import annotations

import os
import select
import time

from ..protocol import Limits
from .usage import HostOverloaded, RunnerStalled, Usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

    from .processes import Meter, Processes


class Ending:
    """How waiting on an untrusted process ended.

    ``kind`` is ``line`` (a line arrived on the channel), ``exited`` (the process ended, or closed its channel
    while we waited for a line), ``cpu``, ``wall``, ``starved`` (the wall limit fired while the host starved it),
    ``output`` (it wrote more than allowed), ``oom`` (the kernel's OOM killer struck in the sandbox) or
    ``stalled`` (a limit fired before any process of the submission existed: the runner's side, a worker zygote
    that never forked the worker, say, held it up, so whatever the CPU and the clock say is not the submission's)."""

    def __init__(self, kind: str, usage: Usage, *, line: bytes | None = None, exit_code: int | None = None,
                 detail: str = ""):
        self.kind = kind
        self.usage = usage
        self.line = line
        self.exit_code = exit_code
        self.detail = detail


class Supervised:
    """An untrusted process whose stdout, stderr and optional channel pipe are drained while limits are
    enforced. stdout is kept up to ``keep_stdout`` bytes (a program's answer); otherwise only a short head.
    ``proc`` is a Popen, or for a case forked by a zygote an object with the same ``stdout``, ``stderr`` and
    ``wait``, whose end ``exit_fd`` signals (readable once it ended) instead of a pidfd."""

    HEAD_BYTES = 4096
    POLL_S = 0.02
    DRAIN_S = 0.2
    MAX_LINE_BYTES = 16 << 20

    def __init__(self, processes: Processes, proc: subprocess.Popen[bytes], *, channel_fd: int | None = None,
                 requests_fd: int | None = None, keep_stdout: int = 0, exit_fd: int | None = None):
        self.processes = processes
        self.proc = proc
        # poll(2) itself, not the selectors module: its imports (collections) cost a fresh runner milliseconds.
        self._poll = select.poll()
        self._watched: dict[int, str] = {}  # fd -> what it is: stdout, stderr, channel, exit or requests
        self.kept = {"stdout": bytearray(), "stderr": bytearray()}
        self.limits = {"stdout": max(keep_stdout, self.HEAD_BYTES), "stderr": self.HEAD_BYTES}
        self.output_bytes = 0
        self.channel = bytearray()
        self.channel_fd = channel_fd
        for name in ("stdout", "stderr"):
            fd = getattr(proc, name).fileno()
            os.set_blocking(fd, False)
            self._watch(fd, name)
        if channel_fd is not None:
            os.set_blocking(channel_fd, False)
            self._watch(channel_fd, "channel")
        # Requests are written without blocking, from the loop that enforces the limits: a process that stops
        # reading them (or shrinks its pipe) can only use up its own time, never stall the runner.
        self.requests_fd = requests_fd
        self._pending = b""
        if requests_fd is not None:
            os.set_blocking(requests_fd, False)
        self._pidfd = None
        self._forked = exit_fd is not None
        self._exit_watched = self._forked
        if exit_fd is not None:
            self._watch(exit_fd, "exit")
        elif hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(proc.pid)
                self._watch(self._pidfd, "exit")
                self._exit_watched = True
            except OSError:
                self._pidfd = None

    def text(self, name: str) -> str:
        return self.kept[name].decode("utf-8", "replace")

    def _watch(self, fd: int, name: str) -> None:
        self._watched[fd] = name
        self._poll.register(fd, select.POLLOUT if name == "requests" else select.POLLIN)

    def _unwatch(self, fd: int) -> None:
        del self._watched[fd]
        self._poll.unregister(fd)

    def _read(self, fd: int) -> bytes | None:
        """Read what is there; returns the chunk (b"" at end of stream, None if nothing yet)."""
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return None
        except OSError:
            chunk = b""
        if not chunk:
            self._unwatch(fd)
        return chunk

    def _drain_output(self, fd: int, name: str) -> None:
        chunk = self._read(fd)
        if chunk:
            self.output_bytes += len(chunk)
            kept = self.kept[name]
            room = self.limits[name] - len(kept)
            if room > 0:
                kept.extend(chunk[:room])

    def _send(self) -> None:
        try:
            written = os.write(self.requests_fd, self._pending[: 1 << 16])
        except BlockingIOError:
            return
        except OSError:
            written = len(self._pending)  # it closed its end: it died or will answer without the rest
        self._pending = self._pending[written:]
        if not self._pending:
            self._unwatch(self.requests_fd)

    def wait(self, meter: Meter, *, for_line: bool, cpu_limit_s: float, wall_limit_s: float,
             output_limit: int, send: bytes = b"") -> Ending:
        """Send ``send`` on the requests pipe, then wait for a line on the channel (``for_line``) or for the
        process to exit, whichever applies. ``meter`` must have been started before the process was spawned
        or sent its request, so that a quick child is measured in full."""
        if send:
            self.queue(send)
        ending = None
        try:
            ending = self._wait(meter, for_line=for_line, cpu_limit_s=cpu_limit_s, wall_limit_s=wall_limit_s,
                                 output_limit=output_limit)
            return ending
        finally:
            if ending is None or ending.kind != "line":
                self._unsend()

    def queue(self, data: bytes) -> None:
        """Send ``data`` on the requests pipe while this waits (now and in later waits, until an ending other
        than a line): a batch of requests, each answered by a line of its own."""
        if not self._pending:
            self._watch(self.requests_fd, "requests")
        self._pending += data

    def _line_arrived(self) -> bytes | None:
        """A whole line on the channel right now, read without waiting, or None."""
        chunk = self._read(self.channel_fd) if self.channel_fd in self._watched else None
        searched = len(self.channel)
        if chunk:
            self.channel.extend(chunk)
        return self._line(searched if chunk else 0)

    def _wait(self, meter: Meter, *, for_line: bool, cpu_limit_s: float, wall_limit_s: float,
              output_limit: int) -> Ending:
        if for_line and (line := self._line(0)) is not None:
            # It arrived with the previous one, inside the previous window, which was charged for it.
            return Ending("line", meter.usage, line=line)
        while True:
            exited = False
            for fd, _ in self._poll.poll(self.POLL_S * 1000):
                name = self._watched.get(fd)
                if name == "requests":
                    self._send()
                elif name in ("stdout", "stderr"):
                    self._drain_output(fd, name)
                elif name == "exit":
                    exited = True
                elif name == "channel":
                    chunk = self._read(fd)
                    if chunk is None:
                        continue
                    if not chunk and for_line:
                        return self._exited(meter.tick())
                    searched = len(self.channel)  # the bytes before the chunk hold no newline
                    self.channel.extend(chunk)
                    if for_line and (line := self._line(searched)) is not None:
                        return Ending("line", meter.tick(), line=line)
                    if len(self.channel) > self.MAX_LINE_BYTES:
                        return Ending("output", meter.tick(), detail="sent more than 16 MiB to the runner")
            if exited or (not self._exit_watched and self.proc.poll() is not None):
                ending = self._exited(meter.tick())
                if self.output_bytes > output_limit:
                    return Ending("output", ending.usage, detail=f"wrote {self.output_bytes} bytes of output")
                if for_line and (line := self._line(0)) is not None:
                    return Ending("line", ending.usage, line=line)
                return ending
            usage = meter.tick()
            if self.output_bytes > output_limit:
                return Ending("output", usage, detail=f"wrote {self.output_bytes} bytes of output")
            if usage.oom_kills:
                return Ending("oom", usage, detail="killed by the out-of-memory killer")
            if usage.cpu_s > cpu_limit_s or (usage.wall_s > wall_limit_s and not usage.starved()):
                # A reply written after the last select is in time: the limit is checked once per tick. In a batch
                # the reading may already hold the next request's CPU, which must not fail this one.
                if for_line and (line := self._line_arrived()) is not None:
                    return Ending("line", usage, line=line)
                if not usage.present_samples:
                    return Ending("stalled", usage)
                memory = meter.memory_limit()
                if memory is not None:
                    return Ending("oom", usage, detail=memory)
                return Ending("cpu" if usage.cpu_s > cpu_limit_s else "wall", usage)
            if usage.wall_s > wall_limit_s * Limits.STARVED_GRACE:  # past its wall limit, and starved
                return Ending("starved", usage)

    def _line(self, start: int) -> bytes | None:
        """The channel's first line, if its newline is at or after ``start`` (the caller knows the bytes before
        hold none, so a long line costs one search of each chunk, not of the whole line per chunk); the bytes
        after it stay for the next call."""
        end = self.channel.find(b"\n", start)
        if end < 0:
            return None
        line = bytes(self.channel[:end])
        del self.channel[:end + 1]
        return line

    def _unsend(self) -> None:
        if self._pending:
            self._pending = b""
            self._unwatch(self.requests_fd)

    def _exited(self, usage: Usage) -> Ending:
        """The process ended (or closed its channel): collect its status and whatever output is left."""
        code = self._exit_status(1.0)
        if code is None:
            return Ending("exited", usage, detail="closed its channel to the runner")
        # Drain what is left, for a moment only: a detached grandchild may keep writing forever.
        until = time.monotonic() + self.DRAIN_S
        for fd, name in list(self._watched.items()):
            if name in ("stdout", "stderr"):
                while fd in self._watched and time.monotonic() < until:
                    before = self.output_bytes
                    self._drain_output(fd, name)
                    if self.output_bytes == before:
                        break
            elif name == "channel":
                while time.monotonic() < until and len(self.channel) <= self.MAX_LINE_BYTES:
                    chunk = self._read(fd)
                    if not chunk:
                        break
                    self.channel.extend(chunk)
        if code < 0 and usage.oom_kills:
            return Ending("oom", usage, exit_code=code, detail="killed by the out-of-memory killer")
        if code < 0:
            return Ending("exited", usage, exit_code=code, detail=f"was killed by signal {-code}")
        return Ending("exited", usage, exit_code=code, detail=f"exited with status {code}")

    def _exit_status(self, timeout_s: float) -> int | None:
        """The process's exit status, waiting up to ``timeout_s``; None when it gives none by then. A zygote's
        child (:class:`forked.Forked`) answers None itself; a Popen raises, and exists only where subprocess was
        imported to spawn it."""
        if self._forked:
            return self.proc.wait(timeout_s)
        import subprocess

        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        for fd in (self.channel_fd, self.requests_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.channel_fd = self.requests_fd = None


def failure(ending: Ending, doing: str, limits: Limits) -> tuple[str, str]:
    """(error_type, message) for an ending that is not a usable result. Raises HostOverloaded when the
    wall-clock limit fired on a starved submission (nobody can be judged then), RunnerStalled when a limit fired
    before the submission had a process (the runner's own failure)."""
    if ending.kind == "stalled":
        raise RunnerStalled(f"a time limit fired while {doing} after {ending.usage.wall_s:.1f}s, before any process "
                            f"of the submission had started: the runner's side never started it")
    if ending.kind == "starved":
        raise HostOverloaded(f"the wall-clock limit fired while {doing} after {ending.usage.wall_s:.1f}s (including "
                             f"grace for a starved submission), but the submission, runnable most of the time, got "
                             f"only {ending.usage.cpu_s:.2f}s of CPU of its {limits.case_cpu_s:g}s")
    if ending.kind == "cpu":
        return "solution_timeout", f"used more than {limits.case_cpu_s:g}s of CPU while {doing}"
    if ending.kind == "wall":
        return "solution_timeout", f"did not finish within {limits.case_wall_s:g}s of wall-clock time while {doing}"
    if ending.kind == "output":
        return "output_limit_exceeded", f"{ending.detail} while {doing} (limit {limits.output_kb} KiB)"
    if ending.kind == "oom":
        return "solution_oom", f"the submission was {ending.detail} while {doing}"
    return "solution_error", f"the submission process {ending.detail} while {doing}"

