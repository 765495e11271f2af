"""Who owns a container: the labels every container of deepgym's carries, and the reaper that removes those
whose owner process is gone.

``deepgym`` names the run (one per provider), ``deepgym.owner`` the process (``host/pid-namespace/pid/start``).
A pid means nothing outside its host and pid namespace, and a pid can be reused, so the owner label carries
all four and only the owner's own host and namespace ever judge a container orphaned."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

LABEL = "deepgym"
OWNER_LABEL = "deepgym.owner"


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), which tells a live owner from a pid reused."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return data[data.rindex(b")") + 2:].split()[19].decode()


def pid_namespace() -> str:
    """This process's pid namespace (the inode of /proc/self/ns/pid), "unknown" where it cannot be read.

    Two processes with the same host name can still live in different pid namespaces (pods with host
    networking, containers that mount the engine's socket): a pid means nothing outside its namespace."""
    try:
        return os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]")
    except OSError:
        return "unknown"


def owner_label(pid: int) -> str:
    """The owner label of process ``pid`` of this host and pid namespace: ``host/pid-namespace/pid/start``."""
    return f"{socket.gethostname()}/{pid_namespace()}/{pid}/{process_start_time(pid)}"


def owner_alive(owner: str, host: str, namespace: str) -> bool:
    """Whether the process named by an owner label is still running. Only the owner's own host and pid
    namespace can tell, so containers of any other (a shared remote engine, another pod or container on
    this host) are assumed alive; an unreadable label is an orphan. A label of deepgym 0.1.0 without the
    namespace (``host/pid/start``, a run of the old version beside this one) is judged as if it were ours."""
    parts = owner.split("/")
    if len(parts) == 3:
        parts.insert(1, namespace)
    if len(parts) != 4:
        return False
    owner_host, owner_namespace, pid, start = parts
    if owner_host != host or owner_namespace != namespace or namespace == "unknown":
        return True
    return pid.isdigit() and process_start_time(int(pid)) == start


def reap_orphans(api: docker.APIClient, host: str, namespace: str) -> None:
    """Remove containers left by processes that died (including those still being created)."""
    with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
        for container in api.containers(all=True, filters={"label": OWNER_LABEL}):
            if not owner_alive(container["Labels"].get(OWNER_LABEL, ""), host, namespace):
                with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                    api.remove_container(container["Id"], force=True)
