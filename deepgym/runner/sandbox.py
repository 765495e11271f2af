"""Untrusted processes: spawn them confined, measure them, and kill everything they started.

Two confinements exist. ``container`` is the real one: the runner is root holding only CAP_SETUID,
CAP_SETGID and CAP_KILL (:mod:`privileges`), and every untrusted process runs as the request's uid (a patch's
applier as its applier uid) with no capabilities, so it cannot read the hidden tests (root-only), signal the
runner, or write its stdout. The runner measures and kills them by those uids alone, never by ``kill(-1)``
of everything: a provider's daemon or a session's services share the sandbox. ``none`` is for the
host-side ``local`` runtime: the same code, same user, no isolation at all.

CPU time is what limits a submission (see :class:`Limits`): inside a container it comes from the container's
cgroup, which also counts processes that already exited, provided the runner can prove that the cgroup
mounted is the container's own (:func:`own_cgroup_mount`) and that nothing but the runner, its init and the
request's uids lives in it (:meth:`Sandbox.cgroup_is_ours`); otherwise it falls back to per-process
accounting of those uids, and never charges anyone else's CPU to a submission. The run state of the
untrusted threads is sampled so that a wall-clock limit can tell "slept" from "was starved by a busy host".
"""

from __future__ import annotations

import functools
import os
import _signal  # signal's C module: signal.py builds three enums at import, milliseconds per fresh runner
import selectors
import threading
import time

from .privileges import await_exits, kill_uid, make_dir, remove_dir, remove_tree
from .protocol import DEFAULT_UID, Limits, Record

# subprocess is imported where a process is spawned (Sandbox.spawn), not at start-up: a function task's
# workers are forked by the worker zygote, and with its locale import it costs every such runner milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess

    from .forked import Forked, WorkerConnection

CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
CLK_TCK = os.sysconf("SC_CLK_TCK")
# A process that spent at least this share of its CPU in the kernel while its resident memory peaked at this
# share of its address-space limit was growing into its memory limit (see growing_into_memory_limit).
KERNEL_CPU_SHARE = 0.5
MEMORY_LIMIT_SHARE = 0.25
PSI_CPU = "/proc/pressure/cpu"
CGROUP_ROOT = "/sys/fs/cgroup"
# The counters the runner reads, per cgroup version: (controller folder, file). v1 mounts one folder per
# controller; v2 has one unified folder.
_CPU_FILES = ((f"{CGROUP_ROOT}/cpuacct", "cpuacct.usage"), (CGROUP_ROOT, "cpu.stat"))  # ns; usage_usec line
_MEMORY_FILES = ((f"{CGROUP_ROOT}/memory", "memory.oom_control"), (CGROUP_ROOT, "memory.events"))
# Seconds kill_all keeps sweeping before it gives up on processes that will not die (zombies nobody reaps).
KILL_WAIT_S = 2.0
# Unconfined, a tick between full scans of the host's /proc (each a read of every process on the host)
# rereads only the processes the last one found: a child started since is measured at most this late, and
# the CPU of a child that its parent reaped is in the parent's all along.
FULL_SCAN_S = 0.1
# Seconds a sweep lets the processes it signalled die before it forks the atomic killer for any left.
SWEEP_SETTLE_S = 0.1


