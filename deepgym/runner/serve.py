"""Warm mode's server: ``python3 -m deepgym_runner serve``, the long-lived main process of a warm container.

It reads one request per line on stdin and judges each in a child forked from itself (the runner's code is
imported once, so no Python start-up per sample on the trusted side), exactly as a one-shot runner would:
the child drops to the same three capabilities, checks the request's uids and scratch folder, and writes the
usual events on stdout. The submission itself still starts as a fresh process of the request's uid.

After each sample the server clears the container and checks that it did (:func:`clean`): it kills every
process of the sample's uids, removes the SysV IPC objects they made (as their creator: the server holds no
CAP_SYS_ADMIN or CAP_IPC_OWNER), empties every folder a uid can write (:data:`WRITABLE`, scratch folders
included, with each entry's owner's file rights), then looks again: no process but pid 1 and the server, no
IPC object, nothing in those folders. It also refuses a uid it has served before, refuses to serve at all where the kernel keyring is
reachable (:func:`keyring_problem`), and compares the memory
cgroup's OOM kills and limit hits and the pids cgroup's refusals with those before the sample. Then it writes
one line ``@@deepgym-serve {"event": "end", "nonce": ..., "exit": N, "retire": null | "why"}``: the child's
exit status (128 + a signal when it was killed) and, when anything was amiss, why the container must not
serve again. After a ``retire`` it exits; at the end of stdin too (its host went away).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import stat
import sys
import time
from pathlib import Path

from . import sandbox
from .forked import Workers
from .privileges import as_user, drop_privileges, file_rights, kill_uid
from .protocol import SCRATCH_ROOT, Request

SERVE_MARKER = "@@deepgym-serve"
# Everything a submission's uid can write in a container of ours (tests/test_writable_paths.py proves the
# list): the scratch root (/tmp, every sample's scratch folder under it), POSIX shared memory and semaphores,
# and POSIX message queues.
WRITABLE = ("/dev/shm", "/dev/mqueue")
SYSV_IPC = ("shm", "sem", "msg")
IPC_RMID = 0
# Seconds the server waits for the last processes of a sample to die and be reaped by pid 1.
SETTLE_S = 2.0
PIDS_EVENTS = Path("/sys/fs/cgroup/pids/pids.events")
# add_key(2) per machine, and the process keyring's special id.
ADD_KEY = {"x86_64": 248, "aarch64": 217}
KEY_SPEC_PROCESS_KEYRING = -2


def serve_line(payload: dict) -> bytes:
    return f"{SERVE_MARKER} {json.dumps(payload)}\n".encode()


def others(keep: tuple[int, ...] = ()) -> list[int]:
    """Every process in the container but pid 1 (Docker's init), this server and ``keep`` (its worker zygote)."""
    skip = (1, os.getpid(), *keep)
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) not in skip]


def ipc_objects() -> list[tuple[str, int, int]]:
    """Every SysV IPC object in the container's IPC namespace as (kind, id, creator uid)."""
    found = []
    for kind in SYSV_IPC:
        try:
            header, *lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except (OSError, ValueError):
            continue
        names = header.split()
        at_id, at_cuid = names.index({"shm": "shmid", "sem": "semid", "msg": "msqid"}[kind]), names.index("cuid")
        for line in lines:
            parts = line.split()
            found.append((kind, int(parts[at_id]), int(parts[at_cuid])))
    return found


def _remove_ipc(objects: list[tuple[str, int, int]]) -> int:
    """As their creator (a forked child of that uid): IPC_RMID each object. 0 when every call succeeded."""
    libc = ctypes.CDLL(None, use_errno=True)
    failed = 0
    for kind, ident, _ in objects:
        if kind == "shm":
            result = libc.shmctl(ident, IPC_RMID, None)
        elif kind == "sem":
            result = libc.semctl(ident, 0, IPC_RMID)
        else:
            result = libc.msgctl(ident, IPC_RMID, None)
        failed += result != 0
    return 1 if failed else 0


def _empty(folder: str) -> list[str]:
    """Remove everything in ``folder`` (not the folder itself), each entry with the file rights of the owner
    of the folder it sits in, after making every sub-folder listable by its owner. Returns what is left."""
    info = os.lstat(folder)
    with file_rights(info.st_uid):
        try:
            os.chmod(folder, stat.S_IMODE(info.st_mode) | 0o700) if info.st_uid else None
            names = os.listdir(folder)
        except OSError:
            return [folder]
    left = []
    for name in names:
        path = os.path.join(folder, name)
        try:
            entry = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(entry.st_mode):
            left += _empty(path)
        with file_rights(info.st_uid):
            try:
                os.rmdir(path) if stat.S_ISDIR(entry.st_mode) else os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(path)
    return left


def keyring_problem() -> str | None:
    """Why the kernel keyring makes this container unfit to serve, or None. Keys live in the kernel, outside the
    container's namespaces, and the server holds no right to clear another uid's: warm mode relies on the
    sandbox refusing the keyring calls (Docker's default seccomp profile does)."""
    number = ADD_KEY.get(os.uname().machine)
    if number is None:
        return f"cannot check the kernel keyring on machine {os.uname().machine}"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, b"user", b"deepgym-warm-check", b"x", 1, KEY_SPEC_PROCESS_KEYRING) >= 0:
        return "the kernel keyring is reachable (no seccomp filter refuses add_key): warm mode cannot clear it"
    return None


