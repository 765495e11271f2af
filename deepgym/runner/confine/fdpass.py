"""The zygotes' channels: a Unix socket pair of SOCK_SEQPACKET sockets, and descriptors passed over it.

Built on ``_socket``, the C module under ``socket``, with ``send_fds`` and ``recv_fds`` as ``socket`` spells
them: ``socket``'s import builds four enums of the C module's constants, which costs every fresh runner about
a millisecond of CPU for sockets it only ever uses for this. The sockets are ``_socket.socket`` objects: the
same send, recv, settimeout, fileno and close, and the same warning when one is left unclosed. Descriptors are
packed with ``struct``, not ``array`` as ``socket`` does: array's import brings in collections.
"""

from __future__ import annotations

import _socket
import struct

Socket = _socket.socket


def socketpair() -> tuple[Socket, Socket]:
    """Two connected SOCK_SEQPACKET sockets: each send is one message, and a closed end reads as b""."""
    return _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)


def from_fd(fd: int) -> Socket:
    """The socket on descriptor ``fd`` (inherited or received), which it then owns."""
    return _socket.socket(fileno=fd)


def send_fds(sock: Socket, buffers: list[bytes], fds: list[int]) -> int:
    """Send ``buffers`` as one message with copies of the descriptors ``fds``, as ``socket.send_fds``."""
    return sock.sendmsg(buffers, [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])


def recv_fds(sock: Socket, bufsize: int, maxfds: int) -> tuple[bytes, list[int], int, object]:
    """One message of at most ``bufsize`` bytes with at most ``maxfds`` descriptors, as ``socket.recv_fds``:
    (data, descriptors, flags, address). Raises OSError as recvmsg does."""
    size = struct.calcsize("i")
    message, ancillary, flags, address = sock.recvmsg(bufsize, _socket.CMSG_LEN(maxfds * size))
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.extend(struct.unpack(f"{len(data) // size}i", data[:len(data) - len(data) % size]))
    return message, fds, flags, address
