"""The verifier's network (issue 26, item 2): a task whose ``[verifier] network_mode = "public"`` gets a network
for test.sh alone, attached once the agent is killed and proved gone and detached before the reward is read; the
agent works without one all episode. The network is the engine's bridge, and the "internet" a tiny HTTP server
this test runs on the host, bound to the bridge's gateway address."""

from __future__ import annotations

import dataclasses
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import docker
import pytest

from deepgym.environments import load_environment, sandbox_spec
from deepgym.images import image_name
from deepgym.sandbox import ExecOptions
from deepgym.session import TerminalSession
from support import HARBOR_TASKS, harbor_environments

pytestmark = pytest.mark.docker
ANSWER = "the verifier reached the network"


class Answer(BaseHTTPRequestHandler):
    """Answers every GET with :data:`ANSWER`, counting them."""

    served: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Answer.served.append(self.path)
        body = ANSWER.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """The server's address, as a container on the engine's bridge reaches the host."""
    gateway = docker.APIClient().inspect_network("bridge")["IPAM"]["Config"][0]["Gateway"]
    server = ThreadingHTTPServer((gateway, 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{gateway}:{server.server_address[1]}/answer"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def gym() -> Iterator[object]:
    """A docker client without canaries: this task's test.sh scores the network, not the agent, so its known-wrong
    sequences pass too (which a canary rightly calls an unhealthy image), and the canaries' own episodes would
    add their fetches to the server's count."""
    from deepgym import DeepGym

    with DeepGym(mode="docker", canaries=False) as client:
        yield client


FETCH = "python3 -c \"import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\""


@pytest.fixture(scope="module")
def online(tmp_path_factory: pytest.TempPathFactory, url: str) -> Iterator[str]:
    """hello-world whose test.sh scores 1 only when it can fetch :data:`ANSWER` from ``url``."""
    task = tmp_path_factory.mktemp("net") / "net-fetch"
    shutil.copytree(HARBOR_TASKS / "hello-world", task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace(
        "[verifier]\n", f'[verifier]\nnetwork_mode = "public"\nenv = {{ ANSWER_URL = "{url}" }}\n'))
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        f"got=$({FETCH} \"$ANSWER_URL\")\n"
        f"if [ \"$got\" = \"{ANSWER}\" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")
    with harbor_environments(task.parent / "envs", task) as names:
        yield names[0]


def test_only_the_verifier_reaches_the_network_and_only_while_it_verifies(gym, online: str, url: str) -> None:
    Answer.served.clear()
    with gym.session(online) as session:
        assert isinstance(session, TerminalSession)
        session.start()
        tried = session.step(f'{FETCH} "{url}"; echo "status $?"; cat /proc/net/dev').observation.text
        assert ANSWER not in tried and "Network is unreachable" in tried and "status 1" in tried
        assert "eth0" not in tried  # no interface but loopback while the agent works
        assert Answer.served == []
        verdict = session.score()
    assert (verdict.score, verdict.passed, verdict.error_type) == (1.0, True, None), verdict.details
    assert Answer.served == ["/answer"]  # test.sh's fetch, the only one that arrived


def test_the_docker_sandbox_takes_the_network_only_while_attached(gym, online: str, url: str) -> None:
    image = gym.provider.image(image_name(online)).id
    box = gym.provider.create(dataclasses.replace(sandbox_spec(load_environment(online), image, lifetime_s=120),
                                                  network_later=True))
    fetch = ["bash", "-c", f'{FETCH} "{url}"']
    try:
        assert ANSWER not in box.exec(fetch, ExecOptions(timeout_s=30)).stdout.decode()
        box.set_network(True)
        assert box.exec(fetch, ExecOptions(timeout_s=30)).stdout.decode().strip() == ANSWER
        box.set_network(False)
        assert ANSWER not in box.exec(fetch, ExecOptions(timeout_s=30)).stdout.decode()
    finally:
        box.close()


def test_an_agents_process_waiting_for_the_network_is_gone_before_it_comes(gym, online: str, url: str) -> None:
    """A loop the agent leaves behind, retrying the server, is killed and proved gone before the network is
    attached: only test.sh's request arrives. A tampering plant ends the verification before any network."""
    Answer.served.clear()
    loop = f'(while true; do {FETCH} "{url}" >> /tmp/got 2>&1; sleep 0.1; done) > /dev/null 2>&1 &'
    with gym.session(online) as session:
        session.start()
        session.step(loop)
        verdict = session.score()
    assert (verdict.score, verdict.error_type) == (1.0, None), verdict.details
    assert Answer.served == ["/answer"]
    Answer.served.clear()
    with gym.session(online) as session:
        session.start()
        session.step(f"{loop} echo 'import os' > /tmp/evil.pth")
        verdict = session.score()
    assert (verdict.score, verdict.error_type) == (0.0, "test_infra_tampering"), verdict.details
    assert Answer.served == []