def _counters() -> tuple[int | None, int | None, int | None]:
    """(OOM kills, memory limit hits, refused forks) of the container's cgroups so far; None where unknown."""
    refused = None
    try:
        refused = int(PIDS_EVENTS.read_text().split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return sandbox.cgroup_oom_kills(), sandbox.cgroup_memory_limit_hits(), refused


def clean(uids: set[int], scratch_root: str, keep: tuple[int, ...] = ()) -> str | None:
    """Clear everything the sample's ``uids`` left and verify it; returns what is still there, or None.
    ``keep``: the server's worker zygote, root and never the sample's."""
    for uid in uids:
        kill_uid(uid)
    deadline = time.monotonic() + SETTLE_S
    while others(keep) and time.monotonic() < deadline:  # orphans are pid 1's to reap
        for pid in others(keep):
            if sandbox.process_uid(pid) in uids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.005)
    by_creator: dict[int, list[tuple[str, int, int]]] = {}
    for obj in ipc_objects():
        by_creator.setdefault(obj[2], []).append(obj)
    for creator, objects in by_creator.items():
        if creator != 0:
            as_user(creator, lambda objects=objects: _remove_ipc(objects))
    left = [path for folder in (scratch_root, *WRITABLE) if os.path.isdir(folder) for path in _empty(folder)]
    problems = []
    if others(keep):
        problems.append(f"processes {others(keep)} outlived the sample")
    if ipc_objects():
        problems.append(f"SysV IPC objects {ipc_objects()} could not be removed")
    leftovers = [os.path.join(folder, name) for folder in (scratch_root, *WRITABLE) if os.path.isdir(folder)
                 for name in os.listdir(folder)]
    if left or leftovers:
        problems.append(f"files {sorted(set(left + leftovers))[:10]} could not be removed")
    return "; ".join(problems) or None


def _judge_in_child(line: bytes, env_dir: str, scratch_root: str, workers: Workers) -> int:
    """Fork a child that judges the request on ``line`` as a one-shot runner would, its function workers forked
    by ``workers`` over a connection of the sample's own; its exit status."""
    from .__main__ import judge_request  # the one-shot runner's own path, imported once, used per child

    sys.stdout.flush()
    connection = workers.connect()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                code = judge_request(line, env_dir, scratch_root, confined=True, workers=connection)
                sys.stdout.flush()
            finally:
                os._exit(code)
    finally:
        connection.control.close()  # the child's: the zygote's connection ends with it
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def serve(env_dir: str, scratch_root: str = SCRATCH_ROOT) -> int:
    """Serve requests until stdin ends or a sample retires this container."""
    out = sys.stdout.buffer
    problem = drop_privileges() or keyring_problem()
    if problem is None:
        problem = clean(set(), scratch_root) and "the container was not empty when the server started"
    workers = None
    if problem is None:
        try:
            workers = Workers()  # before the first request: it never holds anything of a sample's
        except OSError as exc:
            problem = f"the worker zygote did not start: {exc}"
    sandbox.cgroup_cpu_s()  # resolve which cgroup counters are ours once, for every child
    served: set[int] = set()
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return 0
        try:
            request = Request.from_json(line)
            nonce, uids = request.nonce, {request.uid, request.applier}
        except Exception as exc:  # noqa: BLE001 - the host's bug; nothing ran, and the server stops
            out.write(serve_line({"event": "end", "nonce": None, "exit": 2, "retire": f"unreadable request: {exc}"}))
            out.flush()
            return 2
        if problem is None and uids & served:
            problem = f"uids {sorted(uids & served)} were served before in this container"
        if problem is not None:
            out.write(serve_line({"event": "end", "nonce": nonce, "exit": None, "retire": problem}))
            out.flush()
            return 3
        served |= uids
        before = _counters()
        assert workers is not None
        code = _judge_in_child(line, env_dir, scratch_root, workers)
        try:
            problem = clean(uids, scratch_root, (workers.pid,))
        except Exception as exc:  # noqa: BLE001 - a clean-up that cannot finish retires the container
            problem = f"the clean-up failed: {exc!r}"
        if not workers.alive():
            problem = problem or "the worker zygote died during the sample"
        after = _counters()
        for name, old, new in zip(("OOM kill", "memory limit hit", "refused fork"), before, after):
            if old is not None and new is not None and new > old:
                problem = problem or f"{new - old} {name}(s) in the container during the sample"
        if code != 0:
            problem = problem or f"the sample's runner exited with status {code}"
        out.write(serve_line({"event": "end", "nonce": nonce, "exit": code, "retire": problem}))
        out.flush()
        if problem is not None:
            return 0


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="deepgym_runner serve", description=__doc__)
    from .__main__ import DEFAULT_ENV_DIR

    parser.add_argument("--env-dir", default=DEFAULT_ENV_DIR)
    parser.add_argument("--scratch-root", default=SCRATCH_ROOT)
    args = parser.parse_args(argv)
    return serve(args.env_dir, args.scratch_root)
