"""Fuzzing the session services supervisor (deepgym/runner/episode/services.py), whose socket takes whatever the agent
writes. Any request must be answered with one ``ok:`` or ``error:`` line, never crash or hang the supervisor,
and never start or stop anything but a declared service, by a well-formed request naming it.

In-process and derandomized: the supervisor's own code with its process work (``_start``, ``_stop``, which
spawn and kill by uid) replaced by a record of what it was asked, so no process of a service uid is touched on
this host (other sessions' containers run such uids). The serve loop runs in a forked child, on a socket in a
temporary folder. The live sessions of the worst inputs are in tests/session/test_session_services.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepgym.runner.episode import services

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=300,
                suppress_health_check=list(HealthCheck))
DECLARED = ["web", "web2", "db"]
VERBS = ["start", "stop", "restart", "status"]


class Recording(services.Supervisor):
    """The supervisor with its process work recorded instead of done."""

    def __init__(self) -> None:
        super().__init__([{"name": name, "command": ["true"], "port": 8080 + i} for i, name in enumerate(DECLARED)],
                         "/nonexistent")
        self.asked: list[tuple[str, str]] = []

    def _start(self, name: str) -> str:
        self.asked.append(("start", name))
        return f"ok: {name} started"

    def _stop(self, name: str) -> None:
        self.asked.append(("stop", name))


@pytest.fixture(autouse=True)
def service_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(services, "SERVICE_DIR", str(tmp_path))
    monkeypatch.setattr(services, "READ_DEADLINE_S", 0.01)
    return tmp_path


def _expected(line: str) -> list[tuple[str, str]]:
    """What a request line may make the supervisor do: a verb and a declared name, split on whitespace."""
    words = line.split()
    if len(words) != 2 or words[0] not in VERBS or words[1] not in DECLARED:
        return []
    verb, name = words
    return {"start": [("start", name)], "stop": [("stop", name)], "restart": [("stop", name), ("start", name)],
            "status": []}[verb]


def _one_answer(reply: str) -> None:
    assert reply.startswith(("ok: ", "error: ")), reply
    assert "\n" not in reply and len(reply) < 1000, reply
    reply.encode("utf-8")


# Requests as an agent might write them: the verbs and names, paths, flags, look-alikes and control
# characters, in any number and with any whitespace between them.
WORDS = [*VERBS, *DECLARED, "START", "Web", "../web", "web/", "/bin/sh", "-rf", "--help", "web\x00", "wеb", "ｗｅｂ",
         "web;id", "$(id)", "*", "", "\u212a", "status\u00a0web"]
SPACES = [" ", "  ", "\t", "\r", "\x0b", "\x0c", "\x1c", "\u00a0", "\u2028", "\u3000", ""]
lines = st.one_of(
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SPACES)), max_size=5).map(
        lambda pairs: "".join(w + s for w, s in pairs)),
    st.text(st.characters(exclude_categories=()), max_size=80))


@FUZZ
@given(line=lines)
def test_any_request_line_is_answered_and_only_starts_a_declared_service(line: str) -> None:
    supervisor = Recording()
    reply = supervisor.handle(line)
    _one_answer(reply)
    assert supervisor.asked == _expected(line), (line, reply)


chunks = st.lists(st.one_of(st.binary(max_size=80), st.sampled_from(
    [b"start web\n", b"start web", b"\n", b"\xff\xfestart web\n", b"status db\r\n", b"x" * 300, b"start web2\x00\n",
     "stop wéb\n".encode(), b"restart db extra\n", b"\xed\xa0\x80", b"status web\nstart db\n"])), max_size=6)


@settings(FUZZ, max_examples=200)
@given(parts=chunks, half_close=st.booleans())
def test_any_bytes_on_a_connection_get_one_answer_line(parts: list[bytes], half_close: bool) -> None:
    """Arbitrary bytes, partial lines, overlong ones, invalid UTF-8, a writer that stops without closing or
    closes its side: one answer line, and the supervisor acts on a whole first line of at most 256 bytes alone."""
    supervisor = Recording()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        data = b"".join(parts)
        theirs.sendall(data)
        if half_close:
            theirs.shutdown(socket.SHUT_WR)
        supervisor._answer(ours)
        ours.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := theirs.recv(4096):
            reply += chunk
    assert reply.endswith(b"\n") and reply.count(b"\n") == 1, reply
    _one_answer(reply[:-1].decode())
    if b"\n" in data[: services.MAX_REQUEST_BYTES + 1] or (half_close and len(data) <= services.MAX_REQUEST_BYTES):
        first = data.split(b"\n", 1)[0].decode("utf-8", "replace")
        assert supervisor.asked == _expected(first), (data, reply)
    else:  # no whole line within the size and the deadline: a part of a request is never acted on
        assert supervisor.asked == [] and reply.startswith(b"error: a request is one line of at most 256"), reply


def test_a_state_file_that_cannot_be_written_does_not_bring_the_supervisor_down(service_dir, monkeypatch) -> None:
    """The state files only explain: a write that fails (ENOSPC in the agent's /tmp) is not raised from the
    serve loop's reaping, where it ended the supervisor and, recorded as its failure, became "no verdict"."""
    supervisor = Recording()
    proc = subprocess.Popen(["true"])
    proc.wait()
    supervisor.procs["web"], supervisor.state["web"] = proc, "running"
    monkeypatch.setattr(services, "SERVICE_DIR", str(service_dir / "gone"))
    supervisor._reap()
    assert supervisor.state["web"] == "exited"


def _request(path: str, data: bytes, timeout_s: float = 10.0) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout_s)
        conn.connect(path)
        conn.sendall(data)
        reply = b""
        while chunk := conn.recv(4096):
            reply += chunk
    return reply.decode()


