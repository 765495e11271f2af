"""One Docker engine, through one docker-py client: its connection, every container setting, the errors of
docker-py, requests and ssh translated into the sandbox errors once (:func:`translate_errors`), and the
container life cycle that the provider, its sandboxes and its pools share (attach, start, finish, remove,
sweep). Nothing here knows a pool or a sample: those take an :class:`Engine`, never the provider.

**Attached runs.** :meth:`Engine.start_attached` makes ``argv`` a container's main process, under Docker's
init, with its stdin, stdout and stderr on one attached stream: one-shot judging sends the request and reads
the report there (:meth:`Engine.finish_attached`), which saves the exec round trips; warm containers and
desktops keep the stream for many requests. The handle, :class:`Attached`, closes its stream and removes its
container in :meth:`Attached.close`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import socket
import threading
import time
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

import docker
import docker.errors
import requests.exceptions

from ..ssh import failure as ssh_failure
from ..ssh import require_transport
from ..base import (ExecOptions, ExecResult, ImageMissing, ProviderUnavailable, SandboxError, SandboxLost,
                    SandboxSpec, StartFailure)
from ..frames import converse, tail
from .owners import LABEL, OWNER_LABEL, owner_label, pid_namespace, reap_orphans

# Engine API version: Docker 20.10 and later speak it, and it has everything used here. A fixed version keeps
# the client's constructor off the network (docker-py's "auto" leaks a socket when the engine is down).
API_VERSION = "1.41"
# How long the host waits for the engine itself (a kill, an exit status) once a command has ended or timed out.
ENGINE_GRACE_S = 30.0
# An attached container that waited longer than this is removed instead of used (it holds memory for nothing).
MAX_IDLE_S = 600.0
# A sandbox without a network keeps no TCP state past the sockets that made it: no TIME_WAIT entries (which
# any uid can list in /proc/net/tcp for a minute), no TCP metrics cache (which any uid can dump over netlink
# for an hour) and no fast-open cookies (which write that cache). Warm mode's samples share a namespace: this
# keeps one sample's loopback traffic from outliving it, and the server retires a container whose namespace
# changed anyway (docs/warm.md). Each is per network namespace, and covers IPv6 too.
NETWORK = "bridge"
"""The engine's network a sandbox with one is on (:attr:`SandboxSpec.network`, or later:
:attr:`SandboxSpec.network_later`)."""
LOOPBACK_SYSCTLS = {"net.ipv4.tcp_max_tw_buckets": "0", "net.ipv4.tcp_no_metrics_save": "1",
                    "net.ipv4.tcp_fastopen": "0"}


def container_settings(api: docker.APIClient, spec: SandboxSpec, labels: dict[str, str], *,
                       attached: bool) -> dict[str, Any]:
    """Every setting of a sandbox's container, in one place. ``attached``: the command is the main process
    (:meth:`Engine.start_attached`), under Docker's init, and the host collects its exit status; otherwise our
    own init (:data:`~deepgym.sandbox.docker.scripts.INIT`) is the main process and the engine removes the
    container when it ends.

    Processes start as ``spec.user`` (root, for the runner) holding only ``spec.capabilities`` (CAP_SETUID,
    CAP_SETGID and CAP_KILL, so the runner can hand the submission to its own unprivileged user and stop it);
    the submission, once switched, holds no capability at all. Memory is memory and swap together.

    Without ``spec.network`` the engine allocates no network at all (``network_disabled``), not only none to
    connect to: the container still gets a network namespace of its own, whose loopback runc brings up, but
    libnetwork never sets it up, which skips its prestart hook (a re-run of the dockerd binary per container,
    about 70 ms of CPU here, a quarter of the engine's cost of a container) and the engine's own /etc/hosts and
    /etc/resolv.conf: the base image resolves ``localhost`` without them (libnss-myhostname). That namespace
    gets :data:`LOOPBACK_SYSCTLS`."""
    memory = f"{spec.memory_mb}m"
    wired = spec.network or spec.network_later  # a network later: made on the bridge, detached before its start
    host_config = api.create_host_config(
        network_mode=NETWORK if wired else "none",
        cap_drop=["ALL"],
        cap_add=list(spec.capabilities),
        security_opt=["no-new-privileges:true"],
        read_only=True,
        tmpfs={"/tmp": f"rw,nosuid,nodev,noexec,size={spec.tmpfs_mb}m,mode=1777",
               **{mount.path: f"rw,nosuid,nodev,{'exec' if mount.exec else 'noexec'},size={spec.tmpfs_mb}m,"
                              f"mode={mount.mode:o},uid={mount.uid},gid={mount.uid}" for mount in spec.mounts}},
        shm_size=f"{spec.tmpfs_mb}m",
        mem_limit=memory,
        memswap_limit=memory,
        pids_limit=spec.pids,
        nano_cpus=int(spec.cpus * 1e9),
        ulimits=[docker.types.Ulimit(name="nofile", soft=spec.nofile, hard=spec.nofile)],
        log_config=docker.types.LogConfig(type="none"),
        init=attached,
        auto_remove=not attached,
        sysctls=None if spec.network else dict(LOOPBACK_SYSCTLS),
    )
    return {"user": spec.user, "labels": labels, "host_config": host_config, "network_disabled": not wired}


@contextlib.contextmanager
def translate_errors(phase: str, engine: str | None = None) -> Iterator[None]:
    """Map docker, requests, socket and (for an ``engine`` URL of ssh://) ssh errors to the sandbox errors, once.
    ``phase`` is "start" before the sandbox started and "run" after."""
    try:
        yield
    except SandboxError:
        raise
    except docker.errors.ImageNotFound as exc:
        raise ImageMissing(f"{exc.explanation or exc}; build it with `deepgym images build`") from None
    except docker.errors.NotFound as exc:
        raise SandboxLost(f"the container disappeared: {exc.explanation or exc}") from None
    except docker.errors.APIError as exc:
        error = StartFailure if phase == "start" else SandboxLost
        raise error(f"the engine refused: {exc.explanation or exc}") from None
    except (requests.exceptions.ConnectionError, ConnectionError, FileNotFoundError) as exc:
        raise ProviderUnavailable(f"the Docker engine stopped answering: {exc}") from None
    except (requests.exceptions.Timeout, socket.timeout) as exc:
        raise ProviderUnavailable(f"the Docker engine did not answer in time: {exc}") from None
    except docker.errors.DockerException as exc:
        raise ProviderUnavailable(f"cannot talk to the Docker engine: {exc}") from None
    except Exception as exc:
        reason = ssh_failure(exc, engine)
        if reason is None:
            raise
        raise ProviderUnavailable(reason) from None


def engine_options(docker_host: str | None) -> dict[str, Any]:
    """docker-py's connection settings for the engine at ``docker_host`` (DOCKER_HOST's syntax), or the one the
    environment names (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) when None. TLS settings come from the
    environment either way. ``ssh://`` goes through paramiko (:mod:`deepgym.sandbox.ssh`)."""
    environment = {**os.environ, "DOCKER_HOST": docker_host} if docker_host else None
    return docker.utils.kwargs_from_env(environment=environment)


def going(api: docker.APIClient, container: str) -> bool:
    """Whether ``container`` is being removed (``docker rm -f`` marks it before it kills anything). Raises
    NotFound once it is gone."""
    return api.inspect_container(container)["State"]["Status"] in ("removing", "dead")


def key(spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> Hashable:
    """What makes two attached containers interchangeable: everything they are created with."""
    made_with = tuple((f.name, getattr(spec, f.name)) for f in dataclasses.fields(spec))
    return (tuple((name, tuple(sorted(value.items())) if isinstance(value, dict) else value)
                  for name, value in made_with),
            tuple(argv), options.user, options.cwd, tuple(sorted(options.env.items())))


@dataclasses.dataclass(frozen=True, eq=False)
class Launch:
    """How to start one attached container, equal to every other launch of an interchangeable one
    (:func:`key`): the key of a pool of ready containers, and what the pool starts the next one with."""

    spec: SandboxSpec
    argv: tuple[str, ...]
    options: ExecOptions

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Launch) and key(*self.parts) == key(*other.parts)

    def __hash__(self) -> int:
        return hash(key(*self.parts))

    @property
    def parts(self) -> tuple[SandboxSpec, tuple[str, ...], ExecOptions]:
        return self.spec, self.argv, self.options


@dataclasses.dataclass(eq=False)
class Attached:
    """A started container whose main process's stdio is ``sock`` (the engine's multiplexed frames,
    :mod:`~deepgym.sandbox.frames`). :meth:`close` closes the stream and removes the container."""

    container: str
    stream: Any
    sock: socket.socket
    made: float
    engine: Engine

    def usable(self) -> bool:
        """Whether it still waits for its request: a runner writes nothing before it has one, so a stream with
        anything to read has ended (the container died or was removed) and must not be used."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable and time.monotonic() - self.made < MAX_IDLE_S

    def close_stream(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            self.stream.close()

    def close(self) -> None:
        """Close the stream and remove the container. Never raises (a leftover is the reaper's or the sweep's)."""
        self.close_stream()
        self.engine.remove(self.container)


class Engine:
    """The client of one Docker engine: ``docker_host`` (DOCKER_HOST's syntax), else the one DOCKER_HOST names,
    else the local socket. Every container it makes carries this run's labels (``deepgym``: ``run_id``;
    ``deepgym.owner``: this process). ``pool_size``: the HTTP connections kept to the engine."""

    def __init__(self, docker_host: str | None, pool_size: int):
        self.docker_host = docker_host
        self.url = docker_host or os.environ.get("DOCKER_HOST")
        """The engine's URL, None for the local socket."""
        require_transport(self.url)
        self.pool_size = pool_size
        self.run_id = os.urandom(6).hex()
        self.host = socket.gethostname()
        self.namespace = pid_namespace()
        self.owner = owner_label(os.getpid())
        self._api: docker.APIClient | None = None
        self._lock = threading.Lock()

    def api(self) -> docker.APIClient:
        """The engine's API client, created on first use and again after a failure (the engine may return). On
        first contact it removes the containers of processes that died (:func:`~.owners.reap_orphans`)."""
        with self._lock:
            if self._api is None:
                with translate_errors("start", self.url):
                    client = docker.APIClient(**engine_options(self.docker_host), version=API_VERSION,
                                              max_pool_size=self.pool_size)
                if client.base_url.startswith("http+docker://"):
                    # A unix socket: no proxy or .netrc ever applies, and looking them up in the environment is
                    # a share of every request's host CPU (several requests per sample).
                    client.trust_env = False
                self._api = client
                reap_orphans(client, self.host, self.namespace)
            return self._api

    @contextlib.contextmanager
    def session(self, phase: str) -> Iterator[docker.APIClient]:
        """The client, with errors translated; a client that found the engine down is dropped, so the next call
        connects afresh (a client another thread already made since then is kept)."""
        api: docker.APIClient | None = None
        try:
            with translate_errors(phase, self.url):
                api = self.api()
                yield api
        except ProviderUnavailable:
            with self._lock:
                if api is not None and self._api is api:
                    api.close()
                    self._api = None
            raise

    def labels(self, spec: SandboxSpec) -> dict[str, str]:
        return {**spec.labels, LABEL: self.run_id, OWNER_LABEL: self.owner}

    def start_attached(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> Attached:
        """A container whose main process is ``argv`` (as ``options``' user, in its cwd, with its env), started
        with its stdio attached and waiting for its stdin. Removed again when it cannot be started."""
        container: str | None = None
        try:
            with self.session("start") as api:
                settings = container_settings(api, spec, self.labels(spec), attached=True)
                if options.user is not None:
                    settings["user"] = options.user
                # stdin_open without detach makes docker-py set AttachStdin and StdinOnce: one stdin stream.
                container = api.create_container(spec.image, entrypoint=list(argv), command=[], stdin_open=True,
                                                 detach=False, tty=False, working_dir=options.cwd,
                                                 environment=dict(options.env), **settings)["Id"]
                stream = api.attach_socket(container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            box = Attached(container, stream, getattr(stream, "_sock", stream), time.monotonic(), self)
            try:
                with self.session("start") as api:
                    api.start(container)
            except BaseException:
                box.close_stream()
                raise
        except BaseException:
            if container is not None:
                self.remove(container)
            raise
        return box

    def finish_attached(self, box: Attached, options: ExecOptions, started: float) -> ExecResult:
        """Send ``options.stdin`` to an attached container and collect what its main process did, by the
        deadline ``started + options.timeout_s``. The caller removes the container."""
        try:
            with self.session("run"):
                stdout, stderr, timed_out, truncated = converse(box.sock, options, started + options.timeout_s)
        finally:
            box.close_stream()
        with self.session("run") as api:
            if timed_out:
                with contextlib.suppress(docker.errors.APIError):
                    api.kill(box.container)
                exit_code = None
            else:
                exit_code = api.wait(box.container, timeout=ENGINE_GRACE_S)["StatusCode"]
                if exit_code != 0 and going(api, box.container):
                    raise SandboxLost("the container was removed from outside under its command")
        return ExecResult(exit_code=exit_code, stdout=stdout, stderr_tail=tail(stderr), timed_out=timed_out,
                          elapsed_s=time.monotonic() - started, stdout_truncated=truncated)

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Remove every container of deepgym's (label ``deepgym``, any run) that carries all of ``labels``."""
        filters = [LABEL, *(f"{key}={value}" for key, value in labels.items())]
        removed = 0
        with self.session("run") as api:
            for container in api.containers(all=True, filters={"label": filters}):
                try:
                    api.remove_container(container["Id"], force=True)
                    removed += 1
                except docker.errors.APIError as exc:
                    # Gone, or already being removed (by its owner, or the engine's auto-remove): not ours to count.
                    if exc.status_code not in (404, 409):
                        raise
        return removed

    def remove(self, container: str) -> None:
        """Remove a container. If the engine is down, the next start-up's reaper (or the lifetime) removes it."""
        api = self._api
        if api is None:
            return
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
            api.remove_container(container, force=True)

    def close(self) -> None:
        """Remove this run's containers still alive and close the connection."""
        if self._api is None:
            return
        with contextlib.suppress(SandboxError):
            self.sweep({LABEL: self.run_id})
        with self._lock:
            if self._api is not None:
                self._api.close()
                self._api = None
