"""A real Ray cluster of two nodes on this machine, for the tests marked ``ray``: node ``a`` (the head) judges on
this machine's Docker engine, node ``b`` on the second engine (scripts/second-engine.sh), each offering two units
of ``deepgym_sandbox`` and two of a resource of its own (``deepgym_a``, ``deepgym_b``) so that a test can send
samples to one node. Every Ray port is chosen free, never Ray's defaults, and every process of the cluster is
found by the cluster's own temp folder and ended by its pid, so nothing else on the machine is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support import ROOT

UNITS = 2
PORT_OPTIONS = ("--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
                "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Node:
    name: str
    docker_host: str
    process: subprocess.Popen
    id: str = ""


@dataclass
class Cluster:
    address: str
    temp: Path
    nodes: dict[str, Node] = field(default_factory=dict)

    def pids(self, node: Node | None = None) -> list[int]:
        """Our cluster's processes (their command lines name its temp folder), or one node's: its ``ray start``
        and what runs under its raylet."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(self.temp) in argv and (node is None or f"deepgym_{node.name}" in argv or
                                           self._under(int(entry.name), node)):
                found.append(int(entry.name))
        return found

    def _under(self, pid: int, node: Node) -> bool:
        """Whether ``pid`` descends from the raylet of ``node`` (found by its node manager port)."""
        raylets = {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and self._is_raylet(p, node)}
        while pid > 1:
            if pid in raylets:
                return True
            try:
                pid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return False
        return False

    def _is_raylet(self, proc: Path, node: Node) -> bool:
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return False
        return "raylet" in argv and f"deepgym_{node.name}" in argv

    def kill(self, node: Node) -> list[int]:
        """SIGKILL every process of ``node`` at once: the node dies as a machine would."""
        pids = self.pids(node)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids


def start(node: str, docker_host: str, temp: Path, extra: list[str]) -> subprocess.Popen:
    """``ray start --block`` of node ``node`` judging on ``docker_host``, in a session of its own."""
    resources = json.dumps({"deepgym_sandbox": UNITS, f"deepgym_{node}": UNITS})
    low = random.randrange(30000, 60000, 100)
    argv = [str(Path(sys.executable).parent / "ray"), "start", "--block", "--node-ip-address=127.0.0.1",
            f"--resources={resources}", "--num-cpus=1", "--disable-usage-stats", f"--temp-dir={temp}",
            f"--min-worker-port={low}", f"--max-worker-port={low + 99}",
            *[f"{option}={free_port()}" for option in PORT_OPTIONS], *extra]
    environment = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    environment.update(DOCKER_HOST=docker_host, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    log = open(temp.parent / f"ray-start-{node}.log", "w")  # noqa: SIM115 - the process keeps it until its end
    return subprocess.Popen(argv, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def owned_by(pids: set[int]) -> list[str]:
    """The deepgym containers on this machine's engine whose owner (label ``deepgym.owner``,
    host/pid-namespace/pid/start) was one of ``pids``."""
    from deepgym.sandbox.docker import OWNER_LABEL

    listed = subprocess.run(["docker", "ps", "-a", "--filter", "label=deepgym", "--format",
                             f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}'], capture_output=True, text=True).stdout
    found = []
    for line in listed.splitlines():
        container, _, owner = line.partition(" ")
        parts = owner.split("/")
        if len(parts) >= 3 and parts[2].isdigit() and int(parts[2]) in pids:
            found.append(container)
    return found


def wait_for_nodes(ray, count: int, timeout_s: float = 120.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [node for node in ray.nodes() if node.get("Alive")]
        if len(alive) >= count:
            return alive
        time.sleep(0.5)
    raise AssertionError(f"the Ray cluster has {len(alive)} live node(s), not {count}")


@pytest.fixture(scope="session")
def ray_cluster(second_engine):
    """The two-node cluster, with the test process connected to it as a driver (no node of its own)."""
    ray = pytest.importorskip("ray")
    from deepgym.images import image_name
    from support import ensure_images

    ensure_images("coin_change", "two_sum")
    second_engine.load(image_name("coin_change"))  # two_sum stays on the first engine only
    folder = Path(tempfile.mkdtemp(prefix="dgray-"))
    temp = folder / "t"
    temp.mkdir()
    port = free_port()
    cluster = Cluster(f"127.0.0.1:{port}", temp)
    try:
        head = start("a", "unix:///var/run/docker.sock", temp, ["--head", f"--port={port}", "--include-dashboard=false",
                                                                f"--ray-client-server-port={free_port()}"])
        cluster.nodes["a"] = Node("a", "unix:///var/run/docker.sock", head)
        for _ in range(240):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.25)
        node_b = start("b", second_engine.host, temp, [f"--address={cluster.address}"])
        cluster.nodes["b"] = Node("b", second_engine.host, node_b)
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        for node in wait_for_nodes(ray, 2):
            for name in ("a", "b"):
                if node["Resources"].get(f"deepgym_{name}"):
                    cluster.nodes[name].id = node["NodeID"]
        yield cluster
    finally:
        ours = set(cluster.pids())
        if ray.is_initialized():
            ray.shutdown()
        for node in cluster.nodes.values():
            if node.process.poll() is None:
                os.killpg(node.process.pid, signal.SIGTERM)
        for node in cluster.nodes.values():
            try:
                node.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(node.process.pid, signal.SIGKILL)
        for pid in cluster.pids():  # anything of ours that outlived its ray start
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # The nodes' workers died with their ready containers (docker's prewarm), which a next provider on
        # that engine would reap; here the session's leak checks would find them first.
        stale = second_engine.docker("ps", "-aq", "--filter", "label=deepgym").stdout.split()
        if stale:
            second_engine.docker("rm", "-f", *stale)
        leftovers = owned_by(ours)
        if leftovers:
            subprocess.run(["docker", "rm", "-f", *leftovers], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def caller(ray_cluster, monkeypatch):
    """The caller's environment: the cluster's address, and a DOCKER_HOST that points nowhere."""
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    return ray_cluster
