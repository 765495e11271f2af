"""Warm mode (``isolation="process"``): a few long-lived docker containers per kind of sample, each running the
runner as a server (:mod:`deepgym.runner.serve`) that judges one sample at a time under a uid it never had.

A :class:`WarmPool` keeps at most ``size`` containers per kind (:func:`deepgym.sandbox.docker.engine.key`: the
image id, every limit and label of the spec, the command). A sample takes an idle container, or starts one
when fewer than ``size`` exist, or waits for one to come back; its clocks start once it has one. It gets the
container's next two uids (its own and its patch applier's) from a range picked at random for the container
(:func:`uid_range`), so no uid serves twice in one container and two containers' uids almost never meet.
The request goes down the container's attached stdin as one line; the runner's events come back on its
stdout, up to the server's ``end`` line, which comes only after the server cleared the container and checked
it (see :mod:`deepgym.runner.serve`).

A new container is handed to a sample only once its server said it is ready (:data:`READY_S` at most, charged
to no sample); one whose server cannot serve is removed and the sample fails to start (no verdict, the
infrastructure's). A sample that gets nothing back at all (the server refused it, or its container was gone
before the runner said a word: nothing of the sample ran) is judged again, once, in another container.

A container is retired (removed, never used again) when its server says so (anything left after a sample,
an OOM kill or a limit hit in it, a runner that did not exit cleanly), when a sample misses the host's
deadline or its stream breaks, after :data:`SAMPLES_VARIABLE` samples, and after :data:`MAX_IDLE_S` idle.
Containers carry the provider's labels (``deepgym``, ``deepgym.owner``), so the provider's close, the orphan
reaper and ``deepgym cleanup`` know them. The provider owns its pool (:meth:`DockerProvider.warm_pool
<deepgym.sandbox.docker.DockerProvider.warm_pool>`); the pool drives the engine (:class:`~.engine.Engine`).
Each pool registers its ``close`` with :mod:`deepgym.shutdown`, so a
SIGTERM, a SIGINT or the interpreter's exit removes every warm container of this process.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Hashable, Sequence

from ...shutdown import register as on_shutdown
from ...runner.protocol import MAX_UID, SERVE_MARKER, Request
from ..base import STDERR_TAIL_BYTES, ExecOptions, ExecResult, SandboxLost, SandboxSpec, StartFailure
from .engine import Attached, Engine, key
from ..frames import STDERR, FrameReader

log = logging.getLogger("deepgym")
CONTAINERS_VARIABLE = "DEEPGYM_WARM_CONTAINERS"
SAMPLES_VARIABLE = "DEEPGYM_WARM_SAMPLES"
# Samples one warm container judges before it is replaced: its start-up is then a small share of the work,
# and nothing a kernel keeps per container (page cache, dentries) grows for long.
DEFAULT_SAMPLES = 100
MAX_IDLE_S = 300.0
# Warm uids come from [FIRST_UID, MAX_UID): far above the image's own users and the one-shot runner's 10000.
FIRST_UID = 1 << 20
_END = f"{SERVE_MARKER} ".encode()
# Seconds a new container's server gets to start (imports, its checks, the worker zygote) on a loaded host.
READY_S = 120.0


def _setting(value: int | None, variable: str, default: int) -> int:
    if value is None:
        text = os.environ.get(variable)
        try:
            value = default if text is None else int(text)
        except ValueError:
            raise ValueError(f"{variable}={text!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"{variable} (or the matching argument) must be at least 1, got {value}")
    return value


def uid_range(samples: int) -> int:
    """The first uid of a fresh container's range: 2 uids per sample, at a random place in the uid space."""
    slots = (MAX_UID - FIRST_UID) // (2 * samples)
    return FIRST_UID + 2 * samples * secrets.randbelow(slots)


@dataclasses.dataclass
class Warm:
    """One warm container: its attached stream (and the reader of its frames, which outlives a sample), the
    samples it judged and its uid range."""

    box: Attached
    first_uid: int
    samples: int = 0
    idle_since: float = dataclasses.field(default_factory=time.monotonic)
    reader: FrameReader = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.reader = FrameReader(self.box.sock)

    def next_uid(self) -> int:
        return self.first_uid + 2 * self.samples


