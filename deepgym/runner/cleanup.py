"""Warm mode's clean-up between two samples of one container: clear what a sample left, then prove it is gone.

What a sample can leave behind for the next one, and how each is handled (docs/warm.md lists the channels
that remain, with the bits each can carry):

- **processes** of its uids: killed (``kill(-1)`` as each uid, then by pid), then none may be left but pid 1,
  the server and its worker zygote;
- **SysV IPC objects**: their ids are allocated in turn (the next object gets the next id even after the
  last was removed), so even a sample that removed its objects would pass a number on. The server makes one
  object of each kind after every sample (:class:`IpcIds`), whose id must be the one the kernel gives right
  after the previous probe's; otherwise the sample made objects, and the container retires (the server could
  remove them, as their creator, but not wind the counter back);
- **files** in every folder a uid can write (:data:`WRITABLE` and the scratch root): removed with the rights
  of each folder's owner, through descriptors (:func:`empty`), so that locked folders, any depth and paths
  longer than PATH_MAX are emptied too, then none may be listed;
- **the network namespace** (:class:`NetworkState`): sockets and their kernel state (TIME_WAIT entries, the
  TCP metrics cache, IPv6 flow labels that linger after their socket) and the namespace's traffic counters.
  The server itself never uses the network, so the namespace must look exactly as it did before the sample;
  if it does not, the container retires. The sandbox's sysctls (``tcp_max_tw_buckets=0``,
  ``tcp_no_metrics_save=1``, ``tcp_fastopen=0``) already keep most of that state from being made at all.
"""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import time

from .confine.privileges import FileRights, kill_uid
from .confine.procfs import process_uid

# Everything a submission's uid can write in a container of ours besides the scratch root (/tmp):
# tests/runner/test_writable_paths.py proves the list.
WRITABLE = ("/dev/shm", "/dev/mqueue")
IPC_PRIVATE, IPC_CREAT, IPC_RMID = 0, 0o1000, 0
# Seconds the server waits for the last processes of a sample to die and be reaped by pid 1, and for the
# kernel to let go of the sockets they held.
SETTLE_S = 2.0
# The per-namespace files of /proc/net that a uid can change by what it does and another uid can read: the
# sockets of every family but TCP (listed while they exist), flow labels, multicast memberships, and the
# traffic counters. TCP's listings walk the whole host's connection table (a millisecond each here), so TCP
# is checked through :data:`SOCKET_COUNTS` instead: a TCP socket is either held by a process (none is left)
# or one that carried traffic (which moved the counters).
NETWORK_FILES = ("udp", "udp6", "udplite", "udplite6", "raw", "raw6", "icmp", "icmp6", "unix", "packet",
                 "netlink", "ip6_flowlabel", "igmp", "igmp6", "mcfilter", "mcfilter6", "anycast6",
                 "snmp", "snmp6", "netstat", "dev")
# The namespace's own socket counts in sockstat and sockstat6: sockets in use, TIME_WAIT entries, fragments.
# The other numbers there (orphans, allocated sockets, memory pages) are the whole host's: they move without
# any sample, and strict mode shares them too.
SOCKET_COUNTS = ("sockstat", "sockstat6")
PER_NAMESPACE = {b"used", b"inuse", b"tw", b"memory"}


def others(keep: tuple[int, ...] = ()) -> list[int]:
    """Every process in the container but pid 1 (Docker's init), this server and ``keep`` (its worker zygote)."""
    skip = (1, os.getpid(), *keep)
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) not in skip]


