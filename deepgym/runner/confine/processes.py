"""Untrusted processes: spawn them, measure them, and kill everything they started.

How they are confined is a strategy (:class:`Processes`' ``confinement``): :mod:`container` is the real one,
where the runner is root holding only CAP_SETUID, CAP_SETGID and CAP_KILL (:mod:`privileges`) and every
untrusted process runs as the request's uid (a patch's applier as its applier uid) with no capabilities, so it
cannot read the hidden tests (root-only), signal the runner, or write its stdout; the runner measures and kills
them by those uids alone, never by ``kill(-1)`` of everything, since a provider's daemon or a session's
services share the sandbox. :mod:`local` is for the host-side ``local`` runtime: the same code, same user, no
isolation at all.

CPU time is what limits a submission (see :class:`Limits`): inside a container it comes from the container's
cgroup, which also counts processes that already exited, provided the runner can prove that the cgroup
mounted is the container's own (:func:`procfs.own_cgroup_mount`) and that nothing but the runner, its init and
the request's uids lives in it (:meth:`Processes.cgroup_is_ours`); otherwise it falls back to per-process
accounting of those uids, and never charges anyone else's CPU to a submission. The run state of the
untrusted threads is sampled so that a wall-clock limit can tell "slept" from "was starved by a busy host".
"""

from __future__ import annotations

import _thread  # not threading: its imports (functools, collections) cost a fresh runner milliseconds
import os
import sys
import time

from ..protocol import DEFAULT_UID
from .forked import KILL_WAIT_S
from .procfs import (ancestors, cgroup_cpu_s, cgroup_memory_limit_hits, cgroup_oom_kills, cgroup_procs_file,
                     proc_stat, process_ids, psi_cpu_stall_s, read_text)
from .usage import Usage, growing_into_memory_limit

# subprocess is imported where a process is spawned (Processes.spawn), not at start-up: a function task's
# workers are forked by the worker zygote, and with its locale import it costs every such runner milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Callable, Protocol

    from .forked import Forked, WorkerConnection

    class Confinement(Protocol):
        """What differs between the container and the host's local mode: :class:`container.Container` and
        :class:`local.Local`, the only two."""

        switches_uid: bool  # each untrusted process runs as a uid of its own (so its cgroup may be counted)

        def spawn_options(self, uid: int) -> dict: ...
        def scan(self, processes: Processes) -> tuple[list[int], list[int]]: ...
        def tick_members(self, processes: Processes) -> tuple[list[int], list[int]]: ...
        def sweep(self, processes: Processes) -> None: ...
        def make_dir(self, uid: int, path: str, mode: int) -> str | None: ...
        def remove_dir(self, uid: int, path: str) -> None: ...
        def as_user(self, uid: int, action: Callable[[], int], timeout_s: float = 5.0) -> int: ...
        def end_session(self, pid: int) -> None: ...

CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
# The modules an untrusted process starts as (:func:`python_main`): a worker, and a program's case zygote.
WORKER = f"{__package__}.worker"
ZYGOTE = f"{__package__}.zygote"


def python_main(module: str) -> list[str]:
    """The command line of a fresh interpreter that runs ``module``'s ``main(sys.argv[1:])`` and exits with its
    status, as ``python3 -I -B -m module`` would run its ``__main__`` block, without runpy, whose imports cost a
    fresh interpreter about 4 ms of CPU. Append the arguments."""
    return [sys.executable, "-I", "-B", "-c", f"import sys; from {module} import main; sys.exit(main(sys.argv[1:]))"]


