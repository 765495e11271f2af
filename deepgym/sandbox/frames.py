"""The one reader of Docker's multiplexed stream, for every attached or exec'd stream: one-shot runs, execs,
warm containers and desktops.

Without a TTY the engine sends a process's stdout and stderr down one socket in frames: an 8-byte header
(the stream, 1 for stdout and 2 for stderr, three zero bytes, the payload's size as a big-endian u32), then
the payload. A frame can arrive split over reads, and one read can end several frames, so the reader keeps
the partial frame between reads (a warm container's or a desktop's stream lives across many requests)."""

from __future__ import annotations

import socket
import struct
import time

from .base import STDERR_TAIL_BYTES, ExecOptions

STDOUT = 1
STDERR = 2
HEADER = 8


class FrameReader:
    """The frames of one stream, decoded as they arrive. ``chunk`` is the most one read takes."""

    def __init__(self, sock: socket.socket, chunk: int = 1 << 16):
        self.sock = sock
        self.chunk = chunk
        self._partial = bytearray()

    def read(self, deadline: float) -> list[tuple[int, bytes]] | None:
        """The frames the next read completes (none, when it ended only part of one), or None when the stream
        ended. Raises ``socket.timeout`` once ``deadline`` (time.monotonic) has passed, and OSError as the
        socket does."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("the deadline passed")
        self.sock.settimeout(remaining)
        data = self.sock.recv(self.chunk)
        if not data:
            return None
        buffer = self._partial
        buffer.extend(data)
        frames = []
        while len(buffer) >= HEADER:
            size = struct.unpack(">I", buffer[4:HEADER])[0]
            if len(buffer) < HEADER + size:
                break
            frames.append((buffer[0], bytes(buffer[HEADER:HEADER + size])))
            del buffer[:HEADER + size]
        return frames


def converse(sock: socket.socket, options: ExecOptions, deadline: float) -> tuple[bytes, bytes, bool, bool]:
    """Send ``options.stdin`` and end it, then read the stream until it ends or ``deadline`` passes. Returns
    (stdout, stderr, timed_out, stdout_truncated). Stdout beyond ``options.stdout_limit`` is dropped; only
    the last STDERR_TAIL_BYTES of stderr are kept."""
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        sock.sendall(options.stdin)
        sock.shutdown(socket.SHUT_WR)
    except socket.timeout:
        return b"", b"", True, False
    reader = FrameReader(sock)
    out = {STDOUT: bytearray(), STDERR: bytearray()}
    truncated = False
    while True:
        try:
            frames = reader.read(deadline)
        except socket.timeout:
            return bytes(out[STDOUT]), bytes(out[STDERR]), True, truncated
        if frames is None:
            return bytes(out[STDOUT]), bytes(out[STDERR]), False, truncated
        for kind, payload in frames:
            if kind == STDOUT:
                room = options.stdout_limit - len(out[STDOUT])
                truncated = truncated or len(payload) > room
                out[STDOUT].extend(payload[:max(0, room)])
            elif kind == STDERR:
                out[STDERR].extend(payload)
                if len(out[STDERR]) > 2 * STDERR_TAIL_BYTES:
                    del out[STDERR][:-STDERR_TAIL_BYTES]


def tail(stderr: bytes) -> str:
    """The end of a command's stderr as text, where a traceback says what broke."""
    return stderr[-STDERR_TAIL_BYTES:].decode("utf-8", "replace")