def test_the_serve_loop_outlasts_a_crowd_of_hostile_connections(service_dir: Path) -> None:
    """Many connections at once: ones that never write, write a byte at a time, close at once, half-close,
    send megabytes or garbage. The supervisor keeps answering, starts only what a whole request named, and
    stops on SIGTERM."""
    path = str(service_dir / "supervisor.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    log = service_dir / "asked"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the supervisor, in the child
        try:
            class Logged(Recording):
                def _start(self, name: str) -> str:
                    with open(log, "a") as f:
                        f.write(f"start {name}\n")
                    return f"ok: {name} started"

            Logged().serve(listener)
        finally:
            os._exit(0)
    listener.close()

    def hostile(kind: int) -> None:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(5)
                conn.connect(path)
                if kind == 0:
                    time.sleep(0.3)  # never writes
                elif kind == 1:
                    for byte in b"start web\n":
                        conn.send(bytes([byte]))
                        time.sleep(0.002)  # slower than the read deadline in all
                elif kind == 2:
                    conn.sendall(b"\xff" * (1 << 20))
                elif kind == 3:
                    conn.shutdown(socket.SHUT_WR)
                else:
                    conn.sendall(b"restart ../db\n")
                conn.recv(10)
        except OSError:
            pass

    try:
        crowd = [threading.Thread(target=hostile, args=(i % 5,)) for i in range(40)]
        for thread in crowd:
            thread.start()
        for thread in crowd:
            thread.join(30)
        assert _request(path, b"status db\n") == "ok: db is not started\n"
        assert _request(path, b"start web2\n") == "ok: web2 started\n"
        os.kill(pid, signal.SIGTERM)
        # No request is left in flight, so it stops at its next accept timeout (0.2 s); 30 s is the backstop
        # that tells "stops" from "hangs" on a loaded host.
        deadline, (done, status) = time.monotonic() + 30, os.waitpid(pid, os.WNOHANG)
        while not done and time.monotonic() < deadline:
            time.sleep(0.05)
            done, status = os.waitpid(pid, os.WNOHANG)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    assert done, "the supervisor did not stop within 30 s of SIGTERM"
    assert os.waitstatus_to_exitcode(status) == 0
    assert set(log.read_text().splitlines()) <= {"start web", "start web2"}, log.read_text()
    assert "start web2" in log.read_text().splitlines()
    assert not (service_dir / "supervisor.failed").exists()


answers = st.lists(st.one_of(st.binary(max_size=60), st.sampled_from(
    [b"HTTP/1.0 200 OK\r\n\r\nok", b"HTTP/1.1 ", b"200", b"\r\n\r\n", b"HTTP/1.1 2_00 x\r\n\r\n",
     b"HTTP/1.1 " + b"9" * 5000 + b"\r\n\r\n", b"HTTP/9 -1\r\n", b"\xff\xfe\x00", b"\x1b[2J" * 40,
     b"x" * 70000])), max_size=5)


@settings(FUZZ, max_examples=60)
@given(parts=answers, close_early=st.booleans())
def test_any_health_answer_is_a_status_or_an_error(parts: list[bytes], close_early: bool) -> None:
    """The health check reads what a service (the agent's code, perhaps) answers: any bytes give a status or
    an error, a bounded body, and a result the check's JSON line can carry."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                if not close_early:
                    conn.recv(4096)
                for part in parts:
                    try:
                        conn.sendall(part)
                    except OSError:
                        return

        thread = threading.Thread(target=serve)
        thread.start()
        found = services.http_get(port, "/health", 2.0)
        thread.join(5)
    assert set(found) == {"status", "body", "error"}
    assert (found["status"] is None) != (found["error"] is None), found
    assert found["status"] is None or type(found["status"]) is int
    assert isinstance(found["body"], str) and len(found["body"]) <= services.BODY_CHARS
    json.dumps(found, allow_nan=False).encode("utf-8")


# ---------------------------------------------------------------------------------------------- live sessions

SERVE = """\
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", 8090), H).serve_forever()
"""
# The worst requests found above, as the agent's own client writes them to the live supervisor.
CLIENT = """\
import socket, time
def ask(*pieces, pause=0.0):
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(20)
        s.connect("/tmp/deepgym-services/supervisor.sock")
        try:
            for piece in pieces:
                s.sendall(piece)
                time.sleep(pause)
        except BrokenPipeError:
            pass  # answered and closed before the rest came
        print(repr(s.recv(400).decode(errors="replace")))
ask(b"start ap", b"p\\n", pause=1.5)
ask(b"start app" + b" " * 300 + b"\\n")
ask("start \\u0430pp\\n".encode())
ask(b"start app\\x00\\n")
ask(b"status app\\n")
"""


def _write(name: str, code: str) -> str:
    return f"cat > {name} <<'EOF'\n{code}EOF\n"


@pytest.fixture
def services_env(monkeypatch):
    from deepgym.environments import load_environment
    from deepgym.images import build

    monkeypatch.setenv("DEEPGYM_ENVIRONMENTS", str(Path(__file__).resolve().parents[1] / "session_envs"))
    build(["session_services"])
    return load_environment("session_services")


@pytest.mark.docker
def test_a_live_supervisor_acts_on_no_part_of_a_request(gym, services_env):
    """A request trickled past the deadline, one padded past 256 bytes, a look-alike name and a NUL: each
    refused, nothing started; the agent's proper request then works and the service is graded."""
    with gym.session(services_env) as session:
        session.start()
        said = session.step(_write("serve.py", SERVE) + _write("client.py", CLIENT) + "python3 client.py"
                            ).observation.text.splitlines()
        started = session.step("deepgym-service start app").observation.text
        verdict = session.score()
    assert said[0].startswith("'error: a request is one line of at most 256 bytes, sent within 1 s"), said
    assert said[1].startswith("'error: a request is one line of at most 256 bytes"), said
    assert "error: no service" in said[2] and "error: no service" in said[3] and "x00" in said[3], said
    assert said[4] == "'ok: app is not started\\n'", said
    assert started.startswith("ok: app started"), started
    assert verdict.score == 1.0, verdict.details


@pytest.mark.docker
def test_a_service_that_exits_while_the_agent_fills_tmp_leaves_the_supervisor_up(gym, services_env):
    """The agent fills /tmp (the supervisor's state files live there too) just as its service exits: the
    supervisor records what it can and keeps serving, so the agent's next start works and the episode is
    scored. Before, the failed state write ended the supervisor (and, had its failure record been written,
    would have been "no verdict")."""
    exits = "import time\ntime.sleep(4)\nraise SystemExit(3)\n"
    with gym.session(services_env) as session:
        session.start()
        first = session.step(_write("serve.py", exits) + "deepgym-service start app").observation.text
        full = session.step("dd if=/dev/zero of=/tmp/fill bs=1M 2>/dev/null; df -k /tmp | awk 'NR == 2 {print \"avail\", $4}'; sleep 3; "
                            "deepgym-service status app; rm -f /tmp/fill").observation.text
        again = session.step(_write("serve.py", SERVE) + "deepgym-service start app").observation.text
        verdict = session.score()
    assert "not listening on port 8090 yet" in first, first
    assert "avail 0\n" in full and "ok: app exited with status 3" in full, full
    assert again.startswith("ok: app started"), again
    assert verdict.score == 1.0, verdict.details
