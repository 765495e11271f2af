"""A session's services: servers the agent starts by name, which survive into grading and are checked there.

An environment's manifest declares its services (``services:``, :class:`deepgym.environments.ServiceSpec`):
a name, the environment's own command, a loopback port and an HTTP health path. Three parties touch them:

- **The supervisor** (:class:`Supervisor`), started by the session's ``setup`` as root (the runner's three
  capabilities, ``no_new_privs``), detached, its stdin, stdout and stderr /dev/null. It listens on a Unix
  socket (:data:`SOCKET`, in a root-owned folder the agent cannot change) for one-line requests
  ``start|stop|restart|status NAME`` and answers one line. It starts only declared services, each as a uid
  of its own (:func:`service_uid`: never the agent's, never the verifier's) in the agent's workspace, so the
  service runs the environment's code on the files the agent left. That uid holds no capability, so the agent
  can neither signal nor trace it, nor the supervisor (root). A service's output goes to a root-owned log the
  agent may read (``/tmp/deepgym-services/NAME.log``); its state to a root-owned ``NAME.json``. Requests are
  served one at a time with a short read deadline and every failure of one request is answered, not raised,
  so no request can bring the supervisor down; a failure of its own loop is recorded in :data:`FAILED`.
- **The agent** asks through ``deepgym-service start NAME`` (this module's client, :func:`main`). A process
  it backgrounds itself is the agent's uid and dies in the pre-verification kill like any other.
- **The verification** (:func:`stop_supervisor`, then :func:`health_harness` as the verifier's uid, then the
  service uids killed and proved quiet, all in deepgym/runner/episode/verify.py): the supervisor is stopped first,
  so no queued request can start a service later; a service is healthy when a process of its uid is alive
  and its health path answers HTTP 200 over loopback. Whatever is found is reported; a service that is not
  running or not healthy is the agent's failure (scored 0, ``service_failed``), because only the agent's files
  and requests decide it. The services are killed before the probes and the verifier run, so nothing a
  service does (it may run code the agent wrote) can change the state the verifier reads.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from typing import Any

SERVICE_DIR = "/tmp/deepgym-services"
SOCKET = f"{SERVICE_DIR}/supervisor.sock"
PID_FILE = f"{SERVICE_DIR}/supervisor.pid"
FAILED = f"{SERVICE_DIR}/supervisor.failed"
SERVICE_UID_BASE = 10100
MAX_REQUEST_BYTES = 256
READ_DEADLINE_S = 1.0
# How long ``start`` waits for the service to listen (or die) before it answers.
START_WAIT_S = 3.0
STOP_WAIT_S = 5.0
BODY_CHARS = 4000
CHECKING = "deepgym-health: checking"
CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TMPDIR": "/tmp"}
USAGE = "usage: deepgym-service start|stop|restart|status NAME"


def service_uid(index: int) -> int:
    """The uid of the manifest's ``index``-th service."""
    return SERVICE_UID_BASE + index


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _write_atomic(path: str, text: str) -> None:
    with open(path + ".new", "w") as f:
        f.write(text)
    os.replace(path + ".new", path)


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Supervisor:
    """Starts and stops the declared services on the agent's requests (see the module's docstring)."""

    def __init__(self, services: list[dict[str, Any]], workspace: str):
        self.services = {service["name"]: (index, service) for index, service in enumerate(services)}
        self.workspace = workspace
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.starts: dict[str, int] = {}
        self.state: dict[str, str] = {}
        self.stopping = False

    def serve(self, listener: socket.socket) -> None:
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        listener.settimeout(0.2)
        for name in self.services:
            self._record(name, "not started")
        while not self.stopping:
            self._reap()
            try:
                conn, _ = listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except (OSError, MemoryError):  # no descriptor or memory left: the agent's doing, try again
                time.sleep(0.05)
                continue
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        try:
            line = self._read_line(conn)
            reply = self.handle(line) if line is not None else (
                f"error: a request is one line of at most {MAX_REQUEST_BYTES} bytes, sent within "
                f"{READ_DEADLINE_S:g} s; {USAGE}")
        except Exception as exc:  # noqa: BLE001 - one request's failure is answered, never raised
            reply = f"error: the request failed: {exc!r}"
        try:
            conn.settimeout(READ_DEADLINE_S)
            conn.sendall(reply.encode() + b"\n")
        except OSError:
            pass

    @staticmethod
    def _read_line(conn: socket.socket) -> str | None:
        """The request's line (ended by a newline, or by the writer closing its side), or None when it is
        longer than :data:`MAX_REQUEST_BYTES` or not all there within :data:`READ_DEADLINE_S`: a part of a
        request is never acted on."""
        data = b""
        deadline = time.monotonic() + READ_DEADLINE_S
        while b"\n" not in data and len(data) <= MAX_REQUEST_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            conn.settimeout(left)
            try:
                chunk = conn.recv(MAX_REQUEST_BYTES + 1)
            except TimeoutError:
                return None
            if not chunk:
                break
            data += chunk
        line = data.split(b"\n", 1)[0]
        return line.decode("utf-8", "replace") if len(line) <= MAX_REQUEST_BYTES else None

    def handle(self, line: str) -> str:
        words = line.split()
        if len(words) != 2 or words[0] not in ("start", "stop", "restart", "status"):
            return f"error: {USAGE}"
        verb, name = words
        if name not in self.services:
            return f"error: no service {name!r}; this environment has {', '.join(sorted(self.services))}"
        if verb == "status":
            return self._status(name)
        if verb in ("stop", "restart"):
            self._stop(name)
            if verb == "stop":
                return f"ok: {name} stopped"
        elif self._running(name):
            return f"ok: {name} is already running (use restart to start it again)"
        return self._start(name)

    def _running(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def _status(self, name: str) -> str:
        proc = self.procs.get(name)
        if proc is None:
            return f"ok: {name} is not started"
        if proc.poll() is None:
            return f"ok: {name} is running (pid {proc.pid}); its log is {SERVICE_DIR}/{name}.log"
        return f"ok: {name} exited with status {proc.returncode}; its log is {SERVICE_DIR}/{name}.log"

    def _start(self, name: str) -> str:
        index, service = self.services[name]
        uid, log_path = service_uid(index), f"{SERVICE_DIR}/{name}.log"
        workspace = self.workspace

        def become() -> None:  # in the child, after the switch to the service's uid: its rights, not root's
            os.chdir(workspace)

        with open(log_path, "wb") as log:
            try:
                proc = subprocess.Popen(service["command"], stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, user=uid, group=uid, extra_groups=[],
                                        env={**CLEAN_ENV, "HOME": workspace}, start_new_session=True,
                                        close_fds=True, preexec_fn=become)
            except (OSError, subprocess.SubprocessError) as exc:
                self._record(name, "could not start", error=str(exc))
                return f"error: {name} could not start: {exc}"
        try:  # under memory pressure the service goes first (its /proc files are root's: it is not dumpable)
            with open(f"/proc/{proc.pid}/oom_score_adj", "w") as adj:
                adj.write("1000")
        except OSError:
            pass  # it exited already
        self.procs[name] = proc
        self.starts[name] = self.starts.get(name, 0) + 1
        self._record(name, "running")
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self._reap()
                return f"error: {name} exited at once with status {proc.returncode}; see {log_path}"
            if _port_open(service["port"]):
                return f"ok: {name} started (pid {proc.pid}) and listens on port {service['port']}"
            time.sleep(0.05)
        return f"ok: {name} started (pid {proc.pid}) but is not listening on port {service['port']} yet; see {log_path}"

    def _stop(self, name: str) -> None:
        """Kill every process of the service's uid (what it forked included) and reap it."""
        from ..confine.container import Container
        from ..confine.processes import Processes

        uid = service_uid(self.services[name][0])
        box = Processes(Container(), uid=uid, applier_uid=uid)
        box.kill_all()
        proc = self.procs.pop(name, None)
        if proc is not None:
            proc.wait(STOP_WAIT_S)  # killed above; a wait past this is answered as this request's failure
        self._record(name, "stopped")

    def _reap(self) -> None:
        for name, proc in list(self.procs.items()):
            if proc.poll() is not None and self.state.get(name) == "running":
                self._record(name, "exited", exit_code=proc.returncode)

    def _record(self, name: str, state: str, **facts: Any) -> None:
        """Keep ``state`` and write it for the verification's details. A write that fails (the agent filled
        the disk) leaves the file as it was: it only explains, and the verification decides by the processes
        alive, so it must not bring the supervisor down and turn the agent's doing into "no verdict"."""
        self.state[name] = state
        try:
            _write_atomic(f"{SERVICE_DIR}/{name}.json",
                          json.dumps({"state": state, "starts": self.starts.get(name, 0), **facts}))
        except OSError:
            pass


def start_supervisor(services: list[dict[str, Any]], workspace: str) -> str | None:
    """Start the detached supervisor (called by the session's setup, as root); returns why not, or None.

    Forked twice so that the container's init adopts it; it holds none of the runner's descriptors (its
    stdout is the setup's protocol stream)."""
    try:
        os.mkdir(SERVICE_DIR, 0o755)
        os.chmod(SERVICE_DIR, 0o755)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(SOCKET)
        os.chmod(SOCKET, 0o666)
        listener.listen(16)
    except OSError as exc:
        return f"the service supervisor's socket {SOCKET} could not be made: {exc}"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the intermediate child and the supervisor run in the container
        code = 0
        try:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.closerange(3, listener.fileno())
                os.closerange(listener.fileno() + 1, 1 << 16)
                _write_atomic(PID_FILE, f"{os.getpid()} {_start_time(os.getpid())}")
                try:
                    Supervisor(services, workspace).serve(listener)
                except BaseException:  # noqa: BLE001 - recorded, so the verification says it was ours
                    _write_atomic(FAILED, traceback.format_exc(limit=8))
                    code = 1
        finally:
            os._exit(code)
    os.waitpid(pid, 0)
    listener.close()
    deadline = time.monotonic() + 5.0
    while not os.path.exists(PID_FILE):
        if time.monotonic() > deadline:
            return "the service supervisor did not start within 5 s"
        time.sleep(0.005)
    return None


def stop_supervisor() -> str | None:
    """Stop the supervisor before the services are checked (SIGTERM: it finishes the request it is serving,
    so no service is left half-started; SIGKILL after :data:`STOP_WAIT_S`). Returns what went wrong that
    was ours (the supervisor failed), or None. A supervisor already gone is not ours to explain: only
    the kernel's OOM killer can end it unasked, and only the agent's processes fill the sandbox's memory."""
    if os.path.exists(FAILED):
        with open(FAILED) as f:
            return f"the service supervisor failed: {f.read()[-1500:]}"
    try:
        with open(PID_FILE) as f:
            pid_text, started = f.read().split()
        pid = int(pid_text)
        pidfd = os.pidfd_open(pid)
    except (OSError, ValueError):
        return None
    try:
        if _start_time(pid) != started or os.stat(f"/proc/{pid}").st_uid != 0:
            return None  # it exited and its pid was reused
        signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        from ..confine.privileges import await_exits

        if not await_exits([pidfd], STOP_WAIT_S):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            await_exits([pidfd], STOP_WAIT_S)
    except OSError:
        pass
    finally:
        os.close(pidfd)
    if os.path.exists(FAILED):
        with open(FAILED) as f:
            return f"the service supervisor failed: {f.read()[-1500:]}"
    return None


def service_state(name: str) -> dict[str, Any]:
    """What the supervisor last recorded of ``name`` (root-owned: the agent cannot write it)."""
    try:
        with open(f"{SERVICE_DIR}/{name}.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"state": "unknown"}


def log_tail(name: str, size: int = 600) -> str:
    try:
        with open(f"{SERVICE_DIR}/{name}.log", "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def http_get(port: int, path: str, timeout_s: float) -> dict[str, Any]:
    """``GET path`` on the loopback ``port`` within ``timeout_s`` in all (a service that trickles its answer
    cannot stretch it); returns {"status", "body", "error"}."""
    deadline = time.monotonic() + timeout_s
    data = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as conn:
            conn.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            while len(data) < 1 << 16:
                left = deadline - time.monotonic()
                if left <= 0:
                    return {"status": None, "body": "", "error": f"no complete answer within {timeout_s:g} s"}
                conn.settimeout(left)
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        return {"status": None, "body": "", "error": f"{type(exc).__name__}: {exc}"}
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    try:
        status = int(status_line[1]) if status_line[:1] and status_line[0].startswith(b"HTTP/") else None
    except (IndexError, ValueError):
        status = None
    error = None if status is not None else "the answer is not HTTP"
    return {"status": status, "body": body.decode("utf-8", "replace")[:BODY_CHARS], "error": error}


def health_main(argv: list[str]) -> int:
    """The health check, run as the verifier's uid: every service's ``GET``, as one JSON line."""
    checks = json.loads(argv[0])
    print(CHECKING, flush=True)
    found = {c["name"]: http_get(c["port"], c["health_path"], c["check_timeout_s"]) for c in checks}
    print(json.dumps(found), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``deepgym-service start|stop|restart|status NAME``: one request to the supervisor, its answer printed."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["health"] and len(argv) == 2:
        return health_main(argv[1:])
    if len(argv) != 2:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(START_WAIT_S + STOP_WAIT_S + 5)
            conn.connect(SOCKET)
            conn.sendall(" ".join(argv).encode() + b"\n")
            reply = b""
            while chunk := conn.recv(4096):
                reply += chunk
    except OSError as exc:
        print(f"deepgym-service: the supervisor did not answer: {exc}", file=sys.stderr)
        return 1
    text = reply.decode("utf-8", "replace").strip()
    print(text)
    return 0 if text.startswith("ok:") else 1


if __name__ == "__main__":
    sys.exit(main())