def _read_bytes(path: str) -> bytes | None:
    """The whole file, or None when it cannot be read. Plain system calls: the runner reads a few /proc and
    cgroup files on every 20 ms tick, where pathlib's text layer costs more than the reads."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _read(path: str) -> str | None:
    data = _read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace")


def _keyed(text: str, key: str) -> int | None:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return int(parts[1])
    return None


def own_cgroup_mount(proc_cgroup: str, mountinfo: str, folder: str) -> bool:
    """Whether the cgroupfs mounted at ``folder`` shows this process's own cgroup, decided from the texts of
    /proc/self/cgroup and /proc/self/mountinfo.

    A container's counters are only the container's when the mount's root is the cgroup the process is in:
    "/" and "/" in a private cgroup namespace; "/docker/<id>" and "/docker/<id>" when Docker bind-mounts the
    container's subtree of the host's hierarchy (cgroup v1, the host's namespace). The host's whole hierarchy
    mounted into the container has root "/" while the process is in "/docker/<id>": those counters are the
    host's, and charging them to a submission would time out every answer. Of several mounts on ``folder``
    the last one is the one visible."""
    mount = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if sep and len(fields) >= 5 and len(tail) >= 3 and fields[4] == folder:
            mount = fields[3], tail[0], set(tail[2].split(","))
    if mount is None:
        return False
    root, fstype, options = mount
    for entry in proc_cgroup.splitlines():
        hierarchy, _, rest = entry.partition(":")
        controllers, _, path = rest.partition(":")
        if fstype == "cgroup2" and hierarchy == "0" and controllers == "":
            return path == root
        if fstype == "cgroup" and controllers and set(controllers.split(",")) <= options:
            return path == root
    return False


@functools.cache
def _trusted(folder: str) -> bool:
    """Whether the counters under ``folder`` are this container's own (see :func:`own_cgroup_mount`); a
    folder reached through a symlink (v1's cpuacct -> cpu,cpuacct) is judged by its mount."""
    proc_cgroup, mountinfo = _read("/proc/self/cgroup"), _read("/proc/self/mountinfo")
    if proc_cgroup is None or mountinfo is None:
        return False
    return own_cgroup_mount(proc_cgroup, mountinfo, os.path.realpath(folder))


def _cgroup_text(files: tuple[tuple[str, str], ...]) -> tuple[int, str] | None:
    """(index of the version that answered, the file's text) for the first of ``files`` that exists in a
    cgroup this container owns, or None: counters that may be the host's are never read."""
    for index, (folder, name) in enumerate(files):
        text = _read(f"{folder}/{name}")  # not pathlib's /: this runs several times per tick
        if text is not None:
            return (index, text) if _trusted(folder) else None
    return None


@functools.cache
def _cgroup_procs_file() -> str | None:
    """The ``cgroup.procs`` beside the CPU counter the runner reads, or None without one."""
    return next((f"{folder}/cgroup.procs" for folder, name in _CPU_FILES if os.path.exists(f"{folder}/{name}")), None)


def cgroup_cpu_s() -> float | None:
    """CPU seconds used by every process of this cgroup (the whole container), or None outside one or when
    the cgroup mounted is not provably this container's own."""
    found = _cgroup_text(_CPU_FILES)
    if found is None:
        return None
    version, text = found
    if version == 0:
        return int(text) / 1e9
    usec = _keyed(text, "usage_usec")
    return None if usec is None else usec / 1e6


def cgroup_oom_kills() -> int | None:
    """How many processes the kernel has OOM-killed in this cgroup, or None when unknown."""
    found = _cgroup_text(_MEMORY_FILES)
    return None if found is None else _keyed(found[1], "oom_kill")


def cgroup_memory_limit_hits() -> int | None:
    """How many times this cgroup's memory usage ran into its limit, or None when unknown. Every hit makes the
    kernel reclaim memory, which costs CPU: a submission growing into its limit can spend its CPU time in the
    kernel before the OOM killer strikes, and this counter is the evidence that memory, not CPU, stopped it.
    v1: ``memory.failcnt``; v2: the ``max`` and ``oom`` lines of ``memory.events``."""
    found = _cgroup_text(_MEMORY_FILES)
    if found is None:
        return None
    version, text = found
    if version == 0:
        failcnt = _read(f"{_MEMORY_FILES[0][0]}/memory.failcnt")
        return None if failcnt is None else int(failcnt)
    return sum(_keyed(text, key) or 0 for key in ("max", "oom"))


def psi_cpu_stall_s() -> float | None:
    """Host-wide seconds during which some runnable task waited for a CPU (PSI), or None without PSI."""
    text = _read(PSI_CPU)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("some "):
            for item in line.split():
                if item.startswith("total="):
                    return int(item[6:]) / 1e6
    return None


class _Stat:
    """One read of /proc/<pid>/stat: ``own_cpu_s`` leaves out the children the process reaped."""

    __slots__ = ("state", "ppid", "session", "cpu_s", "system_s", "start", "own_cpu_s")

    def __init__(self, state: str, ppid: int, session: int, cpu_s: float, system_s: float, start: int,
                 own_cpu_s: float):
        self.state, self.ppid, self.session, self.start = state, ppid, session, start
        self.cpu_s, self.system_s, self.own_cpu_s = cpu_s, system_s, own_cpu_s


def _stat(pid: int | str) -> _Stat | None:
    data = _read_bytes(f"/proc/{pid}/stat")
    if not data:
        return None
    parts = data[data.rindex(b")") + 2:].split()
    ticks = [int(x) for x in parts[11:15]]  # utime stime cutime cstime
    return _Stat(parts[0].decode(), int(parts[1]), int(parts[3]), sum(ticks) / CLK_TCK,
                 (ticks[1] + ticks[3]) / CLK_TCK, int(parts[19]), sum(ticks[:2]) / CLK_TCK)


def _status_field(text: bytes, key: bytes) -> int | None:
    """The first number of the line ``key`` of a /proc/<pid>/status text."""
    at = text.find(b"\n" + key + b":\t")
    return None if at < 0 else int(text[at + len(key) + 3:at + len(key) + 40].split(None, 1)[0])


def process_ids(pid: int | str) -> tuple[int, int] | None:
    """(real uid, parent pid) of ``pid`` from one read of /proc/<pid>/status, or None when it is gone."""
    text = _read_bytes(f"/proc/{pid}/status")
    if text is None:
        return None
    uid, ppid = _status_field(text, b"Uid"), _status_field(text, b"PPid")
    return None if uid is None or ppid is None else (uid, ppid)


def process_uid(pid: int | str) -> int | None:
    """The real uid of ``pid`` (/proc/<pid>/status), or None when it is gone: the uid a kill(-1) switched to
    that uid reaches, whatever the process did to its effective uid or its dumpable flag."""
    ids = process_ids(pid)
    return None if ids is None else ids[0]


def _memory_peak(pid: int) -> tuple[int, int] | None:
    """(peak resident memory, RLIMIT_AS) of ``pid`` in bytes, or None when unknown or unlimited."""
    status, limits = _read(f"/proc/{pid}/status"), _read(f"/proc/{pid}/limits")
    if status is None or limits is None:
        return None
    peak = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")), None)
    limit = next((line.split()[3] for line in limits.splitlines() if line.startswith("Max address space")), None)
    if peak is None or limit is None or not limit.isdigit():
        return None
    return peak, int(limit)


def growing_into_memory_limit(pids: list[int]) -> str | None:
    """Why the processes ``pids`` were running into their memory limit, or None.

    A process growing into its limit spends its CPU in the kernel, which hands memory out in page faults; on a
    busy host each fault costs several times more, so a memory bomb can use up its CPU limit before its
    address space runs out (RLIMIT_AS, set by the worker). Evidence: most of its CPU went to the kernel while
    its resident memory reached a quarter of its address-space limit, so a bomb is told apart as long as its
    whole limit would cost at most four CPU limits to fault in. A computation that is only slow spends its CPU in user
    space; a process busy in system calls holds little memory."""
    for pid in pids:
        stat, memory = _stat(pid), _memory_peak(pid)
        if stat is None or memory is None or stat.cpu_s <= 0:
            continue
        peak, limit = memory
        if stat.system_s >= KERNEL_CPU_SHARE * stat.cpu_s and peak >= MEMORY_LIMIT_SHARE * limit:
            return (f"running into its memory limit ({peak >> 20} MiB resident of {limit >> 20} MiB of address "
                    f"space, {stat.system_s:.2f}s of its {stat.cpu_s:.2f}s of CPU in the kernel getting memory)")
    return None


class Usage:
    """What the untrusted processes did during one measured window."""

    __slots__ = ("cpu_s", "wall_s", "samples", "runnable_samples", "present_samples", "runner_lag_s", "psi_stall_s",
                 "oom_kills")

    def __init__(self, cpu_s: float = 0.0, wall_s: float = 0.0, samples: int = 0, runnable_samples: int = 0,
                 present_samples: int = 0, runner_lag_s: float = 0.0, psi_stall_s: float | None = None,
                 oom_kills: int = 0):
        self.cpu_s, self.wall_s, self.samples, self.runnable_samples = cpu_s, wall_s, samples, runnable_samples
        self.present_samples = present_samples  # samples at which a process of the submission existed
        self.runner_lag_s, self.psi_stall_s, self.oom_kills = runner_lag_s, psi_stall_s, oom_kills

    def __repr__(self) -> str:
        return f"Usage({', '.join(f'{name}={getattr(self, name)!r}' for name in self.__slots__)})"

    @property
    def runnable_fraction(self) -> float:
        return self.runnable_samples / self.samples if self.samples else 0.0

    def starved(self) -> bool:
        """True when the host, not the submission, kept the case from finishing: the submission got little
        CPU, the host's CPU pressure says others held it, and either the submission was runnable most of the
        time or the runner itself (which the submission may be waiting on) ran late most of the time. Only
        meaningful when a wall-clock limit fired first."""
        if self.wall_s <= 0:
            return False
        # The wall limit is WALL_FACTOR times the CPU limit, so a process that got at least 1/WALL_FACTOR
        # of a CPU always meets its CPU limit before its wall limit: getting less while runnable is starving.
        if self.cpu_s >= self.wall_s / Limits.WALL_FACTOR:
            return False
        if self.psi_stall_s is not None and self.psi_stall_s < 0.2 * self.wall_s:
            return False
        return self.runnable_fraction >= 0.5 or self.runner_lag_s >= 0.5 * self.wall_s


class Budget:
    """A sample's total CPU and wall-clock budget across its cases (the runner enforces it itself)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.started = time.monotonic()
        self.usage = Usage()

    def spend(self, usage: Usage) -> None:
        total = self.usage
        total.cpu_s += usage.cpu_s
        total.samples += usage.samples
        total.runnable_samples += usage.runnable_samples
        total.present_samples += usage.present_samples
        total.runner_lag_s += usage.runner_lag_s
        if usage.psi_stall_s is not None:
            total.psi_stall_s = (total.psi_stall_s or 0.0) + usage.psi_stall_s

    def cpu_left(self) -> float:
        return self.limits.total_cpu_s - self.usage.cpu_s

    def used_up(self) -> str | None:
        """Why no further case may run, or None. Raises HostOverloaded when the wall-clock budget ran out
        while the host starved the submission."""
        if self.cpu_left() <= 0:
            return "not run: the total CPU limit was used up"
        self.usage.wall_s = time.monotonic() - self.started
        if self.usage.wall_s > self.limits.total_wall_s:
            if self.usage.starved():
                raise HostOverloaded(f"the total wall-clock limit of {self.limits.total_wall_s:g}s ran out while the "
                                     f"host starved the submission ({self.usage.cpu_s:.2f}s of CPU)")
            return f"not run: the total wall-clock limit of {self.limits.total_wall_s:g}s was used up"
        return None


def ancestors() -> tuple[int, ...]:
    """The pids of this process's parent, its parent's parent and so on, within its pid namespace: the
    container's init (pid 1) when the runner is its child, and warm mode's server (:mod:`serve`) between
    them. Empty when the parent lives outside the namespace (``docker exec``: parent pid 0)."""
    chain, pid = [], os.getppid()
    while pid > 0 and pid not in chain:
        chain.append(pid)
        ids = process_ids(pid)
        pid = 0 if ids is None else ids[1]
    return tuple(chain)


class Sandbox:
    """Spawns untrusted processes as ``uid`` (or ``applier_uid``) and keeps track of everything they start.
    ``homes`` maps a uid to its own directory, its processes' HOME and TMPDIR. ``workers``, when given (confined
    only), is the connection to the worker zygote that forks function workers (:meth:`fork_worker`); the
    zygote is runner side like the runner's :func:`ancestors`."""

    def __init__(self, confined: bool, uid: int = DEFAULT_UID, applier_uid: int = DEFAULT_UID + 1,
                 workers: WorkerConnection | None = None):
        self.confined = confined
        self.workers = workers if confined else None
        self.uid = uid
        self.applier_uid = applier_uid
        self.uids = {uid, applier_uid}
        self.homes: dict[int, str] = {}
        self._sessions: set[int] = set()
        self._known: list[int] = []  # unconfined: the members the last full scan found (tick_members)
        self._next_full_scan = 0.0
        self._seen_cpu: dict[tuple[int, int], float] = {}
        self._procs: list[subprocess.Popen[bytes]] = []
        # The heartbeat thread measures too (cpu_s), and the fallback accounting keeps state.
        self._measuring = threading.Lock()
        # The cgroup is trusted until a read finds someone else in it; from then on the per-process measure
        # continues from the last cgroup value (the offset), so the CPU time stays monotonic.
        self._cgroup_trusted = confined
        self._procs_ours: str | None = None  # cgroup.procs when every process in it was last found ours
        self._offset: float | None = None
        self._last_cpu_s = 0.0
        # The runner's own side in the container besides itself: its ancestors and the worker zygote, whose
        # children are workers not yet switched to the submission's uid.
        self._zygotes = () if self.workers is None else (self.workers.pid,)
        self._ancestors = ancestors() + self._zygotes
        self._init_cpu0 = self._init_cpu_s()
        # What the cgroup counted before this sample: a warm container's earlier samples, or nothing much.
        self._cgroup_base = 0.0
        if self._cgroup_ours():
            self._cgroup_base = max(0.0, (cgroup_cpu_s() or 0.0) - time.process_time())
        self._oom0 = self.oom_kills()
        self._psi0 = psi_cpu_stall_s()

    def spawn(self, argv: list[str], *, pass_fds: tuple[int, ...] = (), cwd: str = "/",
              stdin: int | None = None, uid: int | None = None) -> subprocess.Popen[bytes]:
        """Start an untrusted process with piped stdout/stderr, a clean environment and its own session, as
        ``uid`` (default: the submission's) when confined, reading ``stdin`` (a descriptor; None: /dev/null).
        Raises OSError when it cannot start."""
        import subprocess

        extra = {}
        uid = self.uid if uid is None else uid
        if self.confined:
            extra = {"user": uid, "group": uid, "extra_groups": []}
        env = dict(CLEAN_ENV)
        if uid in self.homes:
            env["HOME"] = env["TMPDIR"] = self.homes[uid]
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL if stdin is None else stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=pass_fds, cwd=cwd, env=env, start_new_session=True, close_fds=True, **extra,
        )
        self._procs.append(proc)
        self._sessions.add(proc.pid)
        return proc

    def fork_worker(self, argv: list[str], fds: tuple[int, int], cwd: str = "/") -> Forked:
        """A worker (``worker.main(argv)``) as the submission's uid, forked by the worker zygote; the same
        environment, session and descriptors as :meth:`spawn` gives, ``fds`` as its descriptors 3 and 4.
        Raises OSError when the zygote cannot serve."""
        assert self.workers is not None
        env = dict(CLEAN_ENV)
        if self.uid in self.homes:
            env["HOME"] = env["TMPDIR"] = self.homes[self.uid]
        return self.workers.fork(argv, uid=self.uid, cwd=cwd, env=env, fds=fds)

    def members(self) -> list[int]:
        """Pids of every live untrusted process."""
        return self._scan()[0]

    def _scan(self) -> tuple[list[int], list[int]]:
        """(members, starting): the pids of every live untrusted process, and, confined, of the runner's and the
        worker zygote's children not yet switched to their uid. A starting process is on its way to becoming
        the submission's (a worker, an action), so it waits for the CPU on the submission's behalf; nothing of
        the submission's has run in it yet."""
        members, starting = [], []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            if pid == os.getpid() or pid == 1 or pid in self._zygotes:
                continue
            if self.confined:
                ids = process_ids(pid)
                if ids is None:
                    continue
                if ids[0] in self.uids:
                    members.append(pid)
                elif ids[1] == os.getpid() or ids[1] in self._zygotes:
                    starting.append(pid)
            else:
                st = _stat(pid)
                if st is not None and st.session in self._sessions:
                    members.append(pid)
        return members, starting

    def tick_members(self) -> tuple[list[int], list[int]]:
        """:meth:`_scan` for a tick of a :class:`Meter`. Confined it is the same scan (of the container's few
        processes). Unconfined, a full scan reads every process on the host, so it runs at most every
        :data:`FULL_SCAN_S`; the ticks in between reread the pids it found and the ones we spawned since,
        keeping those still alive in our sessions (none is ever starting: each is in its session from its
        start)."""
        if self.confined:
            return self._scan()
        now = time.monotonic()
        if now >= self._next_full_scan:
            self._next_full_scan = now + FULL_SCAN_S
            self._known = self.members()
        else:
            known = set(self._known) | {proc.pid for proc in self._procs}
            self._known = [pid for pid in known if (st := _stat(pid)) is not None and st.session in self._sessions]
        return self._known, []

    def any_runnable(self, pids: list[int]) -> bool:
        for pid in pids:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                st = _stat(f"{pid}/task/{tid}")
                if st is not None and st.state == "R":
                    return True
        return False

    def _process_cpu_s(self, pids: list[int]) -> float:
        """Fallback CPU measure outside a cgroup: the last value seen for every process ever seen."""
        for pid in pids:
            st = _stat(pid)
            if st is not None:
                self._seen_cpu[(pid, st.start)] = st.cpu_s
        return sum(self._seen_cpu.values())

    def _init_cpu_s(self) -> float:
        """The own CPU seconds of the runner's ancestors in the container (its init; in warm mode the server
        too) and of the worker zygote: they are in the cgroup as well, and none of it is the submission's."""
        return sum(stat.own_cpu_s for pid in self._ancestors if (stat := _stat(pid)) is not None)

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
        procs = _cgroup_procs_file()
        text = None if procs is None else _read(procs)
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
            if uid not in self.uids and ppid != own and ppid not in self._zygotes:
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
            if self.confined and self._cgroup_ours():
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
        return cgroup_oom_kills() if self.confined and self._cgroup_trusted else None

    def memory_limit_hits(self) -> int | None:
        """The cgroup's memory limit hits, or None unless the cgroup held only ours when last checked."""
        return cgroup_memory_limit_hits() if self.confined and self._cgroup_trusted else None

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

    def _sweep(self) -> None:
        if self.confined:
            # First from the runner itself, through pidfds: this needs no new process, so it works while the
            # submission still holds every byte of the sandbox's memory or every pid (a fork under a full
            # memory cgroup would make the OOM killer choose between the runner and its copy).
            for pidfd in self._signal_members(_signal.SIGSTOP):
                os.close(pidfd)
            killed = self._signal_members(_signal.SIGKILL)
            try:
                await_exits(killed, SWEEP_SETTLE_S)
            finally:
                for pidfd in killed:
                    os.close(pidfd)
            # Then the atomic sweep of each uid still alive (one forked between the two passes, say).
            for uid in self._live_uids():
                try:
                    kill_uid(uid)
                except BlockingIOError:  # the uids hold every pid the sandbox allows: the next round retries
                    pass
            return
        # Unconfined (local mode), every process runs as the runner's own uid, so kill(-1) is no option: each
        # process of a session we started is killed, then each session's group.
        for pid in self.members():
            try:
                os.kill(pid, _signal.SIGKILL)
            except OSError:
                pass
        for sid in self._sessions:
            try:
                os.killpg(sid, _signal.SIGKILL)
            except OSError:
                pass

    def _signal_members(self, sig: int) -> list[int]:
        """Send ``sig`` to each process of the request's uids, one by one (stopping them all first keeps the
        sweep ahead of a fork bomb; :func:`privileges.kill_uid` then gets what was forked in between), and
        return the pidfds signalled, for the caller to wait on and close. A pidfd pins each process, and its
        uid is checked through /proc after it is pinned, so a pid reused by someone else's process in between
        is never signalled."""
        pinned = []
        for pid in self.members():
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if process_uid(pid) in self.uids:
                    _signal.pidfd_send_signal(pidfd, sig)
                    pinned.append(pidfd)
                    continue
            except OSError:
                pass
            os.close(pidfd)
        return pinned

    def _alive(self) -> list[int]:
        return [pid for pid in self.members() if (stat := _stat(pid)) is not None and stat.state != "Z"]

    def others_alive(self, keep: int) -> bool:
        """Whether any untrusted process but ``keep`` (a zygote between cases) is still alive."""
        return any(pid != keep for pid in self._alive())

    def _live_uids(self) -> set[int]:
        return {process_uid(pid) for pid in self._alive()} & self.uids

    def kill_all(self) -> None:
        """SIGKILL every untrusted process, including daemonized grandchildren, and reap our children.

        Confined, the runner stops and kills each process of the request's uids through a pidfd, then sweeps
        each uid still alive by ``kill(-1)`` from a child switched to it (:func:`privileges.kill_uid`):
        atomic, so a fork bomb cannot outrun it, and nothing of another uid is touched. Sweeps repeat until
        /proc shows none of them alive. Unconfined, each session we started
        is killed."""
        self._sweep()
        for proc in self._procs:
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        self._procs.clear()
        deadline = time.monotonic() + KILL_WAIT_S
        while self._alive() and time.monotonic() < deadline:
            time.sleep(0.01)
            self._sweep()


