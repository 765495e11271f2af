"""The real confinement, in the image: every untrusted process runs as a uid of its own, so the runner finds
it by uid and kills it by uid, and makes and removes folders with their owner's rights (:mod:`privileges`).

A provider's daemon or a session's services share the sandbox, so nothing is ever killed by ``kill(-1)`` of
everything: a sweep stops and kills each process of the request's uids through a pidfd (no new process, so it
works while the submission holds every byte or every pid of the sandbox), then sweeps each uid still alive
by ``kill(-1)`` from a child switched to it (:func:`privileges.kill_uid`), which a fork bomb cannot outrun.
"""

from __future__ import annotations

import os
import _signal  # signal's C module: signal.py builds three enums at import, milliseconds per fresh runner
import stat

from .privileges import as_user, await_exits, drop_privileges, kill_uid, make_dir, remove_dir
from .procfs import process_ids, process_uid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .processes import Processes

# Seconds a sweep lets the processes it signalled die before it forks the atomic killer for any left.
SWEEP_SETTLE_S = 0.1


class Container:
    """The confinement of a runner that is root with CAP_SETUID, CAP_SETGID and CAP_KILL in a container."""

    switches_uid = True

    def spawn_options(self, uid: int) -> dict:
        """Popen's options that start a process as ``uid`` (gid ``uid``, no supplementary groups)."""
        return {"user": uid, "group": uid, "extra_groups": []}

    def scan(self, processes: Processes) -> tuple[list[int], list[int]]:
        """(members, starting): the processes of the request's uids, and the runner's and the worker zygote's
        children not yet switched to their uid."""
        members, starting = [], []
        own = os.getpid()
        for pid in processes.candidates():
            ids = process_ids(pid)
            if ids is None:
                continue
            if ids[0] in processes.uids:
                members.append(pid)
            elif ids[1] == own or ids[1] in processes.zygotes:
                starting.append(pid)
        return members, starting

    def tick_members(self, processes: Processes) -> tuple[list[int], list[int]]:
        """Every tick scans /proc in full: it holds the container's few processes."""
        return self.scan(processes)

    def sweep(self, processes: Processes) -> None:
        """One round of the kill: each member stopped, then killed, through pidfds; then each uid still alive
        swept atomically."""
        for pidfd in self._signal_members(processes, _signal.SIGSTOP):
            os.close(pidfd)
        killed = self._signal_members(processes, _signal.SIGKILL)
        try:
            await_exits(killed, SWEEP_SETTLE_S)
        finally:
            for pidfd in killed:
                os.close(pidfd)
        # Then the atomic sweep of each uid still alive (one forked between the two passes, say).
        for uid in {process_uid(pid) for pid in processes.alive()} & processes.uids:
            try:
                kill_uid(uid)
            except BlockingIOError:  # the uids hold every pid the sandbox allows: the next round retries
                pass

    @staticmethod
    def _signal_members(processes: Processes, sig: int) -> list[int]:
        """Send ``sig`` to each process of the request's uids, one by one (stopping them all first keeps the
        sweep ahead of a fork bomb; :func:`privileges.kill_uid` then gets what was forked in between), and
        return the pidfds signalled, for the caller to wait on and close. A pidfd pins each process, and its
        uid is checked through /proc after it is pinned, so a pid reused by someone else's process in between
        is never signalled."""
        pinned = []
        for pid in processes.members():
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if process_uid(pid) in processes.uids:
                    _signal.pidfd_send_signal(pidfd, sig)
                    pinned.append(pidfd)
                    continue
            except OSError:
                pass
            os.close(pidfd)
        return pinned

    def make_dir(self, uid: int, path: str, mode: int) -> str | None:
        return make_dir(uid, path, mode)

    def remove_dir(self, uid: int, path: str) -> None:
        remove_dir(uid, path)

    def as_user(self, uid: int, action: Callable[[], int], timeout_s: float = 5.0) -> int:
        return as_user(uid, action, timeout_s)

    def end_session(self, pid: int) -> None:
        """Nothing: the uid's sweep reaches whatever the process left, whichever session it moved to."""

    def drop_privileges(self) -> str | None:
        return drop_privileges()

    def runner_uid(self) -> int:
        """The runner's effective uid, which no request may name for its submission."""
        return os.geteuid()

    def image_problem(self, env_dir: str) -> str | None:
        """Why the image cannot confine fairly: hidden tests the submission could read, a runner not root."""
        info = os.stat(env_dir)
        if info.st_uid != 0 or stat.S_IMODE(info.st_mode) & 0o077:
            return f"{env_dir} is readable by other users (mode {stat.S_IMODE(info.st_mode):o}); rebuild the image"
        if os.geteuid() != 0:
            return "the runner must start as root (with at least CAP_SETUID, CAP_SETGID and CAP_KILL) to confine submissions"
        return None
