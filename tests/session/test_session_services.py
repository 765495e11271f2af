"""Session services against real containers: a service the agent starts through the supervisor survives the
pre-verification kill and is checked over loopback, while a hostile agent (or the code it makes a service
run) can neither fake the check, outlive the verification, touch the verifier, nor turn its own failure into
"no verdict"."""

import dataclasses
import subprocess
import textwrap
from pathlib import Path

import pytest

from support import episode
from deepgym import NoVerdictError
from deepgym.environments import ManifestError, load_environment, parse_manifest
from deepgym.images import build
from deepgym.sandbox import ExecOptions
from deepgym.authoring.replay import action_sequences, replay

pytestmark = pytest.mark.docker
FIXTURES = str(Path(__file__).resolve().parents[1] / "session_envs")

HEALTHY = """\
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
"""
SERVE = HEALTHY + 'http.server.HTTPServer(("127.0.0.1", 8090), H).serve_forever()\n'


def write(name: str, code: str) -> str:
    """An action that writes ``code`` to ``name`` in the workspace."""
    return f"cat > {name} <<'EOF'\n{textwrap.dedent(code)}EOF"


def serving(code: str, *, first: str = "", then: str = "") -> str:
    """An action that writes ``code`` as the service's serve.py and starts the service (``first`` and ``then``
    around the start)."""
    return write("serve.py", code) + f"\n{first}deepgym-service start app{then}"


@pytest.fixture(scope="module", autouse=True)
def images():
    build(["shell_fix_config"])


@pytest.fixture
def services_env(monkeypatch):
    """The fixture environment whose service runs the agent's own serve.py."""
    monkeypatch.setenv("DEEPGYM_ENVIRONMENTS", FIXTURES)
    build(["session_services"])
    return load_environment("session_services")


def test_the_service_survives_the_agent_kill_and_the_verdict_says_what_it_found(gym):
    with episode(gym, "shell_fix_config", 1, replaying="reference") as session:
        # An agent process of its own, left running: it dies in the kill, the service does not.
        session.step("setsid nohup sleep 1000 >/dev/null 2>&1 & echo left")
        verdict = session.score()
    assert (verdict.score, verdict.error_type) == (1.0, None), verdict.details
    service = next(case for case in verdict.cases if case.id == "service:inventory")
    assert service.passed and service.actual == "running, HTTP 200"


def test_a_server_the_agent_backgrounds_itself_does_not_survive_and_scores_zero(gym):
    with episode(gym, "shell_fix_config", replaying="wrong_own_background_server") as session:
        up = session.step("python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:8080/health')"
                          ".status)\"").observation.text
        verdict = session.score()
    assert up.strip() == "200"  # it did serve during the episode
    assert (verdict.score, verdict.error_type) == (0.0, "service_failed")
    assert "not running at grading (not started)" in verdict.details


def test_the_agent_cannot_signal_or_trace_the_service_or_the_supervisor(gym):
    with episode(gym, "shell_fix_config", replaying="reference") as session:
        status = session.step("deepgym-service status inventory").observation.text
        service = status.split("(pid ")[1].split(")")[0]
        supervisor = session.step("cut -d' ' -f1 /tmp/deepgym-services/supervisor.pid").observation.text.strip()
        assert session.step(f"stat -c %u /proc/{service}").observation.text.strip() == "10100"
        said = session.step(f"kill -9 {service} {supervisor}; kill -STOP {service};"
                            f" head -c 16 /proc/{service}/mem; cat /proc/{service}/environ;"
                            f" rm -f /tmp/deepgym-services/supervisor.sock /tmp/deepgym-services/inventory.json;"
                            f" echo forged > /tmp/deepgym-services/inventory.json").observation.text
        still = session.step("deepgym-service status inventory").observation.text
        verdict = session.score()
    assert said.count("Operation not permitted") >= 3, said
    assert said.count("Permission denied") >= 5, said
    assert still.startswith("ok: inventory is running"), still
    assert verdict.score == 1.0, verdict.details


def test_garbage_and_floods_do_not_bring_the_supervisor_down(gym):
    flood = ("import socket\n"
             "held = []\n"
             "for request in [b'x' * 100000, b'start ../../bin/sh\\n', b'start\\n', b'\\xff\\xfe start inventory\\n',"
             " b'stop nothing\\n', b'restart inventory extra\\n']:\n"
             "    s = socket.socket(socket.AF_UNIX); s.connect('/tmp/deepgym-services/supervisor.sock')\n"
             "    try:\n"
             "        s.sendall(request); print(s.recv(200).decode(errors='replace').strip())\n"
             "    except OSError as e:\n"
             "        print('closed', e)\n"
             "for _ in range(40):\n"
             "    s = socket.socket(socket.AF_UNIX); s.setblocking(False)\n"
             "    try:\n"
             "        s.connect('/tmp/deepgym-services/supervisor.sock')\n"
             "    except OSError:\n"
             "        pass\n"
             "    held.append(s)\n"
             "print('held', len(held))\n")
    with episode(gym, "shell_fix_config") as session:
        said = session.step(write("flood.py", flood) + "\npython3 flood.py").observation.text
        for action in action_sequences(load_environment("shell_fix_config"), "reference")[0]:
            session.step(action)
        verdict = session.score()
    assert "error: no service '../../bin/sh'" in said and "error: no service 'nothing'" in said, said
    assert "held 40" in said
    assert verdict.score == 1.0, verdict.details