class Meter:
    """Measures the untrusted processes over a window; call :meth:`tick` while waiting."""

    # A tick is due every Supervised.POLL_S; time beyond this between two ticks is the runner running late.
    LAG_ALLOWANCE_S = 0.05

    def __init__(self, sandbox: Sandbox, start: tuple[float, float, float | None, int | None] | None = None,
                 limit_hits: int | None = None):
        self.sandbox = sandbox
        self.usage = Usage()
        if start is None:
            start = time.monotonic(), sandbox.cpu_s(), psi_cpu_stall_s(), sandbox.oom_kills()
        # (wall, CPU, PSI stall, OOM kills) at the window's start, then at its last tick (see successor).
        self._wall0, self._cpu0, self._psi0, self._oom0 = start
        self._last = self._wall0
        self._latest = start
        self._limit_hits0 = sandbox.memory_limit_hits() if limit_hits is None else limit_hits

    def tick(self) -> Usage:
        """Update and return the usage so far (cheap: a /proc scan of the sandbox's few processes; unconfined,
        of the processes :meth:`Sandbox.tick_members` knows)."""
        usage = self.usage
        members, starting = self.sandbox.tick_members()
        now = time.monotonic()
        usage.runner_lag_s += max(0.0, now - self._last - self.LAG_ALLOWANCE_S)
        self._last = now
        usage.wall_s = now - self._wall0
        cpu = self.sandbox.cpu_s(members)
        usage.cpu_s = max(0.0, cpu - self._cpu0)
        usage.samples += 1
        if members:
            usage.present_samples += 1
        if self.sandbox.any_runnable(members + starting):
            usage.runnable_samples += 1
        psi = psi_cpu_stall_s()
        if psi is not None and self._psi0 is not None:
            usage.psi_stall_s = psi - self._psi0
        oom = self.sandbox.oom_kills()
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
        return Meter(self.sandbox, self._latest, None if self.usage.samples else self._limit_hits0)

    def memory_limit(self) -> str | None:
        """How the submission ran into a memory limit during this window, or None. Read once, when a time
        limit fires (ticks stay cheap): memory evidence wins over the time limit, since a submission growing
        into its memory limit spends its CPU time getting memory from the kernel."""
        hits = self.sandbox.memory_limit_hits()
        if hits is not None and self._limit_hits0 is not None and hits > self._limit_hits0:
            return "stopped at the sandbox's memory limit, with the kernel reclaiming memory for it"
        return growing_into_memory_limit(self.sandbox.members())


