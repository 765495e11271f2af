"""What the runner reads of /proc and of its cgroup: the CPU, memory and OOM counters of the container, the
host's CPU pressure, and each process's state, ids and memory peak.

Plain system calls, no pathlib: the runner reads a few of these files on every 20 ms tick. A cgroup's counters
are read only when the cgroup mounted is provably this container's own (:func:`own_cgroup_mount`): counters that
may be the host's are never charged to a submission.
"""

from __future__ import annotations

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")
PSI_CPU = "/proc/pressure/cpu"
CGROUP_ROOT = "/sys/fs/cgroup"
# The counters the runner reads, per cgroup version: (controller folder, file). v1 mounts one folder per
# controller; v2 has one unified folder.
_CPU_FILES = ((f"{CGROUP_ROOT}/cpuacct", "cpuacct.usage"), (CGROUP_ROOT, "cpu.stat"))  # ns; usage_usec line
_MEMORY_FILES = ((f"{CGROUP_ROOT}/memory", "memory.oom_control"), (CGROUP_ROOT, "memory.events"))


def read_bytes(path: str) -> bytes | None:
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


def read_text(path: str) -> str | None:
    data = read_bytes(path)
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


# What :func:`_trusted` and :func:`cgroup_procs_file` found, once per process (not functools.cache: functools
# and the collections it imports cost a fresh runner milliseconds of CPU per sample). "": not looked up yet.
_trusted_folders: dict[str, bool] = {}
_procs_file: str | None = ""


def _trusted(folder: str) -> bool:
    """Whether the counters under ``folder`` are this container's own (see :func:`own_cgroup_mount`); a
    folder reached through a symlink (v1's cpuacct -> cpu,cpuacct) is judged by its mount."""
    if folder not in _trusted_folders:
        proc_cgroup, mountinfo = read_text("/proc/self/cgroup"), read_text("/proc/self/mountinfo")
        _trusted_folders[folder] = proc_cgroup is not None and mountinfo is not None and \
            own_cgroup_mount(proc_cgroup, mountinfo, os.path.realpath(folder))
    return _trusted_folders[folder]


def _cgroup_text(files: tuple[tuple[str, str], ...]) -> tuple[int, str] | None:
    """(index of the version that answered, the file's text) for the first of ``files`` that exists in a
    cgroup this container owns, or None: counters that may be the host's are never read."""
    for index, (folder, name) in enumerate(files):
        text = read_text(f"{folder}/{name}")  # not pathlib's /: this runs several times per tick
        if text is not None:
            return (index, text) if _trusted(folder) else None
    return None


def cgroup_procs_file() -> str | None:
    """The ``cgroup.procs`` beside the CPU counter the runner reads, or None without one (looked up once: it is
    read at every tick)."""
    global _procs_file
    if _procs_file == "":
        _procs_file = next((f"{folder}/cgroup.procs" for folder, name in _CPU_FILES
                            if os.path.exists(f"{folder}/{name}")), None)
    return _procs_file


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
        failcnt = read_text(f"{_MEMORY_FILES[0][0]}/memory.failcnt")
        return None if failcnt is None else int(failcnt)
    return sum(_keyed(text, key) or 0 for key in ("max", "oom"))


def psi_cpu_stall_s() -> float | None:
    """Host-wide seconds during which some runnable task waited for a CPU (PSI), or None without PSI."""
    text = read_text(PSI_CPU)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("some "):
            for item in line.split():
                if item.startswith("total="):
                    return int(item[6:]) / 1e6
    return None


class ProcStat:
    """One read of /proc/<pid>/stat: ``own_cpu_s`` leaves out the children the process reaped."""

    __slots__ = ("state", "ppid", "session", "cpu_s", "system_s", "start", "own_cpu_s")

    def __init__(self, state: str, ppid: int, session: int, cpu_s: float, system_s: float, start: int,
                 own_cpu_s: float):
        self.state, self.ppid, self.session, self.start = state, ppid, session, start
        self.cpu_s, self.system_s, self.own_cpu_s = cpu_s, system_s, own_cpu_s


def proc_stat(pid: int | str) -> ProcStat | None:
    data = read_bytes(f"/proc/{pid}/stat")
    if not data:
        return None
    parts = data[data.rindex(b")") + 2:].split()
    ticks = [int(x) for x in parts[11:15]]  # utime stime cutime cstime
    return ProcStat(parts[0].decode(), int(parts[1]), int(parts[3]), sum(ticks) / CLK_TCK,
                 (ticks[1] + ticks[3]) / CLK_TCK, int(parts[19]), sum(ticks[:2]) / CLK_TCK)


def _status_field(text: bytes, key: bytes) -> int | None:
    """The first number of the line ``key`` of a /proc/<pid>/status text."""
    at = text.find(b"\n" + key + b":\t")
    return None if at < 0 else int(text[at + len(key) + 3:at + len(key) + 40].split(None, 1)[0])


def process_ids(pid: int | str) -> tuple[int, int] | None:
    """(real uid, parent pid) of ``pid`` from one read of /proc/<pid>/status, or None when it is gone."""
    text = read_bytes(f"/proc/{pid}/status")
    if text is None:
        return None
    uid, ppid = _status_field(text, b"Uid"), _status_field(text, b"PPid")
    return None if uid is None or ppid is None else (uid, ppid)


def process_uid(pid: int | str) -> int | None:
    """The real uid of ``pid`` (/proc/<pid>/status), or None when it is gone: the uid a kill(-1) switched to
    that uid reaches, whatever the process did to its effective uid or its dumpable flag."""
    ids = process_ids(pid)
    return None if ids is None else ids[0]


def memory_peak(pid: int) -> tuple[int, int] | None:
    """(peak resident memory, RLIMIT_AS) of ``pid`` in bytes, or None when unknown or unlimited."""
    status, limits = read_text(f"/proc/{pid}/status"), read_text(f"/proc/{pid}/limits")
    if status is None or limits is None:
        return None
    peak = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")), None)
    limit = next((line.split()[3] for line in limits.splitlines() if line.startswith("Max address space")), None)
    if peak is None or limit is None or not limit.isdigit():
        return None
    return peak, int(limit)


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

