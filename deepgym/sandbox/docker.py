"""The docker provider: locked-down containers on a Docker engine, driven through docker-py's low-level API.

A sandbox is a container whose main process is a small init of our own (:data:`INIT`, run by the image's
``python3``): it reaps orphans, holds no capability it could lend, and ends the container when the spec's
``lifetime_s`` runs out, so a sandbox outlives a dead deepgym by at most its lifetime. Commands run through
``docker exec``; files cross through a small helper run by the file's owner.

**Timeouts kill the whole tree, inside the container.** ``docker exec`` never kills its process when the
client gives up (moby#9098), so at ``timeout_s`` the host starts a second exec *as the timed-out command's
user* that calls ``kill(-1, SIGKILL)``: the kernel delivers it atomically to every process of that uid (a
fork bomb cannot outrun it, daemonised children that called ``setsid()`` included) and to nothing else. A
root exec that times out therefore stops every process in the sandbox but its init (root's ``kill(-1)``
reaches them all), concurrent execs included; the sandbox stays usable. If that kill cannot run (the engine
stopped answering, the pids limit is full), the container is removed, and the next call says SandboxLost.

**One-shot judging has a fast path.** :meth:`DockerProvider.run` makes ``argv`` the container's main
process under Docker's init and carries stdin and stdout in one attached stream, which saves the exec round
trips, in a container started ahead of need (:mod:`deepgym.sandbox.prewarm`; ``DEEPGYM_DOCKER_PREWARM=0``
starts each on demand); ``DEEPGYM_DOCKER_EXEC=1`` (or ``DockerProvider(attach=False)``) takes the generic
create-and-exec path instead. Both pass the same conformance and hostile suites. One difference remains: an attached main process
killed from outside (``docker kill``) cannot be told from one that died of SIGKILL itself, so it comes back as
exit status 137, which :func:`~deepgym.verdict.classify` turns into ``sandbox_lost`` when the runner had not
reported; removed from outside, it is SandboxLost on both paths.

Every container carries the labels ``deepgym`` (this provider's run id) and ``deepgym.owner``
(``host/pid-namespace/pid/start-time``). On first contact the provider removes containers whose owner process
is gone, never those of a live process; ``deepgym cleanup`` sweeps them all. On SIGTERM or SIGINT the provider
removes its own (:mod:`deepgym.shutdown`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from .. import shutdown
from ..admission import engine_key
from .base import (STDERR_TAIL_BYTES, Attachment, ExecOptions, ExecResult, File, Image, ImageMissing, Provider, ProviderUnavailable, Sandbox,
                   SandboxError, SandboxLost, SandboxSpec, StartFailure)
from . import ssh
from .prewarm import REFILLERS, Attached, Prewarm, prewarm_size
from .warm import WarmPool

LABEL = "deepgym"
OWNER_LABEL = "deepgym.owner"
# Engine API version: Docker 20.10 and later speak it, and it has everything used here. A fixed version keeps
# the client's constructor off the network (docker-py's "auto" leaks a socket when the engine is down).
API_VERSION = "1.41"
EXEC_PATH_VARIABLE = "DEEPGYM_DOCKER_EXEC"
# How long the host waits for the engine itself (a kill, an exit status) once a command has ended or timed out.
ENGINE_GRACE_S = 30.0
# The sandbox's PID 1. SIGCHLD stays blocked and is taken synchronously, so no orphan's exit is missed between
# two waits; as PID 1 it receives no signal it has no handler for, so kill(-1) from inside never reaches it.
INIT = ("import os, signal, sys, time\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})\n"
        "end = time.monotonic() + float(sys.argv[1])\n"
        "while True:\n"
        "    try:\n"
        "        while os.waitpid(-1, os.WNOHANG)[0]:\n"
        "            pass\n"
        "    except ChildProcessError:\n"
        "        pass\n"
        "    left = end - time.monotonic()\n"
        "    if left <= 0:\n"
        "        break\n"
        "    signal.sigtimedwait({signal.SIGCHLD}, left)\n")
# How long a command's death by a signal may precede the engine's record that its container stopped.
STOP_SETTLE_S = 0.5
FILE_TIMEOUT_S = 60.0
# put PATH MODE UID GID (the data on stdin) and get PATH (prints "mode uid gid", a newline, the data), each
# as the file's owner. Exit 2: no such file; 3: not a regular file.
FILE_HELPER = ("python3", "-I", "-S", "-c",
               "import os, stat, sys\n"
               "def become(uid, gid):\n"
               "    os.setgroups([]); os.setgid(gid); os.setuid(uid)\n"
               "try:\n"
               "    if sys.argv[1] == 'put':\n"
               "        path, mode, uid, gid = sys.argv[2], *map(int, sys.argv[3:6])\n"
               "        data = sys.stdin.buffer.read()\n"
               "        become(uid, gid)\n"
               "        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode & 0o777)\n"
               "        os.write(fd, data) if data else None\n"
               "        os.fchmod(fd, mode)\n"
               "        os.close(fd)\n"
               "    else:\n"
               "        info = os.stat(sys.argv[2])\n"
               "        if not stat.S_ISREG(info.st_mode):\n"
               "            sys.exit(3)\n"
               "        become(info.st_uid, info.st_gid)\n"
               "        with open(sys.argv[2], 'rb') as f:\n"
               "            data = f.read()\n"
               "        sys.stdout.buffer.write(b'%d %d %d\\n' % (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) + data)\n"
               "except FileNotFoundError:\n"
               "    sys.exit(2)\n")


def read_file_reply(path: str, result: ExecResult) -> File:
    """The file that FILE_HELPER's ``get`` of ``path`` printed, or the OSError its exit status means."""
    if result.exit_code != 0:
        raise _file_error(path, result)
    header, _, data = result.stdout.partition(b"\n")
    mode, uid, gid = (int(field) for field in header.split())
    return File(data=data, mode=mode, uid=uid, gid=gid)


