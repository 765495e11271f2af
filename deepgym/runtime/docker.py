"""The docker runtime: a fresh, locked-down container per sample, driven through docker-py.

Per sample: create the container, attach to its stdin and stdout, start it, send the request, read the
runner's events until the container exits or the host's deadline passes (then kill it), collect the exit
status, remove the container. The runner is the container's main process under an init, so the request and
the report each cross in one stream, and a timeout in the container is the runner's to enforce; the host
deadline is only the backstop.

Every container carries the labels ``deepgym`` (this process's run id) and ``deepgym.owner``
(``host/pid-namespace/pid/start-time``). At start-up the runtime removes containers whose owner process is
gone, never those of a live process; ``deepgym cleanup`` removes them all.

Containers are created from the image id resolved once per environment, never from the tag, so a verdict's
``image_id`` is the image that judged it even when the tag moves mid-run. An image built from other
environment files than the host's (its content-hash label differs) is refused (``image_stale``, no verdict)
unless the caller allows it knowingly, and then every verdict it gives says ``image_status: stale``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import docker
import docker.errors
import requests.exceptions

from ..environments import Environment
from ..errors import EngineUnavailableError
from ..images import HASH_LABEL, content_hash, hash_status
from ..runner.protocol import Limits, Request
from ..verdict import Observation
from .base import Runtime

log = logging.getLogger("deepgym")
LABEL = "deepgym"
OWNER_LABEL = "deepgym.owner"
ENVIRONMENT_LABEL = "deepgym.environment"
# The runner, the init and the kernel's bookkeeping need a little beyond the submission's own limits.
RUNNER_MEMORY_MB = 128
RUNNER_PIDS = 8
START_GRACE_S = 20.0
MAX_STDOUT_BYTES = 64 << 20
STDERR_TAIL_BYTES = 8192
# Engine API version: Docker 20.10 and later speak it, and it has everything used here. A fixed version keeps
# the client's constructor off the network (docker-py's "auto" leaks a socket when the engine is down).
API_VERSION = "1.41"
STALE_OPT_IN_VARIABLE = "DEEPGYM_ALLOW_STALE_IMAGE"


def container_settings(api: docker.APIClient, limits: Limits, labels: dict[str, str]) -> dict[str, Any]:
    """Every setting of a sample's container, in one place.

    The runner starts as root holding only CAP_SETUID, CAP_SETGID and CAP_KILL, so it can hand the submission
    to its own unprivileged user and stop it; the submission, once switched, holds no capability at all."""
    memory = f"{limits.memory_mb + RUNNER_MEMORY_MB}m"
    host_config = api.create_host_config(
        network_mode="none",
        cap_drop=["ALL"],
        cap_add=["SETUID", "SETGID", "KILL"],
        security_opt=["no-new-privileges:true"],
        read_only=True,
        tmpfs={"/tmp": f"rw,nosuid,nodev,noexec,size={limits.tmpfs_mb}m,mode=1777"},
        shm_size=f"{limits.tmpfs_mb}m",
        mem_limit=memory,
        memswap_limit=memory,
        pids_limit=limits.pids + RUNNER_PIDS,
        nano_cpus=int(limits.cpus * 1e9),
        ulimits=[docker.types.Ulimit(name="nofile", soft=limits.nofile, hard=limits.nofile)],
        init=True,
        log_config=docker.types.LogConfig(type="none"),
    )
    # stdin_open without detach makes docker-py set AttachStdin and StdinOnce: the runner reads one request.
    return {"user": "0:0", "stdin_open": True, "detach": False, "tty": False, "labels": labels,
            "host_config": host_config}


class _Infra(Exception):
    """An infrastructure failure with its error type; becomes ``Observation.infra_error``."""

    def __init__(self, error_type: str, reason: str):
        super().__init__(reason)
        self.error_type = error_type
        self.reason = reason


@contextlib.contextmanager
def translate_errors(phase: str) -> Iterator[None]:
    """Map docker, requests and socket errors to error types, once. ``phase`` is "start" before the runner
    started and "run" after."""
    try:
        yield
    except _Infra:
        raise
    except docker.errors.ImageNotFound as exc:
        raise _Infra("image_missing", f"{exc.explanation or exc}; build it with `deepgym images build`") from None
    except docker.errors.NotFound as exc:
        raise _Infra("sandbox_lost", f"the container disappeared: {exc.explanation or exc}") from None
    except docker.errors.APIError as exc:
        error_type = "sandbox_start_failure" if phase == "start" else "sandbox_lost"
        raise _Infra(error_type, f"the engine refused: {exc.explanation or exc}") from None
    except (requests.exceptions.ConnectionError, ConnectionError, FileNotFoundError) as exc:
        raise _Infra("daemon_unavailable", f"the Docker engine stopped answering: {exc}") from None
    except (requests.exceptions.Timeout, socket.timeout) as exc:
        raise _Infra("daemon_unavailable", f"the Docker engine did not answer in time: {exc}") from None
    except docker.errors.DockerException as exc:
        raise _Infra("daemon_unavailable", f"cannot talk to the Docker engine: {exc}") from None


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


class DockerRuntime(Runtime):
    """Strict isolation: one fresh container per sample, always removed."""

    name = "docker"

    def __init__(self, *, max_parallel: int = 32, allow_stale_image: bool | None = None):
        self.run_id = os.urandom(6).hex()
        self.host = socket.gethostname()
        self.namespace = pid_namespace()
        self.owner = owner_label(os.getpid())
        self.allow_stale_image = (allow_stale_image if allow_stale_image is not None
                                  else os.environ.get(STALE_OPT_IN_VARIABLE) == "1")
        self._pool = max_parallel + 4
        self._api: docker.APIClient | None = None
        self._lock = threading.Lock()
        self._images: dict[str, tuple[str, str]] = {}  # image name -> (id, status)

    def api(self) -> docker.APIClient:
        """The engine's API client, created on first use and again after a failure (the engine may return)."""
        with self._lock:
            if self._api is None:
                with translate_errors("start"):
                    client = docker.APIClient(**docker.utils.kwargs_from_env(), version=API_VERSION,
                                              max_pool_size=self._pool)
                self._api = client
                self._reap_orphans(client)
            return self._api

    def _reap_orphans(self, api: docker.APIClient) -> None:
        """Remove containers left by processes that died (including those still being created)."""
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
            for container in api.containers(all=True, filters={"label": OWNER_LABEL}):
                if not owner_alive(container["Labels"].get(OWNER_LABEL, ""), self.host, self.namespace):
                    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                        api.remove_container(container["Id"], force=True)

    def image(self, env: Environment) -> tuple[str, str]:
        """``env``'s image as (id, status), inspected once per image name (DEEPGYM_TAG may change the name).
        Raises _Infra("image_stale") for an image built from other environment files than the host's, unless
        stale images are allowed; a refusal is not remembered, so an image rebuilt mid-run is taken up by the
        next sample."""
        if env.image not in self._images:
            with translate_errors("start"):
                try:
                    info = self.api().inspect_image(env.image)
                except docker.errors.ImageNotFound:
                    raise _Infra("image_missing", f"{env.image} is not built; build it with "
                                                  f"`deepgym images build {env.id}`") from None
            built_from = (info.get("Config") or {}).get("Labels", {}).get(HASH_LABEL)
            status = hash_status(built_from, content_hash(env.id))
            if status == "stale" and not self.allow_stale_image:
                raise _Infra("image_stale", f"{env.image} was built from other files of environment {env.id!r} "
                                            f"than this host's (the prompt and limits would not match its hidden "
                                            f"tests); rebuild it with `deepgym images build {env.id}`, or judge "
                                            f"with it knowingly: allow_stale_image=True or "
                                            f"{STALE_OPT_IN_VARIABLE}=1")
            if status == "stale":
                log.warning("judging %s with stale image %s (allowed): every verdict says image_status 'stale'",
                            env.id, env.image)
            self._images[env.image] = (info["Id"], status)
        return self._images[env.image]

    def judge(self, env: Environment, request: Request) -> Observation:
        started = time.monotonic()
        deadline = started + request.limits.host_deadline_s + START_GRACE_S
        container: str | None = None
        image_id: str | None = None
        image_status: str | None = None
        api: docker.APIClient | None = None
        try:
            api = self.api()
            image_id, image_status = self.image(env)
            labels = {LABEL: self.run_id, OWNER_LABEL: self.owner, ENVIRONMENT_LABEL: env.id}
            with translate_errors("start"):
                container = api.create_container(image_id, **container_settings(api, request.limits, labels))["Id"]
                stream = api.attach_socket(container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            sock: socket.socket = getattr(stream, "_sock", stream)
            try:
                with translate_errors("start"):
                    api.start(container)
                with translate_errors("run"):
                    sock.sendall(request.to_json().encode() + b"\n")
                    sock.shutdown(socket.SHUT_WR)
                    stdout, stderr, deadline_hit = _read_attached(sock, deadline)
            finally:
                sock.close()
                stream.close()
            with translate_errors("run"):
                if deadline_hit:
                    with contextlib.suppress(docker.errors.APIError):
                        api.kill(container)
                exit_code = api.wait(container, timeout=30)["StatusCode"]
                oom_killed = exit_code != 0 and api.inspect_container(container)["State"]["OOMKilled"]
        except _Infra as exc:
            if exc.error_type == "image_missing":
                self._images.pop(env.image, None)
            if exc.error_type == "daemon_unavailable":
                self._forget_client(api)
            return Observation(runtime=self.name, infra_error=exc.error_type, infra_reason=exc.reason,
                               elapsed_s=time.monotonic() - started, image_id=image_id, image_status=image_status)
        finally:
            if container is not None:
                self._remove(container)
        return Observation(runtime=self.name, exit_code=exit_code, oom_killed=bool(oom_killed),
                           deadline_hit=deadline_hit, stdout=stdout,
                           stderr_tail=stderr[-STDERR_TAIL_BYTES:].decode("utf-8", "replace"),
                           elapsed_s=time.monotonic() - started, image_id=image_id, image_status=image_status)

    def _remove(self, container: str) -> None:
        """Remove a sample's container. If the engine is down, the next start-up's reaper removes it."""
        api = self._api
        if api is None:
            return
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
            api.remove_container(container, force=True)

    def _forget_client(self, failed: docker.APIClient | None) -> None:
        """Drop the client that found the engine down, so the next sample connects afresh; a client another
        thread already made since then is kept."""
        with self._lock:
            if failed is not None and self._api is failed:
                failed.close()
                self._api = None

    def cleanup(self, *, everything: bool = False) -> int:
        """Remove this run's containers (or, with ``everything``, every deepgym container). Returns how many.
        Raises EngineUnavailableError when the engine cannot be reached or refuses."""
        label = f"{LABEL}" if everything else f"{LABEL}={self.run_id}"
        removed = 0
        try:
            api = self.api()
            with translate_errors("run"):
                for container in api.containers(all=True, filters={"label": label}):
                    with contextlib.suppress(docker.errors.NotFound):
                        api.remove_container(container["Id"], force=True)
                        removed += 1
        except _Infra as exc:
            raise EngineUnavailableError(f"cannot remove deepgym's containers: {exc.reason}. Fix: start the Docker "
                                         f"engine (scripts/install-docker-engine.sh on Debian) or point "
                                         f"DOCKER_HOST at it") from None
        return removed

    def close(self) -> None:
        if self._api is None:
            return
        with contextlib.suppress(EngineUnavailableError):
            self.cleanup()
        self._api.close()
        self._api = None


def _read_attached(sock: socket.socket, deadline: float) -> tuple[bytes, bytes, bool]:
    """Read docker's multiplexed attach stream until it ends or ``deadline`` passes.

    Returns (stdout, stderr, deadline_hit). Each frame is an 8-byte header (stream, 0, 0, 0, size) and its
    payload. Stdout beyond MAX_STDOUT_BYTES is dropped: the runner never writes that much, so the report
    will be missing and the classification says so."""
    buffer = bytearray()
    out = {1: bytearray(), 2: bytearray()}
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bytes(out[1]), bytes(out[2]), True
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(1 << 16)
        except socket.timeout:
            return bytes(out[1]), bytes(out[2]), True
        if not chunk:
            return bytes(out[1]), bytes(out[2]), False
        buffer.extend(chunk)
        while len(buffer) >= 8:
            kind, size = buffer[0], struct.unpack(">I", buffer[4:8])[0]
            if len(buffer) < 8 + size:
                break
            payload = bytes(buffer[8:8 + size])
            del buffer[:8 + size]
            target = out.get(kind)
            if target is not None and (kind != 1 or len(target) < MAX_STDOUT_BYTES):
                target.extend(payload)
                if kind == 2 and len(target) > 2 * STDERR_TAIL_BYTES:
                    del target[:-STDERR_TAIL_BYTES]
