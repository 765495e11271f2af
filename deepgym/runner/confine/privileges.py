"""The runner's own privileges, and acting as another user.

A provider's sandbox (E2B, Daytona) gives the runner full root, unlike Docker here (three capabilities). So
before anything untrusted runs the runner drops every capability but the three it needs (:data:`KEEP`:
switch uids, signal its own children), from the bounding set too when it may, and sets ``no_new_privs``, so
that nothing it starts can gain a privilege by exec (setuid binaries, file capabilities). A submission that
then runs as an unprivileged uid holds no capability at all: the kernel clears them on the switch.

Everything the runner does to a submission's processes or files it does *as that uid*. ``kill(-1)`` from a
short-lived child switched to it (:func:`as_user`) reaches exactly that uid's processes in one atomic sweep (a
fork bomb cannot outrun it) and nothing else in the sandbox, such as a provider's daemon. Files are created
and removed with that uid's file rights (:class:`FileRights`, the thread's filesystem uid), so the runner
needs no ``CAP_CHOWN`` or ``CAP_DAC_OVERRIDE``.
"""

from __future__ import annotations

import _signal  # signal's C module: signal.py builds three enums at import, milliseconds per fresh runner
import ctypes
import errno
import os
import select
import stat
import time

TYPE_CHECKING = False  # typing itself is not imported at start-up: every millisecond of it is paid per sample
if TYPE_CHECKING:
    from typing import Callable

CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_SETPCAP = 5, 6, 7, 8
KEEP = (CAP_KILL, CAP_SETGID, CAP_SETUID)
PR_CAPBSET_READ, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 23, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# Descriptors a uid-switched child closes: far past any the runner holds (the request's nofile limit is small).
MAX_FD = 1 << 16


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    """The C library's handle, made on first use (a fork inherits it): warm mode's clean-up takes file rights
    for every entry it walks, and a handle per use cost a dlopen each time. ctypes keeps ``errno`` per thread,
    so the one handle serves every thread."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


def status_masks(text: str | None = None) -> dict[str, int]:
    """The capability sets and NoNewPrivs of /proc/self/status (or of ``text``): {"CapEff": mask, ...}."""
    text = _read_text("/proc/self/status") if text is None else text
    masks = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.startswith("Cap"):
            masks[name] = int(value.strip(), 16)
        elif name == "NoNewPrivs":
            masks[name] = int(value.strip())
    return masks


def drop_privileges() -> str | None:
    """Keep only :data:`KEEP` and set ``no_new_privs``; returns why the runner cannot judge safely, or None.

    Supplementary groups are cleared first (root's group 0 would otherwise widen :class:`FileRights`). The
    bounding set is shrunk next, while CAP_SETPCAP (which that needs) may still be held: without it (as
    under Docker here, where the bounding set already is the three) the rest stays in the bounding set, where
    ``no_new_privs`` keeps anything from regaining it. Then capset leaves the three in the permitted and
    effective sets and none inheritable, ambient capabilities are cleared, and ``no_new_privs`` is set. The
    result is read back from /proc/self/status rather than trusted."""
    libc = _libc()
    try:
        os.setgroups([])
    except OSError as exc:
        return f"cannot clear the runner's supplementary groups: {exc.strerror}"
    keep = sum(1 << cap for cap in KEEP)
    last = int(_read_text("/proc/sys/kernel/cap_last_cap"))
    for cap in range(last + 1):
        if cap not in KEEP and libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1:
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EPERM:
                return f"cannot drop capability {cap} from the bounding set: {os.strerror(ctypes.get_errno())}"
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.capget(ctypes.byref(header), data), "capget")
    held = data[0].permitted
    if held & keep != keep:
        return (f"the runner lacks CAP_SETUID, CAP_SETGID or CAP_KILL (permitted {held:#x}); it cannot switch a "
                f"submission to its own user")
    data[0].effective = data[0].permitted = keep
    data[0].inheritable = data[1].effective = data[1].permitted = data[1].inheritable = 0
    _check(libc.capset(ctypes.byref(header), data), "capset")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before Linux 4.3: none to clear
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    status = _read_text("/proc/self/status")
    masks = status_masks(status)
    groups = next((line.split(":", 1)[1].split() for line in status.splitlines() if line.startswith("Groups:")), None)
    if masks.get("CapEff") != keep or masks.get("CapPrm") != keep or masks.get("CapInh") or masks.get("CapAmb") \
            or masks.get("NoNewPrivs") != 1 or groups != []:
        return f"the runner's privileges are not what it set: {masks}, groups {groups}"
    return None


def as_user(uid: int, action: Callable[[], int], timeout_s: float = 5.0) -> int:
    """Run ``action`` in a forked child switched to ``uid`` (gid ``uid``, no supplementary groups) and
    return its exit status (``action``'s return value; 125 when it raised, -9 when it did not finish within
    ``timeout_s``).

    The child holds no capability once switched (every uid is non-zero), so it can do exactly what that uid
    can and nothing more. The uid's own processes can reach it, so it is made harmless to them: its stdin,
    stdout and stderr are /dev/null and it holds no other descriptor (nothing to forge a report with), the
    kernel makes it non-dumpable when its uid changes (no ptrace, no /proc/<pid>/mem), and one that they
    stop or slow is killed at ``timeout_s`` instead of hanging the runner. It is the first victim of an OOM
    kill, before the runner it was forked from (whose memory it shares), should forking it fill the sandbox."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; it only makes system calls and leaves by _exit
        code = 125
        try:
            with open("/proc/self/oom_score_adj", "w") as adj:  # a fork under memory pressure: it, not the runner
                adj.write("1000")
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, MAX_FD)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            code = action()
        finally:
            os._exit(code)
    code = reap(pid, timeout_s)
    if code is None:
        os.kill(pid, _signal.SIGKILL)
        os.waitpid(pid, 0)
        return -_signal.SIGKILL
    return code