class Outcome:
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

    def __init__(self, sandbox: Sandbox, proc: subprocess.Popen[bytes], *, channel_fd: int | None = None,
                 requests_fd: int | None = None, keep_stdout: int = 0, exit_fd: int | None = None):
        self.sandbox = sandbox
        self.proc = proc
        self.selector = selectors.DefaultSelector()
        self.kept = {"stdout": bytearray(), "stderr": bytearray()}
        self.limits = {"stdout": max(keep_stdout, self.HEAD_BYTES), "stderr": self.HEAD_BYTES}
        self.output_bytes = 0
        self.channel = bytearray()
        self.channel_fd = channel_fd
        for name in ("stdout", "stderr"):
            stream = getattr(proc, name)
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream, selectors.EVENT_READ, name)
        if channel_fd is not None:
            os.set_blocking(channel_fd, False)
            self.selector.register(channel_fd, selectors.EVENT_READ, "channel")
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
            self.selector.register(exit_fd, selectors.EVENT_READ, "exit")
        elif hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(proc.pid)
                self.selector.register(self._pidfd, selectors.EVENT_READ, "exit")
                self._exit_watched = True
            except OSError:
                self._pidfd = None

    def text(self, name: str) -> str:
        return self.kept[name].decode("utf-8", "replace")

    def _read(self, key: selectors.SelectorKey) -> bytes | None:
        """Read what is there; returns the chunk (b"" at end of stream, None if nothing yet)."""
        fd = key.fd
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return None
        except OSError:
            chunk = b""
        if not chunk:
            self.selector.unregister(key.fileobj)
        return chunk

    def _drain_output(self, key: selectors.SelectorKey) -> None:
        chunk = self._read(key)
        if chunk:
            self.output_bytes += len(chunk)
            kept = self.kept[key.data]
            room = self.limits[key.data] - len(kept)
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
            self.selector.unregister(self.requests_fd)

    def wait(self, meter: Meter, *, for_line: bool, cpu_limit_s: float, wall_limit_s: float,
             output_limit: int, send: bytes = b"") -> Outcome:
        """Send ``send`` on the requests pipe, then wait for a line on the channel (``for_line``) or for the
        process to exit, whichever applies. ``meter`` must have been started before the process was spawned
        or sent its request, so that a quick child is measured in full."""
        if send:
            self.queue(send)
        outcome = None
        try:
            outcome = self._wait(meter, for_line=for_line, cpu_limit_s=cpu_limit_s, wall_limit_s=wall_limit_s,
                                 output_limit=output_limit)
            return outcome
        finally:
            if outcome is None or outcome.kind != "line":
                self._unsend()

    def queue(self, data: bytes) -> None:
        """Send ``data`` on the requests pipe while this waits (now and in later waits, until an outcome other
        than a line): a batch of requests, each answered by a line of its own."""
        if not self._pending:
            self.selector.register(self.requests_fd, selectors.EVENT_WRITE, "requests")
        self._pending += data

    def _line_arrived(self) -> bytes | None:
        """A whole line on the channel right now, read without waiting, or None."""
        key = self.selector.get_map().get(self.channel_fd) if self.channel_fd is not None else None
        chunk = None if key is None else self._read(key)
        searched = len(self.channel)
        if chunk:
            self.channel.extend(chunk)
        return self._line(searched if chunk else 0)

    def _wait(self, meter: Meter, *, for_line: bool, cpu_limit_s: float, wall_limit_s: float,
              output_limit: int) -> Outcome:
        if for_line and (line := self._line(0)) is not None:
            # It arrived with the previous one, inside the previous window, which was charged for it.
            return Outcome("line", meter.usage, line=line)
        while True:
            exited = False
            for key, _ in self.selector.select(self.POLL_S):
                if key.data == "requests":
                    self._send()
                elif key.data in ("stdout", "stderr"):
                    self._drain_output(key)
                elif key.data == "exit":
                    exited = True
                else:
                    chunk = self._read(key)
                    if chunk is None:
                        continue
                    if not chunk and for_line:
                        return self._exited(meter.tick())
                    searched = len(self.channel)  # the bytes before the chunk hold no newline
                    self.channel.extend(chunk)
                    if for_line and (line := self._line(searched)) is not None:
                        return Outcome("line", meter.tick(), line=line)
                    if len(self.channel) > self.MAX_LINE_BYTES:
                        return Outcome("output", meter.tick(), detail="sent more than 16 MiB to the runner")
            if exited or (not self._exit_watched and self.proc.poll() is not None):
                outcome = self._exited(meter.tick())
                if self.output_bytes > output_limit:
                    return Outcome("output", outcome.usage, detail=f"wrote {self.output_bytes} bytes of output")
                if for_line and (line := self._line(0)) is not None:
                    return Outcome("line", outcome.usage, line=line)
                return outcome
            usage = meter.tick()
            if self.output_bytes > output_limit:
                return Outcome("output", usage, detail=f"wrote {self.output_bytes} bytes of output")
            if usage.oom_kills:
                return Outcome("oom", usage, detail="killed by the out-of-memory killer")
            if usage.cpu_s > cpu_limit_s or (usage.wall_s > wall_limit_s and not usage.starved()):
                # A reply written after the last select is in time: the limit is checked once per tick. In a batch
                # the reading may already hold the next request's CPU, which must not fail this one.
                if for_line and (line := self._line_arrived()) is not None:
                    return Outcome("line", usage, line=line)
                if not usage.present_samples:
                    return Outcome("stalled", usage)
                memory = meter.memory_limit()
                if memory is not None:
                    return Outcome("oom", usage, detail=memory)
                return Outcome("cpu" if usage.cpu_s > cpu_limit_s else "wall", usage)
            if usage.wall_s > wall_limit_s * Limits.STARVED_GRACE:  # past its wall limit, and starved
                return Outcome("starved", usage)

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
            self.selector.unregister(self.requests_fd)

    def _exited(self, usage: Usage) -> Outcome:
        """The process ended (or closed its channel): collect its status and whatever output is left."""
        code = self._exit_status(1.0)
        if code is None:
            return Outcome("exited", usage, detail="closed its channel to the runner")
        # Drain what is left, for a moment only: a detached grandchild may keep writing forever.
        until = time.monotonic() + self.DRAIN_S
        for key in list(self.selector.get_map().values()):
            if key.data in ("stdout", "stderr"):
                while key.fileobj in self.selector.get_map() and time.monotonic() < until:
                    before = self.output_bytes
                    self._drain_output(key)
                    if self.output_bytes == before:
                        break
            elif key.data == "channel":
                while time.monotonic() < until and len(self.channel) <= self.MAX_LINE_BYTES:
                    chunk = self._read(key)
                    if not chunk:
                        break
                    self.channel.extend(chunk)
        if code < 0 and usage.oom_kills:
            return Outcome("oom", usage, exit_code=code, detail="killed by the out-of-memory killer")
        if code < 0:
            return Outcome("exited", usage, exit_code=code, detail=f"was killed by signal {-code}")
        return Outcome("exited", usage, exit_code=code, detail=f"exited with status {code}")

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
        self.selector.close()
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


