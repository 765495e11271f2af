"""The host-side ``local`` runtime's confinement: none. Every process runs as the runner's own uid, so it is
found by the session the runner started it in and killed by that session's group, and folders are plain
``mkdir``. The one place in the runner where local mode lives; unsafe by design (see the README).
"""

from __future__ import annotations

import os
import _signal  # signal's C module: signal.py builds three enums at import, milliseconds per fresh runner
import time

from .privileges import remove_tree
from .procfs import proc_stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .processes import Processes

# A tick between full scans of the host's /proc (each a read of every process on the host) rereads only the
# processes the last one found: a child started since is measured at most this late, and the CPU of a child
# that its parent reaped is in the parent's all along.
FULL_SCAN_S = 0.1


class Local:
    """No confinement, for one :class:`processes.Processes` (it keeps that one's last full scan)."""

    switches_uid = False

    def __init__(self) -> None:
        self._known: list[int] = []  # the members the last full scan found (tick_members)
        self._next_full_scan = 0.0

    def spawn_options(self, uid: int) -> dict:
        return {}

    def scan(self, processes: Processes) -> tuple[list[int], list[int]]:
        """(members, none starting): the processes in a session we started."""
        return [pid for pid in processes.candidates()
                if (st := proc_stat(pid)) is not None and st.session in processes.sessions], []

    def tick_members(self, processes: Processes) -> tuple[list[int], list[int]]:
        """A full scan reads every process on the host, so it runs at most every :data:`FULL_SCAN_S`; the ticks
        in between reread the pids it found and the ones we spawned since, keeping those still alive in our
        sessions (none is ever starting: each is in its session from its start)."""
        now = time.monotonic()
        if now >= self._next_full_scan:
            self._next_full_scan = now + FULL_SCAN_S
            self._known = processes.members()
        else:
            known = set(self._known) | {proc.pid for proc in processes.spawned}
            self._known = [pid for pid in known
                           if (st := proc_stat(pid)) is not None and st.session in processes.sessions]
        return self._known, []

    def sweep(self, processes: Processes) -> None:
        """kill(-1) is no option as our own uid: each process of a session we started is killed, then each
        session's group."""
        for pid in processes.members():
            try:
                os.kill(pid, _signal.SIGKILL)
            except OSError:
                pass
        for sid in processes.sessions:
            self.end_session(sid)

    def make_dir(self, uid: int, path: str, mode: int) -> str | None:
        if os.path.lexists(path):
            return f"{path} exists already; the runner creates the scratch directory itself"
        os.mkdir(path, mode)
        return None

    def remove_dir(self, uid: int, path: str) -> None:
        remove_tree(path)

    def as_user(self, uid: int, action: Callable[[], int], timeout_s: float = 5.0) -> int:
        """``action`` run by the runner itself: there is no other uid to be."""
        return action()

    def end_session(self, pid: int) -> None:
        """Kill the group of the session ``pid`` leads (what a process left running, unless it setsid() again)."""
        try:
            os.killpg(pid, _signal.SIGKILL)
        except OSError:
            pass

    def drop_privileges(self) -> str | None:
        return None

    def runner_uid(self) -> int:
        return -1  # any uid may be named: the submission runs as the caller's anyway

    def image_problem(self, env_dir: str) -> str | None:
        return None