def _file_error(path: str, result: ExecResult) -> OSError:
    """What FILE_HELPER's exit status (2: no such file, 3: not a regular file) means for ``path``."""
    if result.exit_code == 2:
        return FileNotFoundError(path)
    if result.exit_code == 3:
        return FileNotFoundError(f"{path} is not a regular file")
    return PermissionError(f"cannot access {path} in the sandbox: {result.stderr_tail.strip()[-500:]}")


# kill(-1) from a shell of the target uid: every process of that uid but the shell itself, atomically.
KILL_ALL = ("/bin/sh", "-c", "kill -s KILL -- -1")


# A sandbox without a network keeps no TCP state past the sockets that made it: no TIME_WAIT entries (which
# any uid can list in /proc/net/tcp for a minute), no TCP metrics cache (which any uid can dump over netlink
# for an hour) and no fast-open cookies (which write that cache). Warm mode's samples share a namespace: this
# keeps one sample's loopback traffic from outliving it, and the server retires a container whose namespace
# changed anyway (docs/warm.md). Each is per network namespace, and covers IPv6 too.
LOOPBACK_SYSCTLS = {"net.ipv4.tcp_max_tw_buckets": "0", "net.ipv4.tcp_no_metrics_save": "1",
                    "net.ipv4.tcp_fastopen": "0"}


def container_settings(api: docker.APIClient, spec: SandboxSpec, labels: dict[str, str], *,
                       attached: bool) -> dict[str, Any]:
    """Every setting of a sandbox's container, in one place. ``attached``: the command is the main process
    (:meth:`DockerProvider.run`), under Docker's init, and the host collects its exit status; otherwise our
    own init (:data:`INIT`) is the main process and the engine removes the container when it ends.

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
    host_config = api.create_host_config(
        network_mode="bridge" if spec.network else "none",
        cap_drop=["ALL"],
        cap_add=list(spec.capabilities),
        security_opt=["no-new-privileges:true"],
        read_only=True,
        tmpfs={"/tmp": f"rw,nosuid,nodev,noexec,size={spec.tmpfs_mb}m,mode=1777"},
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
    return {"user": spec.user, "labels": labels, "host_config": host_config, "network_disabled": not spec.network}


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
        reason = ssh.failure(exc, engine)
        if reason is None:
            raise
        raise ProviderUnavailable(reason) from None


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


def engine_options(docker_host: str | None) -> dict[str, Any]:
    """docker-py's connection settings for the engine at ``docker_host`` (DOCKER_HOST's syntax), or the one the
    environment names (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) when None. TLS settings come from the
    environment either way. ``ssh://`` goes through paramiko (:mod:`deepgym.sandbox.ssh`)."""
    environment = {**os.environ, "DOCKER_HOST": docker_host} if docker_host else None
    return docker.utils.kwargs_from_env(environment=environment)