class Processes:
    """Spawns untrusted processes as ``uid`` (or ``applier_uid``) and keeps track of everything they start.
    ``confinement`` is how: :class:`container.Container` (each process as its uid, found and killed by uid) or
    :class:`local.Local` (the host's ``local`` runtime: found and killed by session). ``homes`` maps a uid to
    its own directory, its processes' HOME and TMPDIR. ``workers``, when given (and the confinement switches
    uids), is the connection to the worker zygote that forks function workers (:meth:`fork_worker`); the
    zygote is runner side like the runner's :func:`procfs.ancestors`."""

    def __init__(self, confinement: Confinement, uid: int = DEFAULT_UID, applier_uid: int = DEFAULT_UID + 1,
                 workers: WorkerConnection | None = None, applier_runs: bool = True):
        self.confinement = confinement
        self.workers = workers if confinement.switches_uid else None
        self.uid = uid
        self.applier_uid = applier_uid
        # The users a process may be spawned as (:meth:`spawn` refuses any other); ``applier_runs`` False when
        # the sample never runs anything as the applier (see protocol.Request.uids).
        self.uids = {uid, applier_uid} if applier_runs else {uid}
        self.homes: dict[int, str] = {}
        self.sessions: set[int] = set()  # the session of each process spawned (each leads its own)
        self._seen_cpu: dict[tuple[int, int], float] = {}
        self.spawned: list[subprocess.Popen[bytes]] = []
        # The heartbeat thread measures too (cpu_s), and the fallback accounting keeps state.
        self._measuring = _thread.allocate_lock()
        # The cgroup is trusted until a read finds someone else in it; from then on the per-process measure
        # continues from the last cgroup value (the offset), so the CPU time stays monotonic.
        self._cgroup_trusted = confinement.switches_uid
        self._procs_ours: str | None = None  # cgroup.procs when every process in it was last found ours
        self._offset: float | None = None
        self._last_cpu_s = 0.0
        # The runner's own side in the container besides itself: its ancestors and the worker zygote, whose
        # children are workers not yet switched to the submission's uid.
        self.zygotes = () if self.workers is None else (self.workers.pid,)
        self._ancestors = ancestors() + self.zygotes
        self._init_cpu0 = self._init_cpu_s()
        # What the cgroup counted before this sample: a warm container's earlier samples, or nothing much.
        self._cgroup_base = 0.0
        if self._cgroup_ours():
            self._cgroup_base = max(0.0, (cgroup_cpu_s() or 0.0) - time.process_time())
        self._oom0 = self.oom_kills()
        self._psi0 = psi_cpu_stall_s()

    def spawn(self, argv: list[str], *, pass_fds: tuple[int, ...] = (), cwd: str = "/",
              stdin: int | None = None, uid: int | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start an untrusted process with piped stdout/stderr, a clean environment (plus ``env``) and its own
        session, as ``uid`` (default: the submission's) where the confinement switches uids, reading ``stdin`` (a
        descriptor; None: /dev/null). Raises OSError when it cannot start."""
        import subprocess

        uid = self.uid if uid is None else uid
        if uid not in self.uids:
            raise ValueError(f"uid {uid} is not one of this sample's users {sorted(self.uids)}")
        extra = self.confinement.spawn_options(uid)
        env = {**CLEAN_ENV, **(env or {})}
        if uid in self.homes:
            env["HOME"] = env["TMPDIR"] = self.homes[uid]
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL if stdin is None else stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=pass_fds, cwd=cwd, env=env, start_new_session=True, close_fds=True, **extra,
        )
        self.spawned.append(proc)
        self.sessions.add(proc.pid)
        return proc

    def fork_worker(self, argv: list[str], fds: tuple[int, ...], cwd: str = "/",
                    preload: tuple[str, ...] = (), main: str = "worker") -> Forked:
        """A worker (``worker.main(argv)``; ``main`` "case_server": ``zygote.main(argv)``) as the submission's uid,
        forked by the worker zygote once it has imported the standard-library modules ``preload``; the same
        environment, session and descriptors as :meth:`spawn` gives, ``fds`` as its descriptors from 3. Raises
        OSError when the zygote cannot serve."""
        assert self.workers is not None
        env = dict(CLEAN_ENV)
        if self.uid in self.homes:
            env["HOME"] = env["TMPDIR"] = self.homes[self.uid]
        return self.workers.fork(argv, uid=self.uid, cwd=cwd, env=env, fds=fds, preload=preload, main=main)

    def members(self) -> list[int]:
        """Pids of every live untrusted process."""
        return self.confinement.scan(self)[0]

    def candidates(self) -> list[int]:
        """Every pid in /proc but the runner's, the init's (pid 1) and the worker zygote's: the processes a
        confinement's scan looks at."""
        own = os.getpid()
        return [pid for name in os.listdir("/proc") if name.isdigit()
                and (pid := int(name)) != own and pid != 1 and pid not in self.zygotes]

    def tick_members(self) -> tuple[list[int], list[int]]:
        """(members, starting) for a tick of a :class:`Meter`: the pids of every live untrusted process, and of
        the runner's and the worker zygote's children not yet switched to their uid. A starting process is on
        its way to becoming the submission's (a worker, an action), so it waits for the CPU on the submission's
        behalf; nothing of the submission's has run in it yet. The confinement decides how cheaply."""
        return self.confinement.tick_members(self)

    def any_runnable(self, pids: list[int]) -> bool:
        for pid in pids:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                st = proc_stat(f"{pid}/task/{tid}")
                if st is not None and st.state == "R":
                    return True
        return False

    def _process_cpu_s(self, pids: list[int]) -> float:
        """Fallback CPU measure outside a cgroup: the last value seen for every process ever seen."""
        for pid in pids:
            st = proc_stat(pid)
            if st is not None:
                self._seen_cpu[(pid, st.start)] = st.cpu_s
        return sum(self._seen_cpu.values())

    def _init_cpu_s(self) -> float:
        """The own CPU seconds of the runner's ancestors in the container (its init; in warm mode the server
        too) and of the worker zygote: they are in the cgroup as well, and none of it is the submission's."""
        return sum(stat.own_cpu_s for pid in self._ancestors if (stat := proc_stat(pid)) is not None)

    def cgroup_is_ours(self) -> bool:
        """Whether every process in the runner's cgroup is the runner, one of its :func:`ancestors` (the init,
        warm mode's server) or the worker zygote (their own CPU is subtracted), a child of the runner or of the
        zygote not yet switched to its uid, or of the request's uids.

        A provider's daemon (E2B's envd, Daytona's toolbox) or a session's services may share the cgroup,
        and the cgroup cannot tell their CPU from the submission's: a single one of them makes the counters
        someone else's. A pid shown as 0 lives outside the runner's pid namespace: someone else's too.

        Checked at every read, so each tick costs one read of ``cgroup.procs`` while it lists the same pids
        as at the last check: none of those can have become someone else's since (an unprivileged uid cannot
        change, and a pid is only reused once the namespace's whole pid space has wrapped around)."""
        procs = cgroup_procs_file()
        text = None if procs is None else read_text(procs)
        if text is None:
            return False
        if text == self._procs_ours:
            return True  # the same processes as at the last check, which were all ours
        own = os.getpid()
        for token in text.split():
            pid = int(token)
            if pid == own or pid in self._ancestors:
                continue
            ids = process_ids(pid)
            if ids is None:
                if pid == 0:
                    return False
                continue  # it exited while we looked
            uid, ppid = ids
            if uid not in self.uids and ppid != own and ppid not in self.zygotes:
                return False
        self._procs_ours = text
        return True

    def _cgroup_ours(self) -> bool:
        """Whether the cgroup's counters may be read now; once they may not, never again this sample."""
        if self._cgroup_trusted and not self.cgroup_is_ours():
            self._cgroup_trusted = False
        return self._cgroup_trusted

    def cpu_s(self, pids: list[int] | None = None) -> float:
        """CPU seconds the untrusted processes have used so far (monotonic). Thread-safe.

        From the cgroup while it holds only ours (:meth:`cgroup_is_ours`): its total minus the runner's and
        its init's own CPU; helpers the runner forks as a uid (the killer) count as that uid's. Otherwise the
        per-process accounting of the request's uids, over ``pids`` (default: :meth:`members`)."""
        with self._measuring:
            if self._cgroup_ours():
                total = cgroup_cpu_s()
                if total is not None:
                    init = max(0.0, self._init_cpu_s() - self._init_cpu0)
                    self._last_cpu_s = max(self._last_cpu_s, total - time.process_time() - init - self._cgroup_base)
                    return self._last_cpu_s
                self._cgroup_trusted = False
            measured = self._process_cpu_s(self.members() if pids is None else pids)
            if self._offset is None:
                self._offset = self._last_cpu_s - measured
            self._last_cpu_s = max(self._last_cpu_s, measured + self._offset)
            return self._last_cpu_s

    def oom_kills(self) -> int | None:
        """The cgroup's OOM kill count, or None unless the cgroup held only ours when last checked (every
        :meth:`cpu_s`, which each tick and heartbeat reads first: one check per tick keeps ticks cheap)."""
        return cgroup_oom_kills() if self._cgroup_trusted else None

    def memory_limit_hits(self) -> int | None:
        """The cgroup's memory limit hits, or None unless the cgroup held only ours when last checked."""
        return cgroup_memory_limit_hits() if self._cgroup_trusted else None

    def facts(self) -> dict[str, float | int | None]:
        """The submission's side of a heartbeat: its CPU seconds, the OOM kills in the runner's cgroup and the
        CPU stall (PSI), each since this sandbox was made; None where unknown."""
        cpu_s = self.cpu_s()
        oom, psi = self.oom_kills(), psi_cpu_stall_s()
        return {"submission_cpu_s": round(cpu_s, 3),
                "oom_kills": None if oom is None or self._oom0 is None else oom - self._oom0,
                "cpu_stall_s": None if psi is None or self._psi0 is None else round(psi - self._psi0, 3)}

    def watch(self) -> Meter:
        """Start measuring a window (one case, or loading the submission)."""
        return Meter(self)

    def alive(self) -> list[int]:
        """The members that are not zombies."""
        return [pid for pid in self.members() if (stat := proc_stat(pid)) is not None and stat.state != "Z"]

    def kill_all(self) -> None:
        """SIGKILL every untrusted process, including daemonized grandchildren, and reap our children.

        The confinement sweeps (:meth:`container.Container.sweep`: by uid, which a fork bomb cannot outrun;
        :meth:`local.Local.sweep`: by session); sweeps repeat until /proc shows none of them alive."""
        self.confinement.sweep(self)
        for proc in self.spawned:
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        self.spawned.clear()
        deadline = time.monotonic() + KILL_WAIT_S
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
            self.confinement.sweep(self)


class Meter:
    """Measures the untrusted processes over a window; call :meth:`tick` while waiting."""

    # A tick is due every Supervised.POLL_S; time beyond this between two ticks is the runner running late.
    LAG_ALLOWANCE_S = 0.05

    def __init__(self, processes: Processes, start: tuple[float, float, float | None, int | None] | None = None,
                 limit_hits: int | None = None):
        self.processes = processes
        self.usage = Usage()
        if start is None:
            start = time.monotonic(), processes.cpu_s(), psi_cpu_stall_s(), processes.oom_kills()
        # (wall, CPU, PSI stall, OOM kills) at the window's start, then at its last tick (see successor).
        self._wall0, self._cpu0, self._psi0, self._oom0 = start
        self._last = self._wall0
        self._latest = start
        self._limit_hits0 = processes.memory_limit_hits() if limit_hits is None else limit_hits

    def tick(self) -> Usage:
        """Update and return the usage so far (cheap: :meth:`Processes.tick_members`)."""
        usage = self.usage
        members, starting = self.processes.tick_members()
        now = time.monotonic()
        usage.runner_lag_s += max(0.0, now - self._last - self.LAG_ALLOWANCE_S)
        self._last = now
        usage.wall_s = now - self._wall0
        cpu = self.processes.cpu_s(members)
        usage.cpu_s = max(0.0, cpu - self._cpu0)
        usage.samples += 1
        if members:
            usage.present_samples += 1
        if self.processes.any_runnable(members + starting):
            usage.runnable_samples += 1
        psi = psi_cpu_stall_s()
        if psi is not None and self._psi0 is not None:
            usage.psi_stall_s = psi - self._psi0
        oom = self.processes.oom_kills()
        if oom is not None and self._oom0 is not None:
            usage.oom_kills = oom - self._oom0
        self._latest = now, cpu, psi, oom
        return usage

    def successor(self) -> Meter:
        """The meter of the next window, starting where this one's last tick ended (at its start, without a
        tick), without measuring again: the next reply of a batch (:meth:`Supervised.wait`). The windows are
        contiguous, so their CPU adds up to what the sandbox used, however the replies fell into them. A window
        that ended without a tick (its reply had come with an earlier one) hands on its start, memory limit
        hits included: read again, they would cost two cgroup reads per case of a batch."""
        return Meter(self.processes, self._latest, None if self.usage.samples else self._limit_hits0)

    def memory_limit(self) -> str | None:
        """How the submission ran into a memory limit during this window, or None. Read once, when a time
        limit fires (ticks stay cheap): memory evidence wins over the time limit, since a submission growing
        into its memory limit spends its CPU time getting memory from the kernel."""
        hits = self.processes.memory_limit_hits()
        if hits is not None and self._limit_hits0 is not None and hits > self._limit_hits0:
            return "stopped at the sandbox's memory limit, with the kernel reclaiming memory for it"
        return growing_into_memory_limit(self.processes.members())