def failure(outcome: Outcome, doing: str, limits: Limits) -> tuple[str, str]:
    """(error_type, message) for an outcome that is not a usable result. Raises HostOverloaded when the
    wall-clock limit fired on a starved submission (nobody can be judged then), RunnerStalled when a limit fired
    before the submission had a process (the runner's own failure)."""
    if outcome.kind == "stalled":
        raise RunnerStalled(f"a time limit fired while {doing} after {outcome.usage.wall_s:.1f}s, before any process "
                            f"of the submission had started: the runner's side never started it")
    if outcome.kind == "starved":
        raise HostOverloaded(f"the wall-clock limit fired while {doing} after {outcome.usage.wall_s:.1f}s (including "
                             f"grace for a starved submission), but the submission, runnable most of the time, got "
                             f"only {outcome.usage.cpu_s:.2f}s of CPU of its {limits.case_cpu_s:g}s")
    if outcome.kind == "cpu":
        return "solution_timeout", f"used more than {limits.case_cpu_s:g}s of CPU while {doing}"
    if outcome.kind == "wall":
        return "solution_timeout", f"did not finish within {limits.case_wall_s:g}s of wall-clock time while {doing}"
    if outcome.kind == "output":
        return "output_limit_exceeded", f"{outcome.detail} while {doing} (limit {limits.output_kb} KiB)"
    if outcome.kind == "oom":
        return "solution_oom", f"the submission was {outcome.detail} while {doing}"
    return "solution_error", f"the submission process {outcome.detail} while {doing}"