def await_exits(pidfds: list[int], timeout_s: float) -> bool:
    """Wait until every process of ``pidfds`` has exited (a pidfd turns readable then, zombies included) or
    ``timeout_s`` passes; returns whether all did. Woken by the kernel, not by polling, so a process that
    dies at once costs no sleep."""
    waiting = select.poll()
    for pidfd in pidfds:
        waiting.register(pidfd, select.POLLIN)
    left, deadline = len(pidfds), time.monotonic() + timeout_s
    while left:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        for pidfd, _ in waiting.poll(remaining * 1000):
            waiting.unregister(pidfd)
            left -= 1
    return True


def reap(pid: int, timeout_s: float) -> int | None:
    """Wait for our child ``pid`` for up to ``timeout_s`` and return its exit status, or None if it is still
    running then. Through a pidfd; by polling every millisecond when none can be opened (no descriptor
    left)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        pidfd = None
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                return None
            if pidfd is None:
                time.sleep(0.001)
            else:
                await_exits([pidfd], deadline - time.monotonic())
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _kill_everything_of_mine() -> int:
    """As a submission's uid: SIGKILL every process of this uid but the caller, in one sweep."""
    try:
        os.kill(-1, _signal.SIGKILL)
    except ProcessLookupError:  # none left
        pass
    return 0


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid``, and only those: ``kill(-1)`` from a child switched to it. The
    kernel signals them all under one lock, so none can fork a survivor during the sweep."""
    as_user(uid, _kill_everything_of_mine)


class FileRights:
    """``with FileRights(uid):`` acts on files with ``uid``'s rights (gid ``uid``) in this thread, and as root
    again afterwards.

    The kernel checks file access and gives new files their owner by the filesystem uid and gid, which
    setfsuid(2) and setfsgid(2) change for the calling thread alone (glibc does not broadcast them to the
    other threads, unlike setuid). The runner holds no file capability (CAP_CHOWN, CAP_DAC_OVERRIDE,
    CAP_FOWNER) and no supplementary group (:func:`drop_privileges` clears them), so within this block the
    thread can do to files exactly what ``uid`` can, and nothing else: it stays root in every other respect,
    so the uid's processes can neither signal nor trace it. A fork per folder would cost more than the
    rest of a small sample's work put together. A class, not contextlib's decorator: contextlib's imports
    (collections, functools) cost a fresh runner milliseconds of CPU per sample."""

    def __init__(self, uid: int):
        self.uid = uid
        self._libc = _libc()

    def __enter__(self) -> None:
        self._libc.setfsgid(self.uid)
        self._libc.setfsuid(self.uid)
        # Neither call reports a failure; an invalid id makes them return the current one instead.
        if self._libc.setfsuid(-1) != self.uid or self._libc.setfsgid(-1) != self.uid:
            self.__exit__()
            raise PermissionError(f"cannot take uid {self.uid}'s file rights")

    def __exit__(self, *exc_info: object) -> None:
        self._libc.setfsuid(0)
        self._libc.setfsgid(0)


def make_dir(uid: int, path: str, mode: int) -> str | None:
    """Create ``path`` (which must not exist) as ``uid`` with ``mode``; returns why it could not, or None."""
    try:
        with FileRights(uid):
            os.mkdir(path, mode)
            os.chmod(path, mode)  # the umask may have cut it
    except FileExistsError:
        return f"{path} exists already; the runner creates the scratch directory itself"
    except OSError:
        return f"{path} could not be created as uid {uid} (is its folder writable by that user?)"
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or stat.S_IMODE(info.st_mode) != mode:
        return f"{path} is not a directory of uid {uid} with mode {mode:o} after creating it"
    return None


def remove_tree(path: str) -> None:
    """Remove ``path`` and everything in it, as far as this thread's file rights allow, never raising.

    Each folder is made writable and searchable again before it is read (the submission may have locked
    them), files and symlinks are unlinked as they are found (a symlink is never followed, ``path`` itself
    included), and the folders go last, deepest first. Iterative, so that no depth of folders exhausts the
    runner's stack, and by hand rather than with shutil.rmtree, whose imports (its compression modules) cost
    a fresh runner more than the removal."""
    if os.path.islink(path) or not os.path.isdir(path):
        _ignore_errors(os.unlink, path)
        return
    folders = [path]  # each after its parent: removed in reverse, every folder is empty when its turn comes
    for folder in folders:
        _ignore_errors(lambda name: os.chmod(name, 0o700), folder)
        try:
            with os.scandir(folder) as entries:
                found = [(entry.path, entry.is_dir(follow_symlinks=False)) for entry in entries]
        except OSError:
            continue
        for name, is_folder in found:
            if is_folder:
                folders.append(name)
            else:
                _ignore_errors(os.unlink, name)
    for folder in reversed(folders):
        _ignore_errors(os.rmdir, folder)


def _ignore_errors(action: Callable[[str], None], path: str) -> None:
    try:
        action(path)
    except OSError:
        pass


def remove_dir(uid: int, path: str) -> None:
    """Remove ``path`` and everything in it with ``uid``'s rights (call after killing ``uid``, so that nothing
    changes the tree while it is removed)."""
    if os.path.lexists(path):
        with FileRights(uid):
            remove_tree(path)