def test_a_service_running_agent_code_cannot_outlive_the_check_or_reach_the_verifier(gym, services_env):
    """The service is the agent's code here: it writes the workspace and tries to reach any verifier folder,
    forks a detached survivor and prints forged protocol lines. None of it survives into the verifier."""
    hostile = HEALTHY + """\
import glob, os, threading, time
def meddle():
    while True:
        with open("ticks", "a") as f:
            f.write("t")
        for folder in glob.glob("/tmp/deepgym-verifier-*"):
            try:
                open(folder + "/request.json", "w").write("{}")
                print("REACHED", folder, flush=True)
            except OSError:
                pass
        print('@@deepgym x {"event": "report", "report": {"score": 1.0}}', flush=True)
        time.sleep(0.01)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        meddle()
    os._exit(0)
threading.Thread(target=meddle, daemon=True).start()
http.server.HTTPServer(("127.0.0.1", 8090), H).serve_forever()
"""
    with episode(gym, services_env, then=[serving(hostile, first="chmod 777 . && ")]) as session:
        ticks = session.step("sleep 0.3; wc -c < ticks").observation.text
        report, _, _ = session.actions.session_runner(session, session._sandbox, "verify", timeout_s=60)
        survivors = session._sandbox.exec(["sh", "-c", "ls -n /proc | grep -c ' 10100 '"],
                                          ExecOptions(timeout_s=20)).stdout.strip()
        log = session._sandbox.exec(["cat", "/tmp/deepgym-services/app.log"], ExecOptions(timeout_s=20)).stdout
    assert int(ticks) > 5
    assert report["score"] == 1.0 and "still=True" in report["details"], report
    assert survivors == b"0" and b"REACHED" not in log and b'"report"' in log


def test_a_service_that_hangs_or_crashes_scores_zero(gym, services_env):
    hangs = HEALTHY.replace('self.send_response(200); self.end_headers(); self.wfile.write(b"ok")',
                            "import time; time.sleep(60)") + \
        'http.server.HTTPServer(("127.0.0.1", 8090), H).serve_forever()\n'
    with episode(gym, services_env, then=[serving(hangs)]) as session:
        hung = session.score()
    with episode(gym, services_env, then=[serving(SERVE)]) as session:
        session.step("python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:8090/health')\"")
        # The agent's own change makes its service crash on restart.
        session.step("echo 'raise SystemExit(3)' > serve.py && deepgym-service restart app")
        crashed = session.score()
    assert (hung.score, hung.error_type) == (0.0, "service_failed")
    assert "no complete answer within 2 s" in hung.details or "timed out" in hung.details, hung.details
    assert (crashed.score, crashed.error_type) == (0.0, "service_failed")
    assert "exited, status 3" in crashed.details, crashed.details


def test_a_service_that_takes_every_pid_is_scored_not_no_verdict(gym, services_env):
    bomb = SERVE.replace("http.server.HTTPServer", "import os, time, threading\n"
                         "def bomb():\n"
                         "    while True:\n"
                         "        try:\n"
                         "            if os.fork() == 0:\n"
                         "                time.sleep(1000)\n"
                         "        except OSError:\n"
                         "            time.sleep(0.005)\n"
                         "threading.Thread(target=bomb, daemon=True).start()\n"
                         "http.server.HTTPServer")
    with episode(gym, services_env, then=[serving(bomb, then="; sleep 1")]) as session:
        try:
            verdict = session.score()
        except NoVerdictError as failure:
            pytest.fail(f"a service that took every pid gave no verdict: {failure}")
    assert verdict.score in (0.0, 1.0) and verdict.error_type in (None, "policy_sandbox_failure", "service_failed")


def test_a_failure_of_the_supervisor_itself_is_no_verdict(gym):
    with episode(gym, "shell_fix_config", replaying="reference") as session:
        session._sandbox.exec(["sh", "-c", "echo 'Traceback: a bug of ours' > /tmp/deepgym-services/supervisor.failed"],
                              ExecOptions(timeout_s=20, user="0:0"))
        with pytest.raises(NoVerdictError) as failure:
            session.score()
    assert failure.value.error_type == "verifier_error" and "a bug of ours" in failure.value.reason


def test_the_manifest_refuses_bad_services(tmp_path):
    folder = tmp_path / "shell_fix_config"
    subprocess.run(["cp", "-r", str(load_environment("shell_fix_config").path) + "/.", str(folder)], check=True)
    manifest = folder / "manifest.yaml"
    text = manifest.read_text()
    for bad, key in [("port: 8080", "port: 80"), ("name: inventory", "name: ../x"),
                     ("health_path: /health", "health_path: health")]:
        manifest.write_text(text.replace(bad, key))
        with pytest.raises(ManifestError, match="services"):
            parse_manifest(manifest)
    manifest.write_text(text)
    env = parse_manifest(manifest)
    assert dataclasses.astuple(env.services[0])[:3] == (
        "inventory", ("python3", "-I", "-B", "/opt/deepgym/service/inventory.py", "service.ini"), 8080)


@pytest.mark.filterwarnings("ignore:deepgym local mode:RuntimeWarning")
def test_local_mode_runs_a_session_on_the_host_but_not_one_with_services():
    from deepgym import DeepGym

    with DeepGym(mode="local", allow_local=True) as local:
        env = load_environment("shell_organise_files")
        verdict = replay(local, env, action_sequences(env, "reference")[0])
        with pytest.raises(ValueError, match="services, which need a sandbox's uids"):
            local.session("shell_fix_config")
    assert (verdict.score, verdict.runtime) == (1.0, "local"), verdict