class DockerProvider(Provider):
    """Containers on one Docker engine: ``docker_host`` (DOCKER_HOST's syntax: ``unix://``, ``tcp://``,
    ``ssh://``), else the one DOCKER_HOST names, else the local socket. A remote engine runs the same sandbox;
    its reaper removes only what dead processes of this host left (see :func:`owner_alive`), never the
    containers of other hosts that share the engine."""

    name = "docker"
    runs_desktops = True

    def __init__(self, *, max_parallel: int = 32, attach: bool | None = None, prewarm: int | None = None,
                 docker_host: str | None = None):
        self.docker_host = docker_host
        self.engine = docker_host or os.environ.get("DOCKER_HOST")
        """The engine's URL, None for the local socket."""
        ssh.require_transport(self.engine)
        self.max_parallel = max_parallel
        self.run_id = os.urandom(6).hex()
        self.host = socket.gethostname()
        self.namespace = pid_namespace()
        self.owner = owner_label(os.getpid())
        self.attach = attach if attach is not None else os.environ.get(EXEC_PATH_VARIABLE) != "1"
        self.admission_key = engine_key(self.engine)
        size = prewarm_size(prewarm, max_parallel) if self.attach else 0
        self.prewarm = Prewarm(self, size) if size else None
        self._pool = max_parallel + 4 + (REFILLERS if size else 0)
        self._api: docker.APIClient | None = None
        self._lock = threading.Lock()
        shutdown.register(self.close)  # SIGTERM/SIGINT remove this provider's containers (deepgym.shutdown)
        self._warm: WarmPool | None = None

    def warm_pool(self) -> WarmPool:
        """Warm mode's containers (:mod:`deepgym.sandbox.warm`), made on first use."""
        with self._lock:
            if self._warm is None:
                self._warm = WarmPool(self)
            return self._warm

    def api(self) -> docker.APIClient:
        """The engine's API client, created on first use and again after a failure (the engine may return)."""
        with self._lock:
            if self._api is None:
                with translate_errors("start", self.engine):
                    client = docker.APIClient(**engine_options(self.docker_host), version=API_VERSION,
                                              max_pool_size=self._pool)
                if client.base_url.startswith("http+docker://"):
                    # A unix socket: no proxy or .netrc ever applies, and looking them up in the environment is
                    # a share of every request's host CPU (several requests per sample).
                    client.trust_env = False
                self._api = client
                self._reap_orphans(client)
            return self._api

    @contextlib.contextmanager
    def _engine(self, phase: str) -> Iterator[docker.APIClient]:
        """The client, with errors translated; a client that found the engine down is dropped, so the next call
        connects afresh (a client another thread already made since then is kept)."""
        api: docker.APIClient | None = None
        try:
            with translate_errors(phase, self.engine):
                api = self.api()
                yield api
        except ProviderUnavailable:
            with self._lock:
                if api is not None and self._api is api:
                    api.close()
                    self._api = None
            raise

    def _reap_orphans(self, api: docker.APIClient) -> None:
        """Remove containers left by processes that died (including those still being created)."""
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
            for container in api.containers(all=True, filters={"label": OWNER_LABEL}):
                if not owner_alive(container["Labels"].get(OWNER_LABEL, ""), self.host, self.namespace):
                    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                        api.remove_container(container["Id"], force=True)

    def _labels(self, spec: SandboxSpec) -> dict[str, str]:
        return {**spec.labels, LABEL: self.run_id, OWNER_LABEL: self.owner}

    def image(self, ref: str) -> Image:
        with self._engine("start") as api:
            try:
                info = api.inspect_image(ref)
            except docker.errors.ImageNotFound:
                raise ImageMissing(f"{ref} is not built") from None
        return Image(id=info["Id"], labels=dict((info.get("Config") or {}).get("Labels") or {}))

    def create(self, spec: SandboxSpec) -> DockerSandbox:
        container: str | None = None
        with self._engine("start") as api:
            try:
                settings = container_settings(api, spec, self._labels(spec), attached=False)
                container = api.create_container(spec.image, entrypoint=["python3", "-I", "-S", "-c", INIT],
                                                 command=[f"{spec.lifetime_s:g}"], **settings)["Id"]
                api.start(container)
            except BaseException:
                if container is not None:
                    self._remove(container)
                raise
        return DockerSandbox(self, container, spec)

    def run(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        if not self.attach:
            return super().run(spec, argv, options)
        started = time.monotonic()
        if self.prewarm is not None:
            return self.prewarm.run(spec, argv, options, started)
        box = self.start_attached(spec, argv, options)
        try:
            return self.finish_attached(box, options, started)
        finally:
            self._remove(box.container)

    def start_attached(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> Attached:
        """A container whose main process is ``argv`` (as ``options``' user, in its cwd, with its env), started
        with its stdio attached and waiting for its stdin. Removed again when it cannot be started."""
        container: str | None = None
        try:
            with self._engine("start") as api:
                settings = container_settings(api, spec, self._labels(spec), attached=True)
                if options.user is not None:
                    settings["user"] = options.user
                # stdin_open without detach makes docker-py set AttachStdin and StdinOnce: one stdin stream.
                container = api.create_container(spec.image, entrypoint=list(argv), command=[], stdin_open=True,
                                                 detach=False, tty=False, working_dir=options.cwd,
                                                 environment=dict(options.env), **settings)["Id"]
                stream = api.attach_socket(container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            box = Attached(container, stream, getattr(stream, "_sock", stream), time.monotonic())
            try:
                with self._engine("start") as api:
                    api.start(container)
            except BaseException:
                box.close_stream()
                raise
        except BaseException:
            if container is not None:
                self._remove(container)
            raise
        return box

    def attached_run(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> Attachment:
        box = self.start_attached(spec, argv, options)
        return Attachment(box.container, box.sock, lambda: (box.close_stream(), self._remove(box.container)))

    def finish_attached(self, box: Attached, options: ExecOptions, started: float) -> ExecResult:
        """Send ``options.stdin`` to an attached container and collect what its main process did, by the
        deadline ``started + options.timeout_s``. The caller removes the container."""
        try:
            with self._engine("run"):
                stdout, stderr, timed_out, truncated = _converse(box.sock, options, started + options.timeout_s)
        finally:
            box.close_stream()
        with self._engine("run") as api:
            if timed_out:
                with contextlib.suppress(docker.errors.APIError):
                    api.kill(box.container)
                exit_code = None
            else:
                exit_code = api.wait(box.container, timeout=ENGINE_GRACE_S)["StatusCode"]
                if exit_code != 0 and _going(api, box.container):
                    raise SandboxLost("the container was removed from outside under its command")
        return ExecResult(exit_code=exit_code, stdout=stdout, stderr_tail=_tail(stderr), timed_out=timed_out,
                          elapsed_s=time.monotonic() - started, stdout_truncated=truncated)

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Remove every container of deepgym's (label ``deepgym``, any run) that carries all of ``labels``."""
        filters = [LABEL, *(f"{key}={value}" for key, value in labels.items())]
        removed = 0
        with self._engine("run") as api:
            for container in api.containers(all=True, filters={"label": filters}):
                try:
                    api.remove_container(container["Id"], force=True)
                    removed += 1
                except docker.errors.APIError as exc:
                    # Gone, or already being removed (by its owner, or the engine's auto-remove): not ours to count.
                    if exc.status_code not in (404, 409):
                        raise
        return removed

    def _remove(self, container: str) -> None:
        """Remove a container. If the engine is down, the next start-up's reaper (or the lifetime) removes it."""
        api = self._api
        if api is None:
            return
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
            api.remove_container(container, force=True)

    def close(self) -> None:
        """Remove this run's containers still alive (prewarmed and warm ones too) and close the connection."""
        if self.prewarm is not None:
            self.prewarm.close()
        if self._warm is not None:
            self._warm.close()
        if self._api is None:
            return
        with contextlib.suppress(SandboxError):
            self.sweep({LABEL: self.run_id})
        with self._lock:
            if self._api is not None:
                self._api.close()
                self._api = None


class DockerSandbox(Sandbox):
    """One container created by :meth:`DockerProvider.create`."""

    def __init__(self, provider: DockerProvider, container: str, spec: SandboxSpec):
        self.provider = provider
        self.id = container
        self.spec = spec
        self._closed = False

    def exec(self, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        started = time.monotonic()
        deadline = started + options.timeout_s
        user = options.user or self.spec.user
        with self.provider._engine("run") as api:
            execution = api.exec_create(self.id, list(argv), stdin=True, user=user, workdir=options.cwd,
                                        environment=dict(options.env))["Id"]
            stream = api.exec_start(execution, socket=True)
        sock: socket.socket = getattr(stream, "_sock", stream)
        try:
            with self.provider._engine("run"):
                stdout, stderr, timed_out, truncated = _converse(sock, options, deadline)
        finally:
            sock.close()
            stream.close()
        if timed_out:
            self._kill_all(user)
            exit_code = None
        else:
            exit_code = self._exit_code(execution)
        return ExecResult(exit_code=exit_code, stdout=stdout, stderr_tail=_tail(stderr), timed_out=timed_out,
                          elapsed_s=time.monotonic() - started, stdout_truncated=truncated)

    def _exit_code(self, execution: str) -> int:
        """The exit status of a finished exec. An exec whose stream ended because the container went away
        (killed or removed from outside) is SandboxLost, not the status docker makes up for it."""
        with self.provider._engine("run") as api:
            info = api.exec_inspect(execution)
            give_up = time.monotonic() + ENGINE_GRACE_S
            while info["Running"] and time.monotonic() < give_up:
                time.sleep(0.01)
                info = api.exec_inspect(execution)
            if info["ExitCode"] != 0 and self._stopping(api, info["ExitCode"]):
                raise SandboxLost("the container stopped under a running command (killed from outside, or its "
                                  "lifetime ran out)")
        if info["ExitCode"] is None:
            raise SandboxLost("the engine never reported the command's exit status")
        return info["ExitCode"]

    def _stopping(self, api: docker.APIClient, exit_code: int) -> bool:
        """Whether the container is stopping or stopped. A command killed by a signal may have been killed with
        its container, whose state the engine updates a little later: watch it for STOP_SETTLE_S then."""
        settle = time.monotonic() + (STOP_SETTLE_S if exit_code > 128 else 0.0)
        while True:
            if _going(api, self.id) or not api.inspect_container(self.id)["State"]["Running"]:
                return True
            if time.monotonic() >= settle:
                return False
            time.sleep(0.02)

    def _kill_all(self, user: str) -> None:
        """SIGKILL every process of ``user`` in the container, from inside (see the module's docstring); if
        that cannot run, remove the container rather than leave the command running."""
        try:
            with self.provider._engine("run") as api:
                killer = api.exec_create(self.id, list(KILL_ALL), user=user)["Id"]
                api.exec_start(killer)
                if api.exec_inspect(killer)["ExitCode"] == 0:
                    return
        except SandboxError:
            pass
        self.close()

    def put(self, path: str, file: File) -> None:
        """Written by a process of the file's owner: Docker refuses archives on a read-only root, even into a
        tmpfs, and the sandbox's root holds no CAP_CHOWN (only CAP_SETUID and CAP_SETGID, to become the owner)."""
        result = self.exec([*FILE_HELPER, "put", path, str(file.mode), str(file.uid), str(file.gid)],
                           ExecOptions(stdin=file.data, user="0:0", timeout_s=FILE_TIMEOUT_S))
        if result.exit_code != 0:
            raise _file_error(path, result)

    def get(self, path: str) -> File:
        """Read by a process of the file's owner (the sandbox's root holds no CAP_DAC_OVERRIDE)."""
        return read_file_reply(path, self.exec([*FILE_HELPER, "get", path],
                                               ExecOptions(user="0:0", timeout_s=FILE_TIMEOUT_S)))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.provider._remove(self.id)


def _going(api: docker.APIClient, container: str) -> bool:
    """Whether ``container`` is being removed (``docker rm -f`` marks it before it kills anything). Raises
    NotFound once it is gone."""
    return api.inspect_container(container)["State"]["Status"] in ("removing", "dead")


def _converse(sock: socket.socket, options: ExecOptions, deadline: float) -> tuple[bytes, bytes, bool, bool]:
    """Send ``options.stdin`` and end it, then read docker's multiplexed stream until it ends or ``deadline``
    passes. Returns (stdout, stderr, timed_out, stdout_truncated).

    Each frame is an 8-byte header (stream, 0, 0, 0, size) and its payload. Stdout beyond
    ``options.stdout_limit`` is dropped; only the last STDERR_TAIL_BYTES of stderr are kept."""
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        sock.sendall(options.stdin)
        sock.shutdown(socket.SHUT_WR)
    except socket.timeout:
        return b"", b"", True, False
    buffer = bytearray()
    out = {1: bytearray(), 2: bytearray()}
    truncated = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bytes(out[1]), bytes(out[2]), True, truncated
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(1 << 16)
        except socket.timeout:
            return bytes(out[1]), bytes(out[2]), True, truncated
        if not chunk:
            return bytes(out[1]), bytes(out[2]), False, truncated
        buffer.extend(chunk)
        while len(buffer) >= 8:
            kind, size = buffer[0], struct.unpack(">I", buffer[4:8])[0]
            if len(buffer) < 8 + size:
                break
            payload = bytes(buffer[8:8 + size])
            del buffer[:8 + size]
            if kind == 1:
                room = options.stdout_limit - len(out[1])
                truncated = truncated or len(payload) > room
                out[1].extend(payload[:max(0, room)])
            elif kind == 2:
                out[2].extend(payload)
                if len(out[2]) > 2 * STDERR_TAIL_BYTES:
                    del out[2][:-STDERR_TAIL_BYTES]


def _tail(stderr: bytes) -> str:
    return stderr[-STDERR_TAIL_BYTES:].decode("utf-8", "replace")
