"""A sandbox of the docker provider: a container whose main process is deepgym's own init
(:data:`~deepgym.sandbox.docker.scripts.INIT`); commands run through ``docker exec``, files cross through the
file helper run as the file's owner.

**Timeouts kill the whole tree, inside the container.** ``docker exec`` never kills its process when the
client gives up (moby#9098), so at ``timeout_s`` the host starts a second exec *as the timed-out command's
user* that calls ``kill(-1, SIGKILL)``: the kernel delivers it atomically to every process of that uid (a
fork bomb cannot outrun it, daemonised children that called ``setsid()`` included) and to nothing else. A
root exec that times out therefore stops every process in the sandbox but its init (root's ``kill(-1)``
reaches them all), concurrent execs included; the sandbox stays usable. If that kill cannot run (the engine
stopped answering, the pids limit is full), the container is removed, and the next call says SandboxLost.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import docker

from ..base import ExecOptions, ExecResult, File, Sandbox, SandboxError, SandboxLost, SandboxSpec
from .engine import ENGINE_GRACE_S, NETWORK, Engine, going
from ..frames import converse, tail
from .scripts import FILE_HELPER, FILE_TIMEOUT_S, KILL_ALL, file_error, read_file_reply

# How long a command's death by a signal may precede the engine's record that its container stopped.
STOP_SETTLE_S = 0.5


@dataclass(eq=False)
class ExecStream:
    """A command started by :meth:`DockerSandbox.stream`: its exec's attached socket, open until :meth:`close`."""

    sock: socket.socket
    response: Any

    def close(self) -> None:
        """Close the socket: the engine ends the command's stdin, and the command decides what that means."""
        for part in (self.sock, self.response):
            try:
                part.close()
            except OSError:
                pass


class DockerSandbox(Sandbox):
    """One container created by :meth:`~deepgym.sandbox.docker.DockerProvider.create`."""

    def __init__(self, engine: Engine, container: str, spec: SandboxSpec):
        self.engine = engine
        self.id = container
        self.spec = spec
        self._closed = False

    def exec(self, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        started = time.monotonic()
        deadline = started + options.timeout_s
        user = options.user or self.spec.user
        with self.engine.session("run") as api:
            execution = api.exec_create(self.id, list(argv), stdin=True, user=user, workdir=options.cwd,
                                        environment=dict(options.env))["Id"]
            stream = api.exec_start(execution, socket=True)
        sock: socket.socket = getattr(stream, "_sock", stream)
        try:
            with self.engine.session("run"):
                stdout, stderr, timed_out, truncated = converse(sock, options, deadline)
        finally:
            sock.close()
            stream.close()
        if timed_out:
            self._kill_all(user)
            exit_code = None
        else:
            exit_code = self._exit_code(execution)
        return ExecResult(exit_code=exit_code, stdout=stdout, stderr_tail=tail(stderr), timed_out=timed_out,
                          elapsed_s=time.monotonic() - started, stdout_truncated=truncated)

    def stream(self, argv: Sequence[str], options: ExecOptions) -> ExecStream:
        """One exec whose attached socket stays open: each request then costs a round trip on it, not an exec."""
        with self.engine.session("run") as api:
            execution = api.exec_create(self.id, list(argv), stdin=True, user=options.user or self.spec.user,
                                        workdir=options.cwd, environment=dict(options.env))["Id"]
            response = api.exec_start(execution, socket=True)
        return ExecStream(getattr(response, "_sock", response), response)

    def _exit_code(self, execution: str) -> int:
        """The exit status of a finished exec. An exec whose stream ended because the container went away
        (killed or removed from outside) is SandboxLost, not the status docker makes up for it."""
        with self.engine.session("run") as api:
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
            if going(api, self.id) or not api.inspect_container(self.id)["State"]["Running"]:
                return True
            if time.monotonic() >= settle:
                return False
            time.sleep(0.02)

    def _kill_all(self, user: str) -> None:
        """SIGKILL every process of ``user`` in the container, from inside (see the module's docstring); if
        that cannot run, remove the container rather than leave the command running."""
        try:
            with self.engine.session("run") as api:
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
            raise file_error(path, result)

    def get(self, path: str) -> File:
        """Read by a process of the file's owner (the sandbox's root holds no CAP_DAC_OVERRIDE)."""
        return read_file_reply(path, self.exec([*FILE_HELPER, "get", path],
                                               ExecOptions(user="0:0", timeout_s=FILE_TIMEOUT_S)))

    def set_network(self, on: bool) -> None:
        """Connect the container to the engine's network, or disconnect it: it keeps only loopback then."""
        if not self.spec.network_later:
            raise ValueError(f"sandbox {self.id} was not made to take a network later (SandboxSpec.network_later)")
        with self.engine.session("run") as api:
            if on:
                api.connect_container_to_network(self.id, NETWORK)
            else:
                api.disconnect_container_from_network(self.id, NETWORK)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.engine.remove(self.id)
