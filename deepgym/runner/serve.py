"""Warm mode's server: ``python3 -m deepgym_runner serve``, the long-lived main process of a warm container.

It reads one request per line on stdin and judges each in a child forked from itself (the runner's code is
imported once, so no Python start-up per sample on the trusted side), exactly as a one-shot runner would:
the child drops to the same three capabilities, checks the request's uids and scratch folder, and writes the
usual events on stdout. The submission itself still starts as a fresh process of the request's uid.

After each sample the server clears the container and checks that it did (:mod:`cleanup`): no process of
the sample, no IPC object and no move of the IPC id counters, nothing in the folders a uid can write, and a
network namespace exactly as it was. It also refuses a uid it has served before, refuses to serve at all
where the kernel keyring is reachable (:func:`keyring_problem`), and compares the memory cgroup's OOM kills
and limit hits and the pids cgroup's refusals with those before the sample. Then it writes
one line ``@@deepgym-serve {"event": "end", "nonce": ..., "exit": N, "retire": null | "why"}``: the child's
exit status (128 + a signal when it was killed) and, when anything was amiss, why the container must not
serve again. After a ``retire`` it exits; at the end of stdin too (its host went away).

Before the first request it writes ``@@deepgym-serve {"event": "ready", "problem": null | "why"}`` once its
start-up is done, so that the host hands the container to a sample only then (a start slowed by a loaded
host is never charged to a sample's deadline) and never hands out one that cannot serve.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from pathlib import Path

from .cleanup import IpcIds, NetworkState, clean
from .confine import procfs
from .confine.container import Container
from .confine.forked import Workers
from .confine.privileges import drop_privileges
from .oneshot import JUDGES, judge_of, judge_request
from .protocol import DEFAULT_ENV_DIR, SCRATCH_ROOT, SERVE_MARKER, Request

PIDS_EVENTS = Path("/sys/fs/cgroup/pids/pids.events")
# add_key(2) per machine, and the process keyring's special id.
ADD_KEY = {"x86_64": 248, "aarch64": 217}
KEY_SPEC_PROCESS_KEYRING = -2


def serve_line(payload: dict) -> bytes:
    return f"{SERVE_MARKER} {json.dumps(payload)}\n".encode()


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
    return procfs.cgroup_oom_kills(), procfs.cgroup_memory_limit_hits(), refused


def _judge_in_child(line: bytes, env_dir: str, scratch_root: str, workers: Workers) -> int:
    """Fork a child that judges the request on ``line`` as a one-shot runner would, its function workers forked
    by ``workers`` over a connection of the sample's own; its exit status."""
    sys.stdout.flush()
    connection = workers.connect()
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                code = judge_request(line, env_dir, scratch_root, Container(), connection)
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
    if problem is None and clean(set(), scratch_root):
        problem = "the container was not empty when the server started"
    workers = None
    if problem is None:
        try:
            workers = Workers()  # before the first request: it never holds anything of a sample's
        except OSError as exc:
            problem = f"the worker zygote did not start: {exc}"
    network, ipc_ids = NetworkState(), IpcIds()
    problem = problem or ipc_ids.moved()
    procfs.cgroup_cpu_s()  # resolve which cgroup counters are ours once, for every child
    for kind in JUDGES:  # every kind's judge imported once here, not again in each child
        judge_of(kind)
    out.write(serve_line({"event": "ready", "problem": problem}))
    out.flush()
    served: set[int] = set()
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return 0
        try:
            request = Request.from_json(line)
            nonce, uids, swept = request.nonce, {request.uid, request.applier}, request.uids
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
        problems = _after_sample(swept, scratch_root, workers, network, ipc_ids)
        after = _counters()
        for name, old, new in zip(("OOM kill", "memory limit hit", "refused fork"), before, after):
            if old is not None and new is not None and new > old:
                problems.append(f"{new - old} {name}(s) in the container during the sample")
        if code != 0:
            problems.append(f"the sample's runner exited with status {code}")
        problem = "; ".join(problems) or None
        out.write(serve_line({"event": "end", "nonce": nonce, "exit": code, "retire": problem}))
        out.flush()
        if problem is not None:
            return 0


def _after_sample(uids: set[int], scratch_root: str, workers: Workers, network: NetworkState,
                  ipc_ids: IpcIds) -> list[str]:
    """Clear what the sample left and say what would reach the next sample (:mod:`cleanup`)."""
    try:
        problems = clean(uids, scratch_root, (workers.pid,))
    except Exception as exc:  # noqa: BLE001 - a clean-up that cannot finish retires the container
        problems = [f"the clean-up failed: {exc!r}"]
    if not workers.alive():
        problems.append("the worker zygote died during the sample")
    changed = network.changed()
    if changed:
        problems.append(f"the sample left state in the network namespace (/proc/net/{{{','.join(changed)}}})")
    moved = ipc_ids.moved()
    if moved:
        problems.append(moved)
    return problems


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="deepgym_runner serve", description=__doc__)
    parser.add_argument("--env-dir", default=DEFAULT_ENV_DIR)
    parser.add_argument("--scratch-root", default=SCRATCH_ROOT)
    args = parser.parse_args(argv)
    return serve(args.env_dir, args.scratch_root)