class IpcIds:
    """The SysV IPC id counters of the container's IPC namespace. The kernel gives each new object an id that
    says where its counters stood: ``seq * 32768 + index``, the index taken in turn from a small cycle (64 on
    current kernels while few objects exist, 1 on older ones) and ``seq`` moving on each time the index
    wraps, removed objects included. So a sample that makes and removes n objects moves the next id by n
    steps, for the next sample to read. The server makes and removes one object of each kind after every
    sample: if anyone else made one since its last probe, the id is not the one step after the last, and the
    container retires. The cycle is learnt at the start, by probing until each kind wraps once."""

    SEQ_MULTIPLIER = 32768  # the kernel's IPCMNI: the index's room in an id
    CALIBRATION_PROBES = 1024

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._last: tuple[int, int, int] | None = None
        self._cycles: list[int | None] = [None, None, None]

    def _probe(self) -> tuple[int, int, int] | None:
        libc = self._libc
        shm = libc.shmget(IPC_PRIVATE, 1, IPC_CREAT | 0o600)
        sem = libc.semget(IPC_PRIVATE, 1, IPC_CREAT | 0o600)
        msg = libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)
        for ident, remove in ((shm, lambda: libc.shmctl(shm, IPC_RMID, None)),
                              (sem, lambda: libc.semctl(sem, 0, IPC_RMID)),
                              (msg, lambda: libc.msgctl(msg, IPC_RMID, None))):
            if ident >= 0:
                remove()
        return None if min(shm, sem, msg) < 0 else (shm, sem, msg)

    def _after(self, ident: int, cycle: int | None) -> int:
        """The id the kernel gives next when nobody else made one since ``ident``."""
        index = ident % self.SEQ_MULTIPLIER
        if cycle is None or index + 1 < cycle:
            return ident + 1
        return (ident // self.SEQ_MULTIPLIER + 1) * self.SEQ_MULTIPLIER

    def _calibrate(self, ids: tuple[int, int, int]) -> tuple[int, int, int] | None:
        """Probe until each kind's index wrapped once, learning its cycle; the last probe's ids (None when a
        probe failed). Run once, while nothing of a sample's exists: every step is the server's own."""
        for _ in range(self.CALIBRATION_PROBES):
            if None not in self._cycles:
                break
            following = self._probe()
            if following is None:
                return None
            for kind, (before, after) in enumerate(zip(ids, following)):
                if self._cycles[kind] is None and after != before + 1:
                    self._cycles[kind] = before % self.SEQ_MULTIPLIER + 1
            ids = following
        return ids

    def moved(self) -> str | None:
        """Probe; why the counters show someone else's objects since the last probe, or None (also the first
        time, which learns the cycle and sets where they stand)."""
        ids = self._probe()
        if ids is not None and self._last is None:
            ids = self._calibrate(ids)
        if ids is None:
            return "the server could not make its SysV IPC probe objects"
        last, self._last = self._last, ids
        if last is not None and ids != tuple(self._after(ident, cycle) for ident, cycle in zip(last, self._cycles)):
            return f"SysV IPC objects were made during the sample (probe ids {last} then {ids})"
        return None


class NetworkState:
    """What a uid can leave in the container's network namespace for another to read (:data:`NETWORK_FILES`),
    as it stood once the namespace was known clean."""

    def __init__(self) -> None:
        self.clean = self.read()

    @staticmethod
    def read() -> dict[str, bytes]:
        state = {}
        for name in (*NETWORK_FILES, *SOCKET_COUNTS):
            try:
                with open(f"/proc/net/{name}", "rb") as file:
                    state[name] = file.read()
            except OSError:
                state[name] = b""
        for name in SOCKET_COUNTS:
            state[name] = b" ".join(_per_namespace(line) for line in state[name].splitlines())
        return state

    def changed(self) -> list[str]:
        """The files that still differ from the clean state after :data:`SETTLE_S` (the kernel frees a closed
        socket soon after its process dies, and the worker zygote closes its end of a sample's connection on
        its own time), or none."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            now = self.read()
            changed = [name for name in now if now[name] != self.clean[name]]
            if not changed or time.monotonic() > deadline:
                return changed
            time.sleep(0.005)


def _per_namespace(line: bytes) -> bytes:
    """A sockstat line (``TCP: inuse 0 orphan 0 tw 0 alloc 1 mem 217``) cut to its namespace's own counts."""
    label, _, pairs = line.partition(b":")
    words = pairs.split()
    return label + b":" + b",".join(key + b"=" + value for key, value in zip(words[::2], words[1::2])
                                    if key in PER_NAMESPACE)


def empty(folder: str) -> list[str]:
    """Remove everything in ``folder`` (not the folder itself); returns what is left.

    Each folder is read and emptied with the file rights of its own owner, after that owner makes it
    readable again (the runner holds no CAP_DAC_OVERRIDE, and a submission may lock its folders), and each
    entry is removed with the rights of the owner of the folder it sits in. The walk goes by descriptor, one
    folder open at a time, down by name and back up by ``..``: no depth exhausts the stack or the descriptor
    limit, no path grows past PATH_MAX, and each folder is listed once."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return [folder]
    left: list[str] = []
    owner = os.fstat(fd).st_uid
    with FileRights(owner):
        frames = [_Frame(folder, owner, os.listdir(fd))]
    try:
        while True:
            frame = frames[-1]
            if frame.names:
                name = frame.names.pop()
                if not _remove_entry(fd, name, frame.owner):
                    continue
                inner = _enter(fd, name, frame.owner)
                if inner is None:
                    left.append("/".join(f.name for f in frames) + "/" + name)
                    continue
                os.close(fd)
                fd, owner = inner
                with FileRights(owner):
                    frames.append(_Frame(name, owner, os.listdir(fd)))
                continue
            frames.pop()
            if not frames:
                return left
            with FileRights(frame.owner):  # looking up ".." needs search rights on the folder left
                parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = parent
            with FileRights(frames[-1].owner):
                try:
                    os.rmdir(frame.name, dir_fd=fd)
                except OSError:
                    left.append("/".join(f.name for f in frames) + "/" + frame.name)
    finally:
        os.close(fd)


class _Frame:
    """A folder on :func:`empty`'s way down: its name in its parent, its owner, the names still to remove."""

    __slots__ = ("name", "owner", "names")

    def __init__(self, name: str, owner: int, names: list[str]):
        self.name, self.owner, self.names = name, owner, names


def _remove_entry(fd: int, name: str, owner: int) -> bool:
    """Remove ``name`` from the folder ``fd`` with its ``owner``'s rights: a file, a link or an empty folder
    goes at once. True when it is a folder that must be emptied first."""
    with FileRights(owner):
        try:
            entry = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(entry.st_mode):
                os.unlink(name, dir_fd=fd)
                return False
            os.rmdir(name, dir_fd=fd)
            return False
        except FileNotFoundError:
            return False
        except OSError:
            return True  # a folder with something in it, or one locked by its owner


def _enter(parent: int, name: str, parent_owner: int) -> tuple[int, int] | None:
    """A descriptor on the folder ``name`` in ``parent`` and its owner, after the owner made it readable and
    writable again; None when it cannot be opened. Looking ``name`` up needs the rights of ``parent``'s owner;
    opening the folder for reading, its own owner's."""
    try:
        with FileRights(parent_owner):
            path = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError:
        return None
    try:
        owner = os.fstat(path).st_uid
        with FileRights(owner):
            os.chmod(f"/proc/self/fd/{path}", 0o700)
            return os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=path), owner
    except OSError:
        return None
    finally:
        os.close(path)


def clean(uids: set[int], scratch_root: str, keep: tuple[int, ...] = ()) -> list[str]:
    """Clear everything the sample's ``uids`` left and verify it; returns what is still there.
    ``keep``: the server's worker zygote, root and never the sample's."""
    for uid in uids:
        kill_uid(uid)
    deadline = time.monotonic() + SETTLE_S
    while others(keep) and time.monotonic() < deadline:  # orphans are pid 1's to reap
        for pid in others(keep):
            if process_uid(pid) in uids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.005)
    folders = [folder for folder in (scratch_root, *WRITABLE) if os.path.isdir(folder)]
    left = [path for folder in folders for path in empty(folder)]
    problems = []
    if others(keep):
        problems.append(f"processes {others(keep)} outlived the sample")
    leftovers = [os.path.join(folder, name) for folder in folders for name in os.listdir(folder)]
    if left or leftovers:
        problems.append(f"files {sorted(set(left + leftovers))[:10]} could not be removed")
    return problems