class WarmPool:
    """The warm containers of one engine: at most ``size`` per kind (default ``max_parallel``), each judging at
    most ``samples`` samples."""

    def __init__(self, engine: Engine, max_parallel: int, size: int | None = None, samples: int | None = None):
        self.engine = engine
        self.size = _setting(size, CONTAINERS_VARIABLE, max_parallel)
        self.samples = _setting(samples, SAMPLES_VARIABLE, DEFAULT_SAMPLES)
        self._idle: dict[Hashable, list[Warm]] = {}
        self._count: dict[Hashable, int] = {}
        self._changed = threading.Condition()
        self._closed = False
        on_shutdown(self.close)

    def run(self, spec: SandboxSpec, argv: Sequence[str], request: Request, timeout_s: float) -> ExecResult:
        """Judge ``request`` in a warm container of ``spec`` whose main process is ``argv`` (the server), under
        the container's next uids, by ``timeout_s`` from when it has a container."""
        kind = key(spec, argv, ExecOptions(timeout_s=0))
        result = self._judge(kind, spec, argv, request, timeout_s)
        if result.exit_code is None and not result.timed_out and not result.stdout:
            log.info("a warm container retired before its sample began; judging the sample in another")
            result = self._judge(kind, spec, argv, request, timeout_s)
        return result

    def _judge(self, kind: Hashable, spec: SandboxSpec, argv: Sequence[str], request: Request,
               timeout_s: float) -> ExecResult:
        """One attempt of :meth:`run`, in one container."""
        warm = self._take(kind, spec, argv)
        started = time.monotonic()
        uid = warm.next_uid()
        warm.samples += 1
        line = request.replace(uid=uid, applier_uid=uid + 1, scratch=None).to_json().encode() + b"\n"
        retire = True
        try:
            result, retire = self._converse(warm, line, request.nonce, started + timeout_s)
            return result
        finally:
            self._give_back(kind, warm, retire or warm.samples >= self.samples)

    def close(self) -> None:
        """Remove every idle container now; a container in use is removed when its sample returns it."""
        with self._changed:
            self._closed = True
            idle = [warm for ready in self._idle.values() for warm in ready]
            self._idle.clear()
            self._changed.notify_all()
        for warm in idle:
            self._remove(warm)

    def _take(self, kind: Hashable, spec: SandboxSpec, argv: Sequence[str]) -> Warm:
        while True:
            with self._changed:
                if self._closed:
                    raise SandboxLost("the warm pool was closed (the client is shutting down)")
                ready = self._idle.get(kind, [])
                while ready:
                    warm = ready.pop()
                    if warm.box.usable() and time.monotonic() - warm.idle_since < MAX_IDLE_S:
                        return warm
                    self._count[kind] -= 1
                    threading.Thread(target=self._remove, args=(warm,), daemon=True).start()
                if self._count.get(kind, 0) < self.size:
                    self._count[kind] = self._count.get(kind, 0) + 1
                    break
                self._changed.wait()
        box = None
        try:
            box = self.engine.start_attached(spec, argv, ExecOptions(timeout_s=0))
            warm = Warm(box, uid_range(self.samples))
            _wait_ready(warm)
            return warm
        except BaseException:
            if box is not None:
                box.close()
            with self._changed:
                self._count[kind] -= 1
                self._changed.notify()
            raise

    def _give_back(self, kind: Hashable, warm: Warm, retire: bool) -> None:
        with self._changed:
            if retire or self._closed:
                self._count[kind] -= 1
            else:
                warm.idle_since = time.monotonic()
                self._idle.setdefault(kind, []).append(warm)
            self._changed.notify()
        if retire or self._closed:
            self._remove(warm)

    def _remove(self, warm: Warm) -> None:
        warm.box.close()

    def _converse(self, warm: Warm, line: bytes, nonce: str, deadline: float) -> tuple[ExecResult, bool]:
        """Send one request and read the container's stream up to the server's end line for ``nonce``. Returns
        the runner's result and whether the container must retire."""
        started = time.monotonic()
        sock = warm.box.sock
        out, err = bytearray(), bytearray()
        lines = bytearray()

        def result(exit_code: int | None, timed_out: bool) -> ExecResult:
            return ExecResult(exit_code=exit_code, stdout=bytes(out), stderr_tail=err[-STDERR_TAIL_BYTES:].decode(
                "utf-8", "replace"), timed_out=timed_out, elapsed_s=time.monotonic() - started)

        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall(line)
            while True:
                frames = warm.reader.read(deadline)
                if frames is None:  # the container died or was removed: as a one-shot runner killed, no exit status
                    return result(None, False), True
                for stream, payload in frames:
                    if stream == STDERR:
                        err.extend(payload)
                        del err[:-2 * STDERR_TAIL_BYTES]
                        continue
                    lines.extend(payload)
                    while (at := lines.find(b"\n")) >= 0:
                        text = bytes(lines[:at + 1])
                        del lines[:at + 1]
                        if not text.startswith(_END):
                            out.extend(text)
                            continue
                        end = json.loads(text[len(_END):])
                        if end.get("nonce") != nonce:
                            return result(None, False), True
                        if end.get("retire"):
                            log.info("retiring warm container %s: %s", warm.box.container[:12], end["retire"])
                        return result(end.get("exit"), False), bool(end.get("retire"))
        except socket.timeout:
            return result(None, True), True
        except (OSError, ValueError) as exc:
            log.info("warm container %s broke: %s", warm.box.container[:12], exc)
            return result(None, False), True


def _wait_ready(warm: Warm) -> None:
    """Read a new container's stream up to its server's ready line. Raises StartFailure when the server cannot
    serve, ends, or is not ready within :data:`READY_S`."""
    deadline = time.monotonic() + READY_S
    lines = bytearray()
    try:
        while (at := lines.find(b"\n")) < 0:
            frames = warm.reader.read(deadline)
            if frames is None:
                raise StartFailure(f"warm container {warm.box.container[:12]} ended before its server was ready")
            lines.extend(b"".join(payload for stream, payload in frames if stream != STDERR))
    except (OSError, socket.timeout) as exc:
        raise StartFailure(f"warm container {warm.box.container[:12]}'s server was not ready: {exc!r}") from None
    text = bytes(lines[:at])
    try:
        ready = json.loads(text[len(_END):]) if text.startswith(_END) else None
    except ValueError:
        ready = None
    if not isinstance(ready, dict) or ready.get("event") != "ready" or ready.get("problem"):
        why = ready.get("problem") if isinstance(ready, dict) else text[:200]
        raise StartFailure(f"warm container {warm.box.container[:12]} cannot serve: {why}")
