"""JSON lines to and from a trusted process inside an episode's sandbox over one stream that stays open: a
desktop's supervisor (the container's attached main process) or a persistent terminal (one long-lived exec).
The stream carries the engine's multiplexed frames (:mod:`deepgym.sandbox.frames`); the lines are on stdout,
which no process of the agent shares."""

from __future__ import annotations

import json
import socket
import time

from ..sandbox import SandboxLost
from ..sandbox.frames import STDOUT, FrameReader

MAX_LINE_BYTES = 16 << 20


class Channel:
    """The lines of one stream; ``what`` names its far end in errors ("the desktop", "the terminal")."""

    def __init__(self, sock: socket.socket, what: str):
        self.sock = sock
        self.what = what
        self._reader = FrameReader(sock, chunk=1 << 18)
        self._out = bytearray()

    def send(self, message: dict) -> None:
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise SandboxLost(f"{self.what}'s stream is gone: {exc}") from None

    def receive(self, timeout_s: float) -> dict | None:
        """The next line, or None at the timeout. Raises SandboxLost when the stream ended."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._out:
            try:
                frames = self._reader.read(deadline)
            except socket.timeout:
                return None
            except OSError as exc:
                raise SandboxLost(f"{self.what}'s stream failed: {exc}") from None
            if frames is None:
                raise SandboxLost(f"{self.what} ended its stream (the process or its container stopped)")
            for stream, payload in frames:
                if stream == STDOUT:
                    self._out.extend(payload)
            if len(self._out) > MAX_LINE_BYTES:
                raise SandboxLost(f"{self.what} sent a line beyond the limit")
        line, _, rest = bytes(self._out).partition(b"\n")
        self._out = bytearray(rest)
        return json.loads(line)