class HostOverloaded(Exception):
    """A wall-clock limit fired while the host starved the submission of CPU: nobody can be judged."""


class RunnerStalled(Exception):
    """A limit fired before any process of the submission existed: the runner's side held it up."""


class BrokenTests(RuntimeError):
    """The trusted tests themselves failed (a dataset row's test code): the runner's side, so no verdict."""


class Workspace(Record):
    """The folders of one sample, all fresh and all removed afterwards (:meth:`remove`).

    ``scratch`` is the submission's (the request's uid, 0700): its processes' working directory, HOME and
    TMPDIR. ``runner`` is the runner's (root, 0711): what the submission may read but not change, such as a
    program's code, in folders the judge makes readable. ``applier`` is the patch applier's (its uid, 0755;
    patch tasks only): the patched tree, which the submission's tests read but cannot change. Each is created
    and removed with its owner's rights, so the runner needs neither CAP_CHOWN nor CAP_DAC_OVERRIDE."""

    scratch: str
    runner: str
    applier: str | None

    @classmethod
    def create(cls, sandbox: Sandbox, scratch: str | None, root: str, applier: bool) -> Workspace | str:
        """The workspace under ``root`` with the submission's folder at ``scratch`` (None: a fresh name) and,
        with ``applier`` (patch tasks), the applier's; or why it cannot be made (the host's bug: an existing
        scratch folder, a root the uid cannot write). Each folder costs a fork, so only patch tasks get two."""
        token = os.urandom(8).hex()
        scratch = scratch or os.path.join(root, f"deepgym-{token}")
        applier_dir = os.path.join(root, f"deepgym-applier-{token}") if applier else None
        folders = [(sandbox.uid, scratch, 0o700)] + ([(sandbox.applier_uid, applier_dir, 0o755)] if applier_dir else [])
        if not sandbox.confined:
            if os.path.lexists(scratch):
                return f"{scratch} exists already; the runner creates the scratch directory itself"
            for _uid, path, mode in folders:
                os.mkdir(path, mode)
        else:
            for uid, path, mode in folders:
                problem = make_dir(uid, path, mode)
                if problem is not None:
                    if path == applier_dir:
                        remove_dir(sandbox.uid, scratch)
                    return problem
        runner = os.path.join(root, f"deepgym-runner-{token}")
        os.mkdir(runner, 0o711)
        os.chmod(runner, 0o711)  # past the umask
        sandbox.homes = {sandbox.uid: scratch, **({sandbox.applier_uid: applier_dir} if applier_dir else {})}
        return cls(scratch, runner, applier_dir)

    def remove(self, sandbox: Sandbox) -> None:
        """Remove every folder, each with its owner's rights. Call after :meth:`Sandbox.kill_all`."""
        remove_tree(self.runner)
        for uid, path in ((sandbox.uid, self.scratch), (sandbox.applier_uid, self.applier)):
            if path is None:
                continue
            if sandbox.confined:
                remove_dir(uid, path)
            else:
                remove_tree(path)
